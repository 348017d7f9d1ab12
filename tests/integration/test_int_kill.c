/* SPDX-License-Identifier: MIT */
/*
 * test_int_kill.c - one of four real peer processes is SIGKILLed while its
 * group's all-reduce runs. Pass rule: every survivor returns MOSHPIT_OK
 * within round_timeout_ms + 1 s, reports the dead member (peers_failed 1,
 * group_size 3); every element it holds is its own value, or the weighted
 * mean of all four, or that of the three survivors; survivors agree where
 * both got a group result; fraction_averaged matches what changed. A
 * second round among the survivors is exact.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grid.h"
#include "core/rendezvous.h"
#include "harness.h"

#define N 4
#define COUNT 4000000
#define ROUND_TIMEOUT 30000

int main(void) {
    it_peer_t all[N];
    uint64_t seeds[N];
    double w[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-kill";
    cfg.group_size = N;
    cfg.matchmaking_ms = 10000; /* the group closes when all 4 joined */
    cfg.round_timeout_ms = ROUND_TIMEOUT;
    cfg.peer_timeout_ms = 3000;
    cfg.expect_members = N;
    /* fixed identities, so the test knows the matchmaker order of the
     * round's key (the vector length, 8 bytes little-endian, then the grid
     * key, which for N peers with M = N is d = 1 and no coordinates) */
    uint8_t pub[N][32], sec[N][32], key[8 + MP_GRID_KEY_MAX];
    uint32_t order[N];
    for (int i = 0; i < N; i++)
        if (moshpit_keypair(pub[i], sec[i]) != MOSHPIT_OK)
            return 1;
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)((uint64_t)COUNT >> (8 * i));
    mp_grid_t grid;
    if (mp__grid_init(&grid, N, 0, -1, 1) != MOSHPIT_OK)
        return 1;
    mp__grid_set_estimate(&grid, N);
    size_t key_len = 8 + mp__grid_key(&grid, key + 8);
    mp__rendezvous_order(key, key_len, (const uint8_t(*)[32])pub, N, order);
    int victim = (int)order[N - 1];
    /* peers[N-1] is the victim, the others keep their order */
    it_peer_t *peers[N];
    for (int i = 0, k = 0; i < N; i++)
        if (i != victim)
            peers[k++] = &all[i];
    peers[N - 1] = &all[victim];
    for (int i = 0; i < N; i++) {
        cfg.notify_group = i == victim;
        memcpy(cfg.public_key, pub[i], 32);
        memcpy(cfg.secret_key, sec[i], 32);
        if (i == 1)
            snprintf(cfg.bootstrap, sizeof(cfg.bootstrap), "%s",
                     all[0].endpoint);
        if (it_start_nowait(&all[i], &cfg) != 0) {
            fprintf(stderr, "FAIL: peer %d did not start\n", i);
            return 1;
        }
    }
    for (int i = 0; i < N; i++)
        IT_CHECK(it_wait_ready(peers[i], 25000) == N, "peer %d not ready", i);

    for (int i = 0; i < N; i++) {
        seeds[i] = 500 + (uint64_t)i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(peers[i], COUNT, seeds[i], w[i]) == 0,
                 "send");
    }
    /* the victim says its group formed: kill it mid-round */
    IT_CHECK(it_wait_group(peers[N - 1], 20000) == 0, "victim never grouped");
    it_kill(peers[N - 1]);

    float *v[N - 1], *local = malloc(COUNT * sizeof(float));
    double *m4 = calloc(COUNT, sizeof(double)),
           *m3 = calloc(COUNT, sizeof(double));
    double ws4 = 0, ws3 = 0, maxabs = 0;
    for (int i = 0; i < N; i++) {
        it_fill(local, COUNT, seeds[i]);
        ws4 += w[i];
        if (i < N - 1)
            ws3 += w[i];
        for (size_t k = 0; k < COUNT; k++) {
            m4[k] += w[i] * local[k];
            if (i < N - 1)
                m3[k] += w[i] * local[k];
        }
    }
    for (size_t k = 0; k < COUNT; k++) {
        m4[k] /= ws4;
        m3[k] /= ws3;
        maxabs = fmax(maxabs, fabs(m4[k]));
    }
    const double tol = 1e-5 * maxabs;
    for (int i = 0; i < N - 1; i++) {
        it_result_t res;
        v[i] = malloc(COUNT * sizeof(float));
        int rc = it_collect(peers[i], &res, v[i], COUNT, 60000);
        IT_CHECK(rc == 0, "survivor %d gave no result", i);
        if (rc != 0)
            return 1;
        IT_CHECK(res.err == MOSHPIT_OK, "survivor %d: %s", i,
                 moshpit_strerror((moshpit_err_t)res.err));
        IT_CHECK(res.call_ms <= ROUND_TIMEOUT + 1000,
                 "survivor %d took %llu ms", i,
                 (unsigned long long)res.call_ms);
        IT_CHECK(res.info.peers_failed == 1 && res.info.group_size == N - 1,
                 "survivor %d: peers_failed %u group_size %u", i,
                 res.info.peers_failed, res.info.group_size);
        it_fill(local, COUNT, seeds[i]);
        size_t same = 0, with = 0, without = 0, other = 0;
        for (size_t k = 0; k < COUNT; k++) {
            double x = v[i][k];
            if (x == local[k])
                same++;
            else if (fabs(x - m4[k]) <= tol)
                with++;
            else if (fabs(x - m3[k]) <= tol)
                without++;
            else
                other++;
        }
        double frac = (double)(with + without) / COUNT;
        printf("survivor %d: %zu local, %zu mean of 4, %zu mean of 3, %zu "
               "other; fraction_averaged %.4f (counted %.4f), %llu ms\n",
               i, same, with, without, other, res.info.fraction_averaged, frac,
               (unsigned long long)res.call_ms);
        IT_CHECK(other == 0, "survivor %d has %zu unexplained values", i,
                 other);
        IT_CHECK(fabs(frac - res.info.fraction_averaged) < 1e-3,
                 "survivor %d: fraction_averaged %g but %g changed", i,
                 res.info.fraction_averaged, frac);
        IT_CHECK(same < COUNT, "survivor %d got nothing averaged", i);
    }
    /* survivors agree wherever both received a group result */
    for (int i = 1; i < N - 1; i++) {
        size_t disagree = 0;
        it_fill(local, COUNT, seeds[0]);
        float *own = malloc(COUNT * sizeof(float));
        it_fill(own, COUNT, seeds[i]);
        for (size_t k = 0; k < COUNT; k++)
            if (v[0][k] != local[k] && v[i][k] != own[k] &&
                fabs(v[0][k] - v[i][k]) > tol)
                disagree++;
        free(own);
        IT_CHECK(disagree == 0, "survivors 0 and %d disagree on %zu values", i,
                 disagree);
    }
    /* the survivors go on: the next round is exact among them */
    for (int i = 0; i < N - 1; i++) {
        seeds[i] = 900 + (uint64_t)i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(peers[i], 10007, seeds[i], w[i]) == 0,
                 "send");
    }
    for (int i = 0; i < N - 1; i++) {
        it_result_t res;
        IT_CHECK(it_collect(peers[i], &res, v[i], 10007, 60000) == 0,
                 "no second result from %d", i);
        IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == N - 1,
                 "second round: %d err %d group %u", i, res.err,
                 res.info.group_size);
        double d = it_dev_from_mean(v[i], 10007, seeds, w, N - 1);
        IT_CHECK(d <= 1e-5, "second round: survivor %d deviates %g", i, d);
    }
    for (int i = 0; i < N - 1; i++) {
        it_stop(peers[i]);
        free(v[i]);
    }
    free(local);
    free(m4);
    free(m3);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
