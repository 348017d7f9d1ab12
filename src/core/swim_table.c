/* SPDX-License-Identifier: MIT */
/*
 * swim_table.c - storage of the SWIM machine (swim.c has the protocol,
 * swim_member.c the record rules): member slots with a free list, the
 * id -> slot index (open addressing, keyed hash so that chosen ids cannot
 * pile up in one chain, 16-bit tags), the arena of address strings, the
 * randomized round-robin probe order, the gossip queue (lists per class
 * and transmission count, so "most important, fewest sent first" is O(1)),
 * and the event and outgoing-message rings. Every structure grows on
 * demand up to the caps of the configuration and is freed in one place.
 * The internal random generator (splitmix64) lives here too.
 */
#include "core/swim_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* randomness                                                          */

uint64_t mp__sw_rand(mp_swim_t *sw) {
    return mp__splitmix64(&sw->rng);
}

uint64_t mp__sw_rand_below(mp_swim_t *sw, uint64_t bound) {
    /* Rejection sampling: unbiased for any bound. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % bound, x;
    do {
        x = mp__sw_rand(sw);
    } while (x >= lim);
    return x % bound;
}

/* ------------------------------------------------------------------ */
/* id index                                                            */

/* Keyed with secrets drawn from the seed: a peer that picks its identity
 * cannot aim at a chain without knowing them. */
static uint64_t id_hash(const mp_swim_t *sw, const uint8_t *id) {
    uint64_t h = sw->hk0;
    for (int i = 0; i < 4; i++)
        h = mp__mix64(h ^ mp__load_le64(id + 8 * i)) + sw->hk1;
    return h;
}

static uint16_t tag_of(uint64_t h) {
    return (uint16_t)(h >> 48);
}

static uint32_t hix_home(const mp_swim_t *sw, uint32_t slot) {
    return (uint32_t)id_hash(sw, sw->mem[slot].id) & (sw->hcap - 1);
}

static void hix_put(mp_swim_t *sw, uint32_t slot) {
    uint64_t h = id_hash(sw, sw->mem[slot].id);
    uint32_t mask = sw->hcap - 1, i = (uint32_t)h & mask;
    while (sw->hix[i] != SW_NONE)
        i = (i + 1) & mask;
    sw->hix[i] = slot;
    sw->htag[i] = tag_of(h);
}

/* Load factor at most 3/4: with the keyed hash, linear probing stays
 * short, and a 10,000-member view needs only 64 KiB of index. */
static bool hix_full(uint64_t need, uint64_t cap) {
    return need * 4 > cap * 3;
}

static bool hix_grow(mp_swim_t *sw, uint32_t need) {
    if (!hix_full(need, sw->hcap))
        return true;
    uint64_t cap = sw->hcap ? sw->hcap : 64;
    while (hix_full(need, cap))
        cap *= 2;
    if (cap > UINT32_MAX / 2 + 1)
        return false;
    uint32_t *n = malloc((size_t)cap * sizeof *n);
    uint16_t *t = malloc((size_t)cap * sizeof *t);
    if (n == NULL || t == NULL) {
        free(n);
        free(t);
        return false;
    }
    free(sw->hix);
    free(sw->htag);
    sw->hix = n;
    sw->htag = t;
    sw->hcap = (uint32_t)cap;
    memset(n, 0xff, (size_t)cap * sizeof *n);
    for (uint32_t s = 0; s < sw->nslots; s++)
        if (sw->mem[s].state != SW_FREE)
            hix_put(sw, s);
    return true;
}

uint32_t mp__sw_find(const mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES]) {
    if (sw->hcap == 0)
        return SW_NONE;
    uint64_t h = id_hash(sw, id);
    uint32_t mask = sw->hcap - 1, i = (uint32_t)h & mask;
    uint16_t tag = tag_of(h);
    for (;;) {
        uint32_t s = sw->hix[i];
        if (s == SW_NONE)
            return SW_NONE;
        if (sw->htag[i] == tag &&
            memcmp(sw->mem[s].id, id, MP_SWIM_ID_BYTES) == 0)
            return s;
        i = (i + 1) & mask;
    }
}

static void hix_del(mp_swim_t *sw, uint32_t slot) {
    uint32_t mask = sw->hcap - 1, i = hix_home(sw, slot);
    while (sw->hix[i] != slot)
        i = (i + 1) & mask;
    /* Backward-shift deletion: no tombstones, lookups stay short. */
    sw->hix[i] = SW_NONE;
    for (uint32_t j = (i + 1) & mask; sw->hix[j] != SW_NONE;
         j = (j + 1) & mask) {
        uint32_t k = hix_home(sw, sw->hix[j]);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        sw->hix[i] = sw->hix[j];
        sw->htag[i] = sw->htag[j];
        sw->hix[j] = SW_NONE;
        i = j;
    }
}

/* ------------------------------------------------------------------ */
/* address arena                                                       */

const char *mp__sw_str(const mp_swim_t *sw, uint32_t off) {
    return off == 0 || sw->arena == NULL ? "" : sw->arena + off;
}

uint32_t mp__sw_store(mp_swim_t *sw, const char *s) {
    size_t n = strnlen(s, MP_SWIM_ADDR_MAX);
    if (n == 0 || n >= MP_SWIM_ADDR_MAX)
        return 0;
    /* s may point into the arena itself (a hint becoming the address), so
     * it is located by offset across a reallocation. */
    size_t inside = SIZE_MAX;
    if (sw->arena != NULL && s >= sw->arena && s < sw->arena + sw->acap)
        inside = (size_t)(s - sw->arena);
    if (n + 1 > (size_t)sw->acap - sw->alen) {
        /* Grows by a quarter: views of thousands of members are kept by
         * every peer, so slack costs more than the copies. */
        uint64_t cap = sw->acap ? sw->acap : 1024;
        while (cap - sw->alen < n + 1)
            cap += cap / 4;
        if (cap > UINT32_MAX)
            return 0;
        char *a = realloc(sw->arena, (size_t)cap);
        if (a == NULL)
            return 0;
        if (sw->arena == NULL) {
            a[0] = '\0'; /* offset 0 is the empty string */
            sw->alen = 1;
        }
        sw->arena = a;
        sw->acap = (uint32_t)cap;
        if (inside != SIZE_MAX)
            s = a + inside;
    }
    uint32_t off = sw->alen;
    memmove(sw->arena + off, s, n);
    sw->arena[off + n] = '\0';
    sw->alen += (uint32_t)(n + 1);
    return off;
}

/* Rewrites the arena with only the strings still referenced. The size is
 * measured, not taken from the garbage count, so a bookkeeping slip could
 * only waste memory, never overflow. */
static void arena_compact(mp_swim_t *sw) {
    uint64_t live = 1;
    for (uint32_t s = 0; s < sw->nslots; s++)
        if (sw->mem[s].state != SW_FREE && sw->mem[s].addr != 0)
            live += strlen(sw->arena + sw->mem[s].addr) + 1;
    for (uint32_t h = 0; h < sw->nhints; h++)
        live += strlen(sw->arena + sw->hints[h].off) + 1;
    char *a = malloc((size_t)live);
    if (a == NULL)
        return; /* keep the garbage; correctness does not depend on it */
    uint32_t len = 1;
    a[0] = '\0';
    for (uint32_t s = 0; s < sw->nslots; s++) {
        sw_mem_t *m = &sw->mem[s];
        if (m->state == SW_FREE || m->addr == 0)
            continue;
        size_t n = strlen(sw->arena + m->addr) + 1;
        memcpy(a + len, sw->arena + m->addr, n);
        m->addr = len;
        len += (uint32_t)n;
    }
    for (uint32_t h = 0; h < sw->nhints; h++) {
        size_t n = strlen(sw->arena + sw->hints[h].off) + 1;
        memcpy(a + len, sw->arena + sw->hints[h].off, n);
        sw->hints[h].off = len;
        len += (uint32_t)n;
    }
    free(sw->arena);
    sw->arena = a;
    sw->acap = (uint32_t)live;
    sw->alen = len;
    sw->agarbage = 0;
}

void mp__sw_release(mp_swim_t *sw, uint32_t off) {
    if (off == 0)
        return;
    sw->agarbage += (uint32_t)strlen(sw->arena + off) + 1;
    if (sw->agarbage > 65536 && sw->agarbage > sw->alen / 2)
        arena_compact(sw);
}

void mp__sw_set_addr(mp_swim_t *sw, uint32_t slot, const char *s) {
    uint32_t old = sw->mem[slot].addr;
    if (strcmp(mp__sw_str(sw, old), s) == 0)
        return;
    /* Store first: s may be a string of the arena that release would
     * free. */
    sw->mem[slot].addr = mp__sw_store(sw, s);
    mp__sw_release(sw, old);
}

/* ------------------------------------------------------------------ */
/* slots                                                               */

moshpit_err_t mp__sw_table_init(mp_swim_t *sw) {
    sw->free_head = SW_NONE;
    for (uint32_t b = 0; b < SW_BUCKETS; b++)
        sw->qhead[b] = sw->qtail[b] = SW_NONE;
    sw->qfree = SW_NONE;
    return MOSHPIT_OK;
}

void mp__sw_table_free(mp_swim_t *sw) {
    free(sw->mem);
    free(sw->hix);
    free(sw->htag);
    free(sw->arena);
    free(sw->order);
    free(sw->q);
}

static bool slots_grow(mp_swim_t *sw) {
    uint64_t cap = (uint64_t)sw->capslots + sw->capslots / 4 + 16;
    if (cap > sw->cfg.max_members)
        cap = sw->cfg.max_members;
    if (cap <= sw->capslots)
        return false;
    sw_mem_t *m = realloc(sw->mem, (size_t)cap * sizeof *m);
    if (m == NULL)
        return false;
    sw->mem = m;
    uint32_t *o = realloc(sw->order, (size_t)cap * sizeof *o);
    if (o == NULL)
        return false; /* mem is larger than needed; harmless */
    sw->order = o;
    sw->capslots = (uint32_t)cap;
    return true;
}

uint32_t mp__sw_add(mp_swim_t *sw, const uint8_t id[MP_SWIM_ID_BYTES]) {
    if (!hix_grow(sw, sw->nused + 1))
        return SW_NONE;
    uint32_t s;
    if (sw->free_head != SW_NONE) {
        s = sw->free_head;
        sw->free_head = sw->mem[s].inc;
    } else {
        if (sw->nslots == sw->capslots && !slots_grow(sw))
            return SW_NONE;
        s = sw->nslots++;
        /* A new slot joins the probe pass in progress at a random place
         * that is still ahead, so it is probed within this pass. */
        uint32_t n = sw->nslots - 1;
        sw->order[n] = s;
        uint32_t j = sw->ptr + (uint32_t)mp__sw_rand_below(sw, n - sw->ptr + 1);
        sw->order[n] = sw->order[j];
        sw->order[j] = s;
    }
    sw_mem_t *m = &sw->mem[s];
    memset(m, 0, sizeof *m);
    memcpy(m->id, id, MP_SWIM_ID_BYTES);
    m->state = MP_SWIM_ALIVE;
    sw->nused++;
    hix_put(sw, s);
    return s;
}

void mp__sw_remove(mp_swim_t *sw, uint32_t slot) {
    sw_mem_t *m = &sw->mem[slot];
    mp__sw_dequeue(sw, slot);
    /* Strings are unreferenced before they are released: a release may
     * compact the arena, which keeps what is still referenced. */
    for (uint32_t h = 0; h < sw->nhints; h++) {
        if (sw->hints[h].slot == slot) {
            uint32_t off = sw->hints[h].off;
            sw->hints[h] = sw->hints[--sw->nhints];
            mp__sw_release(sw, off);
            break;
        }
    }
    hix_del(sw, slot);
    uint32_t addr = m->addr;
    m->addr = 0;
    mp__sw_release(sw, addr);
    m->state = SW_FREE;
    m->flags = 0;
    m->inc = sw->free_head;
    sw->free_head = slot;
    sw->nused--;
}

/* ------------------------------------------------------------------ */
/* probe order and random choices                                      */

static bool probeable(const mp_swim_t *sw, uint32_t s) {
    const sw_mem_t *m = &sw->mem[s];
    return s != sw->self &&
           (m->state == MP_SWIM_ALIVE || m->state == MP_SWIM_SUSPECT);
}

bool mp__sw_partner_ok(const mp_swim_t *sw, uint32_t s) {
    return sw->partner == NULL || sw->partner(sw->partner_ctx, sw->mem[s].id);
}

void mp__swim_set_partners(mp_swim_t *sw,
                           bool (*fn)(void *ctx,
                                      const uint8_t id[MP_SWIM_ID_BYTES]),
                           void *ctx) {
    sw->partner = fn;
    sw->partner_ctx = ctx;
}

uint32_t mp__sw_next_probe(mp_swim_t *sw) {
    bool shuffled = false;
    for (uint32_t seen = 0; seen <= sw->nslots;) {
        if (sw->ptr >= sw->nslots) {
            if (shuffled || sw->nslots == 0)
                return SW_NONE; /* a whole pass found nobody */
            /* Fisher-Yates: a fresh random order for the next pass. */
            for (uint32_t i = sw->nslots - 1; i > 0; i--) {
                uint32_t j = (uint32_t)mp__sw_rand_below(sw, (uint64_t)i + 1);
                uint32_t t = sw->order[i];
                sw->order[i] = sw->order[j];
                sw->order[j] = t;
            }
            sw->ptr = 0;
            shuffled = true;
        }
        uint32_t s = sw->order[sw->ptr++];
        seen++;
        if (probeable(sw, s) && mp__sw_partner_ok(sw, s))
            return s;
    }
    return SW_NONE;
}

static bool other_alive(const mp_swim_t *sw, uint32_t s, uint32_t exclude) {
    return s != exclude && s != sw->self && sw->mem[s].state == MP_SWIM_ALIVE;
}

uint32_t mp__sw_random_alive(mp_swim_t *sw, uint32_t exclude) {
    if (sw->nslots == 0)
        return SW_NONE;
    for (int tries = 0; tries < 32; tries++) {
        uint32_t s = (uint32_t)mp__sw_rand_below(sw, sw->nslots);
        if (other_alive(sw, s, exclude) && mp__sw_partner_ok(sw, s))
            return s;
    }
    /* Sparse table: scan once from a random start (partners first). */
    uint32_t start = (uint32_t)mp__sw_rand_below(sw, sw->nslots);
    for (uint32_t k = 0; k < sw->nslots; k++) {
        uint32_t s = (start + k) % sw->nslots;
        if (other_alive(sw, s, exclude) && mp__sw_partner_ok(sw, s))
            return s;
    }
    for (uint32_t k = 0; sw->partner != NULL && k < sw->nslots; k++) {
        uint32_t s = (start + k) % sw->nslots;
        if (other_alive(sw, s, exclude))
            return s;
    }
    return SW_NONE;
}

/* ------------------------------------------------------------------ */
/* gossip queue                                                        */

static uint32_t q_bucket(const sw_qent_t *x) {
    return x->cls * (SW_TX_MAX + 1u) + x->tx;
}

static void q_push(mp_swim_t *sw, uint32_t e, unsigned cls, uint32_t tx) {
    sw_qent_t *x = &sw->q[e];
    x->tx = (uint16_t)tx;
    x->cls = (uint16_t)cls;
    uint32_t b = q_bucket(x);
    x->next = SW_NONE;
    x->prev = sw->qtail[b];
    if (sw->qtail[b] != SW_NONE)
        sw->q[sw->qtail[b]].next = e;
    else
        sw->qhead[b] = e;
    sw->qtail[b] = e;
}

static void q_unlink(mp_swim_t *sw, uint32_t e) {
    sw_qent_t *x = &sw->q[e];
    uint32_t b = q_bucket(x);
    if (x->prev != SW_NONE)
        sw->q[x->prev].next = x->next;
    else
        sw->qhead[b] = x->next;
    if (x->next != SW_NONE)
        sw->q[x->next].prev = x->prev;
    else
        sw->qtail[b] = x->prev;
}

static void q_free(mp_swim_t *sw, uint32_t e) {
    sw->mem[sw->q[e].slot].flags &= (uint8_t)~MF_QUEUED;
    sw->q[e].slot = SW_NONE;
    sw->q[e].next = sw->qfree;
    sw->qfree = e;
    sw->nqueued--;
}

/* Queue entries are few (queue_max) and a member that changes again while
 * its previous change is still queued is rare, so a scan is fine. */
static uint32_t q_find(const mp_swim_t *sw, uint32_t slot) {
    for (uint32_t e = 0; e < sw->qcap; e++)
        if (sw->q[e].slot == slot)
            return e;
    return SW_NONE;
}

void mp__sw_dequeue(mp_swim_t *sw, uint32_t slot) {
    if (!(sw->mem[slot].flags & MF_QUEUED))
        return;
    uint32_t e = q_find(sw, slot);
    if (e != SW_NONE) {
        q_unlink(sw, e);
        q_free(sw, e);
    }
}

void mp__sw_enqueue(mp_swim_t *sw, uint32_t slot, unsigned cls) {
    if (sw->mem[slot].flags & MF_QUEUED) {
        uint32_t e = q_find(sw, slot);
        if (e != SW_NONE) {
            /* The record changed again: it is news once more. */
            q_unlink(sw, e);
            q_push(sw, e, cls, 0);
            return;
        }
    }
    if (sw->nqueued >= sw->cfg.queue_max) {
        /* Full: drop from the least important class the update that has
         * been sent the most. */
        for (uint32_t b = SW_BUCKETS; b-- > 0;) {
            uint32_t e = sw->qhead[b];
            if (e != SW_NONE) {
                q_unlink(sw, e);
                q_free(sw, e);
                sw->stats.queue_dropped++;
                break;
            }
        }
    }
    if (sw->qfree == SW_NONE) {
        uint64_t cap = sw->qcap ? (uint64_t)sw->qcap * 2 : 64;
        if (cap > sw->cfg.queue_max)
            cap = sw->cfg.queue_max;
        sw_qent_t *q =
            cap > sw->qcap ? realloc(sw->q, (size_t)cap * sizeof *q) : NULL;
        if (q == NULL) {
            sw->stats.queue_dropped++;
            return;
        }
        sw->q = q;
        for (uint32_t e = (uint32_t)cap; e-- > sw->qcap;) {
            q[e].slot = SW_NONE;
            q[e].next = sw->qfree;
            sw->qfree = e;
        }
        sw->qcap = (uint32_t)cap;
    }
    uint32_t e = sw->qfree;
    sw->qfree = sw->q[e].next;
    sw->q[e].slot = slot;
    sw->nqueued++;
    sw->mem[slot].flags |= MF_QUEUED;
    q_push(sw, e, cls, 0);
}

uint32_t mp__sw_ceil_log2(uint64_t x) {
    uint32_t k = 0;
    while (k < 63 && ((uint64_t)1 << k) < x)
        k++;
    return k;
}

uint32_t mp__sw_retransmits(const mp_swim_t *sw) {
    uint64_t n = sw->nlive > 0 ? sw->nlive : 1;
    uint64_t l = (uint64_t)sw->cfg.retransmit_mult * mp__sw_ceil_log2(n + 1);
    if (l < 1)
        l = 1;
    return l > SW_TX_MAX ? SW_TX_MAX : (uint32_t)l;
}

uint8_t mp__sw_wire_state(const sw_mem_t *m) {
    if (m->state == MP_SWIM_SUSPECT && m->intent == MP_SWIM_LEFT)
        return MP_SWIM_LEFT;
    return m->state;
}

void mp__sw_member_update(const mp_swim_t *sw, uint32_t slot, bool with_addr,
                          mp_swim_update_t *u) {
    const sw_mem_t *m = &sw->mem[slot];
    memcpy(u->id, m->id, MP_SWIM_ID_BYTES);
    u->inc = m->inc;
    u->state = mp__sw_wire_state(m);
    const char *a = mp__sw_str(sw, m->addr);
    if ((with_addr || u->state == MP_SWIM_ALIVE) && a[0] != '\0') {
        u->has_addr = 1;
        memcpy(u->addr, a, strlen(a) + 1);
    } else {
        u->has_addr = 0;
        u->addr[0] = '\0';
    }
}

size_t mp__swim_update_bytes(const mp_swim_update_t *u) {
    /* fixarray, bin 8 of 32 bytes, state as positive fixint, inc in the
     * shortest uint form, address as fixstr or str 8. */
    size_t n = 1 + 2 + MP_SWIM_ID_BYTES + 1;
    n += u->inc < 128 ? 1 : u->inc < 256 ? 2 : u->inc < 65536 ? 3 : 5;
    if (u->has_addr) {
        size_t a = strnlen(u->addr, MP_SWIM_ADDR_MAX);
        n += (a < 32 ? 1 : 2) + a;
    }
    return n;
}

size_t mp__sw_take(mp_swim_t *sw, uint32_t skip1, uint32_t skip2, size_t budget,
                   mp_swim_update_t *out, size_t max_n) {
    uint32_t taken[2 * MP_SWIM_PB_MAX];
    size_t n = 0, nt = 0, used = 0;
    if (max_n > MP_SWIM_PB_MAX)
        max_n = MP_SWIM_PB_MAX;
    /* Buckets in priority order: class, then fewest transmissions. Entries
     * move to their next bucket only after the walk, so none is visited
     * twice. */
    for (uint32_t b = 0; b < SW_BUCKETS && n < max_n; b++) {
        for (uint32_t e = sw->qhead[b]; e != SW_NONE && n < max_n;
             e = sw->q[e].next) {
            uint32_t s = sw->q[e].slot;
            if (s == skip1 || s == skip2)
                continue;
            if (nt == sizeof taken / sizeof taken[0])
                goto walked;
            mp__sw_member_update(sw, s, false, &out[n]);
            if (out[n].state != MP_SWIM_ALIVE &&
                out[n].inc > MP_SWIM_INC_CLAIM_MAX) {
                /* Nobody would accept it: let it age out unsent. */
                taken[nt++] = e;
                continue;
            }
            size_t sz = mp__swim_update_bytes(&out[n]);
            if (sz > budget - used)
                goto walked;
            used += sz;
            n++;
            taken[nt++] = e;
        }
    }
walked:;
    uint32_t limit = mp__sw_retransmits(sw);
    for (size_t i = 0; i < nt; i++) {
        uint32_t e = taken[i], tx = sw->q[e].tx + 1u;
        q_unlink(sw, e);
        if (tx >= limit)
            q_free(sw, e);
        else
            q_push(sw, e, sw->q[e].cls, tx);
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* rings: events and outgoing messages                                 */

/* Grows a ring buffer (and makes it start at index 0); false if it is at
 * max entries already or memory ran out. */
bool mp__sw_ring_grow(void **buf, uint32_t *cap, uint32_t *head, uint32_t n,
                      size_t esz, uint32_t max) {
    uint64_t nc = *cap ? (uint64_t)*cap * 2 : 16;
    if (nc > max)
        nc = max;
    if (nc <= *cap)
        return false;
    char *nb = malloc((size_t)nc * esz);
    if (nb == NULL)
        return false;
    for (uint32_t i = 0; i < n; i++)
        memcpy(nb + (size_t)i * esz,
               (char *)*buf + (size_t)((*head + i) % *cap) * esz, esz);
    free(*buf);
    *buf = nb;
    *cap = (uint32_t)nc;
    *head = 0;
    return true;
}

void mp__sw_event(mp_swim_t *sw, mp_swim_event_type_t type, uint32_t slot) {
    if (sw->nev == sw->capev &&
        !mp__sw_ring_grow((void **)&sw->ev, &sw->capev, &sw->ev_head, sw->nev,
                          sizeof *sw->ev, sw->cfg.events_max)) {
        sw->stats.events_dropped++;
        return;
    }
    mp_swim_event_t *e = &sw->ev[(sw->ev_head + sw->nev++) % sw->capev];
    const sw_mem_t *m = &sw->mem[slot];
    e->type = type;
    memcpy(e->id, m->id, MP_SWIM_ID_BYTES);
    e->state = m->state;
    e->inc = m->inc;
}

sw_out_t *mp__sw_out(mp_swim_t *sw, uint8_t type, const uint8_t *to) {
    if (sw->nout == sw->capout &&
        !mp__sw_ring_grow((void **)&sw->out, &sw->capout, &sw->out_head,
                          sw->nout, sizeof *sw->out, sw->cfg.out_max)) {
        sw->stats.out_dropped++;
        return NULL;
    }
    sw_out_t *o = &sw->out[(sw->out_head + sw->nout++) % sw->capout];
    memset(o, 0, sizeof *o);
    o->type = type;
    memcpy(o->to, to, MP_SWIM_ID_BYTES);
    return o;
}
