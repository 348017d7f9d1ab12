/* SPDX-License-Identifier: MIT */
/*
 * aegis.c - AEGIS-256 with a 128-bit tag, as specified by
 * draft-irtf-cfrg-aegis-aead (see aegis.h): the one-lane variant of
 * aegis_tmpl.h, with its init and finalize. The state is six AES blocks;
 * every 16 bytes of input cost one state update of six AES rounds (one
 * AESENC instruction each) and a few XORs, all constant time. Two code
 * paths: AES-NI on x86-64, and the ARMv8 Cryptographic Extension on arm64
 * (GCC, or Clang with the extension enabled at build time). An ARM AES
 * round differs from AESENC: AESE xors the round key in first, then
 * SubBytes and ShiftRows, and AESMC does MixColumns, so AEGIS's
 * AESRound(x, k) is AESMC(AESE(x, 0)) xor k. The functions that use the
 * intrinsics carry a target attribute, so the file builds without -maes
 * or +crypto and the CPU is checked at run time.
 *
 * Checked against the draft's and Wycheproof's test vectors in
 * tests/unit/test_aegis.c, and by a known answer test (associated data,
 * whole and partial blocks, a refused tag) each time
 * mp__aegis256_available() is asked.
 */
#include "crypto/aegis.h"
#include "crypto/cpu.h"

#include <sodium.h>
#include <string.h>

#if MP_AEGIS256_BUILT && defined(__x86_64__)
#define MP_AEGIS_X86 1
#include <immintrin.h>
#elif MP_AEGIS256_BUILT && defined(__aarch64__)
/* GCC's arm_neon.h declares the AES intrinsics for functions with the
 * +crypto target; older Clang's only when the whole build has them
 * (MP_AEGIS256_BUILT in aegis.h). */
#define MP_AEGIS_ARM64 1
#include <arm_neon.h>
#endif

int mp__aegis_tag_check(uint8_t want[16], const uint8_t tag[16], uint8_t *m,
                        size_t mlen) {
    uint8_t diff = 0;
    for (int k = 0; k < 16; k++)
        diff |= (uint8_t)(want[k] ^ tag[k]);
    sodium_memzero(want, 16);
    /* (diff - 1) >> 8 is all ones only for diff == 0: no branch on the
     * secret comparison itself */
    if ((((unsigned)diff - 1u) >> 8) & 1u)
        return 0;
    if (mlen > 0)
        sodium_memzero(m, mlen);
    return -1;
}

#ifdef MP_AEGIS_X86

#define AEGIS_FN __attribute__((target("aes")))
#define AEGIS_RATE 16u
#define AEGIS_ENCRYPT mp__aegis256_encrypt
#define AEGIS_DECRYPT mp__aegis256_decrypt
#define AEGIS_DECRYPT_F32 mp__aegis256_decrypt_f32
typedef __m128i aegis_vec_t;

AEGIS_FN static inline aegis_vec_t v_or(aegis_vec_t a, aegis_vec_t b) {
    return _mm_or_si128(a, b);
}

AEGIS_FN static inline aegis_vec_t v_add32(aegis_vec_t a, aegis_vec_t b) {
    return _mm_add_epi32(a, b);
}

AEGIS_FN static inline aegis_vec_t v_set32(uint32_t u) {
    return _mm_set1_epi32((int)u);
}

AEGIS_FN static inline uint32_t v_fold32(aegis_vec_t a) {
    uint32_t u[4];
    _mm_storeu_si128((aegis_vec_t *)(void *)u, a);
    return u[0] | u[1] | u[2] | u[3];
}

AEGIS_FN static inline aegis_vec_t v_xor(aegis_vec_t a, aegis_vec_t b) {
    return _mm_xor_si128(a, b);
}

AEGIS_FN static inline aegis_vec_t v_and(aegis_vec_t a, aegis_vec_t b) {
    return _mm_and_si128(a, b);
}

AEGIS_FN static inline aegis_vec_t v_aesenc(aegis_vec_t a, aegis_vec_t k) {
    return _mm_aesenc_si128(a, k);
}

AEGIS_FN static inline aegis_vec_t v_load(const uint8_t *p) {
    return _mm_loadu_si128((const aegis_vec_t *)(const void *)p);
}

AEGIS_FN static inline void v_store(uint8_t *p, aegis_vec_t v) {
    _mm_storeu_si128((aegis_vec_t *)(void *)p, v);
}

static bool cpu_has_aes(void) {
    return mp__cpu_has_aesni();
}

#elif defined(MP_AEGIS_ARM64)

#if defined(__clang__)
#define AEGIS_FN __attribute__((target("aes")))
#else
#define AEGIS_FN __attribute__((target("+crypto")))
#endif
#define AEGIS_RATE 16u
#define AEGIS_ENCRYPT mp__aegis256_encrypt
#define AEGIS_DECRYPT mp__aegis256_decrypt
#define AEGIS_DECRYPT_F32 mp__aegis256_decrypt_f32
typedef uint8x16_t aegis_vec_t;

AEGIS_FN static inline aegis_vec_t v_or(aegis_vec_t a, aegis_vec_t b) {
    return vorrq_u8(a, b);
}

AEGIS_FN static inline aegis_vec_t v_add32(aegis_vec_t a, aegis_vec_t b) {
    return vreinterpretq_u8_u32(
        vaddq_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b)));
}

AEGIS_FN static inline aegis_vec_t v_set32(uint32_t u) {
    return vreinterpretq_u8_u32(vdupq_n_u32(u));
}

AEGIS_FN static inline uint32_t v_fold32(aegis_vec_t a) {
    uint32x4_t v = vreinterpretq_u32_u8(a);
    return vgetq_lane_u32(v, 0) | vgetq_lane_u32(v, 1) | vgetq_lane_u32(v, 2) |
           vgetq_lane_u32(v, 3);
}

AEGIS_FN static inline aegis_vec_t v_xor(aegis_vec_t a, aegis_vec_t b) {
    return veorq_u8(a, b);
}

AEGIS_FN static inline aegis_vec_t v_and(aegis_vec_t a, aegis_vec_t b) {
    return vandq_u8(a, b);
}

/* AESENC(a, k) = MixColumns(ShiftRows(SubBytes(a))) ^ k; AESE xors its key
 * in before SubBytes, so it gets zero and k is xored in after AESMC. */
AEGIS_FN static inline aegis_vec_t v_aesenc(aegis_vec_t a, aegis_vec_t k) {
    return veorq_u8(vaesmcq_u8(vaeseq_u8(a, vdupq_n_u8(0))), k);
}

AEGIS_FN static inline aegis_vec_t v_load(const uint8_t *p) {
    return vld1q_u8(p);
}

AEGIS_FN static inline void v_store(uint8_t *p, aegis_vec_t v) {
    vst1q_u8(p, v);
}

static bool cpu_has_aes(void) {
    return (mp__cpu_features() & MP_CPU_AES) != 0;
}

#endif

#if defined(MP_AEGIS_X86) || defined(MP_AEGIS_ARM64)

#include "crypto/aegis_tmpl.h"

/* The Fibonacci-sequence constants C0 and C1 of the specification. */
static const uint8_t C0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                               0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
static const uint8_t C1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                               0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

AEGIS_FN static void init(aegis_vec_t s[6], const uint8_t key[32],
                          const uint8_t nonce[32]) {
    aegis_vec_t k0 = v_load(key), k1 = v_load(key + 16);
    aegis_vec_t n0 = v_load(nonce), n1 = v_load(nonce + 16);
    aegis_vec_t c0 = v_load(C0), c1 = v_load(C1);
    aegis_vec_t kn0 = v_xor(k0, n0), kn1 = v_xor(k1, n1);
    s[0] = kn0;
    s[1] = kn1;
    s[2] = c1;
    s[3] = c0;
    s[4] = v_xor(k0, c0);
    s[5] = v_xor(k1, c1);
    for (int i = 0; i < 4; i++) {
        update(s, k0);
        update(s, k1);
        update(s, kn0);
        update(s, kn1);
    }
}

AEGIS_FN static void finalize(aegis_vec_t s[6], size_t adlen, size_t mlen,
                              uint8_t tag[16]) {
    /* LE64(adlen in bits) || LE64(mlen in bits) */
    uint8_t lens[16];
    uint64_t bits[2] = {(uint64_t)adlen << 3, (uint64_t)mlen << 3};
    for (int i = 0; i < 16; i++)
        lens[i] = (uint8_t)(bits[i / 8] >> (8 * (i % 8)));
    aegis_vec_t t = v_xor(s[3], v_load(lens));
    for (int i = 0; i < 7; i++)
        update(s, t);
    aegis_vec_t x = v_xor(v_xor(s[0], s[1]), v_xor(s[2], s[3]));
    v_store(tag, v_xor(x, v_xor(s[4], s[5])));
}

/* Draft test vector 5 (key 10 01 00.., nonce 10 00 02 00..): 42 bytes of
 * associated data (two whole blocks and a partial one), 40 bytes of
 * message (two whole blocks and a partial one), so every path of encrypt
 * and decrypt runs; then the same with one tag bit flipped is refused. */
static bool known_answer(void) {
    uint8_t key[32] = {0x10, 0x01}, nonce[32] = {0x10, 0x00, 0x02};
    uint8_t ad[42], m[40], c[40], tag[16], back[40];
    static const uint8_t want_c[40] = {
        0x57, 0x75, 0x4a, 0x7d, 0x09, 0x96, 0x3e, 0x7c, 0x78, 0x75,
        0x83, 0xa2, 0xe7, 0xb8, 0x59, 0xbb, 0x24, 0xfa, 0x1e, 0x04,
        0xd4, 0x9f, 0xd5, 0x50, 0xb2, 0x51, 0x1a, 0x35, 0x8e, 0x3b,
        0xca, 0x25, 0x2a, 0x9b, 0x1b, 0x8b, 0x30, 0xcc, 0x4a, 0x67};
    static const uint8_t want_tag[16] = {0xab, 0x8a, 0x7d, 0x53, 0xfd, 0x0e,
                                         0x98, 0xd7, 0x27, 0xac, 0xcc, 0xa9,
                                         0x49, 0x25, 0xe1, 0x28};
    for (unsigned i = 0; i < sizeof(ad); i++)
        ad[i] = (uint8_t)i;
    for (unsigned i = 0; i < sizeof(m); i++)
        m[i] = (uint8_t)(0x10 + i);
    mp__aegis256_encrypt(key, nonce, ad, sizeof(ad), m, sizeof(m), c, tag);
    if (memcmp(c, want_c, sizeof(c)) != 0 || memcmp(tag, want_tag, 16) != 0)
        return false;
    if (mp__aegis256_decrypt(key, nonce, ad, sizeof(ad), c, sizeof(c), tag,
                             back, NULL, NULL) != 0 ||
        memcmp(back, m, sizeof(m)) != 0)
        return false;
    tag[15] ^= 1;
    return mp__aegis256_decrypt(key, nonce, ad, sizeof(ad), c, sizeof(c), tag,
                                back, NULL, NULL) != 0;
}

bool mp__aegis256_available(void) {
    return cpu_has_aes() && known_answer();
}

#else /* no AES code path in this build */

bool mp__aegis256_available(void) {
    return false;
}

void mp__aegis256_encrypt(const uint8_t key[32], const uint8_t nonce[32],
                          const uint8_t *ad, size_t adlen, const uint8_t *m,
                          size_t mlen, uint8_t *c, uint8_t tag[16]) {
    (void)key, (void)nonce, (void)ad, (void)adlen, (void)m;
    if (mlen > 0)
        memset(c, 0, mlen);
    memset(tag, 0, 16);
}

int mp__aegis256_decrypt(const uint8_t key[32], const uint8_t nonce[32],
                         const uint8_t *ad, size_t adlen, const uint8_t *c,
                         size_t clen, const uint8_t tag[16], uint8_t *m,
                         mp_aegis_scan_fn scan, void *ctx) {
    (void)key, (void)nonce, (void)ad, (void)adlen, (void)c, (void)tag;
    (void)scan, (void)ctx;
    if (clen > 0)
        memset(m, 0, clen);
    return -1;
}

int mp__aegis256_decrypt_f32(const uint8_t key[32], const uint8_t nonce[32],
                             const uint8_t *ad, size_t adlen, const uint8_t *c,
                             size_t clen, const uint8_t tag[16], uint8_t *m,
                             uint32_t *bad) {
    *bad = 0;
    return mp__aegis256_decrypt(key, nonce, ad, adlen, c, clen, tag, m, NULL,
                                NULL);
}

#endif
