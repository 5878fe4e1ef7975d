/*
 * engine.c - module resolution: cache first, then one download per module.
 *
 *   engine_resolve(m)
 *     -> store_get(key) for each format to try     HIT: answer from memory/SQLite
 *     -> otherwise join (or start) the module's job and wait until the deadline
 *   job thread (detached; at most max_parallel_downloads fetch at once)
 *     -> fetch_pdb per format; the verify callback (fetch_verify_identity)
 *        parses the download fully and checks GUID and age, so a wrong file is
 *        refused and the next source tried; the parsed table is kept
 *     -> fetch_image when the module names a PE (full .NET method names)
 *     -> store_put (one transaction), or a negative entry
 *   Waiters that time out get MOD_PENDING; the job goes on and the retry is
 *   answered from the cache.
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
#include "pe.h"
#include "store.h"

#define ENGINE_DEFAULT_MAX_PDB ((uint64_t)4 << 30)
#define ENGINE_CLOSE_GRACE_MS 10000u

typedef struct job {
  struct job *next;
  char key[320];
  module_id m;
  bool done;
  mod_status status;
  st_format format;
  char source[256];
  char error[256];
  store_entry ent;  /* a table the cache could not keep, pinned for the waiters */
  bool has_ent;
  int refs;         /* waiters + the worker */
  struct engine *e;
} job;

typedef struct {
  int kind;         /* 1: store entry, 2: job-owned table */
  store_entry ent;
  job *j;
} pin;

struct engine {
  engine_config cfg;
  char *cache_dir, *symbol_path, *tmp_dir;
  store *store;
  fetcher *fetch;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *jobs;
  int running;
  int downloading;
  int max_parallel;
  bool closing;
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

ps_err engine_open(const engine_config *cfg, engine **out, ps_diag *diag) {
  *out = NULL;
  engine *e = calloc(1, sizeof *e);
  if (!e)
    return ps_diag_set(diag, PS_E_NOMEM, "engine", (size_t)-1, NULL);
  e->cfg = *cfg;
  e->cache_dir = dup_or_null(cfg->cache_dir ? cfg->cache_dir : ".pdbsym-cache");
  e->symbol_path = dup_or_null(cfg->symbol_path);
  e->max_parallel = cfg->max_parallel_downloads > 0 ? cfg->max_parallel_downloads : 4;
  if (!e->cfg.max_pdb_bytes)
    e->cfg.max_pdb_bytes = ENGINE_DEFAULT_MAX_PDB;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  size_t n = strlen(e->cache_dir) + 16;
  e->tmp_dir = malloc(n);
  if (!e->cache_dir || !e->tmp_dir) {
    engine_close(e);
    return ps_diag_set(diag, PS_E_NOMEM, "engine", (size_t)-1, NULL);
  }
  snprintf(e->tmp_dir, n, "%s/tmp", e->cache_dir);
  /* the cache folder and its download area; an existing folder is fine */
  if ((mkdir(e->cache_dir, 0755) != 0 && errno != EEXIST) ||
      (mkdir(e->tmp_dir, 0700) != 0 && errno != EEXIST)) {
    int err = errno;
    ps_diag_set(diag, PS_E_IO, "cache folder", (size_t)-1, "%s: %s", e->cache_dir, strerror(err));
    engine_close(e);
    return PS_E_IO;
  }

  store_config sc = {0};
  sc.dir = e->cache_dir;
  sc.max_bytes = cfg->cache_max_bytes;
  sc.mem_max_bytes = cfg->mem_max_bytes;
  ps_err rc = store_open(&sc, &e->store, diag);
  if (rc != PS_E_OK) {
    engine_close(e);
    return rc;
  }
  if (!cfg->offline) {
    fetch_config fc = {0};
    fc.symbol_path = e->symbol_path;
    fc.tmp_dir = e->tmp_dir;
    fc.max_download_bytes = e->cfg.max_pdb_bytes;
    rc = fetch_open(&fc, &e->fetch, diag);
    if (rc != PS_E_OK) {
      engine_close(e);
      return rc;
    }
  }
  *out = e;
  return PS_E_OK;
}

void engine_close(engine *e) {
  if (!e)
    return;
  /* give running downloads a grace period; a download that outlasts it is
   * abandoned with the process (the cache is crash-safe), rather than letting
   * a slow upstream hold a SIGTERM for minutes */
  pthread_mutex_lock(&e->mu);
  e->closing = true;
  uint64_t until = engine_now_ms() + ENGINE_CLOSE_GRACE_MS;
  while (e->running > 0) {
    uint64_t now = engine_now_ms();
    if (now >= until)
      break;
    struct timespec ts = abs_after(until - now);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
  bool abandoned = e->running > 0;
  pthread_mutex_unlock(&e->mu);
  if (abandoned) {
    fprintf(stderr, "{\"level\":\"warn\",\"msg\":\"shutting down with downloads still running\",\"downloads\":%d}\n",
            e->running);
    return; /* the workers still use the store and the fetcher: leave them */
  }
  /* jobs still referenced by nobody are freed; none can be waited on now */
  job *j = e->jobs;
  while (j) {
    job *next = j->next;
    if (j->has_ent)
      store_release(e->store, &j->ent);
    free(j);
    j = next;
  }
  if (e->fetch)
    fetch_close(e->fetch);
  if (e->store)
    store_close(e->store);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e->cache_dir);
  free(e->symbol_path);
  free(e->tmp_dir);
  free(e);
}

/* ---- the worker ---------------------------------------------------------- */

/* The image step of a managed module: the image must be the one the module
 * names (fetch_verify_identity), then its method names go into the table
 * the PDB gave. */
typedef struct {
  fetch_identity id;
  symtab *st;
} image_ctx;

static bool verify_image(void *vctx, const char *path, ps_diag *diag) {
  image_ctx *c = vctx;
  if (!fetch_verify_identity(&c->id, path, diag))
    return false;
  filemap fm;
  if (filemap_open(&fm, path, c->id.max_bytes, diag) != PS_E_OK)
    return false;
  ps_diag d;
  ps_diag_clear(&d);
  pe_method_names(fm.data, fm.len, NULL, c->st, &d);
  st_finish(c->st);
  filemap_close(&fm);
  return true;
}

static void slot_acquire(engine *e) {
  pthread_mutex_lock(&e->mu);
  while (e->downloading >= e->max_parallel)
    pthread_cond_wait(&e->cv, &e->mu);
  e->downloading++;
  pthread_mutex_unlock(&e->mu);
}

static void slot_release(engine *e) {
  pthread_mutex_lock(&e->mu);
  e->downloading--;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

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
  if (j->has_ent)
    store_release(e->store, &j->ent);
  free(j);
}

static void run_job(job *j) {
  engine *e = j->e;
  uint64_t started = engine_now_ms();
  const module_id *m = &j->m;
  st_format fmts[2];
  int nf = formats_for(m, fmts);
  bool any_error = false, any_malformed = false;
  char err[256] = "";
  mod_status status = MOD_MISSING;
  for (int i = 0; i < nf && status != MOD_FOUND; i++) {
    fetch_identity c = {.m = m, .fmt = fmts[i], .max_bytes = e->cfg.max_pdb_bytes, .keep = true};
    char path[1024], source[256] = "";
    ps_diag d;
    ps_diag_clear(&d);
    fetch_status fs = FETCH_NOT_FOUND;
    if (e->fetch) {
      slot_acquire(e);
      fs = fetch_pdb(e->fetch, m, fmts[i], fetch_verify_identity, &c, path, sizeof path, source,
                     sizeof source, &d);
      slot_release(e);
    }
    if (fs == FETCH_FOUND && c.st) {
      unlink(path);
      if (m->code_file[0] && m->has_code_id && c.st->ident.managed) {
        char ipath[1024], isrc[256];
        ps_diag id;
        ps_diag_clear(&id);
        image_ctx ic = {{.m = m, .image = true, .max_bytes = e->cfg.max_pdb_bytes}, c.st};
        slot_acquire(e);
        if (fetch_image(e->fetch, m, verify_image, &ic, ipath, sizeof ipath, isrc, sizeof isrc,
                        &id) == FETCH_FOUND)
          unlink(ipath);
        slot_release(e);
      }
      char key[320];
      module_cache_key(m, fmts[i], key, sizeof key);
      ps_diag sd;
      ps_diag_clear(&sd);
      /* the table moves into the hot set; no read-back from SQLite */
      store_entry ent;
      memset(&ent, 0, sizeof ent);
      ps_err prc = store_put_take(e->store, key, c.st, source, &ent, &sd);
      free(c.st);
      c.st = NULL;
      if (prc != PS_E_OK && ent.st) {
        /* answer from the parsed table anyway; the cache could not keep it */
        char msg[256];
        fprintf(stderr, "{\"level\":\"warn\",\"msg\":\"cache did not take module\",\"key\":\"%s\",\"error\":\"%s\"}\n",
                key, ps_diag_format(&sd, msg, sizeof msg));
        pthread_mutex_lock(&e->mu);
        j->ent = ent;
        j->has_ent = true;
        pthread_mutex_unlock(&e->mu);
      } else if (ent.st) {
        store_release(e->store, &ent);
      }
      status = MOD_FOUND;
      j->format = fmts[i];
      snprintf(j->source, sizeof j->source, "%s", source);
    } else if (fs == FETCH_ERROR) {
      any_error = true;
      char msg[256];
      snprintf(err, sizeof err, "%s", ps_diag_format(&d, msg, sizeof msg));
    }
    if (c.malformed) {
      any_malformed = true;
      snprintf(err, sizeof err, "%s", c.error);
    }
    if (c.st) {
      st_free(c.st);
      free(c.st);
    }
  }
  if (status != MOD_FOUND) {
    status = any_malformed ? MOD_MALFORMED : any_error ? MOD_FETCH_ERROR : MOD_MISSING;
    if (status == MOD_MISSING)
      snprintf(err, sizeof err, "no symbol source has %.200s", m->debug_file);
    if (status != MOD_FETCH_ERROR && e->fetch) { /* offline: remember nothing */
      for (int i = 0; i < nf; i++) {
        char key[320];
        module_cache_key(m, fmts[i], key, sizeof key);
        store_put_negative(e->store, key,
                           status == MOD_MALFORMED ? STORE_NEG_MALFORMED : STORE_NEG_MISSING, err);
      }
    }
  }
  if (e->cfg.on_download && e->fetch)
    e->cfg.on_download((int)status, (double)(engine_now_ms() - started) / 1000.0);
  pthread_mutex_lock(&e->mu);
  j->status = status;
  snprintf(j->error, sizeof j->error, "%s", err);
  j->done = true;
  job_unref_locked(e, j);
  e->running--;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

static void *job_thread(void *arg) {
  run_job(arg);
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
  job *j = e->jobs;
  while (j && (j->done || strcmp(j->key, key) != 0))
    j = j->next;
  if (!j) {
    if (e->closing) {
      pthread_mutex_unlock(&e->mu);
      out->status = MOD_FETCH_ERROR;
      snprintf(out->error, sizeof out->error, "the service is shutting down");
      return;
    }
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
    j->refs = 1; /* the worker's */
    j->next = e->jobs;
    e->jobs = j;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    e->running++;
    if (pthread_create(&t, &attr, job_thread, j) != 0) {
      e->running--;
      j->done = true;
      j->status = MOD_FETCH_ERROR;
      snprintf(j->error, sizeof j->error, "could not start a download thread");
    }
    pthread_attr_destroy(&attr);
  }
  j->refs++;
  while (!j->done && !e->closing) { /* engine_drain wakes us at shutdown */
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

void engine_drain(engine *e) {
  if (!e)
    return;
  pthread_mutex_lock(&e->mu);
  e->closing = true;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
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

uint64_t engine_cache_bytes(engine *e) { return e ? store_files_bytes(e->cache_dir) : 0; }

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
