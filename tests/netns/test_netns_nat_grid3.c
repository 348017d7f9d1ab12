/* SPDX-License-Identifier: MIT */
/*
 * test_netns_nat_grid3.c - exact means over d = 3 grid rounds behind NAT:
 * the topology of test_netns_nat (8 peers, 2..5 behind one masquerading
 * router, 6 and 7 behind another, RTT 50 ms), so only peers 0 and 1 are
 * dialable, on a 2 x 2 x 2 grid (group_size 2, grid_dims 3). Every round
 * has 4 lines of 2, and at most 2 of them hold a dialable member: each
 * round needs merged lines (docs/DESIGN.md, "Exact means over d > 1
 * rounds behind NAT"). The first and last round meet at one matchmaker;
 * the middle round (k = 1) meets by the coordinate averaged in round 1,
 * at two matchmakers of 2 lines each, so each needs a dialable member:
 * the matchmaker of round 1 gives the dialable members of its close
 * different next coordinates (peer 0 takes 0, peer 1 takes 1).
 *
 * Config: group_size 2, grid_dims 3, positions {0, 2, 1, 3, 4, 5, 6, 7}
 * (peers 0 and 1 on different lines of round 1), matchmaking_ms 3000,
 * peer_timeout_ms 2000, round_timeout_ms 15000; vectors of 2^14 floats.
 * Identities random.
 *
 * Pass rule: all 8 see each other within 60 s; after three rounds from
 * fresh vectors every peer holds the weighted mean of the 8 (1e-6
 * relative). Without the merge the lines of two NAT'd peers cannot
 * average (no member reduces) and the test fails.
 */
#include <stdio.h>
#include <stdlib.h>

#include "swarm.h"

#define N 8
#define COUNT (1u << 14)

int main(void) {
    nn_open(N);
    it_peer_cfg_t cfg;
    int begun = nn_nat_begin("nn-natg3", 2, 3, &cfg);
    if (begun != 0)
        return begun;
    nn_swarm_t s;
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return 1;
    const int64_t pos[N] = {0, 2, 1, 3, 4, 5, 6, 7};
    if (nn_nat_start_grid(&s, pos) != 0)
        return nn_swarm_end(&s);

    double dev = 0;
    for (int r = 1; r <= 3; r++) {
        uint64_t ms = nn_round(&s, NULL, r == 1 ? 5000 : 0);
        nn_print_round(&s, "natgrid3", r);
        dev = nn_dev_from_mean(&s, NULL, NULL);
        printf("  round %d: longest call %llu ms, deviation from the mean of "
               "all %d %.3g; groups of",
               r, (unsigned long long)ms, N, dev);
        for (size_t i = 0; i < N; i++)
            printf(" %u", s.res[i].info.group_size);
        printf("\n");
    }
    IT_CHECK(dev <= 1e-6,
             "3 rounds of a 2 x 2 x 2 grid: not the mean of all 8: %.3g", dev);
    return nn_swarm_end(&s);
}
