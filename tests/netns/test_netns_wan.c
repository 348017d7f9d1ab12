/* SPDX-License-Identifier: MIT */
/*
 * test_netns_wan.c - the WAN emulator checked against itself: what nn_link
 * and nn_nat set is what the traffic sees. Four peer namespaces:
 *   peer 0: public, one-way delay 25 ms with +-5 ms jitter
 *   peer 1: public, one-way delay 25 ms, 50 Mbit/s both ways
 *   peer 2: public, 10% random loss of the packets it receives
 *   peer 3: behind NAT router 0
 * Pass rule:
 *   - ping -U from peer 0 to peer 1 (20 echoes): average RTT within 10% of
 *     2 x 25 ms, and the jitter shows (max - min >= 5 ms);
 *   - ping from peer 3 to peer 2 (3000 echoes, 1 ms apart): the echoes
 *     lost are 10% within 5 standard deviations of the binomial
 *     (300 +- 82);
 *   - a 12 MiB TCP transfer from peer 0 to peer 1: the goodput after the
 *     first 2 MiB is within 0.90..1.05 of 50 Mbit/s times the share of
 *     payload in a full frame (1448 of 1514 bytes);
 *   - peer 3 connects to a listener in peer 0 and is seen there with the
 *     router's public address; peer 0 cannot connect to a listener in peer
 *     3, neither at its private address (no route) nor at the router's.
 * With NN_WAN_MISSET=1 the emulator is set wrong on purpose (peer 1's delay
 * 35 ms, peer 2's loss 15%, peer 1's rate 70 Mbit/s, peer 3 not behind
 * the NAT): the RTT, loss, rate and NAT checks must then fail, which shows
 * they can.
 * Needs root, iproute2, nftables, iptables, ethtool, ping and the nn-delay
 * program; skips (77) without them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "netns.h"

#define DELAY_MS 25
#define JITTER_MS 5
#define RATE_MBIT 50
#define LOSS_PERMILLE 100
#define PINGS 3000
#define BULK (12u << 20)
#define BULK_SKIP (2u << 20)

static int g_failed;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        g_failed = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs ping in peer i's namespace; returns its output (static). */
static const char *ping_from(size_t i, const char *args) {
    static char out[4096];
    char cmd[256];
    size_t len = 0;
    out[0] = '\0';
    snprintf(cmd, sizeof(cmd), "ping -n -q %s 2>&1", args);
    if (nn_enter(i) != 0)
        return out;
    FILE *f = popen(cmd, "r");
    (void)nn_enter((size_t)-1);
    if (f == NULL)
        return out;
    size_t got;
    while ((got = fread(out + len, 1, sizeof(out) - 1 - len, f)) > 0)
        len += got;
    out[len] = '\0';
    pclose(f);
    return out;
}

/* A TCP socket in peer i's namespace: listening on its address (port
 * returned in *port) if listen_ != 0, else unconnected. */
static int tcp_socket(size_t i, int listen_, unsigned *port) {
    if (nn_enter(i) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)nn_enter((size_t)-1);
    if (fd < 0 || !listen_)
        return fd;
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    inet_pton(AF_INET, nn_addr(i), &a.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* Connects fd to addr:port within 3 s; 0 if connected, else an errno. */
static int dial(int fd, const char *addr, unsigned port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, addr, &a.sin_addr);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 3000) != 1)
        return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
}

static void check_rtt(void) {
    double mn = 0, avg = 0, mx = 0;
    const char *out = ping_from(0, "-U -c 20 -i 0.05 10.77.0.2");
    const char *line = strstr(out, "rtt min/avg/max");
    if (line == NULL || sscanf(line, "rtt min/avg/max/mdev = %lf/%lf/%lf", &mn,
                               &avg, &mx) != 3) {
        printf("ping output:\n%s\n", out);
        check(0, "ping RTT could not be read");
        return;
    }
    printf("RTT peer 0 <-> peer 1: min %.2f avg %.2f max %.2f ms "
           "(set: 2 x %d ms, jitter +-%d ms on peer 0)\n",
           mn, avg, mx, DELAY_MS, JITTER_MS);
    check(avg >= 0.9 * 2 * DELAY_MS && avg <= 1.1 * 2 * DELAY_MS,
          "average RTT within 10% of 2 x the delay");
    check(mx - mn >= JITTER_MS, "the jitter shows in the RTT spread");
}

static void check_loss(void) {
    char args[128];
    unsigned long sent = 0, got = 0;
    snprintf(args, sizeof(args), "-c %d -i 0.001 -W 2 %s", PINGS, nn_addr(2));
    const char *out = ping_from(3, args);
    const char *line = strstr(out, "packets transmitted");
    while (line != NULL && line > out && line[-1] != '\n')
        line--;
    if (line == NULL ||
        sscanf(line, "%lu packets transmitted, %lu received", &sent, &got) !=
            2 ||
        sent != PINGS) {
        printf("ping output:\n%s\n", out);
        check(0, "ping loss could not be read");
        return;
    }
    /* binomial(3000, 0.1): mean 300, sd 16.4; 5 sd either side */
    unsigned long lost = sent - got;
    printf("loss into peer 2: %lu of %lu echoes lost (%.2f%%; set %.1f%%)\n",
           lost, sent, 100.0 * (double)lost / (double)sent,
           LOSS_PERMILLE / 10.0);
    check(lost >= 218 && lost <= 382, "loss as set (within 5 sd)");
}

static void check_rate(void) {
    unsigned port = 0;
    int lfd = tcp_socket(1, 1, &port), cfd = tcp_socket(0, 0, NULL);
    if (lfd < 0 || cfd < 0 || dial(cfd, nn_addr(1), port) != 0) {
        check(0, "bulk transfer: cannot connect");
        return;
    }
    int rfd = accept(lfd, NULL, NULL);
    close(lfd);
    if (rfd < 0) {
        check(0, "bulk transfer: accept failed");
        return;
    }
    fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
    static char buf[1 << 16];
    memset(buf, 0x5a, sizeof(buf));
    size_t sent = 0, got = 0;
    double t_skip = 0, t_end = 0, deadline = now_s() + 30;
    while (got < BULK && now_s() < deadline) {
        struct pollfd p[2] = {{cfd, sent < BULK ? POLLOUT : 0, 0},
                              {rfd, POLLIN, 0}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLOUT) {
            size_t n = BULK - sent < sizeof(buf) ? BULK - sent : sizeof(buf);
            ssize_t w = send(cfd, buf, n, MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
        }
        if (p[1].revents & POLLIN) {
            ssize_t r;
            while ((r = recv(rfd, buf, sizeof(buf), 0)) > 0) {
                got += (size_t)r;
                if (t_skip == 0 && got >= BULK_SKIP)
                    t_skip = now_s();
            }
        }
    }
    t_end = now_s();
    close(cfd);
    close(rfd);
    if (got < BULK || t_skip == 0) {
        check(0, "bulk transfer did not finish in 30 s");
        return;
    }
    double mbit = (double)(BULK - BULK_SKIP) * 8 / (t_end - t_skip) / 1e6;
    double expect = RATE_MBIT * 1448.0 / 1514.0;
    printf("bulk TCP peer 0 -> peer 1: %.1f Mbit/s of payload (set %d Mbit/s "
           "on the wire = %.1f of payload)\n",
           mbit, RATE_MBIT, expect);
    check(mbit >= 0.90 * expect && mbit <= 1.05 * expect,
          "bulk TCP near the set rate");
}

static void check_nat(void) {
    unsigned port = 0;
    /* out: peer 3 dials a listener in peer 0 */
    int lfd = tcp_socket(0, 1, &port), cfd = tcp_socket(3, 0, NULL);
    int rc = lfd >= 0 && cfd >= 0 ? dial(cfd, nn_addr(0), port) : -1;
    check(rc == 0, "the NAT'd peer dials out");
    if (rc == 0) {
        struct sockaddr_in a;
        socklen_t alen = sizeof(a);
        char seen[32] = "";
        int afd = accept(lfd, (struct sockaddr *)&a, &alen);
        if (afd >= 0) {
            inet_ntop(AF_INET, &a.sin_addr, seen, sizeof(seen));
            close(afd);
        }
        printf("peer 0 sees the NAT'd peer as %s (router: %s)\n", seen,
               nn_nat_addr(0));
        check(strcmp(seen, nn_nat_addr(0)) == 0,
              "it is seen with the router's public address");
    }
    if (lfd >= 0)
        close(lfd);
    if (cfd >= 0)
        close(cfd);
    /* in: peer 0 dials a listener in peer 3 */
    lfd = tcp_socket(3, 1, &port);
    const char *targets[2] = {nn_addr(3), nn_nat_addr(0)};
    for (int t = 0; t < 2; t++) {
        cfd = tcp_socket(0, 0, NULL);
        rc = lfd >= 0 && cfd >= 0 ? dial(cfd, targets[t], port) : -1;
        printf("peer 0 dialling %s:%u: %s\n", targets[t], port,
               rc == 0 ? "connected" : strerror(rc < 0 ? EINVAL : rc));
        check(rc != 0, t == 0 ? "the NAT'd peer cannot be dialled at its "
                                "private address"
                              : "nor at the router's address");
        if (cfd >= 0)
            close(cfd);
    }
    if (lfd >= 0)
        close(lfd);
}

int main(void) {
    const char *m = getenv("NN_WAN_MISSET");
    int misset = m != NULL && strcmp(m, "1") == 0;
    char why[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    nn_open(4);
    if (!nn_can_delay(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        return NN_SKIP;
    }
    if (access("/usr/bin/ping", X_OK) != 0 && access("/bin/ping", X_OK) != 0) {
        printf("SKIP: `ping` not found (install iputils-ping)\n");
        return NN_SKIP;
    }
    if (misset)
        printf("NN_WAN_MISSET=1: the emulator is set wrong on purpose; the "
               "RTT, loss, rate and NAT checks must FAIL\n");
    size_t behind[1] = {3};
    if (!misset && nn_nat(0, behind, 1) != 0) {
        printf("FAIL: cannot set up the NAT\n");
        return 1;
    }
    nn_link_t l0 = {DELAY_MS * 1000, JITTER_MS * 1000, 0, 0, 0};
    nn_link_t l1 = {(misset ? 35 : DELAY_MS) * 1000, 0, 0,
                    misset ? 70 : RATE_MBIT, 0};
    nn_link_t l2 = {0, 0, misset ? 150 : LOSS_PERMILLE, 0, 0};
    if (nn_link(0, &l0) != 0 || nn_link(1, &l1) != 0 || nn_link(2, &l2) != 0) {
        printf("FAIL: cannot set the links\n");
        return 1;
    }
    check_rtt();
    check_loss();
    check_rate();
    check_nat();
    printf("%s\n", g_failed ? "FAILED" : "all checks passed");
    return g_failed;
}
