/* SPDX-License-Identifier: MIT */
/*
 * moshsim_peer.c - one simulated peer: the production round machine
 * (core/round.c, through net/round_msg.c) driven with the virtual clock,
 * as src/net/engine_round.c drives it with the real one. Control messages
 * travel in wire form (mp__wire_msg_encode, decoded with mp__wire_msg_decode
 * and dispatched with mp__round_msg_dispatch, as engine.c on_ctrl does); what
 * this file adds is the simulator's side: the view and candidates of a call,
 * the parts of the group all-reduce as native simnet messages (parts that race
 * ahead of their GROUP held), a call's record for the statistics, and what
 * a crash notice changes. The engine's session layer (HELLO, PEERS, BYE,
 * DONE and the close that waits for it) is not modelled: DONE outputs are
 * dropped.
 */
#include "sim/moshsim_int.h"

#include "net/round_msg.h"
#include "core/codec.h"
#include "wire/wire.h"
#include "wire/wire_swim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bitsd(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

moshpit_err_t moshsim__rnd_new(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    mp_rnd_cfg_t c;
    mp__rnd_cfg_of(
        &c, &s->peer_cfg, &s->c.agg, p->id, &p->grid,
        moshsim__mix64(s->c.seed ^ moshsim__mix64((uint64_t)q << 20)), 1);
    return mp__rnd_new(&c, &p->rm);
}

const mp_grid_t *moshsim__grid(const speer_t *p) {
    return p->rm != NULL ? mp__rnd_grid(p->rm) : &p->grid;
}

static void clear_held(speer_t *p) {
    for (size_t i = 0; i < p->nheld; i++)
        free(p->held[i].data);
    p->nheld = 0;
}

void moshsim__reap(speer_t *p) {
    if (p->rm != NULL) {
        p->grid = *mp__rnd_grid(p->rm);
        mp__rnd_free(p->rm);
        p->rm = NULL;
    }
    clear_held(p);
}

/* ------------------------------------------------------------------ */
/* messages                                                            */

static void send_ctrl(moshsim_t *s, uint32_t from, uint32_t to,
                      const mp_msg_t *m) {
    moshsim__wire_scratch(s);
    size_t len = 0;
    if (mp__wire_msg_encode(m, s->wbuf, MP_CTRL_MAX, &len) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: encode of message type %d failed\n",
                (int)m->type);
        abort();
    }
    simnet_msg_t sm = {.src = node_of(from),
                       .dst = node_of(to),
                       .type = MSG_CTRL,
                       .data = s->wbuf,
                       .len = len};
    simnet_send(s->net, &sm);
}

static uint32_t member_index(const speer_t *p, uint32_t peer) {
    for (uint32_t i = 0; i < p->n; i++)
        if (p->members[i] == peer && i != p->self)
            return i;
    return MOSHSIM_NONE;
}

static int feed_part(moshsim_t *s, uint32_t q, uint32_t from, uint32_t kind,
                     uint32_t share, uint32_t part, const float *data,
                     uint32_t count, double wsum) {
    speer_t *p = &s->p[q];
    uint32_t i = member_index(p, from);
    mp_group_t *g = mp__rnd_group(p->rm);
    if (i == MOSHSIM_NONE || g == NULL)
        return -2;
    return (int)mp__group_on_part(g, simnet_now(s->net), i,
                                  (mp_part_kind_t)kind, share, part, data,
                                  count, wsum);
}

/* The group of q's call formed: its roster as peers (members known to be
 * gone dropped at once, as the engine drops members without a session),
 * then the parts that raced ahead of the GROUP. */
static void group_formed(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    uint32_t n = 0, self = 0;
    uint64_t gid = 0;
    const mp_member_t *m = mp__rnd_roster(p->rm, &n, &self, &gid);
    if (m == NULL)
        return;
    p->n = n;
    p->self = self;
    p->gid = gid;
    for (uint32_t i = 0; i < n; i++)
        p->members[i] = moshsim__find_id(s, m[i].id);
    p->last.group_id = gid;
    p->last.roster = n;
    p->last.slot = self;
    p->last.group_ms = now;
    for (uint32_t i = 0; i < n; i++)
        if (i != self &&
            (p->members[i] == MOSHSIM_NONE || s->p[p->members[i]].known_dead))
            mp__rnd_member_failed(p->rm, now, i);
    for (size_t i = 0; i < p->nheld; i++) {
        held_t *h = &p->held[i];
        if (h->gid == gid)
            (void)feed_part(s, q, h->from, h->kind, h->share, h->part, h->data,
                            h->count, h->wsum);
    }
    clear_held(p);
}

/* Carries out q's machine outputs: messages to peers not known dead (a
 * JOIN to anyone else falls back at once), FORMED. */
static void drain(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    mp_rnd_out_t o;
    moshsim__wire_scratch(s);
    while (mp__rnd_next_out(p->rm, &o)) {
        if (o.kind == MP_RND_OUT_FORMED) {
            group_formed(s, q);
            continue;
        }
        if (o.kind != MP_RND_OUT_SEND || o.msg == MP_RND_DONE)
            continue;
        uint32_t to = moshsim__find_id(s, o.to);
        if (to == MOSHSIM_NONE || s->p[to].known_dead) {
            mp__rnd_send_failed(p->rm, simnet_now(s->net), &o);
            continue;
        }
        mp__round_msg_from_out(&o, s->wmsg);
        send_ctrl(s, q, to, s->wmsg);
    }
}

static void pump_sends(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    mp_group_t *g = mp__rnd_group(p->rm);
    for (uint32_t d = 0; g != NULL && d < p->n; d++) {
        if (d == p->self || p->members[d] == MOSHSIM_NONE)
            continue;
        mp_send_t snd;
        while (mp__group_next_send(g, d, &snd)) {
            simnet_msg_t m = {.src = node_of(q),
                              .dst = node_of(p->members[d]),
                              .type = MSG_PART,
                              .data = snd.bytes,
                              .len = snd.nbytes};
            m.arg[3] = snd.count;
            m.arg[0] = (uint64_t)snd.kind | (uint64_t)snd.share << 8 |
                       (uint64_t)snd.part << 32;
            m.arg[1] = dbits(snd.wsum);
            m.arg[2] = p->gid;
            simnet_send(s->net, &m);
        }
    }
}

int moshsim__on_part(moshsim_t *s, uint32_t q, uint32_t from, uint32_t kind,
                     uint32_t share, uint32_t part, double wsum, uint64_t gid,
                     const float *data, uint32_t count) {
    speer_t *p = &s->p[q];
    if (p->rm == NULL || !mp__rnd_in_call(p->rm))
        return -2;
    if (mp__rnd_group(p->rm) != NULL && gid == p->gid)
        return feed_part(s, q, from, kind, share, part, data, count, wsum);
    if (mp__rnd_recent_gid(p->rm, gid) || p->nheld >= HELD_MAX)
        return -2;
    /* maybe the group whose GROUP message is still on its way: hold it */
    if (p->nheld == p->capheld) {
        p->capheld = p->capheld ? 2 * p->capheld : 16;
        p->held = moshsim__xrealloc(p->held, p->capheld * sizeof *p->held);
    }
    held_t *h = &p->held[p->nheld++];
    *h = (held_t){.gid = gid,
                  .from = from,
                  .kind = kind,
                  .share = share,
                  .part = part,
                  .count = count,
                  .wsum = wsum};
    h->data = moshsim__xmalloc((size_t)count * sizeof(float));
    memcpy(h->data, data, (size_t)count * sizeof(float));
    return -1;
}

static void on_part(moshsim_t *s, uint32_t q, uint32_t from,
                    const simnet_msg_t *m) {
    uint32_t kind = (uint32_t)(m->arg[0] & 0xff);
    uint32_t share = (uint32_t)((m->arg[0] >> 8) & 0xffffff);
    uint32_t part = (uint32_t)(m->arg[0] >> 32);
    uint32_t count = (uint32_t)m->arg[3];
    const float *data = m->data;
    if (s->c.agg.codec != MOSHPIT_COMPRESS_NONE) {
        /* the engine's receive path: the bytes decoded into floats; a part
         * that decodes non-finite is refused by the group machine */
        if (m->len != mp__codec_bytes(s->c.agg.codec, count))
            return;
        if (s->decn < count) {
            s->dec = moshsim__xrealloc(s->dec, (size_t)count * sizeof(float));
            s->decn = count;
        }
        (void)mp__codec_decode(s->c.agg.codec, m->data, count, s->dec);
        data = s->dec;
    }
    (void)moshsim__on_part(s, q, from, kind, share, part, bitsd(m->arg[1]),
                           m->arg[2], data, count);
}

/* A control message in wire form, decoded and dispatched as engine.c
 * on_ctrl does (the session layer aside); what the hostile peer's driver
 * sends (hostile) is counted. */
static void on_ctrl(moshsim_t *s, uint32_t q, uint32_t from, const uint8_t *buf,
                    size_t len, bool hostile) {
    moshsim__wire_scratch(s);
    mp_msg_t *m = s->wmsg;
    if (hostile)
        s->wstats.ctrl++;
    if (mp__wire_msg_decode(buf, len, m) != MOSHPIT_OK) {
        /* the engine's next try: a SWIM message (no SWIM machine here) */
        if (hostile &&
            mp__wire_swim_msg_decode(buf, len, s->wswim) == MOSHPIT_OK)
            s->wstats.swim++;
        else if (hostile)
            s->wstats.ctrl_bad++;
        return;
    }
    if (hostile &&
        (unsigned)m->type < sizeof s->wstats.by_type / sizeof(uint64_t))
        s->wstats.by_type[m->type]++;
    /* HELLO, REFUSE, PEERS, BYE, DONE and the state messages go to the
     * engine's session, membership and state code, which the simulator
     * does not run: decoded, then dropped */
    mp_rnd_msg_status_t st = mp__round_msg_dispatch(
        s->p[q].rm, simnet_now(s->net), s->p[from].id, m);
    if (hostile && st == MP_RND_MSG_BAD_KEY)
        s->wstats.join_bad_key++;
}

/* ------------------------------------------------------------------ */
/* the call                                                            */

static void end_call(moshsim_t *s, uint32_t q, moshpit_err_t e, bool alone) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    mp_rnd_result_t res;
    mp__rnd_end(p->rm, now, e, alone, &res);
    moshsim_call_t *c = &p->last;
    c->ended = true;
    c->end_ms = now;
    c->group_size = res.group_size;
    c->group_weight = res.group_weight;
    c->fraction_averaged = res.fraction_averaged;
    c->peers_failed = res.peers_failed;
    c->matchmaker =
        res.has_matchmaker ? moshsim__find_id(s, res.matchmaker) : MOSHSIM_NONE;
    /* the next round's weight */
    p->weight = c->group_weight / (double)c->group_size;
    p->gid = 0;
    p->n = 0;
    clear_held(p);
    drain(s, q); /* the LEAVE */
}

static void start_call(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    memset(&p->last, 0, sizeof p->last);
    p->last.round = s->round;
    p->last.start_ms = now;
    p->last.matchmaker = MOSHSIM_NONE;
    s->called++;
    if (p->byz) { /* poisoned values, maybe an inflated weight */
        for (uint32_t e = 0; e < s->c.count; e++)
            p->values[e] = 1e20f;
        if (s->c.byz_weight > 0)
            p->weight = s->c.byz_weight;
    }

    bool custom;
    size_t nview = moshsim__view(s, q, &custom);
    uint8_t key[MP_KEY_MAX];
    uint32_t key_len = mp__rnd_key(p->rm, nview, s->c.count, key);
    /* with outbound-only peers: the merge key, carrying the line key (as
     * engine_round.c merge_key) */
    uint8_t mkey[MP_KEY_MAX];
    uint32_t mkey_len =
        s->c.outbound > 0 ? mp__rnd_merge_key(p->rm, key, key_len, mkey) : 0;
    const uint8_t *ckey = mkey_len != 0 ? mkey : key;
    uint32_t ckey_len = mkey_len != 0 ? mkey_len : key_len;
    uint32_t cand[MOSHSIM_CANDIDATES];
    size_t k = moshsim__candidates(s, custom, nview, ckey, ckey_len, cand);
    uint8_t ids[MOSHSIM_CANDIDATES][MP_ID_BYTES];
    for (size_t i = 0; i < k; i++)
        memcpy(ids[i], s->p[cand[i]].id, MP_ID_BYTES);
    mp_rnd_call_t call = {.key = ckey,
                          .key_len = ckey_len,
                          .line = mkey_len != 0 ? key : NULL,
                          .line_len = mkey_len != 0 ? key_len : 0,
                          .cands = (const uint8_t(*)[MP_ID_BYTES])ids,
                          .ncands = k,
                          .weight = p->weight,
                          .values = p->values,
                          .count = s->c.count};
    if (mp__rnd_start(p->rm, now, &call) != MOSHPIT_OK) {
        fprintf(stderr, "moshsim: mp__rnd_start failed\n");
        abort();
    }
}

/* ------------------------------------------------------------------ */
/* event handling                                                      */

static void schedule_wake(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t w = mp__rnd_next_wakeup(p->rm);
    if (w != NONE64 && (p->wake_at == NONE64 || w < p->wake_at)) {
        simnet_timer(s->net, node_of(q), w, TAG_WAKE);
        p->wake_at = w;
    }
}

/* Runs the peer's actions after an event (sends, round end, timers). */
static void after_event(moshsim_t *s, uint32_t q) {
    speer_t *p = &s->p[q];
    uint64_t now = simnet_now(s->net);
    drain(s, q);
    bool alone = true;
    moshpit_err_t e = MOSHPIT_OK;
    if (mp__rnd_over(p->rm, now, &alone, &e)) {
        end_call(s, q, e, alone);
    } else if (mp__rnd_group(p->rm) != NULL) {
        pump_sends(s, q);
        if (mp__rnd_group_finished(p->rm))
            end_call(s, q, MOSHPIT_OK, false);
    }
    schedule_wake(s, q);
}

/* A crash of peer v becomes known (its connections dropped). */
static void notice(moshsim_t *s, uint32_t v) {
    s->p[v].known_dead = true;
    for (uint32_t q = 0; q < s->np; q++) {
        speer_t *p = &s->p[q];
        if (!p->alive || q == v)
            continue;
        if (mp__rnd_peer_failed(p->rm, simnet_now(s->net), s->p[v].id))
            after_event(s, q);
    }
}

static void on_msg(simnet_t *net, uint32_t node, const simnet_msg_t *m,
                   void *user) {
    moshsim_t *s = user;
    (void)net;
    if (node == 0 || m->src == 0)
        return;
    uint32_t q = node - 1, from = m->src - 1;
    switch (m->type) {
    case MSG_CTRL:
    case MSG_WIRE:
        on_ctrl(s, q, from, m->data, m->len, m->type == MSG_WIRE);
        break;
    case MSG_PART:
        on_part(s, q, from, m);
        break;
    case MSG_FRAME:
        moshsim__wire_on_frame(s, q, from, m->data, m->len);
        break;
    default:
        break;
    }
    if (q == s->hostile && (m->type == MSG_CTRL || m->type == MSG_PART))
        moshsim__wire_to_hostile(s, m);
    after_event(s, q);
}

static void on_timer(simnet_t *net, uint32_t node, uint64_t tag, void *user) {
    moshsim_t *s = user;
    uint64_t now = simnet_now(net);
    if (node == 0) {
        notice(s, (uint32_t)tag);
        return;
    }
    uint32_t q = node - 1;
    speer_t *p = &s->p[q];
    switch (tag & 0xff) {
    case TAG_START:
        if ((tag >> 8) == s->round && !mp__rnd_in_call(p->rm))
            start_call(s, q);
        break;
    case TAG_HOSTILE:
        if (q == s->hostile && s->hops.on_wake != NULL)
            s->hops.on_wake(s, s->huser);
        break;
    case TAG_WAKE:
        if (p->wake_at != NONE64 && now >= p->wake_at)
            p->wake_at = NONE64;
        mp__rnd_tick(p->rm, now);
        break;
    default:
        break;
    }
    after_event(s, q);
}

const simnet_ops_t moshsim__ops = {on_msg, on_timer};

void moshsim__kill_hook(simnet_t *net, uint32_t node, void *user) {
    moshsim_t *s = user;
    if (node == 0)
        return;
    s->p[node - 1].alive = false;
    s->view_dirty = true;
    if (s->c.notice_ms != MOSHSIM_NEVER)
        simnet_timer(net, 0, simnet_now(net) + s->c.notice_ms, node - 1);
}
