/*
 * winpdb_oracle.h - a Windows managed PDB's answers against the sequence
 * points Microsoft's DiaSymReader gave for it (X.pdb.winpdb.jsonl, made by
 * WinPdbDump: ../shared/corpus/README.md, tests/fixtures/managed).
 *
 * Every point, and the offset just past it where no point starts, is looked
 * up by (token, IL offset) and must give the covering point's line, columns,
 * end line and column and document.  At a hidden point the expected point is
 * the one tests/oracles/hidden/windows.tsv.gz names (the contract's rule,
 * applied to DiaSymReader's points outside pdbsym), and the answer must say
 * hidden.  Test code only; needs pdb_corpus.h (json_str, json_num), test.h.
 */
#ifndef PDBSYM_WINPDB_ORACLE_H
#define PDBSYM_WINPDB_ORACLE_H

#include <stddef.h>

#include "hidden_oracle.h"
#include "pdb_corpus.h"

typedef struct {
  uint32_t token, il, sl, sc, el, ec;
  bool hidden;
  char *doc;
} wp_point;

typedef struct {
  long checked, agree;  /* lookups, and those that gave the expected point */
  long hidden, missing; /* of them at a hidden point; without an expectation */
} wp_tally;

static ho_table wp_hidden; /* windows.tsv.gz, loaded at the first hidden point */

static inline wp_point *wp_load(const char *path, size_t *n) {
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 256;
  wp_point *v = malloc(cap * sizeof *v);
  char *line = malloc(1 << 16);
  while (v && line && fgets(line, 1 << 16, f)) {
    if (!strstr(line, "\"kind\":\"sp\""))
      continue;
    char tok[32], doc[2048];
    long long il, sl, sc, el, ec;
    if (!json_str(line, "token", tok, sizeof tok) || !json_num(line, "il", &il) ||
        !json_str(line, "doc", doc, sizeof doc) || !json_num(line, "sl", &sl) ||
        !json_num(line, "sc", &sc) || !json_num(line, "el", &el) || !json_num(line, "ec", &ec))
      continue;
    if (*n == cap) {
      cap *= 2;
      wp_point *nv = realloc(v, cap * sizeof *v);
      if (!nv)
        break;
      v = nv;
    }
    wp_point *p = &v[(*n)++];
    p->token = (uint32_t)strtoul(tok, NULL, 16);
    p->il = (uint32_t)il;
    p->sl = (uint32_t)sl;
    p->sc = (uint32_t)sc;
    p->el = (uint32_t)el;
    p->ec = (uint32_t)ec;
    p->hidden = strstr(line, "\"hidden\":true") != NULL;
    p->doc = strdup(doc);
  }
  free(line);
  fclose(f);
  return v;
}

static inline void wp_probe(const char *key, const symtab *st, const wp_point *v, size_t b,
                            size_t e, uint32_t probe, wp_tally *t) {
  st_answer a;
  st_lookup_token(st, v[b].token, probe, &a);
  const ho_row *row;
  bool missing;
  size_t xi = ho_expected(&wp_hidden, "windows", key, v[b].token, v, sizeof *v,
                          offsetof(wp_point, il), offsetof(wp_point, hidden), b, e, probe, &row,
                          &missing);
  size_t cov = b;
  for (size_t i = b; i < e && v[i].il <= probe; i++)
    cov = i;
  const wp_point *x = xi < e ? &v[xi] : NULL;
  const st_symbol *y = a.nsyms ? &a.syms[0] : NULL;
  bool ok = !missing && a.status == ST_OK && a.nsyms == 1 && y->hidden == v[cov].hidden;
  if (ok && x)
    ok = y->has_line && y->has_column && y->line == x->sl && y->column == x->sc &&
         y->end_line == x->el && y->end_column == x->ec && strcmp(y->file ? y->file : "", x->doc) == 0;
  else if (ok)
    ok = !y->has_line;
  t->checked++;
  t->agree += ok;
  t->hidden += v[cov].hidden;
  t->missing += missing;
  if (!ok && t->checked - t->agree <= 5)
    fprintf(stderr, "%s: token 0x%08X il %u%s: want %u:%u-%u:%u %s, got %u:%u-%u:%u%s%s\n", key,
            v[b].token, probe, v[cov].hidden ? " (hidden)" : "", x ? x->sl : 0, x ? x->sc : 0,
            x ? x->el : 0, x ? x->ec : 0, x ? x->doc : "(no line)", y ? y->line : 0,
            y ? y->column : 0, y ? y->end_line : 0, y ? y->end_column : 0,
            y && y->hidden ? " hidden" : "", missing ? " (no row in tests/oracles/hidden)" : "");
}

/* Compares st with the oracle at PATH; KEY names the PDB in windows.tsv.gz. */
static inline bool wp_check(const char *path, const char *key, const symtab *st, wp_tally *t) {
  size_t n;
  wp_point *v = wp_load(path, &n);
  if (!v)
    return false;
  for (size_t b = 0; b < n;) {
    size_t e = b;
    while (e < n && v[e].token == v[b].token)
      e++;
    for (size_t j = b; j < e; j++) {
      if (j + 1 < e && v[j + 1].il == v[j].il)
        continue; /* the last point at an offset covers it */
      wp_probe(key, st, v, b, e, v[j].il, t);
      if (j + 1 == e || v[j + 1].il > v[j].il + 1)
        wp_probe(key, st, v, b, e, v[j].il + 1, t);
    }
    b = e;
  }
  for (size_t i = 0; i < n; i++)
    free(v[i].doc);
  free(v);
  return true;
}

#endif
