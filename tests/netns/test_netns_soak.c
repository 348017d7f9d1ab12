/* SPDX-License-Identifier: MIT */
/*
 * test_netns_soak.c - scenario 6 of the netns test bed (labels netns and
 * slow; not run by CI): 16 peers for 5 minutes on links that drop 2% of
 * packets both ways, while peers are SIGKILLed mid-round and restarted
 * every few seconds (half the time with the dead peer's identity, half
 * the time as a new identity).
 *
 * Config: group_size 4 with random grid keys (d from the swarm size: 2
 * with 16 peers), matchmaking_ms 2000, peer_timeout_ms 3000,
 * round_timeout_ms 10000; vectors of 65536 floats. Peers 0-3 are never
 * killed; the others may be. Each round every live peer averages again
 * what its last round left (weight group_weight / group_size); a
 * restarted peer brings a fresh vector with weight 0 (it takes the others'
 * average and adds nothing) until it has had one complete group round.
 * MOSHPIT_SOAK_SECONDS overrides the 300 s, MOSHPIT_SOAK_SEED the chaos.
 *
 * Pass rule:
 * - no crash and no hang: every call of a peer that was not killed
 *   returns MOSHPIT_OK within round_timeout_ms + 1 s;
 * - no leak: the resident size of each of peers 0-3 at the end is at most
 *   1.25 times plus 4 MiB its size after the first minute (or the first
 *   fifth of a shorter run);
 * - the swarm's spread (largest per-element range over the peers that
 *   have averaged, relative to the largest value) never grows between
 *   checkpoints every 30 s (beyond 1e-6 of float rounding), and ends below
 *   1e-4: every result is a convex combination of such peers' values;
 * - churn does not strand anyone: every restarted peer that stays alive
 *   for 8 rounds has had a complete group round by then.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "swarm.h"

#define N 16
#define IMMORTAL 4
#define COUNT 65536
#define MIN_ALIVE 10
#define MIX_ROUNDS 8

/* the chaos: which peer dies when, who comes back (MOSHPIT_SOAK_SEED) */
static uint64_t rnd(void) {
    return (uint64_t)lrand48();
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static size_t alive(const nn_swarm_t *s) {
    size_t n = 0;
    for (size_t i = 0; i < N; i++)
        n += s->peer[i].alive != 0;
    return n;
}

int main(void) {
    const char *env = getenv("MOSHPIT_SOAK_SECONDS");
    uint64_t secs = env ? strtoull(env, NULL, 10) : 300;
    env = getenv("MOSHPIT_SOAK_SEED");
    long seed0 = env ? strtol(env, NULL, 10) : (long)time(NULL);
    srand48(seed0);
    printf("soak: %llu s, seed %ld\n", (unsigned long long)secs, seed0);
    nn_open(N);
    it_peer_cfg_t cfg = nn_config("nn-soak", 4, 2000, 3000, 10000);
    nn_swarm_t s;
    uint8_t pub[N][32], sec[N][32];
    if (nn_swarm_init(&s, &cfg, N, COUNT) != 0)
        return 1;
    for (size_t i = 0; i < N; i++)
        IT_CHECK(moshpit_keypair(pub[i], sec[i]) == MOSHPIT_OK, "keypair");
    for (size_t i = 0; i < N; i++)
        IT_CHECK(nn_swarm_start_one(&s, i, 0, pub[i], sec[i], 1) == 0,
                 "peer %zu did not start", i);
    if (nn_wait_all(&s, N, 60000) != N)
        return 1;
    for (size_t i = 0; i < N; i++)
        IT_CHECK(nn_loss(i, 20, 20) == 0, "loss rules on %zu", i);

    int mixed[N];
    unsigned age[N] = {0}, joined = 0, join_rounds = 0;
    for (size_t i = 0; i < N; i++)
        mixed[i] = 1; /* the initial vectors define the swarm */
    uint64_t t0 = it_now_ms(), next_check = t0 + 30000;
    uint64_t warm = t0 + (secs >= 300 ? 60000 : secs * 200);
    long rss0[IMMORTAL] = {0};
    double last_spread = -1, first_spread = -1;
    unsigned kills = 0, restarts = 0, same_id = 0, rounds = 0;
    uint64_t seed = 20000;
    while (it_now_ms() - t0 < secs * 1000 && it_failures == 0) {
        nn_round_send(&s, NULL, rounds == 0 ? 10000 : 0);
        rounds++;
        if (rnd() % 100 < 60 && alive(&s) > MIN_ALIVE) {
            size_t v = IMMORTAL + (size_t)(rnd() % (N - IMMORTAL));
            if (s.peer[v].alive) {
                sleep_ms((unsigned)(rnd() % 1500));
                it_kill(&s.peer[v]);
                kills++;
            }
        }
        nn_round_collect(&s, NULL);
        for (size_t i = 0; i < N; i++) {
            if (!s.got[i])
                continue;
            const moshpit_round_t *in = &s.res[i].info;
            age[i]++;
            if (!mixed[i] && in->group_size > 1 && in->group_weight > 0 &&
                in->fraction_averaged >= 1.0) {
                mixed[i] = 1;
                joined++;
                join_rounds += age[i];
            }
            IT_CHECK(mixed[i] || age[i] < MIX_ROUNDS,
                     "restarted peer %zu not in a complete group after %u "
                     "rounds",
                     i, age[i]);
            if (!mixed[i])
                s.w[i] = 0; /* not yet part of the swarm's mean */
        }
        /* restart a dead slot now and then (always below MIN_ALIVE) */
        size_t dead = N;
        for (size_t k = 0, o = (size_t)(rnd() % N); k < N; k++)
            if (!s.peer[(o + k) % N].alive) {
                dead = (o + k) % N;
                break;
            }
        if (dead < N && (alive(&s) < MIN_ALIVE || rnd() % 100 < 60)) {
            int same = rnd() % 2 == 0;
            if (!same)
                IT_CHECK(moshpit_keypair(pub[dead], sec[dead]) == MOSHPIT_OK,
                         "keypair");
            size_t from = (size_t)(rnd() % IMMORTAL);
            IT_CHECK(nn_swarm_start_one(&s, dead, from, pub[dead], sec[dead],
                                        1) == 0,
                     "restart of slot %zu failed", dead);
            mixed[dead] = 0;
            age[dead] = 0;
            s.next_seed[dead] = ++seed;
            s.next_weight[dead] = 0;
            restarts++;
            same_id += same;
        }
        uint64_t now = it_now_ms();
        if (rss0[0] == 0 && now >= warm)
            for (size_t i = 0; i < IMMORTAL; i++)
                rss0[i] = nn_rss_kib(s.peer[i].pid);
        if (now >= next_check) {
            next_check += 30000;
            double sp = nn_spread(&s, mixed);
            printf("t=%3llu s: %u rounds, %zu alive, %u kills, %u restarts, "
                   "spread %.3g, longest call %llu ms, rss peer 0 %ld KiB\n",
                   (unsigned long long)((now - t0) / 1000), rounds, alive(&s),
                   kills, restarts, sp, (unsigned long long)s.worst_call_ms,
                   nn_rss_kib(s.peer[0].pid));
            fflush(stdout);
            if (first_spread < 0)
                first_spread = sp;
            IT_CHECK(last_spread < 0 || sp <= last_spread + 1e-6,
                     "spread grew from %.3g to %.3g", last_spread, sp);
            last_spread = sp;
        }
    }
    double sp = nn_spread(&s, mixed);
    printf("soak: %u rounds, %u kills, %u restarts (%u same identity), "
           "spread %.3g (first checkpoint %.3g), longest call %llu ms "
           "(bound %u), %llu rounds in groups, %llu alone\n",
           rounds, kills, restarts, same_id, sp, first_spread,
           (unsigned long long)s.worst_call_ms, s.bound_ms,
           (unsigned long long)s.rounds_grouped,
           (unsigned long long)s.rounds_alone);
    printf("restarted peers: %u reached the swarm, after %.1f rounds on "
           "average\n",
           joined, joined ? (double)join_rounds / joined : 0.0);
    IT_CHECK(last_spread < 0 || sp <= last_spread + 1e-6,
             "spread grew from %.3g to %.3g", last_spread, sp);
    IT_CHECK(sp <= 1e-4, "spread %.3g at the end", sp);
    for (size_t i = 0; i < IMMORTAL; i++) {
        long r1 = nn_rss_kib(s.peer[i].pid);
        printf("peer %zu rss: %ld KiB after warm-up, %ld KiB at the end\n", i,
               rss0[i], r1);
        IT_CHECK(rss0[i] > 0 && r1 > 0 && r1 <= rss0[i] * 5 / 4 + 4096,
                 "peer %zu grew from %ld to %ld KiB", i, rss0[i], r1);
    }
    return nn_swarm_end(&s);
}
