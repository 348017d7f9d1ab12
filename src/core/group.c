/* SPDX-License-Identifier: MIT */
/*
 * group.c - the butterfly all-reduce state machine of one group round
 * (see group.h for the interface). It keeps, for the share this member
 * reduces, a double-precision accumulator and per-part bookkeeping
 * (contributor bit mask, weight sum, final flag), and for every other share
 * the state of each part (pending, received, given up); with a robust rule
 * (agg.h) it keeps every contribution of its share instead of a running
 * sum. It never does I/O, reads no clock and allocates only in
 * mp__group_new.
 *
 * Semantics (normative; docs/AGGREGATION.md repeats this paragraph):
 *
 * Layout. Shares come from mp__share_split(n, bandwidths, count), parts of at
 * most part_elems elements from mp__share_parts; members named in
 * cfg.noshare (outbound-only peers) get an empty share and the others split
 * the vector among themselves (unless it names every member); part p of share j
 * covers [off_j + p*part_elems, min(off_j + len_j, off_j + (p+1)*part_elems)).
 *
 * Scatter. For every other live member d, mp__group_next_send(g, d) hands
 * out the parts of share d taken from this member's own values, in part
 * order, then gather parts of this member's share in the order they became
 * final. A scatter part whose gather already arrived from d is skipped (d
 * finished it without us). Nothing is handed out for a dropped member, and
 * nothing at all once the machine is done. The returned data points into
 * the caller's values buffer: the driver copies it before its next call into
 * the machine. Scatter sends carry wsum = this member's weight
 * (informational; receivers use the roster weights).
 *
 * Reduce. Own share i is reduced into a separate accumulator of doubles (8
 * bytes per element of the own share, allocated up front; the last
 * contribution of a part is fused into the final store, so a group of two
 * never touches it); values are not modified before a part is final.
 * acc = w_self*x_self + sum of w_k*x_k over contributions that arrived,
 * part by part as they arrive; contributions of weight 0 are validated and
 * counted as arrived but not added. The caller's own values must be finite
 * (moshpit_average checks before a round starts). A scatter part from k is
 * accepted once; it must be finite or k is dropped (MP_PART_NONFINITE) and
 * the part is not counted. Part p becomes final as soon as every member
 * that is still alive has contributed it. Then, if wsum > 0 and at least
 * one other member contributed, values[p] = (float)(acc / wsum) and the part
 * counts as averaged; otherwise (wsum == 0, or only this member's own
 * contribution, which only happens when everyone else was dropped or at the
 * deadline) values[p] keeps the local values, the part does not count as
 * averaged and its gather carries wsum = 0. Every final part is offered as a
 * gather to every other live member.
 *
 * Aggregation. cfg.agg zero-initialized is the weighted mean above, bit
 * for bit. With agg.weight_cap K > 0 every roster weight is first bounded
 * by mp__agg_weight_bound (at most K times the lower median of the
 * positive roster weights); the bounded weights are the weights everywhere
 * below (sums, gather wsum, group_weight). With a robust mode (trimmed
 * mean, CenteredClip) the reducer copies each contribution of weight > 0
 * that arrives into a per-member buffer instead of accumulating it ((n-1)
 * floats per element of the own share, allocated up front; its own
 * contribution is read from values, which do not change before the part
 * is final), and when the part becomes final (same moments, same
 * contributor set, same averaged-or-local rule as for the mean) it is
 * reduced by mp__agg_trimmed or mp__agg_clip over the contributions of
 * weight > 0 in roster order. Weight-0 contributions count as arrived and
 * take no part, as in the mean. One more condition for a robust part to
 * count as averaged: at least mp__agg_min_contrib() contributions of
 * weight > 0 (2 trim + 1, or 3 for CenteredClip; fewer could not outvote
 * one attacker); else it keeps local values and its gather carries wsum 0,
 * exactly like a part only this member contributed to.
 *
 * Compression. With cfg.agg.codec other than MOSHPIT_COMPRESS_NONE (codec.h)
 * what travels is encoded: a scatter part is encoded from the sender's values
 * when it is handed out (mp_send_t.bytes), and the receiver decodes it before
 * mp__group_on_part, so a contribution enters the reduction as its decoded
 * value; the reducer's own contribution is its exact values. The reduction
 * itself (accumulation in double, robust rules) is unchanged. When an own
 * part becomes final and counts as averaged, its result is encoded once and
 * the part's values are replaced by the decoding of those bytes; every gather
 * of that part sends the same bytes. So every member that receives the
 * gather, and the reducer itself, holds the same bits. A final part that
 * keeps local values (wsum 0) keeps them exactly; its gather's bytes are
 * zeros and are not read. Result bytes count the encoded payload.
 *
 * Gather. A gather part from member j must have share == j, a valid part
 * index and the layout's count, else MP_PART_BAD_INDEX. Its wsum must be
 * finite and >= 0 and, if wsum > 0, its data finite, else j is dropped
 * (MP_PART_NONFINITE). With wsum > 0 the data is copied into values and the
 * part counts as averaged; with wsum == 0 the data is not read and the
 * local values stay.
 *
 * Failure. A member m is dropped on mp__group_on_member_failed, on a
 * non-finite part, or on silence: nothing accepted from m for its limit
 * L(m) while a scatter part from m is still expected, or for L(m) plus the
 * largest L of the live members while only gather parts from m are
 * expected (a reducer is legitimately silent while it waits up to that
 * long for a slow member it then drops; the longer limit keeps one silent
 * member from cascading into more drops). L(m) is peer_timeout_ms unless
 * the driver set a shorter one from what it measured of m's link
 * (mp__group_set_silence). peer_timeout_ms == 0 disables silence
 * detection. The
 * silence clock of every member starts at cfg.now_ms and restarts on each
 * part accepted from it (MP_PART_OK) and on mp__group_heard (the driver's
 * evidence that m is sending). When m is dropped: its contributions
 * that already arrived stay in their parts (including the earlier parts of
 * a member later caught sending non-finite data: they were finite and are
 * averaged like any other), its missing contributions are no longer awaited
 * (parts become final with what arrived), the parts of share m not received
 * keep local values, and nothing more is sent to m. Parts from m are then
 * answered MP_PART_FROM_FAILED.
 *
 * Checks. mp__group_on_part answers, in this order: MP_PART_LATE (done, or
 * now >= deadline_ms, which first closes the round), MP_PART_BAD_SENDER
 * (from >= n or from == self), MP_PART_FROM_FAILED (from was dropped),
 * MP_PART_BAD_INDEX (unknown kind, share not self for a scatter or not from
 * for a gather, part out of range, count not the layout's, data NULL or not
 * float-aligned), MP_PART_DUP (already have it), MP_PART_NONFINITE, else
 * MP_PART_OK. Only OK and NONFINITE change state; no input can crash it.
 *
 * Deadline. At deadline_ms (checked by on_tick, on_part and
 * on_member_failed) everything still open is closed: own parts are
 * finalized with what arrived (same rule as above), missing gather parts
 * keep local values, pending sends are abandoned, and the machine is done.
 *
 * Done. The machine is done when every own part is final, every part of
 * every other share is received or given up, and every send owed to a live
 * member has been handed out (including the parts queued again by
 * mp__group_on_have), or when the deadline passed. After that it rejects
 * parts (MP_PART_LATE), hands out no sends and never touches values again,
 * unless mp__group_on_have queues a lost part (a HAVE, only before the
 * deadline): then it is open until that part is handed out, reading the
 * values again (the driver still owns them until its call ends).
 *
 * Result. group_size = n - dropped (self included); peers_failed = dropped;
 * group_weight = sum of the weights of members not dropped;
 * fraction_averaged = averaged elements (own final parts that count as
 * averaged + gathered parts with wsum > 0) / count, 1.0 when count == 0,
 * where a gathered part whose wsum is below the weights of the members not
 * dropped here does not count (its reducer dropped a member this one kept,
 * so it is no mean of this group: a round that lost members unevenly, e.g.
 * after a connection reset, says so instead of reporting everything
 * averaged with nobody dropped);
 * bytes_sent / bytes_received = payload bytes (as encoded) of parts handed
 * out / accepted (MP_PART_OK only).
 */
#include "core/group.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/agg.h"
#include "core/codec.h"
#include "core/share.h"
#include "core/vec.h"

/* Flags of an own-share part. */
#define OWN_FINAL 1u
#define OWN_ACC 2u /* acc holds the running sum (else it is w_self*x_self) */
#define OWN_AVG 4u /* final and counts as averaged */

/* States of a part of another member's share. */
enum { G_PENDING = 0, G_AVG, G_LOCAL, G_GIVEN_UP };

struct mp_group {
    uint32_t n, self;
    uint64_t round_id;
    float *values;
    size_t count;
    uint32_t pe; /* part_elems */
    uint64_t deadline, timeout;
    uint64_t alive; /* bit m: member m not dropped */
    bool slow;      /* own bandwidth <= the median / MP_SLOW_FACTOR */
    uint32_t nfailed;
    bool done;

    double w[MP_GROUP_MAX];
    size_t off[MP_GROUP_MAX], len[MP_GROUP_MAX];
    uint32_t nparts[MP_GROUP_MAX];
    size_t gbase[MP_GROUP_MAX];       /* first index of share j in gstate */
    uint64_t heard[MP_GROUP_MAX];     /* last part accepted from m */
    uint64_t lim[MP_GROUP_MAX];       /* silence limit of m (scatter) */
    uint64_t spare[MP_GROUP_MAX];     /* extra patience after a break */
    uint64_t break_at[MP_GROUP_MAX];  /* last break that granted it */
    uint32_t breaks[MP_GROUP_MAX];    /* breaks granted this round */
    uint32_t scat_next[MP_GROUP_MAX]; /* next scatter part for dest */
    uint32_t gat_next[MP_GROUP_MAX];  /* next index into final_order */
    uint32_t contribs[MP_GROUP_MAX];  /* own parts m contributed */
    uint32_t gathered[MP_GROUP_MAX];  /* parts of share m received */

    /* own share */
    double *acc;
    uint64_t *contrib; /* per own part: bit k = k contributed */
    double *pwsum;     /* per own part */
    uint8_t *pflags;   /* per own part: OWN_* */
    uint32_t *final_order;
    uint32_t nfinal;

    /* robust modes: contributions of the others to the own share (member k
     * at slot k, or k - 1 past self; len[self] floats each), and the
     * kernels' scratch */
    mp_agg_t agg;
    bool robust;
    uint32_t cmin; /* contributions of weight > 0 the rule needs */
    float *store;
    double *scratch;

    /* compression (cfg.agg.codec): each final own part encoded once
     * (pbytes per part), and one scatter part encoded at a time */
    uint32_t codec;
    size_t pbytes;
    uint8_t *genc;
    uint8_t *senc;
    /* other shares */
    uint8_t *gstate;
    double *gwsum; /* wsum of each gathered part (as gstate) */
    size_t gather_open;

    size_t averaged;
    uint64_t bytes_sent, bytes_received;
    mp_group_times_t times; /* when the first part came, and so on */

    /* parts to hand out again (mp__group_on_have): for each other member d
     * a bitmap of its nparts[d] scatter parts followed by one of the
     * nparts[self] gather parts, rbase[d] bits into redo */
    uint8_t *redo;
    uint64_t *stamp; /* per bit of redo: the driver's stamp of its last send */
    size_t rbase[MP_GROUP_MAX];
    uint32_t redo_n[MP_GROUP_MAX];
    /* parts queued again for m in this round, at most MP_GROUP_REPEATS
     * times the parts it is handed (a mate that breaks its connections
     * and claims everything lost, again and again, gets no more) */
    uint64_t redo_total[MP_GROUP_MAX];
    uint64_t have_at[MP_GROUP_MAX]; /* last HAVE to m; 0: none */
    /* bit m: a quiet HAVE restarted m's silence clock since the last new
     * part from m (mp__group_quiet; a part accepted clears it) */
    uint64_t quieted;
    uint32_t resent;
    bool closed; /* the deadline closed the round */
};

static uint64_t bit(uint32_t m) {
    return (uint64_t)1 << m;
}

static bool is_alive(const mp_group_t *g, uint32_t m) {
    return (g->alive & bit(m)) != 0;
}

static uint32_t part_len(const mp_group_t *g, uint32_t share, uint32_t part) {
    size_t start = (size_t)part * g->pe;
    size_t rest = g->len[share] - start;
    return rest < g->pe ? (uint32_t)rest : g->pe;
}

static float *part_ptr(const mp_group_t *g, uint32_t share, uint32_t part) {
    return g->values + g->off[share] + (size_t)part * g->pe;
}

static bool redo_get(const mp_group_t *g, size_t i) {
    return (g->redo[i / 8] >> (i % 8)) & 1u;
}

static void redo_flip(mp_group_t *g, size_t i) {
    g->redo[i / 8] ^= (uint8_t)(1u << (i % 8));
}

/* Bit p of a HAVE bitmap of len bytes; bits past it count as held. */
static bool held_bit(const uint8_t *b, size_t len, uint32_t p) {
    return (size_t)p / 8 >= len || ((b[p / 8] >> (p % 8)) & 1u);
}

/* Where member k's contribution to own part p is kept (robust modes). */
static float *store_ptr(const mp_group_t *g, uint32_t k, uint32_t p) {
    size_t slot = k < g->self ? k : k - 1;
    return g->store + slot * g->len[g->self] + (size_t)p * g->pe;
}

/* ---- state transitions ---- */

/* Contributions of weight > 0 to own part p. */
static uint32_t positive_contribs(const mp_group_t *g, uint32_t p) {
    uint32_t c = 0;
    for (uint32_t k = 0; k < g->n; k++)
        c += (g->contrib[p] & bit(k)) && g->w[k] > 0;
    return c;
}

/* Reduces own part p with the robust rule, in place (values hold this
 * member's own contribution until then). */
static void robust_reduce(mp_group_t *g, uint32_t p, float *out, size_t cnt) {
    const float *x[MP_GROUP_MAX];
    double w[MP_GROUP_MAX];
    uint32_t c = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        if (!(g->contrib[p] & bit(k)) || !(g->w[k] > 0))
            continue;
        x[c] = k == g->self ? out : store_ptr(g, k, p);
        w[c++] = g->w[k];
    }
    assert(c > 0);
    if (g->agg.mode == MOSHPIT_AGG_TRIMMED_MEAN)
        mp__agg_trimmed(x, w, c, cnt, g->agg.trim, out);
    else
        mp__agg_clip(x, w, c, cnt, g->agg.tau, g->agg.iters, g->scratch, out);
}

/* Makes own part p final. `last` (weight wlast > 0), if not NULL, is a
 * contribution already counted in contrib/pwsum but not yet added to acc
 * (mean only). */
/* With compression, the result of own part p is encoded once for its
 * gathers and replaced by what every receiver decodes from those bytes, so
 * that all members, this one included, end with the same bits. */
static void encode_own(mp_group_t *g, uint32_t p, float *out, uint32_t cnt) {
    if (g->codec == MOSHPIT_COMPRESS_NONE)
        return;
    uint8_t *enc = g->genc + (size_t)p * g->pbytes;
    mp__codec_encode(g->codec, out, cnt, enc);
    (void)mp__codec_decode(g->codec, enc, cnt, out);
}

static void finalize(mp_group_t *g, uint32_t p, const float *last,
                     double wlast) {
    assert(!(g->pflags[p] & OWN_FINAL));
    uint32_t cnt = part_len(g, g->self, p);
    bool others = (g->contrib[p] & ~bit(g->self)) != 0;
    float *out = part_ptr(g, g->self, p);
    const double *acc = g->acc + (size_t)p * g->pe;

    g->pflags[p] |= OWN_FINAL;
    g->final_order[g->nfinal++] = p;
    if (!(g->pwsum[p] > 0 && others) ||
        (g->robust && positive_contribs(g, p) < g->cmin)) {
        assert(last == NULL);
        return;
    }
    g->pflags[p] |= OWN_AVG;
    g->averaged += cnt;
    if (g->robust) {
        robust_reduce(g, p, out, cnt);
        encode_own(g, p, out, cnt);
        return;
    }
    double inv = 1.0 / g->pwsum[p];
    if (last != NULL && (g->pflags[p] & OWN_ACC))
        mp__vec_acc_add_store(out, acc, last, wlast, inv, cnt);
    else if (last != NULL)
        mp__vec_blend_store(out, g->w[g->self], last, wlast, inv, cnt);
    else if (g->pflags[p] & OWN_ACC)
        mp__vec_acc_store(out, acc, inv, cnt);
    /* else every other contribution had weight 0: the mean is exactly the
     * local value already in place. */
    encode_own(g, p, out, cnt);
}

static void finalize_ready(mp_group_t *g) {
    for (uint32_t p = 0; p < g->nparts[g->self]; p++)
        if (!(g->pflags[p] & OWN_FINAL) && (g->alive & ~g->contrib[p]) == 0)
            finalize(g, p, NULL, 0);
}

/* Keeps scat_next[d] off parts whose gather already arrived. */
static void skip_gathered(mp_group_t *g, uint32_t d) {
    const uint8_t *st = g->gstate + g->gbase[d];
    while (g->scat_next[d] < g->nparts[d] && st[g->scat_next[d]] != G_PENDING)
        g->scat_next[d]++;
}

static void check_done(mp_group_t *g) {
    if (g->done || g->nfinal < g->nparts[g->self] || g->gather_open > 0)
        return;
    for (uint32_t d = 0; d < g->n; d++) {
        if (d == g->self || !is_alive(g, d))
            continue;
        if (g->scat_next[d] < g->nparts[d] ||
            g->gat_next[d] < g->nparts[g->self] || g->redo_n[d] > 0)
            return;
    }
    g->done = true;
}

static void drop(mp_group_t *g, uint32_t m) {
    assert(m < g->n && m != g->self && is_alive(g, m));
    g->alive &= ~bit(m);
    g->nfailed++;
    g->redo_n[m] = 0; /* nothing more goes to m */
    uint8_t *st = g->gstate + g->gbase[m];
    for (uint32_t p = 0; p < g->nparts[m]; p++)
        if (st[p] == G_PENDING)
            st[p] = G_GIVEN_UP;
    g->gather_open -= g->nparts[m] - g->gathered[m];
    finalize_ready(g);
}

static void close_all(mp_group_t *g) {
    for (uint32_t p = 0; p < g->nparts[g->self]; p++)
        if (!(g->pflags[p] & OWN_FINAL))
            finalize(g, p, NULL, 0);
    for (uint32_t j = 0; j < g->n; j++) {
        if (j == g->self)
            continue;
        uint8_t *st = g->gstate + g->gbase[j];
        for (uint32_t p = 0; p < g->nparts[j]; p++)
            if (st[p] == G_PENDING)
                st[p] = G_GIVEN_UP;
    }
    g->gather_open = 0;
    g->done = true;
    g->closed = true;
}

static bool expects_scatter(const mp_group_t *g, uint32_t m) {
    return g->contribs[m] < g->nparts[g->self];
}

static bool expects_gather(const mp_group_t *g, uint32_t m) {
    return g->gathered[m] < g->nparts[m];
}

/* Silence limit for m, 0 if nothing is expected from m. */
static uint64_t silence_limit(const mp_group_t *g, uint32_t m) {
    if (g->timeout == 0)
        return 0;
    if (expects_scatter(g, m))
        return g->lim[m];
    if (expects_gather(g, m)) {
        /* m may wait for the slowest other member before its gathers,
         * with the patience a break gave that one (mp__group_on_break) */
        uint64_t most = 0;
        for (uint32_t k = 0; k < g->n; k++) {
            uint64_t l = mp__add_sat_u64(g->lim[k], g->spare[k]);
            if (k != g->self && is_alive(g, k) && l > most)
                most = l;
        }
        return mp__add_sat_u64(g->lim[m], most);
    }
    return 0;
}

/* Silence limit for m with the patience its breaks granted
 * (mp__group_on_break): what drops it. */
static uint64_t patience(const mp_group_t *g, uint32_t m) {
    uint64_t lim = silence_limit(g, m);
    return lim > 0 ? mp__add_sat_u64(lim, g->spare[m]) : 0;
}

/* ---- public (internal) API ---- */

static bool cfg_valid(const mp_group_cfg_t *c) {
    if (c->n == 0 || c->n > MP_GROUP_MAX || c->self >= c->n ||
        c->weights == NULL || c->bandwidths == NULL ||
        (c->values == NULL && c->count > 0))
        return false;
    for (uint32_t i = 0; i < c->n; i++)
        if (!isfinite(c->weights[i]) || c->weights[i] < 0)
            return false;
    return mp__agg_valid(&c->agg);
}

moshpit_err_t mp__group_new(const mp_group_cfg_t *cfg, mp_group_t **out) {
    if (out == NULL)
        return MOSHPIT_EINVAL;
    *out = NULL;
    if (cfg == NULL || !cfg_valid(cfg))
        return MOSHPIT_EINVAL;

    mp_group_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        return MOSHPIT_ENOMEM;
    g->n = cfg->n;
    g->self = cfg->self;
    g->round_id = cfg->round_id;
    g->values = cfg->values;
    g->count = cfg->count;
    g->pe = cfg->part_elems ? cfg->part_elems : MP_PART_ELEMS_DEFAULT;
    g->deadline = cfg->deadline_ms;
    g->timeout = cfg->peer_timeout_ms;
    g->alive = g->n == 64 ? UINT64_MAX : bit(g->n) - 1;
    memcpy(g->w, cfg->weights, g->n * sizeof *g->w);
    g->agg = cfg->agg;
    g->codec = cfg->agg.codec;
    g->pbytes = mp__codec_bytes(g->codec, g->pe);
    g->robust = g->agg.mode != MOSHPIT_AGG_MEAN;
    g->cmin = mp__agg_min_contrib(&g->agg);
    if (g->agg.weight_cap > 0)
        mp__agg_weight_bound(g->n, g->w, g->agg.weight_cap, g->w);
    uint32_t bw[MP_GROUP_MAX];
    mp__share_bandwidth_bound(g->n, cfg->bandwidths, bw);
    g->slow = g->n > 2 && (uint64_t)bw[g->self] * MP_SLOW_FACTOR <=
                              mp__share_median(g->n, bw);
    uint64_t all = g->n == 64 ? UINT64_MAX : bit(g->n) - 1;
    uint64_t ns = cfg->noshare & all;
    if (ns == 0 || ns == all) {
        if (mp__share_split(g->n, bw, g->count, g->off, g->len) != 0)
            goto invalid;
    } else {
        /* outbound-only members reduce nothing: the shares are split among
         * the others, and a member without a share has an empty one at the
         * offset where the next share starts */
        uint32_t rbw[MP_GROUP_MAX], k = 0;
        size_t roff[MP_GROUP_MAX], rlen[MP_GROUP_MAX];
        for (uint32_t j = 0; j < g->n; j++)
            if (!(ns & bit(j)))
                rbw[k++] = bw[j];
        if (mp__share_split(k, rbw, g->count, roff, rlen) != 0)
            goto invalid;
        k = 0;
        size_t o = 0;
        for (uint32_t j = 0; j < g->n; j++) {
            g->off[j] = o;
            g->len[j] = ns & bit(j) ? 0 : rlen[k++];
            o += g->len[j];
        }
    }

    size_t total = 0, rbits = 0;
    for (uint32_t j = 0; j < g->n; j++) {
        g->nparts[j] = mp__share_parts(g->len[j], g->pe);
        if (g->nparts[j] == UINT32_MAX || total > SIZE_MAX - g->nparts[j])
            goto invalid;
        g->gbase[j] = total;
        total += g->nparts[j];
        g->heard[j] = cfg->now_ms;
        g->lim[j] = g->timeout;
        if (j != g->self)
            g->gather_open += g->nparts[j];
    }
    for (uint32_t j = 0; j < g->n; j++) {
        if (j == g->self)
            continue;
        g->rbase[j] = rbits;
        if (rbits > SIZE_MAX / 2 - g->nparts[j] - g->nparts[g->self])
            goto invalid;
        rbits += (size_t)g->nparts[j] + g->nparts[g->self];
    }

    size_t own = g->nparts[g->self], ownlen = g->len[g->self];
    if (ownlen > SIZE_MAX / sizeof(double))
        goto nomem;
    /* calloc(0) may return NULL: allocate at least one element. The mean
     * accumulates in acc; the robust modes keep the contributions. */
    if (g->robust) {
        size_t pe = ownlen < g->pe ? ownlen : g->pe;
        if (ownlen > SIZE_MAX / sizeof(float) / (g->n - 1 ? g->n - 1 : 1))
            goto nomem;
        g->store = malloc(
            ownlen && g->n > 1 ? ownlen * (g->n - 1) * sizeof(float) : 1);
        g->scratch = malloc(pe ? 2 * pe * sizeof(double) : 1);
        g->acc = malloc(1);
        if (!g->store || !g->scratch)
            goto nomem;
    } else {
        g->acc = malloc(ownlen ? ownlen * sizeof(double) : 1);
    }
    g->contrib = calloc(own ? own : 1, sizeof *g->contrib);
    g->pwsum = calloc(own ? own : 1, sizeof *g->pwsum);
    g->pflags = calloc(own ? own : 1, sizeof *g->pflags);
    g->final_order = calloc(own ? own : 1, sizeof *g->final_order);
    g->gstate = calloc(total ? total : 1, sizeof *g->gstate);
    g->gwsum = calloc(total ? total : 1, sizeof *g->gwsum);
    g->redo = calloc(rbits / 8 + 1, 1);
    g->stamp = calloc(rbits ? rbits : 1, sizeof *g->stamp);
    if (g->codec != MOSHPIT_COMPRESS_NONE) {
        if (own > SIZE_MAX / g->pbytes)
            goto nomem;
        g->genc = calloc(own ? own : 1, g->pbytes);
        g->senc = malloc(g->pbytes);
        if (!g->genc || !g->senc)
            goto nomem;
    }
    if (!g->acc || !g->contrib || !g->pwsum || !g->pflags || !g->final_order ||
        !g->gstate || !g->gwsum || !g->redo || !g->stamp)
        goto nomem;
    for (size_t p = 0; p < own; p++) {
        g->contrib[p] = bit(g->self);
        g->pwsum[p] = g->w[g->self];
    }
    g->contribs[g->self] = (uint32_t)own;

    if (cfg->now_ms >= g->deadline)
        close_all(g);
    else
        finalize_ready(g); /* n == 1: everything is final at once */
    check_done(g);
    *out = g;
    return MOSHPIT_OK;

invalid:
    mp__group_free(g);
    return MOSHPIT_EINVAL;
nomem:
    mp__group_free(g);
    return MOSHPIT_ENOMEM;
}

void mp__group_free(mp_group_t *g) {
    if (g == NULL)
        return;
    free(g->acc);
    free(g->store);
    free(g->scratch);
    free(g->contrib);
    free(g->pwsum);
    free(g->pflags);
    free(g->final_order);
    free(g->gstate);
    free(g->gwsum);
    free(g->redo);
    free(g->stamp);
    free(g->genc);
    free(g->senc);
    free(g);
}

/* finite: MP_FINITE_UNKNOWN (check here) or the driver's verdict. */
static bool data_finite(const float *data, uint32_t count, int finite) {
    return finite == MP_FINITE_UNKNOWN ? mp__vec_all_finite(data, count)
                                       : finite != 0;
}

static mp_part_status_t on_scatter(mp_group_t *g, uint64_t now, uint32_t from,
                                   uint32_t part, const float *data,
                                   uint32_t count, int finite) {
    if ((g->contrib[part] & bit(from)) || (g->pflags[part] & OWN_FINAL))
        return MP_PART_DUP;
    if (!data_finite(data, count, finite)) {
        drop(g, from);
        return MP_PART_NONFINITE;
    }
    double wm = g->w[from];
    g->contrib[part] |= bit(from);
    g->pwsum[part] += wm;
    g->contribs[from]++;
    g->heard[from] = now;
    g->quieted &= ~bit(from); /* new data: a quiet HAVE may restart it */
    g->bytes_received += mp__codec_bytes(g->codec, count);
    if (g->robust) {
        if (wm > 0)
            memcpy(store_ptr(g, from, part), data,
                   (size_t)count * sizeof(float));
        if ((g->alive & ~g->contrib[part]) == 0)
            finalize(g, part, NULL, 0);
        return MP_PART_OK;
    }
    if ((g->alive & ~g->contrib[part]) == 0) {
        finalize(g, part, wm > 0 ? data : NULL, wm);
    } else if (wm > 0) {
        double *acc = g->acc + (size_t)part * g->pe;
        if (g->pflags[part] & OWN_ACC) {
            mp__vec_acc_add(acc, data, wm, count);
        } else {
            mp__vec_acc_first(acc, part_ptr(g, g->self, part), g->w[g->self],
                              data, wm, count);
            g->pflags[part] |= OWN_ACC;
        }
    }
    return MP_PART_OK;
}

static mp_part_status_t on_gather(mp_group_t *g, uint64_t now, uint32_t from,
                                  uint32_t part, const float *data,
                                  uint32_t count, double wsum, int finite) {
    uint8_t *st = g->gstate + g->gbase[from] + part;
    if (*st != G_PENDING)
        return MP_PART_DUP;
    if (!isfinite(wsum) || wsum < 0 ||
        (wsum > 0 && !data_finite(data, count, finite))) {
        drop(g, from);
        return MP_PART_NONFINITE;
    }
    if (wsum > 0) {
        memcpy(part_ptr(g, from, part), data, (size_t)count * sizeof(float));
        *st = G_AVG;
        g->gwsum[g->gbase[from] + part] = wsum;
        g->averaged += count;
    } else {
        *st = G_LOCAL;
    }
    g->gathered[from]++;
    g->gather_open--;
    g->heard[from] = now;
    g->quieted &= ~bit(from);
    g->bytes_received += mp__codec_bytes(g->codec, count);
    skip_gathered(g, from);
    return MP_PART_OK;
}

mp_part_status_t mp__group_on_part(mp_group_t *g, uint64_t now_ms,
                                   uint32_t from, mp_part_kind_t kind,
                                   uint32_t share, uint32_t part,
                                   const float *data, uint32_t count,
                                   double wsum) {
    return mp__group_on_part_checked(g, now_ms, from, kind, share, part, data,
                                     count, wsum, MP_FINITE_UNKNOWN);
}

mp_part_status_t mp__group_on_part_checked(mp_group_t *g, uint64_t now_ms,
                                           uint32_t from, mp_part_kind_t kind,
                                           uint32_t share, uint32_t part,
                                           const float *data, uint32_t count,
                                           double wsum, int finite) {
    if (g == NULL)
        return MP_PART_LATE;
    if (!g->done && now_ms >= g->deadline)
        close_all(g);
    if (g->done)
        return MP_PART_LATE;
    if (from >= g->n || from == g->self)
        return MP_PART_BAD_SENDER;
    if (!is_alive(g, from))
        return MP_PART_FROM_FAILED;
    if (kind == MP_PART_SCATTER) {
        if (share != g->self)
            return MP_PART_BAD_INDEX;
    } else if (kind == MP_PART_GATHER) {
        if (share != from)
            return MP_PART_BAD_INDEX;
    } else {
        return MP_PART_BAD_INDEX;
    }
    if (part >= g->nparts[share] || count != part_len(g, share, part) ||
        data == NULL || (uintptr_t)data % _Alignof(float) != 0)
        return MP_PART_BAD_INDEX;

    mp_part_status_t st =
        kind == MP_PART_SCATTER
            ? on_scatter(g, now_ms, from, part, data, count, finite)
            : on_gather(g, now_ms, from, part, data, count, wsum, finite);
    check_done(g);
    if (st == MP_PART_OK) {
        mp_group_times_t *t = &g->times;
        uint64_t *at = kind == MP_PART_SCATTER ? &t->first_scatter_ms
                                               : &t->first_gather_ms;
        if (*at == 0)
            *at = now_ms;
        if (t->own_final_ms == 0 && g->nfinal == g->nparts[g->self])
            t->own_final_ms = now_ms;
        if (t->gathered_ms == 0 && g->gather_open == 0)
            t->gathered_ms = now_ms;
    }
    return st;
}

void mp__group_on_member_failed(mp_group_t *g, uint64_t now_ms, uint32_t m) {
    if (g == NULL || g->done)
        return;
    if (now_ms >= g->deadline) {
        close_all(g);
        return;
    }
    if (m >= g->n || m == g->self || !is_alive(g, m))
        return;
    drop(g, m);
    check_done(g);
}

void mp__group_on_tick(mp_group_t *g, uint64_t now_ms) {
    if (g == NULL || g->done)
        return;
    if (now_ms >= g->deadline) {
        close_all(g);
        return;
    }
    for (uint32_t m = 0; m < g->n; m++) {
        if (m == g->self || !is_alive(g, m))
            continue;
        uint64_t lim = patience(g, m);
        if (lim > 0 && now_ms >= mp__add_sat_u64(g->heard[m], lim))
            drop(g, m);
    }
    check_done(g);
}

static void fill_scatter(mp_group_t *g, uint32_t dest, uint32_t p,
                         mp_send_t *out) {
    out->kind = MP_PART_SCATTER;
    out->share = dest;
    out->part = p;
    out->data = part_ptr(g, dest, p);
    out->count = part_len(g, dest, p);
    out->wsum = g->w[g->self];
    out->bytes = (const uint8_t *)out->data;
    if (g->codec != MOSHPIT_COMPRESS_NONE) {
        mp__codec_encode(g->codec, out->data, out->count, g->senc);
        out->bytes = g->senc;
    }
}

static void fill_gather(const mp_group_t *g, uint32_t p, mp_send_t *out) {
    out->kind = MP_PART_GATHER;
    out->share = g->self;
    out->part = p;
    out->data = part_ptr(g, g->self, p);
    out->count = part_len(g, g->self, p);
    out->wsum = (g->pflags[p] & OWN_AVG) ? g->pwsum[p] : 0.0;
    out->bytes = g->codec == MOSHPIT_COMPRESS_NONE
                     ? (const uint8_t *)out->data
                     : g->genc + (size_t)p * g->pbytes;
}

/* The next part queued again for dest, oldest first (scatter parts, then
 * gather parts): false if none is left. A scatter part whose gather arrived
 * in the meantime is dropped from the queue (dest finished it). */
static bool redo_next(mp_group_t *g, uint32_t dest, mp_send_t *out) {
    size_t base = g->rbase[dest];
    const uint8_t *st = g->gstate + g->gbase[dest];
    for (uint32_t p = 0; g->redo_n[dest] > 0 && p < g->nparts[dest]; p++) {
        if (!redo_get(g, base + p))
            continue;
        redo_flip(g, base + p);
        g->redo_n[dest]--;
        if (st[p] == G_PENDING) {
            fill_scatter(g, dest, p, out);
            return true;
        }
    }
    base += g->nparts[dest];
    for (uint32_t p = 0; g->redo_n[dest] > 0 && p < g->nparts[g->self]; p++) {
        if (!redo_get(g, base + p))
            continue;
        redo_flip(g, base + p);
        g->redo_n[dest]--;
        fill_gather(g, p, out);
        return true;
    }
    g->redo_n[dest] = 0;
    return false;
}

static bool next_send(mp_group_t *g, uint32_t dest, bool scatter_ok,
                      mp_send_t *out) {
    if (g == NULL || out == NULL || g->done || dest >= g->n ||
        dest == g->self || !is_alive(g, dest))
        return false;
    if (g->redo_n[dest] > 0 && redo_next(g, dest, out)) {
        g->resent++;
    } else if (scatter_ok && g->scat_next[dest] < g->nparts[dest]) {
        uint32_t p = g->scat_next[dest]++;
        skip_gathered(g, dest);
        fill_scatter(g, dest, p, out);
    } else if (g->gat_next[dest] < g->nfinal) {
        fill_gather(g, g->final_order[g->gat_next[dest]++], out);
    } else {
        check_done(g);
        return false;
    }
    out->nbytes = mp__codec_bytes(g->codec, out->count);
    g->bytes_sent += out->nbytes;
    check_done(g);
    return true;
}

bool mp__group_next_send(mp_group_t *g, uint32_t dest, mp_send_t *out) {
    return next_send(g, dest, true, out);
}

bool mp__group_next_gather(mp_group_t *g, uint32_t dest, mp_send_t *out) {
    return next_send(g, dest, false, out);
}

uint32_t mp__group_scatter_left(const mp_group_t *g, uint32_t dest) {
    if (g == NULL || g->done || dest >= g->n || dest == g->self ||
        !is_alive(g, dest))
        return 0;
    return g->nparts[dest] - g->scat_next[dest];
}

bool mp__group_is_slow(const mp_group_t *g) {
    return g != NULL && g->slow;
}

bool mp__group_has_sends_for(const mp_group_t *g, uint32_t d) {
    if (g == NULL || g->done || d >= g->n || d == g->self || !is_alive(g, d))
        return false;
    return g->scat_next[d] < g->nparts[d] || g->gat_next[d] < g->nfinal ||
           g->redo_n[d] > 0;
}

bool mp__group_has_sends(const mp_group_t *g) {
    if (g == NULL || g->done)
        return false;
    for (uint32_t d = 0; d < g->n; d++)
        if (mp__group_has_sends_for(g, d))
            return true;
    return false;
}

/* When a HAVE to m is next due (silence_limit(g, m) > 0). */
static uint64_t have_time(const mp_group_t *g, uint32_t m) {
    /* half of m's own limit, which may follow its link (set_silence) */
    uint64_t half = silence_limit(g, m) / 2 > 0 ? silence_limit(g, m) / 2 : 1;
    uint64_t at = mp__add_sat_u64(g->heard[m], half);
    uint64_t again = mp__add_sat_u64(g->have_at[m], half);
    return g->have_at[m] != 0 && again > at ? again : at;
}

uint64_t mp__group_next_wakeup(const mp_group_t *g) {
    if (g == NULL || g->done)
        return UINT64_MAX;
    uint64_t t = g->deadline;
    for (uint32_t m = 0; m < g->n; m++) {
        if (m == g->self || !is_alive(g, m))
            continue;
        uint64_t lim = patience(g, m);
        if (lim > 0) {
            uint64_t at = mp__add_sat_u64(g->heard[m], lim);
            if (at < t)
                t = at;
        }
    }
    return t;
}

void mp__group_set_silence(mp_group_t *g, uint32_t m, uint64_t ms) {
    if (g == NULL || m >= g->n || m == g->self || g->timeout == 0)
        return;
    g->lim[m] = ms == 0 || ms > g->timeout ? g->timeout : ms;
}

bool mp__group_on_break(mp_group_t *g, uint64_t now_ms, uint32_t m) {
    if (g == NULL || g->done || m >= g->n || m == g->self || !is_alive(g, m) ||
        g->timeout == 0)
        return false;
    /* the events of one break (each data connection's, the control
     * connection's, the mate's MARK) come within its limit: one grant */
    if (g->break_at[m] != 0 &&
        now_ms < mp__add_sat_u64(g->break_at[m], g->lim[m]))
        return false;
    if (g->breaks[m] >= MP_GROUP_BREAKS)
        return false;
    g->breaks[m]++;
    g->break_at[m] = now_ms > 0 ? now_ms : 1;
    g->spare[m] = g->lim[m];
    if (now_ms > g->heard[m])
        g->heard[m] = now_ms;
    return true;
}

uint64_t mp__group_limit(const mp_group_t *g, uint32_t m) {
    if (g == NULL || m >= g->n || m == g->self)
        return 0;
    return g->lim[m];
}

void mp__group_quiet(mp_group_t *g, uint64_t now_ms, uint32_t m) {
    if (g == NULL || m >= g->n || m == g->self)
        return;
    /* once a break granted its patience, a quiet HAVE adds none; and only
     * once until m sends a new part, so that a mate answering every quiet
     * HAVE with a MARK (and nothing else) is still dropped */
    if (g->spare[m] == 0 && !(g->quieted & bit(m)))
        mp__group_heard(g, now_ms, m);
    g->quieted |= bit(m);
}

bool mp__group_on_mark(mp_group_t *g, uint64_t now_ms, uint32_t m) {
    /* a MARK is no part: its only patience is the break it may grant (at
     * most MP_GROUP_BREAKS a round); it neither restarts m's silence clock
     * nor lets a quiet HAVE restart it again */
    return mp__group_on_break(g, now_ms, m);
}

void mp__group_extend_deadline(mp_group_t *g, uint64_t deadline_ms) {
    if (g != NULL && !g->done && deadline_ms > g->deadline)
        g->deadline = deadline_ms;
}

void mp__group_set_deadline(mp_group_t *g, uint64_t deadline_ms) {
    if (g != NULL && deadline_ms < g->deadline)
        g->deadline = deadline_ms;
}

uint32_t mp__group_part_elems(const mp_group_t *g) {
    return g != NULL ? g->pe : 0;
}

uint64_t mp__group_part_bytes(const mp_group_t *g, uint32_t share) {
    if (g == NULL || share >= g->n || g->len[share] == 0)
        return 0;
    size_t c = g->len[share] < g->pe ? g->len[share] : g->pe;
    return mp__codec_bytes(g->codec, (uint32_t)c);
}

uint64_t mp__group_share_bytes(const mp_group_t *g, uint32_t share) {
    if (g == NULL || share >= g->n)
        return 0;
    size_t len = g->len[share];
    return (uint64_t)(len / g->pe) * mp__codec_bytes(g->codec, g->pe) +
           mp__codec_bytes(g->codec, (uint32_t)(len % g->pe));
}

uint64_t mp__group_bytes_from(const mp_group_t *g, uint32_t m) {
    if (g == NULL || m >= g->n || m == g->self)
        return 0;
    return mp__group_share_bytes(g, g->self) + mp__group_share_bytes(g, m);
}

bool mp__group_done(const mp_group_t *g) {
    return g == NULL || g->done;
}

bool mp__group_member_alive(const mp_group_t *g, uint32_t m) {
    return g != NULL && m < g->n && is_alive(g, m);
}

void mp__group_result(const mp_group_t *g, mp_group_result_t *out) {
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (g == NULL)
        return;
    out->group_size = g->n - g->nfailed;
    out->peers_failed = g->nfailed;
    out->group_weight = 0;
    for (uint32_t m = 0; m < g->n; m++)
        if (is_alive(g, m))
            out->group_weight += g->w[m];
    /* gathered parts averaged over fewer than the members kept here */
    size_t fewer = 0;
    double kept = out->group_weight * (1.0 - 1e-9);
    for (uint32_t j = 0; j < g->n; j++) {
        if (j == g->self)
            continue;
        const uint8_t *st = g->gstate + g->gbase[j];
        for (uint32_t p = 0; p < g->nparts[j]; p++)
            if (st[p] == G_AVG && g->gwsum[g->gbase[j] + p] < kept)
                fewer += part_len(g, j, p);
    }
    size_t avg = g->averaged > fewer ? g->averaged - fewer : 0;
    out->fraction_averaged = g->count ? (double)avg / (double)g->count : 1.0;
    out->bytes_sent = g->bytes_sent;
    out->bytes_received = g->bytes_received;
}

void mp__group_holds(const mp_group_t *g, uint32_t m, uint8_t *sc,
                     size_t sc_cap, size_t *sc_len, uint8_t *ga, size_t ga_cap,
                     size_t *ga_len) {
    *sc_len = *ga_len = 0;
    if (g == NULL || m >= g->n || m == g->self)
        return;
    size_t ns = ((size_t)g->nparts[g->self] + 7) / 8;
    size_t ng = ((size_t)g->nparts[m] + 7) / 8;
    *sc_len = ns < sc_cap ? ns : sc_cap;
    *ga_len = ng < ga_cap ? ng : ga_cap;
    memset(sc, 0, *sc_len);
    memset(ga, 0, *ga_len);
    for (uint32_t p = 0; (size_t)p / 8 < *sc_len && p < g->nparts[g->self]; p++)
        if ((g->contrib[p] & bit(m)) || (g->pflags[p] & OWN_FINAL))
            sc[p / 8] |= (uint8_t)(1u << (p % 8));
    const uint8_t *st = g->gstate + g->gbase[m];
    for (uint32_t p = 0; (size_t)p / 8 < *ga_len && p < g->nparts[m]; p++)
        if (st[p] != G_PENDING)
            ga[p / 8] |= (uint8_t)(1u << (p % 8));
}

/* Part i, handed out to member m and not held by it (mp__group_on_have):
 * marked for re-sending (one more in *q) unless it was sent after upto
 * (then counted in *unsure). false: m's re-sends have reached cap. */
static bool have_redo(mp_group_t *g, uint32_t m, size_t i, uint64_t upto,
                      uint64_t cap, uint32_t *q, uint32_t *unsure) {
    if (g->stamp[i] > upto) {
        (*unsure)++;
        return true;
    }
    if (g->redo_total[m] + *q >= cap)
        return false;
    redo_flip(g, i);
    (*q)++;
    return true;
}

uint32_t mp__group_on_have(mp_group_t *g, uint64_t now_ms, uint32_t m,
                           const uint8_t *sc, size_t sc_len, const uint8_t *ga,
                           size_t ga_len, uint64_t upto, uint32_t *unsure) {
    *unsure = 0;
    if (g == NULL || m >= g->n || m == g->self || !is_alive(g, m) || g->closed)
        return 0;
    if (now_ms >= g->deadline) {
        close_all(g);
        return 0;
    }
    uint32_t q = 0;
    size_t base = g->rbase[m];
    const uint8_t *st = g->gstate + g->gbase[m];
    uint64_t cap = (uint64_t)MP_GROUP_REPEATS *
                   ((uint64_t)g->nparts[m] + g->nparts[g->self]);
    if (g->redo_total[m] >= cap)
        return 0;
    /* handed out: scatter parts below scat_next whose gather has not
     * arrived (the ones skipped were never sent), gather parts of
     * final_order below gat_next */
    for (uint32_t p = 0; p < g->scat_next[m] && p < g->nparts[m]; p++) {
        size_t i = base + p;
        if (st[p] != G_PENDING || held_bit(sc, sc_len, p) || redo_get(g, i))
            continue;
        if (!have_redo(g, m, i, upto, cap, &q, unsure))
            break;
    }
    base += g->nparts[m];
    for (uint32_t k = 0; k < g->gat_next[m]; k++) {
        uint32_t p = g->final_order[k];
        size_t i = base + p;
        if (held_bit(ga, ga_len, p) || redo_get(g, i))
            continue;
        if (!have_redo(g, m, i, upto, cap, &q, unsure))
            break;
    }
    g->redo_n[m] += q;
    g->redo_total[m] += q;
    if (q > 0)
        g->done = false; /* not closed: it was done, and is again once
                            these are handed out */
    return q;
}

void mp__group_stamp(mp_group_t *g, uint32_t dest, const mp_send_t *s,
                     uint64_t stamp) {
    if (g == NULL || dest >= g->n || dest == g->self || s == NULL)
        return;
    if (s->kind == MP_PART_SCATTER && s->share == dest &&
        s->part < g->nparts[dest])
        g->stamp[g->rbase[dest] + s->part] = stamp;
    else if (s->kind == MP_PART_GATHER && s->share == g->self &&
             s->part < g->nparts[g->self])
        g->stamp[g->rbase[dest] + g->nparts[dest] + s->part] = stamp;
}

void mp__group_heard(mp_group_t *g, uint64_t now_ms, uint32_t m) {
    if (g != NULL && !g->done && m < g->n && m != g->self && is_alive(g, m))
        g->heard[m] = now_ms;
}

bool mp__group_have_due(mp_group_t *g, uint64_t now_ms, uint32_t m) {
    if (g == NULL || g->done || m >= g->n || m == g->self || !is_alive(g, m) ||
        silence_limit(g, m) == 0 || now_ms < have_time(g, m))
        return false;
    g->have_at[m] = now_ms > 0 ? now_ms : 1;
    return true;
}

uint64_t mp__group_have_wakeup(const mp_group_t *g) {
    uint64_t t = UINT64_MAX;
    if (g == NULL || g->done)
        return t;
    for (uint32_t m = 0; m < g->n; m++) {
        if (m == g->self || !is_alive(g, m) || silence_limit(g, m) == 0)
            continue;
        uint64_t at = have_time(g, m);
        t = at < t ? at : t;
    }
    return t;
}

void mp__group_times(const mp_group_t *g, mp_group_times_t *out) {
    memset(out, 0, sizeof(*out));
    if (g != NULL)
        *out = g->times;
}

uint32_t mp__group_resent(const mp_group_t *g) {
    return g != NULL ? g->resent : 0;
}

void mp__group_pause(mp_group_t *g, uint64_t gap_ms) {
    if (g == NULL)
        return;
    for (uint32_t m = 0; m < g->n; m++)
        g->heard[m] = mp__add_sat_u64(g->heard[m], gap_ms);
}
