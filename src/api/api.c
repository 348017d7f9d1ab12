/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public moshpit_* functions that concern a peer: configuration
 * checks, peer setup and teardown, handing work to the engine thread and
 * waiting for it with a deadline, error strings. (Keys, authorities and
 * certificates, which need no peer, are in keys.c.)
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/agg.h"
#include "core/vec.h"
#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "net/engine.h"
#include "net/net.h"

#define CALL_SLACK_MS 1000u
#define SWARM_NAME_MAX 255u
#define BOOTSTRAP_MAX 64u
#define LOG_WARN_PER_S 20u

static _Thread_local int open_errno; /* errno of this thread's last open */

void mp__log(moshpit_t *mp, int level, const char *fmt, ...) {
    if (mp->cfg.log == NULL || level > mp->cfg.log_level)
        return;
    if (level == MOSHPIT_LOG_WARN) {
        /* warnings are mostly caused by what others send us: at most
         * LOG_WARN_PER_S a second, so a hostile peer cannot flood the log */
        uint64_t now = mp_plat_clock_ms();
        if (now - mp->log_window_ms >= 1000) {
            if (mp->log_suppressed > 0) {
                char note[96];
                snprintf(note, sizeof(note),
                         "%u warnings suppressed in the last second",
                         mp->log_suppressed);
                mp->cfg.log(mp->cfg.log_user, MOSHPIT_LOG_WARN, note);
            }
            mp->log_window_ms = now;
            mp->log_count = 0;
            mp->log_suppressed = 0;
        }
        if (mp->log_count >= LOG_WARN_PER_S) {
            mp->log_suppressed++;
            return;
        }
        mp->log_count++;
    }
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    mp->cfg.log(mp->cfg.log_user, level, buf);
}

void moshpit_config_init(moshpit_config_t *cfg) {
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen = "tcp://127.0.0.1:0";
    cfg->group_size = 8;
    cfg->min_group_size = 2;
    cfg->grid_position = -1;
    cfg->matchmaking_ms = 2000;
    cfg->round_timeout_ms = 30000;
    cfg->log_level = MOSHPIT_LOG_WARN;
    cfg->peer_timeout_ms = 5000;
    cfg->bandwidth_mbps = 1000;
    cfg->state_clients_max = 4;
    cfg->aggregation = MOSHPIT_AGG_MEAN;
    cfg->trim = 1;
    cfg->clip_iters = 5;
    cfg->peers_max = MP_PEERS_CAP;
    cfg->peer_msg_rate = MP_MSG_RATE_DEFAULT;
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
    }
    return "unknown error";
}

int moshpit_errno(moshpit_t *mp) {
    if (mp == NULL)
        return open_errno;
    mp_plat_mutex_lock(&mp->lock);
    int e = mp->last_errno;
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

moshpit_err_t mp__parse_endpoint(const char *ep, char *addr, size_t cap,
                                 uint8_t key[32]) {
    if (ep == NULL)
        return MOSHPIT_EINVAL;
    size_t len = strlen(ep);
    if (len < MOSHPIT_KEY_TEXT_LEN + 2 || len >= 300 ||
        ep[len - MOSHPIT_KEY_TEXT_LEN - 1] != '#')
        return MOSHPIT_EINVAL;
    size_t alen = len - MOSHPIT_KEY_TEXT_LEN - 1;
    if (alen + 1 > cap || alen + 1 > MP_ADDR_MAX)
        return MOSHPIT_EINVAL;
    memcpy(addr, ep, alen);
    addr[alen] = '\0';
    if (!mp__net_addr_ok(addr))
        return MOSHPIT_EINVAL;
    return moshpit_key_from_text(ep + alen + 1, key);
}

/* ------------------------------------------------------------------ */

static moshpit_err_t check_config(const moshpit_config_t *c) {
    if (c->swarm == NULL || c->swarm[0] == '\0' ||
        strlen(c->swarm) > SWARM_NAME_MAX)
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

static void free_peer_struct(moshpit_t *mp) {
    if (mp->bootstrap != NULL) {
        for (size_t i = 0; i < mp->bootstrap_n; i++)
            free(mp->bootstrap[i]);
        free(mp->bootstrap);
    }
    free(mp->swarm);
    free(mp->auth);
    mp__crypto_secure_free(mp->sec);
    mp__crypto_secure_free(mp->swarm_secret);
    free(mp->scratch);
    free(mp->msgbuf);
    free(mp->msg);
    free(mp->mm_out);
    mp_plat_mutex_destroy(&mp->lock);
    mp_plat_mutex_destroy(&mp->call_lock);
    mp_plat_cond_destroy(&mp->cond);
    free(mp);
}

moshpit_err_t moshpit_open(const moshpit_config_t *cfg, moshpit_t **out) {
    moshpit_err_t e;
    if (out == NULL)
        return MOSHPIT_EINVAL;
    *out = NULL;
    if (cfg == NULL)
        return MOSHPIT_EINVAL;
    e = check_config(cfg);
    if (e != MOSHPIT_OK)
        return e;
    if (mp__crypto_init() != MOSHPIT_OK)
        return MOSHPIT_ECRYPTO;

    moshpit_t *mp = calloc(1, sizeof(*mp));
    if (mp == NULL)
        return MOSHPIT_ENOMEM;
    if (mp_plat_mutex_init(&mp->lock) != 0 ||
        mp_plat_mutex_init(&mp->call_lock) != 0 ||
        mp_plat_cond_init(&mp->cond) != 0) {
        free(mp);
        return MOSHPIT_ESYS;
    }
    mp->cfg = *cfg;
    mp->cfg.swarm = NULL;
    mp->cfg.bootstrap = NULL;
    mp->cfg.authorized_keys = NULL;
    if (mp->cfg.listen == NULL)
        mp->cfg.listen = "tcp://127.0.0.1:0";
    if (mp->cfg.bandwidth_mbps == 0)
        mp->cfg.bandwidth_mbps = 1000;
    if (mp->cfg.state_clients_max == 0)
        mp->cfg.state_clients_max = 4;
    if (mp->cfg.peers_max == 0)
        mp->cfg.peers_max = MP_PEERS_CAP;
    if (mp->cfg.peer_msg_rate == 0)
        mp->cfg.peer_msg_rate = MP_MSG_RATE_DEFAULT;
    mp->peers_max = mp->cfg.peers_max;
    mp->msg_rate = mp->cfg.peer_msg_rate;
    mp->ciphers = mp__crypto_ciphers();
    mp->rng = mp__crypto_random_u64();
    mp->join_seq = mp__crypto_random_u64() >> 16;
    e = mp__grid_init(&mp->grid, cfg->group_size, cfg->grid_dims,
                      cfg->grid_position, mp__crypto_random_u64());
    if (e != MOSHPIT_OK)
        goto fail;
    e = MOSHPIT_ENOMEM;
    mp->swarm = strdup(cfg->swarm);
    mp->sec = mp__crypto_secure_alloc(32);
    mp->scratch = malloc((size_t)MP_DATA_MAX_COUNT * sizeof(float));
    mp->msgbuf = malloc(MP_CTRL_MAX);
    mp->msg = malloc(sizeof(*mp->msg));
    mp->mm_out = malloc(sizeof(*mp->mm_out));
    if (!mp->swarm || !mp->sec || !mp->scratch || !mp->msgbuf || !mp->msg ||
        !mp->mm_out)
        goto fail;
    if (!mp__crypto_is_zero(cfg->swarm_secret, 32)) {
        mp->swarm_secret = mp__crypto_secure_alloc(32);
        if (mp->swarm_secret == NULL)
            goto fail;
        memcpy(mp->swarm_secret, cfg->swarm_secret, 32);
    }
    mp__crypto_wipe(mp->cfg.swarm_secret, 32);
    mp__crypto_wipe(mp->cfg.secret_key, 32);
    mp__crypto_swarm_hash(mp->swarm, mp->swarm_hash);

    /* identity */
    e = MOSHPIT_ECRYPTO;
    if (mp__crypto_is_zero(cfg->secret_key, 32)) {
        if (!mp__crypto_is_zero(cfg->public_key, 32)) {
            e = MOSHPIT_EINVAL; /* a public key without its secret */
            goto fail;
        }
        if (mp__crypto_keypair(mp->pub, mp->sec) != MOSHPIT_OK)
            goto fail;
    } else {
        memcpy(mp->sec, cfg->secret_key, 32);
        if (mp__crypto_public_from_secret(mp->sec, mp->pub) != MOSHPIT_OK)
            goto fail;
        if (!mp__crypto_is_zero(cfg->public_key, 32) &&
            memcmp(cfg->public_key, mp->pub, 32) != 0) {
            e = MOSHPIT_EINVAL; /* keys do not belong together */
            goto fail;
        }
    }
    mp__net_z85_encode(mp->pub_txt, mp->pub);
    e = check_own_cert(mp);
    if (e != MOSHPIT_OK)
        goto fail;

    /* authorized keys and bootstrap list */
    e = MOSHPIT_ENOMEM;
    if (cfg->authorized_keys != NULL && cfg->authorized_count > 0) {
        mp->auth = malloc(cfg->authorized_count * 32);
        if (mp->auth == NULL)
            goto fail;
        memcpy(mp->auth, cfg->authorized_keys, cfg->authorized_count * 32);
        mp->auth_n = cfg->authorized_count;
    }
    if (cfg->bootstrap != NULL) {
        size_t n = 0;
        while (cfg->bootstrap[n] != NULL) {
            if (++n > BOOTSTRAP_MAX) {
                e = MOSHPIT_EINVAL;
                goto fail;
            }
        }
        mp->bootstrap = calloc(n ? n : 1, sizeof(char *));
        if (mp->bootstrap == NULL)
            goto fail;
        for (size_t i = 0; i < n; i++) {
            char addr[MP_ADDR_MAX];
            uint8_t key[32];
            if (mp__parse_endpoint(cfg->bootstrap[i], addr, sizeof(addr),
                                   key) != MOSHPIT_OK) {
                e = MOSHPIT_EINVAL;
                goto fail;
            }
            mp->bootstrap[i] = strdup(cfg->bootstrap[i]);
            if (mp->bootstrap[i] == NULL)
                goto fail;
            mp->bootstrap_n = i + 1;
        }
    }

    e = mp__engine_setup(mp);
    if (e != MOSHPIT_OK) {
        open_errno = errno;
        mp__engine_teardown(mp);
        goto fail;
    }
    mp->members_live = 1;
    int rc = mp_plat_thread_start(&mp->thread, mp__engine_main, mp);
    if (rc != 0) {
        open_errno = rc;
        e = MOSHPIT_ESYS;
        mp__engine_teardown(mp);
        goto fail;
    }
    mp->thread_started = true;
    *out = mp;
    return MOSHPIT_OK;
fail:
    free_peer_struct(mp);
    return e;
}

/* Hands c to the engine and waits for it until c->deadline_ms; after that
 * asks the engine to drop the command and waits for that (the engine checks
 * at every loop turn, so this is short). */
static moshpit_err_t run_cmd(moshpit_t *mp, mp_cmd_t *c) {
    mp_plat_mutex_lock(&mp->lock);
    bool stopped = mp->stopped;
    mp_plat_mutex_unlock(&mp->lock);
    if (stopped)
        return MOSHPIT_ECLOSED;
    int err = mp__engine_post(mp, c);
    if (err != 0) {
        mp_plat_mutex_lock(&mp->lock);
        mp->last_errno = err;
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
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

moshpit_err_t moshpit_average(moshpit_t *mp, float *values, size_t count,
                              double weight, moshpit_round_t *info) {
    if (mp == NULL || (values == NULL && count > 0) || !isfinite(weight) ||
        weight < 0.0 || weight > MOSHPIT_WEIGHT_MAX)
        return MOSHPIT_EINVAL;
#if SIZE_MAX > (1ull << 34) /* where size_t can hold more */
    if (count > ((size_t)1 << 34))
        return MOSHPIT_EINVAL; /* 64 GiB of floats: certainly a mistake */
#endif
    if (!mp__vec_all_finite(values, count))
        return MOSHPIT_EINVAL;
    mp_plat_mutex_lock(&mp->call_lock);
    mp_cmd_t c;
    memset(&c, 0, sizeof(c));
    c.type = MP_CMD_AVERAGE;
    c.values = values;
    c.count = count;
    c.weight = weight;
    c.deadline_ms =
        mp_plat_clock_ms() + mp->cfg.round_timeout_ms + CALL_SLACK_MS;
    moshpit_err_t e = run_cmd(mp, &c);
    mp_plat_mutex_unlock(&mp->call_lock);
    if (info != NULL) {
        if (e == MOSHPIT_OK) {
            *info = c.info;
        } else {
            memset(info, 0, sizeof(*info));
            info->group_size = 1;
        }
    }
    return e;
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
    mp_plat_mutex_lock(&mp->call_lock);
    mp_cmd_t c;
    memset(&c, 0, sizeof(c));
    c.type = MP_CMD_FETCH;
    c.values = values;
    c.count = count;
    c.deadline_ms = mp_plat_clock_ms() + timeout_ms;
    moshpit_err_t e = run_cmd(mp, &c);
    mp_plat_mutex_unlock(&mp->call_lock);
    if (e == MOSHPIT_OK && round_out != NULL)
        *round_out = c.state_round;
    return e;
}

moshpit_err_t moshpit_endpoint(moshpit_t *mp, char *buf, size_t len) {
    if (mp == NULL || buf == NULL)
        return MOSHPIT_EINVAL;
    size_t need = strlen(mp->endpoint) + 1;
    if (len < need)
        return MOSHPIT_EINVAL;
    memcpy(buf, mp->endpoint, need);
    return MOSHPIT_OK;
}

size_t moshpit_members(moshpit_t *mp) {
    if (mp == NULL)
        return 0;
    mp_plat_mutex_lock(&mp->lock);
    size_t n = mp->members_live;
    mp_plat_mutex_unlock(&mp->lock);
    return n;
}

moshpit_err_t moshpit_wait_members(moshpit_t *mp, size_t n,
                                   uint32_t timeout_ms) {
    if (mp == NULL)
        return MOSHPIT_EINVAL;
    uint64_t deadline = mp_plat_clock_ms() + timeout_ms;
    moshpit_err_t e = MOSHPIT_OK;
    mp_plat_mutex_lock(&mp->lock);
    while (mp->members_live < n) {
        if (mp->stopped) {
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
    mp_plat_mutex_unlock(&mp->lock);
    return e;
}

void moshpit_close(moshpit_t *mp) {
    if (mp == NULL)
        return;
    if (mp->thread_started) {
        mp_plat_mutex_lock(&mp->call_lock);
        mp_cmd_t c;
        memset(&c, 0, sizeof(c));
        c.type = MP_CMD_CLOSE;
        /* the engine leaves by mp__close_wait_ms at the latest */
        c.deadline_ms =
            mp_plat_clock_ms() + mp__close_wait_ms(&mp->cfg) + CALL_SLACK_MS;
        (void)run_cmd(mp, &c);
        mp_plat_mutex_unlock(&mp->call_lock);
        /* the engine has left its loop after answering CLOSE */
        mp_plat_thread_join(&mp->thread);
    }
    mp__engine_teardown(mp);
    free_peer_struct(mp);
}
