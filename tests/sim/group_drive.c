/* SPDX-License-Identifier: MIT */
/*
 * group_drive.c - see group_drive.h.
 */
#include "group_drive.h"

void gdrive_init(gdrive_t *d, simnet_t *net, uint32_t id, uint32_t n) {
    d->net = net;
    d->id = id;
    d->n = n;
    d->done = false;
    d->done_ms = 0;
    d->wake_at = GDRIVE_NONE;
    d->pump_at = GDRIVE_NONE;
}

/* Pulls sends for every destination while its link has room (the link
 * drains within 1 ms), like a socket that can take more. */
static void pump(gdrive_t *d) {
    if (d->silent)
        return;
    uint64_t now = simnet_now(d->net), retry = GDRIVE_NONE;
    for (uint32_t dest = 0; dest < d->n; dest++) {
        if (dest == d->id)
            continue;
        for (;;) {
            uint64_t free_at = simnet_link_free_at(d->net, d->id, dest);
            if (free_at > now + 1) {
                if (free_at - 1 < retry)
                    retry = free_at - 1;
                break;
            }
            mp_send_t snd;
            if (!mp__group_next_send(d->g, dest, &snd))
                break;
            d->send(d, dest, &snd);
        }
    }
    if (retry != GDRIVE_NONE && mp__group_has_sends(d->g) &&
        (d->pump_at == GDRIVE_NONE || retry < d->pump_at)) {
        simnet_timer(d->net, d->id, retry, GDRIVE_TAG_PUMP);
        d->pump_at = retry;
    }
}

moshpit_err_t gdrive_start(gdrive_t *d, const mp_group_cfg_t *cfg) {
    moshpit_err_t err = mp__group_new(cfg, &d->g);
    if (err == MOSHPIT_OK)
        simnet_timer(d->net, d->id, cfg->now_ms, GDRIVE_TAG_START);
    return err;
}

void gdrive_after_event(gdrive_t *d) {
    pump(d);
    uint64_t wake = mp__group_next_wakeup(d->g);
    if (wake != GDRIVE_NONE &&
        (d->wake_at == GDRIVE_NONE || wake < d->wake_at)) {
        simnet_timer(d->net, d->id, wake, GDRIVE_TAG_WAKE);
        d->wake_at = wake;
    }
    if (!d->done && mp__group_done(d->g)) {
        d->done = true;
        d->done_ms = simnet_now(d->net);
        mp__group_result(d->g, &d->res);
    }
}

void gdrive_on_timer(gdrive_t *d, uint64_t tag) {
    uint64_t now = simnet_now(d->net);
    switch (tag & 0xff) {
    case GDRIVE_TAG_WAKE:
        if (d->wake_at != GDRIVE_NONE && now >= d->wake_at)
            d->wake_at = GDRIVE_NONE;
        mp__group_on_tick(d->g, now);
        break;
    case GDRIVE_TAG_PUMP:
        if (d->pump_at != GDRIVE_NONE && now >= d->pump_at)
            d->pump_at = GDRIVE_NONE;
        break;
    case GDRIVE_TAG_FAIL:
        mp__group_on_member_failed(d->g, now, (uint32_t)(tag >> 8));
        break;
    default:
        break;
    }
    gdrive_after_event(d);
}
