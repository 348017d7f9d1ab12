/* SPDX-License-Identifier: MIT */
/*
 * aegis.c - AEGIS-256 with a 128-bit tag, as specified by
 * draft-irtf-cfrg-aegis-aead (see aegis.h). The state is six AES blocks;
 * every 16 bytes of input cost one state update of six AES rounds (one
 * AESENC instruction each) and a few XORs, all constant time. The functions
 * that use AES-NI intrinsics carry a target attribute, so the file builds
 * without -maes and the CPU is checked at run time.
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MP_AEGIS_X86 1
#include <immintrin.h>
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

#define AES_FN __attribute__((target("aes")))

typedef __m128i blk_t;

/* S'i = AESRound(S(i-1), Si) for i = 1..5; S'0 = AESRound(S5, S0 ^ m) */
AES_FN static inline void update(blk_t s[6], blk_t m) {
    blk_t t = s[5];
    s[5] = _mm_aesenc_si128(s[4], s[5]);
    s[4] = _mm_aesenc_si128(s[3], s[4]);
    s[3] = _mm_aesenc_si128(s[2], s[3]);
    s[2] = _mm_aesenc_si128(s[1], s[2]);
    s[1] = _mm_aesenc_si128(s[0], s[1]);
    s[0] = _mm_aesenc_si128(t, _mm_xor_si128(s[0], m));
}

/* The keystream block: S1 ^ S4 ^ S5 ^ (S2 & S3). */
AES_FN static inline blk_t keystream(const blk_t s[6]) {
    return _mm_xor_si128(_mm_xor_si128(s[1], s[4]),
                         _mm_xor_si128(s[5], _mm_and_si128(s[2], s[3])));
}

static inline blk_t load(const uint8_t *p) {
    return _mm_loadu_si128((const blk_t *)(const void *)p);
}

static inline void store(uint8_t *p, blk_t v) {
    _mm_storeu_si128((blk_t *)(void *)p, v);
}

/* The Fibonacci-sequence constants C0 and C1 of the specification. */
static const uint8_t C0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                               0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
static const uint8_t C1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                               0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

AES_FN static void init(blk_t s[6], const uint8_t key[32],
                        const uint8_t nonce[32]) {
    blk_t k0 = load(key), k1 = load(key + 16);
    blk_t n0 = load(nonce), n1 = load(nonce + 16);
    blk_t c0 = load(C0), c1 = load(C1);
    blk_t kn0 = _mm_xor_si128(k0, n0), kn1 = _mm_xor_si128(k1, n1);
    s[0] = kn0;
    s[1] = kn1;
    s[2] = c1;
    s[3] = c0;
    s[4] = _mm_xor_si128(k0, c0);
    s[5] = _mm_xor_si128(k1, c1);
    for (int i = 0; i < 4; i++) {
        update(s, k0);
        update(s, k1);
        update(s, kn0);
        update(s, kn1);
    }
}

AES_FN static void absorb(blk_t s[6], const uint8_t *ad, size_t adlen) {
    size_t i = 0;
    for (; i + 16 <= adlen; i += 16)
        update(s, load(ad + i));
    if (i < adlen) {
        uint8_t pad[16] = {0};
        memcpy(pad, ad + i, adlen - i);
        update(s, load(pad));
    }
}

AES_FN static void finalize(blk_t s[6], size_t adlen, size_t mlen,
                            uint8_t tag[16]) {
    blk_t t =
        _mm_xor_si128(s[3], _mm_set_epi64x((long long)((uint64_t)mlen << 3),
                                           (long long)((uint64_t)adlen << 3)));
    for (int i = 0; i < 7; i++)
        update(s, t);
    blk_t x =
        _mm_xor_si128(_mm_xor_si128(s[0], s[1]), _mm_xor_si128(s[2], s[3]));
    store(tag, _mm_xor_si128(x, _mm_xor_si128(s[4], s[5])));
}

AES_FN void mp__aegis256_encrypt(const uint8_t key[32], const uint8_t nonce[32],
                                 const uint8_t *ad, size_t adlen,
                                 const uint8_t *m, size_t mlen, uint8_t *c,
                                 uint8_t tag[16]) {
    blk_t s[6];
    init(s, key, nonce);
    absorb(s, ad, adlen);
    size_t i = 0;
    for (; i + 32 <= mlen; i += 32) {
        blk_t x0 = load(m + i);
        store(c + i, _mm_xor_si128(x0, keystream(s)));
        update(s, x0);
        blk_t x1 = load(m + i + 16);
        store(c + i + 16, _mm_xor_si128(x1, keystream(s)));
        update(s, x1);
    }
    for (; i + 16 <= mlen; i += 16) {
        blk_t x = load(m + i);
        store(c + i, _mm_xor_si128(x, keystream(s)));
        update(s, x);
    }
    if (i < mlen) {
        uint8_t pad[16] = {0};
        memcpy(pad, m + i, mlen - i);
        blk_t x = load(pad);
        store(pad, _mm_xor_si128(x, keystream(s)));
        memcpy(c + i, pad, mlen - i);
        update(s, x);
        sodium_memzero(pad, sizeof(pad));
    }
    finalize(s, adlen, mlen, tag);
    sodium_memzero(s, sizeof(s));
}

/* Decrypts whole blocks c[0..len), len a multiple of 16. */
AES_FN static void decrypt_blocks(blk_t s[6], const uint8_t *c, size_t len,
                                  uint8_t *m) {
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        blk_t x0 = _mm_xor_si128(load(c + i), keystream(s));
        store(m + i, x0);
        update(s, x0);
        blk_t x1 = _mm_xor_si128(load(c + i + 16), keystream(s));
        store(m + i + 16, x1);
        update(s, x1);
    }
    for (; i < len; i += 16) {
        blk_t x = _mm_xor_si128(load(c + i), keystream(s));
        store(m + i, x);
        update(s, x);
    }
}

/* Decrypts the last len (< 16) bytes. The padding of the last block is zero
 * in the plaintext, not in the decrypted keystream: it is cleared before
 * the update. */
AES_FN static void decrypt_tail(blk_t s[6], const uint8_t *c, size_t len,
                                uint8_t *m) {
    uint8_t pad[16] = {0};
    memcpy(pad, c, len);
    store(pad, _mm_xor_si128(load(pad), keystream(s)));
    memset(pad + len, 0, 16 - len);
    memcpy(m, pad, len);
    update(s, load(pad));
    sodium_memzero(pad, sizeof(pad));
}

AES_FN int mp__aegis256_decrypt(const uint8_t key[32], const uint8_t nonce[32],
                                const uint8_t *ad, size_t adlen,
                                const uint8_t *c, size_t clen,
                                const uint8_t tag[16], uint8_t *m,
                                mp_aegis_scan_fn scan, void *ctx) {
    blk_t s[6];
    init(s, key, nonce);
    absorb(s, ad, adlen);
    /* chunks are multiples of 16 bytes, so only the last can end in a
     * partial block */
    for (size_t done = 0; done < clen;) {
        size_t n = clen - done < MP_AEGIS_SCAN_CHUNK ? clen - done
                                                     : MP_AEGIS_SCAN_CHUNK;
        size_t nb = n & ~(size_t)15;
        decrypt_blocks(s, c + done, nb, m + done);
        if (nb < n)
            decrypt_tail(s, c + done + nb, n - nb, m + done + nb);
        if (scan != NULL)
            scan(ctx, m + done, n);
        done += n;
    }
    uint8_t want[16];
    finalize(s, adlen, clen, want);
    sodium_memzero(s, sizeof(s));
    return mp__aegis_tag_check(want, tag, m, clen);
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
    return mp__cpu_has_aesni() && known_answer();
}

#else /* no AES-NI code path in this build */

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

#endif
