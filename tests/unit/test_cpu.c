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
 * compare), only the consistency checks run, and the test says so.
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
    CHECK(mp__aegis256_available() == aesni,
          "AEGIS-256 available %d, AES-NI %d", mp__aegis256_available(), aesni);
    CHECK(mp__aegis256x2_available() == vaes,
          "AEGIS-256X2 available %d, VAES+AVX2 %d", mp__aegis256x2_available(),
          vaes);
#else
    CHECK(!mp__aegis256_available() && !mp__aegis256x2_available(),
          "an AEGIS variant announced without its x86-64 code path");
#endif
    return test_summary("test_cpu");
}
