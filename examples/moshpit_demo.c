/* SPDX-License-Identifier: MIT */
/*
 * moshpit_demo.c - a real swarm on loopback: N peer processes, each with its
 * own moshpit_t, each holding a different random vector with a random
 * weight, average for a few rounds. After every round the demo prints the
 * group sizes, how far the worst peer is from the true weighted global mean,
 * the bytes moved and the time. --kill K SIGKILLs K peers while round 1 is
 * running and shows the others finishing. --group-size M with --grid puts
 * peer i on grid position i: with N = M^d peers every peer holds the exact
 * mean after d rounds.
 *
 * Peers write their vectors into a shared mapping so the parent can check
 * them; everything else goes through the library over encrypted TCP.
 *
 * Each peer keeps about 8 file descriptors per other peer (docs/DESIGN.md,
 * "What a peer needs"), so the demo raises its soft limit on open files to
 * the hard limit before it starts the peers. It waits up to --wait seconds
 * for every peer to count the whole swarm, prints how long that took (or
 * how far it got), and runs the rounds either way.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <moshpit.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PEERS 256

enum { REC_ENDPOINT = 1, REC_READY, REC_ROUND, REC_INGROUP, REC_FAIL };

typedef struct rec {
    uint32_t type;
    int32_t err;
    char text[200];
    moshpit_round_t info;
    uint64_t members;
    uint64_t wait_ms; /* REC_READY: how long moshpit_wait_members took */
} rec_t;

typedef struct opts {
    int peers, rounds, kill, group_size, grid, wait_s, stagger_ms, idle_s;
    int sessions_max;
    int join_random; /* bootstrap from a random earlier peer, not peer 0 */
    int compression; /* moshpit_config_t.compression */
    size_t size;
    uint64_t seed;
} opts_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Peer i's initial vector and weight, reproducible from the seed. */
static double init_peer(const opts_t *o, int i, float *v) {
    uint64_t s = o->seed * 1000003u + (uint64_t)i;
    double w = 0.5 + (double)(mix(&s) >> 11) / 9007199254740992.0 * 1.5;
    for (size_t k = 0; k < o->size; k++)
        v[k] = (float)((double)(mix(&s) >> 40) / 16777216.0 * 2.0 - 1.0) +
               (float)i * 0.1f;
    return w;
}

static int write_rec(int fd, const rec_t *r) {
    ssize_t n = write(fd, r, sizeof(*r));
    return n == (ssize_t)sizeof(*r) ? 0 : -1;
}

/* ---- child ---- */

static int g_notify_fd = -1;

static void child_log(void *user, int level, const char *msg) {
    if (getenv("MOSHPIT_DEMO_LOG") != NULL)
        fprintf(stderr, "%.3f [peer %d] %d %s\n", now_s(), *(int *)user, level,
                msg);
    /* tells the parent this peer is now inside a group (used by --kill) */
    if (g_notify_fd >= 0 && strncmp(msg, "round ", 6) == 0 &&
        strstr(msg, ": group of ") != NULL) {
        rec_t r;
        memset(&r, 0, sizeof(r));
        r.type = REC_INGROUP;
        (void)write_rec(g_notify_fd, &r);
    }
}

static int child_main(const opts_t *o, int i, const char *boot, int cmd_fd,
                      int rep_fd, float *slot, int victim) {
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    cfg.swarm = "moshpit-demo";
    cfg.group_size = (uint32_t)o->group_size;
    cfg.sessions_max = (uint64_t)o->sessions_max;
    cfg.grid_position = o->grid ? i : -1; /* grid_dims 0: from the swarm */
    cfg.matchmaking_ms = 1000;
    cfg.round_timeout_ms = 30000;
    cfg.peer_timeout_ms = 2000;
    cfg.compression = (uint32_t)o->compression;
    const char *bootv[2] = {boot, NULL};
    cfg.bootstrap = boot ? bootv : NULL;
    cfg.log = child_log;
    cfg.log_user = &i;
    if (victim) {
        g_notify_fd = rep_fd;
        cfg.log_level = MOSHPIT_LOG_DEBUG;
    }
    if (getenv("MOSHPIT_DEMO_LOG") != NULL)
        cfg.log_level = atoi(getenv("MOSHPIT_DEMO_LOG"));
    rec_t r;
    memset(&r, 0, sizeof(r));
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&cfg, &mp);
    if (e != MOSHPIT_OK) {
        r.type = REC_FAIL;
        r.err = (int32_t)e;
        snprintf(r.text, sizeof(r.text), "open: %s", moshpit_strerror(e));
        (void)write_rec(rep_fd, &r);
        return 1;
    }
    r.type = REC_ENDPOINT; /* the parent may give it to later peers */
    if (moshpit_endpoint(mp, r.text, sizeof(r.text)) != MOSHPIT_OK ||
        write_rec(rep_fd, &r) != 0) {
        moshpit_close(mp);
        return 1;
    }
    double t0 = now_s();
    e = moshpit_wait_members(mp, (size_t)o->peers, (uint32_t)o->wait_s * 1000u);
    memset(&r, 0, sizeof(r));
    r.type = REC_READY;
    r.err = (int32_t)e;
    r.members = moshpit_members(mp);
    r.wait_ms = (uint64_t)((now_s() - t0) * 1000.0);
    if (write_rec(rep_fd, &r) != 0) {
        moshpit_close(mp);
        return 1;
    }
    float *v = malloc(o->size * sizeof(float));
    if (v == NULL) {
        moshpit_close(mp);
        return 1;
    }
    double w = init_peer(o, i, v);
    char c;
    while (read(cmd_fd, &c, 1) == 1 && c == 'g') {
        memset(&r, 0, sizeof(r));
        r.type = REC_ROUND;
        r.err = (int32_t)moshpit_average(mp, v, o->size, w, &r.info);
        /* the weight this peer's value now stands for: its share of the
         * group's total (keeps the swarm's total weight constant, so later
         * rounds still converge to the initial weighted mean) */
        if (r.err == MOSHPIT_OK && r.info.group_size > 1)
            w = r.info.group_weight / r.info.group_size;
        memcpy(slot, v, o->size * sizeof(float));
        if (write_rec(rep_fd, &r) != 0)
            break;
    }
    free(v);
    moshpit_close(mp);
    return 0;
}

/* CPU seconds (user + system) a process has used so far, from
 * /proc/PID/stat; -1 where that is not available. */
static double cpu_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (p == NULL || sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%llu %llu",
                            &ut, &st) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (double)(ut + st) / (double)hz : -1;
}

/* ---- parent ---- */

typedef struct peer {
    pid_t pid;
    int cmd_fd, rep_fd;
    int alive, victim, killed;
    rec_t last;
} peer_t;

/* Open descriptors and resident memory of the peer processes (Linux
 * /proc), printed as mean and largest per peer. */
static void peers_resources(const struct peer *peers, int n, const char *when) {
    double fd_sum = 0, rss_sum = 0;
    long fd_max = 0, rss_max = 0;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (!peers[i].alive)
            continue;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)peers[i].pid);
        DIR *d = opendir(path);
        if (d == NULL)
            continue;
        long fds = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            fds += e->d_name[0] != '.';
        closedir(d);
        snprintf(path, sizeof(path), "/proc/%d/status", (int)peers[i].pid);
        FILE *f = fopen(path, "r");
        long rss = 0;
        char line[256];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "VmRSS: %ld kB", &rss) == 1)
                break;
        if (f != NULL)
            fclose(f);
        fd_sum += (double)fds;
        rss_sum += (double)rss;
        fd_max = fds > fd_max ? fds : fd_max;
        rss_max = rss > rss_max ? rss : rss_max;
        seen++;
    }
    if (seen > 0)
        printf("%s: per peer %.1f open descriptors (largest %ld), %.1f MiB "
               "resident (largest %.1f)\n\n",
               when, fd_sum / seen, fd_max, rss_sum / seen / 1024.0,
               (double)rss_max / 1024.0);
}

static int read_rec(peer_t *p, rec_t *r, int timeout_ms) {
    struct pollfd pfd = {.fd = p->rep_fd, .events = POLLIN};
    int rc = poll(&pfd, 1, timeout_ms);
    if (rc <= 0)
        return -1;
    ssize_t n = read(p->rep_fd, r, sizeof(*r));
    return n == (ssize_t)sizeof(*r) ? 0 : -1;
}

static pid_t spawn(const opts_t *o, int i, const char *boot, peer_t *peers,
                   float *shm, int victim) {
    peer_t *p = &peers[i];
    int cmd[2], rep[2];
    if (pipe(cmd) != 0 || pipe(rep) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(cmd[1]);
        close(rep[0]);
        for (int k = 0; k < i; k++) { /* the other peers' pipe ends */
            close(peers[k].cmd_fd);
            close(peers[k].rep_fd);
        }
        _exit(child_main(o, i, boot, cmd[0], rep[1], shm + (size_t)i * o->size,
                         victim));
    }
    close(cmd[0]);
    close(rep[1]);
    p->pid = pid;
    p->cmd_fd = cmd[1];
    p->rep_fd = rep[0];
    p->alive = pid > 0;
    p->victim = victim;
    return pid;
}

static void usage(void) {
    fprintf(
        stderr,
        "usage: moshpit-demo [--peers N] [--size FLOATS] [--rounds R]\n"
        "                    [--kill K] [--group-size M] [--grid] [--seed S]\n"
        "                    [--wait S] [--join first|random] [--stagger MS]\n"
        "                    [--compression none|fp16|bf16|int8|int4]\n"
        "  --grid: peer i takes grid position i (balanced Moshpit grid);\n"
        "          with N = M^d peers the mean is exact after d rounds\n"
        "  --wait: seconds each peer waits to count all N (default 30);\n"
        "          the rounds run either way\n"
        "  --join: every peer bootstraps from peer 0 (first, default) or\n"
        "          from a random earlier peer (random)\n"
        "  --stagger: milliseconds between starting two peers (default 0)\n"
        "  --compression: how parts travel (default none); the result is\n"
        "          then checked within a step of the format per round\n"
        "  --idle: seconds to sit idle after the wait, printing the CPU\n"
        "          the peers used meanwhile, their open descriptors and\n"
        "          resident memory (Linux /proc; default 0)\n"
        "  --sessions-max: config sessions_max (default 0: the library's)\n");
}

/* Peer processes hold about 8 descriptors per other peer: take the hard
 * limit (the default soft limit is often 1024). */
static void raise_fd_limit(int peers) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)peers * 8 + 64;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        fprintf(stderr,
                "warning: open files limited to %llu, %d peers need about "
                "%llu each (ulimit -n)\n",
                (unsigned long long)rl.rlim_cur, peers,
                (unsigned long long)want);
}

int main(int argc, char **argv) {
    opts_t o = {.peers = 8,
                .rounds = 3,
                .kill = 0,
                .group_size = 0,
                .wait_s = 30,
                .size = 1000000,
                .seed = 1};
    for (int a = 1; a < argc; a += 2) {       /* --option value pairs */
        if (strcmp(argv[a], "--grid") == 0) { /* the one flag */
            o.grid = 1;
            a--;
            continue;
        }
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (v == NULL) {
            usage();
            return 2;
        }
        if (strcmp(argv[a], "--peers") == 0)
            o.peers = atoi(v);
        else if (strcmp(argv[a], "--size") == 0)
            o.size = (size_t)strtoull(v, NULL, 10);
        else if (strcmp(argv[a], "--rounds") == 0)
            o.rounds = atoi(v);
        else if (strcmp(argv[a], "--kill") == 0)
            o.kill = atoi(v);
        else if (strcmp(argv[a], "--group-size") == 0)
            o.group_size = atoi(v);
        else if (strcmp(argv[a], "--seed") == 0)
            o.seed = strtoull(v, NULL, 10);
        else if (strcmp(argv[a], "--wait") == 0)
            o.wait_s = atoi(v);
        else if (strcmp(argv[a], "--stagger") == 0)
            o.stagger_ms = atoi(v);
        else if (strcmp(argv[a], "--idle") == 0)
            o.idle_s = atoi(v);
        else if (strcmp(argv[a], "--compression") == 0) {
            static const char *names[] = {"none", "fp16", "bf16", "int8",
                                          "int4"};
            o.compression = -1;
            for (int c = 0; c < 5; c++)
                if (strcmp(v, names[c]) == 0)
                    o.compression = c;
        } else if (strcmp(argv[a], "--sessions-max") == 0)
            o.sessions_max = atoi(v);
        else if (strcmp(argv[a], "--join") == 0 && strcmp(v, "first") == 0)
            o.join_random = 0;
        else if (strcmp(argv[a], "--join") == 0 && strcmp(v, "random") == 0)
            o.join_random = 1;
        else {
            usage();
            return 2;
        }
    }
    if (o.group_size == 0)
        o.group_size = o.peers < 64 ? o.peers : 64;
    if (o.peers < 1 || o.peers > MAX_PEERS || o.size < 1 || o.rounds < 1 ||
        o.kill < 0 || o.kill >= o.peers || o.group_size < 1 ||
        o.group_size > 64 || o.wait_s < 1 || o.wait_s > 3600 ||
        o.stagger_ms < 0 || o.stagger_ms > 60000 || o.idle_s < 0 ||
        o.compression < 0 || o.idle_s > 3600 || o.sessions_max < 0) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    raise_fd_limit(o.peers);
    size_t shm_bytes = (size_t)o.peers * o.size * sizeof(float);
    float *shm = mmap(NULL, shm_bytes, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* the true weighted means: of everyone, and of the peers not killed */
    double *mean_all = calloc(o.size, sizeof(double));
    double *mean_surv = calloc(o.size, sizeof(double));
    float *tmp = malloc(o.size * sizeof(float));
    peer_t *peers = calloc((size_t)o.peers, sizeof(peer_t));
    if (!mean_all || !mean_surv || !tmp || !peers)
        return 1;
    double wall = 0, wsurv = 0;
    for (int i = 0; i < o.peers; i++) {
        double w = init_peer(&o, i, tmp);
        int victim = i >= o.peers - o.kill;
        wall += w;
        if (!victim)
            wsurv += w;
        for (size_t k = 0; k < o.size; k++) {
            mean_all[k] += w * tmp[k];
            if (!victim)
                mean_surv[k] += w * tmp[k];
        }
    }
    double maxabs = 0;
    for (size_t k = 0; k < o.size; k++) {
        mean_all[k] /= wall;
        mean_surv[k] /= wsurv;
        maxabs = fmax(maxabs, fabs(mean_all[k]));
    }

    printf("moshpit-demo %s: %d peers, %zu floats (%.1f MiB) each, "
           "group size %d, %d rounds%s\n",
           moshpit_version(), o.peers, o.size, (double)o.size * 4 / 1048576.0,
           o.group_size, o.rounds,
           o.kill ? ", killing peers during round 1" : "");
    /* endpoints of the peers started so far (--join random draws one) */
    char(*eps)[200] = calloc((size_t)o.peers, sizeof(*eps));
    if (eps == NULL)
        return 1;
    rec_t r;
    double t_start = now_s();
    if (spawn(&o, 0, NULL, peers, shm, o.kill >= o.peers) <= 0 ||
        read_rec(&peers[0], &r, 30000) != 0 || r.type != REC_ENDPOINT) {
        fprintf(stderr, "first peer failed to start\n");
        return 1;
    }
    snprintf(eps[0], sizeof(eps[0]), "%s", r.text);
    printf("first peer listens at %s\n", eps[0]);
    uint64_t pick = o.seed * 7919u + 17u;
    for (int i = 1; i < o.peers; i++) {
        if (o.stagger_ms > 0)
            usleep((useconds_t)o.stagger_ms * 1000u);
        int from = o.join_random ? (int)(mix(&pick) % (uint64_t)i) : 0;
        if (spawn(&o, i, eps[from], peers, shm, i >= o.peers - o.kill) <= 0) {
            fprintf(stderr, "fork failed\n");
            return 1;
        }
        /* with --join random, later peers need this one's endpoint */
        if (o.join_random &&
            (read_rec(&peers[i], &r, 30000) != 0 || r.type != REC_ENDPOINT)) {
            fprintf(stderr, "peer %d failed to start\n", i);
            return 1;
        }
        snprintf(eps[i], sizeof(eps[i]), "%s", o.join_random ? r.text : "");
    }
    double t_spawned = now_s();
    int complete = 0;
    uint64_t fewest = (uint64_t)o.peers, slowest_ms = 0;
    for (int i = 0; i < o.peers; i++) {
        int got = 0;
        while (!got) { /* an endpoint record may come first */
            if (read_rec(&peers[i], &r, (o.wait_s + 30) * 1000) != 0) {
                fprintf(stderr, "peer %d did not answer\n", i);
                return 1;
            }
            got = r.type == REC_READY;
        }
        if (r.err == MOSHPIT_OK)
            complete++;
        if (r.members < fewest)
            fewest = r.members;
        if (r.wait_ms > slowest_ms)
            slowest_ms = r.wait_ms;
    }
    if (complete == o.peers)
        printf("all %d peers see each other: %.1f s after the first peer "
               "started (%.1f s after the last; slowest peer waited %.1f "
               "s)\n\n",
               o.peers, now_s() - t_start, now_s() - t_spawned,
               (double)slowest_ms / 1000.0);
    else
        printf("after %d s, %d of %d peers count the whole swarm (fewest "
               "counted: %llu); running the rounds anyway\n\n",
               o.wait_s, complete, o.peers, (unsigned long long)fewest);
    free(eps);
    if (o.idle_s > 0) {
        double *c0 = calloc((size_t)o.peers, sizeof(*c0));
        double w0 = now_s(), sum = 0, worst = 0;
        int ok = c0 != NULL;
        for (int i = 0; ok && i < o.peers; i++)
            ok = (c0[i] = cpu_s(peers[i].pid)) >= 0;
        sleep((unsigned)o.idle_s);
        double w1 = now_s();
        for (int i = 0; ok && i < o.peers; i++) {
            double c1 = cpu_s(peers[i].pid), c = c1 - c0[i];
            ok = c1 >= 0;
            sum += c;
            worst = c > worst ? c : worst;
        }
        if (ok)
            printf("idle for %.1f s: the %d peers used %.2f CPU seconds, "
                   "%.2f%% of a core per peer; CPU seconds a minute per "
                   "peer: %.3f on average, %.3f the busiest\n\n",
                   w1 - w0, o.peers, sum, 100.0 * sum / (w1 - w0) / o.peers,
                   60.0 * sum / (w1 - w0) / o.peers, 60.0 * worst / (w1 - w0));
        free(c0);
        peers_resources(peers, o.peers, "after the idle wait");
    }
    printf("%-6s %-22s %-14s %-12s %s\n", "round", "group sizes (xpeers)",
           "max rel. dev.", "MiB moved", "time s (allreduce)");

    int final_ok = 0;
    double final_dev = 0, final_spread = 0;
    for (int round = 1; round <= o.rounds; round++) {
        double t0 = now_s();
        for (int i = 0; i < o.peers; i++)
            if (peers[i].alive && write(peers[i].cmd_fd, "g", 1) != 1)
                peers[i].alive = 0;
        int pending = 0;
        for (int i = 0; i < o.peers; i++)
            pending += peers[i].alive;
        int hist[65] = {0};
        uint64_t bytes = 0;
        uint32_t allreduce_ms = 0;
        int errors = 0;
        while (pending > 0) {
            struct pollfd pf[MAX_PEERS];
            int idx[MAX_PEERS], n = 0;
            for (int i = 0; i < o.peers; i++)
                if (peers[i].alive && !peers[i].last.type) {
                    pf[n].fd = peers[i].rep_fd;
                    pf[n].events = POLLIN;
                    idx[n++] = i;
                }
            if (n == 0)
                break;
            int rc = poll(pf, (nfds_t)n, 60000);
            if (rc <= 0) {
                fprintf(stderr, "round %d: peers did not answer\n", round);
                return 1;
            }
            for (int k = 0; k < n; k++) {
                if (!(pf[k].revents & (POLLIN | POLLHUP)))
                    continue;
                peer_t *p = &peers[idx[k]];
                if (read(p->rep_fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) {
                    p->alive = 0;
                    pending--;
                    continue;
                }
                if (r.type == REC_INGROUP) {
                    if (round == 1 && p->victim && !p->killed) {
                        kill(p->pid, SIGKILL);
                        p->killed = 1;
                        p->alive = 0;
                        pending--;
                        printf("       (SIGKILL peer %d: it was inside a "
                               "group)\n",
                               idx[k]);
                    }
                    continue;
                }
                if (r.type != REC_ROUND)
                    continue;
                p->last = r;
                pending--;
                if (r.err != MOSHPIT_OK)
                    errors++;
                if (r.info.group_size <= 64)
                    hist[r.info.group_size]++;
                bytes += r.info.bytes_sent;
                if (r.info.allreduce_ms > allreduce_ms)
                    allreduce_ms = r.info.allreduce_ms;
            }
        }
        double dt = now_s() - t0;
        /* deviation of each peer from the global mean */
        double dev = 0;
        int first = -1;
        double spread = 0;
        for (int i = 0; i < o.peers; i++) {
            if (!peers[i].alive)
                continue;
            const float *v = shm + (size_t)i * o.size;
            double d = 0;
            for (size_t k = 0; k < o.size; k++)
                d = fmax(d, fabs(v[k] - mean_all[k]));
            dev = fmax(dev, d / maxabs);
            if (first < 0) {
                first = i;
            } else {
                const float *f = shm + (size_t)first * o.size;
                for (size_t k = 0; k < o.size; k++)
                    spread = fmax(spread, fabs(v[k] - f[k]) / maxabs);
            }
            peers[i].last.type = 0;
        }
        char groups[64] = "";
        size_t gl = 0;
        for (int g = 64; g >= 1; g--)
            if (hist[g] && gl < sizeof(groups) - 12)
                gl +=
                    (size_t)snprintf(groups + gl, sizeof(groups) - gl,
                                     "%s%d (x%d)", gl ? ", " : "", g, hist[g]);
        printf("%-6d %-22s %-14.3g %-12.1f %.3f (%.3f)%s\n", round, groups, dev,
               (double)bytes / 1048576.0, dt, allreduce_ms / 1000.0,
               errors ? "  ERRORS" : "");
        final_dev = dev;
        final_spread = spread;
        final_ok = errors == 0;
    }
    int survivors = 0;
    for (int i = 0; i < o.peers; i++)
        survivors += peers[i].alive;
    printf("\n");
    if (o.idle_s > 0)
        peers_resources(peers, o.peers, "after the rounds");
    int ok;
    /* a lossy encoding rounds twice a round, half a step each time
     * (docs/AGGREGATION.md, "Compression"); steps relative to the largest
     * value */
    static const double step[] = {0, 0x1p-10, 0x1p-7, 1.0 / 127, 1.0 / 7};
    double tol = 1e-5 + o.rounds * step[o.compression];
    if (o.kill == 0) {
        ok = final_ok && final_dev <= tol;
        printf("RESULT: every peer holds the global weighted mean within "
               "%.3g relative: %s (max deviation %.3g)\n",
               tol, ok ? "yes" : "NO", final_dev);
    } else {
        double ds = 0;
        for (int i = 0; i < o.peers; i++) {
            if (!peers[i].alive)
                continue;
            const float *v = shm + (size_t)i * o.size;
            for (size_t k = 0; k < o.size; k++)
                ds = fmax(ds, fabs(v[k] - mean_surv[k]) / maxabs);
        }
        ok = final_ok && final_spread <= tol;
        printf("RESULT: all %d surviving peers finished and agree within "
               "%.3g relative: %s (spread %.3g). Their common value is %.3g "
               "from the mean of all initial vectors and %.3g from the mean "
               "of the survivors' (the killed peers' data counts where it "
               "arrived before they died).\n",
               survivors, tol, ok ? "yes" : "NO", final_spread, final_dev, ds);
    }
    int signalled = 0, aborted = 0;
    for (int i = 0; i < o.peers; i++) {
        if (peers[i].pid > 0) {
            close(peers[i].cmd_fd); /* EOF: the child closes and exits */
            int st = 0;
            if (waitpid(peers[i].pid, &st, 0) == peers[i].pid &&
                WIFSIGNALED(st) && !peers[i].killed) {
                signalled++;
                aborted += WTERMSIG(st) == SIGABRT;
            }
            close(peers[i].rep_fd);
        }
    }
    printf("peer processes that died by a signal the demo did not send: %d "
           "(SIGABRT: %d)\n",
           signalled, aborted);
    if (signalled > 0)
        ok = 0;
    munmap(shm, shm_bytes);
    free(mean_all);
    free(mean_surv);
    free(tmp);
    free(peers);
    return ok ? 0 : 1;
}
