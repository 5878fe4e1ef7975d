/*
 * bench_undname.c - undecoration speed: undname_full + undname_short over a
 * list of decorated names (one per line), against llvm-undname on the same
 * list (one process, names on stdin).
 *   bench_undname NAMES.txt [ROUNDS]
 * Prints CPU time per name for both (llvm-undname's process start and its
 * reading and writing are included; use a long list).
 */
#include "undname.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double child_cpu(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
    return 0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s NAMES.txt [ROUNDS]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 20;
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  size_t cap = 1 << 20, len = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
    len += got;
    if (len == cap) {
      char *n = realloc(buf, cap *= 2);
      if (!n)
        break;
      buf = n;
    }
  }
  fclose(f);
  if (!buf)
    return 1;
  size_t count = 0, ncap = 1024;
  const char **names = malloc(ncap * sizeof *names);
  size_t *lens = malloc(ncap * sizeof *lens);
  for (size_t i = 0; i < len && names && lens;) {
    size_t j = i;
    while (j < len && buf[j] != '\n')
      j++;
    if (j > i) {
      if (count == ncap) {
        ncap *= 2;
        names = realloc(names, ncap * sizeof *names);
        lens = realloc(lens, ncap * sizeof *lens);
        if (!names || !lens)
          return 1;
      }
      names[count] = buf + i;
      lens[count++] = j - i;
    }
    i = j + 1;
  }
  if (!count) {
    fprintf(stderr, "no names\n");
    return 1;
  }
  static char out[8192];
  size_t ok = 0;
  double t0 = now(CLOCK_PROCESS_CPUTIME_ID);
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < count; i++) {
      ok += undname_full(names[i], lens[i], out, sizeof out);
      ok += undname_short(names[i], lens[i], out, sizeof out);
    }
  double ours = (now(CLOCK_PROCESS_CPUTIME_ID) - t0) / ((double)count * rounds);
  printf("names: %zu, rounds: %d\n", count, rounds);
  printf("undname_full + undname_short: %.0f ns per name (CPU)\n", ours * 1e9);

  char cmd[4200];
  snprintf(cmd, sizeof cmd, "llvm-undname < '%s' > /dev/null 2>&1", argv[1]);
  double w0 = child_cpu();
  int rc = system(cmd);
  double theirs = (child_cpu() - w0) / (double)count;
  if (rc == -1 || (rc != 0 && rc != 256)) {
    printf("llvm-undname: not run\n");
  } else {
    printf("llvm-undname (full only, one process): %.0f ns per name (CPU)\n",
           theirs * 1e9);
    printf("ratio llvm-undname / ours: %.1f\n", theirs / ours);
  }
  free(names);
  free(lens);
  free(buf);
  return ok ? 0 : 1;
}
