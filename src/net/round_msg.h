/* SPDX-License-Identifier: MIT */
/*
 * round_msg.h - the round machine (core/round.h) in wire terms, without
 * sockets: a decoded control message from a peer goes in, an output
 * becomes the wire message to send. The engine and the simulator both
 * dispatch the round protocol's messages through here.
 */
#ifndef MP_NET_ROUND_MSG_H
#define MP_NET_ROUND_MSG_H

#include "core/round.h"
#include "wire/wire.h"

/* What mp__round_msg_dispatch made of a message. */
typedef enum {
    MP_RND_MSG_OTHER = 0, /* not a round message: the caller's */
    MP_RND_MSG_OK,        /* handled */
    MP_RND_MSG_STALE,     /* a GROUP that answers no JOIN of ours, ignored */
    MP_RND_MSG_BAD_KEY,   /* a JOIN with a key peers do not build: ALONE */
    MP_RND_MSG_NO_SLOT,   /* a JOIN while every matchmaker is busy: ALONE */
    MP_RND_MSG_REFUSED    /* a JOIN over its key's pending limit: ALONE */
} mp_rnd_msg_status_t;

/* Dispatches m (JOIN, JOIN_ACK, GROUP, ALONE, LEAVE) from peer `from` to
 * the machine; anything else is left to the caller (MP_RND_MSG_OTHER).
 * Pull the machine's outputs afterwards. */
mp_rnd_msg_status_t mp__round_msg_dispatch(mp_rnd_t *rm, uint64_t now_ms,
                                           const uint8_t from[MP_ID_BYTES],
                                           const mp_msg_t *m);

/* The wire message of a MP_RND_OUT_SEND output (m is overwritten). */
void mp__round_msg_from_out(const mp_rnd_out_t *o, mp_msg_t *m);

#endif
