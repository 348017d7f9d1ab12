/* SPDX-License-Identifier: MIT */
/*
 * swim_member.c - what updates and timers do to the member records of the
 * SWIM machine: states and incarnations, suspicion timers (and the urgent
 * probes they ask for), DEAD/LEFT records and their expiry, addresses and
 * hints, self refutation, and the two piggyback entry points
 * (mp__swim_absorb, mp__swim_take_updates). The rules are those of swim.h
 * and docs/PROTOCOL.md "What a receiver accepts". Messages, probes and the
 * rest of the protocol are in swim.c, storage in swim_table.c.
 */
#include "core/swim_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* member state                                                        */

void mp__sw_set_state(mp_swim_t *sw, uint32_t slot, uint8_t st) {
    sw_mem_t *m = &sw->mem[slot];
    if (sw_is_live(m->state) && !sw_is_live(st))
        sw->nlive--;
    else if (!sw_is_live(m->state) && sw_is_live(st))
        sw->nlive++;
    m->state = st;
}

uint64_t mp__swim_suspicion_ms(const mp_swim_t *sw) {
    if (sw == NULL)
        return 0;
    uint64_t n = sw->nlive > 0 ? sw->nlive : 1;
    uint64_t t = (uint64_t)sw->cfg.suspicion_mult * sw->cfg.period_ms *
                 mp__sw_ceil_log2(n + 1);
    return t < sw->cfg.suspicion_min_ms ? sw->cfg.suspicion_min_ms : t;
}

uint32_t mp__swim_retransmits(const mp_swim_t *sw) {
    return sw == NULL ? 0 : mp__sw_retransmits(sw);
}

static uint32_t sus_find(const mp_swim_t *sw, uint32_t slot) {
    for (uint32_t i = 0; i < sw->nsus; i++)
        if (sw->sus[i].slot == slot)
            return i;
    return SW_NONE;
}

static void sus_del(mp_swim_t *sw, uint32_t slot) {
    uint32_t i = sus_find(sw, slot);
    if (i != SW_NONE)
        sw->sus[i] = sw->sus[--sw->nsus];
}

/* Sets (or moves) the suspicion deadline of slot; false only when a new
 * entry is needed and memory ran out. */
static bool sus_set(mp_swim_t *sw, uint32_t slot, uint64_t deadline) {
    uint32_t i = sus_find(sw, slot);
    if (i == SW_NONE) {
        if (sw->nsus == sw->capsus) {
            /* At most one entry per member, so this stays bounded. */
            uint64_t cap = sw->capsus ? (uint64_t)sw->capsus * 2 : 16;
            sw_suspect_t *n = realloc(sw->sus, (size_t)cap * sizeof *n);
            if (n == NULL)
                return false;
            sw->sus = n;
            sw->capsus = (uint32_t)cap;
        }
        i = sw->nsus++;
        sw->sus[i].slot = slot;
    }
    sw->sus[i].deadline = deadline;
    return true;
}

void mp__sw_suspect(mp_swim_t *sw, uint64_t now, uint32_t slot, uint32_t inc,
                    uint8_t intent, bool spread) {
    sw_mem_t *m = &sw->mem[slot];
    uint8_t prev = m->state;
    /* Without a timer a suspect would linger forever: out of memory, the
     * record stays as it was. */
    if (!sus_set(sw, slot, mp__add_sat_u64(now, mp__swim_suspicion_ms(sw))))
        return;
    m->inc = inc;
    m->intent = intent;
    mp__sw_set_state(sw, slot, MP_SWIM_SUSPECT);
    if (prev != MP_SWIM_SUSPECT)
        mp__sw_event(sw, MP_SWIM_EV_SUSPECT, slot);
    if (spread)
        mp__sw_enqueue(sw, slot, SW_Q_DOUBT);
}

/* Someone else says slot is in doubt: probe it next, with the suspicion
 * on the PING (a correction), so a live suspect hears of it directly.
 * Members that have talked to us come first: a flood of made-up members
 * (which never do) cannot push a real one out of the queue. */
static void urgent_probe(mp_swim_t *sw, uint32_t slot) {
    bool heard = (sw->mem[slot].flags & MF_HEARD) != 0;
    for (uint32_t i = 0; i < sw->nurgent; i++)
        if (sw->urgent[i] == slot)
            return;
    if (sw->nurgent == SW_URGENT_MAX && heard) {
        for (uint32_t i = SW_URGENT_MAX; i-- > 0;) {
            if (!(sw->mem[sw->urgent[i]].flags & MF_HEARD)) {
                memmove(sw->urgent + i, sw->urgent + i + 1,
                        (--sw->nurgent - i) * sizeof sw->urgent[0]);
                break;
            }
        }
    }
    if (sw->nurgent < SW_URGENT_MAX)
        sw->urgent[sw->nurgent++] = slot;
}

/* Next urgent probe: the oldest one we have heard from, else the oldest;
 * SW_NONE if none is still in doubt. With a partner rule
 * (mp__swim_set_partners) only partners get one: the suspect's partners
 * (some peers' partner it always is) tell it, and everyone else waits for
 * gossip. Otherwise every member that hears of one suspicion dials the
 * suspect at once, and the suspect, busy with a hundred handshakes and
 * closing sessions over its cap, answers the next probes late too. */
uint32_t mp__sw_urgent_pop(mp_swim_t *sw) {
    while (sw->nurgent > 0) {
        uint32_t pick = 0;
        for (uint32_t i = 0; i < sw->nurgent; i++) {
            if (sw->mem[sw->urgent[i]].flags & MF_HEARD) {
                pick = i;
                break;
            }
        }
        uint32_t s = sw->urgent[pick];
        memmove(sw->urgent + pick, sw->urgent + pick + 1,
                (--sw->nurgent - pick) * sizeof sw->urgent[0]);
        if (sw->mem[s].state == MP_SWIM_SUSPECT && s != sw->self &&
            mp__sw_partner_ok(sw, s))
            return s;
    }
    return SW_NONE;
}

static bool tomb_reap_one(mp_swim_t *sw);

static void tomb_push(mp_swim_t *sw, uint32_t slot, uint64_t now) {
    /* Entries of records that came back stay until their turn, so the FIFO
     * may outgrow the table; then the oldest record goes early. */
    if (sw->ntomb == sw->captomb &&
        !mp__sw_ring_grow((void **)&sw->tomb, &sw->captomb, &sw->tomb_head,
                          sw->ntomb, sizeof *sw->tomb,
                          2 * sw->cfg.max_members)) {
        if (sw->ntomb == 0)
            return; /* out of memory: kept until the table needs room */
        tomb_reap_one(sw);
    }
    sw_tomb_t *t = &sw->tomb[(sw->tomb_head + sw->ntomb++) % sw->captomb];
    t->slot = slot;
    t->inc = sw->mem[slot].inc;
    t->since = now;
}

/* Whether the FIFO entry still describes the record (it did not come back
 * and die again, and the slot was not reused). */
static bool tomb_valid(const mp_swim_t *sw, const sw_tomb_t *t) {
    const sw_mem_t *m = &sw->mem[t->slot];
    return (m->state == MP_SWIM_DEAD || m->state == MP_SWIM_LEFT) &&
           m->inc == t->inc;
}

/* Forgets the oldest DEAD/LEFT record; false if there is none. */
static bool tomb_reap_one(mp_swim_t *sw) {
    while (sw->ntomb > 0) {
        sw_tomb_t t = sw->tomb[sw->tomb_head];
        sw->tomb_head = (sw->tomb_head + 1) % sw->captomb;
        sw->ntomb--;
        if (tomb_valid(sw, &t)) {
            mp__sw_event(sw, MP_SWIM_EV_REMOVED, t.slot);
            mp__sw_remove(sw, t.slot);
            return true;
        }
    }
    return false;
}

static void make_final(mp_swim_t *sw, uint64_t now, uint32_t slot, uint8_t st,
                       bool spread) {
    uint8_t prev = sw->mem[slot].state;
    if (prev == MP_SWIM_SUSPECT)
        sus_del(sw, slot);
    sw->mem[slot].intent = 0;
    mp__sw_set_state(sw, slot, st);
    /* DEAD -> LEFT at the same incarnation keeps its FIFO entry: one
     * entry per record, or a later reuse of the slot could be reaped. */
    if (sw_is_live(prev))
        tomb_push(sw, slot, now);
    mp__sw_event(sw, st == MP_SWIM_LEFT ? MP_SWIM_EV_LEFT : MP_SWIM_EV_DEAD,
                 slot);
    if (spread)
        mp__sw_enqueue(sw, slot, SW_Q_DOUBT);
}

uint32_t mp__sw_add_member(mp_swim_t *sw, const uint8_t *id) {
    /* A full table makes room by forgetting its oldest DEAD/LEFT record:
     * a flood of made-up members cannot keep real ones out for longer than
     * it takes to declare the made-up ones dead. */
    if (sw->nused >= sw->cfg.max_members && !tomb_reap_one(sw)) {
        sw->stats.refused_cap++;
        return SW_NONE;
    }
    uint32_t s = mp__sw_add(sw, id);
    if (s == SW_NONE) {
        sw->stats.refused_cap++;
        return SW_NONE;
    }
    sw->nlive++; /* mp__sw_add makes it ALIVE */
    return s;
}

/* Suspicions whose timer ran out become DEAD (or LEFT, if that is what
 * they would end as); DEAD/LEFT records older than dead_retain_ms are
 * forgotten. */
void mp__sw_expire(mp_swim_t *sw, uint64_t now) {
    for (uint32_t i = 0; i < sw->nsus;) {
        if (now < sw->sus[i].deadline) {
            i++;
            continue;
        }
        uint32_t s = sw->sus[i].slot;
        /* make_final removes entry i; the next one moves into it. */
        make_final(sw, now, s,
                   sw->mem[s].intent == MP_SWIM_LEFT ? MP_SWIM_LEFT
                                                     : MP_SWIM_DEAD,
                   true);
    }
    while (sw->ntomb > 0) {
        const sw_tomb_t *t = &sw->tomb[sw->tomb_head];
        if (!tomb_valid(sw, t)) {
            sw->tomb_head = (sw->tomb_head + 1) % sw->captomb;
            sw->ntomb--;
        } else if (mp__add_sat_u64(t->since, sw->cfg.dead_retain_ms) <= now) {
            tomb_reap_one(sw);
        } else {
            break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* addresses                                                           */

uint32_t mp__sw_hint_find(const mp_swim_t *sw, uint32_t slot) {
    for (uint32_t h = 0; h < sw->nhints; h++)
        if (sw->hints[h].slot == slot)
            return h;
    return SW_NONE;
}

void mp__sw_hint_drop(mp_swim_t *sw, uint32_t slot) {
    uint32_t h = mp__sw_hint_find(sw, slot);
    if (h != SW_NONE) {
        uint32_t off = sw->hints[h].off;
        sw->hints[h] = sw->hints[--sw->nhints];
        mp__sw_release(sw, off);
    }
}

static void hint_set(mp_swim_t *sw, uint32_t slot, const char *addr) {
    uint32_t h = mp__sw_hint_find(sw, slot);
    if (h != SW_NONE && strcmp(mp__sw_str(sw, sw->hints[h].off), addr) == 0)
        return;
    mp__sw_hint_drop(sw, slot);
    if (sw->nhints == SW_HINTS_MAX)
        mp__sw_hint_drop(sw,
                         sw->hints[mp__sw_rand_below(sw, SW_HINTS_MAX)].slot);
    uint32_t off = mp__sw_store(sw, addr);
    if (off == 0)
        return;
    sw->hints[sw->nhints].slot = slot;
    sw->hints[sw->nhints].off = off;
    sw->nhints++;
}

/* Applies an address claim; true if the address in use changed. Only the
 * member itself (direct) sets a confirmed address. A third party may fill
 * in an address we only have by hearsay, or that of a DEAD/LEFT record (a
 * restart may have moved it); anything else is only a hint. */
static bool take_addr(mp_swim_t *sw, uint32_t slot, const char *addr,
                      bool direct, uint8_t prev_state) {
    sw_mem_t *m = &sw->mem[slot];
    if (addr[0] == '\0')
        return false;
    if (strcmp(mp__sw_str(sw, m->addr), addr) == 0) {
        if (direct) {
            m->flags |= MF_CONFIRMED;
            mp__sw_hint_drop(sw, slot);
        }
        return false;
    }
    if (direct || !(m->flags & MF_CONFIRMED) || prev_state == MP_SWIM_DEAD ||
        prev_state == MP_SWIM_LEFT) {
        mp__sw_set_addr(sw, slot, addr);
        if (direct)
            m->flags |= MF_CONFIRMED;
        else
            m->flags &= (uint8_t)~MF_CONFIRMED;
        mp__sw_hint_drop(sw, slot);
        mp__sw_event(sw, MP_SWIM_EV_ADDR, slot);
        return true;
    }
    hint_set(sw, slot, addr);
    sw->stats.addr_hints++;
    mp__sw_event(sw, MP_SWIM_EV_HINT, slot);
    return false;
}

/* ------------------------------------------------------------------ */
/* updates                                                             */

static bool update_valid(const mp_swim_update_t *u) {
    if (u->state > MP_SWIM_LEFT || u->has_addr > 1)
        return false;
    if (u->state != MP_SWIM_ALIVE && u->inc > MP_SWIM_INC_CLAIM_MAX)
        return false;
    return !u->has_addr || sw_addr_ok(u->addr);
}

/* Someone says something about this peer. Whatever claims it is suspect,
 * dead or left at our incarnation or later (or alive later, or alive at
 * our incarnation somewhere else) is refuted by taking a newer one. */
static void self_claim(mp_swim_t *sw, const mp_swim_update_t *u) {
    sw_mem_t *me = &sw->mem[sw->self];
    uint64_t want = 0;
    if (sw->left)
        return;
    if (u->state == MP_SWIM_ALIVE) {
        if (u->inc > me->inc)
            want = (uint64_t)u->inc + 1;
        else if (u->inc == me->inc && u->has_addr &&
                 strcmp(u->addr, mp__sw_str(sw, me->addr)) != 0)
            want = (uint64_t)me->inc + 1;
    } else if (u->inc >= me->inc) {
        want = (uint64_t)u->inc + 1;
    }
    if (want == 0)
        return;
    if (want > UINT32_MAX)
        want = UINT32_MAX;
    if (want <= me->inc) {
        sw->stats.inc_exhausted++;
        return;
    }
    me->inc = (uint32_t)want;
    sw->stats.refutes++;
    mp__sw_event(sw, MP_SWIM_EV_REFUTED, sw->self);
    mp__sw_enqueue(sw, sw->self, SW_Q_ALIVE);
}

void mp__sw_absorb_one(mp_swim_t *sw, uint64_t now, const uint8_t *from,
                       const mp_swim_update_t *u, int mode) {
    if (!update_valid(u)) {
        sw->stats.rejected++;
        return;
    }
    if (sw_is_self(sw, u->id)) {
        self_claim(sw, u);
        return;
    }
    if (sw->left)
        return;
    bool direct = from != NULL && memcmp(from, u->id, MP_SWIM_ID_BYTES) == 0;
    bool spread = mode != AB_SYNC;
    const char *addr = u->has_addr ? u->addr : "";
    uint32_t s = mp__sw_find(sw, u->id);

    if (s == SW_NONE) {
        /* Nothing to remove; and a sender we know only from a header has
         * no address to reach it by yet. */
        if (u->state == MP_SWIM_DEAD || u->state == MP_SWIM_LEFT ||
            mode == AB_HEADER)
            return;
        s = mp__sw_add_member(sw, u->id);
        if (s == SW_NONE)
            return;
        sw->mem[s].inc = u->inc;
        if (addr[0] != '\0') {
            mp__sw_set_addr(sw, s, addr);
            if (direct)
                sw->mem[s].flags |= MF_CONFIRMED;
        }
        mp__sw_event(sw, MP_SWIM_EV_JOINED, s);
        if (u->state == MP_SWIM_SUSPECT)
            mp__sw_suspect(sw, now, s, u->inc, MP_SWIM_SUSPECT, false);
        if (spread)
            mp__sw_enqueue(sw, s, SW_Q_NEW);
        return;
    }

    sw_mem_t *m = &sw->mem[s];
    uint8_t prev = m->state;
    switch (u->state) {
    case MP_SWIM_ALIVE:
        if (u->inc > m->inc) {
            if (prev == MP_SWIM_SUSPECT)
                sus_del(sw, s);
            m->inc = u->inc;
            m->intent = 0;
            mp__sw_set_state(sw, s, MP_SWIM_ALIVE);
            take_addr(sw, s, addr, direct, prev);
            if (prev != MP_SWIM_ALIVE)
                mp__sw_event(sw, MP_SWIM_EV_ALIVE, s);
            else
                mp__sw_event(sw, MP_SWIM_EV_RENEWED, s);
            if (spread)
                mp__sw_enqueue(sw, s, SW_Q_ALIVE);
        } else if (direct) {
            /* It is talking to us, so it is alive; but our record of it is
             * newer than what it says: it must hear that record (a
             * restart, or a suspicion it has not refuted yet). */
            if (u->inc < m->inc || prev != MP_SWIM_ALIVE) {
                m->flags |= MF_CORRECT;
                if (prev == MP_SWIM_SUSPECT)
                    sus_set(sw, s,
                            mp__add_sat_u64(now, mp__swim_suspicion_ms(sw)));
            } else if (take_addr(sw, s, addr, true, prev) && spread) {
                mp__sw_enqueue(sw, s, SW_Q_ALIVE);
            }
        }
        return;
    case MP_SWIM_LEFT:
        if (direct) {
            if (u->inc >= m->inc && prev != MP_SWIM_LEFT) {
                m->inc = u->inc;
                make_final(sw, now, s, MP_SWIM_LEFT, spread);
            }
            return;
        }
        break;
    default:
        break;
    }

    /* SUSPECT, or DEAD/LEFT from a third party: a suspicion this peer
     * times itself, ending as what the update says. */
    uint8_t intent = u->state;
    bool doubt = false;
    if (prev == MP_SWIM_ALIVE) {
        doubt = u->inc >= m->inc;
    } else if (prev == MP_SWIM_SUSPECT) {
        doubt = u->inc > m->inc;
        if (u->inc == m->inc && intent == MP_SWIM_LEFT)
            m->intent = MP_SWIM_LEFT;
    } else {
        /* A DEAD/LEFT record, and a later incarnation is suspected: it came
         * back (we missed that) and is in doubt again. */
        doubt = u->inc > m->inc;
    }
    if (doubt) {
        sw->stats.downgraded += intent != MP_SWIM_SUSPECT;
        mp__sw_suspect(sw, now, s, u->inc, intent, spread);
        if (sw->mem[s].state == MP_SWIM_SUSPECT)
            urgent_probe(sw, s);
    }
}

void mp__swim_absorb(mp_swim_t *sw, uint64_t now_ms,
                     const uint8_t from[MP_SWIM_ID_BYTES],
                     const mp_swim_update_t *updates, size_t n) {
    if (sw == NULL || (updates == NULL && n > 0))
        return;
    for (size_t i = 0; i < n; i++)
        mp__sw_absorb_one(sw, now_ms, from, &updates[i], AB_GOSSIP);
}

size_t mp__swim_take_updates(mp_swim_t *sw, const uint8_t to[MP_SWIM_ID_BYTES],
                             size_t max_bytes, mp_swim_update_t *out,
                             size_t max_n) {
    if (sw == NULL || out == NULL || max_n == 0)
        return 0;
    size_t n = 0, used = 0;
    uint32_t first = SW_NONE, corr = SW_NONE;
    /* After a leave, the LEFT record goes first on everything. */
    if (sw->left) {
        mp__sw_member_update(sw, sw->self, false, &out[n]);
        size_t sz = mp__swim_update_bytes(&out[n]);
        if (sz <= max_bytes) {
            used += sz;
            n++;
            first = sw->self;
        }
    }
    uint32_t s = to != NULL ? mp__sw_find(sw, to) : SW_NONE;
    if (n < max_n && s != SW_NONE && s != sw->self &&
        (sw->mem[s].flags & MF_CORRECT)) {
        mp__sw_member_update(sw, s, false, &out[n]);
        size_t sz = mp__swim_update_bytes(&out[n]);
        if (sz <= max_bytes - used && (out[n].state == MP_SWIM_ALIVE ||
                                       out[n].inc <= MP_SWIM_INC_CLAIM_MAX)) {
            used += sz;
            n++;
            corr = s;
            sw->mem[s].flags &= (uint8_t)~MF_CORRECT;
        }
    }
    /* A member we doubt gets its own record only: gossip sent to a peer
     * that is probably gone would use up retransmissions for nothing. */
    if (s != SW_NONE && s != sw->self && sw->mem[s].state != MP_SWIM_ALIVE)
        return n;
    if (n < max_n)
        n += mp__sw_take(sw, first, corr, max_bytes - used, out + n, max_n - n);
    return n;
}
