/*
 * machine_paths.h - does a fixture hold a path of the machine that built it?
 *
 * The folders looked for are taken from the machine running the test, not
 * written here: the top folder of the repository's checkout, of $HOME and of
 * the temporary folder, plus the usual Unix homes and system prefix, each as
 * "/name/" in UTF-8 and in UTF-16LE (PDBs keep some paths as UTF-16).
 * Callers may add their own needles (e.g. Wine's "Z:\").
 */
#ifndef PDBSYM_TEST_MACHINE_PATHS_H
#define PDBSYM_TEST_MACHINE_PATHS_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MP_MAX 12
#define MP_LEN 64

typedef struct {
  char v[MP_MAX][MP_LEN];
  int n;
} mp_needles;

/* "/x/..." -> "/x/"; ignored when path is not absolute or is just "/" */
static inline void mp_add_top(mp_needles *nd, const char *path) {
  if (!path || path[0] != '/' || nd->n >= MP_MAX)
    return;
  const char *end = strchr(path + 1, '/');
  size_t len = end ? (size_t)(end - path) : strlen(path);
  if (len < 2 || len + 2 > MP_LEN)
    return;
  char buf[MP_LEN];
  memcpy(buf, path, len);
  buf[len] = '/';
  buf[len + 1] = '\0';
  for (int i = 0; i < nd->n; i++)
    if (!strcmp(nd->v[i], buf))
      return;
  memcpy(nd->v[nd->n++], buf, len + 2);
}

static inline void mp_add(mp_needles *nd, const char *s) {
  if (nd->n < MP_MAX && strlen(s) < MP_LEN)
    strcpy(nd->v[nd->n++], s);
}

static inline void mp_init(mp_needles *nd) {
  nd->n = 0;
  char real[PATH_MAX];
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  if (realpath(src ? src : ".", real))
    mp_add_top(nd, real);
  mp_add_top(nd, getenv("HOME"));
  const char *tmp = getenv("TMPDIR");
  mp_add_top(nd, tmp && *tmp ? tmp : P_tmpdir);
  mp_add_top(nd, "/home");
  mp_add_top(nd, "/usr");
}

static inline int mp_contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m) {
  for (size_t i = 0; m && i + m <= n; i++)
    if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0)
      return 1;
  return 0;
}

/* The first needle found in data (UTF-8 or UTF-16LE), or NULL. */
static inline const char *mp_find(const mp_needles *nd, const uint8_t *data, size_t n) {
  for (int i = 0; i < nd->n; i++) {
    const char *s = nd->v[i];
    size_t m = strlen(s);
    uint8_t wide[2 * MP_LEN];
    for (size_t k = 0; k < m; k++) {
      wide[2 * k] = (uint8_t)s[k];
      wide[2 * k + 1] = 0;
    }
    if (mp_contains(data, n, (const uint8_t *)s, m) || mp_contains(data, n, wide, 2 * m))
      return s;
  }
  return NULL;
}

#endif
