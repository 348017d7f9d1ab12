/* SPDX-License-Identifier: MIT */
/*
 * moshpit.h - decentralized, encrypted parameter averaging (Moshpit
 * All-Reduce).
 *
 * This is the only header the library installs. It depends on nothing but
 * <stddef.h> and <stdint.h>; ZeroMQ, libsodium and msgpack-c stay private.
 *
 * Ownership: every object the library allocates is freed by the library
 * (moshpit_close, or moshpit_op_wait for an op). Buffers passed in are
 * borrowed for the duration of the call only, except the values of
 * moshpit_average_start: until its op is over.
 *
 * Threads: every function may be called from any thread. On one moshpit_t,
 * moshpit_average and moshpit_fetch_state take turns (a call waits for the
 * one before it; its own bound starts when its turn comes), and also wait
 * for the round of an op of moshpit_average_start, which itself never
 * waits (EBUSY);
 * moshpit_members, moshpit_wait_members, moshpit_endpoint and
 * moshpit_errno may run at the same time as anything. moshpit_close may
 * be called from any thread while other threads are inside calls on the
 * same peer: those return at once (ECLOSED) and the close waits for them;
 * no call on the peer may begin once moshpit_close has begun. Functions
 * without a moshpit_t are thread-safe. The log callback runs on the
 * peer's engine thread; several peers in one process may log at once.
 */
#ifndef MOSHPIT_H
#define MOSHPIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Version of this header. These three lines are the only place the version
 * is written: the build reads them (CMakeLists.txt) for the library's file
 * name, moshpit.pc and the CMake package, and moshpit_version() returns
 * MOSHPIT_VERSION_STRING as the library was built.
 *
 * ABI: the shared library's soname is libmoshpit.so.MAJOR, so
 * libmoshpit.so.0 for every 0.x release. Releases with the same MAJOR only
 * make changes that keep programs built against an earlier one running:
 * new functions, new enum values, new fields at the end of
 * moshpit_config_t and moshpit_round_t (the library learns the size of the
 * caller's struct: see moshpit_config_init). Anything else (a removed or
 * changed function, a field moved or retyped) needs a new MAJOR and with
 * it a new soname. CI compares every build with the last release's ABI
 * (tests/abi/README.md). CHANGELOG.md lists what each release added.
 */
#define MOSHPIT_VERSION_MAJOR 0
#define MOSHPIT_VERSION_MINOR 2
#define MOSHPIT_VERSION_PATCH 0
#define MOSHPIT_STRINGIFY_(x) #x
#define MOSHPIT_STRINGIFY(x) MOSHPIT_STRINGIFY_(x)
/* "MAJOR.MINOR.PATCH" */
#define MOSHPIT_VERSION_STRING                                                 \
    MOSHPIT_STRINGIFY(MOSHPIT_VERSION_MAJOR)                                   \
    "." MOSHPIT_STRINGIFY(MOSHPIT_VERSION_MINOR) "." MOSHPIT_STRINGIFY(        \
        MOSHPIT_VERSION_PATCH)
/* One number for comparisons in #if: 10000 * MAJOR + 100 * MINOR + PATCH */
#define MOSHPIT_VERSION_NUMBER                                                 \
    (MOSHPIT_VERSION_MAJOR * 10000 + MOSHPIT_VERSION_MINOR * 100 +             \
     MOSHPIT_VERSION_PATCH)

#if defined(_WIN32) && defined(MOSHPIT_SHARED_BUILD)
#define MOSHPIT_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define MOSHPIT_EXPORT __attribute__((visibility("default")))
#else
#define MOSHPIT_EXPORT
#endif

#if defined(__GNUC__)
#define MOSHPIT_NODISCARD __attribute__((warn_unused_result))
#else
#define MOSHPIT_NODISCARD
#endif

/* One peer of a swarm. Opaque; created by moshpit_open. */
typedef struct moshpit moshpit_t;

/* Error codes. Positive; MOSHPIT_OK is zero. moshpit_strerror() names them. */
typedef enum {
    MOSHPIT_OK = 0,
    MOSHPIT_EINVAL,    /* bad argument or configuration */
    MOSHPIT_ENOMEM,    /* an allocation failed */
    MOSHPIT_ETIMEDOUT, /* a deadline passed before the operation finished */
    MOSHPIT_ECLOSED,   /* the peer is closing or its engine has stopped */
    MOSHPIT_EPROTO,    /* a message violated the protocol */
    MOSHPIT_ECRYPTO,   /* a cryptographic operation failed */
    MOSHPIT_EPEERAUTH, /* a peer was not admitted / did not admit us */
    MOSHPIT_ESYS,      /* an OS call failed; moshpit_errno() has errno */
    MOSHPIT_ENOSTATE,  /* no live peer serves a state (moshpit_fetch_state) */
    MOSHPIT_ECOUNT,    /* the swarm's state has another length than asked */
    MOSHPIT_EBUSY      /* the peer is busy and the call does not wait
                          (moshpit_average_start: an op in flight, or
                          another averaging call running) */
} moshpit_err_t;

#define MOSHPIT_KEY_BYTES 32
/* Length of a key as Z85 text, without the terminating NUL. */
#define MOSHPIT_KEY_TEXT_LEN 40
/* The largest weight moshpit_average() accepts (and a peer may announce):
 * larger ones are MOSHPIT_EINVAL, and dropped when they come off the wire. */
#define MOSHPIT_WEIGHT_MAX 1e15

/* How a group combines its members' vectors (moshpit_config_t.aggregation).
 * Every member reduces its share of the vector with the rule; peers with
 * different rules (or parameters) never share a group. docs/DESIGN.md,
 * "Robust aggregation", has the exact definitions. */
typedef enum {
    MOSHPIT_AGG_MEAN = 0,         /* the weighted mean (default) */
    MOSHPIT_AGG_TRIMMED_MEAN = 1, /* per element: drop the `trim` largest and
                                     the `trim` smallest values, weighted
                                     mean of the rest */
    MOSHPIT_AGG_CENTERED_CLIP = 2 /* CenteredClip from the coordinate-wise
                                     median, clipping per part of the
                                     vector */
} moshpit_agg_t;

/* How a group encodes the values it sends (moshpit_config_t.compression).
 * Both the parts a member sends to a reducer and the reducer's result are
 * encoded; every reducer accumulates in float32/float64 and every member,
 * the reducer included, ends with the same decoded bits. Peers with
 * different settings never share a group. docs/AGGREGATION.md,
 * "Compression", gives the error of each; docs/PROTOCOL.md the bytes. */
typedef enum {
    MOSHPIT_COMPRESS_NONE = 0, /* float32, bit for bit (default) */
    MOSHPIT_COMPRESS_FP16 = 1, /* IEEE binary16, round to nearest even;
                                  magnitudes above 65504 saturate to
                                  +-65504 */
    MOSHPIT_COMPRESS_BF16 = 2, /* bfloat16, round to nearest even */
    MOSHPIT_COMPRESS_INT8 = 3, /* 8-bit codes, one float32 scale (absmax /
                                  127) per block of 64 values */
    MOSHPIT_COMPRESS_INT4 = 4  /* 4-bit codes, one float32 scale (absmax /
                                  7) per block of 64 values */
} moshpit_compress_t;
/* How a round's parts reach a group mate on this host (config
 * shared_memory). */
typedef enum {
    MOSHPIT_SHM_AUTO = 0, /* through shared memory where both can (default) */
    MOSHPIT_SHM_OFF = 1   /* always sealed over TCP */
} moshpit_shm_t;
/* A certificate (moshpit_cert_issue) in bytes, and as Z85 text without the
 * terminating NUL. docs/PROTOCOL.md gives the format byte by byte. */
#define MOSHPIT_CERT_BYTES 160
#define MOSHPIT_CERT_TEXT_LEN 200
/* An authority's Ed25519 secret key (seed and public key) in bytes, and as
 * Z85 text without the terminating NUL. Its public key is 32 bytes, written
 * as text like any other key (moshpit_key_to_text). */
#define MOSHPIT_AUTHORITY_SECRET_BYTES 64
#define MOSHPIT_AUTHORITY_SECRET_TEXT_LEN 80
/* Clock skew allowed when a certificate's validity window is checked: a
 * certificate is accepted from not_before - 300 s to not_after + 300 s of
 * the checking peer's wall clock. */
#define MOSHPIT_CERT_SKEW_S 300

/* Log levels for moshpit_config_t.log_level and the level argument of the
 * log callback (higher = more verbose). */
typedef enum {
    MOSHPIT_LOG_ERROR = 0,
    MOSHPIT_LOG_WARN = 1,
    MOSHPIT_LOG_INFO = 2,
    MOSHPIT_LOG_DEBUG = 3
} moshpit_log_level_t;

/*
 * Configuration of one peer. Initialize with moshpit_config_init() and then
 * set fields; moshpit_open() copies everything it needs, so the struct and
 * the strings it points to may be freed after moshpit_open() returns.
 *
 * The struct grows at its end from release to release. moshpit_config_init
 * and moshpit_open are macros that pass sizeof(moshpit_config_t) as this
 * header declares it, so the library reads and writes only the fields the
 * program was built with and gives the fields it does not have their
 * defaults. Every field added after 0.2.0 has 0 (or NULL) as its default,
 * so that a library older than the program, which does not know the
 * field, behaves as the default does; a non-zero value there is refused
 * (EINVAL) rather than ignored. So a program that fills the struct without
 * moshpit_config_init zeroes all of it first (memset). New fields start
 * at or after the previous release's sizeof, never in its tail padding.
 */
typedef struct moshpit_config {
    const char *swarm;            /* required: run name; swarms never mix */
    const char *listen;           /* e.g. "tcp://0.0.0.0:7400"; port 0 = any.
                                     Default "tcp://127.0.0.1:0". The data
                                     plane binds the next free port on the
                                     same interface. */
    const char *advertise;        /* optional address others should dial,
                                     e.g. "tcp://10.0.0.5" (host part only is
                                     used; ports are the bound ones) */
    const char *const *bootstrap; /* NULL-terminated endpoints of live peers
                                     as printed by moshpit_endpoint()
                                     ("tcp://host:port#KEY"); NULL or empty:
                                     this peer starts the swarm */
    uint8_t public_key[32], secret_key[32]; /* identity; all zero = ephemeral */
    uint8_t swarm_secret[32]; /* all zero = open swarm (still encrypted) */
    const uint8_t (*authorized_keys)[32];
    size_t authorized_count;   /* non-NULL list = only these identities
                                  are admitted (this peer's own key is
                                  always allowed) */
    uint32_t group_size;       /* target M, default 8, at most 64 */
    uint32_t min_group_size;   /* default 2 */
    int64_t grid_position;     /* -1 (default): random; else this peer's
                                  index 0..N-1 on a balanced grid */
    uint32_t matchmaking_ms;   /* how long to wait for a group, default 2000 */
    uint32_t round_timeout_ms; /* hard bound on one round, default 30000 */
    void (*log)(void *user, int level, const char *msg);
    void *log_user;
    int log_level; /* moshpit_log_level_t, default MOSHPIT_LOG_WARN */
    uint32_t peer_timeout_ms;   /* a group member silent this long while
                                   data is expected from it is dropped from
                                   the round; default 5000. An upper
                                   bound: once its link was measured the
                                   limit follows it (at least 1 s) */
    uint32_t bandwidth_mbps;    /* upper bound of the announced bandwidth;
                                   shares of the all-reduce are
                                   proportional to the announced ones,
                                   which follow the measured upload below
                                   it; 0 = default 1000 */
    uint32_t grid_dims;         /* d of the Moshpit grid (M^d peers), 1..8;
                                   0 (default) = from the swarm size N
                                   this peer knows: the largest d with
                                   N >= 3/4 M^d */
    uint32_t serve_state;       /* nonzero: keep the last averaged result and
                                   serve it to moshpit_fetch_state() of other
                                   peers; costs up to 2 x count x 4 bytes */
    uint32_t state_clients_max; /* downloads served at once, default 4 */
    /* Robust aggregation (all members of a group must agree: peers with
     * different values of these fields never group) */
    int aggregation;     /* moshpit_agg_t, default MOSHPIT_AGG_MEAN */
    uint32_t trim;       /* trimmed mean: values dropped at each end of
                            every element, default 1; 1..31 and
                            2 * trim < group_size. A robust rule never
                            runs on fewer than 2 * trim + 1 (CenteredClip:
                            3) contributions: such parts keep local
                            values; set min_group_size to match */
    float clip_tau;      /* CenteredClip radius per element (RMS: a part of
                            m elements is clipped at tau * sqrt(m) in L2);
                            0 (default) = the median distance of the
                            contributions from the median */
    uint32_t clip_iters; /* CenteredClip iterations, default 5, 1..100 */
    uint32_t weight_cap; /* K: no weight counts for more than K times the
                            lower median of the group's positive weights;
                            0 (default) = none with MOSHPIT_AGG_MEAN, 4 with
                            the robust modes; at most 65535 */
    /* Certificate admission */
    uint8_t authority_key[32]; /* Ed25519 public key of the swarm authority
                                  (moshpit_authority_keypair). Non-zero:
                                  certificate admission, every peer must
                                  present a certificate from this authority
                                  for its own key and this swarm, valid
                                  now; all zero (default) = none required */
    uint8_t cert[MOSHPIT_CERT_BYTES]; /* this peer's own certificate
                                  (moshpit_cert_issue), presented to every
                                  peer it meets; all zero = none. With
                                  authority_key set it is required and
                                  checked in full by moshpit_open (so the
                                  identity must be configured, not
                                  ephemeral); without, only its format is
                                  checked */
    /* Limits on what other peers can make this one hold
     * (docs/DESIGN.md, "Limits"). 0 = the default. */
    uint32_t peers_max;     /* peers (members, dead ones and refused
                               strangers included) this peer keeps track
                               of, default 4096, 2..1048576; beyond it new
                               peers are ignored (logged) */
    uint32_t peer_msg_rate; /* control messages per second read from one
                               peer, default 1000, 50..1000000, with a
                               burst of twice that; messages over it are
                               dropped unread (logged) */
    uint32_t reserved_pad0; /* ignored, never read: on 64-bit platforms it
                               fills the tail padding of 0.2.0's struct,
                               which older programs leave uninitialized */
    uint32_t compression;   /* MOSHPIT_COMPRESS_NONE (0, default),
                               MOSHPIT_COMPRESS_FP16, MOSHPIT_COMPRESS_BF16,
                               MOSHPIT_COMPRESS_INT8, MOSHPIT_COMPRESS_INT4
                               (moshpit_compress_t); other values are
                               MOSHPIT_EINVAL. All members of a group must
                               agree: peers with different values never
                               group */
    uint32_t data_streams;  /* TCP connections that carry this peer's data
                               parts to each other peer, 1..16; each part
                               goes to one that has room. 0 (default) = 1
                               when they use bbr, else 4, and 8 to a peer
                               whose connections are held by loss (one
                               connection of a loss-based algorithm such
                               as cubic carries a few Mbit/s on a long
                               lossy link) */
    const char *congestion; /* TCP congestion control of the data
                               connections, set on both ends: an
                               algorithm's name ("bbr", "cubic", ...) or
                               "default" (leave the system's); NULL or ""
                               (default) = "bbr" where this process may
                               use it (listed in
                               net.ipv4.tcp_allowed_congestion_control,
                               or CAP_NET_ADMIN and available), else the
                               system's. A name this process cannot use
                               is MOSHPIT_EINVAL (logged). Read only
                               during moshpit_open */
    uint64_t sessions_max;  /* sessions (a control and data connections
                               each) this peer keeps open, default 128,
                               2..65536. A swarm of at most this many
                               other members keeps a session with every
                               one (as before); in a larger one sessions
                               open when a message is for a member and
                               the least recently used one closes over
                               the cap. Sessions the running round, a
                               download or a peer behind NAT needs are
                               kept even beyond it (docs/DESIGN.md,
                               "Sessions") */
    uint32_t shared_memory; /* moshpit_shm_t: MOSHPIT_SHM_AUTO (0,
                               default) sends a round's parts to a group
                               mate on this host (same boot, network
                               namespace and user) through shared memory,
                               unencrypted, the rest of the frame sealed
                               as always (docs/SECURITY.md, "Mates on this
                               host"); MOSHPIT_SHM_OFF seals every part
                               over TCP. Other values are MOSHPIT_EINVAL */
} moshpit_config_t;

/* What one moshpit_average() call did. Grows at its end like
 * moshpit_config_t: moshpit_average writes only the fields the program was
 * built with; fields added after 0.2.0 read 0 for "not reported". */
typedef struct moshpit_round {
    uint64_t round_id;        /* group id of this round, 0 if alone */
    uint32_t group_size;      /* peers whose data was averaged, incl. self;
                                 1 = nobody to average with this time */
    double group_weight;      /* sum of weights that were averaged (after
                                 the relative bound weight_cap, if any) */
    double fraction_averaged; /* share of elements that got the group
                                 average (the rest kept the local value,
                                 or got a mean its reducer took over
                                 fewer members than this peer kept) */
    uint32_t peers_failed;    /* group members dropped mid-round */
    uint64_t bytes_sent, bytes_received;
    uint32_t matchmaking_ms, allreduce_ms;
} moshpit_round_t;

/*
 * Fills the first `size` bytes of cfg with defaults; a struct larger than
 * the library's (a program built against a newer header) gets zeros, the
 * default of every field the library does not know. Errors: EINVAL (cfg
 * NULL or size over 65536; nothing is written).
 *
 * Programs call it as moshpit_config_init(cfg), which passes
 * sizeof(moshpit_config_t); the other bindings pass the size of the struct
 * they declare.
 */
MOSHPIT_EXPORT moshpit_err_t moshpit_config_init_sized(moshpit_config_t *cfg,
                                                       size_t size);
/* As moshpit_config_init_sized with the size of moshpit_config_t in 0.2.0
 * (the function programs built before the macro below called); NULL is
 * ignored. */
MOSHPIT_EXPORT void moshpit_config_init(moshpit_config_t *cfg);
#define moshpit_config_init(cfg)                                               \
    moshpit_config_init_sized((cfg), sizeof(moshpit_config_t))

/*
 * Creates a peer: binds its sockets, starts its engine thread and, if
 * bootstrap endpoints are given, starts joining the swarm (asynchronously;
 * moshpit_members() shows progress). On success *out owns the peer; free it
 * with moshpit_close(). Errors: EINVAL (bad config), ENOMEM, ESYS (bind
 * failed, thread creation failed), ECRYPTO (key setup failed).
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_open(const moshpit_config_t *cfg, moshpit_t **out);
/* moshpit_open reading cfg_size bytes of cfg: the fields past them take
 * their defaults; past the library's own struct, every byte must be zero
 * (else EINVAL: the program asks for something this library does not
 * have). cfg_size at most 65536. The macro moshpit_open passes
 * sizeof(moshpit_config_t); the function of that name (for bindings that
 * cannot expand macros) reads moshpit_config_t as of 0.2.0. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t moshpit_open_sized(
    const moshpit_config_t *cfg, size_t cfg_size, moshpit_t **out);
#define moshpit_open(cfg, out)                                                 \
    moshpit_open_sized((cfg), sizeof(moshpit_config_t), (out))

/*
 * Averages values[0..count) in place with a group of peers that call
 * moshpit_average() at about the same time. Blocks until the round ends,
 * at most round_timeout_ms plus a small slack. The buffer is never touched
 * after the call returns. weight must be finite, >= 0 and at most
 * MOSHPIT_WEIGHT_MAX, and every value finite, else EINVAL before anything
 * is sent. Nobody to average with is
 * not an error: OK with info->group_size 1 and values untouched. info may
 * be NULL. Errors: EINVAL, ENOMEM, ECLOSED, ETIMEDOUT (only if the engine
 * itself missed its deadline; rounds cut short by peers still return OK).
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_average(moshpit_t *mp, float *values, size_t count, double weight,
                moshpit_round_t *info);
/* moshpit_average writing info_size bytes of *info: the library's fields
 * that fit, then zeros (fields the library does not know). info_size at
 * most 65536, else EINVAL; ignored when info is NULL. The macro
 * moshpit_average passes sizeof(moshpit_round_t); the function of that
 * name writes moshpit_round_t as of 0.2.0. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_average_sized(moshpit_t *mp, float *values, size_t count, double weight,
                      moshpit_round_t *info, size_t info_size);
#define moshpit_average(mp, values, count, weight, info)                       \
    moshpit_average_sized((mp), (values), (count), (weight), (info),           \
                          sizeof(moshpit_round_t))

/*
 * Averaging in the background: an averaging round that runs while the
 * caller goes on working (the next training steps), started by
 * moshpit_average_start and collected by moshpit_op_wait.
 * moshpit_average is the two in one call.
 */
typedef struct moshpit_op moshpit_op_t;

/*
 * Starts averaging values[0..count) in place, like moshpit_average, and
 * returns at once with *op, the round running on the peer's engine thread.
 * The arguments are checked exactly as moshpit_average checks them, with
 * the same errors, before anything is sent. From a successful start until
 * moshpit_op_wait returns the op's result, the library owns `values`: the
 * engine reads and writes them, so the caller must neither write nor read
 * them (nor free them) in the meantime. The op's bound is moshpit_average's:
 * the round ends by round_timeout_ms whatever other peers do.
 *
 * One op per peer: from a start until moshpit_op_wait has returned that
 * op's result (even if the round itself has ended), a second start on the
 * peer returns EBUSY. Start never waits for other calls: it also returns
 * EBUSY while a moshpit_average or moshpit_fetch_state runs on the peer on
 * another thread. A moshpit_average or moshpit_fetch_state called while an
 * op's round runs waits its turn, as they wait for each other: until the
 * op's round has ended (not until it is waited for).
 *
 * Errors (nothing sent, *op NULL): EINVAL (as moshpit_average, or op
 * NULL), EBUSY, ECLOSED (moshpit_close has begun), ENOMEM, ESYS.
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_average_start(moshpit_t *mp, float *values, size_t count, double weight,
                      moshpit_op_t **op);

/*
 * Waits up to timeout_ms for op's round to end; timeout 0 only looks.
 *
 * ETIMEDOUT: not over yet; the op stays live and may be waited for again,
 * and *info is not written. Otherwise the op is over and freed (the op
 * pointer is invalid from then on), the return value is the round's result
 * as moshpit_average would have returned it (OK, ENOMEM, ECLOSED), `values`
 * belong to the caller again, and *info (may be NULL) receives the round
 * as moshpit_average writes it. EINVAL: op NULL, info_size over 65536, or
 * another thread is waiting for the same op (the op is unchanged). Waiting
 * for one op from two threads at once is a mistake: the first to see the
 * end frees it.
 *
 * Closing: moshpit_close with an op live ends its round at once (the
 * engine drops it within a loop turn). The op's result is then ECLOSED,
 * unless the round had already ended (its own result stands); `values`
 * then hold, part by part (parts of up to 65536 floats), either the
 * caller's own values or the group's result for that part (parts
 * that became final before the close), never a mixture inside a part,
 * and info reports group_size 1. A moshpit_op_wait blocked on another
 * thread returns that result and frees the op before moshpit_close frees
 * the peer; an op nobody waits for is freed by moshpit_close, and so the
 * op pointer, like the peer's, is invalid once moshpit_close has begun on
 * it: no moshpit_op_wait may begin after that.
 *
 * Thread-safe like every call on the peer: the op may be waited for on
 * any thread, one thread at a time.
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_op_wait_sized(moshpit_op_t *op, uint32_t timeout_ms,
                      moshpit_round_t *info, size_t info_size);
/* As moshpit_op_wait_sized writing info_size bytes of *info: the library's
 * fields that fit, then zeros. The macro moshpit_op_wait passes
 * sizeof(moshpit_round_t); the function of that name (for bindings that
 * cannot expand macros) writes moshpit_round_t as of 0.2.0. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_op_wait(moshpit_op_t *op, uint32_t timeout_ms, moshpit_round_t *info);
#define moshpit_op_wait(op, timeout_ms, info)                                  \
    moshpit_op_wait_sized((op), (timeout_ms), (info), sizeof(moshpit_round_t))

/*
 * Writes this peer's endpoint "tcp://host:port#KEY" (KEY = Z85 public key)
 * to buf, NUL-terminated; it is what other peers pass as bootstrap.
 * Errors: EINVAL (NULL args or buf too small; 200 bytes always suffice).
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t moshpit_endpoint(moshpit_t *mp,
                                                                char *buf,
                                                                size_t len);

/* Live members this peer knows, itself included (0 if mp is NULL). */
MOSHPIT_EXPORT size_t moshpit_members(moshpit_t *mp);

/* Blocks until this peer knows at least n live members (itself included) or
 * timeout_ms passes. Errors: EINVAL (mp NULL), ETIMEDOUT, ECLOSED. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_wait_members(moshpit_t *mp, size_t n, uint32_t timeout_ms);

/*
 * Leaves the swarm gracefully, stops the engine, frees everything. NULL is
 * ignored. Calls on other threads still inside a call on mp return
 * ECLOSED and are waited for; none may begin after moshpit_close began.
 *
 * A round that returned to this peer may still owe its group mates data
 * (parts queued in ZeroMQ or on the wire). Before leaving, the close waits
 * until every mate still alive in this peer's last round has confirmed
 * that it holds everything it needs from that round (or is gone), while
 * the engine keeps delivering; only then it tells the swarm it leaves. So
 * a program may call moshpit_close right after its last moshpit_average
 * without costing its mates part of that round. Parts of a round that
 * ended at its deadline before they were sent are not sent afterwards
 * (the buffer belongs to the caller again).
 *
 * Bound: moshpit_close returns within min(peer_timeout_ms,
 * round_timeout_ms) + 1 s, whatever other peers do; with nothing owed
 * (mates already confirmed, gone, or no round in a group yet) it returns
 * at once, apart from up to 250 ms for its leave messages to reach the
 * network.
 */
MOSHPIT_EXPORT void moshpit_close(moshpit_t *mp);

/* Generates a new identity (CURVE keypair). Errors: EINVAL, ECRYPTO. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t moshpit_keypair(uint8_t pub[32],
                                                               uint8_t sec[32]);

/* Key <-> Z85 text (40 characters + NUL). Errors: EINVAL. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_key_to_text(const uint8_t key[32], char out[41]);
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_key_from_text(const char *text, uint8_t key[32]);

/*
 * Certificates. A swarm authority (an Ed25519 keypair kept offline) signs
 * a peer's identity for one swarm and a validity window; peers configured
 * with the authority's public key (moshpit_config_t.authority_key) admit
 * only peers presenting such a certificate, and check it offline. See
 * docs/SECURITY.md for what this does and does not protect against.
 */

/* Why a certificate is not valid; the checks run in this order and the
 * first failing one is reported. */
typedef enum {
    MOSHPIT_CERT_VALID = 0,
    MOSHPIT_CERT_MISSING,       /* none presented (admission only) */
    MOSHPIT_CERT_MALFORMED,     /* not a well-formed version-1 certificate */
    MOSHPIT_CERT_FOREIGN,       /* issued by another authority */
    MOSHPIT_CERT_OTHER_SWARM,   /* issued for another swarm */
    MOSHPIT_CERT_OTHER_KEY,     /* issued for another identity */
    MOSHPIT_CERT_NOT_YET_VALID, /* not_before is ahead (beyond the skew) */
    MOSHPIT_CERT_EXPIRED,       /* not_after has passed (beyond the skew) */
    MOSHPIT_CERT_FORGED         /* the authority's signature does not verify */
} moshpit_cert_status_t;

/* The fields of a certificate (moshpit_cert_inspect). Unlike
 * moshpit_config_t and moshpit_round_t this struct does not grow: it is the
 * version-1 certificate, and a later format would come with a struct and a
 * function of its own. */
typedef struct moshpit_cert_info {
    moshpit_cert_status_t status;
    uint8_t version;         /* 1 */
    uint8_t peer_key[32];    /* the identity (CURVE public key) it names */
    uint8_t swarm_hash[32];  /* BLAKE2b-256 of "moshpit-swarm-v1" || swarm */
    uint64_t not_before;     /* Unix seconds */
    uint64_t not_after;      /* Unix seconds */
    uint8_t authority_id[8]; /* which authority signed it (a key hash) */
} moshpit_cert_info_t;

/* Generates a swarm authority: an Ed25519 keypair. Keep sec offline; give
 * pub to every peer as authority_key. Errors: EINVAL (NULL), ECRYPTO. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_authority_keypair(uint8_t pub[32], uint8_t sec[64]);

/* Authority secret key <-> Z85 text (80 characters + NUL). from_text also
 * checks that the public half belongs to the seed. Errors: EINVAL. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_authority_secret_to_text(const uint8_t sec[64], char out[81]);
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_authority_secret_from_text(const char *text, uint8_t sec[64]);

/*
 * Issues a certificate: authority_sec signs peer_pub (a peer's identity,
 * see moshpit_keypair) for the swarm named `swarm`, valid from now until
 * not_after_unix (seconds since 1970, UTC). Pure computation on the
 * caller's buffers; nothing is kept. Errors: EINVAL (NULL arguments, a
 * zero peer key, an empty or over-long swarm name, not_after_unix not in
 * the future or past the year 9999, a secret whose halves do not belong
 * together), ESYS (the wall clock cannot be read), ECRYPTO.
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_cert_issue(const uint8_t authority_sec[64], const uint8_t peer_pub[32],
                   const char *swarm, uint64_t not_after_unix,
                   uint8_t cert[MOSHPIT_CERT_BYTES]);

/*
 * Decodes a certificate and checks it offline against the authority's
 * public key and the wall clock (with MOSHPIT_CERT_SKEW_S), and, when not
 * NULL, against a swarm name and a peer identity. *info receives the
 * fields (zero when malformed) and the status. Returns OK if the
 * certificate is valid, EPEERAUTH if it is well-formed but not valid,
 * EPROTO if it is malformed, EINVAL for NULL cert, authority_pub or info,
 * an all-zero authority key, or an empty or over-long swarm name.
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t moshpit_cert_inspect(
    const uint8_t cert[MOSHPIT_CERT_BYTES], const uint8_t authority_pub[32],
    const char *swarm, const uint8_t peer_pub[32], moshpit_cert_info_t *info);

/* Certificate <-> Z85 text (200 characters + NUL). from_text checks the
 * text only (use moshpit_cert_inspect for the content). Errors: EINVAL. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_cert_to_text(const uint8_t cert[MOSHPIT_CERT_BYTES], char out[201]);
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_cert_from_text(const char *text, uint8_t cert[MOSHPIT_CERT_BYTES]);

/* Short English description of a certificate status ("expired", ...);
 * never NULL, also for unknown values. */
MOSHPIT_EXPORT const char *moshpit_cert_strstatus(moshpit_cert_status_t s);

/* Human-readable name of an error code; never NULL, also for unknown codes. */
MOSHPIT_EXPORT const char *moshpit_strerror(moshpit_err_t e);

/*
 * Downloads the latest averaged vector from a live peer that serves one
 * (config serve_state) into values[0..count): for a peer that joins late
 * and should start from the swarm's parameters. The state travels in
 * encrypted chunks, is checked whole against the server's digest, and
 * resumes from another server holding the same state if the first dies.
 * *round_out (may be NULL) receives the serving peer's count of averaged
 * rounds. Waits for a serving peer to become known up to timeout_ms.
 * Errors: EINVAL, ECOUNT (the served state has another length), ENOSTATE
 * (no live peer serves a state), ETIMEDOUT, ECLOSED. On error values may
 * hold a partial download.
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_fetch_state(moshpit_t *mp, float *values, size_t count,
                    uint32_t timeout_ms, uint64_t *round_out);

/* errno saved by the last call on mp that returned MOSHPIT_ESYS (0 if none,
 * or if mp is NULL: the last failed moshpit_open of this thread). */
MOSHPIT_EXPORT int moshpit_errno(moshpit_t *mp);

/* The library's MOSHPIT_VERSION_STRING, e.g. "0.2.0"; never NULL. It may
 * be newer than the header a program was built with. */
MOSHPIT_EXPORT const char *moshpit_version(void);

/* Constants as functions, for bindings. */
MOSHPIT_EXPORT size_t moshpit_key_bytes(void);
MOSHPIT_EXPORT size_t moshpit_cert_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* MOSHPIT_H */
