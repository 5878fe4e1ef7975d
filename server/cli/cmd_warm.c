/*
 * cmd_warm.c - `pdbsym warm`: fill the cache ahead of traffic.
 *
 * Sources, in any mix:
 *   --modules FILE   "debug_file debug_id [format]" per line, or a JSON modules
 *                    array ({"modules": [...]} or [...]); "-" reads standard input
 *   DIR or FILE      walked recursively.  PE images: every CodeView entry names
 *                    a PDB to fetch (several in ReadyToRun images); an embedded
 *                    Portable PDB is stored directly.  PDB files (Windows or
 *                    Portable, also gzip'ed as NAME.pdb.gz) are stored with no
 *                    network; a managed Windows PDB whose image is in the same
 *                    walk gets the image's full method names.
 *
 * Two passes, each on --jobs threads: first the local files (so that a PDB
 * lying next to its image is never downloaded), then the modules to resolve
 * through the engine (symbol path), each counted once.  On a terminal a
 * progress bar is drawn on stderr; the report (a line per module, the summary)
 * goes to stdout.
 *
 * Ctrl-C (SIGINT, or SIGTERM) stops taking new work and lets the modules in
 * progress finish; a second one quits at once.  Every module is stored in its
 * own SQLite transaction, so the cache is consistent either way and running
 * the same command again resumes: what is cached is counted "already cached".
 */
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zlib.h>

#include "cli.h"
#include "engine.h"
#include "fetch.h"
#include "filemap.h"
#include "loader.h"
#include "log.h"
#include "module.h"
#include "pe.h"
#include "settings.h"
#include "symfile.h"

#define WARM_MAX_JOBS 64

typedef enum { TASK_RESOLVE, TASK_FILE } task_kind;

typedef struct {
  task_kind kind;
  module_id m;     /* TASK_RESOLVE */
  char *path;      /* TASK_FILE: the file; malloc'd */
  bool ingest;     /* TASK_FILE: a symbol file to store (set by scan) */
} task;

typedef struct {
  task *v;
  size_t n, cap;
} task_list;

/* A PE image seen in the walk, by the key of each PDB it names. */
typedef struct {
  char key[300];
  char *path; /* borrowed from the file task list */
  module_id m; /* code_file and code id set */
} image_ref;

typedef struct {
  image_ref *v;
  size_t n, cap;
} image_list;

typedef struct {
  char (*v)[300];
  size_t n, cap;
} key_set;

typedef struct {
  engine *eng;
  const task_list *tasks;   /* the pass being worked on */
  const image_list *images;
  key_set stored;           /* keys stored from local files in this run */
  size_t next;
  size_t done, total;       /* progress over both passes */
  size_t found, cached, missing, failed;
  int active;               /* workers running */
  uint64_t bytes;
  uint64_t started_ms;
  bool tty, quiet;
  pthread_mutex_t mu;
} warm_state;

static volatile sig_atomic_t warm_interrupted;

static void on_signal(int sig) {
  (void)sig;
  if (warm_interrupted) {
    static const char msg[] = "\nwarm: stopped at once; run the same command again to resume\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(130);
  }
  warm_interrupted = 1;
}

static bool push(task_list *l, const task *t) {
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 64;
    task *nv = realloc(l->v, nc * sizeof *nv);
    if (!nv)
      return false;
    l->v = nv;
    l->cap = nc;
  }
  l->v[l->n++] = *t;
  return true;
}

static bool key_has(const key_set *s, const char *key) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->v[i], key))
      return true;
  return false;
}

/* Adds key unless present; false when present or out of memory. */
static bool key_add(key_set *s, const char *key) {
  if (key_has(s, key))
    return false;
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    char(*nv)[300] = realloc(s->v, nc * sizeof *nv);
    if (!nv)
      return false;
    s->v = nv;
    s->cap = nc;
  }
  snprintf(s->v[s->n++], 300, "%s", key);
  return true;
}

static void resolve_key(const module_id *m, char *key, size_t cap) {
  module_cache_key(m, m->format, key, cap);
}

/* ---- sources -------------------------------------------------------------- */

static int add_module(task_list *l, const char *file, const char *id, const char *fmt,
                      const char *where) {
  task t;
  memset(&t, 0, sizeof t);
  t.kind = TASK_RESOLVE;
  const char *why = NULL;
  if (!file || !id) {
    fprintf(stderr, "pdbsym warm: %s: a module needs debug_file and debug_id\n", where);
    return -1;
  }
  if (fmt && !strcmp(fmt, "windows")) {
    t.m.format = ST_FORMAT_WINDOWS;
  } else if (fmt && !strcmp(fmt, "portable")) {
    t.m.format = ST_FORMAT_PORTABLE;
  } else if (fmt) {
    fprintf(stderr, "pdbsym warm: %s: format must be windows or portable, not '%s'\n", where,
            fmt);
    return -1;
  }
  /* the format first: a debug id without an age is refused for Windows */
  if (!module_parse_file_name(file, t.m.debug_file, sizeof t.m.debug_file, &why) ||
      !module_set_debug_id(&t.m, id, &why)) {
    fprintf(stderr, "pdbsym warm: %s: %s\n", where, why);
    return -1;
  }
  return push(l, &t) ? 0 : -1;
}

static int read_module_list(task_list *l, const char *path) {
  FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
  if (!f) {
    fprintf(stderr, "pdbsym warm: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  /* JSON when the first non-blank byte is { or [ */
  int c;
  while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
    ;
  if (c != EOF)
    ungetc(c, f);
  int rc = 0;
  if (c == '{' || c == '[') {
    json_error_t err;
    json_t *root = json_loadf(f, 0, &err);
    if (!root) {
      fprintf(stderr, "pdbsym warm: %s: line %d: %s\n", path, err.line, err.text);
      rc = -1;
    } else {
      json_t *arr = json_is_array(root) ? root : json_object_get(root, "modules");
      size_t i;
      json_t *mod;
      if (!json_is_array(arr)) {
        fprintf(stderr, "pdbsym warm: %s: expected a modules array ({\"modules\": [...]})\n",
                path);
        rc = -1;
      } else {
        json_array_foreach(arr, i, mod) {
          char where[600];
          snprintf(where, sizeof where, "%s: modules[%zu]", path, i);
          if (add_module(l, json_string_value(json_object_get(mod, "debug_file")),
                         json_string_value(json_object_get(mod, "debug_id")),
                         json_string_value(json_object_get(mod, "format")), where) != 0)
            rc = -1;
        }
      }
      json_decref(root);
    }
  } else {
    char line[1024];
    int no = 0;
    while (fgets(line, sizeof line, f)) {
      no++;
      char *s = line;
      while (*s == ' ' || *s == '\t')
        s++;
      if (*s == '#' || *s == '\n' || *s == '\r' || *s == '\0')
        continue;
      char file[512], id[128], fmt[32];
      int n = sscanf(s, "%511s %127s %31s", file, id, fmt);
      if (n < 2) {
        fprintf(stderr, "pdbsym warm: %s:%d: expected 'debug_file debug_id [format]'\n", path,
                no);
        rc = -1;
        continue;
      }
      char where[600];
      snprintf(where, sizeof where, "%s:%d", path, no);
      if (add_module(l, file, id, n == 3 ? fmt : NULL, where) != 0)
        rc = -1;
    }
  }
  if (f != stdin)
    fclose(f);
  return rc;
}

static int walk(task_list *l, const char *path, int depth) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "pdbsym warm: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (S_ISREG(st.st_mode)) {
    task t;
    memset(&t, 0, sizeof t);
    t.kind = TASK_FILE;
    t.path = strdup(path);
    return t.path && push(l, &t) ? 0 : -1;
  }
  if (!S_ISDIR(st.st_mode) || depth > 32)
    return 0;
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "pdbsym warm: %s: %s\n", path, strerror(errno));
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    size_t n = strlen(path) + strlen(e->d_name) + 2;
    char *sub = malloc(n);
    if (!sub)
      break;
    snprintf(sub, n, "%s/%s", path, e->d_name);
    if (walk(l, sub, depth + 1) != 0)
      rc = -1;
    free(sub);
  }
  closedir(d);
  return rc;
}

/* Whether a gzip'ed file holds a symbol file or an image: its first 4 KiB
 * inflated are sniffed, so that other .gz files of a folder (the fixtures'
 * *.jsonl.gz oracles, logs) are passed over, not counted as failures. */
static bool gz_symbols(const char *path) {
  gzFile gz = gzopen(path, "rb");
  if (!gz)
    return true; /* let the reader say why */
  uint8_t buf[4096];
  int n = gzread(gz, buf, sizeof buf);
  gzclose(gz);
  if (n < 0)
    return true; /* a broken stream: reported as a failure */
  load_kind kind = loader_sniff(buf, (size_t)n);
  return kind != LOAD_UNKNOWN || (n >= 2 && buf[0] == 'M' && buf[1] == 'Z');
}

/* Looks at every walked file once, without parsing symbols: PE images add the
 * PDBs their CodeView entries name to *resolve (once each) and are kept in
 * *images; PE images with an embedded Portable PDB, PDB files and .gz files
 * are marked for ingestion. */
static void scan(task_list *files, task_list *resolve, key_set *wanted, image_list *images) {
  for (size_t i = 0; i < files->n; i++) {
    task *t = &files->v[i];
    filemap fm;
    ps_diag d;
    ps_diag_clear(&d);
    bool stay = false;
    if (symfile_gzipped(t->path)) {
      stay = gz_symbols(t->path);
    } else if (filemap_open(&fm, t->path, 0, &d) == PS_E_OK) {
      load_kind kind = loader_sniff(fm.data, fm.len);
      pe_info info;
      if (kind == LOAD_MSF || kind == LOAD_PORTABLE || kind == LOAD_MSF_OLD) {
        stay = true;
      } else if (kind == LOAD_PE && pe_parse(fm.data, fm.len, &info, &d) == PS_E_OK) {
        for (int k = 0; k < info.ncodeview; k++) {
          const pe_codeview *cv = &info.codeview[k];
          if (cv->portable && info.has_embedded_pdb) {
            stay = true; /* stored from the image itself */
            continue;
          }
          task r;
          memset(&r, 0, sizeof r);
          r.kind = TASK_RESOLVE;
          const char *why;
          if (!module_parse_file_name(cv->path, r.m.debug_file, sizeof r.m.debug_file, &why))
            continue;
          memcpy(r.m.guid, cv->guid, 16);
          r.m.age = cv->age;
          r.m.format = cv->portable ? ST_FORMAT_PORTABLE : ST_FORMAT_WINDOWS;
          if (module_parse_file_name(t->path, r.m.code_file, sizeof r.m.code_file, &why)) {
            r.m.code_timestamp = info.timestamp;
            r.m.code_size = info.size_of_image;
            r.m.has_code_id = true;
          }
          char key[300];
          resolve_key(&r.m, key, sizeof key);
          if (info.is_dotnet && images->n < (size_t)1 << 20) {
            if (images->n == images->cap) {
              size_t nc = images->cap ? images->cap * 2 : 16;
              image_ref *nv = realloc(images->v, nc * sizeof *nv);
              if (nv) {
                images->v = nv;
                images->cap = nc;
              }
            }
            if (images->n < images->cap) {
              snprintf(images->v[images->n].key, sizeof images->v[images->n].key, "%s", key);
              images->v[images->n].m = r.m;
              images->v[images->n++].path = t->path;
            }
          }
          if (key_add(wanted, key))
            push(resolve, &r);
        }
      }
      filemap_close(&fm);
    }
    t->ingest = stay; /* paths stay alive: images borrow them */
  }
}

/* The .NET images of the walk, in symbol-store layout
 * (DIR/Demo.dll/<TIMESTAMP><SizeOfImage>/Demo.dll, symbolic links), so that
 * the engine finds them first when a PDB it fetches needs the image's method
 * names.  Returns false when there is nothing to link (dir untouched). */
static bool image_store(const image_list *images, char *dir, size_t cap) {
  if (!images->n)
    return false;
  const char *t = getenv("TMPDIR");
  snprintf(dir, cap, "%s/pdbsym-warm-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(dir))
    return false;
  for (size_t i = 0; i < images->n; i++) {
    const module_id *m = &images->v[i].m;
    char sub[PATH_MAX], target[PATH_MAX];
    if (!m->has_code_id || !realpath(images->v[i].path, target))
      continue;
    size_t dl = strlen(dir), cl = strlen(m->code_file);
    if (dl + 2 * cl + 24 >= sizeof sub)
      continue;
    /* DIR/NAME, DIR/NAME/ID, DIR/NAME/ID/NAME, each made in turn */
    char *p = sub;
    memcpy(p, dir, dl);
    p += dl;
    *p++ = '/';
    memcpy(p, m->code_file, cl);
    p += cl;
    *p = '\0';
    mkdir(sub, 0700);
    int k = snprintf(p, sizeof sub - (size_t)(p - sub), "/%08X%X", m->code_timestamp, m->code_size);
    if (k < 0)
      continue;
    p += k;
    mkdir(sub, 0700);
    *p++ = '/';
    memcpy(p, m->code_file, cl + 1);
    if (symlink(target, sub) != 0 && errno != EEXIST)
      continue;
  }
  return true;
}

static void image_store_remove(const image_list *images, const char *dir) {
  for (size_t i = 0; i < images->n; i++) {
    const module_id *m = &images->v[i].m;
    char sub[PATH_MAX];
    int k = snprintf(sub, sizeof sub, "%s/%s/%08X%X/%s", dir, m->code_file, m->code_timestamp,
                     m->code_size, m->code_file);
    if (k < 0 || (size_t)k >= sizeof sub)
      continue;
    unlink(sub);
    *strrchr(sub, '/') = '\0';
    rmdir(sub);
    *strrchr(sub, '/') = '\0';
    rmdir(sub);
  }
  rmdir(dir);
}

/* ---- work ------------------------------------------------------------------ */

typedef enum { R_FOUND, R_CACHED, R_MISSING, R_FAILED } result;

static void report(warm_state *w, result r, const char *what, const char *detail, uint64_t bytes);

static const char *image_for(const warm_state *w, const module_id *m, st_format fmt) {
  char key[300];
  module_cache_key(m, fmt, key, sizeof key);
  for (size_t i = 0; i < w->images->n; i++)
    if (!strcmp(w->images->v[i].key, key))
      return w->images->v[i].path;
  return NULL;
}

/* Parses one local file into the cache. */
static void ingest_file(warm_state *w, const char *path) {
  symfile fm;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  if (symfile_open(&fm, path, 0, &d) != PS_E_OK) {
    report(w, R_FAILED, path, ps_diag_format(&d, msg, sizeof msg), 0);
    return;
  }
  const uint8_t *data = fm.data;
  size_t len = fm.len;
  char source[PATH_MAX]; /* where the module came from, as the cache records it */
  if (!realpath(path, source))
    snprintf(source, sizeof source, "%s", path);
  load_kind kind = loader_sniff(data, len);
  module_id m;
  memset(&m, 0, sizeof m);
  const char *why;
  if (kind == LOAD_PE) {
    pe_info info;
    if (pe_parse(data, len, &info, &d) != PS_E_OK) {
      report(w, R_FAILED, path, ps_diag_format(&d, msg, sizeof msg), len);
      goto out;
    }
    for (int i = 0; i < info.ncodeview; i++) {
      const pe_codeview *cv = &info.codeview[i];
      if (cv->portable && module_parse_file_name(cv->path, m.debug_file, sizeof m.debug_file, &why)) {
        memcpy(m.guid, cv->guid, 16);
        break;
      }
    }
    if (!m.debug_file[0]) {
      report(w, R_FAILED, path, "the embedded Portable PDB has no CodeView entry naming it", len);
      goto out;
    }
  } else if (kind == LOAD_UNKNOWN) {
    report(w, R_FAILED, path, "not a PDB, a Portable PDB or a PE image", len);
    goto out;
  }

  symtab st;
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  st_init(&st, &budget);
  ps_err rc = loader_read(data, len, NULL, 0, &budget, &st, &d);
  if (rc != PS_E_OK) {
    st.budget = NULL;
    st_free(&st);
    report(w, R_FAILED, path, ps_diag_format(&d, msg, sizeof msg), len);
    goto out;
  }
  if (kind != LOAD_PE) {
    char name[MODULE_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", path);
    if (symfile_gzipped(name))
      name[strlen(name) - 3] = '\0';
    module_parse_file_name(name, m.debug_file, sizeof m.debug_file, &why);
    memcpy(m.guid, st.ident.guid, 16);
  }
  st_format fmt = st.ident.format;
  m.format = fmt;
  m.age = fmt == ST_FORMAT_PORTABLE ? 0 : st.ident.age;
  /* a managed PDB: full method names from its image when the walk has it
   * (an embedded one has them from its own image) */
  bool named = kind == LOAD_PE && st.ident.managed;
  const char *image = st.ident.managed && !named ? image_for(w, &m, fmt) : NULL;
  if (image) {
    filemap im;
    ps_diag d2;
    ps_diag_clear(&d2);
    if (filemap_open(&im, image, 0, &d2) == PS_E_OK) {
      symtab st2;
      ps_budget b2;
      ps_budget_init(&b2, PS_DEFAULT_BUDGET);
      st_init(&st2, &b2);
      if (loader_read(data, len, im.data, im.len, &b2, &st2, &d2) == PS_E_OK) {
        st.budget = NULL;
        st_free(&st);
        st = st2;
        named = true;
      } else {
        st2.budget = NULL;
        st_free(&st2);
      }
      filemap_close(&im);
    }
  }
  st.budget = NULL;

  char id[48], what[400], key[300];
  module_debug_id(m.guid, m.age, id);
  snprintf(what, sizeof what, "%s %s", m.debug_file, id);
  module_cache_key(&m, fmt, key, sizeof key);
  pthread_mutex_lock(&w->mu);
  bool twice = !key_add(&w->stored, key);
  pthread_mutex_unlock(&w->mu);
  /* a table with the image's names replaces one cached without them */
  if (twice || engine_cached(w->eng, &m, fmt, named)) {
    report(w, R_CACHED, what, source, len);
  } else if (engine_ingest(w->eng, &m, fmt, &st, source, named, &d) != PS_E_OK) {
    report(w, R_FAILED, what, ps_diag_format(&d, msg, sizeof msg), len);
  } else {
    report(w, R_FOUND, what, source, len);
  }
  st_free(&st);
out:
  symfile_close(&fm);
}

static void resolve(warm_state *w, const module_id *m) {
  char id[48], what[400];
  module_debug_id(m->guid, m->age, id);
  snprintf(what, sizeof what, "%s %s", m->debug_file, id);
  bool cached = engine_cached(w->eng, m, m->format, false);
  mod_handle h;
  /* cached: answered at once, but a managed table cached without its
   * image's names gains them here (the walk's images are on the path) */
  engine_resolve(w->eng, m, 0, &h);
  if (cached && h.status == MOD_FOUND && h.from_cache) {
    report(w, R_CACHED, what, "cache", 0);
    engine_release(w->eng, &h);
    return;
  }
  switch (h.status) {
  case MOD_FOUND: /* not cached a moment ago: fetched now (from_cache may say
                   * otherwise when the engine read the fresh table back) */
    report(w, R_FOUND, what, h.source, h.st ? st_memory_size(h.st) : 0);
    break;
  case MOD_MISSING:
    report(w, R_MISSING, what, h.error, 0);
    break;
  default:
    report(w, R_FAILED, what, h.error[0] ? h.error : mod_status_name(h.status), 0);
    break;
  }
  engine_release(w->eng, &h);
}

/* One line: [#####.....] 3/17 modules  1.2 MiB  0.4 MiB/s  0:05 left */
static void draw_bar(warm_state *w) {
  size_t total = w->total;
  double secs = (double)(engine_now_ms() - w->started_ms) / 1000.0;
  double rate = secs > 0 ? (double)w->bytes / secs : 0;
  enum { WIDTH = 24 };
  size_t fill = total ? w->done * WIDTH / total : 0;
  char bar[WIDTH + 1];
  for (size_t i = 0; i < WIDTH; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = '\0';
  char left[32] = "";
  if (w->done && total > w->done) {
    unsigned s = (unsigned)(secs * (double)(total - w->done) / (double)w->done);
    snprintf(left, sizeof left, "  %u:%02u left", s / 60, s % 60);
  }
  fprintf(stderr, "\r\033[K[%s] %zu/%zu modules  %.1f MiB  %.1f MiB/s%s%s", bar, w->done, total,
          (double)w->bytes / 1048576.0, rate / 1048576.0, left,
          warm_interrupted ? "  (interrupted: finishing)" : "");
  fflush(stderr);
}

static void report(warm_state *w, result r, const char *what, const char *detail, uint64_t bytes) {
  pthread_mutex_lock(&w->mu);
  w->bytes += bytes;
  switch (r) {
  case R_FOUND: w->found++; break;
  case R_CACHED: w->cached++; break;
  case R_MISSING: w->missing++; break;
  case R_FAILED: w->failed++; break;
  }
  static const char *const names[] = {"found", "cached", "missing", "failed"};
  /* the report on stdout, the bar (a diagnostic) on stderr */
  if (w->tty) {
    if (r == R_FAILED || r == R_MISSING) {
      fprintf(stderr, "\r\033[K");
      fflush(stderr);
      printf("warm: %s %s (%s)\n", names[r], what, detail ? detail : "");
      fflush(stdout);
      draw_bar(w);
    }
  } else if (!w->quiet || r == R_FAILED || r == R_MISSING) {
    printf("warm: %s %s (%s)\n", names[r], what, detail ? detail : "");
    fflush(stdout);
  }
  pthread_mutex_unlock(&w->mu);
}

static void *worker(void *arg) {
  warm_state *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    if (warm_interrupted || w->next >= w->tasks->n) {
      w->active--;
      pthread_mutex_unlock(&w->mu);
      return NULL;
    }
    const task *t = &w->tasks->v[w->next++];
    pthread_mutex_unlock(&w->mu);
    if (t->kind == TASK_RESOLVE)
      resolve(w, &t->m);
    else
      ingest_file(w, t->path);
    pthread_mutex_lock(&w->mu);
    w->done++;
    if (w->tty)
      draw_bar(w);
    pthread_mutex_unlock(&w->mu);
  }
}

/* Runs the tasks on jobs threads; on a terminal redraws the bar 5 times a
 * second meanwhile (downloads take time between two modules). */
static void run_pass(warm_state *w, const task_list *tasks, int jobs) {
  if (!tasks->n)
    return;
  w->tasks = tasks;
  w->next = 0;
  if ((size_t)jobs > tasks->n)
    jobs = (int)tasks->n;
  pthread_t th[WARM_MAX_JOBS];
  int started = 0;
  pthread_mutex_lock(&w->mu);
  w->active = jobs;
  pthread_mutex_unlock(&w->mu);
  for (int i = 0; i < jobs; i++) {
    if (pthread_create(&th[i], NULL, worker, w) != 0) {
      pthread_mutex_lock(&w->mu);
      w->active -= jobs - i;
      pthread_mutex_unlock(&w->mu);
      break;
    }
    started++;
  }
  if (!started) /* no thread at all: work here */ {
    pthread_mutex_lock(&w->mu);
    w->active = 1;
    pthread_mutex_unlock(&w->mu);
    worker(w);
  }
  bool said = false;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    int active = w->active;
    if (warm_interrupted && !said && active > 0) {
      if (w->tty)
        fprintf(stderr, "\r\033[K");
      fprintf(stderr, "warm: interrupted: finishing %d module%s in progress "
                      "(Ctrl-C again to stop at once)\n", active, active == 1 ? "" : "s");
      said = true;
    }
    if (w->tty && active > 0)
      draw_bar(w);
    pthread_mutex_unlock(&w->mu);
    if (active <= 0)
      break;
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
}

static void warm_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym warm [OPTIONS] [DIR|FILE]...\n\n"
          "Fills the cache before traffic arrives.  DIR and FILE are walked: PDB files\n"
          "(also NAME.pdb.gz) are stored with no network; PE images have the PDBs their\n"
          "CodeView entries name fetched from the symbol path, or stored directly when\n"
          "embedded.  Modules already cached are counted, not fetched again, so an\n"
          "interrupted warm resumes when run again.\n\n"
          "  --modules FILE      'debug_file debug_id [windows|portable]' per line, or a JSON\n"
          "                      modules array as in POST /symbolicate ('-': standard input)\n"
          "  --jobs N, -j N      modules worked on at once, 1 to %d (default 4)\n"
          "  --allow-failures    exit 0 even when some modules failed or are missing\n"
          "  --quiet, -q         log only missing and failed modules (the bar on a\n"
          "                      terminal stays)\n"
          "%s\n"
          "The report goes to stdout: one line per module ('warm: found NAME ID (source)';\n"
          "when stderr is a terminal, only the missing and failed ones, and a progress\n"
          "bar on stderr), then a summary line.  Other .gz files than gzip'ed PDBs and\n"
          "images (a folder's *.jsonl.gz, logs) are passed over.\n\n"
          "Exit status: 0 all done, 1 some modules failed or are missing (see\n"
          "--allow-failures) or the cache could not be opened, 2 usage error,\n"
          "130 interrupted (run the same command again to resume).\n",
          WARM_MAX_JOBS, settings_help());
}

int cmd_warm(int argc, char **argv) {
  task_list files = {0}, resolves = {0};
  key_set wanted = {0};
  image_list images = {0};
  int jobs = 4;
  bool allow = false, quiet = false;
  settings cfg;
  settings_init(&cfg, argc, argv);
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    int used = settings_flag(&cfg, argc, argv, &i);
    if (used < 0)
      return 2;
    if (used > 0)
      continue;
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      warm_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--modules") || !strncmp(a, "--modules=", 10)) {
      const char *v = !strncmp(a, "--modules=", 10) ? a + 10 : i + 1 < argc ? argv[++i] : NULL;
      if (!v) {
        fprintf(stderr, "pdbsym warm: --modules needs a file ('-' for standard input)\n");
        return 2;
      }
      if (read_module_list(&resolves, v) != 0)
        bad = 1;
    } else if (!strcmp(a, "--jobs") || !strcmp(a, "-j") || !strncmp(a, "--jobs=", 7)) {
      const char *v = !strncmp(a, "--jobs=", 7) ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
      char *end = NULL;
      long n = v ? strtol(v, &end, 10) : 0;
      if (!v || *end || n < 1 || n > WARM_MAX_JOBS) {
        fprintf(stderr, "pdbsym warm: --jobs takes a number from 1 to %d\n", WARM_MAX_JOBS);
        return 2;
      }
      jobs = (int)n;
    } else if (!strcmp(a, "--allow-failures")) {
      allow = true;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      quiet = true;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "pdbsym warm: unknown option '%s'; run 'pdbsym warm --help'\n", a);
      return 2;
    } else if (walk(&files, a, 0) != 0) {
      bad = 1;
    }
  }
  if (bad)
    return 2;
  if (files.n == 0 && resolves.n == 0) {
    fprintf(stderr, "pdbsym warm: nothing to do: give a folder of PDBs or PE images, or "
                    "--modules FILE (see 'pdbsym warm --help')\n");
    return 2;
  }
  for (size_t i = 0; i < resolves.n; i++) { /* the lists' own duplicates */
    char key[300];
    resolve_key(&resolves.v[i].m, key, sizeof key);
    key_add(&wanted, key);
  }
  scan(&files, &resolves, &wanted, &images);
  task_list ingests = {0};
  for (size_t i = 0; i < files.n; i++)
    if (files.v[i].ingest)
      push(&ingests, &files.v[i]);

  if (!getenv("PDBSYM_LOG_LEVEL"))
    log_set_level("warn"); /* the engine's info lines would drown the progress */
  engine *eng = NULL;
  engine_config ec;
  settings_engine_config(&cfg, &ec);
  /* local .NET images first on the symbol path: names for fetched PDBs */
  char img_dir[PATH_MAX];
  bool have_img_dir = resolves.n && image_store(&images, img_dir, sizeof img_dir);
  char *path_with_images = NULL;
  if (have_img_dir) {
    const char *rest = ec.symbol_path ? ec.symbol_path : "srv*" FETCH_DEFAULT_SERVER;
    size_t n = strlen(img_dir) + strlen(rest) + 2;
    path_with_images = malloc(n);
    if (path_with_images) {
      snprintf(path_with_images, n, "%s;%s", img_dir, rest);
      ec.symbol_path = path_with_images;
    }
  }
  ps_diag d;
  ps_diag_clear(&d);
  if (engine_open(&ec, &eng, &d) != PS_E_OK) {
    char msg[512];
    fprintf(stderr, "pdbsym warm: cannot open the cache in %s: %s\n", ec.cache_dir,
            ps_diag_format(&d, msg, sizeof msg));
    if (have_img_dir)
      image_store_remove(&images, img_dir);
    free(path_with_images);
    return 1;
  }
  warm_state w;
  memset(&w, 0, sizeof w);
  w.eng = eng;
  w.images = &images;
  w.tty = isatty(2);
  w.quiet = quiet;
  w.started_ms = engine_now_ms();
  w.total = ingests.n + resolves.n;
  pthread_mutex_init(&w.mu, NULL);
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  run_pass(&w, &ingests, jobs);
  /* second pass: what the local files did not already give */
  size_t keep = 0;
  for (size_t i = 0; i < resolves.n; i++) {
    char key[300];
    resolve_key(&resolves.v[i].m, key, sizeof key);
    bool local = key_has(&w.stored, key);
    if (!local && resolves.v[i].m.format == ST_FORMAT_UNKNOWN) {
      module_id m = resolves.v[i].m;
      m.format = ST_FORMAT_WINDOWS;
      module_cache_key(&m, m.format, key, sizeof key);
      local = key_has(&w.stored, key);
      m.format = ST_FORMAT_PORTABLE;
      module_cache_key(&m, m.format, key, sizeof key);
      local = local || key_has(&w.stored, key);
    }
    if (!local)
      resolves.v[keep++] = resolves.v[i];
  }
  pthread_mutex_lock(&w.mu);
  w.total -= resolves.n - keep;
  pthread_mutex_unlock(&w.mu);
  resolves.n = keep;
  if (!warm_interrupted)
    run_pass(&w, &resolves, jobs);

  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (w.tty) {
    draw_bar(&w);
    fprintf(stderr, "\n");
  }
  double secs = (double)(engine_now_ms() - w.started_ms) / 1000.0;
  size_t left = w.total > w.done ? w.total - w.done : 0;
  char rest[80] = "";
  if (warm_interrupted)
    snprintf(rest, sizeof rest, ", %zu not started (interrupted: run again to resume)", left);
  printf("warm: %zu found, %zu already cached, %zu missing, %zu failed, %.1f MiB in %.1f s%s\n",
          w.found, w.cached, w.missing, w.failed, (double)w.bytes / 1048576.0, secs, rest);
  engine_close(eng);
  if (have_img_dir)
    image_store_remove(&images, img_dir);
  free(path_with_images);
  for (size_t i = 0; i < files.n; i++)
    free(files.v[i].path);
  free(files.v);
  free(ingests.v);
  free(resolves.v);
  free(wanted.v);
  free(w.stored.v);
  free(images.v);
  pthread_mutex_destroy(&w.mu);
  if (warm_interrupted)
    return 130;
  if ((w.failed || w.missing) && !allow)
    return 1;
  return 0;
}
