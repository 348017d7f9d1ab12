/* SPDX-License-Identifier: MIT */
/*
 * engine_streams.c - the data connections between peers: which TCP
 * congestion control they use (config congestion: bbr where this process
 * may pick it, set on the data ROUTER's listening socket, which accepted
 * connections inherit, and on every connection of a data DEALER as its
 * monitor reports it) and how many connections carry the parts to one
 * peer (config data_streams), so that a long lossy link is not held to
 * what one loss-based TCP connection carries; and, at each round's start,
 * BBR started afresh on a connection whose model the last round's lossy
 * tail collapsed (docs/DESIGN.md, "Data connections").
 */
#include "engine_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "net/net.h"

static bool is_bbr(const char *cc) {
    return strncmp(cc, "bbr", 3) == 0;
}

/* The algorithm the data connections use: the one set per socket, else
 * the system's. */
static const char *cc_used(const moshpit_t *mp) {
    return mp->cc[0] != '\0' ? mp->cc : mp->cc_system;
}

moshpit_err_t mp__engine_streams_setup(moshpit_t *mp, const char *bind_ep) {
    const char *want = mp->cfg.congestion;
    mp->cfg.congestion = NULL; /* read only during moshpit_open */
    bool automatic = want == NULL || want[0] == '\0';
    if (automatic)
        want = "bbr";
    mp->cc[0] = '\0';
    if (mp_plat_tcp_cc_default(mp->cc_system) != 0)
        snprintf(mp->cc_system, sizeof(mp->cc_system), "unknown");
    if (strcmp(want, "default") != 0) {
        int e = mp_plat_tcp_cc_probe(want);
        if (e == 0 && strcmp(want, mp->cc_system) == 0) {
            /* new sockets get it anyway: no monitors, no system calls */
        } else if (e == 0) {
            snprintf(mp->cc, sizeof(mp->cc), "%s", want);
        } else if (automatic) {
            mp__engine_log(mp, MOSHPIT_LOG_INFO,
                           "congestion control bbr not usable here (%s): "
                           "data connections keep the system's %s",
                           strerror(e), mp->cc_system);
        } else {
            mp__engine_log(
                mp, MOSHPIT_LOG_ERROR,
                "congestion control '%s' cannot be used: %s (%s; "
                "unprivileged processes may pick those listed in "
                "net.ipv4.tcp_allowed_congestion_control; \"default\" "
                "keeps the system's, %s)",
                want, strerror(e),
                e == ENOENT  ? "not available in this kernel"
                : e == EPERM ? "not allowed for this process"
                             : "refused",
                mp->cc_system);
            return MOSHPIT_EINVAL;
        }
    }
    const char *used = cc_used(mp);
    mp->streams = mp->cfg.data_streams != 0 ? mp->cfg.data_streams
                  : is_bbr(used)            ? 1u
                                            : 4u;
    /* at most 8 data frames (2 MiB of 256 KiB parts) queued per sender,
     * then TCP pushes back: memory bounded by parts and members, not by
     * the vector (docs/DESIGN.md, "What a peer needs"); the high-water
     * mark counts per connection, and each connection also holds the
     * frame it is reading, so a sender with as many connections as this
     * peer has 8 + 1 frames here on one, 8 on 2 or 4, 2 per connection
     * beyond */
    int rcvhwm = mp->streams == 1 ? 8 : (int)(8 / mp->streams) - 1;
    if (rcvhwm < 1)
        rcvhwm = 1; /* 0 would mean no limit */
    if (zmq_setsockopt(mp->data, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm)) != 0)
        return MOSHPIT_ESYS;
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://moshpit-dlisten-%u",
             ++mp->mon_seq);
    int cc_err = 0;
    if (mp__net_bind_cc(mp->zctx, mp->data, bind_ep, mp->cc, mon_ep, &cc_err) !=
        0)
        return MOSHPIT_ESYS;
    if (cc_err != 0)
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "congestion control %s not set on the data listener: "
                       "%s",
                       mp->cc, strerror(cc_err));
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "data connections: congestion control %s%s (system "
                   "default %s), %u per peer",
                   used, mp->cc[0] != '\0' ? " set per socket" : "",
                   mp->cc_system, mp->streams);
    return MOSHPIT_OK;
}

bool mp__engine_data_dial(moshpit_t *mp, mp_peer_t *p, bool reorder_ok) {
    /* always a monitor: besides setting the algorithm on new connections,
     * a connection that breaks mid-round lost what was in its buffers,
     * and the mate is asked what it holds (engine_resume.c) */
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://moshpit-dmon-%u", ++mp->mon_seq);
    /* a peer of an older version drops frames that overtake others as
     * replays: one connection to it. An outbound-only peer is answered on
     * its own connection, which its routing id names, and a ROUTER takes
     * one connection per routing id: with more than one, ours go out on
     * connections without one (their ROUTER reads every frame's session
     * from its tag) and the answers come on one more that has it */
    p->reorder_ok = reorder_ok;
    p->nstreams = reorder_ok ? (uint8_t)mp->streams : 1;
    bool split = mp->outbound && p->nstreams > 1;
    bool named = mp->outbound && !split;
    p->data = mp__net_data_dealer(
        mp->zctx, p->data_addr, p->nstreams, named ? p->my_drid : NULL,
        sizeof(p->my_drid), named ? MP_DATA_WIRE_MAX : 0, mon_ep, &p->dmon);
    if (p->data == NULL || !split)
        return p->data != NULL;
    snprintf(mon_ep, sizeof(mon_ep), "inproc://moshpit-dmon-%u", ++mp->mon_seq);
    p->data_rx = mp__net_data_dealer(mp->zctx, p->data_addr, 1, p->my_drid,
                                     sizeof(p->my_drid), MP_DATA_WIRE_MAX,
                                     mon_ep, &p->dmon_rx);
    if (p->data_rx == NULL) {
        int e = errno;
        mp__engine_data_close(p);
        errno = e;
        return false;
    }
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "data connections to %.8s: %u to send on, 1 it answers "
                   "on (we are outbound-only)",
                   p->id_txt, p->nstreams);
    return true;
}

void mp__engine_data_close(mp_peer_t *p) {
    if (p->dmon != NULL && p->data != NULL)
        zmq_socket_monitor(p->data, NULL, 0);
    mp__net_close(&p->dmon);
    mp__net_close(&p->data);
    if (p->dmon_rx != NULL && p->data_rx != NULL)
        zmq_socket_monitor(p->data_rx, NULL, 0);
    mp__net_close(&p->dmon_rx);
    mp__net_close(&p->data_rx);
    p->ndfd = 0;
}

/* Keeps fd among p's data connections (the newest MP_DATA_STREAMS_MAX:
 * entries of connections that broke are dropped once they fail the
 * check, or pushed out here), with the connection's cookie where the
 * system has one. A new connection that got an old one's number starts
 * with no best estimate. */
static void remember_fd(mp_peer_t *p, int fd) {
    uint64_t cookie = 0;
    (void)mp_plat_sock_cookie(fd, &cookie); /* 0: none */
    uint32_t k = 0;
    while (k < p->ndfd && p->dfd[k] != fd)
        k++;
    if (k == p->ndfd) {
        if (p->ndfd == MP_DATA_STREAMS_MAX) {
            memmove(p->dfd, p->dfd + 1,
                    (MP_DATA_STREAMS_MAX - 1) * sizeof(int));
            memmove(p->dck, p->dck + 1,
                    (MP_DATA_STREAMS_MAX - 1) * sizeof(uint64_t));
            memmove(p->dbw, p->dbw + 1,
                    (MP_DATA_STREAMS_MAX - 1) * sizeof(uint64_t));
            p->ndfd--;
        }
        k = p->ndfd++;
    } else if (p->dck[k] == cookie && cookie != 0) {
        return; /* the same connection, named twice */
    }
    p->dfd[k] = fd;
    p->dck[k] = cookie;
    p->dbw[k] = 0;
}

/* Whether entry k still names the connection it was taken for: the same
 * cookie where the system has them, and connected to p's data address. */
static bool fd_still_ours(const mp_peer_t *p, uint32_t k) {
    uint64_t cookie = 0;
    if (p->dck[k] != 0 &&
        (mp_plat_sock_cookie(p->dfd[k], &cookie) != 0 || cookie != p->dck[k]))
        return false;
    return mp__net_fd_connected_to(p->dfd[k], p->data_addr);
}

/* BBR keeps its model of a path (the most bandwidth delivered over its
 * last ten round trips) through the idle time between rounds, and a
 * round's burst that ends in loss recovery can leave only samples of its
 * slow tail in it: on the lossy test link a connection began a round
 * paced at 0.6 Mbit/s of its 14, and BBR's probing (a quarter more every
 * eight round trips) took 4.4 s to reach 3.7 Mbit/s (docs/RESULTS.md,
 * "BBR's model started afresh"). A connection whose estimate at a round's
 * start is below half of the best seen at earlier starts
 * (mp__link_model_stale) gets the algorithm started afresh
 * (mp_plat_tcp_cc_restart): BBR's startup then doubles from the
 * connection's current window each round trip. Healthy connections keep
 * their model: restarting every connection every round made a lossless
 * round of 16 MiB 13% slower (startup's overshoot). A connection that a
 * restart left on the other algorithm (the switch back refused) is given
 * its own again first. */
uint32_t mp__engine_data_cc_restart(moshpit_t *mp, mp_peer_t *p,
                                    uint32_t *seen) {
    const char *used = cc_used(mp);
    if (!is_bbr(used))
        return 0;
    uint32_t done = 0, k = 0;
    while (k < p->ndfd) {
        int fd = p->dfd[k];
        if (!fd_still_ours(p, k)) {
            /* closed, or no longer ours */
            p->ndfd--;
            p->dfd[k] = p->dfd[p->ndfd];
            p->dck[k] = p->dck[p->ndfd];
            p->dbw[k] = p->dbw[p->ndfd];
            continue;
        }
        char now[MP_PLAT_CC_NAME_MAX];
        if (mp_plat_tcp_cc_get(fd, now) == 0 && strcmp(now, used) != 0 &&
            mp_plat_tcp_cc_set(fd, used) == 0)
            p->dbw[k] = 0; /* back on its own, with a new model */
        uint64_t bw = 0;
        if (mp_plat_tcp_bbr_bw(fd, &bw) != 0) {
            k++;
            continue;
        }
        (*seen)++;
        if (!mp__link_model_stale(&p->dbw[k], bw)) {
            k++;
            continue;
        }
        int e = mp_plat_tcp_cc_restart(fd);
        if (e == 0) {
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "data connection to %.8s: BBR's estimate %llu "
                           "kbit/s, below half of its best: started afresh",
                           p->id_txt, (unsigned long long)(bw / 125));
            done++;
        } else {
            if (mp_plat_tcp_cc_get(fd, now) != 0)
                snprintf(now, sizeof(now), "unknown");
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "congestion control not started afresh on a data "
                           "connection to %.8s: %s (it uses %s now)",
                           p->id_txt, strerror(e), now);
        }
        k++;
    }
    return done;
}

/* A loss-based connection (cubic, reno) is held near
 * MSS / RTT x 1.22 / sqrt(p) by its loss rate: 1.4 Mbit/s at RTT 100 ms
 * and 1%, so 4 connections carry 5.7 Mbit/s to a mate, 40 to 7 of them,
 * where the link may have 100 (docs/RESULTS.md, "Congestion control and
 * streams per pair on the lossy link"). What the kernel counts on p's
 * connections since they opened decides (mp__link_streams_for_loss); the
 * connections added stay until the session closes. p's entries of
 * connections that broke are skipped here (and dropped by
 * mp__engine_data_cc_restart where bbr is used, or pushed out by newer
 * ones: remember_fd). */
uint32_t mp__engine_data_widen(moshpit_t *mp, mp_peer_t *p) {
    const char *used = cc_used(mp);
    if (mp->cfg.data_streams != 0 || is_bbr(used) || p->data == NULL ||
        p->nstreams <= 1 || p->nstreams >= MP_DATA_STREAMS_LOSSY)
        return 0;
    mp_link_loss_t l = {0, 0, 0, 0};
    for (uint32_t k = 0; k < p->ndfd; k++) {
        uint64_t segs = 0, re = 0;
        uint32_t rtt = 0, mss = 0;
        /* read first, then check that the number still named the
         * connection it was taken for (ZeroMQ's I/O thread owns it) */
        if (mp_plat_tcp_sent(p->dfd[k], &segs, &re, &rtt, &mss) != 0 ||
            !fd_still_ours(p, k))
            continue;
        l.segs += segs;
        l.retrans += re;
        if (rtt != 0 && (l.rtt_us == 0 || rtt < l.rtt_us))
            l.rtt_us = rtt;
        if (mss != 0)
            l.mss = mss;
    }
    uint32_t want =
        mp__link_streams_for_loss(p->nstreams, MP_DATA_STREAMS_LOSSY, &l);
    if (want <= p->nstreams)
        return 0;
    uint32_t had = p->nstreams, made = 0;
    if (mp__net_data_widen(p->data, p->data_addr, had, want, &made) != 0) {
        mp__engine_log(mp, MOSHPIT_LOG_WARN,
                       "data connections to %.8s: %u of %u more made: %s",
                       p->id_txt, made, want - had, strerror(errno));
        p->nstreams = MP_DATA_STREAMS_LOSSY; /* not tried again */
        return made;
    }
    p->nstreams = (uint8_t)want;
    mp__engine_log(mp, MOSHPIT_LOG_INFO,
                   "data connections to %.8s: %u instead of %u (%s held by "
                   "loss: %llu of %llu segments sent again, RTT %u ms)",
                   p->id_txt, want, had, used, (unsigned long long)l.retrans,
                   (unsigned long long)l.segs, l.rtt_us / 1000);
    return made;
}

/* A CONNECTED event's descriptor belongs to ZeroMQ's I/O thread: if that
 * connection broke before this reads the event, the number may already
 * name another descriptor of this process. mp__net_read_connected gives
 * it only while it is connected to the event's address; what remains (a
 * new connection to the same address between the check and the call)
 * would give that connection the data plane's algorithm. The descriptor
 * is kept for the restart at a round's start, which checks it again. */
void mp__engine_data_read_monitor(moshpit_t *mp, mp_peer_t *p,
                                  uint32_t *breaks) {
    int fd;
    bool down;
    while (p->dmon != NULL &&
           mp__net_read_connected(p->dmon, &fd, &down) == 0) {
        if (down)
            (*breaks)++;
        if (fd >= 0)
            remember_fd(p, fd);
        if (fd < 0 || mp->cc[0] == '\0')
            continue;
        int e = mp_plat_tcp_cc_set(fd, mp->cc);
        if (e != 0)
            mp__engine_log(mp, MOSHPIT_LOG_WARN,
                           "congestion control %s not set on a data "
                           "connection to %.8s: %s",
                           mp->cc, p->id_txt, strerror(e));
        else
            mp__engine_log(mp, MOSHPIT_LOG_DEBUG,
                           "data connection to %.8s: congestion control %s",
                           p->id_txt, mp->cc);
    }
}

void mp__engine_data_on_monitor(moshpit_t *mp, mp_peer_t *p) {
    uint32_t breaks = 0;
    mp__engine_data_read_monitor(mp, p, &breaks);
    for (uint32_t k = 0; k < breaks; k++)
        mp__engine_resume_data_down(mp, p);
}

void mp__engine_data_on_rx_monitor(moshpit_t *mp, mp_peer_t *p) {
    int fd;
    bool down;
    bool broke = false;
    while (p->dmon_rx != NULL &&
           mp__net_read_connected(p->dmon_rx, &fd, &down) == 0)
        broke |= down;
    if (broke) /* one connection: asking once covers every break read */
        mp__engine_resume_rx_down(mp, p);
}
