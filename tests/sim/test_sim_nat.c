/* SPDX-License-Identifier: MIT */
/*
 * test_sim_nat.c - swarms of more than 256 peers, most of them
 * outbound-only (behind NAT), in the simulator (tests/sim/moshsim.c: every
 * peer runs the library's round machine, matchmakers included). JOINs go
 * to the matchmaker of their line's merge key (docs/DESIGN.md, "Exact
 * means over d > 1 rounds behind NAT"); when more than 128 callers
 * would share a merge key, it splits into 2^sl shards of about 64 to 128
 * (mp__rnd_merge_shards), each at its own matchmaker, so none holds more
 * than its 256 pending JOINs.
 *
 * Cases (balanced positions, full grids, weights 1, 16 floats, no faults):
 *   - 512 peers, M = 8, d = 3 (8 x 8 x 8), 448 of them (7/8) outbound-only;
 *   - 1,000 peers, M = 10, d = 3 (10 x 10 x 10), 800 (4/5) outbound-only;
 *   - 81 peers, M = 3, d = 4 (3^4, no shards), 60 outbound-only;
 *   - 4,096 peers, M = 8, d = 4 (8^4), 3,686 (9/10) outbound-only.
 * Pass rule, per round of one cycle of d rounds: no call alone or hung
 * (one matchmaker of 512 JOINs answers ALONE to all beyond 256, and those
 * keep their line means), every group holds a member that reduces (the
 * engine could not connect one that does not), groups of at most
 * MP_GROUP_MAX members, above 256 peers the first round spread over more
 * than one matchmaker; after d rounds every peer within 1e-5 of the
 * initial mean (errmax; values standard normal). Without the shards the
 * first round of 512 has 256 peers alone and the mean after 3 rounds is
 * off by 0.71; with round 2 of d = 4 merging lines that agree on the
 * coordinate still to average (the rule before) it is off by 0.036
 * (81 peers) and 0.0072 (4,096).
 *
 * No sleeps, no wall clock; exit status nonzero on any failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "sim/moshsim.h"

#include "test_util.h"

static void run(uint32_t n, uint32_t m, uint32_t d, uint32_t outbound,
                uint64_t seed) {
    moshsim_cfg_t c;
    moshsim_cfg_init(&c);
    c.peers = n;
    c.group_size = m;
    c.dims = d;
    c.seed = seed;
    c.outbound = outbound;
    moshsim_t *s = moshsim_new(&c);
    CHECK(s != NULL, "moshsim_new");
    if (s == NULL)
        return;
    uint32_t *mms = malloc(n * sizeof *mms);
    for (uint32_t r = 1; r <= d; r++) {
        moshsim_stats_t st;
        moshsim_round(s, &st);
        /* distinct matchmakers that answered this round */
        size_t nmm = 0;
        for (uint32_t q = 0; q < n; q++) {
            uint32_t mm = moshsim_last_call(s, q)->matchmaker;
            bool seen = mm == MOSHSIM_NONE;
            for (size_t i = 0; i < nmm && !seen; i++)
                seen = mms[i] == mm;
            if (!seen)
                mms[nmm++] = mm;
        }
        printf("nat %u peers (%u outbound-only), M %u, d %u, round %u: %u "
               "groups (%u to %u members, mean %.1f), %zu matchmakers, %u "
               "alone, %u without a reducer, max error %.3g\n",
               n, outbound, m, d, r, st.groups, st.min_size, st.max_size,
               st.mean_size, nmm, st.alone, st.unreduced, st.errmax);
        CHECK(st.called == n && st.hung == 0, "round %u: %u called, %u hung", r,
              st.called, st.hung);
        CHECK(st.alone == 0, "%u peers round %u: %u alone", n, r, st.alone);
        CHECK(st.unreduced == 0, "round %u: %u groups without a reducer", r,
              st.unreduced);
        CHECK(st.groups > 0 && st.max_size <= MP_GROUP_MAX,
              "round %u: %u groups, largest %u", r, st.groups, st.max_size);
        if (r == 1 && n > 256)
            CHECK(nmm > 1, "first round: one matchmaker for %u peers", n);
        if (r == d)
            CHECK(st.errmax <= 1e-5, "%u peers: max error %.3g after %u rounds",
                  n, st.errmax, d);
    }
    free(mms);
    moshsim_free(s);
}

int main(void) {
    run(512, 8, 3, 448, 11);
    run(1000, 10, 3, 800, 12);
    run(81, 3, 4, 60, 13);
    run(4096, 8, 4, 3686, 14);
    return test_summary("test_sim_nat");
}
