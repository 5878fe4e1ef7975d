/*
 * deadline.h - the absolute CLOCK_REALTIME time ms milliseconds from now,
 * as pthread_cond_timedwait takes it (every wait in pdbsym has a deadline).
 */
#ifndef PDBSYM_DEADLINE_H
#define PDBSYM_DEADLINE_H

#include <stdint.h>
#include <time.h>

static inline struct timespec deadline_after_ms(uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

#endif
