/*
 * test_ppdb_corpus.c - every sequence point of every corpus Portable PDB and
 * of every embedded Portable PDB in the corpus PEs, looked up through
 * st_lookup_token, against the PdbDump (System.Reflection.Metadata) oracle
 * `.srm.jsonl[.gz]` beside it; names against its method names where the
 * assembly is in the corpus; ids against the oracle and the MANIFEST.
 * Hidden points are compared with the contract's rule (docs/contract.md): the
 * nearest visible point below, else above, else no line.
 */
#include "srm_oracle.h"

static char corpus[1024];

/* the assembly for names: the first PE whose RSDS references the PDB, else a
 * PE with the PDB's stem in pe/<repo>/ */
static bool find_assembly(const char *rel, const char *pairing, char *out, size_t cap) {
  const char *k = strstr(pairing, "referenced by RSDS of: ");
  if (k) {
    k += strlen("referenced by RSDS of: ");
    size_t n = strcspn(k, ",;");
    snprintf(out, cap, "%s/%.*s", corpus, (int)n, k);
    if (cu_exists(out))
      return true;
  }
  const char *repo = strchr(rel, '/') + 1;
  const char *base = strrchr(rel, '/') + 1;
  const char *dot = strrchr(base, '.');
  static const char *exts[] = {".dll", ".exe", ".dllx", ".exex"};
  for (int i = 0; i < 4; i++) {
    snprintf(out, cap, "%s/pe/%.*s%.*s%s", corpus, (int)(base - repo), repo,
             (int)(dot - base), base, exts[i]);
    if (cu_exists(out))
      return true;
  }
  return false;
}

static void on_row(char **cols, int ncols, void *ctx) {
  (void)ncols;
  (void)ctx;
  const char *rel = cols[0], *kind = cols[1], *pairing = cols[12], *notes = cols[14];
  bool ppdb = strcmp(kind, "portable-pdb") == 0;
  bool emb = strcmp(kind, "pe-with-embedded-ppdb") == 0;
  if (!ppdb && !emb)
    return;
  char abs[4096], oracle[4200], pe_path[4096];
  snprintf(abs, sizeof abs, "%s/%s", corpus, rel);
  size_t len;
  uint8_t *data = cu_read(abs, &len);
  if (!data) {
    CHECK(!"corpus file unreadable");
    return;
  }
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &b);
  char buf[320];
  if (ppdb) {
    ps_err e = ppdb_read(data, len, &b, &st, &d);
    if (strstr(notes, "Edit-and-Continue DELTA")) {
      /* a delta cannot be decoded on its own: a clear unsupported error */
      CHECK_EQ_U(e, PS_E_UNSUPPORTED);
      printf("  %s: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
    } else if (e != PS_E_OK) {
      t_failed_checks++;
      fprintf(stderr, "  %s: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
    } else if (oracle_path(abs, oracle, sizeof oracle)) {
      ppdb_info info;
      ps_diag_clear(&d);
      CHECK_EQ_U(ppdb_identify(data, len, &info, &d), PS_E_OK);
      bool asm_found = find_assembly(rel, pairing, pe_path, sizeof pe_path);
      char key[1100];
      snprintf(key, sizeof key, "corpus/%s", rel);
      check_table(rel, key, &st, oracle, asm_found ? pe_path : NULL, data, len);
    }
  } else {
    uint8_t *pdb = NULL;
    size_t pdb_len = 0;
    ps_err e = pe_embedded_pdb(data, len, 64u << 20, NULL, &pdb, &pdb_len, &d);
    if (e == PS_E_OK)
      e = ppdb_read(pdb, pdb_len, &b, &st, &d);
    if (e != PS_E_OK) {
      t_failed_checks++;
      fprintf(stderr, "  %s: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
    } else {
      /* the MANIFEST's embedded id: "EMBEDDED ppdb id GUID/STAMP" */
      const char *k = strstr(pairing, "EMBEDDED ppdb id ");
      char g[37];
      cu_guid_str(st.ident.guid, g);
      char want[64] = "";
      if (k)
        snprintf(want, sizeof want, "%.45s", k + strlen("EMBEDDED ppdb id "));
      char got[64];
      snprintf(got, sizeof got, "%s/%08X", g, st.ident.stamp);
      if (strncmp(got, want, strlen(got)) != 0) {
        t_failed_checks++;
        fprintf(stderr, "  %s: embedded id %s, MANIFEST %s\n", rel, got, want);
      }
      char key[1100];
      snprintf(key, sizeof key, "corpus/%s", rel);
      if (oracle_path(abs, oracle, sizeof oracle))
        check_table(rel, key, &st, oracle, abs, pdb, pdb_len);
    }
    free(pdb);
  }
  st_free(&st);
  free(data);
}

TEST(corpus_sequence_points) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    SKIP("../shared/corpus absent");
  CHECK(cu_manifest(corpus, on_row, NULL));
  long p = 0, a = 0, km = 0;
  printf("  %-40s %6s %9s %9s %9s %9s\n", "folder", "files", "points", "agree", "between",
         "names");
  for (int i = 0; i < ntallies; i++) {
    tally *t = &tallies[i];
    printf("  %-40s %2ld/%-3ld %9ld %9ld %4ld/%-4ld %4ld/%-4ld\n", t->folder, t->files_ok,
           t->files, t->points, t->agree, t->between_ok, t->between, t->names_ok, t->names);
    p += t->points;
    a += t->agree;
    km += t->kick_meta;
    CHECK_EQ_U(t->agree, t->points);
    CHECK_EQ_U(t->between_ok, t->between);
    CHECK_EQ_U(t->names_ok, t->names);
  }
  printf("  total: %d files, %ld points, %ld agree; %ld/%ld documents agree\n", files_seen, p,
         a, docs_ok, docs_compared);
  printf("  %ld points of MoveNext methods whose PDB names no kickoff got it from the image's\n"
         "  state-machine attributes, as reflection pairs them\n", km);
  CHECK_EQ_U(docs_ok, docs_compared);
  CHECK(files_seen > 0 && p > 0);
  hidden_report();
  CHECK(hidden_runtime > 10000);
}

int main(void) {
  RUN(corpus_sequence_points);
  return test_summary();
}
