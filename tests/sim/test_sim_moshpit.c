/* SPDX-License-Identifier: MIT */
/*
 * test_sim_moshpit.c - Moshpit All-Reduce end to end in the simulator
 * (tests/sim/moshsim.c: the real grid, rendezvous, joiner, matchmaker and
 * group core of every peer over simnet). Cases and their pass rules:
 *
 * 0. simnet extras: with a latency spread every link keeps one fixed
 *    latency and not all links share it; with retransmission loss every
 *    message arrives (none dropped), in send order per link, delayed by
 *    whole retransmission timeouts (rto, 3 rto, 7 rto, ...).
 * 1. Exactness on full grids: N=16/M=4/d=2, N=64/M=8/d=2 (also with d
 *    chosen automatically), N=4096/M=16/d=3, with weights 1 and random:
 *    every round forms exactly N/M full groups, nobody alone or degraded;
 *    after d-1 rounds some peer is still off by > 1e-3 (of the largest
 *    initial |x|); after d rounds every peer is within 1e-6 of it from the
 *    initial weighted mean, and the total weight is unchanged (1e-12).
 * 2. Failures: N=1024, M=8, 12 rounds, each peer missing each round with
 *    probability 1% and 10%: some peers do miss rounds, no call hangs, the
 *    MSE shrinks in every round, and after 12 rounds it is below 1e-9 (1%)
 *    and 1e-6 (10%) of the initial MSE (measured: about 3e-11 and 2e-8).
 * 3. Random positions: N=1000, M=8, 8 rounds: the MSE falls by at least 4x
 *    in every round (measured: 6x to 10x) and below 1e-6 of the initial.
 * 4. Churn: N=512, M=8, 8 peers crash and 8 join in each of 12 rounds: the
 *    live count stays 512, no call hangs or outlasts round_timeout, crashes
 *    hit running groups (some calls drop a member), and the MSE among the
 *    live peers ends below 1e-7 of the initial (measured: about 2e-11).
 * 5. A matchmaker crashed mid-matchmaking (N=64, M=8, d=2, calls spread
 *    over 1 s, the matchmaker of one key killed 500 ms in, some of the key's
 *    JOINs already taken): every member of the key ends its matchmaking
 *    within window + grace. With the crash reported (100 ms), all of them
 *    regroup in one group formed by the next candidate. Unreported, each
 *    either waited out its window + grace (it was acknowledged by the dead
 *    one) and ended alone, or timed out on the ACK and joined the group of
 *    the next candidate; at least two did the latter.
 * 6. Different views (N=64, M=8, d=2): one member of a key whose view lacks
 *    the key's matchmaker ends alone at the end of its window with its
 *    values untouched, the other seven form a group of seven whose result
 *    is their exact mean; two such members form a group of two at the next
 *    candidate and the other six a group of six. Nobody hangs.
 * 7. min_group_size 3 with N=5, M=4, d=1: one group of four (exact mean);
 *    the one left over (balanced 3 + 2 would be below min) is not grouped:
 *    it returns group_size 1 between window and window + grace after it
 *    started, values bit for bit untouched.
 * 8. Reproducibility: a run with misses, loss, churn, random weights and
 *    positions gives the same statistics and digest (values, weights,
 *    keys, event trace) twice with one seed, and another with another.
 *
 * No sleeps, no wall clock in any decision; exit status nonzero on any
 * failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/moshsim.h"

#define TEST_MAX_PRINTED 60
#include "test_util.h"

#define WINDOW 2000u
#define GRACE 1000u

static moshsim_cfg_t base(uint32_t n, uint32_t m, uint32_t d, uint64_t seed) {
    moshsim_cfg_t c;
    moshsim_cfg_init(&c);
    c.peers = n;
    c.group_size = m;
    c.dims = d;
    c.seed = seed;
    return c;
}

static moshsim_t *make(const moshsim_cfg_t *c) {
    moshsim_t *s = moshsim_new(c);
    if (s == NULL) {
        fprintf(stderr, "moshsim_new failed\n");
        exit(1);
    }
    return s;
}

/* Weighted mean of the live peers (count doubles); returns total weight. */
static double live_mean(const moshsim_t *s, uint32_t count, double *mean) {
    double w = 0;
    for (uint32_t e = 0; e < count; e++)
        mean[e] = 0;
    for (uint32_t q = 0; q < moshsim_peers(s); q++) {
        if (!moshsim_alive(s, q))
            continue;
        const float *x = moshsim_values(s, q);
        w += moshsim_weight(s, q);
        for (uint32_t e = 0; e < count; e++)
            mean[e] += moshsim_weight(s, q) * (double)x[e];
    }
    for (uint32_t e = 0; e < count; e++)
        mean[e] /= w;
    return w;
}

static double max_abs(const moshsim_t *s, uint32_t count) {
    double m = 0;
    for (uint32_t q = 0; q < moshsim_peers(s); q++)
        for (uint32_t e = 0; e < count; e++)
            m = fmax(m, fabs((double)moshsim_values(s, q)[e]));
    return m;
}

/* Largest |x - ref| over the live peers. */
static double max_dev(const moshsim_t *s, uint32_t count, const double *ref) {
    double d = 0;
    for (uint32_t q = 0; q < moshsim_peers(s); q++) {
        if (!moshsim_alive(s, q))
            continue;
        for (uint32_t e = 0; e < count; e++)
            d = fmax(d, fabs((double)moshsim_values(s, q)[e] - ref[e]));
    }
    return d;
}

/* ------------------------------------------------------------------ */
/* 0. simnet extras                                                    */

typedef struct rx {
    uint64_t sent[2000], at[2000];
    uint32_t from[2000];
    uint64_t seq[2000];
    int n;
} rx_t;

static void rx_msg(simnet_t *s, uint32_t node, const simnet_msg_t *m,
                   void *user) {
    rx_t *r = user;
    (void)node;
    if (r->n < 2000) {
        r->at[r->n] = simnet_now(s);
        r->sent[r->n] = m->arg[1];
        r->from[r->n] = m->src;
        r->seq[r->n] = m->arg[0];
        r->n++;
    }
}

static void case_simnet(void) {
    long f0 = test_failures;
    static rx_t r;
    static const simnet_ops_t rx_ops = {rx_msg, NULL};
    /* spread: 20 senders to one receiver, 10 messages each */
    memset(&r, 0, sizeof r);
    simnet_t *net = simnet_new(5);
    simnet_set_default_link(net, 3, 0);
    simnet_set_latency_spread(net, 40);
    for (int i = 0; i < 21; i++)
        simnet_add_node(net, &rx_ops, &r);
    for (uint64_t k = 0; k < 10; k++) {
        simnet_run(net, 100 * k);
        for (uint32_t a = 1; a < 21; a++) {
            simnet_msg_t m = {.src = a, .dst = 0, .type = 1};
            m.arg[0] = k;
            m.arg[1] = simnet_now(net);
            simnet_send(net, &m);
        }
    }
    simnet_run(net, UINT64_MAX);
    uint64_t lat[21] = {0};
    bool varied = false;
    CHECK(r.n == 200, "spread: %d of 200 delivered", r.n);
    for (int i = 0; i < r.n; i++) {
        uint64_t d = r.at[i] - r.sent[i];
        uint32_t a = r.from[i];
        CHECK(d >= 3 && d <= 43, "spread: delay %llu", (unsigned long long)d);
        if (lat[a] == 0)
            lat[a] = d;
        CHECK(lat[a] == d, "spread: link %u delay %llu then %llu", a,
              (unsigned long long)lat[a], (unsigned long long)d);
        varied |= lat[a] != lat[1];
    }
    CHECK(varied, "spread: every link has the same latency");
    simnet_free(net);

    /* retransmission: 1000 messages on one link, 30% loss, rto 50 */
    memset(&r, 0, sizeof r);
    net = simnet_new(6);
    simnet_set_default_link(net, 2, 0);
    simnet_set_retransmit(net, 300000, 50);
    simnet_add_node(net, &rx_ops, &r);
    simnet_add_node(net, &rx_ops, &r);
    for (uint64_t k = 0; k < 1000; k++) {
        simnet_run(net, k);
        simnet_msg_t m = {.src = 1, .dst = 0, .type = 1};
        m.arg[0] = k;
        m.arg[1] = simnet_now(net);
        simnet_send(net, &m);
    }
    simnet_run(net, UINT64_MAX);
    simnet_stats_t st;
    simnet_get_stats(net, &st);
    CHECK(r.n == 1000 && st.msgs_dropped == 0, "retx: %d delivered, %llu lost",
          r.n, (unsigned long long)st.msgs_dropped);
    int delayed = 0, blocked = 0;
    for (int i = 0; i < r.n; i++) {
        CHECK(r.seq[i] == (uint64_t)i, "retx: message %llu arrived %d-th",
              (unsigned long long)r.seq[i], i);
        uint64_t d = r.at[i] - r.sent[i] - 2;
        /* own delay rto * (2^k - 1), or held behind an earlier message */
        bool own =
            d == 0 || d == 50 || d == 150 || d == 350 || d == 750 || d == 1550;
        bool behind = i > 0 && r.at[i] == r.at[i - 1];
        CHECK(own || behind, "retx: message %d delayed by %llu", i,
              (unsigned long long)d);
        delayed += d > 0 && own;
        blocked += behind && !own;
    }
    /* ~30% of transmissions fail: 300 +- 45 (3 sigma) messages delayed */
    CHECK(delayed > 200 && delayed < 400, "retx: %d delayed", delayed);
    CHECK(blocked > 0, "retx: no head-of-line blocking seen");
    simnet_free(net);
    printf("case 0 simnet extras: %s (retx: %d delayed, %d held back)\n",
           test_failures == f0 ? "ok" : "FAILED", delayed, blocked);
}

/* ------------------------------------------------------------------ */
/* 1. exactness                                                        */

static void case_exact(uint32_t n, uint32_t m, uint32_t d, bool auto_dims,
                       bool random_weights, uint64_t seed) {
    long f0 = test_failures;
    moshsim_cfg_t c = base(n, m, auto_dims ? 0 : d, seed);
    c.random_weights = random_weights;
    moshsim_t *s = make(&c);
    double mu0[64], mu[64];
    double w0 = live_mean(s, c.count, mu0), scale = max_abs(s, c.count);
    double dev = 0;
    for (uint32_t r = 1; r <= d; r++) {
        moshsim_stats_t st;
        moshsim_round(s, &st);
        CHECK(st.groups == n / m && st.full_groups == n / m && st.alone == 0 &&
                  st.degraded == 0 && st.hung == 0 && st.called == n,
              "exact N=%u M=%u round %u: %u groups (%u full), %u alone, "
              "%u degraded, %u hung",
              n, m, r, st.groups, st.full_groups, st.alone, st.degraded,
              st.hung);
        dev = max_dev(s, c.count, mu0) / scale;
        if (r + 1 == d)
            CHECK(dev > 1e-3,
                  "exact N=%u M=%u: already within %.3g after %u rounds", n, m,
                  dev, r);
    }
    CHECK(dev <= 1e-6, "exact N=%u M=%u d=%u: off by %.3g after d rounds", n, m,
          d, dev);
    double w = live_mean(s, c.count, mu);
    CHECK(fabs(w - w0) <= 1e-12 * w0, "exact N=%u: total weight %.17g -> %.17g",
          n, w0, w);
    printf("case 1 exact N=%u M=%u d=%u%s weights %s: %s (max deviation "
           "%.2e)\n",
           n, m, d, auto_dims ? " (auto)" : "", random_weights ? "random" : "1",
           test_failures == f0 ? "ok" : "FAILED", dev);
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* 2, 3. convergence with misses, random positions                      */

static void case_failures(double p, double bound) {
    long f0 = test_failures;
    moshsim_cfg_t c = base(1024, 8, 0, 21);
    c.fail_prob = p;
    moshsim_t *s = make(&c);
    moshsim_stats_t st;
    moshsim_measure(s, &st);
    double first = st.mse, prev = st.mse;
    uint32_t skipped = 0;
    bool shrinks = true;
    for (uint32_t r = 1; r <= 12; r++) {
        moshsim_round(s, &st);
        skipped += st.skipped;
        CHECK(st.hung == 0, "fail %g: %u calls hung", p, st.hung);
        if (!(st.mse < prev)) {
            shrinks = false;
            CHECK(st.mse < prev, "fail %g: round %u mse %.3e after %.3e", p, r,
                  st.mse, prev);
        }
        prev = st.mse;
    }
    /* expected misses: 1024 * 12 * p */
    CHECK(skipped > 1024 * 12 * p / 2, "fail %g: only %u misses", p, skipped);
    CHECK(st.mse <= bound * first, "fail %g: mse %.3e of %.3e after 12", p,
          st.mse, first);
    printf("case 2 misses %g: %s (%u misses, mse %.3e -> %.3e, shrinks every "
           "round: %s)\n",
           p, test_failures == f0 ? "ok" : "FAILED", skipped, first, st.mse,
           shrinks ? "yes" : "no");
    moshsim_free(s);
}

static void case_random_positions(void) {
    long f0 = test_failures;
    moshsim_cfg_t c = base(1000, 8, 0, 3);
    c.random_positions = true;
    moshsim_t *s = make(&c);
    moshsim_stats_t st;
    moshsim_measure(s, &st);
    double first = st.mse, prev = st.mse, worst = 0;
    for (uint32_t r = 1; r <= 8; r++) {
        moshsim_round(s, &st);
        CHECK(st.hung == 0, "random positions: %u hung", st.hung);
        CHECK(st.mse * 4 <= prev,
              "random positions: round %u mse %.3e after %.3e", r, st.mse,
              prev);
        worst = fmax(worst, st.mse / prev);
        prev = st.mse;
    }
    CHECK(st.mse <= 1e-6 * first, "random positions: mse %.3e of %.3e", st.mse,
          first);
    printf("case 3 random positions: %s (mse %.3e -> %.3e, worst round "
           "x%.3f)\n",
           test_failures == f0 ? "ok" : "FAILED", first, st.mse, worst);
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* 4. churn                                                            */

static void case_churn(void) {
    long f0 = test_failures;
    moshsim_cfg_t c = base(512, 8, 0, 2);
    c.churn = 8;
    moshsim_t *s = make(&c);
    moshsim_stats_t st;
    moshsim_measure(s, &st);
    double first = st.mse;
    uint32_t degraded = 0;
    uint64_t longest = 0;
    for (uint32_t r = 1; r <= 12; r++) {
        moshsim_round(s, &st);
        degraded += st.degraded;
        longest = st.max_call_ms > longest ? st.max_call_ms : longest;
        CHECK(st.live == 512 && st.left == 8 && st.joined == 8,
              "churn round %u: live %u left %u joined %u", r, st.live, st.left,
              st.joined);
        CHECK(st.hung == 0, "churn round %u: %u hung", r, st.hung);
        CHECK(st.max_call_ms <= c.round_timeout_ms,
              "churn round %u: a call took %llu ms", r,
              (unsigned long long)st.max_call_ms);
    }
    CHECK(degraded > 0, "churn: no crash ever hit a running group");
    CHECK(st.mse <= 1e-7 * first, "churn: mse %.3e of %.3e", st.mse, first);
    printf("case 4 churn: %s (mse %.3e -> %.3e, %u calls dropped a member, "
           "longest call %llu ms)\n",
           test_failures == f0 ? "ok" : "FAILED", first, st.mse, degraded,
           (unsigned long long)longest);
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* 5. matchmaker crashed mid-matchmaking                                */

static bool same_key(const moshsim_t *s, uint32_t q, const uint8_t *key,
                     size_t len) {
    uint8_t k[MP_KEY_MAX];
    return moshsim_next_key(s, q, k) == len && memcmp(k, key, len) == 0;
}

static void case_mm_killed(bool reported) {
    long f0 = test_failures;
    moshsim_cfg_t c = base(64, 8, 2, 7);
    c.start_jitter_ms = 1000;
    c.notice_ms = reported ? 100 : MOSHSIM_NEVER;
    moshsim_t *s = make(&c);
    uint8_t key[MP_KEY_MAX];
    size_t len = moshsim_next_key(s, 0, key);
    uint32_t mm = moshsim_candidate(s, key, len, 0);
    uint32_t next = moshsim_candidate(s, key, len, 1);
    uint32_t members[64], nm = 0;
    for (uint32_t q = 0; q < 64; q++)
        if (q != mm && same_key(s, q, key, len))
            members[nm++] = q;
    moshsim_kill_next_round(s, mm, 500);
    uint64_t kill_at = moshsim_next_start(s) + 500;
    moshsim_stats_t st;
    moshsim_round(s, &st);
    CHECK(st.hung == 0, "mm killed: %u hung", st.hung);
    uint32_t early = 0, via_next = 0, gave_up = 0;
    uint64_t gid = 0;
    for (uint32_t i = 0; i < nm; i++) {
        const moshsim_call_t *k = moshsim_last_call(s, members[i]);
        /* JOIN taken before the crash: sent by kill - 2 * 25 ms at the
         * latest (one-way latency is at most 25 ms) */
        early += k->start_ms + 50 <= kill_at;
        uint64_t mm_end = k->group_ms ? k->group_ms : k->end_ms;
        CHECK(k->ended && mm_end - k->start_ms <= WINDOW + GRACE,
              "mm killed: member %u matchmaking took %llu ms", members[i],
              (unsigned long long)(mm_end - k->start_ms));
        if (k->group_id != 0) {
            CHECK(k->matchmaker == next,
                  "mm killed: member %u grouped by %u, not %u", members[i],
                  k->matchmaker, next);
            via_next++;
            CHECK(gid == 0 || gid == k->group_id,
                  "mm killed: members split over two groups");
            gid = k->group_id;
        } else {
            CHECK(!reported && k->end_ms - k->start_ms == WINDOW + GRACE,
                  "mm killed: member %u alone after %llu ms", members[i],
                  (unsigned long long)(k->end_ms - k->start_ms));
            gave_up++;
        }
    }
    CHECK(early > 0 && early < nm,
          "mm killed: %u of %u members joined before the crash", early, nm);
    if (reported)
        CHECK(via_next == nm, "mm killed: %u of %u regrouped", via_next, nm);
    else
        CHECK(via_next >= 2, "mm killed: only %u grouped via the next one",
              via_next);
    printf("case 5 matchmaker killed, %s: %s (%u members, %u joined before "
           "the crash, %u regrouped at the next candidate, %u gave up)\n",
           reported ? "reported" : "unreported",
           test_failures == f0 ? "ok" : "FAILED", nm, early, via_next, gave_up);
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* 6. different views                                                  */

typedef struct blind {
    uint32_t who[2], nwho;
    uint32_t hidden;
} blind_t;

static size_t blind_view(void *user, uint32_t peer, const uint32_t *live,
                         size_t nlive, uint32_t *out) {
    const blind_t *b = user;
    bool is_blind = false;
    for (uint32_t i = 0; i < b->nwho; i++)
        is_blind |= b->who[i] == peer;
    if (!is_blind)
        return SIZE_MAX;
    size_t n = 0;
    for (size_t i = 0; i < nlive; i++)
        if (live[i] != b->hidden)
            out[n++] = live[i];
    return n;
}

/* Exact mean of the given peers' values before the round. */
static void mean_of(float (*before)[16], const uint32_t *peers, uint32_t n,
                    double *mean) {
    for (uint32_t e = 0; e < 16; e++) {
        mean[e] = 0;
        for (uint32_t i = 0; i < n; i++)
            mean[e] += before[peers[i]][e];
        mean[e] /= n;
    }
}

static bool near_mean(const float *x, const double *mean, double scale) {
    for (uint32_t e = 0; e < 16; e++)
        if (fabs((double)x[e] - mean[e]) > 1e-6 * scale)
            return false;
    return true;
}

static void case_views(uint32_t nblind) {
    long f0 = test_failures;
    moshsim_cfg_t c = base(64, 8, 2, 9);
    moshsim_t *s = make(&c);
    static float before[64][16];
    for (uint32_t q = 0; q < 64; q++)
        memcpy(before[q], moshsim_values(s, q), sizeof before[q]);
    double scale = max_abs(s, 16);
    uint8_t key[MP_KEY_MAX];
    size_t len = moshsim_next_key(s, 0, key);
    uint32_t mm = moshsim_candidate(s, key, len, 0);
    uint32_t next = moshsim_candidate(s, key, len, 1);
    uint32_t nm = 0, rest[64], nrest = 0;
    blind_t b = {.hidden = mm};
    for (uint32_t q = 0; q < 64; q++) {
        if (!same_key(s, q, key, len))
            continue;
        nm++;
        if (q != mm && q != next && b.nwho < nblind)
            b.who[b.nwho++] = q;
        else
            rest[nrest++] = q;
    }
    CHECK(nm == 8 && b.nwho == nblind, "views: key has %u members", nm);
    moshsim_set_view_hook(s, blind_view, &b);
    moshsim_stats_t st;
    moshsim_round(s, &st);
    CHECK(st.hung == 0, "views: %u hung", st.hung);
    /* the rest: one group at the matchmaker, exact mean of its members */
    double mr[16], mb[16];
    mean_of(before, rest, nrest, mr);
    mean_of(before, b.who, b.nwho, mb);
    for (uint32_t i = 0; i < nrest; i++) {
        const moshsim_call_t *k = moshsim_last_call(s, rest[i]);
        CHECK(k->group_id != 0 && k->roster == nrest && k->matchmaker == mm &&
                  k->group_ms - k->start_ms <= WINDOW + GRACE,
              "views: peer %u: roster %u by %u (want %u by %u)", rest[i],
              k->roster, k->matchmaker, nrest, mm);
        CHECK(near_mean(moshsim_values(s, rest[i]), mr, scale),
              "views: peer %u does not hold its group's mean", rest[i]);
    }
    for (uint32_t i = 0; i < b.nwho; i++) {
        uint32_t q = b.who[i];
        const moshsim_call_t *k = moshsim_last_call(s, q);
        if (nblind == 1) {
            CHECK(k->ended && k->group_id == 0 && k->group_size == 1 &&
                      k->end_ms - k->start_ms >= WINDOW &&
                      k->end_ms - k->start_ms <= WINDOW + GRACE,
                  "views: blind peer %u: group %llx size %u after %llu ms", q,
                  (unsigned long long)k->group_id, k->group_size,
                  (unsigned long long)(k->end_ms - k->start_ms));
            CHECK(memcmp(moshsim_values(s, q), before[q], sizeof before[q]) ==
                      0,
                  "views: blind peer %u values changed while alone", q);
        } else {
            CHECK(k->group_id != 0 && k->roster == nblind &&
                      k->matchmaker == next &&
                      k->group_ms - k->start_ms <= WINDOW + GRACE,
                  "views: blind peer %u: roster %u by %u (want %u by %u)", q,
                  k->roster, k->matchmaker, nblind, next);
            CHECK(near_mean(moshsim_values(s, q), mb, scale),
                  "views: blind peer %u does not hold the pair's mean", q);
        }
    }
    /* all other keys are unaffected: 7 full groups */
    CHECK(st.full_groups == 7, "views: %u full groups", st.full_groups);
    printf("case 6 views, %u blind: %s (groups %u: %u at the matchmaker, "
           "%s)\n",
           nblind, test_failures == f0 ? "ok" : "FAILED", st.groups, nrest,
           nblind == 1 ? "1 alone" : "2 at the next candidate");
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* 7. min_group_size                                                   */

static void case_min_group(void) {
    long f0 = test_failures;
    /* 5 peers, M = 4, min 3: balanced groups (3 + 2) would be below min,
     * so a full group of 4 and one peer alone */
    moshsim_cfg_t c = base(5, 4, 1, 4);
    c.min_group_size = 3;
    moshsim_t *s = make(&c);
    float before[6][16];
    for (uint32_t q = 0; q < 5; q++)
        memcpy(before[q], moshsim_values(s, q), sizeof before[q]);
    double scale = max_abs(s, 16);
    moshsim_stats_t st;
    moshsim_round(s, &st);
    CHECK(st.groups == 1 && st.max_size == 4 && st.alone == 1 && st.hung == 0,
          "min group: %u groups (max %u), %u alone, %u hung", st.groups,
          st.max_size, st.alone, st.hung);
    uint32_t grouped[6], ng = 0;
    for (uint32_t q = 0; q < 5; q++)
        if (moshsim_last_call(s, q)->group_id != 0)
            grouped[ng++] = q;
    double m[16];
    mean_of(before, grouped, ng, m);
    for (uint32_t q = 0; q < 5; q++) {
        const moshsim_call_t *k = moshsim_last_call(s, q);
        if (k->group_id != 0) {
            CHECK(near_mean(moshsim_values(s, q), m, scale),
                  "min group: peer %u does not hold the mean", q);
            continue;
        }
        uint64_t took = k->end_ms - k->start_ms;
        CHECK(k->ended && k->group_size == 1 && took >= WINDOW &&
                  took <= WINDOW + GRACE,
              "min group: leftover %u size %u after %llu ms", q, k->group_size,
              (unsigned long long)took);
        CHECK(memcmp(moshsim_values(s, q), before[q], sizeof before[q]) == 0,
              "min group: leftover %u values changed", q);
    }
    printf("case 7 min_group_size 3: %s\n",
           test_failures == f0 ? "ok" : "FAILED");
    moshsim_free(s);
}

/* ------------------------------------------------------------------ */
/* 8. reproducibility                                                  */

static uint64_t repro_run(uint64_t seed, moshsim_stats_t *st) {
    moshsim_cfg_t c = base(300, 8, 0, seed);
    c.fail_prob = 0.05;
    c.loss = 0.05;
    c.churn = 3;
    c.random_weights = true;
    c.random_positions = true;
    moshsim_t *s = make(&c);
    for (uint32_t r = 0; r < 6; r++) {
        moshsim_round(s, &st[r]);
        CHECK(st[r].hung == 0, "repro: %u hung", st[r].hung);
    }
    uint64_t d = moshsim_digest(s);
    moshsim_free(s);
    return d;
}

static void case_repro(void) {
    long f0 = test_failures;
    moshsim_stats_t a[6], b[6], c[6];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    memset(c, 0, sizeof c);
    uint64_t da = repro_run(31, a), db = repro_run(31, b);
    uint64_t dc = repro_run(32, c);
    CHECK(da == db && memcmp(a, b, sizeof a) == 0,
          "repro: seed 31 gave %016llx and %016llx", (unsigned long long)da,
          (unsigned long long)db);
    CHECK(da != dc, "repro: seeds 31 and 32 gave the same digest");
    printf("case 8 reproducibility: %s (digest %016llx)\n",
           test_failures == f0 ? "ok" : "FAILED", (unsigned long long)da);
}

int main(void) {
    case_simnet();
    case_exact(16, 4, 2, false, false, 1);
    case_exact(16, 4, 2, false, true, 2);
    case_exact(64, 8, 2, false, false, 3);
    case_exact(64, 8, 2, true, true, 4);
    case_exact(4096, 16, 3, false, false, 5);
    case_exact(4096, 16, 3, false, true, 6);
    case_failures(0.01, 1e-9);
    case_failures(0.10, 1e-6);
    case_random_positions();
    case_churn();
    case_mm_killed(true);
    case_mm_killed(false);
    case_views(1);
    case_views(2);
    case_min_group();
    case_repro();
    return test_summary("test_sim_moshpit");
}
