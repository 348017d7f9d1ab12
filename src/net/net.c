/* SPDX-License-Identifier: MIT */
/*
 * net.c - ZeroMQ socket helpers: control DEALERs with CURVE and a monitor,
 * data DEALERs and monitor-event decoding (see net.h).
 */
#include "net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (zmq_socket_monitor(s, mon_ep,
                           ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECTED |
                               ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
        goto fail;
    *mon = zmq_socket(zctx, ZMQ_PAIR);
    if (*mon == NULL)
        goto fail;
    set_int(*mon, ZMQ_LINGER, 0);
    if (zmq_connect(*mon, mon_ep) != 0)
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

void *mp__net_data_dealer(void *zctx, const char *addr, const uint8_t *rid,
                          size_t rid_len, int64_t in_max) {
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    if (s == NULL)
        return NULL;
    /* handshake commands pass through it, and data frames when the other
     * side answers on it */
    int64_t maxmsg = in_max > 4096 ? in_max : 4096;
    if (set_int(s, ZMQ_LINGER, 0) != 0 || set_int(s, ZMQ_SNDHWM, 4) != 0 ||
        set_int(s, ZMQ_RCVHWM, 8) != 0 || set_int(s, ZMQ_RECONNECT_IVL, 100) ||
        set_int(s, ZMQ_RECONNECT_IVL_MAX, 2000) ||
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) != 0 ||
        zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, rid_len) != 0 ||
        zmq_connect(s, addr) != 0) {
        int e = errno;
        mp__net_close(&s);
        errno = e;
        return NULL;
    }
    return s;
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
