/* SPDX-License-Identifier: MIT */
/*
 * net.h - thin helpers over ZeroMQ used by the engine: socket creation with
 * the project's options (CURVE on every control link) and monitor
 * decoding. The only module that includes
 * zmq.h besides the engine loop itself.
 */
#ifndef MP_NET_H
#define MP_NET_H

#include <stdbool.h>
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
/* Creates a data DEALER dialing addr (sealed frames only) over `streams`
 * TCP connections (1..16); ZeroMQ hands each frame to one with room.
 * With rid (rid_len bytes, first byte nonzero) the DEALER has that
 * routing id on the other side's ROUTER and one connection only (an
 * outbound-only peer, answered on it); in_max is then the largest message
 * it takes in, at most 8 waiting (0: only handshake commands). With
 * mon_ep, *mon receives a PAIR bound to the DEALER's CONNECTED and
 * DISCONNECTED events (mp__net_read_connected); else mon may be NULL. Returns
 * the DEALER or NULL (errno set). */
void *mp__net_data_dealer(void *zctx, const char *addr, uint32_t streams,
                          const uint8_t *rid, size_t rid_len, int64_t in_max,
                          const char *mon_ep, void **mon);
/* Adds connections from..to-1 to data DEALER s (made without rid) to
 * addr, each taking frames once its handshake is done, and sets the
 * high-water mark for to connections. *made: how many were added. 0, or
 * -1 (errno set; the connections made before the failure stay). */
int mp__net_data_widen(void *s, const char *addr, uint32_t from, uint32_t to,
                       uint32_t *made);
/* Reads one event of a data DEALER's monitor: *fd is the descriptor of a
 * new connection, -1 for other events; *down is true when the event says
 * one of its connections broke. Returns -1 if none waits. The
 * descriptor belongs to ZeroMQ's I/O thread, which may have closed it
 * (and the number been reused) by the time this is read: it is given only
 * if it is connected to the event's address (port, and host when
 * numeric), else -1. */
int mp__net_read_connected(void *mon, int *fd, bool *down);
/* Whether TCP socket fd is connected to ep ("tcp://host:port": the port,
 * and the host when it is a numeric address). */
bool mp__net_fd_connected_to(int fd, const char *ep);
/* zmq_bind(sock, ep); with cc (not NULL or ""), TCP congestion control cc
 * is set on the listening socket, so every connection accepted from it
 * uses it: *cc_err is 0, or the errno value why not (EAGAIN: its
 * descriptor was not reported). mon_ep: an unused inproc endpoint. */
int mp__net_bind_cc(void *zctx, void *sock, const char *ep, const char *cc,
                    const char *mon_ep, int *cc_err);
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
