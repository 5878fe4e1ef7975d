/*
 * bench_ppdb.c - reads a Portable PDB (default: the corpus'
 * System.Private.CoreLib.pdb) and its assembly for names, then answers every
 * sequence point through st_lookup_token; prints the best of N runs.  With
 * PDBSYM_PDBDUMP set to a command (e.g. "dotnet /path/PdbDump.dll"), runs
 * `$PDBSYM_PDBDUMP --tsv --pdb PDB PE > /dev/null` in the same run, which
 * reads the same PDB with System.Reflection.Metadata and prints every point,
 * and prints the ratio of wall times (PdbDump's includes runtime start-up and
 * its output).
 *   bench_ppdb [PDB [PE]] [runs]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pe.h"
#include "ppdb.h"
#include "symtab.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(d, 1, (size_t)(n > 0 ? n : 0), f);
  fclose(f);
  return d;
}

int main(int argc, char **argv) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char pdb_path[4096], pe_path[4096];
  snprintf(pdb_path, sizeof pdb_path, "%s", argc > 1 ? argv[1] : "");
  snprintf(pe_path, sizeof pe_path, "%s", argc > 2 ? argv[2] : "");
  if (argc <= 1) {
    snprintf(pdb_path, sizeof pdb_path,
             "%s/../shared/corpus/portable-pdb/coverlet/System.Private.CoreLib.pdb",
             src ? src : ".");
    snprintf(pe_path, sizeof pe_path,
             "%s/../shared/corpus/pe/coverlet/System.Private.CoreLib.dll", src ? src : ".");
  }
  int runs = argc > 3 ? atoi(argv[3]) : 5;
  size_t len, pe_len = 0;
  uint8_t *data = slurp(pdb_path, &len);
  uint8_t *pe = pe_path[0] ? slurp(pe_path, &pe_len) : NULL;
  if (!data) {
    fprintf(stderr, "bench_ppdb: cannot read %s\n", pdb_path);
    return 77;
  }
  double best_read = 1e9, best_look = 1e9, best_names = 1e9;
  size_t npoints = 0, nmethods = 0;
  unsigned long sink = 0;
  for (int r = 0; r < runs; r++) {
    ps_budget b;
    ps_budget_init(&b, PS_DEFAULT_BUDGET);
    symtab st;
    st_init(&st, &b);
    ps_diag d;
    ps_diag_clear(&d);
    double t0 = now();
    if (ppdb_read(data, len, &b, &st, &d) != PS_E_OK) {
      char buf[256];
      fprintf(stderr, "bench_ppdb: %s\n", ps_diag_format(&d, buf, sizeof buf));
      return 1;
    }
    double t1 = now();
    if (pe)
      pe_method_names(pe, pe_len, &b, &st, &d);
    double t2 = now();
    st_answer a;
    for (size_t i = 0; i < st.nseqpts; i++) {
      st_lookup_token(&st, st.seqpts[i].token, st.seqpts[i].il, &a);
      sink += a.syms[0].line;
    }
    double t3 = now();
    npoints = st.nseqpts;
    nmethods = st.nmethods;
    if (t1 - t0 < best_read)
      best_read = t1 - t0;
    if (t2 - t1 < best_names)
      best_names = t2 - t1;
    if (t3 - t2 < best_look)
      best_look = t3 - t2;
    st_free(&st);
  }
  double ours = best_read + best_names + best_look;
  printf("pdbsym: %s (%zu bytes): %zu methods, %zu points\n", pdb_path, len, nmethods, npoints);
  printf("  read %.1f ms, names %.1f ms, answer every point %.1f ms (%.0f ns/lookup); "
         "total %.1f ms (best of %d)\n",
         best_read * 1e3, best_names * 1e3, best_look * 1e3,
         npoints ? best_look * 1e9 / (double)npoints : 0.0, ours * 1e3, runs);
  const char *dump = getenv("PDBSYM_PDBDUMP");
  if (dump && *dump) {
    char cmd[12288];
    snprintf(cmd, sizeof cmd, "%s --tsv --pdb '%s' '%s' > /dev/null", dump, pdb_path,
             pe_path[0] ? pe_path : pdb_path);
    double best = 1e9;
    for (int r = 0; r < (runs < 3 ? runs : 3); r++) {
      double t0 = now();
      int rc = system(cmd);
      double t = now() - t0;
      if (rc != 0)
        fprintf(stderr, "bench_ppdb: PdbDump exited with %d\n", rc);
      if (t < best)
        best = t;
    }
    printf("PdbDump (System.Reflection.Metadata): %.1f ms wall (best of %d); ratio %.1fx\n",
           best * 1e3, runs < 3 ? runs : 3, best / ours);
  }
  return sink == 0xFFFFFFFFul; /* keep the lookups */
}
