/* SPDX-License-Identifier: MIT */
/*
 * base.h - small helpers and limits every layer shares: the splitmix64
 * generator, little-endian loads and stores, saturating addition of
 * deadlines, and the limits that more than one layer checks (swarm name,
 * group size, group key). Header only, static inline, no state: the bottom
 * of the layer order (docs/DESIGN.md, "Layout").
 */
#ifndef MP_BASE_BASE_H
#define MP_BASE_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits shared by the API checks, the core and the wire codec ---- */

#define MP_SWARM_NAME_MAX 255u /* bytes of a swarm name, without the NUL */
#define MP_GROUP_MAX 64u       /* members of one group */
#define MP_KEY_MAX 32u   /* group key bytes (length, grid key, aggregation) */
#define MP_ADDR_MAX 128u /* bytes incl. NUL of a "tcp://host:port" address */

/* ---- splitmix64 (Steele, Lea, Flood 2014) ---- */

/* The splitmix64 output function: a bijection of 64-bit words that mixes
 * every input bit into every output bit. */
static inline uint64_t mp__mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Advances *state and returns the next output. The output is a bijection of
 * the state counter: 2^64 draws never repeat a value. Not for secrets. */
static inline uint64_t mp__splitmix64(uint64_t *state) {
    return mp__mix64(*state += UINT64_C(0x9e3779b97f4a7c15));
}

/* ---- little-endian byte order, whatever the host's ---- */

/* The low n bytes of v, least significant first (n <= 8). */
static inline void mp__store_le(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* n bytes (n <= 8), least significant first. */
static inline uint64_t mp__load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static inline void mp__store_le32(uint8_t *p, uint32_t v) {
    mp__store_le(p, v, 4);
}

static inline void mp__store_le64(uint8_t *p, uint64_t v) {
    mp__store_le(p, v, 8);
}

static inline uint32_t mp__load_le32(const uint8_t *p) {
    return (uint32_t)mp__load_le(p, 4);
}

static inline uint64_t mp__load_le64(const uint8_t *p) {
    return mp__load_le(p, 8);
}

/* ---- bytes ---- */

/* Whether p[0..n) are all zero; reads every byte whatever it finds (no
 * early exit), so it may look at secrets. */
static inline bool mp__all_zero(const uint8_t *p, size_t n) {
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

/* ---- saturating arithmetic on times and deadlines ---- */

/* a + b, or UINT64_MAX where the sum would wrap ("never"). */
static inline uint64_t mp__add_sat_u64(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
