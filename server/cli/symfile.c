/*
 * symfile.c - a symbol file from disk, gzip'ed or not (see symfile.h).
 */
#include "symfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "loader.h"
#include "pdb.h"

#define SYMFILE_MAX_INFLATED ((uint64_t)4 << 30)
#define SYMFILE_MAX_FILE ((uint64_t)4 << 30) /* symfile_load: each file */

bool symfile_gzipped(const char *path) {
  size_t n = strlen(path);
  return n > 3 && !strcmp(path + n - 3, ".gz");
}

ps_err symfile_open(symfile *f, const char *path, uint64_t max_bytes, ps_diag *diag) {
  memset(f, 0, sizeof *f);
  ps_err rc = filemap_open(&f->fm, path, max_bytes, diag);
  if (rc != PS_E_OK)
    return rc;
  f->data = f->fm.data;
  f->len = f->fm.len;
  if (!symfile_gzipped(path))
    return PS_E_OK;
  uint64_t cap_total = max_bytes ? max_bytes : SYMFILE_MAX_INFLATED;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    filemap_close(&f->fm);
    return ps_diag_set(diag, PS_E_NOMEM, "gzip", 0, "cannot start inflating");
  }
  size_t cap = f->fm.len < ((size_t)1 << 26) ? f->fm.len * 8 + 4096 : f->fm.len, n = 0;
  uint8_t *buf = malloc(cap);
  z.next_in = (Bytef *)(uintptr_t)f->fm.data;
  size_t in_left = f->fm.len;
  int zr = Z_OK;
  bool too_big = false;
  while (buf && zr == Z_OK) {
    if (n == cap) {
      if ((uint64_t)cap >= cap_total) {
        too_big = true;
        break;
      }
      uint64_t want = (uint64_t)cap * 2 < cap_total ? (uint64_t)cap * 2 : cap_total;
      uint8_t *bigger = realloc(buf, (size_t)want);
      if (!bigger)
        break;
      buf = bigger;
      cap = (size_t)want;
    }
    if (z.avail_in == 0 && in_left) {
      z.avail_in = (uInt)(in_left > UINT32_MAX ? UINT32_MAX : in_left);
      in_left -= z.avail_in;
    }
    size_t room = cap - n;
    z.next_out = buf + n;
    z.avail_out = (uInt)(room > UINT32_MAX ? UINT32_MAX : room);
    uInt before = z.avail_out;
    zr = inflate(&z, Z_NO_FLUSH);
    n += before - z.avail_out;
    if (zr == Z_BUF_ERROR && z.avail_out > 0)
      break; /* truncated input */
    if (zr == Z_BUF_ERROR)
      zr = Z_OK;
  }
  inflateEnd(&z);
  if (!buf || zr != Z_STREAM_END) {
    free(buf);
    filemap_close(&f->fm);
    if (too_big)
      return ps_diag_set(diag, PS_E_LIMIT, "gzip", 0, "inflates to more than %llu bytes",
                         (unsigned long long)cap_total);
    if (!buf)
      return ps_diag_set(diag, PS_E_NOMEM, "gzip", 0, "out of memory");
    return ps_diag_set(diag, PS_E_CORRUPT, "gzip", 0, "not a complete gzip file");
  }
  f->inflated = buf;
  f->data = buf;
  f->len = n;
  return PS_E_OK;
}

void symfile_close(symfile *f) {
  free(f->inflated);
  f->inflated = NULL;
  filemap_close(&f->fm);
  f->data = NULL;
  f->len = 0;
}

void symfile_release_hook(symfile *f, void (**fn)(void *, const uint8_t *, size_t), void **arg) {
  *fn = f->inflated ? NULL : filemap_release;
  *arg = f->inflated ? NULL : &f->fm;
}

ps_err symfile_read(symfile *fm, const symfile *im, ps_budget *budget, symtab *st,
                    ps_diag *diag) {
  st_init(st, budget);
  if (!im && loader_sniff(fm->data, fm->len) == LOAD_MSF) {
    pdb_options o = {0};
    symfile_release_hook(fm, &o.release, &o.release_arg);
    return pdb_read_with(fm->data, fm->len, budget, &o, st, diag);
  }
  return loader_read(fm->data, fm->len, im ? im->data : NULL, im ? im->len : 0, budget, st,
                     diag);
}

int symfile_load_why(const char *file, const char *image, symtab *st, char *why, size_t cap) {
  symfile fm, im;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  if (symfile_open(&fm, file, SYMFILE_MAX_FILE, &d) != PS_E_OK) {
    snprintf(why, cap, "cannot read %s: %s", file, ps_diag_format(&d, msg, sizeof msg));
    return 2;
  }
  memset(&im, 0, sizeof im);
  if (image && symfile_open(&im, image, SYMFILE_MAX_FILE, &d) != PS_E_OK) {
    snprintf(why, cap, "cannot read image %s: %s", image, ps_diag_format(&d, msg, sizeof msg));
    symfile_close(&fm);
    return 2;
  }
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  ps_err rc = symfile_read(&fm, image ? &im : NULL, &budget, st, &d);
  st->budget = NULL; /* the budget lives on this stack frame only */
  symfile_close(&fm);
  if (image)
    symfile_close(&im);
  if (rc != PS_E_OK) {
    snprintf(why, cap, "cannot read %s: %s", file, ps_diag_format(&d, msg, sizeof msg));
    st_free(st);
    return 2;
  }
  return 0;
}

int symfile_load(const char *file, const char *image, symtab *st) {
  char why[1024];
  int rc = symfile_load_why(file, image, st, why, sizeof why);
  if (rc)
    fprintf(stderr, "pdbsym: %s\n", why);
  return rc;
}
