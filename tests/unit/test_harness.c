/*
 * test_harness.c - the harness of tests/unit/test.h checked on itself.
 *
 * Run without arguments (as ctest does), it runs itself once per case below
 * as a child process ("test_harness --case NAME"), with and without CI=true
 * and with its own PDBSYM_BUILD_DIR, and checks the child's exit status, its
 * summary and the skip list it leaves in PDBSYM_BUILD_DIR/skips/:
 *   - a failing check followed by a skip fails (exit 1), under CI or not;
 *   - a skip is counted and named (exit 77 when all is skipped), and under
 *     CI=true it is a failure (exit 1);
 *   - a skipped part lets the test pass on a user's machine, fails under CI;
 *   - an opt-in part not asked for is listed and never fails;
 *   - a clean run leaves no skip list behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* ---- the cases, run in the child ----------------------------------------- */

TEST(fails_then_skips) {
  CHECK(1 + 1 == 3); /* deliberately false */
  SKIP("deliberate skip after a failed check");
}

TEST(skips) { SKIP("deliberate skip: oracle tool absent"); }

TEST(passes) { CHECK(1 + 1 == 2); }

TEST(skips_a_part) {
  CHECK(1 + 1 == 2);
  SKIP_PART("deliberate partial skip: cabextract absent");
  CHECK(2 + 2 == 4);
}

TEST(opt_in_not_asked) { SKIP_OPTIN("deliberate opt-in part, not asked for"); }

static int run_case(const char *name) {
  if (!strcmp(name, "check-then-skip")) {
    RUN(fails_then_skips);
  } else if (!strcmp(name, "skip")) {
    RUN(skips);
  } else if (!strcmp(name, "skip-and-pass")) {
    RUN(skips);
    RUN(passes);
  } else if (!strcmp(name, "part")) {
    RUN(skips_a_part);
  } else if (!strcmp(name, "optin")) {
    RUN(opt_in_not_asked);
    RUN(passes);
  } else if (!strcmp(name, "skip-all")) {
    return test_skip_all("deliberate: the whole file's corpus is absent");
  } else if (!strcmp(name, "clean")) {
    RUN(passes);
  } else {
    fprintf(stderr, "unknown case %s\n", name);
    return 2;
  }
  return test_summary();
}

/* ---- the parent: runs each case and judges it ---------------------------- */

static char self[4096], tmp[4096];

typedef struct {
  int status;
  char out[8192];
  char skips[4096]; /* the skip file's text, "" when absent */
} result;

static void read_text(const char *path, char *buf, size_t cap) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

static bool spawn(const char *name, bool ci, result *r) {
  char out_path[4200], skip_path[4200];
  snprintf(out_path, sizeof out_path, "%s/out.txt", tmp);
  snprintf(skip_path, sizeof skip_path, "%s/skips/unit.test_harness.tsv", tmp);
  remove(skip_path);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
      _exit(3);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    if (ci)
      setenv("CI", "true", 1);
    else
      unsetenv("CI");
    setenv("PDBSYM_BUILD_DIR", tmp, 1);
    execl(self, self, "--case", name, (char *)NULL);
    _exit(4);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  read_text(out_path, r->out, sizeof r->out);
  read_text(skip_path, r->skips, sizeof r->skips);
  return true;
}

/* runs case NAME and checks its exit status, that its output holds OUT_HAS
 * and that its skip list holds SKIPS_HAS (NULL: that it left no list) */
static void expect_case(int line, const char *name, bool ci, int want_status, const char *out_has,
                        const char *skips_has) {
  result r;
  if (!spawn(name, ci, &r)) {
    t_failed_checks++;
    fprintf(stderr, "line %d: cannot run case %s\n", line, name);
    return;
  }
  bool ok = r.status == want_status && strstr(r.out, out_has) &&
            (skips_has ? strstr(r.skips, skips_has) != NULL : r.skips[0] == '\0');
  if (!ok) {
    t_failed_checks++;
    fprintf(stderr,
            "line %d: case %s%s: exit %d (want %d), output:\n%s\nskip list:\n%s\n"
            "(wanted \"%s\" in the output, \"%s\" in the list)\n",
            line, name, ci ? " CI=true" : "", r.status, want_status, r.out, r.skips, out_has,
            skips_has ? skips_has : "(no list)");
  }
}
#define EXPECT_CASE(...) expect_case(__LINE__, __VA_ARGS__)

TEST(a_failed_check_then_a_skip_fails) {
  EXPECT_CASE("check-then-skip", false, 1, "FAIL fails_then_skips", "deliberate skip after");
  EXPECT_CASE("check-then-skip", true, 1, "0 passed, 1 failed, 0 skipped", "deliberate skip after");
}

TEST(a_skip_is_counted_and_named) {
  EXPECT_CASE("skip", false, 77, "skipped: skips: deliberate skip: oracle tool absent",
              "unit.test_harness\tskips\tskip\tdeliberate skip: oracle tool absent");
  EXPECT_CASE("skip-and-pass", false, 0, "1 passed, 0 failed, 1 skipped", "oracle tool absent");
  EXPECT_CASE("skip-all", false, 77, "skipped: main: deliberate: the whole file", "whole file");
}

TEST(ci_turns_a_skip_into_a_failure) {
  EXPECT_CASE("skip", true, 1, "FAIL skips", "oracle tool absent");
  EXPECT_CASE("skip-and-pass", true, 1, "1 passed, 1 failed, 0 skipped", "oracle tool absent");
  EXPECT_CASE("skip-all", true, 1, "skipped under CI=true", "whole file");
}

TEST(a_skipped_part_passes_but_is_listed) {
  EXPECT_CASE("part", false, 0, "ok   skips_a_part (a part skipped)", "\tskips_a_part\tskip\t");
  EXPECT_CASE("part", true, 1, "FAIL skips_a_part", "cabextract absent");
}

TEST(an_opt_in_part_never_fails) {
  EXPECT_CASE("optin", false, 0, "skipped (opt-in): opt_in_not_asked", "\topt-in\t");
  EXPECT_CASE("optin", true, 0, "1 passed, 0 failed, 1 skipped", "\topt-in\t");
}

TEST(a_clean_run_leaves_no_list) {
  EXPECT_CASE("clean", false, 0, "1 passed, 0 failed, 0 skipped", NULL);
  EXPECT_CASE("clean", true, 0, "1 passed, 0 failed, 0 skipped", NULL);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--case"))
    return run_case(argv[2]);
  if (!realpath(argv[0], self)) {
    perror(argv[0]);
    return 1;
  }
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/pdbsym-harness-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(tmp)) {
    perror("mkdtemp");
    return 1;
  }
  RUN(a_failed_check_then_a_skip_fails);
  RUN(a_skip_is_counted_and_named);
  RUN(ci_turns_a_skip_into_a_failure);
  RUN(a_skipped_part_passes_but_is_listed);
  RUN(an_opt_in_part_never_fails);
  RUN(a_clean_run_leaves_no_list);
  char p[4200];
  snprintf(p, sizeof p, "%s/out.txt", tmp);
  remove(p);
  snprintf(p, sizeof p, "%s/skips/unit.test_harness.tsv", tmp);
  remove(p);
  snprintf(p, sizeof p, "%s/skips", tmp);
  rmdir(p);
  rmdir(tmp);
  return test_summary();
}
