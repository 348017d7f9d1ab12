/* SPDX-License-Identifier: MIT */
/*
 * test_share.c - tests of the partition math (core/share.c): for many random
 * (n, count, bandwidths), including counts up to 2^40 and SIZE_MAX and
 * bandwidths up to 2^32 - 1, mp__share_split must match an independent oracle
 * built on 128-bit arithmetic (exact largest-remainder rounding, ties to the
 * lower index), cover [0, count) contiguously, stay within one element of
 * the ideal proportional size, give equal bandwidths sizes that differ by at
 * most one, and treat bandwidth 0 as 1. mp__share_parts is checked on its
 * edges. Deterministic; prints every failed check and returns nonzero on
 * failure.
 */
#include "core/share.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "wire/wire.h"

#define TEST_MAX_PRINTED 50
#include "test_util.h"

/* The oracle may use a 128-bit type; the code under test must not. Where
 * size_t has 32 bits, count * bandwidth < 2^64 and 64 bits are enough. */
#if SIZE_MAX > UINT32_MAX
__extension__ typedef unsigned __int128 u128;
#else
typedef uint64_t u128;
#endif

#define NMAX 1024

static uint64_t rng_state = 0x243f6a8885a308d3u;

static uint64_t rnd(void) {
    return test_splitmix64(&rng_state);
}

static uint64_t rnd_below(uint64_t bound) {
    return bound ? rnd() % bound : 0;
}

/* Exact largest-remainder split with 128-bit arithmetic. */
static void oracle(uint32_t n, const uint32_t *bw, size_t count, size_t *len) {
    static uint64_t rem[NMAX];
    static bool plus[NMAX];
    u128 total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += bw[i] ? bw[i] : 1;
    u128 assigned = 0;
    for (uint32_t i = 0; i < n; i++) {
        u128 prod = (u128)count * (bw[i] ? bw[i] : 1);
        len[i] = (size_t)(prod / total);
        rem[i] = (uint64_t)(prod % total);
        plus[i] = false;
        assigned += len[i];
    }
    u128 left = (u128)count - assigned;
    /* Pick `left` times the largest remainder not taken, lowest index. */
    for (u128 k = 0; k < left; k++) {
        int best = -1;
        for (uint32_t i = 0; i < n; i++)
            if (!plus[i] && (best < 0 || rem[i] > rem[best]))
                best = (int)i;
        plus[best] = true;
        len[best]++;
    }
}

static void check_layout(uint32_t n, const uint32_t *bw, size_t count,
                         const char *what) {
    static size_t off[NMAX], len[NMAX], want[NMAX];
    CHECK(mp__share_split(n, bw, count, off, len) == 0, "%s: n=%u", what, n);
    oracle(n, bw, count, want);

    u128 total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += bw[i] ? bw[i] : 1;
    size_t o = 0;
    bool same = true, contiguous = true, close = true;
    for (uint32_t i = 0; i < n; i++) {
        same &= len[i] == want[i];
        contiguous &= off[i] == o;
        o += len[i];
        /* |len_i - count * b_i / B| < 1  <=>  len_i is count * b_i / B
         * rounded down, or up when it is not whole */
        u128 b = (u128)count * (bw[i] ? bw[i] : 1);
        u128 q = b / total, r = b % total;
        close &= len[i] == q || (r != 0 && len[i] == q + 1);
    }
    CHECK(same, "%s: n=%u count=%zu differs from the oracle", what, n, count);
    CHECK(contiguous, "%s: n=%u count=%zu not contiguous", what, n, count);
    CHECK(o == count, "%s: n=%u sum %zu != count %zu", what, n, o, count);
    CHECK(close, "%s: n=%u count=%zu not within one element of ideal", what, n,
          count);
}

static void test_random(void) {
    static uint32_t bw[NMAX];
    for (int iter = 0; iter < 20000; iter++) {
        uint32_t n = 1 + (uint32_t)rnd_below(iter % 10 == 0 ? 200 : 64);
        size_t count;
        switch (iter % 4) {
        case 0:
            count = (size_t)rnd_below(100);
            break;
        case 1:
            count = (size_t)rnd_below(1u << 24);
            break;
        case 2:
            count = (size_t)rnd_below((uint64_t)1 << 40);
            break;
        default:
            count = (size_t)rnd();
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            switch ((iter / 4) % 4) {
            case 0:
                bw[i] = (uint32_t)rnd_below(10);
                break;
            case 1:
                bw[i] = (uint32_t)rnd();
                break;
            case 2:
                bw[i] = UINT32_MAX - (uint32_t)rnd_below(3);
                break;
            default:
                bw[i] = (uint32_t)rnd_below(1000) + 1;
                break;
            }
        }
        check_layout(n, bw, count, "random");
    }
}

static void test_equal(void) {
    static uint32_t bw[NMAX];
    static size_t off[NMAX], len[NMAX];
    for (int iter = 0; iter < 5000; iter++) {
        uint32_t n = 1 + (uint32_t)rnd_below(100);
        size_t count = (size_t)(iter % 2 ? rnd_below(1000) : rnd());
        uint32_t b = (uint32_t)rnd_below(3) == 0 ? 0 : (uint32_t)rnd();
        for (uint32_t i = 0; i < n; i++)
            bw[i] = b;
        CHECK(mp__share_split(n, bw, count, off, len) == 0, "equal");
        size_t lo = SIZE_MAX, hi = 0;
        for (uint32_t i = 0; i < n; i++) {
            lo = len[i] < lo ? len[i] : lo;
            hi = len[i] > hi ? len[i] : hi;
        }
        CHECK(hi - lo <= 1, "equal: n=%u count=%zu spread %zu", n, count,
              hi - lo);
        /* Ties go to the lower indices: the first count % n get one more. */
        for (uint32_t i = 0; i < n; i++)
            CHECK(len[i] == count / n + (i < count % n), "equal: tie order");
    }
}

static void test_zero_is_one(void) {
    static uint32_t zero[NMAX], one[NMAX];
    static size_t off0[NMAX], len0[NMAX], off1[NMAX], len1[NMAX];
    for (int iter = 0; iter < 2000; iter++) {
        uint32_t n = 1 + (uint32_t)rnd_below(64);
        size_t count = (size_t)(iter % 2 ? rnd_below(10000) : rnd());
        for (uint32_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)rnd_below(4);
            zero[i] = b;
            one[i] = b ? b : 1;
        }
        CHECK(mp__share_split(n, zero, count, off0, len0) == 0, "zero");
        CHECK(mp__share_split(n, one, count, off1, len1) == 0, "one");
        CHECK(memcmp(len0, len1, n * sizeof *len0) == 0 &&
                  memcmp(off0, off1, n * sizeof *off0) == 0,
              "zero bandwidth not treated as 1 (n=%u count=%zu)", n, count);
    }
}

static void test_fixed(void) {
    size_t off[8], len[8];
    uint32_t bw[8] = {1, 1, 2};

    CHECK(mp__share_split(0, bw, 10, off, len) == -1, "n == 0");
    CHECK(mp__share_split(3, NULL, 10, off, len) == -1, "NULL bandwidths");
    CHECK(mp__share_split(3, bw, 10, NULL, len) == -1, "NULL off");
    CHECK(mp__share_split(3, bw, 10, off, NULL) == -1, "NULL len");

    /* Ideal 0.5, 0.5, 1: the tie between 0 and 1 goes to index 0. */
    CHECK(mp__share_split(3, bw, 2, off, len) == 0, "tie");
    CHECK(len[0] == 1 && len[1] == 0 && len[2] == 1, "tie: %zu %zu %zu", len[0],
          len[1], len[2]);
    CHECK(off[0] == 0 && off[1] == 1 && off[2] == 1, "tie offsets");

    /* 1:1:2 of 100 is exact. */
    CHECK(mp__share_split(3, bw, 100, off, len) == 0, "exact");
    CHECK(len[0] == 25 && len[1] == 25 && len[2] == 50, "exact sizes");

    /* count 0: everything empty. */
    CHECK(mp__share_split(3, bw, 0, off, len) == 0, "empty");
    CHECK(len[0] == 0 && len[1] == 0 && len[2] == 0 && off[2] == 0, "empty");

    /* n == 1 takes everything, whatever its bandwidth. */
    uint32_t z = 0;
    CHECK(mp__share_split(1, &z, SIZE_MAX, off, len) == 0 &&
              len[0] == SIZE_MAX && off[0] == 0,
          "n == 1");

    /* Largest remainders, not lowest index: 10 over 3:3:4 -> 3, 3, 4;
     * 11 over 3:3:4 -> ideal 3.3, 3.3, 4.4 -> remainders .3 .3 .4 -> 3,3,5 */
    uint32_t b2[3] = {3, 3, 4};
    CHECK(mp__share_split(3, b2, 11, off, len) == 0, "lr");
    CHECK(len[0] == 3 && len[1] == 3 && len[2] == 5, "lr: %zu %zu %zu", len[0],
          len[1], len[2]);

    /* Extremes without overflow, against the oracle. */
    uint32_t big[4] = {UINT32_MAX, UINT32_MAX, 1, 0};
    check_layout(4, big, SIZE_MAX, "max count");
#if SIZE_MAX > UINT32_MAX
    check_layout(4, big, (size_t)1 << 40, "2^40");
#endif
    check_layout(4, big, 3, "tiny count");
    static uint32_t many[NMAX];
    for (uint32_t i = 0; i < NMAX; i++)
        many[i] = UINT32_MAX - i;
    check_layout(NMAX, many, SIZE_MAX, "1024 x max");
    check_layout(NMAX, many, 1000, "1024 x max, short");
#if SIZE_MAX > UINT32_MAX
    check_layout(MP_GROUP_MAX, many, ((size_t)1 << 40) + 12345, "64 x max");
#else
    check_layout(MP_GROUP_MAX, many, SIZE_MAX - 12345, "64 x max");
#endif
}

static void test_parts(void) {
    CHECK(mp__share_parts(0, 100) == 0, "empty share");
    CHECK(mp__share_parts(0, 0) == 0, "empty share, default parts");
    CHECK(mp__share_parts(1, 1) == 1, "1/1");
    CHECK(mp__share_parts(99, 100) == 1, "99/100");
    CHECK(mp__share_parts(100, 100) == 1, "100/100");
    CHECK(mp__share_parts(101, 100) == 2, "101/100");
    CHECK(mp__share_parts(MP_PART_ELEMS_DEFAULT, 0) == 1, "0 = default");
    CHECK(mp__share_parts(MP_PART_ELEMS_DEFAULT + 1, 0) == 2,
          "0 = default, +1");
    CHECK(mp__share_parts(1000, 1) == 1000, "part of one element");
#if SIZE_MAX > UINT32_MAX /* lengths a 32-bit size_t cannot hold */
    CHECK(mp__share_parts((size_t)UINT32_MAX * 1000 + 1, UINT32_MAX) == 1001,
          "huge len, max part");
    CHECK(mp__share_parts((size_t)UINT32_MAX + 1, 1) == UINT32_MAX,
          "saturates at UINT32_MAX");
#endif
    CHECK(mp__share_parts(SIZE_MAX, 1) == UINT32_MAX,
          "saturates at UINT32_MAX");
    for (int i = 0; i < 10000; i++) {
        size_t len = (size_t)rnd_below((uint64_t)1 << 36);
        uint32_t pe = 1 + (uint32_t)rnd_below(1u << 20);
        uint64_t want = len / pe + (len % pe != 0);
        CHECK(mp__share_parts(len, pe) == want, "ceil(%zu / %u)", len, pe);
        /* The parts cover the share exactly: all full but the last. */
        if (want > 0)
            CHECK((want - 1) * pe < len && len <= want * pe, "cover");
    }
}

/* Bandwidth bound: 0 -> 1, nothing above MP_BW_SPREAD x the lower median;
 * checked against a direct definition on random rosters. */
/* The part size: 64 KiB to 256 KiB of float32, a power of two, and an
 * even share of the group cut into 8 parts where the vector allows. */
static void test_part_elems(void) {
    /* 4 MiB of float32 in a group of 8: even shares of 128 Ki values */
    CHECK(mp__share_part_elems((size_t)1 << 20, 8) == 16384, "4 MiB / 8");
    /* 16 MiB and 64 MiB: 256 KiB parts as before */
    CHECK(mp__share_part_elems((size_t)4 << 20, 8) == 65536, "16 MiB / 8");
    CHECK(mp__share_part_elems((size_t)16 << 20, 8) == 65536, "64 MiB / 8");
    CHECK(mp__share_part_elems((size_t)2 << 20, 8) == 32768, "8 MiB / 8");
    /* never below the minimum, whatever the size */
    CHECK(mp__share_part_elems(0, 8) == MP_PART_ELEMS_MIN, "empty");
    CHECK(mp__share_part_elems(256, 64) == MP_PART_ELEMS_MIN, "1 KiB / 64");
    CHECK(mp__share_part_elems(SIZE_MAX, 1) == MP_PART_ELEMS_DEFAULT,
          "huge, alone");
    CHECK(mp__share_part_elems((size_t)1 << 20, 0) == 65536, "n 0 as 1");
    /* every size is a power of two in range, and an even share has at
     * least MP_PARTS_PER_SHARE parts unless the minimum stops it */
    for (uint32_t n = 1; n <= 64; n++) {
        for (size_t count = 1; count < ((size_t)1 << 26);
             count = count * 3 + 1) {
            uint32_t pe = mp__share_part_elems(count, n);
            CHECK(pe >= MP_PART_ELEMS_MIN && pe <= MP_PART_ELEMS_DEFAULT &&
                      (pe & (pe - 1)) == 0,
                  "power of two in range");
            CHECK(pe == MP_PART_ELEMS_MIN ||
                      mp__share_parts(count / n, pe) >= MP_PARTS_PER_SHARE,
                  "enough parts per share");
            CHECK(pe == MP_PART_ELEMS_DEFAULT ||
                      (uint64_t)pe * 2 * MP_PARTS_PER_SHARE > count / n,
                  "largest size of which 8 whole parts fit");
        }
    }
}

/* The data header's layout byte for each part size the rule makes. */
static void test_part_layout(void) {
    CHECK(mp__share_part_layout(65536) == 0, "65536: 0");
    CHECK(mp__share_part_layout(32768) == 1, "32768: 1");
    CHECK(mp__share_part_layout(16384) == 2, "16384: 2");
    CHECK(mp__share_part_layout(16384) == MP_DATA_LAYOUT_MAX, "max");
    CHECK(mp__share_part_layout(0) == 0 && mp__share_part_layout(1000) == 0 &&
              mp__share_part_layout(8192) == 0 &&
              mp__share_part_layout(131072) == 0,
          "sizes the rule does not make: 0");
    for (size_t count = 1; count < ((size_t)1 << 26); count = count * 3 + 1)
        for (uint32_t n = 1; n <= 64; n++) {
            uint32_t pe = mp__share_part_elems(count, n);
            CHECK((MP_PART_ELEMS_DEFAULT >> mp__share_part_layout(pe)) == pe,
                  "layout of %u", pe);
        }
}

static void test_bandwidth_bound(void) {
    uint32_t in[MP_GROUP_MAX], out[MP_GROUP_MAX];
    uint32_t one[3] = {1000, 1000, UINT32_MAX};
    mp__share_bandwidth_bound(3, one, out);
    CHECK(out[0] == 1000 && out[1] == 1000 && out[2] == 1000 * MP_BW_SPREAD,
          "absurd claim capped: %u", out[2]);
    uint32_t strag[4] = {100, 100, 5, 100};
    mp__share_bandwidth_bound(4, strag, out);
    CHECK(out[0] == 100 && out[2] == 5, "a slow member keeps its figure");
    uint32_t zero[2] = {0, 0};
    mp__share_bandwidth_bound(2, zero, out);
    CHECK(out[0] == 1 && out[1] == 1, "zero is one");
    for (int t = 0; t < 2000; t++) {
        uint32_t n = 1 + (uint32_t)rnd_below(MP_GROUP_MAX);
        for (uint32_t i = 0; i < n; i++)
            in[i] = rnd() & 1 ? (uint32_t)rnd() : (uint32_t)rnd_below(2000);
        mp__share_bandwidth_bound(n, in, out);
        /* lower median: the smallest v with at least (n+1)/2 values <= v */
        uint64_t med = UINT64_MAX;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t v = in[i] ? in[i] : 1;
            uint32_t le = 0;
            for (uint32_t k = 0; k < n; k++)
                le += (in[k] ? in[k] : 1u) <= v;
            if (le >= (n + 1) / 2 && v < med)
                med = v;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint64_t v = in[i] ? in[i] : 1;
            uint64_t want = v < med * MP_BW_SPREAD ? v : med * MP_BW_SPREAD;
            CHECK(out[i] == want, "n=%u i=%u: %u want %llu", n, i, out[i],
                  (unsigned long long)want);
        }
    }
}

int main(void) {
    test_bandwidth_bound();
    test_fixed();
    test_parts();
    test_part_elems();
    test_part_layout();
    test_equal();
    test_zero_is_one();
    test_random();
    return test_summary("test_share");
}
