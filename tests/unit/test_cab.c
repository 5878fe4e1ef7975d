/*
 * test_cab.c - CAB extraction against cabextract (Debian) as the oracle:
 * cabinets made by tests/cabmake.py and every cabinet in the corpus
 * (other/libmspack, the symbol-server .pd_/.dl_/.ex_ files).  A cabinet that
 * cabextract extracts must come out byte-identical; one it refuses must be
 * refused by us too (cleanly: an error code, no crash under ASan).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cab.h"
#include "corpus_util.h"
#include "test.h"

typedef struct {
  uint8_t *p;
  size_t len, cap;
} buf;

static ps_err buf_sink(void *ctx, const uint8_t *d, size_t n) {
  buf *b = ctx;
  if (n == 0)
    return PS_E_OK;
  if (b->len + n > b->cap) {
    size_t nc = b->cap ? b->cap : 65536;
    while (nc < b->len + n)
      nc *= 2;
    uint8_t *np = realloc(b->p, nc);
    if (!np)
      return PS_E_NOMEM;
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
  return PS_E_OK;
}


static char tmpdir[256];
static const char *src_dir(void) {
  const char *s = getenv("PDBSYM_SOURCE_DIR");
  return s ? s : ".";
}

static bool have_cabextract(void) { return system("cabextract --version >/dev/null 2>&1") == 0; }

static int run(const char *cmd) {
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* Compares our extraction of path with cabextract's; returns the number of
 * members compared, or -1 when we refused the cabinet (as cabextract did). */
/* embedded: the cabinet sits inside other bytes (cabextract searches for it;
 * a symbol-server file must start with "MSCF", so we refuse it). */
static int compare_with_cabextract_ex(const char *path, bool verbose, bool embedded) {
  char out[300], cmd[4096];
  snprintf(out, sizeof out, "%s/x", tmpdir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cabextract -q -d '%s' '%s' >/dev/null 2>&1",
           out, out, out, path);
  int oracle_rc = run(cmd);
  size_t len = 0;
  uint8_t *data = cu_read_raw(path, &len);
  CHECK(data != NULL);
  if (!data)
    return 0;
  cab_archive *a = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  ps_err r = cab_open(data, len, &a, &d);
  int compared = 0;
  bool refused = r != PS_E_OK;
  if (!refused) {
    for (size_t i = 0; i < cab_count(a); i++) {
      buf b = {0};
      ps_diag_clear(&d);
      ps_err e = cab_extract(a, i, (uint64_t)1 << 30, buf_sink, &b, &d);
      if (e != PS_E_OK) {
        refused = true;
        char msg[300];
        if (verbose)
          printf("  %s: member %zu refused: %s\n", path, i, ps_diag_format(&d, msg, sizeof msg));
        free(b.p);
        continue;
      }
      char name[600];
      snprintf(name, sizeof name, "%s/%s", out, cab_name(a, i));
      for (char *p = name + strlen(out); *p; p++)
        if (*p == '\\')
          *p = '/';
      size_t olen = 0;
      uint8_t *odata = cu_read_raw(name, &olen);
      if (odata) {
        CHECK_EQ_U(b.len, olen);
        bool same = b.len == olen && (olen == 0 || memcmp(b.p, odata, olen) == 0);
        CHECK(same);
        if (!same)
          printf("  %s: member %s differs from cabextract\n", path, cab_name(a, i));
        compared++;
      } else if (oracle_rc == 0) {
        printf("  %s: cabextract did not write %s\n", path, name);
      }
      free(odata);
      free(b.p);
    }
    cab_close(a);
  } else if (verbose) {
    char msg[300];
    printf("  %s: refused: %s\n", path, ps_diag_format(&d, msg, sizeof msg));
  }
  if (embedded) {
    CHECK(refused && r == PS_E_CORRUPT);
  } else if (oracle_rc == 0) {
    CHECK(!refused);
    if (refused)
      printf("  %s: cabextract extracts it, we refused it\n", path);
  } else {
    CHECK(refused);
    if (!refused)
      printf("  %s: cabextract refuses it (rc %d), we accepted it\n", path, oracle_rc);
  }
  free(data);
  return refused ? -1 : compared;
}

static int compare_with_cabextract(const char *path, bool verbose) {
  return compare_with_cabextract_ex(path, verbose, false);
}

TEST(made_by_cabmake) {
  if (!have_cabextract())
    SKIP("cabextract not installed");
  char cmd[1400];
  /* an incompressible member, a compressible one spanning several blocks, an empty one */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && head -c 100000 /dev/urandom > rand.bin && seq 1 40000 > lines.txt && "
           ": > empty.pdb && python3 '%s/tests/cabmake.py' m.cab rand.bin lines.txt empty.pdb && "
           "python3 '%s/tests/cabmake.py' s.cab lines.txt --stored",
           tmpdir, src_dir(), src_dir());
  CHECK(run(cmd) == 0);
  char p[400];
  snprintf(p, sizeof p, "%s/m.cab", tmpdir);
  CHECK(compare_with_cabextract(p, true) == 3);
  snprintf(p, sizeof p, "%s/s.cab", tmpdir);
  CHECK(compare_with_cabextract(p, true) == 1);
}

TEST(cap_refuses_inflation) {
  char cmd[1400];
  /* 4 MiB of zeros: a ~4 KiB cabinet that inflates 1000-fold */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && head -c 4194304 /dev/zero > zeros.pdb && "
           "python3 '%s/tests/cabmake.py' bomb.pd_ zeros.pdb",
           tmpdir, src_dir());
  CHECK(run(cmd) == 0);
  char p[400];
  snprintf(p, sizeof p, "%s/bomb.pd_", tmpdir);
  size_t len = 0;
  uint8_t *data = cu_read_raw(p, &len);
  CHECK(data && len < 65536);
  if (!data)
    return;
  cab_archive *a = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(cab_open(data, len, &a, &d), PS_E_OK);
  CHECK_EQ_U(cab_find(a, "ZEROS.PDB"), 0);
  buf b = {0};
  /* the declared size is over the cap: refused before inflating */
  CHECK_EQ_U(cab_extract(a, 0, 1 << 20, buf_sink, &b, &d), PS_E_LIMIT);
  CHECK_EQ_U(b.len, 0);
  /* exactly the size passes */
  ps_diag_clear(&d);
  CHECK_EQ_U(cab_extract(a, 0, 4194304, buf_sink, &b, &d), PS_E_OK);
  CHECK_EQ_U(b.len, 4194304);
  free(b.p);
  cab_close(a);

  /* a header that lies (declares 1 KiB) while the data inflates to 4 MiB:
   * the write counter stops it at the cap */
  uint32_t cb = 1024;
  uint32_t coff_files;
  memcpy(&coff_files, data + 16, 4);
  memcpy(data + coff_files, &cb, 4);
  ps_diag_clear(&d);
  CHECK_EQ_U(cab_open(data, len, &a, &d), PS_E_OK);
  buf b2 = {0};
  ps_err e = cab_extract(a, 0, 1 << 20, buf_sink, &b2, &d);
  /* libmspack writes only the declared 1 KiB: accepted, exactly 1 KiB */
  CHECK(e == PS_E_OK && b2.len == 1024);
  free(b2.p);
  cab_close(a);
  free(data);
}

TEST(truncations_and_garbage) {
  char cmd[1400];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && seq 1 20000 > t.txt && python3 '%s/tests/cabmake.py' t.cab t.txt",
           tmpdir, src_dir());
  CHECK(run(cmd) == 0);
  char p[400];
  snprintf(p, sizeof p, "%s/t.cab", tmpdir);
  size_t len = 0;
  uint8_t *data = cu_read_raw(p, &len);
  CHECK(data != NULL);
  if (!data)
    return;
  int ok_full = 0;
  for (size_t cut = 0; cut <= len; cut += (cut < 200 ? 1 : 97)) {
    cab_archive *a = NULL;
    ps_diag d;
    ps_diag_clear(&d);
    ps_err r = cab_open(data, cut, &a, &d);
    if (r == PS_E_OK) {
      buf b = {0};
      r = cab_extract(a, 0, 1 << 24, buf_sink, &b, &d);
      if (r == PS_E_OK)
        ok_full++;
      free(b.p);
      cab_close(a);
    }
    if (cut < len)
      CHECK(r != PS_E_OK);
  }
  cab_archive *a = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(cab_open((const uint8_t *)"MSCX", 4, &a, &d), PS_E_CORRUPT);
  CHECK(a == NULL);
  free(data);
}

static int corpus_walk(const char *dir, const char *const *exts) {
  DIR *dd = opendir(dir);
  if (!dd)
    return 0;
  int n = 0;
  struct dirent *de;
  char **names = NULL;
  size_t nn = 0;
  while ((de = readdir(dd))) {
    const char *dot = strrchr(de->d_name, '.');
    if (!dot)
      continue;
    for (const char *const *e = exts; *e; e++)
      if (!strcmp(dot, *e)) {
        names = realloc(names, (nn + 1) * sizeof *names);
        names[nn++] = strdup(de->d_name);
      }
  }
  closedir(dd);
  for (size_t i = 0; i < nn; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    bool embedded = !strncmp(names[i], "search_", 7);
    int c = compare_with_cabextract_ex(p, false, embedded);
    printf("  %-40s %s\n", names[i],
           embedded ? "refused (embedded cabinet, not at offset 0)"
                    : c < 0 ? "refused (as cabextract)" : "identical to cabextract");
    n++;
    free(names[i]);
  }
  free(names);
  return n;
}

TEST(corpus) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/../shared/corpus/other", src_dir());
  struct stat st;
  if (stat(dir, &st) != 0)
    SKIP("../shared/corpus absent");
  if (!have_cabextract())
    SKIP("cabextract not installed");
  static const char *const cab_ext[] = {".cab", NULL};
  static const char *const sym_ext[] = {".pd_", ".dl_", ".ex_", NULL};
  char sub[1100];
  snprintf(sub, sizeof sub, "%s/libmspack", dir);
  int n = corpus_walk(sub, cab_ext);
  snprintf(sub, sizeof sub, "%s/tecken", dir);
  n += corpus_walk(sub, sym_ext);
  snprintf(sub, sizeof sub, "%s/dump_syms", dir);
  n += corpus_walk(sub, sym_ext);
  CHECK(n > 0);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/pdbsym-test-cab-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  RUN(made_by_cabmake);
  RUN(cap_refuses_inflation);
  RUN(truncations_and_garbage);
  RUN(corpus);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", tmpdir);
  return test_summary();
}
