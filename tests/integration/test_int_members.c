/* SPDX-License-Identifier: MIT */
/*
 * test_int_members.c - membership with real processes: a frozen peer
 * (SIGSTOP: its TCP connections stay up, it just stops answering) is
 * declared dead by gossip and comes back by itself when it thaws.
 *
 * Pass rules:
 * - 8 peers; one is SIGSTOPped. Within 18 s every survivor's
 *   moshpit_members() is 7 (the bound at default settings: a probe of the
 *   frozen peer within a pass of the members, 1.2 s of direct and indirect
 *   probes, a suspicion timeout of 4 s at this size, and a few gossip
 *   periods, B(8) = 14.2 s; then the session ends once the peer has not
 *   answered a direct probe for 5 s, which was sent when it became
 *   suspect at least 3 s before; see docs/DESIGN.md, "Membership").
 * - The survivors average in the meantime: OK, and everyone who was in a
 *   group holds its group's exact mean.
 * - After SIGCONT, within 20 s every peer counts 8 members again (the
 *   thawed peer refutes the rumour of its death), and a round of all 8 with
 *   group_size 8 is exact.
 * - No peer logged a malformed control message (membership messages to a
 *   peer being dialled again once went out mangled).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 8
#define FROZEN 5
#define COUNT 10007

int main(void) {
    it_peer_t peers[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-members";
    cfg.group_size = N;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 30000;
    cfg.peer_timeout_ms = 3000;
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "%zu of %d peers started", up, N);
    if (up != N)
        return 1;
    IT_CHECK(kill(peers[FROZEN].pid, SIGSTOP) == 0, "SIGSTOP");
    uint64_t worst = 0;
    for (size_t i = 0; i < N; i++) {
        if (i == FROZEN)
            continue;
        uint64_t took = 0;
        long m = it_wait_members_max(&peers[i], N - 1, 18000, &took);
        IT_CHECK(m == N - 1, "peer %zu still counts %ld members", i, m);
        worst = took > worst ? took : worst;
    }
    printf("frozen peer dropped by every survivor within %llu ms\n",
           (unsigned long long)worst);

    /* the survivors keep averaging */
    it_peer_t rest[N - 1];
    uint64_t seeds[N];
    double w[N];
    for (size_t i = 0, k = 0; i < N; i++)
        if (i != FROZEN)
            rest[k++] = peers[i];
    float *v = malloc(COUNT * sizeof(float));
    for (size_t i = 0; i < N - 1; i++) {
        seeds[i] = 300 + i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&rest[i], COUNT, seeds[i], w[i]) == 0,
                 "send");
    }
    for (size_t i = 0; i < N - 1; i++) {
        it_result_t res;
        IT_CHECK(it_collect(&rest[i], &res, v, COUNT, 40000) == 0 &&
                     res.err == MOSHPIT_OK,
                 "survivor %zu: no OK result", i);
        IT_CHECK(res.info.group_size == N - 1,
                 "survivor %zu: group of %u, want %d", i, res.info.group_size,
                 N - 1);
        double d = it_dev_from_mean(v, COUNT, seeds, w, N - 1);
        IT_CHECK(d <= 1e-5, "survivor %zu deviates %g", i, d);
    }

    IT_CHECK(kill(peers[FROZEN].pid, SIGCONT) == 0, "SIGCONT");
    for (size_t i = 0; i < N; i++)
        IT_CHECK(it_wait_members(&peers[i], N, 20000) == N,
                 "peer %zu does not count the thawed peer again", i);
    for (size_t i = 0; i < N; i++) {
        seeds[i] = 400 + i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&peers[i], COUNT, seeds[i], w[i]) == 0,
                 "send");
    }
    for (size_t i = 0; i < N; i++) {
        it_result_t res;
        IT_CHECK(it_collect(&peers[i], &res, v, COUNT, 40000) == 0 &&
                     res.err == MOSHPIT_OK && res.info.group_size == N,
                 "after the thaw, peer %zu: err %d group %u", i, res.err,
                 res.info.group_size);
        double d = it_dev_from_mean(v, COUNT, seeds, w, N);
        IT_CHECK(d <= 1e-5, "after the thaw, peer %zu deviates %g", i, d);
    }
    printf("thawed peer back in a group of %d, exact\n", N);
    /* reconnecting after the thaw sends membership messages to peers
     * without a session: none of them may arrive mangled */
    for (size_t i = 0; i < N; i++)
        IT_CHECK(it_log_count(&peers[i], "malformed control message", 5000) ==
                     0,
                 "peer %zu received malformed control messages", i);
    free(v);
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
