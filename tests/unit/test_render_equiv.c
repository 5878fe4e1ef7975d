/*
 * test_render_equiv.c - the streaming renderer (render.c and api.c on
 * jsonw.h) against the renderer it replaced (render_ref.h, api_ref.h: the
 * jansson code of main as it was, made by make_ref.py), on the same inputs,
 * byte for byte:
 *
 *   1. frames: every byte of every native fixture's code (and beyond its
 *      ends), every method and IL offset of every managed fixture, rendered
 *      by render_answer_json and ref_render_answer_json; frames of every
 *      status, with and without module, address, instruction_addr,
 *      adjustment, error, retry_after and input, and synthetic symbols of
 *      every shape (user_method and each kind of generated code); a
 *      synthetic module with Source Link maps; `pdbsym dump`'s object of
 *      every table and of PE images;
 *   2. whole answers: a real engine over a symbol store made from the
 *      fixtures (native, managed with their DLLs, a damaged PDB, a missing
 *      module), and thousands of requests to POST /symbolicate (image
 *      addresses, instruction_addr frames, return addresses, stacks, modules
 *      that fail alone, frames asked again), POST /symbolicate/v5 (duplicated, unused, invalid
 *      and out-of-range memoryMap entries, negative and too wide offsets),
 *      bodies that break the contract in each way request.c checks, GET
 *      /modules/..., /health and /ready, each answered by api_handle and by
 *      ref_api_handle: the same status, headers and bytes; and the answer's
 *      buffer in the request memory budget (max_answer_bytes, a budget too
 *      small for it).
 *   3. the one documented difference: a string that is not UTF-8 in a field
 *      the old renderer wrote with json_string (a frame's error, the CLI's
 *      address, dump's file) made that field disappear; now it is written
 *      with U+FFFD.  Checked: the new object minus that field equals the old
 *      one, and the field holds the sanitized text.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "api.h"
#include "api_ref.h"
#include "fixtures.h"
#include "module.h"
#include "render.h"
#include "reqmem.h"
#include "render_ref.h"
#include "symfile.h"
#include "test.h"

static uint64_t rng_state = 0x243f6a8885a308d3u;
static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Compares two texts; prints where they part (once per caller budget). */
static bool same_text(const char *what, const char *want, const char *got, int *budget) {
  if (want && got && !strcmp(want, got))
    return true;
  if ((*budget)-- > 0) {
    size_t i = 0;
    while (want && got && want[i] && want[i] == got[i])
      i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "  %s: texts part at byte %zu\n    old: %.160s\n    new: %.160s\n", what, i,
            want ? want + from : "(null)", got ? got + from : "(null)");
  }
  return false;
}

/* ---- the modules ---------------------------------------------------------- */

typedef struct {
  char name[64];
  char debug_file[64];
  char debug_id[64];   /* guid-age */
  char breakpad[48];   /* GUID + age hex (v5) */
  const char *format;  /* "windows", "portable" or NULL */
  char code_file[32];
  char code_id[32];
  symtab st;
  bool managed;
} tmod;

#define MAX_MODS 40
static tmod mods[MAX_MODS];
static size_t nmods;

static char *source_path(const char *rel) {
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  if (!root)
    root = ".";
  size_t n = strlen(root) + strlen(rel) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", root, rel);
  return p;
}

static void ids_of(tmod *m) {
  module_id id;
  memset(&id, 0, sizeof id);
  memcpy(id.guid, m->st.ident.guid, 16);
  id.age = m->st.ident.age;
  module_debug_id(id.guid, m->st.ident.format == ST_FORMAT_PORTABLE ? 1 : id.age, m->debug_id);
  char key[42];
  module_index_key(&id, ST_FORMAT_WINDOWS, key);
  snprintf(m->breakpad, sizeof m->breakpad, "%s", key);
}

/* The PE's TimeDateStamp and SizeOfImage as a code id. */
static bool pe_code_id(const uint8_t *b, size_t n, char out[32]) {
  if (n < 0x40)
    return false;
  uint32_t pe = (uint32_t)b[0x3c] | (uint32_t)b[0x3d] << 8 | (uint32_t)b[0x3e] << 16 |
                (uint32_t)b[0x3f] << 24;
  if ((uint64_t)pe + 24 + 60 > n)
    return false;
  const uint8_t *p = b + pe;
  uint32_t stamp = (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
  const uint8_t *q = p + 24 + 56;
  uint32_t size = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
  snprintf(out, 32, "%08X%x", stamp, size);
  return true;
}

static int load_modules(void) {
  fx_manifest man;
  if (fx_manifest_load(&man) != 0)
    return -1;
  for (size_t i = 0; i < man.count && nmods < MAX_MODS; i++) {
    const fx_entry *e = &man.entries[i];
    tmod *m = &mods[nmods];
    char *path = fx_native_path(e->pdb);
    int rc = symfile_load(path, NULL, &m->st);
    free(path);
    if (rc)
      continue;
    snprintf(m->name, sizeof m->name, "%s", e->pdb);
    const char *slash = strrchr(e->cv_path, '\\');
    snprintf(m->debug_file, sizeof m->debug_file, "%s", slash ? slash + 1 : e->cv_path);
    ids_of(m);
    nmods++;
  }
  fx_manifest_free(&man);
  static const char *const managed[][2] = {{"windows-debug", "windows"}, {"windows-release", "windows"},
                                           {"portable-debug", "portable"}, {"portable-release", "portable"}};
  for (size_t i = 0; i < 4 && nmods < MAX_MODS; i++) {
    tmod *m = &mods[nmods];
    char rel[128];
    snprintf(rel, sizeof rel, "tests/fixtures/managed/%s/Demo.pdb", managed[i][0]);
    char *pdb = source_path(rel);
    snprintf(rel, sizeof rel, "tests/fixtures/managed/%s/Demo.dll", managed[i][0]);
    char *dll = source_path(rel);
    int rc = symfile_load(pdb, dll, &m->st);
    fx_blob b = {0};
    if (!rc && fx_read_path(dll, &b) == 0 && pe_code_id(b.data, b.len, m->code_id)) {
      snprintf(m->name, sizeof m->name, "%s", managed[i][0]);
      snprintf(m->debug_file, sizeof m->debug_file, "Demo.pdb");
      snprintf(m->code_file, sizeof m->code_file, "Demo.dll");
      m->format = managed[i][1];
      m->managed = true;
      ids_of(m);
      nmods++;
    } else if (!rc) {
      st_free(&m->st);
    }
    free(b.data);
    free(pdb);
    free(dll);
  }
  return nmods ? 0 : -1;
}

/* ---- 1. frames --------------------------------------------------------------- */

static int frames_checked, frames_bad;

static void one_answer(const symtab *st, render_module *rm, ref_render_module *ref, bool managed,
                       uint32_t v, uint32_t il, int module) {
  st_answer a;
  if (managed)
    st_lookup_token(st, v, il, &a);
  else
    st_lookup_rva(st, v, &a);
  char *want = ref_render_answer_json(ref, &a, module, managed, v, il);
  char *got = render_answer_json(rm, &a, module, managed, v, il);
  frames_checked++;
  if (!same_text("frame", want, got, &(int){frames_bad < 5 ? 1 : 0}))
    frames_bad++;
  free(want);
  free(got);
}

TEST(every_fixture_frame_renders_the_same) {
  if (!nmods)
    SKIP("no fixtures");
  int syms = 0;
  for (size_t i = 0; i < nmods; i++) {
    tmod *m = &mods[i];
    render_module rm;
    ref_render_module ref;
    render_module_init(&rm, &m->st);
    ref_render_module_init(&ref, &m->st);
    if (!m->managed) {
      uint32_t lo = UINT32_MAX, hi = 0;
      for (size_t f = 0; f < m->st.nfuncs; f++) {
        if (m->st.funcs[f].rva < lo)
          lo = m->st.funcs[f].rva;
        if (m->st.funcs[f].rva + m->st.funcs[f].size > hi)
          hi = m->st.funcs[f].rva + m->st.funcs[f].size;
      }
      for (size_t p = 0; p < m->st.npublics; p++) {
        if (m->st.publics[p].rva < lo)
          lo = m->st.publics[p].rva;
        if (m->st.publics[p].rva + 64 > hi)
          hi = m->st.publics[p].rva + 64;
      }
      lo = lo > 64 ? lo - 64 : 0;
      for (uint32_t rva = lo; rva < hi + 64; rva++) {
        one_answer(&m->st, &rm, &ref, false, rva, 0, (int)(rva % 3) - 1);
        syms++;
      }
      for (int k = 0; k < 200; k++)
        one_answer(&m->st, &rm, &ref, false, (uint32_t)rnd(), 0, 7);
    } else {
      for (size_t t = 0; t < m->st.nmethods; t++) {
        const st_method *me = &m->st.methods[t];
        uint32_t maxil = 0;
        for (uint32_t s = 0; s < me->sp_count; s++)
          if (m->st.seqpts[me->sp_first + s].il > maxil)
            maxil = m->st.seqpts[me->sp_first + s].il;
        for (uint32_t il = 0; il <= maxil + 3; il++)
          one_answer(&m->st, &rm, &ref, true, me->token, il, (int)(il % 2));
      }
      for (uint32_t t = 0; t < 8; t++) /* tokens no method has */
        one_answer(&m->st, &rm, &ref, true, 0x06000000u + (uint32_t)m->st.nmethods + 1 + t, 0, 2);
    }
    /* pdbsym dump's object */
    char *want = ref_render_symtab_json(&m->st, m->name);
    char *got = render_symtab_json(&m->st, m->name);
    if (!same_text("dump", want, got, &(int){1}))
      frames_bad++;
    free(want);
    free(got);
    render_module_free(&rm);
    ref_render_module_free(&ref);
  }
  printf("  %d frames of %zu fixtures compared, %d differ\n", frames_checked, nmods, frames_bad);
  CHECK_EQ_U(frames_bad, 0);
  CHECK(frames_checked > 20000);
}

TEST(every_kind_of_frame_renders_the_same) {
  static const char *const statuses[] = {"ok", "missing_symbols", "unknown_address", "malformed",
                                         "fetch_error", "pending", "invalid"};
  static const char *const errors[] = {NULL, "no symbol source has x.pdb", "a \"quoted\"\\ one\n",
                                       "caf\xc3\xa9 \xe2\x82\xac"};
  const symtab *st = nmods ? &mods[0].st : NULL;
  render_module rm;
  ref_render_module ref;
  render_module_init(&rm, st);
  ref_render_module_init(&ref, st);
  int bad = 0, n = 0;
  st_answer a;
  if (st)
    st_lookup_rva(st, st->nfuncs ? st->funcs[0].rva : 0, &a);
  /* and a synthetic answer with a symbol of every shape: every optional
   * field alone and together, .NET generated code of each kind (and a kind
   * the renderer does not know, which names no user method) */
  static const char *const strs[] = {NULL, "", "N.T.<M>b__0_0", "caf\xc3\xa9 \"q\"\\\x01",
                                     "bad \xff\xfe utf8",
                                     /* ASCII with '\\' and '"' (render.c's one-pass symbols) */
                                     "C:\\src\\a long directory name\\file \"quoted\".cpp",
                                     "ns::T<\"\\\">::f\\"};
  st_answer syn;
  memset(&syn, 0, sizeof syn);
  syn.status = ST_OK;
  for (int k = 0; k <= ST_MAX_INLINE_DEPTH; k++) {
    st_symbol *y = &syn.syms[k];
    uint64_t r = rnd();
    y->function = strs[1 + r % 6];
    y->mangled = strs[(r >> 3) % 7];
    y->file = strs[(r >> 6) % 7];
    y->has_line = (r >> 9) & 1;
    y->line = (uint32_t)(r >> 10) & 0xfffff;
    y->has_column = (r >> 30) & 1;
    y->column = (uint32_t)(r >> 31) & 0xff;
    y->end_line = y->line + 3;
    y->end_column = 0xffffffffu;
    y->has_offset = (r >> 40) & 1;
    y->function_offset = (uint32_t)(r >> 41) & 0xffff;
    y->inlined = (r >> 57) & 1;
    y->hidden = (r >> 58) & 1;
    y->async_method = (r >> 59) & 1 ? strs[2 + k % 3] : NULL;
    y->generated = (uint32_t)(k % 5); /* CN_NONE .. CN_STATE_MACHINE, and 4 */
    y->user_method = (r >> 60) & 1 ? NULL : strs[2 + (k + 1) % 3];
    y->local_function = (r >> 61) & 1 ? strs[2 + (k + 2) % 3] : NULL;
    syn.nsyms = k + 1;
  }
  for (size_t s = 0; s < 7; s++)
    for (int mod = -1; mod < 2; mod++)
      for (int addr = 0; addr < 3; addr++)
        for (size_t e = 0; e < 4; e++)
          for (int ra = -1; ra < 2; ra += 2)
            for (int in = 0; in < 2; in++)
              for (int ia = 0; ia < 4; ia++) {
                const st_answer *ans = s != 0 ? NULL : ia >= 2 ? &syn : st ? &a : NULL;
                render_frame f = {statuses[s], mod * 1000003LL, addr > 0, addr == 2,
                                  addr == 2 ? 0x06000123u : 0xfffff12u, 77, ans, errors[e],
                                  ra * 5LL, in ? "0x12 bogus\t\"x\"" : NULL, ia & 1,
                                  0x7ff6a0001234ull + (uint64_t)ia, (ia + in) % 3 == 1};
                char *want = ref_render_frame_json(&ref, &f), *got = render_frame_json(&rm, &f);
                n++;
                if (!same_text("frame kind", want, got, &(int){bad < 3 ? 1 : 0}))
                  bad++;
                free(want);
                free(got);
              }
  render_module_free(&rm);
  ref_render_module_free(&ref);
  printf("  %d frames of every status and shape, %d differ\n", n, bad);
  CHECK_EQ_U(bad, 0);
}

TEST(source_link_maps_resolve_the_same) {
  /* synthetic managed modules: random Source Link maps (wildcards, exact
   * entries, case, overlapping prefixes, duplicate keys, a non-string value)
   * and documents under and outside them */
  static const char *const prefixes[] = {"/_/", "/_/src/", "C:\\build\\", "/_/SRC/", "", "/"};
  int bad = 0, n = 0;
  for (int round = 0; round < 200; round++) {
    symtab st;
    st_init(&st, NULL);
    char map[2048];
    size_t o = (size_t)snprintf(map, sizeof map, "{\"documents\": {");
    int entries = (int)(rnd() % 5);
    for (int k = 0; k < entries; k++) {
      const char *p = prefixes[rnd() % 6];
      bool wild = rnd() % 3 != 0;
      char key[64];
      snprintf(key, sizeof key, "%s%s%s", p, wild ? "" : "exact.cs", wild ? "*" : "");
      json_t *jk = json_string(key);
      char *ek = json_dumps(jk, JSON_ENCODE_ANY);
      o += (size_t)snprintf(map + o, sizeof map - o, "%s%s: \"https://e.org/r%d/%s\"",
                            k ? ", " : "", ek, k, wild ? "*" : "x");
      free(ek);
      json_decref(jk);
    }
    if (rnd() % 4 == 0)
      o += (size_t)snprintf(map + o, sizeof map - o, "%s\"/_/n*\": 5", entries ? ", " : "");
    snprintf(map + o, sizeof map - o, "}}");
    st.source_link = st_cstr(&st, map);
    for (uint32_t t = 1; t <= 6; t++) {
      char doc[64];
      snprintf(doc, sizeof doc, "%s%s", prefixes[rnd() % 6], t % 2 ? "exact.cs" : "src\\Deep\\F.cs");
      st_seqpt p = {0x06000000u + t, 0, 10 + t, 10 + t, 1, 9, st_cstr(&st, doc)};
      st_add_seqpt(&st, &p);
      st_add_method(&st, 0x06000000u + t, st_cstr(&st, "N.T.M"), 0);
    }
    CHECK_EQ_U(st_finish(&st), PS_E_OK);
    render_module rm;
    ref_render_module ref;
    render_module_init(&rm, &st);
    ref_render_module_init(&ref, &st);
    for (uint32_t t = 1; t <= 6; t++) {
      st_answer a;
      st_lookup_token(&st, 0x06000000u + t, 0, &a);
      char *want = ref_render_answer_json(&ref, &a, 0, true, 0x06000000u + t, 0);
      char *got = render_answer_json(&rm, &a, 0, true, 0x06000000u + t, 0);
      n++;
      if (!same_text("source link", want, got, &(int){bad < 3 ? 1 : 0}))
        bad++;
      free(want);
      free(got);
    }
    render_module_free(&rm);
    ref_render_module_free(&ref);
    st_free(&st);
  }
  printf("  %d frames with Source Link maps, %d differ\n", n, bad);
  CHECK_EQ_U(bad, 0);
}

/* pdbsym dump of a PE image: every fixture image, with and without a table
 * under embedded_pdb, and made-up CodeView entries (portable, unnamed,
 * names that are not UTF-8, more entries than the renderer lists). */
TEST(every_pe_dump_renders_the_same) {
  if (!nmods)
    SKIP("no fixtures");
  static const char *const images[] = {
      "tests/fixtures/managed/portable-release/Demo.dll", "tests/fixtures/managed/windows-debug/Demo.dll",
      "tests/fixtures/managed/embedded-debug/Demo.dll", "tests/fixtures/native/cpp-x64-O2.exe",
      "tests/fixtures/native/c-x86-O0.exe", "tests/fixtures/native/c-arm64-O2.exe",
      "tests/fixtures/nettrace/net10.0/Workload.dll"};
  int bad = 0, n = 0;
  for (size_t i = 0; i < sizeof images / sizeof images[0]; i++) {
    char *path = source_path(images[i]);
    fx_blob b = {0};
    pe_info pe;
    ps_diag d;
    ps_diag_clear(&d);
    if (fx_read_path(path, &b) != 0 || pe_parse(b.data, b.len, &pe, &d) != PS_E_OK) {
      fprintf(stderr, "  cannot read %s\n", path);
      bad++;
      free(b.data);
      free(path);
      continue;
    }
    for (int variant = 0; variant < 3; variant++) {
      pe_info q = pe;
      if (variant == 2) { /* every kind of CodeView entry */
        q.ncodeview = PE_MAX_CODEVIEW + 2;
        for (int k = 0; k < PE_MAX_CODEVIEW; k++) {
          pe_codeview *cv = &q.codeview[k];
          memset(cv, 0, sizeof *cv);
          for (int g = 0; g < 16; g++)
            cv->guid[g] = (uint8_t)rnd();
          cv->age = k == 3 ? 0xffffffffu : (uint32_t)(rnd() % 300);
          cv->portable = k % 2 == 1;
          static const char *const names[] = {"C:\\b\\x.pdb", "", "a/../b.pdb", "caf\xc3\xa9.pdb",
                                              "bad\xff.pdb", "x\"q\\.pdb", "/l/y.pdb", "z.PDB"};
          snprintf(cv->path, sizeof cv->path, "%s", names[k]);
        }
      }
      const symtab *emb = variant == 1 && nmods ? &mods[nmods - 1].st : NULL;
      char *want = ref_render_pe_json(&q, "Demo.dll", "Demo.dll", emb);
      char *got = render_pe_json(&q, "Demo.dll", "Demo.dll", emb);
      n++;
      if (!same_text("pe dump", want, got, &(int){bad < 3 ? 1 : 0}))
        bad++;
      free(want);
      free(got);
    }
    free(b.data);
    free(path);
  }
  printf("  %d PE dumps compared, %d differ\n", n, bad);
  CHECK_EQ_U(bad, 0);
  CHECK(n >= 18);
}

/* ---- 3. the documented difference ------------------------------------------------ */

TEST(non_utf8_fields_are_kept_now) {
  render_module rm;
  ref_render_module ref;
  render_module_init(&rm, NULL);
  ref_render_module_init(&ref, NULL);
  render_frame f = {"missing_symbols", 0, true, false, 0x10, 0, NULL,
                    "no symbol source has caf\xc3", -1, "0x10\xff", false, 0, false};
  char *oldtext = ref_render_frame_json(&ref, &f);
  json_t *old = json_loads(oldtext, 0, NULL);
  free(oldtext);
  char *text = render_frame_json(&rm, &f);
  json_t *now = json_loads(text, 0, NULL);
  CHECK(old && now);
  CHECK(json_object_get(old, "error") == NULL);   /* the old renderer dropped them */
  CHECK(json_object_get(old, "address") == NULL);
  CHECK_EQ_S(json_string_value(json_object_get(now, "error")),
             "no symbol source has caf\xef\xbf\xbd");
  CHECK_EQ_S(json_string_value(json_object_get(now, "address")), "0x10\xef\xbf\xbd");
  json_object_del(now, "error");
  json_object_del(now, "address");
  CHECK(json_equal(old, now)); /* and nothing else differs */
  json_decref(old);
  json_decref(now);
  free(text);
  /* dump's file name */
  if (nmods) {
    oldtext = ref_render_symtab_json(&mods[0].st, "x\xfe.pdb");
    old = json_loads(oldtext, 0, NULL);
    free(oldtext);
    text = render_symtab_json(&mods[0].st, "x\xfe.pdb");
    now = json_loads(text, 0, NULL);
    CHECK(old && now && json_object_get(old, "file") == NULL);
    CHECK_EQ_S(json_string_value(json_object_get(now, "file")), "x\xef\xbf\xbd.pdb");
    json_object_del(now, "file");
    CHECK(json_equal(old, now));
    json_decref(old);
    json_decref(now);
    free(text);
  }
  render_module_free(&rm);
  ref_render_module_free(&ref);
}

/* ---- 2. whole answers through the routes --------------------------------------------- */

static char store_dir[1200], cache_dir[1200], base_dir[1100];
static engine *eng;
static srv_config cfg;
static api the_api;
static int requests, requests_bad, documented;
/* what the answers held, so that the comparison is known to cover them */
static int by_status[600], frame_statuses[8], v5_found[3], v5_frames_named;
static int seen_iaddr, seen_adjusted, seen_invalid_module, seen_user_method, seen_source_link,
    seen_async, seen_unknown_module, seen_neg_offset;

static void tally(const api_response *r) {
  if (r->status < 600)
    by_status[r->status]++;
  json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
  static const char *const names[] = {"ok", "missing_symbols", "unknown_address", "malformed",
                                      "fetch_error", "pending", "invalid"};
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(j, "frames"), i, f) {
    const char *st = json_string_value(json_object_get(f, "status"));
    for (int k = 0; k < 7; k++)
      if (st && !strcmp(st, names[k]))
        frame_statuses[k]++;
    seen_iaddr += json_object_get(f, "instruction_addr") != NULL;
    seen_adjusted += json_object_get(f, "adjust_instruction_addr") != NULL;
    size_t si;
    json_t *sym;
    json_array_foreach(json_object_get(f, "symbols"), si, sym) {
      seen_user_method += json_object_get(sym, "user_method") != NULL;
      seen_source_link += json_object_get(sym, "source_link") != NULL;
      seen_async += json_object_get(sym, "async_method") != NULL;
    }
  }
  json_array_foreach(json_object_get(j, "modules"), i, f) {
    const char *st = json_string_value(json_object_get(f, "status"));
    seen_invalid_module += st && !strcmp(st, "invalid");
  }
  json_t *res;
  json_array_foreach(json_object_get(j, "results"), i, res) {
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(res, "found_modules"), key, v)
      v5_found[json_is_null(v) ? 0 : json_is_true(v) ? 1 : 2]++;
    size_t si, k;
    json_t *stack, *fr;
    json_array_foreach(json_object_get(res, "stacks"), si, stack)
      json_array_foreach(stack, k, fr) {
        v5_frames_named += json_object_get(fr, "function") != NULL;
        const char *mn = json_string_value(json_object_get(fr, "module"));
        const char *mo = json_string_value(json_object_get(fr, "module_offset"));
        seen_unknown_module += mn && !strcmp(mn, "<unknown>");
        seen_neg_offset += mo && mo[0] == '-';
      }
  }
  json_decref(j);
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static bool write_file(const char *dir, const char *name, const char *key, const void *data,
                       size_t n) {
  char p[1400];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/%s", dir, name, key);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/%s/%s", dir, name, key, name);
  FILE *f = fopen(p, "wb");
  if (!f)
    return false;
  bool ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static bool make_store(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(base_dir, sizeof base_dir, "%s/pdbsym-equiv-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base_dir))
    return false;
  snprintf(store_dir, sizeof store_dir, "%s/store", base_dir);
  snprintf(cache_dir, sizeof cache_dir, "%s/cache", base_dir);
  mkdir(store_dir, 0755);
  fx_manifest man;
  if (fx_manifest_load(&man) != 0)
    return false;
  for (size_t i = 0; i < man.count; i++) {
    const fx_entry *e = &man.entries[i];
    fx_blob b;
    if (fx_read_fixture(e->pdb, &b) != 0)
      continue;
    const char *slash = strrchr(e->cv_path, '\\');
    write_file(store_dir, slash ? slash + 1 : e->cv_path, e->symkey, b.data, b.len);
    free(b.data);
  }
  fx_manifest_free(&man);
  static const char *const managed[] = {"windows-debug", "windows-release", "portable-debug",
                                        "portable-release"};
  for (size_t i = 0; i < 4; i++) {
    char rel[128];
    snprintf(rel, sizeof rel, "tests/fixtures/managed/%s/Demo.pdb", managed[i]);
    char *p = source_path(rel);
    fx_blob b;
    for (size_t k = 0; k < nmods; k++) {
      if (!mods[k].managed || strcmp(mods[k].name, managed[i]))
        continue;
      module_id id;
      memset(&id, 0, sizeof id);
      memcpy(id.guid, mods[k].st.ident.guid, 16);
      id.age = mods[k].st.ident.age;
      char key[42];
      module_index_key(&id, mods[k].st.ident.format, key);
      if (fx_read_path(p, &b) == 0) {
        write_file(store_dir, "Demo.pdb", key, b.data, b.len);
        free(b.data);
      }
      free(p);
      snprintf(rel, sizeof rel, "tests/fixtures/managed/%s/Demo.dll", managed[i]);
      p = source_path(rel);
      if (fx_read_path(p, &b) == 0) {
        write_file(store_dir, "Demo.dll", mods[k].code_id, b.data, b.len);
        free(b.data);
      }
    }
    free(p);
  }
  /* a damaged PDB: an MSF header and garbage after it */
  char junk[8192];
  memset(junk, 0x5a, sizeof junk);
  memcpy(junk, "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS\0\0\0", 32);
  write_file(store_dir, "damaged.pdb", "00112233445566778899AABBCCDDEEFF1", junk, sizeof junk);
  return true;
}

static void open_engine(void) {
  char err[256];
  char *argv[] = {(char *)"equiv", NULL};
  if (cfg_load(&cfg, 1, argv, err, sizeof err) != 0)
    return;
  cfg.max_frames = 100000;
  cfg.max_modules = 1000;
  cfg.default_timeout = 60;
  engine_config ec;
  memset(&ec, 0, sizeof ec);
  ec.cache_dir = cache_dir;
  ec.symbol_path = store_dir; /* a local folder: no network */
  ec.offline = false;
  ps_diag d;
  ps_diag_clear(&d);
  if (engine_open(&ec, &eng, &d) != PS_E_OK) {
    char msg[256];
    fprintf(stderr, "  engine_open: %s\n", ps_diag_format(&d, msg, sizeof msg));
    eng = NULL;
    return;
  }
  the_api.eng = eng;
  the_api.cfg = &cfg;
}

/* One request through both implementations. */
static void both(const char *what, api_route_id route, const char *path, const char *fmt,
                 const char *body, size_t len) {
  api_response want, got;
  ref_api_handle(&the_api, route, path, fmt, body, len, &want);
  api_handle(&the_api, route, path, fmt, body, len, &got);
  requests++;
  tally(&got);
  int same = ref_same_answer(&want, &got);
  if (same == 1)
    documented++; /* allowed, and counted: the fixtures are not expected to have any */
  bool ok = want.status == got.status && want.retry_after == got.retry_after &&
            want.frames == got.frames && want.modules == got.modules &&
            !strcmp(want.content_type ? want.content_type : "", got.content_type ? got.content_type : "") &&
            same >= 0;
  if (!ok) {
    if (requests_bad++ < 5) {
      fprintf(stderr, "  %s: status %u/%u, %zu/%zu bytes\n", what, want.status, got.status, want.len,
              got.len);
      same_text(what, want.body, got.body, &(int){1});
      json_t *a = want.body ? json_loadb(want.body, want.len, 0, NULL) : NULL;
      json_t *b = got.body ? json_loadb(got.body, got.len, 0, NULL) : NULL;
      fprintf(stderr, "    parsed with jansson: %s\n", a && b && json_equal(a, b) ? "equal" : "differ");
      json_decref(a);
      json_decref(b);
    }
  }
  free(want.body);
  free(got.body);
}

static void both_json(const char *what, api_route_id route, json_t *body) {
  char *text = json_dumps(body, JSON_COMPACT);
  both(what, route, route == RT_SYMBOLICATE ? "/symbolicate" : "/symbolicate/v5", NULL, text,
       strlen(text));
  free(text);
  json_decref(body);
}

static json_t *module_entry(const tmod *m) {
  json_t *o = json_object();
  json_object_set_new(o, "debug_file", json_string(m->debug_file));
  json_object_set_new(o, "debug_id", json_string(m->debug_id));
  if (m->format)
    json_object_set_new(o, "format", json_string(m->format));
  if (m->code_file[0]) {
    json_object_set_new(o, "code_file", json_string(m->code_file));
    json_object_set_new(o, "code_id", json_string(m->code_id));
  }
  return o;
}

static json_t *hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return json_string(b);
}

/* A native or managed frame of module mi, its address from the table. */
static json_t *frame_of(size_t mi, const tmod *m, uint64_t k) {
  json_t *f = json_object();
  json_object_set_new(f, "module", (k & 4) ? hex(mi) : json_integer((json_int_t)mi));
  if (m->managed) {
    const st_method *me = m->st.nmethods ? &m->st.methods[k % m->st.nmethods] : NULL;
    json_object_set_new(f, "token", (k & 1) ? json_integer(me ? me->token : 0x06000001)
                                            : hex(me ? me->token : 0x06000001));
    json_object_set_new(f, "il_offset", (k & 2) ? hex(k % 40) : json_integer((json_int_t)(k % 40)));
  } else {
    uint32_t rva = m->st.nfuncs ? m->st.funcs[k % m->st.nfuncs].rva + (uint32_t)(k % 97) : 0x1000;
    if (k % 13 == 0)
      rva = (uint32_t)rnd(); /* mostly no function there */
    json_object_set_new(f, "rva", (k & 1) ? json_integer(rva) : hex(rva));
  }
  return f;
}

static const tmod missing_mod = {.name = "missing", .debug_file = "nowhere.pdb",
                                 .debug_id = "00112233-4455-6677-8899-aabbccddeeff-1",
                                 .breakpad = "00112233445566778899AABBCCDDEEFF1"};
static const tmod damaged_mod = {.name = "damaged", .debug_file = "damaged.pdb",
                                 .debug_id = "00112233-4455-6677-8899-aabbccddeeff-1",
                                 .breakpad = "00112233445566778899AABBCCDDEEFF1", .format = "windows"};

static void symbolicate_requests(void) {
  /* 0. every module once, so that every answer after comes from the cache
   * for both implementations (a download changes from_cache) */
  json_t *all = json_object(), *am = json_array(), *af = json_array();
  for (size_t i = 0; i < nmods; i++) {
    json_array_append_new(am, module_entry(&mods[i]));
    json_array_append_new(af, frame_of(i, &mods[i], 0));
  }
  json_array_append_new(am, module_entry(&missing_mod));
  json_array_append_new(am, module_entry(&damaged_mod));
  json_object_set_new(all, "modules", am);
  json_object_set_new(all, "frames", af);
  char *text = json_dumps(all, JSON_COMPACT);
  json_decref(all);
  api_response warm;
  api_handle(&the_api, RT_SYMBOLICATE, "/symbolicate", NULL, text, strlen(text), &warm);
  CHECK_EQ_U(warm.status, 200);
  free(warm.body);
  free(text);
  /* 1. each module alone, a thousand frames */
  for (size_t i = 0; i < nmods; i++) {
    json_t *b = json_object(), *ms = json_array(), *fs = json_array();
    json_array_append_new(ms, module_entry(&mods[i]));
    for (uint64_t k = 0; k < 1000; k++) /* the last 300 ask earlier ones again */
      json_array_append_new(fs, frame_of(0, &mods[i], k < 700 ? k : (k * 7) % 700));
    json_object_set_new(b, "modules", ms);
    json_object_set_new(b, "frames", fs);
    both_json(mods[i].name, RT_SYMBOLICATE, b);
  }
  /* 2. mixed batches: every module, the missing and the damaged one,
   * modules listed twice, modules with bad fields (they fail alone), image
   * addresses, frames by instruction_addr, return addresses, stacks, invalid
   * frames, timeouts */
  static const char *const adjustments[] = {NULL, "none", "all_but_first", "all"};
  for (int round = 0; round < 60; round++) {
    json_t *b = json_object(), *ms = json_array(), *fs = json_array();
    size_t nm = 0;
    const tmod *listed[4 * MAX_MODS];
    uint64_t image[4 * MAX_MODS];
    for (size_t i = 0; i < nmods + 3; i++) {
      const tmod *m = i < nmods ? &mods[i] : i == nmods ? &missing_mod : &damaged_mod;
      int copies = 1 + (int)(rnd() % 2);
      for (int c = 0; c < copies; c++) {
        json_t *e = module_entry(m);
        image[nm] = 0;
        if (rnd() % 3) {
          image[nm] = 0x140000000ull + (uint64_t)nm * 0x1000000u;
          json_object_set_new(e, "image_addr", rnd() % 2 ? hex(image[nm])
                                                         : json_integer((json_int_t)image[nm]));
          if (rnd() % 2)
            json_object_set_new(e, "image_size", hex(rnd() % 4 ? 0x800000u : 0x2000u));
        }
        if (i == nmods + 2 || rnd() % 40 == 0) { /* a module that fails alone */
          switch (rnd() % 6) {
          case 0: json_object_set_new(e, "debug_id", json_string("zz")); break;
          case 1: json_object_del(e, "debug_file"); break;
          case 2: json_object_set_new(e, "format", json_string("elf")); break;
          case 3: json_object_del(e, "image_addr"); json_object_set_new(e, "image_size", json_integer(5)); break;
          case 4: json_object_set_new(e, "debug_file", json_string("caf\xc3\xa9..pdb")); break;
          default: json_object_set_new(e, "code_id", json_integer(3)); break;
          }
        }
        listed[nm++] = m;
        json_array_append_new(ms, e);
      }
    }
    for (uint64_t k = 0; k < 300; k++) {
      size_t mi = (size_t)(rnd() % nm);
      json_t *f = frame_of(mi, listed[mi], rnd());
      json_t *rva = json_object_get(f, "rva");
      if (rva && rnd() % 2) { /* the absolute address instead */
        uint64_t v = json_is_integer(rva) ? (uint64_t)json_integer_value(rva)
                                          : strtoull(json_string_value(rva), NULL, 16);
        uint64_t base = image[mi] ? image[mi] : (rnd() % 2 ? 0 : 0x400000u);
        json_object_set_new(f, "instruction_addr", hex(base + v - (rnd() % 50 == 0 ? 0x500000u : 0)));
        json_object_del(f, "rva");
      }
      if (rnd() % 4 == 0)
        json_object_set_new(f, "adjust_instruction_addr", json_boolean(rnd() % 2));
      if (rnd() % 3 == 0)
        json_object_set_new(f, "stack", json_integer((json_int_t)(rnd() % 4)));
      if (rnd() % 60 == 0)
        json_object_set_new(f, "module", json_integer(-1 - (json_int_t)(rnd() % 2)));
      uint64_t shape = rnd() % 12;
      if (shape < 4)
        json_object_del(f, "instruction_addr");
      switch (shape) {
      case 0: json_object_set_new(f, "rva", hex(0x1ffffffffu)); json_object_del(f, "token");
              json_object_del(f, "il_offset"); break;          /* does not fit in 32 bits */
      case 1: json_object_set_new(f, "rva", json_string("0xffffffffffffffffff")); json_object_del(f, "token");
              json_object_del(f, "il_offset"); break;          /* out of range */
      case 2: json_object_del(f, "rva"); json_object_set_new(f, "token", hex(0x02000001));
              json_object_set_new(f, "il_offset", json_integer(0)); break; /* not a MethodDef */
      case 3: json_object_del(f, "rva"); json_object_set_new(f, "token", hex(0x06000001));
              json_object_set_new(f, "il_offset", hex(0x1ffffffffu)); break; /* il out of range */
      default: break;
      }
      if (k > 0 && rnd() % 4 == 0) {
        /* a frame asked again (api.c copies its answer): as it was, or
         * through another entry naming the same module */
        json_decref(f);
        f = json_deep_copy(json_array_get(fs, (size_t)(rnd() % k)));
        json_t *mv = json_object_get(f, "module");
        if (mv && json_is_integer(mv) && json_integer_value(mv) >= 0 &&
            (size_t)json_integer_value(mv) < nm && rnd() % 2) {
          const tmod *was = listed[json_integer_value(mv)];
          for (size_t x = 0; x < nm; x++)
            if (listed[x] == was && rnd() % 2) {
              json_object_set_new(f, "module", json_integer((json_int_t)x));
              break;
            }
        }
      }
      json_array_append_new(fs, f);
    }
    json_object_set_new(b, "modules", ms);
    json_object_set_new(b, "frames", fs);
    if (round % 3 == 0)
      json_object_set_new(b, "timeout", json_real(2.5));
    if (adjustments[round % 4])
      json_object_set_new(b, "instruction_addr_adjustment", json_string(adjustments[round % 4]));
    both_json("mixed batch", RT_SYMBOLICATE, b);
  }
}

static void v5_requests(void) {
  for (int round = 0; round < 60; round++) {
    int njobs = round % 4 == 0 ? 0 : 1 + (int)(rnd() % 3); /* 0: a bare job */
    json_t *jobs = json_array();
    for (int j = 0; j < (njobs ? njobs : 1); j++) {
      json_t *job = json_object(), *map = json_array(), *stacks = json_array();
      size_t nm = 0;
      const tmod *listed[3 * MAX_MODS];
      for (size_t i = 0; i < nmods + 1; i++) {
        const tmod *m = i < nmods ? &mods[i] : &missing_mod;
        if (m->managed || rnd() % 3 == 0)
          continue;
        int copies = 1 + (rnd() % 4 == 0);
        for (int c = 0; c < copies; c++) {
          json_t *e = json_array();
          int bad = rnd() % 25 == 0 ? 1 + (int)(rnd() % 2) : 0; /* fails alone */
          json_array_append_new(e, json_string(bad == 1 ? "a/../b.pdb" : m->debug_file));
          json_array_append_new(e, json_string(bad == 2 ? "nope" : m->breakpad));
          json_array_append_new(map, e);
          listed[nm++] = m;
        }
      }
      int nst = 1 + (int)(rnd() % 3);
      for (int s = 0; s < nst && nm; s++) {
        json_t *st = json_array();
        for (int k = 0; k < 150; k++) {
          size_t mi = (size_t)(rnd() % (nm + (rnd() % 10 == 0 ? 3 : 0)));
          if (mi >= nm - (nm > 1 ? 1 : 0) && rnd() % 2)
            mi = nm + 5; /* out of range */
          int64_t idx = rnd() % 50 == 0 ? -1 : (int64_t)mi;
          const tmod *m = mi < nm ? listed[mi] : &mods[0];
          uint64_t off = m->st.nfuncs ? m->st.funcs[rnd() % m->st.nfuncs].rva + rnd() % 64 : 0x1000;
          if (rnd() % 20 == 0)
            off = 0x100000000u + off;
          json_t *e = json_array();
          json_array_append_new(e, json_integer(idx));
          uint64_t how = rnd() % 40;
          json_array_append_new(e, how == 0   ? json_integer(-1 - (json_int_t)(rnd() % 300))
                                   : how == 1 ? json_string("0x1FFFFFFFFFFFFFFFFF")
                                   : how == 2 ? json_string("0X00ABC")
                                   : rnd() % 2 ? json_integer((json_int_t)off)
                                               : hex(off));
          if (k > 0 && rnd() % 4 == 0) {
            /* a frame asked again (api.c copies its answer), from this
             * stack or an earlier one of the job */
            json_decref(e);
            size_t ns = json_array_size(stacks);
            json_t *from = ns && rnd() % 2 ? json_array_get(stacks, (size_t)(rnd() % ns)) : st;
            size_t nf = json_array_size(from);
            e = nf ? json_deep_copy(json_array_get(from, (size_t)(rnd() % nf))) : json_array();
            if (!nf) {
              json_array_append_new(e, json_integer(0));
              json_array_append_new(e, json_integer(0x1000));
            }
          }
          json_array_append_new(st, e);
        }
        json_array_append_new(stacks, st);
      }
      json_object_set_new(job, "memoryMap", map);
      json_object_set_new(job, "stacks", stacks);
      json_array_append_new(jobs, job);
    }
    json_t *body;
    if (njobs) {
      body = json_object();
      json_object_set_new(body, "jobs", jobs);
    } else {
      body = json_incref(json_array_get(jobs, 0));
      json_decref(jobs);
    }
    both_json("v5", RT_SYMBOLICATE_V5, body);
  }
}

static void error_requests(void) {
  static const char *const bodies[] = {
      "", "{", "[]", "null", "{\"modules\": 1, \"frames\": []}", "{\"modules\": [], \"frames\": 1}",
      "{\"modules\": [], \"frames\": [], \"modules\": []}",
      "{\"modules\": [1], \"frames\": []}",
      "{\"modules\": [{}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": 5}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": \"a/../b.pdb\", \"debug_id\": \"x\"}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"x\"}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": \"a\\u0000.pdb\", \"debug_id\": \"x\"}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\", "
      "\"format\": \"elf\"}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\", "
      "\"code_file\": 3}], \"frames\": []}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\", "
      "\"code_id\": \"zz\"}], \"frames\": []}",
      "{\"modules\": [], \"frames\": [3]}",
      "{\"modules\": [], \"frames\": [{\"module\": 0, \"rva\": 1}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"rva\": 1}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"module\": \"x\", \"rva\": 1}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"module\": 0, \"rva\": 1, \"token\": 2}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"module\": 0}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"module\": 0, \"rva\": \"12\"}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"module\": 0, \"token\": \"0x06000001\"}]}",
      "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
      " \"frames\": [{\"module\": 0, \"token\": \"0x06000001\", \"il_offset\": true}]}",
      "{\"modules\": [], \"frames\": [], \"timeout\": -1}",
      "{\"modules\": [], \"frames\": [], \"timeout\": \"5\"}",
      "\xff\xfe", "{\"modules\": [], \"frames\": []} trailing",
  };
  static const char *const v5bodies[] = {
      "", "[]", "{\"jobs\": 3}", "{\"jobs\": [1]}", "{\"memoryMap\": 1, \"stacks\": []}",
      "{\"memoryMap\": [], \"stacks\": 2}", "{\"memoryMap\": [[1, 2]], \"stacks\": []}",
      "{\"memoryMap\": [[\"a.pdb\"]], \"stacks\": []}",
      "{\"memoryMap\": [[\"a/../b\", \"00112233445566778899AABBCCDDEEFF1\"]], \"stacks\": []}",
      "{\"memoryMap\": [[\"a.pdb\", \"nope\"]], \"stacks\": []}",
      "{\"memoryMap\": [], \"stacks\": [1]}", "{\"memoryMap\": [], \"stacks\": [[[0]]]}",
      "{\"memoryMap\": [], \"stacks\": [[[0, \"zz\"]]]}", "{\"memoryMap\": [], \"stacks\": [[[0, true]]]}",
      "{\"jobs\": [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}]}",
      "{\"jobs\": [{\"memoryMap\": [], \"stacks\": []}, 5]}",
  };
  char name[64];
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
    snprintf(name, sizeof name, "error body %zu", i);
    both(name, RT_SYMBOLICATE, "/symbolicate", NULL, bodies[i], strlen(bodies[i]));
  }
  for (size_t i = 0; i < sizeof v5bodies / sizeof v5bodies[0]; i++) {
    snprintf(name, sizeof name, "v5 error body %zu", i);
    both(name, RT_SYMBOLICATE_V5, "/symbolicate/v5", NULL, v5bodies[i], strlen(v5bodies[i]));
  }
  /* the limits */
  uint64_t mf = cfg.max_frames, mm = cfg.max_modules;
  cfg.max_frames = 3;
  cfg.max_modules = 2;
  const char *over = "{\"modules\": [{\"debug_file\": \"a.pdb\", \"debug_id\": \"00112233445566778899AABBCCDDEEFF1\"}],"
                     " \"frames\": [{\"module\": 0, \"rva\": 1}, {\"module\": 0, \"rva\": 1}, "
                     "{\"module\": 0, \"rva\": 1}, {\"module\": 0, \"rva\": 1}]}";
  both("too many frames", RT_SYMBOLICATE, "/symbolicate", NULL, over, strlen(over));
  const char *overm = "{\"modules\": [{}, {}, {}], \"frames\": []}";
  both("too many modules", RT_SYMBOLICATE, "/symbolicate", NULL, overm, strlen(overm));
  const char *v5over = "{\"memoryMap\": [[\"a.pdb\", \"00112233445566778899AABBCCDDEEFF1\"]], "
                       "\"stacks\": [[[0, 1], [0, 2], [0, 3], [0, 4]]]}";
  both("v5 too many frames", RT_SYMBOLICATE_V5, "/symbolicate/v5", NULL, v5over, strlen(v5over));
  cfg.max_frames = mf;
  cfg.max_modules = mm;
}

/* max_answer_bytes: an answer that would pass it is a 400 naming the
 * setting; the same request under a cap it fits is answered. */
static void answer_cap(void) {
  json_t *b = json_object(), *ms = json_array(), *fs = json_array();
  json_array_append_new(ms, module_entry(&mods[0]));
  for (uint64_t k = 0; k < 200; k++)
    json_array_append_new(fs, frame_of(0, &mods[0], k));
  json_object_set_new(b, "modules", ms);
  json_object_set_new(b, "frames", fs);
  char *text = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  api_response r;
  api_handle(&the_api, RT_SYMBOLICATE, "/symbolicate", NULL, text, strlen(text), &r);
  CHECK_EQ_U(r.status, 200);
  size_t need = r.len;
  free(r.body);
  uint64_t keep = cfg.max_answer_bytes;
  cfg.max_answer_bytes = need - 1;
  api_handle(&the_api, RT_SYMBOLICATE, "/symbolicate", NULL, text, strlen(text), &r);
  CHECK_EQ_U(r.status, 400);
  json_t *j = json_loadb(r.body, r.len, 0, NULL);
  CHECK_EQ_S(json_string_value(json_object_get(j, "field")), "frames");
  CHECK(strstr(json_string_value(json_object_get(j, "error")), "max_answer_bytes") != NULL);
  json_decref(j);
  free(r.body);
  cfg.max_answer_bytes = need;
  api_handle(&the_api, RT_SYMBOLICATE, "/symbolicate", NULL, text, strlen(text), &r);
  CHECK_EQ_U(r.status, 200);
  CHECK_EQ_U(r.len, need);
  free(r.body);
  cfg.max_answer_bytes = keep;
  /* the request memory budget: the answer's buffer is reserved in it as it
   * grows and leaves with the body (out.charged, given back by whoever frees
   * the body: http.c when libmicrohttpd is done); an answer the budget
   * cannot take is a 503 naming request_memory_max */
  uint64_t before = rm_used();
  api_handle(&the_api, RT_SYMBOLICATE, "/symbolicate", NULL, text, strlen(text), &r);
  CHECK_EQ_U(r.status, 200);
  CHECK(r.charged >= r.len + 1);
  CHECK_EQ_U(rm_used() - before, r.charged); /* the parsed arrays are given back already */
  free(r.body);
  rm_release(r.charged);
  CHECK_EQ_U(rm_used(), before);
  rm_set_max(before + need / 2);
  api_handle(&the_api, RT_SYMBOLICATE, "/symbolicate", NULL, text, strlen(text), &r);
  CHECK_EQ_U(r.status, 503);
  CHECK(r.retry_after > 0);
  j = json_loadb(r.body, r.len, 0, NULL);
  CHECK(strstr(json_string_value(json_object_get(j, "error")), "request_memory_max") != NULL);
  json_decref(j);
  free(r.body);
  rm_release(r.charged);
  rm_set_max(0);
  CHECK_EQ_U(rm_used(), before);
  free(text);
}

static void other_routes(void) {
  char path[512];
  for (size_t i = 0; i < nmods; i++) {
    snprintf(path, sizeof path, "/modules/%s/%s", mods[i].debug_file, mods[i].debug_id);
    both(path, RT_MODULES, path, NULL, NULL, 0);
    both(path, RT_MODULES, path, mods[i].format ? mods[i].format : "windows", NULL, 0);
  }
  static const char *const paths[] = {
      "/modules/nowhere.pdb/00112233445566778899AABBCCDDEEFF1",
      "/modules/damaged.pdb/00112233-4455-6677-8899-aabbccddeeff-1",
      "/modules/bad\xff.pdb/00112233445566778899AABBCCDDEEFF1",
      "/modules/a..b.pdb/00112233445566778899AABBCCDDEEFF1", "/modules/a.pdb/nope",
  };
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    both(paths[i], RT_MODULES, paths[i], NULL, NULL, 0);
    both(paths[i], RT_MODULES, paths[i], "elf", NULL, 0);
  }
  both("health", RT_HEALTH, "/health", NULL, NULL, 0);
  both("ready", RT_READY, "/ready", NULL, NULL, 0);
  the_api.draining = 1;
  both("ready, draining", RT_READY, "/ready", NULL, NULL, 0);
  the_api.draining = 0;
  both("no route", RT_OTHER, "/nope", NULL, NULL, 0);
}

TEST(every_answer_of_the_routes_is_the_same) {
  if (!nmods)
    SKIP("no fixtures");
  if (!make_store())
    SKIP("cannot make a symbol store in TMPDIR");
  open_engine();
  CHECK(eng != NULL);
  if (eng) {
    symbolicate_requests();
    v5_requests();
    error_requests();
    other_routes();
    answer_cap();
    engine_close(eng);
  }
  if (nftw(base_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
    fprintf(stderr, "  could not remove %s\n", base_dir);
  printf("  %d requests answered by both implementations, %d differ (%d only by the documented "
         "difference)\n", requests, requests_bad, documented);
  printf("  answers: %d 200, %d 400, %d 404, %d 503; frames: %d ok, %d missing_symbols, "
         "%d unknown_address, %d malformed, %d invalid; v5: %d frames named, found_modules "
         "%d null, %d true, %d false\n",
         by_status[200], by_status[400], by_status[404], by_status[503], frame_statuses[0],
         frame_statuses[1], frame_statuses[2], frame_statuses[3], frame_statuses[6],
         v5_frames_named, v5_found[0], v5_found[1], v5_found[2]);
  CHECK_EQ_U(requests_bad, 0);
  CHECK(requests > 150);
  /* the comparison covered each kind of answer */
  CHECK(by_status[200] > 100 && by_status[400] > 30 && by_status[404] > 0 && by_status[503] > 0);
  CHECK(frame_statuses[0] > 10000 && frame_statuses[1] > 0 && frame_statuses[2] > 0 &&
        frame_statuses[3] > 0 && frame_statuses[6] > 0);
  CHECK(v5_frames_named > 1000 && v5_found[0] > 0 && v5_found[1] > 0 && v5_found[2] > 0);
  printf("  fields seen: %d instruction_addr, %d adjust_instruction_addr, %d invalid modules, "
         "%d user_method, %d source_link, %d async_method; v5: %d <unknown>, %d negative offsets\n",
         seen_iaddr, seen_adjusted, seen_invalid_module, seen_user_method, seen_source_link,
         seen_async, seen_unknown_module, seen_neg_offset);
  CHECK(seen_iaddr > 100 && seen_adjusted > 100 && seen_invalid_module > 10);
  CHECK(seen_user_method > 0 && seen_source_link > 0 && seen_async > 0);
  CHECK(seen_unknown_module > 0 && seen_neg_offset > 0);
}

int main(void) {
  if (load_modules() != 0)
    fprintf(stderr, "  no fixtures loaded (PDBSYM_SOURCE_DIR?)\n");
  RUN(every_fixture_frame_renders_the_same);
  RUN(every_kind_of_frame_renders_the_same);
  RUN(source_link_maps_resolve_the_same);
  RUN(every_pe_dump_renders_the_same);
  RUN(non_utf8_fields_are_kept_now);
  RUN(every_answer_of_the_routes_is_the_same);
  for (size_t i = 0; i < nmods; i++)
    st_free(&mods[i].st);
  return test_summary();
}
