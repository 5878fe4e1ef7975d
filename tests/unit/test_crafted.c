/*
 * test_crafted.c - the readers' allocations stay proportional to the input.
 *
 * The crafted files of tests/fuzz/corpus (made by tests/fuzz/make_crafted.py:
 * a 1 GiB stream made of two reused blocks, 2,000 modules sharing one module
 * stream, line blocks spanning 20,000 OMAP blocks, an embedded Portable PDB
 * claiming 512 MiB) each made the reader allocate 0.5 to 2 GB before it
 * refused the file.  Each is read here through loader_read with a 256 MiB
 * budget, whose peak counts every buffer sized from the file: the reader must
 * refuse it, and its peak must stay under the input allowance of reader.h
 * (PS_INPUT_FACTOR bytes per input byte plus PS_INPUT_FLOOR), or under twice
 * the file where the structure is refused before its symbols are read.
 *
 * The real files (the fuzz seeds, the native fixtures and, when present, the
 * shared corpus) are read too: they must read as before, within the same
 * allowance, which is what makes the allowance safe to enforce.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "loader.h"
#include "pdb_corpus.h"
#include "test.h"

static const char *src_dir(void) {
  const char *s = getenv("PDBSYM_SOURCE_DIR");
  return s ? s : ".";
}

typedef struct {
  ps_err code;
  size_t peak;
  char msg[400];
} outcome;

static outcome read_with_budget(const uint8_t *data, size_t len, size_t cap) {
  outcome o;
  ps_budget b;
  ps_budget_init(&b, cap);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  o.code = loader_read(data, len, NULL, 0, &b, &st, &d);
  ps_diag_format(&d, o.msg, sizeof o.msg);
  st_free(&st);
  o.peak = b.peak;
  return o;
}

static const struct {
  const char *path;
  ps_err code;        /* how it must be refused */
  unsigned max_ratio; /* peak <= max_ratio * len + floor; 0: the input allowance */
} CRAFTED[] = {
    {"tests/fuzz/corpus/pdb/crafted-bigstream.pdb", PS_E_CORRUPT, 2},
    {"tests/fuzz/corpus/pdb/crafted-sharedmod.pdb", PS_E_CORRUPT, 2},
    {"tests/fuzz/corpus/pdb/crafted-omap.pdb", PS_E_LIMIT, 0},
    {"tests/fuzz/corpus/pe/crafted-embedded.bin", PS_E_LIMIT, 2},
};

TEST(crafted_files_are_refused_within_their_allowance) {
  for (size_t i = 0; i < sizeof CRAFTED / sizeof *CRAFTED; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", src_dir(), CRAFTED[i].path);
    size_t len = 0;
    uint8_t *data = cu_read_raw(path, &len);
    CHECK(data != NULL);
    if (!data)
      continue;
    outcome o = read_with_budget(data, len, (size_t)256 << 20);
    size_t bound = CRAFTED[i].max_ratio ? CRAFTED[i].max_ratio * len + PS_INPUT_FLOOR
                                        : ps_input_allowance(len);
    printf("  %-45s %7zu bytes: peak %9zu (bound %9zu): %s\n", CRAFTED[i].path, len, o.peak,
           bound, o.msg);
    CHECK_EQ_U(o.code, CRAFTED[i].code);
    CHECK(o.peak <= bound);
    free(data);
  }
}

/* every regular file of dir through loader_read: the ones that read must have
 * stayed within their allowance (as the reader enforces it, a file that needs
 * more fails with PS_E_LIMIT, which is counted as a failure here) */
static void real_files(const char *dir, const char *const *suffixes, int *nread, int *nlimit,
                       double *worst) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0)
      continue;
    if (S_ISDIR(sb.st_mode)) {
      real_files(path, suffixes, nread, nlimit, worst);
      continue;
    }
    bool want = false;
    size_t nl = strlen(e->d_name);
    for (const char *const *s = suffixes; *s && !want; s++)
      want = nl > strlen(*s) && strcmp(e->d_name + nl - strlen(*s), *s) == 0;
    if (!want || strncmp(e->d_name, "crafted-", 8) == 0)
      continue;
    size_t len = 0;
    uint8_t *data = cu_read_raw(path, &len);
    if (!data)
      continue;
    outcome o = read_with_budget(data, len, PS_DEFAULT_BUDGET);
    if (o.code == PS_E_LIMIT) {
      (*nlimit)++;
      fprintf(stderr, "  %s: %s\n", path, o.msg);
    }
    if (o.code == PS_E_OK) {
      (*nread)++;
      double r = len ? (double)o.peak / (double)len : 0;
      if (len >= 65536 && r > *worst)
        *worst = r;
    }
    free(data);
  }
  closedir(d);
}

TEST(real_files_read_within_their_allowance) {
  static const char *const suffixes[] = {".pdb", ".pdbx", ".dll", ".exe", ".bin", NULL};
  int nread = 0, nlimit = 0;
  double worst = 0;
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus", src_dir());
  real_files(dir, suffixes, &nread, &nlimit, &worst);
  snprintf(dir, sizeof dir, "%s/tests/fixtures", src_dir());
  real_files(dir, suffixes, &nread, &nlimit, &worst);
  const char *corpus = corpus_dir();
  if (corpus)
    real_files(corpus, suffixes, &nread, &nlimit, &worst);
  printf("  %d files read, %d over their allowance; largest peak/size of files over 64 KiB: "
         "%.2f (allowance %d)\n", nread, nlimit, worst, PS_INPUT_FACTOR);
  CHECK(nread >= 5);
  CHECK_EQ_U(nlimit, 0);
  CHECK(worst < PS_INPUT_FACTOR / 2.0);
}

/* a PE whose embedded PDB is honest is still read, and its inflated buffer is
 * charged to the budget: a budget smaller than it refuses the image */
TEST(embedded_pdb_is_charged_to_the_budget) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tests/fuzz/corpus/pe/synthetic.dll.bin", src_dir());
  size_t len = 0;
  uint8_t *data = cu_read_raw(path, &len);
  CHECK(data != NULL);
  if (!data)
    return;
  outcome o = read_with_budget(data, len, (size_t)64 << 20);
  CHECK_EQ_U(o.code, PS_E_OK);
  CHECK(o.peak > 0);
  /* the inflated size (from the MPDB header) must be counted: with a budget
   * of fewer bytes than that, the image cannot be read */
  size_t at = 0;
  while (at + 8 <= len && memcmp(data + at, "MPDB", 4) != 0)
    at++;
  CHECK(at + 8 <= len);
  size_t inflated = (size_t)data[at + 4] | (size_t)data[at + 5] << 8 |
                    (size_t)data[at + 6] << 16 | (size_t)data[at + 7] << 24;
  outcome small = read_with_budget(data, len, inflated - 1);
  CHECK_EQ_U(small.code, PS_E_LIMIT);
  CHECK(o.peak >= inflated);
  free(data);
}

int main(void) {
  RUN(crafted_files_are_refused_within_their_allowance);
  RUN(real_files_read_within_their_allowance);
  RUN(embedded_pdb_is_charged_to_the_budget);
  return test_summary();
}
