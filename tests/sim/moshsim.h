/* SPDX-License-Identifier: MIT */
/*
 * moshsim.h - a swarm of simulated moshpit peers: every peer runs the
 * production round machine (core/round.c: matchmaker slots, JOIN policy,
 * joiner, group start and round end, over core/grid.c keys,
 * core/rendezvous.c, core/matchmaker.c, core/joiner.c and the core/group.c
 * butterfly all-reduce on real float vectors) with
 * its control messages in wire form (net/round_msg.c, wire/wire.c) over
 * simnet, round after round (moshsim.c: the swarm; moshsim_peer.c: one
 * peer's driver; moshsim_wire.c: a hostile peer's data frames). It backs the
 * moshpit-sim tool, tests/sim/test_sim_moshpit.c and
 * tests/sim/test_sim_protofuzz.c.
 *
 * A round: every live peer that does not miss it (fail_prob) starts one
 * average call at the round's start time plus a random jitter (0 to
 * start_jitter_ms). A call, like mp__engine_start_round and what follows it
 * (the parts marked [machine] are core/round.c itself, shared with the engine):
 *   - view: the live peers at round start (itself included), or what the
 *     view hook returns (a SWIM membership will plug in there);
 *   - key [machine]: mp__rnd_key (vector length, grid key for the view's
 *     size, aggregation suffix);
 *   - candidates: the first MOSHSIM_CANDIDATES of the view in rendezvous
 *     order (mp__rendezvous_top; shared, cached per (view version, key),
 *     only for peers on the default view; the engine ranks its whole view);
 *   - joiner [machine]: window matchmaking_ms, ACK timeout
 *     clamp(window / 2, 200, 5000), 1 s grace; JOIN to self goes to the
 *     own matchmaker directly; LEAVE to the previous candidate on every
 *     fallback and on giving up; a JOIN to a peer known dead falls back at
 *     once (the engine: one without a live session);
 *   - matchmakers [machine]: every peer (calling or not, like the engine
 *     thread) hosts one mp_mm_t per key it receives JOINs for (at most 8
 *     at once, idle ones evicted), answers JOIN_ACK or ALONE, and sends
 *     the GROUP / ALONE decisions;
 *   - GROUP [machine]: mp_group_t over the roster on the peer's own float
 *     vector; the driver maps the roster to peers (dropping those known
 *     dead), sends parts as simnet messages and holds parts that race
 *     ahead of the GROUP;
 *   - end [machine] (group done, ALONE, or the round deadline): grid key
 *     mp__grid_shift(slot in the roster) after a group, else
 *     mp__grid_shift_random; the driver sets the weight for the next
 *     round = group_weight / group_size (mass conservation: the swarm's
 *     total weight stays constant, and with it the weighted mean and the
 *     d-round exactness on a full grid with any initial weights). DONE
 *     messages are not sent (the engine's close is not modelled).
 * The round is over when the network is idle (every call ended, every
 * timer fired); the next one starts 1 s later.
 *
 * Faults: fail_prob (a peer misses a round: it does not call, but stays a
 * member and keeps serving as matchmaker); churn (per round, churn random
 * live peers crash at a random time in the first matchmaking_ms + 1 s of
 * the round, and churn new peers join at its start with a random grid
 * position, weight 1 (or a fresh random weight) and the current vector of
 * a random live peer, as if downloaded); kills from the test. A crash is
 * reported to every live peer notice_ms later (a dropped connection): its
 * joiner falls back, its group drops the member, its matchmakers forget
 * the JOIN, and later JOINs to it fail at once; MOSHSIM_NEVER: never
 * reported, only timeouts find it. loss: TCP segment loss, modelled as
 * retransmission delay (rto_ms, doubling) with in-order delivery per link,
 * since ZeroMQ runs over TCP and never loses a message on a live
 * connection.
 *
 * Values: standard normal floats (seeded); weights 1, or uniform in
 * [0.5, 1.5) with random_weights. Everything is a function of the seed:
 * the same configuration and calls give the same bytes.
 *
 * Robust aggregation: agg is every peer's rule (its key suffix included).
 * byzantine: that many of the initial peers, drawn at random, are
 * Byzantine: they follow the protocol but set every value of their vector
 * to 1e20 before each call (and announce byz_weight if nonzero; as
 * reducers they apply the rule honestly to what they receive). They are
 * left out of every statistic, and joiners never copy their vector. err
 * measures how far the honest peers drift from the initial weighted mean
 * of the honest peers.
 *
 * Outbound-only peers (behind NAT): outbound of the initial peers, drawn
 * at random (a generator of their own), reduce no share (the round
 * machine's noshare, JOIN "ns") and are never matchmaker candidates;
 * with any of them every call JOINs under the merge key of its line key
 * (mp__rnd_merge_key, JOIN "lk"), as the engine does once it knows of an
 * outbound-only member. Links are not restricted (the group machine
 * already sends no part between two outbound-only members); a group
 * without a member that reduces, which the engine could not connect, is
 * counted (stats.unreduced). Joiners are dialable.
 *
 * Ownership: moshsim_new allocates everything, moshsim_free releases it.
 * Pointers returned stay valid until the next moshsim_round or free. Not
 * thread-safe. Out of memory aborts (test program).
 */
#ifndef MP_TESTS_MOSHSIM_H
#define MP_TESTS_MOSHSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/agg.h"
#include "core/matchmaker.h"
#include "core/rendezvous.h"
#include "sim/simnet.h"

#define MOSHSIM_NONE UINT32_MAX
#define MOSHSIM_NEVER UINT32_MAX
/* Candidates handed to a joiner. With the engine's timers a joiner falls
 * back at most three times by timeout within window + grace; more only
 * through reported deaths, so 8 covers five dead top candidates. */
#define MOSHSIM_CANDIDATES 8u

typedef struct moshsim moshsim_t;

typedef struct moshsim_cfg {
    uint32_t peers;          /* initial swarm size, >= 1 */
    uint32_t group_size;     /* M, 2..MP_GROUP_MAX */
    uint32_t min_group_size; /* <= group_size (below 2 means 2) */
    uint32_t dims;           /* d, 0 = automatic from the view size */
    uint32_t count;          /* floats per vector, >= 1 */
    uint64_t seed;
    double fail_prob;           /* per peer and round: misses the round */
    double loss;                /* per message transmission, see above */
    uint32_t churn;             /* peers crashing and joining per round */
    bool random_weights;        /* initial weights uniform in [0.5, 1.5) */
    bool random_positions;      /* else balanced: peer i at grid position i */
    uint32_t matchmaking_ms;    /* 2000 */
    uint32_t round_timeout_ms;  /* 30000 */
    uint32_t peer_timeout_ms;   /* 5000 */
    uint32_t latency_ms;        /* base one-way latency, 5 */
    uint32_t latency_spread_ms; /* extra fixed per-link latency, 0..20 */
    uint32_t start_jitter_ms;   /* call start spread, 50 */
    uint32_t notice_ms;         /* crash reported after, 100 */
    uint32_t rto_ms;            /* first retransmission timeout, 200 */
    mp_agg_t agg;               /* the groups' rule; zero = weighted mean */
    uint32_t byzantine;         /* Byzantine peers among the initial ones */
    double byz_weight;          /* weight they announce, 0 = the usual */
    bool hostile;               /* one more peer, driven by moshsim_hostile */
    uint32_t outbound;          /* initial peers that are outbound-only */
} moshsim_cfg_t;

/* One round (or, for round 0, the initial state). */
typedef struct moshsim_stats {
    uint32_t round;
    uint32_t live;    /* peers alive at the end */
    uint32_t called;  /* peers that started a call */
    uint32_t skipped; /* live peers that missed the round */
    uint32_t left, joined;
    uint32_t groups;      /* distinct groups peers took part in */
    uint32_t full_groups; /* ... with group_size members */
    uint32_t min_size, max_size;
    double mean_size;
    uint32_t alone;     /* calls that ended without a group */
    uint32_t degraded;  /* calls that dropped a group member */
    uint32_t hung;      /* calls of live peers that never ended (a bug) */
    uint32_t unreduced; /* groups of outbound-only members only */
    uint64_t max_call_ms;
    double mse;    /* mean over live peers and elements of (x - mean)^2 */
    double maxdev; /* max |x - mean| / max |x| of the initial values */
    double err;    /* rms over honest live peers and elements of
                      (x - initial honest weighted mean) */
    double errmax; /* max over them of |x - initial honest weighted mean| */
} moshsim_stats_t;

/* What a peer's last call did. */
typedef struct moshsim_call {
    uint32_t round; /* 0: never called */
    bool ended;
    uint64_t start_ms, end_ms; /* virtual */
    uint64_t group_ms;         /* when the GROUP was taken, 0: never */
    uint64_t group_id;         /* 0: no group */
    uint32_t roster;           /* roster size as formed, 0: no group */
    uint32_t slot;             /* index in the roster */
    uint32_t matchmaker;       /* peer that answered, or MOSHSIM_NONE */
    uint32_t group_size;       /* moshpit_round_t semantics from here */
    uint32_t peers_failed;
    double group_weight;
    double fraction_averaged;
} moshsim_call_t;

/* A peer's view for its next call. live[0..nlive) are the live peers at
 * round start; write the view (peer indices, dead ones allowed, at most
 * moshsim_peers() entries) into out and return its length, or return
 * SIZE_MAX for the default view. The peer itself is added if missing. */
typedef size_t (*moshsim_view_fn)(void *user, uint32_t peer,
                                  const uint32_t *live, size_t nlive,
                                  uint32_t *out);

void moshsim_cfg_init(moshsim_cfg_t *c);
/* NULL if the configuration is invalid (message on stderr). */
moshsim_t *moshsim_new(const moshsim_cfg_t *c);
void moshsim_free(moshsim_t *s); /* NULL ok */

/* Runs one round to quiescence and describes it. */
void moshsim_round(moshsim_t *s, moshsim_stats_t *out);
/* The current state (round = rounds run so far; call fields zero). */
void moshsim_measure(const moshsim_t *s, moshsim_stats_t *out);

/* Peers are 0 .. moshsim_peers() - 1 (joiners are appended). */
uint32_t moshsim_peers(const moshsim_t *s);
bool moshsim_alive(const moshsim_t *s, uint32_t peer);
bool moshsim_byzantine(const moshsim_t *s, uint32_t peer);
bool moshsim_outbound(const moshsim_t *s, uint32_t peer);
const float *moshsim_values(const moshsim_t *s, uint32_t peer);
double moshsim_weight(const moshsim_t *s, uint32_t peer);
const moshsim_call_t *moshsim_last_call(const moshsim_t *s, uint32_t peer);
const uint8_t *moshsim_id(const moshsim_t *s, uint32_t peer);

/* The key the peer's next call will use if the swarm keeps its current
 * live size (count prefix included); returns its length. */
size_t moshsim_next_key(const moshsim_t *s, uint32_t peer,
                        uint8_t key[MP_KEY_MAX]);
/* The peer of the given rendezvous rank for key among the live peers. */
uint32_t moshsim_candidate(const moshsim_t *s, const uint8_t *key,
                           size_t key_len, uint32_t rank);

/* Virtual start time of the next round (or of the round just run, after
 * moshsim_round). */
uint64_t moshsim_next_start(const moshsim_t *s);
uint64_t moshsim_last_start(const moshsim_t *s);

/* Crashes peer at (next round start + after_ms), once. */
void moshsim_kill_next_round(moshsim_t *s, uint32_t peer, uint32_t after_ms);
void moshsim_set_view_hook(moshsim_t *s, moshsim_view_fn fn, void *user);

/* ---- a hostile peer (tests/sim/test_sim_protofuzz.c) ----
 * With cfg.hostile, peer cfg.peers (appended after the initial peers, at
 * grid position cfg.peers, or a random one with random_positions) is
 * hostile: it is live and a member like any other (in every view, so a
 * matchmaker candidate, and it serves JOINs with the real matchmaker like
 * an honest peer) but never calls, and is left out of every statistic.
 * What it sends beyond that comes from the driver below, as wire bytes
 * that the receiver decodes the way the engine does (engine.c on_ctrl,
 * engine_round.c mp__engine_on_data_msg): mp__wire_msg_decode, falling back to
 * mp__wire_swim_msg_decode, then the type's handler; data frames through
 * mp__wire_data_hdr_decode (the AEAD is not modelled: an admitted peer can
 * seal whatever plaintext it likes under its own session key), then the
 * round's part handler and mp__group_on_part. Every message delivered to
 * the hostile peer is handed to on_recv in its wire form (control messages
 * encoded with mp__wire_msg_encode, parts as data frames with a zero tag), so
 * the driver can replay and mutate real traffic. */
typedef struct moshsim_hostile_ops {
    /* A message for the hostile peer from peer `from` (data: a frame). */
    void (*on_recv)(moshsim_t *s, void *user, uint32_t from, bool data,
                    const uint8_t *buf, size_t len);
    /* A wake-up the driver asked for with moshsim_hostile_wake. */
    void (*on_wake)(moshsim_t *s, void *user);
} moshsim_hostile_ops_t;

/* What honest receivers made of the hostile bytes (counters only grow). */
typedef struct moshsim_wire_stats {
    uint64_t ctrl, data;     /* messages and frames delivered */
    uint64_t ctrl_bad;       /* rejected by both control decoders */
    uint64_t swim;           /* decoded as SWIM (no SWIM machine here) */
    uint64_t by_type[12];    /* decoded wire.h messages, by type */
    uint64_t data_bad;       /* rejected by mp__wire_data_hdr_decode */
    uint64_t data_state;     /* kind 3 (no state client here) */
    uint64_t part_status[8]; /* mp__group_on_part results */
    uint64_t part_held;      /* held for a group not yet known */
    uint64_t part_ignored;   /* not in a call, replay of a recent
                                round, or from a non-member */
    uint64_t join_bad_key;   /* JOINs answered ALONE for their key */
} moshsim_wire_stats_t;

/* The hostile peer's index, or MOSHSIM_NONE. */
uint32_t moshsim_hostile(const moshsim_t *s);
void moshsim_hostile_set_ops(moshsim_t *s, const moshsim_hostile_ops_t *ops,
                             void *user);
/* Calls ops->on_wake at virtual time at_ms (keep it within the round:
 * the round ends only when no timer is left). */
void moshsim_hostile_wake(moshsim_t *s, uint64_t at_ms);
/* Sends bytes from the hostile peer to peer `to`: a control message, or
 * (data) a data frame. */
void moshsim_hostile_send(moshsim_t *s, uint32_t to, bool data, const void *buf,
                          size_t len);
const moshsim_wire_stats_t *moshsim_wire_stats(const moshsim_t *s);

/* Sizes of what a peer holds, for memory bounds. */
typedef struct moshsim_peer_mem {
    uint32_t mm_slots;       /* matchmakers (at most 8) */
    size_t mm_pending;       /* pending JOINs over all of them */
    size_t held, held_bytes; /* parts held before their GROUP */
    bool in_group;
} moshsim_peer_mem_t;
void moshsim_peer_mem(const moshsim_t *s, uint32_t peer,
                      moshsim_peer_mem_t *out);

/* Hash of every peer's values, weight and grid key plus the event trace. */
uint64_t moshsim_digest(const moshsim_t *s);
simnet_t *moshsim_net(moshsim_t *s);

#endif
