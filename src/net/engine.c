/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the engine thread of one peer: the ZeroMQ event loop that feeds
 * the sans-IO core (matchmaker, joiner, group all-reduce) with messages and
 * time, and carries out what the core decides. It owns every socket:
 *   - pipe:  commands from API calls (inproc PAIR);
 *   - zap:   ZAP handler authenticating CURVE clients (authorized_keys);
 *   - ctrl:  ROUTER, CURVE server, receives control messages from peers;
 *   - data:  ROUTER receiving sealed data frames;
 *   - per peer: a CURVE DEALER (control, with a monitor) and a data DEALER
 *     (outbound-only with several data connections: one more, data_rx,
 *     that the peer answers on).
 * Every peer sends on its own DEALERs, so the ROUTER side always knows the
 * CURVE-authenticated sender of a control message (ZAP User-Id).
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
#include "shm.h"

/* socket readers                                                      */

/* The token bucket of p's control messages: true if one more may be read
 * now. Tokens are thousandths of a message; the bucket holds
 * MP_MSG_BURST_S seconds' worth and refills at mp->msg_rate a second.
 * Over the limit the message is dropped unread, and that is logged once a
 * second per peer with the number dropped since the last line. */
static bool msg_allowed(moshpit_t *mp, mp_peer_t *p, uint64_t now) {
    uint64_t cap = (uint64_t)mp->msg_rate * MP_MSG_BURST_S * 1000u;
    if (p->msg_refill_ms == 0) {
        p->msg_tokens = cap;
        p->msg_refill_ms = now;
    } else if (now > p->msg_refill_ms) {
        uint64_t add = (now - p->msg_refill_ms) * mp->msg_rate;
        p->msg_tokens = cap - p->msg_tokens < add ? cap : p->msg_tokens + add;
        p->msg_refill_ms = now;
    }
    if (p->msg_tokens >= 1000u) {
        p->msg_tokens -= 1000u;
        return true;
    }
    p->msg_dropped++;
    if (p->msg_logged_ms == 0 || now - p->msg_logged_ms >= 1000) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "control messages from %.8s over the rate limit (%u/s, "
                       "config peer_msg_rate): %u dropped unread",
                       p->id_txt, mp->msg_rate, p->msg_dropped);
        p->msg_logged_ms = now;
        p->msg_dropped = 0;
    }
    return false;
}

/* Reads and discards the rest of a multipart message whose frame m said
 * "more"; m is reused. */
static void drain(void *sock, zmq_msg_t *m) {
    while (zmq_msg_more(m)) {
        zmq_msg_close(m);
        zmq_msg_init(m);
        if (zmq_msg_recv(m, sock, ZMQ_DONTWAIT) < 0)
            return;
    }
}

/* One control message from the peer with identity id (p: its entry, if
 * any), body and an optional piggybacked frame; mp->in_* say where it came
 * from. */
static void ctrl_msg(moshpit_t *mp, const uint8_t id[32], mp_peer_t *p,
                     zmq_msg_t *body, zmq_msg_t *pb, bool has_pb);

static void on_ctrl(moshpit_t *mp) {
    zmq_msg_t rid, body, pb;
    zmq_msg_init(&rid);
    zmq_msg_init(&body);
    zmq_msg_init(&pb);
    bool has_pb = false;
    if (zmq_msg_recv(&rid, mp->ctrl, ZMQ_DONTWAIT) < 0)
        goto out;
    if (!zmq_msg_more(&rid) || zmq_msg_recv(&body, mp->ctrl, ZMQ_DONTWAIT) < 0)
        goto out;
    if (zmq_msg_more(&body)) { /* a second frame: piggybacked gossip */
        if (zmq_msg_recv(&pb, mp->ctrl, ZMQ_DONTWAIT) < 0)
            goto out;
        has_pb = true;
        if (zmq_msg_more(&pb)) { /* never more than two: drop it all */
            drain(mp->ctrl, &pb);
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "control message of more than two frames dropped");
            goto out;
        }
    }
    const char *uid = zmq_msg_gets(&body, "User-Id");
    uint8_t id[32];
    if (uid == NULL || strlen(uid) != 40 || zmq_z85_decode(id, uid) == NULL) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "control message without identity");
        goto out;
    }
    /* the connection it came on, and its source, for answers to a peer
     * nobody can dial (docs/DESIGN.md, "Peers behind NAT") */
    size_t rl = zmq_msg_size(&rid);
    mp->in_len = rl > 0 && rl <= sizeof(mp->in_rid) ? rl : 0;
    memcpy(mp->in_rid, zmq_msg_data(&rid), mp->in_len);
    const char *pa = zmq_msg_gets(&body, "Peer-Address");
    snprintf(mp->in_addr, sizeof(mp->in_addr), "%s", pa != NULL ? pa : "");
    mp->in_dealer = false;
    mp_peer_t *p = mp__engine_find_peer(mp, id);
    if (p != NULL && mp->in_len > 0) {
        memcpy(p->ctrl_rid, mp->in_rid, mp->in_len);
        p->ctrl_rid_len = (uint8_t)mp->in_len;
    }
    ctrl_msg(mp, id, p, &body, &pb, has_pb);
    mp->in_len = 0;
out:
    zmq_msg_close(&rid);
    zmq_msg_close(&body);
    zmq_msg_close(&pb);
}

/* A control message on our DEALER to p: p answered on the connection we
 * opened (we are outbound-only, or it tells us it cannot dial us). CURVE
 * authenticated p as the server we dialled. */
static void on_ctrl_dealer(moshpit_t *mp, mp_peer_t *p) {
    zmq_msg_t body, pb;
    zmq_msg_init(&body);
    zmq_msg_init(&pb);
    bool has_pb = false;
    void *s = p->ctrl;
    if (zmq_msg_recv(&body, s, ZMQ_DONTWAIT) < 0)
        goto out;
    if (zmq_msg_more(&body)) {
        if (zmq_msg_recv(&pb, s, ZMQ_DONTWAIT) < 0)
            goto out;
        has_pb = true;
        if (zmq_msg_more(&pb)) {
            drain(s, &pb);
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "control message of more than two frames dropped");
            goto out;
        }
    }
    uint8_t id[32];
    memcpy(id, p->id, 32);
    mp->in_len = 0;
    mp->in_addr[0] = '\0';
    mp->in_dealer = true;
    p->reach_ok = true;
    ctrl_msg(mp, id, p, &body, &pb, has_pb);
    mp->in_dealer = false;
out:
    zmq_msg_close(&body);
    zmq_msg_close(&pb);
}

/* A message from a member whose session this peer closed: the other side
 * still holds it open (our BYE crossed its message): open a new one. */
static void reopen_idle(moshpit_t *mp, mp_peer_t *p) {
    if (p != NULL && p->state == MP_PEER_IDLE)
        mp__engine_session_want(mp, p);
}

static void ctrl_msg(moshpit_t *mp, const uint8_t id[32], mp_peer_t *p,
                     zmq_msg_t *body, zmq_msg_t *pb, bool has_pb) {
    char uid[41];
    zmq_z85_encode(uid, id, 32);
    uint64_t now = mp__engine_awake(mp);
    if (p != NULL) {
        p->last_rx_ms = now; /* not frozen (mp__engine_swim_check_sessions) */
        p->used_ms = now;    /* in use (mp__engine_sessions_trim) */
    }
    if (p != NULL && !msg_allowed(mp, p, now))
        goto out;
    if (zmq_msg_size(body) > MP_CTRL_MAX) {
        mp__engine_log(
            mp, MOSHPIT_LOG_WARN,
            "control message from %.8s too large (%zu bytes, the limit "
            "is %u), dropped",
            uid, zmq_msg_size(body), MP_CTRL_MAX);
        goto out;
    }
    if (mp->round.cmd != NULL)
        mp->round.bytes_received += zmq_msg_size(body) + zmq_msg_size(pb);
    if (has_pb)
        mp__engine_swim_on_piggyback(mp, p, zmq_msg_data(pb), zmq_msg_size(pb));
    mp_msg_t *m = mp->msg;
    moshpit_err_t e =
        mp__wire_msg_decode(zmq_msg_data(body), zmq_msg_size(body), m);
    if (e != MOSHPIT_OK) {
        /* a membership message from a member whose session we closed is
         * taken (it is evidence the member lives) and, in a swarm larger
         * than sessions_max, opens no session: the member dials us again
         * if it needs one, and reopening every session whose close
         * crossed a probe kept sessions closing and opening over the cap
         * (docs/DESIGN.md, "Sessions") */
        if (!mp__engine_crowded(mp))
            reopen_idle(mp, p);
        if (!mp__engine_swim_on_ctrl(mp, p, zmq_msg_data(body),
                                     zmq_msg_size(body)))
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "malformed control message from %.8s dropped", uid);
        goto out;
    }
    if (m->type == MP_MSG_HELLO) {
        mp_hello_t h = m->u.hello; /* m is reused by replies */
        mp__engine_on_hello(mp, p, id, &h);
        goto out;
    }
    if (p == NULL)
        goto out;
    if (m->type == MP_MSG_REFUSE) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN, "peer %.8s refused us", p->id_txt);
        mp__engine_peer_set_state(mp, p, MP_PEER_REFUSED, "it refused us");
        goto out;
    }
    if (p->state != MP_PEER_LIVE) {
        if (m->type != MP_MSG_BYE)
            reopen_idle(mp, p);
        goto out;
    }
    if (mp__engine_round_on_msg(mp, p, m))
        goto out;
    switch (m->type) {
    case MP_MSG_PEERS: {
        mp_peers_t *ps = malloc(sizeof(*ps));
        if (ps == NULL)
            break;
        *ps = m->u.peers;
        for (uint32_t i = 0; i < ps->n; i++)
            mp__engine_peer_learn(mp, ps->peers[i].id, ps->peers[i].addr);
        free(ps);
        break;
    }
    case MP_MSG_DONE:
        p->done_gid = m->u.done.group_id;
        for (int k = 0; k < 2; k++)
            if (p->mirror_gid[k] == p->done_gid)
                p->mirror_gid[k] = 0; /* it read what it wanted there */
        mp__engine_round_on_done(mp, p, &m->u.done);
        break;
    case MP_MSG_HAVE:
        mp__engine_resume_on_have(mp, p, &m->u.have);
        break;
    case MP_MSG_BYE:
        if (m->u.bye.reason == MP_BYE_IDLE) {
            /* it closed a session nothing used (over its sessions_max):
             * still a member, the next message for it dials it; a mate of
             * the running group whose session ends is failed */
            bool mate = mp__engine_round_has_member(mp, p);
            mp__engine_peer_set_state(mp, p, MP_PEER_IDLE, "closed by it");
            if (mate)
                mp__engine_round_peer_failed(mp, p);
            mp__engine_state_peer_failed(mp, p);
            break;
        }
        p->left = true;
        mp__engine_peer_set_state(mp, p, MP_PEER_DEAD, "left");
        break;
    case MP_MSG_STATE_REQ: {
        mp_state_req_t q = m->u.state_req;
        mp__engine_state_on_req(mp, p, &q);
        break;
    }
    case MP_MSG_STATE_INFO: {
        mp_state_info_t i = m->u.state_info;
        mp__engine_state_on_info(mp, p, &i);
        break;
    }
    default:
        break;
    }
out:;
}

static void on_data(moshpit_t *mp) {
    zmq_msg_t rid, body;
    zmq_msg_init(&rid);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&rid, mp->data, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&rid) &&
        zmq_msg_recv(&body, mp->data, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_more(&body)) {
            /* data messages are one frame */
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "multipart data message dropped");
            drain(mp->data, &body);
        } else {
            mp__engine_on_data_msg(mp, &body);
        }
    }
    zmq_msg_close(&rid);
    zmq_msg_close(&body);
}

/* The descriptor libzmq signals when events wait on monitor socket mon
 * (polled in place of the socket, mp__engine_main); false without one. */
static bool mon_fd(void *mon, zmq_fd_t *fd) {
    size_t sz = sizeof(*fd);
    return mon != NULL && zmq_getsockopt(mon, ZMQ_FD, fd, &sz) == 0;
}

/* A data frame on a data DEALER of ours, s (we are outbound-only: the
 * mate answers on our connection, p->data or p->data_rx). The frame names
 * its session by its tag. */
static void on_data_dealer(moshpit_t *mp, void *s) {
    zmq_msg_t body;
    zmq_msg_init(&body);
    if (zmq_msg_recv(&body, s, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_more(&body)) {
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "multipart data message dropped");
            drain(s, &body);
        } else {
            mp__engine_on_data_msg(mp, &body);
        }
    }
    zmq_msg_close(&body);
}

static void on_zap(moshpit_t *mp) {
    zmq_msg_t f[8];
    int n = 0, more = 1;
    while (more && n < 8) {
        zmq_msg_init(&f[n]);
        if (zmq_msg_recv(&f[n], mp->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[n]);
            return; /* partial request: nothing sensible to answer */
        }
        more = zmq_msg_more(&f[n]);
        n++;
    }
    while (more) { /* too many frames: drain */
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, mp->zap, ZMQ_DONTWAIT) < 0)
            more = 0;
        else
            more = zmq_msg_more(&x);
        zmq_msg_close(&x);
    }
    /* version, request id, domain, address, identity, mechanism, creds */
    const char *status = "400";
    char uid[41] = "";
    if (n >= 7 && zmq_msg_size(&f[5]) == 5 &&
        memcmp(zmq_msg_data(&f[5]), "CURVE", 5) == 0 &&
        zmq_msg_size(&f[6]) == 32) {
        const uint8_t *key = zmq_msg_data(&f[6]);
        if (mp__engine_authorized(mp, key)) {
            status = "200";
            zmq_z85_encode(uid, key, 32);
        } else {
            char txt[41];
            zmq_z85_encode(txt, key, 32);
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "connection from unauthorized key %.8s refused",
                           txt);
        }
    }
    if (n >= 2) {
        zmq_send(mp->zap, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(mp->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]),
                 ZMQ_SNDMORE);
        zmq_send(mp->zap, status, 3, ZMQ_SNDMORE);
        zmq_send(mp->zap, status[0] == '2' ? "OK" : "denied",
                 status[0] == '2' ? 2 : 6, ZMQ_SNDMORE);
        zmq_send(mp->zap, uid, strlen(uid), ZMQ_SNDMORE);
        zmq_send(mp->zap, "", 0, 0);
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

/* How long a live session whose control connection broke mid-round (its
 * peer a member of the round) waits for ZeroMQ's new connection before it
 * ends: half of peer_timeout_ms (0: it ends at once, as outside rounds). */
static uint64_t ctrl_grace_ms(const moshpit_t *mp) {
    return mp->cfg.peer_timeout_ms / 2;
}

/* Reads p's monitor until it is empty (or the sockets are closed). */
static void on_monitor(moshpit_t *mp, mp_peer_t *p) {
    mp_net_event_t ev;
    while (p->mon != NULL && mp__net_read_event(p->mon, &ev) == 0) {
        switch (ev) {
        case MP_NET_EV_UP:
            /* our dial reached it at its advertised address */
            p->reach_ok = true;
            if (p->ctrl_down_ms != 0) {
                p->ctrl_down_ms = 0;
                mp__engine_log(mp, MOSHPIT_LOG_INFO,
                               "control connection to %.8s back, session "
                               "kept",
                               p->id_txt);
            }
            break;
        case MP_NET_EV_CONNECTED:
            p->tcp_up = true; /* a slow handshake is no unreachable peer */
            break;
        case MP_NET_EV_DOWN:
            p->tcp_up = false;
            if (p->state == MP_PEER_LIVE && ctrl_grace_ms(mp) > 0 &&
                mp__engine_round_has_member(mp, p)) {
                /* a blip: ZeroMQ dials again at once; the session and
                 * the round go on if it is back within the grace */
                mp__engine_resume_link_broke(mp, p);
                if (p->ctrl_down_ms == 0) {
                    p->ctrl_down_ms = mp__engine_now_ms();
                    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                                   "control connection to %.8s broke "
                                   "mid-round, dialling it again",
                                   p->id_txt);
                }
                break;
            }
            if (p->state == MP_PEER_LIVE)
                mp__engine_peer_set_state(mp, p, MP_PEER_DEAD, "disconnected");
            return; /* sockets may be gone */
        case MP_NET_EV_AUTH_FAILED:
            mp__engine_peer_set_state(mp, p, MP_PEER_REFUSED,
                                      "it refused our key");
            return;
        case MP_NET_EV_PROTO_FAILED:
            p->hs_failed = true; /* another key answers at its address */
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "handshake with %.8s at %s failed (wrong key?)",
                           p->id_txt, p->ctrl_addr);
            break;
        default:
            break;
        }
    }
}

void mp__engine_read_monitor(moshpit_t *mp, mp_peer_t *p) {
    on_monitor(mp, p);
}

uint32_t mp__engine_close_wait_ms(const moshpit_config_t *cfg) {
    return cfg->peer_timeout_ms < cfg->round_timeout_ms ? cfg->peer_timeout_ms
                                                        : cfg->round_timeout_ms;
}

/* The leave itself: LEFT to a few members, then BYE to every live peer,
 * on the control links (after the DONEs of the last round on the same
 * links). The control sockets linger so that these reach the network. */
static void close_leave(moshpit_t *mp) {
    mp_cmd_t *c = mp->close_cmd;
    mp__engine_swim_close(mp);
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_BYE;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->state == MP_PEER_LIVE)
            mp__engine_send_msg(mp, mp->peers[i], m);
    mp__engine_state_teardown(mp);
    mp->leave_linger = true;
    mp->stopping = true;
    mp->close_cmd = NULL;
    mp__engine_complete_cmd(mp, c, MOSHPIT_OK);
}

/* A close in progress: it leaves once every mate of the last round said
 * DONE or is gone, or at its deadline, or when the caller gave up. Until
 * then the engine runs as usual, so the data of that round keeps flowing
 * (and this peer keeps serving its matchmaker and sessions). */
static void close_progress(moshpit_t *mp, uint64_t now) {
    mp_cmd_t *c = mp->close_cmd;
    if (c == NULL)
        return;
    mp_plat_mutex_lock(&mp->lock);
    bool cancel = c->cancel;
    mp_plat_mutex_unlock(&mp->lock);
    bool settled = mp__engine_owed_settled(mp);
    if (!settled && !cancel && now < mp->close_deadline_ms)
        return;
    if (!settled)
        mp__engine_log(
            mp, MOSHPIT_LOG_WARN,
            "closing before every member of round %016llx confirmed it "
            "(%s)",
            (unsigned long long)mp->owed_gid,
            cancel ? "the call gave up" : "waited the close bound");
    close_leave(mp);
}

static void on_command(moshpit_t *mp) {
    /* the pipe only wakes us: empty it, then take the command under the
     * lock it was posted under */
    char wake;
    while (zmq_recv(mp->pipe_eng, &wake, sizeof(wake), ZMQ_DONTWAIT) >= 0) {
    }
    mp_plat_mutex_lock(&mp->lock);
    mp_cmd_t *c = mp->cmd_posted;
    mp->cmd_posted = NULL;
    mp_plat_mutex_unlock(&mp->lock);
    if (c == NULL)
        return;
    if (c->type == MP_CMD_CLOSE) {
        if (mp->close_cmd != NULL) { /* cannot happen: calls are serialized */
            mp__engine_complete_cmd(mp, c, MOSHPIT_EINVAL);
            return;
        }
        if (mp->round.cmd != NULL)
            mp__engine_round_end(mp, MOSHPIT_ECLOSED, true);
        mp->close_cmd = c;
        mp->close_deadline_ms =
            mp__engine_now_ms() + mp__engine_close_wait_ms(&mp->cfg);
        close_progress(mp, mp__engine_now_ms());
        return;
    }
    if (c->type == MP_CMD_FETCH) {
        mp__engine_state_fetch_start(mp, c);
        return;
    }
    if (mp->round.cmd != NULL) { /* cannot happen: calls are serialized */
        mp__engine_complete_cmd(mp, c, MOSHPIT_EINVAL);
        return;
    }
    mp__engine_start_round(mp, c);
}

/* ------------------------------------------------------------------ */
/* the loop                                                            */

/* Dials one random dead peer again (SWIM and serf do the same): a peer
 * declared dead because the network between us failed (a partition, a
 * cable) comes back once the network does; otherwise the two sides of a
 * healed partition would never learn of each other again, since gossip
 * only carries live peers. Peers that said BYE, and peers dead for longer
 * than RECONNECT_GIVEUP_MS, are not dialled; a restarted peer that said
 * BYE dials us itself. One peer per RECONNECT_MS keeps the cost
 * independent of the swarm's size. */
static bool redial_candidate(const mp_peer_t *p, uint64_t now) {
    return p->state == MP_PEER_DEAD && !p->left &&
           now - p->state_since_ms >= DEAD_RETRY_MS &&
           now - p->last_live_ms <= RECONNECT_GIVEUP_MS;
}

static void redial_one(moshpit_t *mp, uint64_t now) {
    size_t n = 0;
    for (size_t i = 0; i < mp->npeers; i++)
        n += redial_candidate(mp->peers[i], now);
    if (n == 0)
        return;
    size_t pick = (size_t)(mp__engine_rng_next(mp) % n);
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (!redial_candidate(p, now) || pick-- > 0)
            continue;
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "dialling dead peer %.8s again",
                       p->id_txt);
        char addr[MP_ADDR_MAX]; /* peer_learn writes p->ctrl_addr */
        snprintf(addr, sizeof(addr), "%s", p->ctrl_addr);
        mp__engine_peer_learn(mp, p->id, addr);
        return;
    }
}

static void housekeeping(moshpit_t *mp, uint64_t now) {
    mp__engine_swim_housekeeping(mp, now);
    mp__engine_reach_tick(mp, now);
    if (now >= mp->next_reconnect_ms) {
        mp->next_reconnect_ms = now + RECONNECT_MS;
        redial_one(mp, now);
    }
    if (now >= mp->next_gossip_ms) {
        mp->next_gossip_ms = now + GOSSIP_MS;
        mp__engine_expire_certs(mp);
        mp__engine_swim_check_sessions(mp, now);
        mp__engine_sessions_revive(mp, now);
        mp__engine_swim_renewed(mp);
        mp__engine_sessions_trim(mp, now);
        mp__engine_reach_check(mp, now);
        if (mp->outbound) /* dials that failed by now count (view) */
            mp__engine_update_members(mp);
        /* a monitor's descriptor (polled in place of the socket, below)
         * does not always fire for an event that arrives while earlier
         * commands are pending: read every monitor once a second, so no
         * disconnect waits longer than that */
        for (size_t i = 0; i < mp->npeers; i++) {
            if (mp->peers[i]->mon != NULL)
                on_monitor(mp, mp->peers[i]);
            if (mp->peers[i]->dmon != NULL)
                mp__engine_data_on_monitor(mp, mp->peers[i]);
            if (mp->peers[i]->dmon_rx != NULL)
                mp__engine_data_on_rx_monitor(mp, mp->peers[i]);
        }
        /* held frames of rounds that never came */
        for (size_t i = 0; i < mp->nearly;)
            if (now - mp->early[i].arrived_ms > mp->cfg.round_timeout_ms)
                mp__engine_early_free_at(mp, i);
            else
                i++;
    }
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->ctrl_down_ms != 0 &&
            (p->state != MP_PEER_LIVE ||
             now - p->ctrl_down_ms >= ctrl_grace_ms(mp))) {
            p->ctrl_down_ms = 0;
            if (p->state == MP_PEER_LIVE)
                mp__engine_peer_set_state(mp, p, MP_PEER_DEAD, "disconnected");
        }
        if (p->state != MP_PEER_NEW || p->ctrl == NULL || p->hello_recv ||
            now < p->next_hello_ms)
            continue;
        if (p->hello_tries >= HELLO_TRIES_MAX) {
            mp__engine_peer_set_state(mp, p, MP_PEER_DEAD,
                                      "no answer to HELLO");
            continue;
        }
        mp__engine_send_hello(mp, p, false);
        p->hello_tries++;
        p->next_hello_ms = now + HELLO_RETRY_MS;
    }
    if (mp__engine_state_fetch_wakeup(mp) <= now)
        mp__engine_state_fetch_poll(mp, now);
}

static uint64_t next_wakeup(moshpit_t *mp) {
    uint64_t w = mp->next_gossip_ms;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->state == MP_PEER_NEW &&
            mp->peers[i]->next_hello_ms < w && !mp->peers[i]->hello_recv)
            w = mp->peers[i]->next_hello_ms;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->ctrl_down_ms != 0 &&
            mp->peers[i]->ctrl_down_ms + ctrl_grace_ms(mp) < w)
            w = mp->peers[i]->ctrl_down_ms + ctrl_grace_ms(mp);
    uint64_t t = mp__engine_round_wakeup(mp);
    w = t < w ? t : w;
    uint64_t ft = mp__engine_state_fetch_wakeup(mp);
    w = ft < w ? ft : w;
    ft = mp__engine_swim_wakeup(mp);
    w = ft < w ? ft : w;
    ft = mp__engine_reach_wakeup(mp);
    w = ft < w ? ft : w;
    if (mp->close_cmd != NULL)
        w = mp->close_deadline_ms < w ? mp->close_deadline_ms : w;
    return w;
}

static void check_cancel(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->cmd == NULL)
        return;
    mp_plat_mutex_lock(&mp->lock);
    bool cancel = r->cmd->cancel;
    mp_plat_mutex_unlock(&mp->lock);
    if (cancel)
        mp__engine_round_end(mp, MOSHPIT_ETIMEDOUT, true);
}

/* The engine thread did not run for about gap_ms (past its poll's
 * timeout: the process was stopped, the machine slept or swapped): what
 * the round's members sent meanwhile waits in the sockets, unread, so
 * their silence in that time is not counted against them (the group
 * machine's silence limits start again from the end of the pause). Found
 * at the top of the loop, around the poll, before each message is read
 * and wherever the round machines are handed the time (a part delivered,
 * a HAVE, a member failed, the round's end checked: mp__engine_awake),
 * so that no part is taken with the pause's time as if the round's end
 * had passed meanwhile. */
static void on_pause(moshpit_t *mp, uint64_t gap_ms) {
    mp__group_pause(mp->round.group, gap_ms);
    /* and the wait for the mates' DONEs, which were not read meanwhile */
    if (mp->round.done_sent)
        mp->round.wait_from = mp__engine_now_ms();
    /* and the round's measured end (a forecast of the link's time) starts
     * afresh, as after a connection broke; never past the configured one */
    if (mp->round.group != NULL && mp->round.span_ms > 0)
        mp__rnd_extend_deadline(
            mp->rnd, mp__add_sat_u64(mp__engine_now_ms(), mp->round.span_ms));
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "the engine did not run for %llu ms (the process was "
                   "stopped or the machine slept): members' silence in that "
                   "time not counted",
                   (unsigned long long)gap_ms);
}

uint64_t mp__engine_awake(moshpit_t *mp) {
    uint64_t now = mp__engine_now_ms();
    if (mp->awake_ms != 0 && now > mp->awake_ms &&
        now - mp->awake_ms > mp->sleep_ms + MP_PAUSE_MS) {
        on_pause(mp, now - mp->awake_ms - mp->sleep_ms);
        now = mp__engine_now_ms(); /* after its log, which may block */
    }
    mp->awake_ms = now;
    mp->sleep_ms = 0;
    return now;
}

void mp__engine_main(void *arg) {
    moshpit_t *mp = arg;
    zmq_pollitem_t *items = NULL;
    mp_peer_t **item_peer = NULL;
    size_t items_cap = 0;

    /* without bootstrap peers nobody is asked: a first peer is dialable */
    mp->reach = mp->bootstrap_n == 0 ? MP_REACH_DIALABLE : MP_REACH_UNKNOWN;
    /* dial the bootstrap peers (parsed by mp__engine_open) */
    for (size_t i = 0; i < mp->bootstrap_n; i++) {
        const mp_endpoint_t *b = &mp->bootstrap[i];
        mp__engine_peer_learn(mp, b->key, b->addr);
        mp_peer_t *p = mp__engine_find_peer(mp, b->key);
        if (p != NULL)
            p->bootstrap = true;
    }
    mp__engine_update_members(mp);

    while (!mp->stopping) {
        uint64_t now = mp__engine_awake(mp);
        housekeeping(mp, now);
        mp__engine_round_progress(mp);
        check_cancel(mp);
        close_progress(mp, now);
        if (mp->stopping)
            break;

        size_t need = 4 + 7 * mp->npeers;
        if (need > items_cap) {
            size_t cap = need * 2;
            zmq_pollitem_t *ni = realloc(items, cap * sizeof(*ni));
            if (ni != NULL)
                items = ni;
            mp_peer_t **np = realloc(item_peer, cap * sizeof(*np));
            if (np != NULL)
                item_peer = np;
            if (ni == NULL || np == NULL) {
                mp_plat_sleep_ms(10);
                continue;
            }
            items_cap = cap;
        }
        mp__engine_state_pump(mp);
        bool router_wait = false;
        bool read_dealers = mp__engine_reach_read_dealers(mp, now);
        size_t n = 0;
        items[n++] = (zmq_pollitem_t){mp->pipe_eng, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){mp->zap, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){mp->ctrl, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){mp->data, 0, ZMQ_POLLIN, 0};
        /* Monitors go in as the plain descriptor that libzmq signals when
         * commands wait for the socket (ZMQ_FD), not as sockets: zmq_poll
         * asks every socket item for ZMQ_EVENTS, two system calls each,
         * twice a call, and one monitor per peer made every turn of this
         * loop cost O(peers) system calls (docs/DESIGN.md, "What a peer
         * needs"). on_monitor reads until the socket is empty, which also
         * resets the descriptor. */
        for (size_t i = 0; i < mp->npeers; i++) {
            mp_peer_t *p = mp->peers[i];
            void *mons[3] = {p->mon, p->dmon, p->dmon_rx};
            for (int k = 0; k < 3; k++) {
                zmq_fd_t fd;
                if (mon_fd(mons[k], &fd)) {
                    item_peer[n] = p;
                    items[n++] = (zmq_pollitem_t){NULL, fd, ZMQ_POLLIN, 0};
                }
            }
            if ((p->stash_full || p->st_blocked) && p->data != NULL &&
                !p->outbound) {
                item_peer[n] = p;
                items[n++] = (zmq_pollitem_t){p->data, 0, ZMQ_POLLOUT, 0};
            }
            /* answers on the connections we opened: while the bootstrap
             * peers have not said they can dial us, and for good when
             * they cannot (docs/DESIGN.md, "Peers behind NAT") */
            if (read_dealers && p->ctrl != NULL) {
                item_peer[n] = p;
                items[n++] = (zmq_pollitem_t){p->ctrl, 0, ZMQ_POLLIN, 0};
            }
            if ((mp->outbound || read_dealers) && p->data != NULL &&
                p->data_rx == NULL) {
                item_peer[n] = p;
                items[n++] = (zmq_pollitem_t){p->data, 0, ZMQ_POLLIN, 0};
            }
            if (p->data_rx != NULL) {
                item_peer[n] = p;
                items[n++] = (zmq_pollitem_t){p->data_rx, 0, ZMQ_POLLIN, 0};
            }
            /* a ROUTER cannot be polled for one connection: a frame
             * waiting for an outbound-only peer's connection is retried
             * after a short sleep */
            if ((p->stash_full || p->st_blocked) && p->outbound)
                router_wait = true;
        }
        now = mp__engine_awake(mp);
        uint64_t w = next_wakeup(mp);
        long timeout = w <= now                ? 0
                       : w - now > POLL_MAX_MS ? POLL_MAX_MS
                                               : (long)(w - now);
        if (router_wait && timeout > ROUTER_RETRY_MS)
            timeout = ROUTER_RETRY_MS;
        mp->sleep_ms = timeout > 0 ? (uint64_t)timeout : 0;
        int rc = zmq_poll(items, (int)n, timeout);
        (void)mp__engine_awake(mp);
        if (rc < 0) {
            if (errno == ETERM)
                break;
            continue;
        }
        if (items[0].revents & ZMQ_POLLIN)
            on_command(mp);
        if (mp->stopping)
            break;
        if (items[1].revents & ZMQ_POLLIN)
            on_zap(mp);
        for (int k = 0; k < BATCH && (items[2].revents & ZMQ_POLLIN); k++) {
            on_ctrl(mp);
            int ev = 0;
            size_t sz = sizeof(ev);
            if (zmq_getsockopt(mp->ctrl, ZMQ_EVENTS, &ev, &sz) != 0 ||
                !(ev & ZMQ_POLLIN))
                break;
        }
        for (int k = 0; k < BATCH && (items[3].revents & ZMQ_POLLIN); k++) {
            on_data(mp);
            mp__engine_pump_sends(mp);
            int ev = 0;
            size_t sz = sizeof(ev);
            if (zmq_getsockopt(mp->data, ZMQ_EVENTS, &ev, &sz) != 0 ||
                !(ev & ZMQ_POLLIN))
                break;
        }
        /* answers on our own connections (outbound-only); handlers may
         * close sockets: check the peer still has the socket polled */
        for (size_t i = 4; i < n; i++) {
            mp_peer_t *p = item_peer[i];
            if (items[i].socket == NULL || !(items[i].revents & ZMQ_POLLIN))
                continue;
            for (int k = 0; k < BATCH; k++) {
                int ev = 0;
                size_t sz = sizeof(ev);
                if (items[i].socket == p->ctrl)
                    on_ctrl_dealer(mp, p);
                else if (items[i].socket == p->data ||
                         items[i].socket == p->data_rx)
                    on_data_dealer(mp, items[i].socket);
                else
                    break;
                if (items[i].socket != p->ctrl && items[i].socket != p->data &&
                    items[i].socket != p->data_rx)
                    break;
                if (zmq_getsockopt(items[i].socket, ZMQ_EVENTS, &ev, &sz) !=
                        0 ||
                    !(ev & ZMQ_POLLIN))
                    break;
            }
            if (mp->stopping)
                break;
        }
        mp__engine_pump_sends(mp);
        /* monitors may close sockets: check the peer still has the
         * monitor whose descriptor fired */
        for (size_t i = 4; i < n; i++) {
            if (items[i].socket != NULL || items[i].revents == 0)
                continue;
            mp_peer_t *p = item_peer[i];
            zmq_fd_t fd;
            if (mon_fd(p->mon, &fd) && fd == items[i].fd)
                on_monitor(mp, p);
            else if (mon_fd(p->dmon, &fd) && fd == items[i].fd)
                mp__engine_data_on_monitor(mp, p);
            else if (mon_fd(p->dmon_rx, &fd) && fd == items[i].fd)
                mp__engine_data_on_rx_monitor(mp, p);
        }
    }
    free(items);
    free(item_peer);
    if (mp->win != NULL)
        mp__shm_window_bump(mp->win, 0); /* the caller's values go back */
    mp_plat_mutex_lock(&mp->lock);
    mp->stopped = true;
    mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
}

/* ------------------------------------------------------------------ */
/* setup and teardown (engine_open.c calls them on the caller's thread, */
/* before the engine thread starts and after it stopped)               */

static int set_int(void *s, int opt, int v) {
    return zmq_setsockopt(s, opt, &v, sizeof(v));
}

moshpit_err_t mp__engine_setup(moshpit_t *mp) {
    char host[MP_ADDR_MAX], adv[MP_ADDR_MAX], ep[2 * MP_ADDR_MAX + 16];
    long port = 0, dport = 0;
    size_t sz;
    mp_agg_t agg;
    (void)mp__agg_from_config(&mp->cfg, &agg); /* checked at open */
    mp_rnd_cfg_t rc;
    mp__rnd_cfg_of(&rc, &mp->cfg, &agg, mp->pub, &mp->grid,
                   mp__crypto_random_u64(), mp->join_seq);
    moshpit_err_t e = mp__rnd_new(&rc, &mp->rnd);
    if (e != MOSHPIT_OK)
        return e;
    mp->zctx = zmq_ctx_new();
    if (mp->zctx == NULL)
        return MOSHPIT_ESYS;
    zmq_ctx_set(mp->zctx, ZMQ_IO_THREADS, 1);
    zmq_ctx_set(mp->zctx, ZMQ_BLOCKY, 0);

    mp->zap = zmq_socket(mp->zctx, ZMQ_REP);
    mp->pipe_eng = zmq_socket(mp->zctx, ZMQ_PAIR);
    mp->pipe_api = zmq_socket(mp->zctx, ZMQ_PAIR);
    mp->ctrl = zmq_socket(mp->zctx, ZMQ_ROUTER);
    mp->data = zmq_socket(mp->zctx, ZMQ_ROUTER);
    if (!mp->zap || !mp->pipe_eng || !mp->pipe_api || !mp->ctrl || !mp->data)
        return MOSHPIT_ESYS;
    set_int(mp->zap, ZMQ_LINGER, 0);
    set_int(mp->pipe_eng, ZMQ_LINGER, 0);
    set_int(mp->pipe_api, ZMQ_LINGER, 0);
    if (zmq_bind(mp->zap, "inproc://zeromq.zap.01") != 0 ||
        zmq_bind(mp->pipe_eng, "inproc://moshpit-pipe") != 0 ||
        zmq_connect(mp->pipe_api, "inproc://moshpit-pipe") != 0)
        return MOSHPIT_ESYS;

    /* larger messages are read and dropped with a log line up to
     * MP_CTRL_WIRE_MAX; beyond, ZeroMQ closes the connection unread. At
     * most 256 messages wait per connection (then TCP pushes back). */
    int64_t cmax = MP_CTRL_WIRE_MAX;
    int64_t dmax = MP_DATA_WIRE_MAX;
    if (set_int(mp->ctrl, ZMQ_CURVE_SERVER, 1) != 0 ||
        zmq_setsockopt(mp->ctrl, ZMQ_CURVE_SECRETKEY, mp->sec, 32) != 0 ||
        zmq_setsockopt(mp->ctrl, ZMQ_MAXMSGSIZE, &cmax, sizeof(cmax)) != 0 ||
        set_int(mp->ctrl, ZMQ_LINGER, 0) != 0 ||
        set_int(mp->ctrl, ZMQ_RCVHWM, 256) != 0)
        return MOSHPIT_ESYS;
    /* at most 8 data frames (2 MiB of 256 KiB parts) queued per sender,
     * then TCP pushes back: memory bounded by parts and members, not by
     * the vector (docs/DESIGN.md, "What a peer needs") */
    if (zmq_setsockopt(mp->data, ZMQ_MAXMSGSIZE, &dmax, sizeof(dmax)) != 0 ||
        set_int(mp->data, ZMQ_LINGER, 0) != 0 ||
        set_int(mp->data, ZMQ_RCVHWM, 8) != 0)
        return MOSHPIT_ESYS;
    /* frames to an outbound-only peer go out on this ROUTER, to the
     * routing id its data DEALER named in HELLO: a full or missing
     * connection is an error to retry (not a silent drop), and a
     * reconnecting DEALER takes its routing id over at once; at most 4
     * frames wait per connection, as on a data DEALER */
    if (set_int(mp->data, ZMQ_ROUTER_MANDATORY, 1) != 0 ||
        set_int(mp->data, ZMQ_ROUTER_HANDOVER, 1) != 0 ||
        set_int(mp->data, ZMQ_SNDHWM, 4) != 0)
        return MOSHPIT_ESYS;

    if (mp__endpoint_split(mp->cfg.listen, host, sizeof(host), &port) != 0)
        return MOSHPIT_EINVAL;
    if (port == 0)
        snprintf(ep, sizeof(ep), "tcp://%s:*", host);
    else
        snprintf(ep, sizeof(ep), "tcp://%s:%ld", host, port);
    if (zmq_bind(mp->ctrl, ep) != 0)
        return MOSHPIT_ESYS;
    snprintf(ep, sizeof(ep), "tcp://%s:*", host);
    e = mp__engine_streams_setup(mp, ep); /* binds the data ROUTER */
    if (e != MOSHPIT_OK)
        return e;

    /* what others dial: the advertised host (or the bound one) + our ports */
    char bound[MP_ADDR_MAX];
    sz = sizeof(bound);
    if (zmq_getsockopt(mp->ctrl, ZMQ_LAST_ENDPOINT, bound, &sz) != 0 ||
        mp__endpoint_split(bound, host, sizeof(host), &port) != 0)
        return MOSHPIT_ESYS;
    sz = sizeof(bound);
    if (zmq_getsockopt(mp->data, ZMQ_LAST_ENDPOINT, bound, &sz) != 0 ||
        mp__endpoint_split(bound, adv, sizeof(adv), &dport) != 0)
        return MOSHPIT_ESYS;
    if (mp->cfg.advertise != NULL) {
        /* "tcp://host", "tcp://host:port" or "host": only the host counts */
        const char *a = mp->cfg.advertise;
        if (strncmp(a, "tcp://", 6) == 0)
            a += 6;
        size_t al = strcspn(a, ":");
        if (a[0] == '[')
            al = strcspn(a, "]") + 1;
        if (al == 0 || al >= sizeof(adv) || al > strlen(a))
            return MOSHPIT_EINVAL;
        memcpy(adv, a, al);
        adv[al] = '\0';
    } else {
        snprintf(adv, sizeof(adv), "%.100s", host);
        if (strcmp(adv, "0.0.0.0") == 0 || strcmp(adv, "[::]") == 0) {
            snprintf(adv, sizeof(adv), "127.0.0.1");
            mp__engine_log(
                mp, MOSHPIT_LOG_WARN,
                "listening on a wildcard address without 'advertise': "
                "others are told 127.0.0.1");
        }
    }
    if (strlen(adv) > 100)
        return MOSHPIT_EINVAL;
    snprintf(mp->ctrl_ep, sizeof(mp->ctrl_ep), "tcp://%.100s:%ld", adv, port);
    snprintf(mp->data_ep, sizeof(mp->data_ep), "tcp://%.100s:%ld", adv, dport);
    snprintf(mp->endpoint, sizeof(mp->endpoint), "%s#%s", mp->ctrl_ep,
             mp->pub_txt);
    if (!mp__endpoint_addr_ok(mp->ctrl_ep) ||
        !mp__endpoint_addr_ok(mp->data_ep))
        return MOSHPIT_EINVAL;
    return mp__engine_swim_setup(mp);
}

void mp__engine_teardown(moshpit_t *mp) {
    mp__engine_state_teardown(mp);
    mp__engine_swim_teardown(mp);
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (mp->leave_linger && p->ctrl != NULL) {
            /* the DONEs, LEFT and BYE still queued there go out */
            zmq_socket_monitor(p->ctrl, NULL, 0);
            mp__net_close_linger(&p->ctrl, MP_LEAVE_LINGER_MS);
        }
        mp__engine_peer_free(p);
    }
    free(mp->peers);
    mp->peers = NULL;
    mp->npeers = 0;
    for (size_t i = 0; i < mp->nearly; i++) {
        zmq_msg_close((zmq_msg_t *)mp->early[i].msg);
        free(mp->early[i].msg);
    }
    free(mp->early);
    mp__rnd_free(mp->rnd);
    mp->rnd = NULL;
    mp->round.group = NULL;
    mp__net_close(&mp->zap);
    mp__net_close(&mp->pipe_eng);
    mp__net_close(&mp->pipe_api);
    mp__net_close(&mp->ctrl);
    mp__net_close(&mp->data);
    if (mp->zctx != NULL)
        zmq_ctx_term(mp->zctx);
    mp->zctx = NULL;
}

int mp__engine_post(moshpit_t *mp, mp_cmd_t *c) {
    mp_plat_mutex_lock(&mp->lock);
    mp->cmd_posted = c;
    mp_plat_mutex_unlock(&mp->lock);
    char wake = 1;
    if (zmq_send(mp->pipe_api, &wake, sizeof(wake), 0) != (int)sizeof(wake)) {
        int e = errno != 0 ? errno : EIO;
        /* not taken (no wake-up was sent): withdraw it; taken after all:
         * the engine answers it like any other */
        mp_plat_mutex_lock(&mp->lock);
        bool withdrawn = mp->cmd_posted == c;
        if (withdrawn)
            mp->cmd_posted = NULL;
        mp_plat_mutex_unlock(&mp->lock);
        return withdrawn ? e : 0;
    }
    return 0;
}
