/*
 * replay_main.c - runs a libFuzzer target over every file of a seed corpus
 * folder (and over truncations of each), so ordinary test runs replay the
 * corpus under the sanitizers.  With PDBSYM_FUZZ=ON the targets link against
 * libFuzzer instead.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path, int *count) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 65536;
      uint8_t *n = realloc(buf, cap);
      if (!n) {
        free(buf);
        fclose(f);
        return -1;
      }
      buf = n;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    if (!got)
      break;
    len += got;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, len);
  (*count)++;
  /* a few truncations of every seed: the commonest hostile input */
  size_t cuts[] = {len / 2, len / 3, len > 17 ? len - 17 : 0};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    uint8_t *c = malloc(cuts[i] ? cuts[i] : 1);
    if (!c)
      break;
    memcpy(c, buf, cuts[i]);
    LLVMFuzzerTestOneInput(c, cuts[i]);
    free(c);
    (*count)++;
  }
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int count = 0;
  for (int a = 1; a < argc; a++) {
    struct stat stt;
    if (stat(argv[a], &stt) != 0) {
      fprintf(stderr, "replay: %s: no such corpus\n", argv[a]);
      return 1;
    }
    if (S_ISREG(stt.st_mode)) {
      run_file(argv[a], &count);
      continue;
    }
    DIR *d = opendir(argv[a]);
    if (!d)
      return 1;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.')
        continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
      run_file(path, &count);
    }
    closedir(d);
  }
  printf("replayed %d inputs\n", count);
  return 0;
}
