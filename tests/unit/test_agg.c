/* SPDX-License-Identifier: MIT */
/*
 * test_agg.c - the aggregation rules of core/agg.c as pure functions:
 * the trimmed mean against hand-computed values (ties broken by position,
 * weights, c = 1..4 where the trim is clamped, the output aliasing an
 * input) and against a brute-force oracle on random inputs; CenteredClip
 * on identical inputs, with a radius that clips nobody (the weighted mean
 * exactly), with one outlier at 1e20 (the contraction bound derived in
 * tests/sim/test_sim_robust.c: ||r - h|| <= delta^L diam + delta R /
 * (1 - delta)), from the median with c = 1 and 2, and the auto radius; the
 * relative weight bound; the group key suffix (encoding, every rejected
 * form); configuration checks and defaults. Deterministic.
 */
#include "core/agg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"

#define TEST_MAX_PRINTED 50
#include "test_util.h"

static uint64_t rng = 0x7a6e5d4c3b2a1908u;

static double rnd01(void) {
    return (double)(test_splitmix64(&rng) >> 11) * 0x1.0p-53;
}

/* Trimmed mean of one element by the definition: sort (value, position),
 * drop t at each end, weighted mean of the rest summed in position order. */
static double oracle_trimmed(const double *v, const double *w, uint32_t c,
                             uint32_t trim) {
    uint32_t idx[64];
    for (uint32_t k = 0; k < c; k++)
        idx[k] = k;
    for (uint32_t a = 0; a < c; a++) /* selection sort, (value, k) */
        for (uint32_t b = a + 1; b < c; b++)
            if (v[idx[b]] < v[idx[a]] ||
                (v[idx[b]] == v[idx[a]] && idx[b] < idx[a])) {
                uint32_t t = idx[a];
                idx[a] = idx[b];
                idx[b] = t;
            }
    uint32_t t = trim < (c - 1) / 2 ? trim : (c - 1) / 2;
    bool keep[64] = {false};
    for (uint32_t j = t; j < c - t; j++)
        keep[idx[j]] = true;
    double num = 0, den = 0; /* summed in position order */
    for (uint32_t k = 0; k < c; k++)
        if (keep[k]) {
            num += w[k] * v[k];
            den += w[k];
        }
    return num / den;
}

static void trimmed_one(const float *vals, const double *w, uint32_t c,
                        uint32_t trim, float *out) {
    const float *x[64];
    for (uint32_t k = 0; k < c; k++)
        x[k] = vals + k;
    mp__agg_trimmed(x, w, c, 1, trim, out);
}

static void test_trimmed(void) {
    float r;
    /* c = 8, trim 1: drop 1 and 100, mean of 2..7 */
    float v8[8] = {5, 100, 2, 7, 1, 3, 4, 6};
    double w1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    trimmed_one(v8, w1, 8, 1, &r);
    CHECK(r == 4.5f, "trim 1 of 8: %g", r);
    trimmed_one(v8, w1, 8, 3, &r);
    CHECK(r == 4.5f, "trim 3 of 8 (middle two 4, 5): %g", r);
    trimmed_one(v8, w1, 8, 31, &r);
    CHECK(r == 4.5f, "trim clamped to 3: %g", r);
    /* weights only average the kept values */
    double w8[8] = {3, 1000, 1, 1, 1000, 1, 1, 1};
    trimmed_one(v8, w8, 8, 1, &r);
    /* kept: 2(w1) 3(w1) 4(w1) 5(w3) 6(w1) 7(w1) = 37 / 8 */
    CHECK(r == 4.625f, "weighted kept values: %g", r);
    /* ties: by position. Values 1,1,3,9, weights 10,1,1,1: the first 1
     * (position 0, weight 10) is the one dropped */
    float vt[4] = {1, 1, 3, 9};
    double wt[4] = {10, 1, 1, 1};
    trimmed_one(vt, wt, 4, 1, &r);
    CHECK(r == 2.0f, "tie dropped by position: %g", r);
    float vt2[4] = {1, 3, 9, 1}; /* same values, the heavy 1 now last */
    double wt2[4] = {1, 1, 1, 10};
    trimmed_one(vt2, wt2, 4, 1, &r);
    CHECK(fabsf(r - 13.0f / 11.0f) < 1e-6f, "tie, other order: %g", r);
    /* c small: trim clamped to (c - 1) / 2 */
    float v1[1] = {42};
    double ww[3] = {1, 3, 1};
    trimmed_one(v1, ww, 1, 5, &r);
    CHECK(r == 42, "c = 1: %g", r);
    float v2[2] = {0, 4};
    trimmed_one(v2, ww + 1, 2, 5, &r); /* weights 3, 1: nothing dropped */
    CHECK(r == 1, "c = 2 is the weighted mean: %g", r);
    float v3[3] = {7, -100, 1e20f};
    trimmed_one(v3, ww, 3, 1, &r);
    CHECK(r == 7, "c = 3 is the median: %g", r);
    /* all equal */
    float ve[5] = {2.5f, 2.5f, 2.5f, 2.5f, 2.5f};
    trimmed_one(ve, w1, 5, 2, &r);
    CHECK(r == 2.5f, "equal values: %g", r);
    /* huge finite values do not overflow */
    float vh[5] = {3.4e38f, 3.4e38f, 3.4e38f, -3.4e38f, 1};
    double wh[5] = {1e15, 1e15, 1e15, 1e15, 1e15};
    trimmed_one(vh, wh, 5, 1, &r); /* kept: 1, 3.4e38, 3.4e38 */
    CHECK(r == (float)((1.0 + 2.0 * (double)3.4e38f) / 3.0), "huge values: %g",
          r);

    /* out aliasing an input, several elements */
    float a[3] = {1, 2, 3}, b[3] = {3, 2, 1}, c3[3] = {2, 9, 2};
    const float *x[3] = {a, b, c3};
    mp__agg_trimmed(x, w1, 3, 3, 1, a);
    CHECK(a[0] == 2 && a[1] == 2 && a[2] == 2, "aliased: %g %g %g", a[0], a[1],
          a[2]);

    /* random inputs against the oracle, with many ties */
    long bad = 0;
    for (int t = 0; t < 20000; t++) {
        uint32_t c = 1 + (uint32_t)(test_splitmix64(&rng) % 64);
        uint32_t trim = (uint32_t)(test_splitmix64(&rng) % 34);
        float v[64];
        double dv[64], w[64];
        int levels = 1 + (int)(test_splitmix64(&rng) % 6);
        for (uint32_t k = 0; k < c; k++) {
            v[k] = t % 2 ? (float)(test_splitmix64(&rng) % (unsigned)levels)
                         : (float)(rnd01() * 2 - 1);
            dv[k] = v[k];
            w[k] = t % 3 ? 0.01 + rnd01() * 10 : 1.0;
        }
        trimmed_one(v, w, c, trim, &r);
        float want = (float)oracle_trimmed(dv, w, c, trim);
        bad += r != want;
    }
    CHECK(bad == 0, "%ld random trimmed means differ from the oracle", bad);
}

static double norm_diff(const float *a, const double *h, size_t m) {
    double s = 0;
    for (size_t e = 0; e < m; e++)
        s += ((double)a[e] - h[e]) * ((double)a[e] - h[e]);
    return sqrt(s);
}

static void test_clip(void) {
    enum { M = 256, C = 8 };
    static float x[C][M], out[M];
    static double scratch[2 * M], h[M];
    const float *xp[C];
    double w[C];
    for (uint32_t k = 0; k < C; k++)
        xp[k] = x[k];

    /* identical inputs: the result is that input, any radius */
    for (uint32_t k = 0; k < C; k++) {
        w[k] = 1 + k;
        for (size_t e = 0; e < M; e++)
            x[k][e] = (float)e * 0.25f;
    }
    for (int auto_tau = 0; auto_tau < 2; auto_tau++) {
        mp__agg_clip(xp, w, C, M, auto_tau ? 0.0f : 0.5f, 5, scratch, out);
        CHECK(memcmp(out, x[0], sizeof out) == 0, "identical inputs");
    }

    /* random inputs in [-1, 1]; a radius that clips nobody from the start
     * (R >= 2 diam): one step lands on the weighted mean, and it stays */
    double wsum = 0;
    for (uint32_t k = 0; k < C; k++) {
        w[k] = 0.5 + rnd01();
        wsum += w[k];
        for (size_t e = 0; e < M; e++)
            x[k][e] = (float)(2 * rnd01() - 1);
    }
    for (size_t e = 0; e < M; e++) {
        h[e] = 0;
        for (uint32_t k = 0; k < C; k++)
            h[e] += w[k] * x[k][e];
        h[e] /= wsum;
    }
    mp__agg_clip(xp, w, C, M, 4.0f, 3, scratch, out);
    double err = norm_diff(out, h, M);
    CHECK(err < 1e-6, "big radius = weighted mean, error %g", err);

    /* the same with one outlier at 1e20 (member 3, weight w3): the honest
     * mean h of the 7 others, diam of their bounding box, delta = w3 / W,
     * radius R = 4 sqrt(M) >= 2 diam; bound after L steps:
     * ||r - h|| <= delta^L diam + delta R / (1 - delta) */
    double hw = 0, diam = 0;
    for (uint32_t k = 0; k < C; k++)
        hw += k == 3 ? 0 : w[k];
    for (size_t e = 0; e < M; e++) {
        double lo = 2, hi = -2;
        h[e] = 0;
        for (uint32_t k = 0; k < C; k++) {
            if (k == 3)
                continue;
            h[e] += w[k] * x[k][e];
            lo = fmin(lo, x[k][e]);
            hi = fmax(hi, x[k][e]);
        }
        h[e] /= hw;
        diam += (hi - lo) * (hi - lo);
    }
    diam = sqrt(diam);
    for (size_t e = 0; e < M; e++)
        x[3][e] = 1e20f;
    double delta = w[3] / wsum, radius = 4.0 * sqrt((double)M);
    CHECK(radius >= 2 * diam && delta * (diam + radius) <= diam,
          "preconditions of the bound: R %g diam %g delta %g", radius, diam,
          delta);
    for (uint32_t iters = 1; iters <= 20; iters *= 2) {
        mp__agg_clip(xp, w, C, M, 4.0f, iters, scratch, out);
        err = norm_diff(out, h, M);
        double bound = pow(delta, iters) * diam + delta * radius / (1 - delta);
        CHECK(err <= bound * (1 + 1e-9) + 1e-6,
              "outlier, L = %u: error %g > bound %g", iters, err, bound);
    }
    /* auto radius: within L delta diam of the honest box */
    mp__agg_clip(xp, w, C, M, 0.0f, 5, scratch, out);
    double outside = 0;
    for (size_t e = 0; e < M; e++) {
        double lo = 2, hi = -2;
        for (uint32_t k = 0; k < C; k++)
            if (k != 3) {
                lo = fmin(lo, x[k][e]);
                hi = fmax(hi, x[k][e]);
            }
        double o = out[e] < lo ? lo - out[e] : out[e] > hi ? out[e] - hi : 0;
        outside += o * o;
    }
    CHECK(sqrt(outside) <= 5 * delta * diam + 1e-6,
          "auto radius: %g outside the honest box (bound %g)", sqrt(outside),
          5 * delta * diam);
    err = norm_diff(out, h, M);
    CHECK(err / sqrt((double)M) < 0.5, "auto radius: rms error %g",
          err / sqrt((double)M));

    /* c = 1: the input; c = 2 with equal weights: starts at the midpoint,
     * where both are at the radius (auto): a fixed point */
    mp__agg_clip(xp, w, 1, M, 0.0f, 5, scratch, out);
    CHECK(memcmp(out, x[0], sizeof out) == 0, "c = 1");
    double w2[2] = {1.5, 1.5};
    mp__agg_clip(xp, w2, 2, M, 0.0f, 5, scratch, out);
    for (size_t e = 0; e < M; e++)
        h[e] = 0.5 * ((double)x[0][e] + (double)x[1][e]);
    err = norm_diff(out, h, M);
    CHECK(err < 1e-5, "c = 2: error %g", err);

    /* aliasing: out is x[0] */
    static float copy[C][M], ref[M];
    memcpy(copy, x, sizeof copy);
    mp__agg_clip(xp, w, C, M, 0.0f, 5, scratch, ref);
    mp__agg_clip(xp, w, C, M, 0.0f, 5, scratch, x[0]);
    CHECK(memcmp(ref, x[0], sizeof ref) == 0, "aliased output");
    memcpy(x, copy, sizeof copy);

    /* a single element: the trimmed median start, then the clip */
    float s[4] = {0, 1, 2, 1000};
    const float *sp[4] = {s, s + 1, s + 2, s + 3};
    double sw[4] = {1, 1, 1, 1};
    float r;
    mp__agg_clip(sp, sw, 4, 1, 0.0f, 50, scratch, &r);
    /* median 1.5, R = lower median of |x - 1.5| = 0.5: the fixed point
     * balances 0 -> clipped, 1, 2, 1000 -> clipped: v = 1.5 */
    CHECK(fabsf(r - 1.5f) < 1e-6f, "one element: %g", r);
}

static void test_weight_bound(void) {
    double w[5] = {1, 1, 1, 1e15, 0}, out[5];
    mp__agg_weight_bound(5, w, 4, out);
    CHECK(out[0] == 1 && out[3] == 4 && out[4] == 0, "cap 4x median 1");
    mp__agg_weight_bound(5, w, 0, out);
    CHECK(memcmp(out, w, sizeof w) == 0, "cap 0: unchanged");
    double z[3] = {0, 0, 0};
    mp__agg_weight_bound(3, z, 4, z);
    CHECK(z[0] == 0 && z[2] == 0, "all zero");
    double v[5] = {0, 0, 2, 3, 100};
    mp__agg_weight_bound(5, v, 4, v); /* positives 2, 3, 100: median 3 */
    CHECK(v[2] == 2 && v[3] == 3 && v[4] == 12 && v[0] == 0, "in place");
    double e[4] = {5, 1, 9, 2}; /* lower median of 1 2 5 9 is 2 */
    mp__agg_weight_bound(4, e, 1, e);
    CHECK(e[0] == 2 && e[1] == 1 && e[2] == 2 && e[3] == 2, "K = 1");
}

static void test_key_suffix(void) {
    uint8_t s[MP_AGG_KEY_MAX];
    mp_agg_t a;
    memset(&a, 0, sizeof a);
    CHECK(mp__agg_key_suffix(&a, s) == 0, "plain mean: no suffix");
    CHECK(mp__agg_key_suffix_ok(s, 0), "empty suffix ok");
    a.weight_cap = 300;
    CHECK(mp__agg_key_suffix(&a, s) == 3 && s[0] == 0 && s[1] == 44 &&
              s[2] == 1 && mp__agg_key_suffix_ok(s, 3),
          "mean with a bound");
    a.mode = MOSHPIT_AGG_TRIMMED_MEAN;
    a.trim = 2;
    a.weight_cap = 4;
    CHECK(mp__agg_key_suffix(&a, s) == 4 && s[0] == 1 && s[1] == 4 &&
              s[2] == 0 && s[3] == 2 && mp__agg_key_suffix_ok(s, 4),
          "trimmed");
    a.mode = MOSHPIT_AGG_CENTERED_CLIP;
    a.tau = 1.0f;
    a.iters = 5;
    CHECK(mp__agg_key_suffix(&a, s) == 8 && s[0] == 2 && s[3] == 0 &&
              s[4] == 0 && s[5] == 0x80 && s[6] == 0x3f && s[7] == 5 &&
              mp__agg_key_suffix_ok(s, 8),
          "clip, tau 1.0f = 0x3f800000");
    a.tau = -0.0f;
    CHECK(mp__agg_key_suffix(&a, s) == 8 && s[6] == 0 &&
              mp__agg_key_suffix_ok(s, 8),
          "-0 is encoded as +0");
    a.weight_cap = 0;
    CHECK(mp__agg_key_suffix(&a, s) == 8 && mp__agg_key_suffix_ok(s, 8),
          "clip without a bound");

    /* rejected forms */
    static const struct {
        uint8_t b[9];
        size_t n;
        const char *what;
    } bad[] = {
        {{0}, 1, "one byte"},
        {{0, 1}, 2, "two bytes"},
        {{0, 0, 0}, 3, "mean with bound 0"},
        {{0, 1, 0, 0}, 4, "mean too long"},
        {{1, 4, 0}, 3, "trimmed too short"},
        {{1, 4, 0, 0}, 4, "trim 0"},
        {{1, 4, 0, 32}, 4, "trim 32"},
        {{1, 4, 0, 1, 0}, 5, "trimmed too long"},
        {{2, 4, 0, 0, 0, 0, 0, 0}, 8, "iters 0"},
        {{2, 4, 0, 0, 0, 0, 0, 101}, 8, "iters 101"},
        {{2, 4, 0, 0, 0, 0x80, 0xbf, 5}, 8, "tau -1"},
        {{2, 4, 0, 0, 0, 0, 0x80, 5}, 8, "tau -0"},
        {{2, 4, 0, 0, 0, 0x80, 0x7f, 5}, 8, "tau inf"},
        {{2, 4, 0, 1, 0, 0xc0, 0x7f, 5}, 8, "tau NaN"},
        {{2, 4, 0, 0, 0, 0, 0, 5}, 7, "clip too short"},
        {{2, 4, 0, 0, 0, 0, 0, 5, 0}, 9, "clip too long"},
        {{3, 4, 0, 1}, 4, "mode 3"},
        {{255, 4, 0, 1}, 4, "mode 255"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(!mp__agg_key_suffix_ok(bad[i].b, bad[i].n), "accepted: %s",
              bad[i].what);
    /* every 3- and 4-byte suffix: accepted exactly when the encoder makes
     * it from a valid rule */
    long wrong = 0;
    for (uint32_t m = 0; m < 4; m++)
        for (uint32_t cap = 0; cap < 70000; cap += 97)
            for (uint32_t t = 0; t < 40; t++) {
                uint8_t b[4] = {(uint8_t)m, (uint8_t)cap, (uint8_t)(cap >> 8),
                                (uint8_t)t};
                bool want4 = m == 1 && t >= 1 && t <= 31 && cap < 65536;
                bool want3 = m == 0 && cap > 0 && cap < 65536;
                if (cap >= 65536)
                    continue;
                wrong += mp__agg_key_suffix_ok(b, 4) != want4;
                wrong += mp__agg_key_suffix_ok(b, 3) != want3;
            }
    CHECK(wrong == 0, "%ld short suffixes judged wrongly", wrong);
}

static void test_config(void) {
    moshpit_config_t c;
    mp_agg_t a;
    moshpit_config_init(&c);
    CHECK(c.aggregation == MOSHPIT_AGG_MEAN && c.trim == 1 && c.clip_tau == 0 &&
              c.clip_iters == 5 && c.weight_cap == 0,
          "defaults");
    CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_OK &&
              a.mode == MOSHPIT_AGG_MEAN && a.weight_cap == 0 &&
              mp__agg_valid(&a),
          "default rule: mean, no bound");
    uint8_t s[MP_AGG_KEY_MAX];
    CHECK(mp__agg_key_suffix(&a, s) == 0, "default key unchanged");
    c.aggregation = MOSHPIT_AGG_TRIMMED_MEAN;
    CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_OK && a.weight_cap == 4 &&
              a.trim == 1,
          "trimmed: K 4 by default");
    c.weight_cap = 9;
    CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_OK && a.weight_cap == 9,
          "explicit K");
    c.aggregation = MOSHPIT_AGG_CENTERED_CLIP;
    c.clip_tau = 0.25f;
    CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_OK && a.tau == 0.25f &&
              a.iters == 5 && mp__agg_valid(&a),
          "clip");

#define BAD(stmt, what)                                                        \
    do {                                                                       \
        moshpit_config_init(&c);                                               \
        stmt;                                                                  \
        CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_EINVAL, "accepted: %s",   \
              what);                                                           \
    } while (0)
    BAD(c.aggregation = 3, "mode 3");
    BAD(c.aggregation = -1, "mode -1");
    BAD((c.aggregation = MOSHPIT_AGG_TRIMMED_MEAN, c.trim = 0), "trim 0");
    BAD((c.aggregation = MOSHPIT_AGG_TRIMMED_MEAN, c.trim = 4),
        "2 * trim >= group_size 8");
    BAD(c.trim = 32, "trim 32 (any mode)");
    BAD(c.clip_tau = -1, "tau -1");
    BAD(c.clip_tau = NAN, "tau NaN");
    BAD(c.clip_tau = INFINITY, "tau inf");
    BAD(c.clip_iters = 0, "iters 0");
    BAD(c.clip_iters = 101, "iters 101");
    BAD(c.weight_cap = 65536, "K 65536");
#undef BAD
    moshpit_config_init(&c);
    c.aggregation = MOSHPIT_AGG_TRIMMED_MEAN;
    c.trim = 3;
    CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_OK, "trim 3 of 8");
    c.group_size = 64;
    c.trim = 31;
    CHECK(mp__agg_from_config(&c, &a) == MOSHPIT_OK, "trim 31 of 64");

    memset(&a, 0, sizeof a);
    CHECK(mp__agg_valid(&a), "zero rule valid");
    CHECK(mp__agg_min_contrib(&a) == 1, "mean runs with one contribution");
    a.mode = MOSHPIT_AGG_TRIMMED_MEAN;
    a.trim = 3;
    CHECK(mp__agg_min_contrib(&a) == 7, "trim 3 needs 7");
    a.mode = MOSHPIT_AGG_CENTERED_CLIP;
    CHECK(mp__agg_min_contrib(&a) == 3, "CenteredClip needs 3");
    a.mode = MOSHPIT_AGG_MEAN;
    a.trim = 0;
    a.mode = MOSHPIT_AGG_CENTERED_CLIP;
    CHECK(!mp__agg_valid(&a), "clip with 0 iterations");
    a.iters = 1;
    a.tau = NAN;
    CHECK(!mp__agg_valid(&a), "NaN tau");
    a.tau = 0;
    a.mode = 3;
    CHECK(!mp__agg_valid(&a), "mode 3");
    CHECK(!mp__agg_valid(NULL), "NULL");
}

int main(void) {
    test_trimmed();
    test_clip();
    test_weight_bound();
    test_key_suffix();
    test_config();
    return test_summary("test_agg");
}
