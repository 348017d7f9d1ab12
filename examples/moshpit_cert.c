/* SPDX-License-Identifier: MIT */
/*
 * moshpit_cert.c - the moshpit-cert tool: makes a swarm authority, issues
 * certificates with it and inspects them, using only the public API
 * (moshpit_authority_keypair, moshpit_cert_issue, moshpit_cert_inspect).
 * Keys and certificates are Z85 text. Only `authority` ever prints a
 * secret; `issue` reads it from an argument or (better: not visible in the
 * process list) from a file. Exit status: 0 success or VALID, 1 INVALID or
 * a failure, 2 a usage error.
 *
 *   moshpit-cert authority [--secret-file PATH]
 *   moshpit-cert issue (--authority-secret TEXT | --authority-secret-file
 *                       PATH) --peer KEY --swarm NAME (--days N | --until T)
 *   moshpit-cert inspect --authority KEY [--swarm NAME] [--peer KEY] CERT
 */
#include <errno.h>
#include <fcntl.h>
#include <moshpit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DAYS_MAX 36500

static void usage(FILE *f) {
    fprintf(f,
            "usage:\n"
            "  moshpit-cert authority [--secret-file PATH]\n"
            "      make a swarm authority; prints its public key (give it to\n"
            "      every peer as authority_key) and its secret key (keep it\n"
            "      offline), or writes the secret to a new file PATH (0600)\n"
            "  moshpit-cert issue (--authority-secret TEXT |\n"
            "                      --authority-secret-file PATH)\n"
            "                     --peer KEY --swarm NAME "
            "(--days N | --until UNIXTIME)\n"
            "      certify the peer identity KEY for swarm NAME, valid from\n"
            "      now; prints the certificate (PATH - reads stdin)\n"
            "  moshpit-cert inspect --authority KEY [--swarm NAME] "
            "[--peer KEY] CERT\n"
            "      print a certificate's fields and VALID or INVALID "
            "(reason);\n"
            "      exit 0 if valid, 1 if not (CERT - reads stdin)\n");
}

/* Overwrites a secret in a way the compiler may not drop. */
static void wipe(void *p, size_t n) {
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

/* Reads the first line of PATH ("-" = stdin) into buf, without the line
 * end. Returns 0, or -1 with a message printed. */
static int read_line(const char *path, char *buf, size_t cap) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "moshpit-cert: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int ok = fgets(buf, (int)cap, f) != NULL;
    if (f != stdin)
        fclose(f);
    if (!ok) {
        fprintf(stderr, "moshpit-cert: %s: nothing to read\n", path);
        return -1;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    char *end = NULL;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static void print_time(const char *label, uint64_t t) {
    char when[64] = "out of range";
    if (t <= (uint64_t)253402300799ull) {
        /* a 32-bit time_t (Debian 12's armhf) ends in January 2038: a
         * later time does not survive the cast, and gmtime_r would print
         * a date in 1901 */
        time_t tt = (time_t)t;
        struct tm tm;
        if (tt < 0 || (uint64_t)tt != t)
            snprintf(when, sizeof(when), "past this system's time_t");
        else if (gmtime_r(&tt, &tm) != NULL)
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    printf("%-12s %llu (%s)\n", label, (unsigned long long)t, when);
}

static void print_hex(const char *label, const uint8_t *p, size_t n) {
    printf("%-12s ", label);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

static int cmd_authority(int argc, char **argv) {
    const char *secret_file = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--secret-file") == 0 && i + 1 < argc) {
            secret_file = argv[++i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    uint8_t pub[32], sec[64];
    char pub_txt[MOSHPIT_KEY_TEXT_LEN + 1];
    char sec_txt[MOSHPIT_AUTHORITY_SECRET_TEXT_LEN + 1];
    if (moshpit_authority_keypair(pub, sec) != MOSHPIT_OK ||
        moshpit_key_to_text(pub, pub_txt) != MOSHPIT_OK ||
        moshpit_authority_secret_to_text(sec, sec_txt) != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-cert: cannot make an authority\n");
        wipe(sec, sizeof(sec));
        return 1;
    }
    wipe(sec, sizeof(sec));
    int rc = 0;
    if (secret_file != NULL) {
        int fd = open(secret_file, O_WRONLY | O_CREAT | O_EXCL, 0600);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f == NULL || fprintf(f, "%s\n", sec_txt) < 0 || fclose(f) != 0) {
            fprintf(stderr, "moshpit-cert: %s: %s\n", secret_file,
                    strerror(errno));
            if (f == NULL && fd >= 0)
                close(fd);
            rc = 1;
        } else {
            printf("public: %s\n", pub_txt);
        }
    } else {
        printf("public: %s\nsecret: %s\n", pub_txt, sec_txt);
    }
    wipe(sec_txt, sizeof(sec_txt));
    return rc;
}

static int cmd_issue(int argc, char **argv) {
    const char *secret = NULL, *secret_file = NULL, *peer = NULL;
    const char *swarm = NULL, *days = NULL, *until = NULL;
    /* option and value pairs */
    for (int i = 0; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--authority-secret") == 0)
            secret = v;
        else if (strcmp(a, "--authority-secret-file") == 0)
            secret_file = v;
        else if (strcmp(a, "--peer") == 0)
            peer = v;
        else if (strcmp(a, "--swarm") == 0)
            swarm = v;
        else if (strcmp(a, "--days") == 0)
            days = v;
        else if (strcmp(a, "--until") == 0)
            until = v;
        else {
            usage(stderr);
            return 2;
        }
    }
    if ((secret == NULL) == (secret_file == NULL) || peer == NULL ||
        swarm == NULL || (days == NULL) == (until == NULL)) {
        usage(stderr);
        return 2;
    }
    uint8_t pkey[32];
    if (moshpit_key_from_text(peer, pkey) != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-cert: --peer: not a key (40 Z85 "
                        "characters)\n");
        return 2;
    }
    uint64_t not_after = 0, n = 0;
    if (days != NULL) {
        if (parse_u64(days, DAYS_MAX, &n) != 0 || n == 0) {
            fprintf(stderr, "moshpit-cert: --days: 1 to %d\n", DAYS_MAX);
            return 2;
        }
        not_after = (uint64_t)time(NULL) + n * 86400u;
    } else if (parse_u64(until, UINT64_MAX, &not_after) != 0) {
        fprintf(stderr, "moshpit-cert: --until: seconds since 1970\n");
        return 2;
    }

    char sec_txt[MOSHPIT_AUTHORITY_SECRET_TEXT_LEN + 8];
    uint8_t sec[64];
    int rc = 2;
    if (secret_file != NULL) {
        if (read_line(secret_file, sec_txt, sizeof(sec_txt)) != 0)
            goto out;
    } else {
        snprintf(sec_txt, sizeof(sec_txt), "%s", secret);
    }
    if (moshpit_authority_secret_from_text(sec_txt, sec) != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-cert: not an authority secret key\n");
        goto out;
    }
    uint8_t cert[MOSHPIT_CERT_BYTES];
    char cert_txt[MOSHPIT_CERT_TEXT_LEN + 1];
    moshpit_err_t e = moshpit_cert_issue(sec, pkey, swarm, not_after, cert);
    if (e != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-cert: cannot issue: %s%s\n",
                moshpit_strerror(e),
                e == MOSHPIT_EINVAL
                    ? " (swarm name 1..255 bytes; expiry in the future, "
                      "before 10000; a nonzero key)"
                    : "");
        rc = e == MOSHPIT_EINVAL ? 2 : 1;
        goto out;
    }
    if (moshpit_cert_to_text(cert, cert_txt) != MOSHPIT_OK) {
        rc = 1;
        goto out;
    }
    printf("%s\n", cert_txt);
    rc = 0;
out:
    wipe(sec, sizeof(sec));
    wipe(sec_txt, sizeof(sec_txt));
    return rc;
}

static int cmd_inspect(int argc, char **argv) {
    const char *auth = NULL, *swarm = NULL, *peer = NULL, *cert_arg = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--authority") == 0 && v != NULL) {
            auth = v;
            i++;
        } else if (strcmp(a, "--swarm") == 0 && v != NULL) {
            swarm = v;
            i++;
        } else if (strcmp(a, "--peer") == 0 && v != NULL) {
            peer = v;
            i++;
        } else if (cert_arg == NULL && (a[0] != '-' || a[1] == '\0')) {
            cert_arg = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (auth == NULL || cert_arg == NULL) {
        usage(stderr);
        return 2;
    }
    uint8_t akey[32], pkey[32];
    if (moshpit_key_from_text(auth, akey) != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-cert: --authority: not a key\n");
        return 2;
    }
    if (peer != NULL && moshpit_key_from_text(peer, pkey) != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-cert: --peer: not a key\n");
        return 2;
    }
    char text[MOSHPIT_CERT_TEXT_LEN + 8];
    if (strcmp(cert_arg, "-") == 0) {
        if (read_line("-", text, sizeof(text)) != 0)
            return 1;
    } else {
        snprintf(text, sizeof(text), "%s", cert_arg);
    }
    uint8_t cert[MOSHPIT_CERT_BYTES];
    if (moshpit_cert_from_text(text, cert) != MOSHPIT_OK) {
        printf("status:      INVALID (not certificate text: %d Z85 "
               "characters expected)\n",
               MOSHPIT_CERT_TEXT_LEN);
        return 1;
    }
    moshpit_cert_info_t info;
    moshpit_err_t e =
        moshpit_cert_inspect(cert, akey, swarm, peer ? pkey : NULL, &info);
    if (e == MOSHPIT_EINVAL) {
        fprintf(stderr, "moshpit-cert: bad --authority or --swarm\n");
        return 2;
    }
    if (info.status != MOSHPIT_CERT_MALFORMED) {
        char ktxt[MOSHPIT_KEY_TEXT_LEN + 1];
        printf("%-12s %u\n", "version:", info.version);
        if (moshpit_key_to_text(info.peer_key, ktxt) == MOSHPIT_OK)
            printf("%-12s %s\n", "peer:", ktxt);
        print_hex("swarm hash:", info.swarm_hash, sizeof(info.swarm_hash));
        print_time("not before:", info.not_before);
        print_time("not after:", info.not_after);
        print_hex("authority:", info.authority_id, sizeof(info.authority_id));
    }
    if (e == MOSHPIT_OK) {
        printf("%-12s VALID\n", "status:");
        return 0;
    }
    printf("%-12s INVALID (%s)\n",
           "status:", moshpit_cert_strstatus(info.status));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "authority") == 0)
        return cmd_authority(argc - 2, argv + 2);
    if (strcmp(argv[1], "issue") == 0)
        return cmd_issue(argc - 2, argv + 2);
    if (strcmp(argv[1], "inspect") == 0)
        return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
