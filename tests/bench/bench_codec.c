/* SPDX-License-Identifier: MIT */
/*
 * bench_codec.c - moshpit-bench-codec: how fast one core encodes and
 * decodes a data part with each wire compression (src/core/codec.h), with
 * the plain C kernels and with the vector kernels this CPU runs, next to
 * how fast it seals the same part as float32 with AEGIS-256X2 (the data
 * plane's fastest cipher), so that one can see whether the conversion
 * would become the bottleneck of a round. Figures are GB/s of float32
 * input (10^9 bytes of the uncompressed values per second of this
 * thread's CPU time), the median of R repetitions of about 256 MiB each.
 * A tool for people, not a test: nothing is asserted about speed.
 *
 *   moshpit-bench-codec [--values N] [--reps R]
 *
 * N: values per part (default 65536, one data part); R: default 9.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/codec.h"
#include "crypto/aegis.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

typedef struct {
    void (*enc)(const float *, size_t, uint8_t *);
    bool (*dec)(const uint8_t *, size_t, float *);
} pair_t;

static volatile uint32_t sink;

static double run_enc(const pair_t *p, const float *x, size_t n, uint8_t *e) {
    size_t iters = ((size_t)256 << 20) / (4 * n) + 1;
    double t0 = now_s();
    for (size_t i = 0; i < iters; i++)
        p->enc(x, n, e);
    sink += e[0];
    return 4.0 * (double)n * (double)iters / (now_s() - t0) / 1e9;
}

static double run_dec(const pair_t *p, const uint8_t *e, size_t n, float *y) {
    size_t iters = ((size_t)256 << 20) / (4 * n) + 1;
    double t0 = now_s();
    uint32_t ok = 0;
    for (size_t i = 0; i < iters; i++)
        ok += p->dec(e, n, y);
    sink += ok;
    return 4.0 * (double)n * (double)iters / (now_s() - t0) / 1e9;
}

int main(int argc, char **argv) {
    size_t n = 65536;
    int reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--values") == 0)
            n = (size_t)strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
    }
    if (n == 0 || n > (1u << 24) || reps < 1 || reps > 64 || argc % 2 == 0) {
        fprintf(stderr,
                "usage: moshpit-bench-codec [--values N] [--reps 1..64]\n");
        return 2;
    }
    float *x = malloc(4 * n), *y = malloc(4 * n);
    uint8_t *e = malloc(4 * n + 64), *c = malloc(4 * n);
    if (!x || !y || !e || !c)
        return 1;
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)(int32_t)(s >> 40) / 1048576.0f;
    }
    printf("GB/s of float32 values (10^9 bytes of input per second of this "
           "thread's CPU time), %zu values a part, median of %d\n",
           n, reps);
    if (mp__aegis256x2_available()) {
        static const uint8_t key[32] = {7}, nonce[32] = {9}, ad[48] = {1};
        uint8_t tag[16];
        double v[64];
        for (int r = 0; r < reps; r++) {
            size_t iters = ((size_t)256 << 20) / (4 * n) + 1;
            double t0 = now_s();
            for (size_t i = 0; i < iters; i++)
                mp__aegis256x2_encrypt(key, nonce, ad, sizeof ad,
                                       (const uint8_t *)x, 4 * n, c, tag);
            v[r] = 4.0 * (double)n * (double)iters / (now_s() - t0) / 1e9;
        }
        printf("AEGIS-256X2 seal of the float32 part: %.2f GB/s\n",
               median(v, reps));
    }
    static const char *names[] = {"", "FP16", "BF16", "INT8", "INT4"};
    printf("%-10s %-5s %10s %10s %12s\n", "kernels", "codec", "encode",
           "decode", "bytes/value");
    for (size_t k = 0; mp__codec_kernels(k) != NULL; k++) {
        const mp_codec_kernels_t *ks = mp__codec_kernels(k);
        pair_t pairs[5] = {{0, 0},
                           {ks->f16_enc, ks->f16_dec},
                           {ks->bf16_enc, ks->bf16_dec},
                           {ks->q8_enc, ks->q8_dec},
                           {ks->q4_enc, ks->q4_dec}};
        for (uint32_t cd = 1; cd <= MP_CODEC_MAX; cd++) {
            double ve[64], vd[64];
            pairs[cd].enc(x, n, e);
            for (int r = 0; r < reps; r++) {
                ve[r] = run_enc(&pairs[cd], x, n, e);
                vd[r] = run_dec(&pairs[cd], e, n, y);
            }
            printf("%-10s %-5s %10.2f %10.2f %12.3f\n", ks->name, names[cd],
                   median(ve, reps), median(vd, reps),
                   (double)mp__codec_bytes(cd, n) / (double)n);
        }
    }
    free(x), free(y), free(e), free(c);
    return 0;
}
