/* SPDX-License-Identifier: MIT */
/*
 * test_shm.c - the shared memory region of parts to a mate on this host
 * (net/shm.c): the region's name; create and attach (the ack, the name
 * removed once taken, a name made twice); parts put and got back, up to a
 * full slot; free slots per round and their reuse; the seqlock (an old
 * reference after a reuse, a slot being written, references out of
 * range, and a sender in another process racing the receiver: no part
 * got is ever mixed); hostile regions the receiver must refuse (bad header, bad
 * size, open to others) and one shrunk under it; the sweep of regions whose
 * maker is gone. Direct reads of the sender's memory: the window, taking
 * a region with and without them, references to the caller's buffer and
 * to another epoch, a window wiped, a maker that is not there, and a
 * writer in another process racing the reader (a part got is never
 * mixed, and one not raced is always got). Every region has a fresh name (from
 * the process id and the time) and none is left in /dev/shm at the end.
 */
#define _GNU_SOURCE /* process_vm_readv */
#include "net/shm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__linux__)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "test_util.h"

#define MAGIC 0x3130306d6873706dull /* "mpshm001" */
#define TABLE_OFF 64u
#define DATA_OFF 4096u

static void put_le(uint8_t *b, uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *b) {
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
           ((uint32_t)b[3] << 24);
}

static void test_name(void) {
    uint8_t sec[16];
    for (unsigned i = 0; i < 16; i++)
        sec[i] = (uint8_t)(i * 0x11); /* 00 11 22 .. ff */
    char a[MP_SHM_NAME_MAX], b[MP_SHM_NAME_MAX];
    memset(a, 'x', sizeof(a));
    memset(b, 'y', sizeof(b));
    mp__shm_name(sec, a);
    mp__shm_name(sec, b);
    CHECK(strcmp(a, "/moshpit-00112233445566778899aabbccddeeff") == 0,
          "name of a known secret: %s", a);
    CHECK(strcmp(a, b) == 0, "deterministic: %s vs %s", a, b);
    CHECK(strlen(a) == 9 + 32, "length %zu", strlen(a));
    bool hex = true;
    for (size_t i = 9; i < strlen(a); i++)
        hex = hex &&
              ((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
    CHECK(hex, "32 lowercase hex digits: %s", a);
    sec[15] ^= 1;
    mp__shm_name(sec, b);
    CHECK(strcmp(a, b) != 0, "another secret, another name: %s", b);
    memset(sec, 0xff, sizeof(sec));
    mp__shm_name(sec, b);
    CHECK(strcmp(b, "/moshpit-ffffffffffffffffffffffffffffffff") == 0,
          "all ones: %s", b);
}

#if defined(__linux__)

/* every name this run used: none may exist at the end */
#define NAMES_MAX 64
static char names[NAMES_MAX][MP_SHM_NAME_MAX];
static unsigned nnames;
static uint64_t name_seed;

/* A fresh name of this run (16 bytes from the pid, the time and a count
 * through mp__shm_name). */
static const char *fresh_name(void) {
    uint8_t sec[16];
    test_random_bytes(&name_seed, sec, sizeof(sec));
    if (nnames >= NAMES_MAX) {
        fprintf(stderr, "test_shm: too many names\n");
        exit(1);
    }
    mp__shm_name(sec, names[nnames]);
    return names[nnames++];
}

/* 1: the name is there, 0: ENOENT, -1: another error */
static int name_exists(const char *name) {
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return errno == ENOENT ? 0 : -1;
}

static bool read_u32(int fd, uint64_t off, uint32_t *v) {
    uint8_t b[4];
    if (pread(fd, b, 4, (off_t)off) != 4)
        return false;
    *v = get_le32(b);
    return true;
}

static bool write_u32(int fd, uint64_t off, uint32_t v) {
    uint8_t b[4];
    put_le(b, v, 4);
    return pwrite(fd, b, 4, (off_t)off) == 4;
}

/* A region made by hand, as a hostile or dead sender leaves it: the
 * header fields given, `size` bytes, mode `mode`. Returns its descriptor
 * (the caller closes it) or -1. */
static int make_region(const char *name, uint64_t magic, uint32_t nslots,
                       uint32_t slot_bytes, uint32_t ack, uint32_t pid,
                       uint64_t size, mode_t mode) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    uint8_t hdr[TABLE_OFF] = {0};
    put_le(hdr, magic, 8);
    put_le(hdr + 8, nslots, 4);
    put_le(hdr + 12, slot_bytes, 4);
    put_le(hdr + 16, ack, 4);
    put_le(hdr + 20, pid, 4);
    if (ftruncate(fd, (off_t)(size > sizeof(hdr) ? size : sizeof(hdr))) != 0 ||
        pwrite(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
        ftruncate(fd, (off_t)size) != 0 || fchmod(fd, mode) != 0) {
        close(fd);
        shm_unlink(name);
        return -1;
    }
    return fd;
}

static uint64_t region_bytes(uint32_t nslots, uint32_t slot_bytes) {
    return (uint64_t)DATA_OFF + (uint64_t)nslots * slot_bytes;
}

static void test_host_id(void) {
    uint8_t a[32], b[32], zero[32] = {0};
    memset(a, 0, sizeof(a));
    memset(b, 1, sizeof(b));
    if (!mp__shm_host_id(a)) {
        printf("test_shm: no host id here (no /proc?): host id skipped\n");
        return;
    }
    CHECK(mp__shm_host_id(b) && memcmp(a, b, 32) == 0, "host id is stable");
    CHECK(memcmp(a, zero, 32) != 0, "host id is not all zeros");
    /* a child process on this host has the same */
    int pfd[2];
    if (pipe(pfd) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        uint8_t c[32] = {0};
        bool ok = mp__shm_host_id(c);
        ssize_t w = write(pfd[1], c, sizeof(c));
        _exit(ok && w == (ssize_t)sizeof(c) ? 0 : 1);
    }
    close(pfd[1]);
    memset(b, 0, sizeof(b));
    ssize_t r = pid > 0 ? read(pfd[0], b, sizeof(b)) : -1;
    close(pfd[0]);
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    CHECK(r == 32 && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
              memcmp(a, b, 32) == 0,
          "a child process has the same host id (read %zd)", r);
}

static void test_create_attach(void) {
    int err = 0;
    /* parameters out of range */
    const uint32_t bad[][2] = {{0, 64},
                               {MP_SHM_SLOTS_MAX + 1, 64},
                               {4, 0},
                               {4, MP_SHM_SLOT_BYTES + 1}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        const char *n = fresh_name();
        err = 0;
        mp_shm_t *s = mp__shm_create(n, bad[k][0], bad[k][1], &err);
        CHECK(s == NULL && err == EINVAL, "create %u slots of %u: err %d",
              bad[k][0], bad[k][1], err);
        mp__shm_free(s);
        CHECK(name_exists(n) == 0, "no region for a refused create");
    }
    CHECK(mp__shm_create(NULL, 4, 64, &err) == NULL, "create without a name");

    /* freed before anybody took it: the name goes */
    const char *n0 = fresh_name();
    mp_shm_t *t0 = mp__shm_create(n0, 4, 64, &err);
    CHECK(t0 != NULL, "create: err %d", err);
    CHECK(name_exists(n0) == 1, "the region has its name");
    mp__shm_free(t0);
    CHECK(name_exists(n0) == 0, "freed untaken: the name is gone");

    const char *name = fresh_name();
    err = 0;
    mp_shm_t *tx = mp__shm_create(name, 4, 4096, &err);
    CHECK(tx != NULL, "create: err %d", err);
    if (tx == NULL)
        return;
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    CHECK(fd >= 0, "the name is there before attach: errno %d", errno);
    if (fd >= 0) {
        struct stat sb;
        CHECK(fstat(fd, &sb) == 0 && (sb.st_mode & 0777) == 0600 &&
                  (uint64_t)sb.st_size == region_bytes(4, 4096),
              "mode 0600 and the size of 4 slots");
        uint8_t hdr[24];
        CHECK(pread(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr) &&
                  memcmp(hdr, "mpshm001", 8) == 0 && get_le32(hdr + 8) == 4 &&
                  get_le32(hdr + 12) == 4096 && get_le32(hdr + 16) == 0 &&
                  get_le32(hdr + 20) == (uint32_t)getpid(),
              "the header: magic, slots, slot bytes, ack 0, our pid");
        close(fd);
    }
    CHECK(mp__shm_state(tx) == MP_SHM_MADE, "made, not taken before attach");
    uint8_t ref[MP_SHM_REF_BYTES];
    CHECK(mp__shm_room(tx, 1), "room before attach");

    err = 0;
    mp_shm_t *dup = mp__shm_create(name, 4, 4096, &err);
    CHECK(dup == NULL && err == EEXIST, "create of an existing name: err %d",
          err);
    mp__shm_free(dup);
    CHECK(name_exists(name) == 1, "a failed create leaves the name alone");
    CHECK(mp__shm_state(tx) == MP_SHM_MADE, "still not taken");

    err = 0;
    mp_shm_t *rx = mp__shm_attach(name, &err);
    CHECK(rx != NULL, "attach: err %d", err);
    CHECK(mp__shm_state(tx) == MP_SHM_TAKEN, "taken after attach");
    CHECK(mp__shm_state(tx) == MP_SHM_TAKEN, "taken stays");
    CHECK(mp__shm_state(rx) == MP_SHM_TAKEN, "the receiver sees it taken");
    errno = 0;
    fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    CHECK(fd < 0 && errno == ENOENT, "the name is gone after attach: errno %d",
          errno);
    if (fd >= 0)
        close(fd);
    err = 0;
    CHECK(mp__shm_attach(name, &err) == NULL && err == ENOENT,
          "a second attach finds nothing: err %d", err);

    /* the roles */
    uint32_t v = 42, w = 0;
    CHECK(!mp__shm_put(rx, 1, &v, 4, ref), "the receiver cannot put");
    CHECK(!mp__shm_room(rx, 1), "the receiver has no room");
    CHECK(mp__shm_put(tx, 1, &v, 4, ref), "put");
    CHECK(!mp__shm_get(tx, ref, &w, 4), "the sender cannot get");
    CHECK(mp__shm_get(rx, ref, &w, 4) && w == 42, "get: %u", w);

    CHECK(mp__shm_state(NULL) == MP_SHM_CLOSED && !mp__shm_room(NULL, 1) &&
              !mp__shm_put(NULL, 1, &v, 4, ref) &&
              !mp__shm_get(NULL, ref, &w, 4),
          "NULL region");
    mp__shm_free(NULL);
    mp__shm_free(rx);
    mp__shm_free(tx);
}

/* A sender and its attached receiver on a fresh name. */
static bool pair(uint32_t nslots, uint32_t slot_bytes, mp_shm_t **tx,
                 mp_shm_t **rx, int *fd) {
    const char *name = fresh_name();
    int err = 0;
    *tx = mp__shm_create(name, nslots, slot_bytes, &err);
    *rx = NULL;
    if (fd != NULL) /* another descriptor of the region, for the test */
        *fd = *tx != NULL ? shm_open(name, O_RDWR | O_CLOEXEC, 0) : -1;
    if (*tx != NULL)
        *rx = mp__shm_attach(name, &err);
    CHECK(*tx != NULL && *rx != NULL && (fd == NULL || *fd >= 0),
          "pair of %u slots of %u: err %d", nslots, slot_bytes, err);
    if (*rx == NULL) {
        mp__shm_free(*tx);
        *tx = NULL;
        if (fd != NULL && *fd >= 0)
            close(*fd);
        return false;
    }
    return true;
}

static void test_round_trip(void) {
    mp_shm_t *tx, *rx;
    if (!pair(2, MP_SHM_SLOT_BYTES, &tx, &rx, NULL))
        return;
    float f[1000], g[1000];
    for (int i = 0; i < 1000; i++)
        f[i] = (float)i * 0.5f - 100.0f;
    uint8_t ref[MP_SHM_REF_BYTES];
    CHECK(mp__shm_put(tx, 1, f, sizeof(f), ref), "put 1000 floats");
    memset(g, 0, sizeof(g));
    CHECK(mp__shm_get(rx, ref, g, sizeof(g)) && memcmp(f, g, sizeof(f)) == 0,
          "1000 floats back");
    memset(g, 0, sizeof(g));
    CHECK(mp__shm_get(rx, ref, g, sizeof(g)) && memcmp(f, g, sizeof(f)) == 0,
          "the same reference again: the slot was not rewritten");

    size_t full = MP_SHM_SLOT_BYTES;
    uint8_t *a = malloc(full + 1), *b = malloc(full + 1);
    CHECK(a != NULL && b != NULL, "malloc");
    if (a != NULL && b != NULL) {
        uint64_t seed = 7;
        test_random_bytes(&seed, a, full + 1);
        CHECK(mp__shm_put(tx, 1, a, full, ref), "put a full slot");
        memset(b, 0, full);
        CHECK(mp__shm_get(rx, ref, b, full) && memcmp(a, b, full) == 0,
              "a full slot back");
        uint8_t r2[MP_SHM_REF_BYTES];
        CHECK(!mp__shm_put(tx, 1, a, full + 1, r2), "put over a slot fails");
        CHECK(!mp__shm_get(rx, ref, b, full + 1), "get over a slot fails");
        CHECK(mp__shm_get(rx, ref, b, 100) && memcmp(a, b, 100) == 0,
              "get of a prefix");
    }
    free(a);
    free(b);
    mp__shm_free(rx);
    mp__shm_free(tx);

    /* a region of small slots: their size, not MP_SHM_SLOT_BYTES */
    if (!pair(3, 1024, &tx, &rx, NULL))
        return;
    uint8_t s[1025], d[1025];
    memset(s, 0x5a, sizeof(s));
    CHECK(!mp__shm_put(tx, 1, s, 1025, ref), "put over a small slot fails");
    CHECK(mp__shm_put(tx, 1, s, 1024, ref), "put of a small slot");
    CHECK(!mp__shm_get(rx, ref, d, 1025), "get over a small slot fails");
    memset(d, 0, sizeof(d));
    CHECK(mp__shm_get(rx, ref, d, 1024) && memcmp(s, d, 1024) == 0,
          "a small slot back");
    CHECK(mp__shm_put(tx, 1, s, 0, ref) && mp__shm_get(rx, ref, d, 0),
          "an empty part");
    mp__shm_free(rx);
    mp__shm_free(tx);
}

static void test_room(void) {
    mp_shm_t *tx, *rx;
    int fd;
    if (!pair(4, 64, &tx, &rx, &fd))
        return;
    uint8_t ref[5][MP_SHM_REF_BYTES];
    uint32_t v[5] = {10, 11, 12, 13, 14}, w = 0;
    bool seen[4] = {false, false, false, false};
    for (int i = 0; i < 4; i++) {
        CHECK(mp__shm_room(tx, 7), "room before put %d", i);
        CHECK(mp__shm_put(tx, 7, &v[i], 4, ref[i]), "put %d of round 7", i);
        uint32_t slot = get_le32(ref[i]);
        CHECK(slot < 4 && !seen[slot], "put %d: a slot of its own (%u)", i,
              slot);
        if (slot < 4)
            seen[slot] = true;
    }
    CHECK(!mp__shm_room(tx, 7), "no room after four puts");
    CHECK(!mp__shm_put(tx, 7, &v[4], 4, ref[4]), "the fifth put fails");
    CHECK(mp__shm_room(tx, 8), "room for another round");

    /* the receiver takes the second part: its slot is free again */
    CHECK(mp__shm_get(rx, ref[1], &w, 4) && w == 11, "get part 1: %u", w);
    uint32_t freed = 0;
    CHECK(read_u32(fd, TABLE_OFF + 8u * get_le32(ref[1]) + 4u, &freed) &&
              freed == get_le32(ref[1] + 4),
          "get wrote the generation into the slot's freed word: %u", freed);
    CHECK(mp__shm_room(tx, 7), "room after a get");
    CHECK(mp__shm_put(tx, 7, &v[4], 4, ref[4]), "put after a get");
    CHECK(get_le32(ref[4]) == get_le32(ref[1]), "the freed slot: %u vs %u",
          get_le32(ref[4]), get_le32(ref[1]));
    CHECK(get_le32(ref[4] + 4) != get_le32(ref[1] + 4),
          "a new generation in the reused slot");
    CHECK(!mp__shm_room(tx, 7), "full again");
    CHECK(!mp__shm_put(tx, 7, &v[0], 4, ref[1]), "full again: put fails");
    /* the parts not taken are still there */
    CHECK(mp__shm_get(rx, ref[0], &w, 4) && w == 10, "part 0: %u", w);
    CHECK(mp__shm_get(rx, ref[4], &w, 4) && w == 14, "part 4: %u", w);

    /* slots of other rounds are free even when not taken */
    uint8_t r8[MP_SHM_REF_BYTES];
    uint32_t x = 99;
    CHECK(mp__shm_put(tx, 7, &x, 4, r8), "round 7: the two taken slots");
    CHECK(mp__shm_put(tx, 7, &x, 4, r8), "round 7: the two taken slots");
    CHECK(!mp__shm_room(tx, 7), "round 7 full");
    for (int i = 0; i < 4; i++)
        CHECK(mp__shm_put(tx, 8, &x, 4, r8), "round 8 put %d", i);
    CHECK(!mp__shm_room(tx, 8) && !mp__shm_put(tx, 8, &x, 4, r8),
          "round 8 full");
    CHECK(mp__shm_get(rx, r8, &w, 4) && w == 99, "round 8 part back");
    close(fd);
    mp__shm_free(rx);
    mp__shm_free(tx);
}

/* Closing: either end's close marks the region closed for the other; a
 * closed (or taken) region is never taken again. */
static void test_closed(void) {
    mp_shm_t *tx, *rx;
    int fd;
    if (!pair(2, 64, &tx, &rx, &fd))
        return;
    uint8_t ref[MP_SHM_REF_BYTES];
    uint32_t v = 5;
    CHECK(mp__shm_put(tx, 1, &v, 4, ref), "put while taken");
    mp__shm_free(rx); /* the receiver closes: a group without the sender */
    CHECK(mp__shm_state(tx) == MP_SHM_CLOSED, "the sender sees it closed");
    mp__shm_free(tx);
    close(fd);

    if (!pair(2, 64, &tx, &rx, &fd))
        return;
    mp__shm_free(tx); /* the sender closes first */
    CHECK(mp__shm_state(rx) == MP_SHM_CLOSED, "the receiver sees it closed");
    mp__shm_free(rx);
    close(fd);

    /* a region already taken or closed is not taken (again) */
    const char *name = fresh_name();
    int err = 0;
    tx = mp__shm_create(name, 2, 64, &err);
    fd = tx != NULL ? shm_open(name, O_RDWR | O_CLOEXEC, 0) : -1;
    CHECK(tx != NULL && fd >= 0, "create: err %d", err);
    if (tx == NULL || fd < 0) {
        mp__shm_free(tx);
        return;
    }
    uint8_t st[4] = {1, 0, 0, 0};
    CHECK(pwrite(fd, st, 4, 16) == 4, "mark it taken by hand");
    err = 0;
    CHECK(mp__shm_attach(name, &err) == NULL && err == EPROTO,
          "a taken region is not taken again: err %d", err);
    st[0] = 2;
    CHECK(pwrite(fd, st, 4, 16) == 4, "mark it closed by hand");
    err = 0;
    CHECK(mp__shm_attach(name, &err) == NULL && err == EPROTO,
          "a closed region is not taken: err %d", err);
    st[0] = 7;
    CHECK(pwrite(fd, st, 4, 16) == 4 && mp__shm_state(tx) == MP_SHM_CLOSED,
          "an unknown state counts as closed");
    close(fd);
    mp__shm_free(tx);
    shm_unlink(name);
}

static void test_seqlock(void) {
    mp_shm_t *tx, *rx;
    int fd;
    if (!pair(1, 64, &tx, &rx, &fd))
        return;
    uint32_t v = 1, w = 0;
    uint8_t a[MP_SHM_REF_BYTES], b[MP_SHM_REF_BYTES], c[MP_SHM_REF_BYTES];
    CHECK(mp__shm_put(tx, 1, &v, 4, a), "put round 1");
    CHECK(get_le32(a) == 0 && get_le32(a + 4) != 0 &&
              (get_le32(a + 4) & 1) == 0,
          "ref: slot 0, an even generation %u", get_le32(a + 4));
    v = 2;
    CHECK(mp__shm_put(tx, 2, &v, 4, b), "put round 2 over it");
    CHECK(get_le32(b) == 0, "the same slot");
    CHECK(!mp__shm_get(rx, a, &w, 4), "the old reference fails");
    CHECK(mp__shm_get(rx, b, &w, 4) && w == 2, "the new one: %u", w);

    /* reused within a round once taken: the old reference fails too */
    v = 3;
    CHECK(mp__shm_put(tx, 2, &v, 4, c), "put after the get");
    CHECK(!mp__shm_get(rx, b, &w, 4), "the taken reference after reuse");
    /* a slot being written: the generation is odd in the table */
    uint32_t g = get_le32(c + 4);
    CHECK(write_u32(fd, TABLE_OFF, g - 1u), "write an odd generation");
    w = 0;
    CHECK(!mp__shm_get(rx, c, &w, 4), "a slot being written is not taken");
    uint32_t freed = 0;
    CHECK(read_u32(fd, TABLE_OFF + 4u, &freed) && freed != g,
          "a failed get does not free the slot: %u", freed);
    CHECK(!mp__shm_room(tx, 2), "so the sender has no room");
    CHECK(write_u32(fd, TABLE_OFF, g), "write the generation back");
    CHECK(mp__shm_get(rx, c, &w, 4) && w == 3, "then it is: %u", w);
    CHECK(mp__shm_room(tx, 2), "and the slot is free");

    /* references out of range */
    uint8_t r[MP_SHM_REF_BYTES];
    memcpy(r, c, sizeof(r));
    put_le(r, 1, 4); /* slot == nslots */
    CHECK(!mp__shm_get(rx, r, &w, 4), "slot index nslots");
    /* even where the sender grew the region and wrote a table entry and
     * bytes for a slot past the header's count */
    CHECK(ftruncate(fd, (off_t)(DATA_OFF + 2u * 64u)) == 0 &&
              write_u32(fd, TABLE_OFF + 8u, g) &&
              write_u32(fd, DATA_OFF + 64u, 77),
          "grow the region by a slot");
    CHECK(!mp__shm_get(rx, r, &w, 4), "slot index nslots in a grown region");
    put_le(r, 0xffffffffu, 4);
    CHECK(!mp__shm_get(rx, r, &w, 4), "slot index 2^32-1");
    put_le(r, 0, 4);
    put_le(r + 4, 0, 4);
    CHECK(write_u32(fd, TABLE_OFF, 0), "table generation 0");
    CHECK(!mp__shm_get(rx, r, &w, 4), "generation 0 (even where the table "
                                      "says 0)");
    CHECK(write_u32(fd, TABLE_OFF, g + 1u), "table generation odd");
    put_le(r + 4, g + 1u, 4);
    CHECK(!mp__shm_get(rx, r, &w, 4), "an odd generation (even where the "
                                      "table says it)");
    CHECK(write_u32(fd, TABLE_OFF, g), "table back");
    CHECK(mp__shm_get(rx, c, &w, 4) && w == 3, "the good ref still works");
    close(fd);
    mp__shm_free(rx);
    mp__shm_free(tx);
}

/* A sender in another process rewrites the one slot, a new round per
 * part, each part RACE_WORDS copies of one word; the receiver reads the
 * generation the table shows and gets the part: every get that succeeds
 * must give a whole part, never two mixed (the generation check after
 * the copy). */
#define RACE_WORDS 16384u
static void test_race(void) {
    mp_shm_t *tx, *rx;
    int fd;
    if (!pair(1, RACE_WORDS * 4u, &tx, &rx, &fd))
        return;
    static uint32_t buf[RACE_WORDS];
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        uint64_t seed = 1;
        uint8_t ref[MP_SHM_REF_BYTES];
        for (uint32_t round = 1; round < 2000000u; round++) {
            for (uint32_t k = 0; k < RACE_WORDS; k++)
                buf[k] = round;
            if (!mp__shm_put(tx, round, buf, sizeof(buf), ref))
                _exit(2);
            /* a pause now and then, so that some reads do not race */
            for (volatile uint64_t n = test_splitmix64(&seed) % 20000u; n > 0;
                 n--)
                ;
        }
        _exit(0);
    }
    long ok = 0, mixed = 0, tries = 0;
    time_t end = time(NULL) + 2;
    while (pid > 0 && (ok < 5000 || tries < 50000) && time(NULL) <= end) {
        uint32_t g;
        uint8_t ref[MP_SHM_REF_BYTES];
        tries++;
        if (!read_u32(fd, TABLE_OFF, &g) || g == 0 || (g & 1u) != 0)
            continue;
        memset(ref, 0, sizeof(ref)); /* a slot reference */
        put_le(ref + 4, g, 4);
        if (!mp__shm_get(rx, ref, buf, sizeof(buf)))
            continue;
        ok++;
        for (uint32_t k = 1; k < RACE_WORDS; k++)
            if (buf[k] != buf[0]) {
                mixed++;
                break;
            }
    }
    int st = 0;
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    CHECK(pid > 0 && WIFSIGNALED(st), "the sender ran until stopped (%d)", st);
    CHECK(ok > 0, "some gets succeeded (%ld of %ld)", ok, tries);
    CHECK(mixed == 0, "%ld of %ld parts got were mixed", mixed, ok);
    close(fd);
    mp__shm_free(rx);
    mp__shm_free(tx);
}

/* attach to a region made by hand: NULL with EPROTO, the region left
 * unacked */
static void hostile(const char *what, uint64_t magic, uint32_t nslots,
                    uint32_t slot_bytes, uint64_t size, mode_t mode) {
    const char *name = fresh_name();
    int fd = make_region(name, magic, nslots, slot_bytes, 0, (uint32_t)getpid(),
                         size, mode);
    CHECK(fd >= 0, "%s: made by hand: errno %d", what, errno);
    if (fd < 0)
        return;
    int err = 0;
    mp_shm_t *rx = mp__shm_attach(name, &err);
    CHECK(rx == NULL && err == EPROTO, "%s: refused with EPROTO (err %d)", what,
          err);
    mp__shm_free(rx);
    uint32_t ack = 7;
    CHECK(size < 20 || (read_u32(fd, 16, &ack) && ack == 0),
          "%s: not acked (%u)", what, ack);
    close(fd);
    shm_unlink(name);
}

static void test_hostile(void) {
    /* the control: a region made by hand the right way is taken */
    const char *name = fresh_name();
    int fd = make_region(name, MAGIC, 2, 128, 0, (uint32_t)getpid(),
                         region_bytes(2, 128), 0600);
    CHECK(fd >= 0, "good region by hand: errno %d", errno);
    int err = 0;
    mp_shm_t *rx = fd >= 0 ? mp__shm_attach(name, &err) : NULL;
    CHECK(rx != NULL, "a good region made by hand is taken: err %d", err);
    uint32_t ack = 0;
    CHECK(fd >= 0 && read_u32(fd, 16, &ack) && ack == 1, "and acked: %u", ack);
    CHECK(name_exists(name) == 0, "and its name is gone");
    mp__shm_free(rx);
    if (fd >= 0)
        close(fd);

    hostile("wrong magic", MAGIC ^ 1, 2, 128, region_bytes(2, 128), 0600);
    hostile("0 slots", MAGIC, 0, 128, region_bytes(0, 128), 0600);
    hostile("too many slots", MAGIC, MP_SHM_SLOTS_MAX + 1, 16,
            region_bytes(MP_SHM_SLOTS_MAX + 1, 16), 0600);
    hostile("slot bytes 0", MAGIC, 2, 0, region_bytes(2, 0), 0600);
    hostile("slot bytes too many", MAGIC, 1, MP_SHM_SLOT_BYTES + 1,
            region_bytes(1, MP_SHM_SLOT_BYTES + 1), 0600);
    hostile("a byte short", MAGIC, 2, 128, region_bytes(2, 128) - 1, 0600);
    hostile("a byte over", MAGIC, 2, 128, region_bytes(2, 128) + 1, 0600);
    hostile("header only", MAGIC, 2, 128, TABLE_OFF, 0600);
    hostile("empty", MAGIC, 2, 128, 0, 0600);
    hostile("mode 0644", MAGIC, 2, 128, region_bytes(2, 128), 0644);
    hostile("mode 0660", MAGIC, 2, 128, region_bytes(2, 128), 0660);

    err = 0;
    CHECK(mp__shm_attach(fresh_name(), &err) == NULL && err == ENOENT,
          "no such region: ENOENT (err %d)", err);
    CHECK(mp__shm_attach(NULL, &err) == NULL, "attach without a name");

    /* shrunk under the receiver: get fails, no SIGBUS */
    mp_shm_t *tx;
    if (!pair(2, 4096, &tx, &rx, &fd))
        return;
    uint8_t src[4096], dst[4096], ref[MP_SHM_REF_BYTES];
    memset(src, 0x33, sizeof(src));
    CHECK(mp__shm_put(tx, 1, src, sizeof(src), ref), "put before the shrink");
    CHECK(ftruncate(fd, (off_t)(DATA_OFF + 10)) == 0, "shrink to 4106 bytes");
    CHECK(!mp__shm_get(rx, ref, dst, sizeof(dst)), "get of a cut slot fails");
    CHECK(ftruncate(fd, 0) == 0, "shrink to 0");
    CHECK(!mp__shm_get(rx, ref, dst, sizeof(dst)), "get of an empty region");
    CHECK(!mp__shm_get(rx, ref, dst, 0), "even of no bytes (no table)");
    close(fd);
    mp__shm_free(rx);
    mp__shm_free(tx);
}

/* The pid of a process that has ended and been reaped. */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return -1;
    int st;
    waitpid(pid, &st, 0);
    return pid;
}

static void test_sweep(void) {
    pid_t dead = dead_pid();
    CHECK(dead > 0, "fork");
    if (dead <= 0)
        return;
    uint64_t size = region_bytes(2, 64);
    const char *gone = fresh_name(), *mine = fresh_name(),
               *taken = fresh_name(), *nopid = fresh_name(),
               *negpid = fresh_name(), *other = fresh_name(),
               *young = fresh_name(), *fifo = fresh_name();
    int fds[6] = {
        make_region(gone, MAGIC, 2, 64, 0, (uint32_t)dead, size, 0600),
        make_region(mine, MAGIC, 2, 64, 0, (uint32_t)getpid(), size, 0600),
        make_region(taken, MAGIC, 2, 64, 1, (uint32_t)dead, size, 0600),
        make_region(nopid, MAGIC, 2, 64, 0, 0, size, 0600),
        /* a negative pid_t: kill() would mean a process group */
        make_region(negpid, MAGIC, 2, 64, 0, 0x80000001u, size, 0600),
        /* made moments ago: its maker may live in another pid namespace */
        make_region(young, MAGIC, 2, 64, 0, (uint32_t)dead, size, 0600),
    };
    /* all but the young one made two minutes ago */
    struct timespec old[2] = {{.tv_sec = time(NULL) - 120},
                              {.tv_sec = time(NULL) - 120}};
    for (int i = 0; i < 6; i++) {
        CHECK(fds[i] >= 0, "region %d by hand", i);
        if (fds[i] >= 0) {
            CHECK(i == 5 || futimens(fds[i], old) == 0, "age region %d", i);
            close(fds[i]);
        }
    }
    /* a FIFO under a region's name: opening it to read would block */
    char fpath[64];
    snprintf(fpath, sizeof(fpath), "/dev/shm%s", fifo);
    CHECK(mkfifo(fpath, 0600) == 0, "mkfifo %s", fpath);
    CHECK(utimensat(AT_FDCWD, fpath, old, 0) == 0, "age the FIFO");
    int err = 0;
    mp_shm_t *tx = mp__shm_create(other, 2, 64, &err);
    CHECK(tx != NULL, "create: err %d", err);
    CHECK(name_exists(gone) == 1, "the dead sender's region is there");
    mp__shm_sweep();
    CHECK(name_exists(gone) == 0, "the sweep removed the dead sender's region");
    CHECK(name_exists(mine) == 1, "a live sender's region stays");
    CHECK(name_exists(taken) == 1, "a taken region stays");
    CHECK(name_exists(nopid) == 1, "a region of pid 0 stays");
    CHECK(name_exists(negpid) == 1, "a region of pid 0x80000001 stays");
    CHECK(name_exists(other) == 1, "a region of mp__shm_create stays");
    CHECK(name_exists(young) == 1, "a young region of a dead pid stays");
    struct stat fs;
    CHECK(stat(fpath, &fs) == 0 && S_ISFIFO(fs.st_mode),
          "the FIFO stays (and the sweep did not block on it)");
    err = 0;
    CHECK(mp__shm_attach(fifo, &err) == NULL && err == EPROTO,
          "attach to a FIFO: EPROTO (err %d)", err);
    unlink(fpath);
    err = 0;
    mp_shm_t *rx = mp__shm_attach(other, &err);
    CHECK(rx != NULL, "and can still be taken: err %d", err);
    mp__shm_free(rx);
    mp__shm_free(tx);
    shm_unlink(mine);
    shm_unlink(taken);
    shm_unlink(nopid);
    shm_unlink(negpid);
    shm_unlink(young);
}

/* ---- direct reads ---- */

static void test_window(void) {
    mp_shm_window_t w;
    mp__shm_window_init(&w);
    CHECK(w.magic != 0, "a new window has a magic");
    for (unsigned k = 0; k < MP_SHM_EPOCHS; k++)
        CHECK(w.epoch[k] != 0 && (w.epoch[k] & 3u) == k,
              "a new window's epoch %u: %llx", k,
              (unsigned long long)w.epoch[k]);
    for (unsigned k = 0; k < MP_SHM_EPOCHS; k++) {
        uint64_t before[MP_SHM_EPOCHS];
        for (unsigned j = 0; j < MP_SHM_EPOCHS; j++)
            before[j] = w.epoch[j];
        mp__shm_window_bump(&w, k);
        bool others = true;
        for (unsigned j = 0; j < MP_SHM_EPOCHS; j++)
            others &= j == k || w.epoch[j] == before[j];
        CHECK(w.epoch[k] != before[k] && w.epoch[k] != 0 &&
                  (w.epoch[k] & 3u) == k && others,
              "bump of epoch %u: %llx -> %llx, the others kept", k,
              (unsigned long long)before[k], (unsigned long long)w.epoch[k]);
    }
    uint64_t e2 = w.epoch[2];
    mp__shm_window_bump(&w, MP_SHM_EPOCHS);
    CHECK(w.epoch[2] == e2, "no epoch past the last");
    uint8_t ref[MP_SHM_REF_BYTES];
    static const float x = 1.0f;
    mp__shm_ref_direct(&w, 1, &x, ref);
    CHECK(mp__shm_ref_direct_is(ref), "a direct reference is one");
    uint8_t slot[MP_SHM_REF_BYTES] = {3, 0, 0, 0, 2, 0, 0, 0};
    CHECK(!mp__shm_ref_direct_is(slot), "a slot reference is not");
    uint64_t m = w.magic, e0 = w.epoch[0], e1 = w.epoch[1];
    e2 = w.epoch[2];
    mp__shm_window_wipe(&w);
    CHECK(w.magic == 0 && w.epoch[0] != e0 && w.epoch[1] != e1 &&
              w.epoch[2] != e2 && m != 0,
          "wiped: no magic, every epoch changed");
}

/* The sender of the direct read tests: a child process that makes the
 * region `name` naming window w (inherited, so this process knows its
 * values and where it and the child's buffers are), says 'r' on `out`,
 * then on each command byte from `in` bumps epoch k ('0' + k) or wipes
 * the window ('w') and answers with the window's bytes, until 'q'. */
static pid_t direct_sender(const char *name, mp_shm_window_t *w, int in,
                           int out) {
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int err = 0;
    mp_shm_t *tx = mp__shm_create(name, 2, 4096, &err);
    char c = 'r';
    if (tx == NULL || !mp__shm_expose(tx, w) || write(out, &c, 1) != 1)
        _exit(2);
    while (read(in, &c, 1) == 1 && c != 'q') {
        if (c == 'w')
            mp__shm_window_wipe(w);
        else
            mp__shm_window_bump(w, (unsigned)(c - '0'));
        if (write(out, (const void *)w, sizeof(*w)) != (ssize_t)sizeof(*w))
            _exit(3);
    }
    mp__shm_free(tx);
    _exit(0);
}

/* Sends command c to the sender and takes its window back into w. */
static bool direct_cmd(int in, int out, char c, mp_shm_window_t *w) {
    mp_shm_window_t got;
    size_t have = 0;
    if (write(in, &c, 1) != 1)
        return false;
    while (have < sizeof(got)) {
        ssize_t r = read(out, (uint8_t *)&got + have, sizeof(got) - have);
        if (r <= 0)
            return false;
        have += (size_t)r;
    }
    memcpy((void *)w, &got, sizeof(got));
    return true;
}

/* A thread of this process that waits (helper_tid: its thread id, made
 * at the first call; helper_stop ends it). */
static pthread_t g_helper;
static int g_helper_pipe[2] = {-1, -1};
static volatile pid_t g_helper_tid;

static void *helper_main(void *arg) {
    (void)arg;
    char c;
    g_helper_tid = (pid_t)syscall(SYS_gettid);
    while (read(g_helper_pipe[0], &c, 1) > 0)
        ;
    return NULL;
}

static pid_t helper_tid(void) {
    if (g_helper_pipe[0] < 0) {
        if (pipe(g_helper_pipe) != 0 ||
            pthread_create(&g_helper, NULL, helper_main, NULL) != 0)
            return -1;
        while (g_helper_tid == 0)
            sched_yield();
    }
    return g_helper_tid;
}

static void helper_stop(void) {
    if (g_helper_pipe[0] < 0)
        return;
    close(g_helper_pipe[1]);
    pthread_join(g_helper, NULL);
    close(g_helper_pipe[0]);
    g_helper_pipe[0] = g_helper_pipe[1] = -1;
    g_helper_tid = 0;
}

/* Whether this process may read another's memory (process_vm_readv on a
 * child): not under qemu-user (no such system call there), Yama's
 * ptrace_scope 3, or a seccomp filter that refuses it. The direct read
 * tests then check that regions are taken for slots only. */
static bool g_direct_ok;

static bool direct_reads_work(void) {
    static volatile uint64_t mark = 0x6d6f736870697421ull;
    int hold[2];
    if (pipe(hold) != 0)
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(hold[1]);
        while (read(hold[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(hold[0]);
    uint64_t v = 0;
    struct iovec l = {.iov_base = &v, .iov_len = sizeof(v)};
    struct iovec r = {.iov_base = (void *)&mark, .iov_len = sizeof(v)};
    bool ok = pid > 0 &&
              process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(v) &&
              v == mark;
    close(hold[1]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return ok;
}

static void test_direct(void) {
    static mp_shm_window_t w;
    static float vals[1024], got[1024];
    mp__shm_window_init(&w);
    for (unsigned k = 0; k < 1024; k++)
        vals[k] = (float)k * 0.5f;
    int to_tx[2], to_rx[2];
    if (pipe(to_tx) != 0 || pipe(to_rx) != 0) {
        CHECK(0, "pipes");
        return;
    }
    const char *name = fresh_name();
    pid_t pid = direct_sender(name, &w, to_tx[0], to_rx[1]);
    char c = 0;
    int err = 0;
    mp_shm_t *rx = NULL;
    if (pid > 0 && read(to_rx[0], &c, 1) == 1 && c == 'r')
        rx = mp__shm_attach(name, &err);
    uint8_t ref[MP_SHM_REF_BYTES], old[MP_SHM_REF_BYTES];
    if (!g_direct_ok) {
        /* refused here (qemu-user has no process_vm_readv; Yama; a
         * seccomp filter): taken for slots only */
        CHECK(rx != NULL && mp__shm_state(rx) == MP_SHM_TAKEN,
              "taken without direct reads where they are refused: err %d, "
              "state %d",
              err, rx != NULL ? mp__shm_state(rx) : -1);
        mp__shm_ref_direct(&w, 0, vals, ref);
        CHECK(!mp__shm_get(rx, ref, got, 64),
              "a direct reference refused where direct reads are");
    } else {
        CHECK(rx != NULL && mp__shm_state(rx) == MP_SHM_TAKEN_DIRECT,
              "taken with direct reads: err %d, state %d", err,
              rx != NULL ? mp__shm_state(rx) : -1);
        mp__shm_ref_direct(&w, 0, vals + 10, ref);
        memset(got, 0, sizeof(got));
        CHECK(mp__shm_get(rx, ref, got, 100 * sizeof(float)) &&
                  memcmp(got, vals + 10, 100 * sizeof(float)) == 0,
              "a part read directly from the sender");
        CHECK(mp__shm_get(rx, ref, got, 100 * sizeof(float)),
              "read again (nothing to free)");
        /* an epoch number the window does not hold, one of no buffer */
        memcpy(old, ref, sizeof(old));
        put_le(old + 8, w.epoch[0] + 4u, 8);
        CHECK(!mp__shm_get(rx, old, got, 4), "a reference to another epoch");
        put_le(old + 8, (w.epoch[0] & ~(uint64_t)3) | 3u, 8);
        CHECK(!mp__shm_get(rx, old, got, 4), "an epoch of buffer 3");
        /* longer than a slot */
        CHECK(!mp__shm_get(rx, ref, got, MP_SHM_SLOT_BYTES + 4u),
              "a read longer than a slot");
        memcpy(old, ref, sizeof(old));
        CHECK(direct_cmd(to_tx[1], to_rx[0], '0', &w), "bump epoch 0");
        CHECK(!mp__shm_get(rx, old, got, 100 * sizeof(float)),
              "a reference to an epoch gone");
        mp__shm_ref_direct(&w, 0, vals + 10, ref);
        CHECK(mp__shm_get(rx, ref, got, 100 * sizeof(float)),
              "the new epoch's reference");
        CHECK(direct_cmd(to_tx[1], to_rx[0], '1', &w) &&
                  direct_cmd(to_tx[1], to_rx[0], '2', &w),
              "bump epochs 1 and 2");
        CHECK(mp__shm_get(rx, ref, got, 100 * sizeof(float)),
              "epoch 0 holds when the others change");
        for (unsigned k = 1; k < MP_SHM_EPOCHS; k++) {
            mp__shm_ref_direct(&w, k, vals, old);
            CHECK(mp__shm_get(rx, old, got, 64) && memcmp(got, vals, 64) == 0,
                  "a reference under epoch %u", k);
        }
        /* addresses the sender does not have */
        uint8_t bad[MP_SHM_REF_BYTES];
        memcpy(bad, ref, sizeof(bad));
        put_le(bad, 8, 8);
        CHECK(!mp__shm_get(rx, bad, got, 64), "address 8: EFAULT, no signal");
        put_le(bad, UINT64_MAX - 16, 8);
        CHECK(!mp__shm_get(rx, bad, got, 64), "an address that wraps");
        CHECK(direct_cmd(to_tx[1], to_rx[0], 'w', &w), "wipe");
        CHECK(!mp__shm_get(rx, ref, got, 64), "a window wiped");
    }
    c = 'q';
    CHECK(write(to_tx[1], &c, 1) == 1, "quit");
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    CHECK(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the sender ended well (%d)", st);
    CHECK(!mp__shm_get(rx, ref, got, 64), "a sender gone");
    mp__shm_free(rx);
    close(to_tx[0]);
    close(to_tx[1]);
    close(to_rx[0]);
    close(to_rx[1]);

    /* regions taken without direct reads: one naming no window, one
     * naming this very process (a peer must not make us read our own
     * memory into parts), one with a magic the window does not hold, one
     * naming a live process that does not hold the region (the parent of
     * this test), one whose maker is gone, one naming a thread of this
     * process (its /proc/<tid>/fd is this process's table, which holds
     * the region), one naming a child of this process that holds an
     * older region of the name */
    mp__shm_window_init(&w);
    for (int k = 0; k < 7; k++) {
        static const char *what[] = {
            "no window",
            "this process",
            "another magic",
            "a process without it",
            "a maker gone",
            "a thread of this process",
            "a child holding an older region of that name"};
        const char *n = fresh_name();
        /* 6: a child forked while an older region of the name was open
         * here keeps it open (the same window address and magic in its
         * copy of this memory), after the name went to a new region */
        pid_t child = -1;
        int hold[2] = {-1, -1};
        if (k == 6) {
            mp_shm_t *prev = mp__shm_create(n, 2, 4096, &err);
            if (prev != NULL && pipe(hold) == 0) {
                child = fork();
                if (child == 0) {
                    char b;
                    close(hold[1]);
                    while (read(hold[0], &b, 1) > 0)
                        ;
                    _exit(0);
                }
                close(hold[0]);
            }
            mp__shm_free(prev); /* the name goes, the child keeps it */
        }
        mp_shm_t *tx = mp__shm_create(n, 2, 4096, &err);
        int fd = tx != NULL ? shm_open(n, O_RDWR | O_CLOEXEC, 0) : -1;
        bool ok = fd >= 0 && (k == 0 || mp__shm_expose(tx, &w));
        if (ok && k == 2) {
            uint8_t m[8];
            put_le(m, w.magic ^ 1u, 8);
            ok = pwrite(fd, m, 8, 32) == 8;
        }
        if (ok && k >= 3) {
            pid_t named = k == 3   ? getppid()
                          : k == 4 ? dead_pid()
                          : k == 5 ? helper_tid()
                                   : child;
            ok = named > 0 && write_u32(fd, 20, (uint32_t)named);
        }
        mp_shm_t *r = ok ? mp__shm_attach(n, &err) : NULL;
        CHECK(r != NULL && mp__shm_state(tx) == MP_SHM_TAKEN,
              "%s: taken without direct reads (state %d)", what[k],
              mp__shm_state(tx));
        mp__shm_ref_direct(&w, 0, vals, ref);
        CHECK(r == NULL || !mp__shm_get(r, ref, got, 64),
              "%s: a direct reference is refused", what[k]);
        if (fd >= 0)
            close(fd);
        mp__shm_free(r);
        mp__shm_free(tx);
        if (child > 0) {
            close(hold[1]);
            waitpid(child, NULL, 0);
        }
    }
    helper_stop();
}

/* A writer in another process changes its buffer under the epoch's
 * seqlock while this one reads it: in odd rounds the writer goes on to
 * the next round the moment the reader starts its read (the two race),
 * in even ones it waits until the read is over (then the read must
 * succeed). Never a mixed part. */
static void test_direct_race(void) {
    enum { WORDS = MP_SHM_SLOT_BYTES / 4u, ROUNDS = 1000 };
    if (!g_direct_ok) {
        printf("direct race: skipped, direct reads refused here\n");
        return;
    }
    static mp_shm_window_t w;
    static uint32_t buf[WORDS], got[WORDS];
    int to_rx[2], to_tx[2];
    if (pipe(to_rx) != 0 || pipe(to_tx) != 0) {
        CHECK(0, "pipes");
        return;
    }
    const char *name = fresh_name();
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        /* the sender: its region names its own window and process */
        int err = 0;
        char c = 0;
        mp__shm_window_init(&w);
        mp_shm_t *tx = mp__shm_create(name, 1, 64, &err);
        if (tx == NULL || !mp__shm_expose(tx, &w) ||
            write(to_rx[1], &c, 1) != 1)
            _exit(2);
        for (uint32_t round = 1; round <= ROUNDS; round++) {
            uint8_t msg[MP_SHM_REF_BYTES + 4];
            mp__shm_window_bump(&w, 0);
            for (uint32_t k = 0; k < WORDS; k++)
                buf[k] = round;
            mp__shm_ref_direct(&w, 0, buf, msg);
            put_le(msg + MP_SHM_REF_BYTES, round, 4);
            if (write(to_rx[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg) ||
                read(to_tx[0], &c, 1) != 1)
                _exit(3);
        }
        mp__shm_free(tx);
        _exit(0);
    }
    char c = 0;
    mp_shm_t *rx = NULL;
    int err = 0;
    if (pid > 0 && read(to_rx[0], &c, 1) == 1)
        rx = mp__shm_attach(name, &err);
    CHECK(rx != NULL, "the sender's region taken: err %d", err);
    long ok = 0, mixed = 0, even_failed = 0, odd_failed = 0;
    for (uint32_t n = 0; rx != NULL && n < ROUNDS; n++) {
        uint8_t msg[MP_SHM_REF_BYTES + 4];
        size_t have = 0;
        while (have < sizeof(msg)) {
            ssize_t r = read(to_rx[0], msg + have, sizeof(msg) - have);
            if (r <= 0)
                break;
            have += (size_t)r;
        }
        if (have < sizeof(msg))
            break;
        uint32_t round = get_le32(msg + MP_SHM_REF_BYTES);
        if ((round & 1u) == 1 && write(to_tx[1], &c, 1) != 1)
            break; /* go on: the writer's next round races this read */
        if (mp__shm_get(rx, msg, got, sizeof(got))) {
            ok++;
            for (uint32_t k = 0; k < WORDS; k++)
                if (got[k] != round) {
                    mixed++;
                    break;
                }
        } else if ((round & 1u) == 0) {
            even_failed++;
        } else {
            odd_failed++;
        }
        if ((round & 1u) == 0 && write(to_tx[1], &c, 1) != 1)
            break;
    }
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    CHECK(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the sender ran to its end (%d)", st);
    CHECK(ok >= ROUNDS / 2 && even_failed == 0,
          "every read not raced succeeded: %ld of %d got, %ld not raced "
          "failed",
          ok, ROUNDS, even_failed);
    CHECK(mixed == 0, "%ld of %ld parts got were mixed", mixed, ok);
    printf("direct race: %ld of %d reads got (%ld raced reads refused), %ld "
           "mixed\n",
           ok, ROUNDS, odd_failed, mixed);
    mp__shm_free(rx);
    close(to_rx[0]);
    close(to_rx[1]);
    close(to_tx[0]);
    close(to_tx[1]);
}

static void test_nothing_left(void) {
    for (unsigned i = 0; i < nnames; i++) {
        int e = name_exists(names[i]);
        CHECK(e == 0, "%s left in /dev/shm (%d)", names[i], e);
        if (e != 0)
            shm_unlink(names[i]);
    }
}

#endif

int main(void) {
    test_name();
#if defined(__linux__)
    name_seed =
        ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)clock();
    test_host_id();
    test_create_attach();
    test_round_trip();
    test_room();
    test_closed();
    test_seqlock();
    test_race();
    test_hostile();
    test_sweep();
    test_window();
    g_direct_ok = direct_reads_work();
    printf("direct reads %s here\n", g_direct_ok ? "work" : "are refused");
    test_direct();
    test_direct_race();
    test_nothing_left();
#else
    int err = 0;
    CHECK(mp__shm_create("/moshpit-x", 4, 64, &err) == NULL && err == ENOSYS,
          "no shared regions here: err %d", err);
#endif
    return test_summary("test_shm");
}
