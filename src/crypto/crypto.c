/* SPDX-License-Identifier: MIT */
/*
 * crypto.c - libsodium-backed identities, admission proofs, session key
 * derivation and the AEAD used for data-plane frames (see crypto.h).
 */
#include "crypto.h"

#include <sodium.h>
#include <string.h>

struct mp_session_keys {
    uint32_t cipher;
    crypto_aead_aes256gcm_state tx_aes; /* precomputed AES key schedule */
    crypto_aead_aes256gcm_state rx_aes;
    uint8_t tx[32];
    uint8_t rx[32];
};

moshpit_err_t mp__crypto_init(void) {
    return sodium_init() < 0 ? MOSHPIT_ECRYPTO : MOSHPIT_OK;
}

uint32_t mp__crypto_ciphers(void) {
    uint32_t c = MP_CIPHER_CHACHA;
    if (crypto_aead_aes256gcm_is_available())
        c |= MP_CIPHER_AESGCM;
    return c;
}

uint32_t mp__crypto_pick_cipher(uint32_t mine, uint32_t theirs) {
    uint32_t both = mine & theirs;
    if (both & MP_CIPHER_AESGCM)
        return MP_CIPHER_AESGCM;
    if (both & MP_CIPHER_CHACHA)
        return MP_CIPHER_CHACHA;
    return 0;
}

moshpit_err_t mp__crypto_keypair(uint8_t pub[32], uint8_t sec[32]) {
    if (mp__crypto_init() != MOSHPIT_OK)
        return MOSHPIT_ECRYPTO;
    return crypto_box_keypair(pub, sec) == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}

moshpit_err_t mp__crypto_public_from_secret(const uint8_t sec[32],
                                            uint8_t pub[32]) {
    return crypto_scalarmult_base(pub, sec) == 0 ? MOSHPIT_OK
                                                 : MOSHPIT_ECRYPTO;
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

void mp__crypto_swarm_hash(const char *name, uint8_t out[32]) {
    static const char label[] = "moshpit-swarm-v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, (const uint8_t *)name, strlen(name));
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

moshpit_err_t mp__session_keys_new(uint32_t cipher, const uint8_t my_id[32],
                                   const uint8_t my_eph_sec[32],
                                   const uint8_t my_eph_pub[32],
                                   const uint8_t their_id[32],
                                   const uint8_t their_eph_pub[32],
                                   mp_session_keys_t **out) {
    static const char label[] = "moshpit-data-v1";
    uint8_t shared[32], okm[64];
    *out = NULL;
    if (cipher != MP_CIPHER_AESGCM && cipher != MP_CIPHER_CHACHA)
        return MOSHPIT_ECRYPTO;
    if (crypto_scalarmult(shared, my_eph_sec, their_eph_pub) != 0)
        return MOSHPIT_ECRYPTO; /* low-order point */
    int me_low = memcmp(my_id, their_id, 32) < 0;
    const uint8_t *lo_id = me_low ? my_id : their_id;
    const uint8_t *hi_id = me_low ? their_id : my_id;
    const uint8_t *lo_eph = me_low ? my_eph_pub : their_eph_pub;
    const uint8_t *hi_eph = me_low ? their_eph_pub : my_eph_pub;
    crypto_generichash_state st;
    crypto_generichash_init(&st, shared, 32, 64);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, lo_id, 32);
    crypto_generichash_update(&st, hi_id, 32);
    crypto_generichash_update(&st, lo_eph, 32);
    crypto_generichash_update(&st, hi_eph, 32);
    crypto_generichash_final(&st, okm, 64);
    sodium_memzero(shared, sizeof(shared));
    sodium_memzero(&st, sizeof(st));

    mp_session_keys_t *k = sodium_malloc(sizeof(*k));
    if (k == NULL) {
        sodium_memzero(okm, sizeof(okm));
        return MOSHPIT_ENOMEM;
    }
    k->cipher = cipher;
    memcpy(k->tx, me_low ? okm : okm + 32, 32);
    memcpy(k->rx, me_low ? okm + 32 : okm, 32);
    sodium_memzero(okm, sizeof(okm));
    if (cipher == MP_CIPHER_AESGCM) {
        if (!crypto_aead_aes256gcm_is_available()) {
            sodium_free(k);
            return MOSHPIT_ECRYPTO;
        }
        crypto_aead_aes256gcm_beforenm(&k->tx_aes, k->tx);
        crypto_aead_aes256gcm_beforenm(&k->rx_aes, k->rx);
    }
    *out = k;
    return MOSHPIT_OK;
}

void mp__session_keys_free(mp_session_keys_t *k) {
    if (k != NULL)
        sodium_free(k);
}

static void make_nonce(uint64_t counter, uint8_t nonce[12]) {
    for (int i = 0; i < 8; i++)
        nonce[i] = (uint8_t)(counter >> (8 * i));
    nonce[8] = nonce[9] = nonce[10] = nonce[11] = 0;
}

moshpit_err_t mp__session_seal(const mp_session_keys_t *k, uint64_t counter,
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *m, size_t mlen, uint8_t *c,
                               uint8_t tag[16]) {
    uint8_t nonce[12];
    int rc;
    make_nonce(counter, nonce);
    if (k->cipher == MP_CIPHER_AESGCM)
        rc = crypto_aead_aes256gcm_encrypt_detached_afternm(
            c, tag, NULL, m, mlen, ad, adlen, NULL, nonce, &k->tx_aes);
    else
        rc = crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            c, tag, NULL, m, mlen, ad, adlen, NULL, nonce, k->tx);
    return rc == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}

moshpit_err_t mp__session_open(const mp_session_keys_t *k, uint64_t counter,
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *c, size_t clen,
                               const uint8_t tag[16], uint8_t *m) {
    uint8_t nonce[12];
    int rc;
    make_nonce(counter, nonce);
    if (k->cipher == MP_CIPHER_AESGCM)
        rc = crypto_aead_aes256gcm_decrypt_detached_afternm(
            m, NULL, c, clen, tag, ad, adlen, nonce, &k->rx_aes);
    else
        rc = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            m, NULL, c, clen, tag, ad, adlen, nonce, k->rx);
    return rc == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}
