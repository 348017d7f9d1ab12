/* SPDX-License-Identifier: MIT */
/*
 * round_msg.c - decoded control messages into the round machine, and its
 * outputs into wire messages (round_msg.h). No sockets, no clock.
 */
#include "net/round_msg.h"

#include <string.h>

mp_rnd_msg_status_t mp__round_msg_dispatch(mp_rnd_t *rm, uint64_t now,
                                           const uint8_t from[MP_ID_BYTES],
                                           const mp_msg_t *m) {
    switch (m->type) {
    case MP_MSG_JOIN: {
        const mp_join_t *j = &m->u.join;
        mp_rnd_join_t rj = {.seq = j->seq,
                            .weight = j->weight,
                            .bandwidth = j->bandwidth,
                            .window_ms = j->window_ms,
                            .key_len = j->key_len,
                            .phase = j->phase,
                            .noshare = j->noshare != 0,
                            .parts = j->parts != 0,
                            .key = j->key,
                            .line_len = j->line_len,
                            .line = j->line};
        switch (mp__rnd_on_join(rm, now, from, &rj)) {
        case MP_RND_JOIN_BAD_KEY:
            return MP_RND_MSG_BAD_KEY;
        case MP_RND_JOIN_NO_SLOT:
            return MP_RND_MSG_NO_SLOT;
        case MP_RND_JOIN_REFUSED:
            return MP_RND_MSG_REFUSED;
        default:
            return MP_RND_MSG_OK;
        }
    }
    case MP_MSG_JOIN_ACK:
        mp__rnd_on_ack(rm, now, from, m->u.ack.seq);
        return MP_RND_MSG_OK;
    case MP_MSG_GROUP:
        if (!mp__rnd_in_call(rm) || mp__rnd_group(rm) != NULL)
            return MP_RND_MSG_OK; /* no joiner to take it */
        return mp__rnd_on_group(rm, now, from, m->u.group.seq,
                                m->u.group.group_id, m->u.group.members,
                                m->u.group.n, m->u.group.phase)
                   ? MP_RND_MSG_OK
                   : MP_RND_MSG_STALE;
    case MP_MSG_ALONE:
        mp__rnd_on_alone(rm, now, from, m->u.alone.seq);
        return MP_RND_MSG_OK;
    case MP_MSG_LEAVE:
        mp__rnd_on_leave(rm, from);
        return MP_RND_MSG_OK;
    default:
        return MP_RND_MSG_OTHER;
    }
}

void mp__round_msg_from_out(const mp_rnd_out_t *o, mp_msg_t *m) {
    switch (o->msg) {
    case MP_RND_JOIN:
        m->type = MP_MSG_JOIN;
        memset(&m->u.join, 0, sizeof(m->u.join));
        m->u.join.seq = o->seq;
        m->u.join.weight = o->weight;
        m->u.join.bandwidth = o->bandwidth;
        m->u.join.window_ms = o->window_ms;
        m->u.join.key_len = o->key_len;
        m->u.join.phase = o->phase;
        m->u.join.noshare = o->noshare ? 1 : 0;
        m->u.join.parts = 1; /* this version cuts parts by the group */
        memcpy(m->u.join.key, o->key, o->key_len);
        m->u.join.line_len = o->line_len;
        if (o->line_len != 0)
            memcpy(m->u.join.line, o->line, o->line_len);
        break;
    case MP_RND_JOIN_ACK:
        m->type = MP_MSG_JOIN_ACK;
        m->u.ack.seq = o->seq;
        break;
    case MP_RND_ALONE:
        m->type = MP_MSG_ALONE;
        m->u.alone.seq = o->seq;
        break;
    case MP_RND_LEAVE:
        m->type = MP_MSG_LEAVE;
        m->u.leave.seq = o->seq;
        break;
    case MP_RND_GROUP:
        m->type = MP_MSG_GROUP;
        m->u.group.seq = o->seq;
        m->u.group.group_id = o->group_id;
        m->u.group.n = o->n;
        m->u.group.phase = o->phase;
        memcpy(m->u.group.members, o->members, o->n * sizeof(o->members[0]));
        break;
    case MP_RND_DONE:
        m->type = MP_MSG_DONE;
        m->u.done.group_id = o->group_id;
        m->u.done.up_kbps = 0; /* the engine fills it in */
        break;
    }
}
