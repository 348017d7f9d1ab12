/* SPDX-License-Identifier: MIT */
/*
 * test_vec.c - unit tests of the float kernels (src/core/vec.h): the
 * finiteness check finds a single infinity or NaN (of either sign, quiet or
 * signalling, any payload) at every position of arrays of every length up to
 * a few vector blocks, and accepts the largest finite values, denormals and
 * zeros; the decryption scan over chunks gives the same word as one pass
 * and reads every chunk (no early exit after a NaN); the accumulation
 * kernels equal their scalar definitions exactly; and every compiled set
 * this CPU runs (portable, AVX2) gives the same finiteness verdicts and
 * the same bits as those definitions, with weights whose products round
 * (so a fused multiply-add would show), over lengths around the blocks.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/vec.h"

#include "test_util.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_all_finite(void) {
    enum { N = 80 };
    float x[N + 1] = {0};
    const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u,
                            0xffc00000u, 0x7f800001u, 0x7fffffffu};
    const float good[] = {
        FLT_MAX, -FLT_MAX, FLT_MIN, from_bits(1u), from_bits(0x80000001u),
        0.0f,    -0.0f,    1.0f};
    int wrong = 0;
    for (size_t n = 0; n <= N; n++) {
        for (size_t i = 0; i < n; i++)
            x[i] = good[i % (sizeof good / sizeof good[0])];
        wrong += !mp__vec_all_finite(x, n);
        for (size_t pos = 0; pos < n; pos++)
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                float keep = x[pos];
                x[pos] = from_bits(bad[b]);
                wrong += mp__vec_all_finite(x, n);
                x[pos] = keep;
            }
        /* an unaligned start (by one float) */
        if (n > 1) {
            x[n - 1] = from_bits(0x7f800000u);
            wrong += mp__vec_all_finite(x + 1, n - 1);
            wrong += !mp__vec_all_finite(x + 1, n - 2);
        }
    }
    CHECK(wrong == 0, "%d wrong finiteness verdicts", wrong);
}

/* The decryption scan over chunks (as the AEAD calls it: multiples of 16
 * bytes but the last, from an unaligned buffer) gives the verdict of one
 * pass over everything, and reads every chunk: a later chunk's bits are in
 * the result even after an earlier chunk held a NaN, so it cannot have
 * stopped early. */
static void test_scan(void) {
    enum { CHUNK = 4096, LEN = 3 * CHUNK + 44 };
    static uint8_t raw[LEN + 1];
    uint8_t *buf = raw + 1;
    float f;
    int wrong = 0;
    /* values 1.0 to 2.5: their terms set bits 30 and 23 only */
    for (size_t i = 0; i < LEN / 4; i++) {
        f = (float)(i % 7) * 0.25f + 1.0f;
        memcpy(buf + 4 * i, &f, 4);
    }
    const size_t spots[] = {0, CHUNK / 4 - 1, CHUNK / 4, LEN / 4 - 1};
    for (size_t k = 0; k <= sizeof spots / sizeof spots[0]; k++) {
        uint8_t keep[4] = {0};
        size_t at = k < sizeof spots / sizeof spots[0] ? spots[k] : SIZE_MAX;
        if (at != SIZE_MAX) {
            memcpy(keep, buf + 4 * at, 4);
            f = from_bits(0x7fc00000u);
            memcpy(buf + 4 * at, &f, 4);
        }
        uint32_t acc = 0;
        for (size_t done = 0; done < LEN; done += CHUNK)
            mp__vec_scan_nonfinite(&acc, buf + done,
                                   LEN - done < CHUNK ? LEN - done : CHUNK);
        float whole[LEN / 4];
        memcpy(whole, buf, sizeof whole);
        wrong += acc != mp__vec_nonfinite_bits(whole, LEN / 4);
        wrong += ((acc & MP_VEC_NONFINITE) != 0) != (at != SIZE_MAX);
        if (at != SIZE_MAX)
            memcpy(buf + 4 * at, keep, 4);
    }
    CHECK(wrong == 0, "%d wrong scan verdicts", wrong);
    /* a NaN in the first chunk, FLT_MAX (exponent bits 23..30) only in the
     * last: both show in the result */
    f = from_bits(0x7fc00000u);
    memcpy(buf, &f, 4);
    f = FLT_MAX;
    memcpy(buf + LEN - 4, &f, 4);
    uint32_t acc = 0;
    for (size_t done = 0; done < LEN; done += CHUNK)
        mp__vec_scan_nonfinite(&acc, buf + done,
                               LEN - done < CHUNK ? LEN - done : CHUNK);
    CHECK(acc == 0xff800000u,
          "scan result %08x: a chunk after the NaN was not read (want "
          "ff800000)",
          (unsigned)acc);
}

static void test_acc(void) {
    enum { N = 37 };
    float xs[N], xm[N], out[N], v[N];
    double acc[N], ref[N];
    uint64_t s = 1;
    for (int i = 0; i < N; i++) {
        xs[i] = (float)((double)(test_splitmix64(&s) % 2000) / 7.0 - 100.0);
        xm[i] = (float)((double)(test_splitmix64(&s) % 2000) / 3.0 - 300.0);
    }
    int bad = 0;
    mp__vec_acc_first(acc, xs, 0.25, xm, 1.5, N);
    for (int i = 0; i < N; i++)
        bad += acc[i] != 0.25 * (double)xs[i] + 1.5 * (double)xm[i];
    memcpy(ref, acc, sizeof ref);
    mp__vec_acc_add(acc, xm, 2.0, N);
    for (int i = 0; i < N; i++)
        bad += acc[i] != ref[i] + 2.0 * (double)xm[i];
    mp__vec_acc_store(out, acc, 0.5, N);
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)(acc[i] * 0.5);
    mp__vec_acc_add_store(out, acc, xs, 3.0, 0.125, N);
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)((acc[i] + 3.0 * (double)xs[i]) * 0.125);
    memcpy(v, xs, sizeof v);
    mp__vec_blend_store(v, 0.75, xm, 0.25, 2.0, N);
    for (int i = 0; i < N; i++)
        bad += v[i] !=
               (float)((0.75 * (double)xs[i] + 0.25 * (double)xm[i]) * 2.0);
    CHECK(bad == 0, "%d accumulation results differ from the definition", bad);
}

/* Every kernel set against the scalar definitions, bit for bit. */
static void test_sets(void) {
    enum { N = 1000 };
    static float xs[N], xm[N], out[N], v[N];
    static double acc[N], ref[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) {
        xs[i] = (float)((double)(int64_t)(test_splitmix64(&s) >> 20) / 3e9);
        xm[i] = (float)((double)(int64_t)(test_splitmix64(&s) >> 24) / 7e7);
    }
    const double ws = 1.0 / 3.0, wm = 2.0 / 7.0, w = 0.1, inv = 1.0 / 9.0;
    size_t nsets = 0;
    for (size_t k = 0; mp__vec_kernels(k) != NULL; k++, nsets++) {
        const mp_vec_kernels_t *ks = mp__vec_kernels(k);
        int bad = 0;
        static const size_t lens[] = {0, 1, 15, 16, 17, 31, 33, 64, 65, N};
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t n = lens[li];
            ks->acc_first(acc, xs, ws, xm, wm, n);
            for (size_t i = 0; i < n; i++)
                bad += acc[i] != ws * (double)xs[i] + wm * (double)xm[i];
            memcpy(ref, acc, sizeof ref);
            ks->acc_add(acc, xm, w, n);
            for (size_t i = 0; i < n; i++)
                bad += acc[i] != ref[i] + w * (double)xm[i];
            ks->acc_store(out, acc, inv, n);
            for (size_t i = 0; i < n; i++)
                bad += out[i] != (float)(acc[i] * inv);
            ks->acc_add_store(out, acc, xs, w, inv, n);
            for (size_t i = 0; i < n; i++)
                bad += out[i] != (float)((acc[i] + w * (double)xs[i]) * inv);
            memcpy(v, xs, sizeof v);
            ks->blend_store(v, ws, xm, wm, inv, n);
            for (size_t i = 0; i < n; i++)
                bad += v[i] !=
                       (float)((ws * (double)xs[i] + wm * (double)xm[i]) * inv);
            /* one non-finite value anywhere, or none */
            for (size_t at = 0; at <= n; at++) {
                memcpy(v, xs, sizeof v);
                if (at < n)
                    v[at] = from_bits(at % 2 ? 0x7fc00001u : 0xff800000u);
                uint32_t got = ks->nonfinite_bits(v, n);
                bad += ((got & MP_VEC_NONFINITE) != 0) != (at < n);
                bad += got != mp__vec_kernels(0)->nonfinite_bits(v, n);
            }
        }
        CHECK(bad == 0, "kernel set %s: %d results differ from the definition",
              ks->name, bad);
    }
    printf("test_vec: %zu kernel set(s) checked\n", nsets);
    CHECK(nsets >= 1, "no kernel set");
}

int main(void) {
    test_all_finite();
    test_scan();
    test_acc();
    test_sets();
    return test_summary("test_vec");
}
