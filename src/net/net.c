/* SPDX-License-Identifier: MIT */
/*
 * net.c - ZeroMQ socket helpers: control DEALERs with CURVE and a monitor,
 * data DEALERs with one or more connections (and a monitor that reports
 * their descriptors), a bind that sets the listener's TCP congestion
 * control, and monitor-event decoding (see net.h).
 */
#include "net.h"

#include "platform.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

static int set_int(void *s, int opt, int v) {
    return zmq_setsockopt(s, opt, &v, sizeof(v));
}

void mp__net_close_linger(void **sock, int linger_ms) {
    if (*sock != NULL) {
        set_int(*sock, ZMQ_LINGER, linger_ms);
        zmq_close(*sock);
        *sock = NULL;
    }
}

void mp__net_close(void **sock) {
    mp__net_close_linger(sock, 0);
}

/* Starts s's monitor for events on inproc endpoint mon_ep and connects
 * *mon, a PAIR, to it. On failure *mon may be set (the caller closes it
 * and stops the monitor). */
static int attach_monitor(void *zctx, void *s, const char *mon_ep, int events,
                          void **mon) {
    if (zmq_socket_monitor(s, mon_ep, events) != 0)
        return -1;
    *mon = zmq_socket(zctx, ZMQ_PAIR);
    if (*mon == NULL)
        return -1;
    set_int(*mon, ZMQ_LINGER, 0);
    return zmq_connect(*mon, mon_ep);
}

/* No socket sets ZMQ_HEARTBEAT_*: libzmq 4.3.4 aborts the process
 * ("Assertion failed: !_io_error", stream_engine_base.cpp) when a heartbeat
 * fires on a connection whose input the receive high-water mark stopped and
 * which then broke. Liveness comes from membership and the round timers
 * instead (docs/DESIGN.md, "Membership in the engine"). */
void *mp__net_ctrl_dealer(void *zctx, const char *addr,
                          const uint8_t server_pub[32],
                          const uint8_t my_pub[32], const uint8_t my_sec[32],
                          const char *mon_ep, void **mon) {
    *mon = NULL;
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    if (s == NULL)
        return NULL;
    int64_t maxmsg = 4096; /* handshake commands pass through it */
    if (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_pub, 32) != 0 ||
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, my_pub, 32) != 0 ||
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, my_sec, 32) != 0 ||
        set_int(s, ZMQ_LINGER, 0) != 0 || set_int(s, ZMQ_SNDHWM, 1000) ||
        set_int(s, ZMQ_RECONNECT_IVL, 100) ||
        set_int(s, ZMQ_RECONNECT_IVL_MAX, 2000) ||
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) != 0)
        goto fail;
    if (attach_monitor(zctx, s, mon_ep,
                       ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECTED |
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                       mon) != 0)
        goto fail;
    if (zmq_connect(s, addr) != 0)
        goto fail;
    return s;
fail:;
    int e = errno;
    if (*mon != NULL)
        mp__net_close(mon);
    zmq_socket_monitor(s, NULL, 0);
    mp__net_close(&s);
    errno = e;
    return NULL;
}

/* The k-th spelling of "tcp://host:port": k zeros before the port. libzmq
 * connects a DEALER once per endpoint string (a second zmq_connect of the
 * same string is a no-op), and parses the port as a decimal number, so
 * these make k + 1 connections to one address. */
static int stream_addr(char *out, size_t cap, const char *addr, uint32_t k) {
    const char *colon = strrchr(addr, ':');
    if (colon == NULL ||
        (size_t)(colon - addr) + 1 + k + strlen(colon + 1) >= cap)
        return -1;
    size_t head = (size_t)(colon - addr) + 1;
    memcpy(out, addr, head);
    memset(out + head, '0', k);
    snprintf(out + head + k, cap - head - k, "%s", colon + 1);
    return 0;
}

/* A data DEALER's send high-water mark for streams connections: it is per
 * connection, and each connection also holds the frame it is writing:
 * 4 + 1 frames per destination on one connection, about as many on up to
 * 2, 2 per connection beyond. */
static int data_sndhwm(uint32_t streams) {
    int hwm = streams <= 1 ? 4 : (int)(4 / streams) - 1;
    return hwm < 1 ? 1 : hwm; /* 0 would mean no limit */
}

/* Connects s to the connections from..to-1 of addr (stream_addr),
 * counting those made in *made. 0 or -1 (errno set). */
static int connect_streams(void *s, const char *addr, uint32_t from,
                           uint32_t to, uint32_t *made) {
    for (uint32_t k = from; k < to; k++) {
        char ep[300];
        if (stream_addr(ep, sizeof(ep), addr, k) != 0) {
            errno = EINVAL;
            return -1;
        }
        if (zmq_connect(s, ep) != 0)
            return -1;
        (*made)++;
    }
    return 0;
}

int mp__net_data_widen(void *s, const char *addr, uint32_t from, uint32_t to,
                       uint32_t *made) {
    *made = 0;
    /* ZeroMQ applies a new high-water mark to the connections it has; the
     * new ones take frames only once their handshake is done
     * (ZMQ_IMMEDIATE, copied into each connection as it is made), not
     * while the round that just began sends */
    if (from >= to || set_int(s, ZMQ_SNDHWM, data_sndhwm(to)) != 0 ||
        set_int(s, ZMQ_IMMEDIATE, 1) != 0)
        return -1;
    int rc = connect_streams(s, addr, from, to, made);
    int e = errno;
    if (set_int(s, ZMQ_IMMEDIATE, 0) != 0 && rc == 0)
        return -1;
    errno = e;
    return rc;
}

void *mp__net_data_dealer(void *zctx, const char *addr, uint32_t streams,
                          const uint8_t *rid, size_t rid_len, int64_t in_max,
                          const char *mon_ep, void **mon) {
    if (mon != NULL)
        *mon = NULL;
    /* connections of one DEALER share its routing id, and a ROUTER takes
     * one connection per routing id: one connection when the other side
     * answers on it */
    if (streams < 1 || rid != NULL)
        streams = 1;
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    if (s == NULL)
        return NULL;
    /* handshake commands pass through it, and data frames when the other
     * side answers on it */
    int64_t maxmsg = in_max > 4096 ? in_max : 4096;
    if (set_int(s, ZMQ_LINGER, 0) != 0 ||
        set_int(s, ZMQ_SNDHWM, data_sndhwm(streams)) != 0 ||
        set_int(s, ZMQ_RECONNECT_IVL, 100) ||
        set_int(s, ZMQ_RECONNECT_IVL_MAX, 2000) ||
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) != 0)
        goto fail;
    if (rid != NULL && (set_int(s, ZMQ_RCVHWM, 8) != 0 ||
                        zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, rid_len) != 0))
        goto fail;
    /* the monitor first, so that no connection's CONNECTED is missed */
    if (mon_ep != NULL && mon != NULL &&
        attach_monitor(zctx, s, mon_ep,
                       ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED, mon) != 0)
        goto fail;
    uint32_t made = 0;
    if (connect_streams(s, addr, 0, streams, &made) != 0)
        goto fail;
    return s;
fail:;
    int e = errno;
    if (mon != NULL && *mon != NULL) {
        mp__net_close(mon);
        zmq_socket_monitor(s, NULL, 0);
    }
    mp__net_close(&s);
    errno = e;
    return NULL;
}

/* Reads one monitor event: its id and value (the descriptor, for the
 * connection events), and with ep its endpoint text (cap bytes, NUL
 * terminated). Returns -1 if none. */
static int read_event_ep(void *mon, uint16_t *id, uint32_t *value, char *ep,
                         size_t cap) {
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    if (zmq_msg_recv(&a, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&a);
        return -1;
    }
    *id = 0;
    *value = 0;
    if (zmq_msg_size(&a) >= 6) {
        memcpy(id, zmq_msg_data(&a), 2);
        memcpy(value, (const uint8_t *)zmq_msg_data(&a) + 2, 4);
    } else if (zmq_msg_size(&a) >= 2) {
        memcpy(id, zmq_msg_data(&a), 2);
    }
    int more = zmq_msg_more(&a);
    zmq_msg_close(&a);
    if (ep != NULL && cap > 0)
        ep[0] = '\0';
    while (more) { /* the endpoint frame */
        zmq_msg_init(&b);
        if (zmq_msg_recv(&b, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&b);
            break;
        }
        if (ep != NULL && cap > 0) {
            size_t n = zmq_msg_size(&b) < cap - 1 ? zmq_msg_size(&b) : cap - 1;
            memcpy(ep, zmq_msg_data(&b), n);
            ep[n] = '\0';
        }
        more = zmq_msg_more(&b);
        zmq_msg_close(&b);
    }
    return 0;
}

static int read_event_raw(void *mon, uint16_t *id, uint32_t *value) {
    return read_event_ep(mon, id, value, NULL, 0);
}

/* Whether TCP socket fd is connected to the port of endpoint ep
 * ("tcp://host:port", the port maybe with leading zeros), and to its host
 * when that is a numeric address. */
static bool fd_matches(int fd, const char *ep) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0)
        return false;
    const char *colon = strrchr(ep, ':');
    if (colon == NULL)
        return false;
    unsigned long port = strtoul(colon + 1, NULL, 10);
    const char *host = strncmp(ep, "tcp://", 6) == 0 ? ep + 6 : ep;
    char h[64];
    size_t hl = (size_t)(colon - host);
    if (hl >= sizeof(h))
        return false;
    memcpy(h, host, hl);
    h[hl] = '\0';
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&sa;
        struct in_addr want;
        if (inet_pton(AF_INET, h, &want) == 1 &&
            want.s_addr != a->sin_addr.s_addr)
            return false;
        return ntohs(a->sin_port) == port;
    }
    if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&sa;
        struct in6_addr want;
        if (hl >= 2 && h[0] == '[') {
            memmove(h, h + 1, hl - 2);
            h[hl - 2] = '\0';
        }
        if (inet_pton(AF_INET6, h, &want) == 1 &&
            memcmp(&want, &a->sin6_addr, sizeof(want)) != 0)
            return false;
        return ntohs(a->sin6_port) == port;
    }
    return false;
}

bool mp__net_fd_connected_to(int fd, const char *ep) {
    return fd >= 0 && fd_matches(fd, ep);
}

int mp__net_read_connected(void *mon, int *fd, bool *down) {
    uint16_t id;
    uint32_t v;
    char ep[300];
    if (read_event_ep(mon, &id, &v, ep, sizeof(ep)) != 0)
        return -1;
    *down = id == ZMQ_EVENT_DISCONNECTED;
    /* the descriptor may have been closed and its number taken by another
     * socket since the event was sent: only a connection to the event's
     * own address counts */
    *fd = id == ZMQ_EVENT_CONNECTED && fd_matches((int)v, ep) ? (int)v : -1;
    return 0;
}

int mp__net_bind_cc(void *zctx, void *sock, const char *ep, const char *cc,
                    const char *mon_ep, int *cc_err) {
    *cc_err = 0;
    if (cc == NULL || cc[0] == '\0')
        return zmq_bind(sock, ep);
    /* the listener's descriptor arrives in the LISTENING event, which
     * zmq_bind sends from this thread before it returns; connections
     * accepted from it inherit an algorithm set on it */
    void *mon = NULL;
    if (zmq_socket_monitor(sock, mon_ep, ZMQ_EVENT_LISTENING) != 0)
        return -1;
    mon = zmq_socket(zctx, ZMQ_PAIR);
    if (mon == NULL || set_int(mon, ZMQ_LINGER, 0) != 0 ||
        set_int(mon, ZMQ_RCVTIMEO, 1000) != 0 ||
        zmq_connect(mon, mon_ep) != 0) {
        int e = errno;
        mp__net_close(&mon);
        zmq_socket_monitor(sock, NULL, 0);
        errno = e;
        return -1;
    }
    int rc = zmq_bind(sock, ep);
    int e = errno;
    if (rc == 0) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        uint16_t id = 0;
        uint32_t v = 0;
        *cc_err = EAGAIN;
        if (zmq_poll(&it, 1, 1000) > 0 && read_event_raw(mon, &id, &v) == 0 &&
            id == ZMQ_EVENT_LISTENING)
            *cc_err = mp_plat_tcp_cc_set((int)v, cc);
    }
    zmq_socket_monitor(sock, NULL, 0);
    mp__net_close(&mon);
    errno = e;
    return rc;
}

int mp__net_read_event(void *mon, mp_net_event_t *ev) {
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    if (zmq_msg_recv(&a, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&a);
        return -1;
    }
    uint16_t id = 0;
    if (zmq_msg_size(&a) >= 2)
        memcpy(&id, zmq_msg_data(&a), 2);
    int more = zmq_msg_more(&a);
    zmq_msg_close(&a);
    while (more) { /* the endpoint frame */
        zmq_msg_init(&b);
        if (zmq_msg_recv(&b, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&b);
            break;
        }
        more = zmq_msg_more(&b);
        zmq_msg_close(&b);
    }
    switch (id) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        *ev = MP_NET_EV_UP;
        break;
    case ZMQ_EVENT_DISCONNECTED:
        *ev = MP_NET_EV_DOWN;
        break;
    case ZMQ_EVENT_CONNECTED:
        *ev = MP_NET_EV_CONNECTED;
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        *ev = MP_NET_EV_AUTH_FAILED;
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        *ev = MP_NET_EV_PROTO_FAILED;
        break;
    default:
        *ev = MP_NET_EV_OTHER;
    }
    return 0;
}

int mp__net_z85_encode(char out[41], const uint8_t key[32]) {
    return zmq_z85_encode(out, key, 32) != NULL ? 0 : -1;
}
