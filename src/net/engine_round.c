/* SPDX-License-Identifier: MIT */
/*
 * engine_round.c - one moshpit_average() call on the engine thread: the
 * joiner (JOIN, fallback, LEAVE), this peer's matchmaker serving everyone's
 * JOINs, and the data plane of the group all-reduce (sealing parts from the
 * caller's buffer, opening arriving frames, holding frames that race ahead
 * of their round, back-pressure per destination).
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

static bool recent_gid(const moshpit_t *mp, uint64_t gid) {
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

/* Frees the shared-gather state of a round and wipes its keys. */
static void gather_keys_free(mp_round_t *r) {
    mp__session_keys_free(r->gk_seal);
    for (uint32_t i = 0; i < r->ngbody; i++)
        if (r->gbody[i] != NULL) {
            zmq_msg_close(r->gbody[i]);
            free(r->gbody[i]);
        }
    free(r->gbody);
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++)
        mp__session_keys_free(r->gk_rx[i]);
    mp__crypto_wipe(r->gk, sizeof(r->gk));
    mp__crypto_wipe(r->gk_rx_raw, sizeof(r->gk_rx_raw));
}

static void withdraw_join(moshpit_t *mp);

void mp__round_end(moshpit_t *mp, moshpit_err_t e, bool alone) {
    mp_round_t *r = &mp->round;
    mp_cmd_t *c = r->cmd;
    if (r->group == NULL)
        withdraw_join(mp);
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
    gather_keys_free(r);
    memset(r, 0, sizeof(*r));
    /* frames held for that round are useless now */
    for (size_t i = 0; i < mp->nearly;)
        if (recent_gid(mp, mp->early[i].round_id))
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

static void process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                          size_t len, const mp_data_hdr_t *h);

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
    /* this member's gather parts are sealed once with a fresh round key;
     * the cipher is one every member can open */
    uint32_t ciphers = mp->ciphers;
    for (uint32_t i = 0; i < n; i++)
        if (r->members[i] != NULL)
            ciphers &= r->members[i]->ciphers;
    r->gk_cipher = mp__crypto_pick_cipher(ciphers, ciphers);
    if (r->gk_cipher == 0) /* every peer of ours speaks ChaCha20-Poly1305 */
        r->gk_cipher = MP_CIPHER_CHACHA;
    mp__crypto_random(r->gk, sizeof(r->gk));
    if (mp__session_keys_from_raw(r->gk_cipher, r->gk, &r->gk_seal) !=
        MOSHPIT_OK) {
        mp__round_end(mp, MOSHPIT_ECRYPTO, true);
        return;
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
                process_frame(mp, p, buf, len, &h);
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

/* ------------------------------------------------------------------ */
/* data plane                                                          */

static uint32_t member_index(const mp_round_t *r, const mp_peer_t *p) {
    for (uint32_t i = 0; i < r->n; i++)
        if (p != NULL && r->members[i] == p)
            return i;
    return UINT32_MAX;
}

/* The header as every receiver of a shared gather part sees it: the
 * per-receiver tag and counter zeroed. */
static void canonical_ad(const uint8_t hdr[MP_DATA_HDR_BYTES],
                         uint8_t out[MP_DATA_HDR_BYTES]) {
    memcpy(out, hdr, MP_DATA_HDR_BYTES);
    memset(out + 8, 0, 16);
}

/* Hands an opened part (in mp->scratch) to the group machine. */
static void deliver(moshpit_t *mp, mp_peer_t *p, uint32_t from,
                    const mp_data_hdr_t *h) {
    mp_part_status_t st = mp__group_on_part(
        mp->round.group, mp__now_ms(), from, (mp_part_kind_t)h->kind, h->share,
        h->part, mp->scratch, h->count, h->wsum);
    if (st != MP_PART_OK && st != MP_PART_DUP && st != MP_PART_LATE)
        mp__log(mp, MOSHPIT_LOG_WARN, "part from %.8s rejected (status %d)%s",
                p->id_txt, (int)st,
                st == MP_PART_NONFINITE ? ": non-finite values, member dropped"
                                        : "");
}

static void process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                          size_t len, const mp_data_hdr_t *h) {
    mp_round_t *r = &mp->round;
    uint32_t from = member_index(r, p);
    if (from == UINT32_MAX || r->group == NULL)
        return;
    if (h->counter <= p->rx_counter) {
        mp__log(mp, MOSHPIT_LOG_WARN, "replayed data frame from %.8s dropped",
                p->id_txt);
        return;
    }
    size_t plen = (size_t)h->count * 4u;
    if (mp__session_open(p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES, plen,
                         buf + MP_DATA_HDR_BYTES + plen,
                         (uint8_t *)mp->scratch) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "data frame from %.8s failed authentication, dropped",
                p->id_txt);
        return;
    }
    p->rx_counter = h->counter;
    r->bytes_received += len;
    deliver(mp, p, from, h);
}

/* A gather part in the shared form: part 1 = header + the round key wrapped
 * for us, part 2 = the part sealed once under that key for every member. */
void mp__on_shared_gather(moshpit_t *mp, zmq_msg_t *head, zmq_msg_t *body) {
    const uint8_t *hb = zmq_msg_data(head);
    const uint8_t *bb = zmq_msg_data(body);
    size_t blen = zmq_msg_size(body);
    mp_round_t *r = &mp->round;
    mp_data_hdr_t h;
    if (zmq_msg_size(head) != MP_GATHER_HEAD_BYTES ||
        blen < MP_DATA_TAG_BYTES ||
        mp__data_hdr_decode(hb, MP_DATA_HDR_BYTES + blen, &h) != MOSHPIT_OK ||
        h.kind != MP_PART_GATHER) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "malformed gather frame dropped");
        return;
    }
    mp_peer_t *p = mp__find_peer_by_tag(mp, h.tag);
    uint32_t from = member_index(r, p);
    if (p == NULL || p->state != MP_PEER_LIVE || r->group == NULL ||
        h.round_id != r->gid || from == UINT32_MAX)
        return; /* gathers never precede our round: nothing to hold */
    if (h.counter <= p->rx_counter) {
        mp__log(mp, MOSHPIT_LOG_WARN, "replayed data frame from %.8s dropped",
                p->id_txt);
        return;
    }
    /* the wrap authenticates the header and the body's tag together */
    size_t clen = blen - MP_DATA_TAG_BYTES;
    uint8_t ad[MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES], wrap[33];
    memcpy(ad, hb, MP_DATA_HDR_BYTES);
    memcpy(ad + MP_DATA_HDR_BYTES, bb + clen, MP_DATA_TAG_BYTES);
    if (mp__session_open(p->keys, h.counter, ad, sizeof(ad),
                         hb + MP_DATA_HDR_BYTES, sizeof(wrap),
                         hb + MP_DATA_HDR_BYTES + sizeof(wrap),
                         wrap) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "gather key from %.8s failed authentication, dropped",
                p->id_txt);
        return;
    }
    p->rx_counter = h.counter;
    uint32_t cipher = wrap[0];
    if (r->gk_rx[from] == NULL ||
        memcmp(r->gk_rx_raw[from], wrap + 1, 32) != 0) {
        mp__session_keys_free(r->gk_rx[from]);
        r->gk_rx[from] = NULL;
        if ((cipher & mp->ciphers) == 0 ||
            mp__session_keys_from_raw(cipher, wrap + 1, &r->gk_rx[from]) !=
                MOSHPIT_OK) {
            mp__crypto_wipe(wrap, sizeof(wrap));
            mp__log(mp, MOSHPIT_LOG_WARN, "bad gather key from %.8s",
                    p->id_txt);
            return;
        }
        memcpy(r->gk_rx_raw[from], wrap + 1, 32);
    }
    mp__crypto_wipe(wrap, sizeof(wrap));
    canonical_ad(hb, ad);
    if (mp__session_open(r->gk_rx[from], (uint64_t)h.part + 1, ad,
                         MP_DATA_HDR_BYTES, bb, clen, bb + clen,
                         (uint8_t *)mp->scratch) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "gather part from %.8s failed authentication, dropped",
                p->id_txt);
        return;
    }
    r->bytes_received += MP_GATHER_HEAD_BYTES + blen;
    deliver(mp, p, from, &h);
}

void mp__on_data_msg(moshpit_t *mp, zmq_msg_t *zm) {
    const uint8_t *buf = zmq_msg_data(zm);
    size_t len = zmq_msg_size(zm);
    mp_data_hdr_t h;
    if (mp__data_hdr_decode(buf, len, &h) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "malformed data frame dropped");
        return;
    }
    mp_peer_t *p = mp__find_peer_by_tag(mp, h.tag);
    if (p == NULL || p->state != MP_PEER_LIVE) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "data frame with unknown tag dropped");
        return;
    }
    if (h.kind == MP_PART_STATE) {
        mp__state_on_frame(mp, p, buf, len, &h);
        return;
    }
    mp_round_t *r = &mp->round;
    if (r->group != NULL && h.round_id == r->gid) {
        process_frame(mp, p, buf, len, &h);
        return;
    }
    if (recent_gid(mp, h.round_id))
        return;
    /* maybe a round we are about to start: hold it (bounded in total and
     * per sender, so one peer cannot take the room of the others) */
    bool peer_full = p->early_frames >= MP_EARLY_PEER_MAX_FRAMES ||
                     p->early_bytes + len > MP_EARLY_PEER_MAX_BYTES;
    if (peer_full || mp->nearly >= MP_EARLY_MAX_FRAMES ||
        mp->early_bytes + len > MP_EARLY_MAX_BYTES) {
        uint64_t now = mp__now_ms();
        uint64_t *last = peer_full ? &p->early_logged_ms : &mp->early_logged_ms;
        if (*last == 0 || now - *last >= 1000) {
            *last = now;
            if (peer_full)
                mp__log(mp, MOSHPIT_LOG_WARN,
                        "early data frames from %.8s over the per-peer "
                        "limit (%u frames, %zu bytes held), dropped",
                        p->id_txt, p->early_frames, p->early_bytes);
            else
                mp__log(mp, MOSHPIT_LOG_WARN,
                        "early data frames over the limit (%zu frames, %zu "
                        "bytes held), frame from %.8s dropped",
                        mp->nearly, mp->early_bytes, p->id_txt);
        }
        return;
    }
    if ((mp->nearly & (mp->nearly + 1)) == 0 || mp->early == NULL) {
        size_t cap = (mp->nearly + 1) * 2;
        mp_early_t *ne = realloc(mp->early, cap * sizeof(*ne));
        if (ne == NULL)
            return;
        mp->early = ne;
    }
    zmq_msg_t *held = malloc(sizeof(*held));
    if (held == NULL)
        return;
    zmq_msg_init(held);
    zmq_msg_move(held, zm);
    mp->early[mp->nearly].from = p;
    mp->early[mp->nearly].round_id = h.round_id;
    mp->early[mp->nearly].arrived_ms = mp__now_ms();
    mp->early[mp->nearly].msg = held;
    mp->early[mp->nearly].bytes = len;
    mp->early_bytes += len;
    p->early_bytes += len;
    p->early_frames++;
    mp->nearly++;
}

static bool seal_part(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s) {
    size_t plen = (size_t)s->count * 4u;
    size_t total = MP_DATA_HDR_BYTES + plen + MP_DATA_TAG_BYTES;
    zmq_msg_t *zm = mp__stash_of(p);
    if (zmq_msg_init_size(zm, total) != 0)
        return false;
    uint8_t *buf = zmq_msg_data(zm);
    mp_data_hdr_t h = {.kind = (uint8_t)s->kind,
                       .count = s->count,
                       .tag = p->their_tag,
                       .counter = ++p->tx_counter,
                       .round_id = mp->round.gid,
                       .share = s->share,
                       .part = s->part,
                       .wsum = s->wsum};
    mp__data_hdr_encode(&h, buf);
    if (mp__session_seal(p->keys, h.counter, buf, MP_DATA_HDR_BYTES,
                         (const uint8_t *)s->data, plen,
                         buf + MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES + plen) != MOSHPIT_OK) {
        zmq_msg_close(zm);
        return false;
    }
    p->stash_full = true;
    p->stash_bytes = (uint32_t)total;
    return true;
}

/* The sealed body of own gather part s, sealed on first use and shared by
 * every receiver (zmq_msg_copy shares the buffer). */
static zmq_msg_t *gather_body(moshpit_t *mp, const mp_send_t *s) {
    mp_round_t *r = &mp->round;
    if (s->part >= r->ngbody) {
        uint32_t n = s->part + 1 > 2 * r->ngbody ? s->part + 1 : 2 * r->ngbody;
        void **nb = realloc(r->gbody, n * sizeof(*nb));
        if (nb == NULL)
            return NULL;
        memset(nb + r->ngbody, 0, (n - r->ngbody) * sizeof(*nb));
        r->gbody = nb;
        r->ngbody = n;
    }
    if (r->gbody[s->part] != NULL)
        return r->gbody[s->part];
    size_t plen = (size_t)s->count * 4u;
    zmq_msg_t *zm = malloc(sizeof(*zm));
    if (zm == NULL || zmq_msg_init_size(zm, plen + MP_DATA_TAG_BYTES) != 0) {
        free(zm);
        return NULL;
    }
    uint8_t hdr[MP_DATA_HDR_BYTES], ad[MP_DATA_HDR_BYTES];
    mp_data_hdr_t h = {.kind = MP_PART_GATHER,
                       .count = s->count,
                       .round_id = r->gid,
                       .share = s->share,
                       .part = s->part,
                       .wsum = s->wsum};
    mp__data_hdr_encode(&h, hdr);
    canonical_ad(hdr, ad);
    uint8_t *buf = zmq_msg_data(zm);
    if (mp__session_seal(r->gk_seal, (uint64_t)s->part + 1, ad, sizeof(ad),
                         (const uint8_t *)s->data, plen, buf,
                         buf + plen) != MOSHPIT_OK) {
        zmq_msg_close(zm);
        free(zm);
        return NULL;
    }
    r->gbody[s->part] = zm;
    return zm;
}

/* Stashes a shared gather part for p: its own header with the round key
 * wrapped under the p session, plus the shared sealed body. */
static bool seal_gather(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s) {
    mp_round_t *r = &mp->round;
    zmq_msg_t *body = gather_body(mp, s);
    if (body == NULL)
        return false;
    zmq_msg_t *hm = mp__stash_of(p);
    zmq_msg_t *bm = (zmq_msg_t *)(void *)p->stash_body;
    if (zmq_msg_init_size(hm, MP_GATHER_HEAD_BYTES) != 0)
        return false;
    uint8_t *buf = zmq_msg_data(hm);
    mp_data_hdr_t h = {.kind = MP_PART_GATHER,
                       .count = s->count,
                       .tag = p->their_tag,
                       .counter = ++p->tx_counter,
                       .round_id = r->gid,
                       .share = s->share,
                       .part = s->part,
                       .wsum = s->wsum};
    mp__data_hdr_encode(&h, buf);
    size_t blen = zmq_msg_size(body);
    uint8_t ad[MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES], wrap[33];
    memcpy(ad, buf, MP_DATA_HDR_BYTES);
    memcpy(ad + MP_DATA_HDR_BYTES,
           (const uint8_t *)zmq_msg_data(body) + blen - MP_DATA_TAG_BYTES,
           MP_DATA_TAG_BYTES);
    wrap[0] = (uint8_t)r->gk_cipher;
    memcpy(wrap + 1, r->gk, 32);
    moshpit_err_t e = mp__session_seal(p->keys, h.counter, ad, sizeof(ad), wrap,
                                       sizeof(wrap), buf + MP_DATA_HDR_BYTES,
                                       buf + MP_DATA_HDR_BYTES + sizeof(wrap));
    mp__crypto_wipe(wrap, sizeof(wrap));
    zmq_msg_init(bm);
    if (e != MOSHPIT_OK || zmq_msg_copy(bm, body) != 0) {
        zmq_msg_close(hm);
        zmq_msg_close(bm);
        return false;
    }
    p->stash_full = true;
    p->stash_multi = true;
    p->stash_bytes = (uint32_t)(MP_GATHER_HEAD_BYTES + blen);
    return true;
}

/* Sends p's stashed frame if its socket takes it now. */
static bool send_stash(moshpit_t *mp, mp_peer_t *p) {
    if (!p->stash_multi)
        return zmq_msg_send(mp__stash_of(p), p->data, ZMQ_DONTWAIT) >= 0;
    if (zmq_msg_send(mp__stash_of(p), p->data, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return false;
    /* the first part went in, so the pipe takes the rest of the message */
    zmq_msg_t *bm = (zmq_msg_t *)(void *)p->stash_body;
    if (zmq_msg_send(bm, p->data, ZMQ_DONTWAIT) < 0) {
        mp__log(mp, MOSHPIT_LOG_ERROR, "second part of a gather frame lost");
        zmq_msg_close(bm);
    }
    p->stash_multi = false;
    return true;
}

/* Moves as many parts to the sockets as they take. Returns true if some
 * member's socket is full (the loop must poll it for POLLOUT). */
void mp__pump_sends(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->group == NULL)
        return;
    bool progress = true;
    while (progress) {
        progress = false;
        for (uint32_t i = 0; i < r->n; i++) {
            mp_peer_t *p = r->members[i];
            if (p == NULL || p->data == NULL)
                continue;
            if (!mp__group_member_alive(r->group, i)) {
                mp__stash_drop(p);
                continue;
            }
            if (!p->stash_full) {
                mp_send_t s;
                if (!mp__group_next_send(r->group, i, &s))
                    continue;
                bool sealed = s.kind == MP_PART_GATHER ? seal_gather(mp, p, &s)
                                                       : seal_part(mp, p, &s);
                if (!sealed) {
                    mp__log(mp, MOSHPIT_LOG_ERROR, "sealing a part failed");
                    continue;
                }
            }
            if (send_stash(mp, p)) {
                p->stash_full = false;
                r->bytes_sent += p->stash_bytes;
                progress = true;
            }
        }
    }
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
