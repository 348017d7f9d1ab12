/* SPDX-License-Identifier: MIT */
/*
 * engine_swim.c - membership: drives the sans-IO SWIM machine (core/swim.c)
 * over the engine's CURVE control links. SWIM decides who is a member and
 * who is dead; the engine keeps a session (HELLO, data keys) with every
 * member it learns of and counts a peer as a member while it has a live
 * session. A session ends when its TCP connection drops, or when SWIM
 * holds the peer dead and it did not answer a probe on the session within
 * SESSION_QUIET_MS (mp__engine_swim_check_sessions). Engine thread only.
 */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/swim.h"
#include "wire/wire_swim.h"

/* How often counters of refused or dropped membership input are logged. */
#define SWIM_STATS_LOG_MS 10000u

/* How often an outbound-only peer, or one in a swarm larger than
 * sessions_max, pulls the member list of a dialable member (swim_pull). */
#define SWIM_PULL_MS 5000u

static bool swim_partner(void *ctx, const uint8_t id[32]);

moshpit_err_t mp__engine_swim_setup(moshpit_t *mp) {
    mp_swim_config_t cfg;
    mp__swim_config_default(&cfg);
    /* A peer busy sealing a large round answers probes late: be patient
     * enough that a loaded 2-core machine does not suspect it, fast enough
     * that a silent peer is dead within a few seconds (docs/DESIGN.md,
     * "Membership"). Crashed peers are noticed at once anyway: their TCP
     * connections drop. */
    cfg.period_ms = 500;
    cfg.ping_timeout_ms = 400;
    cfg.ping_req_timeout_ms = 800;
    cfg.suspicion_min_ms = 3000;
    /* members tracked: the same bound as the engine's peer table */
    cfg.max_members = mp->peers_max;
    mp->swim_out = malloc(sizeof(*mp->swim_out));
    mp->swim_msg = malloc(sizeof(*mp->swim_msg));
    mp->swim_pb = malloc(MP_SWIM_PB_MAX * sizeof(*mp->swim_pb));
    if (mp->swim_out == NULL || mp->swim_msg == NULL || mp->swim_pb == NULL)
        return MOSHPIT_ENOMEM;
    moshpit_err_t e =
        mp__swim_new(&cfg, mp->pub, mp->ctrl_ep, mp__crypto_random_u64(),
                     mp__engine_now_ms(), &mp->swim);
    if (e == MOSHPIT_OK)
        mp__swim_set_partners(mp->swim, swim_partner, mp);
    return e;
}

void mp__engine_swim_teardown(moshpit_t *mp) {
    mp__swim_free(mp->swim);
    mp->swim = NULL;
    free(mp->swim_out);
    free(mp->swim_msg);
    free(mp->swim_pb);
    mp->swim_out = NULL;
    mp->swim_msg = NULL;
    mp->swim_pb = NULL;
    for (size_t i = 0; i < mp->npeers; i++) {
        free(mp->peers[i]->swim_pending);
        mp->peers[i]->swim_pending = NULL;
    }
}

bool mp__engine_swim_member_ok(const moshpit_t *mp, const uint8_t id[32]) {
    mp_swim_member_t m;
    if (mp->swim == NULL)
        return true;
    /* a live session is first-hand evidence (a crashed peer's session
     * ends when its TCP connections drop, a frozen one's by
     * mp__engine_swim_check_sessions); SWIM's verdict counts for members we
     * have no session with. A loaded machine answers probes late, and a false
     * "dead" must not cost a working session its rounds. */
    const mp_peer_t *p = mp__engine_find_peer((moshpit_t *)mp, id);
    if (p != NULL && p->state == MP_PEER_LIVE)
        return true;
    if (!mp__swim_lookup(mp->swim, id, &m))
        return true;
    return m.state == MP_SWIM_ALIVE || m.state == MP_SWIM_SUSPECT;
}

bool mp__engine_peer_member(const moshpit_t *mp, const mp_peer_t *p) {
    if (p->state == MP_PEER_LIVE)
        return true;
    /* a dial counts while membership holds the peer alive: one to a
     * member without a session, or any once the swarm is larger than
     * sessions_max (a full mesh counts live sessions only) */
    if (p->state != MP_PEER_IDLE &&
        !(p->state == MP_PEER_NEW && (p->idle_dial || mp__engine_crowded(mp))))
        return false;
    mp_swim_member_t m;
    return mp->swim != NULL && mp__swim_lookup(mp->swim, p->id, &m) &&
           (m.state == MP_SWIM_ALIVE || m.state == MP_SWIM_SUSPECT);
}

/* Membership probes the peers it has a session with, once the swarm has
 * more members than config sessions_max (docs/DESIGN.md, "Sessions"). */
static bool swim_partner(void *ctx, const uint8_t id[32]) {
    moshpit_t *mp = ctx;
    if (!mp__engine_crowded(mp))
        return true;
    const mp_peer_t *p = mp__engine_find_peer(mp, id);
    return p == NULL || p->outbound || p->state == MP_PEER_LIVE ||
           (p->state == MP_PEER_NEW && p->ctrl != NULL);
}

bool mp__engine_swim_alive(const moshpit_t *mp, const uint8_t id[32]) {
    mp_swim_member_t m;
    return mp->swim != NULL && mp__swim_lookup(mp->swim, id, &m) &&
           (m.state == MP_SWIM_ALIVE || m.state == MP_SWIM_SUSPECT);
}

/* Encodes and sends one SWIM message; a message to a member without a
 * session dials it and waits (one message) until the session is up. */
static void swim_send(moshpit_t *mp, const mp_swim_out_t *o) {
    size_t len = 0;
    if (mp__wire_swim_msg_encode(&o->msg, mp->msgbuf, MP_CTRL_MAX, &len) !=
        MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_ERROR,
                       "membership message encode failed");
        return;
    }
    mp_peer_t *p = mp__engine_find_peer(mp, o->to);
    if (p != NULL && p->state == MP_PEER_LIVE && mp__engine_can_send(p)) {
        if (mp__engine_ctrl_send(mp, p, mp->msgbuf, len, NULL, 0) < 0)
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "membership message to %.8s lost", p->id_txt);
        else if (o->msg.type == MP_SWIM_MSG_PING) {
            /* its direct ACK gives a round trip (linkstat.h) */
            p->ping_seq = o->msg.seq;
            p->ping_ms = mp__engine_now_ms();
        }
        return;
    }
    /* in a swarm larger than sessions_max, a probe (PING, PING_REQ) of a
     * member we have no session with opens none: a relay for another
     * prober, or a partner whose session just closed. A dial under load
     * takes longer than the probe waits, and each one pushes a session
     * over the other side's cap; the probe counts on its other helpers,
     * and a suspicion on the suspect's partners (docs/DESIGN.md,
     * "Sessions"). */
    if (mp__engine_crowded(mp) && p != NULL && p->state == MP_PEER_IDLE &&
        (o->msg.type == MP_SWIM_MSG_PING ||
         o->msg.type == MP_SWIM_MSG_PING_REQ))
        return;
    /* copied before dialling: the HELLO that dialling sends is encoded
     * into the same mp->msgbuf */
    uint8_t *copy = malloc(len);
    if (copy == NULL)
        return;
    memcpy(copy, mp->msgbuf, len);
    mp_swim_member_t m;
    const char *addr = mp__swim_lookup(mp->swim, o->to, &m) && m.addr[0]
                           ? m.addr
                           : (p != NULL ? p->ctrl_addr : "");
    if (p == NULL || p->state == MP_PEER_IDLE)
        mp__engine_peer_learn(mp, o->to, addr); /* a session on demand */
    else if (p->state == MP_PEER_DEAD)
        mp__engine_peer_redial(mp, p,
                               addr); /* e.g. we were frozen: reconnect */
    p = mp__engine_find_peer(mp, o->to);
    if (p == NULL || p->state == MP_PEER_REFUSED || p->outbound) {
        free(copy); /* an outbound-only peer comes to us */
        return;
    }
    free(p->swim_pending); /* only the newest waits */
    p->swim_pending = copy;
    p->swim_pending_len = len;
}

static void check_session(moshpit_t *mp, mp_peer_t *p, uint64_t now);

uint32_t mp__engine_swim_inc(const moshpit_t *mp, const uint8_t id[32]) {
    mp_swim_member_t m;
    return mp->swim != NULL && mp__swim_lookup(mp->swim, id, &m) ? m.inc : 0;
}

bool mp__engine_renew_due(const mp_peer_t *p, bool outbound,
                          const mp_swim_member_t *m) {
    return p->state == MP_PEER_DEAD && !p->left &&
           (p->unreachable || (outbound && p->outbound)) && !m->is_self &&
           (m->state == MP_SWIM_ALIVE || m->state == MP_SWIM_SUSPECT) &&
           m->inc > p->reach_inc && m->addr != NULL && m->addr[0] != '\0';
}

/* A member we gave up dialling whose membership record renewed since
 * (mp__engine_renew_due) may take connections now (its reachability
 * asked again, docs/DESIGN.md): it is dialled once more, once per
 * incarnation, and still counted while that dial runs. The news may come
 * as a renewal of a record held alive, as a record held suspect or dead
 * that turns alive (a renewal that crossed a suspicion), or in a pulled
 * member list; so every such event asks, and once a second every peer
 * table entry. True if it dialled. */
static bool renew_dial(moshpit_t *mp, mp_peer_t *p, const mp_swim_member_t *m,
                       const char *how) {
    if (!mp__engine_renew_due(p, mp->outbound, m))
        return false;
    p->reach_inc = m->inc; /* once per incarnation, dialled or not */
    p->outbound = false;   /* what its last HELLO said: old news now */
    p->drid_len = 0;
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "peer %.8s: membership renewed it (%s, incarnation %u): "
                   "dialling it again at %s",
                   p->id_txt, how, m->inc, m->addr);
    mp__engine_peer_redial(mp, p, m->addr);
    p->renew_dial = p->state == MP_PEER_NEW;
    return true;
}

void mp__engine_swim_renewed(moshpit_t *mp) {
    if (mp->swim == NULL)
        return;
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        mp_swim_member_t m;
        if (p->state == MP_PEER_DEAD && mp__swim_lookup(mp->swim, p->id, &m))
            (void)renew_dial(mp, p, &m, "seen in the member table");
    }
}

static void swim_event(moshpit_t *mp, const mp_swim_event_t *ev) {
    mp_peer_t *p = mp__engine_find_peer(mp, ev->id);
    mp_swim_member_t m;
    bool known = mp__swim_lookup(mp->swim, ev->id, &m);
    switch (ev->type) {
    case MP_SWIM_EV_JOINED:
    case MP_SWIM_EV_ALIVE:
    case MP_SWIM_EV_ADDR:
        if (!known || m.is_self || m.state == MP_SWIM_DEAD ||
            m.state == MP_SWIM_LEFT || m.addr[0] == '\0')
            break;
        if (p != NULL &&
            renew_dial(mp, p, &m,
                       ev->type == MP_SWIM_EV_ALIVE  ? "alive again"
                       : ev->type == MP_SWIM_EV_ADDR ? "a new address"
                                                     : "joined"))
            break;
        if (p == NULL || p->state == MP_PEER_IDLE ||
            (p->state == MP_PEER_DEAD && mp__engine_crowded(mp)))
            mp__engine_peer_know(mp, ev->id, m.addr); /* a session if the
                                                         cap allows */
        else if (ev->type == MP_SWIM_EV_JOINED)
            mp__engine_peer_learn(mp, ev->id, m.addr);
        else
            mp__engine_peer_redial(mp, p, m.addr); /* back, or moved */
        break;
    case MP_SWIM_EV_RENEWED:
        /* it may take connections now (its reachability asked again) */
        if (p != NULL && known)
            (void)renew_dial(mp, p, &m, "renewed");
        break;
    case MP_SWIM_EV_SUSPECT:
        if (p != NULL) {
            mp__engine_log(mp, MOSHPIT_LOG_INFO, "peer %.8s: suspect",
                           p->id_txt);
            check_session(mp, p, mp__engine_now_ms());
        }
        break;
    case MP_SWIM_EV_DEAD:
    case MP_SWIM_EV_LEFT:
        if (p == NULL || p->state == MP_PEER_REFUSED)
            break;
        if (ev->type == MP_SWIM_EV_DEAD && p->state == MP_PEER_LIVE) {
            /* a session it still talks on is first-hand, the verdict is
             * not (check_session) */
            check_session(mp, p, mp__engine_now_ms());
            break;
        }
        if (ev->type == MP_SWIM_EV_DEAD && p->state == MP_PEER_NEW &&
            p->ctrl != NULL)
            break; /* a dial in progress ends by its own HELLO timeout: on
                      a loaded machine the verdict is often about a peer
                      too slow to answer probes while it sets up sessions,
                      and dropping the dial would cost both sides
                      DEAD_RETRY_MS before the next one */
        mp__engine_peer_set_state(
            mp, p, MP_PEER_DEAD,
            ev->type == MP_SWIM_EV_LEFT ? "left" : "declared dead");
        break;
    case MP_SWIM_EV_REFUTED:
        mp__engine_log(
            mp, MOSHPIT_LOG_INFO,
            "membership: suspected by others, refuted (incarnation %u)",
            ev->inc);
        break;
    case MP_SWIM_EV_SYNCED:
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "membership: member list received");
        break;
    case MP_SWIM_EV_SYNC_FAILED:
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "membership: bootstrap peer silent, trying another");
        mp->swim_joined = false;
        break;
    default:
        break;
    }
    if (mp->outbound) /* it counts members it has no session with */
        mp__engine_update_members(mp);
}

/* Joins through a live bootstrap peer once one has a session. */
static void swim_maybe_join(moshpit_t *mp) {
    if (mp->swim_joined || mp->bootstrap_n == 0)
        return;
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state != MP_PEER_LIVE || !p->bootstrap)
            continue;
        if (mp__swim_join(mp->swim, mp__engine_now_ms(), p->id, p->ctrl_addr) ==
            MOSHPIT_OK) {
            mp->swim_joined = true;
            return;
        }
    }
}

static void swim_log_stats(moshpit_t *mp, uint64_t now) {
    if (now < mp->swim_stats_ms)
        return;
    mp->swim_stats_ms = now + SWIM_STATS_LOG_MS;
    mp_swim_stats_t s;
    mp__swim_get_stats(mp->swim, &s);
    uint64_t bad = s.refused_cap + s.rejected + s.downgraded + s.joins_refused +
                   s.relays_refused + s.queue_dropped + s.out_dropped;
    if (bad == mp->swim_bad_logged)
        return;
    mp->swim_bad_logged = bad;
    mp__engine_log(
        mp, MOSHPIT_LOG_WARN,
        "membership input refused or dropped so far: %llu new members "
        "(table full), %llu invalid updates, %llu third-party death "
        "claims taken as suspicion, %llu joins over the rate limit, %llu "
        "relays, %llu gossip, %llu messages",
        (unsigned long long)s.refused_cap, (unsigned long long)s.rejected,
        (unsigned long long)s.downgraded, (unsigned long long)s.joins_refused,
        (unsigned long long)s.relays_refused,
        (unsigned long long)s.queue_dropped, (unsigned long long)s.out_dropped);
}

void mp__engine_swim_pump(moshpit_t *mp) {
    if (mp->swim == NULL)
        return;
    swim_maybe_join(mp);
    for (int guard = 0; guard < 4096; guard++) {
        bool any = false;
        if (mp__swim_poll_send(mp->swim, mp->swim_out)) {
            swim_send(mp, mp->swim_out);
            any = true;
        }
        mp_swim_event_t ev;
        if (mp__swim_poll_event(mp->swim, &ev)) {
            swim_event(mp, &ev);
            any = true;
        }
        if (!any)
            break;
    }
    mp__engine_update_members(mp);
}

bool mp__engine_swim_on_ctrl(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                             size_t len) {
    if (mp->swim == NULL ||
        mp__wire_swim_msg_decode(buf, len, mp->swim_msg) != MOSHPIT_OK)
        return false;
    if (p != NULL && p->state == MP_PEER_LIVE) {
        const mp_swim_msg_t *sm = mp->swim_msg;
        if (sm->type == MP_SWIM_MSG_ACK && !sm->has_target && p->ping_ms != 0 &&
            sm->seq == p->ping_seq) {
            mp__link_rtt(&p->link, mp__engine_now_ms() - p->ping_ms);
            p->ping_ms = 0;
        }
        mp_swim_stats_t before, after;
        mp__swim_get_stats(mp->swim, &before);
        mp__swim_on_message(mp->swim, mp__engine_now_ms(), p->id, mp->swim_msg);
        mp__swim_get_stats(mp->swim, &after);
        /* claims the sender cannot make by itself: logged now, not only
         * in the periodic counters. A rumour of a death or a leave is
         * also how honest gossip spreads one: news, not a warning. */
        if (after.downgraded > before.downgraded)
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "membership: %.8s claims another member is dead or "
                           "left; only taken as suspicion",
                           p->id_txt);
        if (after.rejected > before.rejected)
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "membership: invalid update from %.8s ignored",
                           p->id_txt);
        mp__engine_swim_pump(mp);
    }
    /* from a peer without a session (not admitted yet): ignored */
    return true;
}

size_t mp__engine_swim_piggyback(moshpit_t *mp, const mp_peer_t *p,
                                 uint8_t *buf, size_t cap) {
    if (mp->swim == NULL || mp->swim_pb == NULL || p->state != MP_PEER_LIVE)
        return 0;
    size_t n = mp__swim_take_updates(mp->swim, p->id, MP_PB_UPDATE_BYTES,
                                     mp->swim_pb, MP_SWIM_PB_MAX);
    size_t len = 0;
    if (n == 0 ||
        mp__wire_swim_block_encode(mp__swim_self_inc(mp->swim), mp->swim_pb, n,
                                   buf, cap, &len) != MOSHPIT_OK)
        return 0;
    return len;
}

void mp__engine_swim_on_piggyback(moshpit_t *mp, mp_peer_t *p,
                                  const uint8_t *buf, size_t len) {
    uint64_t t = 0;
    if (p == NULL || p->state != MP_PEER_LIVE || mp->swim == NULL)
        return; /* only members' gossip counts */
    if (len > MP_PB_FRAME_MAX ||
        mp__wire_swim_peek_type(buf, len, &t) != MOSHPIT_OK ||
        t != MP_SWIM_MSG_GOSSIP || !mp__engine_swim_on_ctrl(mp, p, buf, len))
        mp__engine_log(
            mp, MOSHPIT_LOG_WARN,
            "second frame from %.8s is not a membership update block "
            "(%zu bytes), dropped",
            p->id_txt, len);
}

void mp__engine_swim_peer_live(moshpit_t *mp, mp_peer_t *p) {
    if (mp->swim == NULL)
        return;
    if (!p->outbound) /* we dial it there (an outbound-only peer: never) */
        mp__swim_addr_verified(mp->swim, p->id, p->ctrl_addr);
    /* a session with a member SWIM holds in doubt (a healed partition, a
     * thawed or restarted peer): probe it now, so that both sides hear of
     * each other's verdict and refute, instead of holding each other dead
     * while nobody probes across (the session would then end again) */
    check_session(mp, p, mp__engine_now_ms());
    if (p->swim_pending != NULL) {
        if (mp__engine_can_send(p))
            (void)mp__engine_ctrl_send(mp, p, p->swim_pending,
                                       p->swim_pending_len, NULL, 0);
        free(p->swim_pending);
        p->swim_pending = NULL;
    }
    mp__engine_swim_pump(mp);
}

/* An outbound-only peer hears gossip only from the dialable members it
 * has sessions with, and they send each update a bounded number of times
 * to whichever members they talk to: a refutation, or the new record of a
 * member that restarted with its identity, can miss it for good, and then
 * it holds that member dead (and counts one member too few) while
 * everyone else holds it alive. Anti-entropy repairs that: every
 * SWIM_PULL_MS it pulls the member list of a random dialable member with
 * a live session (docs/DESIGN.md, "Peers behind NAT"). So does a peer of
 * a swarm larger than sessions_max, which hears gossip only from its
 * partners: a member it declared dead after the refutation had passed
 * it by stayed dead here for good (docs/DESIGN.md, "Sessions"). */
static void swim_pull(moshpit_t *mp, uint64_t now) {
    if (!(mp->outbound || mp__engine_crowded(mp)) || !mp->swim_joined ||
        now < mp->swim_pull_ms)
        return;
    mp->swim_pull_ms = now + SWIM_PULL_MS;
    size_t n = 0;
    for (size_t i = 0; i < mp->npeers; i++)
        n += mp->peers[i]->state == MP_PEER_LIVE && !mp->peers[i]->outbound;
    if (n == 0)
        return;
    size_t k = (size_t)(mp__engine_rng_next(mp) % n);
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state != MP_PEER_LIVE || p->outbound || k-- > 0)
            continue;
        if (mp__swim_pull(mp->swim, now, p->id) == MOSHPIT_OK)
            mp__engine_swim_pump(mp);
        return;
    }
}

void mp__engine_swim_housekeeping(moshpit_t *mp, uint64_t now) {
    if (mp->swim == NULL)
        return;
    swim_pull(mp, now);
    if (mp__swim_next_wakeup(mp->swim) <= now) {
        mp__swim_tick(mp->swim, now);
        mp__engine_swim_pump(mp);
    }
    swim_log_stats(mp, now);
}

uint64_t mp__engine_swim_wakeup(const moshpit_t *mp) {
    return mp->swim != NULL ? mp__swim_next_wakeup(mp->swim) : UINT64_MAX;
}

/* Sessions have no keepalive of their own (no ZMTP heartbeats, see
 * net.c), and the TCP connections of a frozen peer (SIGSTOP, a hung
 * host) or of one behind a cut link stay up. Such a peer stops answering
 * SWIM probes, becomes suspect and then dead to this peer's SWIM (within
 * B(n), docs/DESIGN.md). SWIM's verdict alone would be a rumour, and on a
 * loaded machine a live peer answers probes late; so while SWIM doubts
 * p, this peer probes p directly on the session (mp__swim_contact: the
 * PING carries p's record, so a live p refutes at once), and the session
 * ends only when SWIM holds p dead and nothing has come from p for
 * SESSION_QUIET_MS since that probe. A peer that answered but is still
 * held dead is asked again. Members of the running group are left to the
 * round's own silence timers (peer_timeout_ms). */
static void check_session(moshpit_t *mp, mp_peer_t *p, uint64_t now) {
    mp_swim_member_t m;
    if (mp->swim == NULL || p->state != MP_PEER_LIVE)
        return;
    if (!mp__swim_lookup(mp->swim, p->id, &m) || m.state == MP_SWIM_ALIVE) {
        p->ask_ms = 0;
        return;
    }
    bool answered = p->ask_ms != 0 && p->last_rx_ms >= p->ask_ms;
    bool waited = p->ask_ms != 0 && now - p->ask_ms >= SESSION_QUIET_MS;
    if (p->ask_ms == 0 || (answered && waited)) {
        (void)mp__swim_contact(mp->swim, now, p->id);
        p->ask_ms = now;
        return;
    }
    if (m.state != MP_SWIM_DEAD || answered || !waited ||
        mp__engine_round_has_member(mp, p))
        return;
    mp__engine_peer_set_state(mp, p, MP_PEER_DEAD,
                              "declared dead by membership, no answer on our "
                              "session");
}

void mp__engine_swim_check_sessions(moshpit_t *mp, uint64_t now) {
    if (mp->swim == NULL)
        return;
    for (size_t i = 0; i < mp->npeers; i++)
        check_session(mp, mp->peers[i], now);
    mp__engine_swim_pump(mp);
}

void mp__engine_swim_close(moshpit_t *mp) {
    if (mp->swim == NULL)
        return;
    mp__swim_leave(mp->swim, mp__engine_now_ms());
    while (mp__swim_poll_send(mp->swim, mp->swim_out)) {
        mp_peer_t *p = mp__engine_find_peer(mp, mp->swim_out->to);
        size_t len = 0;
        if (p != NULL && p->state == MP_PEER_LIVE && mp__engine_can_send(p) &&
            mp__wire_swim_msg_encode(&mp->swim_out->msg, mp->msgbuf,
                                     MP_CTRL_MAX, &len) == MOSHPIT_OK)
            (void)mp__engine_ctrl_send(mp, p, mp->msgbuf, len, NULL, 0);
    }
}
