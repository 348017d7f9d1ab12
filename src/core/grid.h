/* SPDX-License-Identifier: MIT */
/*
 * grid.h - sans-IO Moshpit grid keys.
 *
 * A peer's grid key is d-1 coordinates in [0, M), M = group_size. Peers with
 * equal keys group. After a round each member shifts its slot in the group
 * (a coordinate no other member of that group takes) into its key, so the
 * next round averages along another axis. On a full M^d grid with balanced
 * positions and no faults, d rounds give the exact global mean.
 *
 * The coordinates live in a shift register of MP_GRID_DIMS_MAX - 1 entries;
 * the key for d dimensions is its first d-1 entries, so a change of d never
 * invalidates the register (it only uses more or fewer entries). The key
 * bytes carry d itself, so peers that disagree on d never mix keys.
 *
 * Position p >= 0 (balanced grid): entry i is digit i+1 of p in base M;
 * digit 0 is the coordinate that varies inside the first group.
 *
 * d: fixed from the config, or (0) chosen from the estimated swarm size N as
 * the largest d with N >= 3/4 M^d, clamped to [1, MP_GRID_DIMS_MAX]: a full
 * grid of M^d peers keeps its d while a few members are momentarily
 * unseen. It depends on N only, not on earlier estimates: with hysteresis
 * (grow at M^(d+1), keep d until N < 3/4 M^d), a swarm of 12 to 15 peers
 * with M = 4 kept d = 2 on its old members while every newcomer chose
 * d = 1, and the newcomers never shared a key with the others (found by
 * the tests/netns soak). Views that differ at a boundary cost a smaller
 * group for a round, never a lasting split.
 *
 * No I/O, no clock; randomness only from the seed given. Not thread-safe.
 */
#ifndef MP_CORE_GRID_H
#define MP_CORE_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

#define MP_GRID_DIMS_MAX 8u
#define MP_GRID_KEY_MAX MP_GRID_DIMS_MAX /* 1 byte d + d-1 coordinates */

typedef struct mp_grid {
    uint32_t m;        /* coordinates are in [0, m) */
    uint32_t dims_cfg; /* 0 = automatic */
    uint32_t dims;     /* current d, 1..MP_GRID_DIMS_MAX */
    uint8_t reg[MP_GRID_DIMS_MAX - 1];
    uint64_t rng;
} mp_grid_t;

/* m: 1..255; dims: 0 (auto) or 1..MP_GRID_DIMS_MAX; position -1 = random
 * coordinates from seed. MOSHPIT_EINVAL otherwise. */
moshpit_err_t mp__grid_init(mp_grid_t *g, uint32_t m, uint32_t dims,
                            int64_t position, uint64_t seed);

/* floor(log_m n) clamped to [1, MP_GRID_DIMS_MAX] (m < 2 gives 1). */
uint32_t mp__grid_dims_for(uint32_t m, uint64_t n);

/* The automatic d for n peers: the largest d with n >= 3/4 m^d, that is
 * mp__grid_dims_for(m, floor(4n / 3)). */
uint32_t mp__grid_dims_auto(uint32_t m, uint64_t n);

/* New swarm size estimate (itself included); when d is automatic it
 * becomes mp__grid_dims_auto(m, n). */
void mp__grid_set_estimate(mp_grid_t *g, uint64_t n);

/* Writes the key (1 + d-1 bytes) into out[MP_GRID_KEY_MAX]; returns its
 * length. */
size_t mp__grid_key(const mp_grid_t *g, uint8_t out[MP_GRID_KEY_MAX]);

/* After a group: shift in this member's slot (taken modulo m). */
void mp__grid_shift(mp_grid_t *g, uint32_t slot);

/* After a round alone: shift in a random coordinate, so a peer stranded on an
 * empty key moves on. */
void mp__grid_shift_random(mp_grid_t *g);

#endif
