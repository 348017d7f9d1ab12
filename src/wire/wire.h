/* SPDX-License-Identifier: MIT */
/*
 * wire.h - the control-message codec (msgpack) and the data-frame header.
 *
 * Pure functions over byte buffers: no I/O, no globals, hard limits on every
 * length and count. Decoders never trust a field: unknown versions, wrong
 * types, missing required keys, oversized strings/arrays, non-finite or
 * negative weights are all rejected with MOSHPIT_EPROTO. Unknown keys are
 * ignored (forward compatibility). See docs/PROTOCOL.md for the format.
 */
#ifndef MP_WIRE_H
#define MP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "core/matchmaker.h"
#include "core/rendezvous.h"
#include "moshpit.h"

#define MP_WIRE_VERSION 2u
#define MP_PEERS_MAX 64u   /* entries in one PEERS message */
#define MP_CTRL_MAX 16384u /* largest control message accepted */
#define MP_PROOF_BYTES 32u

typedef enum {
    MP_MSG_HELLO = 1,       /* session setup, both directions */
    MP_MSG_REFUSE = 2,      /* admission refused */
    MP_MSG_PEERS = 3,       /* membership: peers the sender knows */
    MP_MSG_JOIN = 4,        /* joiner -> matchmaker */
    MP_MSG_JOIN_ACK = 5,    /* matchmaker -> joiner: JOIN received */
    MP_MSG_GROUP = 6,       /* matchmaker -> each member: the group */
    MP_MSG_ALONE = 7,       /* matchmaker -> joiner: no group this time */
    MP_MSG_BYE = 8,         /* graceful leave */
    MP_MSG_LEAVE = 9,       /* joiner -> matchmaker: forget my JOIN "seq" */
    MP_MSG_STATE_REQ = 10,  /* state client -> server: INFO or chunks */
    MP_MSG_STATE_INFO = 11, /* server -> client: the state it holds */
    MP_MSG_DONE = 12,       /* group member -> the others: round "gid" over */
    MP_MSG_HAVE = 13        /* group member -> a mate: what I hold from you */
} mp_msg_type_t;

/* a data routing id an outbound-only peer names in HELLO "dr" */
#define MP_DRID_MAX 16u
#define MP_STATE_GET_MAX 64u            /* chunks asked for in one STATE_REQ */
#define MP_STATE_COUNT_MAX (1ull << 34) /* floats in a served state */

typedef struct mp_hello {
    uint8_t swarm[32]; /* BLAKE2b-256 of the swarm name */
    uint8_t eph[32];   /* sender's ephemeral X25519 key for this session */
    uint8_t seen[32];  /* the receiver's ephemeral key the sender keyed its
                          session with; all zero: none yet */
    uint8_t proof[MP_PROOF_BYTES]; /* admission proof (all zero if none) */
    uint8_t has_proof;
    uint8_t reply;      /* 1 = answer to a HELLO */
    uint64_t tag;       /* data tag the receiver puts on frames to us */
    uint32_t bandwidth; /* announced Mbit/s */
    uint32_t ciphers;   /* bit set of data ciphers supported */
    char ctrl_addr[MP_ADDR_MAX]; /* sender's control endpoint */
    char data_addr[MP_ADDR_MAX]; /* sender's data endpoint */
    uint8_t serves_state;        /* 1 = answers STATE_REQ (optional key) */
    uint8_t reorder_ok; /* 1 = opens data frames out of order (a receive
                           window): a sender may use several data
                           connections to it (optional key "rw") */
    uint8_t has_cert;   /* 1 = cert holds the sender's certificate */
    uint8_t cert[MOSHPIT_CERT_BYTES]; /* optional key "ct"; its content is
                                         checked by admission, not here */
    /* reachability (optional keys, docs/PROTOCOL.md "Peers behind NAT") */
    uint8_t outbound;           /* "ob": nobody can dial the sender: answer
                                   on its own connections */
    uint8_t drid_len;           /* "dr" (with ob): the routing id of the */
    uint8_t drid[MP_DRID_MAX];  /* sender's data connection, 1..16 bytes */
    uint8_t not_reached;        /* "nr": the sender could not dial the
                                   receiver's control address */
    char observed[MP_ADDR_MAX]; /* "oa": the receiver's host as the sender
                                   saw it; "" = not sent */
    uint32_t dialback_req;      /* "bq": dial me back at my observed host and
                                   report (this nonce); 0 = not sent */
    uint32_t dialback_ans;      /* "ba": the answer to the dial-back request of
                                   this nonce (reached unless "nr"); 0 = none */
    uint8_t has_host;           /* "hi" sent: the sender's host id */
    uint8_t host[32];           /* (mp__shm_host_id): parts may go through
                                   shared memory between equal ones */
    uint64_t eph_order;         /* "eo": when the sender made eph, in its
                                   order of keys (later keys larger); 0 =
                                   not sent */
} mp_hello_t;

typedef struct mp_refuse {
    uint32_t reason; /* a moshpit_err_t */
} mp_refuse_t;

typedef struct mp_peer_entry {
    uint8_t id[32];
    char addr[MP_ADDR_MAX]; /* control endpoint */
} mp_peer_entry_t;

typedef struct mp_peers {
    uint32_t n;
    mp_peer_entry_t peers[MP_PEERS_MAX];
} mp_peers_t;

typedef struct mp_join {
    uint64_t seq;
    double weight; /* finite, >= 0 */
    uint32_t bandwidth;
    uint32_t window_ms;
    uint32_t phase;   /* "ph", optional: calls the joiner ended before; 0 is
                         not sent */
    uint8_t noshare;  /* "ns", optional: the joiner is outbound-only and
                         reduces no share */
    uint8_t parts;    /* "pp", optional: the joiner cuts parts by the
                         group's size (mp_member_t.parts) */
    uint32_t key_len; /* <= MP_KEY_MAX */
    uint8_t key[MP_KEY_MAX];
    uint32_t line_len; /* "lk", optional (0: not sent): the joiner's grid
                          line key when "key" is a merge key */
    uint8_t line[MP_KEY_MAX];
} mp_join_t;

typedef struct mp_seq_msg { /* JOIN_ACK, ALONE */
    uint64_t seq;
} mp_seq_msg_t;

typedef struct mp_group_msg {
    uint64_t seq;      /* the receiving joiner's JOIN seq */
    uint64_t group_id; /* nonzero */
    uint32_t n;        /* 2..MP_GROUP_MAX */
    uint32_t phase;    /* "ph", optional: the members' largest JOIN phase; 0 is
                          not sent */
    mp_member_t members[MP_GROUP_MAX]; /* seq, phase of each member are not
                                          sent */
} mp_group_msg_t;

typedef struct mp_done { /* DONE */
    uint64_t group_id;   /* nonzero */
    uint32_t up_kbps;    /* "up", optional: the rate the receiver's scatter
                            parts reached the sender (kbit/s); 0 is not
                            sent */
} mp_done_t;

/* Bytes of each HAVE bitmap: 32768 parts of a share (8 GiB of float32 in
 * parts of 2^16). */
#define MP_HAVE_BYTES_MAX 4096u

typedef struct mp_have { /* HAVE */
    uint64_t group_id;   /* nonzero */
    uint64_t rx;         /* last data frame counter accepted from the
                            receiver in this session */
    uint8_t mark;        /* 1: answers a MARK frame (optional key) */
    uint32_t sc_len;     /* bytes of sc, <= MP_HAVE_BYTES_MAX */
    uint32_t ga_len;     /* bytes of ga, <= MP_HAVE_BYTES_MAX */
    /* bit p (LSB first): the sender holds the receiver's scatter part p of
     * the sender's share (or that part is final) */
    uint8_t sc[MP_HAVE_BYTES_MAX];
    /* bit p: the sender holds gather part p of the receiver's share (or
     * gave it up) */
    uint8_t ga[MP_HAVE_BYTES_MAX];
} mp_have_t;

typedef struct mp_state_req {
    uint64_t seq;     /* the client's fetch id */
    uint64_t version; /* 0: "what do you hold?"; else the state wanted */
    uint32_t first;   /* first chunk */
    uint32_t n;       /* chunks, 1..MP_STATE_GET_MAX (0 when version 0) */
} mp_state_req_t;

typedef struct mp_state_info {
    uint64_t seq;     /* the request's fetch id */
    uint64_t version; /* 0 = nothing to serve (or busy) */
    uint64_t round;   /* the server's count of averaged rounds */
    uint64_t count;   /* floats, <= MP_STATE_COUNT_MAX */
    uint8_t digest[32];
} mp_state_info_t;

/* BYE's optional key "why": 0 (absent) = the sender leaves the swarm;
 * MP_BYE_IDLE = only this session ends, the sender stays a member
 * (docs/PROTOCOL.md, "BYE") */
#define MP_BYE_IDLE 1u
typedef struct mp_bye {
    uint32_t reason;
} mp_bye_t;

typedef struct mp_msg {
    mp_msg_type_t type;
    union {
        mp_hello_t hello;
        mp_refuse_t refuse;
        mp_peers_t peers;
        mp_join_t join;
        mp_seq_msg_t ack; /* JOIN_ACK */
        mp_group_msg_t group;
        mp_seq_msg_t alone; /* ALONE */
        mp_seq_msg_t leave; /* LEAVE */
        mp_state_req_t state_req;
        mp_state_info_t state_info;
        mp_done_t done;
        mp_have_t have;
        mp_bye_t bye;
    } u;
} mp_msg_t;

/* Encodes msg into buf (cap bytes); *len receives the size. Errors: EINVAL
 * (invalid msg fields, e.g. n out of range), ENOMEM (cap too small). */
moshpit_err_t mp__wire_msg_encode(const mp_msg_t *msg, uint8_t *buf, size_t cap,
                                  size_t *len);

/* Decodes exactly one message occupying all of buf[0..len). Errors: EPROTO
 * for anything malformed (see above), ENOMEM. msg is fully overwritten. */
moshpit_err_t mp__wire_msg_decode(const uint8_t *buf, size_t len,
                                  mp_msg_t *msg);

/* Structural pre-scan shared by the msgpack decoders: 0 if buf[0..len) is
 * exactly one well-formed msgpack object, every count and length backed by
 * the bytes that remain, nested at most 16 deep; -1 otherwise. Pure, O(len),
 * allocates nothing. Run it before msgpack-c unpacks anything. */
int mp__wire_scan(const uint8_t *buf, size_t len);

/* The msgpack-c write target shared by the encoders: a fixed buffer that
 * records overflow once instead of failing every pack call. */
typedef struct mp_wire_buf {
    uint8_t *buf;
    size_t cap;
    size_t len;
    int overflow;
} mp_wire_buf_t;

/* msgpack_packer write callback over an mp_wire_buf_t. */
int mp__wire_buf_write(void *data, const char *p, size_t n);

/* ---- data frames ----
 * A data frame is one ZeroMQ frame: a fixed 48-byte header (authenticated
 * as AEAD associated data), then count*4 bytes of ciphertext, then a 16-byte
 * tag. Layout, little-endian:
 *   0  u8  version (1)      1  u8  kind (1 scatter, 2 gather, 3 state)
 *   2  u8 codec (MOSHPIT_COMPRESS_*; 0 for state chunks)
 *   3  u8 layout (0..2)     4  u32 count (values)
 *   8  u64 tag (receiver's session tag)
 *   16 u64 counter (nonce; strictly increasing per session direction)
 *   24 u64 round id         32 u32 share   36 u32 part
 *   40 f64 wsum (gather; 0 for scatter)
 */
#define MP_DATA_HDR_BYTES 48u
#define MP_DATA_TAG_BYTES 16u
#define MP_DATA_MAX_COUNT (1u << 20) /* floats per frame */
#define MP_DATA_LAYOUT_MAX 2u        /* parts of 16384 elements */
/* layout bit: the values are in shared memory (a slot of a region, or
 * the sender's own memory read directly), and the frame carries a
 * reference to them (MP_DATA_SHM_REF_BYTES) instead */
#define MP_DATA_LAYOUT_SHM 0x80u
#define MP_DATA_SHM_REF_BYTES 16u

typedef struct mp_data_hdr {
    uint8_t kind;
    uint8_t codec;  /* MOSHPIT_COMPRESS_*: how the count values are encoded */
    uint8_t layout; /* scatter and gather parts: the round's part size,
                       log2(65536 / elements), 0..MP_DATA_LAYOUT_MAX
                       (mp__share_part_layout); state chunks and marks 0 */
    bool shm;       /* scatter and gather parts: the values are in shared
                       memory (layout bit MP_DATA_LAYOUT_SHM) */
    uint32_t count;
    uint64_t tag;
    uint64_t counter;
    uint64_t round_id;
    uint32_t share;
    uint32_t part;
    double wsum;
} mp_data_hdr_t;

void mp__wire_data_hdr_encode(const mp_data_hdr_t *h,
                              uint8_t out[MP_DATA_HDR_BYTES]);
/* Checks version, kind, codec (known, 0 for a state chunk), layout (at
 * most MP_DATA_LAYOUT_MAX, 0 for a state chunk or mark),
 * count <= MP_DATA_MAX_COUNT, that len == header + mp__codec_bytes(codec,
 * count) + tag (header + MP_DATA_SHM_REF_BYTES + tag for a part in shared
 * memory: layout bit MP_DATA_LAYOUT_SHM, scatter and gather only), and
 * that wsum is finite and >= 0.
 * Errors: EPROTO. */
moshpit_err_t mp__wire_data_hdr_decode(const uint8_t *buf, size_t len,
                                       mp_data_hdr_t *h);

#endif
