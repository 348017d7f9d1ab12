/* SPDX-License-Identifier: MIT */
/*
 * keys.c - the public functions that work offline, without a peer:
 * identities and their text form, swarm authorities, and certificates
 * (issue, inspect, text form). None of them touches the network, a peer's
 * state or global state; all are thread-safe.
 */
#include <string.h>

#include "base/base.h"
#include "crypto/cert.h"
#include "crypto/crypto.h"
#include "platform.h"
#include "base/z85.h"

moshpit_err_t moshpit_keypair(uint8_t pub[32], uint8_t sec[32]) {
    if (pub == NULL || sec == NULL)
        return MOSHPIT_EINVAL;
    return mp__crypto_keypair(pub, sec);
}

/* Decodes exactly `len` * 5 / 4 characters of NUL-terminated text into out
 * (len bytes). */
static moshpit_err_t from_text(const char *text, uint8_t *out, size_t len) {
    size_t tlen = len / 4 * 5;
    if (text == NULL || out == NULL || strnlen(text, tlen + 1) != tlen)
        return MOSHPIT_EINVAL;
    return mp__z85_decode(text, tlen, out) == 0 ? MOSHPIT_OK : MOSHPIT_EINVAL;
}

moshpit_err_t moshpit_key_to_text(const uint8_t key[32], char out[41]) {
    if (key == NULL || out == NULL)
        return MOSHPIT_EINVAL;
    return mp__z85_encode(key, 32, out) == 0 ? MOSHPIT_OK : MOSHPIT_EINVAL;
}

moshpit_err_t moshpit_key_from_text(const char *text, uint8_t key[32]) {
    return from_text(text, key, 32);
}

size_t moshpit_cert_bytes(void) {
    return MOSHPIT_CERT_BYTES;
}

moshpit_err_t moshpit_authority_keypair(uint8_t pub[32], uint8_t sec[64]) {
    if (pub == NULL || sec == NULL)
        return MOSHPIT_EINVAL;
    return mp__cert_authority_keypair(pub, sec);
}

moshpit_err_t moshpit_authority_secret_to_text(const uint8_t sec[64],
                                               char out[81]) {
    if (sec == NULL || out == NULL)
        return MOSHPIT_EINVAL;
    return mp__z85_encode(sec, 64, out) == 0 ? MOSHPIT_OK : MOSHPIT_EINVAL;
}

moshpit_err_t moshpit_authority_secret_from_text(const char *text,
                                                 uint8_t sec[64]) {
    uint8_t tmp[64];
    if (sec == NULL)
        return MOSHPIT_EINVAL;
    moshpit_err_t e = from_text(text, tmp, sizeof(tmp));
    if (e == MOSHPIT_OK && !mp__cert_authority_secret_ok(tmp))
        e = MOSHPIT_EINVAL;
    if (e == MOSHPIT_OK)
        memcpy(sec, tmp, sizeof(tmp));
    mp__crypto_wipe(tmp, sizeof(tmp));
    return e;
}

static int swarm_name_ok(const char *swarm) {
    return swarm != NULL && swarm[0] != '\0' &&
           strnlen(swarm, MP_SWARM_NAME_MAX + 1) <= MP_SWARM_NAME_MAX;
}

moshpit_err_t moshpit_cert_issue(const uint8_t authority_sec[64],
                                 const uint8_t peer_pub[32], const char *swarm,
                                 uint64_t not_after_unix,
                                 uint8_t cert[MOSHPIT_CERT_BYTES]) {
    if (authority_sec == NULL || peer_pub == NULL || cert == NULL ||
        !swarm_name_ok(swarm))
        return MOSHPIT_EINVAL;
    if (mp__crypto_init() != MOSHPIT_OK)
        return MOSHPIT_ECRYPTO;
    uint64_t now = mp_plat_wallclock_s();
    if (now == 0)
        return MOSHPIT_ESYS;
    if (not_after_unix <= now || not_after_unix > MP_CERT_TIME_MAX)
        return MOSHPIT_EINVAL;
    uint8_t swarm_hash[32];
    mp__crypto_swarm_hash(swarm, swarm_hash);
    return mp__cert_sign(authority_sec, peer_pub, swarm_hash, now,
                         not_after_unix, cert);
}

moshpit_err_t moshpit_cert_inspect(const uint8_t cert[MOSHPIT_CERT_BYTES],
                                   const uint8_t authority_pub[32],
                                   const char *swarm,
                                   const uint8_t peer_pub[32],
                                   moshpit_cert_info_t *info) {
    if (info != NULL)
        memset(info, 0, sizeof(*info));
    if (cert == NULL || authority_pub == NULL || info == NULL ||
        mp__crypto_is_zero(authority_pub, 32) ||
        (swarm != NULL && !swarm_name_ok(swarm)))
        return MOSHPIT_EINVAL;
    if (mp__crypto_init() != MOSHPIT_OK)
        return MOSHPIT_ECRYPTO;
    uint8_t swarm_hash[32];
    if (swarm != NULL)
        mp__crypto_swarm_hash(swarm, swarm_hash);
    mp_cert_t c;
    moshpit_cert_status_t s = mp__cert_check(
        cert, MOSHPIT_CERT_BYTES, authority_pub, swarm ? swarm_hash : NULL,
        peer_pub, mp_plat_wallclock_s(), &c);
    info->status = s;
    if (s == MOSHPIT_CERT_MALFORMED)
        return MOSHPIT_EPROTO;
    info->version = c.version;
    memcpy(info->peer_key, c.peer, 32);
    memcpy(info->swarm_hash, c.swarm, 32);
    info->not_before = c.not_before;
    info->not_after = c.not_after;
    memcpy(info->authority_id, c.authority_id, sizeof(info->authority_id));
    return s == MOSHPIT_CERT_VALID ? MOSHPIT_OK : MOSHPIT_EPEERAUTH;
}

moshpit_err_t moshpit_cert_to_text(const uint8_t cert[MOSHPIT_CERT_BYTES],
                                   char out[201]) {
    if (cert == NULL || out == NULL)
        return MOSHPIT_EINVAL;
    return mp__z85_encode(cert, MOSHPIT_CERT_BYTES, out) == 0 ? MOSHPIT_OK
                                                              : MOSHPIT_EINVAL;
}

moshpit_err_t moshpit_cert_from_text(const char *text,
                                     uint8_t cert[MOSHPIT_CERT_BYTES]) {
    return from_text(text, cert, MOSHPIT_CERT_BYTES);
}

const char *moshpit_cert_strstatus(moshpit_cert_status_t s) {
    return mp__cert_status_text(s);
}
