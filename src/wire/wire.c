/* SPDX-License-Identifier: MIT */
/*
 * wire.c - encoding and decoding of control messages (one msgpack map each)
 * and of the fixed 48-byte little-endian data-frame header.
 *
 * Everything here is a pure function over caller-provided buffers. Encoding
 * validates the struct and packs it with msgpack-c straight into the
 * caller's buffer, in a fixed key order with the smallest integer forms, so
 * equal messages give equal bytes. Decoding first walks the raw bytes with a
 * bounded scanner (element counts must fit in the bytes that remain, nesting
 * is limited, the single object must end exactly at the end of the input)
 * and only then lets msgpack-c build its object tree: msgpack-c allocates an
 * array's slots as soon as it reads the header, so an unchecked 5-byte header
 * claiming 2^32 elements would otherwise ask for ~100 GB. After the scan, the
 * tree costs at most a small multiple of the input length. The tree is then
 * checked field by field against the schema in docs/PROTOCOL.md.
 */
#include "wire/wire.h"

#include <math.h>
#include <msgpack.h>
#include <string.h>

#include "base/base.h"
#include "core/codec.h"
#include "wire/pack.h"

/* Containers may nest this deep (the schema needs 3; unknown keys may carry
 * a little more). Also keeps msgpack-c below its own fixed stack limit. */
#define WIRE_DEPTH_MAX 16u

/* ------------------------------------------------------------------ */
/* keys                                                                */

enum {
    K_V,
    K_T,
    K_SW,
    K_EPH,
    K_PF,
    K_RE,
    K_TAG,
    K_BW,
    K_CI,
    K_CA,
    K_DA,
    K_WHY,
    K_P,
    K_SEQ,
    K_W,
    K_WIN,
    K_KEY,
    K_GID,
    K_M,
    K_SS,
    K_VER,
    K_FIRST,
    K_N,
    K_RND,
    K_CNT,
    K_DIG,
    K_CT,
    K_SE,
    K_PH,
    K_SC,
    K_GA,
    K_RX,
    K_MK,
    K_RW,
    K_OB,
    K_DR,
    K_NR,
    K_OA,
    K_NS,
    K_UP,
    K_LK,
    K_BQ,
    K_BA,
    K_PP,
    K_HI,
    K_EO,
    K_COUNT
};

static const char *const key_names[K_COUNT] = {
    [K_V] = "v",     [K_T] = "t",         [K_SW] = "sw",   [K_EPH] = "eph",
    [K_PF] = "pf",   [K_RE] = "re",       [K_TAG] = "tag", [K_BW] = "bw",
    [K_CI] = "ci",   [K_CA] = "ca",       [K_DA] = "da",   [K_WHY] = "why",
    [K_P] = "p",     [K_SEQ] = "seq",     [K_W] = "w",     [K_WIN] = "win",
    [K_KEY] = "key", [K_GID] = "gid",     [K_M] = "m",     [K_SS] = "ss",
    [K_VER] = "ver", [K_FIRST] = "first", [K_N] = "n",     [K_RND] = "rnd",
    [K_CNT] = "cnt", [K_DIG] = "dig",     [K_CT] = "ct",   [K_SE] = "se",
    [K_PH] = "ph",   [K_SC] = "sc",       [K_GA] = "ga",   [K_RX] = "rx",
    [K_MK] = "mk",   [K_RW] = "rw",       [K_OB] = "ob",   [K_DR] = "dr",
    [K_NR] = "nr",   [K_OA] = "oa",       [K_NS] = "ns",   [K_UP] = "up",
    [K_LK] = "lk",   [K_BQ] = "bq",       [K_BA] = "ba",   [K_PP] = "pp",
    [K_HI] = "hi",   [K_EO] = "eo",
};

/* ------------------------------------------------------------------ */
/* encoding                                                            */

int mp__wire_buf_write(void *data, const char *p, size_t n) {
    mp_wire_buf_t *w = data;
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = 1;
        return -1;
    }
    if (n > 0) {
        memcpy(w->buf + w->len, p, n);
        w->len += n;
    }
    return 0;
}

/* Keys by this codec's enum (pack.h has the msgpack-c side). */
static void put_key(msgpack_packer *pk, int k) {
    mp__pack_str(pk, key_names[k]);
}

static void put_u64(msgpack_packer *pk, int k, uint64_t v) {
    mp__pack_u64(pk, key_names[k], v);
}

static int str_ok(const char *s) {
    return memchr(s, '\0', MP_ADDR_MAX) != NULL;
}

static int weight_ok(double w) {
    return isfinite(w) && w >= 0.0 && w <= MOSHPIT_WEIGHT_MAX;
}

/* a sum of up to MP_GROUP_MAX weights */
static int weight_sum_ok(double w) {
    return isfinite(w) && w >= 0.0 && w <= MOSHPIT_WEIGHT_MAX * MP_GROUP_MAX;
}

static int members_distinct(const mp_member_t *m, uint32_t n) {
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = 0; j < i; j++)
            if (memcmp(m[i].id, m[j].id, MP_ID_BYTES) == 0)
                return 0;
    return 1;
}

static moshpit_err_t check_msg(const mp_msg_t *msg) {
    switch (msg->type) {
    case MP_MSG_HELLO: {
        const mp_hello_t *h = &msg->u.hello;
        if (h->has_proof > 1 || h->reply > 1)
            return MOSHPIT_EINVAL;
        if (!h->has_proof && !mp__all_zero(h->proof, sizeof h->proof))
            return MOSHPIT_EINVAL;
        if (h->has_cert > 1 ||
            (!h->has_cert && !mp__all_zero(h->cert, sizeof h->cert)))
            return MOSHPIT_EINVAL;
        if (!str_ok(h->ctrl_addr) || !str_ok(h->data_addr) ||
            h->serves_state > 1 || h->reorder_ok > 1 || h->outbound > 1 ||
            h->not_reached > 1 || h->has_host > 1 ||
            (!h->has_host && !mp__all_zero(h->host, sizeof h->host)) ||
            h->drid_len > MP_DRID_MAX || !str_ok(h->observed) ||
            (h->drid_len == 0) != (h->outbound == 0))
            return MOSHPIT_EINVAL;
        return MOSHPIT_OK;
    }
    case MP_MSG_STATE_REQ: {
        const mp_state_req_t *q = &msg->u.state_req;
        if (q->version == 0 ? q->n != 0 : q->n == 0 || q->n > MP_STATE_GET_MAX)
            return MOSHPIT_EINVAL;
        return MOSHPIT_OK;
    }
    case MP_MSG_STATE_INFO:
        if (msg->u.state_info.count > MP_STATE_COUNT_MAX)
            return MOSHPIT_EINVAL;
        return MOSHPIT_OK;
    case MP_MSG_DONE:
        return msg->u.done.group_id != 0 ? MOSHPIT_OK : MOSHPIT_EINVAL;
    case MP_MSG_HAVE:
        return msg->u.have.group_id != 0 && msg->u.have.mark <= 1 &&
                       msg->u.have.sc_len <= MP_HAVE_BYTES_MAX &&
                       msg->u.have.ga_len <= MP_HAVE_BYTES_MAX
                   ? MOSHPIT_OK
                   : MOSHPIT_EINVAL;
    case MP_MSG_REFUSE:
    case MP_MSG_JOIN_ACK:
    case MP_MSG_ALONE:
    case MP_MSG_LEAVE:
    case MP_MSG_BYE:
        return MOSHPIT_OK;
    case MP_MSG_PEERS:
        if (msg->u.peers.n > MP_PEERS_MAX)
            return MOSHPIT_EINVAL;
        for (uint32_t i = 0; i < msg->u.peers.n; i++)
            if (!str_ok(msg->u.peers.peers[i].addr))
                return MOSHPIT_EINVAL;
        return MOSHPIT_OK;
    case MP_MSG_JOIN:
        if (!weight_ok(msg->u.join.weight) ||
            msg->u.join.key_len > MP_KEY_MAX || msg->u.join.noshare > 1 ||
            msg->u.join.parts > 1 || msg->u.join.line_len > MP_KEY_MAX)
            return MOSHPIT_EINVAL;
        return MOSHPIT_OK;
    case MP_MSG_GROUP: {
        const mp_group_msg_t *g = &msg->u.group;
        if (g->group_id == 0 || g->n < 2 || g->n > MP_GROUP_MAX)
            return MOSHPIT_EINVAL;
        for (uint32_t i = 0; i < g->n; i++)
            if (!weight_ok(g->members[i].weight) || g->members[i].noshare > 1 ||
                g->members[i].parts > 1)
                return MOSHPIT_EINVAL;
        if (!members_distinct(g->members, g->n))
            return MOSHPIT_EINVAL;
        return MOSHPIT_OK;
    }
    }
    return MOSHPIT_EINVAL;
}

static void pack_msg(msgpack_packer *pk, const mp_msg_t *msg) {
    size_t entries;
    switch (msg->type) {
    case MP_MSG_HELLO:
        entries = 11u + msg->u.hello.has_proof + msg->u.hello.serves_state +
                  msg->u.hello.has_cert + msg->u.hello.reorder_ok +
                  2u * msg->u.hello.outbound + msg->u.hello.not_reached +
                  (msg->u.hello.observed[0] != '\0') +
                  (msg->u.hello.dialback_req != 0) +
                  (msg->u.hello.dialback_ans != 0) + msg->u.hello.has_host +
                  (msg->u.hello.eph_order != 0);
        break;
    case MP_MSG_STATE_REQ:
        entries = 6;
        break;
    case MP_MSG_STATE_INFO:
        entries = 7;
        break;
    case MP_MSG_JOIN:
        entries = 7u + (msg->u.join.phase != 0) + (msg->u.join.noshare != 0) +
                  (msg->u.join.parts != 0) + (msg->u.join.line_len != 0);
        break;
    case MP_MSG_GROUP: {
        bool ns = false, pp = false;
        for (uint32_t i = 0; i < msg->u.group.n && i < MP_GROUP_MAX; i++) {
            ns = ns || msg->u.group.members[i].noshare;
            pp = pp || msg->u.group.members[i].parts;
        }
        entries = 5u + (msg->u.group.phase != 0) + ns + pp;
        break;
    }
    case MP_MSG_BYE:
        entries = msg->u.bye.reason != 0 ? 3 : 2;
        break;
    case MP_MSG_DONE:
        entries = 3u + (msg->u.done.up_kbps != 0);
        break;
    case MP_MSG_HAVE:
        entries = 6u + msg->u.have.mark;
        break;
    default: /* REFUSE, PEERS, JOIN_ACK, ALONE, LEAVE */
        entries = 3;
        break;
    }
    msgpack_pack_map(pk, entries);
    put_u64(pk, K_V, MP_WIRE_VERSION);
    put_u64(pk, K_T, (uint64_t)msg->type);

    switch (msg->type) {
    case MP_MSG_HELLO: {
        const mp_hello_t *h = &msg->u.hello;
        put_key(pk, K_SW);
        mp__pack_bin(pk, h->swarm, sizeof h->swarm);
        put_key(pk, K_EPH);
        mp__pack_bin(pk, h->eph, sizeof h->eph);
        put_key(pk, K_SE);
        mp__pack_bin(pk, h->seen, sizeof h->seen);
        if (h->has_proof) {
            put_key(pk, K_PF);
            mp__pack_bin(pk, h->proof, sizeof h->proof);
        }
        put_key(pk, K_RE);
        if (h->reply)
            msgpack_pack_true(pk);
        else
            msgpack_pack_false(pk);
        put_u64(pk, K_TAG, h->tag);
        put_u64(pk, K_BW, h->bandwidth);
        put_u64(pk, K_CI, h->ciphers);
        put_key(pk, K_CA);
        mp__pack_str(pk, h->ctrl_addr);
        put_key(pk, K_DA);
        mp__pack_str(pk, h->data_addr);
        if (h->serves_state) {
            put_key(pk, K_SS);
            msgpack_pack_true(pk);
        }
        if (h->has_cert) {
            put_key(pk, K_CT);
            mp__pack_bin(pk, h->cert, sizeof h->cert);
        }
        if (h->reorder_ok) {
            put_key(pk, K_RW);
            msgpack_pack_true(pk);
        }
        /* optional reachability keys (docs/PROTOCOL.md, "Peers behind
         * NAT"): absent when unset, so a HELLO without them encodes as
         * before */
        if (h->outbound) {
            put_key(pk, K_OB);
            msgpack_pack_true(pk);
            put_key(pk, K_DR);
            mp__pack_bin(pk, h->drid, h->drid_len);
        }
        if (h->not_reached) {
            put_key(pk, K_NR);
            msgpack_pack_true(pk);
        }
        if (h->observed[0] != '\0') {
            put_key(pk, K_OA);
            mp__pack_str(pk, h->observed);
        }
        if (h->dialback_req != 0)
            put_u64(pk, K_BQ, h->dialback_req);
        if (h->dialback_ans != 0)
            put_u64(pk, K_BA, h->dialback_ans);
        if (h->has_host) {
            put_key(pk, K_HI);
            mp__pack_bin(pk, h->host, sizeof(h->host));
        }
        if (h->eph_order != 0)
            put_u64(pk, K_EO, h->eph_order);
        break;
    }
    case MP_MSG_STATE_REQ: {
        const mp_state_req_t *q = &msg->u.state_req;
        put_u64(pk, K_SEQ, q->seq);
        put_u64(pk, K_VER, q->version);
        put_u64(pk, K_FIRST, q->first);
        put_u64(pk, K_N, q->n);
        break;
    }
    case MP_MSG_STATE_INFO: {
        const mp_state_info_t *i = &msg->u.state_info;
        put_u64(pk, K_SEQ, i->seq);
        put_u64(pk, K_VER, i->version);
        put_u64(pk, K_RND, i->round);
        put_u64(pk, K_CNT, i->count);
        put_key(pk, K_DIG);
        mp__pack_bin(pk, i->digest, sizeof i->digest);
        break;
    }
    case MP_MSG_REFUSE:
        put_u64(pk, K_WHY, msg->u.refuse.reason);
        break;
    case MP_MSG_PEERS:
        put_key(pk, K_P);
        msgpack_pack_array(pk, msg->u.peers.n);
        for (uint32_t i = 0; i < msg->u.peers.n; i++) {
            const mp_peer_entry_t *e = &msg->u.peers.peers[i];
            msgpack_pack_array(pk, 2);
            mp__pack_bin(pk, e->id, sizeof e->id);
            mp__pack_str(pk, e->addr);
        }
        break;
    case MP_MSG_JOIN: {
        const mp_join_t *j = &msg->u.join;
        put_u64(pk, K_SEQ, j->seq);
        put_key(pk, K_W);
        msgpack_pack_double(pk, j->weight);
        put_u64(pk, K_BW, j->bandwidth);
        put_u64(pk, K_WIN, j->window_ms);
        put_key(pk, K_KEY);
        mp__pack_bin(pk, j->key, j->key_len);
        if (j->phase != 0) /* optional: the encoding of phase 0 is that of
                              versions without it */
            put_u64(pk, K_PH, j->phase);
        if (j->noshare) { /* optional: an outbound-only joiner */
            put_key(pk, K_NS);
            msgpack_pack_true(pk);
        }
        if (j->parts) { /* optional: cuts parts by the group's size */
            put_key(pk, K_PP);
            msgpack_pack_true(pk);
        }
        if (j->line_len != 0) { /* optional: a merge key's line key */
            put_key(pk, K_LK);
            mp__pack_bin(pk, j->line, j->line_len);
        }
        break;
    }
    case MP_MSG_JOIN_ACK:
        put_u64(pk, K_SEQ, msg->u.ack.seq);
        break;
    case MP_MSG_ALONE:
        put_u64(pk, K_SEQ, msg->u.alone.seq);
        break;
    case MP_MSG_LEAVE:
        put_u64(pk, K_SEQ, msg->u.leave.seq);
        break;
    case MP_MSG_DONE:
        put_u64(pk, K_GID, msg->u.done.group_id);
        if (msg->u.done.up_kbps != 0) /* optional, as "ph" in JOIN */
            put_u64(pk, K_UP, msg->u.done.up_kbps);
        break;
    case MP_MSG_HAVE:
        put_u64(pk, K_GID, msg->u.have.group_id);
        put_u64(pk, K_RX, msg->u.have.rx);
        if (msg->u.have.mark) {
            put_key(pk, K_MK);
            msgpack_pack_true(pk);
        }
        put_key(pk, K_SC);
        mp__pack_bin(pk, msg->u.have.sc, msg->u.have.sc_len);
        put_key(pk, K_GA);
        mp__pack_bin(pk, msg->u.have.ga, msg->u.have.ga_len);
        break;
    case MP_MSG_GROUP: {
        const mp_group_msg_t *g = &msg->u.group;
        put_u64(pk, K_SEQ, g->seq);
        put_u64(pk, K_GID, g->group_id);
        put_key(pk, K_M);
        msgpack_pack_array(pk, g->n);
        for (uint32_t i = 0; i < g->n; i++) {
            msgpack_pack_array(pk, 3);
            mp__pack_bin(pk, g->members[i].id, MP_ID_BYTES);
            msgpack_pack_double(pk, g->members[i].weight);
            msgpack_pack_uint32(pk, g->members[i].bandwidth);
        }
        if (g->phase != 0) /* optional, as in JOIN */
            put_u64(pk, K_PH, g->phase);
        uint64_t ns = 0;
        for (uint32_t i = 0; i < g->n; i++)
            if (g->members[i].noshare)
                ns |= (uint64_t)1 << i;
        if (ns != 0) /* optional: members that reduce no share */
            put_u64(pk, K_NS, ns);
        uint64_t pp = 0;
        for (uint32_t i = 0; i < g->n; i++)
            if (g->members[i].parts)
                pp |= (uint64_t)1 << i;
        if (pp != 0) /* optional: members that cut parts by the group */
            put_u64(pk, K_PP, pp);
        break;
    }
    case MP_MSG_BYE:
        if (msg->u.bye.reason != 0)
            put_u64(pk, K_WHY, msg->u.bye.reason);
        break;
    }
}

moshpit_err_t mp__wire_msg_encode(const mp_msg_t *msg, uint8_t *buf, size_t cap,
                                  size_t *len) {
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
    if (w.overflow)
        return MOSHPIT_ENOMEM;
    /* The largest valid message (a full PEERS) is ~10.5 KB, so this only
     * guards against the limits in wire.h being changed inconsistently. */
    if (w.len > MP_CTRL_MAX)
        return MOSHPIT_EINVAL;
    *len = w.len;
    return MOSHPIT_OK;
}

/* ------------------------------------------------------------------ */
/* decoding: structural scan                                           */

static uint64_t be_read(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/*
 * Reads the header of the msgpack object at buf[*off] and advances *off past
 * the whole object if it is a scalar, or past its header if it is a
 * container (*children then receives the number of objects inside). Fails
 * when the object claims more bytes than remain.
 */
static int scan_one(const uint8_t *buf, size_t len, size_t *off,
                    uint64_t *children) {
    size_t o = *off;
    uint8_t b = buf[o++];
    size_t lenbytes = 0; /* size of a following length field */
    uint64_t body = 0;   /* payload bytes after the header */
    int kind = 0;        /* 0 scalar/bytes, 1 array, 2 map */

    *children = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
        body = 0;
    } else if (b >= 0x80 && b <= 0x8f) {
        kind = 2;
        body = b & 0x0f;
    } else if (b >= 0x90 && b <= 0x9f) {
        kind = 1;
        body = b & 0x0f;
    } else if (b >= 0xa0 && b <= 0xbf) {
        body = b & 0x1f;
    } else {
        switch (b) {
        case 0xc4: /* bin 8/16/32 */
        case 0xc5:
        case 0xc6:
            lenbytes = (size_t)1 << (b - 0xc4);
            break;
        case 0xc7: /* ext 8/16/32: length, then a type byte */
        case 0xc8:
        case 0xc9:
            lenbytes = (size_t)1 << (b - 0xc7);
            body = 1;
            break;
        case 0xca:
            body = 4;
            break;
        case 0xcb:
            body = 8;
            break;
        case 0xcc: /* uint 8..64 */
        case 0xcd:
        case 0xce:
        case 0xcf:
            body = (uint64_t)1 << (b - 0xcc);
            break;
        case 0xd0: /* int 8..64 */
        case 0xd1:
        case 0xd2:
        case 0xd3:
            body = (uint64_t)1 << (b - 0xd0);
            break;
        case 0xd4: /* fixext 1..16, plus the type byte */
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
            body = ((uint64_t)1 << (b - 0xd4)) + 1;
            break;
        case 0xd9: /* str 8/16/32 */
        case 0xda:
        case 0xdb:
            lenbytes = (size_t)1 << (b - 0xd9);
            break;
        case 0xdc: /* array 16/32 */
        case 0xdd:
            kind = 1;
            lenbytes = (size_t)2 << (b - 0xdc);
            break;
        case 0xde: /* map 16/32 */
        case 0xdf:
            kind = 2;
            lenbytes = (size_t)2 << (b - 0xde);
            break;
        default: /* 0xc1: never used */
            return -1;
        }
    }
    if (lenbytes > len - o)
        return -1;
    if (lenbytes > 0) {
        uint64_t n = be_read(buf + o, lenbytes);
        o += lenbytes;
        if (kind == 0)
            body += n;
        else
            body = n;
    }
    if (kind != 0) {
        *children = kind == 2 ? body * 2 : body;
    } else {
        if (body > len - o)
            return -1;
        o += (size_t)body;
    }
    *off = o;
    return 0;
}

/*
 * Checks that buf[0..len) is exactly one well-formed msgpack object whose
 * nesting stays within WIRE_DEPTH_MAX. The walk only succeeds if every
 * declared element is present, so all counts are backed by input bytes
 * (every object takes at least one); `pending` merely lets a count that
 * cannot fit fail at once. O(len) time, fixed-size stack. Shared with
 * wire_swim.c.
 */
int mp__wire_scan(const uint8_t *buf, size_t len) {
    uint64_t left[WIRE_DEPTH_MAX + 1]; /* objects still due per level */
    uint64_t pending = 1;              /* objects still due in total */
    size_t depth = 0, off = 0;

    left[0] = 1;
    for (;;) {
        while (depth > 0 && left[depth] == 0)
            depth--;
        if (left[depth] == 0)
            break;
        if (off >= len)
            return -1;
        uint64_t children;
        if (scan_one(buf, len, &off, &children) != 0)
            return -1;
        left[depth]--;
        pending--;
        if (children > 0) {
            if (depth == WIRE_DEPTH_MAX)
                return -1;
            /* pending <= len and children < 2^33: no overflow */
            pending += children;
            left[++depth] = children;
        }
        if (pending > len - off)
            return -1;
    }
    return off == len ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* decoding: schema                                                    */

static int get_bool(const msgpack_object *o, uint8_t *out) {
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return -1;
    *out = o->via.boolean ? 1 : 0;
    return 0;
}

static int get_bin32(const msgpack_object *o, uint8_t out[32]) {
    return mp__pack_get_bin(o, out, 32);
}

static int get_str(const msgpack_object *o, char out[MP_ADDR_MAX]) {
    return mp__pack_get_str(o, out, MP_ADDR_MAX);
}

static int get_weight(const msgpack_object *o, double *out) {
    double w;
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        w = o->via.f64;
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        w = (double)o->via.u64;
        break;
    default:
        return -1;
    }
    if (!weight_ok(w))
        return -1;
    *out = w;
    return 0;
}

static int decode_hello(const msgpack_object *const *val, mp_hello_t *h) {
    if (!val[K_SW] || !val[K_EPH] || !val[K_SE] || !val[K_RE] || !val[K_TAG] ||
        !val[K_BW] || !val[K_CI] || !val[K_CA] || !val[K_DA])
        return -1;
    if (get_bin32(val[K_SW], h->swarm) != 0 ||
        get_bin32(val[K_EPH], h->eph) != 0 ||
        get_bin32(val[K_SE], h->seen) != 0 ||
        get_bool(val[K_RE], &h->reply) != 0 ||
        mp__pack_get_u64(val[K_TAG], &h->tag) != 0 ||
        mp__pack_get_u32(val[K_BW], &h->bandwidth) != 0 ||
        mp__pack_get_u32(val[K_CI], &h->ciphers) != 0 ||
        get_str(val[K_CA], h->ctrl_addr) != 0 ||
        get_str(val[K_DA], h->data_addr) != 0)
        return -1;
    if (val[K_PF]) {
        if (get_bin32(val[K_PF], h->proof) != 0)
            return -1;
        h->has_proof = 1;
    }
    if (val[K_SS] && get_bool(val[K_SS], &h->serves_state) != 0)
        return -1;
    if (val[K_RW] && get_bool(val[K_RW], &h->reorder_ok) != 0)
        return -1;
    if (val[K_CT]) {
        /* a certificate has one fixed size; anything else is malformed */
        const msgpack_object *c = val[K_CT];
        if (c->type != MSGPACK_OBJECT_BIN || c->via.bin.size != sizeof h->cert)
            return -1;
        memcpy(h->cert, c->via.bin.ptr, sizeof h->cert);
        h->has_cert = 1;
    }
    if (val[K_OB] && get_bool(val[K_OB], &h->outbound) != 0)
        return -1;
    if (h->outbound) { /* an outbound-only sender names its data routing id */
        const msgpack_object *d = val[K_DR];
        if (d == NULL || d->type != MSGPACK_OBJECT_BIN ||
            d->via.bin.size == 0 || d->via.bin.size > MP_DRID_MAX ||
            d->via.bin.ptr[0] == 0)
            return -1;
        memcpy(h->drid, d->via.bin.ptr, d->via.bin.size);
        h->drid_len = (uint8_t)d->via.bin.size;
    }
    if (val[K_NR] && get_bool(val[K_NR], &h->not_reached) != 0)
        return -1;
    if (val[K_OA] &&
        (get_str(val[K_OA], h->observed) != 0 || h->observed[0] == '\0'))
        return -1;
    /* dial-back request and answer: a nonce, never 0 when present */
    if (val[K_BQ] && (mp__pack_get_u32(val[K_BQ], &h->dialback_req) != 0 ||
                      h->dialback_req == 0))
        return -1;
    if (val[K_BA] && (mp__pack_get_u32(val[K_BA], &h->dialback_ans) != 0 ||
                      h->dialback_ans == 0))
        return -1;
    if (val[K_HI]) {
        const msgpack_object *d = val[K_HI];
        if (d->type != MSGPACK_OBJECT_BIN || d->via.bin.size != sizeof(h->host))
            return -1;
        memcpy(h->host, d->via.bin.ptr, sizeof(h->host));
        h->has_host = 1;
    }
    if (val[K_EO] &&
        (mp__pack_get_u64(val[K_EO], &h->eph_order) != 0 || h->eph_order == 0))
        return -1;
    return 0;
}

static int decode_state_req(const msgpack_object *const *val,
                            mp_state_req_t *q) {
    if (!val[K_SEQ] || !val[K_VER] || !val[K_FIRST] || !val[K_N] ||
        mp__pack_get_u64(val[K_SEQ], &q->seq) != 0 ||
        mp__pack_get_u64(val[K_VER], &q->version) != 0 ||
        mp__pack_get_u32(val[K_FIRST], &q->first) != 0 ||
        mp__pack_get_u32(val[K_N], &q->n) != 0)
        return -1;
    return (q->version == 0 ? q->n == 0 : q->n >= 1 && q->n <= MP_STATE_GET_MAX)
               ? 0
               : -1;
}

static int decode_state_info(const msgpack_object *const *val,
                             mp_state_info_t *i) {
    if (!val[K_SEQ] || !val[K_VER] || !val[K_RND] || !val[K_CNT] ||
        !val[K_DIG] || mp__pack_get_u64(val[K_SEQ], &i->seq) != 0 ||
        mp__pack_get_u64(val[K_VER], &i->version) != 0 ||
        mp__pack_get_u64(val[K_RND], &i->round) != 0 ||
        mp__pack_get_u64(val[K_CNT], &i->count) != 0 ||
        get_bin32(val[K_DIG], i->digest) != 0)
        return -1;
    return i->count <= MP_STATE_COUNT_MAX ? 0 : -1;
}

/* A HAVE bitmap: a bin of at most MP_HAVE_BYTES_MAX bytes. */
static int get_bitmap(const msgpack_object *o, uint8_t *out, uint32_t *len) {
    if (o == NULL || o->type != MSGPACK_OBJECT_BIN ||
        o->via.bin.size > MP_HAVE_BYTES_MAX)
        return -1;
    if (o->via.bin.size > 0)
        memcpy(out, o->via.bin.ptr, o->via.bin.size);
    *len = o->via.bin.size;
    return 0;
}

static int decode_have(const msgpack_object *const *val, mp_have_t *h) {
    if (!val[K_GID] || mp__pack_get_u64(val[K_GID], &h->group_id) != 0 ||
        h->group_id == 0 || !val[K_RX] ||
        mp__pack_get_u64(val[K_RX], &h->rx) != 0)
        return -1;
    if (val[K_MK] && get_bool(val[K_MK], &h->mark) != 0)
        return -1;
    if (get_bitmap(val[K_SC], h->sc, &h->sc_len) != 0 ||
        get_bitmap(val[K_GA], h->ga, &h->ga_len) != 0)
        return -1;
    return 0;
}

static int decode_peers(const msgpack_object *p, mp_peers_t *out) {
    if (p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size > MP_PEERS_MAX)
        return -1;
    for (uint32_t i = 0; i < p->via.array.size; i++) {
        const msgpack_object *e = &p->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2)
            return -1;
        if (get_bin32(&e->via.array.ptr[0], out->peers[i].id) != 0 ||
            get_str(&e->via.array.ptr[1], out->peers[i].addr) != 0)
            return -1;
    }
    out->n = p->via.array.size;
    return 0;
}

static int decode_join(const msgpack_object *const *val, mp_join_t *j) {
    if (!val[K_SEQ] || !val[K_W] || !val[K_BW] || !val[K_WIN] || !val[K_KEY])
        return -1;
    if (mp__pack_get_u64(val[K_SEQ], &j->seq) != 0 ||
        get_weight(val[K_W], &j->weight) != 0 ||
        mp__pack_get_u32(val[K_BW], &j->bandwidth) != 0 ||
        mp__pack_get_u32(val[K_WIN], &j->window_ms) != 0)
        return -1;
    j->phase = 0;
    if (val[K_PH] != NULL && mp__pack_get_u32(val[K_PH], &j->phase) != 0)
        return -1;
    j->noshare = 0;
    if (val[K_NS] != NULL && get_bool(val[K_NS], &j->noshare) != 0)
        return -1;
    j->parts = 0;
    if (val[K_PP] != NULL && get_bool(val[K_PP], &j->parts) != 0)
        return -1;
    const msgpack_object *k = val[K_KEY];
    if (k->type != MSGPACK_OBJECT_BIN || k->via.bin.size > MP_KEY_MAX)
        return -1;
    if (k->via.bin.size > 0)
        memcpy(j->key, k->via.bin.ptr, k->via.bin.size);
    j->key_len = k->via.bin.size;
    j->line_len = 0;
    const msgpack_object *l = val[K_LK];
    if (l != NULL) {
        if (l->type != MSGPACK_OBJECT_BIN || l->via.bin.size > MP_KEY_MAX)
            return -1;
        if (l->via.bin.size > 0)
            memcpy(j->line, l->via.bin.ptr, l->via.bin.size);
        j->line_len = l->via.bin.size;
    }
    return 0;
}

/* An optional GROUP bit set over the roster ("ns", "pp"): absent is 0;
 * present, it must be nonzero with no bit at or above n. */
static int get_roster_bits(const msgpack_object *o, uint32_t n, uint64_t *out) {
    *out = 0;
    if (o == NULL)
        return 0;
    if (mp__pack_get_u64(o, out) != 0 || *out == 0 ||
        (n < 64 && *out >> n != 0))
        return -1;
    return 0;
}

static int decode_group(const msgpack_object *const *val, mp_group_msg_t *g) {
    if (!val[K_SEQ] || !val[K_GID] || !val[K_M])
        return -1;
    if (mp__pack_get_u64(val[K_SEQ], &g->seq) != 0 ||
        mp__pack_get_u64(val[K_GID], &g->group_id) != 0 || g->group_id == 0)
        return -1;
    const msgpack_object *m = val[K_M];
    if (m->type != MSGPACK_OBJECT_ARRAY || m->via.array.size < 2 ||
        m->via.array.size > MP_GROUP_MAX)
        return -1;
    for (uint32_t i = 0; i < m->via.array.size; i++) {
        const msgpack_object *e = &m->via.array.ptr[i];
        mp_member_t *mb = &g->members[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 3)
            return -1;
        if (get_bin32(&e->via.array.ptr[0], mb->id) != 0 ||
            get_weight(&e->via.array.ptr[1], &mb->weight) != 0 ||
            mp__pack_get_u32(&e->via.array.ptr[2], &mb->bandwidth) != 0)
            return -1;
        mb->seq = 0;
        mb->phase = 0;
        mb->noshare = 0;
        mb->parts = 0;
    }
    g->n = m->via.array.size;
    g->phase = 0;
    if (val[K_PH] != NULL && mp__pack_get_u32(val[K_PH], &g->phase) != 0)
        return -1;
    uint64_t ns = 0, pp = 0;
    if (get_roster_bits(val[K_NS], g->n, &ns) != 0 ||
        get_roster_bits(val[K_PP], g->n, &pp) != 0)
        return -1;
    for (uint32_t i = 0; i < g->n; i++) {
        g->members[i].noshare = (uint8_t)(ns >> i & 1u);
        g->members[i].parts = (uint8_t)(pp >> i & 1u);
    }
    return members_distinct(g->members, g->n) ? 0 : -1;
}

static int decode_map(const msgpack_object *root, mp_msg_t *msg) {
    const msgpack_object *val[K_COUNT] = {0};

    if (mp__pack_collect(root, key_names, K_COUNT, val) != 0)
        return -1;

    uint64_t v, t;
    if (!val[K_V] || mp__pack_get_u64(val[K_V], &v) != 0 ||
        v != MP_WIRE_VERSION)
        return -1;
    if (!val[K_T] || mp__pack_get_u64(val[K_T], &t) != 0)
        return -1;

    switch (t) {
    case MP_MSG_HELLO:
        msg->type = MP_MSG_HELLO;
        return decode_hello(val, &msg->u.hello);
    case MP_MSG_REFUSE:
        msg->type = MP_MSG_REFUSE;
        return val[K_WHY] ? mp__pack_get_u32(val[K_WHY], &msg->u.refuse.reason)
                          : -1;
    case MP_MSG_PEERS:
        msg->type = MP_MSG_PEERS;
        return val[K_P] ? decode_peers(val[K_P], &msg->u.peers) : -1;
    case MP_MSG_JOIN:
        msg->type = MP_MSG_JOIN;
        return decode_join(val, &msg->u.join);
    case MP_MSG_JOIN_ACK:
        msg->type = MP_MSG_JOIN_ACK;
        return val[K_SEQ] ? mp__pack_get_u64(val[K_SEQ], &msg->u.ack.seq) : -1;
    case MP_MSG_GROUP:
        msg->type = MP_MSG_GROUP;
        return decode_group(val, &msg->u.group);
    case MP_MSG_ALONE:
        msg->type = MP_MSG_ALONE;
        return val[K_SEQ] ? mp__pack_get_u64(val[K_SEQ], &msg->u.alone.seq)
                          : -1;
    case MP_MSG_LEAVE:
        msg->type = MP_MSG_LEAVE;
        return val[K_SEQ] ? mp__pack_get_u64(val[K_SEQ], &msg->u.leave.seq)
                          : -1;
    case MP_MSG_BYE:
        msg->type = MP_MSG_BYE;
        return val[K_WHY] ? mp__pack_get_u32(val[K_WHY], &msg->u.bye.reason)
                          : 0;
    case MP_MSG_STATE_REQ:
        msg->type = MP_MSG_STATE_REQ;
        return decode_state_req(val, &msg->u.state_req);
    case MP_MSG_STATE_INFO:
        msg->type = MP_MSG_STATE_INFO;
        return decode_state_info(val, &msg->u.state_info);
    case MP_MSG_DONE:
        msg->type = MP_MSG_DONE;
        msg->u.done.up_kbps = 0;
        if (val[K_UP] != NULL &&
            mp__pack_get_u32(val[K_UP], &msg->u.done.up_kbps) != 0)
            return -1;
        return val[K_GID] &&
                       mp__pack_get_u64(val[K_GID], &msg->u.done.group_id) ==
                           0 &&
                       msg->u.done.group_id != 0
                   ? 0
                   : -1;
    case MP_MSG_HAVE:
        msg->type = MP_MSG_HAVE;
        return decode_have(val, &msg->u.have);
    default:
        return -1;
    }
}

moshpit_err_t mp__wire_msg_decode(const uint8_t *buf, size_t len,
                                  mp_msg_t *msg) {
    if (msg == NULL || (buf == NULL && len > 0))
        return MOSHPIT_EINVAL;
    memset(msg, 0, sizeof *msg);
    if (len == 0 || len > MP_CTRL_MAX)
        return MOSHPIT_EPROTO;
    if (mp__wire_scan(buf, len) != 0)
        return MOSHPIT_EPROTO;

    msgpack_unpacked up;
    size_t off = 0;
    moshpit_err_t err = MOSHPIT_OK;
    msgpack_unpacked_init(&up);
    msgpack_unpack_return r =
        msgpack_unpack_next(&up, (const char *)buf, len, &off);
    if (r == MSGPACK_UNPACK_NOMEM_ERROR)
        err = MOSHPIT_ENOMEM; /* the scan rules out msgpack-c's depth limit */
    else if (r != MSGPACK_UNPACK_SUCCESS || off != len)
        err = MOSHPIT_EPROTO;
    else if (decode_map(&up.data, msg) != 0)
        err = MOSHPIT_EPROTO;
    msgpack_unpacked_destroy(&up);
    if (err != MOSHPIT_OK)
        memset(msg, 0, sizeof *msg);
    return err;
}

/* ------------------------------------------------------------------ */
/* data-frame header                                                   */

#define DATA_HDR_VERSION 1u

_Static_assert(sizeof(double) == sizeof(uint64_t), "IEEE-754 binary64");

void mp__wire_data_hdr_encode(const mp_data_hdr_t *h,
                              uint8_t out[MP_DATA_HDR_BYTES]) {
    uint64_t wbits;
    memcpy(&wbits, &h->wsum, sizeof wbits);
    mp__store_le(out + 0, DATA_HDR_VERSION, 1);
    mp__store_le(out + 1, h->kind, 1);
    mp__store_le(out + 2, h->codec, 1);
    mp__store_le(out + 3, h->layout | (h->shm ? MP_DATA_LAYOUT_SHM : 0u), 1);
    mp__store_le(out + 4, h->count, 4);
    mp__store_le(out + 8, h->tag, 8);
    mp__store_le(out + 16, h->counter, 8);
    mp__store_le(out + 24, h->round_id, 8);
    mp__store_le(out + 32, h->share, 4);
    mp__store_le(out + 36, h->part, 4);
    mp__store_le(out + 40, wbits, 8);
}

moshpit_err_t mp__wire_data_hdr_decode(const uint8_t *buf, size_t len,
                                       mp_data_hdr_t *h) {
    if (h == NULL || (buf == NULL && len > 0))
        return MOSHPIT_EINVAL;
    memset(h, 0, sizeof *h);
    if (len < MP_DATA_HDR_BYTES)
        return MOSHPIT_EPROTO;
    if (buf[0] != DATA_HDR_VERSION)
        return MOSHPIT_EPROTO;
    if (buf[1] != MP_PART_SCATTER && buf[1] != MP_PART_GATHER &&
        buf[1] != MP_PART_STATE && buf[1] != MP_PART_MARK)
        return MOSHPIT_EPROTO;
    uint8_t codec = buf[2];
    bool round_part = buf[1] == MP_PART_SCATTER || buf[1] == MP_PART_GATHER;
    /* a round's part may name a slot of shared memory instead of carrying
     * its values (docs/PROTOCOL.md, "Parts through shared memory") */
    bool shm = round_part && (buf[3] & MP_DATA_LAYOUT_SHM) != 0;
    uint8_t layout = (uint8_t)(buf[3] & ~(shm ? MP_DATA_LAYOUT_SHM : 0u));
    if (layout > (round_part ? MP_DATA_LAYOUT_MAX : 0) ||
        !mp__codec_valid(codec) ||
        (buf[1] == MP_PART_STATE && codec != MOSHPIT_COMPRESS_NONE))
        return MOSHPIT_EPROTO;
    uint32_t count = (uint32_t)mp__load_le(buf + 4, 4);
    if (count > MP_DATA_MAX_COUNT)
        return MOSHPIT_EPROTO;
    if ((uint64_t)len != (uint64_t)MP_DATA_HDR_BYTES +
                             (shm ? MP_DATA_SHM_REF_BYTES
                                  : (uint64_t)mp__codec_bytes(codec, count)) +
                             MP_DATA_TAG_BYTES)
        return MOSHPIT_EPROTO;
    uint64_t wbits = mp__load_le(buf + 40, 8);
    double wsum;
    memcpy(&wsum, &wbits, sizeof wsum);
    if (!weight_sum_ok(wsum))
        return MOSHPIT_EPROTO;

    if (buf[1] == MP_PART_MARK &&
        (codec != MOSHPIT_COMPRESS_NONE || count != 0 || wsum != 0.0 ||
         mp__load_le(buf + 32, 8) != 0))
        return MOSHPIT_EPROTO; /* a mark carries no values, share or part */
    h->kind = buf[1];
    h->codec = codec;
    h->layout = layout;
    h->shm = shm;
    h->count = count;
    h->tag = mp__load_le(buf + 8, 8);
    h->counter = mp__load_le(buf + 16, 8);
    h->round_id = mp__load_le(buf + 24, 8);
    h->share = (uint32_t)mp__load_le(buf + 32, 4);
    h->part = (uint32_t)mp__load_le(buf + 36, 4);
    h->wsum = wsum;
    return MOSHPIT_OK;
}
