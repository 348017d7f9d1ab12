/* SPDX-License-Identifier: MIT */
/*
 * test_int_op.c - averaging in the background with real processes on
 * loopback. Four peers (a group needs all four: min_group_size 4) start
 * their rounds with moshpit_average_start one after the other and compute
 * on other memory while polling the op. Peer 0 starts first and reports
 * before any other peer has started, so its op can only be live then: the
 * start returned before its round could end, a poll says ETIMEDOUT, and a
 * second start says EBUSY; it then computes until the round is over. Every
 * peer must end with the exact weighted mean (1e-5 relative) and the full
 * group. A second round mixes ops and blocking moshpit_average calls in one
 * group (the same round on the wire), a third runs them all as ops again.
 * In a fourth, peer 0 closes with its op live once the group has formed:
 * its values and the survivors' must each be an own value or a group mean
 * (never a partial sum), and the survivors' rounds end OK.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 4
#define COUNT 300000 /* several parts per share: rounds take a while */

#define BIG 2000000 /* a round long enough to close in the middle of */

/* mean[i] = weighted mean of the vectors of peers[from..N) (seeds,
 * weights) */
static void mean_of(double *mean, size_t from, const uint64_t *seeds,
                    const double *weights, float *tmp) {
    double wsum = 0;
    for (size_t i = 0; i < BIG; i++)
        mean[i] = 0;
    for (size_t p = from; p < N; p++) {
        it_fill(tmp, BIG, seeds[p]);
        wsum += weights[p];
        for (size_t i = 0; i < BIG; i++)
            mean[i] += weights[p] * tmp[i];
    }
    for (size_t i = 0; i < BIG; i++)
        mean[i] /= wsum;
}

static int near(float got, double want) {
    return fabs((double)got - want) <= 1e-5 * (fabs(want) + 1.0);
}

/* Peer 0 closes with its op live once its group of four has formed; the
 * others wait for their ops as usual. Every element of peer 0's values
 * must be its own value or the mean of all four (a part final before the
 * close); every element of a survivor its own value, the mean of all four
 * or the mean of the three survivors (parts peer 0 contributed to or not);
 * the survivors' rounds end OK within their bound. */
static void close_round(it_peer_t *peers, uint64_t *seeds, double *weights) {
    float *v = malloc(BIG * sizeof(float));
    float *own = malloc(BIG * sizeof(float));
    double *m4 = malloc(BIG * sizeof(double));
    double *m3 = malloc(BIG * sizeof(double));
    if (v == NULL || own == NULL || m4 == NULL || m3 == NULL) {
        IT_CHECK(0, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < N; i++) {
        seeds[i] = 9000 + i;
        weights[i] = it_weight(seeds[i]);
    }
    mean_of(m4, 0, seeds, weights, own);
    mean_of(m3, 1, seeds, weights, own);
    IT_CHECK(it_average_op_close_async(&peers[0], BIG, seeds[0], weights[0]) ==
                 0,
             "send");
    for (size_t i = 1; i < N; i++) {
        IT_CHECK(it_average_op_async(&peers[i], BIG, seeds[i], weights[i]) == 0,
                 "send");
        int32_t start, poll, second;
        IT_CHECK(it_wait_started(&peers[i], &start, &poll, &second, 20000) ==
                         0 &&
                     start == MOSHPIT_OK,
                 "close round: peer %zu did not start", i);
    }
    for (size_t i = 0; i < N; i++) {
        it_result_t res;
        int rc = it_collect(&peers[i], &res, v, BIG, 60000);
        IT_CHECK(rc == 0, "close round: peer %zu gave no result", i);
        if (rc != 0)
            continue;
        it_fill(own, BIG, seeds[i]);
        size_t n_own = 0, n4 = 0, n3 = 0, bad = 0;
        for (size_t k = 0; k < BIG; k++) {
            if (near(v[k], m4[k]))
                n4++;
            else if (v[k] == own[k])
                n_own++;
            else if (i > 0 && near(v[k], m3[k]))
                n3++;
            else
                bad++;
        }
        IT_CHECK(bad == 0,
                 "close round: peer %zu has %zu values that are "
                 "neither its own nor a group mean",
                 i, bad);
        if (i == 0) {
            IT_CHECK(res.err == MOSHPIT_ECLOSED || res.err == MOSHPIT_OK,
                     "closing peer: %s",
                     moshpit_strerror((moshpit_err_t)res.err));
        } else {
            IT_CHECK(res.err == MOSHPIT_OK, "survivor %zu: %s", i,
                     moshpit_strerror((moshpit_err_t)res.err));
            IT_CHECK(res.call_ms <= 40000 + 1000, "survivor %zu took %llu ms",
                     i, (unsigned long long)res.call_ms);
        }
        printf("close round: peer %zu %s, %zu own values, %zu means of 4, "
               "%zu means of 3 (group %u, failed %u)\n",
               i, moshpit_strerror((moshpit_err_t)res.err), n_own, n4, n3,
               res.info.group_size, res.info.peers_failed);
    }
out:
    free(v);
    free(own);
    free(m4);
    free(m3);
}

int main(void) {
    it_peer_t peers[N];
    uint64_t seeds[N];
    double weights[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = "it-op";
    cfg.group_size = N;
    cfg.min_group_size = N;
    cfg.matchmaking_ms = 20000;
    cfg.round_timeout_ms = 40000;
    cfg.notify_group = 1; /* the close round waits for the group to form */
    size_t up = it_start_swarm(peers, N, &cfg);
    IT_CHECK(up == N, "%zu of %d peers started and saw everyone", up, N);
    if (up != N)
        return 1;
    float *v = malloc(COUNT * sizeof(float));
    if (v == NULL)
        return 1;
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < N; i++) {
            seeds[i] = (uint64_t)(7000 + r * 100 + (int)i);
            weights[i] = it_weight(seeds[i]);
        }
        /* round 2: peers 1 and 3 block in moshpit_average instead */
        int op[N];
        for (size_t i = 0; i < N; i++)
            op[i] = r != 1 || i % 2 == 0;
        for (size_t i = 0; i < N; i++) {
            if (!op[i]) {
                IT_CHECK(it_average_async(&peers[i], COUNT, seeds[i],
                                          weights[i]) == 0,
                         "send");
                continue;
            }
            IT_CHECK(it_average_op_async(&peers[i], COUNT, seeds[i],
                                         weights[i]) == 0,
                     "send");
            int32_t start, poll, second;
            int rc = it_wait_started(&peers[i], &start, &poll, &second, 20000);
            IT_CHECK(rc == 0, "round %d peer %zu did not report its start", r,
                     i);
            if (rc != 0)
                continue;
            IT_CHECK(start == MOSHPIT_OK, "round %d peer %zu start: %s", r, i,
                     moshpit_strerror((moshpit_err_t)start));
            IT_CHECK(second == MOSHPIT_EBUSY,
                     "round %d peer %zu: a second start gave %s", r, i,
                     moshpit_strerror((moshpit_err_t)second));
            /* peer 0's group cannot form before the others start, which
             * they do only after this report */
            if (i == 0)
                IT_CHECK(poll == MOSHPIT_ETIMEDOUT,
                         "round %d: peer 0's first poll gave %s", r,
                         moshpit_strerror((moshpit_err_t)poll));
            else
                IT_CHECK(poll == MOSHPIT_ETIMEDOUT || poll == MOSHPIT_OK,
                         "round %d peer %zu: first poll %s", r, i,
                         moshpit_strerror((moshpit_err_t)poll));
        }
        double worst = 0;
        uint64_t steps0 = 0;
        for (size_t i = 0; i < N; i++) {
            it_result_t res;
            int rc = it_collect(&peers[i], &res, v, COUNT, 60000);
            IT_CHECK(rc == 0, "round %d peer %zu gave no result", r, i);
            if (rc != 0)
                continue;
            IT_CHECK(res.err == MOSHPIT_OK, "round %d peer %zu: %s", r, i,
                     moshpit_strerror((moshpit_err_t)res.err));
            IT_CHECK(res.info.group_size == N && res.info.peers_failed == 0 &&
                         res.info.fraction_averaged == 1.0,
                     "round %d peer %zu: group %u failed %u fraction %g", r, i,
                     res.info.group_size, res.info.peers_failed,
                     res.info.fraction_averaged);
            double d = it_dev_from_mean(v, COUNT, seeds, weights, N);
            IT_CHECK(d <= 1e-5, "round %d peer %zu deviates %g from the mean",
                     r, i, d);
            worst = d > worst ? d : worst;
            if (i == 0)
                steps0 = res.work_steps;
            if (op[i] && i == 0)
                IT_CHECK(res.work_steps > 0,
                         "round %d: peer 0 computed nothing while its op ran",
                         r);
        }
        printf("round %d (%s): max relative deviation %.3g, peer 0 computed "
               "%llu steps while its round ran\n",
               r + 1, r == 1 ? "ops and blocking calls" : "all ops", worst,
               (unsigned long long)steps0);
    }
    free(v);
    close_round(peers, seeds, weights);
    for (size_t i = 0; i < N; i++)
        it_stop(&peers[i]);
    if (it_failures) {
        fprintf(stderr, "test_int_op: %d failures\n", it_failures);
        return 1;
    }
    printf("test_int_op: ok\n");
    return 0;
}
