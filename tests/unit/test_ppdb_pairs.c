/*
 * test_ppdb_pairs.c - the Windows and Portable builds of the same source
 * answer identically.  The symreader-converter / symreader-portable corpus
 * pairs hold X.pdb (/debug:full) and X.pdbx (/debug:portable); each Portable
 * X.pdbx, read by ppdb_read and answered by st_lookup_token, is compared with
 * what the Windows twin says: its `.seqpoints.tsv` (token, IL offset, line or
 * hidden, document) and, where present, its `.winpdb.jsonl` (Microsoft's
 * DiaSymReader: lines and columns).  At hidden points the expected point is
 * the one tests/oracles/hidden names for the Portable twin (the .NET
 * runtime's own answer, else the contract's point above), looked up among
 * the Windows twin's points.
 * Documents are compared by file name: one pair (symreader-portable Async)
 * was built in two folders.
 */
#include <jansson.h>

#include <stddef.h>

#include "corpus_util.h"
#include "hidden_oracle.h"
#include "ppdb.h"
#include "symtab.h"
#include "test.h"

typedef struct {
  uint32_t token, il, sl, sc, el, ec;
  bool hidden, cols, nopoints;
  char doc[512];
} pt;

static char corpus[1024];
static long compared, agree, empty_methods, empty_ok, docs_full_differ;
static ho_table hidden;
static long hidden_probes, hidden_runtime, hidden_missing;

static const char *base_name(const char *p) {
  const char *a = strrchr(p, '\\'), *b = strrchr(p, '/');
  const char *s = a > b ? a : b;
  return s ? s + 1 : p;
}

static void compare(const char *label, const char *key, const symtab *st, pt *v, size_t n) {
  size_t b = 0;
  while (b < n) {
    size_t e = b;
    while (e < n && v[e].token == v[b].token)
      e++;
    for (size_t j = b; j < e; j++) {
      st_answer a;
      st_lookup_token(st, v[j].token, v[j].nopoints ? 0 : v[j].il, &a);
      if (v[j].nopoints) {
        empty_methods++;
        if (a.nsyms == 0 || !a.syms[0].has_line)
          empty_ok++;
        continue;
      }
      size_t last = j;
      while (last + 1 < e && v[last + 1].il == v[j].il)
        last++;
      const ho_row *row;
      bool missing;
      size_t xi = ho_expected(&hidden, "portable", key, v[j].token, v, sizeof *v, offsetof(pt, il),
                              offsetof(pt, hidden), b, e, v[j].il, &row, &missing);
      const pt *x = xi < e ? &v[xi] : NULL;
      const st_symbol *s = a.nsyms ? &a.syms[0] : NULL;
      bool ok = !missing && s && s->hidden == v[last].hidden;
      if (v[last].hidden) {
        hidden_probes++;
        hidden_missing += missing;
        if (row && row->rline >= 0) { /* the runtime's own line and column */
          hidden_runtime++;
          ok = ok && s->line == (uint32_t)row->rline && (!x || !x->cols || s->column == (uint32_t)row->rcol);
        }
      }
      if (ok && !x)
        ok = !s->has_line;
      else if (ok) {
        ok = s->has_line && s->line == x->sl && s->file &&
             strcmp(base_name(s->file), base_name(x->doc)) == 0;
        if (ok && x->cols)
          ok = s->column == x->sc && s->end_line == x->el && s->end_column == x->ec;
        if (ok && strcmp(s->file, x->doc) != 0)
          docs_full_differ++;
      }
      compared++;
      if (ok)
        agree++;
      else
        fprintf(stderr, "  %s: 0x%08X+0x%x: got line %u col %u hidden %d, want line %u\n",
                label, v[j].token, v[j].il, s ? s->line : 0, s ? s->column : 0,
                s ? s->hidden : 0, x ? x->sl : 0);
    }
    b = e;
  }
}

static pt *load_tsv(const char *path, size_t *n) {
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return NULL;
  size_t cap = 256, cnt = 0;
  pt *v = calloc(cap, sizeof *v);
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "0x", 2) != 0)
      continue;
    char *c[5] = {0};
    int k = 0;
    for (char *p = line; k < 5; k++) {
      c[k] = p;
      char *tab = strchr(p, '\t');
      if (!tab) {
        k++;
        break;
      }
      *tab = 0;
      p = tab + 1;
    }
    if (k < 5)
      continue;
    if (cnt == cap) {
      cap *= 2;
      v = realloc(v, cap * sizeof *v);
    }
    pt *q = &v[cnt++];
    memset(q, 0, sizeof *q);
    q->token = (uint32_t)strtoul(c[0], NULL, 16);
    q->nopoints = c[2][0] == 0;
    q->il = (uint32_t)strtoul(c[2], NULL, 10);
    q->hidden = strcmp(c[3], "hidden") == 0;
    q->sl = q->hidden ? ST_HIDDEN_LINE : (uint32_t)strtoul(c[3], NULL, 10);
    snprintf(q->doc, sizeof q->doc, "%s", c[4]);
  }
  free(text);
  *n = cnt;
  return v;
}

static pt *load_winpdb(const char *path, size_t *n) {
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return NULL;
  size_t cap = 256, cnt = 0;
  pt *v = calloc(cap, sizeof *v);
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    if (!j)
      continue;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (kind && strcmp(kind, "sp") == 0) {
      if (cnt == cap) {
        cap *= 2;
        v = realloc(v, cap * sizeof *v);
      }
      pt *q = &v[cnt++];
      memset(q, 0, sizeof *q);
      const char *tok = json_string_value(json_object_get(j, "token"));
      q->token = tok ? (uint32_t)strtoul(tok, NULL, 16)
                     : (uint32_t)json_integer_value(json_object_get(j, "token"));
      q->il = (uint32_t)json_integer_value(json_object_get(j, "il"));
      q->sl = (uint32_t)json_integer_value(json_object_get(j, "sl"));
      q->sc = (uint32_t)json_integer_value(json_object_get(j, "sc"));
      q->el = (uint32_t)json_integer_value(json_object_get(j, "el"));
      q->ec = (uint32_t)json_integer_value(json_object_get(j, "ec"));
      q->hidden = json_is_true(json_object_get(j, "hidden"));
      q->cols = true;
      const char *doc = json_string_value(json_object_get(j, "doc"));
      snprintf(q->doc, sizeof q->doc, "%s", doc ? doc : "");
    }
    json_decref(j);
  }
  free(text);
  *n = cnt;
  return v;
}

static int pairs;

static void on_row(char **cols, int ncols, void *ctx) {
  (void)ncols;
  (void)ctx;
  const char *rel = cols[0], *notes = cols[14];
  if (strcmp(cols[1], "portable-pdb") != 0 || strncmp(rel, "portable-pdb/symreader", 22) != 0)
    return;
  if (strstr(notes, "Edit-and-Continue DELTA"))
    return; /* refused as unsupported, see test_ppdb_corpus */
  size_t rl = strlen(rel);
  if (rl < 5 || strcmp(rel + rl - 5, ".pdbx") != 0)
    return;
  char abs[4096], twin[4200], path[4300];
  snprintf(abs, sizeof abs, "%s/%s", corpus, rel);
  snprintf(twin, sizeof twin, "%s/windows-managed-pdb/%.*s", corpus,
           (int)(rl - strlen("portable-pdb/") - 1), rel + strlen("portable-pdb/"));
  snprintf(path, sizeof path, "%s.seqpoints.tsv", twin);
  if (!cu_exists(path))
    return;
  size_t len;
  uint8_t *data = cu_read(abs, &len);
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &b);
  char buf[320];
  if (!data || ppdb_read(data, len, &b, &st, &d) != PS_E_OK) {
    t_failed_checks++;
    fprintf(stderr, "  %s: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
  } else {
    size_t n;
    pt *v = load_tsv(path, &n);
    char key[4200];
    snprintf(key, sizeof key, "corpus/%s", rel);
    if (v)
      compare(rel, key, &st, v, n);
    free(v);
    snprintf(path, sizeof path, "%s.winpdb.jsonl", twin);
    v = load_winpdb(path, &n);
    if (v)
      compare(rel, key, &st, v, n);
    free(v);
    pairs++;
  }
  st_free(&st);
  free(data);
}

TEST(windows_portable_pairs) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    SKIP("../shared/corpus absent");
  CHECK(cu_manifest(corpus, on_row, NULL));
  printf("  %d pairs: %ld/%ld points agree, %ld/%ld methods without points agree, "
         "%ld answers with the same file name in another folder\n",
         pairs, agree, compared, empty_ok, empty_methods, docs_full_differ);
  printf("  hidden points: %ld (%ld with the .NET runtime's own answer for the Portable twin), "
         "%ld without an answer in tests/oracles/hidden\n", hidden_probes, hidden_runtime,
         hidden_missing);
  CHECK(pairs > 0 && compared > 0);
  CHECK(hidden_probes > 0);
  CHECK_EQ_U(hidden_missing, 0);
  ho_free(&hidden);
  CHECK_EQ_U(agree, compared);
  CHECK_EQ_U(empty_ok, empty_methods);
}

int main(void) {
  RUN(windows_portable_pairs);
  return test_summary();
}
