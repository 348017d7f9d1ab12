/* SPDX-License-Identifier: MIT */
/*
 * endpoint.h - the text forms of peer addresses: "tcp://host:port" (what
 * is dialled) and "tcp://host:port#KEY" (an address with the Z85 text of
 * the identity expected there, as moshpit_endpoint() gives it and the
 * config's bootstrap list takes it). Pure functions over caller buffers.
 */
#ifndef MP_BASE_ENDPOINT_H
#define MP_BASE_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "moshpit.h"

/* A parsed "tcp://host:port#KEY". */
typedef struct mp_endpoint {
    char addr[MP_ADDR_MAX]; /* "tcp://host:port", accepted by addr_ok */
    uint8_t key[32];
} mp_endpoint_t;

/* Splits "tcp://host:port" (port may be "*", read as 0) into host (as
 * given, brackets kept) and port. Returns 0, or -1 if malformed or host
 * does not fit hostcap. */
int mp__endpoint_split(const char *addr, char *host, size_t hostcap,
                       long *port);

/* True if addr is an acceptable peer address to dial: "tcp://host:port"
 * with a numeric port 1..65535 and a sane length. Anything else (ipc://,
 * inproc://, wildcards, garbage) is refused so a peer cannot make us dial
 * local endpoints. */
bool mp__endpoint_addr_ok(const char *addr);

/* Parses "tcp://host:port#KEY" into out. Returns MOSHPIT_OK, or
 * MOSHPIT_EINVAL (NULL, too long, no key, a bad address or key text); out
 * is then unspecified. */
moshpit_err_t mp__endpoint_parse(const char *text, mp_endpoint_t *out);

#endif
