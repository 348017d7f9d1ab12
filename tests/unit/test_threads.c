/* SPDX-License-Identifier: MIT */
/*
 * test_threads.c - the public API called from several threads at once, as
 * a program with a training thread, a monitoring thread and a shutdown path
 * would (include/moshpit.h, "Threads"). Two peers in this process average
 * while two threads share one of them for moshpit_average and another
 * thread asks it for members, endpoint and errno all the while; then a
 * peer is closed from its own thread while other threads are blocked in
 * moshpit_average and moshpit_wait_members on it: they must return
 * ECLOSED at once and the close must wait for them before it frees the
 * peer. Meant for the ThreadSanitizer build (MOSHPIT_TSAN), which checks
 * every access these threads make; the other builds check the results.
 * Checks run on the main thread only (test_util.h counts without locks).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "moshpit.h"
#include "net/engine.h"
#include "platform.h"
#include "test_pair.h"
#include "test_util.h"

#define N_VALUES 4096
#define CALLS_PER_THREAD 3

static void base_config(moshpit_config_t *cfg, const char *swarm) {
    moshpit_config_init(cfg);
    cfg->swarm = swarm;
    cfg->listen = "tcp://127.0.0.1:0";
    cfg->group_size = 2;
    cfg->min_group_size = 2;
}

/* ---------------------------------------------------------------------- */
/* many callers on one peer                                               */
/* ---------------------------------------------------------------------- */

/* calls moshpit_average `calls` times with every value `value`, weight 1,
 * and records what came back (checked on the main thread) */
typedef struct avg_job {
    moshpit_t *mp;
    float value;
    int calls;
    float v[N_VALUES];
    moshpit_err_t err[2 * CALLS_PER_THREAD];
    uint32_t group[2 * CALLS_PER_THREAD];
    int uniform[2 * CALLS_PER_THREAD]; /* every element equal to v[0] */
    float got[2 * CALLS_PER_THREAD];
} avg_job_t;

static void avg_thread(void *arg) {
    avg_job_t *j = arg;
    for (int k = 0; k < j->calls; k++) {
        for (int i = 0; i < N_VALUES; i++)
            j->v[i] = j->value;
        moshpit_round_t info;
        j->err[k] = moshpit_average(j->mp, j->v, N_VALUES, 1.0, &info);
        j->group[k] = info.group_size;
        j->got[k] = j->v[0];
        j->uniform[k] = 1;
        for (int i = 1; i < N_VALUES; i++)
            if (memcmp(&j->v[i], &j->v[0], sizeof(float)) != 0)
                j->uniform[k] = 0;
    }
}

/* asks the peer for members, endpoint and errno until told to stop */
typedef struct query_job {
    moshpit_t *mp;
    const char *endpoint; /* what moshpit_endpoint said before */
    atomic_int stop;
    long calls, bad_members, bad_endpoint, bad_errno, bad_wait;
} query_job_t;

static void query_thread(void *arg) {
    query_job_t *q = arg;
    while (!atomic_load(&q->stop)) {
        size_t n = moshpit_members(q->mp);
        if (n < 1 || n > 2)
            q->bad_members++;
        char ep[200];
        if (moshpit_endpoint(q->mp, ep, sizeof(ep)) != MOSHPIT_OK ||
            strcmp(ep, q->endpoint) != 0)
            q->bad_endpoint++;
        if (moshpit_errno(q->mp) != 0)
            q->bad_errno++;
        if (moshpit_wait_members(q->mp, 1, 100) != MOSHPIT_OK)
            q->bad_wait++;
        q->calls++;
    }
}

static void test_many_callers(void) {
    moshpit_config_t c;
    moshpit_t *a, *b;
    char ep[200];
    base_config(&c, "test-threads-callers");
    c.matchmaking_ms = 2000;
    c.round_timeout_ms = 15000;
    if (TEST_OPEN_PAIR(&c, &a, &b, ep, sizeof(ep), 40000) != 0)
        return;

    /* two threads average on a (their calls take turns), one on b as
     * often as both together; every value of a is 1, of b 3: a round of
     * two gives exactly 2, a round alone leaves the values alone */
    static avg_job_t ja1, ja2, jb;
    ja1 = (avg_job_t){.mp = a, .value = 1.0f, .calls = CALLS_PER_THREAD};
    ja2 = (avg_job_t){.mp = a, .value = 1.0f, .calls = CALLS_PER_THREAD};
    jb = (avg_job_t){.mp = b, .value = 3.0f, .calls = 2 * CALLS_PER_THREAD};
    static query_job_t q;
    memset(&q, 0, sizeof(q));
    q.mp = a;
    q.endpoint = ep;
    atomic_init(&q.stop, 0);

    mp_plat_thread_t t[4];
    int rc[4];
    rc[0] = mp_plat_thread_start(&t[0], query_thread, &q);
    rc[1] = mp_plat_thread_start(&t[1], avg_thread, &ja1);
    rc[2] = mp_plat_thread_start(&t[2], avg_thread, &ja2);
    rc[3] = mp_plat_thread_start(&t[3], avg_thread, &jb);
    for (int i = 1; i < 4; i++)
        if (rc[i] == 0)
            mp_plat_thread_join(&t[i]);
    atomic_store(&q.stop, 1);
    if (rc[0] == 0)
        mp_plat_thread_join(&t[0]);
    CHECK(rc[0] == 0 && rc[1] == 0 && rc[2] == 0 && rc[3] == 0,
          "thread start %d %d %d %d", rc[0], rc[1], rc[2], rc[3]);

    int pairs = 0;
    avg_job_t *jobs[3] = {&ja1, &ja2, &jb};
    for (int p = 0; p < 3; p++) {
        avg_job_t *j = jobs[p];
        for (int k = 0; k < j->calls; k++) {
            CHECK(j->err[k] == MOSHPIT_OK, "caller %d call %d: %s", p, k,
                  moshpit_strerror(j->err[k]));
            CHECK(j->uniform[k], "caller %d call %d: values differ", p, k);
            if (j->err[k] != MOSHPIT_OK)
                continue;
            if (j->group[k] == 2) {
                CHECK(j->got[k] == 2.0f, "caller %d call %d: %.9g, want 2", p,
                      k, (double)j->got[k]);
                pairs++;
            } else {
                CHECK(j->group[k] == 1 && j->got[k] == j->value,
                      "caller %d call %d: group %u, %.9g", p, k, j->group[k],
                      (double)j->got[k]);
            }
        }
    }
    /* b called as often as a's two threads together, always with a
     * partner calling: most rounds pair up, and a pair counts on both */
    CHECK(pairs >= 2, "only %d calls averaged in a pair", pairs);
    CHECK(q.calls > 0, "the query thread never ran");
    CHECK(q.bad_members == 0 && q.bad_endpoint == 0 && q.bad_errno == 0 &&
              q.bad_wait == 0,
          "queries during the rounds: %ld bad members, %ld endpoint, %ld "
          "errno, %ld wait_members of %ld",
          q.bad_members, q.bad_endpoint, q.bad_errno, q.bad_wait, q.calls);
    printf("many callers: %d calls averaged in pairs, %ld queries meanwhile\n",
           pairs, q.calls);
    moshpit_close(b);
    moshpit_close(a);
}

/* ---------------------------------------------------------------------- */
/* close while other threads are inside calls                             */
/* ---------------------------------------------------------------------- */

typedef struct blocked_job {
    moshpit_t *mp;
    int kind; /* 0: moshpit_average, 1: moshpit_wait_members */
    float v[N_VALUES];
    moshpit_err_t err;
} blocked_job_t;

static void blocked_thread(void *arg) {
    blocked_job_t *j = arg;
    if (j->kind == 0) {
        for (int i = 0; i < N_VALUES; i++)
            j->v[i] = 5.0f;
        j->err = moshpit_average(j->mp, j->v, N_VALUES, 1.0, NULL);
    } else {
        j->err = moshpit_wait_members(j->mp, 5, 60000);
    }
}

typedef struct close_job {
    moshpit_t *mp;
    uint64_t start_ms, end_ms;
} close_job_t;

static void close_thread(void *arg) {
    close_job_t *j = arg;
    j->start_ms = test_now_ms();
    moshpit_close(j->mp);
    j->end_ms = test_now_ms();
}

/* API calls on mp that have not returned yet (the count moshpit_close
 * waits for), read under the peer's lock */
static uint32_t calls_inside(moshpit_t *mp) {
    mp_plat_mutex_lock(&mp->lock);
    uint32_t n = mp->inside;
    mp_plat_mutex_unlock(&mp->lock);
    return n;
}

static void test_close_under_calls(void) {
    moshpit_config_t c;
    moshpit_t *mp = NULL;
    /* alone in its swarm: a round waits the whole matchmaking window for
     * a partner that never comes, so without the close every blocked call
     * would take 40 s or more */
    base_config(&c, "test-threads-close");
    c.matchmaking_ms = 40000;
    c.round_timeout_ms = 50000;
    moshpit_err_t e = moshpit_open(&c, &mp);
    CHECK(e == MOSHPIT_OK, "open: %s", moshpit_strerror(e));
    if (mp == NULL)
        return;
    /* two rounds (the second waits for the first) and a wait for members
     * that will not come */
    static blocked_job_t jobs[3];
    memset(jobs, 0, sizeof(jobs));
    mp_plat_thread_t t[3];
    int rc[3];
    for (int i = 0; i < 3; i++) {
        jobs[i].mp = mp;
        jobs[i].kind = i == 2;
        rc[i] = mp_plat_thread_start(&t[i], blocked_thread, &jobs[i]);
    }
    CHECK(rc[0] == 0 && rc[1] == 0 && rc[2] == 0, "thread start %d %d %d",
          rc[0], rc[1], rc[2]);
    /* the close starts once all three are inside their calls */
    uint64_t until = test_now_ms() + 20000;
    while (calls_inside(mp) < 3 && test_now_ms() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK(calls_inside(mp) == 3, "%u calls inside", calls_inside(mp));

    close_job_t cj = {.mp = mp};
    mp_plat_thread_t tc;
    int rcc = mp_plat_thread_start(&tc, close_thread, &cj);
    CHECK(rcc == 0, "close thread start %d", rcc);
    if (rcc == 0)
        mp_plat_thread_join(&tc);
    for (int i = 0; i < 3; i++)
        if (rc[i] == 0)
            mp_plat_thread_join(&t[i]);

    /* the engine notices a cancel within a second, and nothing is owed:
     * far below the 40 s the calls would otherwise block */
    uint64_t took = cj.end_ms - cj.start_ms;
    CHECK(took < 10000, "close took %llu ms", (unsigned long long)took);
    for (int i = 0; i < 3; i++) {
        CHECK(jobs[i].err == MOSHPIT_ECLOSED, "call %d (%s): %s", i,
              jobs[i].kind == 0 ? "average" : "wait_members",
              moshpit_strerror(jobs[i].err));
    }
    printf("close under 3 blocked calls: %llu ms\n", (unsigned long long)took);
}

int main(void) {
    test_many_callers();
    test_close_under_calls();
    return test_summary("test_threads");
}
