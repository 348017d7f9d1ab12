/* SPDX-License-Identifier: MIT */
/*
 * swarm.c - rounds of the peers of a netns test (see swarm.h): sending
 * commands, collecting and checking results, and measuring how far the
 * peers still are from each other and from the mean they should reach.
 */
#include "swarm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CALL_SLACK_MS 1000u

it_peer_cfg_t nn_config(const char *swarm, uint32_t group_size,
                        uint32_t matchmaking_ms, uint32_t peer_timeout_ms,
                        uint32_t round_timeout_ms) {
    it_peer_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.swarm = swarm;
    c.group_size = group_size;
    c.matchmaking_ms = matchmaking_ms;
    c.peer_timeout_ms = peer_timeout_ms;
    c.round_timeout_ms = round_timeout_ms;
    c.ready_timeout_ms = 60000; /* 16 peers dialling over lossy links */
    return c;
}

int nn_swarm_init(nn_swarm_t *s, const it_peer_cfg_t *cfg, size_t n,
                  size_t count) {
    memset(s, 0, sizeof(*s));
    s->cfg = *cfg;
    nn_use(&s->cfg);
    s->n = n;
    s->count = count;
    s->bound_ms =
        (cfg->round_timeout_ms ? cfg->round_timeout_ms : 30000) + CALL_SLACK_MS;
    for (size_t i = 0; i < n; i++) {
        s->v[i] = calloc(count, sizeof(float));
        s->w[i] = 1.0;
        if (s->v[i] == NULL)
            return -1;
    }
    return 0;
}

int nn_swarm_start(nn_swarm_t *s) {
    size_t up = it_start_swarm(s->peer, s->n, &s->cfg);
    IT_CHECK(up == s->n, "%zu of %zu peers started and saw everyone", up, s->n);
    return up == s->n ? 0 : -1;
}

int nn_swarm_start_one(nn_swarm_t *s, size_t i, size_t from, const uint8_t *pub,
                       const uint8_t *sec, size_t expect) {
    it_peer_cfg_t c = s->cfg;
    c.index = i;
    c.expect_members = expect;
    snprintf(c.bootstrap, sizeof(c.bootstrap), "%s",
             from == i ? "" : s->peer[from].endpoint);
    if (pub != NULL) {
        memcpy(c.public_key, pub, 32);
        memcpy(c.secret_key, sec, 32);
    }
    return it_start(&s->peer[i], &c);
}

int nn_swarm_end(nn_swarm_t *s) {
    nn_swarm_free(s);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}

size_t nn_wait_all(nn_swarm_t *s, size_t n, int timeout_ms) {
    uint64_t end = it_now_ms() + (uint64_t)timeout_ms;
    size_t ok = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!s->peer[i].alive)
            continue;
        uint64_t now = it_now_ms();
        long m =
            it_wait_members(&s->peer[i], n, now < end ? (int)(end - now) : 1);
        IT_CHECK(m == (long)n, "peer %zu sees %ld members, not %zu", i, m, n);
        ok += m == (long)n;
    }
    return ok;
}

void nn_swarm_free(nn_swarm_t *s) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->peer[i].alive)
            it_stop(&s->peer[i]);
        free(s->v[i]);
        s->v[i] = NULL;
    }
}

int nn_send(nn_swarm_t *s, size_t i, uint64_t seed, double w) {
    if (seed != 0) {
        s->seed[i] = seed;
        s->w0[i] = w;
        return it_average_async(&s->peer[i], s->count, seed, w);
    }
    return it_average_again_async(&s->peer[i], s->count, s->w[i]);
}

int nn_collect(nn_swarm_t *s, size_t i, int allow_dead) {
    it_result_t *r = &s->res[i];
    s->got[i] = 0;
    s->gid[i] = 0;
    /* beyond the bound plus a margin for a loaded machine: a hang */
    if (it_collect(&s->peer[i], r, s->v[i], s->count,
                   (int)s->bound_ms + 15000) != 0) {
        IT_CHECK(allow_dead, "peer %zu gave no result within %u ms (hang?)", i,
                 s->bound_ms + 15000);
        return -1;
    }
    s->got[i] = 1;
    IT_CHECK(r->err == MOSHPIT_OK, "peer %zu: %s", i,
             moshpit_strerror((moshpit_err_t)r->err));
    IT_CHECK(r->call_ms <= s->bound_ms, "peer %zu: call took %llu ms > %u", i,
             (unsigned long long)r->call_ms, s->bound_ms);
    if (r->call_ms > s->worst_call_ms)
        s->worst_call_ms = r->call_ms;
    if (r->info.group_size > 1) {
        s->gid[i] = r->info.round_id;
        s->rounds_grouped++;
    } else {
        s->rounds_alone++;
    }
    /* the weight this vector now stands for (docs/AGGREGATION.md) */
    if (r->err == MOSHPIT_OK && r->info.group_size > 0)
        s->w[i] = r->info.group_weight / r->info.group_size;
    return 0;
}

void nn_round_send(nn_swarm_t *s, const int *in, uint64_t seed_base) {
    for (size_t i = 0; i < s->n; i++) {
        s->got[i] = 0;
        if (!s->peer[i].alive || (in != NULL && !in[i]))
            continue;
        uint64_t seed = seed_base ? seed_base + i : s->next_seed[i];
        double w = seed_base ? it_weight(seed) : s->next_weight[i];
        s->next_seed[i] = 0;
        IT_CHECK(nn_send(s, i, seed, w) == 0, "cannot reach peer %zu", i);
    }
}

uint64_t nn_round_collect(nn_swarm_t *s, const int *in) {
    uint64_t worst = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->peer[i].alive && (in == NULL || in[i]) &&
            nn_collect(s, i, 0) == 0 && s->res[i].call_ms > worst)
            worst = s->res[i].call_ms;
    return worst;
}

uint64_t nn_round(nn_swarm_t *s, const int *in, uint64_t seed_base) {
    nn_round_send(s, in, seed_base);
    return nn_round_collect(s, in);
}

static int member(const nn_swarm_t *s, const int *in, size_t i) {
    return s->peer[i].alive && (in == NULL || in[i]);
}

double nn_spread(const nn_swarm_t *s, const int *in) {
    double spread = 0, scale = 0;
    size_t first = s->n;
    for (size_t i = 0; i < s->n && first == s->n; i++)
        if (member(s, in, i))
            first = i;
    if (first == s->n)
        return 0;
    for (size_t k = 0; k < s->count; k++) {
        double lo = s->v[first][k], hi = lo;
        for (size_t i = first + 1; i < s->n; i++)
            if (member(s, in, i)) {
                lo = fmin(lo, s->v[i][k]);
                hi = fmax(hi, s->v[i][k]);
            }
        spread = fmax(spread, hi - lo);
        scale = fmax(scale, fabs(s->v[first][k]));
    }
    return scale > 0 ? spread / scale : spread;
}

double nn_dev_from_mean(const nn_swarm_t *s, const int *in, const int *from) {
    uint64_t seeds[NN_MAX_PEERS];
    double w[NN_MAX_PEERS], worst = 0;
    size_t k = 0;
    for (size_t j = 0; j < s->n; j++)
        if (from == NULL ? s->peer[j].alive : from[j] != 0) {
            seeds[k] = s->seed[j];
            w[k++] = s->w0[j];
        }
    for (size_t i = 0; i < s->n; i++)
        if (member(s, in, i))
            worst =
                fmax(worst, it_dev_from_mean(s->v[i], s->count, seeds, w, k));
    return worst;
}

static int popcount(unsigned x) {
    int c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
}

/* Weighted mean of element k over the subset mask of the fresh vectors x
 * (weights w) of the candidates. */
static double subset_mean(float *const *x, const double *w, unsigned mask,
                          size_t k) {
    double acc = 0, ws = 0;
    for (unsigned c = 0; mask >> c; c++)
        if (mask >> c & 1u) {
            acc += w[c] * x[c][k];
            ws += w[c];
        }
    return acc / ws;
}

size_t nn_unexplained(const nn_swarm_t *s, const int *in, size_t i,
                      size_t *counted) {
    size_t who[NN_MAX_PEERS], nc = 0, me = 0, bad = 0;
    float *x[12];
    double w[12], scale = 0;
    unsigned group = 0;
    for (size_t j = 0; j < s->n && nc < 12; j++)
        if (j == i || (in[j] && s->seed[j] != 0)) {
            if (j == i)
                me = nc;
            x[nc] = malloc(s->count * sizeof(float));
            if (x[nc] == NULL)
                return s->count;
            it_fill(x[nc], s->count, s->seed[j]);
            w[nc] = s->w0[j];
            if (j == i || (s->gid[i] != 0 && s->gid[j] == s->gid[i]))
                group |= 1u << nc;
            who[nc++] = j;
        }
    /* every subset containing me, largest first */
    unsigned masks[1u << 12], nm = 0;
    for (int size = (int)nc; size >= 2; size--)
        for (unsigned m = 0; m < 1u << nc; m++)
            if ((m >> me & 1u) && popcount(m) == size && m != group)
                masks[nm++] = m;
    for (size_t k = 0; k < s->count; k++)
        scale = fmax(scale, fabs(x[me][k]));
    const double tol = 1e-5 * (scale > 0 ? scale : 1);
    for (size_t k = 0; k < s->count; k++) {
        double v = s->v[i][k];
        if (v == x[me][k])
            continue;
        unsigned hit = 0;
        if (popcount(group) > 1 && fabs(v - subset_mean(x, w, group, k)) <= tol)
            hit = group;
        for (unsigned t = 0; t < nm && hit == 0; t++)
            if (fabs(v - subset_mean(x, w, masks[t], k)) <= tol)
                hit = masks[t];
        if (hit == 0)
            bad++;
        else if (counted != NULL)
            for (size_t c = 0; c < nc; c++)
                counted[who[c]] += hit >> c & 1u;
    }
    for (size_t c = 0; c < nc; c++)
        free(x[c]);
    return bad;
}

void nn_print_round(const nn_swarm_t *s, const char *name, int round) {
    size_t grouped = 0, got = 0, dropped = 0;
    uint64_t worst = 0;
    double least = 1;
    for (size_t i = 0; i < s->n; i++)
        if (s->got[i]) {
            const moshpit_round_t *in = &s->res[i].info;
            got++;
            if (in->group_size > 1) {
                grouped++;
                least = in->fraction_averaged < least ? in->fraction_averaged
                                                      : least;
            }
            dropped += in->peers_failed;
            if (s->res[i].call_ms > worst)
                worst = s->res[i].call_ms;
        }
    printf("%s round %d: %zu/%zu in groups, %zu members dropped, least "
           "fraction averaged %.3f, longest call %llu ms\n",
           name, round, grouped, got, dropped, least,
           (unsigned long long)worst);
    fflush(stdout);
}

int nn_nat_two_routers(void) {
    const size_t nat0[] = {2, 3, 4, 5}, nat1[] = {6, 7};
    IT_CHECK(nn_nat(0, nat0, 4) == 0, "nat 0");
    IT_CHECK(nn_nat(1, nat1, 2) == 0, "nat 1");
    nn_link_t link = {.delay_us = 25000};
    for (size_t i = 0; i < 8; i++)
        IT_CHECK(nn_link(i, &link) == 0, "link of peer %zu", i);
    return it_failures ? -1 : 0;
}

int nn_nat_begin(const char *swarm, uint32_t group_size, uint32_t dims,
                 it_peer_cfg_t *cfg) {
    char why[200];
    if (!nn_can_delay(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        return NN_SKIP;
    }
    if (nn_nat_two_routers() != 0)
        return 1;
    *cfg = nn_config(swarm, group_size, 3000, 2000, 15000);
    cfg->grid_dims = dims;
    cfg->grid = 1;
    cfg->first_position = 0;
    cfg->log_dir = getenv("NN_LOG_DIR");
    return 0;
}

int nn_nat_start_grid(nn_swarm_t *s, const int64_t pos[8]) {
    uint64_t t0 = it_now_ms();
    for (size_t i = 0; i < 8; i++) {
        s->cfg.grid_position = pos[i];
        IT_CHECK(nn_swarm_start_one(s, i, 0, NULL, NULL, 1) == 0,
                 "peer %zu did not start", i);
    }
    return nn_nat_formed(s, t0);
}

int nn_nat_formed(nn_swarm_t *s, uint64_t t0) {
    size_t seen = nn_wait_all(s, 8, 60000);
    printf("formation: %zu of %d see all %d after %llu ms\n", seen, 8, 8,
           (unsigned long long)(it_now_ms() - t0));
    if (seen != 8)
        return -1;
    for (size_t i = 2; i < 8; i++)
        IT_CHECK(it_wait_log(&s->peer[i], "outbound-only", 10000) >= 1,
                 "NAT'd peer %zu never ran outbound-only", i);
    return 0;
}

size_t nn_wait_exact(nn_swarm_t *s, size_t n, int timeout_ms) {
    uint64_t end = it_now_ms() + (uint64_t)timeout_ms;
    size_t ok = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!s->peer[i].alive)
            continue;
        long m = -1;
        while ((m = it_wait_members(&s->peer[i], n, 1000)) != (long)n &&
               it_now_ms() < end)
            usleep(200000); /* polls: it_wait_members returns above n */
        IT_CHECK(m == (long)n, "peer %zu sees %ld members, not %zu", i, m, n);
        ok += m == (long)n;
    }
    return ok;
}
