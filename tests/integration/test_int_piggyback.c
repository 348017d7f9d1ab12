/* SPDX-License-Identifier: MIT */
/*
 * test_int_piggyback.c - membership updates ride on round traffic: a JOIN,
 * JOIN_ACK, GROUP or ALONE to a live peer may carry a second frame, a
 * GOSSIP block (docs/PROTOCOL.md, "Piggybacked gossip"). Three honest
 * peer processes A, B, C of a swarm with a swarm_secret, and a peer P made
 * by the test (hostile.c: the real handshake and admission proof) that
 * speaks the protocol frame by frame:
 *   1. honest -> P: P's JOINs are answered (JOIN_ACK or ALONE) with a
 *      GOSSIP block as the second frame. P announces itself on its first
 *      JOIN (its own ALIVE record as the second frame), which is news to
 *      A. Without that A would have news only while the swarm's own join
 *      records are still being spread: P speaks no SWIM, so it is no
 *      member A would gossip about or probe, and a record is passed on a
 *      few times only (retransmit_mult * ceil(log2(n + 1)), 6 here, about
 *      a second at the 500 ms period). A flood that began later (TSan's
 *      slowdown on a loaded machine) got 20,000 answers without one;
 *   2. P -> honest: a JOIN to A carries "D is alive at <address>" for an
 *      identity D that nobody was told of otherwise; A learns D from that
 *      frame alone and dials it (D, a listening identity of the test,
 *      receives a HELLO);
 *   3. a second frame that is not a GOSSIP block is dropped and logged,
 *      and a control message of three frames is dropped whole;
 *   4. the three still average exactly.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zmq.h>

#include "harness.h"
#include "hostile.h"
#include "platform.h"
#include "wire/wire_swim.h"

#define COUNT 20011

static it_peer_t hp[3];

static void join_msg(mp_msg_t *m, uint64_t seq) {
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_JOIN;
    m->u.join.seq = seq;
    m->u.join.weight = 1.0;
    m->u.join.bandwidth = 100;
    m->u.join.window_ms = 200;
    m->u.join.key_len = 1; /* malformed: answered ALONE at once */
    m->u.join.key[0] = 0xee;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-piggyback";
    for (int i = 0; i < 32; i++)
        cfg.swarm_secret[i] = (uint8_t)(0x3c ^ i);
    cfg.group_size = 3;
    cfg.min_group_size = 3;
    cfg.grid_dims = 1;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 30000;
    IT_CHECK(it_start_swarm(hp, 3, &cfg) == 3, "swarm of 3");

    void *ctx = zmq_ctx_new();
    hostile_t P, D;
    IT_CHECK(hx_open(&P, ctx, cfg.swarm, cfg.swarm_secret, 1) == 0, "open P");
    IT_CHECK(hx_open(&D, ctx, cfg.swarm, cfg.swarm_secret, 1) == 0, "open D");
    for (int i = 0; i < 3; i++)
        IT_CHECK(hx_connect(&P, hp[i].endpoint) == i, "hello %d", i);
    for (int i = 0; i < 3; i++)
        IT_CHECK(hx_wait_hello(&P, (size_t)i, 20000) == 0,
                 "no HELLO back from peer %d", i);

    /* 1. answers to our JOINs carry gossip: our first JOIN says that we are
     * alive, news that A passes on, to us too */
    static mp_swim_update_t u;
    memset(&u, 0, sizeof(u));
    memcpy(u.id, P.pub, 32);
    u.state = MP_SWIM_ALIVE;
    u.has_addr = 1;
    snprintf(u.addr, sizeof(u.addr), "%s", P.ctrl_addr);
    uint8_t block[2048];
    size_t blen = 0;
    IT_CHECK(mp__wire_swim_block_encode(0, &u, 1, block, sizeof(block),
                                        &blen) == MOSHPIT_OK,
             "encode block");
    mp_msg_t m;
    uint64_t seq = 1, sent = 0;
    uint64_t end = mp_plat_clock_ms() + 20000;
    while (P.peers[0].n_pb == 0 && mp_plat_clock_ms() < end) {
        join_msg(&m, seq++);
        IT_CHECK((sent == 0 ? hx_send_msg_pb(&P, 0, &m, block, blen)
                            : hx_send_msg(&P, 0, &m)) == 0,
                 "JOIN");
        sent++;
        hx_pump(&P, 100);
    }
    IT_CHECK(P.peers[0].n_pb >= 1, "no gossip frame on %llu answers",
             (unsigned long long)(P.peers[0].n_ack + P.peers[0].n_alone));
    printf("1. A's answers to %llu JOINs: %llu, %llu with a gossip frame\n",
           (unsigned long long)sent,
           (unsigned long long)(P.peers[0].n_ack + P.peers[0].n_alone),
           (unsigned long long)P.peers[0].n_pb);

    /* 2. D, known to no one, announced only on a JOIN's second frame */
    IT_CHECK(D.n_stranger_hello == 0, "D got a HELLO before it was named");
    memset(&u, 0, sizeof(u));
    memcpy(u.id, D.pub, 32);
    u.state = MP_SWIM_ALIVE;
    u.inc = 0;
    u.has_addr = 1;
    snprintf(u.addr, sizeof(u.addr), "%s", D.ctrl_addr);
    IT_CHECK(mp__wire_swim_block_encode(0, &u, 1, block, sizeof(block),
                                        &blen) == MOSHPIT_OK,
             "encode block");
    join_msg(&m, seq++);
    IT_CHECK(hx_send_msg_pb(&P, 0, &m, block, blen) == 0, "JOIN + gossip");
    end = mp_plat_clock_ms() + 20000;
    while (D.n_stranger_hello == 0 && mp_plat_clock_ms() < end)
        hx_pump(&D, 200);
    IT_CHECK(D.n_stranger_hello >= 1,
             "nobody dialled D: the piggybacked update was not taken");
    printf("2. D, named only in a JOIN's gossip frame, was dialled and got "
           "%llu HELLO\n",
           (unsigned long long)D.n_stranger_hello);

    /* 3. a second frame that is no GOSSIP block; three frames */
    static mp_swim_msg_t ping;
    memset(&ping, 0, sizeof(ping));
    ping.type = MP_SWIM_MSG_PING;
    ping.seq = 7;
    snprintf(ping.addr, sizeof(ping.addr), "%s", P.ctrl_addr);
    size_t plen = 0;
    IT_CHECK(mp__wire_swim_msg_encode(&ping, block, sizeof(block), &plen) ==
                 MOSHPIT_OK,
             "encode ping");
    join_msg(&m, seq++);
    IT_CHECK(hx_send_msg_pb(&P, 1, &m, block, plen) == 0, "JOIN + PING");
    IT_CHECK(it_wait_log(&hp[1], "is not a membership update block", 10000) >=
                 1,
             "B did not log the frame that is not a GOSSIP block");
    void *cs = P.peers[2].ctrl;
    IT_CHECK(zmq_send(cs, "a", 1, ZMQ_SNDMORE) == 1 &&
                 zmq_send(cs, "b", 1, ZMQ_SNDMORE) == 1 &&
                 zmq_send(cs, "c", 1, 0) == 1,
             "three frames");
    IT_CHECK(it_wait_log(&hp[2], "more than two frames dropped", 10000) >= 1,
             "C did not log the message of three frames");
    printf("3. a PING as second frame and a message of three frames: "
           "dropped and logged\n");

    /* 4. the three still average exactly */
    float *v = malloc(COUNT * sizeof(float));
    uint64_t seeds[3];
    double w[3];
    for (int i = 0; i < 3; i++) {
        seeds[i] = 500 + (uint64_t)i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&hp[i], COUNT, seeds[i], w[i]) == 0, "send");
    }
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        it_result_t res;
        IT_CHECK(it_collect(&hp[i], &res, v, COUNT, 60000) == 0, "collect %d",
                 i);
        IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == 3,
                 "peer %d: err %d group %u", i, res.err, res.info.group_size);
        double d = it_dev_from_mean(v, COUNT, seeds, w, 3);
        IT_CHECK(d <= 1e-5, "peer %d deviates %g", i, d);
        worst = d > worst ? d : worst;
    }
    printf("4. the three averaged exactly afterwards (deviation %.2e)\n",
           worst);
    free(v);
    for (int i = 0; i < 3; i++)
        IT_CHECK(it_running(&hp[i]), "peer %d died", i);
    hx_close(&P);
    hx_close(&D);
    zmq_ctx_term(ctx);
    for (int i = 0; i < 3; i++)
        it_stop(&hp[i]);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
