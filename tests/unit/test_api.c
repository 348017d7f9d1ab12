/* SPDX-License-Identifier: MIT */
/*
 * test_api.c - unit tests of the public API (include/moshpit.h, src/api):
 * error strings (also for unknown codes), version and constants, key
 * generation and the Z85 key text (round trip, wrong lengths, characters
 * outside the alphabet, 5-character groups that overflow 32 bits), config
 * defaults, every configuration moshpit_open must refuse with EINVAL (run
 * under ASan/LSan in CI, so refused opens must not leak), endpoints, argument
 * checks of moshpit_average that must leave the buffer untouched,
 * certificate configurations (moshpit_open refuses every certificate the
 * other peers would refuse when authority_key is set, and a malformed one
 * always), a lone
 * peer's round (OK, group of 1, values bit-identical, bounded time), and two
 * peers in one process that find each other and average exactly. Every failed
 * check prints file:line; the exit status is 1 if any check failed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "moshpit.h"
#include "platform.h"

#include "test_pair.h"
#include "test_util.h"

static const char Z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
                          "KLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/* A config that moshpit_open accepts, with short timeouts. */
static void base_config(moshpit_config_t *cfg) {
    moshpit_config_init(cfg);
    cfg->swarm = "test-api";
    cfg->listen = "tcp://127.0.0.1:0";
    cfg->matchmaking_ms = 200;
    cfg->round_timeout_ms = 2000;
}

/* ---------------------------------------------------------------------- */
/* strings, version, constants                                            */
/* ---------------------------------------------------------------------- */

static void test_strerror(void) {
    static const moshpit_err_t all[] = {
        MOSHPIT_OK,      MOSHPIT_EINVAL,   MOSHPIT_ENOMEM,  MOSHPIT_ETIMEDOUT,
        MOSHPIT_ECLOSED, MOSHPIT_EPROTO,   MOSHPIT_ECRYPTO, MOSHPIT_EPEERAUTH,
        MOSHPIT_ESYS,    MOSHPIT_ENOSTATE, MOSHPIT_ECOUNT,  MOSHPIT_EBUSY};
    const size_t n = sizeof(all) / sizeof(all[0]);
    const char *unknown = moshpit_strerror((moshpit_err_t)999);
    CHECK(unknown != NULL && unknown[0] != '\0',
          "strerror(999) is NULL or empty");
    if (unknown == NULL)
        unknown = "";
    CHECK(strstr(unknown, "unknown") != NULL, "strerror(999) = \"%s\"",
          unknown);
    const char *neg = moshpit_strerror((moshpit_err_t)-1);
    CHECK(neg != NULL && strstr(neg, "unknown") != NULL,
          "strerror(-1) = \"%s\"", neg ? neg : "(null)");
    const char *past = moshpit_strerror((moshpit_err_t)(MOSHPIT_EBUSY + 1));
    CHECK(past != NULL && strstr(past, "unknown") != NULL,
          "strerror(EBUSY+1) = \"%s\"", past ? past : "(null)");
    for (size_t i = 0; i < n; i++) {
        const char *s = moshpit_strerror(all[i]);
        CHECK(s != NULL && s[0] != '\0', "strerror(%d) NULL or empty",
              (int)all[i]);
        if (s == NULL)
            continue;
        CHECK(strcmp(s, unknown) != 0, "strerror(%d) is the unknown string",
              (int)all[i]);
        for (size_t j = 0; j < i; j++) {
            const char *t = moshpit_strerror(all[j]);
            CHECK(t == NULL || strcmp(s, t) != 0,
                  "strerror(%d) == strerror(%d) = \"%s\"", (int)all[i],
                  (int)all[j], s);
        }
    }
}

static void test_version_constants(void) {
    const char *v = moshpit_version();
    CHECK(v != NULL && strcmp(v, MOSHPIT_VERSION_STRING) == 0,
          "moshpit_version() = \"%s\"", v ? v : "(null)");
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", MOSHPIT_VERSION_MAJOR,
             MOSHPIT_VERSION_MINOR, MOSHPIT_VERSION_PATCH);
    CHECK(strcmp(MOSHPIT_VERSION_STRING, want) == 0,
          "VERSION_STRING \"%s\" vs numbers \"%s\"", MOSHPIT_VERSION_STRING,
          want);
    CHECK(moshpit_key_bytes() == 32, "moshpit_key_bytes() = %zu",
          moshpit_key_bytes());
    CHECK(MOSHPIT_KEY_BYTES == 32 && MOSHPIT_KEY_TEXT_LEN == 40,
          "key constants %d %d", MOSHPIT_KEY_BYTES, MOSHPIT_KEY_TEXT_LEN);
}

/* ---------------------------------------------------------------------- */
/* keys                                                                   */
/* ---------------------------------------------------------------------- */

static void test_keypair(void) {
    enum { N = 16 };
    uint8_t pub[N][32], sec[N][32];
    static const uint8_t zero[32];
    for (int i = 0; i < N; i++) {
        moshpit_err_t e = moshpit_keypair(pub[i], sec[i]);
        CHECK(e == MOSHPIT_OK, "keypair %d: %s", i, moshpit_strerror(e));
        CHECK(memcmp(pub[i], zero, 32) != 0, "keypair %d: zero public", i);
        CHECK(memcmp(sec[i], zero, 32) != 0, "keypair %d: zero secret", i);
        CHECK(memcmp(pub[i], sec[i], 32) != 0, "keypair %d: pub == sec", i);
        for (int j = 0; j < i; j++) {
            CHECK(memcmp(pub[i], pub[j], 32) != 0, "public %d == %d", i, j);
            CHECK(memcmp(sec[i], sec[j], 32) != 0, "secret %d == %d", i, j);
        }
    }
    uint8_t k[32];
    CHECK(moshpit_keypair(NULL, k) == MOSHPIT_EINVAL, "keypair(NULL, sec)");
    CHECK(moshpit_keypair(k, NULL) == MOSHPIT_EINVAL, "keypair(pub, NULL)");
    CHECK(moshpit_keypair(NULL, NULL) == MOSHPIT_EINVAL, "keypair(NULL, NULL)");
}

static int all_z85(const char *s) {
    for (; *s; s++)
        if (strchr(Z85, *s) == NULL)
            return 0;
    return 1;
}

static void test_key_text_roundtrip(void) {
    uint64_t seed = 0x6b6579746578742aULL;
    int bad = 0;
    for (int i = 0; i < 1000 + 2; i++) {
        uint8_t key[32], back[32];
        char txt[41 + 8];
        if (i == 1000)
            memset(key, 0x00, 32);
        else if (i == 1001)
            memset(key, 0xff, 32);
        else
            test_random_bytes(&seed, key, 32);
        memset(txt, 'X', sizeof(txt));
        memset(back, 0xa5, sizeof(back));
        moshpit_err_t e1 = moshpit_key_to_text(key, txt);
        int ok = e1 == MOSHPIT_OK && txt[40] == '\0' && strlen(txt) == 40 &&
                 all_z85(txt) && txt[41] == 'X';
        moshpit_err_t e2 = ok ? moshpit_key_from_text(txt, back) : e1;
        ok = ok && e2 == MOSHPIT_OK && memcmp(key, back, 32) == 0;
        if (!ok && bad++ < 5)
            CHECK(ok, "round trip of key %d failed (%s/%s)", i,
                  moshpit_strerror(e1), moshpit_strerror(e2));
    }
    CHECK(bad == 0, "%d of 1002 keys failed the text round trip", bad);

    /* 0xffffffff is "%nSc0" in Z85, the largest 5-character group */
    uint8_t k[32];
    CHECK(moshpit_key_from_text("%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0",
                                k) == MOSHPIT_OK,
          "max value groups rejected");
    static const uint8_t ff[32] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK(memcmp(k, ff, 32) == 0, "\"%%nSc0\"x8 is not all 0xff");
    CHECK(moshpit_key_from_text("0000000000000000000000000000000000000000",
                                k) == MOSHPIT_OK,
          "all-zero text rejected");
}

static void test_key_text_reject(void) {
    uint8_t key[32], out[32];
    char good[41];
    uint64_t seed = 77;
    test_random_bytes(&seed, key, 32);
    CHECK(moshpit_key_to_text(key, good) == MOSHPIT_OK, "to_text");

    /* wrong lengths */
    static const size_t lens[] = {0, 1, 5, 35, 39, 41, 45, 80};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char buf[100];
        for (size_t j = 0; j < lens[i]; j++)
            buf[j] = good[j % 40];
        buf[lens[i]] = '\0';
        CHECK(moshpit_key_from_text(buf, out) == MOSHPIT_EINVAL,
              "length %zu accepted", lens[i]);
    }

    /* one character outside the alphabet, at every position */
    static const char badc[] = {' ', '"', '\'', ',',  ';',    '\\',   '_',
                                '`', '|', '~',  '\t', '\x7f', '\x80', '\xff'};
    int accepted = 0;
    for (size_t pos = 0; pos < 40; pos++) {
        for (size_t b = 0; b < sizeof(badc); b++) {
            char t[41];
            memcpy(t, good, 41);
            t[pos] = badc[b];
            if (moshpit_key_from_text(t, out) != MOSHPIT_EINVAL)
                accepted++;
        }
    }
    CHECK(accepted == 0, "%d texts with a non-Z85 character accepted",
          accepted);

    /* 5-character groups whose value exceeds 0xffffffff */
    CHECK(moshpit_key_from_text("%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%",
                                out) == MOSHPIT_EINVAL,
          "\"%%%%%%%%%%\" x8 accepted");
    CHECK(moshpit_key_from_text("########################################",
                                out) == MOSHPIT_EINVAL,
          "\"#####\" x8 accepted");
    for (int g = 0; g < 8; g++) {
        /* 0x100000000 = "%nSc1": one past the largest group */
        char t[41];
        memcpy(t, good, 41);
        memcpy(t + 5 * g, "%nSc1", 5);
        CHECK(moshpit_key_from_text(t, out) == MOSHPIT_EINVAL,
              "overflowing group %d (\"%%nSc1\") accepted", g);
    }

    /* NULL arguments */
    char txt[41];
    CHECK(moshpit_key_to_text(NULL, txt) == MOSHPIT_EINVAL,
          "to_text(NULL, out)");
    CHECK(moshpit_key_to_text(key, NULL) == MOSHPIT_EINVAL,
          "to_text(key, NULL)");
    CHECK(moshpit_key_from_text(NULL, out) == MOSHPIT_EINVAL,
          "from_text(NULL, key)");
    CHECK(moshpit_key_from_text(good, NULL) == MOSHPIT_EINVAL,
          "from_text(text, NULL)");
}

/* ---------------------------------------------------------------------- */
/* configuration                                                          */
/* ---------------------------------------------------------------------- */

static void test_config_defaults(void) {
    moshpit_config_t c;
    memset(&c, 0x5a, sizeof(c));
    moshpit_config_init(&c);
    static const uint8_t zero[32];
    CHECK(c.group_size == 8, "group_size %u", c.group_size);
    CHECK(c.min_group_size == 2, "min_group_size %u", c.min_group_size);
    CHECK(c.grid_position == -1, "grid_position %lld",
          (long long)c.grid_position);
    CHECK(c.matchmaking_ms == 2000, "matchmaking_ms %u", c.matchmaking_ms);
    CHECK(c.round_timeout_ms == 30000, "round_timeout_ms %u",
          c.round_timeout_ms);
    CHECK(c.peer_timeout_ms == 5000, "peer_timeout_ms %u", c.peer_timeout_ms);
    CHECK(c.bandwidth_mbps == 1000, "bandwidth_mbps %u", c.bandwidth_mbps);
    CHECK(c.grid_dims == 0, "grid_dims %u", c.grid_dims);
    CHECK(c.serve_state == 0 && c.state_clients_max == 4,
          "serve_state %u state_clients_max %u", c.serve_state,
          c.state_clients_max);
    CHECK(c.aggregation == MOSHPIT_AGG_MEAN && c.trim == 1 && c.clip_tau == 0 &&
              c.clip_iters == 5 && c.weight_cap == 0,
          "aggregation %d trim %u tau %g iters %u cap %u", c.aggregation,
          c.trim, (double)c.clip_tau, c.clip_iters, c.weight_cap);
    CHECK(c.compression == MOSHPIT_COMPRESS_NONE, "compression %u",
          c.compression);
    CHECK(c.data_streams == 0 && c.congestion == NULL,
          "data_streams %u congestion %s", c.data_streams,
          c.congestion != NULL ? c.congestion : "(null)");
    CHECK(c.peers_max == 4096 && c.peer_msg_rate == 1000,
          "peers_max %u peer_msg_rate %u", c.peers_max, c.peer_msg_rate);
    CHECK(c.sessions_max == 128, "sessions_max %llu",
          (unsigned long long)c.sessions_max);
    CHECK(c.shared_memory == MOSHPIT_SHM_AUTO, "shared_memory %u",
          c.shared_memory);
    CHECK(c.listen != NULL, "listen is NULL");
    CHECK(c.log_level == MOSHPIT_LOG_WARN, "log_level %d", c.log_level);
    CHECK(c.swarm == NULL && c.bootstrap == NULL && c.advertise == NULL &&
              c.authorized_keys == NULL && c.authorized_count == 0 &&
              c.log == NULL,
          "pointer fields not cleared");
    CHECK(memcmp(c.public_key, zero, 32) == 0 &&
              memcmp(c.secret_key, zero, 32) == 0 &&
              memcmp(c.swarm_secret, zero, 32) == 0 &&
              memcmp(c.authority_key, zero, 32) == 0,
          "key fields not zero");
    size_t cert_nonzero = 0;
    for (size_t i = 0; i < sizeof(c.cert); i++)
        cert_nonzero += c.cert[i] != 0;
    CHECK(cert_nonzero == 0, "certificate not zero by default");
}

/* Opens cfg expecting EINVAL; *out must stay NULL. */
static void expect_einval_at(const moshpit_config_t *cfg, const char *what,
                             const char *file, int line) {
    moshpit_t *mp = (moshpit_t *)(uintptr_t)1; /* must be overwritten */
    moshpit_err_t e = moshpit_open(cfg, &mp);
    CHECK_AT(file, line, e == MOSHPIT_EINVAL && mp == NULL,
             "open with %s: %s (want EINVAL), out %s", what,
             moshpit_strerror(e), mp == NULL ? "NULL" : "not NULL");
    if (e == MOSHPIT_OK && mp != NULL && mp != (moshpit_t *)(uintptr_t)1)
        moshpit_close(mp);
}
#define EXPECT_EINVAL(cfg, what) expect_einval_at(cfg, what, __FILE__, __LINE__)

static void test_open_invalid(void) {
    moshpit_config_t c;
    moshpit_t *mp = NULL;
    char swarm[300];
    uint8_t pub[32], sec[32], pub2[32], sec2[32];
    char txt[41], ep[100];

    base_config(&c);
    CHECK(moshpit_open(NULL, &mp) == MOSHPIT_EINVAL, "open(NULL, out)");
    CHECK(mp == NULL, "out set after open(NULL cfg)");
    CHECK(moshpit_open(&c, NULL) == MOSHPIT_EINVAL, "open(cfg, NULL)");

    base_config(&c);
    c.swarm = NULL;
    EXPECT_EINVAL(&c, "swarm NULL");
    c.swarm = "";
    EXPECT_EINVAL(&c, "swarm empty");
    memset(swarm, 's', 256);
    swarm[256] = '\0';
    c.swarm = swarm;
    EXPECT_EINVAL(&c, "swarm of 256 characters");
    swarm[255] = '\0';
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "swarm of 255 refused");
    moshpit_close(mp);

    base_config(&c);
    c.group_size = 0;
    EXPECT_EINVAL(&c, "group_size 0");
    c.group_size = 65;
    EXPECT_EINVAL(&c, "group_size 65");
    c.group_size = 4;
    c.min_group_size = 5;
    EXPECT_EINVAL(&c, "min_group_size > group_size");

    base_config(&c);
    c.matchmaking_ms = 0;
    EXPECT_EINVAL(&c, "matchmaking_ms 0");
    base_config(&c);
    c.round_timeout_ms = c.matchmaking_ms;
    EXPECT_EINVAL(&c, "round_timeout_ms == matchmaking_ms");
    c.round_timeout_ms = c.matchmaking_ms - 1;
    EXPECT_EINVAL(&c, "round_timeout_ms < matchmaking_ms");

    base_config(&c);
    c.authorized_keys = NULL;
    c.authorized_count = 1;
    EXPECT_EINVAL(&c, "authorized_keys NULL, count 1");

    base_config(&c);
    c.state_clients_max = 65;
    EXPECT_EINVAL(&c, "state_clients_max 65");

    /* compression: the five settings open, anything else is refused */
    for (uint32_t cz = 0; cz <= MOSHPIT_COMPRESS_INT4 + 2; cz++) {
        base_config(&c);
        c.compression = cz;
        mp = NULL;
        moshpit_err_t e = moshpit_open(&c, &mp);
        CHECK(e == (cz <= MOSHPIT_COMPRESS_INT4 ? MOSHPIT_OK : MOSHPIT_EINVAL),
              "compression %u: %s", cz, moshpit_strerror(e));
        moshpit_close(mp);
    }
    base_config(&c);
    c.compression = UINT32_MAX;
    EXPECT_EINVAL(&c, "compression UINT32_MAX");

    /* robust aggregation: nonsense in any field is refused */
    base_config(&c);
    c.aggregation = 3;
    EXPECT_EINVAL(&c, "aggregation 3");
    c.aggregation = -1;
    EXPECT_EINVAL(&c, "aggregation -1");
    base_config(&c);
    c.aggregation = MOSHPIT_AGG_TRIMMED_MEAN;
    c.trim = 0;
    EXPECT_EINVAL(&c, "trim 0");
    c.trim = 4; /* group_size 8 */
    EXPECT_EINVAL(&c, "2 * trim >= group_size");
    c.trim = 3;
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "trimmed mean, trim 3 of 8");
    moshpit_close(mp);
    base_config(&c);
    c.trim = 32;
    EXPECT_EINVAL(&c, "trim 32");
    base_config(&c);
    c.aggregation = MOSHPIT_AGG_CENTERED_CLIP;
    c.clip_tau = -1;
    EXPECT_EINVAL(&c, "clip_tau -1");
    c.clip_tau = NAN;
    EXPECT_EINVAL(&c, "clip_tau NaN");
    c.clip_tau = 0.5f;
    c.clip_iters = 0;
    EXPECT_EINVAL(&c, "clip_iters 0");
    c.clip_iters = 101;
    EXPECT_EINVAL(&c, "clip_iters 101");
    c.clip_iters = 100;
    c.weight_cap = 65536;
    EXPECT_EINVAL(&c, "weight_cap 65536");
    c.weight_cap = 65535;
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "CenteredClip config");
    moshpit_close(mp);

    base_config(&c);
    c.grid_dims = 9;
    EXPECT_EINVAL(&c, "grid_dims 9");
    c.grid_dims = 8;
    c.grid_position = -2;
    EXPECT_EINVAL(&c, "grid_position -2");
    c.grid_position = INT64_MAX; /* any position is a valid place */
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "grid_dims 8, huge position");
    moshpit_close(mp);

    CHECK(moshpit_keypair(pub, sec) == MOSHPIT_OK, "keypair");
    CHECK(moshpit_keypair(pub2, sec2) == MOSHPIT_OK, "keypair");
    base_config(&c);
    memcpy(c.public_key, pub2, 32);
    memcpy(c.secret_key, sec, 32);
    EXPECT_EINVAL(&c, "public key not matching the secret key");
    base_config(&c);
    memcpy(c.public_key, pub, 32);
    EXPECT_EINVAL(&c, "public key without secret key");

    /* bootstrap entries */
    CHECK(moshpit_key_to_text(pub, txt) == MOSHPIT_OK, "to_text");
    const char *bs[2] = {NULL, NULL};
    base_config(&c);
    c.bootstrap = bs;
    bs[0] = "tcp://127.0.0.1:5";
    EXPECT_EINVAL(&c, "bootstrap without key");
    snprintf(ep, sizeof(ep), "ipc://x#%s", txt);
    bs[0] = ep;
    EXPECT_EINVAL(&c, "bootstrap ipc://x#KEY");
    bs[0] = "garbage";
    EXPECT_EINVAL(&c, "bootstrap \"garbage\"");
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:5#%.39s", txt);
    bs[0] = ep;
    EXPECT_EINVAL(&c, "bootstrap with a 39-character key");
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:5#%s",
             "%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%");
    bs[0] = ep;
    EXPECT_EINVAL(&c, "bootstrap with an overflowing key");
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:0#%s", txt);
    bs[0] = ep;
    EXPECT_EINVAL(&c, "bootstrap with port 0");

    base_config(&c);
    c.listen = "udp://x:1";
    EXPECT_EINVAL(&c, "listen udp://x:1");

    base_config(&c);
    c.log_level = 7;
    EXPECT_EINVAL(&c, "log_level 7");

    /* limits: 0 = default; absurd values refused */
    base_config(&c);
    c.peers_max = 1;
    EXPECT_EINVAL(&c, "peers_max 1");
    c.peers_max = (1u << 20) + 1;
    EXPECT_EINVAL(&c, "peers_max 2^20 + 1");
    c.peers_max = UINT32_MAX;
    EXPECT_EINVAL(&c, "peers_max 2^32 - 1");
    base_config(&c);
    c.peer_msg_rate = 49;
    EXPECT_EINVAL(&c, "peer_msg_rate 49");
    c.peer_msg_rate = 1000001;
    EXPECT_EINVAL(&c, "peer_msg_rate 1000001");
    c.peer_msg_rate = UINT32_MAX;
    EXPECT_EINVAL(&c, "peer_msg_rate 2^32 - 1");
    base_config(&c);
    c.sessions_max = 1;
    EXPECT_EINVAL(&c, "sessions_max 1");
    c.sessions_max = 65537;
    EXPECT_EINVAL(&c, "sessions_max 65537");
    c.sessions_max = UINT64_MAX;
    EXPECT_EINVAL(&c, "sessions_max 2^64 - 1");
    base_config(&c);
    c.shared_memory = MOSHPIT_SHM_OFF + 1;
    EXPECT_EINVAL(&c, "shared_memory 2");
    c.shared_memory = UINT32_MAX;
    EXPECT_EINVAL(&c, "shared_memory 2^32 - 1");
    base_config(&c);
    /* the bounds themselves and 0 are accepted */
    uint32_t ok_max[] = {0, 2, 1u << 20}, ok_rate[] = {0, 50, 1000000};
    uint64_t ok_sessions[] = {0, 2, 65536};
    for (int i = 0; i < 3; i++) {
        base_config(&c);
        c.peers_max = ok_max[i];
        c.peer_msg_rate = ok_rate[i];
        c.sessions_max = ok_sessions[i];
        c.shared_memory = (uint32_t)i % 2; /* AUTO and OFF */
        moshpit_t *p = NULL;
        moshpit_err_t e = moshpit_open(&c, &p);
        CHECK(e == MOSHPIT_OK, "peers_max %u peer_msg_rate %u: %s", ok_max[i],
              ok_rate[i], moshpit_strerror(e));
        moshpit_close(p);
    }
}

/* Certificate admission: moshpit_open refuses, before anything is sent,
 * every own certificate the other peers would refuse. */
static void test_open_cert(void) {
    moshpit_config_t c;
    moshpit_t *mp = NULL;
    uint8_t apub[32], asec[64], opub[32], osec[64], pub[32], sec[32];
    uint8_t pub2[32], sec2[32], h[32];
    CHECK(moshpit_authority_keypair(apub, asec) == MOSHPIT_OK, "authority");
    CHECK(moshpit_authority_keypair(opub, osec) == MOSHPIT_OK, "authority");
    CHECK(moshpit_keypair(pub, sec) == MOSHPIT_OK, "keypair");
    CHECK(moshpit_keypair(pub2, sec2) == MOSHPIT_OK, "keypair");
    uint64_t now = mp_plat_wallclock_s();

    /* this peer's identity, with its certificate */
    base_config(&c);
    memcpy(c.secret_key, sec, 32);
    memcpy(c.authority_key, apub, 32);
    CHECK(moshpit_cert_issue(asec, pub, c.swarm, now + 3600, c.cert) ==
              MOSHPIT_OK,
          "issue");
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "valid certificate refused");
    moshpit_close(mp);
    moshpit_config_t good = c;

    c = good;
    memset(c.cert, 0, sizeof(c.cert));
    EXPECT_EINVAL(&c, "authority_key without a certificate");
    c = good;
    memset(c.authority_key, 0, 32);
    c.authority_key[0] = 1; /* the identity point: small order */
    EXPECT_EINVAL(&c, "authority_key of small order");
    c = good;
    memset(c.secret_key, 0, 32);
    EXPECT_EINVAL(&c, "certificate with an ephemeral identity");
    c = good;
    memcpy(c.secret_key, sec2, 32);
    EXPECT_EINVAL(&c, "certificate of another identity");
    c = good;
    c.swarm = "test-api-2";
    EXPECT_EINVAL(&c, "certificate of another swarm");
    c = good;
    memcpy(c.authority_key, opub, 32);
    EXPECT_EINVAL(&c, "certificate of another authority");
    c = good;
    c.cert[120] ^= 0x20;
    EXPECT_EINVAL(&c, "certificate with a bad signature");
    c = good;
    c.cert[0] = 2;
    EXPECT_EINVAL(&c, "certificate of version 2");
    mp__crypto_swarm_hash(good.swarm, h);
    c = good;
    CHECK(mp__cert_sign(asec, pub, h, now - 7200, now - 3600, c.cert) ==
              MOSHPIT_OK,
          "sign");
    EXPECT_EINVAL(&c, "expired certificate");
    c = good;
    CHECK(mp__cert_sign(asec, pub, h, now + 3600, now + 7200, c.cert) ==
              MOSHPIT_OK,
          "sign");
    EXPECT_EINVAL(&c, "certificate not yet valid");
    /* within the allowed skew either way: accepted */
    c = good;
    CHECK(mp__cert_sign(asec, pub, h, now - 7200, now - MOSHPIT_CERT_SKEW_S / 2,
                        c.cert) == MOSHPIT_OK,
          "sign");
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "expired within the skew");
    moshpit_close(mp);
    c = good;
    CHECK(mp__cert_sign(asec, pub, h, now + MOSHPIT_CERT_SKEW_S / 2, now + 7200,
                        c.cert) == MOSHPIT_OK,
          "sign");
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK, "early within the skew");
    moshpit_close(mp);

    /* without an authority the certificate is presented as it is; only
     * its format is checked */
    c = good;
    memset(c.authority_key, 0, 32);
    memcpy(c.secret_key, sec2, 32);
    mp = NULL;
    CHECK(moshpit_open(&c, &mp) == MOSHPIT_OK,
          "another key's certificate, no authority");
    moshpit_close(mp);
    c.cert[3] = 1;
    EXPECT_EINVAL(&c, "malformed certificate without authority");
    memset(c.cert + 8, 0, 32);
    c.cert[3] = 0;
    EXPECT_EINVAL(&c, "certificate with a zero identity");

    mp__crypto_wipe(asec, sizeof(asec));
    mp__crypto_wipe(osec, sizeof(osec));
}

/* ---------------------------------------------------------------------- */
/* a lone peer                                                            */
/* ---------------------------------------------------------------------- */

/* Checks ep is "tcp://127.0.0.1:<port>#<40 chars>"; returns the port or 0.
 * key (if not NULL) receives the decoded key. */
static long check_endpoint_text(const char *ep, uint8_t key[32]) {
    static const char pre[] = "tcp://127.0.0.1:";
    size_t pl = sizeof(pre) - 1;
    CHECK(strncmp(ep, pre, pl) == 0, "endpoint \"%s\" prefix", ep);
    if (strncmp(ep, pre, pl) != 0)
        return 0;
    char *end = NULL;
    long port = strtol(ep + pl, &end, 10);
    CHECK(end != ep + pl && port > 0 && port <= 65535, "endpoint \"%s\" port",
          ep);
    CHECK(*end == '#' && strlen(end + 1) == 40, "endpoint \"%s\" key part", ep);
    if (*end != '#' || strlen(end + 1) != 40)
        return 0;
    uint8_t k[32];
    CHECK(moshpit_key_from_text(end + 1, k) == MOSHPIT_OK,
          "endpoint key \"%s\" does not decode", end + 1);
    if (key != NULL)
        memcpy(key, k, 32);
    return port;
}

static void test_open_endpoint(void) {
    moshpit_config_t c;
    moshpit_t *mp = NULL;
    char ep[200];
    uint8_t pub[32], sec[32], got[32];

    /* given identity */
    CHECK(moshpit_keypair(pub, sec) == MOSHPIT_OK, "keypair");
    base_config(&c);
    memcpy(c.public_key, pub, 32);
    memcpy(c.secret_key, sec, 32);
    moshpit_err_t e = moshpit_open(&c, &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL, "open with identity: %s",
          moshpit_strerror(e));
    if (mp != NULL) {
        e = moshpit_endpoint(mp, ep, sizeof(ep));
        CHECK(e == MOSHPIT_OK, "endpoint: %s", moshpit_strerror(e));
        memset(got, 0, 32);
        if (e == MOSHPIT_OK) {
            CHECK(check_endpoint_text(ep, got) != 0, "bad endpoint \"%s\"", ep);
            CHECK(memcmp(got, pub, 32) == 0,
                  "endpoint key is not the configured public key");
            size_t need = strlen(ep) + 1;
            char small[200];
            CHECK(moshpit_endpoint(mp, small, need - 1) == MOSHPIT_EINVAL,
                  "buffer of %zu (one short) accepted", need - 1);
            CHECK(moshpit_endpoint(mp, small, 0) == MOSHPIT_EINVAL,
                  "buffer of 0 accepted");
            CHECK(moshpit_endpoint(mp, small, need) == MOSHPIT_OK &&
                      strcmp(small, ep) == 0,
                  "exact-size buffer refused or differs");
        }
        CHECK(moshpit_endpoint(mp, NULL, 200) == MOSHPIT_EINVAL,
              "endpoint(mp, NULL)");
        CHECK(moshpit_members(mp) == 1, "lone peer: %zu members",
              moshpit_members(mp));
        moshpit_close(mp);
    }
    CHECK(moshpit_endpoint(NULL, ep, sizeof(ep)) == MOSHPIT_EINVAL,
          "endpoint(NULL, buf)");

    /* ephemeral identity, listen NULL (means the default) */
    base_config(&c);
    c.listen = NULL;
    mp = NULL;
    e = moshpit_open(&c, &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL, "open ephemeral: %s",
          moshpit_strerror(e));
    if (mp != NULL) {
        CHECK(moshpit_endpoint(mp, ep, sizeof(ep)) == MOSHPIT_OK, "endpoint");
        CHECK(check_endpoint_text(ep, NULL) != 0, "bad endpoint \"%s\"", ep);
        moshpit_close(mp);
    }

    moshpit_close(NULL); /* a no-op; ASan would catch a NULL dereference */
    CHECK(moshpit_members(NULL) == 0, "members(NULL)");
}

static void test_lone_peer(void) {
    enum { N = 1000 };
    moshpit_config_t c;
    moshpit_t *mp = NULL;
    moshpit_round_t info;
    float v[N], orig[N];
    uint64_t seed = 42;

    base_config(&c);
    moshpit_err_t e = moshpit_open(&c, &mp);
    CHECK(e == MOSHPIT_OK && mp != NULL, "open: %s", moshpit_strerror(e));
    if (mp == NULL)
        return;
    for (int i = 0; i < N; i++)
        v[i] = (float)((double)(int64_t)test_splitmix64(&seed) / 1e15);
    /* values whose bits a careless copy or x*1.0 might change */
    v[0] = -0.0f;
    v[1] = FLT_MIN / 4.0f; /* subnormal */
    v[2] = FLT_MAX;
    v[3] = -FLT_MAX;
    memcpy(orig, v, sizeof(v));

    /* argument checks: EINVAL and the buffer untouched */
    static const size_t bad_pos[] = {0, 17, N - 1};
    for (size_t k = 0; k < 3; k++) {
        static const int kinds[] = {0, 1, 2}; /* NaN, +Inf, -Inf */
        for (size_t t = 0; t < 3; t++) {
            float x = kinds[t] == 0   ? NAN
                      : kinds[t] == 1 ? INFINITY
                                      : -INFINITY;
            memcpy(v, orig, sizeof(v));
            v[bad_pos[k]] = x;
            float before[N];
            memcpy(before, v, sizeof(v));
            e = moshpit_average(mp, v, N, 1.0, NULL);
            CHECK(e == MOSHPIT_EINVAL, "value %g at %zu: %s", (double)x,
                  bad_pos[k], moshpit_strerror(e));
            CHECK(memcmp(before, v, sizeof(v)) == 0,
                  "buffer changed after refused call (%g at %zu)", (double)x,
                  bad_pos[k]);
        }
    }
    memcpy(v, orig, sizeof(v));
    static const double bad_w[] = {
        NAN, -1.0, INFINITY, -INFINITY, -1e-300, MOSHPIT_WEIGHT_MAX * 1.01};
    for (size_t k = 0; k < sizeof(bad_w) / sizeof(bad_w[0]); k++) {
        e = moshpit_average(mp, v, N, bad_w[k], NULL);
        CHECK(e == MOSHPIT_EINVAL, "weight %g: %s", bad_w[k],
              moshpit_strerror(e));
        CHECK(memcmp(orig, v, sizeof(v)) == 0, "buffer changed after weight %g",
              bad_w[k]);
    }
    CHECK(moshpit_average(mp, NULL, 5, 1.0, NULL) == MOSHPIT_EINVAL,
          "values NULL, count 5");
    CHECK(moshpit_average(NULL, v, N, 1.0, NULL) == MOSHPIT_EINVAL, "mp NULL");
    CHECK(memcmp(orig, v, sizeof(v)) == 0, "buffer changed");

    /* moshpit_fetch_state: arguments first; then alone, nobody serves */
    uint64_t rnd = 77;
    CHECK(moshpit_fetch_state(NULL, v, N, 1000, &rnd) == MOSHPIT_EINVAL &&
              rnd == 0,
          "fetch mp NULL");
    CHECK(moshpit_fetch_state(mp, NULL, N, 1000, NULL) == MOSHPIT_EINVAL,
          "fetch values NULL");
    CHECK(moshpit_fetch_state(mp, v, 0, 1000, NULL) == MOSHPIT_EINVAL,
          "fetch count 0");
    CHECK(moshpit_fetch_state(mp, v, N, 0, NULL) == MOSHPIT_EINVAL,
          "fetch timeout 0");
    e = moshpit_fetch_state(mp, v, N, 30000, &rnd);
    CHECK(e == MOSHPIT_ENOSTATE, "fetch with nobody: %s (want ENOSTATE)",
          moshpit_strerror(e));

    /* a real round with nobody else: OK, group of one, values untouched */
    memset(&info, 0xee, sizeof(info));
    uint64_t t0 = test_now_ms();
    e = moshpit_average(mp, v, N, 1.0, &info);
    uint64_t dt = test_now_ms() - t0;
    CHECK(e == MOSHPIT_OK, "lone average: %s", moshpit_strerror(e));
    CHECK(info.group_size == 1, "lone group_size %u", info.group_size);
    CHECK(info.round_id == 0, "lone round_id %llu",
          (unsigned long long)info.round_id);
    CHECK(memcmp(orig, v, sizeof(v)) == 0, "lone values not bit-identical");
    CHECK(dt <= c.round_timeout_ms + 1000u, "lone average took %llu ms",
          (unsigned long long)dt);

    /* count 0, with and without a buffer */
    t0 = test_now_ms();
    e = moshpit_average(mp, v, 0, 1.0, &info);
    CHECK(e == MOSHPIT_OK, "count 0: %s", moshpit_strerror(e));
    CHECK(info.group_size == 1, "count 0 group_size %u", info.group_size);
    e = moshpit_average(mp, NULL, 0, 0.0, NULL);
    CHECK(e == MOSHPIT_OK, "NULL, count 0, weight 0: %s", moshpit_strerror(e));
    dt = test_now_ms() - t0;
    CHECK(dt <= 2u * (c.round_timeout_ms + 1000u),
          "two empty rounds took %llu ms", (unsigned long long)dt);
    CHECK(memcmp(orig, v, sizeof(v)) == 0, "count 0 touched the buffer");

    /* members */
    CHECK(moshpit_wait_members(mp, 1, 0) == MOSHPIT_OK, "wait for 1");
    t0 = test_now_ms();
    e = moshpit_wait_members(mp, 2, 200);
    dt = test_now_ms() - t0;
    CHECK(e == MOSHPIT_ETIMEDOUT, "wait for 2 on a lone peer: %s",
          moshpit_strerror(e));
    CHECK(dt >= 150 && dt <= 2000, "wait_members(200 ms) took %llu ms",
          (unsigned long long)dt);
    CHECK(moshpit_wait_members(NULL, 1, 10) == MOSHPIT_EINVAL,
          "wait_members(NULL)");
    CHECK(moshpit_members(mp) == 1, "members %zu", moshpit_members(mp));
    moshpit_close(mp);
}

/* ---------------------------------------------------------------------- */
/* two peers in one process                                               */
/* ---------------------------------------------------------------------- */

enum { PAIR_N = 1000 };

typedef struct avg_job {
    moshpit_t *mp;
    float *v;
    double w;
    moshpit_err_t e;
    moshpit_round_t info;
} avg_job_t;

static void avg_thread(void *arg) {
    avg_job_t *j = arg;
    j->e = moshpit_average(j->mp, j->v, PAIR_N, j->w, &j->info);
}

static void test_two_peers(void) {
    moshpit_config_t c;
    moshpit_t *a, *b;
    char ep[200];

    base_config(&c);
    c.swarm = "test-api-pair";
    c.group_size = 2;
    c.matchmaking_ms = 3000;
    c.round_timeout_ms = 15000;
    if (TEST_OPEN_PAIR(&c, &a, &b, ep, sizeof(ep), 10000) != 0)
        return;

    /* dyadic values: (1*x + 3*y) / 4 is exact in double and in float, so
     * the weighted mean can be compared bit for bit */
    static float va[PAIR_N], vb[PAIR_N], want[PAIR_N];
    uint64_t seed = 2024;
    for (int i = 0; i < PAIR_N; i++) {
        va[i] = (float)((int64_t)(test_splitmix64(&seed) % 2000001) - 1000000) /
                1024.0f;
        vb[i] = (float)((int64_t)(test_splitmix64(&seed) % 2000001) - 1000000) /
                1024.0f;
        want[i] = (float)((1.0 * va[i] + 3.0 * vb[i]) / 4.0);
    }
    avg_job_t ja = {.mp = a, .v = va, .w = 1.0};
    avg_job_t jb = {.mp = b, .v = vb, .w = 3.0};
    mp_plat_thread_t ta, tb;
    int ra = mp_plat_thread_start(&ta, avg_thread, &ja);
    int rb = mp_plat_thread_start(&tb, avg_thread, &jb);
    CHECK(ra == 0 && rb == 0, "thread start %d %d", ra, rb);
    if (ra == 0)
        mp_plat_thread_join(&ta);
    if (rb == 0)
        mp_plat_thread_join(&tb);
    avg_job_t *jobs[2] = {&ja, &jb};
    for (int p = 0; p < 2; p++) {
        avg_job_t *j = jobs[p];
        CHECK(j->e == MOSHPIT_OK, "peer %d: %s", p, moshpit_strerror(j->e));
        CHECK(j->info.group_size == 2, "peer %d group_size %u", p,
              j->info.group_size);
        CHECK(j->info.group_weight == 4.0, "peer %d group_weight %g", p,
              j->info.group_weight);
        CHECK(j->info.fraction_averaged == 1.0, "peer %d fraction %g", p,
              j->info.fraction_averaged);
        CHECK(j->info.peers_failed == 0, "peer %d peers_failed %u", p,
              j->info.peers_failed);
        CHECK(j->info.round_id != 0, "peer %d round_id 0", p);
        int wrong = 0, first = -1;
        for (int i = 0; i < PAIR_N; i++) {
            if (memcmp(&j->v[i], &want[i], sizeof(float)) != 0) {
                wrong++;
                if (first < 0)
                    first = i;
            }
        }
        CHECK(wrong == 0,
              "peer %d: %d values not the exact mean (first %d: "
              "%.9g, want %.9g)",
              p, wrong, first, first >= 0 ? (double)j->v[first] : 0.0,
              first >= 0 ? (double)want[first] : 0.0);
    }
    CHECK(ja.info.round_id == jb.info.round_id, "round ids differ");
    moshpit_close(b);
    moshpit_close(a);
}

/* Log lines of moshpit_open, for test_congestion. */
static char cc_log[4096];

static void cc_log_cb(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    size_t n = strlen(cc_log);
    snprintf(cc_log + n, sizeof(cc_log) - n, "%s\n", msg);
}

/* Opens with congestion cc and data_streams ds; the result, log in cc_log. */
static moshpit_err_t open_cc(const char *cc, uint32_t ds) {
    moshpit_config_t c;
    base_config(&c);
    c.congestion = cc;
    c.data_streams = ds;
    c.log = cc_log_cb;
    c.log_level = MOSHPIT_LOG_INFO;
    cc_log[0] = '\0';
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&c, &mp);
    CHECK((e == MOSHPIT_OK) == (mp != NULL), "open result and handle");
    moshpit_close(mp);
    return e;
}

/* congestion and data_streams: names the kernel could not know, algorithms
 * this process cannot use and stream counts over 16 are EINVAL, with the
 * reason in the log; "default", reno (every Linux process may pick it) and
 * the automatic choice open and say what the data connections use. */
static void test_congestion(void) {
    moshpit_err_t e = open_cc("no such!", 0);
    CHECK(e == MOSHPIT_EINVAL, "congestion \"no such!\": %s",
          moshpit_strerror(e));
    e = open_cc("abcdefghijklmnop", 0); /* 16 characters */
    CHECK(e == MOSHPIT_EINVAL, "congestion of 16 characters: %s",
          moshpit_strerror(e));
    e = open_cc("mp_no_such_cc", 0);
    CHECK(e == MOSHPIT_EINVAL, "congestion mp_no_such_cc: %s",
          moshpit_strerror(e));
    CHECK(strstr(cc_log, "congestion control 'mp_no_such_cc' cannot be used") !=
              NULL,
          "no reason logged: %s", cc_log);
    e = open_cc(NULL, 17);
    CHECK(e == MOSHPIT_EINVAL, "data_streams 17: %s", moshpit_strerror(e));
    e = open_cc(NULL, UINT32_MAX);
    CHECK(e == MOSHPIT_EINVAL, "data_streams UINT32_MAX: %s",
          moshpit_strerror(e));
    e = open_cc("default", 0);
    CHECK(e == MOSHPIT_OK, "congestion default: %s", moshpit_strerror(e));
    CHECK(strstr(cc_log, "data connections: congestion control ") != NULL &&
              strstr(cc_log, "set per socket") == NULL,
          "default sets nothing: %s", cc_log);
    e = open_cc("reno", 16);
    CHECK(e == MOSHPIT_OK, "congestion reno: %s", moshpit_strerror(e));
    CHECK(strstr(cc_log, "congestion control reno set per socket") != NULL &&
              strstr(cc_log, "16 per peer") != NULL,
          "reno, 16 streams: %s", cc_log);
    e = open_cc("", 0);
    CHECK(e == MOSHPIT_OK, "congestion \"\" (automatic): %s",
          moshpit_strerror(e));
    CHECK(strstr(cc_log, "data connections: congestion control ") != NULL,
          "automatic choice not logged: %s", cc_log);
    /* bbr where it may be used, one stream with it, four without */
    int bbr = strstr(cc_log, "congestion control bbr") != NULL;
    CHECK(strstr(cc_log, bbr ? "1 per peer" : "4 per peer") != NULL,
          "default streams: %s", cc_log);
}

int main(void) {
    test_strerror();
    test_version_constants();
    test_keypair();
    test_key_text_roundtrip();
    test_key_text_reject();
    test_config_defaults();
    test_open_invalid();
    test_congestion();
    test_open_cert();
    test_open_endpoint();
    test_lone_peer();
    test_two_peers();

    return test_summary("test_api");
}
