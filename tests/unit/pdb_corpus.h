/*
 * pdb_corpus.h - helpers shared by the PDB reader tests: the shared corpus
 * location, whole-file reads, the MANIFEST.tsv rows, and reading a PDB into
 * a finished symtab.  Header-only (static functions) so each test stays one
 * executable.
 */
#ifndef PDBSYM_PDB_CORPUS_H
#define PDBSYM_PDB_CORPUS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_util.h"
#include "pdb.h"
#include "symtab.h"

/* "<source>/../shared/corpus", or NULL when absent */
static inline const char *corpus_dir(void) {
  static char buf[4096];
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  if (!src)
    src = ".";
  snprintf(buf, sizeof buf, "%s/../shared/corpus", src);
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/MANIFEST.tsv", buf);
  FILE *f = fopen(probe, "rb");
  if (!f)
    return NULL;
  fclose(f);
  return buf;
}

typedef struct {
  char *cols[16];
  int ncols;
} manifest_row;

/* Splits MANIFEST.tsv into rows (in place in *text, which the caller frees). */
static inline int manifest_rows(const char *dir, char **text, manifest_row **rows) {
  *text = NULL;
  *rows = NULL;
  char path[4200];
  snprintf(path, sizeof path, "%s/MANIFEST.tsv", dir);
  size_t len = 0;
  uint8_t *t = cu_read_raw(path, &len);
  if (!t)
    return 0;
  char *s = realloc(t, len + 1);
  if (!s) {
    free(t);
    return 0;
  }
  s[len] = '\0';
  int n = 0, cap = 256;
  manifest_row *r = malloc(sizeof *r * (size_t)cap);
  *text = s;
  *rows = r;
  char *save = NULL;
  for (char *line = strtok_r(s, "\n", &save); line && r; line = strtok_r(NULL, "\n", &save)) {
    if (n == cap) {
      cap *= 2;
      manifest_row *nr = realloc(r, sizeof *r * (size_t)cap);
      if (!nr)
        break;
      r = nr;
      *rows = r;
    }
    manifest_row *row = &r[n];
    row->ncols = 0;
    char *p = line;
    while (row->ncols < 16) {
      row->cols[row->ncols++] = p;
      char *tab = strchr(p, '\t');
      if (!tab)
        break;
      *tab = '\0';
      p = tab + 1;
    }
    n++;
  }
  *text = s;
  *rows = r;
  return n;
}

/* Reads path into st (finished on success). Returns the error code; the
 * diagnostic text goes to msg. */
static inline ps_err read_pdb_file(const char *path, symtab *st, ps_budget *b, char *msg, size_t cap) {
  size_t len = 0;
  uint8_t *data = cu_read_raw(path, &len);
  if (!data) {
    snprintf(msg, cap, "cannot read %.300s", path);
    return PS_E_IO;
  }
  ps_budget_init(b, PS_DEFAULT_BUDGET);
  st_init(st, b);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = pdb_read(data, len, b, st, &d);
  ps_diag_format(&d, msg, cap);
  free(data);
  return e;
}

static inline void guid_str(const uint8_t *g, char *out) {
  sprintf(out, "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X", g[3],
          g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13],
          g[14], g[15]);
}

/* ---- oracle lines (JSON lines of PdbDump / WinPdbDump) --------------------- */

/* a JSON string value after "key": into out (handles \\ and \"); false if absent */
static inline bool json_str(const char *line, const char *key, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(line, pat);
  if (!p)
    return false;
  p += strlen(pat);
  size_t n = 0;
  while (*p && *p != '"' && n + 1 < cap) {
    if (*p == '\\' && p[1]) {
      p++;
      if (*p == 'u' && p[1] && p[2] && p[3] && p[4]) {
        unsigned v = (unsigned)strtoul((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
        out[n++] = v < 0x80 ? (char)v : '?';
        p += 5;
        continue;
      }
      out[n++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
      p++;
      continue;
    }
    out[n++] = *p++;
  }
  out[n] = '\0';
  return true;
}

static inline bool json_num(const char *line, const char *key, long long *v) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  if (!p)
    return false;
  p += strlen(pat);
  if (*p == '"')
    p++;
  *v = strtoll(p, NULL, 0);
  return true;
}

#endif
