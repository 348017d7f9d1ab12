/* SPDX-License-Identifier: MIT */
/*
 * group_drive.h - one member of a group all-reduce (core/group.h) driven
 * over the simulated network: the send loop that pulls parts while the
 * link has room, the wake and pump timers, and completion. Shared by the
 * group-level sim tests (test_sim_group.c, test_sim_robust.c), which put
 * parts on the wire (and misbehave) in their own send callback.
 */
#ifndef MP_SIM_GROUP_DRIVE_H
#define MP_SIM_GROUP_DRIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/group.h"
#include "sim/simnet.h"

#define GDRIVE_NONE UINT64_MAX

/* Timer tags (low byte; GDRIVE_TAG_FAIL carries the member above it). */
enum {
    GDRIVE_TAG_START = 1,
    GDRIVE_TAG_WAKE,
    GDRIVE_TAG_PUMP,
    GDRIVE_TAG_FAIL
};

typedef struct gdrive gdrive_t;

/* Puts one part from d to member dest on the wire. */
typedef void (*gdrive_send_fn)(gdrive_t *d, uint32_t dest,
                               const mp_send_t *snd);

struct gdrive {
    simnet_t *net;
    uint32_t id; /* this member; node id in net */
    uint32_t n;  /* group size */
    mp_group_t *g;
    gdrive_send_fn send;
    bool silent; /* sends nothing */
    bool done;
    uint64_t done_ms;
    mp_group_result_t res;
    uint64_t wake_at; /* earliest pending wake timer, GDRIVE_NONE if none */
    uint64_t pump_at; /* earliest pending pump timer */
};

/* Sets up d for member id of n (g, send and silent are the caller's). */
void gdrive_init(gdrive_t *d, simnet_t *net, uint32_t id, uint32_t n);

/* Creates d's group machine from cfg and arms its start at cfg->now_ms.
 * Errors: those of mp__group_new (d->g stays NULL). */
moshpit_err_t gdrive_start(gdrive_t *d, const mp_group_cfg_t *cfg);

/* After anything happened to d's machine: sends what the links take,
 * arms the timers, records completion. */
void gdrive_after_event(gdrive_t *d);

/* A timer of d fired (tag as armed): WAKE ticks the machine, FAIL tells it
 * a member failed; then gdrive_after_event. Other tags only do the
 * latter. */
void gdrive_on_timer(gdrive_t *d, uint64_t tag);

#endif
