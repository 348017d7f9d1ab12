/* SPDX-License-Identifier: MIT */
/*
 * swim_world.h - a swarm of SWIM machines (core/swim.h) on the simulated
 * network (simnet.h), driven exactly as the real driver would: every
 * outgoing message is encoded with wire_swim.c, travels through simnet
 * (latency, jitter, loss, kills), is decoded and handed to
 * mp__swim_on_message with the sender's identity; timers fire at
 * mp__swim_next_wakeup. Used by test_sim_swim.c and test_sim_swim_10k.c.
 *
 * Peers are numbered 0..max-1. Peer p's identity is 32 bytes whose first 4
 * are p (big-endian) and the rest a fixed hash of p; its address is
 * "s:<p>". A peer runs on a simnet node; a restart puts a fresh machine
 * (incarnation 0, same identity) on a new node. Every simnet payload is the
 * sender's 32-byte identity followed by the encoded message: honest peers
 * always send their own, and swim_world_inject lets a test send as any
 * identity (an attacker owning many keys). Byte counts are of the encoded
 * messages only.
 */
#ifndef MP_TESTS_SWIM_WORLD_H
#define MP_TESTS_SWIM_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/swim.h"
#include "sim/simnet.h"

typedef struct swim_world swim_world_t;

/* Called for every event any peer polls, at the time it happens. */
typedef void (*swim_world_event_fn)(swim_world_t *w, uint32_t peer,
                                    const mp_swim_event_t *ev, void *user);

swim_world_t *swim_world_new(uint32_t max_peers, const mp_swim_config_t *cfg,
                             uint64_t seed, uint32_t latency_ms,
                             uint32_t jitter_ms);
void swim_world_free(swim_world_t *w);
simnet_t *swim_world_net(swim_world_t *w);
uint64_t swim_world_now(const swim_world_t *w);
void swim_world_set_hook(swim_world_t *w, swim_world_event_fn fn, void *user);

void swim_world_id(uint32_t peer, uint8_t id[MP_SWIM_ID_BYTES]);
/* The peer an identity belongs to, or -1. */
int64_t swim_world_peer_of(const swim_world_t *w, const uint8_t *id);
const char *swim_world_addr(uint32_t peer, char buf[16]);

/* Starts (or restarts) peer p: a fresh machine on a new simnet node. */
void swim_world_start(swim_world_t *w, uint32_t p);
/* The same with another configuration than the world's. */
void swim_world_start_with(swim_world_t *w, uint32_t p,
                           const mp_swim_config_t *cfg);
/* p joins through boot over the network. */
void swim_world_join(swim_world_t *w, uint32_t p, uint32_t boot);
/* Gives p, without any network traffic, the member list a converged
 * bootstrap `boot` would send in its SYNC pages: every peer in
 * members[0..n) ALIVE at incarnation 0 with its address. The pages go
 * through mp__swim_on_message like real ones (learned silently, no
 * gossip). Builds large converged swarms cheaply; start such peers with
 * resync_ms = 0 (their joins are long done), or each pulls the list again
 * from a real member. */
void swim_world_seed_view(swim_world_t *w, uint32_t p, uint32_t boot,
                          const uint32_t *members, uint32_t n);
void swim_world_kill(swim_world_t *w, uint32_t p);
bool swim_world_alive(const swim_world_t *w, uint32_t p);
mp_swim_t *swim_world_sw(swim_world_t *w, uint32_t p);

/* Called with every message delivered to a live peer, before decoding:
 * the sender's identity and the encoded bytes (valid during the call). */
typedef void (*swim_world_recv_fn)(swim_world_t *w, uint32_t peer,
                                   const uint8_t *from, const uint8_t *bytes,
                                   size_t len, void *user);
void swim_world_set_recv_hook(swim_world_t *w, swim_world_recv_fn fn,
                              void *user);

/* Called with every message a peer sends to another peer, before it goes
 * out: returns how many ms it waits first (0: none), e.g. for a session
 * being dialled (test_sim_sessions.c). Held messages go out in order. */
typedef uint32_t (*swim_world_send_fn)(swim_world_t *w, uint32_t from,
                                       uint32_t to, void *user);
void swim_world_set_send_hook(swim_world_t *w, swim_world_send_fn fn,
                              void *user);

/* Sends len raw bytes (at most MP_SWIM_MSG_MAX) to peer `to` as identity
 * `from`; the receiver decodes them like any message, but drops what the
 * decoder refuses (counted) where an honest peer's bytes would abort. */
#define SWIM_WORLD_RAW 0xffu
void swim_world_inject_raw(swim_world_t *w, const uint8_t *from, uint32_t to,
                           const uint8_t *bytes, size_t len);
uint64_t swim_world_raw_refused(const swim_world_t *w);

/* Sends msg to peer `to` as identity `from` (from an attacker's node). */
void swim_world_inject(swim_world_t *w, const uint8_t *from, uint32_t to,
                       const mp_swim_msg_t *msg);

void swim_world_run(swim_world_t *w, uint64_t until_ms);

/* Encoded bytes and messages peer p sent since the last reset. */
uint64_t swim_world_bytes(const swim_world_t *w, uint32_t p);
uint64_t swim_world_msgs(const swim_world_t *w, uint32_t p);
void swim_world_reset_counts(swim_world_t *w);

/* Hash over every event of every peer (time, peer, type, subject, state,
 * incarnation) and simnet's own trace: equal = identical runs. */
uint64_t swim_world_trace(const swim_world_t *w);

/* Checks that every live peer among peers[0..n) sees exactly those peers,
 * all ALIVE, each at the incarnation it has itself and with its address.
 * Returns the number of (observer, subject) pairs that are wrong and puts
 * a description of the first into why (if not NULL). */
uint64_t swim_world_check_view(swim_world_t *w, const uint32_t *peers,
                               uint32_t n, char *why, size_t why_len);
/* The same check for the views of observers[0..nobs) only. */
uint64_t swim_world_check_views_of(swim_world_t *w, const uint32_t *observers,
                                   uint32_t nobs, const uint32_t *peers,
                                   uint32_t n, char *why, size_t why_len);

/* Time within which every survivor declares a killed peer dead, at swarm
 * size n, under configuration c (docs/DESIGN.md "Membership"):
 *   10 periods       until some survivor probes it (each period each of
 *                    the n-1 others probes one member: it escapes a period
 *                    with probability ~1/e, ten periods ~4.5e-5);
 * + ping_timeout + ping_req_timeout: that probe fails, first suspicion;
 * + 2 * ceil(log2(n+1)) periods: the suspicion reaches every survivor
 *                    (gossip needs ~log2(n) periods; factor 2 of margin);
 * + the suspicion timeout each survivor then runs itself. */
uint64_t swim_world_detection_bound(const mp_swim_config_t *c, uint64_t n);

/* For an event hook: ev, seen by peer, if it is DEAD or LEFT about a
 * simulated peer. A subject still alive counts in *false_dead; a dead one
 * that is victims[v] has the first such time stored in
 * dead_at[peer * nvictims + v] (UINT64_MAX until then). */
void swim_world_note_dead(swim_world_t *w, uint32_t peer,
                          const mp_swim_event_t *ev, const uint32_t *victims,
                          uint32_t nvictims, uint64_t *dead_at,
                          uint64_t *false_dead);

#endif
