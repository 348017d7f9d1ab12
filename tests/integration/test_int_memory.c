/* SPDX-License-Identifier: MIT */
/*
 * test_int_memory.c - the budget of a small board, in real peer processes
 * on loopback: how much memory a peer holds at rest and at its peak during
 * rounds, read by each peer from its own /proc/self/status (VmRSS, and
 * VmHWM after resetting it through /proc/self/clear_refs), and how much CPU
 * it spends idling in a formed swarm (getrusage). The bounds
 * (docs/DESIGN.md, "What a peer needs"):
 *   at rest         VmRSS <= 16 MiB
 *   during rounds   VmHWM <= 2 x the vector + 16 MiB (the vector is the
 *                   caller's own buffer, counted in)
 *   idle            at most 1.2 CPU seconds per minute per peer (2% of a
 *                   core; measured: about 0.25%)
 * and every peer must end each round with the exact mean. Without
 * arguments it runs the ctest cases: 2 and 8 peers with 32 MiB vectors
 * (the mean keeps 2 x vector / members for its own share in doubles, the
 * most with 2 members; 8 members send a peer the most frames at once),
 * and the idle CPU of the 8 peers. With --peers N
 * --mib V [--rounds R] [--idle S] it runs one case and
 * prints its figures (docs/RESULTS.md has the table). Under a sanitizer
 * (shadow memory, quarantine) the figures mean nothing: the test then
 * exits 77 (skipped), saying so.
 */
#include <errno.h>
#include <moshpit.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MP_SANITIZED 1
#endif
#endif

#define MAX_PEERS 16
#define MIB ((size_t)1 << 20)
#define REST_MAX (16 * MIB)
#define IDLE_CPU_PER_MIN 1.2

typedef struct mem_case {
    int peers, rounds, idle_s;
    size_t mib; /* vector size in MiB */
} mem_case_t;

/* What a peer reports; type 1: endpoint, 2: ready, 3: idle, 4: done,
 * 5: failed. */
typedef struct rep {
    int32_t type, err;
    char text[160];
    double idle_cpu_s, idle_wall_s;
    size_t rest_rss, base_rss, hwm, after_rss;
    int32_t rounds_ok;
    double worst_dev;
} rep_t;

static int failures;
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A "Vm...:" line of /proc/self/status in bytes, 0 if absent. */
static size_t status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t klen = strlen(key), kib = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kib = (size_t)strtoull(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kib * 1024;
}

/* Resets VmHWM to the current VmRSS (Linux 4.0 and later). */
static int reset_hwm(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f == NULL)
        return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static int put(int fd, const rep_t *r) {
    return write(fd, r, sizeof *r) == (ssize_t)sizeof *r ? 0 : -1;
}

/* Reads one report within timeout_ms; 0 or -1. */
static int get(int fd, rep_t *r, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return -1;
    return read(fd, r, sizeof *r) == (ssize_t)sizeof *r ? 0 : -1;
}

/* Blocks until the parent writes a byte; -1 when it closed the pipe. */
static int wait_go(int fd) {
    char c;
    return read(fd, &c, 1) == 1 ? 0 : -1;
}

/* Peer i's value at element k (weight 1 for all): the mean of n peers is
 * (n - 1) / 2 + (k % 7), exact in float. */
static float value_of(int i, size_t k) {
    return (float)i + (float)(k % 7);
}

static int child(const mem_case_t *c, int i, const char *boot, int go_fd,
                 int rep_fd) {
    rep_t r;
    memset(&r, 0, sizeof r);
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    cfg.swarm = "it-memory";
    cfg.listen = "tcp://127.0.0.1:0";
    const char *bootv[2] = {boot, NULL};
    cfg.bootstrap = boot != NULL ? bootv : NULL;
    cfg.group_size = (uint32_t)c->peers;
    cfg.min_group_size = (uint32_t)c->peers;
    cfg.matchmaking_ms = 20000; /* a full group starts at its last JOIN */
    cfg.round_timeout_ms = 60000;
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&cfg, &mp);
    if (e == MOSHPIT_OK)
        e = moshpit_endpoint(mp, r.text, sizeof r.text);
    r.type = e == MOSHPIT_OK ? 1 : 5;
    r.err = (int32_t)e;
    if (put(rep_fd, &r) != 0 || e != MOSHPIT_OK)
        goto out;
    e = moshpit_wait_members(mp, (size_t)c->peers, 60000);
    r.type = e == MOSHPIT_OK ? 2 : 5;
    r.err = (int32_t)e;
    if (put(rep_fd, &r) != 0 || e != MOSHPIT_OK || wait_go(go_fd) != 0)
        goto out;

    /* idle: everyone formed, nobody averaging */
    double c0 = cpu_s(), t0 = now_s();
    if (c->idle_s > 0)
        sleep((unsigned)c->idle_s);
    r.idle_cpu_s = cpu_s() - c0;
    r.idle_wall_s = now_s() - t0;
    r.rest_rss = status_bytes("VmRSS");
    r.type = 3;
    if (put(rep_fd, &r) != 0 || wait_go(go_fd) != 0)
        goto out;

    /* rounds: the vector is the caller's; the peak is what the library
     * adds to it */
    size_t count = c->mib * MIB / sizeof(float);
    float *v = malloc(count * sizeof(float));
    if (v == NULL) {
        r.type = 5;
        r.err = MOSHPIT_ENOMEM;
        (void)put(rep_fd, &r);
        goto out;
    }
    for (size_t k = 0; k < count; k++)
        v[k] = value_of(i, k);
    r.base_rss = status_bytes("VmRSS");
    if (reset_hwm() != 0) {
        r.type = 5;
        snprintf(r.text, sizeof r.text, "cannot reset VmHWM: %s",
                 strerror(errno));
        (void)put(rep_fd, &r);
        free(v);
        goto out;
    }
    for (int round = 0; round < c->rounds; round++) {
        moshpit_round_t info;
        e = moshpit_average(mp, v, count, 1.0, &info);
        if (e != MOSHPIT_OK || info.group_size != (uint32_t)c->peers) {
            snprintf(r.text, sizeof r.text, "round %d: %s, group of %u",
                     round + 1, moshpit_strerror(e), info.group_size);
            break;
        }
        double worst = 0, mean0 = (double)(c->peers - 1) / 2.0;
        for (size_t k = 0; k < count; k++) {
            double d = (double)v[k] - (mean0 + (double)(k % 7));
            if (d < 0)
                d = -d;
            if (d > worst)
                worst = d;
        }
        if (worst > r.worst_dev)
            r.worst_dev = worst;
        r.rounds_ok++;
        /* the next round averages the same vectors again */
        for (size_t k = 0; k < count; k++)
            v[k] = value_of(i, k);
    }
    r.hwm = status_bytes("VmHWM");
    free(v);
    r.after_rss = status_bytes("VmRSS");
    r.type = 4;
    (void)put(rep_fd, &r);
out:
    moshpit_close(mp);
    return 0;
}

typedef struct peer {
    pid_t pid;
    int go_fd, rep_fd;
} peer_t;

static int start(peer_t *p, const mem_case_t *c, int i, const char *boot) {
    int go[2], rep[2];
    if (pipe(go) != 0 || pipe(rep) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(go[1]);
        close(rep[0]);
        _exit(child(c, i, boot, go[0], rep[1]));
    }
    close(go[0]);
    close(rep[1]);
    p->pid = pid;
    p->go_fd = go[1];
    p->rep_fd = rep[0];
    return 0;
}

static double mib(size_t b) {
    return (double)b / (double)MIB;
}

/* Runs one case, counting failed checks in failures. */
static void run(const mem_case_t *c, int check_mem, int check_cpu) {
    peer_t peers[MAX_PEERS];
    rep_t rp[MAX_PEERS];
    char boot[160] = "";
    int n = c->peers, up = 0;
    memset(rp, 0, sizeof rp);
    for (int i = 0; i < n; i++) {
        if (start(&peers[i], c, i, i == 0 ? NULL : boot) != 0)
            break;
        up++;
        rep_t r;
        if (get(peers[i].rep_fd, &r, 30000) != 0 || r.type != 1) {
            CHECK(0, "peer %d did not start", i);
            goto stop;
        }
        if (i == 0)
            snprintf(boot, sizeof boot, "%s", r.text);
    }
    for (int i = 0; i < n; i++) {
        rep_t r;
        CHECK(get(peers[i].rep_fd, &r, 70000) == 0 && r.type == 2,
              "peer %d did not see all %d members", i, n);
        if (failures)
            goto stop;
    }
    for (int i = 0; i < n; i++)
        (void)write(peers[i].go_fd, "g", 1);
    for (int i = 0; i < n; i++)
        CHECK(get(peers[i].rep_fd, &rp[i], c->idle_s * 1000 + 30000) == 0 &&
                  rp[i].type == 3,
              "peer %d: no idle report", i);
    if (failures)
        goto stop;
    for (int i = 0; i < n; i++)
        (void)write(peers[i].go_fd, "g", 1);
    for (int i = 0; i < n; i++) {
        CHECK(get(peers[i].rep_fd, &rp[i], 180000) == 0 && rp[i].type == 4,
              "peer %d: no round report (%s)", i, rp[i].text);
        if (rp[i].type != 4)
            continue;
        CHECK(rp[i].rounds_ok == c->rounds, "peer %d: %d of %d rounds: %s", i,
              rp[i].rounds_ok, c->rounds, rp[i].text);
        CHECK(rp[i].worst_dev == 0.0, "peer %d: off the mean by %g", i,
              rp[i].worst_dev);
    }
    size_t vec = c->mib * MIB, rest = 0, hwm = 0, after = 0;
    double cpu_min = 0;
    for (int i = 0; i < n; i++) {
        if (rp[i].rest_rss > rest)
            rest = rp[i].rest_rss;
        if (rp[i].hwm > hwm)
            hwm = rp[i].hwm;
        if (rp[i].after_rss > after)
            after = rp[i].after_rss;
        double m = rp[i].idle_wall_s > 0
                       ? rp[i].idle_cpu_s * 60.0 / rp[i].idle_wall_s
                       : 0;
        if (m > cpu_min)
            cpu_min = m;
    }
    printf("test_int_memory: %d peers, %zu MiB vector, %d rounds: at rest "
           "%.1f MiB, peak %.1f MiB (%.2f x vector + %.1f MiB), after "
           "%.1f MiB; idle %d s: %.3f CPU s per minute (worst peer)\n",
           n, c->mib, c->rounds, mib(rest), mib(hwm), (double)hwm / (double)vec,
           mib(hwm > 2 * vec ? hwm - 2 * vec : 0), mib(after), c->idle_s,
           cpu_min);
    if (check_mem) {
        CHECK(rest <= REST_MAX, "at rest %.1f MiB > %.0f MiB", mib(rest),
              mib(REST_MAX));
        CHECK(hwm <= 2 * vec + REST_MAX,
              "peak %.1f MiB > 2 x %.0f MiB vector + %.0f MiB", mib(hwm),
              mib(vec), mib(REST_MAX));
    }
    if (check_cpu)
        CHECK(cpu_min <= IDLE_CPU_PER_MIN,
              "idle: %.3f CPU seconds per minute > %.1f", cpu_min,
              IDLE_CPU_PER_MIN);
stop:
    for (int i = 0; i < up; i++) {
        close(peers[i].go_fd); /* a peer waiting for go closes and exits */
        close(peers[i].rep_fd);
    }
    for (int i = 0; i < up; i++) {
        int st;
        int waited = 0;
        for (int t = 0; t < 300 && !waited; t++) {
            if (waitpid(peers[i].pid, &st, WNOHANG) == peers[i].pid)
                waited = 1;
            else
                usleep(100000);
        }
        if (!waited) {
            kill(peers[i].pid, SIGKILL);
            waitpid(peers[i].pid, &st, 0);
        }
    }
}

int main(int argc, char **argv) {
#ifdef MP_SANITIZED
    (void)argc, (void)argv, (void)run;
    printf("test_int_memory: sanitizer build, memory figures meaningless: "
           "skipped\n");
    return 77;
#else
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1) {
        mem_case_t c = {.peers = 2, .rounds = 2, .idle_s = 0, .mib = 32};
        for (int a = 1; a + 1 < argc; a += 2) {
            if (strcmp(argv[a], "--peers") == 0)
                c.peers = atoi(argv[a + 1]);
            else if (strcmp(argv[a], "--mib") == 0)
                c.mib = (size_t)atoi(argv[a + 1]);
            else if (strcmp(argv[a], "--rounds") == 0)
                c.rounds = atoi(argv[a + 1]);
            else if (strcmp(argv[a], "--idle") == 0)
                c.idle_s = atoi(argv[a + 1]);
            else {
                fprintf(stderr, "usage: test_int_memory [--peers N] [--mib V] "
                                "[--rounds R] [--idle S]\n");
                return 2;
            }
        }
        if (c.peers < 2 || c.peers > MAX_PEERS || c.rounds < 0 ||
            c.idle_s < 0) {
            fprintf(stderr, "test_int_memory: 2..%d peers\n", MAX_PEERS);
            return 2;
        }
        run(&c, 1, c.idle_s > 0);
    } else {
        /* 2 members: the mean's own share in doubles is a whole vector;
         * 8: seven senders' frames queue at the receiver (with ZeroMQ's
         * receive high-water mark at 64 frames instead of 8 this case
         * peaked at 84-88 MiB, over the bound) */
        static const mem_case_t cases[] = {
            {.peers = 2, .rounds = 2, .idle_s = 0, .mib = 32},
            {.peers = 8, .rounds = 2, .idle_s = 10, .mib = 32},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            run(&cases[k], 1, cases[k].idle_s > 0);
    }
    if (failures)
        fprintf(stderr, "test_int_memory: %d checks failed\n", failures);
    return failures ? 1 : 0;
#endif
}
