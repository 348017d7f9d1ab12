/* SPDX-License-Identifier: MIT */
/*
 * test_wire.c - tests of the control-message codec and the data-frame
 * header: round trips of every message type with minimal and maximal field
 * values, golden byte vectors from tests/vectors (so the format cannot drift
 * silently), and rejection of malformed input of every kind we could name:
 * truncation at every offset, wrong types per field, missing and repeated
 * keys, bad versions and types, absurd counts and lengths, bad weights,
 * duplicate group members and trailing bytes. Deterministic; prints every
 * failed check and returns nonzero if any failed.
 */
#include "core/codec.h"
#include "wire/wire.h"

#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "wire_util.h"

#ifndef MP_VECTORS_DIR
#define MP_VECTORS_DIR "tests/vectors"
#endif

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static void to_hex(const uint8_t *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static void fill(uint8_t *p, size_t n, uint8_t start) {
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(start + i);
}

static void set_str(char *dst, size_t len, char c) {
    memset(dst, c, len);
    dst[len] = '\0';
}

/* ------------------------------------------------------------------ */
/* fixed messages (also the golden vectors)                            */

static void msg_hello(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_HELLO;
    fill(m->u.hello.swarm, 32, 0x00);
    fill(m->u.hello.eph, 32, 0x20);
    fill(m->u.hello.seen, 32, 0x30);
    fill(m->u.hello.proof, 32, 0x40);
    m->u.hello.has_proof = 1;
    m->u.hello.reply = 1;
    m->u.hello.tag = 0x0102030405060708u;
    m->u.hello.bandwidth = 1000;
    m->u.hello.ciphers = 3;
    strcpy(m->u.hello.ctrl_addr, "tcp://10.0.0.1:7400");
    strcpy(m->u.hello.data_addr, "tcp://10.0.0.1:7401");
}

/* HELLO with every optional key: serves state, and a certificate (the
 * codec only carries its 160 bytes; admission checks the content). */
/* a HELLO with a dial-back request and an answer (docs/PROTOCOL.md,
 * "Peers behind NAT", Asking again) */
static void msg_hello_dialback(mp_msg_t *m) {
    msg_hello(m);
    m->u.hello.dialback_req = 7;
    m->u.hello.dialback_ans = 9;
    /* and a host id (docs/PROTOCOL.md, "Parts through shared memory") */
    m->u.hello.has_host = 1;
    fill(m->u.hello.host, sizeof m->u.hello.host, 0x31);
    /* and the order of its key ("Session setup", step 3) */
    m->u.hello.eph_order = 0x0123456789abcdefu;
}

static void msg_hello_cert(mp_msg_t *m) {
    msg_hello(m);
    m->u.hello.serves_state = 1;
    m->u.hello.has_cert = 1;
    fill(m->u.hello.cert, sizeof m->u.hello.cert, 0x80);
}

static void msg_refuse(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_REFUSE;
    m->u.refuse.reason = MOSHPIT_EPEERAUTH;
}

static void msg_peers(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_PEERS;
    m->u.peers.n = 2;
    fill(m->u.peers.peers[0].id, 32, 0x60);
    strcpy(m->u.peers.peers[0].addr, "tcp://10.0.0.2:7400");
    fill(m->u.peers.peers[1].id, 32, 0x80);
    strcpy(m->u.peers.peers[1].addr, "tcp://[fe80::1]:7400");
}

static void msg_join(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_JOIN;
    m->u.join.seq = 42;
    m->u.join.weight = 1.5;
    m->u.join.bandwidth = 100;
    m->u.join.window_ms = 2000;
    m->u.join.key_len = 2;
    m->u.join.key[0] = 3;
    m->u.join.key[1] = 7;
}

/* a JOIN with its optional phase ("ph") */
static void msg_join_phase(mp_msg_t *m) {
    msg_join(m);
    m->u.join.phase = 3;
}

/* a JOIN of an outbound-only joiner that cuts parts by the group ("ns",
 * "pp") */
static void msg_join_parts(mp_msg_t *m) {
    msg_join(m);
    m->u.join.noshare = 1;
    m->u.join.parts = 1;
}

static void msg_join_ack(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_JOIN_ACK;
    m->u.ack.seq = 42;
}

static void msg_group(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_GROUP;
    m->u.group.seq = 42;
    m->u.group.group_id = 0xdeadbeefcafef00du;
    m->u.group.n = 3;
    for (uint32_t i = 0; i < 3; i++) {
        fill(m->u.group.members[i].id, 32, (uint8_t)(0xa0 + 0x10 * i));
        m->u.group.members[i].weight = 0.5 * (i + 1);
        m->u.group.members[i].bandwidth = 10 * (i + 1);
    }
}

/* a GROUP with its optional phase ("ph") */
static void msg_group_phase(mp_msg_t *m) {
    msg_group(m);
    m->u.group.phase = 5;
}

/* a GROUP with members that reduce no share and that cut parts by the
 * group ("ns", "pp") */
static void msg_group_parts(mp_msg_t *m) {
    msg_group(m);
    m->u.group.members[1].noshare = 1;
    m->u.group.members[0].parts = 1;
    m->u.group.members[2].parts = 1;
}

static void msg_alone(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_ALONE;
    m->u.alone.seq = 43;
}

static void msg_bye(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_BYE;
}

/* BYE that ends one idle session, not the membership */
static void msg_bye_idle(mp_msg_t *m) {
    msg_bye(m);
    m->u.bye.reason = MP_BYE_IDLE;
}

static void msg_done(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_DONE;
    m->u.done.group_id = 0xdeadbeefcafef00du;
}

/* a DONE with its optional upload report ("up") */
static void msg_done_up(mp_msg_t *m) {
    msg_done(m);
    m->u.done.up_kbps = 4321;
}

static void msg_have(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_HAVE;
    m->u.have.group_id = 0x0102030405060708u;
    m->u.have.rx = 77;
    m->u.have.mark = 1;
    m->u.have.sc_len = 2;
    m->u.have.sc[0] = 0xff;
    m->u.have.sc[1] = 0x03;
    m->u.have.ga_len = 1;
    m->u.have.ga[0] = 0x5f;
}

static void msg_state_req(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_STATE_REQ;
    m->u.state_req.seq = 42;
    m->u.state_req.version = 0x0102030405060708u;
    m->u.state_req.first = 3;
    m->u.state_req.n = 16;
}

static void msg_state_info(mp_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_STATE_INFO;
    m->u.state_info.seq = 42;
    m->u.state_info.version = 0x0102030405060708u;
    m->u.state_info.round = 7;
    m->u.state_info.count = 1000003;
    fill(m->u.state_info.digest, 32, 0xc0);
}

static void hdr_fixed(mp_data_hdr_t *h) {
    memset(h, 0, sizeof *h);
    h->kind = MP_PART_GATHER;
    h->count = 1000;
    h->tag = 0x1112131415161718u;
    h->counter = 7;
    h->round_id = 0xdeadbeefcafef00du;
    h->share = 2;
    h->part = 5;
    h->wsum = 2.5;
}

typedef void (*msg_fn)(mp_msg_t *);

static const struct {
    const char *name;
    msg_fn make;
} fixed[] = {
    {"hello", msg_hello},
    {"hello_cert", msg_hello_cert},
    {"refuse", msg_refuse},
    {"peers", msg_peers},
    {"join", msg_join},
    {"join_phase", msg_join_phase},
    {"join_parts", msg_join_parts},
    {"join_ack", msg_join_ack},
    {"group", msg_group},
    {"group_phase", msg_group_phase},
    {"group_parts", msg_group_parts},
    {"alone", msg_alone},
    {"bye", msg_bye},
    {"bye_idle", msg_bye_idle},
    {"state_req", msg_state_req},
    {"state_info", msg_state_info},
    {"done", msg_done},
    {"done_up", msg_done_up},
    {"have", msg_have},
};
#define NFIXED (sizeof fixed / sizeof fixed[0])

/* ------------------------------------------------------------------ */
/* round trips                                                         */

static uint8_t enc_buf[MP_CTRL_MAX];

/* Encodes, checks every shorter cap fails with ENOMEM and every truncation
 * of the output fails to decode, decodes, and compares. */
static void roundtrip(const char *what, const mp_msg_t *m) {
    size_t len = 0;
    moshpit_err_t e = mp__wire_msg_encode(m, enc_buf, sizeof enc_buf, &len);
    CHECK(e == MOSHPIT_OK, "%s: encode -> %d", what, (int)e);
    if (e != MOSHPIT_OK)
        return;
    CHECK(len > 0 && len <= MP_CTRL_MAX, "%s: len %zu", what, len);

    mp_msg_t *d = malloc(sizeof *d);
    if (d == NULL)
        abort();
    e = mp__wire_msg_decode(enc_buf, len, d);
    CHECK(e == MOSHPIT_OK, "%s: decode -> %d", what, (int)e);
    CHECK(e != MOSHPIT_OK || msg_equal(m, d), "%s: round trip differs", what);

    int trunc_ok = 1, cap_ok = 1;
    for (size_t k = 0; k < len; k++) {
        if (mp__wire_msg_decode(enc_buf, k, d) != MOSHPIT_EPROTO)
            trunc_ok = 0;
    }
    CHECK(trunc_ok, "%s: a truncation decoded or gave a wrong error", what);

    static uint8_t small[MP_CTRL_MAX];
    for (size_t cap = 0; cap < len; cap++) {
        size_t l2 = 99;
        if (mp__wire_msg_encode(m, small, cap, &l2) != MOSHPIT_ENOMEM ||
            l2 != 0)
            cap_ok = 0;
    }
    CHECK(cap_ok, "%s: a too small cap did not give ENOMEM", what);
    free(d);
}

static void test_roundtrips(void) {
    mp_msg_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        abort();

    for (size_t i = 0; i < NFIXED; i++) {
        fixed[i].make(m);
        roundtrip(fixed[i].name, m);
    }

    /* HELLO: minimal (no proof, empty strings, zeros) and maximal. */
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_HELLO;
    roundtrip("hello min", m);
    msg_hello(m);
    memset(m->u.hello.swarm, 0xff, 32);
    memset(m->u.hello.eph, 0xff, 32);
    memset(m->u.hello.seen, 0xff, 32);
    memset(m->u.hello.proof, 0xff, 32);
    m->u.hello.reply = 0;
    m->u.hello.tag = UINT64_MAX;
    m->u.hello.bandwidth = UINT32_MAX;
    m->u.hello.ciphers = UINT32_MAX;
    set_str(m->u.hello.ctrl_addr, MP_ADDR_MAX - 1, 'c');
    set_str(m->u.hello.data_addr, MP_ADDR_MAX - 1, 'd');
    m->u.hello.serves_state = 1;
    m->u.hello.has_cert = 1;
    memset(m->u.hello.cert, 0xff, sizeof m->u.hello.cert);
    m->u.hello.reorder_ok = 1;
    roundtrip("hello max", m);
    /* the reachability keys (docs/PROTOCOL.md, "Peers behind NAT") */
    size_t nlen0 = 0;
    uint8_t nbuf0[256];
    msg_hello(m);
    m->u.hello.outbound = 1;
    m->u.hello.drid_len = MP_DRID_MAX;
    memset(m->u.hello.drid, 0xfe, MP_DRID_MAX);
    m->u.hello.not_reached = 1;
    set_str(m->u.hello.observed, MP_ADDR_MAX - 1, 'o');
    roundtrip("hello nat", m);
    m->u.hello.dialback_req = UINT32_MAX; /* a dial-back request */
    roundtrip("hello dial-back request", m);
    m->u.hello.dialback_req = 0;
    m->u.hello.dialback_ans = 1; /* its answer, reached unless nr */
    roundtrip("hello dial-back answer", m);
    m->u.hello.dialback_ans = 0;
    m->u.hello.has_host = 1; /* a host id */
    memset(m->u.hello.host, 0xff, sizeof m->u.hello.host);
    roundtrip("hello host id", m);
    m->u.hello.eph_order = UINT64_MAX; /* the order of the sender's key */
    roundtrip("hello key order", m);
    m->u.hello.eph_order = 0;
    m->u.hello.has_host = 0; /* host bytes without the key: not encoded */
    CHECK(mp__wire_msg_encode(m, nbuf0, sizeof nbuf0, &nlen0) == MOSHPIT_EINVAL,
          "host bytes without has_host encoded");
    memset(m->u.hello.host, 0, sizeof m->u.hello.host);
    m->u.hello.drid_len = 1;
    m->u.hello.not_reached = 0;
    roundtrip("hello nat short drid", m);
    m->u.hello.drid_len = 0; /* ob without dr: not encoded */
    size_t nlen = 0;
    uint8_t nbuf[256];
    CHECK(mp__wire_msg_encode(m, nbuf, sizeof nbuf, &nlen) == MOSHPIT_EINVAL,
          "ob without dr encoded");

    memset(m, 0, sizeof *m);
    m->type = MP_MSG_REFUSE;
    roundtrip("refuse min", m);
    m->u.refuse.reason = UINT32_MAX;
    roundtrip("refuse max", m);

    memset(m, 0, sizeof *m);
    m->type = MP_MSG_PEERS;
    roundtrip("peers empty", m);
    m->u.peers.n = MP_PEERS_MAX;
    for (uint32_t i = 0; i < MP_PEERS_MAX; i++) {
        memset(m->u.peers.peers[i].id, 0xff, 32);
        m->u.peers.peers[i].id[0] = (uint8_t)i;
        set_str(m->u.peers.peers[i].addr, MP_ADDR_MAX - 1,
                (char)('A' + i % 26));
    }
    roundtrip("peers max", m);

    memset(m, 0, sizeof *m);
    m->type = MP_MSG_JOIN;
    roundtrip("join min", m);
    m->u.join.seq = UINT64_MAX;
    m->u.join.weight = MOSHPIT_WEIGHT_MAX;
    m->u.join.bandwidth = UINT32_MAX;
    m->u.join.window_ms = UINT32_MAX;
    m->u.join.key_len = MP_KEY_MAX;
    m->u.join.phase = UINT32_MAX;
    memset(m->u.join.key, 0xff, MP_KEY_MAX);
    roundtrip("join max", m);
    m->u.join.noshare = 1;
    roundtrip("join noshare", m);
    m->u.join.parts = 1;
    roundtrip("join noshare parts", m);
    m->u.join.noshare = 0;
    roundtrip("join parts", m);
    m->u.join.parts = 0;
    m->u.join.weight = 4.9e-324; /* smallest subnormal */
    roundtrip("join subnormal weight", m);

    memset(m, 0, sizeof *m);
    m->type = MP_MSG_JOIN_ACK;
    roundtrip("join_ack min", m);
    m->u.ack.seq = UINT64_MAX;
    roundtrip("join_ack max", m);
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_ALONE;
    roundtrip("alone min", m);
    m->u.alone.seq = UINT64_MAX;
    roundtrip("alone max", m);
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_LEAVE;
    roundtrip("leave min", m);
    m->u.leave.seq = UINT64_MAX;
    roundtrip("leave max", m);
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_DONE;
    m->u.done.group_id = 1;
    roundtrip("done min", m);
    m->u.done.group_id = UINT64_MAX;
    roundtrip("done max", m);
    m->u.done.up_kbps = UINT32_MAX;
    roundtrip("done up max", m);
    memset(m, 0, sizeof *m);
    m->type = MP_MSG_HAVE;
    m->u.have.group_id = 1;
    roundtrip("have empty", m);
    m->u.have.group_id = UINT64_MAX;
    m->u.have.rx = UINT64_MAX;
    m->u.have.mark = 1;
    m->u.have.sc_len = 300;
    m->u.have.ga_len = 7;
    memset(m->u.have.sc, 0xa5, 300);
    memset(m->u.have.ga, 0x01, 7);
    roundtrip("have 300 + 7 bytes", m);

    memset(m, 0, sizeof *m);
    m->type = MP_MSG_GROUP;
    m->u.group.group_id = 1;
    m->u.group.n = 2;
    m->u.group.members[1].id[31] = 1;
    roundtrip("group min", m);
    m->u.group.seq = UINT64_MAX;
    m->u.group.group_id = UINT64_MAX;
    m->u.group.n = MP_GROUP_MAX;
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++) {
        memset(m->u.group.members[i].id, 0xff, 32);
        m->u.group.members[i].id[31] = (uint8_t)i;
        m->u.group.members[i].weight = MOSHPIT_WEIGHT_MAX;
        m->u.group.members[i].bandwidth = UINT32_MAX;
    }
    m->u.group.phase = UINT32_MAX;
    roundtrip("group max", m);
    m->u.group.members[0].noshare = 1;
    m->u.group.members[MP_GROUP_MAX - 1].noshare = 1;
    roundtrip("group noshare", m);
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++)
        m->u.group.members[i].parts = 1;
    roundtrip("group noshare parts", m);
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++)
        m->u.group.members[i].noshare = 0;
    m->u.group.members[1].parts = 0;
    roundtrip("group parts, one without", m);
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++)
        m->u.group.members[i].parts = 0;

    /* Decoding never reports a member seq, even if the struct had one. */
    msg_group(m);
    m->u.group.members[0].seq = 99;
    size_t len;
    mp_msg_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        abort();
    CHECK(mp__wire_msg_encode(m, enc_buf, sizeof enc_buf, &len) == MOSHPIT_OK,
          "group with seq");
    CHECK(mp__wire_msg_decode(enc_buf, len, d) == MOSHPIT_OK &&
              d->u.group.members[0].seq == 0,
          "member seq must decode as 0");
    free(d);
    free(m);
}

/* ------------------------------------------------------------------ */
/* golden vectors                                                      */

static void test_vectors(void) {
    static uint8_t want[MP_CTRL_MAX];
    static char hex[2 * MP_CTRL_MAX + 1];
    char path[512];
    mp_msg_t m, d;

    for (size_t i = 0; i < NFIXED; i++) {
        snprintf(path, sizeof path, "%s/wire_%s.hex", MP_VECTORS_DIR,
                 fixed[i].name);
        long n = test_read_hex(path, want, sizeof want);
        CHECK(n > 0, "cannot read %s", path);
        fixed[i].make(&m);
        size_t len = 0;
        CHECK(mp__wire_msg_encode(&m, enc_buf, sizeof enc_buf, &len) ==
                  MOSHPIT_OK,
              "%s: encode", fixed[i].name);
        to_hex(enc_buf, len, hex);
        CHECK(n > 0 && (size_t)n == len && memcmp(want, enc_buf, len) == 0,
              "%s: encoding differs from %s, got %s", fixed[i].name, path, hex);
        if (n <= 0)
            continue;
        CHECK(mp__wire_msg_decode(want, (size_t)n, &d) == MOSHPIT_OK &&
                  msg_equal(&m, &d),
              "%s: decoding %s does not give the message", fixed[i].name, path);
    }

    mp_data_hdr_t h, hd;
    uint8_t out[MP_DATA_HDR_BYTES];
    snprintf(path, sizeof path, "%s/wire_data_hdr.hex", MP_VECTORS_DIR);
    long n = test_read_hex(path, want, sizeof want);
    hdr_fixed(&h);
    mp__wire_data_hdr_encode(&h, out);
    to_hex(out, sizeof out, hex);
    CHECK(n == MP_DATA_HDR_BYTES && memcmp(want, out, sizeof out) == 0,
          "data header differs from %s, got %s", path, hex);
    /* The vector holds the header only; a frame appends count*4 + 16. */
    size_t flen = MP_DATA_HDR_BYTES + h.count * 4u + MP_DATA_TAG_BYTES;
    uint8_t *frame = calloc(1, flen);
    if (frame == NULL)
        abort();
    memcpy(frame, want, MP_DATA_HDR_BYTES);
    CHECK(mp__wire_data_hdr_decode(frame, flen, &hd) == MOSHPIT_OK &&
              hd.kind == h.kind && hd.count == h.count && hd.tag == h.tag &&
              hd.counter == h.counter && hd.round_id == h.round_id &&
              hd.share == h.share && hd.part == h.part &&
              same_double(hd.wsum, h.wsum),
          "decoding %s does not give the header", path);
    free(frame);
}

/* ------------------------------------------------------------------ */
/* hand-built messages                                                 */

/* A byte builder that msgpack_packer can write into. */
typedef struct bb {
    uint8_t b[2 * MP_CTRL_MAX];
    size_t n;
} bb_t;

static int bb_write(void *data, const char *p, size_t n) {
    bb_t *bb = data;
    if (n > sizeof bb->b - bb->n)
        abort(); /* test bug */
    if (n > 0)
        memcpy(bb->b + bb->n, p, n);
    bb->n += n;
    return 0;
}

static void bb_raw(bb_t *bb, const void *p, size_t n) {
    bb_write(bb, p, n);
}

static void bb_byte(bb_t *bb, uint8_t c) {
    bb_write(bb, (const char *)&c, 1);
}

/* Kinds of msgpack values a field may carry, as a bit set. */
enum {
    A_NIL = 1 << 0,
    A_BOOL = 1 << 1,
    A_UINT = 1 << 2,
    A_NINT = 1 << 3,
    A_F32 = 1 << 4,
    A_F64 = 1 << 5,
    A_STR = 1 << 6,
    A_BIN32 = 1 << 7,
    A_BIN1 = 1 << 8,
    A_ARR = 1 << 9,
    A_MAP = 1 << 10,
    A_EXT = 1 << 11,
    A_ALL = (1 << 12) - 1
};

/* One sample value of each kind, pre-encoded. */
static const struct {
    unsigned kind;
    uint8_t bytes[40];
    size_t n;
} samples[] = {
    {A_NIL, {0xc0}, 1},
    {A_BOOL, {0xc3}, 1},
    {A_UINT, {0x01}, 1},
    {A_NINT, {0xff}, 1},
    {A_F32, {0xca, 0x3f, 0xc0, 0x00, 0x00}, 5},
    {A_F64, {0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, 9},
    {A_STR, {0xa1, 'x'}, 2},
    {A_BIN32, {0xc4, 32}, 34},
    {A_BIN1, {0xc4, 1, 0}, 3},
    {A_ARR, {0x90}, 1},
    {A_MAP, {0x80}, 1},
    {A_EXT, {0xd4, 0x01, 0x00}, 3},
};
#define NSAMPLES (sizeof samples / sizeof samples[0])

typedef struct field {
    const char *key;
    uint8_t val[256];
    size_t n;
    unsigned accept; /* kinds that may be valid here */
    int optional;
} field_t;

typedef struct spec {
    mp_msg_t expect;
    field_t f[16];
    size_t nf;
} spec_t;

static bb_t fbb;
static msgpack_packer fpk;

/* Starts a field; its value is then packed with fpk, ended by add_end. */
static void add_begin(void) {
    fbb.n = 0;
    msgpack_packer_init(&fpk, &fbb, bb_write);
}

static void add_end(spec_t *s, const char *key, unsigned accept, int optional) {
    if (s->nf >= sizeof s->f / sizeof s->f[0])
        abort(); /* test bug */
    field_t *f = &s->f[s->nf++];
    f->key = key;
    if (fbb.n > sizeof f->val)
        abort();
    memcpy(f->val, fbb.b, fbb.n);
    f->n = fbb.n;
    f->accept = accept;
    f->optional = optional;
}

static void add_uint(spec_t *s, const char *key, uint64_t v) {
    add_begin();
    msgpack_pack_uint64(&fpk, v);
    add_end(s, key, A_UINT, 0);
}

static void add_bin(spec_t *s, const char *key, const uint8_t *p, size_t n,
                    unsigned accept, int optional) {
    add_begin();
    msgpack_pack_bin(&fpk, n);
    msgpack_pack_bin_body(&fpk, p, n);
    add_end(s, key, accept, optional);
}

static void add_str(spec_t *s, const char *key, const char *str) {
    add_begin();
    msgpack_pack_str(&fpk, strlen(str));
    msgpack_pack_str_body(&fpk, str, strlen(str));
    add_end(s, key, A_STR, 0);
}

/* Builds the spec of a valid message of each type from the fixed message,
 * independently of the encoder. */
static void spec_for(msg_fn make, spec_t *s) {
    memset(s, 0, sizeof *s);
    make(&s->expect);
    const mp_msg_t *m = &s->expect;
    add_uint(s, "v", MP_WIRE_VERSION);
    add_uint(s, "t", (uint64_t)m->type);
    switch (m->type) {
    case MP_MSG_HELLO:
        add_bin(s, "sw", m->u.hello.swarm, 32, A_BIN32, 0);
        add_bin(s, "eph", m->u.hello.eph, 32, A_BIN32, 0);
        add_bin(s, "se", m->u.hello.seen, 32, A_BIN32, 0);
        add_bin(s, "pf", m->u.hello.proof, 32, A_BIN32, 1);
        add_begin();
        msgpack_pack_true(&fpk);
        add_end(s, "re", A_BOOL, 0);
        add_uint(s, "tag", m->u.hello.tag);
        add_uint(s, "bw", m->u.hello.bandwidth);
        add_uint(s, "ci", m->u.hello.ciphers);
        add_str(s, "ca", m->u.hello.ctrl_addr);
        add_str(s, "da", m->u.hello.data_addr);
        if (m->u.hello.serves_state) {
            add_begin();
            msgpack_pack_true(&fpk);
            add_end(s, "ss", A_BOOL, 1);
        }
        if (m->u.hello.has_cert) /* no sample is 160 bytes long */
            add_bin(s, "ct", m->u.hello.cert, sizeof m->u.hello.cert, 0, 1);
        if (m->u.hello.reorder_ok) {
            add_begin();
            msgpack_pack_true(&fpk);
            add_end(s, "rw", A_BOOL, 1);
        }
        if (m->u.hello.dialback_req != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.hello.dialback_req);
            add_end(s, "bq", A_UINT, 1);
        }
        if (m->u.hello.dialback_ans != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.hello.dialback_ans);
            add_end(s, "ba", A_UINT, 1);
        }
        if (m->u.hello.has_host)
            add_bin(s, "hi", m->u.hello.host, 32, A_BIN32, 1);
        if (m->u.hello.eph_order != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.hello.eph_order);
            add_end(s, "eo", A_UINT, 1);
        }
        break;
    case MP_MSG_REFUSE:
        add_uint(s, "why", m->u.refuse.reason);
        break;
    case MP_MSG_PEERS:
        add_begin();
        msgpack_pack_array(&fpk, m->u.peers.n);
        for (uint32_t i = 0; i < m->u.peers.n; i++) {
            const mp_peer_entry_t *e = &m->u.peers.peers[i];
            msgpack_pack_array(&fpk, 2);
            msgpack_pack_bin(&fpk, 32);
            msgpack_pack_bin_body(&fpk, e->id, 32);
            msgpack_pack_str(&fpk, strlen(e->addr));
            msgpack_pack_str_body(&fpk, e->addr, strlen(e->addr));
        }
        add_end(s, "p", A_ARR, 0);
        break;
    case MP_MSG_JOIN:
        add_uint(s, "seq", m->u.join.seq);
        add_begin();
        msgpack_pack_double(&fpk, m->u.join.weight);
        add_end(s, "w", A_UINT | A_F32 | A_F64, 0);
        add_uint(s, "bw", m->u.join.bandwidth);
        add_uint(s, "win", m->u.join.window_ms);
        /* a key is any bin of 0 to MP_KEY_MAX (32) bytes */
        add_bin(s, "key", m->u.join.key, m->u.join.key_len, A_BIN1 | A_BIN32,
                0);
        if (m->u.join.phase != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.join.phase);
            add_end(s, "ph", A_UINT, 1);
        }
        if (m->u.join.noshare) {
            add_begin();
            msgpack_pack_true(&fpk);
            add_end(s, "ns", A_BOOL, 1);
        }
        if (m->u.join.parts) {
            add_begin();
            msgpack_pack_true(&fpk);
            add_end(s, "pp", A_BOOL, 1);
        }
        break;
    case MP_MSG_JOIN_ACK:
        add_uint(s, "seq", m->u.ack.seq);
        break;
    case MP_MSG_ALONE:
        add_uint(s, "seq", m->u.alone.seq);
        break;
    case MP_MSG_LEAVE:
        add_uint(s, "seq", m->u.leave.seq);
        break;
    case MP_MSG_DONE:
        add_uint(s, "gid", m->u.done.group_id);
        if (m->u.done.up_kbps != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.done.up_kbps);
            add_end(s, "up", A_UINT, 1);
        }
        break;
    case MP_MSG_HAVE:
        add_uint(s, "gid", m->u.have.group_id);
        add_uint(s, "rx", m->u.have.rx);
        if (m->u.have.mark) {
            add_begin();
            msgpack_pack_true(&fpk);
            add_end(s, "mk", A_BOOL, 1);
        }
        /* bitmaps are any bin of 0 to MP_HAVE_BYTES_MAX bytes */
        add_bin(s, "sc", m->u.have.sc, m->u.have.sc_len, A_BIN1 | A_BIN32, 0);
        add_bin(s, "ga", m->u.have.ga, m->u.have.ga_len, A_BIN1 | A_BIN32, 0);
        break;
    case MP_MSG_GROUP:
        add_uint(s, "seq", m->u.group.seq);
        add_uint(s, "gid", m->u.group.group_id);
        add_begin();
        msgpack_pack_array(&fpk, m->u.group.n);
        for (uint32_t i = 0; i < m->u.group.n; i++) {
            msgpack_pack_array(&fpk, 3);
            msgpack_pack_bin(&fpk, 32);
            msgpack_pack_bin_body(&fpk, m->u.group.members[i].id, 32);
            msgpack_pack_double(&fpk, m->u.group.members[i].weight);
            msgpack_pack_uint32(&fpk, m->u.group.members[i].bandwidth);
        }
        add_end(s, "m", A_ARR, 0);
        if (m->u.group.phase != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.group.phase);
            add_end(s, "ph", A_UINT, 1);
        }
        uint64_t ns = 0, pp = 0;
        for (uint32_t i = 0; i < m->u.group.n; i++) {
            ns |= (uint64_t)m->u.group.members[i].noshare << i;
            pp |= (uint64_t)m->u.group.members[i].parts << i;
        }
        if (ns != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, ns);
            add_end(s, "ns", A_UINT, 1);
        }
        if (pp != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, pp);
            add_end(s, "pp", A_UINT, 1);
        }
        break;
    case MP_MSG_BYE:
        if (m->u.bye.reason != 0) {
            add_begin();
            msgpack_pack_uint64(&fpk, m->u.bye.reason);
            add_end(s, "why", A_UINT, 1);
        }
        break;
    case MP_MSG_STATE_REQ:
        add_uint(s, "seq", m->u.state_req.seq);
        add_uint(s, "ver", m->u.state_req.version);
        add_uint(s, "first", m->u.state_req.first);
        add_uint(s, "n", m->u.state_req.n);
        break;
    case MP_MSG_STATE_INFO:
        add_uint(s, "seq", m->u.state_info.seq);
        add_uint(s, "ver", m->u.state_info.version);
        add_uint(s, "rnd", m->u.state_info.round);
        add_uint(s, "cnt", m->u.state_info.count);
        add_bin(s, "dig", m->u.state_info.digest, 32, A_BIN32, 0);
        break;
    }
}

/* Serializes the spec in reverse key order (the decoder must not depend on
 * order): field `skip` is left out, field `repl` gets value rv/rn instead,
 * and extra (a raw key/value pair) is appended. */
static void spec_build(const spec_t *s, bb_t *out, size_t skip, size_t repl,
                       const uint8_t *rv, size_t rn, const uint8_t *extra,
                       size_t extra_n) {
    msgpack_packer pk;
    size_t entries = s->nf - (skip < s->nf) + (extra != NULL);
    out->n = 0;
    msgpack_packer_init(&pk, out, bb_write);
    msgpack_pack_map(&pk, entries);
    for (size_t i = s->nf; i-- > 0;) {
        if (i == skip)
            continue;
        msgpack_pack_str(&pk, strlen(s->f[i].key));
        msgpack_pack_str_body(&pk, s->f[i].key, strlen(s->f[i].key));
        if (i == repl)
            bb_raw(out, rv, rn);
        else
            bb_raw(out, s->f[i].val, s->f[i].n);
    }
    if (extra != NULL)
        bb_raw(out, extra, extra_n);
}

#define NONE ((size_t)-1)

static moshpit_err_t dec(const bb_t *bb, mp_msg_t *m) {
    return mp__wire_msg_decode(bb->b, bb->n, m);
}

static bb_t bb;
static mp_msg_t dm;

static void test_fields(void) {
    static spec_t s;
    for (size_t i = 0; i < NFIXED; i++) {
        const char *name = fixed[i].name;
        spec_for(fixed[i].make, &s);

        spec_build(&s, &bb, NONE, NONE, NULL, 0, NULL, 0);
        CHECK(dec(&bb, &dm) == MOSHPIT_OK && msg_equal(&s.expect, &dm),
              "%s: hand-built message in reverse key order", name);

        /* Unknown keys are ignored, whatever they hold. */
        static const uint8_t unknown[] = {0xa2, 'z', 'z',  0x92, 0x81,
                                          0xa1, 'a', 0xc0, 0xc4, 0x00};
        spec_build(&s, &bb, NONE, NONE, NULL, 0, unknown, sizeof unknown);
        CHECK(dec(&bb, &dm) == MOSHPIT_OK && msg_equal(&s.expect, &dm),
              "%s: unknown key not ignored", name);

        for (size_t f = 0; f < s.nf; f++) {
            const char *key = s.f[f].key;
            /* Missing key. */
            spec_build(&s, &bb, f, NONE, NULL, 0, NULL, 0);
            moshpit_err_t e = dec(&bb, &dm);
            if (s.f[f].optional)
                CHECK(e == MOSHPIT_OK, "%s: optional %s", name, key);
            else
                CHECK(e == MOSHPIT_EPROTO, "%s: missing %s -> %d", name, key,
                      (int)e);

            /* Every kind of value the field cannot hold. */
            for (size_t k = 0; k < NSAMPLES; k++) {
                if (samples[k].kind & s.f[f].accept)
                    continue;
                spec_build(&s, &bb, NONE, f, samples[k].bytes, samples[k].n,
                           NULL, 0);
                e = dec(&bb, &dm);
                CHECK(e == MOSHPIT_EPROTO, "%s: %s as sample %zu -> %d", name,
                      key, k, (int)e);
            }

            /* The same key twice. */
            uint8_t dup[300];
            size_t kl = strlen(key);
            dup[0] = (uint8_t)(0xa0 | kl);
            memcpy(dup + 1, key, kl);
            memcpy(dup + 1 + kl, s.f[f].val, s.f[f].n);
            spec_build(&s, &bb, NONE, NONE, NULL, 0, dup, 1 + kl + s.f[f].n);
            CHECK(dec(&bb, &dm) == MOSHPIT_EPROTO, "%s: repeated %s", name,
                  key);
        }

        /* Trailing bytes, and two messages in one buffer. */
        spec_build(&s, &bb, NONE, NONE, NULL, 0, NULL, 0);
        size_t n = bb.n;
        bb_byte(&bb, 0xc0);
        CHECK(dec(&bb, &dm) == MOSHPIT_EPROTO, "%s: trailing byte", name);
        bb.n = n;
        bb_raw(&bb, bb.b, n);
        CHECK(dec(&bb, &dm) == MOSHPIT_EPROTO, "%s: two messages", name);
    }
}

/* Replaces the value of one field of a fixed message by raw bytes. */
static moshpit_err_t dec_with(msg_fn make, const char *key, const uint8_t *v,
                              size_t n) {
    static spec_t s;
    spec_for(make, &s);
    for (size_t f = 0; f < s.nf; f++) {
        if (strcmp(s.f[f].key, key) == 0) {
            spec_build(&s, &bb, NONE, f, v, n, NULL, 0);
            return dec(&bb, &dm);
        }
    }
    abort(); /* test bug: no such key */
}

static void test_values(void) {
    /* Version and type. */
    static const uint8_t u0[] = {0x00}, u1[] = {0x01}, u3[] = {0x03},
                         u9[] = {0x09}, u255[] = {0xcc, 0xff},
                         umax[] = {0xcf, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff},
                         t_big[] = {0xcf, 0, 0, 0, 1, 0, 0, 0, 1};
    CHECK(dec_with(msg_bye, "v", u0, 1) == MOSHPIT_EPROTO, "version 0");
    CHECK(dec_with(msg_bye, "v", u1, 1) == MOSHPIT_EPROTO,
          "version 1 (other session keys) accepted");
    CHECK(dec_with(msg_bye, "v", u3, 1) == MOSHPIT_EPROTO, "version 3");
    CHECK(dec_with(msg_bye, "v", umax, 9) == MOSHPIT_EPROTO, "version max");
    CHECK(dec_with(msg_bye, "t", u0, 1) == MOSHPIT_EPROTO, "type 0");
    CHECK(dec_with(msg_bye, "t", u9, 1) == MOSHPIT_EPROTO, "type 9");
    CHECK(dec_with(msg_bye, "t", u255, 2) == MOSHPIT_EPROTO, "type 255");
    CHECK(dec_with(msg_bye, "t", t_big, 9) == MOSHPIT_EPROTO, "type 2^32+1");

    /* Unsigned fields accept every positive integer form; u32 overflow. */
    static const uint8_t bw_i8[] = {0xd0, 0x05},
                         bw_u64[] = {0xcf, 0, 0, 0, 0, 0, 0, 0, 5},
                         bw_i64[] = {0xd3, 0, 0, 0, 0, 0, 0, 0, 5},
                         bw_u32max[] = {0xce, 0xff, 0xff, 0xff, 0xff},
                         bw_2p32[] = {0xcf, 0, 0, 0, 1, 0, 0, 0, 0},
                         neg5[] = {0xd0, 0xfb};
    CHECK(dec_with(msg_join, "bw", bw_i8, 2) == MOSHPIT_OK &&
              dm.u.join.bandwidth == 5,
          "int8 5 as u32");
    CHECK(dec_with(msg_join, "bw", bw_u64, 9) == MOSHPIT_OK &&
              dm.u.join.bandwidth == 5,
          "uint64 5 as u32");
    CHECK(dec_with(msg_join, "bw", bw_i64, 9) == MOSHPIT_OK &&
              dm.u.join.bandwidth == 5,
          "int64 5 as u32");
    CHECK(dec_with(msg_join, "win", bw_u32max, 5) == MOSHPIT_OK &&
              dm.u.join.window_ms == UINT32_MAX,
          "u32 max");
    CHECK(dec_with(msg_join, "win", bw_2p32, 9) == MOSHPIT_EPROTO,
          "u32 field = 2^32");
    CHECK(dec_with(msg_hello, "bw", bw_2p32, 9) == MOSHPIT_EPROTO,
          "hello bw = 2^32");
    /* dial-back nonces: u32, never 0 */
    CHECK(dec_with(msg_hello_dialback, "bq", bw_u32max, 5) == MOSHPIT_OK &&
              dm.u.hello.dialback_req == UINT32_MAX &&
              dm.u.hello.dialback_ans == 9,
          "hello bq = 2^32-1");
    CHECK(dec_with(msg_hello_dialback, "bq", u0, 1) == MOSHPIT_EPROTO,
          "hello bq = 0");
    /* the key order: u64, never 0 */
    CHECK(dec_with(msg_hello_dialback, "eo", bw_2p32, 9) == MOSHPIT_OK &&
              dm.u.hello.eph_order == 4294967296u,
          "hello eo = 2^32");
    CHECK(dec_with(msg_hello_dialback, "eo", u0, 1) == MOSHPIT_EPROTO,
          "hello eo = 0");
    CHECK(dec_with(msg_hello_dialback, "ba", u0, 1) == MOSHPIT_EPROTO,
          "hello ba = 0");
    CHECK(dec_with(msg_hello_dialback, "ba", bw_2p32, 9) == MOSHPIT_EPROTO,
          "hello ba = 2^32");
    CHECK(dec_with(msg_done_up, "up", bw_2p32, 9) == MOSHPIT_EPROTO,
          "done up = 2^32");
    /* GROUP bit sets over the roster of 3: nonzero, no bit at 3 or above */
    static const uint8_t bits_7[] = {0x07}, bits_8[] = {0x08};
    CHECK(dec_with(msg_group_parts, "pp", bits_7, 1) == MOSHPIT_OK &&
              dm.u.group.members[0].parts && dm.u.group.members[1].parts &&
              dm.u.group.members[2].parts,
          "group pp = 7");
    static const struct {
        const char *key;
        const uint8_t *v;
    } bad_bits[] = {{"pp", u0}, {"pp", bits_8}, {"ns", u0}, {"ns", bits_8}};
    for (size_t i = 0; i < sizeof bad_bits / sizeof bad_bits[0]; i++)
        CHECK(dec_with(msg_group_parts, bad_bits[i].key, bad_bits[i].v, 1) ==
                  MOSHPIT_EPROTO,
              "group %s = %u", bad_bits[i].key, bad_bits[i].v[0]);
    CHECK(dec_with(msg_done_up, "up", neg5, 2) == MOSHPIT_EPROTO,
          "done up = -5");
    CHECK(dec_with(msg_hello, "ci", bw_2p32, 9) == MOSHPIT_EPROTO,
          "hello ci = 2^32");
    CHECK(dec_with(msg_refuse, "why", bw_2p32, 9) == MOSHPIT_EPROTO,
          "why = 2^32");
    CHECK(dec_with(msg_join, "seq", neg5, 2) == MOSHPIT_EPROTO, "seq -5");
    CHECK(dec_with(msg_join_ack, "seq", umax, 9) == MOSHPIT_OK &&
              dm.u.ack.seq == UINT64_MAX,
          "seq u64 max");

    /* Weights: float32, float64 and integers are fine; the rest is not. */
    static const uint8_t w_f32[] = {0xca, 0x40, 0x20, 0x00, 0x00}, /* 2.5 */
        w_int[] = {0x03}, w_zero_i[] = {0xd0, 0x00},
                         w_nan[] = {0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0},
                         w_inf[] = {0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0},
                         w_ninf[] = {0xcb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0},
                         w_neg[] = {0xcb, 0xbf, 0xf0, 0, 0, 0, 0, 0, 0},
                         w_f32nan[] = {0xca, 0x7f, 0xc0, 0x00, 0x00},
                         w_f32inf[] = {0xca, 0x7f, 0x80, 0x00, 0x00},
                         w_f32neg[] = {0xca, 0xbf, 0x80, 0x00, 0x00},
                         w_nint[] = {0xff};
    CHECK(dec_with(msg_join, "w", w_f32, 5) == MOSHPIT_OK &&
              dm.u.join.weight == 2.5,
          "float32 weight");
    CHECK(dec_with(msg_join, "w", w_int, 1) == MOSHPIT_OK &&
              dm.u.join.weight == 3.0,
          "integer weight");
    CHECK(dec_with(msg_join, "w", w_zero_i, 2) == MOSHPIT_OK &&
              dm.u.join.weight == 0.0,
          "int8 zero weight");
    const uint8_t *bad_w[] = {w_nan,    w_inf,    w_ninf,   w_neg,
                              w_f32nan, w_f32inf, w_f32neg, w_nint};
    const size_t bad_wn[] = {9, 9, 9, 9, 5, 5, 5, 1};
    for (size_t i = 0; i < sizeof bad_wn / sizeof bad_wn[0]; i++)
        CHECK(dec_with(msg_join, "w", bad_w[i], bad_wn[i]) == MOSHPIT_EPROTO,
              "bad join weight %zu", i);

    /* Bin lengths. */
    uint8_t b[64];
    b[0] = 0xc4;
    memset(b + 2, 7, sizeof b - 2);
    const char *bin32_keys[] = {"sw", "eph", "se", "pf"};
    for (size_t i = 0; i < 4; i++) {
        for (uint8_t n = 0; n < 40; n++) {
            b[1] = n;
            moshpit_err_t e = dec_with(msg_hello, bin32_keys[i], b, 2u + n);
            CHECK(n == 32 ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
                  "hello %s bin of %u bytes -> %d", bin32_keys[i], n, (int)e);
        }
    }
    for (uint8_t n = 0; n <= MP_KEY_MAX + 1; n++) {
        b[1] = n;
        moshpit_err_t e = dec_with(msg_join, "key", b, 2u + n);
        CHECK(n <= MP_KEY_MAX ? e == MOSHPIT_OK && dm.u.join.key_len == n
                              : e == MOSHPIT_EPROTO,
              "join key of %u bytes -> %d", n, (int)e);
    }
    /* A certificate is exactly MOSHPIT_CERT_BYTES, in any bin form. */
    static uint8_t cb[MOSHPIT_CERT_BYTES + 64];
    memset(cb, 9, sizeof cb);
    for (size_t n = 0; n <= MOSHPIT_CERT_BYTES + 40; n++) {
        cb[0] = 0xc4;
        cb[1] = (uint8_t)n;
        moshpit_err_t e = dec_with(msg_hello_cert, "ct", cb, 2u + n);
        CHECK(n == MOSHPIT_CERT_BYTES
                  ? e == MOSHPIT_OK && dm.u.hello.has_cert == 1 &&
                        dm.u.hello.cert[0] == 9
                  : e == MOSHPIT_EPROTO,
              "hello ct bin of %zu bytes -> %d", n, (int)e);
    }
    cb[0] = 0xc5; /* bin 16 */
    cb[1] = 0;
    cb[2] = MOSHPIT_CERT_BYTES;
    CHECK(dec_with(msg_hello_cert, "ct", cb, 3u + MOSHPIT_CERT_BYTES) ==
                  MOSHPIT_OK &&
              dm.u.hello.has_cert == 1,
          "hello ct as bin 16");
    cb[0] = 0xd9; /* str 8 of the right length */
    cb[1] = MOSHPIT_CERT_BYTES;
    CHECK(dec_with(msg_hello_cert, "ct", cb, 2u + MOSHPIT_CERT_BYTES) ==
              MOSHPIT_EPROTO,
          "hello ct as str");

    /* A str is not a bin, even of the right length. */
    uint8_t s32b[34] = {0xd9, 32};
    memset(s32b + 2, 'a', 32);
    CHECK(dec_with(msg_hello, "sw", s32b, 34) == MOSHPIT_EPROTO,
          "str32 as swarm");

    /* Strings: length limit, embedded NUL, empty, and str16/str32 forms. */
    uint8_t s[MP_ADDR_MAX + 8];
    for (size_t n = MP_ADDR_MAX - 2; n <= MP_ADDR_MAX + 1; n++) {
        s[0] = 0xd9;
        s[1] = (uint8_t)n;
        memset(s + 2, 'x', n);
        moshpit_err_t e = dec_with(msg_hello, "ca", s, 2 + n);
        CHECK(n < MP_ADDR_MAX
                  ? e == MOSHPIT_OK && strlen(dm.u.hello.ctrl_addr) == n
                  : e == MOSHPIT_EPROTO,
              "ca of %zu bytes -> %d", n, (int)e);
    }
    static const uint8_t s_nul[] = {0xa3, 'a', 0, 'b'}, s_empty[] = {0xa0},
                         s16[] = {0xda, 0, 2, 'h', 'i'},
                         s32w[] = {0xdb, 0, 0, 0, 2, 'h', 'i'},
                         s_4g[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
                         b_4g[] = {0xc6, 0xff, 0xff, 0xff, 0xff, 'a'};
    CHECK(dec_with(msg_hello, "da", s_nul, 4) == MOSHPIT_EPROTO,
          "NUL inside a str");
    CHECK(dec_with(msg_hello, "da", s_empty, 1) == MOSHPIT_OK &&
              dm.u.hello.data_addr[0] == '\0',
          "empty str");
    CHECK(dec_with(msg_hello, "da", s16, 5) == MOSHPIT_OK &&
              strcmp(dm.u.hello.data_addr, "hi") == 0,
          "str16");
    CHECK(dec_with(msg_hello, "da", s32w, 7) == MOSHPIT_OK &&
              strcmp(dm.u.hello.data_addr, "hi") == 0,
          "str32");
    CHECK(dec_with(msg_hello, "ca", s_4g, 6) == MOSHPIT_EPROTO,
          "str claiming 4 GB");
    CHECK(dec_with(msg_hello, "sw", b_4g, 6) == MOSHPIT_EPROTO,
          "bin claiming 4 GB");
    static const uint8_t re_false[] = {0xc2};
    CHECK(dec_with(msg_hello, "re", re_false, 1) == MOSHPIT_OK &&
              dm.u.hello.reply == 0,
          "re false");

    /* GROUP id must be nonzero. */
    CHECK(dec_with(msg_group, "gid", u0, 1) == MOSHPIT_EPROTO, "gid 0");
    CHECK(dec_with(msg_done, "gid", u0, 1) == MOSHPIT_EPROTO, "done of gid 0");
    CHECK(dec_with(msg_have, "gid", u0, 1) == MOSHPIT_EPROTO, "have of gid 0");
    {
        /* a bitmap one byte over MP_HAVE_BYTES_MAX */
        static uint8_t big[3 + MP_HAVE_BYTES_MAX + 1];
        big[0] = 0xc5;
        big[1] = (uint8_t)((MP_HAVE_BYTES_MAX + 1) >> 8);
        big[2] = (uint8_t)(MP_HAVE_BYTES_MAX + 1);
        CHECK(dec_with(msg_have, "sc", big, sizeof big) == MOSHPIT_EPROTO,
              "have bitmap of %u bytes", MP_HAVE_BYTES_MAX + 1);
        big[1] = (uint8_t)(MP_HAVE_BYTES_MAX >> 8);
        big[2] = (uint8_t)MP_HAVE_BYTES_MAX;
        CHECK(dec_with(msg_have, "ga", big, sizeof big - 1) == MOSHPIT_OK,
              "have bitmap of %u bytes", MP_HAVE_BYTES_MAX);
    }
}

/* Builds "p" or "m" arrays by hand. */
static void peers_entry(bb_t *o, uint8_t id0, size_t idlen, const char *addr) {
    uint8_t id[40];
    memset(id, 0x11, sizeof id);
    id[0] = id0;
    bb_byte(o, 0x92);
    bb_byte(o, 0xc4);
    bb_byte(o, (uint8_t)idlen);
    bb_raw(o, id, idlen);
    bb_byte(o, (uint8_t)(0xa0 | strlen(addr)));
    bb_raw(o, addr, strlen(addr));
}

static void member_entry(bb_t *o, uint8_t id0, const uint8_t *w, size_t wn,
                         size_t elems) {
    uint8_t id[32];
    memset(id, 0x22, sizeof id);
    id[0] = id0;
    bb_byte(o, (uint8_t)(0x90 | elems));
    bb_byte(o, 0xc4);
    bb_byte(o, 32);
    bb_raw(o, id, 32);
    bb_raw(o, w, wn);
    if (elems >= 3)
        bb_byte(o, 0x05);
    for (size_t i = 3; i < elems; i++)
        bb_byte(o, 0xc0);
}

static void arr_header(bb_t *o, uint32_t n) {
    bb_byte(o, 0xdd);
    bb_byte(o, (uint8_t)(n >> 24));
    bb_byte(o, (uint8_t)(n >> 16));
    bb_byte(o, (uint8_t)(n >> 8));
    bb_byte(o, (uint8_t)n);
}

static bb_t arr;
static const uint8_t w_one[] = {0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0};

static moshpit_err_t dec_peers_n(uint32_t n, uint32_t have) {
    arr.n = 0;
    arr_header(&arr, n);
    for (uint32_t i = 0; i < have; i++)
        peers_entry(&arr, (uint8_t)i, 32, "a");
    return dec_with(msg_peers, "p", arr.b, arr.n);
}

static moshpit_err_t dec_group_n(uint32_t n, uint32_t have) {
    arr.n = 0;
    arr_header(&arr, n);
    for (uint32_t i = 0; i < have; i++)
        member_entry(&arr, (uint8_t)i, w_one, sizeof w_one, 3);
    return dec_with(msg_group, "m", arr.b, arr.n);
}

static void test_counts(void) {
    CHECK(dec_peers_n(0, 0) == MOSHPIT_OK && dm.u.peers.n == 0, "0 peers");
    CHECK(dec_peers_n(MP_PEERS_MAX, MP_PEERS_MAX) == MOSHPIT_OK &&
              dm.u.peers.n == MP_PEERS_MAX,
          "max peers as array32");
    CHECK(dec_peers_n(MP_PEERS_MAX + 1, MP_PEERS_MAX + 1) == MOSHPIT_EPROTO,
          "max+1 peers");
    CHECK(dec_peers_n(UINT32_MAX, 0) == MOSHPIT_EPROTO, "2^32-1 peers, none");
    CHECK(dec_peers_n(UINT32_MAX, 3) == MOSHPIT_EPROTO, "2^32-1 peers, 3");
    CHECK(dec_peers_n(5, 4) == MOSHPIT_EPROTO, "5 peers claimed, 4 present");

    /* Malformed peer entries. */
    static const struct {
        size_t idlen;
        const char *addr;
        int ok;
    } pe[] = {{32, "tcp://x:1", 1}, {31, "a", 0}, {33, "a", 0}, {0, "a", 0}};
    for (size_t i = 0; i < sizeof pe / sizeof pe[0]; i++) {
        arr.n = 0;
        bb_byte(&arr, 0x91);
        peers_entry(&arr, 1, pe[i].idlen, pe[i].addr);
        moshpit_err_t e = dec_with(msg_peers, "p", arr.b, arr.n);
        CHECK(pe[i].ok ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
              "peer entry %zu -> %d", i, (int)e);
    }
    static const uint8_t p_not_arr[] = {0x91, 0xc0},
                         p_one[] = {0x91, 0x91, 0xc4, 0},
                         p_three[] = {0x91, 0x93, 0xc0, 0xc0, 0xc0},
                         p_swapped[] = {0x91, 0x92, 0xa1, 'a', 0xc4, 0};
    CHECK(dec_with(msg_peers, "p", p_not_arr, 2) == MOSHPIT_EPROTO,
          "peer entry not an array");
    CHECK(dec_with(msg_peers, "p", p_one, 4) == MOSHPIT_EPROTO,
          "peer entry of 1");
    CHECK(dec_with(msg_peers, "p", p_three, 5) == MOSHPIT_EPROTO,
          "peer entry of 3");
    CHECK(dec_with(msg_peers, "p", p_swapped, 6) == MOSHPIT_EPROTO,
          "peer entry swapped");

    /* Group sizes. */
    CHECK(dec_group_n(0, 0) == MOSHPIT_EPROTO, "group of 0");
    CHECK(dec_group_n(1, 1) == MOSHPIT_EPROTO, "group of 1");
    CHECK(dec_group_n(2, 2) == MOSHPIT_OK && dm.u.group.n == 2, "group of 2");
    CHECK(dec_group_n(MP_GROUP_MAX, MP_GROUP_MAX) == MOSHPIT_OK &&
              dm.u.group.n == MP_GROUP_MAX,
          "group of max");
    CHECK(dec_group_n(MP_GROUP_MAX + 1, MP_GROUP_MAX + 1) == MOSHPIT_EPROTO,
          "group of max+1");
    CHECK(dec_group_n(UINT32_MAX, 2) == MOSHPIT_EPROTO, "group of 2^32-1");

    /* Malformed members. */
    static const uint8_t w_nan[] = {0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0},
                         w_neg[] = {0xcb, 0xbf, 0xf0, 0, 0, 0, 0, 0, 0},
                         w_inf[] = {0xca, 0x7f, 0x80, 0, 0},
                         w_str[] = {0xa1, '1'}, w_int[] = {0x07};
    struct {
        const uint8_t *w;
        size_t wn, elems;
        uint8_t id1;
        int ok;
    } me[] = {
        {w_one, 9, 3, 1, 1}, {w_int, 1, 3, 1, 1}, {w_one, 9, 3, 0, 0},
        {w_nan, 9, 3, 1, 0}, {w_neg, 9, 3, 1, 0}, {w_inf, 5, 3, 1, 0},
        {w_str, 2, 3, 1, 0}, {w_one, 9, 2, 1, 0}, {w_one, 9, 4, 1, 0},
    };
    for (size_t i = 0; i < sizeof me / sizeof me[0]; i++) {
        arr.n = 0;
        bb_byte(&arr, 0x92);
        member_entry(&arr, 0, w_one, sizeof w_one, 3);
        member_entry(&arr, me[i].id1, me[i].w, me[i].wn, me[i].elems);
        moshpit_err_t e = dec_with(msg_group, "m", arr.b, arr.n);
        CHECK(me[i].ok ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
              "member case %zu -> %d", i, (int)e);
    }
    /* Duplicates anywhere in a full roster. */
    arr.n = 0;
    bb_byte(&arr, 0xdc);
    bb_byte(&arr, 0);
    bb_byte(&arr, MP_GROUP_MAX);
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++)
        member_entry(&arr, (uint8_t)(i == MP_GROUP_MAX - 1 ? 17 : i), w_one,
                     sizeof w_one, 3);
    CHECK(dec_with(msg_group, "m", arr.b, arr.n) == MOSHPIT_EPROTO,
          "duplicate first and last member");
    /* Member bandwidth over u32. */
    static const uint8_t bw_2p32[] = {0xcf, 0, 0, 0, 1, 0, 0, 0, 0};
    uint8_t id[32];
    memset(id, 0x33, sizeof id);
    arr.n = 0;
    bb_byte(&arr, 0x92);
    member_entry(&arr, 0, w_one, sizeof w_one, 3);
    bb_byte(&arr, 0x93);
    bb_byte(&arr, 0xc4);
    bb_byte(&arr, 32);
    bb_raw(&arr, id, 32);
    bb_raw(&arr, w_one, sizeof w_one);
    bb_raw(&arr, bw_2p32, sizeof bw_2p32);
    CHECK(dec_with(msg_group, "m", arr.b, arr.n) == MOSHPIT_EPROTO,
          "member bandwidth 2^32");
}

static void test_raw(void) {
    static const uint8_t bye[] = {0x82, 0xa1, 'v', 0x02, 0xa1, 't', 0x08};
    CHECK(mp__wire_msg_decode(bye, sizeof bye, &dm) == MOSHPIT_OK &&
              dm.type == MP_MSG_BYE,
          "minimal BYE");
    CHECK(mp__wire_msg_decode(bye, 0, &dm) == MOSHPIT_EPROTO, "empty input");
    CHECK(mp__wire_msg_decode(NULL, 0, &dm) == MOSHPIT_EPROTO,
          "NULL empty input");
    CHECK(mp__wire_msg_decode(bye, sizeof bye, NULL) == MOSHPIT_EINVAL,
          "NULL msg");

    /* Not a map. */
    static const uint8_t not_map[][8] = {
        {0xc0}, {0x01}, {0x92, 0x01, 0x08}, {0xa1, 'v'}, {0xc4, 0x00}};
    static const size_t not_map_n[] = {1, 1, 3, 2, 2};
    for (size_t i = 0; i < 5; i++)
        CHECK(mp__wire_msg_decode(not_map[i], not_map_n[i], &dm) ==
                  MOSHPIT_EPROTO,
              "not a map %zu", i);

    /* Non-string key, the reserved byte 0xc1, absurd map counts. */
    static const uint8_t int_key[] = {0x83, 0xa1, 'v',  0x01, 0xa1,
                                      't',  0x08, 0x01, 0x02},
                         c1[] = {0x83, 0xa1, 'v',  0x01, 0xa1,
                                 't',  0x08, 0xa1, 'z',  0xc1},
                         map_4g[] = {0xdf, 0xff, 0xff, 0xff,
                                     0xff, 0xa1, 'v',  0x01},
                         map_16[] = {0xde, 0xff, 0xff, 0xa1, 'v', 0x01},
                         ext_4g[] = {0x83, 0xa1, 'v',  0x01, 0xa1,
                                     't',  0x08, 0xa1, 'z',  0xc9,
                                     0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK(mp__wire_msg_decode(int_key, sizeof int_key, &dm) == MOSHPIT_EPROTO,
          "integer key");
    CHECK(mp__wire_msg_decode(c1, sizeof c1, &dm) == MOSHPIT_EPROTO, "0xc1");
    CHECK(mp__wire_msg_decode(map_4g, sizeof map_4g, &dm) == MOSHPIT_EPROTO,
          "map32 of 2^32-1");
    CHECK(mp__wire_msg_decode(map_16, sizeof map_16, &dm) == MOSHPIT_EPROTO,
          "map16 of 65535");
    CHECK(mp__wire_msg_decode(ext_4g, sizeof ext_4g, &dm) == MOSHPIT_EPROTO,
          "ext claiming 4 GB");

    /* Nesting: an unknown key may hold a few levels, not many. */
    for (int depth = 1; depth <= 40; depth++) {
        bb.n = 0;
        bb_raw(&bb, "\x83\xa1v\x02\xa1t\x08\xa1z", 9);
        for (int i = 0; i < depth; i++)
            bb_byte(&bb, 0x91);
        bb_byte(&bb, 0xc0);
        /* the map is level 1, the unknown value's arrays 2..depth+1 */
        moshpit_err_t e = dec(&bb, &dm);
        CHECK(depth + 1 <= 16 ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
              "nesting %d -> %d", depth + 1, (int)e);
    }

    /* Size limit: exactly MP_CTRL_MAX is fine, one more byte is not. */
    for (size_t total = MP_CTRL_MAX - 1; total <= MP_CTRL_MAX + 1; total++) {
        bb.n = 0;
        bb_raw(&bb, "\x83\xa1v\x02\xa1t\x08\xa1z\xc5", 10);
        size_t body = total - 12;
        bb_byte(&bb, (uint8_t)(body >> 8));
        bb_byte(&bb, (uint8_t)body);
        while (bb.n < total)
            bb_byte(&bb, 0);
        moshpit_err_t e = dec(&bb, &dm);
        CHECK(total <= MP_CTRL_MAX ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
              "message of %zu bytes -> %d", total, (int)e);
    }

    /* A failed decode leaves the message zeroed. */
    msg_hello(&dm);
    CHECK(mp__wire_msg_decode(c1, sizeof c1, &dm) == MOSHPIT_EPROTO &&
              dm.type == 0 && dm.u.hello.tag == 0,
          "failed decode clears msg");
}

static void test_encode_rejects(void) {
    static mp_msg_t m;
    size_t len = 7;
    uint8_t *b = enc_buf;
    size_t cap = sizeof enc_buf;

#define REJECT(setup, what)                                                    \
    do {                                                                       \
        setup;                                                                 \
        moshpit_err_t e_ = mp__wire_msg_encode(&m, b, cap, &len);              \
        CHECK(e_ == MOSHPIT_EINVAL && len == 0, "encode %s -> %d", what,       \
              (int)e_);                                                        \
    } while (0)

    REJECT((msg_bye(&m), m.type = (mp_msg_type_t)0), "type 0");
    REJECT((msg_bye(&m), m.type = (mp_msg_type_t)14), "type 14");
    REJECT((msg_have(&m), m.u.have.group_id = 0), "have of group 0");
    REJECT((msg_have(&m), m.u.have.mark = 2), "have mark 2");
    REJECT((msg_have(&m), m.u.have.sc_len = MP_HAVE_BYTES_MAX + 1),
           "have bitmap too long");
    REJECT((msg_done(&m), m.u.done.group_id = 0), "done of group 0");
    REJECT((msg_hello(&m), m.u.hello.serves_state = 2), "serves_state 2");
    REJECT((msg_hello(&m), m.u.hello.reorder_ok = 2), "reorder_ok 2");
    REJECT((msg_state_req(&m), m.u.state_req.n = 0), "state req of 0");
    REJECT((msg_state_req(&m), m.u.state_req.n = MP_STATE_GET_MAX + 1),
           "state req above MP_STATE_GET_MAX");
    REJECT((msg_state_req(&m), m.u.state_req.version = 0), "info req with n");
    REJECT((msg_state_info(&m), m.u.state_info.count = MP_STATE_COUNT_MAX + 1),
           "state count above MP_STATE_COUNT_MAX");
    REJECT((msg_hello(&m), m.u.hello.has_proof = 2), "has_proof 2");
    REJECT((msg_hello(&m), m.u.hello.reply = 2), "reply 2");
    REJECT((msg_hello(&m), m.u.hello.has_proof = 0), "proof without flag");
    REJECT((msg_hello_cert(&m), m.u.hello.has_cert = 2), "has_cert 2");
    REJECT((msg_hello_cert(&m), m.u.hello.has_cert = 0),
           "certificate without flag");
    REJECT((msg_hello(&m), memset(m.u.hello.ctrl_addr, 'a', MP_ADDR_MAX)),
           "unterminated ctrl_addr");
    REJECT((msg_hello(&m), memset(m.u.hello.data_addr, 'a', MP_ADDR_MAX)),
           "unterminated data_addr");
    REJECT((msg_peers(&m), m.u.peers.n = MP_PEERS_MAX + 1), "peers max+1");
    REJECT((msg_peers(&m), memset(m.u.peers.peers[1].addr, 'a', MP_ADDR_MAX)),
           "unterminated peer addr");
    REJECT((msg_join(&m), m.u.join.weight = NAN), "NaN weight");
    REJECT((msg_join(&m), m.u.join.weight = INFINITY), "inf weight");
    REJECT((msg_join(&m), m.u.join.weight = -1.0), "negative weight");
    REJECT((msg_join(&m), m.u.join.weight = MOSHPIT_WEIGHT_MAX * 1.0000001),
           "weight above MOSHPIT_WEIGHT_MAX");
    REJECT((msg_join(&m), m.u.join.weight = 1.7976931348623157e308),
           "weight DBL_MAX");
    REJECT((msg_join(&m), m.u.join.key_len = MP_KEY_MAX + 1), "long key");
    {
        /* the optional HELLO flag round-trips; an info request has n 0 */
        mp_msg_t h2;
        msg_hello(&h2);
        h2.u.hello.serves_state = 1;
        roundtrip("hello serving state", &h2);
        h2.u.hello.reorder_ok = 1;
        roundtrip("hello with a receive window", &h2);
        msg_state_req(&h2);
        h2.u.state_req.version = 0;
        h2.u.state_req.n = 0;
        roundtrip("state info request", &h2);
        msg_state_info(&h2);
        h2.u.state_info.count = MP_STATE_COUNT_MAX;
        roundtrip("state info max", &h2);
    }
    REJECT((msg_group(&m), m.u.group.n = 1), "group of 1");
    REJECT((msg_group(&m), m.u.group.n = 0), "group of 0");
    REJECT((msg_group(&m), m.u.group.n = MP_GROUP_MAX + 1), "group max+1");
    REJECT((msg_group(&m), m.u.group.group_id = 0), "group id 0");
    REJECT((msg_group(&m), m.u.group.members[2].weight = NAN),
           "member NaN weight");
    REJECT((msg_group(&m), m.u.group.members[1].weight = -INFINITY),
           "member -inf weight");
    REJECT((msg_group(&m), m.u.group.members[1].weight = 1e300),
           "member absurd weight");
    REJECT((msg_group(&m),
            memcpy(m.u.group.members[2].id, m.u.group.members[0].id, 32)),
           "duplicate member");
    b = NULL;
    REJECT(msg_bye(&m), "NULL buffer with cap");
    b = enc_buf;
#undef REJECT

    msg_bye(&m);
    CHECK(mp__wire_msg_encode(NULL, b, cap, &len) == MOSHPIT_EINVAL,
          "NULL msg");
    CHECK(mp__wire_msg_encode(&m, b, cap, NULL) == MOSHPIT_EINVAL, "NULL len");
    CHECK(mp__wire_msg_encode(&m, NULL, 0, &len) == MOSHPIT_ENOMEM,
          "NULL buffer, cap 0");
    /* Negative zero is a valid (non-negative) weight. */
    msg_join(&m);
    m.u.join.weight = -0.0;
    CHECK(mp__wire_msg_encode(&m, b, cap, &len) == MOSHPIT_OK, "-0.0 weight");
}

/* ------------------------------------------------------------------ */
/* data header                                                         */

static void hdr_equal_check(const mp_data_hdr_t *a, const mp_data_hdr_t *b,
                            const char *what) {
    CHECK(a->kind == b->kind && a->codec == b->codec && a->count == b->count &&
              a->tag == b->tag && a->counter == b->counter &&
              a->round_id == b->round_id && a->share == b->share &&
              a->part == b->part && same_double(a->wsum, b->wsum),
          "%s: header round trip differs", what);
}

static void test_data_hdr(void) {
    size_t maxlen =
        MP_DATA_HDR_BYTES + (size_t)MP_DATA_MAX_COUNT * 4 + MP_DATA_TAG_BYTES;
    uint8_t *f = calloc(1, maxlen + 8);
    if (f == NULL)
        abort();
    mp_data_hdr_t h, d;

    /* Minimal and maximal values. */
    memset(&h, 0, sizeof h);
    h.kind = MP_PART_SCATTER;
    mp__wire_data_hdr_encode(&h, f);
    CHECK(mp__wire_data_hdr_decode(f, 64, &d) == MOSHPIT_OK, "min header");
    hdr_equal_check(&h, &d, "min");
    h.kind = MP_PART_GATHER;
    h.count = MP_DATA_MAX_COUNT;
    h.tag = h.counter = h.round_id = UINT64_MAX;
    h.share = h.part = UINT32_MAX;
    h.wsum = MOSHPIT_WEIGHT_MAX * MP_GROUP_MAX;
    mp__wire_data_hdr_encode(&h, f);
    CHECK(mp__wire_data_hdr_decode(f, maxlen, &d) == MOSHPIT_OK, "max header");
    hdr_equal_check(&h, &d, "max");

    /* Exact bytes of the fixed header, written out by hand. */
    static const uint8_t want[MP_DATA_HDR_BYTES] = {
        0x01, 0x02, 0x00, 0x00, 0xe8, 0x03, 0x00, 0x00, /* v, kind, count */
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* tag */
        0x07, 0,    0,    0,    0,    0,    0,    0,    /* counter */
        0x0d, 0xf0, 0xfe, 0xca, 0xef, 0xbe, 0xad, 0xde, /* round id */
        0x02, 0,    0,    0,    0x05, 0,    0,    0,    /* share, part */
        0,    0,    0,    0,    0,    0,    0x04, 0x40, /* 2.5 */
    };
    uint8_t out[MP_DATA_HDR_BYTES];
    hdr_fixed(&h);
    mp__wire_data_hdr_encode(&h, out);
    CHECK(memcmp(out, want, sizeof want) == 0, "fixed header bytes");

    /* Every malformed form, starting from the fixed header. */
    size_t flen = MP_DATA_HDR_BYTES + 1000 * 4 + MP_DATA_TAG_BYTES;
    memset(f, 0, maxlen);
    memcpy(f, want, sizeof want);
    CHECK(mp__wire_data_hdr_decode(f, flen, &d) == MOSHPIT_OK, "fixed decodes");
    int short_ok = 1;
    for (size_t n = 0; n < MP_DATA_HDR_BYTES; n++)
        if (mp__wire_data_hdr_decode(f, n, &d) != MOSHPIT_EPROTO)
            short_ok = 0;
    CHECK(short_ok, "short header accepted");
    CHECK(mp__wire_data_hdr_decode(f, flen - 1, &d) == MOSHPIT_EPROTO,
          "len - 1");
    CHECK(mp__wire_data_hdr_decode(f, flen + 1, &d) == MOSHPIT_EPROTO,
          "len + 1");
    CHECK(mp__wire_data_hdr_decode(f, flen + 4, &d) == MOSHPIT_EPROTO,
          "len + 4");
    CHECK(mp__wire_data_hdr_decode(f, flen - MP_DATA_TAG_BYTES, &d) ==
              MOSHPIT_EPROTO,
          "no tag");

    struct {
        size_t off;
        uint8_t val;
        const char *what;
    } bad[] = {
        {0, 0, "version 0"},
        {0, 2, "version 2"},
        {0, 0xff, "version 255"},
        {1, 0, "kind 0"},
        {1, 4, "kind 4"},
        {1, 0xff, "kind 255"},
        {2, 1, "codec 1, float32 length"},
        {2, 5, "codec 5"},
        {2, 0xff, "codec 255"},
        {3, MP_DATA_LAYOUT_MAX + 1, "layout past the smallest parts"},
        {3, 0x80, "layout 0x80"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t save = f[bad[i].off];
        f[bad[i].off] = bad[i].val;
        CHECK(mp__wire_data_hdr_decode(f, flen, &d) == MOSHPIT_EPROTO, "%s",
              bad[i].what);
        f[bad[i].off] = save;
    }

    /* The layout byte: 0..2 for scatter and gather parts, read back; 0
     * only for state chunks and marks. */
    for (uint8_t kind = MP_PART_SCATTER; kind <= MP_PART_MARK; kind++)
        for (uint8_t l = 0; l <= MP_DATA_LAYOUT_MAX + 1; l++) {
            memset(&h, 0, sizeof h);
            h.kind = kind;
            h.layout = l;
            mp__wire_data_hdr_encode(&h, f);
            size_t len = MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES;
            bool ok =
                l == 0 || (l <= MP_DATA_LAYOUT_MAX &&
                           (kind == MP_PART_SCATTER || kind == MP_PART_GATHER));
            moshpit_err_t e = mp__wire_data_hdr_decode(f, len, &d);
            CHECK(ok ? e == MOSHPIT_OK && d.layout == l : e == MOSHPIT_EPROTO,
                  "kind %u layout %u -> %d", kind, l, (int)e);
        }

    /* A part in shared memory (layout bit 7): scatter and gather only,
     * any codec and count, the frame exactly header + reference + tag;
     * the part size stays in the low bits. */
    for (uint8_t kind = MP_PART_SCATTER; kind <= MP_PART_MARK; kind++)
        for (uint8_t cd = 0; cd <= MOSHPIT_COMPRESS_INT4; cd++)
            for (uint8_t l = 0; l <= MP_DATA_LAYOUT_MAX; l++) {
                memset(&h, 0, sizeof h);
                h.kind = kind;
                h.codec = kind == MP_PART_STATE ? 0 : cd;
                h.layout = l;
                h.count = kind == MP_PART_MARK ? 0 : 1000;
                h.shm = true;
                mp__wire_data_hdr_encode(&h, f);
                CHECK((f[3] & MP_DATA_LAYOUT_SHM) != 0 && (f[3] & 0x7f) == l,
                      "kind %u layout %u: byte 3 is %02x", kind, l, f[3]);
                size_t ref = MP_DATA_HDR_BYTES + MP_DATA_SHM_REF_BYTES +
                             MP_DATA_TAG_BYTES;
                size_t full = MP_DATA_HDR_BYTES +
                              mp__codec_bytes(h.codec, h.count) +
                              MP_DATA_TAG_BYTES;
                bool part = kind == MP_PART_SCATTER || kind == MP_PART_GATHER;
                moshpit_err_t e = mp__wire_data_hdr_decode(f, ref, &d);
                CHECK(part ? e == MOSHPIT_OK && d.shm && d.layout == l &&
                                 d.codec == cd && d.count == 1000
                           : e == MOSHPIT_EPROTO,
                      "shm kind %u codec %u layout %u -> %d", kind, cd, l,
                      (int)e);
                CHECK(mp__wire_data_hdr_decode(f, full, &d) == MOSHPIT_EPROTO,
                      "shm kind %u codec %u with the values' length", kind, cd);
                CHECK(mp__wire_data_hdr_decode(f, ref + 1, &d) ==
                              MOSHPIT_EPROTO &&
                          mp__wire_data_hdr_decode(f, ref - 1, &d) ==
                              MOSHPIT_EPROTO,
                      "shm kind %u: reference length off by one", kind);
                if (part) {
                    h.shm = false; /* and without the bit, no reference */
                    mp__wire_data_hdr_encode(&h, f);
                    CHECK(mp__wire_data_hdr_decode(f, ref, &d) ==
                                  MOSHPIT_EPROTO ||
                              ref == full,
                          "kind %u without shm, reference length", kind);
                }
            }

    /* Compressed parts: the length follows the codec, exactly; state
     * chunks are never compressed. */
    static const uint32_t counts[] = {0, 1, 2, 63, 64, 65, 1000, 65536};
    for (uint8_t cd = 0; cd <= MOSHPIT_COMPRESS_INT4; cd++)
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            memset(&h, 0, sizeof h);
            h.kind = MP_PART_GATHER;
            h.codec = cd;
            h.count = counts[i];
            mp__wire_data_hdr_encode(&h, f);
            size_t len = MP_DATA_HDR_BYTES + mp__codec_bytes(cd, counts[i]) +
                         MP_DATA_TAG_BYTES;
            CHECK(mp__wire_data_hdr_decode(f, len, &d) == MOSHPIT_OK &&
                      d.codec == cd && d.count == counts[i],
                  "codec %u count %u", cd, counts[i]);
            CHECK(
                mp__wire_data_hdr_decode(f, len - 1, &d) == MOSHPIT_EPROTO &&
                    mp__wire_data_hdr_decode(f, len + 1, &d) == MOSHPIT_EPROTO,
                "codec %u count %u: length off by one accepted", cd, counts[i]);
            h.kind = MP_PART_STATE;
            mp__wire_data_hdr_encode(&h, f);
            CHECK((mp__wire_data_hdr_decode(f, len, &d) == MOSHPIT_OK) ==
                      (cd == 0),
                  "state chunk with codec %u", cd);
        }

    /* count = max + 1 with a length that would match it. */
    uint32_t c = MP_DATA_MAX_COUNT + 1;
    memcpy(f, want, sizeof want);
    f[4] = (uint8_t)c;
    f[5] = (uint8_t)(c >> 8);
    f[6] = (uint8_t)(c >> 16);
    f[7] = (uint8_t)(c >> 24);
    CHECK(mp__wire_data_hdr_decode(f, maxlen + 4, &d) == MOSHPIT_EPROTO,
          "count too big");
    f[4] = f[5] = f[6] = f[7] = 0xff;
    CHECK(mp__wire_data_hdr_decode(f, flen, &d) == MOSHPIT_EPROTO,
          "count 2^32-1");
    /* count = 0 is a valid (empty) part. */
    memset(f + 4, 0, 4);
    CHECK(mp__wire_data_hdr_decode(f, MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES,
                                   &d) == MOSHPIT_OK &&
              d.count == 0,
          "count 0");

    /* wsum: NaN, infinities, negative; -0.0 is fine. */
    static const double bad_w[] = {NAN,
                                   -NAN,
                                   INFINITY,
                                   -INFINITY,
                                   -1.0,
                                   -4.9e-324,
                                   MOSHPIT_WEIGHT_MAX * MP_GROUP_MAX * 1.0001,
                                   1.7976931348623157e308};
    memcpy(f, want, sizeof want);
    for (size_t i = 0; i < sizeof bad_w / sizeof bad_w[0]; i++) {
        hdr_fixed(&h);
        h.wsum = bad_w[i];
        mp__wire_data_hdr_encode(&h, f);
        CHECK(mp__wire_data_hdr_decode(f, flen, &d) == MOSHPIT_EPROTO,
              "wsum case %zu", i);
    }
    hdr_fixed(&h);
    h.wsum = -0.0;
    mp__wire_data_hdr_encode(&h, f);
    CHECK(mp__wire_data_hdr_decode(f, flen, &d) == MOSHPIT_OK, "wsum -0.0");

    /* A failed decode leaves the header zeroed. */
    f[0] = 9;
    d.count = 5;
    CHECK(mp__wire_data_hdr_decode(f, flen, &d) == MOSHPIT_EPROTO &&
              d.count == 0,
          "failed header decode clears h");
    CHECK(mp__wire_data_hdr_decode(f, flen, NULL) == MOSHPIT_EINVAL, "NULL h");
    free(f);
}

int main(void) {
    test_roundtrips();
    test_vectors();
    test_fields();
    test_values();
    test_counts();
    test_raw();
    test_encode_rejects();
    test_data_hdr();
    return test_summary("test_wire");
}
