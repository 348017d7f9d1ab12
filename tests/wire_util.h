/* SPDX-License-Identifier: MIT */
/*
 * wire_util.h - helpers shared by the wire codec tests (tests/unit/test_wire.c
 * and tests/fuzz/fuzz_wire.c), header-only: bit-exact double comparison and
 * field-by-field equality of two decoded control messages. Needs
 * "wire/wire.h" (src/ on the include path).
 */
#ifndef MOSHPIT_WIRE_UTIL_H
#define MOSHPIT_WIRE_UTIL_H

#include <stdint.h>
#include <string.h>

#include "wire/wire.h"

/* 1 if a and b have the same bits (so NaN equals itself, -0 differs from
 * 0). */
static inline int same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Field-by-field equality of two messages (no padding is compared). A JOIN
 * key_len beyond MP_KEY_MAX never compares equal, so garbage input cannot
 * make the comparison read past the key. */
static inline int msg_equal(const mp_msg_t *a, const mp_msg_t *b) {
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case MP_MSG_HELLO: {
        const mp_hello_t *x = &a->u.hello, *y = &b->u.hello;
        return memcmp(x->swarm, y->swarm, 32) == 0 &&
               memcmp(x->eph, y->eph, 32) == 0 &&
               memcmp(x->seen, y->seen, 32) == 0 &&
               memcmp(x->proof, y->proof, MP_PROOF_BYTES) == 0 &&
               x->has_proof == y->has_proof && x->reply == y->reply &&
               x->tag == y->tag && x->bandwidth == y->bandwidth &&
               x->ciphers == y->ciphers &&
               strcmp(x->ctrl_addr, y->ctrl_addr) == 0 &&
               strcmp(x->data_addr, y->data_addr) == 0 &&
               x->serves_state == y->serves_state &&
               x->reorder_ok == y->reorder_ok && x->has_cert == y->has_cert &&
               memcmp(x->cert, y->cert, sizeof x->cert) == 0 &&
               x->outbound == y->outbound && x->drid_len == y->drid_len &&
               x->drid_len <= MP_DRID_MAX &&
               memcmp(x->drid, y->drid, x->drid_len) == 0 &&
               x->not_reached == y->not_reached &&
               strcmp(x->observed, y->observed) == 0 &&
               x->dialback_req == y->dialback_req &&
               x->dialback_ans == y->dialback_ans;
    }
    case MP_MSG_STATE_REQ:
        return a->u.state_req.seq == b->u.state_req.seq &&
               a->u.state_req.version == b->u.state_req.version &&
               a->u.state_req.first == b->u.state_req.first &&
               a->u.state_req.n == b->u.state_req.n;
    case MP_MSG_STATE_INFO:
        return a->u.state_info.seq == b->u.state_info.seq &&
               a->u.state_info.version == b->u.state_info.version &&
               a->u.state_info.round == b->u.state_info.round &&
               a->u.state_info.count == b->u.state_info.count &&
               memcmp(a->u.state_info.digest, b->u.state_info.digest, 32) == 0;
    case MP_MSG_REFUSE:
        return a->u.refuse.reason == b->u.refuse.reason;
    case MP_MSG_PEERS:
        if (a->u.peers.n != b->u.peers.n)
            return 0;
        for (uint32_t i = 0; i < a->u.peers.n; i++)
            if (memcmp(a->u.peers.peers[i].id, b->u.peers.peers[i].id, 32) ||
                strcmp(a->u.peers.peers[i].addr, b->u.peers.peers[i].addr))
                return 0;
        return 1;
    case MP_MSG_JOIN: {
        const mp_join_t *x = &a->u.join, *y = &b->u.join;
        return x->seq == y->seq && same_double(x->weight, y->weight) &&
               x->bandwidth == y->bandwidth && x->window_ms == y->window_ms &&
               x->phase == y->phase && x->noshare == y->noshare &&
               x->parts == y->parts && x->key_len == y->key_len &&
               x->key_len <= MP_KEY_MAX &&
               memcmp(x->key, y->key, x->key_len) == 0;
    }
    case MP_MSG_JOIN_ACK:
        return a->u.ack.seq == b->u.ack.seq;
    case MP_MSG_ALONE:
        return a->u.alone.seq == b->u.alone.seq;
    case MP_MSG_LEAVE:
        return a->u.leave.seq == b->u.leave.seq;
    case MP_MSG_GROUP: {
        const mp_group_msg_t *x = &a->u.group, *y = &b->u.group;
        if (x->seq != y->seq || x->group_id != y->group_id || x->n != y->n ||
            x->phase != y->phase)
            return 0;
        for (uint32_t i = 0; i < x->n; i++)
            if (memcmp(x->members[i].id, y->members[i].id, MP_ID_BYTES) ||
                !same_double(x->members[i].weight, y->members[i].weight) ||
                x->members[i].bandwidth != y->members[i].bandwidth ||
                x->members[i].seq != y->members[i].seq ||
                x->members[i].noshare != y->members[i].noshare ||
                x->members[i].parts != y->members[i].parts)
                return 0;
        return 1;
    }
    case MP_MSG_BYE:
        return a->u.bye.reason == b->u.bye.reason;
    case MP_MSG_DONE:
        return a->u.done.group_id == b->u.done.group_id &&
               a->u.done.up_kbps == b->u.done.up_kbps;
    case MP_MSG_HAVE:
        return a->u.have.group_id == b->u.have.group_id &&
               a->u.have.rx == b->u.have.rx &&
               a->u.have.mark == b->u.have.mark &&
               a->u.have.sc_len == b->u.have.sc_len &&
               a->u.have.ga_len == b->u.have.ga_len &&
               memcmp(a->u.have.sc, b->u.have.sc, a->u.have.sc_len) == 0 &&
               memcmp(a->u.have.ga, b->u.have.ga, a->u.have.ga_len) == 0;
    }
    return 0;
}

#endif
