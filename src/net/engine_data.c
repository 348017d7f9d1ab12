/* SPDX-License-Identifier: MIT */
/*
 * engine_data.c - the data plane of a group all-reduce on the engine thread:
 * sealing parts straight from the caller's buffer (scatter parts per
 * destination, gather parts once per round under a wrapped round key),
 * opening arriving frames into the scratch buffer while checking their
 * floats, holding frames that race ahead of their round, and moving sealed
 * frames to the sockets with back-pressure per destination
 * (docs/PROTOCOL.md, "Data frames"). Frames of a state download are handed
 * to engine_state.c.
 */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/vec.h"

static uint32_t member_index(const mp_round_t *r, const mp_peer_t *p) {
    for (uint32_t i = 0; i < r->n; i++)
        if (p != NULL && r->members[i] == p)
            return i;
    return UINT32_MAX;
}

/* The header as every receiver of a shared gather part sees it: the
 * per-receiver tag and counter zeroed. */
static void canonical_ad(const uint8_t hdr[MP_DATA_HDR_BYTES],
                         uint8_t out[MP_DATA_HDR_BYTES]) {
    memcpy(out, hdr, MP_DATA_HDR_BYTES);
    memset(out + 8, 0, 16);
}

/* Hands an opened part (in mp->scratch) to the group machine. */
static void deliver(moshpit_t *mp, mp_peer_t *p, uint32_t from,
                    const mp_data_hdr_t *h, bool finite) {
    mp_part_status_t st = mp__group_on_part_checked(
        mp->round.group, mp__now_ms(), from, (mp_part_kind_t)h->kind, h->share,
        h->part, mp->scratch, h->count, h->wsum, finite ? 1 : 0);
    if (st != MP_PART_OK && st != MP_PART_DUP && st != MP_PART_LATE)
        mp__log(mp, MOSHPIT_LOG_WARN, "part from %.8s rejected (status %d)%s",
                p->id_txt, (int)st,
                st == MP_PART_NONFINITE ? ": non-finite values, member dropped"
                                        : "");
}

void mp__process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                       size_t len, const mp_data_hdr_t *h) {
    mp_round_t *r = &mp->round;
    uint32_t from = member_index(r, p);
    if (from == UINT32_MAX || r->group == NULL)
        return;
    if (h->counter <= p->rx_counter) {
        mp__log(mp, MOSHPIT_LOG_WARN, "replayed data frame from %.8s dropped",
                p->id_txt);
        return;
    }
    size_t plen = (size_t)h->count * 4u;
    /* whether the floats are finite, found while each chunk is in the L1
     * cache by a scan whose time depends only on plen; read only once the
     * tag verified */
    uint32_t nonfinite = 0;
    if (mp__session_open_scan(p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
                              buf + MP_DATA_HDR_BYTES, plen,
                              buf + MP_DATA_HDR_BYTES + plen,
                              (uint8_t *)mp->scratch, mp__vec_scan_nonfinite,
                              &nonfinite) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "data frame from %.8s failed authentication, dropped",
                p->id_txt);
        return;
    }
    p->rx_counter = h->counter;
    r->bytes_received += len;
    deliver(mp, p, from, h, (nonfinite & MP_VEC_NONFINITE) == 0);
}

/* A gather part in the shared form: part 1 = header + the round key wrapped
 * for us, part 2 = the part sealed once under that key for every member. */
void mp__on_shared_gather(moshpit_t *mp, zmq_msg_t *head, zmq_msg_t *body) {
    const uint8_t *hb = zmq_msg_data(head);
    const uint8_t *bb = zmq_msg_data(body);
    size_t blen = zmq_msg_size(body);
    mp_round_t *r = &mp->round;
    mp_data_hdr_t h;
    if (zmq_msg_size(head) != MP_GATHER_HEAD_BYTES ||
        blen < MP_DATA_TAG_BYTES ||
        mp__data_hdr_decode(hb, MP_DATA_HDR_BYTES + blen, &h) != MOSHPIT_OK ||
        h.kind != MP_PART_GATHER) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "malformed gather frame dropped");
        return;
    }
    mp_peer_t *p = mp__find_peer_by_tag(mp, h.tag);
    uint32_t from = member_index(r, p);
    if (p == NULL || p->state != MP_PEER_LIVE || r->group == NULL ||
        h.round_id != r->gid || from == UINT32_MAX)
        return; /* gathers never precede our round: nothing to hold */
    if (h.counter <= p->rx_counter) {
        mp__log(mp, MOSHPIT_LOG_WARN, "replayed data frame from %.8s dropped",
                p->id_txt);
        return;
    }
    /* the wrap authenticates the header and the body's tag together */
    size_t clen = blen - MP_DATA_TAG_BYTES;
    uint8_t ad[MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES], wrap[33];
    memcpy(ad, hb, MP_DATA_HDR_BYTES);
    memcpy(ad + MP_DATA_HDR_BYTES, bb + clen, MP_DATA_TAG_BYTES);
    if (mp__session_open(p->keys, h.counter, ad, sizeof(ad),
                         hb + MP_DATA_HDR_BYTES, sizeof(wrap),
                         hb + MP_DATA_HDR_BYTES + sizeof(wrap),
                         wrap) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "gather key from %.8s failed authentication, dropped",
                p->id_txt);
        return;
    }
    p->rx_counter = h.counter;
    uint32_t cipher = wrap[0];
    if (r->gk_rx[from] == NULL ||
        memcmp(r->gk_rx_raw[from], wrap + 1, 32) != 0) {
        mp__session_keys_free(r->gk_rx[from]);
        r->gk_rx[from] = NULL;
        if ((cipher & mp->ciphers) == 0 ||
            mp__session_keys_from_raw(cipher, wrap + 1, &r->gk_rx[from]) !=
                MOSHPIT_OK) {
            mp__crypto_wipe(wrap, sizeof(wrap));
            mp__log(mp, MOSHPIT_LOG_WARN, "bad gather key from %.8s",
                    p->id_txt);
            return;
        }
        memcpy(r->gk_rx_raw[from], wrap + 1, 32);
    }
    mp__crypto_wipe(wrap, sizeof(wrap));
    canonical_ad(hb, ad);
    uint32_t nonfinite = 0; /* as in mp__process_frame */
    if (mp__session_open_scan(r->gk_rx[from], (uint64_t)h.part + 1, ad,
                              MP_DATA_HDR_BYTES, bb, clen, bb + clen,
                              (uint8_t *)mp->scratch, mp__vec_scan_nonfinite,
                              &nonfinite) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_WARN,
                "gather part from %.8s failed authentication, dropped",
                p->id_txt);
        return;
    }
    r->bytes_received += MP_GATHER_HEAD_BYTES + blen;
    deliver(mp, p, from, &h, (nonfinite & MP_VEC_NONFINITE) == 0);
}

void mp__on_data_msg(moshpit_t *mp, zmq_msg_t *zm) {
    const uint8_t *buf = zmq_msg_data(zm);
    size_t len = zmq_msg_size(zm);
    mp_data_hdr_t h;
    if (mp__data_hdr_decode(buf, len, &h) != MOSHPIT_OK) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "malformed data frame dropped");
        return;
    }
    mp_peer_t *p = mp__find_peer_by_tag(mp, h.tag);
    if (p == NULL || p->state != MP_PEER_LIVE) {
        mp__log(mp, MOSHPIT_LOG_DEBUG, "data frame with unknown tag dropped");
        return;
    }
    if (h.kind == MP_PART_STATE) {
        mp__state_on_frame(mp, p, buf, len, &h);
        return;
    }
    mp_round_t *r = &mp->round;
    if (r->group != NULL && h.round_id == r->gid) {
        mp__process_frame(mp, p, buf, len, &h);
        return;
    }
    if (mp__recent_gid(mp, h.round_id))
        return;
    /* maybe a round we are about to start: hold it (bounded in total and
     * per sender, so one peer cannot take the room of the others) */
    bool peer_full = p->early_frames >= MP_EARLY_PEER_MAX_FRAMES ||
                     p->early_bytes + len > MP_EARLY_PEER_MAX_BYTES;
    if (peer_full || mp->nearly >= MP_EARLY_MAX_FRAMES ||
        mp->early_bytes + len > MP_EARLY_MAX_BYTES) {
        uint64_t now = mp__now_ms();
        uint64_t *last = peer_full ? &p->early_logged_ms : &mp->early_logged_ms;
        if (*last == 0 || now - *last >= 1000) {
            *last = now;
            if (peer_full)
                mp__log(mp, MOSHPIT_LOG_WARN,
                        "early data frames from %.8s over the per-peer "
                        "limit (%u frames, %zu bytes held), dropped",
                        p->id_txt, p->early_frames, p->early_bytes);
            else
                mp__log(mp, MOSHPIT_LOG_WARN,
                        "early data frames over the limit (%zu frames, %zu "
                        "bytes held), frame from %.8s dropped",
                        mp->nearly, mp->early_bytes, p->id_txt);
        }
        return;
    }
    if ((mp->nearly & (mp->nearly + 1)) == 0 || mp->early == NULL) {
        size_t cap = (mp->nearly + 1) * 2;
        mp_early_t *ne = realloc(mp->early, cap * sizeof(*ne));
        if (ne == NULL)
            return;
        mp->early = ne;
    }
    zmq_msg_t *held = malloc(sizeof(*held));
    if (held == NULL)
        return;
    zmq_msg_init(held);
    zmq_msg_move(held, zm);
    mp->early[mp->nearly].from = p;
    mp->early[mp->nearly].round_id = h.round_id;
    mp->early[mp->nearly].arrived_ms = mp__now_ms();
    mp->early[mp->nearly].msg = held;
    mp->early[mp->nearly].bytes = len;
    mp->early_bytes += len;
    p->early_bytes += len;
    p->early_frames++;
    mp->nearly++;
}

static bool seal_part(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s) {
    size_t plen = (size_t)s->count * 4u;
    size_t total = MP_DATA_HDR_BYTES + plen + MP_DATA_TAG_BYTES;
    zmq_msg_t *zm = mp__stash_of(p);
    if (zmq_msg_init_size(zm, total) != 0)
        return false;
    uint8_t *buf = zmq_msg_data(zm);
    mp_data_hdr_t h = {.kind = (uint8_t)s->kind,
                       .count = s->count,
                       .tag = p->their_tag,
                       .counter = ++p->tx_counter,
                       .round_id = mp->round.gid,
                       .share = s->share,
                       .part = s->part,
                       .wsum = s->wsum};
    mp__data_hdr_encode(&h, buf);
    if (mp__session_seal(p->keys, h.counter, buf, MP_DATA_HDR_BYTES,
                         (const uint8_t *)s->data, plen,
                         buf + MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES + plen) != MOSHPIT_OK) {
        zmq_msg_close(zm);
        return false;
    }
    p->stash_full = true;
    p->stash_bytes = (uint32_t)total;
    return true;
}

/* The sealed body of own gather part s, sealed on first use and shared by
 * every receiver (zmq_msg_copy shares the buffer). */
static zmq_msg_t *gather_body(moshpit_t *mp, const mp_send_t *s) {
    mp_round_t *r = &mp->round;
    if (s->part >= r->ngbody) {
        uint32_t n = s->part + 1 > 2 * r->ngbody ? s->part + 1 : 2 * r->ngbody;
        void **nb = realloc(r->gbody, n * sizeof(*nb));
        if (nb == NULL)
            return NULL;
        memset(nb + r->ngbody, 0, (n - r->ngbody) * sizeof(*nb));
        r->gbody = nb;
        r->ngbody = n;
    }
    if (r->gbody[s->part] != NULL)
        return r->gbody[s->part];
    size_t plen = (size_t)s->count * 4u;
    zmq_msg_t *zm = malloc(sizeof(*zm));
    if (zm == NULL || zmq_msg_init_size(zm, plen + MP_DATA_TAG_BYTES) != 0) {
        free(zm);
        return NULL;
    }
    uint8_t hdr[MP_DATA_HDR_BYTES], ad[MP_DATA_HDR_BYTES];
    mp_data_hdr_t h = {.kind = MP_PART_GATHER,
                       .count = s->count,
                       .round_id = r->gid,
                       .share = s->share,
                       .part = s->part,
                       .wsum = s->wsum};
    mp__data_hdr_encode(&h, hdr);
    canonical_ad(hdr, ad);
    uint8_t *buf = zmq_msg_data(zm);
    if (mp__session_seal(r->gk_seal, (uint64_t)s->part + 1, ad, sizeof(ad),
                         (const uint8_t *)s->data, plen, buf,
                         buf + plen) != MOSHPIT_OK) {
        zmq_msg_close(zm);
        free(zm);
        return NULL;
    }
    r->gbody[s->part] = zm;
    return zm;
}

/* Stashes a shared gather part for p: its own header with the round key
 * wrapped under the p session, plus the shared sealed body. */
static bool seal_gather(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s) {
    mp_round_t *r = &mp->round;
    zmq_msg_t *body = gather_body(mp, s);
    if (body == NULL)
        return false;
    zmq_msg_t *hm = mp__stash_of(p);
    zmq_msg_t *bm = (zmq_msg_t *)(void *)p->stash_body;
    if (zmq_msg_init_size(hm, MP_GATHER_HEAD_BYTES) != 0)
        return false;
    uint8_t *buf = zmq_msg_data(hm);
    mp_data_hdr_t h = {.kind = MP_PART_GATHER,
                       .count = s->count,
                       .tag = p->their_tag,
                       .counter = ++p->tx_counter,
                       .round_id = r->gid,
                       .share = s->share,
                       .part = s->part,
                       .wsum = s->wsum};
    mp__data_hdr_encode(&h, buf);
    size_t blen = zmq_msg_size(body);
    uint8_t ad[MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES], wrap[33];
    memcpy(ad, buf, MP_DATA_HDR_BYTES);
    memcpy(ad + MP_DATA_HDR_BYTES,
           (const uint8_t *)zmq_msg_data(body) + blen - MP_DATA_TAG_BYTES,
           MP_DATA_TAG_BYTES);
    wrap[0] = (uint8_t)r->gk_cipher;
    memcpy(wrap + 1, r->gk, 32);
    moshpit_err_t e = mp__session_seal(p->keys, h.counter, ad, sizeof(ad), wrap,
                                       sizeof(wrap), buf + MP_DATA_HDR_BYTES,
                                       buf + MP_DATA_HDR_BYTES + sizeof(wrap));
    mp__crypto_wipe(wrap, sizeof(wrap));
    zmq_msg_init(bm);
    if (e != MOSHPIT_OK || zmq_msg_copy(bm, body) != 0) {
        zmq_msg_close(hm);
        zmq_msg_close(bm);
        return false;
    }
    p->stash_full = true;
    p->stash_multi = true;
    p->stash_bytes = (uint32_t)(MP_GATHER_HEAD_BYTES + blen);
    return true;
}

/* Sends p's stashed frame if its socket takes it now. */
static bool send_stash(moshpit_t *mp, mp_peer_t *p) {
    if (!p->stash_multi)
        return zmq_msg_send(mp__stash_of(p), p->data, ZMQ_DONTWAIT) >= 0;
    if (zmq_msg_send(mp__stash_of(p), p->data, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return false;
    /* the first part went in, so the pipe takes the rest of the message */
    zmq_msg_t *bm = (zmq_msg_t *)(void *)p->stash_body;
    if (zmq_msg_send(bm, p->data, ZMQ_DONTWAIT) < 0) {
        mp__log(mp, MOSHPIT_LOG_ERROR, "second part of a gather frame lost");
        zmq_msg_close(bm);
    }
    p->stash_multi = false;
    return true;
}

/* Moves as many parts to the sockets as they take. Returns true if some
 * member's socket is full (the loop must poll it for POLLOUT). */
void mp__pump_sends(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->group == NULL)
        return;
    bool progress = true;
    while (progress) {
        progress = false;
        for (uint32_t i = 0; i < r->n; i++) {
            mp_peer_t *p = r->members[i];
            if (p == NULL || p->data == NULL)
                continue;
            if (!mp__group_member_alive(r->group, i)) {
                mp__stash_drop(p);
                continue;
            }
            if (!p->stash_full) {
                mp_send_t s;
                if (!mp__group_next_send(r->group, i, &s))
                    continue;
                bool sealed = s.kind == MP_PART_GATHER ? seal_gather(mp, p, &s)
                                                       : seal_part(mp, p, &s);
                if (!sealed) {
                    mp__log(mp, MOSHPIT_LOG_ERROR, "sealing a part failed");
                    continue;
                }
            }
            if (send_stash(mp, p)) {
                p->stash_full = false;
                r->bytes_sent += p->stash_bytes;
                progress = true;
            }
        }
    }
}
