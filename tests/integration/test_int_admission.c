/* SPDX-License-Identifier: MIT */
/*
 * test_int_admission.c - every admission mode on real processes: three
 * insiders form a swarm, then a newcomer dials the first of them.
 *   - open swarm: a stranger with its own identity is admitted (all four
 *     average exactly); a peer of another swarm name is not;
 *   - swarm_secret: a peer with the wrong secret is not admitted;
 *   - authorized_keys: an identity outside the list is not admitted;
 *   - all three at once (plus certificates): a newcomer missing any one of
 *     secret, certificate or list entry is not admitted, one with all of
 *     them is (the modes add up, none replaces another).
 * Certificates alone are tested in test_int_cert.c. Pass rule for a
 * refused newcomer: it never becomes a member of anyone (members stays 3
 * for the insiders, 1 for it), its round ends alone with its values
 * untouched, and the insiders' concurrent round is the exact weighted mean
 * of the three of them. An admitted newcomer: everyone counts 4 members
 * and the round of all four is exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define COUNT 50021

static void base(it_peer_cfg_t *c, const char *swarm) {
    memset(c, 0, sizeof(*c));
    c->swarm = swarm;
    c->group_size = 4;
    c->matchmaking_ms = 4000;
    c->round_timeout_ms = 20000;
}

/* in[0..3): the insiders' configs (each may have its own identity);
 * out: the newcomer's. admitted: whether it must get in. */
static void run_case(const char *name, it_peer_cfg_t *in, it_peer_cfg_t *out,
                     int admitted) {
    it_peer_t p[4];
    uint64_t seeds[4];
    double w[4];
    float *v = malloc(COUNT * sizeof(float));
    float *want = malloc(COUNT * sizeof(float));
    size_t n = admitted ? 4 : 3; /* who averages together */
    for (int i = 0; i < 3; i++) {
        in[i].expect_members = 3;
        if (i == 0)
            in[i].bootstrap[0] = '\0';
        else
            snprintf(in[i].bootstrap, sizeof(in[i].bootstrap), "%s",
                     p[0].endpoint);
        if (it_start_nowait(&p[i], &in[i]) != 0) {
            IT_CHECK(0, "%s: insider %d did not start", name, i);
            for (int j = 0; j < i; j++)
                it_kill(&p[j]);
            free(v);
            free(want);
            return;
        }
    }
    for (int i = 0; i < 3; i++)
        IT_CHECK(it_wait_ready(&p[i], 25000) == 3, "%s: insider %d not ready",
                 name, i);
    snprintf(out->bootstrap, sizeof(out->bootstrap), "%s", p[0].endpoint);
    out->expect_members = admitted ? 4 : 1;
    IT_CHECK(it_start(&p[3], out) == 0, "%s: newcomer did not start", name);
    if (admitted)
        for (int i = 0; i < 3; i++)
            IT_CHECK(it_wait_members(&p[i], 4, 10000) == 4,
                     "%s: insider %d does not see the newcomer", name, i);

    /* everybody averages at once */
    for (int i = 0; i < 4; i++) {
        seeds[i] = 70 + (uint64_t)i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&p[i], COUNT, seeds[i], w[i]) == 0, "send");
    }
    for (size_t i = 0; i < n; i++) {
        it_result_t r;
        IT_CHECK(it_collect(&p[i], &r, v, COUNT, 40000) == 0, "%s: collect %zu",
                 name, i);
        IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == n,
                 "%s: peer %zu err %d group %u", name, i, r.err,
                 r.info.group_size);
        double d = it_dev_from_mean(v, COUNT, seeds, w, n);
        IT_CHECK(d <= 1e-5, "%s: peer %zu deviates %g", name, i, d);
    }
    if (!admitted) {
        it_result_t r;
        IT_CHECK(it_collect(&p[3], &r, v, COUNT, 40000) == 0,
                 "%s: collect newcomer", name);
        it_fill(want, COUNT, seeds[3]);
        IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == 1,
                 "%s: refused newcomer err %d group %u", name, r.err,
                 r.info.group_size);
        IT_CHECK(memcmp(v, want, COUNT * sizeof(float)) == 0,
                 "%s: refused newcomer's values changed", name);
    }
    for (int i = 0; i < 3; i++) {
        long m = it_members(&p[i], 5000);
        IT_CHECK(m == (long)n, "%s: insider %d counts %ld members", name, i, m);
    }
    long m = it_members(&p[3], 5000);
    IT_CHECK(m == (admitted ? 4 : 1), "%s: newcomer counts %ld members", name,
             m);
    printf("%s: newcomer %s, %zu peers exact\n", name,
           admitted ? "admitted" : "kept out", n);
    for (int i = 0; i < 4; i++)
        it_stop(&p[i]);
    free(v);
    free(want);
}

int main(void) {
    it_peer_cfg_t in[3], out;

    /* open swarm: anyone with the endpoint and the swarm name gets in */
    for (int i = 0; i < 3; i++)
        base(&in[i], "it-open");
    base(&out, "it-open");
    IT_CHECK(moshpit_keypair(out.public_key, out.secret_key) == MOSHPIT_OK,
             "keypair");
    run_case("open", in, &out, 1);
    base(&out, "it-open-other");
    run_case("open, other swarm", in, &out, 0);

    /* swarm_secret */
    for (int i = 0; i < 3; i++) {
        base(&in[i], "it-admission");
        memset(in[i].swarm_secret, 0x5a, 32);
    }
    base(&out, "it-admission");
    memset(out.swarm_secret, 0x5b, 32);
    run_case("swarm_secret", in, &out, 0);

    /* authorized_keys: three known identities, an outsider with its own */
    uint8_t keys[5][32], secs[5][32];
    for (int i = 0; i < 5; i++)
        IT_CHECK(moshpit_keypair(keys[i], secs[i]) == MOSHPIT_OK, "keypair");
    for (int i = 0; i < 3; i++) {
        base(&in[i], "it-authorized");
        in[i].authorized = (const uint8_t(*)[32])keys;
        in[i].authorized_n = 3;
        memcpy(in[i].public_key, keys[i], 32);
        memcpy(in[i].secret_key, secs[i], 32);
    }
    base(&out, "it-authorized");
    run_case("authorized_keys", in, &out, 0);

    /* all modes at once: secret, certificate and list. keys[3] is on the
     * list, keys[4] is not. */
    uint8_t apub[32], asec[64];
    IT_CHECK(moshpit_authority_keypair(apub, asec) == MOSHPIT_OK, "authority");
    uint64_t until = (uint64_t)time(NULL) + 3600;
    uint8_t certs[5][MOSHPIT_CERT_BYTES];
    for (int i = 0; i < 5; i++)
        IT_CHECK(moshpit_cert_issue(asec, keys[i], "it-all", until, certs[i]) ==
                     MOSHPIT_OK,
                 "issue");
    for (int i = 0; i < 3; i++) {
        base(&in[i], "it-all");
        memset(in[i].swarm_secret, 0x6c, 32);
        in[i].authorized = (const uint8_t(*)[32])keys;
        in[i].authorized_n = 4;
        memcpy(in[i].public_key, keys[i], 32);
        memcpy(in[i].secret_key, secs[i], 32);
        memcpy(in[i].authority_key, apub, 32);
        memcpy(in[i].cert, certs[i], MOSHPIT_CERT_BYTES);
    }
    it_peer_cfg_t full = in[0]; /* keys[3], with everything */
    memcpy(full.public_key, keys[3], 32);
    memcpy(full.secret_key, secs[3], 32);
    memcpy(full.cert, certs[3], MOSHPIT_CERT_BYTES);

    out = full;
    memset(out.swarm_secret, 0x6d, 32);
    run_case("all modes, wrong secret", in, &out, 0);
    out = full;
    memset(out.authority_key, 0, 32);
    memset(out.cert, 0, MOSHPIT_CERT_BYTES);
    run_case("all modes, no certificate", in, &out, 0);
    out = full; /* keys[4]: certified, knows the secret, not on the list */
    memcpy(out.public_key, keys[4], 32);
    memcpy(out.secret_key, secs[4], 32);
    memcpy(out.cert, certs[4], MOSHPIT_CERT_BYTES);
    run_case("all modes, not on the list", in, &out, 0);
    run_case("all modes, everything right", in, &full, 1);

    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
