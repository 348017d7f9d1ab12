/* SPDX-License-Identifier: MIT */
/*
 * round.h - the round machine of one peer, sans-IO: everything between a
 * moshpit_average() call and its result except moving bytes, shared by the
 * engine (src/net/engine_round.c) and the simulator (tests/sim/moshsim*.c).
 *
 * It holds this peer's matchmakers (one mp_mm_t per group key it receives
 * JOINs for, at most MP_RND_MM_KEYS at once, the least recently used idle
 * one evicted), the JOIN policy (key check, one pending JOIN per sender
 * over all keys, ACK or ALONE), and for the call in progress the joiner
 * (JOIN, fallback, LEAVE), the group all-reduce machine once a GROUP is
 * taken, the deadline, and the round end (result, grid shift, DONE).
 *
 * Inputs (each with the time now_ms; randomness only from cfg.seed):
 *   - mp__rnd_key, mp__rnd_start: a call, with its key, candidates in
 *     rendezvous order, weight and vector;
 *   - mp__rnd_on_join/on_ack/on_group/on_alone/on_leave: a control
 *     message from a peer (src/net/round_msg.c maps decoded wire messages
 *     to these: mp__round_msg_dispatch);
 *   - mp__rnd_tick: a timer (mp__rnd_next_wakeup says when);
 *   - mp__rnd_forget, mp__rnd_peer_failed: a peer is gone;
 *     mp__rnd_member_failed: a roster member has no session;
 *     mp__rnd_send_failed: the driver could not deliver an output;
 *   - mp__rnd_end: the driver ends the call.
 * Outputs, pulled with mp__rnd_next_out after every input: messages to
 * send (JOIN, JOIN_ACK, ALONE, LEAVE, GROUP, DONE), the event
 * MP_RND_OUT_FORMED (this peer's group exists: map its roster), and
 * MP_RND_OUT_OWN_NO_SLOT (worth a log line). The state
 * of the call: mp__rnd_over (ended alone, failed, or past its deadline) and
 * mp__rnd_group_finished (the all-reduce has nothing left to do); the data
 * plane works on mp__rnd_group directly.
 *
 * Ownership: mp__rnd_new allocates, mp__rnd_free (NULL ok) releases. The
 * call's vector belongs to the driver and must outlive the call. Not
 * thread-safe; no I/O, no clock, no allocation failure crashes (errors are
 * returned).
 */
#ifndef MP_CORE_ROUND_H
#define MP_CORE_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/agg.h"
#include "core/grid.h"
#include "core/group.h"
#include "core/joiner.h"
#include "core/matchmaker.h"
#include "core/rendezvous.h"
#include "moshpit.h"

#define MP_RND_MM_KEYS 8u     /* distinct group keys matchmade at once */
#define MP_RND_MARGIN_MS 100u /* the group deadline is this much earlier */
#define MP_RND_GRACE_MS 1000u /* a joiner's wait beyond its window */
#define MP_RND_RECENT 16u     /* finished rounds remembered */

typedef struct mp_rnd mp_rnd_t;

typedef struct mp_rnd_cfg {
    uint8_t self[MP_ID_BYTES];
    uint32_t group_size, min_group_size;
    uint32_t matchmaking_ms, round_timeout_ms, peer_timeout_ms;
    uint32_t bandwidth;    /* announced in JOINs (Mbit/s) */
    bool noshare;          /* outbound-only: JOINs say "ns" (no share) */
    mp_agg_t agg;          /* the groups' rule (its key suffix included) */
    const mp_grid_t *grid; /* this peer's grid key, copied (mp__rnd_grid) */
    uint64_t seed;         /* seeds the matchmakers' group ids */
    uint64_t first_seq;    /* of this peer's JOINs; 1000 more per call */
} mp_rnd_cfg_t;

/* The messages of the round protocol (docs/PROTOCOL.md). */
typedef enum {
    MP_RND_JOIN = 1,
    MP_RND_JOIN_ACK,
    MP_RND_ALONE,
    MP_RND_LEAVE,
    MP_RND_GROUP,
    MP_RND_DONE
} mp_rnd_msg_t;

typedef enum {
    MP_RND_OUT_SEND = 1,   /* send `msg` to `to` */
    MP_RND_OUT_FORMED,     /* this peer's group formed: see mp__rnd_roster */
    MP_RND_OUT_OWN_NO_SLOT /* every matchmaker busy with other keys: this
                              peer's own JOIN was answered ALONE (for the
                              log) */
} mp_rnd_out_kind_t;

typedef struct mp_rnd_out {
    mp_rnd_out_kind_t kind;
    mp_rnd_msg_t msg;
    uint8_t to[MP_ID_BYTES];
    uint64_t seq;      /* JOIN, JOIN_ACK, ALONE, LEAVE, GROUP */
    uint64_t group_id; /* GROUP, DONE */
    /* JOIN */
    double weight;
    uint32_t bandwidth, window_ms, key_len;
    uint32_t phase; /* JOIN: this peer's phase; GROUP: the members' largest */
    bool noshare;   /* JOIN: this peer reduces no share */
    const uint8_t *key;
    uint32_t line_len;   /* JOIN: the line key when key is a merge key */
    const uint8_t *line; /* (JOIN "lk"), 0 / NULL otherwise */
    /* GROUP: the roster (seqs zeroed), valid until the next call into the
     * machine */
    uint32_t n;
    const mp_member_t *members;
    bool alive; /* DONE: the member was alive in the group at its end */
} mp_rnd_out_t;

/* What mp__rnd_on_join made of a JOIN. */
typedef enum {
    MP_RND_JOIN_OK = 0,  /* pending: JOIN_ACK sent */
    MP_RND_JOIN_BAD_KEY, /* not a key peers build: ALONE sent */
    MP_RND_JOIN_NO_SLOT, /* all matchmakers busy with other keys: ALONE */
    MP_RND_JOIN_REFUSED  /* this key's pending JOINs at their limit: ALONE */
} mp_rnd_join_status_t;

typedef struct mp_rnd_join {
    uint64_t seq;
    double weight;
    uint32_t bandwidth, window_ms, key_len;
    uint32_t phase; /* the joiner's calls ended before (0 if not sent) */
    bool noshare;   /* the joiner is outbound-only (JOIN "ns") */
    bool parts;     /* the joiner cuts parts by the group (JOIN "pp") */
    const uint8_t *key;
    uint32_t line_len;   /* JOIN "lk": the joiner's line key, required */
    const uint8_t *line; /* when key is a merge key, else 0 / NULL */
} mp_rnd_join_t;

typedef struct mp_rnd_call {
    const uint8_t *key; /* from mp__rnd_key, or mp__rnd_merge_key of it */
    uint32_t key_len;
    const uint8_t *line; /* with a merge key: the line key it was made */
    uint32_t line_len;   /* from (JOIN "lk"); NULL / 0 otherwise */
    const uint8_t (*cands)[MP_ID_BYTES]; /* rendezvous order, self included */
    size_t ncands;
    double weight;
    float *values; /* count floats, averaged in place */
    size_t count;
    /* optional, ncands values: the JOIN_ACK wait for each candidate from
     * what the driver measured (0: half the window, 0.2 to 5 s, which
     * also bounds them); NULL: none */
    const uint32_t *ack_ms;
    /* the matchmaking window of this call (JOIN "w" and the joiner's own
     * wait); 0: config matchmaking_ms */
    uint32_t window_ms;
} mp_rnd_call_t;

typedef struct mp_rnd_result {
    bool grouped;      /* took part in a group all-reduce to its end */
    uint64_t group_id; /* the group's, 0 if none was taken */
    uint32_t n, self;  /* roster size and own index, if one was taken */
    uint32_t group_size, peers_failed;
    double group_weight, fraction_averaged;
    uint32_t matchmaking_ms, allreduce_ms;
    bool has_matchmaker; /* the matchmaker that answered */
    uint8_t matchmaker[MP_ID_BYTES];
} mp_rnd_result_t;

/* Fills *rc for a peer configured by cfg (as moshpit_open checked it):
 * group sizes, windows and the announced bandwidth from cfg, the rule from
 * agg; self, grid, seed and first_seq are the driver's. The engine and the
 * simulator both describe their peers this way. */
void mp__rnd_cfg_of(mp_rnd_cfg_t *rc, const moshpit_config_t *cfg,
                    const mp_agg_t *agg, const uint8_t self[MP_ID_BYTES],
                    const mp_grid_t *grid, uint64_t seed, uint64_t first_seq);
moshpit_err_t mp__rnd_new(const mp_rnd_cfg_t *cfg, mp_rnd_t **out);
void mp__rnd_free(mp_rnd_t *rm);

/* The group key of a peer at grid g averaging count floats with rule agg
 * (see mp__rnd_key); returns its length. */
/* The key the next call of count floats will have if the view does not
 * change (no state changes; mp__rnd_key is the call's own). */
uint32_t mp__rnd_next_key(const mp_rnd_t *rm, uint64_t count,
                          uint8_t key[MP_KEY_MAX]);
/* The key the next call of count floats will have once the running
 * group's round ends well (the grid shifted by this member's slot): known
 * as soon as the GROUP came, so the next call's matchmaker can be dialled
 * while this round's data flows. 0 without a group. */
uint32_t mp__rnd_key_after_group(const mp_rnd_t *rm, uint64_t count,
                                 uint8_t key[MP_KEY_MAX]);
uint32_t mp__rnd_key_of(const mp_grid_t *g, uint64_t count, const mp_agg_t *agg,
                        uint8_t key[MP_KEY_MAX]);
/* The phase the next call's JOINs carry (JOIN "ph"). */
uint32_t mp__rnd_phase(const mp_rnd_t *rm);
/* The grid key the machine moves on at every round end. */
const mp_grid_t *mp__rnd_grid(const mp_rnd_t *rm);

/* The peers this peer sees live now (itself included), for the matchmaker
 * side: a key closes at once only when as many JOINs are pending as the
 * larger of this and the views of the last two calls (a peer that came
 * back since the last call is waited for). 0 (the default): the calls'
 * views alone. */
void mp__rnd_set_view_now(mp_rnd_t *rm, size_t view_n);
/* The group key of a call: the vector length (8 bytes little endian; peers
 * only group with peers averaging vectors of the same length), the grid key
 * for a swarm of view_n peers (mp__grid_set_estimate), then the
 * aggregation suffix (only equal rules group). Returns its length. */
uint32_t mp__rnd_key(mp_rnd_t *rm, size_t view_n, uint64_t count,
                     uint8_t key[MP_KEY_MAX]);
/* Whether key is one peers build: vector length, d (1..8), d-1
 * coordinates below group_size, then an aggregation suffix. */
bool mp__rnd_key_ok(const mp_rnd_t *rm, const uint8_t *key, size_t len);

/* The merge key of a line key (docs/DESIGN.md, "Exact means over d > 1
 * rounds behind NAT"), for swarms with outbound-only members: the lines
 * whose JOINs may merge without losing the d-round mean share it. Round
 * k = turn mod d of a cycle varies over dimension k; register entries
 * d-1-k .. d-2 hold the dimensions already averaged in this cycle, entries
 * 0 .. d-2-k those still to be averaged. Lines agreeing on the averaged
 * set may merge, and in the last round (k = d-1) any lines, since each
 * line's mean is then the swarm's: the merge key keeps the averaged set,
 * none in the first round (k = 0) and the last, so those have one
 * matchmaker for the whole round. With sl > 0 the lines of one kept value
 * split into 2^sl shards, each at its own matchmaker: the other
 * coordinates, read as a number in base m (group_size, most significant
 * entry first), modulo 2^sl. Any split of lines that agree on the kept set
 * still agrees on it. Layout: vector length (8 bytes), 0x80 | d,
 * k | sl << 3, the kept coordinates, with sl > 0 the shard (2 bytes, little
 * endian), the aggregation suffix. Returns its length, 0 if line is no line
 * key of d >= 2, k >= d, sl > MP_RND_SHARD_LOG2_MAX or (sl > 0) m < 2. */
uint32_t mp__rnd_merge_key_of(const uint8_t *line, size_t line_len, uint32_t k,
                              uint32_t m, uint32_t sl, uint8_t out[MP_KEY_MAX]);
/* Shards: a matchmaker holds at most MP_MM_PENDING_MAX (256) pending JOINs,
 * so the callers of one merge key should be about MP_RND_SHARD_PEERS or
 * fewer. For a view of view_n peers of which 1 / m^nkeep share a kept
 * value, spread over m^nother lines: the least sl with view_n / m^nkeep <=
 * MP_RND_SHARD_PEERS * 2^sl, no more shards than lines, at most
 * MP_RND_SHARD_LOG2_MAX. 0 (one matchmaker per kept value, the keys of
 * before) up to 128 callers per kept value. */
#define MP_RND_SHARD_PEERS 128u
#define MP_RND_SHARD_LOG2_MAX 15u
uint32_t mp__rnd_merge_shards(uint32_t m, uint64_t view_n, uint32_t nkeep,
                              uint32_t nother);
/* The merge key of this peer's next call, made from its line key (the one
 * mp__rnd_key returned last), in the shards of the view that call was
 * given (mp__rnd_merge_shards); 0 when d < 2. */
uint32_t mp__rnd_merge_key(const mp_rnd_t *rm, const uint8_t *line,
                           size_t line_len, uint8_t out[MP_KEY_MAX]);

/* Starts a call (none may be in progress: MOSHPIT_EINVAL); on an error
 * (MOSHPIT_ENOMEM, bad arguments) no call is started. */
moshpit_err_t mp__rnd_start(mp_rnd_t *rm, uint64_t now_ms,
                            const mp_rnd_call_t *call);
bool mp__rnd_in_call(const mp_rnd_t *rm);

mp_rnd_join_status_t mp__rnd_on_join(mp_rnd_t *rm, uint64_t now_ms,
                                     const uint8_t from[MP_ID_BYTES],
                                     const mp_rnd_join_t *j);
void mp__rnd_on_ack(mp_rnd_t *rm, uint64_t now_ms,
                    const uint8_t from[MP_ID_BYTES], uint64_t seq);
/* false: stale or invalid (ignored). */
bool mp__rnd_on_group(mp_rnd_t *rm, uint64_t now_ms,
                      const uint8_t from[MP_ID_BYTES], uint64_t seq,
                      uint64_t group_id, const mp_member_t *members, uint32_t n,
                      uint32_t phase);
void mp__rnd_on_alone(mp_rnd_t *rm, uint64_t now_ms,
                      const uint8_t from[MP_ID_BYTES], uint64_t seq);
/* A LEAVE: forget the sender's pending JOIN under every key. */
void mp__rnd_on_leave(mp_rnd_t *rm, const uint8_t from[MP_ID_BYTES]);

void mp__rnd_tick(mp_rnd_t *rm, uint64_t now_ms);
uint64_t mp__rnd_next_wakeup(const mp_rnd_t *rm); /* UINT64_MAX: none */

/* The peer is gone: its pending JOINs are forgotten (mp__rnd_forget), and
 * the call moves on from it (the joiner falls back if it was the
 * matchmaker asked, the group drops it if it is a member). Returns true if
 * the call was affected. */
void mp__rnd_forget(mp_rnd_t *rm, const uint8_t id[MP_ID_BYTES]);
/* This peer turned outbound-only (or back): its next JOINs say "ns" and it
 * reduces no share in groups (docs/DESIGN.md, "Peers behind NAT"). */
void mp__rnd_set_noshare(mp_rnd_t *rm, bool noshare);
bool mp__rnd_peer_failed(mp_rnd_t *rm, uint64_t now_ms,
                         const uint8_t id[MP_ID_BYTES]);
/* Roster member i cannot be reached (no session): the group drops it. */
void mp__rnd_member_failed(mp_rnd_t *rm, uint64_t now_ms, uint32_t i);
/* The driver could not deliver o (its peer is unknown or gone): a JOIN
 * falls back to the next candidate at once; anything else is dropped. */
void mp__rnd_send_failed(mp_rnd_t *rm, uint64_t now_ms, const mp_rnd_out_t *o);
/* A JOIN to `to` that waited for a session has left now: its ACK timeout
 * counts from now (mp__joiner_on_sent). */
void mp__rnd_join_sent(mp_rnd_t *rm, uint64_t now_ms,
                       const uint8_t to[MP_ID_BYTES]);

/* Pulls one output; false when there is none. */
bool mp__rnd_next_out(mp_rnd_t *rm, mp_rnd_out_t *o);

/* The call must end now: its joiner ended alone (*alone = true), its group
 * could not be made (*e set), or its deadline passed. */
bool mp__rnd_over(const mp_rnd_t *rm, uint64_t now_ms, bool *alone,
                  moshpit_err_t *e);
/* The call's group is done and has nothing left to send. */
bool mp__rnd_group_finished(const mp_rnd_t *rm);
/* The call's group machine (NULL before the GROUP). */
mp_group_t *mp__rnd_group(const mp_rnd_t *rm);
/* The call's roster (NULL before the GROUP), its size, own index, id. */
const mp_member_t *mp__rnd_roster(const mp_rnd_t *rm, uint32_t *n,
                                  uint32_t *self, uint64_t *group_id);
/* gid is one of the last MP_RND_RECENT rounds this peer finished. */
bool mp__rnd_recent_gid(const mp_rnd_t *rm, uint64_t gid);

/* Ends the call: LEAVE to the matchmaker holding its JOIN, or DONE to every
 * other member of its group; the result; the grid moves on if e is
 * MOSHPIT_OK (to this peer's slot after a group not ended alone, else to
 * a random coordinate). No-op without a call. */
void mp__rnd_end(mp_rnd_t *rm, uint64_t now_ms, moshpit_err_t e, bool alone,
                 mp_rnd_result_t *res);

/* The upload rate this peer measured (Mbit/s, 0: none): JOINs announce
 * it where it is below the configured bandwidth. */
void mp__rnd_set_bandwidth(mp_rnd_t *rm, uint32_t measured_mbps);
/* The bandwidth the next JOIN announces. */
uint32_t mp__rnd_bandwidth(const mp_rnd_t *rm);
/* Moves the call's deadline earlier (never later): the group's hard end is
 * deadline_ms, the call is over MP_RND_MARGIN_MS later. No-op without a
 * call. */
void mp__rnd_set_deadline(mp_rnd_t *rm, uint64_t deadline_ms);
/* Moves the call's deadline later, to deadline_ms but never past its own
 * (round_timeout_ms from its start), when a repair needs the time (a
 * connection of the round broke). No-op without a call. */
void mp__rnd_extend_deadline(mp_rnd_t *rm, uint64_t deadline_ms);

/* Matchmakers held and their pending JOINs (memory bounds). */
uint32_t mp__rnd_mm_count(const mp_rnd_t *rm, size_t *pending);

#endif
