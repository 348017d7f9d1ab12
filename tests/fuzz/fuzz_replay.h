/* SPDX-License-Identifier: MIT */
/*
 * fuzz_replay.h - what every fuzz target shares: fail() (abort under
 * libFuzzer, count otherwise), the libFuzzer entry point around the
 * target's run_one(), and, without libFuzzer, a replay of a corpus
 * directory as an ordinary test. Seed files state what they should do:
 * names starting with "ok_" must decode (run_one returns nonzero), names
 * starting with "bad_" must not. Define FUZZ_NAME (the program name, for
 * messages) before including it, once per program.
 */
#ifndef MP_FUZZ_REPLAY_H
#define MP_FUZZ_REPLAY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MP_FUZZ_LIBFUZZER
#include <dirent.h>
#include <sys/stat.h>
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The target's checks: nonzero if the input decoded. */
static int run_one(const uint8_t *data, size_t size);

#ifndef MP_FUZZ_LIBFUZZER
static int failed;
#endif

static void fail(const char *what) {
    fprintf(stderr, FUZZ_NAME ": %s\n", what);
#ifdef MP_FUZZ_LIBFUZZER
    abort();
#else
    failed = 1;
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)run_one(data, size);
    return 0;
}

#ifndef MP_FUZZ_LIBFUZZER

/* -1 if the file cannot be read, 1 if a check failed, else 0. */
static int fuzz_replay_file(const char *path, const char *name) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (buf == NULL)
            break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (buf == NULL || err) {
        free(buf);
        return -1;
    }
    failed = 0;
    int decoded = run_one(buf, n);
    free(buf);
    if (strncmp(name, "ok_", 3) == 0 && !decoded)
        fail("an ok_ seed did not decode");
    if (strncmp(name, "bad_", 4) == 0 && decoded)
        fail("a bad_ seed decoded");
    return failed ? 1 : 0;
}

static int fuzz_by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file of dir in name order (a target with state
 * sees the inputs in the same order on every run); returns the number
 * that failed (printing each), or -1 if dir cannot be opened or holds no
 * input. *runs receives the number of inputs. At most 4096 files. */
static int fuzz_replay_dir(const char *dir, int *runs) {
    DIR *d = opendir(dir);
    *runs = 0;
    if (d == NULL) {
        fprintf(stderr, FUZZ_NAME ": cannot open corpus %s\n", dir);
        return -1;
    }
    static char *names[4096];
    size_t nn = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && nn < 4096)
        if (ent->d_name[0] != '.')
            names[nn++] = strdup(ent->d_name);
    closedir(d);
    qsort(names, nn, sizeof names[0], fuzz_by_name);
    int bad = 0;
    char path[4096];
    for (size_t i = 0; i < nn; i++) {
        struct stat st;
        if (names[i] == NULL)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            int r = fuzz_replay_file(path, names[i]);
            if (r != 0) {
                fprintf(stderr, FUZZ_NAME ": %s: %s\n", path,
                        r < 0 ? "cannot read" : "FAILED");
                bad++;
            }
            (*runs)++;
        }
        free(names[i]);
    }
    if (*runs == 0) {
        fprintf(stderr, FUZZ_NAME ": no inputs in %s\n", dir);
        return -1;
    }
    return bad;
}

#endif
#endif
