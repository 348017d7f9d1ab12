/* SPDX-License-Identifier: MIT */
/*
 * netns.h - a multi-host test bed on one Linux machine: one network
 * namespace per peer, each with a veth into a bridge that lives in a
 * "switch" namespace of its own (the host's interfaces are never touched),
 * peer i at 10.77.0.(i+1)/24. Per-peer link faults: random drop with
 * nftables inside the peer's namespace (per direction), bandwidth limits
 * with tc tbf (upload in the peer's namespace, download on the switch side
 * of its veth), and partitions by address set on the bridge.
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

/* Resident set size of a process in KiB, or -1. */
long nn_rss_kib(int pid);

#endif
