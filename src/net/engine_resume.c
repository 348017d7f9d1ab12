/* SPDX-License-Identifier: MIT */
/*
 * engine_resume.c - a group round that survives a connection reset: when a
 * data connection breaks mid-round, what was in its buffers is lost while
 * ZeroMQ dials again and the session (its keys, counters and tag) goes on.
 * A sender whose data connection to a mate broke (its monitor's
 * DISCONNECTED) sends a MARK behind everything it sealed. Frames travel on
 * several connections and overtake each other, so the mate answers a MARK
 * with a HAVE (what it holds from the sender) only once every frame below
 * it arrived, or once none below it arrived for half of the sender's
 * measured silence limit; a member that heard nothing from a mate for that
 * long asks for a MARK with a HAVE that claims nothing lost. The sender hands
 * out again only the parts the mate lacks that were sealed before both the MARK
 * and the last break, sealed afresh from the caller's buffer under the
 * session's keys. A member whose group machine is done says DONE at once and
 * keeps its call open until every mate said DONE too (or a bound), so that what
 * it sent last can still be repaired (docs/DESIGN.md, "On a lossy network";
 * docs/PROTOCOL.md, HAVE).
 */
#include "engine_int.h"

#include <string.h>
#include <zmq.h>

static uint32_t member_index(const mp_round_t *r, const mp_peer_t *p) {
    for (uint32_t i = 0; i < r->n; i++)
        if (p != NULL && r->members[i] == p)
            return i;
    return UINT32_MAX;
}

static uint64_t bit(uint32_t i) {
    return (uint64_t)1 << i;
}

static void link_broke(moshpit_t *mp, const mp_peer_t *p, bool mark);

/* A HAVE of the round from p, which has not said DONE, after this
 * peer said its own: p is still repairing (a quiet or asking HAVE: it
 * still expects parts from us; a MARK's HAVE: our parts to it may be
 * sent again), and a repair takes a HAVE, a MARK and the MARK's HAVE,
 * the last after up to half of our silence limit at p, so the wait for
 * the mates' DONEs (mp__engine_resume_settled) starts again from now;
 * the round's deadline still bounds it. A HAVE that came after the wait
 * had ended was dropped as for another round, and p kept local values
 * of what it lacked. */
static void restart_done_wait(moshpit_t *mp, const mp_peer_t *p, uint32_t i) {
    mp_round_t *r = &mp->round;
    if (!r->done_sent || p->done_gid == r->gid ||
        !mp__group_member_alive(r->group, i))
        return;
    uint64_t now = mp__engine_now_ms();
    if (now > r->wait_from) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round %016llx: %.8s is still repairing, the wait for "
                       "DONEs starts again %llu ms after our DONE",
                       (unsigned long long)r->gid, p->id_txt,
                       (unsigned long long)(now - r->done_at));
        r->wait_from = now;
    }
}

void mp__engine_resume_on_have(moshpit_t *mp, mp_peer_t *p,
                               const mp_have_t *h) {
    mp_round_t *r = &mp->round;
    uint32_t from = member_index(r, p);
    if (r->group == NULL || h->group_id != r->gid || from == UINT32_MAX) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "HAVE from %.8s for another round dropped", p->id_txt);
        return;
    }
    /* a mate still asking is not done: our wait for its DONE starts
     * again (within the round's deadline), so that what it asks for is
     * still answered */
    restart_done_wait(mp, p, from);
    /* frames are lost only with a connection that broke: what was sealed
     * after the last break to it this round is on its way (a stalled
     * connection delivers late, never not at all), so only parts sealed
     * up to then count as lost, however far rx reaches */
    if (!h->mark)
        /* it heard nothing from us for half of our limit there, or lost a
         * data connection to us: it is alive and the link between us
         * stalled or broke (a cut without a reset stalls TCP for longer
         * than the cut, its retransmissions backing off): patience for
         * it, as for a break (at most MP_GROUP_BREAKS a round) */
        link_broke(mp, p, false);
    uint64_t upto = h->rx;
    if (from < MP_GROUP_MAX && r->broke_ctr[from] < upto)
        upto = r->broke_ctr[from];
    uint32_t unsure = 0;
    uint32_t q = mp__group_on_have(r->group, mp__engine_awake(mp), from, h->sc,
                                   h->sc_len, h->ga, h->ga_len, upto, &unsure);
    if (q > 0)
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "round %016llx: %.8s lacks %u parts sent to it before "
                       "a data connection to it broke, sending them again",
                       (unsigned long long)r->gid, p->id_txt, q);
    /* parts it lacks that may still be on their way: a MARK behind them
     * on the data connection asks it again once they are through (not in
     * answer to a MARK's HAVE, so marks and HAVEs never chase each other) */
    if (unsure > 0 && !h->mark)
        r->mark_due |= bit(from);
    if (q > 0 || unsure > 0)
        mp__engine_pump_sends(mp);
}

/* How long a MARK waits for the frames below it that have not arrived:
 * the frames still on their way over other connections keep arriving
 * meanwhile (each restarts the wait); once none came for this long, the
 * ones missing were lost. */
static uint64_t settle_ms(const moshpit_t *mp, uint32_t i) {
    /* half of the sender's own silence limit, which follows its link */
    uint64_t lim = mp__group_limit(mp->round.group, i);
    return (lim > 0 ? lim : mp->cfg.peer_timeout_ms) / 2;
}

/* Whether every frame of this round from member i below its MARK arrived:
 * from lo_ctr, one above the highest counter taken from it before the
 * round's group formed (engine_round.c), since every frame of the round
 * was sealed after those. */
static void check_mark(mp_round_t *r, const mp_peer_t *p, uint32_t i) {
    uint64_t m = r->mark_ctr[i];
    if (m != 0 && r->lo_ctr[i] != 0 &&
        mp__replay_all_taken(&p->rx_window, r->lo_ctr[i], m))
        r->mark_full |= bit(i);
}

void mp__engine_resume_accepted(moshpit_t *mp, const mp_peer_t *p,
                                uint32_t from, uint64_t counter) {
    /* no conclusion from a gap in the counters: frames travel on several
     * connections and overtake each other; a MARK asks once a connection
     * broke (mp__engine_resume_data_down) */
    mp_round_t *r = &mp->round;
    if (from >= MP_GROUP_MAX)
        return;
    if (r->mark_ctr[from] != 0 && counter < r->mark_ctr[from]) {
        r->mark_fill_at[from] = mp__engine_now_ms();
        check_mark(r, p, from);
    }
}

/* A connection to p, a member of the round, broke (a disconnect event on
 * our side, or p's MARK): the round's part times say nothing of the links
 * any more, and p gets its own measured silence limit once more as
 * patience (mp__group_on_break: once per break, a few breaks a round), so
 * that the repair can start while a dead peer is still dropped after about
 * twice its limit. Nobody else's limit changes. A granted break moves the
 * round's measured end to as far from now as the round was given at its
 * start (never past the call's own round_timeout_ms). */
static void link_broke(moshpit_t *mp, const mp_peer_t *p, bool mark) {
    mp_round_t *r = &mp->round;
    uint32_t i = member_index(r, p);
    if (r->group == NULL || i == UINT32_MAX)
        return;
    r->repaired |= bit(i);
    uint64_t now = mp__engine_awake(mp);
    if (!(mark ? mp__group_on_mark(r->group, now, i)
               : mp__group_on_break(r->group, now, i)))
        return;
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "round %016llx: a connection to %.8s broke or stalled "
                   "%llu ms into the round, %llu ms more patience for it",
                   (unsigned long long)r->gid, p->id_txt,
                   (unsigned long long)(now - r->start_ms),
                   (unsigned long long)mp__group_limit(r->group, i));
    if (r->span_ms > 0)
        mp__rnd_extend_deadline(mp->rnd, mp__add_sat_u64(now, r->span_ms));
}

void mp__engine_resume_link_broke(moshpit_t *mp, const mp_peer_t *p) {
    link_broke(mp, p, false);
}

void mp__engine_resume_data_down(moshpit_t *mp, mp_peer_t *p) {
    mp_round_t *r = &mp->round;
    uint32_t i = member_index(r, p);
    if (r->group == NULL || i == UINT32_MAX ||
        !mp__group_member_alive(r->group, i))
        return;
    if (!(r->mark_due & bit(i)))
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "round %016llx: a data connection to %.8s broke, "
                       "asking what it holds",
                       (unsigned long long)r->gid, p->id_txt);
    /* every frame lost with it was sealed by now (the event is read after
     * the break) */
    r->broke_ctr[i] = p->tx_counter;
    r->mark_due |= bit(i);
    if (mp->outbound && p->data_rx == NULL)
        /* p answers on our connections: what it sent us on this one is
         * lost too, and p never sees the break (its data ROUTER has no
         * monitor); ask now what it handed out, so its MARK and the
         * repair do not wait for our silence limit (half of up to twice
         * peer_timeout_ms while only its gathers are expected), by which
         * time p may have ended its call */
        r->ask_due |= bit(i);
    link_broke(mp, p, false);
    mp__engine_pump_sends(mp);
    mp__engine_resume_send_haves(mp, mp__engine_now_ms());
}

void mp__engine_resume_on_mark(moshpit_t *mp, mp_peer_t *p, uint32_t from,
                               const uint8_t *buf, size_t len,
                               const mp_data_hdr_t *h) {
    mp_round_t *r = &mp->round;
    if (len != MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES ||
        mp__session_open(p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES, 0, buf + MP_DATA_HDR_BYTES,
                         (uint8_t *)mp->scratch) != MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "data frame from %.8s failed authentication, dropped",
                       p->id_txt);
        return;
    }
    mp__replay_take(&p->rx_window, h->counter);
    r->bytes_received += len;
    /* its connection to us broke: patience only if that grants a break
     * (at most MP_GROUP_BREAKS a round), so MARKs alone cannot keep a
     * mate that sends nothing else in the round (mp__group_on_mark) */
    link_broke(mp, p, true);
    mp__engine_resume_accepted(mp, p, from, h->counter);
    if (from >= MP_GROUP_MAX || h->counter <= r->mark_ctr[from])
        return;
    /* answered (the latest one only) once the frames below it are in */
    r->mark_ctr[from] = h->counter;
    r->mark_full &= ~bit(from);
    r->mark_fill_at[from] = mp__engine_now_ms();
    check_mark(r, p, from);
}

void mp__engine_resume_rx_down(moshpit_t *mp, mp_peer_t *p) {
    mp_round_t *r = &mp->round;
    uint32_t i = member_index(r, p);
    /* (dialable again: p dials us and answers on its own connections) */
    if (!mp->outbound || r->group == NULL || i == UINT32_MAX ||
        !mp__group_member_alive(r->group, i))
        return;
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "round %016llx: the data connection %.8s answers us on "
                   "broke, asking what it sent",
                   (unsigned long long)r->gid, p->id_txt);
    r->ask_due |= bit(i);
    link_broke(mp, p, false);
    mp__engine_resume_send_haves(mp, mp__engine_now_ms());
}

bool mp__engine_resume_mark(moshpit_t *mp, mp_peer_t *p, uint32_t i) {
    mp_round_t *r = &mp->round;
    if (i >= MP_GROUP_MAX || !(r->mark_due & bit(i)))
        return false;
    r->mark_due &= ~bit(i);
    zmq_msg_t *zm = mp__engine_stash_of(p);
    size_t total = MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES;
    if (zmq_msg_init_size(zm, total) != 0)
        return false;
    uint8_t *buf = zmq_msg_data(zm);
    mp_data_hdr_t h = {.kind = MP_PART_MARK,
                       .codec = MOSHPIT_COMPRESS_NONE,
                       .tag = p->their_tag,
                       .counter = ++p->tx_counter,
                       .round_id = r->gid};
    mp__wire_data_hdr_encode(&h, buf);
    if (mp__session_seal(p->keys, h.counter, buf, MP_DATA_HDR_BYTES, buf, 0,
                         buf + MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES) != MOSHPIT_OK) {
        zmq_msg_close(zm);
        return false;
    }
    p->stash_full = true;
    p->stash_bytes = (uint32_t)total;
    if (p->outbound)
        /* its frames go out through our data ROUTER, which has no monitor:
         * a break is never seen here, so whatever it lacks below this MARK
         * once the frames below it settled counts as lost */
        r->broke_ctr[i] = h.counter;
    return true;
}

void mp__engine_resume_send_haves(moshpit_t *mp, uint64_t now) {
    mp_round_t *r = &mp->round;
    if (r->group == NULL)
        return;
    for (uint32_t i = 0; i < r->n; i++) {
        mp_peer_t *p = r->members[i];
        if (p == NULL || p->state != MP_PEER_LIVE) {
            r->mark_ctr[i] = 0; /* no answer to a session that ended */
            r->quiet_in_mark &= ~bit(i);
        }
        bool full = (r->mark_full & bit(i)) != 0;
        bool mark = r->mark_ctr[i] != 0 &&
                    (full || now - r->mark_fill_at[i] >= settle_ms(mp, i));
        bool ask = false;
        if (!mark && (r->ask_due & bit(i))) {
            /* (behind an answer to its MARK, the next pass asks) */
            r->ask_due &= ~bit(i);
            ask = mp__group_member_alive(r->group, i);
        }
        /* one HAVE to a mate gone quiet while its MARK waits for the
         * frames below it, no more: it draws a newer MARK behind what the
         * mate sent since, whose wait starts again (with frames on
         * several connections, more time for a stalled one), but with
         * both at half of its limit each further one put the answer off
         * again, until the mate had ended its call; the due one is still
         * taken (the next is half a limit later), or it would stay due
         * and the engine would wake at once until the MARK settled */
        bool held = r->mark_ctr[i] != 0 && (r->quiet_in_mark & bit(i));
        if (p == NULL || p->state != MP_PEER_LIVE ||
            (!mark && !ask && (!mp__group_have_due(r->group, now, i) || held)))
            continue;
        if (!mark && !ask && r->mark_ctr[i] != 0)
            r->quiet_in_mark |= bit(i);
        mp_msg_t *m = mp->msg;
        memset(m, 0, sizeof(*m));
        m->type = MP_MSG_HAVE;
        mp_have_t *h = &m->u.have;
        h->group_id = r->gid;
        /* everything below rx that was not lost is here: the MARK's
         * counter once the frames below it settled; a HAVE to a mate gone
         * quiet proves nothing lost (a frame may sit on a stalled
         * connection while others delivered later ones): rx 0, and the
         * mate answers with a MARK behind the parts this one lacks */
        h->rx = mark ? r->mark_ctr[i] : 0;
        h->mark = mark;
        if (mark && !full)
            /* what it lacks below the MARK counts as lost: a frame that
             * sits on a stalled connection for longer is sent twice */
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "round %016llx: answering the MARK of %.8s with "
                           "frames below it missing, none came for %llu ms",
                           (unsigned long long)r->gid, p->id_txt,
                           (unsigned long long)(now - r->mark_fill_at[i]));
        if (mark) {
            r->mark_ctr[i] = 0;
            r->mark_full &= ~bit(i);
            r->quiet_in_mark &= ~bit(i);
        }
        if (!mark && !ask)
            /* the first HAVE to a mate gone quiet gives the repair the
             * mate's whole limit (its frames may queue behind others on a
             * slow link), unless a break gave it patience already or no
             * new part came since the last such restart; it is dropped if
             * nothing more comes after that */
            mp__group_quiet(r->group, now, i);
        size_t sl = 0, gl = 0;
        mp__group_holds(r->group, i, h->sc, sizeof(h->sc), &sl, h->ga,
                        sizeof(h->ga), &gl);
        h->sc_len = (uint32_t)sl;
        h->ga_len = (uint32_t)gl;
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "round %016llx: HAVE to %.8s (%s, up to frame %llu)",
                       (unsigned long long)r->gid, p->id_txt,
                       h->mark ? "its mark"
                       : ask   ? "our connection to it broke"
                               : "quiet for a while",
                       (unsigned long long)h->rx);
        mp__engine_send_msg(mp, p, m);
    }
}

static uint64_t wait_ms(const moshpit_t *mp) {
    return (uint64_t)MP_RESUME_WAIT_TIMEOUTS * mp->cfg.peer_timeout_ms;
}

bool mp__engine_resume_settled(moshpit_t *mp, uint64_t now) {
    mp_round_t *r = &mp->round;
    if (!r->done_sent) {
        /* this peer holds everything it will get: say so now (the round
         * machine's DONEs at the end of the call are not sent again) */
        r->done_sent = true;
        r->done_at = now;
        r->wait_from = now;
        mp_msg_t *m = mp->msg;
        for (uint32_t i = 0; i < r->n; i++) {
            mp_peer_t *p = r->members[i];
            if (p == NULL || p->state != MP_PEER_LIVE)
                continue;
            memset(m, 0, sizeof(*m));
            m->type = MP_MSG_DONE;
            m->u.done.group_id = r->gid;
            m->u.done.up_kbps = mp__engine_round_done_report(mp, p, r->gid);
            mp__engine_send_msg(mp, p, m);
        }
    }
    if (now - r->wait_from >= wait_ms(mp))
        return true;
    for (uint32_t i = 0; i < r->n; i++) {
        const mp_peer_t *p = r->members[i];
        if (p != NULL && p->state == MP_PEER_LIVE &&
            mp__group_member_alive(r->group, i) && p->done_gid != r->gid)
            return false;
    }
    return true;
}

uint64_t mp__engine_resume_wakeup(const moshpit_t *mp) {
    const mp_round_t *r = &mp->round;
    if (r->group == NULL)
        return UINT64_MAX;
    uint64_t w = r->done_sent ? r->wait_from + wait_ms(mp)
                              : mp__group_have_wakeup(r->group);
    if (r->ask_due != 0)
        return 0;
    for (uint32_t i = 0; i < r->n && i < MP_GROUP_MAX; i++) {
        if (r->mark_ctr[i] == 0)
            continue;
        uint64_t t =
            (r->mark_full & bit(i)) ? 0 : r->mark_fill_at[i] + settle_ms(mp, i);
        w = t < w ? t : w;
    }
    return w;
}
