/* SPDX-License-Identifier: MIT */
/*
 * net.h - thin helpers over ZeroMQ used by the engine: socket creation with
 * the project's options (CURVE on every control link) and monitor
 * decoding. The only module that includes
 * zmq.h besides the engine loop itself.
 */
#ifndef MP_NET_H
#define MP_NET_H

#include <stddef.h>
#include <stdint.h>

#include "moshpit.h"

/* Creates a control DEALER that dials addr as a CURVE client expecting the
 * server key server_pub, and a PAIR monitor bound to its events at
 * mon_ep. Returns the DEALER or NULL (errno set); *mon receives the PAIR. */
void *mp__net_ctrl_dealer(void *zctx, const char *addr,
                          const uint8_t server_pub[32],
                          const uint8_t my_pub[32], const uint8_t my_sec[32],
                          const char *mon_ep, void **mon);
/* Creates a data DEALER dialing addr (sealed frames only), with the
 * routing id rid (rid_len bytes, first byte nonzero) on the other side's
 * ROUTER. in_max: the largest message it takes in (the other side answers
 * an outbound-only peer on it), at most 8 waiting; 0: only handshake
 * commands come in. */
void *mp__net_data_dealer(void *zctx, const char *addr, const uint8_t *rid,
                          size_t rid_len, int64_t in_max);
/* Closes a socket if non-NULL (linger 0). */
void mp__net_close(void **sock);
/* Closes a socket if non-NULL, letting what is queued on it reach the
 * network for up to linger_ms (zmq_ctx_term waits for that). */
void mp__net_close_linger(void **sock, int linger_ms);

/* Z85 text of a 32-byte key (40 chars + NUL). Return 0, or -1. */
int mp__net_z85_encode(char out[41], const uint8_t key[32]);

/* Monitor event kinds the engine cares about. */
typedef enum {
    MP_NET_EV_OTHER = 0,
    MP_NET_EV_UP,           /* handshake succeeded */
    MP_NET_EV_DOWN,         /* disconnected */
    MP_NET_EV_AUTH_FAILED,  /* the server refused our credentials */
    MP_NET_EV_PROTO_FAILED, /* handshake failed otherwise (wrong key?) */
    MP_NET_EV_CONNECTED     /* TCP connection made (handshake not yet) */
} mp_net_event_t;

/* Reads one event from a monitor PAIR (non-blocking). Returns -1 if none. */
int mp__net_read_event(void *mon, mp_net_event_t *ev);

#endif
