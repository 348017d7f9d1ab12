/* SPDX-License-Identifier: MIT */
/*
 * platform_tcp_info.c - mp_plat_tcp_sent (platform.h). A file of its own:
 * the counters it reads (tcpi_segs_out) are only in the kernel's
 * <linux/tcp.h>, whose struct tcp_info clashes with the C library's
 * <netinet/tcp.h> that platform_posix.c includes.
 */
#include "platform.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#if defined(__linux__)
#include <linux/tcp.h>
#endif

int mp_plat_tcp_sent(int fd, uint64_t *segs, uint64_t *retrans,
                     uint32_t *rtt_us, uint32_t *mss) {
    /* TCP_ZEROCOPY_RECEIVE (the headers of Linux 4.18 and later) stands
     * for headers that have tcpi_segs_out (4.2): older ones build the
     * ENOTSUP branch */
#if defined(__linux__) && defined(TCP_INFO) && defined(TCP_ZEROCOPY_RECEIVE)
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return errno != 0 ? errno : EIO;
    /* kernels before 4.2 stop short of the segment counters */
    if (len < offsetof(struct tcp_info, tcpi_segs_in))
        return ENOTSUP;
    *segs = ti.tcpi_segs_out;
    *retrans = ti.tcpi_total_retrans;
    *rtt_us = ti.tcpi_rtt;
    *mss = ti.tcpi_snd_mss;
    return 0;
#else
    (void)fd;
    (void)segs;
    (void)retrans;
    (void)rtt_us;
    (void)mss;
    return ENOTSUP;
#endif
}
