/* SPDX-License-Identifier: MIT */
/*
 * linkstat.h - what a peer measured of its links, and the deadlines that
 * follow from it (sans-IO: samples and the time are passed in).
 *
 * Per peer (mp_link_t): round trips (SWIM PING -> ACK, JOIN -> JOIN_ACK)
 * and the cost of its data parts (the time between two scatter parts
 * from it, or from the group's start to its first, per KiB of the part),
 * each a ring of the newest MP_LINK_SAMPLES samples. A high estimate is
 * median + MP_LINK_K * MAD (median absolute deviation) of a ring, so a few
 * outliers neither pull it down nor up. From them: the silence after which
 * a group member is taken for dead (mp__link_silence_ms) and the time to
 * expect for a number of bytes from it (mp__link_bytes_ms); both need
 * MP_LINK_MIN_SAMPLES part samples, else the configured value holds.
 *
 * This peer's own upload (mp_uplink_t): at the end of a round every mate
 * reports in its DONE the rate at which this peer's scatter parts reached
 * it (from its group start to the last part); the round's estimate is the
 * bytes over the time the upload took (mp__link_up_close), taken once at
 * least half of the mates (and 3 or more) reported; the rate announced in JOINs
 * is the median of the newest MP_LINK_UP_ROUNDS such estimates
 * (mp__link_up_mbps).
 */
#ifndef MP_CORE_LINKSTAT_H
#define MP_CORE_LINKSTAT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/group.h"

#define MP_LINK_SAMPLES 16u    /* newest samples kept per ring */
#define MP_LINK_MIN_SAMPLES 3u /* part samples before a limit adapts */
#define MP_LINK_K 4u           /* high estimate: median + K * MAD */
/* Lower bounds: a silence limit and a JOIN_ACK wait never fall below
 * MP_LINK_FLOOR_MS (one lost packet stalls a TCP connection for at least
 * Linux's minimum retransmission timeout of 200 ms, two in a row for 600
 * ms, and an engine thread on a loaded machine can stall for a few
 * hundred ms), a group's deadline is never sooner than
 * MP_LINK_DEADLINE_FLOOR_MS after its start. The configured values stay
 * the upper bounds. */
#define MP_LINK_FLOOR_MS 1000u
#define MP_LINK_DEADLINE_FLOOR_MS 2000u
#define MP_LINK_UP_ROUNDS 5u        /* round estimates of the own upload kept */
#define MP_LINK_UP_MIN_BYTES 65536u /* fewer scatter bytes: no report */
#define MP_LINK_UP_MIN_REPORTS 3u   /* and at least half of the mates */
/* A slow member's paced scatter parts (engine_data.c) wait at most this
 * long for the one before, whatever the measured rate says. */
#define MP_LINK_PACE_MAX_MS 250u

typedef struct mp_ring {
    uint32_t v[MP_LINK_SAMPLES];
    uint32_t n, pos;
} mp_ring_t;

typedef struct mp_link {
    mp_ring_t rtt;  /* ms */
    mp_ring_t cost; /* microseconds per KiB of a part */
} mp_link_t;

typedef struct mp_uplink {
    uint64_t gid;   /* the round whose reports are collected (0: none) */
    uint32_t mates; /* its roster size - 1 */
    uint64_t from;  /* bit i: roster member i reported */
    uint32_t nrep;
    uint64_t bytes[MP_GROUP_MAX];    /* scatter bytes this peer owed member i */
    uint64_t total;                  /* their sum */
    uint32_t t[MP_GROUP_MAX];        /* their reports as times: ms */
    uint32_t est[MP_LINK_UP_ROUNDS]; /* kbit/s, per round */
    uint32_t nest, pos;
} mp_uplink_t;

/* The median of n values (the lower one for even n); 0 for n == 0. v is
 * not changed; n <= 64. */
uint32_t mp__link_median(const uint32_t *v, uint32_t n);
void mp__link_ring_add(mp_ring_t *r, uint32_t v);
/* median + MP_LINK_K * MAD of the ring (saturating); false when empty. */
bool mp__link_ring_hi(const mp_ring_t *r, uint32_t *out);

void mp__link_rtt(mp_link_t *l, uint64_t rtt_ms);
/* A part of bytes from the peer arrived gap_ms after the one before (or
 * after the group started). Parts below 1 KiB are not measured. */
void mp__link_part(mp_link_t *l, uint64_t bytes, uint64_t gap_ms);
/* High estimate of the time for bytes from the peer: one round trip (0 if
 * none measured) plus bytes at the high cost; false with too few part
 * samples. */
bool mp__link_bytes_ms(const mp_link_t *l, uint64_t bytes, uint64_t *ms);
/* The silence after which the peer, owing parts of part_bytes, is taken
 * for dead: MP_LINK_FLOOR_MS + 2 * mp__link_bytes_ms(part_bytes), at most
 * configured; configured itself when that is 0 (off) or unmeasured. */
uint32_t mp__link_silence_ms(const mp_link_t *l, uint64_t part_bytes,
                             uint32_t configured);
/* The ACK wait for a JOIN to the peer: 4 high round trips + 250 ms, at
 * least MP_LINK_FLOOR_MS, at most configured; configured when no round
 * trip was measured. */
uint32_t mp__link_ack_ms(const mp_link_t *l, uint32_t configured);

/* The rate of one mate's scatter parts as a report (kbit/s, at least 1);
 * 0 (no report) below MP_LINK_UP_MIN_BYTES or without a duration. */
uint32_t mp__link_rate_kbps(uint64_t bytes, uint64_t ms);
/* A group of n formed with id gid in which this peer owes member i
 * bytes[i] bytes of scatter parts: collect its mates' reports (the
 * reports of the round before are closed first). */
void mp__link_up_open(mp_uplink_t *u, uint64_t gid, uint32_t n,
                      const uint64_t *bytes);
/* Roster member `member` reports kbps for round gid; false (ignored) if
 * gid is not the round collected, member is out of range or reported
 * already, or kbps is 0. */
bool mp__link_up_report(mp_uplink_t *u, uint64_t gid, uint32_t member,
                        uint32_t kbps);
/* Closes the round collected: with reports from at least half the mates
 * and at least MP_LINK_UP_MIN_REPORTS, its estimate joins the newest
 * estimates: all the bytes owed over the second longest of the reported
 * times (each report of member i gives that time as bytes[i] / rate), so
 * one lying mate moves it no further than an honest one could. Whether
 * the parts went to all at once or one after another, the longest times
 * are when the upload ended. */
void mp__link_up_close(mp_uplink_t *u);
/* The median of the kept estimates (and of the round still collecting,
 * once it has enough reports) in Mbit/s rounded up (at least 1); 0 when
 * none. */
uint32_t mp__link_up_mbps(const mp_uplink_t *u);

/* Whether a congestion control's bandwidth estimate bw of one connection,
 * read at a round's start, is stale: below half of *best, the best read
 * at earlier starts, which fades by an eighth at every call and halves
 * when stale (so a path that became slower for good is taken as it is
 * after one restart for a quarter of its speed, two for a tenth). A
 * fresh estimate raises *best; 0 (no estimate yet) is never stale and
 * changes nothing. */
bool mp__link_model_stale(uint64_t *best, uint64_t bw);

/* What a peer's data connections carry where the congestion control is
 * loss-based (cubic, reno), read from the kernel: segments sent, of them
 * sent again, the smoothed round trip and the segment size, summed (the
 * first two) over the connections to one peer, the round trip the
 * smallest. */
typedef struct mp_link_loss {
    uint64_t segs;
    uint64_t retrans;
    uint32_t rtt_us;
    uint32_t mss;
} mp_link_loss_t;

#define MP_LINK_LOSS_MIN_SEGS 500u    /* fewer segments: no judgement */
#define MP_LINK_LOSS_MIN_RETRANS 5u   /* fewer sent again: no judgement */
#define MP_LINK_LOSS_TARGET_MBPS 100u /* what the connections should carry */

/* How many data connections to one peer are needed, n of them now, at
 * most max: a loss-based connection is held near
 * MSS / RTT x 1.22 / sqrt(p) by its loss rate p (Mathis et al.), and while
 * n of them at that rate carry less than MP_LINK_LOSS_TARGET_MBPS, twice
 * as many (at most max). n itself where the samples are too few or not
 * loss-bound (docs/DESIGN.md, "Data connections"). */
uint32_t mp__link_streams_for_loss(uint32_t n, uint32_t max,
                                   const mp_link_loss_t *l);

#endif
