/*
 * bench_pdb.c - speed benchmark of the Windows PDB reader (issue 3, "Speed").
 *
 *   bench_pdb [-n COUNT] [-s SEED] [-r RVAS_OUT] [-a ANSWERS_OUT] FILE.pdb
 *
 * Maps FILE.pdb, reads it with pdb_read_with into a symtab (each stream's
 * mapped pages dropped once read, as pdbsym does), then answers COUNT
 * (default 100000) RVAs drawn inside functions with a fixed-seed generator
 * (a function chosen uniformly, then a byte inside it) with st_lookup_rva.
 * Prints the parse time, the lookup rate, peak RSS and st_memory_size; then
 * the lazy reader's cost of one address from a cold index (pdb_open, one
 * pdb_lookup_lazy, pdb_close) for the first 20 RVAs, each answer checked
 * against the whole table's.
 *
 *   -r FILE  writes the RVAs, one "0x..." per line, for llvm-symbolizer
 *            --relative-address (the same seed gives the same RVAs every run)
 *   -a FILE  writes every answer in llvm-symbolizer's layout (per frame,
 *            innermost first, a function line then "file:line:0"; a blank line
 *            after each address), so bench/compare.py can diff the two
 *
 * The RVAs are drawn before the lookups are timed; writing answers (-a) is
 * timed separately, so "lookups" is st_lookup_rva alone.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "filemap.h"
#include "pdb.h"
#include "symtab.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of this process: steadier than wall time on a shared machine */
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

/* xorshift64*: small, fixed-seed, the same sequence on every machine */
static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* A field of /proc/self/status in KiB ("VmHWM:"), or -1 */
static long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  long kib = -1;
  size_t klen = strlen(key);
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f))
      if (strncmp(line, key, klen) == 0) {
        kib = strtol(line + klen, NULL, 10);
        break;
      }
    fclose(f);
  }
  return kib;
}

/* VmHWM in KiB, or ru_maxrss when /proc is absent */
static long peak_rss_kib(void) {
  long kib = status_kib("VmHWM:");
  if (kib < 0) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
      kib = ru.ru_maxrss;
  }
  return kib;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_pdb [-n COUNT] [-s SEED] [-r RVAS_OUT] [-a ANSWERS_OUT] FILE.pdb\n");
  exit(2);
}

static void write_answer(FILE *f, const st_answer *a) {
  if (a->status != ST_OK || a->nsyms == 0) {
    fputs("??\n??:0:0\n\n", f);
    return;
  }
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *s = &a->syms[i];
    fprintf(f, "%s\n", s->function[0] ? s->function : "??");
    if (s->has_line && s->file)
      fprintf(f, "%s:%" PRIu32 ":0\n", s->file, s->line);
    else
      fputs("??:0:0\n", f);
  }
  fputc('\n', f);
}

int main(int argc, char **argv) {
  size_t count = 100000;
  uint64_t seed = 0x9E3779B97F4A7C15ULL;
  const char *rvas_out = NULL, *answers_out = NULL, *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      count = (size_t)strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 0) | 1u;
    else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
      rvas_out = argv[++i];
    else if (strcmp(argv[i], "-a") == 0 && i + 1 < argc)
      answers_out = argv[++i];
    else if (argv[i][0] == '-' || path)
      usage();
    else
      path = argv[i];
  }
  if (!path || count == 0)
    usage();

  ps_diag diag;
  ps_diag_clear(&diag);
  char msg[512];
  double t0 = now();
  filemap fm;
  if (filemap_open(&fm, path, 0, &diag) != PS_E_OK) {
    fprintf(stderr, "bench_pdb: %s\n", ps_diag_format(&diag, msg, sizeof msg));
    return 1;
  }
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &budget);
  double t1 = now(), c1 = cpu();
  pdb_options opts = {filemap_release, &fm, 0, 0};
  ps_err rc = pdb_read_with(fm.data, fm.len, &budget, &opts, &st, &diag);
  double t2 = now(), c2 = cpu();
  if (rc != PS_E_OK) {
    fprintf(stderr, "bench_pdb: %s\n", ps_diag_format(&diag, msg, sizeof msg));
    st_free(&st);
    filemap_close(&fm);
    return 1;
  }
  long rss_parse = peak_rss_kib();
  long rss_anon = status_kib("RssAnon:"), rss_file = status_kib("RssFile:");

  /* functions with code, to draw RVAs from */
  size_t nf = 0;
  for (size_t i = 0; i < st.nfuncs; i++)
    nf += st.funcs[i].size > 0;
  if (nf == 0) {
    fprintf(stderr, "bench_pdb: %s has no functions with code\n", path);
    return 1;
  }
  uint32_t *fidx = malloc(nf * sizeof *fidx);
  uint32_t *rvas = malloc(count * sizeof *rvas);
  if (!fidx || !rvas) {
    fprintf(stderr, "bench_pdb: out of memory\n");
    return 1;
  }
  nf = 0;
  for (size_t i = 0; i < st.nfuncs; i++)
    if (st.funcs[i].size > 0)
      fidx[nf++] = (uint32_t)i;
  uint64_t s = seed;
  for (size_t i = 0; i < count; i++) {
    const st_func *f = &st.funcs[fidx[rng_next(&s) % nf]];
    rvas[i] = f->rva + (uint32_t)(rng_next(&s) % f->size);
  }

  st_answer *ans = malloc(sizeof *ans);
  if (!ans) {
    fprintf(stderr, "bench_pdb: out of memory\n");
    return 1;
  }
  size_t found = 0, frames = 0;
  double t3 = now(), c3 = cpu();
  for (size_t i = 0; i < count; i++) {
    st_lookup_rva(&st, rvas[i], ans);
    found += ans->status == ST_OK;
    frames += (size_t)ans->nsyms;
  }
  double t4 = now(), c4 = cpu();

  double t5 = t4, t6 = t4;
  if (answers_out) {
    FILE *f = fopen(answers_out, "w");
    if (!f) {
      perror(answers_out);
      return 1;
    }
    static char obuf[1 << 20];
    setvbuf(f, obuf, _IOFBF, sizeof obuf);
    t5 = now();
    for (size_t i = 0; i < count; i++) {
      st_lookup_rva(&st, rvas[i], ans);
      write_answer(f, ans);
    }
    fclose(f);
    t6 = now();
  }
  if (rvas_out) {
    FILE *f = fopen(rvas_out, "w");
    if (!f) {
      perror(rvas_out);
      return 1;
    }
    for (size_t i = 0; i < count; i++)
      fprintf(f, "0x%" PRIx32 "\n", rvas[i]);
    fclose(f);
  }

  printf("file            %s (%zu bytes)\n", path, fm.len);
  printf("symtab          %zu funcs, %zu lines, %zu inline sites, %zu inline ranges, "
         "%zu publics, %zu string bytes\n",
         st.nfuncs, st.nlines, st.ninlines, st.niranges, st.npublics, st.strs_len);
  printf("map             %.3f s\n", t1 - t0);
  printf("parse           %.3f s wall, %.3f s CPU (pdb_read_with)\n", t2 - t1, c2 - c1);
  printf("lookups         %zu in %.3f s wall = %.2f M/s, %.3f s CPU = %.2f M/s "
         "(%zu found, %.2f frames each)\n",
         count, t4 - t3, (double)count / (t4 - t3) / 1e6, c4 - c3,
         (double)count / (c4 - c3) / 1e6, found, found ? (double)frames / (double)found : 0.0);
  if (answers_out)
    printf("answers         written in %.3f s to %s\n", t6 - t5, answers_out);
  /* the lazy reader: one address from a cold index, 20 times */
  size_t nlazy = count < 20 ? count : 20, same = 0, mods = 0;
  double lw[20], lc[20];
  st_answer *lans = malloc(sizeof *lans);
  for (size_t i = 0; lans && i < nlazy; i++) {
    ps_budget lb;
    ps_budget_init(&lb, PS_DEFAULT_BUDGET);
    double w0 = now(), k0 = cpu();
    pdb_lazy *z = NULL;
    if (pdb_open(fm.data, fm.len, &lb, NULL, &z, &diag) != PS_E_OK ||
        pdb_lookup_lazy(z, rvas[i], lans, &diag) != PS_E_OK) {
      fprintf(stderr, "bench_pdb: lazy: %s\n", ps_diag_format(&diag, msg, sizeof msg));
      return 1;
    }
    lw[i] = now() - w0;
    lc[i] = cpu() - k0;
    pdb_lazy_info li;
    pdb_lazy_stats(z, &li);
    mods += li.modules_read;
    st_lookup_rva(&st, rvas[i], ans);
    bool eq = lans->status == ans->status && lans->nsyms == ans->nsyms;
    for (int k = 0; eq && k < ans->nsyms; k++)
      eq = !strcmp(lans->syms[k].function, ans->syms[k].function) &&
           lans->syms[k].line == ans->syms[k].line;
    same += eq;
    pdb_close(z);
  }
  free(lans);
  for (size_t i = 1; i < nlazy; i++) /* sort for the median */
    for (size_t j = i; j > 0 && lw[j - 1] > lw[j]; j--) {
      double t = lw[j]; lw[j] = lw[j - 1]; lw[j - 1] = t;
    }
  for (size_t i = 1; i < nlazy; i++)
    for (size_t j = i; j > 0 && lc[j - 1] > lc[j]; j--) {
      double t = lc[j]; lc[j] = lc[j - 1]; lc[j - 1] = t;
    }
  if (nlazy)
    printf("lazy, 1 RVA     median %.2f ms wall, %.2f ms CPU from a cold pdb_open "
           "(%zu runs, %.1f modules read each, %zu of %zu answers equal the whole table's)\n",
           lw[nlazy / 2] * 1e3, lc[nlazy / 2] * 1e3, nlazy, (double)mods / (double)nlazy, same,
           nlazy);
  printf("st_memory_size  %.1f MiB\n", (double)st_memory_size(&st) / 1048576.0);
  printf("peak RSS        %.1f MiB after parse, %.1f MiB at end (after parse: %.1f MiB "
         "anonymous, %.1f MiB of mapped file)\n",
         (double)rss_parse / 1024.0, (double)peak_rss_kib() / 1024.0, (double)rss_anon / 1024.0,
         (double)rss_file / 1024.0);

  free(ans);
  free(rvas);
  free(fidx);
  st_free(&st);
  filemap_close(&fm);
  return 0;
}
