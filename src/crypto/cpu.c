/* SPDX-License-Identifier: MIT */
/*
 * cpu.c - CPU feature checks for the AEGIS code paths (see cpu.h). GCC's
 * __builtin_cpu_supports() knows "vaes" but Clang 14's does not, so the
 * bits are read from CPUID directly: leaf 1 ECX for AES-NI, AVX and OSXSAVE,
 * leaf 7 subleaf 0 EBX for AVX2 and ECX for VAES, and XCR0 (XGETBV) for
 * whether the OS saves the XMM and YMM registers. A CPU can report AVX while
 * the OS has not enabled its state; the instructions then fault, so the
 * VEX-encoded path is only taken when both agree. On ARM the kernel
 * reports what the CPU has in the auxiliary vector (arm64: AT_HWCAP's
 * HWCAP_AES and HWCAP_PMULL; 32-bit arm: AT_HWCAP2's HWCAP2_AES and
 * HWCAP2_PMULL, set for an ARMv8 CPU running a 32-bit kernel or userland);
 * under qemu-user these are the emulated CPU's (-cpu, QEMU_CPU).
 */
#include "crypto/cpu.h"

#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

#define LEAF1_ECX_PCLMUL (1u << 1)
#define LEAF1_ECX_AES (1u << 25)
#define LEAF1_ECX_OSXSAVE (1u << 27)
#define LEAF1_ECX_AVX (1u << 28)
#define LEAF7_EBX_AVX2 (1u << 5)
#define LEAF7_ECX_VAES (1u << 9)
/* XCR0 bit 1: SSE (XMM) state, bit 2: AVX (upper YMM halves) state */
#define XCR0_SSE_AVX 0x6u

static uint32_t leaf1_ecx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return c;
}

/* XGETBV with ECX = 0 reads XCR0; only valid when OSXSAVE is set. Written
 * as the instruction itself so no target attribute ("xsave") is needed. */
static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

bool mp__cpu_has_aesni(void) {
    return (leaf1_ecx() & LEAF1_ECX_AES) != 0;
}

bool mp__cpu_has_vaes_avx2(void) {
    uint32_t c1 = leaf1_ecx();
    if ((c1 & LEAF1_ECX_OSXSAVE) == 0 || (c1 & LEAF1_ECX_AVX) == 0)
        return false;
    if ((xcr0() & XCR0_SSE_AVX) != XCR0_SSE_AVX)
        return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return false;
    return (b & LEAF7_EBX_AVX2) != 0 && (c & LEAF7_ECX_VAES) != 0;
}

unsigned mp__cpu_features(void) {
    uint32_t c1 = leaf1_ecx();
    unsigned f = 0;
    if (c1 & LEAF1_ECX_AES)
        f |= MP_CPU_AES;
    if (c1 & LEAF1_ECX_PCLMUL)
        f |= MP_CPU_CLMUL;
    if (mp__cpu_has_vaes_avx2())
        f |= MP_CPU_VAES;
    return f;
}

#else

bool mp__cpu_has_aesni(void) {
    return false;
}

bool mp__cpu_has_vaes_avx2(void) {
    return false;
}

#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
#include <sys/auxv.h>

/* The kernel's bit numbers (asm/hwcap.h), spelled out for C libraries
 * whose headers lack them. */
#if defined(__aarch64__)
#define MP_HWCAP_WORD AT_HWCAP
#define MP_HWCAP_AES (1ul << 3)   /* HWCAP_AES */
#define MP_HWCAP_PMULL (1ul << 4) /* HWCAP_PMULL */
#else
#define MP_HWCAP_WORD AT_HWCAP2
#define MP_HWCAP_AES (1ul << 0)   /* HWCAP2_AES */
#define MP_HWCAP_PMULL (1ul << 1) /* HWCAP2_PMULL */
#endif

unsigned mp__cpu_features(void) {
    unsigned long hw = getauxval(MP_HWCAP_WORD);
    unsigned f = 0;
    if (hw & MP_HWCAP_AES)
        f |= MP_CPU_AES;
    if (hw & MP_HWCAP_PMULL)
        f |= MP_CPU_CLMUL;
    return f;
}

#else

unsigned mp__cpu_features(void) {
    return 0;
}

#endif

#endif
