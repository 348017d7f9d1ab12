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
 * yet, so that matters (docs/SECURITY.md). Each kernel's body is compiled
 * twice on x86-64: for the baseline (SSE2) and, with a target attribute,
 * for AVX2 (256-bit vectors: twice the elements per instruction), chosen
 * at run time where the CPU and OS have AVX2 (codec_x86.c checks). The
 * AVX2 set does not enable FMA, so both compute the same IEEE operations
 * in the same order and give the same bits; test_vec compares them.
 */
#include "core/vec.h"

#include <stdint.h>
#include <string.h>

#include <stdatomic.h>

#include "core/codec.h"

#define BLOCK 16

#if defined(__GNUC__)
#define BODY static inline __attribute__((always_inline))
#else
#define BODY static inline
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VEC_X86 1
#define AVX2_FN __attribute__((target("avx2")))
#endif

/* For a float's bits u, (u & EXP) + LSB_EXP has bit 31 set exactly when
 * the exponent is all ones (infinity or NaN). */
#define EXP 0x7f800000u
#define LSB_EXP 0x00800000u

BODY uint32_t nonfinite_tail(const float *x, size_t i, size_t n, uint32_t bad) {
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & EXP) + LSB_EXP;
    }
    return bad;
}

#if defined(__GNUC__)
/* GCC and Clang: explicit vectors keep the accumulator in a register (the
 * portable version below makes GCC store its lanes to the stack every
 * iteration), about three times as fast on cached data. */
typedef uint32_t u32x4_t __attribute__((vector_size(16)));

static uint32_t nonfinite_c(const float *x, size_t n) {
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
    return nonfinite_tail(x, i, n, lanes[0] | lanes[1] | lanes[2] | lanes[3]);
}
#else
static uint32_t nonfinite_c(const float *x, size_t n) {
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
    return nonfinite_tail(x, i, n, bad);
}
#endif

/* ---- accumulation: one body per kernel, compiled per instruction set ---- */

BODY void acc_first_body(double *restrict acc, const float *restrict xs,
                         double ws, const float *restrict xm, double wm,
                         size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            acc[i + k] = ws * (double)xs[i + k] + wm * (double)xm[i + k];
    for (; i < n; i++)
        acc[i] = ws * (double)xs[i] + wm * (double)xm[i];
}

BODY void acc_add_body(double *restrict acc, const float *restrict x, double w,
                       size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            acc[i + k] += w * (double)x[i + k];
    for (; i < n; i++)
        acc[i] += w * (double)x[i];
}

BODY void acc_store_body(float *restrict out, const double *restrict acc,
                         double inv, size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            out[i + k] = (float)(acc[i + k] * inv);
    for (; i < n; i++)
        out[i] = (float)(acc[i] * inv);
}

BODY void acc_add_store_body(float *restrict out, const double *restrict acc,
                             const float *restrict x, double w, double inv,
                             size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            out[i + k] = (float)((acc[i + k] + w * (double)x[i + k]) * inv);
    for (; i < n; i++)
        out[i] = (float)((acc[i] + w * (double)x[i]) * inv);
}

BODY void blend_store_body(float *restrict v, double ws,
                           const float *restrict x, double wm, double inv,
                           size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t k = 0; k < BLOCK; k++)
            v[i + k] =
                (float)((ws * (double)v[i + k] + wm * (double)x[i + k]) * inv);
    for (; i < n; i++)
        v[i] = (float)((ws * (double)v[i] + wm * (double)x[i]) * inv);
}

/* Instantiates the five accumulation kernels with attribute ATTR and
 * suffix SFX. */
#define VEC_ACC_SET(ATTR, SFX)                                                 \
    ATTR static void acc_first_##SFX(                                          \
        double *restrict acc, const float *restrict xs, double ws,             \
        const float *restrict xm, double wm, size_t n) {                       \
        acc_first_body(acc, xs, ws, xm, wm, n);                                \
    }                                                                          \
    ATTR static void acc_add_##SFX(                                            \
        double *restrict acc, const float *restrict x, double w, size_t n) {   \
        acc_add_body(acc, x, w, n);                                            \
    }                                                                          \
    ATTR static void acc_store_##SFX(float *restrict out,                      \
                                     const double *restrict acc, double inv,   \
                                     size_t n) {                               \
        acc_store_body(out, acc, inv, n);                                      \
    }                                                                          \
    ATTR static void acc_add_store_##SFX(                                      \
        float *restrict out, const double *restrict acc,                       \
        const float *restrict x, double w, double inv, size_t n) {             \
        acc_add_store_body(out, acc, x, w, inv, n);                            \
    }                                                                          \
    ATTR static void blend_store_##SFX(float *restrict v, double ws,           \
                                       const float *restrict x, double wm,     \
                                       double inv, size_t n) {                 \
        blend_store_body(v, ws, x, wm, inv, n);                                \
    }

#define VEC_NO_ATTR
VEC_ACC_SET(VEC_NO_ATTR, c)

static const mp_vec_kernels_t kernels_c = {
    "c",         nonfinite_c,     acc_first_c,   acc_add_c,
    acc_store_c, acc_add_store_c, blend_store_c,
};

#ifdef VEC_X86
typedef uint32_t u32x8_t __attribute__((vector_size(32)));

AVX2_FN static uint32_t nonfinite_avx2(const float *x, size_t n) {
    const u32x8_t e = {EXP, EXP, EXP, EXP, EXP, EXP, EXP, EXP};
    const u32x8_t l = {LSB_EXP, LSB_EXP, LSB_EXP, LSB_EXP,
                       LSB_EXP, LSB_EXP, LSB_EXP, LSB_EXP};
    u32x8_t acc = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        u32x8_t a, b, c, d;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, x + i + 8, sizeof b);
        memcpy(&c, x + i + 16, sizeof c);
        memcpy(&d, x + i + 24, sizeof d);
        acc |= ((a & e) + l) | ((b & e) + l) | ((c & e) + l) | ((d & e) + l);
    }
    uint32_t lanes[8];
    memcpy(lanes, &acc, sizeof lanes);
    uint32_t bad = 0;
    for (int k = 0; k < 8; k++)
        bad |= lanes[k];
    return nonfinite_tail(x, i, n, bad);
}

VEC_ACC_SET(AVX2_FN, avx2)

static const mp_vec_kernels_t kernels_avx2 = {
    "avx2",         nonfinite_avx2,     acc_first_avx2,   acc_add_avx2,
    acc_store_avx2, acc_add_store_avx2, blend_store_avx2,
};
#endif

const mp_vec_kernels_t *mp__vec_kernels(size_t i) {
    if (i == 0)
        return &kernels_c;
#ifdef VEC_X86
    if (i == 1 && mp__codec_x86_avx2())
        return &kernels_avx2;
#endif
    return NULL;
}

/* The best set, asked of the CPU once (CPUID can trap to a hypervisor);
 * racing first calls store the same pointer. */
static _Atomic(const mp_vec_kernels_t *) best_set;

static const mp_vec_kernels_t *best(void) {
    const mp_vec_kernels_t *k =
        atomic_load_explicit(&best_set, memory_order_relaxed);
    if (k == NULL) {
        k = &kernels_c;
        for (size_t i = 1; mp__vec_kernels(i) != NULL; i++)
            k = mp__vec_kernels(i);
        atomic_store_explicit(&best_set, k, memory_order_relaxed);
    }
    return k;
}

uint32_t mp__vec_nonfinite_bits(const float *x, size_t n) {
    return best()->nonfinite_bits(x, n);
}

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
    best()->acc_first(acc, xs, ws, xm, wm, n);
}

void mp__vec_acc_add(double *restrict acc, const float *restrict x, double w,
                     size_t n) {
    best()->acc_add(acc, x, w, n);
}

void mp__vec_acc_store(float *restrict out, const double *restrict acc,
                       double inv, size_t n) {
    best()->acc_store(out, acc, inv, n);
}

void mp__vec_acc_add_store(float *restrict out, const double *restrict acc,
                           const float *restrict x, double w, double inv,
                           size_t n) {
    best()->acc_add_store(out, acc, x, w, inv, n);
}

void mp__vec_blend_store(float *restrict v, double ws, const float *restrict x,
                         double wm, double inv, size_t n) {
    best()->blend_store(v, ws, x, wm, inv, n);
}
