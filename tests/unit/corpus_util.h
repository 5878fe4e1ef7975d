/*
 * corpus_util.h - helpers shared by the Portable PDB / PE corpus tests:
 * locating ../shared/corpus, reading whole files (gzip or not: the one reader
 * every unit test uses), MANIFEST rows, and GUID formatting.  Test code only.
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

/* The tests' one whole-file reader: path's bytes in a malloc'd buffer (the
 * caller frees it) with a NUL after the last one, so text reads as a string;
 * *len gets the size.  gunzip: a gzip'ed file comes back inflated (zlib reads
 * any other file as it is; a read error ends the data early); else the bytes
 * exactly as stored.  NULL when the file cannot be opened or read. */
static inline uint8_t *cu_read_file(const char *path, size_t *len, bool gunzip) {
  gzFile gz = gunzip ? gzopen(path, "rb") : NULL;
  FILE *f = gunzip ? NULL : fopen(path, "rb");
  if (!gz && !f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap + 1);
  bool bad = false;
  while (buf) {
    if (n == cap) {
      cap *= 2;
      uint8_t *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
    }
    size_t got;
    if (gz) {
      int r = gzread(gz, buf + n, (unsigned)(cap - n));
      got = r > 0 ? (size_t)r : 0;
    } else {
      got = fread(buf + n, 1, cap - n, f);
      bad = got == 0 && ferror(f);
    }
    if (got == 0)
      break;
    n += got;
  }
  if (gz)
    gzclose(gz);
  else
    fclose(f);
  if (!buf || bad) {
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

/* whole file, transparently gunzipped when it is gzip'ed; caller frees */
static inline uint8_t *cu_read(const char *path, size_t *len) { return cu_read_file(path, len, true); }

/* whole file, the bytes as stored (no gunzip); caller frees */
static inline uint8_t *cu_read_raw(const char *path, size_t *len) {
  return cu_read_file(path, len, false);
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
