/* SPDX-License-Identifier: MIT */
/*
 * bench_moshpit_child.c - one peer of the moshpit side of moshpit-bench.
 * It opens a peer of swarm "bench" on 127.0.0.1 with group_size and
 * min_group_size equal to --peers (so every round is one all-reduce among
 * all of them), rank 0 first and reporting its endpoint, the others
 * bootstrapping from it. It talks to the driver over two pipes: it reports
 * "endpoint ..." (rank 0), "ready" once moshpit_members() shows the whole
 * swarm and "done" at the end, and waits for a "g" (go) and a "q" (quit)
 * byte, so that timing starts only when everybody is connected and nobody
 * leaves while others still average. Then it runs --warmup + --rounds
 * moshpit_average() calls with weight 1 on deterministic random floats,
 * restoring the input before each (outside the timing), records the call's
 * wall time and the round's allreduce_ms, and checks the last round's
 * output against the mean recomputed from the known seeds.
 */
#include <poll.h>
#include <unistd.h>

#include <moshpit.h>

#include "bench_common.h"

static int g_rank;

static void on_log(void *user, int level, const char *msg) {
    (void)user;
    fprintf(stderr, "moshpit rank %d [%d]: %s\n", g_rank, level, msg);
}

static int report(int fd, const char *line) {
    size_t len = strlen(line), off = 0;
    while (off < len) {
        ssize_t n = write(fd, line + off, len - off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        off += (size_t)n;
    }
    return 0;
}

/* Blocks until the driver sends the byte `want`; -1 if the pipe closed. */
static int await(int fd, char want) {
    char c;
    for (;;) {
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        if (c == want) {
            return 0;
        }
    }
}

/* Sleeps up to ms, returning -1 early if the driver closed the control
 * pipe or sent "q" (it gave up on the start), 0 otherwise. */
static int nap_or_quit(int control_fd, int ms) {
    struct pollfd p;
    p.fd = control_fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, ms) > 0) {
        char c;
        ssize_t n = read(control_fd, &c, 1);
        if (n <= 0 || c == 'q') {
            return -1;
        }
    }
    return 0;
}

static int fail(const bench_args_t *a, const char *what, moshpit_err_t e) {
    char line[256];
    fprintf(stderr, "moshpit rank %d: %s: %s\n", a->rank, what,
            moshpit_strerror(e));
    snprintf(line, sizeof(line), "error %s: %s\n", what, moshpit_strerror(e));
    (void)report(a->report_fd, line);
    return BENCH_EXIT_ERROR;
}

/* How far a lossy wire encoding may move the mean of inputs in [-1, 1)
 * in one round: half a step for the parts sent, half a step for the
 * reducer's result (docs/AGGREGATION.md, "Compression"). */
static double lossy_tol(const bench_args_t *a) {
    static const double step[] = {0, 0x1p-10, 0x1p-7, 1.0 / 127, 1.0 / 7};
    int c = a->compression;
    return c >= 1 && c <= 4 ? step[c] * 1.001 : 0.0;
}

static int run(const bench_args_t *a, moshpit_t *mp) {
    size_t count = a->bytes / sizeof(float);
    float *input = malloc(count * sizeof(float));
    float *buf = malloc(count * sizeof(float));
    bench_round_t *rs = calloc((size_t)a->rounds, sizeof(*rs));
    char msg[256];
    const char *verdict = NULL;
    int i, rc = BENCH_EXIT_OK;

    if (input == NULL || buf == NULL || rs == NULL) {
        rc = fail(a, "allocating buffers", MOSHPIT_ENOMEM);
        goto out;
    }
    bench_fill(input, count, a, a->rank);

    for (i = 0; i < a->warmup + a->rounds; i++) {
        moshpit_round_t info;
        moshpit_err_t e;
        double t0, t1;
        memcpy(buf, input, count * sizeof(float));
        memset(&info, 0, sizeof(info));
        t0 = bench_now();
        e = moshpit_average(mp, buf, count, 1.0, &info);
        t1 = bench_now();
        if (e != MOSHPIT_OK) {
            rc = fail(a, "moshpit_average", e);
            goto out;
        }
        if (i >= a->warmup) {
            bench_round_t *r = &rs[i - a->warmup];
            r->call_s = t1 - t0;
            r->allreduce_s = (double)info.allreduce_ms / 1000.0;
            r->round_id = info.round_id;
            r->group = info.group_size;
            r->fraction = info.fraction_averaged;
        }
    }

    /* The result is only meaningful if the last round averaged everybody
     * completely; then it must be the plain mean of all inputs. */
    if (rs[a->rounds - 1].group != (unsigned)a->peers ||
        rs[a->rounds - 1].fraction < 1.0) {
        snprintf(msg, sizeof(msg),
                 "last round averaged %u of %d peers, fraction %.4f",
                 rs[a->rounds - 1].group, a->peers, rs[a->rounds - 1].fraction);
        verdict = msg;
    } else if (bench_verify_tol(buf, count, a->seed, a->peers,
                                1.0 / (double)a->peers, lossy_tol(a), msg,
                                sizeof(msg)) != 0) {
        verdict = msg;
    }
    if (verdict != NULL) {
        fprintf(stderr, "moshpit rank %d: VERIFICATION FAILED: %s\n", a->rank,
                verdict);
        rc = BENCH_EXIT_VERIFY;
    }
    if (bench_write_result(a->out, a->rank, rs, a->rounds, verdict) != 0) {
        rc = BENCH_EXIT_ERROR;
    }
out:
    free(rs);
    free(buf);
    free(input);
    return rc;
}

int main(int argc, char **argv) {
    bench_args_t a;
    moshpit_config_t cfg;
    moshpit_t *mp = NULL;
    moshpit_err_t e;
    const char *boot[2] = {NULL, NULL};
    const char *lvl = getenv("MOSHPIT_BENCH_LOG");
    char line[512], ep[256], listen[96];
    double deadline;
    size_t members = 0;
    int rc;

    if (bench_parse_args(argc, argv, &a) != 0 || a.rank < 0 ||
        a.rank >= a.peers || a.report_fd < 0 || a.control_fd < 0 ||
        (a.rank > 0 && a.bootstrap == NULL)) {
        return BENCH_EXIT_ERROR;
    }
    g_rank = a.rank;

    moshpit_config_init(&cfg);
    cfg.swarm = "bench";
    snprintf(listen, sizeof(listen), "tcp://%s:0", a.addr);
    cfg.listen = listen;
    cfg.group_size = (uint32_t)a.peers;
    cfg.min_group_size = (uint32_t)a.peers;
    cfg.matchmaking_ms = 10000;
    cfg.round_timeout_ms = 120000;
    cfg.compression = (uint32_t)a.compression;
    cfg.data_streams = (uint32_t)a.data_streams;
    cfg.shared_memory = (uint32_t)a.shared_memory;
    cfg.congestion = a.congestion;
    cfg.log = on_log;
    cfg.log_level = lvl != NULL ? atoi(lvl) : MOSHPIT_LOG_WARN;
    if (a.rank > 0) {
        boot[0] = a.bootstrap;
        cfg.bootstrap = boot;
    }
    e = moshpit_open(&cfg, &mp);
    if (e != MOSHPIT_OK) {
        return fail(&a, "moshpit_open", e);
    }
    if (a.rank == 0) {
        e = moshpit_endpoint(mp, ep, sizeof(ep));
        if (e != MOSHPIT_OK) {
            rc = fail(&a, "moshpit_endpoint", e);
            moshpit_close(mp);
            return rc;
        }
        snprintf(line, sizeof(line), "endpoint %s\n", ep);
        (void)report(a.report_fd, line);
    }

    /* A benchmark may poll: wait until this peer knows the whole swarm. */
    deadline = bench_now() + 120.0;
    while ((members = moshpit_members(mp)) < (size_t)a.peers &&
           bench_now() < deadline) {
        if (nap_or_quit(a.control_fd, 10) != 0) {
            moshpit_close(mp);
            return BENCH_EXIT_ERROR;
        }
    }
    if (members < (size_t)a.peers) {
        snprintf(line, sizeof(line),
                 "error only %zu of %d members after "
                 "120 s\n",
                 members, a.peers);
        (void)report(a.report_fd, line);
        moshpit_close(mp);
        return BENCH_EXIT_ERROR;
    }
    snprintf(line, sizeof(line), "ready %zu\n", members);
    if (report(a.report_fd, line) != 0 || await(a.control_fd, 'g') != 0) {
        moshpit_close(mp);
        return BENCH_EXIT_ERROR;
    }

    rc = run(&a, mp);

    /* Leave only once everybody is done, so nobody's last round loses a
     * peer. */
    (void)report(a.report_fd, rc == BENCH_EXIT_OK ? "done\n" : "done fail\n");
    (void)await(a.control_fd, 'q');
    moshpit_close(mp);
    return rc;
}
