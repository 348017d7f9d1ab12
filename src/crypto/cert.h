/* SPDX-License-Identifier: MIT */
/*
 * cert.h - swarm certificates: a fixed-size binary record in which a swarm
 * authority (Ed25519) names a peer's identity (its CURVE public key) for
 * one swarm and a validity window. Format (docs/PROTOCOL.md, all integers
 * little-endian):
 *
 *    0  u8      version (1)
 *    1  u8[7]   reserved, zero
 *    8  u8[32]  peer identity (CURVE/X25519 public key), not all zero
 *   40  u8[32]  swarm hash, BLAKE2b-256("moshpit-swarm-v1" || name)
 *   72  u64     not_before, Unix seconds
 *   80  u64     not_after, Unix seconds (not_before <= not_after <=
 *               MP_CERT_TIME_MAX)
 *   88  u8[8]   authority id: BLAKE2b-256("moshpit-authority-v1" ||
 *               authority public key), first 8 bytes
 *   96  u8[64]  Ed25519 signature of the authority over
 *               "moshpit-cert-v1" || bytes 0..95
 *
 * mp__cert_decode is a pure function with hard checks and no allocation.
 * mp__cert_check adds the authority, swarm, identity, time and signature
 * checks; it takes the current time as an argument, so it stays pure too
 * (callers read the wall clock through platform/). Thread-safe.
 */
#ifndef MP_CRYPTO_CERT_H
#define MP_CRYPTO_CERT_H

#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

#define MP_CERT_BYTES MOSHPIT_CERT_BYTES
#define MP_CERT_VERSION 1u
#define MP_CERT_SIGNED_BYTES 96u /* bytes 0..95 are signed */
#define MP_CERT_AUTH_ID_BYTES 8u
/* 9999-12-31T23:59:59Z: the largest time a certificate may carry. */
#define MP_CERT_TIME_MAX 253402300799ull

typedef struct mp_cert {
    uint8_t version;
    uint8_t peer[32];
    uint8_t swarm[32];
    uint64_t not_before, not_after;
    uint8_t authority_id[MP_CERT_AUTH_ID_BYTES];
    uint8_t sig[64];
} mp_cert_t;

/* Decodes buf[0..len). Errors: EPROTO (len is not MP_CERT_BYTES, another
 * version, nonzero reserved bytes, a zero peer key, times out of order or
 * past MP_CERT_TIME_MAX), EINVAL (NULL out, or NULL buf with len > 0). On
 * error *out is zeroed. */
moshpit_err_t mp__cert_decode(const uint8_t *buf, size_t len, mp_cert_t *out);

/* Encodes c (no checks) into out. */
void mp__cert_encode(const mp_cert_t *c, uint8_t out[MP_CERT_BYTES]);

/* The authority id of an authority public key. */
void mp__cert_authority_id(const uint8_t authority_pub[32],
                           uint8_t id[MP_CERT_AUTH_ID_BYTES]);

/* Signs a certificate for peer in the swarm with hash swarm_hash, valid
 * from not_before to not_after. Errors: EINVAL (zero peer key, times out of
 * order or too large, the secret's public half not matching its seed),
 * ECRYPTO. */
moshpit_err_t mp__cert_sign(const uint8_t authority_sec[64],
                            const uint8_t peer[32],
                            const uint8_t swarm_hash[32], uint64_t not_before,
                            uint64_t not_after, uint8_t out[MP_CERT_BYTES]);

/* Checks a presented certificate buf[0..len) against the authority public
 * key, and, if not NULL, the swarm hash and the peer identity, at time now
 * (Unix seconds) with MOSHPIT_CERT_SKEW_S either side. Cheap checks come
 * first, the signature last, so garbage costs no signature verification.
 * out (may be NULL) receives the decoded fields when it decodes. */
moshpit_cert_status_t mp__cert_check(const uint8_t *buf, size_t len,
                                     const uint8_t authority_pub[32],
                                     const uint8_t *swarm_hash,
                                     const uint8_t *peer, uint64_t now,
                                     mp_cert_t *out);

/* 1 if key is a usable Ed25519 public key (a point of the main subgroup,
 * not of small order). */
int mp__cert_authority_key_ok(const uint8_t key[32]);

/* Derives an authority keypair's public key from sec's seed half and
 * checks it equals sec's public half; 1 if it does. */
int mp__cert_authority_secret_ok(const uint8_t sec[64]);

/* New authority keypair. Errors: ECRYPTO. */
moshpit_err_t mp__cert_authority_keypair(uint8_t pub[32], uint8_t sec[64]);

/* Text of a status; never NULL. */
const char *mp__cert_status_text(moshpit_cert_status_t s);

#endif
