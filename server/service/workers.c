/*
 * workers.c - a fixed thread pool with a bounded ring of jobs (workers.h).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "workers.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  wp_fn fn;
  void *arg;
} job;

/* A thread of the pool.  An idle one waits on its own condition variable,
 * on the pool's stack of idle threads: a job wakes the thread that went
 * idle last, whose stack, heap arena and cache lines are the warmest, so a
 * steady trickle of requests keeps to a few threads instead of rotating
 * through all of them. */
typedef struct {
  struct wpool *p;
  pthread_cond_t cv;
  bool waiting; /* on the idle stack */
} worker;

struct wpool {
  pthread_mutex_t mu;
  pthread_cond_t idle;    /* wp_idle waits here */
  job *ring;
  unsigned cap, head, count, running;
  bool stopping;
  unsigned nthreads;
  pthread_t *threads;
  worker *workers;        /* one per thread */
  worker **idlers;        /* the idle stack, the last to go idle on top */
  unsigned nidle;
  unsigned nworkers;      /* workers[] set up (their condition variables) */
};

static void idle_remove(wpool *p, worker *w) {
  for (unsigned i = 0; i < p->nidle; i++) {
    if (p->idlers[i] == w) {
      for (unsigned k = i + 1; k < p->nidle; k++)
        p->idlers[k - 1] = p->idlers[k];
      p->nidle--;
      break;
    }
  }
  w->waiting = false;
}

static void *worker_main(void *arg) {
  worker *self = arg;
  wpool *p = self->p;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->count && !p->stopping) {
      self->waiting = true;
      p->idlers[p->nidle++] = self;
      pthread_cond_wait(&self->cv, &p->mu);
      if (self->waiting) /* woken by nobody: off the stack before looking again */
        idle_remove(p, self);
    }
    if (!p->count)
      break; /* stopping, and nothing left to run */
    job j = p->ring[p->head];
    p->head = (p->head + 1) % p->cap;
    p->count--;
    p->running++;
    pthread_mutex_unlock(&p->mu);
    j.fn(j.arg);
    pthread_mutex_lock(&p->mu);
    p->running--;
    if (!p->count && !p->running)
      pthread_cond_broadcast(&p->idle);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

wpool *wp_start(unsigned threads, unsigned queue_max, const char *name) {
  if (!threads || !queue_max)
    return NULL;
  wpool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->ring = calloc(queue_max, sizeof *p->ring);
  p->threads = calloc(threads, sizeof *p->threads);
  p->workers = calloc(threads, sizeof *p->workers);
  p->idlers = calloc(threads, sizeof *p->idlers);
  if (!p->ring || !p->threads || !p->workers || !p->idlers) {
    free(p->ring);
    free(p->threads);
    free(p->workers);
    free(p->idlers);
    free(p);
    return NULL;
  }
  p->cap = queue_max;
  pthread_mutex_init(&p->mu, NULL);
  for (unsigned i = 0; i < threads; i++) {
    p->workers[i].p = p;
    pthread_cond_init(&p->workers[i].cv, NULL);
  }
  p->nworkers = threads;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->idle, &ca);
  pthread_condattr_destroy(&ca);
  for (unsigned i = 0; i < threads; i++) {
    if (pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]) != 0)
      break;
    p->nthreads++;
    if (name) {
      char n[16];
      snprintf(n, sizeof n, "%.10s-%u", name, i % 1000u);
      pthread_setname_np(p->threads[i], n);
    }
  }
  if (p->nthreads < threads) {
    wp_stop(p);
    return NULL;
  }
  return p;
}

bool wp_submit(wpool *p, wp_fn fn, void *arg) {
  pthread_mutex_lock(&p->mu);
  bool ok = !p->stopping && p->count < p->cap;
  if (ok) {
    p->ring[(p->head + p->count) % p->cap] = (job){fn, arg};
    p->count++;
    if (p->nidle) {
      worker *w = p->idlers[--p->nidle];
      w->waiting = false;
      pthread_cond_signal(&w->cv);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return ok;
}

bool wp_idle(wpool *p, unsigned timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms % 1000) * 1000000u;
  ts.tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&p->mu);
  int rc = 0;
  while ((p->count || p->running) && rc == 0)
    rc = pthread_cond_timedwait(&p->idle, &p->mu, &ts);
  bool idle = !p->count && !p->running;
  pthread_mutex_unlock(&p->mu);
  return idle;
}

void wp_stop(wpool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  for (unsigned i = 0; i < p->nthreads; i++)
    pthread_cond_signal(&p->workers[i].cv);
  pthread_mutex_unlock(&p->mu);
  for (unsigned i = 0; i < p->nthreads; i++)
    pthread_join(p->threads[i], NULL);
  for (unsigned i = 0; i < p->nworkers; i++)
    pthread_cond_destroy(&p->workers[i].cv);
  pthread_cond_destroy(&p->idle);
  pthread_mutex_destroy(&p->mu);
  free(p->threads);
  free(p->workers);
  free(p->idlers);
  free(p->ring);
  free(p);
}

void wp_get_stats(wpool *p, wp_stats *out) {
  pthread_mutex_lock(&p->mu);
  out->threads = p->nthreads;
  out->queued = p->count;
  out->running = p->running;
  out->capacity = p->cap;
  pthread_mutex_unlock(&p->mu);
}
