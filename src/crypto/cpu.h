/* SPDX-License-Identifier: MIT */
/*
 * cpu.h - which AES instructions this CPU and operating system can run, read
 * with CPUID (and XGETBV for the register state the OS saves) on x86-64, so
 * that aegis.c and aegis_x2.c pick their code path at run time with any
 * compiler. Elsewhere both answer false. No state: every call asks the CPU.
 * Thread-safe.
 */
#ifndef MP_CRYPTO_CPU_H
#define MP_CRYPTO_CPU_H

#include <stdbool.h>

/* AES-NI (the 128-bit SSE forms that AEGIS-256 uses). */
bool mp__cpu_has_aesni(void);

/* What AEGIS-256X2 uses: VAES (AES rounds on 256-bit registers), AVX and
 * AVX2, with the OS saving the YMM state across context switches. */
bool mp__cpu_has_vaes_avx2(void);

#endif
