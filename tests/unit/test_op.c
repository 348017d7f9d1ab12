/* SPDX-License-Identifier: MIT */
/*
 * test_op.c - averaging in the background (moshpit_average_start,
 * moshpit_op_wait) on real peers in this process: the argument checks
 * (the same as moshpit_average's, nothing sent, the buffer untouched), one
 * op per peer (EBUSY until the op is waited for, even after its round
 * ended, and while a moshpit_average runs on another thread), polling with
 * timeout 0, a wait after the round ended, two peers
 * averaging exactly through ops while the caller computes, and
 * moshpit_close with an op live: nobody waiting (ASan checks that nothing
 * leaks), and another thread blocked in moshpit_op_wait (it returns
 * ECLOSED with the values untouched before the close frees the peer; the
 * ThreadSanitizer build checks every access). A second thread waiting for
 * the same op is refused. Checks run on the main thread only.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "moshpit.h"
#include "net/engine.h"
#include "platform.h"
#include "test_util.h"

#define N 4096

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void base_config(moshpit_config_t *cfg, const char *swarm,
                        uint32_t matchmaking_ms) {
    moshpit_config_init(cfg);
    cfg->swarm = swarm;
    cfg->listen = "tcp://127.0.0.1:0";
    cfg->group_size = 2;
    cfg->min_group_size = 2;
    cfg->matchmaking_ms = matchmaking_ms;
    cfg->round_timeout_ms = matchmaking_ms + 10000;
}

static moshpit_t *open_alone(const char *swarm, uint32_t matchmaking_ms) {
    moshpit_config_t c;
    base_config(&c, swarm, matchmaking_ms);
    moshpit_t *mp = NULL;
    moshpit_err_t e = moshpit_open(&c, &mp);
    CHECK(e == MOSHPIT_OK, "open: %s", moshpit_strerror(e));
    return mp;
}

static void fill(float *v, float x) {
    for (int i = 0; i < N; i++)
        v[i] = x + (float)i;
}

static int same(const float *v, float x) {
    for (int i = 0; i < N; i++)
        if (v[i] != x + (float)i)
            return 0;
    return 1;
}

/* reads the peer's count of calls inside and whether op has a waiter */
static uint32_t inside(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    uint32_t n = mp->inside;
    mp_plat_mutex_unlock(&mp->lock);
    return n;
}

static int has_waiter(moshpit_t *mp, moshpit_op_t *op) {
    mp_plat_mutex_lock(&mp->lock);
    int w = op->waiting;
    mp_plat_mutex_unlock(&mp->lock);
    return w;
}

/* waits (polling the shared count, 5 ms apart) until n calls are inside */
static void until_inside(moshpit_t *mp, uint32_t n) {
    uint64_t until = now_ms() + 20000;
    while (inside(mp) < n && now_ms() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* ---------------------------------------------------------------------- */

static void test_arguments(void) {
    moshpit_t *mp = open_alone("test-op-args", 200);
    if (mp == NULL)
        return;
    static float v[N];
    fill(v, 1.0f);
    moshpit_op_t *op = (moshpit_op_t *)&op; /* must be set to NULL */
    CHECK(moshpit_average_start(NULL, v, N, 1.0, &op) == MOSHPIT_EINVAL &&
              op == NULL,
          "mp NULL");
    CHECK(moshpit_average_start(mp, v, N, 1.0, NULL) == MOSHPIT_EINVAL,
          "op NULL");
    CHECK(moshpit_average_start(mp, NULL, N, 1.0, &op) == MOSHPIT_EINVAL,
          "values NULL");
    const double bad_w[] = {-1.0, NAN, INFINITY, MOSHPIT_WEIGHT_MAX * 2};
    for (size_t i = 0; i < sizeof(bad_w) / sizeof(bad_w[0]); i++) {
        op = (moshpit_op_t *)&op;
        CHECK(moshpit_average_start(mp, v, N, bad_w[i], &op) ==
                      MOSHPIT_EINVAL &&
                  op == NULL,
              "weight %g", bad_w[i]);
    }
    v[N / 2] = NAN;
    CHECK(moshpit_average_start(mp, v, N, 1.0, &op) == MOSHPIT_EINVAL,
          "a NaN value");
    v[N / 2] = INFINITY;
    CHECK(moshpit_average_start(mp, v, N, 1.0, &op) == MOSHPIT_EINVAL,
          "an infinite value");
    v[N / 2] = 1.0f + (float)(N / 2);
    CHECK(same(v, 1.0f), "refused starts touched the values");
    CHECK(moshpit_op_wait(NULL, 0, NULL) == MOSHPIT_EINVAL, "wait NULL");

    /* a refused start sent nothing: the peer is free for an op now */
    moshpit_err_t e = moshpit_average_start(mp, v, N, 1.0, &op);
    CHECK(e == MOSHPIT_OK && op != NULL, "start: %s", moshpit_strerror(e));
    if (e == MOSHPIT_OK) {
        moshpit_round_t info;
        CHECK(moshpit_op_wait_sized(op, 0, &info, 65537) == MOSHPIT_EINVAL,
              "info_size over 65536");
        /* the op survived the refused wait */
        memset(&info, 0xab, sizeof(info));
        e = moshpit_op_wait(op, 20000, &info);
        CHECK(e == MOSHPIT_OK, "wait: %s", moshpit_strerror(e));
        CHECK(info.group_size == 1 && info.round_id == 0,
              "alone: group %u id %llu", info.group_size,
              (unsigned long long)info.round_id);
        CHECK(same(v, 1.0f), "a round alone changed the values");
    }
    moshpit_close(mp);
}

/* One op per peer, polling, a wait after the round ended. */
static void test_busy_and_poll(void) {
    /* alone with a 1 s window: the round ends when the window does */
    moshpit_t *mp = open_alone("test-op-busy", 1000);
    if (mp == NULL)
        return;
    static float v[N], w[N];
    fill(v, 1.0f);
    fill(w, 7.0f);
    moshpit_op_t *op = NULL, *op2 = (moshpit_op_t *)&op2;
    uint64_t t0 = now_ms();
    moshpit_err_t e = moshpit_average_start(mp, v, N, 1.0, &op);
    CHECK(e == MOSHPIT_OK, "start: %s", moshpit_strerror(e));
    if (e != MOSHPIT_OK) {
        moshpit_close(mp);
        return;
    }
    /* the start returned before its round (which waits for the window)
     * could end: a poll finds it live, and says so again */
    moshpit_round_t info;
    memset(&info, 0xab, sizeof(info));
    e = moshpit_op_wait(op, 0, &info);
    CHECK(e == MOSHPIT_ETIMEDOUT, "first poll: %s", moshpit_strerror(e));
    CHECK(info.group_size == 0xabababab, "a poll wrote info");
    CHECK(moshpit_op_wait(op, 0, NULL) == MOSHPIT_ETIMEDOUT, "second poll");
    CHECK(moshpit_average_start(mp, w, N, 1.0, &op2) == MOSHPIT_EBUSY &&
              op2 == NULL,
          "a second start while the op runs");
    /* a blocking call waits for the op's round to end, then runs */
    moshpit_round_t binfo;
    e = moshpit_average(mp, w, N, 1.0, &binfo);
    uint64_t t1 = now_ms();
    CHECK(e == MOSHPIT_OK && binfo.group_size == 1,
          "moshpit_average after the op: %s", moshpit_strerror(e));
    CHECK(t1 - t0 >= 2 * 1000 - 50,
          "the blocking call did not wait for the op's round: %llu ms",
          (unsigned long long)(t1 - t0));
    /* the op's round has ended, but it is not waited for yet: still one */
    CHECK(moshpit_average_start(mp, w, N, 1.0, &op2) == MOSHPIT_EBUSY,
          "a second start before the first op was waited for");
    /* waiting for an op that is over: at once, even with timeout 0 */
    e = moshpit_op_wait(op, 0, &info);
    CHECK(e == MOSHPIT_OK, "wait after the end: %s", moshpit_strerror(e));
    CHECK(info.group_size == 1 && info.fraction_averaged == 0.0,
          "alone: group %u", info.group_size);
    CHECK(same(v, 1.0f), "values changed alone");
    /* the op is gone: the peer takes the next one */
    e = moshpit_average_start(mp, w, N, 1.0, &op2);
    CHECK(e == MOSHPIT_OK, "start after the wait: %s", moshpit_strerror(e));
    if (e == MOSHPIT_OK) {
        e = moshpit_op_wait(op2, 20000, NULL);
        CHECK(e == MOSHPIT_OK, "second op: %s", moshpit_strerror(e));
    }
    printf("busy and poll: blocking call after the op took %llu ms\n",
           (unsigned long long)(t1 - t0));
    moshpit_close(mp);
}

typedef struct avg_job {
    moshpit_t *mp;
    float v[N];
    moshpit_err_t err;
} avg_job_t;

static void avg_thread(void *arg) {
    avg_job_t *j = arg;
    fill(j->v, 9.0f);
    j->err = moshpit_average(j->mp, j->v, N, 1.0, NULL);
}

/* the command holding the peer's turn, if any (under the peer's lock) */
static int turn_held(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    int held = mp->cmd_active != NULL;
    mp_plat_mutex_unlock(&mp->lock);
    return held;
}

/* A start never waits: while a moshpit_average runs on another thread it
 * says EBUSY at once. */
static void test_busy_behind_blocking(void) {
    moshpit_t *mp = open_alone("test-op-behind", 1000);
    if (mp == NULL)
        return;
    static avg_job_t j;
    memset(&j, 0, sizeof(j));
    j.mp = mp;
    mp_plat_thread_t t;
    int rc = mp_plat_thread_start(&t, avg_thread, &j);
    CHECK(rc == 0, "thread start %d", rc);
    until_inside(mp, 1);
    uint64_t until = now_ms() + 20000;
    while (!turn_held(mp) && now_ms() < until) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    static float v[N];
    fill(v, 1.0f);
    moshpit_op_t *op = (moshpit_op_t *)&op;
    uint64_t t0 = now_ms();
    moshpit_err_t e = moshpit_average_start(mp, v, N, 1.0, &op);
    uint64_t took = now_ms() - t0;
    /* the blocking round alone lasts its 1 s window: still running */
    int running = turn_held(mp);
    CHECK(e == MOSHPIT_EBUSY && op == NULL,
          "start while moshpit_average runs: %s (round still running: %d)",
          moshpit_strerror(e), running);
    if (e == MOSHPIT_OK && op != NULL)
        CHECK(moshpit_op_wait(op, 20000, NULL) == MOSHPIT_OK, "wait");
    if (rc == 0)
        mp_plat_thread_join(&t);
    CHECK(j.err == MOSHPIT_OK, "the blocking call: %s",
          moshpit_strerror(j.err));
    CHECK(same(v, 1.0f), "a refused start touched the values");
    printf("start behind a blocking call: EBUSY after %llu ms\n",
           (unsigned long long)took);
    moshpit_close(mp);
}

/* Two peers average through ops while the caller keeps computing. */
static void test_pair_exact(void) {
    moshpit_config_t c;
    moshpit_t *a = NULL, *b = NULL;
    char ep[200];
    const char *bs[2] = {ep, NULL};
    base_config(&c, "test-op-pair", 5000);
    moshpit_err_t e = moshpit_open(&c, &a);
    CHECK(e == MOSHPIT_OK, "open a: %s", moshpit_strerror(e));
    if (a == NULL)
        return;
    CHECK(moshpit_endpoint(a, ep, sizeof(ep)) == MOSHPIT_OK, "endpoint");
    c.bootstrap = bs;
    e = moshpit_open(&c, &b);
    CHECK(e == MOSHPIT_OK, "open b: %s", moshpit_strerror(e));
    if (b == NULL) {
        moshpit_close(a);
        return;
    }
    CHECK(moshpit_wait_members(a, 2, 20000) == MOSHPIT_OK, "a sees b");
    CHECK(moshpit_wait_members(b, 2, 20000) == MOSHPIT_OK, "b sees a");
    static float va[N], vb[N], work[N];
    int rounds_exact = 0;
    for (int r = 0; r < 3; r++) {
        fill(va, 1.0f);
        fill(vb, 5.0f); /* weights 1 and 3: the mean is x + 4 */
        moshpit_op_t *oa = NULL, *ob = NULL;
        CHECK(moshpit_average_start(a, va, N, 1.0, &oa) == MOSHPIT_OK,
              "start a");
        /* work on other memory while a's round runs, polling it; b starts
         * after the first step, so a's round (a group of two) cannot have
         * ended before it (once both are in, the key closes at once) */
        long steps = 0;
        moshpit_round_t ia, ib;
        for (int i = 0; i < N; i++)
            work[i] = (float)i;
        while ((e = moshpit_op_wait(oa, 0, &ia)) == MOSHPIT_ETIMEDOUT) {
            for (int i = 0; i < N; i++)
                work[i] = work[i] * 0.999f + 0.5f;
            if (steps++ == 0)
                CHECK(moshpit_average_start(b, vb, N, 3.0, &ob) == MOSHPIT_OK,
                      "start b");
        }
        CHECK(e == MOSHPIT_OK, "a: %s", moshpit_strerror(e));
        if (ob == NULL) {
            CHECK(false, "a's round ended before b started");
            break;
        }
        e = moshpit_op_wait(ob, 20000, &ib);
        CHECK(e == MOSHPIT_OK, "b: %s", moshpit_strerror(e));
        CHECK(ia.group_size == 2 && ib.group_size == 2, "groups %u %u",
              ia.group_size, ib.group_size);
        CHECK(ia.round_id == ib.round_id && ia.round_id != 0, "round ids");
        CHECK(ia.group_weight == 4.0 && ia.fraction_averaged == 1.0,
              "weight %g fraction %g", ia.group_weight, ia.fraction_averaged);
        int ok = same(va, 4.0f) && same(vb, 4.0f);
        CHECK(ok, "round %d: a[0] %.9g b[0] %.9g, want 4", r, (double)va[0],
              (double)vb[0]);
        CHECK(steps > 0, "no work step while the op ran");
        rounds_exact += ok;
        printf("pair round %d: exact %d, %ld work steps while it ran\n", r, ok,
               steps);
    }
    CHECK(rounds_exact == 3, "%d of 3 rounds exact", rounds_exact);
    moshpit_close(b);
    moshpit_close(a);
}

/* the op of test_close_unwaited: cleared once the close has freed it, so
 * that ASan's leak check finds nothing pointing to it if it leaked */
static moshpit_op_t *volatile unwaited;

/* moshpit_close with an op nobody waits for: the close ends it at once and
 * frees it (ASan's leak check would see it otherwise). */
static void test_close_unwaited(void) {
    moshpit_t *mp = open_alone("test-op-close", 40000);
    if (mp == NULL)
        return;
    static float v[N];
    fill(v, 2.0f);
    moshpit_op_t *op = NULL;
    moshpit_err_t e = moshpit_average_start(mp, v, N, 1.0, &op);
    CHECK(e == MOSHPIT_OK, "start: %s", moshpit_strerror(e));
    unwaited = op;
    op = NULL;
    uint64_t t0 = now_ms();
    moshpit_close(mp);
    unwaited = NULL; /* the close freed it */
    uint64_t took = now_ms() - t0;
    /* the round alone would wait its 40 s window */
    CHECK(took < 10000, "close took %llu ms", (unsigned long long)took);
    CHECK(same(v, 2.0f), "values changed");
    printf("close with an op nobody waits for: %llu ms\n",
           (unsigned long long)took);
}

typedef struct wait_job {
    moshpit_op_t *op;
    moshpit_round_t info;
    moshpit_err_t err;
} wait_job_t;

static void wait_thread(void *arg) {
    wait_job_t *j = arg;
    j->err = moshpit_op_wait(j->op, 60000, &j->info);
}

typedef struct close_job {
    moshpit_t *mp;
} close_job_t;

static void close_thread(void *arg) {
    close_job_t *j = arg;
    moshpit_close(j->mp);
}

/* moshpit_close on one thread while another is blocked in moshpit_op_wait:
 * the wait returns ECLOSED, values untouched (nothing was averaged: the
 * peer is alone), and only then the peer is freed. A second waiter for
 * the same op is refused meanwhile. */
static void test_close_while_waiting(void) {
    moshpit_t *mp = open_alone("test-op-close-wait", 40000);
    if (mp == NULL)
        return;
    static float v[N];
    fill(v, 3.0f);
    static wait_job_t j;
    memset(&j, 0, sizeof(j));
    moshpit_err_t e = moshpit_average_start(mp, v, N, 1.0, &j.op);
    CHECK(e == MOSHPIT_OK, "start: %s", moshpit_strerror(e));
    if (e != MOSHPIT_OK) {
        moshpit_close(mp);
        return;
    }
    mp_plat_thread_t tw, tc;
    int rw = mp_plat_thread_start(&tw, wait_thread, &j);
    CHECK(rw == 0, "thread start %d", rw);
    /* the waiter is inside its call, registered as the op's waiter */
    until_inside(mp, 1);
    uint64_t until = now_ms() + 20000;
    while (!has_waiter(mp, j.op) && now_ms() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK(has_waiter(mp, j.op), "the waiter never waited");
    moshpit_round_t info;
    e = moshpit_op_wait(j.op, 0, &info);
    CHECK(e == MOSHPIT_EINVAL, "a second waiter: %s", moshpit_strerror(e));

    close_job_t cj = {.mp = mp};
    uint64_t t0 = now_ms();
    int rc = mp_plat_thread_start(&tc, close_thread, &cj);
    CHECK(rc == 0, "close thread start %d", rc);
    if (rc == 0)
        mp_plat_thread_join(&tc);
    uint64_t took = now_ms() - t0;
    if (rw == 0)
        mp_plat_thread_join(&tw);
    CHECK(j.err == MOSHPIT_ECLOSED, "the waiter got %s",
          moshpit_strerror(j.err));
    CHECK(j.info.group_size == 1 && j.info.round_id == 0,
          "info after close: group %u", j.info.group_size);
    CHECK(same(v, 3.0f), "values changed by a closed round alone");
    CHECK(took < 10000, "close took %llu ms", (unsigned long long)took);
    printf("close while another thread waits: %llu ms, waiter got %s\n",
           (unsigned long long)took, moshpit_strerror(j.err));
}

int main(void) {
    test_arguments();
    test_busy_and_poll();
    test_busy_behind_blocking();
    test_pair_exact();
    test_close_unwaited();
    test_close_while_waiting();
    return test_summary("test_op");
}
