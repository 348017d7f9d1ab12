/* SPDX-License-Identifier: MIT */
/*
 * test_sim_protofuzz.c - a protocol fuzzer in the simulator: one admitted
 * hostile peer sends random and mutated valid messages at random virtual
 * times, and the invariants are checked while the honest peers go on.
 *
 * Swarm part (moshsim.h, its hostile peer): 48 honest peers (group size 8,
 * random weights; grid positions balanced or random by seed) and one
 * hostile member. For `attack` rounds the hostile peer sends, at random
 * times in each round, to random honest peers (JOINs mostly to the real
 * matchmaker of a real key):
 *   - random bytes;
 *   - JOIN with real or broken keys, absurd weights, bandwidths, windows,
 *     sequence numbers; JOIN_ACK, ALONE, LEAVE with seqs it saw in JOINs
 *     to itself or random ones; GROUP rosters forged for peers that JOINed
 *     it (or random ones): random size, members, weights, bandwidths,
 *     group ids;
 *   - data parts (encoded with the swarm's compression: every third seed
 *     runs BF16, INT8, INT4 or FP16 in turn, and a poisoned part then
 *     carries a binary16/bfloat16 infinity or a NaN scale): for the
 *     groups it was put in (it JOINs real
 *     matchmakers), scatter and gather parts with the round's real layout,
 *     values inside the honest range or NaN/Inf, and mutated ones (share,
 *     part, count, kind, wsum, group id: random, zero, finished rounds);
 *   - HELLO, PEERS, BYE, REFUSE, STATE_REQ, STATE_INFO and SWIM messages
 *     with random fields (decoded, then dropped: the simulator runs no
 *     session, state or SWIM code);
 *   - replays of what it sent or received (real honest JOINs, GROUPs and
 *     parts), to their sender or anyone, as they were or mutated;
 * and a third of everything is mutated at byte level (bit flips, msgpack
 * markers, 64-bit values, truncation, insertion). Every message is made by
 * the real encoders and read by the real decoders, then by the production
 * round machine and the core (moshsim_peer.c, core/round.c). Then the
 * hostile peer goes quiet for `quiet` rounds (it stays a member and
 * matchmaker).
 *
 * Checked at every hostile send and after every round:
 *   - no crash (the ASan/UBSan build runs this);
 *   - memory: every honest peer holds at most 8 matchmakers, at most one
 *     pending JOIN per live sender over all of them (<= live peers, far
 *     below MP_MM_PENDING_MAX), at most 4096 held parts;
 *   - every honest value is finite and inside the initial honest range
 *     [-scale, scale] (1e-5 relative slack): the hostile peer's finite
 *     values are drawn inside it, weights are >= 0, so any average stays
 *     inside, and NaN/Inf must never get in. Finite values outside it are
 *     not sent: with the default rule a group member may poison its
 *     groups (docs/SECURITY.md), which is not what this looks for. This is
 *     how the hostile contributions are kept out of the honest mean: its
 *     own vector is not measured, and what it can put into honest ones is
 *     bounded;
 *   - every call of a live honest peer ends, within round_timeout + 1 s;
 *   - every honest weight is finite, >= 0 and <= 1e15;
 *   - convergence: after the attack the honest MSE (around the honest
 *     weighted mean) reaches 1e-9 (with compression: the square of the
 *     format's step for values of magnitude 1, as its rounding leaves a
 *     floor) within 2 r_base + 2 rounds (and within
 *     `quiet`), r_base being the rounds the same seed needs with no
 *     hostile peer from random grid positions (rounds alone or in forged
 *     groups scramble a grid, so that is the yardstick; the scrambled
 *     grid the attack leaves is another draw, hence the factor).
 *
 * SWIM part (swim_world.h): 32 honest peers and one hostile member (a real
 * SWIM machine that also answers probes); for `swim_secs` virtual seconds
 * the hostile identity sends random bytes and SWIM messages of every type
 * (PING, ACK, PING_REQ, SYNC_REQ, SYNC, GOSSIP) with random and forged
 * fields: suspect/dead/left/alive claims about honest peers at their
 * current incarnation, above it and near 2^32, new identities, addresses,
 * cursors, targets, plus replays and byte mutations of what it received.
 * Checked: no honest peer ever declares another honest peer DEAD or LEFT
 * (event hook), member tables stay within max_members (48) and gossip
 * queues within queue_max, and after 70 quiet seconds every honest peer
 * sees every honest peer ALIVE at its own address.
 *
 * Options: --seeds N (6) --seed S (first seed, 1) --rounds R (attack
 * rounds, 30) --quiet Q (20) --peers P (48) --rate K (hostile wake-ups
 * per round, 200) --swim-secs T (120) --group-size M (8) --count K (16)
 * --churn C (0) --fail-prob P (0) --verbose. Deterministic from the
 * seeds: same options, same output.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/share.h"
#include "core/swim.h"
#include "sim/moshsim.h"
#include "sim/swim_world.h"
#include "wire/wire.h"
#include "wire/wire_swim.h"

#define TEST_MAX_PRINTED 40
#include "test_util.h"

typedef struct opts {
    uint32_t seeds, rounds, quiet, peers, rate, swim_secs;
    uint32_t group_size, count, churn;
    double fail_prob;
    uint64_t seed;
    bool verbose;
} opts_t;

/* ------------------------------------------------------------------ */
/* mutation                                                            */

typedef struct rng {
    simnet_rng_t r;
} rng_t;

static uint64_t rnd(rng_t *r, uint64_t n) {
    return n ? simnet_rng_below(&r->r, n) : 0;
}

static bool chance(rng_t *r, double p) {
    return simnet_rng01(&r->r) < p;
}

static uint64_t odd_u64(rng_t *r) {
    static const uint64_t v[] = {0,
                                 1,
                                 2,
                                 7,
                                 8,
                                 63,
                                 64,
                                 65,
                                 255,
                                 256,
                                 0x7fff,
                                 0xffff,
                                 0x7fffffff,
                                 0xffffffff,
                                 0x100000000u,
                                 UINT64_MAX / 2,
                                 UINT64_MAX - 1,
                                 UINT64_MAX};
    if (chance(r, 0.25))
        return simnet_rng_next(&r->r);
    return v[rnd(r, sizeof v / sizeof v[0])];
}

static uint32_t odd_u32(rng_t *r) {
    return (uint32_t)(chance(r, 0.5) ? odd_u64(r) : rnd(r, 100));
}

static double odd_weight(rng_t *r) {
    static const double v[] = {0.0, 1.0, 1e15, 1e-300, 5e-324, 0.5, 1e9, 2.0};
    if (chance(r, 0.3))
        return simnet_rng01(&r->r) * 3;
    return v[rnd(r, sizeof v / sizeof v[0])];
}

/* Byte-level mutation of buf[0..*len) in place (cap bytes of room). */
static void mutate_bytes(rng_t *r, uint8_t *buf, size_t *len, size_t cap) {
    static const uint8_t marks[] = {0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0,
                                    0xbf, 0xc0, 0xc1, 0xc2, 0xc4, 0xcb, 0xcc,
                                    0xcf, 0xd0, 0xd3, 0xd9, 0xdb, 0xdc, 0xdd,
                                    0xde, 0xdf, 0xe0, 0xff};
    uint32_t ops = 1 + (uint32_t)rnd(r, 4);
    for (uint32_t o = 0; o < ops; o++) {
        size_t n = *len;
        switch (rnd(r, 6)) {
        case 0: /* flip a bit */
            if (n)
                buf[rnd(r, n)] ^= (uint8_t)(1u << rnd(r, 8));
            break;
        case 1: /* a msgpack marker */
            if (n)
                buf[rnd(r, n)] = marks[rnd(r, sizeof marks)];
            break;
        case 2: /* a 64-bit value */
            if (n >= 8) {
                uint64_t v = odd_u64(r);
                memcpy(buf + rnd(r, n - 7), &v, 8);
            }
            break;
        case 3: /* truncate */
            if (n)
                *len = (size_t)rnd(r, n);
            break;
        case 4: /* insert a byte */
            if (n < cap) {
                size_t at = (size_t)rnd(r, n + 1);
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = (uint8_t)rnd(r, 256);
                *len = n + 1;
            }
            break;
        default: /* a random byte */
            if (n)
                buf[rnd(r, n)] = (uint8_t)rnd(r, 256);
            break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* swarm part                                                          */

enum {
    K_RANDOM,
    K_JOIN,
    K_SEQ,
    K_GROUP,
    K_PART,
    K_OTHER,
    K_SWIM,
    K_REPLAY,
    K_KINDS
};
static const char *const kind_name[K_KINDS] = {
    "random",        "JOIN", "ACK/ALONE/LEAVE", "GROUP", "part",
    "other control", "SWIM", "replay"};

#define POOL 128
#define FRAME_MAX (MP_DATA_HDR_BYTES + 4096 + MP_DATA_TAG_BYTES)

typedef struct tmpl {
    bool data;
    uint32_t from;
    size_t len;
    uint8_t buf[FRAME_MAX];
} tmpl_t;

typedef struct seen_join {
    uint32_t from;
    uint64_t seq;
} seen_join_t;

typedef struct fz {
    rng_t r;
    moshsim_t *s;
    uint32_t honest; /* initial honest peers: 0..honest-1 */
    uint32_t count;  /* floats per vector */
    uint8_t *frame;  /* room for a part of count floats */
    double scale;
    uint32_t codec; /* the swarm's compression */
    double range;   /* honest values stay within +-range */
    float *plain;   /* a part's values before encoding */
    bool active;
    tmpl_t *pool;
    uint32_t npool, pool_pos;
    seen_join_t joins[32];
    uint32_t njoins, joins_pos;
    mp_group_msg_t grp[4]; /* GROUPs it was put in, latest first */
    uint32_t ngrp;
    uint64_t sent[K_KINDS], mutated, enc_refused, recv;
    uint64_t wakes;
    mp_msg_t msg;
    mp_swim_msg_t swim;
    uint8_t buf[FRAME_MAX + MP_CTRL_MAX];
    /* first failures */
    uint32_t bad_mem, bad_value;
    char why[256];
} fz_t;

static uint32_t peer_of_id(const fz_t *f, const uint8_t *id) {
    uint32_t n = moshsim_peers(f->s);
    for (uint32_t q = 0; q < n; q++)
        if (memcmp(moshsim_id(f->s, q), id, MP_ID_BYTES) == 0)
            return q;
    return MOSHSIM_NONE;
}

static uint32_t random_honest(fz_t *f) {
    uint32_t n = moshsim_peers(f->s), h = moshsim_hostile(f->s);
    for (int i = 0; i < 64; i++) {
        uint32_t q = (uint32_t)rnd(&f->r, n);
        if (q != h && moshsim_alive(f->s, q))
            return q;
    }
    return 0;
}

static void pool_add(fz_t *f, bool data, uint32_t from, const uint8_t *buf,
                     size_t len) {
    if (len > FRAME_MAX)
        return;
    tmpl_t *t = &f->pool[f->pool_pos++ % POOL];
    if (f->npool < POOL)
        f->npool++;
    t->data = data;
    t->from = from;
    t->len = len;
    memcpy(t->buf, buf, len);
}

/* Sends buf (maybe mutated at byte level first) and counts it. */
static void emit(fz_t *f, uint32_t kind, uint32_t to, bool data, uint8_t *buf,
                 size_t len, size_t cap, bool keep) {
    if (keep)
        pool_add(f, data, moshsim_hostile(f->s), buf, len);
    if (chance(&f->r, 1.0 / 3)) {
        mutate_bytes(&f->r, buf, &len, cap);
        f->mutated++;
    }
    f->sent[kind]++;
    moshsim_hostile_send(f->s, to, data, buf, len);
}

/* Encodes f->msg and sends it; a message the encoder refuses (invalid
 * fields) is not sent: the decoder would refuse it the same way. */
static void send_msg(fz_t *f, uint32_t kind, uint32_t to) {
    size_t len = 0;
    if (mp__wire_msg_encode(&f->msg, f->buf, MP_CTRL_MAX, &len) != MOSHPIT_OK) {
        f->enc_refused++;
        return;
    }
    emit(f, kind, to, false, f->buf, len, MP_CTRL_MAX, true);
}

static void gen_random(fz_t *f) {
    size_t len = (size_t)rnd(&f->r, 300);
    for (size_t i = 0; i < len; i++)
        f->buf[i] = (uint8_t)rnd(&f->r, 256);
    if (len && chance(&f->r, 0.5))
        f->buf[0] = (uint8_t)(0x80 | rnd(&f->r, 16)); /* a fixmap */
    emit(f, K_RANDOM, random_honest(f), chance(&f->r, 0.2), f->buf, len,
         sizeof f->buf, false);
}

static void gen_join(fz_t *f) {
    mp_join_t *j = &f->msg.u.join;
    memset(&f->msg, 0, sizeof f->msg);
    f->msg.type = MP_MSG_JOIN;
    uint32_t like = random_honest(f);
    j->key_len = (uint32_t)moshsim_next_key(f->s, like, j->key);
    uint32_t to = moshsim_candidate(f->s, j->key, j->key_len, 0);
    if (to == moshsim_hostile(f->s) || to == MOSHSIM_NONE)
        to = random_honest(f);
    j->seq = chance(&f->r, 0.5) ? rnd(&f->r, 1u << 20) : odd_u64(&f->r);
    j->weight = chance(&f->r, 0.4) ? 1.0 : odd_weight(&f->r);
    j->bandwidth = chance(&f->r, 0.4) ? 100 : odd_u32(&f->r);
    j->window_ms = chance(&f->r, 0.5) ? 2000 : odd_u32(&f->r);
    /* the phase: an honest peer's count of ended calls, or anything */
    j->phase = chance(&f->r, 0.5) ? (uint32_t)rnd(&f->r, 4) : odd_u32(&f->r);
    /* cuts parts by the group like this version's peers, or not */
    j->parts = chance(&f->r, 0.7) ? 1 : 0;
    if (chance(&f->r, 0.3)) { /* a broken or foreign key */
        switch (rnd(&f->r, 5)) {
        case 0:
            j->key_len = (uint32_t)rnd(&f->r, MP_KEY_MAX + 1);
            break;
        case 1:
            j->key[8] = (uint8_t)rnd(&f->r, 256);
            break;
        case 2:
            if (j->key_len > 9)
                j->key[9 + rnd(&f->r, j->key_len - 9)] =
                    (uint8_t)rnd(&f->r, 256);
            break;
        case 3:
            j->key[rnd(&f->r, 8)] ^= 1; /* another vector length */
            break;
        default:
            for (uint32_t i = 0; i < MP_KEY_MAX; i++)
                j->key[i] = (uint8_t)rnd(&f->r, 256);
            j->key_len = (uint32_t)rnd(&f->r, MP_KEY_MAX + 1);
            break;
        }
        if (chance(&f->r, 0.5))
            to = random_honest(f);
    }
    if (chance(&f->r, 0.02)) { /* the same JOIN 60..99 times at once */
        size_t len = 0;
        if (mp__wire_msg_encode(&f->msg, f->buf, MP_CTRL_MAX, &len) !=
            MOSHPIT_OK)
            return;
        uint32_t k = 60 + (uint32_t)rnd(&f->r, 40);
        f->sent[K_JOIN] += k;
        for (uint32_t i = 0; i < k; i++)
            moshsim_hostile_send(f->s, to, false, f->buf, len);
        return;
    }
    send_msg(f, K_JOIN, to);
}

/* A peer that JOINed the hostile peer (with its seq), or a random one. */
static uint32_t pick_joiner(fz_t *f, uint64_t *seq) {
    if (f->njoins > 0 && chance(&f->r, 0.7)) {
        const seen_join_t *sj = &f->joins[rnd(&f->r, f->njoins)];
        *seq = sj->seq + (chance(&f->r, 0.8) ? 0 : rnd(&f->r, 3));
        return sj->from;
    }
    *seq = chance(&f->r, 0.5) ? rnd(&f->r, 1u << 16) : odd_u64(&f->r);
    return random_honest(f);
}

static void gen_seq(fz_t *f) {
    uint64_t seq;
    uint32_t to = pick_joiner(f, &seq);
    memset(&f->msg, 0, sizeof f->msg);
    static const mp_msg_type_t t[] = {MP_MSG_JOIN_ACK, MP_MSG_ALONE,
                                      MP_MSG_LEAVE};
    f->msg.type = t[rnd(&f->r, 3)];
    f->msg.u.ack.seq = seq;
    send_msg(f, K_SEQ, to);
}

static void gen_group(fz_t *f) {
    uint64_t seq;
    uint32_t to = pick_joiner(f, &seq);
    memset(&f->msg, 0, sizeof f->msg);
    f->msg.type = MP_MSG_GROUP;
    mp_group_msg_t *g = &f->msg.u.group;
    g->seq = seq;
    g->group_id = chance(&f->r, 0.2) && f->ngrp
                      ? f->grp[0].group_id
                      : 1 + rnd(&f->r, UINT64_MAX - 1);
    g->n = chance(&f->r, 0.8) ? 2 + (uint32_t)rnd(&f->r, 7)
                              : 2 + (uint32_t)rnd(&f->r, MP_GROUP_MAX - 1);
    uint32_t self =
        chance(&f->r, 0.9) ? (uint32_t)rnd(&f->r, g->n) : UINT32_MAX;
    for (uint32_t i = 0; i < g->n; i++) {
        mp_member_t *m = &g->members[i];
        uint32_t who;
        if (i == self)
            who = to;
        else if (chance(&f->r, 0.15))
            who = moshsim_hostile(f->s);
        else
            who = random_honest(f);
        if (chance(&f->r, 0.1)) /* an identity nobody has */
            for (uint32_t b = 0; b < MP_ID_BYTES; b++)
                m->id[b] = (uint8_t)rnd(&f->r, 256);
        else
            memcpy(m->id, moshsim_id(f->s, who), MP_ID_BYTES);
        m->weight = chance(&f->r, 0.5) ? 1.0 : odd_weight(&f->r);
        m->bandwidth = chance(&f->r, 0.5) ? 100 : odd_u32(&f->r);
    }
    /* the encoder refuses duplicate members: a duplicate (other than the
     * receiver) becomes an identity nobody has */
    for (uint32_t i = 0; i < g->n; i++)
        for (uint32_t k = 0; k < i; k++) {
            if (memcmp(g->members[i].id, g->members[k].id, MP_ID_BYTES) != 0)
                continue;
            uint8_t *id = g->members[i == self ? k : i].id;
            for (uint32_t b = 0; b < MP_ID_BYTES; b++)
                id[b] = (uint8_t)rnd(&f->r, 256);
        }
    send_msg(f, K_GROUP, to);
}

/* A part for a group the hostile peer was put in, with the group's real
 * layout, then maybe mutated at field level. */
static void gen_part(fz_t *f) {
    if (f->ngrp == 0) {
        gen_join(f); /* get into a group first */
        return;
    }
    const mp_group_msg_t *g = &f->grp[rnd(&f->r, f->ngrp)];
    uint32_t self = UINT32_MAX;
    const uint8_t *hid = moshsim_id(f->s, moshsim_hostile(f->s));
    uint32_t bw[MP_GROUP_MAX], bb[MP_GROUP_MAX];
    for (uint32_t i = 0; i < g->n; i++) {
        if (memcmp(g->members[i].id, hid, MP_ID_BYTES) == 0)
            self = i;
        bw[i] = g->members[i].bandwidth;
    }
    if (self == UINT32_MAX || g->n < 2)
        return;
    mp__share_bandwidth_bound(g->n, bw, bb);
    size_t off[MP_GROUP_MAX], len[MP_GROUP_MAX];
    if (mp__share_split(g->n, bb, f->count, off, len) != 0)
        return;
    uint32_t dest = (uint32_t)rnd(&f->r, g->n - 1);
    if (dest >= self)
        dest++;
    uint32_t to = peer_of_id(f, g->members[dest].id);
    if (to == MOSHSIM_NONE)
        return;
    mp_data_hdr_t h;
    memset(&h, 0, sizeof h);
    h.round_id = g->group_id;
    if (chance(&f->r, 0.5)) {
        h.kind = MP_PART_SCATTER;
        h.share = dest;
    } else {
        h.kind = MP_PART_GATHER;
        h.share = self;
        h.wsum = chance(&f->r, 0.8) ? simnet_rng01(&f->r.r) * 4 : 0;
    }
    bool cut = true; /* every member cuts parts by the group (GROUP "pp") */
    for (uint32_t i = 0; i < g->n; i++)
        cut = cut && g->members[i].parts;
    uint32_t pe =
        cut ? mp__share_part_elems(f->count, g->n) : MP_PART_ELEMS_DEFAULT;
    uint32_t np = mp__share_parts(len[h.share], pe);
    h.part = np ? (uint32_t)rnd(&f->r, np) : 0;
    size_t rest = len[h.share] - (size_t)h.part * pe;
    h.count = (uint32_t)(rest < pe ? rest : pe);
    if (chance(&f->r, 0.35)) { /* field-level mutation */
        switch (rnd(&f->r, 8)) {
        case 0:
            h.share = odd_u32(&f->r);
            break;
        case 1:
            h.part = odd_u32(&f->r);
            break;
        case 2:
            h.count = (uint32_t)rnd(&f->r, 64);
            break;
        case 3:
            h.kind = (uint8_t)rnd(&f->r, 5);
            break;
        case 4:
            h.wsum = chance(&f->r, 0.5) ? 1e300 : -1.0;
            break;
        case 5:
            h.round_id = chance(&f->r, 0.5) ? 0 : odd_u64(&f->r);
            break;
        case 6:
            h.share = h.share == self ? dest : self;
            break;
        default:
            h.wsum = NAN;
            break;
        }
    }
    if (h.count > f->count)
        h.count = f->count;
    h.tag = odd_u64(&f->r);
    h.counter = f->wakes;
    uint8_t *b = f->frame;
    h.codec = (uint8_t)f->codec;
    mp__wire_data_hdr_encode(&h, b);
    float *v = f->codec ? f->plain : (float *)(void *)(b + MP_DATA_HDR_BYTES);
    uint32_t poison = (uint32_t)rnd(&f->r, 10);
    for (uint32_t i = 0; i < h.count; i++) {
        float x = (float)((2 * simnet_rng01(&f->r.r) - 1) * f->scale);
        if (poison == 0 || (poison == 1 && i == 0))
            x = NAN;
        else if (poison == 2)
            x = i % 2 ? INFINITY : -INFINITY;
        memcpy(v + i, &x, sizeof x);
    }
    size_t body = mp__codec_bytes(f->codec, h.count);
    if (f->codec != MOSHPIT_COMPRESS_NONE) {
        uint8_t *e = b + MP_DATA_HDR_BYTES;
        mp__codec_encode(f->codec, v, h.count, e);
        /* binary16 saturates an infinity: poison with the codes */
        if (poison == 2 && h.count > 0 && f->codec <= MOSHPIT_COMPRESS_BF16) {
            e[0] = 0;
            e[1] = f->codec == MOSHPIT_COMPRESS_FP16 ? 0x7c : 0x7f;
            if (f->codec == MOSHPIT_COMPRESS_BF16)
                e[0] = 0x80;
        }
    }
    size_t n = MP_DATA_HDR_BYTES + body + MP_DATA_TAG_BYTES;
    memset(b + n - MP_DATA_TAG_BYTES, 0, MP_DATA_TAG_BYTES);
    /* byte mutations of a frame must not smuggle finite values outside
     * the range into the payload: mutate the header only */
    bool keep = poison > 2;
    if (keep)
        pool_add(f, true, moshsim_hostile(f->s), b, n);
    if (chance(&f->r, 0.2)) {
        size_t hl = MP_DATA_HDR_BYTES;
        mutate_bytes(&f->r, b, &hl, MP_DATA_HDR_BYTES);
        f->mutated++;
    }
    f->sent[K_PART]++;
    moshsim_hostile_send(f->s, to, true, b, n);
}

static void rand_str(fz_t *f, char *s, size_t cap) {
    size_t n = (size_t)rnd(&f->r, cap);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(32 + rnd(&f->r, 95));
    s[n] = 0;
}

static void gen_other(fz_t *f) {
    memset(&f->msg, 0, sizeof f->msg);
    mp_msg_t *m = &f->msg;
    switch (rnd(&f->r, 6)) {
    case 0:
        m->type = MP_MSG_HELLO;
        m->u.hello.tag = odd_u64(&f->r);
        m->u.hello.bandwidth = odd_u32(&f->r);
        m->u.hello.ciphers = odd_u32(&f->r);
        m->u.hello.reply = (uint8_t)rnd(&f->r, 2);
        rand_str(f, m->u.hello.ctrl_addr, MP_ADDR_MAX);
        rand_str(f, m->u.hello.data_addr, MP_ADDR_MAX);
        break;
    case 1:
        m->type = MP_MSG_PEERS;
        m->u.peers.n = (uint32_t)rnd(&f->r, MP_PEERS_MAX + 1);
        for (uint32_t i = 0; i < m->u.peers.n; i++) {
            memcpy(m->u.peers.peers[i].id,
                   moshsim_id(f->s, (uint32_t)rnd(&f->r, f->honest)),
                   MP_ID_BYTES);
            rand_str(f, m->u.peers.peers[i].addr, 40);
        }
        break;
    case 2:
        m->type = chance(&f->r, 0.5) ? MP_MSG_BYE : MP_MSG_REFUSE;
        m->u.refuse.reason = odd_u32(&f->r);
        break;
    case 3:
        m->type = MP_MSG_STATE_REQ;
        m->u.state_req.seq = odd_u64(&f->r);
        m->u.state_req.version = chance(&f->r, 0.3) ? 0 : odd_u64(&f->r);
        m->u.state_req.first = odd_u32(&f->r);
        m->u.state_req.n = m->u.state_req.version
                               ? 1 + (uint32_t)rnd(&f->r, MP_STATE_GET_MAX)
                               : 0;
        break;
    default:
        m->type = MP_MSG_STATE_INFO;
        m->u.state_info.seq = odd_u64(&f->r);
        m->u.state_info.version = odd_u64(&f->r);
        m->u.state_info.round = odd_u64(&f->r);
        m->u.state_info.count = rnd(&f->r, MP_STATE_COUNT_MAX);
        break;
    }
    send_msg(f, K_OTHER, random_honest(f));
}

/* A SWIM message with random fields (used by both parts). */
static void rand_swim(rng_t *r, mp_swim_msg_t *m, const uint8_t (*ids)[32],
                      size_t nids, const uint32_t *incs) {
    memset(m, 0, sizeof *m);
    m->type = (mp_swim_msg_type_t)(MP_SWIM_MSG_PING + rnd(r, 6));
    m->inc = chance(r, 0.7) ? (uint32_t)rnd(r, 4) : odd_u32(r);
    m->seq = chance(r, 0.5) ? rnd(r, 1000) : odd_u64(r);
    if (m->type == MP_SWIM_MSG_PING_REQ || chance(r, 0.3)) {
        m->has_target = 1;
        memcpy(m->target, ids[rnd(r, nids)], 32);
        if (chance(r, 0.1))
            m->target[5] ^= 0x40;
    }
    if (chance(r, 0.8))
        snprintf(m->addr, sizeof m->addr, "s:%u", (unsigned)rnd(r, 64));
    m->cursor = odd_u32(r);
    m->next = chance(r, 0.5) ? 0 : odd_u32(r);
    uint32_t nu = (uint32_t)rnd(r, 9);
    if (m->type == MP_SWIM_MSG_SYNC)
        m->n_entries = (uint32_t)rnd(r, 9);
    for (uint32_t k = 0; k < nu + m->n_entries; k++) {
        mp_swim_update_t *u = k < nu ? &m->updates[k] : &m->entries[k - nu];
        size_t who = rnd(r, nids);
        memcpy(u->id, ids[who], 32);
        if (chance(r, 0.15)) { /* a new identity */
            u->id[0] = 0x7f;
            u->id[1] = (uint8_t)rnd(r, 256);
            u->id[2] = (uint8_t)rnd(r, 256);
        }
        u->state = (uint8_t)rnd(r, 4);
        uint32_t cur = incs != NULL ? incs[who] : 0;
        switch (rnd(r, 5)) {
        case 0:
            u->inc = cur;
            break;
        case 1:
            u->inc = cur + 1 + (uint32_t)rnd(r, 3);
            break;
        case 2:
            u->inc = UINT32_MAX - (uint32_t)rnd(r, 3);
            break;
        case 3:
            u->inc = cur ? cur - 1 : 0;
            break;
        default:
            u->inc = odd_u32(r);
            break;
        }
        if (u->state != MP_SWIM_ALIVE && u->inc > MP_SWIM_INC_CLAIM_MAX &&
            chance(r, 0.5))
            u->inc = MP_SWIM_INC_CLAIM_MAX;
        if (chance(r, 0.4)) {
            u->has_addr = 1;
            snprintf(u->addr, sizeof u->addr, "s:%u", (unsigned)rnd(r, 100));
        }
    }
    m->n_updates = nu;
}

static void gen_swim(fz_t *f) {
    uint8_t ids[4][32];
    for (int i = 0; i < 4; i++)
        memcpy(ids[i], moshsim_id(f->s, (uint32_t)rnd(&f->r, f->honest)), 32);
    rand_swim(&f->r, &f->swim, (const uint8_t(*)[32])ids, 4, NULL);
    size_t len = 0;
    if (mp__wire_swim_msg_encode(&f->swim, f->buf, MP_SWIM_MSG_MAX, &len) !=
        MOSHPIT_OK) {
        f->enc_refused++;
        return;
    }
    emit(f, K_SWIM, random_honest(f), false, f->buf, len, MP_CTRL_MAX, false);
}

static void gen_replay(fz_t *f) {
    if (f->npool == 0) {
        gen_random(f);
        return;
    }
    const tmpl_t *t = &f->pool[rnd(&f->r, f->npool)];
    uint32_t to = t->from != moshsim_hostile(f->s) && chance(&f->r, 0.5)
                      ? t->from
                      : random_honest(f);
    size_t len = t->len;
    memcpy(f->buf, t->buf, len);
    if (t->data) { /* header mutations only (see gen_part) */
        if (chance(&f->r, 0.3)) {
            size_t hl = MP_DATA_HDR_BYTES;
            mutate_bytes(&f->r, f->buf, &hl, MP_DATA_HDR_BYTES);
            f->mutated++;
        }
        f->sent[K_REPLAY]++;
        moshsim_hostile_send(f->s, to, true, f->buf, len);
        return;
    }
    emit(f, K_REPLAY, to, false, f->buf, len, MP_CTRL_MAX, false);
}

/* Memory bounds and the value range, over every honest peer. */
static void check_swarm(fz_t *f, const char *when) {
    uint32_t live = 0, n = moshsim_peers(f->s);
    /* each round may round a value up by a step of the encoding */
    static const double up[] = {0, 0x1p-10, 0x1p-7, 1e-6, 1e-6};
    f->range *= 1 + up[f->codec];
    for (uint32_t q = 0; q < n; q++)
        live += moshsim_alive(f->s, q);
    for (uint32_t q = 0; q < n; q++) {
        if (!moshsim_alive(f->s, q) || q == moshsim_hostile(f->s))
            continue;
        moshsim_peer_mem_t m;
        moshsim_peer_mem(f->s, q, &m);
        if (m.mm_slots > 8 || m.mm_pending > live || m.held > 4096) {
            if (f->bad_mem++ == 0)
                snprintf(f->why, sizeof f->why,
                         "%s: peer %u holds %u matchmakers, %zu pending "
                         "JOINs (%u live), %zu held parts",
                         when, q, m.mm_slots, m.mm_pending, live, m.held);
        }
        double w = moshsim_weight(f->s, q);
        if (!(w >= 0 && w <= 1e15) && f->bad_value++ == 0)
            snprintf(f->why, sizeof f->why, "%s: peer %u has weight %g", when,
                     q, w);
        const float *v = moshsim_values(f->s, q);
        for (uint32_t e = 0; e < f->count; e++)
            if (!isfinite(v[e]) || fabs((double)v[e]) > f->range) {
                if (f->bad_value++ == 0)
                    snprintf(f->why, sizeof f->why,
                             "%s: peer %u element %u = %g (range %g)", when, q,
                             e, (double)v[e], f->scale);
                break;
            }
    }
}

static void on_wake(moshsim_t *s, void *user) {
    fz_t *f = user;
    (void)s;
    if (!f->active)
        return;
    f->wakes++;
    uint32_t burst = chance(&f->r, 0.05) ? 2 + (uint32_t)rnd(&f->r, 8) : 1;
    for (uint32_t b = 0; b < burst; b++) {
        switch (rnd(&f->r, 12)) {
        case 0:
            gen_random(f);
            break;
        case 1:
        case 2:
            gen_join(f);
            break;
        case 3:
            gen_seq(f);
            break;
        case 4:
            gen_group(f);
            break;
        case 5:
        case 6:
        case 7:
            gen_part(f);
            break;
        case 8:
            gen_other(f);
            break;
        case 9:
            gen_swim(f);
            break;
        default:
            gen_replay(f);
            break;
        }
    }
    check_swarm(f, "during a round");
}

static void on_recv(moshsim_t *s, void *user, uint32_t from, bool data,
                    const uint8_t *buf, size_t len) {
    fz_t *f = user;
    (void)s;
    f->recv++;
    pool_add(f, data, from, buf, len);
    if (data)
        return;
    mp_msg_t *m = &f->msg;
    if (mp__wire_msg_decode(buf, len, m) != MOSHPIT_OK)
        return;
    if (m->type == MP_MSG_JOIN) {
        f->joins[f->joins_pos++ % 32] = (seen_join_t){from, m->u.join.seq};
        if (f->njoins < 32)
            f->njoins++;
    } else if (m->type == MP_MSG_GROUP) {
        memmove(&f->grp[1], &f->grp[0], 3 * sizeof f->grp[0]);
        f->grp[0] = m->u.group;
        if (f->ngrp < 4)
            f->ngrp++;
    }
}

typedef struct swarm_res {
    uint64_t sent[K_KINDS], mutated, enc_refused, recv;
    moshsim_wire_stats_t ws;
    int conv_after;  /* quiet rounds to MSE <= 1e-9, -1 never */
    int base_rounds; /* rounds without a hostile peer, -1 never */
    double mse_attack_max, mse_final;
    uint32_t bad_rounds;
} swarm_res_t;

static void swarm_cfg(moshsim_cfg_t *c, const opts_t *o, uint64_t seed) {
    moshsim_cfg_init(c);
    c->peers = o->peers;
    c->group_size = o->group_size;
    c->count = o->count;
    c->churn = o->churn;
    c->fail_prob = o->fail_prob;
    c->seed = seed;
    c->random_weights = true;
    c->random_positions = seed % 2 == 0;
    if (seed % 3 == 0)
        c->agg.codec = 1 + (uint32_t)(seed / 3) % 4;
}

/* The MSE the swarm must reach: 1e-9, or the square of the encoding's
 * step at magnitude 1 (quantization leaves a floor well below it). */
static double mse_goal(uint32_t codec) {
    static const double step[] = {0, 0x1p-10, 0x1p-7, 1.0 / 127, 1.0 / 7};
    return codec == 0 ? 1e-9 : step[codec] * step[codec];
}

/* Rounds the seed needs to MSE <= 1e-9 with no hostile peer, from random
 * grid positions: rounds a peer spends alone or in a forged group move it
 * to a random coordinate, so after an attack the grid is scrambled and
 * this is the fair yardstick. */
static int baseline(const opts_t *o, uint64_t seed) {
    moshsim_cfg_t c;
    swarm_cfg(&c, o, seed);
    c.random_positions = true;
    moshsim_t *s = moshsim_new(&c);
    int at = -1;
    for (uint32_t r = 1; r <= o->rounds + o->quiet && at < 0; r++) {
        moshsim_stats_t st;
        moshsim_round(s, &st);
        if (st.mse <= mse_goal(c.agg.codec))
            at = (int)r;
    }
    moshsim_free(s);
    return at;
}

static void swarm_run(const opts_t *o, uint64_t seed, swarm_res_t *res) {
    memset(res, 0, sizeof *res);
    res->base_rounds = baseline(o, seed);
    moshsim_cfg_t c;
    swarm_cfg(&c, o, seed);
    c.hostile = true;
    moshsim_t *s = moshsim_new(&c);
    fz_t *f = calloc(1, sizeof *f);
    f->pool = calloc(POOL, sizeof *f->pool);
    if (s == NULL || f == NULL || f->pool == NULL)
        abort();
    simnet_rng_seed(&f->r.r, seed * 0x9e3779b97f4a7c15u + 7);
    f->s = s;
    f->honest = c.peers;
    f->count = c.count;
    f->frame =
        malloc(MP_DATA_HDR_BYTES + (size_t)c.count * 4 +
               4 * ((size_t)c.count / MP_CODEC_BLOCK + 1) + MP_DATA_TAG_BYTES);
    if (f->frame == NULL)
        abort();
    f->active = true;
    for (uint32_t q = 0; q < c.peers; q++)
        for (uint32_t e = 0; e < c.count; e++)
            f->scale = fmax(f->scale, fabs((double)moshsim_values(s, q)[e]));
    f->range = f->scale * 1.00001;
    f->codec = c.agg.codec;
    f->plain = malloc((size_t)c.count * sizeof(float));
    if (f->plain == NULL)
        abort();
    moshsim_hostile_ops_t ops = {on_recv, on_wake};
    moshsim_hostile_set_ops(s, &ops, f);
    res->conv_after = -1;
    uint32_t span = c.matchmaking_ms + 4000;
    for (uint32_t r = 1; r <= o->rounds + o->quiet; r++) {
        bool attack = r <= o->rounds;
        f->active = attack;
        if (attack) {
            uint64_t t0 = moshsim_next_start(s);
            for (uint32_t k = 0; k < o->rate; k++)
                moshsim_hostile_wake(s, t0 + rnd(&f->r, span));
        }
        moshsim_stats_t st;
        moshsim_round(s, &st);
        char when[64];
        snprintf(when, sizeof when, "seed %" PRIu64 " round %u", seed, r);
        check_swarm(f, when);
        if (st.hung != 0 || st.max_call_ms > c.round_timeout_ms + 1000) {
            res->bad_rounds++;
            CHECK(false, "%s: %u calls hung, longest %" PRIu64 " ms", when,
                  st.hung, st.max_call_ms);
        }
        if (attack && st.mse > res->mse_attack_max)
            res->mse_attack_max = st.mse;
        if (!attack && res->conv_after < 0 && st.mse <= mse_goal(f->codec))
            res->conv_after = (int)(r - o->rounds);
        res->mse_final = st.mse;
        if (o->verbose)
            printf("  seed %" PRIu64 " round %2u%s: groups %u (full %u), "
                   "alone %u, degraded %u, mse %.3g\n",
                   seed, r, attack ? " (attack)" : "", st.groups,
                   st.full_groups, st.alone, st.degraded, st.mse);
    }
    CHECK(f->bad_mem == 0, "seed %" PRIu64 ": %u memory bound violations: %s",
          seed, f->bad_mem, f->why);
    CHECK(f->bad_value == 0, "seed %" PRIu64 ": %u values out of range: %s",
          seed, f->bad_value, f->why);
    memcpy(res->sent, f->sent, sizeof res->sent);
    res->mutated = f->mutated;
    res->enc_refused = f->enc_refused;
    res->recv = f->recv;
    res->ws = *moshsim_wire_stats(s);
    free(f->frame);
    free(f->plain);
    free(f->pool);
    free(f);
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* SWIM part                                                           */

#define SW_N 32u /* honest peers 0..31; the hostile one is 32 */

typedef struct sfz {
    rng_t r;
    swim_world_t *w;
    uint32_t false_dead;
    char first[160];
    tmpl_t *pool;
    uint32_t npool, pool_pos;
    uint64_t sent_valid, sent_raw, sent_replay, mutated;
    mp_swim_msg_t msg;
    uint8_t buf[MP_SWIM_MSG_MAX];
} sfz_t;

static void sw_event(swim_world_t *w, uint32_t peer, const mp_swim_event_t *ev,
                     void *user) {
    sfz_t *f = user;
    int64_t subj = swim_world_peer_of(w, ev->id);
    if (peer >= SW_N || subj < 0 || subj >= SW_N ||
        !swim_world_alive(w, (uint32_t)subj))
        return;
    if (ev->type == MP_SWIM_EV_DEAD || ev->type == MP_SWIM_EV_LEFT) {
        if (f->false_dead++ == 0)
            snprintf(f->first, sizeof f->first,
                     "peer %u declared live peer %" PRId64 " %s at %" PRIu64
                     " ms",
                     peer, subj, ev->type == MP_SWIM_EV_DEAD ? "dead" : "left",
                     swim_world_now(w));
    }
}

static void sw_recv(swim_world_t *w, uint32_t peer, const uint8_t *from,
                    const uint8_t *bytes, size_t len, void *user) {
    sfz_t *f = user;
    if (peer != SW_N || len > FRAME_MAX)
        return;
    tmpl_t *t = &f->pool[f->pool_pos++ % POOL];
    if (f->npool < POOL)
        f->npool++;
    int64_t p = swim_world_peer_of(w, from);
    t->from = p < 0 ? 0 : (uint32_t)p;
    t->len = len;
    memcpy(t->buf, bytes, len);
}

typedef struct swim_res {
    uint64_t valid, raw, replay, mutated, refused;
    uint32_t false_dead, wrong_views;
    size_t max_members, max_queue;
    mp_swim_stats_t sum;
} swim_res_t;

static void swim_run(const opts_t *o, uint64_t seed, swim_res_t *res) {
    memset(res, 0, sizeof *res);
    mp_swim_config_t cfg;
    mp__swim_config_default(&cfg);
    cfg.max_members = 48;
    cfg.queue_max = 256;
    swim_world_t *w = swim_world_new(SW_N + 1, &cfg, seed, 5, 5);
    sfz_t *f = calloc(1, sizeof *f);
    f->pool = calloc(POOL, sizeof *f->pool);
    if (w == NULL || f == NULL || f->pool == NULL)
        abort();
    simnet_rng_seed(&f->r.r, seed * 0x2545f4914f6cdd1du + 3);
    f->w = w;
    swim_world_start(w, 0);
    for (uint32_t p = 1; p <= SW_N; p++) {
        swim_world_start(w, p);
        swim_world_join(w, p, 0);
    }
    swim_world_run(w, 20000);
    swim_world_set_hook(w, sw_event, f);
    swim_world_set_recv_hook(w, sw_recv, f);
    uint8_t ids[SW_N + 1][32], hid[32];
    for (uint32_t p = 0; p <= SW_N; p++)
        swim_world_id(p, ids[p]);
    memcpy(hid, ids[SW_N], 32);
    uint32_t incs[SW_N + 1];
    uint64_t t0 = swim_world_now(w), end = t0 + (uint64_t)o->swim_secs * 1000;
    for (uint64_t now = t0; now < end;) {
        now += 1 + rnd(&f->r, 40); /* about 50 messages a second */
        swim_world_run(w, now);
        for (uint32_t p = 0; p <= SW_N; p++)
            incs[p] = mp__swim_self_inc(swim_world_sw(w, p));
        uint32_t to = (uint32_t)rnd(&f->r, SW_N);
        uint64_t k = rnd(&f->r, 10);
        if (k < 5) {
            rand_swim(&f->r, &f->msg, (const uint8_t(*)[32])ids, SW_N + 1,
                      incs);
            size_t len = 0;
            if (mp__wire_swim_msg_encode(&f->msg, f->buf, sizeof f->buf,
                                         &len) != MOSHPIT_OK) {
                res->refused++;
                continue;
            }
            if (chance(&f->r, 0.3)) {
                mutate_bytes(&f->r, f->buf, &len, sizeof f->buf);
                f->mutated++;
            }
            f->sent_valid++;
            swim_world_inject_raw(w, hid, to, f->buf, len);
        } else if (k < 7 && f->npool > 0) {
            const tmpl_t *t = &f->pool[rnd(&f->r, f->npool)];
            size_t len = t->len;
            memcpy(f->buf, t->buf, len);
            if (chance(&f->r, 0.4)) {
                mutate_bytes(&f->r, f->buf, &len, sizeof f->buf);
                f->mutated++;
            }
            f->sent_replay++;
            swim_world_inject_raw(w, hid, chance(&f->r, 0.5) ? t->from : to,
                                  f->buf, len);
        } else {
            size_t len = (size_t)rnd(&f->r, 200);
            for (size_t i = 0; i < len; i++)
                f->buf[i] = (uint8_t)rnd(&f->r, 256);
            if (len)
                f->buf[0] = (uint8_t)(0x80 | rnd(&f->r, 16));
            f->sent_raw++;
            swim_world_inject_raw(w, hid, to, f->buf, len);
        }
        if (rnd(&f->r, 50) == 0) /* bounds, now and then */
            for (uint32_t p = 0; p < SW_N; p++) {
                mp_swim_t *sw = swim_world_sw(w, p);
                size_t cur = 0, nm = 0;
                mp_swim_member_t mm;
                while (mp__swim_member_next(sw, &cur, &mm))
                    nm++;
                size_t q = mp__swim_pending_updates(sw);
                if (nm > res->max_members)
                    res->max_members = nm;
                if (q > res->max_queue)
                    res->max_queue = q;
            }
    }
    swim_world_run(w, end + 70000);
    for (uint32_t ob = 0; ob < SW_N; ob++) {
        mp_swim_stats_t st;
        mp__swim_get_stats(swim_world_sw(w, ob), &st);
        res->sum.downgraded += st.downgraded;
        res->sum.refutes += st.refutes;
        res->sum.rejected += st.rejected;
        res->sum.refused_cap += st.refused_cap;
        res->sum.addr_hints += st.addr_hints;
        res->sum.unexpected += st.unexpected;
        for (uint32_t sj = 0; sj < SW_N; sj++) {
            mp_swim_member_t mm;
            char addr[16];
            if (!mp__swim_lookup(swim_world_sw(w, ob), ids[sj], &mm) ||
                mm.state != MP_SWIM_ALIVE ||
                strcmp(mm.addr, swim_world_addr(sj, addr)) != 0)
                res->wrong_views++;
        }
    }
    res->valid = f->sent_valid;
    res->raw = f->sent_raw;
    res->replay = f->sent_replay;
    res->mutated = f->mutated;
    res->refused = swim_world_raw_refused(w);
    res->false_dead = f->false_dead;
    CHECK(f->false_dead == 0, "swim seed %" PRIu64 ": %u false deaths: %s",
          seed, f->false_dead, f->first);
    CHECK(res->wrong_views == 0,
          "swim seed %" PRIu64 ": %u wrong views of honest peers at the end",
          seed, res->wrong_views);
    CHECK(res->max_members <= cfg.max_members &&
              res->max_queue <= cfg.queue_max,
          "swim seed %" PRIu64 ": %zu members, %zu queued", seed,
          res->max_members, res->max_queue);
    free(f->pool);
    free(f);
    swim_world_free(w);
}

/* ------------------------------------------------------------------ */

static int parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.seeds = 6,
                  .rounds = 30,
                  .quiet = 20,
                  .peers = 48,
                  .rate = 200,
                  .swim_secs = 120,
                  .group_size = 8,
                  .count = 16,
                  .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--verbose") == 0) {
            o->verbose = true;
            continue;
        }
        if (i + 1 >= argc)
            return -1;
        unsigned long long v = strtoull(argv[++i], NULL, 10);
        if (strcmp(a, "--seeds") == 0)
            o->seeds = (uint32_t)v;
        else if (strcmp(a, "--seed") == 0)
            o->seed = v;
        else if (strcmp(a, "--rounds") == 0)
            o->rounds = (uint32_t)v;
        else if (strcmp(a, "--quiet") == 0)
            o->quiet = (uint32_t)v;
        else if (strcmp(a, "--peers") == 0 && v >= 8 && v <= 4096)
            o->peers = (uint32_t)v;
        else if (strcmp(a, "--rate") == 0)
            o->rate = (uint32_t)v;
        else if (strcmp(a, "--swim-secs") == 0)
            o->swim_secs = (uint32_t)v;
        else if (strcmp(a, "--group-size") == 0 && v >= 2 && v <= 64)
            o->group_size = (uint32_t)v;
        else if (strcmp(a, "--count") == 0 && v >= 1 && v <= 1000000)
            o->count = (uint32_t)v;
        else if (strcmp(a, "--churn") == 0)
            o->churn = (uint32_t)v;
        else if (strcmp(a, "--fail-prob") == 0)
            o->fail_prob = strtod(argv[i], NULL);
        else
            return -1;
    }
    return o->quiet >= 1 ? 0 : -1;
}

int main(int argc, char **argv) {
    opts_t o;
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: test_sim_protofuzz [--seeds N] [--seed S] "
                        "[--rounds R] [--quiet Q] [--peers P] [--rate K] "
                        "[--swim-secs T] [--group-size M] [--count K] "
                        "[--churn C] [--fail-prob P] [--verbose]\n");
        return 2;
    }
    uint64_t tot[K_KINDS] = {0}, mutated = 0, refused = 0, total = 0;
    moshsim_wire_stats_t ws;
    memset(&ws, 0, sizeof ws);
    for (uint32_t i = 0; i < o.seeds; i++) {
        uint64_t seed = o.seed + i;
        swarm_res_t r;
        swarm_run(&o, seed, &r);
        uint64_t n = 0;
        for (int k = 0; k < K_KINDS; k++) {
            tot[k] += r.sent[k];
            n += r.sent[k];
        }
        total += n;
        mutated += r.mutated;
        refused += r.enc_refused;
        ws.ctrl_bad += r.ws.ctrl_bad;
        ws.swim += r.ws.swim;
        ws.data_bad += r.ws.data_bad;
        ws.part_held += r.ws.part_held;
        ws.part_ignored += r.ws.part_ignored;
        ws.join_bad_key += r.ws.join_bad_key;
        for (int k = 0; k < 12; k++)
            ws.by_type[k] += r.ws.by_type[k];
        for (int k = 0; k < 8; k++)
            ws.part_status[k] += r.ws.part_status[k];
        moshsim_cfg_t sc;
        swarm_cfg(&sc, &o, seed);
        int bound = r.base_rounds < 0 ? (int)o.quiet : 2 * r.base_rounds + 2;
        CHECK(r.conv_after > 0 && r.conv_after <= bound,
              "seed %" PRIu64 ": MSE <= %.2g %d rounds after the attack "
              "(no hostile peer: round %d; bound %d)",
              seed, mse_goal(sc.agg.codec), r.conv_after, r.base_rounds, bound);
        static const char *cn[] = {"", ", FP16", ", BF16", ", INT8", ", INT4"};
        printf("swarm seed %" PRIu64 " (%s keys%s): %" PRIu64
               " messages (%" PRIu64 " byte-mutated), %" PRIu64
               " received; max MSE during attack %.3g; MSE <= %.2g %d "
               "rounds after it (no hostile peer, random positions: at "
               "round %d)\n",
               seed, seed % 2 == 0 ? "random" : "grid", cn[sc.agg.codec], n,
               r.mutated, r.recv, r.mse_attack_max, mse_goal(sc.agg.codec),
               r.conv_after, r.base_rounds);
    }
    printf("swarm total: %" PRIu64 " messages over %u seeds x %u rounds of "
           "%u peers (%" PRIu64 " byte-mutated; %" PRIu64
           " field sets the encoder refused, not sent):",
           total, o.seeds, o.rounds, o.peers, mutated, refused);
    for (int k = 0; k < K_KINDS; k++)
        printf(" %s %" PRIu64 "%s", kind_name[k], tot[k],
               k + 1 < K_KINDS ? "," : "\n");
    printf("  receivers: %" PRIu64 " refused by both control decoders, %" PRIu64
           " SWIM; decoded JOIN %" PRIu64 " (%" PRIu64
           " with bad keys), JOIN_ACK %" PRIu64 ", GROUP %" PRIu64
           ", ALONE %" PRIu64 ", LEAVE %" PRIu64 ", other %" PRIu64
           "; frames: %" PRIu64
           " refused by the header decoder, parts OK %" PRIu64 ", dup %" PRIu64
           ", bad index %" PRIu64 ", non-finite %" PRIu64
           ", from dropped %" PRIu64 ", late %" PRIu64 ", held %" PRIu64
           ", ignored %" PRIu64 "\n",
           ws.ctrl_bad, ws.swim, ws.by_type[MP_MSG_JOIN], ws.join_bad_key,
           ws.by_type[MP_MSG_JOIN_ACK], ws.by_type[MP_MSG_GROUP],
           ws.by_type[MP_MSG_ALONE], ws.by_type[MP_MSG_LEAVE],
           ws.by_type[MP_MSG_HELLO] + ws.by_type[MP_MSG_PEERS] +
               ws.by_type[MP_MSG_BYE] + ws.by_type[MP_MSG_REFUSE] +
               ws.by_type[MP_MSG_STATE_REQ] + ws.by_type[MP_MSG_STATE_INFO],
           ws.data_bad, ws.part_status[MP_PART_OK], ws.part_status[MP_PART_DUP],
           ws.part_status[MP_PART_BAD_INDEX], ws.part_status[MP_PART_NONFINITE],
           ws.part_status[MP_PART_FROM_FAILED], ws.part_status[MP_PART_LATE],
           ws.part_held, ws.part_ignored);
    CHECK(ws.part_status[MP_PART_OK] > 0 && ws.by_type[MP_MSG_GROUP] > 0 &&
              ws.part_status[MP_PART_NONFINITE] > 0,
          "the fuzzer did not reach the core: %" PRIu64 " parts taken",
          ws.part_status[MP_PART_OK]);

    for (uint32_t i = 0; i < o.seeds && o.swim_secs > 0; i++) {
        uint64_t seed = o.seed + i;
        swim_res_t r;
        swim_run(&o, seed, &r);
        printf("swim seed %" PRIu64 ": %" PRIu64 " messages in %u s (%" PRIu64
               " valid SWIM, %" PRIu64 " replays, %" PRIu64 " random; %" PRIu64
               " byte-mutated, %" PRIu64
               " refused by the decoder); %u false deaths, %u wrong views; "
               "tables <= %zu, queues <= %zu; %" PRIu64
               " claims taken as suspicion, %" PRIu64 " refutations, %" PRIu64
               " updates rejected, %" PRIu64 " members refused at the cap\n",
               seed, r.valid + r.replay + r.raw, o.swim_secs, r.valid, r.replay,
               r.raw, r.mutated, r.refused, r.false_dead, r.wrong_views,
               r.max_members, r.max_queue, r.sum.downgraded, r.sum.refutes,
               r.sum.rejected, r.sum.refused_cap);
    }
    return test_summary("test_sim_protofuzz");
}
