/*
 * engine_placeholder.c - a stand-in for engine.c while the real engine is not
 * in the tree, so that `pdbsym serve` links and its HTTP layer can be tested.
 *
 * It compiles to nothing as soon as server/engine.c exists (the integrator
 * deletes this file then).  Every module is "missing"; for tests, the
 * environment variable PDBSYM_PLACEHOLDER_DELAY_MS makes each resolve take
 * that long, answering MOD_PENDING when the caller's deadline comes first.
 */
#if defined(__has_include)
#if __has_include("engine.c")
#define ENGINE_PLACEHOLDER_OFF 1
#endif
#endif

#ifndef ENGINE_PLACEHOLDER_OFF

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

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
  (void)m;
  memset(out, 0, sizeof *out);
  out->format = m->format;
  if (e->delay_ms) {
    uint64_t now = engine_now_ms();
    uint64_t done = now + e->delay_ms;
    if (deadline_ms && deadline_ms < done) {
      if (deadline_ms > now)
        sleep_ms(deadline_ms - now);
      out->status = MOD_PENDING;
      snprintf(out->error, sizeof out->error, "still being fetched");
      return;
    }
    sleep_ms(e->delay_ms);
  }
  out->status = MOD_MISSING;
  snprintf(out->error, sizeof out->error, "not found (placeholder engine: no symbol sources)");
}

void engine_release(engine *e, mod_handle *h) {
  (void)e;
  h->st = NULL;
  h->pin = NULL;
}

const char *mod_status_name(mod_status s) {
  static const char *const names[] = {"found", "missing", "malformed", "fetch_error", "pending"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

bool engine_ready(engine *e, char *why, size_t cap) {
  (void)e;
  if (cap)
    why[0] = '\0';
  return true;
}

void engine_get_stats(engine *e, engine_stats *out) {
  (void)e;
  memset(out, 0, sizeof *out);
}

void engine_peek(engine *e, const module_id *m, mod_handle *out) {
  (void)e;
  memset(out, 0, sizeof *out);
  out->format = m->format;
  out->status = MOD_MISSING;
  snprintf(out->error, sizeof out->error, "not in the cache");
}

#else
typedef int engine_placeholder_unused; /* ISO C forbids an empty translation unit */
#endif
