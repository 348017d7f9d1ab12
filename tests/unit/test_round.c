/* SPDX-License-Identifier: MIT */
/*
 * test_round.c - unit tests of the round machine (core/round.c) through its
 * wire mapping (net/round_msg.c): a few machines exchange their outputs as
 * encoded control messages (mp__wire_msg_encode / mp__wire_msg_decode) on a
 * virtual clock, and the parts of their group all-reduce directly. Covered: a
 * group of three forms, averages and ends with the same group id; a JOIN
 * with a malformed key and a JOIN beyond the matchmaker slots are answered
 * ALONE; an undeliverable JOIN falls back to the next candidate at once; a
 * silent matchmaker is left with a LEAVE carrying the JOIN's seq; a lone
 * caller ends alone at its window's end; a GROUP from a stranger is
 * ignored and a member's death drops it from the group; the deadline ends
 * a call; a caller a round ahead (its JOIN's phase) does not break up
 * a full group of callers in step under the same key bytes. Every
 * failed check prints what failed; the exit status is nonzero if any did.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/round.h"
#include "net/round_msg.h"
#include "wire/wire.h"

#include "test_util.h"

#define NP 5u
#define COUNT 8u

typedef struct world {
    mp_rnd_t *rm[NP];
    mp_grid_t grid[NP];
    float values[NP][COUNT];
    uint8_t id[NP][MP_ID_BYTES];
    bool dead[NP]; /* sends to it fail */
    bool mute[NP]; /* messages to it are lost */
    bool old[NP];  /* of an earlier version: neither sends nor reads "pp" */
    uint32_t formed[NP];
    uint64_t now;
    mp_msg_t msg, dec;
    uint8_t buf[MP_CTRL_MAX];
    /* what the last drain saw, by type, from any machine */
    uint32_t sent[8];
    uint64_t leave_seq, join_seq;
    uint8_t leave_to;
    mp_rnd_msg_status_t last_status;
    uint32_t own_no_slot;
} world_t;

static world_t W;

static uint32_t peer_of(const uint8_t id[MP_ID_BYTES]) {
    for (uint32_t i = 0; i < NP; i++)
        if (memcmp(W.id[i], id, MP_ID_BYTES) == 0)
            return i;
    return UINT32_MAX;
}

static void world_init(uint32_t group_size, uint32_t min_group) {
    for (uint32_t i = 0; i < NP; i++)
        mp__rnd_free(W.rm[i]);
    memset(&W, 0, sizeof(W));
    W.now = 1000;
    for (uint32_t i = 0; i < NP; i++) {
        memset(W.id[i], 0x10 * (i + 1), MP_ID_BYTES);
        CHECK(mp__grid_init(&W.grid[i], group_size, 1, i, 7 + i) == MOSHPIT_OK,
              "grid %u", i);
        for (uint32_t e = 0; e < COUNT; e++)
            W.values[i][e] = (float)(i * 10 + e);
        mp_rnd_cfg_t c = {.group_size = group_size,
                          .min_group_size = min_group,
                          .matchmaking_ms = 1000,
                          .round_timeout_ms = 10000,
                          .peer_timeout_ms = 2000,
                          .bandwidth = 100,
                          .grid = &W.grid[i],
                          .seed = 99 + i,
                          .first_seq = 1 + 100000 * i};
        memcpy(c.self, W.id[i], MP_ID_BYTES);
        CHECK(mp__rnd_new(&c, &W.rm[i]) == MOSHPIT_OK, "new %u", i);
    }
}

/* What a peer of an earlier version sends and reads of a JOIN or GROUP:
 * no "pp" (JOIN and GROUP key, mp_member_t.parts). */
static void strip_parts(mp_msg_t *m) {
    if (m->type == MP_MSG_JOIN)
        m->u.join.parts = 0;
    if (m->type == MP_MSG_GROUP)
        for (uint32_t i = 0; i < m->u.group.n; i++)
            m->u.group.members[i].parts = 0;
}

/* Delivers every output of every machine until all are quiet. */
static void drain_all(void) {
    bool any = true;
    while (any) {
        any = false;
        for (uint32_t q = 0; q < NP; q++) {
            mp_rnd_out_t o;
            while (mp__rnd_next_out(W.rm[q], &o)) {
                any = true;
                if (o.kind == MP_RND_OUT_FORMED) {
                    W.formed[q]++;
                    continue;
                }
                if (o.kind != MP_RND_OUT_SEND) {
                    W.own_no_slot++;
                    continue;
                }
                W.sent[o.msg]++;
                if (o.msg == MP_RND_JOIN)
                    W.join_seq = o.seq;
                if (o.msg == MP_RND_LEAVE) {
                    W.leave_seq = o.seq;
                    W.leave_to = (uint8_t)peer_of(o.to);
                }
                uint32_t to = peer_of(o.to);
                if (to == UINT32_MAX || W.dead[to]) {
                    mp__rnd_send_failed(W.rm[q], W.now, &o);
                    continue;
                }
                if (W.mute[to])
                    continue;
                mp__round_msg_from_out(&o, &W.msg);
                size_t len = 0;
                CHECK(mp__wire_msg_encode(&W.msg, W.buf, sizeof(W.buf), &len) ==
                          MOSHPIT_OK,
                      "encode type %d", (int)W.msg.type);
                CHECK(mp__wire_msg_decode(W.buf, len, &W.dec) == MOSHPIT_OK,
                      "decode type %d", (int)W.msg.type);
                if (W.dec.type == MP_MSG_DONE)
                    continue;              /* the engine's business */
                if (W.old[q] || W.old[to]) /* "pp" not sent, or ignored */
                    strip_parts(&W.dec);
                W.last_status =
                    mp__round_msg_dispatch(W.rm[to], W.now, W.id[q], &W.dec);
            }
        }
    }
}

/* Moves group parts between members until nothing moves. */
static void move_parts(void) {
    bool any = true;
    while (any) {
        any = false;
        for (uint32_t q = 0; q < NP; q++) {
            mp_group_t *g = mp__rnd_group(W.rm[q]);
            uint32_t n = 0, self = 0;
            uint64_t gid = 0;
            const mp_member_t *r = mp__rnd_roster(W.rm[q], &n, &self, &gid);
            if (g == NULL || r == NULL)
                continue;
            for (uint32_t d = 0; d < n; d++) {
                if (d == self)
                    continue;
                uint32_t to = peer_of(r[d].id);
                mp_send_t s;
                while (mp__group_next_send(g, d, &s)) {
                    any = true;
                    mp_group_t *tg = mp__rnd_group(W.rm[to]);
                    CHECK(tg != NULL, "part for %u before its group", to);
                    if (tg != NULL)
                        (void)mp__group_on_part(tg, W.now, self, s.kind,
                                                s.share, s.part, s.data,
                                                s.count, s.wsum);
                }
            }
        }
    }
}

static void tick_all(uint64_t now) {
    W.now = now;
    for (uint32_t q = 0; q < NP; q++)
        mp__rnd_tick(W.rm[q], now);
    drain_all();
}

/* Past the quiet time after which M to 2 M - 1 pending JOINs close
 * (a sixteenth of the 1000 ms window). */
static void settle(void) {
    tick_all(W.now + 1000 / 16 + 1);
}

/* The candidates for key among peers[0..n), in rendezvous order. */
static size_t candidates(const uint8_t *key, uint32_t len,
                         const uint32_t *peers, size_t n,
                         uint8_t out[NP][MP_ID_BYTES]) {
    uint8_t ids[NP][MP_ID_BYTES];
    uint32_t order[NP];
    for (size_t i = 0; i < n; i++)
        memcpy(ids[i], W.id[peers[i]], MP_ID_BYTES);
    mp__rendezvous_order(key, len, (const uint8_t(*)[MP_ID_BYTES])ids, n,
                         order);
    for (size_t i = 0; i < n; i++)
        memcpy(out[i], ids[order[i]], MP_ID_BYTES);
    return n;
}

static void start(uint32_t q, const uint32_t *view, size_t n, uint8_t *key_out,
                  uint32_t *len_out) {
    uint8_t key[MP_KEY_MAX];
    uint32_t len = mp__rnd_key(W.rm[q], n, COUNT, key);
    uint8_t c[NP][MP_ID_BYTES];
    size_t k = candidates(key, len, view, n, c);
    mp_rnd_call_t call = {.key = key,
                          .key_len = len,
                          .cands = (const uint8_t(*)[MP_ID_BYTES])c,
                          .ncands = k,
                          .weight = 1.0,
                          .values = W.values[q],
                          .count = COUNT};
    CHECK(mp__rnd_start(W.rm[q], W.now, &call) == MOSHPIT_OK, "start %u", q);
    CHECK(mp__rnd_start(W.rm[q], W.now, &call) == MOSHPIT_EINVAL,
          "second start %u", q);
    if (key_out != NULL) {
        memcpy(key_out, key, len);
        *len_out = len;
    }
}

/* A vector of 3 x 65536 floats among 3: parts of 16384 floats (8 to an
 * even share, mp__share_part_elems) when every member sends "pp", 65536
 * when one of them is of an earlier version (it may be the matchmaker);
 * either way every member cuts the same parts and the mean is exact. */
#define BIG (3u * 65536u)
static float big[3][BIG];

static void part_size_round(int old) {
    world_init(3, 2);
    if (old >= 0)
        W.old[old] = true;
    const uint32_t view[3] = {0, 1, 2};
    for (uint32_t q = 0; q < 3; q++) {
        for (uint32_t e = 0; e < BIG; e++)
            big[q][e] = (float)(q * 10 + e % 100);
        uint8_t key[MP_KEY_MAX];
        uint32_t len = mp__rnd_key(W.rm[q], 3, BIG, key);
        uint8_t c[NP][MP_ID_BYTES];
        size_t k = candidates(key, len, view, 3, c);
        mp_rnd_call_t call = {.key = key,
                              .key_len = len,
                              .cands = (const uint8_t(*)[MP_ID_BYTES])c,
                              .ncands = k,
                              .weight = 1.0,
                              .values = big[q],
                              .count = BIG};
        CHECK(mp__rnd_start(W.rm[q], W.now, &call) == MOSHPIT_OK, "start %u",
              q);
    }
    drain_all();
    settle();
    uint64_t want = (old >= 0 ? 65536u : 16384u) * sizeof(float);
    for (uint32_t q = 0; q < 3; q++) {
        mp_group_t *g = mp__rnd_group(W.rm[q]);
        CHECK(g != NULL, "old %d: peer %u has no group", old, q);
        for (uint32_t s = 0; g != NULL && s < 3; s++)
            CHECK(mp__group_part_bytes(g, s) == want,
                  "old %d: peer %u share %u: parts of %llu bytes, want %llu",
                  old, q, s, (unsigned long long)mp__group_part_bytes(g, s),
                  (unsigned long long)want);
    }
    move_parts();
    for (uint32_t q = 0; q < 3; q++) {
        CHECK(mp__rnd_group_finished(W.rm[q]), "old %d: peer %u not finished",
              old, q);
        uint32_t bad = 0;
        for (uint32_t e = 0; e < BIG; e++)
            bad += fabsf(big[q][e] - (float)(10 + e % 100)) > 1e-4f;
        CHECK(bad == 0, "old %d: peer %u: %u values off the mean", old, q, bad);
        mp_rnd_result_t res;
        mp__rnd_end(W.rm[q], W.now + 5, MOSHPIT_OK, false, &res);
    }
    memset(W.old, 0, sizeof W.old);
}

static void test_part_size(void) {
    part_size_round(-1);
    for (int old = 0; old < 3; old++) /* each in turn, the matchmaker too */
        part_size_round(old);
}

static void test_group_of_three(void) {
    world_init(3, 2);
    /* peer 3 is in the view but does not call */
    const uint32_t view[4] = {0, 1, 2, 3};
    for (uint32_t q = 0; q < 3; q++)
        start(q, view, 4, NULL, NULL);
    drain_all();
    /* M to 2 M - 1 pending JOINs close once the key has been quiet for a
     * sixteenth of the window (core/matchmaker.h): not before */
    for (uint32_t q = 0; q < 3; q++)
        CHECK(W.formed[q] == 0, "peer %u formed before the quiet time", q);
    settle();
    uint64_t gid0 = 0;
    for (uint32_t q = 0; q < 3; q++) {
        uint32_t n = 0, self = 0;
        uint64_t gid = 0;
        CHECK(W.formed[q] == 1, "peer %u: %u FORMED", q, W.formed[q]);
        CHECK(mp__rnd_roster(W.rm[q], &n, &self, &gid) != NULL && n == 3,
              "peer %u: roster of %u", q, n);
        if (q == 0)
            gid0 = gid;
        CHECK(gid == gid0 && gid != 0, "peer %u: group id %llx", q,
              (unsigned long long)gid);
    }
    CHECK(W.sent[MP_RND_GROUP] == 2 && W.sent[MP_RND_JOIN] == 2 &&
              W.sent[MP_RND_JOIN_ACK] == 2,
          "GROUP %u JOIN %u ACK %u", W.sent[MP_RND_GROUP], W.sent[MP_RND_JOIN],
          W.sent[MP_RND_JOIN_ACK]);
    move_parts();
    for (uint32_t q = 0; q < 3; q++) {
        bool alone;
        moshpit_err_t e;
        CHECK(mp__rnd_group_finished(W.rm[q]), "peer %u not finished", q);
        CHECK(!mp__rnd_over(W.rm[q], W.now, &alone, &e), "peer %u over", q);
        for (uint32_t i = 0; i < COUNT; i++)
            CHECK(fabsf(W.values[q][i] - (float)(10 + i)) < 1e-5f,
                  "peer %u value %u = %g", q, i, (double)W.values[q][i]);
        mp_rnd_result_t res;
        mp__rnd_end(W.rm[q], W.now + 5, MOSHPIT_OK, false, &res);
        CHECK(res.grouped && res.group_size == 3 && res.group_id == gid0 &&
                  fabs(res.group_weight - 3.0) < 1e-12 && res.allreduce_ms == 5,
              "peer %u result: grouped %d size %u", q, res.grouped,
              res.group_size);
        CHECK(mp__rnd_recent_gid(W.rm[q], gid0), "peer %u forgot the gid", q);
        CHECK(!mp__rnd_in_call(W.rm[q]), "peer %u still in call", q);
    }
    W.sent[MP_RND_DONE] = 0;
    drain_all();
    CHECK(W.sent[MP_RND_DONE] == 6, "%u DONEs", W.sent[MP_RND_DONE]);
}

/* Every peer of the view calls (d = 1, so all share the key): the key
 * closes with the last JOIN, without waiting for the quiet time, and
 * below M without waiting for the window. */
static void test_everyone_here(void) {
    for (uint32_t m = 3; m <= 4; m++) {
        world_init(m, 2);
        const uint32_t view[3] = {0, 1, 2};
        for (uint32_t q = 0; q < 3; q++)
            start(q, view, 3, NULL, NULL);
        drain_all();
        for (uint32_t q = 0; q < 3; q++) {
            uint32_t n = 0, self = 0;
            uint64_t gid = 0;
            CHECK(W.formed[q] == 1 &&
                      mp__rnd_roster(W.rm[q], &n, &self, &gid) != NULL &&
                      n == 3,
                  "M = %u, peer %u: %u FORMED at once, roster of %u", m, q,
                  W.formed[q], n);
        }
        move_parts();
        for (uint32_t q = 0; q < 3; q++) {
            CHECK(mp__rnd_group_finished(W.rm[q]), "peer %u not finished", q);
            mp_rnd_result_t res;
            mp__rnd_end(W.rm[q], W.now, MOSHPIT_OK, false, &res);
            CHECK(res.grouped && res.group_size == 3, "peer %u: size %u", q,
                  res.group_size);
        }
        drain_all();
    }
    /* peer 2 drops out of the views of peers 0 and 1: for one call the
     * view of the call before still counts (a peer missing from one view
     * is often back by the next), so the two wait for the window; from
     * the second call on the pair is everyone */
    const uint32_t pair[2] = {0, 1};
    for (uint32_t call = 0; call < 2; call++) {
        uint32_t formed0 = W.formed[0];
        for (uint32_t q = 0; q < 2; q++)
            start(q, pair, 2, NULL, NULL);
        drain_all();
        CHECK((W.formed[0] == formed0) == (call == 0),
              "call %u with a view of 2 after one of 3: formed at once %d",
              call, W.formed[0] != formed0);
        while (W.formed[0] == formed0 && W.now < 100000)
            tick_all(W.now + 100);
        CHECK(W.formed[0] == formed0 + 1 && W.formed[1] == W.formed[0],
              "call %u: no group of the pair", call);
        move_parts();
        for (uint32_t q = 0; q < 2; q++) {
            mp_rnd_result_t res;
            mp__rnd_end(W.rm[q], W.now, MOSHPIT_OK, false, &res);
            CHECK(res.grouped && res.group_size == 2,
                  "call %u peer %u: size %u", call, q, res.group_size);
        }
        drain_all();
    }
    /* peer 2 is back (the engine saw it live when the JOINs came) before
     * any call of the matchmaker counted it: the pair's key waits for it */
    for (uint32_t q = 0; q < 3; q++)
        mp__rnd_set_view_now(W.rm[q], 3);
    uint32_t formed0 = W.formed[0];
    for (uint32_t q = 0; q < 2; q++)
        start(q, pair, 2, NULL, NULL);
    drain_all();
    CHECK(W.formed[0] == formed0,
          "a key of 2 closed at once though 3 peers are live now");
    while (W.formed[0] == formed0 && W.now < 200000)
        tick_all(W.now + 100);
    CHECK(W.formed[0] == formed0 + 1, "no group of the pair after the window");
}

static void test_join_refusals(void) {
    world_init(4, 2);
    mp_rnd_join_t j = {.seq = 5, .weight = 1, .bandwidth = 1, .window_ms = 500};
    uint8_t key[MP_KEY_MAX] = {0};
    key[0] = COUNT;
    key[8] = 2; /* d = 2: one coordinate follows */
    key[9] = 9; /* >= group_size */
    j.key = key;
    j.key_len = 10;
    CHECK(mp__rnd_on_join(W.rm[0], W.now, W.id[1], &j) == MP_RND_JOIN_BAD_KEY,
          "coordinate beyond the group size accepted");
    mp_rnd_out_t o;
    CHECK(mp__rnd_next_out(W.rm[0], &o) && o.msg == MP_RND_ALONE &&
              o.seq == 5 && peer_of(o.to) == 1,
          "no ALONE for the bad key");
    CHECK(!mp__rnd_next_out(W.rm[0], &o), "more than the ALONE");
    /* eight keys held by pending JOINs, then a ninth */
    key[8] = 1;
    j.key_len = 9;
    for (uint32_t k = 0; k < MP_RND_MM_KEYS + 1; k++) {
        key[0] = (uint8_t)(100 + k); /* another vector length */
        uint8_t from[MP_ID_BYTES];
        memset(from, 0xa0 + k, sizeof(from));
        mp_rnd_join_status_t st = mp__rnd_on_join(W.rm[0], W.now, from, &j);
        CHECK(st == (k < MP_RND_MM_KEYS ? MP_RND_JOIN_OK : MP_RND_JOIN_NO_SLOT),
              "key %u: status %d", k, (int)st);
        CHECK(mp__rnd_next_out(W.rm[0], &o) &&
                  o.msg ==
                      (k < MP_RND_MM_KEYS ? MP_RND_JOIN_ACK : MP_RND_ALONE),
              "key %u: answer %d", k, (int)o.msg);
        while (mp__rnd_next_out(W.rm[0], &o))
            ;
    }
    size_t pending = 0;
    CHECK(mp__rnd_mm_count(W.rm[0], &pending) == MP_RND_MM_KEYS &&
              pending == MP_RND_MM_KEYS,
          "%zu pending", pending);
    /* this peer's own call under a ninth key: its own JOIN is answered
     * ALONE, with a note for the log */
    const uint32_t self_only[1] = {0};
    start(0, self_only, 1, NULL, NULL);
    drain_all();
    bool alone = false;
    moshpit_err_t e = MOSHPIT_EINVAL;
    CHECK(W.own_no_slot == 1 && mp__rnd_over(W.rm[0], W.now, &alone, &e) &&
              alone,
          "own JOIN with every slot busy: note %u alone %d", W.own_no_slot,
          alone);
    mp_rnd_result_t res;
    mp__rnd_end(W.rm[0], W.now, MOSHPIT_OK, true, &res);
    drain_all();
    /* a JOIN under another key withdraws the sender's pending one (peer
     * 0 counts the strangers: with its own view of one a pair of them
     * would be all it expects on a key) */
    uint8_t view_key[MP_KEY_MAX];
    (void)mp__rnd_key(W.rm[0], 2 * MP_RND_MM_KEYS, COUNT, view_key);
    uint8_t from[MP_ID_BYTES];
    memset(from, 0xa0, sizeof(from));
    key[0] = 101;
    CHECK(mp__rnd_on_join(W.rm[0], W.now, from, &j) == MP_RND_JOIN_OK,
          "re-JOIN under another key");
    mp__rnd_mm_count(W.rm[0], &pending);
    CHECK(pending == MP_RND_MM_KEYS, "one sender, two JOINs: %zu", pending);
    while (mp__rnd_next_out(W.rm[0], &o))
        ;
    /* the ninth key fits once a matchmaker is idle */
    mp__rnd_forget(W.rm[0], from);
    memset(from, 0xa1, sizeof(from));
    mp__rnd_on_leave(W.rm[0], from);
    key[0] = 200;
    CHECK(mp__rnd_on_join(W.rm[0], W.now, from, &j) == MP_RND_JOIN_OK,
          "no idle matchmaker evicted");
}

static void test_fallback(void) {
    world_init(2, 2);
    /* peer 1's first candidate cannot be reached: its JOIN falls back to
     * the next one at once, and a group of two forms there */
    uint8_t key[MP_KEY_MAX];
    uint32_t len = mp__rnd_key(W.rm[1], 2, COUNT, key);
    uint8_t c[3][MP_ID_BYTES];
    memcpy(c[0], W.id[3], MP_ID_BYTES);
    memcpy(c[1], W.id[0], MP_ID_BYTES);
    memcpy(c[2], W.id[1], MP_ID_BYTES);
    W.dead[3] = true;
    for (uint32_t q = 0; q < 2; q++) {
        mp_rnd_call_t call = {.key = key,
                              .key_len = len,
                              .cands = (const uint8_t(*)[MP_ID_BYTES])c,
                              .ncands = 3,
                              .weight = 1.0,
                              .values = W.values[q],
                              .count = COUNT};
        CHECK(mp__rnd_start(W.rm[q], W.now, &call) == MOSHPIT_OK, "start");
    }
    drain_all();
    settle();
    CHECK(W.formed[0] == 1 && W.formed[1] == 1, "FORMED %u %u", W.formed[0],
          W.formed[1]);
    CHECK(W.sent[MP_RND_LEAVE] == 2 && W.leave_to == 3, "%u LEAVEs, last to %u",
          W.sent[MP_RND_LEAVE], W.leave_to);
}

static void test_silent_matchmaker(void) {
    world_init(2, 2);
    /* peer 0 asks peer 2, which never answers: after the ACK timeout it
     * moves on with a LEAVE for the JOIN it sent there, then ends alone */
    uint8_t key[MP_KEY_MAX];
    uint32_t len = mp__rnd_key(W.rm[0], 2, COUNT, key);
    uint8_t c[2][MP_ID_BYTES];
    memcpy(c[0], W.id[2], MP_ID_BYTES);
    memcpy(c[1], W.id[0], MP_ID_BYTES);
    W.mute[2] = true;
    mp_rnd_call_t call = {.key = key,
                          .key_len = len,
                          .cands = (const uint8_t(*)[MP_ID_BYTES])c,
                          .ncands = 2,
                          .weight = 2.0,
                          .values = W.values[0],
                          .count = COUNT};
    CHECK(mp__rnd_start(W.rm[0], W.now, &call) == MOSHPIT_OK, "start");
    drain_all();
    uint64_t seq = W.join_seq;
    CHECK(W.sent[MP_RND_JOIN] == 1, "%u JOINs", W.sent[MP_RND_JOIN]);
    uint64_t t0 = W.now;
    bool alone = false;
    moshpit_err_t e = MOSHPIT_EINVAL;
    while (!mp__rnd_over(W.rm[0], W.now, &alone, &e) && W.now < t0 + 20000) {
        uint64_t w = mp__rnd_next_wakeup(W.rm[0]);
        CHECK(w > W.now && w != UINT64_MAX, "wakeup %llu at %llu",
              (unsigned long long)w, (unsigned long long)W.now);
        if (w <= W.now || w == UINT64_MAX)
            break;
        tick_all(w);
    }
    CHECK(W.sent[MP_RND_LEAVE] == 1 && W.leave_to == 2 && W.leave_seq == seq,
          "LEAVE %u to %u seq %llu (JOIN seq %llu)", W.sent[MP_RND_LEAVE],
          W.leave_to, (unsigned long long)W.leave_seq, (unsigned long long)seq);
    CHECK(alone && e == MOSHPIT_OK, "over: alone %d e %d", alone, (int)e);
    /* alone at the own matchmaker's window end (min group 2), well before
     * the round deadline */
    CHECK(W.now - t0 < 5000, "ended after %llu ms",
          (unsigned long long)(W.now - t0));
    mp_rnd_result_t res;
    mp__rnd_end(W.rm[0], W.now, MOSHPIT_OK, alone, &res);
    CHECK(!res.grouped && res.group_size == 1 && res.group_weight == 2.0 &&
              res.has_matchmaker &&
              memcmp(res.matchmaker, W.id[0], MP_ID_BYTES) == 0,
          "result: grouped %d size %u", res.grouped, res.group_size);
}

static void test_stale_and_failed(void) {
    world_init(3, 2);
    const uint32_t view[3] = {0, 1, 2};
    start(0, view, 3, NULL, NULL);
    /* a GROUP from a peer peer 0 never sent a JOIN to is ignored */
    mp_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = MP_MSG_GROUP;
    m.u.group.seq = 1;
    m.u.group.group_id = 77;
    m.u.group.n = 2;
    memcpy(m.u.group.members[0].id, W.id[0], MP_ID_BYTES);
    memcpy(m.u.group.members[1].id, W.id[3], MP_ID_BYTES);
    m.u.group.members[0].weight = m.u.group.members[1].weight = 1;
    CHECK(mp__round_msg_dispatch(W.rm[0], W.now, W.id[3], &m) ==
              MP_RND_MSG_STALE,
          "GROUP from a stranger taken");
    CHECK(mp__rnd_group(W.rm[0]) == NULL, "group from a stranger");
    m.type = MP_MSG_DONE;
    CHECK(mp__round_msg_dispatch(W.rm[0], W.now, W.id[3], &m) ==
              MP_RND_MSG_OTHER,
          "DONE is not the machine's");
    start(1, view, 3, NULL, NULL);
    start(2, view, 3, NULL, NULL);
    drain_all();
    settle();
    CHECK(W.formed[0] == 1, "no group");
    /* a member's death drops it from the group; a stranger's does not
     * touch the call */
    CHECK(!mp__rnd_peer_failed(W.rm[0], W.now, W.id[3]), "stranger touched");
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *r = mp__rnd_roster(W.rm[0], &n, &self, &gid);
    uint32_t other = r != NULL && self == 0 ? 1 : 0;
    CHECK(r != NULL && mp__rnd_peer_failed(W.rm[0], W.now, r[other].id),
          "member death not taken");
    CHECK(r != NULL && !mp__group_member_alive(mp__rnd_group(W.rm[0]), other),
          "member %u still alive", other);
}

static void test_deadline(void) {
    world_init(2, 2);
    /* a group of two whose other member never sends a part: the deadline
     * ends the call, in its group (not alone) */
    const uint32_t view[2] = {0, 1};
    start(0, view, 2, NULL, NULL);
    start(1, view, 2, NULL, NULL);
    drain_all();
    uint64_t t0 = W.now; /* the calls' start: the deadline counts from it */
    settle();
    CHECK(W.formed[0] == 1 && W.formed[1] == 1, "no group");
    bool alone = true;
    moshpit_err_t e;
    while (!mp__rnd_over(W.rm[0], W.now, &alone, &e) && W.now < t0 + 60000)
        tick_all(mp__rnd_next_wakeup(W.rm[0]));
    CHECK(!alone && W.now >= t0 + 10000 && W.now <= t0 + 10000 + 1,
          "over at +%llu, alone %d", (unsigned long long)(W.now - t0), alone);
}

/* Ends peer q's call once it is over (by the window end at the latest). */
static void finish(uint32_t q, bool want_alone) {
    uint64_t t0 = W.now;
    bool alone = !want_alone;
    moshpit_err_t e = MOSHPIT_OK;
    move_parts();
    while (!mp__rnd_over(W.rm[q], W.now, &alone, &e) &&
           !mp__rnd_group_finished(W.rm[q]) && W.now < t0 + 5000) {
        tick_all(W.now + 10);
        move_parts();
    }
    if (mp__rnd_group_finished(W.rm[q]))
        alone = false;
    mp_rnd_result_t res;
    mp__rnd_end(W.rm[q], W.now, MOSHPIT_OK, alone, &res);
    CHECK(res.grouped == !want_alone, "peer %u: grouped %d", q, res.grouped);
    drain_all();
}

/* A JOIN carries the caller's phase (a Lamport clock of its rounds).
 * Peers 3 and 4 average once first, then peer 3 sends its second JOIN
 * under the same key bytes (d = 1) while the first-round JOINs of peers 0
 * to 2 wait out the quiet time: the three group as one full group of
 * M = 3 and peer 3 waits (ending alone here), where the key's four JOINs
 * used to be split 2 + 2. */
static void test_phase_ahead(void) {
    world_init(3, 2);
    const uint32_t pair[2] = {3, 4};
    for (uint32_t i = 0; i < 2; i++)
        start(pair[i], pair, 2, NULL, NULL);
    drain_all();
    for (uint32_t i = 0; i < 2; i++) {
        finish(pair[i], false);
        CHECK(mp__rnd_phase(W.rm[pair[i]]) == 1, "peer %u phase %u", pair[i],
              mp__rnd_phase(W.rm[pair[i]]));
    }

    const uint32_t view[4] = {0, 1, 2, 3};
    uint8_t k3[MP_KEY_MAX], k0[MP_KEY_MAX];
    uint32_t l3 = 0, l0 = 0;
    start(3, view, 4, k3, &l3);
    for (uint32_t q = 0; q < 3; q++)
        start(q, view, 4, q == 0 ? k0 : NULL, &l0);
    CHECK(l3 == l0 && memcmp(k3, k0, l0) == 0, "keys differ");
    drain_all();
    settle();
    for (uint32_t q = 0; q < 3; q++) {
        uint32_t n = 0, self = 0;
        uint64_t gid = 0;
        CHECK(W.formed[q] == 1 &&
                  mp__rnd_roster(W.rm[q], &n, &self, &gid) != NULL && n == 3,
              "peer %u: %u FORMED, roster of %u", q, W.formed[q], n);
    }
    CHECK(W.formed[3] == 1, "peer 3, a round ahead, formed a group");
    for (uint32_t q = 0; q < 3; q++) {
        finish(q, false);
        CHECK(mp__rnd_phase(W.rm[q]) == 1, "peer %u phase %u", q,
              mp__rnd_phase(W.rm[q]));
    }
    /* a round alone leaves the phase: peer 3 is in step again */
    finish(3, true);
    CHECK(mp__rnd_phase(W.rm[3]) == 1, "peer 3 phase %u",
          mp__rnd_phase(W.rm[3]));

    /* peers 3 and 4 average again (phase 2); then with no phase at M the
     * phases mix, and the members of a group take the next phase after
     * its largest: peers 0 and 1 catch up */
    for (uint32_t i = 0; i < 2; i++)
        start(pair[i], pair, 2, NULL, NULL);
    drain_all();
    for (uint32_t i = 0; i < 2; i++)
        finish(pair[i], false);
    const uint32_t three[3] = {0, 1, 3};
    for (uint32_t i = 0; i < 3; i++)
        start(three[i], three, 3, NULL, NULL);
    drain_all();
    settle();
    for (uint32_t i = 0; i < 3; i++) {
        finish(three[i], false);
        CHECK(mp__rnd_phase(W.rm[three[i]]) == 3, "peer %u phase %u", three[i],
              mp__rnd_phase(W.rm[three[i]]));
    }
}

/* Merge keys (docs/DESIGN.md, "Exact means over d > 1 rounds behind
 * NAT"): the first and last round of a cycle keep no coordinate, a
 * middle round the averaged ones; shards; a matchmaker's check of a
 * sharded key; the JOIN field "lk" round-trips through the codec. */
static void test_merge_keys(void) {
    /* vector length 5, d = 4, register 1 2 3, aggregation suffix 9 */
    const uint8_t line[13] = {5, 0, 0, 0, 0, 0, 0, 0, 4, 1, 2, 3, 9};
    uint8_t k[MP_KEY_MAX];
    uint32_t n = mp__rnd_merge_key_of(line, sizeof line, 0, 4, 0, k);
    CHECK(n == 11 && k[8] == (0x80 | 4) && k[9] == 0 && k[10] == 9,
          "k = 0: len %u", n);
    n = mp__rnd_merge_key_of(line, sizeof line, 1, 4, 0, k);
    CHECK(n == 12 && k[9] == 1 && k[10] == 3 && k[11] == 9,
          "k = 1: len %u, kept %u", n, k[10]);
    n = mp__rnd_merge_key_of(line, sizeof line, 2, 4, 0, k);
    CHECK(n == 13 && k[9] == 2 && k[10] == 2 && k[11] == 3 && k[12] == 9,
          "k = 2: len %u, kept %u %u", n, k[10], k[11]);
    n = mp__rnd_merge_key_of(line, sizeof line, 3, 4, 0, k);
    CHECK(n == 11 && k[9] == 3 && k[10] == 9, "k = 3: len %u", n);
    CHECK(mp__rnd_merge_key_of(line, sizeof line, 4, 4, 0, k) == 0, "k = d");
    /* shards (sl > 0): the other set's coordinates in base m (here 4),
     * modulo 2^sl, as 2 bytes after the kept ones; byte 9 is k | sl << 3 */
    n = mp__rnd_merge_key_of(line, sizeof line, 0, 4, 1, k);
    /* todo entries 1 2 3: 27 mod 2 */
    CHECK(n == 13 && k[9] == 8 && k[10] == 1 && k[11] == 0 && k[12] == 9,
          "k = 0, 2 shards: len %u, byte 9 %u, shard %u", n, k[9], k[10]);
    n = mp__rnd_merge_key_of(line, sizeof line, 3, 4, 2, k);
    CHECK(n == 13 && k[9] == (3 | 2 << 3) && k[10] == 3 && k[11] == 0 &&
              k[12] == 9,
          "k = 3, 4 shards: len %u, shard %u", n, k[10]);
    n = mp__rnd_merge_key_of(line, sizeof line, 1, 4, 1, k);
    /* keeps entry 2 (3); todo entries 1 2: 6 mod 2 */
    CHECK(n == 14 && k[9] == 9 && k[10] == 3 && k[11] == 0 && k[12] == 0 &&
              k[13] == 9,
          "k = 1, 2 shards: len %u", n);
    CHECK(mp__rnd_merge_key_of(line, sizeof line, 0, 4, 16, k) == 0 &&
              mp__rnd_merge_key_of(line, sizeof line, 0, 1, 1, k) == 0,
          "shards beyond 2^15 or with m < 2");
    /* how many: about 128 callers per shard, no more shards than lines */
    CHECK(mp__rnd_merge_shards(8, 8, 0, 2) == 0 &&
              mp__rnd_merge_shards(8, 128, 0, 2) == 0 &&
              mp__rnd_merge_shards(8, 129, 0, 2) == 1 &&
              mp__rnd_merge_shards(8, 512, 0, 2) == 2 &&
              mp__rnd_merge_shards(10, 1000, 0, 2) == 3 &&
              mp__rnd_merge_shards(8, 512, 1, 1) == 0 &&
              mp__rnd_merge_shards(8, 4096, 1, 2) == 2 &&
              mp__rnd_merge_shards(8, 100000, 0, 1) == 3 &&
              mp__rnd_merge_shards(2, 1u << 30, 0, 7) == 7 &&
              mp__rnd_merge_shards(255, (uint64_t)1 << 40, 0, 7) == 15,
          "shard counts");
    /* a matchmaker takes a sharded key made from the JOIN's line key, and
     * answers ALONE to one whose shard is not the line's */
    world_init(4, 2);
    const uint8_t l4[13] = {COUNT, 0, 0, 0, 0, 0, 0, 0, 4, 1, 2, 3};
    uint8_t mk[MP_KEY_MAX];
    mp_rnd_join_t j = {.seq = 5, .weight = 1, .bandwidth = 1, .window_ms = 500};
    j.key = mk;
    j.line = l4;
    j.line_len = 12;
    uint8_t from[MP_ID_BYTES];
    memset(from, 0xc1, sizeof(from));
    j.key_len = mp__rnd_merge_key_of(l4, 12, 0, 4, 2, mk);
    CHECK(j.key_len == 12 &&
              mp__rnd_on_join(W.rm[0], W.now, from, &j) == MP_RND_JOIN_OK,
          "sharded merge key refused");
    mk[10] ^= 1; /* a shard that is not the line key's */
    memset(from, 0xc2, sizeof(from));
    CHECK(mp__rnd_on_join(W.rm[0], W.now, from, &j) == MP_RND_JOIN_BAD_KEY,
          "merge key with foreign coordinates taken");
    const uint8_t d1[9] = {5, 0, 0, 0, 0, 0, 0, 0, 1};
    CHECK(mp__rnd_merge_key_of(d1, sizeof d1, 0, 4, 0, k) == 0, "d = 1");

    static mp_msg_t m, back;
    memset(&m, 0, sizeof m);
    m.type = MP_MSG_JOIN;
    m.u.join.seq = 7;
    m.u.join.weight = 1;
    m.u.join.window_ms = 1000;
    m.u.join.key_len =
        mp__rnd_merge_key_of(line, sizeof line, 0, 4, 0, m.u.join.key);
    m.u.join.line_len = sizeof line;
    memcpy(m.u.join.line, line, sizeof line);
    uint8_t buf[512];
    size_t len = 0;
    CHECK(mp__wire_msg_encode(&m, buf, sizeof buf, &len) == MOSHPIT_OK,
          "encode");
    CHECK(mp__wire_msg_decode(buf, len, &back) == MOSHPIT_OK &&
              back.u.join.line_len == sizeof line &&
              memcmp(back.u.join.line, line, sizeof line) == 0,
          "lk did not round-trip");
}

int main(void) {
    test_group_of_three();
    test_part_size();
    test_merge_keys();
    test_everyone_here();
    test_join_refusals();
    test_fallback();
    test_silent_matchmaker();
    test_stale_and_failed();
    test_deadline();
    test_phase_ahead();
    for (uint32_t i = 0; i < NP; i++)
        mp__rnd_free(W.rm[i]);
    return test_summary("test_round");
}
