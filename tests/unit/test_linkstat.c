/* SPDX-License-Identifier: MIT */
/*
 * test_linkstat.c - tests of the link measurements (core/linkstat.c) and of
 * what the group machine (core/group.c) and the round machine
 * (core/round.c) make of them: the robust high estimate (median + K * MAD)
 * ignores a few outliers; a silence limit follows the measured part time
 * within [MP_LINK_FLOOR_MS, configured] and stays the configured value
 * until enough parts were measured; the JOIN_ACK wait follows the round
 * trip; the upload estimate needs reports from half of the mates and one
 * lying mate cannot move it; a group drops a silent member at the limit
 * the driver set, not before, and exactly as before when none is set; a
 * deadline only moves earlier; a JOIN announces the measured bandwidth
 * only below the configured one. Deterministic; no clock.
 */
#include "core/linkstat.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "core/round.h"
#include "test_util.h"

static void test_median(void) {
    uint32_t v[] = {5, 1, 9, 3, 7};
    CHECK(mp__link_median(v, 5) == 5, "median of 5");
    CHECK(mp__link_median(v, 4) == 3, "lower median of 4");
    CHECK(mp__link_median(v, 0) == 0, "median of none");
    CHECK(v[0] == 5 && v[4] == 7, "input unchanged");

    mp_ring_t r;
    memset(&r, 0, sizeof r);
    uint32_t hi = 1;
    CHECK(!mp__link_ring_hi(&r, &hi), "empty ring has no estimate");
    for (int i = 0; i < 14; i++)
        mp__link_ring_add(&r, 100 + (uint32_t)(i % 3)); /* 100..102 */
    mp__link_ring_add(&r, 100000);                      /* two outliers */
    mp__link_ring_add(&r, 90000);
    CHECK(mp__link_ring_hi(&r, &hi) && hi >= 101 && hi <= 110,
          "outliers ignored: hi %u", hi);
    for (int i = 0; i < 40; i++)
        mp__link_ring_add(&r, 7);
    CHECK(r.n == MP_LINK_SAMPLES && mp__link_ring_hi(&r, &hi) && hi == 7,
          "old samples leave the ring: hi %u", hi);
    mp_ring_t big;
    memset(&big, 0, sizeof big);
    mp__link_ring_add(&big, 1u << 30);
    mp__link_ring_add(&big, 1u << 31);
    mp__link_ring_add(&big, 3u << 30); /* 2^31 + 4 * 2^30 > 2^32 */
    CHECK(mp__link_ring_hi(&big, &hi) && hi == UINT32_MAX, "saturates: %u", hi);
}

static void test_limits(void) {
    mp_link_t l;
    memset(&l, 0, sizeof l);
    CHECK(mp__link_silence_ms(&l, 262144, 5000) == 5000,
          "unmeasured: configured");
    CHECK(mp__link_ack_ms(&l, 1000) == 1000, "no round trip: configured");
    uint64_t ms = 0;
    CHECK(!mp__link_bytes_ms(&l, 1 << 20, &ms), "no estimate");
    /* a fast link: 256 KiB parts 2 or 3 ms apart, round trips of 1 ms */
    for (int i = 0; i < 8; i++) {
        mp__link_part(&l, 262144, 2 + (uint64_t)(i & 1));
        mp__link_rtt(&l, 1);
    }
    mp__link_part(&l, 100, 5000); /* under 1 KiB: not a sample */
    uint32_t lim = mp__link_silence_ms(&l, 262144, 5000);
    CHECK(lim >= MP_LINK_FLOOR_MS && lim <= MP_LINK_FLOOR_MS + 20,
          "fast link: %u ms", lim);
    CHECK(mp__link_silence_ms(&l, 262144, 300) == 300,
          "never above the configured value");
    CHECK(mp__link_silence_ms(&l, 262144, 0) == 0, "0 stays off");
    CHECK(mp__link_ack_ms(&l, 5000) == MP_LINK_FLOOR_MS, "ack wait %u",
          mp__link_ack_ms(&l, 5000));
    CHECK(mp__link_ack_ms(&l, 600) == 600, "ack wait bounded: %u",
          mp__link_ack_ms(&l, 600));

    /* a 200 ms link at 5 Mbit/s: 256 KiB take about 420 ms */
    mp_link_t s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 8; i++) {
        mp__link_part(&s, 262144, 420 + (uint64_t)(i * 5));
        mp__link_rtt(&s, 200 + (uint64_t)i);
    }
    CHECK(mp__link_bytes_ms(&s, 262144, &ms) && ms >= 620 && ms <= 800,
          "slow link: a part in %llu ms", (unsigned long long)ms);
    lim = mp__link_silence_ms(&s, 262144, 5000);
    CHECK(lim >= MP_LINK_FLOOR_MS + 2 * 620 && lim < 5000,
          "slow link: limit %u ms", lim);
    CHECK(mp__link_silence_ms(&s, 262144, 1500) == 1500, "capped");
    CHECK(mp__link_ack_ms(&s, 5000) >= 4 * 200 + 250 &&
              mp__link_ack_ms(&s, 5000) < 5000,
          "ack wait slow %u", mp__link_ack_ms(&s, 5000));
}

static void test_uplink(void) {
    CHECK(mp__link_rate_kbps(65535, 10) == 0, "too few bytes");
    CHECK(mp__link_rate_kbps(1 << 20, 0) == 0, "no duration");
    CHECK(mp__link_rate_kbps(1000000, 1000) == 8000, "8 Mbit/s: %u",
          mp__link_rate_kbps(1000000, 1000));

    /* 7 mates, 128 KiB owed to each */
    uint64_t owed[8];
    for (int i = 0; i < 8; i++)
        owed[i] = i == 0 ? 0 : 131072;
    mp_uplink_t u;
    memset(&u, 0, sizeof u);
    CHECK(mp__link_up_mbps(&u) == 0, "nothing measured");
    mp__link_up_open(&u, 7, 8, owed);
    CHECK(!mp__link_up_report(&u, 6, 1, 700), "other round");
    CHECK(!mp__link_up_report(&u, 7, 1, 0), "zero");
    CHECK(mp__link_up_report(&u, 7, 1, 700), "report");
    CHECK(!mp__link_up_report(&u, 7, 1, 700), "twice");
    CHECK(!mp__link_up_report(&u, 7, 8, 700), "past the roster");
    CHECK(!mp__link_up_report(&u, 7, 0, 700), "nothing owed to self");
    CHECK(mp__link_up_report(&u, 7, 2, 710), "report 2");
    CHECK(mp__link_up_report(&u, 7, 3, 690), "report 3");
    CHECK(mp__link_up_mbps(&u) == 0, "three of seven do not count");
    mp__link_up_close(&u);
    CHECK(mp__link_up_mbps(&u) == 0, "nor once closed");
    /* all at once: 7 x 128 KiB in about 1.5 s (each mate saw ~0.7 Mbit/s):
     * 4.9 Mbit/s, whatever one liar says */
    mp__link_up_open(&u, 8, 8, owed);
    for (uint32_t i = 1; i <= 5; i++)
        (void)mp__link_up_report(&u, 8, i, 700 - i);
    CHECK(mp__link_up_mbps(&u) == 5, "the open round counts: %u",
          mp__link_up_mbps(&u));
    (void)mp__link_up_report(&u, 8, 6, 1); /* a liar: 1 kbit/s */
    CHECK(mp__link_up_mbps(&u) == 5, "a slow liar is left out: %u",
          mp__link_up_mbps(&u));
    mp__link_up_close(&u);
    CHECK(mp__link_up_mbps(&u) == 5, "closed: %u", mp__link_up_mbps(&u));
    /* one after another: mate k got its 128 KiB after k * 0.21 s, so it
     * saw 5 / k Mbit/s; the upload took 1.47 s: 5 Mbit/s again */
    mp_uplink_t t;
    memset(&t, 0, sizeof t);
    mp__link_up_open(&t, 9, 8, owed);
    for (uint32_t k = 1; k <= 7; k++)
        (void)mp__link_up_report(&t, 9, k, 5000 / k);
    mp__link_up_close(&t);
    CHECK(mp__link_up_mbps(&t) == 6,
          "in turn: %u (the second longest time: 7 / 6 of the rate)",
          mp__link_up_mbps(&t));
    /* two mates: never enough reports (one could lie) */
    mp_uplink_t two;
    memset(&two, 0, sizeof two);
    mp__link_up_open(&two, 3, 3, owed);
    CHECK(mp__link_up_report(&two, 3, 1, 5000) &&
              mp__link_up_report(&two, 3, 2, 5000),
          "reports of two");
    mp__link_up_close(&two);
    CHECK(mp__link_up_mbps(&two) == 0, "two reports: none");
    /* the median of the rounds: fast rounds take over after a majority */
    for (uint64_t g = 10; g <= 12; g++) {
        mp__link_up_open(&u, g, 8, owed);
        for (uint32_t i = 1; i <= 7; i++)
            (void)mp__link_up_report(&u, g, i, 14285);
    }
    mp__link_up_close(&u);
    CHECK(mp__link_up_mbps(&u) == 100, "three fast rounds of five: %u",
          mp__link_up_mbps(&u));
}

/* A group of 3 (self 0) over 3 * 65536 floats: one part per share. */
static mp_group_t *group3(float *v, uint64_t deadline) {
    static const double w[3] = {1, 1, 1};
    static const uint32_t bw[3] = {1, 1, 1};
    mp_group_cfg_t c = {.round_id = 1,
                        .n = 3,
                        .self = 0,
                        .weights = w,
                        .bandwidths = bw,
                        .values = v,
                        .count = 3 * 65536,
                        .now_ms = 1000,
                        .deadline_ms = deadline,
                        .peer_timeout_ms = 5000};
    mp_group_t *g = NULL;
    CHECK(mp__group_new(&c, &g) == MOSHPIT_OK, "group");
    return g;
}

static void test_group(void) {
    float *v = calloc(3 * 65536, sizeof(float));
    if (v == NULL)
        return;
    /* unset: a silent member goes at peer_timeout_ms, as before */
    mp_group_t *g = group3(v, 100000);
    CHECK(mp__group_next_wakeup(g) == 6000, "wakeup %llu",
          (unsigned long long)mp__group_next_wakeup(g));
    mp__group_on_tick(g, 5999);
    CHECK(mp__group_member_alive(g, 1), "alive before 5 s");
    mp__group_on_tick(g, 6000);
    CHECK(!mp__group_member_alive(g, 1) && !mp__group_member_alive(g, 2),
          "dropped at 5 s");
    mp__group_free(g);

    /* set: member 1 at 600 ms, member 2 above the configured value */
    g = group3(v, 100000);
    mp__group_set_silence(g, 1, 600);
    mp__group_set_silence(g, 2, 99999);
    mp__group_set_silence(g, 0, 1); /* self: ignored */
    CHECK(mp__group_next_wakeup(g) == 1600, "wakeup at 1.6 s");
    mp__group_on_tick(g, 1599);
    CHECK(mp__group_member_alive(g, 1), "alive before its limit");
    mp__group_on_tick(g, 1600);
    CHECK(!mp__group_member_alive(g, 1), "dropped at its limit");
    CHECK(mp__group_member_alive(g, 2), "the other waits longer");
    mp__group_on_tick(g, 5999);
    CHECK(mp__group_member_alive(g, 2), "capped at 5 s, not before");
    mp__group_on_tick(g, 6000);
    CHECK(!mp__group_member_alive(g, 2), "dropped at 5 s");
    mp__group_free(g);

    /* gathers: member 1's scatter part arrived, its gather is owed: its
     * limit plus the largest live one (member 2's 800 ms) */
    g = group3(v, 100000);
    mp__group_set_silence(g, 1, 600);
    mp__group_set_silence(g, 2, 800);
    CHECK(mp__group_on_part(g, 1100, 1, MP_PART_SCATTER, 0, 0, v, 65536, 1) ==
              MP_PART_OK,
          "scatter from 1");
    mp__group_on_tick(g, 1100 + 1399);
    CHECK(mp__group_member_alive(g, 1), "gather wait not over");
    mp__group_on_tick(g, 1100 + 1400);
    CHECK(!mp__group_member_alive(g, 1), "gather wait over at 1.4 s");
    mp__group_free(g);

    /* the deadline only moves earlier */
    g = group3(v, 9000);
    mp__group_set_deadline(g, 20000);
    CHECK(mp__group_next_wakeup(g) == 6000, "not later");
    mp__group_set_silence(g, 1, 4000);
    mp__group_set_silence(g, 2, 4000);
    mp__group_set_deadline(g, 3000);
    CHECK(mp__group_next_wakeup(g) == 3000, "earlier");
    mp__group_on_tick(g, 3000);
    CHECK(mp__group_done(g), "done at the new deadline");
    mp__group_free(g);

    g = group3(v, 100000);
    CHECK(mp__group_part_bytes(g, 1) == 65536 * 4, "part bytes");
    CHECK(mp__group_bytes_from(g, 1) == 2 * 65536 * 4, "bytes from 1");
    CHECK(mp__group_bytes_from(g, 0) == 0, "none from self");
    CHECK(mp__group_share_bytes(g, 2) == 65536 * 4, "share bytes");
    CHECK(!mp__group_is_slow(g), "equal bandwidths: nobody slow");
    mp__group_free(g);
    free(v);
}

static void test_round_bw(void) {
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    cfg.bandwidth_mbps = 100;
    mp_agg_t agg;
    memset(&agg, 0, sizeof agg);
    uint8_t self[MP_ID_BYTES] = {1};
    mp_grid_t grid;
    memset(&grid, 0, sizeof grid);
    mp_rnd_cfg_t rc;
    mp__rnd_cfg_of(&rc, &cfg, &agg, self, &grid, 1, 1);
    mp_rnd_t *rm = NULL;
    CHECK(mp__rnd_new(&rc, &rm) == MOSHPIT_OK, "round machine");
    if (rm == NULL)
        return;
    CHECK(mp__rnd_bandwidth(rm) == 100, "configured");
    mp__rnd_set_bandwidth(rm, 5);
    CHECK(mp__rnd_bandwidth(rm) == 5, "measured below it");
    mp__rnd_set_bandwidth(rm, 400);
    CHECK(mp__rnd_bandwidth(rm) == 100, "the configured value bounds it");
    mp__rnd_set_bandwidth(rm, 0);
    CHECK(mp__rnd_bandwidth(rm) == 100, "none measured");
    mp__rnd_free(rm);
}

/* The rule that restarts BBR on a data connection whose model collapsed
 * (engine_streams.c): below half of the fading best is stale. */
static void test_model_stale(void) {
    uint64_t best = 0;
    CHECK(!mp__link_model_stale(&best, 1750000), "the first estimate");
    CHECK(best == 1750000, "is the best: %llu", (unsigned long long)best);
    /* shares of a busy link move up and down: not stale */
    CHECK(!mp__link_model_stale(&best, 1200000) &&
              !mp__link_model_stale(&best, 2000000) &&
              !mp__link_model_stale(&best, 1100000),
          "estimates within half of the best");
    CHECK(best == 1750000, "faded and raised: %llu", (unsigned long long)best);
    /* the tail of a lossy round left 0.6 Mbit/s of 14: stale, and the best
     * stays for the rounds after */
    CHECK(mp__link_model_stale(&best, 75000), "a collapsed estimate");
    CHECK(best == 765625, "the best faded and halved: %llu",
          (unsigned long long)best);
    CHECK(!mp__link_model_stale(&best, 1500000), "back after the restart");
    CHECK(best == 1500000, "and the best with it: %llu",
          (unsigned long long)best);
    /* a path that became slower for good: stale once for a quarter of
     * its speed, twice for a tenth, then taken as it is */
    int quarter = 0, tenth = 0;
    best = 1000000;
    for (int r = 0; r < 12; r++)
        quarter += mp__link_model_stale(&best, 250000);
    CHECK(quarter == 1, "%d restarts for a quarter", quarter);
    CHECK(best >= 250000 && best < 500000, "the best follows it: %llu",
          (unsigned long long)best);
    best = 1000000;
    for (int r = 0; r < 12; r++)
        tenth += mp__link_model_stale(&best, 100000);
    CHECK(tenth >= 2 && tenth <= 3, "%d restarts for a tenth", tenth);
    /* no estimate (0) is never stale and leaves the best */
    best = 0;
    CHECK(!mp__link_model_stale(&best, 0) && best == 0, "zeros");
    best = UINT64_MAX;
    CHECK(!mp__link_model_stale(&best, 0) && best == UINT64_MAX,
          "0 against a huge best");
    CHECK(mp__link_model_stale(&best, 1), "1 against a huge best");
    CHECK(!mp__link_model_stale(&best, UINT64_MAX), "and no overflow");
}

/* How many data connections a loss-based link needs
 * (mp__link_streams_for_loss). */
static void test_streams_for_loss(void) {
    /* RTT 100 ms, 1% loss: about 1.4 Mbit/s a connection, 4 carry 5.7 */
    mp_link_loss_t l = {2000, 20, 100000, 1448};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 8, "lossy long link: %u",
          mp__link_streams_for_loss(4, 8, &l));
    CHECK(mp__link_streams_for_loss(8, 8, &l) == 8, "at the cap");
    CHECK(mp__link_streams_for_loss(6, 8, &l) == 8, "doubled up to the cap");
    CHECK(mp__link_streams_for_loss(1, 16, &l) == 2, "one step at a time");
    /* RTT 20 ms, 1%: 7 Mbit/s a connection, still below the target */
    l.rtt_us = 20000;
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 8, "RTT 20 ms: %u",
          mp__link_streams_for_loss(4, 8, &l));
    /* a short path: 1 ms and 1% give 141 Mbit/s on one: not loss-bound */
    l.rtt_us = 1000;
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "RTT 1 ms");
    /* 0.01%: 71 Mbit/s a connection at 20 ms, 4 carry 283 */
    l = (mp_link_loss_t){100000, 10, 20000, 1448};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "little loss");
    CHECK(mp__link_streams_for_loss(1, 8, &l) == 2, "little loss, one");
    /* too few samples: no change */
    l = (mp_link_loss_t){499, 50, 100000, 1448};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "few segments");
    l = (mp_link_loss_t){100000, 4, 100000, 1448};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "few sent again");
    /* nonsense from a kernel, or none: no change */
    l = (mp_link_loss_t){1000, 2000, 100000, 1448};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "more sent again");
    l = (mp_link_loss_t){2000, 20, 0, 1448};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "no round trip");
    l = (mp_link_loss_t){2000, 20, 100000, 0};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "no segment size");
    CHECK(mp__link_streams_for_loss(0, 8, &l) == 0, "none");
    l = (mp_link_loss_t){UINT64_MAX, UINT64_MAX / 2, 1, 65535};
    CHECK(mp__link_streams_for_loss(4, 8, &l) == 4, "huge counts");
}

int main(void) {
    test_streams_for_loss();
    test_model_stale();
    test_median();
    test_limits();
    test_uplink();
    test_group();
    test_round_bw();
    return test_summary("test_linkstat");
}
