/* SPDX-License-Identifier: MIT */
/*
 * edge_trainer.c - federated training in plain C, for a device without
 * Python: several peer processes each hold a non-IID slice of the digits
 * data (peer p sees only the classes c with c % peers == p) and train one
 * softmax (multinomial logistic) regression model together. Each round a
 * peer copies its model into a snapshot, starts averaging the snapshot in
 * the background (moshpit_average_start) and keeps running local SGD steps
 * on its live model while the round runs; when the round is over
 * (moshpit_op_wait) it sets model = averaged snapshot + the local progress
 * made during the round, and starts the next. It prints each peer's test
 * accuracy against a model trained on its slice alone and against one
 * trained on all the data, and how much of the communication time was
 * hidden behind computation: the time from each start to the end of its
 * round, against the time spent blocked in moshpit_op_wait. --blocking 1
 * runs the usual local SGD instead for comparison (local steps, then a
 * blocking moshpit_average of the model: nothing hidden).
 *
 * The data: examples/data/digits.csv, the 1797 8x8 images of scikit-learn's
 * digits data set (UCI optdigits test set), one image per line as
 * "label,pixels" with the 64 pixel values 0..16 written as one base-17
 * character each (0-9, a-g), which keeps the file at 120 KB. Made once
 * with Debian's python3-sklearn:
 *
 *   /usr/bin/python3 -c 'from sklearn.datasets import load_digits; \
 *     d = load_digits(); a = "0123456789abcdefg"; \
 *     print("label,pixels"); \
 *     [print("%d,%s" % (y, "".join(a[int(v)] for v in x))) \
 *      for x, y in zip(d.data, d.target)]' > examples/data/digits.csv
 *
 * Every fifth image is the test set, the rest the training set.
 * --check MARGIN exits 1 unless every peer's final model beats the best
 * single-slice model by MARGIN (accuracy as a fraction) and every round
 * returned OK (the ctest edge_trainer does this).
 */
#include <errno.h>
#include <math.h>
#include <moshpit.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DIGITS_CSV
#define DIGITS_CSV "examples/data/digits.csv"
#endif

#define FEATURES 64
#define CLASSES 10
#define PARAMS (CLASSES * FEATURES + CLASSES) /* weights, then biases */
#define MAX_PEERS 16
#define MAX_SAMPLES 4096

typedef struct opts {
    int peers, rounds, steps, batch;
    int blocking;       /* --blocking: local steps, then moshpit_average (for
                           comparison: nothing hidden) */
    int matchmaking_ms; /* config matchmaking_ms (a full group of all
                           the live peers closes at once) */
    float lr;
    uint64_t seed;
    double check; /* < 0: no check */
    const char *data;
} opts_t;

typedef struct dataset {
    float x[MAX_SAMPLES][FEATURES];
    int y[MAX_SAMPLES];
    int n;
} dataset_t;

/* what a peer reports to the parent at the end */
typedef struct report {
    int32_t err; /* first error of a round, or MOSHPIT_OK */
    char endpoint[200];
    int samples;
    double acc, acc_alone;
    double op_ms;      /* sum over rounds: start to the end of the round */
    double blocked_ms; /* sum over rounds: time inside a blocking wait */
    double compute_ms; /* local SGD steps while rounds ran */
    double train_ms;   /* all the rounds, start to end */
    int grouped;       /* rounds averaged with every peer */
    int min_group;
} report_t;

static dataset_t train_set, test_set;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int pixel(int ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'g')
        return ch - 'a' + 10;
    return -1;
}

/* Reads the CSV into the training and test sets; 0 or -1 (printed). */
static int load(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "edge-trainer: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[256];
    int row = 0, lineno = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (lineno == 1 && strncmp(line, "label,", 6) == 0)
            continue;
        if (line[0] < '0' || line[0] > '9' || line[1] != ',') {
            fprintf(stderr, "edge-trainer: %s:%d: bad line\n", path, lineno);
            fclose(f);
            return -1;
        }
        dataset_t *d = row % 5 == 0 ? &test_set : &train_set;
        if (d->n >= MAX_SAMPLES)
            break;
        for (int j = 0; j < FEATURES; j++) {
            int v = pixel((unsigned char)line[2 + j]);
            if (v < 0) {
                fprintf(stderr, "edge-trainer: %s:%d: bad pixel\n", path,
                        lineno);
                fclose(f);
                return -1;
            }
            d->x[d->n][j] = (float)v / 16.0f;
        }
        d->y[d->n++] = line[0] - '0';
        row++;
    }
    fclose(f);
    if (train_set.n == 0 || test_set.n == 0) {
        fprintf(stderr, "edge-trainer: %s: no data\n", path);
        return -1;
    }
    return 0;
}

/* softmax probabilities of sample x under model w */
static void predict(const float *w, const float *x, float *p) {
    float max = -INFINITY;
    for (int c = 0; c < CLASSES; c++) {
        float z = w[CLASSES * FEATURES + c];
        for (int j = 0; j < FEATURES; j++)
            z += w[c * FEATURES + j] * x[j];
        p[c] = z;
        max = z > max ? z : max;
    }
    float sum = 0;
    for (int c = 0; c < CLASSES; c++) {
        p[c] = expf(p[c] - max);
        sum += p[c];
    }
    for (int c = 0; c < CLASSES; c++)
        p[c] /= sum;
}

/* One SGD step of the cross-entropy on a minibatch drawn from idx[0..n). */
static void sgd_step(float *w, const int *idx, int n, const opts_t *o,
                     uint64_t *rng) {
    static float g[PARAMS];
    memset(g, 0, sizeof(g));
    float p[CLASSES];
    for (int b = 0; b < o->batch; b++) {
        int i = idx[rng_next(rng) % (uint64_t)n];
        const float *x = train_set.x[i];
        predict(w, x, p);
        p[train_set.y[i]] -= 1.0f; /* d loss / d logits */
        for (int c = 0; c < CLASSES; c++) {
            for (int j = 0; j < FEATURES; j++)
                g[c * FEATURES + j] += p[c] * x[j];
            g[CLASSES * FEATURES + c] += p[c];
        }
    }
    float step = o->lr / (float)o->batch;
    for (int k = 0; k < PARAMS; k++)
        w[k] -= step * g[k];
}

static double accuracy(const float *w) {
    int right = 0;
    float p[CLASSES];
    for (int i = 0; i < test_set.n; i++) {
        predict(w, test_set.x[i], p);
        int best = 0;
        for (int c = 1; c < CLASSES; c++)
            if (p[c] > p[best])
                best = c;
        right += best == test_set.y[i];
    }
    return (double)right / test_set.n;
}

/* training samples of peer p's classes (all of them when p < 0) */
static int slice(int p, int peers, int *idx) {
    int n = 0;
    for (int i = 0; i < train_set.n; i++)
        if (p < 0 || train_set.y[i] % peers == p)
            idx[n++] = i;
    return n;
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *b = buf;
    while (len > 0) {
        ssize_t k = write(fd, b, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        len -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len) {
    char *b = buf;
    while (len > 0) {
        ssize_t k = read(fd, b, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        len -= (size_t)k;
    }
    return 0;
}

/* The rounds of one peer: local steps on `model` while the snapshot of the
 * round before averages in the background. */
static void train(moshpit_t *mp, const opts_t *o, const int *idx, int n,
                  uint64_t *rng, float *model, report_t *r) {
    static float snap[PARAMS], base[PARAMS];
    double t_train = now_ms();
    for (int round = 0; round < o->rounds && o->blocking; round++) {
        /* the usual local SGD: steps, then wait for the average */
        double t0 = now_ms();
        for (int k = 0; k < o->steps; k++)
            sgd_step(model, idx, n, o, rng);
        double tb = now_ms();
        r->compute_ms += tb - t0;
        moshpit_round_t info;
        moshpit_err_t e = moshpit_average(mp, model, PARAMS, n, &info);
        r->blocked_ms += now_ms() - tb;
        r->op_ms += now_ms() - tb;
        if (e != MOSHPIT_OK) {
            r->err = r->err ? r->err : (int32_t)e;
            continue;
        }
        r->grouped += info.group_size == (uint32_t)o->peers;
        if (info.group_size < (uint32_t)r->min_group)
            r->min_group = (int)info.group_size;
    }
    for (int round = 0; round < o->rounds && !o->blocking; round++) {
        memcpy(snap, model, sizeof(snap));
        memcpy(base, model, sizeof(base));
        double t0 = now_ms(), t_end = 0;
        moshpit_op_t *op = NULL;
        moshpit_round_t info;
        /* weighted by the samples each peer holds, as federated averaging
         * does */
        moshpit_err_t e = moshpit_average_start(mp, snap, PARAMS, n, &op);
        if (e != MOSHPIT_OK) {
            r->err = r->err ? r->err : (int32_t)e;
            break;
        }
        bool live = true;
        for (int k = 0; k < o->steps; k++) {
            sgd_step(model, idx, n, o, rng);
            if (live) {
                /* between steps: a look that never blocks */
                e = moshpit_op_wait(op, 0, &info);
                if (e != MOSHPIT_ETIMEDOUT) {
                    live = false;
                    t_end = now_ms();
                }
            }
        }
        r->compute_ms += now_ms() - t0;
        if (live) {
            double tb = now_ms();
            e = moshpit_op_wait(op, UINT32_MAX, &info);
            t_end = now_ms();
            r->blocked_ms += t_end - tb;
        }
        r->op_ms += t_end - t0;
        if (e != MOSHPIT_OK) {
            r->err = r->err ? r->err : (int32_t)e;
            continue; /* keep the local model */
        }
        /* the average of the snapshots, plus what this peer learned
         * while they were averaged */
        for (int k = 0; k < PARAMS; k++)
            model[k] = snap[k] + (model[k] - base[k]);
        r->grouped += info.group_size == (uint32_t)o->peers;
        if (info.group_size < (uint32_t)r->min_group)
            r->min_group = (int)info.group_size;
    }
    r->train_ms = now_ms() - t_train;
}

static int peer_main(int p, const opts_t *o, const char *bootstrap, int fd) {
    report_t r;
    memset(&r, 0, sizeof(r));
    r.min_group = o->peers;
    moshpit_config_t cfg;
    moshpit_config_init(&cfg);
    cfg.swarm = "edge-trainer";
    cfg.group_size = (uint32_t)o->peers;
    cfg.matchmaking_ms = (uint32_t)o->matchmaking_ms;
    cfg.round_timeout_ms = 30000;
    const char *boot[2] = {bootstrap, NULL};
    if (bootstrap != NULL)
        cfg.bootstrap = boot;
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&cfg, &mp);
    if (e == MOSHPIT_OK)
        e = moshpit_endpoint(mp, r.endpoint, sizeof(r.endpoint));
    r.err = (int32_t)e;
    /* peer 0 tells the parent what the others bootstrap from */
    if (p == 0 && write_all(fd, &r, sizeof(r)) != 0)
        e = MOSHPIT_ESYS;
    if (e == MOSHPIT_OK)
        e = moshpit_wait_members(mp, (size_t)o->peers, 30000);
    r.err = (int32_t)e;
    static int idx[MAX_SAMPLES];
    int n = slice(p, o->peers, idx);
    r.samples = n;
    static float model[PARAMS], alone[PARAMS];
    memset(model, 0, sizeof(model)); /* every peer starts from the same */
    uint64_t rng = o->seed * 1000003u + (uint64_t)p;
    if (e == MOSHPIT_OK) {
        train(mp, o, idx, n, &rng, model, &r);
        /* one last round so that every peer holds the same model */
        moshpit_round_t info;
        e = moshpit_average(mp, model, PARAMS, n, &info);
        if (e != MOSHPIT_OK && r.err == 0)
            r.err = (int32_t)e;
    }
    moshpit_close(mp);
    /* the same steps on this peer's slice alone */
    memset(alone, 0, sizeof(alone));
    rng = o->seed * 1000003u + (uint64_t)p;
    for (int k = 0; k < o->rounds * o->steps; k++)
        sgd_step(alone, idx, n, o, &rng);
    r.acc = accuracy(model);
    r.acc_alone = accuracy(alone);
    return write_all(fd, &r, sizeof(r)) == 0 ? 0 : 1;
}

static void usage(void) {
    fprintf(stderr, "usage: edge-trainer [--peers N] [--rounds R] [--steps K] "
                    "[--batch B] [--lr L] [--matchmaking-ms T] [--seed S] "
                    "[--data FILE] [--blocking 0|1] [--check MARGIN]\n");
}

static int parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.peers = 4,
                  .rounds = 30,
                  .steps = 40,
                  .batch = 16,
                  .lr = 0.5f,
                  .seed = 1,
                  .matchmaking_ms = 400,
                  .check = -1,
                  .data = DIGITS_CSV};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return -1;
        i++;
        if (strcmp(a, "--peers") == 0)
            o->peers = atoi(v);
        else if (strcmp(a, "--rounds") == 0)
            o->rounds = atoi(v);
        else if (strcmp(a, "--steps") == 0)
            o->steps = atoi(v);
        else if (strcmp(a, "--batch") == 0)
            o->batch = atoi(v);
        else if (strcmp(a, "--lr") == 0)
            o->lr = strtof(v, NULL);
        else if (strcmp(a, "--matchmaking-ms") == 0)
            o->matchmaking_ms = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--data") == 0)
            o->data = v;
        else if (strcmp(a, "--blocking") == 0)
            o->blocking = atoi(v);
        else if (strcmp(a, "--check") == 0)
            o->check = strtod(v, NULL);
        else
            return -1;
    }
    if (o->peers < 2 || o->peers > MAX_PEERS || o->rounds < 1 || o->steps < 1 ||
        o->batch < 1 || !(o->lr > 0) || o->matchmaking_ms < 10 ||
        o->matchmaking_ms > 20000)
        return -1;
    return 0;
}

int main(int argc, char **argv) {
    opts_t o;
    if (parse(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    if (load(o.data) != 0)
        return 2;
    printf("edge-trainer: %d peers, %d rounds of %d local steps (batch %d, "
           "lr %g), %d training and %d test images, moshpit %s\n",
           o.peers, o.rounds, o.steps, o.batch, (double)o.lr, train_set.n,
           test_set.n, moshpit_version());
    fflush(stdout);
    int fds[MAX_PEERS];
    pid_t pids[MAX_PEERS];
    report_t rep[MAX_PEERS];
    char first[200] = "";
    int started = 0;
    for (int p = 0; p < o.peers; p++) {
        int pp[2];
        if (pipe(pp) != 0)
            break;
        pid_t pid = fork();
        if (pid < 0) {
            close(pp[0]);
            close(pp[1]);
            break;
        }
        if (pid == 0) {
            close(pp[0]);
            for (int q = 0; q < started; q++)
                close(fds[q]);
            _exit(peer_main(p, &o, p == 0 ? NULL : first, pp[1]));
        }
        close(pp[1]);
        fds[p] = pp[0];
        pids[p] = pid;
        started++;
        if (p == 0) {
            report_t r0;
            if (read_all(fds[0], &r0, sizeof(r0)) != 0 || r0.err != 0) {
                fprintf(stderr, "edge-trainer: peer 0 did not start\n");
                break;
            }
            snprintf(first, sizeof(first), "%s", r0.endpoint);
        }
    }
    int failed = started < o.peers;
    for (int p = 0; p < started; p++) {
        if (read_all(fds[p], &rep[p], sizeof(rep[p])) != 0) {
            fprintf(stderr, "edge-trainer: peer %d gave no report\n", p);
            memset(&rep[p], 0, sizeof(rep[p]));
            rep[p].err = MOSHPIT_ESYS;
        }
        close(fds[p]);
        waitpid(pids[p], NULL, 0);
    }
    if (started < o.peers)
        return 1;

    /* one process trained on all the data, the same steps */
    static int all_idx[MAX_SAMPLES];
    static float central[PARAMS];
    int n_all = slice(-1, o.peers, all_idx);
    uint64_t rng = o.seed;
    for (int k = 0; k < o.rounds * o.steps; k++)
        sgd_step(central, all_idx, n_all, &o, &rng);
    double acc_central = accuracy(central);

    double op = 0, blocked = 0, compute = 0, acc_min = 1, best_alone = 0;
    double train = 0;
    for (int p = 0; p < o.peers; p++) {
        const report_t *r = &rep[p];
        printf("peer %d: classes", p);
        for (int c = p; c < CLASSES; c += o.peers)
            printf(" %d", c);
        printf(" (%d images): alone %.1f%%, moshpit %.1f%%; rounds with "
               "every peer %d of %d; op %.0f ms, blocked %.0f ms, local "
               "steps %.0f ms%s%s\n",
               r->samples, 100 * r->acc_alone, 100 * r->acc, r->grouped,
               o.rounds, r->op_ms, r->blocked_ms, r->compute_ms,
               r->err ? "; error: " : "",
               r->err ? moshpit_strerror((moshpit_err_t)r->err) : "");
        failed |= r->err != 0;
        op += r->op_ms;
        blocked += r->blocked_ms;
        compute += r->compute_ms;
        train += r->train_ms;
        acc_min = r->acc < acc_min ? r->acc : acc_min;
        best_alone = r->acc_alone > best_alone ? r->acc_alone : best_alone;
    }
    printf("one process on all the data: %.1f%%\n", 100 * acc_central);
    printf("moshpit: worst peer %.1f%%, best peer alone %.1f%%: %+.1f "
           "points\n",
           100 * acc_min, 100 * best_alone, 100 * (acc_min - best_alone));
    printf("communication hidden behind computation: %.1f%% (rounds took "
           "%.0f ms, of which %.0f ms blocked in %s; %.0f ms of local "
           "steps; sums over peers); training took %.0f ms (mean over "
           "peers)\n",
           op > 0 ? 100 * (1 - blocked / op) : 0.0, op, blocked,
           o.blocking ? "moshpit_average" : "moshpit_op_wait", compute,
           train / o.peers);
    if (o.check >= 0 && (failed || acc_min < best_alone + o.check)) {
        fprintf(stderr,
                "edge-trainer: check failed (worst peer %.3f, best alone "
                "%.3f, margin %.3f%s)\n",
                acc_min, best_alone, o.check, failed ? ", a peer failed" : "");
        return 1;
    }
    return failed ? 1 : 0;
}
