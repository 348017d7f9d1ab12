/* SPDX-License-Identifier: MIT */
/*
 * simnet.c - the deterministic in-memory network of the simulation tests
 * (see simnet.h): a 4-ary heap of events ordered by (virtual ms, sequence
 * number), nodes with handlers, directed links with latency, serialized
 * bandwidth, jitter, loss and partitions, node kills, and a seeded
 * xoshiro256** generator. No wall clock, no rand(), no hash-order effects:
 * the same seed and the same calls replay the same run byte for byte.
 */
#include "sim/simnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000u
#define NS_PER_S 1000000000u

enum { EV_MSG = 1, EV_TIMER, EV_KILL };

/* A message in flight; the payload follows at a 16-byte aligned offset. */
typedef struct imsg {
    simnet_msg_t m;
    uint64_t tx_end_ns; /* when its last byte left the sender */
} imsg_t;

#define IMSG_HDR ((sizeof(imsg_t) + 15u) & ~(size_t)15u)

typedef struct event {
    uint64_t time;
    uint64_t seq;
    uint32_t kind;
    uint32_t node;
    union {
        imsg_t *msg;
        uint64_t tag;
    } u;
} event_t;

typedef struct node {
    const simnet_ops_t *ops;
    void *user;
    uint64_t bw;         /* 0 = unlimited */
    uint64_t events;     /* dispatched to this node */
    uint64_t kill_after; /* UINT64_MAX = never */
    uint64_t death;      /* ms, UINT64_MAX = alive */
} node_t;

#define L_LAT 1u
#define L_BW 2u
#define L_DOWN 4u
#define EMPTY_KEY UINT64_MAX

typedef struct link {
    uint64_t key;     /* a << 32 | b, EMPTY_KEY = free slot */
    uint64_t busy_ns; /* end of the last queued transmission */
    uint64_t last_ms; /* last delivery time (FIFO under jitter) */
    uint64_t bw;
    uint32_t lat;
    uint32_t flags;
} link_t;

struct simnet {
    uint64_t now;
    uint64_t seq;
    bool stop;

    event_t *heap;
    size_t nheap, capheap;

    node_t *nodes;
    uint32_t nnodes, capnodes;

    link_t *links;
    size_t nlinks, caplinks; /* caplinks is a power of two */

    uint32_t def_lat;
    uint64_t def_bw;
    uint32_t jitter;
    uint32_t loss_ppm;
    uint32_t overhead;
    uint32_t spread;   /* extra per-link latency, 0..spread ms */
    uint64_t pair_key; /* hash key of the per-link latency */
    uint32_t retx_ppm; /* loss per transmission, repaired by retransmission */
    uint32_t retx_rto; /* first retransmission timeout, ms */

    void (*kill_hook)(simnet_t *, uint32_t, void *);
    void *kill_user;

    simnet_rng_t rng;
    simnet_stats_t stats;
    uint64_t trace;
    union free_msg *free_small; /* recycled small messages */
};

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, "simnet: out of memory\n");
        abort();
    }
    return q;
}

/* ---- random ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

void simnet_rng_seed(simnet_rng_t *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

uint64_t simnet_rng_next(simnet_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

uint64_t simnet_rng_below(simnet_rng_t *r, uint64_t bound) {
    /* Rejection sampling keeps the result unbiased. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
        x = simnet_rng_next(r);
    } while (x >= lim);
    return x % bound;
}

double simnet_rng01(simnet_rng_t *r) {
    return (double)(simnet_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t simnet_rand(simnet_t *s) {
    return simnet_rng_next(&s->rng);
}

uint64_t simnet_rand_below(simnet_t *s, uint64_t bound) {
    return simnet_rng_below(&s->rng, bound);
}

double simnet_rand01(simnet_t *s) {
    return simnet_rng01(&s->rng);
}

static uint64_t mix(uint64_t h, uint64_t v) {
    uint64_t x = h ^ v;
    return splitmix64(&x);
}

/* ---- event heap ---- */

static bool ev_less(const event_t *a, const event_t *b) {
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

/* A 4-ary heap: half the levels of a binary one, and the four children of
 * a node share a cache line or two, which matters with 10^5 events queued.
 * The order (time, seq) is total, so the arity never changes a run. */
#define ARITY 4u

static void heap_push(simnet_t *s, event_t ev) {
    if (s->nheap == s->capheap) {
        s->capheap = s->capheap ? 2 * s->capheap : 1024;
        s->heap = xrealloc(s->heap, s->capheap * sizeof *s->heap);
    }
    ev.seq = s->seq++;
    size_t i = s->nheap++;
    while (i > 0) {
        size_t parent = (i - 1) / ARITY;
        if (!ev_less(&ev, &s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = ev;
}

static event_t heap_pop(simnet_t *s) {
    event_t top = s->heap[0];
    event_t last = s->heap[--s->nheap];
    size_t i = 0, n = s->nheap;
    for (;;) {
        size_t c = ARITY * i + 1;
        if (c >= n)
            break;
        size_t end = c + ARITY < n ? c + ARITY : n;
        for (size_t k = c + 1; k < end; k++)
            if (ev_less(&s->heap[k], &s->heap[c]))
                c = k;
        if (!ev_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n > 0)
        s->heap[i] = last;
    return top;
}

/* ---- message memory ---- */

/* Small messages (nearly all of them) are recycled through a free list;
 * sanitizer builds use plain malloc so ASan still sees every lifetime. */
#define SMALL_MSG 128u
#if defined(__SANITIZE_ADDRESS__)
#define SIMNET_RECYCLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMNET_RECYCLE 0
#endif
#endif
#ifndef SIMNET_RECYCLE
#define SIMNET_RECYCLE 1
#endif

typedef union free_msg {
    union free_msg *next;
    imsg_t im;
} free_msg_t;

static imsg_t *msg_alloc(simnet_t *s, size_t len) {
    size_t total = IMSG_HDR + len;
    if (SIMNET_RECYCLE && total <= SMALL_MSG) {
        if (s->free_small != NULL) {
            free_msg_t *f = s->free_small;
            s->free_small = f->next;
            return &f->im;
        }
        total = SMALL_MSG;
    }
    return xrealloc(NULL, total);
}

static void msg_free(simnet_t *s, imsg_t *im) {
    if (SIMNET_RECYCLE && IMSG_HDR + im->m.len <= SMALL_MSG) {
        free_msg_t *f = (free_msg_t *)(void *)im;
        f->next = s->free_small;
        s->free_small = f;
        return;
    }
    free(im);
}

/* ---- link table ---- */

static uint64_t link_key(uint32_t a, uint32_t b) {
    return (uint64_t)a << 32 | b;
}

static size_t link_slot(const simnet_t *s, uint64_t key) {
    uint64_t x = key;
    return (size_t)splitmix64(&x) & (s->caplinks - 1);
}

static link_t *link_find(const simnet_t *s, uint32_t a, uint32_t b) {
    if (s->caplinks == 0)
        return NULL;
    uint64_t key = link_key(a, b);
    for (size_t i = link_slot(s, key);; i = (i + 1) & (s->caplinks - 1)) {
        if (s->links[i].key == key)
            return &s->links[i];
        if (s->links[i].key == EMPTY_KEY)
            return NULL;
    }
}

static void link_rehash(simnet_t *s, size_t cap) {
    link_t *old = s->links;
    size_t oldcap = s->caplinks;
    s->links = xrealloc(NULL, cap * sizeof *s->links);
    s->caplinks = cap;
    for (size_t i = 0; i < cap; i++)
        s->links[i].key = EMPTY_KEY;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i].key == EMPTY_KEY)
            continue;
        size_t j = link_slot(s, old[i].key);
        while (s->links[j].key != EMPTY_KEY)
            j = (j + 1) & (cap - 1);
        s->links[j] = old[i];
    }
    free(old);
}

static link_t *link_get(simnet_t *s, uint32_t a, uint32_t b) {
    link_t *l = link_find(s, a, b);
    if (l != NULL)
        return l;
    if (2 * (s->nlinks + 1) > s->caplinks)
        link_rehash(s, s->caplinks ? 2 * s->caplinks : 256);
    uint64_t key = link_key(a, b);
    size_t i = link_slot(s, key);
    while (s->links[i].key != EMPTY_KEY)
        i = (i + 1) & (s->caplinks - 1);
    l = &s->links[i];
    memset(l, 0, sizeof *l);
    l->key = key;
    s->nlinks++;
    return l;
}

/* ---- nodes and configuration ---- */

simnet_t *simnet_new(uint64_t seed) {
    simnet_t *s = xrealloc(NULL, sizeof *s);
    memset(s, 0, sizeof *s);
    simnet_rng_seed(&s->rng, seed);
    s->def_lat = 1;
    s->overhead = 32;
    s->pair_key = seed ^ 0x51a7e9c0ffee1234u; /* does not touch the rng */
    s->trace = 0x6a09e667f3bcc908u;
    return s;
}

void simnet_free(simnet_t *s) {
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nheap; i++)
        if (s->heap[i].kind == EV_MSG)
            msg_free(s, s->heap[i].u.msg);
    while (s->free_small != NULL) {
        union free_msg *f = s->free_small;
        s->free_small = f->next;
        free(f);
    }
    free(s->heap);
    free(s->nodes);
    free(s->links);
    free(s);
}

uint32_t simnet_add_node(simnet_t *s, const simnet_ops_t *ops, void *user) {
    if (s->nnodes == s->capnodes) {
        s->capnodes = s->capnodes ? 2 * s->capnodes : 64;
        s->nodes = xrealloc(s->nodes, s->capnodes * sizeof *s->nodes);
    }
    node_t *nd = &s->nodes[s->nnodes];
    memset(nd, 0, sizeof *nd);
    nd->ops = ops;
    nd->user = user;
    nd->kill_after = UINT64_MAX;
    nd->death = UINT64_MAX;
    return s->nnodes++;
}

uint32_t simnet_nodes(const simnet_t *s) {
    return s->nnodes;
}

uint64_t simnet_now(const simnet_t *s) {
    return s->now;
}

void simnet_set_default_link(simnet_t *s, uint32_t latency_ms,
                             uint64_t bytes_per_s) {
    s->def_lat = latency_ms;
    s->def_bw = bytes_per_s;
}

void simnet_set_node_bw(simnet_t *s, uint32_t node, uint64_t bytes_per_s) {
    if (node < s->nnodes)
        s->nodes[node].bw = bytes_per_s;
}

void simnet_set_link(simnet_t *s, uint32_t a, uint32_t b, uint32_t latency_ms,
                     uint64_t bytes_per_s) {
    link_t *l = link_get(s, a, b);
    l->lat = latency_ms;
    l->bw = bytes_per_s;
    l->flags |= L_LAT | L_BW;
}

void simnet_set_link_down(simnet_t *s, uint32_t a, uint32_t b, bool down) {
    link_t *l = link_get(s, a, b);
    l->flags = down ? (l->flags | L_DOWN) : (l->flags & ~L_DOWN);
}

void simnet_set_jitter(simnet_t *s, uint32_t max_extra_ms) {
    s->jitter = max_extra_ms;
}

void simnet_set_loss(simnet_t *s, uint32_t ppm) {
    s->loss_ppm = ppm;
}

void simnet_set_latency_spread(simnet_t *s, uint32_t spread_ms) {
    s->spread = spread_ms;
}

void simnet_set_retransmit(simnet_t *s, uint32_t ppm, uint32_t rto_ms) {
    s->retx_ppm = ppm;
    s->retx_rto = rto_ms;
}

/* Fixed extra latency of link a -> b (0 without a spread). */
static uint32_t pair_extra(const simnet_t *s, uint32_t a, uint32_t b) {
    if (s->spread == 0)
        return 0;
    uint64_t x = s->pair_key ^ link_key(a, b);
    return (uint32_t)(splitmix64(&x) % ((uint64_t)s->spread + 1));
}

void simnet_set_overhead(simnet_t *s, uint32_t bytes) {
    s->overhead = bytes;
}

static uint64_t min_bw(uint64_t a, uint64_t b) {
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return a < b ? a : b;
}

/* Effective bandwidth of a -> b when no per-link override exists. */
static uint64_t path_bw(const simnet_t *s, uint32_t a, uint32_t b) {
    uint64_t bw = s->def_bw;
    if (a < s->nnodes)
        bw = min_bw(bw, s->nodes[a].bw);
    if (b < s->nnodes)
        bw = min_bw(bw, s->nodes[b].bw);
    return bw;
}

/* ---- actions ---- */

static uint64_t tx_ns(uint64_t bytes, uint64_t bw) {
    if (bytes <= UINT64_MAX / NS_PER_S)
        return (bytes * NS_PER_S + bw - 1) / bw;
    return bytes / bw * NS_PER_S +
           (uint64_t)((double)(bytes % bw) * 1e9 / (double)bw) + 1;
}

void simnet_send(simnet_t *s, const simnet_msg_t *m) {
    if (m->src >= s->nnodes || m->dst >= s->nnodes ||
        s->nodes[m->src].death != UINT64_MAX)
        return;
    link_t *l = link_find(s, m->src, m->dst);
    uint32_t lat = (l && (l->flags & L_LAT))
                       ? l->lat
                       : s->def_lat + pair_extra(s, m->src, m->dst);
    uint64_t bw = (l && (l->flags & L_BW)) ? l->bw : path_bw(s, m->src, m->dst);
    if ((l && (l->flags & L_DOWN)) ||
        (s->loss_ppm && simnet_rand_below(s, 1000000) < s->loss_ppm)) {
        s->stats.msgs_dropped++;
        return;
    }
    /* Retransmissions: the k-th retry goes out rto * (2^k - 1) ms late. */
    uint64_t retx_ms = 0;
    if (s->retx_ppm) {
        uint64_t rto = s->retx_rto;
        for (int k = 0; k < 10 && simnet_rand_below(s, 1000000) < s->retx_ppm;
             k++) {
            retx_ms += rto;
            rto *= 2;
        }
    }
    if (l == NULL && (bw > 0 || s->jitter > 0 || retx_ms > 0))
        l = link_get(s, m->src, m->dst);

    uint64_t now_ns = s->now * NS_PER_MS, end_ns = now_ns;
    if (bw > 0) {
        uint64_t start = l->busy_ns > now_ns ? l->busy_ns : now_ns;
        end_ns = start + tx_ns((uint64_t)m->len + s->overhead, bw);
        l->busy_ns = end_ns;
    }
    uint64_t at = (end_ns + NS_PER_MS - 1) / NS_PER_MS + lat + retx_ms;
    if (s->jitter > 0)
        at += simnet_rand_below(s, (uint64_t)s->jitter + 1);
    if (l != NULL) {
        if (at < l->last_ms)
            at = l->last_ms;
        l->last_ms = at;
    }

    imsg_t *im = msg_alloc(s, m->len);
    im->m = *m;
    im->m.data = (const unsigned char *)im + IMSG_HDR;
    if (m->len > 0)
        memcpy((unsigned char *)im + IMSG_HDR, m->data, m->len);
    im->tx_end_ns = end_ns;
    s->stats.msgs_sent++;
    heap_push(
        s, (event_t){.time = at, .kind = EV_MSG, .node = m->dst, .u.msg = im});
}

uint64_t simnet_link_free_at(const simnet_t *s, uint32_t a, uint32_t b) {
    const link_t *l = link_find(s, a, b);
    if (l == NULL)
        return s->now;
    uint64_t t = (l->busy_ns + NS_PER_MS - 1) / NS_PER_MS;
    return t > s->now ? t : s->now;
}

void simnet_timer(simnet_t *s, uint32_t node, uint64_t at_ms, uint64_t tag) {
    if (node >= s->nnodes)
        return;
    heap_push(s, (event_t){.time = at_ms > s->now ? at_ms : s->now,
                           .kind = EV_TIMER,
                           .node = node,
                           .u.tag = tag});
}

void simnet_kill(simnet_t *s, uint32_t node) {
    if (node >= s->nnodes || s->nodes[node].death != UINT64_MAX)
        return;
    s->nodes[node].death = s->now;
    s->trace = mix(s->trace, 0xdead0000u ^ node);
    if (s->kill_hook)
        s->kill_hook(s, node, s->kill_user);
}

void simnet_kill_at(simnet_t *s, uint32_t node, uint64_t at_ms) {
    if (node >= s->nnodes)
        return;
    heap_push(s, (event_t){.time = at_ms > s->now ? at_ms : s->now,
                           .kind = EV_KILL,
                           .node = node});
}

void simnet_kill_after(simnet_t *s, uint32_t node, uint64_t k) {
    if (node >= s->nnodes)
        return;
    s->nodes[node].kill_after = k;
    if (s->nodes[node].events >= k)
        simnet_kill(s, node);
}

void simnet_set_kill_hook(simnet_t *s,
                          void (*fn)(simnet_t *s, uint32_t node, void *user),
                          void *user) {
    s->kill_hook = fn;
    s->kill_user = user;
}

bool simnet_alive(const simnet_t *s, uint32_t node) {
    return node < s->nnodes && s->nodes[node].death == UINT64_MAX;
}

uint64_t simnet_death_time(const simnet_t *s, uint32_t node) {
    return node < s->nnodes ? s->nodes[node].death : UINT64_MAX;
}

uint64_t simnet_node_events(const simnet_t *s, uint32_t node) {
    return node < s->nnodes ? s->nodes[node].events : 0;
}

/* ---- the loop ---- */

static void dispatch(simnet_t *s, const event_t *ev) {
    node_t *nd = &s->nodes[ev->node];
    if (ev->kind == EV_KILL) {
        simnet_kill(s, ev->node);
        return;
    }
    if (ev->kind == EV_MSG) {
        imsg_t *im = ev->u.msg;
        const node_t *src = &s->nodes[im->m.src];
        bool cut =
            src->death != UINT64_MAX && im->tx_end_ns > src->death * NS_PER_MS;
        if (nd->death != UINT64_MAX || cut) {
            s->stats.msgs_dropped++;
            msg_free(s, im);
            return;
        }
        s->stats.msgs_delivered++;
        s->stats.bytes_delivered += im->m.len;
        s->stats.events++;
        nd->events++;
        uint64_t h = mix(s->trace, ev->time);
        h = mix(h, (uint64_t)EV_MSG << 32 | ev->node);
        h = mix(h, (uint64_t)im->m.src << 32 | im->m.type);
        for (int i = 0; i < SIMNET_ARGS; i++)
            h = mix(h, im->m.arg[i]);
        s->trace = mix(h, im->m.len);
        if (nd->ops && nd->ops->on_msg)
            nd->ops->on_msg(s, ev->node, &im->m, nd->user);
        msg_free(s, im);
    } else {
        if (nd->death != UINT64_MAX)
            return;
        s->stats.events++;
        nd->events++;
        uint64_t h = mix(s->trace, ev->time);
        h = mix(h, (uint64_t)EV_TIMER << 32 | ev->node);
        s->trace = mix(h, ev->u.tag);
        if (nd->ops && nd->ops->on_timer)
            nd->ops->on_timer(s, ev->node, ev->u.tag, nd->user);
    }
    /* The handler may have killed this node or grown the node array. */
    nd = &s->nodes[ev->node];
    if (nd->death == UINT64_MAX && nd->events == nd->kill_after)
        simnet_kill(s, ev->node);
}

uint64_t simnet_run(simnet_t *s, uint64_t until_ms) {
    uint64_t before = s->stats.events;
    s->stop = false;
    while (s->nheap > 0 && !s->stop && s->heap[0].time <= until_ms) {
        event_t ev = heap_pop(s);
        s->now = ev.time;
        dispatch(s, &ev);
    }
    return s->stats.events - before;
}

void simnet_stop(simnet_t *s) {
    s->stop = true;
}

bool simnet_idle(const simnet_t *s) {
    return s->nheap == 0;
}

void simnet_get_stats(const simnet_t *s, simnet_stats_t *out) {
    *out = s->stats;
}

uint64_t simnet_trace_hash(const simnet_t *s) {
    return s->trace;
}
