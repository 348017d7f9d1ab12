/* SPDX-License-Identifier: MIT */
/*
 * matchmaker.c - the matchmaker (mp_mm_t) of a grid key: it collects the
 * JOINs of its key and turns them into GROUP / ALONE decisions, splitting a
 * key's callers into groups of even size. It reads no clock, touches no
 * socket and draws no OS randomness: the driver passes the time and a seed
 * and sends what it decides. Allocation happens only in mp__mm_new.
 */
#include "core/matchmaker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define MP_MM_WINDOW_MAX 60000u
/* How long a key must stay quiet (no new JOIN) before group_size or more
 * pending JOINs are closed: the announced window / MP_MM_QUIET_DIV, at most
 * MP_MM_QUIET_MAX_MS. */
#define MP_MM_QUIET_DIV 16u
#define MP_MM_QUIET_MAX_MS 250u
/* Lines mode: the key closes when quiet for the window / this. */
#define MP_MM_LINES_QUIET_DIV 4u

typedef struct mm_entry {
    mp_member_t m;
    uint64_t ends_ms;  /* arrival + announced window (clamped) */
    uint64_t quiet_ms; /* arrival + its quiet time */
    bool flush;        /* among the JOINs being split now */
    uint8_t line_len;  /* lines mode: the joiner's line key */
    uint8_t line[MP_KEY_MAX];
    uint16_t unit; /* lines mode, while flush: its line (or part of one) */
} mm_entry_t;

/* The pending JOINs of one phase (mp_member_t.phase): how many, and when
 * the newest one's quiet time ends. */
typedef struct mm_class {
    uint32_t phase;
    size_t count;
    uint64_t quiet_at;
} mm_class_t;

struct mp_mm {
    uint32_t group_size;
    uint32_t min_group_size;
    uint64_t rng;       /* splitmix64 state */
    uint64_t quiet_at;  /* newest JOIN's arrival + its quiet time */
    size_t flush;       /* entries marked flush: being split now */
    uint32_t grouped;   /* JOINs grouped since none was pending */
    uint64_t expect;    /* at most this many callers can share the key (the
                           driver's live view); 0 = unknown */
    bool lines;         /* lines mode (see matchmaker.h) */
    uint64_t lquiet_at; /* lines mode: newest JOIN's arrival + window / 4 */
    uint32_t nparts, next_part; /* lines mode: the groups being emitted */
    uint16_t unit_part[MP_MM_PENDING_MAX]; /* each unit's group */
    uint16_t red_at[MP_GROUP_MAX]; /* lines mode: the split's members that
                                      reduce, by next coordinate (mod M) */
    size_t n;                      /* pending entries, oldest first */
    mm_entry_t pending[MP_MM_PENDING_MAX];
};

/* splitmix64 (Steele, Lea, Flood 2014). Its output is a bijection of the
 * state counter; the low bits are replaced by the coordinate offset (see
 * mp__mm_coord_offset), which leaves 58 random bits: a repeat within one
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

uint32_t mp__mm_coord_offset(uint64_t group_id) {
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

void mp__mm_set_expect(mp_mm_t *mm, uint64_t n) {
    if (mm != NULL) {
        mm->expect = n;
    }
}

/* Every caller that can share the key is pending (each peer holds at most
 * one pending JOIN, and no more than `expect` peers are live): nobody is
 * left to wait for. */
static bool mm_all_here(const mp_mm_t *mm) {
    return mm->expect > 0 && mm->n >= mm->expect && mm->n >= mm->min_group_size;
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
    if (mm->pending[i].flush) {
        mm->flush--;
    }
    memmove(&mm->pending[i], &mm->pending[i + 1],
            (mm->n - i - 1) * sizeof mm->pending[0]);
    mm->n--;
}

void mp__mm_set_lines(mp_mm_t *mm, bool lines) {
    if (mm != NULL) {
        mm->lines = lines;
    }
}

bool mp__mm_on_join(mp_mm_t *mm, uint64_t now_ms, const mp_member_t *m,
                    uint32_t window_ms) {
    return mp__mm_on_join_line(mm, now_ms, m, window_ms, NULL, 0);
}

bool mp__mm_on_join_line(mp_mm_t *mm, uint64_t now_ms, const mp_member_t *m,
                         uint32_t window_ms, const uint8_t *line,
                         size_t line_len) {
    if (mm == NULL || m == NULL || !isfinite(m->weight) || m->weight < 0.0 ||
        line_len > MP_KEY_MAX || (line == NULL && line_len > 0)) {
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
    e->flush = false;
    e->line_len = (uint8_t)line_len;
    if (line_len > 0) {
        memcpy(e->line, line, line_len);
    }
    e->unit = 0;
    e->ends_ms = mp__add_sat_u64(now_ms, window_ms);
    uint32_t quiet = window_ms / MP_MM_QUIET_DIV;
    e->quiet_ms = mp__add_sat_u64(
        now_ms, quiet > MP_MM_QUIET_MAX_MS ? MP_MM_QUIET_MAX_MS : quiet);
    mm->quiet_at = e->quiet_ms;
    /* lines mode closes the whole round at once: a line cut in two by an
     * early close costs its d-round mean, so it waits longer */
    mm->lquiet_at = mp__add_sat_u64(now_ms, window_ms / MP_MM_LINES_QUIET_DIV);
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

/* The pending JOINs by phase, in the order of each phase's oldest JOIN.
 * Returns the number of phases. */
static size_t mm_classes(const mp_mm_t *mm, mm_class_t *cls) {
    size_t nc = 0;
    for (size_t i = 0; i < mm->n; i++) {
        const mm_entry_t *e = &mm->pending[i];
        size_t c = 0;
        while (c < nc && cls[c].phase != e->m.phase) {
            c++;
        }
        if (c == nc) {
            cls[nc++] = (mm_class_t){e->m.phase, 0, 0};
        }
        cls[c].count++;
        if (e->quiet_ms > cls[c].quiet_at) {
            cls[c].quiet_at = e->quiet_ms;
        }
    }
    return nc;
}

/* Emits the oldest k entries marked flush as a group and removes them. */
static void mm_emit_group(mp_mm_t *mm, size_t k, mp_mm_out_t *out) {
    out->kind = MP_MM_GROUP;
    /* Groups of one batch take consecutive coordinate ranges: two groups
     * of M/2 send their members to all M next keys, not twice to half. */
    out->group_id = mm_next_group_id(mm, mm->grouped);
    out->n = (uint32_t)k;
    out->phase = 0;
    size_t taken = 0, kept = 0;
    for (size_t i = 0; i < mm->n; i++) {
        if (taken < k && mm->pending[i].flush) {
            if (mm->pending[i].m.phase > out->phase) {
                out->phase = mm->pending[i].m.phase;
            }
            out->members[taken++] = mm->pending[i].m;
        } else {
            mm->pending[kept++] = mm->pending[i];
        }
    }
    mm->n = kept;
    mm->flush -= taken;
    mm->grouped = mm->n == 0 ? 0 : mm->grouped + (uint32_t)k;
}

/* Marks for splitting (mm->flush becomes their count): the oldest `limit`
 * JOINs of phase `phase`, or of any phase if `all`; with `others`, also
 * every JOIN of a phase with fewer than M pending, unless exactly one
 * phase ahead (see mp__mm_poll). */
static void mm_mark(mp_mm_t *mm, bool all, uint32_t phase, size_t limit,
                    bool others, const mm_class_t *cls, size_t nc) {
    mm->flush = 0;
    for (size_t i = 0; i < mm->n; i++) {
        mm_entry_t *e = &mm->pending[i];
        bool own = all || e->m.phase == phase;
        bool extra = false;
        /* phases wrap (a false 2^32 - 1 from one peer must not pin the
         * swarm's clock), so 0 is one ahead of 2^32 - 1 */
        bool ahead = e->m.phase == phase + 1u;
        if (!own && others && !ahead) {
            extra = true;
            for (size_t c = 0; c < nc; c++) {
                if (cls[c].phase == e->m.phase &&
                    cls[c].count >= mm->group_size) {
                    extra = false;
                }
            }
        }
        e->flush = (own && limit > 0) || extra;
        if (own && limit > 0) {
            limit--;
        }
        mm->flush += e->flush;
    }
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

/* A decision that is due without waiting: the first phase with 2 M
 * pending or more (*idx its class, SIZE_MAX for all pending JOINs mixed);
 * false if none. *full is set when some phase has M pending or more. */
static bool mm_ready(const mp_mm_t *mm, const mm_class_t *cls, size_t nc,
                     size_t *idx, bool *full) {
    size_t m = mm->group_size;
    *full = false;
    for (size_t c = 0; c < nc; c++) {
        if (cls[c].count >= m) {
            *full = true;
        }
        if (cls[c].count >= 2 * m) {
            *idx = c;
            return true;
        }
    }
    /* 2 M pending, none of one phase with M: mixed, as nothing better is
     * possible now */
    if (mm->n >= 2 * m && !*full) {
        *idx = SIZE_MAX;
        return true;
    }
    return false;
}

/* Lines mode: whether the pending JOINs close now (see matchmaker.h). */
static bool mm_lines_due(const mp_mm_t *mm, uint64_t now_ms) {
    return mm_all_here(mm) ||
           (mm->n >= mm->group_size && mm->lquiet_at <= now_ms) ||
           mm->pending[mm_first_due(mm)].ends_ms <= now_ms;
}

static bool mm_same_line(const mm_entry_t *a, const mm_entry_t *b) {
    return a->line_len == b->line_len &&
           memcmp(a->line, b->line, a->line_len) == 0;
}

/* Lines mode: marks every pending JOIN and assigns it a unit (a line, or
 * one of the even parts of a line of more than M) and every unit a group:
 * one per unit with a member that reduces, the others added to the
 * smallest such group that stays within MP_GROUP_MAX, or alone if none. */
static void mm_lines_split(mp_mm_t *mm) {
    uint16_t line_of[MP_MM_PENDING_MAX];
    uint16_t line_first[MP_MM_PENDING_MAX]; /* an entry of each line */
    uint16_t line_count[MP_MM_PENDING_MAX];
    uint16_t line_unit0[MP_MM_PENDING_MAX]; /* its first unit */
    uint16_t seen[MP_MM_PENDING_MAX];       /* entries of it so far */
    uint16_t unit_size[MP_MM_PENDING_MAX];
    bool unit_reduces[MP_MM_PENDING_MAX];
    uint32_t part_size[MP_MM_PENDING_MAX];
    size_t nl = 0, nu = 0;
    for (size_t i = 0; i < mm->n; i++) {
        size_t l = 0;
        while (l < nl &&
               !mm_same_line(&mm->pending[line_first[l]], &mm->pending[i])) {
            l++;
        }
        if (l == nl) {
            line_first[nl] = (uint16_t)i;
            line_count[nl++] = 0;
        }
        line_of[i] = (uint16_t)l;
        line_count[l]++;
    }
    for (size_t l = 0; l < nl; l++) {
        size_t k = (line_count[l] + mm->group_size - 1) / mm->group_size;
        line_unit0[l] = (uint16_t)nu;
        seen[l] = 0;
        for (size_t u = 0; u < k; u++) {
            unit_size[nu] = 0;
            unit_reduces[nu++] = false;
        }
    }
    for (size_t i = 0; i < mm->n; i++) {
        mm_entry_t *e = &mm->pending[i];
        size_t l = line_of[i];
        size_t k = (line_count[l] + mm->group_size - 1) / mm->group_size;
        /* balanced parts: entry j of c goes to part j k / c */
        size_t u = line_unit0[l] + (size_t)seen[l]++ * k / line_count[l];
        e->unit = (uint16_t)u;
        e->flush = true;
        unit_size[u]++;
        unit_reduces[u] = unit_reduces[u] || !e->m.noshare;
    }
    mm->flush = mm->n;
    uint32_t np = 0;
    for (size_t u = 0; u < nu; u++) {
        if (unit_reduces[u]) {
            mm->unit_part[u] = (uint16_t)np;
            part_size[np++] = unit_size[u];
        }
    }
    uint32_t reducing = np;
    for (size_t u = 0; u < nu; u++) {
        if (unit_reduces[u]) {
            continue;
        }
        uint32_t best = UINT32_MAX;
        for (uint32_t p = 0; p < reducing; p++) {
            if (part_size[p] + unit_size[u] <= MP_GROUP_MAX &&
                (best == UINT32_MAX || part_size[p] < part_size[best])) {
                best = p;
            }
        }
        if (best == UINT32_MAX) {
            best = np++;
            part_size[best] = 0;
        }
        mm->unit_part[u] = (uint16_t)best;
        part_size[best] += unit_size[u];
    }
    mm->nparts = np;
    mm->next_part = 0;
    memset(mm->red_at, 0, sizeof(mm->red_at));
}

/* Lines mode: the members of unit u into out->members, in roster order.
 * Any order keeps a line's mean; this one gives each member that reduces
 * the free place whose next coordinate ((place + offset) mod M, the grid
 * shift of core/round.c) has the fewest reducing members of the split so
 * far, so those spread over the next round's coordinates, and with them
 * over the lines and shards of the next round. */
static void mm_lines_place(mp_mm_t *mm, size_t u, uint32_t offset,
                           mp_mm_out_t *out) {
    uint32_t base = out->n, size = 0;
    for (size_t i = 0; i < mm->n; i++) {
        if (mm->pending[i].flush && mm->pending[i].unit == u) {
            size++;
        }
    }
    if (base + size > MP_GROUP_MAX) {
        return; /* not reached: a part holds at most MP_GROUP_MAX */
    }
    offset &= MP_GROUP_OFFSET_MASK;
    bool used[MP_GROUP_MAX] = {false};
    /* pass 0: the members that reduce, pass 1: the others, in order */
    for (int pass = 0; pass < 2; pass++) {
        uint32_t next = 0;
        for (size_t i = 0; i < mm->n; i++) {
            const mm_entry_t *e = &mm->pending[i];
            if (!e->flush || e->unit != u ||
                (pass == 0) == (e->m.noshare != 0)) {
                continue;
            }
            if (e->m.phase > out->phase) {
                out->phase = e->m.phase;
            }
            uint32_t best = UINT32_MAX, best_c = 0;
            for (uint32_t s = 0; s < size && pass == 0; s++) {
                uint32_t c = (base + s + offset) % mm->group_size;
                if (!used[s] && (best == UINT32_MAX ||
                                 mm->red_at[c] < mm->red_at[best_c])) {
                    best = s;
                    best_c = c;
                }
            }
            if (pass == 0) {
                mm->red_at[best_c]++;
            } else {
                while (used[next]) {
                    next++;
                }
                best = next;
            }
            used[best] = true;
            out->members[base + best] = e->m;
        }
    }
    out->n = base + size;
}

/* Lines mode: the next group of the split (its members unit by unit), or
 * ALONE for a member of a group too small; false when the split is done. */
static bool mm_lines_emit(mp_mm_t *mm, mp_mm_out_t *out) {
    while (mm->next_part < mm->nparts) {
        uint32_t p = mm->next_part;
        size_t k = 0, first = SIZE_MAX;
        for (size_t i = 0; i < mm->n; i++) {
            if (mm->pending[i].flush &&
                mm->unit_part[mm->pending[i].unit] == p) {
                k++;
                first = first == SIZE_MAX ? i : first;
            }
        }
        if (k == 0) {
            mm->next_part++;
            continue;
        }
        if (k < mm->min_group_size) {
            out->kind = MP_MM_ALONE;
            out->group_id = 0;
            out->n = 1;
            out->members[0] = mm->pending[first].m;
            mm_remove(mm, first);
            return true;
        }
        out->kind = MP_MM_GROUP;
        out->group_id = mm_next_group_id(mm, mm->grouped);
        out->n = 0;
        out->phase = 0;
        /* unit by unit: a line's members take consecutive coordinates */
        for (size_t u = 0; u < MP_MM_PENDING_MAX && out->n < k; u++) {
            if (mm->unit_part[u] == p) {
                mm_lines_place(mm, u, mm->grouped, out);
            }
        }
        size_t kept = 0;
        for (size_t i = 0; i < mm->n; i++) {
            const mm_entry_t *e = &mm->pending[i];
            if (!(e->flush && mm->unit_part[e->unit] == p)) {
                mm->pending[kept++] = *e;
            }
        }
        mm->n = kept;
        mm->flush -= k;
        mm->grouped += (uint32_t)k;
        mm->next_part++;
        return true;
    }
    mm->nparts = mm->next_part = 0;
    for (size_t i = 0; i < mm->n; i++) {
        mm->pending[i].flush = false;
    }
    mm->flush = 0;
    return false;
}

static bool mm_lines_poll(mp_mm_t *mm, uint64_t now_ms, mp_mm_out_t *out) {
    if (mm_lines_emit(mm, out)) {
        return true;
    }
    if (mm->n == 0) {
        mm->grouped = 0;
        return false;
    }
    if (!mm_lines_due(mm, now_ms)) {
        return false;
    }
    mm->grouped = 0;
    mm_lines_split(mm);
    return mm_lines_emit(mm, out);
}

bool mp__mm_poll(mp_mm_t *mm, uint64_t now_ms, mp_mm_out_t *out) {
    if (mm == NULL || out == NULL) {
        return false;
    }
    if (mm->lines) {
        return mm_lines_poll(mm, now_ms, out);
    }
    if (mm->flush >= mm->min_group_size) {
        mm_emit_group(mm, mm_split_size(mm, mm->flush), out);
        return true;
    }
    /* a remainder too small for a group waits */
    for (size_t i = 0; mm->flush > 0 && i < mm->n; i++) {
        mm->pending[i].flush = false;
    }
    mm->flush = 0;
    if (mm->n == 0) {
        mm->grouped = 0;
        return false;
    }
    mm_class_t cls[MP_MM_PENDING_MAX];
    size_t nc = mm_classes(mm, cls);
    size_t idx;
    bool full;
    /* With 2 M pending, a full group leaves M or more, which can still be
     * split evenly however many JOINs follow: no reason to wait. JOINs of
     * one phase (callers in step) are grouped together first. */
    if (mm_ready(mm, cls, nc, &idx, &full)) {
        bool all = idx == SIZE_MAX;
        mm_mark(mm, all, all ? 0 : cls[idx].phase, mm->group_size, false, cls,
                nc);
        mm_emit_group(mm, mm->group_size, out);
        return true;
    }
    /* Between M and 2 M - 1 pending of one phase, closing at once would
     * leave whoever of that phase comes next alone, so the phase first
     * goes quiet for a moment; then its JOINs are split evenly, together
     * with those of phases that have fewer than M here (callers out of
     * step, which must not be kept apart from the swarm), but not those
     * exactly one phase ahead: a caller whose group finished early, under
     * a key with the bytes of one still filling for the round before. It
     * neither breaks up the full group of the round before nor takes a
     * place in it, and waits for the callers of its own round.
     * With as many JOINs pending as peers can call, nobody is left to wait
     * for: the quiet times count as over (the windows do not: a JOIN a
     * round ahead, left over, still waits for the callers of its round). */
    bool here = mm_all_here(mm);
    for (size_t c = 0; c < nc; c++) {
        if (cls[c].count >= mm->group_size &&
            (cls[c].quiet_at <= now_ms || here)) {
            mm_mark(mm, false, cls[c].phase, SIZE_MAX, true, cls, nc);
            mm_emit_group(mm, mm_split_size(mm, mm->flush), out);
            return true;
        }
    }
    /* The header speaks of the oldest JOIN's window; windows may differ (a
     * joiner that fell back announces only what is left of its window), so
     * the deadline that counts is the earliest one, which is also what
     * mp__mm_next_wakeup reports. With equal windows it is the oldest.
     * With no phase at M, phases mix once the whole key has been quiet:
     * callers out of step are not kept apart from the swarm. */
    size_t due = mm_first_due(mm);
    bool settled =
        !full && ((mm->n >= mm->group_size && mm->quiet_at <= now_ms) || here);
    if (mm->pending[due].ends_ms > now_ms && !settled) {
        return false;
    }
    if (mm->n >= mm->min_group_size) {
        mm_mark(mm, true, 0, SIZE_MAX, false, cls, nc);
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
    if (mm->lines) {
        if (mm->nparts > 0 || mm_all_here(mm)) {
            return 0;
        }
        uint64_t due = mm->pending[mm_first_due(mm)].ends_ms;
        if (mm->n >= mm->group_size && mm->lquiet_at < due) {
            due = mm->lquiet_at;
        }
        return due;
    }
    if (mm->flush >= mm->min_group_size) {
        return 0; /* a group is ready: poll now */
    }
    mm_class_t cls[MP_MM_PENDING_MAX];
    size_t nc = mm_classes(mm, cls);
    size_t idx;
    bool full;
    /* all here: a phase at M closes, or with none at M all of them */
    if (mm_ready(mm, cls, nc, &idx, &full) || mm_all_here(mm)) {
        return 0;
    }
    uint64_t due = mm->pending[mm_first_due(mm)].ends_ms;
    for (size_t c = 0; c < nc; c++) {
        if (cls[c].count >= mm->group_size && cls[c].quiet_at < due) {
            due = cls[c].quiet_at;
        }
    }
    if (!full && mm->n >= mm->group_size && mm->quiet_at < due) {
        due = mm->quiet_at;
    }
    return due;
}

size_t mp__mm_pending(const mp_mm_t *mm) {
    return mm == NULL ? 0 : mm->n;
}
