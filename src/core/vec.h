/* SPDX-License-Identifier: MIT */
/*
 * vec.h - the float kernels of the data plane: the finiteness check and the
 * weighted accumulation of a group's own share. Pure functions over caller
 * buffers, written so that GCC and Clang vectorize them at -O2 (fixed-size
 * inner blocks, restrict, no float reductions); no allocation; the only
 * state is which compiled set (baseline or AVX2) this CPU runs.
 */
#ifndef MP_CORE_VEC_H
#define MP_CORE_VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True if none of the n floats is an infinity or a NaN. */
bool mp__vec_all_finite(const float *x, size_t n);

/* Bit 31 (MP_VEC_NONFINITE) of the result is set if any of the n floats is
 * an infinity or a NaN. The word is the OR of one term per float (the other
 * bits carry no meaning beyond that), so the OR over consecutive pieces
 * equals one call over the whole. Branch-free over the values, no early
 * exit: the time depends on n only. */
#define MP_VEC_NONFINITE 0x80000000u
uint32_t mp__vec_nonfinite_bits(const float *x, size_t n);

/* A decryption scan (the shape of mp_scan_fn in crypto/session.h): ORs
 * mp__vec_nonfinite_bits() of the len / 4 floats at m (any alignment) into
 * the uint32_t at acc, which starts at 0; after the last chunk it holds
 * mp__vec_nonfinite_bits() of them all. It looks at every chunk whatever
 * earlier ones held, so its time depends only on the lengths, never on the
 * not yet authenticated values; read the verdict only after the tag
 * verified. */
void mp__vec_scan_nonfinite(void *acc, const uint8_t *m, size_t len);

/* acc[i] = ws * xs[i] + wm * xm[i] */
void mp__vec_acc_first(double *restrict acc, const float *restrict xs,
                       double ws, const float *restrict xm, double wm,
                       size_t n);
/* acc[i] += w * x[i] */
void mp__vec_acc_add(double *restrict acc, const float *restrict x, double w,
                     size_t n);
/* out[i] = acc[i] * inv */
void mp__vec_acc_store(float *restrict out, const double *restrict acc,
                       double inv, size_t n);
/* out[i] = (acc[i] + w * x[i]) * inv: the last contribution fused into the
 * final store */
void mp__vec_acc_add_store(float *restrict out, const double *restrict acc,
                           const float *restrict x, double w, double inv,
                           size_t n);
/* v[i] = (ws * v[i] + wm * x[i]) * inv, in place */
void mp__vec_blend_store(float *restrict v, double ws, const float *restrict x,
                         double wm, double inv, size_t n);

/* One compiled set of the kernels above. The functions above call the
 * best set this CPU runs; every set gives the same bits. */
typedef struct mp_vec_kernels {
    const char *name;
    uint32_t (*nonfinite_bits)(const float *x, size_t n);
    void (*acc_first)(double *restrict acc, const float *restrict xs, double ws,
                      const float *restrict xm, double wm, size_t n);
    void (*acc_add)(double *restrict acc, const float *restrict x, double w,
                    size_t n);
    void (*acc_store)(float *restrict out, const double *restrict acc,
                      double inv, size_t n);
    void (*acc_add_store)(float *restrict out, const double *restrict acc,
                          const float *restrict x, double w, double inv,
                          size_t n);
    void (*blend_store)(float *restrict v, double ws, const float *restrict x,
                        double wm, double inv, size_t n);
} mp_vec_kernels_t;

/* The i-th set this build and CPU can run: 0 is portable C (always),
 * 1 AVX2 on x86-64 CPUs that have it; NULL past the last. For tests. */
const mp_vec_kernels_t *mp__vec_kernels(size_t i);

#endif
