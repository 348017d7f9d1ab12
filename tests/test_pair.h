/* SPDX-License-Identifier: MIT */
/*
 * test_pair.h - two peers of one swarm in this process, for the tests that
 * call the public API on a live pair: TEST_OPEN_PAIR opens peer a from a
 * config, peer b bootstrapped at a's endpoint, and waits until both count
 * two members; test_now_ms reads the monotonic clock for deadlines.
 * Header-only like test_util.h, which must be included first (the checks
 * count in the including file).
 */
#ifndef MOSHPIT_TEST_PAIR_H
#define MOSHPIT_TEST_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "moshpit.h"
#include "test_util.h"

static inline uint64_t test_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Opens *a with cfg, then *b with cfg bootstrapped at a (cfg->bootstrap is
 * restored before returning), and waits at most wait_ms in all until each
 * counts exactly two members. a's endpoint is left in ep[0..ep_len).
 * Returns 0 with both open, or -1 (a failed check says why) with both
 * closed and NULL. */
static inline int test_open_pair_(const char *file, int line,
                                  moshpit_config_t *cfg, moshpit_t **a,
                                  moshpit_t **b, char *ep, size_t ep_len,
                                  uint32_t wait_ms) {
    const char *const *saved = cfg->bootstrap;
    const char *bs[2] = {ep, NULL};
    *a = *b = NULL;
    moshpit_err_t e = moshpit_open(cfg, a);
    CHECK_AT(file, line, e == MOSHPIT_OK, "open a: %s", moshpit_strerror(e));
    if (*a == NULL)
        return -1;
    e = moshpit_endpoint(*a, ep, ep_len);
    CHECK_AT(file, line, e == MOSHPIT_OK, "endpoint a: %s",
             moshpit_strerror(e));
    if (e == MOSHPIT_OK) {
        cfg->bootstrap = bs;
        e = moshpit_open(cfg, b);
        cfg->bootstrap = saved;
        CHECK_AT(file, line, e == MOSHPIT_OK, "open b: %s",
                 moshpit_strerror(e));
    }
    if (*b != NULL) {
        uint64_t end = test_now_ms() + wait_ms;
        moshpit_t *both[2] = {*b, *a};
        for (int i = 0; i < 2 && e == MOSHPIT_OK; i++) {
            uint64_t now = test_now_ms();
            e = moshpit_wait_members(both[i], 2,
                                     (uint32_t)(now < end ? end - now : 0));
        }
        int ok = e == MOSHPIT_OK && moshpit_members(*a) == 2 &&
                 moshpit_members(*b) == 2;
        CHECK_AT(file, line, ok,
                 "the pair does not see each other: %s (members %zu %zu)",
                 moshpit_strerror(e), moshpit_members(*a), moshpit_members(*b));
        if (ok)
            return 0;
    }
    moshpit_close(*b);
    moshpit_close(*a);
    *a = *b = NULL;
    return -1;
}
#define TEST_OPEN_PAIR(cfg, a, b, ep, ep_len, wait_ms)                         \
    test_open_pair_(__FILE__, __LINE__, (cfg), (a), (b), (ep), (ep_len),       \
                    (wait_ms))

#endif
