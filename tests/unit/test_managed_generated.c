/*
 * test_managed_generated.c - the managed fixtures' compiler-generated code,
 * state-machine kickoffs and Source Link, read by pdbsym's parsers, against
 * outside oracles (tests/fixtures/managed/README.md):
 *
 *   - Demo.dll.clr.jsonl (ClrDump): the runtime's reflection pairs every state
 *     machine with its kickoff method ([AsyncStateMachine]/[IteratorStateMachine]),
 *     and Roslyn's own lambda maps (EncLambdaAndClosureMap) name the method each
 *     lambda and local function was written in.  Every generated method's
 *     user_method, kind and local function must match, every MoveNext's kickoff
 *     and async_method, and no other method with sequence points may claim a user
 *     method.  For the Windows PDBs also without the image: the PDB's own module
 *     names give user_method (nested types joined with '.'), its asyncMethodInfo
 *     and iterator records the kickoff.
 *   - Demo.pdb.winpdb.jsonl "async" lines: DiaSymReader's ISymUnmanagedAsyncMethod
 *     kickoff for every async MoveNext of the Windows PDBs.
 *   - the "sourcelink" lines of PdbDump / WinPdbDump: the JSON the PDB carries
 *     (Microsoft's readers) must be src/sourcelink.json, and every document of the
 *     sequence points resolves to its URL by that file's one wildcard rule.
 */
#include <jansson.h>

#include "clrnames.h"
#include "corpus_util.h"
#include "pdb.h"
#include "pe.h"
#include "ppdb.h"
#include "symtab.h"
#include "test.h"

static char fx[2048];

typedef struct {
  const char *build, *pdb, *oracle; /* oracle: the PDB reader's jsonl */
  bool windows, embedded;
} build_t;

static const build_t BUILDS[] = {
    {"portable-debug", "Demo.pdb", "Demo.pdb.srm.jsonl", false, false},
    {"portable-release", "Demo.pdb", "Demo.pdb.srm.jsonl", false, false},
    {"embedded-debug", "Demo.dll", "Demo.dll.srm.jsonl", false, true},
    {"windows-debug", "Demo.pdb", "Demo.pdb.winpdb.jsonl", true, false},
    {"windows-release", "Demo.pdb", "Demo.pdb.winpdb.jsonl", true, false},
};

static json_t *load_jsonl(const char *build, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", fx, build, name);
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return NULL;
  json_t *all = json_array();
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    if (j)
      json_array_append_new(all, j);
  }
  free(text);
  return all;
}

static const char *kind_of(json_t *o) {
  const char *k = json_string_value(json_object_get(o, "kind"));
  return k ? k : "";
}
static uint32_t tok(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? (uint32_t)strtoul(s, NULL, 16) : 0;
}
static const char *str(json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

static const char *gen_name(uint32_t g) {
  switch (g) {
  case CN_LAMBDA: return "lambda";
  case CN_LOCAL_FUNCTION: return "local_function";
  case CN_STATE_MACHINE: return "state_machine";
  default: return "none";
  }
}

/* the build's PDB into st (st_init'ed by the caller), with or without the image */
static bool read_build(const build_t *b, symtab *st, ps_budget *bud, bool with_image) {
  char path[4096], msg[320];
  snprintf(path, sizeof path, "%s/%s/%s", fx, b->build, b->pdb);
  size_t len;
  uint8_t *data = cu_read(path, &len), *inflated = NULL;
  if (!data) {
    fprintf(stderr, "  cannot read %s\n", path);
    return false;
  }
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e;
  if (b->windows) {
    e = pdb_read(data, len, bud, st, &d);
  } else {
    const uint8_t *pdb = data;
    size_t pl = len;
    e = PS_E_OK;
    if (b->embedded) {
      e = pe_embedded_pdb(data, len, 1 << 24, NULL, &inflated, &pl, &d);
      pdb = inflated;
    }
    if (e == PS_E_OK)
      e = ppdb_read(pdb, pl, bud, st, &d);
  }
  if (e == PS_E_OK && with_image) {
    snprintf(path, sizeof path, "%s/%s/Demo.dll", fx, b->build);
    size_t il;
    uint8_t *img = cu_read(path, &il);
    e = img ? pe_method_names(img, il, bud, st, &d) : PS_E_IO;
    free(img);
  }
  if (e != PS_E_OK)
    fprintf(stderr, "  %s: %s\n", b->build, ps_diag_format(&d, msg, sizeof msg));
  free(inflated);
  free(data);
  return e == PS_E_OK;
}

/* oracle name "Ns.Outer+Inner.M" as a Windows PDB module name spells it */
static void dotted(const char *in, char *out, size_t cap) {
  snprintf(out, cap, "%s", in);
  for (char *p = out; *p; p++)
    if (*p == '+')
      *p = '.';
}

static bool same(const char *a, const char *b) {
  if (!a || !b)
    return a == b;
  return strcmp(a, b) == 0;
}

static long gen_total, gen_ok, gen_plain, gen_plain_ok, kick_total, kick_ok, dia_total, dia_ok;
static long bare_total, bare_ok;

static void check_generated(const build_t *b, const symtab *st, json_t *clr, json_t *pdbo,
                            bool with_image) {
  st_answer *a = malloc(sizeof *a);
  size_t i;
  json_t *o;
  /* every generated method the oracle knows */
  json_array_foreach(clr, i, o) {
    if (strcmp(kind_of(o), "generated") != 0)
      continue;
    uint32_t t = tok(o, "token");
    st_lookup_token(st, t, 0, a);
    const st_symbol *s = a->status == ST_OK ? &a->syms[0] : NULL;
    char want_user[1024];
    const char *wu = str(o, "user_method");
    if (with_image)
      snprintf(want_user, sizeof want_user, "%s", wu ? wu : "");
    else
      dotted(wu ? wu : "", want_user, sizeof want_user);
    const char *wk = str(o, "generated"), *wl = str(o, "local_function");
    bool ok = s && s->user_method && strcmp(s->user_method, want_user) == 0 &&
              wk && strcmp(gen_name(s->generated), wk) == 0 && same(s->local_function, wl);
    if (!with_image && (!b->windows || !s))
      continue; /* a Portable PDB alone names no method; a Windows one only those it has */
    long *tot = with_image ? &gen_total : &bare_total, *good = with_image ? &gen_ok : &bare_ok;
    (*tot)++;
    if (ok)
      (*good)++;
    else
      fprintf(stderr, "  %s%s 0x%08x %s: got %s %s %s, want %s %s %s\n", b->build,
              with_image ? "" : " (PDB alone)", t, str(o, "method"),
              s && s->user_method ? s->user_method : "-", s ? gen_name(s->generated) : "-",
              s && s->local_function ? s->local_function : "-", want_user, wk ? wk : "-",
              wl ? wl : "-");
  }
  /* no other method with sequence points claims a user method */
  if (with_image) {
    json_array_foreach(pdbo, i, o) {
      if (strcmp(kind_of(o), "sp") != 0)
        continue;
      uint32_t t = tok(o, "token");
      bool listed = false;
      size_t k;
      json_t *g;
      json_array_foreach(clr, k, g) {
        if (strcmp(kind_of(g), "generated") == 0 && tok(g, "token") == t) {
          listed = true;
          break;
        }
      }
      if (listed)
        continue;
      st_lookup_token(st, t, (uint32_t)json_integer_value(json_object_get(o, "il")), a);
      gen_plain++;
      if (a->status == ST_OK && !a->syms[0].user_method && a->syms[0].generated == CN_NONE)
        gen_plain_ok++;
      else
        fprintf(stderr, "  %s 0x%08x %s: user_method %s for a method no oracle calls generated\n",
                b->build, t, str(o, "method"),
                a->status == ST_OK && a->syms[0].user_method ? a->syms[0].user_method : "-");
    }
  }
  /* every state machine's MoveNext: its kickoff and async_method */
  json_array_foreach(clr, i, o) {
    if (strcmp(kind_of(o), "state_machine") != 0)
      continue;
    uint32_t mn = tok(o, "move_next"), ko = tok(o, "kickoff");
    st_lookup_token(st, mn, 0, a);
    const char *kn = str(o, "kickoff_method");
    const char *want = kn;
    if (!with_image && kn) { /* the PDB alone holds the short name */
      const char *dot = strrchr(kn, '.');
      want = dot ? dot + 1 : kn;
    }
    bool ok = a->status == ST_OK && a->syms[0].kickoff_token == ko &&
              same(a->syms[0].async_method, want);
    if (!with_image && !b->windows)
      ok = a->status == ST_OK && a->syms[0].kickoff_token == ko; /* Portable alone: no names */
    kick_total++;
    if (ok)
      kick_ok++;
    else
      fprintf(stderr, "  %s%s MoveNext 0x%08x: kickoff 0x%08x %s, reflection 0x%08x %s\n",
              b->build, with_image ? "" : " (PDB alone)", mn,
              a->status == ST_OK ? a->syms[0].kickoff_token : 0,
              a->status == ST_OK && a->syms[0].async_method ? a->syms[0].async_method : "-", ko,
              want ? want : "-");
  }
  /* DiaSymReader's async methods (Windows PDBs) */
  if (b->windows) {
    json_array_foreach(pdbo, i, o) {
      if (strcmp(kind_of(o), "async") != 0)
        continue;
      st_lookup_token(st, tok(o, "token"), 0, a);
      dia_total++;
      if (a->status == ST_OK && a->syms[0].kickoff_token == tok(o, "kickoff"))
        dia_ok++;
      else
        fprintf(stderr, "  %s 0x%08x: kickoff 0x%08x, DiaSymReader 0x%08x\n", b->build,
                tok(o, "token"), a->status == ST_OK ? a->syms[0].kickoff_token : 0,
                tok(o, "kickoff"));
    }
  }
  free(a);
}

TEST(generated_code_and_kickoffs) {
  long machines = 0;
  for (size_t k = 0; k < sizeof BUILDS / sizeof BUILDS[0]; k++) {
    const build_t *b = &BUILDS[k];
    json_t *clr = load_jsonl(b->build, "Demo.dll.clr.jsonl");
    json_t *pdbo = load_jsonl(b->build, b->oracle);
    CHECK(clr && pdbo);
    if (!clr || !pdbo) {
      json_decref(clr);
      json_decref(pdbo);
      continue;
    }
    size_t i;
    json_t *o;
    json_array_foreach(clr, i, o) {
      if (strcmp(kind_of(o), "unmatched") == 0) {
        t_failed_checks++;
        fprintf(stderr, "  %s: the oracle left a lambda map entry unmatched\n", b->build);
      }
      if (strcmp(kind_of(o), "state_machine") == 0)
        machines++;
    }
    for (int with_image = 1; with_image >= 0; with_image--) {
      ps_budget bud;
      ps_budget_init(&bud, PS_DEFAULT_BUDGET);
      symtab st;
      st_init(&st, &bud);
      if (read_build(b, &st, &bud, with_image))
        check_generated(b, &st, clr, pdbo, with_image);
      else
        CHECK(!"fixture unreadable");
      st_free(&st);
    }
    json_decref(clr);
    json_decref(pdbo);
  }
  printf("  generated methods: %ld/%ld agree with the oracles (with the image), "
         "%ld/%ld from the Windows PDBs alone\n", gen_ok, gen_total, bare_ok, bare_total);
  printf("  methods the oracles call user code: %ld/%ld have no user_method\n", gen_plain_ok,
         gen_plain);
  printf("  state machines: %ld/%ld MoveNext kickoffs agree with reflection (%ld state "
         "machines, with and without the image); %ld/%ld with DiaSymReader's async methods\n",
         kick_ok, kick_total, machines, dia_ok, dia_total);
  CHECK(gen_total > 100 && bare_total > 50 && kick_total > 40 && dia_total > 10);
  CHECK_EQ_U(gen_ok, gen_total);
  CHECK_EQ_U(bare_ok, bare_total);
  CHECK_EQ_U(gen_plain_ok, gen_plain);
  CHECK_EQ_U(kick_ok, kick_total);
  CHECK_EQ_U(dia_ok, dia_total);
}

TEST(source_link) {
  char path[4096];
  snprintf(path, sizeof path, "%s/src/sourcelink.json", fx);
  size_t len;
  char *file = (char *)cu_read(path, &len);
  CHECK(file != NULL);
  json_t *rules = file ? json_loads(file, 0, NULL) : NULL;
  json_t *docs = json_object_get(rules, "documents");
  const char *prefix = NULL, *tmpl = NULL;
  const char *key;
  json_t *val;
  json_object_foreach(docs, key, val) { /* the fixture's one rule, a wildcard */
    prefix = key;
    tmpl = json_string_value(val);
  }
  CHECK(json_object_size(docs) == 1 && prefix && tmpl && prefix[strlen(prefix) - 1] == '*');
  if (!prefix || !tmpl) {
    json_decref(rules);
    free(file);
    return;
  }
  size_t plen = strlen(prefix) - 1;
  const char *star = strchr(tmpl, '*');
  long docs_seen = 0, urls_ok = 0, none_ok = 0, readers = 0;
  for (size_t k = 0; k < sizeof BUILDS / sizeof BUILDS[0]; k++) {
    const build_t *b = &BUILDS[k];
    json_t *pdbo = load_jsonl(b->build, b->oracle);
    size_t i;
    json_t *o;
    /* the reader's own view of the PDB's Source Link */
    json_array_foreach(pdbo, i, o) {
      if (strcmp(kind_of(o), "sourcelink") != 0)
        continue;
      json_t *theirs = json_loads(str(o, "json"), 0, NULL);
      CHECK(theirs && json_equal(theirs, rules));
      json_decref(theirs);
      readers++;
    }
    ps_budget bud;
    ps_budget_init(&bud, PS_DEFAULT_BUDGET);
    symtab st;
    st_init(&st, &bud);
    CHECK(read_build(b, &st, &bud, false));
    CHECK(st.source_link != 0);
    json_array_foreach(pdbo, i, o) {
      const char *doc = str(o, "doc");
      if (strcmp(kind_of(o), "sp") != 0 || !doc)
        continue;
      char url[2048], want[2048];
      bool got = st_source_link(&st, doc, url, sizeof url);
      docs_seen++;
      if (strncmp(doc, prefix, plen) == 0 && star) {
        snprintf(want, sizeof want, "%.*s%s%s", (int)(star - tmpl), tmpl, doc + plen, star + 1);
        if (got && strcmp(url, want) == 0)
          urls_ok++;
        else
          fprintf(stderr, "  %s %s: url %s, want %s\n", b->build, doc, got ? url : "-", want);
      } else if (!got) {
        none_ok++; /* a path the rule does not cover */
      } else {
        fprintf(stderr, "  %s %s: url %s for a path no rule covers\n", b->build, doc, url);
      }
    }
    st_free(&st);
    json_decref(pdbo);
  }
  printf("  source link: %ld readers' JSON equal src/sourcelink.json; %ld points' documents: "
         "%ld URLs right, %ld uncovered rightly without one\n", readers, docs_seen, urls_ok,
         none_ok);
  CHECK_EQ_U(readers, 5);
  CHECK(urls_ok > 100);
  CHECK_EQ_U(urls_ok + none_ok, docs_seen);
  json_decref(rules);
  free(file);
}

int main(void) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  snprintf(fx, sizeof fx, "%s/tests/fixtures/managed", src ? src : ".");
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/MANIFEST.tsv", fx);
  if (!cu_exists(probe))
    return test_skip_all("tests/fixtures/managed/MANIFEST.tsv absent (run through ctest)");
  RUN(generated_code_and_kickoffs);
  RUN(source_link);
  return test_summary();
}
