/*
 * bench_store.c - figures for the SQLite line-table cache (server/cache/).
 *
 *   bench_store [LINE_ROWS] [DIR]     (default 5000000 rows, a temp folder)
 *   bench_store --flat                ten times more modules than the cap holds
 *
 * Builds a synthetic native table of LINE_ROWS line rows (functions of 1-24
 * lines, some inline sites and publics), then prints: ingest time and rows per
 * second (store_put, one transaction), database bytes per line row, the time
 * to load the module back into memory in a fresh store (store_get on a cold
 * hot set), and warm lookups per second through the hot set (store_get +
 * st_lookup_rva + store_release per frame) against a bare st_lookup_rva on
 * the same table, as a ratio.
 *
 * --flat ingests 200 distinct modules of 200 000 line rows (about 4 MB of
 * arrays each, 800 MB in all) under an 80 MB cap and a 40 MB hot set, getting
 * each one back through the hot set, and prints RSS and database size every
 * 20 modules: both must stay flat.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

/* the temp folder and everything in it (the database, tables/) */
static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void rm_tree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint32_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return (uint32_t)(*x >> 16);
}

static void build_seeded(symtab *st, uint32_t rows, uint64_t seed) {
  uint64_t x = 88172645463325252ull + seed * 0x9E3779B97F4A7C15ull;
  st_init(st, NULL);
  st->ident.format = ST_FORMAT_WINDOWS;
  uint32_t files[64];
  char name[96];
  for (int i = 0; i < 64; i++) {
    snprintf(name, sizeof name, "d:\\os\\src\\component%d\\file%d.cpp", i / 4, i);
    files[i] = st_cstr(st, name);
  }
  uint32_t rva = 0x1000, f = 0;
  while (st->nlines < rows) {
    uint32_t n = 1 + rnd(&x) % 24, start = rva, line = 1 + rnd(&x) % 3000;
    uint32_t file = files[rnd(&x) % 64];
    for (uint32_t i = 0; i < n && st->nlines < rows; i++) {
      uint32_t sz = 1 + rnd(&x) % 12;
      st_add_line(st, rva, sz, line + i, file);
      rva += sz;
    }
    snprintf(name, sizeof name, "Namespace::Class%u::Method%u", f % 5000, f);
    st_add_func(st, start, rva - start, st_cstr(st, name), 0);
    if (f % 4 == 0 && rva - start > 4) {
      uint32_t a = st_add_inline(st, start, ST_NONE, 1, st_cstr(st, "inlined_helper"));
      st_add_irange(st, a, start + 1, (rva - start) / 2, line + 7, file);
    }
    if (f % 3 == 0)
      st_add_public(st, start, st_cstr(st, name), 0);
    rva += 16;
    f++;
  }
  if (st_finish(st) != PS_E_OK) {
    fprintf(stderr, "build failed\n");
    exit(1);
  }
}

static void build(symtab *st, uint32_t rows) { build_seeded(st, rows, 0); }

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t fsize(const char *p);

static int flat(void) {
  char dir[] = "/tmp/bench_store_flat.XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  store_config cfg = {.dir = dir, .max_bytes = 80u << 20, .mem_max_bytes = 40u << 20};
  store *s;
  ps_diag d;
  if (store_open(&cfg, &s, &d) != PS_E_OK)
    return 1;
  char path[300], wal[310];
  snprintf(path, sizeof path, "%s/pdbsym.sqlite", dir);
  snprintf(wal, sizeof wal, "%s-wal", path);
  double t0 = now();
  uint64_t rows = 0;
  for (int i = 0; i < 200; i++) {
    symtab st;
    build_seeded(&st, 200000, (uint64_t)i + 1);
    rows += st.nlines;
    char key[64];
    snprintf(key, sizeof key, "flat%d.pdb/%032d1", i, i);
    if (store_put(s, key, &st, "bench", &d) != PS_E_OK)
      return 1;
    st_free(&st);
    store_entry e;
    if (store_get(s, key, &e) != STORE_HIT)
      return 1;
    store_release(s, &e);
    if (i % 20 == 19) {
      store_stats ss;
      store_get_stats(s, &ss);
      printf("after %3d modules (%5.0f MB of line rows): RSS %4.0f MB, cache files %5.1f MB, WAL %4.1f MB,"
             " %llu modules on disk, %llu in memory (%.1f MB)\n",
             i + 1, (double)rows * 16 / 1e6, (double)rss_bytes() / 1e6,
             (double)store_files_bytes(dir) / 1e6, (double)fsize(wal) / 1e6,
             (unsigned long long)ss.modules, (unsigned long long)ss.hot_modules,
             (double)ss.hot_bytes / 1e6);
    }
  }
  printf("%.1f s for %llu line rows\n", now() - t0, (unsigned long long)rows);
  store_close(s);
  rm_tree(dir);
  return 0;
}

static uint64_t fsize(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--flat"))
    return flat();
  uint32_t rows = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 5000000;
  char dir[256];
  if (argc > 2) {
    snprintf(dir, sizeof dir, "%s", argv[2]);
  } else {
    snprintf(dir, sizeof dir, "/tmp/bench_store.XXXXXX");
    if (!mkdtemp(dir))
      return 1;
  }
  symtab st;
  double t0 = now();
  build(&st, rows);
  double t_build = now() - t0;
  printf("table: %zu line rows, %zu functions, %zu inline ranges, %zu publics, %zu string bytes"
         " (built in %.2f s)\n", st.nlines, st.nfuncs, st.niranges, st.npublics, st.strs_len,
         t_build);

  store_config cfg = {.dir = dir, .max_bytes = (uint64_t)8 << 30, .mem_max_bytes = (uint64_t)2 << 30};
  store *s;
  ps_diag d;
  if (store_open(&cfg, &s, &d) != PS_E_OK)
    return 1;
  t0 = now();
  if (store_put(s, "bench.pdb/0123456789ABCDEF0123456789ABCDEF1", &st, "bench", &d) != PS_E_OK) {
    char b[300];
    fprintf(stderr, "put: %s\n", ps_diag_format(&d, b, sizeof b));
    return 1;
  }
  double t_put = now() - t0;
  store_close(s);
  char path[300];
  snprintf(path, sizeof path, "%s/pdbsym.sqlite", dir);
  uint64_t bytes = store_files_bytes(dir);
  printf("ingest: %.3f s, %.2f M line rows/s; cache files (database and table file) %" PRIu64
         " bytes, %.2f bytes per line row (all arrays included)\n", t_put, (double)st.nlines / t_put / 1e6, bytes,
         (double)bytes / (double)st.nlines);

  if (store_open(&cfg, &s, &d) != PS_E_OK)
    return 1;
  store_entry e;
  t0 = now();
  if (store_get(s, "bench.pdb/0123456789ABCDEF0123456789ABCDEF1", &e) != STORE_HIT)
    return 1;
  double t_load = now() - t0;
  printf("load (cold hot set, file in the page cache): %.3f s, %.2f M line rows/s\n", t_load,
         (double)st.nlines / t_load / 1e6);
  store_release(s, &e);

  enum { N = 2000000 };
  uint32_t *rvas = malloc(N * sizeof *rvas);
  uint64_t x = 1234567;
  uint32_t end = st.lines[st.nlines - 1].rva;
  for (int i = 0; i < N; i++)
    rvas[i] = 0x1000 + rnd(&x) % (end - 0x1000);
  static st_answer a;
  uint64_t sink = 0;
  t0 = now();
  for (int i = 0; i < N; i++) {
    st_lookup_rva(&st, rvas[i], &a);
    sink += a.syms[0].line;
  }
  double t_bare = now() - t0;
  t0 = now();
  for (int i = 0; i < N; i++) {
    store_get(s, "bench.pdb/0123456789ABCDEF0123456789ABCDEF1", &e);
    st_lookup_rva(e.st, rvas[i], &a);
    sink += a.syms[0].line;
    store_release(s, &e);
  }
  double t_hot = now() - t0;
  printf("lookups: bare sorted arrays %.2f M/s; through the hot set (get+lookup+release per frame)"
         " %.2f M/s, ratio %.2f (checksum %" PRIu64 ")\n",
         N / t_bare / 1e6, N / t_hot / 1e6, t_bare / t_hot, sink);
  free(rvas);
  store_close(s);
  st_free(&st);
  if (argc <= 2)
    rm_tree(dir);
  return 0;
}
