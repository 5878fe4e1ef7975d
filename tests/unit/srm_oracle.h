/*
 * srm_oracle.h - compares what ppdb_read/pe_method_names produce, answered
 * through st_lookup_token, with a PdbDump (System.Reflection.Metadata)
 * `.srm.jsonl` oracle: ids, documents (name, hash algorithm, hash, language),
 * every sequence point (line, columns, document, hidden, kickoff), an IL
 * offset past each point (the covering point), and method names
 * (`Ns.Type/Nested::Name<N>(sig)` -> `Ns.Type+Nested.Name`).  At a hidden
 * point the expected answer is not computed here: it is the .NET runtime's
 * own answer, or the contract's point where the runtime gives none, from
 * tests/oracles/hidden/portable.tsv.gz (hidden_oracle.h).
 * A kickoff the PDB does not record (older Portable PDBs list no iterators
 * in StateMachineMethod) but pdbsym gives from the image's
 * [IteratorStateMachine]/[AsyncStateMachine] attributes must be the one the
 * runtime's reflection gives (tests/fixtures/corpus-oracles/state-machines.jsonl).
 * Tallies per folder.  Test code only; needs corpus_util.h, jansson, test.h.
 */
#ifndef PDBSYM_SRM_ORACLE_H
#define PDBSYM_SRM_ORACLE_H

#include <ctype.h>
#include <stddef.h>
#include <jansson.h>

#include "corpus_util.h"
#include "hidden_oracle.h"
#include "pe.h"
#include "ppdb.h"
#include "symtab.h"
#include "test.h"

typedef struct {
  uint32_t token, il, sl, sc, el, ec, kickoff;
  bool hidden;
  const char *doc, *method; /* borrowed from the json */
} opt;

typedef struct {
  char folder[256];
  long points, agree, between, between_ok, names, names_ok, files, files_ok;
  long kick_meta; /* points whose kickoff came from the image, reflection agreeing */
} tally;

/* ---- the runtime's state machines (ClrDump, reflection) for corpus images */
typedef struct {
  char file[256];
  uint32_t move_next, kickoff;
} sm_pair;
static sm_pair *sm_pairs;
static size_t nsm_pairs;
static bool sm_loaded;
static const char *cur_image; /* the PE check_table takes names from, or NULL */

static inline void sm_load(void) {
  if (sm_loaded)
    return;
  sm_loaded = true;
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/corpus-oracles/state-machines.jsonl",
           src ? src : ".");
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return;
  size_t cap = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    if (!j)
      continue;
    const char *f = json_string_value(json_object_get(j, "file"));
    const char *mn = json_string_value(json_object_get(j, "move_next"));
    const char *ko = json_string_value(json_object_get(j, "kickoff"));
    if (f && mn && ko) {
      if (nsm_pairs == cap) {
        cap = cap ? cap * 2 : 64;
        sm_pairs = realloc(sm_pairs, cap * sizeof *sm_pairs);
      }
      sm_pair *p = &sm_pairs[nsm_pairs++];
      snprintf(p->file, sizeof p->file, "%s", f);
      p->move_next = (uint32_t)strtoul(mn, NULL, 16);
      p->kickoff = (uint32_t)strtoul(ko, NULL, 16);
    }
    json_decref(j);
  }
  free(text);
}

/* reflection's kickoff for a MoveNext of the image at path, 0 if none */
static inline uint32_t sm_kickoff(const char *image, uint32_t move_next) {
  sm_load();
  if (!image)
    return 0;
  size_t il = strlen(image);
  for (size_t i = 0; i < nsm_pairs; i++) {
    size_t fl = strlen(sm_pairs[i].file);
    if (sm_pairs[i].move_next == move_next && il > fl && image[il - fl - 1] == '/' &&
        strcmp(image + il - fl, sm_pairs[i].file) == 0)
      return sm_pairs[i].kickoff;
  }
  return 0;
}

static tally tallies[64];
static int ntallies;

static inline tally *tally_for(const char *rel) {
  char folder[256];
  const char *s = strchr(rel, '/');
  s = s ? strchr(s + 1, '/') : NULL;
  size_t n = s ? (size_t)(s - rel) : strlen(rel);
  if (n >= sizeof folder)
    n = sizeof folder - 1;
  memcpy(folder, rel, n);
  folder[n] = 0;
  for (int i = 0; i < ntallies; i++)
    if (strcmp(tallies[i].folder, folder) == 0)
      return &tallies[i];
  if (ntallies == 64)
    return &tallies[63];
  tally *t = &tallies[ntallies++];
  memset(t, 0, sizeof *t);
  snprintf(t->folder, sizeof t->folder, "%s", folder);
  return t;
}

static uint32_t hexu(json_t *v) {
  const char *s = json_string_value(v);
  return s ? (uint32_t)strtoul(s, NULL, 16) : 0;
}
static uint32_t numu(json_t *v) { return (uint32_t)json_integer_value(v); }

/* `Ns.Type/Nested::Name<2>(sig)` -> `Ns.Type+Nested.Name`: PdbDump appends a
 * generic method's arity as <N>; the contract's names carry none. */
static inline void convert_name(const char *in, char *out, size_t cap) {
  size_t o = 0;
  const char *sep = strstr(in, "::");
  for (const char *p = in; *p && o + 1 < cap; p++) {
    if (sep && p > sep && *p == '(')
      break;
    if (p == sep) {
      out[o++] = '.';
      p++;
    } else if (*p == '/' && (!sep || p < sep)) {
      out[o++] = '+';
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
  char *lt = strrchr(out, '<');
  if (lt && lt > out && o > 2 && out[o - 1] == '>' && lt[1] != '>' &&
      strspn(lt + 1, "0123456789") == (size_t)(out + o - 1 - (lt + 1)))
    *lt = 0;
}

static inline bool same_point(const st_symbol *s, const opt *p, bool hidden, long *file_mismatch) {
  bool ok = s->hidden == hidden;
  if (!p) /* hidden with no visible point: no line */
    return ok && !s->has_line;
  ok = ok && s->has_line && s->line == p->sl && s->column == p->sc && s->end_line == p->el &&
       s->end_column == p->ec;
  if (!s->file || strcmp(s->file, p->doc) != 0) {
    (*file_mismatch)++;
    ok = false;
  }
  return ok;
}

/* the hidden-point expectations (loaded at the first hidden point) and what
 * they checked */
static ho_table hidden_table;
static long hidden_probes, hidden_ok, hidden_runtime, hidden_above, hidden_missing;

/* The oracle point the answer at PROBE must give, in the method [b, e): the
 * covering point (the last one at the highest offset at or below PROBE) when
 * it is visible; at a hidden one the point tests/oracles/hidden names for
 * KEY's file (NULL: no line).  *row: that data row (NULL at a visible
 * point); *missing: the data has no row for the probe, or names no point. */
static inline const opt *expected_at(const char *key, const opt *pts, size_t b, size_t e,
                                     uint32_t probe, const ho_row **row, bool *missing) {
  size_t i = ho_expected(&hidden_table, "portable", key, pts[b].token, pts, sizeof *pts,
                         offsetof(opt, il), offsetof(opt, hidden), b, e, probe, row, missing);
  return i < e ? &pts[i] : NULL;
}

/* where the runtime answered, our line and column are its */
static inline bool runtime_agrees(const st_symbol *s, const ho_row *row) {
  return !row || row->rline < 0 || (s->line == (uint32_t)row->rline && s->column == (uint32_t)row->rcol);
}

static inline void hidden_count(const char *key, uint32_t token, uint32_t probe, const ho_row *row,
                                bool missing, bool ok) {
  hidden_probes++;
  hidden_ok += ok;
  hidden_runtime += row && row->rline >= 0;
  hidden_above += row && row->rline == -1 && row->cil >= 0;
  if (missing) {
    hidden_missing++;
    if (hidden_missing <= 5)
      fprintf(stderr, "  %s: 0x%08X+0x%x: hidden, and tests/oracles/hidden has no answer "
                      "(run tests/oracles/hidden/make.sh)\n", key, token, probe);
  }
}

/* prints what the hidden-point data checked; no probe may lack its row */
static inline void hidden_report(void) {
  printf("  hidden points: %ld probes, %ld right: %ld against the .NET runtime's answer, %ld "
         "against the contract's point above (the runtime gives none)\n",
         hidden_probes, hidden_ok, hidden_runtime, hidden_above);
  CHECK_EQ_U(hidden_missing, 0);
}

static int report_budget = 20;
static bool compare_kickoff = true; /* false for oracles without a kickoff field */

static const opt *sort_base;
static inline int cmp_idx(const void *a, const void *b) {
  uint32_t x = sort_base[*(const size_t *)a].token, y = sort_base[*(const size_t *)b].token;
  return x < y ? -1 : x > y;
}

/* any oracle point of a method, through an index sorted by token */
static inline const opt *by_token(const opt *pts, const size_t *idx, size_t n, uint32_t token) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (pts[idx[mid]].token < token)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && pts[idx[lo]].token == token ? &pts[idx[lo]] : NULL;
}

static inline void compare(const char *rel, const char *key, const symtab *st, opt *pts, size_t n,
                           bool names) {
  tally *t = tally_for(rel);
  size_t *idx = malloc((n ? n : 1) * sizeof *idx);
  for (size_t i = 0; i < n; i++)
    idx[i] = i;
  sort_base = pts;
  qsort(idx, n, sizeof *idx, cmp_idx);
  long file_mm = 0;
  size_t b = 0;
  while (b < n) {
    size_t e = b;
    while (e < n && pts[e].token == pts[b].token)
      e++;
    for (size_t j = b; j < e; j++) {
      const opt *p = &pts[j];
      st_answer a;
      st_lookup_token(st, p->token, p->il, &a);
      size_t last = j;
      while (last + 1 < e && pts[last + 1].il == p->il)
        last++;
      const ho_row *row;
      bool missing;
      const opt *x = expected_at(key, pts, b, e, p->il, &row, &missing);
      bool ok = !missing && a.status == ST_OK && a.nsyms == 1 &&
                same_point(&a.syms[0], x, pts[last].hidden, &file_mm) &&
                runtime_agrees(&a.syms[0], row);
      if (compare_kickoff && ok && a.syms[0].kickoff_token != p->kickoff) {
        if (p->kickoff == 0 && names && a.syms[0].kickoff_token &&
            sm_kickoff(cur_image, p->token) == a.syms[0].kickoff_token)
          t->kick_meta++;
        else
          ok = false;
      }
      if (pts[last].hidden && j == last)
        hidden_count(key, p->token, p->il, row, missing, ok);
      t->points++;
      if (ok)
        t->agree++;
      else if (report_budget-- > 0)
        fprintf(stderr, "  %s: 0x%08X+0x%x: got line %u col %u-%u:%u hidden %d kickoff %x/%x file %s\n",
                rel, p->token, p->il, a.nsyms ? a.syms[0].line : 0,
                a.nsyms ? a.syms[0].column : 0, a.nsyms ? a.syms[0].end_line : 0,
                a.nsyms ? a.syms[0].end_column : 0, a.nsyms ? a.syms[0].hidden : 0, a.nsyms ? a.syms[0].kickoff_token : 0, p->kickoff,
                a.nsyms && a.syms[0].file ? a.syms[0].file : "-");
      if (names && p->method && a.nsyms) {
        char want[1024];
        convert_name(p->method, want, sizeof want);
        t->names++;
        if (strcmp(want, a.syms[0].function) == 0)
          t->names_ok++;
        else if (report_budget-- > 0)
          fprintf(stderr, "  %s: 0x%08X name %s, oracle %s\n", rel, p->token,
                  a.syms[0].function, want);
        if (p->kickoff) {
          /* the kickoff's own name, where the oracle lists it */
          const opt *kp = by_token(pts, idx, n, p->kickoff);
          if (kp && kp->method) {
            convert_name(kp->method, want, sizeof want);
            t->names++;
            if (a.syms[0].async_method && strcmp(want, a.syms[0].async_method) == 0)
              t->names_ok++;
          }
        }
      }
      /* an offset between this point and the next answers with this point */
      if (j == last) {
        uint32_t probe = p->il + 1;
        if (last + 1 == e || pts[last + 1].il > probe) {
          st_lookup_token(st, p->token, probe, &a);
          long dummy = 0;
          const ho_row *row2;
          bool missing2;
          const opt *x2 = expected_at(key, pts, b, e, probe, &row2, &missing2);
          bool ok2 = !missing2 && a.status == ST_OK && a.nsyms == 1 &&
                     same_point(&a.syms[0], x2, p->hidden, &dummy) &&
                     runtime_agrees(&a.syms[0], row2);
          t->between++;
          t->between_ok += ok2;
          if (p->hidden)
            hidden_count(key, p->token, probe, row2, missing2, ok2);
        }
      }
    }
    b = e;
  }
  (void)file_mm;
  free(idx);
}

/* parses the oracle; returns the points (caller frees) and the pdb line */
static inline opt *load_oracle(const char *path, json_t ***keep, size_t *nkeep, size_t *n,
                        json_t **pdb) {
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return NULL;
  size_t cap = 1024, cnt = 0, kcap = 1024;
  opt *pts = malloc(cap * sizeof *pts);
  *keep = malloc(kcap * sizeof **keep);
  *nkeep = 0;
  *pdb = NULL;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    if (!j)
      continue;
    if (*nkeep == kcap) {
      kcap *= 2;
      *keep = realloc(*keep, kcap * sizeof **keep);
    }
    (*keep)[(*nkeep)++] = j;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (kind && strcmp(kind, "pdb") == 0)
      *pdb = j;
    if (!kind || strcmp(kind, "sp") != 0)
      continue;
    if (cnt == cap) {
      cap *= 2;
      pts = realloc(pts, cap * sizeof *pts);
    }
    opt *p = &pts[cnt++];
    p->token = hexu(json_object_get(j, "token"));
    p->il = numu(json_object_get(j, "il"));
    p->sl = numu(json_object_get(j, "sl"));
    p->sc = numu(json_object_get(j, "sc"));
    p->el = numu(json_object_get(j, "el"));
    p->ec = numu(json_object_get(j, "ec"));
    p->hidden = json_is_true(json_object_get(j, "hidden"));
    p->doc = json_string_value(json_object_get(j, "doc"));
    p->method = json_string_value(json_object_get(j, "method"));
    p->kickoff = hexu(json_object_get(j, "kickoff"));
    if (!p->doc)
      p->doc = "";
  }
  free(text);
  *n = cnt;
  return pts;
}

static inline void free_oracle(opt *pts, json_t **keep, size_t nkeep) {
  for (size_t i = 0; i < nkeep; i++)
    json_decref(keep[i]);
  free(keep);
  free(pts);
}

static inline bool oracle_path(const char *abs, char *out, size_t cap) {
  snprintf(out, cap, "%s.srm.jsonl", abs);
  if (cu_exists(out))
    return true;
  snprintf(out, cap, "%s.srm.jsonl.gz", abs);
  return cu_exists(out);
}

static inline void check_ids(const char *rel, const symtab *st, json_t *pdb) {
  if (!pdb)
    return;
  char g[37];
  cu_guid_str(st->ident.guid, g);
  const char *want = json_string_value(json_object_get(pdb, "id_guid"));
  if (!want || strcasecmp(g, want) != 0) {
    t_failed_checks++;
    fprintf(stderr, "  %s: id %s, oracle %s\n", rel, g, want ? want : "-");
  }
  CHECK_EQ_U(st->ident.stamp, hexu(json_object_get(pdb, "id_stamp")));
  CHECK_EQ_U(st->ident.format, ST_FORMAT_PORTABLE);
}

static inline void add_names(symtab *st, const char *pe_path, bool *have) {
  size_t len;
  uint8_t *pe = cu_read(pe_path, &len);
  *have = false;
  if (!pe)
    return;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  ps_err e = pe_method_names(pe, len, &b, st, &d);
  if (e == PS_E_OK)
    *have = true;
  else {
    char buf[256];
    fprintf(stderr, "  %s: names: %s\n", pe_path, ps_diag_format(&d, buf, sizeof buf));
  }
  free(pe);
}

static int files_seen;
static long docs_compared, docs_ok;

typedef struct {
  json_t **keep;
  size_t nkeep;
  const char *rel;
} doc_ctx;

static inline void hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    snprintf(out + 2 * i, 3, "%02x", p[i]);
  out[2 * n] = 0;
}

/* one Document row against the oracle's `document` line of the same row */
static inline void on_document(const ppdb_document *d, void *vctx) {
  doc_ctx *c = vctx;
  for (size_t i = 0; i < c->nkeep; i++) {
    json_t *j = c->keep[i];
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!kind || strcmp(kind, "document") != 0 ||
        (uint32_t)json_integer_value(json_object_get(j, "row")) != d->row)
      continue;
    char alg[40], lang[40], hash[2 * 64 + 1] = "";
    const char *an = ppdb_guid_name(d->hash_alg), *ln = ppdb_guid_name(d->language);
    cu_guid_str(d->hash_alg, alg);
    cu_guid_str(d->language, lang);
    for (char *p = alg; *p; p++)
      *p = (char)tolower((unsigned char)*p);
    for (char *p = lang; *p; p++)
      *p = (char)tolower((unsigned char)*p);
    if (d->hash_len <= 64)
      hex(d->hash, d->hash_len, hash);
    const char *w_name = json_string_value(json_object_get(j, "name"));
    const char *w_alg = json_string_value(json_object_get(j, "hash_alg"));
    const char *w_hash = json_string_value(json_object_get(j, "hash"));
    const char *w_lang = json_string_value(json_object_get(j, "language"));
    bool ok = w_name && strcmp(w_name, d->name) == 0 && w_alg &&
              strcmp(w_alg, an ? an : alg) == 0 && w_hash && strcmp(w_hash, hash) == 0 &&
              w_lang && strcmp(w_lang, ln ? ln : lang) == 0;
    docs_compared++;
    if (ok)
      docs_ok++;
    else
      fprintf(stderr, "  %s: document %u: %s %s %s %s, oracle %s %s %s %s\n", c->rel, d->row,
              d->name, an ? an : alg, hash, ln ? ln : lang, w_name ? w_name : "-",
              w_alg ? w_alg : "-", w_hash ? w_hash : "-", w_lang ? w_lang : "-");
    return;
  }
}

/* rel labels the tallies; key names the file read in tests/oracles/hidden */
static inline void check_table(const char *rel, const char *key, symtab *st, const char *oracle,
                               const char *names_pe, const uint8_t *pdb_data, size_t pdb_len) {
  json_t **keep;
  size_t nkeep, n;
  json_t *pdb;
  opt *pts = load_oracle(oracle, &keep, &nkeep, &n, &pdb);
  if (!pts) {
    fprintf(stderr, "  %s: no oracle\n", rel);
    return;
  }
  doc_ctx dc = {keep, nkeep, rel};
  ps_diag dd;
  ps_diag_clear(&dd);
  CHECK_EQ_U(ppdb_documents(pdb_data, pdb_len, on_document, &dc, &dd), PS_E_OK);
  bool names = false;
  if (names_pe)
    add_names(st, names_pe, &names);
  cur_image = names ? names_pe : NULL;
  check_ids(rel, st, pdb);
  tally *t = tally_for(rel);
  t->files++;
  long before = t->points - t->agree;
  compare(rel, key, st, pts, n, names);
  if (t->points - t->agree == before)
    t->files_ok++;
  free_oracle(pts, keep, nkeep);
  files_seen++;
}


#endif
