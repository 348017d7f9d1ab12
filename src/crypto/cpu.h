/* SPDX-License-Identifier: MIT */
/*
 * cpu.h - which AES instructions this CPU and operating system can run, read
 * with CPUID (and XGETBV for the register state the OS saves) on x86-64 and
 * from the kernel's hardware capability bits (getauxval: AT_HWCAP on arm64,
 * AT_HWCAP2 on 32-bit arm) on ARM, so that aegis.c, aegis_x2.c and
 * session.c pick their code path at run time with any compiler. Elsewhere
 * everything answers false. No state: every call asks the CPU or the
 * kernel. Thread-safe.
 */
#ifndef MP_CRYPTO_CPU_H
#define MP_CRYPTO_CPU_H

#include <stdbool.h>

/* AES-NI (the 128-bit SSE forms that AEGIS-256 uses). */
bool mp__cpu_has_aesni(void);

/* What AEGIS-256X2 uses: VAES (AES rounds on 256-bit registers), AVX and
 * AVX2, with the OS saving the YMM state across context switches. */
bool mp__cpu_has_vaes_avx2(void);

/* What mp__cpu_features() reports, one bit per instruction group. */
enum {
    /* 128-bit AES rounds: AES-NI on x86-64; the ARMv8 Cryptographic
     * Extension's AESE/AESMC on arm64 and 32-bit arm (the Raspberry Pi 5's
     * Cortex-A76 has them, the Pi 4's Cortex-A72 as shipped does not) */
    MP_CPU_AES = 1u << 0,
    /* carry-less multiplication for GHASH: PCLMULQDQ; ARMv8 PMULL */
    MP_CPU_CLMUL = 1u << 1,
    /* VAES with AVX2 and the OS saving YMM (mp__cpu_has_vaes_avx2) */
    MP_CPU_VAES = 1u << 2
};

/* The MP_CPU_* bits this CPU and OS run. session.c derives the cipher set
 * a peer announces from them (mp__session_ciphers_for), so that what a CPU
 * without some of them announces is tested on one that has them. */
unsigned mp__cpu_features(void);

#endif
