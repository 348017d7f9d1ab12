/* SPDX-License-Identifier: MIT */
/*
 * joiner.c - the joiner (mp_joiner_t) of one round: it walks the candidate
 * matchmakers in rendezvous order, sending JOIN and falling back on a
 * missing JOIN_ACK or an unreachable candidate, until it is grouped, told it
 * is alone, or runs out of time. It reads no clock and touches no socket:
 * the driver passes the time and sends what it asks for. Allocation happens
 * only in mp__joiner_new.
 */
#include "core/joiner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

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
    uint32_t *ack_ms;     /* per candidate, 0: ack_timeout_ms (NULL: none) */
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
    uint32_t ack = j->ack_timeout_ms;
    if (j->ack_ms != NULL && j->ack_ms[j->cur] != 0 && j->ack_ms[j->cur] < ack)
        ack = j->ack_ms[j->cur];
    j->ack_deadline = mp__add_sat_u64(j->now_ms, ack);
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

moshpit_err_t mp__joiner_set_ack(mp_joiner_t *j, const uint32_t *ack_ms) {
    if (j == NULL || ack_ms == NULL || j->n_cand == 0)
        return MOSHPIT_OK;
    if (j->ack_ms == NULL)
        j->ack_ms = malloc(j->n_cand * sizeof(*j->ack_ms));
    if (j->ack_ms == NULL)
        return MOSHPIT_ENOMEM;
    memcpy(j->ack_ms, ack_ms, j->n_cand * sizeof(*j->ack_ms));
    if (j->state == MP_JOIN_WAITING && j->phase == JP_SEND)
        joiner_offer(j);
    return MOSHPIT_OK;
}

void mp__joiner_free(mp_joiner_t *j) {
    if (j != NULL) {
        free(j->ack_ms);
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

void mp__joiner_on_sent(mp_joiner_t *j, uint64_t now_ms,
                        const uint8_t to[MP_ID_BYTES]) {
    if (j == NULL || to == NULL || j->state != MP_JOIN_WAITING ||
        j->phase != JP_ACK || memcmp(to, j->cand[j->cur], MP_ID_BYTES) != 0)
        return;
    uint32_t ack = j->ack_timeout_ms;
    if (j->ack_ms != NULL && j->ack_ms[j->cur] != 0 && j->ack_ms[j->cur] < ack)
        ack = j->ack_ms[j->cur];
    uint64_t d = mp__add_sat_u64(now_ms, ack);
    if (d > j->ack_deadline)
        j->ack_deadline = d < j->give_up ? d : j->give_up;
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
