/* SPDX-License-Identifier: MIT */
/*
 * test_netns_blip.c - a connection reset for a moment mid-round (a Wi-Fi
 * blip, a NAT that forgot a connection): 4 peers in one group, peer 3 on a
 * 20 Mbit/s link so that a round of 2^21 floats (8 MiB) takes seconds;
 * once peer 3 has sent 1.5 MiB of the round, every data connection in its
 * namespace (the ones it dialled and the ones dialled to it, both
 * directions of data) is reset with `ss -K`, which aborts the sockets and
 * sends RSTs to the other ends. ZeroMQ dials again at once; what was in
 * the kernel's buffers and in ZeroMQ's encoder is gone.
 *
 * A second round resets peer 3's control connections (CURVE, both
 * directions) the same way: its sessions (and their data keys) and the
 * round go on once ZeroMQ has dialled them again.
 *
 * Config: group_size 4, grid_dims 1, matchmaking_ms 2000, peer_timeout_ms
 * 3000, round_timeout_ms 20000; every round starts from fresh vectors.
 * Peer 3's link is slow from the first (clean) round on, so the silence
 * limits and round ends the peers use in the reset round were measured
 * on that link (docs/DESIGN.md, "Deadlines that follow the link").
 * With an argument k (ctest test_netns_blip_streams: 4), config
 * data_streams k and congestion "default": every pair's frames travel on
 * k connections and overtake each other, and the test runs the clean
 * round and the data reset only (the control connections are the same).
 *
 * Pass rule:
 * - the round with the reset ends MOSHPIT_OK at every peer, with all 4
 *   members (peers_failed 0, group_size 4, fraction_averaged 1) and every
 *   peer within 1e-5 relative of the exact weighted mean of all 4;
 * - the reset did cost something and the repair re-sent only what was
 *   missing: the peers' logs say they re-sent at least one part, at most
 *   as many as the round sends over the reset connections, and no
 *   receiver got a part it already held (no "duplicate parts" line);
 * - the round with the control reset is exact with all 4 members too,
 *   some control connection logs that it is back with its session, and no
 *   session keys are derived meanwhile;
 * - a clean round before and after is exact too;
 * - with k connections: every peer logs k per peer, and some peer logs
 *   that a data connection broke mid-round (its MARK).
 * Without the repair (HAVE messages, docs/PROTOCOL.md) the parts lost in
 * the reset are never sent again and peer 3's mates drop it (or keep local
 * values at the deadline): the first rule fails. With NN_BLIP_SKIP_RESET=1
 * in the environment the round runs on the slow link without the reset
 * (for its time as a baseline): then nothing is re-sent and the second
 * rule fails. With k connections, answering a MARK before the frames
 * below it arrived over the other connections sends parts still on their
 * way again (duplicates), and taking a gap in the counters for a loss
 * does too: the second rule fails.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "swarm.h"

#define N 4
#define COUNT (1u << 21)
#define BLIP 3
#define RATE_MBIT 20
#define SENT_BEFORE_RESET (1536u * 1024u)

static unsigned port_of(const char *endpoint) {
    const char *hash = strchr(endpoint, '#');
    const char *c = hash;
    while (c != NULL && c > endpoint && c[-1] != ':')
        c--;
    return c != NULL ? (unsigned)strtoul(c, NULL, 10) : 0;
}

/* The log of peer i in dir, open for reading (NULL if there is none). */
static FILE *open_log(const char *dir, size_t i) {
    char path[512];
    snprintf(path, sizeof(path), "%s/peer-%zu.log", dir, i);
    return fopen(path, "r");
}

/* Sums "<n> parts re-sent" and counts "duplicate parts" lines over the
 * peers' logs in dir. */
static void scan_logs(const char *dir, unsigned long *resent,
                      unsigned long *dups, unsigned long *repairs) {
    *resent = *dups = *repairs = 0;
    for (size_t i = 0; i < N; i++) {
        char line[1024];
        FILE *f = open_log(dir, i);
        if (f == NULL)
            continue;
        while (fgets(line, sizeof(line), f) != NULL) {
            const char *r = strstr(line, " parts re-sent");
            if (r != NULL) {
                const char *d = r;
                while (d > line && d[-1] >= '0' && d[-1] <= '9')
                    d--;
                *resent += strtoul(d, NULL, 10);
                (*repairs)++;
            }
            if (strstr(line, "duplicate parts") != NULL)
                (*dups)++;
        }
        fclose(f);
    }
}

/* Lines containing text over the peers' logs in dir. */
static unsigned long count_lines(const char *dir, const char *text) {
    unsigned long n = 0;
    for (size_t i = 0; i < N; i++) {
        char line[1024];
        FILE *f = open_log(dir, i);
        if (f == NULL)
            continue;
        while (fgets(line, sizeof(line), f) != NULL)
            n += strstr(line, text) != NULL;
        fclose(f);
    }
    return n;
}

static void clean_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[512];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        remove(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

static void check_exact(nn_swarm_t *s, const char *what) {
    for (size_t i = 0; i < N; i++) {
        IT_CHECK(s->got[i], "%s: peer %zu has no result", what, i);
        if (!s->got[i])
            continue;
        const moshpit_round_t *r = &s->res[i].info;
        double d = it_dev_from_mean(s->v[i], COUNT, s->seed, s->w0, N);
        printf("  %s: peer %zu group %u, dropped %u, averaged %.4f, %.3g "
               "from the mean, %llu ms\n",
               what, i, r->group_size, r->peers_failed, r->fraction_averaged, d,
               (unsigned long long)s->res[i].call_ms);
        IT_CHECK(r->group_size == N && r->peers_failed == 0 &&
                     r->fraction_averaged == 1.0 && d <= 1e-5,
                 "%s: peer %zu: group %u, %u dropped, averaged %.4f, %.3g "
                 "from the mean of all %d",
                 what, i, r->group_size, r->peers_failed, r->fraction_averaged,
                 d, N);
    }
}

/* A round in which peer BLIP's connections matching filter are reset once
 * it has sent SENT_BEFORE_RESET bytes of it; the round must stay exact
 * with every member. */
static void blip_round(nn_swarm_t *s, uint64_t seed, const char *filter,
                       const char *what) {
    char name[64];
    nn_round_send(s, NULL, seed);
    IT_CHECK(it_wait_group(&s->peer[BLIP], 20000) == 0, "peer %d never grouped",
             BLIP);
    uint64_t rx0, tx0, rx, tx, t0 = it_now_ms();
    IT_CHECK(nn_bytes(BLIP, &rx0, &tx0) == 0, "counters");
    do {
        IT_CHECK(nn_bytes(BLIP, &rx, &tx) == 0, "counters");
        if (tx - tx0 >= SENT_BEFORE_RESET)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polling a counter, not waiting for it */
    } while (it_now_ms() - t0 < 15000);
    IT_CHECK(tx - tx0 >= SENT_BEFORE_RESET, "peer %d sent only %llu bytes",
             BLIP, (unsigned long long)(tx - tx0));
    if (getenv("NN_BLIP_SKIP_RESET") == NULL)
        IT_CHECK(nn_reset_tcp(BLIP, filter) == 0, "ss -K %s", filter);
    printf("reset the %s connections of peer %d after %llu bytes sent, "
           "%llu received (%s)\n",
           what, BLIP, (unsigned long long)(tx - tx0),
           (unsigned long long)(rx - rx0), filter);
    nn_round_collect(s, NULL);
    snprintf(name, sizeof(name), "round with a %s reset", what);
    check_exact(s, name);
}

int main(int argc, char **argv) {
    unsigned streams = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 0;
    nn_open(N);
    char dir[] = "/tmp/nn-blip-XXXXXX";
    IT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    it_peer_cfg_t cfg = nn_config("nn-blip", N, 2000, 3000, 20000);
    cfg.grid_dims = 1;
    cfg.log_dir = dir;
    cfg.log_info = 1;
    if (streams > 0) {
        cfg.data_streams = streams;
        cfg.congestion = "default";
    }
    nn_swarm_t s;
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return 1;
    for (size_t i = 0; i < N; i++) {
        s.cfg.notify_group = i == BLIP;
        IT_CHECK(nn_swarm_start_one(&s, i, 0, NULL, NULL, 1) == 0,
                 "peer %zu did not start", i);
    }
    s.cfg.notify_group = 0;
    if (nn_wait_all(&s, N, 60000) != N)
        return 1;

    /* the control ports: everything else in the peer's namespace is data */
    char ctrl[400], filter[400];
    size_t fl = (size_t)snprintf(ctrl, sizeof(ctrl), "not ( sport = :%u",
                                 port_of(s.peer[BLIP].endpoint));
    for (size_t i = 0; i < N; i++)
        if (i != BLIP)
            fl += (size_t)snprintf(ctrl + fl, sizeof(ctrl) - fl,
                                   " or dport = :%u",
                                   port_of(s.peer[i].endpoint));
    snprintf(ctrl + fl, sizeof(ctrl) - fl, " )");
    snprintf(filter, sizeof(filter), "%s", ctrl);

    /* the clean round runs on the slow link already: the silence limits
     * and the round's end the peers measure in it (docs/DESIGN.md,
     * "Deadlines that follow the link") are those of the link the reset
     * hits */
    IT_CHECK(nn_rate(BLIP, RATE_MBIT) == 0, "rate limit");
    nn_round(&s, NULL, 1000); /* collecting skips the GROUP notice */
    check_exact(&s, "clean round");
    blip_round(&s, 2000, filter, "data");
    unsigned long resent, dups, repairs;
    scan_logs(dir, &resent, &dups, &repairs);
    /* what the round sends over the reset connections, in parts of 2^16
     * floats: peer 3's scatter and gather to each mate and theirs to it */
    unsigned long bound = 2ul * 2 * (COUNT / 65536u);
    printf("parts re-sent after the reset: %lu in %lu repairs (the round "
           "moves %lu parts over the reset connections); duplicate-part "
           "lines: %lu\n",
           resent, repairs, bound, dups);
    IT_CHECK(resent >= 1 && resent < bound,
             "re-sent %lu parts (expected 1..%lu)", resent, bound - 1);
    IT_CHECK(dups == 0, "%lu receivers got parts they already held", dups);
    unsigned long broke = count_lines(dir, "a data connection to");
    printf("data connections seen breaking mid-round (MARKs): %lu\n", broke);
    if (streams > 0) {
        char per[32];
        snprintf(per, sizeof(per), ", %u per peer", streams);
        unsigned long with_k = count_lines(dir, per);
        IT_CHECK(with_k == N, "%lu of %d peers use %u data connections", with_k,
                 N, streams);
        IT_CHECK(broke >= 1, "no peer saw a data connection break");
    } else {
        /* the control connections now (CURVE, both directions): the sessions
         * and the round go on once ZeroMQ has dialled them again */
        snprintf(filter, sizeof(filter), "%s", ctrl + 4); /* without "not " */
        unsigned long keys0 = count_lines(dir, "session keys with");
        blip_round(&s, 4000, filter, "control");
        unsigned long keys1 = count_lines(dir, "session keys with"),
                      back = count_lines(dir, "back, session kept");
        printf("control connections dialled again with the session kept: %lu; "
               "session keys derived meanwhile: %lu\n",
               back, keys1 - keys0);
        IT_CHECK(back >= 1 && keys1 == keys0,
                 "control reset: %lu connections back, %lu new session keys",
                 back, keys1 - keys0);
    }

    IT_CHECK(nn_rate(BLIP, 0) == 0, "rate limit off");
    nn_round(&s, NULL, 3000);
    check_exact(&s, "clean round after");
    int rc = nn_swarm_end(&s);
    if (rc == 0)
        clean_dir(dir);
    else
        printf("peer logs kept in %s\n", dir);
    return rc;
}
