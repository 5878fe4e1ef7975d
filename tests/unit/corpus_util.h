/*
 * corpus_util.h - helpers shared by the Portable PDB / PE corpus tests:
 * locating ../shared/corpus, reading whole files (gzip or not), MANIFEST rows,
 * and GUID formatting.  Test code only.
 */
#ifndef PDBSYM_CORPUS_UTIL_H
#define PDBSYM_CORPUS_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* corpus root into buf, or false (the caller skips with exit 77) */
static inline bool cu_corpus_dir(char *buf, size_t cap) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  snprintf(buf, cap, "%s/../shared/corpus", src ? src : ".");
  struct stat st;
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
}

/* whole file (transparently gunzipped when it ends in .gz); caller frees */
static inline uint8_t *cu_read(const char *path, size_t *len) {
  gzFile f = gzopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap + 1);
  for (;;) {
    if (n == cap) {
      cap *= 2;
      uint8_t *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        gzclose(f);
        return NULL;
      }
      buf = nb;
    }
    int got = gzread(f, buf + n, (unsigned)(cap - n));
    if (got <= 0)
      break;
    n += (size_t)got;
  }
  gzclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}

static inline bool cu_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* "ABCD..." upper-case GUID text (8-4-4-4-12) from on-disk bytes */
static inline void cu_guid_str(const uint8_t g[16], char out[37]) {
  snprintf(out, 37, "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X",
           g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12],
           g[13], g[14], g[15]);
}

/* MANIFEST.tsv rows: calls fn(cols, ncols, ctx) for each data row */
typedef void (*cu_row_fn)(char **cols, int ncols, void *ctx);
static inline bool cu_manifest(const char *corpus, cu_row_fn fn, void *ctx) {
  char path[4096];
  snprintf(path, sizeof path, "%s/MANIFEST.tsv", corpus);
  size_t len;
  char *text = (char *)cu_read(path, &len);
  if (!text)
    return false;
  char *save = NULL;
  bool header = true;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (header) {
      header = false;
      continue;
    }
    char *cols[32];
    int n = 0;
    char *p = line;
    while (n < 32) {
      cols[n++] = p;
      char *tab = strchr(p, '\t');
      if (!tab)
        break;
      *tab = 0;
      p = tab + 1;
    }
    for (int i = n; i < 32; i++)
      cols[i] = "";
    fn(cols, n, ctx);
  }
  free(text);
  return true;
}

#endif
