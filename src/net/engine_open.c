/* SPDX-License-Identifier: MIT */
/*
 * engine_open.c - the life of a peer's state (engine_api.h): creating it
 * from a checked configuration (copies, secrets in secure memory, identity,
 * the bootstrap list parsed once, the engine's buffers), starting and
 * stopping the engine thread, handing it commands and waiting for them
 * with a deadline, and the few counters application threads may read.
 * Also the engine's log function over base/log.h.
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/z85.h"
#include "core/codec.h"
#include "crypto/cert.h"

#define BOOTSTRAP_MAX 64u
/* what a caller waits beyond the engine's own deadline for its answer */
#define CALL_SLACK_MS 1000u

void mp__log(moshpit_t *mp, int level, const char *fmt, ...) {
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
    free(mp->scratch);
    free(mp->encbuf);
    free(mp->msgbuf);
    free(mp->msg);
    mp_plat_mutex_destroy(&mp->lock);
    mp_plat_mutex_destroy(&mp->call_lock);
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
    mp->ciphers = mp__crypto_ciphers();
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
    if (mp_plat_mutex_init(&mp->call_lock) != 0) {
        mp_plat_mutex_destroy(&mp->lock);
        free(mp);
        return MOSHPIT_ESYS;
    }
    if (mp_plat_cond_init(&mp->cond) != 0) {
        mp_plat_mutex_destroy(&mp->call_lock);
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

static void call_leave(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    if (--mp->inside == 0)
        mp_plat_cond_broadcast(&mp->cond);
    mp_plat_mutex_unlock(&mp->lock);
}

/* Hands c to the engine and waits for it until c->deadline_ms; after that
 * asks the engine to drop the command and waits for that (the engine checks
 * at every loop turn, so this is short). */
static moshpit_err_t run_locked(moshpit_t *mp, mp_cmd_t *c) {
    mp_plat_mutex_lock(&mp->lock);
    /* a close that has begun refuses new work and cancels the running
     * command (mp__engine_close); checked with cmd_active set in the same
     * critical section, so no command slips past a close */
    bool refused = mp->stopped || (mp->closing && c->type != MP_CMD_CLOSE);
    if (!refused)
        mp->cmd_active = c;
    mp_plat_mutex_unlock(&mp->lock);
    if (refused)
        return MOSHPIT_ECLOSED;
    int err = mp__engine_post(mp, c);
    if (err != 0) {
        mp_plat_mutex_lock(&mp->lock);
        mp->last_errno = err;
        mp->cmd_active = NULL;
        mp_plat_mutex_unlock(&mp->lock);
        return MOSHPIT_ESYS;
    }
    mp_plat_mutex_lock(&mp->lock);
    while (!c->done && !mp->stopped) {
        if (mp_plat_cond_wait_until(&mp->cond, &mp->lock, c->deadline_ms) ==
                ETIMEDOUT &&
            !c->done) {
            c->cancel = true;
            /* the engine answers a cancel within one loop turn */
            while (!c->done && !mp->stopped)
                mp_plat_cond_wait_until(&mp->cond, &mp->lock,
                                        mp_plat_clock_ms() + 1000);
            break;
        }
    }
    moshpit_err_t e = c->done ? c->result : MOSHPIT_ECLOSED;
    /* cut short by a close on another thread (a round that finished
     * before the engine saw the cancel keeps its OK) */
    if (e != MOSHPIT_OK && c->cancel && mp->closing && c->type != MP_CMD_CLOSE)
        e = MOSHPIT_ECLOSED;
    mp->cmd_active = NULL;
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

static moshpit_err_t run_turn(moshpit_t *mp, mp_cmd_t *c, uint64_t wait_ms) {
    mp_plat_mutex_lock(&mp->call_lock);
    /* the deadline counts from this command's turn, not from the call */
    c->deadline_ms = mp_plat_clock_ms() + wait_ms;
    moshpit_err_t e = run_locked(mp, c);
    mp_plat_mutex_unlock(&mp->call_lock);
    return e;
}

moshpit_err_t mp__engine_run(moshpit_t *mp, mp_cmd_t *c, uint64_t wait_ms) {
    call_enter(mp);
    moshpit_err_t e = run_turn(mp, c, wait_ms);
    call_leave(mp);
    return e;
}

void mp__engine_close(moshpit_t *mp) {
    if (mp == NULL)
        return;
    if (mp->thread_started) {
        /* calls running on other threads: a waiting moshpit_wait_members
         * returns, the running command is cancelled (the engine drops it
         * within a loop turn) and the ones queued behind it are refused */
        mp_plat_mutex_lock(&mp->lock);
        mp->closing = true;
        if (mp->cmd_active != NULL)
            mp->cmd_active->cancel = true;
        mp_plat_cond_broadcast(&mp->cond);
        mp_plat_mutex_unlock(&mp->lock);
        mp_cmd_t c;
        memset(&c, 0, sizeof(c));
        c.type = MP_CMD_CLOSE;
        /* the engine leaves by mp__close_wait_ms at the latest */
        (void)run_turn(mp, &c,
                       (uint64_t)mp__close_wait_ms(&mp->cfg) + CALL_SLACK_MS);
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
