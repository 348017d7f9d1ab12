/* SPDX-License-Identifier: MIT */
/*
 * test_int_reconnect.c - connections reset under running peers: 4 real
 * processes average while the test resets their TCP connections with
 * `ss -K` (the kernel aborts them, as a middlebox or a Wi-Fi blip would),
 * many times, without restarting any peer. Some resets cut only the
 * connections into one peer's ports (the others lose their session with
 * it while it still believes in its own), some cut every connection of
 * the swarm at once (sessions restart on both sides, HELLOs cross), and
 * some land in the middle of a round.
 *
 * A reset during a round may keep the sessions of its members (ZeroMQ
 * dials the control connections again within the grace, docs/DESIGN.md,
 * "On a lossy network"); every other reset ends them.
 *
 * Checked: every session the peers derive has data keys no earlier session
 * had (each peer logs the public fingerprints of its keys at debug level),
 * so no (key, nonce) pair repeats over the run; the two ends of every
 * session hold matching keys once it settles; and after each reset the
 * next round is exact. Needs root for `ss -K`; skips (77) without it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define N 4
#define COUNT 50000
#define RESETS 24

typedef struct key_use {
    int peer;        /* who derived it */
    char other[9];   /* first 8 Z85 characters of the other side's id */
    uint64_t tx, rx; /* fingerprints */
    unsigned long long from;
} key_use_t;

static char g_dir[256];
static char g_id8[N][9];  /* each peer's id, as its log lines name it */
static int g_ports[N][2]; /* control and data port */
static key_use_t *g_uses; /* every derivation seen so far */
static size_t g_nuses, g_capuses;
static long g_read_pos[N]; /* how far each log was parsed */

/* Reads what peer i logged since the last call and records its key
 * derivations. */
static void parse_log(int i) {
    char path[512];
    snprintf(path, sizeof(path), "%s/peer-%d.log", g_dir, i);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    if (fseek(f, g_read_pos[i], SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char line[1100];
    for (;;) {
        long at = ftell(f);
        if (fgets(line, sizeof(line), f) == NULL)
            break;
        if (strchr(line, '\n') == NULL) { /* a line still being written */
            g_read_pos[i] = at;
            fclose(f);
            return;
        }
        const char *s = strstr(line, "session keys with ");
        key_use_t u;
        memset(&u, 0, sizeof(u));
        u.peer = i;
        /* the id is 8 Z85 characters, which may include ':' */
        if (s != NULL && strlen(s) > 18 + 8 &&
            (memcpy(u.other, s + 18, 8), u.other[8] = '\0',
             sscanf(s + 26, ": tx %16llx rx %16llx, tx counter from %llu",
                    (unsigned long long *)&u.tx, (unsigned long long *)&u.rx,
                    &u.from) == 3)) {
            if (g_nuses == g_capuses) {
                g_capuses = g_capuses ? 2 * g_capuses : 256;
                g_uses = realloc(g_uses, g_capuses * sizeof(*g_uses));
                if (g_uses == NULL)
                    abort();
            }
            g_uses[g_nuses++] = u;
        }
    }
    g_read_pos[i] = ftell(f);
    fclose(f);
}

/* Lines of peer i's log file containing text. */
static long file_count(int i, const char *text) {
    char path[512], line[1100];
    snprintf(path, sizeof(path), "%s/peer-%d.log", g_dir, i);
    FILE *f = fopen(path, "r");
    long n = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, text) != NULL;
    fclose(f);
    return n;
}

/* The newest derivation of peer i with peer j at index >= since, or NULL. */
static const key_use_t *latest(int i, int j, size_t since) {
    for (size_t k = g_nuses; k-- > since;)
        if (g_uses[k].peer == i && strcmp(g_uses[k].other, g_id8[j]) == 0)
            return &g_uses[k];
    return NULL;
}

/* Whether every pair of peers that the reset touched has keyed a new
 * session (both ends derived since index `since`) with matching keys.
 * touched < 0: all pairs; else the pairs with that peer. */
static int settled(size_t since, int touched) {
    for (int i = 0; i < N; i++)
        parse_log(i);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            if (i == j || (touched >= 0 && i != touched && j != touched))
                continue;
            const key_use_t *a = latest(i, j, since);
            const key_use_t *b = latest(j, i, since);
            if (a == NULL || b == NULL || a->tx != b->rx || a->rx != b->tx)
                return 0;
        }
    return 1;
}

/* How many times peer i logged that its control connection to peer j
 * broke during a round (what = "broke mid-round") or came back with the
 * session kept (what = "back, session kept"): docs/DESIGN.md, "On a lossy
 * network". */
static long conn_count(int i, int j, const char *what) {
    char text[80];
    snprintf(text, sizeof(text), "connection to %s %s", g_id8[j], what);
    return file_count(i, text);
}

#define BROKE "broke mid-round"
#define BACK "back, session kept"

/* settled(), except that a touched pair that derived no keys since, one of
 * whose control connections came back with the session kept, and none of
 * whose broken connections is still away, counts as settled too (a reset
 * during a round they are both in); *kept receives how many pairs did so.
 * broke0 and back0 are conn_count() before the reset. */
static int settled_or_kept(size_t since, int touched, long broke0[N][N],
                           long back0[N][N], int *kept) {
    for (int i = 0; i < N; i++)
        parse_log(i);
    *kept = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) {
            if (touched >= 0 && i != touched && j != touched)
                continue;
            const key_use_t *a = latest(i, j, since);
            const key_use_t *b = latest(j, i, since);
            if (a != NULL && b != NULL && a->tx == b->rx && a->rx == b->tx)
                continue;
            long bk_ij = conn_count(i, j, BACK) - back0[i][j],
                 bk_ji = conn_count(j, i, BACK) - back0[j][i],
                 br_ij = conn_count(i, j, BROKE) - broke0[i][j],
                 br_ji = conn_count(j, i, BROKE) - broke0[j][i];
            if (a == NULL && b == NULL && bk_ij + bk_ji > 0 && bk_ij >= br_ij &&
                bk_ji >= br_ji) {
                (*kept)++;
                continue;
            }
            return 0;
        }
    return 1;
}

/* Both listening ports of the process pid, from `ss -tlnp`. */
static int find_ports(pid_t pid, int ports[2]) {
    FILE *f = popen("ss -Htlnp 2>/dev/null", "r");
    if (f == NULL)
        return -1;
    char line[1024], want[32];
    int n = 0;
    snprintf(want, sizeof(want), "pid=%d,", (int)pid);
    while (fgets(line, sizeof(line), f) != NULL && n < 2) {
        if (strstr(line, want) == NULL)
            continue;
        /* LISTEN 0 100 127.0.0.1:PORT 0.0.0.0:* users:... */
        char st[32], local[128];
        int rq, sq;
        if (sscanf(line, "%31s %d %d %127s", st, &rq, &sq, local) != 4)
            continue;
        const char *colon = strrchr(local, ':');
        if (colon != NULL)
            ports[n++] = atoi(colon + 1);
    }
    pclose(f);
    return n == 2 ? 0 : -1;
}

/* Aborts the established TCP connections to or from peer i's ports (i < 0:
 * every peer's). Returns the number of connections ss reported killed, or
 * -1 if ss failed. */
static int reset(int i) {
    char cmd[2048];
    size_t len =
        (size_t)snprintf(cmd, sizeof(cmd), "ss -HK -t state established '(");
    int first = 1;
    for (int p = 0; p < N; p++) {
        if (i >= 0 && p != i)
            continue;
        for (int k = 0; k < 2; k++) {
            len += (size_t)snprintf(
                cmd + len, sizeof(cmd) - len, "%s sport = :%d or dport = :%d",
                first ? "" : " or", g_ports[p][k], g_ports[p][k]);
            first = 0;
        }
    }
    snprintf(cmd + len, sizeof(cmd) - len, " )' 2>/dev/null");
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return -1;
    char line[512];
    int killed = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        killed++;
    return pclose(f) == 0 ? killed : -1;
}

/* One round of all N peers with fresh seeds; checks exactness when
 * `exact`, else only that every call ended within its bound. */
static void round_all(it_peer_t *peers, int r, int exact, double *worst) {
    uint64_t seeds[N];
    double weights[N];
    float *v = malloc(COUNT * sizeof(float));
    if (v == NULL)
        abort();
    for (int i = 0; i < N; i++) {
        seeds[i] = (uint64_t)(r * 100 + i + 1);
        weights[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&peers[i], COUNT, seeds[i], weights[i]) == 0,
                 "send");
    }
    for (int i = 0; i < N; i++) {
        it_result_t res;
        int rc = it_collect(&peers[i], &res, v, COUNT, 60000);
        IT_CHECK(rc == 0, "round %d: peer %d gave no result", r, i);
        if (rc != 0)
            continue;
        IT_CHECK(res.call_ms <= 20000 + 1000, "round %d: peer %d took %llu ms",
                 r, i, (unsigned long long)res.call_ms);
        if (!exact) {
            IT_CHECK(res.err == MOSHPIT_OK, "round %d: peer %d: %s", r, i,
                     moshpit_strerror((moshpit_err_t)res.err));
            continue;
        }
        IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == N &&
                     res.info.peers_failed == 0 &&
                     res.info.fraction_averaged == 1.0,
                 "round %d: peer %d: err %d group %u failed %u fraction %g", r,
                 i, res.err, res.info.group_size, res.info.peers_failed,
                 res.info.fraction_averaged);
        double d = it_dev_from_mean(v, COUNT, seeds, weights, N);
        IT_CHECK(d <= 1e-5, "round %d: peer %d deviates %g from the mean", r, i,
                 d);
        if (d > *worst)
            *worst = d;
    }
    free(v);
}

int main(void) {
    if (geteuid() != 0 || system("ss -V >/dev/null 2>&1") != 0) {
        printf("test_int_reconnect: needs root and ss (iproute2): skipped\n");
        return 77;
    }
    if (it_log_dir_make(g_dir, sizeof(g_dir), "reconnect") != 0)
        return 1;
    it_peer_t peers[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-reconnect";
    cfg.group_size = N;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 20000;
    cfg.log_dir = g_dir;
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "%zu of %d peers started and saw everyone", up, N);
    for (int i = 0; i < (int)up; i++) {
        /* the id as log lines name it: the first 8 of the key's 40 Z85
         * characters, the last 40 of the endpoint */
        size_t el = strlen(peers[i].endpoint);
        snprintf(g_id8[i], sizeof(g_id8[i]), "%.8s",
                 el >= 40 ? peers[i].endpoint + el - 40 : "");
        IT_CHECK(find_ports(peers[i].pid, g_ports[i]) == 0,
                 "ports of peer %d not found", i);
    }
    if (up != N || it_failures > 0)
        goto out;

    /* the first sessions settle, then a round before any reset */
    uint64_t t0 = it_now_ms();
    while (!settled(0, -1) && it_now_ms() - t0 < 30000)
        usleep(20000); /* polling the peers' log files */
    IT_CHECK(settled(0, -1), "first sessions did not settle");
    double worst = 0;
    round_all(peers, 0, 1, &worst);

    int killed_total = 0, resets_done = 0, rounds_done = 0, kept_total = 0;
    uint64_t settle_max = 0;
    for (int r = 1; r <= RESETS && it_failures == 0; r++) {
        /* every third reset cuts everything; the others one peer's ports;
         * every fourth lands while a round runs */
        int who = r % 3 == 0 ? -1 : r % N;
        int mid = r % 4 == 0;
        size_t since = g_nuses;
        long groups_seen = file_count(0, ": group of ");
        if (mid) {
            for (int i = 0; i < N; i++) {
                uint64_t s = (uint64_t)(r * 100 + i + 1);
                IT_CHECK(it_average_async(&peers[i], COUNT, s, it_weight(s)) ==
                             0,
                         "send");
            }
            /* cut once peer 0's group has formed (data flows next); the
             * peer answers no command during a call: read its log file */
            uint64_t w0 = it_now_ms();
            while (file_count(0, ": group of ") <= groups_seen &&
                   it_now_ms() - w0 < 10000)
                usleep(5000);
        }
        long broke0[N][N], back0[N][N];
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                broke0[i][j] = i == j ? 0 : conn_count(i, j, BROKE);
                back0[i][j] = i == j ? 0 : conn_count(i, j, BACK);
            }
        int k = reset(who);
        IT_CHECK(k >= 0, "ss -K failed");
        if (k > 0) {
            killed_total += k;
            resets_done++;
        }
        if (mid) {
            /* the round that was cut: it must end within its bound, with
             * whatever it could average */
            float *v = malloc(COUNT * sizeof(float));
            for (int i = 0; i < N && v != NULL; i++) {
                it_result_t res;
                int rc = it_collect(&peers[i], &res, v, COUNT, 60000);
                IT_CHECK(rc == 0 && res.call_ms <= 20000 + 1000,
                         "cut round %d: peer %d: rc %d, %llu ms", r, i, rc,
                         (unsigned long long)res.call_ms);
            }
            free(v);
        }
        /* a reset during a round keeps the sessions of its members when
         * ZeroMQ's new control connections are up in time; any other
         * ends them and both ends key a new one */
        uint64_t s0 = it_now_ms();
        int kept = 0;
        while (!settled_or_kept(since, who, broke0, back0, &kept) &&
               it_now_ms() - s0 < 60000)
            usleep(20000);
        IT_CHECK(settled_or_kept(since, who, broke0, back0, &kept),
                 "reset %d (%s): sessions did not settle in 60 s", r,
                 who < 0 ? "all" : "one peer");
        IT_CHECK(kept == 0 || mid, "reset %d: %d sessions kept outside a round",
                 r, kept);
        kept_total += kept;
        if (it_now_ms() - s0 > settle_max)
            settle_max = it_now_ms() - s0;
        for (int i = 0; i < N; i++)
            IT_CHECK(it_wait_members(&peers[i], N, 30000) == N,
                     "reset %d: peer %d does not see everyone", r, i);
        round_all(peers, r, 1, &worst);
        rounds_done++;
    }

    /* no key was derived twice, by anyone: a repeated fingerprint would be
     * a (key, nonce) pair used again, since every session starts its
     * counter low */
    for (int i = 0; i < N; i++)
        parse_log(i);
    size_t repeats = 0;
    for (size_t a = 0; a < g_nuses; a++)
        for (size_t b = a + 1; b < g_nuses; b++) {
            uint64_t ka[2] = {g_uses[a].tx, g_uses[a].rx};
            uint64_t kb[2] = {g_uses[b].tx, g_uses[b].rx};
            /* the same key on both ends of one session is expected: a's tx
             * is b's rx when b is the other end. Anything else repeats. */
            int other_end = g_uses[a].peer != g_uses[b].peer &&
                            ka[0] == kb[1] && ka[1] == kb[0];
            if (other_end)
                continue;
            if (ka[0] == kb[0] || ka[0] == kb[1] || ka[1] == kb[0] ||
                ka[1] == kb[1]) {
                repeats++;
                fprintf(stderr,
                        "key used again: peer %d with %s (tx %016llx from "
                        "%llu) and peer %d with %s (tx %016llx from %llu)\n",
                        g_uses[a].peer, g_uses[a].other,
                        (unsigned long long)ka[0], g_uses[a].from,
                        g_uses[b].peer, g_uses[b].other,
                        (unsigned long long)kb[0], g_uses[b].from);
            }
        }
    IT_CHECK(repeats == 0, "%zu keys were used in more than one session",
             repeats);
    /* the resets really ended sessions: each one re-keys at least the
     * pairs it touched */
    IT_CHECK(resets_done == RESETS, "only %d of %d resets killed anything",
             resets_done, RESETS);
    IT_CHECK(g_nuses >=
                 (size_t)(N * (N - 1) + RESETS * 2 * (N - 1) - 2 * kept_total),
             "only %zu key derivations over %d resets", g_nuses, RESETS);
    printf("test_int_reconnect: %d resets (%d connections aborted), %zu "
           "session keys derived, %zu used again, %d sessions kept over a "
           "reset during a round; slowest re-keying %llu ms; %d rounds after "
           "resets, max relative deviation %.3g\n",
           resets_done, killed_total, g_nuses, repeats, kept_total,
           (unsigned long long)settle_max, rounds_done, worst);
out:
    for (int i = 0; i < (int)up; i++)
        it_stop(&peers[i]);
    it_log_dir_done(g_dir);
    free(g_uses);
    if (it_failures > 0) {
        fprintf(stderr, "test_int_reconnect: %d checks failed\n", it_failures);
        return 1;
    }
    return 0;
}
