/* SPDX-License-Identifier: MIT */
/*
 * moshsim_wire.c - the hostile peer's traffic in wire form (moshsim.h):
 * bytes it sends are decoded by the receiver as the engine decodes them
 * (engine.c on_ctrl: mp__msg_decode, else mp__swim_msg_decode; then the
 * type's handler; engine_round.c mp__on_data_msg: mp__data_hdr_decode,
 * state frames aside, then the round's part handler), and the native
 * messages it receives are encoded with the real encoders for its driver.
 */
#include "sim/moshsim_int.h"

#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "wire/wire_swim.h"

static void scratch(moshsim_t *s) {
    if (s->wmsg == NULL) {
        s->wmsg = moshsim__xmalloc(sizeof *s->wmsg);
        s->wswim = moshsim__xmalloc(sizeof *s->wswim);
        s->wbuf = moshsim__xmalloc(MP_CTRL_MAX);
    }
}

void moshsim__wire_free(moshsim_t *s) {
    free(s->wmsg);
    free(s->wswim);
    free(s->wbuf);
}

void moshsim__wire_on_ctrl(moshsim_t *s, uint32_t q, uint32_t from,
                           const uint8_t *buf, size_t len) {
    scratch(s);
    s->wstats.ctrl++;
    mp_msg_t *m = s->wmsg;
    if (mp__msg_decode(buf, len, m) != MOSHPIT_OK) {
        /* the engine's next try: a SWIM message (no SWIM machine here) */
        if (mp__swim_msg_decode(buf, len, s->wswim) == MOSHPIT_OK)
            s->wstats.swim++;
        else
            s->wstats.ctrl_bad++;
        return;
    }
    if ((unsigned)m->type < sizeof s->wstats.by_type / sizeof(uint64_t))
        s->wstats.by_type[m->type]++;
    /* HELLO, REFUSE, PEERS, BYE and the state messages go to the engine's
     * session, membership and state code, which the simulator does not
     * run: decoded, then dropped */
    switch (m->type) {
    case MP_MSG_JOIN:
        moshsim__on_join(s, q, from, m->u.join.seq, m->u.join.weight,
                         m->u.join.bandwidth, m->u.join.window_ms,
                         m->u.join.key, m->u.join.key_len);
        break;
    case MP_MSG_JOIN_ACK:
        moshsim__on_ack(s, q, from, m->u.ack.seq);
        break;
    case MP_MSG_GROUP:
        moshsim__on_group(s, q, from, m->u.group.seq, m->u.group.group_id,
                          m->u.group.members, m->u.group.n);
        break;
    case MP_MSG_ALONE:
        moshsim__on_alone(s, q, from, m->u.alone.seq);
        break;
    case MP_MSG_LEAVE:
        moshsim__on_leave(s, q, from);
        break;
    default:
        break;
    }
}

void moshsim__wire_on_frame(moshsim_t *s, uint32_t q, uint32_t from,
                            const uint8_t *buf, size_t len) {
    s->wstats.data++;
    mp_data_hdr_t h;
    if (mp__data_hdr_decode(buf, len, &h) != MOSHPIT_OK) {
        s->wstats.data_bad++;
        return;
    }
    if (h.kind == MP_PART_STATE) {
        s->wstats.data_state++;
        return;
    }
    /* simnet payloads are 16-byte aligned and the header is 48 bytes */
    int st = moshsim__on_part(
        s, q, from, h.kind, h.share, h.part, h.wsum, h.round_id,
        (const float *)(const void *)(buf + MP_DATA_HDR_BYTES), h.count);
    if (st == -1)
        s->wstats.part_held++;
    else if (st < 0)
        s->wstats.part_ignored++;
    else if ((unsigned)st < 8u)
        s->wstats.part_status[st]++;
}

static double bitsd(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

void moshsim__wire_to_hostile(moshsim_t *s, const simnet_msg_t *m) {
    if (s->hops.on_recv == NULL)
        return;
    scratch(s);
    uint32_t from = m->src - 1;
    if (m->type == MSG_PART) {
        size_t count = m->len / sizeof(float);
        size_t total = MP_DATA_HDR_BYTES + m->len + MP_DATA_TAG_BYTES;
        uint8_t *f = moshsim__xmalloc(total);
        mp_data_hdr_t h = {.kind = (uint8_t)(m->arg[0] & 0xff),
                           .count = (uint32_t)count,
                           .round_id = m->arg[2],
                           .share = (uint32_t)((m->arg[0] >> 8) & 0xffffff),
                           .part = (uint32_t)(m->arg[0] >> 32),
                           .wsum = bitsd(m->arg[1])};
        mp__data_hdr_encode(&h, f);
        memcpy(f + MP_DATA_HDR_BYTES, m->data, m->len);
        memset(f + MP_DATA_HDR_BYTES + m->len, 0, MP_DATA_TAG_BYTES);
        s->hops.on_recv(s, s->huser, from, true, f, total);
        free(f);
        return;
    }
    mp_msg_t *w = s->wmsg;
    memset(w, 0, sizeof *w);
    switch (m->type) {
    case MSG_JOIN:
        w->type = MP_MSG_JOIN;
        w->u.join.seq = m->arg[0];
        w->u.join.bandwidth = (uint32_t)(m->arg[1] >> 32);
        w->u.join.window_ms = (uint32_t)m->arg[1];
        w->u.join.weight = bitsd(m->arg[2]);
        w->u.join.key_len = (uint32_t)m->len;
        memcpy(w->u.join.key, m->data, m->len);
        break;
    case MSG_ACK:
    case MSG_ALONE:
    case MSG_LEAVE:
        w->type = m->type == MSG_ACK     ? MP_MSG_JOIN_ACK
                  : m->type == MSG_ALONE ? MP_MSG_ALONE
                                         : MP_MSG_LEAVE;
        w->u.ack.seq = m->arg[0];
        break;
    case MSG_GROUP:
        w->type = MP_MSG_GROUP;
        w->u.group.seq = m->arg[0];
        w->u.group.group_id = m->arg[1];
        w->u.group.n = (uint32_t)m->arg[2];
        memcpy(w->u.group.members, m->data, m->len);
        break;
    default:
        return;
    }
    size_t len = 0;
    if (mp__msg_encode(w, s->wbuf, MP_CTRL_MAX, &len) == MOSHPIT_OK)
        s->hops.on_recv(s, s->huser, from, false, s->wbuf, len);
}
