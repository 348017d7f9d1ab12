/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the engine thread of one peer: the ZeroMQ event loop that feeds
 * the sans-IO core (matchmaker, joiner, group all-reduce) with messages and
 * time, and carries out what the core decides. It owns every socket:
 *   - pipe:  commands from API calls (inproc PAIR);
 *   - zap:   ZAP handler authenticating CURVE clients (authorized_keys);
 *   - ctrl:  ROUTER, CURVE server, receives control messages from peers;
 *   - data:  ROUTER receiving sealed data frames;
 *   - per peer: a CURVE DEALER (control, with a monitor) and a data DEALER.
 * Every peer sends on its own DEALERs, so the ROUTER side always knows the
 * CURVE-authenticated sender of a control message (ZAP User-Id).
 */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/share.h"
#include "net/net.h"

#define GOSSIP_MS 1000u
#define HELLO_RETRY_MS 1000u
#define HELLO_TRIES_MAX 20u
#define DEAD_RETRY_MS 10000u
#define ROUND_MARGIN_MS 100u
#define POLL_MAX_MS 1000
#define BATCH 64

_Static_assert(sizeof(zmq_msg_t) <= 64, "zmq_msg_t storage");

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

static uint64_t now_ms(void) {
    return mp_plat_clock_ms();
}

static uint64_t rng_next(moshpit_t *mp) {
    /* splitmix64: only used for choosing gossip targets */
    uint64_t z = (mp->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static zmq_msg_t *stash_of(mp_peer_t *p) {
    return (zmq_msg_t *)(void *)p->stash_msg;
}

static void update_members(moshpit_t *mp) {
    size_t live = 1;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->state == MP_PEER_LIVE)
            live++;
    mp_plat_mutex_lock(&mp->lock);
    if (mp->members_live != live) {
        mp->members_live = live;
        mp_plat_cond_broadcast(&mp->cond);
    }
    mp_plat_mutex_unlock(&mp->lock);
}

static mp_peer_t *find_peer(moshpit_t *mp, const uint8_t id[32]) {
    for (size_t i = 0; i < mp->npeers; i++)
        if (memcmp(mp->peers[i]->id, id, 32) == 0)
            return mp->peers[i];
    return NULL;
}

static mp_peer_t *find_peer_by_tag(moshpit_t *mp, uint64_t tag) {
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->my_tag == tag && mp->peers[i]->keys != NULL)
            return mp->peers[i];
    return NULL;
}

static bool is_self(const moshpit_t *mp, const uint8_t id[32]) {
    return memcmp(mp->pub, id, 32) == 0;
}

static bool authorized(const moshpit_t *mp, const uint8_t id[32]) {
    if (mp->auth_n == 0 || is_self(mp, id))
        return true;
    for (size_t i = 0; i < mp->auth_n; i++)
        if (memcmp(mp->auth[i], id, 32) == 0)
            return true;
    return false;
}

static void stash_drop(mp_peer_t *p) {
    if (p->stash_full) {
        zmq_msg_close(stash_of(p));
        p->stash_full = false;
    }
}

static void peer_close(mp_peer_t *p) {
    stash_drop(p);
    if (p->ctrl != NULL)
        zmq_socket_monitor(p->ctrl, NULL, 0);
    mp__net_close(&p->mon);
    mp__net_close(&p->ctrl);
    mp__net_close(&p->data);
    mp__session_keys_free(p->keys);
    p->keys = NULL;
    p->hello_recv = false;
    p->rx_counter = 0;
}

/* ------------------------------------------------------------------ */
/* control messages                                                    */

static void send_msg(moshpit_t *mp, mp_peer_t *p, const mp_msg_t *m) {
    size_t len = 0;
    if (p->ctrl == NULL)
        return;
    moshpit_err_t e = mp__msg_encode(m, mp->msgbuf, MP_CTRL_MAX, &len);
    if (e != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_ERROR, "encode of message type %d failed: %s",
                (int)m->type, moshpit_strerror(e));
        return;
    }
    if (zmq_send(p->ctrl, mp->msgbuf, len, ZMQ_DONTWAIT) < 0)
        mp__log(mp, MOSHPIT_LOG_DEBUG, "control message to %.8s dropped: %s",
                p->id_txt, zmq_strerror(errno));
    else if (mp->round.cmd != NULL)
        mp->round.bytes_sent += len;
}

static void send_hello(moshpit_t *mp, mp_peer_t *p, bool reply) {
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_HELLO;
    mp_hello_t *h = &m->u.hello;
    memcpy(h->swarm, mp->swarm_hash, 32);
    memcpy(h->eph, mp->eph_pub, 32);
    if (mp->swarm_secret != NULL) {
        mp__crypto_admit_proof(mp->swarm_secret, mp->swarm_hash, mp->pub, p->id,
                               mp->eph_pub, h->proof);
        h->has_proof = 1;
    }
    h->reply = reply ? 1 : 0;
    h->tag = p->my_tag;
    h->bandwidth = mp->cfg.bandwidth_mbps;
    h->ciphers = mp->ciphers;
    snprintf(h->ctrl_addr, sizeof(h->ctrl_addr), "%s", mp->ctrl_ep);
    snprintf(h->data_addr, sizeof(h->data_addr), "%s", mp->data_ep);
    send_msg(mp, p, m);
}

static void send_simple(moshpit_t *mp, mp_peer_t *p, mp_msg_type_t t,
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
    send_msg(mp, p, m);
}

/* Sends up to MP_PEERS_MAX live peers to p (all of them but p itself when
 * only is NULL; just `only` otherwise). */
static void send_peers(moshpit_t *mp, mp_peer_t *p, const mp_peer_t *only) {
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_PEERS;
    mp_peers_t *ps = &m->u.peers;
    if (only != NULL) {
        memcpy(ps->peers[0].id, only->id, 32);
        snprintf(ps->peers[0].addr, MP_ADDR_MAX, "%s", only->ctrl_addr);
        ps->n = 1;
    } else {
        size_t start = mp->npeers ? (size_t)(rng_next(mp) % mp->npeers) : 0;
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
        send_msg(mp, p, m);
}

/* ------------------------------------------------------------------ */
/* peers                                                               */

static moshpit_err_t peer_connect(moshpit_t *mp, mp_peer_t *p) {
    char mon_ep[64];
    if (p->ctrl != NULL)
        return MOSHPIT_OK;
    snprintf(mon_ep, sizeof(mon_ep), "inproc://moshpit-mon-%u", ++mp->mon_seq);
    p->ctrl = mp__net_ctrl_dealer(mp->zctx, p->ctrl_addr, p->id, mp->pub,
                                  mp->sec, mon_ep, &p->mon);
    if (p->ctrl == NULL) {
        mp__log(mp, MOSHPIT_LOG_WARN, "cannot dial %s: %s", p->ctrl_addr,
                zmq_strerror(errno));
        return MOSHPIT_ESYS;
    }
    return MOSHPIT_OK;
}

static mp_peer_t *peer_add(moshpit_t *mp, const uint8_t id[32],
                           const char *addr) {
    if (mp->npeers >= MP_PEERS_CAP) {
        mp__log(mp, MOSHPIT_LOG_WARN, "peer table full (%u), ignoring peer",
                MP_PEERS_CAP);
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
    p->state = MP_PEER_NEW;
    p->state_since_ms = now_ms();
    mp->peers[mp->npeers++] = p;
    return p;
}

static void round_peer_failed(moshpit_t *mp, mp_peer_t *p);

static void peer_set_state(moshpit_t *mp, mp_peer_t *p, mp_peer_state_t s,
                           const char *why) {
    if (p->state == s)
        return;
    mp_peer_state_t old = p->state;
    p->state = s;
    p->state_since_ms = now_ms();
    mp__log(mp, s == MP_PEER_LIVE ? MOSHPIT_LOG_INFO : MOSHPIT_LOG_WARN,
            "peer %.8s: %s (%s)", p->id_txt,
            s == MP_PEER_LIVE   ? "live"
            : s == MP_PEER_DEAD ? "dead"
            : s == MP_PEER_NEW  ? "new"
                                : "refused",
            why);
    if (s == MP_PEER_DEAD || s == MP_PEER_REFUSED) {
        if (old == MP_PEER_LIVE || old == MP_PEER_NEW)
            round_peer_failed(mp, p);
        for (uint32_t i = 0; i < MP_MM_KEYS; i++)
            if (mp->mms[i].mm != NULL)
                mp__mm_on_leave(mp->mms[i].mm, p->id);
        peer_close(p);
    }
    update_members(mp);
}

/* Learned of a peer (bootstrap or gossip): dial it and say hello. */
static void peer_learn(moshpit_t *mp, const uint8_t id[32], const char *addr) {
    if (is_self(mp, id) || !authorized(mp, id) || !mp__net_addr_ok(addr))
        return;
    mp_peer_t *p = find_peer(mp, id);
    uint64_t now = now_ms();
    if (p == NULL) {
        p = peer_add(mp, id, addr);
        if (p == NULL)
            return;
    } else if (p->state == MP_PEER_DEAD &&
               now - p->state_since_ms >= DEAD_RETRY_MS) {
        snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", addr);
        p->state = MP_PEER_NEW;
        p->state_since_ms = now;
        p->hello_tries = 0;
    } else {
        return;
    }
    if (peer_connect(mp, p) == MOSHPIT_OK) {
        send_hello(mp, p, false);
        p->hello_tries = 1;
        p->next_hello_ms = now + HELLO_RETRY_MS;
    }
}

static void on_hello(moshpit_t *mp, mp_peer_t *p, const uint8_t id[32],
                     const mp_hello_t *h) {
    if (memcmp(h->swarm, mp->swarm_hash, 32) != 0) {
        mp__log(mp, MOSHPIT_LOG_WARN, "HELLO from another swarm, refused");
        if (p != NULL && p->state != MP_PEER_REFUSED)
            peer_set_state(mp, p, MP_PEER_REFUSED, "different swarm");
        return;
    }
    if (mp->swarm_secret != NULL) {
        uint8_t want[32];
        mp__crypto_admit_proof(mp->swarm_secret, mp->swarm_hash, id, mp->pub,
                               h->eph, want);
        bool ok = h->has_proof && mp__crypto_equal32(want, h->proof);
        mp__crypto_wipe(want, sizeof(want));
        if (!ok) {
            char txt[41];
            zmq_z85_encode(txt, id, 32);
            mp__log(mp, MOSHPIT_LOG_WARN,
                    "peer %.8s failed swarm_secret admission, refused", txt);
            if (p == NULL)
                p = peer_add(mp, id, "");
            if (p != NULL) {
                /* remember the refusal; tell it once if we can dial it */
                if (p->ctrl == NULL && mp__net_addr_ok(h->ctrl_addr)) {
                    snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s",
                             h->ctrl_addr);
                    if (peer_connect(mp, p) == MOSHPIT_OK)
                        send_simple(mp, p, MP_MSG_REFUSE, MOSHPIT_EPEERAUTH);
                }
                peer_set_state(mp, p, MP_PEER_REFUSED, "bad admission proof");
            }
            return;
        }
    }
    if (!mp__net_addr_ok(h->ctrl_addr) || !mp__net_addr_ok(h->data_addr)) {
        mp__log(mp, MOSHPIT_LOG_WARN, "HELLO with unusable addresses dropped");
        return;
    }
    uint32_t cipher = mp__crypto_pick_cipher(mp->ciphers, h->ciphers);
    if (cipher == 0 || h->tag == 0) {
        mp__log(mp, MOSHPIT_LOG_WARN, "HELLO with no common cipher dropped");
        return;
    }
    if (p == NULL) {
        p = peer_add(mp, id, h->ctrl_addr);
        if (p == NULL)
            return;
    }
    if (p->state == MP_PEER_REFUSED) {
        /* a peer that restarted with the right secret may come back */
        p->state = MP_PEER_NEW;
    }
    bool rekey = p->keys == NULL || memcmp(p->eph, h->eph, 32) != 0;
    bool was_live = p->state == MP_PEER_LIVE;
    if (rekey && was_live) {
        /* it restarted: the old session is gone */
        peer_set_state(mp, p, MP_PEER_DEAD, "restarted");
        p->state = MP_PEER_NEW;
        was_live = false;
    }
    if (strcmp(p->ctrl_addr, h->ctrl_addr) != 0 && p->ctrl != NULL &&
        !was_live) {
        peer_close(p);
    }
    snprintf(p->ctrl_addr, sizeof(p->ctrl_addr), "%s", h->ctrl_addr);
    if (peer_connect(mp, p) != MOSHPIT_OK)
        return;
    if (rekey) {
        mp__session_keys_free(p->keys);
        p->keys = NULL;
        if (mp__session_keys_new(cipher, mp->pub, mp->eph_sec, mp->eph_pub, id,
                                 h->eph, &p->keys) != MOSHPIT_OK) {
            mp__log(mp, MOSHPIT_LOG_WARN, "session keys for %.8s failed",
                    p->id_txt);
            return;
        }
        memcpy(p->eph, h->eph, 32);
        p->tx_counter = 0;
        p->rx_counter = 0;
    }
    p->their_tag = h->tag;
    p->bandwidth = h->bandwidth;
    p->ciphers = h->ciphers;
    if (p->data == NULL || strcmp(p->data_addr, h->data_addr) != 0) {
        mp__net_close(&p->data);
        stash_drop(p);
        snprintf(p->data_addr, sizeof(p->data_addr), "%s", h->data_addr);
        p->data = mp__net_data_dealer(mp->zctx, p->data_addr);
        if (p->data == NULL) {
            mp__log(mp, MOSHPIT_LOG_WARN, "cannot dial data %s", p->data_addr);
            return;
        }
    }
    p->hello_recv = true;
    if (!h->reply)
        send_hello(mp, p, true);
    if (!was_live) {
        peer_set_state(mp, p, MP_PEER_LIVE, "session established");
        if (!h->reply) {
            /* a newcomer dialled us: give it our view, tell the others */
            send_peers(mp, p, NULL);
            for (size_t i = 0; i < mp->npeers; i++)
                if (mp->peers[i] != p && mp->peers[i]->state == MP_PEER_LIVE)
                    send_peers(mp, mp->peers[i], p);
        }
    }
}

/* ------------------------------------------------------------------ */
/* rounds                                                              */

static void complete_cmd(moshpit_t *mp, mp_cmd_t *c, moshpit_err_t e) {
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
static void early_free_at(moshpit_t *mp, size_t i) {
    zmq_msg_close((zmq_msg_t *)mp->early[i].msg);
    free(mp->early[i].msg);
    mp->early_bytes -= mp->early[i].bytes;
    memmove(&mp->early[i], &mp->early[i + 1],
            (mp->nearly - i - 1) * sizeof(mp->early[0]));
    mp->nearly--;
}

static void withdraw_join(moshpit_t *mp);

static void round_end(moshpit_t *mp, moshpit_err_t e, bool alone) {
    mp_round_t *r = &mp->round;
    mp_cmd_t *c = r->cmd;
    if (r->group == NULL)
        withdraw_join(mp);
    uint64_t now = now_ms();
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
    if (r->gid != 0)
        remember_gid(mp, r->gid);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL)
            stash_drop(r->members[i]);
    mp__group_free(r->group);
    mp__joiner_free(r->joiner);
    memset(r, 0, sizeof(*r));
    /* frames held for that round are useless now */
    for (size_t i = 0; i < mp->nearly;)
        if (recent_gid(mp, mp->early[i].round_id))
            early_free_at(mp, i);
        else
            i++;
    complete_cmd(mp, c, e);
}

static void round_peer_failed(moshpit_t *mp, mp_peer_t *p) {
    mp_round_t *r = &mp->round;
    if (r->cmd == NULL)
        return;
    if (r->joiner != NULL && r->group == NULL)
        mp__joiner_on_peer_failed(r->joiner, p->id);
    if (r->group != NULL)
        for (uint32_t i = 0; i < r->n; i++)
            if (r->members[i] == p) {
                mp__group_on_member_failed(r->group, now_ms(), i);
                stash_drop(p);
            }
}

static void process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                          size_t len, const mp_data_hdr_t *h);

static void start_group(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__joiner_group(r->joiner, &n, &self, &gid);
    uint64_t now = now_ms();
    r->n = n;
    r->self = self;
    r->gid = gid;
    for (uint32_t i = 0; i < n; i++) {
        r->weights[i] = m[i].weight;
        r->bws[i] = m[i].bandwidth;
        r->members[i] = i == self ? NULL : find_peer(mp, m[i].id);
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
    moshpit_err_t e = mp__group_new(&gc, &r->group);
    if (e != MOSHPIT_OK) {
        round_end(mp, e, true);
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
            mp_peer_t *p = find_peer_by_tag(mp, h.tag);
            if (p != NULL)
                process_frame(mp, p, buf, len, &h);
        }
        early_free_at(mp, i);
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
    if (is_self(mp, r->join_to)) {
        for (uint32_t i = 0; i < MP_MM_KEYS; i++)
            if (mp->mms[i].mm != NULL)
                mp__mm_on_leave(mp->mms[i].mm, mp->pub);
        return;
    }
    mp_peer_t *p = find_peer(mp, r->join_to);
    if (p == NULL || p->state != MP_PEER_LIVE)
        return;
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_LEAVE;
    m->u.leave.seq = r->join_seq;
    send_msg(mp, p, m);
}

static void pump_joiner(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    mp_join_send_t s;
    while (r->joiner != NULL && r->group == NULL &&
           mp__joiner_next_send(r->joiner, &s)) {
        withdraw_join(mp);
        memcpy(r->join_to, s.to, 32);
        r->join_seq = s.seq;
        r->join_pending = true;
        if (is_self(mp, s.to)) {
            local_join(mp, &s);
            continue;
        }
        mp_peer_t *p = find_peer(mp, s.to);
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
        send_msg(mp, p, m);
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
        round_end(mp, MOSHPIT_OK, true);
        break;
    default:
        break;
    }
}

static void start_round(moshpit_t *mp, mp_cmd_t *c) {
    mp_round_t *r = &mp->round;
    uint64_t now = now_ms();
    memset(r, 0, sizeof(*r));
    r->cmd = c;
    r->start_ms = now;
    r->deadline_ms = now + mp->cfg.round_timeout_ms - ROUND_MARGIN_MS;
    /* peers only group with peers averaging vectors of the same length */
    uint64_t cnt = (uint64_t)c->count;
    for (int i = 0; i < 8; i++)
        r->key[i] = (uint8_t)(cnt >> (8 * i));
    r->key_len = 8;

    size_t n = 1;
    for (size_t i = 0; i < mp->npeers; i++)
        n += mp->peers[i]->state == MP_PEER_LIVE;
    uint8_t(*ids)[32] = malloc(n * 32);
    uint8_t(*ordered)[32] = malloc(n * 32);
    uint32_t *order = malloc(n * sizeof(*order));
    moshpit_err_t e = MOSHPIT_ENOMEM;
    if (ids != NULL && ordered != NULL && order != NULL) {
        size_t k = 0;
        memcpy(ids[k++], mp->pub, 32);
        for (size_t i = 0; i < mp->npeers; i++)
            if (mp->peers[i]->state == MP_PEER_LIVE)
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
        round_end(mp, e, true);
        return;
    }
    pump_joiner(mp);
}

/* ------------------------------------------------------------------ */
/* matchmaker side                                                     */

static mp_mm_t *mm_for_key(moshpit_t *mp, const uint8_t *key, uint32_t len) {
    uint64_t now = now_ms();
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

static void poll_mm(moshpit_t *mp, mp_mm_t *mm, uint64_t now) {
    mp_mm_out_t *o = mp->mm_out; /* not re-entered: see pump_joiner below */
    bool touched_self = false;
    while (mp__mm_poll(mm, now, o)) {
        if (o->kind == MP_MM_GROUP) {
            mp__log(mp, MOSHPIT_LOG_DEBUG, "matchmaker: group of %u formed",
                    o->n);
            mp_msg_t *m = mp->msg;
            for (uint32_t i = 0; i < o->n; i++) {
                if (is_self(mp, o->members[i].id)) {
                    deliver_group_to_self(mp, o, o->members[i].seq);
                    touched_self = true;
                    continue;
                }
                mp_peer_t *p = find_peer(mp, o->members[i].id);
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
                send_msg(mp, p, m);
            }
        } else if (o->kind == MP_MM_ALONE) {
            if (is_self(mp, o->members[0].id)) {
                deliver_group_to_self(mp, o, o->members[0].seq);
                touched_self = true;
            } else {
                mp_peer_t *p = find_peer(mp, o->members[0].id);
                if (p != NULL && p->state == MP_PEER_LIVE)
                    send_simple(mp, p, MP_MSG_ALONE, o->members[0].seq);
            }
        }
    }
    if (touched_self)
        pump_joiner(mp);
}

static void local_join(moshpit_t *mp, const mp_join_send_t *s) {
    mp_round_t *r = &mp->round;
    mp_mm_t *mm = mm_for_key(mp, r->key, r->key_len);
    mp_member_t me;
    memcpy(me.id, mp->pub, 32);
    me.weight = r->cmd->weight;
    me.bandwidth = mp->cfg.bandwidth_mbps;
    me.seq = s->seq;
    uint64_t now = now_ms();
    if (mm == NULL || !mp__mm_on_join(mm, now, &me, s->window_ms)) {
        mp__joiner_on_alone(r->joiner, mp->pub, s->seq);
        return;
    }
    mp__joiner_on_ack(r->joiner, mp->pub, s->seq);
    poll_mm(mp, mm, now);
}

static void on_join(moshpit_t *mp, mp_peer_t *p, const mp_join_t *j) {
    uint64_t now = now_ms();
    mp_mm_t *mm = mm_for_key(mp, j->key, j->key_len);
    mp_member_t m;
    memcpy(m.id, p->id, 32);
    m.weight = j->weight;
    m.bandwidth = j->bandwidth;
    m.seq = j->seq;
    if (mm == NULL || !mp__mm_on_join(mm, now, &m, j->window_ms)) {
        send_simple(mp, p, MP_MSG_ALONE, j->seq);
        return;
    }
    send_simple(mp, p, MP_MSG_JOIN_ACK, j->seq);
    poll_mm(mp, mm, now);
}

/* ------------------------------------------------------------------ */
/* data plane                                                          */

static void process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                          size_t len, const mp_data_hdr_t *h) {
    mp_round_t *r = &mp->round;
    uint32_t from = UINT32_MAX;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] == p)
            from = i;
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
    mp_part_status_t st =
        mp__group_on_part(r->group, now_ms(), from, (mp_part_kind_t)h->kind,
                          h->share, h->part, mp->scratch, h->count, h->wsum);
    if (st != MP_PART_OK && st != MP_PART_DUP && st != MP_PART_LATE)
        mp__log(mp, MOSHPIT_LOG_WARN, "part from %.8s rejected (status %d)%s",
                p->id_txt, (int)st,
                st == MP_PART_NONFINITE ? ": non-finite values, member dropped"
                                        : "");
}

static void on_data_msg(moshpit_t *mp, zmq_msg_t *zm) {
    const uint8_t *buf = zmq_msg_data(zm);
    size_t len = zmq_msg_size(zm);
    mp_data_hdr_t h;
    if (mp__data_hdr_decode(buf, len, &h) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "malformed data frame dropped");
        return;
    }
    mp_peer_t *p = find_peer_by_tag(mp, h.tag);
    if (p == NULL || p->state != MP_PEER_LIVE) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "data frame with unknown tag dropped");
        return;
    }
    mp_round_t *r = &mp->round;
    if (r->group != NULL && h.round_id == r->gid) {
        process_frame(mp, p, buf, len, &h);
        return;
    }
    if (recent_gid(mp, h.round_id))
        return;
    /* maybe a round we are about to start: hold it (bounded) */
    if (mp->nearly >= MP_EARLY_MAX_FRAMES ||
        mp->early_bytes + len > MP_EARLY_MAX_BYTES) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "early frame dropped (buffer full)");
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
    mp->early[mp->nearly].round_id = h.round_id;
    mp->early[mp->nearly].arrived_ms = now_ms();
    mp->early[mp->nearly].msg = held;
    mp->early[mp->nearly].bytes = len;
    mp->early_bytes += len;
    mp->nearly++;
}

static bool seal_part(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s) {
    size_t plen = (size_t)s->count * 4u;
    size_t total = MP_DATA_HDR_BYTES + plen + MP_DATA_TAG_BYTES;
    zmq_msg_t *zm = stash_of(p);
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

/* Moves as many parts to the sockets as they take. Returns true if some
 * member's socket is full (the loop must poll it for POLLOUT). */
static void pump_sends(moshpit_t *mp) {
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
                stash_drop(p);
                continue;
            }
            if (!p->stash_full) {
                mp_send_t s;
                if (!mp__group_next_send(r->group, i, &s))
                    continue;
                if (!seal_part(mp, p, &s)) {
                    mp__log(mp, MOSHPIT_LOG_ERROR, "sealing a part failed");
                    continue;
                }
            }
            if (zmq_msg_send(stash_of(p), p->data, ZMQ_DONTWAIT) >= 0) {
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

static void round_progress(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->cmd == NULL)
        return;
    uint64_t now = now_ms();
    if (r->group == NULL && r->joiner != NULL) {
        mp__joiner_on_tick(r->joiner, now);
        pump_joiner(mp);
        if (r->cmd == NULL)
            return;
    }
    if (r->group != NULL) {
        mp__group_on_tick(r->group, now);
        pump_sends(mp);
        if (round_finished(mp) || now >= r->deadline_ms + ROUND_MARGIN_MS)
            round_end(mp, MOSHPIT_OK, false);
    } else if (now >= r->deadline_ms + ROUND_MARGIN_MS) {
        round_end(mp, MOSHPIT_OK, true);
    }
}

/* ------------------------------------------------------------------ */
/* socket readers                                                      */

static void on_ctrl(moshpit_t *mp) {
    zmq_msg_t rid, body;
    zmq_msg_init(&rid);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&rid, mp->ctrl, ZMQ_DONTWAIT) < 0)
        goto out;
    if (!zmq_msg_more(&rid) || zmq_msg_recv(&body, mp->ctrl, ZMQ_DONTWAIT) < 0)
        goto out;
    while (zmq_msg_more(&body)) { /* we never send multipart: drain */
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        int rc = zmq_msg_recv(&extra, mp->ctrl, ZMQ_DONTWAIT);
        zmq_msg_close(&extra);
        if (rc < 0)
            goto out;
        zmq_msg_close(&body);
        zmq_msg_init(&body);
        mp__log(mp, MOSHPIT_LOG_WARN, "multipart control message dropped");
        goto out;
    }
    const char *uid = zmq_msg_gets(&body, "User-Id");
    uint8_t id[32];
    if (uid == NULL || strlen(uid) != 40 || zmq_z85_decode(id, uid) == NULL) {
        mp__log(mp, MOSHPIT_LOG_WARN, "control message without identity");
        goto out;
    }
    if (mp->round.cmd != NULL)
        mp->round.bytes_received += zmq_msg_size(&body);
    mp_msg_t *m = mp->msg;
    moshpit_err_t e =
        mp__msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), m);
    if (e != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "malformed control message from %.8s dropped", uid);
        goto out;
    }
    mp_peer_t *p = find_peer(mp, id);
    if (m->type == MP_MSG_HELLO) {
        mp_hello_t h = m->u.hello; /* m is reused by replies */
        on_hello(mp, p, id, &h);
        goto out;
    }
    if (p == NULL)
        goto out;
    if (m->type == MP_MSG_REFUSE) {
        mp__log(mp, MOSHPIT_LOG_WARN, "peer %.8s refused us", p->id_txt);
        peer_set_state(mp, p, MP_PEER_REFUSED, "it refused us");
        goto out;
    }
    if (p->state != MP_PEER_LIVE)
        goto out;
    mp_round_t *r = &mp->round;
    switch (m->type) {
    case MP_MSG_PEERS: {
        mp_peers_t *ps = malloc(sizeof(*ps));
        if (ps == NULL)
            break;
        *ps = m->u.peers;
        for (uint32_t i = 0; i < ps->n; i++)
            peer_learn(mp, ps->peers[i].id, ps->peers[i].addr);
        free(ps);
        break;
    }
    case MP_MSG_JOIN: {
        mp_join_t j = m->u.join;
        on_join(mp, p, &j);
        break;
    }
    case MP_MSG_JOIN_ACK:
        if (r->joiner != NULL && r->group == NULL)
            mp__joiner_on_ack(r->joiner, p->id, m->u.ack.seq);
        break;
    case MP_MSG_GROUP:
        if (r->joiner != NULL && r->group == NULL) {
            if (!mp__joiner_on_group(r->joiner, p->id, m->u.group.seq,
                                     m->u.group.group_id, m->u.group.members,
                                     m->u.group.n, mp->pub))
                mp__log(mp, MOSHPIT_LOG_DEBUG, "stale or invalid GROUP");
            pump_joiner(mp);
        }
        break;
    case MP_MSG_ALONE:
        if (r->joiner != NULL && r->group == NULL) {
            mp__joiner_on_alone(r->joiner, p->id, m->u.alone.seq);
            pump_joiner(mp);
        }
        break;
    case MP_MSG_LEAVE:
        for (uint32_t i = 0; i < MP_MM_KEYS; i++)
            if (mp->mms[i].mm != NULL)
                mp__mm_on_leave(mp->mms[i].mm, p->id);
        break;
    case MP_MSG_BYE:
        peer_set_state(mp, p, MP_PEER_DEAD, "left");
        break;
    default:
        break;
    }
out:
    zmq_msg_close(&rid);
    zmq_msg_close(&body);
}

static void on_data(moshpit_t *mp) {
    zmq_msg_t rid, body;
    zmq_msg_init(&rid);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&rid, mp->data, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&rid) &&
        zmq_msg_recv(&body, mp->data, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_more(&body)) {
            mp__log(mp, MOSHPIT_LOG_WARN, "multipart data message dropped");
            while (zmq_msg_more(&body) &&
                   zmq_msg_recv(&body, mp->data, ZMQ_DONTWAIT) >= 0) {
            }
        } else {
            on_data_msg(mp, &body);
        }
    }
    zmq_msg_close(&rid);
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
        if (authorized(mp, key)) {
            status = "200";
            zmq_z85_encode(uid, key, 32);
        } else {
            char txt[41];
            zmq_z85_encode(txt, key, 32);
            mp__log(mp, MOSHPIT_LOG_WARN,
                    "connection from unauthorized key %.8s refused", txt);
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

static void on_monitor(moshpit_t *mp, mp_peer_t *p) {
    mp_net_event_t ev;
    while (p->mon != NULL && mp__net_read_event(p->mon, &ev) == 0) {
        switch (ev) {
        case MP_NET_EV_DOWN:
            if (p->state == MP_PEER_LIVE)
                peer_set_state(mp, p, MP_PEER_DEAD, "disconnected");
            return; /* sockets may be gone */
        case MP_NET_EV_AUTH_FAILED:
            peer_set_state(mp, p, MP_PEER_REFUSED, "it refused our key");
            return;
        case MP_NET_EV_PROTO_FAILED:
            mp__log(mp, MOSHPIT_LOG_WARN,
                    "handshake with %.8s at %s failed (wrong key?)", p->id_txt,
                    p->ctrl_addr);
            break;
        default:
            break;
        }
    }
}

static void on_command(moshpit_t *mp) {
    mp_cmd_t *c = NULL;
    int rc = zmq_recv(mp->pipe_eng, &c, sizeof(c), ZMQ_DONTWAIT);
    if (rc != (int)sizeof(c) || c == NULL)
        return;
    if (c->type == MP_CMD_CLOSE) {
        mp_msg_t *m = mp->msg;
        memset(m, 0, sizeof(*m));
        m->type = MP_MSG_BYE;
        for (size_t i = 0; i < mp->npeers; i++)
            if (mp->peers[i]->state == MP_PEER_LIVE)
                send_msg(mp, mp->peers[i], m);
        if (mp->round.cmd != NULL)
            round_end(mp, MOSHPIT_ECLOSED, true);
        mp->stopping = true;
        complete_cmd(mp, c, MOSHPIT_OK);
        return;
    }
    if (mp->round.cmd != NULL) { /* cannot happen: calls are serialized */
        complete_cmd(mp, c, MOSHPIT_EINVAL);
        return;
    }
    start_round(mp, c);
}

/* ------------------------------------------------------------------ */
/* the loop                                                            */

static void housekeeping(moshpit_t *mp, uint64_t now) {
    if (now >= mp->next_gossip_ms) {
        mp->next_gossip_ms = now + GOSSIP_MS;
        size_t live = 0;
        for (size_t i = 0; i < mp->npeers; i++)
            live += mp->peers[i]->state == MP_PEER_LIVE;
        if (live > 0) {
            size_t pick = (size_t)(rng_next(mp) % live);
            for (size_t i = 0; i < mp->npeers; i++)
                if (mp->peers[i]->state == MP_PEER_LIVE && pick-- == 0) {
                    send_peers(mp, mp->peers[i], NULL);
                    break;
                }
        }
        /* held frames of rounds that never came */
        for (size_t i = 0; i < mp->nearly;)
            if (now - mp->early[i].arrived_ms > mp->cfg.round_timeout_ms)
                early_free_at(mp, i);
            else
                i++;
    }
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state != MP_PEER_NEW || p->ctrl == NULL || p->hello_recv ||
            now < p->next_hello_ms)
            continue;
        if (p->hello_tries >= HELLO_TRIES_MAX) {
            peer_set_state(mp, p, MP_PEER_DEAD, "no answer to HELLO");
            continue;
        }
        send_hello(mp, p, false);
        p->hello_tries++;
        p->next_hello_ms = now + HELLO_RETRY_MS;
    }
    for (uint32_t i = 0; i < MP_MM_KEYS; i++)
        if (mp->mms[i].mm != NULL && mp__mm_next_wakeup(mp->mms[i].mm) <= now)
            poll_mm(mp, mp->mms[i].mm, now);
}

static uint64_t next_wakeup(moshpit_t *mp) {
    uint64_t w = mp->next_gossip_ms;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->state == MP_PEER_NEW &&
            mp->peers[i]->next_hello_ms < w && !mp->peers[i]->hello_recv)
            w = mp->peers[i]->next_hello_ms;
    for (uint32_t i = 0; i < MP_MM_KEYS; i++)
        if (mp->mms[i].mm != NULL) {
            uint64_t t = mp__mm_next_wakeup(mp->mms[i].mm);
            w = t < w ? t : w;
        }
    mp_round_t *r = &mp->round;
    if (r->cmd != NULL) {
        uint64_t t = r->deadline_ms + ROUND_MARGIN_MS;
        w = t < w ? t : w;
        if (r->group != NULL) {
            t = mp__group_next_wakeup(r->group);
        } else if (r->joiner != NULL) {
            t = mp__joiner_next_wakeup(r->joiner);
        }
        w = t < w ? t : w;
    }
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
        round_end(mp, MOSHPIT_ETIMEDOUT, true);
}

void mp__engine_main(void *arg) {
    moshpit_t *mp = arg;
    zmq_pollitem_t *items = NULL;
    mp_peer_t **item_peer = NULL;
    size_t items_cap = 0;

    /* dial the bootstrap peers */
    for (size_t i = 0; i < mp->bootstrap_n; i++) {
        char addr[MP_ADDR_MAX];
        uint8_t key[32];
        if (mp__parse_endpoint(mp->bootstrap[i], addr, sizeof(addr), key) ==
            MOSHPIT_OK)
            peer_learn(mp, key, addr);
    }
    update_members(mp);

    while (!mp->stopping) {
        uint64_t now = now_ms();
        housekeeping(mp, now);
        round_progress(mp);
        check_cancel(mp);

        size_t need = 4 + 2 * mp->npeers;
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
        size_t n = 0;
        items[n++] = (zmq_pollitem_t){mp->pipe_eng, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){mp->zap, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){mp->ctrl, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){mp->data, 0, ZMQ_POLLIN, 0};
        for (size_t i = 0; i < mp->npeers; i++) {
            mp_peer_t *p = mp->peers[i];
            if (p->mon != NULL) {
                item_peer[n] = p;
                items[n++] = (zmq_pollitem_t){p->mon, 0, ZMQ_POLLIN, 0};
            }
            if (p->stash_full && p->data != NULL) {
                item_peer[n] = p;
                items[n++] = (zmq_pollitem_t){p->data, 0, ZMQ_POLLOUT, 0};
            }
        }
        now = now_ms();
        uint64_t w = next_wakeup(mp);
        long timeout = w <= now                ? 0
                       : w - now > POLL_MAX_MS ? POLL_MAX_MS
                                               : (long)(w - now);
        int rc = zmq_poll(items, (int)n, timeout);
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
            pump_sends(mp);
            int ev = 0;
            size_t sz = sizeof(ev);
            if (zmq_getsockopt(mp->data, ZMQ_EVENTS, &ev, &sz) != 0 ||
                !(ev & ZMQ_POLLIN))
                break;
        }
        /* monitors may close sockets: look peers up again by item */
        for (size_t i = 4; i < n; i++)
            if ((items[i].revents & ZMQ_POLLIN) && item_peer[i]->mon != NULL &&
                items[i].socket == item_peer[i]->mon)
                on_monitor(mp, item_peer[i]);
    }
    free(items);
    free(item_peer);
    mp_plat_mutex_lock(&mp->lock);
    mp->stopped = true;
    mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
}
