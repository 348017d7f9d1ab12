/* SPDX-License-Identifier: MIT */
/*
 * test_tcp_cc.c - congestion control per socket (platform/platform.h) on a
 * real loopback TCP connection: set and read back, and a restart that
 * drops the model BBR built of the path while the connection keeps its
 * bytes in order; bad descriptors give an error, never a crash. Where the
 * kernel or this process cannot pick bbr (or does not report BBR's model)
 * the BBR checks are skipped with a reason; the rest still runs.
 */
#define _DEFAULT_SOURCE 1 /* struct tcp_info */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/inet_diag.h>
#endif

#include "platform.h"
#include "test_util.h"

/* A connected pair on 127.0.0.1: *a dialled, *b accepted. */
static int tcp_pair(int *a, int *b) {
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(l, 1) != 0 || getsockname(l, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    *a = socket(AF_INET, SOCK_STREAM, 0);
    if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return -1;
    *b = accept(l, NULL, NULL);
    close(l);
    return *b >= 0 ? 0 : -1;
}

/* Sends n bytes from a to b, reading them as they come (one thread, both
 * ends polled), and checks they arrive in order: byte i is (seed + i). */
static int pump(int a, int b, size_t n, unsigned seed) {
    static unsigned char out[65536], in[65536];
    size_t sent = 0, got = 0;
    while (got < n) {
        struct pollfd p[2] = {{a, sent < n ? POLLOUT : 0, 0}, {b, POLLIN, 0}};
        if (poll(p, 2, 10000) <= 0)
            return -1;
        if (p[0].revents & POLLOUT) {
            size_t k = n - sent < sizeof(out) ? n - sent : sizeof(out);
            for (size_t i = 0; i < k; i++)
                out[i] = (unsigned char)(seed + sent + i);
            ssize_t w = send(a, out, k, MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN)
                return -1;
            sent += w > 0 ? (size_t)w : 0;
        }
        if (p[1].revents & POLLIN) {
            ssize_t r = recv(b, in, sizeof(in), MSG_DONTWAIT);
            if (r <= 0)
                return r == 0 || errno != EAGAIN ? -1 : 0;
            for (ssize_t i = 0; i < r; i++)
                if (in[i] != (unsigned char)(seed + got + (size_t)i))
                    return -2;
            got += (size_t)r;
        }
    }
    return 0;
}

#if defined(__linux__) && defined(TCP_CC_INFO)
/* BBR's bandwidth estimate of fd (bytes per second scaled as the kernel
 * reports it), or -1 where the kernel does not say. */
static long long bbr_bw(int fd) {
    union tcp_cc_info ci;
    socklen_t len = sizeof(ci);
    memset(&ci, 0, sizeof(ci));
    if (getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &ci, &len) != 0 ||
        len < sizeof(ci.bbr))
        return -1;
    return (long long)((uint64_t)ci.bbr.bbr_bw_hi << 32 | ci.bbr.bbr_bw_lo);
}
#else
static long long bbr_bw(int fd) {
    (void)fd;
    return -1;
}
#endif

/* Waits (polling, at most 5 s) until nothing a sent is unacknowledged. */
static int all_acked(int a) {
    for (int i = 0; i < 5000; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        memset(&ti, 0, sizeof(ti));
        if (getsockopt(a, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
            return 0;
        if (ti.tcpi_unacked == 0)
            return 1;
        struct pollfd none = {-1, 0, 0};
        (void)poll(&none, 0, 1);
    }
    return 0;
}

static void test_bbr_restart(void) {
    int e = mp_plat_tcp_cc_probe("bbr");
    if (e != 0) {
        printf("SKIP bbr checks: this process cannot pick bbr (%s)\n",
               strerror(e));
        return;
    }
    int a = -1, b = -1;
    CHECK(tcp_pair(&a, &b) == 0, "loopback pair: %s", strerror(errno));
    if (a < 0 || b < 0)
        return;
    CHECK(mp_plat_tcp_cc_set(a, "bbr") == 0, "bbr set");
    char name[MP_PLAT_CC_NAME_MAX];
    e = mp_plat_tcp_cc_get(a, name);
    if (e != 0) {
        /* qemu-user passes some socket options on and not others */
        printf("SKIP bbr checks: the algorithm cannot be read back (%s)\n",
               strerror(e));
        close(a);
        close(b);
        return;
    }
    CHECK(strcmp(name, "bbr") == 0, "bbr read back: %s", name);
    /* enough bytes for BBR to measure the path */
    CHECK(pump(a, b, (size_t)8 << 20, 1) == 0, "8 MiB in order");
    long long before = bbr_bw(a);
    if (before < 0) {
        printf("SKIP the model checks: the kernel does not report BBR's "
               "state (TCP_CC_INFO)\n");
    } else {
        CHECK(before > 0, "BBR measured the path: %lld", before);
        /* Linux ignores setting the algorithm a socket has: the model
         * stays, which is why the restart switches away and back */
        (void)mp_plat_tcp_cc_set(a, "bbr");
        printf("bbr set again: estimate %lld before, %lld after\n", before,
               bbr_bw(a));
    }
    /* every byte acknowledged first: a late ACK would give the new model
     * a sample */
    CHECK(all_acked(a), "everything sent was acknowledged within 5 s");
    CHECK(mp_plat_tcp_cc_restart(a) == 0, "restart");
    CHECK(mp_plat_tcp_cc_get(a, name) == 0 && strcmp(name, "bbr") == 0,
          "still bbr after the restart: %s", name);
    if (before > 0)
        CHECK(bbr_bw(a) == 0, "the model is new: estimate %lld (was %lld)",
              bbr_bw(a), before);
    /* the connection goes on: later bytes arrive whole and in order */
    CHECK(pump(a, b, (size_t)2 << 20, 7) == 0, "2 MiB in order after it");
    if (before > 0)
        CHECK(bbr_bw(a) > 0, "and BBR measures the path again: %lld",
              bbr_bw(a));
    close(a);
    close(b);
}

static void test_restart_plain(void) {
    /* any algorithm the socket has: reno goes through cubic and back
     * where cubic may be picked, else it stays as it was */
    int a = -1, b = -1;
    CHECK(tcp_pair(&a, &b) == 0, "loopback pair: %s", strerror(errno));
    if (a < 0 || b < 0)
        return;
    char was[MP_PLAT_CC_NAME_MAX], name[MP_PLAT_CC_NAME_MAX];
    int e = mp_plat_tcp_cc_get(a, was);
    if (e != 0) {
        /* no congestion control per socket here (ENOTSUP), or the
         * option is not passed on (qemu-user): the restart fails too */
        printf("SKIP: the algorithm cannot be read here (%s)\n", strerror(e));
        CHECK(mp_plat_tcp_cc_restart(a) != 0, "restart fails as well");
        close(a);
        close(b);
        return;
    }
    e = mp_plat_tcp_cc_restart(a);
    CHECK(mp_plat_tcp_cc_get(a, name) == 0, "read after the restart");
    if (e == 0)
        CHECK(strcmp(name, was) == 0, "restart keeps %s: %s", was, name);
    else
        printf("restart of %s: %s (%s now)\n", was, strerror(e), name);
    CHECK(pump(a, b, (size_t)1 << 20, 3) == 0, "1 MiB in order after it");
    if (mp_plat_tcp_cc_set(a, "reno") == 0) {
        e = mp_plat_tcp_cc_restart(a);
        CHECK(mp_plat_tcp_cc_get(a, name) == 0 && strcmp(name, "reno") == 0,
              "reno restarted (via cubic: %s) stays reno: %s",
              e == 0 ? "yes" : strerror(e), name);
    }
    close(a);
    close(b);
}

static void test_bad_fd(void) {
    /* errors, never a crash: a closed descriptor, a negative one, and a
     * descriptor that is no socket */
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    CHECK(mp_plat_tcp_cc_restart(-1) != 0, "restart(-1) fails");
    CHECK(mp_plat_tcp_cc_restart(fds[0]) != 0, "restart(pipe) fails");
    close(fds[0]);
    close(fds[1]);
    CHECK(mp_plat_tcp_cc_restart(fds[0]) != 0, "restart(closed) fails");
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    if (u >= 0) {
        CHECK(mp_plat_tcp_cc_restart(u) != 0, "restart(UDP socket) fails");
        close(u);
    }
}

int main(void) {
    test_bbr_restart();
    test_restart_plain();
    test_bad_fd();
    return test_summary("test_tcp_cc");
}
