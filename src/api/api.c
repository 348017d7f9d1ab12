/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public moshpit_* functions that concern a peer: checks of
 * the configuration and of every argument, error strings; the peer itself
 * is created, run and closed by the engine (net/engine_api.h), whose state
 * stays opaque here. (Keys, authorities and certificates, which need no
 * peer, are in keys.c.)
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "core/agg.h"
#include "core/grid.h"
#include "core/vec.h"
#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "net/engine_api.h"
#include "wire/wire.h"

/* what a caller waits beyond the engine's own deadline for its answer */
#define CALL_SLACK_MS 1000u

static _Thread_local int open_errno; /* errno of this thread's last open */

/* ---- configuration defaults and the sizes of the caller's structs ---- */

/* The defaults of every field: what moshpit_config_init writes, what a
 * field the caller's struct is too short to have takes, and what a field
 * documented as "0 = the default" becomes in moshpit_open. Fields not
 * named are zero (NULL). */
static const moshpit_config_t config_defaults = {
    .listen = "tcp://127.0.0.1:0",
    .group_size = 8,
    .min_group_size = 2,
    .grid_position = -1,
    .matchmaking_ms = 2000,
    .round_timeout_ms = 30000,
    .log_level = MOSHPIT_LOG_WARN,
    .peer_timeout_ms = 5000,
    .bandwidth_mbps = 1000,
    .state_clients_max = 4,
    .aggregation = MOSHPIT_AGG_MEAN,
    .trim = 1,
    .clip_iters = 5,
    .peers_max = MP_PEERS_CAP,
    .peer_msg_rate = MP_MSG_RATE_DEFAULT,
    .sessions_max = MP_SESSIONS_DEFAULT,
};

/* sizeof(moshpit_config_t) and sizeof(moshpit_round_t) in 0.2.0 on this
 * platform: the end of their last field, rounded up to their alignment.
 * The functions without _sized (called by bindings, and by programs built
 * before the header's macros) use these sizes forever. A field added later
 * starts at or after them, never in their tail padding: a program's padding
 * bytes hold anything. The first new field gets a _Static_assert here:
 * offsetof(moshpit_config_t, it) >= CONFIG_SIZE_0_2. */
#define FIELD_END(type, field)                                                 \
    (offsetof(type, field) + sizeof(((type *)0)->field))
#define ALIGN_UP(n, a) (((n) + (a)-1) / (a) * (a))
#define CONFIG_SIZE_0_2                                                        \
    ALIGN_UP(FIELD_END(moshpit_config_t, peer_msg_rate),                       \
             _Alignof(moshpit_config_t))
#define ROUND_SIZE_0_2                                                         \
    ALIGN_UP(FIELD_END(moshpit_round_t, allreduce_ms),                         \
             _Alignof(moshpit_round_t))
_Static_assert(CONFIG_SIZE_0_2 <= sizeof(moshpit_config_t) &&
                   ROUND_SIZE_0_2 <= sizeof(moshpit_round_t),
               "moshpit_config_t and moshpit_round_t only grow");
_Static_assert(offsetof(moshpit_config_t, compression) >= CONFIG_SIZE_0_2,
               "fields added after 0.2.0 start past its struct");
/* No real struct is this large: a larger size is a mistake. */
#define STRUCT_SIZE_MAX 65536u

moshpit_err_t moshpit_config_init_sized(moshpit_config_t *cfg, size_t size) {
    if (cfg == NULL || size > STRUCT_SIZE_MAX)
        return MOSHPIT_EINVAL;
    size_t known = size < sizeof(*cfg) ? size : sizeof(*cfg);
    memcpy(cfg, &config_defaults, known);
    if (size > known)
        memset((unsigned char *)cfg + known, 0, size - known);
    return MOSHPIT_OK;
}

void(moshpit_config_init)(moshpit_config_t *cfg) {
    (void)moshpit_config_init_sized(cfg, CONFIG_SIZE_0_2);
}

/* Fields documented as "0 = the default". */
static void config_zero_defaults(moshpit_config_t *c) {
    if (c->listen == NULL)
        c->listen = config_defaults.listen;
    if (c->bandwidth_mbps == 0)
        c->bandwidth_mbps = config_defaults.bandwidth_mbps;
    if (c->state_clients_max == 0)
        c->state_clients_max = config_defaults.state_clients_max;
    if (c->peers_max == 0)
        c->peers_max = config_defaults.peers_max;
    if (c->peer_msg_rate == 0)
        c->peer_msg_rate = config_defaults.peer_msg_rate;
    if (c->sessions_max == 0)
        c->sessions_max = config_defaults.sessions_max;
}

/* *full = the caller's size bytes of cfg over the defaults. Bytes past the
 * library's struct must be zero: fields of a newer release this library
 * cannot honour, at their default. Reads nothing past cfg + size. */
static moshpit_err_t config_from_caller(const moshpit_config_t *cfg,
                                        size_t size, moshpit_config_t *full) {
    if (size > STRUCT_SIZE_MAX)
        return MOSHPIT_EINVAL;
    const unsigned char *p = (const unsigned char *)cfg;
    for (size_t i = sizeof(*full); i < size; i++)
        if (p[i] != 0)
            return MOSHPIT_EINVAL;
    *full = config_defaults;
    memcpy(full, cfg, size < sizeof(*full) ? size : sizeof(*full));
    return MOSHPIT_OK;
}

const char *moshpit_version(void) {
    return MOSHPIT_VERSION_STRING;
}

size_t moshpit_key_bytes(void) {
    return MOSHPIT_KEY_BYTES;
}

const char *moshpit_strerror(moshpit_err_t e) {
    switch (e) {
    case MOSHPIT_OK:
        return "success";
    case MOSHPIT_EINVAL:
        return "invalid argument";
    case MOSHPIT_ENOMEM:
        return "out of memory";
    case MOSHPIT_ETIMEDOUT:
        return "timed out";
    case MOSHPIT_ECLOSED:
        return "peer closed";
    case MOSHPIT_EPROTO:
        return "protocol error";
    case MOSHPIT_ECRYPTO:
        return "cryptographic failure";
    case MOSHPIT_EPEERAUTH:
        return "peer authentication failed";
    case MOSHPIT_ESYS:
        return "system error";
    case MOSHPIT_ENOSTATE:
        return "no peer serves a state";
    case MOSHPIT_ECOUNT:
        return "state length differs";
    case MOSHPIT_EBUSY:
        return "an operation is already in flight";
    }
    return "unknown error";
}

int moshpit_errno(moshpit_t *mp) {
    if (mp == NULL)
        return open_errno;
    return mp__engine_errno(mp);
}

/* ------------------------------------------------------------------ */

/* An algorithm's name as the kernel spells them (at most 15 characters of
 * letters, digits, '_' and '-'), "default", or "" (the default); whether
 * this process may use it is for moshpit_open to find out. */
static bool congestion_name_ok(const char *s) {
    size_t n = strnlen(s, 16);
    if (n >= 16)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static moshpit_err_t check_config(const moshpit_config_t *c) {
    if (c->swarm == NULL || c->swarm[0] == '\0' ||
        strlen(c->swarm) > MP_SWARM_NAME_MAX)
        return MOSHPIT_EINVAL;
    if (c->group_size < 1 || c->group_size > MP_GROUP_MAX)
        return MOSHPIT_EINVAL;
    /* group_size 1 means "never average" (every call returns alone) */
    if (c->group_size >= 2 &&
        (c->min_group_size < 2 || c->min_group_size > c->group_size))
        return MOSHPIT_EINVAL;
    if (c->matchmaking_ms < 10 || c->matchmaking_ms > 600000)
        return MOSHPIT_EINVAL;
    if (c->round_timeout_ms < c->matchmaking_ms + 500 ||
        c->round_timeout_ms > 3600000)
        return MOSHPIT_EINVAL;
    if (c->peer_timeout_ms < 10 || c->peer_timeout_ms > 3600000)
        return MOSHPIT_EINVAL;
    if (c->bandwidth_mbps > 10000000)
        return MOSHPIT_EINVAL;
    if (c->log_level < MOSHPIT_LOG_ERROR || c->log_level > MOSHPIT_LOG_DEBUG)
        return MOSHPIT_EINVAL;
    if (c->grid_position < -1 || c->grid_dims > MP_GRID_DIMS_MAX)
        return MOSHPIT_EINVAL;
    if (c->state_clients_max > MP_STATE_CLIENTS_MAX)
        return MOSHPIT_EINVAL;
    if (c->authorized_keys == NULL && c->authorized_count != 0)
        return MOSHPIT_EINVAL;
    if (c->authorized_count > 1000000)
        return MOSHPIT_EINVAL;
    if (c->peers_max == 1 || c->peers_max > MP_PEERS_CAP_MAX)
        return MOSHPIT_EINVAL;
    if (c->peer_msg_rate != 0 && (c->peer_msg_rate < MP_MSG_RATE_MIN ||
                                  c->peer_msg_rate > MP_MSG_RATE_MAX))
        return MOSHPIT_EINVAL;
    if (c->data_streams > MP_DATA_STREAMS_MAX)
        return MOSHPIT_EINVAL;
    if (c->shared_memory > MOSHPIT_SHM_OFF)
        return MOSHPIT_EINVAL;
    if (c->sessions_max != 0 && (c->sessions_max < MP_SESSIONS_MIN ||
                                 c->sessions_max > MP_SESSIONS_MAX))
        return MOSHPIT_EINVAL;
    if (c->congestion != NULL && !congestion_name_ok(c->congestion))
        return MOSHPIT_EINVAL;
    mp_agg_t agg;
    if (mp__agg_from_config(c, &agg) != MOSHPIT_OK)
        return MOSHPIT_EINVAL;
    bool has_cert = !mp__crypto_is_zero(c->cert, MOSHPIT_CERT_BYTES);
    if (!mp__crypto_is_zero(c->authority_key, 32)) {
        /* certificate admission: a usable authority key and a certificate
         * of our own (checked in full once the identity is known) */
        if (!has_cert || !mp__cert_authority_key_ok(c->authority_key))
            return MOSHPIT_EINVAL;
    } else if (has_cert) {
        mp_cert_t tmp; /* presented without checking it ourselves: format */
        if (mp__cert_decode(c->cert, MOSHPIT_CERT_BYTES, &tmp) != MOSHPIT_OK)
            return MOSHPIT_EINVAL;
    }
    return MOSHPIT_OK;
}

/* moshpit_open with a complete struct of this library's size: the fields
 * documented as "0 = the default" take their defaults here, so the engine
 * gets a complete configuration. */
static moshpit_err_t open_full(const moshpit_config_t *cfg, moshpit_t **out) {
    *out = NULL;
    moshpit_config_t c = *cfg;
    config_zero_defaults(&c);
    moshpit_err_t e = check_config(&c);
    if (e == MOSHPIT_OK && mp__crypto_init() != MOSHPIT_OK)
        e = MOSHPIT_ECRYPTO;
    if (e == MOSHPIT_OK) {
        int sys_errno = 0;
        e = mp__engine_open(&c, out, &sys_errno);
        if (e == MOSHPIT_ESYS)
            open_errno = sys_errno;
    }
    mp__crypto_wipe(&c, sizeof(c)); /* held the secret key */
    return e;
}

moshpit_err_t moshpit_open_sized(const moshpit_config_t *cfg, size_t cfg_size,
                                 moshpit_t **out) {
    if (out == NULL)
        return MOSHPIT_EINVAL;
    *out = NULL;
    if (cfg == NULL)
        return MOSHPIT_EINVAL;
    moshpit_config_t full;
    moshpit_err_t e = config_from_caller(cfg, cfg_size, &full);
    if (e == MOSHPIT_OK)
        e = open_full(&full, out);
    /* the copy held the secret key and the swarm secret */
    mp__crypto_wipe(&full, sizeof(full));
    return e;
}

moshpit_err_t(moshpit_open)(const moshpit_config_t *cfg, moshpit_t **out) {
    return moshpit_open_sized(cfg, CONFIG_SIZE_0_2, out);
}

/* Writes the first size bytes of *info: r as far as it fits, then zeros. */
static void round_to_caller(const moshpit_round_t *r, moshpit_round_t *info,
                            size_t size) {
    size_t known = size < sizeof(*r) ? size : sizeof(*r);
    memcpy(info, r, known);
    if (size > known)
        memset((unsigned char *)info + known, 0, size - known);
}

/* The checks moshpit_average and moshpit_average_start share, all made
 * before anything is sent, and the command they hand the engine. */
static moshpit_err_t average_cmd(moshpit_t *mp, float *values, size_t count,
                                 double weight, mp_cmd_t *c) {
    if (mp == NULL || (values == NULL && count > 0) || !isfinite(weight) ||
        weight < 0.0 || weight > MOSHPIT_WEIGHT_MAX)
        return MOSHPIT_EINVAL;
#if SIZE_MAX > (1ull << 34) /* where size_t can hold more */
    if (count > ((size_t)1 << 34))
        return MOSHPIT_EINVAL; /* 64 GiB of floats: certainly a mistake */
#endif
    if (!mp__vec_all_finite(values, count))
        return MOSHPIT_EINVAL;
    memset(c, 0, sizeof(*c));
    c->type = MP_CMD_AVERAGE;
    c->values = values;
    c->count = count;
    c->weight = weight;
    return MOSHPIT_OK;
}

/* What an averaging call reports in *info: the round, or on an error a
 * round alone (group_size 1, nothing averaged). */
static void average_info(moshpit_err_t e, mp_cmd_t *c, moshpit_round_t *info,
                         size_t info_size) {
    if (info == NULL)
        return;
    if (e != MOSHPIT_OK) {
        memset(&c->info, 0, sizeof(c->info));
        c->info.group_size = 1;
    }
    round_to_caller(&c->info, info, info_size);
}

moshpit_err_t moshpit_average_sized(moshpit_t *mp, float *values, size_t count,
                                    double weight, moshpit_round_t *info,
                                    size_t info_size) {
    if (info != NULL && info_size > STRUCT_SIZE_MAX)
        return MOSHPIT_EINVAL;
    mp_cmd_t c;
    moshpit_err_t e = average_cmd(mp, values, count, weight, &c);
    if (e != MOSHPIT_OK)
        return e;
    /* an op started and waited for at once (mp__engine_run), waiting for
     * its turn where moshpit_average_start would say EBUSY */
    e = mp__engine_run(
        mp, &c, (uint64_t)mp__engine_round_timeout_ms(mp) + CALL_SLACK_MS);
    average_info(e, &c, info, info_size);
    return e;
}

moshpit_err_t(moshpit_average)(moshpit_t *mp, float *values, size_t count,
                               double weight, moshpit_round_t *info) {
    return moshpit_average_sized(mp, values, count, weight, info,
                                 ROUND_SIZE_0_2);
}

moshpit_err_t moshpit_average_start(moshpit_t *mp, float *values, size_t count,
                                    double weight, moshpit_op_t **op) {
    if (op == NULL)
        return MOSHPIT_EINVAL;
    *op = NULL;
    mp_cmd_t c;
    moshpit_err_t e = average_cmd(mp, values, count, weight, &c);
    if (e != MOSHPIT_OK)
        return e;
    return mp__engine_start(
        mp, &c, (uint64_t)mp__engine_round_timeout_ms(mp) + CALL_SLACK_MS, op);
}

moshpit_err_t moshpit_op_wait_sized(moshpit_op_t *op, uint32_t timeout_ms,
                                    moshpit_round_t *info, size_t info_size) {
    if (op == NULL || (info != NULL && info_size > STRUCT_SIZE_MAX))
        return MOSHPIT_EINVAL;
    mp_cmd_t c;
    memset(&c, 0, sizeof(c));
    moshpit_err_t e = mp__engine_op_wait(op, timeout_ms, &c);
    if (c.type == 0)
        return e; /* not over (ETIMEDOUT, or EINVAL: waited for on another
                     thread): the op lives on, info untouched */
    average_info(e, &c, info, info_size);
    return e;
}

moshpit_err_t(moshpit_op_wait)(moshpit_op_t *op, uint32_t timeout_ms,
                               moshpit_round_t *info) {
    return moshpit_op_wait_sized(op, timeout_ms, info, ROUND_SIZE_0_2);
}

moshpit_err_t moshpit_fetch_state(moshpit_t *mp, float *values, size_t count,
                                  uint32_t timeout_ms, uint64_t *round_out) {
    if (round_out != NULL)
        *round_out = 0;
    if (mp == NULL || values == NULL || count == 0 || timeout_ms == 0 ||
        timeout_ms > 3600000)
        return MOSHPIT_EINVAL;
#if SIZE_MAX > MP_STATE_COUNT_MAX /* a 32-bit size_t cannot exceed it */
    if (count > MP_STATE_COUNT_MAX)
        return MOSHPIT_EINVAL;
#endif
    mp_cmd_t c;
    memset(&c, 0, sizeof(c));
    c.type = MP_CMD_FETCH;
    c.values = values;
    c.count = count;
    moshpit_err_t e = mp__engine_run(mp, &c, timeout_ms);
    if (e == MOSHPIT_OK && round_out != NULL)
        *round_out = c.state_round;
    return e;
}

moshpit_err_t moshpit_endpoint(moshpit_t *mp, char *buf, size_t len) {
    if (mp == NULL || buf == NULL)
        return MOSHPIT_EINVAL;
    return mp__engine_endpoint(mp, buf, len);
}

size_t moshpit_members(moshpit_t *mp) {
    if (mp == NULL)
        return 0;
    return mp__engine_members(mp);
}

moshpit_err_t moshpit_wait_members(moshpit_t *mp, size_t n,
                                   uint32_t timeout_ms) {
    if (mp == NULL)
        return MOSHPIT_EINVAL;
    return mp__engine_wait_members(mp, n, timeout_ms);
}

void moshpit_close(moshpit_t *mp) {
    mp__engine_close(mp);
}
