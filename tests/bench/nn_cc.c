/* SPDX-License-Identifier: MIT */
/*
 * nn_cc.c - libnn-cc.so, an LD_PRELOAD shim for moshpit-bench on the
 * emulated network: every TCP socket a benchmark child opens gets the
 * congestion control algorithm named in NN_TCP_CC (setsockopt
 * TCP_CONGESTION right after socket()), so moshpit, which cannot choose it
 * through libzmq, and Gloo run with the same one. A network namespace can
 * only make an algorithm its default if the host lists it in
 * net.ipv4.tcp_allowed_congestion_control; per socket, a process with
 * CAP_NET_ADMIN may pick any available one. Sockets accepted from a
 * listener inherit the listener's. A failure is reported once on stderr.
 */
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

__attribute__((visibility("default"))) int socket(int domain, int type,
                                                  int protocol) {
    static int (*real)(int, int, int);
    static int warned;
    if (real == NULL) {
        void *sym = dlsym(RTLD_NEXT, "socket");
        memcpy(&real, &sym, sizeof(real)); /* POSIX: same representation */
    }
    if (real == NULL)
        return -1;
    int fd = real(domain, type, protocol);
    const char *cc = getenv("NN_TCP_CC");
    if (fd >= 0 && cc != NULL && cc[0] != '\0' &&
        (domain == AF_INET || domain == AF_INET6) &&
        (type & 0xf) == SOCK_STREAM &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc,
                   (socklen_t)strlen(cc)) != 0 &&
        !warned) {
        warned = 1;
        perror("libnn-cc: setsockopt(TCP_CONGESTION)");
    }
    return fd;
}
