/*
 * engine_placeholder.c - the stand-in engine engine_placeholder.h describes.
 * Compiles to nothing once the real engine links.
 */
#include "engine_placeholder.h"

#ifndef PDBSYM_REAL_ENGINE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct engine {
  uint64_t delay_ms;
};

uint64_t engine_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

ps_err engine_open(const engine_config *cfg, engine **out, ps_diag *diag) {
  (void)cfg;
  (void)diag;
  engine *e = calloc(1, sizeof *e);
  if (!e)
    return PS_E_NOMEM;
  const char *d = getenv("PDBSYM_PLACEHOLDER_DELAY_MS");
  e->delay_ms = d ? strtoull(d, NULL, 10) : 0;
  *out = e;
  return PS_E_OK;
}

void engine_close(engine *e) { free(e); }

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void engine_resolve(engine *e, const module_id *m, uint64_t deadline_ms, mod_handle *out) {
  memset(out, 0, sizeof *out);
  out->format = m->format;
  if (e->delay_ms) {
    uint64_t now = engine_now_ms();
    uint64_t done = now + e->delay_ms;
    if (deadline_ms && deadline_ms < done) {
      if (deadline_ms > now)
        sleep_ms(deadline_ms - now);
      out->status = MOD_PENDING;
      snprintf(out->error, sizeof out->error, "still fetching %.200s; retry shortly",
               m->debug_file);
      return;
    }
    sleep_ms(e->delay_ms);
  }
  out->status = MOD_MISSING;
  snprintf(out->error, sizeof out->error, "no symbol source has %.200s (placeholder engine)",
           m->debug_file);
}

void engine_release(engine *e, mod_handle *h) {
  (void)e;
  h->st = NULL;
  h->pin = NULL;
}

bool engine_ready(engine *e) { return e != NULL; }

bool engine_cached(engine *e, const module_id *m, st_format fmt) {
  (void)e;
  (void)m;
  (void)fmt;
  return false;
}

const char *mod_status_name(mod_status s) {
  static const char *const names[] = {"found", "missing", "malformed", "fetch_error", "pending"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

#else
typedef int engine_placeholder_unused; /* ISO C forbids an empty translation unit */
#endif
