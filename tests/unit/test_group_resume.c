/* SPDX-License-Identifier: MIT */
/*
 * test_group_resume.c - the group machine's repair of lost parts
 * (core/group.h: mp__group_holds, mp__group_on_have, mp__group_stamp): three
 * machines exchange parts by hand, with chosen parts of member 0 to member 1
 * lost on the way (as in a connection reset). Checks: the receiver's
 * bitmaps say what it lacks; the sender queues again exactly the parts it
 * lost (none stamped after the receiver's last accepted frame, which may
 * still be on the way), a lost gather too after the sender was done (it
 * is not done again until it handed the part out); nothing arrives twice;
 * the round ends with the exact weighted mean at every member; and a HAVE
 * after the deadline or from a dropped member queues nothing. The patience
 * rules: breaks (a few a round, each worth the member's limit once more),
 * and a mate that answers every quiet HAVE with a MARK and sends nothing
 * else is dropped within 1.5 + 3 x 2 of its limits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "test_util.h"

#define N 3
#define COUNT 96
#define PE 8 /* elements per part: 4 parts per share of 32 */

typedef struct net {
    mp_group_t *g[N];
    float v[N][COUNT];
    uint64_t stamp[N][N];    /* last stamp from i to j (the frame counter) */
    uint64_t accepted[N][N]; /* last stamp j accepted from i */
    int dups;
    bool dropped; /* a member may drop another (parts refused) */
    /* parts from 0 to 1 to lose: scatter part index, gather part index */
    int lose_scatter, lose_gather;
} net_t;

static const double W[N] = {1.0, 2.0, 0.5};

static void net_init(net_t *t, uint64_t deadline) {
    memset(t, 0, sizeof(*t));
    uint32_t bw[N] = {1, 1, 1};
    for (uint32_t i = 0; i < N; i++) {
        for (size_t e = 0; e < COUNT; e++)
            t->v[i][e] = (float)(i * 1000 + e) * 0.25f;
        mp_group_cfg_t c = {.round_id = 7,
                            .n = N,
                            .self = i,
                            .weights = W,
                            .bandwidths = bw,
                            .values = t->v[i],
                            .count = COUNT,
                            .part_elems = PE,
                            .now_ms = 0,
                            .deadline_ms = deadline,
                            .peer_timeout_ms = 1000};
        CHECK(mp__group_new(&c, &t->g[i]) == MOSHPIT_OK, "group %u", i);
    }
    t->lose_scatter = t->lose_gather = -1;
}

static void net_free(net_t *t) {
    for (uint32_t i = 0; i < N; i++)
        mp__group_free(t->g[i]);
}

/* Moves parts until nobody hands out anything; returns parts moved. */
static int pump(net_t *t, uint64_t now) {
    int moved = 0;
    for (bool any = true; any;) {
        any = false;
        for (uint32_t i = 0; i < N; i++)
            for (uint32_t j = 0; j < N; j++) {
                mp_send_t s;
                if (i == j || !mp__group_next_send(t->g[i], j, &s))
                    continue;
                any = true;
                moved++;
                uint64_t st = ++t->stamp[i][j];
                mp__group_stamp(t->g[i], j, &s, st);
                if (i == 0 && j == 1 &&
                    ((s.kind == MP_PART_SCATTER &&
                      (int)s.part == t->lose_scatter) ||
                     (s.kind == MP_PART_GATHER &&
                      (int)s.part == t->lose_gather))) {
                    if (s.kind == MP_PART_SCATTER)
                        t->lose_scatter = -1; /* once */
                    else
                        t->lose_gather = -1;
                    continue; /* lost on the way */
                }
                float buf[PE];
                memcpy(buf, s.data, s.count * sizeof(float));
                mp_part_status_t r =
                    mp__group_on_part(t->g[j], now, i, s.kind, s.share, s.part,
                                      buf, s.count, s.wsum);
                t->dups += r == MP_PART_DUP;
                CHECK(r == MP_PART_OK || r == MP_PART_DUP ||
                          (t->dropped && r == MP_PART_FROM_FAILED),
                      "part %u/%u from %u to %u: status %d", s.share, s.part, i,
                      j, (int)r);
                t->accepted[i][j] = st;
            }
    }
    return moved;
}

/* Member 1 tells member 0 what it holds; returns what 0 queued. */
static uint32_t have_1_to_0(net_t *t, uint64_t now, uint64_t upto,
                            uint32_t *unsure) {
    uint8_t sc[16], ga[16];
    size_t sl, gl;
    mp__group_holds(t->g[1], 0, sc, sizeof(sc), &sl, ga, sizeof(ga), &gl);
    CHECK(sl == 1 && gl == 1, "bitmap bytes %zu %zu", sl, gl);
    return mp__group_on_have(t->g[0], now, 1, sc, sl, ga, gl, upto, unsure);
}

static void check_exact(const net_t *t, const char *what) {
    double wsum = W[0] + W[1] + W[2];
    for (uint32_t i = 0; i < N; i++) {
        CHECK(mp__group_done(t->g[i]), "%s: member %u not done", what, i);
        mp_group_result_t r;
        mp__group_result(t->g[i], &r);
        CHECK(r.peers_failed == 0 && r.fraction_averaged == 1.0,
              "%s: member %u dropped %u, averaged %.3f", what, i,
              r.peers_failed, r.fraction_averaged);
        size_t bad = 0;
        for (size_t e = 0; e < COUNT; e++) {
            double m = 0;
            for (uint32_t k = 0; k < N; k++)
                m += W[k] * (double)(k * 1000 + e) * 0.25;
            m /= wsum;
            bad += fabs(t->v[i][e] - m) > 1e-4 * fabs(m) + 1e-6;
        }
        CHECK(bad == 0, "%s: member %u: %zu elements off the mean", what, i,
              bad);
    }
}

/* A scatter part of 0 to 1 is lost: 1 cannot finish that part, 0 waits
 * for its gather; 1's HAVE gets exactly that part sent again. */
static void case_lost_scatter(void) {
    net_t t;
    net_init(&t, 100000);
    t.lose_scatter = 2;
    pump(&t, 10);
    CHECK(!mp__group_done(t.g[0]) && !mp__group_done(t.g[1]),
          "lost scatter: stalled as expected");
    uint8_t sc[16], ga[16];
    size_t sl, gl;
    mp__group_holds(t.g[1], 0, sc, sizeof(sc), &sl, ga, sizeof(ga), &gl);
    CHECK(sc[0] == 0x0b, "lost scatter: bitmap %02x (part 2 missing)", sc[0]);
    /* stamped before the last frame 1 accepted from 0: lost for sure */
    uint32_t unsure = 9;
    uint32_t q = have_1_to_0(&t, 20, t.accepted[0][1], &unsure);
    CHECK(q == 1 && unsure == 0, "lost scatter: queued %u, unsure %u", q,
          unsure);
    /* the same HAVE again queues nothing more */
    q = have_1_to_0(&t, 20, t.accepted[0][1], &unsure);
    CHECK(q == 0, "lost scatter: queued %u twice", q);
    CHECK(mp__group_has_sends(t.g[0]), "lost scatter: a send is ready");
    pump(&t, 30);
    CHECK(mp__group_resent(t.g[0]) == 1 && t.dups == 0,
          "lost scatter: re-sent %u, %d duplicates", mp__group_resent(t.g[0]),
          t.dups);
    check_exact(&t, "lost scatter");
    net_free(&t);
}

/* A gather part of 0 to 1 is lost after 0 handed out everything: 0 is
 * done; 1's HAVE opens it again for that one part. A HAVE whose last
 * accepted frame is older than the lost part leaves it unsure instead. */
static void case_lost_gather(void) {
    net_t t;
    net_init(&t, 100000);
    t.lose_gather = 1;
    pump(&t, 10);
    CHECK(mp__group_done(t.g[0]) && !mp__group_done(t.g[1]),
          "lost gather: 0 done, 1 waiting");
    uint32_t unsure = 0;
    uint32_t q = have_1_to_0(&t, 20, 0, &unsure);
    CHECK(q == 0 && unsure == 1,
          "lost gather: stamp past upto: queued %u, unsure %u", q, unsure);
    CHECK(mp__group_done(t.g[0]), "lost gather: still done");
    q = have_1_to_0(&t, 20, t.stamp[0][1], &unsure);
    CHECK(q == 1 && unsure == 0, "lost gather: queued %u, unsure %u", q,
          unsure);
    CHECK(!mp__group_done(t.g[0]), "lost gather: open again");
    pump(&t, 30);
    CHECK(mp__group_resent(t.g[0]) == 1 && t.dups == 0,
          "lost gather: re-sent %u, %d duplicates", mp__group_resent(t.g[0]),
          t.dups);
    check_exact(&t, "lost gather");
    net_free(&t);
}

/* Past the deadline, or for a dropped member, a HAVE queues nothing. */
static void case_bounds(void) {
    net_t t;
    net_init(&t, 1000);
    t.lose_scatter = 0;
    pump(&t, 10);
    uint32_t unsure;
    CHECK(have_1_to_0(&t, 1000, t.stamp[0][1], &unsure) == 0,
          "HAVE at the deadline queued something");
    CHECK(mp__group_done(t.g[0]) && !mp__group_has_sends(t.g[0]),
          "closed by the deadline");
    net_free(&t);

    net_init(&t, 100000);
    t.lose_scatter = 0;
    pump(&t, 10);
    mp__group_on_member_failed(t.g[0], 20, 1);
    CHECK(have_1_to_0(&t, 30, t.stamp[0][1], &unsure) == 0,
          "HAVE from a dropped member queued something");
    /* a HAVE is due only while parts are expected and after quiet */
    CHECK(!mp__group_have_due(t.g[1], 20, 0), "HAVE due too early");
    CHECK(mp__group_have_due(t.g[1], 10 + 500, 0), "HAVE not due at T/2");
    CHECK(!mp__group_have_due(t.g[1], 10 + 600, 0), "HAVE due twice");
    CHECK(mp__group_have_wakeup(t.g[1]) == 10 + 500 + 500, "HAVE wakeup %llu",
          (unsigned long long)mp__group_have_wakeup(t.g[1]));
    net_free(&t);
}

/* A mate that claims everything lost again and again (a HAVE with empty
 * bitmaps of zeros after each break) gets the parts it is handed again at most
 * MP_GROUP_REPEATS times over in a round, then nothing more. */
static void case_repeat_cap(void) {
    net_t t;
    net_init(&t, 100000);
    pump(&t, 10);
    uint64_t cap = MP_GROUP_REPEATS * (uint64_t)(COUNT / N / PE) * 2;
    uint64_t total = 0;
    uint32_t last = 1;
    for (int k = 0; k < 20; k++) {
        uint32_t unsure = 0;
        const uint8_t none[16] = {0}; /* "I hold nothing of yours" */
        last =
            mp__group_on_have(t.g[0], 20 + (uint64_t)k, 1, none, sizeof(none),
                              none, sizeof(none), UINT64_MAX, &unsure);
        total += last;
        /* handed out (the liar drops them: it is done and takes none) */
        mp_send_t snd;
        while (mp__group_next_send(t.g[0], 1, &snd))
            mp__group_stamp(t.g[0], 1, &snd, ++t.stamp[0][1]);
    }
    CHECK(total > 0 && total <= cap, "parts queued again: %llu (cap %llu)",
          (unsigned long long)total, (unsigned long long)cap);
    CHECK(last == 0, "still queueing after the cap: %u", last);
    net_free(&t);
}

/* A break grants the broken member its own limit once more, no one else's
 * limit moves, events within the limit are one break, a member that stays
 * silent after a break is dropped at twice its limit after it, and the
 * grants stop after MP_GROUP_BREAKS. */
static void case_breaks(void) {
    net_t t;
    net_init(&t, 100000);
    mp_group_t *g = t.g[0];
    mp__group_set_silence(g, 1, 300);
    mp__group_set_silence(g, 2, 300);
    /* nothing arrived from either: at 299 both alive, at 300 both gone
     * without a break; here member 1's connection breaks at 200 */
    CHECK(mp__group_on_break(g, 200, 1), "first break not granted");
    CHECK(!mp__group_on_break(g, 250, 1), "same break granted twice");
    CHECK(!mp__group_on_break(g, 200, 0), "a break of self granted");
    mp__group_on_tick(g, 300);
    CHECK(mp__group_member_alive(g, 1), "member 1 dropped inside its patience");
    CHECK(!mp__group_member_alive(g, 2), "member 2's limit moved");
    mp__group_on_tick(g, 799);
    CHECK(mp__group_member_alive(g, 1), "member 1 dropped before 2 x limit");
    mp__group_on_tick(g, 800);
    CHECK(!mp__group_member_alive(g, 1),
          "member 1 still alive at 2 x limit after the break");
    CHECK(!mp__group_on_break(g, 900, 1), "a dropped member granted");
    net_free(&t);

    net_init(&t, 100000);
    g = t.g[0];
    mp__group_set_silence(g, 1, 300);
    uint32_t granted = 0;
    for (uint64_t at = 100; at < 100 + 10 * 301; at += 301) {
        granted += mp__group_on_break(g, at, 1) ? 1u : 0u;
        mp__group_heard(g, at, 1); /* it keeps talking between breaks */
    }
    CHECK(granted == MP_GROUP_BREAKS, "%u breaks granted (cap %u)", granted,
          MP_GROUP_BREAKS);
    net_free(&t);
}

/* A pause of the driver (its process stopped): every member's silence
 * counts from the pause's end, so none is dropped for the time nothing
 * could be read; one that stays silent afterwards still is. */
static void case_pause(void) {
    net_t t;
    net_init(&t, 100000);
    mp_group_t *g = t.g[0];
    mp__group_set_silence(g, 1, 300);
    mp__group_set_silence(g, 2, 300);
    mp__group_heard(g, 100, 1);
    mp__group_pause(g, 2000);
    mp__group_pause(NULL, 5); /* no group: nothing */
    mp__group_on_tick(g, 2250);
    CHECK(mp__group_member_alive(g, 1) && mp__group_member_alive(g, 2),
          "a member dropped for the silence of a pause");
    mp__group_on_tick(g, 2299);
    CHECK(mp__group_member_alive(g, 2), "member 2 dropped before its limit");
    mp__group_on_tick(g, 2300);
    CHECK(!mp__group_member_alive(g, 2),
          "member 2 (silent from 0, then a pause of 2000) alive at 2300");
    CHECK(mp__group_member_alive(g, 1), "member 1 (heard at 100) dropped");
    mp__group_on_tick(g, 2400);
    CHECK(!mp__group_member_alive(g, 1),
          "member 1 (heard at 100, then a pause of 2000) alive at 2400");
    net_free(&t);
}

/* A MARK flood: member 1 sends no part and answers every quiet HAVE of
 * member 0 with a MARK after reply_ms, as the engine drives the machine
 * (engine_resume.c: mp__group_have_due then mp__group_quiet for a quiet
 * HAVE, mp__group_on_mark for a MARK). Without the flood a silent member
 * is dropped after 1.5 limits (the quiet HAVE's one restart); each MARK
 * may grant a break, at most MP_GROUP_BREAKS, each worth 2 limits, so it
 * must be dropped within 1.5 + 3 x 2 limits of its last part
 * (docs/SECURITY.md), long before the deadline. If a MARK restarted the
 * silence clock, or let the next quiet HAVE restart it, it never was. */
static uint64_t mark_flood(uint64_t lim, uint64_t reply_ms) {
    net_t t;
    net_init(&t, 100000);
    mp_group_t *g = t.g[0];
    mp__group_set_silence(g, 1, lim);
    uint64_t mark_at = UINT64_MAX, end = 0;
    uint32_t marks = 0;
    for (uint64_t now = 1; now < 100000; now++) {
        if (mp__group_have_due(g, now, 1)) {
            mp__group_quiet(g, now, 1);
            if (mark_at == UINT64_MAX)
                mark_at = now + reply_ms;
        }
        if (now >= mark_at) {
            mp__group_on_mark(g, now, 1);
            mark_at = UINT64_MAX;
            marks++;
        }
        mp__group_on_tick(g, now);
        if (!mp__group_member_alive(g, 1)) {
            end = now;
            break;
        }
    }
    printf("  MARK flood, limit %llu ms, each MARK %llu ms after the HAVE: "
           "dropped at %llu ms after %u MARKs (bound %llu)\n",
           (unsigned long long)lim, (unsigned long long)reply_ms,
           (unsigned long long)end, marks,
           (unsigned long long)(lim * 3 / 2 + MP_GROUP_BREAKS * 2 * lim));
    net_free(&t);
    return end;
}

static void case_mark_flood(void) {
    const uint64_t lim = 300;
    const uint64_t bound = lim * 3 / 2 + MP_GROUP_BREAKS * 2 * lim;
    const uint64_t replies[] = {1, 40, 149, 290};
    for (size_t k = 0; k < sizeof(replies) / sizeof(replies[0]); k++) {
        uint64_t end = mark_flood(lim, replies[k]);
        CHECK(end != 0 && end <= bound,
              "a mate answering each quiet HAVE with a MARK %llu ms later "
              "was dropped at %llu ms (bound %llu)",
              (unsigned long long)replies[k], (unsigned long long)end,
              (unsigned long long)bound);
    }

    /* a new part lets a quiet HAVE restart the clock once more: a mate
     * that is slow but sends is kept */
    net_t t;
    net_init(&t, 100000);
    mp_group_t *g = t.g[0];
    mp__group_set_silence(g, 1, lim);
    CHECK(mp__group_have_due(g, 150, 1), "no HAVE after half the limit");
    mp__group_quiet(g, 150, 1);
    mp__group_on_tick(g, 439);
    CHECK(mp__group_member_alive(g, 1), "dropped within the quiet restart");
    mp_send_t s;
    CHECK(mp__group_next_send(t.g[1], 0, &s), "member 1 has nothing for 0");
    float buf[PE];
    memcpy(buf, s.data, s.count * sizeof(float));
    CHECK(mp__group_on_part(g, 440, 1, s.kind, s.share, s.part, buf, s.count,
                            s.wsum) == MP_PART_OK,
          "part refused");
    CHECK(mp__group_have_due(g, 590, 1), "no HAVE after the part");
    mp__group_quiet(g, 590, 1);
    CHECK(mp__group_have_due(g, 740, 1), "no HAVE again");
    mp__group_quiet(g, 740, 1); /* no part since: no restart */
    mp__group_on_tick(g, 800);
    CHECK(mp__group_member_alive(g, 1),
          "a quiet HAVE after a new part did not restart the clock");
    mp__group_on_tick(g, 890);
    CHECK(!mp__group_member_alive(g, 1),
          "a second quiet HAVE without a part restarted the clock");
    net_free(&t);
}

/* Member 2 dropped member 1 (its connections broke for longer than its
 * patience there) while member 0 kept it: 0's values of share 2 are the
 * mean of 0 and 2 only, so 0 must not count them as averaged with nobody
 * dropped. Member 1 never gets 2's contribution and keeps share 1 local;
 * at the deadline 0 holds share 0 averaged over all three, share 1 local
 * and share 2 over two: a third averaged (two thirds before this rule). */
static void case_uneven_drop(void) {
    net_t t;
    net_init(&t, 100000);
    t.dropped = true;
    mp__group_on_member_failed(t.g[2], 5, 1);
    pump(&t, 10);
    mp__group_on_tick(t.g[0], 100000);
    mp_group_result_t r;
    mp__group_result(t.g[0], &r);
    CHECK(mp__group_done(t.g[0]), "member 0 not done");
    CHECK(r.peers_failed == 0 && r.group_size == N,
          "member 0 dropped %u, group %u", r.peers_failed, r.group_size);
    CHECK(fabs(r.fraction_averaged - 1.0 / 3) < 0.01,
          "member 0 reports %.3f averaged after member 2 left out 1",
          r.fraction_averaged);
    net_free(&t);
}

int main(void) {
    case_breaks();
    case_pause();
    case_mark_flood();
    case_uneven_drop();
    case_repeat_cap();
    case_lost_scatter();
    case_lost_gather();
    case_bounds();
    return test_summary("test_group_resume");
}
