/* SPDX-License-Identifier: MIT */
/*
 * moshsim_peer.c - one simulated peer, as src/net/engine_round.c drives
 * the core for one moshpit_average() call: key and candidates at the start,
 * the joiner (JOIN, fallback, LEAVE), the matchmaker service this peer runs
 * for every key it is chosen for (whether it calls this round or not), the
 * group all-reduce over simnet messages (parts that race ahead of their
 * GROUP held), the round end (grid shift, next weight), and what a crash
 * notice changes. Messages: JOIN (seq, window, bandwidth, weight; the key
 * as payload), JOIN_ACK, ALONE, LEAVE (seq), GROUP (seq, group id, n; the
 * roster as payload), PART (kind, share, part, wsum, group id; floats).
 */
#include "sim/moshsim_int.h"

#include "core/agg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* messages                                                            */

static void send(moshsim_t *s, uint32_t from, uint32_t to, uint32_t type,
                 const uint64_t arg[3], const void *data, size_t len) {
    simnet_msg_t m = {.src = node_of(from), .dst = node_of(to), .type = type};
    for (int i = 0; i < 3; i++)
        m.arg[i] = arg[i];
    m.data = data;
    m.len = len;
    simnet_send(s->net, &m);
}

static void send_simple(moshsim_t *s, uint32_t from, uint32_t to, uint32_t type,
                        uint64_t seq) {
    const uint64_t arg[3] = {seq, 0, 0};
    send(s, from, to, type, arg, NULL, 0);
}

static uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bitsd(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ------------------------------------------------------------------ */
/* matchmaker side                                                     */

static mm_slot_t *mm_for_key(moshsim_t *s, uint32_t q, const uint8_t *key,
                             size_t len) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    mm_slot_t *free_slot = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < MM_SLOTS; i++) {
        mm_slot_t *m = &p->mms[i];
        if (m->mm == NULL) {
            if (free_slot == NULL)
                free_slot = m;
            continue;
        }
        if (m->len == len && memcmp(m->key, key, len) == 0) {
            m->used = now;
            return m;
        }
        if (mp__mm_pending(m->mm) == 0 &&
            (oldest == NULL || m->used < oldest->used))
            oldest = m;
    }
    if (free_slot == NULL && oldest != NULL) {
        mp__mm_free(oldest->mm);
        oldest->mm = NULL;
        free_slot = oldest;
    }
    if (free_slot == NULL)
        return NULL;
    uint64_t seed = moshsim__mix64(
        s->c.seed ^ moshsim__mix64((uint64_t)q << 20 ^ p->mm_made++));
    if (mp__mm_new(s->c.group_size, s->c.min_group_size, seed,
                   &free_slot->mm) != MOSHPIT_OK)
        return NULL;
    memcpy(free_slot->key, key, len);
    free_slot->len = len;
    free_slot->used = now;
    return free_slot;
}

/* The matchmaker's answer to this peer's own JOIN. */
static void deliver_to_self(moshsim_t *s, uint32_t q, const mp_mm_out_t *o,
                            uint64_t seq) {
    speer_t *p = &s->p[q];
    if (!p->in_call || p->joiner == NULL || p->group != NULL)
        return;
    if (o->kind == MP_MM_GROUP)
        mp__joiner_on_group(p->joiner, p->id, seq, o->group_id, o->members,
                            o->n, p->id);
    else
        mp__joiner_on_alone(p->joiner, p->id, seq);
}

static void poll_mm(moshsim_t *s, uint32_t q, mp_mm_t *mm) {
    mp_mm_out_t *o = &s->mm_out;
    uint64_t now = simnet_now(s->net);
    while (mp__mm_poll(mm, now, o)) {
        if (o->kind == MP_MM_GROUP) {
            /* the roster goes out without the other members' seqs */
            memcpy(s->roster, o->members, o->n * sizeof o->members[0]);
            for (uint32_t k = 0; k < o->n; k++)
                s->roster[k].seq = 0;
            for (uint32_t i = 0; i < o->n; i++) {
                uint32_t to = moshsim__find_id(s, o->members[i].id);
                if (to == q) {
                    deliver_to_self(s, q, o, o->members[i].seq);
                } else if (to != MOSHSIM_NONE && !s->p[to].known_dead) {
                    const uint64_t arg[3] = {o->members[i].seq, o->group_id,
                                             o->n};
                    send(s, q, to, MSG_GROUP, arg, s->roster,
                         o->n * sizeof s->roster[0]);
                }
            }
        } else if (o->kind == MP_MM_ALONE) {
            uint32_t to = moshsim__find_id(s, o->members[0].id);
            if (to == q)
                deliver_to_self(s, q, o, o->members[0].seq);
            else if (to != MOSHSIM_NONE && !s->p[to].known_dead)
                send_simple(s, q, to, MSG_ALONE, o->members[0].seq);
        }
    }
}

/* A key as peers build it (engine_round.c key_ok): vector length (8
 * bytes), d (1..8), then d-1 coordinates below group_size, then the
 * aggregation suffix. */
static bool key_ok(const moshsim_t *s, const uint8_t *key, size_t len) {
    if (len < 9 || len > MP_KEY_MAX || key[8] < 1 ||
        key[8] > MP_GRID_DIMS_MAX || len < 8u + key[8] ||
        !mp__agg_key_suffix_ok(key + 8 + key[8], len - 8u - key[8]))
        return false;
    for (size_t i = 9; i < 8u + key[8]; i++)
        if (key[i] >= s->c.group_size)
            return false;
    return true;
}

void moshsim__on_join(moshsim_t *s, uint32_t q, uint32_t from, uint64_t seq,
                      double weight, uint32_t bandwidth, uint32_t window_ms,
                      const uint8_t *key, size_t key_len) {
    if (!key_ok(s, key, key_len)) {
        if (from == s->hostile)
            s->wstats.join_bad_key++;
        send_simple(s, q, from, MSG_ALONE, seq);
        return;
    }
    /* one pending JOIN per sender over all keys, as the engine */
    speer_t *p = &s->p[q];
    for (uint32_t i = 0; i < MM_SLOTS; i++)
        if (p->mms[i].mm != NULL && (p->mms[i].len != key_len ||
                                     memcmp(p->mms[i].key, key, key_len) != 0))
            mp__mm_on_leave(p->mms[i].mm, s->p[from].id);
    mm_slot_t *slot = mm_for_key(s, q, key, key_len);
    mp_member_t mb;
    memset(&mb, 0, sizeof mb);
    memcpy(mb.id, s->p[from].id, MP_ID_BYTES);
    mb.seq = seq;
    mb.bandwidth = bandwidth;
    mb.weight = weight;
    if (slot == NULL ||
        !mp__mm_on_join(slot->mm, simnet_now(s->net), &mb, window_ms)) {
        send_simple(s, q, from, MSG_ALONE, mb.seq);
        return;
    }
    send_simple(s, q, from, MSG_ACK, mb.seq);
    poll_mm(s, q, slot->mm);
}

static void mm_forget(speer_t *p, const uint8_t id[MP_ID_BYTES]) {
    for (uint32_t i = 0; i < MM_SLOTS; i++)
        if (p->mms[i].mm != NULL)
            mp__mm_on_leave(p->mms[i].mm, id);
}

/* ------------------------------------------------------------------ */
/* the call                                                            */

static void end_call(moshsim_t *s, uint32_t q, bool alone);
static void start_group(moshsim_t *s, uint32_t q);

/* LEAVE to the matchmaker of the JOIN in flight (engine: withdraw_join). */
static void withdraw_join(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    if (!p->join_pending)
        return;
    p->join_pending = false;
    if (p->join_to == q) {
        mm_forget(p, p->id);
        return;
    }
    if (p->join_to == MOSHSIM_NONE || s->p[p->join_to].known_dead)
        return;
    send_simple(s, q, p->join_to, MSG_LEAVE, 0);
}

static void local_join(moshsim_t *s, uint32_t q, const mp_join_send_t *js) {
    speer_t *p = &s->p[q];
    mm_slot_t *slot = mm_for_key(s, q, p->key, p->key_len);
    mp_member_t me;
    memset(&me, 0, sizeof me);
    memcpy(me.id, p->id, MP_ID_BYTES);
    me.weight = p->weight;
    me.bandwidth = BANDWIDTH;
    me.seq = js->seq;
    if (slot == NULL ||
        !mp__mm_on_join(slot->mm, simnet_now(s->net), &me, js->window_ms)) {
        mp__joiner_on_alone(p->joiner, p->id, js->seq);
        return;
    }
    mp__joiner_on_ack(p->joiner, p->id, js->seq);
    poll_mm(s, q, slot->mm);
}

static void pump_joiner(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    mp_join_send_t js;
    while (p->in_call && p->group == NULL && p->joiner != NULL &&
           mp__joiner_next_send(p->joiner, &js)) {
        withdraw_join(s, q);
        uint32_t to = moshsim__find_id(s, js.to);
        p->join_to = to;
        p->join_pending = true;
        if (to == q) {
            local_join(s, q, &js);
            continue;
        }
        if (to == MOSHSIM_NONE || s->p[to].known_dead) {
            mp__joiner_on_peer_failed(p->joiner, js.to);
            continue;
        }
        const uint64_t arg[3] = {
            js.seq, (uint64_t)BANDWIDTH << 32 | js.window_ms, dbits(p->weight)};
        send(s, q, to, MSG_JOIN, arg, p->key, p->key_len);
    }
    if (!p->in_call || p->group != NULL || p->joiner == NULL)
        return;
    switch (mp__joiner_state(p->joiner)) {
    case MP_JOIN_GROUP:
        p->join_pending = false;
        start_group(s, q);
        break;
    case MP_JOIN_ALONE:
        withdraw_join(s, q);
        end_call(s, q, true);
        break;
    default:
        break;
    }
}

static uint32_t member_index(const speer_t *p, uint32_t peer) {
    for (uint32_t i = 0; i < p->n; i++)
        if (p->members[i] == peer && i != p->self)
            return i;
    return MOSHSIM_NONE;
}

static int feed_part(moshsim_t *s, uint32_t q, uint32_t from, uint32_t kind,
                     uint32_t share, uint32_t part, const float *data,
                     uint32_t count, double wsum) {
    speer_t *p = &s->p[q];
    uint32_t i = member_index(p, from);
    if (i == MOSHSIM_NONE)
        return -2;
    return (int)mp__group_on_part(p->group, simnet_now(s->net), i,
                                  (mp_part_kind_t)kind, share, part, data,
                                  count, wsum);
}

static void clear_held(speer_t *p) {
    for (size_t i = 0; i < p->nheld; i++)
        free(p->held[i].data);
    p->nheld = 0;
}

static void start_group(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__joiner_group(p->joiner, &n, &self, &gid);
    uint64_t now = simnet_now(s->net);
    double w[MP_GROUP_MAX];
    uint32_t bw[MP_GROUP_MAX];
    p->n = n;
    p->self = self;
    p->gid = gid;
    for (uint32_t i = 0; i < n; i++) {
        w[i] = m[i].weight;
        bw[i] = m[i].bandwidth;
        p->members[i] = moshsim__find_id(s, m[i].id);
    }
    const uint8_t *mm = mp__joiner_matchmaker(p->joiner);
    p->last.matchmaker = mm != NULL ? moshsim__find_id(s, mm) : MOSHSIM_NONE;
    p->last.group_id = gid;
    p->last.roster = n;
    p->last.slot = self;
    p->last.group_ms = now;
    mp_group_cfg_t gc = {
        .round_id = gid,
        .n = n,
        .self = self,
        .weights = w,
        .bandwidths = bw,
        .values = p->values,
        .count = s->c.count,
        .part_elems = MP_PART_ELEMS_DEFAULT,
        .now_ms = now,
        .deadline_ms = p->deadline,
        .peer_timeout_ms = s->c.peer_timeout_ms,
        .agg = s->c.agg,
    };
    if (mp__group_new(&gc, &p->group) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__group_new failed\n");
        abort();
    }
    /* members we know to be gone (the engine: no session with them) */
    for (uint32_t i = 0; i < n; i++)
        if (i != self &&
            (p->members[i] == MOSHSIM_NONE || s->p[p->members[i]].known_dead))
            mp__group_on_member_failed(p->group, now, i);
    /* parts that raced ahead of our GROUP */
    for (size_t i = 0; i < p->nheld; i++) {
        held_t *h = &p->held[i];
        if (h->gid == gid)
            (void)feed_part(s, q, h->from, h->kind, h->share, h->part, h->data,
                            h->count, h->wsum);
    }
    clear_held(p);
}

static void pump_sends(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    for (uint32_t d = 0; d < p->n; d++) {
        if (d == p->self || p->members[d] == MOSHSIM_NONE)
            continue;
        mp_send_t snd;
        while (mp__group_next_send(p->group, d, &snd)) {
            const uint64_t arg[3] = {(uint64_t)snd.kind |
                                         (uint64_t)snd.share << 8 |
                                         (uint64_t)snd.part << 32,
                                     dbits(snd.wsum), p->gid};
            send(s, q, p->members[d], MSG_PART, arg, snd.data,
                 (size_t)snd.count * sizeof(float));
        }
    }
}

static void remember_gid(speer_t *p, uint64_t gid) {
    p->recent[p->recent_pos++ % 16u] = gid;
}

static bool recent_gid(const speer_t *p, uint64_t gid) {
    for (int i = 0; i < 16; i++)
        if (gid != 0 && p->recent[i] == gid)
            return true;
    return false;
}

int moshsim__on_part(moshsim_t *s, uint32_t q, uint32_t from, uint32_t kind,
                     uint32_t share, uint32_t part, double wsum, uint64_t gid,
                     const float *data, uint32_t count) {
    speer_t *p = &s->p[q];
    if (!p->in_call)
        return -2;
    if (p->group != NULL && gid == p->gid)
        return feed_part(s, q, from, kind, share, part, data, count, wsum);
    if (recent_gid(p, gid) || p->nheld >= HELD_MAX)
        return -2;
    /* maybe the group whose GROUP message is still on its way: hold it */
    if (p->nheld == p->capheld) {
        p->capheld = p->capheld ? 2 * p->capheld : 16;
        p->held = moshsim__xrealloc(p->held, p->capheld * sizeof *p->held);
    }
    held_t *h = &p->held[p->nheld++];
    *h = (held_t){.gid = gid,
                  .from = from,
                  .kind = kind,
                  .share = share,
                  .part = part,
                  .count = count,
                  .wsum = wsum};
    h->data = moshsim__xmalloc((size_t)count * sizeof(float));
    memcpy(h->data, data, (size_t)count * sizeof(float));
    return -1;
}

static void on_part(moshsim_t *s, uint32_t q, uint32_t from,
                    const simnet_msg_t *m) {
    uint32_t kind = (uint32_t)(m->arg[0] & 0xff);
    uint32_t share = (uint32_t)((m->arg[0] >> 8) & 0xffffff);
    uint32_t part = (uint32_t)(m->arg[0] >> 32);
    (void)moshsim__on_part(s, q, from, kind, share, part, bitsd(m->arg[1]),
                           m->arg[2], m->data,
                           (uint32_t)(m->len / sizeof(float)));
}

static void end_call(moshsim_t *s, uint32_t q, bool alone) {
    speer_t *p = &s->p[q];
    if (p->group == NULL)
        withdraw_join(s, q);
    moshsim_call_t *c = &p->last;
    c->ended = true;
    c->end_ms = simnet_now(s->net);
    c->group_size = 1;
    c->group_weight = p->weight;
    c->fraction_averaged = 0;
    c->peers_failed = 0;
    if (p->group != NULL && !alone) {
        mp_group_result_t gr;
        mp__group_result(p->group, &gr);
        c->group_size = gr.group_size;
        c->group_weight = gr.group_weight;
        c->fraction_averaged = gr.fraction_averaged;
        c->peers_failed = gr.peers_failed;
    } else if (p->joiner != NULL && p->group == NULL) {
        const uint8_t *mm = mp__joiner_matchmaker(p->joiner);
        c->matchmaker = mm != NULL ? moshsim__find_id(s, mm) : MOSHSIM_NONE;
    }
    /* the next round's key and weight */
    if (p->group != NULL)
        mp__grid_shift(&p->grid, p->self);
    else
        mp__grid_shift_random(&p->grid);
    p->weight = c->group_weight / (double)c->group_size;
    if (p->gid != 0)
        remember_gid(p, p->gid);
    mp__group_free(p->group);
    p->group = NULL;
    mp__joiner_free(p->joiner);
    p->joiner = NULL;
    p->gid = 0;
    p->n = 0;
    p->join_pending = false;
    clear_held(p);
    p->in_call = false;
}

static void start_call(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    p->in_call = true;
    p->deadline = now + s->c.round_timeout_ms - MARGIN_MS;
    memset(&p->last, 0, sizeof p->last);
    p->last.round = s->round;
    p->last.start_ms = now;
    p->last.matchmaker = MOSHSIM_NONE;
    s->called++;
    if (p->byz) { /* poisoned values, maybe an inflated weight */
        for (uint32_t e = 0; e < s->c.count; e++)
            p->values[e] = 1e20f;
        if (s->c.byz_weight > 0)
            p->weight = s->c.byz_weight;
    }

    bool custom;
    size_t nview = moshsim__view(s, q, &custom);
    mp__grid_set_estimate(&p->grid, nview);
    p->key_len = moshsim__key(s, &p->grid, p->key);
    uint32_t cand[MOSHSIM_CANDIDATES];
    size_t k = moshsim__candidates(s, custom, nview, p->key, p->key_len, cand);
    uint8_t ids[MOSHSIM_CANDIDATES][MP_ID_BYTES];
    for (size_t i = 0; i < k; i++)
        memcpy(ids[i], s->p[cand[i]].id, MP_ID_BYTES);
    uint32_t win = s->c.matchmaking_ms;
    uint32_t ack = win / 2 < 200 ? 200 : win / 2 > 5000 ? 5000 : win / 2;
    if (mp__joiner_new((const uint8_t(*)[MP_ID_BYTES])ids, k, p->join_seq, now,
                       win, ack, GRACE_MS, &p->joiner) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__joiner_new failed\n");
        abort();
    }
    p->join_seq += 1000;
}

/* ------------------------------------------------------------------ */
/* event handling                                                      */

static uint64_t min64(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}

static void schedule_wake(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t w = NONE64;
    if (p->in_call) {
        if (p->group != NULL)
            w = mp__group_next_wakeup(p->group);
        else
            w = mp__joiner_next_wakeup(p->joiner);
        w = min64(w, p->deadline + MARGIN_MS);
    }
    for (uint32_t i = 0; i < MM_SLOTS; i++)
        if (p->mms[i].mm != NULL)
            w = min64(w, mp__mm_next_wakeup(p->mms[i].mm));
    if (w != NONE64 && (p->wake_at == NONE64 || w < p->wake_at)) {
        simnet_timer(s->net, node_of(q), w, TAG_WAKE);
        p->wake_at = w;
    }
}

void moshsim__after_event(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    if (p->in_call && p->group == NULL)
        pump_joiner(s, q);
    if (p->in_call && p->group != NULL) {
        pump_sends(s, q);
        if ((mp__group_done(p->group) && !mp__group_has_sends(p->group)) ||
            now >= p->deadline + MARGIN_MS)
            end_call(s, q, false);
    } else if (p->in_call && now >= p->deadline + MARGIN_MS) {
        end_call(s, q, true);
    }
    schedule_wake(s, q);
}

/* A crash of peer v becomes known (its connections dropped). */
static void notice(moshsim_t *s, uint32_t v) {
    s->p[v].known_dead = true;
    for (uint32_t q = 0; q < s->np; q++) {
        speer_t *p = &s->p[q];
        if (!p->alive || q == v)
            continue;
        mm_forget(p, s->p[v].id);
        bool touched = false;
        if (p->in_call && p->group == NULL && p->joiner != NULL) {
            touched = p->join_pending && p->join_to == v;
            mp__joiner_on_peer_failed(p->joiner, s->p[v].id);
        } else if (p->in_call && p->group != NULL) {
            uint32_t i = member_index(p, v);
            if (i != MOSHSIM_NONE) {
                mp__group_on_member_failed(p->group, simnet_now(s->net), i);
                touched = true;
            }
        }
        if (touched)
            moshsim__after_event(s, q);
    }
}

void moshsim__on_leave(moshsim_t *s, uint32_t q, uint32_t from) {
    mm_forget(&s->p[q], s->p[from].id);
}

void moshsim__on_ack(moshsim_t *s, uint32_t q, uint32_t from, uint64_t seq) {
    speer_t *p = &s->p[q];
    if (p->in_call && p->group == NULL && p->joiner != NULL)
        mp__joiner_on_ack(p->joiner, s->p[from].id, seq);
}

void moshsim__on_alone(moshsim_t *s, uint32_t q, uint32_t from, uint64_t seq) {
    speer_t *p = &s->p[q];
    if (p->in_call && p->group == NULL && p->joiner != NULL)
        mp__joiner_on_alone(p->joiner, s->p[from].id, seq);
}

void moshsim__on_group(moshsim_t *s, uint32_t q, uint32_t from, uint64_t seq,
                       uint64_t gid, const mp_member_t *members, uint32_t n) {
    speer_t *p = &s->p[q];
    if (p->in_call && p->group == NULL && p->joiner != NULL)
        mp__joiner_on_group(p->joiner, s->p[from].id, seq, gid, members, n,
                            p->id);
}

static void on_msg(simnet_t *net, uint32_t node, const simnet_msg_t *m,
                   void *user) {
    moshsim_t *s = user;
    (void)net;
    if (node == 0 || m->src == 0)
        return;
    uint32_t q = node - 1, from = m->src - 1;
    switch (m->type) {
    case MSG_JOIN:
        if (m->len > 0 && m->len <= MP_KEY_MAX)
            moshsim__on_join(s, q, from, m->arg[0], bitsd(m->arg[2]),
                             (uint32_t)(m->arg[1] >> 32), (uint32_t)m->arg[1],
                             m->data, m->len);
        break;
    case MSG_LEAVE:
        moshsim__on_leave(s, q, from);
        break;
    case MSG_ACK:
        moshsim__on_ack(s, q, from, m->arg[0]);
        break;
    case MSG_ALONE:
        moshsim__on_alone(s, q, from, m->arg[0]);
        break;
    case MSG_GROUP: {
        uint32_t n = (uint32_t)m->arg[2];
        if (n <= MP_GROUP_MAX && m->len == n * sizeof(mp_member_t))
            moshsim__on_group(s, q, from, m->arg[0], m->arg[1], m->data, n);
        break;
    }
    case MSG_PART:
        on_part(s, q, from, m);
        break;
    case MSG_WIRE:
        moshsim__wire_on_ctrl(s, q, from, m->data, m->len);
        break;
    case MSG_FRAME:
        moshsim__wire_on_frame(s, q, from, m->data, m->len);
        break;
    default:
        break;
    }
    if (q == s->hostile && m->type < MSG_WIRE)
        moshsim__wire_to_hostile(s, m);
    moshsim__after_event(s, q);
}

static void on_timer(simnet_t *net, uint32_t node, uint64_t tag, void *user) {
    moshsim_t *s = user;
    uint64_t now = simnet_now(net);
    if (node == 0) {
        notice(s, (uint32_t)tag);
        return;
    }
    uint32_t q = node - 1;
    speer_t *p = &s->p[q];
    switch (tag & 0xff) {
    case TAG_START:
        if ((tag >> 8) == s->round && !p->in_call)
            start_call(s, q);
        break;
    case TAG_HOSTILE:
        if (q == s->hostile && s->hops.on_wake != NULL)
            s->hops.on_wake(s, s->huser);
        break;
    case TAG_WAKE:
        if (p->wake_at != NONE64 && now >= p->wake_at)
            p->wake_at = NONE64;
        if (p->in_call && p->group == NULL && p->joiner != NULL)
            mp__joiner_on_tick(p->joiner, now);
        if (p->in_call && p->group != NULL)
            mp__group_on_tick(p->group, now);
        for (uint32_t i = 0; i < MM_SLOTS; i++)
            if (p->mms[i].mm != NULL && mp__mm_next_wakeup(p->mms[i].mm) <= now)
                poll_mm(s, q, p->mms[i].mm);
        break;
    default:
        break;
    }
    moshsim__after_event(s, q);
}

const simnet_ops_t moshsim__ops = {on_msg, on_timer};

void moshsim__kill_hook(simnet_t *net, uint32_t node, void *user) {
    moshsim_t *s = user;
    if (node == 0)
        return;
    s->p[node - 1].alive = false;
    s->view_dirty = true;
    if (s->c.notice_ms != MOSHSIM_NEVER)
        simnet_timer(net, 0, simnet_now(net) + s->c.notice_ms, node - 1);
}

/* ------------------------------------------------------------------ */
/* teardown                                                            */

void moshsim__free_call(speer_t *p) {
    mp__group_free(p->group);
    p->group = NULL;
    mp__joiner_free(p->joiner);
    p->joiner = NULL;
    clear_held(p);
    free(p->held);
    p->held = NULL;
    p->capheld = 0;
}
