/* SPDX-License-Identifier: MIT */
/*
 * wire_swim.c - encoding and decoding of the SWIM membership messages
 * (PING, ACK, PING_REQ, SYNC_REQ, SYNC, GOSSIP: one msgpack map each) and of
 * the update lists they carry. Encoding validates the struct and packs it
 * with msgpack-c into the caller's buffer in a fixed key order with the
 * smallest integer forms, so equal messages give equal bytes. Decoding
 * first runs wire.c's bounded structural scan (counts backed by bytes,
 * nesting limited, exactly one object), then unpacks and checks every
 * field against docs/PROTOCOL.md. Pure functions, no globals.
 */
#include "wire/wire_swim.h"

#include <msgpack.h>
#include <string.h>

#include "wire/pack.h"
#include "wire/wire.h"

enum { K_V, K_T, K_SEQ, K_INC, K_A, K_TGT, K_CUR, K_NX, K_M, K_G, K_COUNT };

static const char *const key_names[K_COUNT] = {
    [K_V] = "v", [K_T] = "t",     [K_SEQ] = "seq", [K_INC] = "inc",
    [K_A] = "a", [K_TGT] = "tgt", [K_CUR] = "cur", [K_NX] = "nx",
    [K_M] = "m", [K_G] = "g",
};

/* ------------------------------------------------------------------ */
/* encoding                                                            */

/* Keys by this codec's enum (pack.h has the msgpack-c side). */
static void put_key(msgpack_packer *pk, int k) {
    mp__pack_str(pk, key_names[k]);
}

static void put_u64(msgpack_packer *pk, int k, uint64_t v) {
    mp__pack_u64(pk, key_names[k], v);
}

static void put_id(msgpack_packer *pk, const uint8_t *id) {
    mp__pack_bin(pk, id, MP_SWIM_ID_BYTES);
}

static int str_ok(const char *s) {
    return memchr(s, '\0', MP_SWIM_ADDR_MAX) != NULL;
}

static int updates_ok(const mp_swim_update_t *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (u[i].state > MP_SWIM_LEFT || u[i].has_addr > 1)
            return 0;
        if (u[i].has_addr && !str_ok(u[i].addr))
            return 0;
    }
    return 1;
}

static void put_updates(msgpack_packer *pk, const mp_swim_update_t *u,
                        size_t n) {
    msgpack_pack_array(pk, n);
    for (size_t i = 0; i < n; i++) {
        msgpack_pack_array(pk, u[i].has_addr ? 4 : 3);
        put_id(pk, u[i].id);
        msgpack_pack_uint64(pk, u[i].state);
        msgpack_pack_uint64(pk, u[i].inc);
        if (u[i].has_addr)
            mp__pack_str(pk, u[i].addr);
    }
}

static int type_ok(uint64_t t) {
    return t >= MP_SWIM_MSG_PING && t <= MP_SWIM_MSG_GOSSIP;
}

static moshpit_err_t check_msg(const mp_swim_msg_t *m) {
    if (!type_ok((uint64_t)m->type) || m->has_target > 1 ||
        m->n_updates > MP_SWIM_PB_MAX || m->n_entries > MP_SWIM_PAGE_MAX)
        return MOSHPIT_EINVAL;
    if (!updates_ok(m->updates, m->n_updates))
        return MOSHPIT_EINVAL;
    switch (m->type) {
    case MP_SWIM_MSG_PING:
    case MP_SWIM_MSG_SYNC_REQ:
        return str_ok(m->addr) ? MOSHPIT_OK : MOSHPIT_EINVAL;
    case MP_SWIM_MSG_PING_REQ:
        return m->has_target ? MOSHPIT_OK : MOSHPIT_EINVAL;
    case MP_SWIM_MSG_SYNC:
        return updates_ok(m->entries, m->n_entries) ? MOSHPIT_OK
                                                    : MOSHPIT_EINVAL;
    default:
        return MOSHPIT_OK;
    }
}

static void pack_msg(msgpack_packer *pk, const mp_swim_msg_t *m) {
    int g = m->n_updates > 0 || m->type == MP_SWIM_MSG_GOSSIP;
    size_t entries = 3 + (size_t)g; /* v, t, inc (+ g) */
    switch (m->type) {
    case MP_SWIM_MSG_PING:
    case MP_SWIM_MSG_PING_REQ:
    case MP_SWIM_MSG_SYNC_REQ:
        entries += 2; /* seq + a / seq + tgt / cur + a */
        break;
    case MP_SWIM_MSG_ACK:
        entries += 1 + (size_t)m->has_target;
        break;
    case MP_SWIM_MSG_SYNC:
        entries += 3; /* cur, nx, m */
        break;
    default:
        break;
    }
    msgpack_pack_map(pk, entries);
    put_u64(pk, K_V, MP_SWIM_WIRE_VERSION);
    put_u64(pk, K_T, (uint64_t)m->type);
    switch (m->type) {
    case MP_SWIM_MSG_PING:
        put_u64(pk, K_SEQ, m->seq);
        put_u64(pk, K_INC, m->inc);
        put_key(pk, K_A);
        mp__pack_str(pk, m->addr);
        break;
    case MP_SWIM_MSG_ACK:
        put_u64(pk, K_SEQ, m->seq);
        put_u64(pk, K_INC, m->inc);
        if (m->has_target) {
            put_key(pk, K_TGT);
            put_id(pk, m->target);
        }
        break;
    case MP_SWIM_MSG_PING_REQ:
        put_u64(pk, K_SEQ, m->seq);
        put_u64(pk, K_INC, m->inc);
        put_key(pk, K_TGT);
        put_id(pk, m->target);
        break;
    case MP_SWIM_MSG_SYNC_REQ:
        put_u64(pk, K_CUR, m->cursor);
        put_u64(pk, K_INC, m->inc);
        put_key(pk, K_A);
        mp__pack_str(pk, m->addr);
        break;
    case MP_SWIM_MSG_SYNC:
        put_u64(pk, K_CUR, m->cursor);
        put_u64(pk, K_NX, m->next);
        put_u64(pk, K_INC, m->inc);
        put_key(pk, K_M);
        put_updates(pk, m->entries, m->n_entries);
        break;
    case MP_SWIM_MSG_GOSSIP:
        put_u64(pk, K_INC, m->inc);
        break;
    }
    if (g) {
        put_key(pk, K_G);
        put_updates(pk, m->updates, m->n_updates);
    }
}

static moshpit_err_t finish(const mp_wire_buf_t *w, size_t *len) {
    if (w->overflow)
        return MOSHPIT_ENOMEM;
    if (w->len > MP_SWIM_MSG_MAX)
        return MOSHPIT_EINVAL;
    *len = w->len;
    return MOSHPIT_OK;
}

moshpit_err_t mp__wire_swim_msg_encode(const mp_swim_msg_t *msg, uint8_t *buf,
                                       size_t cap, size_t *len) {
    if (len != NULL)
        *len = 0;
    if (msg == NULL || len == NULL || (buf == NULL && cap > 0))
        return MOSHPIT_EINVAL;
    moshpit_err_t err = check_msg(msg);
    if (err != MOSHPIT_OK)
        return err;
    mp_wire_buf_t w = {buf, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, mp__wire_buf_write);
    pack_msg(&pk, msg);
    return finish(&w, len);
}

moshpit_err_t mp__wire_swim_block_encode(uint32_t inc,
                                         const mp_swim_update_t *updates,
                                         size_t n, uint8_t *buf, size_t cap,
                                         size_t *len) {
    if (len != NULL)
        *len = 0;
    if (len == NULL || (buf == NULL && cap > 0) || (updates == NULL && n > 0))
        return MOSHPIT_EINVAL;
    if (n > MP_SWIM_PB_MAX || !updates_ok(updates, n))
        return MOSHPIT_EINVAL;
    mp_wire_buf_t w = {buf, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, mp__wire_buf_write);
    msgpack_pack_map(&pk, 4);
    put_u64(&pk, K_V, MP_SWIM_WIRE_VERSION);
    put_u64(&pk, K_T, MP_SWIM_MSG_GOSSIP);
    put_u64(&pk, K_INC, inc);
    put_key(&pk, K_G);
    put_updates(&pk, updates, n);
    return finish(&w, len);
}

/* ------------------------------------------------------------------ */
/* decoding                                                            */

static int get_id(const msgpack_object *o, uint8_t out[MP_SWIM_ID_BYTES]) {
    return mp__pack_get_bin(o, out, MP_SWIM_ID_BYTES);
}

static int get_addr(const msgpack_object *o, char out[MP_SWIM_ADDR_MAX]) {
    return mp__pack_get_str(o, out, MP_SWIM_ADDR_MAX);
}

static int get_update(const msgpack_object *o, mp_swim_update_t *u) {
    uint64_t st;
    if (o->type != MSGPACK_OBJECT_ARRAY ||
        (o->via.array.size != 3 && o->via.array.size != 4))
        return -1;
    const msgpack_object *e = o->via.array.ptr;
    if (get_id(&e[0], u->id) != 0 || mp__pack_get_u64(&e[1], &st) != 0 ||
        st > MP_SWIM_LEFT || mp__pack_get_u32(&e[2], &u->inc) != 0)
        return -1;
    u->state = (uint8_t)st;
    u->has_addr = 0;
    u->addr[0] = '\0';
    if (o->via.array.size == 4) {
        if (get_addr(&e[3], u->addr) != 0)
            return -1;
        u->has_addr = 1;
    }
    return 0;
}

static int get_updates(const msgpack_object *o, mp_swim_update_t *u,
                       uint32_t max, uint32_t *n) {
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > max)
        return -1;
    for (uint32_t i = 0; i < o->via.array.size; i++)
        if (get_update(&o->via.array.ptr[i], &u[i]) != 0)
            return -1;
    *n = o->via.array.size;
    return 0;
}

/* Collects the known keys of the root map (mp__pack_collect). */
static int collect(const msgpack_object *root,
                   const msgpack_object *val[K_COUNT]) {
    return mp__pack_collect(root, key_names, K_COUNT, val);
}

/* Which keys each type requires (bit per key; v and t always). */
static unsigned required(uint64_t t) {
    switch (t) {
    case MP_SWIM_MSG_PING:
        return 1u << K_SEQ | 1u << K_INC | 1u << K_A;
    case MP_SWIM_MSG_ACK:
        return 1u << K_SEQ | 1u << K_INC;
    case MP_SWIM_MSG_PING_REQ:
        return 1u << K_SEQ | 1u << K_INC | 1u << K_TGT;
    case MP_SWIM_MSG_SYNC_REQ:
        return 1u << K_CUR | 1u << K_INC | 1u << K_A;
    case MP_SWIM_MSG_SYNC:
        return 1u << K_CUR | 1u << K_NX | 1u << K_INC | 1u << K_M;
    default: /* GOSSIP */
        return 1u << K_INC | 1u << K_G;
    }
}

static int decode_map(const msgpack_object *root, mp_swim_msg_t *m) {
    const msgpack_object *val[K_COUNT] = {0};
    uint64_t v, t;
    if (collect(root, val) != 0)
        return -1;
    if (!val[K_V] || mp__pack_get_u64(val[K_V], &v) != 0 ||
        v != MP_SWIM_WIRE_VERSION)
        return -1;
    if (!val[K_T] || mp__pack_get_u64(val[K_T], &t) != 0 || !type_ok(t))
        return -1;
    unsigned req = required(t);
    for (int k = 0; k < K_COUNT; k++)
        if ((req & (1u << k)) && val[k] == NULL)
            return -1;
    m->type = (mp_swim_msg_type_t)t;
    if (mp__pack_get_u32(val[K_INC], &m->inc) != 0)
        return -1;
    /* Keys of other types are ignored, like unknown keys. */
    if ((req & (1u << K_SEQ)) && mp__pack_get_u64(val[K_SEQ], &m->seq) != 0)
        return -1;
    if ((req & (1u << K_A)) && get_addr(val[K_A], m->addr) != 0)
        return -1;
    if ((req & (1u << K_CUR)) && mp__pack_get_u32(val[K_CUR], &m->cursor) != 0)
        return -1;
    if ((req & (1u << K_NX)) && mp__pack_get_u32(val[K_NX], &m->next) != 0)
        return -1;
    if ((req & (1u << K_M)) &&
        get_updates(val[K_M], m->entries, MP_SWIM_PAGE_MAX, &m->n_entries) != 0)
        return -1;
    /* tgt: required in PING_REQ, optional in ACK. */
    if ((t == MP_SWIM_MSG_PING_REQ || t == MP_SWIM_MSG_ACK) && val[K_TGT]) {
        if (get_id(val[K_TGT], m->target) != 0)
            return -1;
        m->has_target = 1;
    }
    if (val[K_G] &&
        get_updates(val[K_G], m->updates, MP_SWIM_PB_MAX, &m->n_updates) != 0)
        return -1;
    return 0;
}

/* Scans and unpacks buf; on success *up holds the root object. */
static moshpit_err_t unpack(const uint8_t *buf, size_t len,
                            msgpack_unpacked *up) {
    if (len == 0 || len > MP_SWIM_MSG_MAX || mp__wire_scan(buf, len) != 0)
        return MOSHPIT_EPROTO;
    size_t off = 0;
    msgpack_unpack_return r =
        msgpack_unpack_next(up, (const char *)buf, len, &off);
    if (r == MSGPACK_UNPACK_NOMEM_ERROR)
        return MOSHPIT_ENOMEM;
    if (r != MSGPACK_UNPACK_SUCCESS || off != len)
        return MOSHPIT_EPROTO;
    return MOSHPIT_OK;
}

moshpit_err_t mp__wire_swim_msg_decode(const uint8_t *buf, size_t len,
                                       mp_swim_msg_t *msg) {
    if (msg == NULL || (buf == NULL && len > 0))
        return MOSHPIT_EINVAL;
    memset(msg, 0, sizeof *msg);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    moshpit_err_t err = unpack(buf, len, &up);
    if (err == MOSHPIT_OK && decode_map(&up.data, msg) != 0)
        err = MOSHPIT_EPROTO;
    msgpack_unpacked_destroy(&up);
    if (err != MOSHPIT_OK)
        memset(msg, 0, sizeof *msg);
    return err;
}

moshpit_err_t mp__wire_swim_peek_type(const uint8_t *buf, size_t len,
                                      uint64_t *type) {
    if (type == NULL || (buf == NULL && len > 0))
        return MOSHPIT_EINVAL;
    *type = 0;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    moshpit_err_t err = unpack(buf, len, &up);
    if (err == MOSHPIT_OK) {
        const msgpack_object *val[K_COUNT] = {0};
        if (collect(&up.data, val) != 0 || val[K_T] == NULL ||
            mp__pack_get_u64(val[K_T], type) != 0) {
            *type = 0;
            err = MOSHPIT_EPROTO;
        }
    }
    msgpack_unpacked_destroy(&up);
    return err;
}
