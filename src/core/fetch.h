/* SPDX-License-Identifier: MIT */
/*
 * fetch.h - sans-IO download of a serving peer's averaged vector (the
 * client side of moshpit_fetch_state).
 *
 * A state is identified by its version (a nonzero number the server picks
 * when it takes a new snapshot), and described by the server's round count,
 * its length in floats and a 32-byte digest of its bytes. It travels in
 * chunks of chunk_elems floats (the last one shorter).
 *
 * Flow. The client asks up to MP_FETCH_ASK servers at once what they hold
 * (an INFO request). The first answer with the wanted length is taken: the
 * client then requests chunks from that server, keeping up to `window`
 * chunks outstanding. When the server stalls (no chunk for stall_ms) the
 * missing chunks are asked again (every stall_ms); when it stays silent for
 * server_timeout_ms, or is reported failed, the client asks the next
 * server: if that one holds the same state (version, length and digest),
 * the download continues where it was; otherwise it starts over with the
 * new state. When every chunk is in, the driver hashes the buffer and
 * reports the digest; a mismatch drops the server that served last and
 * starts over with another one (chunks may have come from several servers
 * after a failover, so the download starts from scratch).
 *
 * Ends: DONE; ECOUNT when servers answered but none holds the wanted
 * length; ENOSTATE when no server holds any state (or none was given);
 * ETIMEDOUT at the deadline. Every decision is bounded: at most
 * MP_FETCH_RESTARTS fresh starts.
 *
 * No I/O, no clock, no crypto: the driver passes time and digests. Not
 * thread-safe.
 */
#ifndef MP_CORE_FETCH_H
#define MP_CORE_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rendezvous.h"
#include "moshpit.h"

#define MP_FETCH_ASK 3u       /* servers asked for INFO at once */
#define MP_FETCH_RESTARTS 8u  /* fresh starts before giving up */
#define MP_FETCH_SERVERS 256u /* candidate servers kept */

typedef struct mp_fetch mp_fetch_t;

typedef enum {
    MP_FETCH_RUNNING = 0,
    MP_FETCH_VERIFY, /* every chunk is in: hash and call mp__fetch_verified */
    MP_FETCH_DONE,
    MP_FETCH_FAILED /* see mp__fetch_error */
} mp_fetch_state_t;

typedef enum { MP_FETCH_SEND_INFO = 1, MP_FETCH_SEND_GET } mp_fetch_send_kind_t;

/* A request the driver must send now. */
typedef struct mp_fetch_send {
    mp_fetch_send_kind_t kind;
    uint8_t to[MP_ID_BYTES];
    uint64_t version; /* GET */
    uint32_t first;   /* GET: first chunk */
    uint32_t n;       /* GET: chunks from first */
} mp_fetch_send_t;

typedef struct mp_fetch_cfg {
    size_t count;         /* floats wanted */
    uint32_t chunk_elems; /* floats per chunk */
    uint32_t window;      /* chunks outstanding, >= 1 */
    uint64_t now_ms, deadline_ms;
    uint32_t stall_ms, server_timeout_ms;
} mp_fetch_cfg_t;

/* servers: candidate ids in preference order (n may be 0). EINVAL for a
 * bad cfg, ENOMEM. */
moshpit_err_t mp__fetch_new(const mp_fetch_cfg_t *cfg,
                            const uint8_t (*servers)[MP_ID_BYTES], size_t n,
                            mp_fetch_t **out);
void mp__fetch_free(mp_fetch_t *f);

bool mp__fetch_next_send(mp_fetch_t *f, mp_fetch_send_t *out);

/* An INFO answer. version 0 = the server holds nothing (or is busy). */
void mp__fetch_on_info(mp_fetch_t *f, uint64_t now_ms,
                       const uint8_t from[MP_ID_BYTES], uint64_t version,
                       uint64_t round, uint64_t count,
                       const uint8_t digest[32]);

/* Before decrypting a chunk: is it wanted from this server? If true, *off
 * and *len give where it goes (in floats); the driver writes it there and
 * then calls mp__fetch_chunk_done. */
bool mp__fetch_chunk_wanted(const mp_fetch_t *f,
                            const uint8_t from[MP_ID_BYTES], uint64_t version,
                            uint32_t chunk, uint32_t count, size_t *off);
void mp__fetch_chunk_done(mp_fetch_t *f, uint64_t now_ms, uint32_t chunk);

void mp__fetch_on_server_failed(mp_fetch_t *f, uint64_t now_ms,
                                const uint8_t id[MP_ID_BYTES]);
void mp__fetch_on_tick(mp_fetch_t *f, uint64_t now_ms);
uint64_t mp__fetch_next_wakeup(const mp_fetch_t *f);

/* In state VERIFY: the digest of the downloaded buffer. */
void mp__fetch_verified(mp_fetch_t *f, uint64_t now_ms,
                        const uint8_t digest[32]);

mp_fetch_state_t mp__fetch_state(const mp_fetch_t *f);
moshpit_err_t mp__fetch_error(const mp_fetch_t *f); /* after FAILED */
/* The state being downloaded (valid once a server answered). */
uint64_t mp__fetch_round(const mp_fetch_t *f);
const uint8_t *mp__fetch_digest(const mp_fetch_t *f);
/* Chunks received so far, and fresh starts taken (for tests and logs). */
uint32_t mp__fetch_received(const mp_fetch_t *f);
uint32_t mp__fetch_restarts(const mp_fetch_t *f);

#endif
