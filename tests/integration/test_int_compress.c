/* SPDX-License-Identifier: MIT */
/*
 * test_int_compress.c - wire compression through the real engine (group
 * key, sealed encoded parts, decoding, the reducer's decoded result) with
 * peer processes on loopback. Four peers in one group of 4 average 200003
 * values (four shares of more than one part each, blocks cut short at the
 * end of parts) with each setting; every peer must end with the same
 * bytes, within the format's bound of the exact weighted mean (one round:
 * half a step for the scatter plus half a step for the result), and send
 * about as many bytes as the format says. Then four peers, two with INT8
 * and two without compression: the setting is part of the group key, so
 * they form two groups of two.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 4
#define COUNT 200003

static const char *names[] = {"NONE", "FP16", "BF16", "INT8", "INT4"};

/* Bytes per value on the wire (blocks of 64 with a float32 scale). */
static double bytes_per_value(uint32_t c) {
    static const double b[] = {4, 2, 2, 1 + 4.0 / 64, 0.5 + 4.0 / 64};
    return b[c];
}

/* The step of the format for values of magnitude at most a. */
static double step(uint32_t c, double a) {
    static const double s[] = {0, 0x1p-10, 0x1p-7, 1.0 / 127, 1.0 / 7};
    return s[c] * a;
}

static void run(uint32_t codec) {
    it_peer_t peers[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-compress";
    cfg.group_size = N;
    cfg.matchmaking_ms = 5000;
    cfg.round_timeout_ms = 30000;
    cfg.compression = codec;
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "%zu of %d peers started", up, N);
    if (up != N)
        return;
    double w[N];
    for (size_t i = 0; i < N; i++) {
        w[i] = it_weight(700 + i);
        IT_CHECK(it_average_async(&peers[i], COUNT, 700 + i, w[i]) == 0,
                 "send");
    }
    float *tmp = malloc(COUNT * sizeof(float));
    float *v = malloc(COUNT * sizeof(float));
    float *first = malloc(COUNT * sizeof(float));
    double *mu = calloc(COUNT, sizeof(double));
    double ws = 0, amax = 0;
    for (size_t i = 0; i < N; i++) {
        it_fill(tmp, COUNT, 700 + i);
        ws += w[i];
        for (size_t e = 0; e < COUNT; e++) {
            mu[e] += w[i] * tmp[e];
            amax = fmax(amax, fabs((double)tmp[e]));
        }
    }
    double worst = 0;
    uint64_t sent = 0;
    for (size_t i = 0; i < N; i++) {
        it_result_t res;
        int rc = it_collect(&peers[i], &res, v, COUNT, 60000);
        IT_CHECK(rc == 0 && res.err == MOSHPIT_OK, "peer %zu: rc %d err %d", i,
                 rc, res.err);
        if (rc != 0)
            continue;
        IT_CHECK(res.info.group_size == N && res.info.fraction_averaged == 1.0,
                 "%s peer %zu: group %u fraction %g", names[codec], i,
                 res.info.group_size, res.info.fraction_averaged);
        sent += res.info.bytes_sent;
        for (size_t e = 0; e < COUNT; e++)
            worst = fmax(worst, fabs((double)v[e] - mu[e] / ws));
        if (i == 0)
            memcpy(first, v, COUNT * sizeof(float));
        else
            IT_CHECK(memcmp(first, v, COUNT * sizeof(float)) == 0,
                     "%s: peers 0 and %zu differ", names[codec], i);
    }
    /* one round: the scatter and the result each off by half a step at
     * most, float32 rounding on top */
    double bound = step(codec, amax) * (1 + 1e-5) + 1e-6 * amax;
    IT_CHECK(worst <= bound, "%s: off by %g, bound %g", names[codec], worst,
             bound);
    /* each member sends 3/4 of the vector (scatter) and 3 copies of its
     * quarter (gather): 1.5 vectors, plus 64 bytes of header and tag per
     * frame */
    double payload = 1.5 * N * COUNT * bytes_per_value(codec);
    IT_CHECK(sent >= payload && sent <= payload * 1.01 + 4096,
             "%s: %llu bytes sent, payload %.0f", names[codec],
             (unsigned long long)sent, payload);
    printf("%s: 4 peers, %d values: max |result - exact mean| %.3g (bound "
           "%.3g), %llu bytes sent in all, identical results\n",
           names[codec], COUNT, worst, bound, (unsigned long long)sent);
    free(tmp);
    free(v);
    free(first);
    free(mu);
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
}

/* Two settings in one swarm never mix. */
static void set_codec(it_peer_cfg_t *cfg, size_t i) {
    cfg->compression = i % 2 ? MOSHPIT_COMPRESS_NONE : MOSHPIT_COMPRESS_INT8;
}

static void run_mixed(void) {
    it_check_settings_apart("it-compress-mixed", set_codec);
    printf("mixed settings: INT8 peers grouped together, uncompressed peers "
           "together\n");
}

int main(void) {
    for (uint32_t c = MOSHPIT_COMPRESS_NONE; c <= MOSHPIT_COMPRESS_INT4; c++)
        run(c);
    run_mixed();
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
