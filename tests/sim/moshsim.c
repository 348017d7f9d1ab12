/* SPDX-License-Identifier: MIT */
/*
 * moshsim.c - the simulated swarm of moshsim.h: per peer the round flow of
 * src/net/engine_round.c (key, candidates, joiner with fallback and LEAVE,
 * matchmaker service per key, group all-reduce over simnet messages, round
 * end), built only from the real core modules; plus the round orchestration
 * (misses, churn, kills, disconnect notices), a shared cache of candidate
 * lists per (view, key), and the statistics. Node 0 of the net is the
 * driver itself (it delivers disconnect notices); peer i is node i + 1.
 */
#include "sim/moshsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grid.h"
#include "core/group.h"

#define NONE64 UINT64_MAX
#define MM_SLOTS 8u     /* matchmakers per peer, as MP_MM_KEYS */
#define HELD_MAX 4096u  /* parts held per peer before their GROUP */
#define MARGIN_MS 100u  /* ROUND_MARGIN_MS of the engine */
#define GRACE_MS 1000u  /* joiner grace, as the engine */
#define BANDWIDTH 100u  /* announced by every peer */
#define ROUND_GAP 1000u /* ms between quiescence and the next round */

enum { MSG_JOIN = 1, MSG_ACK, MSG_ALONE, MSG_GROUP, MSG_LEAVE, MSG_PART };
enum { TAG_START = 1, TAG_WAKE };

typedef struct held {
    uint64_t gid;
    uint32_t from; /* peer */
    uint32_t kind, share, part, count;
    double wsum;
    float *data;
} held_t;

typedef struct mm_slot {
    uint8_t key[MP_KEY_MAX];
    size_t len;
    mp_mm_t *mm;
    uint64_t used;
} mm_slot_t;

typedef struct speer {
    uint8_t id[MP_ID_BYTES];
    bool alive, known_dead;
    float *values;
    double weight;
    mp_grid_t grid;
    mm_slot_t mms[MM_SLOTS];
    uint64_t mm_made; /* matchmakers created (seeds their group ids) */
    uint64_t join_seq;
    uint64_t wake_at;
    uint64_t recent[16];
    uint32_t recent_pos;
    /* the call in progress */
    bool in_call;
    uint64_t deadline;
    uint8_t key[MP_KEY_MAX];
    size_t key_len;
    mp_joiner_t *joiner;
    bool join_pending;
    uint32_t join_to;
    mp_group_t *group;
    uint64_t gid;
    uint32_t n, self;
    uint32_t *members; /* n peers of the roster */
    held_t *held;
    size_t nheld, capheld;
    moshsim_call_t last;
} speer_t;

typedef struct cache_ent {
    uint8_t key[MP_KEY_MAX];
    uint8_t len; /* 0 = free */
    uint8_t n;
    uint32_t cand[MOSHSIM_CANDIDATES];
} cache_ent_t;

typedef struct kill_req {
    uint32_t peer, after_ms;
} kill_req_t;

struct moshsim {
    moshsim_cfg_t c;
    simnet_t *net;
    simnet_rng_t rng;  /* round plans: misses, churn, start jitter */
    simnet_rng_t data; /* values, weights */
    uint64_t id_state;
    speer_t *p;
    uint32_t np, capp;
    uint32_t *idx; /* id -> peer, open addressing, MOSHSIM_NONE = free */
    size_t capidx;
    /* default view: live peers at round start */
    uint32_t *live;
    uint8_t (*live_ids)[MP_ID_BYTES];
    size_t nlive;
    bool view_dirty;
    cache_ent_t *cache;
    size_t capcache, ncache;
    /* custom views */
    moshsim_view_fn view_fn;
    void *view_user;
    uint32_t *vbuf;
    uint8_t (*vids)[MP_ID_BYTES];
    size_t capv;
    kill_req_t *kills;
    size_t nkills, capkills;
    uint32_t round;
    uint64_t last_start, next_start;
    uint32_t left, joined, called, skipped;
    double scale;       /* max |x| of the initial values */
    mp_mm_out_t mm_out; /* scratch of poll_mm */
    mp_member_t roster[MP_GROUP_MAX];
};

static void *xmalloc(size_t n) {
    void *q = malloc(n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, "moshsim: out of memory\n");
        abort();
    }
    return q;
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, "moshsim: out of memory\n");
        abort();
    }
    return q;
}

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

static uint32_t node_of(uint32_t peer) {
    return peer + 1;
}

/* ------------------------------------------------------------------ */
/* id index                                                            */

static size_t id_slot(const moshsim_t *s, const uint8_t id[MP_ID_BYTES]) {
    uint64_t h = 0;
    memcpy(&h, id, sizeof h);
    return (size_t)mix64(h) & (s->capidx - 1);
}

static uint32_t find_id(const moshsim_t *s, const uint8_t id[MP_ID_BYTES]) {
    for (size_t i = id_slot(s, id);; i = (i + 1) & (s->capidx - 1)) {
        uint32_t q = s->idx[i];
        if (q == MOSHSIM_NONE)
            return MOSHSIM_NONE;
        if (memcmp(s->p[q].id, id, MP_ID_BYTES) == 0)
            return q;
    }
}

static void idx_put(moshsim_t *s, uint32_t peer) {
    size_t i = id_slot(s, s->p[peer].id);
    while (s->idx[i] != MOSHSIM_NONE)
        i = (i + 1) & (s->capidx - 1);
    s->idx[i] = peer;
}

/* Makes room for want ids; returns true if it rebuilt the index (then
 * every peer so far is in it). */
static bool idx_grow(moshsim_t *s, size_t want) {
    if (2 * want <= s->capidx)
        return false;
    size_t cap = s->capidx ? s->capidx : 1024;
    while (2 * want > cap)
        cap *= 2;
    free(s->idx);
    s->idx = xmalloc(cap * sizeof *s->idx);
    s->capidx = cap;
    for (size_t i = 0; i < cap; i++)
        s->idx[i] = MOSHSIM_NONE;
    for (uint32_t q = 0; q < s->np; q++)
        idx_put(s, q);
    return true;
}

/* ------------------------------------------------------------------ */
/* messages                                                            */

static void send(moshsim_t *s, uint32_t from, uint32_t to, uint32_t type,
                 const uint64_t arg[3], const void *data, size_t len) {
    simnet_msg_t m = {.src = node_of(from), .dst = node_of(to), .type = type};
    for (int i = 0; i < 3; i++)
        m.arg[i] = arg[i];
    m.data = data;
    m.len = len;
    simnet_send(s->net, &m);
}

static void send_simple(moshsim_t *s, uint32_t from, uint32_t to, uint32_t type,
                        uint64_t seq) {
    const uint64_t arg[3] = {seq, 0, 0};
    send(s, from, to, type, arg, NULL, 0);
}

static uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bitsd(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ------------------------------------------------------------------ */
/* matchmaker side                                                     */

static mm_slot_t *mm_for_key(moshsim_t *s, uint32_t q, const uint8_t *key,
                             size_t len) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    mm_slot_t *free_slot = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < MM_SLOTS; i++) {
        mm_slot_t *m = &p->mms[i];
        if (m->mm == NULL) {
            if (free_slot == NULL)
                free_slot = m;
            continue;
        }
        if (m->len == len && memcmp(m->key, key, len) == 0) {
            m->used = now;
            return m;
        }
        if (mp__mm_pending(m->mm) == 0 &&
            (oldest == NULL || m->used < oldest->used))
            oldest = m;
    }
    if (free_slot == NULL && oldest != NULL) {
        mp__mm_free(oldest->mm);
        oldest->mm = NULL;
        free_slot = oldest;
    }
    if (free_slot == NULL)
        return NULL;
    uint64_t seed = mix64(s->c.seed ^ mix64((uint64_t)q << 20 ^ p->mm_made++));
    if (mp__mm_new(s->c.group_size, s->c.min_group_size, seed,
                   &free_slot->mm) != MOSHPIT_OK)
        return NULL;
    memcpy(free_slot->key, key, len);
    free_slot->len = len;
    free_slot->used = now;
    return free_slot;
}

/* The matchmaker's answer to this peer's own JOIN. */
static void deliver_to_self(moshsim_t *s, uint32_t q, const mp_mm_out_t *o,
                            uint64_t seq) {
    speer_t *p = &s->p[q];
    if (!p->in_call || p->joiner == NULL || p->group != NULL)
        return;
    if (o->kind == MP_MM_GROUP)
        mp__joiner_on_group(p->joiner, p->id, seq, o->group_id, o->members,
                            o->n, p->id);
    else
        mp__joiner_on_alone(p->joiner, p->id, seq);
}

static void poll_mm(moshsim_t *s, uint32_t q, mp_mm_t *mm) {
    mp_mm_out_t *o = &s->mm_out;
    uint64_t now = simnet_now(s->net);
    while (mp__mm_poll(mm, now, o)) {
        if (o->kind == MP_MM_GROUP) {
            /* the roster goes out without the other members' seqs */
            memcpy(s->roster, o->members, o->n * sizeof o->members[0]);
            for (uint32_t k = 0; k < o->n; k++)
                s->roster[k].seq = 0;
            for (uint32_t i = 0; i < o->n; i++) {
                uint32_t to = find_id(s, o->members[i].id);
                if (to == q) {
                    deliver_to_self(s, q, o, o->members[i].seq);
                } else if (to != MOSHSIM_NONE && !s->p[to].known_dead) {
                    const uint64_t arg[3] = {o->members[i].seq, o->group_id,
                                             o->n};
                    send(s, q, to, MSG_GROUP, arg, s->roster,
                         o->n * sizeof s->roster[0]);
                }
            }
        } else if (o->kind == MP_MM_ALONE) {
            uint32_t to = find_id(s, o->members[0].id);
            if (to == q)
                deliver_to_self(s, q, o, o->members[0].seq);
            else if (to != MOSHSIM_NONE && !s->p[to].known_dead)
                send_simple(s, q, to, MSG_ALONE, o->members[0].seq);
        }
    }
}

static void on_join(moshsim_t *s, uint32_t q, uint32_t from,
                    const simnet_msg_t *m) {
    if (m->len == 0 || m->len > MP_KEY_MAX)
        return;
    mm_slot_t *slot = mm_for_key(s, q, m->data, m->len);
    mp_member_t mb;
    memset(&mb, 0, sizeof mb);
    memcpy(mb.id, s->p[from].id, MP_ID_BYTES);
    mb.seq = m->arg[0];
    mb.bandwidth = (uint32_t)(m->arg[1] >> 32);
    mb.weight = bitsd(m->arg[2]);
    uint32_t window = (uint32_t)m->arg[1];
    if (slot == NULL ||
        !mp__mm_on_join(slot->mm, simnet_now(s->net), &mb, window)) {
        send_simple(s, q, from, MSG_ALONE, mb.seq);
        return;
    }
    send_simple(s, q, from, MSG_ACK, mb.seq);
    poll_mm(s, q, slot->mm);
}

static void mm_forget(speer_t *p, const uint8_t id[MP_ID_BYTES]) {
    for (uint32_t i = 0; i < MM_SLOTS; i++)
        if (p->mms[i].mm != NULL)
            mp__mm_on_leave(p->mms[i].mm, id);
}

/* ------------------------------------------------------------------ */
/* the call                                                            */

static void end_call(moshsim_t *s, uint32_t q, bool alone);
static void start_group(moshsim_t *s, uint32_t q);

/* LEAVE to the matchmaker of the JOIN in flight (engine: withdraw_join). */
static void withdraw_join(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    if (!p->join_pending)
        return;
    p->join_pending = false;
    if (p->join_to == q) {
        mm_forget(p, p->id);
        return;
    }
    if (p->join_to == MOSHSIM_NONE || s->p[p->join_to].known_dead)
        return;
    send_simple(s, q, p->join_to, MSG_LEAVE, 0);
}

static void local_join(moshsim_t *s, uint32_t q, const mp_join_send_t *js) {
    speer_t *p = &s->p[q];
    mm_slot_t *slot = mm_for_key(s, q, p->key, p->key_len);
    mp_member_t me;
    memset(&me, 0, sizeof me);
    memcpy(me.id, p->id, MP_ID_BYTES);
    me.weight = p->weight;
    me.bandwidth = BANDWIDTH;
    me.seq = js->seq;
    if (slot == NULL ||
        !mp__mm_on_join(slot->mm, simnet_now(s->net), &me, js->window_ms)) {
        mp__joiner_on_alone(p->joiner, p->id, js->seq);
        return;
    }
    mp__joiner_on_ack(p->joiner, p->id, js->seq);
    poll_mm(s, q, slot->mm);
}

static void pump_joiner(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    mp_join_send_t js;
    while (p->in_call && p->group == NULL && p->joiner != NULL &&
           mp__joiner_next_send(p->joiner, &js)) {
        withdraw_join(s, q);
        uint32_t to = find_id(s, js.to);
        p->join_to = to;
        p->join_pending = true;
        if (to == q) {
            local_join(s, q, &js);
            continue;
        }
        if (to == MOSHSIM_NONE || s->p[to].known_dead) {
            mp__joiner_on_peer_failed(p->joiner, js.to);
            continue;
        }
        const uint64_t arg[3] = {
            js.seq, (uint64_t)BANDWIDTH << 32 | js.window_ms, dbits(p->weight)};
        send(s, q, to, MSG_JOIN, arg, p->key, p->key_len);
    }
    if (!p->in_call || p->group != NULL || p->joiner == NULL)
        return;
    switch (mp__joiner_state(p->joiner)) {
    case MP_JOIN_GROUP:
        p->join_pending = false;
        start_group(s, q);
        break;
    case MP_JOIN_ALONE:
        withdraw_join(s, q);
        end_call(s, q, true);
        break;
    default:
        break;
    }
}

static uint32_t member_index(const speer_t *p, uint32_t peer) {
    for (uint32_t i = 0; i < p->n; i++)
        if (p->members[i] == peer && i != p->self)
            return i;
    return MOSHSIM_NONE;
}

static void feed_part(moshsim_t *s, uint32_t q, uint32_t from, uint32_t kind,
                      uint32_t share, uint32_t part, const float *data,
                      uint32_t count, double wsum) {
    speer_t *p = &s->p[q];
    uint32_t i = member_index(p, from);
    if (i == MOSHSIM_NONE)
        return;
    mp__group_on_part(p->group, simnet_now(s->net), i, (mp_part_kind_t)kind,
                      share, part, data, count, wsum);
}

static void clear_held(speer_t *p) {
    for (size_t i = 0; i < p->nheld; i++)
        free(p->held[i].data);
    p->nheld = 0;
}

static void start_group(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__joiner_group(p->joiner, &n, &self, &gid);
    uint64_t now = simnet_now(s->net);
    double w[MP_GROUP_MAX];
    uint32_t bw[MP_GROUP_MAX];
    p->n = n;
    p->self = self;
    p->gid = gid;
    for (uint32_t i = 0; i < n; i++) {
        w[i] = m[i].weight;
        bw[i] = m[i].bandwidth;
        p->members[i] = find_id(s, m[i].id);
    }
    const uint8_t *mm = mp__joiner_matchmaker(p->joiner);
    p->last.matchmaker = mm != NULL ? find_id(s, mm) : MOSHSIM_NONE;
    p->last.group_id = gid;
    p->last.roster = n;
    p->last.slot = self;
    p->last.group_ms = now;
    mp_group_cfg_t gc = {
        .round_id = gid,
        .n = n,
        .self = self,
        .weights = w,
        .bandwidths = bw,
        .values = p->values,
        .count = s->c.count,
        .part_elems = MP_PART_ELEMS_DEFAULT,
        .now_ms = now,
        .deadline_ms = p->deadline,
        .peer_timeout_ms = s->c.peer_timeout_ms,
    };
    if (mp__group_new(&gc, &p->group) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__group_new failed\n");
        abort();
    }
    /* members we know to be gone (the engine: no session with them) */
    for (uint32_t i = 0; i < n; i++)
        if (i != self &&
            (p->members[i] == MOSHSIM_NONE || s->p[p->members[i]].known_dead))
            mp__group_on_member_failed(p->group, now, i);
    /* parts that raced ahead of our GROUP */
    for (size_t i = 0; i < p->nheld; i++) {
        held_t *h = &p->held[i];
        if (h->gid == gid)
            feed_part(s, q, h->from, h->kind, h->share, h->part, h->data,
                      h->count, h->wsum);
    }
    clear_held(p);
}

static void pump_sends(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    for (uint32_t d = 0; d < p->n; d++) {
        if (d == p->self || p->members[d] == MOSHSIM_NONE)
            continue;
        mp_send_t snd;
        while (mp__group_next_send(p->group, d, &snd)) {
            const uint64_t arg[3] = {(uint64_t)snd.kind |
                                         (uint64_t)snd.share << 8 |
                                         (uint64_t)snd.part << 32,
                                     dbits(snd.wsum), p->gid};
            send(s, q, p->members[d], MSG_PART, arg, snd.data,
                 (size_t)snd.count * sizeof(float));
        }
    }
}

static void remember_gid(speer_t *p, uint64_t gid) {
    p->recent[p->recent_pos++ % 16u] = gid;
}

static bool recent_gid(const speer_t *p, uint64_t gid) {
    for (int i = 0; i < 16; i++)
        if (gid != 0 && p->recent[i] == gid)
            return true;
    return false;
}

static void on_part(moshsim_t *s, uint32_t q, uint32_t from,
                    const simnet_msg_t *m) {
    speer_t *p = &s->p[q];
    uint32_t kind = (uint32_t)(m->arg[0] & 0xff);
    uint32_t share = (uint32_t)((m->arg[0] >> 8) & 0xffffff);
    uint32_t part = (uint32_t)(m->arg[0] >> 32);
    double wsum = bitsd(m->arg[1]);
    uint64_t gid = m->arg[2];
    uint32_t count = (uint32_t)(m->len / sizeof(float));
    if (!p->in_call)
        return;
    if (p->group != NULL && gid == p->gid) {
        feed_part(s, q, from, kind, share, part, m->data, count, wsum);
        return;
    }
    if (recent_gid(p, gid) || p->nheld >= HELD_MAX)
        return;
    /* maybe the group whose GROUP message is still on its way: hold it */
    if (p->nheld == p->capheld) {
        p->capheld = p->capheld ? 2 * p->capheld : 16;
        p->held = xrealloc(p->held, p->capheld * sizeof *p->held);
    }
    held_t *h = &p->held[p->nheld++];
    *h = (held_t){.gid = gid,
                  .from = from,
                  .kind = kind,
                  .share = share,
                  .part = part,
                  .count = count,
                  .wsum = wsum};
    h->data = xmalloc(m->len);
    memcpy(h->data, m->data, m->len);
}

static void end_call(moshsim_t *s, uint32_t q, bool alone) {
    speer_t *p = &s->p[q];
    if (p->group == NULL)
        withdraw_join(s, q);
    moshsim_call_t *c = &p->last;
    c->ended = true;
    c->end_ms = simnet_now(s->net);
    c->group_size = 1;
    c->group_weight = p->weight;
    c->fraction_averaged = 0;
    c->peers_failed = 0;
    if (p->group != NULL && !alone) {
        mp_group_result_t gr;
        mp__group_result(p->group, &gr);
        c->group_size = gr.group_size;
        c->group_weight = gr.group_weight;
        c->fraction_averaged = gr.fraction_averaged;
        c->peers_failed = gr.peers_failed;
    } else if (p->joiner != NULL && p->group == NULL) {
        const uint8_t *mm = mp__joiner_matchmaker(p->joiner);
        c->matchmaker = mm != NULL ? find_id(s, mm) : MOSHSIM_NONE;
    }
    /* the next round's key and weight */
    if (p->group != NULL)
        mp__grid_shift(&p->grid, p->self);
    else
        mp__grid_shift_random(&p->grid);
    p->weight = c->group_weight / (double)c->group_size;
    if (p->gid != 0)
        remember_gid(p, p->gid);
    mp__group_free(p->group);
    p->group = NULL;
    mp__joiner_free(p->joiner);
    p->joiner = NULL;
    p->gid = 0;
    p->n = 0;
    p->join_pending = false;
    clear_held(p);
    p->in_call = false;
}

/* ------------------------------------------------------------------ */
/* views and candidates                                                */

static void rebuild_view(moshsim_t *s) {
    s->nlive = 0;
    for (uint32_t q = 0; q < s->np; q++)
        if (s->p[q].alive) {
            s->live[s->nlive] = q;
            memcpy(s->live_ids[s->nlive], s->p[q].id, MP_ID_BYTES);
            s->nlive++;
        }
    if (s->cache != NULL)
        memset(s->cache, 0, s->capcache * sizeof *s->cache);
    s->ncache = 0;
    s->view_dirty = false;
}

static size_t cache_slot(const moshsim_t *s, const uint8_t *key, size_t len) {
    uint64_t h = 0x243f6a8885a308d3u ^ len;
    for (size_t i = 0; i < len; i++)
        h = mix64(h ^ key[i]);
    return (size_t)h & (s->capcache - 1);
}

static cache_ent_t *cache_find(moshsim_t *s, const uint8_t *key, size_t len,
                               bool *fresh) {
    if (2 * (s->ncache + 1) > s->capcache) {
        cache_ent_t *old = s->cache;
        size_t oldcap = s->capcache;
        s->capcache = oldcap ? 2 * oldcap : 256;
        s->cache = xmalloc(s->capcache * sizeof *s->cache);
        memset(s->cache, 0, s->capcache * sizeof *s->cache);
        for (size_t i = 0; i < oldcap; i++) {
            if (old[i].len == 0)
                continue;
            size_t j = cache_slot(s, old[i].key, old[i].len);
            while (s->cache[j].len != 0)
                j = (j + 1) & (s->capcache - 1);
            s->cache[j] = old[i];
        }
        free(old);
    }
    size_t i = cache_slot(s, key, len);
    for (;; i = (i + 1) & (s->capcache - 1)) {
        cache_ent_t *e = &s->cache[i];
        if (e->len == 0) {
            memcpy(e->key, key, len);
            e->len = (uint8_t)len;
            s->ncache++;
            *fresh = true;
            return e;
        }
        if (e->len == len && memcmp(e->key, key, len) == 0) {
            *fresh = false;
            return e;
        }
    }
}

/* Candidates (peers) for key over ids[0..n) (peers[] maps back). */
static size_t rank_view(const uint8_t *key, size_t len,
                        const uint8_t (*ids)[MP_ID_BYTES],
                        const uint32_t *peers, size_t n, uint32_t *out) {
    uint32_t order[MOSHSIM_CANDIDATES];
    size_t k = mp__rendezvous_top(key, len, ids, n, MOSHSIM_CANDIDATES, order);
    for (size_t i = 0; i < k; i++)
        out[i] = peers[order[i]];
    return k;
}

/* The view of peer q for its call: default (NULL) or in s->vbuf. */
static size_t custom_view(moshsim_t *s, uint32_t q) {
    if (s->view_fn == NULL)
        return SIZE_MAX;
    size_t n = s->view_fn(s->view_user, q, s->live, s->nlive, s->vbuf);
    if (n == SIZE_MAX)
        return n;
    if (n > s->np)
        n = s->np;
    bool self = false;
    for (size_t i = 0; i < n; i++)
        self |= s->vbuf[i] == q;
    if (!self)
        s->vbuf[n++] = q; /* capv >= np + 1 */
    for (size_t i = 0; i < n; i++)
        memcpy(s->vids[i], s->p[s->vbuf[i]].id, MP_ID_BYTES);
    return n;
}

static size_t make_key(const moshsim_t *s, const mp_grid_t *g,
                       uint8_t key[MP_KEY_MAX]) {
    uint64_t cnt = s->c.count;
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(cnt >> (8 * i));
    uint8_t gk[MP_GRID_KEY_MAX];
    size_t gl = mp__grid_key(g, gk);
    memcpy(key + 8, gk, gl);
    return 8 + gl;
}

static void start_call(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    p->in_call = true;
    p->deadline = now + s->c.round_timeout_ms - MARGIN_MS;
    memset(&p->last, 0, sizeof p->last);
    p->last.round = s->round;
    p->last.start_ms = now;
    p->last.matchmaker = MOSHSIM_NONE;
    s->called++;

    size_t nview = custom_view(s, q);
    bool custom = nview != SIZE_MAX;
    mp__grid_set_estimate(&p->grid, custom ? nview : s->nlive);
    p->key_len = make_key(s, &p->grid, p->key);
    uint32_t cand[MOSHSIM_CANDIDATES];
    size_t k;
    if (custom) {
        k = rank_view(p->key, p->key_len,
                      (const uint8_t(*)[MP_ID_BYTES])s->vids, s->vbuf, nview,
                      cand);
    } else {
        bool fresh;
        cache_ent_t *e = cache_find(s, p->key, p->key_len, &fresh);
        if (fresh)
            e->n = (uint8_t)rank_view(
                p->key, p->key_len, (const uint8_t(*)[MP_ID_BYTES])s->live_ids,
                s->live, s->nlive, e->cand);
        k = e->n;
        memcpy(cand, e->cand, k * sizeof cand[0]);
    }
    uint8_t ids[MOSHSIM_CANDIDATES][MP_ID_BYTES];
    for (size_t i = 0; i < k; i++)
        memcpy(ids[i], s->p[cand[i]].id, MP_ID_BYTES);
    uint32_t win = s->c.matchmaking_ms;
    uint32_t ack = win / 2 < 200 ? 200 : win / 2 > 5000 ? 5000 : win / 2;
    if (mp__joiner_new((const uint8_t(*)[MP_ID_BYTES])ids, k, p->join_seq, now,
                       win, ack, GRACE_MS, &p->joiner) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__joiner_new failed\n");
        abort();
    }
    p->join_seq += 1000;
}

/* ------------------------------------------------------------------ */
/* event handling                                                      */

static uint64_t min64(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}

static void schedule_wake(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t w = NONE64;
    if (p->in_call) {
        if (p->group != NULL)
            w = mp__group_next_wakeup(p->group);
        else
            w = mp__joiner_next_wakeup(p->joiner);
        w = min64(w, p->deadline + MARGIN_MS);
    }
    for (uint32_t i = 0; i < MM_SLOTS; i++)
        if (p->mms[i].mm != NULL)
            w = min64(w, mp__mm_next_wakeup(p->mms[i].mm));
    if (w != NONE64 && (p->wake_at == NONE64 || w < p->wake_at)) {
        simnet_timer(s->net, node_of(q), w, TAG_WAKE);
        p->wake_at = w;
    }
}

static void after_event(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    if (p->in_call && p->group == NULL)
        pump_joiner(s, q);
    if (p->in_call && p->group != NULL) {
        pump_sends(s, q);
        if ((mp__group_done(p->group) && !mp__group_has_sends(p->group)) ||
            now >= p->deadline + MARGIN_MS)
            end_call(s, q, false);
    } else if (p->in_call && now >= p->deadline + MARGIN_MS) {
        end_call(s, q, true);
    }
    schedule_wake(s, q);
}

/* A crash of peer v becomes known (its connections dropped). */
static void notice(moshsim_t *s, uint32_t v) {
    s->p[v].known_dead = true;
    for (uint32_t q = 0; q < s->np; q++) {
        speer_t *p = &s->p[q];
        if (!p->alive || q == v)
            continue;
        mm_forget(p, s->p[v].id);
        bool touched = false;
        if (p->in_call && p->group == NULL && p->joiner != NULL) {
            touched = p->join_pending && p->join_to == v;
            mp__joiner_on_peer_failed(p->joiner, s->p[v].id);
        } else if (p->in_call && p->group != NULL) {
            uint32_t i = member_index(p, v);
            if (i != MOSHSIM_NONE) {
                mp__group_on_member_failed(p->group, simnet_now(s->net), i);
                touched = true;
            }
        }
        if (touched)
            after_event(s, q);
    }
}

static void on_msg(simnet_t *net, uint32_t node, const simnet_msg_t *m,
                   void *user) {
    moshsim_t *s = user;
    (void)net;
    if (node == 0 || m->src == 0)
        return;
    uint32_t q = node - 1, from = m->src - 1;
    speer_t *p = &s->p[q];
    const uint8_t *fid = s->p[from].id;
    switch (m->type) {
    case MSG_JOIN:
        on_join(s, q, from, m);
        break;
    case MSG_LEAVE:
        mm_forget(p, fid);
        break;
    case MSG_ACK:
        if (p->in_call && p->group == NULL && p->joiner != NULL)
            mp__joiner_on_ack(p->joiner, fid, m->arg[0]);
        break;
    case MSG_ALONE:
        if (p->in_call && p->group == NULL && p->joiner != NULL)
            mp__joiner_on_alone(p->joiner, fid, m->arg[0]);
        break;
    case MSG_GROUP: {
        uint32_t n = (uint32_t)m->arg[2];
        if (p->in_call && p->group == NULL && p->joiner != NULL &&
            n <= MP_GROUP_MAX && m->len == n * sizeof(mp_member_t))
            mp__joiner_on_group(p->joiner, fid, m->arg[0], m->arg[1], m->data,
                                n, p->id);
        break;
    }
    case MSG_PART:
        on_part(s, q, from, m);
        break;
    default:
        break;
    }
    after_event(s, q);
}

static void on_timer(simnet_t *net, uint32_t node, uint64_t tag, void *user) {
    moshsim_t *s = user;
    uint64_t now = simnet_now(net);
    if (node == 0) {
        notice(s, (uint32_t)tag);
        return;
    }
    uint32_t q = node - 1;
    speer_t *p = &s->p[q];
    switch (tag & 0xff) {
    case TAG_START:
        if ((tag >> 8) == s->round && !p->in_call)
            start_call(s, q);
        break;
    case TAG_WAKE:
        if (p->wake_at != NONE64 && now >= p->wake_at)
            p->wake_at = NONE64;
        if (p->in_call && p->group == NULL && p->joiner != NULL)
            mp__joiner_on_tick(p->joiner, now);
        if (p->in_call && p->group != NULL)
            mp__group_on_tick(p->group, now);
        for (uint32_t i = 0; i < MM_SLOTS; i++)
            if (p->mms[i].mm != NULL && mp__mm_next_wakeup(p->mms[i].mm) <= now)
                poll_mm(s, q, p->mms[i].mm);
        break;
    default:
        break;
    }
    after_event(s, q);
}

static const simnet_ops_t ops = {on_msg, on_timer};

static void kill_hook(simnet_t *net, uint32_t node, void *user) {
    moshsim_t *s = user;
    if (node == 0)
        return;
    s->p[node - 1].alive = false;
    s->view_dirty = true;
    if (s->c.notice_ms != MOSHSIM_NEVER)
        simnet_timer(net, 0, simnet_now(net) + s->c.notice_ms, node - 1);
}

/* ------------------------------------------------------------------ */
/* swarm                                                               */

void moshsim_cfg_init(moshsim_cfg_t *c) {
    memset(c, 0, sizeof *c);
    c->peers = 64;
    c->group_size = 8;
    c->min_group_size = 2;
    c->count = 16;
    c->seed = 1;
    c->matchmaking_ms = 2000;
    c->round_timeout_ms = 30000;
    c->peer_timeout_ms = 5000;
    c->latency_ms = 5;
    c->latency_spread_ms = 20;
    c->start_jitter_ms = 50;
    c->notice_ms = 100;
    c->rto_ms = 200;
}

static double normal01(simnet_rng_t *r) {
    /* Box-Muller; u1 in (0, 1] */
    double u1 = 1.0 - simnet_rng01(r), u2 = simnet_rng01(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static double draw_weight(moshsim_t *s) {
    return s->c.random_weights ? 0.5 + simnet_rng01(&s->data) : 1.0;
}

/* Appends a peer; values NULL: fresh standard normal values. */
static uint32_t add_peer(moshsim_t *s, const float *values, int64_t position) {
    if (s->np == s->capp) {
        s->capp = s->capp ? 2 * s->capp : 64;
        s->p = xrealloc(s->p, s->capp * sizeof *s->p);
    }
    uint32_t q = s->np;
    speer_t *p = &s->p[q];
    memset(p, 0, sizeof *p);
    for (size_t b = 0; b < MP_ID_BYTES; b += 8) {
        uint64_t x = mix64(s->id_state++);
        memcpy(p->id + b, &x, 8);
    }
    p->alive = true;
    p->wake_at = NONE64;
    p->join_seq = 1;
    p->values = xmalloc(s->c.count * sizeof(float));
    p->members = xmalloc(MP_GROUP_MAX * sizeof *p->members);
    for (uint32_t e = 0; e < s->c.count; e++)
        p->values[e] = values != NULL ? values[e] : (float)normal01(&s->data);
    p->weight = draw_weight(s);
    if (mp__grid_init(&p->grid, s->c.group_size, s->c.dims, position,
                      mix64(s->c.seed * 31 + q)) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__grid_init failed\n");
        abort();
    }
    p->last.matchmaker = MOSHSIM_NONE;
    s->np++;
    uint32_t node = simnet_add_node(s->net, &ops, s);
    if (node != node_of(q)) {
        fprintf(stderr, "moshsim: node numbering broke\n");
        abort();
    }
    if (!idx_grow(s, s->np))
        idx_put(s, q);
    if (s->capv < (size_t)s->np + 1) {
        s->capv = 2 * ((size_t)s->np + 1);
        s->vbuf = xrealloc(s->vbuf, s->capv * sizeof *s->vbuf);
        s->vids = xrealloc(s->vids, s->capv * sizeof *s->vids);
        s->live = xrealloc(s->live, s->capv * sizeof *s->live);
        s->live_ids = xrealloc(s->live_ids, s->capv * sizeof *s->live_ids);
    }
    s->view_dirty = true;
    return q;
}

moshsim_t *moshsim_new(const moshsim_cfg_t *c) {
    const char *bad = NULL;
    if (c->peers < 1)
        bad = "peers must be >= 1";
    else if (c->group_size < 2 || c->group_size > MP_GROUP_MAX)
        bad = "group size must be 2..64";
    else if (c->min_group_size > c->group_size)
        bad = "min group size must be <= group size";
    else if (c->dims > MP_GRID_DIMS_MAX)
        bad = "dims must be 0..8";
    else if (c->count < 1 || c->count > (1u << 24))
        bad = "count must be 1..2^24";
    else if (!(c->fail_prob >= 0 && c->fail_prob <= 1))
        bad = "fail probability must be in [0, 1]";
    else if (!(c->loss >= 0 && c->loss < 1))
        bad = "loss must be in [0, 1)";
    else if (c->matchmaking_ms < 10 ||
             c->round_timeout_ms < c->matchmaking_ms + 500 ||
             c->peer_timeout_ms < 10)
        bad = "bad timeouts";
    if (bad != NULL) {
        fprintf(stderr, "moshsim: %s\n", bad);
        return NULL;
    }
    moshsim_t *s = xmalloc(sizeof *s);
    memset(s, 0, sizeof *s);
    s->c = *c;
    s->net = simnet_new(mix64(c->seed ^ 0x6e6574));
    simnet_set_default_link(s->net, c->latency_ms, 0);
    simnet_set_latency_spread(s->net, c->latency_spread_ms);
    if (c->loss > 0)
        simnet_set_retransmit(s->net, (uint32_t)(c->loss * 1e6 + 0.5),
                              c->rto_ms);
    simnet_set_kill_hook(s->net, kill_hook, s);
    simnet_rng_seed(&s->rng, mix64(c->seed ^ 0x706c616e));
    simnet_rng_seed(&s->data, mix64(c->seed ^ 0x64617461));
    s->id_state = mix64(c->seed ^ 0x6964);
    if (simnet_add_node(s->net, &ops, s) != 0) { /* the driver */
        fprintf(stderr, "moshsim: node numbering broke\n");
        abort();
    }
    for (uint32_t i = 0; i < c->peers; i++)
        add_peer(s, NULL, c->random_positions ? -1 : (int64_t)i);
    s->scale = 0;
    for (uint32_t q = 0; q < s->np; q++)
        for (uint32_t e = 0; e < c->count; e++)
            s->scale = fmax(s->scale, fabs((double)s->p[q].values[e]));
    if (s->scale == 0)
        s->scale = 1;
    s->next_start = 1000;
    return s;
}

static void free_call(speer_t *p) {
    mp__group_free(p->group);
    p->group = NULL;
    mp__joiner_free(p->joiner);
    p->joiner = NULL;
    clear_held(p);
    free(p->held);
    p->held = NULL;
    p->capheld = 0;
}

void moshsim_free(moshsim_t *s) {
    if (s == NULL)
        return;
    for (uint32_t q = 0; q < s->np; q++) {
        speer_t *p = &s->p[q];
        free_call(p);
        for (uint32_t i = 0; i < MM_SLOTS; i++)
            mp__mm_free(p->mms[i].mm);
        free(p->values);
        free(p->members);
    }
    free(s->p);
    free(s->idx);
    free(s->live);
    free(s->live_ids);
    free(s->cache);
    free(s->vbuf);
    free(s->vids);
    free(s->kills);
    simnet_free(s->net);
    free(s);
}

/* Picks a random live peer (s->live must be current), or NONE. */
static uint32_t random_live(moshsim_t *s) {
    if (s->nlive == 0)
        return MOSHSIM_NONE;
    return s->live[simnet_rng_below(&s->rng, s->nlive)];
}

static void churn(moshsim_t *s, uint64_t t0) {
    if (s->c.churn == 0)
        return;
    /* leavers: distinct live peers (one always stays), by a partial
     * Fisher-Yates shuffle */
    uint32_t *pool = xmalloc((s->nlive + 1) * sizeof *pool);
    memcpy(pool, s->live, s->nlive * sizeof *pool);
    size_t npool = s->nlive;
    size_t nleave = s->c.churn < npool ? s->c.churn : npool ? npool - 1 : 0;
    uint32_t span = s->c.matchmaking_ms + 1000;
    for (size_t i = 0; i < nleave; i++) {
        size_t j = i + simnet_rng_below(&s->rng, npool - i);
        uint32_t v = pool[j];
        pool[j] = pool[i];
        pool[i] = v;
        simnet_kill_at(s->net, node_of(v),
                       t0 + simnet_rng_below(&s->rng, span));
        s->left++;
    }
    /* joiners: the state of a random live peer, a random grid position */
    for (uint32_t i = 0; i < s->c.churn; i++) {
        uint32_t from = random_live(s);
        float *copy = xmalloc(s->c.count * sizeof *copy);
        if (from != MOSHSIM_NONE)
            memcpy(copy, s->p[from].values, s->c.count * sizeof *copy);
        add_peer(s, from != MOSHSIM_NONE ? copy : NULL, -1);
        free(copy);
        s->joined++;
    }
    free(pool);
}

/* Frees the call state of peers that died (they get no more events). */
static void reap(moshsim_t *s) {
    for (uint32_t q = 0; q < s->np; q++) {
        speer_t *p = &s->p[q];
        if (p->alive ||
            (p->group == NULL && p->joiner == NULL && p->held == NULL))
            continue;
        free_call(p);
        p->in_call = false;
        for (uint32_t i = 0; i < MM_SLOTS; i++) {
            mp__mm_free(p->mms[i].mm);
            p->mms[i].mm = NULL;
        }
    }
}

typedef struct grp {
    uint64_t gid;
    uint32_t roster;
} grp_t;

static int cmp_grp(const void *a, const void *b) {
    const grp_t *x = a, *y = b;
    if (x->gid != y->gid)
        return x->gid < y->gid ? -1 : 1;
    return x->roster < y->roster ? -1 : x->roster > y->roster;
}

static void measure(const moshsim_t *s, moshsim_stats_t *st) {
    uint32_t cnt = s->c.count;
    double *mean = xmalloc(cnt * sizeof *mean);
    double wsum = 0;
    for (uint32_t e = 0; e < cnt; e++)
        mean[e] = 0;
    st->live = 0;
    for (uint32_t q = 0; q < s->np; q++) {
        const speer_t *p = &s->p[q];
        if (!p->alive)
            continue;
        st->live++;
        wsum += p->weight;
        for (uint32_t e = 0; e < cnt; e++)
            mean[e] += p->weight * (double)p->values[e];
    }
    for (uint32_t e = 0; e < cnt; e++)
        mean[e] = wsum > 0 ? mean[e] / wsum : 0;
    double sq = 0, dev = 0;
    for (uint32_t q = 0; q < s->np; q++) {
        const speer_t *p = &s->p[q];
        if (!p->alive)
            continue;
        for (uint32_t e = 0; e < cnt; e++) {
            double d = (double)p->values[e] - mean[e];
            sq += d * d;
            dev = fmax(dev, fabs(d));
        }
    }
    st->mse = st->live ? sq / ((double)st->live * cnt) : 0;
    st->maxdev = dev / s->scale;
    free(mean);
}

void moshsim_measure(const moshsim_t *s, moshsim_stats_t *out) {
    memset(out, 0, sizeof *out);
    out->round = s->round;
    measure(s, out);
}

void moshsim_round(moshsim_t *s, moshsim_stats_t *out) {
    s->round++;
    uint64_t t0 = s->next_start;
    s->last_start = t0;
    s->left = s->joined = s->called = s->skipped = 0;
    if (s->view_dirty)
        rebuild_view(s);
    churn(s, t0);
    for (size_t i = 0; i < s->nkills; i++)
        if (s->kills[i].peer < s->np)
            simnet_kill_at(s->net, node_of(s->kills[i].peer),
                           t0 + s->kills[i].after_ms);
    s->nkills = 0;
    if (s->view_dirty)
        rebuild_view(s);
    /* who calls, and when */
    for (size_t i = 0; i < s->nlive; i++) {
        uint32_t q = s->live[i];
        if (s->c.fail_prob > 0 && simnet_rng01(&s->rng) < s->c.fail_prob) {
            s->skipped++;
            continue;
        }
        uint64_t at =
            t0 + simnet_rng_below(&s->rng, (uint64_t)s->c.start_jitter_ms + 1);
        simnet_timer(s->net, node_of(q), at,
                     TAG_START | (uint64_t)s->round << 8);
    }
    simnet_run(s->net, UINT64_MAX);
    s->next_start = simnet_now(s->net) + ROUND_GAP;
    reap(s);

    memset(out, 0, sizeof *out);
    out->round = s->round;
    out->called = s->called;
    out->skipped = s->skipped;
    out->left = s->left;
    out->joined = s->joined;
    /* groups as their members saw them: (group id, roster size) pairs */
    grp_t *g = xmalloc(((size_t)s->np + 1) * sizeof *g);
    size_t ng = 0;
    for (uint32_t q = 0; q < s->np; q++) {
        const speer_t *p = &s->p[q];
        const moshsim_call_t *c = &p->last;
        if (c->round != s->round)
            continue;
        if (!c->ended) {
            out->hung += p->alive;
            continue;
        }
        if (c->end_ms - c->start_ms > out->max_call_ms)
            out->max_call_ms = c->end_ms - c->start_ms;
        if (c->group_id == 0) {
            out->alone++;
            continue;
        }
        out->degraded += c->peers_failed > 0;
        g[ng++] = (grp_t){c->group_id, c->roster};
    }
    qsort(g, ng, sizeof *g, cmp_grp);
    uint64_t sizes = 0;
    for (size_t i = 0; i < ng; i++) {
        if (i > 0 && g[i].gid == g[i - 1].gid)
            continue;
        uint32_t n = g[i].roster;
        out->groups++;
        out->full_groups += n == s->c.group_size;
        sizes += n;
        if (out->groups == 1 || n < out->min_size)
            out->min_size = n;
        if (n > out->max_size)
            out->max_size = n;
    }
    out->mean_size = out->groups ? (double)sizes / out->groups : 0;
    free(g);
    measure(s, out);
}

/* ------------------------------------------------------------------ */
/* accessors                                                           */

uint32_t moshsim_peers(const moshsim_t *s) {
    return s->np;
}

bool moshsim_alive(const moshsim_t *s, uint32_t peer) {
    return peer < s->np && s->p[peer].alive;
}

const float *moshsim_values(const moshsim_t *s, uint32_t peer) {
    return peer < s->np ? s->p[peer].values : NULL;
}

double moshsim_weight(const moshsim_t *s, uint32_t peer) {
    return peer < s->np ? s->p[peer].weight : 0;
}

const moshsim_call_t *moshsim_last_call(const moshsim_t *s, uint32_t peer) {
    return peer < s->np ? &s->p[peer].last : NULL;
}

const uint8_t *moshsim_id(const moshsim_t *s, uint32_t peer) {
    return peer < s->np ? s->p[peer].id : NULL;
}

size_t moshsim_next_key(const moshsim_t *s, uint32_t peer,
                        uint8_t key[MP_KEY_MAX]) {
    if (peer >= s->np)
        return 0;
    mp_grid_t g = s->p[peer].grid;
    size_t live = 0;
    for (uint32_t q = 0; q < s->np; q++)
        live += s->p[q].alive;
    mp__grid_set_estimate(&g, live);
    return make_key(s, &g, key);
}

uint32_t moshsim_candidate(const moshsim_t *s, const uint8_t *key,
                           size_t key_len, uint32_t rank) {
    size_t n = 0;
    uint8_t(*ids)[MP_ID_BYTES] = xmalloc(((size_t)s->np + 1) * MP_ID_BYTES);
    uint32_t *peers = xmalloc(((size_t)s->np + 1) * sizeof *peers);
    uint32_t *order = xmalloc(((size_t)s->np + 1) * sizeof *order);
    for (uint32_t q = 0; q < s->np; q++)
        if (s->p[q].alive) {
            memcpy(ids[n], s->p[q].id, MP_ID_BYTES);
            peers[n++] = q;
        }
    uint32_t r = MOSHSIM_NONE;
    size_t k =
        mp__rendezvous_top(key, key_len, (const uint8_t(*)[MP_ID_BYTES])ids, n,
                           (size_t)rank + 1, order);
    if (k > rank)
        r = peers[order[rank]];
    free(ids);
    free(peers);
    free(order);
    return r;
}

uint64_t moshsim_next_start(const moshsim_t *s) {
    return s->next_start;
}

uint64_t moshsim_last_start(const moshsim_t *s) {
    return s->last_start;
}

void moshsim_kill_next_round(moshsim_t *s, uint32_t peer, uint32_t after_ms) {
    if (s->nkills == s->capkills) {
        s->capkills = s->capkills ? 2 * s->capkills : 8;
        s->kills = xrealloc(s->kills, s->capkills * sizeof *s->kills);
    }
    s->kills[s->nkills++] = (kill_req_t){peer, after_ms};
}

void moshsim_set_view_hook(moshsim_t *s, moshsim_view_fn fn, void *user) {
    s->view_fn = fn;
    s->view_user = user;
}

uint64_t moshsim_digest(const moshsim_t *s) {
    uint64_t h = simnet_trace_hash(s->net);
    for (uint32_t q = 0; q < s->np; q++) {
        const speer_t *p = &s->p[q];
        h = mix64(h ^ (uint64_t)p->alive);
        h = mix64(h ^ dbits(p->weight));
        for (uint32_t e = 0; e < s->c.count; e++) {
            uint32_t u;
            memcpy(&u, &p->values[e], sizeof u);
            h = mix64(h ^ u);
        }
        uint8_t key[MP_GRID_KEY_MAX];
        size_t kl = mp__grid_key(&p->grid, key);
        for (size_t i = 0; i < kl; i++)
            h = mix64(h ^ key[i]);
    }
    return h;
}

simnet_t *moshsim_net(moshsim_t *s) {
    return s->net;
}
