/* SPDX-License-Identifier: MIT */
/*
 * engine_round.c - one moshpit_average() call on the engine thread, and this
 * peer's matchmakers serving everyone's JOINs: the round machine
 * (core/round.c: joiner, matchmakers, group start, round end) driven with
 * the engine's clock and sessions. This file picks a call's view and
 * candidates, sends the machine's messages to peers with a live session,
 * maps a group's roster to sessions, and fills the caller's result. The
 * data plane of the all-reduce is in engine_data.c.
 */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "shm.h"

/* rounds                                                              */

void mp__engine_complete_cmd(moshpit_t *mp, mp_cmd_t *c, moshpit_err_t e) {
    /* the caller's values go back to it: a mate that reads a part of them
     * (directly: shm.h) from now on finds the epoch changed */
    if (mp->win != NULL)
        mp__shm_window_bump(mp->win, 0);
    mp_plat_mutex_lock(&mp->lock);
    c->result = e;
    c->done = true;
    /* the turn passes on now, not when the caller collects the result: an
     * op of moshpit_average_start may have nobody waiting for it */
    if (mp->cmd_active == c)
        mp->cmd_active = NULL;
    mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
}

bool mp__engine_recent_gid(const moshpit_t *mp, uint64_t gid) {
    return mp__rnd_recent_gid(mp->rnd, gid);
}

/* Removes held frame i keeping the others in arrival order (their nonces
 * must be processed in increasing order). */
void mp__engine_early_free_at(moshpit_t *mp, size_t i) {
    zmq_msg_close((zmq_msg_t *)mp->early[i].msg);
    free(mp->early[i].msg);
    mp->early_bytes -= mp->early[i].bytes;
    mp->early[i].from->early_bytes -= mp->early[i].bytes;
    mp->early[i].from->early_frames--;
    memmove(&mp->early[i], &mp->early[i + 1],
            (mp->nearly - i - 1) * sizeof(mp->early[0]));
    mp->nearly--;
}

bool mp__engine_owed_settled(const moshpit_t *mp) {
    for (uint32_t i = 0; i < mp->owed_n; i++) {
        const mp_peer_t *p = mp->owed[i];
        if (p->state == MP_PEER_LIVE && p->done_gid != mp->owed_gid)
            return false;
    }
    return true;
}

/* Deadlines from what this peer measured of its mates' links (DESIGN.md,
 * "Deadlines that follow the link"): each member's silence limit from the
 * time its parts took in earlier rounds, and the round's hard end from the
 * bytes expected from each, within the configured bounds. */
static void adapt_deadlines(moshpit_t *mp, uint64_t now) {
    mp_round_t *r = &mp->round;
    uint64_t own = mp__group_part_bytes(r->group, r->self), sum = 0;
    bool all = true;
    for (uint32_t i = 0; i < r->n; i++) {
        mp_peer_t *p = r->members[i];
        if (i == r->self || p == NULL)
            continue;
        uint64_t pb = mp__group_part_bytes(r->group, i), t;
        uint32_t lim = mp__link_silence_ms(&p->link, pb > own ? pb : own,
                                           mp->cfg.peer_timeout_ms);
        mp__group_set_silence(r->group, i, lim);
        /* summed: everything comes in over this peer's one link, and a
         * member's gathers may arrive slower than its scatter parts did */
        if (mp__link_bytes_ms(&p->link, mp__group_bytes_from(r->group, i), &t))
            sum = mp__add_sat_u64(sum, t);
        else
            all = false;
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round %016llx: member %u (%.8s) silence limit %u ms",
                       (unsigned long long)r->gid, i, p->id_txt, lim);
    }
    if (all && r->n > 1) {
        r->span_ms =
            mp__add_sat_u64(MP_LINK_DEADLINE_FLOOR_MS,
                            sum > UINT64_MAX / 4 ? UINT64_MAX : 4 * sum);
        mp__rnd_set_deadline(mp->rnd, mp__add_sat_u64(now, r->span_ms));
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round %016llx: measured end %llu ms from now",
                       (unsigned long long)r->gid,
                       (unsigned long long)r->span_ms);
    }
}

static void dial_ahead(moshpit_t *mp, const uint8_t *line, uint32_t line_len,
                       uint64_t now);

/* The group all-reduce of this peer's call exists: map its roster to
 * sessions (members without one are dialled, or dropped at once), feed
 * it the frames that raced ahead of our GROUP message, and dial the next
 * call's matchmakers. */
static void group_formed(moshpit_t *mp, uint64_t now) {
    mp_round_t *r = &mp->round;
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__rnd_roster(mp->rnd, &n, &self, &gid);
    if (m == NULL || r->cmd == NULL)
        return;
    /* the members' data monitors first (their descriptors do not always
     * signal at once, engine.c), so that the connections made since are
     * known for the restart below; the breaks read now are handled once
     * the group is set up, as they were when read after this */
    uint32_t breaks[MP_GROUP_MAX] = {0};
    for (uint32_t i = 0; i < n && i < MP_GROUP_MAX; i++) {
        mp_peer_t *p = i == self ? NULL : mp__engine_find_peer(mp, m[i].id);
        if (p != NULL && p->dmon != NULL)
            mp__engine_data_read_monitor(mp, p, &breaks[i]);
    }
    r->group = mp__rnd_group(mp->rnd);
    r->n = n;
    r->self = self;
    r->gid = gid;
    mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                   "round %016llx: group of %u, index %u, parts of %u values",
                   (unsigned long long)gid, n, self,
                   mp__group_part_elems(r->group));
    for (uint32_t i = 0; i < n; i++) {
        mp_peer_t *p = i == self ? NULL : mp__engine_find_peer(mp, m[i].id);
        r->members[i] = p;
        if (i != self && m[i].noshare && m[self].noshare &&
            (p == NULL || p->state != MP_PEER_LIVE)) {
            /* two outbound-only members: neither reduces a share, so
             * nothing passes between them (docs/DESIGN.md, "Peers behind
             * NAT") */
            r->members[i] = NULL;
            continue;
        }
        /* a member without a session is dialled: its parts go out once
         * the session is up (mp__engine_round_peer_live), and the round's
         * silence timers drop it if the session never comes */
        if (i != self)
            mp__engine_session_want(mp, p);
        bool dialling = p != NULL && p->state == MP_PEER_NEW && p->ctrl != NULL;
        if (i != self && !dialling &&
            (p == NULL || p->state != MP_PEER_LIVE || p->keys == NULL ||
             !mp__engine_has_data(p))) {
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "round %016llx: member %u has no session with us",
                           (unsigned long long)gid, i);
            r->members[i] = NULL;
            mp__rnd_member_failed(mp->rnd, now, i);
        } else if (i != self) {
            /* its frames of this round were sealed after every frame
             * taken from it so far (engine_resume.c) */
            r->lo_ctr[i] = p->rx_window.top + 1;
        }
        if (r->members[i] != NULL)
            r->members[i]->part_ms = 0;
    }
    /* shared memory only with this group's mates: the regions of other
     * peers close (a descriptor each way), and open again when they are
     * mates again (docs/DESIGN.md, "Mates on this host") */
    for (size_t k = 0; k < mp->npeers; k++) {
        mp_peer_t *q = mp->peers[k];
        bool mate = false;
        for (uint32_t i = 0; i < n && !mate; i++)
            mate = r->members[i] == q;
        if (!mate && (q->shm_tx != NULL || q->shm_rx != NULL))
            mp__engine_shm_drop(q);
    }
    r->start_ms = now;
    uint32_t fresh = 0, seen = 0;
    for (uint32_t i = 0; i < n; i++)
        if (r->members[i] != NULL && r->members[i]->state == MP_PEER_LIVE) {
            fresh += mp__engine_data_cc_restart(mp, r->members[i], &seen);
            (void)mp__engine_data_widen(mp, r->members[i]);
        }
    if (seen > 0)
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round %016llx: BBR's model read on %u data "
                       "connections, %u started afresh",
                       (unsigned long long)gid, seen, fresh);
    adapt_deadlines(mp, now);
    uint64_t owed[MP_GROUP_MAX];
    for (uint32_t i = 0; i < n; i++)
        owed[i] = i == self ? 0 : mp__group_share_bytes(r->group, i);
    mp__link_up_open(&mp->uplink, gid, n, owed);
    uint32_t up = mp__link_up_mbps(&mp->uplink);
    r->seq = mp__group_is_slow(r->group) && up > 0;
    if (r->seq) {
        r->seq_kbps = up > UINT32_MAX / 1000u ? UINT32_MAX : up * 1000u;
        r->seq_dest = (self + 1) % n;
        r->seq_next_ms = now;
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "round %016llx: our uplink (%u Mbit/s measured) is the "
                       "group's slowest: scatter parts go to one reducer "
                       "after another",
                       (unsigned long long)gid, up);
    }
    mp->up_n = n;
    for (uint32_t i = 0; i < n; i++)
        memcpy(mp->up_ids[i], m[i].id, 32);
    /* frames that came before our GROUP: the first from a member gives no
     * sample (it came before our start), the gaps between its next ones do
     * (engine_data.c) */
    r->replay = true;
    for (size_t i = 0; i < mp->nearly;) {
        if (mp->early[i].round_id != gid) {
            i++;
            continue;
        }
        if (mp->early[i].from->state != MP_PEER_LIVE) {
            i++; /* its session is still being opened */
            continue;
        }
        zmq_msg_t *zm = mp->early[i].msg;
        r->replay_at = mp->early[i].arrived_ms;
        const uint8_t *buf = zmq_msg_data(zm);
        size_t len = zmq_msg_size(zm);
        mp_data_hdr_t h;
        if (mp__wire_data_hdr_decode(buf, len, &h) == MOSHPIT_OK) {
            mp_peer_t *p = mp__engine_find_peer_by_tag(mp, h.tag);
            if (p != NULL)
                mp__engine_process_frame(mp, p, buf, len, &h);
        }
        mp__engine_early_free_at(mp, i);
    }
    r->replay = false;
    /* connections that broke before the round: nothing of ours was on
     * them, but an outbound-only peer's mates may have sent on its own
     * connections already (mp__engine_resume_data_down asks them) */
    for (uint32_t i = 0; i < n && i < MP_GROUP_MAX; i++)
        for (uint32_t k = 0; k < breaks[i] && r->members[i] != NULL; k++)
            mp__engine_resume_data_down(mp, r->members[i]);
    if (mp__engine_crowded(mp) && r->cmd != NULL && r->group != NULL) {
        /* the next call's matchmakers are known now: their sessions come
         * up while this round's data flows (after the mates' dials) */
        uint8_t line[MP_KEY_MAX];
        uint32_t len =
            mp__rnd_key_after_group(mp->rnd, (uint64_t)r->cmd->count, line);
        dial_ahead(mp, line, len, now);
    }
}

void mp__engine_round_peer_live(moshpit_t *mp, mp_peer_t *p) {
    mp_round_t *r = &mp->round;
    if (r->cmd == NULL || r->group == NULL ||
        !mp__engine_round_has_member(mp, p))
        return;
    r->replay = true;
    for (size_t i = 0; i < mp->nearly;) {
        if (mp->early[i].round_id != r->gid || mp->early[i].from != p) {
            i++;
            continue;
        }
        zmq_msg_t *zm = mp->early[i].msg;
        r->replay_at = mp->early[i].arrived_ms;
        const uint8_t *buf = zmq_msg_data(zm);
        size_t len = zmq_msg_size(zm);
        mp_data_hdr_t h;
        if (mp__wire_data_hdr_decode(buf, len, &h) == MOSHPIT_OK &&
            mp__engine_find_peer_by_tag(mp, h.tag) == p)
            mp__engine_process_frame(mp, p, buf, len, &h);
        mp__engine_early_free_at(mp, i);
    }
    r->replay = false;
    mp__engine_pump_sends(mp);
}

/* What a DONE to p for round gid reports: the rate at which p's scatter
 * parts reached this peer (0: none). */
uint32_t mp__engine_round_done_report(const moshpit_t *mp, const mp_peer_t *p,
                                      uint64_t gid) {
    const mp_round_t *r = &mp->round;
    if (r->group == NULL || r->gid != gid)
        return 0;
    for (uint32_t i = 0; i < r->n; i++)
        /* not after a break of its link: the times are the repair's */
        if (r->members[i] == p && r->scat_bytes[i] > 0 &&
            !((r->repaired >> i) & 1u))
            return mp__link_rate_kbps(r->scat_bytes[i],
                                      r->scat_last_ms[i] - r->start_ms);
    return 0;
}

/* Carries out what the round machine asked for: its messages go to peers
 * with a live session (a JOIN to anyone else falls back at once), DONEs
 * note the mates a close waits for. */
static void drain(moshpit_t *mp) {
    mp_rnd_out_t o;
    while (mp__rnd_next_out(mp->rnd, &o)) {
        uint64_t now = mp__engine_now_ms();
        if (o.kind == MP_RND_OUT_FORMED) {
            group_formed(mp, now);
            continue;
        }
        if (o.kind == MP_RND_OUT_OWN_NO_SLOT) {
            mp__engine_log(
                mp, MOSHPIT_LOG_WARN,
                "matchmaker: all %u group keys busy, own JOIN answered "
                "ALONE",
                MP_MM_KEYS);
            continue;
        }
        mp_peer_t *p = mp__engine_find_peer(mp, o.to);
        if (p != NULL && p->state != MP_PEER_LIVE && o.msg != MP_RND_DONE &&
            (p->state == MP_PEER_IDLE || p->idle_dial)) {
            /* a member without a session: dial it, the message waits */
            if (o.msg == MP_RND_JOIN) {
                p->join_seq = o.seq;
                p->join_ms = 0; /* its round trip includes the dial */
            }
            mp__round_msg_from_out(&o, mp->msg);
            bool queued = mp__engine_send_or_dial(mp, p, mp->msg);
            if (o.msg == MP_RND_JOIN)
                mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                               "round: JOIN to %.8s waits for its session%s",
                               p->id_txt, queued ? "" : ": failed");
            if (!queued)
                mp__rnd_send_failed(mp->rnd, now, &o);
            continue;
        }
        if (p == NULL || p->state != MP_PEER_LIVE) {
            if (o.msg == MP_RND_JOIN)
                mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                               "round: no session for a JOIN to %.8s (%s), "
                               "next candidate",
                               p != NULL ? p->id_txt : "unknown",
                               p == NULL                  ? "unknown"
                               : p->state == MP_PEER_NEW  ? "dialling"
                               : p->state == MP_PEER_DEAD ? "dead"
                                                          : "refused");
            mp__rnd_send_failed(mp->rnd, now, &o);
            continue;
        }
        if (o.msg == MP_RND_DONE && o.alive && o.group_id == mp->owed_gid &&
            mp->owed_n < MP_GROUP_MAX)
            mp->owed[mp->owed_n++] = p;
        if (o.msg == MP_RND_JOIN) {
            p->join_seq = o.seq;
            p->join_ms = now;
        }
        if (o.msg == MP_RND_DONE && mp->round.done_sent &&
            o.group_id == mp->round.gid)
            continue; /* said when it held everything (engine_resume.c) */
        mp__round_msg_from_out(&o, mp->msg);
        if (o.msg == MP_RND_DONE)
            mp->msg->u.done.up_kbps =
                mp__engine_round_done_report(mp, p, o.group_id);
        mp__engine_send_msg(mp, p, mp->msg);
    }
}

/* Matchmaker candidates into ids (room for the view): ourselves unless
 * outbound-only, and the live peers that are not outbound-only and that we
 * did not fail to reach at their advertised address (docs/DESIGN.md,
 * "Peers behind NAT"), and the members without a session (docs/DESIGN.md,
 * "Sessions"). */
static size_t candidates(moshpit_t *mp, uint8_t (*ids)[32], uint64_t now) {
    size_t k = 0;
    if (!mp->outbound)
        memcpy(ids[k++], mp->pub, 32);
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state != MP_PEER_LIVE && !p->outbound &&
            mp__engine_peer_member(mp, p)) {
            memcpy(ids[k++], p->id, 32);
            continue;
        }
        if (p->state != MP_PEER_LIVE || !mp__engine_swim_member_ok(mp, p->id) ||
            p->outbound)
            continue;
        if (!p->reach_ok && p->mon != NULL)
            mp__engine_read_monitor(mp, p); /* its handshake event */
        if (p->state == MP_PEER_LIVE && !mp__engine_unreached(p, now))
            memcpy(ids[k++], p->id, 32);
    }
    return k;
}

/* With outbound-only members (this peer, or one that said HELLO "ob"),
 * lines that may merge meet at one matchmaker: the JOIN goes under the
 * merge key of its line key and carries the line key (docs/DESIGN.md,
 * "Exact means over d > 1 rounds behind NAT"). The merge key into mkey
 * and its length, 0 when the line key is the matchmaking key. */
static uint32_t merge_key(const moshpit_t *mp, const uint8_t *key,
                          uint32_t key_len, uint8_t mkey[MP_KEY_MAX]) {
    bool nat = mp->outbound;
    for (size_t i = 0; !nat && i < mp->npeers; i++)
        nat = mp->peers[i]->state == MP_PEER_LIVE && mp->peers[i]->outbound;
    return nat ? mp__rnd_merge_key(mp->rnd, key, key_len, mkey) : 0;
}

/* Sessions only where needed: the first candidates of line, the key the
 * next call will have, get a session now, so that its JOIN does not wait
 * for a dial (docs/DESIGN.md, "Sessions"). */
static void dial_ahead(moshpit_t *mp, const uint8_t *line, uint32_t line_len,
                       uint64_t now) {
    if (!mp__engine_crowded(mp) || line_len == 0)
        return;
    size_t n = mp__engine_view_count(mp);
    uint8_t mkey[MP_KEY_MAX];
    uint32_t mkey_len = merge_key(mp, line, line_len, mkey);
    const uint8_t *key = mkey_len != 0 ? mkey : line;
    uint32_t key_len = mkey_len != 0 ? mkey_len : line_len;
    memcpy(mp->ahead_key, key, key_len);
    mp->ahead_key_len = key_len;
    uint8_t(*ids)[32] = malloc(n * 32);
    uint32_t *order = malloc(n * sizeof(*order));
    if (ids != NULL && order != NULL) {
        size_t k = candidates(mp, ids, now);
        mp__rendezvous_order(key, key_len, (const uint8_t(*)[32])ids, k, order);
        for (size_t i = 0; i < k && i < SESSION_DIAL_AHEAD; i++) {
            mp_peer_t *p = mp__engine_find_peer(mp, ids[order[i]]);
            if (p != NULL) {
                p->ahead = true;
                mp__engine_session_want(mp, p);
            }
        }
    }
    free(ids);
    free(order);
}

void mp__engine_round_end(moshpit_t *mp, moshpit_err_t e, bool alone) {
    mp_round_t *r = &mp->round;
    mp_cmd_t *c = r->cmd;
    uint64_t now = mp__engine_now_ms();
    if (r->group != NULL) {
        /* the members still alive in the round become the mates a close
         * waits for until they say DONE too (what this peer sent them may
         * still be queued in ZeroMQ or on the wire) */
        mp->owed_gid = r->gid;
        mp->owed_n = 0;
    }
    for (int m = 0; m < 2; m++)
        if (r->group != NULL && mp->mirror[m].gid == r->gid)
            mp->mirror[m].end_ms = now != 0 ? now : 1;
    if (r->group != NULL) {
        uint32_t resent = mp__group_resent(r->group);
        if (resent > 0)
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "round %016llx: %u parts re-sent",
                           (unsigned long long)r->gid, resent);
        if (r->dups > 0)
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "round %016llx: %u duplicate parts ignored",
                           (unsigned long long)r->gid, r->dups);
        if (r->shm_sent > 0 || r->shm_recv > 0)
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "round %016llx: %u parts sent and %u received "
                           "through shared memory, %u and %u of them read "
                           "directly",
                           (unsigned long long)r->gid, r->shm_sent, r->shm_recv,
                           r->direct_sent, r->direct_recv);
    }
    mp_group_times_t gt;
    mp__group_times(r->group, &gt);
    mp_rnd_result_t res;
    mp__rnd_end(mp->rnd, now, e, alone, &res);
    drain(mp); /* LEAVE or DONEs */
    if (res.grouped) {
        /* where the round's time went, in ms after the group formed */
        uint64_t t0 = now - res.allreduce_ms;
        uint64_t at[5] = {gt.first_scatter_ms, gt.first_gather_ms,
                          gt.own_final_ms, gt.gathered_ms,
                          r->done_sent ? r->done_at : 0};
        long long ms[5];
        for (int i = 0; i < 5; i++)
            ms[i] = at[i] >= t0 ? (long long)(at[i] - t0) : -1;
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round %016llx timeline (ms after the group formed, "
                       "-1: never): first scatter part %lld, first gather "
                       "part %lld, own share final %lld, all gathers %lld, "
                       "DONE sent %lld, end %llu",
                       (unsigned long long)res.group_id, ms[0], ms[1], ms[2],
                       ms[3], ms[4], (unsigned long long)res.allreduce_ms);
    }
    memset(&c->info, 0, sizeof(c->info));
    c->info.group_size = 1;
    c->info.group_weight = c->weight;
    if (res.grouped) {
        c->info.round_id = res.group_id;
        c->info.group_size = res.group_size;
        c->info.group_weight = res.group_weight;
        c->info.fraction_averaged = res.fraction_averaged;
        c->info.peers_failed = res.peers_failed;
        c->info.allreduce_ms = res.allreduce_ms;
    }
    if (res.grouped && res.fraction_averaged < 1.0)
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "round %016llx: %.3f of the elements averaged, %u of "
                       "%u members dropped, %llu ms after the group formed "
                       "(measured hard end %llu ms, 0: none)",
                       (unsigned long long)res.group_id, res.fraction_averaged,
                       res.peers_failed, res.group_size + res.peers_failed,
                       (unsigned long long)res.allreduce_ms,
                       (unsigned long long)r->span_ms);
    c->info.matchmaking_ms = res.matchmaking_ms;
    c->info.bytes_sent = r->bytes_sent;
    c->info.bytes_received = r->bytes_received;
    if (e == MOSHPIT_OK && res.grouped)
        mp__engine_state_round_done(mp, res.group_id, c->values, c->count);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL)
            mp__engine_stash_drop(r->members[i]);
    memset(r, 0, sizeof(*r));
    if (mp__engine_crowded(mp)) {
        uint8_t line[MP_KEY_MAX];
        uint32_t len = mp__rnd_next_key(mp->rnd, (uint64_t)c->count, line);
        dial_ahead(mp, line, len, now);
    }
    /* frames held for that round are useless now */
    for (size_t i = 0; i < mp->nearly;)
        if (mp__engine_recent_gid(mp, mp->early[i].round_id))
            mp__engine_early_free_at(mp, i);
        else
            i++;
    mp__engine_complete_cmd(mp, c, e);
}

/* Carries out the machine's outputs and ends the call if it is over
 * (alone, failed, or past its deadline). */
void mp__engine_round_pump(moshpit_t *mp) {
    drain(mp);
    bool alone = true;
    moshpit_err_t e = MOSHPIT_OK;
    if (mp->round.cmd != NULL &&
        mp__rnd_over(mp->rnd, mp__engine_awake(mp), &alone, &e))
        mp__engine_round_end(mp, e, alone);
}

/* Whether p is a mate of the running group that, like us, is
 * outbound-only while others reduce: nothing passes between us, so its
 * session ending (our dial to it behind another NAT giving up after 20
 * HELLOs, say) is no failure of the group (group_formed). */
static bool idle_mate(moshpit_t *mp, const mp_peer_t *p) {
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    if (mp->round.cmd == NULL || mp->round.group == NULL)
        return false;
    const mp_member_t *m = mp__rnd_roster(mp->rnd, &n, &self, &gid);
    if (m == NULL || self >= n || !m[self].noshare)
        return false;
    bool reducers = false, mate = false;
    for (uint32_t i = 0; i < n; i++) {
        reducers |= !m[i].noshare;
        mate |= i != self && m[i].noshare && memcmp(m[i].id, p->id, 32) == 0;
    }
    return reducers && mate;
}

void mp__engine_round_peer_failed(moshpit_t *mp, mp_peer_t *p) {
    mp_round_t *r = &mp->round;
    if (idle_mate(mp, p))
        return;
    (void)mp__rnd_peer_failed(mp->rnd, mp__engine_awake(mp), p->id);
    if (r->cmd != NULL && r->group != NULL)
        for (uint32_t i = 0; i < r->n; i++)
            if (r->members[i] == p)
                mp__engine_stash_drop(p);
    if (r->cmd != NULL)
        mp__engine_round_pump(mp);
    else
        drain(mp);
}

bool mp__engine_round_has_member(const moshpit_t *mp, const mp_peer_t *p) {
    const mp_round_t *r = &mp->round;
    if (r->cmd == NULL || r->group == NULL)
        return false;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] == p)
            return true;
    return false;
}

void mp__engine_start_round(moshpit_t *mp, mp_cmd_t *c) {
    mp_round_t *r = &mp->round;
    uint64_t now = mp__engine_now_ms();
    memset(r, 0, sizeof(*r));
    r->cmd = c;
    for (size_t i = 0; i < mp->npeers; i++)
        mp->peers[i]->ahead = false; /* this call's JOIN protects them now */
    /* the view: this peer and the live peers membership holds alive */
    size_t n = mp__engine_view_count(mp);
    uint8_t key[MP_KEY_MAX];
    uint32_t key_len = mp__rnd_key(mp->rnd, n, (uint64_t)c->count, key);
    /* with outbound-only members (this peer, or one that said HELLO
     * "ob"), lines that may merge meet at one matchmaker: the JOIN goes
     * under the merge key and carries the line key (docs/DESIGN.md,
     * "Exact means over d > 1 rounds behind NAT") */
    uint8_t mkey[MP_KEY_MAX];
    uint32_t mkey_len = merge_key(mp, key, key_len, mkey);
    const uint8_t *ckey = mkey_len != 0 ? mkey : key;
    uint32_t ckey_len = mkey_len != 0 ? mkey_len : key_len;
    uint8_t(*ids)[32] = malloc(n * 32);
    uint8_t(*ordered)[32] = malloc(n * 32);
    uint32_t *order = malloc(n * sizeof(*order));
    uint32_t *ack = malloc(n * sizeof(*ack));
    /* the upload rate the mates measured (DONE "up") lowers the announced
     * bandwidth (docs/DESIGN.md, "Shares that follow the measured
     * upload") */
    mp__rnd_set_bandwidth(mp->rnd, mp__link_up_mbps(&mp->uplink));
    moshpit_err_t e = MOSHPIT_ENOMEM;
    if (ids != NULL && ordered != NULL && order != NULL && ack != NULL) {
        size_t k = candidates(mp, ids, now);
        mp__rendezvous_order(ckey, ckey_len, (const uint8_t(*)[32])ids, k,
                             order);
        char first[41] = "";
        if (k > 0)
            zmq_z85_encode(first, ids[order[0]], 32);
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round: a view of %zu members, %zu matchmaker "
                       "candidates, the first %.8s",
                       n, k, first);
        for (size_t i = 0; i < k; i++) {
            memcpy(ordered[i], ids[order[i]], 32);
            mp_peer_t *p = mp__engine_find_peer(mp, ordered[i]);
            /* the key's first candidate gets a session now, before the
             * JOIN needs it (the next ones when a fallback needs them: at
             * a call's start every peer dials at once, and each handshake
             * more delays the one its JOIN waits for) */
            if (i == 0)
                mp__engine_session_want(mp, p);
            ack[i] = p != NULL ? mp__link_ack_ms(&p->link, UINT32_MAX) : 0;
            if (ack[i] == UINT32_MAX)
                ack[i] = 0;
        }
        /* in a swarm larger than sessions_max, a call whose matchmakers
         * were not dialled ahead (the first one, or one whose key changed)
         * waits 3 windows, at most 5 s longer than one: its JOIN and those of
         * its key's other callers may each wait for a dial first, and on a
         * loaded machine the last comes seconds after the first
         * (docs/DESIGN.md, "Sessions") */
        uint32_t window = 0;
        if (mp__engine_crowded(mp) &&
            (mp->ahead_key_len != ckey_len ||
             memcmp(mp->ahead_key, ckey, ckey_len) != 0)) {
            uint64_t win = mp->cfg.matchmaking_ms;
            uint64_t more = win * (SESSION_COLD_WINDOWS - 1);
            uint64_t w =
                win +
                (more < SESSION_COLD_MORE_MS ? more : SESSION_COLD_MORE_MS);
            window = (uint32_t)(w < 60000u ? w : 60000u); /* as matchmakers
                                                             clamp it */
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "round: matchmakers not dialled ahead, a window of "
                           "%u ms",
                           window);
        }
        mp_rnd_call_t call = {.window_ms = window,
                              .key = ckey,
                              .key_len = ckey_len,
                              .line = mkey_len != 0 ? key : NULL,
                              .line_len = mkey_len != 0 ? key_len : 0,
                              .cands = (const uint8_t(*)[32])ordered,
                              .ncands = k,
                              .weight = c->weight,
                              .values = c->values,
                              .count = c->count,
                              .ack_ms = ack};
        e = mp__rnd_start(mp->rnd, now, &call);
    }
    free(ids);
    free(ordered);
    free(order);
    free(ack);
    if (e != MOSHPIT_OK) {
        mp__engine_round_end(mp, e, true);
        return;
    }
    mp__engine_round_pump(mp);
}

/* A round message from p (JOIN, JOIN_ACK, GROUP, ALONE, LEAVE) into the
 * round machine; false if m is none of these. */
bool mp__engine_round_on_msg(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m) {
    uint64_t now = mp__engine_now_ms();
    if (m->type == MP_MSG_JOIN_ACK && p->join_ms != 0 &&
        m->u.ack.seq == p->join_seq) {
        mp__link_rtt(&p->link, now - p->join_ms);
        p->join_ms = 0;
    }
    if (m->type == MP_MSG_JOIN) { /* who may still come (round.h) */
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "round: JOIN from %.8s",
                       p->id_txt);
        mp__rnd_set_view_now(mp->rnd, mp__engine_view_count(mp));
    }
    mp_rnd_msg_status_t st = mp__round_msg_dispatch(mp->rnd, now, p->id, m);
    switch (st) {
    case MP_RND_MSG_OTHER:
        return false;
    case MP_RND_MSG_STALE:
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "stale or invalid GROUP");
        break;
    case MP_RND_MSG_BAD_KEY:
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "JOIN from %.8s with a malformed group key (%u bytes), "
                       "answered ALONE",
                       p->id_txt, m->u.join.key_len);
        break;
    case MP_RND_MSG_NO_SLOT:
    case MP_RND_MSG_REFUSED:
        /* a limit: all matchmaker slots busy, or this key's pending JOINs
         * at MP_MM_PENDING_MAX (the decoder already refused bad weights) */
        if (mp->mm_logged_ms == 0 || now - mp->mm_logged_ms >= 1000) {
            mp->mm_logged_ms = now;
            if (st == MP_RND_MSG_NO_SLOT)
                mp__engine_log(mp, MOSHPIT_LOG_WARN,
                               "matchmaker: all %u group keys busy, JOIN from "
                               "%.8s answered ALONE",
                               MP_MM_KEYS, p->id_txt);
            else
                mp__engine_log(mp, MOSHPIT_LOG_WARN,
                               "matchmaker: JOINs pending for this key at the "
                               "limit (%u), JOIN from %.8s answered ALONE",
                               MP_MM_PENDING_MAX, p->id_txt);
        }
        break;
    default:
        break;
    }
    if (mp->round.cmd != NULL)
        mp__engine_round_pump(mp);
    else
        drain(mp);
    return true;
}

static bool round_finished(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (!mp__rnd_group_finished(mp->rnd))
        return false;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL && r->members[i]->stash_full &&
            mp__group_member_alive(r->group, i))
            return false;
    /* and every mate holds what this peer sent it (or a bound passed) */
    return mp__engine_resume_settled(mp, mp__engine_now_ms());
}

void mp__engine_round_progress(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    uint64_t now = mp__engine_awake(mp);
    /* matchmakers run whether this peer is in a call or not */
    mp__rnd_tick(mp->rnd, now);
    if (r->cmd == NULL) {
        drain(mp);
        return;
    }
    mp__engine_round_pump(mp);
    if (r->cmd == NULL || r->group == NULL)
        return;
    for (uint32_t i = 0; i < r->n && i < MP_GROUP_MAX; i++) {
        if (i == r->self || r->members[i] == NULL ||
            (r->gone & ((uint64_t)1 << i)) ||
            mp__group_member_alive(r->group, i))
            continue;
        r->gone |= (uint64_t)1 << i;
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "round %016llx: member %u (%.8s) dropped after %llu ms",
                       (unsigned long long)r->gid, i, r->members[i]->id_txt,
                       (unsigned long long)(now - r->start_ms));
    }
    mp__engine_pump_sends(mp);
    mp__engine_resume_send_haves(mp, now);
    if (round_finished(mp))
        mp__engine_round_end(mp, MOSHPIT_OK, false);
}

uint64_t mp__engine_round_wakeup(const moshpit_t *mp) {
    uint64_t a = mp__rnd_next_wakeup(mp->rnd), b = mp__engine_pump_wakeup(mp);
    uint64_t t = mp__engine_resume_wakeup(mp);
    if (b < a)
        a = b;
    return t < a ? t : a;
}

void mp__engine_round_on_done(moshpit_t *mp, mp_peer_t *p, const mp_done_t *d) {
    if (d->up_kbps == 0 || d->group_id != mp->uplink.gid)
        return;
    for (uint32_t i = 0; i < mp->up_n; i++)
        if (memcmp(mp->up_ids[i], p->id, 32) == 0) {
            if (mp__link_up_report(&mp->uplink, d->group_id, i, d->up_kbps))
                mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                               "round %016llx: %.8s got our parts at %u "
                               "kbit/s",
                               (unsigned long long)d->group_id, p->id_txt,
                               d->up_kbps);
            return;
        }
}

/* ------------------------------------------------------------------ */
