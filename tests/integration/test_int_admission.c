/* SPDX-License-Identifier: MIT */
/*
 * test_int_admission.c - admission on real processes. Three peers share a
 * swarm_secret; an intruder with the wrong secret dials them. Then three
 * peers restrict the swarm to their authorized_keys; an outsider with its
 * own key dials them. Pass rule, both cases: the intruder never becomes a
 * member of anyone (members stays 3 for the insiders, 1 for it), its round
 * ends alone with its values untouched, and the insiders' concurrent round
 * is the exact weighted mean of the three of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define COUNT 50021

static void scenario(const char *name, it_peer_cfg_t *in, it_peer_cfg_t *out) {
    it_peer_t p[4];
    uint64_t seeds[3];
    double w[3];
    float *v = malloc(COUNT * sizeof(float));
    float *want = malloc(COUNT * sizeof(float));
    IT_CHECK(it_start_swarm(p, 3, in) == 3, "%s: insiders not ready", name);
    snprintf(out->bootstrap, sizeof(out->bootstrap), "%s", p[0].endpoint);
    out->expect_members = 1;
    IT_CHECK(it_start(&p[3], out) == 0, "%s: intruder did not start", name);

    /* everybody averages at once; the intruder must stay alone */
    for (int i = 0; i < 3; i++) {
        seeds[i] = 70 + (uint64_t)i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&p[i], COUNT, seeds[i], w[i]) == 0, "send");
    }
    IT_CHECK(it_average_async(&p[3], COUNT, 99, 1.0) == 0, "send");
    for (int i = 0; i < 3; i++) {
        it_result_t r;
        IT_CHECK(it_collect(&p[i], &r, v, COUNT, 40000) == 0, "collect %d", i);
        IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == 3,
                 "%s: insider %d err %d group %u", name, i, r.err,
                 r.info.group_size);
        double d = it_dev_from_mean(v, COUNT, seeds, w, 3);
        IT_CHECK(d <= 1e-5, "%s: insider %d deviates %g", name, i, d);
    }
    it_result_t r;
    IT_CHECK(it_collect(&p[3], &r, v, COUNT, 40000) == 0, "collect intruder");
    it_fill(want, COUNT, 99);
    IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == 1,
             "%s: intruder err %d group %u", name, r.err, r.info.group_size);
    IT_CHECK(memcmp(v, want, COUNT * sizeof(float)) == 0,
             "%s: intruder's values changed", name);
    for (int i = 0; i < 3; i++) {
        long m = it_members(&p[i], 5000);
        IT_CHECK(m == 3, "%s: insider %d counts %ld members", name, i, m);
    }
    long m = it_members(&p[3], 5000);
    IT_CHECK(m == 1, "%s: intruder counts %ld members", name, m);
    printf("%s: intruder kept out, insiders exact\n", name);
    for (int i = 0; i < 4; i++)
        it_stop(&p[i]);
    free(v);
    free(want);
}

int main(void) {
    it_peer_cfg_t in, out;
    memset(&in, 0, sizeof(in));
    in.swarm = "it-admission";
    in.group_size = 4;
    in.matchmaking_ms = 4000;
    in.round_timeout_ms = 20000;
    out = in;
    memset(in.swarm_secret, 0x5a, 32);
    memset(out.swarm_secret, 0x5b, 32);
    scenario("swarm_secret", &in, &out);

    /* authorized_keys: three known identities, an outsider with its own */
    uint8_t keys[3][32], secs[3][32];
    for (int i = 0; i < 3; i++)
        IT_CHECK(moshpit_keypair(keys[i], secs[i]) == MOSHPIT_OK, "keypair");
    memset(&in, 0, sizeof(in));
    in.swarm = "it-authorized";
    in.group_size = 4;
    in.matchmaking_ms = 4000;
    in.round_timeout_ms = 20000;
    in.authorized = (const uint8_t(*)[32])keys;
    in.authorized_n = 3;
    out = in;
    out.authorized = NULL;
    out.authorized_n = 0;
    /* each insider needs its own identity: give it through a fresh cfg */
    it_peer_t p[4];
    uint64_t seeds[3];
    double w[3];
    float *v = malloc(COUNT * sizeof(float));
    in.expect_members = 3;
    for (int i = 0; i < 3; i++) {
        memcpy(in.public_key, keys[i], 32);
        memcpy(in.secret_key, secs[i], 32);
        if (i == 1)
            snprintf(in.bootstrap, sizeof(in.bootstrap), "%s", p[0].endpoint);
        IT_CHECK(it_start_nowait(&p[i], &in) == 0, "authorized %d", i);
    }
    for (int i = 0; i < 3; i++)
        IT_CHECK(it_wait_ready(&p[i], 25000) == 3, "authorized %d not ready",
                 i);
    snprintf(out.bootstrap, sizeof(out.bootstrap), "%s", p[0].endpoint);
    out.expect_members = 1;
    IT_CHECK(it_start(&p[3], &out) == 0, "outsider did not start");
    for (int i = 0; i < 3; i++) {
        seeds[i] = 170 + (uint64_t)i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&p[i], COUNT, seeds[i], w[i]) == 0, "send");
    }
    IT_CHECK(it_average_async(&p[3], COUNT, 199, 1.0) == 0, "send");
    for (int i = 0; i < 3; i++) {
        it_result_t r;
        IT_CHECK(it_collect(&p[i], &r, v, COUNT, 40000) == 0, "collect");
        IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == 3,
                 "authorized %d err %d group %u", i, r.err, r.info.group_size);
        double d = it_dev_from_mean(v, COUNT, seeds, w, 3);
        IT_CHECK(d <= 1e-5, "authorized %d deviates %g", i, d);
        IT_CHECK(it_members(&p[i], 5000) == 3, "authorized %d members", i);
    }
    it_result_t r;
    IT_CHECK(it_collect(&p[3], &r, v, COUNT, 40000) == 0, "collect outsider");
    IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == 1,
             "outsider err %d group %u", r.err, r.info.group_size);
    IT_CHECK(it_members(&p[3], 5000) == 1, "outsider counts members");
    printf("authorized_keys: outsider kept out, insiders exact\n");
    for (int i = 0; i < 4; i++)
        it_stop(&p[i]);
    free(v);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
