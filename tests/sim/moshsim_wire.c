/* SPDX-License-Identifier: MIT */
/*
 * moshsim_wire.c - the wire scratch of the swarm, and the hostile peer's
 * data frames (moshsim.h): frames it sends are decoded by the receiver as
 * the engine decodes them (engine_data.c mp__engine_on_data_msg:
 * mp__wire_data_hdr_decode, state frames aside, then the round's part
 * handler), and what it receives is handed to its driver in wire form
 * (control messages travel in wire form already; parts become data frames
 * with the real header encoder). Control messages from it are decoded and
 * counted with everyone else's (moshsim_peer.c).
 */
#include "sim/moshsim_int.h"

#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "wire/wire.h"
#include "wire/wire_swim.h"

void moshsim__wire_scratch(moshsim_t *s) {
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
    free(s->dec);
}

void moshsim__wire_on_frame(moshsim_t *s, uint32_t q, uint32_t from,
                            const uint8_t *buf, size_t len) {
    s->wstats.data++;
    mp_data_hdr_t h;
    if (mp__wire_data_hdr_decode(buf, len, &h) != MOSHPIT_OK) {
        s->wstats.data_bad++;
        return;
    }
    if (h.kind == MP_PART_STATE) {
        s->wstats.data_state++;
        return;
    }
    /* simnet payloads are 16-byte aligned and the header is 48 bytes */
    const float *data = (const float *)(const void *)(buf + MP_DATA_HDR_BYTES);
    if (h.codec != s->c.agg.codec) { /* the engine drops it unopened */
        s->wstats.data_bad++;
        return;
    }
    if (h.codec != MOSHPIT_COMPRESS_NONE) {
        if (s->decn < h.count) {
            s->dec = moshsim__xrealloc(s->dec, (size_t)h.count * sizeof(float));
            s->decn = h.count;
        }
        (void)mp__codec_decode(h.codec, buf + MP_DATA_HDR_BYTES, h.count,
                               s->dec);
        data = s->dec;
    }
    int st = moshsim__on_part(s, q, from, h.kind, h.share, h.part, h.wsum,
                              h.round_id, data, h.count);
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
    uint32_t from = m->src - 1;
    if (m->type == MSG_PART) {
        size_t count = (size_t)m->arg[3];
        size_t total = MP_DATA_HDR_BYTES + m->len + MP_DATA_TAG_BYTES;
        uint8_t *f = moshsim__xmalloc(total);
        mp_data_hdr_t h = {.kind = (uint8_t)(m->arg[0] & 0xff),
                           .codec = (uint8_t)s->c.agg.codec,
                           .count = (uint32_t)count,
                           .round_id = m->arg[2],
                           .share = (uint32_t)((m->arg[0] >> 8) & 0xffffff),
                           .part = (uint32_t)(m->arg[0] >> 32),
                           .wsum = bitsd(m->arg[1])};
        mp__wire_data_hdr_encode(&h, f);
        memcpy(f + MP_DATA_HDR_BYTES, m->data, m->len);
        memset(f + MP_DATA_HDR_BYTES + m->len, 0, MP_DATA_TAG_BYTES);
        s->hops.on_recv(s, s->huser, from, true, f, total);
        free(f);
        return;
    }
    if (m->type == MSG_CTRL)
        s->hops.on_recv(s, s->huser, from, false, m->data, m->len);
}
