/* SPDX-License-Identifier: MIT */
/*
 * session.c - the data plane's cryptography (see session.h): which ciphers
 * this machine runs and which one two peers pick, session key derivation,
 * and sealing and opening frames. AEGIS-256 and AEGIS-256X2 are our own
 * code (aegis*.c); AES-256-GCM and ChaCha20-Poly1305 come from libsodium,
 * or with MOSHPIT_HAVE_OPENSSL from OpenSSL 3's libcrypto, which is about
 * twice as fast on 256 KiB frames; the wire format is identical, so peers
 * built either way interoperate.
 */
#include "crypto/session.h"

#include <limits.h>
#include <sodium.h>
#include <string.h>

#include "base/base.h"
#include "crypto/aegis.h"
#include "crypto/cpu.h"

#ifdef MOSHPIT_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/evp.h>
#endif

/* Chunk size of mp__session_open_scan for the EVP and libsodium paths: a
 * few calls per 256 KiB frame, and a chunk still fits the L1 cache. */
#define SCAN_CHUNK 16384u

struct mp_session_keys {
    uint32_t cipher;
#ifdef MOSHPIT_HAVE_OPENSSL
    /* Keyed once at creation; a frame only sets the IV. The pointers are
     * fixed for the session, so seal/open can use them through a const k. */
    EVP_CIPHER_CTX *tx_ctx;
    EVP_CIPHER_CTX *rx_ctx;
#else
    crypto_aead_aes256gcm_state tx_aes; /* precomputed AES key schedule */
    crypto_aead_aes256gcm_state rx_aes;
#endif
    uint8_t tx[32];
    uint8_t rx[32];
};

const char *mp__session_backend(void) {
#ifdef MOSHPIT_HAVE_OPENSSL
    return "openssl";
#else
    return "libsodium";
#endif
}

/* Whether this build runs AES-256-GCM in hardware on a CPU with features
 * cpu. libsodium 1.0.18 has it on x86-64 only (AES-NI and PCLMULQDQ);
 * OpenSSL also on ARM, where it uses the ARMv8 AES and PMULL instructions.
 * Without them both would be slow, and libsodium refuses. */
static bool gcm_runs(unsigned cpu) {
    if ((cpu & (MP_CPU_AES | MP_CPU_CLMUL)) != (MP_CPU_AES | MP_CPU_CLMUL))
        return false;
#if defined(MOSHPIT_HAVE_OPENSSL) && (defined(__aarch64__) || defined(__arm__))
    return true;
#else
    return crypto_aead_aes256gcm_is_available() != 0;
#endif
}

uint32_t mp__session_ciphers_for(unsigned cpu) {
    uint32_t c = MP_CIPHER_CHACHA;
    if (gcm_runs(cpu))
        c |= MP_CIPHER_AESGCM;
    if ((cpu & MP_CPU_AES) && mp__aegis256_available())
        c |= MP_CIPHER_AEGIS;
    if ((cpu & MP_CPU_VAES) && mp__aegis256x2_available())
        c |= MP_CIPHER_AEGISX2;
    return c;
}

uint32_t mp__session_ciphers(void) {
    return mp__session_ciphers_for(mp__cpu_features());
}

uint32_t mp__session_pick_cipher(uint32_t mine, uint32_t theirs) {
    uint32_t both = mine & theirs;
    if (both & MP_CIPHER_AEGISX2)
        return MP_CIPHER_AEGISX2;
    if (both & MP_CIPHER_AEGIS)
        return MP_CIPHER_AEGIS;
    if (both & MP_CIPHER_AESGCM)
        return MP_CIPHER_AESGCM;
    if (both & MP_CIPHER_CHACHA)
        return MP_CIPHER_CHACHA;
    return 0;
}

#ifdef MOSHPIT_HAVE_OPENSSL
/* A failed EVP call leaves entries in this thread's OpenSSL error queue;
 * drop them so they cannot confuse an embedding application that uses
 * OpenSSL on the same thread. */
static moshpit_err_t evp_fail(void) {
    ERR_clear_error();
    return MOSHPIT_ECRYPTO;
}

/* Creates a context for one direction (enc = 1: seal, 0: open) with the key
 * installed and a 12-byte IV length; the IV itself is set per frame. */
static moshpit_err_t evp_ctx_new(uint32_t cipher, const uint8_t key[32],
                                 int enc, EVP_CIPHER_CTX **out) {
    const EVP_CIPHER *alg = cipher == MP_CIPHER_AESGCM
                                ? EVP_aes_256_gcm()
                                : EVP_chacha20_poly1305();
    *out = NULL;
    if (alg == NULL)
        return evp_fail(); /* algorithm disabled in this libcrypto build */
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) {
        ERR_clear_error();
        return MOSHPIT_ENOMEM;
    }
    if (EVP_CipherInit_ex(ctx, alg, NULL, NULL, NULL, enc) <= 0 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, 12, NULL) <= 0 ||
        EVP_CIPHER_CTX_get_key_length(ctx) != 32 ||
        EVP_CIPHER_CTX_get_iv_length(ctx) != 12 ||
        EVP_CipherInit_ex(ctx, NULL, NULL, key, NULL, enc) <= 0) {
        EVP_CIPHER_CTX_free(ctx);
        return evp_fail();
    }
    *out = ctx;
    return MOSHPIT_OK;
}

static moshpit_err_t evp_seal(EVP_CIPHER_CTX *ctx, const uint8_t nonce[12],
                              const uint8_t *ad, size_t adlen, const uint8_t *m,
                              size_t mlen, uint8_t *c, uint8_t tag[16]) {
    uint8_t tail[16]; /* Final emits nothing for these stream modes */
    int outl = 0;
    if (mlen > INT_MAX || adlen > INT_MAX)
        return MOSHPIT_ECRYPTO;
    if (EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) <= 0)
        return evp_fail();
    if (adlen > 0 && EVP_EncryptUpdate(ctx, NULL, &outl, ad, (int)adlen) <= 0)
        return evp_fail();
    if (mlen > 0 && (EVP_EncryptUpdate(ctx, c, &outl, m, (int)mlen) <= 0 ||
                     outl != (int)mlen))
        return evp_fail();
    if (EVP_EncryptFinal_ex(ctx, tail, &outl) <= 0 || outl != 0 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) <= 0)
        return evp_fail();
    return MOSHPIT_OK;
}

/* Decrypts in chunks of SCAN_CHUNK bytes (calling scan on each) when scan
 * is not NULL, else in one call. */
static moshpit_err_t evp_open(EVP_CIPHER_CTX *ctx, const uint8_t nonce[12],
                              const uint8_t *ad, size_t adlen, const uint8_t *c,
                              size_t clen, const uint8_t tag[16], uint8_t *m,
                              mp_scan_fn scan, void *sctx) {
    uint8_t tail[16], t[16];
    int outl = 0;
    if (clen > INT_MAX || adlen > INT_MAX)
        return MOSHPIT_ECRYPTO;
    memcpy(t, tag, sizeof(t)); /* the ctrl takes a non-const pointer */
    if (EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, nonce) <= 0)
        return evp_fail();
    if (adlen > 0 && EVP_DecryptUpdate(ctx, NULL, &outl, ad, (int)adlen) <= 0)
        return evp_fail();
    size_t step = scan != NULL ? SCAN_CHUNK : clen;
    for (size_t done = 0; done < clen; done += step) {
        int n = (int)(clen - done < step ? clen - done : step);
        if (EVP_DecryptUpdate(ctx, m + done, &outl, c + done, n) <= 0 ||
            outl != n)
            goto fail;
        if (scan != NULL)
            scan(sctx, m + done, (size_t)n);
    }
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, t) <= 0 ||
        EVP_DecryptFinal_ex(ctx, tail, &outl) <= 0 || outl != 0)
        goto fail;
    return MOSHPIT_OK;
fail:
    /* OpenSSL decrypts before it verifies: do not leave forged plaintext. */
    if (clen > 0)
        sodium_memzero(m, clen);
    return evp_fail();
}
#endif

static bool known_cipher(uint32_t cipher) {
    return cipher == MP_CIPHER_AESGCM || cipher == MP_CIPHER_CHACHA ||
           cipher == MP_CIPHER_AEGIS || cipher == MP_CIPHER_AEGISX2;
}

/* Allocates a key object sending with tx and receiving with rx. */
static moshpit_err_t keys_make(uint32_t cipher, const uint8_t tx[32],
                               const uint8_t rx[32], mp_session_keys_t **out) {
    mp_session_keys_t *k = sodium_malloc(sizeof(*k));
    if (k == NULL)
        return MOSHPIT_ENOMEM;
    k->cipher = cipher;
    memcpy(k->tx, tx, 32);
    memcpy(k->rx, rx, 32);
    /* Both backends refuse AES-GCM without AES hardware: it is only ever
     * picked when both ends announced it (mp__session_ciphers). */
    if ((cipher == MP_CIPHER_AESGCM && !gcm_runs(mp__cpu_features())) ||
        (cipher == MP_CIPHER_AEGIS && !mp__aegis256_available()) ||
        (cipher == MP_CIPHER_AEGISX2 && !mp__aegis256x2_available())) {
        sodium_free(k);
        return MOSHPIT_ECRYPTO;
    }
    if (cipher == MP_CIPHER_AEGIS || cipher == MP_CIPHER_AEGISX2) {
        /* our own code, the same in both builds */
#ifdef MOSHPIT_HAVE_OPENSSL
        k->tx_ctx = NULL;
        k->rx_ctx = NULL;
#endif
        *out = k;
        return MOSHPIT_OK;
    }
#ifdef MOSHPIT_HAVE_OPENSSL
    k->tx_ctx = NULL;
    k->rx_ctx = NULL;
    moshpit_err_t e = evp_ctx_new(cipher, k->tx, 1, &k->tx_ctx);
    if (e == MOSHPIT_OK)
        e = evp_ctx_new(cipher, k->rx, 0, &k->rx_ctx);
    if (e != MOSHPIT_OK) {
        mp__session_keys_free(k);
        return e;
    }
#else
    if (cipher == MP_CIPHER_AESGCM) {
        crypto_aead_aes256gcm_beforenm(&k->tx_aes, k->tx);
        crypto_aead_aes256gcm_beforenm(&k->rx_aes, k->rx);
    }
#endif
    *out = k;
    return MOSHPIT_OK;
}

static void put_u32le(crypto_generichash_state *st, uint32_t v) {
    uint8_t b[4];
    mp__store_le32(b, v);
    crypto_generichash_update(st, b, sizeof(b));
}

moshpit_err_t mp__session_keys_new(const mp_session_hs_t *hs,
                                   mp_session_keys_t **out) {
    static const char label[] = "moshpit-data-v2";
    uint8_t shared[32], okm[64];
    *out = NULL;
    if (!known_cipher(hs->cipher))
        return MOSHPIT_ECRYPTO;
    if (crypto_scalarmult(shared, hs->my_eph_sec, hs->their_eph) != 0)
        return MOSHPIT_ECRYPTO; /* low-order point */
    int me_low = memcmp(hs->my_id, hs->their_id, 32) < 0;
    crypto_generichash_state st;
    crypto_generichash_init(&st, shared, 32, 64);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, me_low ? hs->my_id : hs->their_id, 32);
    crypto_generichash_update(&st, me_low ? hs->their_id : hs->my_id, 32);
    crypto_generichash_update(&st, me_low ? hs->my_eph : hs->their_eph, 32);
    crypto_generichash_update(&st, me_low ? hs->their_eph : hs->my_eph, 32);
    put_u32le(&st, hs->cipher);
    put_u32le(&st, me_low ? hs->my_ciphers : hs->their_ciphers);
    put_u32le(&st, me_low ? hs->their_ciphers : hs->my_ciphers);
    crypto_generichash_final(&st, okm, 64);
    sodium_memzero(shared, sizeof(shared));
    sodium_memzero(&st, sizeof(st));

    moshpit_err_t e = keys_make(hs->cipher, me_low ? okm : okm + 32,
                                me_low ? okm + 32 : okm, out);
    sodium_memzero(okm, sizeof(okm));
    return e;
}

static uint64_t key_id(const uint8_t key[32]) {
    static const char label[] = "moshpit-key-id-v1";
    uint8_t h[32];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof(h));
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, key, 32);
    crypto_generichash_final(&st, h, sizeof(h));
    return mp__load_le64(h);
}

void mp__session_keys_ids(const mp_session_keys_t *k, uint64_t *tx_id,
                          uint64_t *rx_id) {
    *tx_id = key_id(k->tx);
    *rx_id = key_id(k->rx);
}

void mp__session_shm_secret(const mp_session_keys_t *k, bool tx,
                            uint8_t out[16]) {
    static const uint8_t ctx[] = "moshpit-shm-name-v1";
    crypto_generichash(out, 16, ctx, sizeof(ctx) - 1, tx ? k->tx : k->rx,
                       sizeof(k->tx));
}

void mp__session_keys_free(mp_session_keys_t *k) {
    if (k == NULL)
        return;
#ifdef MOSHPIT_HAVE_OPENSSL
    /* Both wipe the key schedule they hold before freeing it. */
    EVP_CIPHER_CTX_free(k->tx_ctx);
    EVP_CIPHER_CTX_free(k->rx_ctx);
#endif
    sodium_free(k); /* wipes tx/rx */
}

/* counter as 8 bytes little-endian, then zeros: 12 bytes for AES-GCM and
 * ChaCha20-Poly1305, 32 for AEGIS-256 */
static void make_nonce(uint64_t counter, uint8_t nonce[32]) {
    memset(nonce, 0, 32);
    mp__store_le64(nonce, counter);
}

moshpit_err_t mp__session_seal(const mp_session_keys_t *k, uint64_t counter,
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *m, size_t mlen, uint8_t *c,
                               uint8_t tag[16]) {
    uint8_t nonce[32];
    make_nonce(counter, nonce);
    if (k->cipher == MP_CIPHER_AEGISX2) {
        mp__aegis256x2_encrypt(k->tx, nonce, ad, adlen, m, mlen, c, tag);
        return MOSHPIT_OK;
    }
    if (k->cipher == MP_CIPHER_AEGIS) {
        mp__aegis256_encrypt(k->tx, nonce, ad, adlen, m, mlen, c, tag);
        return MOSHPIT_OK;
    }
#ifdef MOSHPIT_HAVE_OPENSSL
    return evp_seal(k->tx_ctx, nonce, ad, adlen, m, mlen, c, tag);
#else
    int rc;
    if (k->cipher == MP_CIPHER_AESGCM)
        rc = crypto_aead_aes256gcm_encrypt_detached_afternm(
            c, tag, NULL, m, mlen, ad, adlen, NULL, nonce, &k->tx_aes);
    else
        rc = crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            c, tag, NULL, m, mlen, ad, adlen, NULL, nonce, k->tx);
    return rc == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
#endif
}

moshpit_err_t mp__session_open(const mp_session_keys_t *k, uint64_t counter,
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *c, size_t clen,
                               const uint8_t tag[16], uint8_t *m) {
    return mp__session_open_scan(k, counter, ad, adlen, c, clen, tag, m, NULL,
                                 NULL);
}

moshpit_err_t mp__session_open_scan(const mp_session_keys_t *k,
                                    uint64_t counter, const uint8_t *ad,
                                    size_t adlen, const uint8_t *c, size_t clen,
                                    const uint8_t tag[16], uint8_t *m,
                                    mp_scan_fn scan, void *sctx) {
    uint8_t nonce[32];
    make_nonce(counter, nonce);
    if (k->cipher == MP_CIPHER_AEGIS || k->cipher == MP_CIPHER_AEGISX2) {
        int rc = k->cipher == MP_CIPHER_AEGISX2
                     ? mp__aegis256x2_decrypt(k->rx, nonce, ad, adlen, c, clen,
                                              tag, m, scan, sctx)
                     : mp__aegis256_decrypt(k->rx, nonce, ad, adlen, c, clen,
                                            tag, m, scan, sctx);
        return rc == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
    }
#ifdef MOSHPIT_HAVE_OPENSSL
    return evp_open(k->rx_ctx, nonce, ad, adlen, c, clen, tag, m, scan, sctx);
#else
    int rc;
    if (k->cipher == MP_CIPHER_AESGCM)
        rc = crypto_aead_aes256gcm_decrypt_detached_afternm(
            m, NULL, c, clen, tag, ad, adlen, nonce, &k->rx_aes);
    else
        rc = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            m, NULL, c, clen, tag, ad, adlen, nonce, k->rx);
    if (rc != 0)
        return MOSHPIT_ECRYPTO;
    /* libsodium verifies before it decrypts: scan the verified plaintext */
    for (size_t done = 0; scan != NULL && done < clen; done += SCAN_CHUNK)
        scan(sctx, m + done,
             clen - done < SCAN_CHUNK ? clen - done : SCAN_CHUNK);
    return MOSHPIT_OK;
#endif
}

moshpit_err_t mp__session_open_f32(const mp_session_keys_t *k, uint64_t counter,
                                   const uint8_t *ad, size_t adlen,
                                   const uint8_t *c, size_t clen,
                                   const uint8_t tag[16], uint8_t *m,
                                   mp_scan_fn scan, uint32_t *bad) {
    *bad = 0;
    if (k->cipher != MP_CIPHER_AEGIS && k->cipher != MP_CIPHER_AEGISX2)
        return mp__session_open_scan(k, counter, ad, adlen, c, clen, tag, m,
                                     scan, bad);
    uint8_t nonce[32];
    make_nonce(counter, nonce);
    int rc = k->cipher == MP_CIPHER_AEGISX2
                 ? mp__aegis256x2_decrypt_f32(k->rx, nonce, ad, adlen, c, clen,
                                              tag, m, bad)
                 : mp__aegis256_decrypt_f32(k->rx, nonce, ad, adlen, c, clen,
                                            tag, m, bad);
    return rc == 0 ? MOSHPIT_OK : MOSHPIT_ECRYPTO;
}
