/* SPDX-License-Identifier: MIT */
/*
 * cert.c - swarm certificates (see cert.h): the fixed 160-byte format, its
 * strict decoder, signing with the authority's Ed25519 key, and the checks
 * a peer runs on a certificate presented in a HELLO or given to
 * moshpit_open. libsodium provides Ed25519 (crypto_sign) and BLAKE2b.
 */
#include "crypto/cert.h"

#include <sodium.h>
#include <string.h>

#include "base/base.h"

static const char sign_label[] = "moshpit-cert-v1";
static const char auth_label[] = "moshpit-authority-v1";

static int times_ok(uint64_t not_before, uint64_t not_after) {
    return not_before <= not_after && not_after <= MP_CERT_TIME_MAX;
}

void mp__cert_encode(const mp_cert_t *c, uint8_t out[MP_CERT_BYTES]) {
    memset(out, 0, MP_CERT_BYTES);
    out[0] = c->version;
    memcpy(out + 8, c->peer, 32);
    memcpy(out + 40, c->swarm, 32);
    mp__store_le64(out + 72, c->not_before);
    mp__store_le64(out + 80, c->not_after);
    memcpy(out + 88, c->authority_id, MP_CERT_AUTH_ID_BYTES);
    memcpy(out + 96, c->sig, 64);
}

moshpit_err_t mp__cert_decode(const uint8_t *buf, size_t len, mp_cert_t *out) {
    if (out == NULL || (buf == NULL && len > 0))
        return MOSHPIT_EINVAL;
    memset(out, 0, sizeof(*out));
    if (len != MP_CERT_BYTES || buf[0] != MP_CERT_VERSION ||
        !mp__all_zero(buf + 1, 7) || mp__all_zero(buf + 8, 32))
        return MOSHPIT_EPROTO;
    uint64_t nb = mp__load_le64(buf + 72), na = mp__load_le64(buf + 80);
    if (!times_ok(nb, na))
        return MOSHPIT_EPROTO;
    out->version = buf[0];
    memcpy(out->peer, buf + 8, 32);
    memcpy(out->swarm, buf + 40, 32);
    out->not_before = nb;
    out->not_after = na;
    memcpy(out->authority_id, buf + 88, MP_CERT_AUTH_ID_BYTES);
    memcpy(out->sig, buf + 96, 64);
    return MOSHPIT_OK;
}

void mp__cert_authority_id(const uint8_t authority_pub[32],
                           uint8_t id[MP_CERT_AUTH_ID_BYTES]) {
    uint8_t h[32];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof(h));
    crypto_generichash_update(&st, (const uint8_t *)auth_label,
                              sizeof(auth_label) - 1);
    crypto_generichash_update(&st, authority_pub, 32);
    crypto_generichash_final(&st, h, sizeof(h));
    memcpy(id, h, MP_CERT_AUTH_ID_BYTES);
}

/* The signed message: label || the first 96 bytes of the certificate. */
static void
signed_message(const uint8_t cert[MP_CERT_BYTES],
               uint8_t msg[sizeof(sign_label) - 1 + MP_CERT_SIGNED_BYTES]) {
    memcpy(msg, sign_label, sizeof(sign_label) - 1);
    memcpy(msg + sizeof(sign_label) - 1, cert, MP_CERT_SIGNED_BYTES);
}

int mp__cert_authority_key_ok(const uint8_t key[32]) {
    if (sodium_init() < 0)
        return 0;
    return crypto_core_ed25519_is_valid_point(key) == 1;
}

int mp__cert_authority_secret_ok(const uint8_t sec[64]) {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
    if (sodium_init() < 0)
        return 0;
    int ok = crypto_sign_seed_keypair(pk, sk, sec) == 0 &&
             sodium_memcmp(pk, sec + 32, 32) == 0;
    sodium_memzero(sk, sizeof(sk));
    return ok;
}

moshpit_err_t mp__cert_authority_keypair(uint8_t pub[32], uint8_t sec[64]) {
    if (sodium_init() < 0)
        return MOSHPIT_ECRYPTO;
    return crypto_sign_keypair(pub, sec) == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}

moshpit_err_t mp__cert_sign(const uint8_t authority_sec[64],
                            const uint8_t peer[32],
                            const uint8_t swarm_hash[32], uint64_t not_before,
                            uint64_t not_after, uint8_t out[MP_CERT_BYTES]) {
    if (mp__all_zero(peer, 32) || !times_ok(not_before, not_after) ||
        !mp__cert_authority_secret_ok(authority_sec))
        return MOSHPIT_EINVAL;
    mp_cert_t c;
    memset(&c, 0, sizeof(c));
    c.version = MP_CERT_VERSION;
    memcpy(c.peer, peer, 32);
    memcpy(c.swarm, swarm_hash, 32);
    c.not_before = not_before;
    c.not_after = not_after;
    mp__cert_authority_id(authority_sec + 32, c.authority_id);
    uint8_t buf[MP_CERT_BYTES];
    uint8_t msg[sizeof(sign_label) - 1 + MP_CERT_SIGNED_BYTES];
    mp__cert_encode(&c, buf);
    signed_message(buf, msg);
    if (crypto_sign_detached(buf + MP_CERT_SIGNED_BYTES, NULL, msg, sizeof(msg),
                             authority_sec) != 0)
        return MOSHPIT_ECRYPTO;
    memcpy(out, buf, MP_CERT_BYTES);
    return MOSHPIT_OK;
}

moshpit_cert_status_t mp__cert_check(const uint8_t *buf, size_t len,
                                     const uint8_t authority_pub[32],
                                     const uint8_t *swarm_hash,
                                     const uint8_t *peer, uint64_t now,
                                     mp_cert_t *out) {
    mp_cert_t c;
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (buf == NULL)
        return MOSHPIT_CERT_MISSING;
    if (mp__cert_decode(buf, len, &c) != MOSHPIT_OK)
        return MOSHPIT_CERT_MALFORMED;
    if (out != NULL)
        *out = c;
    uint8_t id[MP_CERT_AUTH_ID_BYTES];
    mp__cert_authority_id(authority_pub, id);
    if (memcmp(id, c.authority_id, sizeof(id)) != 0)
        return MOSHPIT_CERT_FOREIGN;
    if (swarm_hash != NULL && memcmp(swarm_hash, c.swarm, 32) != 0)
        return MOSHPIT_CERT_OTHER_SWARM;
    if (peer != NULL && memcmp(peer, c.peer, 32) != 0)
        return MOSHPIT_CERT_OTHER_KEY;
    /* times are at most MP_CERT_TIME_MAX (< 2^38): the sums cannot wrap
     * unless now itself is absurd, which saturates to "expired" */
    if (now <= UINT64_MAX - MOSHPIT_CERT_SKEW_S &&
        now + MOSHPIT_CERT_SKEW_S < c.not_before)
        return MOSHPIT_CERT_NOT_YET_VALID;
    if (now > c.not_after + MOSHPIT_CERT_SKEW_S)
        return MOSHPIT_CERT_EXPIRED;
    uint8_t msg[sizeof(sign_label) - 1 + MP_CERT_SIGNED_BYTES];
    signed_message(buf, msg);
    if (sodium_init() < 0 ||
        crypto_sign_verify_detached(buf + MP_CERT_SIGNED_BYTES, msg,
                                    sizeof(msg), authority_pub) != 0)
        return MOSHPIT_CERT_FORGED;
    return MOSHPIT_CERT_VALID;
}

const char *mp__cert_status_text(moshpit_cert_status_t s) {
    switch (s) {
    case MOSHPIT_CERT_VALID:
        return "valid";
    case MOSHPIT_CERT_MISSING:
        return "missing";
    case MOSHPIT_CERT_MALFORMED:
        return "malformed";
    case MOSHPIT_CERT_FOREIGN:
        return "foreign authority";
    case MOSHPIT_CERT_OTHER_SWARM:
        return "other swarm";
    case MOSHPIT_CERT_OTHER_KEY:
        return "other key";
    case MOSHPIT_CERT_NOT_YET_VALID:
        return "not yet valid";
    case MOSHPIT_CERT_EXPIRED:
        return "expired";
    case MOSHPIT_CERT_FORGED:
        return "forged signature";
    }
    return "unknown status";
}
