/* SPDX-License-Identifier: MIT */
/*
 * test_int_robust.c - robust aggregation through the real engine (group
 * key suffix, matchmaking, all-reduce) with peer processes on loopback.
 * Eight peers in one group of 8, one of them averaging a poisoned vector
 * (every value 1e20, honest values in [-2, 2]):
 *  - MOSHPIT_AGG_MEAN: the honest peers' results move by more than 1e18;
 *  - MOSHPIT_AGG_TRIMMED_MEAN (trim 1): every element of every honest
 *    result lies in the range of the honest values, and the honest peers
 *    hold identical bytes;
 *  - MOSHPIT_AGG_CENTERED_CLIP (auto radius): every honest result is
 *    within 1 (max) of the honest weighted mean, identical bytes.
 * Then four peers, two with the trimmed mean and two with the mean, all
 * with group_size 4: the rule is part of the group key, so they form two
 * groups of two, one per rule.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 8
#define COUNT 200003

static const char *name_of(int mode) {
    return mode == MOSHPIT_AGG_MEAN           ? "mean"
           : mode == MOSHPIT_AGG_TRIMMED_MEAN ? "trimmed mean"
                                              : "CenteredClip";
}

static void run_attack(int mode) {
    it_peer_t peers[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-robust";
    cfg.group_size = N;
    cfg.matchmaking_ms = 5000;
    cfg.round_timeout_ms = 30000;
    cfg.aggregation = mode;
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "%zu of %d peers started", up, N);
    if (up != N)
        return;
    uint64_t seeds[N];
    double w[N];
    for (size_t i = 0; i < N; i++) {
        seeds[i] = i == N - 1 ? IT_SEED_POISON : 500 + i;
        w[i] = it_weight(500 + i);
        IT_CHECK(it_average_async(&peers[i], COUNT, seeds[i], w[i]) == 0,
                 "send");
    }
    /* the honest mean and range */
    float *tmp = malloc(COUNT * sizeof(float));
    float *lo = malloc(COUNT * sizeof(float));
    float *hi = malloc(COUNT * sizeof(float));
    double *h = calloc(COUNT, sizeof(double));
    float *v = malloc(COUNT * sizeof(float));
    float *first = malloc(COUNT * sizeof(float));
    double hw = 0;
    for (size_t i = 0; i + 1 < N; i++) {
        it_fill(tmp, COUNT, seeds[i]);
        hw += w[i];
        for (size_t e = 0; e < COUNT; e++) {
            h[e] += w[i] * tmp[e];
            lo[e] = i == 0 ? tmp[e] : fminf(lo[e], tmp[e]);
            hi[e] = i == 0 ? tmp[e] : fmaxf(hi[e], tmp[e]);
        }
    }
    double worst = 0;
    size_t outside = 0;
    for (size_t i = 0; i < N; i++) {
        it_result_t res;
        int rc = it_collect(&peers[i], &res, i + 1 < N ? v : tmp, COUNT, 60000);
        IT_CHECK(rc == 0 && res.err == MOSHPIT_OK, "peer %zu: rc %d err %d", i,
                 rc, res.err);
        if (rc != 0 || i + 1 == N)
            continue;
        IT_CHECK(res.info.group_size == N && res.info.peers_failed == 0 &&
                     res.info.fraction_averaged == 1.0,
                 "peer %zu: group %u failed %u fraction %g", i,
                 res.info.group_size, res.info.peers_failed,
                 res.info.fraction_averaged);
        for (size_t e = 0; e < COUNT; e++) {
            double d = fabs((double)v[e] - h[e] / hw);
            worst = fmax(worst, d);
            outside += v[e] < lo[e] || v[e] > hi[e];
        }
        if (i == 0)
            memcpy(first, v, COUNT * sizeof(float));
        else
            IT_CHECK(memcmp(first, v, COUNT * sizeof(float)) == 0,
                     "honest peers 0 and %zu differ", i);
    }
    if (mode == MOSHPIT_AGG_MEAN)
        IT_CHECK(worst > 1e18, "the mean moved only %g", worst);
    if (mode == MOSHPIT_AGG_TRIMMED_MEAN)
        IT_CHECK(outside == 0, "%zu elements outside the honest range",
                 outside);
    if (mode == MOSHPIT_AGG_CENTERED_CLIP)
        IT_CHECK(worst < 1.0, "CenteredClip off by %g", worst);
    printf("%s, one poisoned peer of 8: max |result - honest mean| %.4g, "
           "%zu elements outside the honest range\n",
           name_of(mode), worst, outside);
    free(tmp);
    free(lo);
    free(hi);
    free(h);
    free(v);
    free(first);
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
}

/* Two rules in one swarm never mix. */
static void set_rule(it_peer_cfg_t *cfg, size_t i) {
    cfg->aggregation = i % 2 ? MOSHPIT_AGG_MEAN : MOSHPIT_AGG_TRIMMED_MEAN;
}

static void run_mixed(void) {
    it_check_settings_apart("it-robust-mixed", set_rule);
    printf("mixed rules: trimmed-mean peers grouped together, mean peers "
           "together\n");
}

int main(void) {
    run_attack(MOSHPIT_AGG_MEAN);
    run_attack(MOSHPIT_AGG_TRIMMED_MEAN);
    run_attack(MOSHPIT_AGG_CENTERED_CLIP);
    run_mixed();
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
