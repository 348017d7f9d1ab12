/* SPDX-License-Identifier: MIT */
/*
 * swim.h - sans-IO SWIM membership: who is in the swarm, who is alive.
 *
 * One mp_swim_t per peer. It keeps the member table (id, address, state,
 * incarnation), decides whom to probe and when, which gossip updates to
 * piggyback on outgoing messages, and when a silent member becomes suspect
 * and then dead. It never touches a socket, a clock or OS randomness: the
 * driver passes the time (now_ms, a monotonic millisecond counter that never
 * goes backwards) and a seed, delivers decoded messages with the
 * authenticated sender id, and sends what mp__swim_poll_send hands out.
 * Not thread-safe; no global state. Everything it holds is bounded by the
 * caps in mp_swim_config_t.
 *
 * The protocol (docs/DESIGN.md "Membership" has the numbers):
 *
 * - Probing. Every period_ms the machine probes one member, walking the
 *   member list in a random order that is reshuffled after each full pass
 *   (new members are inserted at a random place in the pass in progress).
 *   PING -> ACK. No ACK within ping_timeout_ms: PING_REQ to indirect_k
 *   other members, which ping the target and relay its ACK. No ACK within
 *   a further ping_req_timeout_ms: the target becomes SUSPECT at its
 *   current incarnation, and it gets one more PING carrying that suspicion,
 *   so a live but slow target hears of it at once and refutes.
 * - Suspicion. A suspect is still a member. If it does not refute within
 *   the suspicion timeout (suspicion_mult * period_ms * ceil(log2(n+1)),
 *   at least suspicion_min_ms, n = live members), it is DEAD. Every peer
 *   runs this timer itself from the moment it hears of the suspicion, and
 *   a peer that hears of it from someone else also probes the suspect in
 *   its next period (up to 4 such urgent probes per period, on top of the
 *   round-robin one), with the suspicion on that PING: a live suspect
 *   learns of it within about a period and refutes, even when gossip is
 *   congested.
 * - Incarnations. Each member owns a 32-bit incarnation number that only it
 *   raises. For the same member, ALIVE@i beats anything @j < i; SUSPECT@i
 *   beats ALIVE@j <= i; DEAD/LEFT@i beat both @j <= i. A member that hears
 *   any claim that it is suspect/dead/left at incarnation i >= its own (or
 *   alive at i > its own, or alive at its own with another address) takes
 *   i+1 and gossips ALIVE@i+1: that refutes.
 * - Gossip. Every state change is queued and piggybacked on outgoing
 *   messages within a byte budget per message, each about
 *   retransmit_mult * ceil(log2(n+1)) times: alive news (own record,
 *   refutations) strictly before doubt (suspect/dead/left) before members
 *   new to us, fewest-sent first within each. Messages to a member in
 *   doubt carry only its own record.
 * - Leave. mp__swim_leave marks self LEFT and sends that update directly to
 *   leave_fanout members; from there it spreads by gossip.
 * - Join. mp__swim_join(bootstrap) asks one live member for its member list
 *   in pages (SYNC_REQ / SYNC, page_size entries each): a one-time O(N)
 *   transfer. The SYNC_REQ itself tells the bootstrap about the joiner,
 *   whose ALIVE update then spreads by gossip; every later PING it sends
 *   tells its target directly. resync_ms after the list is complete, the
 *   joiner pulls it once more from another random member: news that was
 *   still on its way to the bootstrap during the first pull, and whose
 *   gossip died out before anyone knew the joiner, is caught there.
 * - Restart with the same identity. A restarted peer starts at incarnation
 *   0. Its old record (alive, suspect or dead at incarnation i) reaches it
 *   in the bootstrap's pages, in gossip, or as a correction: whenever a
 *   peer gets a message from X whose claimed incarnation is older than the
 *   record it holds for X (or equal while it holds X suspect/dead/left), it
 *   puts X's record first in the piggyback of its next message to X. X then
 *   takes i+1, and ALIVE@i+1 replaces the old record everywhere (members
 *   see EV_ALIVE for it).
 *
 * Security (the sender id passed by the driver is the CURVE-authenticated
 * peer; everything inside a message is a claim):
 *
 * - Only X itself can make X LEFT or set X's confirmed address: an update
 *   about X counts as X's own only when the sender is X.
 * - DEAD or LEFT about X from anyone else is treated as a suspicion of X
 *   (with the note that it would end as DEAD or LEFT): this peer then runs
 *   its own suspicion timer, and X refutes it like any suspicion. So a
 *   forged update can never do more than make X suspect for a while.
 * - Incarnations of non-alive updates must be below 2^32-1, so X can
 *   always take i+1 to refute any claim this machine accepts.
 * - A third party's address for a member whose address is confirmed is
 *   kept as a hint (EV_HINT); the driver may dial it with the member's key,
 *   and if the CURVE handshake succeeds, call mp__swim_addr_verified.
 * - Caps: members (max_members; when full the oldest DEAD/LEFT record
 *   makes room, else new ones are refused and counted), gossip queue,
 *   pending probes, relayed probes, events, outgoing messages, and a token
 *   bucket for SYNC_REQs served and strangers admitted by their own PING
 *   (over it the whole message is dropped). Whatever is refused or dropped
 *   is counted in mp_swim_stats_t for the driver to log.
 *
 * Driver loop (see tests/sim/test_sim_swim.c for a complete one):
 *
 *   mp__swim_new(&cfg, my_id, my_addr, seed, now, &sw);
 *   mp__swim_join(sw, now, boot_id, boot_addr);   (unless first peer)
 *   on every decoded SWIM message:  mp__swim_on_message(sw, now, from, &msg)
 *   on a GOSSIP block found on other protocol traffic: same function
 *   when the clock reaches mp__swim_next_wakeup(sw): mp__swim_tick(sw, now)
 *   after each of these calls:
 *     while (mp__swim_poll_send(sw, &out)) encode out.msg, send to out.to
 *     while (mp__swim_poll_event(sw, &ev)) react / log
 *   to piggyback on other outgoing traffic: mp__swim_take_updates into a
 *   GOSSIP message.
 *   on close: mp__swim_leave(sw, now), send what poll_send returns, free.
 */
#ifndef MP_CORE_SWIM_H
#define MP_CORE_SWIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

#define MP_SWIM_ID_BYTES 32u
#define MP_SWIM_ADDR_MAX 256u /* bytes incl. the NUL: addresses <= 255 */
#define MP_SWIM_PB_MAX 32u    /* updates in one piggyback block */
#define MP_SWIM_PAGE_MAX 32u  /* entries in one SYNC page */
#define MP_SWIM_K_MAX 8u      /* indirect probes per failed direct probe */
/* Largest incarnation a received SUSPECT/DEAD/LEFT may carry. */
#define MP_SWIM_INC_CLAIM_MAX (UINT32_MAX - 1u)

/* Member states. The values are also the wire encoding. */
typedef enum {
    MP_SWIM_ALIVE = 0,
    MP_SWIM_SUSPECT = 1,
    MP_SWIM_DEAD = 2,
    MP_SWIM_LEFT = 3
} mp_swim_state_t;

/* Configuration; defaults in parentheses. mp__swim_new refuses (EINVAL):
 * a zero period or timeout, indirect_k > 8, suspicion_mult outside
 * 1..1000, retransmit_mult outside 1..16, piggyback_bytes > 4096,
 * max_members < 2, queue_max outside 1..2^24, max_pending_probes outside
 * 1..1024, max_relays > 4096, page_size outside 1..32, page_bytes outside
 * 512..9600, sync_rate > 10^6, sync_burst outside 1..10^6,
 * leave_fanout > 64, zero events_max or out_max. (The byte limits keep
 * every message within MP_SWIM_MSG_MAX.) */
typedef struct mp_swim_config {
    uint32_t period_ms;           /* protocol period: one probe each (250) */
    uint32_t ping_timeout_ms;     /* direct ACK wait (200) */
    uint32_t ping_req_timeout_ms; /* indirect phase after that (400) */
    uint32_t indirect_k;          /* PING_REQs per failed probe (3) */
    /* suspicion timeout = mult * period * ceil(log2(n+1)) (2) */
    uint32_t suspicion_mult;
    uint32_t suspicion_min_ms; /* floor of that timeout (2000) */
    /* sends per update = mult * ceil(log2(n+1)), at most 63 (2) */
    uint32_t retransmit_mult;
    uint32_t piggyback_bytes;    /* update bytes per SWIM message (1024) */
    uint32_t max_members;        /* member table cap, self included (65536) */
    uint32_t queue_max;          /* gossip updates queued at once (4096) */
    uint32_t max_pending_probes; /* own probes in flight (8) */
    uint32_t max_relays;         /* PING_REQs being served at once (64) */
    uint32_t page_size;          /* entries per SYNC page, <= 32 (32) */
    uint32_t page_bytes;         /* entry bytes per SYNC page (8192) */
    uint32_t sync_rate;  /* SYNC_REQs served + strangers admitted /s (50) */
    uint32_t sync_burst; /* token bucket depth (50) */
    uint32_t sync_timeout_ms; /* joiner: wait per page (1000) */
    uint32_t sync_retries;    /* joiner: resends of one page (5) */
    uint32_t resync_ms;       /* joiner: second pull, 0 = none (10000) */
    uint32_t dead_retain_ms;  /* DEAD/LEFT records kept (60000) */
    uint32_t leave_fanout;    /* direct LEAVE notices (4) */
    uint32_t events_max;      /* undelivered events kept (4096) */
    uint32_t out_max;         /* unsent messages kept (512) */
} mp_swim_config_t;

/* Fills *cfg with the defaults shown above. */
void mp__swim_config_default(mp_swim_config_t *cfg);

/* One gossip update (also one SYNC page entry): "member id is in state at
 * incarnation inc" (and, if has_addr, "reachable at addr"). */
typedef struct mp_swim_update {
    uint8_t id[MP_SWIM_ID_BYTES];
    uint8_t state;    /* mp_swim_state_t */
    uint8_t has_addr; /* 0 or 1 */
    uint32_t inc;
    char addr[MP_SWIM_ADDR_MAX]; /* NUL-terminated; "" if !has_addr */
} mp_swim_update_t;

/* Message types; the numbers are the wire "t" (docs/PROTOCOL.md). */
typedef enum {
    MP_SWIM_MSG_PING = 16,     /* probe; carries the sender's address */
    MP_SWIM_MSG_ACK = 17,      /* answer to PING (relayed: has target) */
    MP_SWIM_MSG_PING_REQ = 18, /* "ping target for me" */
    MP_SWIM_MSG_SYNC_REQ = 19, /* joiner -> bootstrap: page at cursor */
    MP_SWIM_MSG_SYNC = 20,     /* bootstrap -> joiner: one page */
    MP_SWIM_MSG_GOSSIP = 21    /* only updates (piggyback block, LEAVE) */
} mp_swim_msg_type_t;

/* A decoded SWIM message. Which fields mean something depends on type:
 *   all:      inc (sender's incarnation), updates[0..n_updates)
 *   PING:     seq, addr (sender's own address)
 *   ACK:      seq; has_target + target when relayed for a PING_REQ
 *   PING_REQ: seq, target (has_target = 1)
 *   SYNC_REQ: cursor, addr (sender's own address)
 *   SYNC:     cursor (of the request), next (0 = last page),
 *             entries[0..n_entries)
 * About 19 KB: keep it off small stacks. */
typedef struct mp_swim_msg {
    mp_swim_msg_type_t type;
    uint32_t inc;
    uint64_t seq;
    uint8_t has_target;
    uint8_t target[MP_SWIM_ID_BYTES];
    char addr[MP_SWIM_ADDR_MAX];
    uint32_t cursor;
    uint32_t next;
    uint32_t n_entries;
    mp_swim_update_t entries[MP_SWIM_PAGE_MAX];
    uint32_t n_updates;
    mp_swim_update_t updates[MP_SWIM_PB_MAX];
} mp_swim_msg_t;

/* A message to send: encode msg (wire_swim.h) and send it to `to`. */
typedef struct mp_swim_out {
    uint8_t to[MP_SWIM_ID_BYTES];
    mp_swim_msg_t msg;
} mp_swim_out_t;

typedef enum {
    MP_SWIM_EV_JOINED = 1,  /* a member this peer did not know (any state) */
    MP_SWIM_EV_ALIVE,       /* back to alive: refuted, or rejoined */
    MP_SWIM_EV_SUSPECT,     /* became suspect */
    MP_SWIM_EV_DEAD,        /* declared dead by this peer's own timer */
    MP_SWIM_EV_LEFT,        /* left gracefully */
    MP_SWIM_EV_ADDR,        /* the member's address changed: redial */
    MP_SWIM_EV_HINT,        /* a third party names another address: verify
                               it, then mp__swim_addr_verified */
    MP_SWIM_EV_REFUTED,     /* self: took a new incarnation to refute */
    MP_SWIM_EV_SYNCED,      /* join: the last page arrived */
    MP_SWIM_EV_SYNC_FAILED, /* join: bootstrap silent; try another */
    MP_SWIM_EV_REMOVED,     /* a DEAD/LEFT record was forgotten */
    MP_SWIM_EV_RENEWED      /* an alive member took a newer incarnation
                               at the same state (a refutation, or its
                               reachability changed): worth a new dial */
} mp_swim_event_type_t;

typedef struct mp_swim_event {
    mp_swim_event_type_t type;
    uint8_t id[MP_SWIM_ID_BYTES]; /* the member (self for REFUTED, the
                                     bootstrap for SYNCED / SYNC_FAILED) */
    uint8_t state;                /* its state after the event */
    uint32_t inc;                 /* its incarnation after the event */
} mp_swim_event_t;

/* A member as seen by this peer. The strings point into the machine and
 * stay valid until the next call that takes a non-const mp_swim_t. */
typedef struct mp_swim_member {
    uint8_t id[MP_SWIM_ID_BYTES];
    uint8_t state; /* mp_swim_state_t */
    bool is_self;
    bool addr_confirmed; /* address came from the member itself (or was
                            verified by the driver) */
    uint32_t inc;
    const char *addr; /* "" if unknown */
    const char *hint; /* unverified other address, or NULL */
} mp_swim_member_t;

/* Counters of what was refused, dropped or ignored, for logging. They only
 * grow. */
typedef struct mp_swim_stats {
    uint64_t refused_cap;    /* new members refused: table full */
    uint64_t rejected;       /* invalid updates (state, incarnation) */
    uint64_t downgraded;     /* third-party DEAD/LEFT taken as suspicion */
    uint64_t addr_hints;     /* third-party address changes kept as hint */
    uint64_t queue_dropped;  /* gossip updates evicted from a full queue */
    uint64_t events_dropped; /* events lost: queue full */
    uint64_t out_dropped;    /* messages not sent: queue full */
    uint64_t probes_skipped; /* periods without probe: too many pending */
    uint64_t relays_refused; /* PING_REQs refused: too many served */
    uint64_t sync_served;    /* SYNC pages sent */
    uint64_t joins_refused;  /* SYNC_REQs, and PINGs from unknown peers,
                                dropped by the rate limit */
    uint64_t unexpected;     /* ACK/SYNC matching nothing pending */
    uint64_t refutes;        /* times self took a new incarnation */
    uint64_t inc_exhausted;  /* refutes impossible: incarnation at max */
    uint64_t suspicions;     /* suspicions started by own probes */
} mp_swim_stats_t;

typedef struct mp_swim mp_swim_t;

/* Creates a machine for the peer self_id reachable at self_addr (NUL-
 * terminated, < MP_SWIM_ADDR_MAX bytes; may be "" if unknown), with
 * incarnation 0. seed drives every random choice (probe order, sequence
 * numbers, hash keys); now_ms is the current time. cfg NULL = defaults.
 * Errors: EINVAL (NULL args, invalid config or address), ENOMEM. The
 * caller owns *out and frees it with mp__swim_free. */
moshpit_err_t mp__swim_new(const mp_swim_config_t *cfg,
                           const uint8_t self_id[MP_SWIM_ID_BYTES],
                           const char *self_addr, uint64_t seed,
                           uint64_t now_ms, mp_swim_t **out);
void mp__swim_free(mp_swim_t *sw); /* NULL ok */

/* Joins through a live member: records it (address from the local
 * configuration, trusted) and starts pulling its member list. A second
 * call replaces a join in progress. Errors: EINVAL (NULL, own id, bad
 * address, after leave), ENOMEM (member table full). */
moshpit_err_t mp__swim_join(mp_swim_t *sw, uint64_t now_ms,
                            const uint8_t boot_id[MP_SWIM_ID_BYTES],
                            const char *boot_addr);

/* This peer's address changed (it advertises what others observed, or a
 * new verdict): takes a new incarnation with the new address, so that the
 * change replaces the old record everywhere by gossip. Errors: EINVAL
 * (NULL, bad address, after leave, incarnations used up), ENOMEM. */
moshpit_err_t mp__swim_set_self_addr(mp_swim_t *sw, const char *addr);
/* This peer can be dialled now where it could not before (docs/DESIGN.md,
 * "Reachability asked again"): takes a new incarnation at the same
 * address, so that members that gave up dialling it hear of it by gossip
 * (MP_SWIM_EV_RENEWED) and dial again. Errors: EINVAL (NULL, after leave,
 * incarnations used up). */
moshpit_err_t mp__swim_renew_self(mp_swim_t *sw);

/* Pulls the member list of the live member `id` once more, like the
 * follow-up pull of a join (no SYNCED event). For a member whose only
 * paths to the swarm go through a few others (an outbound-only peer behind
 * a NAT): gossip reaches it only from those few, each update a bounded
 * number of times, so a refutation or a restart can miss it for good; a
 * periodic pull repairs that (docs/DESIGN.md, "Peers behind NAT").
 * Errors: EINVAL (NULL, own id, not a live member, after leave), EBUSY (a
 * pull is under way). */
moshpit_err_t mp__swim_pull(mp_swim_t *sw, uint64_t now_ms,
                            const uint8_t id[MP_SWIM_ID_BYTES]);

/* Leaves gracefully: self becomes LEFT, the LEFT update is queued for
 * leave_fanout random live members; probing stops. Send what poll_send
 * returns, then free. Idempotent. */
void mp__swim_leave(mp_swim_t *sw, uint64_t now_ms);

/* A decoded SWIM message from the authenticated peer `from`: processes its
 * header (the sender's own incarnation and address), its piggybacked
 * updates, then the message itself. Never fails on content: whatever is
 * invalid is ignored and counted. Errors: EINVAL (NULL arguments). */
moshpit_err_t mp__swim_on_message(mp_swim_t *sw, uint64_t now_ms,
                                  const uint8_t from[MP_SWIM_ID_BYTES],
                                  const mp_swim_msg_t *msg);

/* Piggybacked updates that arrived on other traffic from `from`. Same
 * rules as the updates inside mp__swim_on_message. */
void mp__swim_absorb(mp_swim_t *sw, uint64_t now_ms,
                     const uint8_t from[MP_SWIM_ID_BYTES],
                     const mp_swim_update_t *updates, size_t n);

/* Takes gossip updates to piggyback on a message to `to` (NULL: unknown
 * receiver): at most max_n (at most MP_SWIM_PB_MAX are taken) whose sizes
 * (mp__swim_update_bytes) add up to at most max_bytes. After a leave our
 * LEFT record comes first, then a correction for `to` if it is due; a
 * member in doubt gets nothing else. Each taken update counts as one
 * transmission. Returns how many were written to out. Encode them with
 * mp__wire_swim_block_encode (a GOSSIP message, at most MP_SWIM_BLOCK_OVERHEAD
 * bytes more than max_bytes). */
size_t mp__swim_take_updates(mp_swim_t *sw, const uint8_t to[MP_SWIM_ID_BYTES],
                             size_t max_bytes, mp_swim_update_t *out,
                             size_t max_n);

/* Size of u in the canonical encoding of a piggyback list (msgpack array
 * of [id, state, inc] or [id, state, inc, addr]); a block of updates costs
 * their sum plus its fixed framing (wire_swim.h). */
size_t mp__swim_update_bytes(const mp_swim_update_t *u);

/* Runs whatever is due at now_ms (probes, timeouts, suspicion expiry,
 * record expiry, join retries). Call it when now_ms reaches
 * mp__swim_next_wakeup; calling it more often is harmless. */
void mp__swim_tick(mp_swim_t *sw, uint64_t now_ms);

/* Earliest time mp__swim_tick has something to do; UINT64_MAX = nothing
 * (after leave). May be <= now: tick at once. */
uint64_t mp__swim_next_wakeup(const mp_swim_t *sw);

/* Pulls one message to send, with piggybacked updates already attached
 * (up to piggyback_bytes). Returns false when none is waiting. */
bool mp__swim_poll_send(mp_swim_t *sw, mp_swim_out_t *out);

/* Pulls one event, oldest first. Returns false when none is waiting. */
bool mp__swim_poll_event(mp_swim_t *sw, mp_swim_event_t *ev);

/* The driver reached `id` at addr and the CURVE handshake proved the key:
 * that address becomes the member's confirmed address. Returns false if
 * the member is unknown or addr invalid. */
bool mp__swim_addr_verified(mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES],
                            const char *addr);

/* The driver has a new direct link with `id` (a session with it came up)
 * while this machine may hold it suspect, dead or left: a partition that
 * healed, a peer that thawed or restarted. Then nobody would ever probe
 * it again, and if it holds us dead too, neither side learns otherwise.
 * So unless the member is unknown, self or ALIVE, this starts a probe of
 * it now whose PING carries its record: it refutes (ALIVE at a higher
 * incarnation), and its answer carries its incarnation, so that we
 * correct it too if it holds us in doubt. Returns true if a probe was
 * started (false also when max_pending_probes are in flight). */
bool mp__swim_contact(mp_swim_t *sw, uint64_t now_ms,
                      const uint8_t id[MP_SWIM_ID_BYTES]);

/* Looks a member up (self included). Returns false if unknown. */
bool mp__swim_lookup(const mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES],
                     mp_swim_member_t *out);

/* Iterates over all known members, self and DEAD/LEFT records included:
 * start with *cursor = 0, call until it returns false. The order is
 * unspecified; modifying the machine invalidates the cursor. */
bool mp__swim_member_next(const mp_swim_t *sw, size_t *cursor,
                          mp_swim_member_t *out);

/* Members ALIVE or SUSPECT, self included (0 after leave). */
size_t mp__swim_live_count(const mp_swim_t *sw);

/* Estimated swarm size used for the log(n) scalings: the live count, at
 * least 1. */
size_t mp__swim_size_estimate(const mp_swim_t *sw);

/* Suspicion timeout and retransmissions per update at the current size. */
uint64_t mp__swim_suspicion_ms(const mp_swim_t *sw);
uint32_t mp__swim_retransmits(const mp_swim_t *sw);

/* Gossip updates still queued for retransmission (0 = quiet: only probes
 * and their answers are being sent). */
size_t mp__swim_pending_updates(const mp_swim_t *sw);

/* Whether a member-list pull (the join's, or its follow-up) is in
 * progress or still scheduled. */
bool mp__swim_syncing(const mp_swim_t *sw);

/* Own incarnation; whether the join (if any) has received its last page;
 * whether the machine has left. */
uint32_t mp__swim_self_inc(const mp_swim_t *sw);
/* Probing partners only (docs/DESIGN.md, "Sessions"). With fn set, the
 * round-robin probe skips members for which fn(ctx, id) is false, and
 * PING_REQ helpers and the second member-list pull are partners when one
 * is alive, and an urgent probe of a member someone else suspects goes
 * only to a partner.
 * Members that are nobody's partner here are probed by the peers whose
 * partners they are, and their state reaches this peer by gossip. fn must
 * not call back into the machine. NULL (the default) = every member. */
void mp__swim_set_partners(mp_swim_t *sw,
                           bool (*fn)(void *ctx,
                                      const uint8_t id[MP_SWIM_ID_BYTES]),
                           void *ctx);
bool mp__swim_synced(const mp_swim_t *sw);
bool mp__swim_has_left(const mp_swim_t *sw);

void mp__swim_get_stats(const mp_swim_t *sw, mp_swim_stats_t *out);

#endif
