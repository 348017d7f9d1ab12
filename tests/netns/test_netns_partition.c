/* SPDX-License-Identifier: MIT */
/*
 * test_netns_partition.c - scenario 4 of the netns test bed: 8 peers; the
 * bridge drops every packet between peers 0-3 and peers 4-7 for 10 s,
 * then the partition heals.
 *
 * Config: group_size 8, grid_dims 1 (one group key, so whoever can reach
 * whom groups together), matchmaking_ms 2000, peer_timeout_ms 3000,
 * round_timeout_ms 10000; vectors of 131072 floats. Each peer starts from
 * its own vector; the first round starts with the partition, later rounds
 * average again what the last left (weight group_weight / group_size).
 *
 * Pass rule:
 * - every call of every round returns MOSHPIT_OK within round_timeout_ms
 *   + 1 s, during the partition and after;
 * - no round's group spans the cut;
 * - during the partition each side averages inside itself: by the end of
 *   the 10 s every peer has been in a group, and every peer is within
 *   1e-5 relative of the weighted mean of its side's initial vectors;
 * - after healing, every peer sees all 8 members again within 60 s, and
 *   within 5 rounds every peer is within 1e-5 relative of the global
 *   weighted mean of the initial vectors.
 */
#include <stdio.h>
#include <stdlib.h>

#include "swarm.h"

#define N 8
#define COUNT 131072
#define PARTITION_MS 10000
#define MERGE_ROUNDS 5

/* no round id is shared by peers on both sides */
static void check_no_crossing(const nn_swarm_t *s, const int *side) {
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            IT_CHECK(s->gid[i] == 0 || s->gid[i] != s->gid[j] ||
                         side[i] == side[j],
                     "peers %zu and %zu averaged across the cut", i, j);
}

int main(void) {
    nn_open(N);
    it_peer_cfg_t cfg = nn_config("nn-partition", N, 2000, 3000, 10000);
    cfg.grid_dims = 1;
    cfg.log_dir = getenv("NN_LOG_DIR");
    nn_swarm_t s;
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0 || nn_swarm_start(&s) != 0)
        return 1;
    int side[N], a[N], b[N], grouped[N] = {0};
    for (size_t i = 0; i < N; i++) {
        side[i] = i < N / 2;
        a[i] = side[i];
        b[i] = !side[i];
    }
    IT_CHECK(nn_partition(side, N) == 0, "partition");
    uint64_t t0 = it_now_ms();
    int r = 0;
    while (it_now_ms() - t0 < PARTITION_MS) {
        nn_round(&s, NULL, r == 0 ? 4000 : 0);
        r++;
        check_no_crossing(&s, side);
        for (size_t i = 0; i < N; i++)
            grouped[i] |= s.gid[i] != 0;
        nn_print_round(&s, "partitioned", r);
    }
    double da = nn_dev_from_mean(&s, a, a), db = nn_dev_from_mean(&s, b, b);
    printf("after %d rounds in %llu ms of partition: side A %.3g, side B "
           "%.3g from their own means, %.3g apart\n",
           r, (unsigned long long)(it_now_ms() - t0), da, db,
           nn_spread(&s, NULL));
    for (size_t i = 0; i < N; i++)
        IT_CHECK(grouped[i], "peer %zu never averaged during the partition", i);
    IT_CHECK(da <= 1e-5 && db <= 1e-5,
             "sides did not converge inside: %.3g %.3g", da, db);

    IT_CHECK(nn_heal() == 0, "heal");
    uint64_t t1 = it_now_ms();
    size_t seen = nn_wait_all(&s, N, 60000);
    printf("healed: %d peers see all %d members %llu ms after healing\n",
           (int)seen, N, (unsigned long long)(it_now_ms() - t1));
    double dev = 1;
    for (r = 1; r <= MERGE_ROUNDS && dev > 1e-5; r++) {
        nn_round(&s, NULL, 0);
        dev = nn_dev_from_mean(&s, NULL, NULL);
        nn_print_round(&s, "healed", r);
        printf("  max relative deviation from the global mean %.3g\n", dev);
    }
    IT_CHECK(dev <= 1e-5, "sides did not merge: %.3g from the global mean",
             dev);
    return nn_swarm_end(&s);
}
