/* SPDX-License-Identifier: MIT */
/*
 * test_int_shm.c - parts to group mates on this host through shared memory
 * (config shared_memory; docs/DESIGN.md, "Mates on this host") with real
 * peer processes on loopback, all on one host: every pair of peers with
 * shared memory on sends its parts through a region instead of over TCP.
 *
 * Pass rule:
 * 1. Four peers with the default (MOSHPIT_SHM_AUTO), one group of 4 for
 *    ROUNDS rounds of fresh vectors of COUNT values (several parts per
 *    share): every round OK in the group of all 4 and exact (1e-5 relative
 *    from the weighted mean of all 4); every peer took the regions of its 3
 *    mates ("come through shared memory") and logged, for every round after
 *    the first (the first may begin before the regions are taken), parts
 *    both sent and received through shared memory.
 * 2. Two peers AUTO and two MOSHPIT_SHM_OFF in one group of 4: rounds as in
 *    1, exact; the OFF peers log no part through shared memory and take no
 *    region; each AUTO peer takes the region of one mate only and, in every
 *    round after the first, sends and receives parts through shared memory,
 *    with the other AUTO peer only: what one received that way in a round is
 *    at most what the other sent that way, and both counts are below the
 *    fewest parts a member of a group of 4 sends (and receives) in a round:
 *    the parts to and from the OFF peers went over TCP (all_mates_min).
 * 3. After each swarm closed, no region made by one of its peers is left
 *    in /dev/shm (the names there before the test are not counted; a new
 *    name is the peers' when its header names one of them as its maker).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "harness.h"

#define N 4
#define ROUNDS 4
#define COUNT 300000
#define NAMES_MAX 256

/* ---- /dev/shm ---- */

typedef struct names {
    char name[NAMES_MAX][64];
    size_t n;
} names_t;

/* The moshpit-* names in /dev/shm now. */
static void list_regions(names_t *out) {
    out->n = 0;
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && out->n < NAMES_MAX) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "moshpit-", 8) == 0 &&
            len < sizeof(out->name[0]))
            memcpy(out->name[out->n++], e->d_name, len + 1);
    }
    closedir(d);
}

static int listed(const names_t *ns, const char *name) {
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->name[i], name) == 0)
            return 1;
    return 0;
}

/* The maker's process id in a region's header (u32 little-endian at 20,
 * src/net/shm.c), or 0 if it cannot be read. */
static pid_t region_maker(const char *name) {
    char path[128];
    uint8_t hdr[24];
    snprintf(path, sizeof(path), "/dev/shm/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, hdr, sizeof(hdr), 0);
    close(fd);
    if (n != (ssize_t)sizeof(hdr))
        return 0;
    return (pid_t)((uint32_t)hdr[20] | (uint32_t)hdr[21] << 8 |
                   (uint32_t)hdr[22] << 16 | (uint32_t)hdr[23] << 24);
}

/* Check 3: no name that was not there before the test and that one of
 * pids made. Names of other processes (tests running alongside) are only
 * shown. */
static void check_no_regions_left(const char *what, const names_t *before,
                                  const pid_t *pids, size_t n) {
    names_t now;
    list_regions(&now);
    size_t ours = 0, other = 0;
    for (size_t i = 0; i < now.n; i++) {
        if (listed(before, now.name[i]))
            continue;
        pid_t maker = region_maker(now.name[i]);
        int mine = 0;
        for (size_t k = 0; k < n; k++)
            mine |= maker == pids[k];
        if (mine) {
            ours++;
            IT_CHECK(0, "%s: /dev/shm/%s of peer process %d left behind", what,
                     now.name[i], (int)maker);
        } else {
            other++;
            printf("%s: /dev/shm/%s is new but of process %d, not a peer\n",
                   what, now.name[i], (int)maker);
        }
    }
    printf("%s: %zu regions of the peers left in /dev/shm (%zu new of "
           "others)\n",
           what, ours, other);
}

/* ---- the peers' logs ---- */

typedef struct shm_round {
    uint64_t gid;        /* the round's group id */
    int logged;          /* its "through shared memory" line was there */
    unsigned sent, recv; /* the counts that line gave */
    unsigned pe;         /* values per part ("group of" line) */
} shm_round_t;

typedef struct peer_log {
    shm_round_t round[ROUNDS];
    int rounds; /* "group of" lines: the rounds the peer took part in */
    int taken;  /* mates whose regions it took ("parts from <id> come
                   through shared memory"; a mate counted once even if
                   a new session made it take a new region) */
    char taken_id[8][9];
    int shm_any; /* lines with "through shared memory" at all */
} peer_log_t;

/* Reads peer i's log file: its rounds in order (from the "group of" line
 * of each), the parts each sent and received through shared memory, and
 * the mates' regions it took. */
static void read_log(const char *dir, size_t i, peer_log_t *pl) {
    char path[512], line[1100];
    memset(pl, 0, sizeof(*pl));
    snprintf(path, sizeof(path), "%s/peer-%zu.log", dir, i);
    FILE *f = fopen(path, "r");
    IT_CHECK(f != NULL, "no log file %s", path);
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *t = strstr(line, "round ");
        unsigned long long gid = 0;
        unsigned a = 0, b = 0, pe = 0;
        if (strstr(line, "through shared memory") != NULL)
            pl->shm_any++;
        const char *from = strstr(line, "parts from ");
        char id[9];
        if (strstr(line, "come through shared memory") != NULL &&
            from != NULL && sscanf(from, "parts from %8s", id) == 1) {
            int seen = 0;
            for (int k = 0; k < pl->taken; k++)
                seen |= strcmp(pl->taken_id[k], id) == 0;
            if (!seen && pl->taken < 8)
                memcpy(pl->taken_id[pl->taken++], id, sizeof(id));
        }
        if (t == NULL)
            continue;
        if (sscanf(t, "round %llx: group of %u, index %u, parts of %u values",
                   &gid, &a, &b, &pe) == 4) {
            IT_CHECK(pl->rounds < ROUNDS, "peer %zu: more than %d rounds", i,
                     ROUNDS);
            if (pl->rounds < ROUNDS) {
                pl->round[pl->rounds].pe = pe;
                pl->round[pl->rounds++].gid = gid;
            }
        } else if (sscanf(t,
                          "round %llx: %u parts sent and %u received through "
                          "shared memory",
                          &gid, &a, &b) == 3) {
            int hit = 0;
            for (int r = 0; r < pl->rounds; r++)
                if (pl->round[r].gid == gid && !pl->round[r].logged) {
                    pl->round[r].logged = 1;
                    pl->round[r].sent = a;
                    pl->round[r].recv = b;
                    hit = 1;
                }
            IT_CHECK(hit,
                     "peer %zu: shared memory counts of round %016llx, "
                     "not one of its rounds",
                     i, gid);
        }
    }
    fclose(f);
}

/* The fewest parts a member of a group of N sends in a round of COUNT
 * values cut in parts of pe (and the fewest it receives): the scatter parts
 * of every other share and N - 1 copies of its own share's result, P +
 * (N - 2) p parts, where the parts of all shares P are at least
 * ceil(COUNT / pe) and its own share's p at least 1. With all mates
 * through shared memory, all of them go that way. An AUTO peer of the
 * mixed swarm sends its AUTO mate only that mate's scatter parts and its
 * own share's result, p + p' <= P - 2 < all_mates_min (each OFF peer's
 * share has a part; P <= ceil(COUNT / pe) + N - 1, each share rounding up
 * by less than a part), and receives as many from it. */
static unsigned all_mates_min(unsigned pe) {
    return pe == 0 ? 0 : (COUNT + pe - 1) / pe + N - 2;
}

/* ---- a swarm ---- */

/* Starts N peers, peer i with shared_memory setting shm[i], averages
 * ROUNDS rounds of fresh vectors (each exact, in the group of all N),
 * closes them, reads their logs into logs[] and checks (3) that they left
 * no region behind. */
static void run(const char *swarm, const char *dir, const uint32_t shm[N],
                peer_log_t logs[N]) {
    names_t before;
    list_regions(&before);
    it_peer_t peers[N];
    pid_t pids[N];
    it_peer_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.swarm = swarm;
    cfg.group_size = N;
    cfg.matchmaking_ms = 3000;
    cfg.round_timeout_ms = 30000;
    cfg.expect_members = N;
    cfg.log_dir = dir;
    size_t started = 0, up = 0;
    for (size_t i = 0; i < N; i++) {
        cfg.index = i;
        cfg.shared_memory = shm[i];
        if (i > 0)
            snprintf(cfg.bootstrap, sizeof(cfg.bootstrap), "%s",
                     peers[0].endpoint);
        if (it_start_nowait(&peers[i], &cfg) != 0)
            break;
        pids[i] = peers[i].pid;
        started++;
    }
    for (size_t i = 0; i < started; i++)
        up += it_wait_ready(&peers[i], 30000) == N;
    IT_CHECK(up == N, "%s: %zu of %d peers started and saw everyone", swarm, up,
             N);
    float *v = malloc(COUNT * sizeof(float));
    uint64_t seeds[N];
    double weights[N], next_w[N];
    for (int r = 0; r < ROUNDS && up == N && v != NULL; r++) {
        for (size_t i = 0; i < N; i++) {
            seeds[i] = (uint64_t)(500 + r * 10 + (int)i);
            weights[i] = it_weight(seeds[i]);
        }
        /* fresh vectors every round: OK, the group of all N, exact */
        double d =
            it_grid_round(peers, N, N, COUNT, 0, seeds, weights, next_w, v);
        IT_CHECK(d <= 1e-5, "%s: round %d deviates %g from the mean", swarm,
                 r + 1, d);
    }
    free(v);
    for (size_t i = 0; i < started; i++)
        it_stop(&peers[i]);
    check_no_regions_left(swarm, &before, pids, started);
    for (size_t i = 0; i < started && up == N; i++) {
        read_log(dir, i, &logs[i]);
        printf("%s peer %zu (%s): %d rounds, regions of %d mates taken; parts "
               "sent/received through shared memory:",
               swarm, i, shm[i] == MOSHPIT_SHM_OFF ? "OFF" : "AUTO",
               logs[i].rounds, logs[i].taken);
        for (int r = 0; r < logs[i].rounds; r++)
            printf(" %u/%u", logs[i].round[r].sent, logs[i].round[r].recv);
        printf(" (with all mates that way: at least %u)\n",
               logs[i].rounds > 0 ? all_mates_min(logs[i].round[0].pe) : 0);
        IT_CHECK(logs[i].rounds == ROUNDS, "%s peer %zu: %d rounds logged",
                 swarm, i, logs[i].rounds);
    }
}

int main(void) {
    char dir_all[256], dir_mix[256];
    if (it_log_dir_make(dir_all, sizeof(dir_all), "shm-auto") != 0 ||
        it_log_dir_make(dir_mix, sizeof(dir_mix), "shm-mixed") != 0)
        return 1;
    /* 1: everyone with shared memory */
    static const uint32_t auto4[N] = {MOSHPIT_SHM_AUTO, MOSHPIT_SHM_AUTO,
                                      MOSHPIT_SHM_AUTO, MOSHPIT_SHM_AUTO};
    peer_log_t all[N];
    run("it-shm-auto", dir_all, auto4, all);
    for (size_t i = 0; i < N; i++) {
        IT_CHECK(all[i].taken == N - 1,
                 "AUTO swarm peer %zu took the regions of %d of its %d mates",
                 i, all[i].taken, N - 1);
        for (int r = 1; r < all[i].rounds; r++)
            IT_CHECK(all[i].round[r].sent > 0 && all[i].round[r].recv > 0,
                     "AUTO swarm peer %zu round %d: %u parts sent and %u "
                     "received through shared memory",
                     i, r + 1, all[i].round[r].sent, all[i].round[r].recv);
    }

    /* 2: peers 0 and 2 with shared memory, 1 and 3 without */
    static const uint32_t mixed[N] = {MOSHPIT_SHM_AUTO, MOSHPIT_SHM_OFF,
                                      MOSHPIT_SHM_AUTO, MOSHPIT_SHM_OFF};
    peer_log_t mix[N];
    run("it-shm-mixed", dir_mix, mixed, mix);
    for (size_t i = 1; i < N; i += 2)
        IT_CHECK(mix[i].shm_any == 0,
                 "OFF peer %zu logged %d lines of shared memory", i,
                 mix[i].shm_any);
    for (size_t i = 0; i < N; i += 2) {
        const peer_log_t *me = &mix[i], *mate = &mix[(i + 2) % N];
        IT_CHECK(me->taken == 1,
                 "AUTO peer %zu took the regions of %d mates (want its one "
                 "AUTO mate's)",
                 i, me->taken);
        for (int r = 0; r < me->rounds && r < mate->rounds; r++) {
            const shm_round_t *a = &me->round[r], *b = &mate->round[r];
            IT_CHECK(a->gid == b->gid,
                     "AUTO peers in different groups in round %d", r + 1);
            /* its only mate through shared memory is the other AUTO peer */
            IT_CHECK(a->recv <= b->sent,
                     "AUTO peer %zu round %d: %u parts received through "
                     "shared memory, its AUTO mate sent %u that way",
                     i, r + 1, a->recv, b->sent);
            if (r == 0)
                continue;
            IT_CHECK(a->sent > 0 && a->recv > 0,
                     "AUTO peer %zu round %d: %u parts sent and %u received "
                     "through shared memory",
                     i, r + 1, a->sent, a->recv);
            /* the parts to and from the OFF peers went over TCP */
            unsigned most = all_mates_min(a->pe);
            IT_CHECK(a->sent < most && a->recv < most,
                     "AUTO peer %zu round %d: %u parts sent and %u received "
                     "through shared memory, not fewer than %u (parts of %u "
                     "values: all mates that way)",
                     i, r + 1, a->sent, a->recv, most, a->pe);
        }
    }
    it_log_dir_done(dir_all);
    it_log_dir_done(dir_mix);
    printf("%s\n", it_failures ? "FAILED" : "ok");
    return it_failures ? 1 : 0;
}
