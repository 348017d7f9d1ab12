/* SPDX-License-Identifier: MIT */
/*
 * test_sim_fetch.c - the state download client (core/fetch.c) in the
 * simulated network, against simple servers that hold a vector, a version
 * and a digest. Pass rules, each checked below:
 * - plain: 1,000,003 floats from 3 servers arrive bit for bit, with the
 *   server's round, every chunk exactly once;
 * - a server killed mid-transfer: the client continues from another server
 *   holding the same state without starting over (restarts 0), exact;
 * - the only other server holds a newer state: the client starts over
 *   once and ends with that state, exact;
 * - servers holding another length: ECOUNT; no servers, or servers holding
 *   nothing: ENOSTATE; all servers silent: ENOSTATE once they time out,
 *   well before the deadline;
 * - a server sending bytes that do not match its digest: detected at the
 *   end, that server dropped, the download completes from an honest one;
 * - a server that ignores the first requests: the stall re-request
 *   recovers it;
 * - a server that keeps switching versions: bounded restarts, then
 *   ETIMEDOUT, never a hang;
 * - the same seed gives the same event trace.
 */
#include "core/fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simnet.h"

#define TEST_MAX_PRINTED 50
#include "test_util.h"

#define CHUNK 65536u
#define MAXN 8

enum { M_INFO_REQ = 1, M_INFO, M_GET, M_CHUNK };
enum { SRV_HONEST = 0, SRV_LIAR, SRV_SILENT, SRV_DEAF_FIRST, SRV_FICKLE };

typedef struct node {
    int is_client;
    /* server */
    int mode;
    float *vec;
    size_t count; /* 0 = holds nothing */
    uint64_t version, round;
    uint8_t digest[32];
    uint32_t ignored;
    /* client */
    mp_fetch_t *f;
    float *buf;
    uint32_t chunks_in;
} node_t;

typedef struct world {
    simnet_t *net;
    uint32_t kill_srv, kill_after; /* kill that server after so many chunks */
    uint64_t end_ms;               /* when the client finished */
    node_t nodes[MAXN];
    uint8_t ids[MAXN][MP_ID_BYTES];
    uint32_t n;
} world_t;

static void digest_of(const float *v, size_t count, uint8_t out[32]) {
    /* four interleaved FNV-1a lanes: enough to tell vectors apart here */
    uint64_t h[4] = {0xcbf29ce484222325u, 1, 2, 3};
    const uint8_t *b = (const uint8_t *)v;
    for (size_t i = 0; i < count * 4; i++) {
        h[i & 3] ^= b[i];
        h[i & 3] *= 0x100000001b3u;
    }
    memcpy(out, h, 32);
}

static int node_of(const world_t *w, const uint8_t id[MP_ID_BYTES]) {
    for (uint32_t i = 0; i < w->n; i++)
        if (memcmp(w->ids[i], id, MP_ID_BYTES) == 0)
            return (int)i;
    return -1;
}

static void client_pump(world_t *w, uint32_t me) {
    node_t *c = &w->nodes[me];
    mp_fetch_send_t s;
    while (mp__fetch_next_send(c->f, &s)) {
        int to = node_of(w, s.to);
        if (to < 0)
            continue;
        simnet_msg_t m = {.src = me,
                          .dst = (uint32_t)to,
                          .type =
                              s.kind == MP_FETCH_SEND_INFO ? M_INFO_REQ : M_GET,
                          .arg = {s.version, s.first, s.n, 0}};
        simnet_send(w->net, &m);
    }
    uint64_t wake = mp__fetch_next_wakeup(c->f);
    if (wake != UINT64_MAX)
        simnet_timer(w->net, me, wake, 1);
}

static size_t g_count; /* what the client asked for */

static void client_verify(world_t *w, uint32_t me) {
    node_t *c = &w->nodes[me];
    while (mp__fetch_state(c->f) == MP_FETCH_VERIFY) {
        uint8_t d[32];
        digest_of(c->buf, g_count, d);
        mp__fetch_verified(c->f, simnet_now(w->net), d);
        client_pump(w, me);
    }
    mp_fetch_state_t st = mp__fetch_state(c->f);
    if ((st == MP_FETCH_DONE || st == MP_FETCH_FAILED) && w->end_ms == 0)
        w->end_ms = simnet_now(w->net);
    if (w->kill_srv && c->chunks_in >= w->kill_after &&
        simnet_alive(w->net, w->kill_srv))
        simnet_kill(w->net, w->kill_srv);
}

static void server_on_msg(world_t *w, uint32_t me, const simnet_msg_t *m) {
    node_t *s = &w->nodes[me];
    if (s->mode == SRV_SILENT)
        return;
    if (m->type == M_INFO_REQ ||
        (m->type == M_GET && m->arg[0] != s->version)) {
        if (s->mode == SRV_FICKLE && m->type == M_INFO_REQ && s->count) {
            s->version++; /* a new snapshot every time anyone asks */
        }
        simnet_msg_t r = {
            .src = me,
            .dst = m->src,
            .type = M_INFO,
            .arg = {s->count ? s->version : 0, s->round, s->count, 0},
            .data = s->digest,
            .len = 32};
        simnet_send(w->net, &r);
        return;
    }
    if (m->type != M_GET)
        return;
    if (s->mode == SRV_DEAF_FIRST && s->ignored < 2) {
        s->ignored++;
        return;
    }
    if (s->mode == SRV_FICKLE) { /* moves on while serving */
        s->version++;
        simnet_msg_t r = {.src = me,
                          .dst = m->src,
                          .type = M_INFO,
                          .arg = {s->version, s->round, s->count, 0},
                          .data = s->digest,
                          .len = 32};
        simnet_send(w->net, &r);
        return;
    }
    for (uint64_t c = m->arg[1]; c < m->arg[1] + m->arg[2]; c++) {
        size_t off = (size_t)c * CHUNK;
        if (off >= s->count)
            break;
        size_t len = s->count - off < CHUNK ? s->count - off : CHUNK;
        float *tmp = malloc(len * sizeof(float));
        memcpy(tmp, s->vec + off, len * sizeof(float));
        if (s->mode == SRV_LIAR && c == 3)
            tmp[7] += 1.0f;
        simnet_msg_t r = {.src = me,
                          .dst = m->src,
                          .type = M_CHUNK,
                          .arg = {s->version, c, len, 0},
                          .data = tmp,
                          .len = len * sizeof(float)};
        simnet_send(w->net, &r);
        free(tmp);
    }
}

static void on_msg(simnet_t *net, uint32_t me, const simnet_msg_t *m,
                   void *user) {
    world_t *w = user;
    (void)net;
    node_t *c = &w->nodes[me];
    if (!c->is_client) {
        server_on_msg(w, me, m);
        return;
    }
    uint64_t now = simnet_now(w->net);
    if (m->type == M_INFO && m->len == 32) {
        mp__fetch_on_info(c->f, now, w->ids[m->src], m->arg[0], m->arg[1],
                          m->arg[2], m->data);
    } else if (m->type == M_CHUNK) {
        size_t off;
        if (mp__fetch_chunk_wanted(c->f, w->ids[m->src], m->arg[0],
                                   (uint32_t)m->arg[1], (uint32_t)m->arg[2],
                                   &off) &&
            m->len == m->arg[2] * sizeof(float)) {
            memcpy(c->buf + off, m->data, m->len);
            c->chunks_in++;
            mp__fetch_chunk_done(c->f, now, (uint32_t)m->arg[1]);
        }
    }
    client_pump(w, me);
    client_verify(w, me);
}

static void on_timer(simnet_t *net, uint32_t me, uint64_t tag, void *user) {
    world_t *w = user;
    (void)tag;
    node_t *c = &w->nodes[me];
    if (!c->is_client)
        return;
    mp__fetch_on_tick(c->f, simnet_now(net));
    client_pump(w, me);
    client_verify(w, me);
}

static const simnet_ops_t OPS = {on_msg, on_timer};

/* the client learns of a dead server after 50 ms (a dropped connection) */
static void kill_hook(simnet_t *net, uint32_t node, void *user) {
    world_t *w = user;
    node_t *c = &w->nodes[0];
    (void)net;
    if (c->f != NULL)
        mp__fetch_on_server_failed(c->f, simnet_now(w->net) + 50, w->ids[node]);
    client_pump(w, 0);
}

typedef struct scen {
    const char *name;
    uint32_t nsrv;
    int mode[MAXN];
    size_t count[MAXN];
    uint64_t version[MAXN];
    uint32_t kill_srv; /* 0 = none, else node index */
    uint32_t kill_after_chunks;
    size_t want;
} scen_t;

typedef struct outcome {
    mp_fetch_state_t state;
    moshpit_err_t err;
    int exact_from; /* node whose vector the buffer equals, or -1 */
    uint32_t restarts, chunks_in;
    uint64_t end_ms, round;
    uint64_t trace;
} outcome_t;

static float *make_vec(size_t count, uint64_t seed) {
    float *v = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        v[i] = (float)(test_splitmix64(&seed) >> 40) / 1024.0f;
    return v;
}

static outcome_t run(const scen_t *sc, uint64_t seed) {
    world_t *w = calloc(1, sizeof(*w));
    outcome_t o;
    memset(&o, 0, sizeof(o));
    w->net = simnet_new(seed);
    simnet_set_default_link(w->net, 2, 100000000); /* 100 MB/s */
    simnet_set_kill_hook(w->net, kill_hook, w);
    w->n = 1 + sc->nsrv;
    g_count = sc->want;
    for (uint32_t i = 0; i < w->n; i++) {
        simnet_add_node(w->net, &OPS, w);
        uint64_t s = seed * 31 + i;
        for (uint32_t k = 0; k < MP_ID_BYTES; k++)
            w->ids[i][k] = (uint8_t)test_splitmix64(&s);
    }
    for (uint32_t i = 1; i < w->n; i++) {
        node_t *s = &w->nodes[i];
        s->mode = sc->mode[i - 1];
        s->count = sc->count[i - 1];
        s->version = sc->version[i - 1];
        s->round = 100 + s->version;
        if (s->count) {
            s->vec = make_vec(s->count, 7 + s->version);
            digest_of(s->vec, s->count, s->digest);
        }
    }
    node_t *c = &w->nodes[0];
    c->is_client = 1;
    c->buf = calloc(sc->want ? sc->want : 1, sizeof(float));
    mp_fetch_cfg_t cfg = {.count = sc->want,
                          .chunk_elems = CHUNK,
                          .window = 4,
                          .now_ms = 0,
                          .deadline_ms = 60000,
                          .stall_ms = 500,
                          .server_timeout_ms = 2000};
    CHECK(mp__fetch_new(&cfg, (const uint8_t(*)[MP_ID_BYTES])w->ids[1],
                        sc->nsrv, &c->f) == MOSHPIT_OK,
          "%s: new", sc->name);
    w->kill_srv = sc->kill_srv;
    w->kill_after = sc->kill_after_chunks;
    client_pump(w, 0);
    client_verify(w, 0);
    simnet_run(w->net, 120000);
    uint64_t end = w->end_ms;
    o.state = mp__fetch_state(c->f);
    o.err = mp__fetch_error(c->f);
    o.restarts = mp__fetch_restarts(c->f);
    o.round = mp__fetch_round(c->f);
    o.chunks_in = c->chunks_in;
    o.end_ms = end;
    o.exact_from = -1;
    for (uint32_t i = 1; i < w->n; i++)
        if (w->nodes[i].count == sc->want && w->nodes[i].vec != NULL &&
            memcmp(w->nodes[i].vec, c->buf, sc->want * sizeof(float)) == 0)
            o.exact_from = (int)i;
    o.trace = simnet_trace_hash(w->net);
    mp__fetch_free(c->f);
    free(c->buf);
    for (uint32_t i = 1; i < w->n; i++)
        free(w->nodes[i].vec);
    simnet_free(w->net);
    free(w);
    return o;
}

#define BIG 1000003u
#define NCHUNK ((BIG + CHUNK - 1) / CHUNK)

int main(void) {
    scen_t plain = {.name = "plain",
                    .nsrv = 3,
                    .want = BIG,
                    .count = {BIG, BIG, BIG},
                    .version = {5, 5, 5}};
    outcome_t o = run(&plain, 1);
    CHECK(o.state == MP_FETCH_DONE && o.exact_from > 0 && o.round == 105,
          "plain: state %d err %d exact %d round %llu", o.state, o.err,
          o.exact_from, (unsigned long long)o.round);
    CHECK(o.chunks_in == NCHUNK && o.restarts == 0,
          "plain: %u chunks, %u restarts", o.chunks_in, o.restarts);
    printf("plain: %u chunks in %llu virtual ms\n", o.chunks_in,
           (unsigned long long)o.end_ms);

    scen_t kill = plain;
    kill.name = "kill";
    kill.kill_after_chunks = 6;
    /* the client picks the first server that answers: kill whichever it
     * is by killing each in turn in separate runs */
    for (uint32_t k = 1; k <= 3; k++) {
        kill.kill_srv = k;
        o = run(&kill, 2);
        CHECK(o.state == MP_FETCH_DONE && o.exact_from > 0 && o.restarts == 0,
              "kill %u: state %d err %d exact %d restarts %u", k, o.state,
              o.err, o.exact_from, o.restarts);
        CHECK(o.chunks_in <= NCHUNK + 4 * 2,
              "kill %u: %u chunks for %u (no start over)", k, o.chunks_in,
              NCHUNK);
    }

    scen_t newer = {.name = "newer",
                    .nsrv = 2,
                    .want = BIG,
                    .count = {BIG, BIG},
                    .version = {5, 6},
                    .mode = {SRV_HONEST, SRV_SILENT}};
    /* server 2 is silent at first: the client takes server 1; then kill
     * it: server 2 timed out already, so nobody is left -> the client
     * cannot finish. Use a third honest server with another version. */
    newer.nsrv = 2;
    newer.mode[1] = SRV_HONEST;
    newer.kill_srv = 1;
    newer.kill_after_chunks = 6;
    o = run(&newer, 3);
    CHECK(o.state == MP_FETCH_DONE && o.exact_from >= 1,
          "newer: state %d err %d exact %d", o.state, o.err, o.exact_from);
    if (o.exact_from == 2)
        CHECK(o.restarts == 1 && o.round == 106,
              "newer: restarts %u round %llu", o.restarts,
              (unsigned long long)o.round);

    scen_t mism = {.name = "count",
                   .nsrv = 2,
                   .want = BIG,
                   .count = {BIG + 1, 10},
                   .version = {5, 5}};
    o = run(&mism, 4);
    CHECK(o.state == MP_FETCH_FAILED && o.err == MOSHPIT_ECOUNT,
          "count mismatch: state %d err %d", o.state, o.err);

    scen_t none = {.name = "none", .nsrv = 0, .want = BIG};
    o = run(&none, 5);
    CHECK(o.state == MP_FETCH_FAILED && o.err == MOSHPIT_ENOSTATE,
          "no servers: state %d err %d", o.state, o.err);
    scen_t empty = {.name = "empty", .nsrv = 2, .want = BIG};
    o = run(&empty, 5);
    CHECK(o.state == MP_FETCH_FAILED && o.err == MOSHPIT_ENOSTATE,
          "servers without state: state %d err %d", o.state, o.err);
    scen_t silent = {.name = "silent",
                     .nsrv = 2,
                     .want = BIG,
                     .count = {BIG, BIG},
                     .version = {5, 5},
                     .mode = {SRV_SILENT, SRV_SILENT}};
    o = run(&silent, 6);
    CHECK(o.state == MP_FETCH_FAILED && o.err == MOSHPIT_ENOSTATE &&
              o.end_ms <= 2100,
          "silent servers: state %d err %d at %llu ms", o.state, o.err,
          (unsigned long long)o.end_ms);

    scen_t liar = {.name = "liar",
                   .nsrv = 2,
                   .want = BIG,
                   .count = {BIG, BIG},
                   .version = {5, 5},
                   .mode = {SRV_LIAR, SRV_HONEST}};
    o = run(&liar, 7);
    CHECK(o.state == MP_FETCH_DONE && o.exact_from > 0,
          "liar: state %d err %d exact %d", o.state, o.err, o.exact_from);

    scen_t deaf = {.name = "deaf",
                   .nsrv = 1,
                   .want = BIG,
                   .count = {BIG},
                   .version = {5},
                   .mode = {SRV_DEAF_FIRST}};
    o = run(&deaf, 8);
    CHECK(o.state == MP_FETCH_DONE && o.exact_from == 1,
          "deaf first: state %d err %d", o.state, o.err);

    scen_t fickle = {.name = "fickle",
                     .nsrv = 1,
                     .want = BIG,
                     .count = {BIG},
                     .version = {5},
                     .mode = {SRV_FICKLE}};
    o = run(&fickle, 9);
    CHECK(o.state == MP_FETCH_FAILED && o.restarts > MP_FETCH_RESTARTS,
          "fickle: state %d err %d restarts %u", o.state, o.err, o.restarts);

    outcome_t a = run(&kill, 11), b = run(&kill, 11);
    CHECK(a.trace == b.trace, "same seed, different traces");

    return test_summary("test_sim_fetch");
}
