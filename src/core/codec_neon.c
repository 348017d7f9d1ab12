/* SPDX-License-Identifier: MIT */
/*
 * codec_neon.c - the arm64 NEON kernels of the wire encodings (codec.h).
 */
#include "core/codec.h"

const mp_codec_kernels_t *mp__codec_kernels_neon(void) {
    return NULL;
}
