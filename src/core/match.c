/* SPDX-License-Identifier: MIT */
/*
 * match.c - sans-IO matchmaking: the rendezvous hash that names the
 * matchmaker of a grid key, the matchmaker (mp_mm_t) that turns pending JOINs
 * into GROUP / ALONE decisions, and the joiner (mp_joiner_t) that walks the
 * candidate list until it is grouped, told it is alone, or runs out of time.
 * Nothing here reads a clock, touches a socket or draws OS randomness: the
 * driver passes the time and a seed, and sends what the machines ask for.
 * Allocation happens only in the constructors (and, with a fallback that
 * needs none, in mp__rendezvous_order and mp__rendezvous_top).
 */
#include "core/match.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ------------------------------------------------------------------------ */
/* rendezvous hash                                                           */
/* ------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------ */
/* matchmaker                                                                */
/* ------------------------------------------------------------------------ */

#define MP_MM_WINDOW_MAX 60000u
/* How long a key must stay quiet (no new JOIN) before group_size or more
 * pending JOINs are closed: the announced window / MP_MM_QUIET_DIV, at most
 * MP_MM_QUIET_MAX_MS. */
#define MP_MM_QUIET_DIV 16u
#define MP_MM_QUIET_MAX_MS 250u

typedef struct mm_entry {
    mp_member_t m;
    uint64_t ends_ms; /* arrival + announced window (clamped) */
} mm_entry_t;

struct mp_mm {
    uint32_t group_size;
    uint32_t min_group_size;
    uint64_t rng;      /* splitmix64 state */
    uint64_t quiet_at; /* newest JOIN's arrival + its quiet time */
    size_t flush;      /* the oldest `flush` entries are being split now */
    uint32_t grouped;  /* JOINs grouped since none was pending */
    size_t n;          /* pending entries, oldest first */
    mm_entry_t pending[MP_MM_PENDING_MAX];
};

/* splitmix64 (Steele, Lea, Flood 2014). Its output is a bijection of the
 * state counter; the low bits are replaced by the coordinate offset (see
 * mp__group_coord_offset), which leaves 58 random bits: a repeat within one
 * matchmaker is negligible (about 2^-29 after 2^15 groups). 0 is skipped
 * because 0 means "no group" on the API. */
static uint64_t mm_next_group_id(mp_mm_t *mm, uint32_t offset) {
    for (;;) {
        uint64_t z = mp__splitmix64(&mm->rng);
        z = (z & ~(uint64_t)MP_GROUP_OFFSET_MASK) |
            (offset & MP_GROUP_OFFSET_MASK);
        if (z != 0) {
            return z;
        }
    }
}

uint32_t mp__group_coord_offset(uint64_t group_id) {
    return (uint32_t)(group_id & MP_GROUP_OFFSET_MASK);
}

moshpit_err_t mp__mm_new(uint32_t group_size, uint32_t min_group_size,
                         uint64_t seed, mp_mm_t **out) {
    if (out == NULL) {
        return MOSHPIT_EINVAL;
    }
    *out = NULL;
    if (group_size < 2 || group_size > MP_GROUP_MAX ||
        min_group_size > group_size) {
        return MOSHPIT_EINVAL;
    }
    mp_mm_t *mm = calloc(1, sizeof *mm);
    if (mm == NULL) {
        return MOSHPIT_ENOMEM;
    }
    mm->group_size = group_size;
    /* A group of one is not a group: it would be answered ALONE anyway. */
    mm->min_group_size = min_group_size < 2 ? 2 : min_group_size;
    mm->rng = seed;
    *out = mm;
    return MOSHPIT_OK;
}

void mp__mm_free(mp_mm_t *mm) {
    free(mm);
}

static size_t mm_find(const mp_mm_t *mm, const uint8_t id[MP_ID_BYTES]) {
    for (size_t i = 0; i < mm->n; i++) {
        if (memcmp(mm->pending[i].m.id, id, MP_ID_BYTES) == 0) {
            return i;
        }
    }
    return SIZE_MAX;
}

static void mm_remove(mp_mm_t *mm, size_t i) {
    if (i < mm->flush) {
        mm->flush--;
    }
    memmove(&mm->pending[i], &mm->pending[i + 1],
            (mm->n - i - 1) * sizeof mm->pending[0]);
    mm->n--;
}

bool mp__mm_on_join(mp_mm_t *mm, uint64_t now_ms, const mp_member_t *m,
                    uint32_t window_ms) {
    if (mm == NULL || m == NULL || !isfinite(m->weight) || m->weight < 0.0) {
        return false;
    }
    /* A re-join replaces the old entry and goes to the back of the queue:
     * it is a new request (new seq, new window), not the old one renewed. */
    size_t old = mm_find(mm, m->id);
    if (old != SIZE_MAX) {
        mm_remove(mm, old);
    } else if (mm->n >= MP_MM_PENDING_MAX) {
        return false;
    }
    if (window_ms > MP_MM_WINDOW_MAX) {
        window_ms = MP_MM_WINDOW_MAX;
    }
    mm_entry_t *e = &mm->pending[mm->n++];
    e->m = *m;
    e->ends_ms = mp__add_sat_u64(now_ms, window_ms);
    uint32_t quiet = window_ms / MP_MM_QUIET_DIV;
    mm->quiet_at = mp__add_sat_u64(
        now_ms, quiet > MP_MM_QUIET_MAX_MS ? MP_MM_QUIET_MAX_MS : quiet);
    return true;
}

void mp__mm_on_leave(mp_mm_t *mm, const uint8_t id[MP_ID_BYTES]) {
    if (mm == NULL || id == NULL) {
        return;
    }
    size_t i = mm_find(mm, id);
    if (i != SIZE_MAX) {
        mm_remove(mm, i);
    }
}

/* Index of the entry whose window ends first (the oldest among equals). */
static size_t mm_first_due(const mp_mm_t *mm) {
    size_t best = 0;
    for (size_t i = 1; i < mm->n; i++) {
        if (mm->pending[i].ends_ms < mm->pending[best].ends_ms) {
            best = i;
        }
    }
    return best;
}

/* Emits the oldest k pending entries as a group and removes them. */
static void mm_emit_group(mp_mm_t *mm, size_t k, mp_mm_out_t *out) {
    out->kind = MP_MM_GROUP;
    /* Groups of one batch take consecutive coordinate ranges: two groups
     * of M/2 send their members to all M next keys, not twice to half. */
    out->group_id = mm_next_group_id(mm, mm->grouped);
    out->n = (uint32_t)k;
    for (size_t i = 0; i < k; i++) {
        out->members[i] = mm->pending[i].m;
    }
    memmove(&mm->pending[0], &mm->pending[k],
            (mm->n - k) * sizeof mm->pending[0]);
    mm->n -= k;
    mm->flush = mm->flush > k ? mm->flush - k : 0;
    mm->grouped = mm->n == 0 ? 0 : mm->grouped + (uint32_t)k;
}

/* Size of the next group when f JOINs are split at once: the fewest groups
 * that hold them (k = ceil(f / group_size)), sizes differing by at most
 * one, so f = k M + 1 gives no group of one but k + 1 groups of M/2 or
 * more. If balanced groups would fall below min_group_size, full groups
 * first (the remainder then waits, or ends alone). */
static size_t mm_split_size(const mp_mm_t *mm, size_t f) {
    size_t m = mm->group_size;
    size_t k = (f + m - 1) / m;
    if (f / k < mm->min_group_size) {
        return f < m ? f : m;
    }
    return (f + k - 1) / k;
}

bool mp__mm_poll(mp_mm_t *mm, uint64_t now_ms, mp_mm_out_t *out) {
    if (mm == NULL || out == NULL) {
        return false;
    }
    if (mm->flush >= mm->min_group_size) {
        mm_emit_group(mm, mm_split_size(mm, mm->flush), out);
        return true;
    }
    mm->flush = 0; /* a remainder too small for a group waits */
    if (mm->n == 0) {
        mm->grouped = 0;
    }
    /* With 2 M pending, a full group leaves M or more, which can still be
     * split evenly however many JOINs follow: no reason to wait. */
    if (mm->n >= 2 * (size_t)mm->group_size) {
        mm_emit_group(mm, mm->group_size, out);
        return true;
    }
    if (mm->n == 0) {
        return false;
    }
    /* The header speaks of the oldest JOIN's window; windows may differ (a
     * joiner that fell back announces only what is left of its window), so
     * the deadline that counts is the earliest one, which is also what
     * mp__mm_next_wakeup reports. With equal windows it is the oldest.
     * Between M and 2 M - 1 pending, closing at once would leave whoever
     * comes next alone, so the key first goes quiet for a moment. */
    size_t due = mm_first_due(mm);
    bool settled = mm->n >= mm->group_size && mm->quiet_at <= now_ms;
    if (mm->pending[due].ends_ms > now_ms && !settled) {
        return false;
    }
    if (mm->n >= mm->min_group_size) {
        mm->flush = mm->n;
        mm_emit_group(mm, mm_split_size(mm, mm->flush), out);
        return true;
    }
    out->kind = MP_MM_ALONE;
    out->group_id = 0;
    out->n = 1;
    out->members[0] = mm->pending[due].m;
    mm_remove(mm, due);
    return true;
}

uint64_t mp__mm_next_wakeup(const mp_mm_t *mm) {
    if (mm == NULL || mm->n == 0) {
        return UINT64_MAX;
    }
    if (mm->flush >= mm->min_group_size ||
        mm->n >= 2 * (size_t)mm->group_size) {
        return 0; /* a group is ready: poll now */
    }
    uint64_t due = mm->pending[mm_first_due(mm)].ends_ms;
    if (mm->n >= mm->group_size && mm->quiet_at < due) {
        return mm->quiet_at;
    }
    return due;
}

size_t mp__mm_pending(const mp_mm_t *mm) {
    return mm == NULL ? 0 : mm->n;
}

/* ------------------------------------------------------------------------ */
/* joiner                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum {
    JP_SEND = 0, /* a JOIN to the current candidate waits to be pulled */
    JP_ACK,      /* JOIN sent, waiting for JOIN_ACK (or GROUP / ALONE) */
    JP_RESULT    /* acknowledged, waiting for GROUP / ALONE */
} joiner_phase_t;

struct mp_joiner {
    uint8_t (*cand)[MP_ID_BYTES];
    size_t n_cand;
    size_t cur; /* index of the current candidate */
    uint64_t seq;
    uint64_t now_ms;     /* latest time seen (creation or on_tick) */
    uint64_t window_end; /* start + window */
    uint64_t give_up;    /* window_end + grace */
    uint64_t ack_deadline;
    uint32_t ack_timeout_ms;
    uint32_t send_window; /* window announced in the pending JOIN */
    joiner_phase_t phase;
    mp_join_state_t state;
    bool has_mm;
    uint8_t mm_id[MP_ID_BYTES];
    uint64_t group_id;
    uint32_t group_n, self;
    mp_member_t roster[MP_GROUP_MAX];
};

/* Addresses the current candidate: a fresh JOIN with what is left of the
 * window, or ALONE when the list is exhausted. */
static void joiner_offer(mp_joiner_t *j) {
    if (j->cur >= j->n_cand) {
        j->state = MP_JOIN_ALONE;
        j->has_mm = false;
        return;
    }
    j->phase = JP_SEND;
    j->send_window =
        j->now_ms >= j->window_end ? 0 : (uint32_t)(j->window_end - j->now_ms);
    j->ack_deadline = mp__add_sat_u64(j->now_ms, j->ack_timeout_ms);
}

static void joiner_fall_back(mp_joiner_t *j) {
    j->cur++;
    j->seq++;
    joiner_offer(j);
}

moshpit_err_t mp__joiner_new(const uint8_t (*candidates)[MP_ID_BYTES], size_t n,
                             uint64_t first_seq, uint64_t now_ms,
                             uint32_t window_ms, uint32_t ack_timeout_ms,
                             uint32_t grace_ms, mp_joiner_t **out) {
    if (out == NULL) {
        return MOSHPIT_EINVAL;
    }
    *out = NULL;
    if ((candidates == NULL && n > 0) || n > SIZE_MAX / MP_ID_BYTES) {
        return MOSHPIT_EINVAL;
    }
    mp_joiner_t *j = calloc(1, sizeof *j);
    if (j == NULL) {
        return MOSHPIT_ENOMEM;
    }
    if (n > 0) {
        j->cand = malloc(n * MP_ID_BYTES);
        if (j->cand == NULL) {
            free(j);
            return MOSHPIT_ENOMEM;
        }
        memcpy(j->cand, candidates, n * MP_ID_BYTES);
    }
    j->n_cand = n;
    j->seq = first_seq;
    j->now_ms = now_ms;
    j->window_end = mp__add_sat_u64(now_ms, window_ms);
    j->give_up = mp__add_sat_u64(j->window_end, grace_ms);
    j->ack_timeout_ms = ack_timeout_ms;
    j->state = MP_JOIN_WAITING;
    joiner_offer(j);
    *out = j;
    return MOSHPIT_OK;
}

void mp__joiner_free(mp_joiner_t *j) {
    if (j != NULL) {
        free(j->cand);
        free(j);
    }
}

bool mp__joiner_next_send(mp_joiner_t *j, mp_join_send_t *out) {
    if (j == NULL || out == NULL || j->state != MP_JOIN_WAITING ||
        j->phase != JP_SEND) {
        return false;
    }
    memcpy(out->to, j->cand[j->cur], MP_ID_BYTES);
    out->seq = j->seq;
    out->window_ms = j->send_window;
    j->phase = JP_ACK;
    return true;
}

/* Whether (from, seq) answers the JOIN in flight. */
static bool joiner_is_current(const mp_joiner_t *j,
                              const uint8_t from[MP_ID_BYTES], uint64_t seq) {
    return j->state == MP_JOIN_WAITING && j->phase != JP_SEND && from != NULL &&
           seq == j->seq && memcmp(from, j->cand[j->cur], MP_ID_BYTES) == 0;
}

void mp__joiner_on_ack(mp_joiner_t *j, const uint8_t from[MP_ID_BYTES],
                       uint64_t seq) {
    if (j != NULL && joiner_is_current(j, from, seq) && j->phase == JP_ACK) {
        j->phase = JP_RESULT;
    }
}

bool mp__joiner_on_group(mp_joiner_t *j, const uint8_t from[MP_ID_BYTES],
                         uint64_t seq, uint64_t group_id,
                         const mp_member_t *members, uint32_t n,
                         const uint8_t self_id[MP_ID_BYTES]) {
    /* A GROUP before the ACK is accepted: the ACK may have been lost, and
     * the GROUP proves the JOIN was taken. */
    if (j == NULL || !joiner_is_current(j, from, seq) || members == NULL ||
        self_id == NULL || group_id == 0 || n < 2 || n > MP_GROUP_MAX) {
        return false;
    }
    uint32_t self = UINT32_MAX;
    for (uint32_t a = 0; a < n; a++) {
        if (!isfinite(members[a].weight) || members[a].weight < 0.0) {
            return false;
        }
        /* n <= 64: the quadratic duplicate scan is at most 2016 memcmp. */
        for (uint32_t b = a + 1; b < n; b++) {
            if (memcmp(members[a].id, members[b].id, MP_ID_BYTES) == 0) {
                return false;
            }
        }
        if (memcmp(members[a].id, self_id, MP_ID_BYTES) == 0) {
            self = a;
        }
    }
    if (self == UINT32_MAX) {
        return false;
    }
    memcpy(j->roster, members, n * sizeof *members);
    j->group_n = n;
    j->self = self;
    j->group_id = group_id;
    memcpy(j->mm_id, from, MP_ID_BYTES);
    j->has_mm = true;
    j->state = MP_JOIN_GROUP;
    return true;
}

void mp__joiner_on_alone(mp_joiner_t *j, const uint8_t from[MP_ID_BYTES],
                         uint64_t seq) {
    if (j == NULL || !joiner_is_current(j, from, seq)) {
        return;
    }
    memcpy(j->mm_id, from, MP_ID_BYTES);
    j->has_mm = true;
    j->state = MP_JOIN_ALONE;
}

void mp__joiner_on_peer_failed(mp_joiner_t *j, const uint8_t id[MP_ID_BYTES]) {
    /* Also after the ACK: a matchmaker known dead will never send GROUP, so
     * waiting for the give-up time would only waste the window. */
    if (j == NULL || id == NULL || j->state != MP_JOIN_WAITING ||
        memcmp(id, j->cand[j->cur], MP_ID_BYTES) != 0) {
        return;
    }
    joiner_fall_back(j);
}

void mp__joiner_on_tick(mp_joiner_t *j, uint64_t now_ms) {
    if (j == NULL || j->state != MP_JOIN_WAITING) {
        return;
    }
    if (now_ms > j->now_ms) {
        j->now_ms = now_ms;
    }
    if (j->now_ms >= j->give_up) {
        j->state = MP_JOIN_ALONE;
        j->has_mm = false;
        return;
    }
    if (j->phase != JP_RESULT && j->now_ms >= j->ack_deadline) {
        joiner_fall_back(j);
    }
}

uint64_t mp__joiner_next_wakeup(const mp_joiner_t *j) {
    if (j == NULL || j->state != MP_JOIN_WAITING) {
        return UINT64_MAX;
    }
    if (j->phase != JP_RESULT && j->ack_deadline < j->give_up) {
        return j->ack_deadline;
    }
    return j->give_up;
}

mp_join_state_t mp__joiner_state(const mp_joiner_t *j) {
    return j == NULL ? MP_JOIN_ALONE : j->state;
}

const mp_member_t *mp__joiner_group(const mp_joiner_t *j, uint32_t *n,
                                    uint32_t *self, uint64_t *group_id) {
    if (j == NULL || j->state != MP_JOIN_GROUP) {
        return NULL;
    }
    if (n != NULL) {
        *n = j->group_n;
    }
    if (self != NULL) {
        *self = j->self;
    }
    if (group_id != NULL) {
        *group_id = j->group_id;
    }
    return j->roster;
}

const uint8_t *mp__joiner_matchmaker(const mp_joiner_t *j) {
    if (j == NULL || j->state == MP_JOIN_WAITING || !j->has_mm) {
        return NULL;
    }
    return j->mm_id;
}
