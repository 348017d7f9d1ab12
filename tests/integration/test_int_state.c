/* SPDX-License-Identifier: MIT */
/*
 * test_int_state.c - moshpit_fetch_state with real processes on loopback.
 *
 * Pass rules:
 * - 4 serving peers average once (a full group); a newcomer that does not
 *   serve fetches the state: OK, bit for bit what the servers hold, round
 *   1. Asking for another length: ECOUNT.
 * - The same with 16M floats (64 MiB), and the server the newcomer
 *   downloads from is SIGKILLed in the middle of it: the
 *   download still ends OK, bit for bit, within its timeout (the kill
 *   comes when the server has sent 32 of the 256 chunks).
 * - A swarm where nobody serves: ENOSTATE, long before the timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TIMEOUT_MS 60000u

/* Starts n servers that average once with count floats; the result every
 * server holds goes to `held`. Returns 0 on success. */
static int serve_swarm(it_peer_t *peers, size_t n, size_t count, float *held,
                       it_peer_cfg_t *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->swarm = "it-state";
    cfg->group_size = (uint32_t)n;
    /* the group starts when its n-th JOIN arrives; the long window only
     * absorbs start skew on a loaded machine (64 MiB vectors, sanitizers) */
    cfg->matchmaking_ms = 20000;
    cfg->round_timeout_ms = 60000;
    cfg->serve_state = 1;
    cfg->notify_group = 1;
    cfg->notify_log = "state: 32 chunks sent"; /* 8 MiB into a download */
    if (it_start_swarm(peers, n, cfg) != n)
        return -1;
    for (size_t i = 0; i < n; i++)
        it_average_async(&peers[i], count, 100 + i, it_weight(100 + i));
    float *v = malloc(count * sizeof(float));
    int bad = v == NULL;
    for (size_t i = 0; i < n && !bad; i++) {
        it_result_t res;
        if (it_collect(&peers[i], &res, v, count, 90000) != 0) {
            IT_CHECK(0, "server %zu gave no result", i);
            bad = 1;
            break;
        }
        bad = res.err != MOSHPIT_OK || res.info.group_size != n;
        IT_CHECK(!bad, "server %zu: %s, group of %u (want %zu)", i,
                 moshpit_strerror((moshpit_err_t)res.err), res.info.group_size,
                 n);
        if (!bad && i == 0)
            memcpy(held, v, count * sizeof(float));
        else if (!bad)
            bad = memcmp(held, v, count * sizeof(float)) != 0;
        IT_CHECK(!bad, "server %zu holds another result than server 0", i);
    }
    free(v);
    return bad ? -1 : 0;
}

static void plain(void) {
    enum { N = 4 };
    const size_t count = 300007;
    it_peer_t peers[N + 1];
    it_peer_cfg_t cfg;
    float *held = malloc(count * sizeof(float));
    float *got = malloc((count + 1) * sizeof(float));
    if (serve_swarm(peers, N, count, held, &cfg) == 0) {
        cfg.serve_state = 0;
        cfg.notify_group = 0;
        IT_CHECK(it_start_more(peers, N, N + 1, N + 1, &cfg) == 1,
                 "newcomer did not see everyone");
        it_result_t res;
        IT_CHECK(it_fetch_async(&peers[N], count, TIMEOUT_MS) == 0, "send");
        IT_CHECK(it_collect(&peers[N], &res, got, count, 70000) == 0,
                 "no answer");
        IT_CHECK(res.err == MOSHPIT_OK, "fetch: %s",
                 moshpit_strerror((moshpit_err_t)res.err));
        IT_CHECK(memcmp(got, held, count * sizeof(float)) == 0,
                 "fetched state differs from the servers'");
        IT_CHECK(res.info.round_id == 1, "round %llu, want 1",
                 (unsigned long long)res.info.round_id);
        printf("plain: %zu floats fetched in %llu ms, round %llu\n", count,
               (unsigned long long)res.call_ms,
               (unsigned long long)res.info.round_id);
        IT_CHECK(it_fetch_async(&peers[N], count + 1, TIMEOUT_MS) == 0, "send");
        IT_CHECK(it_collect(&peers[N], &res, got, count + 1, 70000) == 0,
                 "no answer");
        IT_CHECK(res.err == MOSHPIT_ECOUNT, "other length: %s, want ECOUNT",
                 moshpit_strerror((moshpit_err_t)res.err));
        it_stop(&peers[N]);
    }
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
    free(held);
    free(got);
}

static void server_killed(void) {
    enum { N = 4 };
    const size_t count = (size_t)16 << 20;
    it_peer_t peers[N + 1];
    it_peer_cfg_t cfg;
    float *held = malloc(count * sizeof(float));
    float *got = malloc(count * sizeof(float));
    if (serve_swarm(peers, N, count, held, &cfg) == 0) {
        cfg.serve_state = 0;
        cfg.notify_group = 0;
        IT_CHECK(it_start_more(peers, N, N + 1, N + 1, &cfg) == 1,
                 "newcomer did not see everyone");
        IT_CHECK(it_fetch_async(&peers[N], count, TIMEOUT_MS) == 0, "send");
        it_peer_t *srv[N];
        for (size_t i = 0; i < N; i++)
            srv[i] = &peers[i];
        int k = it_wait_group_any(srv, N, 30000);
        IT_CHECK(k >= 0, "no server started serving");
        if (k >= 0)
            it_kill(&peers[k]);
        it_result_t res;
        IT_CHECK(it_collect(&peers[N], &res, got, count, 70000) == 0,
                 "no answer");
        IT_CHECK(res.err == MOSHPIT_OK, "fetch after the kill: %s",
                 moshpit_strerror((moshpit_err_t)res.err));
        IT_CHECK(memcmp(got, held, count * sizeof(float)) == 0,
                 "fetched state differs from the servers'");
        IT_CHECK(res.call_ms <= TIMEOUT_MS + 1000, "took %llu ms",
                 (unsigned long long)res.call_ms);
        printf("server %d killed mid-transfer: 64 MiB fetched in %llu ms\n", k,
               (unsigned long long)res.call_ms);
        it_stop(&peers[N]);
        for (size_t i = 0; i < N; i++)
            if ((int)i != k)
                it_stop(&peers[i]);
    } else {
        for (size_t i = 0; i < N; i++)
            it_kill(&peers[i]);
    }
    free(held);
    free(got);
}

static void nobody_serves(void) {
    it_peer_t peers[3];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-nostate";
    cfg.group_size = 3;
    IT_CHECK(it_start_swarm(peers, 3, &cfg) == 3, "swarm");
    float v[16];
    it_result_t res;
    IT_CHECK(it_fetch_async(&peers[2], 16, TIMEOUT_MS) == 0, "send");
    IT_CHECK(it_collect(&peers[2], &res, v, 16, 70000) == 0, "no answer");
    IT_CHECK(res.err == MOSHPIT_ENOSTATE && res.call_ms < 5000,
             "nobody serves: %s after %llu ms",
             moshpit_strerror((moshpit_err_t)res.err),
             (unsigned long long)res.call_ms);
    for (size_t i = 0; i < 3; i++)
        it_stop(&peers[i]);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || strcmp(only, "plain") == 0)
        plain();
    if (!*only || strcmp(only, "kill") == 0)
        server_killed();
    if (!*only || strcmp(only, "none") == 0)
        nobody_serves();
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
