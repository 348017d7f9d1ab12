/* SPDX-License-Identifier: MIT */
/*
 * moshpit_bench.c - the moshpit-bench driver. For one peer count and buffer
 * size it times an all-reduce among that many local processes on loopback
 * with moshpit and, when they were found at build time, with Gloo's
 * ring-chunked all-reduce over its TCP transport and with Open MPI's
 * MPI_Allreduce over the tcp BTL, in one run, and prints a table (or JSON)
 * with the median seconds per round and the algorithm bandwidth of each,
 * plus moshpit's time divided by each of the others. Each system's rank is a
 * separate child program (built next to this one); the driver starts them
 * (fork/exec, the MPI one through mpirun), coordinates the moshpit start
 * over pipes, reads each rank's per-round times back from a result file in
 * a fresh temp dir, takes the slowest rank per round and the median over
 * rounds, and fails loudly if any rank's last-round result did not verify.
 * With --delay-ms, --rate-mbit, --loss-pct or --cc it first builds an
 * emulated wide-area network with tests/netns (one namespace per rank,
 * each rank's access link delayed, rate-limited and lossy as asked), runs
 * every rank in its own namespace on its own address, and also prints the
 * line-rate bound for the bytes moved and the bytes that crossed the links.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "bench_proc.h"

#ifdef MOSHPIT_BENCH_WAN
#include "netns.h"
#endif

#define MAX_PEERS 64 /* moshpit's group_size limit */
#define MIB (1024.0 * 1024.0)

enum { SYS_MOSHPIT, SYS_GLOO, SYS_MPI, SYS_COUNT };
static const char *const sys_names[SYS_COUNT] = {"moshpit", "gloo", "mpi"};

/* Where the children are; NULL = not built (dependency not found). */
static const char *child_path(int sys) {
    switch (sys) {
    case SYS_MOSHPIT:
#ifdef MOSHPIT_BENCH_MOSHPIT_CHILD
        return MOSHPIT_BENCH_MOSHPIT_CHILD;
#else
        return NULL;
#endif
    case SYS_GLOO:
#ifdef MOSHPIT_BENCH_GLOO_CHILD
        return MOSHPIT_BENCH_GLOO_CHILD;
#else
        return NULL;
#endif
    case SYS_MPI:
#if defined(MOSHPIT_BENCH_MPI_CHILD) && defined(MOSHPIT_BENCH_MPIRUN)
        return MOSHPIT_BENCH_MPI_CHILD;
#else
        return NULL;
#endif
    default:
        return NULL;
    }
}

typedef struct options {
    int peers;
    size_t bytes;
    int rounds, warmup;
    int only; /* -1 = all, else a bit per system */
    int json;
    int keep_tmp;
    int corrupt;     /* self-check: verification must fail */
    int compression; /* moshpit's moshpit_config_t.compression */
    uint64_t seed;
    double timeout_s; /* per system */
    /* the emulated network (wan != 0) */
    int wan;
    double delay_ms, jitter_ms, loss_pct;
    unsigned rate_mbit;
    int offload;
    const char *cc; /* congestion control of every TCP socket; NULL: the
                       namespace's default */
    /* moshpit's config congestion (NULL: the library's default) and
     * data_streams (0: the library's default) */
    const char *moshpit_cc;
    int data_streams;
    /* moshpit's config shared_memory (0: MOSHPIT_SHM_AUTO); Open MPI with
     * its shared memory transport (vader) instead of TCP, on loopback */
    int shm_off;
    int mpi_shm;
} options_t;

/* What one rank wrote back. */
typedef struct rank_result {
    int present;
    double *call_s, *ar_s;
    unsigned long long *round_id;
    unsigned *group;
    double *fraction;
    int verify_ok;
    char verify_msg[512];
} rank_result_t;

typedef struct sys_result {
    enum { ST_SKIPPED, ST_OK, ST_FAILED } status;
    char why[512];
    double *round_s; /* per round: slowest rank's comparable time */
    double *call_s;  /* per round: slowest rank's full call time */
    double median_s, median_call_s;
    double link_bytes; /* wan: most bytes one rank's link carried one way,
                          per round (setup included) */
} sys_result_t;

static options_t opt;
static const char *const compress_names[] = {"none", "fp16", "bf16", "int8",
                                             "int4"};
static char tmpdir[PATH_MAX];

/* ---- small helpers ---- */

static void set_failed(sys_result_t *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_failed(sys_result_t *res, const char *fmt, ...) {
    va_list ap;
    res->status = ST_FAILED;
    va_start(ap, fmt);
    vsnprintf(res->why, sizeof(res->why), fmt, ap);
    va_end(ap);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double *s = malloc((size_t)n * sizeof(double)), m;
    if (s == NULL) {
        return 0;
    }
    memcpy(s, v, (size_t)n * sizeof(double));
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* ---- result files ---- */

static void rank_result_free(rank_result_t *r) {
    free(r->call_s);
    free(r->ar_s);
    free(r->round_id);
    free(r->group);
    free(r->fraction);
    memset(r, 0, sizeof(*r));
}

static int read_rank_result(const char *path, int rounds, rank_result_t *r) {
    FILE *f = fopen(path, "r");
    char line[1024];
    int k = 0, have_verdict = 0;
    memset(r, 0, sizeof(*r));
    if (f == NULL) {
        return -1;
    }
    r->call_s = calloc((size_t)rounds, sizeof(double));
    r->ar_s = calloc((size_t)rounds, sizeof(double));
    r->round_id = calloc((size_t)rounds, sizeof(unsigned long long));
    r->group = calloc((size_t)rounds, sizeof(unsigned));
    r->fraction = calloc((size_t)rounds, sizeof(double));
    if (!r->call_s || !r->ar_s || !r->round_id || !r->group || !r->fraction) {
        fclose(f);
        rank_result_free(r);
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "round ", 6) == 0 && k < rounds) {
            if (sscanf(line + 6, "%lf %lf %llu %u %lf", &r->call_s[k],
                       &r->ar_s[k], &r->round_id[k], &r->group[k],
                       &r->fraction[k]) == 5) {
                k++;
            }
        } else if (strncmp(line, "verify ", 7) == 0) {
            have_verdict = 1;
            r->verify_ok = strncmp(line + 7, "ok", 2) == 0;
            if (!r->verify_ok) {
                size_t len;
                snprintf(r->verify_msg, sizeof(r->verify_msg), "%s",
                         line + 7 +
                             (strncmp(line + 7, "FAIL ", 5) == 0 ? 5 : 0));
                len = strlen(r->verify_msg);
                if (len > 0 && r->verify_msg[len - 1] == '\n') {
                    r->verify_msg[len - 1] = '\0';
                }
            }
        }
    }
    fclose(f);
    if (k != rounds || !have_verdict) {
        rank_result_free(r);
        return -1;
    }
    r->present = 1;
    return 0;
}

/*
 * Reads every rank's file, checks verdicts (and for moshpit that each round
 * was one group of all peers), and reduces to per-round slowest-rank times.
 */
static void collect(int sys, const int *status, sys_result_t *res) {
    int n = opt.peers, R = opt.rounds;
    rank_result_t *rr = calloc((size_t)n, sizeof(*rr));
    char path[PATH_MAX + 64];

    int missing = -1, wrong = -1;

    res->round_s = calloc((size_t)R, sizeof(double));
    res->call_s = calloc((size_t)R, sizeof(double));
    if (rr == NULL || res->round_s == NULL || res->call_s == NULL) {
        set_failed(res, "out of memory");
        free(rr);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (sys == SYS_MPI) {
            snprintf(path, sizeof(path), "%s/mpi-rank.%d", tmpdir, i);
        } else {
            snprintf(path, sizeof(path), "%s/%s-rank-%d", tmpdir,
                     sys_names[sys], i);
        }
        if (read_rank_result(path, R, &rr[i]) != 0) {
            missing = missing < 0 ? i : missing;
        } else if (!rr[i].verify_ok) {
            wrong = wrong < 0 ? i : wrong;
        }
    }
    /* A wrong result is the loudest news, even if another rank died. */
    res->status = ST_OK;
    if (wrong >= 0) {
        set_failed(res, "VERIFICATION FAILED on rank %d: %s", wrong,
                   rr[wrong].verify_msg);
    } else if (missing >= 0 && status != NULL && status[missing] != 0) {
        set_failed(res, "rank %d wrote no result (exit status %d%s)", missing,
                   status[missing], status[missing] < 0 ? ", killed" : "");
    } else if (missing >= 0) {
        set_failed(res, "rank %d wrote no result", missing);
    }
    for (int k = 0; k < R && res->status == ST_OK; k++) {
        for (int i = 0; i < n; i++) {
            if (rr[i].group[k] != (unsigned)n || rr[i].fraction[k] < 1.0) {
                set_failed(res,
                           "round %d on rank %d averaged %u of %d peers "
                           "(fraction %.4f); timing would be meaningless",
                           k, i, rr[i].group[k], n, rr[i].fraction[k]);
                break;
            }
            if (rr[i].round_id[k] != rr[0].round_id[k]) {
                set_failed(res,
                           "round %d: rank %d was in group %llu, rank 0 in "
                           "%llu; the ranks did not average together",
                           k, i, rr[i].round_id[k], rr[0].round_id[k]);
                break;
            }
            /* The round ends when its last rank is done. */
            if (rr[i].ar_s[k] > res->round_s[k]) {
                res->round_s[k] = rr[i].ar_s[k];
            }
            if (rr[i].call_s[k] > res->call_s[k]) {
                res->call_s[k] = rr[i].call_s[k];
            }
        }
    }
    if (res->status == ST_OK) {
        res->median_s = median(res->round_s, R);
        res->median_call_s = median(res->call_s, R);
    }
    for (int i = 0; i < n; i++) {
        rank_result_free(&rr[i]);
    }
    free(rr);
}

/* ---- the emulated network ---- */

/* Rank i's address: loopback, or its own on the emulated network. */
static const char *rank_addr(int i) {
#ifdef MOSHPIT_BENCH_WAN
    if (opt.wan) {
        return nn_addr((size_t)i);
    }
#endif
    (void)i;
    return "127.0.0.1";
}

/* proc_spawn inside rank i's namespace (the child inherits it). */
static pid_t spawn_rank(int i, char *const argv[], const int *keep, int n) {
#ifdef MOSHPIT_BENCH_WAN
    if (opt.wan) {
        pid_t pid;
        if (nn_enter((size_t)i) != 0) {
            return -1;
        }
        pid = proc_spawn(argv, keep, n, 0);
        if (nn_enter((size_t)-1) != 0) {
            fprintf(stderr, "moshpit-bench: cannot return to the host's "
                            "network namespace\n");
            exit(1);
        }
        return pid;
    }
#endif
    (void)i;
    return proc_spawn(argv, keep, n, 0);
}

/* Sum over the ranks' interfaces of the larger of rx and tx, per rank:
 * out[i] = max(rx, tx) of rank i now. */
static void link_counters(double *out) {
    for (int i = 0; i < opt.peers; i++) {
        out[i] = 0;
#ifdef MOSHPIT_BENCH_WAN
        uint64_t rx = 0, tx = 0;
        if (opt.wan && nn_bytes((size_t)i, &rx, &tx) == 0) {
            out[i] = (double)(rx > tx ? rx : tx);
        }
#endif
    }
}

#ifdef MOSHPIT_BENCH_WAN
static void wan_open(void) {
    char why[256];
    nn_link_t l;
    nn_open((size_t)opt.peers); /* exits 77 with "SKIP: ..." if it cannot */
    if (opt.delay_ms > 0 && !nn_can_delay(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        exit(77);
    }
    memset(&l, 0, sizeof(l));
    l.delay_us = (unsigned)(opt.delay_ms * 1000.0 + 0.5);
    l.jitter_us = (unsigned)(opt.jitter_ms * 1000.0 + 0.5);
    l.loss_permille = (unsigned)(opt.loss_pct * 10.0 + 0.5);
    l.rate_mbit = opt.rate_mbit;
    l.offload = opt.offload && l.loss_permille == 0;
    for (int i = 0; i < opt.peers; i++) {
        if (nn_link((size_t)i, &l) != 0) {
            fprintf(stderr, "moshpit-bench: cannot set rank %d's link\n", i);
            exit(1);
        }
    }
    if (opt.cc != NULL) {
#ifdef MOSHPIT_BENCH_CC_PRELOAD
        /* every TCP socket the children open gets this algorithm */
        setenv("NN_TCP_CC", opt.cc, 1);
        setenv("LD_PRELOAD", MOSHPIT_BENCH_CC_PRELOAD, 1);
#else
        fprintf(stderr, "moshpit-bench: --cc needs libnn-cc (not built)\n");
        exit(1);
#endif
    }
}
#endif

/* ---- the three runners ---- */

static double budget_deadline(void) {
    return proc_now() + opt.timeout_s;
}

/* Fills the argument list all children share; returns the count used. */
static int common_args(char **argv, char (*buf)[64], const char *out) {
    int a = 0;
    argv[a++] = "--peers";
    snprintf(buf[0], 64, "%d", opt.peers);
    argv[a++] = buf[0];
    argv[a++] = "--size";
    snprintf(buf[1], 64, "%zu", opt.bytes);
    argv[a++] = buf[1];
    argv[a++] = "--rounds";
    snprintf(buf[2], 64, "%d", opt.rounds);
    argv[a++] = buf[2];
    argv[a++] = "--warmup";
    snprintf(buf[3], 64, "%d", opt.warmup);
    argv[a++] = buf[3];
    argv[a++] = "--seed";
    snprintf(buf[4], 64, "%llu", (unsigned long long)opt.seed);
    argv[a++] = buf[4];
    argv[a++] = "--out";
    argv[a++] = (char *)out;
    if (opt.corrupt) {
        argv[a++] = "--corrupt";
        argv[a++] = "1";
    }
    return a;
}

static void run_gloo(sys_result_t *res) {
    char store[PATH_MAX + 32], out[PATH_MAX + 32], rank[16], buf[5][64];
    char *argv[32];
    pid_t pids[MAX_PEERS];
    int status[MAX_PEERS];

    snprintf(store, sizeof(store), "%s/gloo-store", tmpdir);
    if (mkdir(store, 0700) != 0) {
        set_failed(res, "mkdir %s: %s", store, strerror(errno));
        return;
    }
    for (int i = 0; i < opt.peers; i++) {
        int a = 0;
        snprintf(out, sizeof(out), "%s/gloo-rank-%d", tmpdir, i);
        snprintf(rank, sizeof(rank), "%d", i);
        argv[a++] = (char *)child_path(SYS_GLOO);
        a += common_args(argv + a, buf, out);
        argv[a++] = "--rank";
        argv[a++] = rank;
        argv[a++] = "--store";
        argv[a++] = store;
        argv[a++] = "--addr";
        argv[a++] = (char *)rank_addr(i);
        argv[a] = NULL;
        pids[i] = spawn_rank(i, argv, NULL, 0);
    }
    (void)proc_wait_all(pids, opt.peers, budget_deadline(), status);
    collect(SYS_GLOO, status, res);
}

static void run_mpi(sys_result_t *res) {
#ifdef MOSHPIT_BENCH_MPIRUN
    char out[PATH_MAX + 32], np[16], buf[5][64];
    char *argv[48];
    pid_t pid;
    int a = 0, status[MAX_PEERS];

    snprintf(out, sizeof(out), "%s/mpi-rank", tmpdir);
    snprintf(np, sizeof(np), "%d", opt.peers);
    argv[a++] = MOSHPIT_BENCH_MPIRUN;
    argv[a++] = "--allow-run-as-root";
    argv[a++] = "--oversubscribe";
    /* Loopback TCP only: the ob1 PML (so UCX cannot take over) with the
     * tcp and self BTLs (no vader shared memory), on lo; with --mpi-shm
     * the vader (shared memory) and self BTLs instead. */
    argv[a++] = "--mca";
    argv[a++] = "pml";
    argv[a++] = "ob1";
    argv[a++] = "--mca";
    argv[a++] = "btl";
    argv[a++] = opt.mpi_shm && !opt.wan ? "vader,self" : "tcp,self";
    argv[a++] = "--mca";
    argv[a++] = "btl_tcp_if_include";
    argv[a++] = opt.wan ? "eth0" : "lo";
    argv[a++] = "--mca";
    argv[a++] = "oob_tcp_if_include";
    argv[a++] = opt.wan ? "br0" : "lo";
    argv[a++] = "-np";
    argv[a++] = np;
#ifdef MOSHPIT_BENCH_WAN
    /* On the emulated network mpirun runs in the switch's namespace and
     * serves its ranks' rendezvous (PMIx over TCP) on the bridge's own
     * address; each rank enters its namespace through us. */
    char self[PATH_MAX], prefix[PATH_MAX];
    if (opt.wan) {
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len <= 0 || nn_switch_host() == NULL ||
            nn_peer_ns_prefix(prefix, sizeof(prefix)) != 0) {
            set_failed(res, "cannot prepare mpirun on the emulated network");
            return;
        }
        self[len] = '\0';
        argv[a++] = self;
        argv[a++] = "--netns-exec";
        argv[a++] = prefix;
        setenv("PMIX_MCA_ptl_tcp_remote_connections", "1", 1);
        setenv("PMIX_MCA_ptl_tcp_if_include", "br0", 1);
    }
#endif
    argv[a++] = (char *)child_path(SYS_MPI);
    a += common_args(argv + a, buf, out);
    argv[a] = NULL;
#ifdef MOSHPIT_BENCH_WAN
    if (opt.wan) {
        if (nn_enter_switch() != 0) {
            set_failed(res, "cannot enter the switch's namespace");
            return;
        }
        pid = proc_spawn(argv, NULL, 0, 1);
        if (nn_enter((size_t)-1) != 0) {
            fprintf(stderr, "moshpit-bench: cannot return to the host's "
                            "network namespace\n");
            exit(1);
        }
    } else {
        pid = proc_spawn(argv, NULL, 0, 1);
    }
#else
    pid = proc_spawn(argv, NULL, 0, 1);
#endif
    (void)proc_wait_all(&pid, 1, budget_deadline(), status);
    /* mpirun's one status says little about which rank failed. */
    collect(SYS_MPI, NULL, res);
    if (res->status == ST_FAILED && status[0] != 0) {
        size_t len = strlen(res->why);
        snprintf(res->why + len, sizeof(res->why) - len,
                 "; mpirun exit status %d%s", status[0],
                 status[0] < 0 ? " (killed)" : "");
    }
#else
    res->status = ST_SKIPPED;
    snprintf(res->why, sizeof(res->why), "mpirun not found at build time");
#endif
}

/* Reads lines from child i until one starts with want (skipping others).
 * On an "error ..." line or EOF/deadline, describes it in why. */
static int expect_line(proc_line_reader_t *lr, int i, const char *want,
                       char *line, size_t cap, double deadline, char *why,
                       size_t whylen) {
    for (;;) {
        if (proc_read_line(lr, line, cap, deadline) != 0) {
            snprintf(why, whylen, "rank %d: %s while waiting for \"%s\"", i,
                     lr->eof ? "exited" : "timed out", want);
            return -1;
        }
        if (strncmp(line, "error", 5) == 0) {
            snprintf(why, whylen, "rank %d: %s", i, line);
            return -1;
        }
        if (strncmp(line, want, strlen(want)) == 0) {
            return 0;
        }
    }
}

static void send_all(const int *fds, int n, char c) {
    for (int i = 0; i < n; i++) {
        /* A failed write means that child is gone; its closed report
         * pipe and exit status tell the story. */
        if (fds[i] >= 0 && write(fds[i], &c, 1) != 1) {
            continue;
        }
    }
}

static void run_moshpit(sys_result_t *res) {
    int n = opt.peers, status[MAX_PEERS], ctl[MAX_PEERS];
    pid_t pids[MAX_PEERS];
    proc_line_reader_t *lr = calloc((size_t)n, sizeof(*lr));
    char endpoint[1024] = "", line[1024], why[512] = "";
    int ok = 1;

    if (lr == NULL) {
        set_failed(res, "out of memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        pids[i] = 0;
        ctl[i] = -1;
        lr[i].fd = -1;
    }
    for (int i = 0; i < n && ok; i++) {
        char out[PATH_MAX + 32], rank[16], rfd[16], cfd[16], buf[5][64];
        char *argv[40];
        int rep[2], con[2], keep[2], a = 0;
        double deadline;

        if (pipe(rep) != 0 || pipe(con) != 0) {
            snprintf(why, sizeof(why), "pipe: %s", strerror(errno));
            ok = 0;
            break;
        }
        proc_set_cloexec(rep[0]);
        proc_set_cloexec(rep[1]);
        proc_set_cloexec(con[0]);
        proc_set_cloexec(con[1]);
        snprintf(out, sizeof(out), "%s/moshpit-rank-%d", tmpdir, i);
        snprintf(rank, sizeof(rank), "%d", i);
        snprintf(rfd, sizeof(rfd), "%d", rep[1]);
        snprintf(cfd, sizeof(cfd), "%d", con[0]);
        argv[a++] = (char *)child_path(SYS_MOSHPIT);
        a += common_args(argv + a, buf, out);
        argv[a++] = "--rank";
        argv[a++] = rank;
        argv[a++] = "--report-fd";
        argv[a++] = rfd;
        argv[a++] = "--control-fd";
        argv[a++] = cfd;
        argv[a++] = "--addr";
        argv[a++] = (char *)rank_addr(i);
        if (i > 0) {
            argv[a++] = "--bootstrap";
            argv[a++] = endpoint;
        }
        char comp[16];
        snprintf(comp, sizeof comp, "%d", opt.compression);
        argv[a++] = "--compression";
        argv[a++] = comp;
        char streams[16];
        snprintf(streams, sizeof streams, "%d", opt.data_streams);
        argv[a++] = "--data-streams";
        argv[a++] = streams;
        argv[a++] = "--shared-memory";
        argv[a++] = opt.shm_off ? "1" : "0";
        if (opt.moshpit_cc != NULL) {
            argv[a++] = "--congestion";
            argv[a++] = (char *)opt.moshpit_cc;
        }
        argv[a] = NULL;
        keep[0] = rep[1];
        keep[1] = con[0];
        pids[i] = spawn_rank(i, argv, keep, 2);
        close(rep[1]);
        close(con[0]);
        lr[i].fd = rep[0];
        ctl[i] = con[1];
        if (pids[i] < 0) {
            snprintf(why, sizeof(why), "fork: %s", strerror(errno));
            ok = 0;
            break;
        }
        if (i == 0) {
            /* Everybody else bootstraps from rank 0's endpoint. */
            deadline = proc_now() + 60.0;
            if (expect_line(&lr[0], 0, "endpoint ", line, sizeof(line),
                            deadline, why, sizeof(why)) != 0) {
                ok = 0;
                break;
            }
            snprintf(endpoint, sizeof(endpoint), "%s", line + 9);
        }
    }
    /* Start timing only once every peer sees the whole swarm. */
    if (ok) {
        double deadline =
            proc_now() + (opt.timeout_s < 180.0 ? opt.timeout_s : 180.0);
        for (int i = 0; i < n && ok; i++) {
            ok = expect_line(&lr[i], i, "ready", line, sizeof(line), deadline,
                             why, sizeof(why)) == 0;
        }
    }
    if (ok) {
        double deadline = budget_deadline();
        send_all(ctl, n, 'g');
        for (int i = 0; i < n; i++) {
            /* Keep reading the others even if one failed, so they can all
             * write their results before being told to quit. */
            char later[512];
            if (expect_line(&lr[i], i, "done", line, sizeof(line), deadline,
                            later, sizeof(later)) != 0) {
                if (ok) {
                    snprintf(why, sizeof(why), "%s", later);
                }
                ok = 0;
            }
        }
    }
    send_all(ctl, n, 'q');
    for (int i = 0; i < n; i++) {
        if (ctl[i] >= 0) {
            close(ctl[i]);
        }
        if (lr[i].fd >= 0) {
            close(lr[i].fd);
        }
    }
    free(lr);
    (void)proc_wait_all(pids, n, proc_now() + 60.0, status);
    collect(SYS_MOSHPIT, status, res);
    if (!ok && res->status == ST_OK) {
        res->status = ST_FAILED;
    }
    if (!ok && why[0] != '\0') {
        /* Say why the handshake broke off, unless a rank reported a wrong
         * result: that is the louder news. */
        if (strncmp(res->why, "VERIFICATION", 12) != 0) {
            snprintf(res->why, sizeof(res->why), "%s", why);
        }
    }
}

/* ---- output ---- */

static double gbps(double s) {
    return s > 0 ? (double)opt.bytes / s / 1e9 : 0;
}

static int selected(int sys) {
    return opt.only < 0 || (opt.only & (1 << sys)) != 0;
}

static void print_json_array(const double *v, int n) {
    printf("[");
    for (int k = 0; k < n; k++) {
        printf("%s%.6f", k ? ", " : "", v[k]);
    }
    printf("]");
}

static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static void print_ratio_text(const sys_result_t *r, int other) {
    const sys_result_t *m = &r[SYS_MOSHPIT], *o = &r[other];
    if (!selected(SYS_MOSHPIT) || !selected(other)) {
        return;
    }
    if (m->status == ST_OK && o->status == ST_OK && o->median_s > 0) {
        printf("moshpit/%s = %.2f\n", sys_names[other],
               m->median_s / o->median_s);
    } else {
        printf("moshpit/%s = n/a\n", sys_names[other]);
    }
}

/* The time the bytes a ring all-reduce moves take at the link rate: each
 * rank sends and receives 2(N-1)/N times the buffer. */
static double bound_s(void) {
    if (opt.rate_mbit == 0) {
        return 0;
    }
    return 2.0 * (opt.peers - 1) / opt.peers * (double)opt.bytes * 8.0 /
           (opt.rate_mbit * 1e6);
}

static void print_text(const sys_result_t *r) {
    printf("%-8s %5s %9s %10s %8s\n", "system", "peers", "size MiB", "s/round",
           "GB/s");
    for (int s = 0; s < SYS_COUNT; s++) {
        if (!selected(s)) {
            continue;
        }
        if (r[s].status == ST_OK) {
            printf("%-8s %5d %9.2f %10.4f %8.3f", sys_names[s], opt.peers,
                   (double)opt.bytes / MIB, r[s].median_s, gbps(r[s].median_s));
            if (s == SYS_MOSHPIT) {
                printf("   (allreduce_ms; whole call %.4f s/round, %.3f "
                       "GB/s; compression %s)",
                       r[s].median_call_s, gbps(r[s].median_call_s),
                       compress_names[opt.compression]);
            }
            printf("\n");
        } else {
            printf("%-8s %5d %9.2f %10s %8s   (%s: %s)\n", sys_names[s],
                   opt.peers, (double)opt.bytes / MIB, "-", "-",
                   r[s].status == ST_SKIPPED ? "skipped" : "FAILED", r[s].why);
        }
    }
    print_ratio_text(r, SYS_GLOO);
    print_ratio_text(r, SYS_MPI);
    if (opt.wan && opt.rate_mbit > 0) {
        printf("line-rate bound = %.4f s (2(N-1)/N x size each way at %u "
               "Mbit/s)\n",
               bound_s(), opt.rate_mbit);
        for (int s = 0; s < SYS_COUNT; s++) {
            if (selected(s) && r[s].status == ST_OK) {
                printf("%s: %.2f x bound; link %.2f MiB/round (busiest rank, "
                       "one way, headers and setup included: %.4f s at the "
                       "rate)\n",
                       sys_names[s], r[s].median_s / bound_s(),
                       r[s].link_bytes / MIB,
                       r[s].link_bytes * 8.0 / (opt.rate_mbit * 1e6));
            }
        }
    }
}

static void print_json(const sys_result_t *r) {
    int first = 1;
    printf("{\n  \"peers\": %d,\n  \"size_bytes\": %zu,\n  \"size_mib\": "
           "%.4f,\n  \"rounds\": %d,\n  \"warmup\": %d,\n  \"seed\": %llu,\n"
           "  \"compression\": \"%s\",\n  \"moshpit_cc\": \"%s\",\n"
           "  \"data_streams\": %d,\n  \"shared_memory\": %d,\n"
           "  \"mpi_btl\": \"%s\",\n",
           opt.peers, opt.bytes, (double)opt.bytes / MIB, opt.rounds,
           opt.warmup, (unsigned long long)opt.seed,
           compress_names[opt.compression],
           opt.moshpit_cc != NULL ? opt.moshpit_cc : "", opt.data_streams,
           opt.shm_off ? 1 : 0,
           opt.mpi_shm && !opt.wan ? "vader,self" : "tcp,self");
    if (opt.wan) {
        printf("  \"network\": {\"delay_ms\": %.3f, \"rtt_ms\": %.3f, "
               "\"jitter_ms\": %.3f, \"rate_mbit\": %u, \"loss_pct\": %.2f, "
               "\"cc\": \"%s\", \"bound_s\": %.6f},\n",
               opt.delay_ms, 2 * opt.delay_ms, opt.jitter_ms, opt.rate_mbit,
               opt.loss_pct, opt.cc != NULL ? opt.cc : "default", bound_s());
    }
    printf("  \"systems\": [");
    for (int s = 0; s < SYS_COUNT; s++) {
        if (!selected(s)) {
            continue;
        }
        printf("%s\n    {\"system\": \"%s\", \"status\": \"%s\"",
               first ? "" : ",", sys_names[s],
               r[s].status == ST_OK        ? "ok"
               : r[s].status == ST_SKIPPED ? "skipped"
                                           : "failed");
        first = 0;
        if (r[s].status == ST_OK) {
            printf(", \"s_per_round\": %.6f, \"gb_per_s\": %.4f", r[s].median_s,
                   gbps(r[s].median_s));
            printf(", \"call_s_per_round\": %.6f, \"rounds_s\": ",
                   r[s].median_call_s);
            print_json_array(r[s].round_s, opt.rounds);
            printf(", \"rounds_call_s\": ");
            print_json_array(r[s].call_s, opt.rounds);
            if (opt.wan) {
                printf(", \"link_bytes_per_round\": %.0f", r[s].link_bytes);
            }
        } else {
            printf(", \"reason\": ");
            print_json_string(r[s].why);
        }
        printf("}");
    }
    printf("\n  ],\n  \"ratios\": {");
    first = 1;
    for (int s = SYS_GLOO; s < SYS_COUNT; s++) {
        if (!selected(SYS_MOSHPIT) || !selected(s)) {
            continue;
        }
        printf("%s\"moshpit/%s\": ", first ? "" : ", ", sys_names[s]);
        first = 0;
        if (r[SYS_MOSHPIT].status == ST_OK && r[s].status == ST_OK &&
            r[s].median_s > 0) {
            printf("%.4f", r[SYS_MOSHPIT].median_s / r[s].median_s);
        } else {
            printf("null");
        }
    }
    printf("}\n}\n");
}

/* ---- main ---- */

static void usage(FILE *f) {
    fprintf(f, "usage: moshpit-bench --peers N --size BYTES [--rounds R] "
               "[--warmup W]\n"
               "                     [--only moshpit|gloo|mpi[,...]] [--json] "
               "[--seed S]\n"
               "                     [--timeout SECONDS] [--keep-tmp] "
               "[--corrupt]\n"
               "                     [--compression "
               "none|fp16|bf16|int8|int4]\n"
               "                     [--delay-ms D] [--jitter-ms J] "
               "[--rate-mbit R] [--loss-pct P]\n"
               "                     [--cc ALGO] [--offload] "
               "[--moshpit-cc ALGO|default] [--data-streams N]\n"
               "                     [--moshpit-shm auto|off] [--mpi-shm]\n"
               "  Times an all-reduce of BYTES (suffix k, M or G = KiB, MiB, "
               "GiB) of floats\n"
               "  among N local processes on loopback with moshpit, Gloo "
               "(ring-chunked, TCP)\n"
               "  and Open MPI (MPI_Allreduce, btl tcp); R timed rounds "
               "(default 5) after W\n"
               "  warmup rounds (default 1); prints the median over rounds of "
               "the slowest\n"
               "  rank's time and moshpit's time divided by each other "
               "system's.\n"
               "  The --delay-ms ... options run every rank in a network "
               "namespace of its own\n"
               "  behind an emulated access link (tests/netns, needs root): "
               "one-way delay D ms\n"
               "  into each rank (RTT 2D), +-J ms jitter, R Mbit/s each way, "
               "P%% random loss,\n"
               "  TCP congestion control ALGO. --moshpit-shm off seals every "
               "moshpit part\n"
               "  over TCP (config shared_memory; auto: parts to mates on "
               "this host go\n"
               "  through shared memory); --mpi-shm gives Open MPI its "
               "shared memory\n"
               "  transport (btl vader) on loopback.\n");
}

static int parse_size(const char *s, size_t *out) {
    char *end;
    unsigned long long v;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s) {
        return -1;
    }
    switch (tolower((unsigned char)*end)) {
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (strcmp(end, "") != 0 && strcmp(end, "i") != 0 &&
        strcmp(end, "iB") != 0 && strcmp(end, "B") != 0) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, double lo, double hi, double *out) {
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv) {
    int timeout = 0;
    opt.rounds = 5;
    opt.warmup = 1;
    opt.only = -1;
    opt.seed = 0x6d6f736870697400ULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(k, "--json") == 0) {
            opt.json = 1;
            continue;
        }
        if (strcmp(k, "--keep-tmp") == 0) {
            opt.keep_tmp = 1;
            continue;
        }
        if (strcmp(k, "--corrupt") == 0) {
            opt.corrupt = 1;
            continue;
        }
        if (strcmp(k, "--offload") == 0) {
            opt.offload = 1;
            continue;
        }
        if (strcmp(k, "--mpi-shm") == 0) {
            opt.mpi_shm = 1;
            continue;
        }
        if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (v == NULL) {
            fprintf(stderr, "moshpit-bench: %s needs a value\n", k);
            return -1;
        }
        i++;
        if (strcmp(k, "--peers") == 0) {
            bad = parse_int(v, 2, MAX_PEERS, &opt.peers);
        } else if (strcmp(k, "--size") == 0) {
            bad = parse_size(v, &opt.bytes);
        } else if (strcmp(k, "--rounds") == 0) {
            bad = parse_int(v, 1, 100000, &opt.rounds);
        } else if (strcmp(k, "--warmup") == 0) {
            bad = parse_int(v, 0, 100000, &opt.warmup);
        } else if (strcmp(k, "--timeout") == 0) {
            bad = parse_int(v, 1, INT_MAX, &timeout);
        } else if (strcmp(k, "--seed") == 0) {
            char *end;
            opt.seed = strtoull(v, &end, 0);
            bad = *end != '\0';
        } else if (strcmp(k, "--compression") == 0) {
            bad = -1;
            for (int c = 0; c < 5; c++) {
                if (strcmp(v, compress_names[c]) == 0) {
                    opt.compression = c;
                    bad = 0;
                }
            }
        } else if (strcmp(k, "--delay-ms") == 0) {
            bad = parse_real(v, 0, 5000, &opt.delay_ms);
            opt.wan = 1;
        } else if (strcmp(k, "--jitter-ms") == 0) {
            bad = parse_real(v, 0, 5000, &opt.jitter_ms);
            opt.wan = 1;
        } else if (strcmp(k, "--loss-pct") == 0) {
            bad = parse_real(v, 0, 100, &opt.loss_pct);
            opt.wan = 1;
        } else if (strcmp(k, "--rate-mbit") == 0) {
            int r = 0;
            bad = parse_int(v, 1, 100000, &r);
            opt.rate_mbit = (unsigned)r;
            opt.wan = 1;
        } else if (strcmp(k, "--moshpit-cc") == 0) {
            opt.moshpit_cc = v;
            bad = strlen(v) > 15;
        } else if (strcmp(k, "--data-streams") == 0) {
            bad = parse_int(v, 0, 16, &opt.data_streams);
        } else if (strcmp(k, "--moshpit-shm") == 0) {
            opt.shm_off = strcmp(v, "off") == 0;
            bad = !opt.shm_off && strcmp(v, "auto") != 0;
        } else if (strcmp(k, "--cc") == 0) {
            opt.cc = v;
            bad = strlen(v) == 0 || strlen(v) > 15;
            opt.wan = 1;
        } else if (strcmp(k, "--only") == 0) {
            /* one system, or several separated by commas */
            const char *q = v;
            opt.only = 0;
            bad = 0;
            while (!bad && *q != '\0') {
                size_t len = strcspn(q, ",");
                bad = -1;
                for (int s = 0; s < SYS_COUNT; s++) {
                    if (strlen(sys_names[s]) == len &&
                        strncmp(q, sys_names[s], len) == 0) {
                        opt.only |= 1 << s;
                        bad = 0;
                    }
                }
                q += len;
                if (*q == ',')
                    q++;
            }
            if (opt.only == 0)
                bad = -1;
        } else {
            fprintf(stderr, "moshpit-bench: unknown option %s\n", k);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "moshpit-bench: bad value for %s: %s\n", k, v);
            return -1;
        }
    }
    if (opt.jitter_ms > opt.delay_ms) {
        fprintf(stderr, "moshpit-bench: --jitter-ms must not exceed "
                        "--delay-ms\n");
        return -1;
    }
    if (opt.peers > 32 && opt.wan) {
        fprintf(stderr, "moshpit-bench: at most 32 peers on the emulated "
                        "network\n");
        return -1;
    }
    if (opt.peers == 0 || opt.bytes == 0) {
        fprintf(stderr, "moshpit-bench: --peers and --size are required\n");
        return -1;
    }
    if (opt.bytes % 4 != 0 || opt.bytes / 4 > (size_t)INT_MAX) {
        fprintf(stderr, "moshpit-bench: --size must be a multiple of 4 "
                        "bytes and at most 8 GiB\n");
        return -1;
    }
    /* Each moshpit round may take up to round_timeout_ms (120 s). */
    opt.timeout_s = timeout > 0 ? (double)timeout
                                : 120.0 + 130.0 * (opt.warmup + opt.rounds);
    return 0;
}

/* mpirun starts each MPI rank as `moshpit-bench --netns-exec PREFIX
 * CHILD ARGS...`: it enters the namespace of its rank
 * (OMPI_COMM_WORLD_RANK) and becomes the MPI child there. */
static int netns_exec(int argc, char **argv) {
#ifdef MOSHPIT_BENCH_WAN
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (argc >= 4) {
        nn_exec_in(argv[2], rank != NULL ? rank : "", argv + 3);
    }
    fprintf(stderr, "moshpit-bench --netns-exec: cannot run %s in %s%s: %s\n",
            argc >= 4 ? argv[3] : "(nothing)", argc >= 3 ? argv[2] : "",
            rank != NULL ? rank : "?", strerror(errno));
#else
    (void)argc;
    (void)argv;
#endif
    return 127;
}

int main(int argc, char **argv) {
    sys_result_t res[SYS_COUNT];
    const char *tmp = getenv("TMPDIR");
    int failed = 0;

    if (argc >= 2 && strcmp(argv[1], "--netns-exec") == 0) {
        return netns_exec(argc, argv);
    }
    if (parse_options(argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a dead child's pipe must not kill us */
    snprintf(tmpdir, sizeof(tmpdir), "%s/moshpit-bench-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        fprintf(stderr, "moshpit-bench: mkdtemp %s: %s\n", tmpdir,
                strerror(errno));
        return 1;
    }
    memset(res, 0, sizeof(res));
    if (opt.wan) {
#ifdef MOSHPIT_BENCH_WAN
        wan_open();
        fprintf(stderr,
                "moshpit-bench: emulated network: %d namespaces, one-way "
                "delay %.1f ms (+-%.1f), %u Mbit/s, %.1f%% loss, cc %s\n",
                opt.peers, opt.delay_ms, opt.jitter_ms, opt.rate_mbit,
                opt.loss_pct, opt.cc != NULL ? opt.cc : "(default)");
#else
        fprintf(stderr, "moshpit-bench: built without the emulated network "
                        "(tests/netns)\n");
        return 2;
#endif
    }
    for (int s = 0; s < SYS_COUNT; s++) {
        if (!selected(s)) {
            continue;
        }
        if (child_path(s) == NULL) {
            res[s].status = ST_SKIPPED;
            snprintf(res[s].why, sizeof(res[s].why),
                     "%s was not found at build time",
                     s == SYS_GLOO  ? "Gloo"
                     : s == SYS_MPI ? "MPI"
                                    : "moshpit");
            continue;
        }
        if (access(child_path(s), X_OK) != 0) {
            res[s].status = ST_FAILED;
            snprintf(res[s].why, sizeof(res[s].why),
                     "child program %s is missing (not built?)", child_path(s));
            failed = 1;
            continue;
        }
        fprintf(stderr,
                "moshpit-bench: %s: %d peers, %.2f MiB, %d warmup + "
                "%d timed rounds\n",
                sys_names[s], opt.peers, (double)opt.bytes / MIB, opt.warmup,
                opt.rounds);
        double before[MAX_PEERS], after[MAX_PEERS];
        link_counters(before);
        if (s == SYS_MOSHPIT) {
            run_moshpit(&res[s]);
        } else if (s == SYS_GLOO) {
            run_gloo(&res[s]);
        } else {
            run_mpi(&res[s]);
        }
        link_counters(after);
        for (int i = 0; i < opt.peers; i++) {
            double per = (after[i] - before[i]) / (opt.warmup + opt.rounds);
            if (per > res[s].link_bytes) {
                res[s].link_bytes = per;
            }
        }
        if (res[s].status == ST_FAILED) {
            failed = 1;
            fprintf(stderr, "moshpit-bench: *** %s FAILED: %s ***\n",
                    sys_names[s], res[s].why);
        }
    }
    if (opt.json) {
        print_json(res);
    } else {
        print_text(res);
    }
    for (int s = 0; s < SYS_COUNT; s++) {
        free(res[s].round_s);
        free(res[s].call_s);
    }
    if (opt.keep_tmp) {
        fprintf(stderr, "moshpit-bench: kept %s\n", tmpdir);
    } else {
        proc_rm_tree(tmpdir);
    }
    return failed ? 1 : 0;
}
