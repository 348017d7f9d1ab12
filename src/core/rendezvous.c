/* SPDX-License-Identifier: MIT */
/*
 * rendezvous.c - the rendezvous hash that names the matchmaker of a grid
 * key: a SipHash-2-4 score of (key, member id), and the candidate order by
 * descending score (whole, or only its first k entries). A pure function of
 * its inputs, identical on every peer and platform. Allocation happens only
 * for a score cache, with a fallback that needs none.
 */
#include "core/rendezvous.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/*
 * PROTOCOL CONSTANT. Every peer must compute identical scores forever:
 *
 *   score(key, id) = SipHash-2-4(K, key[0..key_len) || id[0..32))
 *
 * with the standard SipHash-2-4 (Aumasson & Bernstein, 2012; 2 compression
 * rounds, 4 finalization rounds, 64-bit output) and the fixed 16-byte key
 * K = the ASCII bytes "moshpit-rendezv1" (k0 = bytes 0..7, k1 = bytes 8..15,
 * both read little-endian, as in the reference implementation). The score is
 * the 64-bit output as an unsigned integer (the reference implementation
 * serializes it little-endian; libsodium's crypto_shorthash_siphash24 with
 * the same key and message gives the same 8 bytes). Because the id is always
 * 32 bytes and SipHash absorbs the message length, key || id is unambiguous.
 * All words are assembled with explicit shifts, so host endianness never
 * matters. tests/unit/test_match.c pins golden values.
 */
static const uint8_t rdv_key[16] = {'m', 'o', 's', 'h', 'p', 'i', 't', '-',
                                    'r', 'e', 'n', 'd', 'e', 'z', 'v', '1'};

typedef struct sip {
    uint64_t v0, v1, v2, v3;
    uint64_t tail; /* pending bytes, little-endian */
    size_t tail_len;
    size_t total; /* message length so far (only its low byte is used) */
} sip_t;

static uint64_t rotl64(uint64_t x, unsigned b) {
    return (x << b) | (x >> (64u - b));
}

static void sip_round(sip_t *s) {
    s->v0 += s->v1;
    s->v1 = rotl64(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = rotl64(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = rotl64(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = rotl64(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = rotl64(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = rotl64(s->v2, 32);
}

static void sip_block(sip_t *s, uint64_t m) {
    s->v3 ^= m;
    sip_round(s);
    sip_round(s);
    s->v0 ^= m;
}

static void sip_init(sip_t *s, const uint8_t k[16]) {
    uint64_t k0 = mp__load_le64(k), k1 = mp__load_le64(k + 8);
    s->v0 = k0 ^ UINT64_C(0x736f6d6570736575);
    s->v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
    s->v2 = k0 ^ UINT64_C(0x6c7967656e657261);
    s->v3 = k1 ^ UINT64_C(0x7465646279746573);
    s->tail = 0;
    s->tail_len = 0;
    s->total = 0;
}

static void sip_update(sip_t *s, const uint8_t *p, size_t len) {
    s->total += len;
    /* Byte-wise into the tail until it is a full word, then whole words. */
    while (len > 0 && s->tail_len > 0) {
        s->tail |= (uint64_t)*p++ << (8u * s->tail_len);
        len--;
        if (++s->tail_len == 8) {
            sip_block(s, s->tail);
            s->tail = 0;
            s->tail_len = 0;
        }
    }
    for (; len >= 8; p += 8, len -= 8) {
        sip_block(s, mp__load_le64(p));
    }
    for (; len > 0; len--) {
        s->tail |= (uint64_t)*p++ << (8u * s->tail_len++);
    }
}

static uint64_t sip_final(sip_t *s) {
    sip_block(s, s->tail | (uint64_t)(s->total & 0xffu) << 56);
    s->v2 ^= 0xffu;
    for (int i = 0; i < 4; i++) {
        sip_round(s);
    }
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t mp__rendezvous_score(const uint8_t *key, size_t key_len,
                              const uint8_t id[MP_ID_BYTES]) {
    sip_t s;
    sip_init(&s, rdv_key);
    if (key != NULL && key_len > 0) {
        sip_update(&s, key, key_len);
    }
    sip_update(&s, id, MP_ID_BYTES);
    return sip_final(&s);
}

/* Sorting context: scores are cached when memory allows, else recomputed. */
typedef struct rdv_ctx {
    const uint8_t *key;
    size_t key_len;
    const uint8_t (*ids)[MP_ID_BYTES];
    const uint64_t *scores; /* NULL: compute on demand */
} rdv_ctx_t;

static uint64_t rdv_score_of(const rdv_ctx_t *c, uint32_t i) {
    if (c->scores != NULL) {
        return c->scores[i];
    }
    return mp__rendezvous_score(c->key, c->key_len, c->ids[i]);
}

/* True if index a must come before index b: higher score first, then lower
 * id bytes, then (identical ids) lower input index, so the order is total. */
static bool rdv_before(const rdv_ctx_t *c, uint32_t a, uint32_t b) {
    uint64_t sa = rdv_score_of(c, a), sb = rdv_score_of(c, b);
    if (sa != sb) {
        return sa > sb;
    }
    int d = memcmp(c->ids[a], c->ids[b], MP_ID_BYTES);
    if (d != 0) {
        return d < 0;
    }
    return a < b;
}

static void rdv_sift_down(const rdv_ctx_t *c, uint32_t *o, size_t root,
                          size_t n) {
    /* A max-heap on "comes later", so the heap sort yields "before" order. */
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) {
            return;
        }
        if (child + 1 < n && rdv_before(c, o[child], o[child + 1])) {
            child++;
        }
        if (!rdv_before(c, o[root], o[child])) {
            return;
        }
        uint32_t t = o[root];
        o[root] = o[child];
        o[child] = t;
        root = child;
    }
}

void mp__rendezvous_order(const uint8_t *key, size_t key_len,
                          const uint8_t (*ids)[MP_ID_BYTES], size_t n,
                          uint32_t *order) {
    /* order[] holds uint32_t indices: larger inputs cannot be sorted. */
    if (n == 0 || ids == NULL || order == NULL)
        return;
#if SIZE_MAX > UINT32_MAX /* a 32-bit size_t always fits */
    if (n > UINT32_MAX)
        return;
#endif
    /* Scores are cached when the allocation succeeds; without it the same
     * heap sort recomputes them (slower, identical result). Heap sort keeps
     * the fallback free of both recursion and extra memory. */
    uint64_t *scores =
        n > SIZE_MAX / sizeof(uint64_t) ? NULL : malloc(n * sizeof *scores);
    rdv_ctx_t c = {key, key_len, ids, NULL};
    for (size_t i = 0; i < n; i++) {
        order[i] = (uint32_t)i;
        if (scores != NULL) {
            scores[i] = mp__rendezvous_score(key, key_len, ids[i]);
        }
    }
    c.scores = scores;
    for (size_t i = n / 2; i-- > 0;) {
        rdv_sift_down(&c, order, i, n);
    }
    for (size_t end = n; end-- > 1;) {
        uint32_t t = order[0];
        order[0] = order[end];
        order[end] = t;
        rdv_sift_down(&c, order, 0, end);
    }
    free(scores);
}

size_t mp__rendezvous_top(const uint8_t *key, size_t key_len,
                          const uint8_t (*ids)[MP_ID_BYTES], size_t n, size_t k,
                          uint32_t *order) {
    if (n == 0 || k == 0 || ids == NULL || order == NULL)
        return 0;
#if SIZE_MAX > UINT32_MAX /* a 32-bit size_t always fits */
    if (n > UINT32_MAX)
        return 0;
#endif
    if (k > n) {
        k = n;
    }
    /* order[0..m) is kept sorted ("before" first) with the scores of its
     * entries in top[]; a new index enters only if it comes before the last
     * kept one, which for random scores and small k is rare, so almost every
     * index costs one hash and one comparison. Without memory for the
     * scores, kept scores are recomputed: slower, identical result. */
    uint64_t small[64];
    uint64_t *top = small;
    if (k > sizeof small / sizeof small[0]) {
        top = k > SIZE_MAX / sizeof *top ? NULL : malloc(k * sizeof *top);
    }
    rdv_ctx_t c = {key, key_len, ids, NULL};
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = mp__rendezvous_score(key, key_len, ids[i]);
        size_t pos = m < k ? m : k;
        while (pos > 0) {
            uint32_t prev = order[pos - 1];
            uint64_t sp = top != NULL
                              ? top[pos - 1]
                              : mp__rendezvous_score(key, key_len, ids[prev]);
            bool ahead;
            if (s != sp) {
                ahead = s > sp;
            } else {
                /* rdv_before's tie rules: id bytes, then input index */
                ahead = rdv_before(&c, (uint32_t)i, prev);
            }
            if (!ahead) {
                break;
            }
            if (pos < k) {
                order[pos] = prev;
                if (top != NULL) {
                    top[pos] = sp;
                }
            }
            pos--;
        }
        if (pos < k) {
            order[pos] = (uint32_t)i;
            if (top != NULL) {
                top[pos] = s;
            }
            if (m < k) {
                m++;
            }
        }
    }
    if (top != small) {
        free(top);
    }
    return m;
}
