/* SPDX-License-Identifier: MIT */
/*
 * test_int_exact.c - real processes on loopback: groups of 2, 4 and 8 peers
 * each average a different vector with a different weight; every peer must
 * end with the exact weighted mean (1e-5 relative), report the full group,
 * and return within round_timeout_ms plus slack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void run(size_t n, size_t count, int rounds) {
    it_peer_t peers[IT_MAX_PEERS];
    uint64_t seeds[IT_MAX_PEERS];
    double weights[IT_MAX_PEERS];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-exact";
    cfg.group_size = (uint32_t)n;
    cfg.matchmaking_ms = 5000;
    cfg.round_timeout_ms = 30000;
    size_t up = it_start_swarm(peers, n, &cfg);
    IT_CHECK(up == n, "%zu of %zu peers started and saw everyone", up, n);
    if (up != n)
        return;
    float *v = malloc(count * sizeof(float));
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i++) {
            seeds[i] = (uint64_t)(n * 1000 + (size_t)r * 100 + i);
            weights[i] = it_weight(seeds[i]);
            if (r == 1 && i == 0)
                weights[i] = 0.0; /* a zero weight still gets the mean */
            IT_CHECK(it_average_async(&peers[i], count, seeds[i], weights[i]) ==
                         0,
                     "send");
        }
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            it_result_t res;
            int rc = it_collect(&peers[i], &res, v, count, 60000);
            IT_CHECK(rc == 0, "peer %zu gave no result", i);
            if (rc != 0)
                continue;
            IT_CHECK(res.err == MOSHPIT_OK, "peer %zu: %s", i,
                     moshpit_strerror((moshpit_err_t)res.err));
            IT_CHECK(res.info.group_size == n, "peer %zu group_size %u", i,
                     res.info.group_size);
            IT_CHECK(res.info.peers_failed == 0, "peer %zu peers_failed %u", i,
                     res.info.peers_failed);
            IT_CHECK(res.info.fraction_averaged == 1.0, "peer %zu fraction %g",
                     i, res.info.fraction_averaged);
            IT_CHECK(res.info.round_id != 0, "peer %zu round id 0", i);
            IT_CHECK(res.call_ms <= 30000 + 1000, "peer %zu took %llu ms", i,
                     (unsigned long long)res.call_ms);
            double d = it_dev_from_mean(v, count, seeds, weights, n);
            IT_CHECK(d <= 1e-5, "peer %zu deviates %g from the mean", i, d);
            if (d > worst)
                worst = d;
        }
        printf("n=%zu count=%zu round %d: max relative deviation %.3g\n", n,
               count, r + 1, worst);
    }
    free(v);
    for (size_t i = 0; i < n; i++)
        it_stop(&peers[i]);
}

/* More peers than group_size: several groups per round. Each peer must hold
 * the exact weighted mean of the peers that share its round id. */
static void run_groups(size_t n, uint32_t m, size_t count) {
    it_peer_t peers[IT_MAX_PEERS];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-groups";
    cfg.group_size = m;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 30000;
    size_t up = it_start_swarm(peers, n, &cfg);
    IT_CHECK(up == n, "%zu of %zu peers started and saw everyone", up, n);
    if (up != n)
        return;
    uint64_t seeds[IT_MAX_PEERS], gid[IT_MAX_PEERS];
    double w[IT_MAX_PEERS];
    float *v[IT_MAX_PEERS];
    for (size_t i = 0; i < n; i++) {
        seeds[i] = 7000 + i;
        w[i] = it_weight(seeds[i]);
        v[i] = malloc(count * sizeof(float));
        IT_CHECK(it_average_async(&peers[i], count, seeds[i], w[i]) == 0,
                 "send");
    }
    for (size_t i = 0; i < n; i++) {
        it_result_t res;
        IT_CHECK(it_collect(&peers[i], &res, v[i], count, 60000) == 0,
                 "collect %zu", i);
        IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == m,
                 "peer %zu: err %d group %u, want %u", i, res.err,
                 res.info.group_size, m);
        gid[i] = res.info.round_id;
    }
    size_t groups = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t gs[IT_MAX_PEERS];
        double gw[IT_MAX_PEERS];
        size_t k = 0, first = i;
        for (size_t j = 0; j < n; j++)
            if (gid[j] == gid[i]) {
                if (k == 0)
                    first = j;
                gs[k] = seeds[j];
                gw[k++] = w[j];
            }
        if (first == i)
            groups++;
        IT_CHECK(k == m, "round id of peer %zu shared by %zu peers", i, k);
        double d = it_dev_from_mean(v[i], count, gs, gw, k);
        IT_CHECK(d <= 1e-5, "peer %zu deviates %g from its group's mean", i, d);
    }
    IT_CHECK(groups == n / m, "%zu groups, want %zu", groups, n / m);
    printf("n=%zu group_size=%u: %zu groups, each exact\n", n, m, groups);
    for (size_t i = 0; i < n; i++) {
        it_stop(&peers[i]);
        free(v[i]);
    }
}

int main(void) {
    run_groups(8, 4, 30011);
    run(2, 100003, 2);
    run(4, 100003, 2);
    run(8, 1000003, 2);
    run(8, 1, 1);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
