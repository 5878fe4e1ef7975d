/*
 * test.h - a tiny test harness.  Each test file defines TEST(name) functions
 * and a main that runs them with RUN(name) and returns test_summary(); checks
 * print both sides on failure (libuv's task.h habit).
 *
 * A test fails when any of its checks failed, whatever it did afterwards (a
 * failed CHECK followed by SKIP is a failure, not a skip).
 *
 * Skips are counted and named, never silent:
 *   SKIP(why)       something the test needs is missing (the corpus, an oracle
 *                   tool, a fixture): the test stops here and is counted as
 *                   skipped.  Under CI (CI=true in the environment) it is a
 *                   failure instead: CI must run every strong check.
 *   SKIP_PART(why)  the same, for a part of a test: the test goes on without
 *                   it and passes, but the part is listed as skipped (and
 *                   fails under CI).
 *   SKIP_OPTIN(why) an opt-in part that was not asked for (a variable such as
 *                   PDBSYM_REBUILD_FIXTURES=1 turns it on): listed, never a
 *                   failure, not even under CI.
 *   test_skip_all(why)  from main, before any RUN: the whole file is skipped
 *                   (returns the exit status: 77, or 1 under CI).
 *
 * The summary line is "N passed, N failed, N skipped", followed by one
 * "skipped: TEST: why" line per skip.  When PDBSYM_BUILD_DIR is set (ctest
 * sets it) the skips are also written to PDBSYM_BUILD_DIR/skips/unit.FILE.tsv
 * (rewritten by every run, removed when nothing was skipped), where
 * scripts/test.sh collects them into the list it prints at the end.
 *
 * Exit status of test_summary(): 1 if anything failed, 77 (ctest's
 * SKIP_RETURN_CODE) if every test was skipped, else 0.
 */
#ifndef PDBSYM_TEST_H
#define PDBSYM_TEST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int t_failed_checks;
static int t_passed, t_failed, t_skipped;
static int t_skip_current, t_part_skipped;
static const char *t_current = "main"; /* the running TEST's name */
static const char *t_source = "";      /* __FILE__ of the test file */

#define T_MAX_SKIPS 64
typedef struct {
  char test[96];
  char why[320];
  bool optin;
} t_skip_rec;
static t_skip_rec t_skips[T_MAX_SKIPS];
static int t_nskips;

/* CI=true (GitHub, GitLab and most CI systems set it), or CI=1 */
static inline bool test_under_ci(void) {
  const char *ci = getenv("CI");
  return ci && (strcmp(ci, "true") == 0 || strcmp(ci, "TRUE") == 0 || strcmp(ci, "True") == 0 ||
                strcmp(ci, "1") == 0);
}

/* "tests/unit/test_pdb.c" -> "test_pdb" */
static inline void t_file_stem(char *out, size_t cap) {
  const char *s = strrchr(t_source, '/');
  s = s ? s + 1 : t_source;
  size_t n = strcspn(s, ".");
  snprintf(out, cap, "%.*s", (int)n, s);
}

static inline void t_note_skip(const char *why, bool optin) {
  if (t_nskips < T_MAX_SKIPS) {
    t_skip_rec *r = &t_skips[t_nskips++];
    snprintf(r->test, sizeof r->test, "%s", t_current);
    snprintf(r->why, sizeof r->why, "%s", why);
    r->optin = optin;
  }
  if (optin) {
    printf("  skipped (opt-in, not asked for): %s\n", why);
  } else if (test_under_ci()) {
    t_failed_checks++;
    fprintf(stderr, "  FAIL: skipped under CI=true, where every oracle and the corpus must be "
                    "present: %s\n",
            why);
  } else {
    printf("  skipped: %s\n", why);
  }
}

/* Writes PDBSYM_BUILD_DIR/skips/unit.FILE.tsv ("unit.FILE<TAB>test<TAB>kind<TAB>why"
 * per skip), or removes it when nothing was skipped. */
static inline void t_write_skips(void) {
  const char *dir = getenv("PDBSYM_BUILD_DIR");
  if (!dir || !*dir)
    return;
  char stem[128], path[4200];
  t_file_stem(stem, sizeof stem);
  snprintf(path, sizeof path, "%s/skips", dir);
  mkdir(path, 0777);
  snprintf(path, sizeof path, "%s/skips/unit.%s.tsv", dir, stem);
  if (!t_nskips) {
    remove(path);
    return;
  }
  FILE *f = fopen(path, "w");
  if (!f)
    return;
  for (int i = 0; i < t_nskips; i++) {
    char why[sizeof t_skips[i].why];
    snprintf(why, sizeof why, "%s", t_skips[i].why);
    for (char *p = why; *p; p++)
      if (*p == '\t' || *p == '\n')
        *p = ' ';
    fprintf(f, "unit.%s\t%s\t%s\t%s\n", stem, t_skips[i].test, t_skips[i].optin ? "opt-in" : "skip",
            why);
  }
  fclose(f);
}

#define TEST(name) static void test_##name(void)

#define RUN(name)                                                              \
  do {                                                                         \
    int before_ = t_failed_checks;                                             \
    t_source = __FILE__;                                                       \
    t_current = #name;                                                         \
    t_skip_current = 0;                                                        \
    t_part_skipped = 0;                                                        \
    test_##name();                                                             \
    if (t_failed_checks != before_) {                                          \
      t_failed++;                                                              \
      printf("FAIL %s\n", #name);                                              \
    } else if (t_skip_current) {                                               \
      t_skipped++;                                                             \
      printf("skip %s\n", #name);                                              \
    } else {                                                                   \
      t_passed++;                                                              \
      printf("ok   %s%s\n", #name, t_part_skipped ? " (a part skipped)" : ""); \
    }                                                                          \
    t_current = "main";                                                        \
  } while (0)

#define SKIP(why)                                                              \
  do {                                                                         \
    t_note_skip(why, false);                                                   \
    t_skip_current = 1;                                                        \
    return;                                                                    \
  } while (0)

#define SKIP_PART(why)                                                         \
  do {                                                                         \
    t_note_skip(why, false);                                                   \
    t_part_skipped = 1;                                                        \
  } while (0)

#define SKIP_OPTIN(why)                                                        \
  do {                                                                         \
    t_note_skip(why, true);                                                    \
    t_skip_current = 1;                                                        \
    return;                                                                    \
  } while (0)

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      t_failed_checks++;                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#define CHECK_EQ_U(a, b)                                                       \
  do {                                                                         \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                           \
    if (a_ != b_) {                                                            \
      t_failed_checks++;                                                       \
      fprintf(stderr, "%s:%d: %s == %s: 0x%" PRIx64 " != 0x%" PRIx64 "\n",     \
              __FILE__, __LINE__, #a, #b, a_, b_);                             \
    }                                                                          \
  } while (0)

#define CHECK_EQ_S(a, b)                                                       \
  do {                                                                         \
    const char *a_ = (a), *b_ = (b);                                           \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                   \
      t_failed_checks++;                                                       \
      fprintf(stderr, "%s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__,         \
              __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");       \
    }                                                                          \
  } while (0)

/* A bound on a count, printed either way: "name: 12 (bound 20)". */
#define CHECK_LE(a, bound)                                                     \
  do {                                                                         \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(bound);                       \
    if (a_ > b_) {                                                             \
      t_failed_checks++;                                                       \
      fprintf(stderr, "%s:%d: %s <= %s: %" PRIu64 " > %" PRIu64 "\n", __FILE__, \
              __LINE__, #a, #bound, a_, b_);                                   \
    }                                                                          \
  } while (0)

static inline int t_summary_at(const char *source) {
  if (!*t_source)
    t_source = source;
  int failed = t_failed + (t_failed_checks && !t_failed ? 1 : 0); /* checks outside RUN */
  printf("%d passed, %d failed, %d skipped\n", t_passed, failed, t_skipped);
  for (int i = 0; i < t_nskips; i++)
    printf("skipped%s: %s: %s\n", t_skips[i].optin ? " (opt-in)" : "", t_skips[i].test,
           t_skips[i].why);
  t_write_skips();
  if (failed)
    return 1;
  if (t_skipped && !t_passed)
    return 77;
  return 0;
}
#define test_summary() t_summary_at(__FILE__)

/* A corpus sweep's size.  scripts/test.sh's sanitizer run sets
 * PDBSYM_TEST_SWEEP=sample: there a sweep whose every answer the normal run
 * checks in full (the same code, the same oracles) takes `sample` items, so
 * that ASan and UBSan see every path on a sample instead of every input;
 * otherwise `full`.  The choice is printed once. */
static inline size_t test_sweep(size_t full, size_t sample) {
  const char *v = getenv("PDBSYM_TEST_SWEEP"); /* set by hand: wins */
  if (!v || !*v)
    v = getenv("PDBSYM_TEST_SWEEP_BUILD"); /* a sanitizer build's tests: sample (CMakeLists.txt) */
  bool sampled = v && strcmp(v, "sample") == 0;
  static bool said;
  if (!said) {
    said = true;
    printf("  sweep: %s (PDBSYM_TEST_SWEEP=%s)\n", sampled ? "sampled" : "full", v ? v : "");
  }
  return sampled ? sample : full;
}

/* From main, before any RUN: the whole file is skipped. */
static inline int t_skip_all_at(const char *source, const char *why) {
  t_source = source;
  t_current = "main";
  t_note_skip(why, false);
  t_skipped++;
  return t_summary_at(source);
}
#define test_skip_all(why) t_skip_all_at(__FILE__, why)

#endif
