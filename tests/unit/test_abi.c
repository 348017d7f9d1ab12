/* SPDX-License-Identifier: MIT */
/*
 * test_abi.c - unit tests of the ABI rules of include/moshpit.h: the
 * library reads and writes only the part of moshpit_config_t and
 * moshpit_round_t the caller's size covers. An older caller (a struct that
 * ends earlier) gets defaults for the fields it lacks and nothing written
 * or read past its end: its structs are allocated at their exact size, so
 * ASan (CI's sanitizer build) reports any access past them, and also in a
 * larger buffer whose bytes past the struct hold a pattern that must stay
 * unread (as fields they would be refused) and unwritten. A newer caller
 * (a struct with a tail this library does not know) gets zeros there from
 * moshpit_config_init and moshpit_average, and EINVAL from moshpit_open if
 * the tail is not zero. The functions without _sized keep the 0.2.0 sizes;
 * tail padding of 0.2.0's struct is never read as a field. Also: the
 * version macros agree with each other, with the version the build read
 * (MP_CMAKE_VERSION) and with moshpit_version(); the enums keep their
 * values. Every failed check prints file:line; the exit status is 1 if any
 * check failed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moshpit.h"

#include "test_util.h"

#define GUARD 64
#define PATTERN 0xa5

/* moshpit_config_t as a header older than this one would have declared
 * it: the same fields up to peer_timeout_ms, and nothing after. */
struct old_config {
    const char *swarm;
    const char *listen;
    const char *advertise;
    const char *const *bootstrap;
    uint8_t public_key[32], secret_key[32];
    uint8_t swarm_secret[32];
    const uint8_t (*authorized_keys)[32];
    size_t authorized_count;
    uint32_t group_size;
    uint32_t min_group_size;
    int64_t grid_position;
    uint32_t matchmaking_ms;
    uint32_t round_timeout_ms;
    void (*log)(void *user, int level, const char *msg);
    void *log_user;
    int log_level;
    uint32_t peer_timeout_ms;
};
_Static_assert(offsetof(struct old_config, log_level) ==
                       offsetof(moshpit_config_t, log_level) &&
                   offsetof(struct old_config, peer_timeout_ms) ==
                       offsetof(moshpit_config_t, peer_timeout_ms),
               "old_config is a prefix of moshpit_config_t");
_Static_assert(sizeof(struct old_config) ==
                   offsetof(moshpit_config_t, peer_timeout_ms) +
                       sizeof(uint32_t),
               "old_config ends where its last field ends");

/* moshpit_round_t as an older header might have had it: two fields. */
struct old_round {
    uint64_t round_id;
    uint32_t group_size;
    uint32_t pad_; /* explicit: the struct ends at a field */
};
_Static_assert(offsetof(struct old_round, group_size) ==
                   offsetof(moshpit_round_t, group_size),
               "old_round is a prefix of moshpit_round_t");

/* A caller built against a newer header: moshpit_config_t plus fields
 * this library does not know. */
struct new_config {
    moshpit_config_t known;
    uint32_t future[8];
};
struct new_round {
    moshpit_round_t known;
    uint64_t future[4];
};

static int all_bytes(const void *p, size_t n, unsigned char v) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

/* A peer that never averages (group_size 1): every round returns at once,
 * alone. A macro: c is a struct old_config or a moshpit_config_t. */
#define LONE_SETTINGS(c)                                                       \
    do {                                                                       \
        (c)->swarm = "test-abi";                                               \
        (c)->listen = "tcp://127.0.0.1:0";                                     \
        (c)->group_size = 1;                                                   \
        (c)->matchmaking_ms = 100;                                             \
        (c)->round_timeout_ms = 2000;                                          \
    } while (0)

/* ---------------------------------------------------------------------- */
/* an older caller                                                        */
/* ---------------------------------------------------------------------- */

/* Its config at its exact size: what ASan checks. The fields past it
 * (clip_iters above all: 0 is refused) must take their defaults for
 * moshpit_open to succeed. */
static void test_old_config_exact(void) {
    struct old_config *c = malloc(sizeof(*c));
    if (c == NULL) {
        CHECK(0, "out of memory");
        return;
    }
    memset(c, PATTERN, sizeof(*c));
    moshpit_err_t e =
        moshpit_config_init_sized((moshpit_config_t *)c, sizeof(*c));
    CHECK(e == MOSHPIT_OK, "config_init_sized: %s", moshpit_strerror(e));
    CHECK(c->group_size == 8 && c->min_group_size == 2 &&
              c->grid_position == -1 && c->matchmaking_ms == 2000 &&
              c->round_timeout_ms == 30000 &&
              c->log_level == MOSHPIT_LOG_WARN && c->peer_timeout_ms == 5000,
          "defaults of an old struct: M %u min %u pos %lld mm %u rt %u "
          "log %d pt %u",
          c->group_size, c->min_group_size, (long long)c->grid_position,
          c->matchmaking_ms, c->round_timeout_ms, c->log_level,
          c->peer_timeout_ms);
    CHECK(c->swarm == NULL && c->bootstrap == NULL && c->log == NULL,
          "pointers of an old struct not NULL");
    LONE_SETTINGS(c);
    moshpit_t *mp = NULL;
    e = moshpit_open_sized((const moshpit_config_t *)c, sizeof(*c), &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL, "open of an old struct: %s",
          moshpit_strerror(e));
    free(c);
    if (mp == NULL)
        return;

    /* its round struct, at its exact size */
    struct old_round *r = malloc(sizeof(*r));
    float v[4] = {1, 2, 3, 4};
    if (r == NULL) {
        CHECK(0, "out of memory");
        moshpit_close(mp);
        return;
    }
    memset(r, PATTERN, sizeof(*r));
    e = moshpit_average_sized(mp, v, 4, 1.0, (moshpit_round_t *)r, sizeof(*r));
    CHECK(e == MOSHPIT_OK, "average with an old round struct: %s",
          moshpit_strerror(e));
    CHECK(r->round_id == 0 && r->group_size == 1,
          "old round struct: round_id %llu group_size %u",
          (unsigned long long)r->round_id, r->group_size);
    free(r);
    moshpit_close(mp);
}

/* The same caller in a larger buffer: the bytes past its struct hold a
 * pattern. As fields (peer_timeout_ms, bandwidth_mbps, ...: 0xa5a5a5a5)
 * moshpit_open would refuse them, so an OK shows they were not read, and
 * the pattern must still be there afterwards. */
static void test_old_config_guarded(void) {
    const size_t size = sizeof(moshpit_config_t) + GUARD;
    const size_t n = sizeof(struct old_config);
    unsigned char *buf = malloc(size);
    unsigned char *rbuf = malloc(sizeof(moshpit_round_t) + GUARD);
    if (buf == NULL || rbuf == NULL) {
        CHECK(0, "out of memory");
        free(buf);
        free(rbuf);
        return;
    }
    memset(buf, PATTERN, size);
    moshpit_err_t e = moshpit_config_init_sized((moshpit_config_t *)buf, n);
    CHECK(e == MOSHPIT_OK, "config_init_sized: %s", moshpit_strerror(e));
    CHECK(all_bytes(buf + n, size - n, PATTERN),
          "config_init_sized(%zu) wrote past the caller's struct", n);
    LONE_SETTINGS((struct old_config *)buf);
    moshpit_t *mp = NULL;
    e = moshpit_open_sized((const moshpit_config_t *)buf, n, &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL,
          "open of an old struct followed by a pattern: %s (the pattern "
          "was read as fields?)",
          moshpit_strerror(e));
    CHECK(all_bytes(buf + n, size - n, PATTERN),
          "open_sized(%zu) wrote past the caller's struct", n);
    /* the same bytes as a whole current struct are refused: the pattern
     * is not a valid configuration, so the OK above means something */
    moshpit_t *mp2 = NULL;
    e = moshpit_open_sized((const moshpit_config_t *)buf,
                           sizeof(moshpit_config_t), &mp2);
    CHECK(e == MOSHPIT_EINVAL && mp2 == NULL,
          "pattern read as fields: %s (want EINVAL)", moshpit_strerror(e));
    moshpit_close(mp2);
    free(buf);
    if (mp == NULL) {
        free(rbuf);
        return;
    }

    const size_t rsize = sizeof(moshpit_round_t) + GUARD;
    const size_t rn = sizeof(struct old_round);
    memset(rbuf, PATTERN, rsize);
    float v[3] = {5, 6, 7};
    e = moshpit_average_sized(mp, v, 3, 2.0, (moshpit_round_t *)rbuf, rn);
    CHECK(e == MOSHPIT_OK, "average: %s", moshpit_strerror(e));
    struct old_round r;
    memcpy(&r, rbuf, sizeof(r));
    CHECK(r.round_id == 0 && r.group_size == 1,
          "old round struct: round_id %llu group_size %u",
          (unsigned long long)r.round_id, r.group_size);
    CHECK(all_bytes(rbuf + rn, rsize - rn, PATTERN),
          "average_sized(%zu) wrote past the caller's struct", rn);
    /* the same for the round of an op */
    memset(rbuf, PATTERN, rsize);
    moshpit_op_t *op = NULL;
    e = moshpit_average_start(mp, v, 3, 2.0, &op);
    CHECK(e == MOSHPIT_OK, "average_start: %s", moshpit_strerror(e));
    if (e == MOSHPIT_OK) {
        e = moshpit_op_wait_sized(op, 20000, (moshpit_round_t *)rbuf, rn);
        memcpy(&r, rbuf, sizeof(r));
        CHECK(e == MOSHPIT_OK && r.group_size == 1,
              "op_wait_sized with an old round struct: %s, group %u",
              moshpit_strerror(e), r.group_size);
        CHECK(all_bytes(rbuf + rn, rsize - rn, PATTERN),
              "op_wait_sized(%zu) wrote past the caller's struct", rn);
    }
    free(rbuf);
    moshpit_close(mp);
}

/* ---------------------------------------------------------------------- */
/* a newer caller                                                         */
/* ---------------------------------------------------------------------- */

static void test_new_config(void) {
    struct new_config c;
    memset(&c, PATTERN, sizeof(c));
    moshpit_err_t e = moshpit_config_init_sized(&c.known, sizeof(c));
    CHECK(e == MOSHPIT_OK, "config_init_sized: %s", moshpit_strerror(e));
    CHECK(all_bytes(c.future, sizeof(c.future), 0),
          "fields the library does not know are not zeroed");
    CHECK(c.known.group_size == 8 && c.known.peer_msg_rate == 1000,
          "defaults in a newer struct: M %u rate %u", c.known.group_size,
          c.known.peer_msg_rate);
    LONE_SETTINGS(&c.known);
    moshpit_t *mp = NULL;
    e = moshpit_open_sized(&c.known, sizeof(c), &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL, "open with a zero tail: %s",
          moshpit_strerror(e));
    if (mp != NULL) {
        struct new_round r;
        memset(&r, PATTERN, sizeof(r));
        float v[2] = {1, 2};
        e = moshpit_average_sized(mp, v, 2, 1.0, &r.known, sizeof(r));
        CHECK(e == MOSHPIT_OK && r.known.group_size == 1 &&
                  r.known.fraction_averaged == 0.0,
              "average with a newer round struct: %s, group %u",
              moshpit_strerror(e), r.known.group_size);
        CHECK(all_bytes(r.future, sizeof(r.future), 0),
              "round fields the library does not know are not zeroed");
        e = moshpit_average_sized(mp, v, 2, 1.0, &r.known, 65537);
        CHECK(e == MOSHPIT_EINVAL, "info_size 65537: %s", moshpit_strerror(e));
        e = moshpit_average_sized(mp, v, 2, 1.0, NULL, 65537);
        CHECK(e == MOSHPIT_OK, "info NULL, size ignored: %s",
              moshpit_strerror(e));
        moshpit_op_t *op = NULL;
        e = moshpit_average_start(mp, v, 2, 1.0, &op);
        CHECK(e == MOSHPIT_OK, "average_start: %s", moshpit_strerror(e));
        if (e == MOSHPIT_OK) {
            e = moshpit_op_wait_sized(op, 20000, &r.known, 65537);
            CHECK(e == MOSHPIT_EINVAL, "op_wait info_size 65537: %s",
                  moshpit_strerror(e));
            memset(&r, PATTERN, sizeof(r));
            e = moshpit_op_wait_sized(op, 20000, &r.known, sizeof(r));
            CHECK(e == MOSHPIT_OK && r.known.group_size == 1,
                  "op_wait with a newer round struct: %s, group %u",
                  moshpit_strerror(e), r.known.group_size);
            CHECK(all_bytes(r.future, sizeof(r.future), 0),
                  "op_wait: round fields the library does not know are not "
                  "zeroed");
        }
        moshpit_close(mp);
    }
    /* a field this library does not have, set: refused, not ignored */
    for (size_t i = 0; i < sizeof(c.future) / sizeof(c.future[0]); i++) {
        c.future[i] = 1;
        mp = NULL;
        e = moshpit_open_sized(&c.known, sizeof(c), &mp);
        CHECK(e == MOSHPIT_EINVAL && mp == NULL,
              "open with future[%zu] set: %s (want EINVAL)", i,
              moshpit_strerror(e));
        moshpit_close(mp);
        c.future[i] = 0;
    }
    e = moshpit_open_sized(&c.known, 65537, &mp);
    CHECK(e == MOSHPIT_EINVAL, "cfg_size 65537: %s", moshpit_strerror(e));
    e = moshpit_config_init_sized(&c.known, 65537);
    CHECK(e == MOSHPIT_EINVAL, "init size 65537: %s", moshpit_strerror(e));
    e = moshpit_config_init_sized(NULL, sizeof(c.known));
    CHECK(e == MOSHPIT_EINVAL, "init NULL: %s", moshpit_strerror(e));
    e = moshpit_open_sized(NULL, sizeof(c.known), &mp);
    CHECK(e == MOSHPIT_EINVAL, "open NULL: %s", moshpit_strerror(e));
}

/* ---------------------------------------------------------------------- */
/* the functions without _sized, and 0.2.0's tail padding                 */
/* ---------------------------------------------------------------------- */

/* Where 0.2.0's struct ends on this platform (its sizeof then). */
#define FIELD_END(type, field)                                                 \
    (offsetof(type, field) + sizeof(((type *)0)->field))
#define ALIGN_UP(n, a) (((n) + (a)-1) / (a) * (a))
#define CONFIG_SIZE_0_2                                                        \
    ALIGN_UP(FIELD_END(moshpit_config_t, peer_msg_rate),                       \
             _Alignof(moshpit_config_t))
#define ROUND_SIZE_0_2                                                         \
    ALIGN_UP(FIELD_END(moshpit_round_t, allreduce_ms),                         \
             _Alignof(moshpit_round_t))

static void test_unsized(void) {
    const size_t size = sizeof(moshpit_config_t) + GUARD;
    const size_t rsize = sizeof(moshpit_round_t) + GUARD;
    unsigned char *buf = malloc(size);
    unsigned char *rbuf = malloc(rsize);
    if (buf == NULL || rbuf == NULL) {
        CHECK(0, "out of memory");
        free(buf);
        free(rbuf);
        return;
    }
    memset(buf, PATTERN, size);
    (moshpit_config_init)((moshpit_config_t *)buf);
    CHECK(all_bytes(buf + CONFIG_SIZE_0_2, size - CONFIG_SIZE_0_2, PATTERN),
          "moshpit_config_init wrote past 0.2.0's %zu bytes",
          (size_t)CONFIG_SIZE_0_2);
    moshpit_config_t *c = (moshpit_config_t *)buf;
    CHECK(c->peer_msg_rate == 1000 && c->clip_iters == 5,
          "moshpit_config_init defaults: rate %u iters %u", c->peer_msg_rate,
          c->clip_iters);
    LONE_SETTINGS(c);
    /* 0.2.0's tail padding holds anything in a program's struct: it is
     * never a field */
    size_t end = FIELD_END(moshpit_config_t, peer_msg_rate);
    memset(buf + end, PATTERN, size - end);
    moshpit_t *mp = NULL;
    moshpit_err_t e = (moshpit_open)(c, &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL, "moshpit_open (function): %s",
          moshpit_strerror(e));
    moshpit_close(mp);
    mp = NULL;
    e = moshpit_open_sized(c, CONFIG_SIZE_0_2, &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL,
          "open of 0.2.0's struct with garbage in its tail padding: %s",
          moshpit_strerror(e));
    free(buf);
    if (mp != NULL) {
        memset(rbuf, PATTERN, rsize);
        float v[1] = {3};
        e = (moshpit_average)(mp, v, 1, 1.0, (moshpit_round_t *)rbuf);
        moshpit_round_t r;
        memcpy(&r, rbuf, sizeof(r));
        CHECK(e == MOSHPIT_OK && r.group_size == 1,
              "moshpit_average (function): %s, group %u", moshpit_strerror(e),
              r.group_size);
        CHECK(all_bytes(rbuf + ROUND_SIZE_0_2, rsize - ROUND_SIZE_0_2, PATTERN),
              "moshpit_average wrote past 0.2.0's %zu bytes",
              (size_t)ROUND_SIZE_0_2);
        /* the function moshpit_op_wait writes moshpit_round_t of 0.2.0 */
        memset(rbuf, PATTERN, rsize);
        moshpit_op_t *op = NULL;
        e = moshpit_average_start(mp, v, 1, 1.0, &op);
        CHECK(e == MOSHPIT_OK, "average_start: %s", moshpit_strerror(e));
        if (e == MOSHPIT_OK) {
            e = (moshpit_op_wait)(op, 20000, (moshpit_round_t *)rbuf);
            memcpy(&r, rbuf, sizeof(r));
            CHECK(e == MOSHPIT_OK && r.group_size == 1,
                  "moshpit_op_wait (function): %s, group %u",
                  moshpit_strerror(e), r.group_size);
            CHECK(all_bytes(rbuf + ROUND_SIZE_0_2, rsize - ROUND_SIZE_0_2,
                            PATTERN),
                  "moshpit_op_wait wrote past 0.2.0's %zu bytes",
                  (size_t)ROUND_SIZE_0_2);
        }
        moshpit_close(mp);
    }
    free(rbuf);
}

/* ---------------------------------------------------------------------- */
/* versions and enums                                                     */
/* ---------------------------------------------------------------------- */

static void test_version(void) {
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", MOSHPIT_VERSION_MAJOR,
             MOSHPIT_VERSION_MINOR, MOSHPIT_VERSION_PATCH);
    CHECK(strcmp(MOSHPIT_VERSION_STRING, want) == 0,
          "MOSHPIT_VERSION_STRING \"%s\", numbers %s", MOSHPIT_VERSION_STRING,
          want);
    CHECK(strcmp(MP_CMAKE_VERSION, want) == 0,
          "the build's version %s, the header's %s", MP_CMAKE_VERSION, want);
    const char *v = moshpit_version();
    CHECK(v != NULL && strcmp(v, want) == 0, "moshpit_version() \"%s\"",
          v ? v : "(null)");
    CHECK(MOSHPIT_VERSION_NUMBER == MOSHPIT_VERSION_MAJOR * 10000 +
                                        MOSHPIT_VERSION_MINOR * 100 +
                                        MOSHPIT_VERSION_PATCH,
          "MOSHPIT_VERSION_NUMBER %d", MOSHPIT_VERSION_NUMBER);
#if MOSHPIT_VERSION_NUMBER < 200
    CHECK(0, "MOSHPIT_VERSION_NUMBER usable in #if: %d",
          MOSHPIT_VERSION_NUMBER);
#endif
}

static void test_enums(void) {
    CHECK(MOSHPIT_OK == 0 && MOSHPIT_EINVAL == 1 && MOSHPIT_ENOMEM == 2 &&
              MOSHPIT_ETIMEDOUT == 3 && MOSHPIT_ECLOSED == 4 &&
              MOSHPIT_EPROTO == 5 && MOSHPIT_ECRYPTO == 6 &&
              MOSHPIT_EPEERAUTH == 7 && MOSHPIT_ESYS == 8 &&
              MOSHPIT_ENOSTATE == 9 && MOSHPIT_ECOUNT == 10 &&
              MOSHPIT_EBUSY == 11,
          "error codes changed value");
    CHECK(MOSHPIT_AGG_MEAN == 0 && MOSHPIT_AGG_TRIMMED_MEAN == 1 &&
              MOSHPIT_AGG_CENTERED_CLIP == 2,
          "aggregation rules changed value");
    CHECK(MOSHPIT_LOG_ERROR == 0 && MOSHPIT_LOG_WARN == 1 &&
              MOSHPIT_LOG_INFO == 2 && MOSHPIT_LOG_DEBUG == 3,
          "log levels changed value");
    CHECK(MOSHPIT_CERT_VALID == 0 && MOSHPIT_CERT_FORGED == 8,
          "certificate statuses changed value");
    /* the int fields take the enum values */
    moshpit_config_t c;
    moshpit_config_init(&c);
    moshpit_agg_t a = MOSHPIT_AGG_CENTERED_CLIP;
    moshpit_log_level_t l = MOSHPIT_LOG_DEBUG;
    c.aggregation = a;
    c.log_level = l;
    CHECK(c.aggregation == 2 && c.log_level == 3, "enum into int field");
}

int main(void) {
    test_old_config_exact();
    test_old_config_guarded();
    test_new_config();
    test_unsized();
    test_version();
    test_enums();
    return test_summary("test_abi");
}
