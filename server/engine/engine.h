/*
 * engine.h - resolving modules: the in-memory hot set, then the SQLite cache,
 * then the symbol servers (download, parse, ingest), with one download job per
 * module however many requests wait for it.  Knows nothing of HTTP.
 *
 * Jobs wait in a bounded table (download_queue); a fixed pool of
 * download_workers threads reads folder sources, unpacks, parses, verifies
 * and stores; the fetcher's one network thread drives every HTTP transfer.
 * A job waiting on the network holds no worker.  See docs/concurrency.md.
 *
 * Thread safety: all functions may be called from several threads at once.
 */
#ifndef PDBSYM_ENGINE_H
#define PDBSYM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "module.h"
#include "symtab.h"

typedef struct engine engine;

typedef struct {
  const char *cache_dir;         /* PDBSYM_CACHE_DIR */
  const char *symbol_path;       /* PDBSYM_SYMBOL_PATH; NULL: Microsoft's public server */
  uint64_t cache_max_bytes;      /* PDBSYM_CACHE_MAX_BYTES; 0: default */
  uint64_t mem_max_bytes;        /* hot-set budget; 0: default */
  uint64_t max_pdb_bytes;        /* largest PDB accepted; 0: default (capped by the cache's cap) */
  int download_max_share;        /* percent of the cache's cap one download may take; 0: 100 */
  int max_parallel_downloads;    /* transfers at once per HTTP source; 0: 4 */
  int download_workers;          /* threads that read, unpack, parse and store downloads; 0: 4 */
  int download_queue;            /* modules being looked up at once; 0: 1000 */
  /* a request's share (engine_share): jobs it may have queued or running at
   * once, and jobs it may start in all; 0: no share (the request may take
   * what download_queue leaves) */
  int request_downloads;
  int request_downloads_max;
  bool offline;                  /* never touch the network (cache and local sources only) */
  dl_limits dl;                  /* deadlines, retries, redirects of each transfer (config.h) */
  /* seconds a negative answer is remembered (0: default) */
  int64_t negative_missing_ttl;  /* no source has it: 3600 */
  int64_t negative_malformed_ttl;/* a complete, clean download that is not a readable PDB: 86400 */
  int64_t negative_suspect_ttl;  /* an unreadable download that may not be the file
                                    (text/html, no PDB signature, length unknown): 300 */
  int64_t negative_error_ttl;    /* fetch errors, timeouts, identity mismatches: 30, doubled
                                    for each further failure of the module ... */
  int64_t negative_error_max_ttl;/* ... up to this: 3600 */
  uint32_t negative_memory;      /* negative entries also kept in memory; 0: 16384 */
  /* the persistence queue: tables answered and waiting to be written to
   * SQLite by the one writer thread (docs/concurrency.md) */
  int persist_queue;             /* tables; 0: 16 */
  uint64_t persist_queue_bytes;  /* their bytes in memory; 0: 256 MiB */
  uint32_t persist_wait_ms;      /* a worker's wait for room in it (0: none, the table is
                                    kept in memory only at once) */
  /* called once per settled download job (not per waiting request), from the
   * job's thread, with the outcome and the job's duration; may be NULL */
  void (*on_download)(int outcome /* mod_status */, double seconds);
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
  bool names_pending;    /* MOD_FOUND from a managed table cached without its image's
                            names, whose image is being fetched: resolving again
                            with a later deadline may give the named table */
  char source[256];      /* URL or path the module came from */
  char error[256];       /* human-readable reason for other statuses */
} mod_handle;

ps_err engine_open(const engine_config *cfg, engine **out, ps_diag *diag);
void engine_close(engine *e);
/* engine_close with every grace cut to what is left of budget_ms (0: none:
 * running downloads are abandoned at once, the writer is not waited for). */
void engine_close_within(engine *e, uint64_t budget_ms);
/* Shutdown: requests waiting for a download stop waiting (they get
 * MOD_PENDING) and new downloads are refused; downloads running go on. */
void engine_drain(engine *e);

/* Resolves m.  Waits at most until deadline_ms (a CLOCK_MONOTONIC time in
 * milliseconds; 0 means no limit); if the module is still being fetched then,
 * the answer is MOD_PENDING and the work goes on in the background.  When
 * download_queue jobs are already running, a new module waits for room until
 * the deadline, then gets MOD_PENDING (no job is started for it). */
void engine_resolve(engine *e, const module_id *m, uint64_t deadline_ms, mod_handle *out);

/* A request's share of the download queue (docs/concurrency.md, "Shares"):
 * the jobs it starts (a module no job is looking up yet; joining a running
 * job costs nothing) are at most request_downloads at once and
 * request_downloads_max in all; a module past the first waits for one of the
 * request's jobs to settle, until its deadline, then is MOD_PENDING without
 * a job; past the second, MOD_PENDING at once.  A request that has a job
 * already leaves download_queue / 8 (fixed) of the queue to requests that
 * have none.  Its jobs' transfers share one lane of each source's queue
 * (fetch_op_set_lane), served round-robin with the other requests' lanes.
 * NULL (out of memory): resolving with it is resolving with no share.
 * engine_share_end when the request is over (its jobs go on). */
typedef struct engine_share engine_share;
engine_share *engine_share_new(engine *e);
void engine_share_end(engine *e, engine_share *sh);

/* engine_resolve within share sh (NULL: none). */
void engine_resolve_in(engine *e, engine_share *sh, const module_id *m, uint64_t deadline_ms,
                       mod_handle *out);

/* Resolves n modules of one request at once, within share sh: every module
 * looked up in the cache, then the jobs of the others joined or started as
 * the share allows, and all of them waited for together until deadline_ms
 * (0: none); what is not settled then is MOD_PENDING.  Each out as
 * engine_resolve sets it (engine_release each).  A cached managed table
 * whose image's names are being fetched is answered at once with
 * names_pending set (engine_resolve_in with the deadline waits for them). */
typedef struct {
  const module_id *m; /* in */
  mod_handle *out;    /* out */
} engine_want;
void engine_resolve_many(engine *e, engine_share *sh, engine_want *w, size_t n,
                         uint64_t deadline_ms);
/* engine_resolve for a module that is answered from memory at once (the
 * table in the cache's memory, nothing to fetch, read or wait for): true
 * with out as engine_resolve would set it; false (nothing to release) when
 * anything more is needed, which engine_resolve then does.  Never blocks
 * but on the cache's mutex. */
bool engine_resolve_hot(engine *e, const module_id *m, mod_handle *out);
void engine_release(engine *e, mod_handle *h);

/* Bytes the cache folder holds on disk: the database, its WAL and -shm
 * files, and the downloads in flight; 0 for e NULL. */
uint64_t engine_cache_bytes(engine *e);

/* What the engine and its cache hold and have done, for /metrics. */
typedef struct {
  uint64_t module_reads;        /* reads of a module from SQLite (a miss in memory) */
  uint64_t negative_memory;     /* negative entries in memory */
  uint64_t negative_memory_hits;/* lookups they answered */
  uint64_t hot_modules, hot_bytes;
  uint64_t persist_queued;      /* tables answered, not yet written (the one being written included) */
  uint64_t persist_queued_bytes;
  uint64_t persist_saved;       /* tables written */
  uint64_t persist_failed;      /* tables the cache did not take (cap, disk full...) */
  uint64_t persist_dropped;     /* tables never queued: the queue stayed full */
  uint64_t download_bytes;      /* temporary files of downloads in flight */
} engine_stats;
void engine_get_stats(engine *e, engine_stats *out);

/* true once the cache is open and its migrations applied */
bool engine_ready(engine *e);
/* false when the cache folder could not be written the last time it was
 * tried (the cache writer tries every ENGINE_PROBE_MS, fixed: 5 s, and after
 * a failed store): why gets the error.  Never blocks (no I/O). */
bool engine_writable(engine *e, char *why, size_t cap);

/* true when the cache already holds m (in format fmt, or either when
 * ST_FORMAT_UNKNOWN); with image_names, only a table that has the method
 * names of the module's image counts. */
bool engine_cached(engine *e, const module_id *m, st_format fmt, bool image_names);

/* What the engine knows of m without fetching anything: true with
 * MOD_FOUND (pinned: engine_release it), a remembered negative entry
 * (MOD_MISSING, MOD_MALFORMED, MOD_FETCH_ERROR with its error) or
 * MOD_PENDING while a download of m runs; false when it knows nothing. */
bool engine_peek(engine *e, const module_id *m, mod_handle *out);

/* Stores a finished table the caller parsed itself (local files, embedded
 * PDBs) under m's key for format fmt; image_names: st holds the method names
 * of the module's PE image (it then replaces a table cached without them).
 * The caller keeps st. */
ps_err engine_ingest(engine *e, const module_id *m, st_format fmt, const symtab *st,
                     const char *source, bool image_names, ps_diag *diag);

const char *mod_status_name(mod_status s); /* "found", "missing", ... */
uint64_t engine_now_ms(void);

#endif
