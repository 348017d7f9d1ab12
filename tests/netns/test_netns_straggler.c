/* SPDX-License-Identifier: MIT */
/*
 * test_netns_straggler.c - scenario 5 of the netns test bed: one peer
 * behind a 5 Mbit/s link among 100 Mbit/s peers (tc tbf both ways on
 * every link), 8 peers in one group.
 *
 * Three phases, each a new swarm of 8 averaging fresh 2^18-float vectors
 * (1 MiB) for 5 rounds:
 *   A. no straggler: every link 100 Mbit/s, everyone announces 100;
 *   B. peer 7 at 5 Mbit/s announcing bandwidth_mbps 5, the others 100:
 *      its share of the reduction is 5/705 of the vector, so it only has
 *      to send and receive about the vector once;
 *   C. peer 7 at 5 Mbit/s but everyone announcing 100: in round 1 it
 *      reduces 1/8 like everyone (nothing is measured yet), so it moves
 *      about 1.75 vectors each way over its link; from then on its mates'
 *      DONE reports give its measured upload, which its JOINs announce
 *      (docs/DESIGN.md, "Shares that follow the measured upload"), and
 *      its share shrinks as in B without anyone telling it.
 * In B and C, once its rate is measured, peer 7 is the group's slow member
 * and sends its scatter parts to one reducer after another.
 * Config: group_size 8, grid_dims 1, matchmaking_ms 3000,
 * peer_timeout_ms 5000, round_timeout_ms 20000.
 *
 * Round time = the longest all-reduce (moshpit_round_t.allreduce_ms) of
 * the 8 peers; printed per round, with the slowest of the other 7 and the
 * straggler's own. Summaries: A and B the median of rounds 2-5, C round 1
 * (equal shares: as without the measurement) and the median of rounds
 * 2-5 (measured).
 *
 * Pass rule: every call is OK within round_timeout_ms + 1 s and every peer
 * holds the exact weighted mean of the 8 fresh vectors (1e-5 relative);
 * the bytes the straggler moves over its slow link (sent + received) in
 * B (median of rounds 2-5) and in C once measured (median of rounds 2-5)
 * are each at most 0.7 times C's round 1. By the layout: about 2.0
 * vectors (its own out, the result in) against 3.5 (7/8 of a vector each
 * way in both halves of the round): 0.58.
 *
 * The round times are printed, not asserted (tests check bounds, never
 * speed): docs/RESULTS.md has the figures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swarm.h"

#define N 8
#define COUNT (1u << 18)
#define ROUNDS 5
#define SLOW N - 1

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t median_u32(const uint32_t *v, size_t n) {
    uint32_t t[ROUNDS];
    memcpy(t, v, n * sizeof(*t));
    qsort(t, n, sizeof(t[0]), cmp_u32);
    return t[n / 2];
}

static uint64_t median_u64(const uint64_t *v, size_t n) {
    uint64_t t[ROUNDS];
    memcpy(t, v, n * sizeof(*t));
    qsort(t, n, sizeof(t[0]), cmp_u64);
    return t[n / 2];
}

/* One phase: each round's time in ms (0 if the swarm did not form) and the
 * bytes the straggler moved, in times[] and bytes[]. */
static void phase(const char *name, unsigned slow_mbit, uint32_t slow_announce,
                  uint64_t seed0, uint32_t *times, uint64_t *bytes) {
    memset(times, 0, ROUNDS * sizeof(*times));
    memset(bytes, 0, ROUNDS * sizeof(*bytes));
    it_peer_cfg_t cfg = nn_config("nn-straggler", N, 3000, 5000, 20000);
    cfg.grid_dims = 1;
    nn_swarm_t s;
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return;
    for (size_t i = 0; i < N; i++)
        IT_CHECK(nn_rate(i, i == SLOW ? slow_mbit : 100) == 0, "tbf %zu", i);
    for (size_t i = 0; i < N; i++) {
        s.cfg.bandwidth_mbps = i == SLOW ? slow_announce : 100;
        IT_CHECK(nn_swarm_start_one(&s, i, 0, NULL, NULL, 1) == 0,
                 "%s: peer %zu did not start", name, i);
    }
    if (nn_wait_all(&s, N, 60000) == N) {
        for (int r = 0; r < ROUNDS; r++) {
            nn_round(&s, NULL, seed0 + 100 * (uint64_t)r);
            double dev = nn_dev_from_mean(&s, NULL, NULL);
            IT_CHECK(dev <= 1e-5, "%s round %d: %.3g from the mean of all 8",
                     name, r + 1, dev);
            for (size_t i = 0; i < N; i++)
                if (s.got[i] && s.res[i].info.allreduce_ms > times[r])
                    times[r] = s.res[i].info.allreduce_ms;
            if (s.got[SLOW])
                bytes[r] = s.res[SLOW].info.bytes_sent +
                           s.res[SLOW].info.bytes_received;
            uint32_t fast = 0;
            for (size_t i = 0; i < N; i++)
                if (i != SLOW && s.got[i] && s.res[i].info.allreduce_ms > fast)
                    fast = s.res[i].info.allreduce_ms;
            printf("%s round %d: all-reduce %u ms (slowest peer; %u ms the "
                   "slowest of the others, %u ms the straggler), straggler "
                   "moved %.2f MiB, deviation %.3g\n",
                   name, r + 1, times[r], fast,
                   s.got[SLOW] ? s.res[SLOW].info.allreduce_ms : 0,
                   (double)bytes[r] / 1048576.0, dev);
        }
    }
    nn_swarm_free(&s);
}

int main(void) {
    nn_open(N);
    uint64_t ab[ROUNDS], bb[ROUNDS], cb[ROUNDS];
    uint32_t at[ROUNDS], bt[ROUNDS], ct[ROUNDS];
    phase("A no straggler", 100, 100, 5000, at, ab);
    phase("B straggler announces 5", 5, 5, 6000, bt, bb);
    phase("C straggler measured", 5, 100, 7000, ct, cb);
    uint32_t a = median_u32(at + 1, ROUNDS - 1),
             b = median_u32(bt + 1, ROUNDS - 1), c1 = ct[0],
             c = median_u32(ct + 1, ROUNDS - 1);
    uint64_t bbm = median_u64(bb + 1, ROUNDS - 1),
             cbm = median_u64(cb + 1, ROUNDS - 1);
    printf("round time, 1 MiB, 8 peers at 100 Mbit/s: %u ms without a "
           "straggler; with one at 5 Mbit/s: %u ms when it announces 5 "
           "Mbit/s; when nobody announces it: %u ms in the first round "
           "(equal shares), %u ms once measured (ratio %.2f)\n",
           a, b, c1, c, c1 ? (double)c / c1 : 0.0);
    printf("bytes over the straggler's link: %.2f MiB when it announces 5 "
           "Mbit/s; when nobody announces it %.2f MiB in the first round, "
           "%.2f MiB once measured (ratio %.2f)\n",
           (double)bbm / 1048576.0, (double)cb[0] / 1048576.0,
           (double)cbm / 1048576.0, cb[0] ? (double)cbm / (double)cb[0] : 0.0);
    IT_CHECK(a > 0 && b > 0 && c1 > 0 && c > 0 && bbm > 0 && cb[0] > 0 &&
                 cbm > 0,
             "a phase did not run");
    IT_CHECK((double)bbm <= 0.7 * (double)cb[0],
             "announcing the slow link did not spare it: %llu vs %llu bytes",
             (unsigned long long)bbm, (unsigned long long)cb[0]);
    IT_CHECK((double)cbm <= 0.7 * (double)cb[0],
             "measuring the slow link did not spare it: %llu vs %llu bytes",
             (unsigned long long)cbm, (unsigned long long)cb[0]);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
