/* SPDX-License-Identifier: MIT */
/*
 * codec_x86.c - the x86-64 kernels of the wire encodings (codec.h): on AVX2
 * with F16C for binary16, and on SSE4.1 (binary16 then in C: F16C needs
 * AVX) for CPUs or virtual machines without AVX, chosen at run time: the
 * functions carry target attributes, so the file builds without -mavx2 and
 * each set runs only where CPUID (and XGETBV: the OS saves the YMM
 * registers) says the CPU can, as crypto/cpu.c checks for AES. Each kernel
 * gives the bytes and floats of the plain C ones in codec.c: the same IEEE
 * operations in the same order (round to nearest even from the default MXCSR),
 * and the rare blocks (zero, tiny, non-finite, the short last block of a part)
 * go through the same C code.
 */
#include "core/codec.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#include "base/base.h"

#define AVX2_FN __attribute__((target("avx2,f16c")))

#define SSE_FN __attribute__((target("sse4.1")))

#define LEAF1_ECX_SSE41 (1u << 19)
#define LEAF1_ECX_OSXSAVE (1u << 27)
#define LEAF1_ECX_AVX (1u << 28)
#define LEAF1_ECX_F16C (1u << 29)
#define LEAF7_EBX_AVX2 (1u << 5)
#define XCR0_SSE_AVX 0x6u

static bool cpu_sse41(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & LEAF1_ECX_SSE41) != 0;
}

static bool cpu_ok(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return false;
    uint32_t need = LEAF1_ECX_OSXSAVE | LEAF1_ECX_AVX | LEAF1_ECX_F16C;
    if ((c & need) != need)
        return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & XCR0_SSE_AVX) != XCR0_SSE_AVX)
        return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return false;
    return (b & LEAF7_EBX_AVX2) != 0;
}

/* ---- binary16 and bfloat16 ---- */

AVX2_FN static void f16_enc(const float *x, size_t n, uint8_t *out) {
    /* the constant first: minps/maxps return the second operand when one
     * is a NaN, so NaN passes through to the conversion as in C */
    const __m256 hi = _mm256_set1_ps(65504.0f), lo = _mm256_set1_ps(-65504.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        v = _mm256_max_ps(lo, _mm256_min_ps(hi, v));
        __m128i h =
            _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), h);
    }
    mp__codec_kernels(0)->f16_enc(x + i, n - i, out + 2 * i);
}

AVX2_FN static bool f16_dec(const uint8_t *in, size_t n, float *out) {
    const __m128i expo = _mm_set1_epi16(0x7c00);
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h =
            _mm_loadu_si128((const __m128i *)(const void *)(in + 2 * i));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, expo), expo));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    bool fin = mp__codec_kernels(0)->f16_dec(in + 2 * i, n - i, out + i);
    return _mm_testz_si128(bad, bad) && fin;
}

AVX2_FN static void bf16_enc(const float *x, size_t n, uint8_t *out) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i half = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i maxbf = _mm256_set1_epi32(0x7f7f0000);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(half, lsb));
        __m256i ovf = _mm256_cmpeq_epi32(_mm256_and_si256(r, inf), inf);
        __m256i sat = _mm256_or_si256(_mm256_and_si256(u, sign), maxbf);
        r = _mm256_blendv_epi8(r, sat, ovf);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
        r = _mm256_srli_epi32(r, 16);
        __m256i p = _mm256_packus_epi32(r, r);
        p = _mm256_permute4x64_epi64(p, 0x08);
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i),
                         _mm256_castsi256_si128(p));
    }
    mp__codec_kernels(0)->bf16_enc(x + i, n - i, out + 2 * i);
}

AVX2_FN static bool bf16_dec(const uint8_t *in, size_t n, float *out) {
    const __m128i expo = _mm_set1_epi16(0x7f80);
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h =
            _mm_loadu_si128((const __m128i *)(const void *)(in + 2 * i));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, expo), expo));
        __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_si256((__m256i *)(void *)(out + i), u);
    }
    bool fin = mp__codec_kernels(0)->bf16_dec(in + 2 * i, n - i, out + i);
    return _mm_testz_si128(bad, bad) && fin;
}

/* ---- blockwise absmax ---- */

/* Loads a block of 64 and finds its largest magnitude; false if a value
 * is not finite. */
AVX2_FN static bool block_load(const float *x, __m256 v[8], float *amax) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i fmax = _mm256_set1_epi32(0x7f7fffff);
    __m256 m = _mm256_setzero_ps();
    __m256i bad = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 a = _mm256_and_ps(v[j], absm);
        m = _mm256_max_ps(m, a);
        bad = _mm256_or_si256(bad,
                              _mm256_cmpgt_epi32(_mm256_castps_si256(a), fmax));
    }
    __m128 h =
        _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    *amax = _mm_cvtss_f32(h);
    return _mm256_testz_si256(bad, bad);
}

/* The 64 codes of a block in order, 32 per register. */
AVX2_FN static void block_codes(const __m256 v[8], float inv, __m256i out[2]) {
    const __m256 vi = _mm256_set1_ps(inv);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int k = 0; k < 2; k++) {
        __m256i q[4];
        for (int j = 0; j < 4; j++)
            q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[4 * k + j], vi));
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                       _mm256_packs_epi32(q[2], q[3]));
        out[k] = _mm256_permutevar8x32_epi32(b, order);
    }
}

/* A block the C rule codes (not 64 long, or zero, tiny or not finite). */
static void q_block_slow(const float *x, size_t len, int levels, uint8_t *scale,
                         uint8_t *codes) {
    int8_t q[MP_CODEC_BLOCK];
    float s;
    mp__codec_q_block_c(x, len, levels, &s, q);
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    mp__store_le32(scale, u);
    if (levels == 127) {
        memcpy(codes, q, len);
        return;
    }
    for (size_t i = 0; i < len; i += 2) {
        uint8_t lo = (uint8_t)q[i] & 0x0fu;
        uint8_t hi = i + 1 < len ? (uint8_t)q[i + 1] & 0x0fu : 0;
        codes[i / 2] = (uint8_t)(lo | hi << 4);
    }
}

static void store_scale(uint8_t *p, float s) {
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    mp__store_le32(p, u);
}

AVX2_FN static void q_enc(const float *x, size_t n, uint8_t *out, int levels) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    uint8_t *codes = out + 4 * nb;
    const __m256i nib = _mm256_set1_epi8(0x0f);
    const __m256i hinib = _mm256_set1_epi16(0x00f0);
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        uint8_t *dst = levels == 127 ? codes + at : codes + at / 2;
        __m256 v[8];
        float amax, s, inv;
        if (n - at < MP_CODEC_BLOCK || !block_load(x + at, v, &amax) ||
            amax == 0.0f || !mp__codec_block_params(amax, levels, &s, &inv)) {
            size_t len = n - at < MP_CODEC_BLOCK ? n - at : MP_CODEC_BLOCK;
            q_block_slow(x + at, len, levels, out + 4 * b, dst);
            continue;
        }
        store_scale(out + 4 * b, s);
        __m256i q[2];
        block_codes(v, inv, q);
        if (levels == 127) {
            _mm256_storeu_si256((__m256i *)(void *)dst, q[0]);
            _mm256_storeu_si256((__m256i *)(void *)(dst + 32), q[1]);
            continue;
        }
        /* pairs of codes (even in the low byte of each 16-bit lane) into
         * one byte each: even in the low nibble, odd in the high one */
        __m256i p[2];
        for (int k = 0; k < 2; k++) {
            __m256i c = _mm256_and_si256(q[k], nib);
            p[k] = _mm256_or_si256(
                _mm256_and_si256(c, _mm256_set1_epi16(0x000f)),
                _mm256_and_si256(_mm256_srli_epi16(c, 4), hinib));
        }
        __m256i packed =
            _mm256_permute4x64_epi64(_mm256_packus_epi16(p[0], p[1]), 0xd8);
        _mm256_storeu_si256((__m256i *)(void *)dst, packed);
    }
}

AVX2_FN static void q8_enc(const float *x, size_t n, uint8_t *out) {
    q_enc(x, n, out, 127);
}

AVX2_FN static void q4_enc(const float *x, size_t n, uint8_t *out) {
    q_enc(x, n, out, 7);
}

/* Eight codes (sign-extended bytes) times the scale, stored; returns the
 * lanes whose product is not finite. */
AVX2_FN static __m256i dec8(__m128i c8, __m256 vs, float *out) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i fmax = _mm256_set1_epi32(0x7f7fffff);
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8)), vs);
    _mm256_storeu_ps(out, f);
    return _mm256_cmpgt_epi32(_mm256_castps_si256(_mm256_and_ps(f, absm)),
                              fmax);
}

static float load_scale(const uint8_t *p) {
    uint32_t u = mp__load_le32(p);
    float s;
    memcpy(&s, &u, sizeof s);
    return s;
}

static uint32_t nonfinite(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
}

AVX2_FN static bool q8_dec(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    __m256i bad = _mm256_setzero_si256();
    uint32_t tailbad = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        float s = load_scale(in + 4 * b);
        if (n - at < MP_CODEC_BLOCK) {
            for (size_t i = at; i < n; i++) {
                out[i] = (float)(int8_t)codes[i] * s;
                tailbad |= nonfinite(out[i]);
            }
            break;
        }
        __m256 vs = _mm256_set1_ps(s);
        for (int j = 0; j < 8; j++) {
            __m128i c8 = _mm_loadl_epi64(
                (const __m128i *)(const void *)(codes + at + 8 * j));
            bad = _mm256_or_si256(bad, dec8(c8, vs, out + at + 8 * j));
        }
    }
    return _mm256_testz_si256(bad, bad) && tailbad == 0;
}

AVX2_FN static bool q4_dec(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    const __m256i nib = _mm256_set1_epi8(0x0f);
    const __m256i eight = _mm256_set1_epi8(8);
    __m256i bad = _mm256_setzero_si256();
    uint32_t tailbad = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        float s = load_scale(in + 4 * b);
        if (n - at < MP_CODEC_BLOCK) {
            for (size_t i = at; i < n; i++) {
                uint8_t byte = codes[i / 2];
                int v = (((i & 1) ? byte >> 4 : byte & 0x0f) ^ 8) - 8;
                out[i] = (float)v * s;
                tailbad |= nonfinite(out[i]);
            }
            break;
        }
        __m256i raw =
            _mm256_loadu_si256((const __m256i *)(const void *)(codes + at / 2));
        /* sign-extend each nibble: (v ^ 8) - 8 */
        __m256i lo = _mm256_sub_epi8(
            _mm256_xor_si256(_mm256_and_si256(raw, nib), eight), eight);
        __m256i hi = _mm256_sub_epi8(
            _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), nib),
                             eight),
            eight);
        __m256i il = _mm256_unpacklo_epi8(lo, hi); /* 0-15 | 32-47 */
        __m256i ih = _mm256_unpackhi_epi8(lo, hi); /* 16-31 | 48-63 */
        __m128i part[4] = {
            _mm256_castsi256_si128(il), _mm256_castsi256_si128(ih),
            _mm256_extracti128_si256(il, 1), _mm256_extracti128_si256(ih, 1)};
        __m256 vs = _mm256_set1_ps(s);
        for (int k = 0; k < 4; k++) {
            float *o = out + at + 16 * k;
            bad = _mm256_or_si256(bad, dec8(part[k], vs, o));
            bad = _mm256_or_si256(bad,
                                  dec8(_mm_srli_si128(part[k], 8), vs, o + 8));
        }
    }
    return _mm256_testz_si256(bad, bad) && tailbad == 0;
}

static const mp_codec_kernels_t kernels_avx2 = {
    "avx2+f16c", f16_enc, f16_dec, bf16_enc, bf16_dec,
    q8_enc,      q8_dec,  q4_enc,  q4_dec,
};

/* ---- SSE4.1: the same operations four lanes at a time ---- */

SSE_FN static void bf16_enc_sse(const float *x, size_t n, uint8_t *out) {
    const __m128i absm = _mm_set1_epi32(0x7fffffff);
    const __m128i inf = _mm_set1_epi32(0x7f800000);
    const __m128i half = _mm_set1_epi32(0x7fff);
    const __m128i one = _mm_set1_epi32(1);
    const __m128i sign = _mm_set1_epi32((int)0x80000000u);
    const __m128i maxbf = _mm_set1_epi32(0x7f7f0000);
    const __m128i quiet = _mm_set1_epi32(0x00400000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i r2[2];
        for (int k = 0; k < 2; k++) {
            __m128i u =
                _mm_loadu_si128((const __m128i *)(const void *)(x + i + 4 * k));
            __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, absm), inf);
            __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), one);
            __m128i r = _mm_add_epi32(u, _mm_add_epi32(half, lsb));
            __m128i ovf = _mm_cmpeq_epi32(_mm_and_si128(r, inf), inf);
            __m128i sat = _mm_or_si128(_mm_and_si128(u, sign), maxbf);
            r = _mm_blendv_epi8(r, sat, ovf);
            r = _mm_blendv_epi8(r, _mm_or_si128(u, quiet), nan);
            r2[k] = _mm_srli_epi32(r, 16);
        }
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i),
                         _mm_packus_epi32(r2[0], r2[1]));
    }
    mp__codec_kernels(0)->bf16_enc(x + i, n - i, out + 2 * i);
}

SSE_FN static bool bf16_dec_sse(const uint8_t *in, size_t n, float *out) {
    const __m128i expo = _mm_set1_epi16(0x7f80);
    const __m128i zero = _mm_setzero_si128();
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h =
            _mm_loadu_si128((const __m128i *)(const void *)(in + 2 * i));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, expo), expo));
        _mm_storeu_si128((__m128i *)(void *)(out + i),
                         _mm_unpacklo_epi16(zero, h));
        _mm_storeu_si128((__m128i *)(void *)(out + i + 4),
                         _mm_unpackhi_epi16(zero, h));
    }
    bool fin = mp__codec_kernels(0)->bf16_dec(in + 2 * i, n - i, out + i);
    return _mm_testz_si128(bad, bad) && fin;
}

SSE_FN static bool block_load_sse(const float *x, __m128 v[16], float *amax) {
    const __m128 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128i fmax = _mm_set1_epi32(0x7f7fffff);
    __m128 m = _mm_setzero_ps();
    __m128i bad = _mm_setzero_si128();
    for (int j = 0; j < 16; j++) {
        v[j] = _mm_loadu_ps(x + 4 * j);
        __m128 a = _mm_and_ps(v[j], absm);
        m = _mm_max_ps(m, a);
        bad = _mm_or_si128(bad, _mm_cmpgt_epi32(_mm_castps_si128(a), fmax));
    }
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    *amax = _mm_cvtss_f32(m);
    return _mm_testz_si128(bad, bad);
}

SSE_FN static void q_enc_sse(const float *x, size_t n, uint8_t *out,
                             int levels) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    uint8_t *codes = out + 4 * nb;
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i lonib = _mm_set1_epi16(0x000f);
    const __m128i hinib = _mm_set1_epi16(0x00f0);
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        uint8_t *dst = levels == 127 ? codes + at : codes + at / 2;
        __m128 v[16];
        float amax, s, inv;
        if (n - at < MP_CODEC_BLOCK || !block_load_sse(x + at, v, &amax) ||
            amax == 0.0f || !mp__codec_block_params(amax, levels, &s, &inv)) {
            size_t len = n - at < MP_CODEC_BLOCK ? n - at : MP_CODEC_BLOCK;
            q_block_slow(x + at, len, levels, out + 4 * b, dst);
            continue;
        }
        store_scale(out + 4 * b, s);
        const __m128 vi = _mm_set1_ps(inv);
        __m128i c[4]; /* 16 codes each, in order */
        for (int k = 0; k < 4; k++) {
            __m128i q[4];
            for (int j = 0; j < 4; j++)
                q[j] = _mm_cvtps_epi32(_mm_mul_ps(v[4 * k + j], vi));
            c[k] = _mm_packs_epi16(_mm_packs_epi32(q[0], q[1]),
                                   _mm_packs_epi32(q[2], q[3]));
        }
        if (levels == 127) {
            for (int k = 0; k < 4; k++)
                _mm_storeu_si128((__m128i *)(void *)(dst + 16 * k), c[k]);
            continue;
        }
        for (int k = 0; k < 2; k++) {
            __m128i p[2];
            for (int h = 0; h < 2; h++) {
                __m128i t = _mm_and_si128(c[2 * k + h], nib);
                p[h] = _mm_or_si128(_mm_and_si128(t, lonib),
                                    _mm_and_si128(_mm_srli_epi16(t, 4), hinib));
            }
            _mm_storeu_si128((__m128i *)(void *)(dst + 16 * k),
                             _mm_packus_epi16(p[0], p[1]));
        }
    }
}

SSE_FN static void q8_enc_sse(const float *x, size_t n, uint8_t *out) {
    q_enc_sse(x, n, out, 127);
}

SSE_FN static void q4_enc_sse(const float *x, size_t n, uint8_t *out) {
    q_enc_sse(x, n, out, 7);
}

/* Sixteen codes times the scale, stored; returns the lanes whose product
 * is not finite. */
SSE_FN static __m128i dec16_sse(__m128i c16, __m128 vs, float *out) {
    const __m128 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128i fmax = _mm_set1_epi32(0x7f7fffff);
    __m128i bad = _mm_setzero_si128();
    for (int k = 0; k < 4; k++) {
        __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(c16)), vs);
        _mm_storeu_ps(out + 4 * k, f);
        bad = _mm_or_si128(
            bad, _mm_cmpgt_epi32(_mm_castps_si128(_mm_and_ps(f, absm)), fmax));
        c16 = _mm_srli_si128(c16, 4);
    }
    return bad;
}

SSE_FN static bool q8_dec_sse(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    __m128i bad = _mm_setzero_si128();
    uint32_t tailbad = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        float s = load_scale(in + 4 * b);
        if (n - at < MP_CODEC_BLOCK) {
            for (size_t i = at; i < n; i++) {
                out[i] = (float)(int8_t)codes[i] * s;
                tailbad |= nonfinite(out[i]);
            }
            break;
        }
        __m128 vs = _mm_set1_ps(s);
        for (int k = 0; k < 4; k++) {
            __m128i c16 = _mm_loadu_si128(
                (const __m128i *)(const void *)(codes + at + 16 * k));
            bad = _mm_or_si128(bad, dec16_sse(c16, vs, out + at + 16 * k));
        }
    }
    return _mm_testz_si128(bad, bad) && tailbad == 0;
}

SSE_FN static bool q4_dec_sse(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i eight = _mm_set1_epi8(8);
    __m128i bad = _mm_setzero_si128();
    uint32_t tailbad = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        float s = load_scale(in + 4 * b);
        if (n - at < MP_CODEC_BLOCK) {
            for (size_t i = at; i < n; i++) {
                uint8_t byte = codes[i / 2];
                int v = (((i & 1) ? byte >> 4 : byte & 0x0f) ^ 8) - 8;
                out[i] = (float)v * s;
                tailbad |= nonfinite(out[i]);
            }
            break;
        }
        __m128 vs = _mm_set1_ps(s);
        for (int k = 0; k < 2; k++) {
            __m128i raw = _mm_loadu_si128(
                (const __m128i *)(const void *)(codes + at / 2 + 16 * k));
            __m128i lo = _mm_sub_epi8(
                _mm_xor_si128(_mm_and_si128(raw, nib), eight), eight);
            __m128i hi = _mm_sub_epi8(
                _mm_xor_si128(_mm_and_si128(_mm_srli_epi16(raw, 4), nib),
                              eight),
                eight);
            float *o = out + at + 32 * k;
            bad =
                _mm_or_si128(bad, dec16_sse(_mm_unpacklo_epi8(lo, hi), vs, o));
            bad = _mm_or_si128(
                bad, dec16_sse(_mm_unpackhi_epi8(lo, hi), vs, o + 16));
        }
    }
    return _mm_testz_si128(bad, bad) && tailbad == 0;
}

/* binary16 without F16C: the C kernels */
static void f16_enc_c(const float *x, size_t n, uint8_t *out) {
    mp__codec_kernels(0)->f16_enc(x, n, out);
}

static bool f16_dec_c(const uint8_t *in, size_t n, float *out) {
    return mp__codec_kernels(0)->f16_dec(in, n, out);
}

static const mp_codec_kernels_t kernels_sse41 = {
    "sse4.1",   f16_enc_c,  f16_dec_c,  bf16_enc_sse, bf16_dec_sse,
    q8_enc_sse, q8_dec_sse, q4_enc_sse, q4_dec_sse,
};

bool mp__codec_x86_avx2(void) {
    return cpu_ok();
}

const mp_codec_kernels_t *mp__codec_kernels_x86(size_t i) {
    const mp_codec_kernels_t *sets[2];
    size_t n = 0;
    if (cpu_sse41())
        sets[n++] = &kernels_sse41;
    if (cpu_ok())
        sets[n++] = &kernels_avx2;
    return i < n ? sets[i] : NULL;
}

#else

bool mp__codec_x86_avx2(void) {
    return false;
}

const mp_codec_kernels_t *mp__codec_kernels_x86(size_t i) {
    (void)i;
    return NULL;
}

#endif
