/* SPDX-License-Identifier: MIT */
/*
 * test_util.h - helpers shared by the test programs, header-only so each
 * test stays one self-contained executable: the CHECK macro family, which
 * counts checks and failures and prints file:line and the failed condition
 * for every failure; test_summary(), which prints the per-program result
 * line and gives the exit status; splitmix64, a fixed-seed source of
 * test data that does not depend on the library; and test_read_hex, which
 * loads a golden vector. A test that expects many
 * failures to cascade may define TEST_MAX_PRINTED (failures printed; the
 * rest are only counted) before including this header. Include it from one
 * translation unit per program: the counters are file-local.
 */
#ifndef MOSHPIT_TEST_UTIL_H
#define MOSHPIT_TEST_UTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifndef TEST_MAX_PRINTED
#define TEST_MAX_PRINTED LONG_MAX
#endif

static long test_checks;   /* CHECKs evaluated */
static long test_failures; /* CHECKs whose condition was false */

/* Counts one failure and, unless past TEST_MAX_PRINTED, prints its
 * "file:line: FAIL (cond): " prefix; returns 1 if the caller should print
 * the message. */
static inline int test_fail_(const char *file, int line, const char *cond) {
    if (++test_failures > TEST_MAX_PRINTED)
        return 0;
    fprintf(stderr, "%s:%d: FAIL (%s): ", file, line, cond);
    return 1;
}

/* CHECK_AT(file, line, cond, fmt, ...): one check reported at file:line
 * (for helpers that check on behalf of their caller). cond is evaluated
 * once; the printf-style message follows the prefix on failure. */
#define CHECK_AT(file, line, cond, ...)                                        \
    do {                                                                       \
        test_checks++;                                                         \
        if (!(cond) && test_fail_((file), (line), #cond)) {                    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* CHECK(cond, fmt, ...): one check reported at the caller's file:line. */
#define CHECK(cond, ...) CHECK_AT(__FILE__, __LINE__, cond, __VA_ARGS__)

/* Prints "<name>: N checks passed" (stdout) or "<name>: F of N checks
 * failed" (stderr) and returns the exit status for main: 0 or 1. */
static inline int test_summary(const char *name) {
    if (test_failures != 0) {
        fprintf(stderr, "%s: %ld of %ld checks failed\n", name, test_failures,
                test_checks);
        return 1;
    }
    printf("%s: %ld checks passed\n", name, test_checks);
    return 0;
}

/* splitmix64: advances *state and returns the next value of the sequence;
 * fixed seeds give the same test data on every platform. */
static inline uint64_t test_splitmix64(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Fills p[0..n) with the top byte of successive splitmix64 values. */
static inline void test_random_bytes(uint64_t *state, uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(test_splitmix64(state) >> 56);
}

/* Reads a file of hex digits (whitespace allowed) into out[0..cap);
 * returns the byte count, or -1 (no file, odd digit count, another
 * character, more than cap bytes). For the golden vectors. */
static inline long test_read_hex(const char *path, uint8_t *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long n = 0;
    int hi = -1, c;
    while ((c = fgetc(f)) != EOF) {
        int v;
        if (c >= '0' && c <= '9')
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        else if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        else {
            n = -1;
            break;
        }
        if (hi < 0) {
            hi = v;
            continue;
        }
        if ((size_t)n >= cap) {
            n = -1;
            break;
        }
        out[n++] = (uint8_t)(hi << 4 | v);
        hi = -1;
    }
    fclose(f);
    return hi >= 0 ? -1 : n;
}

#endif
