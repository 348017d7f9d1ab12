/* SPDX-License-Identifier: MIT */
/*
 * log.h - log lines through the application's callback (config log,
 * log_user, log_level), with a rate limit on warnings: these are mostly
 * caused by what other peers send, so a hostile peer must not be able to
 * flood the application's log. The caller passes the time, so this module
 * needs no clock.
 *
 * Ownership: an mp_log_t is a plain value inside its owner's state; it
 * holds no resources. Not thread-safe: one thread writes through it at a
 * time (the engine thread once it runs).
 */
#ifndef MP_BASE_LOG_H
#define MP_BASE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define MP_LOG_WARN_PER_S 20u /* warnings passed on per second at most */
#define MP_LOG_LINE_MAX 512u  /* bytes of one line, NUL included */

typedef struct mp_log {
    void (*fn)(void *user, int level, const char *msg); /* NULL: silent */
    void *user;
    int level; /* lines above this MOSHPIT_LOG_* level are dropped */
    /* warning rate limit: the current one-second window */
    uint64_t window_ms;
    uint32_t count, suppressed;
} mp_log_t;

/* Sets up lg to write lines of at most `level` through fn(user, ...). */
void mp__log_init(mp_log_t *lg, void (*fn)(void *, int, const char *),
                  void *user, int level);

/* Whether a line of this level would reach the callback (before the rate
 * limit): callers can skip building expensive arguments. */
bool mp__log_enabled(const mp_log_t *lg, int level);

/* Formats a line (truncated to MP_LOG_LINE_MAX - 1 bytes) and hands it to
 * the callback. MOSHPIT_LOG_WARN lines beyond MP_LOG_WARN_PER_S in the
 * second around now_ms are counted instead, and the count is reported by
 * one line when the next window opens. */
void mp__log_vwrite(mp_log_t *lg, uint64_t now_ms, int level, const char *fmt,
                    va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 0)))
#endif
    ;

void mp__log_write(mp_log_t *lg, uint64_t now_ms, int level, const char *fmt,
                   ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
