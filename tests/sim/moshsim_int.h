/* SPDX-License-Identifier: MIT */
/*
 * moshsim_int.h - what moshsim.c (the swarm: peers, views, rounds,
 * statistics) and moshsim_peer.c (one peer's round flow and its
 * matchmaker service) share: the state of a peer and of the swarm, and a
 * few helpers. Not for the tests; they use moshsim.h.
 */
#ifndef MP_TESTS_MOSHSIM_INT_H
#define MP_TESTS_MOSHSIM_INT_H

#include "sim/moshsim.h"

#include "core/grid.h"
#include "core/group.h"
#include "core/round.h"

#define NONE64 UINT64_MAX
#define HELD_MAX 4096u  /* parts held per peer before their GROUP */
#define BANDWIDTH 100u  /* announced by every peer */
#define ROUND_GAP 1000u /* ms between quiescence and the next round */

/* MSG_CTRL: a control message in wire form (mp__wire_msg_encode) sent by a
 * peer's round machine; MSG_PART: a part of a group all-reduce (native);
 * MSG_WIRE / MSG_FRAME: control message / data frame bytes from the hostile
 * peer's driver (counted in the wire statistics) */
enum { MSG_CTRL = 1, MSG_PART, MSG_WIRE, MSG_FRAME };
enum { TAG_START = 1, TAG_WAKE, TAG_HOSTILE };

typedef struct held {
    uint64_t gid;
    uint32_t from; /* peer */
    uint32_t kind, share, part, count;
    double wsum;
    float *data;
} held_t;

typedef struct speer {
    uint8_t id[MP_ID_BYTES];
    bool alive, known_dead;
    bool byz;      /* Byzantine: poisons its vector before each call */
    bool hostile;  /* never calls; the driver sends for it (moshsim.h) */
    bool outbound; /* outbound-only (moshsim.h) */
    float *values;
    double weight;
    mp_grid_t grid; /* the initial grid key; the last one once reaped */
    mp_rnd_t *rm;   /* the round machine (NULL once reaped) */
    uint64_t wake_at;
    /* the group of the call in progress, as peers (from its roster) */
    uint64_t gid;
    uint32_t n, self;
    uint32_t *members; /* n peers of the roster */
    held_t *held;
    size_t nheld, capheld;
    moshsim_call_t last;
} speer_t;

typedef struct cache_ent {
    uint8_t key[MP_KEY_MAX];
    uint8_t len; /* 0 = free */
    uint8_t n;
    uint32_t cand[MOSHSIM_CANDIDATES];
} cache_ent_t;

typedef struct kill_req {
    uint32_t peer, after_ms;
} kill_req_t;

struct moshsim {
    moshsim_cfg_t c;
    moshpit_config_t peer_cfg; /* every peer's, from c (moshsim_new) */
    simnet_t *net;
    simnet_rng_t rng;  /* round plans: misses, churn, start jitter */
    simnet_rng_t data; /* values, weights */
    uint64_t id_state;
    speer_t *p;
    uint32_t np, capp;
    uint32_t *idx; /* id -> peer, open addressing, MOSHSIM_NONE = free */
    size_t capidx;
    /* default view: live peers at round start */
    uint32_t *live;
    uint8_t (*live_ids)[MP_ID_BYTES];
    size_t nlive;
    bool view_dirty;
    cache_ent_t *cache;
    size_t capcache, ncache;
    /* custom views */
    moshsim_view_fn view_fn;
    void *view_user;
    uint32_t *vbuf;
    uint8_t (*vids)[MP_ID_BYTES];
    size_t capv;
    kill_req_t *kills;
    size_t nkills, capkills;
    uint32_t round;
    uint64_t last_start, next_start;
    uint32_t left, joined, called, skipped;
    double scale;   /* max |x| of the initial values */
    double *target; /* initial weighted mean of the honest peers */
    /* the hostile peer (moshsim_wire.c) */
    uint32_t hostile; /* MOSHSIM_NONE: none */
    moshsim_hostile_ops_t hops;
    void *huser;
    moshsim_wire_stats_t wstats;
    struct mp_msg *wmsg;       /* decode / encode scratch (every peer's) */
    struct mp_swim_msg *wswim; /* decode scratch */
    uint8_t *wbuf;             /* MP_CTRL_MAX bytes */
    float *dec;                /* compressed parts decoded (decn floats) */
    size_t decn;
};

/* Peer i is simnet node i + 1; node 0 is the driver (crash notices). */
static inline uint32_t node_of(uint32_t peer) {
    return peer + 1;
}

/* moshsim.c: allocation that aborts on failure, a mixer, the id index,
 * views and candidate lists. */
void *moshsim__xmalloc(size_t n);
void *moshsim__xrealloc(void *p, size_t n);
uint64_t moshsim__mix64(uint64_t x);
/* The peer with this id, or MOSHSIM_NONE. */
uint32_t moshsim__find_id(const moshsim_t *s, const uint8_t id[MP_ID_BYTES]);
/* Rebuilds the default view (the live peers) and empties the cache. */
void moshsim__rebuild_view(moshsim_t *s);
/* Peer q's view for a call: its size; *custom if the hook gave one (then
 * it is in s->vbuf / s->vids until the next call). */
size_t moshsim__view(moshsim_t *s, uint32_t q, bool *custom);
/* The first MOSHSIM_CANDIDATES of that view for key, as peers. */
size_t moshsim__candidates(moshsim_t *s, bool custom, size_t nview,
                           const uint8_t *key, size_t len,
                           uint32_t cand[MOSHSIM_CANDIDATES]);

/* moshsim_peer.c: the handlers of every node, the kill hook, a peer's
 * round machine, and the release of a call's state. */
extern const simnet_ops_t moshsim__ops;
void moshsim__kill_hook(simnet_t *net, uint32_t node, void *user);
moshpit_err_t moshsim__rnd_new(moshsim_t *s, uint32_t q);
/* The peer's current grid key. */
const mp_grid_t *moshsim__grid(const speer_t *p);
/* Frees what a dead peer holds (its machine: the grid is kept). */
void moshsim__reap(speer_t *p);
/* A part; returns an mp_part_status_t, or -1 held, -2 ignored. */
int moshsim__on_part(moshsim_t *s, uint32_t q, uint32_t from, uint32_t kind,
                     uint32_t share, uint32_t part, double wsum, uint64_t gid,
                     const float *data, uint32_t count);

/* moshsim_wire.c: wire scratch, the hostile peer's data frames, and what
 * it receives, in wire form. */
void moshsim__wire_scratch(moshsim_t *s);
void moshsim__wire_on_frame(moshsim_t *s, uint32_t q, uint32_t from,
                            const uint8_t *buf, size_t len);
/* A message delivered to the hostile peer, in wire form to ops.on_recv. */
void moshsim__wire_to_hostile(moshsim_t *s, const simnet_msg_t *m);
void moshsim__wire_free(moshsim_t *s);

#endif
