/* SPDX-License-Identifier: MIT */
/*
 * wire_swim.h - msgpack codec of the SWIM membership messages (types 16..21,
 * see core/swim.h and docs/PROTOCOL.md "Membership messages").
 *
 * Pure functions over byte buffers, like wire.h: no I/O, no globals. The
 * decoder runs the same bounded structural pre-scan as wire.c
 * (mp__wire_scan) before msgpack-c builds anything, then checks every field
 * against the schema; unknown keys are ignored, anything else that does not
 * fit is MOSHPIT_EPROTO. What a valid message means (which incarnations a
 * receiver accepts, who may say what about whom) is the core's business.
 *
 * The piggyback block is a GOSSIP message (t = 21): on its own it can ride
 * on any other traffic as an extra frame; inside any SWIM message the same
 * list travels under the key "g".
 */
#ifndef MP_WIRE_SWIM_H
#define MP_WIRE_SWIM_H

#include <stddef.h>
#include <stdint.h>

#include "../core/swim.h"
#include "moshpit.h"

#define MP_SWIM_WIRE_VERSION 1u
#define MP_SWIM_MSG_MAX 16384u /* largest SWIM message accepted, bytes */
/* A GOSSIP block costs at most this much beyond the sum of
 * mp__swim_update_bytes of its updates (map, v, t, inc, "g", array). */
#define MP_SWIM_BLOCK_OVERHEAD 21u

/* Encodes msg into buf (cap bytes), canonical form (docs/PROTOCOL.md);
 * *len receives the size. Errors: EINVAL (invalid fields: type, counts
 * above MP_SWIM_PB_MAX / MP_SWIM_PAGE_MAX, an unterminated or too long
 * address, a state above LEFT, PING_REQ without target, result larger than
 * MP_SWIM_MSG_MAX), ENOMEM (cap too small). */
moshpit_err_t mp__wire_swim_msg_encode(const mp_swim_msg_t *msg, uint8_t *buf,
                                       size_t cap, size_t *len);

/* Decodes exactly one SWIM message occupying all of buf[0..len). msg is
 * fully overwritten (zeroed on error). Errors: EINVAL (NULL msg), EPROTO
 * (anything malformed, including control messages of other types),
 * ENOMEM. */
moshpit_err_t mp__wire_swim_msg_decode(const uint8_t *buf, size_t len,
                                       mp_swim_msg_t *msg);

/* Encodes a GOSSIP block (the piggyback block) straight from a list of
 * updates, without building an mp_swim_msg_t. Same errors as
 * mp__wire_swim_msg_encode. */
moshpit_err_t mp__wire_swim_block_encode(uint32_t inc,
                                         const mp_swim_update_t *updates,
                                         size_t n, uint8_t *buf, size_t cap,
                                         size_t *len);

/* The "t" of a well-formed control message (any type, wire.h or SWIM), so
 * a driver can pick the decoder. Errors: EPROTO (not a well-formed map with
 * a uint "t"), ENOMEM. */
moshpit_err_t mp__wire_swim_peek_type(const uint8_t *buf, size_t len,
                                      uint64_t *type);

#endif
