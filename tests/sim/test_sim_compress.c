/* SPDX-License-Identifier: MIT */
/*
 * test_sim_compress.c - the error that wire compression
 * (moshpit_config_t.compression) adds to the average, on simulated swarms
 * driving the library's round and group machines with the encoded bytes on
 * the simulated wire. For each setting: one round of one group of 8
 * (N=8, M=8, d=1), and d=2 and d=3 rounds on full grids (N=64 and N=512,
 * M=8), Gaussian values, random weights. It measures against the exact
 * weighted mean of the initial values the largest and the RMS error,
 * relative to the RMS of the values, and checks them against bounds that
 * follow from each format's precision (not from measurements):
 *
 *   worst case, per element: every round quantizes twice (the scatter of
 *   the values held before the round, then the reducer's result), each off
 *   by at most half a step; averaging does not grow an error already
 *   there. So the error is at most the sum over rounds of (step_in +
 *   step_out) / 2, where a step is A / levels for INT8 (127) and INT4 (7),
 *   A the largest |x| of the values quantized, and 2u * A for FP16 (u =
 *   2^-11) and BF16 (u = 2^-8); plus float32 rounding.
 *   RMS: a rounding error is spread evenly over its step (RMS step /
 *   sqrt 12) and independent of the others, so the RMS error is about
 *   sqrt(sum over the 2r quantizations of S^2) / sqrt(12), S the RMS step
 *   of the values quantized (absmax / levels per block of 64 for the
 *   integer codes, 2u |x| for the floating ones); the check allows 1.5
 *   times that.
 *
 * It also checks that the members of each group of the last round hold the
 * same bits (the reducer keeps the decoded value of what it sent) and that
 * NONE stays exact. The table it prints is in docs/RESULTS.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "sim/moshsim.h"

#include "test_util.h"

static const char *names[] = {"NONE", "FP16", "BF16", "INT8", "INT4"};

/* RMS of the quantization step of x (n values) under codec c. */
static double step_sq_sum(uint32_t c, const float *x, uint32_t n) {
    double s2 = 0;
    if (c == MOSHPIT_COMPRESS_FP16 || c == MOSHPIT_COMPRESS_BF16) {
        double u = c == MOSHPIT_COMPRESS_FP16 ? 0x1p-11 : 0x1p-8;
        for (uint32_t e = 0; e < n; e++)
            s2 += (2 * u * x[e]) * (2 * u * x[e]);
        return s2;
    }
    if (c == MOSHPIT_COMPRESS_NONE)
        return 0;
    double levels = c == MOSHPIT_COMPRESS_INT8 ? 127 : 7;
    for (uint32_t b = 0; b < n; b += MP_CODEC_BLOCK) {
        double amax = 0;
        uint32_t end = b + MP_CODEC_BLOCK < n ? b + MP_CODEC_BLOCK : n;
        for (uint32_t e = b; e < end; e++)
            amax = fmax(amax, fabs((double)x[e]));
        s2 += (end - b) * (amax / levels) * (amax / levels);
    }
    return s2;
}

typedef struct {
    double max_rel, rms_rel, max_bound, rms_bound;
} err_t;

/* Largest |x| and the sum of squared steps over all peers' values. */
static void measure(uint32_t codec, const moshsim_t *s, uint32_t n,
                    uint32_t count, double *amax, double *s2) {
    *amax = 0;
    *s2 = 0;
    for (uint32_t q = 0; q < n; q++) {
        const float *x = moshsim_values(s, q);
        for (uint32_t e = 0; e < count; e++)
            *amax = fmax(*amax, fabs((double)x[e]));
        *s2 += step_sq_sum(codec, x, count);
    }
}

static double step_of(uint32_t codec, double amax) {
    switch (codec) {
    case MOSHPIT_COMPRESS_FP16:
        return 2 * 0x1p-11 * amax;
    case MOSHPIT_COMPRESS_BF16:
        return 2 * 0x1p-8 * amax;
    case MOSHPIT_COMPRESS_INT8:
        return amax / 127;
    case MOSHPIT_COMPRESS_INT4:
        return amax / 7;
    default:
        return 0;
    }
}

static err_t run(uint32_t codec, uint32_t n, uint32_t d, uint32_t count,
                 uint64_t seed) {
    moshsim_cfg_t c;
    moshsim_cfg_init(&c);
    c.peers = n;
    c.group_size = 8;
    c.dims = d;
    c.count = count;
    c.seed = seed;
    c.random_weights = true;
    c.agg.codec = codec;
    moshsim_t *s = moshsim_new(&c);
    if (s == NULL)
        exit(1);
    double *mu = calloc(count, sizeof *mu);
    double w = 0, x2 = 0, amax = 0;
    for (uint32_t q = 0; q < n; q++) {
        const float *x = moshsim_values(s, q);
        w += moshsim_weight(s, q);
        for (uint32_t e = 0; e < count; e++) {
            mu[e] += moshsim_weight(s, q) * (double)x[e];
            x2 += (double)x[e] * x[e];
            amax = fmax(amax, fabs((double)x[e]));
        }
    }
    for (uint32_t e = 0; e < count; e++)
        mu[e] /= w;
    double rms = sqrt(x2 / ((double)n * count));
    double a_in, s2_in, a_out, s2_out, maxb = 0, s2b = 0;
    measure(codec, s, n, count, &a_in, &s2_in);
    for (uint32_t r = 1; r <= d; r++) {
        moshsim_stats_t st;
        moshsim_round(s, &st);
        measure(codec, s, n, count, &a_out, &s2_out);
        maxb += (step_of(codec, a_in) + step_of(codec, a_out)) / 2;
        s2b += (s2_in + s2_out) / ((double)n * count);
        a_in = a_out;
        s2_in = s2_out;
        CHECK(st.full_groups == n / 8 && st.alone == 0 && st.degraded == 0 &&
                  st.hung == 0,
              "%s N=%u round %u: %u full groups, %u alone, %u degraded",
              names[codec], n, r, st.full_groups, st.alone, st.degraded);
    }
    double emax = 0, e2 = 0;
    int disagree = 0;
    for (uint32_t q = 0; q < n; q++) {
        const float *x = moshsim_values(s, q);
        for (uint32_t e = 0; e < count; e++) {
            double err = (double)x[e] - mu[e];
            emax = fmax(emax, fabs(err));
            e2 += err * err;
        }
        /* the members of q's last group hold q's bits */
        uint64_t gid = moshsim_last_call(s, q)->group_id;
        for (uint32_t k = q + 1; k < n; k++)
            if (moshsim_last_call(s, k)->group_id == gid)
                disagree +=
                    memcmp(moshsim_values(s, k), x, count * sizeof(float)) != 0;
    }
    if (codec != MOSHPIT_COMPRESS_NONE)
        CHECK(disagree == 0, "%s N=%u: %d pairs of group members differ",
              names[codec], n, disagree);
    err_t out;
    out.max_rel = emax / rms;
    out.rms_rel = sqrt(e2 / ((double)n * count)) / rms;
    /* float32 rounding of the d averages on top: 1e-6 relative */
    out.max_bound = (maxb * (1 + 1e-5) + 1e-6 * amax * d) / rms;
    out.rms_bound = 1.5 * sqrt(s2b) / sqrt(12.0) / rms + 1e-6 * amax / rms;
    moshsim_free(s);
    free(mu);
    return out;
}

int main(void) {
    static const struct {
        uint32_t n, d;
    } grids[] = {{8, 1}, {64, 2}, {512, 3}};
    printf("error against the exact weighted mean, relative to the RMS of "
           "the values (max / RMS; bound max / RMS)\n");
    printf("%-5s", "");
    for (size_t g = 0; g < 3; g++)
        printf(" | N=%u M=8 d=%u %24s", grids[g].n, grids[g].d, "");
    printf("\n");
    for (uint32_t codec = 0; codec <= MP_CODEC_MAX; codec++) {
        printf("%-5s", names[codec]);
        for (size_t g = 0; g < 3; g++) {
            uint32_t count = grids[g].n >= 512 ? 1000 : 4099;
            err_t e = run(codec, grids[g].n, grids[g].d, count, 11 + g);
            printf(" | %.2e / %.2e (%.1e / %.1e)", e.max_rel, e.rms_rel,
                   e.max_bound, e.rms_bound);
            CHECK(e.max_rel <= e.max_bound,
                  "%s N=%u d=%u: max error %.3g above the bound %.3g",
                  names[codec], grids[g].n, grids[g].d, e.max_rel, e.max_bound);
            CHECK(e.rms_rel <= e.rms_bound,
                  "%s N=%u d=%u: RMS error %.3g above the bound %.3g",
                  names[codec], grids[g].n, grids[g].d, e.rms_rel, e.rms_bound);
        }
        printf("\n");
    }
    return test_summary("test_sim_compress");
}
