/* SPDX-License-Identifier: MIT */
/*
 * aegis.h - AEGIS-256 (draft-irtf-cfrg-aegis-aead) with a 128-bit tag, the
 * data-plane AEAD used between peers whose CPUs both have AES instructions.
 * It is about 2.5 times as fast as AES-256-GCM on the same hardware, which
 * is what a peer spends most of an all-reduce on. x86-64 with AES-NI and
 * arm64 with the ARMv8 AES instructions; elsewhere mp__aegis256_available()
 * is false and peers use the other ciphers. Pure functions over caller buffers;
 * the state lives on the stack and is wiped before returning. Thread-safe.
 */
#ifndef MP_CRYPTO_AEGIS_H
#define MP_CRYPTO_AEGIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 1 where this build has an AEGIS-256 implementation: x86-64, and arm64
 * Linux with GCC (or a Clang build whose target has the AES instructions);
 * 0 elsewhere, 32-bit ARM among them, where mp__aegis256_available() is
 * false whatever the CPU has. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MP_AEGIS256_BUILT 1
#elif defined(__aarch64__) && defined(__linux__) &&                            \
    ((defined(__GNUC__) && !defined(__clang__)) || defined(__ARM_FEATURE_AES))
#define MP_AEGIS256_BUILT 1
#else
#define MP_AEGIS256_BUILT 0
#endif

#define MP_AEGIS256_KEYBYTES 32u
#define MP_AEGIS256_NONCEBYTES 32u
#define MP_AEGIS256_TAGBYTES 16u

/* True when this build and CPU can run AEGIS-256 (AES-NI, or ARMv8 AES on
 * arm64) and a known answer test passed just now. */
bool mp__aegis256_available(void);

/* Encrypts m[0..mlen) into c (c may equal m) and writes the 16-byte tag.
 * Only call when mp__aegis256_available(). */
void mp__aegis256_encrypt(const uint8_t key[32], const uint8_t nonce[32],
                          const uint8_t *ad, size_t adlen, const uint8_t *m,
                          size_t mlen, uint8_t *c, uint8_t tag[16]);

/* Looks at a chunk of plaintext as decryption produces it (see
 * mp__aegis256_decrypt). */
typedef void (*mp_aegis_scan_fn)(void *ctx, const uint8_t *m, size_t len);

/* Decrypts c[0..clen) into m (m may equal c) and checks the tag in constant
 * time. Returns 0, or -1 if the tag does not verify, in which case m is
 * zeroed: no unauthenticated plaintext is left behind. If scan is not NULL
 * it is called on consecutive chunks of m (MP_AEGIS_SCAN_CHUNK bytes, a
 * multiple of 32, the last one shorter) right after each is decrypted,
 * while it is in the L1
 * cache; the bytes are not authenticated yet, so scan may only compute
 * something the caller looks at once this returned 0, in a time that does
 * not depend on them. */
#define MP_AEGIS_SCAN_CHUNK 4096u
int mp__aegis256_decrypt(const uint8_t key[32], const uint8_t nonce[32],
                         const uint8_t *ad, size_t adlen, const uint8_t *c,
                         size_t clen, const uint8_t tag[16], uint8_t *m,
                         mp_aegis_scan_fn scan, void *ctx);

/* mp__aegis256_decrypt with the finiteness scan of core/vec.h fused into
 * the decryption loop: *bad gets the OR over the plaintext's 32-bit lanes
 * of (u & 0x7f800000) + 0x00800000, the zero padding of a last partial
 * block included, so bit 31 is set iff some float is an infinity or a NaN,
 * as in mp__vec_nonfinite_bits (the other bits carry no meaning and may
 * differ from its). Computed in a time that depends only on clen,
 * and meaningful only when this returned 0 (on -1 m is zeroed and *bad
 * must be ignored). */
int mp__aegis256_decrypt_f32(const uint8_t key[32], const uint8_t nonce[32],
                             const uint8_t *ad, size_t adlen, const uint8_t *c,
                             size_t clen, const uint8_t tag[16], uint8_t *m,
                             uint32_t *bad);

/* AEGIS-256X2 (two AEGIS-256 lanes in 256-bit registers, crypto/
 * aegis_x2.c): same contract as the four functions above. Available on
 * x86-64 CPUs with VAES and AVX2. */
bool mp__aegis256x2_available(void);
void mp__aegis256x2_encrypt(const uint8_t key[32], const uint8_t nonce[32],
                            const uint8_t *ad, size_t adlen, const uint8_t *m,
                            size_t mlen, uint8_t *c, uint8_t tag[16]);
int mp__aegis256x2_decrypt(const uint8_t key[32], const uint8_t nonce[32],
                           const uint8_t *ad, size_t adlen, const uint8_t *c,
                           size_t clen, const uint8_t tag[16], uint8_t *m,
                           mp_aegis_scan_fn scan, void *ctx);
int mp__aegis256x2_decrypt_f32(const uint8_t key[32], const uint8_t nonce[32],
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *c, size_t clen,
                               const uint8_t tag[16], uint8_t *m,
                               uint32_t *bad);

/* Shared by both variants: compares the computed tag want with tag in
 * constant time, wipes want, and on a mismatch zeroes m[0..mlen). Returns
 * 0 when they match, else -1. */
int mp__aegis_tag_check(uint8_t want[16], const uint8_t tag[16], uint8_t *m,
                        size_t mlen);

#endif
