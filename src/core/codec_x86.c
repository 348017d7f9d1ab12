/* SPDX-License-Identifier: MIT */
/*
 * codec_x86.c - the x86-64 AVX2 + F16C kernels of the wire encodings.
 */
#include "core/codec.h"

const mp_codec_kernels_t *mp__codec_kernels_x86(void) {
    return NULL;
}
