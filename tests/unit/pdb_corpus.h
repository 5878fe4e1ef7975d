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

/* whole file, malloc'ed; NULL if unreadable */
static inline uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      return NULL;
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    cap *= 2;
    uint8_t *nb = realloc(buf, cap);
    if (!nb)
      free(buf);
    buf = nb;
  }
  fclose(f);
  *len = n;
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
  uint8_t *t = slurp(path, &len);
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
  uint8_t *data = slurp(path, &len);
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

/* ---- PE: executable sections ------------------------------------------ */

typedef struct {
  uint32_t va, size;
} pe_range;

/* The IMAGE_SCN_MEM_EXECUTE sections of a PE image (at most max); 0 when d
 * is not a PE image. */
static inline int pe_code(const uint8_t *d, size_t n, pe_range *out, int max) {
  if (n < 0x40 || d[0] != 'M' || d[1] != 'Z')
    return 0;
  uint32_t pe = (uint32_t)d[0x3c] | (uint32_t)d[0x3d] << 8 | (uint32_t)d[0x3e] << 16 |
                (uint32_t)d[0x3f] << 24;
  if ((size_t)pe + 24 > n)
    return 0;
  unsigned nsec = d[pe + 6] | d[pe + 7] << 8, optsz = d[pe + 20] | d[pe + 21] << 8;
  size_t sec = pe + 24u + optsz;
  int k = 0;
  for (unsigned i = 0; i < nsec && k < max && sec + 40 * (i + 1) <= n; i++) {
    const uint8_t *s = d + sec + 40 * i;
    uint32_t vsz = (uint32_t)s[8] | (uint32_t)s[9] << 8 | (uint32_t)s[10] << 16 | (uint32_t)s[11] << 24;
    uint32_t va = (uint32_t)s[12] | (uint32_t)s[13] << 8 | (uint32_t)s[14] << 16 | (uint32_t)s[15] << 24;
    uint32_t ch = (uint32_t)s[36] | (uint32_t)s[37] << 8 | (uint32_t)s[38] << 16 | (uint32_t)s[39] << 24;
    if (ch & 0x20000000u) { /* IMAGE_SCN_MEM_EXECUTE */
      out[k].va = va;
      out[k].size = vsz;
      k++;
    }
  }
  return k;
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
