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
#include "wire/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_util.h"

#ifndef MP_FUZZ_LIBFUZZER
#include <dirent.h>
#include <sys/stat.h>
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef MP_FUZZ_LIBFUZZER
static int failed;
#endif

static void fail(const char *what) {
    fprintf(stderr, "fuzz_wire: %s\n", what);
#ifdef MP_FUZZ_LIBFUZZER
    abort();
#else
    failed = 1;
#endif
}

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
    moshpit_err_t e = mp__msg_decode(data, size, &m1);
    if (e == MOSHPIT_ENOMEM)
        return 0;
    if (e != MOSHPIT_OK) {
        if (e != MOSHPIT_EPROTO)
            fail("control decode: unexpected error code");
        if (!all_zero(&m1, sizeof m1))
            fail("control decode: failed decode left data behind");
        return 0;
    }
    if (mp__msg_encode(&m1, enc1, sizeof enc1, &len1) != MOSHPIT_OK) {
        fail("control: decoded message does not encode");
        return 1;
    }
    if (mp__msg_decode(enc1, len1, &m2) != MOSHPIT_OK) {
        fail("control: re-encoded message does not decode");
        return 1;
    }
    if (!msg_equal(&m1, &m2))
        fail("control: round trip changed the message");
    if (mp__msg_encode(&m2, enc2, sizeof enc2, &len2) != MOSHPIT_OK ||
        len1 != len2 || memcmp(enc1, enc2, len1) != 0)
        fail("control: encoding is not canonical");
    return 1;
}

/* Returns 1 if data decoded as a data frame. */
static int check_hdr_one(const uint8_t *data, size_t size) {
    mp_data_hdr_t h, h2;
    uint8_t out[MP_DATA_HDR_BYTES];
    moshpit_err_t e = mp__data_hdr_decode(data, size, &h);
    if (e != MOSHPIT_OK) {
        if (e != MOSHPIT_EPROTO)
            fail("data header: unexpected error code");
        if (!all_zero(&h, sizeof h))
            fail("data header: failed decode left data behind");
        return 0;
    }
    if (size != MP_DATA_HDR_BYTES + (size_t)h.count * 4 + MP_DATA_TAG_BYTES)
        fail("data header: accepted a length that does not match count");
    mp__data_hdr_encode(&h, out);
    if (memcmp(out, data, sizeof out) != 0)
        fail("data header: re-encoding differs from the input");
    if (mp__data_hdr_decode(out, MP_DATA_HDR_BYTES, &h2) == MOSHPIT_OK &&
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
    if (body % 4 != 0 || body / 4 > MP_DATA_MAX_COUNT)
        return ok;
    uint8_t *copy = malloc(size);
    if (copy == NULL)
        return ok;
    memcpy(copy, data, size);
    uint32_t count = (uint32_t)(body / 4);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)run_one(data, size);
    return 0;
}

#ifndef MP_FUZZ_LIBFUZZER

#ifndef MP_FUZZ_CORPUS_DIR
#define MP_FUZZ_CORPUS_DIR "tests/fuzz/corpus/wire"
#endif

/*
 * Runs one file: -1 if it cannot be read, 1 if a check failed, else 0.
 * Seed files state what they should do: names starting with "ok_" must
 * decode one way or the other, names starting with "bad_" must not.
 */
static int replay_file(const char *path, const char *name) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (buf == NULL)
            break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (buf == NULL || err) {
        free(buf);
        return -1;
    }
    failed = 0;
    int decoded = run_one(buf, n);
    free(buf);
    if (strncmp(name, "ok_", 3) == 0 && !decoded)
        fail("an ok_ seed did not decode");
    if (strncmp(name, "bad_", 4) == 0 && decoded)
        fail("a bad_ seed decoded");
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : MP_FUZZ_CORPUS_DIR;
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "fuzz_wire: cannot open corpus %s\n", dir);
        return 1;
    }
    int runs = 0, bad = 0;
    struct dirent *ent;
    char path[4096];
    while ((ent = readdir(d)) != NULL) {
        struct stat st;
        if (ent->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        int r = replay_file(path, ent->d_name);
        if (r != 0) {
            fprintf(stderr, "fuzz_wire: %s: %s\n", path,
                    r < 0 ? "cannot read" : "FAILED");
            bad++;
        }
        runs++;
    }
    closedir(d);
    if (runs == 0) {
        fprintf(stderr, "fuzz_wire: no inputs in %s\n", dir);
        return 1;
    }
    printf("fuzz_wire: %d inputs, %d failed\n", runs, bad);
    return bad != 0;
}

#endif
