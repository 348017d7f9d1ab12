/* SPDX-License-Identifier: MIT */
/*
 * wycheproof.c - the Wycheproof AEAD file reader of the unit tests (see
 * wycheproof.h): a recursive-descent JSON parser over the whole file in
 * memory, strict enough to refuse a truncated or mangled file, that
 * collects the fields of each test case object.
 */
#include "wycheproof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    const char *p;
    size_t n;
} span_t;

typedef struct parser {
    const char *start, *p, *end;
    wp_aead_fn fn;
    void *ctx;
    long declared, count;
    int depth, failed;
} parser_t;

static void fail(parser_t *ps, const char *what) {
    if (!ps->failed)
        fprintf(stderr, "wycheproof: %s at byte offset %ld\n", what,
                (long)(ps->p - ps->start));
    ps->failed = 1;
}

static void skip_ws(parser_t *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' ||
                               *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

/* A string; *out spans its raw contents (escapes left as they are). */
static void parse_string(parser_t *ps, span_t *out) {
    if (ps->p >= ps->end || *ps->p != '"') {
        fail(ps, "expected a string");
        return;
    }
    const char *start = ++ps->p;
    while (ps->p < ps->end && *ps->p != '"') {
        if (*ps->p == '\\')
            ps->p++;
        ps->p++;
    }
    if (ps->p >= ps->end) {
        fail(ps, "unterminated string");
        return;
    }
    out->p = start;
    out->n = (size_t)(ps->p - start);
    ps->p++;
}

static void parse_value(parser_t *ps, span_t *str, long *num);

static int span_is(span_t s, const char *lit) {
    return s.p != NULL && s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* Decodes hex into a new buffer (at least one byte, so never NULL). */
static uint8_t *unhex(parser_t *ps, span_t s, size_t *len) {
    uint8_t *b = malloc(s.n / 2 + 1);
    if (b == NULL || s.n % 2 != 0) {
        fail(ps, b == NULL ? "out of memory" : "odd-length hex");
        free(b);
        return NULL;
    }
    for (size_t i = 0; i < s.n / 2; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s.p[2 * i + (size_t)k];
            unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                : 16u;
            if (d == 16u) {
                fail(ps, "bad hex digit");
                free(b);
                return NULL;
            }
            v = v * 16u + d;
        }
        b[i] = (uint8_t)v;
    }
    *len = s.n / 2;
    return b;
}

enum { F_KEY, F_IV, F_AAD, F_MSG, F_CT, F_TAG, F_N };
static const char *const FIELD[F_N] = {"key", "iv", "aad", "msg", "ct", "tag"};

/* A test case object's fields, handed to the callback. */
static void emit(parser_t *ps, long tc_id, const span_t *f, span_t result) {
    wp_aead_case_t c = {.tc_id = tc_id};
    uint8_t *buf[F_N] = {0};
    size_t len[F_N] = {0};
    if (span_is(result, "valid"))
        c.valid = 1;
    else if (span_is(result, "invalid"))
        c.valid = 0;
    else if (span_is(result, "acceptable"))
        c.valid = -1;
    else
        fail(ps, "test case without a known result");
    for (int k = 0; k < F_N && !ps->failed; k++) {
        if (f[k].p == NULL)
            fail(ps, "test case without one of key, iv, aad, msg, ct, tag");
        else
            buf[k] = unhex(ps, f[k], &len[k]);
    }
    if (!ps->failed) {
        c.key = buf[F_KEY], c.key_len = len[F_KEY];
        c.iv = buf[F_IV], c.iv_len = len[F_IV];
        c.aad = buf[F_AAD], c.aad_len = len[F_AAD];
        c.msg = buf[F_MSG], c.msg_len = len[F_MSG];
        c.ct = buf[F_CT], c.ct_len = len[F_CT];
        c.tag = buf[F_TAG], c.tag_len = len[F_TAG];
        ps->fn(ps->ctx, &c);
        ps->count++;
    }
    for (int k = 0; k < F_N; k++)
        free(buf[k]);
}

static void parse_object(parser_t *ps) {
    span_t f[F_N] = {{0}}, result = {0};
    long tc_id = 0;
    int has_id = 0;
    ps->p++; /* '{' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return;
    }
    while (!ps->failed) {
        span_t key = {0}, str = {0};
        long num = 0;
        skip_ws(ps);
        parse_string(ps, &key);
        skip_ws(ps);
        if (ps->failed || ps->p >= ps->end || *ps->p != ':') {
            fail(ps, "expected ':'");
            return;
        }
        ps->p++;
        skip_ws(ps);
        parse_value(ps, &str, &num);
        if (span_is(key, "tcId")) {
            tc_id = num;
            has_id = 1;
        } else if (span_is(key, "result")) {
            result = str;
        } else if (span_is(key, "numberOfTests") && ps->depth == 1) {
            ps->declared = num;
        }
        for (int k = 0; k < F_N; k++)
            if (span_is(key, FIELD[k]))
                f[k] = str;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            break;
        }
        fail(ps, "expected ',' or '}'");
    }
    if (has_id && !ps->failed)
        emit(ps, tc_id, f, result);
}

static void parse_array(parser_t *ps) {
    ps->p++; /* '[' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return;
    }
    while (!ps->failed) {
        span_t str;
        long num;
        skip_ws(ps);
        parse_value(ps, &str, &num);
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return;
        }
        fail(ps, "expected ',' or ']'");
    }
}

/* Any value; a string's span goes to *str, an integer's value to *num. */
static void parse_value(parser_t *ps, span_t *str, long *num) {
    str->p = NULL;
    str->n = 0;
    *num = 0;
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end of file");
        return;
    }
    if (++ps->depth > 32) {
        fail(ps, "nested too deeply");
        return;
    }
    char c = *ps->p;
    if (c == '{') {
        parse_object(ps);
    } else if (c == '[') {
        parse_array(ps);
    } else if (c == '"') {
        parse_string(ps, str);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char *stop;
        *num = strtol(ps->p, &stop, 10);
        if (stop == ps->p)
            fail(ps, "bad number");
        ps->p = stop;
        if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e'))
            fail(ps, "a number that is not an integer");
    } else if (ps->end - ps->p >= 4 && (memcmp(ps->p, "true", 4) == 0 ||
                                        memcmp(ps->p, "null", 4) == 0)) {
        ps->p += 4;
    } else if (ps->end - ps->p >= 5 && memcmp(ps->p, "false", 5) == 0) {
        ps->p += 5;
    } else {
        fail(ps, "unexpected character");
    }
    ps->depth--;
}

int wp_aead_each(const char *path, wp_aead_fn fn, void *ctx, long *declared,
                 long *count) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "wycheproof: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *more = realloc(buf, 2 * cap + 1);
        if (more == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = more;
        cap *= 2;
    }
    int read_error = ferror(f);
    fclose(f);
    if (buf == NULL || read_error) {
        fprintf(stderr, "wycheproof: cannot read %s\n", path);
        free(buf);
        return -1;
    }
    buf[n] = '\0'; /* strtol stops there at the latest */
    parser_t ps = {.start = buf,
                   .p = buf,
                   .end = buf + n,
                   .fn = fn,
                   .ctx = ctx,
                   .declared = -1};
    span_t str;
    long num;
    skip_ws(&ps);
    parse_value(&ps, &str, &num);
    skip_ws(&ps);
    if (!ps.failed && ps.p != ps.end)
        fail(&ps, "trailing bytes after the JSON value");
    free(buf);
    *declared = ps.declared;
    *count = ps.count;
    return ps.failed ? -1 : 0;
}
