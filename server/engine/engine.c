/*
 * engine.c - module resolution: cache first, then one download job per module.
 *
 *   engine_resolve(m)
 *     -> store_get(key) for each format to try     HIT: answer from memory/SQLite
 *     -> otherwise join (or admit) the module's job and wait until the deadline
 *        (at most download_queue jobs at once: beyond, wait for room, then pending)
 *   a job, stepped by one of download_workers threads (created at open)
 *     START  fetch_op for the PDB (both keys when the format is unknown)
 *     PDB    fetch_op_step: folder sources, then the downloads the network
 *            thread finished; the verify callback (fetch_verify_identity)
 *            parses each fully and checks GUID and age, so a wrong file is
 *            refused and the next source tried; FETCH_PENDING parks the job
 *            (no worker held) until the fetcher's wake puts it back in the
 *            run queue
 *     IMAGE  the same for the PE when the module names one (code_file and
 *            code_id) and its PDB is managed: the image's method names
 *            (Namespace.Type.Method) go into the table; an image no source
 *            has is remembered by a negative entry under its own key
 *            (module_image_key), so the next request does not look again
 *     EMBEDDED no source has the PDB and the module names its image: the
 *            image's embedded Portable PDB answers the module (names from
 *            the same image)
 *     NAMES  a names job: the module is cached already, without its image's
 *            names (asked before by a request without code_file/code_id, or
 *            before the image was on a server), and a request names the
 *            image: IMAGE on a copy of the cached table
 *     INGEST store_adopt: the table goes into the hot set and the waiters are
 *            answered from it; then it joins the persistence queue
 *     done   or a negative entry, whose TTL depends on the failure
 *   Waiters that time out get MOD_PENDING; the job goes on and the retry is
 *   answered from the cache.
 *   the writer thread (one) takes the persistence queue in order and writes
 *   each table to SQLite (store_save); a table waiting there is pinned in the
 *   hot set, so it answers lookups meanwhile.  The queue holds at most
 *   persist_queue tables and persist_queue_bytes of them (one table larger
 *   than that alone); a worker with a table for a full queue waits for room,
 *   at most persist_wait, then drops it (answered, in memory only); at
 *   shutdown the queue takes the workers' tables without waiting (so at
 *   most download_workers more), for the writer to drain.
 *
 * Locking: e->mu guards the job table, the run queue and job states.  The
 * fetcher's wake callback is called with the fetcher's lock held and takes
 * e->mu, so e->mu is never held while calling into the fetcher.  e->pq_mu
 * guards the persistence queue; it is never held while taking e->mu.
 */
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "fetch.h"
#include "filemap.h"
#include "loader.h"
#include "log.h"
#include "pe.h"
#include "store.h"

#define ENGINE_DEFAULT_MAX_PDB ((uint64_t)4 << 30)
#define ENGINE_DEFAULT_CACHE_MAX ((uint64_t)2 << 30) /* the store's default cap */
#define ENGINE_CLOSE_GRACE_MS 10000u
#define ENGINE_WORKER_STOP_MS 5000u
#define ENGINE_STOP_FLOOR_MS 500u /* a thread's time to stop, whatever stop_timeout leaves */
#define ENGINE_FAILS_MAX 4096 /* modules whose consecutive failures are remembered */
#define ENGINE_PERSIST_GRACE_MS 10000u /* at shutdown, the writer's time to empty it */
#define ENGINE_ROOM_TRIES 3 /* evictions for one job's download that did not fit */
#define ENGINE_ROOM_WAIT_MS 5000u /* a try's wait for other downloads to give room back */
#define ENGINE_DEFAULT_PERSIST_QUEUE 16
#define ENGINE_DEFAULT_PERSIST_BYTES ((uint64_t)256 << 20)
#define ENGINE_RESOLVE_LOOKS 8 /* cache looks of one resolve while jobs keep finishing */
#define ENGINE_NEWCOMER_SHARE 8 /* 1/8 of download_queue is left to requests with no job yet */
#define ENGINE_PROBE_MS 5000u /* the cache writer tries a write in the cache folder this often */

enum { J_START, J_PDB, J_IMAGE, J_EMBEDDED, J_NAMES, J_INGEST };

/* The image step of a managed module: the image must be the one the module
 * names (fetch_verify_identity), then its method names go into st (the
 * table the PDB gave, or a copy of base made once the image is accepted);
 * or, with embedded, its embedded Portable PDB is read into a new st. */
typedef struct {
  fetch_identity id;
  symtab *st;          /* the table the names go into (malloc'd when made here) */
  const symtab *base;  /* names job: the cached table, copied into st */
  bool embedded;       /* read the image's embedded Portable PDB into st */
  bool named;          /* out: the image's names are in st */
  bool broken;         /* out: the image is the module's, its metadata or PDB unreadable */
  char error[256];     /* out, when not named: why */
} image_ctx;

/* A request's share of the download queue (engine.h); under e->mu. */
struct engine_share {
  uint64_t id;      /* its lane in the sources' queues */
  int live;         /* its jobs not settled */
  int started;      /* jobs it started */
  int refs;         /* the request (until engine_share_end) and its live jobs */
};

typedef struct job {
  struct job *next;   /* e->jobs: every job not yet freed */
  struct job *hnext;  /* hash chain */
  struct job *rnext;  /* run queue */
  bool queued;        /* in the run queue */
  char key[320];
  module_id m;
  int stage;
  fetch_op *op;
  fetch_identity pdb;  /* the PDB step's verification; pdb.st: the accepted table */
  image_ctx img;
  uint64_t started;
  bool done;
  mod_status status;
  st_format format;
  char source[256];
  char error[256];
  int room_tries;   /* times the cache evicted for this job's download */
  unsigned flags;   /* STORE_F_* of the table to ingest */
  bool names_job;   /* NAMES: the image's names for a table cached without them */
  bool embedded_only; /* the PDB is known to be missing: only its image's embedded one */
  store_entry base; /* names job: the cached table (pinned) */
  bool has_base;
  store_entry ent;  /* the table the waiters are answered from, pinned */
  bool has_ent;
  int refs;         /* waiters + the job itself until done */
  engine_share *owner; /* the share that started it, until it settles (NULL: none) */
  uint64_t lane;    /* its transfers' lane (the owner's id; 0: the common one) */
  struct engine *e;
} job;

typedef struct {
  int kind;         /* 1: store entry, 2: job-owned table */
  store_entry ent;
  job *j;
} pin;

/* A table answered and waiting to be written to SQLite. */
typedef struct pitem {
  struct pitem *next;
  store_entry ent; /* pinned */
  uint64_t bytes;  /* st_memory_size */
  uint64_t queued; /* ms */
  char key[320];
} pitem;

/* Consecutive failures of a module, for the negative TTL's backoff. */
typedef struct {
  char key[320];
  unsigned fails;
  uint64_t at; /* ms, monotonic */
} fail_rec;

struct engine {
  engine_config cfg;
  char *cache_dir, *symbol_path, *tmp_dir, *db_path;
  store *store;
  fetcher *fetch;
  uint64_t cache_max;
  pthread_mutex_t mu;
  pthread_cond_t cv;       /* job done, room in the queue */
  pthread_cond_t work_cv;  /* run queue not empty, or stopping */
  job *jobs;
  job **hash;
  size_t nhash;
  job *runq, *runq_tail;
  int njobs;               /* admitted and not done */
  /* jobs settled (written with mu held, after the job's table or negative
   * entry is in the cache): a resolve that missed the cache and finds no
   * job compares it with what it read before its look (engine_resolve) */
  _Atomic uint64_t settled;
  int queue_cap;
  int share_live, share_max; /* request_downloads, request_downloads_max (0: none) */
  uint64_t share_ids;      /* under mu */
  pthread_t *workers;
  int nworkers, workers_alive, busy;
  bool draining;           /* no new jobs; waiters stop waiting */
  bool stopping;           /* workers exit */
  fail_rec *fails;
  size_t nfails;
  /* the persistence queue and its writer */
  pthread_mutex_t pq_mu;
  pthread_cond_t pq_cv;    /* a table queued, room made, stopping, the writer gone */
  pitem *pq_head, *pq_tail;
  size_t pq_n;             /* queued and being written */
  uint64_t pq_bytes;
  size_t pq_max;
  uint64_t pq_max_bytes;
  pthread_t writer;
  bool writer_started, writer_alive, pq_stop;
  bool pq_closing;         /* engine_close began: workers queue without waiting */
  uint64_t pq_deadline;    /* after pq_stop: tables not written by then are left */
  uint64_t pq_saved, pq_failed, pq_dropped;
  /* the cache folder's last write probe (writer thread; read by /ready) */
  _Atomic bool unwritable;
  pthread_mutex_t probe_mu;
  char probe_error[200];
  uint64_t probe_next;     /* writer thread only */
  /* the downloads' disk budget (refresh_disk_budget) */
  pthread_mutex_t budget_mu;
  uint64_t writing;        /* under budget_mu: the module the writer is storing */
};

uint64_t engine_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *mod_status_name(mod_status s) {
  switch (s) {
  case MOD_FOUND: return "found";
  case MOD_MISSING: return "missing";
  case MOD_MALFORMED: return "malformed";
  case MOD_FETCH_ERROR: return "fetch_error";
  case MOD_PENDING: return "pending";
  }
  return "unknown";
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static size_t hash_key(const char *k) {
  uint64_t h = 1469598103934665603ull;
  for (; *k; k++)
    h = (h ^ (unsigned char)*k) * 1099511628211ull;
  return (size_t)h;
}

/* ---- the download area ----------------------------------------------------- */

static uint64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Downloads may hold what the cache's cap leaves beside the database, its
 * journals and shared-memory file, and beside the module being written
 * (e->writing: its bytes, set by the writer for the whole of its store); the
 * cache in turn counts the downloads in flight that proved themselves when it
 * makes room for a module (store_config.outside_bytes).  So the folder as a
 * whole stays under the cap but for the one module in flight.  Refreshed as
 * each job starts and around each write.  Every refresh counts the module
 * being written, and one refresh at a time reads the folder and sets the
 * budget (budget_mu): before, a job's start during a store gave the
 * downloads that module's room (the writer's own refresh alone counted it),
 * and a refresh that read the folder before a store and set the budget after
 * the writer's brought back the larger budget of one module fewer; either
 * way downloads took the room of a module stored meanwhile, and with the
 * next module being written the folder held two modules over the cap (a
 * loaded CI machine: 14 tables, 7 downloads and a table being written).
 * Returns the budget. */
static uint64_t refresh_disk_budget(engine *e) {
  if (!e->fetch)
    return 0;
  char shm[1100];
  snprintf(shm, sizeof shm, "%s-shm", e->db_path);
  pthread_mutex_lock(&e->budget_mu);
  uint64_t used = store_files_bytes(e->cache_dir) + file_size(shm) + e->writing;
  uint64_t left = used < e->cache_max ? e->cache_max - used : 0;
  fetch_set_disk_budget(e->fetch, left ? left : 1); /* 0 would mean "no budget" */
  pthread_mutex_unlock(&e->budget_mu);
  return left;
}

/* The writer stores a module of `bytes` (0: it is done, its table counted
 * in the folder or gone); the budget follows. */
static void disk_budget_writing(engine *e, uint64_t bytes) {
  pthread_mutex_lock(&e->budget_mu);
  e->writing = bytes;
  pthread_mutex_unlock(&e->budget_mu);
  refresh_disk_budget(e);
}

/* What the cache counts beside its database: the downloads in flight that
 * have proved to be what they claim (fetch_tmp_proved_bytes).  Bytes of a
 * download that has not are never a reason to evict: when the budget
 * shrinks under them the download is stopped instead (fetch.c). */
static uint64_t downloads_bytes(void *ctx) {
  engine *e = ctx;
  return e->fetch ? fetch_tmp_proved_bytes(e->fetch) : 0;
}

/* ---- open/close ------------------------------------------------------------ */

static void *worker_main(void *arg);
static void *writer_main(void *arg);

ps_err engine_open(const engine_config *cfg, engine **out, ps_diag *diag) {
  *out = NULL;
  engine *e = calloc(1, sizeof *e);
  if (!e)
    return ps_diag_set(diag, PS_E_NOMEM, "engine", (size_t)-1, NULL);
  e->cfg = *cfg;
  e->cache_dir = dup_or_null(cfg->cache_dir ? cfg->cache_dir : ".pdbsym-cache");
  e->symbol_path = dup_or_null(cfg->symbol_path);
  e->cfg.cache_dir = e->cache_dir;
  e->cfg.symbol_path = e->symbol_path;
  e->queue_cap = cfg->download_queue > 0 ? cfg->download_queue : 1000;
  e->share_live = cfg->request_downloads > 0 ? cfg->request_downloads : 0;
  e->share_max = cfg->request_downloads_max > 0 ? cfg->request_downloads_max : 0;
  e->nworkers = cfg->download_workers > 0 ? cfg->download_workers : 4;
  e->cache_max = cfg->cache_max_bytes ? cfg->cache_max_bytes : ENGINE_DEFAULT_CACHE_MAX;
  if (!e->cfg.max_pdb_bytes)
    e->cfg.max_pdb_bytes = ENGINE_DEFAULT_MAX_PDB;
  /* no single download (or unpacked member) larger than its share of the
   * cache: an endless or inflating body stops there */
  uint64_t share = cfg->download_max_share > 0 && cfg->download_max_share <= 100
                       ? (uint64_t)cfg->download_max_share
                       : 100;
  uint64_t most = e->cache_max / 100 * share + e->cache_max % 100 * share / 100;
  if (e->cfg.max_pdb_bytes > most)
    e->cfg.max_pdb_bytes = most;
  if (e->cfg.negative_error_ttl <= 0)
    e->cfg.negative_error_ttl = 30;
  if (e->cfg.negative_error_max_ttl <= 0)
    e->cfg.negative_error_max_ttl = 3600;
  if (e->cfg.negative_error_max_ttl < e->cfg.negative_error_ttl)
    e->cfg.negative_error_max_ttl = e->cfg.negative_error_ttl;
  if (e->cfg.negative_suspect_ttl <= 0)
    e->cfg.negative_suspect_ttl = 300;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  pthread_cond_init(&e->work_cv, NULL);
  pthread_mutex_init(&e->pq_mu, NULL);
  pthread_cond_init(&e->pq_cv, NULL);
  pthread_mutex_init(&e->probe_mu, NULL);
  pthread_mutex_init(&e->budget_mu, NULL);
  e->pq_max = cfg->persist_queue > 0 ? (size_t)cfg->persist_queue : ENGINE_DEFAULT_PERSIST_QUEUE;
  e->pq_max_bytes = cfg->persist_queue_bytes ? cfg->persist_queue_bytes
                                             : ENGINE_DEFAULT_PERSIST_BYTES;
  e->nhash = 64;
  while (e->nhash < (size_t)e->queue_cap * 2)
    e->nhash *= 2;
  e->hash = calloc(e->nhash, sizeof *e->hash);
  e->fails = calloc(ENGINE_FAILS_MAX, sizeof *e->fails);
  size_t n = strlen(e->cache_dir ? e->cache_dir : "") + 32;
  e->tmp_dir = malloc(n);
  e->db_path = malloc(n);
  e->workers = calloc((size_t)e->nworkers, sizeof *e->workers);
  if (!e->cache_dir || !e->tmp_dir || !e->db_path || !e->hash || !e->fails || !e->workers) {
    engine_close(e);
    return ps_diag_set(diag, PS_E_NOMEM, "engine", (size_t)-1, NULL);
  }
  snprintf(e->tmp_dir, n, "%s/tmp", e->cache_dir);
  snprintf(e->db_path, n, "%s/pdbsym.sqlite", e->cache_dir);
  /* the cache folder and its download area; an existing folder is fine */
  if ((mkdir(e->cache_dir, 0755) != 0 && errno != EEXIST) ||
      (mkdir(e->tmp_dir, 0700) != 0 && errno != EEXIST)) {
    int err = errno;
    ps_diag_set(diag, PS_E_IO, "cache folder", (size_t)-1, "%s: %s", e->cache_dir, strerror(err));
    engine_close(e);
    return PS_E_IO;
  }
  /* what killed processes left in the download area */
  uint64_t swept = 0, swept_bytes = 0;
  ps_diag sd;
  ps_diag_clear(&sd);
  if (fetch_sweep_tmp(e->tmp_dir, true, &swept, &swept_bytes, &sd) == PS_E_OK && swept) {
    log_line l;
    log_begin(&l, LOG_INFO, "removed unfinished downloads");
    log_str(&l, "folder", e->tmp_dir);
    log_int(&l, "files", (long long)swept);
    log_int(&l, "bytes", (long long)swept_bytes);
    log_end(&l);
  }

  store_config sc = {0};
  sc.dir = e->cache_dir;
  sc.max_bytes = cfg->cache_max_bytes;
  sc.mem_max_bytes = cfg->mem_max_bytes;
  sc.negative_missing_ttl = cfg->negative_missing_ttl;
  sc.negative_malformed_ttl = cfg->negative_malformed_ttl;
  sc.negative_error_ttl = e->cfg.negative_error_ttl;
  sc.negative_memory = cfg->negative_memory;
  sc.outside_bytes = downloads_bytes;
  sc.outside_ctx = e;
  ps_err rc = store_open(&sc, &e->store, diag);
  if (rc != PS_E_OK) {
    engine_close(e);
    return rc;
  }
  e->writer_alive = true;
  if (pthread_create(&e->writer, NULL, writer_main, e) != 0) {
    e->writer_alive = false;
    ps_diag_set(diag, PS_E_NOMEM, "engine", (size_t)-1, "cannot start the cache's writer");
    engine_close(e);
    return PS_E_NOMEM;
  }
  e->writer_started = true;
  if (!cfg->offline) {
    fetch_config fc;
    memset(&fc, 0, sizeof fc);
    fc.lim = cfg->dl;
    fc.symbol_path = e->symbol_path;
    fc.tmp_dir = e->tmp_dir;
    fc.private_tmp = true;
    fc.no_network = false;
    fc.max_download_bytes = e->cfg.max_pdb_bytes;
    fc.max_inflated_bytes = e->cfg.max_pdb_bytes;
    fc.max_parallel_per_source = cfg->max_parallel_downloads;
    rc = fetch_open(&fc, &e->fetch, diag);
    if (rc != PS_E_OK) {
      engine_close(e);
      return rc;
    }
    refresh_disk_budget(e);
  }
  for (int i = 0; i < e->nworkers; i++) {
    if (pthread_create(&e->workers[i], NULL, worker_main, e) != 0) {
      ps_diag_set(diag, PS_E_NOMEM, "engine", (size_t)-1, "cannot start download worker %d", i);
      engine_close(e);
      return PS_E_NOMEM;
    }
    pthread_mutex_lock(&e->mu);
    e->workers_alive++;
    pthread_mutex_unlock(&e->mu);
  }
  *out = e;
  return PS_E_OK;
}

static void job_free(engine *e, job *j) {
  if (j->has_ent)
    store_release(e->store, &j->ent);
  if (j->has_base)
    store_release(e->store, &j->base);
  if (j->img.st && j->img.st != j->pdb.st) {
    st_free(j->img.st);
    free(j->img.st);
  }
  if (j->pdb.st) {
    st_free(j->pdb.st);
    free(j->pdb.st);
  }
  free(j);
}

void engine_close(engine *e) { engine_close_within(e, UINT64_MAX / 4); }

/* each phase waits for its fixed grace or until `stop_at`, whichever is first */
static uint64_t cut(uint64_t until, uint64_t stop_at) { return until < stop_at ? until : stop_at; }

/* the same, but threads that are only asked to stop (idle workers, an idle
 * writer) get ENGINE_STOP_FLOOR_MS even past `stop_at` */
static uint64_t cut_floor(uint64_t until, uint64_t stop_at) {
  uint64_t t = cut(until, stop_at), floor = engine_now_ms() + ENGINE_STOP_FLOOR_MS;
  return t > floor ? t : floor;
}

void engine_close_within(engine *e, uint64_t budget_ms) {
  if (!e)
    return;
  uint64_t stop_at = engine_now_ms() + budget_ms;
  /* give running downloads a grace period; a download that outlasts it is
   * abandoned with the process (the cache is crash-safe), rather than letting
   * a slow upstream hold a SIGTERM for minutes */
  if (e->writer_started) { /* a worker waiting for room in the queue stops waiting */
    pthread_mutex_lock(&e->pq_mu);
    e->pq_closing = true;
    pthread_cond_broadcast(&e->pq_cv);
    pthread_mutex_unlock(&e->pq_mu);
  }
  pthread_mutex_lock(&e->mu);
  e->draining = true;
  pthread_cond_broadcast(&e->cv);
  uint64_t until = cut(engine_now_ms() + ENGINE_CLOSE_GRACE_MS, stop_at);
  while (e->njobs > 0 && e->workers_alive > 0) {
    uint64_t now = engine_now_ms();
    if (now >= until)
      break;
    struct timespec ts = deadline_after_ms(until - now);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
  int left = e->njobs;
  e->stopping = true;
  pthread_cond_broadcast(&e->work_cv);
  until = cut_floor(engine_now_ms() + ENGINE_WORKER_STOP_MS, stop_at);
  while (e->workers_alive > 0) {
    uint64_t now = engine_now_ms();
    if (now >= until)
      break;
    struct timespec ts = deadline_after_ms(until - now);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
  bool abandoned = e->workers_alive > 0;
  pthread_mutex_unlock(&e->mu);
  if (left) {
    log_line l;
    log_begin(&l, LOG_WARN, "shutting down with downloads still running");
    log_int(&l, "downloads", left);
    log_end(&l);
  }
  if (abandoned)
    return; /* a worker still uses the store and the fetcher: leave them */
  for (int i = 0; i < e->nworkers && e->workers; i++)
    if (e->workers[i])
      pthread_join(e->workers[i], NULL);
  /* the tables answered and not yet written: the writer gets a grace period */
  if (e->writer_started) {
    pthread_mutex_lock(&e->pq_mu);
    e->pq_stop = true;
    e->pq_deadline = cut(engine_now_ms() + ENGINE_PERSIST_GRACE_MS, stop_at);
    pthread_cond_broadcast(&e->pq_cv);
    uint64_t wuntil = cut_floor(e->pq_deadline + ENGINE_WORKER_STOP_MS, stop_at);
    while (e->writer_alive) {
      uint64_t now = engine_now_ms();
      if (now >= wuntil)
        break;
      struct timespec ts = deadline_after_ms(wuntil - now);
      pthread_cond_timedwait(&e->pq_cv, &e->pq_mu, &ts);
    }
    bool writing = e->writer_alive;
    size_t unwritten = e->pq_n;
    pthread_mutex_unlock(&e->pq_mu);
    if (writing) {
      /* still in one SQLite write: leave the store to the process's end */
      log_line l;
      log_begin(&l, LOG_WARN, "shutting down with modules not stored");
      log_int(&l, "modules", (long long)unwritten);
      log_str(&l, "error", "the cache's writer is still writing (the database locked or the disk slow)");
      log_end(&l);
      return;
    }
    pthread_join(e->writer, NULL);
  }
  /* no worker runs and none will: end the lookups, then the fetcher */
  for (job *j = e->jobs; j; j = j->next)
    if (j->op) {
      fetch_op_free(j->op);
      j->op = NULL;
    }
  if (e->fetch)
    fetch_close(e->fetch);
  /* jobs are freed whoever referenced them; none can be waited on now */
  job *j = e->jobs;
  while (j) {
    job *next = j->next;
    if (j->owner && --j->owner->refs == 0)
      free(j->owner);
    job_free(e, j);
    j = next;
  }
  if (e->store)
    store_close(e->store);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  pthread_cond_destroy(&e->work_cv);
  pthread_mutex_destroy(&e->pq_mu);
  pthread_cond_destroy(&e->pq_cv);
  pthread_mutex_destroy(&e->probe_mu);
  pthread_mutex_destroy(&e->budget_mu);
  free(e->hash);
  free(e->fails);
  free(e->workers);
  free(e->cache_dir);
  free(e->symbol_path);
  free(e->tmp_dir);
  free(e->db_path);
  free(e);
}

void engine_drain(engine *e) {
  if (!e)
    return;
  pthread_mutex_lock(&e->mu);
  e->draining = true;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

/* ---- verification ---------------------------------------------------------- */

/* The method names of the image fm into c->st (a copy of c->base first, for
 * a names job). */
static void image_names(image_ctx *c, const filemap *fm) {
  char msg[200];
  ps_diag d;
  ps_diag_clear(&d);
  if (!c->st && c->base) {
    symtab *copy = calloc(1, sizeof *copy);
    ps_err rc = copy ? st_copy(c->base, NULL, copy) : PS_E_NOMEM;
    if (rc != PS_E_OK) {
      free(copy);
      snprintf(c->error, sizeof c->error, "cannot copy the cached table: %s", ps_strerror(rc));
      return;
    }
    c->st = copy;
  }
  if (!c->st)
    return;
  /* a finished table stays finished (pe_method_names finishes it again) */
  ps_err rc = pe_method_names(fm->data, fm->len, NULL, c->st, &d);
  if (rc == PS_E_OK && c->st->err == PS_E_OK) {
    c->named = true;
  } else {
    st_finish(c->st); /* sorted again, whatever names were added before the failure */
    c->broken = true;
    snprintf(c->error, sizeof c->error, "the image's method names: %s",
             ps_diag_format(&d, msg, sizeof msg));
  }
}

/* The embedded Portable PDB of the image fm, when it names the module's
 * GUID, into a new c->st (with the image's method names: loader_read). */
static void image_embedded(image_ctx *c, const filemap *fm) {
  char msg[200];
  ps_diag d;
  ps_diag_clear(&d);
  pe_info info;
  if (pe_parse(fm->data, fm->len, &info, &d) != PS_E_OK) {
    c->broken = true;
    snprintf(c->error, sizeof c->error, "%s", ps_diag_format(&d, msg, sizeof msg));
    return;
  }
  bool named = false;
  for (int i = 0; i < info.ncodeview && !named; i++)
    named = info.codeview[i].portable && !memcmp(info.codeview[i].guid, c->id.m->guid, 16);
  if (!info.has_embedded_pdb || !named) {
    snprintf(c->error, sizeof c->error, "its image %.100s has no embedded Portable PDB with this id",
             c->id.m->code_file);
    return;
  }
  symtab *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(c->error, sizeof c->error, "out of memory");
    return;
  }
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  st_init(st, &budget);
  ps_err rc = loader_read(fm->data, fm->len, NULL, 0, &budget, st, &d);
  st->budget = NULL;
  if (rc == PS_E_OK && (st->ident.format != ST_FORMAT_PORTABLE ||
                        memcmp(st->ident.guid, c->id.m->guid, 16) != 0)) {
    rc = ps_diag_set(&d, PS_E_MISMATCH, "embedded PDB", (size_t)-1,
                     "the embedded Portable PDB's id is not the module's");
  }
  if (rc != PS_E_OK) {
    st_free(st);
    free(st);
    c->broken = true;
    snprintf(c->error, sizeof c->error, "its embedded Portable PDB: %s",
             ps_diag_format(&d, msg, sizeof msg));
    return;
  }
  c->st = st;
  c->named = true;
}

static bool verify_image(void *vctx, const fetch_file *file, ps_diag *diag) {
  image_ctx *c = vctx;
  if (!fetch_verify_identity(&c->id, file, diag))
    return false;
  filemap fm;
  if (filemap_open(&fm, file->path, c->id.max_bytes, diag) != PS_E_OK)
    return false;
  c->error[0] = '\0';
  c->broken = false;
  if (c->embedded)
    image_embedded(c, &fm);
  else if (!c->named)
    image_names(c, &fm);
  filemap_close(&fm);
  return true;
}

/* ---- jobs ------------------------------------------------------------------ */

static int formats_for(const module_id *m, st_format out[2]) {
  if (m->format == ST_FORMAT_WINDOWS || m->format == ST_FORMAT_PORTABLE) {
    out[0] = m->format;
    return 1;
  }
  out[0] = ST_FORMAT_WINDOWS;
  out[1] = ST_FORMAT_PORTABLE;
  return 2;
}

static void job_unref_locked(engine *e, job *j) {
  if (--j->refs > 0)
    return;
  job **pp = &e->jobs;
  while (*pp && *pp != j)
    pp = &(*pp)->next;
  if (*pp)
    *pp = j->next;
  pp = &e->hash[hash_key(j->key) & (e->nhash - 1)];
  while (*pp && *pp != j)
    pp = &(*pp)->hnext;
  if (*pp)
    *pp = j->hnext;
  job_free(e, j);
}

static void runq_push_locked(engine *e, job *j) {
  if (j->queued)
    return;
  j->queued = true;
  j->rnext = NULL;
  if (e->runq_tail)
    e->runq_tail->rnext = j;
  else
    e->runq = j;
  e->runq_tail = j;
  pthread_cond_signal(&e->work_cv);
}

/* The fetcher's wake: the job has more to do.  Called on the network thread
 * with the fetcher's lock held (see the lock order above). */
static void job_wake(void *ctx) {
  job *j = ctx;
  engine *e = j->e;
  pthread_mutex_lock(&e->mu);
  runq_push_locked(e, j);
  pthread_mutex_unlock(&e->mu);
}

/* The negative TTL of a module's fetch error: negative_error_ttl, doubled per
 * consecutive failure (remembered for a bounded number of modules). */
static int64_t error_ttl(engine *e, const char *key, bool failed) {
  uint64_t now = engine_now_ms();
  pthread_mutex_lock(&e->mu);
  fail_rec *hit = NULL, *oldest = NULL;
  for (size_t i = 0; i < e->nfails; i++) {
    if (!strcmp(e->fails[i].key, key)) {
      hit = &e->fails[i];
      break;
    }
    if (!oldest || e->fails[i].at < oldest->at)
      oldest = &e->fails[i];
  }
  int64_t ttl = 0;
  if (!failed) {
    if (hit) /* a success forgets the failures */
      *hit = e->fails[--e->nfails];
  } else {
    /* a failure streak older than the longest TTL twice over starts again */
    if (hit && now - hit->at > (uint64_t)e->cfg.negative_error_max_ttl * 2000u)
      hit->fails = 0;
    if (!hit) {
      hit = e->nfails < ENGINE_FAILS_MAX ? &e->fails[e->nfails++] : oldest;
      snprintf(hit->key, sizeof hit->key, "%s", key);
      hit->fails = 0;
    }
    hit->fails++;
    hit->at = now;
    ttl = e->cfg.negative_error_ttl;
    for (unsigned i = 1; i < hit->fails && ttl < e->cfg.negative_error_max_ttl; i++)
      ttl *= 2;
    if (ttl > e->cfg.negative_error_max_ttl)
      ttl = e->cfg.negative_error_max_ttl;
  }
  pthread_mutex_unlock(&e->mu);
  return ttl;
}

static void log_failure(engine *e, const job *j, mod_status status, int64_t ttl) {
  (void)e;
  char id[48];
  module_debug_id(j->m.guid, j->m.age, id);
  log_line l;
  log_begin(&l, status == MOD_MISSING ? LOG_INFO : LOG_WARN,
            status == MOD_MISSING ? "module not found" : "download failed");
  log_str(&l, "debug_file", j->m.debug_file);
  log_str(&l, "debug_id", id);
  log_str(&l, "status", mod_status_name(status));
  log_str(&l, "error", j->error);
  if (ttl > 0)
    log_int(&l, "retry_after_s", (long long)ttl);
  log_num(&l, "seconds", (double)(engine_now_ms() - j->started) / 1000.0);
  log_end(&l);
}

/* Settles the job: negative entries, metrics, waiters woken. */
static void job_finish(engine *e, job *j, mod_status status, const char *err) {
  st_format fmts[2];
  int nf = formats_for(&j->m, fmts);
  int64_t ttl = 0;
  snprintf(j->error, sizeof j->error, "%s", err ? err : "");
  if (status == MOD_MISSING && !j->error[0] && e->fetch)
    snprintf(j->error, sizeof j->error, "no symbol source has %.200s", j->m.debug_file);
  else if (status == MOD_MISSING && !j->error[0]) /* offline: say so, it is the reason */
    snprintf(j->error, sizeof j->error,
             "offline: %.120s is not in the cache, and no symbol source is read offline "
             "(folders included)", j->m.debug_file);
  if (e->fetch) { /* offline: remember nothing */
    char key[320];
    module_cache_key(&j->m, fmts[0], key, sizeof key);
    if (status == MOD_FETCH_ERROR)
      ttl = error_ttl(e, key, true);
    else
      error_ttl(e, key, false);
    if (status == MOD_MALFORMED && j->pdb.suspect)
      ttl = e->cfg.negative_suspect_ttl;
    if (status != MOD_FOUND && !j->embedded_only) {
      /* missing and clean malformed answers keep the store's TTLs (ttl 0);
       * an embedded-only job leaves the PDB's entries as they are (the
       * image's own say what it found) */
      store_neg_kind kind = status == MOD_MALFORMED ? STORE_NEG_MALFORMED
                            : status == MOD_MISSING ? STORE_NEG_MISSING
                                                    : STORE_NEG_FETCH_ERROR;
      for (int i = 0; i < nf; i++) {
        module_cache_key(&j->m, fmts[i], key, sizeof key);
        store_put_negative_ttl(e->store, key, kind, j->error, ttl);
      }
    }
    if (status != MOD_FOUND)
      log_failure(e, j, status, ttl);
    if (e->cfg.on_download)
      e->cfg.on_download((int)status, (double)(engine_now_ms() - j->started) / 1000.0);
  }
  if (j->pdb.st) {
    st_free(j->pdb.st);
    free(j->pdb.st);
    j->pdb.st = NULL;
  }
  pthread_mutex_lock(&e->mu);
  j->status = status;
  j->done = true;
  e->njobs--;
  if (j->owner) { /* its request may start another */
    j->owner->live--;
    if (--j->owner->refs == 0)
      free(j->owner);
    j->owner = NULL;
  }
  atomic_fetch_add(&e->settled, 1);
  pthread_cond_broadcast(&e->cv);
  job_unref_locked(e, j);
  pthread_mutex_unlock(&e->mu);
}

/* ---- the persistence queue --------------------------------------------------- */

static void log_not_stored(const char *msg, const char *key, uint64_t bytes, const char *error) {
  log_line l;
  log_begin(&l, LOG_WARN, msg);
  log_str(&l, "key", key);
  log_int(&l, "bytes", (long long)bytes);
  log_str(&l, "error", error);
  log_end(&l);
}

/* Queues the pinned table *ent for the writer (the pin is the queue's from
 * now on).  Waits for room at most persist_wait; past that (or when the
 * writer has stopped) the table is dropped: it was answered and stays in the
 * hot set until evicted, but is not written.  Once the engine is closing the
 * table is queued at once, past the bounds (a worker has one table at a
 * time: at most download_workers more), so that the writer's grace at
 * shutdown covers it. */
static void persist_enqueue(engine *e, store_entry *ent, const char *key) {
  uint64_t bytes = ent->st ? st_memory_size(ent->st) : 0;
  pitem *it = calloc(1, sizeof *it);
  pthread_mutex_lock(&e->pq_mu);
  uint64_t until = engine_now_ms() + e->cfg.persist_wait_ms;
  bool room = false;
  while (it && e->writer_alive) {
    /* one table larger than the byte limit alone still goes through */
    room = e->pq_n == 0 || e->pq_closing ||
           (e->pq_n < e->pq_max && e->pq_bytes + bytes <= e->pq_max_bytes);
    uint64_t now = engine_now_ms();
    if (room || now >= until)
      break;
    struct timespec ts = deadline_after_ms(until - now);
    pthread_cond_timedwait(&e->pq_cv, &e->pq_mu, &ts);
  }
  if (!room || !it) {
    size_t n = e->pq_n;
    bool oom = !it;
    e->pq_dropped++;
    pthread_mutex_unlock(&e->pq_mu);
    free(it);
    store_release(e->store, ent);
    char why[160];
    snprintf(why, sizeof why,
             "the persistence queue stayed full for persist_wait (%zu tables waiting; "
             "persist_queue, persist_queue_bytes): answered from memory only",
             n);
    log_not_stored("module not stored", key, bytes, oom ? "out of memory" : why);
    return;
  }
  it->ent = *ent;
  it->bytes = bytes;
  it->queued = engine_now_ms();
  snprintf(it->key, sizeof it->key, "%s", key);
  if (e->pq_tail)
    e->pq_tail->next = it;
  else
    e->pq_head = it;
  e->pq_tail = it;
  e->pq_n++;
  e->pq_bytes += bytes;
  pthread_cond_broadcast(&e->pq_cv);
  pthread_mutex_unlock(&e->pq_mu);
}

/* Whether the cache folder takes a write now: a small file made, written,
 * synced and removed (the writer thread, never the event loop).  A cache on
 * a read-only, full or vanished file system would fail every download and
 * every store while /ready said 200. */
static void probe_folder(engine *e) {
  char p[1100];
  snprintf(p, sizeof p, "%s/.pdbsym-write-probe", e->cache_dir);
  int err = 0;
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    err = errno;
  } else {
    if (write(fd, "x", 1) != 1 || fsync(fd) != 0)
      err = errno ? errno : EIO;
    close(fd);
    unlink(p);
  }
  bool was = atomic_load(&e->unwritable);
  pthread_mutex_lock(&e->probe_mu);
  if (err)
    snprintf(e->probe_error, sizeof e->probe_error, "the cache folder %.100s cannot be written: %s",
             e->cache_dir, strerror(err));
  pthread_mutex_unlock(&e->probe_mu);
  atomic_store(&e->unwritable, err != 0);
  if (was != (err != 0)) {
    log_line l;
    log_begin(&l, err ? LOG_ERROR : LOG_INFO,
              err ? "the cache folder cannot be written: not ready" : "the cache folder can be written again");
    log_str(&l, "cache_dir", e->cache_dir);
    if (err)
      log_str(&l, "error", strerror(err));
    log_end(&l);
  }
  e->probe_next = engine_now_ms() + ENGINE_PROBE_MS;
}

bool engine_writable(engine *e, char *why, size_t cap) {
  if (!e || !atomic_load(&e->unwritable))
    return true;
  pthread_mutex_lock(&e->probe_mu);
  snprintf(why, cap, "%s", e->probe_error);
  pthread_mutex_unlock(&e->probe_mu);
  return false;
}

/* The writer: one SQLite write at a time (the cache serialises them anyway),
 * in the order the tables were answered; between them, every
 * ENGINE_PROBE_MS, a write probe of the cache folder (engine_writable). */
static void *writer_main(void *arg) {
  engine *e = arg;
  probe_folder(e);
  pthread_mutex_lock(&e->pq_mu);
  for (;;) {
    while (!e->pq_head && !e->pq_stop) {
      uint64_t now = engine_now_ms();
      if (now >= e->probe_next) {
        pthread_mutex_unlock(&e->pq_mu);
        probe_folder(e);
        pthread_mutex_lock(&e->pq_mu);
        continue;
      }
      struct timespec ts = deadline_after_ms(e->probe_next - now);
      pthread_cond_timedwait(&e->pq_cv, &e->pq_mu, &ts);
    }
    if (!e->pq_head || (e->pq_stop && engine_now_ms() >= e->pq_deadline))
      break;
    pitem *it = e->pq_head;
    e->pq_head = it->next;
    if (!e->pq_head)
      e->pq_tail = NULL;
    pthread_mutex_unlock(&e->pq_mu);

    uint64_t t0 = engine_now_ms();
    log_line l;
    log_begin(&l, LOG_DEBUG, "storing module");
    log_str(&l, "key", it->key);
    log_int(&l, "bytes", (long long)it->bytes);
    log_num(&l, "queued_s", (double)(t0 - it->queued) / 1000.0);
    log_end(&l);
    ps_diag d;
    ps_diag_clear(&d);
    disk_budget_writing(e, it->bytes); /* downloads from now on leave it room */
    ps_err rc = store_save(e->store, &it->ent, &d);
    store_release(e->store, &it->ent);
    if (rc != PS_E_OK)
      probe_folder(e); /* the folder, or the cap? /ready says which */
    if (rc != PS_E_OK) {
      /* answered from memory anyway; the cache could not keep it */
      char msg[256];
      log_not_stored("cache did not take module", it->key, it->bytes,
                     ps_diag_format(&d, msg, sizeof msg));
    } else {
      log_begin(&l, LOG_DEBUG, "module stored");
      log_str(&l, "key", it->key);
      log_num(&l, "seconds", (double)(engine_now_ms() - t0) / 1000.0);
      log_end(&l);
    }
    disk_budget_writing(e, 0);

    pthread_mutex_lock(&e->pq_mu);
    e->pq_n--;
    e->pq_bytes -= it->bytes;
    if (rc == PS_E_OK)
      e->pq_saved++;
    else
      e->pq_failed++;
    pthread_cond_broadcast(&e->pq_cv);
    free(it);
  }
  /* stopping, and the grace is over: what is left is not written */
  size_t left = 0;
  while (e->pq_head) {
    pitem *it = e->pq_head;
    e->pq_head = it->next;
    store_release(e->store, &it->ent);
    e->pq_n--;
    e->pq_bytes -= it->bytes;
    free(it);
    left++;
  }
  e->pq_tail = NULL;
  e->writer_alive = false;
  pthread_cond_broadcast(&e->pq_cv);
  pthread_mutex_unlock(&e->pq_mu);
  if (left) {
    log_line l;
    log_begin(&l, LOG_WARN, "shutting down with modules not stored");
    log_int(&l, "modules", (long long)left);
    log_end(&l);
  }
  return NULL;
}

/* ---- the module's image ------------------------------------------------------ */

#define NO_EMBEDDED_SUFFIX "/no-embedded"

/* true when no negative entry for key */
static bool not_negative(engine *e, const char *key) {
  store_entry ent;
  memset(&ent, 0, sizeof ent);
  store_result r = store_get(e->store, key, &ent);
  if (r == STORE_HIT)
    store_release(e->store, &ent); /* no table is stored under an image's key */
  return r != STORE_NEGATIVE;
}

/* true when the module names an image (code_file and code_id) that no
 * negative entry says is missing, unreadable or failing; for_embedded: nor
 * that it has no embedded Portable PDB for the module (a separate entry: an
 * image without one still has method names for a Windows PDB). */
static bool image_worth_a_look(engine *e, const module_id *m, bool for_embedded) {
  char ik[320];
  module_image_key(m, ik, sizeof ik);
  if (!ik[0] || !e->fetch || !not_negative(e, ik))
    return false;
  if (!for_embedded)
    return true;
  size_t n = strlen(ik);
  snprintf(ik + n, sizeof ik - n, NO_EMBEDDED_SUFFIX);
  return not_negative(e, ik);
}

/* The image gave no names (no source has it, it failed, or it is not
 * readable): a negative entry under the image's own key, so requests that
 * name it do not look again before it expires (the TTLs of a module's
 * negative entries: missing, malformed, or a fetch error's backoff). */
static void image_unnamed(engine *e, job *j, fetch_status st, const ps_diag *d) {
  char ik[320], msg[256];
  module_image_key(&j->m, ik, sizeof ik);
  if (!ik[0])
    return;
  store_neg_kind kind;
  int64_t ttl = 0;
  const char *why;
  if (st == FETCH_FOUND && j->img.embedded && !j->img.broken) {
    /* the image is there, without the module's embedded PDB */
    size_t n = strlen(ik);
    snprintf(ik + n, sizeof ik - n, NO_EMBEDDED_SUFFIX);
    kind = STORE_NEG_MISSING;
    why = j->img.error;
  } else if (st == FETCH_FOUND && j->img.broken) {
    kind = STORE_NEG_MALFORMED;
    why = j->img.error;
  } else if (st == FETCH_ERROR) {
    kind = STORE_NEG_FETCH_ERROR;
    ttl = error_ttl(e, ik, true);
    why = ps_diag_format(d, msg, sizeof msg);
  } else if (st == FETCH_NOT_FOUND) {
    kind = STORE_NEG_MISSING;
    why = "no symbol source has the image";
  } else {
    return; /* found, not named for want of memory: nothing to remember */
  }
  store_put_negative_ttl(e->store, ik, kind, why, ttl);
  char code_id[24];
  snprintf(code_id, sizeof code_id, "%08X%X", (unsigned)j->m.code_timestamp,
           (unsigned)j->m.code_size);
  log_line l;
  log_begin(&l, kind == STORE_NEG_MISSING ? LOG_INFO : LOG_WARN,
            "no method names from the image: the PDB's names answer");
  log_str(&l, "debug_file", j->m.debug_file);
  log_str(&l, "code_file", j->m.code_file);
  log_str(&l, "code_id", code_id);
  log_str(&l, "error", why);
  if (ttl > 0)
    log_int(&l, "retry_after_s", (long long)ttl);
  log_end(&l);
}

/* The parsed table answers the waiting requests first; the SQLite write
 * comes after, on the writer thread (issue 15). */
static void job_ingest(engine *e, job *j) {
  char key[320];
  module_cache_key(&j->m, j->format, key, sizeof key);
  store_entry ent, q;
  ps_err rc = store_adopt(e->store, key, j->pdb.st, j->source, j->flags, &ent);
  free(j->pdb.st);
  j->pdb.st = NULL;
  if (rc != PS_E_OK || !ent.st) {
    job_finish(e, j, MOD_FETCH_ERROR, "out of memory keeping the module");
    return;
  }
  store_pin(e->store, &ent, &q); /* the queue's pin */
  pthread_mutex_lock(&e->mu);
  j->ent = ent; /* the waiters' table, released with the job */
  j->has_ent = true;
  pthread_mutex_unlock(&e->mu);
  job_finish(e, j, MOD_FOUND, NULL); /* j may be gone after this */
  persist_enqueue(e, &q, key);
}

/* Nothing could be evicted (what the cap leaves is held by other downloads in
 * flight, or by tables waiting to be written): waits, at most
 * ENGINE_ROOM_WAIT_MS, until the budget has `need` bytes or the downloads in
 * flight gave some back; true when the job should try again. */
static bool wait_for_downloads(engine *e, uint64_t need) {
  uint64_t busy = fetch_tmp_bytes(e->fetch);
  if (!busy)
    return false; /* nothing in flight to wait for */
  for (unsigned ms = 0; ms < ENGINE_ROOM_WAIT_MS; ms += 50) {
    pthread_mutex_lock(&e->mu);
    bool stop = e->stopping;
    pthread_mutex_unlock(&e->mu);
    if (stop)
      return false;
    if (refresh_disk_budget(e) >= need || fetch_tmp_bytes(e->fetch) < busy)
      return true;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return refresh_disk_budget(e) >= need;
}

/* A download did not fit in what the cache's cap leaves: the cache evicts
 * least recently used modules to give it room (and a little more), at most
 * ENGINE_ROOM_TRIES times per job (other downloads and writes may take the
 * room meanwhile).  true when the job should look the module up again. */
static bool make_room(engine *e, job *j, uint64_t need) {
  j->room_tries++;
  if (need > e->cfg.max_pdb_bytes)
    return false;
  uint64_t want = need + ((uint64_t)1 << 20);
  uint64_t freed = 0;
  ps_diag d;
  ps_diag_clear(&d);
  ps_err rc = store_make_room(e->store, want, &freed, &d);
  char msg[256];
  log_line l;
  log_begin(&l, LOG_INFO, "made room for a download");
  log_str(&l, "debug_file", j->m.debug_file);
  log_int(&l, "bytes", (long long)need);
  log_int(&l, "freed", (long long)freed);
  if (rc != PS_E_OK)
    log_str(&l, "error", ps_diag_format(&d, msg, sizeof msg));
  log_end(&l);
  if (freed == 0 && rc != PS_E_OK)
    return wait_for_downloads(e, need);
  refresh_disk_budget(e);
  return true;
}

/* The image step that reads an embedded Portable PDB; false (diag set) when
 * the lookup cannot start. */
static bool embedded_start(engine *e, job *j, ps_diag *d) {
  j->img = (image_ctx){.id = {.m = &j->m, .image = true, .max_bytes = e->cfg.max_pdb_bytes},
                       .embedded = true};
  j->op = fetch_op_new(e->fetch, &j->m, true, ST_FORMAT_UNKNOWN, job_wake, j, d);
  if (!j->op)
    return false;
  fetch_op_set_lane(j->op, j->lane);
  j->stage = J_EMBEDDED;
  return true;
}

/* A names job that got no names: its waiters are answered from the cached
 * table, as they would have been without it. */
static void names_job_keep(engine *e, job *j) {
  if (j->img.st) {
    st_free(j->img.st);
    free(j->img.st);
    j->img.st = NULL;
  }
  pthread_mutex_lock(&e->mu);
  j->ent = j->base;
  j->has_ent = true;
  j->has_base = false;
  pthread_mutex_unlock(&e->mu);
  job_finish(e, j, MOD_FOUND, NULL);
}

/* Runs j until it waits for the network or is done.  One worker at a time. */
static void job_step(engine *e, job *j) {
  char msg[256];
  for (;;) {
    ps_diag d;
    ps_diag_clear(&d);
    fetch_result res;
    switch (j->stage) {
    case J_START:
      if (!e->fetch) {
        job_finish(e, j, MOD_MISSING, NULL);
        return;
      }
      /* nothing is evicted for a download that has not started: a module
       * no source has would empty a full cache a slice at a time; the cache
       * makes room for one that proved itself and ran out (make_room) */
      refresh_disk_budget(e);
      if (j->embedded_only) { /* the PDB is known to be missing: its image only */
        if (!embedded_start(e, j, &d)) {
          job_finish(e, j, MOD_FETCH_ERROR, ps_diag_format(&d, msg, sizeof msg));
          return;
        }
        break;
      }
      j->pdb = (fetch_identity){.m = &j->m, .fmt = j->m.format, .max_bytes = e->cfg.max_pdb_bytes,
                                .keep = true};
      j->op = fetch_op_new(e->fetch, &j->m, false, j->m.format, job_wake, j, &d);
      if (!j->op) {
        job_finish(e, j, MOD_FETCH_ERROR, ps_diag_format(&d, msg, sizeof msg));
        return;
      }
      fetch_op_set_lane(j->op, j->lane);
      j->stage = J_PDB;
      break;
    case J_PDB: {
      fetch_status st = fetch_op_step(j->op, fetch_verify_identity, &j->pdb, &res, &d);
      if (st == FETCH_PENDING)
        return;
      uint64_t need = st == FETCH_ERROR ? fetch_op_room_needed(j->op) : 0;
      fetch_op_free(j->op);
      j->op = NULL;
      if (need && j->room_tries < ENGINE_ROOM_TRIES && make_room(e, j, need)) {
        j->stage = J_START; /* once more, with room */
        break;
      }
      /* no room after the tries: say so, not another source's failure */
      if (need && need <= e->cfg.max_pdb_bytes && st == FETCH_ERROR) {
        snprintf(msg, sizeof msg,
                 "no room for the %llu-byte download under cache_max_bytes after %d tries"
                 " (downloads in flight: %llu bytes)",
                 (unsigned long long)need, j->room_tries,
                 (unsigned long long)fetch_tmp_bytes(e->fetch));
        job_finish(e, j, MOD_FETCH_ERROR, msg);
        return;
      }
      if (st == FETCH_FOUND && j->pdb.st) {
        fetch_result_done(e->fetch, &res);
        j->format = res.format;
        snprintf(j->source, sizeof j->source, "%.*s", (int)sizeof j->source - 1, res.source);
        if (j->pdb.st->ident.managed && image_worth_a_look(e, &j->m, false)) {
          j->img = (image_ctx){.id = {.m = &j->m, .image = true, .max_bytes = e->cfg.max_pdb_bytes},
                               .st = j->pdb.st};
          j->op = fetch_op_new(e->fetch, &j->m, true, ST_FORMAT_UNKNOWN, job_wake, j, &d);
          if (j->op)
            fetch_op_set_lane(j->op, j->lane);
          j->stage = j->op ? J_IMAGE : J_INGEST;
        } else {
          j->stage = J_INGEST;
        }
        break;
      }
      if (st == FETCH_FOUND) /* accepted without a table: cannot happen */
        fetch_result_done(e->fetch, &res);
      if (st == FETCH_NOT_FOUND && !j->pdb.malformed && j->m.format != ST_FORMAT_WINDOWS &&
          image_worth_a_look(e, &j->m, true) && embedded_start(e, j, &d))
        break; /* no source has the PDB: it may be embedded in the image */
      if (j->pdb.malformed)
        job_finish(e, j, MOD_MALFORMED, j->pdb.error);
      else if (st == FETCH_ERROR)
        job_finish(e, j, MOD_FETCH_ERROR, ps_diag_format(&d, msg, sizeof msg));
      else
        job_finish(e, j, MOD_MISSING, NULL);
      return;
    }
    case J_NAMES: /* the image for a table cached without its names */
      j->img = (image_ctx){.id = {.m = &j->m, .image = true, .max_bytes = e->cfg.max_pdb_bytes},
                           .base = j->base.st};
      j->op = fetch_op_new(e->fetch, &j->m, true, ST_FORMAT_UNKNOWN, job_wake, j, &d);
      if (!j->op) {
        names_job_keep(e, j);
        return;
      }
      fetch_op_set_lane(j->op, j->lane);
      j->stage = J_IMAGE;
      break;
    case J_IMAGE: {
      fetch_status st = fetch_op_step(j->op, verify_image, &j->img, &res, &d);
      if (st == FETCH_PENDING)
        return;
      fetch_op_free(j->op);
      j->op = NULL;
      if (st == FETCH_FOUND)
        fetch_result_done(e->fetch, &res);
      if (!j->img.named)
        image_unnamed(e, j, st, &d);
      else
        j->flags |= STORE_F_IMAGE_NAMES;
      if (!j->names_job)
        j->img.st = NULL; /* it was the PDB's table, j->pdb.st */
      if (j->names_job) {
        if (!j->img.named) {
          names_job_keep(e, j);
          return;
        }
        snprintf(j->source, sizeof j->source, "%.*s", (int)sizeof j->source - 1, res.source);
        j->pdb.st = j->img.st; /* the named copy */
        j->img.st = NULL;
      }
      j->stage = J_INGEST;
      break;
    }
    case J_EMBEDDED: {
      fetch_status st = fetch_op_step(j->op, verify_image, &j->img, &res, &d);
      if (st == FETCH_PENDING)
        return;
      fetch_op_free(j->op);
      j->op = NULL;
      if (st == FETCH_FOUND)
        fetch_result_done(e->fetch, &res);
      if (st == FETCH_FOUND && j->img.st) {
        j->pdb.st = j->img.st;
        j->img.st = NULL;
        j->format = ST_FORMAT_PORTABLE;
        j->flags |= STORE_F_IMAGE_NAMES;
        snprintf(j->source, sizeof j->source, "%.*s", (int)sizeof j->source - 1, res.source);
        j->stage = J_INGEST;
        break;
      }
      if (j->embedded_only || (st == FETCH_FOUND && !j->img.broken))
        image_unnamed(e, j, st, &d); /* the PDB's negative entries say the rest */
      if (st == FETCH_FOUND && j->img.broken) {
        job_finish(e, j, MOD_MALFORMED, j->img.error);
      } else if (st == FETCH_ERROR) {
        char err[256];
        snprintf(err, sizeof err, "no symbol source has %.100s; its image: %.120s",
                 j->m.debug_file, ps_diag_format(&d, msg, sizeof msg));
        job_finish(e, j, MOD_FETCH_ERROR, err);
      } else {
        char err[256];
        snprintf(err, sizeof err, "no symbol source has %.100s%s%.120s", j->m.debug_file,
                 st == FETCH_FOUND ? ", and " : "", st == FETCH_FOUND ? j->img.error : "");
        job_finish(e, j, MOD_MISSING, err);
      }
      return;
    }
    case J_INGEST:
      job_ingest(e, j);
      return;
    }
  }
}

static void *worker_main(void *arg) {
  engine *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (!e->stopping && !e->runq)
      pthread_cond_wait(&e->work_cv, &e->mu);
    if (e->stopping)
      break;
    job *j = e->runq;
    e->runq = j->rnext;
    if (!e->runq)
      e->runq_tail = NULL;
    j->queued = false;
    e->busy++;
    pthread_mutex_unlock(&e->mu);
    job_step(e, j);
    pthread_mutex_lock(&e->mu);
    e->busy--;
  }
  e->workers_alive--;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

/* ---- resolve --------------------------------------------------------------- */

static bool try_cache(engine *e, const module_id *m, mod_handle *out, bool *all_negative) {
  st_format fmts[2];
  int nf = formats_for(m, fmts);
  int negatives = 0;
  for (int i = 0; i < nf; i++) {
    char key[320];
    module_cache_key(m, fmts[i], key, sizeof key);
    pin *p = calloc(1, sizeof *p);
    if (!p)
      return false;
    store_result r = store_get(e->store, key, &p->ent);
    if (r == STORE_HIT) {
      p->kind = 1;
      out->status = MOD_FOUND;
      out->format = fmts[i];
      out->st = p->ent.st;
      out->pin = p;
      out->from_cache = true;
      snprintf(out->source, sizeof out->source, "%s", p->ent.source);
      return true;
    }
    if (r == STORE_NEGATIVE) {
      if (negatives == 0) {
        out->status = p->ent.neg == STORE_NEG_MALFORMED ? MOD_MALFORMED
                      : p->ent.neg == STORE_NEG_FETCH_ERROR ? MOD_FETCH_ERROR
                                                            : MOD_MISSING;
        out->from_cache = true;
        snprintf(out->error, sizeof out->error, "%s", p->ent.error);
      } else if (p->ent.neg == STORE_NEG_MALFORMED) {
        out->status = MOD_MALFORMED;
        snprintf(out->error, sizeof out->error, "%s", p->ent.error);
      }
      negatives++;
    }
    free(p);
  }
  *all_negative = negatives == nf;
  return false;
}

static job *find_job_locked(engine *e, const char *key) {
  for (job *j = e->hash[hash_key(key) & (e->nhash - 1)]; j; j = j->hnext)
    if (!j->done && !strcmp(j->key, key))
      return j;
  return NULL;
}

/* A new job for key, m, in the run queue (mu held); NULL when out of memory. */
static job *job_new_locked(engine *e, const char *key, const module_id *m) {
  job *j = calloc(1, sizeof *j);
  if (!j)
    return NULL;
  snprintf(j->key, sizeof j->key, "%s", key);
  j->m = *m;
  j->e = e;
  j->refs = 1; /* the job's own, until done */
  j->started = engine_now_ms();
  j->next = e->jobs;
  e->jobs = j;
  size_t h = hash_key(key) & (e->nhash - 1);
  j->hnext = e->hash[h];
  e->hash[h] = j;
  e->njobs++;
  return j;
}

/* Waits (mu held, j referenced) until j is done, the deadline passes or the
 * engine drains. */
static void job_wait_locked(engine *e, job *j, uint64_t deadline_ms) {
  while (!j->done && !e->draining) { /* engine_drain wakes us at shutdown */
    if (deadline_ms == 0) {
      pthread_cond_wait(&e->cv, &e->mu);
      continue;
    }
    uint64_t now = engine_now_ms();
    if (now >= deadline_ms)
      break;
    struct timespec ts = deadline_after_ms(deadline_ms - now);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
}

/* true when the cached table in h is a managed one without its image's
 * names and m names an image worth looking for. */
static bool wants_names(engine *e, const module_id *m, const mod_handle *h) {
  const pin *p = h->pin;
  return e->fetch && p && p->kind == 1 && h->st && h->st->ident.managed &&
         !(p->ent.flags & STORE_F_IMAGE_NAMES) && image_worth_a_look(e, m, false);
}

/* The module is cached (pinned in out, kind 1) without its image's names
 * and m names the image: one names job per module fetches the image and
 * puts a named copy of the table in the cache (in memory at once, on disk
 * after: it replaces the nameless one, STORE_F_IMAGE_NAMES).  The request
 * waits for it until its deadline; when the image is late, missing or not
 * readable, it is answered from the nameless table, as before.  A full
 * download queue starts no names job. */
static void resolve_names(engine *e, const module_id *m, uint64_t deadline_ms, mod_handle *out) {
  pin *old = out->pin;
  char key[320];
  module_cache_key(m, out->format, key, sizeof key);
  size_t kl = strlen(key);
  pthread_mutex_lock(&e->mu);
  /* a names job that finished since the cache answered us has put the named
   * table in the cache before it was marked done: with e->mu held, no job
   * running means the cache has it (or no job ran) */
  store_entry named;
  memset(&named, 0, sizeof named);
  if (store_get(e->store, key, &named) == STORE_HIT) {
    if (named.flags & STORE_F_IMAGE_NAMES) {
      pthread_mutex_unlock(&e->mu);
      store_release(e->store, &old->ent);
      old->ent = named;
      out->st = named.st;
      snprintf(out->source, sizeof out->source, "%s", named.source);
      return;
    }
    store_release(e->store, &named);
  }
  snprintf(key + kl, sizeof key - kl, "#names");
  job *j = find_job_locked(e, key);
  if (!j) {
    if (e->draining || e->njobs >= e->queue_cap || !(j = job_new_locked(e, key, m))) {
      pthread_mutex_unlock(&e->mu);
      return;
    }
    j->names_job = true;
    j->stage = J_NAMES;
    j->format = out->format;
    snprintf(j->source, sizeof j->source, "%s", out->source);
    store_pin(e->store, &old->ent, &j->base);
    j->has_base = j->base.st != NULL;
    if (!j->has_base) { /* cannot happen: old is pinned */
      j->done = true;
      e->njobs--;
      job_unref_locked(e, j);
      pthread_mutex_unlock(&e->mu);
      return;
    }
    runq_push_locked(e, j);
  }
  j->refs++;
  job_wait_locked(e, j, deadline_ms);
  pin *p = j->done && j->status == MOD_FOUND && j->has_ent && j->ent.st != old->ent.st
               ? calloc(1, sizeof *p)
               : NULL;
  if (!p) {
    out->names_pending = !j->done;
    job_unref_locked(e, j); /* late, or no names: the nameless table answers */
    pthread_mutex_unlock(&e->mu);
    return;
  }
  p->kind = 2;
  p->j = j; /* keeps our reference */
  out->st = j->ent.st;
  out->pin = p;
  out->from_cache = false; /* this request waited for the image */
  snprintf(out->source, sizeof out->source, "%s", j->source);
  pthread_mutex_unlock(&e->mu);
  store_release(e->store, &old->ent);
  free(old);
}

/* ---- shares ------------------------------------------------------------------ */

engine_share *engine_share_new(engine *e) {
  engine_share *sh = calloc(1, sizeof *sh);
  if (!sh)
    return NULL;
  pthread_mutex_lock(&e->mu);
  sh->id = ++e->share_ids;
  sh->refs = 1;
  pthread_mutex_unlock(&e->mu);
  return sh;
}

void engine_share_end(engine *e, engine_share *sh) {
  if (!sh)
    return;
  pthread_mutex_lock(&e->mu);
  bool last = --sh->refs == 0;
  pthread_mutex_unlock(&e->mu);
  if (last)
    free(sh);
}

enum { ADMIT_OK, ADMIT_QUEUE, ADMIT_SHARE, ADMIT_NEVER };

/* Whether share sh (NULL: none) may start a job now (mu held): ADMIT_OK, or
 * ADMIT_QUEUE / ADMIT_SHARE (wait for room in download_queue / among the
 * request's own jobs), ADMIT_NEVER (it started request_downloads_max). */
static int admit_locked(const engine *e, const engine_share *sh) {
  if (sh && e->share_max && sh->started >= e->share_max)
    return ADMIT_NEVER;
  if (sh && e->share_live && sh->live >= e->share_live)
    return ADMIT_SHARE;
  int cap = e->queue_cap;
  if (sh && sh->live > 0) /* a request with a job leaves some room to newcomers */
    cap -= e->queue_cap / ENGINE_NEWCOMER_SHARE;
  return e->njobs < cap ? ADMIT_OK : ADMIT_QUEUE;
}

/* j was started by share sh (mu held). */
static void share_adopt_locked(engine_share *sh, job *j) {
  if (!sh)
    return;
  j->owner = sh;
  j->lane = sh->id;
  sh->live++;
  sh->started++;
  sh->refs++;
}

/* The error of a module answered MOD_PENDING without a job (admit_locked's
 * why). */
static void no_job_error(const engine *e, int why, char *out, size_t cap) {
  if (why == ADMIT_NEVER)
    snprintf(out, cap,
             "this request started %d downloads already (request_downloads_max); "
             "retry for the rest",
             e->share_max);
  else if (why == ADMIT_SHARE)
    snprintf(out, cap,
             "%d of this request's modules are being fetched already (request_downloads); "
             "retry shortly",
             e->share_live);
  else
    snprintf(out, cap, "%d modules are being fetched already (download_queue); retry shortly",
             e->queue_cap);
}

/* A settled job's answer into out (mu held, j referenced by the caller):
 * true when out is final (the reference is kept by out's pin, or dropped);
 * false when the job found the module but holds no table for it (the
 * reference dropped): the caller looks at the cache for it, without mu. */
static bool job_result_locked(engine *e, job *j, mod_handle *out) {
  mod_status status = j->status;
  out->format = j->format;
  snprintf(out->source, sizeof out->source, "%s", j->source);
  snprintf(out->error, sizeof out->error, "%s", j->error);
  if (status == MOD_FOUND && j->has_ent) {
    pin *p = calloc(1, sizeof *p);
    if (p) {
      p->kind = 2;
      p->j = j; /* keeps the caller's reference */
      out->status = MOD_FOUND;
      out->st = j->ent.st;
      out->pin = p;
      return true;
    }
  }
  job_unref_locked(e, j);
  if (status == MOD_FOUND)
    return false;
  out->status = status;
  return true;
}

/* out for a job that found the module but whose table the caller must read
 * from the cache (job_result_locked false); without mu. */
static void found_from_cache(engine *e, const module_id *m, mod_handle *out) {
  bool neg = false;
  if (try_cache(e, m, out, &neg)) {
    out->from_cache = false; /* the request waited for the download */
    return;
  }
  out->status = MOD_FETCH_ERROR;
  snprintf(out->error, sizeof out->error, "module was fetched but fell out of the cache");
}

/* The job table's key of m's lookup. */
static void job_key(const module_id *m, bool embedded_only, char *key, size_t cap) {
  module_cache_key(m, m->format, key, cap);
  size_t kl = strlen(key);
  snprintf(key + kl, cap - kl, "#%d%s", (int)m->format, embedded_only ? "#embedded" : "");
}

/* One look at the cache, then the module's job (joined or admitted) and its
 * result.  With settled set: false (nothing done, out cleared) when no job
 * runs for the module and a job settled since *settled was read. */
static bool resolve_once(engine *e, engine_share *sh, const module_id *m, uint64_t deadline_ms,
                         mod_handle *out, const uint64_t *settled) {
  memset(out, 0, sizeof *out);
  bool all_negative = false;
  if (try_cache(e, m, out, &all_negative)) {
    if (wants_names(e, m, out))
      resolve_names(e, m, deadline_ms, out);
    return true;
  }
  /* known to be missing: but a request that names the image may find the
   * PDB embedded in it (once: the image's negative entries remember) */
  bool embedded_only = false;
  if (all_negative) {
    if (out->status != MOD_MISSING || m->format == ST_FORMAT_WINDOWS ||
        !image_worth_a_look(e, m, true))
      return true;
    embedded_only = true;
  }
  memset(out, 0, sizeof *out);

  char key[320];
  job_key(m, embedded_only, key, sizeof key);

  pthread_mutex_lock(&e->mu);
  job *j;
  for (;;) {
    j = find_job_locked(e, key);
    if (j)
      break;
    if (e->draining) {
      pthread_mutex_unlock(&e->mu);
      out->status = MOD_FETCH_ERROR;
      snprintf(out->error, sizeof out->error, "the service is shutting down");
      return true;
    }
    if (settled && atomic_load(&e->settled) != *settled) {
      /* a job settled since the look: maybe this module's, now cached */
      pthread_mutex_unlock(&e->mu);
      memset(out, 0, sizeof *out);
      return false;
    }
    int why = admit_locked(e, sh);
    if (why == ADMIT_OK) {
      j = job_new_locked(e, key, m);
      if (!j) {
        pthread_mutex_unlock(&e->mu);
        out->status = MOD_FETCH_ERROR;
        snprintf(out->error, sizeof out->error, "out of memory");
        return true;
      }
      j->embedded_only = embedded_only;
      share_adopt_locked(sh, j);
      runq_push_locked(e, j);
      break;
    }
    /* the queue, or the request's share of it, is full: wait for room until
     * the deadline (never, past the request's downloads in all) */
    uint64_t now = engine_now_ms();
    if (why == ADMIT_NEVER || (deadline_ms != 0 && now >= deadline_ms)) {
      out->status = MOD_PENDING;
      no_job_error(e, why, out->error, sizeof out->error);
      pthread_mutex_unlock(&e->mu);
      return true;
    }
    if (deadline_ms == 0) {
      pthread_cond_wait(&e->cv, &e->mu);
    } else {
      struct timespec ts = deadline_after_ms(deadline_ms - now);
      pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
  }
  j->refs++;
  job_wait_locked(e, j, deadline_ms);
  if (!j->done) {
    job_unref_locked(e, j);
    pthread_mutex_unlock(&e->mu);
    out->status = MOD_PENDING;
    snprintf(out->error, sizeof out->error, "still fetching %.200s; retry shortly", m->debug_file);
    return true;
  }
  bool final = job_result_locked(e, j, out);
  pthread_mutex_unlock(&e->mu);
  if (!final)
    found_from_cache(e, m, out);
  return true;
}

bool engine_resolve_hot(engine *e, const module_id *m, mod_handle *out) {
  memset(out, 0, sizeof *out);
  st_format fmts[2];
  if (formats_for(m, fmts) < 1)
    return false;
  /* what try_cache answers when its first format is a hit */
  char key[320];
  module_cache_key(m, fmts[0], key, sizeof key);
  pin *p = calloc(1, sizeof *p);
  if (!p)
    return false;
  if (store_get_hot(e->store, key, &p->ent) != STORE_HIT) {
    free(p);
    return false;
  }
  p->kind = 1;
  out->status = MOD_FOUND;
  out->format = fmts[0];
  out->st = p->ent.st;
  out->pin = p;
  out->from_cache = true;
  snprintf(out->source, sizeof out->source, "%s", p->ent.source);
  if (wants_names(e, m, out)) { /* the image's names may come: engine_resolve waits for them */
    engine_release(e, out);
    memset(out, 0, sizeof *out);
    return false;
  }
  return true;
}

void engine_resolve(engine *e, const module_id *m, uint64_t deadline_ms, mod_handle *out) {
  engine_resolve_in(e, NULL, m, deadline_ms, out);
}

void engine_resolve_in(engine *e, engine_share *sh, const module_id *m, uint64_t deadline_ms,
                       mod_handle *out) {
  /* A job may finish between the cache's miss and resolve_once's look for
   * it under e->mu: it put its table (or negative entry) in the cache and is
   * no longer found, so a second job would download the module again.  Jobs settle with e->mu
   * held after the cache has their result: when the count of settled jobs
   * moved since it was read before the look, the cache is looked at again
   * (at most ENGINE_RESOLVE_LOOKS times, then a new job as before). */
  for (int looks = 1;; looks++) {
    uint64_t settled = atomic_load(&e->settled);
    if (resolve_once(e, sh, m, deadline_ms, out, looks < ENGINE_RESOLVE_LOOKS ? &settled : NULL))
      return;
  }
}

/* engine_resolve_many's state of one module */
enum { W_LOOK, W_NOJOB, W_JOB, W_FOUND_READ, W_DONE };
typedef struct {
  int state;
  job *j;            /* W_JOB: referenced */
  bool embedded;     /* known missing: only its image's embedded PDB is looked for */
  int why;           /* W_NOJOB: why it has no job yet (admit_locked) */
  int looks;         /* cache looks (at most ENGINE_RESOLVE_LOOKS, then a job as it is) */
  uint64_t seen;     /* e->settled at its last cache look */
} want_state;

/* The cache's answer for w (without mu): true when final (W_DONE), false
 * when a job is needed (out cleared, embedded set when only the image's
 * embedded PDB is worth a look). */
static bool many_look(engine *e, engine_want *w, want_state *s) {
  mod_handle *out = w->out;
  memset(out, 0, sizeof *out);
  s->seen = atomic_load(&e->settled);
  s->looks++;
  bool all_negative = false;
  if (try_cache(e, w->m, out, &all_negative)) {
    if (wants_names(e, w->m, out))
      resolve_names(e, w->m, 1 /* no wait: names_pending */, out);
    return true;
  }
  if (all_negative) {
    if (out->status != MOD_MISSING || w->m->format == ST_FORMAT_WINDOWS ||
        !image_worth_a_look(e, w->m, true))
      return true;
    s->embedded = true;
  }
  memset(out, 0, sizeof *out);
  return false;
}

void engine_resolve_many(engine *e, engine_share *sh, engine_want *w, size_t n,
                         uint64_t deadline_ms) {
  want_state *st = calloc(n ? n : 1, sizeof *st);
  if (!st) { /* one at a time, then */
    for (size_t i = 0; i < n; i++)
      engine_resolve_in(e, sh, w[i].m, deadline_ms, w[i].out);
    return;
  }
  for (size_t i = 0; i < n; i++)
    st[i].state = W_LOOK;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    /* cache looks and reads, without mu */
    bool io = false;
    for (size_t i = 0; i < n && !io; i++)
      io = st[i].state == W_LOOK || st[i].state == W_FOUND_READ;
    if (io) {
      pthread_mutex_unlock(&e->mu);
      for (size_t i = 0; i < n; i++) {
        if (st[i].state == W_LOOK)
          st[i].state = many_look(e, &w[i], &st[i]) ? W_DONE : W_NOJOB;
        else if (st[i].state == W_FOUND_READ) {
          found_from_cache(e, w[i].m, w[i].out);
          st[i].state = W_DONE;
        }
      }
      pthread_mutex_lock(&e->mu);
    }
    bool left = false, again = false;
    for (size_t i = 0; i < n; i++) {
      want_state *s = &st[i];
      mod_handle *out = w[i].out;
      if (s->state == W_JOB) {
        if (!s->j->done) {
          left = true;
          continue;
        }
        bool final = job_result_locked(e, s->j, out);
        s->j = NULL;
        s->state = final ? W_DONE : W_FOUND_READ;
        again |= !final;
        continue;
      }
      if (s->state != W_NOJOB)
        continue;
      char key[320];
      job_key(w[i].m, s->embedded, key, sizeof key);
      job *j = find_job_locked(e, key);
      if (j) { /* joined: someone's job, running */
        j->refs++;
        s->j = j;
        s->state = W_JOB;
        left = true;
        continue;
      }
      if (e->draining) {
        out->status = MOD_FETCH_ERROR;
        snprintf(out->error, sizeof out->error, "the service is shutting down");
        s->state = W_DONE;
        continue;
      }
      s->why = admit_locked(e, sh);
      if (s->why == ADMIT_NEVER) {
        out->status = MOD_PENDING;
        no_job_error(e, s->why, out->error, sizeof out->error);
        s->state = W_DONE;
        continue;
      }
      if (s->why != ADMIT_OK) {
        left = true; /* waits for room */
        continue;
      }
      if (atomic_load(&e->settled) != s->seen && s->looks < ENGINE_RESOLVE_LOOKS) {
        /* a job settled since its look: maybe its own, now in the cache */
        s->state = W_LOOK;
        again = true;
        continue;
      }
      j = job_new_locked(e, key, w[i].m);
      if (!j) {
        out->status = MOD_FETCH_ERROR;
        snprintf(out->error, sizeof out->error, "out of memory");
        s->state = W_DONE;
        continue;
      }
      j->embedded_only = s->embedded;
      share_adopt_locked(sh, j);
      runq_push_locked(e, j);
      j->refs++;
      s->j = j;
      s->state = W_JOB;
      left = true;
    }
    if (again)
      continue;
    if (!left || e->draining)
      break;
    uint64_t now = engine_now_ms();
    if (deadline_ms != 0 && now >= deadline_ms)
      break;
    if (deadline_ms == 0) {
      pthread_cond_wait(&e->cv, &e->mu);
    } else {
      struct timespec ts = deadline_after_ms(deadline_ms - now);
      pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
  }
  /* what is not settled by the deadline: pending (its job, if any, goes on) */
  for (size_t i = 0; i < n; i++) {
    want_state *s = &st[i];
    mod_handle *out = w[i].out;
    if (s->state == W_JOB) {
      job_unref_locked(e, s->j);
      out->status = MOD_PENDING;
      snprintf(out->error, sizeof out->error, "still fetching %.200s; retry shortly",
               w[i].m->debug_file);
    } else if (s->state == W_NOJOB) {
      out->status = MOD_PENDING;
      no_job_error(e, e->draining ? ADMIT_QUEUE : s->why, out->error, sizeof out->error);
    }
  }
  pthread_mutex_unlock(&e->mu);
  free(st);
}

void engine_release(engine *e, mod_handle *h) {
  pin *p = h->pin;
  if (p) {
    if (p->kind == 1) {
      store_release(e->store, &p->ent);
    } else if (p->kind == 2) {
      pthread_mutex_lock(&e->mu);
      job_unref_locked(e, p->j);
      pthread_mutex_unlock(&e->mu);
    }
    free(p);
  }
  h->pin = NULL;
  h->st = NULL;
}

bool engine_ready(engine *e) { return e && e->store != NULL; }

bool engine_cached(engine *e, const module_id *m, st_format fmt, bool image_names) {
  module_id copy = *m;
  copy.format = fmt;
  st_format fmts[2];
  int nf = formats_for(&copy, fmts);
  for (int i = 0; i < nf; i++) {
    char key[320];
    module_cache_key(m, fmts[i], key, sizeof key);
    store_entry ent;
    memset(&ent, 0, sizeof ent);
    if (store_get(e->store, key, &ent) == STORE_HIT) {
      bool named = (ent.flags & STORE_F_IMAGE_NAMES) != 0;
      store_release(e->store, &ent);
      if (named || !image_names)
        return true;
    }
  }
  return false;
}

ps_err engine_ingest(engine *e, const module_id *m, st_format fmt, const symtab *st,
                     const char *source, bool image_names, ps_diag *diag) {
  char key[320];
  module_cache_key(m, fmt, key, sizeof key);
  return store_put_flags(e->store, key, st, source, image_names ? STORE_F_IMAGE_NAMES : 0,
                         diag);
}

bool engine_peek(engine *e, const module_id *m, mod_handle *out) {
  memset(out, 0, sizeof *out);
  bool all_negative = false;
  if (try_cache(e, m, out, &all_negative))
    return true;
  mod_status neg = out->status;
  char neg_error[sizeof out->error];
  snprintf(neg_error, sizeof neg_error, "%s", out->error);
  memset(out, 0, sizeof *out);
  bool running = false;
  pthread_mutex_lock(&e->mu);
  for (job *j = e->jobs; j && !running; j = j->next)
    running = !j->done && memcmp(j->m.guid, m->guid, 16) == 0 && j->m.age == m->age &&
              strcasecmp(j->m.debug_file, m->debug_file) == 0 &&
              (m->format == ST_FORMAT_UNKNOWN || j->m.format == ST_FORMAT_UNKNOWN ||
               j->m.format == m->format);
  pthread_mutex_unlock(&e->mu);
  if (running) {
    out->status = MOD_PENDING;
    snprintf(out->error, sizeof out->error, "a download of this module is running");
    return true;
  }
  if (all_negative) {
    out->status = neg;
    out->from_cache = true;
    snprintf(out->error, sizeof out->error, "%s", neg_error);
    return true;
  }
  return false;
}

uint64_t engine_cache_bytes(engine *e) {
  if (!e)
    return 0;
  char shm[1100];
  snprintf(shm, sizeof shm, "%s-shm", e->db_path);
  return store_files_bytes(e->cache_dir) + file_size(shm) + fetch_tmp_bytes(e->fetch);
}

void engine_get_stats(engine *e, engine_stats *out) {
  memset(out, 0, sizeof *out);
  if (!e || !e->store)
    return;
  store_counters c;
  store_get_counters(e->store, &c);
  out->module_reads = c.module_reads;
  out->negative_memory = c.neg_memory;
  out->negative_memory_hits = c.neg_memory_hits;
  out->hot_modules = c.hot_modules;
  out->hot_bytes = c.hot_bytes;
  pthread_mutex_lock(&e->pq_mu);
  out->persist_queued = e->pq_n;
  out->persist_queued_bytes = e->pq_bytes;
  out->persist_saved = e->pq_saved;
  out->persist_failed = e->pq_failed;
  out->persist_dropped = e->pq_dropped;
  pthread_mutex_unlock(&e->pq_mu);
  out->download_bytes = fetch_tmp_bytes(e->fetch);
}
