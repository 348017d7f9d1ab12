/* SPDX-License-Identifier: MIT */
/*
 * aegis_tmpl.h - the body the AEGIS-256 variants share
 * (draft-irtf-cfrg-aegis-aead): the state update, the keystream, absorbing
 * associated data, and the encrypt and decrypt loops with the decrypt-time
 * scan hook. Included once by each variant, which differ in register width
 * (aegis.c: one lane in 128-bit registers, 16 bytes per update;
 * aegis_x2.c: two lanes in 256-bit registers, 32 bytes per update) and in
 * their init and finalize. Not a header to include anywhere else.
 *
 * The includer defines, before including:
 *   AEGIS_FN                  the target attribute of every function here
 *   AEGIS_RATE                bytes absorbed by one update (16 per lane)
 *   AEGIS_ENCRYPT, AEGIS_DECRYPT  names of the two public functions
 *   aegis_vec_t               the register type of one update, all lanes
 *   AEGIS_DECRYPT_F32         name of the decrypt that also scans floats
 * and these static inline functions on aegis_vec_t: v_xor, v_and,
 * v_aesenc (one AES round of every lane), v_load and v_store (AEGIS_RATE
 * bytes, unaligned), and for the float scan v_or, v_add32 (lane-wise 32-bit
 * addition), v_set32 (a 32-bit value in every lane) and v_fold32 (the OR of
 * all 32-bit lanes). It defines after including:
 *   static void init(aegis_vec_t s[6], const uint8_t key[32],
 *                    const uint8_t nonce[32]);
 *   static void finalize(aegis_vec_t s[6], size_t adlen, size_t mlen,
 *                        uint8_t tag[16]);
 * Every function is static, so each variant gets its own copy, compiled
 * for its own instructions and inlined as before.
 */
#ifndef AEGIS_RATE
#error "define AEGIS_RATE and the rest of the variant before aegis_tmpl.h"
#endif

_Static_assert(MP_AEGIS_SCAN_CHUNK % AEGIS_RATE == 0,
               "decrypt chunks end on whole updates");

AEGIS_FN static void init(aegis_vec_t s[6], const uint8_t key[32],
                          const uint8_t nonce[32]);
AEGIS_FN static void finalize(aegis_vec_t s[6], size_t adlen, size_t mlen,
                              uint8_t tag[16]);

/* Every lane: S'i = AESRound(S(i-1), Si) for i = 1..5;
 * S'0 = AESRound(S5, S0 ^ m). */
AEGIS_FN static inline void update(aegis_vec_t s[6], aegis_vec_t m) {
    aegis_vec_t t = s[5];
    s[5] = v_aesenc(s[4], s[5]);
    s[4] = v_aesenc(s[3], s[4]);
    s[3] = v_aesenc(s[2], s[3]);
    s[2] = v_aesenc(s[1], s[2]);
    s[1] = v_aesenc(s[0], s[1]);
    s[0] = v_aesenc(t, v_xor(s[0], m));
}

/* The keystream: S1 ^ S4 ^ S5 ^ (S2 & S3). */
AEGIS_FN static inline aegis_vec_t keystream(const aegis_vec_t s[6]) {
    return v_xor(v_xor(s[1], s[4]), v_xor(s[5], v_and(s[2], s[3])));
}

AEGIS_FN static void absorb(aegis_vec_t s[6], const uint8_t *ad, size_t adlen) {
    size_t i = 0;
    for (; i + AEGIS_RATE <= adlen; i += AEGIS_RATE)
        update(s, v_load(ad + i));
    if (i < adlen) {
        uint8_t pad[AEGIS_RATE] = {0};
        memcpy(pad, ad + i, adlen - i);
        update(s, v_load(pad));
    }
}

AEGIS_FN static inline void enc_block(aegis_vec_t s[6], const uint8_t *m,
                                      uint8_t *c) {
    aegis_vec_t x = v_load(m);
    v_store(c, v_xor(x, keystream(s)));
    update(s, x);
}

AEGIS_FN void AEGIS_ENCRYPT(const uint8_t key[32], const uint8_t nonce[32],
                            const uint8_t *ad, size_t adlen, const uint8_t *m,
                            size_t mlen, uint8_t *c, uint8_t tag[16]) {
    aegis_vec_t s[6];
    init(s, key, nonce);
    absorb(s, ad, adlen);
    size_t i = 0;
    /* two updates per turn: 32 bytes even for the one-lane variant */
    for (; i + 2 * AEGIS_RATE <= mlen; i += 2 * AEGIS_RATE) {
        enc_block(s, m + i, c + i);
        enc_block(s, m + i + AEGIS_RATE, c + i + AEGIS_RATE);
    }
    for (; i + AEGIS_RATE <= mlen; i += AEGIS_RATE)
        enc_block(s, m + i, c + i);
    if (i < mlen) {
        uint8_t pad[AEGIS_RATE] = {0};
        memcpy(pad, m + i, mlen - i);
        aegis_vec_t x = v_load(pad);
        v_store(pad, v_xor(x, keystream(s)));
        memcpy(c + i, pad, mlen - i);
        update(s, x);
        sodium_memzero(pad, sizeof(pad));
    }
    finalize(s, adlen, mlen, tag);
    sodium_memzero(s, sizeof(s));
}

AEGIS_FN static inline void dec_block(aegis_vec_t s[6], const uint8_t *c,
                                      uint8_t *m) {
    aegis_vec_t x = v_xor(v_load(c), keystream(s));
    v_store(m, x);
    update(s, x);
}

/* Decrypts whole updates c[0..len), len a multiple of AEGIS_RATE. */
AEGIS_FN static void decrypt_blocks(aegis_vec_t s[6], const uint8_t *c,
                                    size_t len, uint8_t *m) {
    size_t i = 0;
    for (; i + 2 * AEGIS_RATE <= len; i += 2 * AEGIS_RATE) {
        dec_block(s, c + i, m + i);
        dec_block(s, c + i + AEGIS_RATE, m + i + AEGIS_RATE);
    }
    for (; i < len; i += AEGIS_RATE)
        dec_block(s, c + i, m + i);
}

/* Decrypts the last len (< AEGIS_RATE) bytes. The padding of the last
 * block is zero in the plaintext, not in the decrypted keystream: it is
 * cleared before the update. */
AEGIS_FN static aegis_vec_t decrypt_tail(aegis_vec_t s[6], const uint8_t *c,
                                         size_t len, uint8_t *m) {
    uint8_t pad[AEGIS_RATE] = {0};
    memcpy(pad, c, len);
    v_store(pad, v_xor(v_load(pad), keystream(s)));
    memset(pad + len, 0, AEGIS_RATE - len);
    memcpy(m, pad, len);
    aegis_vec_t x = v_load(pad);
    update(s, x);
    sodium_memzero(pad, sizeof(pad));
    return x; /* the plaintext block, zero padded */
}

AEGIS_FN int AEGIS_DECRYPT(const uint8_t key[32], const uint8_t nonce[32],
                           const uint8_t *ad, size_t adlen, const uint8_t *c,
                           size_t clen, const uint8_t tag[16], uint8_t *m,
                           mp_aegis_scan_fn scan, void *ctx) {
    aegis_vec_t s[6];
    init(s, key, nonce);
    absorb(s, ad, adlen);
    /* chunks are whole updates, so only the last can end in a partial one */
    for (size_t done = 0; done < clen;) {
        size_t n = clen - done < MP_AEGIS_SCAN_CHUNK ? clen - done
                                                     : MP_AEGIS_SCAN_CHUNK;
        size_t nb = n - n % AEGIS_RATE;
        decrypt_blocks(s, c + done, nb, m + done);
        if (nb < n)
            (void)decrypt_tail(s, c + done + nb, n - nb, m + done + nb);
        if (scan != NULL)
            scan(ctx, m + done, n);
        done += n;
    }
    uint8_t want[16];
    finalize(s, adlen, clen, want);
    sodium_memzero(s, sizeof(s));
    return mp__aegis_tag_check(want, tag, m, clen);
}

/* The float scan fused into decryption: for every 32-bit lane u of the
 * plaintext, (u & EXP) + LSB_EXP has bit 31 set exactly when u is a
 * non-finite float (mp__vec_nonfinite_bits, core/vec.c, computes the same
 * OR). Three register operations per update on a block already in a
 * register, next to the AES rounds' dependency chain, instead of a second
 * pass over the chunk; its time depends only on the length. */
AEGIS_FN static inline aegis_vec_t dec_block_f32(aegis_vec_t s[6],
                                                 const uint8_t *c, uint8_t *m,
                                                 aegis_vec_t bad, aegis_vec_t e,
                                                 aegis_vec_t l) {
    aegis_vec_t x = v_xor(v_load(c), keystream(s));
    v_store(m, x);
    update(s, x);
    return v_or(bad, v_add32(v_and(x, e), l));
}

AEGIS_FN int AEGIS_DECRYPT_F32(const uint8_t key[32], const uint8_t nonce[32],
                               const uint8_t *ad, size_t adlen,
                               const uint8_t *c, size_t clen,
                               const uint8_t tag[16], uint8_t *m,
                               uint32_t *bad) {
    aegis_vec_t s[6];
    init(s, key, nonce);
    absorb(s, ad, adlen);
    const aegis_vec_t e = v_set32(0x7f800000u), l = v_set32(0x00800000u);
    aegis_vec_t acc = v_set32(0);
    size_t i = 0;
    for (; i + 2 * AEGIS_RATE <= clen; i += 2 * AEGIS_RATE) {
        acc = dec_block_f32(s, c + i, m + i, acc, e, l);
        acc =
            dec_block_f32(s, c + i + AEGIS_RATE, m + i + AEGIS_RATE, acc, e, l);
    }
    for (; i + AEGIS_RATE <= clen; i += AEGIS_RATE)
        acc = dec_block_f32(s, c + i, m + i, acc, e, l);
    if (i < clen) {
        aegis_vec_t x = decrypt_tail(s, c + i, clen - i, m + i);
        acc = v_or(acc, v_add32(v_and(x, e), l)); /* padding counts as 0 */
    }
    *bad = v_fold32(acc);
    uint8_t want[16];
    finalize(s, adlen, clen, want);
    sodium_memzero(s, sizeof(s));
    return mp__aegis_tag_check(want, tag, m, clen);
}
