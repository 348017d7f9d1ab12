/* SPDX-License-Identifier: MIT */
/*
 * test_cpu.c - unit test of the CPU feature checks (src/crypto/cpu.h): on
 * Linux their answers equal what the kernel reports in /proc/cpuinfo (the
 * "aes" flag; "vaes", "avx2" and "avx" together, which the kernel only shows
 * when it saves the YMM state), and in a GCC build also what GCC's
 * __builtin_cpu_supports() says. The AEGIS availability functions agree
 * with them: a CPU with the instructions runs the variant (its known answer
 * test passes), one without never announces it. Where there is no
 * /proc/cpuinfo, or the build is not for x86-64 (whose flags it would
 * compare), only the consistency checks run, and the test says so. On ARM
 * (arm64, 32-bit arm) the AES and PMULL bits of mp__cpu_features() equal
 * the hardware capability words read from /proc/self/auxv (under
 * qemu-user: the emulated CPU's), and arm64 runs AEGIS-256 exactly when
 * the CPU has AES.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "crypto/aegis.h"
#include "crypto/cpu.h"

#include "test_util.h"

#if defined(__x86_64__)
/* Whether the "flags" line of the first processor in /proc/cpuinfo lists
 * each of the n flags: 1 all, 0 not all, -1 no such file or line. */
static int cpuinfo_has(const char *const *want, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return -1;
    static char line[16384];
    int found = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        found = 1;
        for (size_t i = 0; i < n; i++) {
            /* whole words only: "aes" is not "vaes" */
            size_t len = strlen(want[i]);
            bool hit = false;
            for (char *p = strstr(line, want[i]); p != NULL && !hit;
                 p = strstr(p + 1, want[i]))
                hit = p > line && (p[-1] == ' ' || p[-1] == '\t') &&
                      (p[len] == ' ' || p[len] == '\n' || p[len] == '\0');
            if (!hit)
                found = 0;
        }
        break;
    }
    fclose(f);
    return found;
}
#endif

#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
/* The auxiliary vector entry type from /proc/self/auxv (pairs of unsigned
 * long), or 0 when absent; read without getauxval, which cpu.c uses. */
static unsigned long auxv_word(unsigned long type) {
    FILE *f = fopen("/proc/self/auxv", "rb");
    unsigned long kv[2], v = 0;
    if (f == NULL)
        return 0;
    while (fread(kv, sizeof kv[0], 2, f) == 2 && kv[0] != 0)
        if (kv[0] == type)
            v = kv[1];
    fclose(f);
    return v;
}

static void check_arm(void) {
    unsigned f = mp__cpu_features();
#if defined(__aarch64__)
    unsigned long hw = auxv_word(16); /* AT_HWCAP: AES bit 3, PMULL bit 4 */
    bool aes = (hw >> 3) & 1u, pmull = (hw >> 4) & 1u;
#else
    unsigned long hw = auxv_word(26); /* AT_HWCAP2: AES bit 0, PMULL 1 */
    bool aes = hw & 1u, pmull = (hw >> 1) & 1u;
#endif
    printf("test_cpu: ARM hwcaps: AES %s, PMULL %s\n", aes ? "yes" : "no",
           pmull ? "yes" : "no");
    CHECK(((f & MP_CPU_AES) != 0) == aes, "AES: features 0x%x, auxv %d", f,
          aes);
    CHECK(((f & MP_CPU_CLMUL) != 0) == pmull, "PMULL: features 0x%x, auxv %d",
          f, pmull);
    CHECK(!(f & MP_CPU_VAES), "VAES reported on ARM");
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
    CHECK(mp__aegis256_available() == aes,
          "AEGIS-256 available %d, ARMv8 AES %d", mp__aegis256_available(),
          aes);
#endif
}
#endif

int main(void) {
    bool aesni = mp__cpu_has_aesni(), vaes = mp__cpu_has_vaes_avx2();
    printf("test_cpu: AES-NI %s, VAES+AVX2 %s\n", aesni ? "yes" : "no",
           vaes ? "yes" : "no");

#if defined(__x86_64__)
    static const char *const k_aes[] = {"aes"};
    static const char *const k_vaes[] = {"vaes", "avx2", "avx"};
    int proc_aes = cpuinfo_has(k_aes, 1);
    int proc_vaes = cpuinfo_has(k_vaes, 3);
#else
    /* The x86 flags mean nothing to another architecture's build, and
     * under qemu-user /proc/cpuinfo is the x86 host's: no comparison, but
     * such a build has no x86 instructions to report. */
    int proc_aes = -1, proc_vaes = -1;
    CHECK(!aesni && !vaes, "x86 AES instructions reported on another CPU");
#endif
    if (proc_aes < 0 || proc_vaes < 0) {
        printf("test_cpu: no x86 /proc/cpuinfo flags, comparison skipped\n");
    } else {
        CHECK(aesni == (proc_aes == 1), "AES-NI: cpuid %d, /proc/cpuinfo %d",
              aesni, proc_aes);
        CHECK(vaes == (proc_vaes == 1), "VAES+AVX2: cpuid %d, /proc/cpuinfo %d",
              vaes, proc_vaes);
    }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    CHECK(aesni == (__builtin_cpu_supports("aes") != 0),
          "AES-NI: cpuid and __builtin_cpu_supports differ");
    CHECK(vaes == (__builtin_cpu_supports("vaes") &&
                   __builtin_cpu_supports("avx2")),
          "VAES+AVX2: cpuid and __builtin_cpu_supports differ");
#endif
    /* a CPU without the instructions never announces the variant; one with
     * them does, unless this build has no code path for it */
#if defined(__x86_64__)
    CHECK(((mp__cpu_features() & MP_CPU_AES) != 0) == aesni,
          "features and AES-NI differ");
    CHECK(((mp__cpu_features() & MP_CPU_VAES) != 0) == vaes,
          "features and VAES+AVX2 differ");
    CHECK(mp__aegis256_available() == aesni,
          "AEGIS-256 available %d, AES-NI %d", mp__aegis256_available(), aesni);
    CHECK(mp__aegis256x2_available() == vaes,
          "AEGIS-256X2 available %d, VAES+AVX2 %d", mp__aegis256x2_available(),
          vaes);
#else
    CHECK(!mp__aegis256x2_available(),
          "AEGIS-256X2 announced without its x86-64 code path");
#if !defined(__aarch64__)
    CHECK(!mp__aegis256_available(),
          "AEGIS-256 announced without an x86-64 or arm64 code path");
#endif
#endif
#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
    check_arm();
#endif
    return test_summary("test_cpu");
}
