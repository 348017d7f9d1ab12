/* SPDX-License-Identifier: MIT */
/*
 * crypto.c - libsodium-backed identities and their X25519 keys, random
 * numbers, secure memory, the swarm and state hashes and admission proofs
 * (see crypto.h). Session keys and the data-plane AEAD are in session.c.
 */
#include "crypto.h"

#include <sodium.h>
#include <string.h>

#include "base/base.h"

moshpit_err_t mp__crypto_init(void) {
    return sodium_init() < 0 ? MOSHPIT_ECRYPTO : MOSHPIT_OK;
}

moshpit_err_t mp__crypto_keypair(uint8_t pub[32], uint8_t sec[32]) {
    if (mp__crypto_init() != MOSHPIT_OK)
        return MOSHPIT_ECRYPTO;
    return crypto_box_keypair(pub, sec) == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}

moshpit_err_t mp__crypto_public_from_secret(const uint8_t sec[32],
                                            uint8_t pub[32]) {
    return crypto_scalarmult_base(pub, sec) == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}

void mp__crypto_random(void *buf, size_t len) {
    randombytes_buf(buf, len);
}

uint64_t mp__crypto_random_u64(void) {
    uint64_t v;
    randombytes_buf(&v, sizeof(v));
    return v;
}

int mp__crypto_is_zero(const uint8_t *p, size_t len) {
    return sodium_is_zero(p, len);
}

void mp__crypto_wipe(void *p, size_t len) {
    sodium_memzero(p, len);
}

void *mp__crypto_secure_alloc(size_t len) {
    return sodium_malloc(len);
}

void mp__crypto_secure_free(void *p) {
    sodium_free(p); /* wipes; NULL ok */
}

void mp__crypto_host_hash(const uint8_t *m, size_t len, uint8_t out[32]) {
    static const char label[] = "moshpit-host-v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, m, len);
    crypto_generichash_final(&st, out, 32);
}

void mp__crypto_swarm_hash(const char *name, uint8_t out[32]) {
    static const char label[] = "moshpit-swarm-v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, (const uint8_t *)name, strlen(name));
    crypto_generichash_final(&st, out, 32);
}

void mp__crypto_state_digest(const float *v, size_t count, uint8_t out[32]) {
    static const char label[] = "moshpit-state-v1";
    crypto_generichash_state st;
    uint8_t len[8];
    mp__store_le64(len, (uint64_t)count);
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, len, sizeof(len));
    /* in slices: crypto_generichash_update takes any length, but keep each
     * call well inside 32-bit sizes on every platform */
    const uint8_t *p = (const uint8_t *)v;
    size_t left = count * sizeof(float);
    while (left > 0) {
        size_t n = left < ((size_t)1 << 30) ? left : ((size_t)1 << 30);
        crypto_generichash_update(&st, p, n);
        p += n;
        left -= n;
    }
    crypto_generichash_final(&st, out, 32);
}

void mp__crypto_admit_proof(const uint8_t secret[32],
                            const uint8_t swarm_hash[32],
                            const uint8_t from_pub[32],
                            const uint8_t to_pub[32],
                            const uint8_t from_eph[32], uint8_t out[32]) {
    static const char label[] = "moshpit-admit-v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, secret, 32, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, swarm_hash, 32);
    crypto_generichash_update(&st, from_pub, 32);
    crypto_generichash_update(&st, to_pub, 32);
    crypto_generichash_update(&st, from_eph, 32);
    crypto_generichash_final(&st, out, 32);
    sodium_memzero(&st, sizeof(st));
}

int mp__crypto_equal32(const uint8_t a[32], const uint8_t b[32]) {
    return sodium_memcmp(a, b, 32) == 0;
}
