/* SPDX-License-Identifier: MIT */
/*
 * hello.c - the smallest moshpit program: one peer per process. Start the
 * first without arguments; it prints its endpoint. Start others with that
 * endpoint as argument. Each averages a vector of 4 floats five times.
 */
#include <moshpit.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    cfg.swarm = "hello";
    const char *boot[] = {argc > 1 ? argv[1] : NULL, NULL};
    cfg.bootstrap = boot;
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&cfg, &mp);
    if (e != MOSHPIT_OK) {
        fprintf(stderr, "open: %s\n", moshpit_strerror(e));
        return 1;
    }
    char ep[200];
    if (moshpit_endpoint(mp, ep, sizeof(ep)) == MOSHPIT_OK)
        printf("endpoint %s\n", ep);
    fflush(stdout); /* others need it now, also through a pipe */
    float v[4] = {(float)(argc), 1, 2, 3};
    for (int r = 0; r < 5; r++) {
        moshpit_round_t info;
        e = moshpit_average(mp, v, 4, 1.0, &info);
        printf("round %d: %s, group of %u, v[0] = %g\n", r, moshpit_strerror(e),
               info.group_size, v[0]);
    }
    moshpit_close(mp);
    return 0;
}
