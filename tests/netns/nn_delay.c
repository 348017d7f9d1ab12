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
 * It wakes at most once per --grain-us (default 500 us) while it holds
 * packets, not once per packet: at 100 Mbit/s a link carries 8,000 packets
 * a second, and on a virtual machine where a context switch is dear, eight
 * delay lines waking for each of them took more of the CPU than the peers
 * did. A packet's time is counted from when the kernel received it (the
 * queue's timestamp, which a socket with SO_TIMESTAMP turns on), not from
 * when this program read it, and each wake lets through the packets due
 * within half a grain of it: a packet leaves within +-grain/2 of its time.
 * Where the kernel gives no timestamp, it reads the queue at least once a
 * grain and counts from then. --grain-us 0 wakes for every packet.
 *
 *   nn-delay --queue N --delay-us D [--jitter-us J] [--seed S]
 *            [--max P] [--grain-us G] [--ready-fd FD]
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
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef struct held {
    uint32_t id;
    uint64_t due_ns;
} held_t;

static held_t *g_ring;
static size_t g_cap, g_head, g_len;
static uint64_t g_delay_ns, g_jitter_ns, g_last_due, g_rng, g_grain_ns;
static unsigned long g_dropped, g_unstamped;
/* packets without a timestamp in the last read of the queue */
static unsigned long g_unstamped_now;
/* the two clocks read just before the queue is read: a kernel timestamp
 * (wall clock) becomes a monotonic arrival time through them */
static uint64_t g_read_mono, g_read_real;

static uint64_t clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void) {
    return clock_ns(CLOCK_MONOTONIC);
}

/* When the kernel received the packet, on the monotonic clock; the time it
 * is read where the kernel gave no timestamp. */
static uint64_t arrival_ns(struct nfq_data *nfa) {
    struct timeval tv;
    if (nfq_get_timestamp(nfa, &tv) != 0) {
        g_unstamped_now++;
        if (g_unstamped++ == 0)
            fprintf(stderr, "nn-delay: a packet without a timestamp: "
                            "arrivals are counted from when they are read\n");
        return now_ns();
    }
    uint64_t real =
        (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
    uint64_t ago = g_read_real > real ? g_read_real - real : 0;
    if (ago > 1000000000ull) { /* the wall clock jumped: do not trust it */
        g_unstamped_now++;
        return now_ns();
    }
    return g_read_mono > ago ? g_read_mono - ago : 0;
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
    uint64_t due = arrival_ns(nfa) + g_delay_ns;
    if (g_jitter_ns > 0)
        due = due - g_jitter_ns + next_rand() % (2 * g_jitter_ns + 1);
    if (due < g_last_due)
        due = g_last_due;
    g_last_due = due;
    g_ring[(g_head + g_len) % g_cap] = (held_t){id, due};
    g_len++;
    return 0;
}

/* Lets every packet whose time has come (within half a grain) through with
 * one verdict. */
static void release(struct nfq_q_handle *qh) {
    uint64_t t = now_ns() + g_grain_ns / 2;
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
                    "[--seed S] [--max P] [--grain-us G] [--ready-fd FD]\n");
    exit(2);
}

int main(int argc, char **argv) {
    long queue = -1, ready_fd = -1;
    unsigned long long delay_us = 0, jitter_us = 0, seed = 1, max = 65536;
    unsigned long long grain_us = 500;
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
        else if (strcmp(k, "--grain-us") == 0 && x <= 100000ull)
            grain_us = x;
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
    g_grain_ns = grain_us * 1000ull;
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
    /* A socket asking for receive timestamps makes the kernel stamp every
     * packet it receives, so the queue hands each one's arrival time. */
    int stamp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (stamp_fd >= 0)
        (void)setsockopt(stamp_fd, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one));
    if (ready_fd >= 0) {
        if (write((int)ready_fd, "ready\n", 6) != 6)
            return 1;
        close((int)ready_fd);
    }

    static char buf[65536] __attribute__((aligned));
    uint64_t last_wake = 0;
    for (;;) {
        if (g_len == 0 || g_grain_ns == 0) {
            /* nothing held (wait for a packet) or one wake per packet */
            struct timespec ts, *tp = NULL;
            if (g_len > 0) {
                uint64_t t = now_ns(), due = g_ring[g_head].due_ns;
                uint64_t wait = due > t ? due - t : 0;
                ts.tv_sec = (time_t)(wait / 1000000000ull);
                ts.tv_nsec = (long)(wait % 1000000000ull);
                tp = &ts;
            }
            struct pollfd p = {fd, POLLIN, 0};
            if (ppoll(&p, 1, tp, NULL) < 0 && errno != EINTR) {
                fprintf(stderr, "nn-delay: poll: %s\n", strerror(errno));
                return 1;
            }
        } else {
            /* Packets held: sleep until the first is due (half a grain
             * early), but at least a grain since the last wake, and read
             * the queue at least every 10 grains (every grain without
             * timestamps) so that arrivals are counted from near enough
             * and the socket never fills. */
            uint64_t due = g_ring[g_head].due_ns, half = g_grain_ns / 2;
            uint64_t at = due > half ? due - half : 0;
            uint64_t soonest = last_wake + g_grain_ns;
            uint64_t latest =
                last_wake + (g_unstamped_now > 0 ? 1 : 10) * g_grain_ns;
            if (at < soonest)
                at = soonest;
            if (at > latest)
                at = latest;
            struct timespec ts = {(time_t)(at / 1000000000ull),
                                  (long)(at % 1000000000ull)};
            int r;
            while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
                                        NULL)) == EINTR)
                ;
            if (r != 0) {
                fprintf(stderr, "nn-delay: sleep: %s\n", strerror(r));
                return 1;
            }
        }
        last_wake = now_ns();
        g_read_real = clock_ns(CLOCK_REALTIME);
        g_read_mono = now_ns();
        g_unstamped_now = 0;
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
        release(qh);
    }
}
