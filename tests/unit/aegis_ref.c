/* SPDX-License-Identifier: MIT */
/*
 * aegis_ref.c - reference AEGIS-256 / AEGIS-256X for the tests (see
 * aegis_ref.h). Each function follows one section of the draft (or of
 * FIPS-197 for the AES round) and is named after it; comments quote the
 * pseudocode being implemented. Blocks are byte strings; AES maps a block
 * b[0..16) to its state as s[r][c] = b[r + 4c].
 */
#include "aegis_ref.h"

#include <string.h>

/* ---- FIPS-197 ---- */

/* xtime (FIPS-197 section 4.2.1): multiplication by {02}. */
static uint8_t xtime(uint8_t a) {
    return (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1b : 0x00));
}

/* Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1. */
static uint8_t gmul(uint8_t a, uint8_t b) {
    uint8_t p = 0;
    for (int i = 0; i < 8; i++) {
        if (b & 1)
            p ^= a;
        uint8_t hi = a & 0x80;
        a = (uint8_t)(a << 1);
        if (hi)
            a ^= 0x1b;
        b >>= 1;
    }
    return p;
}

void aegis_ref_init(aegis_ref_t *r) {
    for (unsigned x = 0; x < 256; x++) {
        /* the multiplicative inverse, {00} mapped to itself */
        uint8_t inv = 0;
        for (unsigned y = 1; y < 256 && x != 0; y++)
            if (gmul((uint8_t)x, (uint8_t)y) == 1) {
                inv = (uint8_t)y;
                break;
            }
        /* b'i = bi ^ b(i+4)%8 ^ b(i+5)%8 ^ b(i+6)%8 ^ b(i+7)%8 ^ ci,
         * c = {63} */
        uint8_t out = 0;
        for (int i = 0; i < 8; i++) {
            unsigned bit = ((unsigned)inv >> i) ^
                           ((unsigned)inv >> ((i + 4) % 8)) ^
                           ((unsigned)inv >> ((i + 5) % 8)) ^
                           ((unsigned)inv >> ((i + 6) % 8)) ^
                           ((unsigned)inv >> ((i + 7) % 8)) ^ (0x63u >> i);
            out |= (uint8_t)((bit & 1u) << i);
        }
        r->sbox[x] = out;
    }
}

void aegis_ref_aes_round(const aegis_ref_t *r, const uint8_t in[16],
                         const uint8_t rk[16], uint8_t out[16]) {
    uint8_t s[4][4], t[4][4];
    /* SubBytes */
    for (int c = 0; c < 4; c++)
        for (int row = 0; row < 4; row++)
            s[row][c] = r->sbox[in[row + 4 * c]];
    /* ShiftRows: s'[r][c] = s[r][(c + r) mod 4] */
    for (int row = 0; row < 4; row++)
        for (int c = 0; c < 4; c++)
            t[row][c] = s[row][(c + row) % 4];
    /* MixColumns: {02} a = xtime(a), {03} a = xtime(a) ^ a */
    for (int c = 0; c < 4; c++) {
        uint8_t a0 = t[0][c], a1 = t[1][c], a2 = t[2][c], a3 = t[3][c];
        s[0][c] = (uint8_t)(xtime(a0) ^ (xtime(a1) ^ a1) ^ a2 ^ a3);
        s[1][c] = (uint8_t)(a0 ^ xtime(a1) ^ (xtime(a2) ^ a2) ^ a3);
        s[2][c] = (uint8_t)(a0 ^ a1 ^ xtime(a2) ^ (xtime(a3) ^ a3));
        s[3][c] = (uint8_t)((xtime(a0) ^ a0) ^ a1 ^ a2 ^ xtime(a3));
    }
    /* AddRoundKey */
    for (int c = 0; c < 4; c++)
        for (int row = 0; row < 4; row++)
            out[row + 4 * c] = (uint8_t)(s[row][c] ^ rk[row + 4 * c]);
}

/* ---- draft-irtf-cfrg-aegis-aead, AEGIS-256X ---- */

static const uint8_t C0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                               0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
static const uint8_t C1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                               0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

static void xor16(uint8_t out[16], const uint8_t a[16], const uint8_t b[16]) {
    for (int k = 0; k < 16; k++)
        out[k] = (uint8_t)(a[k] ^ b[k]);
}

/* m = Split(M, 128)
 * for i in 0..D:
 *     V'[0,i] = AESRound(V[5,i], V[0,i] ^ m[i])
 *     V'[1,i] = AESRound(V[0,i], V[1,i])
 *     ...
 *     V'[5,i] = AESRound(V[4,i], V[5,i])
 *     V[j,i] = V'[j,i] */
void aegis_ref_update(aegis_ref_state_t *st, const uint8_t *m) {
    for (unsigned i = 0; i < st->d; i++) {
        uint8_t nv[6][16], x[16];
        xor16(x, st->v[0][i], m + 16 * i);
        aegis_ref_aes_round(st->ref, st->v[5][i], x, nv[0]);
        for (int j = 1; j < 6; j++)
            aegis_ref_aes_round(st->ref, st->v[j - 1][i], st->v[j][i], nv[j]);
        for (int j = 0; j < 6; j++)
            memcpy(st->v[j][i], nv[j], 16);
    }
}

/* for i in 0..D: V[3,i] ^= ctx[i]; V[5,i] ^= ctx[i] */
static void add_ctx(aegis_ref_state_t *st) {
    for (unsigned i = 0; i < st->d; i++) {
        /* ctx[i] = ZeroPad(Byte(i) || Byte(D - 1), 128) */
        uint8_t ctx[16] = {(uint8_t)i, (uint8_t)(st->d - 1)};
        xor16(st->v[3][i], st->v[3][i], ctx);
        xor16(st->v[5][i], st->v[5][i], ctx);
    }
}

void aegis_ref_state_init(aegis_ref_state_t *st, const aegis_ref_t *r,
                          unsigned d, const uint8_t key[32],
                          const uint8_t nonce[32]) {
    const uint8_t *k0 = key, *k1 = key + 16, *n0 = nonce, *n1 = nonce + 16;
    uint8_t k0n0[16], k1n1[16];
    uint8_t k0_v[16 * AEGIS_REF_DMAX], k1_v[16 * AEGIS_REF_DMAX];
    uint8_t k0n0_v[16 * AEGIS_REF_DMAX], k1n1_v[16 * AEGIS_REF_DMAX];
    memset(st, 0, sizeof(*st));
    st->ref = r;
    st->d = d;
    xor16(k0n0, k0, n0);
    xor16(k1n1, k1, n1);
    for (unsigned i = 0; i < d; i++) {
        memcpy(st->v[0][i], k0n0, 16); /* V[0,i] = k0 ^ n0 */
        memcpy(st->v[1][i], k1n1, 16); /* V[1,i] = k1 ^ n1 */
        memcpy(st->v[2][i], C1, 16);   /* V[2,i] = C1 */
        memcpy(st->v[3][i], C0, 16);   /* V[3,i] = C0 */
        xor16(st->v[4][i], k0, C0);    /* V[4,i] = k0 ^ C0 */
        xor16(st->v[5][i], k1, C1);    /* V[5,i] = k1 ^ C1 */
        memcpy(k0_v + 16 * i, k0, 16);
        memcpy(k1_v + 16 * i, k1, 16);
        memcpy(k0n0_v + 16 * i, k0n0, 16);
        memcpy(k1n1_v + 16 * i, k1n1, 16);
    }
    /* Repeat(4, ctx; Update(k0_v); ctx; Update(k1_v); ctx; Update(k0n0_v);
     * ctx; Update(k1n1_v)) */
    for (int rep = 0; rep < 4; rep++) {
        add_ctx(st);
        aegis_ref_update(st, k0_v);
        add_ctx(st);
        aegis_ref_update(st, k1_v);
        add_ctx(st);
        aegis_ref_update(st, k0n0_v);
        add_ctx(st);
        aegis_ref_update(st, k1n1_v);
    }
}

/* z = {}; for i in 0..D: z = z || (V[1,i] ^ V[4,i] ^ V[5,i] ^
 * (V[2,i] & V[3,i])) */
static void keystream(const aegis_ref_state_t *st, uint8_t *z) {
    for (unsigned i = 0; i < st->d; i++)
        for (int k = 0; k < 16; k++)
            z[16 * i + k] =
                (uint8_t)(st->v[1][i][k] ^ st->v[4][i][k] ^ st->v[5][i][k] ^
                          (st->v[2][i][k] & st->v[3][i][k]));
}

/* Enc(xi): z; Update(xi); ci = xi ^ z */
static void enc(aegis_ref_state_t *st, const uint8_t *xi, uint8_t *ci) {
    uint8_t z[16 * AEGIS_REF_DMAX];
    size_t rate = 16u * st->d;
    keystream(st, z);
    aegis_ref_update(st, xi);
    for (size_t k = 0; k < rate; k++)
        ci[k] = (uint8_t)(xi[k] ^ z[k]);
}

/* Dec(ci): z; xi = ci ^ z; Update(xi) */
static void dec(aegis_ref_state_t *st, const uint8_t *ci, uint8_t *xi) {
    uint8_t z[16 * AEGIS_REF_DMAX];
    size_t rate = 16u * st->d;
    keystream(st, z);
    for (size_t k = 0; k < rate; k++)
        xi[k] = (uint8_t)(ci[k] ^ z[k]);
    aegis_ref_update(st, xi);
}

/* DecPartial(cn): z; t = ZeroPad(cn, R); out = t ^ z;
 * xn = Truncate(out, |cn|); v = ZeroPad(xn, 128 * D); Update(v) */
static void dec_partial(aegis_ref_state_t *st, const uint8_t *cn, size_t len,
                        uint8_t *xn) {
    uint8_t z[16 * AEGIS_REF_DMAX], t[16 * AEGIS_REF_DMAX] = {0};
    uint8_t v[16 * AEGIS_REF_DMAX] = {0};
    size_t rate = 16u * st->d;
    keystream(st, z);
    memcpy(t, cn, len);
    for (size_t k = 0; k < rate; k++)
        t[k] = (uint8_t)(t[k] ^ z[k]); /* out */
    memcpy(xn, t, len);
    memcpy(v, xn, len);
    aegis_ref_update(st, v);
}

/* u = LE64(ad_len_bits) || LE64(msg_len_bits)
 * t = {}; for i in 0..D: t = t || (V[3,i] ^ u)
 * Repeat(7, Update(t))
 * tag = 0; for i in 0..D: tag ^= V[0,i] ^ V[1,i] ^ ... ^ V[5,i] */
static void finalize(aegis_ref_state_t *st, size_t adlen, size_t mlen,
                     uint8_t tag[16]) {
    uint8_t u[16], t[16 * AEGIS_REF_DMAX];
    uint64_t ad_bits = (uint64_t)adlen * 8, msg_bits = (uint64_t)mlen * 8;
    for (int k = 0; k < 8; k++) {
        u[k] = (uint8_t)(ad_bits >> (8 * k));
        u[8 + k] = (uint8_t)(msg_bits >> (8 * k));
    }
    for (unsigned i = 0; i < st->d; i++)
        xor16(t + 16 * i, st->v[3][i], u);
    for (int rep = 0; rep < 7; rep++)
        aegis_ref_update(st, t);
    memset(tag, 0, 16);
    for (unsigned i = 0; i < st->d; i++)
        for (int j = 0; j < 6; j++)
            xor16(tag, tag, st->v[j][i]);
}

/* ad_blocks = Split(ZeroPad(ad, R), R); for ai in ad_blocks: Absorb(ai),
 * where Absorb(ai) is Update(ai) */
static void absorb_all(aegis_ref_state_t *st, const uint8_t *ad, size_t adlen) {
    size_t rate = 16u * st->d;
    for (size_t off = 0; off < adlen; off += rate) {
        uint8_t ai[16 * AEGIS_REF_DMAX] = {0};
        memcpy(ai, ad + off, adlen - off < rate ? adlen - off : rate);
        aegis_ref_update(st, ai);
    }
}

/* Init(key, nonce); absorb ad;
 * msg_blocks = Split(ZeroPad(msg, R), R); for xi: ct = ct || Enc(xi)
 * tag = Finalize(|ad|, |msg|); ct = Truncate(ct, |msg|) */
void aegis_ref_encrypt(const aegis_ref_t *r, unsigned d, const uint8_t key[32],
                       const uint8_t nonce[32], const uint8_t *ad, size_t adlen,
                       const uint8_t *msg, size_t mlen, uint8_t *ct,
                       uint8_t tag[16]) {
    aegis_ref_state_t st;
    size_t rate = 16u * d;
    aegis_ref_state_init(&st, r, d, key, nonce);
    absorb_all(&st, ad, adlen);
    for (size_t off = 0; off < mlen; off += rate) {
        size_t n = mlen - off < rate ? mlen - off : rate;
        uint8_t xi[16 * AEGIS_REF_DMAX] = {0}, ci[16 * AEGIS_REF_DMAX];
        memcpy(xi, msg + off, n);
        enc(&st, xi, ci);
        memcpy(ct + off, ci, n);
    }
    finalize(&st, adlen, mlen, tag);
}

/* Init(key, nonce); absorb ad;
 * ct_blocks = Split(ct, R); cn = Tail(ct, |ct| mod R)
 * for ci in ct_blocks: msg = msg || Dec(ci)
 * if cn is not empty: msg = msg || DecPartial(cn)
 * expected_tag = Finalize(|ad|, |msg|)
 * if CtEq(tag, expected_tag) is False: erase msg, fail
 * (The AEGIS-256 section writes Split(ZeroPad(ct, 128), 128) for the
 * blocks, which together with DecPartial would decrypt the last partial
 * block twice; the AEGIS-256X section's Split(ct, R), whole blocks only,
 * is what both mean.) */
int aegis_ref_decrypt(const aegis_ref_t *r, unsigned d, const uint8_t key[32],
                      const uint8_t nonce[32], const uint8_t *ad, size_t adlen,
                      const uint8_t *ct, size_t clen, const uint8_t tag[16],
                      uint8_t *msg) {
    aegis_ref_state_t st;
    size_t rate = 16u * d, whole = clen - clen % rate;
    uint8_t expected[16];
    aegis_ref_state_init(&st, r, d, key, nonce);
    absorb_all(&st, ad, adlen);
    for (size_t off = 0; off < whole; off += rate)
        dec(&st, ct + off, msg + off);
    if (whole < clen)
        dec_partial(&st, ct + whole, clen - whole, msg + whole);
    finalize(&st, adlen, clen, expected);
    uint8_t diff = 0;
    for (int k = 0; k < 16; k++)
        diff |= (uint8_t)(tag[k] ^ expected[k]);
    if (diff != 0) {
        if (clen > 0)
            memset(msg, 0, clen);
        return -1;
    }
    return 0;
}
