/* SPDX-License-Identifier: MIT */
/*
 * rendezvous.h - the rendezvous hash: the matchmaker of a group key is the
 * live member with the highest hash(key, member id); mp__rendezvous_order
 * sorts candidates by that score so a joiner can fall back to the next one
 * (the score is a protocol constant, see rendezvous.c).
 *
 * Pure functions: no I/O, no clock, no randomness. Thread-safe.
 */
#ifndef MP_CORE_RENDEZVOUS_H
#define MP_CORE_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#define MP_ID_BYTES 32u

/* 64-bit rendezvous score of (key, id); stable across platforms. */
uint64_t mp__rendezvous_score(const uint8_t *key, size_t key_len,
                              const uint8_t id[MP_ID_BYTES]);

/* Writes into order[0..n) the indices of ids[] sorted by descending score
 * (ties by id bytes). */
void mp__rendezvous_order(const uint8_t *key, size_t key_len,
                          const uint8_t (*ids)[MP_ID_BYTES], size_t n,
                          uint32_t *order);

/* The first min(k, n) entries of mp__rendezvous_order's result, identical to
 * it, in O(n) time for small k (O(n k) at worst): order[] needs room for
 * min(k, n) indices. Returns how many were written (0 if n or k is 0, n is
 * beyond UINT32_MAX, or a pointer is NULL). A joiner only needs the first
 * few candidates, so a driver can rank a large view without sorting it. */
size_t mp__rendezvous_top(const uint8_t *key, size_t key_len,
                          const uint8_t (*ids)[MP_ID_BYTES], size_t n, size_t k,
                          uint32_t *order);

#endif
