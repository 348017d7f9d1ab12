/* SPDX-License-Identifier: MIT */
/*
 * test_grid.c - tests of the grid keys (core/grid.c): d from the swarm size
 * (floor log, 3/4 margin, clamps, no history), key bytes (d first, then the
 * first d-1 register entries), balanced positions as base-M digits, shifting,
 * and the property the grid exists for: N = M^d peers on balanced positions,
 * grouped by equal keys with slots assigned in any order, hold the exact mean
 * after d rounds (checked with a shuffled slot order, not the tidy one), while
 * one round less does not. Deterministic.
 */
#include "core/grid.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_MAX_PRINTED 50
#include "test_util.h"

static uint64_t rng_state = 0x6a09e667f3bcc908u;

static void test_dims_for(void) {
    CHECK(mp__grid_dims_for(4, 1) == 1, "n=1");
    CHECK(mp__grid_dims_for(4, 15) == 1, "n=15");
    CHECK(mp__grid_dims_for(4, 16) == 2, "n=16");
    CHECK(mp__grid_dims_for(4, 63) == 2, "n=63");
    CHECK(mp__grid_dims_for(4, 64) == 3, "n=64");
    CHECK(mp__grid_dims_for(16, 4096) == 3, "16^3");
    CHECK(mp__grid_dims_for(8, 64) == 2, "8^2");
    CHECK(mp__grid_dims_for(2, UINT64_MAX) == MP_GRID_DIMS_MAX, "clamp");
    CHECK(mp__grid_dims_for(1, 1000) == 1, "m=1");
    CHECK(mp__grid_dims_for(255, UINT64_MAX) == MP_GRID_DIMS_MAX, "big m");
}

static void test_init_args(void) {
    mp_grid_t g;
    CHECK(mp__grid_init(NULL, 4, 0, -1, 1) == MOSHPIT_EINVAL, "NULL");
    CHECK(mp__grid_init(&g, 0, 0, -1, 1) == MOSHPIT_EINVAL, "m=0");
    CHECK(mp__grid_init(&g, 256, 0, -1, 1) == MOSHPIT_EINVAL, "m=256");
    CHECK(mp__grid_init(&g, 4, MP_GRID_DIMS_MAX + 1, -1, 1) == MOSHPIT_EINVAL,
          "dims");
    CHECK(mp__grid_init(&g, 4, 0, -2, 1) == MOSHPIT_EINVAL, "position");
    CHECK(mp__grid_init(&g, 4, 3, 0, 1) == MOSHPIT_OK, "ok");
}

/* d follows the estimate both ways and never depends on earlier ones, so
 * an old member and a newcomer that see the same swarm agree on d. */
static void test_dims_follow_estimate(void) {
    mp_grid_t g, fresh;
    CHECK(mp__grid_init(&g, 4, 0, -1, 7) == MOSHPIT_OK, "init");
    CHECK(g.dims == 1, "starts at 1");
    mp__grid_set_estimate(&g, 11);
    CHECK(g.dims == 1, "1 at 11: %u", g.dims);
    mp__grid_set_estimate(&g, 12);
    CHECK(g.dims == 2, "grows at 12 = 3/4 16: %u", g.dims);
    mp__grid_set_estimate(&g, 11);
    CHECK(g.dims == 1, "back to 1 at 11: %u", g.dims);
    /* a full grid keeps its d with a quarter of it unseen */
    mp__grid_set_estimate(&g, 64);
    CHECK(g.dims == 3, "64 = 4^3: %u", g.dims);
    mp__grid_set_estimate(&g, 48);
    CHECK(g.dims == 3, "48: %u", g.dims);
    mp__grid_set_estimate(&g, 47);
    CHECK(g.dims == 2, "47: %u", g.dims);
    CHECK(mp__grid_dims_auto(8, 63) == 2 && mp__grid_dims_auto(8, 47) == 1,
          "8^2 grid");
    for (uint64_t n = 1; n <= 300; n++) {
        CHECK(mp__grid_init(&fresh, 4, 0, -1, 9) == MOSHPIT_OK, "init");
        mp__grid_set_estimate(&g, n + 40);
        mp__grid_set_estimate(&g, n);
        mp__grid_set_estimate(&fresh, n);
        CHECK(g.dims == fresh.dims && g.dims == mp__grid_dims_auto(4, n),
              "n=%u: old member d=%u, newcomer d=%u", (unsigned)n, g.dims,
              fresh.dims);
    }
    mp__grid_set_estimate(&g, 70);
    CHECK(g.dims == 3, "jumps to 3");
    mp__grid_set_estimate(&g, 2);
    CHECK(g.dims == 1, "falls to 1: %u", g.dims);
    /* fixed d never moves */
    CHECK(mp__grid_init(&g, 4, 3, -1, 7) == MOSHPIT_OK, "init fixed");
    mp__grid_set_estimate(&g, 1);
    CHECK(g.dims == 3, "fixed");
    mp__grid_set_estimate(&g, 1u << 30);
    CHECK(g.dims == 3, "fixed");
}

static void test_key_and_shift(void) {
    mp_grid_t g;
    /* position 27 with m=3: digits 0,0,0,1 -> register 0,0,1,0.. */
    CHECK(mp__grid_init(&g, 3, 4, 27, 0) == MOSHPIT_OK, "init");
    uint8_t k[MP_GRID_KEY_MAX];
    size_t n = mp__grid_key(&g, k);
    CHECK(n == 4 && k[0] == 4 && k[1] == 0 && k[2] == 0 && k[3] == 1,
          "key of 27: %zu %u %u %u %u", n, k[0], k[1], k[2], k[3]);
    mp__grid_shift(&g, 2);
    n = mp__grid_key(&g, k);
    CHECK(n == 4 && k[1] == 0 && k[2] == 1 && k[3] == 2, "shifted");
    mp__grid_shift(&g, 5); /* taken modulo m */
    n = mp__grid_key(&g, k);
    CHECK(k[1] == 1 && k[2] == 2 && k[3] == 2, "mod m");
    /* d = 1: empty coordinates, shifting is a no-op */
    CHECK(mp__grid_init(&g, 3, 1, 5, 0) == MOSHPIT_OK, "init");
    mp__grid_shift(&g, 1);
    n = mp__grid_key(&g, k);
    CHECK(n == 1 && k[0] == 1, "d=1 key");
    /* random register stays in range and depends on the seed */
    mp_grid_t a, b;
    CHECK(mp__grid_init(&a, 5, 8, -1, 1) == MOSHPIT_OK, "a");
    CHECK(mp__grid_init(&b, 5, 8, -1, 2) == MOSHPIT_OK, "b");
    bool same = true, in_range = true;
    for (uint32_t i = 0; i < MP_GRID_DIMS_MAX - 1; i++) {
        same &= a.reg[i] == b.reg[i];
        in_range &= a.reg[i] < 5 && b.reg[i] < 5;
    }
    CHECK(!same && in_range, "random registers");
    for (int i = 0; i < 100; i++) {
        mp__grid_shift_random(&a);
        n = mp__grid_key(&a, k);
        for (size_t j = 1; j < n; j++)
            in_range &= k[j] < 5;
    }
    CHECK(in_range, "random shifts in range");
}

/* The layout for n peers (mp__grid_layout): d by the 3/4 rule; when m^d
 * holds n, the radices are at most m and non-increasing, their product is
 * at least n, and no other such tuple has a smaller product, or the same
 * product with a larger smallest radix (checked by brute force); when it
 * does not, the full m^d grid. */
static uint64_t brute_best;
static uint32_t brute_min;
static void brute(uint32_t m, uint32_t d, uint32_t k, uint32_t cap,
                  uint64_t prod, uint64_t n) {
    if (k == d) {
        if (prod >= n &&
            (prod < brute_best || (prod == brute_best && cap > brute_min))) {
            brute_best = prod;
            brute_min = cap;
        }
        return;
    }
    for (uint32_t r = 1; r <= cap; r++)
        brute(m, d, k + 1, r, prod * r, n);
}

static void test_layout(void) {
    static const struct {
        uint32_t m;
        uint64_t n;
        const char *want;
    } cases[] = {
        {32, 900, "30x30"},
        {32, 768, "32x24"},
        {32, 512, "32"},
        {32, 1024, "32x32"},
        {8, 1024, "8x8x8"},
        {8, 448, "8x8x7"},
        {16, 10000, "16x16x16"},
        {16, 3072, "16x16x12"},
        {4, 16, "4x4"},
        {4, 12, "4x3"},
        {4, 13, "4x4"},
        {8, 8, "8"},
        {8, 5, "5"},
        {16, 256, "16x16"},
        {5, 100, "5x5x4"},
        {2, 1000, "2x2x2x2x2x2x2x2"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t r[MP_GRID_DIMS_MAX];
        uint32_t d = mp__grid_layout(cases[c].m, cases[c].n, r);
        char got[64] = "";
        size_t len = 0;
        for (uint32_t k = 0; k < d; k++)
            len += (size_t)snprintf(got + len, sizeof got - len, "%s%u",
                                    k ? "x" : "", r[k]);
        CHECK(strcmp(got, cases[c].want) == 0, "M=%u N=%llu: %s, want %s",
              cases[c].m, (unsigned long long)cases[c].n, got, cases[c].want);
    }
    for (uint32_t m = 2; m <= 9; m++) {
        for (uint64_t n = 1; n <= 700; n++) {
            uint8_t r[MP_GRID_DIMS_MAX];
            uint32_t d = mp__grid_layout(m, n, r);
            uint64_t full = 1, prod = 1;
            for (uint32_t k = 0; k < d; k++) {
                full *= m;
                prod *= r[k];
                CHECK(r[k] >= 1 && r[k] <= m && (k == 0 || r[k] <= r[k - 1]),
                      "M=%u N=%llu: radix %u = %u", m, (unsigned long long)n, k,
                      r[k]);
            }
            CHECK(d == mp__grid_dims_auto(m, n), "M=%u N=%llu: d=%u", m,
                  (unsigned long long)n, d);
            if (full < n) { /* keys of more than m peers: the full grid */
                CHECK(prod == full, "M=%u N=%llu: not the full grid", m,
                      (unsigned long long)n);
                continue;
            }
            brute_best = UINT64_MAX;
            brute_min = 0;
            brute(m, d, 0, m, 1, n);
            CHECK(prod == brute_best && r[d - 1] == brute_min,
                  "M=%u N=%llu: product %llu (smallest radix %u), best %llu "
                  "(%u)",
                  m, (unsigned long long)n, (unsigned long long)prod, r[d - 1],
                  (unsigned long long)brute_best, brute_min);
        }
    }
    /* the balanced register follows the layout until the first round */
    mp_grid_t g;
    CHECK(mp__grid_init(&g, 32, 0, 899, 1) == MOSHPIT_OK, "init");
    mp__grid_set_estimate(&g, 1024);
    uint8_t k[MP_GRID_KEY_MAX];
    CHECK(mp__grid_key(&g, k) == 2 && k[1] == 899 / 32, "32x32: row %u", k[1]);
    mp__grid_set_estimate(&g, 900);
    CHECK(mp__grid_key(&g, k) == 2 && k[1] == 899 / 30, "30x30: row %u", k[1]);
    /* a group larger than its radix (a late peer on a stale key) wraps */
    mp__grid_shift(&g, 30);
    CHECK(mp__grid_key(&g, k) == 2 && k[1] == 0, "slot 30 of 30 wraps: %u",
          k[1]);
    /* after a real group the register stays when the layout changes */
    mp__grid_set_estimate(&g, 1024);
    CHECK(mp__grid_key(&g, k) == 2 && k[1] == 0, "kept: %u", k[1]);
    /* random positions keep the 3/4 rule and coordinates below M */
    CHECK(mp__grid_init(&g, 32, 0, -1, 1) == MOSHPIT_OK, "init");
    mp__grid_set_estimate(&g, 900);
    CHECK(g.dims == mp__grid_dims_auto(32, 900), "random: d %u", g.dims);
}

/* n peers on balanced positions, the layout chosen from n; every round,
 * peers with equal keys form one group (of the round's radix), get the
 * group mean and take slots in a shuffled order. */
static double run_layout(uint32_t m, size_t n, uint32_t d, uint32_t rounds) {
    mp_grid_t *g = calloc(n, sizeof(*g));
    double *x = calloc(n, sizeof(*x)), *w = calloc(n, sizeof(*w));
    uint64_t *keys = calloc(n, sizeof(*keys));
    uint32_t *members = calloc(n, sizeof(*members));
    bool *done = calloc(n, sizeof(*done));
    double worst = INFINITY;
    if (!g || !x || !w || !keys || !members || !done)
        goto out;
    double sw = 0, swx = 0;
    for (size_t i = 0; i < n; i++) {
        /* auto d from the exact size must agree with d */
        CHECK(mp__grid_init(&g[i], m, 0, (int64_t)i, i) == MOSHPIT_OK, "init");
        mp__grid_set_estimate(&g[i], n);
        CHECK(g[i].dims == d, "auto d %u != %u", g[i].dims, d);
        x[i] = (double)(test_splitmix64(&rng_state) % 1000000) / 1000.0;
        w[i] = 0.5 + (double)(test_splitmix64(&rng_state) % 100);
        sw += w[i];
        swx += w[i] * x[i];
    }
    double mean = swx / sw;
    for (uint32_t r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i++) {
            uint8_t k[MP_GRID_KEY_MAX];
            size_t kl = mp__grid_key(&g[i], k);
            uint64_t v = 0;
            for (size_t j = 0; j < kl; j++)
                v = v * 256 + k[j];
            keys[i] = v;
            done[i] = false;
        }
        for (size_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            uint32_t cnt = 0;
            for (size_t j = i; j < n; j++)
                if (!done[j] && keys[j] == keys[i]) {
                    members[cnt++] = (uint32_t)j;
                    done[j] = true;
                }
            uint32_t want = g[i].radix[r % d];
            CHECK(cnt == want, "M=%u N=%zu round %u: group of %u, want %u", m,
                  n, r, cnt, want);
            double gw = 0, gwx = 0;
            for (uint32_t j = 0; j < cnt; j++) {
                gw += w[members[j]];
                gwx += w[members[j]] * x[members[j]];
            }
            /* shuffle slots: any distinct assignment must work */
            for (uint32_t j = cnt; j > 1; j--) {
                uint32_t s = (uint32_t)(test_splitmix64(&rng_state) % j);
                uint32_t t = members[j - 1];
                members[j - 1] = members[s];
                members[s] = t;
            }
            for (uint32_t j = 0; j < cnt; j++) {
                x[members[j]] = gwx / gw;
                w[members[j]] = gw; /* carry the group weight */
                mp__grid_shift(&g[members[j]], j);
            }
        }
    }
    worst = 0;
    for (size_t i = 0; i < n; i++) {
        double dev = fabs(x[i] - mean) / fabs(mean);
        if (dev > worst)
            worst = dev;
    }
out:
    free(g);
    free(x);
    free(w);
    free(keys);
    free(members);
    free(done);
    return worst;
}

static double run_grid(uint32_t m, uint32_t d, uint32_t rounds) {
    size_t n = 1;
    for (uint32_t i = 0; i < d; i++)
        n *= m;
    return run_layout(m, n, d, rounds);
}

/* N that the layout fills exactly: exact after d rounds, not after d-1 */
static void test_exact_on_layouts(void) {
    static const struct {
        uint32_t m, n, d;
    } cases[] = {{32, 900, 2},  {32, 768, 2}, {8, 448, 3},
                 {16, 3072, 3}, {4, 12, 2},   {5, 100, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double dev = run_layout(cases[c].m, cases[c].n, cases[c].d, cases[c].d);
        CHECK(dev < 1e-12, "M=%u N=%u: deviation %g after d rounds", cases[c].m,
              cases[c].n, dev);
        dev = run_layout(cases[c].m, cases[c].n, cases[c].d, cases[c].d - 1);
        CHECK(dev > 1e-6, "M=%u N=%u: already exact after d-1 (%g)", cases[c].m,
              cases[c].n, dev);
    }
}

static void test_exact_on_full_grid(void) {
    static const uint32_t cases[][2] = {{2, 1}, {4, 2},  {8, 2}, {3, 4},
                                        {2, 6}, {16, 3}, {5, 3}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint32_t m = cases[c][0], d = cases[c][1];
        double dev = run_grid(m, d, d);
        CHECK(dev < 1e-12, "M=%u d=%u: deviation %g after d rounds", m, d, dev);
        if (d >= 2) {
            dev = run_grid(m, d, d - 1);
            CHECK(dev > 1e-6, "M=%u d=%u: already exact after d-1 (%g)", m, d,
                  dev);
        }
    }
}

int main(void) {
    test_dims_for();
    test_init_args();
    test_dims_follow_estimate();
    test_key_and_shift();
    test_exact_on_full_grid();
    test_layout();
    test_exact_on_layouts();
    return test_summary("test_grid");
}
