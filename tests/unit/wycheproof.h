/* SPDX-License-Identifier: MIT */
/*
 * wycheproof.h - reads a Wycheproof AEAD test vector file (JSON, schema
 * aead_test_schema_v1, as in tests/vectors/wycheproof/) for the unit tests:
 * a small strict JSON parser that hands every test case, its hex fields
 * decoded, to a callback. Used by test_aegis (the production code) and
 * test_aegis_ref (the reference implementation).
 */
#ifndef MOSHPIT_TEST_WYCHEPROOF_H
#define MOSHPIT_TEST_WYCHEPROOF_H

#include <stddef.h>
#include <stdint.h>

/* One test case. The buffers live until the callback returns. */
typedef struct wp_aead_case {
    long tc_id;
    int valid; /* "result": 1 valid, 0 invalid, -1 acceptable */
    const uint8_t *key, *iv, *aad, *msg, *ct, *tag;
    size_t key_len, iv_len, aad_len, msg_len, ct_len, tag_len;
} wp_aead_case_t;

typedef void (*wp_aead_fn)(void *ctx, const wp_aead_case_t *c);

/* Parses the file at path and calls fn(ctx, case) for each object that has
 * a "tcId", in file order. Returns 0 with *declared = "numberOfTests" and
 * *count = the cases handed to fn; -1 (and a message on stderr) if the
 * file cannot be read, is not well-formed JSON, or a case lacks a field,
 * has bad hex or an unknown result. */
int wp_aead_each(const char *path, wp_aead_fn fn, void *ctx, long *declared,
                 long *count);

#endif
