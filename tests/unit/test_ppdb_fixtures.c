/*
 * test_ppdb_fixtures.c - the project's own C# fixtures (tests/fixtures/managed,
 * see its README) against Microsoft's readers: the Portable (debug, release)
 * and embedded builds against PdbDump's `.srm.jsonl` (ids, documents, every
 * sequence point, names from Demo.dll); every build's debug directory against
 * PdbDump's `debugdir` lines; and the Portable debug build against the
 * Windows debug build's DiaSymReader answers (`Demo.pdb.winpdb.jsonl`): the
 * two formats answer identically.
 */
#include "srm_oracle.h"

static char fx[2048];

static uint8_t *load(const char *rel, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", fx, rel);
  uint8_t *d = cu_read(path, len);
  if (!d) {
    t_failed_checks++;
    fprintf(stderr, "  cannot read %s\n", path);
  }
  return d;
}

static void portable(const char *build, const char *pdb_rel, const char *oracle_rel,
                     const char *label) {
  char rel[512], oracle[4096], dll[4096];
  size_t len, pdb_len;
  snprintf(rel, sizeof rel, "%s/%s", build, pdb_rel);
  uint8_t *data = load(rel, &len);
  if (!data)
    return;
  uint8_t *pdb = data, *inflated = NULL;
  pdb_len = len;
  ps_diag d;
  ps_diag_clear(&d);
  char buf[320];
  if (pe_is_image(data, len)) {
    CHECK_EQ_U(pe_embedded_pdb(data, len, 1 << 24, NULL, &inflated, &pdb_len, &d), PS_E_OK);
    pdb = inflated;
  }
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &b);
  if (!pdb || ppdb_read(pdb, pdb_len, &b, &st, &d) != PS_E_OK) {
    t_failed_checks++;
    fprintf(stderr, "  %s: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
  } else {
    snprintf(oracle, sizeof oracle, "%s/%s/%s", fx, build, oracle_rel);
    snprintf(dll, sizeof dll, "%s/%s/Demo.dll", fx, build);
    char key[600];
    snprintf(key, sizeof key, "fixtures/managed/%s", rel);
    check_table(label, key, &st, oracle, dll, pdb, pdb_len);
  }
  st_free(&st);
  free(inflated);
  free(data);
}

/* every build's debug directory against PdbDump's debugdir lines */
static int dirs_checked;
static void debug_directory(const char *build) {
  char rel[512];
  snprintf(rel, sizeof rel, "%s/Demo.dll", build);
  size_t len;
  uint8_t *data = load(rel, &len);
  if (!data)
    return;
  pe_info pi;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pe_parse(data, len, &pi, &d), PS_E_OK);
  CHECK(pi.is_dotnet);
  /* PdbDump ran on Demo.dll; its output sits beside the PDB for Portable builds */
  char probe[4096];
  snprintf(rel, sizeof rel, "%s/Demo.dll.srm.jsonl", build);
  snprintf(probe, sizeof probe, "%s/%s", fx, rel);
  if (!cu_exists(probe))
    snprintf(rel, sizeof rel, "%s/Demo.pdb.srm.jsonl", build);
  size_t tl;
  char *text = (char *)load(rel, &tl);
  int cv = 0;
  bool emb = false, ck = false;
  char *save = NULL;
  for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
       line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    if (!j)
      continue;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    int code = (int)json_integer_value(json_object_get(j, "type_code"));
    if (kind && strcmp(kind, "debugdir") == 0) {
      if (code == 17)
        emb = true;
      if (code == 19) {
        ck = true;
        char hex_ck[2 * 64 + 1];
        hex(pi.checksum, pi.checksum_len, hex_ck);
        CHECK_EQ_S(pi.checksum_alg, json_string_value(json_object_get(j, "algorithm")));
        CHECK_EQ_S(hex_ck, json_string_value(json_object_get(j, "checksum")));
      }
      if (code == 2 && cv < pi.ncodeview) {
        const pe_codeview *c = &pi.codeview[cv++];
        char g[37];
        cu_guid_str(c->guid, g);
        for (char *p = g; *p; p++)
          *p = (char)tolower((unsigned char)*p);
        CHECK_EQ_S(g, json_string_value(json_object_get(j, "guid")));
        CHECK_EQ_U(c->age, json_integer_value(json_object_get(j, "age")));
        CHECK_EQ_S(c->path, json_string_value(json_object_get(j, "path")));
        CHECK_EQ_U(c->portable, json_is_true(json_object_get(j, "portable_codeview")));
        CHECK_EQ_U(c->stamp, hexu(json_object_get(j, "stamp")));
      } else if (code == 2) {
        CHECK(!"CodeView entry missing");
      }
    }
    json_decref(j);
  }
  CHECK_EQ_U(cv, pi.ncodeview);
  CHECK(cv >= 1);
  CHECK_EQ_U(pi.has_embedded_pdb, emb);
  CHECK_EQ_U(pi.has_pdb_checksum, ck);
  dirs_checked++;
  free(text);
  free(data);
}

TEST(fixtures) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  snprintf(fx, sizeof fx, "%s/tests/fixtures/managed", src ? src : ".");
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/portable-debug/Demo.pdb", fx);
  if (!cu_exists(probe))
    SKIP("tests/fixtures/managed absent");
  portable("portable-debug", "Demo.pdb", "Demo.pdb.srm.jsonl", "managed/portable-debug/Demo.pdb");
  portable("portable-release", "Demo.pdb", "Demo.pdb.srm.jsonl",
           "managed/portable-release/Demo.pdb");
  portable("embedded-debug", "Demo.dll", "Demo.dll.srm.jsonl", "managed/embedded-debug/Demo.dll");
  /* the Windows build's DiaSymReader answers (no kickoff field) for the Portable build */
  compare_kickoff = false;
  portable("portable-debug", "Demo.pdb", "../windows-debug/Demo.pdb.winpdb.jsonl",
           "managed/windows-debug-vs-portable/Demo.pdb");
  portable("portable-release", "Demo.pdb", "../windows-release/Demo.pdb.winpdb.jsonl",
           "managed/windows-release-vs-portable/Demo.pdb");
  compare_kickoff = true;
  static const char *builds[] = {"portable-debug", "portable-release", "embedded-debug",
                                 "windows-debug", "windows-release"};
  for (int i = 0; i < 5; i++)
    debug_directory(builds[i]);

  printf("  %-40s %6s %9s %9s %9s %9s\n", "build", "files", "points", "agree", "between",
         "names");
  for (int i = 0; i < ntallies; i++) {
    tally *t = &tallies[i];
    printf("  %-40s %2ld/%-3ld %9ld %9ld %4ld/%-4ld %4ld/%-4ld\n", t->folder, t->files_ok,
           t->files, t->points, t->agree, t->between_ok, t->between, t->names_ok, t->names);
    CHECK(t->points > 0);
    CHECK_EQ_U(t->agree, t->points);
    CHECK_EQ_U(t->between_ok, t->between);
    CHECK_EQ_U(t->names_ok, t->names);
  }
  printf("  %ld/%ld documents agree, %d debug directories agree\n", docs_ok, docs_compared,
         dirs_checked);
  hidden_report();
  CHECK(hidden_probes > 100);
  CHECK_EQ_U(docs_ok, docs_compared);
  CHECK_EQ_U(ntallies, 5);
}

int main(void) {
  RUN(fixtures);
  return test_summary();
}
