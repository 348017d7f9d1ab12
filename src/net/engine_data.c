/* SPDX-License-Identifier: MIT */
/*
 * engine_data.c - the data plane of a group all-reduce on the engine thread:
 * sealing parts straight from the caller's buffer under each destination's
 * session keys (scatter and gather parts alike),
 * opening arriving frames into the scratch buffer while checking their
 * floats (the check fused into the AEGIS decryption loop), holding frames that
 * race ahead of their round, and moving sealed frames to the sockets with
 * back-pressure per destination (docs/PROTOCOL.md, "Data frames"). Frames of a
 * state download are handed to engine_state.c.
 */
#include "engine_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/codec.h"
#include "core/share.h"
#include "core/vec.h"
#include "shm.h"

_Static_assert(MP_SHM_REF_BYTES == MP_DATA_SHM_REF_BYTES,
               "a slot reference fills the frame's body");

/* parts to a mate on this host that may go over TCP before it takes our
 * region; after that many the region goes and they all do */
#define MP_SHM_UNTAKEN_MAX 256u
/* how often we try again to take a mate's region that we could not take
 * (one that is not there yet is tried with every frame) */
#define MP_SHM_RETRY_MS 100u
/* a part waits this long for a free slot in a mate's region before it
 * goes over TCP (the mate is busy; its slots free as it reads them) */
#define MP_SHM_WAIT_MS 200u

void mp__engine_shm_drop(mp_peer_t *p) {
    mp__shm_free(p->shm_tx);
    mp__shm_free(p->shm_rx);
    p->shm_tx = NULL;
    p->shm_rx = NULL;
    p->shm_made = false;
    p->shm_untaken = 0;
    p->shm_try_ms = 0;
    p->shm_wait_ms = 0;
}

/* The name of the region of the session with p that carries our parts to
 * it (tx) or its parts to us. */
static void shm_name_of(const mp_peer_t *p, bool tx,
                        char name[MP_SHM_NAME_MAX]) {
    uint8_t sec[16];
    mp__session_shm_secret(p->keys, tx, sec);
    mp__shm_name(sec, name);
    mp__crypto_wipe(sec, sizeof(sec));
}

/* The region for p's parts to us: taken (opened, checked, acknowledged)
 * once it is there; tried again at most every MP_SHM_RETRY_MS. A part
 * that came over TCP although we hold its region may be the first of a
 * new one (p closed the old one when we were in different groups and we
 * did not see it: docs/DESIGN.md, "Mates on this host"): then a region
 * there replaces ours. */
static void shm_take(moshpit_t *mp, mp_peer_t *p, bool tcp_part) {
    uint64_t now = mp__engine_now_ms();
    if (!p->same_host || (p->shm_rx != NULL && !tcp_part) || p->keys == NULL ||
        (p->shm_try_ms != 0 && now - p->shm_try_ms < MP_SHM_RETRY_MS))
        return;
    char name[MP_SHM_NAME_MAX];
    shm_name_of(p, false, name);
    int err = 0;
    mp_shm_t *rx = mp__shm_attach(name, &err);
    if (rx != NULL) {
        mp__shm_free(p->shm_rx);
        p->shm_rx = rx;
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "parts from %.8s come through shared memory", p->id_txt);
    } else if (err != ENOENT) {
        /* not a region we can take: tried again only after a while (no
         * region there yet costs one failed open, tried with every
         * frame, so that the part that comes with a new one takes it) */
        p->shm_try_ms = now;
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "shared memory of %.8s not taken (%s): its parts come "
                       "over TCP",
                       p->id_txt, strerror(err));
    }
}

/* Whether p reads part s of ours straight from our memory (it took our
 * region with direct reads, state st): the float32 values of the
 * caller's buffer or of our share's result (mirror_part); encoded parts
 * are in buffers the next part overwrites, and go through slots. */
static bool direct_ok(const moshpit_t *mp, int st) {
    return st == MP_SHM_TAKEN_DIRECT && mp->win != NULL &&
           mp->cfg.compression == MOSHPIT_COMPRESS_NONE;
}

/* Whether copy m of our share's result may be rewritten: no live mate
 * that was sent gather parts there has yet to say DONE for that round,
 * or that round ended here more than round_timeout_ms ago (every member
 * has ended it by its deadline since). */
static bool mirror_free(const moshpit_t *mp, int m, uint64_t now) {
    const mp_mirror_t *mi = &mp->mirror[m];
    if (mi->gid == 0)
        return true;
    if (mi->end_ms == 0)
        return false; /* the round in progress (another call's?) */
    if (now - mi->end_ms > mp->cfg.round_timeout_ms)
        return true;
    for (size_t i = 0; i < mp->npeers; i++)
        if (mp->peers[i]->state == MP_PEER_LIVE &&
            mp->peers[i]->mirror_gid[m] == mi->gid)
            return false;
    return true;
}

/* Gather part s (of our own share's result, in the caller's buffer) in a
 * copy that mates read it from: a part's values are copied at its first
 * gather of the round (then the same for every mate), and stay after our
 * call returns the caller's buffer, until every mate that was sent a
 * reference there said DONE for the round. The two copies take turns; a
 * round that finds neither free sends its gathers through slots. NULL
 * then (or without memory); *m: the copy. */
static const float *mirror_part(moshpit_t *mp, const mp_send_t *s, int *m) {
    mp_round_t *r = &mp->round;
    size_t pe = mp__group_part_elems(r->group);
    mp_mirror_t *mi = NULL;
    for (int k = 0; k < 2 && mi == NULL; k++)
        if (mp->mirror[k].gid == r->gid)
            mi = &mp->mirror[ *m = k];
    if (mi == NULL) {
        uint64_t now = mp__engine_now_ms();
        int k = mp->mirror[0].end_ms <= mp->mirror[1].end_ms ? 0 : 1;
        if (!mirror_free(mp, k, now))
            k = 1 - k;
        if (!mirror_free(mp, k, now))
            return NULL;
        mi = &mp->mirror[ *m = k];
        size_t floats = (size_t)(mp__group_share_bytes(r->group, r->self) / 4u);
        size_t parts = pe != 0 ? (floats + pe - 1) / pe : 0;
        /* a mate that still reads the copy's old round (past its
         * deadline) reads it no more */
        mp__shm_window_bump(mp->win, 1u + (unsigned)k);
        mi->gid = 0; /* set once the copy is ready for this round */
        mi->end_ms = 0;
        if (floats > mi->floats || mi->buf == NULL) {
            float *b = realloc(mi->buf, (floats ? floats : 1) * 4u);
            if (b == NULL)
                return NULL;
            mi->buf = b;
            mi->floats = floats;
        }
        if (parts > mi->parts || mi->have == NULL) {
            uint8_t *h = realloc(mi->have, parts ? parts : 1);
            if (h == NULL)
                return NULL;
            mi->have = h;
            mi->parts = parts;
        }
        memset(mi->have, 0, mi->parts);
        mi->gid = r->gid;
    }
    size_t off = (size_t)s->part * pe;
    if (s->part >= mi->parts || off > mi->floats || s->count > mi->floats - off)
        return NULL;
    if (!mi->have[s->part]) {
        memcpy(mi->buf + off, s->data, (size_t)s->count * 4u);
        mi->have[s->part] = 1;
    }
    return mi->buf + off;
}

/* Puts part s into our region for p (made at the session's first part)
 * once p took it, or names it for p to read directly; false: the part
 * goes sealed over TCP. */
static bool shm_put(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s,
                    uint8_t ref[MP_SHM_REF_BYTES]) {
    if (!p->same_host || p->keys == NULL ||
        (s->kind != MP_PART_SCATTER && s->kind != MP_PART_GATHER))
        return false;
    int st = p->shm_tx != NULL ? mp__shm_state(p->shm_tx) : MP_SHM_MADE;
    if (st == MP_SHM_CLOSED) {
        /* p closed it (a group without us formed there): made anew now,
         * so that it is there when this part, over TCP, reaches p */
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "%.8s closed our shared memory: made anew", p->id_txt);
        mp__shm_free(p->shm_tx);
        p->shm_tx = NULL;
        p->shm_made = false;
    }
    if (!p->shm_made) {
        p->shm_made = true;
        char name[MP_SHM_NAME_MAX];
        shm_name_of(p, true, name);
        int err = 0;
        p->shm_tx = mp__shm_create(name, MP_SHM_SLOTS, MP_SHM_SLOT_BYTES, &err);
        if (p->shm_tx != NULL && mp->win != NULL &&
            !mp__shm_expose(p->shm_tx, mp->win))
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "shared memory for %.8s does not name our memory: "
                           "no direct reads",
                           p->id_txt);
        if (p->shm_tx == NULL)
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "shared memory for %.8s not made (%s): parts to it "
                           "go over TCP",
                           p->id_txt, strerror(err));
        return false; /* it takes the region when this part arrives */
    }
    if (p->shm_tx == NULL)
        return false;
    if (st != MP_SHM_TAKEN && st != MP_SHM_TAKEN_DIRECT) {
        if (++p->shm_untaken >= MP_SHM_UNTAKEN_MAX) {
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "%.8s did not take our shared memory: parts to it "
                           "go over TCP",
                           p->id_txt);
            mp__shm_free(p->shm_tx);
            p->shm_tx = NULL;
        }
        return false;
    }
    if (direct_ok(mp, st)) {
        /* scatter parts from the caller's buffer (epoch 0: it changes when
         * our call returns it), gathers from a copy (epoch 1 + m) */
        int m = -1;
        const void *at = s->kind == MP_PART_GATHER ? mirror_part(mp, s, &m)
                                                   : (const void *)s->bytes;
        if (at != NULL) {
            mp__shm_ref_direct(mp->win, (unsigned)(m + 1), at, ref);
            if (m >= 0)
                p->mirror_gid[m] = mp->round.gid;
            p->shm_untaken = 0;
            mp->round.direct_sent++;
            return true;
        }
    }
    if (!mp__shm_put(p->shm_tx, p->shm_round, s->bytes, s->nbytes, ref))
        return false;
    p->shm_untaken = 0;
    return true;
}

/* Whether the parts for member i (p) wait for a slot of our region (p
 * reads our parts more slowly than we write them), before any is taken
 * from the group: a part taken points into buffers the next part taken
 * may overwrite (an encoded scatter part), so it must leave at once. For
 * at most MP_SHM_WAIT_MS, then parts go over TCP until a slot is free
 * again. */
static bool shm_wait(const moshpit_t *mp, uint32_t i, mp_peer_t *p,
                     uint64_t now) {
    const mp_round_t *r = &mp->round;
    int st = p->shm_tx != NULL ? mp__shm_state(p->shm_tx) : MP_SHM_CLOSED;
    if (p->shm_tx == NULL || !mp__group_has_sends_for(r->group, i) ||
        (st != MP_SHM_TAKEN && st != MP_SHM_TAKEN_DIRECT) ||
        direct_ok(mp, st) || mp__shm_room(p->shm_tx, p->shm_round)) {
        p->shm_wait_ms = 0;
        return false;
    }
    if (p->shm_wait_ms == 0)
        p->shm_wait_ms = now;
    return now - p->shm_wait_ms < MP_SHM_WAIT_MS;
}

/* The values of a part in shared memory (its reference opened in ref)
 * into mp->scratch (float32, *finite set) or mp->encbuf (encoded). */
static bool shm_fetch(moshpit_t *mp, mp_peer_t *p, const mp_data_hdr_t *h,
                      const uint8_t ref[MP_SHM_REF_BYTES], bool *finite) {
    if (h->codec != MOSHPIT_COMPRESS_NONE) {
        if (!mp__shm_get(p->shm_rx, ref, mp->encbuf,
                         mp__codec_bytes(h->codec, h->count)))
            return false;
        *finite = mp__codec_decode(h->codec, mp->encbuf, h->count, mp->scratch);
        return true;
    }
    size_t plen = (size_t)h->count * 4u;
    if (!mp__shm_get(p->shm_rx, ref, mp->scratch, plen))
        return false;
    /* read only from our private copy: the mate can rewrite the region */
    uint32_t nonfinite = 0;
    mp__vec_scan_nonfinite(&nonfinite, (const uint8_t *)mp->scratch, plen);
    *finite = (nonfinite & MP_VEC_NONFINITE) == 0;
    return true;
}

static uint32_t member_index(const mp_round_t *r, const mp_peer_t *p) {
    for (uint32_t i = 0; i < r->n; i++)
        if (p != NULL && r->members[i] == p)
            return i;
    return UINT32_MAX;
}

/* Hands an opened part (in mp->scratch) to the group machine. */
static void deliver(moshpit_t *mp, mp_peer_t *p, uint32_t from,
                    const mp_data_hdr_t *h, size_t len, bool finite) {
    uint64_t now = mp__engine_awake(mp);
    mp_round_t *r = &mp->round;
    mp_part_status_t st = mp__group_on_part_checked(
        r->group, now, from, (mp_part_kind_t)h->kind, h->share, h->part,
        mp->scratch, h->count, h->wsum, finite ? 1 : 0);
    if (st == MP_PART_OK && h->kind == MP_PART_SCATTER) {
        /* the time since its previous part arrived (or since the group
         * started here) measures its link (linkstat.h), unless a
         * connection to it broke or stalled this round (the times are the
         * repair's); a part that waited for our GROUP counts from when it
         * arrived, and only from a part before it (it came before our
         * start), so that a member whose parts always beat our GROUP is
         * measured too. The bytes and the last arrival go into our DONE */
        uint64_t at = r->replay ? r->replay_at : now;
        uint64_t since = p->part_ms != 0 ? p->part_ms : r->start_ms;
        if ((p->part_ms != 0 || !r->replay) && from < MP_GROUP_MAX &&
            !((r->repaired >> from) & 1u))
            mp__link_part(&p->link, len, at > since ? at - since : 0);
        p->part_ms = at != 0 ? at : 1;
        r->scat_bytes[from] += len;
        r->scat_last_ms[from] = now;
    }
    if (st == MP_PART_DUP)
        r->dups++; /* sent again though it had arrived */
    else if (st != MP_PART_OK && st != MP_PART_LATE)
        mp__engine_log(
            mp, MOSHPIT_LOG_WARN, "part from %.8s rejected (status %d)%s",
            p->id_txt, (int)st,
            st == MP_PART_NONFINITE ? ": non-finite values, member dropped"
                                    : "");
}

void mp__engine_process_frame(moshpit_t *mp, mp_peer_t *p, const uint8_t *buf,
                              size_t len, const mp_data_hdr_t *h) {
    mp_round_t *r = &mp->round;
    uint32_t from = member_index(r, p);
    if (from == UINT32_MAX || r->group == NULL)
        return;
    if (!mp__replay_fresh(&p->rx_window, h->counter)) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "replayed (or too old) data frame from %.8s dropped",
                       p->id_txt);
        return;
    }
    if (h->kind == MP_PART_MARK) {
        mp__engine_resume_on_mark(mp, p, from, buf, len, h);
        return;
    }
    if (h->codec != mp->cfg.compression) {
        /* the group key holds the setting: a member that sends another
         * encoding misbehaves; its frame is not even opened */
        mp__engine_log(
            mp, MOSHPIT_LOG_WARN,
            "data frame from %.8s with compression %u (this group uses "
            "%u) dropped",
            p->id_txt, (unsigned)h->codec, (unsigned)mp->cfg.compression);
        return;
    }
    uint8_t layout = mp__share_part_layout(mp__group_part_elems(r->group));
    if (h->layout != layout) {
        /* members agree on the part size through the roster (GROUP "pp");
         * parts cut otherwise would land at other offsets */
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "data frame from %.8s cut in parts of %u values (this "
                       "group uses %u) dropped",
                       p->id_txt, MP_PART_ELEMS_DEFAULT >> h->layout,
                       MP_PART_ELEMS_DEFAULT >> layout);
        return;
    }
    if (h->shm) {
        uint8_t ref[MP_SHM_REF_BYTES];
        bool fin = false;
        if (p->shm_rx == NULL ||
            mp__session_open(p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
                             buf + MP_DATA_HDR_BYTES, sizeof(ref),
                             buf + MP_DATA_HDR_BYTES + sizeof(ref),
                             ref) != MOSHPIT_OK) {
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "data frame from %.8s %s, dropped", p->id_txt,
                           p->shm_rx == NULL
                               ? "names shared memory we never took"
                               : "failed authentication");
            return;
        }
        mp__replay_take(&p->rx_window, h->counter);
        mp__engine_resume_accepted(mp, p, from, h->counter);
        /* counted as the frame the part would have been over TCP */
        size_t wire = MP_DATA_HDR_BYTES + mp__codec_bytes(h->codec, h->count) +
                      MP_DATA_TAG_BYTES;
        if (!shm_fetch(mp, p, h, ref, &fin)) {
            /* rewritten meanwhile: its round ended at the sender, which
             * will not send it again; the round goes on without it, as
             * when a member leaves */
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "part from %.8s in shared memory no longer there, "
                           "dropped",
                           p->id_txt);
            return;
        }
        r->bytes_received += wire;
        r->shm_recv++;
        if (mp__shm_ref_direct_is(ref))
            r->direct_recv++;
        deliver(mp, p, from, h, wire, fin);
        return;
    }
    if (h->codec != MOSHPIT_COMPRESS_NONE) {
        size_t elen = mp__codec_bytes(h->codec, h->count);
        if (mp__session_open(p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
                             buf + MP_DATA_HDR_BYTES, elen,
                             buf + MP_DATA_HDR_BYTES + elen,
                             mp->encbuf) != MOSHPIT_OK) {
            mp__engine_log(
                mp, MOSHPIT_LOG_WARN,
                "data frame from %.8s failed authentication, dropped",
                p->id_txt);
            return;
        }
        mp__replay_take(&p->rx_window, h->counter);
        mp__engine_resume_accepted(mp, p, from, h->counter);
        r->bytes_received += len;
        /* decoded only once authenticated; a part that decodes to a NaN or
         * an infinity (a non-finite scale, a binary16 infinity) is refused
         * by the group machine like a float32 one */
        bool fin =
            mp__codec_decode(h->codec, mp->encbuf, h->count, mp->scratch);
        deliver(mp, p, from, h, len, fin);
        return;
    }
    size_t plen = (size_t)h->count * 4u;
    /* whether the floats are finite, found by the decryption loop itself
     * while each block is in a register (AEGIS; other ciphers scan each
     * chunk while it is in the L1 cache), in a time that depends only on
     * plen; read only once the tag verified */
    uint32_t nonfinite = 0;
    if (mp__session_open_f32(p->keys, h->counter, buf, MP_DATA_HDR_BYTES,
                             buf + MP_DATA_HDR_BYTES, plen,
                             buf + MP_DATA_HDR_BYTES + plen,
                             (uint8_t *)mp->scratch, mp__vec_scan_nonfinite,
                             &nonfinite) != MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "data frame from %.8s failed authentication, dropped",
                       p->id_txt);
        return;
    }
    mp__replay_take(&p->rx_window, h->counter);
    mp__engine_resume_accepted(mp, p, from, h->counter);
    r->bytes_received += len;
    deliver(mp, p, from, h, len, (nonfinite & MP_VEC_NONFINITE) == 0);
}

void mp__engine_on_data_msg(moshpit_t *mp, zmq_msg_t *zm) {
    (void)mp__engine_awake(mp);
    const uint8_t *buf = zmq_msg_data(zm);
    size_t len = zmq_msg_size(zm);
    mp_data_hdr_t h;
    if (mp__wire_data_hdr_decode(buf, len, &h) != MOSHPIT_OK) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "malformed data frame dropped");
        return;
    }
    mp_peer_t *p = mp__engine_find_peer_by_tag(mp, h.tag);
    bool setup = false;
    if (p == NULL || p->state != MP_PEER_LIVE) {
        /* a session being opened: the sender has our HELLO, its answer
         * (on the other connection) has not come yet; its parts wait
         * (mp__engine_round_peer_live) */
        p = NULL;
        for (size_t i = 0; i < mp->npeers && p == NULL; i++)
            if (mp->peers[i]->my_tag == h.tag &&
                mp->peers[i]->state == MP_PEER_NEW &&
                mp->peers[i]->ctrl != NULL)
                p = mp->peers[i];
        if (p == NULL || h.kind == MP_PART_STATE) {
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "data frame with unknown tag dropped");
            return;
        }
        setup = true;
    }
    p->used_ms = mp__engine_now_ms();
    if (!setup)
        shm_take(mp, p,
                 !h.shm &&
                     (h.kind == MP_PART_SCATTER || h.kind == MP_PART_GATHER));
    if (h.kind == MP_PART_STATE) {
        mp__engine_state_on_frame(mp, p, buf, len, &h);
        return;
    }
    mp_round_t *r = &mp->round;
    if (!setup && r->group != NULL && h.round_id == r->gid) {
        mp__engine_process_frame(mp, p, buf, len, &h);
        return;
    }
    if (mp__engine_recent_gid(mp, h.round_id) || h.kind == MP_PART_MARK)
        return;
    /* maybe a round we are about to start: hold it (bounded in total and
     * per sender, so one peer cannot take the room of the others) */
    bool peer_full = p->early_frames >= MP_EARLY_PEER_MAX_FRAMES ||
                     p->early_bytes + len > MP_EARLY_PEER_MAX_BYTES;
    if (peer_full || mp->nearly >= MP_EARLY_MAX_FRAMES ||
        mp->early_bytes + len > MP_EARLY_MAX_BYTES) {
        uint64_t now = mp__engine_now_ms();
        uint64_t *last = peer_full ? &p->early_logged_ms : &mp->early_logged_ms;
        if (*last == 0 || now - *last >= 1000) {
            *last = now;
            if (peer_full)
                mp__engine_log(mp, MOSHPIT_LOG_WARN,
                               "early data frames from %.8s over the per-peer "
                               "limit (%u frames, %zu bytes held), dropped",
                               p->id_txt, p->early_frames, p->early_bytes);
            else
                mp__engine_log(
                    mp, MOSHPIT_LOG_WARN,
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
    mp->early[mp->nearly].arrived_ms = mp__engine_now_ms();
    mp->early[mp->nearly].msg = held;
    mp->early[mp->nearly].bytes = len;
    mp->early_bytes += len;
    p->early_bytes += len;
    p->early_frames++;
    mp->nearly++;
}

static bool seal_part(moshpit_t *mp, mp_peer_t *p, const mp_send_t *s) {
    uint8_t ref[MP_SHM_REF_BYTES];
    bool shm = shm_put(mp, p, s, ref);
    size_t plen = shm ? sizeof(ref) : s->nbytes;
    size_t total = MP_DATA_HDR_BYTES + plen + MP_DATA_TAG_BYTES;
    zmq_msg_t *zm = mp__engine_stash_of(p);
    if (zmq_msg_init_size(zm, total) != 0)
        return false;
    uint8_t *buf = zmq_msg_data(zm);
    mp_data_hdr_t h = {
        .kind = (uint8_t)s->kind,
        .codec = (uint8_t)mp->cfg.compression,
        .layout = mp__share_part_layout(mp__group_part_elems(mp->round.group)),
        .count = s->count,
        .tag = p->their_tag,
        .counter = ++p->tx_counter,
        .round_id = mp->round.gid,
        .share = s->share,
        .part = s->part,
        .wsum = s->wsum,
        .shm = shm};
    mp__wire_data_hdr_encode(&h, buf);
    if (mp__session_seal(p->keys, h.counter, buf, MP_DATA_HDR_BYTES,
                         shm ? ref : s->bytes, plen, buf + MP_DATA_HDR_BYTES,
                         buf + MP_DATA_HDR_BYTES + plen) != MOSHPIT_OK) {
        zmq_msg_close(zm);
        return false;
    }
    p->stash_full = true;
    /* the bytes the part moves, whichever way it goes */
    p->stash_bytes =
        (uint32_t)(MP_DATA_HDR_BYTES + s->nbytes + MP_DATA_TAG_BYTES);
    if (shm)
        mp->round.shm_sent++;
    return true;
}

/* Sends p's stashed frame if its socket takes it now. */
static bool send_stash(moshpit_t *mp, mp_peer_t *p) {
    return mp__engine_data_send(mp, p, mp__engine_stash_of(p)) >= 0;
}

/* A slow member's next reducer: seq_dest or the first one after it (in
 * roster order, wrapping) still owed scatter parts. */
static void seq_advance(mp_round_t *r) {
    for (uint32_t k = 0; k < r->n; k++) {
        uint32_t d = (r->seq_dest + k) % r->n;
        if (mp__group_scatter_left(r->group, d) > 0) {
            r->seq_dest = d;
            return;
        }
    }
}

/* Takes the next part for member i: with the one-after-another order of a
 * slow member, a scatter part only for seq_dest and only once the part
 * before it had the time to leave at the measured rate; gathers always. */
static bool take_part(moshpit_t *mp, uint32_t i, uint64_t now, mp_send_t *s) {
    mp_round_t *r = &mp->round;
    if (!r->seq)
        return mp__group_next_send(r->group, i, s);
    seq_advance(r);
    if (mp__group_scatter_left(r->group, i) > 0 &&
        (i != r->seq_dest || now < r->seq_next_ms))
        return mp__group_next_gather(r->group, i, s);
    if (!mp__group_next_send(r->group, i, s))
        return false;
    if (s->kind == MP_PART_SCATTER) {
        /* 7/8 of the time the part needs at the measured rate: the link
         * never runs dry, and little waits in the socket buffers; at most
         * MP_LINK_PACE_MAX_MS, so reports that make the rate too low
         * cannot hold the parts back for long */
        uint64_t ms = (uint64_t)s->nbytes * 7u / r->seq_kbps;
        uint64_t cap = (uint64_t)MP_LINK_PACE_MAX_MS * s->count /
                       MP_PART_ELEMS_DEFAULT; /* per 65536 values */
        r->seq_next_ms = now + (ms < cap ? ms : cap);
    }
    return true;
}

/* Logs (DEBUG, once a round) when every part this peer sends in the
 * round has gone to the sockets: its own share is final and nothing is
 * left to send or stashed. From then on it only receives. */
static void log_all_sent(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->all_sent || mp__group_has_sends(r->group))
        return;
    mp_group_times_t gt;
    mp__group_times(r->group, &gt);
    if (gt.own_final_ms == 0)
        return;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL && r->members[i]->stash_full)
            return;
    r->all_sent = true;
    mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "round %016llx: all our parts sent",
                   (unsigned long long)r->gid);
}

uint64_t mp__engine_pump_wakeup(const moshpit_t *mp) {
    const mp_round_t *r = &mp->round;
    if (r->group == NULL)
        return UINT64_MAX;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i] != NULL && r->members[i]->shm_waiting)
            return mp__engine_now_ms() + 2; /* look at its slots again */
    if (!r->seq)
        return UINT64_MAX;
    for (uint32_t d = 0; d < r->n; d++)
        if (mp__group_scatter_left(r->group, d) > 0)
            return r->seq_next_ms;
    return UINT64_MAX;
}

/* Moves as many parts to the sockets as they take. Returns true if some
 * member's socket is full (the loop must poll it for POLLOUT). */
void mp__engine_pump_sends(moshpit_t *mp) {
    mp_round_t *r = &mp->round;
    if (r->group == NULL)
        return;
    uint64_t now = mp__engine_now_ms();
    bool progress = true;
    while (progress) {
        progress = false;
        for (uint32_t i = 0; i < r->n; i++) {
            mp_peer_t *p = r->members[i];
            if (p == NULL || !mp__engine_has_data(p) ||
                p->state != MP_PEER_LIVE) {
                if (p != NULL)
                    p->shm_waiting = false;
                continue;
            }
            if (!mp__group_member_alive(r->group, i)) {
                mp__engine_stash_drop(p);
                continue;
            }
            p->shm_round = r->gid;
            if (!p->stash_full && !mp__engine_resume_mark(mp, p, i)) {
                mp_send_t s;
                p->shm_waiting = shm_wait(mp, i, p, now);
                if (p->shm_waiting || !take_part(mp, i, now, &s))
                    continue;
                if (!seal_part(mp, p, &s)) {
                    mp__engine_log(mp, MOSHPIT_LOG_ERROR,
                                   "sealing a part failed");
                    continue;
                }
                mp__group_stamp(r->group, i, &s, p->tx_counter);
            }
            if (send_stash(mp, p)) {
                p->stash_full = false;
                p->used_ms = now;
                r->bytes_sent += p->stash_bytes;
                progress = true;
            }
        }
    }
    log_all_sent(mp);
}
