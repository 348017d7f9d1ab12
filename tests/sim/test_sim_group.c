/* SPDX-License-Identifier: MIT */
/*
 * test_sim_group.c - drives n group all-reduce machines (core/group.c) over
 * the simulated network (simnet) the way the real driver does: parts are
 * pulled per destination while the link can take more, arriving parts are
 * fed to mp__group_on_part, timers call mp__group_on_tick at
 * mp__group_next_wakeup, and a disconnect is reported with
 * mp__group_on_member_failed. Cases: (0) simnet itself; (1) no faults, exact
 * weighted mean for n = 2..16 (and 17..64), short, prime and long vectors,
 * unequal bandwidths, small parts, empty shares, members that reduce no
 * share (outbound-only peers: two of them never exchange a part); (2) zero
 * weights; (3) every member of groups of 4 and 5 killed after each of its
 * events in turn, with and without a disconnect notice, and (3b) random
 * multiple kills; (4) members that never send or send non-finite data; (5)
 * garbage and duplicate parts, plus direct misuse of the API; (6) same seed,
 * same bytes. Prints one summary line per case; exit status nonzero on failure.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/group.h"
#include "core/vec.h"
#include "core/share.h"
#include "sim/simnet.h"

#include "group_drive.h"

#define TEST_MAX_PRINTED 40
#include "test_util.h"

#define NONE UINT64_MAX
#define MSG_PART 1u

typedef enum { B_NORMAL, B_SILENT, B_NAN } behave_t;
typedef enum { W_RANDOM, W_SOME_ZERO, W_ALL_ZERO } wmode_t;
typedef enum { D_UNIFORM, D_SEPARATED } dmode_t;

/* One scenario. */
typedef struct scen {
    uint32_t n;
    size_t count;
    uint32_t part_elems;
    uint64_t seed;
    wmode_t wmode;
    dmode_t dmode;
    bool unequal_bw;
    uint64_t bw_unit;   /* sim bytes/s per announced bandwidth unit */
    uint32_t latency;   /* ms */
    uint32_t jitter;    /* ms */
    uint32_t timeout;   /* peer_timeout_ms */
    uint64_t deadline;  /* ms */
    uint32_t notify_ms; /* disconnect notice delay, UINT32_MAX = none */
    bool garbage;       /* feed garbage and duplicates with every part */
    uint64_t victims;   /* bit mask of the members at fault */
    uint64_t kill_after[MP_GROUP_MAX]; /* killed after k events, or NONE */
    behave_t victim_behave;            /* how victims behave until then */
    uint64_t noshare; /* members that reduce no share (outbound-only) */
} scen_t;

typedef struct world world_t;

typedef struct gnode {
    gdrive_t d; /* first: the driver hands it to send_part */
    world_t *w;
    float *values;
    float *local;
    behave_t behave;
} gnode_t;

struct world {
    scen_t sc;
    simnet_t *net;
    double weights[MP_GROUP_MAX];
    uint32_t bws[MP_GROUP_MAX];
    size_t off[MP_GROUP_MAX], len[MP_GROUP_MAX];
    gnode_t node[MP_GROUP_MAX];
    float *scratch; /* count + 1 floats */
    uint64_t garbage_calls, garbage_bad;
};

/* ------------------------------------------------------------------ */
/* driver                                                              */

static void send_part(gdrive_t *d, uint32_t dest, const mp_send_t *snd) {
    gnode_t *nd = (gnode_t *)d; /* d is its first member */
    world_t *w = nd->w;
    simnet_msg_t m = {.src = nd->d.id, .dst = dest, .type = MSG_PART};
    m.arg[0] = snd->kind;
    m.arg[1] = snd->share;
    m.arg[2] = snd->part;
    memcpy(&m.arg[3], &snd->wsum, sizeof(double));
    m.data = snd->data;
    m.len = (size_t)snd->count * sizeof(float);
    /* two members that reduce no share have nothing for each other
     * (unless every member is one) */
    uint64_t all = w->sc.n == 64 ? UINT64_MAX : ((uint64_t)1 << w->sc.n) - 1;
    uint64_t ns = w->sc.noshare & all;
    CHECK(ns == all || !((ns >> nd->d.id & 1) && (ns >> dest & 1)),
          "a part from %u to %u, both without a share", nd->d.id, dest);
    if (nd->behave == B_NAN && snd->count > 0) {
        memcpy(w->scratch, snd->data, m.len);
        w->scratch[snd->count / 2] = NAN;
        m.data = w->scratch;
    }
    simnet_send(w->net, &m);
}

static void on_timer(simnet_t *s, uint32_t id, uint64_t tag, void *user) {
    gnode_t *nd = user;
    (void)s, (void)id;
    gdrive_on_timer(&nd->d, tag);
}

/* Status the machine must give a malformed part, given its state. */
static mp_part_status_t expect_bad(const gnode_t *nd, uint32_t from,
                                   mp_part_status_t bad) {
    if (mp__group_done(nd->d.g))
        return MP_PART_LATE;
    if (bad == MP_PART_BAD_SENDER)
        return bad;
    return mp__group_member_alive(nd->d.g, from) ? bad : MP_PART_FROM_FAILED;
}

static void garbage_one(gnode_t *nd, uint32_t from, mp_part_kind_t kind,
                        uint32_t share, uint32_t part, const float *data,
                        uint32_t count, double wsum, mp_part_status_t bad) {
    world_t *w = nd->w;
    mp_part_status_t want = expect_bad(nd, from, bad);
    mp_part_status_t got =
        mp__group_on_part(nd->d.g, simnet_now(w->net), from, kind, share, part,
                          data, count, wsum);
    w->garbage_calls++;
    if (got != want) {
        w->garbage_bad++;
        CHECK(got == want, "garbage: got %d want %d", (int)got, (int)want);
    }
}

/* Malformed variants of a real part; none may change anything. */
static void feed_garbage(gnode_t *nd, uint32_t from, mp_part_kind_t kind,
                         uint32_t share, uint32_t part, const float *data,
                         uint32_t count, double wsum) {
    world_t *w = nd->w;
    uint32_t n = w->sc.n;
    const uint32_t bs = MP_PART_BAD_SENDER, bi = MP_PART_BAD_INDEX;
    garbage_one(nd, nd->d.id, kind, share, part, data, count, wsum, bs);
    garbage_one(nd, n + 3, kind, share, part, data, count, wsum, bs);
    garbage_one(nd, UINT32_MAX, kind, share, part, data, count, wsum, bs);
    garbage_one(nd, from, (mp_part_kind_t)0, share, part, data, count, wsum,
                bi);
    garbage_one(nd, from, (mp_part_kind_t)7, share, part, data, count, wsum,
                bi);
    garbage_one(nd, from,
                kind == MP_PART_SCATTER ? MP_PART_GATHER : MP_PART_SCATTER,
                share, part, data, count, wsum, bi);
    garbage_one(nd, from, kind, (share + 1) % n, part, data, count, wsum, bi);
    garbage_one(nd, from, kind, share + n, part, data, count, wsum, bi);
    garbage_one(nd, from, kind, share, part + 1000000, data, count, wsum, bi);
    garbage_one(nd, from, kind, share, UINT32_MAX, data, count, wsum, bi);
    garbage_one(nd, from, kind, share, part, NULL, count, wsum, bi);
    garbage_one(nd, from, kind, share, part, data, count - 1, wsum, bi);
    memcpy(w->scratch, data, (size_t)count * sizeof(float));
    w->scratch[count] = NAN; /* would be read if count + 1 were accepted */
    garbage_one(nd, from, kind, share, part, w->scratch, count + 1, wsum, bi);
    garbage_one(nd, from, kind, share, part, data, 0, wsum, bi);
}

static void on_msg(simnet_t *s, uint32_t id, const simnet_msg_t *m,
                   void *user) {
    gnode_t *nd = user;
    world_t *w = nd->w;
    (void)id;
    if (m->type != MSG_PART)
        return;
    mp_part_kind_t kind = (mp_part_kind_t)m->arg[0];
    uint32_t share = (uint32_t)m->arg[1], part = (uint32_t)m->arg[2];
    double wsum;
    memcpy(&wsum, &m->arg[3], sizeof wsum);
    uint32_t count = (uint32_t)(m->len / sizeof(float));
    const float *data = m->data;

    if (w->sc.garbage)
        feed_garbage(nd, m->src, kind, share, part, data, count, wsum);
    /* every other part the way the net driver hands it over: with the
     * finiteness verdict it computed while decrypting */
    int finite =
        (part & 1) ? (int)mp__vec_all_finite(data, count) : MP_FINITE_UNKNOWN;
    mp_part_status_t st =
        mp__group_on_part_checked(nd->d.g, simnet_now(s), m->src, kind, share,
                                  part, data, count, wsum, finite);
    if (w->sc.garbage) {
        /* A second copy: duplicate, or whatever state we are now in. */
        mp_part_status_t want =
            mp__group_done(nd->d.g)                    ? MP_PART_LATE
            : !mp__group_member_alive(nd->d.g, m->src) ? MP_PART_FROM_FAILED
            : st == MP_PART_OK || st == MP_PART_DUP    ? MP_PART_DUP
                                                       : st;
        mp_part_status_t again =
            mp__group_on_part(nd->d.g, simnet_now(s), m->src, kind, share, part,
                              data, count, wsum);
        w->garbage_calls++;
        if (again != want) {
            w->garbage_bad++;
            CHECK(again == want, "duplicate: got %d want %d", (int)again,
                  (int)want);
        }
    }
    gdrive_after_event(&nd->d);
}

static const simnet_ops_t node_ops = {on_msg, on_timer};

static void kill_hook(simnet_t *s, uint32_t victim, void *user) {
    world_t *w = user;
    if (w->sc.notify_ms == UINT32_MAX)
        return;
    for (uint32_t i = 0; i < w->sc.n; i++)
        if (i != victim && simnet_alive(s, i))
            simnet_timer(s, i, simnet_now(s) + w->sc.notify_ms,
                         GDRIVE_TAG_FAIL | (uint64_t)victim << 8);
}

/* ------------------------------------------------------------------ */
/* scenarios                                                           */

static uint64_t bit(uint32_t i) {
    return (uint64_t)1 << i;
}

static bool is_victim(const scen_t *sc, uint32_t i) {
    return (sc->victims & bit(i)) != 0;
}

/* Weighted mean of element e over the members not in the mask `exclude`. */
static double weighted_mean(const world_t *w, size_t e, uint64_t exclude,
                            bool *any) {
    double num = 0, den = 0;
    for (uint32_t i = 0; i < w->sc.n; i++) {
        if (exclude & bit(i))
            continue;
        num += w->weights[i] * (double)w->node[i].local[e];
        den += w->weights[i];
    }
    *any = den > 0;
    return den > 0 ? num / den : 0;
}

/* The subsets T of the victims, as masks to exclude (victims \ T). */
static uint32_t victim_subsets(uint64_t victims, uint64_t *out) {
    uint32_t k = 0;
    for (uint64_t t = victims;; t = (t - 1) & victims) {
        out[k++] = victims & ~t;
        if (t == 0)
            break;
    }
    return k;
}

/* Separated data: member i around 10 i, victims around 1000, 3000, 9000,
 * so that means over different sets of members are far apart. */
static double base_of(const scen_t *sc, uint32_t i) {
    if (!is_victim(sc, i))
        return 10.0 * i;
    double b = 1000;
    for (uint32_t j = 0; j < i; j++)
        b *= is_victim(sc, j) ? 3 : 1;
    return b;
}

static void make_data(world_t *w, simnet_rng_t *rng) {
    const scen_t *sc = &w->sc;
    for (uint32_t i = 0; i < sc->n; i++) {
        float *x = w->node[i].local;
        for (size_t e = 0; e < sc->count; e++) {
            double u = simnet_rng01(rng);
            if (sc->dmode == D_UNIFORM)
                x[e] = (float)(2 * u - 1);
            else
                x[e] = (float)(base_of(sc, i) + u);
        }
    }
    if (sc->dmode != D_SEPARATED)
        return;
    /* Redraw elements where local values and the means over survivors plus
     * any subset of the victims are not clearly distinct, so that every
     * result element says unambiguously which of them it is. */
    uint64_t excl[16];
    uint32_t nsub = victim_subsets(sc->victims, excl);
    for (size_t e = 0; e < sc->count; e++) {
        for (int tries = 0; tries < 1000; tries++) {
            double m[16];
            bool ok = true, any;
            for (uint32_t a = 0; a < nsub; a++) {
                m[a] = weighted_mean(w, e, excl[a], &any);
                for (uint32_t b = 0; b < a; b++)
                    ok &= fabs(m[a] - m[b]) > 0.01;
                for (uint32_t i = 0; i < sc->n; i++)
                    ok &= fabs(w->node[i].local[e] - m[a]) > 0.01;
            }
            if (ok)
                break;
            for (uint32_t i = 0; i < sc->n; i++)
                w->node[i].local[e] =
                    (float)(base_of(sc, i) + simnet_rng01(rng));
        }
    }
}

static void world_free(world_t *w) {
    if (w == NULL)
        return;
    for (uint32_t i = 0; i < w->sc.n; i++) {
        mp__group_free(w->node[i].d.g);
        free(w->node[i].values);
        free(w->node[i].local);
    }
    free(w->scratch);
    simnet_free(w->net);
    free(w);
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static world_t *run(const scen_t *sc) {
    world_t *w = xcalloc(1, sizeof *w);
    w->sc = *sc;
    simnet_rng_t rng;
    simnet_rng_seed(&rng, sc->seed ^ 0x5eed);
    w->net = simnet_new(sc->seed);
    simnet_set_default_link(w->net, sc->latency, 0);
    simnet_set_jitter(w->net, sc->jitter);
    simnet_set_kill_hook(w->net, kill_hook, w);
    w->scratch = xcalloc(sc->count + 1, sizeof(float));

    for (uint32_t i = 0; i < sc->n; i++) {
        switch (sc->wmode) {
        case W_RANDOM:
            w->weights[i] = 0.5 + 1.5 * simnet_rng01(&rng);
            break;
        case W_SOME_ZERO:
            w->weights[i] = i % 3 == 1 ? 0.0 : 0.5 + 1.5 * simnet_rng01(&rng);
            break;
        case W_ALL_ZERO:
            w->weights[i] = 0.0;
            break;
        }
        w->bws[i] =
            sc->unequal_bw ? 1 + (uint32_t)simnet_rng_below(&rng, 100) : 50;
    }
    /* the layout group.c makes: shares among the members that reduce */
    uint64_t all = sc->n == 64 ? UINT64_MAX : ((uint64_t)1 << sc->n) - 1;
    uint64_t ns = sc->noshare & all;
    if (ns == 0 || ns == all) {
        mp__share_split(sc->n, w->bws, sc->count, w->off, w->len);
    } else {
        uint32_t rbw[MP_GROUP_MAX], k = 0;
        size_t roff[MP_GROUP_MAX], rlen[MP_GROUP_MAX], o = 0;
        for (uint32_t j = 0; j < sc->n; j++)
            if (!(ns >> j & 1))
                rbw[k++] = w->bws[j];
        mp__share_split(k, rbw, sc->count, roff, rlen);
        k = 0;
        for (uint32_t j = 0; j < sc->n; j++) {
            w->off[j] = o;
            w->len[j] = ns >> j & 1 ? 0 : rlen[k++];
            o += w->len[j];
        }
    }

    for (uint32_t i = 0; i < sc->n; i++) {
        gnode_t *nd = &w->node[i];
        nd->w = w;
        gdrive_init(&nd->d, w->net, simnet_add_node(w->net, &node_ops, nd),
                    sc->n);
        nd->d.send = send_part;
        nd->values = xcalloc(sc->count, sizeof(float));
        nd->local = xcalloc(sc->count, sizeof(float));
        nd->behave = is_victim(sc, i) ? sc->victim_behave : B_NORMAL;
        nd->d.silent = nd->behave == B_SILENT;
        simnet_set_node_bw(w->net, nd->d.id, (uint64_t)w->bws[i] * sc->bw_unit);
    }
    make_data(w, &rng);
    for (uint32_t i = 0; i < sc->n; i++) {
        gnode_t *nd = &w->node[i];
        memcpy(nd->values, nd->local, sc->count * sizeof(float));
        mp_group_cfg_t cfg = {
            .round_id = sc->seed,
            .n = sc->n,
            .self = i,
            .weights = w->weights,
            .bandwidths = w->bws,
            .noshare = sc->noshare,
            .values = nd->values,
            .count = sc->count,
            .part_elems = sc->part_elems,
            .now_ms = 0,
            .deadline_ms = sc->deadline,
            .peer_timeout_ms = sc->timeout,
        };
        moshpit_err_t err = gdrive_start(&nd->d, &cfg);
        CHECK(err == MOSHPIT_OK, "mp__group_new: %d", (int)err);
        if (err != MOSHPIT_OK)
            exit(1);
    }
    for (uint32_t i = 0; i < sc->n; i++)
        if (sc->kill_after[i] != NONE)
            simnet_kill_after(w->net, i, sc->kill_after[i]);
    simnet_run(w->net, sc->deadline + 1000);
    return w;
}

static scen_t base_scen(uint32_t n, size_t count, uint64_t seed) {
    scen_t sc = {
        .n = n,
        .count = count,
        .seed = seed,
        .wmode = W_RANDOM,
        .dmode = D_UNIFORM,
        .bw_unit = 1000000,
        .latency = 2,
        .timeout = 2000,
        .deadline = 120000,
        .notify_ms = 5,
    };
    for (uint32_t i = 0; i < MP_GROUP_MAX; i++)
        sc.kill_after[i] = NONE;
    return sc;
}

static bool is_survivor(const world_t *w, uint32_t i) {
    return !is_victim(&w->sc, i);
}

/* Fault-free expectations: everyone done, exact mean, identical bytes. */
static double check_exact(const world_t *w, const char *name) {
    const scen_t *sc = &w->sc;
    double maxabs = 0, maxerr = 0, wsum = 0;
    bool all_zero = true;
    for (uint32_t i = 0; i < sc->n; i++) {
        wsum += w->weights[i];
        all_zero &= w->weights[i] == 0;
    }
    double *mean = xcalloc(sc->count, sizeof(double));
    for (size_t e = 0; e < sc->count; e++) {
        bool any;
        mean[e] = weighted_mean(w, e, 0, &any);
        maxabs = fmax(maxabs, fabs(mean[e]));
    }
    double tol = 1e-6 * (maxabs > 0 ? maxabs : 1);
    for (uint32_t i = 0; i < sc->n; i++) {
        const gnode_t *nd = &w->node[i];
        CHECK(nd->d.done && nd->d.done_ms < sc->deadline,
              "%s n=%u count=%zu: member %u not done before the deadline "
              "(done=%d at %" PRIu64 ")",
              name, sc->n, sc->count, i, nd->d.done, nd->d.done_ms);
        CHECK(nd->d.res.group_size == sc->n && nd->d.res.peers_failed == 0,
              "%s n=%u: member %u size %u failed %u", name, sc->n, i,
              nd->d.res.group_size, nd->d.res.peers_failed);
        CHECK(fabs(nd->d.res.group_weight - wsum) <= 1e-12 * (1 + wsum),
              "%s: group_weight", name);
        double want_frac = all_zero && sc->count > 0 ? 0.0 : 1.0;
        CHECK(nd->d.res.fraction_averaged == want_frac,
              "%s n=%u count=%zu: member %u fraction %.17g want %g", name,
              sc->n, sc->count, i, nd->d.res.fraction_averaged, want_frac);
        uint64_t own = w->len[i];
        uint64_t sent = (sc->count - own + (uint64_t)(sc->n - 1) * own) * 4;
        uint64_t recv = ((uint64_t)(sc->n - 1) * own + sc->count - own) * 4;
        CHECK(nd->d.res.bytes_sent == sent && nd->d.res.bytes_received == recv,
              "%s n=%u: member %u bytes %" PRIu64 "/%" PRIu64 " want %" PRIu64
              "/%" PRIu64,
              name, sc->n, i, nd->d.res.bytes_sent, nd->d.res.bytes_received,
              sent, recv);
        if (all_zero) {
            CHECK(memcmp(nd->values, nd->local, sc->count * sizeof(float)) == 0,
                  "%s: all weights 0 but member %u changed values", name, i);
            continue;
        }
        size_t bad = 0;
        for (size_t e = 0; e < sc->count; e++) {
            double err = fabs((double)nd->values[e] - mean[e]);
            maxerr = fmax(maxerr, err / (maxabs > 0 ? maxabs : 1));
            bad += !(err <= tol);
        }
        CHECK(bad == 0, "%s n=%u count=%zu: member %u has %zu wrong elements",
              name, sc->n, sc->count, i, bad);
        /* Every element comes from one reducer: all copies are identical. */
        CHECK(memcmp(nd->values, w->node[0].values,
                     sc->count * sizeof(float)) == 0,
              "%s n=%u: member %u differs from member 0", name, sc->n, i);
    }
    free(mean);
    return maxerr;
}

/* ------------------------------------------------------------------ */
/* cases                                                               */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void case_no_faults(void) {
    double t0 = now_s(), maxerr = 0;
    int runs = 0;
    long fails0 = test_failures;
    static const size_t lens[] = {1, 7, 100003};
    for (uint32_t n = 2; n <= 16; n++) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            scen_t sc = base_scen(n, lens[li], 1000 * n + li);
            sc.unequal_bw = (n + li) % 2 == 0;
            sc.jitter = n % 3 == 0 ? 3 : 0;
            world_t *w = run(&sc);
            maxerr = fmax(maxerr, check_exact(w, "no-faults"));
            world_free(w);
            runs++;
        }
        /* Small parts: ~100 parts per share for small n. */
        scen_t sc = base_scen(n, 100003, 77 * n);
        sc.part_elems = 1000;
        sc.unequal_bw = true;
        world_t *w = run(&sc);
        maxerr = fmax(maxerr, check_exact(w, "small-parts"));
        world_free(w);
        runs++;
    }
    /* Long vectors, default parts, a few group sizes. */
    static const uint32_t long_n[] = {2, 3, 5, 8, 16};
    for (size_t k = 0; k < 5; k++) {
        scen_t sc = base_scen(long_n[k], 1000003, 99 + k);
        sc.unequal_bw = k != 1;
        sc.bw_unit = 10000000;
        world_t *w = run(&sc);
        maxerr = fmax(maxerr, check_exact(w, "long"));
        world_free(w);
        runs++;
    }
    /* The largest groups, up to MP_GROUP_MAX members. */
    static const uint32_t big_n[] = {17, 32, 63, 64};
    for (size_t k = 0; k < 4; k++) {
        scen_t sc = base_scen(big_n[k], 20011, 5 + k);
        sc.part_elems = 100;
        sc.unequal_bw = true;
        world_t *w = run(&sc);
        maxerr = fmax(maxerr, check_exact(w, "big-group"));
        world_free(w);
        runs++;
    }
    /* Outbound-only members (no share): all but one, every other one,
     * all of them (then every member reduces). */
    for (uint32_t n = 2; n <= 9; n++) {
        uint64_t all = ((uint64_t)1 << n) - 1;
        const uint64_t masks[] = {all & ~(uint64_t)1, all & 0xaaaaaaaaaaaaaaaau,
                                  all};
        for (size_t k = 0; k < 3; k++) {
            scen_t sc = base_scen(n, 100003, 31 * n + k);
            sc.noshare = masks[k];
            sc.unequal_bw = k == 1;
            world_t *w = run(&sc);
            maxerr = fmax(maxerr, check_exact(w, "noshare"));
            world_free(w);
            runs++;
        }
    }
    /* Nothing to average: count == 0 finishes at once. */
    scen_t sc = base_scen(5, 0, 3);
    world_t *w = run(&sc);
    maxerr = fmax(maxerr, check_exact(w, "empty"));
    world_free(w);
    runs++;
    printf("case 1 no faults: %d runs, max error %.2e of max |mean|, "
           "%.2f s: %s\n",
           runs, maxerr, now_s() - t0,
           test_failures == fails0 ? "ok" : "FAILED");
}

static void case_zero_weights(void) {
    double t0 = now_s(), maxerr = 0;
    int runs = 0;
    long fails0 = test_failures;
    for (uint32_t n = 2; n <= 9; n++) {
        scen_t sc = base_scen(n, 5003, 300 + n);
        sc.wmode = W_SOME_ZERO;
        sc.part_elems = 500;
        sc.unequal_bw = true;
        world_t *w = run(&sc);
        maxerr = fmax(maxerr, check_exact(w, "some-zero"));
        world_free(w);
        runs++;

        sc.wmode = W_ALL_ZERO;
        sc.seed += 1000;
        w = run(&sc);
        check_exact(w, "all-zero");
        for (uint32_t i = 0; i < n; i++)
            CHECK(w->node[i].d.res.group_weight == 0, "all-zero: weight");
        world_free(w);
        runs++;
    }
    printf("case 2 zero weights: %d runs, max error %.2e: %s\n", runs, maxerr,
           test_failures == fails0 ? "ok" : "FAILED");
    (void)t0;
}

static bool in_share(const world_t *w, uint32_t j, size_t e) {
    return e >= w->off[j] && e < w->off[j] + w->len[j];
}

/* Checks after members in sc->victims were killed (or misbehaved). Every
 * survivor must be done before the deadline, and each of its elements must
 * be its local value (allowed only in a victim's share) or the weighted mean
 * over all survivors plus some subset of the victims. Survivors holding a
 * result for the same element agree bit for bit, fraction_averaged is the
 * counted fraction of non-local elements (of other shares, only means
 * whose members weigh at least those the survivor did not drop), and only
 * victims are dropped. */
static void check_faults(const world_t *w, const char *name) {
    const scen_t *sc = &w->sc;
    size_t count = sc->count;
    uint32_t nv = (uint32_t)__builtin_popcountll(sc->victims);
    uint64_t excl[16];
    uint32_t nsub = victim_subsets(sc->victims, excl);
    double *mean = xcalloc(count * nsub, sizeof(double));
    double maxabs = 0;
    for (size_t e = 0; e < count; e++) {
        for (uint32_t a = 0; a < nsub; a++) {
            bool any;
            mean[e * nsub + a] = weighted_mean(w, e, excl[a], &any);
            maxabs = fmax(maxabs, fabs(mean[e * nsub + a]));
        }
    }
    double tol = 1e-6 * maxabs;
    double wall = 0;
    for (uint32_t j = 0; j < sc->n; j++)
        wall += w->weights[j];
    for (uint32_t i = 0; i < sc->n; i++) {
        if (!is_survivor(w, i))
            continue;
        const gnode_t *nd = &w->node[i];
        CHECK(nd->d.done && nd->d.done_ms < sc->deadline,
              "%s: survivor %u done=%d at %" PRIu64, name, i, nd->d.done,
              nd->d.done_ms);
        CHECK(nd->d.res.peers_failed <= nv &&
                  nd->d.res.group_size == sc->n - nd->d.res.peers_failed,
              "%s: survivor %u failed=%u size=%u", name, i,
              nd->d.res.peers_failed, nd->d.res.group_size);
        for (uint32_t j = 0; j < sc->n; j++)
            CHECK(!is_survivor(w, j) || mp__group_member_alive(nd->d.g, j),
                  "%s: survivor %u dropped survivor %u", name, i, j);
        /* the weight of the victims this survivor still holds: a gathered
         * part whose members weigh less than those it holds is no mean of
         * its group as it sees it (its reducer dropped someone it kept), so
         * it does not count in fraction_averaged (the library compares the
         * part's weight sum; the survivors' weights are on both sides) */
        double kept = 0;
        for (uint32_t j = 0; j < sc->n; j++)
            if (is_victim(sc, j) && mp__group_member_alive(nd->d.g, j))
                kept += w->weights[j];
        size_t nonlocal = 0, counted = 0, bad = 0, local_outside = 0;
        for (size_t e = 0; e < count; e++) {
            double x = nd->values[e];
            bool match = false, counts = false;
            for (uint32_t a = 0; a < nsub; a++) {
                if (fabs(x - mean[e * nsub + a]) > tol)
                    continue;
                match = true;
                double in = 0;
                for (uint32_t j = 0; j < sc->n; j++)
                    if (is_victim(sc, j) && !(excl[a] & bit(j)))
                        in += w->weights[j];
                counts |= in_share(w, i, e) || in >= kept - 1e-9 * wall;
            }
            if (match) {
                nonlocal++;
                counted += counts;
            } else if (nd->values[e] == nd->local[e]) {
                bool ok = false;
                for (uint32_t j = 0; j < sc->n && !ok; j++)
                    ok = is_victim(sc, j) && in_share(w, j, e);
                local_outside += !ok;
            } else {
                bad++;
            }
        }
        CHECK(bad == 0,
              "%s: survivor %u: %zu elements neither local nor a mean", name, i,
              bad);
        CHECK(local_outside == 0,
              "%s: survivor %u: %zu local elements outside victims' shares",
              name, i, local_outside);
        CHECK(nd->d.res.fraction_averaged ==
                  (count ? (double)counted / (double)count : 1.0),
              "%s: survivor %u fraction %.9f, counted %.9f", name, i,
              nd->d.res.fraction_averaged, (double)counted / (double)count);
        if (nd->d.res.peers_failed == 0)
            CHECK(nonlocal == count,
                  "%s: survivor %u dropped nobody but "
                  "kept %zu local",
                  name, i, count - nonlocal);
        for (uint32_t j = i + 1; j < sc->n; j++) {
            if (!is_survivor(w, j))
                continue;
            size_t disagree = 0;
            for (size_t e = 0; e < count; e++) {
                bool li = nd->values[e] == nd->local[e];
                bool lj = w->node[j].values[e] == w->node[j].local[e];
                disagree += !li && !lj && nd->values[e] != w->node[j].values[e];
            }
            CHECK(disagree == 0,
                  "%s: survivors %u and %u disagree on %zu "
                  "elements",
                  name, i, j, disagree);
        }
    }
    free(mean);
}

static scen_t kill_scen(uint32_t n, uint64_t seed) {
    scen_t sc = base_scen(n, 6007, seed);
    sc.dmode = D_SEPARATED;
    sc.part_elems = 150; /* about 10 parts per share */
    sc.unequal_bw = true;
    sc.bw_unit = 20000; /* 20 KB/s .. 2 MB/s: parts take ms */
    sc.timeout = 100;
    sc.deadline = 5000;
    return sc;
}

/* One victim, killed right after its k-th event for every k from 0 to the
 * number of events it handles in a fault-free run, for every victim of a
 * group of 4 and of 5, with and without a disconnect notice. */
static void case_kill_sweep(void) {
    double t0 = now_s();
    long fails0 = test_failures;
    uint64_t runs = 0, drops = 0, max_done = 0, max_events = 0;
    for (uint32_t n = 4; n <= 5; n++) {
        for (uint32_t v = 0; v < n; v++) {
            for (int notify = 1; notify >= 0; notify--) {
                scen_t sc = kill_scen(n, 4242 + 10 * n + v);
                sc.notify_ms = notify ? 3 : UINT32_MAX;
                sc.victims = bit(v);
                world_t *w = run(&sc);
                check_exact(w, "kill-sweep baseline");
                uint64_t events = simnet_node_events(w->net, v);
                max_events = events > max_events ? events : max_events;
                world_free(w);

                for (uint64_t k = 0; k <= events; k++) {
                    sc.kill_after[v] = k;
                    w = run(&sc);
                    char name[96];
                    snprintf(name, sizeof name,
                             "kill n=%u victim=%u %s k=%" PRIu64, n, v,
                             notify ? "notified" : "silent", k);
                    check_faults(w, name);
                    for (uint32_t i = 0; i < n; i++) {
                        if (i == v)
                            continue;
                        if (w->node[i].d.done_ms > max_done)
                            max_done = w->node[i].d.done_ms;
                        drops += w->node[i].d.res.peers_failed;
                    }
                    world_free(w);
                    runs++;
                }
            }
        }
    }
    printf("case 3 kill sweep (n=4,5, every victim, every event up to %" PRIu64
           ", notice or silence): %" PRIu64 " runs, %" PRIu64
           " survivor drops, latest done %" PRIu64 " ms of 5000, %.2f s: %s\n",
           max_events, runs, drops, max_done, now_s() - t0,
           test_failures == fails0 ? "ok" : "FAILED");
}

/* Random multiple faults: up to three victims of a group of 3..9 killed at
 * random events, with jitter, notices or silence. */
static void case_multi_faults(void) {
    double t0 = now_s();
    long fails0 = test_failures;
    simnet_rng_t rng;
    simnet_rng_seed(&rng, 777);
    uint64_t drops = 0;
    int runs = 300;
    for (int r = 0; r < runs; r++) {
        uint32_t n = 3 + (uint32_t)simnet_rng_below(&rng, 7);
        scen_t sc = kill_scen(n, 9000 + (uint64_t)r);
        sc.count = 1 + (size_t)simnet_rng_below(&rng, 4000);
        sc.part_elems = 50 + (uint32_t)simnet_rng_below(&rng, 300);
        sc.jitter = (uint32_t)simnet_rng_below(&rng, 4);
        sc.notify_ms = simnet_rng_below(&rng, 2) ? 3 : UINT32_MAX;
        uint32_t nv =
            1 + (uint32_t)simnet_rng_below(&rng, n - 2 < 3 ? n - 2 : 3);
        while ((uint32_t)__builtin_popcountll(sc.victims) < nv) {
            uint32_t v = (uint32_t)simnet_rng_below(&rng, n);
            sc.victims |= bit(v);
            sc.kill_after[v] = simnet_rng_below(&rng, 40);
        }
        world_t *w = run(&sc);
        char name[64];
        snprintf(name, sizeof name, "multi-fault run %d n=%u", r, n);
        check_faults(w, name);
        for (uint32_t i = 0; i < n; i++)
            drops += is_survivor(w, i) ? w->node[i].d.res.peers_failed : 0;
        world_free(w);
    }
    printf("case 3b random multiple faults: %d runs, %" PRIu64
           " survivor drops, %.2f s: %s\n",
           runs, drops, now_s() - t0,
           test_failures == fails0 ? "ok" : "FAILED");
}

/* A member that never sends, or sends only non-finite data: everyone else
 * must end with the exact mean of the rest on the shares of live reducers,
 * local values on the bad member's share, and that member dropped. */
static void check_without(const world_t *w, const char *name) {
    const scen_t *sc = &w->sc;
    double maxabs = 0;
    double *without = xcalloc(sc->count, sizeof(double));
    for (size_t e = 0; e < sc->count; e++) {
        bool any;
        without[e] = weighted_mean(w, e, sc->victims, &any);
        maxabs = fmax(maxabs, fabs(without[e]));
    }
    double wsum = 0;
    size_t bad_len = 0;
    for (uint32_t j = 0; j < sc->n; j++) {
        wsum += is_victim(sc, j) ? 0 : w->weights[j];
        bad_len += is_victim(sc, j) ? w->len[j] : 0;
    }
    uint32_t nv = (uint32_t)__builtin_popcountll(sc->victims);
    for (uint32_t i = 0; i < sc->n; i++) {
        if (is_victim(sc, i))
            continue;
        const gnode_t *nd = &w->node[i];
        CHECK(nd->d.done && nd->d.done_ms < sc->deadline, "%s: member %u done",
              name, i);
        CHECK(nd->d.res.peers_failed == nv &&
                  nd->d.res.group_size == sc->n - nv,
              "%s: member %u failed=%u", name, i, nd->d.res.peers_failed);
        CHECK(fabs(nd->d.res.group_weight - wsum) <= 1e-12 * wsum,
              "%s: member %u group_weight %g want %g", name, i,
              nd->d.res.group_weight, wsum);
        size_t bad = 0;
        for (size_t e = 0; e < sc->count; e++) {
            bool in_v = false;
            for (uint32_t j = 0; j < sc->n; j++)
                in_v |= is_victim(sc, j) && in_share(w, j, e);
            if (in_v)
                bad += nd->values[e] != nd->local[e];
            else
                bad += !(fabs(nd->values[e] - without[e]) <= 1e-6 * maxabs);
        }
        CHECK(bad == 0, "%s: member %u has %zu wrong elements", name, i, bad);
        double frac = (double)(sc->count - bad_len) / (double)sc->count;
        CHECK(nd->d.res.fraction_averaged == frac,
              "%s: member %u fraction %g want %g", name, i,
              nd->d.res.fraction_averaged, frac);
    }
    free(without);
}

static void case_bad_members(void) {
    long fails0 = test_failures;
    int runs = 0;
    for (uint32_t n = 3; n <= 8; n++) {
        for (int b = 0; b < 2; b++) {
            scen_t sc = base_scen(n, 20011, 600 + 10 * n + b);
            sc.part_elems = 1000;
            sc.unequal_bw = true;
            sc.timeout = 300;
            sc.deadline = 10000;
            sc.victims = bit(n / 2);
            if (n >= 6)
                sc.victims |= bit(0); /* two bad members */
            sc.victim_behave = b ? B_NAN : B_SILENT;
            world_t *w = run(&sc);
            check_without(w, b ? "non-finite member" : "silent member");
            world_free(w);
            runs++;
        }
    }
    printf("case 4 silent and non-finite members: %d runs: %s\n", runs,
           test_failures == fails0 ? "ok" : "FAILED");
}

static bool same_results(const world_t *a, const world_t *b) {
    bool same = simnet_trace_hash(a->net) == simnet_trace_hash(b->net);
    for (uint32_t i = 0; i < a->sc.n; i++) {
        const gnode_t *x = &a->node[i], *y = &b->node[i];
        same &= memcmp(x->values, y->values, a->sc.count * sizeof(float)) == 0;
        same &= x->d.done == y->d.done && x->d.done_ms == y->d.done_ms;
        same &= x->d.res.group_size == y->d.res.group_size &&
                x->d.res.peers_failed == y->d.res.peers_failed &&
                x->d.res.group_weight == y->d.res.group_weight &&
                x->d.res.fraction_averaged == y->d.res.fraction_averaged &&
                x->d.res.bytes_sent == y->d.res.bytes_sent &&
                x->d.res.bytes_received == y->d.res.bytes_received;
    }
    return same;
}

/* Direct misuse of the API on a tiny machine: n = 3, self = 0, count 10,
 * parts of 2: shares [0,4) [4,7) [7,10), 2 parts each. */
static void api_misuse(void) {
    float v[10], x[4] = {1, 2, 3, 4};
    float al[5] = {0}; /* for a misaligned pointer */
    for (int i = 0; i < 10; i++)
        v[i] = (float)i;
    double wt[3] = {1, 1, 1};
    uint32_t bw[3] = {1, 1, 1};
    mp_group_cfg_t cfg = {.n = 3,
                          .self = 0,
                          .weights = wt,
                          .bandwidths = bw,
                          .values = v,
                          .count = 10,
                          .part_elems = 2,
                          .now_ms = 0,
                          .deadline_ms = 1000,
                          .peer_timeout_ms = 100};
    mp_group_t *g = NULL;

    /* Invalid configurations. */
    mp_group_cfg_t bad = cfg;
    CHECK(mp__group_new(&cfg, NULL) == MOSHPIT_EINVAL, "out NULL");
    CHECK(mp__group_new(NULL, &g) == MOSHPIT_EINVAL && g == NULL, "cfg NULL");
    bad.n = 0;
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "n = 0");
    bad.n = MP_GROUP_MAX + 1;
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "n too big");
    bad = cfg;
    bad.self = 3;
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "self >= n");
    bad = cfg;
    bad.weights = NULL;
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "weights NULL");
    bad = cfg;
    bad.bandwidths = NULL;
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "bandwidths NULL");
    bad = cfg;
    bad.values = NULL;
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "values NULL");
    double badw[3][3] = {{1, -1, 1}, {1, NAN, 1}, {INFINITY, 1, 1}};
    for (int i = 0; i < 3; i++) {
        bad = cfg;
        bad.weights = badw[i];
        CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "bad weight %d", i);
    }
    bad = cfg;
    bad.count = SIZE_MAX; /* more parts than a uint32_t can index */
    bad.part_elems = 1;
#if SIZE_MAX > UINT32_MAX
    CHECK(mp__group_new(&bad, &g) == MOSHPIT_EINVAL, "too many parts");
#else
    /* a 32-bit size_t: each share's parts fit a uint32_t, and the part
     * tables for 2^32 parts cannot be allocated */
    moshpit_err_t big = mp__group_new(&bad, &g);
    CHECK(big == MOSHPIT_EINVAL || big == MOSHPIT_ENOMEM,
          "2^32 parts: %d, want EINVAL or ENOMEM", (int)big);
#endif

    CHECK(mp__group_new(&cfg, &g) == MOSHPIT_OK, "valid config");
    const mp_part_kind_t S = MP_PART_SCATTER, G = MP_PART_GATHER;
    CHECK(mp__group_on_part(g, 1, 0, S, 0, 0, x, 2, 1) == MP_PART_BAD_SENDER,
          "from self");
    CHECK(mp__group_on_part(g, 1, 3, S, 0, 0, x, 2, 1) == MP_PART_BAD_SENDER,
          "from >= n");
    CHECK(mp__group_on_part(g, 1, 1, (mp_part_kind_t)0, 0, 0, x, 2, 1) ==
              MP_PART_BAD_INDEX,
          "kind 0");
    CHECK(mp__group_on_part(g, 1, 1, S, 1, 0, x, 2, 1) == MP_PART_BAD_INDEX,
          "scatter for another share");
    CHECK(mp__group_on_part(g, 1, 1, S, 0, 2, x, 2, 1) == MP_PART_BAD_INDEX,
          "part out of range");
    CHECK(mp__group_on_part(g, 1, 1, S, 0, 0, x, 1, 1) == MP_PART_BAD_INDEX,
          "short count");
    CHECK(mp__group_on_part(g, 1, 1, S, 0, 0, NULL, 2, 1) == MP_PART_BAD_INDEX,
          "NULL data");
    CHECK(mp__group_on_part(g, 1, 1, S, 0, 0,
                            (const float *)(const void *)((char *)al + 1), 2,
                            1) == MP_PART_BAD_INDEX,
          "misaligned data");
    CHECK(mp__group_on_part(g, 1, 1, G, 2, 0, x, 2, 1) == MP_PART_BAD_INDEX,
          "gather for a share not the sender's");
    CHECK(mp__group_on_part(g, 1, 1, G, 1, 1, x, 2, 1) == MP_PART_BAD_INDEX,
          "gather with the wrong count (last part of share 1 has 1)");
    CHECK(mp__group_has_sends(g), "scatter pending");
    CHECK(mp__group_next_wakeup(g) == 100, "wakeup at the peer timeout");

    CHECK(mp__group_on_part(g, 5, 1, S, 0, 0, x, 2, 1) == MP_PART_OK, "ok");
    CHECK(mp__group_on_part(g, 5, 1, S, 0, 0, x, 2, 1) == MP_PART_DUP, "dup");
    float nan2[2] = {1, NAN};
    /* a driver that checked finiteness itself: its verdict counts */
    CHECK(mp__group_on_part_checked(g, 6, 2, S, 0, 0, nan2, 2, 1,
                                    MP_FINITE_UNKNOWN) == MP_PART_NONFINITE,
          "non-finite scatter");
    CHECK(!mp__group_member_alive(g, 2) && mp__group_member_alive(g, 1),
          "2 dropped");
    CHECK(mp__group_on_part(g, 6, 2, S, 0, 1, x, 2, 1) == MP_PART_FROM_FAILED,
          "from failed");
    /* Part 0 is final: mean of member 0 (0, 1) and member 1 (1, 2). */
    CHECK(v[0] == 0.5f && v[1] == 1.5f, "part 0 averaged: %g %g", v[0], v[1]);
    mp_send_t snd;
    CHECK(!mp__group_next_send(g, 0, &snd), "send to self");
    CHECK(!mp__group_next_send(g, 3, &snd), "send to >= n");
    CHECK(!mp__group_next_send(g, 2, &snd), "send to dropped member");
    CHECK(mp__group_next_send(g, 1, &snd) && snd.kind == S && snd.share == 1 &&
              snd.part == 0 && snd.count == 2 && snd.data == v + 4,
          "first scatter to 1");
    CHECK(mp__group_next_send(g, 1, &snd) && snd.kind == S && snd.part == 1 &&
              snd.count == 1,
          "second scatter to 1");
    CHECK(mp__group_next_send(g, 1, &snd) && snd.kind == G && snd.share == 0 &&
              snd.part == 0 && snd.wsum == 2 && snd.data == v,
          "gather of part 0 to 1");
    CHECK(!mp__group_next_send(g, 1, &snd), "nothing more ready");

    CHECK(mp__group_on_part(g, 7, 1, G, 1, 0, x, 2, -1) == MP_PART_NONFINITE,
          "negative gather wsum drops the sender");
    CHECK(mp__group_done(g), "alone: done");
    mp_group_result_t r;
    mp__group_result(g, &r);
    CHECK(r.group_size == 1 && r.peers_failed == 2 && r.group_weight == 1,
          "result after drops");
    CHECK(r.fraction_averaged == 0.2, "fraction %g", r.fraction_averaged);
    CHECK(v[2] == 2 && v[3] == 3 && v[4] == 4, "rest local");
    CHECK(mp__group_on_part(g, 8, 1, S, 0, 1, x, 2, 1) == MP_PART_LATE, "late");
    CHECK(!mp__group_next_send(g, 1, &snd) && !mp__group_has_sends(g),
          "no sends after done");
    CHECK(mp__group_next_wakeup(g) == UINT64_MAX, "no wakeup after done");
    mp__group_on_member_failed(g, 9, 0);
    mp__group_on_member_failed(g, 9, 77);
    mp__group_on_tick(g, 9);
    mp__group_free(g);
    mp__group_free(NULL);

    /* Silence: nothing from 1 and 2 by the timeout drops both. */
    for (int i = 0; i < 10; i++)
        v[i] = (float)i;
    CHECK(mp__group_new(&cfg, &g) == MOSHPIT_OK, "valid config");
    mp__group_on_tick(g, 99);
    CHECK(mp__group_member_alive(g, 1) && mp__group_member_alive(g, 2),
          "not yet");
    mp__group_on_tick(g, 100);
    CHECK(mp__group_done(g) && !mp__group_member_alive(g, 1) &&
              !mp__group_member_alive(g, 2),
          "silence drops");
    for (int i = 0; i < 10; i++)
        CHECK(v[i] == (float)i, "local values kept");
    mp__group_free(g);

    /* Only gathers expected: the limit doubles. Member 0 has all it
     * needs from 1 and 2 (scatter) at t = 10; it still waits for their
     * gathers until 10 + 2 * 100. */
    CHECK(mp__group_new(&cfg, &g) == MOSHPIT_OK, "valid config");
    float y[2] = {5, 5};
    for (uint32_t m = 1; m <= 2; m++) {
        CHECK(mp__group_on_part(g, 10, m, S, 0, 0, y, 2, 1) == MP_PART_OK,
              "s0");
        CHECK(mp__group_on_part(g, 10, m, S, 0, 1, y, 2, 1) == MP_PART_OK,
              "s1");
    }
    CHECK(mp__group_next_wakeup(g) == 210, "gather timeout %" PRIu64,
          mp__group_next_wakeup(g));
    /* A gather with wsum 0 keeps local values and is not averaged. */
    CHECK(mp__group_on_part(g, 20, 1, G, 1, 0, y, 2, 0) == MP_PART_OK,
          "gather wsum 0");
    CHECK(v[4] == 4 && v[5] == 5, "wsum 0 keeps local");
    float inf2[2] = {INFINITY, 0};
    CHECK(mp__group_on_part(g, 20, 1, G, 1, 1, inf2, 1, 1) == MP_PART_NONFINITE,
          "non-finite gather");
    CHECK(mp__group_on_part(g, 21, 2, G, 2, 0, y, 2, NAN) == MP_PART_NONFINITE,
          "NaN gather wsum");
    /* Deadline closes everything. */
    mp__group_on_tick(g, 1000);
    CHECK(mp__group_done(g), "deadline");
    CHECK(mp__group_on_part(g, 1001, 1, S, 0, 0, y, 2, 1) == MP_PART_LATE,
          "after deadline");
    mp__group_free(g);

    /* A part arriving at the deadline is late, and closes the machine. */
    CHECK(mp__group_new(&cfg, &g) == MOSHPIT_OK, "valid config");
    CHECK(mp__group_on_part(g, 1000, 1, S, 0, 0, y, 2, 1) == MP_PART_LATE,
          "at deadline");
    CHECK(mp__group_done(g), "closed by the late part");
    mp__group_free(g);

    /* Degenerate rounds finish at once. */
    for (int i = 0; i < 10; i++)
        v[i] = (float)i;
    mp_group_cfg_t one = cfg;
    one.n = 1;
    CHECK(mp__group_new(&one, &g) == MOSHPIT_OK && mp__group_done(g), "n=1");
    mp__group_result(g, &r);
    CHECK(r.group_size == 1 && r.fraction_averaged == 0 && v[0] == 0 &&
              v[9] == 9,
          "alone keeps values");
    mp__group_free(g);
    mp_group_cfg_t empty = cfg;
    empty.count = 0;
    empty.values = NULL;
    CHECK(mp__group_new(&empty, &g) == MOSHPIT_OK && mp__group_done(g),
          "count 0");
    mp__group_result(g, &r);
    CHECK(r.fraction_averaged == 1.0 && r.group_size == 3, "count 0 result");
    mp__group_free(g);
    mp_group_cfg_t late = cfg;
    late.now_ms = 1000;
    CHECK(mp__group_new(&late, &g) == MOSHPIT_OK && mp__group_done(g),
          "born after its deadline");
    mp__group_free(g);
}

static void case_garbage(void) {
    long fails0 = test_failures;
    uint64_t calls = 0;
    api_misuse();
    for (uint32_t n = 2; n <= 6; n++) {
        scen_t sc = base_scen(n, 4099, 800 + n);
        sc.part_elems = 300;
        sc.unequal_bw = true;
        world_t *clean = run(&sc);
        sc.garbage = true;
        world_t *dirty = run(&sc);
        check_exact(dirty, "garbage");
        CHECK(same_results(clean, dirty), "n=%u: garbage changed the result",
              n);
        CHECK(dirty->garbage_calls > 0 && dirty->garbage_bad == 0,
              "garbage statuses");
        calls += dirty->garbage_calls;
        world_free(clean);
        world_free(dirty);
        if (n < 3)
            continue;

        /* Garbage during a failure, too. */
        sc.timeout = 100;
        sc.deadline = 5000;
        sc.victims = bit(1);
        sc.kill_after[1] = 7;
        sc.garbage = false;
        sc.dmode = D_SEPARATED;
        clean = run(&sc);
        sc.garbage = true;
        dirty = run(&sc);
        check_faults(dirty, "garbage+kill");
        CHECK(same_results(clean, dirty),
              "n=%u: garbage changed the result of a failed round", n);
        calls += dirty->garbage_calls;
        world_free(clean);
        world_free(dirty);
    }
    printf("case 5 garbage and duplicates: %" PRIu64 " bad calls, results "
           "unchanged: %s\n",
           calls, test_failures == fails0 ? "ok" : "FAILED");
}

static void case_reproducible(void) {
    long fails0 = test_failures;
    scen_t sc = base_scen(7, 30011, 2024);
    sc.part_elems = 700;
    sc.unequal_bw = true;
    sc.jitter = 4;
    sc.timeout = 100;
    sc.deadline = 5000;
    sc.notify_ms = UINT32_MAX;
    sc.dmode = D_SEPARATED;
    sc.victims = bit(3) | bit(5);
    sc.kill_after[3] = 9;
    sc.kill_after[5] = 20;
    world_t *a = run(&sc);
    world_t *b = run(&sc);
    check_faults(a, "reproducible");
    CHECK(same_results(a, b), "same seed, different result");
    simnet_stats_t sa, sb;
    simnet_get_stats(a->net, &sa);
    simnet_get_stats(b->net, &sb);
    CHECK(memcmp(&sa, &sb, sizeof sa) == 0, "same seed, different stats");
    sc.seed++;
    world_t *c = run(&sc);
    CHECK(simnet_trace_hash(a->net) != simnet_trace_hash(c->net),
          "another seed gave the same schedule");
    printf("case 6 reproducibility: trace %016" PRIx64 ", %" PRIu64
           " events, %" PRIu64 " messages: %s\n",
           simnet_trace_hash(a->net), sa.events, sa.msgs_delivered,
           test_failures == fails0 ? "ok" : "FAILED");
    world_free(a);
    world_free(b);
    world_free(c);
}

/* ------------------------------------------------------------------ */
/* case 0: the simulated network itself                                */

typedef struct netlog {
    uint64_t at[256];
    uint64_t arg[256];
    uint32_t node[256];
    int n;
} netlog_t;

static void log_msg(simnet_t *s, uint32_t node, const simnet_msg_t *m,
                    void *user) {
    netlog_t *l = user;
    if (l->n < 256) {
        l->at[l->n] = simnet_now(s);
        l->arg[l->n] = m->arg[0];
        l->node[l->n++] = node;
    }
}

static void log_timer(simnet_t *s, uint32_t node, uint64_t tag, void *user) {
    netlog_t *l = user;
    if (l->n < 256) {
        l->at[l->n] = simnet_now(s);
        l->arg[l->n] = tag;
        l->node[l->n++] = node;
    }
}

static const simnet_ops_t log_ops = {log_msg, log_timer};

static void send_n(simnet_t *s, uint32_t a, uint32_t b, uint64_t tag,
                   size_t len) {
    static unsigned char buf[4096];
    simnet_msg_t m = {.src = a, .dst = b, .type = 9, .data = buf, .len = len};
    m.arg[0] = tag;
    simnet_send(s, &m);
}

static void case_simnet(void) {
    long fails0 = test_failures;
    netlog_t la, lb;
    simnet_stats_t st;

    /* Serialization: 1000 + 32 bytes at 1,032,000 B/s take 1 ms each. */
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    simnet_t *s = simnet_new(1);
    uint32_t a = simnet_add_node(s, &log_ops, &la);
    uint32_t b = simnet_add_node(s, &log_ops, &lb);
    simnet_set_link(s, a, b, 5, 1032000);
    for (uint64_t i = 0; i < 3; i++)
        send_n(s, a, b, i, 1000);
    CHECK(simnet_link_free_at(s, a, b) == 3, "link busy 3 ms");
    CHECK(simnet_link_free_at(s, b, a) == 0, "reverse link idle");
    simnet_run(s, UINT64_MAX);
    CHECK(lb.n == 3 && lb.at[0] == 6 && lb.at[1] == 7 && lb.at[2] == 8 &&
              lb.arg[0] == 0 && lb.arg[2] == 2,
          "serialized deliveries at 6, 7, 8 ms");
    simnet_free(s);

    /* Jitter keeps each link FIFO; equal times keep scheduling order. */
    memset(&lb, 0, sizeof lb);
    s = simnet_new(2);
    a = simnet_add_node(s, &log_ops, &la);
    b = simnet_add_node(s, &log_ops, &lb);
    simnet_set_jitter(s, 10);
    for (uint64_t i = 0; i < 200; i++)
        send_n(s, a, b, i, 10);
    simnet_run(s, UINT64_MAX);
    bool fifo = lb.n == 200;
    for (int i = 1; i < lb.n; i++)
        fifo &= lb.arg[i] == lb.arg[i - 1] + 1 && lb.at[i] >= lb.at[i - 1];
    CHECK(fifo, "FIFO under jitter");
    CHECK(lb.at[199] > 1, "jitter delays deliveries");
    simnet_free(s);

    /* Kills: a message still being transmitted dies with its sender, one
     * fully on the wire is delivered; timers of the dead never fire. */
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    s = simnet_new(3);
    a = simnet_add_node(s, &log_ops, &la);
    b = simnet_add_node(s, &log_ops, &lb);
    simnet_set_node_bw(s, a, 1032000);
    send_n(s, a, b, 1, 1000); /* leaves the link at 1 ms */
    send_n(s, a, b, 2, 4096); /* cut: still sending at 3 ms */
    simnet_timer(s, a, 10, 77);
    simnet_kill_at(s, a, 3);
    simnet_run(s, UINT64_MAX);
    simnet_get_stats(s, &st);
    CHECK(lb.n == 1 && lb.arg[0] == 1, "only the finished message arrives");
    CHECK(la.n == 0 && !simnet_alive(s, a) && simnet_death_time(s, a) == 3,
          "dead at 3 ms, no timer");
    CHECK(st.msgs_dropped == 1 && st.msgs_delivered == 1, "stats");
    simnet_free(s);

    /* kill_after: the node handles exactly k events. */
    memset(&la, 0, sizeof la);
    s = simnet_new(4);
    a = simnet_add_node(s, &log_ops, &la);
    for (uint64_t t = 0; t < 5; t++)
        simnet_timer(s, a, 7, t); /* same time: scheduling order */
    simnet_timer(s, a, 3, 99);    /* in the past of nothing: at 3 */
    simnet_kill_after(s, a, 3);
    simnet_run(s, UINT64_MAX);
    CHECK(la.n == 3 && la.arg[0] == 99 && la.arg[1] == 0 && la.arg[2] == 1 &&
              simnet_node_events(s, a) == 3 && simnet_death_time(s, a) == 7,
          "kill after 3 events");
    simnet_free(s);

    /* Partitions and loss. */
    memset(&lb, 0, sizeof lb);
    s = simnet_new(5);
    a = simnet_add_node(s, &log_ops, &la);
    b = simnet_add_node(s, &log_ops, &lb);
    simnet_set_link_down(s, a, b, true);
    send_n(s, a, b, 1, 10);
    simnet_set_link_down(s, a, b, false);
    send_n(s, a, b, 2, 10);
    simnet_run(s, UINT64_MAX);
    CHECK(lb.n == 1 && lb.arg[0] == 2, "link down drops");
    simnet_set_loss(s, 250000);
    for (int i = 0; i < 20000; i++)
        send_n(s, a, b, 3, 0);
    simnet_run(s, UINT64_MAX);
    simnet_get_stats(s, &st);
    CHECK(st.msgs_delivered > 14500 && st.msgs_delivered < 15500,
          "25%% loss delivered %" PRIu64, st.msgs_delivered);
    simnet_free(s);

    printf("case 0 simnet: serialization, FIFO jitter, kills, partitions, "
           "loss: %s\n",
           test_failures == fails0 ? "ok" : "FAILED");
}

int main(void) {
    double t0 = now_s();
    case_simnet();
    case_no_faults();
    case_zero_weights();
    case_kill_sweep();
    case_multi_faults();
    case_bad_members();
    case_garbage();
    case_reproducible();
    printf("test_sim_group: done in %.2f s\n", now_s() - t0);
    return test_summary("test_sim_group");
}
