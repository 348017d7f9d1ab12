/* SPDX-License-Identifier: MIT */
/*
 * round.c - the round machine of one peer (round.h): matchmaker slots and
 * the JOIN policy, the joiner pump, group start and round end, with time
 * and seed passed in and messages to send queued as outputs.
 */
#include "core/round.h"
#include "core/share.h"

#include <stdlib.h>
#include <string.h>

typedef struct mm_slot {
    uint8_t key[MP_KEY_MAX];
    uint32_t key_len;
    mp_mm_t *mm;
    uint64_t last_used_ms;
} mm_slot_t;

struct mp_rnd {
    mp_rnd_cfg_t cfg;
    mp_grid_t grid;
    uint64_t join_seq; /* first seq of the next call */
    /* The phase of this peer's JOINs, a Lamport clock of rounds: after a
     * call in a group one more than the largest phase of its members, so
     * that a peer that joined late or missed a round is in step again
     * after its next group; unchanged after a call alone. Saturates. */
    uint32_t phase;
    uint32_t group_phase; /* the taken group's (GROUP "ph") */
    uint64_t mm_made;     /* matchmakers created: their seeds */
    /* The most callers any key can have: the larger of the live peers
     * counted at the last two mp__rnd_key (0 = none), so that one view
     * that misses a peer for a moment (a session being re-made on a
     * loaded machine) does not close a key before that peer's JOIN;
     * view_now: the live peers when the last JOIN came
     * (mp__rnd_set_view_now), so a peer back since those calls is
     * waited for too. */
    uint64_t view_n, view_last, view_now;
    mm_slot_t mms[MP_RND_MM_KEYS];
    mp_mm_out_t *mm_out; /* scratch of poll_mm, made with the first mm */
    uint64_t recent[MP_RND_RECENT];
    uint32_t recent_pos;
    /* outputs: a queue, and the GROUP rosters they point into */
    mp_rnd_out_t *out;
    size_t nout, headout, capout;
    mp_member_t *rosters;
    size_t nrost, caprost; /* members, in blocks of one roster each */
    /* the call in progress */
    bool in_call;
    bool over;       /* ended alone, or its group could not be made */
    moshpit_err_t e; /* ... with this error */
    uint64_t start_ms, deadline_ms, group_start_ms;
    uint64_t deadline_cfg_ms; /* the call's own: start + round_timeout_ms */
    uint8_t key[MP_KEY_MAX];
    uint32_t key_len;
    uint8_t line[MP_KEY_MAX]; /* with a merge key: the line key (JOIN "lk") */
    uint32_t line_len;
    double weight;
    float *values;
    size_t count;
    mp_joiner_t *joiner;
    uint8_t join_to[MP_ID_BYTES]; /* matchmaker of the latest JOIN */
    uint64_t join_seq_sent;
    bool join_pending; /* that JOIN may still be held there */
    mp_group_t *group;
    uint64_t gid;
    uint32_t n, self;
    mp_member_t roster[MP_GROUP_MAX];
    double weights[MP_GROUP_MAX];
    uint32_t bws[MP_GROUP_MAX];
    uint32_t measured_bw; /* Mbit/s, 0: none (mp__rnd_set_bandwidth) */
};

static uint64_t mix64(uint64_t x) {
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static bool is_self(const mp_rnd_t *rm, const uint8_t id[MP_ID_BYTES]) {
    return memcmp(rm->cfg.self, id, MP_ID_BYTES) == 0;
}

void mp__rnd_cfg_of(mp_rnd_cfg_t *rc, const moshpit_config_t *cfg,
                    const mp_agg_t *agg, const uint8_t self[MP_ID_BYTES],
                    const mp_grid_t *grid, uint64_t seed, uint64_t first_seq) {
    memset(rc, 0, sizeof *rc);
    memcpy(rc->self, self, MP_ID_BYTES);
    rc->group_size = cfg->group_size;
    rc->min_group_size = cfg->min_group_size;
    rc->matchmaking_ms = cfg->matchmaking_ms;
    rc->round_timeout_ms = cfg->round_timeout_ms;
    rc->peer_timeout_ms = cfg->peer_timeout_ms;
    rc->bandwidth = cfg->bandwidth_mbps;
    rc->agg = *agg;
    rc->grid = grid;
    rc->seed = seed;
    rc->first_seq = first_seq;
}

moshpit_err_t mp__rnd_new(const mp_rnd_cfg_t *cfg, mp_rnd_t **out) {
    /* group_size 1 is a peer that never averages: its matchmakers cannot
     * be made (mp__mm_new wants 2 or more), so every JOIN ends ALONE */
    if (cfg == NULL || out == NULL || cfg->grid == NULL ||
        cfg->group_size < 1 || cfg->group_size > MP_GROUP_MAX)
        return MOSHPIT_EINVAL;
    mp_rnd_t *rm = calloc(1, sizeof(*rm));
    if (rm == NULL)
        return MOSHPIT_ENOMEM;
    rm->cfg = *cfg;
    rm->grid = *cfg->grid;
    rm->cfg.grid = NULL;
    rm->join_seq = cfg->first_seq;
    *out = rm;
    return MOSHPIT_OK;
}

static void call_clear(mp_rnd_t *rm) {
    mp__group_free(rm->group);
    mp__joiner_free(rm->joiner);
    rm->group = NULL;
    rm->joiner = NULL;
    rm->in_call = false;
    rm->over = false;
    rm->e = MOSHPIT_OK;
    rm->join_pending = false;
    rm->gid = 0;
    rm->group_phase = 0;
    rm->n = 0;
    rm->self = 0;
    rm->values = NULL;
}

void mp__rnd_free(mp_rnd_t *rm) {
    if (rm == NULL)
        return;
    call_clear(rm);
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++)
        mp__mm_free(rm->mms[i].mm);
    free(rm->mm_out);
    free(rm->out);
    free(rm->rosters);
    free(rm);
}

/* ------------------------------------------------------------------ */
/* outputs                                                             */

/* A new output slot, zeroed; NULL when out of memory (the message is
 * lost, as one lost on a dropped connection: timeouts recover). */
static mp_rnd_out_t *push(mp_rnd_t *rm, mp_rnd_out_kind_t kind,
                          mp_rnd_msg_t msg, const uint8_t to[MP_ID_BYTES]) {
    if (rm->nout == rm->capout) {
        size_t cap = rm->capout ? 2 * rm->capout : 16;
        mp_rnd_out_t *o = realloc(rm->out, cap * sizeof(*o));
        if (o == NULL)
            return NULL;
        rm->out = o;
        rm->capout = cap;
    }
    mp_rnd_out_t *o = &rm->out[rm->nout++];
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->msg = msg;
    if (to != NULL)
        memcpy(o->to, to, MP_ID_BYTES);
    return o;
}

static void push_simple(mp_rnd_t *rm, mp_rnd_msg_t msg,
                        const uint8_t to[MP_ID_BYTES], uint64_t seq) {
    mp_rnd_out_t *o = push(rm, MP_RND_OUT_SEND, msg, to);
    if (o != NULL)
        o->seq = seq;
}

/* Stores a roster for GROUP outputs; returns its offset or SIZE_MAX. */
static size_t keep_roster(mp_rnd_t *rm, const mp_member_t *m, uint32_t n) {
    if (rm->nrost + n > rm->caprost) {
        size_t cap = rm->caprost ? 2 * rm->caprost : 4 * MP_GROUP_MAX;
        while (cap < rm->nrost + n)
            cap *= 2;
        mp_member_t *r = realloc(rm->rosters, cap * sizeof(*r));
        if (r == NULL)
            return SIZE_MAX;
        rm->rosters = r;
        rm->caprost = cap;
    }
    size_t at = rm->nrost;
    memcpy(rm->rosters + at, m, n * sizeof(*m));
    for (uint32_t k = 0; k < n; k++)
        rm->rosters[at + k].seq = 0; /* the others' seqs stay private */
    for (uint32_t k = 0; k < n; k++)
        rm->rosters[at + k].phase = 0; /* not part of the roster */
    rm->nrost += n;
    return at;
}

bool mp__rnd_next_out(mp_rnd_t *rm, mp_rnd_out_t *o) {
    if (rm->headout == rm->nout) {
        rm->headout = rm->nout = 0;
        rm->nrost = 0;
        return false;
    }
    *o = rm->out[rm->headout++];
    if (o->msg == MP_RND_GROUP && o->kind == MP_RND_OUT_SEND)
        o->members = rm->rosters + (size_t)(uintptr_t)o->members;
    if (o->msg == MP_RND_JOIN) {
        o->key = rm->key;
        o->line = rm->line_len != 0 ? rm->line : NULL;
        o->line_len = rm->line_len;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* keys                                                                */

uint32_t mp__rnd_key_of(const mp_grid_t *g, uint64_t count, const mp_agg_t *agg,
                        uint8_t key[MP_KEY_MAX]) {
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(count >> (8 * i));
    uint32_t len = 8 + (uint32_t)mp__grid_key(g, key + 8);
    len += (uint32_t)mp__agg_key_suffix(agg, key + len);
    return len;
}

uint32_t mp__rnd_next_key(const mp_rnd_t *rm, uint64_t count,
                          uint8_t key[MP_KEY_MAX]) {
    return mp__rnd_key_of(&rm->grid, count, &rm->cfg.agg, key);
}

uint32_t mp__rnd_key_after_group(const mp_rnd_t *rm, uint64_t count,
                                 uint8_t key[MP_KEY_MAX]) {
    if (rm->group == NULL || rm->gid == 0)
        return 0;
    mp_grid_t g = rm->grid; /* as mp__rnd_end will shift it */
    mp__grid_shift(&g, rm->self + mp__mm_coord_offset(rm->gid));
    return mp__rnd_key_of(&g, count, &rm->cfg.agg, key);
}

uint32_t mp__rnd_phase(const mp_rnd_t *rm) {
    return rm->phase;
}

const mp_grid_t *mp__rnd_grid(const mp_rnd_t *rm) {
    return &rm->grid;
}

uint32_t mp__rnd_key(mp_rnd_t *rm, size_t view_n, uint64_t count,
                     uint8_t key[MP_KEY_MAX]) {
    mp__grid_set_estimate(&rm->grid, view_n);
    rm->view_n = view_n > rm->view_last ? view_n : rm->view_last;
    rm->view_last = view_n;
    return mp__rnd_key_of(&rm->grid, count, &rm->cfg.agg, key);
}

void mp__rnd_set_view_now(mp_rnd_t *rm, size_t view_n) {
    rm->view_now = view_n;
}

/* How many callers at most can share a key: see mp__rnd_set_view_now. */
static uint64_t expect_n(const mp_rnd_t *rm) {
    return rm->view_now > rm->view_n ? rm->view_now : rm->view_n;
}

uint32_t mp__rnd_merge_key_of(const uint8_t *line, size_t line_len, uint32_t k,
                              uint32_t m, uint32_t sl,
                              uint8_t out[MP_KEY_MAX]) {
    if (line == NULL || line_len < 9 || line_len > MP_KEY_MAX)
        return 0;
    uint32_t d = line[8];
    if (d < 2 || d > MP_GRID_DIMS_MAX || k >= d || line_len < 8u + d ||
        sl > MP_RND_SHARD_LOG2_MAX || (sl > 0 && m < 2))
        return 0;
    /* register entries d-1-k .. d-2: averaged in this cycle; 0 .. d-2-k:
     * still to be averaged. Keep the averaged ones, none in the last
     * round; the others, read as a number in base m, pick the shard. */
    uint32_t nkeep = k + 1 < d ? k : 0;
    uint32_t from = d - 1 - nkeep;
    size_t suf = line_len - 8u - d;
    if (10u + nkeep + (sl > 0 ? 2u : 0u) + suf > MP_KEY_MAX)
        return 0;
    memcpy(out, line, 8);
    out[8] = (uint8_t)(0x80u | d);
    out[9] = (uint8_t)(k | sl << 3);
    memcpy(out + 10, line + 9 + from, nkeep);
    uint32_t at = 10u + nkeep;
    if (sl > 0) {
        uint32_t mask = (1u << sl) - 1, idx = 0;
        for (uint32_t i = 0; i < d - 1 - nkeep; i++)
            idx = (idx * m + line[9 + i]) & mask;
        out[at++] = (uint8_t)idx;
        out[at++] = (uint8_t)(idx >> 8);
    }
    memcpy(out + at, line + 8 + d, suf);
    return at + (uint32_t)suf;
}

uint32_t mp__rnd_merge_shards(uint32_t m, uint64_t view_n, uint32_t nkeep,
                              uint32_t nother) {
    if (m < 2)
        return 0;
    /* the round's callers per value of the kept coordinates, and the
     * lines they spread over */
    uint64_t load = view_n, lines = 1;
    for (uint32_t i = 0; i < nkeep && load > 0; i++)
        load /= m;
    for (uint32_t i = 0; i < nother && lines < ((uint64_t)1 << 32); i++)
        lines *= m;
    uint32_t sl = 0;
    while (sl < MP_RND_SHARD_LOG2_MAX &&
           load > (uint64_t)MP_RND_SHARD_PEERS << sl &&
           ((uint64_t)1 << sl) < lines)
        sl++;
    return sl;
}

uint32_t mp__rnd_merge_key(const mp_rnd_t *rm, const uint8_t *line,
                           size_t line_len, uint8_t out[MP_KEY_MAX]) {
    uint32_t d = rm->grid.dims;
    if (d < 2)
        return 0;
    uint32_t k = rm->grid.turn % d;
    uint32_t nkeep = k + 1 < d ? k : 0;
    uint32_t sl = mp__rnd_merge_shards(rm->cfg.group_size, rm->view_last, nkeep,
                                       d - 1 - nkeep);
    return mp__rnd_merge_key_of(line, line_len, k, rm->cfg.group_size, sl, out);
}

/* A merge key (0x80 | d in byte 8): valid when made from a valid line
 * key, in any number of shards its byte 9 says. */
static bool merge_key_ok(const mp_rnd_t *rm, const uint8_t *key, size_t len,
                         const uint8_t *line, size_t line_len) {
    uint8_t want[MP_KEY_MAX];
    if (len < 10 || !mp__rnd_key_ok(rm, line, line_len))
        return false;
    uint32_t n = mp__rnd_merge_key_of(line, line_len, key[9] & 7u,
                                      rm->cfg.group_size, key[9] >> 3, want);
    return n != 0 && n == len && memcmp(want, key, len) == 0;
}

bool mp__rnd_key_ok(const mp_rnd_t *rm, const uint8_t *key, size_t len) {
    if (key == NULL || len < 9 || len > MP_KEY_MAX || key[8] < 1 ||
        key[8] > MP_GRID_DIMS_MAX || len < 8u + key[8] ||
        !mp__agg_key_suffix_ok(key + 8 + key[8], len - 8u - key[8]))
        return false;
    for (size_t i = 9; i < 8u + key[8]; i++)
        if (key[i] >= rm->cfg.group_size)
            return false;
    return true;
}

/* ------------------------------------------------------------------ */
/* matchmaker side                                                     */

static mp_mm_t *mm_for_key(mp_rnd_t *rm, uint64_t now, const uint8_t *key,
                           uint32_t len) {
    bool lines = len > 8 && (key[8] & 0x80u) != 0; /* a merge key */
    mm_slot_t *free_slot = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++) {
        mm_slot_t *s = &rm->mms[i];
        if (s->mm == NULL) {
            if (free_slot == NULL)
                free_slot = s;
            continue;
        }
        if (s->key_len == len && memcmp(s->key, key, len) == 0) {
            s->last_used_ms = now;
            mp__mm_set_expect(s->mm, expect_n(rm));
            return s->mm;
        }
        if (mp__mm_pending(s->mm) == 0 &&
            (oldest == NULL || s->last_used_ms < oldest->last_used_ms))
            oldest = s;
    }
    if (free_slot == NULL && oldest != NULL) {
        mp__mm_free(oldest->mm);
        oldest->mm = NULL;
        free_slot = oldest;
    }
    if (free_slot == NULL)
        return NULL;
    if (rm->mm_out == NULL &&
        (rm->mm_out = malloc(sizeof(*rm->mm_out))) == NULL)
        return NULL;
    uint64_t seed = mix64(rm->cfg.seed ^ mix64(rm->mm_made++));
    if (mp__mm_new(rm->cfg.group_size, rm->cfg.min_group_size, seed,
                   &free_slot->mm) != MOSHPIT_OK)
        return NULL;
    memcpy(free_slot->key, key, len);
    free_slot->key_len = len;
    free_slot->last_used_ms = now;
    mp__mm_set_expect(free_slot->mm, expect_n(rm));
    mp__mm_set_lines(free_slot->mm, lines);
    return free_slot->mm;
}

/* The matchmaker's answer to this peer's own JOIN. */
static void deliver_to_self(mp_rnd_t *rm, const mp_mm_out_t *o, uint64_t seq) {
    if (!rm->in_call || rm->joiner == NULL || rm->group != NULL)
        return;
    if (o->kind == MP_MM_GROUP) {
        if (mp__joiner_on_group(rm->joiner, rm->cfg.self, seq, o->group_id,
                                o->members, o->n, rm->cfg.self))
            rm->group_phase = o->phase;
    } else
        mp__joiner_on_alone(rm->joiner, rm->cfg.self, seq);
}

/* Takes the matchmaker's decisions: GROUP to every member, ALONE to a
 * lone joiner; this peer's own share goes straight to its joiner (the
 * caller pumps the joiner afterwards). */
static void poll_mm(mp_rnd_t *rm, mp_mm_t *mm, uint64_t now) {
    mp_mm_out_t *o = rm->mm_out;
    while (mp__mm_poll(mm, now, o)) {
        if (o->kind == MP_MM_GROUP) {
            size_t at = keep_roster(rm, o->members, o->n);
            for (uint32_t i = 0; i < o->n; i++) {
                if (is_self(rm, o->members[i].id)) {
                    deliver_to_self(rm, o, o->members[i].seq);
                    continue;
                }
                if (at == SIZE_MAX)
                    continue;
                mp_rnd_out_t *s =
                    push(rm, MP_RND_OUT_SEND, MP_RND_GROUP, o->members[i].id);
                if (s == NULL)
                    continue;
                s->seq = o->members[i].seq;
                s->group_id = o->group_id;
                s->phase = o->phase;
                s->n = o->n;
                /* an offset until mp__rnd_next_out: rosters may move */
                s->members = (const mp_member_t *)(uintptr_t)at;
            }
        } else if (o->kind == MP_MM_ALONE) {
            if (is_self(rm, o->members[0].id))
                deliver_to_self(rm, o, o->members[0].seq);
            else
                push_simple(rm, MP_RND_ALONE, o->members[0].id,
                            o->members[0].seq);
        }
    }
}

void mp__rnd_set_noshare(mp_rnd_t *rm, bool noshare) {
    if (rm != NULL)
        rm->cfg.noshare = noshare;
}

void mp__rnd_forget(mp_rnd_t *rm, const uint8_t id[MP_ID_BYTES]) {
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++)
        if (rm->mms[i].mm != NULL)
            mp__mm_on_leave(rm->mms[i].mm, id);
}

void mp__rnd_on_leave(mp_rnd_t *rm, const uint8_t from[MP_ID_BYTES]) {
    mp__rnd_forget(rm, from);
}

static void pump(mp_rnd_t *rm, uint64_t now);

mp_rnd_join_status_t mp__rnd_on_join(mp_rnd_t *rm, uint64_t now,
                                     const uint8_t from[MP_ID_BYTES],
                                     const mp_rnd_join_t *j) {
    bool merge = j->key != NULL && j->key_len > 8 && (j->key[8] & 0x80u);
    if (merge ? !merge_key_ok(rm, j->key, j->key_len, j->line, j->line_len)
              : !mp__rnd_key_ok(rm, j->key, j->key_len)) {
        push_simple(rm, MP_RND_ALONE, from, j->seq);
        return MP_RND_JOIN_BAD_KEY;
    }
    /* a joiner runs one round at a time: a JOIN for a new key withdraws
     * its JOIN under any other key, so one peer holds one pending slot */
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++) {
        mm_slot_t *s = &rm->mms[i];
        if (s->mm != NULL && (s->key_len != j->key_len ||
                              memcmp(s->key, j->key, j->key_len) != 0))
            mp__mm_on_leave(s->mm, from);
    }
    mp_mm_t *mm = mm_for_key(rm, now, j->key, j->key_len);
    mp_member_t m;
    memset(&m, 0, sizeof(m));
    memcpy(m.id, from, MP_ID_BYTES);
    m.weight = j->weight;
    m.bandwidth = j->bandwidth;
    m.seq = j->seq;
    m.phase = j->phase;
    m.noshare = j->noshare ? 1 : 0;
    m.parts = j->parts ? 1 : 0;
    if (mm == NULL ||
        !mp__mm_on_join_line(mm, now, &m, j->window_ms, merge ? j->line : NULL,
                             merge ? j->line_len : 0)) {
        push_simple(rm, MP_RND_ALONE, from, j->seq);
        return mm == NULL ? MP_RND_JOIN_NO_SLOT : MP_RND_JOIN_REFUSED;
    }
    push_simple(rm, MP_RND_JOIN_ACK, from, j->seq);
    poll_mm(rm, mm, now);
    pump(rm, now); /* the group may include this peer's own JOIN */
    return MP_RND_JOIN_OK;
}

/* ------------------------------------------------------------------ */
/* the call                                                            */

moshpit_err_t mp__rnd_start(mp_rnd_t *rm, uint64_t now,
                            const mp_rnd_call_t *call) {
    if (rm->in_call)
        return MOSHPIT_EINVAL;
    if (call == NULL || call->key == NULL || call->key_len == 0 ||
        call->key_len > MP_KEY_MAX || (call->values == NULL && call->count))
        return MOSHPIT_EINVAL;
    uint32_t win =
        call->window_ms != 0 ? call->window_ms : rm->cfg.matchmaking_ms;
    /* a dead matchmaker is usually noticed at once (disconnect); the ack
     * timeout is for silent ones, so be patient with busy ones */
    uint32_t ack = win / 2 < 200 ? 200 : win / 2 > 5000 ? 5000 : win / 2;
    moshpit_err_t e =
        mp__joiner_new(call->cands, call->ncands, rm->join_seq, now, win, ack,
                       MP_RND_GRACE_MS, &rm->joiner);
    if (e == MOSHPIT_OK && call->ack_ms != NULL)
        e = mp__joiner_set_ack(rm->joiner, call->ack_ms);
    if (e != MOSHPIT_OK) {
        mp__joiner_free(rm->joiner);
        rm->joiner = NULL;
        return e;
    }
    rm->join_seq += 1000; /* fresh seq space per call */
    rm->in_call = true;
    rm->over = false;
    rm->e = MOSHPIT_OK;
    rm->start_ms = now;
    rm->group_start_ms = 0;
    rm->deadline_ms = now + rm->cfg.round_timeout_ms - MP_RND_MARGIN_MS;
    rm->deadline_cfg_ms = rm->deadline_ms;
    memcpy(rm->key, call->key, call->key_len);
    rm->key_len = call->key_len;
    rm->line_len = 0;
    if (call->line != NULL && call->line_len > 0 &&
        call->line_len <= MP_KEY_MAX) {
        memcpy(rm->line, call->line, call->line_len);
        rm->line_len = call->line_len;
    }
    rm->weight = call->weight;
    rm->values = call->values;
    rm->count = call->count;
    rm->join_pending = false;
    pump(rm, now);
    return MOSHPIT_OK;
}

void mp__rnd_set_bandwidth(mp_rnd_t *rm, uint32_t measured_mbps) {
    rm->measured_bw = measured_mbps;
}

uint32_t mp__rnd_bandwidth(const mp_rnd_t *rm) {
    uint32_t b = rm->cfg.bandwidth;
    return rm->measured_bw != 0 && (b == 0 || rm->measured_bw < b)
               ? rm->measured_bw
               : b;
}

void mp__rnd_set_deadline(mp_rnd_t *rm, uint64_t deadline_ms) {
    if (!rm->in_call || deadline_ms >= rm->deadline_ms)
        return;
    rm->deadline_ms = deadline_ms;
    mp__group_set_deadline(rm->group, deadline_ms);
}

void mp__rnd_extend_deadline(mp_rnd_t *rm, uint64_t deadline_ms) {
    if (!rm->in_call)
        return;
    if (deadline_ms > rm->deadline_cfg_ms)
        deadline_ms = rm->deadline_cfg_ms;
    if (deadline_ms <= rm->deadline_ms)
        return;
    rm->deadline_ms = deadline_ms;
    mp__group_extend_deadline(rm->group, deadline_ms);
}

bool mp__rnd_in_call(const mp_rnd_t *rm) {
    return rm->in_call;
}

/* Tells the matchmaker this peer last sent a JOIN to that it should forget
 * it (the joiner moved on or gave up), so it does not put this peer into
 * a group it will not take part in. */
static void withdraw_join(mp_rnd_t *rm) {
    if (!rm->join_pending)
        return;
    rm->join_pending = false;
    if (is_self(rm, rm->join_to)) {
        mp__rnd_forget(rm, rm->cfg.self);
        return;
    }
    push_simple(rm, MP_RND_LEAVE, rm->join_to, rm->join_seq_sent);
}

/* This peer's own JOIN, to its own matchmaker. */
static void local_join(mp_rnd_t *rm, uint64_t now, const mp_join_send_t *s) {
    mp_mm_t *mm = mm_for_key(rm, now, rm->key, rm->key_len);
    mp_member_t me;
    memset(&me, 0, sizeof(me));
    memcpy(me.id, rm->cfg.self, MP_ID_BYTES);
    me.weight = rm->weight;
    me.bandwidth = mp__rnd_bandwidth(rm);
    me.seq = s->seq;
    me.phase = rm->phase;
    me.noshare = rm->cfg.noshare ? 1 : 0;
    me.parts = 1;
    if (mm == NULL || !mp__mm_on_join_line(mm, now, &me, s->window_ms,
                                           rm->line_len != 0 ? rm->line : NULL,
                                           rm->line_len)) {
        if (mm == NULL)
            push(rm, MP_RND_OUT_OWN_NO_SLOT, 0, NULL);
        mp__joiner_on_alone(rm->joiner, rm->cfg.self, s->seq);
        return;
    }
    mp__joiner_on_ack(rm->joiner, rm->cfg.self, s->seq);
    poll_mm(rm, mm, now);
}

static void start_group(mp_rnd_t *rm, uint64_t now) {
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__joiner_group(rm->joiner, &n, &self, &gid);
    rm->n = n;
    rm->self = self;
    rm->gid = gid;
    memcpy(rm->roster, m, n * sizeof(*m));
    uint64_t noshare = 0;
    bool parts = true; /* every member cuts parts by the group's size */
    for (uint32_t i = 0; i < n; i++) {
        rm->weights[i] = m[i].weight;
        rm->bws[i] = m[i].bandwidth;
        if (m[i].noshare)
            noshare |= (uint64_t)1 << i;
        parts = parts && m[i].parts;
    }
    mp_group_cfg_t gc = {
        .round_id = gid,
        .n = n,
        .self = self,
        .weights = rm->weights,
        .bandwidths = rm->bws,
        .noshare = noshare,
        .values = rm->values,
        .count = rm->count,
        .part_elems =
            parts ? mp__share_part_elems(rm->count, n) : MP_PART_ELEMS_DEFAULT,
        .now_ms = now,
        .deadline_ms = rm->deadline_ms,
        .peer_timeout_ms = rm->cfg.peer_timeout_ms,
        .agg = rm->cfg.agg,
    };
    moshpit_err_t e = mp__group_new(&gc, &rm->group);
    if (e != MOSHPIT_OK) {
        rm->group = NULL;
        rm->over = true;
        rm->e = e;
        return;
    }
    rm->group_start_ms = now;
    push(rm, MP_RND_OUT_FORMED, 0, NULL);
}

/* Sends the joiner's JOINs (LEAVE to the previous matchmaker first), and
 * acts on its verdict. */
static void pump(mp_rnd_t *rm, uint64_t now) {
    if (!rm->in_call || rm->over || rm->group != NULL || rm->joiner == NULL)
        return;
    mp_join_send_t s;
    while (rm->group == NULL && mp__joiner_next_send(rm->joiner, &s)) {
        withdraw_join(rm);
        memcpy(rm->join_to, s.to, MP_ID_BYTES);
        rm->join_seq_sent = s.seq;
        rm->join_pending = true;
        if (is_self(rm, s.to)) {
            local_join(rm, now, &s);
            continue;
        }
        mp_rnd_out_t *o = push(rm, MP_RND_OUT_SEND, MP_RND_JOIN, s.to);
        if (o == NULL) {
            mp__joiner_on_peer_failed(rm->joiner, s.to);
            continue;
        }
        o->seq = s.seq;
        o->weight = rm->weight;
        o->bandwidth = mp__rnd_bandwidth(rm);
        o->window_ms = s.window_ms;
        o->key_len = rm->key_len;
        o->phase = rm->phase;
        o->noshare = rm->cfg.noshare;
    }
    switch (mp__joiner_state(rm->joiner)) {
    case MP_JOIN_GROUP:
        rm->join_pending = false;
        start_group(rm, now);
        break;
    case MP_JOIN_ALONE:
        withdraw_join(rm);
        rm->over = true;
        break;
    default:
        break;
    }
}

static bool joining(const mp_rnd_t *rm) {
    return rm->in_call && !rm->over && rm->group == NULL && rm->joiner != NULL;
}

void mp__rnd_on_ack(mp_rnd_t *rm, uint64_t now, const uint8_t from[MP_ID_BYTES],
                    uint64_t seq) {
    if (!joining(rm))
        return;
    mp__joiner_on_ack(rm->joiner, from, seq);
    pump(rm, now);
}

bool mp__rnd_on_group(mp_rnd_t *rm, uint64_t now,
                      const uint8_t from[MP_ID_BYTES], uint64_t seq,
                      uint64_t group_id, const mp_member_t *members, uint32_t n,
                      uint32_t phase) {
    if (!joining(rm))
        return false;
    bool ok = mp__joiner_on_group(rm->joiner, from, seq, group_id, members, n,
                                  rm->cfg.self);
    if (ok)
        rm->group_phase = phase;
    pump(rm, now);
    return ok;
}

void mp__rnd_on_alone(mp_rnd_t *rm, uint64_t now,
                      const uint8_t from[MP_ID_BYTES], uint64_t seq) {
    if (!joining(rm))
        return;
    mp__joiner_on_alone(rm->joiner, from, seq);
    pump(rm, now);
}

bool mp__rnd_peer_failed(mp_rnd_t *rm, uint64_t now,
                         const uint8_t id[MP_ID_BYTES]) {
    mp__rnd_forget(rm, id);
    if (!rm->in_call || rm->over)
        return false;
    if (rm->group == NULL && rm->joiner != NULL) {
        bool touched =
            rm->join_pending && memcmp(rm->join_to, id, MP_ID_BYTES) == 0;
        mp__joiner_on_peer_failed(rm->joiner, id);
        pump(rm, now);
        return touched;
    }
    bool touched = false;
    for (uint32_t i = 0; rm->group != NULL && i < rm->n; i++)
        if (i != rm->self && memcmp(rm->roster[i].id, id, MP_ID_BYTES) == 0) {
            mp__group_on_member_failed(rm->group, now, i);
            touched = true;
        }
    return touched;
}

void mp__rnd_member_failed(mp_rnd_t *rm, uint64_t now, uint32_t i) {
    if (rm->group != NULL && i < rm->n && i != rm->self)
        mp__group_on_member_failed(rm->group, now, i);
}

void mp__rnd_send_failed(mp_rnd_t *rm, uint64_t now, const mp_rnd_out_t *o) {
    if (o->kind != MP_RND_OUT_SEND || o->msg != MP_RND_JOIN || !joining(rm))
        return;
    mp__joiner_on_peer_failed(rm->joiner, o->to);
    pump(rm, now);
}

void mp__rnd_join_sent(mp_rnd_t *rm, uint64_t now,
                       const uint8_t to[MP_ID_BYTES]) {
    if (joining(rm))
        mp__joiner_on_sent(rm->joiner, now, to);
}

void mp__rnd_tick(mp_rnd_t *rm, uint64_t now) {
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++)
        if (rm->mms[i].mm != NULL && mp__mm_next_wakeup(rm->mms[i].mm) <= now)
            poll_mm(rm, rm->mms[i].mm, now);
    if (joining(rm))
        mp__joiner_on_tick(rm->joiner, now);
    pump(rm, now);
    if (rm->in_call && rm->group != NULL)
        mp__group_on_tick(rm->group, now);
}

uint64_t mp__rnd_next_wakeup(const mp_rnd_t *rm) {
    uint64_t w = UINT64_MAX;
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++)
        if (rm->mms[i].mm != NULL) {
            uint64_t t = mp__mm_next_wakeup(rm->mms[i].mm);
            w = t < w ? t : w;
        }
    if (rm->in_call) {
        uint64_t t = rm->deadline_ms + MP_RND_MARGIN_MS;
        w = t < w ? t : w;
        if (rm->group != NULL)
            t = mp__group_next_wakeup(rm->group);
        else if (rm->joiner != NULL && !rm->over)
            t = mp__joiner_next_wakeup(rm->joiner);
        w = t < w ? t : w;
    }
    return w;
}

bool mp__rnd_over(const mp_rnd_t *rm, uint64_t now, bool *alone,
                  moshpit_err_t *e) {
    *alone = true;
    *e = MOSHPIT_OK;
    if (!rm->in_call)
        return false;
    if (rm->over) {
        *e = rm->e;
        return true;
    }
    if (now >= rm->deadline_ms + MP_RND_MARGIN_MS) {
        *alone = rm->group == NULL;
        return true;
    }
    return false;
}

bool mp__rnd_group_finished(const mp_rnd_t *rm) {
    return rm->in_call && rm->group != NULL && mp__group_done(rm->group) &&
           !mp__group_has_sends(rm->group);
}

mp_group_t *mp__rnd_group(const mp_rnd_t *rm) {
    return rm->in_call ? rm->group : NULL;
}

const mp_member_t *mp__rnd_roster(const mp_rnd_t *rm, uint32_t *n,
                                  uint32_t *self, uint64_t *group_id) {
    if (!rm->in_call || rm->group == NULL)
        return NULL;
    *n = rm->n;
    *self = rm->self;
    *group_id = rm->gid;
    return rm->roster;
}

bool mp__rnd_recent_gid(const mp_rnd_t *rm, uint64_t gid) {
    for (uint32_t i = 0; i < MP_RND_RECENT; i++)
        if (gid != 0 && rm->recent[i] == gid)
            return true;
    return false;
}

void mp__rnd_end(mp_rnd_t *rm, uint64_t now, moshpit_err_t e, bool alone,
                 mp_rnd_result_t *res) {
    memset(res, 0, sizeof(*res));
    if (!rm->in_call)
        return;
    if (rm->group == NULL) {
        withdraw_join(rm);
    } else {
        /* DONE to every other member: this peer needs nothing more from
         * them (the driver decides which of them to wait for) */
        for (uint32_t i = 0; i < rm->n; i++) {
            if (i == rm->self)
                continue;
            mp_rnd_out_t *o =
                push(rm, MP_RND_OUT_SEND, MP_RND_DONE, rm->roster[i].id);
            if (o != NULL) {
                o->group_id = rm->gid;
                o->alive = mp__group_member_alive(rm->group, i);
            }
        }
    }
    res->group_size = 1;
    res->group_weight = rm->weight;
    res->group_id = rm->gid;
    res->n = rm->n;
    res->self = rm->self;
    const uint8_t *mm =
        rm->joiner != NULL ? mp__joiner_matchmaker(rm->joiner) : NULL;
    if (mm != NULL) {
        res->has_matchmaker = true;
        memcpy(res->matchmaker, mm, MP_ID_BYTES);
    }
    if (rm->group != NULL && !alone) {
        mp_group_result_t gr;
        mp__group_result(rm->group, &gr);
        res->grouped = true;
        res->group_size = gr.group_size;
        res->group_weight = gr.group_weight;
        res->fraction_averaged = gr.fraction_averaged;
        res->peers_failed = gr.peers_failed;
        res->matchmaking_ms = (uint32_t)(rm->group_start_ms - rm->start_ms);
        res->allreduce_ms = (uint32_t)(now - rm->group_start_ms);
    } else {
        res->matchmaking_ms = (uint32_t)(now - rm->start_ms);
    }
    /* the next grid key: this member's slot in the group plus the group's
     * coordinate offset (groups of one key cover consecutive coordinates),
     * or a random coordinate after a call without one */
    if (e == MOSHPIT_OK && res->grouped)
        mp__grid_shift(&rm->grid, rm->self + mp__mm_coord_offset(rm->gid));
    else if (e == MOSHPIT_OK)
        mp__grid_shift_random(&rm->grid);
    if (rm->gid != 0)
        rm->recent[rm->recent_pos++ % MP_RND_RECENT] = rm->gid;
    /* a round alone leaves the phase: a peer excluded as a round ahead
     * (core/matchmaker.c) is in step again for the next round */
    if (res->grouped) {
        uint32_t ph = rm->group_phase > rm->phase ? rm->group_phase : rm->phase;
        rm->phase = ph + 1u; /* wraps: a phase is only an ordering hint */
    }
    call_clear(rm);
}

uint32_t mp__rnd_mm_count(const mp_rnd_t *rm, size_t *pending) {
    uint32_t n = 0;
    size_t p = 0;
    for (uint32_t i = 0; i < MP_RND_MM_KEYS; i++)
        if (rm->mms[i].mm != NULL) {
            n++;
            p += mp__mm_pending(rm->mms[i].mm);
        }
    if (pending != NULL)
        *pending = p;
    return n;
}
