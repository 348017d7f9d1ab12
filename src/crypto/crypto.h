/* SPDX-License-Identifier: MIT */
/*
 * crypto.h - identities (X25519 key pairs), random numbers, secure memory,
 * the swarm and state hashes and admission proofs. With session.h (session
 * keys and the data-plane AEAD) and cert.h, the only code besides CURVE
 * setup in net/ that uses libsodium.
 *
 * Secret keys live in memory from mp__crypto_secure_alloc, wiped on free.
 * Every function is thread-safe once mp__crypto_init returned.
 */
#ifndef MP_CRYPTO_H
#define MP_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

/* Initializes libsodium; idempotent and thread-safe. */
moshpit_err_t mp__crypto_init(void);

moshpit_err_t mp__crypto_keypair(uint8_t pub[32], uint8_t sec[32]);
/* pub = X25519 base point * sec. */
moshpit_err_t mp__crypto_public_from_secret(const uint8_t sec[32],
                                            uint8_t pub[32]);
void mp__crypto_random(void *buf, size_t len);
uint64_t mp__crypto_random_u64(void);
int mp__crypto_is_zero(const uint8_t *p, size_t len);
void mp__crypto_wipe(void *p, size_t len);
void *mp__crypto_secure_alloc(size_t len); /* sodium_malloc; NULL on OOM */
void mp__crypto_secure_free(void *p);      /* NULL ok; wipes */

/* BLAKE2b-256("moshpit-swarm-v1" || name). */
void mp__crypto_swarm_hash(const char *name, uint8_t out[32]);
/* BLAKE2b-256("moshpit-host-v1" || m): the host id of src/net/shm.h. */
void mp__crypto_host_hash(const uint8_t *m, size_t len, uint8_t out[32]);
/* BLAKE2b-256 of a served state: label, count (u64 LE), the float bytes. */
void mp__crypto_state_digest(const float *v, size_t count, uint8_t out[32]);

/* Admission proof: keyed BLAKE2b-256 with the swarm secret over
 * "moshpit-admit-v1" || swarm_hash || from_pub || to_pub || from_eph. */
void mp__crypto_admit_proof(const uint8_t secret[32],
                            const uint8_t swarm_hash[32],
                            const uint8_t from_pub[32],
                            const uint8_t to_pub[32],
                            const uint8_t from_eph[32], uint8_t out[32]);
/* Constant-time comparison; 1 if equal. */
int mp__crypto_equal32(const uint8_t a[32], const uint8_t b[32]);

#endif
