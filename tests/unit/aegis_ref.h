/* SPDX-License-Identifier: MIT */
/*
 * aegis_ref.h - a reference implementation of AEGIS-256 and AEGIS-256X
 * (draft-irtf-cfrg-aegis-aead, 128-bit tags) for the tests only, written
 * from the draft's pseudocode and FIPS-197's AES round in portable C: no
 * intrinsics, no tables copied from anywhere (the S-box is computed from
 * its definition), one byte at a time, nothing shared with
 * src/crypto/aegis*.c. It is slow on purpose: clear enough to check line
 * by line against the text, and then used to check the production code.
 * D (the degree of parallelism) is 1 for AEGIS-256, 2 for AEGIS-256X2 and
 * 4 for AEGIS-256X4; the draft defines AEGIS-256X with D = 1 to be
 * AEGIS-256. Pure functions of their arguments; no allocation.
 */
#ifndef MOSHPIT_TEST_AEGIS_REF_H
#define MOSHPIT_TEST_AEGIS_REF_H

#include <stddef.h>
#include <stdint.h>

#define AEGIS_REF_DMAX 4

/* The AES S-box, computed by aegis_ref_init. */
typedef struct aegis_ref {
    uint8_t sbox[256];
} aegis_ref_t;

/* The state of AEGIS-256X of degree d: v[j][i] is V[j,i] of the draft,
 * the j-th AES block of the i-th AEGIS-256 state. */
typedef struct aegis_ref_state {
    const aegis_ref_t *ref;
    unsigned d;
    uint8_t v[6][AEGIS_REF_DMAX][16];
} aegis_ref_state_t;

/* Fills r->sbox from FIPS-197 section 5.1.1: the multiplicative inverse in
 * GF(2^8) followed by the affine transformation. */
void aegis_ref_init(aegis_ref_t *r);

/* AESRound(in, rk): SubBytes, ShiftRows, MixColumns, AddRoundKey. */
void aegis_ref_aes_round(const aegis_ref_t *r, const uint8_t in[16],
                         const uint8_t rk[16], uint8_t out[16]);

/* Init(key, nonce) for degree d (1, 2 or 4). */
void aegis_ref_state_init(aegis_ref_state_t *st, const aegis_ref_t *r,
                          unsigned d, const uint8_t key[32],
                          const uint8_t nonce[32]);

/* Update(M), M of 16 * d bytes. */
void aegis_ref_update(aegis_ref_state_t *st, const uint8_t *m);

/* Encrypt(msg, ad, key, nonce) with a 128-bit tag; ct has mlen bytes. */
void aegis_ref_encrypt(const aegis_ref_t *r, unsigned d, const uint8_t key[32],
                       const uint8_t nonce[32], const uint8_t *ad, size_t adlen,
                       const uint8_t *msg, size_t mlen, uint8_t *ct,
                       uint8_t tag[16]);

/* Decrypt(ct, tag, ad, key, nonce): 0 and msg[0..clen), or -1 with msg
 * zeroed when the tag does not verify. */
int aegis_ref_decrypt(const aegis_ref_t *r, unsigned d, const uint8_t key[32],
                      const uint8_t nonce[32], const uint8_t *ad, size_t adlen,
                      const uint8_t *ct, size_t clen, const uint8_t tag[16],
                      uint8_t *msg);

#endif
