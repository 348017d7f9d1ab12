/* SPDX-License-Identifier: MIT */
/*
 * bench_open.c - moshpit-bench-open: how fast one core opens data parts
 * with the AEGIS ciphers, with and without the finiteness scan the data
 * plane runs while decrypting (mp__vec_scan_nonfinite, as
 * src/net/engine_data.c calls it). Three cases per cipher: decryption
 * alone; decryption and scan of all-finite floats; the same with a NaN as
 * the very first float; then the last two with the scan fused into the
 * decryption loop (mp__aegis256_decrypt_f32, what the data plane runs
 * since; the chunk scan is what the other ciphers still use). The scan reads
 * not yet authenticated plaintext, so its cost must not depend on the values:
 * the last two figures should be the same. A tool for people, not a test:
 * nothing is asserted about speed.
 *
 *   moshpit-bench-open [--bytes N] [--reps R]
 *
 * N: part size in bytes (a multiple of 4, default 262144, one data part);
 * R: timed repetitions per case (default 15, the median is printed; the
 * cases take turns). Each repetition opens about 512 MiB. Times are CPU
 * time of the thread, so a loaded machine slows the figures less.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/vec.h"
#include "crypto/aegis.h"

typedef void (*enc_fn)(const uint8_t *, const uint8_t *, const uint8_t *,
                       size_t, const uint8_t *, size_t, uint8_t *, uint8_t *);
typedef int (*dec_fn)(const uint8_t *, const uint8_t *, const uint8_t *, size_t,
                      const uint8_t *, size_t, const uint8_t *, uint8_t *,
                      mp_aegis_scan_fn, void *);
typedef int (*dec_f32_fn)(const uint8_t *, const uint8_t *, const uint8_t *,
                          size_t, const uint8_t *, size_t, const uint8_t *,
                          uint8_t *, uint32_t *);

/* CPU time of this thread: on a shared machine, time spent descheduled
 * does not count. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* GB/s (10^9 bytes) of one batch opening c about 512 MiB worth of times,
 * without a scan (scan 0), with the chunk scan (1) or with the fused one
 * (2, through decf). Every open must verify; the scan verdict must be
 * want_bad. */
static double batch(dec_fn dec, dec_f32_fn decf, const uint8_t *c, size_t len,
                    const uint8_t tag[16], uint8_t *out, int scan, int want_bad,
                    int *failed) {
    static const uint8_t key[32] = {7}, nonce[32] = {9};
    static const uint8_t ad[48] = {1};
    size_t iters = ((size_t)512 << 20) / len + 1;
    double t0 = now_s();
    for (size_t i = 0; i < iters; i++) {
        uint32_t bits = 0;
        int rc = scan == 2
                     ? decf(key, nonce, ad, sizeof(ad), c, len, tag, out, &bits)
                     : dec(key, nonce, ad, sizeof(ad), c, len, tag, out,
                           scan ? mp__vec_scan_nonfinite : NULL, &bits);
        if (rc != 0 || (scan && ((bits & MP_VEC_NONFINITE) != 0) != want_bad))
            *failed = 1;
    }
    return (double)len * (double)iters / (now_s() - t0) / 1e9;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

static int bench(const char *name, enc_fn enc, dec_fn dec, dec_f32_fn decf,
                 size_t len, int reps) {
    static const uint8_t key[32] = {7}, nonce[32] = {9};
    static const uint8_t ad[48] = {1};
    float *x = malloc(len);
    uint8_t *c = malloc(len), *cnan = malloc(len), *out = malloc(len);
    uint8_t tag[16], tagnan[16];
    int failed = 0;
    if (x == NULL || c == NULL || cnan == NULL || out == NULL) {
        fprintf(stderr, "moshpit-bench-open: out of memory\n");
        free(x), free(c), free(cnan), free(out);
        return 1;
    }
    uint64_t s = 1;
    for (size_t i = 0; i < len / 4; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)(int32_t)(s >> 40) / 1048576.0f;
    }
    enc(key, nonce, ad, sizeof(ad), (const uint8_t *)x, len, c, tag);
    x[0] = NAN;
    enc(key, nonce, ad, sizeof(ad), (const uint8_t *)x, len, cnan, tagnan);
    /* the three cases take turns, so a slow spell of a shared machine hits
     * them alike */
    double plain[64], fin[64], nan[64], ffin[64], fnan[64];
    for (int r = 0; r < reps; r++) {
        plain[r] = batch(dec, decf, c, len, tag, out, 0, 0, &failed);
        fin[r] = batch(dec, decf, c, len, tag, out, 1, 0, &failed);
        nan[r] = batch(dec, decf, cnan, len, tagnan, out, 1, 1, &failed);
        ffin[r] = batch(dec, decf, c, len, tag, out, 2, 0, &failed);
        fnan[r] = batch(dec, decf, cnan, len, tagnan, out, 2, 1, &failed);
    }
    printf("%-12s %9zu %14.2f %14.2f %14.2f %14.2f %14.2f\n", name, len,
           median(plain, reps), median(fin, reps), median(nan, reps),
           median(ffin, reps), median(fnan, reps));
    if (failed)
        fprintf(stderr,
                "moshpit-bench-open: %s: a decryption or a scan "
                "verdict was wrong\n",
                name);
    free(x), free(c), free(cnan), free(out);
    return failed;
}

int main(int argc, char **argv) {
    size_t len = 262144;
    int reps = 15;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--bytes") == 0)
            len = (size_t)strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
    }
    if (len == 0 || len % 4 != 0 || reps < 1 || reps > 64 || argc % 2 == 0) {
        fprintf(stderr, "usage: moshpit-bench-open [--bytes N (multiple of "
                        "4)] [--reps 1..64]\n");
        return 2;
    }
    printf("GB/s (10^9 bytes per second of this thread's CPU time), "
           "median of %d\n",
           reps);
    printf("%-12s %9s %14s %14s %14s %14s %14s\n", "cipher", "bytes", "decrypt",
           "+scan finite", "+scan NaN@0", "fused finite", "fused NaN@0");
    int rc = 0, any = 0;
    if (mp__aegis256x2_available()) {
        rc |=
            bench("AEGIS-256X2", mp__aegis256x2_encrypt, mp__aegis256x2_decrypt,
                  mp__aegis256x2_decrypt_f32, len, reps);
        any = 1;
    }
    if (mp__aegis256_available()) {
        rc |= bench("AEGIS-256", mp__aegis256_encrypt, mp__aegis256_decrypt,
                    mp__aegis256_decrypt_f32, len, reps);
        any = 1;
    }
    if (!any)
        printf("no AEGIS variant runs on this CPU or build\n");
    return rc;
}
