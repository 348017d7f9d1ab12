/* SPDX-License-Identifier: MIT */
/*
 * test_netns_nat.c - peers behind NAT take full part: 8 peers, 4 of them
 * (2..5) behind one masquerading router and 2 (6, 7) behind another, so
 * only peers 0 and 1 can be dialled; every link has a one-way delay of
 * 25 ms (RTT 50 ms). The NAT'd peers find out that nobody can dial them
 * (their bootstrap peer says so) and run outbound-only: they open every
 * session themselves, the other side answers on that connection, and they
 * reduce no share, so no connection is ever needed between peers behind
 * different NATs (docs/DESIGN.md, "Peers behind NAT").
 *
 * Config: group_size 8, grid_dims 1, balanced grid positions 0..7,
 * matchmaking_ms 3000, peer_timeout_ms 2000, round_timeout_ms 15000;
 * vectors of 2^20 floats (4 MiB), so a kill lands while data moves.
 * Identities are fixed.
 *
 * Pass rule:
 * - every peer sees all 8 members within 60 s, and each NAT'd peer logged
 *   that it runs outbound-only;
 * - round 1 (fresh vectors): every peer holds the weighted mean of the 8
 *   (1e-5 relative) after d = 1 round;
 * - round 2: dialable peer 1 is killed right after its group formed; every
 *   survivor returns MOSHPIT_OK within round_timeout_ms + 1 s and every
 *   element it holds is its own value or the weighted mean of a subset of
 *   the 8 that contains it;
 * - NAT'd peer 3 is stopped and restarted with the same identity (same
 *   namespace, behind the same NAT); all 7 see 7 members within 60 s, and
 *   within 3 rounds (peer 3 fresh, the others averaging again) the 7 agree
 *   within 1e-5 relative, with peer 0 the only dialable peer left.
 * On a library without outbound-only mode the NAT'd peers never get a
 * session with anyone (the first check fails).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swarm.h"

#define N 8
#define COUNT (1u << 20)
#define VICTIM 1  /* dialable, killed mid-round */
#define RESTART 3 /* behind NAT 0, restarted with its identity */

int main(void) {
    nn_open(N);
    it_peer_cfg_t cfg;
    int begun = nn_nat_begin("nn-nat", N, 1, &cfg);
    if (begun != 0)
        return begun;
    nn_swarm_t s;
    uint8_t pub[N][32], sec[N][32];
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return 1;
    for (size_t i = 0; i < N; i++)
        IT_CHECK(moshpit_keypair(pub[i], sec[i]) == MOSHPIT_OK, "keypair");
    uint64_t t0 = it_now_ms();
    for (size_t i = 0; i < N; i++) {
        s.cfg.grid_position = (int64_t)i;
        s.cfg.notify_group = i == VICTIM;
        IT_CHECK(nn_swarm_start_one(&s, i, 0, pub[i], sec[i], 1) == 0,
                 "peer %zu did not start", i);
    }
    s.cfg.notify_group = 0;
    if (nn_nat_formed(&s, t0) != 0)
        return nn_swarm_end(&s);

    /* round 1: the exact mean of all 8 in d = 1 round */
    uint64_t ms = nn_round(&s, NULL, 5000);
    nn_print_round(&s, "nat", 1);
    double dev = nn_dev_from_mean(&s, NULL, NULL);
    printf("  round 1: longest call %llu ms, deviation from the mean of all "
           "%d %.3g\n",
           (unsigned long long)ms, N, dev);
    IT_CHECK(dev <= 1e-5, "round 1 is not the mean of all 8: %.3g", dev);
    for (size_t i = 0; i < N; i++)
        IT_CHECK(s.res[i].info.group_size == N, "peer %zu: group of %u, not %d",
                 i, s.res[i].info.group_size, N);

    /* round 2: dialable peer 1 dies while data moves */
    int in[N];
    for (size_t i = 0; i < N; i++)
        in[i] = 1;
    nn_round_send(&s, NULL, 6000);
    IT_CHECK(it_wait_group(&s.peer[VICTIM], 20000) == 0,
             "victim never grouped");
    it_kill(&s.peer[VICTIM]);
    nn_round_collect(&s, NULL);
    for (size_t i = 0; i < N; i++) {
        if (!s.got[i])
            continue;
        size_t bad = nn_unexplained(&s, in, i, NULL);
        IT_CHECK(bad == 0, "survivor %zu: %zu unexplained values", i, bad);
        printf("  round 2: survivor %zu: group %u, %u dropped, fraction "
               "averaged %.4f, %llu ms\n",
               i, s.res[i].info.group_size, s.res[i].info.peers_failed,
               s.res[i].info.fraction_averaged,
               (unsigned long long)s.res[i].call_ms);
    }

    /* NAT'd peer 3 restarts with its identity; only peer 0 is dialable */
    t0 = it_now_ms();
    size_t seen = nn_wait_exact(&s, N - 1, 30000);
    printf("after the kill: %zu of %d see %d after %llu ms\n", seen, N - 1,
           N - 1, (unsigned long long)(it_now_ms() - t0));
    it_stop(&s.peer[RESTART]);
    s.cfg.grid_position = RESTART;
    IT_CHECK(
        nn_swarm_start_one(&s, RESTART, 0, pub[RESTART], sec[RESTART], 1) == 0,
        "restart of peer %d", RESTART);
    t0 = it_now_ms();
    seen = nn_wait_exact(&s, N - 1, 60000);
    printf("restarted peer %d: %zu of %d see %d after %llu ms\n", RESTART, seen,
           N - 1, N - 1, (unsigned long long)(it_now_ms() - t0));
    s.next_seed[RESTART] = 7000;
    s.next_weight[RESTART] = it_weight(7000);
    double spread = 1;
    for (int r = 3; r <= 5 && spread > 1e-5; r++) {
        nn_round(&s, NULL, 0);
        spread = nn_spread(&s, NULL);
        nn_print_round(&s, "rejoined", r);
        printf("  spread among the 7 %.3g\n", spread);
    }
    IT_CHECK(spread <= 1e-5, "the 7 do not agree: spread %.3g", spread);
    return nn_swarm_end(&s);
}
