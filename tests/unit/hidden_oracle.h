/*
 * hidden_oracle.h - the expected answers at hidden sequence points, made
 * outside pdbsym by tests/oracles/hidden/make.sh (README.md there):
 *   portable.tsv.gz  the .NET runtime's own answers (StackTraceSymbols.
 *                    GetSourceLineInfo) for every Portable PDB of the corpus
 *                    and the fixtures;
 *   windows.tsv.gz   the contract's answers on DiaSymReader's points
 *                    (.winpdb.jsonl) for every Windows managed PDB.
 * One row per probe (token, IL offset) whose covering point is hidden:
 *   key token il runtime contract note
 * key names the file read ("corpus/portable-pdb/...", "fixtures/managed/...");
 * runtime is "line:column", "-" (the runtime gives none) or "." (not asked);
 * contract is the point the contract's rule picks, "IL#k" (the k-th point at
 * IL offset IL in the method's point order), or "-" (none: no line).  A test
 * resolves IL#k among the points of its own oracle file and compares every
 * field; where the runtime answered it also compares line and column with
 * the runtime's.  Test code only.
 */
#ifndef PDBSYM_HIDDEN_ORACLE_H
#define PDBSYM_HIDDEN_ORACLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct {
  const char *key; /* into the table's text */
  uint32_t token, il;
  int rline, rcol; /* the runtime's answer; rline -1: none, -2: not asked */
  int cil, ck;     /* the contract's point IL#k; cil -1: none */
  const char *note;
} ho_row;

typedef struct {
  ho_row *v;
  size_t n;
  char *text;
  bool loaded;
} ho_table;

static int ho_cmp(const void *a, const void *b) {
  const ho_row *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c)
    return c;
  if (x->token != y->token)
    return x->token < y->token ? -1 : 1;
  return x->il < y->il ? -1 : x->il > y->il;
}

/* Loads tests/oracles/hidden/SET.tsv.gz (SET "portable" or "windows"). */
static inline bool ho_load(const char *set, ho_table *t) {
  memset(t, 0, sizeof *t);
  t->loaded = true;
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/oracles/hidden/%s.tsv.gz", src ? src : ".", set);
  gzFile f = gzopen(path, "rb");
  if (!f)
    return false;
  size_t cap = 1 << 20, len = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (!buf)
      break;
    if (len == cap) {
      char *nb = realloc(buf, 2 * cap + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    int got = gzread(f, buf + len, (unsigned)(cap - len));
    if (got <= 0)
      break;
    len += (size_t)got;
  }
  gzclose(f);
  if (!buf)
    return false;
  buf[len] = '\0';
  t->text = buf;
  size_t rows = 0;
  for (size_t i = 0; i < len; i++)
    rows += buf[i] == '\n';
  t->v = calloc(rows + 1, sizeof *t->v);
  if (!t->v)
    return false;
  char *save = NULL;
  for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#')
      continue;
    char *c[6];
    int k = 0;
    for (char *p = line; k < 6; k++) {
      c[k] = p;
      char *tab = strchr(p, '\t');
      if (!tab) {
        k++;
        break;
      }
      *tab = '\0';
      p = tab + 1;
    }
    if (k != 6)
      continue;
    ho_row *r = &t->v[t->n++];
    r->key = c[0];
    r->token = (uint32_t)strtoul(c[1], NULL, 16);
    r->il = (uint32_t)strtoul(c[2], NULL, 10);
    r->rline = c[3][0] == '.' ? -2 : c[3][0] == '-' ? -1 : atoi(c[3]);
    r->rcol = r->rline >= 0 && strchr(c[3], ':') ? atoi(strchr(c[3], ':') + 1) : 0;
    r->cil = c[4][0] == '-' ? -1 : atoi(c[4]);
    r->ck = r->cil >= 0 && strchr(c[4], '#') ? atoi(strchr(c[4], '#') + 1) : 0;
    r->note = c[5];
  }
  qsort(t->v, t->n, sizeof *t->v, ho_cmp);
  return t->n > 0;
}

static inline const ho_row *ho_find(const ho_table *t, const char *key, uint32_t token,
                                    uint32_t il) {
  ho_row want = {.key = key, .token = token, .il = il};
  return bsearch(&want, t->v, t->n, sizeof *t->v, ho_cmp);
}

/* how many rows a file has (a file the data knows nothing about has none) */
static inline size_t ho_count(const ho_table *t, const char *key) {
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++)
    n += strcmp(t->v[i].key, key) == 0;
  return n;
}

/* The point a lookup at PROBE must answer with, in one method's points
 * pts[b, e) (structs of STRIDE bytes, sorted by IL offset, with a uint32_t IL
 * offset at OFF_IL and a bool hidden flag at OFF_HIDDEN): the covering point
 * (the last one at the highest offset at or below PROBE) when it is visible;
 * at a hidden one, the point T's row for (KEY, TOKEN, PROBE) names.  Returns
 * its index, or e for "no line" (the row says none, or no point covers
 * PROBE).  *row: the row used (NULL at a visible point); *missing: there is
 * no row, or it names no point of pts (a failure for the caller). */
static inline size_t ho_expected(ho_table *t, const char *set, const char *key, uint32_t token,
                                 const void *pts, size_t stride, size_t off_il, size_t off_hidden,
                                 size_t b, size_t e, uint32_t probe, const ho_row **row,
                                 bool *missing) {
  const uint8_t *base = pts;
#define HO_IL(i) (*(const uint32_t *)(const void *)(base + (i) * stride + off_il))
#define HO_HIDDEN(i) (*(const bool *)(const void *)(base + (i) * stride + off_hidden))
  *row = NULL;
  *missing = false;
  size_t cov = e;
  for (size_t i = b; i < e && HO_IL(i) <= probe; i++)
    cov = i;
  if (cov == e)
    return e;
  if (!HO_HIDDEN(cov))
    return cov;
  if (!t->loaded && !ho_load(set, t))
    fprintf(stderr, "  tests/oracles/hidden/%s.tsv.gz unreadable\n", set);
  *row = ho_find(t, key, token, probe);
  if (!*row) {
    *missing = true;
    return e;
  }
  if ((*row)->cil < 0)
    return e;
  int k = 0;
  for (size_t i = b; i < e; i++)
    if (HO_IL(i) == (uint32_t)(*row)->cil && k++ == (*row)->ck)
      return i;
  *missing = true;
  return e;
#undef HO_IL
#undef HO_HIDDEN
}

static inline void ho_free(ho_table *t) {
  free(t->v);
  free(t->text);
  memset(t, 0, sizeof *t);
}

#endif
