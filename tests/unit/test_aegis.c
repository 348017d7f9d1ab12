/* SPDX-License-Identifier: MIT */
/*
 * test_aegis.c - unit tests of the AEGIS-256 and AEGIS-256X2
 * implementations (src/crypto/aegis.h), each where the CPU runs it: known
 * answers from draft-irtf-cfrg-aegis-aead (AEGIS-256 test vectors 1 to 9,
 * AEGIS-256X2 1 and 2) and every case of Wycheproof's aegis256_test.json
 * (tests/vectors/wycheproof: 360 valid, with messages and associated data
 * of 0 to 513 bytes, and 112 to refuse, modified tags and tags of an old
 * 6-round finalization), with the count printed; every
 * flipped bit of ciphertext, tag, associated data or nonce is refused and
 * leaves zeros, not plaintext, in the output; sealing in place; long
 * messages of every length around the 16- and 32-byte loop boundaries
 * round-trip; the decryption scan sees every byte once, in order; and the
 * decryption with the fused float scan gives the plaintext and the
 * verdict (bit 31) mp__vec_nonfinite_bits computes over it (NaN and
 * infinities in a whole block, in a partial last block, or nowhere), and
 * refuses a forged
 * tag leaving zeros. Skipped
 * (and says so) where the CPU or build has no AES-NI.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "crypto/aegis.h"
#include "crypto/cpu.h"

#include "test_util.h"
#include "wycheproof.h"

typedef struct vec {
    const char *name, *key, *nonce, *ad, *msg, *ct, *tag;
    int valid;
} vec_t;

/* AEGIS-256, the draft's test vectors 1 to 9 (6 to 9 must be refused; they
 * give no message). Wycheproof's file is read whole in test_wycheproof. */
static const vec_t VECS[] = {
    {"draft TV1",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000", "",
     "00000000000000000000000000000000", "754fc3d8c973246dcc6d741412a4b236",
     "3fe91994768b332ed7f570a19ec5896e", 1},
    {"draft TV2",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000", "", "",
     "", "e3def978a0f054afd1e761d7553afba3", 1},
    {"draft TV3",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "0001020304050607",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
     "f373079ed84b2709faee373584585d60accd191db310ef5d8b11833df9dec711",
     "8d86f91ee606e9ff26a01b64ccbdd91d", 1},
    {"draft TV4",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "0001020304050607", "000102030405060708090a0b0c0d",
     "f373079ed84b2709faee37358458", "c60b9c2d33ceb058f96e6dd03c215652", 1},
    {"draft TV5",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021"
     "2223242526272829",
     "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031"
     "323334353637",
     "57754a7d09963e7c787583a2e7b859bb24fa1e04d49fd550b2511a358e3bca252a9b"
     "1b8b30cc4a67",
     "ab8a7d53fd0e98d727accca94925e128", 1},
    {"draft TV6 (key and nonce swapped)",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "0001020304050607", NULL, "f373079ed84b2709faee37358458",
     "c60b9c2d33ceb058f96e6dd03c215652", 0},
    {"draft TV7 (ciphertext changed)",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "0001020304050607", NULL, "f373079ed84b2709faee37358459",
     "c60b9c2d33ceb058f96e6dd03c215652", 0},
    {"draft TV8 (associated data changed)",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "0001020304050608", NULL, "f373079ed84b2709faee37358458",
     "c60b9c2d33ceb058f96e6dd03c215652", 0},
    {"draft TV9 (tag changed)",
     "1001000000000000000000000000000000000000000000000000000000000000",
     "1000020000000000000000000000000000000000000000000000000000000000",
     "0001020304050607", NULL, "f373079ed84b2709faee37358458",
     "c60b9c2d33ceb058f96e6dd03c215653", 0},
};

/* AEGIS-256X2, from the draft. Its test vector 2 appears in two versions
 * (message 04050607... and 05060708... with matching outputs); both are
 * checked. */
static const vec_t VECS_X2[] = {
    {"draft X2 TV1",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
     "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f", "", "",
     "", "62cdbab084c83dacdb945bb446f049c8", 1},
    {"draft X2 TV2",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
     "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f",
     "0102030401020304",
     "04050607040506070405060704050607040506070405060704050607040506070405"
     "06070405060704050607040506070405060704050607040506070405060704050607"
     "04050607040506070405060704050607040506070405060704050607040506070405"
     "060704050607040506070405060704050607",
     "72120c2ea8236180d67859001f4729077b7064c414384fe3a7b52f1571f4f8a7d0f0"
     "1e18db4f3bc0adb150702e5d147a8d36522132761b994c1bd395589e2ccf0790dfe2"
     "a3d12d61cd666b2859827739db4037dd3124c78424459376f6cac08e1a7223a2a43e"
     "398ce6385cd654a19f481cba3b8f25910b42",
     "635d391828520bf1512763f0c8f5cdbd", 1},
    {"draft X2 TV2 (05060708 message)",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
     "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f",
     "0102030401020304",
     "05060708050607080506070805060708050607080506070805060708050607080506"
     "07080506070805060708050607080506070805060708050607080506070805060708"
     "05060708050607080506070805060708050607080506070805060708050607080506"
     "070805060708050607080506070805060708",
     "73110d21a920608fd77b580f1e4428087a7365cb153b4eeca6b62e1a70f7f9a8d1f3"
     "1f17da4c3acfacb2517f2f5e15758c35532e33751a964d18d29a599d2dc07f937833"
     "9b9d8c9fa03d30a4d7837cc8eb8b99bcbba2d11cd1a0f994af2b8f947ef18473bd51"
     "9e5283736758480abc990e79d4ccab93dde9",
     "94a3bd44ad3381e36335014620ee638e", 1},
    {"draft X2 TV2, AEGIS-256X4 tag",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
     "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f", "", "",
     "", "3b7fee6cee7bf17888ad11ed2397beb4", 0},
};

enum { VMAX = 256 };

/* The variant under test: AEGIS-256 or AEGIS-256X2. */
typedef void (*enc_fn)(const uint8_t *, const uint8_t *, const uint8_t *,
                       size_t, const uint8_t *, size_t, uint8_t *, uint8_t *);
typedef int (*dec_fn)(const uint8_t *, const uint8_t *, const uint8_t *, size_t,
                      const uint8_t *, size_t, const uint8_t *, uint8_t *,
                      mp_aegis_scan_fn, void *);
typedef int (*dec_f32_fn)(const uint8_t *, const uint8_t *, const uint8_t *,
                          size_t, const uint8_t *, size_t, const uint8_t *,
                          uint8_t *, uint32_t *);
static enc_fn enc_impl;
static dec_fn dec_impl;
static dec_f32_fn dec_f32_impl;

static void enc(const uint8_t key[32], const uint8_t nonce[32],
                const uint8_t *ad, size_t adlen, const uint8_t *m, size_t mlen,
                uint8_t *c, uint8_t tag[16]) {
    enc_impl(key, nonce, ad, adlen, m, mlen, c, tag);
}

static int dec(const uint8_t key[32], const uint8_t nonce[32],
               const uint8_t *ad, size_t adlen, const uint8_t *c, size_t clen,
               const uint8_t tag[16], uint8_t *m) {
    return dec_impl(key, nonce, ad, adlen, c, clen, tag, m, NULL, NULL);
}

/* What a scan saw: the chunks must tile the output in order. */
typedef struct scan_log {
    const uint8_t *base;
    size_t next, calls, bad;
    uint64_t sum;
} scan_log_t;

static void scan_cb(void *ctx, const uint8_t *m, size_t len) {
    scan_log_t *l = ctx;
    l->bad += m != l->base + l->next;
    l->bad += len == 0 || len > MP_AEGIS_SCAN_CHUNK;
    l->bad += l->next % 16 != 0;
    for (size_t i = 0; i < len; i++)
        l->sum += m[i];
    l->next += len;
    l->calls++;
}

static size_t unhex(const char *h, uint8_t *out) {
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        CHECK(sscanf(h + 2 * i, "%2x", &v) == 1, "bad hex in vector");
        out[i] = (uint8_t)v;
    }
    return n;
}

static void test_vectors(const vec_t *vecs, size_t nvecs) {
    for (size_t v = 0; v < nvecs; v++) {
        const vec_t *t = &vecs[v];
        uint8_t key[32], nonce[32], ad[VMAX], msg[VMAX], ct[VMAX], tag[16];
        uint8_t out[VMAX], otag[16];
        unhex(t->key, key);
        unhex(t->nonce, nonce);
        size_t adlen = unhex(t->ad, ad), clen = unhex(t->ct, ct);
        size_t mlen = t->msg != NULL ? unhex(t->msg, msg) : clen;
        unhex(t->tag, tag);
        CHECK(clen == mlen, "%s: lengths", t->name);
        if (t->msg != NULL) {
            enc(key, nonce, ad, adlen, msg, mlen, out, otag);
            CHECK(memcmp(out, ct, clen) == 0, "%s: ciphertext", t->name);
            CHECK((memcmp(otag, tag, 16) == 0) == t->valid, "%s: tag %s",
                  t->name, t->valid ? "differs" : "matches an invalid one");
        }
        memset(out, 0xaa, sizeof(out));
        int rc = dec(key, nonce, ad, adlen, ct, clen, tag, out);
        CHECK((rc == 0) == t->valid, "%s: decrypt returned %d", t->name, rc);
        if (t->valid) {
            CHECK(memcmp(out, msg, mlen) == 0, "%s: plaintext", t->name);
        } else {
            uint8_t zero[VMAX] = {0};
            CHECK(memcmp(out, zero, clen) == 0,
                  "%s: plaintext left after a refused tag", t->name);
        }
    }
}

/* Every single flipped bit of what is authenticated is refused. */
static void test_tamper(void) {
    uint8_t key[32], nonce[32], ad[40], m[100], c[100], tag[16], out[100];
    for (int i = 0; i < 32; i++) {
        key[i] = (uint8_t)(3 * i + 1);
        nonce[i] = (uint8_t)(7 * i + 2);
    }
    for (int i = 0; i < 40; i++)
        ad[i] = (uint8_t)i;
    for (int i = 0; i < 100; i++)
        m[i] = (uint8_t)(i * i);
    enc(key, nonce, ad, sizeof(ad), m, sizeof(m), c, tag);
    int accepted = 0;
    for (size_t bit = 0; bit < 8 * sizeof(c); bit++) {
        c[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted +=
            dec(key, nonce, ad, sizeof(ad), c, sizeof(c), tag, out) == 0;
        c[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    for (size_t bit = 0; bit < 128; bit++) {
        tag[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted +=
            dec(key, nonce, ad, sizeof(ad), c, sizeof(c), tag, out) == 0;
        tag[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    for (size_t bit = 0; bit < 8 * sizeof(ad); bit++) {
        ad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted +=
            dec(key, nonce, ad, sizeof(ad), c, sizeof(c), tag, out) == 0;
        ad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    for (size_t bit = 0; bit < 256; bit++) {
        nonce[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted +=
            dec(key, nonce, ad, sizeof(ad), c, sizeof(c), tag, out) == 0;
        nonce[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK(accepted == 0, "%d tampered inputs accepted", accepted);
    CHECK(dec(key, nonce, ad, sizeof(ad) - 1, c, sizeof(c), tag, out) != 0,
          "shorter associated data accepted");
    CHECK(dec(key, nonce, ad, sizeof(ad), c, sizeof(c) - 1, tag, out) != 0,
          "truncated ciphertext accepted");
    CHECK(dec(key, nonce, ad, sizeof(ad), c, sizeof(c), tag, out) == 0 &&
              memcmp(out, m, sizeof(m)) == 0,
          "the untampered message does not open");
}

/* Lengths around the loop boundaries, in place and out of place. */
static void test_lengths(void) {
    enum { MAXL = 300 };
    uint8_t key[32] = {9}, nonce[32] = {4}, m[MAXL], c[MAXL], buf[MAXL];
    uint8_t tag[16], tag2[16];
    uint64_t s = 42;
    for (int i = 0; i < MAXL; i++)
        m[i] = (uint8_t)test_splitmix64(&s);
    int bad = 0;
    for (size_t len = 0; len < MAXL; len++) {
        enc(key, nonce, m, len % 37, m, len, c, tag);
        memcpy(buf, m, len);
        enc(key, nonce, m, len % 37, buf, len, buf, tag2);
        bad += memcmp(buf, c, len) != 0 || memcmp(tag, tag2, 16) != 0;
        bad += dec(key, nonce, m, len % 37, buf, len, tag, buf) != 0 ||
               memcmp(buf, m, len) != 0;
        /* a prefix of the ciphertext is the ciphertext of the prefix */
        if (len > 0) {
            enc(key, nonce, m, len % 37, m, len - 1, buf, tag2);
            bad += memcmp(buf, c, len - 1) != 0;
        }
    }
    CHECK(bad == 0, "%d length checks failed", bad);
}

/* The scan sees every plaintext byte once, in order, in chunks that are
 * multiples of 16 bytes but the last, and decryption is unchanged by it. */
static void test_scan(void) {
    static uint8_t m[3 * MP_AEGIS_SCAN_CHUNK + 40], c[sizeof(m)],
        out[sizeof(m)], out2[sizeof(m)];
    uint8_t key[32] = {1}, nonce[32] = {2}, tag[16];
    static const size_t lens[] = {0,
                                  1,
                                  15,
                                  16,
                                  MP_AEGIS_SCAN_CHUNK - 1,
                                  MP_AEGIS_SCAN_CHUNK,
                                  MP_AEGIS_SCAN_CHUNK + 5,
                                  2 * MP_AEGIS_SCAN_CHUNK,
                                  sizeof(m)};
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof(m); i++)
        m[i] = (uint8_t)test_splitmix64(&s);
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        enc(key, nonce, NULL, 0, m, len, c, tag);
        scan_log_t lg = {.base = out};
        int rc = dec_impl(key, nonce, NULL, 0, c, len, tag, out, scan_cb, &lg);
        uint64_t want = 0;
        for (size_t i = 0; i < len; i++)
            want += m[i];
        CHECK(rc == 0 && memcmp(out, m, len) == 0, "len %zu: open", len);
        CHECK(lg.bad == 0 && lg.next == len && lg.sum == want,
              "len %zu: scan saw %zu bytes in %zu calls, %zu bad", len, lg.next,
              lg.calls, lg.bad);
        CHECK(dec(key, nonce, NULL, 0, c, len, tag, out2) == 0 &&
                  memcmp(out2, out, len) == 0,
              "len %zu: scan changes decryption", len);
    }
}

/* The fused float scan: for lengths around the block and chunk sizes, and
 * a non-finite value (NaN, +inf, -inf, or none) at the start, in the
 * middle, or as the last float, it returns the plaintext and the verdict
 * of the separate scan; a forged tag is refused and leaves zeros. */
static void test_f32(void) {
    enum { NF = 2 * MP_AEGIS_SCAN_CHUNK / 4 + 13 };
    static float x[NF], out[NF];
    static uint8_t c[sizeof(x)];
    static const size_t lens[] = {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 100, NF};
    static const uint32_t bad_bits[] = {0x7fc00000u, 0x7f800000u, 0xff800000u,
                                        0x7f800001u, 0};
    uint8_t key[32] = {3}, nonce[32] = {4}, tag[16];
    uint64_t s = 11;
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t n = lens[k];
        for (size_t b = 0; b < sizeof(bad_bits) / sizeof(bad_bits[0]); b++) {
            for (size_t where = 0; where < 3; where++) {
                for (size_t i = 0; i < n; i++)
                    x[i] =
                        (float)(int32_t)(test_splitmix64(&s) >> 40) / 1024.0f;
                size_t at = where == 0 ? 0 : where == 1 ? n / 2 : n - 1;
                if (n > 0 && bad_bits[b] != 0)
                    memcpy(&x[at], &bad_bits[b], 4);
                enc(key, nonce, NULL, 0, (const uint8_t *)x, n * 4, c, tag);
                uint32_t bits = 0xdeadbeefu;
                int rc = dec_f32_impl(key, nonce, NULL, 0, c, n * 4, tag,
                                      (uint8_t *)out, &bits);
                uint32_t want = mp__vec_nonfinite_bits(x, n);
                CHECK(rc == 0 && memcmp(out, x, n * 4) == 0,
                      "f32 %zu floats: open", n);
                CHECK((bits & MP_VEC_NONFINITE) == (want & MP_VEC_NONFINITE),
                      "f32 %zu floats, %08x at %zu: bits %08x, the separate "
                      "scan %08x",
                      n, (unsigned)bad_bits[b], at, (unsigned)bits,
                      (unsigned)want);
                CHECK(((bits & MP_VEC_NONFINITE) != 0) ==
                          (n > 0 && bad_bits[b] != 0),
                      "f32 %zu floats, %08x: wrong verdict", n,
                      (unsigned)bad_bits[b]);
                if (n == 0)
                    continue;
                tag[0] ^= 1;
                memset(out, 0xaa, n * 4);
                rc = dec_f32_impl(key, nonce, NULL, 0, c, n * 4, tag,
                                  (uint8_t *)out, &bits);
                int zero = 1;
                for (size_t i = 0; i < n * 4; i++)
                    zero &= ((const uint8_t *)out)[i] == 0;
                CHECK(rc != 0 && zero,
                      "f32 %zu floats: forged tag accepted "
                      "(%d) or plaintext left behind",
                      n, rc);
            }
        }
    }
}

/* What the Wycheproof cases came to. */
typedef struct wp_tally {
    long valid, invalid, acceptable, last_id;
} wp_tally_t;

/* One Wycheproof case against the variant under test: a valid one
 * encrypts to its ciphertext and tag and decrypts to its message; an
 * invalid one is not what encryption gives, and decryption refuses it and
 * leaves zeros. */
static void wp_case(void *ctx, const wp_aead_case_t *c) {
    wp_tally_t *t = ctx;
    CHECK(c->tc_id > t->last_id, "tcId %ld after %ld", c->tc_id, t->last_id);
    t->last_id = c->tc_id;
    if (c->key_len != 32 || c->iv_len != 32 || c->tag_len != 16 ||
        c->ct_len != c->msg_len) {
        CHECK(0, "tcId %ld: not AEGIS-256 sizes (key %zu, nonce %zu, tag %zu)",
              c->tc_id, c->key_len, c->iv_len, c->tag_len);
        return;
    }
    uint8_t *out = malloc(c->msg_len + 1), tag[16];
    if (out == NULL) {
        CHECK(0, "out of memory");
        return;
    }
    enc(c->key, c->iv, c->aad, c->aad_len, c->msg, c->msg_len, out, tag);
    int same =
        memcmp(out, c->ct, c->ct_len) == 0 && memcmp(tag, c->tag, 16) == 0;
    memset(out, 0xaa, c->msg_len + 1);
    int rc =
        dec(c->key, c->iv, c->aad, c->aad_len, c->ct, c->ct_len, c->tag, out);
    if (c->valid == 1) {
        CHECK(same, "tcId %ld: encryption differs", c->tc_id);
        CHECK(rc == 0 && memcmp(out, c->msg, c->msg_len) == 0,
              "tcId %ld: decryption failed (%d) or differs", c->tc_id, rc);
        t->valid++;
    } else if (c->valid == 0) {
        int zero = 1;
        for (size_t i = 0; i < c->msg_len; i++)
            zero &= out[i] == 0;
        CHECK(!same, "tcId %ld: an invalid case is what encryption gives",
              c->tc_id);
        CHECK(rc != 0 && zero,
              "tcId %ld: accepted (%d) or plaintext left behind", c->tc_id, rc);
        t->invalid++;
    } else {
        t->acceptable++; /* either answer is right */
    }
    free(out);
}

/* Every case of Wycheproof's aegis256_test.json, valid and invalid. */
static void test_wycheproof(void) {
    const char *path = MP_VECTORS_DIR "/wycheproof/aegis256_test.json";
    wp_tally_t t = {.last_id = 0};
    long declared = 0, count = 0;
    int rc = wp_aead_each(path, wp_case, &t, &declared, &count);
    CHECK(rc == 0, "cannot read %s", path);
    CHECK(count > 0 && count == declared,
          "%ld cases read, the file says numberOfTests %ld", count, declared);
    printf("test_aegis: Wycheproof aegis256_test.json: %ld of %ld cases "
           "checked (%ld valid, %ld invalid, %ld acceptable)\n",
           t.valid + t.invalid + t.acceptable, declared, t.valid, t.invalid,
           t.acceptable);
}

static void run_all(const char *name, const vec_t *vecs, size_t nvecs) {
    long before = test_failures;
    test_vectors(vecs, nvecs);
    test_tamper();
    test_lengths();
    test_scan();
    test_f32();
    if (test_failures != before)
        fprintf(stderr, "test_aegis: %s failed\n", name);
}

int main(void) {
    if (mp__aegis256_available()) {
        enc_impl = mp__aegis256_encrypt;
        dec_impl = mp__aegis256_decrypt;
        dec_f32_impl = mp__aegis256_decrypt_f32;
        run_all("AEGIS-256", VECS, sizeof(VECS) / sizeof(VECS[0]));
        test_wycheproof();
    } else {
        /* a build with the code (not 32-bit ARM) on a CPU that has the
         * instructions must pass the known answer test; else the variant
         * is off and nothing here would run */
        CHECK(!MP_AEGIS256_BUILT || !(mp__cpu_features() & MP_CPU_AES),
              "AES instructions but AEGIS-256 unavailable: its "
              "known answer test failed");
        printf(
            "test_aegis: no AES instructions in this build or CPU, AEGIS-256 "
            "skipped\n");
    }
    if (mp__aegis256x2_available()) {
        enc_impl = mp__aegis256x2_encrypt;
        dec_impl = mp__aegis256x2_decrypt;
        dec_f32_impl = mp__aegis256x2_decrypt_f32;
        run_all("AEGIS-256X2", VECS_X2, sizeof(VECS_X2) / sizeof(VECS_X2[0]));
    } else {
        CHECK(!mp__cpu_has_vaes_avx2(), "VAES but AEGIS-256X2 unavailable: "
                                        "its known answer test failed");
        printf("test_aegis: no VAES in this build or CPU, AEGIS-256X2 "
               "skipped\n");
    }
    return test_summary("test_aegis");
}
