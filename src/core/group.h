/* SPDX-License-Identifier: MIT */
/*
 * group.h - sans-IO state machine of one butterfly all-reduce in a group.
 *
 * A group of n members (ordered roster, identical on every member) averages
 * a float vector. The vector is cut into n contiguous shares (sizes
 * proportional to announced bandwidth, see share.h); member i reduces share
 * i. Each share is cut into parts of at most part_elems elements, the unit
 * of transfer.
 *
 *   scatter: member i sends part p of share j (its own values) to member j.
 *   reduce : member j accumulates w_i * x_i for every contribution of part p
 *            that arrives; once every live member's contribution of part p
 *            arrived (or the missing ones are declared failed), part p is
 *            final: acc / sum(w) (or, if that weight sum is zero, the part
 *            keeps local values everywhere). With a robust rule (cfg.agg,
 *            agg.h) the contributions are kept instead and the part is
 *            reduced with the rule when it becomes final.
 *   gather : member j sends final part p of share j to every other live
 *            member, which writes it into its values.
 *
 * The machine never does I/O and never reads a clock: the driver feeds it
 * events (a part arrived, a member failed, time passed) and pulls actions
 * (next part to send to member d, next wake-up time, done). The caller's
 * values buffer is read for scatter and written by gather/finalize; after
 * mp__group_done() returns true the machine no longer touches it.
 *
 * Ownership: mp__group_new copies weights/bandwidths; values is borrowed
 * until mp__group_free. Not thread-safe; one driver thread owns it.
 */
#ifndef MP_CORE_GROUP_H
#define MP_CORE_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "core/agg.h"
#include "moshpit.h"

/* Part sizes in elements (mp__share_part_elems picks one per group) */
#define MP_PART_ELEMS_DEFAULT 65536u /* 256 KiB of float32, the largest */
#define MP_PART_ELEMS_MIN 16384u     /* 64 KiB of float32 */
#define MP_PARTS_PER_SHARE 8u        /* parts an even share is cut into */

typedef enum {
    MP_PART_SCATTER = 1,
    MP_PART_GATHER = 2,
    MP_PART_STATE = 3, /* a chunk of a served state (not a round's part) */
    MP_PART_MARK = 4   /* no values: "tell me what you hold" (a HAVE) */
} mp_part_kind_t;

typedef struct mp_group mp_group_t;

typedef struct mp_group_cfg {
    uint64_t round_id;
    uint32_t n;                 /* members, 1..MP_GROUP_MAX */
    uint32_t self;              /* this member's index in the roster */
    const double *weights;      /* n weights, finite and >= 0 */
    const uint32_t *bandwidths; /* n announced bandwidths (0 treated as 1) */
    uint64_t noshare; /* members (bit i) that reduce no share: outbound-only
                         peers; ignored when it names every member */
    float *values;    /* count values, averaged in place */
    size_t count;
    uint32_t part_elems;      /* 0 = MP_PART_ELEMS_DEFAULT */
    uint64_t now_ms;          /* start time (driver's clock) */
    uint64_t deadline_ms;     /* hard end of the round */
    uint32_t peer_timeout_ms; /* silence after which a member is dropped */
    mp_agg_t agg; /* reduction rule; zero = weighted mean, no weight bound */
} mp_group_cfg_t;

/* A part to put on the wire (pulled by the driver). */
typedef struct mp_send {
    mp_part_kind_t kind;
    uint32_t share;    /* share index = reducer's roster index */
    uint32_t part;     /* part index inside the share */
    const float *data; /* count floats; valid until the next call into g */
    uint32_t count;
    double wsum; /* gather: weight sum of the final part */
    /* what goes on the wire: the count floats encoded with cfg.agg.codec
     * (codec.h; with MOSHPIT_COMPRESS_NONE the floats at data themselves),
     * nbytes = mp__codec_bytes(codec, count); valid as long as data. A
     * driver sends these bytes; the receiver decodes them to floats for
     * mp__group_on_part. data holds the uncompressed values. */
    const uint8_t *bytes;
    size_t nbytes;
} mp_send_t;

/* Result of a finished round (filled by mp__group_result). */
typedef struct mp_group_result {
    uint32_t group_size;      /* members whose data counted (incl. self) */
    uint32_t peers_failed;    /* members this member dropped */
    double group_weight;      /* sum of weights of members not dropped */
    double fraction_averaged; /* elements that received a group result */
    uint64_t bytes_sent, bytes_received; /* payload bytes (encoded data) */
} mp_group_result_t;

/* Result codes of mp__group_on_part for a part that is rejected. */
typedef enum {
    MP_PART_OK = 0,
    MP_PART_DUP,         /* already have it: ignored */
    MP_PART_BAD_INDEX,   /* share/part/count do not match the layout */
    MP_PART_NONFINITE,   /* non-finite values: sender dropped from round */
    MP_PART_FROM_FAILED, /* sender already dropped: ignored */
    MP_PART_BAD_SENDER,  /* sender index out of range or self */
    MP_PART_LATE         /* round already over (done or deadline): ignored */
} mp_part_status_t;

moshpit_err_t mp__group_new(const mp_group_cfg_t *cfg, mp_group_t **out);
void mp__group_free(mp_group_t *g); /* NULL ok */

/* A part arrived from member `from`. data holds count floats and must be
 * float-aligned. A non-finite scatter or gather part
 * drops the sender from the round (as if it failed). */
mp_part_status_t mp__group_on_part(mp_group_t *g, uint64_t now_ms,
                                   uint32_t from, mp_part_kind_t kind,
                                   uint32_t share, uint32_t part,
                                   const float *data, uint32_t count,
                                   double wsum);

/* Like mp__group_on_part, for a driver that already knows whether the
 * count floats at data are all finite (it looked while they were hot in
 * cache): finite is 1 or 0, and must equal mp__vec_all_finite(data,
 * count), or MP_FINITE_UNKNOWN to let the machine check. */
#define MP_FINITE_UNKNOWN (-1)
mp_part_status_t mp__group_on_part_checked(mp_group_t *g, uint64_t now_ms,
                                           uint32_t from, mp_part_kind_t kind,
                                           uint32_t share, uint32_t part,
                                           const float *data, uint32_t count,
                                           double wsum, int finite);

/* The driver learned that member m is gone (disconnect, refused, ...). */
void mp__group_on_member_failed(mp_group_t *g, uint64_t now_ms, uint32_t m);

/* Time passed: applies peer timeouts and the hard deadline. */
void mp__group_on_tick(mp_group_t *g, uint64_t now_ms);

/* Next part to send to member dest, if one is ready. Returns false when
 * nothing is ready for dest now. The returned part counts as sent. */
bool mp__group_next_send(mp_group_t *g, uint32_t dest, mp_send_t *out);

/* Like mp__group_next_send, but only a gather part. */
bool mp__group_next_gather(mp_group_t *g, uint32_t dest, mp_send_t *out);
/* Scatter parts for dest not handed out yet (0 when dest is dropped, self
 * or the machine is done). */
uint32_t mp__group_scatter_left(const mp_group_t *g, uint32_t dest);

/* A member whose bandwidth in the roster (after mp__share_bandwidth_bound)
 * is at most the group's lower median / MP_SLOW_FACTOR, in a group of 3 or
 * more: its uplink is the round's bottleneck, so a driver sends its
 * scatter parts to one reducer after another instead of to all at once
 * (the first reducers finish early, and its download of their results
 * overlaps its upload). Only the order of its own sends changes. */
#define MP_SLOW_FACTOR 4u
bool mp__group_is_slow(const mp_group_t *g);

/* Whether any part is ready to be sent to some member. */
bool mp__group_has_sends(const mp_group_t *g);
/* Whether a part may be ready for member dest (what mp__group_has_sends
 * asks for every member); the next mp__group_next_send may still give
 * none. */
bool mp__group_has_sends_for(const mp_group_t *g, uint32_t dest);

/* Earliest time the machine wants an on_tick (UINT64_MAX = none). */
uint64_t mp__group_next_wakeup(const mp_group_t *g);

/* True once this member has everything it will get and has handed out
 * every send owed to a live member (or the deadline passed). From then on
 * the machine never touches values, unless mp__group_on_have queues a lost
 * part again (then it is not done until that is handed out); the data of
 * the last send handed out stays valid until the next call into g. */
bool mp__group_done(const mp_group_t *g);

/* Member m's silence limit while a scatter part from it is expected:
 * ms, at most (and 0 meaning) cfg.peer_timeout_ms; no effect when that is
 * 0. While only gather parts are expected the limit is m's plus the
 * largest of the live members' (m may wait that long for the slowest).
 * Unset, every member's is peer_timeout_ms (so 2 * peer_timeout_ms for
 * gathers). The driver sets them from what it measured (linkstat.h). */
void mp__group_set_silence(mp_group_t *g, uint32_t m, uint64_t ms);
/* Moves the hard end of the round earlier (never later). */
void mp__group_set_deadline(mp_group_t *g, uint64_t deadline_ms);
/* Moves the hard end of the round later (never earlier); the driver keeps
 * it within the call's own deadline. */
void mp__group_extend_deadline(mp_group_t *g, uint64_t deadline_ms);

/* Breaks of one member's connections a round forgives. */
#define MP_GROUP_BREAKS 3u
/* A connection to m broke (a disconnect event, or m's MARK): m gets its
 * own silence limit once more as patience, on top of its limit, and its
 * silence clock restarts now, so a blip is repaired while a death is
 * noticed after about twice the limit. Events within m's limit of the
 * last grant are the same break (no new grant); at most MP_GROUP_BREAKS
 * grants per member and round. Returns whether it granted. */
bool mp__group_on_break(mp_group_t *g, uint64_t now_ms, uint32_t m);
/* m's own silence limit (set_silence), 0 for self or out of range. */
uint64_t mp__group_limit(const mp_group_t *g, uint32_t m);
/* A quiet HAVE went to m: restarts its silence clock (the repair it asks
 * for gets m's limit) unless a break already granted m its patience or a
 * quiet HAVE restarted it since the last part accepted from m. */
void mp__group_quiet(mp_group_t *g, uint64_t now_ms, uint32_t m);
/* m's MARK arrived (its connection to this member broke): the same as
 * mp__group_on_break and nothing more, so MARKs alone keep m at most
 * MP_GROUP_BREAKS grants long. Returns whether it granted. */
bool mp__group_on_mark(mp_group_t *g, uint64_t now_ms, uint32_t m);
/* Encoded bytes of the largest part of share (0 for an empty share). */
uint64_t mp__group_part_bytes(const mp_group_t *g, uint32_t share);

/* The group's part size in elements (0 for NULL). */
uint32_t mp__group_part_elems(const mp_group_t *g);
/* Encoded bytes of share (what each other member scatters to its
 * reducer). */
uint64_t mp__group_share_bytes(const mp_group_t *g, uint32_t share);
/* Encoded bytes this member receives from member m in the round: m's
 * scatter parts of the own share and the gather parts of share m. */
uint64_t mp__group_bytes_from(const mp_group_t *g, uint32_t m);

/* True if member m is (still) considered alive by this member. */
bool mp__group_member_alive(const mp_group_t *g, uint32_t m);

void mp__group_result(const mp_group_t *g, mp_group_result_t *out);

/* Lost parts (a connection reset mid-round loses what was in its buffers).
 * A receiver tells a member what it holds from it (a HAVE message,
 * docs/PROTOCOL.md); the member hands out again only the parts it handed
 * out before that the receiver lacks.
 *
 * mp__group_holds writes what this member holds from member m: bit p of sc
 * (LSB first, nparts of the own share, at most sc_cap bytes) is set when own
 * part p has m's contribution or is final; bit p of ga (parts of share m, at
 * most ga_cap bytes) when gather part p of share m arrived or was given up.
 * *sc_len and *ga_len receive the bytes used. Parts past the caps are left
 * out (a receiver of the bitmap takes them as held). */
void mp__group_holds(const mp_group_t *g, uint32_t m, uint8_t *sc,
                     size_t sc_cap, size_t *sc_len, uint8_t *ga, size_t ga_cap,
                     size_t *ga_len);

/* How many times over a member may be sent again, in a round, the parts it
 * is handed: a bound on what lying HAVEs can cost (docs/SECURITY.md). */
#define MP_GROUP_REPEATS 2u

/* Member m holds what sc and ga say (mp__group_holds' format, bits past
 * their lengths count as held), and has accepted everything this member
 * sent it up to the driver's stamp upto (mp__group_stamp; the driver uses
 * its frame counter, so a part stamped at most upto that m lacks was lost,
 * one stamped later may still be on its way). The parts handed out to m
 * that it lacks and that were lost are queued to be handed out again (a
 * scatter part only while its gather from m has not arrived: the values it
 * is read from are then still this member's own), ahead of anything new;
 * *unsure receives how many others m lacks. A machine that was done
 * without reaching its deadline takes them too: it is not done again until
 * they are handed out (the driver must still own values). Returns the
 * number of parts queued; 0 when m is not alive, past the deadline, or
 * nothing was lost, or m had MP_GROUP_REPEATS times the parts it is handed
 * queued again in this round already. Parts handed out again count in
 * bytes_sent again and in mp__group_resent. */
uint32_t mp__group_on_have(mp_group_t *g, uint64_t now_ms, uint32_t m,
                           const uint8_t *sc, size_t sc_len, const uint8_t *ga,
                           size_t ga_len, uint64_t upto, uint32_t *unsure);

/* The part s just handed out to dest went out with stamp (increasing per
 * dest; the driver's frame counter). */
void mp__group_stamp(mp_group_t *g, uint32_t dest, const mp_send_t *s,
                     uint64_t stamp);

/* Something from m showed it is alive and sending (a mark of the data
 * plane): restarts m's silence clock. */
void mp__group_heard(mp_group_t *g, uint64_t now_ms, uint32_t m);

/* Whether this member should tell m what it holds now: m is alive, parts
 * from m are still expected, nothing was accepted from m for half of
 * peer_timeout_ms, and the last HAVE to m is at least that old. A true
 * answer counts as the HAVE sent (at now_ms). Never with peer_timeout_ms
 * 0. mp__group_have_wakeup is the earliest such time (UINT64_MAX: none);
 * a driver that sends no HAVEs ignores both. */
bool mp__group_have_due(mp_group_t *g, uint64_t now_ms, uint32_t m);
uint64_t mp__group_have_wakeup(const mp_group_t *g);

/* Parts handed out again after a HAVE, in total. */
uint32_t mp__group_resent(const mp_group_t *g);

/* When things happened in the round (the now_ms of the call that saw
 * them; 0: not yet or never), for the engine's timeline log. */
typedef struct mp_group_times {
    uint64_t first_scatter_ms; /* the first scatter part accepted */
    uint64_t first_gather_ms;  /* the first gather part accepted */
    uint64_t own_final_ms;     /* every part of the own share final */
    uint64_t gathered_ms;      /* no gather part expected any more */
} mp_group_times_t;
void mp__group_times(const mp_group_t *g, mp_group_times_t *out);

/* The driver did not run for gap_ms (its process was stopped): every
 * member's silence limit counts from gap_ms later than it did. NULL is
 * fine. */
void mp__group_pause(mp_group_t *g, uint64_t gap_ms);

#endif
