/* SPDX-License-Identifier: MIT */
/*
 * test_int_cert.c - certificate admission with real processes. Three peers
 * with certificates from one authority average exactly. Then peers with no
 * certificate, an expired one, one not yet valid, one from a foreign
 * authority, one issued for another key (a copy of an admitted peer's),
 * one for another swarm and one with a forged signature each dial the
 * swarm: each must be refused by the admitted peers with the reason in
 * their log, be told so (its log shows the REFUSE), and stay alone.
 * Then, while refused peers hammer the swarm - processes opening and
 * closing peers in a loop (one identity; a new identity each time) and a
 * raw CURVE client sending HELLOs with forged certificates as fast as it
 * can, reconnecting - the admitted peers run rounds that must all be exact,
 * in a group of three, within round_timeout_ms. Last, a peer whose
 * certificate expires while it is live is dropped by the others.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "harness.h"
#include "platform.h"
#include "wire/wire.h"

#define COUNT 100003
#define SWARM "it-cert"
#define ROUND_TIMEOUT_MS 20000u
#define HAMMER_MS 8000u

static uint8_t apub[32], asec[64]; /* the swarm's authority */
static uint8_t fpub[32], fsec[64]; /* a foreign authority */
static uint8_t swarm_hash[32];

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A peer config with a fresh identity and no certificate. */
static void base_cfg(it_peer_cfg_t *c, uint8_t pub[32]) {
    uint8_t p[32];
    memset(c, 0, sizeof(*c));
    c->swarm = SWARM;
    c->group_size = 3;
    c->matchmaking_ms = 4000;
    c->round_timeout_ms = ROUND_TIMEOUT_MS;
    IT_CHECK(moshpit_keypair(pub ? pub : p, c->secret_key) == MOSHPIT_OK,
             "keypair");
}

/* Signs a certificate for key with the given authority secret, window
 * relative to now (seconds). */
static void sign_rel(const uint8_t *sec, const uint8_t key[32],
                     const uint8_t hash[32], int64_t from, int64_t to,
                     uint8_t cert[MOSHPIT_CERT_BYTES]) {
    int64_t now = (int64_t)mp_plat_wallclock_s();
    IT_CHECK(mp__cert_sign(sec, key, hash, (uint64_t)(now + from),
                           (uint64_t)(now + to), cert) == MOSHPIT_OK,
             "sign");
}

/* An admitted peer: its own identity and a valid certificate. */
static void admitted_cfg(it_peer_cfg_t *c, uint8_t pub[32]) {
    base_cfg(c, pub);
    memcpy(c->authority_key, apub, 32);
    sign_rel(asec, pub, swarm_hash, -60, 86400, c->cert);
}

static int all_exact(it_peer_t *p, size_t n, uint64_t seed0, uint64_t *max_ms,
                     const char *what) {
    uint64_t seeds[8];
    double w[8];
    float *v = malloc(COUNT * sizeof(float));
    int ok = v != NULL;
    for (size_t i = 0; i < n; i++) {
        seeds[i] = seed0 + i;
        w[i] = it_weight(seeds[i]);
        IT_CHECK(it_average_async(&p[i], COUNT, seeds[i], w[i]) == 0, "send");
    }
    for (size_t i = 0; i < n && v != NULL; i++) {
        it_result_t r;
        int got = it_collect(&p[i], &r, v, COUNT, 40000) == 0;
        IT_CHECK(got, "%s: collect %zu", what, i);
        if (!got) {
            ok = 0;
            continue;
        }
        IT_CHECK(r.err == MOSHPIT_OK && r.info.group_size == n,
                 "%s: peer %zu err %d group %u", what, i, r.err,
                 r.info.group_size);
        double d = it_dev_from_mean(v, COUNT, seeds, w, n);
        IT_CHECK(d <= 1e-5, "%s: peer %zu deviates %g", what, i, d);
        IT_CHECK(r.call_ms <= ROUND_TIMEOUT_MS + 1000,
                 "%s: peer %zu call took %llu ms", what, i,
                 (unsigned long long)r.call_ms);
        if (max_ms != NULL && r.call_ms > *max_ms)
            *max_ms = r.call_ms;
        ok &= r.err == MOSHPIT_OK && r.info.group_size == n && d <= 1e-5;
    }
    free(v);
    return ok;
}

/* ---------------------------------------------------------------------- */
/* refused one by one                                                     */

/* Starts the intruder, checks it is refused for `reason` by the admitted
 * peer it dials, told so, and alone; the admitted peers still see 3. */
static void expect_refused(it_peer_t *adm, it_peer_cfg_t *c,
                           const char *reason) {
    it_peer_t x;
    char want[160];
    snprintf(c->bootstrap, sizeof(c->bootstrap), "%s", adm[0].endpoint);
    c->expect_members = 1;
    if (it_start(&x, c) != 0) {
        IT_CHECK(0, "%s: intruder did not start", reason);
        return;
    }
    snprintf(want, sizeof(want), "failed certificate admission (%s), refused",
             reason);
    long n = it_wait_log(&adm[0], want, 10000);
    IT_CHECK(n >= 1, "%s: not logged by the admitted peer (%ld)", reason, n);
    n = it_wait_log(&x, "refused us", 10000);
    IT_CHECK(n >= 1, "%s: the intruder was not told (%ld)", reason, n);
    IT_CHECK(it_members(&x, 5000) == 1, "%s: intruder has members", reason);
    for (int i = 0; i < 3; i++)
        IT_CHECK(it_members(&adm[i], 5000) == 3,
                 "%s: admitted %d counts another member", reason, i);
    printf("refused and logged: %s\n", reason);
    it_stop(&x);
}

/* ---------------------------------------------------------------------- */
/* hammers                                                                */

typedef struct hammer {
    pid_t pid;
    int fd; /* reads the child's count at the end */
} hammer_t;

static void hammer_report(int fd, uint64_t n) {
    (void)!write(fd, &n, sizeof(n));
    close(fd);
}

/* A child that opens a peer dialling every target, waits a little, closes
 * it, and again, for HAMMER_MS. sec == NULL: a new identity every time. */
static void hammer_open_loop(char (*targets)[200], size_t n, const uint8_t *sec,
                             const uint8_t *cert, int fd) {
    const char *boot[8];
    for (size_t i = 0; i < n; i++)
        boot[i] = targets[i];
    boot[n] = NULL;
    uint64_t until = it_now_ms() + HAMMER_MS, opened = 0;
    while (it_now_ms() < until) {
        moshpit_config_t cfg;
        moshpit_config_init(&cfg);
        cfg.swarm = SWARM;
        cfg.bootstrap = boot;
        if (sec != NULL)
            memcpy(cfg.secret_key, sec, 32);
        if (cert != NULL)
            memcpy(cfg.cert, cert, MOSHPIT_CERT_BYTES);
        moshpit_t *mp = NULL;
        if (moshpit_open(&cfg, &mp) == MOSHPIT_OK) {
            opened++;
            sleep_ms(20 + (unsigned)(opened % 5) * 30);
            moshpit_close(mp);
        } else {
            sleep_ms(50);
        }
    }
    hammer_report(fd, opened);
}

/* A child that sends HELLOs carrying cert (forged) straight over CURVE to
 * every target, 200 per connection, reconnecting, for HAMMER_MS. */
static void hammer_raw(char (*targets)[200], size_t n, const uint8_t pub[32],
                       const uint8_t sec[32], const uint8_t *cert, int fd) {
    static uint8_t buf[MP_CTRL_MAX];
    mp_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = MP_MSG_HELLO;
    memcpy(m.u.hello.swarm, swarm_hash, 32);
    m.u.hello.tag = 0x1234;
    m.u.hello.bandwidth = 1000;
    m.u.hello.ciphers = 3;
    m.u.hello.has_cert = 1;
    memcpy(m.u.hello.cert, cert, MOSHPIT_CERT_BYTES);
    snprintf(m.u.hello.ctrl_addr, MP_ADDR_MAX, "tcp://127.0.0.1:9");
    snprintf(m.u.hello.data_addr, MP_ADDR_MAX, "tcp://127.0.0.1:9");
    void *ctx = zmq_ctx_new();
    uint64_t until = it_now_ms() + HAMMER_MS, sent = 0;
    while (ctx != NULL && it_now_ms() < until) {
        for (size_t t = 0; t < n; t++) {
            size_t len = strlen(targets[t]);
            uint8_t server[32];
            char addr[200];
            if (len < 42 || moshpit_key_from_text(targets[t] + len - 40,
                                                  server) != MOSHPIT_OK)
                continue;
            snprintf(addr, sizeof(addr), "%.*s", (int)(len - 41), targets[t]);
            void *s = zmq_socket(ctx, ZMQ_DEALER);
            int linger = 100, hwm = 10000;
            zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
            zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
            zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server, 32);
            zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 32);
            zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 32);
            zmq_connect(s, addr);
            for (int k = 0; k < 200; k++) {
                uint8_t esec[32];
                size_t blen = 0;
                (void)mp__crypto_keypair(m.u.hello.eph, esec);
                if (mp__wire_msg_encode(&m, buf, sizeof(buf), &blen) ==
                        MOSHPIT_OK &&
                    zmq_send(s, buf, blen, ZMQ_DONTWAIT) >= 0)
                    sent++;
            }
            zmq_close(s);
        }
    }
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    hammer_report(fd, sent);
}

/* Forks a hammer; kind 0: open loop, 1: raw HELLOs. */
static hammer_t hammer_start(int kind, char (*targets)[200], size_t n,
                             const uint8_t *pub, const uint8_t *sec,
                             const uint8_t *cert) {
    hammer_t h = {-1, -1};
    int pfd[2];
    if (pipe(pfd) != 0)
        return h;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        if (kind == 0)
            hammer_open_loop(targets, n, sec, cert, pfd[1]);
        else
            hammer_raw(targets, n, pub, sec, cert, pfd[1]);
        _exit(0);
    }
    close(pfd[1]);
    h.pid = pid;
    h.fd = pfd[0];
    return h;
}

/* Waits for a hammer; returns its count, or 0 if it failed. */
static uint64_t hammer_wait(hammer_t *h) {
    uint64_t n = 0;
    int status = 0;
    if (h->pid <= 0)
        return 0;
    if (read(h->fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
        n = 0;
    close(h->fd);
    waitpid(h->pid, &status, 0);
    IT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "hammer %d ended badly (status %d)", (int)h->pid, status);
    return n;
}

/* ---------------------------------------------------------------------- */

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    if (mp__crypto_init() != MOSHPIT_OK)
        return 1;
    IT_CHECK(moshpit_authority_keypair(apub, asec) == MOSHPIT_OK, "authority");
    IT_CHECK(moshpit_authority_keypair(fpub, fsec) == MOSHPIT_OK, "foreign");
    mp__crypto_swarm_hash(SWARM, swarm_hash);

    /* three admitted peers, each with its own identity and certificate */
    it_peer_t adm[3];
    it_peer_cfg_t ac[3];
    uint8_t akeys[3][32];
    for (int i = 0; i < 3; i++) {
        admitted_cfg(&ac[i], akeys[i]);
        ac[i].expect_members = 3;
        if (i > 0)
            snprintf(ac[i].bootstrap, sizeof(ac[i].bootstrap), "%s",
                     adm[0].endpoint);
        if (it_start_nowait(&adm[i], &ac[i]) != 0) {
            IT_CHECK(0, "admitted peer %d did not start", i);
            return 1;
        }
    }
    for (int i = 0; i < 3; i++)
        IT_CHECK(it_wait_ready(&adm[i], 25000) == 3, "admitted %d not ready",
                 i);
    uint64_t base_ms = 0;
    IT_CHECK(all_exact(adm, 3, 10, &base_ms, "certified"),
             "certified peers not exact");
    printf("certified peers average exactly (%llu ms)\n",
           (unsigned long long)base_ms);

    /* refused, one reason at a time */
    it_peer_cfg_t c;
    uint8_t k[32], other_hash[32];
    mp__crypto_swarm_hash(SWARM "-other", other_hash);

    base_cfg(&c, k);
    expect_refused(adm, &c, "missing");

    base_cfg(&c, k);
    sign_rel(asec, k, swarm_hash, -7200, -3600, c.cert);
    expect_refused(adm, &c, "expired");

    base_cfg(&c, k);
    sign_rel(asec, k, swarm_hash, 3600, 7200, c.cert);
    expect_refused(adm, &c, "not yet valid");

    /* from a foreign authority, which it trusts itself: opens fine */
    base_cfg(&c, k);
    sign_rel(fsec, k, swarm_hash, -60, 3600, c.cert);
    memcpy(c.authority_key, fpub, 32);
    expect_refused(adm, &c, "foreign authority");

    /* a copy of an admitted peer's certificate, presented by another key */
    base_cfg(&c, k);
    memcpy(c.cert, ac[1].cert, MOSHPIT_CERT_BYTES);
    expect_refused(adm, &c, "other key");

    base_cfg(&c, k);
    sign_rel(asec, k, other_hash, -60, 3600, c.cert);
    expect_refused(adm, &c, "other swarm");

    base_cfg(&c, k);
    sign_rel(asec, k, swarm_hash, -60, 3600, c.cert);
    c.cert[100] ^= 0x01;
    expect_refused(adm, &c, "forged signature");

    /* hammering while the admitted peers average */
    char targets[3][200];
    for (int i = 0; i < 3; i++)
        snprintf(targets[i], sizeof(targets[i]), "%s", adm[i].endpoint);
    uint8_t hpub[32], hsec[32], hcert[MOSHPIT_CERT_BYTES];
    uint8_t rpub[32], rsec[32], rcert[MOSHPIT_CERT_BYTES];
    IT_CHECK(moshpit_keypair(hpub, hsec) == MOSHPIT_OK, "keypair");
    sign_rel(asec, hpub, swarm_hash, -7200, -3600, hcert); /* expired */
    IT_CHECK(moshpit_keypair(rpub, rsec) == MOSHPIT_OK, "keypair");
    sign_rel(asec, rpub, swarm_hash, -60, 3600, rcert);
    rcert[130] ^= 0x40; /* forged: costs the receiver a signature check */
    hammer_t h[3];
    h[0] = hammer_start(0, targets, 3, NULL, hsec, hcert);
    h[1] = hammer_start(0, targets, 3, NULL, NULL, NULL);
    h[2] = hammer_start(1, targets, 3, rpub, rsec, rcert);
    sleep_ms(500);
    uint64_t t0 = it_now_ms(), worst_ms = 0;
    int rounds = 0, exact = 0;
    while (it_now_ms() - t0 < HAMMER_MS - 1500) {
        exact += all_exact(adm, 3, 100 + (uint64_t)rounds * 3, &worst_ms,
                           "under hammering");
        rounds++;
    }
    uint64_t opens = hammer_wait(&h[0]), fresh = hammer_wait(&h[1]);
    uint64_t hellos = hammer_wait(&h[2]);
    IT_CHECK(rounds >= 3 && exact == rounds,
             "under hammering: %d of %d rounds exact", exact, rounds);
    IT_CHECK(opens > 5 && fresh > 5 && hellos > 1000,
             "the hammers did not hammer: %llu opens, %llu fresh opens, %llu "
             "HELLOs",
             (unsigned long long)opens, (unsigned long long)fresh,
             (unsigned long long)hellos);
    printf("under hammering (%llu reopens with an expired certificate, %llu "
           "with new identities, %llu raw forged HELLOs): %d of %d rounds "
           "exact, slowest call %llu ms (before: %llu ms)\n",
           (unsigned long long)opens, (unsigned long long)fresh,
           (unsigned long long)hellos, exact, rounds,
           (unsigned long long)worst_ms, (unsigned long long)base_ms);
    for (int i = 0; i < 3; i++)
        IT_CHECK(it_members(&adm[i], 5000) == 3,
                 "after hammering: admitted %d counts %ld members", i,
                 it_members(&adm[i], 5000));
    /* the other two admitted peers were dialled by nobody but the hammers:
     * their logs show that every hammer got through (warnings are limited
     * to 20 a second, so one of the two suffices) */
    static const char *const reasons[] = {"(expired)", "(missing)",
                                          "(forged signature)"};
    for (int r = 0; r < 3; r++)
        IT_CHECK(it_log_count(&adm[1], reasons[r], 5000) >= 1 ||
                     it_log_count(&adm[2], reasons[r], 5000) >= 1,
                 "no admitted peer refused a hammer %s", reasons[r]);
    IT_CHECK(all_exact(adm, 3, 500, NULL, "after hammering"),
             "after hammering: not exact");

    /* a live peer whose certificate expires is dropped: valid now only
     * thanks to the skew, for about 10 more seconds */
    uint8_t ek[32];
    it_peer_t e;
    admitted_cfg(&c, ek);
    sign_rel(asec, ek, swarm_hash, -7200, -(int64_t)MOSHPIT_CERT_SKEW_S + 10,
             c.cert);
    snprintf(c.bootstrap, sizeof(c.bootstrap), "%s", adm[0].endpoint);
    c.expect_members = 4;
    if (it_start(&e, &c) == 0) {
        for (int i = 0; i < 3; i++)
            IT_CHECK(it_wait_members(&adm[i], 4, 5000) == 4,
                     "expiring peer not admitted by %d", i);
        uint64_t took = 0;
        long m = it_wait_members_max(&adm[0], 3, 20000, &took);
        IT_CHECK(m == 3, "expired live peer still a member (%ld)", m);
        IT_CHECK(it_wait_log(&adm[0], "expired, session ended", 5000) >= 1,
                 "expiry of a live peer not logged");
        printf("live peer with an expiring certificate dropped after %llu "
               "ms\n",
               (unsigned long long)took);
        it_stop(&e);
    } else {
        IT_CHECK(0, "expiring peer did not start");
    }

    for (int i = 0; i < 3; i++)
        it_stop(&adm[i]);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
