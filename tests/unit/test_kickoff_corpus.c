/*
 * test_kickoff_corpus.c - state machines of the shared corpus's real managed
 * images (../shared/corpus) against the runtime's reflection
 * (tests/fixtures/corpus-oracles/state-machines.jsonl, ClrDump): for every
 * state machine reflection pairs with a kickoff method, the image's PDB
 * (Windows or Portable, found beside it by GUID) answers the MoveNext with that
 * kickoff, `async_method` its full name and `user_method` the user's method,
 * with the image; and a Windows PDB alone answers the same kickoff (from its
 * asyncMethodInfo and iterator records, written by compilers of several ages).
 */
#include <jansson.h>

#include "clrnames.h"
#include "corpus_util.h"
#include "pdb.h"
#include "pe.h"
#include "ppdb.h"
#include "symtab.h"
#include "test.h"

static char corpus[1024];

/* the PDB of image rel (pe/<repo>/<stem>.<ext>): candidates by name, matched by GUID */
static bool find_pdb(const char *rel, const pe_info *pi, char *out, size_t cap, bool *windows) {
  const char *repo = strchr(rel, '/');
  const char *base = strrchr(rel, '/');
  const char *dot = strrchr(rel, '.');
  if (!repo || !base || !dot || pi->ncodeview == 0)
    return false;
  repo++;
  static const char *const kinds[] = {"windows-managed-pdb", "portable-pdb", "portable-pdb"};
  static const char *const exts[] = {".pdb", ".pdbx", ".pdb"};
  for (int k = 0; k < 3; k++) {
    snprintf(out, cap, "%s/%s/%.*s%s", corpus, kinds[k], (int)(dot - repo), repo, exts[k]);
    size_t len;
    uint8_t *d = cu_read(out, &len);
    if (!d)
      continue;
    bool match = false;
    uint8_t guid[16];
    ps_diag diag;
    ps_diag_clear(&diag);
    if (pdb_is_msf(d, len)) {
      ps_budget b;
      ps_budget_init(&b, PS_DEFAULT_BUDGET);
      symtab st;
      st_init(&st, &b);
      if (pdb_read(d, len, &b, &st, &diag) == PS_E_OK) {
        memcpy(guid, st.ident.guid, 16);
        match = true;
      }
      st_free(&st);
      *windows = true;
    } else {
      ppdb_info info;
      if (ppdb_identify(d, len, &info, &diag) == PS_E_OK) {
        memcpy(guid, info.guid, 16);
        match = true;
      }
      *windows = false;
    }
    free(d);
    for (int c = 0; match && c < pi->ncodeview; c++)
      if (memcmp(pi->codeview[c].guid, guid, 16) == 0)
        return true;
  }
  return false;
}

static bool read_with(const char *pdb, const char *image, bool windows, symtab *st, ps_budget *b) {
  size_t len;
  uint8_t *d = cu_read(pdb, &len);
  if (!d)
    return false;
  ps_budget_init(b, PS_DEFAULT_BUDGET);
  st_init(st, b);
  ps_diag diag;
  ps_diag_clear(&diag);
  ps_err e = windows ? pdb_read(d, len, b, st, &diag) : ppdb_read(d, len, b, st, &diag);
  free(d);
  if (e == PS_E_OK && image) {
    uint8_t *img = cu_read(image, &len);
    e = img ? pe_method_names(img, len, b, st, &diag) : PS_E_IO;
    free(img);
  }
  return e == PS_E_OK;
}

TEST(corpus_state_machines) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/corpus-oracles/state-machines.jsonl",
           src ? src : ".");
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    SKIP("corpus-oracles/state-machines.jsonl absent");
  long with = 0, with_ok = 0, alone = 0, alone_ok = 0, nopdb = 0, nomethod = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    const char *rel = json_string_value(json_object_get(j, "file"));
    const char *mn = json_string_value(json_object_get(j, "move_next"));
    const char *ko = json_string_value(json_object_get(j, "kickoff"));
    const char *kname = json_string_value(json_object_get(j, "kickoff_method"));
    if (!rel || !mn || !ko || !kname) {
      json_decref(j);
      continue;
    }
    char image[4096], pdb[4096];
    snprintf(image, sizeof image, "%s/%s", corpus, rel);
    size_t il;
    uint8_t *img = cu_read(image, &il);
    pe_info pi;
    ps_diag d;
    ps_diag_clear(&d);
    bool windows = false;
    bool found = img && pe_parse(img, il, &pi, &d) == PS_E_OK &&
                 find_pdb(rel, &pi, pdb, sizeof pdb, &windows);
    free(img);
    if (!found) {
      nopdb++;
      json_decref(j);
      continue;
    }
    uint32_t mtok = (uint32_t)strtoul(mn, NULL, 16), ktok = (uint32_t)strtoul(ko, NULL, 16);
    for (int pass = 0; pass < 2; pass++) {
      if (pass == 1 && !windows)
        break; /* a Portable PDB alone is checked by test_ppdb_corpus */
      symtab st;
      ps_budget b;
      bool ok = read_with(pdb, pass == 0 ? image : NULL, windows, &st, &b);
      st_answer a;
      if (ok)
        st_lookup_token(&st, mtok, 0, &a);
      if (ok && a.status != ST_OK) {
        nomethod++; /* the PDB has no symbols for this MoveNext (no code in it) */
        st_free(&st);
        continue;
      }
      const st_symbol *s = ok ? &a.syms[0] : NULL;
      bool good = s && s->kickoff_token == ktok;
      if (pass == 0) {
        /* the user's method: the kickoff, or the kickoff lambda's own user */
        char want_user[1024];
        snprintf(want_user, sizeof want_user, "%s", kname);
        good = good && s->async_method && strcmp(s->async_method, kname) == 0 &&
               s->generated == CN_STATE_MACHINE && s->user_method &&
               (strcmp(s->user_method, want_user) == 0 || strchr(kname, '<'));
        with++;
        with_ok += good;
      } else {
        alone++;
        alone_ok += good;
      }
      if (!good)
        fprintf(stderr, "  %s (%s%s) MoveNext %s: kickoff 0x%08x %s user %s, reflection %s %s\n",
                rel, windows ? "Windows PDB" : "Portable PDB", pass ? ", alone" : "", mn,
                s ? s->kickoff_token : 0, s && s->async_method ? s->async_method : "-",
                s && s->user_method ? s->user_method : "-", ko, kname);
      st_free(&st);
    }
    json_decref(j);
  }
  free(text);
  printf("  corpus state machines: %ld/%ld MoveNext answers agree with reflection with the "
         "image, %ld/%ld from Windows PDBs alone (%ld without a corpus PDB, %ld without "
         "symbols for MoveNext)\n", with_ok, with, alone_ok, alone, nopdb, nomethod);
  CHECK(with >= 10 && alone >= 4);
  CHECK_EQ_U(with_ok, with);
  CHECK_EQ_U(alone_ok, alone);
}

int main(void) {
  if (!cu_corpus_dir(corpus, sizeof corpus))
    return test_skip_all("../shared/corpus absent");
  RUN(corpus_state_machines);
  return test_summary();
}
