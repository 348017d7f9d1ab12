/* SPDX-License-Identifier: MIT */
/*
 * engine_state.c - serving and downloading state (moshpit_fetch_state):
 * the server keeps its last averaged result and answers STATE_REQ with
 * STATE_INFO or with encrypted chunks on the data plane; the client drives
 * the sans-IO download in core/fetch.c. Engine thread only.
 */
#include "engine_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/fetch.h"

#define STATE_CHUNK_ELEMS 65536u /* floats per chunk (256 KiB) */
#define STATE_WINDOW 16u         /* chunks a client keeps outstanding */
#define STATE_ACTIVE_MS 2000u    /* a client this quiet is done */
#define STATE_STALL_MS 1000u

/* ------------------------------------------------------------------ */
/* server                                                              */

static bool buf_fit(float **buf, size_t *cap, size_t count) {
    if (*cap >= count)
        return true;
    float *nb = malloc(count * sizeof(float));
    if (nb == NULL)
        return false;
    free(*buf);
    *buf = nb;
    *cap = count;
    return true;
}

/* The version of a kept state is its round's group id: members of one
 * group that all got the full result hold the same bytes under the same
 * version, so a client can resume a download from any of them. */
void mp__engine_state_round_done(moshpit_t *mp, uint64_t gid, const float *v,
                                 size_t count) {
    mp_state_srv_t *st = &mp->st;
    if (!mp->cfg.serve_state || count == 0)
        return;
    st->rounds++;
    if (!buf_fit(&st->latest, &st->latest_cap, count)) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "no memory to keep a %zu-float state to serve", count);
        st->latest_ver = 0;
        return;
    }
    memcpy(st->latest, v, count * sizeof(float));
    st->latest_n = count;
    st->latest_round = st->rounds;
    st->latest_ver = gid; /* nonzero: a group's id */
}

static size_t active_clients(const mp_state_srv_t *st, uint64_t now) {
    size_t n = 0;
    for (uint32_t i = 0; i < MP_STATE_CLIENTS_MAX; i++)
        n += st->clients[i].last_ms != 0 &&
             now - st->clients[i].last_ms < STATE_ACTIVE_MS;
    return n;
}

/* A newer result replaces the served one once no download uses it. */
static void promote(moshpit_t *mp, uint64_t now) {
    mp_state_srv_t *st = &mp->st;
    if (st->latest_ver == 0 || active_clients(st, now) > 0)
        return;
    float *tb = st->serve;
    size_t tc = st->serve_cap;
    st->serve = st->latest;
    st->serve_cap = st->latest_cap;
    st->serve_n = st->latest_n;
    st->serve_ver = st->latest_ver;
    st->serve_round = st->latest_round;
    st->latest = tb;
    st->latest_cap = tc;
    st->latest_ver = 0;
    st->digest_ok = false;
}

/* The client's slot (taken if free); NULL when the cap is reached. */
static bool client_admit(moshpit_t *mp, const uint8_t id[32], uint64_t now) {
    mp_state_srv_t *st = &mp->st;
    uint32_t cap = mp->cfg.state_clients_max;
    int free_slot = -1;
    for (uint32_t i = 0; i < MP_STATE_CLIENTS_MAX; i++) {
        bool live = st->clients[i].last_ms != 0 &&
                    now - st->clients[i].last_ms < STATE_ACTIVE_MS;
        if (live && memcmp(st->clients[i].id, id, 32) == 0) {
            st->clients[i].last_ms = now;
            return true;
        }
        if (!live && free_slot < 0)
            free_slot = (int)i;
    }
    if (free_slot < 0 || active_clients(st, now) >= cap)
        return false;
    memcpy(st->clients[free_slot].id, id, 32);
    st->clients[free_slot].last_ms = now;
    return true;
}

static void send_info(moshpit_t *mp, mp_peer_t *p, uint64_t seq, bool busy) {
    mp_state_srv_t *st = &mp->st;
    mp_msg_t *m = mp->msg;
    memset(m, 0, sizeof(*m));
    m->type = MP_MSG_STATE_INFO;
    m->u.state_info.seq = seq;
    if (!busy && st->serve_ver != 0) {
        if (!st->digest_ok) {
            mp__crypto_state_digest(st->serve, st->serve_n, st->digest);
            st->digest_ok = true;
        }
        m->u.state_info.version = st->serve_ver;
        m->u.state_info.round = st->serve_round;
        m->u.state_info.count = st->serve_n;
        memcpy(m->u.state_info.digest, st->digest, 32);
    }
    mp__engine_send_msg(mp, p, m);
}

/* Seals chunk c of the served state for p and queues it: 1 sent, 0 the
 * socket is full (try again when it takes more), -1 failed. */
static int send_chunk(moshpit_t *mp, mp_peer_t *p, uint32_t c) {
    mp_state_srv_t *st = &mp->st;
    size_t off = (size_t)c * STATE_CHUNK_ELEMS;
    size_t len = st->serve_n - off < STATE_CHUNK_ELEMS ? st->serve_n - off
                                                       : STATE_CHUNK_ELEMS;
    size_t plen = len * 4u;
    zmq_msg_t zm;
    if (zmq_msg_init_size(&zm, MP_DATA_HDR_BYTES + plen + MP_DATA_TAG_BYTES) !=
        0)
        return -1;
    uint8_t *buf = zmq_msg_data(&zm);
    mp_data_hdr_t h = {.kind = MP_PART_STATE,
                       .count = (uint32_t)len,
                       .tag = p->their_tag,
                       .counter = p->tx_counter + 1,
                       .round_id = st->serve_ver,
                       .part = c};
    mp__wire_data_hdr_encode(&h, buf);
    if (mp__session_seal(p->keys, h.counter, buf, MP_DATA_HDR_BYTES,
                         (const uint8_t *)(st->serve + off), plen,
                         buf + MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES + plen) != MOSHPIT_OK) {
        zmq_msg_close(&zm);
        return -1;
    }
    if (zmq_msg_send(&zm, p->data, ZMQ_DONTWAIT) < 0) {
        int full = errno == EAGAIN;
        zmq_msg_close(&zm);
        return full ? 0 : -1;
    }
    p->tx_counter = h.counter;
    return 1;
}

void mp__engine_state_on_req(moshpit_t *mp, mp_peer_t *p,
                             const mp_state_req_t *q) {
    mp_state_srv_t *st = &mp->st;
    uint64_t now = mp__engine_now_ms();
    if (!mp->cfg.serve_state) {
        send_info(mp, p, q->seq, true);
        return;
    }
    if (q->version == 0 || q->version != st->serve_ver)
        promote(mp, now);
    bool was_active = false;
    for (uint32_t i = 0; i < MP_STATE_CLIENTS_MAX; i++)
        was_active |= st->clients[i].last_ms != 0 &&
                      now - st->clients[i].last_ms < STATE_ACTIVE_MS &&
                      memcmp(st->clients[i].id, p->id, 32) == 0;
    if (!client_admit(mp, p->id, now)) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "state request from %.8s refused: %u downloads already",
                       p->id_txt, mp->cfg.state_clients_max);
        send_info(mp, p, q->seq, true);
        return;
    }
    if (!was_active)
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "state: serving %.8s", p->id_txt);
    if (q->version == 0 || q->version != st->serve_ver) {
        send_info(mp, p, q->seq, false);
        return;
    }
    uint64_t nchunks = (st->serve_n - 1) / STATE_CHUNK_ELEMS + 1;
    if (q->first >= nchunks)
        return;
    uint32_t end = (uint32_t)((uint64_t)q->first + q->n < nchunks
                                  ? (uint64_t)q->first + q->n
                                  : nchunks);
    /* a request right after what is owed extends it; anything else (the
     * client asking again) replaces it. Owed chunks are bounded by the
     * client's window, at most MP_STATE_GET_MAX per request. */
    if (p->st_ver == q->version && p->st_next < p->st_end &&
        q->first == p->st_end && end - p->st_next <= 4 * MP_STATE_GET_MAX) {
        p->st_end = end;
    } else {
        p->st_ver = q->version;
        p->st_next = q->first;
        p->st_end = end;
    }
    mp__engine_state_pump(mp);
}

void mp__engine_state_pump(moshpit_t *mp) {
    mp_state_srv_t *st = &mp->st;
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        p->st_blocked = false;
        if (p->st_next >= p->st_end)
            continue;
        if (p->st_ver != st->serve_ver || p->state != MP_PEER_LIVE ||
            p->data == NULL || p->keys == NULL) {
            p->st_next = p->st_end = 0; /* gone or replaced: owe nothing */
            continue;
        }
        /* chunks go behind any round frame still stashed for p (its
         * nonce is lower): never overtake it */
        while (p->st_next < p->st_end && !p->stash_full) {
            int rc = send_chunk(mp, p, p->st_next);
            if (rc <= 0) {
                if (rc == 0)
                    p->st_blocked = true;
                else
                    p->st_next = p->st_end = 0; /* the client asks again */
                break;
            }
            p->st_next++;
            if (p->st_next == 32)
                mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                               "state: 32 chunks sent to %.8s", p->id_txt);
        }
    }
}

/* ------------------------------------------------------------------ */
/* client                                                              */

static void fetch_end(moshpit_t *mp, moshpit_err_t e) {
    mp_cmd_t *c = mp->fetch_cmd;
    if (c == NULL)
        return;
    if (e == MOSHPIT_OK && mp->fetch != NULL)
        c->state_round = mp__fetch_round(mp->fetch);
    mp__fetch_free(mp->fetch);
    mp->fetch = NULL;
    mp->fetch_cmd = NULL;
    mp__engine_complete_cmd(mp, c, e);
}

static void fetch_pump(moshpit_t *mp) {
    mp_fetch_send_t s;
    while (mp->fetch != NULL && mp__fetch_next_send(mp->fetch, &s)) {
        mp_peer_t *p = mp__engine_find_peer(mp, s.to);
        if (p == NULL || p->state != MP_PEER_LIVE) {
            mp__fetch_on_server_failed(mp->fetch, mp__engine_now_ms(), s.to);
            continue;
        }
        mp_msg_t *m = mp->msg;
        memset(m, 0, sizeof(*m));
        m->type = MP_MSG_STATE_REQ;
        m->u.state_req.seq = mp->fetch_seq;
        if (s.kind == MP_FETCH_SEND_GET) {
            m->u.state_req.version = s.version;
            m->u.state_req.first = s.first;
            m->u.state_req.n = s.n;
        }
        mp__engine_send_msg(mp, p, m);
    }
}

/* Runs the download's decisions: verify, finish, fail. */
static void fetch_progress(moshpit_t *mp) {
    while (mp->fetch != NULL) {
        fetch_pump(mp);
        switch (mp__fetch_state(mp->fetch)) {
        case MP_FETCH_VERIFY: {
            uint8_t d[32];
            mp__crypto_state_digest(mp->fetch_cmd->values, mp->fetch_cmd->count,
                                    d);
            mp__fetch_verified(mp->fetch, mp__engine_now_ms(), d);
            if (mp__fetch_state(mp->fetch) == MP_FETCH_RUNNING)
                mp__engine_log(mp, MOSHPIT_LOG_WARN,
                               "downloaded state does not match its digest; "
                               "trying another server");
            continue;
        }
        case MP_FETCH_DONE:
            fetch_end(mp, MOSHPIT_OK);
            return;
        case MP_FETCH_FAILED:
            fetch_end(mp, mp__fetch_error(mp->fetch));
            return;
        default:
            return;
        }
    }
}

/* Live peers that serve state, in random order (spreads the load). */
static size_t servers(moshpit_t *mp, uint8_t (*ids)[32], size_t cap,
                      bool *pending) {
    size_t n = 0;
    *pending = false;
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->state == MP_PEER_NEW)
            *pending = true;
        if (p->state == MP_PEER_LIVE && p->serves_state && n < cap)
            memcpy(ids[n++], p->id, 32);
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(mp__engine_rng_next(mp) % i);
        uint8_t t[32];
        memcpy(t, ids[i - 1], 32);
        memcpy(ids[i - 1], ids[j], 32);
        memcpy(ids[j], t, 32);
    }
    return n;
}

/* Starts the download once a serving peer is known. */
static void fetch_try_begin(moshpit_t *mp, uint64_t now) {
    mp_cmd_t *c = mp->fetch_cmd;
    uint8_t(*ids)[32] = malloc(MP_FETCH_SERVERS * 32);
    if (ids == NULL) {
        fetch_end(mp, MOSHPIT_ENOMEM);
        return;
    }
    bool pending;
    size_t n = servers(mp, ids, MP_FETCH_SERVERS, &pending);
    if (n == 0) {
        free(ids);
        /* nobody serves, and no handshake that could change it is going
         * on: say so now rather than at the deadline */
        if (!pending)
            fetch_end(mp, MOSHPIT_ENOSTATE);
        return;
    }
    mp_fetch_cfg_t fc = {.count = c->count,
                         .chunk_elems = STATE_CHUNK_ELEMS,
                         .window = STATE_WINDOW,
                         .now_ms = now,
                         .deadline_ms = c->deadline_ms - ROUND_MARGIN_MS,
                         .stall_ms = STATE_STALL_MS,
                         .server_timeout_ms = mp->cfg.peer_timeout_ms};
    moshpit_err_t e =
        mp__fetch_new(&fc, (const uint8_t(*)[32])ids, n, &mp->fetch);
    free(ids);
    if (e != MOSHPIT_OK) {
        fetch_end(mp, e);
        return;
    }
    mp->fetch_seq++;
    fetch_progress(mp);
}

void mp__engine_state_fetch_start(moshpit_t *mp, mp_cmd_t *c) {
    if (mp->fetch_cmd != NULL) { /* cannot happen: calls are serialized */
        mp__engine_complete_cmd(mp, c, MOSHPIT_EINVAL);
        return;
    }
    mp->fetch_cmd = c;
    fetch_try_begin(mp, mp__engine_now_ms());
}

void mp__engine_state_on_info(moshpit_t *mp, mp_peer_t *p,
                              const mp_state_info_t *i) {
    if (mp->fetch == NULL || i->seq != mp->fetch_seq)
        return;
    mp__fetch_on_info(mp->fetch, mp__engine_now_ms(), p->id, i->version,
                      i->round, i->count, i->digest);
    fetch_progress(mp);
}

void mp__engine_state_on_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                               size_t len, const mp_data_hdr_t *h) {
    size_t off;
    if (mp->fetch == NULL ||
        !mp__fetch_chunk_wanted(mp->fetch, p->id, h->round_id, h->part,
                                h->count, &off))
        return;
    if (!mp__replay_fresh(&p->rx_window, h->counter)) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "replayed (or too old) state chunk from %.8s dropped",
                       p->id_txt);
        return;
    }
    size_t plen = (size_t)h->count * 4u;
    if (len != MP_DATA_HDR_BYTES + plen + MP_DATA_TAG_BYTES)
        return;
    /* opened straight into the caller's buffer: a chunk that fails here
     * is asked again and overwritten, and the whole buffer is checked
     * against the digest at the end */
    if (mp__session_open(
            p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
            buf + MP_DATA_HDR_BYTES, plen, buf + MP_DATA_HDR_BYTES + plen,
            (uint8_t *)(mp->fetch_cmd->values + off)) != MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "state chunk from %.8s failed authentication, dropped",
                       p->id_txt);
        return;
    }
    mp__replay_take(&p->rx_window, h->counter);
    mp__fetch_chunk_done(mp->fetch, mp__engine_now_ms(), h->part);
    fetch_progress(mp);
}

void mp__engine_state_peer_failed(moshpit_t *mp, mp_peer_t *p) {
    if (mp->fetch == NULL)
        return;
    mp__fetch_on_server_failed(mp->fetch, mp__engine_now_ms(), p->id);
    fetch_progress(mp);
}

void mp__engine_state_fetch_poll(moshpit_t *mp, uint64_t now) {
    mp_cmd_t *c = mp->fetch_cmd;
    if (c == NULL)
        return;
    mp_plat_mutex_lock(&mp->lock);
    bool cancel = c->cancel;
    mp_plat_mutex_unlock(&mp->lock);
    if (cancel || now + ROUND_MARGIN_MS >= c->deadline_ms) {
        fetch_end(mp, MOSHPIT_ETIMEDOUT);
        return;
    }
    if (mp->fetch == NULL) {
        fetch_try_begin(mp, now);
        return;
    }
    mp__fetch_on_tick(mp->fetch, now);
    fetch_progress(mp);
}

uint64_t mp__engine_state_fetch_wakeup(const moshpit_t *mp) {
    if (mp->fetch_cmd == NULL)
        return UINT64_MAX;
    uint64_t w = mp->fetch_cmd->deadline_ms - ROUND_MARGIN_MS;
    if (mp->fetch == NULL)
        return mp__engine_now_ms() + 100 < w ? mp__engine_now_ms() + 100 : w;
    uint64_t t = mp__fetch_next_wakeup(mp->fetch);
    return t < w ? t : w;
}

void mp__engine_state_teardown(moshpit_t *mp) {
    fetch_end(mp, MOSHPIT_ECLOSED);
    free(mp->st.serve);
    free(mp->st.latest);
    memset(&mp->st, 0, sizeof(mp->st));
}
