/*
 * workers.h - a fixed pool of threads fed by a bounded queue.  The HTTP
 * server runs the requests that may block (waiting on the engine, parsing a
 * big body) here, so that its event loop never blocks.
 *
 * Ownership: wp_submit's arg is the caller's; the pool only passes it to fn.
 * Thread safety: wp_submit and wp_get_stats may be called from any thread.
 */
#ifndef PDBSYM_WORKERS_H
#define PDBSYM_WORKERS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct wpool wpool;
typedef void (*wp_fn)(void *arg);

typedef struct {
  unsigned threads;  /* the pool's size, fixed */
  unsigned queued;   /* jobs waiting for a thread */
  unsigned running;  /* jobs being run */
  unsigned capacity; /* most jobs waiting at once */
} wp_stats;

/* Starts `threads` threads (>= 1) with room for `queue_max` (>= 1) waiting
 * jobs; `name` (15 bytes at most) names the threads.  NULL on failure. */
wpool *wp_start(unsigned threads, unsigned queue_max, const char *name);

/* Queues fn(arg); false when the queue is full or the pool is stopping. */
bool wp_submit(wpool *p, wp_fn fn, void *arg);

/* Waits until no job is queued or running, at most timeout_ms; true if so. */
bool wp_idle(wpool *p, unsigned timeout_ms);

/* Runs what is queued, then stops and joins the threads and frees p. */
void wp_stop(wpool *p);

void wp_get_stats(wpool *p, wp_stats *out);

#endif
