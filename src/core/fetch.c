/* SPDX-License-Identifier: MIT */
/*
 * fetch.c - sans-IO download of a served state: see fetch.h.
 */
#include "fetch.h"

#include <stdlib.h>
#include <string.h>

typedef enum { SRV_NEW = 0, SRV_ASKED, SRV_ANSWERED, SRV_GONE } srv_state_t;

typedef struct srv {
    uint8_t id[MP_ID_BYTES];
    srv_state_t st;
    uint64_t asked_ms;
    uint64_t version, round, count;
    uint8_t digest[32];
} srv_t;

struct mp_fetch {
    mp_fetch_cfg_t cfg;
    srv_t *srv;
    size_t nsrv;
    mp_fetch_state_t state;
    moshpit_err_t err;
    bool count_mismatch; /* some server holds another length */

    /* the state being downloaded */
    int cur; /* index into srv, -1 = none yet */
    uint64_t version, round;
    uint8_t digest[32];
    uint32_t nchunks;
    uint8_t *have; /* per chunk: 0 missing, 1 requested, 2 received */
    uint32_t received, outstanding, next_req;
    uint64_t last_progress_ms;
    uint64_t last_ask_ms; /* last (re-)request of missing chunks */
    uint32_t restarts;

    /* pending sends */
    mp_fetch_send_t q[MP_FETCH_ASK + 4];
    uint32_t nq;
};

static void push(mp_fetch_t *f, const mp_fetch_send_t *s) {
    if (f->nq < sizeof(f->q) / sizeof(f->q[0]))
        f->q[f->nq++] = *s;
}

static void fail(mp_fetch_t *f, moshpit_err_t e) {
    f->state = MP_FETCH_FAILED;
    f->err = e;
    f->nq = 0;
}

static uint32_t chunk_len(const mp_fetch_t *f, uint32_t c) {
    size_t off = (size_t)c * f->cfg.chunk_elems;
    size_t rest = f->cfg.count - off;
    return rest < f->cfg.chunk_elems ? (uint32_t)rest : f->cfg.chunk_elems;
}

/* Asks servers that were not asked yet, keeping MP_FETCH_ASK in flight. */
static void ask_more(mp_fetch_t *f, uint64_t now) {
    uint32_t inflight = 0;
    for (size_t i = 0; i < f->nsrv; i++)
        inflight += f->srv[i].st == SRV_ASKED;
    for (size_t i = 0; i < f->nsrv && inflight < MP_FETCH_ASK; i++) {
        if (f->srv[i].st != SRV_NEW)
            continue;
        mp_fetch_send_t s;
        memset(&s, 0, sizeof(s));
        s.kind = MP_FETCH_SEND_INFO;
        memcpy(s.to, f->srv[i].id, MP_ID_BYTES);
        push(f, &s);
        f->srv[i].st = SRV_ASKED;
        f->srv[i].asked_ms = now;
        inflight++;
    }
    if (inflight == 0 && f->cur < 0) {
        /* nobody left to ask and nobody serving */
        bool any_answered = false;
        for (size_t i = 0; i < f->nsrv; i++)
            any_answered |= f->srv[i].st == SRV_ANSWERED;
        if (!any_answered)
            fail(f, f->count_mismatch ? MOSHPIT_ECOUNT : MOSHPIT_ENOSTATE);
    }
}

/* Requests missing chunks from the current server, up to the window. */
static void request_chunks(mp_fetch_t *f, uint64_t now) {
    if (f->cur < 0 || f->state != MP_FETCH_RUNNING)
        return;
    while (f->outstanding < f->cfg.window) {
        while (f->next_req < f->nchunks && f->have[f->next_req] != 0)
            f->next_req++;
        if (f->next_req >= f->nchunks)
            break;
        if (f->nq >= sizeof(f->q) / sizeof(f->q[0]))
            break; /* the rest after the driver drained the queue */
        uint32_t first = f->next_req, n = 0;
        while (first + n < f->nchunks && f->have[first + n] == 0 &&
               f->outstanding + n < f->cfg.window)
            n++;
        for (uint32_t k = 0; k < n; k++)
            f->have[first + k] = 1;
        f->outstanding += n;
        f->next_req = first + n;
        mp_fetch_send_t s;
        memset(&s, 0, sizeof(s));
        s.kind = MP_FETCH_SEND_GET;
        memcpy(s.to, f->srv[f->cur].id, MP_ID_BYTES);
        s.version = f->version;
        s.first = first;
        s.n = n;
        push(f, &s);
    }
    (void)now;
}

/* Forgets requests in flight: they are asked again (from whoever serves). */
static void unrequest(mp_fetch_t *f) {
    for (uint32_t c = 0; c < f->nchunks; c++)
        if (f->have[c] == 1)
            f->have[c] = 0;
    f->outstanding = 0;
    f->next_req = 0;
}

/* Takes server i's state: continue if it is the same, else start over. */
static void adopt(mp_fetch_t *f, uint64_t now, int i) {
    srv_t *s = &f->srv[i];
    bool same = f->version != 0 && s->version == f->version &&
                memcmp(s->digest, f->digest, 32) == 0;
    if (!same) {
        if (f->version != 0 && ++f->restarts > MP_FETCH_RESTARTS) {
            fail(f, MOSHPIT_ETIMEDOUT);
            return;
        }
        memset(f->have, 0, f->nchunks);
        f->received = 0;
        f->version = s->version;
        f->round = s->round;
        memcpy(f->digest, s->digest, 32);
    }
    unrequest(f);
    f->cur = i;
    f->last_progress_ms = now;
    f->last_ask_ms = now;
    request_chunks(f, now);
}

/* The current server is out: take another that answered, or ask more. */
static void next_server(mp_fetch_t *f, uint64_t now) {
    if (f->cur >= 0)
        f->srv[f->cur].st = SRV_GONE;
    f->cur = -1;
    unrequest(f);
    int best = -1;
    for (size_t i = 0; i < f->nsrv; i++) {
        srv_t *s = &f->srv[i];
        if (s->st != SRV_ANSWERED)
            continue;
        /* prefer one holding the state we are half way through */
        if (best < 0 ||
            (s->version == f->version && f->srv[best].version != f->version))
            best = (int)i;
    }
    if (best >= 0)
        adopt(f, now, best);
    else
        ask_more(f, now);
}

moshpit_err_t mp__fetch_new(const mp_fetch_cfg_t *cfg,
                            const uint8_t (*servers)[MP_ID_BYTES], size_t n,
                            mp_fetch_t **out) {
    if (out == NULL)
        return MOSHPIT_EINVAL;
    *out = NULL;
    if (cfg == NULL || cfg->count == 0 || cfg->chunk_elems == 0 ||
        cfg->window == 0 || (servers == NULL && n > 0))
        return MOSHPIT_EINVAL;
    uint64_t chunks = (cfg->count - 1) / cfg->chunk_elems + 1;
    if (chunks > UINT32_MAX)
        return MOSHPIT_EINVAL;
    if (n > MP_FETCH_SERVERS)
        n = MP_FETCH_SERVERS;
    mp_fetch_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return MOSHPIT_ENOMEM;
    f->cfg = *cfg;
    f->nchunks = (uint32_t)chunks;
    f->have = calloc(f->nchunks, 1);
    f->srv = calloc(n ? n : 1, sizeof(*f->srv));
    if (f->have == NULL || f->srv == NULL) {
        mp__fetch_free(f);
        return MOSHPIT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t k = 0; k < f->nsrv; k++)
            dup |= memcmp(f->srv[k].id, servers[i], MP_ID_BYTES) == 0;
        if (!dup)
            memcpy(f->srv[f->nsrv++].id, servers[i], MP_ID_BYTES);
    }
    f->cur = -1;
    ask_more(f, cfg->now_ms);
    *out = f;
    return MOSHPIT_OK;
}

void mp__fetch_free(mp_fetch_t *f) {
    if (f == NULL)
        return;
    free(f->have);
    free(f->srv);
    free(f);
}

bool mp__fetch_next_send(mp_fetch_t *f, mp_fetch_send_t *out) {
    if (f->nq == 0)
        request_chunks(f, 0); /* what did not fit in the queue */
    if (f->nq == 0)
        return false;
    *out = f->q[0];
    memmove(f->q, f->q + 1, (f->nq - 1) * sizeof(f->q[0]));
    f->nq--;
    return true;
}

static int srv_index(const mp_fetch_t *f, const uint8_t id[MP_ID_BYTES]) {
    for (size_t i = 0; i < f->nsrv; i++)
        if (memcmp(f->srv[i].id, id, MP_ID_BYTES) == 0)
            return (int)i;
    return -1;
}

void mp__fetch_on_info(mp_fetch_t *f, uint64_t now_ms,
                       const uint8_t from[MP_ID_BYTES], uint64_t version,
                       uint64_t round, uint64_t count,
                       const uint8_t digest[32]) {
    int i = srv_index(f, from);
    if (f->state != MP_FETCH_RUNNING || i < 0 || f->srv[i].st == SRV_GONE)
        return;
    srv_t *s = &f->srv[i];
    if (i == f->cur) {
        /* the server moved on to another state while we download */
        if (version == f->version)
            return;
        s->st = SRV_GONE;
        if (version != 0 && count == f->cfg.count) {
            s->st = SRV_ANSWERED;
            s->version = version;
            s->round = round;
            memcpy(s->digest, digest, 32);
            f->cur = -1;
            adopt(f, now_ms, i);
            return;
        }
        next_server(f, now_ms);
        return;
    }
    if (s->st != SRV_ASKED)
        return;
    if (version == 0 || count != f->cfg.count) {
        if (version != 0)
            f->count_mismatch = true;
        s->st = SRV_GONE;
        if (f->cur < 0)
            ask_more(f, now_ms);
        return;
    }
    s->st = SRV_ANSWERED;
    s->version = version;
    s->round = round;
    memcpy(s->digest, digest, 32);
    if (f->cur < 0)
        adopt(f, now_ms, i);
}

bool mp__fetch_chunk_wanted(const mp_fetch_t *f,
                            const uint8_t from[MP_ID_BYTES], uint64_t version,
                            uint32_t chunk, uint32_t count, size_t *off) {
    if (f->state != MP_FETCH_RUNNING || f->cur < 0 ||
        memcmp(from, f->srv[f->cur].id, MP_ID_BYTES) != 0 ||
        version != f->version || chunk >= f->nchunks || f->have[chunk] == 2 ||
        count != chunk_len(f, chunk))
        return false;
    *off = (size_t)chunk * f->cfg.chunk_elems;
    return true;
}

void mp__fetch_chunk_done(mp_fetch_t *f, uint64_t now_ms, uint32_t chunk) {
    if (f->state != MP_FETCH_RUNNING || chunk >= f->nchunks ||
        f->have[chunk] == 2)
        return;
    if (f->have[chunk] == 1 && f->outstanding > 0)
        f->outstanding--;
    f->have[chunk] = 2;
    f->received++;
    f->last_progress_ms = now_ms;
    f->last_ask_ms = now_ms;
    if (f->received == f->nchunks) {
        f->state = MP_FETCH_VERIFY;
        f->nq = 0;
        return;
    }
    request_chunks(f, now_ms);
}

void mp__fetch_on_server_failed(mp_fetch_t *f, uint64_t now_ms,
                                const uint8_t id[MP_ID_BYTES]) {
    int i = srv_index(f, id);
    if (f->state != MP_FETCH_RUNNING || i < 0)
        return;
    if (i == f->cur) {
        next_server(f, now_ms);
        return;
    }
    f->srv[i].st = SRV_GONE;
    if (f->cur < 0)
        ask_more(f, now_ms);
}

void mp__fetch_on_tick(mp_fetch_t *f, uint64_t now_ms) {
    if (f->state != MP_FETCH_RUNNING && f->state != MP_FETCH_VERIFY)
        return;
    if (now_ms >= f->cfg.deadline_ms) {
        fail(f, MOSHPIT_ETIMEDOUT);
        return;
    }
    if (f->state != MP_FETCH_RUNNING)
        return;
    /* INFO requests nobody answered */
    bool expired = false;
    for (size_t i = 0; i < f->nsrv; i++)
        if (f->srv[i].st == SRV_ASKED &&
            now_ms - f->srv[i].asked_ms >= f->cfg.server_timeout_ms) {
            f->srv[i].st = SRV_GONE;
            expired = true;
        }
    if (f->cur >= 0) {
        uint64_t quiet = now_ms - f->last_progress_ms;
        if (quiet >= f->cfg.server_timeout_ms) {
            next_server(f, now_ms);
            return;
        }
        if (now_ms - f->last_ask_ms >= f->cfg.stall_ms) {
            /* a request or chunk was lost (full queue): ask again */
            f->last_ask_ms = now_ms;
            unrequest(f);
            request_chunks(f, now_ms);
        }
    } else if (expired) {
        ask_more(f, now_ms);
    }
}

uint64_t mp__fetch_next_wakeup(const mp_fetch_t *f) {
    if (f->state != MP_FETCH_RUNNING && f->state != MP_FETCH_VERIFY)
        return UINT64_MAX;
    uint64_t w = f->cfg.deadline_ms;
    if (f->state != MP_FETCH_RUNNING)
        return w;
    for (size_t i = 0; i < f->nsrv; i++)
        if (f->srv[i].st == SRV_ASKED) {
            uint64_t t = f->srv[i].asked_ms + f->cfg.server_timeout_ms;
            w = t < w ? t : w;
        }
    if (f->cur >= 0) {
        uint64_t t = f->last_ask_ms + f->cfg.stall_ms;
        w = t < w ? t : w;
        t = f->last_progress_ms + f->cfg.server_timeout_ms;
        w = t < w ? t : w;
    }
    return w;
}

void mp__fetch_verified(mp_fetch_t *f, uint64_t now_ms,
                        const uint8_t digest[32]) {
    if (f->state != MP_FETCH_VERIFY)
        return;
    if (memcmp(digest, f->digest, 32) == 0) {
        f->state = MP_FETCH_DONE;
        return;
    }
    /* the server sent bytes that do not match what it announced: drop it
     * and start over with another one */
    f->state = MP_FETCH_RUNNING;
    f->version = 0; /* forces a fresh start */
    memset(f->have, 0, f->nchunks);
    f->received = 0;
    if (++f->restarts > MP_FETCH_RESTARTS) {
        fail(f, MOSHPIT_ETIMEDOUT);
        return;
    }
    next_server(f, now_ms); /* drops the server that sent them */
}

mp_fetch_state_t mp__fetch_state(const mp_fetch_t *f) {
    return f->state;
}

moshpit_err_t mp__fetch_error(const mp_fetch_t *f) {
    return f->state == MP_FETCH_FAILED ? f->err : MOSHPIT_OK;
}

uint64_t mp__fetch_round(const mp_fetch_t *f) {
    return f->round;
}

const uint8_t *mp__fetch_digest(const mp_fetch_t *f) {
    return f->digest;
}

uint32_t mp__fetch_received(const mp_fetch_t *f) {
    return f->received;
}

uint32_t mp__fetch_restarts(const mp_fetch_t *f) {
    return f->restarts;
}
