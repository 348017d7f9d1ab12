/* SPDX-License-Identifier: MIT */
/*
 * moshsim.c - the simulated swarm of moshsim.h: the peers (ids, values,
 * weights, grid positions), the id index, the default view and the shared
 * cache of candidate lists per (view, key), the rounds (who misses, churn,
 * kills, run to quiescence), the statistics and the accessors. What one
 * peer does in a round is in moshsim_peer.c.
 */
#include "sim/moshsim_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *moshsim__xmalloc(size_t n) {
    void *q = malloc(n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, "moshsim: out of memory\n");
        abort();
    }
    return q;
}

void *moshsim__xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, "moshsim: out of memory\n");
        abort();
    }
    return q;
}

uint64_t moshsim__mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* ------------------------------------------------------------------ */
/* id index                                                            */

static size_t id_slot(const moshsim_t *s, const uint8_t id[MP_ID_BYTES]) {
    uint64_t h = 0;
    memcpy(&h, id, sizeof h);
    return (size_t)moshsim__mix64(h) & (s->capidx - 1);
}

uint32_t moshsim__find_id(const moshsim_t *s, const uint8_t id[MP_ID_BYTES]) {
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
    s->idx = moshsim__xmalloc(cap * sizeof *s->idx);
    s->capidx = cap;
    for (size_t i = 0; i < cap; i++)
        s->idx[i] = MOSHSIM_NONE;
    for (uint32_t q = 0; q < s->np; q++)
        idx_put(s, q);
    return true;
}

/* ------------------------------------------------------------------ */
/* views and candidates                                                */

void moshsim__rebuild_view(moshsim_t *s) {
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
        h = moshsim__mix64(h ^ key[i]);
    return (size_t)h & (s->capcache - 1);
}

static cache_ent_t *cache_find(moshsim_t *s, const uint8_t *key, size_t len,
                               bool *fresh) {
    if (2 * (s->ncache + 1) > s->capcache) {
        cache_ent_t *old = s->cache;
        size_t oldcap = s->capcache;
        s->capcache = oldcap ? 2 * oldcap : 256;
        s->cache = moshsim__xmalloc(s->capcache * sizeof *s->cache);
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

/* Candidates (peers) for key over ids[0..n) (peers[] maps back); with
 * outbound-only peers, over the dialable ones only (matchmakers are
 * dialable peers). */
static size_t rank_view(const moshsim_t *s, const uint8_t *key, size_t len,
                        const uint8_t (*ids)[MP_ID_BYTES],
                        const uint32_t *peers, size_t n, uint32_t *out) {
    uint32_t order[MOSHSIM_CANDIDATES];
    uint8_t(*dids)[MP_ID_BYTES] = NULL;
    uint32_t *dpeers = NULL;
    if (s->c.outbound > 0) {
        dids = moshsim__xmalloc((n + 1) * sizeof *dids);
        dpeers = moshsim__xmalloc((n + 1) * sizeof *dpeers);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!s->p[peers[i]].outbound) {
                memcpy(dids[m], ids[i], MP_ID_BYTES);
                dpeers[m++] = peers[i];
            }
        ids = (const uint8_t(*)[MP_ID_BYTES])dids;
        peers = dpeers;
        n = m;
    }
    size_t k = mp__rendezvous_top(key, len, ids, n, MOSHSIM_CANDIDATES, order);
    for (size_t i = 0; i < k; i++)
        out[i] = peers[order[i]];
    free(dids);
    free(dpeers);
    return k;
}

size_t moshsim__view(moshsim_t *s, uint32_t q, bool *custom) {
    *custom = false;
    if (s->view_fn == NULL)
        return s->nlive;
    size_t n = s->view_fn(s->view_user, q, s->live, s->nlive, s->vbuf);
    if (n == SIZE_MAX)
        return s->nlive;
    *custom = true;
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

size_t moshsim__candidates(moshsim_t *s, bool custom, size_t nview,
                           const uint8_t *key, size_t len,
                           uint32_t cand[MOSHSIM_CANDIDATES]) {
    if (custom)
        return rank_view(s, key, len, (const uint8_t(*)[MP_ID_BYTES])s->vids,
                         s->vbuf, nview, cand);
    bool fresh;
    cache_ent_t *e = cache_find(s, key, len, &fresh);
    if (fresh)
        e->n = (uint8_t)rank_view(s, key, len,
                                  (const uint8_t(*)[MP_ID_BYTES])s->live_ids,
                                  s->live, s->nlive, e->cand);
    memcpy(cand, e->cand, e->n * sizeof cand[0]);
    return e->n;
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
        s->p = moshsim__xrealloc(s->p, s->capp * sizeof *s->p);
    }
    uint32_t q = s->np;
    speer_t *p = &s->p[q];
    memset(p, 0, sizeof *p);
    for (size_t b = 0; b < MP_ID_BYTES; b += 8) {
        uint64_t x = moshsim__mix64(s->id_state++);
        memcpy(p->id + b, &x, 8);
    }
    p->alive = true;
    p->wake_at = NONE64;
    p->values = moshsim__xmalloc(s->c.count * sizeof(float));
    p->members = moshsim__xmalloc(MP_GROUP_MAX * sizeof *p->members);
    for (uint32_t e = 0; e < s->c.count; e++)
        p->values[e] = values != NULL ? values[e] : (float)normal01(&s->data);
    p->weight = draw_weight(s);
    if (mp__grid_init(&p->grid, s->c.group_size, s->c.dims, position,
                      moshsim__mix64(s->c.seed * 31 + q)) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__grid_init failed\n");
        abort();
    }
    p->last.matchmaker = MOSHSIM_NONE;
    if (moshsim__rnd_new(s, q) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__rnd_new failed\n");
        abort();
    }
    s->np++;
    uint32_t node = simnet_add_node(s->net, &moshsim__ops, s);
    if (node != node_of(q)) {
        fprintf(stderr, "moshsim: node numbering broke\n");
        abort();
    }
    if (!idx_grow(s, s->np))
        idx_put(s, q);
    if (s->capv < (size_t)s->np + 1) {
        s->capv = 2 * ((size_t)s->np + 1);
        s->vbuf = moshsim__xrealloc(s->vbuf, s->capv * sizeof *s->vbuf);
        s->vids = moshsim__xrealloc(s->vids, s->capv * sizeof *s->vids);
        s->live = moshsim__xrealloc(s->live, s->capv * sizeof *s->live);
        s->live_ids =
            moshsim__xrealloc(s->live_ids, s->capv * sizeof *s->live_ids);
    }
    s->view_dirty = true;
    return q;
}

/* k distinct peers drawn by a partial Fisher-Yates shuffle on a generator
 * seeded from salt (the first k entries of the returned pool, which the
 * caller frees). */
static uint32_t *pick(moshsim_t *s, uint64_t salt, uint32_t k) {
    simnet_rng_t rng;
    simnet_rng_seed(&rng, moshsim__mix64(salt));
    uint32_t *pool = moshsim__xmalloc(s->np * sizeof *pool);
    for (uint32_t q = 0; q < s->np; q++)
        pool[q] = q;
    for (uint32_t i = 0; i < k; i++) { /* k < np: checked by the caller */
        uint32_t j = i + (uint32_t)simnet_rng_below(&rng, s->np - i);
        uint32_t v = pool[j];
        pool[j] = pool[i];
        pool[i] = v;
    }
    return pool;
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
    else if (!mp__agg_valid(&c->agg))
        bad = "bad aggregation rule";
    else if (c->outbound >= c->peers)
        bad = "outbound must be below peers";
    else if (c->byzantine >= c->peers)
        bad = "byzantine must be below peers";
    else if (!(c->byz_weight >= 0 && c->byz_weight <= MOSHPIT_WEIGHT_MAX))
        bad = "byzantine weight must be in [0, 1e15]";
    if (bad != NULL) {
        fprintf(stderr, "moshsim: %s\n", bad);
        return NULL;
    }
    moshsim_t *s = moshsim__xmalloc(sizeof *s);
    memset(s, 0, sizeof *s);
    s->c = *c;
    /* what a peer would pass to moshpit_open (the round machine's part) */
    moshpit_config_init(&s->peer_cfg);
    s->peer_cfg.group_size = c->group_size;
    s->peer_cfg.min_group_size = c->min_group_size;
    s->peer_cfg.matchmaking_ms = c->matchmaking_ms;
    s->peer_cfg.round_timeout_ms = c->round_timeout_ms;
    s->peer_cfg.peer_timeout_ms = c->peer_timeout_ms;
    s->peer_cfg.bandwidth_mbps = BANDWIDTH;
    s->net = simnet_new(moshsim__mix64(c->seed ^ 0x6e6574));
    simnet_set_default_link(s->net, c->latency_ms, 0);
    simnet_set_latency_spread(s->net, c->latency_spread_ms);
    if (c->loss > 0)
        simnet_set_retransmit(s->net, (uint32_t)(c->loss * 1e6 + 0.5),
                              c->rto_ms);
    simnet_set_kill_hook(s->net, moshsim__kill_hook, s);
    simnet_rng_seed(&s->rng, moshsim__mix64(c->seed ^ 0x706c616e));
    simnet_rng_seed(&s->data, moshsim__mix64(c->seed ^ 0x64617461));
    s->id_state = moshsim__mix64(c->seed ^ 0x6964);
    if (simnet_add_node(s->net, &moshsim__ops, s) != 0) { /* the driver */
        fprintf(stderr, "moshsim: node numbering broke\n");
        abort();
    }
    for (uint32_t i = 0; i < c->peers; i++)
        add_peer(s, NULL, c->random_positions ? -1 : (int64_t)i);
    /* Byzantine peers, then outbound-only ones: each a draw on a
     * generator of its own, so runs without them draw exactly as before */
    if (c->byzantine > 0) {
        uint32_t *pool = pick(s, c->seed ^ 0x62797a, c->byzantine);
        for (uint32_t i = 0; i < c->byzantine; i++)
            s->p[pool[i]].byz = true;
        free(pool);
    }
    if (c->outbound > 0) {
        uint32_t *pool = pick(s, c->seed ^ 0x6e6174, c->outbound);
        for (uint32_t i = 0; i < c->outbound; i++) {
            s->p[pool[i]].outbound = true;
            mp__rnd_set_noshare(s->p[pool[i]].rm, true);
        }
        free(pool);
    }
    s->hostile = MOSHSIM_NONE;
    if (c->hostile) { /* after the draws of the honest peers' values */
        s->hostile =
            add_peer(s, NULL, c->random_positions ? -1 : (int64_t)c->peers);
        s->p[s->hostile].hostile = true;
    }
    s->scale = 0;
    s->target = moshsim__xmalloc(c->count * sizeof *s->target);
    double tw = 0;
    for (uint32_t e = 0; e < c->count; e++)
        s->target[e] = 0;
    for (uint32_t q = 0; q < s->np; q++) {
        if (s->p[q].byz || s->p[q].hostile)
            continue;
        tw += s->p[q].weight;
        for (uint32_t e = 0; e < c->count; e++) {
            s->scale = fmax(s->scale, fabs((double)s->p[q].values[e]));
            s->target[e] += s->p[q].weight * (double)s->p[q].values[e];
        }
    }
    for (uint32_t e = 0; e < c->count; e++)
        s->target[e] /= tw;
    if (s->scale == 0)
        s->scale = 1;
    s->next_start = 1000;
    return s;
}

void moshsim_free(moshsim_t *s) {
    if (s == NULL)
        return;
    for (uint32_t q = 0; q < s->np; q++) {
        speer_t *p = &s->p[q];
        moshsim__reap(p);
        free(p->held);
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
    free(s->target);
    moshsim__wire_free(s);
    simnet_free(s->net);
    free(s);
}

/* Picks a random live peer (s->live must be current), or NONE; with
 * Byzantine peers, a random honest one (NONE if there is none). */
static uint32_t random_live(moshsim_t *s) {
    if (s->nlive == 0)
        return MOSHSIM_NONE;
    size_t k = simnet_rng_below(&s->rng, s->nlive);
    for (size_t i = 0; i < s->nlive; i++) {
        uint32_t q = s->live[(k + i) % s->nlive];
        if (!s->p[q].byz && !s->p[q].hostile)
            return q;
    }
    return MOSHSIM_NONE;
}

static void churn(moshsim_t *s, uint64_t t0) {
    if (s->c.churn == 0)
        return;
    /* leavers: distinct live peers (one always stays), by a partial
     * Fisher-Yates shuffle */
    uint32_t *pool = moshsim__xmalloc((s->nlive + 1) * sizeof *pool);
    size_t npool = 0;
    for (size_t i = 0; i < s->nlive; i++)
        if (s->live[i] != s->hostile) /* the hostile peer stays */
            pool[npool++] = s->live[i];
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
        float *copy = moshsim__xmalloc(s->c.count * sizeof *copy);
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
        if (!p->alive)
            moshsim__reap(p);
    }
}

typedef struct grp {
    uint64_t gid;
    uint32_t roster;
    bool reduces; /* the member reduces a share */
} grp_t;

static int cmp_grp(const void *a, const void *b) {
    const grp_t *x = a, *y = b;
    if (x->gid != y->gid)
        return x->gid < y->gid ? -1 : 1;
    return x->roster < y->roster ? -1 : x->roster > y->roster;
}

static void measure(const moshsim_t *s, moshsim_stats_t *st) {
    uint32_t cnt = s->c.count;
    double *mean = moshsim__xmalloc(cnt * sizeof *mean);
    double wsum = 0;
    for (uint32_t e = 0; e < cnt; e++)
        mean[e] = 0;
    st->live = 0;
    uint32_t honest = 0; /* Byzantine peers are left out of the measures */
    for (uint32_t q = 0; q < s->np; q++) {
        const speer_t *p = &s->p[q];
        if (!p->alive)
            continue;
        if (p->hostile)
            continue;
        st->live++;
        if (p->byz)
            continue;
        honest++;
        wsum += p->weight;
        for (uint32_t e = 0; e < cnt; e++)
            mean[e] += p->weight * (double)p->values[e];
    }
    for (uint32_t e = 0; e < cnt; e++)
        mean[e] = wsum > 0 ? mean[e] / wsum : 0;
    double sq = 0, dev = 0, esq = 0, emax = 0;
    for (uint32_t q = 0; q < s->np; q++) {
        const speer_t *p = &s->p[q];
        if (!p->alive || p->byz || p->hostile)
            continue;
        for (uint32_t e = 0; e < cnt; e++) {
            double d = (double)p->values[e] - mean[e];
            sq += d * d;
            dev = fmax(dev, fabs(d));
            double t = (double)p->values[e] - s->target[e];
            esq += t * t;
            emax = fmax(emax, fabs(t));
        }
    }
    st->mse = honest ? sq / ((double)honest * cnt) : 0;
    st->maxdev = dev / s->scale;
    st->err = honest ? sqrt(esq / ((double)honest * cnt)) : 0;
    st->errmax = emax;
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
        moshsim__rebuild_view(s);
    churn(s, t0);
    for (size_t i = 0; i < s->nkills; i++)
        if (s->kills[i].peer < s->np)
            simnet_kill_at(s->net, node_of(s->kills[i].peer),
                           t0 + s->kills[i].after_ms);
    s->nkills = 0;
    if (s->view_dirty)
        moshsim__rebuild_view(s);
    /* who calls, and when */
    for (size_t i = 0; i < s->nlive; i++) {
        uint32_t q = s->live[i];
        if (s->p[q].hostile)
            continue; /* it never calls (and draws nothing) */
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
    grp_t *g = moshsim__xmalloc(((size_t)s->np + 1) * sizeof *g);
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
        g[ng++] = (grp_t){c->group_id, c->roster, !p->outbound};
    }
    qsort(g, ng, sizeof *g, cmp_grp);
    uint64_t sizes = 0;
    for (size_t i = 0; i < ng; i++) {
        if (i > 0 && g[i].gid == g[i - 1].gid)
            continue;
        bool reduces = false;
        for (size_t j = i; j < ng && g[j].gid == g[i].gid; j++)
            reduces |= g[j].reduces;
        out->unreduced += !reduces;
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

bool moshsim_outbound(const moshsim_t *s, uint32_t peer) {
    return peer < s->np && s->p[peer].outbound;
}

bool moshsim_byzantine(const moshsim_t *s, uint32_t peer) {
    return peer < s->np && s->p[peer].byz;
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
    mp_grid_t g = *moshsim__grid(&s->p[peer]);
    size_t live = 0;
    for (uint32_t q = 0; q < s->np; q++)
        live += s->p[q].alive;
    mp__grid_set_estimate(&g, live);
    return mp__rnd_key_of(&g, s->c.count, &s->c.agg, key);
}

uint32_t moshsim_candidate(const moshsim_t *s, const uint8_t *key,
                           size_t key_len, uint32_t rank) {
    size_t n = 0;
    uint8_t(*ids)[MP_ID_BYTES] =
        moshsim__xmalloc(((size_t)s->np + 1) * MP_ID_BYTES);
    uint32_t *peers = moshsim__xmalloc(((size_t)s->np + 1) * sizeof *peers);
    uint32_t *order = moshsim__xmalloc(((size_t)s->np + 1) * sizeof *order);
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
        s->kills = moshsim__xrealloc(s->kills, s->capkills * sizeof *s->kills);
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
        h = moshsim__mix64(h ^ (uint64_t)p->alive);
        uint64_t wb;
        memcpy(&wb, &p->weight, sizeof wb);
        h = moshsim__mix64(h ^ wb);
        for (uint32_t e = 0; e < s->c.count; e++) {
            uint32_t u;
            memcpy(&u, &p->values[e], sizeof u);
            h = moshsim__mix64(h ^ u);
        }
        uint8_t key[MP_GRID_KEY_MAX];
        size_t kl = mp__grid_key(moshsim__grid(p), key);
        for (size_t i = 0; i < kl; i++)
            h = moshsim__mix64(h ^ key[i]);
    }
    return h;
}

simnet_t *moshsim_net(moshsim_t *s) {
    return s->net;
}

uint32_t moshsim_hostile(const moshsim_t *s) {
    return s->hostile;
}

void moshsim_hostile_set_ops(moshsim_t *s, const moshsim_hostile_ops_t *ops,
                             void *user) {
    s->hops = *ops;
    s->huser = user;
}

void moshsim_hostile_wake(moshsim_t *s, uint64_t at_ms) {
    if (s->hostile != MOSHSIM_NONE)
        simnet_timer(s->net, node_of(s->hostile), at_ms, TAG_HOSTILE);
}

void moshsim_hostile_send(moshsim_t *s, uint32_t to, bool data, const void *buf,
                          size_t len) {
    if (s->hostile == MOSHSIM_NONE || to >= s->np || to == s->hostile)
        return;
    simnet_msg_t m = {.src = node_of(s->hostile),
                      .dst = node_of(to),
                      .type = data ? MSG_FRAME : MSG_WIRE,
                      .data = buf,
                      .len = len};
    simnet_send(s->net, &m);
}

const moshsim_wire_stats_t *moshsim_wire_stats(const moshsim_t *s) {
    return &s->wstats;
}

void moshsim_peer_mem(const moshsim_t *s, uint32_t peer,
                      moshsim_peer_mem_t *out) {
    memset(out, 0, sizeof *out);
    if (peer >= s->np)
        return;
    const speer_t *p = &s->p[peer];
    if (p->rm != NULL)
        out->mm_slots = mp__rnd_mm_count(p->rm, &out->mm_pending);
    out->held = p->nheld;
    for (size_t i = 0; i < p->nheld; i++)
        out->held_bytes += (size_t)p->held[i].count * sizeof(float);
    out->in_group = p->rm != NULL && mp__rnd_group(p->rm) != NULL;
}
