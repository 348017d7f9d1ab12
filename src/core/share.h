/* SPDX-License-Identifier: MIT */
/*
 * share.h - how a vector is partitioned among group members and into parts.
 * Pure integer math, computed identically by every member.
 */
#ifndef MP_CORE_SHARE_H
#define MP_CORE_SHARE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Splits count elements into n contiguous shares with sizes proportional to
 * bandwidths[i] (0 is treated as 1), largest-remainder rounding, ties to the
 * lower index. off[i], len[i] receive share i. Returns 0, or -1 if n == 0
 * or a pointer is NULL. Exact for any count and bandwidths (no overflow).
 * sum(len) == count and off[i+1] == off[i] + len[i] always hold.
 */
int mp__share_split(uint32_t n, const uint32_t *bandwidths, size_t count,
                    size_t *off, size_t *len);

/* How far an announced bandwidth may exceed the group's median. */
#define MP_BW_SPREAD 16u

/*
 * Bounds announced bandwidths before they decide shares: 0 becomes 1, and
 * nothing exceeds MP_BW_SPREAD times the lower median of the n values, so
 * one member claiming an absurd bandwidth cannot take (and then sit on)
 * nearly the whole vector. Pure integer math: every member gets the same
 * result from the same roster. n <= MP_GROUP_MAX.
 */
void mp__share_bandwidth_bound(uint32_t n, const uint32_t *in, uint32_t *out);

/* The lower median of n values (n 1..MP_GROUP_MAX, 0 treated as 1). */
uint32_t mp__share_median(uint32_t n, const uint32_t *v);

/* Parts in a share of len elements with parts of part_elems (ceil).
 * part_elems 0 means MP_PART_ELEMS_DEFAULT; saturates at UINT32_MAX. */
uint32_t mp__share_parts(size_t len, uint32_t part_elems);

/* The part size of a group of n members averaging count values: the
 * largest power of two from MP_PART_ELEMS_MIN to MP_PART_ELEMS_DEFAULT
 * that still cuts an even share (count / n) into MP_PARTS_PER_SHARE parts,
 * so that a pair of members exchanges several parts each way (they can be
 * spread over several data connections, and a reducer's first results go
 * back while the last parts still arrive). Depends only on what every
 * member of the group knows (count is in the group key, n in the roster):
 * all members get the same size. n 0 is taken as 1. */
uint32_t mp__share_part_elems(size_t count, uint32_t n);

/* The data header's layout byte for parts of part_elems elements:
 * log2(MP_PART_ELEMS_DEFAULT / part_elems), 0 for the default (and for
 * sizes the rule does not make). */
uint8_t mp__share_part_layout(uint32_t part_elems);

#endif
