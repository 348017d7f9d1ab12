/* SPDX-License-Identifier: MIT */
/*
 * grid.h - sans-IO Moshpit grid keys.
 *
 * A peer's grid key is d-1 coordinates below M = group_size. Peers with equal
 * keys group. After a round each member shifts its slot in the group (a
 * coordinate no other member of that group takes) into its key, so the
 * next round averages along another axis. On a full grid with balanced
 * positions and no faults, d rounds give the exact global mean.
 *
 * The coordinates live in a shift register of MP_GRID_DIMS_MAX - 1 entries;
 * the key for d dimensions is its first d-1 entries, so a change of d never
 * invalidates the register (it only uses more or fewer entries). The key
 * bytes carry d itself, so peers that disagree on d never mix keys.
 *
 * d automatic: the largest d with N >= 3/4 M^d, clamped to
 * [1, MP_GRID_DIMS_MAX], N the estimated swarm size. Random positions (-1,
 * the default) draw coordinates in [0, M); keys then hold 3/4 M or more
 * peers on average, which the matchmaker splits into groups.
 *
 * Balanced positions p >= 0, d automatic: when M^d >= N the grid is a
 * mixed radix r[0] x r[1] x ... x r[d-1], each r[i] <= M,
 * r[0] >= r[1] >= ..., the radices whose product is the smallest at least
 * N (ties: the largest smallest radix, so no round has needlessly small
 * groups). N = 900, M = 32: 30 x 30, exact after 2 rounds (32 x 32 left 28
 * full rows and one of 4); 768: 32 x 24. Since N >= 3/4 M^d, no radix is
 * much below M. When N > M^d the grid is the full M^d and keys hold more
 * than M peers (a finer layout of d+1 dimensions was tried: exact without
 * misses, but with 0.5% of peers missing each round its smaller groups
 * and late peers on stale keys took up to twice the rounds). Digit 0 of p
 * (base r[0]) varies inside the first group, register entry i is digit
 * i+1 (base r[i+1]). Until the first shift the register is placed again
 * whenever the layout changes; afterwards it holds slots of real groups,
 * which stay. With d fixed by the config the radices are all M.
 *
 * Both rules depend on N only, not on earlier estimates: with hysteresis
 * (grow at M^(d+1), keep d until N < 3/4 M^d), a swarm of 12 to 15 peers
 * with M = 4 kept d = 2 on its old members while every newcomer chose
 * d = 1, and the newcomers never shared a key with the others (found by
 * the tests/netns soak). Views that differ at a boundary cost a smaller
 * group or a less exact round, never a lasting split.
 *
 * No I/O, no clock; randomness only from the seed given. Not thread-safe.
 */
#ifndef MP_CORE_GRID_H
#define MP_CORE_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

#define MP_GRID_DIMS_MAX 8u
#define MP_GRID_KEY_MAX MP_GRID_DIMS_MAX /* 1 byte d + d-1 coordinates */

typedef struct mp_grid {
    uint32_t m;        /* coordinates are in [0, m) */
    uint32_t dims_cfg; /* 0 = automatic */
    uint32_t dims;     /* current d, 1..MP_GRID_DIMS_MAX */
    int64_t position;  /* -1 = random */
    uint64_t n;        /* the estimate the layout was made for, 0 = none */
    bool placed;       /* the register still holds only the placement */
    uint32_t turn;     /* shifts since the placement: the next group varies
                          over dimension turn mod d */
    uint8_t radix[MP_GRID_DIMS_MAX]; /* the layout (balanced positions) */
    uint8_t reg[MP_GRID_DIMS_MAX - 1];
    uint64_t rng;
} mp_grid_t;

/* m: 1..255; dims: 0 (auto) or 1..MP_GRID_DIMS_MAX; position -1 = random
 * coordinates from seed. MOSHPIT_EINVAL otherwise. */
moshpit_err_t mp__grid_init(mp_grid_t *g, uint32_t m, uint32_t dims,
                            int64_t position, uint64_t seed);

/* floor(log_m n) clamped to [1, MP_GRID_DIMS_MAX] (m < 2 gives 1). */
uint32_t mp__grid_dims_for(uint32_t m, uint64_t n);

/* The automatic d for n peers on random positions: the largest d with
 * n >= 3/4 m^d, that is mp__grid_dims_for(m, floor(4n / 3)). */
uint32_t mp__grid_dims_auto(uint32_t m, uint64_t n);

/* The layout of n peers on balanced positions: d = mp__grid_dims_auto(m, n)
 * and radix[0..d) as described above; radix entries from d on are m.
 * Returns d. */
uint32_t mp__grid_layout(uint32_t m, uint64_t n,
                         uint8_t radix[MP_GRID_DIMS_MAX]);

/* New swarm size estimate (itself included); when d is automatic it
 * becomes mp__grid_dims_auto(m, n) on random positions, and the layout
 * mp__grid_layout(m, n) on balanced ones. */
void mp__grid_set_estimate(mp_grid_t *g, uint64_t n);

/* Writes the key (1 + d-1 bytes) into out[MP_GRID_KEY_MAX]; returns its
 * length. */
size_t mp__grid_key(const mp_grid_t *g, uint8_t out[MP_GRID_KEY_MAX]);

/* After a group: shift in this member's slot, taken modulo the radix of
 * the dimension the group varied over (M on random positions). */
void mp__grid_shift(mp_grid_t *g, uint32_t slot);

/* After a round alone: shift in a random coordinate, so a peer stranded on an
 * empty key moves on. */
void mp__grid_shift_random(mp_grid_t *g);

#endif
