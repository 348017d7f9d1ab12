/* SPDX-License-Identifier: MIT */
/*
 * netns.h - a multi-host test bed on one Linux machine: one network
 * namespace per peer, each with a veth into a bridge that lives in a
 * "switch" namespace of its own (the host's interfaces are never touched),
 * peer i at 10.77.0.(i+1)/24. Per-peer link faults: random drop with
 * nftables inside the peer's namespace (per direction), bandwidth limits
 * with tc tbf (upload in the peer's namespace, download on the switch side
 * of its veth), and partitions by address set on the bridge. The WAN
 * emulator on top (nn_link): one-way delay and jitter of the packets a
 * peer receives, held by a small program (nn-delay) behind an iptables
 * NFQUEUE rule in the peer's PREROUTING; random loss in the peer's
 * PREROUTING too (nftables numgen); rate by tbf; and NAT (nn_nat): peers
 * moved behind a masquerading router namespace, on a private network of
 * their own, so they can dial out and cannot be dialled.
 *
 * Everything is named mpt<pid>-..., so parallel runs never collide. It is
 * removed by nn_close(), which also runs from atexit and from SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT and SIGABRT handlers; leftovers of runs that
 * died by SIGKILL (their pid no longer exists) are removed by the next
 * nn_open(). Peer processes get PR_SET_PDEATHSIG, so they never outlive
 * the test process.
 *
 * One bed per process; not thread-safe. Needs root, iproute2 and nftables.
 */
#ifndef MP_NN_NETNS_H
#define MP_NN_NETNS_H

#include <stddef.h>
#include <stdint.h>

#include "integration/harness.h"

#define NN_MAX_PEERS 32
#define NN_MAX_NATS 4

/* Exit code that makes ctest report a skip (SKIP_RETURN_CODE). */
#define NN_SKIP 77

/* Creates the switch and n peer namespaces (peers 0..n-1). If this machine
 * cannot host them (not root, no ip/nft/tc, no namespaces, no nf_tables or
 * tbf), prints "SKIP: <reason>" and exits with NN_SKIP. Other setup
 * failures print the failing command and exit 1. */
void nn_open(size_t n);

/* Removes everything nn_open created. Idempotent; async-signal-safe. */
void nn_close(void);

/* Makes the peers of cfg start inside the bed: peer cfg->index enters the
 * namespace of that index and listens on tcp://10.77.0.(index+1):0. */
void nn_use(it_peer_cfg_t *cfg);

/* Random drop on peer i's link, in tenths of a percent (0..1000), for
 * packets it receives (in) and sends (out). 0, 0 removes the rules.
 * Returns 0 or -1. */
int nn_loss(size_t i, unsigned in_permille, unsigned out_permille);

/* Limits peer i's link to mbit Mbit/s in both directions (tbf); 0 removes
 * the limit. Returns 0 or -1. */
int nn_rate(size_t i, unsigned mbit);

/* Cuts the peers with side[i] != 0 off from the others: the bridge drops
 * every IPv4 packet between the two address sets. Returns 0 or -1. */
int nn_partition(const int *side, size_t n);
/* Removes the partition. Returns 0 or -1. */
int nn_heal(void);

/* One peer's access link as the WAN emulator sets it (nn_link). Delay,
 * jitter and loss act on the packets the peer receives, in its PREROUTING
 * hook: a packet from a to b waits b's delay and is dropped with b's loss,
 * so between two peers set alike the round trip is 2 * delay_us and each
 * direction loses loss_permille. Holding or dropping on the sending side
 * would be wrong on Linux: held packets count against TCP small queues
 * (capping every flow) and a drop in the output hook is a local error that
 * TCP retries at once instead of a loss. */
typedef struct nn_link {
    unsigned delay_us;      /* one-way delay into the peer; 0: none */
    unsigned jitter_us;     /* uniform +-jitter (never reorders); <= delay */
    unsigned loss_permille; /* random drop of received packets, 0..1000 */
    unsigned rate_mbit;     /* tbf both directions; 0: unlimited */
    int offload;            /* nonzero: keep TSO/GSO/GRO (fewer, larger
                               packets: cheaper, but loss would hit whole
                               64 KiB super-packets); never with loss */
} nn_link_t;

/* Whether nn_link can delay packets here; if not, writes why (at most
 * cap bytes) and returns 0. (Needs the nn-delay program, built with
 * libnetfilter-queue, iptables and the kernel's NFQUEUE target.) */
int nn_can_delay(char *why, size_t cap);

/* Sets peer i's access link (replacing what nn_link set before). Returns
 * 0 or -1 (printing what failed). */
int nn_link(size_t i, const nn_link_t *link);

/* Moves peers[0..k) behind NAT router number nat (0..NN_MAX_NATS-1): a
 * namespace with one leg on the switch (public address 10.77.0.(201+nat))
 * and a bridge for its private network 10.78.nat.0/24 (peer i at
 * 10.78.nat.(i+1), router .254), which masquerades what leaves and lets in
 * only replies to connections from inside. The public peers have no route
 * to the private network. Call before nn_link for those peers and before
 * they start. Returns 0 or -1. */
int nn_nat(unsigned nat, const size_t *peers, size_t k);

/* Runs an nftables script (nft -f) in peer i's namespace, or in NAT
 * router nat's (nn_nat_nft): e.g. a filter that drops new inbound
 * connections, or a port forward. Returns 0 or -1 (printing the script). */
int nn_peer_nft(size_t i, const char *script);
int nn_nat_nft(unsigned nat, const char *script);

/* Peer i's address ("10.77.0.1", or its private one behind a NAT). */
const char *nn_addr(size_t i);
/* The public address of NAT router nat. */
const char *nn_nat_addr(unsigned nat);

/* Moves the calling process into peer i's namespace, or back to the
 * caller's own with i = (size_t)-1; sockets opened in between stay in
 * peer i's network. Single-threaded callers only. Returns 0 or -1. */
int nn_enter(size_t i);

/* Moves the calling process into the switch's namespace (back with
 * nn_enter((size_t)-1)). Returns 0 or -1. */
int nn_enter_switch(void);

/* Gives the switch's bridge an address of its own, 10.77.0.254, so that a
 * process in the switch's namespace can serve the peers (e.g. a job
 * launcher's rendezvous); its packets to and from peer i cross peer i's
 * link. Returns the address, or NULL. */
const char *nn_switch_host(void);

/* Writes the path prefix of the peer namespaces, "/run/netns/mpt<pid>-p"
 * (append the peer's index), for a process that enters one by itself.
 * Returns 0 or -1. */
int nn_peer_ns_prefix(char *buf, size_t cap);

/* For a process a job launcher started (no test bed state of its own):
 * enters the namespace at path prefix + index (index: decimal digits) and
 * executes argv[0] with argv. Returns -1 (errno set) only on failure. */
int nn_exec_in(const char *prefix, const char *index, char *const argv[]);

/* Bytes peer i's interface received and sent so far. Returns 0 or -1. */
int nn_bytes(size_t i, uint64_t *rx, uint64_t *tx);

/* Resets the established TCP connections in peer i's namespace that match
 * the ss(8) filter (e.g. "not ( sport = :5000 )"): `ss -K`, which aborts
 * each socket and sends the other end a RST, as a Wi-Fi blip or a NAT
 * that forgot the connection would. Needs a kernel with
 * CONFIG_INET_DIAG_DESTROY. Returns 0 or -1. */
int nn_reset_tcp(size_t i, const char *filter);

/* Resident set size of a process in KiB, or -1. */
long nn_rss_kib(int pid);

#endif
