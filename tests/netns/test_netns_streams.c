/* SPDX-License-Identifier: MIT */
/*
 * test_netns_streams.c - the data connections on a lossy link: 4 peers,
 * one per namespace, every link dropping 1% of the packets each way, with
 * config congestion "reno" (an algorithm every process may pick and not
 * the namespaces' default) and data_streams 3.
 *
 * Pass rule:
 * - 4 rounds of fresh vectors of 2^20 floats, all four in one group: every
 *   call returns MOSHPIT_OK in time, nobody is dropped, and every peer
 *   holds the exact weighted mean of the four (parts that travel on three
 *   connections arrive out of order; the receive window must take every
 *   one of them once);
 * - in each namespace, as the kernel reports it (ss -tin): the connections
 *   of the data plane use reno on both ends and the control connections
 *   keep the namespace's default: 3 outgoing data connections to each of
 *   the 3 others, 3 accepted from each (18 reno connections), and 6
 *   control connections that are not reno;
 * - the parts are striped: to each of the others at least 2 of the 3
 *   outgoing data connections carried 256 KiB or more (a part).
 * No assertion on speed; the round times are printed.
 *
 * With the argument "auto": data_streams 0 (the library's choice: 4 per
 * peer where the data connections are loss-based) and every link also
 * delayed 10 ms each way (RTT 20 ms), where 4 reno connections at 1% loss
 * carry far less than the 100 Mbit/s the library aims for. The rounds
 * must be exact as above, and after them every peer must have 8 outgoing
 * data connections to each of the others and 8 accepted from each (the
 * connections widened once the kernel's counters showed the loss), 48
 * reno connections in each namespace.
 *
 * With the argument "nat": data_streams 3, every link delayed 10 ms each
 * way and dropping 1% (as with "auto"), and peers 2 and 3 behind one NAT
 * (outbound-only: they dial every connection and reduce no share). The
 * rounds must be exact as above, and in the namespaces of peers 2 and 3
 * each of peers 0 and 1 must have 3 reno data connections from it (the
 * ones it sends on; it is answered on one more), at least 2 of them
 * having carried a part. The round times are printed: with one
 * connection to send on (the library before 2026-11-27) the outbound-only
 * peers' uploads were one loss-bound flow per reducer.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swarm.h"

#define N 4
#define STREAMS_SET 3  /* data_streams without "auto" */
#define STREAMS_WIDE 8 /* with "auto": MP_DATA_STREAMS_LOSSY */
#define COUNT (1u << 20)
#define ROUNDS 4
#define PART_BYTES (256u * 1024u)

static unsigned streams = STREAMS_SET; /* expected per destination */

typedef struct conn {
    char local[64], peer[64];
    int reno;
    unsigned long long acked;
} conn_t;

/* The established TCP connections of namespace i (at most cap). */
static size_t list_conns(size_t i, conn_t *c, size_t cap) {
    if (nn_enter(i) != 0)
        return 0;
    FILE *f = popen("ss -tin state established 2>/dev/null", "r");
    size_t n = 0;
    char line[4096];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        char a[64], b[64];
        unsigned long rq, sq;
        if (sscanf(line, "%lu %lu %63s %63s", &rq, &sq, a, b) == 4 && n < cap) {
            memset(&c[n], 0, sizeof(c[n]));
            snprintf(c[n].local, sizeof(c[n].local), "%s", a);
            snprintf(c[n].peer, sizeof(c[n].peer), "%s", b);
            n++;
            continue;
        }
        if (n == 0 || (line[0] != '\t' && line[0] != ' '))
            continue;
        /* the info line of the connection above */
        c[n - 1].reno = strstr(line, " reno ") != NULL ||
                        strncmp(line + strspn(line, " \t"), "reno ", 5) == 0;
        const char *ba = strstr(line, "bytes_acked:");
        if (ba != NULL)
            c[n - 1].acked = strtoull(ba + 12, NULL, 10);
    }
    if (f != NULL)
        pclose(f);
    nn_enter((size_t)-1);
    return n;
}

static const char *port_of(const char *addr) {
    const char *c = strrchr(addr, ':');
    return c != NULL ? c + 1 : "";
}

/* Checks namespace i: see the pass rule. */
static void check_conns(size_t i) {
    conn_t c[256];
    size_t n = list_conns(i, c, 256);
    /* the data listener's port: the local port shared by the accepted
     * reno connections */
    const char *dport = NULL;
    for (size_t k = 0; k < n && dport == NULL; k++)
        for (size_t j = k + 1; j < n; j++)
            if (c[k].reno && c[j].reno &&
                strcmp(port_of(c[k].local), port_of(c[j].local)) == 0) {
                dport = port_of(c[k].local);
                break;
            }
    size_t reno = 0, other = 0, accepted = 0;
    for (size_t k = 0; k < n; k++) {
        reno += c[k].reno ? 1u : 0u;
        other += c[k].reno ? 0u : 1u;
        if (c[k].reno && dport != NULL &&
            strcmp(port_of(c[k].local), dport) == 0)
            accepted++;
    }
    printf("namespace %zu: %zu connections, %zu reno (%zu accepted on data "
           "port %s), %zu other\n",
           i, n, reno, accepted, dport != NULL ? dport : "?", other);
    IT_CHECK(reno == 2 * streams * (N - 1) && accepted == streams * (N - 1),
             "namespace %zu: %zu reno connections, %zu accepted, want %u "
             "and %u",
             i, reno, accepted, 2 * streams * (N - 1), streams * (N - 1));
    IT_CHECK(other == 2 * (N - 1),
             "namespace %zu: %zu control connections, want %u", i, other,
             2 * (N - 1));
    /* outgoing data connections, per destination address */
    for (size_t j = 0; j < N; j++) {
        if (j == i)
            continue;
        size_t used = 0, conns = 0;
        for (size_t k = 0; k < n; k++) {
            const char *host = c[k].peer;
            size_t hl = strlen(nn_addr(j));
            if (!c[k].reno || strncmp(host, nn_addr(j), hl) != 0 ||
                host[hl] != ':' ||
                (dport != NULL && strcmp(port_of(c[k].local), dport) == 0))
                continue;
            conns++;
            used += c[k].acked >= PART_BYTES ? 1u : 0u;
        }
        printf("  to peer %zu: %zu data connections, %zu carried a part or "
               "more\n",
               j, conns, used);
        IT_CHECK(conns == streams && used >= 2,
                 "namespace %zu to %zu: %zu data connections, %zu used", i, j,
                 conns, used);
    }
}

/* Checks the namespace of outbound-only peer i (mode "nat"): the reno
 * connections it dialled to each dialable peer j (0 and 1). */
static void check_nat_conns(size_t i) {
    conn_t c[256];
    size_t n = list_conns(i, c, 256);
    for (size_t j = 0; j < 2; j++) {
        size_t used = 0, conns = 0, all = 0;
        size_t hl = strlen(nn_addr(j));
        for (size_t k = 0; k < n; k++) {
            if (strncmp(c[k].peer, nn_addr(j), hl) != 0 || c[k].peer[hl] != ':')
                continue;
            all++;
            if (!c[k].reno)
                continue;
            conns++;
            used += c[k].acked >= PART_BYTES ? 1u : 0u;
        }
        printf("namespace %zu to peer %zu: %zu connections, %zu reno data "
               "connections, %zu carried a part or more\n",
               i, j, all, conns, used);
        /* and the one it is answered on, and the control connection */
        IT_CHECK(conns == streams && used >= 2 && all >= streams + 2,
                 "namespace %zu to %zu: %zu reno data connections, %zu used, "
                 "%zu in all",
                 i, j, conns, used, all);
    }
}

int main(int argc, char **argv) {
    bool automatic = argc > 1 && strcmp(argv[1], "auto") == 0;
    bool nat = argc > 1 && strcmp(argv[1], "nat") == 0;
    if (argc > 1 && !automatic && !nat) {
        fprintf(stderr, "usage: %s [auto|nat]\n", argv[0]);
        return 2;
    }
    nn_open(N);
    char why[256];
    if ((automatic || nat) && !nn_can_delay(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        nn_close();
        return NN_SKIP;
    }
    it_peer_cfg_t cfg = nn_config("nn-streams", N, 2000, 5000, 30000);
    cfg.grid_dims = 1;
    cfg.min_group_size = N;
    cfg.congestion = "reno";
    cfg.data_streams = automatic ? 0 : STREAMS_SET;
    streams = automatic ? STREAMS_WIDE : STREAMS_SET;
    nn_swarm_t s;
    if (nat) {
        const size_t behind[] = {2, 3};
        if (nn_nat(0, behind, 2) != 0)
            return 1;
    }
    for (size_t i = 0; i < N; i++) {
        if (automatic || nat)
            IT_CHECK(nn_link(i, &(nn_link_t){10000, 0, 10, 0, 0}) == 0,
                     "link of peer %zu", i);
        else
            IT_CHECK(nn_loss(i, 10, 10) == 0, "loss rules of peer %zu", i);
    }
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0 || nn_swarm_start(&s) != 0)
        return 1;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t ms = nn_round(&s, NULL, 1000 + 100 * (uint64_t)r);
        for (size_t i = 0; i < N; i++)
            IT_CHECK(s.got[i] && s.res[i].info.group_size == N &&
                         s.res[i].info.peers_failed == 0,
                     "round %d peer %zu: group of %u, %u dropped", r, i,
                     s.got[i] ? s.res[i].info.group_size : 0,
                     s.got[i] ? s.res[i].info.peers_failed : 0);
        double d = nn_dev_from_mean(&s, NULL, NULL);
        IT_CHECK(d <= 1e-5, "round %d: %.3g from the exact mean", r, d);
        printf("round %d: longest call %llu ms, %.3g from the mean\n", r + 1,
               (unsigned long long)ms, d);
    }
    for (size_t i = 0; i < N; i++)
        if (!nat)
            check_conns(i);
        else if (i >= 2)
            check_nat_conns(i);
    return nn_swarm_end(&s);
}
