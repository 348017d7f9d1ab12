/* SPDX-License-Identifier: MIT */
/*
 * swim_int.h - internals of the SWIM machine shared by swim.c (protocol),
 * swim_member.c (what updates do to member records) and swim_table.c
 * (storage: member slots, id index, address arena, probe order, gossip
 * queue, event and message rings). Not part of the core's interface: only
 * these three files include it.
 */
#ifndef MP_CORE_SWIM_INT_H
#define MP_CORE_SWIM_INT_H

#include <string.h>

#include "base/base.h"
#include "core/swim.h"

#define SW_NONE UINT32_MAX
#define SW_FREE 0xffu /* state of an unused slot */
#define SW_TX_MAX 63u /* retransmissions per update are capped here */
#define SW_HINTS_MAX 64u
#define SW_URGENT_MAX 32u       /* suspects waiting for an urgent probe */
#define SW_URGENT_PER_PERIOD 4u /* urgent probes started per period */

/* Member flags. */
#define MF_SELF 0x01u
#define MF_CONFIRMED 0x02u /* address from the member itself / verified */
#define MF_CORRECT 0x04u   /* send it its own record with the next message */
#define MF_QUEUED 0x08u    /* has a gossip queue entry */
#define MF_HEARD 0x10u     /* has sent us a message itself */

/* One member slot: 44 bytes, so a 10,000-member view is ~0.6 MB. */
typedef struct sw_mem {
    uint8_t id[MP_SWIM_ID_BYTES];
    uint32_t inc;  /* free slots: next free slot */
    uint32_t addr; /* arena offset; 0 = "" */
    uint8_t state; /* mp_swim_state_t or SW_FREE */
    uint8_t flags;
    uint8_t intent; /* SUSPECT: what it ends as (SUSPECT means DEAD) */
    uint8_t pad;
} sw_mem_t;

/* Gossip queue classes, sent strictly in this order (then fewest
 * transmissions first): what keeps live members alive cannot be starved by
 * suspicions, and neither by news of members we never heard of (a flood of
 * made-up identities ends up there). */
enum {
    SW_Q_ALIVE = 0, /* self, refutations, alive news about known members */
    SW_Q_DOUBT,     /* suspect / dead / left */
    SW_Q_NEW,       /* members new to us */
    SW_Q_CLASSES
};
#define SW_BUCKETS (SW_Q_CLASSES * (SW_TX_MAX + 1u))

typedef struct sw_qent {
    uint32_t slot;
    uint32_t prev, next; /* bucket list links; next = free list when free */
    uint16_t tx;         /* transmissions so far */
    uint16_t cls;        /* SW_Q_* */
} sw_qent_t;

typedef struct sw_suspect {
    uint32_t slot;
    uint64_t deadline;
} sw_suspect_t;

typedef struct sw_tomb {
    uint32_t slot;
    uint32_t inc;
    uint64_t since;
} sw_tomb_t;

typedef struct sw_hint {
    uint32_t slot;
    uint32_t off; /* arena offset */
} sw_hint_t;

typedef struct sw_probe {
    uint8_t id[MP_SWIM_ID_BYTES];
    uint64_t seq;
    uint64_t direct_dl; /* end of the direct phase */
    uint64_t final_dl;  /* end of the indirect phase */
    uint8_t indirect;   /* PING_REQs sent */
    uint8_t notify;     /* only tells a new suspect; never escalates */
    uint8_t acked;      /* answered; kept so late relayed ACKs match */
    uint8_t nk;
    uint8_t k_ids[MP_SWIM_K_MAX][MP_SWIM_ID_BYTES];
} sw_probe_t;

typedef struct sw_relay {
    uint64_t our_seq, req_seq, deadline;
    uint8_t req[MP_SWIM_ID_BYTES];
    uint8_t target[MP_SWIM_ID_BYTES];
} sw_relay_t;

typedef struct sw_out {
    uint8_t to[MP_SWIM_ID_BYTES];
    uint8_t target[MP_SWIM_ID_BYTES];
    uint64_t seq;
    uint32_t cursor;
    uint8_t type;
    uint8_t has_target;
} sw_out_t;

struct mp_swim {
    mp_swim_config_t cfg;
    uint64_t rng;
    uint64_t hk0, hk1; /* keys of the id hash */
    uint32_t self;     /* slot of self */
    bool left;

    /* member slots */
    sw_mem_t *mem;
    uint32_t nslots, capslots; /* slots ever used / allocated */
    uint32_t free_head;
    uint32_t nused; /* slots holding a member (self and records included) */
    uint32_t nlive; /* ALIVE or SUSPECT, self included */

    /* id -> slot, open addressing with linear probing; htag holds 16 more
     * bits of each entry's hash, so a probe step rarely has to look at the
     * member itself (a cache miss per step in large views) */
    uint32_t *hix;
    uint16_t *htag;
    uint32_t hcap; /* power of two, or 0 */

    /* address strings */
    char *arena;
    uint32_t alen, acap, agarbage;

    /* randomized round-robin probe order: every slot once */
    uint32_t *order;
    uint32_t ptr;

    /* gossip queue: buckets by transmission count */
    sw_qent_t *q;
    uint32_t qcap, qfree, nqueued;
    uint32_t qhead[SW_BUCKETS], qtail[SW_BUCKETS]; /* [cls][tx] */

    sw_suspect_t *sus;
    uint32_t nsus, capsus;
    uint64_t sus_min; /* cached earliest deadline, UINT64_MAX = none */

    sw_tomb_t *tomb; /* FIFO by time */
    uint32_t tomb_head, ntomb, captomb;

    sw_hint_t hints[SW_HINTS_MAX];
    uint32_t nhints;

    sw_probe_t *probes;
    uint32_t nprobes;
    sw_relay_t *relays;
    uint32_t nrelays;

    sw_out_t *out;
    uint32_t out_head, nout, capout;
    mp_swim_event_t *ev;
    uint32_t ev_head, nev, capev;

    /* partners (mp__swim_set_partners): NULL = every member */
    bool (*partner)(void *ctx, const uint8_t id[MP_SWIM_ID_BYTES]);
    void *partner_ctx;

    uint64_t next_probe;
    uint32_t urgent[SW_URGENT_MAX];
    uint32_t nurgent;

    /* join (client side) */
    bool sync_active, synced;
    bool sync_second;   /* the follow-up pull after resync_ms */
    uint64_t resync_at; /* UINT64_MAX = none */
    uint8_t sync_boot[MP_SWIM_ID_BYTES];
    uint32_t sync_cursor, sync_tries, sync_pages;
    uint64_t sync_deadline;

    /* SYNC_REQ rate limit (server side), in thousandths of a request */
    uint64_t tokens, tokens_at;

    mp_swim_stats_t stats;
};

static inline bool sw_addr_ok(const char *s) {
    return s != NULL && strnlen(s, MP_SWIM_ADDR_MAX) < MP_SWIM_ADDR_MAX;
}

static inline bool sw_is_live(uint8_t st) {
    return st == MP_SWIM_ALIVE || st == MP_SWIM_SUSPECT;
}

static inline bool sw_is_self(const mp_swim_t *sw, const uint8_t *id) {
    return memcmp(sw->mem[sw->self].id, id, MP_SWIM_ID_BYTES) == 0;
}

/* ---- swim_table.c ---- */
uint64_t mp__sw_rand(mp_swim_t *sw);
uint64_t mp__sw_rand_below(mp_swim_t *sw, uint64_t bound); /* bound > 0 */
moshpit_err_t mp__sw_table_init(mp_swim_t *sw);
void mp__sw_table_free(mp_swim_t *sw);
uint32_t mp__sw_find(const mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES]);
/* New slot for id (state ALIVE, inc 0, no address) or SW_NONE if out of
 * memory. The caller checks max_members. */
uint32_t mp__sw_add(mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES]);
void mp__sw_remove(mp_swim_t *sw, uint32_t slot);
const char *mp__sw_str(const mp_swim_t *sw, uint32_t off);
/* Stores s (< MP_SWIM_ADDR_MAX bytes) and returns its offset, 0 for "" or
 * when out of memory. */
uint32_t mp__sw_store(mp_swim_t *sw, const char *s);
void mp__sw_release(mp_swim_t *sw, uint32_t off);
void mp__sw_set_addr(mp_swim_t *sw, uint32_t slot, const char *s);
/* Whether slot is a partner (mp__swim_set_partners; every member without
 * a partner rule). */
bool mp__sw_partner_ok(const mp_swim_t *sw, uint32_t s);
/* Next member to probe (ALIVE or SUSPECT, not self) or SW_NONE. */
uint32_t mp__sw_next_probe(mp_swim_t *sw);
/* A random ALIVE member other than self and the excluded slot. */
uint32_t mp__sw_random_alive(mp_swim_t *sw, uint32_t exclude);
/* Queues (or re-queues with a fresh count) the current record of slot, in
 * class cls (SW_Q_*). */
void mp__sw_enqueue(mp_swim_t *sw, uint32_t slot, unsigned cls);
void mp__sw_dequeue(mp_swim_t *sw, uint32_t slot);
uint32_t mp__sw_retransmits(const mp_swim_t *sw);
uint32_t mp__sw_ceil_log2(uint64_t x);
/* Grows a ring buffer (making it start at index 0); false at max entries
 * or out of memory. */
bool mp__sw_ring_grow(void **buf, uint32_t *cap, uint32_t *head, uint32_t n,
                      size_t esz, uint32_t max);
/* Queues an event about slot's member (dropped and counted when full). */
void mp__sw_event(mp_swim_t *sw, mp_swim_event_type_t type, uint32_t slot);
/* Queues a message to `to`, zeroed but for type and destination; NULL
 * (counted) when full. */
sw_out_t *mp__sw_out(mp_swim_t *sw, uint8_t type, const uint8_t *to);
/* The state a record travels as: a suspicion that would end as LEFT
 * travels as LEFT, one that would end as DEAD as SUSPECT. */
uint8_t mp__sw_wire_state(const sw_mem_t *m);
/* The update describing slot's record; the address is included for ALIVE
 * records, or for every state if with_addr. */
void mp__sw_member_update(const mp_swim_t *sw, uint32_t slot, bool with_addr,
                          mp_swim_update_t *u);
/* Takes queued updates, fewest transmissions first, skipping the records
 * of skip1 and skip2, while their sizes fit in budget; counts one
 * transmission each and retires those sent mp__sw_retransmits times. */
size_t mp__sw_take(mp_swim_t *sw, uint32_t skip1, uint32_t skip2, size_t budget,
                   mp_swim_update_t *out, size_t max_n);

/* ---- swim_member.c ---- */
enum {
    AB_GOSSIP, /* piggyback: learn, and pass on what was news */
    AB_SYNC,   /* page of a join: learn silently, it is old news */
    AB_HEADER  /* a message's sender: known members only (no address) */
};
/* Applies one update (from: the authenticated sender, or NULL). */
void mp__sw_absorb_one(mp_swim_t *sw, uint64_t now, const uint8_t *from,
                       const mp_swim_update_t *u, int mode);
/* Keeps liveness counts right; every state change goes through it. */
void mp__sw_set_state(mp_swim_t *sw, uint32_t slot, uint8_t st);
/* slot becomes SUSPECT at inc with its own timer; spread = gossip it. */
void mp__sw_suspect(mp_swim_t *sw, uint64_t now, uint32_t slot, uint32_t inc,
                    uint8_t intent, bool spread);
/* Next suspect to probe ahead of the round robin, or SW_NONE. */
uint32_t mp__sw_urgent_pop(mp_swim_t *sw);
/* A new slot for id, making room by forgetting the oldest DEAD/LEFT
 * record when the table is full; SW_NONE (counted) if refused. */
uint32_t mp__sw_add_member(mp_swim_t *sw, const uint8_t *id);
uint32_t mp__sw_hint_find(const mp_swim_t *sw, uint32_t slot);
void mp__sw_hint_drop(mp_swim_t *sw, uint32_t slot);
/* Suspicion timers and DEAD/LEFT record expiry due at now. */
void mp__sw_expire(mp_swim_t *sw, uint64_t now);

#endif
