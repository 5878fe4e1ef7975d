/*
 * test.h - a tiny test harness.  Each test file defines TEST(name) functions
 * and a main that runs them with RUN(name); checks print both sides on
 * failure (libuv's task.h habit).  The summary line is
 * "N passed, N failed" (plus ", N skipped").
 */
#ifndef PDBSYM_TEST_H
#define PDBSYM_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_checks;
static int t_passed, t_failed, t_skipped;
static int t_skip_current;

#define TEST(name) static void test_##name(void)

#define RUN(name)                                                              \
  do {                                                                         \
    int before_ = t_failed_checks;                                             \
    t_skip_current = 0;                                                        \
    test_##name();                                                             \
    if (t_skip_current) {                                                      \
      t_skipped++;                                                             \
      printf("skip %s\n", #name);                                              \
    } else if (t_failed_checks == before_) {                                   \
      t_passed++;                                                              \
      printf("ok   %s\n", #name);                                              \
    } else {                                                                   \
      t_failed++;                                                              \
      printf("FAIL %s\n", #name);                                              \
    }                                                                          \
  } while (0)

#define SKIP(why)                                                              \
  do {                                                                         \
    printf("  skipped: %s\n", why);                                            \
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

static inline int test_summary(void) {
  printf("%d passed, %d failed, %d skipped\n", t_passed, t_failed, t_skipped);
  return t_failed ? 1 : 0;
}

#endif
