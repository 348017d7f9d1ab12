/* SPDX-License-Identifier: MIT */
/*
 * platform_posix.c - the OS contract of platform.h on POSIX systems:
 * pthread mutexes, condition variables waiting on CLOCK_MONOTONIC, threads,
 * the monotonic clock, the wall clock (seconds) and sleeping.
 */
#include "platform.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int mp_plat_mutex_init(mp_plat_mutex_t *m) {
    return pthread_mutex_init(&m->m, NULL);
}

void mp_plat_mutex_destroy(mp_plat_mutex_t *m) {
    pthread_mutex_destroy(&m->m);
}

void mp_plat_mutex_lock(mp_plat_mutex_t *m) {
    pthread_mutex_lock(&m->m);
}

void mp_plat_mutex_unlock(mp_plat_mutex_t *m) {
    pthread_mutex_unlock(&m->m);
}

int mp_plat_cond_init(mp_plat_cond_t *c) {
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&c->c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

void mp_plat_cond_destroy(mp_plat_cond_t *c) {
    pthread_cond_destroy(&c->c);
}

void mp_plat_cond_broadcast(mp_plat_cond_t *c) {
    pthread_cond_broadcast(&c->c);
}

int mp_plat_cond_wait_until(mp_plat_cond_t *c, mp_plat_mutex_t *m,
                            uint64_t deadline_ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_ms / 1000u);
    ts.tv_nsec = (long)(deadline_ms % 1000u) * 1000000L;
    return pthread_cond_timedwait(&c->c, &m->m, &ts);
}

typedef struct thread_start {
    void (*fn)(void *);
    void *arg;
} thread_start_t;

static void *thread_main(void *p) {
    thread_start_t s = *(thread_start_t *)p;
    free(p);
    s.fn(s.arg);
    return NULL;
}

int mp_plat_thread_start(mp_plat_thread_t *t, void (*fn)(void *), void *arg) {
    thread_start_t *s = malloc(sizeof(*s));
    if (s == NULL)
        return ENOMEM;
    s->fn = fn;
    s->arg = arg;
    int rc = pthread_create(&t->t, NULL, thread_main, s);
    if (rc != 0)
        free(s);
    return rc;
}

void mp_plat_thread_join(mp_plat_thread_t *t) {
    pthread_join(t->t, NULL);
}

uint64_t mp_plat_clock_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mp_plat_clock_ms(void) {
    return mp_plat_clock_us() / 1000u;
}

uint64_t mp_plat_wallclock_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
        return 0;
    return (uint64_t)ts.tv_sec;
}

void mp_plat_sleep_ms(uint32_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000u,
                          .tv_nsec = (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
