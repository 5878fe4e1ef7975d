/*
 * test_pdb_lazy.c - the lazy PDB reader (pdb_open / pdb_lookup_lazy) answers
 * every address exactly as the whole table (pdb_read + st_lookup_rva) does:
 *   - on every Windows PDB of the shared corpus, at the addresses the corpus
 *     tests ask (the paired image's code bytes, sampled as test_pdb_llvm and
 *     test_pdb_llvm19 sample them, the byte past each executable section and
 *     0x7fffffff; every 0xFEEFEE and 0xF00F00 line; the FUNC starts and line
 *     records' first and last bytes of a Breakpad .sym beside the PDB) and
 *     at the boundaries the table has (each function's first, last and next
 *     byte, each line's first and last byte, each inline range start, each
 *     public and the byte before it), these up to PDBSYM_LAZY_RVAS per file
 *     (default 3000, evenly spread; in a sampled sweep 300, and the image's
 *     and the .sym's addresses 300 more);
 *   - on every native fixture, at every code byte of the image;
 * each address from a cold state (pdb_lazy_forget: only the modules that one
 * address needs are read), then all of them again in a shuffled order, 256
 * at a time, with the table growing (modules accumulate, the table is
 * rebuilt).  The whole
 * table's answers are themselves checked against llvm-symbolizer, DIA and
 * Breakpad by test_pdb_llvm / test_pdb_fixtures; this test checks that the
 * lazy path changes none of them, and that it reads few modules where the
 * file allows (printed per file, with why a file had to be read whole).
 * Also: a fixture edited so one module breaks the territory rule is read
 * whole and still answers as pdb_read; damaged corpus PDBs (truncated,
 * bit-flipped) end in errors with diagnostics or in answers, never a crash.
 * The corpus parts skip when ../shared/corpus is absent.
 */
#include "fixtures.h"
#include "msf.h"
#include "oracles.h"
#include "pdb_corpus.h"
#include "test.h"

static const char *g_corpus;

typedef struct {
  uint32_t va, size;
} pe_range;

/* The IMAGE_SCN_MEM_EXECUTE sections of a PE image (at most max); 0 when d
 * is not a PE image. */
static int pe_code(const uint8_t *d, size_t n, pe_range *out, int max) {
  pe_section secs[96];
  int nsec = pe_sections(d, n, secs, 96), k = 0;
  for (int i = 0; i < nsec && k < max; i++)
    if (secs[i].exec) {
      out[k].va = secs[i].va;
      out[k].size = secs[i].size;
      k++;
    }
  return k;
}

static bool str_eq(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* field by field; what differs goes to why */
static bool same_answer(const st_answer *x, const st_answer *y, char *why, size_t cap) {
  if (x->status != y->status || x->nsyms != y->nsyms) {
    snprintf(why, cap, "status %d/%d, %d/%d frames", x->status, y->status, x->nsyms, y->nsyms);
    return false;
  }
  for (int i = 0; i < x->nsyms; i++) {
    const st_symbol *a = &x->syms[i], *b = &y->syms[i];
    if (!str_eq(a->function, b->function) || !str_eq(a->mangled, b->mangled) ||
        !str_eq(a->file, b->file) || a->has_line != b->has_line || a->line != b->line ||
        a->has_offset != b->has_offset || a->function_offset != b->function_offset ||
        a->inlined != b->inlined || a->hidden != b->hidden || a->has_column != b->has_column ||
        a->column != b->column || a->end_line != b->end_line ||
        a->end_column != b->end_column) {
      snprintf(why, cap, "frame %d: %s [%s] %s:%u+0x%x%s vs %s [%s] %s:%u+0x%x%s", i,
               a->function, a->mangled ? a->mangled : "-", a->file ? a->file : "-", a->line,
               a->function_offset, a->inlined ? " inlined" : "", b->function,
               b->mangled ? b->mangled : "-", b->file ? b->file : "-", b->line,
               b->function_offset, b->inlined ? " inlined" : "");
      return false;
    }
  }
  return true;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  uint32_t *v;
  size_t n, cap;
} u32s;

static void push(u32s *s, uint32_t x) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 1024;
    uint32_t *p = realloc(s->v, nc * sizeof *p);
    if (!p)
      return;
    s->v = p;
    s->cap = nc;
  }
  s->v[s->n++] = x;
}

/* sorted, unique, and at most cap of them (evenly spread) */
static void sort_cap(u32s *s, size_t cap) {
  if (!s->n)
    return;
  qsort(s->v, s->n, sizeof *s->v, cmp_u32);
  size_t k = 1;
  for (size_t i = 1; i < s->n; i++)
    if (s->v[i] != s->v[k - 1])
      s->v[k++] = s->v[i];
  s->n = k;
  if (s->n > cap) {
    for (size_t i = 0; i < cap; i++)
      s->v[i] = s->v[(size_t)((double)i * (double)s->n / (double)cap)];
    s->n = cap;
  }
}

typedef struct {
  long files, whole, rvas, differ, modules, mods_read, cold_builds, bad_modules;
} tally;

static const pdb_options g_opts = {NULL, NULL, 100, 0xFFFFFFFFu}; /* never read whole for size */

/* Compares lazy and whole answers on one file at the table's boundaries and
 * at extra[0..nextra). */
static void compare_file(const char *name, const uint8_t *data, size_t len, const uint32_t *extra,
                         size_t nextra, size_t cap, tally *t) {
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  if (pdb_read(data, len, &b, &st, &d) != PS_E_OK) {
    st_free(&st);
    return; /* test_pdb says which files must read */
  }
  ps_budget lb;
  ps_budget_init(&lb, PS_DEFAULT_BUDGET);
  pdb_lazy *z = NULL;
  ps_err e = pdb_open(data, len, &lb, &g_opts, &z, &d);
  CHECK_EQ_U(e, PS_E_OK);
  if (e != PS_E_OK) {
    char msg[400];
    fprintf(stderr, "%s: pdb_open: %s\n", name, ps_diag_format(&d, msg, sizeof msg));
    st_free(&st);
    return;
  }
  /* the rule the lazy table relies on, over every module (not only those
   * the addresses below need) */
  size_t bad = 0;
  pdb_lazy_audit first_bad;
  CHECK_EQ_U(pdb_lazy_check(z, &bad, &first_bad, &d), PS_E_OK);
  t->bad_modules += (long)bad;
  if (bad)
    fprintf(stderr, "  %s: %zu modules break the territory rule; first: module %zu (%s), %s "
            "0x%x+0x%x in module %zu's territory\n", name, bad, first_bad.module,
            first_bad.module_name, first_bad.kind, first_bad.rva, first_bad.size,
            first_bad.owner);
  const st_ident *id = pdb_lazy_ident(z);
  CHECK(memcmp(id->guid, st.ident.guid, 16) == 0 && id->age == st.ident.age &&
        id->pdb_age == st.ident.pdb_age && id->machine == st.ident.machine);
  u32s r = {0};
  for (size_t i = 0; i < st.nfuncs; i++) {
    const st_func *f = &st.funcs[i];
    push(&r, f->rva);
    push(&r, f->rva + (f->size ? f->size - 1 : 0));
    push(&r, f->rva + f->size);
  }
  for (size_t i = 0; i < st.nlines; i++) {
    push(&r, st.lines[i].rva);
    push(&r, st.lines[i].rva + (st.lines[i].size ? st.lines[i].size - 1 : 0));
  }
  for (size_t i = 0; i < st.niranges; i++)
    push(&r, st.iranges[i].rva);
  for (size_t i = 0; i < st.npublics; i++) {
    push(&r, st.publics[i].rva);
    push(&r, st.publics[i].rva - 1);
  }
  sort_cap(&r, cap);
  /* every special line (test_pdb_llvm19 asks them all), and the extras */
  for (size_t i = 0; i < st.nlines; i++)
    if (st.lines[i].line == ST_HIDDEN_LINE || st.lines[i].line == ST_NOSTEP_LINE)
      push(&r, st.lines[i].rva);
  for (size_t i = 0; i < nextra; i++)
    push(&r, extra[i]);
  sort_cap(&r, SIZE_MAX);
  st_answer *want = malloc(sizeof *want), *got = malloc(sizeof *got);
  long differ = 0, mods = 0, builds = 0;
  char first[600] = "";
  pdb_lazy_info info;
  pdb_lazy_stats(z, &info);
  /* cold: each address alone; then warm: all of them, shuffled, accumulating */
  for (int pass = 0; want && got && pass < 2; pass++) {
    if (pass == 1) {
      pdb_lazy_forget(z);
      uint64_t s = 0x9E3779B97F4A7C15ULL;
      for (size_t i = r.n; i > 1; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t j = (size_t)(s % i);
        uint32_t tmp = r.v[i - 1];
        r.v[i - 1] = r.v[j];
        r.v[j] = tmp;
      }
    }
    for (size_t i = 0; i < r.n; i++) {
      const symtab *tab = NULL;
      if (pass == 0) { /* this address alone */
        pdb_lazy_forget(z);
        pdb_lazy_info before;
        pdb_lazy_stats(z, &before);
        e = pdb_module_table(z, &r.v[i], 1, &tab, &d);
        pdb_lazy_stats(z, &info);
        mods += (long)info.modules_read;
        builds += info.builds != before.builds;
      } else { /* the next WARM addresses with the ones before */
        enum { WARM = 256 };
        size_t k = i - i % WARM, m = r.n - k < WARM ? r.n - k : WARM;
        e = pdb_module_table(z, &r.v[k], m, &tab, &d);
      }
      if (e != PS_E_OK) {
        char msg[400];
        fprintf(stderr, "%s 0x%x: pdb_module_table: %s\n", name, r.v[i],
                ps_diag_format(&d, msg, sizeof msg));
        CHECK_EQ_U(e, PS_E_OK);
        break;
      }
      st_lookup_rva(tab, r.v[i], got);
      st_lookup_rva(&st, r.v[i], want);
      char why[500];
      if (!same_answer(got, want, why, sizeof why)) {
        if (!differ++)
          snprintf(first, sizeof first, "0x%x (%s pass): %s", r.v[i], pass ? "warm" : "cold",
                   why);
      }
    }
    if (pass == 0) { /* and through pdb_lookup_lazy, from the table the cold pass left */
      e = pdb_lookup_lazy(z, r.n ? r.v[0] : 0, got, &d);
      st_lookup_rva(&st, r.n ? r.v[0] : 0, want);
      char why[500];
      CHECK(e == PS_E_OK && same_answer(got, want, why, sizeof why));
    }
  }
  pdb_lazy_stats(z, &info);
  t->files++;
  t->rvas += (long)r.n;
  t->differ += differ;
  t->modules += (long)info.modules;
  t->cold_builds += builds;
  if (info.full)
    t->whole++;
  else
    t->mods_read += r.n ? mods / (long)r.n : 0;
  printf("  %-72s %5zu RVAs, %zu modules, %s%.1f read per cold RVA%s%s%s%s\n", name, r.n,
         info.modules, info.full ? "read whole: " : "", r.n ? (double)mods / (double)r.n : 0.0,
         info.full ? " (" : "", info.full ? info.full : "", info.full ? ")" : "",
         differ ? ", DIFFERENT" : "");
  if (differ)
    fprintf(stderr, "    %ld differ; first: %s\n", differ, first);
  /* rebuilding leaks no budget: the first address's table again costs what
   * it cost after the cold pass (every cache the addresses fill is full then) */
  if (r.n && got) {
    pdb_lazy_forget(z);
    pdb_lookup_lazy(z, r.v[0], got, &d);
    size_t u1 = lb.used;
    pdb_lazy_forget(z);
    pdb_lookup_lazy(z, r.v[r.n - 1], got, &d);
    pdb_lazy_forget(z);
    pdb_lookup_lazy(z, r.v[0], got, &d);
    CHECK_EQ_U(lb.used, u1);
  }
  free(want);
  free(got);
  free(r.v);
  pdb_close(z);
  st_free(&st);
}

static void summary(const char *what, const tally *t) {
  printf("  %s: %ld files, %ld read whole, %ld RVAs (each cold and warm), %ld differ; "
         "%ld modules break the territory rule\n", what, t->files, t->whole, t->rvas, t->differ,
         t->bad_modules);
}

TEST(lazy_equals_whole_on_corpus) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  const char *env = getenv("PDBSYM_LAZY_RVAS");
  size_t cap = env ? (size_t)strtoul(env, NULL, 10) : test_sweep(3000, 300);
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  tally t = {0};
  for (int i = 0; i < n; i++) {
    manifest_row *row = &rows[i];
    if (row->ncols < 13 || (strcmp(row->cols[1], "windows-native-pdb") != 0 &&
                            strcmp(row->cols[1], "windows-managed-pdb") != 0))
      continue;
    const char *only = getenv("PDBSYM_LAZY_ONLY"); /* a substring of the path, for debugging */
    if (only && !strstr(row->cols[0], only))
      continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", g_corpus, row->cols[0]);
    size_t len = 0;
    uint8_t *data = cu_read_raw(path, &len);
    if (!data)
      continue;
    /* the paired image's code bytes, spread as test_pdb_llvm spreads them */
    u32s extra = {0};
    const char *ref = strstr(row->cols[12], "referenced by RSDS of: ");
    if (ref) {
      char pe_rel[1024], pe_path[4400];
      snprintf(pe_rel, sizeof pe_rel, "%s", ref + 23);
      pe_rel[strcspn(pe_rel, ", ;")] = '\0';
      snprintf(pe_path, sizeof pe_path, "%s/%s", g_corpus, pe_rel);
      size_t pe_len = 0;
      uint8_t *pe = cu_read_raw(pe_path, &pe_len);
      pe_range code[16];
      int ncode = pe ? pe_code(pe, pe_len, code, 16) : 0;
      size_t bytes = 0;
      for (int k = 0; k < ncode; k++)
        bytes += code[k].size;
      size_t step = bytes > 3000 ? bytes / 3000 + 1 : 1;
      for (int k = 0; k < ncode; k++) {
        for (uint64_t v = code[k].va; v < (uint64_t)code[k].va + code[k].size; v += step)
          push(&extra, (uint32_t)v);
        push(&extra, code[k].va + code[k].size); /* just past it, as test_pdb_llvm19 */
      }
      push(&extra, 0x7fffffffu);
      free(pe);
    }
    /* a Breakpad .sym beside the PDB: its FUNC starts and each line
     * record's first and last byte, as test_pdb_llvm asks them */
    char sym[4400];
    snprintf(sym, sizeof sym, "%s", path);
    size_t sl = strlen(sym);
    if (sl > 4 && !strcmp(sym + sl - 4, ".pdb"))
      memcpy(sym + sl - 4, ".sym", 4);
    FILE *sf = sl > 4 ? fopen(sym, "r") : NULL;
    char line[4096];
    while (sf && fgets(line, sizeof line, sf)) {
      char *end;
      if (!strncmp(line, "FUNC ", 5)) {
        const char *q = line + 5 + (strncmp(line + 5, "m ", 2) == 0 ? 2 : 0);
        push(&extra, (uint32_t)strtoul(q, NULL, 16));
      } else if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')) {
        uint32_t a = (uint32_t)strtoul(line, &end, 16), sz = (uint32_t)strtoul(end, NULL, 16);
        push(&extra, a);
        if (sz)
          push(&extra, a + sz - 1);
      }
    }
    if (sf)
      fclose(sf);
    /* a sampled sweep (a sanitizer build) samples these too */
    sort_cap(&extra, test_sweep(SIZE_MAX, cap));
    compare_file(row->cols[0], data, len, extra.v, extra.n, cap, &t);
    free(extra.v);
    free(data);
  }
  free(rows);
  free(text);
  summary("corpus", &t);
  CHECK(t.files >= 100);
  CHECK_EQ_U(t.differ, 0);
  CHECK_EQ_U(t.bad_modules, 0);
  /* most files are read lazily, a few modules per address */
  CHECK(t.whole * 4 < t.files);
}

TEST(lazy_equals_whole_on_fixtures) {
  fx_manifest m;
  if (fx_manifest_load(&m) != 0)
    SKIP("tests/fixtures/native absent");
  tally t = {0};
  for (size_t i = 0; i < m.count; i++) {
    const fx_entry *e = &m.entries[i];
    fx_blob pdb, exe;
    if (fx_read_fixture(e->pdb, &pdb) != 0) {
      CHECK(0);
      continue;
    }
    if (fx_read_fixture(e->exe, &exe) != 0) {
      CHECK(0);
      free(pdb.data);
      continue;
    }
    u32s every = {0}; /* every code byte */
    pe_range code[16];
    int ncode = pe_code(exe.data, exe.len, code, 16);
    for (int k = 0; k < ncode; k++)
      for (uint64_t v = code[k].va; v < (uint64_t)code[k].va + code[k].size; v++)
        push(&every, (uint32_t)v);
    CHECK(every.n > 0);
    compare_file(e->name, pdb.data, pdb.len, every.v, every.n, 4000, &t);
    free(every.v);
    free(pdb.data);
    free(exe.data);
  }
  fx_manifest_free(&m);
  summary("native fixtures", &t);
  CHECK(t.files >= 10);
  CHECK_EQ_U(t.differ, 0);
  CHECK_EQ_U(t.bad_modules, 0);
  CHECK_EQ_U(t.whole, 0); /* clang + lld-link PDBs: always lazy */
}

/* The 1-based index and VA of the PE section holding rva, or 0. */
static unsigned pe_section_of(const uint8_t *d, size_t n, uint32_t rva, uint32_t *va) {
  if (n < 0x40)
    return 0;
  uint32_t pe = (uint32_t)d[0x3c] | (uint32_t)d[0x3d] << 8 | (uint32_t)d[0x3e] << 16 |
                (uint32_t)d[0x3f] << 24;
  if ((size_t)pe + 24 > n)
    return 0;
  unsigned nsec = d[pe + 6] | d[pe + 7] << 8, optsz = d[pe + 20] | d[pe + 21] << 8;
  for (unsigned i = 0; i < nsec && pe + 24u + optsz + 40 * (i + 1) <= n; i++) {
    const uint8_t *h = d + pe + 24u + optsz + 40 * i;
    uint32_t vsz = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
    uint32_t v = (uint32_t)h[12] | (uint32_t)h[13] << 8 | (uint32_t)h[14] << 16 | (uint32_t)h[15] << 24;
    if (rva >= v && rva - v < vsz) {
      *va = v;
      return i + 1;
    }
  }
  return 0;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A fixture whose section contributions were edited so that one module's
 * function lies in another module's territory: the lazy reader finds it when
 * it reads the module, reads the file whole, and answers as pdb_read. */
TEST(lazy_reads_whole_when_a_module_breaks_the_rule) {
  fx_manifest m;
  if (fx_manifest_load(&m) != 0)
    SKIP("tests/fixtures/native absent");
  const fx_entry *e = fx_manifest_find(&m, "cpp-x64-O2");
  fx_blob pdb, exe;
  if (!e || fx_read_fixture(e->pdb, &pdb) != 0 || fx_read_fixture(e->exe, &exe) != 0) {
    CHECK(0);
    fx_manifest_free(&m);
    return;
  }
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pdb_read(pdb.data, pdb.len, &b, &st, &d), PS_E_OK);
  /* the largest procedure: the victim */
  const st_func *f = NULL;
  for (size_t i = 0; i < st.nfuncs; i++)
    if (!(st.funcs[i].flags & ST_FUNC_THUNK) && (!f || st.funcs[i].size > f->size))
      f = &st.funcs[i];
  uint32_t va = 0;
  unsigned sect = f ? pe_section_of(exe.data, exe.len, f->rva, &va) : 0;
  CHECK(f && sect && f->size > 16);
  /* move a non-code contribution of another module into it (DbiStream.rst:
   * header 64 bytes, module info size at 24, contributions after it) */
  msf_file mf;
  CHECK_EQ_U(msf_open(&mf, pdb.data, pdb.len, NULL, &d), PS_E_OK);
  msf_stream_t dbi;
  CHECK_EQ_U(msf_stream(&mf, 3, &dbi, &d), PS_E_OK);
  uint32_t modi = le32(dbi.data + 24), sc = le32(dbi.data + 28);
  size_t at = 64 + (size_t)modi, esz = le32(dbi.data + at) == 0xeffe0000u + 20140516u ? 32 : 28;
  size_t hit = 0;
  uint16_t victim = 0xFFFF;
  for (size_t p = at + 4; p + esz <= at + sc; p += esz) {
    uint16_t s = (uint16_t)(dbi.data[p] | dbi.data[p + 1] << 8);
    uint32_t off = le32(dbi.data + p + 4), size = le32(dbi.data + p + 8);
    if (s == sect && f->rva - va >= off && f->rva - va - off < size)
      victim = (uint16_t)(dbi.data[p + 16] | dbi.data[p + 17] << 8);
  }
  for (size_t p = at + 4; !hit && victim != 0xFFFF && p + esz <= at + sc; p += esz) {
    uint16_t mod = (uint16_t)(dbi.data[p + 16] | dbi.data[p + 17] << 8);
    if (!(le32(dbi.data + p + 12) & 0x20u) && mod != victim && le32(dbi.data + p + 8) > 0)
      hit = p;
  }
  CHECK(hit != 0);
  /* where those bytes are in the file: stream offset -> block */
  uint8_t *bad = malloc(pdb.len);
  if (hit && bad) {
    memcpy(bad, pdb.data, pdb.len);
    uint32_t bs = mf.block_size;
    size_t fo = (size_t)mf.blocks[mf.first[3] + hit / bs] * bs + hit % bs;
    CHECK(hit % bs + 12 <= bs); /* section, pad, offset, size: in one block */
    bad[fo] = (uint8_t)sect;
    bad[fo + 1] = (uint8_t)(sect >> 8);
    uint32_t off = f->rva - va + 8;
    for (int k = 0; k < 4; k++)
      bad[fo + 4 + k] = (uint8_t)(off >> (8 * k));
    bad[fo + 8] = 4; /* 4 bytes */
    bad[fo + 9] = bad[fo + 10] = bad[fo + 11] = 0;
    symtab whole;
    ps_budget wb;
    ps_budget_init(&wb, PS_DEFAULT_BUDGET);
    st_init(&whole, &wb);
    CHECK_EQ_U(pdb_read(bad, pdb.len, &wb, &whole, &d), PS_E_OK);
    pdb_lazy *z = NULL;
    ps_budget lb;
    ps_budget_init(&lb, PS_DEFAULT_BUDGET);
    CHECK_EQ_U(pdb_open(bad, pdb.len, &lb, &g_opts, &z, &d), PS_E_OK);
    size_t nbad = 0;
    pdb_lazy_audit first;
    CHECK_EQ_U(pdb_lazy_check(z, &nbad, &first, &d), PS_E_OK);
    CHECK_EQ_U(nbad, 1);
    CHECK_EQ_U(first.module, victim);
    st_answer *x = malloc(sizeof *x), *y = malloc(sizeof *y);
    pdb_lazy_info info;
    long differ = 0;
    for (uint32_t rva = f->rva; x && y && rva < f->rva + f->size; rva++) {
      CHECK_EQ_U(pdb_lookup_lazy(z, rva, x, &d), PS_E_OK);
      st_lookup_rva(&whole, rva, y);
      char why[500];
      differ += !same_answer(x, y, why, sizeof why);
    }
    pdb_lazy_stats(z, &info);
    CHECK(info.full && strstr(info.full, "outside"));
    CHECK(info.modules_read >= 2); /* every module */
    CHECK_EQ_U(differ, 0);
    printf("  %s with a contribution of module %u moved into %s: read whole (%s), %u bytes "
           "answered as pdb_read\n", e->name, (unsigned)(bad[fo + 16] | bad[fo + 17] << 8),
           st_s(&st, f->name), info.full ? info.full : "-", f->size);
    free(x);
    free(y);
    pdb_close(z);
    st_free(&whole);
  }
  free(bad);
  msf_stream_free(&mf, &dbi);
  msf_close(&mf);
  st_free(&st);
  free(pdb.data);
  free(exe.data);
  fx_manifest_free(&m);
}

/* ---- hostile input -------------------------------------------------------- */

static uint32_t rng_next(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* pdb_open and lookups over damaged bytes: an error with a diagnostic, or
 * answers, never a crash (the sanitizer build runs this) */
static void survive(const uint8_t *data, size_t len, const uint32_t *rvas, size_t n,
                    long *opened) {
  ps_budget b;
  ps_budget_init(&b, (size_t)512 << 20);
  ps_diag d;
  ps_diag_clear(&d);
  pdb_lazy *z = NULL;
  ps_err e = pdb_open(data, len, &b, NULL, &z, &d);
  if (e != PS_E_OK) {
    CHECK(d.code == e);
    return;
  }
  (*opened)++;
  st_answer *a = malloc(sizeof *a);
  for (size_t i = 0; a && i < n; i++) {
    ps_diag_clear(&d);
    e = pdb_lookup_lazy(z, rvas[i], a, &d);
    CHECK(e == PS_E_OK || d.code == e);
  }
  free(a);
  pdb_close(z);
}

TEST(lazy_survives_truncated_and_bitflipped_pdbs) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  static const char *const files[] = {
      "windows-native-pdb/symbolic/crash.pdb",
      "windows-native-pdb/binskim/Native_x64_RustC_Rust_debuginfo2_v1.58.1.pdb",
      "windows-native-pdb/dump_syms/basic32.pdb",
      "windows-managed-pdb/cecil/VBConsApp.pdb",
  };
  uint32_t seed = 0x2545f491u;
  long variants = 0, opened = 0;
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    char path[4400], msg[400];
    snprintf(path, sizeof path, "%s/%s", g_corpus, files[f]);
    symtab st;
    ps_budget b;
    if (read_pdb_file(path, &st, &b, msg, sizeof msg) != PS_E_OK) {
      st_free(&st);
      continue;
    }
    uint32_t rvas[48];
    size_t n = 0;
    for (size_t i = 0; i < st.nfuncs && n < 40; i += 1 + st.nfuncs / 40)
      rvas[n++] = st.funcs[i].rva + st.funcs[i].size / 2;
    rvas[n++] = 0;
    rvas[n++] = 0xFFFFFFFFu;
    st_free(&st);
    size_t len = 0;
    uint8_t *data = cu_read_raw(path, &len);
    uint8_t *copy = data ? malloc(len) : NULL;
    for (int k = 1; copy && k < 30; k++, variants++)
      survive(data, len / 30 * (size_t)k, rvas, n, &opened);
    for (int round = 0; copy && round < 100; round++, variants++) {
      memcpy(copy, data, len);
      int flips = 1 + (int)(rng_next(&seed) % 16);
      for (int j = 0; j < flips; j++) {
        uint32_t r = rng_next(&seed);
        size_t at = (r & 1) ? rng_next(&seed) % (len < 65536 ? len : 65536) : rng_next(&seed) % len;
        copy[at] ^= (uint8_t)(1u << (r >> 8 & 7));
      }
      survive(copy, len, rvas, n, &opened);
    }
    free(copy);
    free(data);
  }
  printf("  %ld truncated and bit-flipped variants: %ld opened, the rest failed with a "
         "diagnostic\n", variants, opened);
  CHECK(variants > 400);
}

int main(void) {
  g_corpus = corpus_dir();
  RUN(lazy_equals_whole_on_fixtures);
  RUN(lazy_reads_whole_when_a_module_breaks_the_rule);
  RUN(lazy_equals_whole_on_corpus);
  RUN(lazy_survives_truncated_and_bitflipped_pdbs);
  return test_summary();
}
