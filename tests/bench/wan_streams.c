/* SPDX-License-Identifier: MIT */
/*
 * wan_streams.c - moshpit-bench-streams: what K parallel TCP streams carry
 * between two namespaces of the emulated network (tests/netns) with a
 * given delay, rate, loss and congestion control. It tells whether one
 * stream per pair is window- or loss-bound on a link (the Mathis bound:
 * about MSS / RTT * 1.22 / sqrt(p) for Reno-like control) and how many
 * streams fill it. Peer 0 sends to peer 1 for --seconds over --streams
 * connections (TCP_CONGESTION set per socket), all in this one process;
 * prints the goodput of all streams together and per stream, and the
 * sender's mean congestion window (TCP_INFO) at the end. Needs root;
 * exits 77 with "SKIP: ..." where the test bed cannot run.
 *
 *   moshpit-bench-streams [--streams K] [--cc ALGO] [--seconds S]
 *       [--delay-ms D] [--rate-mbit R] [--loss-pct P]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "netns.h"

#define MAX_STREAMS 64

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int sock_in(size_t peer, const char *cc) {
    if (nn_enter(peer) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)nn_enter((size_t)-1);
    if (fd >= 0 && cc != NULL &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc,
                   (socklen_t)strlen(cc)) != 0) {
        fprintf(stderr, "TCP_CONGESTION %s: %s\n", cc, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv) {
    int k = 1;
    double secs = 10, delay = 50, loss = 1;
    unsigned rate = 100;
    const char *cc = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (strcmp(o, "--streams") == 0)
            k = atoi(v);
        else if (strcmp(o, "--cc") == 0)
            cc = v;
        else if (strcmp(o, "--seconds") == 0)
            secs = atof(v);
        else if (strcmp(o, "--delay-ms") == 0)
            delay = atof(v);
        else if (strcmp(o, "--rate-mbit") == 0)
            rate = (unsigned)atoi(v);
        else if (strcmp(o, "--loss-pct") == 0)
            loss = atof(v);
        else
            k = -1;
    }
    if (argc % 2 != 1 || k < 1 || k > MAX_STREAMS || secs <= 0 || delay < 0 ||
        loss < 0 || loss > 100) {
        fprintf(stderr, "usage: moshpit-bench-streams [--streams K] [--cc "
                        "ALGO] [--seconds S]\n"
                        "       [--delay-ms D] [--rate-mbit R] [--loss-pct "
                        "P]\n");
        return 2;
    }
    char why[256];
    nn_open(2);
    if (delay > 0 && !nn_can_delay(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        return NN_SKIP;
    }
    nn_link_t l = {(unsigned)(delay * 1000 + 0.5), 0,
                   (unsigned)(loss * 10 + 0.5), rate, 0};
    if (nn_link(0, &l) != 0 || nn_link(1, &l) != 0)
        return 1;

    int lfd = sock_in(1, cc), snd[MAX_STREAMS], rcv[MAX_STREAMS];
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    inet_pton(AF_INET, nn_addr(1), &a.sin_addr);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(lfd, MAX_STREAMS) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
        return 1;
    for (int i = 0; i < k; i++) {
        snd[i] = sock_in(0, cc);
        if (snd[i] < 0 || connect(snd[i], (struct sockaddr *)&a, alen) != 0)
            return 1;
        rcv[i] = accept(lfd, NULL, NULL);
        if (rcv[i] < 0)
            return 1;
        fcntl(snd[i], F_SETFL, fcntl(snd[i], F_GETFL) | O_NONBLOCK);
        fcntl(rcv[i], F_SETFL, fcntl(rcv[i], F_GETFL) | O_NONBLOCK);
    }
    static char buf[1 << 16];
    unsigned long long got[MAX_STREAMS] = {0}, total = 0;
    double t0 = now_s(), end = t0 + secs;
    struct pollfd p[2 * MAX_STREAMS];
    while (now_s() < end) {
        for (int i = 0; i < k; i++) {
            p[2 * i] = (struct pollfd){snd[i], POLLOUT, 0};
            p[2 * i + 1] = (struct pollfd){rcv[i], POLLIN, 0};
        }
        if (poll(p, (nfds_t)(2 * k), 100) < 0 && errno != EINTR)
            return 1;
        for (int i = 0; i < k; i++) {
            if (p[2 * i].revents & POLLOUT)
                (void)send(snd[i], buf, sizeof(buf), MSG_NOSIGNAL);
            ssize_t r;
            while ((r = recv(rcv[i], buf, sizeof(buf), 0)) > 0) {
                got[i] += (unsigned long long)r;
                total += (unsigned long long)r;
            }
        }
    }
    double dt = now_s() - t0, cwnd = 0;
    char algo[16] = "";
    socklen_t alg = sizeof(algo);
    getsockopt(snd[0], IPPROTO_TCP, TCP_CONGESTION, algo, &alg);
    for (int i = 0; i < k; i++) {
        struct tcp_info ti;
        socklen_t tl = sizeof(ti);
        if (getsockopt(snd[i], IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0)
            cwnd += ti.tcpi_snd_cwnd;
    }
    printf("streams %d  cc %s  RTT %.0f ms  rate %u Mbit/s  loss %.1f%%:  "
           "%.1f Mbit/s in all, %.2f per stream, mean cwnd %.0f segments\n",
           k, algo, 2 * delay, rate, loss, (double)total * 8 / dt / 1e6,
           (double)total * 8 / dt / 1e6 / k, cwnd / k);
    return 0;
}
