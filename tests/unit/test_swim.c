/* SPDX-License-Identifier: MIT */
/*
 * test_swim.c - unit tests of the SWIM membership machine (core/swim.c).
 * A few machines talk over a tiny deterministic network in this file: every
 * message is encoded and decoded with wire_swim.c, delivered after a fixed
 * latency, and links or whole peers can be cut. Cases: configuration and
 * argument checks; join by pages; probe -> ack; direct probe lost but the
 * indirect one answered; probe timeout -> suspect -> dead at exactly the
 * configured times; refutation with a new incarnation; graceful leave
 * (direct and relayed); restart with the same identity, before and after
 * the old incarnation was declared dead; a healed partition mended by a
 * new direct contact; forged updates about a third party
 * (dead, left, suspect, new address, absurd incarnations) that must not
 * remove it; every cap hit and counted; the piggyback byte budget and the
 * retransmission count; SYNC misuse. Exit status nonzero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/swim.h"
#include "wire/wire_swim.h"

#define TEST_MAX_PRINTED 60
#include "test_util.h"

enum { MAXN = 16, MAXLOG = 20000 };

typedef struct pkt {
    uint64_t at, order;
    int from, to;
    size_t len;
    uint8_t *buf;
} pkt_t;

typedef struct logent {
    uint64_t at;
    int node;
    mp_swim_event_t ev;
} logent_t;

typedef struct net {
    int n;
    uint64_t now, order;
    uint32_t latency;
    mp_swim_config_t cfg;
    mp_swim_t *sw[MAXN];
    uint8_t id[MAXN][MP_SWIM_ID_BYTES];
    char addr[MAXN][32];
    bool up[MAXN];
    bool blocked[MAXN][MAXN]; /* from -> to */
    bool no_poll_events;      /* leave events queued (cap test) */
    pkt_t *q;
    size_t nq, capq;
    logent_t log[MAXLOG];
    int nlog;
    uint64_t sent, dropped;
    uint64_t bytes[MAXN];
} net_t;

static mp_swim_msg_t dec_msg;
static mp_swim_out_t out_msg;
static uint8_t enc[MP_SWIM_MSG_MAX];

static void make_id(int i, uint8_t id[MP_SWIM_ID_BYTES]) {
    for (unsigned b = 0; b < MP_SWIM_ID_BYTES; b++)
        id[b] = (uint8_t)(0xa5 ^ (b * 7));
    id[0] = (uint8_t)(i + 1);
}

static int node_of(const net_t *t, const uint8_t *id) {
    for (int i = 0; i < t->n; i++)
        if (memcmp(t->id[i], id, MP_SWIM_ID_BYTES) == 0)
            return i;
    return -1;
}

static void pump(net_t *t, int i) {
    if (t->sw[i] == NULL)
        return;
    while (mp__swim_poll_send(t->sw[i], &out_msg)) {
        size_t len = 0;
        moshpit_err_t e =
            mp__wire_swim_msg_encode(&out_msg.msg, enc, sizeof enc, &len);
        CHECK(e == MOSHPIT_OK, "node %d: encode type %d -> %d", i,
              (int)out_msg.msg.type, (int)e);
        if (e != MOSHPIT_OK)
            continue;
        t->sent++;
        t->bytes[i] += len;
        int to = node_of(t, out_msg.to);
        if (to < 0 || !t->up[i] || t->blocked[i][to]) {
            t->dropped++;
            continue;
        }
        if (t->nq == t->capq) {
            t->capq = t->capq ? 2 * t->capq : 256;
            t->q = realloc(t->q, t->capq * sizeof *t->q);
            if (t->q == NULL)
                abort();
        }
        pkt_t *p = &t->q[t->nq++];
        p->at = t->now + t->latency;
        p->order = t->order++;
        p->from = i;
        p->to = to;
        p->len = len;
        p->buf = malloc(len);
        if (p->buf == NULL)
            abort();
        memcpy(p->buf, enc, len);
    }
    mp_swim_event_t ev;
    while (!t->no_poll_events && mp__swim_poll_event(t->sw[i], &ev)) {
        if (t->nlog < MAXLOG)
            t->log[t->nlog++] = (logent_t){t->now, i, ev};
    }
}

static void net_init(net_t *t, int n, const mp_swim_config_t *cfg,
                     uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->n = n;
    t->latency = 1;
    if (cfg != NULL)
        t->cfg = *cfg;
    else
        mp__swim_config_default(&t->cfg);
    for (int i = 0; i < n; i++) {
        make_id(i, t->id[i]);
        snprintf(t->addr[i], sizeof t->addr[i], "tcp://10.0.0.%d:7400", i + 1);
    }
    (void)seed;
}

/* Starts peer i (again): a fresh machine with incarnation 0. */
static void net_start(net_t *t, int i, uint64_t seed) {
    mp__swim_free(t->sw[i]);
    moshpit_err_t e =
        mp__swim_new(&t->cfg, t->id[i], t->addr[i], seed * 1000 + (uint64_t)i,
                     t->now, &t->sw[i]);
    CHECK(e == MOSHPIT_OK, "mp__swim_new(%d) -> %d", i, (int)e);
    t->up[i] = true;
}

static void net_join(net_t *t, int i, int boot) {
    moshpit_err_t e =
        mp__swim_join(t->sw[i], t->now, t->id[boot], t->addr[boot]);
    CHECK(e == MOSHPIT_OK, "join %d via %d -> %d", i, boot, (int)e);
    pump(t, i);
}

static void net_free(net_t *t) {
    for (int i = 0; i < t->n; i++)
        mp__swim_free(t->sw[i]);
    for (size_t k = 0; k < t->nq; k++)
        free(t->q[k].buf);
    free(t->q);
}

static void deliver(net_t *t, const pkt_t *p) {
    if (!t->up[p->to] || t->sw[p->to] == NULL) {
        t->dropped++;
        return;
    }
    moshpit_err_t e = mp__wire_swim_msg_decode(p->buf, p->len, &dec_msg);
    CHECK(e == MOSHPIT_OK, "decode -> %d", (int)e);
    if (e != MOSHPIT_OK)
        return;
    e = mp__swim_on_message(t->sw[p->to], t->now, t->id[p->from], &dec_msg);
    CHECK(e == MOSHPIT_OK, "on_message -> %d", (int)e);
    pump(t, p->to);
}

/* Runs until virtual time `until`. */
static void net_run(net_t *t, uint64_t until) {
    for (;;) {
        uint64_t next = UINT64_MAX;
        for (size_t k = 0; k < t->nq; k++)
            next = t->q[k].at < next ? t->q[k].at : next;
        for (int i = 0; i < t->n; i++) {
            if (!t->up[i] || t->sw[i] == NULL)
                continue;
            uint64_t w = mp__swim_next_wakeup(t->sw[i]);
            next = w < next ? w : next;
        }
        if (next > until) {
            t->now = until;
            return;
        }
        if (next > t->now)
            t->now = next;
        /* Due packets in send order. */
        for (;;) {
            size_t best = SIZE_MAX;
            for (size_t k = 0; k < t->nq; k++)
                if (t->q[k].at <= t->now &&
                    (best == SIZE_MAX || t->q[k].order < t->q[best].order))
                    best = k;
            if (best == SIZE_MAX)
                break;
            pkt_t p = t->q[best];
            t->q[best] = t->q[--t->nq];
            deliver(t, &p);
            free(p.buf);
        }
        for (int i = 0; i < t->n; i++) {
            if (!t->up[i] || t->sw[i] == NULL)
                continue;
            if (mp__swim_next_wakeup(t->sw[i]) <= t->now) {
                mp__swim_tick(t->sw[i], t->now);
                pump(t, i);
            }
        }
    }
}

/* First logged event of type at node about subject, at or after `since`;
 * NULL if none. */
static const logent_t *find_ev(const net_t *t, int node,
                               mp_swim_event_type_t type, int subject,
                               uint64_t since) {
    for (int k = 0; k < t->nlog; k++) {
        const logent_t *l = &t->log[k];
        if (l->node == node && l->ev.type == type && l->at >= since &&
            (subject < 0 ||
             memcmp(l->ev.id, t->id[subject], MP_SWIM_ID_BYTES) == 0))
            return l;
    }
    return NULL;
}

static int count_ev(const net_t *t, mp_swim_event_type_t type, int subject) {
    int c = 0;
    for (int k = 0; k < t->nlog; k++)
        c += t->log[k].ev.type == type &&
             (subject < 0 ||
              memcmp(t->log[k].ev.id, t->id[subject], MP_SWIM_ID_BYTES) == 0);
    return c;
}

/* State of subject in node's view, or -1 if unknown. */
static int state_of(const net_t *t, int node, int subject,
                    mp_swim_member_t *info) {
    mp_swim_member_t m;
    memset(&m, 0, sizeof m);
    m.addr = "";
    m.state = 0xff;
    bool known = mp__swim_lookup(t->sw[node], t->id[subject], &m);
    if (info != NULL)
        *info = m;
    return known ? m.state : -1;
}

/* Brings up n peers that join one after another through peer 0 and runs
 * until everyone knows everyone. */
static void net_swarm(net_t *t, int n, const mp_swim_config_t *cfg,
                      uint64_t seed) {
    net_init(t, n, cfg, seed);
    net_start(t, 0, seed);
    for (int i = 1; i < n; i++) {
        net_start(t, i, seed);
        net_join(t, i, 0);
        net_run(t, t->now + 50);
    }
    net_run(t, t->now + 10000);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            CHECK(state_of(t, i, j, NULL) == MP_SWIM_ALIVE,
                  "swarm: %d sees %d as %d", i, j, state_of(t, i, j, NULL));
}

/* ------------------------------------------------------------------ */

static void test_config(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    CHECK(c.period_ms == 250 && c.max_members == 65536 && c.indirect_k == 3,
          "defaults");
    uint8_t id[MP_SWIM_ID_BYTES];
    make_id(0, id);
    mp_swim_t *sw = (mp_swim_t *)&c; /* must be overwritten */
    CHECK(mp__swim_new(NULL, id, "x", 1, 0, &sw) == MOSHPIT_OK && sw != NULL,
          "NULL config = defaults");
    mp__swim_free(sw);
    mp__swim_free(NULL);
    CHECK(mp__swim_new(&c, NULL, "x", 1, 0, &sw) == MOSHPIT_EINVAL &&
              sw == NULL,
          "NULL id");
    CHECK(mp__swim_new(&c, id, NULL, 1, 0, &sw) == MOSHPIT_EINVAL, "NULL addr");
    CHECK(mp__swim_new(&c, id, "x", 1, 0, NULL) == MOSHPIT_EINVAL, "NULL out");
    char longaddr[MP_SWIM_ADDR_MAX + 1];
    memset(longaddr, 'a', sizeof longaddr - 1);
    longaddr[MP_SWIM_ADDR_MAX] = '\0';
    CHECK(mp__swim_new(&c, id, longaddr, 1, 0, &sw) == MOSHPIT_EINVAL,
          "address of 256 bytes");
    longaddr[MP_SWIM_ADDR_MAX - 1] = '\0';
    CHECK(mp__swim_new(&c, id, longaddr, 1, 0, &sw) == MOSHPIT_OK,
          "address of 255 bytes");
    mp__swim_free(sw);

    struct {
        uint32_t *field;
        uint32_t bad;
    } bad[] = {
        {&c.period_ms, 0},
        {&c.ping_timeout_ms, 0},
        {&c.indirect_k, 9},
        {&c.suspicion_mult, 0},
        {&c.retransmit_mult, 0},
        {&c.retransmit_mult, 17},
        {&c.max_members, 1},
        {&c.queue_max, 0},
        {&c.page_size, 0},
        {&c.page_size, 33},
        {&c.page_bytes, 100},
        {&c.piggyback_bytes, 5000},
        {&c.max_pending_probes, 0},
        {&c.events_max, 0},
        {&c.out_max, 0},
        {&c.leave_fanout, 65},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mp_swim_config_t save = c;
        *bad[i].field = bad[i].bad;
        CHECK(mp__swim_new(&c, id, "x", 1, 0, &sw) == MOSHPIT_EINVAL,
              "bad config %zu accepted", i);
        c = save;
    }

    /* Arguments. */
    CHECK(mp__swim_new(&c, id, "", 1, 0, &sw) == MOSHPIT_OK, "empty addr");
    CHECK(mp__swim_join(sw, 0, id, "x") == MOSHPIT_EINVAL, "join self");
    CHECK(mp__swim_join(NULL, 0, id, "x") == MOSHPIT_EINVAL, "join NULL");
    CHECK(mp__swim_on_message(sw, 0, NULL, &dec_msg) == MOSHPIT_EINVAL,
          "on_message NULL from");
    CHECK(mp__swim_on_message(sw, 0, id, NULL) == MOSHPIT_EINVAL,
          "on_message NULL msg");
    CHECK(mp__swim_live_count(sw) == 1 && mp__swim_size_estimate(sw) == 1,
          "alone: 1 live");
    CHECK(mp__swim_next_wakeup(sw) <= 250, "first probe within a period");
    mp__swim_tick(sw, 1000);
    CHECK(!mp__swim_poll_send(sw, &out_msg), "nobody to probe, nothing sent");
    mp__swim_leave(sw, 1000);
    mp__swim_leave(sw, 1000);
    CHECK(mp__swim_has_left(sw) && mp__swim_live_count(sw) == 0 &&
              mp__swim_next_wakeup(sw) == UINT64_MAX,
          "after leave");
    CHECK(mp__swim_join(sw, 0, id, "x") == MOSHPIT_EINVAL, "join after leave");
    mp__swim_free(sw);
    CHECK(mp__swim_live_count(NULL) == 0 && !mp__swim_synced(NULL) &&
              mp__swim_next_wakeup(NULL) == UINT64_MAX &&
              !mp__swim_poll_send(NULL, &out_msg) &&
              !mp__swim_poll_event(NULL, NULL),
          "NULL machine");
}

/* Join by pages, then probes are answered: nobody is ever suspected. */
static void test_join_and_probe(void) {
    static net_t t;
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.page_size = 4; /* several pages even for a small swarm */
    net_swarm(&t, 10, &c, 1);
    for (int i = 1; i < 10; i++) {
        CHECK(mp__swim_synced(t.sw[i]), "peer %d synced", i);
        CHECK(find_ev(&t, i, MP_SWIM_EV_SYNCED, 0, 0) != NULL,
              "peer %d: SYNCED event", i);
    }
    for (int i = 0; i < 10; i++) {
        CHECK(mp__swim_live_count(t.sw[i]) == 10, "peer %d: live %zu", i,
              mp__swim_live_count(t.sw[i]));
        mp_swim_member_t m;
        for (int j = 0; j < 10; j++) {
            state_of(&t, i, j, &m);
            CHECK(strcmp(m.addr, t.addr[j]) == 0,
                  "peer %d has address %s for %d", i, m.addr, j);
            CHECK(m.is_self == (i == j), "is_self");
        }
        size_t cur = 0, cnt = 0;
        while (mp__swim_member_next(t.sw[i], &cur, &m))
            cnt++;
        CHECK(cnt == 10, "iteration yields %zu", cnt);
    }
    uint64_t t0 = t.now;
    net_run(&t, t0 + 60000);
    CHECK(count_ev(&t, MP_SWIM_EV_SUSPECT, -1) == 0,
          "suspicions on a healthy net: %d",
          count_ev(&t, MP_SWIM_EV_SUSPECT, -1));
    /* One probe per period: each peer sends ~ 4 PINGs/s, answers ~ 4. */
    CHECK(t.sent > 10 * 60 * 4, "probes are sent (%llu messages)",
          (unsigned long long)t.sent);
    mp_swim_stats_t st;
    mp__swim_get_stats(t.sw[0], &st);
    CHECK(st.unexpected == 0 && st.suspicions == 0 && st.rejected == 0,
          "clean counters: unexpected %llu", (unsigned long long)st.unexpected);
    net_free(&t);
}

/* A blocked direct link is bridged by the indirect probe. */
static void test_indirect(void) {
    static net_t t;
    net_swarm(&t, 4, NULL, 2);
    t.blocked[0][3] = t.blocked[3][0] = true;
    uint64_t t0 = t.now;
    net_run(&t, t0 + 30000);
    CHECK(find_ev(&t, 0, MP_SWIM_EV_SUSPECT, 3, t0) == NULL,
          "0 suspected 3 despite the indirect path");
    CHECK(state_of(&t, 0, 3, NULL) == MP_SWIM_ALIVE, "3 alive at 0");
    mp_swim_stats_t st;
    mp__swim_get_stats(t.sw[0], &st);
    CHECK(st.unexpected == 0, "unexpected acks at 0: %llu",
          (unsigned long long)st.unexpected);
    net_free(&t);
}

/* Kill a peer: suspect at probe + ping + ping_req timeouts, dead a
 * suspicion timeout later (exact, since latency is 1 ms). */
static void test_suspect_dead(void) {
    static net_t t;
    net_swarm(&t, 5, NULL, 3);
    uint64_t t0 = t.now;
    t.up[4] = false;
    net_run(&t, t0 + 60000);
    const mp_swim_config_t *c = &t.cfg;
    uint64_t sus_ms = mp__swim_suspicion_ms(t.sw[0]);
    CHECK(sus_ms == 2000 ||
              sus_ms == (uint64_t)c->suspicion_mult * c->period_ms * 3,
          "suspicion timeout %llu", (unsigned long long)sus_ms);
    /* Somebody's own probe found it: its SUSPECT event comes exactly
     * ping_timeout + ping_req_timeout after a PING it sent. */
    int first = -1;
    uint64_t first_at = UINT64_MAX;
    for (int i = 0; i < 4; i++) {
        const logent_t *s = find_ev(&t, i, MP_SWIM_EV_SUSPECT, 4, t0);
        CHECK(s != NULL, "peer %d never suspected 4", i);
        if (s != NULL && s->at < first_at) {
            first_at = s->at;
            first = i;
        }
        const logent_t *d = find_ev(&t, i, MP_SWIM_EV_DEAD, 4, t0);
        CHECK(d != NULL, "peer %d never declared 4 dead", i);
        if (s != NULL && d != NULL)
            CHECK(d->at == s->at + sus_ms,
                  "peer %d: dead %llu ms after suspect, want %llu", i,
                  (unsigned long long)(d->at - s->at),
                  (unsigned long long)sus_ms);
        CHECK(state_of(&t, i, 4, NULL) == MP_SWIM_DEAD, "4 dead at %d", i);
        CHECK(mp__swim_live_count(t.sw[i]) == 4, "live count at %d", i);
    }
    mp_swim_stats_t st;
    mp__swim_get_stats(t.sw[first], &st);
    CHECK(st.suspicions >= 1, "first suspecter counted its suspicion");
    /* A probe started up to 1 ms before the kill fails too; a full pass
     * of the probe order (4 probes), possibly after a pass that already
     * had probed 4, bounds the wait for the first probe. */
    uint64_t probe_span = c->ping_timeout_ms + c->ping_req_timeout_ms;
    uint64_t latest = 2 * 4 * (uint64_t)c->period_ms + probe_span + 1;
    CHECK(first_at + 1 >= t0 + probe_span && first_at <= t0 + latest,
          "first suspicion at +%llu ms, want within [%llu, %llu]",
          (unsigned long long)(first_at - t0),
          (unsigned long long)probe_span - 1, (unsigned long long)latest);
    /* Nobody else was ever suspected. */
    for (int j = 0; j < 4; j++)
        CHECK(count_ev(&t, MP_SWIM_EV_SUSPECT, j) == 0, "%d suspected", j);
    /* The record is forgotten after dead_retain_ms. */
    net_run(&t, t.now + t.cfg.dead_retain_ms + 1000);
    for (int i = 0; i < 4; i++) {
        CHECK(state_of(&t, i, 4, NULL) == -1, "4 still known at %d", i);
        CHECK(find_ev(&t, i, MP_SWIM_EV_REMOVED, 4, t0) != NULL,
              "REMOVED event at %d", i);
    }
    net_free(&t);
}

/* A suspicion about a live peer (here planted by hand) is refuted. */
static void test_refute(void) {
    static net_t t;
    net_swarm(&t, 4, NULL, 4);
    uint64_t t0 = t.now;
    mp_swim_update_t u;
    memset(&u, 0, sizeof u);
    memcpy(u.id, t.id[2], MP_SWIM_ID_BYTES);
    u.state = MP_SWIM_SUSPECT;
    u.inc = 0;
    /* Peer 1 says so (an honest mistake or a lie: same thing). */
    mp__swim_absorb(t.sw[0], t.now, t.id[1], &u, 1);
    pump(&t, 0);
    CHECK(state_of(&t, 0, 2, NULL) == MP_SWIM_SUSPECT, "planted suspicion");
    net_run(&t, t0 + 20000);
    for (int i = 0; i < 4; i++) {
        mp_swim_member_t m;
        CHECK(state_of(&t, i, 2, &m) == MP_SWIM_ALIVE && m.inc == 1,
              "peer %d: 2 is %d@%u, want alive@1", i, m.state, m.inc);
    }
    CHECK(mp__swim_self_inc(t.sw[2]) == 1, "2 took incarnation 1");
    CHECK(find_ev(&t, 2, MP_SWIM_EV_REFUTED, 2, t0) != NULL, "REFUTED event");
    CHECK(find_ev(&t, 0, MP_SWIM_EV_ALIVE, 2, t0) != NULL, "ALIVE at 0");
    CHECK(count_ev(&t, MP_SWIM_EV_DEAD, -1) == 0, "nobody died");
    net_free(&t);
}

/* Leave: the direct receivers mark LEFT at once; the others only hear it
 * second-hand, take it as a suspicion and mark LEFT when it expires. */
static void test_leave(void) {
    static net_t t;
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.leave_fanout = 1;
    net_swarm(&t, 6, &c, 5);
    uint64_t t0 = t.now;
    mp__swim_leave(t.sw[5], t0);
    pump(&t, 5);
    t.up[5] = false; /* gone for good */
    net_run(&t, t0 + 5);
    int direct = -1;
    for (int i = 0; i < 5; i++)
        if (find_ev(&t, i, MP_SWIM_EV_LEFT, 5, t0) != NULL)
            direct = i;
    CHECK(direct >= 0, "one peer got the LEAVE directly");
    net_run(&t, t0 + 30000);
    for (int i = 0; i < 5; i++) {
        CHECK(state_of(&t, i, 5, NULL) == MP_SWIM_LEFT, "5 at %d is %d", i,
              state_of(&t, i, 5, NULL));
        CHECK(find_ev(&t, i, MP_SWIM_EV_DEAD, 5, t0) == NULL,
              "%d declared a leaver dead", i);
    }
    net_free(&t);
}

/* Restart with the same identity, (a) after the old incarnation was
 * declared dead and (b) before anyone noticed. */
/* A partition that heals: each side has declared the other dead, so
 * nobody probes across any more and gossip never crosses; the views stay
 * split for good. mp__swim_contact (the driver's new session) mends it:
 * a probe carrying the member's own record, refuted at once, and the
 * answer's incarnation corrects the other side in turn. */
static void test_contact(void) {
    static net_t t;
    net_swarm(&t, 4, NULL, 11);
    uint32_t inc0[4];
    for (int i = 0; i < 4; i++)
        inc0[i] = mp__swim_self_inc(t.sw[i]);
    for (int a = 0; a < 2; a++)
        for (int b = 2; b < 4; b++)
            t.blocked[a][b] = t.blocked[b][a] = true;
    net_run(&t, t.now + 30000);
    for (int a = 0; a < 2; a++)
        for (int b = 2; b < 4; b++)
            CHECK(state_of(&t, a, b, NULL) == MP_SWIM_DEAD &&
                      state_of(&t, b, a, NULL) == MP_SWIM_DEAD,
                  "partition: %d and %d not dead to each other", a, b);
    memset(t.blocked, 0, sizeof t.blocked);
    net_run(&t, t.now + 10000);
    CHECK(state_of(&t, 0, 2, NULL) == MP_SWIM_DEAD,
          "healed without contact: the views stay split (%d)",
          state_of(&t, 0, 2, NULL));
    /* argument checks: alive, unknown, self, NULL */
    uint8_t stranger[MP_SWIM_ID_BYTES];
    make_id(99, stranger);
    CHECK(!mp__swim_contact(t.sw[0], t.now, t.id[1]), "contact: alive");
    CHECK(!mp__swim_contact(t.sw[0], t.now, stranger), "contact: unknown");
    CHECK(!mp__swim_contact(t.sw[0], t.now, t.id[0]), "contact: self");
    CHECK(!mp__swim_contact(NULL, t.now, t.id[2]) &&
              !mp__swim_contact(t.sw[0], t.now, NULL),
          "contact: NULL");
    /* one new session across the cut, as the engine would report it on
     * both of its ends */
    uint64_t t0 = t.now;
    CHECK(mp__swim_contact(t.sw[0], t.now, t.id[2]), "contact 0 -> 2");
    CHECK(!mp__swim_contact(t.sw[0], t.now, t.id[2]),
          "a second contact while the probe is on its way");
    pump(&t, 0);
    CHECK(mp__swim_contact(t.sw[2], t.now, t.id[0]), "contact 2 -> 0");
    pump(&t, 2);
    net_run(&t, t0 + 5000);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++)
            CHECK(state_of(&t, i, j, NULL) == MP_SWIM_ALIVE,
                  "after contact: %d sees %d as %d", i, j,
                  state_of(&t, i, j, NULL));
        CHECK(mp__swim_self_inc(t.sw[i]) > inc0[i],
              "%d did not refute (incarnation %u)", i,
              mp__swim_self_inc(t.sw[i]));
    }
    const logent_t *e = find_ev(&t, 0, MP_SWIM_EV_ALIVE, 2, t0);
    CHECK(e != NULL && e->at <= t0 + 1000, "0 saw 2 alive after %lld ms",
          e != NULL ? (long long)(e->at - t0) : -1LL);
    net_free(&t);
}

static void test_restart(void) {
    for (int early = 0; early <= 1; early++) {
        static net_t t;
        net_swarm(&t, 5, NULL, 6 + (uint64_t)early);
        /* Give peer 4 an incarnation above 0 first. */
        mp_swim_update_t u;
        memset(&u, 0, sizeof u);
        memcpy(u.id, t.id[4], MP_SWIM_ID_BYTES);
        u.state = MP_SWIM_SUSPECT;
        mp__swim_absorb(t.sw[4], t.now, t.id[1], &u, 1);
        pump(&t, 4);
        net_run(&t, t.now + 10000);
        uint32_t old_inc = mp__swim_self_inc(t.sw[4]);
        CHECK(old_inc == 1, "4 at incarnation %u", old_inc);
        t.up[4] = false;
        if (!early)
            net_run(&t, t.now + 30000);
        for (int i = 0; i < 4 && !early; i++)
            CHECK(state_of(&t, i, 4, NULL) == MP_SWIM_DEAD, "4 dead at %d", i);
        uint64_t t0 = t.now;
        net_start(&t, 4, 99);
        CHECK(mp__swim_self_inc(t.sw[4]) == 0, "restart at 0");
        net_join(&t, 4, 2);
        net_run(&t, t0 + 30000);
        uint32_t inc = mp__swim_self_inc(t.sw[4]);
        CHECK(inc > old_inc, "%s: restarted peer took %u, old was %u",
              early ? "early" : "late", inc, old_inc);
        for (int i = 0; i < 5; i++) {
            mp_swim_member_t m;
            CHECK(state_of(&t, i, 4, &m) == MP_SWIM_ALIVE && m.inc == inc,
                  "%s: peer %d sees 4 as %d@%u", early ? "early" : "late", i,
                  m.state, m.inc);
            CHECK(mp__swim_live_count(t.sw[i]) == 5, "live count at %d", i);
        }
        for (int i = 0; i < 4 && !early; i++)
            CHECK(find_ev(&t, i, MP_SWIM_EV_ALIVE, 4, t0) != NULL,
                  "ALIVE (rejoined) event at %d", i);
        /* Nobody declared the new incarnation dead. */
        for (int i = 0; i < 4; i++)
            CHECK(find_ev(&t, i, MP_SWIM_EV_DEAD, 4, t0 + 1) == NULL,
                  "%s restart: %d declared 4 dead", early ? "early" : "late",
                  i);
        net_free(&t);
    }
}

/* A member (peer 1) lies about peer 2 in every way it can; peer 2 must
 * stay a live member everywhere, with its own address. */
static void test_forged(void) {
    static net_t t;
    net_swarm(&t, 4, NULL, 8);
    uint64_t t0 = t.now;
    mp_swim_update_t lies[6];
    memset(lies, 0, sizeof lies);
    for (int k = 0; k < 6; k++)
        memcpy(lies[k].id, t.id[2], MP_SWIM_ID_BYTES);
    lies[0].state = MP_SWIM_DEAD;
    lies[1].state = MP_SWIM_LEFT;
    lies[2].state = MP_SWIM_ALIVE;
    lies[2].inc = 5;
    lies[2].has_addr = 1;
    strcpy(lies[2].addr, "tcp://6.6.6.6:7400");
    lies[3].state = MP_SWIM_SUSPECT;
    lies[3].inc = 7;
    lies[4].state = MP_SWIM_LEFT;
    lies[4].inc = 9;
    lies[5].state = MP_SWIM_DEAD;
    lies[5].inc = UINT32_MAX; /* unrefutable if accepted */
    /* Told to everyone, again and again, for a while. */
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 4; i++) {
            if (i == 1 || i == 2)
                continue;
            mp__swim_absorb(t.sw[i], t.now, t.id[1], lies, 6);
            pump(&t, i);
        }
        if (round == 0) {
            /* The address claim is only a hint for the driver to verify
             * (until 2 itself confirms its address again). */
            mp_swim_member_t h;
            state_of(&t, 0, 2, &h);
            CHECK(h.hint != NULL && strcmp(h.hint, "tcp://6.6.6.6:7400") == 0,
                  "hint kept for the driver: %s", h.hint ? h.hint : "(none)");
            CHECK(strcmp(h.addr, t.addr[2]) == 0, "address kept");
        }
        net_run(&t, t.now + 700);
    }
    net_run(&t, t.now + 30000);
    for (int i = 0; i < 4; i++) {
        mp_swim_member_t m;
        int st = state_of(&t, i, 2, &m);
        CHECK(st == MP_SWIM_ALIVE, "peer %d: 2 is %d after lies", i, st);
        if (i != 2)
            CHECK(strcmp(m.addr, t.addr[2]) == 0 && m.addr_confirmed,
                  "peer %d: 2's address became %s", i, m.addr);
        CHECK(find_ev(&t, i, MP_SWIM_EV_DEAD, 2, t0) == NULL &&
                  find_ev(&t, i, MP_SWIM_EV_LEFT, 2, t0) == NULL,
              "peer %d removed 2", i);
    }
    CHECK(mp__swim_self_inc(t.sw[2]) > 9, "2 refuted up to %u",
          mp__swim_self_inc(t.sw[2]));
    mp_swim_stats_t st;
    mp__swim_get_stats(t.sw[0], &st);
    CHECK(st.downgraded > 0, "third-party DEAD/LEFT counted");
    CHECK(st.rejected > 0, "DEAD@2^32-1 rejected");
    CHECK(st.addr_hints > 0, "address kept as a hint");
    mp_swim_member_t m;
    CHECK(find_ev(&t, 0, MP_SWIM_EV_HINT, 2, t0) != NULL, "HINT event");
    /* A hint the driver verified (CURVE proved the key there) becomes the
     * address; verifying the true one again restores it. */
    CHECK(mp__swim_addr_verified(t.sw[0], t.id[2], "tcp://10.9.9.9:1"),
          "verified");
    pump(&t, 0);
    state_of(&t, 0, 2, &m);
    CHECK(m.hint == NULL && strcmp(m.addr, "tcp://10.9.9.9:1") == 0 &&
              find_ev(&t, 0, MP_SWIM_EV_ADDR, 2, t0) != NULL,
          "verified address taken");
    CHECK(mp__swim_addr_verified(t.sw[0], t.id[2], t.addr[2]), "verified");
    CHECK(!mp__swim_addr_verified(t.sw[0], t.id[2], ""), "empty addr");
    uint8_t nobody[MP_SWIM_ID_BYTES] = {0};
    CHECK(!mp__swim_addr_verified(t.sw[0], nobody, "x"), "unknown member");

    /* An incarnation pushed to 2^32-2 is still refuted (with 2^32-1);
     * after that no accepted claim can beat it. */
    memset(lies, 0, sizeof lies);
    memcpy(lies[0].id, t.id[3], MP_SWIM_ID_BYTES);
    lies[0].state = MP_SWIM_SUSPECT;
    lies[0].inc = MP_SWIM_INC_CLAIM_MAX;
    mp__swim_absorb(t.sw[0], t.now, t.id[1], lies, 1);
    pump(&t, 0);
    net_run(&t, t.now + 30000);
    CHECK(mp__swim_self_inc(t.sw[3]) == UINT32_MAX, "3 at %u",
          mp__swim_self_inc(t.sw[3]));
    for (int i = 0; i < 4; i++)
        CHECK(state_of(&t, i, 3, NULL) == MP_SWIM_ALIVE, "3 at %d: %d", i,
              state_of(&t, i, 3, NULL));
    net_free(&t);
}

/* Caps: each one is hit, holds, and is counted. */
static void test_caps(void) {
    uint8_t self[MP_SWIM_ID_BYTES], other[MP_SWIM_ID_BYTES];
    make_id(0, self);
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.max_members = 8;
    c.queue_max = 4;
    c.events_max = 5;
    c.out_max = 3;
    c.max_relays = 2;
    c.sync_rate = 1;
    c.sync_burst = 2;
    mp_swim_t *sw;
    CHECK(mp__swim_new(&c, self, "me", 7, 0, &sw) == MOSHPIT_OK, "new");

    /* 20 made-up members: 7 fit besides self. */
    mp_swim_update_t u[20];
    memset(u, 0, sizeof u);
    for (int i = 0; i < 20; i++) {
        make_id(100 + i, u[i].id);
        u[i].has_addr = 1;
        snprintf(u[i].addr, sizeof u[i].addr, "tcp://1.1.1.%d:1", i);
    }
    make_id(50, other);
    mp__swim_absorb(sw, 0, other, u, 20);
    mp_swim_stats_t st;
    mp__swim_get_stats(sw, &st);
    CHECK(mp__swim_live_count(sw) == 8, "members %zu", mp__swim_live_count(sw));
    CHECK(st.refused_cap == 13, "refused %llu",
          (unsigned long long)st.refused_cap);
    CHECK(st.queue_dropped >= 3, "queue dropped %llu",
          (unsigned long long)st.queue_dropped);
    CHECK(st.events_dropped == 7 - 5, "events dropped %llu",
          (unsigned long long)st.events_dropped);

    /* Relays: two served at once, then refused. */
    mp_swim_msg_t *m = &dec_msg;
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_PING_REQ;
    m->has_target = 1;
    memcpy(m->target, u[0].id, MP_SWIM_ID_BYTES);
    for (int i = 0; i < 4; i++) {
        m->seq = (uint64_t)i;
        mp__swim_on_message(sw, 1, u[1 + i].id, m);
    }
    mp__swim_get_stats(sw, &st);
    CHECK(st.relays_refused == 2, "relays refused %llu",
          (unsigned long long)st.relays_refused);
    /* Outgoing: only 3 held (2 relay PINGs + ...), the rest dropped. */
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_PING;
    for (int i = 0; i < 5; i++)
        mp__swim_on_message(sw, 2, u[1].id, m);
    mp__swim_get_stats(sw, &st);
    CHECK(st.out_dropped >= 3, "out dropped %llu",
          (unsigned long long)st.out_dropped);
    int sent = 0;
    while (mp__swim_poll_send(sw, &out_msg))
        sent++;
    CHECK(sent == 3, "sent %d", sent);

    /* SYNC_REQ: burst 2, then 1 per second. */
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_SYNC_REQ;
    for (int i = 0; i < 10; i++)
        mp__swim_on_message(sw, 1000, u[2].id, m);
    mp__swim_get_stats(sw, &st);
    CHECK(st.sync_served == 2 && st.joins_refused == 8, "sync %llu/%llu",
          (unsigned long long)st.sync_served,
          (unsigned long long)st.joins_refused);
    mp__swim_on_message(sw, 1999, u[2].id, m);
    mp__swim_on_message(sw, 2000, u[2].id, m);
    mp__swim_get_stats(sw, &st);
    CHECK(st.sync_served == 3, "one more after a second: %llu",
          (unsigned long long)st.sync_served);
    while (mp__swim_poll_send(sw, &out_msg))
        ;
    mp__swim_free(sw);

    /* Pending probes: one at a time with long timeouts. */
    mp__swim_config_default(&c);
    c.max_pending_probes = 1;
    c.ping_timeout_ms = 10000;
    CHECK(mp__swim_new(&c, self, "me", 7, 0, &sw) == MOSHPIT_OK, "new");
    mp__swim_absorb(sw, 0, other, u, 3);
    for (uint64_t now = 0; now < 2000; now += 50)
        mp__swim_tick(sw, now);
    mp__swim_get_stats(sw, &st);
    CHECK(st.probes_skipped >= 5, "probes skipped %llu",
          (unsigned long long)st.probes_skipped);
    mp__swim_free(sw);

    /* A full table makes room by forgetting its oldest dead record. */
    mp__swim_config_default(&c);
    c.max_members = 3;
    c.suspicion_min_ms = 1;
    c.suspicion_mult = 1;
    CHECK(mp__swim_new(&c, self, "me", 7, 0, &sw) == MOSHPIT_OK, "new");
    mp__swim_absorb(sw, 0, other, u, 2);
    u[0].state = MP_SWIM_SUSPECT;
    mp__swim_absorb(sw, 0, other, u, 1);
    u[0].state = MP_SWIM_ALIVE;
    mp__swim_tick(sw, 5000);
    mp_swim_member_t mi;
    CHECK(mp__swim_lookup(sw, u[0].id, &mi) && mi.state == MP_SWIM_DEAD,
          "u0 dead");
    mp__swim_absorb(sw, 5000, other, &u[5], 1);
    CHECK(!mp__swim_lookup(sw, u[0].id, &mi) &&
              mp__swim_lookup(sw, u[5].id, &mi),
          "dead record gave way to a new member");
    mp__swim_free(sw);
}

/* The piggyback budget is never exceeded, each update is sent
 * retransmits() times and then retired, and sizes match the encoding. */
static void test_piggyback(void) {
    uint8_t self[MP_SWIM_ID_BYTES], other[MP_SWIM_ID_BYTES];
    make_id(0, self);
    make_id(1, other);
    mp_swim_t *sw;
    CHECK(mp__swim_new(NULL, self, "tcp://10.0.0.1:7400", 9, 0, &sw) ==
              MOSHPIT_OK,
          "new");
    mp_swim_update_t u[40], out[MP_SWIM_PB_MAX];
    memset(u, 0, sizeof u);
    for (int i = 0; i < 40; i++) {
        make_id(200 + i, u[i].id);
        u[i].inc = (uint32_t)i * 1000u; /* several integer sizes */
        u[i].has_addr = 1;
        snprintf(u[i].addr, sizeof u[i].addr, "tcp://192.168.%d.%d:7400", i, i);
    }
    mp__swim_absorb(sw, 0, other, u, 40);
    uint32_t limit = mp__swim_retransmits(sw);
    CHECK(limit == 2 * 6, "retransmits at n=41: %u", limit);
    /* Update sizes against the real encoding. */
    static uint8_t b0[MP_SWIM_MSG_MAX], b1[MP_SWIM_MSG_MAX];
    size_t l0, l1;
    for (int i = 0; i < 40; i++) {
        for (int with = 0; with <= 1; with++) {
            mp_swim_update_t v = u[i];
            v.has_addr = (uint8_t)with;
            if (!with)
                v.addr[0] = '\0';
            CHECK(mp__wire_swim_block_encode(0, NULL, 0, b0, sizeof b0, &l0) ==
                          MOSHPIT_OK &&
                      mp__wire_swim_block_encode(0, &v, 1, b1, sizeof b1,
                                                 &l1) == MOSHPIT_OK &&
                      l1 - l0 == mp__swim_update_bytes(&v),
                  "update %d size %zu vs %zu", i, l1 - l0,
                  mp__swim_update_bytes(&v));
        }
    }
    /* Drain with a small budget: 41 updates (self included) x limit. */
    size_t total = 0;
    for (int k = 0; k < 10000; k++) {
        size_t n = mp__swim_take_updates(sw, other, 300, out, MP_SWIM_PB_MAX);
        if (n == 0)
            break;
        size_t bytes = 0;
        for (size_t i = 0; i < n; i++)
            bytes += mp__swim_update_bytes(&out[i]);
        CHECK(bytes <= 300, "budget exceeded: %zu", bytes);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                CHECK(memcmp(out[i].id, out[j].id, MP_SWIM_ID_BYTES) != 0,
                      "update twice in one message");
        total += n;
    }
    CHECK(total == 41u * limit, "sent %zu, want %u", total, 41u * limit);
    CHECK(mp__swim_take_updates(sw, NULL, 0, out, MP_SWIM_PB_MAX) == 0,
          "zero budget");
    /* Encoded block fits budget + overhead. */
    mp__swim_absorb(sw, 0, other, u, 1); /* nothing new: same record */
    u[0].inc += 1;
    mp__swim_absorb(sw, 0, other, u, 1);
    size_t n = mp__swim_take_updates(sw, NULL, 1024, out, MP_SWIM_PB_MAX);
    CHECK(n == 1, "one fresh update: %zu", n);
    CHECK(mp__wire_swim_block_encode(7, out, n, b1, sizeof b1, &l1) ==
                  MOSHPIT_OK &&
              l1 <= mp__swim_update_bytes(&out[0]) + MP_SWIM_BLOCK_OVERHEAD,
          "block of %zu bytes", l1);
    mp__swim_free(sw);
}

/* SYNC that does not answer our request is ignored; a bootstrap that
 * does not advance, or stays silent, ends the join with SYNC_FAILED. */
static void test_sync_misuse(void) {
    uint8_t self[MP_SWIM_ID_BYTES], boot[MP_SWIM_ID_BYTES],
        other[MP_SWIM_ID_BYTES];
    make_id(0, self);
    make_id(1, boot);
    make_id(2, other);
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    mp_swim_t *sw;
    mp_swim_event_t ev;
    CHECK(mp__swim_new(&c, self, "me", 1, 0, &sw) == MOSHPIT_OK, "new");
    CHECK(mp__swim_join(sw, 0, boot, "tcp://boot:1") == MOSHPIT_OK, "join");
    CHECK(mp__swim_poll_send(sw, &out_msg) &&
              out_msg.msg.type == MP_SWIM_MSG_SYNC_REQ &&
              out_msg.msg.cursor == 0 && strcmp(out_msg.msg.addr, "me") == 0,
          "SYNC_REQ 0");
    mp_swim_msg_t *m = &dec_msg;
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_SYNC;
    m->next = 5;
    mp__swim_on_message(sw, 1, other, m);
    mp_swim_stats_t st;
    mp__swim_get_stats(sw, &st);
    CHECK(st.unexpected == 1, "SYNC from a stranger ignored");
    m->cursor = 3;
    mp__swim_on_message(sw, 1, boot, m);
    mp__swim_get_stats(sw, &st);
    CHECK(st.unexpected == 2, "SYNC for another cursor ignored");
    m->cursor = 0;
    mp__swim_on_message(sw, 1, boot, m);
    CHECK(mp__swim_poll_send(sw, &out_msg) &&
              out_msg.msg.type == MP_SWIM_MSG_SYNC_REQ &&
              out_msg.msg.cursor == 5,
          "next page requested");
    m->cursor = 5;
    m->next = 5; /* does not advance */
    mp__swim_on_message(sw, 2, boot, m);
    bool failed = false;
    while (mp__swim_poll_event(sw, &ev))
        failed |= ev.type == MP_SWIM_EV_SYNC_FAILED;
    CHECK(failed && !mp__swim_synced(sw), "non-advancing pages: failed");
    /* Silence: retries, then SYNC_FAILED. */
    CHECK(mp__swim_join(sw, 10, boot, "tcp://boot:1") == MOSHPIT_OK, "join");
    int reqs = 0;
    failed = false;
    for (uint64_t now = 10; now < 20000; now += 100) {
        mp__swim_tick(sw, now);
        while (mp__swim_poll_send(sw, &out_msg))
            reqs += out_msg.msg.type == MP_SWIM_MSG_SYNC_REQ;
        while (mp__swim_poll_event(sw, &ev))
            failed |= ev.type == MP_SWIM_EV_SYNC_FAILED;
    }
    CHECK(failed, "silent bootstrap: SYNC_FAILED");
    CHECK(reqs == 1 + (int)c.sync_retries, "SYNC_REQs %d", reqs);
    mp__swim_free(sw);
}

/* Bad updates from the network never do anything. */
static void test_invalid_updates(void) {
    uint8_t self[MP_SWIM_ID_BYTES], other[MP_SWIM_ID_BYTES];
    make_id(0, self);
    make_id(1, other);
    mp_swim_t *sw;
    CHECK(mp__swim_new(NULL, self, "me", 1, 0, &sw) == MOSHPIT_OK, "new");
    mp_swim_update_t u[4];
    memset(u, 0, sizeof u);
    for (int i = 0; i < 4; i++)
        make_id(10 + i, u[i].id);
    u[0].state = 4;
    u[1].has_addr = 2;
    u[2].has_addr = 1;
    memset(u[2].addr, 'x', sizeof u[2].addr); /* unterminated */
    u[3].state = MP_SWIM_SUSPECT;
    u[3].inc = UINT32_MAX;
    mp__swim_absorb(sw, 0, other, u, 4);
    mp_swim_stats_t st;
    mp__swim_get_stats(sw, &st);
    CHECK(st.rejected == 4 && mp__swim_live_count(sw) == 1,
          "rejected %llu, live %zu", (unsigned long long)st.rejected,
          mp__swim_live_count(sw));
    /* An unknown message type. */
    memset(&dec_msg, 0, sizeof dec_msg);
    dec_msg.type = (mp_swim_msg_type_t)99;
    CHECK(mp__swim_on_message(sw, 0, other, &dec_msg) == MOSHPIT_OK,
          "unknown type");
    mp__swim_get_stats(sw, &st);
    CHECK(st.rejected == 5, "unknown type rejected");
    /* Counts beyond the arrays are clamped, not trusted. */
    dec_msg.type = MP_SWIM_MSG_GOSSIP;
    dec_msg.n_updates = 1000000;
    dec_msg.n_entries = 1000000;
    CHECK(mp__swim_on_message(sw, 0, other, &dec_msg) == MOSHPIT_OK,
          "huge counts");
    mp__swim_free(sw);
}

/* One machine driven by hand: members B, C, D answer every PING at once;
 * X never does. `relay` picks who sends the relayed ACK for X after the
 * PING_REQs: 0 nobody, 1 an intermediary that was asked, 2 a member that
 * was not asked, 3 X itself, late (after the direct phase). Returns the
 * time A suspected X, or UINT64_MAX. */
static uint64_t drive_probe(int relay) {
    uint8_t a[MP_SWIM_ID_BYTES], ids[4][MP_SWIM_ID_BYTES];
    make_id(0, a);
    for (int i = 0; i < 4; i++)
        make_id(1 + i, ids[i]); /* B, C, D, X */
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.indirect_k = 2;
    mp_swim_t *sw;
    CHECK(mp__swim_new(&c, a, "a", 5, 0, &sw) == MOSHPIT_OK, "new");
    mp_swim_update_t u[4];
    memset(u, 0, sizeof u);
    for (int i = 0; i < 4; i++) {
        memcpy(u[i].id, ids[i], MP_SWIM_ID_BYTES);
        u[i].has_addr = 1;
        snprintf(u[i].addr, sizeof u[i].addr, "m%d", i);
    }
    mp__swim_absorb(sw, 0, ids[0], u, 4);
    uint64_t now = 0, suspected = UINT64_MAX, x_seq = 0, x_ping_at = 0;
    bool asked[4] = {false}, relayed = false;
    mp_swim_msg_t *m = &dec_msg;
    for (int step = 0; step < 10000 && now < 20000; step++) {
        uint64_t w = mp__swim_next_wakeup(sw);
        now = w > now ? w : now;
        mp__swim_tick(sw, now);
        while (mp__swim_poll_send(sw, &out_msg)) {
            const mp_swim_msg_t *o = &out_msg.msg;
            int to = out_msg.to[0] - 2; /* 0..3 = B, C, D, X */
            memset(m, 0, sizeof *m);
            if (o->type == MP_SWIM_MSG_PING && to == 3) {
                if (x_seq == 0) { /* the first probe of X is the one */
                    x_seq = o->seq;
                    x_ping_at = now;
                }
                continue;
            }
            if (o->type == MP_SWIM_MSG_PING) {
                m->type = MP_SWIM_MSG_ACK;
                m->seq = o->seq;
                mp__swim_on_message(sw, now, ids[to], m);
            } else if (o->type == MP_SWIM_MSG_PING_REQ && to >= 0 && to < 3) {
                asked[to] = true;
                CHECK(memcmp(o->target, ids[3], MP_SWIM_ID_BYTES) == 0 &&
                          o->seq == x_seq,
                      "PING_REQ names X and the probe's seq");
            }
        }
        bool any_asked = asked[0] || asked[1] || asked[2];
        if (any_asked && !relayed && relay != 0) {
            relayed = true;
            int who = -1;
            for (int i = 0; i < 3; i++)
                if ((relay == 1 && asked[i]) || (relay == 2 && !asked[i]))
                    who = i;
            memset(m, 0, sizeof *m);
            m->type = MP_SWIM_MSG_ACK;
            m->seq = x_seq;
            if (relay == 3) {
                mp__swim_on_message(sw, now, ids[3], m); /* late, direct */
            } else if (who >= 0) {
                m->has_target = 1;
                memcpy(m->target, ids[3], MP_SWIM_ID_BYTES);
                mp__swim_on_message(sw, now, ids[who], m);
            }
        }
        mp_swim_event_t ev;
        while (mp__swim_poll_event(sw, &ev))
            if (ev.type == MP_SWIM_EV_SUSPECT && ev.id[0] == ids[3][0] &&
                suspected == UINT64_MAX) {
                suspected = now;
                CHECK(now ==
                          x_ping_at + c.ping_timeout_ms + c.ping_req_timeout_ms,
                      "suspected %llu ms after the PING",
                      (unsigned long long)(now - x_ping_at));
            }
        if (suspected != UINT64_MAX ||
            (x_seq != 0 &&
             now > x_ping_at + c.ping_timeout_ms + c.ping_req_timeout_ms))
            break;
    }
    CHECK(relay == 0 || relayed, "relay case %d never reached", relay);
    mp__swim_free(sw);
    return suspected;
}

static void test_probe_protocol(void) {
    CHECK(drive_probe(0) != UINT64_MAX, "silent X never suspected");
    CHECK(drive_probe(1) == UINT64_MAX, "ACK relayed by an asked member");
    CHECK(drive_probe(2) != UINT64_MAX,
          "a relayed ACK from a member that was not asked counted");
    CHECK(drive_probe(3) == UINT64_MAX, "late direct ACK");
}

/* Corrections: a member whose claim about itself is older than our record
 * gets that record first in our next message to it. */
static void test_correction(void) {
    uint8_t a[MP_SWIM_ID_BYTES], b[MP_SWIM_ID_BYTES];
    make_id(0, a);
    make_id(1, b);
    mp_swim_t *sw;
    CHECK(mp__swim_new(NULL, a, "a", 5, 0, &sw) == MOSHPIT_OK, "new");
    mp_swim_update_t u;
    memset(&u, 0, sizeof u);
    memcpy(u.id, b, MP_SWIM_ID_BYTES);
    u.state = MP_SWIM_DEAD;
    u.inc = 3;
    uint8_t third[MP_SWIM_ID_BYTES];
    make_id(7, third);
    u.state = MP_SWIM_ALIVE;
    u.has_addr = 1;
    strcpy(u.addr, "b");
    mp__swim_absorb(sw, 0, third, &u, 1); /* B alive@3 (hearsay) */
    u.state = MP_SWIM_SUSPECT;
    u.has_addr = 0;
    mp__swim_absorb(sw, 0, third, &u, 1); /* B suspect@3 */
    while (mp__swim_poll_event(sw, &(mp_swim_event_t){0}))
        ;
    /* B (restarted) pings at incarnation 0. */
    mp_swim_msg_t *m = &dec_msg;
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_PING;
    m->seq = 77;
    strcpy(m->addr, "b");
    mp__swim_on_message(sw, 10, b, m);
    bool found = false;
    while (mp__swim_poll_send(sw, &out_msg)) {
        if (out_msg.msg.type != MP_SWIM_MSG_ACK)
            continue;
        found = true;
        CHECK(out_msg.msg.seq == 77 && out_msg.msg.n_updates >= 1 &&
                  memcmp(out_msg.msg.updates[0].id, b, MP_SWIM_ID_BYTES) == 0 &&
                  out_msg.msg.updates[0].state == MP_SWIM_SUSPECT &&
                  out_msg.msg.updates[0].inc == 3,
              "ACK carries B's record first");
    }
    CHECK(found, "no ACK");
    /* Direct evidence kept B's suspicion from expiring meanwhile: its
     * timer restarted at the PING. */
    mp__swim_tick(sw, 10 + mp__swim_suspicion_ms(sw) - 1);
    mp_swim_member_t mi;
    CHECK(mp__swim_lookup(sw, b, &mi) && mi.state == MP_SWIM_SUSPECT,
          "B still suspect");
    /* B refutes with 4 on its next message: alive. */
    m->inc = 4;
    mp__swim_on_message(sw, 20, b, m);
    CHECK(mp__swim_lookup(sw, b, &mi) && mi.state == MP_SWIM_ALIVE &&
              mi.inc == 4 && mi.addr_confirmed,
          "B alive@4, address confirmed");
    /* The next ACK carries no correction. */
    while (mp__swim_poll_send(sw, &out_msg))
        if (out_msg.msg.type == MP_SWIM_MSG_ACK)
            for (uint32_t i = 0; i < out_msg.msg.n_updates; i++)
                CHECK(out_msg.msg.updates[i].inc != 3,
                      "stale record sent again");
    mp__swim_free(sw);
}

/* Helpers for machines driven by hand. */
static mp_swim_t *hand_new(const mp_swim_config_t *c, int self) {
    uint8_t id[MP_SWIM_ID_BYTES];
    make_id(self, id);
    mp_swim_t *sw = NULL;
    CHECK(mp__swim_new(c, id, "self", 3, 0, &sw) == MOSHPIT_OK, "new");
    return sw;
}

static void hand_upd(mp_swim_update_t *u, int who, uint8_t state,
                     uint32_t inc) {
    memset(u, 0, sizeof *u);
    make_id(who, u->id);
    u->state = state;
    u->inc = inc;
    if (state == MP_SWIM_ALIVE) {
        u->has_addr = 1;
        snprintf(u->addr, sizeof u->addr, "a%d", who);
    }
}

/* Feeds the machine a PING from `who` (so it counts as heard from). */
static void hand_ping_from(mp_swim_t *sw, uint64_t now, int who) {
    memset(&dec_msg, 0, sizeof dec_msg);
    dec_msg.type = MP_SWIM_MSG_PING;
    snprintf(dec_msg.addr, sizeof dec_msg.addr, "a%d", who);
    uint8_t id[MP_SWIM_ID_BYTES];
    make_id(who, id);
    mp__swim_on_message(sw, now, id, &dec_msg);
}

static void hand_drain(mp_swim_t *sw) {
    mp_swim_update_t out[MP_SWIM_PB_MAX];
    mp_swim_event_t ev;
    while (mp__swim_take_updates(sw, NULL, 100000, out, MP_SWIM_PB_MAX) > 0)
        ;
    while (mp__swim_poll_send(sw, &out_msg))
        ;
    while (mp__swim_poll_event(sw, &ev))
        ;
}

/* Gossip classes: alive news first, then doubt, then new members,
 * whatever the order they were queued in. */
static void test_priorities(void) {
    mp_swim_t *sw = hand_new(NULL, 0);
    uint8_t from[MP_SWIM_ID_BYTES];
    make_id(9, from);
    mp_swim_update_t u[3], out[MP_SWIM_PB_MAX];
    hand_upd(&u[0], 1, MP_SWIM_ALIVE, 0);
    hand_upd(&u[1], 2, MP_SWIM_ALIVE, 0);
    mp__swim_absorb(sw, 0, from, u, 2);
    hand_drain(sw);
    hand_upd(&u[0], 3, MP_SWIM_ALIVE, 0);   /* new member */
    hand_upd(&u[1], 2, MP_SWIM_SUSPECT, 0); /* doubt */
    hand_upd(&u[2], 1, MP_SWIM_ALIVE, 4);   /* alive news */
    mp__swim_absorb(sw, 0, from, u, 3);
    size_t n = mp__swim_take_updates(sw, from, 1000, out, 3);
    CHECK(n == 3 && out[0].id[0] == 2 && out[1].id[0] == 3 && out[2].id[0] == 4,
          "order of classes: %zu updates", n);
    /* Strict: while the alive news has transmissions left, a one-update
     * budget is all its. */
    n = mp__swim_take_updates(sw, from, 1000, out, 1);
    CHECK(n == 1 && out[0].id[0] == 2, "alive news first again");
    mp__swim_free(sw);
}

/* A machine (self 0, with the partner rule given, if any) that a third
 * party (id 99, into third) told of 60 members 1..60, all alive; u holds
 * those updates, for the caller to reuse. */
static mp_swim_t *
sixty_alive(const mp_swim_config_t *c,
            bool (*partner)(void *ctx, const uint8_t id[MP_SWIM_ID_BYTES]),
            uint8_t third[MP_SWIM_ID_BYTES], mp_swim_update_t u[60]) {
    mp_swim_t *sw = hand_new(c, 0);
    if (partner != NULL)
        mp__swim_set_partners(sw, partner, NULL);
    make_id(99, third);
    for (int i = 0; i < 60; i++)
        hand_upd(&u[i], 1 + i, MP_SWIM_ALIVE, 0);
    mp__swim_absorb(sw, 0, third, u, 60);
    return sw;
}

/* Someone else's suspicion makes the suspect the next probe, members we
 * have heard from first; the PING carries the suspicion; a message to a
 * member in doubt carries nothing but its own record. */
static void test_urgent_probe(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    /* Enough members that the round robin, which goes on alongside, does
     * not reach the two suspects first. */
    mp_swim_update_t u[60];
    uint8_t third[MP_SWIM_ID_BYTES];
    mp_swim_t *sw = sixty_alive(&c, NULL, third, u);
    hand_ping_from(sw, 1, 2); /* heard from member 2 */
    hand_drain(sw);
    hand_upd(&u[0], 1, MP_SWIM_SUSPECT, 0); /* never heard from */
    hand_upd(&u[1], 2, MP_SWIM_LEFT, 0);    /* heard from */
    mp__swim_absorb(sw, 2, third, u, 2);
    /* Something else to gossip, so we can see it is withheld. */
    hand_upd(&u[2], 7, MP_SWIM_ALIVE, 0);
    mp__swim_absorb(sw, 2, third, &u[2], 1);
    int order[2] = {-1, -1}, got = 0;
    for (uint64_t now = 2; now < 2000 && got < 2; now += 10) {
        mp__swim_tick(sw, now);
        while (mp__swim_poll_send(sw, &out_msg)) {
            mp_swim_member_t tm;
            if (out_msg.msg.type != MP_SWIM_MSG_PING || got >= 2 ||
                !mp__swim_lookup(sw, out_msg.to, &tm) ||
                tm.state == MP_SWIM_ALIVE)
                continue; /* the round-robin probes go on alongside */
            int to = out_msg.to[0] - 1;
            order[got++] = to;
            CHECK(out_msg.msg.n_updates == 1 &&
                      out_msg.msg.updates[0].id[0] == (uint8_t)(to + 1) &&
                      out_msg.msg.updates[0].state != MP_SWIM_ALIVE,
                  "PING to suspect %d: %u updates, first about %d", to,
                  out_msg.msg.n_updates,
                  out_msg.msg.n_updates ? out_msg.msg.updates[0].id[0] - 1
                                        : -1);
        }
    }
    CHECK(order[0] == 2 && order[1] == 1,
          "urgent probes went to %d then %d, want 2 (heard) then 1", order[0],
          order[1]);
    /* Anything sent to a member in doubt: its own record only. */
    mp_swim_update_t out[MP_SWIM_PB_MAX];
    uint8_t one[MP_SWIM_ID_BYTES];
    make_id(1, one);
    size_t n = mp__swim_take_updates(sw, one, 100000, out, MP_SWIM_PB_MAX);
    CHECK(n == 0, "gossip to a suspect: %zu updates", n);
    mp__swim_free(sw);
}

static bool even_partner(void *ctx, const uint8_t id[MP_SWIM_ID_BYTES]) {
    (void)ctx;
    return id[0] % 2 == 0;
}

/* With a partner rule (a swarm larger than sessions_max), someone else's
 * suspicion makes only a partner an urgent probe: a suspect we have no
 * session with is left to its partners (docs/DESIGN.md, "Sessions"). */
static void test_urgent_partners(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    mp_swim_update_t u[60];
    uint8_t third[MP_SWIM_ID_BYTES];
    mp_swim_t *sw = sixty_alive(&c, even_partner, third, u);
    hand_drain(sw);
    hand_upd(&u[0], 1, MP_SWIM_SUSPECT, 0); /* member 1: a partner */
    hand_upd(&u[1], 2, MP_SWIM_SUSPECT, 0); /* member 2: not one */
    mp__swim_absorb(sw, 2, third, u, 2);
    int pings[2] = {0, 0};
    for (uint64_t now = 2; now < 2000; now += 10) {
        mp__swim_tick(sw, now);
        while (mp__swim_poll_send(sw, &out_msg)) {
            int to = out_msg.to[0] - 1;
            if (out_msg.msg.type == MP_SWIM_MSG_PING && (to == 1 || to == 2))
                pings[to - 1]++;
        }
    }
    CHECK(pings[0] >= 1, "no urgent probe of the suspect partner");
    CHECK(pings[1] == 0, "%d probes of a suspect that is no partner", pings[1]);
    mp__swim_free(sw);
}

/* The joiner pulls the list a second time, from another member, once;
 * only the first pull reports SYNCED. */
static void test_resync(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    mp_swim_t *sw = hand_new(&c, 0);
    uint8_t boot[MP_SWIM_ID_BYTES], other[MP_SWIM_ID_BYTES];
    make_id(1, boot);
    make_id(2, other);
    CHECK(mp__swim_join(sw, 0, boot, "a1") == MOSHPIT_OK, "join");
    CHECK(mp__swim_syncing(sw), "syncing");
    while (mp__swim_poll_send(sw, &out_msg))
        ; /* the first SYNC_REQ */
    mp_swim_msg_t *m = &dec_msg;
    memset(m, 0, sizeof *m);
    m->type = MP_SWIM_MSG_SYNC;
    m->n_entries = 1;
    hand_upd(&m->entries[0], 2, MP_SWIM_ALIVE, 0);
    mp__swim_on_message(sw, 5, boot, m);
    CHECK(mp__swim_synced(sw) && mp__swim_syncing(sw),
          "synced, follow-up pending");
    int synced_events = 0, reqs_other = 0, reqs_boot = 0;
    mp_swim_event_t ev;
    for (uint64_t now = 5; now < 5 + c.resync_ms + 500; now += 50) {
        mp__swim_tick(sw, now);
        while (mp__swim_poll_send(sw, &out_msg)) {
            if (out_msg.msg.type == MP_SWIM_MSG_PING) {
                /* Members answer: they must stay alive meanwhile. */
                static mp_swim_msg_t ack;
                uint8_t to[MP_SWIM_ID_BYTES];
                memcpy(to, out_msg.to, MP_SWIM_ID_BYTES);
                memset(&ack, 0, sizeof ack);
                ack.type = MP_SWIM_MSG_ACK;
                ack.seq = out_msg.msg.seq;
                mp__swim_on_message(sw, now, to, &ack);
                continue;
            }
            if (out_msg.msg.type != MP_SWIM_MSG_SYNC_REQ)
                continue;
            CHECK(now >= 5 + c.resync_ms, "follow-up pull too early");
            reqs_other += memcmp(out_msg.to, other, MP_SWIM_ID_BYTES) == 0;
            reqs_boot += memcmp(out_msg.to, boot, MP_SWIM_ID_BYTES) == 0;
        }
        while (mp__swim_poll_event(sw, &ev))
            synced_events += ev.type == MP_SWIM_EV_SYNCED;
    }
    CHECK(reqs_other == 1 && reqs_boot == 0,
          "follow-up pull: %d to another member, %d to the bootstrap",
          reqs_other, reqs_boot);
    mp__swim_on_message(sw, 20000, other, m);
    while (mp__swim_poll_event(sw, &ev))
        synced_events += ev.type == MP_SWIM_EV_SYNCED;
    CHECK(synced_events == 1 && !mp__swim_syncing(sw),
          "SYNCED events %d, syncing %d", synced_events, mp__swim_syncing(sw));
    mp__swim_free(sw);
}

/* PINGs from strangers share the SYNC_REQ token bucket. */
static void test_admission(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.sync_rate = 1;
    c.sync_burst = 3;
    mp_swim_t *sw = hand_new(&c, 0);
    for (int i = 0; i < 10; i++)
        hand_ping_from(sw, 100, 1 + i);
    mp_swim_stats_t st;
    mp__swim_get_stats(sw, &st);
    CHECK(mp__swim_live_count(sw) == 4 && st.joins_refused == 7,
          "strangers admitted: %zu members, %llu refused",
          mp__swim_live_count(sw), (unsigned long long)st.joins_refused);
    /* Known members' PINGs are never limited. */
    for (int i = 0; i < 10; i++)
        hand_ping_from(sw, 100, 1);
    mp__swim_get_stats(sw, &st);
    CHECK(st.joins_refused == 7, "a member's PING was refused");
    int acks = 0;
    while (mp__swim_poll_send(sw, &out_msg))
        acks += out_msg.msg.type == MP_SWIM_MSG_ACK;
    CHECK(acks == 3 + 10, "ACKs %d", acks);
    mp__swim_free(sw);
}

/* Regression (found by fuzz_swim_wire): removing records releases their
 * address strings, and a release may compact the arena; the compaction
 * must only keep, and have room for, strings still referenced. Many long
 * addresses, most of them forgotten, the rest (and their hints) intact. */
static void test_arena(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.suspicion_min_ms = 10;
    c.suspicion_mult = 1;
    c.dead_retain_ms = 10;
    mp_swim_t *sw = hand_new(&c, 0);
    enum { N = 600, KEEP = 150 };
    static mp_swim_update_t u[N];
    uint8_t third[MP_SWIM_ID_BYTES];
    make_id(9999, third);
    for (int i = 0; i < N; i++) {
        memset(&u[i], 0, sizeof u[i]);
        make_id(1000 + i, u[i].id);
        u[i].id[1] = (uint8_t)(i >> 8); /* make_id only varies byte 0 */
        u[i].has_addr = 1;
        snprintf(u[i].addr, sizeof u[i].addr, "tcp://%d/%0200d", i, i);
    }
    mp__swim_absorb(sw, 0, third, u, N);
    /* Confirmed addresses (direct claims), then third-party hints. */
    for (int i = 0; i < N; i++)
        mp__swim_absorb(sw, 0, u[i].id, &u[i], 1);
    /* Backwards: the hint table holds 64 and evicts at random, so the last
     * ones set (kept members) are the ones likely to survive. */
    for (int i = N - 1; i >= 0; i--) {
        mp_swim_update_t h = u[i];
        h.inc = 1;
        snprintf(h.addr, sizeof h.addr, "hint://%d/%0150d", i, i);
        mp__swim_absorb(sw, 0, third, &h, 1);
    }
    for (int i = KEEP; i < N; i++) {
        mp_swim_update_t d = u[i];
        d.state = MP_SWIM_DEAD;
        d.inc = 1;
        d.has_addr = 0;
        mp__swim_absorb(sw, 1, third, &d, 1);
    }
    for (uint64_t now = 2; now < 5000; now += 7) {
        mp__swim_tick(sw, now);
        while (mp__swim_poll_send(sw, &out_msg)) {
            /* The kept members answer their probes. */
            int i = out_msg.to[1] * 256 + ((out_msg.to[0] - 1001) & 0xff);
            if (out_msg.msg.type != MP_SWIM_MSG_PING || i < 0 || i >= KEEP ||
                memcmp(out_msg.to, u[i].id, MP_SWIM_ID_BYTES) != 0)
                continue;
            static mp_swim_msg_t ack;
            memset(&ack, 0, sizeof ack);
            ack.type = MP_SWIM_MSG_ACK;
            ack.seq = out_msg.msg.seq;
            ack.inc = 1;
            mp__swim_on_message(sw, now, u[i].id, &ack);
        }
        hand_drain(sw);
    }
    int bad = 0, hints = 0;
    for (int i = 0; i < N; i++) {
        mp_swim_member_t m;
        bool known = mp__swim_lookup(sw, u[i].id, &m);
        if (i >= KEEP) {
            bad += known;
            continue;
        }
        if (!known || strcmp(m.addr, u[i].addr) != 0) {
            bad++;
            continue;
        }
        if (m.hint != NULL) {
            char want[MP_SWIM_ADDR_MAX];
            snprintf(want, sizeof want, "hint://%d/%0150d", i, i);
            bad += strcmp(m.hint, want) != 0;
            hints++;
        }
    }
    CHECK(bad == 0, "arena: %d wrong records after compaction", bad);
    CHECK(hints > 0, "no hint survived to be checked");
    mp__swim_free(sw);
}

/* 30,000 random (well-formed) messages from random senders, self among
 * them, with random updates about a small pool of members (self too) in
 * every state, at extreme incarnations, with odd addresses, and random
 * pages: nothing breaks, every answer encodes, the caps hold, and the
 * machine's own incarnation never goes down. */
static void test_random_input(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.max_members = 24;
    c.queue_max = 16;
    c.events_max = 32;
    c.out_max = 16;
    c.max_relays = 4;
    c.max_pending_probes = 3;
    c.dead_retain_ms = 3000;
    mp_swim_t *sw = hand_new(&c, 0);
    uint64_t rng = 12345, now = 0;
    uint32_t last_inc = 0;
    int encode_failures = 0, over_cap = 0, inc_down = 0;
    static const uint32_t incs[] = {
        0, 1, 2, 3, 100, UINT32_MAX - 2, UINT32_MAX - 1, UINT32_MAX};
    for (int it = 0; it < 30000; it++) {
        mp_swim_msg_t *m = &dec_msg;
        memset(m, 0, sizeof *m);
        m->type = (mp_swim_msg_type_t)(16 + test_splitmix64(&rng) % 6);
        m->inc = incs[test_splitmix64(&rng) % 8];
        m->seq = test_splitmix64(&rng) % 4; /* sometimes a pending one */
        m->has_target = test_splitmix64(&rng) % 2;
        make_id((int)(test_splitmix64(&rng) % 40), m->target);
        snprintf(m->addr, sizeof m->addr, "r%d",
                 (int)(test_splitmix64(&rng) % 5));
        m->cursor = (uint32_t)(test_splitmix64(&rng) % 3);
        m->next = (uint32_t)(test_splitmix64(&rng) % 4);
        m->n_updates = (uint32_t)(test_splitmix64(&rng) % 6);
        m->n_entries = (uint32_t)(test_splitmix64(&rng) % 6);
        for (uint32_t k = 0; k < 12; k++) {
            mp_swim_update_t *u = k < 6 ? &m->updates[k] : &m->entries[k - 6];
            make_id((int)(test_splitmix64(&rng) % 40), u->id);
            u->state = (uint8_t)(test_splitmix64(&rng) % 5); /* 4: bad */
            u->inc = incs[test_splitmix64(&rng) % 8];
            u->has_addr = (uint8_t)(test_splitmix64(&rng) % 2);
            size_t len = test_splitmix64(&rng) % 4 == 0 ? 255 : 4;
            memset(u->addr, 'a' + (int)(test_splitmix64(&rng) % 3), len);
            u->addr[len] = '\0';
        }
        uint8_t from[MP_SWIM_ID_BYTES];
        make_id((int)(test_splitmix64(&rng) % 40), from);
        now += test_splitmix64(&rng) % 400;
        if (test_splitmix64(&rng) % 50 == 0) {
            uint8_t boot[MP_SWIM_ID_BYTES];
            make_id(1 + (int)(test_splitmix64(&rng) % 30), boot);
            (void)mp__swim_join(sw, now, boot, "boot");
        }
        mp__swim_on_message(sw, now, from, m);
        mp__swim_tick(sw, now);
        size_t len;
        while (mp__swim_poll_send(sw, &out_msg))
            encode_failures +=
                mp__wire_swim_msg_encode(&out_msg.msg, enc, sizeof enc, &len) !=
                MOSHPIT_OK;
        mp_swim_event_t ev;
        while (mp__swim_poll_event(sw, &ev))
            ;
        size_t cur = 0, count = 0;
        mp_swim_member_t mi;
        while (mp__swim_member_next(sw, &cur, &mi))
            count++;
        over_cap += count > c.max_members || mp__swim_live_count(sw) > count ||
                    mp__swim_pending_updates(sw) > c.queue_max;
        inc_down += mp__swim_self_inc(sw) < last_inc;
        last_inc = mp__swim_self_inc(sw);
    }
    CHECK(encode_failures == 0, "%d answers did not encode", encode_failures);
    CHECK(over_cap == 0, "caps exceeded %d times", over_cap);
    CHECK(inc_down == 0, "own incarnation went down %d times", inc_down);
    mp_swim_stats_t st;
    mp__swim_get_stats(sw, &st);
    CHECK(st.rejected > 0 && st.refused_cap > 0 && st.refutes > 0,
          "random input reached too little: rejected %llu, refused %llu, "
          "refutes %llu",
          (unsigned long long)st.rejected, (unsigned long long)st.refused_cap,
          (unsigned long long)st.refutes);
    mp__swim_free(sw);
}

/* Behind NAT (docs/DESIGN.md, "Membership news behind NAT"): peers 0 and 1
 * reach everyone, peers 2..7 only reach 0 and 1 (outbound-only peers behind
 * two NATs), with the engine's timings. Peer 1 dies, then peer 3 leaves and
 * restarts with its identity through peer 0. Every `pull_ms` (0 = never)
 * each NAT'd peer pulls peer 0's member list, as the engine does. Returns
 * how many (viewer, member) pairs among the 7 live peers are not ALIVE 60 s
 * after the restart. */
static int star_restart(uint64_t seed, uint64_t pull_ms) {
    static net_t t;
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    c.period_ms = 500;
    c.ping_timeout_ms = 400;
    c.ping_req_timeout_ms = 800;
    c.suspicion_min_ms = 3000;
    const int n = 8;
    net_init(&t, n, &c, seed);
    t.latency = 25;
    for (int i = 2; i < n; i++)
        for (int j = 2; j < n; j++)
            t.blocked[i][j] = true;
    net_start(&t, 0, seed);
    for (int i = 1; i < n; i++) {
        net_start(&t, i, seed);
        net_join(&t, i, 0);
    }
    uint64_t next_pull = pull_ms;
    /* runs to `until`, pulling on the way */
#define STAR_RUN(until)                                                        \
    do {                                                                       \
        uint64_t end_ = (until);                                               \
        while (pull_ms > 0 && next_pull <= end_) {                             \
            net_run(&t, next_pull);                                            \
            for (int i = 2; i < n; i++)                                        \
                if (t.up[i] &&                                                 \
                    mp__swim_pull(t.sw[i], t.now, t.id[0]) == MOSHPIT_OK)      \
                    pump(&t, i);                                               \
            next_pull += pull_ms;                                              \
        }                                                                      \
        net_run(&t, end_);                                                     \
    } while (0)
    STAR_RUN(t.now + 20000);
    t.up[1] = false;
    STAR_RUN(t.now + 20000);
    mp__swim_leave(t.sw[3], t.now);
    pump(&t, 3);
    net_run(&t, t.now + 100);
    t.up[3] = false;
    STAR_RUN(t.now + 5000);
    net_start(&t, 3, seed + 100);
    net_join(&t, 3, 0);
    STAR_RUN(t.now + 60000);
#undef STAR_RUN
    /* the engine counts a suspect member (a suspicion is refuted all the
     * time here: probes between NAT'd peers fail) */
    int wrong = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && i != 1; j++) {
            int st = state_of(&t, i, j, NULL);
            wrong += j != 1 && st != MP_SWIM_ALIVE && st != MP_SWIM_SUSPECT;
        }
    net_free(&t);
    return wrong;
}

static void test_star_pull(void) {
    int failed_without = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        int wrong = star_restart(seed, 5000);
        CHECK(wrong == 0, "seed %llu: %d stale views with the pull",
              (unsigned long long)seed, wrong);
        failed_without += star_restart(seed, 0) > 0;
    }
    printf("behind NAT: %d of 10 seeds leave a member dead or left in some "
           "view 60 s after the restart without the periodic pull\n",
           failed_without);
    /* the pull needs a live member, and one pull at a time */
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    mp_swim_t *sw = hand_new(&c, 0);
    uint8_t self[MP_SWIM_ID_BYTES], boot[MP_SWIM_ID_BYTES],
        stranger[MP_SWIM_ID_BYTES];
    make_id(0, self);
    make_id(1, boot);
    make_id(9, stranger);
    CHECK(mp__swim_pull(sw, 0, boot) == MOSHPIT_EINVAL, "pull from unknown");
    CHECK(mp__swim_pull(sw, 0, self) == MOSHPIT_EINVAL, "pull from self");
    CHECK(mp__swim_join(sw, 0, boot, "a1") == MOSHPIT_OK, "join");
    CHECK(mp__swim_pull(sw, 0, boot) == MOSHPIT_EBUSY, "pull during join");
    CHECK(mp__swim_pull(NULL, 0, boot) == MOSHPIT_EINVAL, "pull NULL");
    CHECK(mp__swim_pull(sw, 0, stranger) == MOSHPIT_EINVAL, "pull stranger");
    mp__swim_free(sw);
}

/* A new own address takes a new incarnation, and the record others get
 * carries it. */
static void test_self_addr(void) {
    static net_t t;
    net_swarm(&t, 3, NULL, 21);
    uint32_t inc = mp__swim_self_inc(t.sw[2]);
    CHECK(mp__swim_set_self_addr(t.sw[2], t.addr[2]) == MOSHPIT_OK &&
              mp__swim_self_inc(t.sw[2]) == inc,
          "same address: no new incarnation");
    snprintf(t.addr[2], sizeof t.addr[2], "tcp://192.0.2.9:7400");
    CHECK(mp__swim_set_self_addr(t.sw[2], t.addr[2]) == MOSHPIT_OK, "set");
    CHECK(mp__swim_self_inc(t.sw[2]) == inc + 1, "new incarnation %u",
          mp__swim_self_inc(t.sw[2]));
    CHECK(mp__swim_set_self_addr(t.sw[2], "") == MOSHPIT_EINVAL &&
              mp__swim_set_self_addr(NULL, "tcp://192.0.2.9:7400") ==
                  MOSHPIT_EINVAL,
          "bad arguments");
    /* (a confirmed address changes only on the member's own word: its
     * PINGs carry it) */
    net_run(&t, t.now + 5000);
    for (int i = 0; i < 2; i++) {
        mp_swim_member_t m;
        CHECK(state_of(&t, i, 2, &m) != -1 && m.inc == inc + 1 &&
                  strcmp(m.addr, "tcp://192.0.2.9:7400") == 0,
              "peer %d holds 2 at %u, %s", i, m.inc, m.addr);
    }
    net_free(&t);
}

/* A member whose reachability changed takes a new incarnation at the same
 * address (mp__swim_renew_self): the others hold it alive at the new one
 * and report RENEWED, so that a peer that gave up dialling it dials
 * again (docs/DESIGN.md, "Reachability asked again"). */
static void test_renew_self(void) {
    static net_t t;
    net_swarm(&t, 3, NULL, 22);
    uint64_t t0 = t.now;
    uint32_t inc = mp__swim_self_inc(t.sw[2]);
    CHECK(mp__swim_renew_self(t.sw[2]) == MOSHPIT_OK &&
              mp__swim_self_inc(t.sw[2]) == inc + 1,
          "renew: incarnation %u", mp__swim_self_inc(t.sw[2]));
    CHECK(mp__swim_renew_self(NULL) == MOSHPIT_EINVAL, "NULL");
    net_run(&t, t.now + 5000);
    for (int i = 0; i < 2; i++) {
        mp_swim_member_t m;
        CHECK(state_of(&t, i, 2, &m) == MP_SWIM_ALIVE && m.inc == inc + 1 &&
                  strcmp(m.addr, t.addr[2]) == 0,
              "peer %d holds 2 at %u, %s", i, m.inc, m.addr);
        CHECK(find_ev(&t, i, MP_SWIM_EV_RENEWED, 2, t0) != NULL,
              "RENEWED at %d", i);
    }
    net_free(&t);
}

int main(void) {
    test_random_input();
    test_arena();
    test_config();
    test_priorities();
    test_urgent_probe();
    test_urgent_partners();
    test_resync();
    test_admission();
    test_probe_protocol();
    test_correction();
    test_join_and_probe();
    test_indirect();
    test_suspect_dead();
    test_refute();
    test_leave();
    test_restart();
    test_contact();
    test_forged();
    test_caps();
    test_piggyback();
    test_sync_misuse();
    test_invalid_updates();
    test_star_pull();
    test_self_addr();
    test_renew_self();
    return test_summary("test_swim");
}
