/*
 * test_sourcelink_corpus.c - Source Link and srcsrv of the shared corpus's real
 * PDBs (../shared/corpus), read by pdb_read / ppdb_read, against outside readers
 * (tests/fixtures/corpus-oracles/source-info.jsonl: llvm-pdbutil 19's bytes of the
 * "sourcelink", "sourcelink$N" and "srcsrv" streams, System.Reflection.Metadata's
 * Source Link custom debug information):
 *
 *   - Source Link: every rule of the JSON the outside reader gives answers a probe
 *     path under it with the URL the rules give it (longest key, exact over
 *     wildcard, first of equals, applied here on the reader's JSON);
 *   - srcsrv, Mozilla (tecken/qipcap64.pdb): every line of Mozilla's own dump_syms
 *     output (qipcap64.sym) in a file it names "hg:REPO:PATH:REV" answers, through
 *     pdbsym's lookup of its address, https://REPO/raw-file/REV/PATH (the URL
 *     Mozilla's tools make of that name);
 *   - srcsrv, Microsoft.DiaSymReader.Converter (symreader-converter/SourceData.pdb,
 *     made from SourceLink.pdbx): every source file it lists, and every document of
 *     DiaSymReader's sequence points, answers RAWURL with the file's var2 (the text's
 *     SRCSRVTRG=%RAWURL%, RAWURL=http://server/%var2%); and how many of those agree
 *     with the URL the converter's input rules (SourceLink.pdbx's Source Link) give,
 *     up to its %-escapes, is printed (the converter spells one file its own way);
 *   - srcsrv with a Perforce target (symbolic/crash_with_srcsrv.pdb): no URL.
 */
#include <ctype.h>
#include <jansson.h>

#include "corpus_util.h"
#include "pdb.h"
#include "ppdb.h"
#include "symtab.h"
#include "test.h"

static char corpus[1024];
static json_t *oracle; /* array of source-info lines */

static json_t *find_stream(const char *file, const char *prefix) {
  size_t i;
  json_t *o;
  json_array_foreach(oracle, i, o) {
    const char *f = json_string_value(json_object_get(o, "file"));
    const char *s = json_string_value(json_object_get(o, "stream"));
    if (f && s && strcmp(f, file) == 0 && strncmp(s, prefix, strlen(prefix)) == 0)
      return o;
  }
  return NULL;
}

static bool read_pdb(const char *rel, symtab *st, ps_budget *b) {
  char path[4096], msg[320];
  snprintf(path, sizeof path, "%s/%s", corpus, rel);
  size_t len;
  uint8_t *data = cu_read(path, &len);
  if (!data) {
    fprintf(stderr, "  cannot read %s\n", path);
    return false;
  }
  ps_budget_init(b, PS_DEFAULT_BUDGET);
  st_init(st, b);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = pdb_is_msf(data, len) ? pdb_read(data, len, b, st, &d)
                                   : ppdb_read(data, len, b, st, &d);
  if (e != PS_E_OK)
    fprintf(stderr, "  %s: %s\n", rel, ps_diag_format(&d, msg, sizeof msg));
  free(data);
  return e == PS_E_OK;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* the test's own reading of Source Link rules (documents objects, in order) */
static bool rules_url(json_t *maps, const char *path, char *out, size_t cap) {
  const char *best = NULL;
  size_t best_len = 0;
  bool best_wild = false;
  size_t pl = strlen(path), i;
  json_t *map;
  json_array_foreach(maps, i, map) {
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(map, "documents"), key, val) {
      if (!json_is_string(val))
        continue;
      size_t kl = strlen(key);
      bool wild = kl && key[kl - 1] == '*';
      size_t n = wild ? kl - 1 : kl;
      if (n > pl || (!wild && n != pl))
        continue;
      bool match = true;
      for (size_t k = 0; k < n && match; k++)
        match = lower((unsigned char)key[k]) == lower((unsigned char)path[k]);
      if (!match)
        continue;
      if (!best || n > best_len || (n == best_len && !wild && best_wild)) {
        best = json_string_value(val);
        best_len = n;
        best_wild = wild;
      }
    }
  }
  if (!best)
    return false;
  size_t o = 0;
  for (const char *u = best; *u && o + 1 < cap; u++) {
    if (*u == '*' && best_wild)
      for (const char *r = path + best_len; *r && o + 1 < cap; r++)
        out[o++] = *r == '\\' ? '/' : *r;
    else
      out[o++] = *u;
  }
  out[o] = 0;
  return true;
}

/* jansson is strict: drop the commas before '}' / ']' some real maps carry
 * (symreader-portable's SourceLink.pdb), as System.Text.Json's
 * AllowTrailingCommas does */
static char *untrail(const char *text) {
  char *t = strdup(text ? text : "");
  size_t o = 0;
  for (size_t i = 0; t[i]; i++) {
    if (t[i] == ',') {
      size_t k = i + 1;
      while (t[k] == ' ' || t[k] == '\t' || t[k] == '\r' || t[k] == '\n')
        k++;
      if (t[k] == '}' || t[k] == ']')
        continue;
    }
    t[o++] = t[i];
  }
  t[o] = 0;
  return t;
}

static json_t *as_maps(const char *text) {
  char *t = untrail(text);
  json_t *j = json_loads(t, 0, NULL);
  free(t);
  if (j && !json_is_array(j)) {
    json_t *a = json_array();
    json_array_append_new(a, j);
    return a;
  }
  return j;
}

TEST(source_link_rules) {
  long files = 0, probes = 0, ok = 0;
  size_t i;
  json_t *o;
  json_array_foreach(oracle, i, o) {
    const char *rel = json_string_value(json_object_get(o, "file"));
    const char *stream = json_string_value(json_object_get(o, "stream"));
    if (!rel || !stream || strcmp(stream, "srcsrv") == 0)
      continue;
    json_t *maps = as_maps(json_string_value(json_object_get(o, "text")));
    CHECK(maps != NULL);
    symtab st;
    ps_budget b;
    bool read = maps && read_pdb(rel, &st, &b);
    CHECK(read);
    if (!read) {
      json_decref(maps);
      continue;
    }
    files++;
    CHECK(st.source_link != 0);
    size_t k;
    json_t *map;
    json_array_foreach(maps, k, map) {
      const char *key;
      json_t *val;
      json_object_foreach(json_object_get(map, "documents"), key, val) {
        char probe[1024], want[2048], got[2048];
        size_t kl = strlen(key);
        if (kl && key[kl - 1] == '*')
          snprintf(probe, sizeof probe, "%.*spdbsym-probe\\dir\\File.cs", (int)(kl - 1), key);
        else
          snprintf(probe, sizeof probe, "%s", key);
        bool w = rules_url(maps, probe, want, sizeof want);
        bool g = st_source_link(&st, probe, got, sizeof got);
        probes++;
        if (w == g && (!w || strcmp(want, got) == 0))
          ok++;
        else
          fprintf(stderr, "  %s: %s -> %s, the reader's rules give %s\n", rel, probe,
                  g ? got : "-", w ? want : "-");
      }
    }
    st_free(&st);
    json_decref(maps);
  }
  printf("  Source Link: %ld PDBs (Windows streams and Portable custom debug information), "
         "%ld/%ld rule probes answer as the outside reader's JSON says\n", files, ok, probes);
  CHECK(files >= 15);
  CHECK_EQ_U(ok, probes);
}

/* "%3A" -> ':' (the converter escapes what a URL path cannot hold) */
static void unescape(const char *in, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = in; *p && o + 1 < cap; p++) {
    if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
      char h[3] = {p[1], p[2], 0};
      out[o++] = (char)strtol(h, NULL, 16);
      p += 2;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
}

TEST(srcsrv_converter) {
  const char *rel = "windows-managed-pdb/symreader-converter/SourceData.pdb";
  json_t *srv = find_stream(rel, "srcsrv");
  json_t *twin = find_stream("portable-pdb/symreader-converter/SourceLink.pdbx", "custom");
  CHECK(srv && twin);
  if (!srv || !twin)
    return;
  json_t *maps = as_maps(json_string_value(json_object_get(twin, "text")));
  symtab st;
  ps_budget b;
  CHECK(read_pdb(rel, &st, &b));
  long n = 0, ok = 0, input_ok = 0;
  /* the source files the srcsrv text lists: var1*var2, the target RAWURL */
  char *text = strdup(json_string_value(json_object_get(srv, "text")));
  bool files = false;
  char rawurl[256] = "", trg[256] = "";
  static char paths[64][512], urls[64][1024];
  size_t npaths = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
    if (strncmp(line, "SRCSRV:", 7) == 0) {
      files = strstr(line, "source files") != NULL;
      continue;
    }
    if (!files) {
      if (strncmp(line, "RAWURL=", 7) == 0)
        snprintf(rawurl, sizeof rawurl, "%s", line + 7);
      if (strncmp(line, "SRCSRVTRG=", 10) == 0)
        snprintf(trg, sizeof trg, "%s", line + 10);
      continue;
    }
    char *star = strchr(line, '*');
    if (!star || npaths == 64)
      continue;
    *star = 0;
    size_t rl = strlen(rawurl);
    CHECK(strcmp(trg, "%RAWURL%") == 0 && rl > 6 && strcmp(rawurl + rl - 6, "%var2%") == 0);
    if (rl <= 6)
      continue;
    snprintf(paths[npaths], sizeof paths[npaths], "%.500s", line);
    snprintf(urls[npaths], sizeof urls[npaths], "%.*s%.500s", (int)(rl - 6), rawurl, star + 1);
    npaths++;
  }
  free(text);
  for (size_t k = 0; k < npaths; k++) {
    char want[2048], got[2048], g2[2048], w2[2048];
    bool g = st_source_link(&st, paths[k], got, sizeof got);
    n++;
    if (g && strcmp(got, urls[k]) == 0)
      ok++;
    else
      fprintf(stderr, "  %s: %s -> %s, srcsrv says %s\n", rel, paths[k], g ? got : "-", urls[k]);
    bool w = rules_url(maps, paths[k], want, sizeof want);
    unescape(got, g2, sizeof g2);
    unescape(want, w2, sizeof w2);
    if (w && g && strcmp(w2, g2) == 0)
      input_ok++;
  }
  /* frames: DiaSymReader's documents, answered through lookups */
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.winpdb.jsonl", corpus, rel);
  size_t len;
  char *w = (char *)cu_read(path, &len);
  CHECK(w != NULL);
  long frames = 0, frames_ok = 0;
  save = NULL;
  for (char *line = w ? strtok_r(w, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (kind && strcmp(kind, "sp") == 0 && !json_is_true(json_object_get(j, "hidden"))) {
      st_answer a;
      st_lookup_token(&st, (uint32_t)strtoul(json_string_value(json_object_get(j, "token")), NULL, 16),
                      (uint32_t)json_integer_value(json_object_get(j, "il")), &a);
      char got[2048];
      const char *want = NULL;
      for (size_t k = 0; a.status == ST_OK && a.syms[0].file && k < npaths; k++)
        if (strcmp(paths[k], a.syms[0].file) == 0)
          want = urls[k];
      /* a document the text does not list ("C:\\*\\5.cs") has no URL */
      bool same_doc = a.status == ST_OK && a.syms[0].file &&
                      strcmp(a.syms[0].file, json_string_value(json_object_get(j, "doc"))) == 0;
      bool g = same_doc && st_source_link(&st, a.syms[0].file, got, sizeof got);
      bool okf = same_doc && (want ? g && strcmp(got, want) == 0 : !g);
      frames++;
      if (okf)
        frames_ok++;
    }
    json_decref(j);
  }
  free(w);
  printf("  srcsrv (DiaSymReader.Converter): %ld/%ld listed files and %ld/%ld frames answer "
         "their srcsrv URL; %ld/%ld are also what the converter's Source Link input gives\n",
         ok, n, frames_ok, frames, input_ok, n);
  CHECK(n >= 10 && frames >= 10);
  CHECK_EQ_U(ok, n);
  CHECK_EQ_U(frames_ok, frames);
  st_free(&st);
  json_decref(maps);
}

TEST(srcsrv_mozilla) {
  const char *rel = "windows-native-pdb/tecken/qipcap64.pdb";
  CHECK(find_stream(rel, "srcsrv") != NULL);
  char path[4096];
  snprintf(path, sizeof path, "%s/windows-native-pdb/tecken/qipcap64.sym", corpus);
  size_t len;
  char *sym = (char *)cu_read(path, &len);
  CHECK(sym != NULL);
  if (!sym)
    return;
  symtab st;
  ps_budget b;
  CHECK(read_pdb(rel, &st, &b));
  /* FILE n hg:REPO:PATH:REV -> the URL of file n */
  static char urls[512][512];
  static bool hg[512];
  memset(hg, 0, sizeof hg);
  long lines = 0, ok = 0, others = 0, others_ok = 0;
  char *save = NULL;
  for (char *line = strtok_r(sym, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    unsigned fn;
    char name[512];
    if (sscanf(line, "FILE %u %511s", &fn, name) == 2 && fn < 512) {
      if (strncmp(name, "hg:", 3) == 0) {
        char *repo = name + 3, *p2 = strchr(repo, ':'), *rev = p2 ? strrchr(p2 + 1, ':') : NULL;
        if (p2 && rev) {
          *p2 = 0;
          *rev = 0;
          snprintf(urls[fn], sizeof urls[fn], "https://%.150s/raw-file/%.100s/%.200s", repo, rev + 1,
                   p2 + 1);
          hg[fn] = true;
        }
      }
      continue;
    }
    unsigned long addr, size;
    unsigned ln, file;
    if (!isxdigit((unsigned char)line[0]) ||
        sscanf(line, "%lx %lx %u %u", &addr, &size, &ln, &file) != 4 || file >= 512)
      continue;
    st_answer a;
    st_lookup_rva(&st, (uint32_t)addr, &a);
    const st_symbol *s = a.status == ST_OK && a.nsyms ? &a.syms[a.nsyms - 1] : NULL;
    for (int k = 0; s && k < a.nsyms; k++)
      if (!a.syms[k].inlined)
        s = &a.syms[k];
    char got[2048];
    bool g = s && s->file && st_source_link(&st, s->file, got, sizeof got);
    if (hg[file]) {
      lines++;
      if (g && strcmp(got, urls[file]) == 0)
        ok++;
      else
        fprintf(stderr, "  qipcap64 0x%lx: %s -> %s, dump_syms says %s\n", addr,
                s && s->file ? s->file : "-", g ? got : "-", urls[file]);
    } else {
      others++;
      if (!g) /* a file srcsrv does not list has no URL */
        others_ok++;
    }
  }
  printf("  srcsrv (Mozilla): %ld/%ld dump_syms lines in hg: files answer their raw-file URL; "
         "%ld/%ld lines in other files have none\n", ok, lines, others_ok, others);
  CHECK(lines > 0 && others > 0);
  CHECK_EQ_U(ok, lines);
  CHECK_EQ_U(others_ok, others);
  st_free(&st);
  free(sym);
}

TEST(srcsrv_perforce) {
  const char *rel = "windows-native-pdb/symbolic/crash_with_srcsrv.pdb";
  CHECK(find_stream(rel, "srcsrv") != NULL);
  symtab st;
  ps_budget b;
  CHECK(read_pdb(rel, &st, &b));
  CHECK_EQ_U(st.source_link, 0); /* %targ%\... is a local path, not a URL */
  CHECK(st.nfuncs > 0 && st.nlines > 0);
  st_free(&st);
}

int main(void) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    return test_skip_all("../shared/corpus absent");
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/corpus-oracles/source-info.jsonl",
           src ? src : ".");
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return test_skip_all("tests/fixtures/corpus-oracles/source-info.jsonl absent (run through ctest)");
  oracle = json_array();
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    if (j)
      json_array_append_new(oracle, j);
  }
  free(text);
  RUN(source_link_rules);
  RUN(srcsrv_converter);
  RUN(srcsrv_mozilla);
  RUN(srcsrv_perforce);
  json_decref(oracle);
  return test_summary();
}
