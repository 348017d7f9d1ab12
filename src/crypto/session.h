/* SPDX-License-Identifier: MIT */
/*
 * session.h - the data plane's cryptography: the cipher sets peers
 * announce, per-session keys derived from ephemeral X25519 keys, and the
 * AEAD that seals and opens data frames.
 *
 * Frames are sealed with AEGIS-256X2 when both ends run it (x86-64 with
 * VAES), else AEGIS-256 (x86-64 with AES-NI, arm64 with the ARMv8 AES
 * instructions; both in crypto/aegis*.c), else AES-256-GCM when both have
 * AES hardware (32-bit arm with ARMv8 AES in the OpenSSL build), else
 * ChaCha20-Poly1305 (IETF), which is what a CPU without AES instructions
 * (a Raspberry Pi 4) runs fastest. The last two come from libsodium, or from
 * OpenSSL 3's libcrypto when built with MOSHPIT_HAVE_OPENSSL (faster; same wire
 * format, so both builds interoperate). Keys are derived per session from
 * ephemeral X25519 keys exchanged inside the CURVE-authenticated control
 * channel; each direction has its own key and a 64-bit counter nonce that never
 * repeats under that key.
 *
 * Key objects live in sodium_malloc'd memory and are wiped on free. Not
 * thread-safe per object; the engine thread owns them.
 */
#ifndef MP_CRYPTO_SESSION_H
#define MP_CRYPTO_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

typedef enum {
    MP_CIPHER_AESGCM = 1,
    MP_CIPHER_CHACHA = 2,
    MP_CIPHER_AEGIS = 4,  /* AEGIS-256, 128-bit tag (crypto/aegis.h) */
    MP_CIPHER_AEGISX2 = 8 /* AEGIS-256X2, 128-bit tag (VAES) */
} mp_cipher_t;

/* Bit set of ciphers this machine can run (CHACHA always; AESGCM with
 * hardware AES and carry-less multiply; AEGIS with AES rounds; AEGISX2
 * with VAES): mp__session_ciphers_for(mp__cpu_features()). */
uint32_t mp__session_ciphers(void);

/* The set a machine whose CPU has the MP_CPU_* features cpu would
 * announce (crypto/cpu.h), counting only what this CPU also runs: a mask
 * of this CPU's features gives what a CPU lacking the rest announces (the
 * tests use it for a CPU without AES, such as a Raspberry Pi 4's, on any
 * machine). Pure apart from the known answer tests it runs. */
uint32_t mp__session_ciphers_for(unsigned cpu);

/* Name of the library running the data-plane AEAD: "openssl" or
 * "libsodium". Static string, never NULL; fixed at build time. */
const char *mp__session_backend(void);

/* The cipher two peers use: the fastest in both sets, 0 if none. */
uint32_t mp__session_pick_cipher(uint32_t mine, uint32_t theirs);

/* Per-session data keys for one peer. */
typedef struct mp_session_keys mp_session_keys_t;

/* What one side of a session feeds into the key derivation: both
 * identities, both ephemeral X25519 keys of this session, the cipher chosen
 * and both announced cipher sets. */
typedef struct mp_session_hs {
    uint32_t cipher; /* the one both support (mp__session_pick_cipher) */
    const uint8_t *my_id, *their_id;    /* 32 bytes each */
    const uint8_t *my_eph_sec;          /* 32 bytes */
    const uint8_t *my_eph, *their_eph;  /* public keys, 32 bytes each */
    uint32_t my_ciphers, their_ciphers; /* as announced in HELLO */
} mp_session_hs_t;

/* Derives tx/rx keys: shared = X25519(my_eph_sec, their_eph), then
 * BLAKE2b-512 keyed with shared over "moshpit-data-v2" || ids || ephemeral
 * keys || cipher || cipher sets, each pair in canonical (sorted by id)
 * order; the lower id sends with the first half (docs/PROTOCOL.md,
 * "Session setup"). Fresh ephemeral keys on either side give fresh keys.
 * Errors: ECRYPTO (degenerate key, unknown cipher), ENOMEM. */
moshpit_err_t mp__session_keys_new(const mp_session_hs_t *hs,
                                   mp_session_keys_t **out);
/* Public fingerprints of a key object's send and receive keys: the first 8
 * bytes (little-endian) of BLAKE2b-256 over "moshpit-key-id-v1" || key.
 * For logs and tests; they reveal nothing usable about the keys. */
void mp__session_keys_ids(const mp_session_keys_t *k, uint64_t *tx_id,
                          uint64_t *rx_id);
void mp__session_keys_free(mp_session_keys_t *k);
/* A secret of the session for one direction (tx: what we send, else what
 * we receive; the peer's rx secret is our tx one): BLAKE2b-128 keyed with
 * that direction's key over "moshpit-shm-name-v1". Names the shared
 * memory region of that direction (src/net/shm.h). */
void mp__session_shm_secret(const mp_session_keys_t *k, bool tx,
                            uint8_t out[16]);

/* Seals m[0..mlen) into c (mlen bytes) + tag (16 bytes) with nonce =
 * counter, ad authenticated. c may equal m. */
moshpit_err_t mp__session_seal(const mp_session_keys_t *k, uint64_t counter,
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *m, size_t mlen, uint8_t *c,
                               uint8_t tag[16]);
/* Opens; ECRYPTO if the tag does not verify (m then holds no plaintext). */
moshpit_err_t mp__session_open(const mp_session_keys_t *k, uint64_t counter,
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *c, size_t clen,
                               const uint8_t tag[16], uint8_t *m);

/* Looks at a chunk of plaintext while mp__session_open_scan produces it. */
typedef void (*mp_scan_fn)(void *ctx, const uint8_t *m, size_t len);

/* mp__session_open that also calls scan(sctx, chunk, len) on consecutive
 * chunks of m (a few KiB each, multiples of 16 bytes but the last; together
 * exactly m[0..clen)) as they are decrypted, so a check over the plaintext
 * reads it from the L1 cache instead of in a second pass. The chunks may
 * not be authenticated yet when scan sees them: scan may only compute
 * something that the caller uses after this returned MOSHPIT_OK, never act
 * on the bytes, and its time must not depend on them (no early exit; see
 * mp__vec_scan_nonfinite). On ECRYPTO whatever scan computed must be
 * ignored. */
moshpit_err_t mp__session_open_scan(const mp_session_keys_t *k,
                                    uint64_t counter, const uint8_t *ad,
                                    size_t adlen, const uint8_t *c, size_t clen,
                                    const uint8_t tag[16], uint8_t *m,
                                    mp_scan_fn scan, void *sctx);

/* mp__session_open_scan for float32 payloads, with the finiteness scan
 * fused into the AEGIS decryption loop (mp__aegis256_decrypt_f32): *bad
 * gets the OR over the plaintext's 32-bit lanes of
 * (u & 0x7f800000) + 0x00800000 (and of zero padding), bit 31 set iff a
 * float is non-finite; only bit 31 means something.
 * The other ciphers start *bad at 0 and call scan(bad, chunk, len) as
 * mp__session_open_scan does, so scan must OR the same bits into the
 * uint32_t it is given (mp__vec_scan_nonfinite does). Same rules: read
 * *bad only after MOSHPIT_OK. */
moshpit_err_t mp__session_open_f32(const mp_session_keys_t *k, uint64_t counter,
                                   const uint8_t *ad, size_t adlen,
                                   const uint8_t *c, size_t clen,
                                   const uint8_t tag[16], uint8_t *m,
                                   mp_scan_fn scan, uint32_t *bad);

#endif
