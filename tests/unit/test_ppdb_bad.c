/*
 * test_ppdb_bad.c - hostile input for the metadata, Portable PDB and PE
 * readers: every file of the corpus `other/` folder (none is a Portable PDB),
 * and truncated and bit-flipped variants of the corpus Portable PDBs and
 * managed PEs.  Each call must return, and every failure must carry a
 * diagnostic with its code; run under ASan+UBSan by scripts/test.sh.
 * Also: the deliberately mismatched cecil pdb-mismatch.pdb must not carry
 * the id its assembly references.
 */
#include <dirent.h>

#include "corpus_util.h"
#include "pe.h"
#include "ppdb.h"
#include "symtab.h"
#include "test.h"

static char corpus[1024];
static long runs, failures_ok, successes;
static long by_code[PS_E__COUNT];

static void diag_ok(ps_err e, const ps_diag *d) {
  if (e == PS_E_OK) {
    successes++;
    return;
  }
  char buf[320];
  ps_diag_format(d, buf, sizeof buf);
  if (d->code == e && buf[0])
    failures_ok++;
  else {
    t_failed_checks++;
    fprintf(stderr, "  error %d without a matching diagnostic (%s)\n", e, buf);
  }
  if ((int)e < PS_E__COUNT)
    by_code[e]++;
}

/* every reader over one input */
static ps_err run_all(const uint8_t *data, size_t len) {
  ps_budget b;
  ps_budget_init(&b, (size_t)256 << 20);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err pe = PS_E_OK;
  ps_err e = ppdb_read(data, len, &b, &st, &d);
  diag_ok(e, &d);
  if (e == PS_E_OK) {
    st_answer a;
    for (size_t i = 0; i < st.nmethods; i++)
      st_lookup_token(&st, st.methods[i].token, 1, &a);
  }
  st_free(&st);
  runs++;
  if (pe_is_image(data, len)) {
    pe_info pi;
    ps_diag_clear(&d);
    pe = pe_parse(data, len, &pi, &d);
    diag_ok(pe, &d);
    uint8_t *pdb = NULL;
    size_t pdb_len = 0;
    ps_diag_clear(&d);
    ps_err ee = pe_embedded_pdb(data, len, (size_t)16 << 20, NULL, &pdb, &pdb_len, &d);
    diag_ok(ee, &d);
    st_init(&st, &b);
    if (ee == PS_E_OK) {
      ps_diag_clear(&d);
      diag_ok(ppdb_read(pdb, pdb_len, &b, &st, &d), &d);
    }
    free(pdb);
    ps_diag_clear(&d);
    diag_ok(pe_method_names(data, len, &b, &st, &d), &d);
    st_free(&st);
    runs++;
  }
  return e == PS_E_OK ? pe : e;
}

static void walk_other(const char *dir) {
  DIR *dd = opendir(dir);
  if (!dd)
    return;
  struct dirent *ent;
  while ((ent = readdir(dd))) {
    if (ent->d_name[0] == '.')
      continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0)
      continue;
    if (S_ISDIR(sb.st_mode)) {
      walk_other(path);
      continue;
    }
    size_t len;
    uint8_t *data = cu_read_raw(path, &len); /* raw bytes: no transparent gunzip here */
    if (!data)
      continue;
    symtab st;
    st_init(&st, NULL);
    ps_diag d;
    ps_diag_clear(&d);
    ps_err e = ppdb_read(data, len, NULL, &st, &d);
    st_free(&st);
    /* none of these is a Portable PDB: a clear error */
    if (e == PS_E_OK) {
      t_failed_checks++;
      fprintf(stderr, "  %s read as a Portable PDB\n", path);
    }
    run_all(data, len);
    free(data);
  }
  closedir(dd);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void mutate(const uint8_t *data, size_t len) {
  uint8_t *m = malloc(len ? len : 1);
  for (int v = 0; v < 40 && len; v++) {
    memcpy(m, data, len);
    int flips = 1 + (int)(next_rand() % 16);
    for (int k = 0; k < flips; k++) {
      size_t at = next_rand() % len;
      /* half of the flips aim at the first 4 KiB, where headers live */
      if (k & 1)
        at %= len < 4096 ? len : 4096;
      m[at] ^= (uint8_t)(1u << (next_rand() % 8));
    }
    run_all(m, len);
  }
  for (int t = 0; t < 8; t++) {
    size_t cut = (size_t)(next_rand() % (len + 1));
    run_all(data, cut);
  }
  free(m);
}

static int mutated_files;

static void on_row(char **cols, int ncols, void *ctx) {
  (void)ncols;
  (void)ctx;
  const char *rel = cols[0], *kind = cols[1], *details = cols[11];
  bool ppdb = strcmp(kind, "portable-pdb") == 0;
  bool pe = strncmp(details, "PE32", 4) == 0 && strstr(details, " managed");
  if (!ppdb && !pe)
    return;
  char abs[4096];
  snprintf(abs, sizeof abs, "%s/%s", corpus, rel);
  struct stat sb;
  if (stat(abs, &sb) != 0 || sb.st_size > (128 << 10))
    return;
  size_t len;
  uint8_t *data = cu_read(abs, &len);
  if (!data)
    return;
  mutate(data, len);
  mutated_files++;
  free(data);
}

TEST(corpus_other_and_mutations) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    SKIP("../shared/corpus absent");
  char other[2048];
  snprintf(other, sizeof other, "%s/other", corpus);
  walk_other(other);
  long other_runs = runs;
  CHECK(cu_manifest(corpus, on_row, NULL));
  printf("  other/: %ld reader runs; mutations of %d files: %ld runs\n", other_runs,
         mutated_files, runs - other_runs);
  printf("  %ld successes, %ld failures with diagnostics;", successes, failures_ok);
  for (int i = 1; i < PS_E__COUNT; i++)
    if (by_code[i])
      printf(" %s: %ld;", ps_strerror((ps_err)i), by_code[i]);
  printf("\n");
  CHECK(mutated_files > 0);
}

TEST(mismatched_pair) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    SKIP("../shared/corpus absent");
  char path[2048];
  snprintf(path, sizeof path, "%s/portable-pdb/cecil/pdb-mismatch.pdb", corpus);
  size_t len;
  uint8_t *data = cu_read(path, &len);
  if (!data)
    SKIP("pdb-mismatch.pdb absent");
  ppdb_info info;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(ppdb_identify(data, len, &info, &d), PS_E_OK);
  /* TargetLib.dll's RSDS GUID, per MANIFEST, differs by two bytes */
  snprintf(path, sizeof path, "%s/pe/cecil/TargetLib.dll", corpus);
  size_t pl;
  uint8_t *pe = cu_read(path, &pl);
  CHECK(pe != NULL);
  if (pe) {
    pe_info pi;
    CHECK_EQ_U(pe_parse(pe, pl, &pi, &d), PS_E_OK);
    CHECK(pi.ncodeview >= 1);
    CHECK(memcmp(pi.codeview[0].guid, info.guid, 16) != 0);
    CHECK_EQ_U(pi.codeview[0].stamp, info.stamp);
    free(pe);
  }
  free(data);
}

int main(void) {
  RUN(corpus_other_and_mutations);
  RUN(mismatched_pair);
  return test_summary();
}
