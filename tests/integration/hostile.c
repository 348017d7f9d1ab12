/* SPDX-License-Identifier: MIT */
/*
 * hostile.c - an admitted but malicious peer for integration tests (see
 * hostile.h): the real handshake through the library's internal modules,
 * then crafted control messages and data frames.
 */
#include "hostile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "crypto/crypto.h"
#include "crypto/session.h"
#include "base/endpoint.h"
#include "net/engine.h"
#include "net/net.h"
#include "wire/wire_swim.h"

static unsigned hx_seq; /* distinguishes monitor endpoints */

static int set_int(void *s, int opt, int v) {
    return zmq_setsockopt(s, opt, &v, sizeof(v));
}

static void *bind_router(hostile_t *h, int curve, char *addr_out) {
    void *s = zmq_socket(h->ctx, ZMQ_ROUTER);
    if (s == NULL)
        return NULL;
    set_int(s, ZMQ_LINGER, 0);
    if (curve && (set_int(s, ZMQ_CURVE_SERVER, 1) != 0 ||
                  zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, h->sec, 32) != 0)) {
        zmq_close(s);
        return NULL;
    }
    char ep[MP_ADDR_MAX];
    size_t sz = sizeof(ep);
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &sz) != 0) {
        zmq_close(s);
        return NULL;
    }
    snprintf(addr_out, MP_ADDR_MAX, "%s", ep);
    return s;
}

int hx_open(hostile_t *h, void *ctx, const char *swarm, const uint8_t *secret,
            int listen) {
    memset(h, 0, sizeof(*h));
    h->ctx = ctx;
    if (mp__crypto_init() != MOSHPIT_OK)
        return -1;
    h->buf = malloc(MP_CTRL_WIRE_MAX);
    uint8_t eph_sec[32];
    if (h->buf == NULL || mp__crypto_keypair(h->pub, h->sec) != MOSHPIT_OK ||
        mp__crypto_keypair(h->eph_pub, eph_sec) != MOSHPIT_OK)
        return -1;
    mp__net_z85_encode(h->pub_txt, h->pub);
    mp__crypto_swarm_hash(swarm, h->swarm_hash);
    if (secret != NULL) {
        memcpy(h->secret, secret, 32);
        h->has_secret = 1;
    }
    h->my_tag = mp__crypto_random_u64() | 1;
    h->eph_order = 1000000;
    if (listen) {
        h->router = bind_router(h, 1, h->ctrl_addr);
        h->data_router = bind_router(h, 0, h->data_addr);
        if (h->router == NULL || h->data_router == NULL)
            return -1;
    } else {
        /* nothing listens on port 1: the peers' dials go nowhere */
        snprintf(h->ctrl_addr, sizeof(h->ctrl_addr), "tcp://127.0.0.1:1");
        snprintf(h->data_addr, sizeof(h->data_addr), "tcp://127.0.0.1:1");
    }
    return 0;
}

void hx_close(hostile_t *h) {
    for (size_t i = 0; i < h->npeers; i++) {
        mp__net_close(&h->peers[i].ctrl);
        mp__net_close(&h->peers[i].data);
    }
    mp__net_close(&h->router);
    mp__net_close(&h->data_router);
    free(h->buf);
    h->buf = NULL;
    h->npeers = 0;
}

/* Our HELLO to peer i with ephemeral key eph of order `order`. */
static int send_hello(hostile_t *h, size_t i, const uint8_t eph[32],
                      uint64_t order) {
    hx_peer_t *p = &h->peers[i];
    mp_msg_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -1;
    m->type = MP_MSG_HELLO;
    mp_hello_t *hl = &m->u.hello;
    memcpy(hl->swarm, h->swarm_hash, 32);
    memcpy(hl->eph, eph, 32);
    hl->eph_order = order;
    if (h->has_secret) {
        mp__crypto_admit_proof(h->secret, h->swarm_hash, h->pub, p->key, eph,
                               hl->proof);
        hl->has_proof = 1;
    }
    hl->tag = h->my_tag;
    hl->bandwidth = 1000;
    hl->ciphers = mp__session_ciphers();
    snprintf(hl->ctrl_addr, sizeof(hl->ctrl_addr), "%s", h->ctrl_addr);
    snprintf(hl->data_addr, sizeof(hl->data_addr), "%s", h->data_addr);
    int rc = hx_send_msg(h, i, m);
    free(m);
    return rc;
}

int hx_hello_key(hostile_t *h, size_t i, const uint8_t eph[32],
                 uint64_t order) {
    return i < h->npeers ? send_hello(h, i, eph, order) : -1;
}

int hx_rehello(hostile_t *h, size_t i, uint64_t order, uint8_t *eph_out) {
    uint8_t eph[32], eph_sec[32];
    if (i >= h->npeers || mp__crypto_keypair(eph, eph_sec) != MOSHPIT_OK)
        return -1;
    if (eph_out != NULL)
        memcpy(eph_out, eph, 32);
    return send_hello(h, i, eph, order);
}

int hx_connect(hostile_t *h, const char *endpoint) {
    if (h->npeers >= HX_PEERS_MAX)
        return -1;
    hx_peer_t *p = &h->peers[h->npeers];
    memset(p, 0, sizeof(*p));
    mp_endpoint_t ep;
    if (mp__endpoint_parse(endpoint, &ep) != MOSHPIT_OK)
        return -1;
    memcpy(p->addr, ep.addr, sizeof(p->addr));
    memcpy(p->key, ep.key, sizeof(p->key));
    char mon_ep[64];
    void *mon = NULL;
    snprintf(mon_ep, sizeof(mon_ep), "inproc://hx-mon-%u", ++hx_seq);
    p->ctrl = mp__net_ctrl_dealer(h->ctx, p->addr, p->key, h->pub, h->sec,
                                  mon_ep, &mon);
    if (p->ctrl == NULL)
        return -1;
    /* the monitor is of no use here */
    zmq_socket_monitor(p->ctrl, NULL, 0);
    mp__net_close(&mon);
    set_int(p->ctrl, ZMQ_SNDTIMEO, 5000);
    set_int(p->ctrl, ZMQ_SNDHWM, 100000);
    size_t i = h->npeers++;
    return send_hello(h, i, h->eph_pub, h->eph_order) == 0 ? (int)i : -1;
}

static hx_peer_t *peer_by_rid(hostile_t *h, const void *rid, size_t len) {
    for (size_t i = 0; i < h->npeers; i++)
        if (h->peers[i].rid_len == len &&
            memcmp(h->peers[i].rid, rid, len) == 0)
            return &h->peers[i];
    return NULL;
}

static void on_router_msg(hostile_t *h, zmq_msg_t *rid, zmq_msg_t *body) {
    static mp_msg_t m;
    static mp_swim_msg_t sm;
    const uint8_t *b = zmq_msg_data(body);
    size_t len = zmq_msg_size(body);
    hx_peer_t *p = peer_by_rid(h, zmq_msg_data(rid), zmq_msg_size(rid));
    if (mp__wire_msg_decode(b, len, &m) == MOSHPIT_OK) {
        if (m.type == MP_MSG_HELLO) {
            /* whose? the HELLO names the sender's control endpoint */
            for (size_t i = 0; i < h->npeers && p == NULL; i++)
                if (strcmp(h->peers[i].addr, m.u.hello.ctrl_addr) == 0)
                    p = &h->peers[i];
            if (p == NULL)
                h->n_stranger_hello++;
            if (p == NULL || zmq_msg_size(rid) > sizeof(p->rid))
                return;
            memcpy(p->rid, zmq_msg_data(rid), zmq_msg_size(rid));
            p->rid_len = zmq_msg_size(rid);
            p->tag = m.u.hello.tag;
            memcpy(p->seen, m.u.hello.seen, 32);
            p->eo = m.u.hello.eph_order;
            p->n_hello++;
            if (p->data == NULL) {
                static const uint8_t drid[4] = {'h', 'd', 'r', 'd'};
                p->data =
                    mp__net_data_dealer(h->ctx, m.u.hello.data_addr, 1, drid,
                                        sizeof(drid), 0, NULL, NULL);
                if (p->data != NULL) {
                    set_int(p->data, ZMQ_SNDTIMEO, 5000);
                    set_int(p->data, ZMQ_SNDHWM, 1000);
                }
            }
            return;
        }
        if (p == NULL)
            return;
        if (m.type == MP_MSG_JOIN_ACK)
            p->n_ack++;
        else if (m.type == MP_MSG_ALONE)
            p->n_alone++;
        else
            p->n_other++;
        return;
    }
    if (p != NULL && mp__wire_swim_msg_decode(b, len, &sm) == MOSHPIT_OK)
        p->n_swim++;
}

int hx_pump(hostile_t *h, int timeout_ms) {
    if (h->router == NULL)
        return 0;
    int n = 0;
    zmq_pollitem_t it = {h->router, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return 0;
    for (;;) {
        zmq_msg_t rid, body;
        zmq_msg_init(&rid);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&rid, h->router, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&rid);
            zmq_msg_close(&body);
            break;
        }
        if (zmq_msg_more(&rid) &&
            zmq_msg_recv(&body, h->router, ZMQ_DONTWAIT) >= 0) {
            on_router_msg(h, &rid, &body);
            n++;
            hx_peer_t *p =
                peer_by_rid(h, zmq_msg_data(&rid), zmq_msg_size(&rid));
            for (int k = 0; zmq_msg_more(&body); k++) {
                zmq_msg_close(&body);
                zmq_msg_init(&body);
                if (zmq_msg_recv(&body, h->router, ZMQ_DONTWAIT) < 0)
                    break;
                /* the second frame: piggybacked membership updates */
                static mp_swim_msg_t sm;
                if (k == 0 && p != NULL &&
                    mp__wire_swim_msg_decode(zmq_msg_data(&body),
                                             zmq_msg_size(&body),
                                             &sm) == MOSHPIT_OK &&
                    sm.type == MP_SWIM_MSG_GOSSIP)
                    p->n_pb++;
            }
        }
        zmq_msg_close(&rid);
        zmq_msg_close(&body);
    }
    return n;
}

int hx_wait_hello(hostile_t *h, size_t i, int timeout_ms) {
    uint64_t end = mp_plat_clock_ms() + (uint64_t)timeout_ms;
    while (h->peers[i].tag == 0 || h->peers[i].data == NULL) {
        uint64_t now = mp_plat_clock_ms();
        if (now >= end)
            return -1;
        hx_pump(h, (int)(end - now));
    }
    return 0;
}

int hx_send_raw(hostile_t *h, size_t i, const void *buf, size_t len) {
    if (i >= h->npeers)
        return -1;
    return zmq_send(h->peers[i].ctrl, buf, len, 0) == (int)len ? 0 : -1;
}

int hx_send_msg(hostile_t *h, size_t i, const mp_msg_t *m) {
    size_t len = 0;
    if (mp__wire_msg_encode(m, h->buf, MP_CTRL_MAX, &len) != MOSHPIT_OK)
        return -1;
    return hx_send_raw(h, i, h->buf, len);
}

int hx_send_msg_pb(hostile_t *h, size_t i, const mp_msg_t *m, const void *pb,
                   size_t pb_len) {
    size_t len = 0;
    if (i >= h->npeers ||
        mp__wire_msg_encode(m, h->buf, MP_CTRL_MAX, &len) != MOSHPIT_OK)
        return -1;
    void *s = h->peers[i].ctrl;
    return zmq_send(s, h->buf, len, ZMQ_SNDMORE) == (int)len &&
                   zmq_send(s, pb, pb_len, 0) == (int)pb_len
               ? 0
               : -1;
}

int hx_send_swim(hostile_t *h, size_t i, const mp_swim_msg_t *m) {
    size_t len = 0;
    if (mp__wire_swim_msg_encode(m, h->buf, MP_CTRL_MAX, &len) != MOSHPIT_OK)
        return -1;
    return hx_send_raw(h, i, h->buf, len);
}

int hx_send_join(hostile_t *h, size_t i, const uint8_t *key, uint32_t key_len,
                 double weight, uint32_t bandwidth, uint32_t window_ms,
                 uint64_t seq) {
    mp_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = MP_MSG_JOIN;
    m.u.join.seq = seq;
    m.u.join.weight = weight;
    m.u.join.bandwidth = bandwidth;
    m.u.join.window_ms = window_ms;
    if (key_len > MP_KEY_MAX)
        return -1;
    m.u.join.key_len = key_len;
    memcpy(m.u.join.key, key, key_len);
    bool absurd = !(weight >= 0.0 && weight <= MOSHPIT_WEIGHT_MAX);
    if (!absurd)
        return hx_send_msg(h, i, &m);
    /* the encoder refuses such a weight: encode 1.0 and overwrite the
     * msgpack float64 (0xcb + 8 bytes big-endian) with the absurd one */
    m.u.join.weight = 1.0;
    size_t len = 0;
    if (mp__wire_msg_encode(&m, h->buf, MP_CTRL_MAX, &len) != MOSHPIT_OK)
        return -1;
    static const uint8_t one[9] = {0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
    for (size_t k = 0; k + 9 <= len; k++)
        if (memcmp(h->buf + k, one, 9) == 0) {
            uint64_t u;
            memcpy(&u, &weight, 8);
            for (int b = 0; b < 8; b++)
                h->buf[k + 1 + (size_t)b] = (uint8_t)(u >> (56 - 8 * b));
            return hx_send_raw(h, i, h->buf, len);
        }
    return -1;
}

int hx_send_data(hostile_t *h, size_t i, uint64_t round_id, uint32_t count) {
    if (i >= h->npeers || h->peers[i].data == NULL || h->peers[i].tag == 0)
        return -1;
    hx_peer_t *p = &h->peers[i];
    size_t len = MP_DATA_HDR_BYTES + (size_t)count * 4u + MP_DATA_TAG_BYTES;
    zmq_msg_t zm;
    if (zmq_msg_init_size(&zm, len) != 0)
        return -1;
    uint8_t *b = zmq_msg_data(&zm);
    memset(b, 0x5a, len);
    mp_data_hdr_t hd = {.kind = 1,
                        .count = count,
                        .tag = p->tag,
                        .counter = ++p->counter,
                        .round_id = round_id};
    mp__wire_data_hdr_encode(&hd, b);
    if (zmq_msg_send(&zm, p->data, 0) < 0) {
        zmq_msg_close(&zm);
        return -1;
    }
    return 0;
}
