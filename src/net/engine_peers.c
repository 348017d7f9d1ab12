/* SPDX-License-Identifier: MIT */
/*
 * engine_peers.c - the engine's membership and sessions: the peer table,
 * dialling, HELLO handling with admission (swarm name, swarm_secret proof,
 * certificate, addresses, cipher choice), session keys, PEERS gossip and
 * peer state changes. Runs on the engine thread only.
 */
#include "engine_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "base/base.h"
#include "core/share.h"
#include "core/swim.h"
#include "crypto/cert.h"
#include "net/net.h"

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

uint64_t mp__engine_now_ms(void) {
    return mp_plat_clock_ms();
}

uint64_t mp__engine_rng_next(moshpit_t *mp) {
    /* only used for choosing gossip targets */
    return mp__splitmix64(&mp->rng);
}

zmq_msg_t *mp__engine_stash_of(mp_peer_t *p) {
    return (zmq_msg_t *)(void *)p->stash_msg;
}

/* An outbound-only peer also counts a member it could not dial (an
 * outbound-only peer behind another NAT) while membership holds it alive;
 * one it is still dialling counts once its session is up. */
static bool counts_unreached(const mp_peer_t *p, uint64_t now) {
    return p->state != MP_PEER_REFUSED &&
           (p->unreachable ||
            (p->state == MP_PEER_NEW &&
             (p->renew_dial || mp__engine_unreached(p, now))));
}

size_t mp__engine_view_count(const moshpit_t *mp) {
    uint64_t now = mp__engine_now_ms();
    size_t n = 1;
    for (size_t i = 0; i < mp->npeers; i++) {
        const mp_peer_t *p = mp->peers[i];
        if (p->state == MP_PEER_LIVE)
            n += mp__engine_swim_member_ok(mp, p->id);
        else if (mp__engine_peer_member(mp, p))
            n++; /* no session open, SWIM holds it alive or suspect */
        else if (mp->outbound && counts_unreached(p, now))
            n += mp__engine_swim_alive(mp, p->id);
    }
    return n;
}

static void crowded_update(moshpit_t *mp);

void mp__engine_update_members(moshpit_t *mp) {
    crowded_update(mp);
    /* a live session counts whatever SWIM says (mp__engine_swim_member_ok);
     * an outbound-only peer also counts the members it cannot reach */
    uint64_t now = mp__engine_now_ms();
    size_t live = 1;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp__engine_peer_member(mp, mp->peers[i]))
            live++;
        else if (mp->outbound && counts_unreached(mp->peers[i], now))
            live += mp__engine_swim_alive(mp, mp->peers[i]->id);
    mp_plat_mutex_lock(&mp->lock);
    if (mp->members_live != live) {
        mp->members_live = live;
        mp_plat_cond_broadcast(&mp->cond);
    }
    mp_plat_mutex_unlock(&mp->lock);
}

mp_peer_t *mp__engine_find_peer(moshpit_t *mp, const uint8_t id[32]) {
    for (size_t i = 0; i < mp->npeers; i++)
        if (memcmp(mp->peers[i]->id, id, 32) == 0)
            return mp->peers[i];
    return NULL;
}

mp_peer_t *mp__engine_find_peer_by_tag(moshpit_t *mp, uint64_t tag) {
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->my_tag == tag && mp->peers[i]->keys != NULL)
            return mp->peers[i];
    return NULL;
}

bool mp__engine_is_self(const moshpit_t *mp, const uint8_t id[32]) {
    return memcmp(mp->pub, id, 32) == 0;
}

bool mp__engine_authorized(const moshpit_t *mp, const uint8_t id[32]) {
    if (mp->auth_n == 0 || mp__engine_is_self(mp, id))
        return true;
    for (size_t i = 0; i < mp->auth_n; i++)
        if (memcmp(mp->auth[i], id, 32) == 0)
            return true;
    return false;
}

void mp__engine_stash_drop(mp_peer_t *p) {
    if (p->stash_full) {
        zmq_msg_close(mp__engine_stash_of(p));
        p->stash_full = false;
    }
    p->shm_waiting = false;
    p->shm_wait_ms = 0;
}

static void ctl_pending_drop(mp_peer_t *p) {
    for (uint32_t i = 0; i < p->ctl_npending; i++)
        free(p->ctl_pending[i]);
    p->ctl_npending = 0;
    p->ctl_pending_join = 0;
}

void mp__engine_peer_close(mp_peer_t *p) {
    mp__engine_stash_drop(p);
    ctl_pending_drop(p);
    if (p->ctrl != NULL)
        zmq_socket_monitor(p->ctrl, NULL, 0);
    mp__net_close(&p->mon);
    mp__net_close(&p->ctrl);
    mp__engine_data_close(p);
    mp__engine_dialback_close(p);
    p->reach_ok = false;
    p->tcp_up = false;
    p->hs_failed = false;
    p->dial_ms = 0;
    mp__engine_shm_drop(p);
    mp__session_keys_free(p->keys);
    p->keys = NULL;
    memset(p->their_eph, 0, sizeof(p->their_eph));
    p->their_eph_order = 0;
    p->hello_recv = false;
    mp__replay_reset(&p->rx_window);
}

/* Makes a fresh ephemeral key for p's next session, wiping the old one;
 * the send counter restarts with it (the keys are new). */
static moshpit_err_t eph_fresh(moshpit_t *mp, mp_peer_t *p) {
    if (p->my_eph_sec == NULL) {
        p->my_eph_sec = mp__crypto_secure_alloc(32);
        if (p->my_eph_sec == NULL)
            return MOSHPIT_ENOMEM;
    }
    if (mp__crypto_keypair(p->my_eph, p->my_eph_sec) != MOSHPIT_OK) {
        mp__crypto_secure_free(p->my_eph_sec);
        p->my_eph_sec = NULL;
        return MOSHPIT_ECRYPTO;
    }
    p->my_eph_used = false;
    p->my_eph_retire = false;
    p->my_eph_order = ++mp->eph_order;
    p->tx_counter = 0;
    mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "new ephemeral key for %.8s",
                   p->id_txt);
    return MOSHPIT_OK;
}

void mp__engine_peer_free(mp_peer_t *p) {
    mp__engine_peer_close(p);
    mp__crypto_secure_free(p->my_eph_sec);
    free(p);
}

/* ------------------------------------------------------------------ */
/* control messages                                                    */

void mp__engine_send_msg(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m) {
    size_t len = 0;
    if (!mp__engine_can_send(p))
        return;
    moshpit_err_t e = mp__wire_msg_encode(m, mp->msgbuf, MP_CTRL_MAX, &len);
    if (e != MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_ERROR,
                       "encode of message type %d failed: %s", (int)m->type,
                       moshpit_strerror(e));
        return;
    }
    /* membership news rides on round traffic (docs/PROTOCOL.md) */
    uint8_t pb[MP_PB_FRAME_MAX];
    size_t pblen = 0;
    if (m->type == MP_MSG_JOIN || m->type == MP_MSG_JOIN_ACK ||
        m->type == MP_MSG_GROUP || m->type == MP_MSG_ALONE)
        pblen = mp__engine_swim_piggyback(mp, p, pb, sizeof(pb));
    if (mp__engine_ctrl_send(mp, p, mp->msgbuf, len, pb, pblen) != 0)
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "control message to %.8s dropped: %s", p->id_txt,
                       zmq_strerror(errno));
    else {
        p->used_ms = mp__engine_now_ms();
        if (mp->round.cmd != NULL)
            mp->round.bytes_sent += len + pblen;
    }
}

/* Dials p, a member without a session (IDLE), at its known address. */
static void dial_idle(moshpit_t *mp, mp_peer_t *p) {
    char addr[MP_ADDR_MAX]; /* peer_learn writes p->ctrl_addr */
    snprintf(addr, sizeof(addr), "%s", p->ctrl_addr);
    mp__engine_peer_learn(mp, p->id, addr);
}

void mp__engine_session_want(moshpit_t *mp, mp_peer_t *p) {
    if (p != NULL && p->state == MP_PEER_IDLE)
        dial_idle(mp, p);
}

bool mp__engine_send_or_dial(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m) {
    if (p->state == MP_PEER_LIVE && mp__engine_can_send(p)) {
        mp__engine_send_msg(mp, p, m);
        return true;
    }
    if (p->ctl_npending >= MP_CTL_PENDING_MAX) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "control message to %.8s dropped: %u wait for its "
                       "session",
                       p->id_txt, p->ctl_npending);
        return false;
    }
    /* encoded before dialling: the HELLO reuses mp->msg and mp->msgbuf */
    size_t len = 0;
    if (mp__wire_msg_encode(m, mp->msgbuf, MP_CTRL_MAX, &len) != MOSHPIT_OK)
        return false;
    uint8_t *copy = malloc(len);
    if (copy == NULL)
        return false;
    memcpy(copy, mp->msgbuf, len);
    if (p->state == MP_PEER_IDLE)
        dial_idle(mp, p);
    if (p->state != MP_PEER_NEW || p->ctrl == NULL) {
        free(copy); /* dead, refused, or cannot be dialled */
        return false;
    }
    if (m->type == MP_MSG_JOIN)
        p->ctl_pending_join |= 1u << p->ctl_npending;
    else
        p->ctl_pending_join &= ~(1u << p->ctl_npending);
    p->ctl_pending[p->ctl_npending] = copy;
    p->ctl_pending_len[p->ctl_npending++] = len;
    return true;
}

void mp__engine_ctl_flush(moshpit_t *mp, mp_peer_t *p) {
    for (uint32_t i = 0; i < p->ctl_npending; i++) {
        if (p->state == MP_PEER_LIVE && mp__engine_can_send(p) &&
            mp__engine_ctrl_send(mp, p, p->ctl_pending[i],
                                 p->ctl_pending_len[i], NULL, 0) == 0) {
            p->used_ms = mp__engine_now_ms();
            if (mp->round.cmd != NULL)
                mp->round.bytes_sent += p->ctl_pending_len[i];
            /* the matchmaker's ACK timeout counts from here, not from
             * before the session was opened */
            if ((p->ctl_pending_join & (1u << i)) && mp->rnd != NULL)
                mp__rnd_join_sent(mp->rnd, p->used_ms, p->id);
        }
        free(p->ctl_pending[i]);
    }
    p->ctl_npending = 0;
    p->ctl_pending_join = 0;
}

bool mp__engine_can_send(const mp_peer_t *p) {
    return p->outbound ? p->ctrl_rid_len > 0 : p->ctrl != NULL;
}

bool mp__engine_has_data(const mp_peer_t *p) {
    return p->outbound ? p->drid_len > 0 : p->data != NULL;
}

int mp__engine_ctrl_send(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                         size_t len, const uint8_t *pb, size_t pblen) {
    void *s = p->ctrl;
    if (p->outbound) {
        /* its own connection, through our ROUTER (docs/PROTOCOL.md,
         * "Peers behind NAT") */
        s = mp->ctrl;
        if (p->ctrl_rid_len == 0 || zmq_send(s, p->ctrl_rid, p->ctrl_rid_len,
                                             ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0)
            return -1;
    }
    if (s == NULL)
        return -1;
    if (zmq_send(s, buf, len, ZMQ_DONTWAIT | (pblen > 0 ? ZMQ_SNDMORE : 0)) <
            0 ||
        (pblen > 0 && zmq_send(s, pb, pblen, ZMQ_DONTWAIT) < 0))
        return -1;
    return 0;
}

int mp__engine_data_send(moshpit_t *mp, mp_peer_t *p, zmq_msg_t *zm) {
    if (!p->outbound)
        return p->data != NULL ? zmq_msg_send(zm, p->data, ZMQ_DONTWAIT) : -1;
    /* ZMQ_ROUTER_MANDATORY: EAGAIN when its connection is full,
     * EHOSTUNREACH before it is up; both leave zm to us to retry */
    if (p->drid_len == 0 || zmq_send(mp->data, p->drid, p->drid_len,
                                     ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0)
        return -1;
    return zmq_msg_send(zm, mp->data, ZMQ_DONTWAIT);
}

bool mp__engine_hello_fill(moshpit_t *mp, mp_peer_t *p, bool reply) {
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_HELLO;
    mp_hello_t *h = &m->u.hello;
    if ((p->my_eph_sec == NULL || p->my_eph_retire) &&
        eph_fresh(mp, p) != MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_ERROR,
                       "no ephemeral key for %.8s: HELLO not "
                       "sent",
                       p->id_txt);
        return false;
    }
    memcpy(h->swarm, mp->swarm_hash, 32);
    memcpy(h->eph, p->my_eph, 32);
    h->eph_order = p->my_eph_order;
    if (p->keys != NULL)
        memcpy(h->seen, p->their_eph, 32);
    if (mp->swarm_secret != NULL) {
        mp__crypto_admit_proof(mp->swarm_secret, mp->swarm_hash, mp->pub, p->id,
                               p->my_eph, h->proof);
        h->has_proof = 1;
    }
    h->reply = reply ? 1 : 0;
    h->tag = p->my_tag;
    h->bandwidth = mp->cfg.bandwidth_mbps;
    h->serves_state = mp->cfg.serve_state != 0 && !mp->outbound;
    h->reorder_ok = 1; /* a receive window: several data streams welcome */
    if (!mp__crypto_is_zero(mp->cfg.cert, sizeof(h->cert))) {
        memcpy(h->cert, mp->cfg.cert, sizeof(h->cert));
        h->has_cert = 1;
    }
    h->ciphers = mp->ciphers;
    snprintf(h->ctrl_addr, sizeof(h->ctrl_addr), "%s", mp->ctrl_ep);
    snprintf(h->data_addr, sizeof(h->data_addr), "%s", mp->data_ep);
    if (mp->outbound) {
        h->outbound = 1;
        h->drid_len = MP_DRID_MAX;
        memcpy(h->drid, p->my_drid, MP_DRID_MAX);
    }
    /* where its messages come from, as we see it (on our ROUTER) */
    if (reply && p->seen_addr[0] != '\0')
        snprintf(h->observed, sizeof(h->observed), "%s", p->seen_addr);
    if (mp->has_host) {
        h->has_host = 1;
        memcpy(h->host, mp->host_id, sizeof(h->host));
    }
    return true;
}

void mp__engine_send_hello(moshpit_t *mp, mp_peer_t *p, bool reply) {
    if (mp__engine_hello_fill(mp, p, reply))
        mp__engine_send_msg(mp, p, mp->msg);
}

/* An answer to p's HELLO on p's own control connection (the one it came
 * on, through our ROUTER), saying that we could not dial its advertised
 * address (nr) and where we see it (oa): its reachability check
 * (docs/PROTOCOL.md, "Peers behind NAT"). */
static void send_not_reached(moshpit_t *mp, mp_peer_t *p) {
    size_t len = 0;
    if (mp->in_len == 0 || !mp__engine_hello_fill(mp, p, true))
        return;
    mp->msg->u.hello.not_reached = 1;
    if (mp__wire_msg_encode(mp->msg, mp->msgbuf, MP_CTRL_MAX, &len) !=
            MOSHPIT_OK ||
        zmq_send(mp->ctrl, mp->in_rid, mp->in_len, ZMQ_DONTWAIT | ZMQ_SNDMORE) <
            0 ||
        zmq_send(mp->ctrl, mp->msgbuf, len, ZMQ_DONTWAIT) < 0) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "reachability answer to %.8s dropped", p->id_txt);
        return;
    }
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "peer %.8s: cannot dial it at %s, told it so", p->id_txt,
                   p->ctrl_addr);
}

void mp__engine_send_simple(moshpit_t *mp, mp_peer_t *p, mp_msg_type_t t,
                            uint64_t seq) {
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = t;
    if (t == MP_MSG_JOIN_ACK)
        m->u.ack.seq = seq;
    else if (t == MP_MSG_ALONE)
        m->u.alone.seq = seq;
    else if (t == MP_MSG_REFUSE)
        m->u.refuse.reason = (uint32_t)seq;
    mp__engine_send_msg(mp, p, m);
}

/* Sends up to MP_PEERS_MAX live peers to p (all of them but p itself when
 * only is NULL; just `only` otherwise). */
void mp__engine_send_peers(moshpit_t *mp, mp_peer_t *p, const mp_peer_t *only) {
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_PEERS;
    mp_peers_t *ps = &m->u.peers;
    if (only != NULL) {
        memcpy(ps->peers[0].id, only->id, 32);
        snprintf(ps->peers[0].addr, MP_ADDR_MAX, "%s", only->ctrl_addr);
        ps->n = 1;
    } else {
        size_t start =
            mp->npeers ? (size_t)(mp__engine_rng_next(mp) % mp->npeers) : 0;
        for (size_t k = 0; k < mp->npeers && ps->n < MP_PEERS_MAX; k++) {
            mp_peer_t *q = mp->peers[(start + k) % mp->npeers];
            if (q == p || q->state != MP_PEER_LIVE)
                continue;
            memcpy(ps->peers[ps->n].id, q->id, 32);
            snprintf(ps->peers[ps->n].addr, MP_ADDR_MAX, "%s", q->ctrl_addr);
            ps->n++;
        }
    }
    if (ps->n > 0)
        mp__engine_send_msg(mp, p, m);
}

/* ------------------------------------------------------------------ */
/* peers                                                               */

static moshpit_err_t peer_connect(moshpit_t *mp, mp_peer_t *p) {
    char mon_ep[64];
    if (p->ctrl != NULL)
        return MOSHPIT_OK;
    if (p->outbound)
        return MOSHPIT_OK; /* it comes to us (docs/PROTOCOL.md) */
    snprintf(mon_ep, sizeof(mon_ep), "inproc://moshpit-mon-%u", ++mp->mon_seq);
    p->ctrl = mp__net_ctrl_dealer(mp->zctx, p->ctrl_addr, p->id, mp->pub,
                                  mp->sec, mon_ep, &p->mon);
    if (p->ctrl == NULL) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN, "cannot dial %s: %s", p->ctrl_addr,
                       zmq_strerror(errno));
        return MOSHPIT_ESYS;
    }
    p->dial_ms = mp__engine_now_ms();
    p->nr_sent = false;
    /* if this dial gets no answer, only a record newer than the one it
     * began at is dialled again (mp__engine_renew_due) */
    p->reach_inc = mp__engine_swim_inc(mp, p->id);
    return MOSHPIT_OK;
}

static mp_peer_t *peer_add(moshpit_t *mp, const uint8_t id[32],
                           const char *addr) {
    if (mp->npeers >= mp->peers_max) {
        uint64_t now = mp__engine_now_ms();
        if (mp->full_logged_ms == 0 || now - mp->full_logged_ms >= 1000) {
            char txt[41];
            zmq_z85_encode(txt, id, 32);
            mp->full_logged_ms = now;
            mp__engine_log(
                mp, MOSHPIT_LOG_WARN,
                "peer table full (%u peers, config peers_max), new peer "
                "%.8s ignored",
                mp->peers_max, txt);
        }
        return NULL;
    }
    if ((mp->npeers & (mp->npeers - 1)) == 0) { /* grow at powers of two */
        size_t cap = mp->npeers ? mp->npeers * 2 : 16;
        mp_peer_t **np = realloc(mp->peers, cap * sizeof(*np));
        if (np == NULL)
            return NULL;
        mp->peers = np;
    }
    mp_peer_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    memcpy(p->id, id, 32);
    zmq_z85_encode(p->id_txt, p->id, 32);
    snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", addr ? addr : "");
    do
        p->my_tag = mp__crypto_random_u64();
    while (p->my_tag == 0);
    mp__crypto_random(p->my_drid, sizeof(p->my_drid));
    p->my_drid[0] |= 1; /* a routing id may not begin with a zero byte */
    p->state = MP_PEER_NEW;
    p->state_since_ms = mp__engine_now_ms();
    p->last_live_ms = p->state_since_ms;
    p->used_ms = p->state_since_ms;
    mp->peers[mp->npeers++] = p;
    crowded_update(mp);
    return p;
}

void mp__engine_peer_set_state(moshpit_t *mp, mp_peer_t *p, mp_peer_state_t s,
                               const char *why) {
    if (p->state == s)
        return;
    mp_peer_state_t old = p->state;
    p->state = s;
    p->idle_dial = false;
    p->state_since_ms = mp__engine_now_ms();
    /* never answered our dial: outbound-only behind another NAT, or
     * gone (membership tells which; mp__engine_view_count) */
    p->unreachable =
        s == MP_PEER_DEAD && (strcmp(why, "no answer to HELLO") == 0 ||
                              strcmp(why, MP_WHY_BOTH_OUTBOUND) == 0);
    p->renew_dial = false;
    /* a session that fails may mean that our own address changed or
     * stopped taking connections: ask again soon */
    if (old == MP_PEER_LIVE && s == MP_PEER_DEAD && strcmp(why, "left") != 0 &&
        strcmp(why, "new session") != 0 &&
        strcmp(why, MP_WHY_BOTH_OUTBOUND) != 0)
        mp__engine_reach_soon(mp, "a session failed");
    if (s == MP_PEER_LIVE) {
        p->last_live_ms = p->state_since_ms;
        p->last_rx_ms = p->state_since_ms;
        p->used_ms = p->state_since_ms;
        p->ask_ms = 0;
        p->left = false;
    }
    /* a graceful leave is news, not a problem; a session closed over
     * sessions_max is routine */
    bool calm = s == MP_PEER_LIVE || strcmp(why, "left") == 0;
    mp__engine_log(
        mp, calm || s == MP_PEER_IDLE ? MOSHPIT_LOG_INFO : MOSHPIT_LOG_WARN,
        "peer %.8s: %s (%s)", p->id_txt,
        s == MP_PEER_LIVE   ? "live"
        : s == MP_PEER_DEAD ? "dead"
        : s == MP_PEER_NEW  ? "new"
        : s == MP_PEER_IDLE ? "session closed, still a member"
                            : "refused",
        why);
    if (s == MP_PEER_IDLE) {
        /* no session, still a member: the next one gets fresh keys */
        p->my_eph_retire = true;
        mp__engine_peer_close(p);
        p->ctrl_rid_len = 0;
        p->drid_len = 0;
    }
    if (s == MP_PEER_DEAD || s == MP_PEER_REFUSED) {
        p->my_eph_retire = true; /* the next session gets fresh keys */
        if (old == MP_PEER_LIVE || old == MP_PEER_NEW) {
            mp__engine_round_peer_failed(mp, p);
            mp__engine_state_peer_failed(mp, p);
        }
        if (mp->rnd != NULL)
            mp__rnd_forget(mp->rnd, p->id);
        mp__engine_peer_close(p);
    }
    mp__engine_update_members(mp);
}

void mp__engine_expire_certs(moshpit_t *mp) {
    if (mp__crypto_is_zero(mp->cfg.authority_key, 32))
        return;
    uint64_t t = mp_plat_wallclock_s();
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state == MP_PEER_LIVE &&
            t > p->cert_not_after + MOSHPIT_CERT_SKEW_S) {
            mp__engine_log(
                mp, MOSHPIT_LOG_WARN,
                "certificate of live peer %.8s expired, session ended",
                p->id_txt);
            mp__engine_peer_set_state(mp, p, MP_PEER_REFUSED, "expired");
            p->refused_ms = mp__engine_now_ms();
        }
    }
}

/* Learned of a peer (bootstrap or gossip): dial it and say hello. */
void mp__engine_peer_learn(moshpit_t *mp, const uint8_t id[32],
                           const char *addr) {
    if (mp__engine_is_self(mp, id) || !mp__engine_authorized(mp, id) ||
        !mp__endpoint_addr_ok(addr))
        return;
    mp_peer_t *p = mp__engine_find_peer(mp, id);
    uint64_t now = mp__engine_now_ms();
    if (p == NULL) {
        p = peer_add(mp, id, addr);
        if (p == NULL)
            return;
    } else if ((p->state == MP_PEER_DEAD && !p->outbound &&
                now - p->state_since_ms >= DEAD_RETRY_MS) ||
               p->state == MP_PEER_IDLE) {
        char a[MP_ADDR_MAX]; /* addr may be p->ctrl_addr */
        snprintf(a, sizeof(a), "%s", addr);
        snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", a);
        p->idle_dial = p->state == MP_PEER_IDLE;
        p->state = MP_PEER_NEW;
        p->state_since_ms = now;
        p->hello_tries = 0;
    } else {
        return;
    }
    if (peer_connect(mp, p) == MOSHPIT_OK) {
        mp__engine_send_hello(mp, p, false);
        p->hello_tries = 1;
        p->next_hello_ms = now + HELLO_RETRY_MS;
    }
}

void mp__engine_peer_redial(moshpit_t *mp, mp_peer_t *p, const char *addr) {
    if (p->state == MP_PEER_LIVE || p->state == MP_PEER_REFUSED ||
        p->outbound || !mp__endpoint_addr_ok(addr))
        return;
    if (p->state == MP_PEER_NEW && p->ctrl != NULL &&
        strcmp(p->ctrl_addr, addr) == 0)
        return; /* already dialling it there */
    mp__engine_peer_close(p);
    snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", addr);
    p->state = MP_PEER_NEW;
    p->state_since_ms = mp__engine_now_ms();
    p->hello_tries = 0;
    if (peer_connect(mp, p) == MOSHPIT_OK) {
        mp__engine_send_hello(mp, p, false);
        p->hello_tries = 1;
        p->next_hello_ms = mp__engine_now_ms() + HELLO_RETRY_MS;
    }
}

/* ------------------------------------------------------------------ */
/* sessions only where needed (docs/DESIGN.md, "Sessions")             */

/* Sessions open or being opened. */
static size_t sessions_open(const moshpit_t *mp) {
    size_t open = 0;
    for (size_t i = 0; i < mp->npeers; i++) {
        const mp_peer_t *p = mp->peers[i];
        open += p->state == MP_PEER_LIVE ||
                (p->state == MP_PEER_NEW && p->ctrl != NULL);
    }
    return open;
}

bool mp__engine_crowded(const moshpit_t *mp) {
    return mp->crowded;
}

/* Recounts mp->crowded (mp__engine_update_members, and once a second). */
static void crowded_update(moshpit_t *mp) {
    mp->crowded = false;
    /* an outbound-only peer dials every member (nobody can dial it) */
    if (mp->outbound)
        return;
    size_t members = 0;
    for (size_t i = 0; i < mp->npeers; i++) {
        const mp_peer_t *p = mp->peers[i];
        members += p->state == MP_PEER_LIVE || p->state == MP_PEER_IDLE ||
                   p->state == MP_PEER_NEW;
    }
    mp->crowded = members > mp->sessions_max;
}

void mp__engine_peer_know(moshpit_t *mp, const uint8_t id[32],
                          const char *addr) {
    if (mp__engine_is_self(mp, id) || !mp__engine_authorized(mp, id) ||
        !mp__endpoint_addr_ok(addr))
        return;
    mp_peer_t *p = mp__engine_find_peer(mp, id);
    /* a new member gets a session at once in a swarm of up to
     * sessions_max others (a full mesh), and in a larger one while fewer
     * than half of sessions_max are open: news of members (gossip) then
     * does not open one session after another that the cap closes again */
    if (!mp__engine_crowded(mp) || sessions_open(mp) < mp->sessions_max / 2) {
        if (p == NULL || p->state != MP_PEER_DEAD)
            mp__engine_peer_learn(mp, id, addr);
        else
            mp__engine_peer_redial(mp, p, addr); /* back, or moved */
        return;
    }
    if (p == NULL) {
        p = peer_add(mp, id, addr);
        if (p != NULL) {
            p->state = MP_PEER_IDLE;
            mp__engine_update_members(mp);
        }
        return;
    }
    if (p->state == MP_PEER_IDLE) {
        snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", addr);
    } else if (p->state == MP_PEER_DEAD && !p->outbound) {
        /* back (a refutation), or moved: a member again, dialled when a
         * message is for it */
        snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", addr);
        p->state = MP_PEER_IDLE;
        p->state_since_ms = mp__engine_now_ms();
        p->left = false;
        mp__engine_update_members(mp);
    }
}

void mp__engine_sessions_revive(moshpit_t *mp, uint64_t now) {
    crowded_update(mp); /* once a second: peers added without a change */
    if (!mp__engine_crowded(mp))
        return;
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state != MP_PEER_DEAD || p->outbound || p->ctrl_addr[0] == 0 ||
            now - p->state_since_ms < DEAD_RETRY_MS)
            continue;
        mp_swim_member_t m;
        if (mp->swim != NULL && mp__swim_lookup(mp->swim, p->id, &m) &&
            m.state == MP_SWIM_ALIVE && m.addr[0] != '\0')
            mp__engine_peer_know(mp, p->id, m.addr);
    }
}

void mp__engine_session_end_idle(moshpit_t *mp, mp_peer_t *p, const char *why) {
    if (p->state != MP_PEER_LIVE || p->ctrl == NULL)
        return;
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_BYE;
    m->u.bye.reason = MP_BYE_IDLE;
    mp__engine_send_msg(mp, p, m);
    /* the BYE must reach the wire: its socket lingers a moment (the
     * monitor goes first, so that closing is no disconnect event) */
    zmq_socket_monitor(p->ctrl, NULL, 0);
    mp__net_close_linger(&p->ctrl, 1000);
    mp__engine_peer_set_state(mp, p, MP_PEER_IDLE, why);
}

/* How long nothing went over p's session (now may be older than the last
 * use: callers take the time before they work) */
static uint64_t unused_for(const mp_peer_t *p, uint64_t now) {
    return now > p->used_ms ? now - p->used_ms : 0;
}

/* Whether p's session may close: a live dialled session (not with a peer
 * behind NAT, which nobody else could reopen) that carried nothing for a
 * while, with a member membership holds alive, that nothing needs: not the
 * running round, not a mate of the last round that has not said DONE, no
 * state download either way, no message waiting for it, not a probe of
 * membership on it, not the bootstrap peer before the member list came. */
static bool session_closable(moshpit_t *mp, const mp_peer_t *p, uint64_t now) {
    if (unused_for(p, now) < SESSION_UNUSED_MS)
        return false;
    /* our call is matchmaking: nothing closes (a JOIN, JOIN_ACK or GROUP
     * may still be answered, and a mate whose group formed first already
     * counts on its session with us) */
    if (mp->round.cmd != NULL && mp->round.group == NULL)
        return false;
    if (p->state != MP_PEER_LIVE || p->ctrl == NULL || p->outbound ||
        !mp__engine_swim_alive(mp, p->id) ||
        mp__engine_round_has_member(mp, p) || p->swim_pending != NULL ||
        p->ctl_npending != 0 || p->st_next < p->st_end || p->ask_ms != 0 ||
        p->stash_full || p->ahead ||
        (p->bootstrap && mp->swim != NULL && !mp__swim_synced(mp->swim)))
        return false;
    for (uint32_t i = 0; i < mp->owed_n; i++)
        if (mp->owed[i] == p && p->done_gid != mp->owed_gid)
            return false;
    return mp->fetch_cmd == NULL; /* a download talks to servers it picked */
}

void mp__engine_sessions_trim(moshpit_t *mp, uint64_t now) {
    if (mp->outbound)
        return;
    size_t open = sessions_open(mp);
    /* over the cap: the least recently used sessions that nothing needs */
    while (open > mp->sessions_max) {
        mp_peer_t *lru = NULL;
        for (size_t i = 0; i < mp->npeers; i++) {
            mp_peer_t *p = mp->peers[i];
            if (session_closable(mp, p, now) &&
                (lru == NULL || p->used_ms < lru->used_ms))
                lru = p;
        }
        if (lru == NULL)
            break; /* every session is in use: over the cap for now */
        mp__engine_session_end_idle(mp, lru, "over sessions_max");
        open--;
    }
}

/* The host of a tcp:// address, or "" */
static void host_of(const char *addr, char *host, size_t cap) {
    long port = 0;
    if (mp__endpoint_split(addr, host, cap, &port) != 0)
        host[0] = '\0';
}

/* Turns this peer outbound-only: nobody could dial it, so it opens every
 * session itself and asks the other side to answer on that connection
 * (HELLO "ob" to every peer it has a session with or dials). A session
 * with an outbound-only peer (it dialled us while we were dialable) ends:
 * neither side can answer the other now (docs/DESIGN.md, "Reachability
 * asked again"). */
void mp__engine_go_outbound(moshpit_t *mp, const mp_peer_t *by) {
    mp->reach = MP_REACH_OUTBOUND;
    mp->outbound = true;
    mp->reach_want = 0;
    mp->reach_switch_ms = mp__engine_now_ms();
    mp->crowded = false; /* it dials every member */
    mp__rnd_set_noshare(mp->rnd, true);
    if (by != NULL)
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "peer %.8s cannot dial us at %s: outbound-only (we "
                       "open every session, reduce no share, serve no "
                       "matchmaker)",
                       by->id_txt, mp->ctrl_ep);
    else
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "reachability: members cannot dial us at %s any "
                       "more: outbound-only (we open every session, reduce "
                       "no share, serve no matchmaker)",
                       mp->ctrl_ep);
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *q = mp->peers[i];
        if (q->outbound) {
            if (q->state == MP_PEER_LIVE) {
                /* outbound-only at its record of now: it said so on this
                 * session, and would have told us had it changed; only a
                 * newer record is dialled (mp__engine_renew_due) */
                q->reach_inc = mp__engine_swim_inc(mp, q->id);
                mp__engine_send_hello(mp, q, false); /* it must know */
                mp__engine_peer_set_state(mp, q, MP_PEER_DEAD,
                                          MP_WHY_BOTH_OUTBOUND);
            }
            continue;
        }
        if (q->data != NULL) { /* data frames come in on it from now on */
            mp__engine_stash_drop(q);
            mp__engine_data_close(q);
            (void)mp__engine_data_dial(mp, q, q->reorder_ok);
        }
        if (q->ctrl != NULL &&
            (q->state == MP_PEER_LIVE || q->state == MP_PEER_NEW))
            mp__engine_send_hello(mp, q, false);
    }
    mp__engine_update_members(mp);
}

/* The bootstrap peers are the members asked whether they can dial us:
 * the first to answer decides (docs/DESIGN.md, "Peers behind NAT"). One
 * that dialled us (its HELLO came to our ROUTER) makes us dialable; one
 * that said it could not ("nr", on our own connection) makes us
 * outbound-only. Without 'advertise' we take the host a bootstrap peer
 * observed ("oa") as ours, and ask again. */
bool mp__engine_adopt_observed(moshpit_t *mp, const mp_peer_t *by,
                               const char *observed) {
    char mine[MP_ADDR_MAX];
    long cport = 0, dport = 0;
    host_of(mp->ctrl_ep, mine, sizeof(mine));
    char oa[MP_ADDR_MAX], ep[MP_ADDR_MAX];
    /* an IPv6 address goes in brackets, as in the endpoint */
    if (strchr(observed, ':') != NULL)
        snprintf(oa, sizeof(oa), "[%.100s]", observed);
    else
        snprintf(oa, sizeof(oa), "%.100s", observed);
    if (strcmp(mine, oa) == 0 ||
        mp__endpoint_split(mp->ctrl_ep, mine, sizeof(mine), &cport) != 0 ||
        mp__endpoint_split(mp->data_ep, mine, sizeof(mine), &dport) != 0)
        return false;
    snprintf(ep, sizeof(ep), "tcp://%.100s:%ld", oa, cport);
    if (!mp__endpoint_addr_ok(ep))
        return false;
    mp->adv_observed = true;
    snprintf(mp->ctrl_ep, sizeof(mp->ctrl_ep), "%s", ep);
    snprintf(mp->data_ep, sizeof(mp->data_ep), "tcp://%.100s:%ld", oa, dport);
    if (by != NULL)
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "advertising %s: the address peer %.8s observed (no "
                       "'advertise' set)",
                       mp->ctrl_ep, by->id_txt);
    else
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "advertising %s: the address most members asked "
                       "observed (no 'advertise' set)",
                       mp->ctrl_ep);
    /* membership spreads it too (a new incarnation) */
    if (mp->swim != NULL &&
        mp__swim_set_self_addr(mp->swim, mp->ctrl_ep) != MOSHPIT_OK)
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "membership keeps the old address");
    return true;
}

static void reach_verdict(moshpit_t *mp, mp_peer_t *p, const mp_hello_t *h) {
    if (!p->bootstrap)
        return;
    if (h->observed[0] != '\0' && mp->cfg.advertise == NULL &&
        !mp->adv_observed && mp__engine_adopt_observed(mp, p, h->observed)) {
        /* the verdict was about the old address: ask again */
        if (mp->reach == MP_REACH_UNKNOWN)
            mp__engine_send_hello(mp, p, false);
        return;
    }
    if (mp->reach != MP_REACH_UNKNOWN)
        return;
    if (mp->in_len > 0) {
        mp->reach = MP_REACH_DIALABLE;
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "peer %.8s dialled us at %s: dialable", p->id_txt,
                       mp->ctrl_ep);
    } else if (h->not_reached) {
        mp__engine_go_outbound(mp, p);
    }
}

bool mp__engine_unreached(const mp_peer_t *p, uint64_t now) {
    return !p->outbound && !p->reach_ok && (!p->tcp_up || p->hs_failed) &&
           p->dial_ms != 0 && now - p->dial_ms >= REACH_WAIT_MS;
}

/* Once a second: a peer that dialled us and that we could not dial back
 * within REACH_WAIT_MS is told so on its own connection (its reachability
 * check). */
void mp__engine_reach_check(moshpit_t *mp, uint64_t now) {
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->nr_sent || p->ctrl_rid_len == 0 || p->state != MP_PEER_LIVE ||
            !mp__engine_unreached(p, now))
            continue;
        if (p->mon != NULL)
            mp__engine_read_monitor(mp, p);
        if (!mp__engine_unreached(p, now))
            continue;
        p->nr_sent = true;
        memcpy(mp->in_rid, p->ctrl_rid, p->ctrl_rid_len);
        mp->in_len = p->ctrl_rid_len;
        send_not_reached(mp, p);
        mp->in_len = 0;
    }
}

void mp__engine_on_hello(moshpit_t *mp, mp_peer_t *p, const uint8_t id[32],
                         const mp_hello_t *h) {
    if (memcmp(h->swarm, mp->swarm_hash, 32) != 0) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "HELLO from another swarm, refused");
        if (p != NULL && p->state != MP_PEER_REFUSED)
            mp__engine_peer_set_state(mp, p, MP_PEER_REFUSED,
                                      "different swarm");
        return;
    }
    uint64_t now = mp__engine_now_ms();
    if (p != NULL && p->state == MP_PEER_REFUSED && p->refused_ms != 0 &&
        now - p->refused_ms < REFUSE_HOLD_MS)
        return; /* refused a moment ago: a hammering peer costs no checks */
    const char *mode = NULL, *why = NULL;
    if (mp->swarm_secret != NULL) {
        uint8_t want[32];
        mp__crypto_admit_proof(mp->swarm_secret, mp->swarm_hash, id, mp->pub,
                               h->eph, want);
        bool ok = h->has_proof && mp__crypto_equal32(want, h->proof);
        mp__crypto_wipe(want, sizeof(want));
        if (!ok) {
            mode = "swarm_secret";
            why = "bad admission proof";
        }
    }
    uint64_t cert_end = 0;
    if (why == NULL && !mp__crypto_is_zero(mp->cfg.authority_key, 32)) {
        mp_cert_t c;
        moshpit_cert_status_t cs =
            mp__cert_check(h->has_cert ? h->cert : NULL, sizeof(h->cert),
                           mp->cfg.authority_key, mp->swarm_hash, id,
                           mp_plat_wallclock_s(), &c);
        if (cs != MOSHPIT_CERT_VALID) {
            mode = "certificate";
            why = mp__cert_status_text(cs);
        }
        cert_end = c.not_after;
    }
    if (why != NULL) {
        char txt[41];
        zmq_z85_encode(txt, id, 32);
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "peer %.8s failed %s admission (%s), refused", txt, mode,
                       why);
        /* a refused stranger gets a table entry only while the table is
         * less than 3/4 full: identities cycled by a refused peer cannot
         * take the last quarter from peers that pass admission */
        if (p == NULL && mp->npeers < mp->peers_max / 4 * 3)
            p = peer_add(mp, id, "");
        if (p != NULL) {
            /* remember the refusal, then tell it once if we can dial it
             * (in this order: the state change closes the old sockets, and
             * the new one must live long enough to deliver the REFUSE) */
            mp__engine_peer_set_state(mp, p, MP_PEER_REFUSED, why);
            p->refused_ms = now;
            if (p->ctrl == NULL && mp__endpoint_addr_ok(h->ctrl_addr)) {
                snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s",
                         h->ctrl_addr);
                if (peer_connect(mp, p) == MOSHPIT_OK)
                    mp__engine_send_simple(mp, p, MP_MSG_REFUSE,
                                           MOSHPIT_EPEERAUTH);
            }
        }
        return;
    }
    if (!mp__endpoint_addr_ok(h->ctrl_addr) ||
        !mp__endpoint_addr_ok(h->data_addr)) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "HELLO with unusable addresses dropped");
        return;
    }
    uint32_t cipher = mp__session_pick_cipher(mp->ciphers, h->ciphers);
    if (cipher == 0 || h->tag == 0) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "HELLO with no common cipher dropped");
        return;
    }
    if (p == NULL) {
        p = peer_add(mp, id, h->ctrl_addr);
        if (p == NULL)
            return;
    }
    /* A HELLO with a key older than the keyed one was sent before the
     * HELLO we keyed with and delivered late (queued on a connection that
     * was cut for a while): it must not end the newer session. The same
     * older key still arriving STALE_HELLO_MS after it was first dropped
     * is a sender repeating its current HELLO (restarted with its clock
     * set back): that one is heard. */
    if (p->keys != NULL && memcmp(p->their_eph, h->eph, 32) != 0 &&
        h->eph_order != 0 && p->their_eph_order != 0 &&
        h->eph_order < p->their_eph_order) {
        if (p->stale_since_ms == 0 || memcmp(p->stale_eph, h->eph, 32) != 0) {
            memcpy(p->stale_eph, h->eph, 32);
            p->stale_since_ms = now;
        }
        if (now - p->stale_since_ms < STALE_HELLO_MS) {
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "HELLO of %.8s with a key older than its "
                           "session's dropped (sent before, delivered late)",
                           p->id_txt);
            return;
        }
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "HELLO of %.8s with a key older than its session's "
                       "still repeated after %u ms: taken as its current "
                       "one (restarted with its clock set back?)",
                       p->id_txt, STALE_HELLO_MS);
    }
    p->stale_since_ms = 0;
    if (p->state == MP_PEER_REFUSED || p->state == MP_PEER_IDLE) {
        /* a peer that restarted with the right secret may come back; a
         * member without a session opens one */
        p->idle_dial = p->state == MP_PEER_IDLE;
        p->state = MP_PEER_NEW;
    }
    /* A HELLO with an ephemeral key other than the one our keys were made
     * with starts a new session of the sender's (docs/PROTOCOL.md,
     * "Session setup"). */
    bool rekey = p->keys == NULL || memcmp(p->their_eph, h->eph, 32) != 0;
    bool was_live = p->state == MP_PEER_LIVE;
    if (rekey && was_live) {
        /* its session ended (a restart, or it lost the connection) */
        mp__engine_peer_set_state(mp, p, MP_PEER_DEAD, "new session");
        p->state = MP_PEER_NEW;
        was_live = false;
        /* whether our key goes with the old session is decided below */
        p->my_eph_retire = false;
    }
    if (strcmp(p->ctrl_addr, h->ctrl_addr) != 0 && p->ctrl != NULL &&
        !was_live) {
        mp__engine_peer_close(p);
    }
    /* where it is (docs/DESIGN.md, "Peers behind NAT") */
    if (mp->in_len > 0) {
        memcpy(p->ctrl_rid, mp->in_rid, mp->in_len);
        p->ctrl_rid_len = (uint8_t)mp->in_len;
        snprintf(p->seen_addr, sizeof(p->seen_addr), "%s", mp->in_addr);
    }
    if (h->outbound) {
        if (!p->outbound) {
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "peer %.8s is outbound-only: answering on its "
                           "connections",
                           p->id_txt);
            /* our dialled sockets go; the session keys stay */
            if (p->ctrl != NULL)
                zmq_socket_monitor(p->ctrl, NULL, 0);
            mp__net_close(&p->mon);
            mp__net_close(&p->ctrl);
            mp__engine_stash_drop(p);
            mp__engine_data_close(p);
            p->outbound = true;
            p->reach_ok = false;
            p->dial_ms = 0;
        }
        memcpy(p->drid, h->drid, h->drid_len);
        p->drid_len = h->drid_len;
        /* outbound-only at this record of its: only a newer one may
         * change that (mp__engine_renew_due) */
        p->reach_inc = mp__engine_swim_inc(mp, p->id);
        if (mp->outbound) {
            /* neither of us can answer the other (docs/DESIGN.md,
             * "Reachability asked again"): no session; membership keeps
             * it a member */
            if (p->state != MP_PEER_DEAD)
                mp__engine_peer_set_state(mp, p, MP_PEER_DEAD,
                                          MP_WHY_BOTH_OUTBOUND);
            p->unreachable = true;
            return;
        }
    } else if (p->outbound) {
        /* dialable again: a restart elsewhere, or its reachability asked
         * again; we dial it from now on */
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "peer %.8s is dialable again: dialling it at %s",
                       p->id_txt, h->ctrl_addr);
        p->outbound = false;
        p->drid_len = 0;
        mp__engine_stash_drop(p);
    }
    if (mp->in_dealer)
        p->reach_ok = true; /* it answered on the connection we dialled */
    reach_verdict(mp, p, h);
    snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", h->ctrl_addr);
    if (peer_connect(mp, p) != MOSHPIT_OK)
        return;
    /* they keyed their side with our current ephemeral key */
    bool answered = p->my_eph_sec != NULL && !p->my_eph_retire &&
                    mp__crypto_equal32(h->seen, p->my_eph);
    if (rekey) {
        /* Our key serves one session: a key already used with another of
         * theirs is only kept when this HELLO answers it (then both sides
         * key the same pair, and the send counter goes on, so no (key,
         * nonce) pair can repeat even if an old key of theirs came back).
         * Otherwise make a fresh one and tell them. */
        if ((p->my_eph_sec == NULL || p->my_eph_retire ||
             (p->my_eph_used && !answered)) &&
            eph_fresh(mp, p) != MOSHPIT_OK) {
            mp__engine_log(mp, MOSHPIT_LOG_ERROR, "no ephemeral key for %.8s",
                           p->id_txt);
            return;
        }
        answered = mp__crypto_equal32(h->seen, p->my_eph);
        mp__engine_shm_drop(p); /* its regions are named by the keys */
        mp__session_keys_free(p->keys);
        p->keys = NULL;
        mp_session_hs_t hs = {.cipher = cipher,
                              .my_id = mp->pub,
                              .their_id = id,
                              .my_eph_sec = p->my_eph_sec,
                              .my_eph = p->my_eph,
                              .their_eph = h->eph,
                              .my_ciphers = mp->ciphers,
                              .their_ciphers = h->ciphers};
        if (mp__session_keys_new(&hs, &p->keys) != MOSHPIT_OK) {
            mp__engine_log(mp, MOSHPIT_LOG_WARN, "session keys for %.8s failed",
                           p->id_txt);
            return;
        }
        p->my_eph_used = true;
        memcpy(p->their_eph, h->eph, 32);
        p->their_eph_order = h->eph_order;
        mp__replay_reset(&p->rx_window);
        uint64_t txid, rxid;
        mp__session_keys_ids(p->keys, &txid, &rxid);
        mp__engine_log(
            mp, MOSHPIT_LOG_DEBUG,
            "session keys with %.8s: tx %016llx rx %016llx, tx counter "
            "from %llu",
            p->id_txt, (unsigned long long)txid, (unsigned long long)rxid,
            (unsigned long long)p->tx_counter + 1);
    }
    p->their_tag = h->tag;
    p->same_host =
        mp->has_host && h->has_host && mp__crypto_equal32(h->host, mp->host_id);
    p->cert_not_after = cert_end;
    p->bandwidth = h->bandwidth;
    p->serves_state = h->serves_state != 0;
    p->ciphers = h->ciphers;
    if (p->outbound) {
        snprintf(p->data_addr, sizeof(p->data_addr), "%s", h->data_addr);
    } else if (p->data == NULL || strcmp(p->data_addr, h->data_addr) != 0) {
        mp__engine_data_close(p);
        mp__engine_stash_drop(p);
        snprintf(p->data_addr, sizeof(p->data_addr), "%s", h->data_addr);
        if (!mp__engine_data_dial(mp, p, h->reorder_ok != 0)) {
            mp__engine_log(mp, MOSHPIT_LOG_WARN, "cannot dial data %s",
                           p->data_addr);
            return;
        }
    }
    p->hello_recv = true;
    /* answer a HELLO, and tell them our key when they did not key with it */
    if (!h->reply || !answered)
        mp__engine_send_hello(mp, p, true);
    if (!was_live) {
        mp__engine_peer_set_state(mp, p, MP_PEER_LIVE, "session established");
        /* membership (SWIM) tells the newcomer and the others about each
         * other: a join costs the bootstrap peer one member list */
        mp__engine_swim_peer_live(mp, p);
        mp__engine_ctl_flush(mp, p);
        mp__engine_round_peer_live(mp, p);
        mp__engine_sessions_trim(mp, mp__engine_now_ms());
    }
    mp__engine_reach_on_hello(mp, p, h);
}

/* ------------------------------------------------------------------ */
