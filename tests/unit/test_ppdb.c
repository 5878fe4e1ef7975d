/*
 * test_ppdb.c - the Portable PDB and PE readers over the synthetic inputs that
 * tests/fuzz/make_seeds.py builds from the specs (its docstring lists the
 * encoded points, names and ids the checks expect), plus the lookup rules
 * over them: covering points, hidden points, kickoff methods, Source Link.
 */
#include <stdlib.h>

#include "srm_oracle.h"

static uint8_t *seed(const char *name, size_t *len) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fuzz/corpus/%s", src ? src : ".", name);
  return cu_read(path, len);
}

static void expect_point(const symtab *st, uint32_t tok, uint32_t il, uint32_t line,
                         uint32_t col, uint32_t eline, uint32_t ecol, const char *file,
                         bool hidden) {
  st_answer a;
  st_lookup_token(st, tok, il, &a);
  CHECK_EQ_U(a.status, ST_OK);
  CHECK_EQ_U(a.nsyms, 1);
  const st_symbol *s = &a.syms[0];
  CHECK_EQ_U(s->hidden, hidden);
  CHECK(s->has_line && s->has_column);
  CHECK_EQ_U(s->line, line);
  CHECK_EQ_U(s->column, col);
  CHECK_EQ_U(s->end_line, eline);
  CHECK_EQ_U(s->end_column, ecol);
  CHECK_EQ_S(s->file, file);
}

static const uint8_t PDB_GUID[16] = {0xd8, 0x54, 0x13, 0x0f, 0x19, 0x73, 0xe4, 0x45,
                                     0x97, 0xb5, 0x5f, 0xd8, 0x33, 0x5a, 0x15, 0x85};

TEST(synthetic_portable_pdb) {
  size_t len;
  uint8_t *data = seed("ppdb/synthetic.pdb.bin", &len);
  if (!data)
    SKIP("seed missing");
  CHECK(ppdb_is_metadata(data, len));
  ps_budget b;
  ps_budget_init(&b, 1 << 24);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(ppdb_read(data, len, &b, &st, &d), PS_E_OK);
  CHECK_EQ_U(st.ident.format, ST_FORMAT_PORTABLE);
  CHECK(memcmp(st.ident.guid, PDB_GUID, 16) == 0);
  CHECK_EQ_U(st.ident.stamp, 0x5785B542);
  ppdb_info info;
  CHECK_EQ_U(ppdb_identify(data, len, &info, &d), PS_E_OK);
  CHECK_EQ_U(info.entry_point, 0x06000001);
  CHECK_EQ_U(info.documents, 2);
  CHECK_EQ_U(info.method_debug_rows, 3);
  CHECK_EQ_S(st_s(&st, st.source_link), "{\"documents\":{\"/src/*\":\"https://example.com/src/*\"}}");

  expect_point(&st, 0x06000001, 0, 10, 9, 10, 14, "/src/demo/a.cs", false);
  expect_point(&st, 0x06000001, 2, 10, 9, 10, 14, "/src/demo/a.cs", false);
  expect_point(&st, 0x06000001, 3, 11, 11, 12, 13, "/src/demo/a.cs", false);
  expect_point(&st, 0x06000001, 5, 11, 11, 12, 13, "/src/demo/a.cs", true);
  expect_point(&st, 0x06000001, 6, 20, 1, 20, 5, "C:\\b.cs", false);
  expect_point(&st, 0x06000001, 500, 20, 1, 20, 5, "C:\\b.cs", false);
  /* a hidden point with no visible point below takes the one above */
  expect_point(&st, 0x06000003, 0, 30, 5, 30, 8, "C:\\b.cs", true);
  expect_point(&st, 0x06000003, 7, 30, 5, 30, 8, "C:\\b.cs", false);
  st_answer a;
  st_lookup_token(&st, 0x06000003, 7, &a);
  CHECK_EQ_U(a.syms[0].kickoff_token, 0x06000001);
  CHECK_EQ_S(a.syms[0].function, "0x06000003");
  st_lookup_token(&st, 0x06000002, 0, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);

  /* names from the matching assembly */
  size_t pe_len;
  uint8_t *pe = seed("pe/synthetic.dll.bin", &pe_len);
  CHECK(pe != NULL);
  if (pe) {
    CHECK_EQ_U(pe_method_names(pe, pe_len, &b, &st, &d), PS_E_OK);
    st_lookup_token(&st, 0x06000003, 7, &a);
    CHECK_EQ_S(a.syms[0].function, "Demo.Outer+Inner.MoveNext");
    CHECK_EQ_S(a.syms[0].async_method, "Demo.Outer.Run");
    st_lookup_token(&st, 0x06000002, 0, &a);
    CHECK_EQ_U(a.status, ST_OK);
    CHECK_EQ_S(a.syms[0].function, "Demo.Outer..ctor");
    CHECK(!a.syms[0].has_line);
    st_lookup_token(&st, 0x06000001, 3, &a);
    CHECK_EQ_S(a.syms[0].function, "Demo.Outer.Run");
    CHECK_EQ_U(a.syms[0].line, 11);
    free(pe);
  }
  st_free(&st);
  free(data);
}

TEST(synthetic_pe) {
  size_t len, pdb_len;
  uint8_t *pe = seed("pe/synthetic.dll.bin", &len);
  uint8_t *pdb = seed("ppdb/synthetic.pdb.bin", &pdb_len);
  if (!pe || !pdb) {
    free(pe);
    free(pdb);
    SKIP("seed missing");
  }
  CHECK(pe_is_image(pe, len));
  pe_info pi;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pe_parse(pe, len, &pi, &d), PS_E_OK);
  CHECK_EQ_U(pi.machine, 0x14C);
  CHECK(!pi.pe32plus);
  CHECK(pi.is_dotnet);
  CHECK(pi.has_embedded_pdb);
  CHECK(pi.has_pdb_checksum);
  CHECK_EQ_S(pi.checksum_alg, "SHA256");
  CHECK_EQ_U(pi.checksum_len, 32);
  CHECK_EQ_U(pi.ncodeview, 1);
  CHECK(pi.codeview[0].portable);
  CHECK_EQ_U(pi.codeview[0].stamp, 0x5785B542);
  CHECK_EQ_U(pi.codeview[0].age, 1);
  CHECK(memcmp(pi.codeview[0].guid, PDB_GUID, 16) == 0);
  CHECK_EQ_S(pi.codeview[0].path, "demo.pdb");
  uint8_t *out = NULL;
  size_t out_len = 0;
  CHECK_EQ_U(pe_embedded_pdb(pe, len, 1 << 20, NULL, &out, &out_len, &d), PS_E_OK);
  CHECK_EQ_U(out_len, pdb_len);
  CHECK(out && memcmp(out, pdb, pdb_len) == 0);
  free(out);
  /* the inflate cap */
  ps_diag_clear(&d);
  CHECK_EQ_U(pe_embedded_pdb(pe, len, pdb_len - 1, NULL, &out, &out_len, &d), PS_E_LIMIT);
  CHECK(out == NULL);
  /* not a PE, or a PE without CLI metadata */
  ps_diag_clear(&d);
  CHECK_EQ_U(pe_parse(pdb, pdb_len, &pi, &d), PS_E_CORRUPT);
  CHECK(!pe_is_image(pdb, pdb_len));
  free(pe);
  free(pdb);
}

TEST(enc_delta_refused) {
  size_t len;
  uint8_t *data = seed("ppdb/enc-delta.pdb.bin", &len);
  if (!data)
    SKIP("seed missing");
  symtab st;
  st_init(&st, NULL);
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(ppdb_read(data, len, NULL, &st, &d), PS_E_UNSUPPORTED);
  CHECK_EQ_U(d.code, PS_E_UNSUPPORTED);
  st_free(&st);
  free(data);
}

/* the same bytes as System.Reflection.Metadata reads them (PdbDump) */
TEST(synthetic_against_pdbdump) {
  size_t len, pdb_len;
  uint8_t *pe = seed("pe/synthetic.dll.bin", &len);
  if (!pe)
    SKIP("seed missing");
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char oracle[4096], pe_path[4096];
  snprintf(oracle, sizeof oracle, "%s/tests/fuzz/synthetic.dll.srm.jsonl", src ? src : ".");
  snprintf(pe_path, sizeof pe_path, "%s/tests/fuzz/corpus/pe/synthetic.dll.bin",
           src ? src : ".");
  uint8_t *pdb = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pe_embedded_pdb(pe, len, 1 << 20, NULL, &pdb, &pdb_len, &d), PS_E_OK);
  symtab st;
  st_init(&st, NULL);
  CHECK_EQ_U(ppdb_read(pdb, pdb_len, NULL, &st, &d), PS_E_OK);
  check_table("synthetic/pe/synthetic.dll", "tests/fuzz/corpus/pe/synthetic.dll.bin", &st, oracle,
              pe_path, pdb, pdb_len);
  hidden_report();
  tally *t = &tallies[0];
  CHECK(ntallies == 1 && t->points == 6);
  CHECK_EQ_U(t->agree, t->points);
  CHECK_EQ_U(t->names_ok, t->names);
  CHECK_EQ_U(t->between_ok, t->between);
  CHECK_EQ_U(docs_ok, 2);
  CHECK_EQ_U(docs_compared, 2);
  st_free(&st);
  free(pdb);
  free(pe);
}

/* names into a table that is not finished yet and already holds a record */
TEST(names_before_finish) {
  size_t len;
  uint8_t *pe = seed("pe/synthetic.dll.bin", &len);
  if (!pe)
    SKIP("seed missing");
  symtab st;
  st_init(&st, NULL);
  CHECK(st_add_method(&st, 0x06000003, 0, 0x06000001));
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pe_method_names(pe, len, NULL, &st, &d), PS_E_OK);
  CHECK(!st.finished);
  CHECK_EQ_U(st.nmethods, 3); /* one record per method */
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  st_answer a;
  st_lookup_token(&st, 0x06000003, 0, &a);
  CHECK_EQ_S(a.syms[0].function, "Demo.Outer+Inner.MoveNext");
  CHECK_EQ_S(a.syms[0].async_method, "Demo.Outer.Run");
  st_free(&st);
  free(pe);
}

int main(void) {
  RUN(names_before_finish);
  RUN(synthetic_portable_pdb);
  RUN(synthetic_against_pdbdump);
  RUN(synthetic_pe);
  RUN(enc_delta_refused);
  return test_summary();
}
