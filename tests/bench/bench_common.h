/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - what every moshpit-bench child program shares: the
 * command line the driver passes, the deterministic "random" data (a pure
 * function of seed, rank and index, so any rank can recompute what every
 * other rank started with and verify a sum or mean without talking to
 * anybody), the check of a result buffer against that expectation, and the
 * result file the driver reads back. Everything is static inline so the C
 * children and the C++ Gloo child compile the same code without a library;
 * the header therefore sticks to the common subset of C11 and C++17.
 */
#ifndef MOSHPIT_BENCH_COMMON_H
#define MOSHPIT_BENCH_COMMON_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Exit codes of a child, understood by the driver. */
#define BENCH_EXIT_OK 0
#define BENCH_EXIT_ERROR 1  /* setup or communication failed */
#define BENCH_EXIT_VERIFY 3 /* the last round produced a wrong result */

/* Command line shared by all children (each child may add its own). */
typedef struct bench_args {
    int rank; /* -1 = take it from the runtime (MPI) */
    int peers;
    size_t bytes; /* buffer size, a multiple of 4 */
    int rounds, warmup;
    uint64_t seed;
    const char *out;       /* result file; for MPI a prefix, rank appended */
    const char *store;     /* Gloo: FileStore directory */
    const char *bootstrap; /* moshpit: endpoint of rank 0 */
    const char *addr;      /* address to listen on (default 127.0.0.1; the
                              rank's own on the emulated network) */
    int report_fd, control_fd; /* moshpit: handshake pipes, -1 if unused */
    int corrupt;       /* self-check: rank 0 perturbs one input element, so the
                          verification must fail */
    int compression;   /* moshpit: moshpit_config_t.compression */
    int data_streams;  /* moshpit: moshpit_config_t.data_streams */
    int shared_memory; /* moshpit: moshpit_config_t.shared_memory */
    const char *congestion; /* moshpit: moshpit_config_t.congestion */
} bench_args_t;

static inline int bench_parse_args(int argc, char **argv, bench_args_t *a) {
    int i;
    memset(a, 0, sizeof(*a));
    a->rank = -1;
    a->rounds = 5;
    a->warmup = 1;
    a->report_fd = -1;
    a->control_fd = -1;
    a->addr = "127.0.0.1";
    for (i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--rank") == 0) {
            a->rank = atoi(v);
        } else if (strcmp(k, "--peers") == 0) {
            a->peers = atoi(v);
        } else if (strcmp(k, "--size") == 0) {
            a->bytes = (size_t)strtoull(v, NULL, 10);
        } else if (strcmp(k, "--rounds") == 0) {
            a->rounds = atoi(v);
        } else if (strcmp(k, "--warmup") == 0) {
            a->warmup = atoi(v);
        } else if (strcmp(k, "--seed") == 0) {
            a->seed = strtoull(v, NULL, 0);
        } else if (strcmp(k, "--out") == 0) {
            a->out = v;
        } else if (strcmp(k, "--store") == 0) {
            a->store = v;
        } else if (strcmp(k, "--bootstrap") == 0) {
            a->bootstrap = v;
        } else if (strcmp(k, "--addr") == 0) {
            a->addr = v;
        } else if (strcmp(k, "--report-fd") == 0) {
            a->report_fd = atoi(v);
        } else if (strcmp(k, "--control-fd") == 0) {
            a->control_fd = atoi(v);
        } else if (strcmp(k, "--corrupt") == 0) {
            a->corrupt = atoi(v);
        } else if (strcmp(k, "--compression") == 0) {
            a->compression = atoi(v);
        } else if (strcmp(k, "--data-streams") == 0) {
            a->data_streams = atoi(v);
        } else if (strcmp(k, "--shared-memory") == 0) {
            a->shared_memory = atoi(v);
        } else if (strcmp(k, "--congestion") == 0) {
            a->congestion = v;
        } else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], k);
            return -1;
        }
    }
    if (i != argc || a->peers < 1 || a->bytes < 4 || a->bytes % 4 != 0 ||
        a->rounds < 1 || a->warmup < 0 || a->out == NULL) {
        fprintf(stderr,
                "%s: bad or missing arguments (this program is "
                "started by moshpit-bench)\n",
                argv[0]);
        return -1;
    }
    return 0;
}

static inline uint64_t bench_mix64(uint64_t x) {
    /* splitmix64 finalizer: cheap, well mixed, identical everywhere */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Element i of rank r's input: a float in [-1, 1) with 24 significant
 * bits, so it is exact in float and every rank can recompute it. */
static inline float bench_value(uint64_t seed, int rank, size_t i) {
    uint64_t h = bench_mix64(seed ^ bench_mix64((uint64_t)rank + 1) ^
                             ((uint64_t)i * 0xd6e8feb86659fd93ULL));
    return (float)((double)(h >> 40) * (1.0 / 8388608.0) - 1.0);
}

static inline void bench_fill(float *buf, size_t count, const bench_args_t *a,
                              int rank) {
    size_t i;
    for (i = 0; i < count; i++) {
        buf[i] = bench_value(a->seed, rank, i);
    }
    if (a->corrupt && rank == 0) {
        buf[count / 2] += 0.5f;
    }
}

/*
 * Checks buf against the sum over ranks 0..peers-1 of their inputs times
 * scale (1 for a sum, 1/peers for an equal-weight mean). On a mismatch
 * writes a description to msg and returns -1. The tolerance covers any
 * summation order in float, plus extra (a lossy wire encoding's error);
 * garbage, a missing rank or a stale buffer is off by far more.
 */
static inline int bench_verify_tol(const float *buf, size_t count,
                                   uint64_t seed, int peers, double scale,
                                   double extra, char *msg, size_t msglen) {
    size_t i, bad = 0, first = 0;
    double first_got = 0, first_want = 0;
    int r;
    for (i = 0; i < count; i++) {
        double want = 0, tol;
        for (r = 0; r < peers; r++) {
            want += (double)bench_value(seed, r, i);
        }
        want *= scale;
        tol = 1e-4 * (fabs(want) > 1.0 ? fabs(want) : 1.0) + extra;
        if (!(fabs((double)buf[i] - want) <= tol)) { /* also catches NaN */
            if (bad++ == 0) {
                first = i;
                first_got = (double)buf[i];
                first_want = want;
            }
        }
    }
    if (bad == 0) {
        return 0;
    }
    snprintf(msg, msglen,
             "%zu of %zu elements wrong; first at index %zu: got %.7g, "
             "expected %.7g",
             bad, count, first, first_got, first_want);
    return -1;
}

static inline int bench_verify(const float *buf, size_t count, uint64_t seed,
                               int peers, double scale, char *msg,
                               size_t msglen) {
    return bench_verify_tol(buf, count, seed, peers, scale, 0.0, msg, msglen);
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One timed round as a child reports it. */
typedef struct bench_round {
    double call_s;      /* wall time of the timed operation */
    double allreduce_s; /* moshpit: allreduce_ms/1000; others: = call_s */
    uint64_t round_id;  /* moshpit: group id; others: 0 */
    unsigned group;     /* peers in the operation */
    double fraction;    /* moshpit: fraction_averaged; others: 1 */
} bench_round_t;

/*
 * Writes the result file atomically (temp name + rename) so the driver
 * never reads half of it. verify_msg NULL = the check passed.
 */
static inline int bench_write_result(const char *path, int rank,
                                     const bench_round_t *rs, int n,
                                     const char *verify_msg) {
    char tmp[4096];
    FILE *f;
    int i, rc;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        fprintf(stderr, "bench rank %d: path too long\n", rank);
        return -1;
    }
    f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "bench rank %d: cannot write %s: %s\n", rank, tmp,
                strerror(errno));
        return -1;
    }
    fprintf(f, "rank %d\n", rank);
    for (i = 0; i < n; i++) {
        fprintf(f, "round %.9f %.9f %llu %u %.6f\n", rs[i].call_s,
                rs[i].allreduce_s, (unsigned long long)rs[i].round_id,
                rs[i].group, rs[i].fraction);
    }
    if (verify_msg == NULL) {
        fprintf(f, "verify ok\n");
    } else {
        fprintf(f, "verify FAIL %s\n", verify_msg);
    }
    rc = fclose(f);
    if (rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "bench rank %d: cannot write %s\n", rank, path);
        return -1;
    }
    return 0;
}

#endif /* MOSHPIT_BENCH_COMMON_H */
