/* SPDX-License-Identifier: MIT */
/*
 * engine_open.c - the life of a peer's state (engine_api.h): creating it
 * from a checked configuration (copies, secrets in secure memory, identity,
 * the bootstrap list parsed once, the engine's buffers), starting and
 * stopping the engine thread, handing it commands one at a time (the
 * turn) and waiting for them with a deadline, background ops
 * (moshpit_average_start, moshpit_op_wait), and the few counters
 * application threads may read.
 * Also the engine's log function over base/log.h.
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/z85.h"
#include "core/codec.h"
#include "crypto/cert.h"
#include "shm.h"

#define BOOTSTRAP_MAX 64u
/* what a caller waits beyond the engine's own deadline for its answer */
#define CALL_SLACK_MS 1000u

void mp__engine_log(moshpit_t *mp, int level, const char *fmt, ...) {
    if (!mp__log_enabled(&mp->log, level))
        return;
    va_list ap;
    va_start(ap, fmt);
    mp__log_vwrite(&mp->log, mp_plat_clock_ms(), level, fmt, ap);
    va_end(ap);
}

/* With certificate admission, our own certificate must be one the other
 * peers accept: from the authority, for our identity and swarm, valid now.
 * Checked before anything is sent. */
static moshpit_err_t check_own_cert(const moshpit_t *mp) {
    if (mp__crypto_is_zero(mp->cfg.authority_key, 32))
        return MOSHPIT_OK;
    moshpit_cert_status_t s =
        mp__cert_check(mp->cfg.cert, MOSHPIT_CERT_BYTES, mp->cfg.authority_key,
                       mp->swarm_hash, mp->pub, mp_plat_wallclock_s(), NULL);
    return s == MOSHPIT_CERT_VALID ? MOSHPIT_OK : MOSHPIT_EINVAL;
}

/* The identity: the configured key pair (checked to belong together) or a
 * fresh one. */
static moshpit_err_t identity(moshpit_t *mp, const moshpit_config_t *cfg) {
    if (mp__crypto_is_zero(cfg->secret_key, 32)) {
        if (!mp__crypto_is_zero(cfg->public_key, 32))
            return MOSHPIT_EINVAL; /* a public key without its secret */
        if (mp__crypto_keypair(mp->pub, mp->sec) != MOSHPIT_OK)
            return MOSHPIT_ECRYPTO;
    } else {
        memcpy(mp->sec, cfg->secret_key, 32);
        if (mp__crypto_public_from_secret(mp->sec, mp->pub) != MOSHPIT_OK)
            return MOSHPIT_ECRYPTO;
        if (!mp__crypto_is_zero(cfg->public_key, 32) &&
            memcmp(cfg->public_key, mp->pub, 32) != 0)
            return MOSHPIT_EINVAL; /* keys do not belong together */
    }
    if (mp__z85_encode(mp->pub, 32, mp->pub_txt) != 0)
        return MOSHPIT_ECRYPTO;
    return MOSHPIT_OK;
}

/* The bootstrap list, parsed here once: the engine thread dials what it
 * holds. */
static moshpit_err_t parse_bootstrap(moshpit_t *mp, const char *const *list) {
    if (list == NULL)
        return MOSHPIT_OK;
    size_t n = 0;
    while (list[n] != NULL)
        if (++n > BOOTSTRAP_MAX)
            return MOSHPIT_EINVAL;
    if (n == 0)
        return MOSHPIT_OK;
    mp->bootstrap = calloc(n, sizeof(*mp->bootstrap));
    if (mp->bootstrap == NULL)
        return MOSHPIT_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (mp__endpoint_parse(list[i], &mp->bootstrap[i]) != MOSHPIT_OK)
            return MOSHPIT_EINVAL;
    mp->bootstrap_n = n;
    return MOSHPIT_OK;
}

/* Frees the state itself, after mp__engine_teardown (or before setup). */
static void state_free(moshpit_t *mp) {
    free(mp->bootstrap);
    free(mp->auth);
    mp__crypto_secure_free(mp->sec);
    mp__crypto_secure_free(mp->swarm_secret);
    if (mp->win != NULL)
        mp__shm_window_wipe(mp->win); /* what mates read of us is gone */
    free(mp->win);
    for (int m = 0; m < 2; m++) {
        free(mp->mirror[m].buf);
        free(mp->mirror[m].have);
    }
    free(mp->scratch);
    free(mp->encbuf);
    free(mp->msgbuf);
    free(mp->msg);
    mp_plat_mutex_destroy(&mp->lock);
    mp_plat_cond_destroy(&mp->cond);
    free(mp);
}

/* Everything of open but the sockets and the thread. */
static moshpit_err_t state_init(moshpit_t *mp, const moshpit_config_t *cfg) {
    mp->cfg = *cfg;
    mp->cfg.swarm = NULL;
    mp->cfg.bootstrap = NULL;
    mp->cfg.authorized_keys = NULL;
    mp->cfg.log = NULL; /* mp->log holds it */
    mp__log_init(&mp->log, cfg->log, cfg->log_user, cfg->log_level);
    /* the "0 = the default" fields arrive filled in (api.c,
     * config_zero_defaults: the one defaults table) */
    mp->peers_max = mp->cfg.peers_max;
    mp->msg_rate = mp->cfg.peer_msg_rate;
    mp->sessions_max = (uint32_t)mp->cfg.sessions_max;
    mp->ciphers = mp__session_ciphers();
    mp->eph_order = mp_plat_wallclock_us();
    mp->has_host = mp->cfg.shared_memory == MOSHPIT_SHM_AUTO &&
                   mp__shm_host_id(mp->host_id);
    if (mp->has_host) {
        mp__shm_sweep();
        mp->win = calloc(1, sizeof(*mp->win));
        if (mp->win != NULL)
            mp__shm_window_init(mp->win);
    }
    mp->rng = mp__crypto_random_u64();
    mp->join_seq = mp__crypto_random_u64() >> 16;
    moshpit_err_t e =
        mp__grid_init(&mp->grid, cfg->group_size, cfg->grid_dims,
                      cfg->grid_position, mp__crypto_random_u64());
    if (e != MOSHPIT_OK)
        return e;
    mp->sec = mp__crypto_secure_alloc(32);
    mp->scratch = malloc((size_t)MP_DATA_MAX_COUNT * sizeof(float));
    mp->msgbuf = malloc(MP_CTRL_MAX);
    mp->msg = malloc(sizeof(*mp->msg));
    if (!mp->sec || !mp->scratch || !mp->msgbuf || !mp->msg)
        return MOSHPIT_ENOMEM;
    if (cfg->compression != MOSHPIT_COMPRESS_NONE) {
        mp->encbuf =
            malloc(mp__codec_bytes(cfg->compression, MP_DATA_MAX_COUNT));
        if (mp->encbuf == NULL)
            return MOSHPIT_ENOMEM;
    }
    if (!mp__crypto_is_zero(cfg->swarm_secret, 32)) {
        mp->swarm_secret = mp__crypto_secure_alloc(32);
        if (mp->swarm_secret == NULL)
            return MOSHPIT_ENOMEM;
        memcpy(mp->swarm_secret, cfg->swarm_secret, 32);
    }
    mp__crypto_wipe(mp->cfg.swarm_secret, 32);
    mp__crypto_wipe(mp->cfg.secret_key, 32);
    mp__crypto_swarm_hash(cfg->swarm, mp->swarm_hash);

    e = identity(mp, cfg);
    if (e != MOSHPIT_OK)
        return e;
    e = check_own_cert(mp);
    if (e != MOSHPIT_OK)
        return e;
    if (cfg->authorized_keys != NULL && cfg->authorized_count > 0) {
        mp->auth = malloc(cfg->authorized_count * 32);
        if (mp->auth == NULL)
            return MOSHPIT_ENOMEM;
        memcpy(mp->auth, cfg->authorized_keys, cfg->authorized_count * 32);
        mp->auth_n = cfg->authorized_count;
    }
    return parse_bootstrap(mp, cfg->bootstrap);
}

moshpit_err_t mp__engine_open(const moshpit_config_t *cfg, moshpit_t **out,
                              int *sys_errno) {
    *out = NULL;
    *sys_errno = 0;
    moshpit_t *mp = calloc(1, sizeof(*mp));
    if (mp == NULL)
        return MOSHPIT_ENOMEM;
    if (mp_plat_mutex_init(&mp->lock) != 0) {
        free(mp);
        return MOSHPIT_ESYS;
    }
    if (mp_plat_cond_init(&mp->cond) != 0) {
        mp_plat_mutex_destroy(&mp->lock);
        free(mp);
        return MOSHPIT_ESYS;
    }
    moshpit_err_t e = state_init(mp, cfg);
    if (e != MOSHPIT_OK) {
        state_free(mp);
        return e;
    }
    e = mp__engine_setup(mp);
    if (e != MOSHPIT_OK) {
        *sys_errno = errno;
        mp__engine_teardown(mp);
        state_free(mp);
        return e;
    }
    mp->members_live = 1;
    int rc = mp_plat_thread_start(&mp->thread, mp__engine_main, mp);
    if (rc != 0) {
        *sys_errno = rc;
        mp__engine_teardown(mp);
        state_free(mp);
        return MOSHPIT_ESYS;
    }
    mp->thread_started = true;
    *out = mp;
    return MOSHPIT_OK;
}

/* Every call on a peer is counted from entry to return, so that
 * moshpit_close, called on another thread, frees the peer only after the
 * calls already running have left (docs/DESIGN.md, "Threads and
 * ownership"). */
static void call_enter(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    mp->inside++;
    mp_plat_mutex_unlock(&mp->lock);
}

static void call_leave_locked(moshpit_t *mp) {
    if (--mp->inside == 0)
        mp_plat_cond_broadcast(&mp->cond);
}

static void call_leave(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    call_leave_locked(mp);
    mp_plat_mutex_unlock(&mp->lock);
}

/* Under mp->lock: gives c the turn (cmd_active), with its deadline wait_ms
 * from now, the moment no other command holds it. With wait false,
 * MOSHPIT_EBUSY instead of waiting. A close that has begun refuses new
 * work (mp__engine_close); checked in the same critical section that sets
 * cmd_active, so no command slips past a close. The turn is released by
 * mp__engine_complete_cmd, or by finish_locked if the engine stopped first. */
static moshpit_err_t turn_take_locked(moshpit_t *mp, mp_cmd_t *c, bool wait,
                                      uint64_t wait_ms) {
    for (;;) {
        if (mp->stopped || (mp->closing && c->type != MP_CMD_CLOSE))
            return MOSHPIT_ECLOSED;
        if (mp->cmd_active == NULL)
            break;
        if (!wait)
            return MOSHPIT_EBUSY;
        mp_plat_cond_wait_until(&mp->cond, &mp->lock,
                                mp_plat_clock_ms() + 1000);
    }
    mp->cmd_active = c;
    /* the deadline counts from this command's turn, not from the call */
    c->deadline_ms = mp_plat_clock_ms() + wait_ms;
    return MOSHPIT_OK;
}

/* Hands c, which holds the turn, to the engine. */
static moshpit_err_t post(moshpit_t *mp, mp_cmd_t *c) {
    int err = mp__engine_post(mp, c);
    if (err == 0)
        return MOSHPIT_OK;
    mp_plat_mutex_lock(&mp->lock);
    mp->last_errno = err;
    if (mp->cmd_active == c)
        mp->cmd_active = NULL;
    mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
    return MOSHPIT_ESYS;
}

/* Under mp->lock: waits until c is done or the engine stopped (true), or
 * until `until` passes first (false; at once if it has passed). */
static bool wait_done_locked(moshpit_t *mp, const mp_cmd_t *c, uint64_t until) {
    while (!c->done && !mp->stopped) {
        if (mp_plat_clock_ms() >= until)
            return false;
        mp_plat_cond_wait_until(&mp->cond, &mp->lock, until);
    }
    return true;
}

/* Under mp->lock, once wait_done_locked said c is over: its result. */
static moshpit_err_t finish_locked(moshpit_t *mp, mp_cmd_t *c) {
    moshpit_err_t e = c->done ? c->result : MOSHPIT_ECLOSED;
    /* cut short by a close on another thread (a round that finished
     * before the engine saw the cancel keeps its OK) */
    if (e != MOSHPIT_OK && c->cancel && mp->closing && c->type != MP_CMD_CLOSE)
        e = MOSHPIT_ECLOSED;
    if (mp->cmd_active == c) { /* the engine stopped without answering */
        mp->cmd_active = NULL;
        mp_plat_cond_broadcast(&mp->cond);
    }
    return e;
}

/* A blocking call: waits for the turn, hands c to the engine and waits for
 * it until c->deadline_ms; after that asks the engine to drop the command
 * and waits for that (the engine checks at every loop turn, so this is
 * short). moshpit_average is this, an op started and waited for at once;
 * only the op of moshpit_average_start lives on the heap. */
static moshpit_err_t run_turn(moshpit_t *mp, mp_cmd_t *c, uint64_t wait_ms) {
    mp_plat_mutex_lock(&mp->lock);
    moshpit_err_t e = turn_take_locked(mp, c, true, wait_ms);
    mp_plat_mutex_unlock(&mp->lock);
    if (e != MOSHPIT_OK)
        return e;
    e = post(mp, c);
    if (e != MOSHPIT_OK)
        return e;
    mp_plat_mutex_lock(&mp->lock);
    if (!wait_done_locked(mp, c, c->deadline_ms)) {
        c->cancel = true;
        /* the engine answers a cancel within one loop turn */
        while (!c->done && !mp->stopped)
            mp_plat_cond_wait_until(&mp->cond, &mp->lock,
                                    mp_plat_clock_ms() + 1000);
    }
    e = finish_locked(mp, c);
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

moshpit_err_t mp__engine_run(moshpit_t *mp, mp_cmd_t *c, uint64_t wait_ms) {
    call_enter(mp);
    moshpit_err_t e = run_turn(mp, c, wait_ms);
    call_leave(mp);
    return e;
}

moshpit_err_t mp__engine_start(moshpit_t *mp, const mp_cmd_t *c,
                               uint64_t wait_ms, moshpit_op_t **out) {
    moshpit_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return MOSHPIT_ENOMEM;
    op->mp = mp;
    op->cmd = *c;
    mp_plat_mutex_lock(&mp->lock);
    mp->inside++; /* call_enter */
    moshpit_err_t e = MOSHPIT_OK;
    if (mp->stopped || mp->closing)
        e = MOSHPIT_ECLOSED;
    else if (mp->op_live != NULL)
        e = MOSHPIT_EBUSY;
    else
        e = turn_take_locked(mp, &op->cmd, false, wait_ms);
    if (e == MOSHPIT_OK)
        mp->op_live = op;
    mp_plat_mutex_unlock(&mp->lock);
    if (e == MOSHPIT_OK) {
        e = post(mp, &op->cmd);
        if (e != MOSHPIT_OK) {
            mp_plat_mutex_lock(&mp->lock);
            mp->op_live = NULL;
            mp_plat_mutex_unlock(&mp->lock);
        }
    }
    call_leave(mp);
    if (e != MOSHPIT_OK) {
        free(op);
        return e;
    }
    *out = op;
    return MOSHPIT_OK;
}

/* No deadline of its own: the engine ends every round by round_timeout_ms
 * and a close cancels the op, so ETIMEDOUT here always means "not over
 * yet" (an op's own result is never ETIMEDOUT: only a close cancels it,
 * and that turns into ECLOSED). */
moshpit_err_t mp__engine_op_wait(moshpit_op_t *op, uint32_t timeout_ms,
                                 mp_cmd_t *result) {
    moshpit_t *mp = op->mp;
    bool over = false;
    moshpit_err_t e;
    mp_plat_mutex_lock(&mp->lock);
    mp->inside++; /* call_enter */
    if (op->waiting) {
        e = MOSHPIT_EINVAL;
    } else {
        op->waiting = true;
        over = wait_done_locked(mp, &op->cmd,
                                mp_plat_clock_ms() + (uint64_t)timeout_ms);
        op->waiting = false;
        e = MOSHPIT_ETIMEDOUT;
        if (over) {
            e = finish_locked(mp, &op->cmd);
            *result = op->cmd;
            if (mp->op_live == op)
                mp->op_live = NULL;
        }
    }
    call_leave_locked(mp);
    mp_plat_mutex_unlock(&mp->lock);
    /* mp may be gone from here on (a close on another thread) */
    if (over)
        free(op);
    return e;
}

void mp__engine_close(moshpit_t *mp) {
    if (mp == NULL)
        return;
    if (mp->thread_started) {
        /* calls running on other threads: a waiting moshpit_wait_members
         * returns, the running command (a blocking call's or an op's) is
         * cancelled (the engine drops it within a loop turn) and the ones
         * waiting for their turn are refused */
        mp_plat_mutex_lock(&mp->lock);
        mp->closing = true;
        if (mp->cmd_active != NULL)
            mp->cmd_active->cancel = true;
        mp_plat_cond_broadcast(&mp->cond);
        mp_plat_mutex_unlock(&mp->lock);
        mp_cmd_t c;
        memset(&c, 0, sizeof(c));
        c.type = MP_CMD_CLOSE;
        /* the engine leaves by mp__engine_close_wait_ms at the latest */
        (void)run_turn(mp, &c,
                       (uint64_t)mp__engine_close_wait_ms(&mp->cfg) +
                           CALL_SLACK_MS);
        /* the engine has left its loop after answering CLOSE */
        mp_plat_thread_join(&mp->thread);
        /* every call still inside returns at once now (closing, stopped):
         * wait for the last one to leave before freeing what it uses */
        mp_plat_mutex_lock(&mp->lock);
        while (mp->inside > 0)
            mp_plat_cond_wait_until(&mp->cond, &mp->lock,
                                    mp_plat_clock_ms() + 1000);
        mp_plat_mutex_unlock(&mp->lock);
    }
    /* an op nobody waited for (over: the engine has stopped) */
    free(mp->op_live);
    mp->op_live = NULL;
    mp__engine_teardown(mp);
    state_free(mp);
}

uint32_t mp__engine_round_timeout_ms(const moshpit_t *mp) {
    return mp->cfg.round_timeout_ms;
}

size_t mp__engine_members(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    size_t n = mp->members_live;
    mp_plat_mutex_unlock(&mp->lock);
    return n;
}

moshpit_err_t mp__engine_wait_members(moshpit_t *mp, size_t n,
                                      uint32_t timeout_ms) {
    uint64_t deadline = mp_plat_clock_ms() + timeout_ms;
    moshpit_err_t e = MOSHPIT_OK;
    mp_plat_mutex_lock(&mp->lock);
    mp->inside++; /* call_enter, in this critical section */
    while (mp->members_live < n) {
        if (mp->stopped || mp->closing) {
            e = MOSHPIT_ECLOSED;
            break;
        }
        if (mp_plat_cond_wait_until(&mp->cond, &mp->lock, deadline) ==
                ETIMEDOUT &&
            mp->members_live < n) {
            e = MOSHPIT_ETIMEDOUT;
            break;
        }
    }
    if (--mp->inside == 0) /* call_leave */
        mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

int mp__engine_errno(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    int e = mp->last_errno;
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

moshpit_err_t mp__engine_endpoint(moshpit_t *mp, char *buf, size_t len) {
    call_enter(mp); /* mp->endpoint is fixed once open returned */
    size_t need = strlen(mp->endpoint) + 1;
    moshpit_err_t e = MOSHPIT_EINVAL;
    if (len >= need) {
        memcpy(buf, mp->endpoint, need);
        e = MOSHPIT_OK;
    }
    call_leave(mp);
    return e;
}
