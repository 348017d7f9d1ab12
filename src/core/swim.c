/* SPDX-License-Identifier: MIT */
/*
 * swim.c - the SWIM membership protocol around the member records (see
 * swim.h for the rules): configuration and lifecycle, join (the paged
 * member-list pull and its follow-up) and leave, the messages (PING, ACK,
 * PING_REQ relays, SYNC_REQ with its rate limit, SYNC, GOSSIP), probing
 * with direct and indirect pings, the tick, and what the driver polls.
 * What updates do to a record is in swim_member.c; storage (slots, index,
 * arena, probe order, gossip queue, rings) in swim_table.c. Time and
 * randomness come from the caller only.
 */
#include "core/swim_int.h"

#include <stdlib.h>
#include <string.h>

void mp__swim_config_default(mp_swim_config_t *c) {
    if (c == NULL)
        return;
    memset(c, 0, sizeof *c);
    c->period_ms = 250;
    c->ping_timeout_ms = 200;
    c->ping_req_timeout_ms = 400;
    c->indirect_k = 3;
    c->suspicion_mult = 2;
    c->suspicion_min_ms = 2000;
    c->retransmit_mult = 2;
    c->piggyback_bytes = 1024;
    c->max_members = 65536;
    c->queue_max = 4096;
    c->max_pending_probes = 8;
    c->max_relays = 64;
    c->page_size = MP_SWIM_PAGE_MAX;
    c->page_bytes = 8192;
    c->sync_rate = 50;
    c->sync_burst = 50;
    c->sync_timeout_ms = 1000;
    c->sync_retries = 5;
    c->resync_ms = 10000;
    c->dead_retain_ms = 60000;
    c->leave_fanout = 4;
    c->events_max = 4096;
    c->out_max = 512;
}

static bool cfg_ok(const mp_swim_config_t *c) {
    /* The byte limits keep every message within MP_SWIM_MSG_MAX (16 KiB)
     * even with the longest addresses: a page of 32 entries of at most
     * 298 bytes plus a piggyback block of 1 + 4096 bytes of updates. */
    return c->period_ms >= 1 && c->ping_timeout_ms >= 1 &&
           c->ping_req_timeout_ms >= 1 && c->indirect_k <= MP_SWIM_K_MAX &&
           c->suspicion_mult >= 1 && c->suspicion_mult <= 1000 &&
           c->retransmit_mult >= 1 && c->retransmit_mult <= 16 &&
           c->piggyback_bytes <= 4096 && c->max_members >= 2 &&
           c->queue_max >= 1 && c->queue_max <= (1u << 24) &&
           c->max_pending_probes >= 1 && c->max_pending_probes <= 1024 &&
           c->max_relays <= 4096 && c->page_size >= 1 &&
           c->page_size <= MP_SWIM_PAGE_MAX && c->page_bytes >= 512 &&
           c->page_bytes <= 9600 && c->sync_rate <= 1000000 &&
           c->sync_burst >= 1 && c->sync_burst <= 1000000 &&
           c->sync_timeout_ms >= 1 && c->leave_fanout <= 64 &&
           c->events_max >= 1 && c->out_max >= 1;
}

/* ------------------------------------------------------------------ */
/* ------------------------------------------------------------------ */
/* ------------------------------------------------------------------ */
/* ------------------------------------------------------------------ */
/* ------------------------------------------------------------------ */
/* lifecycle                                                           */

moshpit_err_t mp__swim_new(const mp_swim_config_t *cfg,
                           const uint8_t self_id[MP_SWIM_ID_BYTES],
                           const char *self_addr, uint64_t seed,
                           uint64_t now_ms, mp_swim_t **out) {
    if (out == NULL)
        return MOSHPIT_EINVAL;
    *out = NULL;
    mp_swim_config_t def;
    if (cfg == NULL) {
        mp__swim_config_default(&def);
        cfg = &def;
    }
    if (self_id == NULL || !sw_addr_ok(self_addr) || !cfg_ok(cfg))
        return MOSHPIT_EINVAL;
    mp_swim_t *sw = calloc(1, sizeof *sw);
    if (sw == NULL)
        return MOSHPIT_ENOMEM;
    sw->cfg = *cfg;
    sw->rng = seed;
    sw->hk0 = mp__sw_rand(sw);
    sw->hk1 = mp__sw_rand(sw) | 1u;
    mp__sw_table_init(sw);
    sw->probes = calloc(cfg->max_pending_probes, sizeof *sw->probes);
    sw->relays =
        calloc(cfg->max_relays ? cfg->max_relays : 1, sizeof *sw->relays);
    if (sw->probes == NULL || sw->relays == NULL) {
        mp__swim_free(sw);
        return MOSHPIT_ENOMEM;
    }
    sw->self = mp__sw_add(sw, self_id);
    if (sw->self == SW_NONE) {
        mp__swim_free(sw);
        return MOSHPIT_ENOMEM;
    }
    sw->nlive = 1;
    mp__sw_set_addr(sw, sw->self, self_addr);
    if (self_addr[0] != '\0' && sw->mem[sw->self].addr == 0) {
        mp__swim_free(sw);
        return MOSHPIT_ENOMEM;
    }
    sw->mem[sw->self].flags |= MF_SELF | MF_CONFIRMED;
    /* Announce ourselves on whatever we send first. */
    mp__sw_enqueue(sw, sw->self, SW_Q_ALIVE);
    /* A random phase, so peers started together do not probe in step. */
    sw->next_probe = now_ms + mp__sw_rand_below(sw, cfg->period_ms);
    sw->resync_at = UINT64_MAX;
    sw->tokens = (uint64_t)cfg->sync_burst * 1000u;
    sw->tokens_at = now_ms;
    *out = sw;
    return MOSHPIT_OK;
}

void mp__swim_free(mp_swim_t *sw) {
    if (sw == NULL)
        return;
    mp__sw_table_free(sw);
    free(sw->sus);
    free(sw->tomb);
    free(sw->probes);
    free(sw->relays);
    free(sw->out);
    free(sw->ev);
    free(sw);
}

/* Starts pulling the member list of slot's member, page by page. */
static void sync_start(mp_swim_t *sw, uint64_t now, uint32_t slot,
                       bool second) {
    memcpy(sw->sync_boot, sw->mem[slot].id, MP_SWIM_ID_BYTES);
    sw->sync_active = true;
    sw->sync_second = second;
    sw->resync_at = UINT64_MAX;
    sw->sync_cursor = 0;
    sw->sync_tries = 0;
    sw->sync_pages = 0;
    sw->sync_deadline = mp__add_sat_u64(now, sw->cfg.sync_timeout_ms);
    sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_SYNC_REQ, sw->sync_boot);
    if (o != NULL)
        o->cursor = 0;
}

/* The pull ended: a complete first pull schedules the second one; only the
 * first one reports, as SYNCED or SYNC_FAILED. */
static void sync_end(mp_swim_t *sw, uint64_t now, bool ok) {
    uint32_t boot = mp__sw_find(sw, sw->sync_boot);
    sw->sync_active = false;
    if (sw->sync_second)
        return;
    if (ok) {
        sw->synced = true;
        if (sw->cfg.resync_ms > 0)
            sw->resync_at = mp__add_sat_u64(now, sw->cfg.resync_ms);
    }
    if (boot != SW_NONE)
        mp__sw_event(sw, ok ? MP_SWIM_EV_SYNCED : MP_SWIM_EV_SYNC_FAILED, boot);
}

moshpit_err_t mp__swim_join(mp_swim_t *sw, uint64_t now_ms,
                            const uint8_t boot_id[MP_SWIM_ID_BYTES],
                            const char *boot_addr) {
    if (sw == NULL || boot_id == NULL || !sw_addr_ok(boot_addr) || sw->left ||
        sw_is_self(sw, boot_id))
        return MOSHPIT_EINVAL;
    uint32_t s = mp__sw_find(sw, boot_id);
    if (s == SW_NONE) {
        s = mp__sw_add_member(sw, boot_id);
        if (s == SW_NONE)
            return MOSHPIT_ENOMEM;
        mp__sw_event(sw, MP_SWIM_EV_JOINED, s);
    }
    /* The bootstrap address comes from our own configuration. */
    if (boot_addr[0] != '\0') {
        mp__sw_set_addr(sw, s, boot_addr);
        sw->mem[s].flags |= MF_CONFIRMED;
    }
    sw->synced = false;
    sync_start(sw, now_ms, s, false);
    return MOSHPIT_OK;
}

moshpit_err_t mp__swim_set_self_addr(mp_swim_t *sw, const char *addr) {
    if (sw == NULL || addr == NULL || addr[0] == '\0' || !sw_addr_ok(addr) ||
        sw->left)
        return MOSHPIT_EINVAL;
    sw_mem_t *me = &sw->mem[sw->self];
    if (strcmp(mp__sw_str(sw, me->addr), addr) == 0)
        return MOSHPIT_OK;
    if (me->inc == UINT32_MAX)
        return MOSHPIT_EINVAL;
    mp__sw_set_addr(sw, sw->self, addr);
    if (strcmp(mp__sw_str(sw, me->addr), addr) != 0)
        return MOSHPIT_ENOMEM;
    me->inc++;
    mp__sw_enqueue(sw, sw->self, SW_Q_ALIVE);
    return MOSHPIT_OK;
}

moshpit_err_t mp__swim_renew_self(mp_swim_t *sw) {
    if (sw == NULL || sw->left || sw->mem[sw->self].inc == UINT32_MAX)
        return MOSHPIT_EINVAL;
    sw->mem[sw->self].inc++;
    mp__sw_enqueue(sw, sw->self, SW_Q_ALIVE);
    return MOSHPIT_OK;
}

moshpit_err_t mp__swim_pull(mp_swim_t *sw, uint64_t now_ms,
                            const uint8_t id[MP_SWIM_ID_BYTES]) {
    if (sw == NULL || id == NULL || sw->left || sw_is_self(sw, id))
        return MOSHPIT_EINVAL;
    uint32_t s = mp__sw_find(sw, id);
    if (s == SW_NONE || sw->mem[s].state != MP_SWIM_ALIVE)
        return MOSHPIT_EINVAL;
    if (sw->sync_active)
        return MOSHPIT_EBUSY;
    sync_start(sw, now_ms, s, true);
    return MOSHPIT_OK;
}

void mp__swim_leave(mp_swim_t *sw, uint64_t now_ms) {
    (void)now_ms;
    if (sw == NULL || sw->left)
        return;
    sw->left = true;
    mp__sw_set_state(sw, sw->self, MP_SWIM_LEFT);
    mp__sw_enqueue(sw, sw->self, SW_Q_ALIVE);
    sw->nprobes = 0;
    sw->nrelays = 0;
    sw->nurgent = 0;
    sw->sync_active = false;
    sw->resync_at = UINT64_MAX;
    uint32_t chosen[64];
    uint32_t nc = 0;
    for (uint32_t tries = 0;
         nc < sw->cfg.leave_fanout && tries < 4 * sw->cfg.leave_fanout;
         tries++) {
        uint32_t s = mp__sw_random_alive(sw, SW_NONE);
        if (s == SW_NONE)
            break;
        bool dup = false;
        for (uint32_t i = 0; i < nc; i++)
            dup |= chosen[i] == s;
        if (dup)
            continue;
        chosen[nc++] = s;
        mp__sw_out(sw, MP_SWIM_MSG_GOSSIP, sw->mem[s].id);
    }
}

/* ------------------------------------------------------------------ */
/* messages                                                            */

static void send_ping(mp_swim_t *sw, const uint8_t *to, uint64_t seq) {
    sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_PING, to);
    if (o != NULL)
        o->seq = seq;
}

static void on_ack(mp_swim_t *sw, const uint8_t *from,
                   const mp_swim_msg_t *msg) {
    for (uint32_t i = 0; i < sw->nprobes; i++) {
        sw_probe_t *p = &sw->probes[i];
        if (p->seq != msg->seq)
            continue;
        bool ok = false;
        if (!msg->has_target) {
            ok = memcmp(from, p->id, MP_SWIM_ID_BYTES) == 0;
        } else if (memcmp(msg->target, p->id, MP_SWIM_ID_BYTES) == 0) {
            /* A relayed ACK counts only from a member we asked. */
            for (uint32_t k = 0; k < p->nk && !ok; k++)
                ok = memcmp(from, p->k_ids[k], MP_SWIM_ID_BYTES) == 0;
        }
        if (ok && !p->indirect) {
            sw->probes[i] = sw->probes[--sw->nprobes];
            return;
        }
        if (ok) {
            /* Kept until its deadline: the other intermediaries' ACKs
             * are still on their way and are no surprise. */
            p->acked = 1;
            return;
        }
    }
    for (uint32_t i = 0; i < sw->nrelays; i++) {
        sw_relay_t *r = &sw->relays[i];
        if (r->our_seq != msg->seq || msg->has_target ||
            memcmp(from, r->target, MP_SWIM_ID_BYTES) != 0)
            continue;
        sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_ACK, r->req);
        if (o != NULL) {
            o->seq = r->req_seq;
            o->has_target = 1;
            memcpy(o->target, r->target, MP_SWIM_ID_BYTES);
        }
        sw->relays[i] = sw->relays[--sw->nrelays];
        return;
    }
    sw->stats.unexpected++;
}

static void on_ping_req(mp_swim_t *sw, uint64_t now, const uint8_t *from,
                        const mp_swim_msg_t *msg) {
    if (!msg->has_target || sw_is_self(sw, msg->target) ||
        memcmp(msg->target, from, MP_SWIM_ID_BYTES) == 0)
        return;
    uint32_t s = mp__sw_find(sw, msg->target);
    if (s == SW_NONE || !sw_is_live(sw->mem[s].state))
        return;
    if (sw->nrelays >= sw->cfg.max_relays) {
        sw->stats.relays_refused++;
        return;
    }
    sw_relay_t *r = &sw->relays[sw->nrelays++];
    r->our_seq = mp__sw_rand(sw);
    r->req_seq = msg->seq;
    r->deadline = mp__add_sat_u64(now, sw->cfg.ping_req_timeout_ms);
    memcpy(r->req, from, MP_SWIM_ID_BYTES);
    memcpy(r->target, msg->target, MP_SWIM_ID_BYTES);
    send_ping(sw, r->target, r->our_seq);
}

/* One SYNC_REQ served, or one unknown peer admitted on its own word, costs
 * a token; tokens come back at sync_rate per second up to sync_burst. */
static bool take_token(mp_swim_t *sw, uint64_t now) {
    /* Tokens in thousandths: rate per second = thousandths per ms. */
    uint64_t cap = (uint64_t)sw->cfg.sync_burst * 1000u;
    if (now > sw->tokens_at) {
        uint64_t gap = now - sw->tokens_at;
        uint64_t add = gap >= cap ? cap : gap * sw->cfg.sync_rate;
        sw->tokens = add > cap - sw->tokens ? cap : sw->tokens + add;
        sw->tokens_at = now;
    }
    if (sw->tokens < 1000u)
        return false;
    sw->tokens -= 1000u;
    return true;
}

static void on_sync_req(mp_swim_t *sw, const uint8_t *from,
                        const mp_swim_msg_t *msg) {
    sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_SYNC, from);
    if (o != NULL) {
        o->cursor = msg->cursor;
        sw->stats.sync_served++;
    }
}

static void on_sync(mp_swim_t *sw, uint64_t now, const uint8_t *from,
                    const mp_swim_msg_t *msg) {
    if (!sw->sync_active ||
        memcmp(from, sw->sync_boot, MP_SWIM_ID_BYTES) != 0 ||
        msg->cursor != sw->sync_cursor) {
        sw->stats.unexpected++;
        return;
    }
    uint32_t n =
        msg->n_entries < MP_SWIM_PAGE_MAX ? msg->n_entries : MP_SWIM_PAGE_MAX;
    for (uint32_t i = 0; i < n; i++)
        mp__sw_absorb_one(sw, now, from, &msg->entries[i], AB_SYNC);
    sw->sync_pages++;
    if (msg->next == 0) {
        sync_end(sw, now, true);
        return;
    }
    /* Cursors must advance, and no honest list has more pages than we
     * could hold members: anything else is a bootstrap stringing us
     * along. */
    if (msg->next <= msg->cursor || sw->sync_pages >= sw->cfg.max_members) {
        sync_end(sw, now, false);
        return;
    }
    sw->sync_cursor = msg->next;
    sw->sync_tries = 0;
    sw->sync_deadline = mp__add_sat_u64(now, sw->cfg.sync_timeout_ms);
    sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_SYNC_REQ, from);
    if (o != NULL)
        o->cursor = msg->next;
}

moshpit_err_t mp__swim_on_message(mp_swim_t *sw, uint64_t now_ms,
                                  const uint8_t from[MP_SWIM_ID_BYTES],
                                  const mp_swim_msg_t *msg) {
    if (sw == NULL || from == NULL || msg == NULL)
        return MOSHPIT_EINVAL;
    if (sw->left || sw_is_self(sw, from))
        return MOSHPIT_OK;
    /* Serving a page, or admitting a stranger on its own word, is rate
     * limited: an endless stream of JOINs costs a bounded amount. */
    if ((msg->type == MP_SWIM_MSG_SYNC_REQ ||
         (msg->type == MP_SWIM_MSG_PING && mp__sw_find(sw, from) == SW_NONE)) &&
        !take_token(sw, now_ms)) {
        sw->stats.joins_refused++;
        return MOSHPIT_OK;
    }

    /* The sender speaks for itself: its incarnation (and, on PING and
     * SYNC_REQ, its address) is its own claim, authenticated by the link.
     * It goes first, so that a correction it earns rides on our answer. */
    mp_swim_update_t hdr;
    mp_swim_update_t *h = &hdr;
    bool with_addr =
        msg->type == MP_SWIM_MSG_PING || msg->type == MP_SWIM_MSG_SYNC_REQ;
    memcpy(h->id, from, MP_SWIM_ID_BYTES);
    h->state = MP_SWIM_ALIVE;
    h->inc = msg->inc;
    h->has_addr = 0;
    h->addr[0] = '\0';
    if (with_addr && sw_addr_ok(msg->addr) && msg->addr[0] != '\0') {
        h->has_addr = 1;
        memcpy(h->addr, msg->addr, strlen(msg->addr) + 1);
    }
    mp__sw_absorb_one(sw, now_ms, from, h, with_addr ? AB_GOSSIP : AB_HEADER);
    uint32_t fs = mp__sw_find(sw, from);
    if (fs != SW_NONE)
        sw->mem[fs].flags |= MF_HEARD;

    uint32_t n =
        msg->n_updates < MP_SWIM_PB_MAX ? msg->n_updates : MP_SWIM_PB_MAX;
    for (uint32_t i = 0; i < n; i++)
        mp__sw_absorb_one(sw, now_ms, from, &msg->updates[i], AB_GOSSIP);
    if (sw->left)
        return MOSHPIT_OK;

    switch (msg->type) {
    case MP_SWIM_MSG_PING: {
        sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_ACK, from);
        if (o != NULL)
            o->seq = msg->seq;
        break;
    }
    case MP_SWIM_MSG_ACK:
        on_ack(sw, from, msg);
        break;
    case MP_SWIM_MSG_PING_REQ:
        on_ping_req(sw, now_ms, from, msg);
        break;
    case MP_SWIM_MSG_SYNC_REQ:
        on_sync_req(sw, from, msg);
        break;
    case MP_SWIM_MSG_SYNC:
        on_sync(sw, now_ms, from, msg);
        break;
    case MP_SWIM_MSG_GOSSIP:
        break;
    default:
        sw->stats.rejected++;
        break;
    }
    return MOSHPIT_OK;
}

/* ------------------------------------------------------------------ */
/* time                                                                */

/* Probes slot's member: PING now, PING_REQs if it stays silent. */
static void start_probe(mp_swim_t *sw, uint64_t now, uint32_t s) {
    if (sw->nprobes >= sw->cfg.max_pending_probes) {
        sw->stats.probes_skipped++;
        return;
    }
    /* A suspect must hear it is one: the PING carries its record. */
    if (sw->mem[s].state != MP_SWIM_ALIVE)
        sw->mem[s].flags |= MF_CORRECT;
    sw_probe_t *p = &sw->probes[sw->nprobes++];
    memset(p, 0, sizeof *p);
    memcpy(p->id, sw->mem[s].id, MP_SWIM_ID_BYTES);
    p->seq = mp__sw_rand(sw);
    p->direct_dl = mp__add_sat_u64(now, sw->cfg.ping_timeout_ms);
    p->final_dl = mp__add_sat_u64(p->direct_dl, sw->cfg.ping_req_timeout_ms);
    send_ping(sw, p->id, p->seq);
}

/* Direct phase over without an ACK: ask up to indirect_k others. */
static void probe_indirect(mp_swim_t *sw, sw_probe_t *p) {
    uint32_t target = mp__sw_find(sw, p->id);
    p->indirect = 1;
    for (uint32_t tries = 0;
         p->nk < sw->cfg.indirect_k && tries < 4 * sw->cfg.indirect_k;
         tries++) {
        uint32_t s = mp__sw_random_alive(sw, target);
        if (s == SW_NONE)
            break;
        bool dup = false;
        for (uint32_t k = 0; k < p->nk; k++)
            dup |= memcmp(p->k_ids[k], sw->mem[s].id, MP_SWIM_ID_BYTES) == 0;
        if (dup)
            continue;
        memcpy(p->k_ids[p->nk++], sw->mem[s].id, MP_SWIM_ID_BYTES);
        sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_PING_REQ, sw->mem[s].id);
        if (o != NULL) {
            o->seq = p->seq;
            o->has_target = 1;
            memcpy(o->target, p->id, MP_SWIM_ID_BYTES);
        }
    }
}

/* Returns true if the probe is finished and must be removed. */
static bool probe_tick(mp_swim_t *sw, uint64_t now, sw_probe_t *p) {
    if (p->acked)
        return now >= (p->notify ? p->direct_dl : p->final_dl);
    if (!p->indirect && now >= p->direct_dl) {
        if (p->notify)
            return true;
        probe_indirect(sw, p);
    }
    if (!p->indirect || now < p->final_dl)
        return false;
    uint32_t s = mp__sw_find(sw, p->id);
    if (s == SW_NONE || sw->mem[s].state != MP_SWIM_ALIVE)
        return true;
    /* Nobody reached it: suspect it, and tell it so directly, in case it
     * is only slow or its answers were lost. */
    sw->stats.suspicions++;
    mp__sw_suspect(sw, now, s, sw->mem[s].inc, MP_SWIM_SUSPECT, true);
    sw->mem[s].flags |= MF_CORRECT;
    p->seq = mp__sw_rand(sw);
    p->notify = 1;
    p->indirect = 0;
    p->nk = 0;
    p->direct_dl = mp__add_sat_u64(now, sw->cfg.ping_timeout_ms);
    send_ping(sw, p->id, p->seq);
    return false;
}

void mp__swim_tick(mp_swim_t *sw, uint64_t now_ms) {
    if (sw == NULL || sw->left)
        return;
    uint64_t now = now_ms;
    for (uint32_t i = 0; i < sw->nprobes;) {
        if (probe_tick(sw, now, &sw->probes[i]))
            sw->probes[i] = sw->probes[--sw->nprobes];
        else
            i++;
    }
    for (uint32_t i = 0; i < sw->nrelays;) {
        if (now >= sw->relays[i].deadline)
            sw->relays[i] = sw->relays[--sw->nrelays];
        else
            i++;
    }
    mp__sw_expire(sw, now);
    if (sw->sync_active && now >= sw->sync_deadline) {
        uint32_t boot = mp__sw_find(sw, sw->sync_boot);
        if (sw->sync_tries >= sw->cfg.sync_retries || boot == SW_NONE) {
            sync_end(sw, now, false);
        } else {
            sw->sync_tries++;
            sw->sync_deadline = mp__add_sat_u64(now, sw->cfg.sync_timeout_ms);
            sw_out_t *o = mp__sw_out(sw, MP_SWIM_MSG_SYNC_REQ, sw->sync_boot);
            if (o != NULL)
                o->cursor = sw->sync_cursor;
        }
    }
    if (now >= sw->resync_at && !sw->sync_active) {
        /* Preferably not the first bootstrap: another view. */
        uint32_t first = mp__sw_find(sw, sw->sync_boot);
        uint32_t s = mp__sw_random_alive(sw, first);
        if (s == SW_NONE)
            s = mp__sw_random_alive(sw, SW_NONE);
        sw->resync_at = UINT64_MAX;
        if (s != SW_NONE)
            sync_start(sw, now, s, true);
    }
    if (now >= sw->next_probe) {
        /* One probe per period in round-robin order, and, on top, at most
         * a few urgent probes of members someone else doubts, with the
         * doubt on their PING. It does not replace the round robin: when
         * several peers fail at once, that is what finds the ones nobody has
         * suspected yet. Urgent ones go first (they may save a live
         * member) but leave a slot for the round robin, and stay queued
         * until a slot is free. */
        for (uint32_t k = 0; k < SW_URGENT_PER_PERIOD &&
                             sw->nprobes + 1 < sw->cfg.max_pending_probes;
             k++) {
            uint32_t u = mp__sw_urgent_pop(sw);
            if (u == SW_NONE)
                break;
            start_probe(sw, now, u);
        }
        uint32_t s = mp__sw_next_probe(sw);
        if (s != SW_NONE)
            start_probe(sw, now, s);
        sw->next_probe += sw->cfg.period_ms;
        if (sw->next_probe <= now)
            sw->next_probe = now + sw->cfg.period_ms;
    }
}

bool mp__swim_contact(mp_swim_t *sw, uint64_t now_ms,
                      const uint8_t id[MP_SWIM_ID_BYTES]) {
    if (sw == NULL || id == NULL || sw->left)
        return false;
    uint32_t s = mp__sw_find(sw, id);
    if (s == SW_NONE || s == sw->self || sw->mem[s].state == MP_SWIM_ALIVE)
        return false;
    for (uint32_t i = 0; i < sw->nprobes; i++)
        if (memcmp(sw->probes[i].id, id, MP_SWIM_ID_BYTES) == 0)
            return false; /* one is on its way */
    uint32_t before = sw->nprobes;
    start_probe(sw, now_ms, s);
    return sw->nprobes > before;
}

uint64_t mp__swim_next_wakeup(const mp_swim_t *sw) {
    if (sw == NULL || sw->left)
        return UINT64_MAX;
    uint64_t t = sw->next_probe;
    for (uint32_t i = 0; i < sw->nprobes; i++) {
        const sw_probe_t *p = &sw->probes[i];
        uint64_t d = p->indirect || (p->acked && !p->notify) ? p->final_dl
                                                             : p->direct_dl;
        t = d < t ? d : t;
    }
    for (uint32_t i = 0; i < sw->nrelays; i++)
        t = sw->relays[i].deadline < t ? sw->relays[i].deadline : t;
    for (uint32_t i = 0; i < sw->nsus; i++)
        t = sw->sus[i].deadline < t ? sw->sus[i].deadline : t;
    if (sw->ntomb > 0) {
        uint64_t d = mp__add_sat_u64(sw->tomb[sw->tomb_head].since,
                                     sw->cfg.dead_retain_ms);
        t = d < t ? d : t;
    }
    if (sw->sync_active && sw->sync_deadline < t)
        t = sw->sync_deadline;
    if (sw->resync_at < t)
        t = sw->resync_at;
    return t;
}

/* ------------------------------------------------------------------ */
/* output and queries                                                  */

static void fill_page(mp_swim_t *sw, uint32_t cursor, mp_swim_msg_t *msg) {
    uint32_t s = cursor, n = 0;
    size_t bytes = 0;
    for (; s < sw->nslots && n < sw->cfg.page_size; s++) {
        if (sw->mem[s].state == SW_FREE)
            continue;
        mp_swim_update_t *u = &msg->entries[n];
        mp__sw_member_update(sw, s, true, u);
        if (u->state != MP_SWIM_ALIVE && u->inc > MP_SWIM_INC_CLAIM_MAX)
            continue;
        size_t sz = mp__swim_update_bytes(u);
        if (n > 0 && bytes + sz > sw->cfg.page_bytes)
            break;
        bytes += sz;
        n++;
    }
    msg->n_entries = n;
    msg->next = s < sw->nslots ? s : 0;
}

bool mp__swim_poll_send(mp_swim_t *sw, mp_swim_out_t *out) {
    if (sw == NULL || out == NULL || sw->nout == 0)
        return false;
    sw_out_t o = sw->out[sw->out_head];
    sw->out_head = (sw->out_head + 1) % sw->capout;
    sw->nout--;
    mp_swim_msg_t *m = &out->msg;
    memcpy(out->to, o.to, MP_SWIM_ID_BYTES);
    m->type = (mp_swim_msg_type_t)o.type;
    m->inc = sw->mem[sw->self].inc;
    m->seq = o.seq;
    m->has_target = o.has_target;
    memcpy(m->target, o.target, MP_SWIM_ID_BYTES);
    m->addr[0] = '\0';
    if (o.type == MP_SWIM_MSG_PING || o.type == MP_SWIM_MSG_SYNC_REQ) {
        const char *a = mp__sw_str(sw, sw->mem[sw->self].addr);
        memcpy(m->addr, a, strlen(a) + 1);
    }
    m->cursor = o.cursor;
    m->next = 0;
    m->n_entries = 0;
    if (o.type == MP_SWIM_MSG_SYNC)
        fill_page(sw, o.cursor, m);
    m->n_updates = (uint32_t)mp__swim_take_updates(
        sw, o.to, sw->cfg.piggyback_bytes, m->updates, MP_SWIM_PB_MAX);
    return true;
}

bool mp__swim_poll_event(mp_swim_t *sw, mp_swim_event_t *ev) {
    if (sw == NULL || ev == NULL || sw->nev == 0)
        return false;
    *ev = sw->ev[sw->ev_head];
    sw->ev_head = (sw->ev_head + 1) % sw->capev;
    sw->nev--;
    return true;
}

bool mp__swim_addr_verified(mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES],
                            const char *addr) {
    if (sw == NULL || id == NULL || !sw_addr_ok(addr) || addr[0] == '\0')
        return false;
    uint32_t s = mp__sw_find(sw, id);
    if (s == SW_NONE || s == sw->self)
        return false;
    bool changed = strcmp(mp__sw_str(sw, sw->mem[s].addr), addr) != 0;
    mp__sw_set_addr(sw, s, addr);
    if (changed && sw->mem[s].addr == 0)
        return false; /* out of memory */
    sw->mem[s].flags |= MF_CONFIRMED;
    mp__sw_hint_drop(sw, s);
    if (changed)
        mp__sw_event(sw, MP_SWIM_EV_ADDR, s);
    return true;
}

static void fill_member(const mp_swim_t *sw, uint32_t s,
                        mp_swim_member_t *out) {
    const sw_mem_t *m = &sw->mem[s];
    memcpy(out->id, m->id, MP_SWIM_ID_BYTES);
    out->state = m->state;
    out->is_self = s == sw->self;
    out->addr_confirmed = (m->flags & MF_CONFIRMED) != 0;
    out->inc = m->inc;
    out->addr = mp__sw_str(sw, m->addr);
    uint32_t h = mp__sw_hint_find(sw, s);
    out->hint = h == SW_NONE ? NULL : mp__sw_str(sw, sw->hints[h].off);
}

bool mp__swim_lookup(const mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES],
                     mp_swim_member_t *out) {
    if (sw == NULL || id == NULL || out == NULL)
        return false;
    uint32_t s = mp__sw_find(sw, id);
    if (s == SW_NONE)
        return false;
    fill_member(sw, s, out);
    return true;
}

bool mp__swim_member_next(const mp_swim_t *sw, size_t *cursor,
                          mp_swim_member_t *out) {
    if (sw == NULL || cursor == NULL || out == NULL)
        return false;
    while (*cursor < sw->nslots) {
        uint32_t s = (uint32_t)(*cursor)++;
        if (sw->mem[s].state != SW_FREE) {
            fill_member(sw, s, out);
            return true;
        }
    }
    return false;
}

size_t mp__swim_live_count(const mp_swim_t *sw) {
    return sw == NULL || sw->left ? 0 : sw->nlive;
}

size_t mp__swim_size_estimate(const mp_swim_t *sw) {
    return sw == NULL || sw->nlive == 0 ? 1 : sw->nlive;
}

size_t mp__swim_pending_updates(const mp_swim_t *sw) {
    return sw == NULL ? 0 : sw->nqueued;
}

uint32_t mp__swim_self_inc(const mp_swim_t *sw) {
    return sw == NULL ? 0 : sw->mem[sw->self].inc;
}

bool mp__swim_syncing(const mp_swim_t *sw) {
    return sw != NULL && (sw->sync_active || sw->resync_at != UINT64_MAX);
}

bool mp__swim_synced(const mp_swim_t *sw) {
    return sw != NULL && sw->synced;
}

bool mp__swim_has_left(const mp_swim_t *sw) {
    return sw != NULL && sw->left;
}

void mp__swim_get_stats(const mp_swim_t *sw, mp_swim_stats_t *out) {
    if (out == NULL)
        return;
    if (sw == NULL)
        memset(out, 0, sizeof *out);
    else
        *out = sw->stats;
}
