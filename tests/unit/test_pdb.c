/*
 * test_pdb.c - the Windows PDB reader against the shared corpus:
 *   - every windows-native-pdb / windows-managed-pdb file reads, and its
 *     identity equals the MANIFEST `ids` column (GUID, PDB age, DBI age);
 *   - every (token, IL offset) of every managed PDB answers what the
 *     corpus oracles say: `.seqpoints.tsv` (line or hidden, document, method)
 *     and `.winpdb.jsonl` (Microsoft's DIA reader: lines and columns; at
 *     hidden points the point tests/oracles/hidden names: winpdb_oracle.h);
 *   - every file in corpus/other, and truncated and bit-flipped variants of
 *     real PDBs, end in an error with a diagnostic, never a crash or hang.
 * Skips (exit 77) when ../shared/corpus is absent.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "pdb_corpus.h"
#include "test.h"
#include "winpdb_oracle.h"

static const char *g_corpus;

static bool is_windows_pdb_kind(const char *k) {
  return strcmp(k, "windows-native-pdb") == 0 || strcmp(k, "windows-managed-pdb") == 0;
}

TEST(corpus_reads_with_identity) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  int files = 0;
  for (int i = 0; i < n; i++) {
    manifest_row *r = &rows[i];
    if (r->ncols < 9 || !is_windows_pdb_kind(r->cols[1]))
      continue;
    char path[4400], msg[400];
    snprintf(path, sizeof path, "%s/%s", g_corpus, r->cols[0]);
    symtab st;
    ps_budget b;
    ps_err e = read_pdb_file(path, &st, &b, msg, sizeof msg);
    files++;
    if (e != PS_E_OK) {
      fprintf(stderr, "%s: %s\n", r->cols[0], msg);
      CHECK(e == PS_E_OK);
      st_free(&st);
      continue;
    }
    char want_guid[64] = "";
    unsigned want_age = 0, want_dbi = 0;
    int got = sscanf(r->cols[8], "GUID %63s age %u (DBI age %u)", want_guid, &want_age, &want_dbi);
    char guid[64];
    guid_str(st.ident.guid, guid);
    CHECK_EQ_U(got, 3);
    if (strcmp(guid, want_guid) != 0 || st.ident.pdb_age != want_age || st.ident.age != want_dbi)
      fprintf(stderr, "%s: identity %s/%u/%u, MANIFEST says %s/%u/%u\n", r->cols[0], guid,
              st.ident.pdb_age, st.ident.age, want_guid, want_age, want_dbi);
    CHECK_EQ_S(guid, want_guid);
    CHECK_EQ_U(st.ident.pdb_age, want_age);
    CHECK_EQ_U(st.ident.age, want_dbi);
    CHECK_EQ_U(st.ident.format, ST_FORMAT_WINDOWS);
    if (strcmp(r->cols[1], "windows-managed-pdb") == 0)
      CHECK_EQ_U(st.ident.machine, 0xC0EE);
    st_free(&st);
  }
  printf("  %d Windows PDBs read, identities equal MANIFEST ids\n", files);
  CHECK(files >= 100);
  free(rows);
  free(text);
}

/* ---- managed oracles ------------------------------------------------------ */


typedef struct {
  long checked, agree;
} tally;

static void check_seqpoints_tsv(const char *path, const symtab *st, tally *t) {
  size_t len = 0;
  uint8_t *raw = cu_read_raw(path, &len);
  if (!raw)
    return;
  char *s = realloc(raw, len + 1);
  if (!s) {
    free(raw);
    return;
  }
  s[len] = '\0';
  char *save = NULL;
  st_answer *a = malloc(sizeof *a);
  for (char *line = strtok_r(s, "\n", &save); line && a; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#' || strncmp(line, "token\t", 6) == 0)
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
      *tab = '\0';
      p = tab + 1;
    }
    if (k < 5 || !c[2][0])
      continue; /* a method without sequence points */
    uint32_t token = (uint32_t)strtoul(c[0], NULL, 16);
    uint32_t il = (uint32_t)strtoul(c[2], NULL, 10);
    st_lookup_token(st, token, il, a);
    t->checked++;
    bool ok = a->status == ST_OK && a->nsyms == 1;
    if (ok) {
      const st_symbol *y = &a->syms[0];
      if (strcmp(c[3], "hidden") == 0)
        ok = y->hidden;
      else
        ok = !y->hidden && y->has_line && y->line == strtoul(c[3], NULL, 10) &&
             strcmp(y->file ? y->file : "", c[4]) == 0;
      ok = ok && strcmp(y->function, c[1]) == 0;
    }
    if (ok)
      t->agree++;
    else if (t->checked - t->agree <= 5)
      fprintf(stderr, "%s: token %s il %s: want line %s doc %s method %s, got %s line %u%s\n",
              path, c[0], c[2], c[3], c[4], c[1], a->nsyms ? a->syms[0].function : "-",
              a->nsyms ? a->syms[0].line : 0, a->nsyms && a->syms[0].hidden ? " hidden" : "");
  }
  free(a);
  free(s);
}

static bool exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

TEST(managed_sequence_points_match_oracles) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  tally tsv = {0, 0};
  wp_tally win = {0, 0, 0, 0};
  int pdbs = 0, with_win = 0;
  for (int i = 0; i < n; i++) {
    manifest_row *r = &rows[i];
    if (r->ncols < 2 || strcmp(r->cols[1], "windows-managed-pdb") != 0)
      continue;
    char path[4400], oracle[4500], msg[400];
    snprintf(path, sizeof path, "%s/%s", g_corpus, r->cols[0]);
    symtab st;
    ps_budget b;
    if (read_pdb_file(path, &st, &b, msg, sizeof msg) != PS_E_OK) {
      st_free(&st);
      continue; /* reported by corpus_reads_with_identity */
    }
    pdbs++;
    snprintf(oracle, sizeof oracle, "%s.seqpoints.tsv", path);
    CHECK(exists(oracle));
    check_seqpoints_tsv(oracle, &st, &tsv);
    snprintf(oracle, sizeof oracle, "%s.winpdb.jsonl", path);
    if (exists(oracle)) {
      char key[4500];
      snprintf(key, sizeof key, "corpus/%s", r->cols[0]);
      with_win++;
      CHECK(wp_check(oracle, key, &st, &win));
    }
    st_free(&st);
  }
  printf("  %d managed PDBs; seqpoints.tsv: %ld of %ld (token, IL offset) agree; "
         "winpdb.jsonl (%d files): %ld of %ld lookups agree (line, columns, document, hidden; "
         "%ld at hidden points, against tests/oracles/hidden)\n",
         pdbs, tsv.agree, tsv.checked, with_win, win.agree, win.checked, win.hidden);
  CHECK(pdbs >= 45);
  CHECK(tsv.checked > 1000);
  CHECK_EQ_U(tsv.agree, tsv.checked);
  CHECK(win.checked > 1000);
  CHECK(win.hidden > 100);
  CHECK_EQ_U(win.missing, 0);
  CHECK_EQ_U(win.agree, win.checked);
  free(rows);
  free(text);
}

/* ---- bad input ------------------------------------------------------------ */

static int bad_count;

static void expect_error(const uint8_t *data, size_t len, const char *name) {
  ps_budget b;
  ps_budget_init(&b, (size_t)512 << 20);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = pdb_read(data, len, &b, &st, &d);
  char msg[400];
  ps_diag_format(&d, msg, sizeof msg);
  if (e == PS_E_OK)
    fprintf(stderr, "%s: read without error\n", name);
  CHECK(e != PS_E_OK);
  CHECK(d.code == e);
  CHECK(strlen(msg) > 10);
  bad_count++;
  st_free(&st);
}

static void walk_other(const char *dir) {
  DIR *dh = opendir(dir);
  if (!dh)
    return;
  struct dirent *de;
  while ((de = readdir(dh))) {
    if (de->d_name[0] == '.')
      continue;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (stat(p, &sb) != 0)
      continue;
    if (S_ISDIR(sb.st_mode)) {
      walk_other(p);
      continue;
    }
    size_t len = 0;
    uint8_t *data = cu_read_raw(p, &len);
    if (!data)
      continue;
    expect_error(data, len, p);
    free(data);
  }
  closedir(dh);
}

TEST(other_inputs_are_refused) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/other", g_corpus);
  bad_count = 0;
  walk_other(dir);
  printf("  %d files under corpus/other refused with a diagnostic\n", bad_count);
  CHECK(bad_count >= 60);
}

TEST(old_pdb_format_is_unsupported) {
  static const char jg[] = "Microsoft C/C++ program database 2.00\r\n\x1a" "JG\0\0";
  uint8_t buf[1024] = {0};
  memcpy(buf, jg, sizeof jg);
  ps_budget b;
  ps_budget_init(&b, 1 << 20);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pdb_read(buf, sizeof buf, &b, &st, &d), PS_E_UNSUPPORTED);
  st_free(&st);
}

/* xorshift, so the mutations are the same in every run */
static uint32_t rng_next(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static long mutants, mutants_ok;

static void survive(const uint8_t *data, size_t len) {
  ps_budget b;
  ps_budget_init(&b, (size_t)512 << 20);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = pdb_read(data, len, &b, &st, &d);
  mutants++;
  if (e == PS_E_OK) {
    mutants_ok++;
    st_answer *a = malloc(sizeof *a);
    for (size_t i = 0; a && i < st.nfuncs && i < 32; i++)
      st_lookup_rva(&st, st.funcs[i].rva + st.funcs[i].size / 2, a);
    free(a);
  } else {
    CHECK(d.code == e); /* every failure says what and where */
  }
  st_free(&st);
}

TEST(truncated_and_bitflipped_pdbs_fail_cleanly) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  static const char *const files[] = {
      "windows-native-pdb/symbolic/crash.pdb",
      "windows-native-pdb/binskim/Native_x64_RustC_Rust_debuginfo2_v1.58.1.pdb",
      "windows-native-pdb/breakpad/omap_reorder_bbs.pdb",
      "windows-native-pdb/binskim/Compiled2003.pdb",
      "windows-managed-pdb/cecil/VBConsApp.pdb",
  };
  uint32_t seed = 0x9e3779b9u;
  long truncs = 0;
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", g_corpus, files[f]);
    size_t len = 0;
    uint8_t *data = cu_read_raw(path, &len);
    if (!data)
      continue;
    /* truncations: every superblock field, then spread over the file */
    for (size_t cut = 0; cut < 64; cut += 4) {
      expect_error(data, cut, "truncated superblock");
      truncs++;
    }
    for (int k = 1; k < 40; k++) {
      survive(data, len / 40 * (size_t)k);
      truncs++;
    }
    uint8_t *copy = malloc(len);
    for (int round = 0; copy && round < 150; round++) {
      memcpy(copy, data, len);
      int flips = 1 + (int)(rng_next(&seed) % 16);
      for (int j = 0; j < flips; j++) {
        uint32_t r = rng_next(&seed);
        /* half of the flips hit the first 64 KiB: superblock, directory, headers */
        size_t at = (r & 1) ? rng_next(&seed) % (len < 65536 ? len : 65536) : rng_next(&seed) % len;
        copy[at] ^= (uint8_t)(1u << (r >> 8 & 7));
      }
      survive(copy, len);
    }
    free(copy);
    free(data);
  }
  printf("  %ld truncated and bit-flipped variants: %ld still read, the rest failed with "
         "a diagnostic\n", mutants + truncs - 39 * 5, mutants_ok);
}

int main(void) {
  g_corpus = corpus_dir();
  if (!g_corpus)
    return test_skip_all("../shared/corpus absent");
  RUN(corpus_reads_with_identity);
  RUN(managed_sequence_points_match_oracles);
  RUN(other_inputs_are_refused);
  RUN(old_pdb_format_is_unsupported);
  RUN(truncated_and_bitflipped_pdbs_fail_cleanly);
  return test_summary();
}
