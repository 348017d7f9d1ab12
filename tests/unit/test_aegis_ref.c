/* SPDX-License-Identifier: MIT */
/*
 * test_aegis_ref.c - the production AEGIS-256 and AEGIS-256X2 code
 * (src/crypto/aegis*.c, AES-NI / VAES) against an independent reference
 * written from the specification (tests/unit/aegis_ref.c: portable C,
 * software AES round). No AEGIS implementation comes with Debian 12's
 * packages (libsodium 1.0.18 predates AEGIS, which came in 1.0.19; OpenSSL
 * 3.0 has none), so the reference is the second implementation.
 *
 * First the reference itself is checked: the draft's AESRound and
 * AEGIS-256 Update test vectors, AEGIS-256 test vectors 1 to 9, the
 * AEGIS-256X2 and AEGIS-256X4 states after initialization and their test
 * vectors, and every case of Wycheproof's aegis256_test.json. Then both
 * variants, where this CPU runs them, are compared with it on random
 * inputs (key, nonce, and message and associated data of 0 to 1040 bytes
 * each, from a fixed seed): the same ciphertext and tag; each side opens
 * what the other sealed (the production side half the time with the
 * decryption scan on, and sometimes in place); a flipped bit of the
 * ciphertext, tag or associated data is refused by both, with zeros left.
 *
 *   test_aegis_ref [cases per variant (default 10000, or the environment's
 *                   MP_AEGIS_REF_CASES)] [seed]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aegis_ref.h"
#include "crypto/aegis.h"
#include "crypto/cpu.h"

#include "test_util.h"
#include "wycheproof.h"

enum { HEXMAX = 512 };

static size_t unhex(const char *h, uint8_t *out) {
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n && i < HEXMAX; i++) {
        unsigned v = 0;
        CHECK(sscanf(h + 2 * i, "%2x", &v) == 1, "bad hex in vector");
        out[i] = (uint8_t)v;
    }
    return n;
}

/* ---- the reference against the draft and Wycheproof ---- */

static void test_aes_round(const aegis_ref_t *r) {
    uint8_t in[16], rk[16], want[16], out[16];
    unhex("000102030405060708090a0b0c0d0e0f", in);
    unhex("101112131415161718191a1b1c1d1e1f", rk);
    unhex("7a7b4e5638782546a8c0477a3b813f43", want);
    aegis_ref_aes_round(r, in, rk, out);
    CHECK(memcmp(out, want, 16) == 0, "AESRound test vector");
    /* FIPS-197's S-box: S(00) = 63, S(53) = ed, S(ff) = 16 */
    CHECK(r->sbox[0x00] == 0x63 && r->sbox[0x53] == 0xed &&
              r->sbox[0xff] == 0x16,
          "S-box entries");
}

static void test_update(const aegis_ref_t *r) {
    static const char *const before[6] = {
        "1fa1207ed76c86f2c4bb40e8b395b43e", "b44c375e6c1e1978db64bcd12e9e332f",
        "0dab84bfa9f0226432ff630f233d4e5b", "d7ef65c9b93e8ee60c75161407b066e7",
        "a760bb3da073fbd92bdc24734b1f56fb", "a828a18d6a964497ac6e7e53c5f55c73"};
    static const char *const after[6] = {
        "e6bc643bae82dfa3d991b1b323839dcd", "648578232ba0f2f0a3677f617dc052c3",
        "ea788e0e572044a46059212dd007a789", "2f1498ae19b80da13fba698f088a8590",
        "a54c2ee95e8c2a2c3dae2ec743ae6b86", "a3240fceb68e32d5d114df1b5363ab67"};
    aegis_ref_state_t st = {.ref = r, .d = 1};
    uint8_t m[16], want[16];
    for (int j = 0; j < 6; j++)
        unhex(before[j], st.v[j][0]);
    unhex("b165617ed04ab738afb2612c6d18a1ec", m);
    aegis_ref_update(&st, m);
    for (int j = 0; j < 6; j++) {
        unhex(after[j], want);
        CHECK(memcmp(st.v[j][0], want, 16) == 0, "Update test vector, S%d", j);
    }
}

/* V[j,i] after Init for the draft's X2 and X4 key and nonce. */
static void test_init_state(const aegis_ref_t *r, unsigned d,
                            const char *const *v) {
    uint8_t key[32], nonce[32], want[16];
    for (int k = 0; k < 32; k++) {
        key[k] = (uint8_t)k;
        nonce[k] = (uint8_t)(k + 16);
    }
    aegis_ref_state_t st;
    aegis_ref_state_init(&st, r, d, key, nonce);
    for (int j = 0; j < 6; j++)
        for (unsigned i = 0; i < d; i++) {
            unhex(v[(unsigned)j * d + i], want);
            CHECK(memcmp(st.v[j][i], want, 16) == 0,
                  "AEGIS-256X%u state after Init, V[%d,%u]", d, j, i);
        }
}

typedef struct kat {
    unsigned d;
    const char *key, *nonce, *ad, *msg, *ct, *tag;
    int valid;
} kat_t;

#define K1 "1001000000000000000000000000000000000000000000000000000000000000"
#define N1 "1000020000000000000000000000000000000000000000000000000000000000"
#define KX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define NX "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
#define MX                                                                     \
    "04050607040506070405060704050607040506070405060704050607040506070405"     \
    "06070405060704050607040506070405060704050607040506070405060704050607"     \
    "04050607040506070405060704050607040506070405060704050607040506070405"     \
    "060704050607040506070405060704050607"

/* The draft's test vectors with 128-bit tags (msg NULL: must be refused). */
static const kat_t KATS[] = {
    {1, K1, N1, "", "00000000000000000000000000000000",
     "754fc3d8c973246dcc6d741412a4b236", "3fe91994768b332ed7f570a19ec5896e", 1},
    {1, K1, N1, "", "", "", "e3def978a0f054afd1e761d7553afba3", 1},
    {1, K1, N1, "0001020304050607",
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
     "f373079ed84b2709faee373584585d60accd191db310ef5d8b11833df9dec711",
     "8d86f91ee606e9ff26a01b64ccbdd91d", 1},
    {1, K1, N1, "0001020304050607", "000102030405060708090a0b0c0d",
     "f373079ed84b2709faee37358458", "c60b9c2d33ceb058f96e6dd03c215652", 1},
    {1, K1, N1,
     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122"
     "23242526272829",
     "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132"
     "3334353637",
     "57754a7d09963e7c787583a2e7b859bb24fa1e04d49fd550b2511a358e3bca252a9b1b"
     "8b30cc4a67",
     "ab8a7d53fd0e98d727accca94925e128", 1},
    {1, N1, K1, "0001020304050607", NULL, "f373079ed84b2709faee37358458",
     "c60b9c2d33ceb058f96e6dd03c215652", 0},
    {1, K1, N1, "0001020304050607", NULL, "f373079ed84b2709faee37358459",
     "c60b9c2d33ceb058f96e6dd03c215652", 0},
    {1, K1, N1, "0001020304050608", NULL, "f373079ed84b2709faee37358458",
     "c60b9c2d33ceb058f96e6dd03c215652", 0},
    {1, K1, N1, "0001020304050607", NULL, "f373079ed84b2709faee37358458",
     "c60b9c2d33ceb058f96e6dd03c215653", 0},
    {2, KX, NX, "", "", "", "62cdbab084c83dacdb945bb446f049c8", 1},
    {2, KX, NX, "0102030401020304", MX,
     "72120c2ea8236180d67859001f4729077b7064c414384fe3a7b52f1571f4f8a7d0f01e"
     "18db4f3bc0adb150702e5d147a8d36522132761b994c1bd395589e2ccf0790dfe2a3d1"
     "2d61cd666b2859827739db4037dd3124c78424459376f6cac08e1a7223a2a43e398ce6"
     "385cd654a19f481cba3b8f25910b42",
     "635d391828520bf1512763f0c8f5cdbd", 1},
    {4, KX, NX, "", "", "", "3b7fee6cee7bf17888ad11ed2397beb4", 1},
    {4, KX, NX, "0102030401020304", MX,
     "bfc2085b7e8017da99b0b6d646ae4d01f4ba8f2e7dfca1d759ae48a135139b9aaac6b4"
     "f5db810d426be1fdaff4e1454153a34b11da78ed7e418ee2ee9853042e95536aecbb69"
     "4cea1b16a478eb0d4d1bf6509b1ce652a45af58e0e46ffccfa2d0426e702391d2ff581"
     "3808b81748a490dd656465fed61f09",
     "b63b611b13975e2f3dc3cb6c2397bfcd", 1},
};

static void test_kats(const aegis_ref_t *r) {
    for (size_t v = 0; v < sizeof(KATS) / sizeof(KATS[0]); v++) {
        const kat_t *t = &KATS[v];
        uint8_t key[32], nonce[32], ad[HEXMAX], msg[HEXMAX], ct[HEXMAX];
        uint8_t tag[16], out[HEXMAX], otag[16];
        unhex(t->key, key);
        unhex(t->nonce, nonce);
        unhex(t->tag, tag);
        size_t adlen = unhex(t->ad, ad), clen = unhex(t->ct, ct);
        if (t->msg != NULL) {
            size_t mlen = unhex(t->msg, msg);
            CHECK(mlen == clen, "draft vector %zu: lengths", v);
            aegis_ref_encrypt(r, t->d, key, nonce, ad, adlen, msg, mlen, out,
                              otag);
            CHECK(memcmp(out, ct, clen) == 0 && memcmp(otag, tag, 16) == 0,
                  "draft vector %zu (D = %u): encryption", v, t->d);
        }
        memset(out, 0xaa, sizeof(out));
        int rc = aegis_ref_decrypt(r, t->d, key, nonce, ad, adlen, ct, clen,
                                   tag, out);
        if (t->valid) {
            CHECK(rc == 0 && memcmp(out, msg, clen) == 0,
                  "draft vector %zu (D = %u): decryption", v, t->d);
        } else {
            int zero = 1;
            for (size_t i = 0; i < clen; i++)
                zero &= out[i] == 0;
            CHECK(rc != 0 && zero, "draft vector %zu: not refused", v);
        }
    }
}

typedef struct wp_ref {
    const aegis_ref_t *r;
    long valid, invalid;
} wp_ref_t;

static void wp_case(void *ctx, const wp_aead_case_t *c) {
    wp_ref_t *w = ctx;
    if (c->key_len != 32 || c->iv_len != 32 || c->tag_len != 16 ||
        c->ct_len != c->msg_len) {
        CHECK(0, "tcId %ld: not AEGIS-256 sizes", c->tc_id);
        return;
    }
    uint8_t *out = malloc(c->msg_len + 1), tag[16];
    if (out == NULL) {
        CHECK(0, "out of memory");
        return;
    }
    aegis_ref_encrypt(w->r, 1, c->key, c->iv, c->aad, c->aad_len, c->msg,
                      c->msg_len, out, tag);
    int same =
        memcmp(out, c->ct, c->ct_len) == 0 && memcmp(tag, c->tag, 16) == 0;
    int rc = aegis_ref_decrypt(w->r, 1, c->key, c->iv, c->aad, c->aad_len,
                               c->ct, c->ct_len, c->tag, out);
    if (c->valid == 1) {
        CHECK(same && rc == 0 && memcmp(out, c->msg, c->msg_len) == 0,
              "reference, Wycheproof tcId %ld", c->tc_id);
        w->valid++;
    } else if (c->valid == 0) {
        CHECK(!same && rc != 0, "reference accepts Wycheproof tcId %ld",
              c->tc_id);
        w->invalid++;
    }
    free(out);
}

static void test_ref_wycheproof(const aegis_ref_t *r) {
    const char *path = MP_VECTORS_DIR "/wycheproof/aegis256_test.json";
    wp_ref_t w = {.r = r};
    long declared = 0, count = 0, before = test_failures;
    CHECK(wp_aead_each(path, wp_case, &w, &declared, &count) == 0,
          "cannot read %s", path);
    CHECK(count > 0 && count == declared && w.valid + w.invalid == count,
          "%ld Wycheproof cases read, %ld declared", count, declared);
    if (test_failures == before)
        printf("test_aegis_ref: the reference passes %ld of %ld Wycheproof "
               "cases (%ld valid, %ld invalid)\n",
               w.valid + w.invalid, declared, w.valid, w.invalid);
}

/* ---- the production code against the reference ---- */

typedef void (*enc_fn)(const uint8_t *, const uint8_t *, const uint8_t *,
                       size_t, const uint8_t *, size_t, uint8_t *, uint8_t *);
typedef int (*dec_fn)(const uint8_t *, const uint8_t *, const uint8_t *, size_t,
                      const uint8_t *, size_t, const uint8_t *, uint8_t *,
                      mp_aegis_scan_fn, void *);

enum { LMAX = 1040 };

/* Sums what the decryption scan saw, to compare with the plaintext. */
typedef struct scan_sum {
    size_t bytes;
    uint64_t sum;
} scan_sum_t;

static void scan_cb(void *ctx, const uint8_t *m, size_t len) {
    scan_sum_t *s = ctx;
    for (size_t i = 0; i < len; i++)
        s->sum += m[i];
    s->bytes += len;
}

static int all_zero(const uint8_t *p, size_t n) {
    int z = 1;
    for (size_t i = 0; i < n; i++)
        z &= p[i] == 0;
    return z;
}

/* A length in 0..LMAX: a quarter of the draws near a block boundary. */
static size_t draw_len(uint64_t *s) {
    uint64_t x = test_splitmix64(s);
    if (x % 4 == 0) {
        size_t base = 32 * (size_t)((x >> 8) % (LMAX / 32 + 1));
        size_t len = base + (size_t)((x >> 32) % 5) - 2;
        return len > LMAX ? (size_t)(x >> 40) % 3 : len;
    }
    return (size_t)((x >> 8) % (LMAX + 1));
}

static void differential(const aegis_ref_t *r, const char *name, unsigned d,
                         enc_fn enc, dec_fn dec, long cases, uint64_t seed) {
    static uint8_t key[32], nonce[32], ad[LMAX], m[LMAX], c_ref[LMAX],
        c_prod[LMAX], out[LMAX + 16];
    uint8_t t_ref[16], t_prod[16];
    uint64_t s = seed;
    long bad_ct = 0, bad_open = 0, bad_tamper = 0, bad_scan = 0;
    long before = test_failures;
    for (long n = 0; n < cases; n++) {
        test_random_bytes(&s, key, 32);
        test_random_bytes(&s, nonce, 32);
        size_t adlen = draw_len(&s), mlen = draw_len(&s);
        test_random_bytes(&s, ad, adlen);
        test_random_bytes(&s, m, mlen);

        aegis_ref_encrypt(r, d, key, nonce, ad, adlen, m, mlen, c_ref, t_ref);
        if (n % 8 == 7) { /* in place */
            memcpy(c_prod, m, mlen);
            enc(key, nonce, ad, adlen, c_prod, mlen, c_prod, t_prod);
        } else {
            enc(key, nonce, ad, adlen, m, mlen, c_prod, t_prod);
        }
        bad_ct +=
            memcmp(c_prod, c_ref, mlen) != 0 || memcmp(t_prod, t_ref, 16) != 0;

        /* each opens what the other sealed */
        scan_sum_t sc = {0};
        int with_scan = (n & 1) != 0;
        memset(out, 0xaa, sizeof(out));
        int rc = dec(key, nonce, ad, adlen, c_ref, mlen, t_ref, out,
                     with_scan ? scan_cb : NULL, &sc);
        bad_open += rc != 0 || memcmp(out, m, mlen) != 0 || out[mlen] != 0xaa;
        if (with_scan) {
            uint64_t want = 0;
            for (size_t i = 0; i < mlen; i++)
                want += m[i];
            bad_scan += sc.bytes != mlen || sc.sum != want;
        }
        memset(out, 0xaa, sizeof(out));
        rc = aegis_ref_decrypt(r, d, key, nonce, ad, adlen, c_prod, mlen,
                               t_prod, out);
        bad_open += rc != 0 || memcmp(out, m, mlen) != 0;

        /* one flipped bit of the ciphertext, the tag or the associated
         * data: both refuse, the production code leaves zeros */
        uint64_t x = test_splitmix64(&s);
        uint8_t tag[16];
        memcpy(tag, t_ref, 16);
        int where = (int)(x % 3);
        if (where == 0 && mlen == 0)
            where = 1;
        if (where == 2 && adlen == 0)
            where = 1;
        uint8_t bit = (uint8_t)(1u << ((x >> 8) % 8));
        if (where == 0)
            c_ref[(x >> 16) % mlen] ^= bit;
        else if (where == 1)
            tag[(x >> 16) % 16] ^= bit;
        else
            ad[(x >> 16) % adlen] ^= bit;
        memset(out, 0xaa, sizeof(out));
        rc = dec(key, nonce, ad, adlen, c_ref, mlen, tag, out, NULL, NULL);
        bad_tamper += rc == 0 || !all_zero(out, mlen);
        rc = aegis_ref_decrypt(r, d, key, nonce, ad, adlen, c_ref, mlen, tag,
                               out);
        bad_tamper += rc == 0 || !all_zero(out, mlen);
    }
    CHECK(bad_ct == 0, "%s: %ld of %ld encryptions differ from the reference",
          name, bad_ct, cases);
    CHECK(bad_open == 0, "%s: %ld failed or wrong openings", name, bad_open);
    CHECK(bad_scan == 0, "%s: %ld scans saw other bytes", name, bad_scan);
    CHECK(bad_tamper == 0, "%s: %ld tampered inputs accepted or not wiped",
          name, bad_tamper);
    if (test_failures == before)
        printf("test_aegis_ref: %s: %ld random cases (seed %llu, message and "
               "associated data 0..%d bytes) agree with the reference: "
               "encryption, decryption both ways, one flipped bit refused\n",
               name, cases, (unsigned long long)seed, LMAX);
}

int main(int argc, char **argv) {
    /* the sanitizer build asks for fewer (MP_AEGIS_REF_CASES): the
     * reference is slow unoptimized */
    const char *env = getenv("MP_AEGIS_REF_CASES");
    long cases = argc > 1      ? strtol(argv[1], NULL, 10)
                 : env != NULL ? strtol(env, NULL, 10)
                               : 10000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20240611u;
    if (cases < 0) {
        fprintf(stderr, "usage: test_aegis_ref [cases] [seed]\n");
        return 2;
    }
    aegis_ref_t r;
    aegis_ref_init(&r);
    test_aes_round(&r);
    test_update(&r);
    static const char *const x2_state[12] = {
        "eca2bf4538442e8712d4972595744039", "201405efa9264f07911db58101903087",
        "3e536a998799408a97f3479a6f779d48", "0d79a7d822a5d215f78c3bf2feb33ae1",
        "cf8c63d6f2b4563cdd9231107c85950e", "78d17ed7d8d563ff11bd202c76864839",
        "d7e0707e6bfbbad913bc94b6993a9fa0", "097e4b1bff40d4c19cb29dfd125d62f2",
        "a373cf6d537dd66bc0ef0f2f9285359f", "c0d0ae0c48f9df3faaf0e7be7768c326",
        "9f76560dcae1efacabdcce446ae283bc", "bd52a6b9c8f976a26ec1409df19e8bfe"};
    static const char *const x4_state[24] = {
        "482a86e8436cd2361063a4b2702769b9", "d95a2be81c9245b22996f68eea0122f9",
        "0c2a3b348b1a5e256c6751377318c41e", "f64436a21653fe7cf2e0829a177db383",
        "e705e8866267717d96092e58e78b574c", "d1dd412142df9806cc267af2fe1d830e",
        "30e7dfd3c9941b8394e95bdf5bac99d9", "9f27186f8a4fab86820689822c3c74d2",
        "e1aa6af5d9e31dde8d94a48a0810fa89", "63555cdf0d98f18fb75b029ad80786c0",
        "a3ee0e4a3429a9539e4fcec385475608", "28ea527d31ef61df498dc107fe02df99",
        "37f06808410c8f3954525ae44584d3be", "8fcc23bca2fe2209f93d34e2da35b33d",
        "33156347df89eaa69ab11096362daccf", "bbe58d9dbe8c5b0469be5a87086db5d4",
        "d1c9eb37fecbc5ada7b351fa4f501f32", "0b9b803283c1538628b507c8f6432434",
        "bfb8b6d4f87cce28825c7e92f54b8728", "8917bb5b09c32f900c6a5a1d63c46264",
        "4f6110c2ef0c3c687e90c1e5532ddf8e", "031bd85d99f64684d23728a0453c72a1",
        "10bc7ec34d4119b5bdeb6c7dfc458247", "591ece530aeaa5c9867220156f5c25e3"};
    test_init_state(&r, 2, x2_state);
    test_init_state(&r, 4, x4_state);
    test_kats(&r);
    test_ref_wycheproof(&r);
    if (test_failures != 0) {
        fprintf(stderr, "test_aegis_ref: the reference itself is wrong, no "
                        "comparison made\n");
        return test_summary("test_aegis_ref");
    }
    printf("test_aegis_ref: the reference matches the draft's AESRound, "
           "Update, AEGIS-256, AEGIS-256X2 and AEGIS-256X4 vectors\n");

    if (mp__aegis256_available())
        differential(&r, "AEGIS-256", 1, mp__aegis256_encrypt,
                     mp__aegis256_decrypt, cases, seed);
    else
        CHECK(!MP_AEGIS256_BUILT || !(mp__cpu_features() & MP_CPU_AES),
              "AES instructions but AEGIS-256 unavailable");
    if (mp__aegis256x2_available())
        differential(&r, "AEGIS-256X2", 2, mp__aegis256x2_encrypt,
                     mp__aegis256x2_decrypt, cases, seed + 1);
    else
        CHECK(!mp__cpu_has_vaes_avx2(), "VAES but AEGIS-256X2 unavailable");
    if (!mp__aegis256_available() && !mp__aegis256x2_available())
        printf("test_aegis_ref: no AEGIS variant runs here, comparison "
               "skipped\n");
    return test_summary("test_aegis_ref");
}
