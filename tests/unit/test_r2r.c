/*
 * test_r2r.c - parsers/r2r.c (ReadyToRun code and its debug info) and
 * parsers/il.c (call sites in IL), on the profile fixture
 * (tests/fixtures/nettrace/profile, made by make-profile.sh):
 *
 *   - ProfLib.dll, precompiled by crossgen2: for every frame of its own
 *     methods that the runtime's System.Diagnostics.StackFrame described
 *     while the app ran (frames.jsonl: method token, native offset, IL
 *     offset, file, line), the image's map read here, under the runtime's
 *     rule for a return address (ntcode.h), gives the same IL offset, and
 *     ProfLib.pdb the same line;
 *   - every method's call sites in App.dll and ProfLib.dll, with the names
 *     they call, equal to System.Reflection.Metadata's reading
 *     (*.ilcalls.jsonl);
 *   - an IL-only image is "not ReadyToRun"; the image cut anywhere and
 *     with its bytes changed fails with a named cause or reads, never
 *     crashes (run under ASan).
 */
#include <jansson.h>

#include "il.h"
#include "loader.h"
#include "ntcode.h"
#include "r2r.h"
#include "symtab.h"
#include "test.h"

static char *path_of(const char *file) {
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/tests/fixtures/nettrace/profile/%s", root ? root : ".", file);
  return buf;
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

/* The IL offset of native offset off (a return address: off - 1 looked up)
 * in the map b[0, n), by the runtime's rule as ntcode implements it (its
 * own tests check that against TraceEvent's). */
static int32_t il_at(const r2r_bound *b, size_t n, uint32_t off) {
  ps_budget budget;
  ps_budget_init(&budget, (size_t)64 << 20);
  ntc_table t;
  ntc_init(&t, &budget);
  nt_method_load ml;
  memset(&ml, 0, sizeof ml);
  ml.method_id = 1;
  ml.start = 0x10000;
  ml.size = 1u << 20;
  ml.token = 0x06000001;
  ntc_add_method(&t, &ml);
  ntc_finish(&t);
  ntc_entry *e = malloc((n ? n : 1) * sizeof *e);
  for (size_t i = 0; i < n; i++)
    e[i] = (ntc_entry){b[i].native, b[i].il};
  ntc_attach_map(&t, 0, e, (uint32_t)n);
  ntc_answer a;
  int32_t il = ntc_lookup(&t, 0x10000 + off, false, &a) ? a.il : -100;
  free(e);
  ntc_free(&t);
  return il;
}

TEST(stackframes_match_the_runtime) {
  size_t len, plen;
  uint8_t *img = slurp(path_of("ProfLib.dll"), &len);
  uint8_t *pdb = slurp(path_of("ProfLib.pdb"), &plen);
  json_error_t je;
  FILE *fr = fopen(path_of("frames.jsonl"), "r");
  if (!img || !pdb || !fr) {
    free(img);
    free(pdb);
    if (fr)
      fclose(fr);
    SKIP("tests/fixtures/nettrace/profile absent");
  }
  r2r_image r;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[256];
  ps_err e = r2r_open(&r, img, len, &d);
  if (e)
    fprintf(stderr, "  %s\n", ps_diag_format(&d, msg, sizeof msg));
  CHECK(e == PS_E_OK);
  CHECK(r.major >= 16);
  ps_budget budget;
  ps_budget_init(&budget, (size_t)64 << 20);
  symtab st;
  st_init(&st, &budget);
  CHECK(loader_read(pdb, plen, img, len, &budget, &st, &d) == PS_E_OK);
  st_finish(&st);
  static r2r_bound b[R2R_MAX_BOUNDS];
  int checked = 0, generic = 0;
  char line[2048];
  while (e == PS_E_OK && fgets(line, sizeof line, fr)) {
    json_t *o = json_loads(line, 0, &je);
    if (!o)
      continue;
    uint32_t token = (uint32_t)strtoul(json_string_value(json_object_get(o, "token")), NULL, 16);
    uint32_t native = (uint32_t)json_integer_value(json_object_get(o, "native"));
    int32_t want_il = (int32_t)json_integer_value(json_object_get(o, "il"));
    uint32_t idx;
    ps_diag_clear(&d);
    ps_err fe = r2r_method_entry(&r, token & 0xFFFFFF, &idx, &d);
    if (fe == PS_E_NOT_FOUND) { /* a generic method: its instantiations are elsewhere */
      generic++;
      json_decref(o);
      continue;
    }
    CHECK(fe == PS_E_OK);
    size_t n = 0;
    CHECK(r2r_bounds(&r, idx, b, R2R_MAX_BOUNDS, &n, &d) == PS_E_OK);
    int32_t il = il_at(b, n, native);
    if (il != want_il)
      fprintf(stderr, "  %s +%u: IL %d, the runtime's StackFrame %d\n",
              json_string_value(json_object_get(o, "method")), native, il, want_il);
    CHECK(il == want_il);
    json_t *jl = json_object_get(o, "line");
    if (jl && il >= 0) {
      st_answer sa;
      st_lookup_token(&st, token, (uint32_t)il, &sa);
      CHECK(sa.status == ST_OK && sa.syms[0].has_line);
      CHECK_EQ_U(sa.syms[0].line, json_integer_value(jl));
      CHECK_EQ_S(sa.syms[0].file, json_string_value(json_object_get(o, "file")));
    }
    checked++;
    json_decref(o);
  }
  printf("  %d frames of precompiled methods as StackFrame gives them (%d of a generic method "
         "left to the trace tests)\n",
         checked, generic);
  CHECK(checked >= 5);
  fclose(fr);
  st_free(&st);
  free(img);
  free(pdb);
}

static void check_ilcalls(const char *dll) {
  char oracle[256];
  snprintf(oracle, sizeof oracle, "%.*s.ilcalls.jsonl", (int)(strlen(dll) - 4), dll);
  size_t len;
  uint8_t *img = slurp(path_of(dll), &len);
  FILE *f = fopen(path_of(oracle), "r");
  if (!img || !f) {
    free(img);
    if (f)
      fclose(f);
    SKIP_PART("tests/fixtures/nettrace/profile absent");
    return;
  }
  pe_layout pe;
  md_meta m;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK(pe_layout_open(&pe, img, len, &d) == PS_E_OK);
  CHECK(il_open_metadata(&pe, &m, &d) == PS_E_OK);
  static il_call calls[IL_MAX_CALLS];
  static char line[1 << 16];
  int methods = 0, sites = 0;
  json_error_t je;
  while (fgets(line, sizeof line, f)) {
    json_t *o = json_loads(line, 0, &je);
    CHECK(o != NULL);
    if (!o)
      continue;
    uint32_t token = (uint32_t)strtoul(json_string_value(json_object_get(o, "token")), NULL, 16);
    json_t *want = json_object_get(o, "calls");
    const uint8_t *code;
    size_t clen, n = 0;
    ps_err e = il_method_code(&pe, &m, token, &code, &clen, &d);
    if (e == PS_E_NOT_FOUND) {
      CHECK_EQ_U(json_array_size(want), 0);
    } else {
      CHECK(e == PS_E_OK);
      CHECK(il_calls(code, clen, calls, IL_MAX_CALLS, &n, &d) == PS_E_OK);
      CHECK_EQ_U(n, json_array_size(want));
      for (size_t i = 0; i < n && i < json_array_size(want); i++) {
        json_t *w = json_array_get(want, i);
        const char *name, *type, *ns;
        uint32_t def;
        CHECK(il_target(&m, calls[i].token, &name, &type, &ns, &def));
        CHECK_EQ_U(calls[i].il, json_integer_value(json_array_get(w, 0)));
        CHECK_EQ_S(name, json_string_value(json_array_get(w, 1)));
        /* the oracle names the generic type of an instantiation; il.c
         * leaves a TypeSpec's type empty */
        if (*type)
          CHECK_EQ_S(type, json_string_value(json_array_get(w, 2)));
        sites++;
      }
    }
    methods++;
    json_decref(o);
  }
  printf("  %s: %d methods, %d call sites as System.Reflection.Metadata reads them\n", dll,
         methods, sites);
  CHECK(methods > 5 && sites > 5);
  fclose(f);
  free(img);
}

TEST(il_call_sites_match_srm) {
  check_ilcalls("App.dll");
  check_ilcalls("ProfLib.dll");
}

TEST(not_ready_to_run) {
  size_t len;
  uint8_t *img = slurp(path_of("App.dll"), &len);
  if (!img)
    SKIP("tests/fixtures/nettrace/profile absent");
  r2r_image r;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK(r2r_open(&r, img, len, &d) == PS_E_NOT_FOUND);
  CHECK(strstr(d.detail, "IL-only") != NULL);
  free(img);
}

/* reads every runtime function's map and every MethodDef's entry */
static void read_all(const uint8_t *img, size_t len) {
  r2r_image r;
  ps_diag d;
  ps_diag_clear(&d);
  if (r2r_open(&r, img, len, &d) != PS_E_OK) {
    CHECK(d.code != PS_E_OK); /* a failure names its cause */
    return;
  }
  static r2r_bound b[R2R_MAX_BOUNDS];
  for (uint32_t i = 0; i < r.rf_count && i < 4096; i++) {
    size_t n;
    ps_diag_clear(&d);
    ps_err e = r2r_bounds(&r, i, b, R2R_MAX_BOUNDS, &n, &d);
    CHECK(e == PS_E_OK || e == PS_E_NOT_FOUND || d.code == e);
    uint32_t begin, end;
    CHECK(r2r_function(&r, i, &begin, &end) && begin <= end);
  }
  for (uint32_t rid = 1; rid < 64; rid++) {
    uint32_t idx;
    ps_diag_clear(&d);
    ps_err e = r2r_method_entry(&r, rid, &idx, &d);
    CHECK(e == PS_E_NOT_FOUND || (e == PS_E_OK && idx < r.rf_count) || d.code == e);
  }
}

TEST(damaged_images) {
  size_t len;
  uint8_t *img = slurp(path_of("ProfLib.dll"), &len);
  if (!img)
    SKIP("tests/fixtures/nettrace/profile absent");
  uint8_t *copy = malloc(len);
  for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
    memcpy(copy, img, cut);
    read_all(copy, cut);
  }
  /* every byte from the ReadyToRun header on, changed one at a time */
  r2r_image r;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK(r2r_open(&r, img, len, &d) == PS_E_OK);
  size_t from = r.debug.present ? (size_t)(r.debug.p - img) : 0;
  for (size_t i = from; i < len; i += 3) {
    memcpy(copy, img, len);
    copy[i] ^= (uint8_t)(0x5A + i);
    read_all(copy, len);
  }
  free(copy);
  free(img);
}

int main(void) {
  RUN(stackframes_match_the_runtime);
  RUN(il_call_sites_match_srm);
  RUN(not_ready_to_run);
  RUN(damaged_images);
  return test_summary();
}
