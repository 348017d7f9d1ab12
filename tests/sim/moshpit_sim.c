/* SPDX-License-Identifier: MIT */
/*
 * moshpit_sim.c - the moshpit-sim tool: runs the real core of many peers in
 * the simulated network (tests/sim/moshsim.c) for a number of rounds and
 * prints, per round, the groups formed and how far the peers are from the
 * global mean; at the end, the first round that reached the target MSE.
 * The output is a function of the arguments only (no time, no addresses):
 * the same seed gives the same bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/agg.h"
#include "core/grid.h"
#include "sim/moshsim.h"

static void usage(FILE *f) {
    fputs(
        "usage: moshpit-sim [options]\n"
        "Runs N simulated moshpit peers (the real matchmaking and all-reduce\n"
        "core over an in-memory network with a virtual clock) and prints per\n"
        "round the groups formed and the mean squared distance of the live\n"
        "peers from their global weighted mean.\n"
        "\n"
        "  --peers N          initial swarm size (default 64)\n"
        "  --group-size M     target group size, 2..64 (default 8)\n"
        "  --min-group-size m smallest group formed (default 2); fewer\n"
        "                     peers end the round alone, values untouched\n"
        "  --dims d           grid dimensions, 0 = from the swarm size\n"
        "                     (default 0)\n"
        "  --rounds R         rounds to run (default 10)\n"
        "  --fail-prob P      each peer misses each round with probability P\n"
        "                     (it stays a member and still serves as\n"
        "                     matchmaker; default 0)\n"
        "  --loss L           per-message TCP segment loss: a lost message\n"
        "                     is retransmitted after 200 ms, doubling, and\n"
        "                     holds back later ones on its connection. Never\n"
        "                     dropped: ZeroMQ runs over TCP (default 0)\n"
        "  --churn C          per round, C random peers crash at a random\n"
        "                     time in the first 3 s of the round (reported\n"
        "                     to the others 100 ms later) and C new peers\n"
        "                     join with the vector of a random live peer\n"
        "                     (a state download), weight 1 and a random\n"
        "                     grid position (default 0)\n"
        "  --seed S           seed of everything (default 1)\n"
        "  --target-mse E     report the first round with MSE <= E\n"
        "                     (default 1e-9)\n"
        "  --count K          floats per vector (default 16)\n"
        "  --weights one|random  initial weights 1, or uniform in [0.5, 1.5)\n"
        "  --positions balanced|random  peer i at grid position i\n"
        "                     (default), or random coordinates\n"
        "  --stop             stop at the round that reaches the target\n"
        "  --quiet            print only the final line\n"
        "  --layout           print the grid d and layout the peers pick for\n"
        "                     --peers and --group-size, and exit\n"
        "  --aggregation mean|trimmed|clip  the groups' rule (default mean):\n"
        "                     weighted mean, coordinate-wise trimmed mean,\n"
        "                     or CenteredClip (docs/DESIGN.md)\n"
        "  --trim T           trimmed mean: drop T at each end (default 1)\n"
        "  --clip-tau X       CenteredClip radius per element, 0 = auto\n"
        "                     (default 0)\n"
        "  --clip-iters L     CenteredClip iterations (default 5)\n"
        "  --weight-cap K     no weight counts for more than K times the\n"
        "                     group's median; 0 = none for the mean, 4 for\n"
        "                     the robust rules (default 0)\n"
        "  --byzantine B      B random initial peers are Byzantine: they\n"
        "                     follow the protocol but set every value to\n"
        "                     1e20 before each call; they are left out of\n"
        "                     the measures (default 0)\n"
        "  --byzantine-weight W  weight they announce (default: the usual)\n"
        "  --compression none|fp16|bf16|int8|int4  wire compression of the\n"
        "                     parts (moshpit_config_t.compression; default\n"
        "                     none): each round also prints relerr, the\n"
        "                     rms and the largest distance of the peers\n"
        "                     from the initial weighted mean, relative to\n"
        "                     the rms of the initial values, and the last\n"
        "                     line the same after the last round\n",
        f);
    fputs("  --outbound O       O random initial peers are outbound-only\n"
          "                     (behind NAT): they reduce no share, are no\n"
          "                     matchmakers, and JOINs go under merge keys;\n"
          "                     a round prints 'unreduced G' for groups\n"
          "                     without a member that reduces (default 0)\n"
          "\n"
          "Initial values are standard normal floats. After a round each peer\n"
          "uses weight = group_weight / group_size (the swarm's total weight\n"
          "stays constant). mse is the mean over live peers and elements of\n"
          "(x - mean)^2, the mean weighted by the current weights; maxdev is\n"
          "max |x - mean| relative to the largest initial |x|. Timers: 2 s\n"
          "matchmaking window, 30 s round timeout, 5 s peer timeout; links\n"
          "5 ms plus a fixed 0-20 ms per link; calls start within 50 ms.\n"
          "With any of the last seven options, each round also prints err:\n"
          "the rms distance of the honest peers from the initial weighted\n"
          "mean of the honest peers (where an unattacked swarm converges).\n",
          f);
}

static int parse_u32(const char *s, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || v > UINT32_MAX || s[0] == '-')
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || s[0] == '-')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || end == s || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static const char *const compression_names[] = {"none", "fp16", "bf16", "int8",
                                                "int4"};

/* moshpit_compress_t of a name, -1 if none matches. */
static int compression_of(const char *v) {
    for (int k = 0;
         k < (int)(sizeof compression_names / sizeof compression_names[0]); k++)
        if (strcmp(v, compression_names[k]) == 0)
            return k;
    return -1;
}

/* RMS of the peers' initial values (before round 1), the scale
 * compression errors are given in, as in test_sim_compress. */
static double initial_rms(const moshsim_t *s, uint32_t peers, uint32_t count) {
    double x2 = 0;
    uint64_t k = 0;
    for (uint32_t q = 0; q < peers; q++) {
        const float *x = moshsim_values(s, q);
        if (x == NULL)
            continue;
        for (uint32_t e = 0; e < count; e++)
            x2 += (double)x[e] * x[e];
        k += count;
    }
    return k > 0 && x2 > 0 ? sqrt(x2 / (double)k) : 1;
}

static void print_round(const moshsim_stats_t *st, uint32_t group_size,
                        bool err, double rel) {
    if (st->round == 0) {
        printf("round %3u live %u mse %.6e maxdev %.3e", st->round, st->live,
               st->mse, st->maxdev);
        if (err)
            printf(" err %.3e", st->err);
        if (rel > 0)
            printf(" relerr %.3e / %.3e", st->err / rel, st->errmax / rel);
        printf("\n");
        return;
    }
    printf("round %3u live %u called %u groups %u (full %u, size %u..%u, "
           "mean %.2f of %u) alone %u degraded %u",
           st->round, st->live, st->called, st->groups, st->full_groups,
           st->min_size, st->max_size, st->mean_size, group_size, st->alone,
           st->degraded);
    if (st->left || st->joined)
        printf(" left %u joined %u", st->left, st->joined);
    if (st->hung)
        printf(" HUNG %u", st->hung);
    if (st->unreduced)
        printf(" unreduced %u", st->unreduced);
    printf(" mse %.6e maxdev %.3e", st->mse, st->maxdev);
    if (err)
        printf(" err %.3e", st->err);
    if (rel > 0)
        printf(" relerr %.3e / %.3e", st->err / rel, st->errmax / rel);
    printf("\n");
}

int main(int argc, char **argv) {
    moshsim_cfg_t c;
    moshsim_cfg_init(&c);
    uint32_t rounds = 10;
    double target = 1e-9;
    bool stop = false, quiet = false, layout = false;
    static const char *const valued[] = {
        "--peers",          "--group-size",
        "--min-group-size", "--dims",
        "--rounds",         "--fail-prob",
        "--loss",           "--churn",
        "--seed",           "--target-mse",
        "--count",          "--weights",
        "--positions",      "--aggregation",
        "--trim",           "--clip-tau",
        "--clip-iters",     "--weight-cap",
        "--byzantine",      "--byzantine-weight",
        "--compression",    "--outbound"};
    const size_t first_robust = 13; /* index of --aggregation in valued */
    const size_t end_robust = 20;   /* ... of the first option after them */
    bool robust_opt = false;
    moshpit_config_t agg; /* the rule as a peer would configure it */
    moshpit_config_init(&agg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
            known |= strcmp(a, valued[k]) == 0;
            robust_opt |= k >= first_robust && k < end_robust &&
                          strcmp(a, valued[k]) == 0;
        }
        if (!known && strcmp(a, "--help") != 0 && strcmp(a, "-h") != 0 &&
            strcmp(a, "--stop") != 0 && strcmp(a, "--quiet") != 0 &&
            strcmp(a, "--layout") != 0) {
            fprintf(stderr, "moshpit-sim: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--stop") == 0) {
            stop = true;
            continue;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        } else if (strcmp(a, "--layout") == 0) {
            layout = true;
            continue;
        } else if (v == NULL) {
            bad = 1;
        } else if (strcmp(a, "--peers") == 0) {
            bad = parse_u32(v, &c.peers);
        } else if (strcmp(a, "--group-size") == 0) {
            bad = parse_u32(v, &c.group_size);
        } else if (strcmp(a, "--min-group-size") == 0) {
            bad = parse_u32(v, &c.min_group_size);
        } else if (strcmp(a, "--dims") == 0) {
            bad = parse_u32(v, &c.dims);
        } else if (strcmp(a, "--rounds") == 0) {
            bad = parse_u32(v, &rounds);
        } else if (strcmp(a, "--fail-prob") == 0) {
            bad = parse_double(v, &c.fail_prob);
        } else if (strcmp(a, "--loss") == 0) {
            bad = parse_double(v, &c.loss);
        } else if (strcmp(a, "--churn") == 0) {
            bad = parse_u32(v, &c.churn);
        } else if (strcmp(a, "--seed") == 0) {
            bad = parse_u64(v, &c.seed);
        } else if (strcmp(a, "--target-mse") == 0) {
            bad = parse_double(v, &target);
        } else if (strcmp(a, "--count") == 0) {
            bad = parse_u32(v, &c.count);
        } else if (strcmp(a, "--weights") == 0) {
            bad = strcmp(v, "one") != 0 && strcmp(v, "random") != 0;
            c.random_weights = strcmp(v, "random") == 0;
        } else if (strcmp(a, "--positions") == 0) {
            bad = strcmp(v, "balanced") != 0 && strcmp(v, "random") != 0;
            c.random_positions = strcmp(v, "random") == 0;
        } else if (strcmp(a, "--aggregation") == 0) {
            agg.aggregation =
                strcmp(v, "mean") == 0      ? MOSHPIT_AGG_MEAN
                : strcmp(v, "trimmed") == 0 ? MOSHPIT_AGG_TRIMMED_MEAN
                : strcmp(v, "clip") == 0    ? MOSHPIT_AGG_CENTERED_CLIP
                                            : -1;
            bad = agg.aggregation < 0;
        } else if (strcmp(a, "--trim") == 0) {
            bad = parse_u32(v, &agg.trim);
        } else if (strcmp(a, "--clip-tau") == 0) {
            double t;
            bad = parse_double(v, &t) || t < 0 || t > 3e38;
            agg.clip_tau = (float)t;
        } else if (strcmp(a, "--clip-iters") == 0) {
            bad = parse_u32(v, &agg.clip_iters);
        } else if (strcmp(a, "--weight-cap") == 0) {
            bad = parse_u32(v, &agg.weight_cap);
        } else if (strcmp(a, "--byzantine") == 0) {
            bad = parse_u32(v, &c.byzantine);
        } else if (strcmp(a, "--byzantine-weight") == 0) {
            bad = parse_double(v, &c.byz_weight);
        } else if (strcmp(a, "--outbound") == 0) {
            bad = parse_u32(v, &c.outbound);
        } else if (strcmp(a, "--compression") == 0) {
            int k = compression_of(v);
            bad = k < 0;
            agg.compression = k < 0 ? 0 : (uint32_t)k;
        }
        if (bad) {
            fprintf(stderr, "moshpit-sim: bad or missing value for %s\n", a);
            return 2;
        }
        i++;
    }
    agg.group_size = c.group_size;
    if (mp__agg_from_config(&agg, &c.agg) != MOSHPIT_OK) {
        fprintf(stderr, "moshpit-sim: bad aggregation parameters\n");
        return 2;
    }
    if (layout) {
        /* what every peer computes from the swarm size (core/grid.c) */
        uint8_t radix[MP_GRID_DIMS_MAX];
        uint32_t m = c.group_size, d = c.dims;
        if (d == 0 && !c.random_positions)
            d = mp__grid_layout(m, c.peers, radix);
        else
            memset(radix, (int)m, sizeof radix);
        if (d == 0)
            d = mp__grid_dims_auto(m, c.peers);
        printf("d %u grid ", d);
        for (uint32_t k = 0; k < d; k++)
            printf("%s%u", k ? "x" : "", radix[k]);
        printf("%s\n", c.random_positions ? " (random keys)" : "");
        return 0;
    }
    static const char *const rule_names[] = {"mean", "trimmed", "clip"};
    /* the extra output only when asked for, so that the output of other
     * runs stays what it was */
    bool robust = robust_opt;
    moshsim_t *s = moshsim_new(&c);
    if (s == NULL)
        return 2;
    if (!quiet) {
        printf("moshpit-sim peers %u group-size %u min-group-size %u dims %u "
               "rounds %u fail-prob %g loss %g churn %u seed %llu count %u "
               "weights %s positions %s target-mse %g\n",
               c.peers, c.group_size, c.min_group_size, c.dims, rounds,
               c.fail_prob, c.loss, c.churn, (unsigned long long)c.seed,
               c.count, c.random_weights ? "random" : "one",
               c.random_positions ? "random" : "balanced", target);
        if (robust)
            printf("aggregation %s trim %u clip-tau %g clip-iters %u "
                   "weight-cap %u byzantine %u byzantine-weight %g\n",
                   rule_names[c.agg.mode], c.agg.trim, (double)c.agg.tau,
                   c.agg.iters, c.agg.weight_cap, c.byzantine, c.byz_weight);
    }
    if (!quiet && c.outbound > 0)
        printf("outbound %u\n", c.outbound);
    /* the compression error is reported only when asked for, like err */
    bool compressed = c.agg.codec != MOSHPIT_COMPRESS_NONE;
    double rel = compressed ? initial_rms(s, c.peers, c.count) : 0;
    if (!quiet && compressed)
        printf("compression %s\n", compression_names[c.agg.codec]);
    moshsim_stats_t st;
    moshsim_measure(s, &st);
    if (!quiet)
        print_round(&st, c.group_size, robust, rel);
    uint32_t reached = st.mse <= target ? 0 : UINT32_MAX;
    uint32_t hung = 0;
    for (uint32_t r = 1; r <= rounds; r++) {
        if (stop && reached != UINT32_MAX)
            break;
        moshsim_round(s, &st);
        hung += st.hung;
        if (!quiet)
            print_round(&st, c.group_size, robust, rel);
        if (reached == UINT32_MAX && st.mse <= target)
            reached = r;
    }
    if (reached != UINT32_MAX)
        printf("target MSE %g first reached at round %u\n", target, reached);
    else
        printf("target MSE %g not reached in %u rounds\n", target, rounds);
    if (robust)
        printf("err %.3e after round %u\n", st.err, st.round);
    if (compressed)
        printf("relerr rms %.3e max %.3e after round %u (%s, relative to "
               "the rms of the initial values)\n",
               st.err / rel, st.errmax / rel, st.round,
               compression_names[c.agg.codec]);
    moshsim_free(s);
    return hung ? 1 : 0;
}
