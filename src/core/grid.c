/* SPDX-License-Identifier: MIT */
/*
 * grid.c - Moshpit grid keys: see grid.h.
 */
#include "grid.h"

#include <string.h>

#include "base/base.h"

static uint64_t grid_rand(mp_grid_t *g) {
    return mp__splitmix64(&g->rng);
}

/* m^k, saturating at UINT64_MAX */
static uint64_t grid_pow(uint32_t m, uint32_t k) {
    uint64_t r = 1;
    for (uint32_t i = 0; i < k; i++) {
        if (r > UINT64_MAX / m)
            return UINT64_MAX;
        r *= m;
    }
    return r;
}

uint32_t mp__grid_dims_for(uint32_t m, uint64_t n) {
    if (m < 2)
        return 1;
    uint32_t d = 1;
    while (d < MP_GRID_DIMS_MAX && grid_pow(m, d + 1) <= n)
        d++;
    return d;
}

/* Depth-first search for the layout: radices r[k..d) below or equal to
 * `cap` (non-increasing), with prod * r[k] * ... >= n. */
typedef struct {
    uint64_t n;
    uint32_t d;
    uint32_t budget; /* nodes left: a bound on the time, the same for all */
    uint64_t best_prod;
    uint32_t best_min;
    uint8_t cur[MP_GRID_DIMS_MAX];
    uint8_t best[MP_GRID_DIMS_MAX];
} grid_search_t;

static void grid_search(grid_search_t *s, uint32_t k, uint64_t prod,
                        uint32_t cap) {
    if (k == s->d) {
        uint32_t min = s->cur[s->d - 1];
        if (prod < s->best_prod ||
            (prod == s->best_prod && min > s->best_min)) {
            s->best_prod = prod;
            s->best_min = min;
            memcpy(s->best, s->cur, s->d);
        }
        return;
    }
    uint32_t left = s->d - k;
    for (uint32_t r = cap; r >= 1 && s->budget > 0; r--) {
        s->budget--;
        /* every later radix is at most r: if r^left cannot reach n, no
         * smaller r can either */
        uint64_t reach = prod;
        for (uint32_t j = 0; j < left && reach < s->n; j++)
            reach = reach > UINT64_MAX / r ? UINT64_MAX : reach * r;
        if (reach < s->n)
            return;
        /* the product only grows from here: prod * r is a lower bound */
        uint64_t next = prod * r;
        if (next > s->best_prod)
            continue;
        s->cur[k] = (uint8_t)r;
        grid_search(s, k + 1, next, r);
    }
}

uint32_t mp__grid_layout(uint32_t m, uint64_t n,
                         uint8_t radix[MP_GRID_DIMS_MAX]) {
    uint32_t d = mp__grid_dims_auto(m, n);
    for (uint32_t i = 0; i < MP_GRID_DIMS_MAX; i++)
        radix[i] = (uint8_t)m;
    if (m < 2 || grid_pow(m, d) < n)
        return d; /* keys of more than M peers: the full M^d grid */
    grid_search_t s = {
        .n = n, .d = d, .budget = 1u << 22, .best_prod = grid_pow(m, d)};
    memset(s.best, (int)m, sizeof s.best);
    s.best_min = m;
    /* the full grid is the first candidate; the search only replaces it by
     * a smaller product, or an equal one with a larger smallest radix */
    grid_search(&s, 0, 1, m);
    memcpy(radix, s.best, d);
    return d;
}

/* The register from the position (or at random) under the current layout:
 * digit 0 of the position (base radix[0]) varies inside the first group,
 * entry i is digit i+1 (base radix[i+1]). */
static void grid_place(mp_grid_t *g) {
    uint64_t p = (uint64_t)g->position;
    if (g->position >= 0)
        p /= g->radix[0];
    for (uint32_t i = 0; i < MP_GRID_DIMS_MAX - 1; i++) {
        if (g->position < 0) {
            g->reg[i] = (uint8_t)(grid_rand(g) % g->m);
        } else {
            g->reg[i] = (uint8_t)(p % g->radix[i + 1]);
            p /= g->radix[i + 1];
        }
    }
}

moshpit_err_t mp__grid_init(mp_grid_t *g, uint32_t m, uint32_t dims,
                            int64_t position, uint64_t seed) {
    if (g == NULL || m < 1 || m > 255 || dims > MP_GRID_DIMS_MAX ||
        position < -1)
        return MOSHPIT_EINVAL;
    memset(g, 0, sizeof(*g));
    g->m = m;
    g->dims_cfg = dims;
    g->dims = dims != 0 ? dims : 1;
    g->position = position;
    g->placed = true;
    g->rng = seed;
    memset(g->radix, (int)m, sizeof g->radix);
    grid_place(g);
    return MOSHPIT_OK;
}

uint32_t mp__grid_dims_auto(uint32_t m, uint64_t n) {
    /* n >= 3/4 m^d  <=>  floor(4n / 3) >= m^d, m^d being an integer */
    return mp__grid_dims_for(m, n > UINT64_MAX / 4 ? n : n * 4 / 3);
}

void mp__grid_set_estimate(mp_grid_t *g, uint64_t n) {
    if (g->dims_cfg != 0 || g->m < 2 || n == g->n)
        return;
    g->n = n;
    /* from n alone, never from this peer's history: peers that joined at
     * different times must agree on d, or they never share a key */
    if (g->position < 0) {
        g->dims = mp__grid_dims_auto(g->m, n);
        return;
    }
    uint8_t radix[MP_GRID_DIMS_MAX];
    g->dims = mp__grid_layout(g->m, n, radix);
    if (memcmp(radix, g->radix, sizeof radix) == 0)
        return;
    memcpy(g->radix, radix, sizeof radix);
    if (g->placed) {
        grid_place(g);
        g->turn = 0;
    }
}

size_t mp__grid_key(const mp_grid_t *g, uint8_t out[MP_GRID_KEY_MAX]) {
    out[0] = (uint8_t)g->dims;
    for (uint32_t i = 0; i + 1 < g->dims; i++)
        out[1 + i] = g->reg[i];
    return g->dims;
}

void mp__grid_shift(mp_grid_t *g, uint32_t slot) {
    if (g->dims < 2 || g->m == 0)
        return;
    uint32_t last = g->dims - 2;
    for (uint32_t i = 0; i < last; i++)
        g->reg[i] = g->reg[i + 1];
    /* the coordinate shifted in is the one the group just varied over;
     * a group larger than its radix (a late peer on a stale key) wraps
     * around instead of making a coordinate nobody else has */
    uint32_t radix = g->radix[g->turn % g->dims];
    g->reg[last] = (uint8_t)(slot % (radix != 0 ? radix : g->m));
    g->turn++;
    g->placed = false;
}

void mp__grid_shift_random(mp_grid_t *g) {
    if (g->m == 0)
        return;
    mp__grid_shift(g, (uint32_t)(grid_rand(g) % g->m));
}
