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

#define CALL_SLACK_MS 1000u

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

size_t nn_swarm_start(nn_swarm_t *s) {
    return it_start_swarm(s->peer, s->n, &s->cfg);
}

int nn_swarm_start_one(nn_swarm_t *s, size_t i, size_t from, const uint8_t *pub,
                       const uint8_t *sec, size_t expect) {
    it_peer_cfg_t c = s->cfg;
    c.index = i;
    c.expect_members = expect;
    snprintf(c.bootstrap, sizeof(c.bootstrap), "%s", s->peer[from].endpoint);
    if (pub != NULL) {
        memcpy(c.public_key, pub, 32);
        memcpy(c.secret_key, sec, 32);
    }
    return it_start(&s->peer[i], &c);
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
    /* the weight this vector now stands for (docs/DESIGN.md, grid keys) */
    if (r->err == MOSHPIT_OK && r->info.group_size > 0)
        s->w[i] = r->info.group_weight / r->info.group_size;
    return 0;
}

uint64_t nn_round(nn_swarm_t *s, const int *in, uint64_t seed_base) {
    uint64_t worst = 0;
    for (size_t i = 0; i < s->n; i++) {
        s->got[i] = 0;
        if (!s->peer[i].alive || (in != NULL && !in[i]))
            continue;
        uint64_t seed = seed_base ? seed_base + i : 0;
        IT_CHECK(nn_send(s, i, seed, seed ? it_weight(seed) : 0) == 0,
                 "cannot reach peer %zu", i);
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->peer[i].alive && (in == NULL || in[i]) &&
            nn_collect(s, i, 0) == 0 && s->res[i].call_ms > worst)
            worst = s->res[i].call_ms;
    return worst;
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

void nn_print_round(const nn_swarm_t *s, const char *name, int round) {
    size_t grouped = 0, got = 0;
    uint64_t worst = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->got[i]) {
            got++;
            grouped += s->res[i].info.group_size > 1;
            if (s->res[i].call_ms > worst)
                worst = s->res[i].call_ms;
        }
    printf("%s round %d: %zu/%zu in groups, longest call %llu ms\n", name,
           round, grouped, got, (unsigned long long)worst);
    fflush(stdout);
}
