/* SPDX-License-Identifier: MIT */
/*
 * test_netns_nat_grid.c - exact means over d = 2 grid rounds when most
 * peers are behind NAT: the topology of test_netns_nat (8 peers, 2..5
 * behind one masquerading router, 6 and 7 behind another, RTT 50 ms), so
 * only peers 0 and 1 are dialable, with group_size 4 and grid_dims 2.
 * Balanced positions put 0 and 1 on different lines of the first round
 * (peer 1 takes position 4), so every line of round 1 holds a dialable
 * member; round 2 has 4 lines of 2, at least two of them made of two
 * outbound-only peers, which reduce nothing for each other. Lines like
 * that must be merged into lines with a dialable member (docs/DESIGN.md,
 * "Exact means over d > 1 rounds behind NAT").
 *
 * Config: group_size 4, grid_dims 2, positions {0, 4, 1, 2, 3, 5, 6, 7},
 * matchmaking_ms 3000, peer_timeout_ms 2000, round_timeout_ms 15000;
 * vectors of 2^16 floats. Identities random.
 *
 * Pass rule: all 8 see each other within 60 s; after two rounds from fresh
 * vectors every peer holds the weighted mean of the 8 (1e-5 relative).
 * Without the merge the pairs of NAT'd peers keep the means of their
 * round-1 lines, which differ (deviation about 0.1 and more).
 */
#include <stdio.h>
#include <stdlib.h>

#include "swarm.h"

#define N 8
#define COUNT (1u << 16)

int main(void) {
    nn_open(N);
    it_peer_cfg_t cfg;
    int begun = nn_nat_begin("nn-natg", 4, 2, &cfg);
    if (begun != 0)
        return begun;
    nn_swarm_t s;
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return 1;
    const int64_t pos[N] = {0, 4, 1, 2, 3, 5, 6, 7};
    if (nn_nat_start_grid(&s, pos) != 0)
        return nn_swarm_end(&s);

    uint64_t ms = nn_round(&s, NULL, 5000);
    nn_print_round(&s, "natgrid", 1);
    printf("  round 1: longest call %llu ms, deviation from the mean of all "
           "%d %.3g\n",
           (unsigned long long)ms, N, nn_dev_from_mean(&s, NULL, NULL));
    ms = nn_round(&s, NULL, 0);
    nn_print_round(&s, "natgrid", 2);
    double dev = nn_dev_from_mean(&s, NULL, NULL);
    printf("  round 2: longest call %llu ms, deviation from the mean of all "
           "%d %.3g\n",
           (unsigned long long)ms, N, dev);
    for (size_t i = 0; i < N; i++)
        printf("  peer %zu: round 2 group of %u\n", i,
               s.res[i].info.group_size);
    IT_CHECK(dev <= 1e-5,
             "2 rounds of a 4 x 2 grid: not the mean of all 8: %.3g", dev);
    return nn_swarm_end(&s);
}
