/* SPDX-License-Identifier: MIT */
/*
 * codec.h - the encodings of a part's values on the wire
 * (moshpit_config_t.compression): float32 as is, IEEE binary16, bfloat16,
 * and blockwise absmax quantization to 8 or 4 bits. Pure functions over
 * buffers; no allocation, no state but the kernel table chosen once.
 *
 * A part of n values is encoded on its own (blocks restart at each part):
 *
 *   NONE  4n bytes: float32 little-endian (not handled here: the caller
 *         seals the floats themselves).
 *   FP16  2n bytes: binary16 little-endian, round to nearest even;
 *         magnitudes above 65504 (infinities included) become +-65504; NaN
 *         stays NaN (quiet, sign and top payload bits kept).
 *   BF16  2n bytes: the top 16 bits of the float32 after rounding to
 *         nearest even; a finite value that would round to infinity (and
 *         an infinity) becomes +-0x1.fep127 (0x7f7f); NaN stays NaN (quiet).
 *   INT8  nb = ceil(n / 64) float32 scales (little-endian), then n signed
 *         bytes. Block b covers values [64b, min(64b + 64, n)); its scale
 *         is s = absmax / 127 and value x is coded q = rint(x * (127 /
 *         absmax)) in [-127, 127] (absmax: the largest |x| of the block,
 *         127 / absmax and the product rounded to float32, rint to nearest
 *         even). Decoding gives q * s rounded to float32.
 *   INT4  nb float32 scales, then ceil(n / 2) bytes: value 2k in the low
 *         nibble of byte k, value 2k + 1 in the high one (0 past the end),
 *         each a two's complement 4-bit code in [-7, 7]; s = absmax / 7.
 *
 * Blocks whose absmax is 0, not finite, or so small that 127 / absmax (7 /
 * absmax) overflows are coded by one plain C rule in every kernel: a block
 * with a NaN or an infinity gets a NaN scale and zero codes (the receiver
 * drops the part); an all-zero block scale 0; a tiny block is coded in
 * double precision. Decoding accepts every code (-128 and -8 included) and
 * reports whether every decoded value is finite.
 *
 * The vector kernels (x86-64 SSE4.1 and AVX2 with F16C, arm64 NEON) give the
 * same bytes and floats as the plain C kernels on every input; the unit test
 * compares them. mp__codec_encode/decode use the best kernels this CPU
 * runs. Thread-safe.
 */
#ifndef MP_CORE_CODEC_H
#define MP_CORE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

#define MP_CODEC_BLOCK 64u /* values per scale of INT8 and INT4 */
#define MP_CODEC_MAX MOSHPIT_COMPRESS_INT4

/* Whether c is a known compression (MOSHPIT_COMPRESS_*). */
bool mp__codec_valid(uint32_t c);

/* Bytes of a part of n values encoded with c (n up to 2^32). 0 for an
 * unknown c. */
size_t mp__codec_bytes(uint32_t c, size_t n);

/* One set of kernels. enc writes mp__codec_bytes(c, n) bytes; dec reads
 * them, writes n floats and returns whether all of them are finite. */
typedef struct mp_codec_kernels {
    const char *name;
    void (*f16_enc)(const float *x, size_t n, uint8_t *out);
    bool (*f16_dec)(const uint8_t *in, size_t n, float *out);
    void (*bf16_enc)(const float *x, size_t n, uint8_t *out);
    bool (*bf16_dec)(const uint8_t *in, size_t n, float *out);
    void (*q8_enc)(const float *x, size_t n, uint8_t *out);
    bool (*q8_dec)(const uint8_t *in, size_t n, float *out);
    void (*q4_enc)(const float *x, size_t n, uint8_t *out);
    bool (*q4_dec)(const uint8_t *in, size_t n, float *out);
} mp_codec_kernels_t;

/* The kernel sets this build and CPU can run: index 0 is the plain C one,
 * then the vector ones from the least to the most capable (x86-64: SSE4.1,
 * then AVX2 + F16C; arm64: NEON); the last is the one
 * mp__codec_encode/decode use. NULL past the end. */
const mp_codec_kernels_t *mp__codec_kernels(size_t i);

/* Encodes the n values x with c (not NONE) into out. */
void mp__codec_encode(uint32_t c, const float *x, size_t n, uint8_t *out);

/* Decodes n values encoded with c (not NONE) from in into out; returns
 * whether all are finite. Its time does not depend on the values. */
bool mp__codec_decode(uint32_t c, const uint8_t *in, size_t n, float *out);

/* Plain C block kernels the vector kernels share for their edge cases
 * (levels: 127 for INT8, 7 for INT4). q_enc_block writes the scale to
 * *scale and the n <= MP_CODEC_BLOCK codes to q. */
void mp__codec_q_block_c(const float *x, size_t n, int levels, float *scale,
                         int8_t *q);

/* The scale and the factor of a block whose largest magnitude amax is
 * finite and > 0: scale = amax / levels (one step lower if levels * scale
 * would round to infinity), *inv = levels / amax. Returns false if *inv is
 * not finite (a tiny block, which mp__codec_q_block_c codes in double). */
bool mp__codec_block_params(float amax, int levels, float *scale, float *inv);

/* The i-th vector kernel set of this build that the CPU runs, from the
 * least to the most capable (NULL past the end). */
const mp_codec_kernels_t *mp__codec_kernels_x86(size_t i);
const mp_codec_kernels_t *mp__codec_kernels_neon(size_t i);

/* True on an x86-64 CPU (and OS) that runs AVX2 and F16C code (the check
 * the AVX2 codec set uses; core/vec.c uses it too). False elsewhere. */
bool mp__codec_x86_avx2(void);

#endif
