/* SPDX-License-Identifier: MIT */
/*
 * test_int_close.c - moshpit_close right after the last round, with real
 * processes on loopback, as a training program does it: no barrier
 * between the last moshpit_average and moshpit_close.
 *
 * Pass rules:
 * - last round, then close: 16 peers on a balanced 4x4 grid each get two
 *   rounds at once and run them back to back, the second with the weight
 *   group_weight / group_size of the first (README), and call
 *   moshpit_close as soon as their own second call returns. Repeated
 *   ITERS times (argument 2, default 6) with fresh processes. Every
 *   peer's every round reports OK, group_size 4, peers_failed 0 and
 *   fraction_averaged 1; after round 2 every peer holds the exact weighted
 *   mean of the 16 initial vectors (1e-6 relative); every close returns
 *   within its bound (include/moshpit.h: min(peer_timeout_ms,
 *   round_timeout_ms) + 1 s), plus 2 s for scheduling on a loaded machine.
 * - nothing owed: 4 peers average once in a group of 4 and the test
 *   collects every result; then each peer closes, one after the other.
 *   peer_timeout_ms is 20 s, so a close that waited for its mates in vain
 *   would take 20 s; every close must return within 10 s (it takes
 *   milliseconds). A peer that never averaged closes within 10 s too.
 * - frozen mate: 2 peers average 16 MiB in a group of 2 with
 *   round_timeout_ms 4 s and peer_timeout_ms 20 s; one is SIGSTOPped as
 *   soon as its group forms, so the other's round ends at its deadline
 *   with that mate still counted alive and silent. Its close must return
 *   within its bound, min(20 s, 4 s) + 1 s, plus 2 s for scheduling.
 *   (The close ends when the bound passes or when ZMTP heartbeats end
 *   the frozen peer's session, about 5 s after the freeze, whichever is
 *   first; if the frozen peer finished its round before the signal, it
 *   said DONE and the close is fast. The bound holds either way.)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 16
#define M 4
#define COUNT 100003
#define PEER_TIMEOUT_MS 5000u
#define ROUND_TIMEOUT_MS 30000u
/* include/moshpit.h: a close returns within min(peer_timeout_ms,
 * round_timeout_ms) + 1 s; 2 s more for scheduling on a loaded machine */
#define CLOSE_BOUND_MS (PEER_TIMEOUT_MS + 1000u + 2000u)
/* "nothing owed" closes: half the 20 s a vain wait would take */
#define FAST_CLOSE_MS 10000u

static int round_ok(const it_result_t *res) {
    return res->err == MOSHPIT_OK && res->info.group_size == M &&
           res->info.peers_failed == 0 && res->info.fraction_averaged == 1.0;
}

/* One swarm: two rounds back to back, close right after the second.
 * Returns how many peer-rounds fell short (group, failures, fraction,
 * final values); *close_max receives the longest close. */
static int last_round_then_close(int iter, uint64_t *close_max) {
    it_peer_t peers[N];
    uint64_t seeds[N];
    double w[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-close";
    cfg.group_size = M;
    /* a group closes as soon as its 4 JOINs are in: a long window costs
     * nothing, and a loaded machine may take seconds to deliver a JOIN */
    cfg.matchmaking_ms = 10000;
    cfg.round_timeout_ms = ROUND_TIMEOUT_MS;
    cfg.peer_timeout_ms = PEER_TIMEOUT_MS;
    cfg.grid = 1;
    /* d fixed: a peer that counts fewer than 12 members for a moment (on
     * a machine loaded to the point of heartbeat timeouts) would choose
     * d = 1 and miss its round-1 group, which is not what this tests */
    cfg.grid_dims = 2;
    cfg.ready_timeout_ms = 60000;
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "iteration %d: %zu of %d peers started and saw everyone",
             iter, up, N);
    if (up != N) {
        for (size_t i = 0; i < N; i++)
            it_kill(&peers[i]);
        return N * 2;
    }
    for (size_t i = 0; i < N; i++) {
        seeds[i] = 77000 + 100 * (uint64_t)iter + i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&peers[i], COUNT, seeds[i], w[i]) == 0 &&
                     it_average_close_async(&peers[i], COUNT) == 0,
                 "send to peer %zu", i);
    }
    float *v = malloc(COUNT * sizeof(float));
    int bad = 0;
    double worst = 0;
    *close_max = 0;
    /* round 1 of every peer first: a peer reporting a result blocks until
     * the test reads it, so reading one peer's two rounds before the next
     * peer's first would hold that peer back */
    for (int r = 0; r < 2; r++) {
        for (size_t i = 0; i < N; i++) {
            it_result_t res;
            if (it_collect(&peers[i], &res, v, COUNT, 90000) != 0) {
                IT_CHECK(0, "iteration %d peer %zu round %d: no result", iter,
                         i, r + 1);
                bad++;
                continue;
            }
            if (!round_ok(&res)) {
                bad++;
                IT_CHECK(0,
                         "iteration %d peer %zu round %d: %s, group_size %u, "
                         "peers_failed %u, fraction_averaged %g",
                         iter, i, r + 1,
                         moshpit_strerror((moshpit_err_t)res.err),
                         res.info.group_size, res.info.peers_failed,
                         res.info.fraction_averaged);
            }
            if (r == 0)
                continue;
            double d = it_dev_from_mean(v, COUNT, seeds, w, N);
            worst = d > worst ? d : worst;
            if (d > 1e-6 && round_ok(&res))
                bad++;
            IT_CHECK(d <= 1e-6,
                     "iteration %d peer %zu: %g from the weighted mean after "
                     "2 rounds",
                     iter, i, d);
            IT_CHECK(res.close_ms <= CLOSE_BOUND_MS,
                     "iteration %d peer %zu: close took %llu ms", iter, i,
                     (unsigned long long)res.close_ms);
            if (res.close_ms > *close_max)
                *close_max = res.close_ms;
        }
    }
    free(v);
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
    printf("iteration %d: %d of %d peer-rounds short, worst deviation %.3g, "
           "longest close %llu ms\n",
           iter, bad, 2 * N, worst, (unsigned long long)*close_max);
    return bad;
}

static void nothing_owed(void) {
    enum { K = 4 };
    it_peer_t peers[K + 1];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-close-idle";
    cfg.group_size = K;
    cfg.grid_dims = 1;
    cfg.matchmaking_ms = 4000;
    cfg.round_timeout_ms = ROUND_TIMEOUT_MS;
    cfg.peer_timeout_ms = 20000;
    size_t up = it_start_swarm(peers, K + 1, &cfg);
    IT_CHECK(up == K + 1, "%zu of %d peers started", up, K + 1);
    if (up != K + 1) {
        for (size_t i = 0; i < K + 1; i++)
            it_kill(&peers[i]);
        return;
    }
    float *v = malloc(1000 * sizeof(float));
    for (size_t i = 0; i < K; i++)
        IT_CHECK(it_average_async(&peers[i], 1000, 500 + i, 1.0) == 0, "send");
    for (size_t i = 0; i < K; i++) {
        it_result_t res;
        IT_CHECK(it_collect(&peers[i], &res, v, 1000, 60000) == 0 &&
                     res.err == MOSHPIT_OK && res.info.group_size == K,
                 "peer %zu: no full round", i);
    }
    free(v);
    uint64_t longest = 0;
    for (size_t i = 0; i < K + 1; i++) {
        uint64_t ms = 0;
        int rc = it_close(&peers[i], &ms, 60000);
        IT_CHECK(rc == 0, "peer %zu: close did not report", i);
        IT_CHECK(rc != 0 || ms <= FAST_CLOSE_MS,
                 "peer %zu: close with nothing owed took %llu ms", i,
                 (unsigned long long)ms);
        longest = ms > longest ? ms : longest;
    }
    printf("nothing owed: longest close %llu ms (peer_timeout_ms 20000)\n",
           (unsigned long long)longest);
}

static void frozen_mate(void) {
    const size_t count = (size_t)4 << 20;
    it_peer_t peers[2];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-close-frozen";
    cfg.group_size = 2;
    cfg.grid_dims = 1;
    cfg.matchmaking_ms = 2000;
    cfg.round_timeout_ms = 4000;
    cfg.peer_timeout_ms = 20000;
    cfg.notify_group = 1;
    size_t up = it_start_swarm(peers, 2, &cfg);
    IT_CHECK(up == 2, "%zu of 2 peers started", up);
    if (up != 2) {
        it_kill(&peers[0]);
        it_kill(&peers[1]);
        return;
    }
    for (size_t i = 0; i < 2; i++)
        IT_CHECK(it_average_async(&peers[i], count, 900 + i, 1.0) == 0, "send");
    int grouped = it_wait_group(&peers[1], 30000) == 0;
    IT_CHECK(grouped, "no group formed");
    if (grouped)
        kill(peers[1].pid, SIGSTOP);
    float *v = malloc(count * sizeof(float));
    it_result_t res;
    memset(&res, 0, sizeof(res));
    IT_CHECK(it_collect(&peers[0], &res, v, count, 60000) == 0 &&
                 res.err == MOSHPIT_OK,
             "no OK result");
    free(v);
    uint64_t ms = 0;
    int rc = it_close(&peers[0], &ms, 60000);
    IT_CHECK(rc == 0, "close did not report");
    IT_CHECK(rc != 0 || ms <= 4000 + 1000 + 2000,
             "close with a frozen mate took %llu ms", (unsigned long long)ms);
    printf("frozen mate: round %u ms, peers_failed %u, fraction averaged %g; "
           "close %llu ms (bound 5000 ms)\n",
           res.info.matchmaking_ms + res.info.allreduce_ms,
           res.info.peers_failed, res.info.fraction_averaged,
           (unsigned long long)ms);
    kill(peers[1].pid, SIGCONT);
    it_kill(&peers[1]);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    int iters = argc > 2 ? atoi(argv[2]) : 6;
    if (!*only || strcmp(only, "last") == 0) {
        int failed_iters = 0;
        uint64_t close_max = 0;
        for (int k = 0; k < iters; k++) {
            uint64_t cm = 0;
            failed_iters += last_round_then_close(k, &cm) != 0;
            close_max = cm > close_max ? cm : close_max;
        }
        printf("last round then close: %d of %d iterations short, longest "
               "close %llu ms\n",
               failed_iters, iters, (unsigned long long)close_max);
    }
    if (!*only || strcmp(only, "idle") == 0)
        nothing_owed();
    if (!*only || strcmp(only, "frozen") == 0)
        frozen_mate();
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
