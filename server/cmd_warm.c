/*
 * cmd_warm.c - `pdbsym warm`: fill the cache ahead of traffic.
 *
 * Sources, in any mix:
 *   --modules FILE   "debug_file debug_id" per line, or a JSON modules array
 *                    ({"modules": [...]} or [...]); "-" reads standard input
 *   DIR or FILE      walked recursively: PE images have their CodeView entries
 *                    fetched (embedded Portable PDBs are ingested directly);
 *                    PDB files are ingested locally with no network
 * Work runs on --jobs threads.  On a terminal a progress bar is drawn on
 * stderr, elsewhere one log line per module.  SIGINT stops taking new work;
 * what is done stays cached (each module is one transaction), so running the
 * same command again resumes.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "engine.h"
#include "filemap.h"
#include "loader.h"
#include "module.h"
#include "pe.h"
#include "settings.h"

typedef enum { TASK_RESOLVE, TASK_FILE } task_kind;

typedef struct {
  task_kind kind;
  module_id m;
  char *path; /* TASK_FILE */
} task;

typedef struct {
  task *v;
  size_t n, cap;
} task_list;

typedef struct {
  engine *eng;
  task_list *tasks;
  size_t next;
  size_t done, found, cached, missing, failed;
  uint64_t bytes;
  uint64_t started_ms;
  bool tty, quiet;
  pthread_mutex_t mu;
} warm_state;

static volatile sig_atomic_t warm_interrupted;

static void on_sigint(int sig) {
  (void)sig;
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

/* ---- sources -------------------------------------------------------------- */

static int add_module(task_list *l, const char *file, const char *id, const char *fmt,
                      const char *where) {
  task t;
  memset(&t, 0, sizeof t);
  t.kind = TASK_RESOLVE;
  const char *why = NULL;
  if (!module_parse_file_name(file, t.m.debug_file, sizeof t.m.debug_file, &why) ||
      !module_parse_debug_id(id, t.m.guid, &t.m.age, &why)) {
    fprintf(stderr, "pdbsym warm: %s: %s\n", where, why);
    return -1;
  }
  if (fmt && !strcmp(fmt, "windows"))
    t.m.format = ST_FORMAT_WINDOWS;
  else if (fmt && !strcmp(fmt, "portable"))
    t.m.format = ST_FORMAT_PORTABLE;
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
        fprintf(stderr, "pdbsym warm: %s: expected a modules array\n", path);
        rc = -1;
      } else {
        json_array_foreach(arr, i, mod) {
          char where[64];
          snprintf(where, sizeof where, "modules[%zu]", i);
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
      if (*s == '#' || *s == '\n' || *s == '\0')
        continue;
      char file[512], id[128];
      if (sscanf(s, "%511s %127s", file, id) != 2) {
        fprintf(stderr, "pdbsym warm: %s:%d: expected 'debug_file debug_id'\n", path, no);
        rc = -1;
        continue;
      }
      char where[600];
      snprintf(where, sizeof where, "%s:%d", path, no);
      if (add_module(l, file, id, NULL, where) != 0)
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

/* ---- work ------------------------------------------------------------------ */

typedef enum { R_FOUND, R_CACHED, R_MISSING, R_FAILED, R_SKIPPED } result;

static void report(warm_state *w, result r, const char *what, const char *detail, uint64_t bytes);

static result ingest_file(warm_state *w, const char *path) {
  filemap fm;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  if (filemap_open(&fm, path, 0, &d) != PS_E_OK) {
    report(w, R_FAILED, path, ps_diag_format(&d, msg, sizeof msg), 0);
    return R_FAILED;
  }
  load_kind kind = loader_sniff(fm.data, fm.len);
  if (kind == LOAD_UNKNOWN) {
    filemap_close(&fm);
    return R_SKIPPED; /* not a symbol file: nothing to do */
  }
  module_id m;
  memset(&m, 0, sizeof m);
  st_format fmt = ST_FORMAT_UNKNOWN;
  bool embedded = false;
  if (kind == LOAD_PE) {
    pe_info info;
    if (pe_parse(fm.data, fm.len, &info, &d) != PS_E_OK) {
      filemap_close(&fm);
      report(w, R_FAILED, path, ps_diag_format(&d, msg, sizeof msg), 0);
      return R_FAILED;
    }
    /* every CodeView entry names a PDB: fetch those without an embedded copy */
    for (int i = 0; i < info.ncodeview; i++) {
      const pe_codeview *cv = &info.codeview[i];
      module_id cm;
      memset(&cm, 0, sizeof cm);
      const char *why;
      if (!module_parse_file_name(cv->path, cm.debug_file, sizeof cm.debug_file, &why))
        continue;
      memcpy(cm.guid, cv->guid, 16);
      cm.age = cv->age;
      cm.format = cv->portable ? ST_FORMAT_PORTABLE : ST_FORMAT_WINDOWS;
      module_parse_file_name(path, cm.code_file, sizeof cm.code_file, &why);
      cm.code_timestamp = info.timestamp;
      cm.code_size = info.size_of_image;
      cm.has_code_id = true;
      if (cv->portable && info.has_embedded_pdb) {
        m = cm;
        fmt = ST_FORMAT_PORTABLE;
        embedded = true;
        continue;
      }
      task t;
      memset(&t, 0, sizeof t);
      t.kind = TASK_RESOLVE;
      t.m = cm;
      pthread_mutex_lock(&w->mu);
      push(w->tasks, &t);
      pthread_mutex_unlock(&w->mu);
    }
    if (!embedded) {
      filemap_close(&fm);
      return R_SKIPPED;
    }
  }
  symtab st;
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  st_init(&st, &budget);
  ps_err rc = loader_read(fm.data, fm.len, NULL, 0, &budget, &st, &d);
  st.budget = NULL;
  uint64_t bytes = fm.len;
  filemap_close(&fm);
  if (rc != PS_E_OK) {
    st_free(&st);
    report(w, R_FAILED, path, ps_diag_format(&d, msg, sizeof msg), bytes);
    return R_FAILED;
  }
  if (!embedded) {
    const char *why;
    module_parse_file_name(path, m.debug_file, sizeof m.debug_file, &why);
    memcpy(m.guid, st.ident.guid, 16);
    m.age = st.ident.format == ST_FORMAT_PORTABLE ? 0 : st.ident.age;
    fmt = st.ident.format;
  }
  m.format = fmt;
  char id[48];
  module_debug_id(m.guid, m.age, id);
  char what[400];
  snprintf(what, sizeof what, "%s %s", m.debug_file, id);
  if (engine_cached(w->eng, &m, fmt)) {
    st_free(&st);
    report(w, R_CACHED, what, path, bytes);
    return R_CACHED;
  }
  rc = engine_ingest(w->eng, &m, fmt, &st, path, &d);
  st_free(&st);
  if (rc != PS_E_OK) {
    report(w, R_FAILED, what, ps_diag_format(&d, msg, sizeof msg), bytes);
    return R_FAILED;
  }
  report(w, R_FOUND, what, path, bytes);
  return R_FOUND;
}

static void resolve(warm_state *w, const module_id *m) {
  char id[48], what[400];
  module_debug_id(m->guid, m->age, id);
  snprintf(what, sizeof what, "%s %s", m->debug_file, id);
  if (engine_cached(w->eng, m, m->format)) {
    report(w, R_CACHED, what, "cache", 0);
    return;
  }
  mod_handle h;
  engine_resolve(w->eng, m, 0, &h);
  switch (h.status) {
  case MOD_FOUND:
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

static void draw_bar(warm_state *w) {
  size_t total = w->tasks->n;
  uint64_t el = engine_now_ms() - w->started_ms;
  double secs = (double)el / 1000.0;
  double rate = secs > 0 ? (double)w->bytes / secs : 0;
  int width = 24;
  int fill = total ? (int)((double)w->done * width / (double)total) : 0;
  char bar[32];
  for (int i = 0; i < width; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[width] = '\0';
  double left = (w->done && total > w->done) ? secs * (double)(total - w->done) / (double)w->done : 0;
  fprintf(stderr, "\r[%s] %zu/%zu modules  %.1f MiB  %.1f MiB/s  %d:%02d left ", bar, w->done,
          total, (double)w->bytes / 1048576.0, rate / 1048576.0, (int)left / 60, (int)left % 60);
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
  case R_SKIPPED: break;
  }
  static const char *const names[] = {"found", "cached", "missing", "failed", "skipped"};
  if (w->tty) {
    if (r == R_FAILED || r == R_MISSING)
      fprintf(stderr, "\r\033[K%s: %s (%s)\n", names[r], what, detail ? detail : "");
  } else if (!w->quiet || r == R_FAILED) {
    fprintf(stderr, "warm: %s %s (%s)\n", names[r], what, detail ? detail : "");
  }
  pthread_mutex_unlock(&w->mu);
}

static void *worker(void *arg) {
  warm_state *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    if (warm_interrupted || w->next >= w->tasks->n) {
      pthread_mutex_unlock(&w->mu);
      return NULL;
    }
    task t = w->tasks->v[w->next++];
    pthread_mutex_unlock(&w->mu);
    if (t.kind == TASK_RESOLVE)
      resolve(w, &t.m);
    else
      ingest_file(w, t.path);
    pthread_mutex_lock(&w->mu);
    w->done++;
    if (w->tty)
      draw_bar(w);
    pthread_mutex_unlock(&w->mu);
  }
}

static void warm_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym warm [OPTIONS] [DIR|FILE]...\n\n"
          "Fills the cache before traffic arrives.  DIR and FILE are walked: PE images\n"
          "have the PDBs their CodeView entries name fetched (embedded Portable PDBs are\n"
          "stored directly), PDB files are stored with no network.\n\n"
          "  --modules FILE      'debug_file debug_id' per line, or a JSON modules array\n"
          "                      ('-' for standard input)\n"
          "  --jobs N            modules worked on at once (default 4)\n"
          "  --allow-failures    exit 0 even when some modules failed or are missing\n"
          "  --quiet             no per-module log lines (errors still print)\n"
          "%s\n"
          "Exit status: 0 all done, 1 some modules failed or are missing, 2 usage error,\n"
          "130 interrupted (run the same command again to resume).\n",
          settings_help());
}

int cmd_warm(int argc, char **argv) {
  task_list tasks = {0};
  int jobs = 4;
  bool allow = false, quiet = false;
  settings cfg;
  settings_defaults(&cfg);
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    int used = settings_flag(&cfg, argc, argv, i);
    if (used < 0)
      return 2;
    if (used > 0) {
      i += used - 1;
      continue;
    }
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      warm_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--modules") && i + 1 < argc) {
      if (read_module_list(&tasks, argv[++i]) != 0)
        bad = 1;
    } else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) {
      jobs = atoi(argv[++i]);
      if (jobs < 1 || jobs > 64) {
        fprintf(stderr, "pdbsym warm: --jobs takes 1 to 64\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--allow-failures")) {
      allow = true;
    } else if (!strcmp(argv[i], "--quiet")) {
      quiet = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "pdbsym warm: unknown option %s (see 'pdbsym warm --help')\n", argv[i]);
      return 2;
    } else if (walk(&tasks, argv[i], 0) != 0) {
      bad = 1;
    }
  }
  if (bad)
    return 2;
  if (tasks.n == 0) {
    fprintf(stderr, "pdbsym warm: nothing to do: give --modules FILE or a folder\n");
    return 2;
  }
  engine *eng = NULL;
  engine_config ec;
  settings_engine_config(&cfg, &ec);
  ps_diag d;
  ps_diag_clear(&d);
  if (engine_open(&ec, &eng, &d) != PS_E_OK) {
    char msg[512];
    fprintf(stderr, "pdbsym warm: cannot open the cache in %s: %s\n", ec.cache_dir,
            ps_diag_format(&d, msg, sizeof msg));
    return 2;
  }
  warm_state w;
  memset(&w, 0, sizeof w);
  w.eng = eng;
  w.tasks = &tasks;
  w.tty = isatty(2);
  w.quiet = quiet;
  w.started_ms = engine_now_ms();
  pthread_mutex_init(&w.mu, NULL);
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  pthread_t th[64];
  for (int i = 0; i < jobs; i++)
    pthread_create(&th[i], NULL, worker, &w);
  for (int i = 0; i < jobs; i++)
    pthread_join(th[i], NULL);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (w.tty)
    fprintf(stderr, "\n");
  double secs = (double)(engine_now_ms() - w.started_ms) / 1000.0;
  fprintf(stderr,
          "warm: %zu found, %zu already cached, %zu missing, %zu failed, %.1f MiB in %.1f s%s\n",
          w.found, w.cached, w.missing, w.failed, (double)w.bytes / 1048576.0, secs,
          warm_interrupted ? " (interrupted: run again to resume)" : "");
  engine_close(eng);
  for (size_t i = 0; i < tasks.n; i++)
    free(tasks.v[i].path);
  free(tasks.v);
  pthread_mutex_destroy(&w.mu);
  if (warm_interrupted)
    return 130;
  if ((w.failed || w.missing) && !allow)
    return 1;
  return 0;
}
