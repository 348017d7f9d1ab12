/* SPDX-License-Identifier: MIT */
/*
 * test_int_ccfresh.c - BBR's model of each data connection checked at
 * every round's start (docs/DESIGN.md, "Data connections"): 3 real
 * processes on loopback with config congestion "bbr" and data_streams 2
 * average 4 rounds of fresh vectors.
 *
 * Pass rule: every round OK in a group of all 3 and exact (1e-5 relative
 * from the mean of all 3, so nobody was dropped); each peer logged, in at least
 * 3 of the 4 rounds (the first may begin before its connections are up), that
 * it read BBR's estimate on between 1 and 4 data connections (2 mates x 2
 * connections) and restarted no more of them than it read; and no restart
 * failed. Skips (77) where this process may not pick bbr. The rule that picks
 * the connections is tested in tests/unit/test_linkstat.c, the restart itself
 * (the model dropped, the bytes in order) in tests/unit/test_tcp_cc.c.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define N 3
#define STREAMS 2
#define ROUNDS 4
#define COUNT 200000

static char g_dir[256];

static int bbr_allowed(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    int ok = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "bbr", 3) == 0;
    close(fd);
    return ok;
}

/* Scans peer i's log: rounds whose start read BBR's model, the most
 * connections one such line named, lines with none or with more restarted
 * than read, and failed restarts. */
static void scan(int i, int *rounds, unsigned *most, int *zero, int *failed) {
    char path[512], line[1100];
    snprintf(path, sizeof(path), "%s/peer-%d.log", g_dir, i);
    *rounds = *zero = *failed = 0;
    *most = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *t = strstr(line, "BBR's model read on ");
        if (t != NULL) {
            unsigned k = 0, fr = 0;
            if (sscanf(t, "BBR's model read on %u data connections, %u", &k,
                       &fr) != 2 ||
                k == 0 || fr > k)
                (*zero)++;
            (*rounds)++;
            if (k > *most)
                *most = k;
        }
        if (strstr(line, "not started afresh") != NULL)
            (*failed)++;
    }
    fclose(f);
}

int main(void) {
    if (!bbr_allowed()) {
        printf("test_int_ccfresh: this process may not pick bbr (%s): "
               "skipped\n",
               strerror(errno));
        return 77;
    }
    if (it_log_dir_make(g_dir, sizeof(g_dir), "ccfresh") != 0)
        return 1;
    it_peer_t peers[N];
    uint64_t seeds[N];
    double weights[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-ccfresh";
    cfg.group_size = N;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 30000;
    cfg.congestion = "bbr";
    cfg.data_streams = STREAMS;
    cfg.log_dir = g_dir;
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "%zu of %d peers started and saw everyone", up, N);
    float *v = malloc(COUNT * sizeof(float));
    double next_w[N];
    for (int r = 0; r < ROUNDS && up == N && v != NULL; r++) {
        for (int i = 0; i < N; i++) {
            seeds[i] = (uint64_t)(r * 10 + i + 1);
            weights[i] = it_weight(seeds[i]);
        }
        /* fresh vectors every round (round 0 of it_grid_round): OK, the
         * group of all 3, and the exact mean */
        double d =
            it_grid_round(peers, N, N, COUNT, 0, seeds, weights, next_w, v);
        IT_CHECK(d <= 1e-5, "round %d deviates %g from the mean", r, d);
    }
    free(v);
    for (size_t i = 0; i < up; i++)
        it_stop(&peers[i]);
    for (int i = 0; i < (int)up; i++) {
        int rounds, zero, failed;
        unsigned most;
        scan(i, &rounds, &most, &zero, &failed);
        printf("peer %d: BBR's model read in %d rounds, on at most %u "
               "connections\n",
               i, rounds, most);
        IT_CHECK(rounds >= ROUNDS - 1 && rounds <= ROUNDS,
                 "peer %d read BBR's model in %d of %d rounds", i, rounds,
                 ROUNDS);
        IT_CHECK(most <= (N - 1) * STREAMS && zero == 0,
                 "peer %d: at most %u connections named, %d lines with none "
                 "or more restarted than read",
                 i, most, zero);
        IT_CHECK(failed == 0, "peer %d: %d restarts failed", i, failed);
    }
    it_log_dir_done(g_dir);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
