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

moshpit_err_t mp__grid_init(mp_grid_t *g, uint32_t m, uint32_t dims,
                            int64_t position, uint64_t seed) {
    if (g == NULL || m < 1 || m > 255 || dims > MP_GRID_DIMS_MAX ||
        position < -1)
        return MOSHPIT_EINVAL;
    memset(g, 0, sizeof(*g));
    g->m = m;
    g->dims_cfg = dims;
    g->dims = dims != 0 ? dims : 1;
    g->rng = seed;
    uint64_t p = (uint64_t)position;
    if (position >= 0)
        p /= m; /* digit 0 varies inside the first group */
    for (uint32_t i = 0; i < MP_GRID_DIMS_MAX - 1; i++) {
        if (position < 0) {
            g->reg[i] = (uint8_t)(grid_rand(g) % m);
        } else {
            g->reg[i] = (uint8_t)(p % m);
            p /= m;
        }
    }
    return MOSHPIT_OK;
}

uint32_t mp__grid_dims_auto(uint32_t m, uint64_t n) {
    /* n >= 3/4 m^d  <=>  floor(4n / 3) >= m^d, m^d being an integer */
    return mp__grid_dims_for(m, n > UINT64_MAX / 4 ? n : n * 4 / 3);
}

void mp__grid_set_estimate(mp_grid_t *g, uint64_t n) {
    if (g->dims_cfg != 0 || g->m < 2)
        return;
    /* from n alone, never from this peer's history: peers that joined at
     * different times must agree on d, or they never share a key */
    g->dims = mp__grid_dims_auto(g->m, n);
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
    g->reg[last] = (uint8_t)(slot % g->m);
}

void mp__grid_shift_random(mp_grid_t *g) {
    if (g->m == 0)
        return;
    mp__grid_shift(g, (uint32_t)(grid_rand(g) % g->m));
}
