/* SPDX-License-Identifier: MIT */
/*
 * engine_reach.c - reachability asked again (docs/DESIGN.md, "Reachability
 * asked again"; docs/PROTOCOL.md, "Peers behind NAT"). The first verdict
 * on whether others can dial this peer comes from its bootstrap peers
 * (engine_peers.c); from then on the peer asks a few dialable members,
 * every REACH_ASK_MS and sooner on signs of change, to dial it back at the
 * host its connection comes from (HELLO "bq"), and each answers after its
 * dial (HELLO "ba", with "nr" when it could not). The majority of the
 * answers is the new verdict; a verdict that changes the mode is carried
 * out between calls. The other half lives here too: the dial-backs this
 * peer does for others, bounded per requester and in all. Engine thread
 * only.
 */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "base/endpoint.h"
#include "core/swim.h"
#include "net/net.h"

/* ------------------------------------------------------------------ */
/* dialling others back                                                */

void mp__engine_dialback_close(mp_peer_t *p) {
    if (p->db_sock != NULL)
        zmq_socket_monitor(p->db_sock, NULL, 0);
    mp__net_close(&p->db_mon);
    mp__net_close(&p->db_sock);
    p->db_nonce = 0;
    p->db_up = false;
}

/* A token of the dial-back bucket (DIALBACK_RATE a second, a burst of
 * DIALBACK_BURST); false when there is none. */
static bool dialback_token(moshpit_t *mp, uint64_t now) {
    const uint64_t cap = (uint64_t)DIALBACK_BURST * 1000u;
    if (mp->db_refill_ms == 0) {
        mp->db_tokens = cap;
    } else if (now > mp->db_refill_ms) {
        uint64_t add = (now - mp->db_refill_ms) * DIALBACK_RATE;
        mp->db_tokens = cap - mp->db_tokens < add ? cap : mp->db_tokens + add;
    }
    mp->db_refill_ms = now;
    if (mp->db_tokens < 1000u)
        return false;
    mp->db_tokens -= 1000u;
    return true;
}

/* p asks us to dial it back (HELLO "bq" nonce). We do, once per
 * DIALBACK_PEER_MS per requester and DIALBACK_RATE a second in all, and
 * only to the host its connection to us comes from, at the port of the
 * control address it advertises, and only when that address names that
 * host: so a request can make us dial nothing but the requester's own
 * address (docs/SECURITY.md, "Dial-back requests"). */
static void dialback_start(moshpit_t *mp, mp_peer_t *p, uint32_t nonce,
                           uint64_t now) {
    if (mp->reach != MP_REACH_DIALABLE || p->state != MP_PEER_LIVE ||
        p->db_sock != NULL) {
        /* only a dialable member judges; one dial at a time */
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "dial-back request of %.8s not served (%s)", p->id_txt,
                       mp->reach != MP_REACH_DIALABLE ? "we are not dialable"
                       : p->db_sock != NULL           ? "one runs"
                                                      : "no session");
        return;
    }
    if (p->db_last_ms != 0 && now - p->db_last_ms < DIALBACK_PEER_MS) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "dial-back request of %.8s dropped: asked again "
                       "within %u ms",
                       p->id_txt, DIALBACK_PEER_MS);
        return;
    }
    char seen[MP_ADDR_MAX], host[MP_ADDR_MAX], target[MP_ADDR_MAX];
    long port = 0;
    if (strchr(p->seen_addr, ':') != NULL)
        snprintf(seen, sizeof(seen), "[%.100s]", p->seen_addr);
    else
        snprintf(seen, sizeof(seen), "%.100s", p->seen_addr);
    if (p->seen_addr[0] == '\0' ||
        mp__endpoint_split(p->ctrl_addr, host, sizeof(host), &port) != 0 ||
        strcmp(host, seen) != 0) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "dial-back request of %.8s declined: it advertises "
                       "%s, its connection comes from %s",
                       p->id_txt, p->ctrl_addr,
                       p->seen_addr[0] != '\0' ? p->seen_addr : "(unknown)");
        return;
    }
    if (!dialback_token(mp, now)) {
        if (mp->db_logged_ms != 0 && now - mp->db_logged_ms < 1000)
            return; /* logged once a second at most */
        mp->db_logged_ms = now;
        mp__engine_log(mp, MOSHPIT_LOG_INFO,
                       "dial-back request of %.8s dropped: more than %u a "
                       "second",
                       p->id_txt, DIALBACK_RATE);
        return;
    }
    snprintf(target, sizeof(target), "tcp://%.100s:%ld", seen, port);
    if (!mp__endpoint_addr_ok(target))
        return;
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://moshpit-mon-%u", ++mp->mon_seq);
    /* a CURVE client expecting its key: only the requester itself can
     * complete the handshake there */
    p->db_sock = mp__net_ctrl_dealer(mp->zctx, target, p->id, mp->pub, mp->sec,
                                     mon_ep, &p->db_mon);
    if (p->db_sock == NULL) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN, "cannot dial %.8s back at %s",
                       p->id_txt, target);
        return;
    }
    p->db_nonce = nonce;
    p->db_up = false;
    p->db_start_ms = now;
    p->db_last_ms = now;
}

/* Our dial-backs: one whose handshake came up, or that had REACH_WAIT_MS,
 * ends and is answered (HELLO "ba", "nr" when it did not come up). */
static void dialback_poll(moshpit_t *mp, uint64_t now) {
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *p = mp->peers[i];
        if (p->db_sock == NULL)
            continue;
        mp_net_event_t ev;
        bool failed = false;
        while (p->db_mon != NULL && mp__net_read_event(p->db_mon, &ev) == 0) {
            p->db_up = p->db_up || ev == MP_NET_EV_UP;
            failed = failed || ev == MP_NET_EV_AUTH_FAILED ||
                     ev == MP_NET_EV_PROTO_FAILED;
        }
        if (!p->db_up && !failed && now - p->db_start_ms < REACH_WAIT_MS)
            continue;
        bool up = p->db_up;
        uint32_t nonce = p->db_nonce;
        mp__engine_dialback_close(p);
        if (p->state != MP_PEER_LIVE || !mp__engine_can_send(p) ||
            !mp__engine_hello_fill(mp, p, true)) {
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "dial-back answer to %.8s not sent (no session)",
                           p->id_txt);
            continue;
        }
        mp->msg->u.hello.dialback_ans = nonce;
        mp->msg->u.hello.not_reached = up ? 0 : 1;
        mp__engine_send_msg(mp, p, mp->msg);
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "dialled %.8s back at its observed host (%s): %s",
                       p->id_txt, p->seen_addr, up ? "reached" : "not reached");
    }
}

/* ------------------------------------------------------------------ */
/* asking others                                                       */

static bool askable(const moshpit_t *mp, const mp_peer_t *p) {
    return p->state == MP_PEER_LIVE && !p->outbound && p->reach_ok &&
           mp__engine_can_send(p) && mp__engine_swim_member_ok(mp, p->id);
}

/* Our own host as it appears in our advertised endpoint. */
static void own_host(const moshpit_t *mp, char *host, size_t cap) {
    long port = 0;
    if (mp__endpoint_split(mp->ctrl_ep, host, cap, &port) != 0)
        host[0] = '\0';
}

static void ask_end(moshpit_t *mp, uint64_t now) {
    for (size_t i = 0; i < mp->npeers; i++)
        mp->peers[i]->ask_nonce = 0;
    mp->ask_nonce = 0;
    /* +-20%, so that peers started together spread their requests */
    uint64_t jit = mp__engine_rng_next(mp) % (REACH_ASK_MS * 2 / 5 + 1);
    mp->ask_next_ms = now + REACH_ASK_MS * 4 / 5 + jit;
}

/* The answers are in (or their time is up): the majority decides. */
static void ask_conclude(moshpit_t *mp, uint64_t now) {
    uint32_t yes = mp->ask_yes, no = mp->ask_no, n = mp->ask_n;
    uint32_t moved = mp->ask_moved;
    ask_end(mp, now);
    /* most answers saw us at another host: that is ours now, and the
     * verdict was about the old one: ask again at once */
    if (mp->cfg.advertise == NULL && yes + no > 0 && moved * 2 > yes + no &&
        mp__engine_adopt_observed(mp, NULL, mp->ask_oa)) {
        mp->ask_next_ms = now;
        return;
    }
    int want = yes > no ? MP_REACH_DIALABLE : no > yes ? MP_REACH_OUTBOUND : 0;
    mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                   "reachability asked again: of %u members, %u dialled us "
                   "back at %s, %u could not",
                   n, yes, mp->ctrl_ep, no);
    if (want == 0) /* no answer, or a tie: the verdict stands */
        return;
    if (want == (int)mp->reach) {
        mp->reach_want = 0;
        return;
    }
    if (mp->reach_want != want) {
        mp->reach_want = want;
        mp->reach_want_ms = now;
        mp__engine_log(
            mp, MOSHPIT_LOG_INFO,
            "reachability asked again: %u of %u members dialled us back at "
            "%s: %s once no call runs",
            yes, yes + no, mp->ctrl_ep,
            want == MP_REACH_DIALABLE ? "dialable" : "outbound-only");
    }
}

/* Sends a dial-back request to up to REACH_ASK_N askable members, chosen
 * at random. */
static void ask_start(moshpit_t *mp, uint64_t now) {
    size_t n = 0;
    for (size_t i = 0; i < mp->npeers; i++)
        n += askable(mp, mp->peers[i]);
    if (n == 0) {
        ask_end(mp, now);
        return;
    }
    uint32_t nonce;
    do
        nonce = (uint32_t)mp__engine_rng_next(mp);
    while (nonce == 0);
    mp->ask_nonce = nonce;
    mp->ask_ms = now;
    mp->ask_last_ms = now;
    mp->ask_n = mp->ask_yes = mp->ask_no = mp->ask_moved = 0;
    mp->ask_oa[0] = '\0';
    size_t need = n < REACH_ASK_N ? n : REACH_ASK_N;
    for (size_t i = 0; i < mp->npeers && need > 0; i++) {
        mp_peer_t *p = mp->peers[i];
        if (!askable(mp, p))
            continue;
        /* selection sampling: each of the n is taken with the same
         * chance */
        if (mp__engine_rng_next(mp) % n-- >= need)
            continue;
        need--;
        if (!mp__engine_hello_fill(mp, p, false))
            continue;
        mp->msg->u.hello.dialback_req = nonce;
        mp__engine_send_msg(mp, p, mp->msg);
        p->ask_nonce = nonce;
        mp->ask_n++;
    }
    if (mp->ask_n == 0)
        ask_end(mp, now);
}

void mp__engine_reach_soon(moshpit_t *mp, const char *why) {
    if (mp->reach == MP_REACH_UNKNOWN || mp->stopping)
        return;
    uint64_t now = mp__engine_now_ms();
    uint64_t t = mp->ask_last_ms + REACH_ASK_MIN_MS;
    t = t > now ? t : now;
    if (mp->ask_next_ms != 0 && t >= mp->ask_next_ms)
        return;
    mp->ask_next_ms = t;
    mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                   "reachability: asking again soon (%s)", why);
}

void mp__engine_reach_on_hello(moshpit_t *mp, mp_peer_t *p,
                               const mp_hello_t *h) {
    uint64_t now = mp__engine_now_ms();
    if (h->dialback_req != 0)
        dialback_start(mp, p, h->dialback_req, now);
    if (h->dialback_ans == 0) {
        /* a member that could not dial us while we think we are
         * dialable: ask the others */
        if (h->not_reached && mp->reach == MP_REACH_DIALABLE)
            mp__engine_reach_soon(mp, "a member could not dial us");
        return;
    }
    if (mp->ask_nonce == 0 || p->ask_nonce != h->dialback_ans) {
        mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                       "dial-back answer of %.8s ignored (late, or not "
                       "asked)",
                       p->id_txt);
        return;
    }
    p->ask_nonce = 0;
    mp__engine_log(mp, MOSHPIT_LOG_DEBUG, "dial-back answer of %.8s: %s",
                   p->id_txt, h->not_reached ? "not reached" : "reached");
    if (h->not_reached)
        mp->ask_no++;
    else
        mp->ask_yes++;
    char mine[MP_ADDR_MAX], oa[MP_ADDR_MAX];
    own_host(mp, mine, sizeof(mine));
    if (strchr(h->observed, ':') != NULL)
        snprintf(oa, sizeof(oa), "[%.100s]", h->observed);
    else
        snprintf(oa, sizeof(oa), "%.100s", h->observed);
    if (h->observed[0] != '\0' && strcmp(oa, mine) != 0 &&
        (mp->ask_oa[0] == '\0' || strcmp(mp->ask_oa, h->observed) == 0)) {
        snprintf(mp->ask_oa, sizeof(mp->ask_oa), "%s", h->observed);
        mp->ask_moved++;
    }
    if (mp->ask_yes + mp->ask_no >= mp->ask_n)
        ask_conclude(mp, now);
}

/* ------------------------------------------------------------------ */
/* switching                                                           */

/* Turns this peer dialable: members dialled it back. It tells every peer
 * it has a session with (a HELLO without "ob": they dial it from now on)
 * and takes a new SWIM incarnation, so that the members that gave up
 * dialling it (outbound-only peers behind other NATs) try again. */
static void go_dialable(moshpit_t *mp, uint64_t now) {
    mp->reach = MP_REACH_DIALABLE;
    mp->outbound = false;
    mp->reach_want = 0;
    mp->reach_switch_ms = now;
    mp__rnd_set_noshare(mp->rnd, false);
    mp__engine_log(mp, MOSHPIT_LOG_WARN,
                   "reachability: members dialled us back at %s: dialable "
                   "now (we reduce shares and serve as matchmaker again)",
                   mp->ctrl_ep);
    for (size_t i = 0; i < mp->npeers; i++) {
        mp_peer_t *q = mp->peers[i];
        if (q->state == MP_PEER_LIVE && !q->outbound)
            mp__engine_send_hello(mp, q, false);
    }
    if (mp->swim != NULL && mp__swim_renew_self(mp->swim) == MOSHPIT_OK)
        mp__engine_swim_pump(mp);
    mp__engine_update_members(mp);
}

/* A mode switch waits for a moment without a call: no call of ours, no
 * download, no close, the mates of our last round all said DONE and no
 * JOIN waits at our matchmaker (those two at most REACH_SWITCH_WAIT_MS),
 * so that no round loses a part to sockets that close or change. */
static bool switch_now(moshpit_t *mp, uint64_t now) {
    if (mp->round.cmd != NULL || mp->fetch_cmd != NULL || mp->close_cmd != NULL)
        return false;
    if (now - mp->reach_want_ms >= REACH_SWITCH_WAIT_MS)
        return true;
    size_t pending = 0;
    (void)mp__rnd_mm_count(mp->rnd, &pending);
    return pending == 0 && mp__engine_owed_settled(mp);
}

void mp__engine_reach_tick(moshpit_t *mp, uint64_t now) {
    dialback_poll(mp, now);
    if (mp->reach == MP_REACH_UNKNOWN)
        return;
    if (mp->reach_want != 0 && mp->reach_want != (int)mp->reach &&
        switch_now(mp, now)) {
        if (mp->reach_want == MP_REACH_OUTBOUND)
            mp__engine_go_outbound(mp, NULL);
        else
            go_dialable(mp, now);
    }
    if (mp->ask_nonce != 0) {
        if (now - mp->ask_ms >= REACH_ANSWER_MS)
            ask_conclude(mp, now);
        return;
    }
    if (mp->ask_next_ms == 0) { /* the first verdict is in */
        ask_end(mp, now);
        return;
    }
    if (now >= mp->ask_next_ms)
        ask_start(mp, now);
}

uint64_t mp__engine_reach_wakeup(const moshpit_t *mp) {
    uint64_t w = UINT64_MAX;
    for (size_t i = 0; i < mp->npeers; i++) {
        const mp_peer_t *p = mp->peers[i];
        if (p->db_sock != NULL && p->db_start_ms + REACH_WAIT_MS < w)
            w = p->db_start_ms + REACH_WAIT_MS;
    }
    if (mp->reach == MP_REACH_UNKNOWN)
        return w;
    uint64_t t =
        mp->ask_nonce != 0 ? mp->ask_ms + REACH_ANSWER_MS : mp->ask_next_ms;
    return t != 0 && t < w ? t : w;
}

bool mp__engine_reach_read_dealers(const moshpit_t *mp, uint64_t now) {
    return mp->reach != MP_REACH_DIALABLE ||
           (mp->reach_switch_ms != 0 &&
            now - mp->reach_switch_ms < REACH_GRACE_MS);
}
