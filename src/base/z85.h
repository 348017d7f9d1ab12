/* SPDX-License-Identifier: MIT */
/*
 * z85.h - Z85 text (ZeroMQ RFC 32) of binary strings whose length is a
 * multiple of 4: the text form of keys, authority secrets and certificates.
 *
 * Pure functions over caller buffers, no allocation. The decoder is strict:
 * only the 85 characters of the alphabet, a length that is a multiple of 5,
 * and no group of 5 characters above 2^32 - 1, so every accepted text is
 * the canonical encoding of exactly one byte string.
 */
#ifndef MP_BASE_Z85_H
#define MP_BASE_Z85_H

#include <stddef.h>
#include <stdint.h>

/* Writes len * 5 / 4 characters and a NUL to out. len must be a multiple
 * of 4; returns 0, or -1 (nothing written) if it is not. */
int mp__z85_encode(const uint8_t *in, size_t len, char *out);

/* Decodes exactly tlen characters of text into tlen * 4 / 5 bytes. Returns
 * 0, or -1 if tlen is not a multiple of 5, a character is outside the
 * alphabet (NUL included) or a group exceeds 2^32 - 1; out is then left
 * untouched. */
int mp__z85_decode(const char *text, size_t tlen, uint8_t *out);

#endif
