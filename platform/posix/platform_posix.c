/* SPDX-License-Identifier: MIT */
/*
 * platform_posix.c - the OS contract of platform.h on POSIX systems:
 * pthread mutexes, condition variables waiting on CLOCK_MONOTONIC, threads,
 * the monotonic clock, the wall clock (seconds), sleeping, and TCP
 * congestion control per socket.
 */
#include "platform.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/inet_diag.h>
#endif

int mp_plat_mutex_init(mp_plat_mutex_t *m) {
    return pthread_mutex_init(&m->m, NULL);
}

void mp_plat_mutex_destroy(mp_plat_mutex_t *m) {
    pthread_mutex_destroy(&m->m);
}

void mp_plat_mutex_lock(mp_plat_mutex_t *m) {
    pthread_mutex_lock(&m->m);
}

void mp_plat_mutex_unlock(mp_plat_mutex_t *m) {
    pthread_mutex_unlock(&m->m);
}

int mp_plat_cond_init(mp_plat_cond_t *c) {
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&c->c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

void mp_plat_cond_destroy(mp_plat_cond_t *c) {
    pthread_cond_destroy(&c->c);
}

void mp_plat_cond_broadcast(mp_plat_cond_t *c) {
    pthread_cond_broadcast(&c->c);
}

int mp_plat_cond_wait_until(mp_plat_cond_t *c, mp_plat_mutex_t *m,
                            uint64_t deadline_ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_ms / 1000u);
    ts.tv_nsec = (long)(deadline_ms % 1000u) * 1000000L;
    return pthread_cond_timedwait(&c->c, &m->m, &ts);
}

typedef struct thread_start {
    void (*fn)(void *);
    void *arg;
} thread_start_t;

static void *thread_main(void *p) {
    thread_start_t s = *(thread_start_t *)p;
    free(p);
    s.fn(s.arg);
    return NULL;
}

int mp_plat_thread_start(mp_plat_thread_t *t, void (*fn)(void *), void *arg) {
    thread_start_t *s = malloc(sizeof(*s));
    if (s == NULL)
        return ENOMEM;
    s->fn = fn;
    s->arg = arg;
    int rc = pthread_create(&t->t, NULL, thread_main, s);
    if (rc != 0)
        free(s);
    return rc;
}

void mp_plat_thread_join(mp_plat_thread_t *t) {
    pthread_join(t->t, NULL);
}

uint64_t mp_plat_clock_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mp_plat_clock_ms(void) {
    return mp_plat_clock_us() / 1000u;
}

uint64_t mp_plat_wallclock_us(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mp_plat_wallclock_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
        return 0;
    return (uint64_t)ts.tv_sec;
}

void mp_plat_sleep_ms(uint32_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000u,
                          .tv_nsec = (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

#if defined(TCP_CONGESTION)
int mp_plat_tcp_cc_set(int fd, const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= MP_PLAT_CC_NAME_MAX)
        return EINVAL;
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)n) != 0)
        return errno != 0 ? errno : EIO;
    return 0;
}

int mp_plat_tcp_cc_get(int fd, char out[MP_PLAT_CC_NAME_MAX]) {
    char buf[MP_PLAT_CC_NAME_MAX + 1];
    socklen_t len = MP_PLAT_CC_NAME_MAX;
    memset(buf, 0, sizeof(buf));
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) != 0)
        return errno != 0 ? errno : EIO;
    buf[MP_PLAT_CC_NAME_MAX - 1] = '\0';
    memcpy(out, buf, MP_PLAT_CC_NAME_MAX);
    return 0;
}

/* A TCP socket that is never connected: what a new socket gets. */
static int probe_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        fd = socket(AF_INET6, SOCK_STREAM, 0);
    return fd;
}

int mp_plat_tcp_cc_probe(const char *name) {
    int fd = probe_socket();
    if (fd < 0)
        return errno != 0 ? errno : EIO;
    int e = mp_plat_tcp_cc_set(fd, name);
    close(fd);
    return e;
}

int mp_plat_tcp_cc_default(char out[MP_PLAT_CC_NAME_MAX]) {
    int fd = probe_socket();
    if (fd < 0)
        return errno != 0 ? errno : EIO;
    int e = mp_plat_tcp_cc_get(fd, out);
    close(fd);
    return e;
}

int mp_plat_tcp_bbr_bw(int fd, uint64_t *bytes_per_s) {
#if defined(__linux__) && defined(TCP_CC_INFO)
    union tcp_cc_info ci;
    socklen_t len = sizeof(ci);
    memset(&ci, 0, sizeof(ci));
    if (getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &ci, &len) != 0)
        return errno != 0 ? errno : EIO;
    char name[MP_PLAT_CC_NAME_MAX];
    if (len < sizeof(ci.bbr) || mp_plat_tcp_cc_get(fd, name) != 0 ||
        strncmp(name, "bbr", 3) != 0)
        return ENOTSUP;
    *bytes_per_s = (uint64_t)ci.bbr.bbr_bw_hi << 32 | ci.bbr.bbr_bw_lo;
    return 0;
#else
    (void)fd;
    (void)bytes_per_s;
    return ENOTSUP;
#endif
}

int mp_plat_tcp_cc_restart(int fd) {
    char now[MP_PLAT_CC_NAME_MAX];
    int e = mp_plat_tcp_cc_get(fd, now);
    if (e != 0)
        return e;
    e = strcmp(now, "reno") == 0 ? EPERM : mp_plat_tcp_cc_set(fd, "reno");
    if (e != 0 && strcmp(now, "cubic") != 0)
        e = mp_plat_tcp_cc_set(fd, "cubic");
    if (e != 0)
        return e;
    return mp_plat_tcp_cc_set(fd, now);
}
#endif

int mp_plat_sock_cookie(int fd, uint64_t *cookie) {
#if defined(SO_COOKIE)
    uint64_t c = 0;
    socklen_t len = sizeof(c);
    if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) != 0)
        return errno != 0 ? errno : EIO;
    if (len != sizeof(c))
        return ENOTSUP;
    *cookie = c;
    return 0;
#else
    (void)fd;
    (void)cookie;
    return ENOTSUP;
#endif
}

#if !defined(TCP_CONGESTION)
int mp_plat_tcp_cc_set(int fd, const char *name) {
    (void)fd;
    (void)name;
    return ENOTSUP;
}

int mp_plat_tcp_cc_get(int fd, char out[MP_PLAT_CC_NAME_MAX]) {
    (void)fd;
    out[0] = '\0';
    return ENOTSUP;
}

int mp_plat_tcp_cc_restart(int fd) {
    (void)fd;
    return ENOTSUP;
}

int mp_plat_tcp_bbr_bw(int fd, uint64_t *bytes_per_s) {
    (void)fd;
    (void)bytes_per_s;
    return ENOTSUP;
}

int mp_plat_tcp_cc_probe(const char *name) {
    (void)name;
    return ENOTSUP;
}

int mp_plat_tcp_cc_default(char out[MP_PLAT_CC_NAME_MAX]) {
    out[0] = '\0';
    return ENOTSUP;
}
#endif
