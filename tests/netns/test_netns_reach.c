/* SPDX-License-Identifier: MIT */
/*
 * test_netns_reach.c - reachability asked again (docs/DESIGN.md,
 * "Reachability asked again"), on the topology of test_netns_nat: 8
 * peers, 2..5 behind one masquerading router and 6, 7 behind another, so
 * that at first only peers 0 and 1 can be dialled; RTT 50 ms.
 *
 * After formation (and one round that shows who reduces), two things
 * change at once while the swarm is idle:
 * - NAT router 0 forwards every TCP port of its public address to peer 2
 *   (a "DMZ host", with NAT loopback so that 3..5 behind the same router
 *   reach it too): peer 2 can be dialled now;
 * - peer 1 drops every new inbound TCP connection (nftables drops
 *   inbound SYNs in its own namespace); the connections it has keep
 *   working, so nothing fails until it asks. (Not "ct state new": the
 *   namespace tracked no connections before that rule, and conntrack
 *   takes the first packet it sees of a connection already open, an
 *   ACK, for a new one, so that rule cut the open connections it had not
 *   seen yet too.)
 * Both learn it by asking members to dial them back (HELLO "bq"): peer 2
 * turns dialable and peer 1 outbound-only, in either order (each asks
 * every 12 to 18 s). When peer 1 is first, both are outbound-only for a
 * while and end their session; peer 1 must then dial peer 2 once its
 * membership record renews, however that news reaches it (docs/DESIGN.md,
 * "Dialling a renewed member"). The test prints which came first and
 * how peer 1 dialled peer 2.
 *
 * Pass rule:
 * - all 8 see each other within 60 s, the NAT'd peers run outbound-only;
 * - round 1: the exact mean of the 8; peer 1 reduces a share (it receives
 *   more than 1.5x the vector's bytes) and peer 2 does not (less);
 * - within 60 s of the change peer 2 logs that it is dialable and peer 1
 *   that it is outbound-only; peer 0 logs that 2 is dialable again and
 *   that 1 is outbound-only; every other peer has a session with peer 2
 *   (3..7 never had one before); all 8 count 8 members;
 * - round 2: the exact mean of the 8 in a group of 8; now peer 2 reduces
 *   a share and peer 1 does not.
 * On a library that takes the verdict once, peer 2 never logs that it is
 * dialable (the third check fails). On one that dialled a renewed member
 * only on a renewal of a record held alive, a run where peer 1 held peer
 * 2 suspect when its renewal came, with no dial of peer 1's under way,
 * left the pair without a session (peer 2 counted 7, round 2 split):
 * once in about 13 CI runs, none in 22 runs here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swarm.h"

#define N 8
#define COUNT (1u << 18)
#define FWD 2   /* behind NAT 0: the router forwards its ports to it */
#define BLOCK 1 /* dialable at first: new inbound connections dropped */

/* Waits until peer p has logged `a` more than `a0` times, or `b` (if not
 * NULL) at all. 1 if so. */
static int wait_either(it_peer_t *p, const char *a, long a0, const char *b,
                       int timeout_ms) {
    uint64_t end = it_now_ms() + (uint64_t)timeout_ms;
    do {
        if (it_log_count(p, a, 2000) > a0 ||
            (b != NULL && it_log_count(p, b, 2000) >= 1))
            return 1;
        usleep(100000);
    } while (it_now_ms() < end);
    return 0;
}

/* One round from fresh vectors: the exact mean of all 8 in a group of 8;
 * peer `reducer` got more than 1.5 vectors' bytes (it reduced a share of
 * the 8 contributions), peer `client` fewer (it only took the results). */
static void round_check(nn_swarm_t *s, int r, size_t reducer, size_t client) {
    uint64_t ms = nn_round(s, NULL, 1000u * (unsigned)r);
    nn_print_round(s, "reach", r);
    double dev = nn_dev_from_mean(s, NULL, NULL);
    const double vec = 4.0 * COUNT;
    printf("  round %d: longest call %llu ms, deviation %.3g; received "
           "by peer %zu %.2f vectors, by peer %zu %.2f\n",
           r, (unsigned long long)ms, dev, reducer,
           (double)s->res[reducer].info.bytes_received / vec, client,
           (double)s->res[client].info.bytes_received / vec);
    IT_CHECK(dev <= 1e-5, "round %d is not the mean of all 8: %.3g", r, dev);
    for (size_t i = 0; i < N; i++)
        IT_CHECK(s->res[i].info.group_size == N,
                 "round %d, peer %zu: group of %u, not %d", r, i,
                 s->res[i].info.group_size, N);
    IT_CHECK((double)s->res[reducer].info.bytes_received > 1.5 * vec,
             "round %d: peer %zu reduced no share", r, reducer);
    IT_CHECK((double)s->res[client].info.bytes_received < 1.5 * vec,
             "round %d: peer %zu reduced a share", r, client);
}

int main(void) {
    nn_open(N);
    it_peer_cfg_t cfg;
    int begun = nn_nat_begin("nn-reach", N, 1, &cfg);
    if (begun != 0)
        return begun;
    cfg.log_info = 1;
    nn_swarm_t s;
    uint8_t pub[N][32], sec[N][32];
    char txt[N][41];
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return 1;
    for (size_t i = 0; i < N; i++) {
        IT_CHECK(moshpit_keypair(pub[i], sec[i]) == MOSHPIT_OK, "keypair");
        IT_CHECK(moshpit_key_to_text(pub[i], txt[i]) == MOSHPIT_OK, "key");
        txt[i][8] = '\0'; /* logs name a peer by its first 8 characters */
    }
    uint64_t t0 = it_now_ms();
    for (size_t i = 0; i < N; i++) {
        s.cfg.grid_position = (int64_t)i;
        IT_CHECK(nn_swarm_start_one(&s, i, 0, pub[i], sec[i], 1) == 0,
                 "peer %zu did not start", i);
    }
    if (nn_nat_formed(&s, t0) != 0)
        return nn_swarm_end(&s);

    /* before: 0 and 1 reduce, the NAT'd peers take the results */
    round_check(&s, 1, BLOCK, FWD);

    /* the changes: a port forward (with NAT loopback) to peer 2, and
     * peer 1 takes no new connection */
    char script[1024], live[64];
    snprintf(script, sizeof(script),
             "table ip mptfwd {\n"
             " chain pre { type nat hook prerouting priority -100;"
             " policy accept;\n"
             "  ip daddr %s tcp dport 1024-65535 dnat to %s; }\n"
             " chain post { type nat hook postrouting priority 90;"
             " policy accept;\n"
             "  oifname \"lan\" ip saddr 10.78.0.0/24 ct status dnat"
             " masquerade; }\n"
             "}\n"
             "add rule ip mptnat gate ct status dnat accept\n",
             nn_nat_addr(0), nn_addr(FWD));
    snprintf(live, sizeof(live), "peer %s: live", txt[FWD]);
    long live1 = it_log_count(&s.peer[BLOCK], live, 2000);
    /* both at once: in about half the runs peer BLOCK turns outbound-only
     * while peer FWD still is, and must dial peer FWD once its record
     * renews (docs/DESIGN.md, "Reachability asked again") */
    IT_CHECK(nn_nat_nft(0, script) == 0, "port forward");
    IT_CHECK(nn_peer_nft(BLOCK,
                         "table inet mptblk {\n"
                         " chain in { type filter hook input priority 0;"
                         " policy accept;\n"
                         "  iifname \"eth0\" tcp flags & (syn | ack) == syn"
                         " drop; }\n"
                         "}\n") == 0,
             "inbound block");
    /* both switches, each timed on its own */
    t0 = it_now_ms();
    uint64_t t_fwd = 0, t_blk = 0;
    while ((t_fwd == 0 || t_blk == 0) && it_now_ms() - t0 < 60000) {
        if (t_fwd == 0 && it_log_count(&s.peer[FWD], "dialable now", 2000) >= 1)
            t_fwd = it_now_ms() - t0;
        if (t_blk == 0 &&
            it_log_count(&s.peer[BLOCK], "any more: outbound-only", 2000) >= 1)
            t_blk = it_now_ms() - t0;
        usleep(100000);
    }
    IT_CHECK(t_fwd != 0, "peer %d never turned dialable", FWD);
    IT_CHECK(t_blk != 0, "peer %d never turned outbound-only", BLOCK);
    printf("peer %d dialable after %llu ms, peer %d outbound-only after %llu "
           "ms (%s first)\n",
           FWD, (unsigned long long)t_fwd, BLOCK, (unsigned long long)t_blk,
           t_blk < t_fwd ? "outbound-only" : "dialable");
    char again[96], outb[96];
    snprintf(again, sizeof(again), "peer %s is dialable again", txt[FWD]);
    snprintf(outb, sizeof(outb), "peer %s is outbound-only", txt[BLOCK]);
    IT_CHECK(it_wait_log(&s.peer[0], again, 20000) >= 1,
             "peer 0 did not see peer %d turn dialable", FWD);
    IT_CHECK(it_wait_log(&s.peer[0], outb, 20000) >= 1,
             "peer 0 did not see peer %d turn outbound-only", BLOCK);
    /* everyone has a session with peer 2 now (3..7 never had one) */
    IT_CHECK(wait_either(&s.peer[BLOCK], live, live1, again, 30000),
             "peer %d has no session with peer %d", BLOCK, FWD);
    for (size_t i = 3; i < N; i++)
        IT_CHECK(it_wait_log(&s.peer[i], live, 30000) >= 1,
                 "peer %zu has no session with peer %d", i, FWD);
    size_t seen = nn_wait_exact(&s, N, 30000);
    /* whether peer BLOCK dialled peer FWD on news of a newer record, and
     * how many of those dials came on news other than a renewal of a
     * record it held alive (the only news the first version dialled on;
     * these include dials in vain on refutations before the switch) */
    char renewed[96], missed[2][112];
    snprintf(renewed, sizeof(renewed), "peer %s: membership renewed it",
             txt[FWD]);
    snprintf(missed[0], sizeof(missed[0]),
             "peer %s: membership renewed it (alive again", txt[FWD]);
    snprintf(missed[1], sizeof(missed[1]),
             "peer %s: membership renewed it (seen in the member table",
             txt[FWD]);
    printf("after the change: %zu of %d see %d, %llu ms after it; peer %d "
           "dialled peer %d on a renewed record %ld times (%ld of them "
           "not on a renewal event)\n",
           seen, N, N, (unsigned long long)(it_now_ms() - t0), BLOCK, FWD,
           it_log_count(&s.peer[BLOCK], renewed, 2000),
           it_log_count(&s.peer[BLOCK], missed[0], 2000) +
               it_log_count(&s.peer[BLOCK], missed[1], 2000));

    /* after: 0 and 2 reduce, 1 takes the results */
    round_check(&s, 2, FWD, BLOCK);
    return nn_swarm_end(&s);
}
