/* SPDX-License-Identifier: MIT */
/*
 * test_cert.c - unit tests of swarm certificates (src/crypto/cert.h) and
 * the offline public functions around them (src/api/keys.c): a golden
 * certificate from a fixed authority seed, byte for byte and as text
 * (tests/vectors/cert_v1.*); every malformed form the decoder must refuse
 * (every length, version, reserved byte, zero identity, times out of order
 * or too large); every status of the check (foreign authority, forged
 * signature, other swarm, other key, not yet valid and expired with the
 * clock skew exactly at its edges); a flip of any single bit refused; the
 * signature's domain separation; authority keys and secrets as text;
 * moshpit_cert_issue / _inspect / _to_text / _from_text and their argument
 * checks; and the strict Z85 codec against ZeroMQ's. Every failed check
 * prints file:line; the exit status is 1 if any check failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "net/net.h"
#include "platform.h"
#include "base/z85.h"

#define TEST_MAX_PRINTED 50
#include "test_util.h"

#ifndef MP_VECTORS_DIR
#define MP_VECTORS_DIR "tests/vectors"
#endif

#define NB 1700000000ull /* 2023-11-14 */
#define NA 1800000000ull /* 2027-01-15 */
#define SKEW MOSHPIT_CERT_SKEW_S

/* The golden authority: Ed25519 from seed 01 02 .. 20. */
static uint8_t auth_pub[32], auth_sec[64];
/* Another authority. */
static uint8_t other_pub[32], other_sec[64];
static uint8_t peer[32], swarm_hash[32];

static void setup(void) {
    uint8_t seed[32];
    for (int i = 0; i < 32; i++)
        seed[i] = (uint8_t)(i + 1);
    CHECK(crypto_sign_seed_keypair(auth_pub, auth_sec, seed) == 0, "seed");
    for (int i = 0; i < 32; i++)
        seed[i] = (uint8_t)(0xa0 + i);
    CHECK(crypto_sign_seed_keypair(other_pub, other_sec, seed) == 0, "seed");
    for (int i = 0; i < 32; i++)
        peer[i] = (uint8_t)(0x40 + i);
    mp__crypto_swarm_hash("golden-swarm", swarm_hash);
}

static moshpit_cert_status_t check_at(const uint8_t *c, uint64_t now) {
    return mp__cert_check(c, MP_CERT_BYTES, auth_pub, swarm_hash, peer, now,
                          NULL);
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void print_hex(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%02x%s", p[i], i % 16 == 15 ? "\n" : "");
    fprintf(stderr, "\n");
}

/* ---------------------------------------------------------------------- */

static void test_golden(void) {
    uint8_t c[MP_CERT_BYTES], want[MP_CERT_BYTES + 1];
    char path[512], text[MOSHPIT_CERT_TEXT_LEN + 2];
    CHECK(mp__cert_sign(auth_sec, peer, swarm_hash, NB, NA, c) == MOSHPIT_OK,
          "sign the golden certificate");
    snprintf(path, sizeof(path), "%s/cert_v1.hex", MP_VECTORS_DIR);
    long n = test_read_hex(path, want, sizeof(want));
    CHECK(n == MP_CERT_BYTES && memcmp(c, want, MP_CERT_BYTES) == 0,
          "certificate differs from %s", path);
    if (n != MP_CERT_BYTES || memcmp(c, want, MP_CERT_BYTES) != 0)
        print_hex(c, sizeof(c));

    /* the layout, field by field */
    uint8_t id[8];
    mp__cert_authority_id(auth_pub, id);
    CHECK(c[0] == 1, "version byte");
    CHECK(sodium_is_zero(c + 1, 7), "reserved bytes");
    CHECK(memcmp(c + 8, peer, 32) == 0, "peer key at 8");
    CHECK(memcmp(c + 40, swarm_hash, 32) == 0, "swarm hash at 40");
    CHECK(c[72] == (uint8_t)NB && c[75] == (uint8_t)(NB >> 24) && c[79] == 0,
          "not_before at 72, little-endian");
    CHECK(c[80] == (uint8_t)NA && c[83] == (uint8_t)(NA >> 24),
          "not_after at 80");
    CHECK(memcmp(c + 88, id, 8) == 0, "authority id at 88");
    uint8_t msg[15 + 96];
    memcpy(msg, "moshpit-cert-v1", 15);
    memcpy(msg + 15, c, 96);
    CHECK(crypto_sign_verify_detached(c + 96, msg, sizeof(msg), auth_pub) == 0,
          "signature at 96 over label || bytes 0..95");
    uint8_t h[32];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const uint8_t *)"moshpit-authority-v1", 20);
    crypto_generichash_update(&st, auth_pub, 32);
    crypto_generichash_final(&st, h, 32);
    CHECK(memcmp(h, id, 8) == 0, "authority id construction");

    /* text form */
    CHECK(moshpit_cert_to_text(c, text) == MOSHPIT_OK &&
              strlen(text) == MOSHPIT_CERT_TEXT_LEN,
          "certificate to text");
    snprintf(path, sizeof(path), "%s/cert_v1.txt", MP_VECTORS_DIR);
    FILE *f = fopen(path, "r");
    char line[512] = "";
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    CHECK(strcmp(line, text) == 0, "text differs from %s: %s", path, text);
    uint8_t back[MP_CERT_BYTES];
    CHECK(moshpit_cert_from_text(text, back) == MOSHPIT_OK &&
              memcmp(back, c, sizeof(c)) == 0,
          "text round trip");

    /* and it checks */
    CHECK(check_at(c, NB + 10) == MOSHPIT_CERT_VALID, "golden valid");
    mp_cert_t d;
    CHECK(mp__cert_decode(c, sizeof(c), &d) == MOSHPIT_OK && d.version == 1 &&
              d.not_before == NB && d.not_after == NA &&
              memcmp(d.peer, peer, 32) == 0,
          "golden decodes");
    uint8_t re[MP_CERT_BYTES];
    mp__cert_encode(&d, re);
    CHECK(memcmp(re, c, sizeof(re)) == 0, "decode/encode round trip");
}

static void test_malformed(void) {
    uint8_t c[MP_CERT_BYTES + 64], m[MP_CERT_BYTES];
    mp_cert_t d;
    memset(c, 0, sizeof(c));
    CHECK(mp__cert_sign(auth_sec, peer, swarm_hash, NB, NA, c) == MOSHPIT_OK,
          "sign");
    for (size_t len = 0; len < sizeof(c); len++) {
        moshpit_err_t e = mp__cert_decode(c, len, &d);
        if (len == MP_CERT_BYTES)
            CHECK(e == MOSHPIT_OK, "full length decodes");
        else
            CHECK(e == MOSHPIT_EPROTO &&
                      mp__cert_check(c, len, auth_pub, swarm_hash, peer, NB,
                                     NULL) == MOSHPIT_CERT_MALFORMED,
                  "length %zu -> %d", len, (int)e);
    }

#define MALFORMED(setup, what)                                                 \
    do {                                                                       \
        memcpy(m, c, MP_CERT_BYTES);                                           \
        setup;                                                                 \
        memset(&d, 0x55, sizeof(d));                                           \
        CHECK(mp__cert_decode(m, MP_CERT_BYTES, &d) == MOSHPIT_EPROTO &&       \
                  sodium_is_zero((const uint8_t *)&d, sizeof(d)),              \
              "%s decodes or leaves data", what);                              \
        CHECK(check_at(m, NB) == MOSHPIT_CERT_MALFORMED, "%s: status", what);  \
    } while (0)

    MALFORMED(m[0] = 0, "version 0");
    MALFORMED(m[0] = 2, "version 2");
    MALFORMED(m[0] = 0xff, "version 255");
    for (int i = 1; i < 8; i++) {
        MALFORMED(m[i] = 1, "reserved byte = 1");
        MALFORMED(m[i] = 0x80, "reserved byte = 0x80");
    }
    MALFORMED(memset(m + 8, 0, 32), "zero peer key");
    MALFORMED(put64(m + 72, NA + 1), "not_before > not_after");
    MALFORMED(put64(m + 80, MP_CERT_TIME_MAX + 1), "not_after past 9999");
    MALFORMED(memset(m + 72, 0xff, 16), "times of 2^64-1");

    /* the extremes that are allowed */
    mp_cert_t x;
    memset(&x, 0, sizeof(x));
    x.version = 1;
    x.peer[31] = 1;
    x.not_before = x.not_after = 0;
    mp__cert_encode(&x, m);
    CHECK(mp__cert_decode(m, MP_CERT_BYTES, &d) == MOSHPIT_OK,
          "zero window at 0");
    x.not_before = x.not_after = MP_CERT_TIME_MAX;
    mp__cert_encode(&x, m);
    CHECK(mp__cert_decode(m, MP_CERT_BYTES, &d) == MOSHPIT_OK &&
              d.not_after == MP_CERT_TIME_MAX,
          "window at the largest time");

    CHECK(mp__cert_decode(NULL, 0, &d) == MOSHPIT_EPROTO, "NULL, 0");
    CHECK(mp__cert_decode(NULL, 5, &d) == MOSHPIT_EINVAL, "NULL, 5");
    CHECK(mp__cert_decode(c, MP_CERT_BYTES, NULL) == MOSHPIT_EINVAL,
          "NULL out");
    CHECK(mp__cert_check(NULL, MP_CERT_BYTES, auth_pub, swarm_hash, peer, NB,
                         NULL) == MOSHPIT_CERT_MISSING,
          "no certificate");
#undef MALFORMED
}

static void test_statuses(void) {
    uint8_t c[MP_CERT_BYTES], o[MP_CERT_BYTES];
    CHECK(mp__cert_sign(auth_sec, peer, swarm_hash, NB, NA, c) == MOSHPIT_OK,
          "sign");

    /* validity window with the skew, at its exact edges */
    CHECK(check_at(c, NB) == MOSHPIT_CERT_VALID, "at not_before");
    CHECK(check_at(c, NA) == MOSHPIT_CERT_VALID, "at not_after");
    CHECK(check_at(c, NB - SKEW) == MOSHPIT_CERT_VALID, "skew before");
    CHECK(check_at(c, NB - SKEW - 1) == MOSHPIT_CERT_NOT_YET_VALID,
          "one second before the skew");
    CHECK(check_at(c, 0) == MOSHPIT_CERT_NOT_YET_VALID, "clock at 0");
    CHECK(check_at(c, NA + SKEW) == MOSHPIT_CERT_VALID, "skew after");
    CHECK(check_at(c, NA + SKEW + 1) == MOSHPIT_CERT_EXPIRED,
          "one second after the skew");
    CHECK(check_at(c, UINT64_MAX) == MOSHPIT_CERT_EXPIRED, "clock at max");
    CHECK(check_at(c, UINT64_MAX - SKEW) == MOSHPIT_CERT_EXPIRED,
          "clock near max");

    /* wrong authority, swarm, identity */
    CHECK(mp__cert_check(c, MP_CERT_BYTES, other_pub, swarm_hash, peer, NB,
                         NULL) == MOSHPIT_CERT_FOREIGN,
          "checked with another authority");
    CHECK(mp__cert_sign(other_sec, peer, swarm_hash, NB, NA, o) == MOSHPIT_OK,
          "sign other");
    CHECK(check_at(o, NB) == MOSHPIT_CERT_FOREIGN, "from another authority");
    uint8_t h2[32], p2[32];
    mp__crypto_swarm_hash("golden-swarm2", h2);
    CHECK(mp__cert_check(c, MP_CERT_BYTES, auth_pub, h2, peer, NB, NULL) ==
              MOSHPIT_CERT_OTHER_SWARM,
          "other swarm");
    memcpy(p2, peer, 32);
    p2[0] ^= 1;
    CHECK(mp__cert_check(c, MP_CERT_BYTES, auth_pub, swarm_hash, p2, NB,
                         NULL) == MOSHPIT_CERT_OTHER_KEY,
          "other key");
    CHECK(mp__cert_check(c, MP_CERT_BYTES, auth_pub, NULL, NULL, NB, NULL) ==
              MOSHPIT_CERT_VALID,
          "no swarm or key given");

    /* a forgery naming our authority: the id is copied, the signature is
     * the other authority's */
    uint8_t f[MP_CERT_BYTES];
    memcpy(f, o, sizeof(f));
    mp__cert_authority_id(auth_pub, f + 88);
    CHECK(check_at(f, NB) == MOSHPIT_CERT_FORGED, "copied authority id");
    /* the right authority's signature over the bytes without the label */
    memcpy(f, c, sizeof(f));
    CHECK(crypto_sign_detached(f + 96, NULL, f, 96, auth_sec) == 0, "sign");
    CHECK(check_at(f, NB) == MOSHPIT_CERT_FORGED, "no domain separation");
    /* ... and with another label */
    uint8_t msg[15 + 96];
    memcpy(msg, "moshpit-cert-v2", 15);
    memcpy(msg + 15, c, 96);
    CHECK(crypto_sign_detached(f + 96, NULL, msg, sizeof(msg), auth_sec) == 0,
          "sign");
    CHECK(check_at(f, NB) == MOSHPIT_CERT_FORGED, "other label");
    /* changed window, re-signed by nobody */
    memcpy(f, c, sizeof(f));
    f[80] ^= 0x10; /* not_after later */
    CHECK(check_at(f, NB) == MOSHPIT_CERT_FORGED, "extended window");

    /* every single bit flip is refused, with and without swarm/key given */
    int all_refused = 1, all_refused_loose = 1;
    for (size_t bit = 0; bit < MP_CERT_BYTES * 8; bit++) {
        memcpy(f, c, sizeof(f));
        f[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (check_at(f, NB + 1) == MOSHPIT_CERT_VALID)
            all_refused = 0;
        if (mp__cert_check(f, MP_CERT_BYTES, auth_pub, NULL, NULL, NB + 1,
                           NULL) == MOSHPIT_CERT_VALID) {
            all_refused_loose = 0;
            fprintf(stderr, "bit %zu flipped is accepted\n", bit);
        }
    }
    CHECK(all_refused, "a bit flip was accepted");
    CHECK(all_refused_loose, "a bit flip was accepted without swarm/key");

    /* the zero authority key and a small-order one are not authorities */
    uint8_t zero[32] = {0}, ident[32] = {1};
    CHECK(!mp__cert_authority_key_ok(zero) && !mp__cert_authority_key_ok(ident),
          "degenerate authority keys accepted");
    CHECK(mp__cert_authority_key_ok(auth_pub), "real authority key refused");
    CHECK(mp__cert_check(c, MP_CERT_BYTES, zero, NULL, NULL, NB, NULL) !=
              MOSHPIT_CERT_VALID,
          "zero authority");

    /* signing refuses what decoding would refuse */
    uint8_t bad_sec[64], zpeer[32] = {0};
    memcpy(bad_sec, auth_sec, 64);
    bad_sec[40] ^= 1;
    CHECK(mp__cert_sign(bad_sec, peer, swarm_hash, NB, NA, f) == MOSHPIT_EINVAL,
          "secret with a foreign public half");
    CHECK(mp__cert_sign(auth_sec, zpeer, swarm_hash, NB, NA, f) ==
              MOSHPIT_EINVAL,
          "zero peer");
    CHECK(mp__cert_sign(auth_sec, peer, swarm_hash, NA, NB, f) ==
              MOSHPIT_EINVAL,
          "times out of order");
    CHECK(mp__cert_sign(auth_sec, peer, swarm_hash, NB, MP_CERT_TIME_MAX + 1,
                        f) == MOSHPIT_EINVAL,
          "time too large");

    /* statuses have distinct names */
    for (int i = 0; i <= (int)MOSHPIT_CERT_FORGED; i++)
        for (int j = 0; j < i; j++)
            CHECK(strcmp(moshpit_cert_strstatus((moshpit_cert_status_t)i),
                         moshpit_cert_strstatus((moshpit_cert_status_t)j)) != 0,
                  "statuses %d and %d share a name", i, j);
    CHECK(moshpit_cert_strstatus((moshpit_cert_status_t)99) != NULL,
          "unknown status");
}

/* ---------------------------------------------------------------------- */
/* public API                                                             */

static void test_api(void) {
    uint8_t pub[32], sec[64], sec2[64], ppub[32], psec[32];
    char txt[MOSHPIT_AUTHORITY_SECRET_TEXT_LEN + 1], ktxt[41];
    uint8_t c[MOSHPIT_CERT_BYTES];
    moshpit_cert_info_t info;

    CHECK(moshpit_cert_bytes() == MOSHPIT_CERT_BYTES, "cert_bytes");
    CHECK(moshpit_authority_keypair(NULL, sec) == MOSHPIT_EINVAL, "NULL pub");
    CHECK(moshpit_authority_keypair(pub, NULL) == MOSHPIT_EINVAL, "NULL sec");
    CHECK(moshpit_authority_keypair(pub, sec) == MOSHPIT_OK, "authority");
    CHECK(memcmp(pub, sec + 32, 32) == 0, "public half of the secret");
    CHECK(mp__cert_authority_key_ok(pub), "new authority key usable");

    /* secret text */
    CHECK(moshpit_authority_secret_to_text(sec, txt) == MOSHPIT_OK &&
              strlen(txt) == MOSHPIT_AUTHORITY_SECRET_TEXT_LEN,
          "secret to text");
    CHECK(moshpit_authority_secret_from_text(txt, sec2) == MOSHPIT_OK &&
              memcmp(sec, sec2, 64) == 0,
          "secret text round trip");
    char bad[100];
    memcpy(bad, txt, sizeof(txt));
    bad[79] = '\0';
    CHECK(moshpit_authority_secret_from_text(bad, sec2) == MOSHPIT_EINVAL,
          "79 characters");
    snprintf(bad, sizeof(bad), "%sa", txt);
    CHECK(moshpit_authority_secret_from_text(bad, sec2) == MOSHPIT_EINVAL,
          "81 characters");
    memcpy(bad, txt, sizeof(txt));
    bad[3] = '"';
    CHECK(moshpit_authority_secret_from_text(bad, sec2) == MOSHPIT_EINVAL,
          "character outside Z85");
    /* a secret whose public half is another key's */
    uint8_t mixed[64];
    memcpy(mixed, sec, 32);
    memcpy(mixed + 32, auth_pub, 32);
    char mtxt[81];
    CHECK(moshpit_authority_secret_to_text(mixed, mtxt) == MOSHPIT_OK, "text");
    memset(sec2, 0x77, sizeof(sec2));
    CHECK(moshpit_authority_secret_from_text(mtxt, sec2) == MOSHPIT_EINVAL &&
              sec2[0] == 0x77,
          "mismatched halves accepted or output touched");
    CHECK(moshpit_authority_secret_from_text(NULL, sec2) == MOSHPIT_EINVAL &&
              moshpit_authority_secret_from_text(txt, NULL) == MOSHPIT_EINVAL &&
              moshpit_authority_secret_to_text(NULL, txt) == MOSHPIT_EINVAL &&
              moshpit_authority_secret_to_text(sec, NULL) == MOSHPIT_EINVAL,
          "NULL arguments");

    /* issue */
    CHECK(moshpit_keypair(ppub, psec) == MOSHPIT_OK, "peer keypair");
    uint64_t now = mp_plat_wallclock_s();
    CHECK(now > NB, "wall clock %llu", (unsigned long long)now);
    uint64_t until = now + 86400;
    CHECK(moshpit_cert_issue(sec, ppub, "run-1", until, c) == MOSHPIT_OK,
          "issue");
    CHECK(moshpit_cert_inspect(c, pub, "run-1", ppub, &info) == MOSHPIT_OK &&
              info.status == MOSHPIT_CERT_VALID && info.version == 1 &&
              info.not_after == until && info.not_before <= now + 1 &&
              info.not_before >= now && memcmp(info.peer_key, ppub, 32) == 0,
          "inspect a fresh certificate");
    uint8_t h[32];
    mp__crypto_swarm_hash("run-1", h);
    CHECK(memcmp(info.swarm_hash, h, 32) == 0, "swarm hash in info");
    CHECK(moshpit_cert_inspect(c, pub, NULL, NULL, &info) == MOSHPIT_OK,
          "inspect without swarm and key");
    CHECK(moshpit_cert_inspect(c, pub, "run-2", NULL, &info) ==
                  MOSHPIT_EPEERAUTH &&
              info.status == MOSHPIT_CERT_OTHER_SWARM &&
              info.not_after == until,
          "inspect: other swarm");
    CHECK(moshpit_cert_inspect(c, pub, NULL, auth_pub, &info) ==
                  MOSHPIT_EPEERAUTH &&
              info.status == MOSHPIT_CERT_OTHER_KEY,
          "inspect: other key");
    CHECK(moshpit_cert_inspect(c, auth_pub, NULL, NULL, &info) ==
                  MOSHPIT_EPEERAUTH &&
              info.status == MOSHPIT_CERT_FOREIGN,
          "inspect: foreign");
    c[150] ^= 4;
    CHECK(moshpit_cert_inspect(c, pub, NULL, NULL, &info) ==
                  MOSHPIT_EPEERAUTH &&
              info.status == MOSHPIT_CERT_FORGED,
          "inspect: forged");
    c[150] ^= 4;
    c[0] = 9;
    CHECK(moshpit_cert_inspect(c, pub, NULL, NULL, &info) == MOSHPIT_EPROTO &&
              info.status == MOSHPIT_CERT_MALFORMED && info.not_after == 0,
          "inspect: malformed");
    c[0] = 1;
    uint8_t zero[32] = {0};
    char longname[300];
    memset(longname, 'n', 256);
    longname[256] = '\0';
    CHECK(
        moshpit_cert_inspect(NULL, pub, NULL, NULL, &info) == MOSHPIT_EINVAL &&
            moshpit_cert_inspect(c, NULL, NULL, NULL, &info) ==
                MOSHPIT_EINVAL &&
            moshpit_cert_inspect(c, pub, NULL, NULL, NULL) == MOSHPIT_EINVAL &&
            moshpit_cert_inspect(c, zero, NULL, NULL, &info) ==
                MOSHPIT_EINVAL &&
            moshpit_cert_inspect(c, pub, "", NULL, &info) == MOSHPIT_EINVAL &&
            moshpit_cert_inspect(c, pub, longname, NULL, &info) ==
                MOSHPIT_EINVAL,
        "inspect argument checks");

    /* issue: argument checks */
    uint8_t keep[MOSHPIT_CERT_BYTES];
    memcpy(keep, c, sizeof(c));
    CHECK(
        moshpit_cert_issue(NULL, ppub, "s", until, c) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, NULL, "s", until, c) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, ppub, NULL, until, c) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, ppub, "s", until, NULL) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, ppub, "", until, c) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, ppub, longname, until, c) ==
                MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, zero, "s", until, c) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, ppub, "s", now - 1, c) == MOSHPIT_EINVAL &&
            moshpit_cert_issue(sec, ppub, "s", MP_CERT_TIME_MAX + 1, c) ==
                MOSHPIT_EINVAL &&
            moshpit_cert_issue(mixed, ppub, "s", until, c) == MOSHPIT_EINVAL,
        "issue argument checks");
    CHECK(memcmp(keep, c, sizeof(c)) == 0, "refused issue wrote output");
    longname[255] = '\0';
    CHECK(moshpit_cert_issue(sec, ppub, longname, MP_CERT_TIME_MAX, c) ==
                  MOSHPIT_OK &&
              moshpit_cert_inspect(c, pub, longname, ppub, &info) == MOSHPIT_OK,
          "255-character swarm, valid until 9999");

    /* certificate text */
    char ct[MOSHPIT_CERT_TEXT_LEN + 1], cbad[MOSHPIT_CERT_TEXT_LEN + 8];
    uint8_t back[MOSHPIT_CERT_BYTES];
    CHECK(moshpit_cert_to_text(c, ct) == MOSHPIT_OK &&
              moshpit_cert_from_text(ct, back) == MOSHPIT_OK &&
              memcmp(back, c, sizeof(c)) == 0,
          "certificate text round trip");
    memcpy(cbad, ct, sizeof(ct));
    cbad[199] = '\0';
    CHECK(moshpit_cert_from_text(cbad, back) == MOSHPIT_EINVAL, "199 chars");
    snprintf(cbad, sizeof(cbad), "%s0", ct);
    CHECK(moshpit_cert_from_text(cbad, back) == MOSHPIT_EINVAL, "201 chars");
    memcpy(cbad, ct, sizeof(ct));
    memcpy(cbad + 100, "%%%%%", 5); /* 85^5 - 1 > 2^32 - 1 */
    CHECK(moshpit_cert_from_text(cbad, back) == MOSHPIT_EINVAL,
          "overflowing group");
    memcpy(cbad, ct, sizeof(ct));
    cbad[0] = ' ';
    CHECK(moshpit_cert_from_text(cbad, back) == MOSHPIT_EINVAL, "space");
    CHECK(moshpit_cert_from_text(NULL, back) == MOSHPIT_EINVAL &&
              moshpit_cert_from_text(ct, NULL) == MOSHPIT_EINVAL &&
              moshpit_cert_to_text(NULL, ct) == MOSHPIT_EINVAL &&
              moshpit_cert_to_text(c, NULL) == MOSHPIT_EINVAL,
          "text NULL arguments");

    /* the key text still behaves as before */
    CHECK(moshpit_key_to_text(ppub, ktxt) == MOSHPIT_OK && strlen(ktxt) == 40,
          "key to text");
    mp__crypto_wipe(sec, sizeof(sec));
    mp__crypto_wipe(psec, sizeof(psec));
}

/* ---------------------------------------------------------------------- */
/* Z85                                                                    */

static void test_z85(void) {
    /* ZeroMQ RFC 32's example */
    static const uint8_t hello[8] = {0x86, 0x4f, 0xd2, 0x6f,
                                     0xb5, 0x59, 0xf7, 0x5b};
    char out[256];
    uint8_t b[200];
    CHECK(mp__z85_encode(hello, 8, out) == 0 && strcmp(out, "HelloWorld") == 0,
          "RFC 32 example: %s", out);
    CHECK(mp__z85_decode("HelloWorld", 10, b) == 0 && memcmp(b, hello, 8) == 0,
          "RFC 32 example decodes");
    CHECK(mp__z85_encode(hello, 7, out) == -1, "length 7");
    CHECK(mp__z85_encode(hello, 0, out) == 0 && out[0] == '\0', "empty");
    memset(b, 0x5a, sizeof(b));
    CHECK(mp__z85_decode("HelloWorl", 9, b) == -1 && b[0] == 0x5a,
          "9 characters");
    CHECK(mp__z85_decode("Hello\0orld", 10, b) == -1 && b[0] == 0x5a, "NUL");
    CHECK(mp__z85_decode("HelloWorl~", 10, b) == -1 && b[0] == 0x5a,
          "tilde; the first group must stay unwritten");
    CHECK(mp__z85_decode("%nSc0", 5, b) == 0 && b[0] == 0xff && b[3] == 0xff,
          "2^32 - 1");
    CHECK(mp__z85_decode("%nSc1", 5, b) == -1, "2^32");
    /* the same text as ZeroMQ for random keys, and strict decoding of
     * every 1-character change */
    uint64_t s = 99;
    for (int k = 0; k < 200; k++) {
        uint8_t key[32], back[32];
        test_random_bytes(&s, key, 32);
        char zt[41], mt[41];
        CHECK(mp__net_z85_encode(zt, key) == 0 &&
                  mp__z85_encode(key, 32, mt) == 0 && strcmp(zt, mt) == 0,
              "differs from ZeroMQ");
        CHECK(mp__z85_decode(mt, 40, back) == 0 && memcmp(back, key, 32) == 0,
              "round trip");
    }
}

int main(void) {
    if (sodium_init() < 0)
        return 1;
    setup();
    test_golden();
    test_malformed();
    test_statuses();
    test_api();
    test_z85();
    return test_summary("test_cert");
}
