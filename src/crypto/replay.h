/* SPDX-License-Identifier: MIT */
/*
 * replay.h - the receive window of a session's data frames: which counters
 * (the AEAD nonces) may still be opened. Frames of one sender travel on
 * several connections (config data_streams), so they may arrive out of
 * order; a counter is taken once, and only within MP_REPLAY_WINDOW of the
 * highest one taken (docs/PROTOCOL.md, "Data frames").
 */
#ifndef MP_CRYPTO_REPLAY_H
#define MP_CRYPTO_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#define MP_REPLAY_WINDOW 4096u /* counters; a multiple of 64 */

typedef struct mp_replay {
    uint64_t top;                          /* highest counter taken, 0: none */
    uint64_t seen[MP_REPLAY_WINDOW / 64u]; /* bit c % W: counter c taken */
} mp_replay_t;

/* Forgets every counter (a new session). */
void mp__replay_reset(mp_replay_t *w);
/* Whether a frame with counter c may be opened: c > 0, not taken, and
 * above top - MP_REPLAY_WINDOW. */
bool mp__replay_fresh(const mp_replay_t *w, uint64_t c);
/* Takes c (after its frame authenticated; c must be fresh). */
void mp__replay_take(mp_replay_t *w, uint64_t c);
/* Whether every counter in [lo, hi) was taken (true when hi <= lo; false
 * when part of the range is above top or below the window, where the
 * window cannot tell). */
bool mp__replay_all_taken(const mp_replay_t *w, uint64_t lo, uint64_t hi);

#endif
