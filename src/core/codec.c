/* SPDX-License-Identifier: MIT */
/*
 * codec.c - the plain C kernels of the wire encodings (binary16, bfloat16,
 * blockwise 8- and 4-bit absmax; formats in codec.h) and the choice of the
 * kernels a call uses: the vector kernels of codec_x86.c or codec_neon.c
 * when this build and CPU have them, else these. The C kernels are the
 * reference the vector ones must match bit for bit (tests/unit/test_codec.c)
 * and the only code for the rare blocks (zero, tiny, non-finite).
 */
#include "core/codec.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"

bool mp__codec_valid(uint32_t c) {
    return c <= MP_CODEC_MAX;
}

size_t mp__codec_bytes(uint32_t c, size_t n) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    switch (c) {
    case MOSHPIT_COMPRESS_NONE:
        return 4 * n;
    case MOSHPIT_COMPRESS_FP16:
    case MOSHPIT_COMPRESS_BF16:
        return 2 * n;
    case MOSHPIT_COMPRESS_INT8:
        return 4 * nb + n;
    case MOSHPIT_COMPRESS_INT4:
        return 4 * nb + (n + 1) / 2;
    default:
        return 0;
    }
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* 1 if the float with bits u is an infinity or a NaN, branch-free. */
static uint32_t nonfinite_bits(uint32_t u) {
    return (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
}

/* ---- binary16 ---- */

static uint16_t f16_from_f32(float f) {
    uint32_t u = f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a > 0x477fe000u) /* beyond 65504 (infinity included): saturate */
        a = 0x477fe000u;
    if (a < 0x38800000u) {
        /* below 2^-14: a subnormal half or zero. Adding 0.5 lines the
         * binary16 subnormal step 2^-24 up with the last mantissa bit of a
         * float in [0.5, 1), so the FPU's rounding to nearest even does
         * the work; what is above 0.5 is the code (0x400 = the smallest
         * normal half, reached by rounding up). */
        float t = u2f(a) + 0.5f;
        return (uint16_t)(sign | (f2u(t) - 0x3f000000u));
    }
    /* normal: rebias the exponent and round the 13 dropped bits to
     * nearest even (a carry into the exponent is the right result) */
    uint32_t odd = (a >> 13) & 1u;
    a += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    return (uint16_t)(sign | (a >> 13));
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f; /* exact */
        return u2f(f2u(v) | sign);
    }
    if (e == 31) /* infinity, or NaN made quiet */
        return u2f(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}

static void f16_enc_c(const float *x, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = f16_from_f32(x[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

static bool f16_dec_c(const uint8_t *in, size_t n, float *out) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(in[2 * i] | (in[2 * i + 1] << 8));
        bad |= (uint32_t)((h & 0x7c00u) == 0x7c00u);
        out[i] = f16_to_f32(h);
    }
    return bad == 0;
}

/* ---- bfloat16 ---- */

static uint16_t bf16_from_f32(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t r = u + 0x7fffu + ((u >> 16) & 1u);
    if ((r & 0x7f800000u) == 0x7f800000u) /* rounded to infinity */
        r = (u & 0x80000000u) | 0x7f7f0000u;
    return (uint16_t)(r >> 16);
}

static void bf16_enc_c(const float *x, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = bf16_from_f32(x[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

static bool bf16_dec_c(const uint8_t *in, size_t n, float *out) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = ((uint32_t)in[2 * i] | (uint32_t)in[2 * i + 1] << 8) << 16;
        bad |= nonfinite_bits(u);
        out[i] = u2f(u);
    }
    return bad == 0;
}

/* ---- blockwise absmax ---- */

static int8_t clamp_code(long v, int levels) {
    if (v > levels)
        v = levels;
    if (v < -levels)
        v = -levels;
    return (int8_t)v;
}

bool mp__codec_block_params(float amax, int levels, float *scale, float *inv) {
    float lv = (float)levels;
    *inv = lv / amax;
    *scale = amax / lv;
    /* near FLT_MAX, levels * scale may round past it: one step down keeps
     * every decoded value finite */
    if (isinf(*scale * lv))
        *scale = nextafterf(*scale, 0.0f);
    return isfinite(*inv);
}

void mp__codec_q_block_c(const float *x, size_t n, int levels, float *scale,
                         int8_t *q) {
    float amax = 0.0f;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= nonfinite_bits(f2u(x[i]));
        float a = fabsf(x[i]);
        if (a > amax)
            amax = a;
    }
    if (bad || amax == 0.0f) {
        *scale = bad ? u2f(0x7fc00000u) : 0.0f;
        memset(q, 0, n);
        return;
    }
    float inv;
    if (mp__codec_block_params(amax, levels, scale, &inv)) {
        for (size_t i = 0; i < n; i++)
            q[i] = clamp_code(lrintf(x[i] * inv), levels);
    } else { /* amax below levels / FLT_MAX */
        double dinv = (double)levels / (double)amax;
        for (size_t i = 0; i < n; i++)
            q[i] = clamp_code(lrint((double)x[i] * dinv), levels);
    }
}

static void q8_enc_c(const float *x, size_t n, uint8_t *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    uint8_t *codes = out + 4 * nb;
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        size_t len = n - at < MP_CODEC_BLOCK ? n - at : MP_CODEC_BLOCK;
        float s;
        mp__codec_q_block_c(x + at, len, 127, &s, (int8_t *)(codes + at));
        mp__store_le32(out + 4 * b, f2u(s));
    }
}

static bool q8_dec_c(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    uint32_t bad = 0;
    for (size_t b = 0; b < nb; b++) {
        float s = u2f(mp__load_le32(in + 4 * b));
        size_t at = b * MP_CODEC_BLOCK;
        size_t end = n - at < MP_CODEC_BLOCK ? n : at + MP_CODEC_BLOCK;
        for (size_t i = at; i < end; i++) {
            out[i] = (float)(int8_t)codes[i] * s;
            bad |= nonfinite_bits(f2u(out[i]));
        }
    }
    return bad == 0;
}

static void q4_enc_c(const float *x, size_t n, uint8_t *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    uint8_t *codes = out + 4 * nb;
    int8_t q[MP_CODEC_BLOCK];
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        size_t len = n - at < MP_CODEC_BLOCK ? n - at : MP_CODEC_BLOCK;
        float s;
        mp__codec_q_block_c(x + at, len, 7, &s, q);
        mp__store_le32(out + 4 * b, f2u(s));
        /* at is even, so the block's codes start on a byte */
        for (size_t i = 0; i < len; i += 2) {
            uint8_t lo = (uint8_t)q[i] & 0x0fu;
            uint8_t hi = i + 1 < len ? (uint8_t)q[i + 1] & 0x0fu : 0;
            codes[(at + i) / 2] = (uint8_t)(lo | hi << 4);
        }
    }
}

static bool q4_dec_c(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float s = u2f(mp__load_le32(in + 4 * (i / MP_CODEC_BLOCK)));
        uint8_t byte = codes[i / 2];
        int nib = (i & 1) ? byte >> 4 : byte & 0x0f;
        int v = (nib ^ 8) - 8; /* sign-extend the 4-bit code */
        out[i] = (float)v * s;
        bad |= nonfinite_bits(f2u(out[i]));
    }
    return bad == 0;
}

static const mp_codec_kernels_t kernels_c = {
    "c",      f16_enc_c, f16_dec_c, bf16_enc_c, bf16_dec_c,
    q8_enc_c, q8_dec_c,  q4_enc_c,  q4_dec_c,
};

/* The vector kernels, asked of the CPU once (CPUID can trap to a
 * hypervisor); racing first calls store the same pointer. &kernels_c
 * stands for "none". */
static _Atomic(const mp_codec_kernels_t *) vector_kernels;

/* The i-th vector set (0-based) of this build and CPU. */
static const mp_codec_kernels_t *vector_at(size_t i) {
    const mp_codec_kernels_t *k = mp__codec_kernels_x86(i);
    return k != NULL ? k : mp__codec_kernels_neon(i);
}

static const mp_codec_kernels_t *vector(void) {
    const mp_codec_kernels_t *k =
        atomic_load_explicit(&vector_kernels, memory_order_relaxed);
    if (k == NULL) {
        k = &kernels_c;
        for (size_t i = 0; vector_at(i) != NULL; i++)
            k = vector_at(i);
        atomic_store_explicit(&vector_kernels, k, memory_order_relaxed);
    }
    return k;
}

const mp_codec_kernels_t *mp__codec_kernels(size_t i) {
    return i == 0 ? &kernels_c : vector_at(i - 1);
}

static const mp_codec_kernels_t *best(void) {
    return vector();
}

void mp__codec_encode(uint32_t c, const float *x, size_t n, uint8_t *out) {
    const mp_codec_kernels_t *k = best();
    switch (c) {
    case MOSHPIT_COMPRESS_FP16:
        k->f16_enc(x, n, out);
        break;
    case MOSHPIT_COMPRESS_BF16:
        k->bf16_enc(x, n, out);
        break;
    case MOSHPIT_COMPRESS_INT8:
        k->q8_enc(x, n, out);
        break;
    case MOSHPIT_COMPRESS_INT4:
        k->q4_enc(x, n, out);
        break;
    default:
        break;
    }
}

bool mp__codec_decode(uint32_t c, const uint8_t *in, size_t n, float *out) {
    const mp_codec_kernels_t *k = best();
    switch (c) {
    case MOSHPIT_COMPRESS_FP16:
        return k->f16_dec(in, n, out);
    case MOSHPIT_COMPRESS_BF16:
        return k->bf16_dec(in, n, out);
    case MOSHPIT_COMPRESS_INT8:
        return k->q8_dec(in, n, out);
    case MOSHPIT_COMPRESS_INT4:
        return k->q4_dec(in, n, out);
    default:
        return false;
    }
}
