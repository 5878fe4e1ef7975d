/*
 * test_pe_corpus.c - every corpus PE against its MANIFEST row: PE32/PE32+,
 * managed or not, COFF timestamp, the debug directory's entry kinds, and the
 * CodeView RSDS entries (GUID, age, path, the Portable marker and stamp)
 * against the `ids` and `pairing` columns.  Managed images must also yield
 * method names.
 */
#include "corpus_util.h"
#include "pe.h"
#include "symtab.h"
#include "test.h"

static char corpus[1024];
static int images, entries, entries_ok, named;

static void on_row(char **cols, int ncols, void *ctx) {
  (void)ncols;
  (void)ctx;
  const char *rel = cols[0], *ids = cols[8], *details = cols[11], *pairing = cols[12];
  if (strncmp(details, "PE32", 4) != 0)
    return;
  char abs[4096];
  snprintf(abs, sizeof abs, "%s/%s", corpus, rel);
  size_t len;
  uint8_t *data = cu_read(abs, &len);
  if (!data) {
    CHECK(!"unreadable corpus PE");
    return;
  }
  images++;
  pe_info pi;
  ps_diag d;
  ps_diag_clear(&d);
  char buf[320];
  CHECK(pe_is_image(data, len));
  ps_err e = pe_parse(data, len, &pi, &d);
  if (e != PS_E_OK) {
    t_failed_checks++;
    fprintf(stderr, "  %s: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
    free(data);
    return;
  }
  bool plus = strncmp(details, "PE32+", 5) == 0;
  bool managed = strstr(details, " managed") != NULL;
  CHECK_EQ_U(pi.pe32plus, plus);
  CHECK_EQ_U(pi.is_dotnet, managed);
  const char *ts = strstr(details, "timestamp=");
  if (ts)
    CHECK_EQ_U(pi.timestamp, strtoul(ts + 10, NULL, 16));
  CHECK_EQ_U(pi.has_embedded_pdb, strstr(details, "EMBEDDED_PORTABLE_PDB") != NULL);
  CHECK_EQ_U(pi.has_pdb_checksum, strstr(details, "PDBCHECKSUM") != NULL);

  /* ids: "RSDS GUID/AGE PATH; RSDS ..." in directory order */
  const char *p = ids;
  const char *pair = pairing;
  int k = 0;
  while ((p = strstr(p, "RSDS ")) != NULL) {
    p += 5;
    const char *end = strstr(p, "; RSDS ");
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char want[600];
    snprintf(want, sizeof want, "%.*s", (int)(n < 599 ? n : 599), p);
    entries++;
    if (k >= pi.ncodeview) {
      t_failed_checks++;
      fprintf(stderr, "  %s: missing CodeView entry %d (%s)\n", rel, k, want);
      break;
    }
    const pe_codeview *cv = &pi.codeview[k];
    char g[37], got[600];
    cu_guid_str(cv->guid, g);
    snprintf(got, sizeof got, "%s/%u %s", g, (unsigned)cv->age, cv->path);
    /* the MANIFEST trims trailing blanks of an empty path */
    size_t gl = strlen(got);
    while (gl && got[gl - 1] == ' ')
      got[--gl] = 0;
    bool ok = strcmp(got, want) == 0;
    /* pairing: "RSDS(portable) GUID stamp XXXXXXXX" for Portable entries */
    const char *pr = strstr(pair, "RSDS");
    if (pr) {
      bool portable = strncmp(pr, "RSDS(portable)", 14) == 0;
      ok = ok && cv->portable == portable;
      if (portable) {
        const char *st = strstr(pr, " stamp ");
        ok = ok && st && strtoul(st + 7, NULL, 16) == cv->stamp;
      }
      pair = pr + 4;
    }
    if (ok)
      entries_ok++;
    else
      fprintf(stderr, "  %s: CodeView %d: got %s%s, MANIFEST %s\n", rel, k, got,
              cv->portable ? " (portable)" : "", want);
    k++;
    p += n;
  }
  CHECK_EQ_U(pi.ncodeview, k);

  if (managed) {
    symtab st;
    ps_budget b;
    ps_budget_init(&b, PS_DEFAULT_BUDGET);
    st_init(&st, &b);
    ps_diag_clear(&d);
    e = pe_method_names(data, len, &b, &st, &d);
    if (e != PS_E_OK) {
      t_failed_checks++;
      fprintf(stderr, "  %s: names: %s\n", rel, ps_diag_format(&d, buf, sizeof buf));
    } else {
      named++;
    }
    st_free(&st);
  }
  free(data);
}

TEST(corpus_pe_identity) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    SKIP("../shared/corpus absent");
  CHECK(cu_manifest(corpus, on_row, NULL));
  printf("  %d images, %d/%d CodeView entries agree, %d managed images named\n", images,
         entries_ok, entries, named);
  CHECK(images > 0);
  CHECK_EQ_U(entries_ok, entries);
}

int main(void) {
  RUN(corpus_pe_identity);
  return test_summary();
}
