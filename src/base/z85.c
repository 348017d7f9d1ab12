/* SPDX-License-Identifier: MIT */
/*
 * z85.c - strict Z85 encoding and decoding (see z85.h). Each 4 bytes, read
 * as a big-endian 32-bit number, become 5 base-85 digits, most significant
 * first. Decoding works in two passes, checking everything before writing
 * a byte, so a rejected text never leaves partial output.
 */
#include "base/z85.h"

static const char alphabet[86] = "0123456789abcdefghijklmnopqrstuvwxyz"
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 ".-:+=^!/*?&<>()[]{}@%$#";

/* Value of a Z85 digit, or -1 (also for NUL). A linear search: texts are
 * at most a few hundred characters. */
static int digit(char c) {
    for (int i = 0; i < 85; i++)
        if (alphabet[i] == c)
            return i;
    return -1;
}

int mp__z85_encode(const uint8_t *in, size_t len, char *out) {
    if (len % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = (uint32_t)in[i] << 24 | (uint32_t)in[i + 1] << 16 |
                     (uint32_t)in[i + 2] << 8 | (uint32_t)in[i + 3];
        for (int k = 4; k >= 0; k--) {
            out[o + (size_t)k] = alphabet[v % 85];
            v /= 85;
        }
        o += 5;
    }
    out[o] = '\0';
    return 0;
}

/* Value of the 5-digit group at g, or -1 (as uint64_t above 2^32 - 1). */
static uint64_t group(const char *g) {
    uint64_t v = 0;
    for (int k = 0; k < 5; k++) {
        int d = digit(g[k]);
        if (d < 0)
            return UINT64_MAX;
        v = v * 85 + (uint64_t)d;
    }
    return v;
}

int mp__z85_decode(const char *text, size_t tlen, uint8_t *out) {
    if (tlen % 5 != 0)
        return -1;
    for (size_t i = 0; i < tlen; i += 5)
        if (group(text + i) > UINT32_MAX)
            return -1;
    size_t o = 0;
    for (size_t i = 0; i < tlen; i += 5) {
        uint64_t v = group(text + i);
        out[o++] = (uint8_t)(v >> 24);
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
        out[o++] = (uint8_t)v;
    }
    return 0;
}
