/* SPDX-License-Identifier: MIT */
/*
 * fuzz_swim_wire.c - fuzz target for the SWIM message decoder and the SWIM
 * machine behind it. Every input is decoded; what does not decode must fail
 * with MOSHPIT_EPROTO and leave the message zeroed; what decodes must
 * re-encode, decode again and re-encode to the same bytes (canonical form),
 * and is then handed to a SWIM machine (from one of a few senders chosen by
 * the input), which is ticked; every message the machine wants to send in
 * return must encode. Built with -DMP_FUZZ_LIBFUZZER it is a libFuzzer
 * target that aborts on a violation; otherwise a replay main() runs every
 * file of a corpus directory (argv[1], or MP_FUZZ_CORPUS_DIR) through the
 * same checks: names starting with "ok_" must decode, "bad_" must not.
 */
#include "core/swim.h"
#include "wire/wire_swim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_swim_wire"
#include "fuzz_replay.h"

static int all_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

static mp_swim_msg_t m1, m2;
static mp_swim_out_t out;
static uint8_t enc1[MP_SWIM_MSG_MAX], enc2[MP_SWIM_MSG_MAX],
    enc3[MP_SWIM_MSG_MAX];
static mp_swim_t *machine;
static uint64_t now_ms;

static void sender_id(unsigned k, uint8_t id[MP_SWIM_ID_BYTES]) {
    memset(id, 0, MP_SWIM_ID_BYTES);
    id[0] = (uint8_t)k;
}

/* A machine that knows a few members, kept across inputs. */
static mp_swim_t *get_machine(void) {
    if (machine != NULL)
        return machine;
    uint8_t self[MP_SWIM_ID_BYTES], id[MP_SWIM_ID_BYTES];
    mp_swim_config_t cfg;
    mp__swim_config_default(&cfg);
    cfg.max_members = 256; /* bounded however long the fuzzer runs */
    sender_id(0, self);
    if (mp__swim_new(&cfg, self, "tcp://127.0.0.1:1", 1, 0, &machine) !=
        MOSHPIT_OK)
        abort();
    static mp_swim_update_t u[4];
    for (unsigned k = 0; k < 4; k++) {
        sender_id(k + 1, id);
        memset(&u[k], 0, sizeof u[k]);
        memcpy(u[k].id, id, MP_SWIM_ID_BYTES);
        u[k].has_addr = 1;
        snprintf(u[k].addr, sizeof u[k].addr, "tcp://127.0.0.%u:1", k + 2);
    }
    mp__swim_absorb(machine, 0, id, u, 4);
    return machine;
}

/* Feeds a decoded message to the machine and drains what it answers. */
static void exercise(const mp_swim_msg_t *m, const uint8_t *data, size_t size) {
    mp_swim_t *sw = get_machine();
    uint8_t from[MP_SWIM_ID_BYTES];
    sender_id(size > 0 ? data[0] % 6u : 1u, from); /* 0 = self, 5 = new */
    now_ms += 1 + (size > 1 ? data[1] : 0) * 10u;
    if (mp__swim_on_message(sw, now_ms, from, m) != MOSHPIT_OK)
        fail("machine: on_message failed");
    for (int i = 0; i < 4; i++) {
        mp__swim_tick(sw, now_ms + (uint64_t)i * 300u);
        size_t len;
        while (mp__swim_poll_send(sw, &out))
            if (mp__wire_swim_msg_encode(&out.msg, enc3, sizeof enc3, &len) !=
                MOSHPIT_OK)
                fail("machine: produced a message that does not encode");
        mp_swim_event_t ev;
        while (mp__swim_poll_event(sw, &ev))
            ;
    }
    now_ms += 1200;
    if (mp__swim_live_count(sw) > 256)
        fail("machine: more members than its cap");
}

/* Returns 1 if data decoded as a SWIM message. */
static int run_one(const uint8_t *data, size_t size) {
    size_t len1, len2;
    moshpit_err_t e = mp__wire_swim_msg_decode(data, size, &m1);
    if (e == MOSHPIT_ENOMEM)
        return 0;
    if (e != MOSHPIT_OK) {
        if (e != MOSHPIT_EPROTO)
            fail("decode: unexpected error code");
        if (!all_zero(&m1, sizeof m1))
            fail("decode: failed decode left data behind");
        return 0;
    }
    if (mp__wire_swim_msg_encode(&m1, enc1, sizeof enc1, &len1) != MOSHPIT_OK) {
        fail("decoded message does not encode");
        return 1;
    }
    if (mp__wire_swim_msg_decode(enc1, len1, &m2) != MOSHPIT_OK) {
        fail("re-encoded message does not decode");
        return 1;
    }
    if (mp__wire_swim_msg_encode(&m2, enc2, sizeof enc2, &len2) != MOSHPIT_OK ||
        len1 != len2 || memcmp(enc1, enc2, len1) != 0)
        fail("encoding is not canonical");
    exercise(&m1, data, size);
    return 1;
}

#ifndef MP_FUZZ_LIBFUZZER

#ifndef MP_FUZZ_CORPUS_DIR
#define MP_FUZZ_CORPUS_DIR "tests/fuzz/corpus/swim"
#endif

int main(int argc, char **argv) {
    int runs;
    int bad = fuzz_replay_dir(argc > 1 ? argv[1] : MP_FUZZ_CORPUS_DIR, &runs);
    mp__swim_free(machine);
    if (bad < 0)
        return 1;
    printf("fuzz_swim_wire: %d inputs, %d failed\n", runs, bad);
    return bad != 0;
}

#endif
