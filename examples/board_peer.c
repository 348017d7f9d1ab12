/* SPDX-License-Identifier: MIT */
/*
 * board_peer.c - one peer per board, as in README's Raspberry Pi cluster
 * walkthrough: a swarm closed by certificates from an authority kept off
 * the boards, peers on a LAN that listen on every interface and advertise
 * the address the others should dial. It makes an identity (keygen), or
 * joins the swarm with an identity, a certificate and optionally a
 * bootstrap endpoint, prints its own endpoint, waits for the members it
 * is told to expect and averages a vector filled with --value for a few
 * rounds, printing the first element after each.
 *
 *   board-peer keygen --key-file PATH
 *       writes a new identity to PATH (0600: public and secret key, Z85)
 *       and prints the public key, for the authority to certify
 *   board-peer run --swarm NAME --key-file PATH --authority KEY
 *                  --cert-file PATH [--listen EP] [--advertise EP]
 *                  [--bootstrap EP] [--members N] [--rounds R]
 *                  [--size N] [--value X]
 *
 * Built with the examples (not installed); on a board with libmoshpit-dev:
 * cc -O2 board_peer.c $(pkg-config --cflags --libs moshpit) -o board-peer
 */
#include <errno.h>
#include <fcntl.h>
#include <moshpit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr,
            "usage:\n"
            "  board-peer keygen --key-file PATH\n"
            "  board-peer run --swarm NAME --key-file PATH --authority KEY\n"
            "                 --cert-file PATH [--listen EP] [--advertise EP]\n"
            "                 [--bootstrap EP] [--members N] [--rounds R]\n"
            "                 [--size N] [--value X]\n");
}

static void wipe(void *p, size_t n) {
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

/* Reads up to two lines of PATH into a and b (without line ends). */
static int read_lines(const char *path, char *a, size_t na, char *b,
                      size_t nb) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "board-peer: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int ok = fgets(a, (int)na, f) != NULL;
    if (ok && b != NULL)
        ok = fgets(b, (int)nb, f) != NULL;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "board-peer: %s: too short\n", path);
        return -1;
    }
    a[strcspn(a, "\r\n")] = '\0';
    if (b != NULL)
        b[strcspn(b, "\r\n")] = '\0';
    return 0;
}

static int keygen(const char *path) {
    uint8_t pub[32], sec[32];
    char pt[MOSHPIT_KEY_TEXT_LEN + 1], st[MOSHPIT_KEY_TEXT_LEN + 1];
    if (moshpit_keypair(pub, sec) != MOSHPIT_OK ||
        moshpit_key_to_text(pub, pt) != MOSHPIT_OK ||
        moshpit_key_to_text(sec, st) != MOSHPIT_OK) {
        fprintf(stderr, "board-peer: cannot make a keypair\n");
        wipe(sec, sizeof sec);
        return 1;
    }
    wipe(sec, sizeof sec);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int rc = 0;
    if (f == NULL || fprintf(f, "%s\n%s\n", pt, st) < 0 || fclose(f) != 0) {
        fprintf(stderr, "board-peer: %s: %s\n", path, strerror(errno));
        if (f == NULL && fd >= 0)
            close(fd);
        rc = 1;
    } else {
        printf("public: %s\n", pt);
    }
    wipe(st, sizeof st);
    return rc;
}

static int run(int argc, char **argv) {
    const char *swarm = NULL, *key_file = NULL, *authority = NULL;
    const char *cert_file = NULL, *listen = "tcp://0.0.0.0:7400";
    const char *advertise = NULL, *boot = NULL;
    long members = 1, rounds = 3, size = 1000;
    double value = 0;
    for (int i = 0; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--swarm") == 0)
            swarm = v;
        else if (strcmp(a, "--key-file") == 0)
            key_file = v;
        else if (strcmp(a, "--authority") == 0)
            authority = v;
        else if (strcmp(a, "--cert-file") == 0)
            cert_file = v;
        else if (strcmp(a, "--listen") == 0)
            listen = v;
        else if (strcmp(a, "--advertise") == 0)
            advertise = v;
        else if (strcmp(a, "--bootstrap") == 0)
            boot = v;
        else if (strcmp(a, "--members") == 0)
            members = strtol(v, NULL, 10);
        else if (strcmp(a, "--rounds") == 0)
            rounds = strtol(v, NULL, 10);
        else if (strcmp(a, "--size") == 0)
            size = strtol(v, NULL, 10);
        else if (strcmp(a, "--value") == 0)
            value = strtod(v, NULL);
        else {
            usage();
            return 2;
        }
    }
    if (argc % 2 != 0 || swarm == NULL || key_file == NULL ||
        authority == NULL || cert_file == NULL || members < 1 || members > 64 ||
        rounds < 0 || size < 1 || size > (1L << 26)) {
        usage();
        return 2;
    }
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    char pt[64], st[64], ct[MOSHPIT_CERT_TEXT_LEN + 8];
    int bad = read_lines(key_file, pt, sizeof pt, st, sizeof st) != 0 ||
              read_lines(cert_file, ct, sizeof ct, NULL, 0) != 0;
    if (!bad &&
        (moshpit_key_from_text(pt, cfg.public_key) != MOSHPIT_OK ||
         moshpit_key_from_text(st, cfg.secret_key) != MOSHPIT_OK ||
         moshpit_key_from_text(authority, cfg.authority_key) != MOSHPIT_OK ||
         moshpit_cert_from_text(ct, cfg.cert) != MOSHPIT_OK)) {
        fprintf(stderr, "board-peer: a key or the certificate is not "
                        "readable\n");
        bad = 1;
    }
    wipe(st, sizeof st);
    if (bad) {
        wipe(cfg.secret_key, sizeof cfg.secret_key);
        return 1;
    }
    cfg.swarm = swarm;
    cfg.listen = listen;
    cfg.advertise = advertise;
    const char *bootv[2] = {boot, NULL};
    cfg.bootstrap = boot != NULL ? bootv : NULL;
    cfg.group_size = (uint32_t)members;
    /* boards finish their wait at different times; a full group starts at
     * its last member's JOIN, so a long window costs nothing */
    cfg.matchmaking_ms = 10000;
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&cfg, &mp);
    wipe(cfg.secret_key, sizeof cfg.secret_key);
    if (e != MOSHPIT_OK) {
        fprintf(stderr, "board-peer: open: %s\n", moshpit_strerror(e));
        return 1;
    }
    char ep[256];
    if (moshpit_endpoint(mp, ep, sizeof ep) == MOSHPIT_OK)
        printf("endpoint %s\n", ep);
    fflush(stdout);
    e = moshpit_wait_members(mp, (size_t)members, 120000);
    printf("members %zu\n", moshpit_members(mp));
    fflush(stdout);
    float *v = malloc((size_t)size * sizeof(float));
    int rc = v != NULL && e == MOSHPIT_OK ? 0 : 1;
    for (long r = 0; rc == 0 && r < rounds; r++) {
        for (long k = 0; k < size; k++)
            v[k] = (float)value;
        moshpit_round_t info;
        e = moshpit_average(mp, v, (size_t)size, 1.0, &info);
        if (e != MOSHPIT_OK) {
            fprintf(stderr, "board-peer: round %ld: %s\n", r + 1,
                    moshpit_strerror(e));
            rc = 1;
            break;
        }
        printf("round %ld: group of %u, value %g\n", r + 1, info.group_size,
               (double)v[0]);
        fflush(stdout);
    }
    free(v);
    moshpit_close(mp);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "keygen") == 0 &&
        strcmp(argv[2], "--key-file") == 0)
        return keygen(argv[3]);
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return run(argc - 2, argv + 2);
    usage();
    return 2;
}
