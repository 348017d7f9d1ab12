/* SPDX-License-Identifier: MIT */
/*
 * test_int_limits.c - the limits on what a peer can make another one hold,
 * each hit by an admitted hostile peer (hostile.c: the real handshake,
 * then crafted traffic) against a real peer process H (config peers_max
 * 24, peer_msg_rate 100), which averages with a second real peer H2:
 *   - message size: 20000 bytes are read and dropped with a log line;
 *     100000 bytes make ZeroMQ close the connection unread;
 *   - bytes buffered per peer: 17 early data frames of 4 MiB, of which H
 *     holds 15 (the next would pass 64 MiB), then tiny frames up to the
 *     per-peer frame limit of 1024; the total limit is never reached;
 *   - message rate: JOINs as fast as the socket takes them; H's answers
 *     never exceed burst + rate x elapsed time;
 *   - matchmaker state: 9 identities JOIN 9 group keys; the 9th finds
 *     all 8 matchmaker slots busy;
 *   - members tracked: 30 more identities say HELLO; H keeps 24 peers.
 * Each limit must log its line. H and H2 average exactly before, between
 * and after the attacks on H's buffers and rate, and H is still running
 * at the end.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zmq.h>

#include "harness.h"
#include "hostile.h"
#include "net/engine.h"

#define COUNT 20011
#define RATE 100u
#define SYBILS_KEYS 9
#define SYBILS_MORE 30
#define PEERS_MAX 24u

static it_peer_t hp[2];
static float *vals;

static void exact_round(uint64_t seed) {
    uint64_t seeds[2] = {seed, seed + 1};
    double w[2] = {it_weight(seeds[0]), it_weight(seeds[1])};
    for (int i = 0; i < 2; i++)
        IT_CHECK(it_average_async(&hp[i], COUNT, seeds[i], w[i]) == 0, "send");
    for (int i = 0; i < 2; i++) {
        it_result_t res;
        IT_CHECK(it_collect(&hp[i], &res, vals, COUNT, 40000) == 0,
                 "collect %d", i);
        IT_CHECK(res.err == MOSHPIT_OK && res.info.group_size == 2,
                 "round %llu peer %d: err %d group %u",
                 (unsigned long long)seed, i, res.err, res.info.group_size);
        double d = it_dev_from_mean(vals, COUNT, seeds, w, 2);
        IT_CHECK(d <= 1e-5, "round %llu peer %d deviates %g",
                 (unsigned long long)seed, i, d);
    }
}

/* A group key as peers build it: vector length, d = 1, no coordinates. */
static void key_for(uint8_t key[9], uint64_t count) {
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(count >> (8 * i));
    key[8] = 1;
}

static void size_limit(hostile_t *P) {
    uint8_t *big = calloc(1, 100000);
    IT_CHECK(big != NULL, "alloc");
    if (big == NULL)
        return;
    IT_CHECK(hx_send_raw(P, 0, big, 20000) == 0, "send 20000");
    IT_CHECK(it_wait_log(&hp[0], "too large (20000 bytes", 20000) >= 1,
             "no log line for a 20000-byte control message");
    /* beyond MP_CTRL_WIRE_MAX ZeroMQ closes the connection unread; the
     * DEALER reconnects, and a later message is read again */
    IT_CHECK(hx_send_raw(P, 0, big, 100000) == 0, "send 100000");
    long seen = 0;
    for (int i = 0; i < 30 && seen < 1; i++) {
        IT_CHECK(hx_send_raw(P, 0, big, 17000) == 0, "send 17000");
        seen = it_wait_log(&hp[0], "too large (17000 bytes", 1000);
    }
    IT_CHECK(seen >= 1, "no control message read after the oversized one");
    IT_CHECK(it_log_count(&hp[0], "(100000 bytes", 5000) == 0,
             "a message above the transport limit was read");
    free(big);
    printf("message size: 20000 bytes dropped with a log line, 100000 "
           "never read\n");
}

static void early_limit(hostile_t *P) {
    const size_t big =
        MP_DATA_HDR_BYTES + 4u * MP_DATA_MAX_COUNT + MP_DATA_TAG_BYTES;
    size_t held = MP_EARLY_PEER_MAX_BYTES / big; /* 15 */
    for (int i = 0; i < 17; i++)
        IT_CHECK(hx_send_data(P, 0, 0x1000 + (uint64_t)i, MP_DATA_MAX_COUNT) ==
                     0,
                 "data frame %d", i);
    char want[160];
    snprintf(want, sizeof(want),
             "over the per-peer limit (%zu frames, %zu bytes held)", held,
             held * big);
    IT_CHECK(it_wait_log(&hp[0], want, 30000) >= 1, "no log line '%s'", want);
    /* then small frames up to the per-peer frame limit (logged at most
     * once a second: keep sending until the line with 1024 frames) */
    size_t small = MP_DATA_HDR_BYTES + 4u + MP_DATA_TAG_BYTES;
    size_t bytes = held * big + (MP_EARLY_PEER_MAX_FRAMES - held) * small;
    snprintf(want, sizeof(want),
             "over the per-peer limit (%u frames, %zu bytes held)",
             MP_EARLY_PEER_MAX_FRAMES, bytes);
    long seen = 0;
    for (int i = 0; i < 40 && seen < 1; i++) {
        for (int k = 0; k < 100; k++)
            IT_CHECK(hx_send_data(P, 0, 0x2000 + (uint64_t)k, 1) == 0,
                     "small frame");
        seen = it_wait_log(&hp[0], want, 300);
    }
    IT_CHECK(seen >= 1, "no log line '%s'", want);
    IT_CHECK(it_log_count(&hp[0], "early data frames over the limit", 5000) ==
                 0,
             "the total limit was hit by one peer");
    printf("bytes buffered per peer: held %zu frames / %zu bytes, then %u "
           "frames / %zu bytes\n",
           held, held * big, MP_EARLY_PEER_MAX_FRAMES, bytes);
}

static void rate_limit(hostile_t *P) {
    uint8_t key[9];
    key_for(key, 0xfffffffffull);
    uint64_t t0 = it_now_ms(), seq = 1, sent = 0;
    long seen = 0;
    double worst = 0; /* highest answers / allowed seen */
    for (int i = 0; i < 200 && (seen < 1 || sent < 2000); i++) {
        for (int k = 0; k < 200; k++, sent++)
            IT_CHECK(hx_send_join(P, 0, key, sizeof(key), 1.0, 1000, 100,
                                  seq++) == 0,
                     "join");
        hx_pump(P, 0);
        uint64_t acks = P->peers[0].n_ack;
        double allowed =
            2.0 * RATE + RATE * (double)(it_now_ms() - t0) / 1000.0 + 1.0;
        IT_CHECK((double)acks <= allowed,
                 "%llu JOINs answered, at most %.0f "
                 "allowed",
                 (unsigned long long)acks, allowed);
        if ((double)acks / allowed > worst)
            worst = (double)acks / allowed;
        seen = it_log_count(&hp[0], "over the rate limit (100/s", 5000);
    }
    /* H reads behind the sender (TSan on a loaded machine: all 40,000
     * sent in 184 ms, 190 answered so far); it logs the limit once it
     * reaches the drops */
    if (seen < 1)
        seen = it_wait_log(&hp[0], "over the rate limit (100/s", 20000);
    IT_CHECK(seen >= 1, "no rate limit log line");
    /* the last answers may still be on their way: one more look */
    hx_pump(P, 200);
    double allowed =
        2.0 * RATE + RATE * (double)(it_now_ms() - t0) / 1000.0 + 1.0;
    IT_CHECK((double)P->peers[0].n_ack <= allowed, "%llu answered > %.0f",
             (unsigned long long)P->peers[0].n_ack, allowed);
    IT_CHECK(P->peers[0].n_ack < sent, "nothing was dropped");
    printf("message rate: %llu JOINs sent in %llu ms, %llu answered (at most "
           "%.0f allowed; peak %.0f%% of the bound)\n",
           (unsigned long long)sent, (unsigned long long)(it_now_ms() - t0),
           (unsigned long long)P->peers[0].n_ack, allowed, 100.0 * worst);
}

static void sybils(void *ctx) {
    static hostile_t s[SYBILS_KEYS + SYBILS_MORE];
    /* matchmaker slots: 9 identities JOIN 9 keys with a long window */
    for (int i = 0; i < SYBILS_KEYS; i++) {
        IT_CHECK(hx_open(&s[i], ctx, "it-limits", NULL, 0) == 0, "sybil");
        IT_CHECK(hx_connect(&s[i], hp[0].endpoint) == 0, "sybil hello");
        uint8_t key[9];
        key_for(key, 1000 + (uint64_t)i);
        IT_CHECK(
            hx_send_join(&s[i], 0, key, sizeof(key), 1.0, 1000, 60000, 1) == 0,
            "sybil join");
    }
    /* (the JOINs come over 9 connections: any one of them may be last) */
    char want[120];
    snprintf(want, sizeof(want), "all %u group keys busy, JOIN from",
             MP_MM_KEYS);
    IT_CHECK(it_wait_log(&hp[0], want, 20000) >= 1, "no log line '%s'", want);
    for (int i = 0; i < SYBILS_KEYS; i++) { /* free the slots again */
        mp_msg_t m;
        memset(&m, 0, sizeof(m));
        m.type = MP_MSG_LEAVE;
        m.u.leave.seq = 1;
        IT_CHECK(hx_send_msg(&s[i], 0, &m) == 0, "leave");
    }
    printf("matchmaker: the 9th group key found all %u slots busy\n",
           MP_MM_KEYS);

    /* members tracked: more identities than the table holds */
    for (int i = SYBILS_KEYS; i < SYBILS_KEYS + SYBILS_MORE; i++) {
        IT_CHECK(hx_open(&s[i], ctx, "it-limits", NULL, 0) == 0, "sybil");
        IT_CHECK(hx_connect(&s[i], hp[0].endpoint) == 0, "sybil hello");
    }
    snprintf(want, sizeof(want), "peer table full (%u peers", PEERS_MAX);
    IT_CHECK(it_wait_log(&hp[0], want, 20000) >= 1, "no log line '%s'", want);
    long m = it_members(&hp[0], 5000);
    IT_CHECK(m >= 2 && m <= (long)PEERS_MAX + 1,
             "H knows %ld members, the table holds %u", m, PEERS_MAX);
    printf("members tracked: %d identities said HELLO, H knows %ld members "
           "(itself and at most %u peers)\n",
           SYBILS_KEYS + SYBILS_MORE + 2, m, PEERS_MAX);
    for (int i = 0; i < SYBILS_KEYS + SYBILS_MORE; i++)
        hx_close(&s[i]);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    vals = malloc(COUNT * sizeof(float));
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-limits";
    cfg.group_size = 2;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 20000;
    cfg.peers_max = PEERS_MAX;
    cfg.peer_msg_rate = RATE;
    cfg.grid_dims = 1; /* one key, whoever else H counts as a member */
    IT_CHECK(it_start_swarm(hp, 2, &cfg) == 2, "swarm of 2");
    exact_round(10);

    void *ctx = zmq_ctx_new();
    hostile_t P;
    IT_CHECK(hx_open(&P, ctx, "it-limits", NULL, 1) == 0, "hostile open");
    IT_CHECK(hx_connect(&P, hp[0].endpoint) == 0, "hostile hello");
    IT_CHECK(hx_wait_hello(&P, 0, 20000) == 0, "no HELLO back from H");
    IT_CHECK(it_wait_members(&hp[0], 3, 20000) == 3, "H does not count it");
    printf("hostile peer %.8s admitted\n", P.pub_txt);

    size_limit(&P);
    early_limit(&P);
    exact_round(20);
    rate_limit(&P);
    exact_round(30);
    sybils(ctx);

    IT_CHECK(it_running(&hp[0]), "H died");
    hx_close(&P);
    zmq_ctx_term(ctx);
    it_stop(&hp[1]);
    it_stop(&hp[0]);
    free(vals);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
