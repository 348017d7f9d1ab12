/* SPDX-License-Identifier: MIT */
/*
 * share.c - partition math: how a vector of count elements is split into n
 * contiguous shares proportional to announced bandwidth, and how a share is
 * cut into parts. Every member of a group must compute exactly the same
 * layout, so this is pure integer arithmetic (no floating point) that cannot
 * overflow for any count that fits in size_t and any 32-bit bandwidths:
 * the exact quotient and remainder of count * b / B are obtained without a
 * 128-bit type, and leftover elements go to the largest remainders, ties to
 * the lower index.
 */
#include "core/share.h"

#include <stdbool.h>

#include "core/group.h"

static uint64_t bw_of(const uint32_t *bandwidths, uint32_t i) {
    return bandwidths[i] ? (uint64_t)bandwidths[i] : 1u;
}

/*
 * Exact floor(count * b / total) and (count * b) mod total for b <= total.
 * count = cq * total + cr gives count * b = cq * b * total + cr * b, where
 * cq * b <= count fits; cr * b (up to ~2^96) is reduced modulo total by
 * shift-and-add over the 32 bits of b, never forming a value >= total.
 */
static uint64_t muldiv(uint64_t count, uint32_t b, uint64_t total,
                       uint64_t *rem) {
    uint64_t cq = count / total;
    uint64_t cr = count % total;
    uint64_t q = 0, r = 0;

    for (int bit = 31; bit >= 0; bit--) {
        q <<= 1;
        if (r >= total - r) {
            r -= total - r;
            q++;
        } else {
            r <<= 1;
        }
        if ((b >> bit) & 1u) {
            if (r >= total - cr) {
                r -= total - cr;
                q++;
            } else {
                r += cr;
            }
        }
    }
    *rem = r;
    return cq * b + q;
}

static uint64_t rem_of(uint64_t count, const uint32_t *bandwidths, uint32_t i,
                       uint64_t total) {
    uint64_t r;
    (void)muldiv(count, (uint32_t)bw_of(bandwidths, i), total, &r);
    return r;
}

static uint32_t count_ge(uint64_t count, const uint32_t *bandwidths, uint32_t n,
                         uint64_t total, uint64_t t) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        c += rem_of(count, bandwidths, i, total) >= t;
    return c;
}

int mp__share_split(uint32_t n, const uint32_t *bandwidths, size_t count,
                    size_t *off, size_t *len) {
    if (n == 0 || bandwidths == NULL || off == NULL || len == NULL)
        return -1;

    /* n * (2^32 - 1) < 2^64: the sum cannot overflow. */
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += bw_of(bandwidths, i);

    uint64_t c = (uint64_t)count, assigned = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t r;
        len[i] = (size_t)muldiv(c, (uint32_t)bw_of(bandwidths, i), total, &r);
        assigned += len[i];
    }

    /* The fractional parts sum to an integer below n. */
    uint64_t leftover = c - assigned;
    if (leftover > 0) {
        /* Largest threshold t with at least `leftover` remainders >= t:
         * everything above t gets one more element, and the lowest indices
         * among those equal to t fill up the rest. Remainders are recomputed
         * instead of stored so the function needs no scratch memory. */
        uint64_t lo = 0, hi = total - 1;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo + 1) / 2;
            if (count_ge(c, bandwidths, n, total, mid) >= leftover)
                lo = mid;
            else
                hi = mid - 1;
        }
        uint64_t need = leftover - count_ge(c, bandwidths, n, total, lo + 1);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t r = rem_of(c, bandwidths, i, total);
            if (r > lo) {
                len[i]++;
            } else if (r == lo && need > 0) {
                len[i]++;
                need--;
            }
        }
    }

    size_t o = 0;
    for (uint32_t i = 0; i < n; i++) {
        off[i] = o;
        o += len[i];
    }
    return 0;
}

uint32_t mp__share_parts(size_t len, uint32_t part_elems) {
    if (part_elems == 0)
        part_elems = MP_PART_ELEMS_DEFAULT;
    uint64_t p = (uint64_t)len / part_elems + ((uint64_t)len % part_elems != 0);
    return p > UINT32_MAX ? UINT32_MAX : (uint32_t)p;
}

uint32_t mp__share_part_elems(size_t count, uint32_t n) {
    uint64_t even = (uint64_t)count / (n ? n : 1) / MP_PARTS_PER_SHARE;
    uint32_t pe = MP_PART_ELEMS_DEFAULT;
    while (pe > MP_PART_ELEMS_MIN && pe > even)
        pe /= 2;
    return pe;
}

uint8_t mp__share_part_layout(uint32_t part_elems) {
    uint8_t l = 0;
    while (part_elems >= MP_PART_ELEMS_MIN &&
           part_elems < MP_PART_ELEMS_DEFAULT) {
        part_elems *= 2;
        l++;
    }
    return part_elems == MP_PART_ELEMS_DEFAULT ? l : 0;
}

uint32_t mp__share_median(uint32_t n, const uint32_t *in) {
    uint32_t sorted[MP_GROUP_MAX];
    if (n == 0 || n > MP_GROUP_MAX)
        return 1;
    for (uint32_t i = 0; i < n; i++) { /* insertion sort: n <= 64 */
        uint32_t v = in[i] ? in[i] : 1u, k = i;
        while (k > 0 && sorted[k - 1] > v) {
            sorted[k] = sorted[k - 1];
            k--;
        }
        sorted[k] = v;
    }
    return sorted[(n - 1) / 2];
}

void mp__share_bandwidth_bound(uint32_t n, const uint32_t *in, uint32_t *out) {
    if (n == 0 || n > MP_GROUP_MAX)
        return;
    uint64_t cap = (uint64_t)mp__share_median(n, in) * MP_BW_SPREAD;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = in[i] ? in[i] : 1u;
        out[i] = (uint32_t)(v < cap ? v : cap);
    }
}
