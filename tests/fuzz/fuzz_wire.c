/* SPDX-License-Identifier: MIT */
/*
 * fuzz_wire.c - fuzz target for the wire decoders (control messages and the
 * data-frame header). Every input is decoded both ways; whatever decodes
 * must re-encode, decode again to the same value and re-encode to the same
 * bytes, and whatever does not decode must fail with MOSHPIT_EPROTO and
 * leave the output zeroed. Built with -DMP_FUZZ_LIBFUZZER it is a libFuzzer
 * target that aborts on a violation; otherwise a replay main() runs every
 * file of a corpus directory (argv[1], or the directory compiled in as
 * MP_FUZZ_CORPUS_DIR) through the same checks, so the corpus runs as an
 * ordinary test.
 */
#include "core/codec.h"
#include "wire/wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_util.h"

#define FUZZ_NAME "fuzz_wire"
#include "fuzz_replay.h"

static int all_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

static mp_msg_t m1, m2;
static uint8_t enc1[MP_CTRL_MAX], enc2[MP_CTRL_MAX];

/* Returns 1 if data decoded as a control message. */
static int check_ctrl(const uint8_t *data, size_t size) {
    size_t len1, len2;
    moshpit_err_t e = mp__wire_msg_decode(data, size, &m1);
    if (e == MOSHPIT_ENOMEM)
        return 0;
    if (e != MOSHPIT_OK) {
        if (e != MOSHPIT_EPROTO)
            fail("control decode: unexpected error code");
        if (!all_zero(&m1, sizeof m1))
            fail("control decode: failed decode left data behind");
        return 0;
    }
    if (mp__wire_msg_encode(&m1, enc1, sizeof enc1, &len1) != MOSHPIT_OK) {
        fail("control: decoded message does not encode");
        return 1;
    }
    if (mp__wire_msg_decode(enc1, len1, &m2) != MOSHPIT_OK) {
        fail("control: re-encoded message does not decode");
        return 1;
    }
    if (!msg_equal(&m1, &m2))
        fail("control: round trip changed the message");
    if (mp__wire_msg_encode(&m2, enc2, sizeof enc2, &len2) != MOSHPIT_OK ||
        len1 != len2 || memcmp(enc1, enc2, len1) != 0)
        fail("control: encoding is not canonical");
    return 1;
}

/* A compressed body (what a receiver decodes once the tag verified): every
 * kernel set must decode it to the same floats and the same verdict, and
 * the verdict must be whether the floats are all finite. */
static void check_body(uint32_t codec, const uint8_t *body, uint32_t count) {
    float *ref = malloc((size_t)count * sizeof(float) + 4);
    float *got = malloc((size_t)count * sizeof(float) + 4);
    if (ref == NULL || got == NULL) {
        free(ref);
        free(got);
        return;
    }
    const mp_codec_kernels_t *c = mp__codec_kernels(0);
    bool (*dec[])(const uint8_t *, size_t, float *) = {
        NULL, c->f16_dec, c->bf16_dec, c->q8_dec, c->q4_dec};
    bool fin = dec[codec](body, count, ref);
    bool all = true;
    for (uint32_t i = 0; i < count; i++)
        all = all && isfinite(ref[i]);
    if (fin != all)
        fail("data body: finite verdict differs from the floats");
    const mp_codec_kernels_t *v;
    for (size_t k = 1; (v = mp__codec_kernels(k)) != NULL; k++) {
        bool (*vdec[])(const uint8_t *, size_t, float *) = {
            NULL, v->f16_dec, v->bf16_dec, v->q8_dec, v->q4_dec};
        if (vdec[codec](body, count, got) != fin ||
            memcmp(ref, got, (size_t)count * sizeof(float)) != 0)
            fail("data body: vector kernels decode differently");
    }
    free(ref);
    free(got);
}

/* Returns 1 if data decoded as a data frame. */
static int check_hdr_one(const uint8_t *data, size_t size) {
    mp_data_hdr_t h, h2;
    uint8_t out[MP_DATA_HDR_BYTES];
    moshpit_err_t e = mp__wire_data_hdr_decode(data, size, &h);
    if (e != MOSHPIT_OK) {
        if (e != MOSHPIT_EPROTO)
            fail("data header: unexpected error code");
        if (!all_zero(&h, sizeof h))
            fail("data header: failed decode left data behind");
        return 0;
    }
    size_t body = mp__codec_bytes(h.codec, h.count);
    if (size != MP_DATA_HDR_BYTES + body + MP_DATA_TAG_BYTES)
        fail("data header: accepted a length that does not match count");
    if (h.codec != MOSHPIT_COMPRESS_NONE)
        check_body(h.codec, data + MP_DATA_HDR_BYTES, h.count);
    mp__wire_data_hdr_encode(&h, out);
    if (memcmp(out, data, sizeof out) != 0)
        fail("data header: re-encoding differs from the input");
    if (mp__wire_data_hdr_decode(out, MP_DATA_HDR_BYTES, &h2) == MOSHPIT_OK &&
        h.count != 0)
        fail("data header: header alone accepted for count > 0");
    return 1;
}

static int check_hdr(const uint8_t *data, size_t size) {
    int ok = check_hdr_one(data, size);
    /* Random inputs rarely have a length matching their count field, so
     * also try the input with the count patched to fit its length: that
     * reaches the checks behind the length check. */
    if (size < MP_DATA_HDR_BYTES + MP_DATA_TAG_BYTES)
        return ok;
    size_t body = size - MP_DATA_HDR_BYTES - MP_DATA_TAG_BYTES;
    /* the count that fits the body for the codec byte as given (a
     * compressed size is monotonic in count: search it) */
    uint32_t codec = data[2];
    if (!mp__codec_valid(codec))
        return ok;
    uint32_t lo = 0, hi = MP_DATA_MAX_COUNT;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (mp__codec_bytes(codec, mid) < body)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (mp__codec_bytes(codec, lo) != body)
        return ok;
    uint8_t *copy = malloc(size);
    if (copy == NULL)
        return ok;
    memcpy(copy, data, size);
    uint32_t count = lo;
    for (int i = 0; i < 4; i++)
        copy[4 + i] = (uint8_t)(count >> (8 * i));
    (void)check_hdr_one(copy, size);
    free(copy);
    return ok;
}

/* Bit 0: decoded as a control message; bit 1: as a data frame. */
static int run_one(const uint8_t *data, size_t size) {
    return check_ctrl(data, size) | check_hdr(data, size) << 1;
}

#ifndef MP_FUZZ_LIBFUZZER

#ifndef MP_FUZZ_CORPUS_DIR
#define MP_FUZZ_CORPUS_DIR "tests/fuzz/corpus/wire"
#endif

int main(int argc, char **argv) {
    int runs;
    int bad = fuzz_replay_dir(argc > 1 ? argv[1] : MP_FUZZ_CORPUS_DIR, &runs);
    if (bad < 0)
        return 1;
    printf("fuzz_wire: %d inputs, %d failed\n", runs, bad);
    return bad != 0;
}

#endif
