/* SPDX-License-Identifier: MIT */
/*
 * aegis_x2.c - AEGIS-256X2 with a 128-bit tag (draft-irtf-cfrg-aegis-aead),
 * the two-lane variant of aegis_tmpl.h with its init and finalize: two
 * AEGIS-256 states, told apart by a per-lane context during
 * initialization, that run side by side in 256-bit registers, 32 bytes per
 * update. With VAES one instruction does the AES round of both lanes, so it
 * runs about 1.7 times as fast as AEGIS-256 on CPUs that have VAES and
 * AVX2; it is only announced there (see aegis.h). The functions carry a
 * target attribute, so the file builds without -mvaes and the CPU is checked
 * at run time. Checked against the draft's vectors in test_aegis, and by a
 * known answer test (associated data, whole and partial blocks, a refused
 * tag) each time mp__aegis256x2_available() is asked.
 */
#include "crypto/aegis.h"
#include "crypto/cpu.h"

#include <sodium.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MP_AEGIS_X86 1
#include <immintrin.h>
#endif

#ifdef MP_AEGIS_X86

#define AEGIS_FN __attribute__((target("vaes,avx2")))
#define AEGIS_RATE 32u
#define AEGIS_ENCRYPT mp__aegis256x2_encrypt
#define AEGIS_DECRYPT mp__aegis256x2_decrypt
#define AEGIS_DECRYPT_F32 mp__aegis256x2_decrypt_f32
typedef __m256i aegis_vec_t;

AEGIS_FN static inline aegis_vec_t v_or(aegis_vec_t a, aegis_vec_t b) {
    return _mm256_or_si256(a, b);
}

AEGIS_FN static inline aegis_vec_t v_add32(aegis_vec_t a, aegis_vec_t b) {
    return _mm256_add_epi32(a, b);
}

AEGIS_FN static inline aegis_vec_t v_set32(uint32_t u) {
    return _mm256_set1_epi32((int)u);
}

AEGIS_FN static inline uint32_t v_fold32(aegis_vec_t a) {
    uint32_t u[8];
    _mm256_storeu_si256((aegis_vec_t *)(void *)u, a);
    return u[0] | u[1] | u[2] | u[3] | u[4] | u[5] | u[6] | u[7];
}

AEGIS_FN static inline aegis_vec_t v_xor(aegis_vec_t a, aegis_vec_t b) {
    return _mm256_xor_si256(a, b);
}

AEGIS_FN static inline aegis_vec_t v_and(aegis_vec_t a, aegis_vec_t b) {
    return _mm256_and_si256(a, b);
}

/* one AES round in each 128-bit lane (VAES) */
AEGIS_FN static inline aegis_vec_t v_aesenc(aegis_vec_t a, aegis_vec_t k) {
    return _mm256_aesenc_epi128(a, k);
}

AEGIS_FN static inline aegis_vec_t v_load(const uint8_t *p) {
    return _mm256_loadu_si256((const aegis_vec_t *)(const void *)p);
}

AEGIS_FN static inline void v_store(uint8_t *p, aegis_vec_t v) {
    _mm256_storeu_si256((aegis_vec_t *)(void *)p, v);
}

#include "crypto/aegis_tmpl.h"

/* A 16-byte block in both lanes. */
AEGIS_FN static inline aegis_vec_t both(__m128i b) {
    return _mm256_broadcastsi128_si256(b);
}

static const uint8_t C0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                               0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
static const uint8_t C1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                               0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

AEGIS_FN static void init(aegis_vec_t s[6], const uint8_t key[32],
                          const uint8_t nonce[32]) {
    __m128i k0 = _mm_loadu_si128((const __m128i *)(const void *)key);
    __m128i k1 = _mm_loadu_si128((const __m128i *)(const void *)(key + 16));
    __m128i n0 = _mm_loadu_si128((const __m128i *)(const void *)nonce);
    __m128i n1 = _mm_loadu_si128((const __m128i *)(const void *)(nonce + 16));
    __m128i c0 = _mm_loadu_si128((const __m128i *)(const void *)C0);
    __m128i c1 = _mm_loadu_si128((const __m128i *)(const void *)C1);
    aegis_vec_t in[4] = {both(k0), both(k1), both(_mm_xor_si128(k0, n0)),
                         both(_mm_xor_si128(k1, n1))};
    /* ctx[i] = Byte(i) || Byte(D - 1), zero padded, for lanes i = 0, 1 */
    const aegis_vec_t ctx = _mm256_set_epi64x(0, 0x0101, 0, 0x0100);
    s[0] = in[2];
    s[1] = in[3];
    s[2] = both(c1);
    s[3] = both(c0);
    s[4] = both(_mm_xor_si128(k0, c0));
    s[5] = both(_mm_xor_si128(k1, c1));
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 4; j++) {
            s[3] = v_xor(s[3], ctx);
            s[5] = v_xor(s[5], ctx);
            update(s, in[j]);
        }
}

/* The 128-bit tag: the XOR of both lanes' AEGIS-256 tags. */
AEGIS_FN static void finalize(aegis_vec_t s[6], size_t adlen, size_t mlen,
                              uint8_t tag[16]) {
    __m128i u = _mm_set_epi64x((long long)((uint64_t)mlen << 3),
                               (long long)((uint64_t)adlen << 3));
    aegis_vec_t t = v_xor(s[3], both(u));
    for (int i = 0; i < 7; i++)
        update(s, t);
    aegis_vec_t x =
        v_xor(v_xor(v_xor(s[0], s[1]), v_xor(s[2], s[3])), v_xor(s[4], s[5]));
    __m128i lo = _mm256_castsi256_si128(x);
    __m128i hi = _mm256_extracti128_si256(x, 1);
    _mm_storeu_si128((__m128i *)(void *)tag, _mm_xor_si128(lo, hi));
}

/* Draft AEGIS-256X2 test vector 2: 8 bytes of associated data (a padded
 * block), 120 bytes of message (three whole 32-byte blocks and a partial
 * one), so every path of encrypt and decrypt runs in both lanes; then the
 * same with one tag bit flipped is refused. */
static bool known_answer(void) {
    uint8_t key[32], nonce[32], m[120], c[120], back[120], tag[16];
    static const uint8_t ad[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    static const uint8_t want_c[120] = {
        0x72, 0x12, 0x0c, 0x2e, 0xa8, 0x23, 0x61, 0x80, 0xd6, 0x78, 0x59, 0x00,
        0x1f, 0x47, 0x29, 0x07, 0x7b, 0x70, 0x64, 0xc4, 0x14, 0x38, 0x4f, 0xe3,
        0xa7, 0xb5, 0x2f, 0x15, 0x71, 0xf4, 0xf8, 0xa7, 0xd0, 0xf0, 0x1e, 0x18,
        0xdb, 0x4f, 0x3b, 0xc0, 0xad, 0xb1, 0x50, 0x70, 0x2e, 0x5d, 0x14, 0x7a,
        0x8d, 0x36, 0x52, 0x21, 0x32, 0x76, 0x1b, 0x99, 0x4c, 0x1b, 0xd3, 0x95,
        0x58, 0x9e, 0x2c, 0xcf, 0x07, 0x90, 0xdf, 0xe2, 0xa3, 0xd1, 0x2d, 0x61,
        0xcd, 0x66, 0x6b, 0x28, 0x59, 0x82, 0x77, 0x39, 0xdb, 0x40, 0x37, 0xdd,
        0x31, 0x24, 0xc7, 0x84, 0x24, 0x45, 0x93, 0x76, 0xf6, 0xca, 0xc0, 0x8e,
        0x1a, 0x72, 0x23, 0xa2, 0xa4, 0x3e, 0x39, 0x8c, 0xe6, 0x38, 0x5c, 0xd6,
        0x54, 0xa1, 0x9f, 0x48, 0x1c, 0xba, 0x3b, 0x8f, 0x25, 0x91, 0x0b, 0x42};
    static const uint8_t want_tag[16] = {0x63, 0x5d, 0x39, 0x18, 0x28, 0x52,
                                         0x0b, 0xf1, 0x51, 0x27, 0x63, 0xf0,
                                         0xc8, 0xf5, 0xcd, 0xbd};
    for (int i = 0; i < 32; i++) {
        key[i] = (uint8_t)i;
        nonce[i] = (uint8_t)(i + 16);
    }
    for (int i = 0; i < 120; i++)
        m[i] = (uint8_t)(4 + i % 4);
    mp__aegis256x2_encrypt(key, nonce, ad, sizeof(ad), m, sizeof(m), c, tag);
    if (memcmp(c, want_c, sizeof(c)) != 0 || memcmp(tag, want_tag, 16) != 0)
        return false;
    if (mp__aegis256x2_decrypt(key, nonce, ad, sizeof(ad), c, sizeof(c), tag,
                               back, NULL, NULL) != 0 ||
        memcmp(back, m, sizeof(m)) != 0)
        return false;
    tag[15] ^= 1;
    return mp__aegis256x2_decrypt(key, nonce, ad, sizeof(ad), c, sizeof(c), tag,
                                  back, NULL, NULL) != 0;
}

bool mp__aegis256x2_available(void) {
    return mp__cpu_has_vaes_avx2() && known_answer();
}

#else /* no VAES code path in this build */

/* Never announced here; the calls behave like AEGIS-256's stand-ins of a
 * build without AES-NI (zeroed output, every open fails). */
bool mp__aegis256x2_available(void) {
    return false;
}

void mp__aegis256x2_encrypt(const uint8_t key[32], const uint8_t nonce[32],
                            const uint8_t *ad, size_t adlen, const uint8_t *m,
                            size_t mlen, uint8_t *c, uint8_t tag[16]) {
    mp__aegis256_encrypt(key, nonce, ad, adlen, m, mlen, c, tag);
}

int mp__aegis256x2_decrypt(const uint8_t key[32], const uint8_t nonce[32],
                           const uint8_t *ad, size_t adlen, const uint8_t *c,
                           size_t clen, const uint8_t tag[16], uint8_t *m,
                           mp_aegis_scan_fn scan, void *ctx) {
    return mp__aegis256_decrypt(key, nonce, ad, adlen, c, clen, tag, m, scan,
                                ctx);
}

int mp__aegis256x2_decrypt_f32(const uint8_t key[32], const uint8_t nonce[32],
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *c, size_t clen,
                               const uint8_t tag[16], uint8_t *m,
                               uint32_t *bad) {
    return mp__aegis256_decrypt_f32(key, nonce, ad, adlen, c, clen, tag, m,
                                    bad);
}

#endif
