/* SPDX-License-Identifier: MIT */
/*
 * test_swim_wire.c - tests of the SWIM message codec (wire/wire_swim.c):
 * round trips of every type with minimal and maximal values, golden byte
 * vectors from tests/vectors/swim_*.hex (so the format cannot drift), one
 * message checked byte by byte against docs/PROTOCOL.md, and rejection of
 * every malformed form: truncation at every offset, each field of each type
 * missing, repeated, or of every wrong msgpack type, unknown versions and
 * types, integers out of range, update entries of the wrong shape, ids of
 * the wrong size, addresses too long or with NUL bytes, absurd counts and
 * lengths, trailing bytes. Deterministic; prints every failed check.
 */
#include "wire/wire_swim.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifndef MP_VECTORS_DIR
#define MP_VECTORS_DIR "tests/vectors"
#endif

static uint8_t enc_buf[MP_SWIM_MSG_MAX];
static mp_swim_msg_t dm, dm2;

static void fill(uint8_t *p, size_t n, uint8_t start) {
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(start + i);
}

static void to_hex(const uint8_t *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int upd_equal(const mp_swim_update_t *a, const mp_swim_update_t *b) {
    return memcmp(a->id, b->id, MP_SWIM_ID_BYTES) == 0 &&
           a->state == b->state && a->inc == b->inc &&
           a->has_addr == b->has_addr &&
           (!a->has_addr || strcmp(a->addr, b->addr) == 0);
}

/* Equality of the fields that the message's type carries. */
static int msg_equal(const mp_swim_msg_t *a, const mp_swim_msg_t *b) {
    if (a->type != b->type || a->inc != b->inc || a->n_updates != b->n_updates)
        return 0;
    for (uint32_t i = 0; i < a->n_updates; i++)
        if (!upd_equal(&a->updates[i], &b->updates[i]))
            return 0;
    switch (a->type) {
    case MP_SWIM_MSG_PING:
        return a->seq == b->seq && strcmp(a->addr, b->addr) == 0;
    case MP_SWIM_MSG_ACK:
    case MP_SWIM_MSG_PING_REQ:
        return a->seq == b->seq && a->has_target == b->has_target &&
               (!a->has_target ||
                memcmp(a->target, b->target, MP_SWIM_ID_BYTES) == 0);
    case MP_SWIM_MSG_SYNC_REQ:
        return a->cursor == b->cursor && strcmp(a->addr, b->addr) == 0;
    case MP_SWIM_MSG_SYNC:
        if (a->cursor != b->cursor || a->next != b->next ||
            a->n_entries != b->n_entries)
            return 0;
        for (uint32_t i = 0; i < a->n_entries; i++)
            if (!upd_equal(&a->entries[i], &b->entries[i]))
                return 0;
        return 1;
    case MP_SWIM_MSG_GOSSIP:
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* fixed messages (also the golden vectors)                            */

static void upd(mp_swim_update_t *u, uint8_t idstart, uint8_t state,
                uint32_t inc, const char *addr) {
    memset(u, 0, sizeof *u);
    fill(u->id, MP_SWIM_ID_BYTES, idstart);
    u->state = state;
    u->inc = inc;
    if (addr != NULL) {
        u->has_addr = 1;
        strcpy(u->addr, addr);
    }
}

static void msg_ping(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_PING;
    m->seq = 0x0102030405060708u;
    m->inc = 3;
    strcpy(m->addr, "tcp://10.0.0.1:7400");
}

static void msg_ack(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_ACK;
    m->seq = 42;
    m->inc = 0;
    m->n_updates = 2;
    upd(&m->updates[0], 0x10, MP_SWIM_ALIVE, 7, "tcp://10.0.0.2:7400");
    upd(&m->updates[1], 0x30, MP_SWIM_SUSPECT, 300, NULL);
}

static void msg_ack_relayed(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_ACK;
    m->seq = 43;
    m->inc = 1;
    m->has_target = 1;
    fill(m->target, MP_SWIM_ID_BYTES, 0x50);
}

static void msg_ping_req(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_PING_REQ;
    m->seq = 44;
    m->inc = 70000;
    m->has_target = 1;
    fill(m->target, MP_SWIM_ID_BYTES, 0x50);
}

static void msg_sync_req(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_SYNC_REQ;
    m->cursor = 32;
    m->inc = 0;
    strcpy(m->addr, "tcp://[fe80::1]:7400");
}

static void msg_sync(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_SYNC;
    m->cursor = 32;
    m->next = 64;
    m->inc = 2;
    m->n_entries = 3;
    upd(&m->entries[0], 0x60, MP_SWIM_ALIVE, 0, "tcp://10.0.0.3:7400");
    upd(&m->entries[1], 0x80, MP_SWIM_DEAD, 5, "tcp://10.0.0.4:7400");
    upd(&m->entries[2], 0xa0, MP_SWIM_LEFT, 1, "");
    m->n_updates = 1;
    upd(&m->updates[0], 0xc0, MP_SWIM_SUSPECT, 1, NULL);
}

static void msg_gossip(mp_swim_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_GOSSIP;
    m->inc = 9;
    m->n_updates = 1;
    upd(&m->updates[0], 0xe0, MP_SWIM_LEFT, 9, NULL);
}

typedef void (*msg_fn)(mp_swim_msg_t *);

static const struct {
    const char *name;
    msg_fn make;
} fixed[] = {
    {"ping", msg_ping},
    {"ack", msg_ack},
    {"ack_relayed", msg_ack_relayed},
    {"ping_req", msg_ping_req},
    {"sync_req", msg_sync_req},
    {"sync", msg_sync},
    {"gossip", msg_gossip},
};
#define NFIXED (sizeof fixed / sizeof fixed[0])

/* ------------------------------------------------------------------ */
/* round trips                                                         */

static void roundtrip(const char *what, const mp_swim_msg_t *m) {
    size_t len = 0;
    moshpit_err_t e =
        mp__wire_swim_msg_encode(m, enc_buf, sizeof enc_buf, &len);
    CHECK(e == MOSHPIT_OK, "%s: encode -> %d", what, (int)e);
    if (e != MOSHPIT_OK)
        return;
    e = mp__wire_swim_msg_decode(enc_buf, len, &dm);
    CHECK(e == MOSHPIT_OK, "%s: decode -> %d", what, (int)e);
    CHECK(e != MOSHPIT_OK || msg_equal(m, &dm), "%s: round trip differs", what);
    int trunc_ok = 1, cap_ok = 1;
    for (size_t k = 0; k < len; k++)
        if (mp__wire_swim_msg_decode(enc_buf, k, &dm2) != MOSHPIT_EPROTO)
            trunc_ok = 0;
    CHECK(trunc_ok, "%s: a truncation decoded", what);
    static uint8_t small[MP_SWIM_MSG_MAX];
    for (size_t cap = 0; cap < len; cap++) {
        size_t l2 = 99;
        if (mp__wire_swim_msg_encode(m, small, cap, &l2) != MOSHPIT_ENOMEM ||
            l2 != 0)
            cap_ok = 0;
    }
    CHECK(cap_ok, "%s: a too small cap did not give ENOMEM", what);
    uint64_t t = 0;
    CHECK(mp__wire_swim_peek_type(enc_buf, len, &t) == MOSHPIT_OK &&
              t == (uint64_t)m->type,
          "%s: peek type %llu", what, (unsigned long long)t);
}

static void set_addr(char *dst, size_t len, char c) {
    memset(dst, c, len);
    dst[len] = '\0';
}

static void test_roundtrips(void) {
    static mp_swim_msg_t m;
    for (size_t i = 0; i < NFIXED; i++) {
        fixed[i].make(&m);
        roundtrip(fixed[i].name, &m);
    }
    /* Minimal: every type with zeros, no updates, empty addresses. */
    for (int t = MP_SWIM_MSG_PING; t <= MP_SWIM_MSG_GOSSIP; t++) {
        memset(&m, 0, sizeof m);
        m.type = (mp_swim_msg_type_t)t;
        m.has_target = t == MP_SWIM_MSG_PING_REQ;
        roundtrip("min", &m);
    }
    /* Maximal: every integer at its top, longest addresses, full lists. */
    for (int t = MP_SWIM_MSG_PING; t <= MP_SWIM_MSG_GOSSIP; t++) {
        memset(&m, 0, sizeof m);
        m.type = (mp_swim_msg_type_t)t;
        m.seq = UINT64_MAX;
        m.inc = UINT32_MAX;
        m.cursor = UINT32_MAX;
        m.next = UINT32_MAX;
        m.has_target = t == MP_SWIM_MSG_ACK || t == MP_SWIM_MSG_PING_REQ;
        memset(m.target, 0xff, MP_SWIM_ID_BYTES);
        set_addr(m.addr, MP_SWIM_ADDR_MAX - 1, 'a');
        /* A SYNC of 32 full entries and 32 full updates would exceed
         * 16 KiB; the core never builds one (page_bytes, budget). */
        uint32_t nu = t == MP_SWIM_MSG_SYNC ? 16 : MP_SWIM_PB_MAX;
        m.n_updates = nu;
        for (uint32_t i = 0; i < nu; i++) {
            upd(&m.updates[i], (uint8_t)i, (uint8_t)(i % 4), UINT32_MAX - i,
                NULL);
            m.updates[i].has_addr = 1;
            set_addr(m.updates[i].addr, MP_SWIM_ADDR_MAX - 1,
                     (char)('A' + i % 26));
        }
        if (t == MP_SWIM_MSG_SYNC) {
            m.n_entries = 32;
            for (uint32_t i = 0; i < 32; i++) {
                upd(&m.entries[i], (uint8_t)(i + 100), MP_SWIM_ALIVE, i, NULL);
                m.entries[i].has_addr = 1;
                set_addr(m.entries[i].addr, 200, 'z');
            }
        }
        roundtrip("max", &m);
    }
    /* Keys of other types are neither written nor read. */
    msg_ping(&m);
    m.cursor = 5;
    m.has_target = 0;
    size_t len;
    CHECK(mp__wire_swim_msg_encode(&m, enc_buf, sizeof enc_buf, &len) ==
                  MOSHPIT_OK &&
              mp__wire_swim_msg_decode(enc_buf, len, &dm) == MOSHPIT_OK &&
              dm.cursor == 0,
          "PING does not carry cur");
    /* The block encoder gives the same bytes as a GOSSIP message. */
    msg_ack(&m);
    m.type = MP_SWIM_MSG_GOSSIP;
    static uint8_t b2[MP_SWIM_MSG_MAX];
    size_t l2;
    CHECK(mp__wire_swim_msg_encode(&m, enc_buf, sizeof enc_buf, &len) ==
                  MOSHPIT_OK &&
              mp__wire_swim_block_encode(m.inc, m.updates, m.n_updates, b2,
                                         sizeof b2, &l2) == MOSHPIT_OK &&
              len == l2 && memcmp(enc_buf, b2, len) == 0,
          "block encoder differs from GOSSIP");
    /* Block overhead bound: a full block at the largest incarnation. */
    size_t sum = 0;
    m.n_updates = MP_SWIM_PB_MAX;
    m.inc = UINT32_MAX;
    for (uint32_t i = 0; i < MP_SWIM_PB_MAX; i++) {
        upd(&m.updates[i], (uint8_t)i, MP_SWIM_SUSPECT, 5, NULL);
        sum += mp__swim_update_bytes(&m.updates[i]);
    }
    CHECK(mp__wire_swim_block_encode(m.inc, m.updates, m.n_updates, b2,
                                     sizeof b2, &l2) == MOSHPIT_OK &&
              l2 <= sum + MP_SWIM_BLOCK_OVERHEAD &&
              l2 == sum + MP_SWIM_BLOCK_OVERHEAD,
          "block overhead %zu", l2 - sum);
}

/* ------------------------------------------------------------------ */
/* golden vectors                                                      */

static void test_vectors(void) {
    static uint8_t want[MP_SWIM_MSG_MAX];
    static char hex[2 * MP_SWIM_MSG_MAX + 1];
    static mp_swim_msg_t m;
    char path[512];
    for (size_t i = 0; i < NFIXED; i++) {
        snprintf(path, sizeof path, "%s/swim_%s.hex", MP_VECTORS_DIR,
                 fixed[i].name);
        long n = test_read_hex(path, want, sizeof want);
        fixed[i].make(&m);
        size_t len = 0;
        CHECK(mp__wire_swim_msg_encode(&m, enc_buf, sizeof enc_buf, &len) ==
                  MOSHPIT_OK,
              "%s: encode", fixed[i].name);
        to_hex(enc_buf, len, hex);
        CHECK(n > 0 && (size_t)n == len && memcmp(want, enc_buf, len) == 0,
              "%s: encoding differs from %s (or it is missing), got %s",
              fixed[i].name, path, hex);
        if (n <= 0)
            continue;
        CHECK(mp__wire_swim_msg_decode(want, (size_t)n, &dm) == MOSHPIT_OK &&
                  msg_equal(&m, &dm),
              "%s: decoding %s does not give the message", fixed[i].name, path);
    }
    /* The PING, written out by hand from docs/PROTOCOL.md. */
    static const uint8_t ping[] =
        {
            0x85,            /* map, 5 */
            0xa1, 'v', 0x01, /* v 1 */
            0xa1, 't', 0x10, /* t 16 */
            0xa3, 's', 'e',  'q', 0xcf, 1,   2,   3,   4,   5,   6,
            7,    8,                    /* seq */
            0xa3, 'i', 'n',  'c', 0x03, /* inc 3 */
            0xa1, 'a', 0xb3, 't', 'c',  'p', ':', '/', '/', '1', '0',
            '.',  '0', '.',  '0', '.',  '1', ':', '7', '4', '0', '0', /* a */
        };
    msg_ping(&m);
    size_t len = 0;
    CHECK(mp__wire_swim_msg_encode(&m, enc_buf, sizeof enc_buf, &len) ==
                  MOSHPIT_OK &&
              len == sizeof ping && memcmp(enc_buf, ping, len) == 0,
          "PING bytes differ from the hand-written ones");
}

/* ------------------------------------------------------------------ */
/* hand-built messages                                                 */

typedef struct bb {
    uint8_t b[2 * MP_SWIM_MSG_MAX];
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
    A_BIGUINT = 1 << 12 /* above 2^32-1 */
};

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
    {A_BIGUINT, {0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, 9},
};
#define NSAMPLES (sizeof samples / sizeof samples[0])

typedef struct field {
    const char *key;
    uint8_t val[4096];
    size_t n;
    unsigned accept;
} field_t;

typedef struct spec {
    mp_swim_msg_t expect;
    field_t f[8];
    size_t nf;
} spec_t;

static bb_t fbb;
static msgpack_packer fpk;

static void add_begin(void) {
    fbb.n = 0;
    msgpack_packer_init(&fpk, &fbb, bb_write);
}

static void add_end(spec_t *s, const char *key, unsigned accept) {
    field_t *f = &s->f[s->nf++];
    f->key = key;
    if (fbb.n > sizeof f->val)
        abort();
    memcpy(f->val, fbb.b, fbb.n);
    f->n = fbb.n;
    f->accept = accept;
}

static void add_uint(spec_t *s, const char *key, uint64_t v, unsigned acc) {
    add_begin();
    msgpack_pack_uint64(&fpk, v);
    add_end(s, key, acc);
}

static void add_str(spec_t *s, const char *key, const char *str) {
    add_begin();
    msgpack_pack_str(&fpk, strlen(str));
    msgpack_pack_str_body(&fpk, str, strlen(str));
    add_end(s, key, A_STR);
}

static void add_id(spec_t *s, const char *key, const uint8_t *id) {
    add_begin();
    msgpack_pack_bin(&fpk, 32);
    msgpack_pack_bin_body(&fpk, id, 32);
    add_end(s, key, A_BIN32);
}

static void pack_updates(const mp_swim_update_t *u, uint32_t n) {
    msgpack_pack_array(&fpk, n);
    for (uint32_t i = 0; i < n; i++) {
        msgpack_pack_array(&fpk, u[i].has_addr ? 4 : 3);
        msgpack_pack_bin(&fpk, 32);
        msgpack_pack_bin_body(&fpk, u[i].id, 32);
        msgpack_pack_uint8(&fpk, u[i].state);
        msgpack_pack_uint32(&fpk, u[i].inc);
        if (u[i].has_addr) {
            msgpack_pack_str(&fpk, strlen(u[i].addr));
            msgpack_pack_str_body(&fpk, u[i].addr, strlen(u[i].addr));
        }
    }
}

/* A valid message of each fixed kind, built without the encoder. */
static void spec_for(msg_fn make, spec_t *s) {
    memset(s, 0, sizeof *s);
    make(&s->expect);
    const mp_swim_msg_t *m = &s->expect;
    const unsigned u32 = A_UINT, u64 = A_UINT | A_BIGUINT;
    add_uint(s, "v", MP_SWIM_WIRE_VERSION, u32);
    add_uint(s, "t", (uint64_t)m->type, u32);
    switch (m->type) {
    case MP_SWIM_MSG_PING:
        add_uint(s, "seq", m->seq, u64);
        add_uint(s, "inc", m->inc, u32);
        add_str(s, "a", m->addr);
        break;
    case MP_SWIM_MSG_ACK:
        add_uint(s, "seq", m->seq, u64);
        add_uint(s, "inc", m->inc, u32);
        if (m->has_target)
            add_id(s, "tgt", m->target);
        break;
    case MP_SWIM_MSG_PING_REQ:
        add_uint(s, "seq", m->seq, u64);
        add_uint(s, "inc", m->inc, u32);
        add_id(s, "tgt", m->target);
        break;
    case MP_SWIM_MSG_SYNC_REQ:
        add_uint(s, "cur", m->cursor, u32);
        add_uint(s, "inc", m->inc, u32);
        add_str(s, "a", m->addr);
        break;
    case MP_SWIM_MSG_SYNC:
        add_uint(s, "cur", m->cursor, u32);
        add_uint(s, "nx", m->next, u32);
        add_uint(s, "inc", m->inc, u32);
        add_begin();
        pack_updates(m->entries, m->n_entries);
        add_end(s, "m", A_ARR);
        break;
    case MP_SWIM_MSG_GOSSIP:
        add_uint(s, "inc", m->inc, u32);
        break;
    }
    if (m->n_updates > 0 || m->type == MP_SWIM_MSG_GOSSIP) {
        add_begin();
        pack_updates(m->updates, m->n_updates);
        add_end(s, "g", A_ARR);
    }
}

#define NONE ((size_t)-1)

/* Builds the spec in reverse key order, without field `skip`, with field
 * `repl` replaced by rv, plus an extra raw key/value pair. */
static void spec_build(const spec_t *s, bb_t *out, size_t skip, size_t repl,
                       const uint8_t *rv, size_t rn, const uint8_t *extra,
                       size_t extra_n) {
    msgpack_packer pk;
    out->n = 0;
    msgpack_packer_init(&pk, out, bb_write);
    msgpack_pack_map(&pk, s->nf - (skip < s->nf) + (extra != NULL));
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

static bb_t bb;

static moshpit_err_t dec(const bb_t *b) {
    return mp__wire_swim_msg_decode(b->b, b->n, &dm);
}

static void test_fields(void) {
    static spec_t s;
    for (size_t i = 0; i < NFIXED; i++) {
        const char *name = fixed[i].name;
        spec_for(fixed[i].make, &s);
        spec_build(&s, &bb, NONE, NONE, NULL, 0, NULL, 0);
        CHECK(dec(&bb) == MOSHPIT_OK && msg_equal(&s.expect, &dm),
              "%s: hand-built message in reverse key order", name);
        static const uint8_t unknown[] = {0xa2, 'z', 'z',  0x92, 0x81,
                                          0xa1, 'a', 0xc0, 0xc4, 0x00};
        spec_build(&s, &bb, NONE, NONE, NULL, 0, unknown, sizeof unknown);
        CHECK(dec(&bb) == MOSHPIT_OK && msg_equal(&s.expect, &dm),
              "%s: unknown key not ignored", name);
        for (size_t f = 0; f < s.nf; f++) {
            const char *key = s.f[f].key;
            spec_build(&s, &bb, f, NONE, NULL, 0, NULL, 0);
            moshpit_err_t e = dec(&bb);
            /* g is optional except in GOSSIP; ACK's tgt is optional. */
            int optional =
                (strcmp(key, "g") == 0 &&
                 s.expect.type != MP_SWIM_MSG_GOSSIP) ||
                (strcmp(key, "tgt") == 0 && s.expect.type == MP_SWIM_MSG_ACK);
            if (optional)
                CHECK(e == MOSHPIT_OK, "%s: optional %s", name, key);
            else
                CHECK(e == MOSHPIT_EPROTO, "%s: missing %s -> %d", name, key,
                      (int)e);
            for (size_t k = 0; k < NSAMPLES; k++) {
                if (samples[k].kind & s.f[f].accept)
                    continue;
                spec_build(&s, &bb, NONE, f, samples[k].bytes, samples[k].n,
                           NULL, 0);
                e = dec(&bb);
                CHECK(e == MOSHPIT_EPROTO, "%s: %s as sample %zu -> %d", name,
                      key, k, (int)e);
            }
            uint8_t dup[4200];
            size_t kl = strlen(key);
            dup[0] = (uint8_t)(0xa0 | kl);
            memcpy(dup + 1, key, kl);
            memcpy(dup + 1 + kl, s.f[f].val, s.f[f].n);
            spec_build(&s, &bb, NONE, NONE, NULL, 0, dup, 1 + kl + s.f[f].n);
            CHECK(dec(&bb) == MOSHPIT_EPROTO, "%s: repeated %s", name, key);
        }
        spec_build(&s, &bb, NONE, NONE, NULL, 0, NULL, 0);
        size_t n = bb.n;
        bb_byte(&bb, 0xc0);
        CHECK(dec(&bb) == MOSHPIT_EPROTO, "%s: trailing byte", name);
        bb.n = n;
        bb_raw(&bb, bb.b, n);
        CHECK(dec(&bb) == MOSHPIT_EPROTO, "%s: two messages", name);
    }
}

static moshpit_err_t dec_with(msg_fn make, const char *key, const uint8_t *v,
                              size_t n) {
    static spec_t s;
    spec_for(make, &s);
    for (size_t f = 0; f < s.nf; f++) {
        if (strcmp(s.f[f].key, key) == 0) {
            spec_build(&s, &bb, NONE, f, v, n, NULL, 0);
            return dec(&bb);
        }
    }
    abort(); /* test bug */
}

/* One update entry with chosen pieces: id of idlen bytes, state, inc as raw
 * bytes, address as str of alen bytes (alen < 0: no address; nul: a NUL
 * inside), and `extra` more nil elements. */
static void entry(bb_t *b, size_t idlen, const uint8_t *st, size_t stn,
                  const uint8_t *inc, size_t incn, int alen, int nul,
                  int extra) {
    int elems = 3 + (alen >= 0) + extra;
    bb_byte(b, (uint8_t)(0x90 | elems));
    bb_byte(b, 0xc4);
    bb_byte(b, (uint8_t)idlen);
    for (size_t i = 0; i < idlen; i++)
        bb_byte(b, (uint8_t)i);
    bb_raw(b, st, stn);
    bb_raw(b, inc, incn);
    if (alen >= 0) {
        if (alen < 32) {
            bb_byte(b, (uint8_t)(0xa0 | alen));
        } else if (alen < 256) {
            bb_byte(b, 0xd9);
            bb_byte(b, (uint8_t)alen);
        } else {
            bb_byte(b, 0xda);
            bb_byte(b, (uint8_t)(alen >> 8));
            bb_byte(b, (uint8_t)alen);
        }
        for (int i = 0; i < alen; i++)
            bb_byte(b, nul && i == alen / 2 ? 0 : 'x');
    }
    for (int i = 0; i < extra; i++)
        bb_byte(b, 0xc0);
}

static void test_values(void) {
    static const uint8_t u0[] = {0x00}, u2[] = {0x02}, u15[] = {0x0f},
                         u22[] = {0x16}, u1[] = {0x01}, u9[] = {0x09},
                         u17[] = {0x11},
                         umax32[] = {0xce, 0xff, 0xff, 0xff, 0xff},
                         u2p32[] = {0xcf, 0, 0, 0, 1, 0, 0, 0, 0},
                         umax64[] = {0xcf, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff},
                         i8_5[] = {0xd0, 0x05};
    CHECK(dec_with(msg_gossip, "v", u0, 1) == MOSHPIT_EPROTO, "version 0");
    CHECK(dec_with(msg_gossip, "v", u2, 1) == MOSHPIT_EPROTO, "version 2");
    CHECK(dec_with(msg_gossip, "v", umax64, 9) == MOSHPIT_EPROTO,
          "version max");
    CHECK(dec_with(msg_gossip, "t", u15, 1) == MOSHPIT_EPROTO, "type 15");
    CHECK(dec_with(msg_gossip, "t", u22, 1) == MOSHPIT_EPROTO, "type 22");
    CHECK(dec_with(msg_gossip, "t", u1, 1) == MOSHPIT_EPROTO, "type 1");
    CHECK(dec_with(msg_gossip, "t", u9, 1) == MOSHPIT_EPROTO, "type 9");
    /* A PING's keys read as an ACK are complete (seq, inc; "a" is another
     * type's key and ignored), so it decodes as an ACK. */
    CHECK(dec_with(msg_ping, "t", u17, 1) == MOSHPIT_OK &&
              dm.type == MP_SWIM_MSG_ACK && dm.addr[0] == '\0',
          "PING retyped as ACK");
    CHECK(dec_with(msg_gossip, "inc", umax32, 5) == MOSHPIT_OK &&
              dm.inc == UINT32_MAX,
          "inc 2^32-1");
    CHECK(dec_with(msg_gossip, "inc", u2p32, 9) == MOSHPIT_EPROTO, "inc 2^32");
    CHECK(dec_with(msg_gossip, "inc", i8_5, 2) == MOSHPIT_OK && dm.inc == 5,
          "int8 5 as inc");
    CHECK(dec_with(msg_sync, "cur", u2p32, 9) == MOSHPIT_EPROTO, "cur 2^32");
    CHECK(dec_with(msg_sync, "nx", u2p32, 9) == MOSHPIT_EPROTO, "nx 2^32");
    CHECK(dec_with(msg_ping, "seq", umax64, 9) == MOSHPIT_OK &&
              dm.seq == UINT64_MAX,
          "seq 2^64-1");

    /* Addresses: 255 bytes fine, 256 not, NUL inside not. */
    bb_t s;
    for (int alen = 254; alen <= 257; alen++) {
        for (int nul = 0; nul <= 1; nul++) {
            s.n = 0;
            if (alen < 256) {
                bb_byte(&s, 0xd9);
                bb_byte(&s, (uint8_t)alen);
            } else {
                bb_byte(&s, 0xda);
                bb_byte(&s, (uint8_t)(alen >> 8));
                bb_byte(&s, (uint8_t)alen);
            }
            for (int i = 0; i < alen; i++)
                bb_byte(&s, nul && i == 7 ? 0 : 'q');
            moshpit_err_t e = dec_with(msg_ping, "a", s.b, s.n);
            int ok = alen <= 255 && !nul;
            CHECK(ok ? e == MOSHPIT_OK && strlen(dm.addr) == (size_t)alen
                     : e == MOSHPIT_EPROTO,
                  "PING address of %d bytes (nul %d) -> %d", alen, nul, (int)e);
            e = dec_with(msg_sync_req, "a", s.b, s.n);
            CHECK(ok ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
                  "SYNC_REQ address of %d (nul %d)", alen, nul);
        }
    }
    static const uint8_t id31[] = {0xc4, 31}, id33[] = {0xc4, 33};
    static uint8_t idbuf[40];
    memcpy(idbuf, id31, 2);
    CHECK(dec_with(msg_ping_req, "tgt", idbuf, 33) == MOSHPIT_EPROTO,
          "tgt of 31 bytes");
    memcpy(idbuf, id33, 2);
    CHECK(dec_with(msg_ping_req, "tgt", idbuf, 35) == MOSHPIT_EPROTO,
          "tgt of 33 bytes");

    /* Update entries of every wrong shape, in g and in m. */
    static const uint8_t st0[] = {0x00}, st3[] = {0x03}, st4[] = {0x04},
                         st_big[] = {0xcc, 0xff}, st_str[] = {0xa1, '0'},
                         inc0[] = {0x00}, inc_neg[] = {0xff},
                         inc_f[] = {0xca, 0, 0, 0, 0};
    struct {
        size_t idlen;
        const uint8_t *st;
        size_t stn;
        const uint8_t *inc;
        size_t incn;
        int alen, nul, extra, ok;
        const char *what;
    } ents[] = {
        {32, st0, 1, inc0, 1, -1, 0, 0, 1, "minimal"},
        {32, st3, 1, umax32, 5, 20, 0, 0, 1, "left, max inc, addr"},
        {32, st0, 1, inc0, 1, 255, 0, 0, 1, "addr 255"},
        {32, st0, 1, inc0, 1, 0, 0, 0, 1, "empty addr"},
        {32, st0, 1, inc0, 1, 256, 0, 0, 0, "addr 256"},
        {32, st0, 1, inc0, 1, 10, 1, 0, 0, "addr with NUL"},
        {31, st0, 1, inc0, 1, -1, 0, 0, 0, "id 31"},
        {33, st0, 1, inc0, 1, -1, 0, 0, 0, "id 33"},
        {0, st0, 1, inc0, 1, -1, 0, 0, 0, "id 0"},
        {32, st4, 1, inc0, 1, -1, 0, 0, 0, "state 4"},
        {32, st_big, 2, inc0, 1, -1, 0, 0, 0, "state 255"},
        {32, st_str, 2, inc0, 1, -1, 0, 0, 0, "state as str"},
        {32, st0, 1, u2p32, 9, -1, 0, 0, 0, "inc 2^32"},
        {32, st0, 1, inc_neg, 1, -1, 0, 0, 0, "inc -1"},
        {32, st0, 1, inc_f, 5, -1, 0, 0, 0, "inc float"},
        {32, st0, 1, inc0, 1, 5, 0, 1, 0, "5 elements"},
    };
    for (size_t i = 0; i < sizeof ents / sizeof ents[0]; i++) {
        for (int where = 0; where < 2; where++) {
            s.n = 0;
            bb_byte(&s, 0x91);
            entry(&s, ents[i].idlen, ents[i].st, ents[i].stn, ents[i].inc,
                  ents[i].incn, ents[i].alen, ents[i].nul, ents[i].extra);
            moshpit_err_t e = where == 0 ? dec_with(msg_gossip, "g", s.b, s.n)
                                         : dec_with(msg_sync, "m", s.b, s.n);
            CHECK(ents[i].ok ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
                  "entry '%s' in %s -> %d", ents[i].what, where ? "m" : "g",
                  (int)e);
        }
    }
    /* Entries of two elements, not arrays, nested deeper. */
    static const uint8_t two[] = {0x91, 0x92, 0xc4, 0x00, 0x00},
                         notarr[] = {0x91, 0xc0},
                         deep[] = {0x91, 0x91, 0x93, 0xc0, 0xc0, 0xc0};
    CHECK(dec_with(msg_gossip, "g", two, sizeof two) == MOSHPIT_EPROTO,
          "entry of 2");
    CHECK(dec_with(msg_gossip, "g", notarr, sizeof notarr) == MOSHPIT_EPROTO,
          "entry not an array");
    CHECK(dec_with(msg_gossip, "g", deep, sizeof deep) == MOSHPIT_EPROTO,
          "entry nested");
}

/* Counts: the most entries allowed, one more, and absurd claims. */
static void test_counts(void) {
    static const uint8_t st0[] = {0x00}, inc0[] = {0x00};
    bb_t s;
    for (uint32_t n = MP_SWIM_PB_MAX - 1; n <= MP_SWIM_PB_MAX + 1; n++) {
        s.n = 0;
        bb_byte(&s, 0xdc);
        bb_byte(&s, (uint8_t)(n >> 8));
        bb_byte(&s, (uint8_t)n);
        for (uint32_t i = 0; i < n; i++)
            entry(&s, 32, st0, 1, inc0, 1, -1, 0, 0);
        moshpit_err_t e = dec_with(msg_gossip, "g", s.b, s.n);
        CHECK(n <= MP_SWIM_PB_MAX ? e == MOSHPIT_OK && dm.n_updates == n
                                  : e == MOSHPIT_EPROTO,
              "g of %u -> %d", n, (int)e);
        e = dec_with(msg_sync, "m", s.b, s.n);
        CHECK(n <= MP_SWIM_PAGE_MAX ? e == MOSHPIT_OK && dm.n_entries == n
                                    : e == MOSHPIT_EPROTO,
              "m of %u -> %d", n, (int)e);
    }
    /* Headers claiming far more than the input holds. */
    static const uint8_t arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x90},
                         arr16[] = {0xdc, 0xff, 0xff, 0x90},
                         str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
                         bin32[] = {0xc6, 0xff, 0xff, 0xff, 0xff, 0},
                         map32[] = {0xdf, 0x7f, 0xff, 0xff, 0xff};
    CHECK(dec_with(msg_gossip, "g", arr32, sizeof arr32) == MOSHPIT_EPROTO,
          "array32 of 2^32-1");
    CHECK(dec_with(msg_gossip, "g", arr16, sizeof arr16) == MOSHPIT_EPROTO,
          "array16 of 65535");
    CHECK(dec_with(msg_ping, "a", str32, sizeof str32) == MOSHPIT_EPROTO,
          "str32 of 4 GB");
    CHECK(dec_with(msg_ping_req, "tgt", bin32, sizeof bin32) == MOSHPIT_EPROTO,
          "bin32 of 4 GB");
    static spec_t sp;
    uint8_t extra[3 + sizeof map32] = {0xa2, 'z', 'z'};
    memcpy(extra + 3, map32, sizeof map32);
    spec_for(msg_ping, &sp);
    spec_build(&sp, &bb, NONE, NONE, NULL, 0, extra, sizeof extra);
    CHECK(dec(&bb) == MOSHPIT_EPROTO, "unknown key holding a map of 2^31");
}

static void test_raw(void) {
    static const uint8_t gossip[] = {0x84, 0xa1, 'v',  0x01, 0xa1,
                                     't',  0x15, 0xa3, 'i',  'n',
                                     'c',  0x00, 0xa1, 'g',  0x90};
    CHECK(mp__wire_swim_msg_decode(gossip, sizeof gossip, &dm) == MOSHPIT_OK &&
              dm.type == MP_SWIM_MSG_GOSSIP && dm.n_updates == 0,
          "minimal GOSSIP");
    CHECK(mp__wire_swim_msg_decode(gossip, 0, &dm) == MOSHPIT_EPROTO, "empty");
    CHECK(mp__wire_swim_msg_decode(NULL, 0, &dm) == MOSHPIT_EPROTO,
          "NULL empty");
    CHECK(mp__wire_swim_msg_decode(gossip, sizeof gossip, NULL) ==
              MOSHPIT_EINVAL,
          "NULL msg");
    /* A wire.h control message (BYE) is not a SWIM message, but its type
     * can be peeked. */
    static const uint8_t bye[] = {0x82, 0xa1, 'v', 0x01, 0xa1, 't', 0x08};
    uint64_t t = 0;
    CHECK(mp__wire_swim_msg_decode(bye, sizeof bye, &dm) == MOSHPIT_EPROTO,
          "BYE is not SWIM");
    CHECK(mp__wire_swim_peek_type(bye, sizeof bye, &t) == MOSHPIT_OK && t == 8,
          "peek BYE");
    static const uint8_t not_map[] = {0x92, 0x01, 0x02},
                         int_key[] = {0x81, 0x01, 0x02},
                         no_t[] = {0x81, 0xa1, 'v', 0x01};
    CHECK(mp__wire_swim_peek_type(not_map, 3, &t) == MOSHPIT_EPROTO && t == 0,
          "peek non-map");
    CHECK(mp__wire_swim_peek_type(int_key, 3, &t) == MOSHPIT_EPROTO,
          "peek integer key");
    CHECK(mp__wire_swim_peek_type(no_t, 4, &t) == MOSHPIT_EPROTO, "peek no t");
    CHECK(mp__wire_swim_peek_type(gossip, 5, &t) == MOSHPIT_EPROTO,
          "peek truncated");
    CHECK(mp__wire_swim_peek_type(gossip, sizeof gossip, NULL) ==
              MOSHPIT_EINVAL,
          "peek NULL out");
    /* Nesting beyond 16 levels in an unknown key. */
    bb.n = 0;
    bb_raw(&bb, "\x85\xa1v\x01\xa1t\x15\xa3inc\x00\xa1g\x90\xa1z", 17);
    for (int i = 0; i < 20; i++)
        bb_byte(&bb, 0x91);
    bb_byte(&bb, 0xc0);
    CHECK(dec(&bb) == MOSHPIT_EPROTO, "nesting 21");
    /* Size limit: exactly MP_SWIM_MSG_MAX is fine, one more byte is not. */
    for (size_t total = MP_SWIM_MSG_MAX - 1; total <= MP_SWIM_MSG_MAX + 1;
         total++) {
        bb.n = 0;
        bb_raw(&bb, "\x85\xa1v\x01\xa1t\x15\xa3inc\x00\xa1g\x90\xa1z\xc5", 18);
        size_t body = total - 20;
        bb_byte(&bb, (uint8_t)(body >> 8));
        bb_byte(&bb, (uint8_t)body);
        while (bb.n < total)
            bb_byte(&bb, 0);
        moshpit_err_t e = dec(&bb);
        CHECK(total <= MP_SWIM_MSG_MAX ? e == MOSHPIT_OK : e == MOSHPIT_EPROTO,
              "message of %zu bytes -> %d", total, (int)e);
    }
    /* A failed decode leaves the message zeroed. */
    msg_sync(&dm);
    CHECK(mp__wire_swim_msg_decode(bye, sizeof bye, &dm) == MOSHPIT_EPROTO &&
              dm.type == 0 && dm.n_entries == 0 && dm.cursor == 0,
          "failed decode clears msg");
}

/* A full page and a full piggyback with the longest addresses. */
static void msg_too_big(mp_swim_msg_t *m) {
    msg_sync(m);
    m->n_entries = MP_SWIM_PAGE_MAX;
    m->n_updates = MP_SWIM_PB_MAX;
    for (uint32_t i = 0; i < MP_SWIM_PB_MAX; i++) {
        upd(&m->entries[i], 1, 0, 0, NULL);
        upd(&m->updates[i], 2, 0, 0, NULL);
        m->entries[i].has_addr = m->updates[i].has_addr = 1;
        set_addr(m->entries[i].addr, 255, 'e');
        set_addr(m->updates[i].addr, 255, 'u');
    }
}

static void test_encode_rejects(void) {
    static mp_swim_msg_t m;
    size_t len = 7;
    uint8_t *b = enc_buf;
    size_t cap = sizeof enc_buf;
#define REJECT(setup, what)                                                    \
    do {                                                                       \
        setup;                                                                 \
        moshpit_err_t e_ = mp__wire_swim_msg_encode(&m, b, cap, &len);         \
        CHECK(e_ == MOSHPIT_EINVAL && len == 0, "encode %s -> %d", what,       \
              (int)e_);                                                        \
    } while (0)
    REJECT((msg_gossip(&m), m.type = (mp_swim_msg_type_t)15), "type 15");
    REJECT((msg_gossip(&m), m.type = (mp_swim_msg_type_t)22), "type 22");
    REJECT((msg_gossip(&m), m.type = (mp_swim_msg_type_t)8), "type 8");
    REJECT((msg_gossip(&m), m.n_updates = MP_SWIM_PB_MAX + 1), "g max+1");
    REJECT((msg_sync(&m), m.n_entries = MP_SWIM_PAGE_MAX + 1), "m max+1");
    REJECT((msg_gossip(&m), m.updates[0].state = 4), "state 4");
    REJECT((msg_gossip(&m), m.updates[0].has_addr = 2), "has_addr 2");
    REJECT((msg_ack(&m), memset(m.updates[0].addr, 'a', MP_SWIM_ADDR_MAX)),
           "unterminated update addr");
    REJECT((msg_sync(&m), m.entries[1].state = 9), "entry state 9");
    REJECT((msg_ping(&m), memset(m.addr, 'a', MP_SWIM_ADDR_MAX)),
           "unterminated ping addr");
    REJECT((msg_sync_req(&m), memset(m.addr, 'a', MP_SWIM_ADDR_MAX)),
           "unterminated sync_req addr");
    REJECT((msg_ping_req(&m), m.has_target = 0), "PING_REQ without target");
    REJECT((msg_ack(&m), m.has_target = 2), "has_target 2");
    /* Too big for MP_SWIM_MSG_MAX: full page and full piggyback with the
     * longest addresses. */
    static uint8_t big[2 * MP_SWIM_MSG_MAX];
    b = big;
    cap = sizeof big;
    REJECT(msg_too_big(&m), "message over 16 KiB");
    cap = sizeof enc_buf;
    b = NULL;
    REJECT(msg_gossip(&m), "NULL buffer with cap");
    b = enc_buf;
#undef REJECT
    msg_gossip(&m);
    CHECK(mp__wire_swim_msg_encode(NULL, b, cap, &len) == MOSHPIT_EINVAL,
          "NULL msg");
    CHECK(mp__wire_swim_msg_encode(&m, b, cap, NULL) == MOSHPIT_EINVAL,
          "NULL len");
    CHECK(mp__wire_swim_msg_encode(&m, NULL, 0, &len) == MOSHPIT_ENOMEM,
          "NULL buffer, cap 0");
    CHECK(mp__wire_swim_block_encode(0, NULL, 1, b, cap, &len) ==
              MOSHPIT_EINVAL,
          "block NULL updates");
    CHECK(mp__wire_swim_block_encode(0, m.updates, MP_SWIM_PB_MAX + 1, b, cap,
                                     &len) == MOSHPIT_EINVAL,
          "block too many");
    CHECK(mp__wire_swim_block_encode(0, m.updates, 1, b, 3, &len) ==
              MOSHPIT_ENOMEM,
          "block small cap");
}

int main(void) {
    test_roundtrips();
    test_vectors();
    test_fields();
    test_values();
    test_counts();
    test_raw();
    test_encode_rejects();
    return test_summary("test_swim_wire");
}
