/* SPDX-License-Identifier: MIT */
/*
 * test_int_hostile.c - an admitted peer that lies, against three honest
 * peer processes A, B, C of a swarm with a swarm_secret. The hostile peer
 * (hostile.c) passes admission with the real handshake and proof, then,
 * during every round the honest peers run:
 *   - an endless stream of JOINs: grid coordinates outside the grid, an
 *     absurd number of dimensions, weights NaN, negative and 1e300, a
 *     bandwidth of 2^32 - 1 Mbit/s, a new group key every time;
 *   - forged membership updates: C is DEAD, C has LEFT (plausible
 *     incarnations), and C is DEAD at an incarnation no claim may carry;
 *   - a flood of control messages far above the rate limit (at C);
 *   - a control message above the size limit (at B).
 * Pass rule: every round averages the three honest vectors exactly
 * (groups of 3, deviation <= 1e-5 from their weighted mean); no honest
 * peer loses a member, also across the suspicion timeout; C refutes; each
 * defence logged its line; all processes still run.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zmq.h>

#include "crypto/crypto.h"
#include "harness.h"
#include "hostile.h"

#define COUNT 30011
#define ROUNDS 4
#define JOINS 40 /* per peer and round */

static it_peer_t hp[3];

/* Claims that C is dead, then that it left, at incarnations above any it
 * had (each target and round its own: news of the claim that reaches a
 * peer first by gossip must not make its own copy stale). */
static void forge_membership(hostile_t *P, size_t to, const uint8_t c[32],
                             int round) {
    static mp_swim_msg_t m;
    uint32_t inc = 100000u * (uint32_t)(round + 1) + 1000u * (uint32_t)to;
    memset(&m, 0, sizeof(m));
    m.type = MP_SWIM_MSG_GOSSIP;
    m.n_updates = 1;
    memcpy(m.updates[0].id, c, 32);
    m.updates[0].state = MP_SWIM_DEAD;
    m.updates[0].inc = inc;
    IT_CHECK(hx_send_swim(P, to, &m) == 0, "forged DEAD");
    m.updates[0].state = MP_SWIM_LEFT;
    m.updates[0].inc = inc + 500;
    IT_CHECK(hx_send_swim(P, to, &m) == 0, "forged LEFT");
    /* an incarnation C could never refute: refused outright */
    m.updates[0].state = MP_SWIM_DEAD;
    m.updates[0].inc = UINT32_MAX;
    IT_CHECK(hx_send_swim(P, to, &m) == 0, "forged DEAD at max");
}

static void join_storm(hostile_t *P, size_t to, uint64_t *seq) {
    for (int k = 0; k < JOINS; k++) {
        uint8_t key[12];
        uint64_t count = 7777 + *seq; /* a new group key every time */
        for (int b = 0; b < 8; b++)
            key[b] = (uint8_t)(count >> (8 * b));
        uint32_t len = 9;
        double w = 1.0;
        uint32_t bw = 1000;
        switch (k % 6) {
        case 0: /* coordinate outside the grid */
            key[8] = 2;
            key[9] = 200;
            len = 10;
            break;
        case 1: /* absurd number of dimensions */
            key[8] = 200;
            break;
        case 2:
            w = NAN;
            break;
        case 3:
            w = -1.0;
            break;
        case 4:
            w = 1e300;
            break;
        default: /* well-formed, absurd bandwidth, largest weight */
            key[8] = 1;
            w = MOSHPIT_WEIGHT_MAX;
            bw = UINT32_MAX;
            break;
        }
        if (k % 6 >= 2)
            key[8] = 1;
        IT_CHECK(hx_send_join(P, to, key, len, w, bw, 500, (*seq)++) == 0,
                 "join %d", k);
    }
}

static void flood(hostile_t *P, size_t to) {
    mp_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = MP_MSG_LEAVE;
    for (int k = 0; k < 3000; k++) {
        m.u.leave.seq = (uint64_t)k;
        IT_CHECK(hx_send_msg(P, to, &m) == 0, "flood");
    }
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-hostile";
    for (int i = 0; i < 32; i++)
        cfg.swarm_secret[i] = (uint8_t)(0xa5 ^ i);
    cfg.group_size = 3;
    cfg.min_group_size = 3;
    cfg.grid_dims = 1; /* one key: the three always meet */
    cfg.matchmaking_ms = 4000;
    cfg.round_timeout_ms = 30000;
    cfg.log_info = 1;
    IT_CHECK(it_start_swarm(hp, 3, &cfg) == 3, "swarm of 3");

    void *ctx = zmq_ctx_new();
    hostile_t P;
    IT_CHECK(hx_open(&P, ctx, cfg.swarm, cfg.swarm_secret, 1) == 0, "open");
    for (int i = 0; i < 3; i++)
        IT_CHECK(hx_connect(&P, hp[i].endpoint) == i, "hello %d", i);
    for (int i = 0; i < 3; i++)
        IT_CHECK(hx_wait_hello(&P, (size_t)i, 20000) == 0,
                 "no HELLO back from peer %d", i);
    /* A HELLO with another key older than the session's ("eo" smaller:
     * sent before the one A keyed with, delivered late, as HELLOs repeated
     * across a cut link are) does not end the session; a newer one does.
     * First a newer key that A keys with (its session with us is live
     * then), then an older and a newer one: A has read both once it
     * answers the newer one (messages on one connection arrive in order). */
    char live_txt[64], new_txt[64];
    snprintf(live_txt, sizeof(live_txt), "%.8s: live (session established)",
             P.pub_txt);
    snprintf(new_txt, sizeof(new_txt), "%.8s: dead (new session)", P.pub_txt);
    long lv0 = it_log_count(&hp[0], live_txt, 5000), lv = lv0;
    IT_CHECK(hx_rehello(&P, 0, P.eph_order + 10, NULL) == 0, "newer HELLO");
    for (int t = 0; t < 200 && lv <= lv0; t++) {
        hx_pump(&P, 50);
        lv = it_log_count(&hp[0], live_txt, 5000);
    }
    IT_CHECK(lv > lv0, "A did not key with our newer HELLO");
    IT_CHECK(P.peers[0].eo != 0, "A's HELLO carries no key order");
    long ns0 = it_log_count(&hp[0], new_txt, 5000);
    uint8_t newest[32];
    IT_CHECK(hx_rehello(&P, 0, P.eph_order + 5, NULL) == 0, "older HELLO");
    IT_CHECK(hx_rehello(&P, 0, P.eph_order + 20, newest) == 0, "newest HELLO");
    for (int t = 0; t < 200 && memcmp(P.peers[0].seen, newest, 32) != 0; t++)
        hx_pump(&P, 50);
    IT_CHECK(memcmp(P.peers[0].seen, newest, 32) == 0,
             "A never answered our newest HELLO");
    long ns = it_log_count(&hp[0], new_txt, 5000);
    IT_CHECK(ns == ns0 + 1,
             "A began %ld new sessions of ours on an older and a newer "
             "HELLO, not 1",
             ns - ns0);
    if (ns == ns0 + 1)
        printf("a late HELLO with an older key left A's session alone; the "
               "newer one began a new session\n");
    /* An older key repeated as a live sender repeats its HELLO (every
     * second: a restart whose clock went back) is heard after the 5 s for
     * which late copies are dropped, not never. */
    uint8_t back[32], back_sec[32];
    IT_CHECK(mp__crypto_keypair(back, back_sec) == MOSHPIT_OK, "key");
    uint64_t tb = it_now_ms(), heard_ms = 0;
    ns0 = ns;
    for (int t = 0; t < 12 && heard_ms == 0; t++) {
        IT_CHECK(hx_hello_key(&P, 0, back, P.eph_order + 1) == 0,
                 "repeated older HELLO");
        for (int k = 0; k < 20 && heard_ms == 0; k++) {
            hx_pump(&P, 50);
            if (memcmp(P.peers[0].seen, back, 32) == 0)
                heard_ms = it_now_ms() - tb;
        }
    }
    IT_CHECK(heard_ms >= 4500,
             "a repeated older key was heard after %llu ms (0: never), not "
             "after about 5 s",
             (unsigned long long)heard_ms);
    printf("an older key repeated every second was heard after %llu ms\n",
           (unsigned long long)heard_ms);
    long m0[3];
    for (int i = 0; i < 3; i++) {
        m0[i] = it_wait_members(&hp[i], 4, 20000);
        IT_CHECK(m0[i] == 4, "peer %d knows %ld members, not 4", i, m0[i]);
    }
    printf("hostile peer %.8s admitted by all three\n", P.pub_txt);
    uint8_t ckey[32];
    memcpy(ckey, P.peers[2].key, 32);

    float *v = malloc(COUNT * sizeof(float));
    uint64_t seq = 1;
    double worst = 0;
    uint8_t *big = calloc(1, 20000);
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t seeds[3];
        double w[3];
        for (int i = 0; i < 3; i++) {
            seeds[i] = 1000 + 10 * (uint64_t)r + (uint64_t)i;
            w[i] = it_weight(seeds[i]);
            IT_CHECK(it_average_async(&hp[i], COUNT, seeds[i], w[i]) == 0,
                     "send");
        }
        /* while the round runs */
        flood(&P, 2);
        for (size_t i = 0; i < 2; i++)
            forge_membership(&P, i, ckey, r);
        /* before the JOINs: their warnings would fill the second's budget */
        IT_CHECK(hx_send_raw(&P, 1, big, 20000) == 0, "oversized");
        for (size_t i = 0; i < 3; i++)
            join_storm(&P, i, &seq);
        hx_pump(&P, 0);
        for (int i = 0; i < 3; i++) {
            it_result_t res;
            IT_CHECK(it_collect(&hp[i], &res, v, COUNT, 60000) == 0,
                     "collect %d", i);
            IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == 3,
                     "round %d peer %d: err %d group %u", r, i, res.err,
                     res.info.group_size);
            double d = it_dev_from_mean(v, COUNT, seeds, w, 3);
            IT_CHECK(d <= 1e-5, "round %d peer %d deviates %g", r, i, d);
            worst = d > worst ? d : worst;
        }
    }
    free(big);
    free(v);
    printf("%d rounds of 3 honest peers under attack: largest deviation from "
           "the exact mean %.2e\n",
           ROUNDS, worst);

    /* nobody lost a member, also past the suspicion timeout (3 s): each
     * peer waits 6 s for its count to fall below what it was */
    for (int i = 0; i < 3; i++) {
        long m = it_wait_members_max(&hp[i], (size_t)m0[i] - 1, 6000, NULL);
        IT_CHECK(m == m0[i], "peer %d: %ld members, had %ld", i, m, m0[i]);
    }
    IT_CHECK(it_wait_log(&hp[2], "suspected by others, refuted", 10000) >= 1,
             "C never refuted the forged claims");

    /* each defence logged (the claims at A or B: at one of them a claim
     * can arrive after the news of it, and is then no news) */
    long claims = it_log_count(&hp[0], "claims another member is dead", 5000) +
                  it_log_count(&hp[1], "claims another member is dead", 5000);
    IT_CHECK(claims >= 1, "no forged claim was logged");
    printf("A and B logged %ld forged claims, taken as suspicion\n", claims);
    struct {
        int peer;
        const char *text;
    } want[] = {
        {0, "invalid update from"},
        {1, "invalid update from"},
        {0, "with a malformed group key"},
        {0, "malformed control message from"},
        {1, "too large (20000 bytes"},
        {2, "over the rate limit (1000/s"},
    };
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        long n = it_wait_log(&hp[want[k].peer], want[k].text, 10000);
        IT_CHECK(n >= 1, "peer %d never logged '%s'", want[k].peer,
                 want[k].text);
        printf("peer %c logged '%s' %ld times\n", 'A' + want[k].peer,
               want[k].text, n);
    }
    hx_pump(&P, 200);
    for (int i = 0; i < 3; i++)
        printf("answers to the hostile JOINs from %c: %llu JOIN_ACK, %llu "
               "ALONE\n",
               'A' + i, (unsigned long long)P.peers[i].n_ack,
               (unsigned long long)P.peers[i].n_alone);

    for (int i = 0; i < 3; i++)
        IT_CHECK(it_running(&hp[i]), "peer %d died", i);
    hx_close(&P);
    zmq_ctx_term(ctx);
    for (int i = 0; i < 3; i++)
        it_stop(&hp[i]);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
