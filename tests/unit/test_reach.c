/* SPDX-License-Identifier: MIT */
/*
 * test_reach.c - when an engine dials once more a member it gave up
 * dialling (mp__engine_renew_due, docs/DESIGN.md "Reachability asked
 * again"), with the member's record kept by the real membership machine
 * (src/core/swim.c) fed the updates of the two switches at once that
 * test_netns_reach once failed on: peer 1 (this machine) turned
 * outbound-only while peer 2 still was, so its table entry for peer 2 is
 * dead ("outbound-only, like us"); then peer 2 turned dialable and took a
 * new incarnation. The engine asks the rule on every membership event
 * and once a second; the rule before asked only on a renewal
 * (MP_SWIM_EV_RENEWED), which a record held suspect or dead never gives.
 *
 * Pass rule: peer 2's new record makes the rule dial it whether this
 * machine held it alive (EV_RENEWED), suspect (EV_ALIVE, no EV_RENEWED)
 * or dead (EV_ALIVE), and when the renewal came during a dial that then
 * got no answer; it does not while the record is as old as the one
 * the entry gave up at, once it dialled at that incarnation, for a member
 * that left, for a live session, for a dead or left record or one without
 * an address, and for an entry that is merely outbound-only (it dials us)
 * while this peer is dialable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/engine.h"
#include "test_util.h"

#define SELF 1 /* peer 1: outbound-only now */
#define BOOT 0 /* peer 0: dialable, the only session peer 1 has */
#define FWD 2  /* peer 2: outbound-only, then dialable */

static void make_id(int i, uint8_t id[MP_SWIM_ID_BYTES]) {
    memset(id, 0, MP_SWIM_ID_BYTES);
    id[0] = (uint8_t)(0x40 + i);
    id[31] = (uint8_t)i;
}

static mp_swim_t *machine(void) {
    mp_swim_config_t c;
    mp__swim_config_default(&c);
    uint8_t id[MP_SWIM_ID_BYTES];
    make_id(SELF, id);
    mp_swim_t *sw = NULL;
    CHECK(mp__swim_new(&c, id, "tcp://10.77.0.2:4000", 7, 0, &sw) ==
                  MOSHPIT_OK &&
              sw != NULL,
          "swim machine");
    return sw;
}

/* Gossip from peer 0 that `who` is in `state` at `inc`. */
static void hear(mp_swim_t *sw, uint64_t now, int who, uint8_t state,
                 uint32_t inc) {
    mp_swim_update_t u;
    memset(&u, 0, sizeof u);
    make_id(who, u.id);
    u.state = state;
    u.inc = inc;
    if (state == MP_SWIM_ALIVE) {
        u.has_addr = 1;
        snprintf(u.addr, sizeof u.addr, "tcp://10.77.0.%d:4000",
                 who == FWD ? 201 : who + 1);
    }
    uint8_t from[MP_SWIM_ID_BYTES];
    make_id(BOOT, from);
    mp__swim_absorb(sw, now, from, &u, 1);
}

/* Drains the machine's events; returns how many were of `type` about
 * peer 2. */
static int events(mp_swim_t *sw, mp_swim_event_type_t type) {
    mp_swim_event_t ev;
    uint8_t id[MP_SWIM_ID_BYTES];
    make_id(FWD, id);
    int n = 0;
    while (mp__swim_poll_event(sw, &ev))
        n += ev.type == type && memcmp(ev.id, id, MP_SWIM_ID_BYTES) == 0;
    mp_swim_out_t *out = malloc(sizeof *out);
    if (out != NULL) {
        while (mp__swim_poll_send(sw, out))
            ;
        free(out);
    }
    return n;
}

static mp_swim_member_t record(mp_swim_t *sw) {
    mp_swim_member_t m;
    uint8_t id[MP_SWIM_ID_BYTES];
    make_id(FWD, id);
    memset(&m, 0, sizeof m);
    CHECK(mp__swim_lookup(sw, id, &m), "peer 2 is known");
    return m;
}

/* Peer 1's table entry for peer 2 once peer 1 turned outbound-only:
 * peer 2 had dialled it (HELLO "ob" at incarnation inc), and the session
 * ended with mp__engine_go_outbound. */
static mp_peer_t *both_outbound(uint32_t inc) {
    mp_peer_t *p = calloc(1, sizeof *p);
    CHECK(p != NULL, "calloc");
    if (p == NULL)
        exit(1);
    make_id(FWD, p->id);
    p->state = MP_PEER_DEAD;
    p->outbound = true;
    p->unreachable = true;
    p->reach_inc = inc;
    return p;
}

/* A machine that knows peers 0 and 2 alive at incarnation 0. */
static mp_swim_t *swarm(void) {
    mp_swim_t *sw = machine();
    hear(sw, 1, BOOT, MP_SWIM_ALIVE, 0);
    hear(sw, 1, FWD, MP_SWIM_ALIVE, 0);
    (void)events(sw, MP_SWIM_EV_JOINED);
    return sw;
}

/* The failing run: peer 1 suspects peer 2 (its probes of an outbound-only
 * peer go only through peer 0) when peer 2's renewal comes. */
static void test_renewal_crosses_suspicion(void) {
    mp_swim_t *sw = swarm();
    mp_peer_t *p = both_outbound(0);
    mp_swim_member_t m = record(sw);
    CHECK(!mp__engine_renew_due(p, true, &m), "nothing new yet");
    hear(sw, 100, FWD, MP_SWIM_SUSPECT, 0);
    CHECK(events(sw, MP_SWIM_EV_SUSPECT) == 1, "suspect");
    m = record(sw);
    CHECK(m.state == MP_SWIM_SUSPECT && !mp__engine_renew_due(p, true, &m),
          "a suspicion of the old record is no news");
    hear(sw, 200, FWD, MP_SWIM_ALIVE, 1); /* it turned dialable */
    mp_swim_event_t ev;
    int renewed = 0, alive = 0;
    while (mp__swim_poll_event(sw, &ev)) {
        renewed += ev.type == MP_SWIM_EV_RENEWED;
        alive += ev.type == MP_SWIM_EV_ALIVE;
    }
    /* what the rule before missed: no renewal event */
    CHECK(renewed == 0 && alive == 1, "EV_ALIVE (%d), no EV_RENEWED (%d)",
          alive, renewed);
    m = record(sw);
    CHECK(m.state == MP_SWIM_ALIVE && m.inc == 1, "alive at 1");
    CHECK(mp__engine_renew_due(p, true, &m),
          "peer 1 must dial peer 2 once its record says it may be dialable");
    /* the engine dials and remembers the incarnation: once per record */
    p->reach_inc = m.inc;
    CHECK(!mp__engine_renew_due(p, true, &m), "one dial per incarnation");
    free(p);
    mp__swim_free(sw);
}

/* A renewal of a record held alive (the case the rule before handled). */
static void test_renewal_of_alive(void) {
    mp_swim_t *sw = swarm();
    mp_peer_t *p = both_outbound(0);
    hear(sw, 100, FWD, MP_SWIM_ALIVE, 1);
    CHECK(events(sw, MP_SWIM_EV_RENEWED) == 1, "renewed");
    mp_swim_member_t m = record(sw);
    CHECK(mp__engine_renew_due(p, true, &m), "dial on a renewal");
    free(p);
    mp__swim_free(sw);
}

/* Peer 1 held peer 2 dead (the suspicion ran out) when it came back. */
static void test_renewal_of_dead(void) {
    mp_swim_t *sw = swarm();
    mp_peer_t *p = both_outbound(0);
    hear(sw, 100, FWD, MP_SWIM_SUSPECT, 0);
    for (uint64_t t = 100; t <= 60000; t += 50) {
        hear(sw, t, BOOT, MP_SWIM_ALIVE, 0); /* peer 0 stays */
        mp__swim_tick(sw, t);
        (void)events(sw, MP_SWIM_EV_DEAD);
        if (record(sw).state == MP_SWIM_DEAD)
            break;
    }
    mp_swim_member_t m = record(sw);
    CHECK(m.state == MP_SWIM_DEAD, "dead: %d", (int)m.state);
    CHECK(!mp__engine_renew_due(p, true, &m), "a dead record: no dial");
    hear(sw, 70000, FWD, MP_SWIM_ALIVE, 1);
    CHECK(events(sw, MP_SWIM_EV_ALIVE) == 1, "alive again");
    m = record(sw);
    CHECK(mp__engine_renew_due(p, true, &m), "dial once it is back, renewed");
    free(p);
    mp__swim_free(sw);
}

/* The renewal came while peer 1 was dialling peer 2 (a dial begun at
 * incarnation 0, on a refutation say), and that dial got no answer (it
 * ended just before peer 2 took connections): the entry is dead at
 * reach_inc 0 with the record at 1 and no event to come, and the look
 * once a second dials it. */
static void test_renewal_during_a_dial(void) {
    mp_swim_t *sw = swarm();
    hear(sw, 100, FWD, MP_SWIM_ALIVE, 1);
    (void)events(sw, MP_SWIM_EV_RENEWED);
    mp_peer_t *p = both_outbound(0);
    p->outbound = false; /* a dial forgets its "ob" */
    mp_swim_member_t m = record(sw);
    CHECK(mp__engine_renew_due(p, true, &m), "dial: record 1, dialled at 0");
    CHECK(mp__engine_renew_due(p, false, &m), "so would a dialable peer");
    free(p);
    mp__swim_free(sw);
}

static void test_no_dial(void) {
    mp_swim_t *sw = swarm();
    hear(sw, 100, FWD, MP_SWIM_ALIVE, 1);
    (void)events(sw, MP_SWIM_EV_RENEWED);
    mp_swim_member_t m = record(sw);
    mp_peer_t *p = both_outbound(0);
    p->left = true;
    CHECK(!mp__engine_renew_due(p, true, &m), "it left");
    p->left = false;
    p->state = MP_PEER_LIVE;
    CHECK(!mp__engine_renew_due(p, true, &m), "a live session");
    p->state = MP_PEER_NEW;
    CHECK(!mp__engine_renew_due(p, true, &m), "a dial under way");
    p->state = MP_PEER_DEAD;
    /* dead for another reason (a broken session): outbound-only, so it
     * dials a dialable peer itself; an outbound-only peer must dial it */
    p->unreachable = false;
    CHECK(!mp__engine_renew_due(p, false, &m), "it comes to a dialable peer");
    CHECK(mp__engine_renew_due(p, true, &m), "both outbound: dial");
    p->outbound = false;
    CHECK(!mp__engine_renew_due(p, true, &m),
          "a dialable member dead for another reason: the redial rules");
    p->unreachable = true;
    p->reach_inc = 1;
    CHECK(!mp__engine_renew_due(p, true, &m), "no newer record");
    p->reach_inc = 0;
    mp_swim_member_t x = m;
    x.state = MP_SWIM_LEFT;
    CHECK(!mp__engine_renew_due(p, true, &x), "a left record");
    x.state = MP_SWIM_DEAD;
    CHECK(!mp__engine_renew_due(p, true, &x), "a dead record");
    x = m;
    x.addr = "";
    CHECK(!mp__engine_renew_due(p, true, &x), "no address");
    x = m;
    x.state = MP_SWIM_SUSPECT;
    CHECK(mp__engine_renew_due(p, true, &x), "a suspect record still is one");
    free(p);
    mp__swim_free(sw);
}

int main(void) {
    test_renewal_crosses_suspicion();
    test_renewal_of_alive();
    test_renewal_of_dead();
    test_renewal_during_a_dial();
    test_no_dial();
    return test_summary("test_reach");
}
