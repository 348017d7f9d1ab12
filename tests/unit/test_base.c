/* SPDX-License-Identifier: MIT */
/*
 * test_base.c - the bottom layer, src/base: splitmix64 against its
 * published outputs and the tests' own copy, little-endian loads and
 * stores byte by byte, saturating addition, endpoint splitting, checking
 * and parsing (good and hostile input), and the log callback's level
 * filter, truncation and warning rate limit.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/endpoint.h"
#include "base/log.h"
#include "base/z85.h"
#include "test_util.h"

static void test_splitmix(void) {
    /* the first outputs of splitmix64 from state 0 (Vigna's splitmix64.c) */
    static const uint64_t want[3] = {UINT64_C(0xe220a8397b1dcdaf),
                                     UINT64_C(0x6e789e6aa1b965f4),
                                     UINT64_C(0x06c45d188009454f)};
    uint64_t s = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t got = mp__splitmix64(&s);
        CHECK(got == want[i], "output %d: %016llx", i, (unsigned long long)got);
    }
    uint64_t a = 12345, b = 12345;
    for (int i = 0; i < 1000; i++)
        CHECK(mp__splitmix64(&a) == test_splitmix64(&b), "draw %d", i);
    CHECK(mp__mix64(0) == 0, "the finalizer maps 0 to 0");
}

static void test_le(void) {
    uint8_t b[8];
    mp__store_le64(b, UINT64_C(0x0102030405060708));
    for (int i = 0; i < 8; i++)
        CHECK(b[i] == 8 - i, "byte %d is %u", i, b[i]);
    CHECK(mp__load_le64(b) == UINT64_C(0x0102030405060708), "load64");
    CHECK(mp__load_le32(b) == 0x05060708u, "load32 reads the low half");
    memset(b, 0xee, sizeof(b));
    mp__store_le32(b, 0xa1b2c3d4u);
    CHECK(b[0] == 0xd4 && b[3] == 0xa1 && b[4] == 0xee,
          "store32 writes 4 bytes, least significant first");
    mp__store_le(b, 0xbeef, 2);
    CHECK(b[0] == 0xef && b[1] == 0xbe && b[2] == 0xb2, "store of 2 bytes");
    CHECK(mp__load_le(b, 2) == 0xbeef, "load of 2 bytes");
    CHECK(mp__load_le(b, 0) == 0, "load of 0 bytes");
    uint64_t s = 7;
    for (int i = 0; i < 100; i++) {
        uint64_t v = mp__splitmix64(&s);
        mp__store_le64(b, v);
        CHECK(mp__load_le64(b) == v, "round trip %d", i);
    }
}

static void test_all_zero(void) {
    uint8_t b[40] = {0};
    CHECK(mp__all_zero(b, sizeof(b)), "zeros");
    CHECK(mp__all_zero(b, 0), "nothing is all zero");
    for (size_t i = 0; i < sizeof(b); i++) {
        b[i] = 0x80;
        CHECK(!mp__all_zero(b, sizeof(b)), "a bit set at byte %zu", i);
        CHECK(mp__all_zero(b, i), "the bytes before it");
        b[i] = 0;
    }
}

static void test_add_sat(void) {
    CHECK(mp__add_sat_u64(1, 2) == 3, "small");
    CHECK(mp__add_sat_u64(UINT64_MAX - 1, 1) == UINT64_MAX, "exact top");
    CHECK(mp__add_sat_u64(UINT64_MAX - 1, 2) == UINT64_MAX, "saturates");
    CHECK(mp__add_sat_u64(UINT64_MAX, UINT64_MAX) == UINT64_MAX, "both max");
    CHECK(mp__add_sat_u64(0, UINT64_MAX) == UINT64_MAX, "zero plus max");
}

static void test_split(void) {
    char host[64];
    long port = -1;
    CHECK(mp__endpoint_split("tcp://10.0.0.1:7400", host, sizeof(host),
                             &port) == 0 &&
              strcmp(host, "10.0.0.1") == 0 && port == 7400,
          "ipv4");
    CHECK(mp__endpoint_split("tcp://[::1]:80", host, sizeof(host), &port) ==
                  0 &&
              strcmp(host, "[::1]") == 0 && port == 80,
          "ipv6 keeps its brackets");
    CHECK(mp__endpoint_split("tcp://h:*", host, sizeof(host), &port) == 0 &&
              port == 0,
          "a wildcard port reads as 0");
    const char *bad[] = {
        NULL,         "udp://h:1",     "tcp://h",
        "tcp://:1",   "tcp://h:",      "tcp://h:1x",
        "tcp://h:-1", "tcp://h:65536", "tcp://h:99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(mp__endpoint_split(bad[i], host, sizeof(host), &port) == -1,
              "refused: %s", bad[i] ? bad[i] : "(null)");
    CHECK(mp__endpoint_split("tcp://abcdefgh:1", host, 8, &port) == -1,
          "a host longer than the buffer");
    CHECK(mp__endpoint_split("tcp://abcdefg:1", host, 8, &port) == 0,
          "a host that just fits");
}

static void test_addr_ok(void) {
    CHECK(mp__endpoint_addr_ok("tcp://127.0.0.1:1"), "port 1");
    CHECK(mp__endpoint_addr_ok("tcp://example.org:65535"), "port 65535");
    const char *bad[] = {
        NULL,           "tcp://127.0.0.1:0", "tcp://127.0.0.1:*",
        "tcp://*:7400", "ipc:///tmp/x",      "inproc://x",
        "tcp://a b:1",  "tcp://a/b:1",       "tcp://a;b:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!mp__endpoint_addr_ok(bad[i]), "refused: %s",
              bad[i] ? bad[i] : "(null)");
    char longaddr[MP_ADDR_MAX + 8];
    memcpy(longaddr, "tcp://", 6);
    memset(longaddr + 6, 'a', sizeof(longaddr) - 6);
    memcpy(longaddr + sizeof(longaddr) - 3, ":1", 3);
    CHECK(!mp__endpoint_addr_ok(longaddr), "longer than MP_ADDR_MAX");
}

static void test_parse(void) {
    uint8_t key[32];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(i * 7 + 1);
    char ktxt[41], text[MP_ADDR_MAX + 64];
    CHECK(mp__z85_encode(key, 32, ktxt) == 0, "key text");
    snprintf(text, sizeof(text), "tcp://192.168.1.2:7400#%s", ktxt);
    mp_endpoint_t ep;
    CHECK(mp__endpoint_parse(text, &ep) == MOSHPIT_OK, "valid: %s", text);
    CHECK(strcmp(ep.addr, "tcp://192.168.1.2:7400") == 0, "addr %s", ep.addr);
    CHECK(memcmp(ep.key, key, 32) == 0, "key");

    /* the longest address that fits, then one byte more */
    char addr[MP_ADDR_MAX + 1];
    size_t alen = MP_ADDR_MAX - 1;
    memcpy(addr, "tcp://", 6);
    memset(addr + 6, 'h', alen - 6 - 2);
    memcpy(addr + alen - 2, ":9", 3);
    snprintf(text, sizeof(text), "%s#%s", addr, ktxt);
    CHECK(mp__endpoint_parse(text, &ep) == MOSHPIT_OK &&
              strlen(ep.addr) == MP_ADDR_MAX - 1,
          "an address of MP_ADDR_MAX - 1 bytes");
    snprintf(text, sizeof(text), "tcp://h%s#%s", addr + 6, ktxt);
    CHECK(mp__endpoint_parse(text, &ep) == MOSHPIT_EINVAL,
          "an address of MP_ADDR_MAX bytes");

    char bad[6][MP_ADDR_MAX + 64];
    snprintf(bad[0], sizeof(bad[0]), "tcp://h:1%s", ktxt);     /* no '#' */
    snprintf(bad[1], sizeof(bad[1]), "ipc://x#%s", ktxt);      /* not tcp */
    snprintf(bad[2], sizeof(bad[2]), "tcp://h:0#%s", ktxt);    /* port 0 */
    snprintf(bad[3], sizeof(bad[3]), "tcp://h:1#%.39s", ktxt); /* short */
    snprintf(bad[4], sizeof(bad[4]), "tcp://h:1#%s", ktxt);
    bad[4][strlen(bad[4]) - 1] = '"';              /* not in the Z85 alphabet */
    snprintf(bad[5], sizeof(bad[5]), "#%s", ktxt); /* no address */
    for (int i = 0; i < 6; i++)
        CHECK(mp__endpoint_parse(bad[i], &ep) == MOSHPIT_EINVAL, "refused: %s",
              bad[i]);
    CHECK(mp__endpoint_parse(NULL, &ep) == MOSHPIT_EINVAL, "NULL text");
    CHECK(mp__endpoint_parse(text, NULL) == MOSHPIT_EINVAL, "NULL out");
}

typedef struct {
    int lines, warns, last_level;
    char last[MP_LOG_LINE_MAX + 8], prev[MP_LOG_LINE_MAX + 8];
} sink_t;

static void sink(void *user, int level, const char *msg) {
    sink_t *s = user;
    s->lines++;
    if (level == MOSHPIT_LOG_WARN)
        s->warns++;
    s->last_level = level;
    memcpy(s->prev, s->last, sizeof(s->prev));
    snprintf(s->last, sizeof(s->last), "%s", msg);
}

static void test_log(void) {
    sink_t s;
    memset(&s, 0, sizeof(s));
    mp_log_t lg;
    mp__log_init(&lg, sink, &s, MOSHPIT_LOG_WARN);
    CHECK(mp__log_enabled(&lg, MOSHPIT_LOG_ERROR), "error passes");
    CHECK(!mp__log_enabled(&lg, MOSHPIT_LOG_INFO), "info is filtered");
    mp__log_write(&lg, 5000, MOSHPIT_LOG_INFO, "dropped %d", 1);
    CHECK(s.lines == 0, "filtered lines never reach the callback");
    mp__log_write(&lg, 5000, MOSHPIT_LOG_ERROR, "error %d", 42);
    CHECK(s.lines == 1 && strcmp(s.last, "error 42") == 0 &&
              s.last_level == MOSHPIT_LOG_ERROR,
          "formatted: %s", s.last);

    /* 3 x the limit in one second: only the limit goes through, errors
     * are never limited */
    for (uint32_t i = 0; i < 3 * MP_LOG_WARN_PER_S; i++)
        mp__log_write(&lg, 5000 + i, MOSHPIT_LOG_WARN, "warn %u", i);
    CHECK(s.warns == (int)MP_LOG_WARN_PER_S, "%d warnings passed", s.warns);
    mp__log_write(&lg, 5100, MOSHPIT_LOG_ERROR, "still an error");
    CHECK(strcmp(s.last, "still an error") == 0, "errors pass the limit");
    /* the next window reports what was held back, then passes again */
    int before = s.lines;
    mp__log_write(&lg, 6000, MOSHPIT_LOG_WARN, "next window");
    CHECK(s.lines == before + 2, "a note and the line: %d", s.lines - before);
    CHECK(strcmp(s.last, "next window") == 0, "last: %s", s.last);
    char want[96];
    snprintf(want, sizeof(want), "%u warnings suppressed in the last second",
             2 * MP_LOG_WARN_PER_S);
    CHECK(strcmp(s.prev, want) == 0, "note: %s", s.prev);
    CHECK(s.warns == (int)MP_LOG_WARN_PER_S + 2, "warnings: %d", s.warns);

    /* long lines are cut, not overflowed */
    char big[2 * MP_LOG_LINE_MAX];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mp__log_write(&lg, 7000, MOSHPIT_LOG_ERROR, "%s", big);
    CHECK(strlen(s.last) == MP_LOG_LINE_MAX - 1, "cut to %zu", strlen(s.last));

    /* no callback: nothing is enabled, nothing is called */
    mp__log_init(&lg, NULL, NULL, MOSHPIT_LOG_DEBUG);
    CHECK(!mp__log_enabled(&lg, MOSHPIT_LOG_ERROR), "silent without fn");
    mp__log_write(&lg, 0, MOSHPIT_LOG_ERROR, "nobody hears this");
}

int main(void) {
    test_splitmix();
    test_le();
    test_all_zero();
    test_add_sat();
    test_split();
    test_addr_ok();
    test_parse();
    test_log();
    return test_summary("test_base");
}
