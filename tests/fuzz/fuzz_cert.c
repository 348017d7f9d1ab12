/* SPDX-License-Identifier: MIT */
/*
 * fuzz_cert.c - fuzz target for the certificate decoder and checks
 * (src/crypto/cert.c) and the text decoders of keys, authority secrets and
 * certificates (src/api/keys.c, src/wire/z85.c). Every input is tried as a
 * binary certificate and as text. Invariants:
 *   - a certificate that decodes is exactly 160 bytes and re-encodes to the
 *     input; one that does not leaves the output zeroed, with EPROTO;
 *   - the check against the golden authority, swarm and peer (the ones of
 *     tests/vectors/cert_v1.hex) at a fixed time accepts exactly one input:
 *     the golden certificate itself. Anything else accepted is a forgery;
 *     MALFORMED exactly when the decoder refuses;
 *   - text that decodes (as key, secret or certificate) is the canonical
 *     text: encoding the result gives the input back; an authority secret
 *     from text has matching halves.
 * Built with -DMP_FUZZ_LIBFUZZER it is a libFuzzer target that aborts on a
 * violation; otherwise a replay main() runs every file of a corpus
 * directory (argv[1], or MP_FUZZ_CORPUS_DIR) through the same checks.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "base/z85.h"

#define FUZZ_NAME "fuzz_cert"
#include "fuzz_replay.h"

#define GOLDEN_NOW 1750000000ull

static int ready;
static uint8_t auth_pub[32], auth_sec[64], peer[32], swarm_hash[32];
static uint8_t golden[MP_CERT_BYTES];

static void setup(void) {
    uint8_t seed[32];
    if (ready)
        return;
    if (sodium_init() < 0)
        abort();
    for (int i = 0; i < 32; i++) {
        seed[i] = (uint8_t)(i + 1);
        peer[i] = (uint8_t)(0x40 + i);
    }
    if (crypto_sign_seed_keypair(auth_pub, auth_sec, seed) != 0)
        abort();
    mp__crypto_swarm_hash("golden-swarm", swarm_hash);
    if (mp__cert_sign(auth_sec, peer, swarm_hash, 1700000000ull, 1800000000ull,
                      golden) != MOSHPIT_OK)
        abort();
    ready = 1;
}

static int all_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

/* 1 if data decodes as a certificate. */
static int check_binary(const uint8_t *data, size_t size) {
    mp_cert_t c, c2;
    uint8_t out[MP_CERT_BYTES];
    moshpit_err_t e = mp__cert_decode(data, size, &c);
    if (e != MOSHPIT_OK) {
        if (e != MOSHPIT_EPROTO)
            fail("decode: unexpected error code");
        if (!all_zero(&c, sizeof c))
            fail("decode: failed decode left data behind");
    } else {
        if (size != MP_CERT_BYTES)
            fail("decode: accepted another length");
        mp__cert_encode(&c, out);
        if (memcmp(out, data, MP_CERT_BYTES) != 0)
            fail("decode: re-encoding differs from the input");
        if (mp__cert_decode(out, sizeof out, &c2) != MOSHPIT_OK ||
            memcmp(&c, &c2, sizeof c) != 0)
            fail("decode: second decode differs");
        if (c.not_before > c.not_after || c.not_after > MP_CERT_TIME_MAX ||
            all_zero(c.peer, 32))
            fail("decode: accepted bad fields");
    }

    moshpit_cert_status_t s = mp__cert_check(data, size, auth_pub, swarm_hash,
                                             peer, GOLDEN_NOW, NULL);
    if ((s == MOSHPIT_CERT_MALFORMED) != (e != MOSHPIT_OK))
        fail("check: MALFORMED does not match the decoder");
    if (s > MOSHPIT_CERT_FORGED || s == MOSHPIT_CERT_MISSING)
        fail("check: unexpected status");
    if (s == MOSHPIT_CERT_VALID &&
        (size != MP_CERT_BYTES || memcmp(data, golden, MP_CERT_BYTES) != 0))
        fail("check: accepted a certificate the authority never signed");
    /* the same without swarm and identity: still only signed ones */
    s = mp__cert_check(data, size, auth_pub, NULL, NULL, GOLDEN_NOW, NULL);
    if (s == MOSHPIT_CERT_VALID &&
        (size != MP_CERT_BYTES || memcmp(data, golden, MP_CERT_BYTES) != 0))
        fail("check: accepted an unsigned certificate (loose check)");
    return e == MOSHPIT_OK;
}

/* 1 if text (NUL-terminated) decodes as a key, a secret or a
 * certificate; each must give back the same text. */
static int check_text(const char *text) {
    int ok = 0;
    uint8_t key[32], sec[64], cert[MP_CERT_BYTES];
    char back[MOSHPIT_CERT_TEXT_LEN + 1];
    if (moshpit_key_from_text(text, key) == MOSHPIT_OK) {
        ok = 1;
        if (moshpit_key_to_text(key, back) != MOSHPIT_OK ||
            strcmp(back, text) != 0)
            fail("key text is not canonical");
    }
    if (moshpit_authority_secret_from_text(text, sec) == MOSHPIT_OK) {
        ok = 1;
        if (moshpit_authority_secret_to_text(sec, back) != MOSHPIT_OK ||
            strcmp(back, text) != 0)
            fail("secret text is not canonical");
        if (!mp__cert_authority_secret_ok(sec))
            fail("secret text accepted with mismatched halves");
    }
    if (moshpit_cert_from_text(text, cert) == MOSHPIT_OK) {
        ok = 1;
        if (moshpit_cert_to_text(cert, back) != MOSHPIT_OK ||
            strcmp(back, text) != 0)
            fail("certificate text is not canonical");
        moshpit_cert_info_t info;
        moshpit_err_t e =
            moshpit_cert_inspect(cert, auth_pub, NULL, NULL, &info);
        if (e == MOSHPIT_OK && memcmp(cert, golden, sizeof cert) != 0)
            fail("inspect: accepted a certificate never signed");
    }
    return ok;
}

/* The raw Z85 codec on the input bytes as they are. */
static void check_z85(const uint8_t *data, size_t size) {
    static uint8_t out[4096];
    static char back[5200];
    if (size > 5000)
        return;
    size_t n = size / 5 * 4;
    int rc = mp__z85_decode((const char *)data, size, out);
    if (rc == 0) {
        if (size % 5 != 0)
            fail("z85: accepted a length that is not a multiple of 5");
        if (mp__z85_encode(out, n, back) != 0 || strlen(back) != size ||
            memcmp(back, data, size) != 0)
            fail("z85: decoded text is not canonical");
    }
}

/* Bit 0: decoded as a binary certificate; bit 1: as text. */
static int run_one(const uint8_t *data, size_t size) {
    setup();
    int r = check_binary(data, size);
    check_z85(data, size);
    char *text = malloc(size + 1);
    if (text == NULL)
        return r;
    memcpy(text, data, size);
    text[size] = '\0';
    r |= check_text(text) << 1;
    free(text);
    return r;
}

#ifndef MP_FUZZ_LIBFUZZER

#ifndef MP_FUZZ_CORPUS_DIR
#define MP_FUZZ_CORPUS_DIR "tests/fuzz/corpus/cert"
#endif

int main(int argc, char **argv) {
    int runs;
    int bad = fuzz_replay_dir(argc > 1 ? argv[1] : MP_FUZZ_CORPUS_DIR, &runs);
    if (bad < 0)
        return 1;
    /* the golden certificate itself must be accepted by the check */
    failed = 0;
    setup();
    if (mp__cert_check(golden, sizeof golden, auth_pub, swarm_hash, peer,
                       GOLDEN_NOW, NULL) != MOSHPIT_CERT_VALID) {
        fprintf(stderr, "fuzz_cert: the golden certificate is refused\n");
        bad++;
    }
    printf("fuzz_cert: %d inputs, %d failed\n", runs, bad);
    return bad != 0;
}

#endif
