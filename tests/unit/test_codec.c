/* SPDX-License-Identifier: MIT */
/*
 * test_codec.c - unit tests of the wire encodings (src/core/codec.h): known
 * binary16 and bfloat16 codes (ties to even, subnormals, saturation, NaN),
 * every binary16 code decoded and encoded back to itself, the blockwise
 * 8- and 4-bit codes within half a step of the input, the edge blocks
 * (zero, tiny, NaN, infinity, FLT_MAX), decoding that reports non-finite
 * results (NaN scales, overflowing scales, binary16 infinities), and the
 * vector kernels (AVX2/F16C, NEON) equal to the plain C ones bit for bit on
 * all of that and on random inputs and random bytes of many lengths.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"

#include "test_util.h"

static float fb(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bf(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint16_t h16(const mp_codec_kernels_t *k, float x, int bf16) {
    uint8_t b[2];
    (bf16 ? k->bf16_enc : k->f16_enc)(&x, 1, b);
    return (uint16_t)(b[0] | b[1] << 8);
}

static void test_halves(const mp_codec_kernels_t *k) {
    static const struct {
        uint32_t in;
        uint16_t f16, b16;
    } cases[] = {
        {0x3f800000u, 0x3c00, 0x3f80}, /* 1 */
        {0xbf800000u, 0xbc00, 0xbf80}, /* -1 */
        {0x00000000u, 0x0000, 0x0000},
        {0x80000000u, 0x8000, 0x8000},
        {0x477fe000u, 0x7bff, 0x4780}, /* 65504 */
        {0x477ff000u, 0x7bff, 0x4780}, /* 65520: would round up, saturates */
        {0x4e6e6b28u, 0x7bff, 0x4e6e}, /* 1e9 */
        {0x7f800000u, 0x7bff, 0x7f7f}, /* +inf saturates */
        {0xff800000u, 0xfbff, 0xff7f},
        {0x7f7fffffu, 0x7bff, 0x7f7f}, /* FLT_MAX: bf16 rounds to inf */
        {0x33800000u, 0x0001, 0x3380}, /* 2^-24, smallest half subnormal */
        {0x33000000u, 0x0000, 0x3300}, /* 2^-25: tie, to even 0 */
        {0x33c00000u, 0x0002, 0x33c0}, /* 3 * 2^-25: tie, to even 2 */
        {0x38800000u, 0x0400, 0x3880}, /* 2^-14, smallest normal half */
        {0x387ff000u, 0x0400, 0x3880}, /* just below: rounds up to normal */
        {0x3f801000u, 0x3c00, 0x3f80}, /* 1 + 2^-11: tie, to even */
        {0x3f803000u, 0x3c02, 0x3f80}, /* 1 + 3 * 2^-11: tie, to even */
        {0x3f808000u, 0x3c04, 0x3f80}, /* bf16 tie 1 + 2^-8: to even */
        {0x3f818000u, 0x3c0c, 0x3f82}, /* bf16 tie 1 + 3 * 2^-8: to even */
        {0x00000001u, 0x0000, 0x0000}, /* float subnormal */
        {0x007fffffu, 0x0000, 0x0080}, /* largest float subnormal */
        {0x7fc00000u, 0x7e00, 0x7fc0}, /* quiet NaN */
        {0xffc00001u, 0xfe00, 0xffc0}, /* payload below both */
        {0x7f800001u, 0x7e00, 0x7fc0}, /* signalling NaN made quiet */
        {0x7fa00000u, 0x7f00, 0x7fe0}, /* top payload bits kept */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t a = h16(k, fb(cases[i].in), 0);
        uint16_t b = h16(k, fb(cases[i].in), 1);
        CHECK(a == cases[i].f16, "%s: fp16(0x%08x) = 0x%04x, want 0x%04x",
              k->name, cases[i].in, a, cases[i].f16);
        CHECK(b == cases[i].b16, "%s: bf16(0x%08x) = 0x%04x, want 0x%04x",
              k->name, cases[i].in, b, cases[i].b16);
    }
    /* every binary16 code: decodes to its value, finite iff the exponent
     * is not all ones, and a finite one encodes back to itself */
    int wrong = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint8_t b[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
        float f;
        bool fin = k->f16_dec(b, 1, &f);
        bool want_fin = (h & 0x7c00u) != 0x7c00u;
        wrong += fin != want_fin;
        if (!want_fin) {
            wrong += (h & 0x3ffu) ? !isnan(f) : !isinf(f);
            continue;
        }
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double v = e ? ldexp(1024.0 + m, (int)e - 25) : ldexp(m, -24);
        wrong += (double)fabsf(f) != v || (signbit(f) != 0) != (h >> 15);
        wrong += h16(k, f, 0) != h;
    }
    CHECK(wrong == 0, "%s: %d binary16 codes decoded or re-encoded wrong",
          k->name, wrong);
    /* bfloat16 decoding is the top half; infinities and NaNs not finite */
    wrong = 0;
    for (uint32_t h = 0; h < 65536; h += 7) {
        uint8_t b[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
        float f;
        bool fin = k->bf16_dec(b, 1, &f);
        wrong += bf(f) != h << 16 || fin != ((h & 0x7f80u) != 0x7f80u);
    }
    CHECK(wrong == 0, "%s: %d bfloat16 codes decoded wrong", k->name, wrong);
}

/* Every decoded value within half a quantization step (plus rounding) of
 * its input, per block; the step is the block's scale. */
static void test_blocks(const mp_codec_kernels_t *k) {
    enum { N = 1000 };
    static float x[N], y[N];
    static uint8_t enc[4 * N + 64];
    for (int lv = 0; lv < 2; lv++) {
        int levels = lv ? 7 : 127;
        uint32_t c = lv ? MOSHPIT_COMPRESS_INT4 : MOSHPIT_COMPRESS_INT8;
        for (int i = 0; i < N; i++)
            x[i] = (float)((int64_t)(next() % 2000001) - 1000000) * 1e-3f *
                   (i % 128 < 64 ? 1.0f : 1e-30f);
        (lv ? k->q4_enc : k->q8_enc)(x, N, enc);
        bool fin = (lv ? k->q4_dec : k->q8_dec)(enc, N, y);
        CHECK(fin, "%s: finite input decoded non-finite", k->name);
        int wrong = 0;
        for (int b = 0; b * 64 < N; b++) {
            float amax = 0;
            for (int i = b * 64; i < N && i < b * 64 + 64; i++)
                amax = fmaxf(amax, fabsf(x[i]));
            float s = fb((uint32_t)enc[4 * b] | (uint32_t)enc[4 * b + 1] << 8 |
                         (uint32_t)enc[4 * b + 2] << 16 |
                         (uint32_t)enc[4 * b + 3] << 24);
            wrong += s != amax / (float)levels;
            for (int i = b * 64; i < N && i < b * 64 + 64; i++)
                wrong += fabs((double)x[i] - (double)y[i]) >
                         (0.5 + 1e-4) * (double)s;
        }
        CHECK(wrong == 0, "%s: %d INT%d values off by more than half a step",
              k->name, wrong, lv ? 4 : 8);
        CHECK(mp__codec_bytes(c, N) == 4 * 16 + (lv ? N / 2 : N), "size");
    }
}

/* Edge blocks and malformed bytes. */
static void test_edges(const mp_codec_kernels_t *k) {
    float x[64], y[64];
    uint8_t enc[4 + 64];
    memset(x, 0, sizeof x);
    k->q8_enc(x, 64, enc);
    CHECK(bf(fb((uint32_t)enc[0] | (uint32_t)enc[1] << 8 |
                (uint32_t)enc[2] << 16 | (uint32_t)enc[3] << 24)) == 0 &&
              k->q8_dec(enc, 64, y) && y[5] == 0,
          "%s: zero block", k->name);
    x[3] = NAN;
    k->q8_enc(x, 64, enc);
    CHECK(!k->q8_dec(enc, 64, y), "%s: NaN block decodes finite", k->name);
    x[3] = -INFINITY;
    k->q4_enc(x, 64, enc);
    CHECK(!k->q4_dec(enc, 64, y), "%s: inf block decodes finite", k->name);
    for (int i = 0; i < 64; i++)
        x[i] = fb((uint32_t)i * 3u); /* float subnormals: tiny block */
    k->q8_enc(x, 64, enc);
    CHECK(k->q8_dec(enc, 64, y), "%s: tiny block", k->name);
    int off = 0;
    for (int i = 0; i < 64; i++)
        off += fabsf(x[i] - y[i]) > fb(189u); /* within absmax */
    CHECK(off == 0, "%s: tiny block off", k->name);
    for (int i = 0; i < 64; i++)
        x[i] = (i & 1) ? FLT_MAX : -FLT_MAX;
    k->q8_enc(x, 64, enc);
    CHECK(k->q8_dec(enc, 64, y) && y[1] > 0.9999f * FLT_MAX &&
              y[2] < -0.9999f * FLT_MAX,
          "%s: FLT_MAX block", k->name);
    /* a finite scale that overflows with code 127 */
    uint32_t big = 0x7f000000u; /* 2^127 */
    memset(enc, 127, sizeof enc);
    memcpy(enc, &big, 4);
    CHECK(!k->q8_dec(enc, 64, y), "%s: overflowing scale decodes finite",
          k->name);
    uint32_t nan = 0x7fc00000u;
    memset(enc, 0, sizeof enc);
    memcpy(enc, &nan, 4);
    CHECK(!k->q4_dec(enc, 64, y), "%s: NaN scale decodes finite", k->name);
}

typedef struct {
    const char *what;
    void (*enc)(const float *, size_t, uint8_t *);
    bool (*dec)(const uint8_t *, size_t, float *);
    uint32_t c;
} pair_t;

static void pairs_of(const mp_codec_kernels_t *k, pair_t p[4]) {
    p[0] = (pair_t){"fp16", k->f16_enc, k->f16_dec, MOSHPIT_COMPRESS_FP16};
    p[1] = (pair_t){"bf16", k->bf16_enc, k->bf16_dec, MOSHPIT_COMPRESS_BF16};
    p[2] = (pair_t){"int8", k->q8_enc, k->q8_dec, MOSHPIT_COMPRESS_INT8};
    p[3] = (pair_t){"int4", k->q4_enc, k->q4_dec, MOSHPIT_COMPRESS_INT4};
}

/* One input of n values of a kind (random, edge values mixed in). */
static void fill(float *x, size_t n, int kind) {
    static const uint32_t edge[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x33000000u,
        0x33c00000u, 0x3f801000u, 0x3f803000u, 0x3f808000u, 0x477ff000u,
        0xc77ff000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
        0x7fc00000u, 0xffa00001u, 0x38800000u, 0x387ff000u, 0x4e6e6b28u};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next();
        switch (kind) {
        case 0: /* ordinary values */
            x[i] = (float)((int64_t)(r % 2000001) - 1000000) * 1e-6f;
            break;
        case 1: /* any bits */
            x[i] = fb((uint32_t)r);
            break;
        case 2: /* edge values and ties, blocks of zeros */
            x[i] = (i / 64) % 3 == 1 ? 0.0f : fb(edge[r % (sizeof edge / 4)]);
            break;
        default: /* small and huge magnitudes, no NaN */
            x[i] = ldexpf((float)(r % 1000) - 500.0f,
                          (int)((r >> 20) % 200) - 150);
            break;
        }
    }
}

static bool same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void test_kernels_agree(const mp_codec_kernels_t *c,
                               const mp_codec_kernels_t *v) {
    enum { N = 65536 + 67 };
    float *x = malloc(N * sizeof *x), *y1 = malloc(N * sizeof *y1),
          *y2 = malloc(N * sizeof *y2);
    uint8_t *e1 = malloc(4 * N), *e2 = malloc(4 * N);
    pair_t pc[4], pv[4];
    pairs_of(c, pc);
    pairs_of(v, pv);
    static const size_t lens[] = {0,   1,   2,   3,   7,   8,    15,   16,
                                  17,  31,  32,  33,  63,  64,   65,   127,
                                  128, 129, 191, 200, 255, 1000, 4099, N};
    int wrong = 0, runs = 0;
    for (int t = 0; t < 4; t++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (int kind = 0; kind < 4; kind++) {
                size_t n = lens[li];
                fill(x, n, kind);
                size_t nb = mp__codec_bytes(pc[t].c, n);
                memset(e1, 0xa5, nb + 1);
                memset(e2, 0x5a, nb + 1);
                pc[t].enc(x, n, e1);
                pv[t].enc(x, n, e2);
                runs++;
                if (memcmp(e1, e2, nb) != 0) {
                    wrong++;
                    fprintf(stderr, "%s %s: n %zu kind %d encodes differ\n",
                            v->name, pc[t].what, n, kind);
                    continue;
                }
                bool f1 = pc[t].dec(e1, n, y1), f2 = pv[t].dec(e1, n, y2);
                if (f1 != f2 || !same_bits(y1, y2, n)) {
                    wrong++;
                    fprintf(stderr, "%s %s: n %zu kind %d decodes differ\n",
                            v->name, pc[t].what, n, kind);
                }
                /* random bytes: the receiver's side of a hostile peer */
                for (size_t i = 0; i < nb; i++)
                    e1[i] = (uint8_t)next();
                f1 = pc[t].dec(e1, n, y1);
                f2 = pv[t].dec(e1, n, y2);
                if (f1 != f2 || !same_bits(y1, y2, n)) {
                    wrong++;
                    fprintf(stderr, "%s %s: n %zu random bytes differ\n",
                            v->name, pc[t].what, n);
                }
            }
    CHECK(wrong == 0, "%s: %d of %d runs differ from the C kernels", v->name,
          wrong, runs);
    free(x);
    free(y1);
    free(y2);
    free(e1);
    free(e2);
}

/* The example of docs/PROTOCOL.md, "Encoded values". */
static void test_doc_example(void) {
    const float x[3] = {1.0f, -0.5f, 0.25f};
    static const uint8_t want[7] = {0x04, 0x02, 0x01, 0x3c, 0x7f, 0xc0, 0x20};
    uint8_t e[7];
    for (size_t k = 0; mp__codec_kernels(k) != NULL; k++) {
        mp__codec_kernels(k)->q8_enc(x, 3, e);
        CHECK(memcmp(e, want, sizeof want) == 0, "%s: INT8 example bytes",
              mp__codec_kernels(k)->name);
    }
}

static void test_dispatch(void) {
    CHECK(mp__codec_valid(0) && mp__codec_valid(4) && !mp__codec_valid(5),
          "valid");
    CHECK(mp__codec_bytes(MOSHPIT_COMPRESS_NONE, 10) == 40 &&
              mp__codec_bytes(MOSHPIT_COMPRESS_FP16, 10) == 20 &&
              mp__codec_bytes(MOSHPIT_COMPRESS_INT8, 65) == 8 + 65 &&
              mp__codec_bytes(MOSHPIT_COMPRESS_INT4, 65) == 8 + 33 &&
              mp__codec_bytes(9, 10) == 0,
          "sizes");
    float x[100], y[100];
    uint8_t e[400];
    fill(x, 100, 0);
    for (uint32_t c = 1; c <= MP_CODEC_MAX; c++) {
        mp__codec_encode(c, x, 100, e);
        CHECK(mp__codec_decode(c, e, 100, y), "codec %u round trip", c);
    }
}

int main(void) {
    const mp_codec_kernels_t *c = mp__codec_kernels(0);
    printf("kernels: %s", c->name);
    for (size_t i = 1; mp__codec_kernels(i) != NULL; i++)
        printf(", %s", mp__codec_kernels(i)->name);
    printf("%s\n", mp__codec_kernels(1) == NULL
                       ? " only (no vector kernels on this build or CPU)"
                       : "");
    for (size_t i = 0; mp__codec_kernels(i) != NULL; i++) {
        test_halves(mp__codec_kernels(i));
        test_blocks(mp__codec_kernels(i));
        test_edges(mp__codec_kernels(i));
        if (i > 0)
            test_kernels_agree(c, mp__codec_kernels(i));
    }
    test_dispatch();
    test_doc_example();
    return test_summary("test_codec");
}
