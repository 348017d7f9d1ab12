/* SPDX-License-Identifier: MIT */
/*
 * nn_delay.c - the link emulator's delay line: a small program that runs
 * inside one namespace of the test bed, takes the packets an iptables
 * NFQUEUE rule in that namespace's PREROUTING hands it (the packets the
 * namespace receives) and lets each one through only once its time has
 * come: arrival + delay + a uniform jitter in [-jitter, +jitter]. A packet
 * never overtakes the one before it (its release time is at least the
 * previous one's), so jitter delays but never reorders, as on one real
 * link. Packets are released in arrival order, so one batch verdict lets
 * all the due ones through at once. It holds at most --max packets (beyond
 * that it drops, like a full router queue) and reads only their metadata,
 * never their payload. It writes "ready\n" to --ready-fd once the queue is
 * bound and runs until killed (the test bed sets PR_SET_PDEATHSIG). It
 * runs at real-time priority where it may, so that a busy machine delays
 * packets by the set delay and not by however long the scheduler keeps it
 * waiting.
 *
 *   nn-delay --queue N --delay-us D [--jitter-us J] [--seed S]
 *            [--max P] [--ready-fd FD]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct held {
    uint32_t id;
    uint64_t due_ns;
} held_t;

static held_t *g_ring;
static size_t g_cap, g_head, g_len;
static uint64_t g_delay_ns, g_jitter_ns, g_last_due, g_rng;
static unsigned long g_dropped;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t next_rand(void) {
    /* xorshift64*: enough for jitter */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg,
                     struct nfq_data *nfa, void *data) {
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    (void)msg;
    (void)data;
    if (ph == NULL)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (g_len == g_cap) {
        g_dropped++;
        return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
    }
    uint64_t due = now_ns() + g_delay_ns;
    if (g_jitter_ns > 0)
        due = due - g_jitter_ns + next_rand() % (2 * g_jitter_ns + 1);
    if (due < g_last_due)
        due = g_last_due;
    g_last_due = due;
    g_ring[(g_head + g_len) % g_cap] = (held_t){id, due};
    g_len++;
    return 0;
}

/* Lets every packet whose time has come through with one verdict. */
static void release(struct nfq_q_handle *qh) {
    uint64_t t = now_ns();
    uint32_t last = 0;
    size_t n = 0;
    while (n < g_len && g_ring[(g_head + n) % g_cap].due_ns <= t) {
        last = g_ring[(g_head + n) % g_cap].id;
        n++;
    }
    if (n == 0)
        return;
    if (nfq_set_verdict_batch(qh, last, NF_ACCEPT) < 0)
        fprintf(stderr, "nn-delay: verdict failed: %s\n", strerror(errno));
    g_head = (g_head + n) % g_cap;
    g_len -= n;
}

static void usage(void) {
    fprintf(stderr, "usage: nn-delay --queue N --delay-us D [--jitter-us J] "
                    "[--seed S] [--max P] [--ready-fd FD]\n");
    exit(2);
}

int main(int argc, char **argv) {
    long queue = -1, ready_fd = -1;
    unsigned long long delay_us = 0, jitter_us = 0, seed = 1, max = 65536;
    int have_delay = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        char *end;
        unsigned long long x = strtoull(v, &end, 10);
        if (*v == '\0' || *end != '\0')
            usage();
        if (strcmp(k, "--queue") == 0 && x <= 65535)
            queue = (long)x;
        else if (strcmp(k, "--delay-us") == 0 && x <= 10000000ull)
            delay_us = x, have_delay = 1;
        else if (strcmp(k, "--jitter-us") == 0 && x <= 10000000ull)
            jitter_us = x;
        else if (strcmp(k, "--seed") == 0)
            seed = x;
        else if (strcmp(k, "--max") == 0 && x >= 16 && x <= 4000000)
            max = x;
        else if (strcmp(k, "--ready-fd") == 0 && x <= 1024)
            ready_fd = (long)x;
        else
            usage();
    }
    if (queue < 0 || !have_delay || argc % 2 != 1)
        usage();
    if (jitter_us > delay_us)
        jitter_us = delay_us; /* a packet cannot arrive before it was sent */
    g_delay_ns = delay_us * 1000ull;
    g_jitter_ns = jitter_us * 1000ull;
    g_rng = seed * 0x9e3779b97f4a7c15ull + 1;
    g_cap = (size_t)max;
    g_ring = calloc(g_cap, sizeof(*g_ring));
    if (g_ring == NULL)
        return 1;

    struct nfq_handle *h = nfq_open();
    if (h == NULL) {
        fprintf(stderr, "nn-delay: nfq_open: %s\n", strerror(errno));
        return 1;
    }
    struct nfq_q_handle *qh =
        nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (qh == NULL) {
        fprintf(stderr, "nn-delay: cannot bind queue %ld: %s\n", queue,
                strerror(errno));
        return 1;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 ||
        nfq_set_queue_maxlen(qh, (uint32_t)max) < 0) {
        fprintf(stderr, "nn-delay: cannot configure the queue\n");
        return 1;
    }
    /* A link does not wait for a CPU: where allowed, run before the
     * benchmark's processes (it only wakes for packets and due times, so
     * it cannot starve them; the kernel's RT throttling bounds it too). */
    struct sched_param sp = {.sched_priority = 1};
    (void)sched_setscheduler(0, SCHED_FIFO, &sp);
    /* Segmentation-offloaded packets (links with offloads on) pass whole:
     * nothing here reads or changes the payload, so the kernel need not
     * cut them into MTU-sized packets first, one verdict each. */
    (void)nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
    int fd = nfq_fd(h);
    /* a burst of metadata messages must not overflow the socket */
    (void)nfnl_rcvbufsiz(nfq_nfnlh(h), 16u << 20);
    int one = 1;
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
    if (ready_fd >= 0) {
        if (write((int)ready_fd, "ready\n", 6) != 6)
            return 1;
        close((int)ready_fd);
    }

    static char buf[65536] __attribute__((aligned));
    for (;;) {
        struct timespec ts, *tp = NULL;
        if (g_len > 0) {
            uint64_t t = now_ns(), due = g_ring[g_head].due_ns;
            uint64_t wait = due > t ? due - t : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
            tp = &ts;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = ppoll(&p, 1, tp, NULL);
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "nn-delay: poll: %s\n", strerror(errno));
            return 1;
        }
        if (r > 0) {
            for (;;) {
                ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (got < 0 && errno == EINTR)
                    continue;
                if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    break;
                if (got < 0 && errno == ENOBUFS)
                    continue; /* lost messages: those packets are lost */
                if (got <= 0) {
                    fprintf(stderr, "nn-delay: recv: %s\n", strerror(errno));
                    return 1;
                }
                nfq_handle_packet(h, buf, (int)got);
            }
        }
        release(qh);
    }
}
