/* SPDX-License-Identifier: MIT */
/*
 * simnet.h - deterministic in-memory network with a virtual clock, shared by
 * the simulation tests (tests/sim). Nodes are handler pairs (message,
 * timer) with a user pointer; everything happens in one thread, driven by a
 * heap-ordered event queue (virtual time in ms, then sequence number),
 * so a run is reproducible byte for byte from its seed.
 *
 * Links are directed (a -> b). A link has a latency (ms) and a bandwidth
 * (bytes per second, 0 = unlimited); messages on a link are serialized: a
 * message of B wire bytes occupies the link for B / bandwidth (tracked in
 * nanoseconds, delivery rounded up to the next ms) and is delivered
 * latency ms after its last byte left. Delivery on a link is FIFO, also
 * with jitter. Link parameters: a net-wide default, per-node bandwidth
 * (a link gets the minimum of both ends), and per-link overrides. Optional
 * random loss (parts per million) and links taken down (partitions) drop
 * messages at send time; retransmission loss delays them instead (TCP), and
 * a latency spread gives every link its own fixed latency.
 *
 * Per-link state is kept in a hash table and is created only for links that
 * need it (finite bandwidth, jitter, or an override), so thousands of nodes
 * on unlimited links cost nothing per pair.
 *
 * Kills: a dead node processes no more events, its timers are dropped,
 * messages to it are dropped, and messages it sent whose last byte had not
 * left the link when it died are dropped too (like a TCP reset); messages
 * already on the wire are still delivered. A kill hook lets the test react
 * (e.g. tell the others about a disconnect after some delay).
 *
 * Ownership: simnet_send copies the payload; the handler sees it (16-byte
 * aligned) only during the call. Out of memory aborts the test program.
 */
#ifndef MP_TESTS_SIMNET_H
#define MP_TESTS_SIMNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct simnet simnet_t;

#define SIMNET_ARGS 4

typedef struct simnet_msg {
    uint32_t src, dst;
    uint32_t type;             /* test-defined tag */
    uint64_t arg[SIMNET_ARGS]; /* small test-defined fields */
    const void *data;          /* payload, len bytes */
    size_t len;
} simnet_msg_t;

typedef struct simnet_ops {
    void (*on_msg)(simnet_t *s, uint32_t node, const simnet_msg_t *m,
                   void *user);
    void (*on_timer)(simnet_t *s, uint32_t node, uint64_t tag, void *user);
} simnet_ops_t;

typedef struct simnet_stats {
    uint64_t events;    /* events dispatched to live nodes */
    uint64_t msgs_sent; /* accepted by simnet_send */
    uint64_t msgs_delivered;
    uint64_t msgs_dropped; /* loss, link down, dead sender or receiver */
    uint64_t bytes_delivered;
} simnet_stats_t;

/* A new empty network; the seed drives every random choice. */
simnet_t *simnet_new(uint64_t seed);
void simnet_free(simnet_t *s); /* NULL ok; frees undelivered messages */

/* Adds a node; returns its id (0, 1, 2, ... in order of creation). ops is
 * borrowed and must outlive the net. */
uint32_t simnet_add_node(simnet_t *s, const simnet_ops_t *ops, void *user);
uint32_t simnet_nodes(const simnet_t *s);

/* Current virtual time in ms. */
uint64_t simnet_now(const simnet_t *s);

/* ---- topology (set before or during a run) ---- */
void simnet_set_default_link(simnet_t *s, uint32_t latency_ms,
                             uint64_t bytes_per_s);
void simnet_set_node_bw(simnet_t *s, uint32_t node, uint64_t bytes_per_s);
void simnet_set_link(simnet_t *s, uint32_t a, uint32_t b, uint32_t latency_ms,
                     uint64_t bytes_per_s);
void simnet_set_link_down(simnet_t *s, uint32_t a, uint32_t b, bool down);
void simnet_set_jitter(simnet_t *s, uint32_t max_extra_ms);
void simnet_set_loss(simnet_t *s, uint32_t ppm);
/* Every directed link a -> b without an override gets a fixed extra latency
 * in [0, spread_ms], a hash of (seed, a, b): paths differ as in a real
 * network, yet each link's latency is constant, so delivery stays FIFO on
 * unlimited links without any per-link state (thousands of nodes). */
void simnet_set_latency_spread(simnet_t *s, uint32_t spread_ms);
/* TCP-like loss: each transmission of a message is lost with probability
 * ppm / 1e6 and repeated after rto_ms, the timeout doubling per retry (at
 * most 10 retries are drawn); the message is delayed, never dropped, and it
 * holds back the messages sent after it on its link (in-order delivery:
 * head-of-line blocking, as on one TCP connection). */
void simnet_set_retransmit(simnet_t *s, uint32_t ppm, uint32_t rto_ms);
/* Bytes a message costs on the wire beyond its payload (default 32). */
void simnet_set_overhead(simnet_t *s, uint32_t bytes);

/* ---- actions (from handlers or from the test) ---- */

/* Queues a message m->src -> m->dst (payload copied). Sends from a dead
 * node are ignored. */
void simnet_send(simnet_t *s, const simnet_msg_t *m);

/* Virtual ms at which link a -> b has transmitted everything queued on it
 * (<= now when idle). Drivers use it as a socket's "can take more". */
uint64_t simnet_link_free_at(const simnet_t *s, uint32_t a, uint32_t b);

/* Calls on_timer(node, tag) at virtual time at_ms (clamped to now). Timers
 * cannot be cancelled: handlers ignore the ones they no longer want. */
void simnet_timer(simnet_t *s, uint32_t node, uint64_t at_ms, uint64_t tag);

/* Kills a node now, at a virtual time, or right after it has processed its
 * k-th event (k == 0 or already reached: now). */
void simnet_kill(simnet_t *s, uint32_t node);
void simnet_kill_at(simnet_t *s, uint32_t node, uint64_t at_ms);
void simnet_kill_after(simnet_t *s, uint32_t node, uint64_t k);
void simnet_set_kill_hook(simnet_t *s,
                          void (*fn)(simnet_t *s, uint32_t node, void *user),
                          void *user);
bool simnet_alive(const simnet_t *s, uint32_t node);
uint64_t simnet_death_time(const simnet_t *s, uint32_t node); /* or MAX */
uint64_t simnet_node_events(const simnet_t *s, uint32_t node);

/* Runs events with time <= until_ms until none is left or simnet_stop was
 * called. Returns the number of events dispatched. */
uint64_t simnet_run(simnet_t *s, uint64_t until_ms);
void simnet_stop(simnet_t *s);
bool simnet_idle(const simnet_t *s); /* no event pending */

/* ---- randomness (xoshiro256**, seeded by splitmix64) ---- */
uint64_t simnet_rand(simnet_t *s);
uint64_t simnet_rand_below(simnet_t *s, uint64_t bound); /* bound > 0 */
double simnet_rand01(simnet_t *s);                       /* [0, 1) */

/* Stand-alone generator for test data, same algorithm. */
typedef struct simnet_rng {
    uint64_t s[4];
} simnet_rng_t;
void simnet_rng_seed(simnet_rng_t *r, uint64_t seed);
uint64_t simnet_rng_next(simnet_rng_t *r);
uint64_t simnet_rng_below(simnet_rng_t *r, uint64_t bound);
double simnet_rng01(simnet_rng_t *r);

/* ---- observation ---- */
void simnet_get_stats(const simnet_t *s, simnet_stats_t *out);
/* Hash over every dispatched event (time, node, kind, header fields):
 * equal hashes mean identical schedules. */
uint64_t simnet_trace_hash(const simnet_t *s);

#endif
