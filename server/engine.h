/*
 * engine.h - resolving modules: the in-memory hot set, then the SQLite cache,
 * then the symbol servers (download, parse, ingest), with one download per
 * module however many requests wait for it.  Knows nothing of HTTP.
 *
 * Thread safety: all functions may be called from several threads at once.
 */
#ifndef PDBSYM_ENGINE_H
#define PDBSYM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "module.h"
#include "symtab.h"

typedef struct engine engine;

typedef struct {
  const char *cache_dir;         /* PDBSYM_CACHE_DIR */
  const char *symbol_path;       /* PDBSYM_SYMBOL_PATH; NULL: Microsoft's public server */
  uint64_t cache_max_bytes;      /* PDBSYM_CACHE_MAX_BYTES; 0: default */
  uint64_t mem_max_bytes;        /* hot-set budget; 0: default */
  uint64_t max_pdb_bytes;        /* largest PDB accepted; 0: default */
  int max_parallel_downloads;    /* 0: default */
  bool offline;                  /* never touch the network (cache and local sources only) */
} engine_config;

typedef enum {
  MOD_FOUND = 0,
  MOD_MISSING,
  MOD_MALFORMED,
  MOD_FETCH_ERROR,
  MOD_PENDING,
} mod_status;

typedef struct {
  mod_status status;
  st_format format;
  const symtab *st;      /* MOD_FOUND: valid until engine_release */
  void *pin;             /* internal */
  bool from_cache;       /* answered without a download */
  char source[256];      /* URL or path the module came from */
  char error[256];       /* human-readable reason for other statuses */
} mod_handle;

ps_err engine_open(const engine_config *cfg, engine **out, ps_diag *diag);
void engine_close(engine *e);

/* Resolves m.  Waits at most until deadline_ms (a CLOCK_MONOTONIC time in
 * milliseconds; 0 means no limit); if the module is still being fetched then,
 * the answer is MOD_PENDING and the work goes on in the background. */
void engine_resolve(engine *e, const module_id *m, uint64_t deadline_ms, mod_handle *out);
void engine_release(engine *e, mod_handle *h);

const char *mod_status_name(mod_status s); /* "found", "missing", ... */
uint64_t engine_now_ms(void);

/* ---- for the HTTP service (GET /ready, GET /metrics, GET /modules) ---- */

/* True when the database is open and its migrations are applied; otherwise
 * false with a reason in why. */
bool engine_ready(engine *e, char *why, size_t cap);

/* Upper bounds (seconds) of the download-duration histogram buckets; the last
 * bucket (+Inf) is implied. */
#define ENGINE_DL_BUCKETS 8
#define ENGINE_DL_BOUNDS {0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0}

typedef struct {
  uint64_t cache_hits;         /* modules answered from memory or the database */
  uint64_t cache_misses;       /* modules that needed a fetch */
  uint64_t cache_bytes;        /* bytes the database holds now */
  uint64_t downloads_found;    /* fetches that found and ingested a module */
  uint64_t downloads_missing;  /* fetches that found nothing upstream */
  uint64_t downloads_malformed;/* fetched but could not be read */
  uint64_t downloads_error;    /* network or server faults */
  uint64_t download_buckets[ENGINE_DL_BUCKETS + 1]; /* per bucket, not cumulative */
  double download_seconds;     /* sum of all download durations */
} engine_stats;

/* A snapshot of the counters (monotonic since engine_open, except cache_bytes). */
void engine_get_stats(engine *e, engine_stats *out);

/* Like engine_resolve, but answers only from what is known now and never
 * starts a fetch: MOD_FOUND (cached; release with engine_release), MOD_MISSING
 * / MOD_MALFORMED / MOD_FETCH_ERROR with from_cache true (a negative entry),
 * MOD_PENDING (a fetch is in flight), or MOD_MISSING with from_cache false
 * (nothing known). */
void engine_peek(engine *e, const module_id *m, mod_handle *out);

#endif
