/* SPDX-License-Identifier: MIT */
/*
 * engine_api.h - the engine as the API layer sees it: a peer's state is
 * created, run and freed here (src/net/engine_open.c), and the moshpit_*
 * entry points hand it commands. The state itself (struct moshpit,
 * engine.h) stays opaque above src/net.
 *
 * Thread safety: every function here may be called from any application
 * thread; commands run one at a time (later callers wait their turn, a
 * background op does not wait for it).
 */
#ifndef MP_NET_ENGINE_API_H
#define MP_NET_ENGINE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

/* Limits on the configuration that the API layer checks and the engine
 * applies (docs/DESIGN.md, "Limits"). */
#define MP_PEERS_CAP 4096u /* default of config peers_max */
#define MP_PEERS_CAP_MAX (1u << 20)
/* control messages read from one peer per second: default of config
 * peer_msg_rate and its bounds */
#define MP_MSG_RATE_DEFAULT 1000u
#define MP_MSG_RATE_MIN 50u
#define MP_MSG_RATE_MAX 1000000u
#define MP_STATE_CLIENTS_MAX 64u /* cap on state_clients_max */
#define MP_DATA_STREAMS_MAX 16u  /* cap on data_streams */
/* data_streams 0: connections to a peer whose loss-based connections are
 * loss-bound grow to this (mp__engine_data_widen) */
#define MP_DATA_STREAMS_LOSSY 8u
/* sessions kept open: default of config sessions_max and its bounds */
#define MP_SESSIONS_DEFAULT 128u
#define MP_SESSIONS_MIN 2u
#define MP_SESSIONS_MAX 65536u

typedef enum { MP_CMD_AVERAGE = 1, MP_CMD_CLOSE, MP_CMD_FETCH } mp_cmd_type_t;

/* A request from an API call. Owned by the calling thread; the engine
 * writes result fields and sets done under mp->lock. */
typedef struct mp_cmd {
    mp_cmd_type_t type;
    float *values;
    size_t count;
    double weight;
    uint64_t deadline_ms; /* when the engine must have answered */
    moshpit_round_t info;
    uint64_t state_round; /* FETCH: the server's round count */
    moshpit_err_t result;
    bool done;   /* under lock */
    bool cancel; /* under lock: caller gave up; drop the buffer */
} mp_cmd_t;

/* Creates a peer from a configuration the API layer has checked: copies
 * what it needs (secrets into secure memory), derives the identity, parses
 * the bootstrap list, binds its sockets and starts the engine thread.
 * Returns MOSHPIT_OK and *out, or an error with *out NULL and nothing left
 * behind (MOSHPIT_EINVAL: keys that do not belong together, a bootstrap
 * entry that is not "tcp://host:port#KEY", an own certificate the swarm
 * would refuse, an unusable listen or advertise address; MOSHPIT_ESYS with
 * *sys_errno set). */
moshpit_err_t mp__engine_open(const moshpit_config_t *cfg, moshpit_t **out,
                              int *sys_errno);

/* Runs c on the engine thread once the calls before it are done, with
 * c->deadline_ms set wait_ms after that moment, and waits for it until
 * then; after that asks the engine to drop the command and waits for that
 * (the engine checks at every loop turn, so this is short). Returns the
 * command's result, MOSHPIT_ECLOSED if the engine stopped, MOSHPIT_ESYS if
 * the command could not be handed over. */
moshpit_err_t mp__engine_run(moshpit_t *mp, mp_cmd_t *c, uint64_t wait_ms);

/* Starts c as a background op (moshpit_average_start): allocates the op,
 * takes the turn without waiting for it and hands c's copy to the engine,
 * whose deadline is wait_ms from now. Returns MOSHPIT_OK and *out, or
 * MOSHPIT_EBUSY (an op of this peer not yet returned by mp__engine_op_wait,
 * or another call holds the turn), MOSHPIT_ECLOSED, MOSHPIT_ENOMEM,
 * MOSHPIT_ESYS, with nothing sent and *out untouched. */
moshpit_err_t mp__engine_start(moshpit_t *mp, const mp_cmd_t *c,
                               uint64_t wait_ms, moshpit_op_t **out);

/* Waits up to timeout_ms for op to end. MOSHPIT_ETIMEDOUT: not over, op
 * unchanged; MOSHPIT_EINVAL: another thread is waiting for op. Otherwise
 * the op is over: *result is its command as the engine left it (info,
 * values), the return value its result, and op has been freed. */
moshpit_err_t mp__engine_op_wait(moshpit_op_t *op, uint32_t timeout_ms,
                                 mp_cmd_t *result);

/* Leaves the swarm (waiting at most mp__engine_close_wait_ms for the
 * mates of the last round), stops the thread and frees everything. NULL
 * is ignored. */
void mp__engine_close(moshpit_t *mp);

/* The configured bound on one round (config round_timeout_ms). */
uint32_t mp__engine_round_timeout_ms(const moshpit_t *mp);
/* Live members known, this peer included. */
size_t mp__engine_members(moshpit_t *mp);
/* Waits until at least n members are known: MOSHPIT_OK, MOSHPIT_ETIMEDOUT
 * after timeout_ms, MOSHPIT_ECLOSED if the engine stopped. */
moshpit_err_t mp__engine_wait_members(moshpit_t *mp, size_t n,
                                      uint32_t timeout_ms);
/* The errno of the last MOSHPIT_ESYS this peer returned. */
int mp__engine_errno(moshpit_t *mp);
/* Copies "tcp://host:port#KEY", what others dial, into buf (EINVAL if it
 * does not fit with its NUL). */
moshpit_err_t mp__engine_endpoint(moshpit_t *mp, char *buf, size_t len);

#endif
