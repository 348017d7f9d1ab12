/* SPDX-License-Identifier: MIT */
/*
 * test_sim_sessions.c - sessions only where needed (docs/DESIGN.md,
 * "Sessions") at 1,000 simulated peers (and 10,000 when asked:
 * test_sim_sessions 1000 10000). The library's SWIM machines run on the
 * simulated network (swim_world.h) as the engine drives them once a swarm
 * has more members than sessions_max: each probes only its partners, the
 * peers it has a session with (mp__swim_set_partners). Sessions are
 * modelled as the engine keeps them: a table per peer with the last use of
 * each session; a message to a peer without one opens it and waits
 * DIAL_MS (a CURVE handshake and HELLO) before it goes out; every ROUND_MS
 * the swarm averages in random groups of GROUP, and each member uses a
 * session with every mate and with the group's matchmaker; once a second a
 * peer over CAP closes its least recently used sessions that carried
 * nothing for UNUSED_MS (both ends drop them). A peer starts with sessions
 * to CAP/2 random members (the ones it dialled while the cap allowed).
 *
 * Pass rules, at each size: sessions per peer stay bounded (largest at
 * most 2 * CAP + GROUP, sampled every second after a warm-up, before that
 * second's closes), every view
 * stays exact (no member lost or held dead), at most 1% of membership
 * messages wait for a dial, and after 10 kills every
 * survivor declares each victim dead within the bound of test_sim_swim.c
 * (probing partners only, with gossip carrying the rest). Printed: sessions
 * per peer (mean, largest), dials per peer per minute, membership messages
 * that waited for a dial. With SIM_NO_PARTNERS set in the environment
 * SWIM probes every member in turn (as it did before partners) and the
 * 1% rule fails: the comparison in docs/RESULTS.md.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/swim_world.h"

#define TEST_MAX_PRINTED 40
#include "test_util.h"

enum {
    CAP = 64,          /* sessions_max: the library's default */
    GROUP = 16,        /* members of one group all-reduce */
    DIAL_MS = 20,      /* first message on a new session waits this long */
    UNUSED_MS = 2000,  /* SESSION_UNUSED_MS */
    ROUND_MS = 10000,  /* one averaging round per peer this often */
    WARMUP_MS = 30000, /* before sessions are sampled */
    RUN_MS = 120000,   /* sampled run */
    KILLS = 10
};

typedef struct sess {
    uint32_t q;
    uint64_t last, open_at;
} sess_t;

typedef struct speer {
    sess_t *s;
    uint32_t n, cap;
} speer_t;

typedef struct sim {
    swim_world_t *w;
    uint32_t n;
    speer_t *p;
    uint64_t dials, held, sent;
    uint32_t *victims, nvictims;
    uint64_t *dead_at;
    uint64_t false_dead;
} sim_t;

typedef struct pctx {
    sim_t *S;
    uint32_t p;
} pctx_t;

static uint64_t rng_state;

static uint32_t rnd(uint32_t bound) {
    return (uint32_t)(test_splitmix64(&rng_state) % bound);
}

static sess_t *find(speer_t *sp, uint32_t q) {
    for (uint32_t i = 0; i < sp->n; i++)
        if (sp->s[i].q == q)
            return &sp->s[i];
    return NULL;
}

static sess_t *add(speer_t *sp, uint32_t q, uint64_t now, uint64_t open_at) {
    if (sp->n == sp->cap) {
        sp->cap = sp->cap ? 2 * sp->cap : 16;
        sp->s = realloc(sp->s, sp->cap * sizeof *sp->s);
        if (sp->s == NULL)
            abort();
    }
    sess_t *e = &sp->s[sp->n++];
    e->q = q;
    e->last = now;
    e->open_at = open_at;
    return e;
}

static void drop(speer_t *sp, uint32_t q) {
    for (uint32_t i = 0; i < sp->n; i++)
        if (sp->s[i].q == q) {
            sp->s[i] = sp->s[--sp->n];
            return;
        }
}

/* p uses its session with q at now, opening it (both ends) if there is
 * none; returns how long the use waits for the dial. */
static uint32_t use(sim_t *S, uint32_t p, uint32_t q, uint64_t now) {
    sess_t *e = find(&S->p[p], q);
    if (e == NULL) {
        S->dials++;
        add(&S->p[p], q, now, now + DIAL_MS);
        add(&S->p[q], p, now, now + DIAL_MS);
        return DIAL_MS;
    }
    e->last = now;
    sess_t *f = find(&S->p[q], p);
    if (f != NULL)
        f->last = now;
    return e->open_at > now ? (uint32_t)(e->open_at - now) : 0;
}

static uint32_t on_send(swim_world_t *w, uint32_t from, uint32_t to,
                        void *user) {
    sim_t *S = user;
    S->sent++;
    uint32_t d = use(S, from, to, swim_world_now(w));
    S->held += d > 0;
    return d;
}

/* the engine's partner rule (engine_swim.c swim_partner) */
static bool partner(void *ctx, const uint8_t id[MP_SWIM_ID_BYTES]) {
    pctx_t *c = ctx;
    if (c->S->n - 1 <= CAP)
        return true;
    int64_t q = swim_world_peer_of(c->S->w, id);
    return q < 0 || find(&c->S->p[c->p], (uint32_t)q) != NULL;
}

/* mp__engine_sessions_trim: least recently used first, unused ones only */
static void trim(sim_t *S, uint32_t p, uint64_t now) {
    speer_t *sp = &S->p[p];
    while (sp->n > CAP) {
        sess_t *lru = NULL;
        for (uint32_t i = 0; i < sp->n; i++)
            if (now - sp->s[i].last >= UNUSED_MS &&
                (lru == NULL || sp->s[i].last < lru->last))
                lru = &sp->s[i];
        if (lru == NULL)
            return;
        uint32_t q = lru->q;
        drop(sp, q);
        drop(&S->p[q], p);
    }
}

/* One round: random groups of GROUP, each with a matchmaker. */
static void round_all(sim_t *S, uint32_t *perm, uint64_t now) {
    uint32_t n = S->n;
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = rnd(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint32_t g = 0; g < n; g += GROUP) {
        uint32_t end = g + GROUP < n ? g + GROUP : n;
        uint32_t mm = rnd(n);
        for (uint32_t a = g; a < end; a++) {
            if (!swim_world_alive(S->w, perm[a]))
                continue;
            if (perm[a] != mm)
                (void)use(S, perm[a], mm, now);
            for (uint32_t b = a + 1; b < end; b++)
                (void)use(S, perm[a], perm[b], now);
        }
    }
}

static void hook(swim_world_t *w, uint32_t peer, const mp_swim_event_t *ev,
                 void *user) {
    sim_t *S = user;
    swim_world_note_dead(w, peer, ev, S->victims, S->nvictims, S->dead_at,
                         &S->false_dead);
}

static void run_size(uint32_t n, uint64_t seed) {
    mp_swim_config_t cfg;
    mp__swim_config_default(&cfg);
    /* the engine's timing (engine_swim.c) */
    cfg.period_ms = 500;
    cfg.ping_timeout_ms = 400;
    cfg.ping_req_timeout_ms = 800;
    cfg.suspicion_min_ms = 3000;
    cfg.resync_ms = 0; /* a converged swarm: joins long done */
    sim_t S;
    memset(&S, 0, sizeof S);
    S.n = n;
    S.p = calloc(n, sizeof *S.p);
    pctx_t *ctx = calloc(n, sizeof *ctx);
    uint32_t *all = malloc(n * sizeof *all);
    uint32_t *perm = malloc(n * sizeof *perm);
    if (S.p == NULL || ctx == NULL || all == NULL || perm == NULL)
        abort();
    rng_state = seed;
    S.w = swim_world_new(n, &cfg, seed, 5, 0);
    swim_world_set_hook(S.w, hook, &S);
    swim_world_set_send_hook(S.w, on_send, &S);
    for (uint32_t p = 0; p < n; p++)
        all[p] = p;
    for (uint32_t p = 0; p < n; p++) {
        swim_world_start(S.w, p);
        ctx[p].S = &S;
        ctx[p].p = p;
        if (getenv("SIM_NO_PARTNERS") == NULL)
            mp__swim_set_partners(swim_world_sw(S.w, p), partner, &ctx[p]);
    }
    for (uint32_t p = 0; p < n; p++)
        swim_world_seed_view(S.w, p, p == 0 ? 1 : 0, all, n);
    /* the sessions a peer dialled while the cap allowed */
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t k = 0; k < CAP / 2 && n - 1 > CAP; k++) {
            uint32_t q = rnd(n);
            if (q != p && find(&S.p[p], q) == NULL) {
                add(&S.p[p], q, 0, 0);
                add(&S.p[q], p, 0, 0);
            }
        }
    uint64_t t0 = swim_world_now(S.w);
    double sum = 0;
    uint64_t samples = 0, worst = 0, dials0 = 0, held0 = 0, sent0 = 0;
    for (uint64_t t = t0 + 1000; t <= t0 + WARMUP_MS + RUN_MS; t += 1000) {
        if ((t - t0) % ROUND_MS == 0)
            round_all(&S, perm, t - 1000);
        swim_world_run(S.w, t);
        if (t - t0 == WARMUP_MS) {
            dials0 = S.dials;
            held0 = S.held;
            sent0 = S.sent;
        }
        if (t - t0 > WARMUP_MS) {
            /* sampled before the trim: the most a second leaves open */
            for (uint32_t p = 0; p < n; p++) {
                sum += S.p[p].n;
                worst = S.p[p].n > worst ? S.p[p].n : worst;
            }
            samples += n;
        }
        for (uint32_t p = 0; p < n; p++)
            trim(&S, p, t);
    }
    double mean = sum / (double)samples;
    double dials_min =
        (double)(S.dials - dials0) / n / ((double)RUN_MS / 60000.0);
    double held_frac = (double)(S.held - held0) /
                       (double)(S.sent - sent0 ? S.sent - sent0 : 1);
    CHECK(worst <= 2 * CAP + GROUP, "n=%u: a peer held %" PRIu64 " sessions", n,
          worst);
    /* probes go to partners: almost none waits for a handshake (probing
     * every member in turn makes most of them wait) */
    CHECK(held_frac <= 0.01, "n=%u: %.1f%% of membership messages waited", n,
          100.0 * held_frac);
    char why[160] = "";
    uint32_t obs[200], nobs = 0;
    for (uint32_t k = 0; k < 200; k++)
        obs[nobs++] = rnd(n);
    CHECK(swim_world_check_views_of(S.w, obs, nobs, all, n, why, sizeof why) ==
              0,
          "n=%u: %s", n, why);
    CHECK(S.false_dead == 0, "n=%u: %" PRIu64 " live peers declared dead", n,
          S.false_dead);

    /* kills: found by partners, spread by gossip */
    S.nvictims = KILLS;
    S.victims = malloc(KILLS * sizeof *S.victims);
    S.dead_at = malloc((size_t)n * KILLS * sizeof *S.dead_at);
    if (S.victims == NULL || S.dead_at == NULL)
        abort();
    for (size_t i = 0; i < (size_t)n * KILLS; i++)
        S.dead_at[i] = UINT64_MAX;
    for (uint32_t v = 0; v < KILLS; v++) {
        bool dup;
        do {
            S.victims[v] = rnd(n);
            dup = false;
            for (uint32_t u = 0; u < v; u++)
                dup |= S.victims[u] == S.victims[v];
        } while (dup);
    }
    uint64_t tk = swim_world_now(S.w);
    for (uint32_t v = 0; v < KILLS; v++)
        swim_world_kill(S.w, S.victims[v]);
    uint64_t bound = swim_world_detection_bound(&cfg, n);
    for (uint64_t t = tk + 1000; t <= tk + bound + 3000; t += 1000) {
        swim_world_run(S.w, t);
        for (uint32_t p = 0; p < n; p++)
            trim(&S, p, t);
    }
    uint64_t slow = 0, missing = 0;
    for (uint32_t p = 0; p < n; p++) {
        if (!swim_world_alive(S.w, p))
            continue;
        for (uint32_t v = 0; v < KILLS; v++) {
            uint64_t d = S.dead_at[(uint64_t)p * KILLS + v];
            if (d == UINT64_MAX)
                missing++;
            else if (d - tk > slow)
                slow = d - tk;
        }
    }
    CHECK(missing == 0, "n=%u: %" PRIu64 " survivor/victim pairs undetected", n,
          missing);
    CHECK(slow <= bound, "n=%u: detection %" PRIu64 " ms > bound %" PRIu64, n,
          slow, bound);
    printf("n=%u sessions_max=%d groups of %d every %d s: sessions per peer "
           "%.1f on average, largest %" PRIu64 " (a full mesh: %u); %.1f "
           "dials per peer a minute; %.2f%% of membership messages waited "
           "for a dial; views exact; %d killed, declared dead by every "
           "survivor within %.1f s (bound %.1f s)\n",
           n, CAP, GROUP, ROUND_MS / 1000, mean, worst, n - 1, dials_min,
           100.0 * held_frac, KILLS, (double)slow / 1000.0,
           (double)bound / 1000.0);
    fflush(stdout);
    swim_world_free(S.w);
    for (uint32_t p = 0; p < n; p++)
        free(S.p[p].s);
    free(S.p);
    free(ctx);
    free(all);
    free(perm);
    free(S.victims);
    free(S.dead_at);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        run_size(1000, 21);
    } else {
        for (int a = 1; a < argc; a++) {
            long n = strtol(argv[a], NULL, 10);
            if (n < 2 || n > 100000) {
                fprintf(stderr, "usage: test_sim_sessions [peers ...]\n");
                return 2;
            }
            run_size((uint32_t)n, 20 + (uint64_t)a);
        }
    }
    return test_summary("test_sim_sessions");
}
