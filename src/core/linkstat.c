/* SPDX-License-Identifier: MIT */
/*
 * linkstat.c - link measurements and the deadlines derived from them: rings
 * of round-trip and per-KiB part-time samples per peer with a robust high
 * estimate (median + K * MAD), the silence limit of a group member and the
 * JOIN_ACK wait that follow from it within the configured bounds, and this
 * peer's upload rate from its mates' DONE reports. Integer math only; no
 * clock (the driver passes samples), no allocation.
 */
#include "core/linkstat.h"

#include <string.h>

#include "base/base.h"

uint32_t mp__link_median(const uint32_t *v, uint32_t n) {
    uint32_t s[64];
    if (n == 0)
        return 0;
    if (n > 64)
        n = 64;
    for (uint32_t i = 0; i < n; i++) { /* insertion sort: n <= 64 */
        uint32_t x = v[i], k = i;
        while (k > 0 && s[k - 1] > x) {
            s[k] = s[k - 1];
            k--;
        }
        s[k] = x;
    }
    return s[(n - 1) / 2];
}

void mp__link_ring_add(mp_ring_t *r, uint32_t v) {
    r->v[r->pos] = v;
    r->pos = (r->pos + 1) % MP_LINK_SAMPLES;
    if (r->n < MP_LINK_SAMPLES)
        r->n++;
}

bool mp__link_ring_hi(const mp_ring_t *r, uint32_t *out) {
    if (r->n == 0)
        return false;
    uint32_t med = mp__link_median(r->v, r->n), dev[MP_LINK_SAMPLES];
    for (uint32_t i = 0; i < r->n; i++)
        dev[i] = r->v[i] > med ? r->v[i] - med : med - r->v[i];
    uint64_t hi =
        (uint64_t)med + (uint64_t)MP_LINK_K * mp__link_median(dev, r->n);
    *out = hi > UINT32_MAX ? UINT32_MAX : (uint32_t)hi;
    return true;
}

void mp__link_rtt(mp_link_t *l, uint64_t rtt_ms) {
    mp__link_ring_add(&l->rtt,
                      rtt_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt_ms);
}

void mp__link_part(mp_link_t *l, uint64_t bytes, uint64_t gap_ms) {
    uint64_t kib = bytes / 1024u;
    if (kib == 0)
        return;
    /* microseconds per KiB, rounded up: a gap below the clock's 1 ms
     * resolution still costs something */
    uint64_t us = gap_ms > UINT64_MAX / 1000u ? UINT64_MAX : gap_ms * 1000u;
    uint64_t c = us / kib + (us % kib != 0);
    mp__link_ring_add(&l->cost, c > UINT32_MAX ? UINT32_MAX : (uint32_t)c);
}

bool mp__link_bytes_ms(const mp_link_t *l, uint64_t bytes, uint64_t *ms) {
    uint32_t cost, rtt = 0;
    if (l->cost.n < MP_LINK_MIN_SAMPLES || !mp__link_ring_hi(&l->cost, &cost))
        return false;
    (void)mp__link_ring_hi(&l->rtt, &rtt);
    uint64_t kib = bytes / 1024u + 1u;
    uint64_t us =
        kib > UINT64_MAX / (cost ? cost : 1u) ? UINT64_MAX : kib * cost;
    *ms = mp__add_sat_u64(rtt, us / 1000u + 1u);
    return true;
}

uint32_t mp__link_silence_ms(const mp_link_t *l, uint64_t part_bytes,
                             uint32_t configured) {
    uint64_t t;
    if (configured == 0 || l == NULL || !mp__link_bytes_ms(l, part_bytes, &t))
        return configured;
    t = mp__add_sat_u64(MP_LINK_FLOOR_MS, mp__add_sat_u64(t, t));
    return t < configured ? (uint32_t)t : configured;
}

uint32_t mp__link_ack_ms(const mp_link_t *l, uint32_t configured) {
    uint32_t rtt;
    if (l == NULL || !mp__link_ring_hi(&l->rtt, &rtt))
        return configured;
    uint64_t t = 4u * (uint64_t)rtt + 250u;
    if (t < MP_LINK_FLOOR_MS)
        t = MP_LINK_FLOOR_MS;
    return t < configured ? (uint32_t)t : configured;
}

uint32_t mp__link_rate_kbps(uint64_t bytes, uint64_t ms) {
    if (bytes < MP_LINK_UP_MIN_BYTES || ms == 0)
        return 0;
    /* bits per ms = kbit/s */
    uint64_t k = bytes / ms * 8u + (bytes % ms) * 8u / ms;
    return k == 0 ? 1u : k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
}

void mp__link_up_open(mp_uplink_t *u, uint64_t gid, uint32_t n,
                      const uint64_t *bytes) {
    mp__link_up_close(u);
    u->gid = gid;
    u->mates = n > 0 ? n - 1 : 0;
    if (n > MP_GROUP_MAX)
        n = MP_GROUP_MAX;
    memset(u->bytes, 0, sizeof(u->bytes));
    u->total = 0;
    for (uint32_t i = 0; bytes != NULL && i < n; i++) {
        u->bytes[i] = bytes[i];
        u->total += bytes[i];
    }
}

bool mp__link_up_report(mp_uplink_t *u, uint64_t gid, uint32_t member,
                        uint32_t kbps) {
    if (u->gid == 0 || gid != u->gid || member >= MP_GROUP_MAX ||
        member > u->mates || kbps == 0 || (u->from >> member) & 1u ||
        u->nrep >= u->mates || u->bytes[member] == 0)
        return false;
    u->from |= UINT64_C(1) << member;
    /* bits / (kbit/s) = ms, rounded up */
    uint64_t b = u->bytes[member] * 8u;
    uint64_t t = b / kbps + (b % kbps != 0);
    u->t[u->nrep++] = t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
    return true;
}

/* The round's estimate in kbit/s, 0 without enough reports. */
static uint32_t up_round(const mp_uplink_t *u) {
    if (u->gid == 0 || u->nrep < MP_LINK_UP_MIN_REPORTS ||
        2u * u->nrep < u->mates)
        return 0;
    uint32_t first = 0, second = 0; /* the longest time and the next */
    for (uint32_t i = 0; i < u->nrep; i++) {
        if (u->t[i] >= first) {
            second = first;
            first = u->t[i];
        } else if (u->t[i] > second) {
            second = u->t[i];
        }
    }
    uint64_t t = second; /* the longest left out: nrep >= 3 */
    if (t == 0)
        t = 1;
    uint64_t k = u->total * 8u / t;
    return k == 0 ? 1u : k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
}

void mp__link_up_close(mp_uplink_t *u) {
    uint32_t e = up_round(u);
    if (e != 0) {
        u->est[u->pos] = e;
        u->pos = (u->pos + 1) % MP_LINK_UP_ROUNDS;
        if (u->nest < MP_LINK_UP_ROUNDS)
            u->nest++;
    }
    u->gid = 0;
    u->from = 0;
    u->nrep = 0;
}

uint32_t mp__link_up_mbps(const mp_uplink_t *u) {
    uint32_t v[MP_LINK_UP_ROUNDS + 1], n = u->nest;
    memcpy(v, u->est, n * sizeof(*v));
    v[n] = up_round(u); /* the round still collecting, if it counts */
    n += v[n] != 0;
    if (n == 0)
        return 0;
    uint32_t k = mp__link_median(v, n);
    return k / 1000u + (k % 1000u != 0);
}

bool mp__link_model_stale(uint64_t *best, uint64_t bw) {
    if (bw == 0)
        return false; /* no estimate yet */
    *best -= *best / 8;
    if (bw < *best / 2) {
        *best /= 2;
        return true;
    }
    if (bw > *best)
        *best = bw;
    return false;
}

uint32_t mp__link_streams_for_loss(uint32_t n, uint32_t max,
                                   const mp_link_loss_t *l) {
    if (n == 0 || n >= max || l->segs < MP_LINK_LOSS_MIN_SEGS ||
        l->retrans < MP_LINK_LOSS_MIN_RETRANS || l->retrans > l->segs ||
        l->rtt_us == 0 || l->mss == 0)
        return n;
    /* (n x rate)^2 < target^2 with rate^2 = (MSS x 8 x 1.22 / RTT)^2 / p,
     * in bits per second: no square root */
    double per = (double)l->mss * 8.0 * 1.22 * 1e6 / (double)l->rtt_us;
    double p = (double)l->retrans / (double)l->segs;
    double target = (double)MP_LINK_LOSS_TARGET_MBPS * 1e6;
    double carried2 = (double)n * (double)n * per * per / p;
    if (carried2 >= target * target)
        return n;
    return 2 * n < max ? 2 * n : max;
}
