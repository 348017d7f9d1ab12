/* SPDX-License-Identifier: MIT */
/*
 * swarm.h - drives the peers of a netns test through rounds: which peers
 * take part, what they average (a fresh vector from a seed, or again the
 * vector their last round left them, weighted by group_weight /
 * group_size of that round, which keeps the swarm's total weight and
 * weighted sum constant), and checks that apply to every round: each call
 * of a peer that is alive returns MOSHPIT_OK within round_timeout_ms plus
 * the library's slack of 1 s.
 */
#ifndef MP_NN_SWARM_H
#define MP_NN_SWARM_H

#include "netns.h"

typedef struct nn_swarm {
    it_peer_t peer[NN_MAX_PEERS];
    it_peer_cfg_t cfg;           /* template; nn_swarm_start sets index etc. */
    size_t n;                    /* slots 0..n-1 */
    size_t count;                /* vector length */
    uint32_t bound_ms;           /* the longest a call may take */
    float *v[NN_MAX_PEERS];      /* what peer i holds after its last round */
    double w[NN_MAX_PEERS];      /* weight of its next "again" call */
    uint64_t seed[NN_MAX_PEERS]; /* its last fresh vector's seed */
    uint64_t next_seed[NN_MAX_PEERS]; /* nonzero: nn_round starts it fresh
                                         from this seed (then cleared) */
    double next_weight[NN_MAX_PEERS]; /* with that weight */
    double w0[NN_MAX_PEERS];          /* and that vector's weight */
    it_result_t res[NN_MAX_PEERS];    /* its last report */
    int got[NN_MAX_PEERS];            /* the last round gave a result */
    uint64_t gid[NN_MAX_PEERS];       /* last round id, 0 if alone or none */
    uint64_t worst_call_ms;           /* longest call so far */
    uint64_t rounds_alone, rounds_grouped;
} nn_swarm_t;

/* The NAT topology of test_netns_nat, _nat_grid, _nat_grid3 and _reach, after
 * nn_open(8): peers 2..5 behind one masquerading router, 6 and 7 behind
 * another, so only peers 0 and 1 are dialable; every peer's link delays
 * 25 ms each way (RTT 50 ms). Failures are checked (IT_CHECK); 0 if there
 * were none. */
int nn_nat_two_routers(void);
/* The start of a test on that topology, after nn_open(8): prints SKIP
 * and returns NN_SKIP without the delay line, 1 if the routers failed,
 * else 0 with *cfg the template all of them use (nn_config(swarm,
 * group_size, 3000, 2000, 15000), grid keys from positions, grid_dims
 * dims, log_dir from NN_LOG_DIR). */
int nn_nat_begin(const char *swarm, uint32_t group_size, uint32_t dims,
                 it_peer_cfg_t *cfg);
/* Starts the 8 peers of an initialised swarm, peer i at grid position
 * pos[i], and waits as nn_nat_formed does; its result. */
int nn_nat_start_grid(nn_swarm_t *s, const int64_t pos[8]);
/* After the 8 peers of that topology were started at t0 (it_now_ms):
 * waits up to 60 s until every one sees all 8 and prints how long that
 * took; then checks that each NAT'd peer ran outbound-only. 0 if all 8 saw
 * all, -1 if not (the outbound-only check is then not made). */
int nn_nat_formed(nn_swarm_t *s, uint64_t t0);
/* Waits until every live peer counts exactly n members (an outbound-only
 * peer counts the members membership holds alive, and takes membership's
 * suspicion time to count a killed one out), up to timeout_ms in all.
 * Failures are checked; returns how many do. */
size_t nn_wait_exact(nn_swarm_t *s, size_t n, int timeout_ms);

/* A peers' template: swarm name, group size and the three timeouts; the
 * rest zero (random grid keys, d from the swarm size); ready wait 60 s. */
it_peer_cfg_t nn_config(const char *swarm, uint32_t group_size,
                        uint32_t matchmaking_ms, uint32_t peer_timeout_ms,
                        uint32_t round_timeout_ms);
/* Sets up s for n slots and vectors of count floats; cfg is the peers'
 * template (nn_use is applied to it). bound_ms = round_timeout_ms + 1000.
 * Returns 0 or -1 (out of memory). */
int nn_swarm_init(nn_swarm_t *s, const it_peer_cfg_t *cfg, size_t n,
                  size_t count);
/* Starts peers 0..n-1 (peer 0 starts the swarm) and waits until each sees
 * all n. Returns 0, or reports a failure and returns -1. */
int nn_swarm_start(nn_swarm_t *s);
/* Starts (or restarts) slot i bootstrapping from `from` (from == i: it
 * starts the swarm), with the identity pub/sec if not NULL; waits until it
 * sees expect members. Returns 0 or -1. */
int nn_swarm_start_one(nn_swarm_t *s, size_t i, size_t from, const uint8_t *pub,
                       const uint8_t *sec, size_t expect);
/* Waits until every live peer sees n members or timeout_ms passes (one
 * deadline for all). Returns how many see n. */
size_t nn_wait_all(nn_swarm_t *s, size_t n, int timeout_ms);
/* Stops all live peers and frees what s holds. */
void nn_swarm_free(nn_swarm_t *s);
/* The end of a test: nn_swarm_free, prints "ok" or "FAILED", and returns
 * the exit code. */
int nn_swarm_end(nn_swarm_t *s);

/* Sends the round's command to live peer i: fresh (seed, weight w) if
 * seed != 0, else again with s->w[i]. Returns 0 or -1. */
int nn_send(nn_swarm_t *s, size_t i, uint64_t seed, double w);
/* Collects peer i's result, checks it (OK, within bound_ms) and updates
 * v, w, res, got, gid. Returns 0, or -1 if no result came (hung or dead:
 * counted as a failure unless allow_dead). */
int nn_collect(nn_swarm_t *s, size_t i, int allow_dead);

/* One round of every live peer with in[i] != 0 (in NULL: all live ones):
 * fresh from seed_base + i when seed_base != 0 (weights it_weight), else
 * fresh from next_seed[i] if set, else again. Returns the longest call in
 * ms. */
uint64_t nn_round(nn_swarm_t *s, const int *in, uint64_t seed_base);
/* nn_round in two halves, for tests that act while the round runs:
 * sending, and collecting from the peers still alive. */
void nn_round_send(nn_swarm_t *s, const int *in, uint64_t seed_base);
uint64_t nn_round_collect(nn_swarm_t *s, const int *in);

/* Largest relative spread over elements of the vectors of live peers
 * with in[i] != 0 (in NULL: all live): max_k (max_i v_i[k] - min_i v_i[k])
 * / max_k |v_0[k]|. */
double nn_spread(const nn_swarm_t *s, const int *in);
/* Largest relative deviation of any live peer with in[i] != 0 from the
 * weighted mean of the fresh vectors (seed, w0) of the peers with
 * from[i] != 0 (NULL: all live ones). */
double nn_dev_from_mean(const nn_swarm_t *s, const int *in, const int *from);

/* After a round where the peers with in[j] != 0 started from fresh
 * vectors: counts the elements of peer i's vector that are neither its own
 * value nor the weighted mean (1e-5 relative) of the fresh vectors of some
 * subset of those peers that contains i (larger subsets tried first, its
 * round's group first of all). For each element explained by a mean over
 * two or more peers, counted[j] (if not NULL) is incremented for every j
 * in that subset. */
size_t nn_unexplained(const nn_swarm_t *s, const int *in, size_t i,
                      size_t *counted);

/* Prints the last round: peers in groups, members dropped (summed over
 * the peers that saw it), the least fraction averaged, the longest call. */
void nn_print_round(const nn_swarm_t *s, const char *name, int round);

#endif
