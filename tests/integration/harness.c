/* SPDX-License-Identifier: MIT */
/*
 * harness.c - the process harness of the integration tests (see harness.h).
 * Messages on the socketpair are fixed-size records; vectors follow a
 * RESULT record as raw floats.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int it_failures = 0;

enum {
    EV_ENDPOINT = 1,
    EV_READY,
    EV_RESULT,
    EV_GROUP,
    EV_MEMBERS,
    EV_STARTED,
    CMD_AVERAGE = 100,
    CMD_MEMBERS,
    CMD_QUIT,
    CMD_WAIT_MEMBERS,
    CMD_FETCH,
    CMD_WAIT_MEMBERS_MAX,
    CMD_LOG_COUNT,
    CMD_CLOSE,
    CMD_RELEASE
};

/* flags of CMD_AVERAGE (in rec.err) */
#define AVG_AGAIN 1 /* average the vector the last call left */
#define AVG_CARRY 2 /* weight = last group_weight / group_size */
#define AVG_CLOSE 4 /* moshpit_close as soon as the call returns */
#define AVG_OP 8    /* moshpit_average_start, work while it runs, wait */
#define AVG_OP_CLOSE                                                           \
    16 /* moshpit_average_start, close once the group                          \
          formed (needs notify_group) */

typedef struct rec {
    uint32_t type;
    int32_t err;
    uint64_t a, b;
    double w;
    char text[200];
    it_result_t res;
} rec_t;

uint64_t it_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void it_fill(float *v, size_t count, uint64_t seed) {
    if (seed & IT_SEED_POISON) {
        for (size_t i = 0; i < count; i++)
            v[i] = 1e20f;
        return;
    }
    uint64_t s = seed * 7919u + 17u;
    for (size_t i = 0; i < count; i++)
        v[i] = (float)((double)(mix(&s) >> 40) / 16777216.0 * 4.0 - 2.0);
}

double it_weight(uint64_t seed) {
    uint64_t s = seed * 104729u + 3u;
    return 0.25 + (double)(mix(&s) >> 11) / 9007199254740992.0 * 2.0;
}

double it_dev_from_mean(const float *v, size_t count, const uint64_t *seeds,
                        const double *weights, size_t n) {
    double *mean = calloc(count, sizeof(double));
    float *tmp = malloc(count * sizeof(float));
    double wsum = 0, maxabs = 0, dev = 0;
    if (mean == NULL || tmp == NULL) {
        free(mean);
        free(tmp);
        return INFINITY;
    }
    for (size_t p = 0; p < n; p++) {
        it_fill(tmp, count, seeds[p]);
        wsum += weights[p];
        for (size_t i = 0; i < count; i++)
            mean[i] += weights[p] * tmp[i];
    }
    for (size_t i = 0; i < count; i++) {
        mean[i] /= wsum;
        maxabs = fmax(maxabs, fabs(mean[i]));
    }
    for (size_t i = 0; i < count; i++)
        dev = fmax(dev, fabs(v[i] - mean[i]));
    free(mean);
    free(tmp);
    return maxabs > 0 ? dev / maxabs : dev;
}

double it_grid_round(it_peer_t *peers, size_t n, uint32_t m, size_t count,
                     int r, const uint64_t *seeds, const double *w,
                     double *next_w, float *v) {
    for (size_t i = 0; i < n; i++) {
        int rc = r == 0 ? it_average_async(&peers[i], count, seeds[i], w[i])
                        : it_average_again_async(&peers[i], count, next_w[i]);
        IT_CHECK(rc == 0, "send");
    }
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        it_result_t res;
        int rc = it_collect(&peers[i], &res, v, count, 60000);
        IT_CHECK(rc == 0, "peer %zu gave no result", i);
        if (rc != 0)
            continue;
        IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == m,
                 "round %d peer %zu: %s, group of %u (want %u)", r + 1, i,
                 moshpit_strerror((moshpit_err_t)res.err), res.info.group_size,
                 m);
        next_w[i] = res.info.group_size > 0
                        ? res.info.group_weight / res.info.group_size
                        : w[i];
        double d = it_dev_from_mean(v, count, seeds, w, n);
        if (d > worst)
            worst = d;
    }
    return worst;
}

double it_dev_from_group(const float *v, size_t count, size_t i,
                         const uint64_t *gid, const uint64_t *seeds,
                         const double *weights, size_t n) {
    uint64_t gs[IT_MAX_PEERS];
    double gw[IT_MAX_PEERS];
    size_t k = 0;
    for (size_t j = 0; j < n && k < IT_MAX_PEERS; j++)
        if (j == i || (gid[i] != 0 && gid[j] == gid[i])) {
            gs[k] = seeds[j];
            gw[k++] = weights[j];
        }
    return it_dev_from_mean(v, count, gs, gw, k);
}

static int send_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, int timeout_ms) {
    char *p = buf;
    uint64_t deadline = it_now_ms() + (uint64_t)timeout_ms;
    while (len > 0) {
        uint64_t now = it_now_ms();
        if (now >= deadline)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, (int)(deadline - now));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- the peer process ---- */

static int g_fd = -1;
static int g_log_fd = -1; /* cfg log_dir: the peer's log file */

static const char *g_notify_log;
static uint32_t g_stop_at_group, g_hold_at_log, g_groups_seen;

/* the peer's log so far (the log callback runs on the engine thread) */
#define LOG_KEEP_MAX ((size_t)4 << 20)
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_log;
static size_t g_log_len, g_log_cap;

static void log_keep(const char *msg) {
    size_t n = strlen(msg);
    pthread_mutex_lock(&g_log_lock);
    if (g_log_len + n + 2 > g_log_cap && g_log_len + n + 2 <= LOG_KEEP_MAX) {
        size_t cap = g_log_cap ? g_log_cap : 65536;
        while (cap < g_log_len + n + 2)
            cap *= 2;
        char *nb = realloc(g_log, cap);
        if (nb != NULL) {
            g_log = nb;
            g_log_cap = cap;
        }
    }
    if (g_log_len + n + 2 <= g_log_cap) {
        memcpy(g_log + g_log_len, msg, n);
        g_log_len += n;
        g_log[g_log_len++] = '\n';
        g_log[g_log_len] = '\0';
    }
    pthread_mutex_unlock(&g_log_lock);
}

/* Lines of the kept log containing text. */
static uint64_t log_count(const char *text) {
    uint64_t n = 0;
    pthread_mutex_lock(&g_log_lock);
    const char *p = g_log;
    while (p != NULL && *p != '\0') {
        const char *hit = strstr(p, text);
        if (hit == NULL)
            break;
        n++; /* then go on after the line holding the hit */
        p = strchr(hit, '\n');
        if (p != NULL)
            p++;
    }
    pthread_mutex_unlock(&g_log_lock);
    return n;
}

static void peer_log(void *user, int level, const char *msg) {
    int notify = *(int *)user;
    log_keep(msg);
    if (g_log_fd >= 0) {
        char line[1024];
        int n;
        if (getenv("MOSHPIT_TEST_LOG_TIME") != NULL) {
            /* with the monotonic clock's ms: the peers' logs side by side */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            n = snprintf(line, sizeof(line), "%d %lld.%03ld %s\n", level,
                         (long long)ts.tv_sec, ts.tv_nsec / 1000000L, msg);
        } else {
            n = snprintf(line, sizeof(line), "%d %s\n", level, msg);
        }
        if (n > 0)
            (void)!write(g_log_fd, line,
                         (size_t)n < sizeof(line) ? (size_t)n
                                                  : sizeof(line) - 1);
    }
    if (getenv("MOSHPIT_TEST_LOG") != NULL)
        fprintf(stderr, "[%d] %d %s\n", (int)getpid(), level, msg);
    int hit = g_notify_log != NULL ? strstr(msg, g_notify_log) != NULL
                                   : strncmp(msg, "round ", 6) == 0 &&
                                         strstr(msg, ": group of ") != NULL;
    if (notify && hit) {
        rec_t r;
        memset(&r, 0, sizeof(r));
        r.type = EV_GROUP;
        (void)send_all(g_fd, &r, sizeof(r));
        ++g_groups_seen;
        if (g_stop_at_group != 0 && g_groups_seen == g_stop_at_group)
            (void)raise(SIGSTOP);
        /* the engine thread waits here (the peer's main thread is in its
         * call and reads nothing) until the test releases it */
        if (g_hold_at_log != 0 && g_groups_seen == g_hold_at_log)
            (void)recv_all(g_fd, &r, sizeof(r), 600000);
    }
}

/* AVG_OP: the round in the background. Reports EV_STARTED (err: the
 * start, a: a poll right after it, b: a second start while the op is
 * live), then computes on other memory, polling the op between steps,
 * until the round is over; res->work_steps counts the steps. */
static int32_t op_average(moshpit_t *mp, float *v, size_t count, double w,
                          it_result_t *res, int fd) {
    rec_t r;
    memset(&r, 0, sizeof(r));
    r.type = EV_STARTED;
    moshpit_op_t *op = NULL, *op2 = NULL;
    moshpit_err_t e = moshpit_average_start(mp, v, count, w, &op);
    r.err = (int32_t)e;
    moshpit_err_t polled = MOSHPIT_EINVAL;
    if (e == MOSHPIT_OK) {
        polled = moshpit_op_wait(op, 0, &res->info);
        r.a = (uint64_t)polled;
        float other = 1.0f;
        moshpit_err_t e2 = moshpit_average_start(mp, &other, 1, 1.0, &op2);
        r.b = (uint64_t)e2;
        if (e2 == MOSHPIT_OK && /* a second op where none may be */
            moshpit_op_wait(op2, UINT32_MAX, NULL) != MOSHPIT_OK)
            r.b = MOSHPIT_EPROTO;
    }
    if (send_all(fd, &r, sizeof(r)) != 0 || e != MOSHPIT_OK) {
        if (e == MOSHPIT_OK && polled == MOSHPIT_ETIMEDOUT)
            e = moshpit_op_wait(op, UINT32_MAX, NULL);
        return (int32_t)(e == MOSHPIT_OK ? MOSHPIT_ESYS : e);
    }
    e = polled;
    float work[1024];
    for (size_t i = 0; i < 1024; i++)
        work[i] = (float)i;
    while (e == MOSHPIT_ETIMEDOUT) {
        for (size_t i = 0; i < 1024; i++)
            work[i] = work[i] * 0.999f + 0.5f;
        res->work_steps++;
        e = moshpit_op_wait(op, 0, &res->info);
    }
    res->work_check = work[0]; /* keeps the work from being optimized out */
    return (int32_t)e;
}

/* AVG_OP_CLOSE: starts the op, computes until its group has formed (the
 * engine's "group of" line) or it is over, then closes the peer with the
 * op live. Returns the start's result, or MOSHPIT_ECLOSED when the close
 * ended the op (the values are whatever the close left). */
static int32_t op_close(moshpit_t *mp, float *v, size_t count, double w) {
    uint64_t groups = log_count(": group of ");
    moshpit_op_t *op = NULL;
    moshpit_err_t e = moshpit_average_start(mp, v, count, w, &op);
    if (e != MOSHPIT_OK) {
        moshpit_close(mp);
        return (int32_t)e;
    }
    uint64_t until = it_now_ms() + 30000;
    while (log_count(": group of ") == groups && it_now_ms() < until) {
        e = moshpit_op_wait(op, 1, NULL);
        if (e != MOSHPIT_ETIMEDOUT) {
            moshpit_close(mp);
            return (int32_t)e; /* over before its group formed */
        }
    }
    moshpit_close(mp); /* frees the op */
    return MOSHPIT_ECLOSED;
}

static int peer_main(const it_peer_cfg_t *pc, int fd) {
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    cfg.swarm = pc->swarm;
    memcpy(cfg.swarm_secret, pc->swarm_secret, 32);
    memcpy(cfg.public_key, pc->public_key, 32);
    memcpy(cfg.secret_key, pc->secret_key, 32);
    cfg.authorized_keys = pc->authorized;
    cfg.authorized_count = pc->authorized_n;
    if (pc->group_size)
        cfg.group_size = pc->group_size;
    if (pc->min_group_size)
        cfg.min_group_size = pc->min_group_size;
    if (pc->matchmaking_ms)
        cfg.matchmaking_ms = pc->matchmaking_ms;
    if (pc->round_timeout_ms)
        cfg.round_timeout_ms = pc->round_timeout_ms;
    if (pc->peer_timeout_ms)
        cfg.peer_timeout_ms = pc->peer_timeout_ms;
    if (pc->bandwidth_mbps)
        cfg.bandwidth_mbps = pc->bandwidth_mbps;
    cfg.peers_max = pc->peers_max;
    cfg.peer_msg_rate = pc->peer_msg_rate;
    cfg.sessions_max = pc->sessions_max;
    cfg.data_streams = pc->data_streams;
    cfg.congestion = pc->congestion;
    cfg.shared_memory = pc->shared_memory;
    cfg.grid_dims = pc->grid_dims;
    memcpy(cfg.authority_key, pc->authority_key, sizeof(cfg.authority_key));
    memcpy(cfg.cert, pc->cert, sizeof(cfg.cert));
    cfg.serve_state = (uint32_t)pc->serve_state;
    cfg.aggregation = pc->aggregation;
    if (pc->trim)
        cfg.trim = pc->trim;
    cfg.clip_tau = pc->clip_tau;
    cfg.weight_cap = pc->weight_cap;
    cfg.compression = pc->compression;
    g_notify_log = pc->notify_log;
    g_stop_at_group = pc->stop_at_group;
    g_hold_at_log = pc->hold_at_log;
    g_groups_seen = 0;
    cfg.grid_position = pc->grid ? pc->grid_position : -1;
    const char *boot[2] = {pc->bootstrap, NULL};
    if (pc->bootstrap[0])
        cfg.bootstrap = boot;
    int notify = pc->notify_group;
    g_fd = fd;
    cfg.log = peer_log;
    cfg.log_user = &notify;
    cfg.log_level = notify         ? MOSHPIT_LOG_DEBUG
                    : pc->log_info ? MOSHPIT_LOG_INFO
                                   : MOSHPIT_LOG_WARN;
    if (getenv("MOSHPIT_TEST_LOG") != NULL)
        cfg.log_level = MOSHPIT_LOG_DEBUG;
    if (pc->log_dir != NULL) {
        char path[512];
        snprintf(path, sizeof(path), "%s/peer-%zu.log", pc->log_dir, pc->index);
        g_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        cfg.log_level = MOSHPIT_LOG_DEBUG;
    }

    rec_t r;
    memset(&r, 0, sizeof(r));
    moshpit_t *mp = NULL;
    r.type = EV_ENDPOINT;
    if (pc->child_init != NULL &&
        pc->child_init(pc->child_arg, pc->index, &cfg) != 0)
        r.err = MOSHPIT_ESYS;
    else
        r.err = (int32_t)moshpit_open(&cfg, &mp);
    if (r.err == MOSHPIT_OK &&
        moshpit_endpoint(mp, r.text, sizeof(r.text)) != MOSHPIT_OK)
        r.err = MOSHPIT_EINVAL;
    if (send_all(fd, &r, sizeof(r)) != 0 || r.err != MOSHPIT_OK)
        return 1;
    memset(&r, 0, sizeof(r));
    r.type = EV_READY;
    r.err = (int32_t)moshpit_wait_members(
        mp, pc->expect_members ? pc->expect_members : 1,
        pc->ready_timeout_ms ? pc->ready_timeout_ms : 20000);
    r.a = moshpit_members(mp);
    if (send_all(fd, &r, sizeof(r)) != 0) {
        moshpit_close(mp);
        return 1;
    }
    float *kept = NULL; /* the vector the last call left */
    size_t kept_n = 0;
    moshpit_round_t last; /* what the last call reported */
    memset(&last, 0, sizeof(last));
    for (;;) {
        rec_t c;
        if (recv_all(fd, &c, sizeof(c), 3600 * 1000) != 0 || c.type == CMD_QUIT)
            break;
        if (c.type == CMD_WAIT_MEMBERS_MAX) {
            /* the library signals growth, not shrinking: look every 10 ms
             * until the count is down to c.a or the time is up */
            uint64_t until = it_now_ms() + c.b, t0 = it_now_ms();
            while (moshpit_members(mp) > c.a && it_now_ms() < until) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            memset(&r, 0, sizeof(r));
            r.type = EV_MEMBERS;
            r.a = moshpit_members(mp);
            r.b = it_now_ms() - t0;
            if (send_all(fd, &r, sizeof(r)) != 0)
                break;
            continue;
        }
        if (c.type == CMD_LOG_COUNT) {
            c.text[sizeof(c.text) - 1] = '\0';
            memset(&r, 0, sizeof(r));
            r.type = EV_MEMBERS;
            r.a = log_count(c.text);
            if (send_all(fd, &r, sizeof(r)) != 0)
                break;
            continue;
        }
        if (c.type == CMD_MEMBERS || c.type == CMD_WAIT_MEMBERS) {
            memset(&r, 0, sizeof(r));
            r.type = EV_MEMBERS;
            if (c.type == CMD_WAIT_MEMBERS)
                r.err = (int32_t)moshpit_wait_members(mp, (size_t)c.a,
                                                      (uint32_t)c.b);
            r.a = moshpit_members(mp);
            if (send_all(fd, &r, sizeof(r)) != 0)
                break;
            continue;
        }
        if (c.type == CMD_FETCH) {
            size_t count = (size_t)c.a;
            float *v = calloc(count ? count : 1, sizeof(float));
            if (v == NULL)
                break;
            memset(&r, 0, sizeof(r));
            r.type = EV_RESULT;
            uint64_t t0 = it_now_ms(), round = 0;
            r.res.err = (int32_t)moshpit_fetch_state(mp, v, count,
                                                     (uint32_t)c.b, &round);
            r.res.call_ms = it_now_ms() - t0;
            r.res.info.round_id = round;
            int bad = send_all(fd, &r, sizeof(r)) != 0 ||
                      send_all(fd, v, count * sizeof(float)) != 0;
            free(v);
            if (bad)
                break;
            continue;
        }
        if (c.type == CMD_CLOSE) {
            memset(&r, 0, sizeof(r));
            r.type = EV_MEMBERS;
            uint64_t t0 = it_now_ms();
            moshpit_close(mp);
            mp = NULL;
            r.b = it_now_ms() - t0;
            (void)send_all(fd, &r, sizeof(r));
            break;
        }
        if (c.type != CMD_AVERAGE)
            continue;
        size_t count = (size_t)c.a;
        float *v = malloc((count ? count : 1) * sizeof(float));
        if (v == NULL)
            break;
        if ((c.err & AVG_AGAIN) && kept != NULL && kept_n == count)
            memcpy(v, kept, count * sizeof(float));
        else
            it_fill(v, count, c.b);
        double w = c.w;
        if (c.err & AVG_CARRY)
            w = last.group_size > 0 ? last.group_weight / last.group_size : 1.0;
        memset(&r, 0, sizeof(r));
        r.type = EV_RESULT;
        uint64_t t0 = it_now_ms();
        if (c.err & AVG_OP_CLOSE) {
            r.res.err = op_close(mp, v, count, w);
            mp = NULL;
        } else if (c.err & AVG_OP)
            r.res.err = op_average(mp, v, count, w, &r.res, fd);
        else
            r.res.err = (int32_t)moshpit_average(mp, v, count, w, &r.res.info);
        r.res.call_ms = it_now_ms() - t0;
        last = r.res.info;
        if (c.err & AVG_CLOSE) {
            t0 = it_now_ms();
            moshpit_close(mp);
            mp = NULL;
            r.res.close_ms = it_now_ms() - t0;
        }
        int bad = send_all(fd, &r, sizeof(r)) != 0 ||
                  send_all(fd, v, count * sizeof(float)) != 0;
        free(kept);
        kept = v;
        kept_n = count;
        if (bad || mp == NULL)
            break;
    }
    free(kept);
    moshpit_close(mp);
    free(g_log);
    return 0;
}

/* How long the test waits for a peer's ready report: its own wait plus
 * slack. */
static int ready_wait(const it_peer_cfg_t *cfg) {
    return (int)(cfg->ready_timeout_ms ? cfg->ready_timeout_ms : 20000) + 5000;
}

static int start(it_peer_t *p, const it_peer_cfg_t *cfg) {
    int sv[2];
    memset(p, 0, sizeof(*p));
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(sv[0]);
        /* close every other inherited descriptor of the test process */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != sv[1])
                close(fd);
        _exit(peer_main(cfg, sv[1]));
    }
    close(sv[1]);
    p->pid = pid;
    p->fd = sv[0];
    p->alive = 1;
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), 20000) != 0 || r.type != EV_ENDPOINT ||
        r.err != MOSHPIT_OK) {
        it_kill(p);
        return -1;
    }
    snprintf(p->endpoint, sizeof(p->endpoint), "%s", r.text);
    return 0;
}

int it_start_nowait(it_peer_t *p, const it_peer_cfg_t *cfg) {
    return start(p, cfg);
}

long it_wait_ready(it_peer_t *p, int timeout_ms) {
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), timeout_ms) != 0 || r.type != EV_READY ||
        r.err != MOSHPIT_OK)
        return -1;
    return (long)r.a;
}

int it_start(it_peer_t *p, const it_peer_cfg_t *cfg) {
    if (start(p, cfg) != 0)
        return -1;
    return it_wait_ready(p, ready_wait(cfg)) < 0 ? -1 : 0;
}

size_t it_start_swarm(it_peer_t *peers, size_t n, it_peer_cfg_t *cfg) {
    size_t ok = 0;
    cfg->expect_members = n;
    cfg->bootstrap[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        cfg->index = i;
        if (cfg->grid)
            cfg->grid_position = cfg->first_position + (int64_t)i;
        if (start(&peers[i], cfg) != 0)
            return 0;
        if (i == 0)
            snprintf(cfg->bootstrap, sizeof(cfg->bootstrap), "%s",
                     peers[0].endpoint);
    }
    for (size_t i = 0; i < n; i++)
        ok += it_wait_ready(&peers[i], ready_wait(cfg)) == (long)n;
    return ok;
}

size_t it_start_more(it_peer_t *peers, size_t from, size_t to, size_t expect,
                     it_peer_cfg_t *cfg) {
    size_t ok = 0;
    cfg->expect_members = expect;
    snprintf(cfg->bootstrap, sizeof(cfg->bootstrap), "%s", peers[0].endpoint);
    for (size_t i = from; i < to; i++) {
        cfg->index = i;
        if (cfg->grid)
            cfg->grid_position = cfg->first_position + (int64_t)i;
        if (start(&peers[i], cfg) != 0)
            return ok;
    }
    for (size_t i = from; i < to; i++)
        ok += it_wait_ready(&peers[i], ready_wait(cfg)) == (long)expect;
    return ok;
}

int it_average_again_async(it_peer_t *p, size_t count, double w) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_AVERAGE;
    c.err = AVG_AGAIN;
    c.a = count;
    c.w = w;
    return send_all(p->fd, &c, sizeof(c));
}

int it_average_carry_async(it_peer_t *p, size_t count) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_AVERAGE;
    c.err = AVG_AGAIN | AVG_CARRY;
    c.a = count;
    return send_all(p->fd, &c, sizeof(c));
}

int it_average_close_async(it_peer_t *p, size_t count) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_AVERAGE;
    c.err = AVG_AGAIN | AVG_CARRY | AVG_CLOSE;
    c.a = count;
    return send_all(p->fd, &c, sizeof(c));
}

int it_close(it_peer_t *p, uint64_t *close_ms, int timeout_ms) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_CLOSE;
    rec_t r;
    int rc = send_all(p->fd, &c, sizeof(c));
    do /* group notices of earlier rounds are not waited for: skip */
        rc = rc != 0 ? rc : recv_all(p->fd, &r, sizeof(r), timeout_ms);
    while (rc == 0 && r.type == EV_GROUP);
    if (rc != 0 || r.type != EV_MEMBERS) {
        it_kill(p);
        return -1;
    }
    *close_ms = r.b;
    it_stop(p);
    return 0;
}

int it_average_async(it_peer_t *p, size_t count, uint64_t seed, double w) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_AVERAGE;
    c.a = count;
    c.b = seed;
    c.w = w;
    return send_all(p->fd, &c, sizeof(c));
}

int it_average_op_async(it_peer_t *p, size_t count, uint64_t seed, double w) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_AVERAGE;
    c.err = AVG_OP;
    c.a = count;
    c.b = seed;
    c.w = w;
    return send_all(p->fd, &c, sizeof(c));
}

int it_average_op_close_async(it_peer_t *p, size_t count, uint64_t seed,
                              double w) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_AVERAGE;
    c.err = AVG_OP_CLOSE;
    c.a = count;
    c.b = seed;
    c.w = w;
    return send_all(p->fd, &c, sizeof(c));
}

int it_wait_started(it_peer_t *p, int32_t *start, int32_t *poll,
                    int32_t *second, int timeout_ms) {
    rec_t r;
    int rc;
    do /* group notices are not waited for here: skip */
        rc = recv_all(p->fd, &r, sizeof(r), timeout_ms);
    while (rc == 0 && r.type == EV_GROUP);
    if (rc != 0 || r.type != EV_STARTED)
        return -1;
    *start = r.err;
    *poll = (int32_t)r.a;
    *second = (int32_t)r.b;
    return 0;
}

int it_wait_group(it_peer_t *p, int timeout_ms) {
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), timeout_ms) != 0 || r.type != EV_GROUP)
        return -1;
    return 0;
}

int it_collect(it_peer_t *p, it_result_t *res, float *values, size_t count,
               int timeout_ms) {
    rec_t r;
    for (;;) {
        if (recv_all(p->fd, &r, sizeof(r), timeout_ms) != 0)
            return -1;
        if (r.type == EV_GROUP)
            continue; /* not waited for: skip */
        if (r.type != EV_RESULT)
            return -1;
        break;
    }
    *res = r.res;
    return recv_all(p->fd, values, count * sizeof(float), timeout_ms);
}

long it_members(it_peer_t *p, int timeout_ms) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_MEMBERS;
    if (send_all(p->fd, &c, sizeof(c)) != 0)
        return -1;
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), timeout_ms) != 0 || r.type != EV_MEMBERS)
        return -1;
    return (long)r.a;
}

int it_log_dir_make(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "/tmp/moshpit-%s-%d", name, (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

void it_log_dir_done(const char *dir) {
    char rm[320];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    if (it_failures > 0 || getenv("MOSHPIT_TEST_KEEP_LOGS") != NULL)
        fprintf(stderr, "the peers' logs are in %s\n", dir);
    else if (system(rm) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

long it_log_count(it_peer_t *p, const char *text, int timeout_ms) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_LOG_COUNT;
    if (strlen(text) >= sizeof(c.text))
        return -1;
    snprintf(c.text, sizeof(c.text), "%s", text);
    if (send_all(p->fd, &c, sizeof(c)) != 0)
        return -1;
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), timeout_ms) != 0 || r.type != EV_MEMBERS)
        return -1;
    return (long)r.a;
}

long it_wait_log(it_peer_t *p, const char *text, int timeout_ms) {
    uint64_t until = it_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        long n = it_log_count(p, text, 5000);
        if (n != 0 || it_now_ms() >= until)
            return n;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void it_kill(it_peer_t *p) {
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    if (p->fd > 0)
        close(p->fd);
    p->pid = 0;
    p->fd = -1;
    p->alive = 0;
}

int it_running(const it_peer_t *p) {
    return p->pid > 0 && waitpid(p->pid, NULL, WNOHANG) == 0 &&
           kill(p->pid, 0) == 0;
}

void it_stop(it_peer_t *p) {
    if (p->pid <= 0)
        return;
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_QUIT;
    (void)send_all(p->fd, &c, sizeof(c));
    /* the peer leaves within its close deadline; then reap it */
    int status = 0;
    waitpid(p->pid, &status, 0);
    close(p->fd);
    p->pid = 0;
    p->fd = -1;
    p->alive = 0;
}

long it_wait_members(it_peer_t *p, size_t n, int timeout_ms) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_WAIT_MEMBERS;
    c.a = n;
    c.b = (uint64_t)timeout_ms;
    if (send_all(p->fd, &c, sizeof(c)) != 0)
        return -1;
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), timeout_ms + 5000) != 0 ||
        r.type != EV_MEMBERS)
        return -1;
    return (long)r.a;
}

int it_fetch_async(it_peer_t *p, size_t count, uint32_t timeout_ms) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_FETCH;
    c.a = count;
    c.b = timeout_ms;
    return send_all(p->fd, &c, sizeof(c));
}

int it_wait_group_any(it_peer_t *const *peers, size_t n, int timeout_ms) {
    struct pollfd pfd[IT_MAX_PEERS];
    if (n > IT_MAX_PEERS)
        return -1;
    for (size_t i = 0; i < n; i++) {
        pfd[i].fd = peers[i]->fd;
        pfd[i].events = POLLIN;
        pfd[i].revents = 0;
    }
    int rc = poll(pfd, (nfds_t)n, timeout_ms);
    if (rc <= 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (pfd[i].revents & POLLIN)
            return it_wait_group(peers[i], 1000) == 0 ? (int)i : -1;
    return -1;
}

long it_wait_members_max(it_peer_t *p, size_t n, int timeout_ms,
                         uint64_t *took_ms) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_WAIT_MEMBERS_MAX;
    c.a = n;
    c.b = (uint64_t)timeout_ms;
    if (send_all(p->fd, &c, sizeof(c)) != 0)
        return -1;
    rec_t r;
    if (recv_all(p->fd, &r, sizeof(r), timeout_ms + 5000) != 0 ||
        r.type != EV_MEMBERS)
        return -1;
    if (took_ms != NULL)
        *took_ms = r.b;
    return (long)r.a;
}

void it_check_settings_apart(const char *swarm,
                             void (*set)(it_peer_cfg_t *cfg, size_t i)) {
    it_peer_t peers[4];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = swarm;
    cfg.group_size = 4;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 30000;
    cfg.expect_members = 4;
    size_t up = 0;
    for (size_t i = 0; i < 4; i++) {
        set(&cfg, i);
        if (i > 0)
            snprintf(cfg.bootstrap, sizeof cfg.bootstrap, "%s",
                     peers[0].endpoint);
        up += it_start_nowait(&peers[i], &cfg) == 0;
    }
    for (size_t i = 0; i < 4; i++)
        IT_CHECK(it_wait_ready(&peers[i], 30000) == 4, "peer %zu not ready", i);
    IT_CHECK(up == 4, "%zu of 4 peers started", up);
    if (up != 4)
        return;
    uint64_t gid[4];
    float *v = malloc(1000 * sizeof(float));
    for (size_t i = 0; i < 4; i++)
        IT_CHECK(it_average_async(&peers[i], 1000, 40 + i, 1.0) == 0, "send");
    for (size_t i = 0; i < 4; i++) {
        it_result_t res;
        memset(&res, 0, sizeof(res)); /* read below even if it_collect fails */
        IT_CHECK(it_collect(&peers[i], &res, v, 1000, 60000) == 0 &&
                     res.err == MOSHPIT_OK,
                 "peer %zu", i);
        gid[i] = res.info.round_id;
        IT_CHECK(res.info.group_size == 2, "peer %zu: group of %u", i,
                 res.info.group_size);
    }
    IT_CHECK(gid[0] == gid[2] && gid[1] == gid[3] && gid[0] != gid[1] &&
                 gid[0] != 0 && gid[1] != 0,
             "groups %llx %llx %llx %llx", (unsigned long long)gid[0],
             (unsigned long long)gid[1], (unsigned long long)gid[2],
             (unsigned long long)gid[3]);
    free(v);
    for (size_t i = 0; i < 4; i++)
        it_stop(&peers[i]);
}

int it_release(it_peer_t *p) {
    rec_t c;
    memset(&c, 0, sizeof(c));
    c.type = CMD_RELEASE;
    return send_all(p->fd, &c, sizeof(c));
}
