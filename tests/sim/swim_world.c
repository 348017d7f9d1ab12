/* SPDX-License-Identifier: MIT */
/*
 * swim_world.c - the SWIM driver of the simulation tests (swim_world.h):
 * peers as simnet nodes, encode / send / decode / deliver, timers at the
 * machines' next wake-up, event fan-out to the test, byte counting, the
 * fabricated SYNC pages that build a converged swarm without traffic, and
 * the view check. Out of memory aborts the test program.
 */
#include "sim/swim_world.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire_swim.h"

typedef struct wpeer {
    mp_swim_t *sw;
    uint32_t node;
    bool alive;
    bool started;
    uint64_t timer_at; /* earliest pending timer, UINT64_MAX = none */
    uint64_t bytes, msgs;
} wpeer_t;

/* a timer tag no wake-up time reaches: held messages are due */
#define SWIM_WORLD_HELD_TAG UINT64_MAX

struct swim_world {
    simnet_t *net;
    mp_swim_config_t cfg;
    uint64_t seed;
    uint32_t max;
    wpeer_t *p;
    uint32_t *node_peer; /* simnet node -> peer, UINT32_MAX = attacker */
    uint32_t nnodes_cap;
    uint32_t attacker; /* node used by swim_world_inject */
    swim_world_event_fn hook;
    void *hook_user;
    swim_world_recv_fn recv_hook;
    void *recv_user;
    swim_world_send_fn send_hook;
    void *send_user;
    /* messages the send hook holds back (a session being dialled) */
    struct held {
        simnet_msg_t m;
        uint64_t due;
    } * held;
    uint32_t nheld, capheld;
    uint64_t raw_bad; /* raw injected messages the decoder refused */
    uint64_t trace;
    simnet_ops_t ops;
    mp_swim_msg_t msg; /* decode scratch */
    mp_swim_out_t out; /* poll scratch */
    uint8_t buf[MP_SWIM_ID_BYTES + MP_SWIM_MSG_MAX];
};

static void *xalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "swim_world: out of memory\n");
        abort();
    }
    return p;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    uint64_t z = h ^ v;
    z += 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void swim_world_id(uint32_t peer, uint8_t id[MP_SWIM_ID_BYTES]) {
    id[0] = (uint8_t)(peer >> 24);
    id[1] = (uint8_t)(peer >> 16);
    id[2] = (uint8_t)(peer >> 8);
    id[3] = (uint8_t)peer;
    uint64_t h = mix(0x1d5f00d, peer);
    for (unsigned i = 4; i < MP_SWIM_ID_BYTES; i++) {
        if (i % 8 == 4)
            h = mix(h, i);
        id[i] = (uint8_t)(h >> (8 * (i % 8)));
    }
}

int64_t swim_world_peer_of(const swim_world_t *w, const uint8_t *id) {
    uint32_t p = (uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 |
                 (uint32_t)id[2] << 8 | id[3];
    if (p >= w->max)
        return -1;
    uint8_t want[MP_SWIM_ID_BYTES];
    swim_world_id(p, want);
    return memcmp(want, id, MP_SWIM_ID_BYTES) == 0 ? (int64_t)p : -1;
}

const char *swim_world_addr(uint32_t peer, char buf[16]) {
    snprintf(buf, 16, "s:%u", peer);
    return buf;
}

static void note_node(swim_world_t *w, uint32_t node, uint32_t peer) {
    if (node >= w->nnodes_cap) {
        uint32_t cap = w->nnodes_cap ? 2 * w->nnodes_cap : 1024;
        while (cap <= node)
            cap *= 2;
        uint32_t *n = realloc(w->node_peer, cap * sizeof *n);
        if (n == NULL)
            abort();
        for (uint32_t i = w->nnodes_cap; i < cap; i++)
            n[i] = UINT32_MAX;
        w->node_peer = n;
        w->nnodes_cap = cap;
    }
    w->node_peer[node] = peer;
}

/* Sends what p's machine wants sent, passes its events on, and makes sure
 * a timer is pending for its next wake-up. */
static void pump(swim_world_t *w, uint32_t p) {
    wpeer_t *pp = &w->p[p];
    if (!pp->alive)
        return;
    uint64_t now = simnet_now(w->net);
    while (mp__swim_poll_send(pp->sw, &w->out)) {
        size_t len = 0;
        swim_world_id(p, w->buf);
        moshpit_err_t e = mp__wire_swim_msg_encode(
            &w->out.msg, w->buf + MP_SWIM_ID_BYTES, MP_SWIM_MSG_MAX, &len);
        if (e != MOSHPIT_OK) {
            fprintf(stderr, "swim_world: encode failed: %d\n", (int)e);
            abort();
        }
        pp->bytes += len;
        pp->msgs++;
        int64_t to = swim_world_peer_of(w, w->out.to);
        if (to < 0 || !w->p[to].started)
            continue; /* an address nobody answers at */
        simnet_msg_t m = {.src = pp->node,
                          .dst = w->p[to].node,
                          .type = w->out.msg.type,
                          .data = w->buf,
                          .len = MP_SWIM_ID_BYTES + len};
        uint32_t delay = w->send_hook != NULL
                             ? w->send_hook(w, p, (uint32_t)to, w->send_user)
                             : 0;
        if (delay == 0) {
            simnet_send(w->net, &m);
            continue;
        }
        if (w->nheld == w->capheld) {
            w->capheld = w->capheld ? 2 * w->capheld : 64;
            w->held = realloc(w->held, w->capheld * sizeof *w->held);
            if (w->held == NULL)
                abort();
        }
        void *copy = xalloc(m.len);
        memcpy(copy, m.data, m.len);
        m.data = copy;
        w->held[w->nheld].m = m;
        w->held[w->nheld++].due = now + delay;
        simnet_timer(w->net, pp->node, now + delay, SWIM_WORLD_HELD_TAG);
    }
    mp_swim_event_t ev;
    while (mp__swim_poll_event(pp->sw, &ev)) {
        uint64_t h = mix(w->trace, now);
        h = mix(h, (uint64_t)p << 8 | ev.type);
        h = mix(h, (uint64_t)ev.id[0] << 24 | (uint64_t)ev.id[1] << 16 |
                       (uint64_t)ev.id[2] << 8 | ev.id[3]);
        w->trace = mix(h, (uint64_t)ev.state << 32 | ev.inc);
        if (w->hook != NULL)
            w->hook(w, p, &ev, w->hook_user);
    }
    uint64_t at = mp__swim_next_wakeup(pp->sw);
    if (at < pp->timer_at) {
        pp->timer_at = at < now ? now : at;
        simnet_timer(w->net, pp->node, pp->timer_at, pp->timer_at);
    }
}

static void on_msg(simnet_t *s, uint32_t node, const simnet_msg_t *m,
                   void *user) {
    swim_world_t *w = user;
    uint32_t p = node < w->nnodes_cap ? w->node_peer[node] : UINT32_MAX;
    if (p == UINT32_MAX || !w->p[p].alive || w->p[p].node != node ||
        m->len < MP_SWIM_ID_BYTES)
        return;
    const uint8_t *from = m->data;
    if (w->recv_hook != NULL)
        w->recv_hook(w, p, from, (const uint8_t *)m->data + MP_SWIM_ID_BYTES,
                     m->len - MP_SWIM_ID_BYTES, w->recv_user);
    moshpit_err_t e =
        mp__wire_swim_msg_decode((const uint8_t *)m->data + MP_SWIM_ID_BYTES,
                                 m->len - MP_SWIM_ID_BYTES, &w->msg);
    if (e != MOSHPIT_OK && m->type == SWIM_WORLD_RAW) {
        w->raw_bad++; /* dropped, as the engine drops it */
        return;
    }
    if (e != MOSHPIT_OK) {
        fprintf(stderr, "swim_world: decode failed: %d\n", (int)e);
        abort();
    }
    mp__swim_on_message(w->p[p].sw, simnet_now(s), from, &w->msg);
    pump(w, p);
}

static void on_timer(simnet_t *s, uint32_t node, uint64_t tag, void *user) {
    swim_world_t *w = user;
    uint32_t p = node < w->nnodes_cap ? w->node_peer[node] : UINT32_MAX;
    if (p == UINT32_MAX || !w->p[p].alive || w->p[p].node != node)
        return;
    if (tag == SWIM_WORLD_HELD_TAG) {
        /* held messages whose dial is done go out, in order */
        uint64_t now = simnet_now(s);
        uint32_t k = 0;
        for (uint32_t i = 0; i < w->nheld; i++) {
            if (w->held[i].due <= now && w->held[i].m.src == node) {
                simnet_send(s, &w->held[i].m);
                free((void *)w->held[i].m.data);
            } else {
                w->held[k++] = w->held[i];
            }
        }
        w->nheld = k;
        return;
    }
    if (tag == w->p[p].timer_at)
        w->p[p].timer_at = UINT64_MAX;
    mp__swim_tick(w->p[p].sw, simnet_now(s));
    pump(w, p);
}

swim_world_t *swim_world_new(uint32_t max_peers, const mp_swim_config_t *cfg,
                             uint64_t seed, uint32_t latency_ms,
                             uint32_t jitter_ms) {
    swim_world_t *w = xalloc(sizeof *w);
    w->net = simnet_new(seed);
    if (cfg != NULL)
        w->cfg = *cfg;
    else
        mp__swim_config_default(&w->cfg);
    w->seed = seed;
    w->max = max_peers;
    w->p = xalloc(max_peers * sizeof *w->p);
    w->trace = 0x243f6a8885a308d3u;
    w->ops.on_msg = on_msg;
    w->ops.on_timer = on_timer;
    simnet_set_default_link(w->net, latency_ms, 0);
    simnet_set_jitter(w->net, jitter_ms);
    w->attacker = simnet_add_node(w->net, &w->ops, w);
    note_node(w, w->attacker, UINT32_MAX);
    return w;
}

void swim_world_free(swim_world_t *w) {
    if (w == NULL)
        return;
    for (uint32_t p = 0; p < w->max; p++)
        mp__swim_free(w->p[p].sw);
    for (uint32_t i = 0; i < w->nheld; i++)
        free((void *)w->held[i].m.data);
    free(w->held);
    simnet_free(w->net);
    free(w->p);
    free(w->node_peer);
    free(w);
}

simnet_t *swim_world_net(swim_world_t *w) {
    return w->net;
}

uint64_t swim_world_now(const swim_world_t *w) {
    return simnet_now(w->net);
}

void swim_world_set_hook(swim_world_t *w, swim_world_event_fn fn, void *user) {
    w->hook = fn;
    w->hook_user = user;
}

void swim_world_start(swim_world_t *w, uint32_t p) {
    swim_world_start_with(w, p, &w->cfg);
}

void swim_world_start_with(swim_world_t *w, uint32_t p,
                           const mp_swim_config_t *cfg) {
    wpeer_t *pp = &w->p[p];
    if (pp->alive)
        simnet_kill(w->net, pp->node);
    mp__swim_free(pp->sw);
    pp->sw = NULL;
    uint8_t id[MP_SWIM_ID_BYTES];
    char addr[16];
    swim_world_id(p, id);
    uint64_t seed = mix(w->seed, (uint64_t)p << 20 | simnet_now(w->net));
    moshpit_err_t e = mp__swim_new(cfg, id, swim_world_addr(p, addr), seed,
                                   simnet_now(w->net), &pp->sw);
    if (e != MOSHPIT_OK) {
        fprintf(stderr, "swim_world: mp__swim_new: %d\n", (int)e);
        abort();
    }
    pp->node = simnet_add_node(w->net, &w->ops, w);
    note_node(w, pp->node, p);
    pp->alive = true;
    pp->started = true;
    pp->timer_at = UINT64_MAX;
    pump(w, p);
}

void swim_world_join(swim_world_t *w, uint32_t p, uint32_t boot) {
    uint8_t id[MP_SWIM_ID_BYTES];
    char addr[16];
    swim_world_id(boot, id);
    moshpit_err_t e = mp__swim_join(w->p[p].sw, simnet_now(w->net), id,
                                    swim_world_addr(boot, addr));
    if (e != MOSHPIT_OK) {
        fprintf(stderr, "swim_world: join: %d\n", (int)e);
        abort();
    }
    pump(w, p);
}

void swim_world_seed_view(swim_world_t *w, uint32_t p, uint32_t boot,
                          const uint32_t *members, uint32_t n) {
    wpeer_t *pp = &w->p[p];
    uint64_t now = simnet_now(w->net);
    uint8_t bid[MP_SWIM_ID_BYTES];
    char addr[16];
    swim_world_id(boot, bid);
    if (mp__swim_join(pp->sw, now, bid, swim_world_addr(boot, addr)) !=
        MOSHPIT_OK)
        abort();
    /* Pages of page_size entries, cursors as a bootstrap whose slots hold
     * members[] in order would use. */
    uint32_t per = w->cfg.page_size, cur = 0;
    mp_swim_msg_t *m = &w->msg;
    mp_swim_event_t ev;
    for (;;) {
        while (mp__swim_poll_send(pp->sw, &w->out))
            ; /* the SYNC_REQs: answered right here */
        memset(m, 0, offsetof(mp_swim_msg_t, entries));
        m->type = MP_SWIM_MSG_SYNC;
        m->cursor = cur;
        m->n_entries = 0;
        m->n_updates = 0;
        for (uint32_t i = cur; i < n && m->n_entries < per; i++) {
            mp_swim_update_t *u = &m->entries[m->n_entries++];
            swim_world_id(members[i], u->id);
            u->state = MP_SWIM_ALIVE;
            u->inc = 0;
            u->has_addr = 1;
            swim_world_addr(members[i], u->addr);
        }
        cur += m->n_entries;
        m->next = cur < n ? cur : 0;
        mp__swim_on_message(pp->sw, now, bid, m);
        while (mp__swim_poll_event(pp->sw, &ev))
            ; /* JOINED for everyone: not news to the test */
        if (m->next == 0)
            break;
    }
    if (!mp__swim_synced(pp->sw)) {
        fprintf(stderr, "swim_world: seeded view not synced\n");
        abort();
    }
    pump(w, p);
}

void swim_world_kill(swim_world_t *w, uint32_t p) {
    if (!w->p[p].alive)
        return;
    simnet_kill(w->net, w->p[p].node);
    w->p[p].alive = false;
}

bool swim_world_alive(const swim_world_t *w, uint32_t p) {
    return p < w->max && w->p[p].alive;
}

mp_swim_t *swim_world_sw(swim_world_t *w, uint32_t p) {
    return w->p[p].sw;
}

void swim_world_set_send_hook(swim_world_t *w, swim_world_send_fn fn,
                              void *user) {
    w->send_hook = fn;
    w->send_user = user;
}

void swim_world_set_recv_hook(swim_world_t *w, swim_world_recv_fn fn,
                              void *user) {
    w->recv_hook = fn;
    w->recv_user = user;
}

void swim_world_inject_raw(swim_world_t *w, const uint8_t *from, uint32_t to,
                           const uint8_t *bytes, size_t len) {
    if (len > MP_SWIM_MSG_MAX || !w->p[to].started)
        return;
    memcpy(w->buf, from, MP_SWIM_ID_BYTES);
    memcpy(w->buf + MP_SWIM_ID_BYTES, bytes, len);
    simnet_msg_t m = {.src = w->attacker,
                      .dst = w->p[to].node,
                      .type = SWIM_WORLD_RAW,
                      .data = w->buf,
                      .len = MP_SWIM_ID_BYTES + len};
    simnet_send(w->net, &m);
}

uint64_t swim_world_raw_refused(const swim_world_t *w) {
    return w->raw_bad;
}

void swim_world_inject(swim_world_t *w, const uint8_t *from, uint32_t to,
                       const mp_swim_msg_t *msg) {
    size_t len = 0;
    memcpy(w->buf, from, MP_SWIM_ID_BYTES);
    if (mp__wire_swim_msg_encode(msg, w->buf + MP_SWIM_ID_BYTES,
                                 MP_SWIM_MSG_MAX, &len) != MOSHPIT_OK)
        abort();
    if (!w->p[to].started)
        return;
    simnet_msg_t m = {.src = w->attacker,
                      .dst = w->p[to].node,
                      .type = msg->type,
                      .data = w->buf,
                      .len = MP_SWIM_ID_BYTES + len};
    simnet_send(w->net, &m);
}

void swim_world_run(swim_world_t *w, uint64_t until_ms) {
    simnet_run(w->net, until_ms);
    /* Advance the clock to until_ms even when nothing was due. */
    simnet_timer(w->net, w->attacker, until_ms, 0);
    simnet_run(w->net, until_ms);
}

uint64_t swim_world_bytes(const swim_world_t *w, uint32_t p) {
    return w->p[p].bytes;
}

uint64_t swim_world_msgs(const swim_world_t *w, uint32_t p) {
    return w->p[p].msgs;
}

void swim_world_reset_counts(swim_world_t *w) {
    for (uint32_t p = 0; p < w->max; p++)
        w->p[p].bytes = w->p[p].msgs = 0;
}

uint64_t swim_world_trace(const swim_world_t *w) {
    return mix(w->trace, simnet_trace_hash(w->net));
}

uint64_t swim_world_check_view(swim_world_t *w, const uint32_t *peers,
                               uint32_t n, char *why, size_t why_len) {
    return swim_world_check_views_of(w, peers, n, peers, n, why, why_len);
}

uint64_t swim_world_check_views_of(swim_world_t *w, const uint32_t *observers,
                                   uint32_t nobs, const uint32_t *peers,
                                   uint32_t n, char *why, size_t why_len) {
    uint64_t bad = 0;
    uint32_t live = 0;
    if (why != NULL && why_len > 0)
        why[0] = '\0';
    for (uint32_t k = 0; k < n; k++)
        live += w->p[peers[k]].alive;
    for (uint32_t a = 0; a < nobs; a++) {
        uint32_t o = observers[a];
        if (!w->p[o].alive)
            continue;
        mp_swim_t *sw = w->p[o].sw;
        uint64_t bad_here = 0;
        if (mp__swim_live_count(sw) != live)
            bad_here++;
        for (uint32_t b = 0; b < n; b++) {
            uint32_t s = peers[b];
            if (!w->p[s].alive)
                continue;
            uint8_t id[MP_SWIM_ID_BYTES];
            char addr[16];
            swim_world_id(s, id);
            mp_swim_member_t m;
            uint32_t inc = mp__swim_self_inc(w->p[s].sw);
            if (mp__swim_lookup(sw, id, &m) && m.state == MP_SWIM_ALIVE &&
                m.inc == inc && strcmp(m.addr, swim_world_addr(s, addr)) == 0)
                continue;
            if (bad + bad_here == 0 && why != NULL)
                snprintf(why, why_len, "peer %u sees %u as %s", o, s,
                         !mp__swim_lookup(sw, id, &m) ? "unknown"
                         : m.state != MP_SWIM_ALIVE   ? "not alive"
                         : m.inc != inc               ? "stale incarnation"
                                                      : "wrong address");
            bad_here++;
        }
        if (bad_here > 0 && bad == 0 && why != NULL && why[0] == '\0')
            snprintf(why, why_len, "peer %u: live count %zu, want %u", o,
                     mp__swim_live_count(sw), live);
        bad += bad_here;
    }
    return bad;
}

static uint32_t ceil_log2(uint64_t x) {
    uint32_t k = 0;
    while (k < 63 && ((uint64_t)1 << k) < x)
        k++;
    return k;
}

uint64_t swim_world_detection_bound(const mp_swim_config_t *c, uint64_t n) {
    uint64_t lg = ceil_log2(n + 1);
    uint64_t sus = (uint64_t)c->suspicion_mult * c->period_ms * lg;
    if (sus < c->suspicion_min_ms)
        sus = c->suspicion_min_ms;
    return 10u * c->period_ms + c->ping_timeout_ms + c->ping_req_timeout_ms +
           2u * lg * c->period_ms + sus;
}

void swim_world_note_dead(swim_world_t *w, uint32_t peer,
                          const mp_swim_event_t *ev, const uint32_t *victims,
                          uint32_t nvictims, uint64_t *dead_at,
                          uint64_t *false_dead) {
    int64_t s = swim_world_peer_of(w, ev->id);
    if (s < 0 || (ev->type != MP_SWIM_EV_DEAD && ev->type != MP_SWIM_EV_LEFT))
        return;
    if (swim_world_alive(w, (uint32_t)s)) {
        (*false_dead)++;
        return;
    }
    for (uint32_t v = 0; v < nvictims; v++) {
        uint64_t *d = &dead_at[(uint64_t)peer * nvictims + v];
        if (victims[v] == (uint32_t)s && *d == UINT64_MAX)
            *d = swim_world_now(w);
    }
}
