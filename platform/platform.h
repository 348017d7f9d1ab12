/* SPDX-License-Identifier: MIT */
/*
 * platform.h - the OS contract. Everything the library needs from the
 * operating system goes through these functions, implemented once per OS
 * (platform/posix/ today). Core code never includes pthread.h or time.h.
 *
 * All functions return 0 on success and an errno value on failure unless
 * documented otherwise. Objects are caller-allocated (no hidden globals).
 */
#ifndef MP_PLATFORM_H
#define MP_PLATFORM_H

#include <stdint.h>

#if defined(_WIN32)
#error "platform/windows is not written yet"
#else
#include <pthread.h>
typedef struct mp_plat_mutex {
    pthread_mutex_t m;
} mp_plat_mutex_t;
typedef struct mp_plat_cond {
    pthread_cond_t c;
} mp_plat_cond_t;
typedef struct mp_plat_thread {
    pthread_t t;
} mp_plat_thread_t;
#endif

int mp_plat_mutex_init(mp_plat_mutex_t *m);
void mp_plat_mutex_destroy(mp_plat_mutex_t *m);
void mp_plat_mutex_lock(mp_plat_mutex_t *m);
void mp_plat_mutex_unlock(mp_plat_mutex_t *m);

/* Condition variable on the monotonic clock. */
int mp_plat_cond_init(mp_plat_cond_t *c);
void mp_plat_cond_destroy(mp_plat_cond_t *c);
void mp_plat_cond_broadcast(mp_plat_cond_t *c);
/* Waits until signalled or the monotonic clock reaches deadline_ms.
 * Returns 0 when signalled (or spuriously woken), ETIMEDOUT at the deadline. */
int mp_plat_cond_wait_until(mp_plat_cond_t *c, mp_plat_mutex_t *m,
                            uint64_t deadline_ms);

int mp_plat_thread_start(mp_plat_thread_t *t, void (*fn)(void *), void *arg);
void mp_plat_thread_join(mp_plat_thread_t *t);

/* Monotonic clock in milliseconds (arbitrary origin). */
uint64_t mp_plat_clock_ms(void);
/* Monotonic clock in microseconds. */
uint64_t mp_plat_clock_us(void);
void mp_plat_sleep_ms(uint32_t ms);
/* Wall-clock time (CLOCK_REALTIME) in whole seconds since the Unix epoch;
 * 0 if the clock cannot be read or is before 1970. Only for comparisons
 * with absolute times from outside (certificate validity), never for
 * deadlines. */
uint64_t mp_plat_wallclock_s(void);
/* The same clock in microseconds; 0 if it cannot be read. Only as a
 * starting point that a later process very likely exceeds (the order of
 * ephemeral keys), never for deadlines. */
uint64_t mp_plat_wallclock_us(void);

/* TCP congestion control per socket (Linux and FreeBSD: TCP_CONGESTION;
 * elsewhere every call returns ENOTSUP). Names are at most
 * MP_PLAT_CC_NAME_MAX - 1 characters. */
#define MP_PLAT_CC_NAME_MAX 16
/* Sets the algorithm of TCP socket fd. EPERM: the process may not pick it
 * (not in net.ipv4.tcp_allowed_congestion_control, and no CAP_NET_ADMIN);
 * ENOENT: not available in this kernel. */
int mp_plat_tcp_cc_set(int fd, const char *name);
/* The algorithm of TCP socket fd, into out (NUL-terminated). */
int mp_plat_tcp_cc_get(int fd, char out[MP_PLAT_CC_NAME_MAX]);
/* Whether a new TCP socket of this process (in its network namespace)
 * can use name: 0, or the error mp_plat_tcp_cc_set would give. */
int mp_plat_tcp_cc_probe(const char *name);
/* What new TCP sockets get when nobody sets it (the namespace's
 * net.ipv4.tcp_congestion_control), read from a new socket. */
int mp_plat_tcp_cc_default(char out[MP_PLAT_CC_NAME_MAX]);
/* Starts the algorithm of TCP socket fd afresh, as on a new connection but
 * from the socket's current window: whatever model it built of the path
 * (BBR's bandwidth and round-trip filters) is dropped. Linux ignores a
 * switch to the algorithm a socket already has, so this switches to reno
 * (allowed by default; cubic where reno is not, or when the socket has
 * reno) and back. 0, or the error of the switch that failed: if no first
 * switch was taken nothing changed; if the switch back failed the socket
 * is left on the other algorithm. */
int mp_plat_tcp_cc_restart(int fd);
/* BBR's estimate of the bandwidth of TCP socket fd's path, in bytes per
 * second (Linux: TCP_CC_INFO); ENOTSUP where the socket does not use
 * bbr or the system does not say. */
int mp_plat_tcp_bbr_bw(int fd, uint64_t *bytes_per_s);
/* What TCP socket fd's connection reports of its sending (Linux:
 * TCP_INFO): segments sent, of them sent again (retransmissions, probes
 * of the tail included), the smoothed round trip in microseconds, the
 * segment size. ENOTSUP where the system does not say. */
int mp_plat_tcp_sent(int fd, uint64_t *segs, uint64_t *retrans,
                     uint32_t *rtt_us, uint32_t *mss);
/* A number that names socket fd's connection and no other while the
 * system runs (Linux: SO_COOKIE), to tell it from a later socket that got
 * the same descriptor number; ENOTSUP where the system has none. */
int mp_plat_sock_cookie(int fd, uint64_t *cookie);

#endif
