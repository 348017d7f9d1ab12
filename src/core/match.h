/* SPDX-License-Identifier: MIT */
/*
 * match.h - sans-IO matchmaking: who gathers a group, and how.
 *
 * Rendezvous: the matchmaker of a group key is the live member with the
 * highest hash(key, member id); mp__rendezvous_order sorts candidates by that
 * score so a joiner can fall back to the next one.
 *
 * Matchmaker (mp_mm_t): collects JOINs of one key and splits them into
 * groups of at most group_size M. With 2 M or more pending, the oldest M
 * form a group at once. With M to 2 M - 1 pending, they close when the key
 * has been quiet (no new JOIN) for the newest JOIN's window / 16, at most
 * 250 ms; with fewer, when the earliest pending window ends. Closing splits
 * all pending JOINs into the fewest groups that hold them, sizes differing
 * by at most one (M + 1 JOINs: two groups, none alone), oldest first;
 * groups of fewer than min_group_size are not formed (if balanced groups
 * would be that small, full groups first). At a window end with fewer than
 * min_group_size pending, that JOIN is told it is alone. Pending JOINs are
 * capped (MP_MM_PENDING_MAX): beyond that a JOIN is answered ALONE.
 *
 * Joiner (mp_joiner_t): sends JOIN to the first candidate, expects an ACK
 * within ack_timeout_ms, else moves to the next candidate; ends with a group,
 * alone (ALONE received, or window plus grace over), or no candidates.
 *
 * No I/O, no clock, no randomness of its own: the driver passes time and a
 * seed. Not thread-safe.
 */
#ifndef MP_CORE_MATCH_H
#define MP_CORE_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group.h"
#include "moshpit.h"

#define MP_ID_BYTES 32u
#define MP_MM_PENDING_MAX 256u

typedef struct mp_member {
    uint8_t id[MP_ID_BYTES];
    double weight;
    uint32_t bandwidth;
    uint64_t seq; /* the joiner's JOIN sequence number */
} mp_member_t;

/* 64-bit rendezvous score of (key, id); stable across platforms. */
uint64_t mp__rendezvous_score(const uint8_t *key, size_t key_len,
                              const uint8_t id[MP_ID_BYTES]);

/* Writes into order[0..n) the indices of ids[] sorted by descending score
 * (ties by id bytes). */
void mp__rendezvous_order(const uint8_t *key, size_t key_len,
                          const uint8_t (*ids)[MP_ID_BYTES], size_t n,
                          uint32_t *order);

/* The first min(k, n) entries of mp__rendezvous_order's result, identical to
 * it, in O(n) time for small k (O(n k) at worst): order[] needs room for
 * min(k, n) indices. Returns how many were written (0 if n or k is 0, n is
 * beyond UINT32_MAX, or a pointer is NULL). A joiner only needs the first
 * few candidates, so a driver can rank a large view without sorting it. */
size_t mp__rendezvous_top(const uint8_t *key, size_t key_len,
                          const uint8_t (*ids)[MP_ID_BYTES], size_t n, size_t k,
                          uint32_t *order);

/* ---- matchmaker ---- */

/* The low 6 bits of a group id are the group's coordinate offset: member i
 * of the roster takes grid coordinate i + offset (modulo M) for its next
 * key. A matchmaker that closes several groups of one key in a row gives
 * each the count of JOINs it grouped before it (0 for the first), so
 * together they cover consecutive coordinates. The other bits are random. */
#define MP_GROUP_OFFSET_MASK 63u
uint32_t mp__group_coord_offset(uint64_t group_id);
typedef struct mp_mm mp_mm_t;

typedef enum { MP_MM_NONE = 0, MP_MM_GROUP, MP_MM_ALONE } mp_mm_out_kind_t;

typedef struct mp_mm_out {
    mp_mm_out_kind_t kind;
    uint64_t group_id;                 /* GROUP: fresh, nonzero */
    uint32_t n;                        /* GROUP: members; ALONE: 1 */
    mp_member_t members[MP_GROUP_MAX]; /* GROUP: roster in order; ALONE: [0] */
} mp_mm_out_t;

moshpit_err_t mp__mm_new(uint32_t group_size, uint32_t min_group_size,
                         uint64_t seed, mp_mm_t **out);
void mp__mm_free(mp_mm_t *mm);

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

/* ---- joiner ---- */
typedef enum {
    MP_JOIN_WAITING = 0, /* in progress */
    MP_JOIN_GROUP,       /* a GROUP arrived: see mp__joiner_group */
    MP_JOIN_ALONE        /* nobody to average with this time */
} mp_join_state_t;

typedef struct mp_joiner mp_joiner_t;

/* What the driver must send now. */
typedef struct mp_join_send {
    uint8_t to[MP_ID_BYTES];
    uint64_t seq;
    uint32_t window_ms; /* remaining window to announce */
} mp_join_send_t;

/* candidates: ids in rendezvous order (first = preferred matchmaker); may
 * include self (the driver then feeds its own matchmaker). */
moshpit_err_t mp__joiner_new(const uint8_t (*candidates)[MP_ID_BYTES], size_t n,
                             uint64_t first_seq, uint64_t now_ms,
                             uint32_t window_ms, uint32_t ack_timeout_ms,
                             uint32_t grace_ms, mp_joiner_t **out);
void mp__joiner_free(mp_joiner_t *j);

/* Pull a JOIN to send (at start and after every fallback). */
bool mp__joiner_next_send(mp_joiner_t *j, mp_join_send_t *out);

void mp__joiner_on_ack(mp_joiner_t *j, const uint8_t from[MP_ID_BYTES],
                       uint64_t seq);
/* A GROUP answer; self_id locates this joiner in the roster. Returns false
 * (and ignores it) if it does not answer the current JOIN or the roster is
 * invalid (self missing, duplicates, n < 2 or > MP_GROUP_MAX). */
bool mp__joiner_on_group(mp_joiner_t *j, const uint8_t from[MP_ID_BYTES],
                         uint64_t seq, uint64_t group_id,
                         const mp_member_t *members, uint32_t n,
                         const uint8_t self_id[MP_ID_BYTES]);
void mp__joiner_on_alone(mp_joiner_t *j, const uint8_t from[MP_ID_BYTES],
                         uint64_t seq);
/* The candidate is known unreachable: move on at once if it is current. */
void mp__joiner_on_peer_failed(mp_joiner_t *j, const uint8_t id[MP_ID_BYTES]);
void mp__joiner_on_tick(mp_joiner_t *j, uint64_t now_ms);
uint64_t mp__joiner_next_wakeup(const mp_joiner_t *j);
mp_join_state_t mp__joiner_state(const mp_joiner_t *j);
/* After MP_JOIN_GROUP: the roster, its size, this joiner's index, group id. */
const mp_member_t *mp__joiner_group(const mp_joiner_t *j, uint32_t *n,
                                    uint32_t *self, uint64_t *group_id);
/* The id of the matchmaker that answered (valid after GROUP/ALONE). */
const uint8_t *mp__joiner_matchmaker(const mp_joiner_t *j);

#endif
