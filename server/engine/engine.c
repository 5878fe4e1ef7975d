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
 *     IMAGE  the same for the PE when the module names one (.NET method names)
 *     INGEST store_put_take (one transaction)
 *     done   or a negative entry, whose TTL depends on the failure
 *   Waiters that time out get MOD_PENDING; the job goes on and the retry is
 *   answered from the cache.
 *
 * Locking: e->mu guards the job table, the run queue and job states.  The
 * fetcher's wake callback is called with the fetcher's lock held and takes
 * e->mu, so e->mu is never held while calling into the fetcher.
 */
#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"
#include "filemap.h"
#include "log.h"
#include "pe.h"
#include "store.h"

#define ENGINE_DEFAULT_MAX_PDB ((uint64_t)4 << 30)
#define ENGINE_DEFAULT_CACHE_MAX ((uint64_t)2 << 30) /* the store's default cap */
#define ENGINE_CLOSE_GRACE_MS 10000u
#define ENGINE_WORKER_STOP_MS 5000u
#define ENGINE_FAILS_MAX 4096 /* modules whose consecutive failures are remembered */

enum { J_START, J_PDB, J_IMAGE, J_INGEST };

/* The image step of a managed module: the image must be the one the module
 * names (fetch_verify_identity), then its method names go into the table
 * the PDB gave. */
typedef struct {
  fetch_identity id;
  symtab *st;
} image_ctx;

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
  bool made_room;   /* the cache evicted for this job's download once already */
  store_entry ent;  /* a table the cache could not keep, pinned for the waiters */
  bool has_ent;
  int refs;         /* waiters + the job itself until done */
  struct engine *e;
} job;

typedef struct {
  int kind;         /* 1: store entry, 2: job-owned table */
  store_entry ent;
  job *j;
} pin;

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
  int queue_cap;
  pthread_t *workers;
  int nworkers, workers_alive, busy;
  bool draining;           /* no new jobs; waiters stop waiting */
  bool stopping;           /* workers exit */
  fail_rec *fails;
  size_t nfails;
};

uint64_t engine_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The CLOCK_REALTIME time wait_ms from now, for pthread_cond_timedwait. */
static struct timespec abs_after(uint64_t wait_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(wait_ms / 1000);
  ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
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
 * journals and shared-memory file (at least 1 MiB, so a full cache still lets
 * a small module through to be stored after an eviction).  Refreshed as each
 * job starts and after each ingest. */
static void refresh_disk_budget(engine *e) {
  if (!e->fetch)
    return;
  char shm[1100];
  snprintf(shm, sizeof shm, "%s-shm", e->db_path);
  uint64_t used = store_files_bytes(e->cache_dir) + file_size(shm);
  uint64_t left = used < e->cache_max ? e->cache_max - used : 0;
  if (left < ((uint64_t)1 << 20))
    left = (uint64_t)1 << 20;
  fetch_set_disk_budget(e->fetch, left);
}

/* ---- open/close ------------------------------------------------------------ */

static void *worker_main(void *arg);

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
  e->nworkers = cfg->download_workers > 0 ? cfg->download_workers : 4;
  e->cache_max = cfg->cache_max_bytes ? cfg->cache_max_bytes : ENGINE_DEFAULT_CACHE_MAX;
  if (!e->cfg.max_pdb_bytes)
    e->cfg.max_pdb_bytes = ENGINE_DEFAULT_MAX_PDB;
  /* no single download larger than the cache may hold */
  if (e->cfg.max_pdb_bytes > e->cache_max)
    e->cfg.max_pdb_bytes = e->cache_max;
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
  ps_err rc = store_open(&sc, &e->store, diag);
  if (rc != PS_E_OK) {
    engine_close(e);
    return rc;
  }
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
  if (j->pdb.st) {
    st_free(j->pdb.st);
    free(j->pdb.st);
  }
  free(j);
}

void engine_close(engine *e) {
  if (!e)
    return;
  /* give running downloads a grace period; a download that outlasts it is
   * abandoned with the process (the cache is crash-safe), rather than letting
   * a slow upstream hold a SIGTERM for minutes */
  pthread_mutex_lock(&e->mu);
  e->draining = true;
  pthread_cond_broadcast(&e->cv);
  uint64_t until = engine_now_ms() + ENGINE_CLOSE_GRACE_MS;
  while (e->njobs > 0 && e->workers_alive > 0) {
    uint64_t now = engine_now_ms();
    if (now >= until)
      break;
    struct timespec ts = abs_after(until - now);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
  int left = e->njobs;
  e->stopping = true;
  pthread_cond_broadcast(&e->work_cv);
  until = engine_now_ms() + ENGINE_WORKER_STOP_MS;
  while (e->workers_alive > 0) {
    uint64_t now = engine_now_ms();
    if (now >= until)
      break;
    struct timespec ts = abs_after(until - now);
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
    job_free(e, j);
    j = next;
  }
  if (e->store)
    store_close(e->store);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  pthread_cond_destroy(&e->work_cv);
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

static bool verify_image(void *vctx, const fetch_file *file, ps_diag *diag) {
  image_ctx *c = vctx;
  if (!fetch_verify_identity(&c->id, file, diag))
    return false;
  filemap fm;
  if (filemap_open(&fm, file->path, c->id.max_bytes, diag) != PS_E_OK)
    return false;
  ps_diag d;
  ps_diag_clear(&d);
  pe_method_names(fm.data, fm.len, NULL, c->st, &d);
  st_finish(c->st);
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
  if (status == MOD_MISSING && !j->error[0])
    snprintf(j->error, sizeof j->error, "no symbol source has %.200s", j->m.debug_file);
  if (e->fetch) { /* offline: remember nothing */
    char key[320];
    module_cache_key(&j->m, fmts[0], key, sizeof key);
    if (status == MOD_FETCH_ERROR)
      ttl = error_ttl(e, key, true);
    else
      error_ttl(e, key, false);
    if (status == MOD_MALFORMED && j->pdb.suspect)
      ttl = e->cfg.negative_suspect_ttl;
    if (status != MOD_FOUND) {
      /* missing and clean malformed answers keep the store's TTLs (ttl 0) */
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
  pthread_cond_broadcast(&e->cv);
  job_unref_locked(e, j);
  pthread_mutex_unlock(&e->mu);
}

static void job_ingest(engine *e, job *j) {
  char key[320];
  module_cache_key(&j->m, j->format, key, sizeof key);
  ps_diag sd;
  ps_diag_clear(&sd);
  /* the table moves into the hot set; no read-back from SQLite */
  store_entry ent;
  memset(&ent, 0, sizeof ent);
  ps_err prc = store_put_take(e->store, key, j->pdb.st, j->source, &ent, &sd);
  free(j->pdb.st);
  j->pdb.st = NULL;
  if (prc != PS_E_OK && ent.st) {
    /* answer from the parsed table anyway; the cache could not keep it */
    char msg[256];
    log_line l;
    log_begin(&l, LOG_WARN, "cache did not take module");
    log_str(&l, "key", key);
    log_str(&l, "error", ps_diag_format(&sd, msg, sizeof msg));
    log_end(&l);
    pthread_mutex_lock(&e->mu);
    j->ent = ent;
    j->has_ent = true;
    pthread_mutex_unlock(&e->mu);
  } else if (ent.st) {
    store_release(e->store, &ent);
  }
  refresh_disk_budget(e);
  job_finish(e, j, MOD_FOUND, NULL);
}

/* A download did not fit in what the cache's cap leaves: the cache evicts
 * least recently used modules to give it room (and a little more), once per
 * job.  true when the job should look the module up again. */
static bool make_room(engine *e, job *j, uint64_t need) {
  j->made_room = true;
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
  refresh_disk_budget(e);
  return freed > 0 || rc == PS_E_OK;
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
      refresh_disk_budget(e);
      j->pdb = (fetch_identity){.m = &j->m, .fmt = j->m.format, .max_bytes = e->cfg.max_pdb_bytes,
                                .keep = true};
      j->op = fetch_op_new(e->fetch, &j->m, false, j->m.format, job_wake, j, &d);
      if (!j->op) {
        job_finish(e, j, MOD_FETCH_ERROR, ps_diag_format(&d, msg, sizeof msg));
        return;
      }
      j->stage = J_PDB;
      break;
    case J_PDB: {
      fetch_status st = fetch_op_step(j->op, fetch_verify_identity, &j->pdb, &res, &d);
      if (st == FETCH_PENDING)
        return;
      uint64_t need = st == FETCH_ERROR ? fetch_op_room_needed(j->op) : 0;
      fetch_op_free(j->op);
      j->op = NULL;
      if (need && !j->made_room && make_room(e, j, need)) {
        j->stage = J_START; /* once more, with room */
        break;
      }
      if (st == FETCH_FOUND && j->pdb.st) {
        unlink(res.path);
        j->format = res.format;
        snprintf(j->source, sizeof j->source, "%.*s", (int)sizeof j->source - 1, res.source);
        if (j->m.code_file[0] && j->m.has_code_id && j->pdb.st->ident.managed) {
          j->img = (image_ctx){{.m = &j->m, .image = true, .max_bytes = e->cfg.max_pdb_bytes},
                               j->pdb.st};
          j->op = fetch_op_new(e->fetch, &j->m, true, ST_FORMAT_UNKNOWN, job_wake, j, &d);
          j->stage = j->op ? J_IMAGE : J_INGEST;
        } else {
          j->stage = J_INGEST;
        }
        break;
      }
      if (st == FETCH_FOUND) /* accepted without a table: cannot happen */
        unlink(res.path);
      if (j->pdb.malformed)
        job_finish(e, j, MOD_MALFORMED, j->pdb.error);
      else if (st == FETCH_ERROR)
        job_finish(e, j, MOD_FETCH_ERROR, ps_diag_format(&d, msg, sizeof msg));
      else
        job_finish(e, j, MOD_MISSING, NULL);
      return;
    }
    case J_IMAGE: {
      fetch_status st = fetch_op_step(j->op, verify_image, &j->img, &res, &d);
      if (st == FETCH_PENDING)
        return;
      fetch_op_free(j->op);
      j->op = NULL;
      if (st == FETCH_FOUND)
        unlink(res.path);
      j->stage = J_INGEST;
      break;
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

void engine_resolve(engine *e, const module_id *m, uint64_t deadline_ms, mod_handle *out) {
  memset(out, 0, sizeof *out);
  bool all_negative = false;
  if (try_cache(e, m, out, &all_negative))
    return;
  if (all_negative)
    return;
  memset(out, 0, sizeof *out);

  char key[320];
  module_cache_key(m, m->format, key, sizeof key);
  size_t kl = strlen(key);
  snprintf(key + kl, sizeof key - kl, "#%d", (int)m->format);

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
      return;
    }
    if (e->njobs < e->queue_cap) {
      j = calloc(1, sizeof *j);
      if (!j) {
        pthread_mutex_unlock(&e->mu);
        out->status = MOD_FETCH_ERROR;
        snprintf(out->error, sizeof out->error, "out of memory");
        return;
      }
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
      runq_push_locked(e, j);
      break;
    }
    /* the queue is full: wait for room until the deadline */
    uint64_t now = engine_now_ms();
    if (deadline_ms != 0 && now >= deadline_ms) {
      int cap = e->queue_cap;
      pthread_mutex_unlock(&e->mu);
      out->status = MOD_PENDING;
      snprintf(out->error, sizeof out->error,
               "%d modules are being fetched already (download_queue); retry shortly", cap);
      return;
    }
    if (deadline_ms == 0) {
      pthread_cond_wait(&e->cv, &e->mu);
    } else {
      struct timespec ts = abs_after(deadline_ms - now);
      pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
  }
  j->refs++;
  while (!j->done && !e->draining) { /* engine_drain wakes us at shutdown */
    if (deadline_ms == 0) {
      pthread_cond_wait(&e->cv, &e->mu);
      continue;
    }
    uint64_t now = engine_now_ms();
    if (now >= deadline_ms)
      break;
    struct timespec ts = abs_after(deadline_ms - now);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
  if (!j->done) {
    job_unref_locked(e, j);
    pthread_mutex_unlock(&e->mu);
    out->status = MOD_PENDING;
    snprintf(out->error, sizeof out->error, "still fetching %.200s; retry shortly", m->debug_file);
    return;
  }
  mod_status status = j->status;
  out->format = j->format;
  snprintf(out->source, sizeof out->source, "%s", j->source);
  snprintf(out->error, sizeof out->error, "%s", j->error);
  if (status == MOD_FOUND && j->has_ent) {
    pin *p = calloc(1, sizeof *p);
    if (p) {
      p->kind = 2;
      p->j = j; /* keeps our reference */
      out->status = MOD_FOUND;
      out->st = j->ent.st;
      out->pin = p;
      pthread_mutex_unlock(&e->mu);
      return;
    }
  }
  job_unref_locked(e, j);
  pthread_mutex_unlock(&e->mu);
  if (status == MOD_FOUND) {
    bool neg = false;
    if (try_cache(e, m, out, &neg)) {
      out->from_cache = false; /* this request waited for the download */
      return;
    }
    out->status = MOD_FETCH_ERROR;
    snprintf(out->error, sizeof out->error, "module was fetched but fell out of the cache");
    return;
  }
  out->status = status;
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

bool engine_cached(engine *e, const module_id *m, st_format fmt) {
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
      store_release(e->store, &ent);
      return true;
    }
  }
  return false;
}

ps_err engine_ingest(engine *e, const module_id *m, st_format fmt, const symtab *st,
                     const char *source, ps_diag *diag) {
  char key[320];
  module_cache_key(m, fmt, key, sizeof key);
  return store_put(e->store, key, st, source, diag);
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

uint64_t engine_cache_bytes(engine *e) { return e ? store_files_bytes(e->cache_dir) : 0; }
