/* SPDX-License-Identifier: MIT */
/*
 * replay.c - the receive window of data-frame counters: a ring of
 * MP_REPLAY_WINDOW bits below the highest counter taken, so frames that
 * several connections deliver out of order are each opened once and
 * replays are refused (see replay.h).
 */
#include "replay.h"

#include <string.h>

void mp__replay_reset(mp_replay_t *w) {
    memset(w, 0, sizeof(*w));
}

static bool bit(const mp_replay_t *w, uint64_t c) {
    uint64_t i = c % MP_REPLAY_WINDOW;
    return (w->seen[i / 64u] >> (i % 64u)) & 1u;
}

bool mp__replay_fresh(const mp_replay_t *w, uint64_t c) {
    if (c == 0)
        return false;
    if (c > w->top)
        return true;
    if (w->top - c >= MP_REPLAY_WINDOW)
        return false;
    return !bit(w, c);
}

void mp__replay_take(mp_replay_t *w, uint64_t c) {
    if (c > w->top) {
        if (c - w->top >= MP_REPLAY_WINDOW) {
            memset(w->seen, 0, sizeof(w->seen));
        } else {
            /* the slots of top+1 .. c now stand for those counters */
            for (uint64_t k = w->top + 1; k <= c; k++) {
                uint64_t i = k % MP_REPLAY_WINDOW;
                w->seen[i / 64u] &= ~((uint64_t)1 << (i % 64u));
            }
        }
        w->top = c;
    }
    uint64_t i = c % MP_REPLAY_WINDOW;
    w->seen[i / 64u] |= (uint64_t)1 << (i % 64u);
}

bool mp__replay_all_taken(const mp_replay_t *w, uint64_t lo, uint64_t hi) {
    if (hi <= lo)
        return true;
    if (lo == 0 || hi - 1 > w->top || w->top - lo >= MP_REPLAY_WINDOW)
        return false;
    for (uint64_t c = lo; c < hi; c++)
        if (!bit(w, c))
            return false;
    return true;
}
