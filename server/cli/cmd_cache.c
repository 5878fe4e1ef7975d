/*
 * cmd_cache.c - `pdbsym cache stats|list|evict|verify|clear`: look after the
 * SQLite line-table cache (store.h) from the command line.
 *
 * The folder and the cap come from the shared settings (settings.h):
 * PDBSYM_CACHE_DIR / --cache-dir and PDBSYM_CACHE_MAX_BYTES / --cache-max-bytes.
 *
 * Two hidden subcommands exist for tests (not in the help): `_fill` ingests
 * synthetic modules through store_put, `_check` reloads them and compares
 * every lookup with a freshly generated copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "fetch.h"
#include "module.h"
#include "settings.h"
#include "store.h"

typedef struct {
  const char *dir;
  uint64_t max_bytes;
  bool negative, fix;
  uint32_t modules, lines, seed;
  const char *prefix;
} cache_opts;

static const char *USAGE =
    "usage: pdbsym cache SUBCOMMAND [OPTIONS]\n"
    "\n"
    "Looks after the SQLite line-table cache (folder PDBSYM_CACHE_DIR, cap\n"
    "PDBSYM_CACHE_MAX_BYTES).\n"
    "\n"
    "subcommands:\n"
    "  stats          sizes, counts and the cap\n"
    "  list           every entry, least recently used first\n"
    "  evict MODULE   remove a module (its cache key, or a debug file name such as\n"
    "                 ntdll.pdb to remove every version of it)\n"
    "  verify         check the database and every module; --fix removes damaged ones\n"
    "  clear          remove everything; --negative removes only the remembered\n"
    "                 failures (modules not found or not readable)\n"
    "\n"
    "options (all subcommands):\n"
    "  --cache-dir DIR     cache folder (env PDBSYM_CACHE_DIR, default ./.pdbsym-cache)\n"
    "  --cache-max-bytes N cap on the cache's size, e.g. 2G (env PDBSYM_CACHE_MAX_BYTES)\n"
    "  --config FILE       a config file of `key = value` lines (env PDBSYM_CONFIG)\n"
    "  --help              this text\n"
    "\n"
    "Exit status: 0 done (verify: the cache is sound), 1 the cache cannot be opened\n"
    "or verify found damage, 2 usage error.\n";

static const char *SUB_HELP[][2] = {
    {"stats", "usage: pdbsym cache stats [--cache-dir DIR]\n\n"
              "Prints the database's path and size, the cap, the number of modules and\n"
              "negative entries, and the line rows they hold, one 'name: value' a line.\n"},
    {"list", "usage: pdbsym cache list [--cache-dir DIR]\n\n"
             "Prints a header line, then one line per entry, least recently used first,\n"
             "tab-separated: last_used (UTC), status, rows (line rows and sequence points),\n"
             "bytes, key, source_or_error.\n"},
    {"evict", "usage: pdbsym cache evict MODULE [--cache-dir DIR]\n"
              "       pdbsym cache evict DEBUG_FILE DEBUG_ID [--cache-dir DIR]\n\n"
              "Removes a module.  MODULE is a key as 'pdbsym cache list' prints it\n"
              "(c-x64-o2.pdb/3AF620A1B67EFBBE4C4C44205044422E1), in any case; or\n"
              "DEBUG_FILE/DEBUG_ID or DEBUG_FILE DEBUG_ID with the id in any form\n"
              "'pdbsym dump' and 'pdbsym warm' print (GUID-age, 32 hex digits and the age,\n"
              "a GUID alone for a Portable PDB); CODE_FILE/CODE_ID for a remembered image;\n"
              "or a debug file name alone (ntdll.pdb) for every version of that file.\n"
              "Exit status 1 when nothing matched.\n"},
    {"verify", "usage: pdbsym cache verify [--fix] [--cache-dir DIR]\n\n"
               "Runs SQLite's integrity check, then loads every module and checks its\n"
               "counts, checksum and indices, and looks for unfinished downloads that\n"
               "ended processes left in the cache folder's tmp/.  Prints each problem;\n"
               "exit status 1 if any.  --fix removes the damaged modules (they are fetched\n"
               "again when needed) and those downloads.\n"},
    {"clear", "usage: pdbsym cache clear [--negative] [--cache-dir DIR]\n\n"
              "Removes every entry, and the unfinished downloads of ended processes, and\n"
              "gives the space back to the file system.  With\n"
              "--negative, removes only the remembered failures (modules that were not\n"
              "found or could not be read), so they are tried again at the next request.\n"},
};

static void fmt_time(int64_t t, char *buf, size_t cap) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *status_name(int st) {
  switch (st) {
  case 0: return "ok";
  case STORE_NEG_MISSING: return "missing";
  case STORE_NEG_MALFORMED: return "malformed";
  case STORE_NEG_FETCH_ERROR: return "fetch-error";
  default: return "unknown";
  }
}

/* ---- synthetic modules (tests only: _fill, _check) ---------------------------- */

static uint32_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return (uint32_t)(*x >> 16);
}

/* A deterministic module of about `lines` line rows, from (seed, index). */
static ps_err synth(symtab *st, uint32_t seed, uint32_t index, uint32_t lines) {
  uint64_t x = ((uint64_t)seed << 32 | index) * 0x9E3779B97F4A7C15ull + 1;
  st_init(st, NULL);
  st->ident.format = ST_FORMAT_WINDOWS;
  st->ident.age = 1;
  st->ident.machine = 0x8664;
  memcpy(st->ident.guid, &seed, 4);
  memcpy(st->ident.guid + 4, &index, 4);
  uint32_t files[16];
  char name[96];
  for (int i = 0; i < 16; i++) {
    snprintf(name, sizeof name, "d:\\src\\mod%u\\file%d.cpp", index, i);
    files[i] = st_cstr(st, name);
  }
  uint32_t rva = 0x1000, nfunc = 0, left = lines;
  while (left > 0) {
    uint32_t n = 1 + rnd(&x) % 24;
    if (n > left)
      n = left;
    uint32_t start = rva, file = files[rnd(&x) % 16], line = 1 + rnd(&x) % 5000;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t sz = 1 + rnd(&x) % 12;
      st_add_line(st, rva, (rnd(&x) & 3) ? sz : 0, (rnd(&x) % 17) ? line + i : ST_HIDDEN_LINE,
                  file);
      rva += sz;
    }
    snprintf(name, sizeof name, "ns%u::Class%u::method%u(int)", index, nfunc % 97, nfunc);
    st_add_func(st, start, rva - start, st_cstr(st, name), 0);
    if (rva - start > 8 && nfunc % 3 == 0) {
      snprintf(name, sizeof name, "inl%u", nfunc % 53);
      uint32_t a = st_add_inline(st, start, ST_NONE, 1, st_cstr(st, name));
      st_add_irange(st, a, start + 2, (rva - start) / 2, line + 100, files[nfunc % 16]);
      if (nfunc % 2 == 0) {
        uint32_t b = st_add_inline(st, start, a, 2, st_cstr(st, "inner"));
        st_add_irange(st, b, start + 3, 2, line + 200, files[(nfunc + 1) % 16]);
      }
    }
    if (nfunc % 5 == 0) {
      snprintf(name, sizeof name, "?pub%u@@YAXXZ", nfunc);
      st_add_public(st, rva + 4, st_cstr(st, name + 1), st_cstr(st, name));
    }
    rva += 16 + rnd(&x) % 64; /* a gap between functions */
    nfunc++;
    left -= n;
  }
  for (uint32_t m = 0; m < 50; m++) {
    snprintf(name, sizeof name, "NS.Type%u.Method%u", index, m);
    st_add_method(st, 0x06000001 + m, st_cstr(st, name), m % 7 == 6 ? 0x06000001 + m - 1 : 0);
    for (uint32_t k = 0; k < 6; k++) {
      st_seqpt sp = {0x06000001 + m, k * 7, k == 3 ? ST_HIDDEN_LINE : 10 + k, 10 + k,
                     (uint16_t)(k + 1), (uint16_t)(k + 9), files[k]};
      st_add_seqpt(st, &sp);
    }
  }
  return st_finish(st);
}

static bool same_str(const char *a, const char *b) {
  if (!a || !b)
    return a == b;
  return strcmp(a, b) == 0;
}

static bool same_answer(const st_answer *a, const st_answer *b) {
  if (a->status != b->status || a->nsyms != b->nsyms)
    return false;
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *x = &a->syms[i], *y = &b->syms[i];
    if (!same_str(x->function, y->function) || !same_str(x->mangled, y->mangled) ||
        !same_str(x->file, y->file) || !same_str(x->async_method, y->async_method) ||
        !same_str(x->user_method, y->user_method) ||
        !same_str(x->local_function, y->local_function) || x->generated != y->generated ||
        x->line != y->line || x->column != y->column || x->end_line != y->end_line ||
        x->end_column != y->end_column || x->function_offset != y->function_offset ||
        x->kickoff_token != y->kickoff_token || x->inlined != y->inlined ||
        x->hidden != y->hidden || x->has_line != y->has_line ||
        x->has_column != y->has_column || x->has_offset != y->has_offset)
      return false;
  }
  return true;
}

static void synth_key(char *buf, size_t cap, const char *prefix, uint32_t seed, uint32_t lines,
                      uint32_t i) {
  snprintf(buf, cap, "%ss%u-n%u-%u.pdb/%08X%08X%016X1", prefix, seed, lines, i, seed, i, 0u);
}

static int fill(store *s, const cache_opts *o) {
  char key[256];
  int status = 0;
  for (uint32_t i = 0; i < o->modules; i++) {
    symtab st;
    if (synth(&st, o->seed, i, o->lines) != PS_E_OK) {
      fprintf(stderr, "pdbsym cache _fill: out of memory building module %u\n", i);
      st_free(&st);
      return 1;
    }
    synth_key(key, sizeof key, o->prefix, o->seed, o->lines, i);
    ps_diag d;
    ps_diag_clear(&d);
    ps_err e = store_put(s, key, &st, "synthetic", &d);
    st_free(&st);
    if (e != PS_E_OK) {
      char buf[300];
      fprintf(stderr, "pdbsym cache _fill: %s\n", ps_diag_format(&d, buf, sizeof buf));
      status = 1;
      continue;
    }
    printf("stored %s\n", key);
    fflush(stdout);
  }
  return status;
}

typedef struct {
  char **keys;
  size_t n, cap;
  const char *prefix;
  const char *name; /* evict: debug file name to match, lowercase */
} key_list;

static bool collect(void *ctx, const store_module_info *m) {
  key_list *l = ctx;
  if (l->prefix && strncmp(m->key, l->prefix, strlen(l->prefix)) != 0)
    return true;
  if (l->prefix && m->status != 0)
    return true;
  if (l->name) {
    size_t n = strlen(l->name);
    if (strncmp(m->key, l->name, n) != 0 || m->key[n] != '/')
      return true;
  }
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 64;
    char **p = realloc(l->keys, nc * sizeof *p);
    if (!p)
      return false;
    l->keys = p;
    l->cap = nc;
  }
  size_t len = strlen(m->key) + 1;
  l->keys[l->n] = malloc(len);
  if (l->keys[l->n])
    memcpy(l->keys[l->n++], m->key, len);
  return true;
}

static void free_keys(key_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->keys[i]);
  free(l->keys);
}

/* Every complete synthetic module must give the same answers as a fresh copy. */
static int check(store *s, const cache_opts *o) {
  key_list l = {.prefix = o->prefix};
  if (store_list(s, collect, &l) != PS_E_OK) {
    fprintf(stderr, "pdbsym cache _check: cannot list the cache\n");
    return 1;
  }
  int status = 0;
  for (size_t i = 0; i < l.n; i++) {
    unsigned seed, lines, index;
    if (sscanf(l.keys[i] + strlen(o->prefix), "s%u-n%u-%u.pdb/", &seed, &lines, &index) != 3)
      continue;
    store_entry e;
    if (store_get(s, l.keys[i], &e) != STORE_HIT) {
      printf("bad %s: listed but not loadable\n", l.keys[i]);
      status = 1;
      continue;
    }
    symtab want;
    if (synth(&want, seed, index, lines) != PS_E_OK) {
      st_free(&want);
      store_release(s, &e);
      return 1;
    }
    static st_answer a, b;
    uint64_t bad = 0, n = 0;
    uint32_t end = want.nlines ? want.lines[want.nlines - 1].rva + 64 : 0;
    for (uint32_t rva = 0xF00; rva < end; rva++, n++) {
      st_lookup_rva(&want, rva, &a);
      st_lookup_rva(e.st, rva, &b);
      bad += !same_answer(&a, &b);
    }
    for (uint32_t t = 0x06000000; t < 0x06000040; t++)
      for (uint32_t il = 0; il < 48; il++, n++) {
        st_lookup_token(&want, t, il, &a);
        st_lookup_token(e.st, t, il, &b);
        bad += !same_answer(&a, &b);
      }
    if (bad) {
      printf("bad %s: %" PRIu64 " of %" PRIu64 " lookups differ\n", l.keys[i], bad, n);
      status = 1;
    } else {
      printf("ok %s %" PRIu64 " lookups\n", l.keys[i], n);
    }
    st_free(&want);
    store_release(s, &e);
  }
  free_keys(&l);
  return status;
}

/* ---- the subcommands ------------------------------------------------------------ */

static int do_stats(store *s) {
  store_stats st;
  if (store_get_stats(s, &st) != PS_E_OK) {
    fprintf(stderr, "pdbsym cache stats: cannot read %s; try 'pdbsym cache verify'\n",
            store_path(s));
    return 1;
  }
  printf("path: %s\n", store_path(s));
  printf("schema_version: %d\n", st.schema_version);
  printf("file_bytes: %" PRIu64 "\n", st.file_bytes);
  printf("wal_bytes: %" PRIu64 "\n", st.wal_bytes);
  printf("used_bytes: %" PRIu64 "\n", st.used_bytes);
  printf("free_bytes: %" PRIu64 "\n", st.free_bytes);
  printf("table_bytes: %" PRIu64 "\n", st.table_bytes);
  printf("max_bytes: %" PRIu64 "\n", st.max_bytes);
  printf("modules: %" PRIu64 "\n", st.modules);
  printf("negative_entries: %" PRIu64 "\n", st.negatives);
  printf("data_bytes: %" PRIu64 "\n", st.data_bytes);
  printf("line_rows: %" PRIu64 "\n", st.line_rows);
  return 0;
}

static bool print_row(void *ctx, const store_module_info *m) {
  (void)ctx;
  char when[32];
  fmt_time(m->last_used, when, sizeof when);
  printf("%s\t%s\t%" PRIu64 "\t%" PRIu64 "\t%s\t%s\n", when, status_name(m->status),
         m->nlines + m->nseqpts, m->data_bytes, m->key, m->status == 0 ? m->source : m->error);
  return true;
}

static int do_list(store *s) {
  printf("last_used\tstatus\trows\tbytes\tkey\tsource_or_error\n");
  if (store_list(s, print_row, NULL) != PS_E_OK) {
    fprintf(stderr, "pdbsym cache list: cannot read %s; try 'pdbsym cache verify'\n",
            store_path(s));
    return 1;
  }
  return 0;
}

/* The cache keys arg may name: a key in any case, DEBUG_FILE/DEBUG_ID with
 * the id in any form module.h reads (both formats' keys when the id has an
 * age: a Windows PDB's, and a Portable PDB's, whose key ignores it), or
 * CODE_FILE/CODE_ID.  Returns how many were written into keys. */
static int evict_keys(const char *file, const char *id, char keys[][300]) {
  module_id m;
  memset(&m, 0, sizeof m);
  const char *why;
  int n = 0;
  if (!module_parse_file_name(file, m.debug_file, sizeof m.debug_file, &why))
    return 0;
  bool has_age = false;
  if (module_parse_debug_id_ex(id, m.guid, &m.age, &has_age, &why)) {
    if (has_age)
      module_cache_key(&m, ST_FORMAT_WINDOWS, keys[n++], 300);
    module_cache_key(&m, ST_FORMAT_PORTABLE, keys[n++], 300);
  }
  uint32_t ts, size;
  if (module_parse_code_id(id, &ts, &size, &why)) {
    memcpy(m.code_file, m.debug_file, sizeof m.code_file);
    m.code_timestamp = ts;
    m.code_size = size;
    m.has_code_id = true;
    module_image_key(&m, keys[n++], 300);
  }
  return n;
}

static int do_evict(store *s, const char *arg, const char *id_arg) {
  char keys[3][300];
  int nk = 0;
  if (id_arg) {
    nk = evict_keys(arg, id_arg, keys);
  } else {
    const char *slash = strchr(arg, '/');
    if (slash && !strchr(slash + 1, '/') && (size_t)(slash - arg) < 300) {
      char file[300];
      memcpy(file, arg, (size_t)(slash - arg));
      file[slash - arg] = '\0';
      nk = evict_keys(file, slash + 1, keys);
    }
  }
  if (nk || id_arg) {
    int evicted = 0;
    for (int i = 0; i < nk; i++) {
      ps_err e = store_evict(s, keys[i]);
      if (e == PS_E_OK) {
        printf("evicted %s\n", keys[i]);
        evicted++;
      } else if (e != PS_E_NOT_FOUND) {
        fprintf(stderr, "pdbsym cache evict: %s: %s; is another pdbsym writing? try again\n",
                keys[i], ps_strerror(e));
        return 1;
      }
    }
    if (evicted)
      return 0;
    if (id_arg || nk) {
      fprintf(stderr, "pdbsym cache evict: no module %s%s%s in %s; 'pdbsym cache list' shows the keys\n",
              arg, id_arg ? " " : "", id_arg ? id_arg : "", store_path(s));
      return 1;
    }
  }
  ps_err e = store_evict(s, arg);
  if (e == PS_E_OK) {
    printf("evicted %s\n", arg);
    return 0;
  }
  if (e != PS_E_NOT_FOUND) {
    fprintf(stderr, "pdbsym cache evict: %s: %s; is another pdbsym writing? try again\n", arg,
            ps_strerror(e));
    return 1;
  }
  /* a debug file name: every version of it */
  char name[256];
  size_t n = strlen(arg);
  if (n >= sizeof name || strchr(arg, '/')) {
    fprintf(stderr, "pdbsym cache evict: no module '%s' in %s; 'pdbsym cache list' shows the keys\n",
            arg, store_path(s));
    return 1;
  }
  for (size_t i = 0; i <= n; i++)
    name[i] = (char)((arg[i] >= 'A' && arg[i] <= 'Z') ? arg[i] - 'A' + 'a' : arg[i]);
  key_list l = {.name = name};
  store_list(s, collect, &l);
  int status = l.n ? 0 : 1;
  for (size_t i = 0; i < l.n; i++) {
    if (store_evict(s, l.keys[i]) == PS_E_OK) {
      printf("evicted %s\n", l.keys[i]);
    } else {
      fprintf(stderr, "pdbsym cache evict: could not remove %s\n", l.keys[i]);
      status = 1;
    }
  }
  if (!l.n)
    fprintf(stderr, "pdbsym cache evict: no module '%s' in %s; 'pdbsym cache list' shows the keys\n",
            arg, store_path(s));
  free_keys(&l);
  return status;
}

static void print_problem(void *ctx, const char *key, const char *problem) {
  int *n = ctx;
  (*n)++;
  printf("problem: %s: %s\n", key, problem);
}

/* Unfinished downloads that ended processes left in DIR/tmp (a running
 * process's are left alone): removed with remove, else counted.  Returns the
 * number of files. */
static uint64_t sweep_downloads(const char *dir, bool remove) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s/tmp", dir);
  uint64_t files = 0, bytes = 0;
  ps_diag d;
  ps_diag_clear(&d);
  if (fetch_sweep_tmp(tmp, remove, &files, &bytes, &d) != PS_E_OK) {
    char msg[300];
    fprintf(stderr, "pdbsym cache: %s\n", ps_diag_format(&d, msg, sizeof msg));
  } else if (files) {
    printf("%s %" PRIu64 " unfinished download file%s (%" PRIu64 " bytes) in %s\n",
           remove ? "removed" : "problem: found", files, files == 1 ? "" : "s", bytes, tmp);
  }
  return files;
}

static int do_verify(store *s, const char *dir, bool fix) {
  int problems = 0;
  uint64_t checked = 0;
  ps_err e = store_verify(s, fix, print_problem, &problems, &checked);
  if (sweep_downloads(dir, fix) && !fix) {
    problems++;
    if (e == PS_E_OK)
      e = PS_E_CORRUPT;
  }
  printf("checked %" PRIu64 " modules, %d problems\n", checked, problems);
  if (e != PS_E_OK && !fix)
    fprintf(stderr, "pdbsym cache verify: problems found; 'pdbsym cache verify --fix' removes "
                    "damaged modules, 'pdbsym cache clear' empties the cache\n");
  return e == PS_E_OK ? 0 : 1;
}

static int do_clear(store *s, const char *dir, bool negative) {
  uint64_t removed = 0;
  if (!negative)
    sweep_downloads(dir, true);
  ps_err e = store_clear(s, negative, &removed);
  if (e != PS_E_OK) {
    fprintf(stderr, "pdbsym cache clear: %s (%s); is another pdbsym writing? try again\n",
            ps_strerror(e), store_path(s));
    return 1;
  }
  printf("removed %" PRIu64 " %s\n", removed, negative ? "negative entries" : "entries");
  return 0;
}

static bool need_value(int i, int argc, const char *opt) {
  if (i + 1 < argc)
    return true;
  fprintf(stderr, "pdbsym cache: %s needs a value; see 'pdbsym cache --help'\n", opt);
  return false;
}

int cmd_cache(int argc, char **argv) {
  if (argc < 2) {
    fputs(USAGE, stderr);
    return 2;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
    fputs(USAGE, stdout);
    return 0;
  }
  const char *help = NULL;
  for (size_t i = 0; i < sizeof SUB_HELP / sizeof SUB_HELP[0]; i++)
    if (!strcmp(sub, SUB_HELP[i][0]))
      help = SUB_HELP[i][1];
  bool hidden = !strcmp(sub, "_fill") || !strcmp(sub, "_check");
  if (!help && !hidden) {
    fprintf(stderr, "pdbsym cache: unknown subcommand '%s'; run 'pdbsym cache --help'\n", sub);
    return 2;
  }
  cache_opts o = {.modules = 1, .lines = 1000, .seed = 1, .prefix = "synth-"};
  const char *arg = NULL, *id_arg = NULL;
  settings set;
  settings_init(&set, argc, argv);
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    int used = settings_flag(&set, argc, argv, &i);
    if (used < 0)
      return 2;
    if (used > 0)
      continue;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(help ? help : USAGE, stdout);
      return 0;
    } else if (!strcmp(a, "--negative") && !strcmp(sub, "clear")) {
      o.negative = true;
    } else if (!strcmp(a, "--fix") && !strcmp(sub, "verify")) {
      o.fix = true;
    } else if (hidden && (!strcmp(a, "--modules") || !strcmp(a, "--lines") ||
                          !strcmp(a, "--seed"))) {
      if (!need_value(i, argc, a))
        return 2;
      uint32_t v = (uint32_t)strtoul(argv[++i], NULL, 10);
      if (a[2] == 'm')
        o.modules = v;
      else if (a[2] == 'l')
        o.lines = v;
      else
        o.seed = v;
    } else if (hidden && !strcmp(a, "--prefix")) {
      if (!need_value(i, argc, a))
        return 2;
      o.prefix = argv[++i];
    } else if (a[0] == '-') {
      fprintf(stderr, "pdbsym cache %s: unknown option '%s'; run 'pdbsym cache %s --help'\n", sub,
              a, sub);
      return 2;
    } else if (!arg && !strcmp(sub, "evict")) {
      arg = a;
    } else if (!id_arg && arg && !strcmp(sub, "evict")) {
      id_arg = a;
    } else {
      fprintf(stderr, "pdbsym cache %s: unexpected argument '%s'; run 'pdbsym cache %s --help'\n",
              sub, a, sub);
      return 2;
    }
  }
  o.dir = set.cache_dir;
  o.max_bytes = set.cache_max_bytes;
  if (!strcmp(sub, "evict") && !arg) {
    fprintf(stderr, "pdbsym cache evict: which module? give a key from 'pdbsym cache list' "
                    "or a debug file name (ntdll.pdb)\n");
    return 2;
  }
  if (!o.dir || !*o.dir) {
    fprintf(stderr, "pdbsym cache: no cache folder; set PDBSYM_CACHE_DIR or pass --cache-dir\n");
    return 2;
  }
  /* looking after a cache never makes one: a folder without a database is
   * a mistyped --cache-dir more often than an empty cache */
  char db[1200];
  struct stat st;
  snprintf(db, sizeof db, "%s/pdbsym.sqlite", o.dir);
  if (!hidden && stat(db, &st) != 0) {
    fprintf(stderr, "pdbsym cache %s: no cache in %s (no pdbsym.sqlite there); check --cache-dir "
                    "or PDBSYM_CACHE_DIR ('pdbsym warm' or 'pdbsym serve' make one)\n", sub, o.dir);
    return 1;
  }
  store_config cfg = {.dir = o.dir, .max_bytes = o.max_bytes};
  store *s = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  if (store_open(&cfg, &s, &d) != PS_E_OK) {
    char msg[300];
    fprintf(stderr, "pdbsym cache: cannot open the cache: %s\n",
            ps_diag_format(&d, msg, sizeof msg));
    return 1;
  }
  int status;
  if (!strcmp(sub, "stats"))
    status = do_stats(s);
  else if (!strcmp(sub, "list"))
    status = do_list(s);
  else if (!strcmp(sub, "evict"))
    status = do_evict(s, arg, id_arg);
  else if (!strcmp(sub, "verify"))
    status = do_verify(s, o.dir, o.fix);
  else if (!strcmp(sub, "clear"))
    status = do_clear(s, o.dir, o.negative);
  else if (!strcmp(sub, "_fill"))
    status = fill(s, &o);
  else
    status = check(s, &o);
  store_close(s);
  return status;
}
