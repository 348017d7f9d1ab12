/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the state of one peer (struct moshpit) and the engine thread
 * that owns it. The state is created and freed by the engine
 * (engine_open.c); src/api sees it only through engine_api.h. Application
 * threads and the engine thread share only the fields marked "under lock";
 * everything else belongs to the engine thread once it runs. A command
 * (mp_cmd_t) changes hands under mp->lock (cmd_posted); the inproc PAIR
 * pipe only wakes the engine up, so what the caller wrote into the command
 * is ordered before the engine reads it by our own mutex, not by libzmq's
 * internal queues (which ThreadSanitizer cannot see).
 */
#ifndef MP_NET_ENGINE_H
#define MP_NET_ENGINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/endpoint.h"
#include "base/log.h"
#include "core/fetch.h"
#include "core/grid.h"
#include "core/group.h"
#include "core/linkstat.h"
#include "core/swim.h"
#include "core/matchmaker.h"
#include "core/rendezvous.h"
#include "core/round.h"
#include "crypto/crypto.h"
#include "crypto/replay.h"
#include "crypto/session.h"
#include "engine_api.h"
#include "moshpit.h"
#include "platform.h"
#include "wire/wire.h"

/* Limits on what other peers can make this one hold (docs/DESIGN.md,
 * "Limits"); each one is logged when hit. */
#define MP_MM_KEYS MP_RND_MM_KEYS /* distinct group keys matchmade at once */
/* data frames held for rounds this peer has not started yet: in total,
 * and from one sender (a quarter of the total) */
#define MP_EARLY_MAX_BYTES ((size_t)256 << 20)
#define MP_EARLY_MAX_FRAMES 4096u
#define MP_EARLY_PEER_MAX_BYTES (MP_EARLY_MAX_BYTES / 4)
#define MP_EARLY_PEER_MAX_FRAMES (MP_EARLY_MAX_FRAMES / 4)
/* control messages read from one peer: the burst (seconds' worth of
 * config peer_msg_rate) */
#define MP_MSG_BURST_S 2u
/* A control message larger than MP_CTRL_MAX is dropped (and logged) by
 * the engine; ZeroMQ closes a connection that sends one larger than this
 * before reading it. */
#define MP_CTRL_WIRE_MAX (4u * MP_CTRL_MAX)
/* The largest data frame: a header, a part of float32 and the tag. */
#define MP_DATA_WIRE_MAX                                                       \
    ((int64_t)MP_DATA_HDR_BYTES + 4 * (int64_t)MP_DATA_MAX_COUNT +             \
     MP_DATA_TAG_BYTES)

typedef enum {
    MP_PEER_NEW = 0, /* known, no session yet */
    MP_PEER_LIVE,    /* session established */
    MP_PEER_DEAD,    /* disconnected or silent */
    MP_PEER_REFUSED, /* failed admission (either way) */
    MP_PEER_IDLE     /* a member (by membership) with no session open: never
                        had one, or it was closed over sessions_max; the
                        next message for it dials it (docs/DESIGN.md,
                        "Sessions") */
} mp_peer_state_t;

/* control messages that wait for a session being dialled */
#define MP_CTL_PENDING_MAX 8u

typedef struct mp_peer {
    uint8_t id[32];
    char id_txt[41];
    char ctrl_addr[MP_ADDR_MAX];
    char data_addr[MP_ADDR_MAX];
    mp_peer_state_t state;
    void *ctrl; /* DEALER, CURVE client, to their control ROUTER */
    void *data; /* DEALER to their data ROUTER */
    void *mon;  /* PAIR reading ctrl's monitor events */
    void *dmon; /* PAIR reading data's CONNECTED and DISCONNECTED events */
    /* outbound-only with several data connections: data then has no
     * routing id and only sends (its connections go to their ROUTER like
     * any dialable peer's); data_rx, one connection with our routing id
     * (my_drid), takes what they answer on it, and dmon_rx reads its
     * DISCONNECTED events; NULL otherwise (docs/DESIGN.md, "Peers behind
     * NAT") */
    void *data_rx;
    void *dmon_rx;
    /* descriptors of data's connections, as dmon's CONNECTED events named
     * them (ZeroMQ's I/O thread owns them: used only while their cookie,
     * 0 where the system has none, is the same and getpeername shows them
     * connected to data_addr), and the best bandwidth BBR estimated for
     * each at a round's start (bytes/s, mp__link_model_stale;
     * mp__engine_data_cc_restart) */
    int dfd[MP_DATA_STREAMS_MAX];
    uint64_t dck[MP_DATA_STREAMS_MAX];
    uint64_t dbw[MP_DATA_STREAMS_MAX];
    uint8_t ndfd;
    bool reorder_ok;  /* its HELLO said "rw": frames may overtake others */
    uint8_t nstreams; /* connections data was opened with, or widened to
                         (mp__engine_data_widen; MP_DATA_STREAMS_LOSSY
                         after a widening that failed, not tried again) */
    bool hello_recv;
    /* reachability (docs/DESIGN.md, "Peers behind NAT") */
    bool outbound; /* it said HELLO "ob": nobody can dial it, so we answer
                      on its connections: control on our ROUTER to
                      ctrl_rid, data on our data ROUTER to drid */
    bool reach_ok; /* we reached it ourselves at its advertised address (our
                      CURVE DEALER's handshake, or its answer on it): a
                      matchmaker candidate (unless outbound) */
    uint8_t ctrl_rid_len, drid_len;
    uint8_t ctrl_rid[255];        /* its control connection on our ROUTER */
    uint8_t drid[MP_DRID_MAX];    /* its data connection on our ROUTER */
    uint8_t my_drid[MP_DRID_MAX]; /* our data DEALER's routing id */
    uint64_t dial_ms; /* our control DEALER began dialling ctrl_addr */
    char seen_addr[MP_ADDR_MAX]; /* its host as our ROUTER saw it ("") */
    bool nr_sent;                /* we told it we could not dial it ("nr") */
    bool unreachable;            /* dead because it never answered our dial */
    bool tcp_up;                 /* our control DEALER's TCP connection is up */
    bool hs_failed;     /* its CURVE handshake failed (another key there) */
    bool renew_dial;    /* dialled again because membership renewed it (it may
                           be dialable now): still counted meanwhile */
    uint32_t reach_inc; /* its membership incarnation when we last began
                           to dial it or learned that it is outbound-only
                           (its HELLO "ob"; the end of our session with it
                           when we turned outbound-only): only a newer
                           record is dialled again (mp__engine_renew_due) */
    /* reachability asked again (engine_reach.c): our dial back to its
     * observed host for its request db_nonce, begun at db_start_ms (the
     * last one at db_last_ms, for the rate limit), and the nonce of the
     * request we sent it (0: none waits) */
    void *db_sock, *db_mon;
    bool db_up;
    uint32_t db_nonce, ask_nonce;
    uint64_t db_start_ms, db_last_ms;
    /* session key agreement (docs/PROTOCOL.md, "Session setup"): our
     * ephemeral X25519 key for this peer, made fresh for every session;
     * its secret stays until the session ends, so an answer to it can still
     * be keyed */
    uint8_t my_eph[32];
    uint8_t *my_eph_sec;   /* secure memory, 32; NULL: no ephemeral key yet */
    bool my_eph_used;      /* session keys were derived with it */
    bool my_eph_retire;    /* our session ended: the next use makes a new one */
    uint8_t their_eph[32]; /* the peer's ephemeral key of the keyed session */
    /* the order of our key and of theirs (HELLO "eo"; 0: theirs unknown):
     * a HELLO with a different key older than the keyed one was sent
     * before it and is dropped */
    uint64_t my_eph_order, their_eph_order;
    /* the last older key dropped so, and when it first was: one that still
     * comes STALE_HELLO_MS later is a live sender's (a restart whose clock
     * went back), not a late copy, and is heard */
    uint8_t stale_eph[32];
    uint64_t stale_since_ms;
    uint64_t their_tag; /* put on data frames we send them */
    uint64_t my_tag;    /* they put it on data frames to us */
    uint32_t bandwidth;
    uint32_t ciphers;
    bool serves_state;     /* said so in its HELLO */
    bool bootstrap;        /* given in the config's bootstrap list */
    uint8_t *swim_pending; /* a membership message waiting for the session */
    size_t swim_pending_len;
    /* control messages (JOIN, GROUP, ...) waiting for the session */
    uint8_t *ctl_pending[MP_CTL_PENDING_MAX];
    size_t ctl_pending_len[MP_CTL_PENDING_MAX];
    uint32_t ctl_npending;
    uint32_t ctl_pending_join; /* bit i: ctl_pending[i] is our JOIN */
    bool ahead;                /* a matchmaker candidate of the next call's key:
                                  kept open until that call starts */
    bool idle_dial;            /* NEW: dialled as a member without a session (it
                                  counts as a member meanwhile) */
    uint64_t used_ms;          /* last control message or data frame either way
                                  (the least recently used session closes first) */
    /* state chunks this peer asked us for and we still owe it */
    uint64_t st_ver;
    uint32_t st_next, st_end;
    bool st_blocked; /* its data socket was full */
    mp_session_keys_t *keys;
    uint64_t tx_counter;
    mp_replay_t rx_window; /* counters of its data frames taken */
    uint64_t state_since_ms;
    uint64_t refused_ms;     /* when we last refused its HELLO (0: never) */
    uint64_t cert_not_after; /* its certificate's end (certificate mode) */
    uint64_t last_live_ms;   /* when it was last seen live (or learned) */
    uint64_t last_rx_ms;     /* its last control message (session silence) */
    uint64_t ask_ms;   /* when we probed it on the session because membership
                          doubted it (0: not since it was last alive) */
    bool left;         /* it said BYE: not dialled again unasked */
    uint64_t done_gid; /* the last round it said DONE for */
    uint64_t ctrl_down_ms; /* our control connection to it broke during a
                              round it is in, at (0: up); engine.c */
    uint64_t next_hello_ms;
    uint32_t hello_tries;
    /* limits: control message token bucket (thousandths of a message),
     * early data frames held from it, when a limit was last logged */
    uint64_t msg_tokens, msg_refill_ms;
    uint32_t msg_dropped; /* since the last log line about it */
    uint64_t msg_logged_ms;
    size_t early_bytes;
    uint32_t early_frames;
    uint64_t early_logged_ms;
    /* data plane: one sealed frame waiting for the socket */
    bool stash_full;
    /* zmq_msg_t storage (zmq_msg_t is 64 bytes, aligned for the pointers
     * and counters libzmq keeps in it: after the bool above it would sit at
     * an odd address, and ARMv7's exclusive loads fault there) */
    _Alignas(8) uint8_t stash_msg[64];
    uint32_t stash_bytes;
    /* what we measured of its link (core/linkstat.h): round trips of our
     * PINGs and JOINs to it (the one in flight: seq and when sent, 0: none),
     * and the time between its scatter parts */
    mp_link_t link;
    uint64_t ping_seq, ping_ms, join_seq, join_ms;
    uint64_t part_ms; /* its last scatter part of the round in progress */
    /* parts through shared memory (shm.h; docs/DESIGN.md, "Mates on this
     * host"): its HELLO's host id equals ours; our region for its parts
     * (made at the session's first part: shm_made; dropped after
     * MP_SHM_UNTAKEN_MAX parts in a row it did not take: shm_untaken),
     * and its region for ours (taken when its parts come; last tried at
     * shm_try_ms) */
    bool same_host;
    bool shm_made;
    uint32_t shm_untaken;
    struct mp_shm *shm_tx, *shm_rx;
    uint64_t shm_try_ms;
    uint64_t shm_round;   /* the round whose parts go into shm_tx */
    uint64_t shm_wait_ms; /* no slot free for it since (0: one was) */
    bool shm_waiting;     /* its parts wait for a slot (at most
                             MP_SHM_WAIT_MS): the engine looks again soon */
    /* per copy of our share's result (moshpit.mirror): the round whose
     * gather parts it may still read there (0: none; cleared by its DONE
     * for that round) */
    uint64_t mirror_gid[2];
} mp_peer_t;

/* Serving state (config serve_state): `serve` is what downloads read;
 * a new result goes to `latest` and replaces `serve` when no download is
 * in progress, so a download never sees its state change under it. */
typedef struct mp_state_srv {
    float *serve, *latest;
    size_t serve_n, latest_n, serve_cap, latest_cap;
    uint64_t serve_ver, latest_ver; /* 0 = empty */
    uint64_t serve_round, latest_round, rounds;
    uint8_t digest[32]; /* of serve, valid if digest_ok */
    bool digest_ok;
    struct {
        uint8_t id[32];
        uint64_t last_ms; /* 0 = free */
    } clients[MP_STATE_CLIENTS_MAX];
} mp_state_srv_t;

typedef struct mp_early {
    mp_peer_t *from; /* the sender (peer entries live until teardown) */
    uint64_t round_id;
    uint64_t arrived_ms;
    void *msg; /* heap zmq_msg_t */
    size_t bytes;
} mp_early_t;

/* The engine's side of the call in progress; the round itself (joiner,
 * group, deadline) is in the round machine (core/round.h). */
typedef struct mp_round {
    mp_cmd_t *cmd;
    mp_group_t *group; /* the machine's, once the GROUP is taken */
    uint64_t gid;
    uint32_t n, self;
    mp_peer_t *members[MP_GROUP_MAX]; /* NULL for self */
    uint64_t bytes_sent, bytes_received;
    /* the group's start here, and per member the bytes of its scatter
     * parts and when the last arrived (its report in our DONE) */
    uint64_t start_ms;
    uint64_t scat_bytes[MP_GROUP_MAX], scat_last_ms[MP_GROUP_MAX];
    /* a slow member's scatter parts go to one reducer after another
     * (mp__group_is_slow): to seq_dest, paced at seq_kbps, the next one
     * not before seq_next_ms */
    bool seq;
    uint32_t seq_dest, seq_kbps;
    uint64_t seq_next_ms;
    bool replay;        /* handing the group the frames held before it formed */
    uint64_t replay_at; /* when the frame handed over arrived here */
    /* bit i: a connection to member i broke or stalled this round: its part
     * times and rate say nothing of its link (engine_resume.c); the other
     * members' still do */
    uint64_t repaired;
    uint64_t gone;    /* members whose drop was logged */
    uint64_t span_ms; /* the measured end's distance from the group's
                         start (0: none); a break gives it again */
    /* engine_resume.c: this peer holds everything and said DONE (at
     * done_at), and now waits for its mates' DONEs, from wait_from (done_at
     * or a later HAVE of a mate not yet DONE); parts that arrived twice */
    bool done_sent;
    uint64_t done_at, wait_from;
    uint32_t dups;
    /* by member index: a MARK is due to it (a data connection to it broke,
     * or its HAVE left parts that may still be on their way); a HAVE is
     * due to it now (we are outbound-only and the data connection of ours
     * it answers on broke: its frames to us travelled on it, and its data
     * ROUTER sees no break) */
    uint64_t mark_due, ask_due;
    /* by member index: a HAVE to it gone quiet was sent while its MARK
     * waited for its answer (at most one until that MARK, or a newer one
     * replacing it, is answered: engine_resume.c) */
    uint64_t quiet_in_mark;
    /* by member index: its latest MARK still to be answered (its counter,
     * 0: none), whether every counter below it arrived, when the last
     * frame below it arrived, and the lowest counter its frames of this
     * round can have (one above the highest taken before the round) */
    uint64_t mark_ctr[MP_GROUP_MAX];
    /* by member index: our frame counter to it when we last saw one of
     * our data connections to it break in this round (0: none); frames
     * sealed later were not lost with it */
    uint64_t broke_ctr[MP_GROUP_MAX];
    uint64_t mark_full; /* bit by member index */
    uint64_t mark_fill_at[MP_GROUP_MAX];
    uint64_t lo_ctr[MP_GROUP_MAX];
    /* parts sent and received through shared memory, and of them those
     * read directly from the sender's memory */
    uint32_t shm_sent, shm_recv, direct_sent, direct_recv;
    bool all_sent; /* every part sent (logged once: engine_data.c) */
} mp_round_t;

/* A copy of our share's result for direct reads (engine_data.c): the
 * round it holds (0: none), its parts copied so far (have, by part
 * index), and when that round ended here (0: not yet). */
typedef struct mp_mirror {
    float *buf;
    size_t floats;
    uint8_t *have;
    size_t parts;
    uint64_t gid, end_ms;
} mp_mirror_t;

struct moshpit {
    /* configuration (copied) */
    moshpit_config_t cfg;     /* pointer fields cleared */
    mp_endpoint_t *bootstrap; /* parsed once, by mp__engine_open */
    size_t bootstrap_n;
    uint8_t (*auth)[32];
    size_t auth_n;
    uint8_t pub[32];
    char pub_txt[41];
    uint8_t *sec;          /* secure memory, 32 */
    uint8_t *swarm_secret; /* secure memory, 32, or NULL (open swarm) */
    uint8_t swarm_hash[32];
    uint32_t ciphers;
    /* data connections (engine_streams.c): the congestion control set on
     * them ("": none set, they keep the system's), the system's, and how
     * many connections carry the parts to each peer */
    char cc[MP_PLAT_CC_NAME_MAX];
    char cc_system[MP_PLAT_CC_NAME_MAX];
    uint32_t streams;
    /* this host as mates on it see it (mp__shm_host_id), when config
     * shared_memory allows parts through shared memory and the system
     * tells */
    bool has_host;
    /* the order of the last ephemeral key made (HELLO "eo"): starts at
     * the wall clock in microseconds, so a restarted process's keys come
     * after those of the process before it */
    uint64_t eph_order;
    uint8_t host_id[32];
    /* direct reads of our parts by mates on this host (shm.h): the window
     * our regions name (NULL without has_host), and the two copies of our
     * own share's result that gather parts are read from (window epochs 1
     * and 2), so that what a mate has not read when our call returns
     * stays there until it said DONE (engine_data.c, mirror_part) */
    struct mp_shm_window *win;
    mp_mirror_t mirror[2];

    /* sockets (engine thread after start) */
    void *zctx;
    void *pipe_api; /* API side of the command pipe */
    void *pipe_eng;
    void *zap;
    void *ctrl; /* ROUTER, CURVE server */
    void *data; /* ROUTER, data plane */
    char ctrl_ep[MP_ADDR_MAX];
    char data_ep[MP_ADDR_MAX];
    char endpoint[200];
    uint64_t uniq; /* distinguishes inproc names */

    mp_plat_thread_t thread;
    bool thread_started;
    mp_plat_mutex_t lock; /* guards the "under lock" fields */
    mp_plat_cond_t cond;

    /* under lock */
    mp_cmd_t *cmd_posted; /* handed to the engine, not yet taken */
    /* The turn: the one command that may be on the engine, from when its
     * call takes the turn until the engine completes it
     * (mp__engine_complete_cmd clears it); later calls wait for it,
     * moshpit_average_start does not (EBUSY). NULL: free. */
    mp_cmd_t *cmd_active;
    /* the op of moshpit_average_start that moshpit_op_wait has not yet
     * returned (one per peer); freed by moshpit_close if nobody waits */
    moshpit_op_t *op_live;
    size_t members_live;
    int last_errno;
    bool stopped;
    bool closing;    /* moshpit_close has begun: new commands are refused */
    uint32_t inside; /* API calls on this peer not yet returned */

    /* the config's log callback (the engine thread's once it runs) */
    mp_log_t log;

    /* engine thread only */
    bool stopping;
    /* when the engine thread last ran, and how long it may then sleep in
     * its poll (mp__engine_awake: a longer gap is a pause) */
    uint64_t awake_ms, sleep_ms;
    /* reachability (docs/DESIGN.md, "Peers behind NAT"): the verdict of
     * the bootstrap peers on whether they can dial ctrl_ep */
    enum { MP_REACH_UNKNOWN = 0, MP_REACH_DIALABLE, MP_REACH_OUTBOUND } reach;
    bool outbound;     /* reach == OUTBOUND: we open every session */
    bool adv_observed; /* ctrl_ep's host is what a peer observed */
    /* reachability asked again (engine_reach.c): a verdict that differs
     * from reach waits for a moment without a call (reach_want, since
     * reach_want_ms; 0: none); the request in flight (ask_nonce, 0: none,
     * sent at ask_ms to ask_n members, answers ask_yes and ask_no, of
     * which ask_moved saw us at another host, ask_oa); the next request
     * (ask_next_ms) and the last (ask_last_ms); the last switch
     * (reach_switch_ms: our DEALERs are still read a while after); the
     * dial-backs we do for others (token bucket, thousandths) */
    int reach_want;
    uint64_t reach_want_ms, reach_switch_ms;
    uint32_t ask_nonce, ask_n, ask_yes, ask_no, ask_moved;
    char ask_oa[MP_ADDR_MAX];
    uint64_t ask_ms, ask_next_ms, ask_last_ms;
    uint64_t db_tokens, db_refill_ms, db_logged_ms;
    /* the control message being read: its routing id on our ROUTER
     * (in_len 0: it came on one of our DEALERs), its source host */
    uint8_t in_rid[255];
    size_t in_len;
    bool in_dealer;
    char in_addr[MP_ADDR_MAX];
    mp_peer_t **peers;
    size_t npeers;
    uint32_t peers_max;    /* config peers_max, resolved */
    uint32_t msg_rate;     /* config peer_msg_rate, resolved */
    uint32_t sessions_max; /* config sessions_max, resolved */
    bool crowded; /* more members than sessions_max (mp__engine_crowded) */
    /* the matchmaking key whose candidates were last dialled ahead
     * (engine_round.c dial_ahead), 0 bytes: none */
    uint8_t ahead_key[MP_KEY_MAX];
    uint32_t ahead_key_len;
    uint64_t full_logged_ms;  /* peer table full: last logged */
    uint64_t mm_logged_ms;    /* matchmaker limits: last logged */
    uint64_t early_logged_ms; /* early frames, total limit: last logged */
    uint32_t mon_seq;
    mp_rnd_t *rnd;    /* the round machine: matchmakers and the call */
    mp_round_t round; /* round.cmd == NULL: no round running */
    /* The mates of the last round this peer finished in a group (alive
     * in it when it ended): until each says DONE for owed_gid, data this
     * peer sent them may still be on its way, so a close waits for them
     * (docs/DESIGN.md, "Closing"). */
    uint64_t owed_gid;
    uint32_t owed_n;
    mp_peer_t *owed[MP_GROUP_MAX];
    /* this peer's upload as its mates report it in their DONEs, and the
     * ids of the roster whose reports are collected (uplink.gid) */
    mp_uplink_t uplink;
    uint32_t up_n;
    uint8_t up_ids[MP_GROUP_MAX][32];
    mp_cmd_t *close_cmd; /* a moshpit_close waiting for the owed mates */
    uint64_t close_deadline_ms;
    bool leave_linger; /* closing gracefully: control sockets linger */
    uint64_t join_seq; /* the round machine's first JOIN seq */
    mp_early_t *early;
    size_t nearly, early_bytes;
    uint64_t next_gossip_ms;
    uint64_t next_reconnect_ms;
    uint64_t rng;
    mp_grid_t grid;    /* initial grid key (the round machine moves a copy) */
    mp_state_srv_t st; /* state served (config serve_state) */
    mp_swim_t *swim;   /* membership */
    mp_swim_out_t *swim_out;
    mp_swim_msg_t *swim_msg;
    mp_swim_update_t *swim_pb; /* MP_SWIM_PB_MAX: updates to piggyback */
    bool swim_joined;
    uint64_t swim_pull_ms; /* outbound-only: next member list pull */
    uint64_t swim_stats_ms, swim_bad_logged;
    mp_cmd_t *fetch_cmd; /* a moshpit_fetch_state() in progress */
    mp_fetch_t *fetch;   /* its client, once a server is known */
    uint64_t fetch_seq;
    float *scratch;  /* MP_DATA_MAX_COUNT floats */
    uint8_t *encbuf; /* with compression: an opened part before decoding
                        (mp__codec_bytes of MP_DATA_MAX_COUNT values) */
    uint8_t *msgbuf; /* MP_CTRL_MAX bytes */
    mp_msg_t *msg;   /* decode target */
};

/* A background average (moshpit_average_start). The caller holds the
 * pointer; the engine sees only &cmd, and only until it completes it. */
struct moshpit_op {
    moshpit_t *mp;
    mp_cmd_t cmd;
    bool waiting; /* under mp->lock: a moshpit_op_wait is inside */
};

/* Whether p, a member we gave up dialling (it never answered our dial, or
 * it was outbound-only while we were too: `outbound`), is due a dial once
 * more: its table entry is dead and it did not leave, and membership holds
 * it alive or suspect at an incarnation newer than p->reach_inc, with an
 * address. A newer record may be its reachability asked again (dialable
 * now); whatever event brought it, and whatever we held before (alive,
 * suspect or dead), only the incarnation counts (engine_swim.c). */
bool mp__engine_renew_due(const mp_peer_t *p, bool outbound,
                          const mp_swim_member_t *m);

/* Logging through the configured callback (mp->log, base/log.h). */
void mp__engine_log(moshpit_t *mp, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* How long a close waits for the mates of the last round to confirm that
 * they hold everything they need from this peer: min(peer_timeout_ms,
 * round_timeout_ms). A close then gives its leave messages up to
 * MP_LEAVE_LINGER_MS to reach the network. */
uint32_t mp__engine_close_wait_ms(const moshpit_config_t *cfg);
#define MP_LEAVE_LINGER_MS 250

/* Sets up sockets (mp__engine_open, before the engine thread starts). */
moshpit_err_t mp__engine_setup(moshpit_t *mp);
/* Hands a command to the engine thread: puts it in cmd_posted under
 * mp->lock and wakes the engine through the pipe. One command at a time
 * (the caller holds the turn, cmd_active). Returns 0, or an errno value (then
 * the engine never saw it). */
int mp__engine_post(moshpit_t *mp, mp_cmd_t *c);
/* Engine thread entry point. */
void mp__engine_main(void *arg);
/* Frees everything the engine owns (after the thread has stopped). */
void mp__engine_teardown(moshpit_t *mp);

#endif
