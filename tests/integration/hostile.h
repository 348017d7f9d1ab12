/* SPDX-License-Identifier: MIT */
/*
 * hostile.h - an admitted but malicious peer for integration tests. It runs
 * inside the test process, not the library: with the library's own
 * internal modules (CURVE sockets from net.c, the control codec, the swarm
 * hash and the admission proof from crypto.c) it does the real handshake
 * with live peers (CURVE, then a HELLO that passes admission), so they
 * hold a session with it, and then sends whatever a test crafts over its
 * authenticated control links and raw frames with its data tag.
 *
 * An identity opened with a listening port (hx_open with listen = 1) also
 * receives the peers' answers (their HELLO, with the tag for our data
 * frames; JOIN_ACK, ALONE, ...), counted per peer. Without one it is a
 * sybil: it says HELLO and sends, and answers to it go nowhere.
 *
 * Not thread-safe; every call is made by the test's main thread.
 */
#ifndef MP_IT_HOSTILE_H
#define MP_IT_HOSTILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/swim.h"
#include "wire/wire.h"

#define HX_PEERS_MAX 8

/* One honest peer as the hostile identity sees it. */
typedef struct hx_peer {
    char addr[MP_ADDR_MAX]; /* its control endpoint */
    uint8_t key[32];
    void *ctrl;   /* CURVE DEALER to its control port */
    void *data;   /* DEALER to its data port, once its HELLO arrived */
    uint64_t tag; /* its tag for our data frames (from its HELLO), 0 = none */
    uint8_t rid[256]; /* routing id of its connection to our ROUTER */
    size_t rid_len;
    uint64_t n_hello, n_ack, n_alone, n_swim, n_other; /* received */
    uint64_t n_pb;    /* second frames that decoded as a GOSSIP block */
    uint64_t counter; /* nonce counter of our data frames to it */
    uint8_t seen[32]; /* "se" of its last HELLO: our key it keyed with */
    uint64_t eo;      /* "eo" of its last HELLO (0: none) */
} hx_peer_t;

typedef struct hostile {
    void *ctx; /* shared ZeroMQ context (not owned) */
    uint8_t pub[32], sec[32];
    char pub_txt[41];
    char ctrl_addr[MP_ADDR_MAX]; /* what we advertise */
    char data_addr[MP_ADDR_MAX];
    void *router; /* CURVE server at ctrl_addr (listen = 1), or NULL */
    void *data_router;
    uint8_t swarm_hash[32];
    uint8_t secret[32];
    int has_secret;
    uint8_t eph_pub[32];
    uint64_t eph_order; /* its order in our HELLOs ("eo") */
    uint64_t my_tag;
    hx_peer_t peers[HX_PEERS_MAX];
    size_t npeers;
    uint64_t n_stranger_hello; /* HELLOs from peers we never dialled */
    uint8_t *buf;              /* MP_CTRL_WIRE bytes of scratch */
} hostile_t;

/* Opens an identity for swarm `swarm` (secret NULL: open swarm). listen:
 * bind a CURVE ROUTER on 127.0.0.1 and advertise it; else advertise an
 * address where nothing listens. Returns 0 or -1. */
int hx_open(hostile_t *h, void *ctx, const char *swarm, const uint8_t *secret,
            int listen);
void hx_close(hostile_t *h);

/* Dials a peer's endpoint "tcp://host:port#KEY" and sends it our HELLO
 * (with the admission proof when the swarm has a secret). Returns the
 * peer's index, or -1. */
int hx_connect(hostile_t *h, const char *endpoint);

/* Sends peer i a HELLO with ephemeral key eph of order `order` (the key
 * of no session of ours: the peer may take it for a new session of ours,
 * or, older than the one it keyed with, for a late one). 0 or -1. */
int hx_hello_key(hostile_t *h, size_t i, const uint8_t eph[32], uint64_t order);
/* The same with a fresh key, written to eph_out if not NULL. */
int hx_rehello(hostile_t *h, size_t i, uint64_t order, uint8_t *eph_out);

/* Reads what arrived on our ROUTER for up to timeout_ms (returns at once
 * when something did), counting it per peer. Returns messages read. */
int hx_pump(hostile_t *h, int timeout_ms);
/* Pumps until peer i's HELLO arrived (its tag known); 0, or -1 on
 * timeout. */
int hx_wait_hello(hostile_t *h, size_t i, int timeout_ms);

/* Sends bytes as one control message to peer i (blocking up to 5 s when
 * the socket is full). 0 or -1. */
int hx_send_raw(hostile_t *h, size_t i, const void *buf, size_t len);
int hx_send_msg(hostile_t *h, size_t i, const mp_msg_t *m);
int hx_send_swim(hostile_t *h, size_t i, const mp_swim_msg_t *m);
/* Control message m with a second frame of pb_len bytes (piggybacked
 * gossip, or whatever a test puts there). 0 or -1. */
int hx_send_msg_pb(hostile_t *h, size_t i, const mp_msg_t *m, const void *pb,
                   size_t pb_len);
/* A JOIN for key[0..key_len) (needs no round of ours). weight may be
 * one the encoder refuses (NaN, negative, above MOSHPIT_WEIGHT_MAX): the
 * message is then crafted by hand. */
int hx_send_join(hostile_t *h, size_t i, const uint8_t *key, uint32_t key_len,
                 double weight, uint32_t bandwidth, uint32_t window_ms,
                 uint64_t seq);
/* A data frame of `count` floats (garbage, never authenticated) for round
 * round_id with our tag at peer i, on its data port. 0 or -1. */
int hx_send_data(hostile_t *h, size_t i, uint64_t round_id, uint32_t count);

#endif
