/* SPDX-License-Identifier: MIT */
/*
 * engine_round.c - one moshpit_average() call on the engine thread: the
 * joiner (JOIN, fallback, LEAVE), this peer's matchmaker serving everyone's
 * JOINs, starting and ending the group all-reduce and driving it with time.
 * The data plane of the all-reduce is in engine_data.c.
 */
#include "engine_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/agg.h"
#include "core/share.h"
#include "net/net.h"

/* rounds                                                              */

void mp__complete_cmd(moshpit_t *mp, mp_cmd_t *c, moshpit_err_t e) {
    mp_plat_mutex_lock(&mp->lock);
    c->result = e;
    c->done = true;
    mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
}

static void remember_gid(moshpit_t *mp, uint64_t gid) {
    mp->recent_gids[mp->recent_pos++ % 16u] = gid;
}

bool mp__recent_gid(const moshpit_t *mp, uint64_t gid) {
    for (int i = 0; i < 16; i++)
        if (mp->recent_gids[i] == gid && gid != 0)
            return true;
    return false;
}

/* Removes held frame i keeping the others in arrival order (their nonces
 * must be processed in increasing order). */
void mp__early_free_at(moshpit_t *mp, size_t i) {
    zmq_msg_close((zmq_msg_t *)mp->early[i].msg);
    free(mp->early[i].msg);
    mp->early_bytes -= mp->early[i].bytes;
    mp->early[i].from->early_bytes -= mp->early[i].bytes;
    mp->early[i].from->early_frames--;
    memmove(&mp->early[i], &mp->early[i + 1],
            (mp->nearly - i - 1) * sizeof(mp->early[0]));
    mp->nearly--;
}

static void withdraw_join(moshpit_t *mp);

/* The end of a round in a group, whatever ended it: DONE to every member
 * with a session (this peer needs nothing more from them, so they may
 * close), and the members still alive in the round become the mates a
 * close waits for until they say DONE too (what this peer sent them may
 * still be queued in ZeroMQ or on the wire). */
static void group_done(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    mp_msg_t *m = mp->msg;
    mp->owed_gid = r->gid;
    mp->owed_n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        mp_peer_t *p = r->members[i];
        if (p == NULL || p->state != MP_PEER_LIVE)
            continue;
        memset(m, 0, sizeof(*m));
        m->type = MP_MSG_DONE;
        m->u.done.group_id = r->gid;
        mp__send_msg(mp, p, m);
        if (mp__group_member_alive(r->group, i))
            mp->owed[mp->owed_n++] = p;
    }
}

bool mp__owed_settled(const moshpit_t *mp) {
    for (uint32_t i = 0; i < mp->owed_n; i++) {
        const mp_peer_t *p = mp->owed[i];
        if (p->state == MP_PEER_LIVE && p->done_gid != mp->owed_gid)
            return false;
    }
    return true;
}

void mp__round_end(moshpit_t *mp, moshpit_err_t e, bool alone) {
    mp_round_t *r = &mp->round;
    mp_cmd_t *c = r->cmd;
    if (r->group == NULL)
        withdraw_join(mp);
    else
        group_done(mp);
    uint64_t now = mp__now_ms();
    memset(&c->info, 0, sizeof(c->info));
    c->info.group_size = 1;
    c->info.group_weight = c->weight;
    if (r->group != NULL && !alone) {
        mp_group_result_t gr;
        mp__group_result(r->group, &gr);
        c->info.round_id = r->gid;
        c->info.group_size = gr.group_size;
        c->info.group_weight = gr.group_weight;
        c->info.fraction_averaged = gr.fraction_averaged;
        c->info.peers_failed = gr.peers_failed;
        c->info.matchmaking_ms = (uint32_t)(r->group_start_ms - r->start_ms);
        c->info.allreduce_ms = (uint32_t)(now - r->group_start_ms);
    } else {
        c->info.matchmaking_ms = (uint32_t)(now - r->start_ms);
    }
    c->info.bytes_sent = r->bytes_sent;
    c->info.bytes_received = r->bytes_received;
    /* next grid key: this member's slot in the group, or a random
     * coordinate after a round alone */
    if (e == MOSHPIT_OK && r->group != NULL && !alone) {
        mp__grid_shift(&mp->grid, r->self);
        mp__state_round_done(mp, r->gid, c->values, c->count);
    } else if (e == MOSHPIT_OK)
        mp__grid_shift_random(&mp->grid);
    if (r->gid != 0)
        remember_gid(mp, r->gid);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL)
            mp__stash_drop(r->members[i]);
    mp__group_free(r->group);
    mp__joiner_free(r->joiner);
    memset(r, 0, sizeof(*r));
    /* frames held for that round are useless now */
    for (size_t i = 0; i < mp->nearly;)
        if (mp__recent_gid(mp, mp->early[i].round_id))
            mp__early_free_at(mp, i);
        else
            i++;
    mp__complete_cmd(mp, c, e);
}

void mp__round_peer_failed(moshpit_t *mp, mp_peer_t *p) {
    mp_round_t *r = &mp->round;
    if (r->cmd == NULL)
        return;
    if (r->joiner != NULL && r->group == NULL)
        mp__joiner_on_peer_failed(r->joiner, p->id);
    if (r->group != NULL)
        for (uint32_t i = 0; i < r->n; i++)
            if (r->members[i] == p) {
                mp__group_on_member_failed(r->group, mp__now_ms(), i);
                mp__stash_drop(p);
            }
}

bool mp__round_has_member(const moshpit_t *mp, const mp_peer_t *p) {
    const mp_round_t *r = &mp->round;
    if (r->cmd == NULL || r->group == NULL)
        return false;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] == p)
            return true;
    return false;
}

static void start_group(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__joiner_group(r->joiner, &n, &self, &gid);
    uint64_t now = mp__now_ms();
    r->n = n;
    r->self = self;
    r->gid = gid;
    for (uint32_t i = 0; i < n; i++) {
        r->weights[i] = m[i].weight;
        r->bws[i] = m[i].bandwidth;
        r->members[i] = i == self ? NULL : mp__find_peer(mp, m[i].id);
    }
    mp_group_cfg_t gc = {
        .round_id = gid,
        .n = n,
        .self = self,
        .weights = r->weights,
        .bandwidths = r->bws,
        .values = r->cmd->values,
        .count = r->cmd->count,
        .part_elems = MP_PART_ELEMS_DEFAULT,
        .now_ms = now,
        .deadline_ms = r->deadline_ms,
        .peer_timeout_ms = mp->cfg.peer_timeout_ms,
    };
    (void)mp__agg_from_config(&mp->cfg, &gc.agg); /* checked at open */
    moshpit_err_t e = mp__group_new(&gc, &r->group);
    if (e != MOSHPIT_OK) {
        mp__round_end(mp, e, true);
        return;
    }
    r->group_start_ms = now;
    mp__log(mp, MOSHPIT_LOG_DEBUG, "round %016llx: group of %u, index %u",
            (unsigned long long)gid, n, self);
    for (uint32_t i = 0; i < n; i++) {
        mp_peer_t *p = r->members[i];
        if (i != self && (p == NULL || p->state != MP_PEER_LIVE ||
                          p->keys == NULL || p->data == NULL)) {
            mp__log(mp, MOSHPIT_LOG_WARN,
                    "round %016llx: member %u has no session with us",
                    (unsigned long long)gid, i);
            r->members[i] = NULL;
            mp__group_on_member_failed(r->group, now, i);
        }
    }
    /* frames that raced ahead of our GROUP message */
    for (size_t i = 0; i < mp->nearly;) {
        if (mp->early[i].round_id != gid) {
            i++;
            continue;
        }
        zmq_msg_t *zm = mp->early[i].msg;
        const uint8_t *buf = zmq_msg_data(zm);
        size_t len = zmq_msg_size(zm);
        mp_data_hdr_t h;
        if (mp__data_hdr_decode(buf, len, &h) == MOSHPIT_OK) {
            mp_peer_t *p = mp__find_peer_by_tag(mp, h.tag);
            if (p != NULL)
                mp__process_frame(mp, p, buf, len, &h);
        }
        mp__early_free_at(mp, i);
    }
}

static void local_join(moshpit_t *mp, const mp_join_send_t *s);

/* Tells the matchmaker we last sent a JOIN to that it should forget it (we
 * moved on or gave up), so it does not put us into a group we will not
 * take part in. */
static void withdraw_join(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (!r->join_pending)
        return;
    r->join_pending = false;
    if (mp__is_self(mp, r->join_to)) {
        for (uint32_t i = 0; i < MP_MM_KEYS; i++)
            if (mp->mms[i].mm != NULL)
                mp__mm_on_leave(mp->mms[i].mm, mp->pub);
        return;
    }
    mp_peer_t *p = mp__find_peer(mp, r->join_to);
    if (p == NULL || p->state != MP_PEER_LIVE)
        return;
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_LEAVE;
    m->u.leave.seq = r->join_seq;
    mp__send_msg(mp, p, m);
}

void mp__pump_joiner(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    mp_join_send_t s;
    while (r->joiner != NULL && r->group == NULL &&
           mp__joiner_next_send(r->joiner, &s)) {
        withdraw_join(mp);
        memcpy(r->join_to, s.to, 32);
        r->join_seq = s.seq;
        r->join_pending = true;
        if (mp__is_self(mp, s.to)) {
            local_join(mp, &s);
            continue;
        }
        mp_peer_t *p = mp__find_peer(mp, s.to);
        if (p == NULL || p->state != MP_PEER_LIVE) {
            mp__joiner_on_peer_failed(r->joiner, s.to);
            continue;
        }
        mp_msg_t *m = mp->msg;
        memset(m, 0, sizeof(*m));
        m->type = MP_MSG_JOIN;
        m->u.join.seq = s.seq;
        m->u.join.weight = r->cmd->weight;
        m->u.join.bandwidth = mp->cfg.bandwidth_mbps;
        m->u.join.window_ms = s.window_ms;
        m->u.join.key_len = r->key_len;
        memcpy(m->u.join.key, r->key, r->key_len);
        mp__send_msg(mp, p, m);
    }
    if (r->joiner == NULL || r->group != NULL)
        return;
    switch (mp__joiner_state(r->joiner)) {
    case MP_JOIN_GROUP:
        r->join_pending = false;
        start_group(mp);
        break;
    case MP_JOIN_ALONE:
        withdraw_join(mp);
        mp__round_end(mp, MOSHPIT_OK, true);
        break;
    default:
        break;
    }
}

void mp__start_round(moshpit_t *mp, mp_cmd_t *c) {
    mp_round_t *r = &mp->round;
    uint64_t now = mp__now_ms();
    memset(r, 0, sizeof(*r));
    r->cmd = c;
    r->start_ms = now;
    r->deadline_ms = now + mp->cfg.round_timeout_ms - ROUND_MARGIN_MS;
    size_t n = 1;
    for (size_t i = 0; i < mp->npeers; i++)
        n += mp->peers[i]->state == MP_PEER_LIVE &&
             mp__swim_member_ok(mp, mp->peers[i]->id);
    /* the key: the vector length (peers only group with peers averaging
     * vectors of the same length), then the grid key */
    mp__grid_set_estimate(&mp->grid, n);
    uint64_t cnt = (uint64_t)c->count;
    for (int i = 0; i < 8; i++)
        r->key[i] = (uint8_t)(cnt >> (8 * i));
    r->key_len = 8 + (uint32_t)mp__grid_key(&mp->grid, r->key + 8);
    mp_agg_t agg; /* the aggregation rule, so that only equal rules group */
    (void)mp__agg_from_config(&mp->cfg, &agg);
    r->key_len += (uint32_t)mp__agg_key_suffix(&agg, r->key + r->key_len);
    uint8_t(*ids)[32] = malloc(n * 32);
    uint8_t(*ordered)[32] = malloc(n * 32);
    uint32_t *order = malloc(n * sizeof(*order));
    moshpit_err_t e = MOSHPIT_ENOMEM;
    if (ids != NULL && ordered != NULL && order != NULL) {
        size_t k = 0;
        memcpy(ids[k++], mp->pub, 32);
        for (size_t i = 0; i < mp->npeers; i++)
            if (mp->peers[i]->state == MP_PEER_LIVE &&
                mp__swim_member_ok(mp, mp->peers[i]->id))
                memcpy(ids[k++], mp->peers[i]->id, 32);
        mp__rendezvous_order(r->key, r->key_len, (const uint8_t(*)[32])ids, n,
                             order);
        for (size_t i = 0; i < n; i++)
            memcpy(ordered[i], ids[order[i]], 32);
        uint32_t win = mp->cfg.matchmaking_ms;
        /* a dead matchmaker is usually noticed at once (disconnect); the
         * ack timeout is for silent ones, so be patient with busy ones */
        uint32_t ack = win / 2 < 200 ? 200 : win / 2 > 5000 ? 5000 : win / 2;
        e = mp__joiner_new((const uint8_t(*)[32])ordered, n, mp->join_seq, now,
                           win, ack, 1000, &r->joiner);
        mp->join_seq += 1000; /* fresh seq space per round */
    }
    free(ids);
    free(ordered);
    free(order);
    if (e != MOSHPIT_OK) {
        mp__round_end(mp, e, true);
        return;
    }
    mp__pump_joiner(mp);
}

/* ------------------------------------------------------------------ */
/* matchmaker side                                                     */

static mp_mm_t *mm_for_key(moshpit_t *mp, const uint8_t *key, uint32_t len) {
    uint64_t now = mp__now_ms();
    mp_mm_slot_t *free_slot = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < MP_MM_KEYS; i++) {
        mp_mm_slot_t *s = &mp->mms[i];
        if (s->mm == NULL) {
            if (free_slot == NULL)
                free_slot = s;
            continue;
        }
        if (s->key_len == len && memcmp(s->key, key, len) == 0) {
            s->last_used_ms = now;
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
    if (mp__mm_new(mp->cfg.group_size, mp->cfg.min_group_size,
                   mp__crypto_random_u64(), &free_slot->mm) != MOSHPIT_OK)
        return NULL;
    memcpy(free_slot->key, key, len);
    free_slot->key_len = len;
    free_slot->last_used_ms = now;
    return free_slot->mm;
}

static void deliver_group_to_self(moshpit_t *mp, const mp_mm_out_t *o,
                                  uint64_t seq) {
    mp_round_t *r = &mp->round;
    if (r->joiner == NULL || r->group != NULL)
        return;
    if (o->kind == MP_MM_GROUP)
        mp__joiner_on_group(r->joiner, mp->pub, seq, o->group_id, o->members,
                            o->n, mp->pub);
    else
        mp__joiner_on_alone(r->joiner, mp->pub, seq);
}

void mp__poll_mm(moshpit_t *mp, mp_mm_t *mm, uint64_t now) {
    mp_mm_out_t *o = mp->mm_out; /* not re-entered: see mp__pump_joiner below */
    bool touched_self = false;
    while (mp__mm_poll(mm, now, o)) {
        if (o->kind == MP_MM_GROUP) {
            mp__log(mp, MOSHPIT_LOG_DEBUG, "matchmaker: group of %u formed",
                    o->n);
            mp_msg_t *m = mp->msg;
            for (uint32_t i = 0; i < o->n; i++) {
                if (mp__is_self(mp, o->members[i].id)) {
                    deliver_group_to_self(mp, o, o->members[i].seq);
                    touched_self = true;
                    continue;
                }
                mp_peer_t *p = mp__find_peer(mp, o->members[i].id);
                if (p == NULL || p->state != MP_PEER_LIVE)
                    continue;
                memset(m, 0, sizeof(*m));
                m->type = MP_MSG_GROUP;
                m->u.group.seq = o->members[i].seq;
                m->u.group.group_id = o->group_id;
                m->u.group.n = o->n;
                memcpy(m->u.group.members, o->members,
                       o->n * sizeof(o->members[0]));
                for (uint32_t k = 0; k < o->n; k++)
                    m->u.group.members[k].seq = 0;
                mp__send_msg(mp, p, m);
            }
        } else if (o->kind == MP_MM_ALONE) {
            if (mp__is_self(mp, o->members[0].id)) {
                deliver_group_to_self(mp, o, o->members[0].seq);
                touched_self = true;
            } else {
                mp_peer_t *p = mp__find_peer(mp, o->members[0].id);
                if (p != NULL && p->state == MP_PEER_LIVE)
                    mp__send_simple(mp, p, MP_MSG_ALONE, o->members[0].seq);
            }
        }
    }
    if (touched_self)
        mp__pump_joiner(mp);
}

static void local_join(moshpit_t *mp, const mp_join_send_t *s) {
    mp_round_t *r = &mp->round;
    mp_mm_t *mm = mm_for_key(mp, r->key, r->key_len);
    mp_member_t me;
    memcpy(me.id, mp->pub, 32);
    me.weight = r->cmd->weight;
    me.bandwidth = mp->cfg.bandwidth_mbps;
    me.seq = s->seq;
    uint64_t now = mp__now_ms();
    if (mm == NULL || !mp__mm_on_join(mm, now, &me, s->window_ms)) {
        if (mm == NULL)
            mp__log(mp, MOSHPIT_LOG_WARN,
                    "matchmaker: all %u group keys busy, own JOIN answered "
                    "ALONE",
                    MP_MM_KEYS);
        mp__joiner_on_alone(r->joiner, mp->pub, s->seq);
        return;
    }
    mp__joiner_on_ack(r->joiner, mp->pub, s->seq);
    mp__poll_mm(mp, mm, now);
}

/* A key as peers build it: vector length (8 bytes), d (1..8), then d-1
 * coordinates below this peer's group_size, then the aggregation suffix
 * (core/agg.h). Anything else is a peer with another configuration or a
 * hostile one: it would only take a matchmaker slot. */
static bool key_ok(const moshpit_t *mp, const uint8_t *key, uint32_t len) {
    if (len < 9 || key[8] < 1 || key[8] > MP_GRID_DIMS_MAX ||
        len < 8u + key[8] ||
        !mp__agg_key_suffix_ok(key + 8 + key[8], len - 8u - key[8]))
        return false;
    for (uint32_t i = 9; i < 8u + key[8]; i++)
        if (key[i] >= mp->cfg.group_size)
            return false;
    return true;
}

void mp__on_join(moshpit_t *mp, mp_peer_t *p, const mp_join_t *j) {
    uint64_t now = mp__now_ms();
    if (!key_ok(mp, j->key, j->key_len)) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "JOIN from %.8s with a malformed group key (%u bytes), "
                "answered ALONE",
                p->id_txt, j->key_len);
        mp__send_simple(mp, p, MP_MSG_ALONE, j->seq);
        return;
    }
    /* a joiner runs one round at a time: a JOIN for a new key withdraws
     * its JOIN under any other key, so one peer holds one pending slot */
    for (uint32_t i = 0; i < MP_MM_KEYS; i++) {
        mp_mm_slot_t *s = &mp->mms[i];
        if (s->mm != NULL && (s->key_len != j->key_len ||
                              memcmp(s->key, j->key, j->key_len) != 0))
            mp__mm_on_leave(s->mm, p->id);
    }
    mp_mm_t *mm = mm_for_key(mp, j->key, j->key_len);
    mp_member_t m;
    memcpy(m.id, p->id, 32);
    m.weight = j->weight;
    m.bandwidth = j->bandwidth;
    m.seq = j->seq;
    if (mm == NULL || !mp__mm_on_join(mm, now, &m, j->window_ms)) {
        /* a limit: all matchmaker slots busy, or this key's pending JOINs
         * at MP_MM_PENDING_MAX (the decoder already refused bad weights) */
        if (mp->mm_logged_ms == 0 || now - mp->mm_logged_ms >= 1000) {
            mp->mm_logged_ms = now;
            if (mm == NULL)
                mp__log(mp, MOSHPIT_LOG_WARN,
                        "matchmaker: all %u group keys busy, JOIN from "
                        "%.8s answered ALONE",
                        MP_MM_KEYS, p->id_txt);
            else
                mp__log(mp, MOSHPIT_LOG_WARN,
                        "matchmaker: %zu JOINs pending for this key (the "
                        "limit is %u), JOIN from %.8s answered ALONE",
                        mp__mm_pending(mm), MP_MM_PENDING_MAX, p->id_txt);
        }
        mp__send_simple(mp, p, MP_MSG_ALONE, j->seq);
        return;
    }
    mp__send_simple(mp, p, MP_MSG_JOIN_ACK, j->seq);
    mp__poll_mm(mp, mm, now);
}

static bool round_finished(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->group == NULL || !mp__group_done(r->group))
        return false;
    if (mp__group_has_sends(r->group))
        return false;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL && r->members[i]->stash_full &&
            mp__group_member_alive(r->group, i))
            return false;
    return true;
}

void mp__round_progress(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->cmd == NULL)
        return;
    uint64_t now = mp__now_ms();
    if (r->group == NULL && r->joiner != NULL) {
        mp__joiner_on_tick(r->joiner, now);
        mp__pump_joiner(mp);
        if (r->cmd == NULL)
            return;
    }
    if (r->group != NULL) {
        mp__group_on_tick(r->group, now);
        mp__pump_sends(mp);
        if (round_finished(mp) || now >= r->deadline_ms + ROUND_MARGIN_MS)
            mp__round_end(mp, MOSHPIT_OK, false);
    } else if (now >= r->deadline_ms + ROUND_MARGIN_MS) {
        mp__round_end(mp, MOSHPIT_OK, true);
    }
}

/* ------------------------------------------------------------------ */
