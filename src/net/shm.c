/* SPDX-License-Identifier: MIT */
/*
 * shm.c - a region of parts shared with a group mate on this host
 * (shm.h; docs/DESIGN.md, "Mates on this host").
 *
 * Layout (little-endian; offsets in bytes):
 *   0    u64 magic "mpshm001"
 *   8    u32 slots, 1..MP_SHM_SLOTS_MAX
 *   12   u32 bytes of a slot, 1..MP_SHM_SLOT_BYTES
 *   16   u32 state: 0 made, 1 taken by the receiver, 2 closed by either
 *        end (the other end then closes it too; mp__shm_state)
 *   16   ... 3 taken by the receiver, which reads the sender's memory
 *        directly (mp__shm_expose)
 *   20   u32 the sender's process id (mp__shm_sweep, direct reads)
 *   24   u64 the address of the sender's window (0: none; direct reads)
 *   32   u64 the window's magic
 *   64   per slot i, 8 bytes: u32 generation (sender), u32 freed (receiver)
 *   4096 the slots' bytes, slot i at 4096 + i * bytes of a slot
 *
 * Both ends reach the region only with pread and pwrite on its descriptor,
 * never through a mapping: the other process can shrink the file at any
 * time, and a read through a mapping past the new end would raise SIGBUS
 * in this one; pread returns short instead (and a write into a full
 * /dev/shm fails with ENOSPC where a mapping would raise SIGBUS too). The
 * system call around each
 * access orders it against the other process's. A slot's generation is
 * even once its bytes are written and odd while they are being written;
 * the receiver reads the generation, the bytes, and the generation again,
 * and takes the bytes only when both equal the one the (authenticated)
 * reference names.
 *
 * Direct reads (shm.h, mp_shm_window_t) go through process_vm_readv, which
 * the kernel allows only where this process may ptrace the sender (same
 * user, not refused by Yama's ptrace_scope or a seccomp filter), and
 * which fails with EFAULT, not a signal, on memory the sender no longer
 * has. The receiver tries it once when it takes the region, on the
 * window the header names, and says in the state word whether it worked;
 * a process id that names another process (another process id
 * namespace) finds no window with the magic there.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* process_vm_readv */
#endif
#include "shm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/crypto.h"

#if defined(__linux__)
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#endif

#define SHM_MAGIC 0x3130306d6873706dull /* "mpshm001" */
#define SHM_TABLE_OFF 64u
#define SHM_DATA_OFF 4096u

struct mp_shm {
    int fd;
    bool sender;
    bool linked; /* sender: the name is still there (the receiver never
                    took it) */
    char name[MP_SHM_NAME_MAX];
    uint32_t nslots, slot_bytes;
    /* sender only: per slot, the generation written and its round */
    uint32_t gen[MP_SHM_SLOTS_MAX];
    uint64_t round[MP_SHM_SLOTS_MAX];
    uint32_t next_gen, next_slot;
    /* receiver: the sender's memory is readable directly (its process,
     * its window and the window's magic) */
    bool direct;
    int pid;
    uint64_t win_addr, win_magic;
};

static void put_le(uint8_t *b, uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

void mp__shm_name(const uint8_t secret[16], char name[MP_SHM_NAME_MAX]) {
    static const char hex[] = "0123456789abcdef";
    int n = snprintf(name, MP_SHM_NAME_MAX, "/moshpit-");
    for (unsigned i = 0; i < 16; i++) {
        name[n++] = hex[secret[i] >> 4];
        name[n++] = hex[secret[i] & 15];
    }
    name[n] = '\0';
}

/* A new random epoch k (k in its low 2 bits, never 0), other than the
 * last one. */
static uint64_t new_epoch(uint64_t old, unsigned k) {
    uint64_t e;
    do
        e = (mp__crypto_random_u64() & ~(uint64_t)3) | k;
    while (e == 0 || e == old);
    return e;
}

void mp__shm_window_init(mp_shm_window_t *w) {
    uint64_t m;
    do
        m = mp__crypto_random_u64();
    while (m == 0);
    w->magic = m;
    for (unsigned k = 0; k < MP_SHM_EPOCHS; k++)
        w->epoch[k] = new_epoch(0, k);
    atomic_thread_fence(memory_order_seq_cst);
}

void mp__shm_window_bump(mp_shm_window_t *w, unsigned k) {
    if (k >= MP_SHM_EPOCHS)
        return;
    w->epoch[k] = new_epoch(w->epoch[k], k);
    /* the new epoch is visible before any write to the buffer after it */
    atomic_thread_fence(memory_order_seq_cst);
}

void mp__shm_window_wipe(mp_shm_window_t *w) {
    w->magic = 0;
    for (unsigned k = 0; k < MP_SHM_EPOCHS; k++)
        mp__shm_window_bump(w, k);
}

void mp__shm_ref_direct(const mp_shm_window_t *w, unsigned k, const void *addr,
                        uint8_t ref[MP_SHM_REF_BYTES]) {
    put_le(ref, (uint64_t)(uintptr_t)addr, 8);
    put_le(ref + 8, k < MP_SHM_EPOCHS ? w->epoch[k] : 0, 8);
}

bool mp__shm_ref_direct_is(const uint8_t ref[MP_SHM_REF_BYTES]) {
    return get_le(ref + 8, 8) != 0;
}

#if defined(__linux__)

bool mp__shm_host_id(uint8_t out[32]) {
    char boot[64] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f == NULL)
        return false;
    size_t n = fread(boot, 1, sizeof(boot) - 1, f);
    fclose(f);
    struct stat ns;
    if (n < 16 || stat("/proc/self/ns/net", &ns) != 0)
        return false;
    uint8_t buf[sizeof(boot) + 24] = {0};
    memcpy(buf, boot, sizeof(boot));
    put_le(buf + sizeof(boot), (uint64_t)ns.st_dev, 8);
    put_le(buf + sizeof(boot) + 8, (uint64_t)ns.st_ino, 8);
    put_le(buf + sizeof(boot) + 16, (uint64_t)geteuid(), 8);
    mp__crypto_host_hash(buf, sizeof(buf), out);
    return true;
}

static bool pread_all(int fd, void *dst, size_t len, uint64_t off) {
    uint8_t *d = dst;
    while (len > 0) {
        ssize_t r = pread(fd, d, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        d += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return true;
}

static bool pwrite_all(int fd, const void *src, size_t len, uint64_t off) {
    const uint8_t *s = src;
    while (len > 0) {
        ssize_t r = pwrite(fd, s, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        s += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return true;
}

static bool read_u32(int fd, uint64_t off, uint32_t *v) {
    uint8_t b[4];
    if (!pread_all(fd, b, 4, off))
        return false;
    *v = (uint32_t)get_le(b, 4);
    return true;
}

static bool write_u32(int fd, uint64_t off, uint32_t v) {
    uint8_t b[4];
    put_le(b, v, 4);
    return pwrite_all(fd, b, 4, off);
}

static uint64_t region_bytes(uint32_t nslots, uint32_t slot_bytes) {
    return (uint64_t)SHM_DATA_OFF + (uint64_t)nslots * slot_bytes;
}

mp_shm_t *mp__shm_create(const char *name, uint32_t nslots, uint32_t slot_bytes,
                         int *err) {
    int e = EINVAL;
    if (name == NULL || nslots == 0 || nslots > MP_SHM_SLOTS_MAX ||
        slot_bytes == 0 || slot_bytes > MP_SHM_SLOT_BYTES) {
        if (err != NULL)
            *err = e;
        return NULL;
    }
    mp_shm_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        if (err != NULL)
            *err = ENOMEM;
        return NULL;
    }
    s->fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s->fd < 0) {
        e = errno;
        free(s);
        if (err != NULL)
            *err = e;
        return NULL;
    }
    s->linked = true;
    s->sender = true;
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->nslots = nslots;
    s->slot_bytes = slot_bytes;
    /* an even generation to start from that no earlier region of the
     * pair used: a late reference to a region this one replaced never
     * matches a slot of this one */
    s->next_gen = (uint32_t)(mp__crypto_random_u64() & ~(uint64_t)1);
    if (s->next_gen == 0)
        s->next_gen = 2;
    uint8_t hdr[SHM_TABLE_OFF] = {0};
    put_le(hdr, SHM_MAGIC, 8);
    put_le(hdr + 8, nslots, 4);
    put_le(hdr + 12, slot_bytes, 4);
    put_le(hdr + 20, (uint32_t)getpid(), 4);
    /* the header first, so that a region of a sender killed at once
     * still names its process for mp__shm_sweep */
    errno = 0;
    if (!pwrite_all(s->fd, hdr, sizeof(hdr), 0) ||
        ftruncate(s->fd, (off_t)region_bytes(nslots, slot_bytes)) != 0) {
        e = errno != 0 ? errno : EIO;
        mp__shm_free(s);
        if (err != NULL)
            *err = e;
        return NULL;
    }
    return s;
}

/* Reads len bytes at addr in process pid: all of them or false. */
static bool vm_read(int pid, uint64_t addr, void *dst, size_t len) {
    if (pid <= 0 || addr == 0 || addr > UINTPTR_MAX - len)
        return false;
    struct iovec l = {.iov_base = dst, .iov_len = len};
    struct iovec r = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    return process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0) == (ssize_t)len;
}

/* The sender's window holds the magic and epoch `epoch` (its low 2 bits
 * tell which) now. */
static bool window_holds(const mp_shm_t *s, uint64_t epoch) {
    uint64_t w[1 + MP_SHM_EPOCHS];
    unsigned k = (unsigned)(epoch & 3u);
    return k < MP_SHM_EPOCHS && vm_read(s->pid, s->win_addr, w, sizeof(w)) &&
           w[0] == s->win_magic && w[1 + k] == epoch;
}

/* pid's thread group (the process a thread id belongs to), -1 if unknown. */
static int tgid_of(int pid) {
    char path[40], line[128];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    int tgid = -1;
    while (tgid < 0 && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Tgid: %d", &tgid) != 1)
            tgid = -1;
    fclose(f);
    return tgid;
}

/* pid is another process than this one, with its own memory: not this
 * process, not one of its threads (whose /proc/<tid>/fd is this
 * process's table, and whose memory is this one's), not a process that
 * shares this one's memory (kcmp, where the kernel has it). */
static bool another_process(int pid) {
    if (pid <= 0 || pid == (int)getpid() || tgid_of(pid) != pid)
        return false;
#if defined(SYS_kcmp)
    if (syscall(SYS_kcmp, (long)getpid(), (long)pid, 1L /* KCMP_VM */, 0L,
                0L) == 0)
        return false;
#endif
    return true;
}

/* Process pid (another one: another_process) holds this region (fd) open:
 * one of its descriptors links to /dev/shm/<name> and is the same file
 * (device and inode) as ours. Only links with that exact text are looked
 * at closer (stat of a tmpfs file: nothing else of the target is touched,
 * so a file on a stalled file system cannot block this); a name unlinked
 * meanwhile (" (deleted)", an older region of that name that a process
 * this one forked may hold) is no match. The header that names the
 * process is the sender's to write: without this check a peer could name
 * this very process, one of its threads or children, or another that
 * this one may read, and have its memory read into parts. */
static bool holds_region(int pid, const char *name, int fd) {
    struct stat mine;
    if (!another_process(pid) || fstat(fd, &mine) != 0)
        return false;
    char dir[32], want[MP_SHM_NAME_MAX + 16], link[MP_SHM_NAME_MAX + 32];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
    snprintf(want, sizeof(want), "/dev/shm%s", name);
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        struct stat st;
        found = strcmp(link, want) == 0 &&
                fstatat(dirfd(d), e->d_name, &st, 0) == 0 &&
                st.st_dev == mine.st_dev && st.st_ino == mine.st_ino;
    }
    closedir(d);
    return found;
}

/* The sender's window is there and readable, in the process that made
 * the region: direct reads work. */
static bool probe_direct(const mp_shm_t *s) {
    uint64_t w[1 + MP_SHM_EPOCHS];
    if (s->win_magic == 0 || !holds_region(s->pid, s->name, s->fd) ||
        !vm_read(s->pid, s->win_addr, w, sizeof(w)) || w[0] != s->win_magic)
        return false;
    for (unsigned k = 0; k < MP_SHM_EPOCHS; k++)
        if (w[1 + k] == 0 || (w[1 + k] & 3u) != k)
            return false;
    return true;
}

bool mp__shm_expose(mp_shm_t *s, const mp_shm_window_t *w) {
    if (s == NULL || !s->sender || w == NULL)
        return false;
    uint8_t b[16];
    put_le(b, (uint64_t)(uintptr_t)w, 8);
    put_le(b + 8, w->magic, 8);
    return pwrite_all(s->fd, b, sizeof(b), 24);
}

mp_shm_t *mp__shm_attach(const char *name, int *err) {
    int e = EINVAL;
    mp_shm_t *s = name != NULL ? calloc(1, sizeof(*s)) : NULL;
    if (s == NULL)
        goto fail;
    /* never blocks: a FIFO of that name would not be a region anyway */
    s->fd = shm_open(name, O_RDWR | O_NONBLOCK | O_CLOEXEC, 0);
    if (s->fd < 0) {
        e = errno;
        free(s);
        s = NULL;
        goto fail;
    }
    snprintf(s->name, sizeof(s->name), "%s", name);
    /* a region of this user's that nobody else may open, of the size its
     * header says */
    struct stat sb;
    uint8_t hdr[SHM_TABLE_OFF];
    e = EPROTO;
    if (fstat(s->fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        sb.st_uid != geteuid() || (sb.st_mode & 077) != 0 ||
        !pread_all(s->fd, hdr, sizeof(hdr), 0) || get_le(hdr, 8) != SHM_MAGIC)
        goto fail;
    s->nslots = (uint32_t)get_le(hdr + 8, 4);
    s->slot_bytes = (uint32_t)get_le(hdr + 12, 4);
    if (get_le(hdr + 16, 4) != 0 || s->nslots == 0 ||
        s->nslots > MP_SHM_SLOTS_MAX || s->slot_bytes == 0 ||
        s->slot_bytes > MP_SHM_SLOT_BYTES ||
        (uint64_t)sb.st_size != region_bytes(s->nslots, s->slot_bytes))
        goto fail;
    s->pid = (int)get_le(hdr + 20, 4);
    s->win_addr = get_le(hdr + 24, 8);
    s->win_magic = get_le(hdr + 32, 8);
    s->direct = probe_direct(s);
    uint32_t want = s->direct ? MP_SHM_TAKEN_DIRECT : MP_SHM_TAKEN, st = 0;
    if (!write_u32(s->fd, 16, want) || !read_u32(s->fd, 16, &st) || st != want)
        goto fail; /* closed meanwhile: a new one may come by that name */
    /* the name goes (the region lives while the two descriptors do),
     * unless it names a newer region already */
    char path[MP_SHM_NAME_MAX + 16];
    struct stat nb;
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    if (stat(path, &nb) != 0 ||
        (nb.st_ino == sb.st_ino && nb.st_dev == sb.st_dev))
        shm_unlink(name);
    return s;
fail:
    if (s != NULL) {
        close(s->fd);
        free(s);
    }
    if (err != NULL)
        *err = e;
    return NULL;
}

int mp__shm_state(mp_shm_t *s) {
    uint32_t st = 0;
    if (s == NULL || !read_u32(s->fd, 16, &st) || st > MP_SHM_TAKEN_DIRECT)
        return MP_SHM_CLOSED;
    if (st != MP_SHM_MADE && s->sender)
        s->linked = false; /* the receiver removed the name */
    return (int)st;
}

/* A free slot, or nslots: never used, taken by the receiver, or of
 * another round (that round is over here: the receiver drops its parts
 * too, and a read racing the new bytes sees the generation move). One
 * read of the slot table. */
static uint32_t free_slot(mp_shm_t *s, uint64_t round) {
    uint8_t tab[8u * MP_SHM_SLOTS_MAX];
    bool have = false;
    for (uint32_t k = 0; k < s->nslots; k++) {
        uint32_t i = (s->next_slot + k) % s->nslots;
        if (s->gen[i] == 0 || s->round[i] != round)
            return i;
        if (!have && !pread_all(s->fd, tab, 8u * s->nslots, SHM_TABLE_OFF))
            return s->nslots;
        have = true;
        if ((uint32_t)get_le(tab + 8u * i + 4u, 4) == s->gen[i])
            return i;
    }
    return s->nslots;
}

bool mp__shm_room(mp_shm_t *s, uint64_t round) {
    return s != NULL && s->sender && free_slot(s, round) < s->nslots;
}

bool mp__shm_put(mp_shm_t *s, uint64_t round, const void *src, size_t len,
                 uint8_t ref[MP_SHM_REF_BYTES]) {
    if (s == NULL || !s->sender || len > s->slot_bytes)
        return false;
    uint32_t i = free_slot(s, round);
    if (i < s->nslots) {
        uint32_t g = s->next_gen;
        s->next_gen = g + 2u < g ? 2u : g + 2u; /* even, never 0 */
        uint64_t off = (uint64_t)SHM_DATA_OFF + (uint64_t)i * s->slot_bytes;
        if (!write_u32(s->fd, SHM_TABLE_OFF + 8u * i, g - 1u) ||
            !pwrite_all(s->fd, src, len, off) ||
            !write_u32(s->fd, SHM_TABLE_OFF + 8u * i, g))
            return false;
        s->gen[i] = g;
        s->round[i] = round;
        s->next_slot = (i + 1) % s->nslots;
        put_le(ref, i, 4);
        put_le(ref + 4, g, 4);
        put_le(ref + 8, 0, 8);
        return true;
    }
    return false;
}

bool mp__shm_get(mp_shm_t *s, const uint8_t ref[MP_SHM_REF_BYTES], void *dst,
                 size_t len) {
    if (s == NULL || s->sender)
        return false;
    uint64_t epoch = get_le(ref + 8, 8);
    if (epoch != 0) {
        /* the window, the bytes, the window again: each read completes
         * before the next begins (the fences order this thread's loads,
         * which the kernel did for it) */
        uint64_t addr = get_le(ref, 8);
        if (!s->direct || len > MP_SHM_SLOT_BYTES || !window_holds(s, epoch))
            return false;
        atomic_thread_fence(memory_order_acquire);
        if (!vm_read(s->pid, addr, dst, len))
            return false;
        atomic_thread_fence(memory_order_acquire);
        return window_holds(s, epoch);
    }
    uint32_t i = (uint32_t)get_le(ref, 4);
    uint32_t g = (uint32_t)get_le(ref + 4, 4);
    uint32_t g1 = 0, g2 = 0;
    if (i >= s->nslots || len > s->slot_bytes || g == 0 || (g & 1u) != 0)
        return false;
    uint64_t off = (uint64_t)SHM_DATA_OFF + (uint64_t)i * s->slot_bytes;
    if (!read_u32(s->fd, SHM_TABLE_OFF + 8u * i, &g1) || g1 != g ||
        !pread_all(s->fd, dst, len, off) ||
        !read_u32(s->fd, SHM_TABLE_OFF + 8u * i, &g2) || g2 != g)
        return false;
    write_u32(s->fd, SHM_TABLE_OFF + 8u * i + 4u, g);
    return true;
}

void mp__shm_sweep(void) {
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char name[MP_SHM_NAME_MAX];
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "moshpit-", 8) != 0 || n != 8 + 32)
            continue;
        name[0] = '/';
        memcpy(name + 1, e->d_name, n + 1);
        /* only regular files of this user, made more than a minute ago
         * (a region is taken within moments of its making; a younger one
         * may be of a live maker in another process id namespace), and
         * never an open that could block (another user's FIFO) */
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
            now - sb.st_mtime < 60)
            continue;
        int fd = openat(dirfd(d), e->d_name,
                        O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        uint8_t hdr[24];
        bool gone = false;
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
            sb.st_uid == geteuid()) {
            if (pread_all(fd, hdr, sizeof(hdr), 0) &&
                get_le(hdr, 8) == SHM_MAGIC) {
                /* never taken, and its maker is gone */
                pid_t pid = (pid_t)get_le(hdr + 20, 4);
                gone = get_le(hdr + 16, 4) == MP_SHM_MADE && pid > 0 &&
                       kill(pid, 0) != 0 && errno == ESRCH;
            } else {
                /* its maker ended before writing the header */
                gone = sb.st_size < (off_t)sizeof(hdr);
            }
        }
        close(fd);
        if (gone)
            shm_unlink(name);
    }
    closedir(d);
}

void mp__shm_free(mp_shm_t *s) {
    if (s == NULL)
        return;
    /* the other end learns it (a region it took goes with it) */
    int st = mp__shm_state(s);
    if (st != MP_SHM_CLOSED)
        write_u32(s->fd, 16, MP_SHM_CLOSED);
    if (s->sender && st == MP_SHM_MADE && s->linked)
        shm_unlink(s->name);
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

#else /* no shared regions here */

bool mp__shm_host_id(uint8_t out[32]) {
    (void)out;
    return false;
}

mp_shm_t *mp__shm_create(const char *name, uint32_t nslots, uint32_t slot_bytes,
                         int *err) {
    (void)name, (void)nslots, (void)slot_bytes;
    if (err != NULL)
        *err = ENOSYS;
    return NULL;
}

bool mp__shm_expose(mp_shm_t *s, const mp_shm_window_t *w) {
    (void)s, (void)w;
    return false;
}

mp_shm_t *mp__shm_attach(const char *name, int *err) {
    (void)name;
    if (err != NULL)
        *err = ENOSYS;
    return NULL;
}

int mp__shm_state(mp_shm_t *s) {
    (void)s;
    return MP_SHM_CLOSED;
}

bool mp__shm_room(mp_shm_t *s, uint64_t round) {
    (void)s, (void)round;
    return false;
}

bool mp__shm_put(mp_shm_t *s, uint64_t round, const void *src, size_t len,
                 uint8_t ref[MP_SHM_REF_BYTES]) {
    (void)s, (void)round, (void)src, (void)len, (void)ref;
    return false;
}

bool mp__shm_get(mp_shm_t *s, const uint8_t ref[MP_SHM_REF_BYTES], void *dst,
                 size_t len) {
    (void)s, (void)ref, (void)dst, (void)len;
    return false;
}

void mp__shm_sweep(void) {
}

void mp__shm_free(mp_shm_t *s) {
    (void)s;
}

#endif
