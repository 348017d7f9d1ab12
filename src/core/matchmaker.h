/* SPDX-License-Identifier: MIT */
/*
 * matchmaker.h - the matchmaker (mp_mm_t) of one group key.
 *
 * It collects JOINs of one key and splits them into groups of at most
 * group_size M. JOINs of one phase (mp_member_t.phase: callers in step)
 * group first. With 2 M or more pending of one phase, the oldest M of it
 * form a group at once. With M to 2 M - 1 of one phase, they close when
 * that phase has been quiet (no new JOIN of it) for the newest one's
 * window / 16, at most 250 ms, together with the JOINs of phases with
 * fewer than M pending, except those exactly one phase ahead (they wait
 * for their own round). With no phase at M, phases mix: at 2 M pending the
 * oldest M at once, at M to 2 M - 1 when the key has been quiet, with
 * fewer when the earliest pending window ends. When the driver has said
 * how many callers can share the key at most (mp__mm_set_expect: its live
 * view) and that many are pending, nobody is left to wait for: the quiet
 * times count as over, so M to 2 M - 1 of one phase close at once (those
 * a round ahead stay), and with no phase at M all of them, however few.
 * Windows still count for the rest. Closing splits the
 * marked JOINs into the fewest groups that hold them, sizes differing by
 * at most one (M + 1 JOINs: two groups, none alone), oldest first; groups of
 * fewer than min_group_size are not formed (if balanced groups would be that
 * small, full groups first). At a window end with fewer than min_group_size
 * pending, that JOIN is told it is alone. Pending JOINs are capped
 * (MP_MM_PENDING_MAX): beyond that a JOIN is answered ALONE.
 *
 * Lines mode (mp__mm_set_lines: the key is a merge key, docs/DESIGN.md,
 * "Exact means over d > 1 rounds behind NAT"): each JOIN carries its grid
 * line key, and groups are made of whole lines. The pending JOINs close
 * together (all callers here, or M or more and the key quiet for the
 * newest window / 4, or the earliest window ending; phases do not count); each
 * line with more than M JOINs is first split as above, then every part without
 * a member that reduces (all noshare) is added to the part with one that is
 * smallest so far, up to MP_GROUP_MAX members. Rosters list the members line by
 * line, so each line's members take consecutive coordinates; inside a line the
 * members that reduce take the places whose next coordinates have the fewest
 * reducing members of the close so far, so they spread over the next round's
 * lines (and shards of merge keys).
 *
 * mp_member_t is the roster entry that a JOIN carries and a GROUP lists.
 * No I/O, no clock, no randomness of its own: the driver passes time and a
 * seed. Not thread-safe.
 */
#ifndef MP_CORE_MATCHMAKER_H
#define MP_CORE_MATCHMAKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/group.h"
#include "core/rendezvous.h"
#include "moshpit.h"

#define MP_MM_PENDING_MAX 256u

typedef struct mp_member {
    uint8_t id[MP_ID_BYTES];
    double weight;
    uint32_t bandwidth;
    uint64_t seq;    /* the joiner's JOIN sequence number */
    uint32_t phase;  /* the joiner's phase (JOIN "ph"; 0 from peers that do
                        not send it): its calls ended before this one, caught
                        up with its groups (core/round.c) */
    uint8_t noshare; /* 1: an outbound-only member, it reduces no share
                        (JOIN "ns", GROUP "ns") */
    uint8_t parts;   /* 1: the member cuts parts by the group's size
                        (mp__share_part_elems; JOIN "pp", GROUP "pp"); a
                        group where every member does uses that size,
                        others MP_PART_ELEMS_DEFAULT */
} mp_member_t;

/* The low 6 bits of a group id are the group's coordinate offset: member i
 * of the roster takes grid coordinate i + offset (modulo M) for its next
 * key. A matchmaker that closes several groups of one key in a row gives
 * each the count of JOINs it grouped before it (0 for the first), so
 * together they cover consecutive coordinates. The other bits are random. */
#define MP_GROUP_OFFSET_MASK 63u
uint32_t mp__mm_coord_offset(uint64_t group_id);
typedef struct mp_mm mp_mm_t;

typedef enum { MP_MM_NONE = 0, MP_MM_GROUP, MP_MM_ALONE } mp_mm_out_kind_t;

typedef struct mp_mm_out {
    mp_mm_out_kind_t kind;
    uint64_t group_id;                 /* GROUP: fresh, nonzero */
    uint32_t n;                        /* GROUP: members; ALONE: 1 */
    uint32_t phase;                    /* GROUP: the members' largest phase */
    mp_member_t members[MP_GROUP_MAX]; /* GROUP: roster in order; ALONE: [0] */
} mp_mm_out_t;

moshpit_err_t mp__mm_new(uint32_t group_size, uint32_t min_group_size,
                         uint64_t seed, mp_mm_t **out);
void mp__mm_free(mp_mm_t *mm);

/* At most n callers can share this key (the peers the driver counts live,
 * itself included); 0 = unknown, the default. With n JOINs pending the key
 * closes at once instead of waiting for the quiet time or, below M, a
 * window end (a JOIN a round ahead is still kept for its own round).
 * Too small a count costs a caller that comes later its group (it waits
 * for its window and ends alone), never a hang. */
void mp__mm_set_expect(mp_mm_t *mm, uint64_t n);

/* Lines mode on or off (off: the default); see above. */
void mp__mm_set_lines(mp_mm_t *mm, bool lines);

/* As mp__mm_on_join, with the joiner's line key (lines mode; line_len <=
 * MP_KEY_MAX, 0 = none; JOINs of equal line keys form one line). */
bool mp__mm_on_join_line(mp_mm_t *mm, uint64_t now_ms, const mp_member_t *m,
                         uint32_t window_ms, const uint8_t *line,
                         size_t line_len);

/* A JOIN arrived (or the matchmaker joins itself). window_ms is how long the
 * joiner is willing to wait (clamped to 60 s). A second JOIN from the same
 * id replaces the first. Returns false if refused (table full or invalid
 * weight): the caller answers ALONE at once. */
bool mp__mm_on_join(mp_mm_t *mm, uint64_t now_ms, const mp_member_t *m,
                    uint32_t window_ms);

/* The joiner is gone or cancelled: forget its pending JOIN. */
void mp__mm_on_leave(mp_mm_t *mm, const uint8_t id[MP_ID_BYTES]);

/* Pull one decision; returns false when there is none now. Call in a loop
 * after every on_join and on every wake-up. */
bool mp__mm_poll(mp_mm_t *mm, uint64_t now_ms, mp_mm_out_t *out);

uint64_t mp__mm_next_wakeup(const mp_mm_t *mm); /* UINT64_MAX = none */
size_t mp__mm_pending(const mp_mm_t *mm);

#endif
