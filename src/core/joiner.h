/* SPDX-License-Identifier: MIT */
/*
 * joiner.h - the joiner (mp_joiner_t) of one round.
 *
 * It sends JOIN to the first candidate, expects an ACK within
 * ack_timeout_ms, else moves to the next candidate; it ends with a group,
 * alone (ALONE received, or window plus grace over), or no candidates.
 *
 * No I/O, no clock, no randomness of its own: the driver passes time.
 * Not thread-safe.
 */
#ifndef MP_CORE_JOINER_H
#define MP_CORE_JOINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/matchmaker.h"
#include "core/rendezvous.h"
#include "moshpit.h"

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
/* Per-candidate JOIN_ACK waits (n values as the candidates, 0: the
 * ack_timeout_ms given to mp__joiner_new, which also bounds the others),
 * copied; call before the first JOIN is pulled. MOSHPIT_ENOMEM leaves the
 * single wait. */
moshpit_err_t mp__joiner_set_ack(mp_joiner_t *j, const uint32_t *ack_ms);
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
/* The JOIN to `to` only left now (it waited for a session to be opened):
 * if `to` is the current candidate and has not answered, its ACK timeout
 * starts now (never past the give-up time). */
void mp__joiner_on_sent(mp_joiner_t *j, uint64_t now_ms,
                        const uint8_t to[MP_ID_BYTES]);
void mp__joiner_on_tick(mp_joiner_t *j, uint64_t now_ms);
uint64_t mp__joiner_next_wakeup(const mp_joiner_t *j);
mp_join_state_t mp__joiner_state(const mp_joiner_t *j);
/* After MP_JOIN_GROUP: the roster, its size, this joiner's index, group id. */
const mp_member_t *mp__joiner_group(const mp_joiner_t *j, uint32_t *n,
                                    uint32_t *self, uint64_t *group_id);
/* The id of the matchmaker that answered (valid after GROUP/ALONE). */
const uint8_t *mp__joiner_matchmaker(const mp_joiner_t *j);

#endif
