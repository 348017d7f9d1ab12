/* SPDX-License-Identifier: MIT */
/*
 * log.c - the log callback with its level filter and the warning rate
 * limit (see log.h).
 */
#include "base/log.h"

#include <stdio.h>

#include "moshpit.h"

void mp__log_init(mp_log_t *lg, void (*fn)(void *, int, const char *),
                  void *user, int level) {
    lg->fn = fn;
    lg->user = user;
    lg->level = level;
    lg->window_ms = 0;
    lg->count = 0;
    lg->suppressed = 0;
}

bool mp__log_enabled(const mp_log_t *lg, int level) {
    return lg->fn != NULL && level <= lg->level;
}

void mp__log_vwrite(mp_log_t *lg, uint64_t now_ms, int level, const char *fmt,
                    va_list ap) {
    if (!mp__log_enabled(lg, level))
        return;
    if (level == MOSHPIT_LOG_WARN) {
        if (now_ms - lg->window_ms >= 1000) {
            if (lg->suppressed > 0) {
                char note[96];
                snprintf(note, sizeof(note),
                         "%u warnings suppressed in the last second",
                         lg->suppressed);
                lg->fn(lg->user, MOSHPIT_LOG_WARN, note);
            }
            lg->window_ms = now_ms;
            lg->count = 0;
            lg->suppressed = 0;
        }
        if (lg->count >= MP_LOG_WARN_PER_S) {
            lg->suppressed++;
            return;
        }
        lg->count++;
    }
    char buf[MP_LOG_LINE_MAX];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    lg->fn(lg->user, level, buf);
}

void mp__log_write(mp_log_t *lg, uint64_t now_ms, int level, const char *fmt,
                   ...) {
    va_list ap;
    va_start(ap, fmt);
    mp__log_vwrite(lg, now_ms, level, fmt, ap);
    va_end(ap);
}
