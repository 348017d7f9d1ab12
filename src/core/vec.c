/* SPDX-License-Identifier: MIT */
/*
 * vec.c - float kernels of the data plane (see vec.h). Every loop works on
 * blocks of a fixed size: GCC's "very cheap" cost model at -O2 only
 * vectorizes loops whose trip count is a known multiple of the vector
 * length, and a fixed inner block gives it one. The finiteness test is
 * integer arithmetic on the bits, one lane per block element, so it needs
 * no float reduction (which compilers may not reorder) and no branch: it
 * reads every element whatever it finds, and its time depends only on the
 * length. The data plane runs it on plaintext that is not authenticated
 * yet, so that matters (docs/SECURITY.md).
 */
#include "core/vec.h"

#include <stdint.h>
#include <string.h>

#define BLOCK 16

/* For a float's bits u, (u & EXP) + LSB_EXP has bit 31 set exactly when
 * the exponent is all ones (infinity or NaN). */
#define EXP 0x7f800000u
#define LSB_EXP 0x00800000u

#if defined(__GNUC__)
/* GCC and Clang: explicit 128-bit vectors keep the accumulator in a
 * register (the portable version below makes GCC store its lanes to the
 * stack every iteration), about three times as fast on cached data, which
 * is where the data plane calls it (a chunk just decrypted). */
typedef uint32_t u32x4_t __attribute__((vector_size(16)));

uint32_t mp__vec_nonfinite_bits(const float *x, size_t n) {
    const u32x4_t e = {EXP, EXP, EXP, EXP};
    const u32x4_t l = {LSB_EXP, LSB_EXP, LSB_EXP, LSB_EXP};
    u32x4_t acc = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        u32x4_t a, b, c, d;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, x + i + 4, sizeof b);
        memcpy(&c, x + i + 8, sizeof c);
        memcpy(&d, x + i + 12, sizeof d);
        acc |= ((a & e) + l) | ((b & e) + l) | ((c & e) + l) | ((d & e) + l);
    }
    uint32_t lanes[4];
    memcpy(lanes, &acc, sizeof lanes);
    uint32_t bad = lanes[0] | lanes[1] | lanes[2] | lanes[3];
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & EXP) + LSB_EXP;
    }
    return bad;
}
#else
uint32_t mp__vec_nonfinite_bits(const float *x, size_t n) {
    uint32_t lane[BLOCK] = {0};
    uint32_t bad = 0;
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        uint32_t u[BLOCK];
        memcpy(u, x + i, sizeof u);
        for (size_t k = 0; k < BLOCK; k++)
            lane[k] |= (u[k] & EXP) + LSB_EXP;
    }
    for (size_t k = 0; k < BLOCK; k++)
        bad |= lane[k];
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & EXP) + LSB_EXP;
    }
    return bad;
}
#endif

bool mp__vec_all_finite(const float *x, size_t n) {
    return (mp__vec_nonfinite_bits(x, n) & MP_VEC_NONFINITE) == 0;
}

void mp__vec_scan_nonfinite(void *acc, const uint8_t *m, size_t len) {
    uint32_t *bits = acc;
    /* no test of *bits first: a chunk after a non-finite one costs the same
     * as any other */
    *bits |= mp__vec_nonfinite_bits((const float *)(const void *)m, len / 4);
}

void mp__vec_acc_first(double *restrict acc, const float *restrict xs,
                       double ws, const float *restrict xm, double wm,
                       size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            acc[i + k] = ws * (double)xs[i + k] + wm * (double)xm[i + k];
    for (; i < n; i++)
        acc[i] = ws * (double)xs[i] + wm * (double)xm[i];
}

void mp__vec_acc_add(double *restrict acc, const float *restrict x, double w,
                     size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            acc[i + k] += w * (double)x[i + k];
    for (; i < n; i++)
        acc[i] += w * (double)x[i];
}

void mp__vec_acc_store(float *restrict out, const double *restrict acc,
                       double inv, size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            out[i + k] = (float)(acc[i + k] * inv);
    for (; i < n; i++)
        out[i] = (float)(acc[i] * inv);
}

void mp__vec_acc_add_store(float *restrict out, const double *restrict acc,
                           const float *restrict x, double w, double inv,
                           size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            out[i + k] = (float)((acc[i + k] + w * (double)x[i + k]) * inv);
    for (; i < n; i++)
        out[i] = (float)((acc[i] + w * (double)x[i]) * inv);
}

void mp__vec_blend_store(float *restrict v, double ws, const float *restrict x,
                         double wm, double inv, size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            v[i + k] =
                (float)((ws * (double)v[i + k] + wm * (double)x[i + k]) * inv);
    for (; i < n; i++)
        v[i] = (float)((ws * (double)v[i] + wm * (double)x[i]) * inv);
}
