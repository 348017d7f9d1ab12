/* SPDX-License-Identifier: MIT */
/*
 * codec_neon.c - the arm64 NEON kernels of the wire encodings (codec.h).
 * Every arm64 CPU has NEON and its binary16 conversions, so there is no run
 * time check. Each kernel gives the bytes and floats of the plain C ones in
 * codec.c (round to nearest even from the default FPCR, NaN propagation
 * with the default-NaN mode off, as Linux runs programs); the rare blocks
 * (zero, tiny, non-finite, the short last block of a part) go through the
 * same C code. Elsewhere (armhf included) there are no vector kernels.
 */
#include "core/codec.h"

#include <string.h>

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include "base/base.h"

/* ---- binary16 and bfloat16 ---- */

static void f16_enc(const float *x, size_t n, uint8_t *out) {
    /* FMIN/FMAX return the (quieted) NaN when one operand is a NaN, which
     * converts to the code C gives the original NaN */
    const float32x4_t hi = vdupq_n_f32(65504.0f), lo = vdupq_n_f32(-65504.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a = vmaxq_f32(lo, vminq_f32(hi, vld1q_f32(x + i)));
        float32x4_t b = vmaxq_f32(lo, vminq_f32(hi, vld1q_f32(x + i + 4)));
        float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(a), b);
        vst1q_u8(out + 2 * i, vreinterpretq_u8_f16(h));
    }
    mp__codec_kernels(0)->f16_enc(x + i, n - i, out + 2 * i);
}

static bool f16_dec(const uint8_t *in, size_t n, float *out) {
    const uint16x8_t expo = vdupq_n_u16(0x7c00);
    uint16x8_t bad = vdupq_n_u16(0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(in + 2 * i));
        bad = vorrq_u16(bad, vceqq_u16(vandq_u16(h, expo), expo));
        float16x8_t f = vreinterpretq_f16_u16(h);
        vst1q_f32(out + i, vcvt_f32_f16(vget_low_f16(f)));
        vst1q_f32(out + i + 4, vcvt_high_f32_f16(f));
    }
    bool fin = mp__codec_kernels(0)->f16_dec(in + 2 * i, n - i, out + i);
    return vmaxvq_u16(bad) == 0 && fin;
}

static uint16x4_t bf16_4(uint32x4_t u) {
    const uint32x4_t absm = vdupq_n_u32(0x7fffffffu);
    const uint32x4_t inf = vdupq_n_u32(0x7f800000u);
    uint32x4_t nan = vcgtq_u32(vandq_u32(u, absm), inf);
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    uint32x4_t r = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), lsb));
    uint32x4_t ovf = vceqq_u32(vandq_u32(r, inf), inf);
    uint32x4_t sat = vorrq_u32(vandq_u32(u, vdupq_n_u32(0x80000000u)),
                               vdupq_n_u32(0x7f7f0000u));
    r = vbslq_u32(ovf, sat, r);
    r = vbslq_u32(nan, vorrq_u32(u, vdupq_n_u32(0x00400000u)), r);
    return vshrn_n_u32(r, 16);
}

static void bf16_enc(const float *x, size_t n, uint8_t *out) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32x4_t a = vreinterpretq_u32_f32(vld1q_f32(x + i));
        uint32x4_t b = vreinterpretq_u32_f32(vld1q_f32(x + i + 4));
        uint16x8_t h = vcombine_u16(bf16_4(a), bf16_4(b));
        vst1q_u8(out + 2 * i, vreinterpretq_u8_u16(h));
    }
    mp__codec_kernels(0)->bf16_enc(x + i, n - i, out + 2 * i);
}

static bool bf16_dec(const uint8_t *in, size_t n, float *out) {
    const uint16x8_t expo = vdupq_n_u16(0x7f80);
    uint16x8_t bad = vdupq_n_u16(0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(in + 2 * i));
        bad = vorrq_u16(bad, vceqq_u16(vandq_u16(h, expo), expo));
        vst1q_u32((uint32_t *)(void *)(out + i),
                  vshll_n_u16(vget_low_u16(h), 16));
        vst1q_u32((uint32_t *)(void *)(out + i + 4), vshll_high_n_u16(h, 16));
    }
    bool fin = mp__codec_kernels(0)->bf16_dec(in + 2 * i, n - i, out + i);
    return vmaxvq_u16(bad) == 0 && fin;
}

/* ---- blockwise absmax ---- */

static bool block_load(const float *x, float32x4_t v[16], float *amax) {
    const uint32x4_t fmax = vdupq_n_u32(0x7f7fffffu);
    float32x4_t m = vdupq_n_f32(0.0f);
    uint32x4_t bad = vdupq_n_u32(0);
    for (int j = 0; j < 16; j++) {
        v[j] = vld1q_f32(x + 4 * j);
        float32x4_t a = vabsq_f32(v[j]);
        m = vmaxq_f32(m, a);
        bad = vorrq_u32(bad, vcgtq_u32(vreinterpretq_u32_f32(a), fmax));
    }
    *amax = vmaxvq_f32(m);
    return vmaxvq_u32(bad) == 0;
}

/* Codes of values 16k .. 16k + 15 of a block. */
static int8x16_t codes16(const float32x4_t v[16], int k, float inv) {
    int32x4_t q[4];
    for (int j = 0; j < 4; j++)
        q[j] = vcvtnq_s32_f32(vmulq_n_f32(v[4 * k + j], inv));
    int16x8_t a = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
    int16x8_t b = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
    return vcombine_s8(vqmovn_s16(a), vqmovn_s16(b));
}

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

static void q_enc(const float *x, size_t n, uint8_t *out, int levels) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    uint8_t *codes = out + 4 * nb;
    for (size_t b = 0; b < nb; b++) {
        size_t at = b * MP_CODEC_BLOCK;
        uint8_t *dst = levels == 127 ? codes + at : codes + at / 2;
        float32x4_t v[16];
        float amax, s, inv;
        if (n - at < MP_CODEC_BLOCK || !block_load(x + at, v, &amax) ||
            amax == 0.0f || !mp__codec_block_params(amax, levels, &s, &inv)) {
            size_t len = n - at < MP_CODEC_BLOCK ? n - at : MP_CODEC_BLOCK;
            q_block_slow(x + at, len, levels, out + 4 * b, dst);
            continue;
        }
        uint32_t u;
        memcpy(&u, &s, sizeof u);
        mp__store_le32(out + 4 * b, u);
        for (int k = 0; k < 4; k++) {
            int8x16_t c = codes16(v, k, inv);
            if (levels == 127) {
                vst1q_s8((int8_t *)dst + 16 * k, c);
                continue;
            }
            uint8x16_t cu = vreinterpretq_u8_s8(c);
            uint8x16_t even = vuzp1q_u8(cu, cu), odd = vuzp2q_u8(cu, cu);
            uint8x8_t byte =
                vorr_u8(vand_u8(vget_low_u8(even), vdup_n_u8(0x0f)),
                        vshl_n_u8(vget_low_u8(odd), 4));
            vst1_u8(dst + 8 * k, byte);
        }
    }
}

static void q8_enc(const float *x, size_t n, uint8_t *out) {
    q_enc(x, n, out, 127);
}

static void q4_enc(const float *x, size_t n, uint8_t *out) {
    q_enc(x, n, out, 7);
}

/* Sixteen codes times the scale, stored; returns the lanes whose product
 * is not finite. */
static uint32x4_t dec16(int8x16_t c, float s, float *out) {
    const uint32x4_t fmax = vdupq_n_u32(0x7f7fffffu);
    int16x8_t w[2] = {vmovl_s8(vget_low_s8(c)), vmovl_high_s8(c)};
    uint32x4_t bad = vdupq_n_u32(0);
    for (int h = 0; h < 2; h++) {
        int32x4_t d[2] = {vmovl_s16(vget_low_s16(w[h])), vmovl_high_s16(w[h])};
        for (int j = 0; j < 2; j++) {
            float32x4_t f = vmulq_n_f32(vcvtq_f32_s32(d[j]), s);
            vst1q_f32(out + 8 * h + 4 * j, f);
            bad = vorrq_u32(
                bad, vcgtq_u32(vreinterpretq_u32_f32(vabsq_f32(f)), fmax));
        }
    }
    return bad;
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

static bool q8_dec(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    uint32x4_t bad = vdupq_n_u32(0);
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
        for (int k = 0; k < 4; k++)
            bad = vorrq_u32(bad,
                            dec16(vld1q_s8((const int8_t *)codes + at + 16 * k),
                                  s, out + at + 16 * k));
    }
    return vmaxvq_u32(bad) == 0 && tailbad == 0;
}

static bool q4_dec(const uint8_t *in, size_t n, float *out) {
    size_t nb = (n + MP_CODEC_BLOCK - 1) / MP_CODEC_BLOCK;
    const uint8_t *codes = in + 4 * nb;
    const int8x16_t eight = vdupq_n_s8(8);
    uint32x4_t bad = vdupq_n_u32(0);
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
        for (int k = 0; k < 2; k++) {
            uint8x16_t raw = vld1q_u8(codes + at / 2 + 16 * k);
            int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f)));
            int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
            lo = vsubq_s8(veorq_s8(lo, eight), eight);
            hi = vsubq_s8(veorq_s8(hi, eight), eight);
            float *o = out + at + 32 * k;
            bad = vorrq_u32(bad, dec16(vzip1q_s8(lo, hi), s, o));
            bad = vorrq_u32(bad, dec16(vzip2q_s8(lo, hi), s, o + 16));
        }
    }
    return vmaxvq_u32(bad) == 0 && tailbad == 0;
}

static const mp_codec_kernels_t kernels_neon = {
    "neon", f16_enc, f16_dec, bf16_enc, bf16_dec,
    q8_enc, q8_dec,  q4_enc,  q4_dec,
};

const mp_codec_kernels_t *mp__codec_kernels_neon(size_t i) {
    return i == 0 ? &kernels_neon : NULL;
}

#else

const mp_codec_kernels_t *mp__codec_kernels_neon(size_t i) {
    (void)i;
    return NULL;
}

#endif
