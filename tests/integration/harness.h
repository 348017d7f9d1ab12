/* SPDX-License-Identifier: MIT */
/*
 * harness.h - multi-process integration tests: each peer is a real forked
 * process with its own moshpit_t on loopback, driven by the test process
 * over a socketpair. Vectors are generated from seeds so the test process
 * can compute the exact expected weighted mean itself.
 */
#ifndef MP_IT_HARNESS_H
#define MP_IT_HARNESS_H

#include <moshpit.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IT_MAX_PEERS 64

typedef struct it_peer_cfg {
    const char *swarm;
    uint8_t swarm_secret[32];
    const uint8_t (*authorized)[32];
    size_t authorized_n;
    uint8_t public_key[32], secret_key[32]; /* zero = ephemeral */
    uint32_t group_size, min_group_size;
    uint32_t matchmaking_ms, round_timeout_ms, peer_timeout_ms;
    char bootstrap[200];       /* "" = start the swarm */
    size_t expect_members;     /* wait for this many before reporting ready */
    uint32_t ready_timeout_ms; /* for that wait; 0 = 20000 */
    int notify_group;          /* send IT_EV_GROUP when a round's group forms */
    const char *notify_log;    /* with notify_group: on this log text instead */
    int serve_state;           /* config serve_state */
    uint32_t grid_dims;        /* config grid_dims (0 = from the swarm size) */
    int grid;                  /* 0: random grid position; 1: grid_position,
                                  which it_start_swarm/it_start_more set to
                                  first_position + i for peer i */
    int64_t grid_position;
    int64_t first_position;
    int aggregation;                  /* config aggregation (0 = the mean) */
    uint32_t trim;                    /* config trim, 0 = default */
    float clip_tau;                   /* config clip_tau */
    uint32_t weight_cap;              /* config weight_cap */
    uint32_t compression;             /* config compression (0 = none) */
    uint8_t authority_key[32];        /* config authority_key (zero: none) */
    uint8_t cert[MOSHPIT_CERT_BYTES]; /* config cert (zero: none) */
    uint32_t bandwidth_mbps; /* config bandwidth_mbps (0 = library default) */
    uint32_t peers_max;      /* config peers_max (0 = library default) */
    uint32_t peer_msg_rate;  /* config peer_msg_rate (0 = library default) */
    uint32_t sessions_max;   /* config sessions_max (0 = library default) */
    uint32_t data_streams;   /* config data_streams (0 = library default) */
    const char *congestion;  /* config congestion (NULL = library default) */
    uint32_t shared_memory;  /* config shared_memory (0 = MOSHPIT_SHM_AUTO) */
    int log_info;            /* nonzero: INFO lines are kept too */
    /* non-NULL: the peer also writes every log line, debug level included,
     * to <log_dir>/peer-<index>.log as it logs it (one write per line) */
    const char *log_dir;
    size_t index; /* peer number; it_start_swarm/it_start_more set it to i */
    /* Runs in the peer process after its config is filled and before
     * moshpit_open, e.g. to enter a network namespace and set cfg->listen
     * (tests/netns). Nonzero: the peer reports a failed start. NULL: none. */
    int (*child_init)(void *arg, size_t index, moshpit_config_t *cfg);
    void *child_arg;
    /* with notify_group: nonzero k makes the peer stop itself (SIGSTOP)
     * right after it reported its k-th group, on the engine thread, before
     * any part of that round is sent: a member that dies silently at the
     * start of a round (the test then cuts its link and kills it). If the
     * peer is the round's matchmaker, the GROUPs it sent may still wait in
     * ZeroMQ's I/O thread then, and some or all of its mates never get
     * theirs: stop a peer that is not the matchmaker (rendezvous order) */
    uint32_t stop_at_group;
    /* with notify_group: nonzero k makes the peer's engine thread wait,
     * right after it reported its k-th notification, until the test calls
     * it_release: an engine that stalls (it reads and sends nothing
     * meanwhile, while ZeroMQ's threads deliver what it sent before) */
    uint32_t hold_at_log;
} it_peer_cfg_t;

typedef struct it_peer {
    pid_t pid;
    int fd;
    char endpoint[200];
    int alive;
} it_peer_t;

/* What a peer reports after moshpit_average. */
typedef struct it_result {
    int32_t err;
    moshpit_round_t info;
    uint64_t call_ms;    /* wall time of the call */
    uint64_t close_ms;   /* it_average_close_async: wall time of the close */
    uint64_t work_steps; /* it_average_op_async: steps computed meanwhile */
    float work_check;
} it_result_t;

/* Starts a peer process; waits until it reports its endpoint and that it
 * sees expect_members members (or times out: returns -1). */
int it_start(it_peer_t *p, const it_peer_cfg_t *cfg);
/* Starts a peer but does not wait for members (returns after endpoint). */
int it_start_nowait(it_peer_t *p, const it_peer_cfg_t *cfg);
/* Waits for the "ready" report of a peer started with it_start_nowait;
 * returns its member count, or -1. */
long it_wait_ready(it_peer_t *p, int timeout_ms);

/* Starts n peers: the first starts the swarm, the others bootstrap from it
 * (cfg->bootstrap is overwritten; cfg->expect_members set to n). Returns
 * the number of peers that started and saw all n members. */
size_t it_start_swarm(it_peer_t *peers, size_t n, it_peer_cfg_t *cfg);
/* Starts peers[from..to) bootstrapping from peers[0], each expecting
 * `expect` members; returns how many started and saw them. */
size_t it_start_more(it_peer_t *peers, size_t from, size_t to, size_t expect,
                     it_peer_cfg_t *cfg);

/* Asks the peer to average count values generated from seed, weight w. */
int it_average_async(it_peer_t *p, size_t count, uint64_t seed, double w);
/* Asks the peer to call moshpit_fetch_state for count floats; collect the
 * result with it_collect (info.round_id carries round_out). */
int it_fetch_async(it_peer_t *p, size_t count, uint32_t timeout_ms);
/* Like it_average_async through moshpit_average_start: the peer starts
 * the op, reports that (it_wait_started), computes on other memory while
 * polling the op (moshpit_op_wait with timeout 0) until the round is over,
 * and reports the result as usual (it_collect; res.work_steps: the steps
 * computed while the op was live). */
int it_average_op_async(it_peer_t *p, size_t count, uint64_t seed, double w);
/* The peer starts averaging with moshpit_average_start, computes until
 * the op's group has formed (cfg notify_group must be set: the peer reads
 * its own log for it), then calls moshpit_close with the op live, reports
 * (it_collect: err ECLOSED if the close ended the op, values as the close
 * left them) and exits. */
int it_average_op_close_async(it_peer_t *p, size_t count, uint64_t seed,
                              double w);
/* The report of an op's start: *start the result of moshpit_average_start,
 * *poll a moshpit_op_wait(op, 0) right after it, *second a second start
 * while the op was live. 0, or -1 on timeout. */
int it_wait_started(it_peer_t *p, int32_t *start, int32_t *poll,
                    int32_t *second, int timeout_ms);
/* Waits until one of peers[0..n) reports its group (or notify_log text);
 * returns its index, or -1. */
int it_wait_group_any(it_peer_t *const *peers, size_t n, int timeout_ms);
/* Asks the peer to average again the vector its last call left it with
 * (count must match that call), weight w. */
int it_average_again_async(it_peer_t *p, size_t count, double w);
/* Like it_average_again_async, with the weight carried from the peer's
 * previous call: its group_weight / group_size, as README says. Commands
 * queue, so a peer given several runs them back to back, each as soon as
 * the previous call returned. */
int it_average_carry_async(it_peer_t *p, size_t count);
/* Like it_average_carry_async, and the peer calls moshpit_close as soon as
 * moshpit_average returns, then reports the result (close_ms: how long
 * the close took) and exits (it_stop then reaps it). */
int it_average_close_async(it_peer_t *p, size_t count);
/* The peer calls moshpit_close, reports how long it took (*close_ms) and
 * exits; the process is reaped. 0, or -1 if it did not report within
 * timeout_ms (then it is killed). */
int it_close(it_peer_t *p, uint64_t *close_ms, int timeout_ms);
/* Lets a peer held by hold_at_log go on. 0, or -1. */
int it_release(it_peer_t *p);
/* Collects the result; values (count floats) receive the peer's vector
 * after the call. Returns 0, or -1 on timeout/death. If a GROUP event
 * arrives first and on_group is set, it is called (e.g. to kill). */
int it_collect(it_peer_t *p, it_result_t *r, float *values, size_t count,
               int timeout_ms);
/* Blocks until the peer reports that its group formed; 0 or -1. */
int it_wait_group(it_peer_t *p, int timeout_ms);
/* Members the peer currently knows, or -1. */
long it_members(it_peer_t *p, int timeout_ms);
/* The peer waits until it knows at most n members (a death noticed) or
 * timeout_ms passes; returns the members it then knows, or -1; *took_ms
 * (may be NULL) receives how long that took. */
long it_wait_members_max(it_peer_t *p, size_t n, int timeout_ms,
                         uint64_t *took_ms);
/* The peer waits (moshpit_wait_members) until it knows n members or
 * timeout_ms passes; returns the members it then knows, or -1. */
long it_wait_members(it_peer_t *p, size_t n, int timeout_ms);

/* Log lines (WARN and more severe, INFO too with log_info, or everything
 * with notify_group or MOSHPIT_TEST_LOG) the peer has logged so far that
 * contain text (at most 199 characters); -1 on error. The peer keeps its first
 * 4 MiB of log. */
long it_log_count(it_peer_t *p, const char *text, int timeout_ms);
/* A fresh directory for the peers' log files (cfg log_dir):
 * /tmp/moshpit-<name>-<pid>, mode 0700, written to dir. 0, or -1 (with
 * the reason printed). */
int it_log_dir_make(char *dir, size_t cap, const char *name);
/* The end of a test with a log directory: removed when every check
 * passed, else kept and named on stderr. */
void it_log_dir_done(const char *dir);
/* Polls it_log_count every 50 ms until it is at least 1 or timeout_ms
 * passes; returns the last count (or -1). */
long it_wait_log(it_peer_t *p, const char *text, int timeout_ms);

/* 1 while p's process runs (not exited, not reaped), else 0. */
int it_running(const it_peer_t *p);
void it_kill(it_peer_t *p); /* SIGKILL + reap */
void it_stop(it_peer_t *p); /* graceful: close + exit + reap */

/* A seed with this bit set makes a poisoned vector: every value 1e20. */
#define IT_SEED_POISON ((uint64_t)1 << 63)

/* The vector a peer generates from seed (same function as the peers). */
void it_fill(float *v, size_t count, uint64_t seed);
double it_weight(uint64_t seed);

/* Test reporting. */
extern int it_failures;
#define IT_CHECK(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond)) {                                                         \
            it_failures++;                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)
/* Max relative deviation of v from the weighted mean of the peers' seeds
 * and weights (relative to max |mean|). */
double it_dev_from_mean(const float *v, size_t count, const uint64_t *seeds,
                        const double *weights, size_t n);
/* Round r (0: fresh vectors from seeds and weights w, else again with
 * next_w) of n peers on a grid with groups of m: sends the call to every
 * peer, collects each result (IT_CHECK: OK and a group of m), sets
 * next_w[i] to its group_weight / group_size, and returns the largest
 * deviation from the weighted mean of all n (it_dev_from_mean); v holds
 * count floats of scratch. */
double it_grid_round(it_peer_t *peers, size_t n, uint32_t m, size_t count,
                     int r, const uint64_t *seeds, const double *w,
                     double *next_w, float *v);
/* Max relative deviation of peer i's vector v from the weighted mean of
 * the peers j whose round id gid[j] equals gid[i] (gid 0: i alone), with
 * seeds and weights of peers 0..n-1. */
double it_dev_from_group(const float *v, size_t count, size_t i,
                         const uint64_t *gid, const uint64_t *seeds,
                         const double *weights, size_t n);
uint64_t it_now_ms(void);
/* Settings that are part of the group key never mix: starts four peers of
 * `swarm` (group size 4), set(cfg, i) giving peer i its setting (peers 0
 * and 2 one, 1 and 3 another), averages once on each and checks (IT_CHECK)
 * that the two kinds formed two separate groups of two. */
void it_check_settings_apart(const char *swarm,
                             void (*set)(it_peer_cfg_t *cfg, size_t i));

#endif
