/* SPDX-License-Identifier: MIT */
/*
 * shm.h - parts to a group mate on this host through shared memory
 * (docs/DESIGN.md, "Mates on this host"). One region per session and
 * direction, made by the sender: a header, a table of slots and the
 * slots' bytes. The sender copies a part into a free slot and sends the
 * slot's number and generation in a small sealed data frame; the receiver
 * copies the part out, checks that the generation did not move while it
 * copied (a seqlock: the sender reuses a slot only once the receiver freed
 * it or the slot's round is over), and frees the slot. Everything the
 * other side can write in the region (header, slot table, bytes) is
 * untrusted: checked before use, never a pointer or an index unchecked.
 */
#ifndef MP_NET_SHM_H
#define MP_NET_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* slots per region and the bytes of one (a part of 65536 float32) */
#define MP_SHM_SLOTS 16u
#define MP_SHM_SLOT_BYTES ((uint32_t)65536u * 4u)
#define MP_SHM_SLOTS_MAX 64u
/* a region's name: "/moshpit-" and 32 hex digits */
#define MP_SHM_NAME_MAX 48u
/* the reference a data frame carries instead of the values: a slot
 * (u32 slot, u32 generation, u64 0) or a place in the sender's memory
 * (u64 address, u64 epoch, never 0) */
#define MP_SHM_REF_BYTES 16u

typedef struct mp_shm mp_shm_t;

/* Direct reads: a receiver that may read the sender's memory (Linux's
 * process_vm_readv, allowed where it may ptrace the sender) copies a part
 * straight from the sender's buffer, once, instead of from a slot. The
 * sender's window, at an address its regions name, tells whether what a
 * reference names is still there: a magic that says "this is the window"
 * and one epoch per buffer (0: the caller's values, 1 and 2: the two
 * copies of our own share's result), each changed before its buffer
 * changes. A receiver reads the window, the bytes and the window again,
 * and takes the bytes only if the epoch the (authenticated) reference
 * names held throughout: a seqlock over the other process's memory. */
#define MP_SHM_EPOCHS 3u
typedef struct mp_shm_window {
    volatile uint64_t magic;
    /* epoch k has k in its low 2 bits and is never 0 */
    volatile uint64_t epoch[MP_SHM_EPOCHS];
} mp_shm_window_t;

/* A new window: random magic and epochs. */
void mp__shm_window_init(mp_shm_window_t *w);

/* Changes epoch k (below MP_SHM_EPOCHS) before its buffer changes:
 * references that name the old one read nothing from then on. */
void mp__shm_window_bump(mp_shm_window_t *w, unsigned k);

/* Before the window's memory goes: no reference matches it any more. */
void mp__shm_window_wipe(mp_shm_window_t *w);

/* The reference to bytes at addr in buffer k (the window's epoch k now). */
void mp__shm_ref_direct(const mp_shm_window_t *w, unsigned k, const void *addr,
                        uint8_t ref[MP_SHM_REF_BYTES]);

/* This host as peers on it see it (the boot, the network namespace, the
 * user): 32 bytes, equal for two processes that can share a region and
 * reach each other over the same network. false where the system does
 * not tell (then nothing is shared). */
bool mp__shm_host_id(uint8_t out[32]);

/* The name of a region from 16 secret bytes both ends derive. */
void mp__shm_name(const uint8_t secret[16], char name[MP_SHM_NAME_MAX]);

/* The sender's region: made new (it must not exist), mode 0600. NULL on
 * failure, *err then an errno. */
mp_shm_t *mp__shm_create(const char *name, uint32_t nslots, uint32_t slot_bytes,
                         int *err);

/* The reference names a place in the sender's memory (not a slot). */
bool mp__shm_ref_direct_is(const uint8_t ref[MP_SHM_REF_BYTES]);

/* Sender: names its window in the region's header (before the receiver
 * can take it), so that the receiver can try direct reads. */
bool mp__shm_expose(mp_shm_t *s, const mp_shm_window_t *w);

/* The receiver's side: opens the sender's region (a regular file of this
 * user that no one else may open), checks its size and header, tries a
 * direct read of the window the header names (in the process the header
 * names, which must be another process that holds the region open),
 * marks it taken (directly readable or not) and removes the name (the region
 * lives while both descriptors do). NULL on failure, *err then an errno
 * (ENOENT: not made yet; EPROTO: not a region, or one taken or closed already).
 */
mp_shm_t *mp__shm_attach(const char *name, int *err);

/* A region's state as its header says: made (not taken yet), taken by
 * the receiver (with direct reads of our memory or without), or closed by
 * either end (or unreadable). A sender uses a region only while it is
 * taken; a closed one it closes too. */
enum {
    MP_SHM_MADE = 0,
    MP_SHM_TAKEN = 1,
    MP_SHM_CLOSED = 2,
    MP_SHM_TAKEN_DIRECT = 3
};
int mp__shm_state(mp_shm_t *s);

/* Sender: a slot is free for a part of round `round`. */
bool mp__shm_room(mp_shm_t *s, uint64_t round);

/* Sender: copies len bytes into a free slot for round `round` (slots of
 * other rounds are free again) and gives the slot's reference. false
 * when no slot is free or len is over the slot size. */
bool mp__shm_put(mp_shm_t *s, uint64_t round, const void *src, size_t len,
                 uint8_t ref[MP_SHM_REF_BYTES]);

/* Receiver: copies the len bytes of the part `ref` names into dst and
 * frees the slot, or reads them from the sender's memory (a direct
 * reference, in a region taken with direct reads). false (dst then holds
 * nothing usable) when the reference is out of range, the slot was
 * rewritten meanwhile, or the epoch it names no longer holds. */
bool mp__shm_get(mp_shm_t *s, const uint8_t ref[MP_SHM_REF_BYTES], void *dst,
                 size_t len);

/* Removes the regions of this user, made over a minute ago, whose sender
 * ended before its receiver took them (a process killed mid-round leaves
 * its untaken regions behind; their names are gone once taken). Opens
 * nothing that is not a regular file of this user. */
void mp__shm_sweep(void);

/* Marks the region closed for the other end and closes it; the sender's
 * region also loses its name if the receiver never took it. NULL is
 * fine. */
void mp__shm_free(mp_shm_t *s);

#endif
