/* SPDX-License-Identifier: MIT */
/*
 * moshpit.h - decentralized, encrypted parameter averaging (Moshpit
 * All-Reduce).
 *
 * This is the only header the library installs. It depends on nothing but
 * <stddef.h> and <stdint.h>; ZeroMQ, libsodium and msgpack-c stay private.
 *
 * Ownership: every object the library allocates is freed by the library
 * (moshpit_close). Buffers passed in are borrowed for the duration of the
 * call only. Thread safety: functions taking a moshpit_t may be called from
 * any thread, but calls on one moshpit_t are serialized internally (one
 * moshpit_average at a time per peer). Functions without a moshpit_t are
 * thread-safe.
 */
#ifndef MOSHPIT_H
#define MOSHPIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOSHPIT_VERSION_MAJOR 0
#define MOSHPIT_VERSION_MINOR 1
#define MOSHPIT_VERSION_PATCH 0
#define MOSHPIT_VERSION_STRING "0.1.0"

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
    MOSHPIT_ESYS       /* an OS call failed; moshpit_errno() has errno */
} moshpit_err_t;

#define MOSHPIT_KEY_BYTES 32
/* Length of a key as Z85 text, without the terminating NUL. */
#define MOSHPIT_KEY_TEXT_LEN 40
/* The largest weight moshpit_average() accepts (and a peer may announce):
 * larger ones are MOSHPIT_EINVAL, and dropped when they come off the wire. */
#define MOSHPIT_WEIGHT_MAX 1e15

/* Log levels for moshpit_config_t.log_level (higher = more verbose). */
#define MOSHPIT_LOG_ERROR 0
#define MOSHPIT_LOG_WARN 1
#define MOSHPIT_LOG_INFO 2
#define MOSHPIT_LOG_DEBUG 3

/*
 * Configuration of one peer. Initialize with moshpit_config_init() and then
 * set fields; moshpit_open() copies everything it needs, so the struct and
 * the strings it points to may be freed after moshpit_open() returns.
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
    int log_level; /* default MOSHPIT_LOG_WARN */
    /* Added in 0.1 */
    uint32_t peer_timeout_ms; /* a group member silent this long while
                                 data is expected from it is dropped from
                                 the round; default 5000 */
    uint32_t bandwidth_mbps;  /* announced bandwidth; shares of the
                                 all-reduce are proportional to it;
                                 0 = default 1000 */
    uint32_t grid_dims;       /* d of the Moshpit grid (M^d peers), 1..8;
                                 0 (default) = from the swarm size N
                                 this peer knows: the largest d with
                                 N >= 3/4 M^d */
} moshpit_config_t;

/* What one moshpit_average() call did. */
typedef struct moshpit_round {
    uint64_t round_id;        /* group id of this round, 0 if alone */
    uint32_t group_size;      /* peers whose data was averaged, incl. self;
                                 1 = nobody to average with this time */
    double group_weight;      /* sum of weights that were averaged */
    double fraction_averaged; /* share of elements that got the group
                                 average (the rest kept the local value) */
    uint32_t peers_failed;    /* group members dropped mid-round */
    uint64_t bytes_sent, bytes_received;
    uint32_t matchmaking_ms, allreduce_ms;
} moshpit_round_t;

/* Fills cfg with defaults. cfg must not be NULL. */
MOSHPIT_EXPORT void moshpit_config_init(moshpit_config_t *cfg);

/*
 * Creates a peer: binds its sockets, starts its engine thread and, if
 * bootstrap endpoints are given, starts joining the swarm (asynchronously;
 * moshpit_members() shows progress). On success *out owns the peer; free it
 * with moshpit_close(). Errors: EINVAL (bad config), ENOMEM, ESYS (bind
 * failed, thread creation failed), ECRYPTO (key setup failed).
 */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_open(const moshpit_config_t *cfg, moshpit_t **out);

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

/* Leaves the swarm gracefully, stops the engine, frees everything.
 * NULL is ignored. Must not race with other calls on the same peer. */
MOSHPIT_EXPORT void moshpit_close(moshpit_t *mp);

/* Generates a new identity (CURVE keypair). Errors: EINVAL, ECRYPTO. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t moshpit_keypair(uint8_t pub[32],
                                                               uint8_t sec[32]);

/* Key <-> Z85 text (40 characters + NUL). Errors: EINVAL. */
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_key_to_text(const uint8_t key[32], char out[41]);
MOSHPIT_EXPORT MOSHPIT_NODISCARD moshpit_err_t
moshpit_key_from_text(const char *text, uint8_t key[32]);

/* Human-readable name of an error code; never NULL, also for unknown codes. */
MOSHPIT_EXPORT const char *moshpit_strerror(moshpit_err_t e);

/* errno saved by the last call on mp that returned MOSHPIT_ESYS (0 if none,
 * or if mp is NULL: the last failed moshpit_open of this thread). */
MOSHPIT_EXPORT int moshpit_errno(moshpit_t *mp);

/* "0.1.0"; never NULL. */
MOSHPIT_EXPORT const char *moshpit_version(void);

/* Constants as functions, for bindings. */
MOSHPIT_EXPORT size_t moshpit_key_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* MOSHPIT_H */
