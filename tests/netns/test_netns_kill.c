/* SPDX-License-Identifier: MIT */
/*
 * test_netns_kill.c - scenario 3 of the netns test bed: two of 8 peers are
 * SIGKILLed mid-round; later a new peer joins (its own namespace and
 * address) and one of the dead restarts with the same identity (same
 * namespace and address).
 *
 * Config: group_size 8, grid_dims 1 (one group key: everyone who is alive
 * and known averages together), matchmaking_ms 3000, peer_timeout_ms
 * 2000, round_timeout_ms 15000; vectors of 2^20 floats (4 MiB), so the
 * kills land while data moves. Identities are fixed.
 *
 * Pass rule (nobody hangs, the survivors agree):
 * - kill round: both victims are killed right after their group formed;
 *   every survivor returns MOSHPIT_OK within round_timeout_ms + 1 s; every
 *   element it holds is its own value or the weighted mean of a subset of
 *   the 8 that contains it; two survivors of the same group that both
 *   got a group result for an element hold the same value (1e-5
 *   relative). (A victim that was the key's matchmaker may have sent its
 *   GROUP to some members only: the others fall back and may group
 *   among themselves, with results of their own.)
 * - the next round (averaging again) among the 6 survivors leaves them
 *   all within 1e-5 relative of each other;
 * - a newcomer and the restarted identity are seen by everyone within
 *   60 s; within 4 more rounds (the two start from fresh vectors, the
 *   others average again) all 8 are within 1e-5 relative of each other;
 *   every call of every round is OK within round_timeout_ms + 1 s.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "swarm.h"

#define N 8
#define COUNT (1u << 20)
#define VICTIM_A 6 /* restarts later with the same identity */
#define VICTIM_B 7
#define NEWCOMER 8

/* Elements where survivors i and j both got a group result but differ. */
static size_t disagreements(const nn_swarm_t *s, size_t i, size_t j) {
    float *xi = malloc(COUNT * sizeof(float)),
          *xj = malloc(COUNT * sizeof(float));
    size_t bad = 0;
    if (xi == NULL || xj == NULL) {
        free(xi);
        free(xj);
        return COUNT;
    }
    it_fill(xi, COUNT, s->seed[i]);
    it_fill(xj, COUNT, s->seed[j]);
    for (size_t k = 0; k < COUNT; k++)
        if (s->v[i][k] != xi[k] && s->v[j][k] != xj[k] &&
            fabs(s->v[i][k] - s->v[j][k]) > 1e-5 * 2.0)
            bad++;
    free(xi);
    free(xj);
    return bad;
}

int main(void) {
    nn_open(N + 1);
    it_peer_cfg_t cfg = nn_config("nn-kill", N, 3000, 2000, 15000);
    cfg.grid_dims = 1;
    nn_swarm_t s;
    uint8_t pub[N + 1][32], sec[N + 1][32];
    if (nn_swarm_init(&s, &cfg, N + 1, COUNT) != 0)
        return 1;
    for (size_t i = 0; i <= N; i++)
        IT_CHECK(moshpit_keypair(pub[i], sec[i]) == MOSHPIT_OK, "keypair");
    for (size_t i = 0; i < N; i++) {
        s.cfg.notify_group = i == VICTIM_A || i == VICTIM_B;
        IT_CHECK(nn_swarm_start_one(&s, i, 0, pub[i], sec[i], 1) == 0,
                 "peer %zu did not start", i);
    }
    s.cfg.notify_group = 0;
    if (nn_wait_all(&s, N, 60000) != N)
        return 1;

    /* round 1: the victims die right after their group formed */
    int in[N + 1] = {0};
    for (size_t i = 0; i < N; i++) {
        in[i] = 1;
        IT_CHECK(nn_send(&s, i, 3000 + i, it_weight(3000 + i)) == 0, "send");
    }
    uint64_t t0 = it_now_ms();
    IT_CHECK(it_wait_group(&s.peer[VICTIM_A], 20000) == 0, "A never grouped");
    it_kill(&s.peer[VICTIM_A]);
    IT_CHECK(it_wait_group(&s.peer[VICTIM_B], 20000) == 0, "B never grouped");
    it_kill(&s.peer[VICTIM_B]);
    printf("killed peers %d and %d %llu ms into the round\n", VICTIM_A,
           VICTIM_B, (unsigned long long)(it_now_ms() - t0));
    for (size_t i = 0; i < N; i++)
        if (s.peer[i].alive)
            nn_collect(&s, i, 0);
    for (size_t i = 0; i < N; i++) {
        if (!s.got[i])
            continue;
        size_t bad = nn_unexplained(&s, in, i, NULL);
        IT_CHECK(bad == 0, "survivor %zu: %zu unexplained values", i, bad);
        printf("survivor %zu: group %u (%016llx), %u dropped, fraction "
               "averaged %.4f, %llu ms\n",
               i, s.res[i].info.group_size,
               (unsigned long long)s.res[i].info.round_id,
               s.res[i].info.peers_failed, s.res[i].info.fraction_averaged,
               (unsigned long long)s.res[i].call_ms);
        for (size_t j = 0; j < i; j++)
            if (s.got[j] && s.res[j].info.round_id == s.res[i].info.round_id) {
                size_t d = disagreements(&s, i, j);
                IT_CHECK(d == 0, "survivors %zu and %zu disagree on %zu", j, i,
                         d);
            }
    }

    /* round 2: the survivors alone */
    nn_round(&s, NULL, 0);
    double spread = nn_spread(&s, NULL);
    nn_print_round(&s, "survivors", 2);
    printf("  spread among the 6 survivors %.3g\n", spread);
    IT_CHECK(spread <= 1e-5, "survivors do not agree: spread %.3g", spread);

    /* a newcomer, and victim A's identity back */
    IT_CHECK(nn_swarm_start_one(&s, NEWCOMER, 0, pub[NEWCOMER], sec[NEWCOMER],
                                1) == 0,
             "newcomer did not start");
    IT_CHECK(nn_swarm_start_one(&s, VICTIM_A, 0, pub[VICTIM_A], sec[VICTIM_A],
                                1) == 0,
             "restart of peer %d did not start", VICTIM_A);
    uint64_t t1 = it_now_ms();
    size_t seen = nn_wait_all(&s, N, 60000);
    printf("newcomer and restarted peer: %zu of 8 see 8 after %llu ms\n", seen,
           (unsigned long long)(it_now_ms() - t1));
    s.next_seed[NEWCOMER] = 3100;
    s.next_weight[NEWCOMER] = it_weight(3100);
    s.next_seed[VICTIM_A] = 3200;
    s.next_weight[VICTIM_A] = it_weight(3200);
    spread = 1;
    for (int r = 3; r <= 6 && spread > 1e-5; r++) {
        nn_round(&s, NULL, 0);
        spread = nn_spread(&s, NULL);
        nn_print_round(&s, "rejoined", r);
        printf("  spread among all 8 %.3g\n", spread);
    }
    IT_CHECK(spread <= 1e-5, "the 8 do not agree: spread %.3g", spread);
    return nn_swarm_end(&s);
}
