/*
 * test_store_real.c - real PDBs through the cache: each file the readers can
 * read (tests/fixtures/managed, and the corpus at ../shared/corpus) is parsed,
 * stored with store_put, loaded back by a fresh store, and every lookup of
 * the reloaded table is compared with the table the reader produced: every
 * address of the native range (or, past 8 M addresses, every row boundary),
 * every method token at every IL offset of its sequence points and around.
 */
#include <stdio.h>

#include "test.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus_util.h"
#include "loader.h"
#include "store.h"

static bool same_str(const char *a, const char *b) {
  if (!a || !b)
    return a == b;
  return strcmp(a, b) == 0;
}

static int diff_answer(const st_answer *a, const st_answer *b) {
  if (a->status != b->status || a->nsyms != b->nsyms)
    return 1;
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *x = &a->syms[i], *y = &b->syms[i];
    if (!same_str(x->function, y->function) || !same_str(x->mangled, y->mangled) ||
        !same_str(x->file, y->file) || !same_str(x->async_method, y->async_method) ||
        !same_str(x->user_method, y->user_method) ||
        !same_str(x->local_function, y->local_function) || x->generated != y->generated ||
        x->line != y->line || x->column != y->column || x->end_line != y->end_line ||
        x->end_column != y->end_column || x->function_offset != y->function_offset ||
        x->kickoff_token != y->kickoff_token || x->inlined != y->inlined ||
        x->hidden != y->hidden || x->has_line != y->has_line || x->has_column != y->has_column ||
        x->has_offset != y->has_offset)
      return 1;
  }
  return 0;
}

static st_answer ax, ay;
static uint64_t nlookups, nbad;

static void cmp_rva(const symtab *a, const symtab *b, uint32_t rva) {
  st_lookup_rva(a, rva, &ax);
  st_lookup_rva(b, rva, &ay);
  nlookups++;
  nbad += (uint64_t)diff_answer(&ax, &ay);
}

static void cmp_rva_around(const symtab *a, const symtab *b, uint32_t rva, uint32_t size) {
  cmp_rva(a, b, rva);
  if (rva)
    cmp_rva(a, b, rva - 1);
  if (size) {
    cmp_rva(a, b, rva + size - 1);
    cmp_rva(a, b, rva + size);
  }
}

static void compare(const symtab *a, const symtab *b) {
  uint64_t lo = UINT32_MAX, hi = 0;
#define SPAN(arr, n, szexpr)                                                   \
  for (size_t i = 0; i < a->n; i++) {                                          \
    uint64_t s_ = a->arr[i].rva, e_ = s_ + (szexpr);                           \
    lo = s_ < lo ? s_ : lo;                                                    \
    hi = e_ > hi ? e_ : hi;                                                    \
  }
  SPAN(funcs, nfuncs, a->funcs[i].size)
  SPAN(lines, nlines, a->lines[i].size)
  SPAN(publics, npublics, 1)
#undef SPAN
  if (hi > lo && hi - lo <= (8u << 20)) {
    for (uint64_t r = lo ? lo - 1 : 0; r <= hi + 16 && r <= UINT32_MAX; r++)
      cmp_rva(a, b, (uint32_t)r);
  } else {
    for (size_t i = 0; i < a->nfuncs; i++)
      cmp_rva_around(a, b, a->funcs[i].rva, a->funcs[i].size);
    for (size_t i = 0; i < a->nlines; i++)
      cmp_rva_around(a, b, a->lines[i].rva, a->lines[i].size);
    for (size_t i = 0; i < a->niranges; i++)
      cmp_rva_around(a, b, a->iranges[i].rva, a->iranges[i].size);
    for (size_t i = 0; i < a->npublics; i++)
      cmp_rva_around(a, b, a->publics[i].rva, 1);
  }
  for (size_t m = 0; m < a->nmethods; m++) {
    const st_method *me = &a->methods[m];
    uint32_t max_il = 0;
    for (uint32_t k = 0; k < me->sp_count; k++)
      if (a->seqpts[me->sp_first + k].il > max_il)
        max_il = a->seqpts[me->sp_first + k].il;
    for (uint32_t il = 0; il <= max_il + 8; il++) {
      st_lookup_token(a, me->token, il, &ax);
      st_lookup_token(b, me->token, il, &ay);
      nlookups++;
      nbad += (uint64_t)diff_answer(&ax, &ay);
    }
  }
}


static char tmpdir[1024];
static int files_compared;

/* Removes dir and everything in it (what cannot go shows in scripts/test.sh's
 * TMPDIR check). */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(p);
    else
      unlink(p);
  }
  if (d)
    closedir(d);
  rmdir(dir);
}

static void roundtrip_file(const char *path) {
  size_t len;
  uint8_t *data = cu_read_raw(path, &len);
  if (!data)
    return;
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &budget);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = loader_read(data, len, NULL, 0, &budget, &st, &d);
  free(data);
  if (e != PS_E_OK) { /* not ours to judge here: the readers' tests do that */
    st_free(&st);
    return;
  }
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/c%d", tmpdir, files_compared);
  store_config cfg = {.dir = dir};
  store *s = NULL;
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  if (!s) {
    st_free(&st);
    return;
  }
  CHECK_EQ_U(store_put(s, "real.pdb/X1", &st, path, &d), PS_E_OK);
  store_close(s);
  s = NULL;
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  store_entry ent;
  uint64_t bad_before = nbad, n_before = nlookups;
  if (s && store_get(s, "real.pdb/X1", &ent) == STORE_HIT) {
    compare(&st, ent.st);
    store_release(s, &ent);
    files_compared++;
    if (nbad != bad_before)
      fprintf(stderr, "%s: %llu of %llu lookups differ after the round trip\n", path,
              (unsigned long long)(nbad - bad_before), (unsigned long long)(nlookups - n_before));
  } else {
    CHECK(!"reloaded module missing");
  }
  store_close(s);
  st_free(&st);
  remove_tree(dir); /* the database, its table files and tmp/ */
}

static void walk(const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(p, &sb) != 0)
      continue;
    if (S_ISDIR(sb.st_mode) && depth < 4)
      walk(p, depth + 1);
    else if (S_ISREG(sb.st_mode)) {
      size_t n = strlen(e->d_name);
      if ((n > 4 && !strcmp(e->d_name + n - 4, ".pdb")) ||
          (n > 4 && !strcmp(e->d_name + n - 4, ".dll")))
        roundtrip_file(p);
    }
  }
  closedir(d);
}

TEST(fixtures_round_trip) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  if (!src)
    SKIP("PDBSYM_SOURCE_DIR not set");
  char p[1024];
  snprintf(p, sizeof p, "%s/tests/fixtures", src);
  walk(p, 0);
  snprintf(p, sizeof p, "%s/../shared/corpus", src);
  struct stat sb;
  if (stat(p, &sb) != 0)
    SKIP_PART("corpus round trips: ../shared/corpus absent");
  else
    walk(p, 0);
  printf("  %d files, %llu lookups compared, %llu differ\n", files_compared,
         (unsigned long long)nlookups, (unsigned long long)nbad);
  if (files_compared == 0)
    SKIP("no file the readers could read");
  CHECK_EQ_U(nbad, 0);
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/test_store_real.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(tmpdir))
    return 1;
  RUN(fixtures_round_trip);
  remove_tree(tmpdir);
  return test_summary();
}
