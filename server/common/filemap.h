/*
 * filemap.h - read-only memory mapping of a whole file, with a size cap.
 * Ownership: filemap_close releases what filemap_open mapped.
 */
#ifndef PDBSYM_FILEMAP_H
#define PDBSYM_FILEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct {
  const uint8_t *data; /* NULL for an empty file */
  size_t len;
  void *map;           /* internal */
  size_t map_len;
} filemap;

/* max_bytes 0 means no cap.  On failure diag says why (PS_E_IO, PS_E_LIMIT). */
ps_err filemap_open(filemap *fm, const char *path, uint64_t max_bytes, ps_diag *diag);
void filemap_close(filemap *fm);
/* Drops the whole pages of [p, p+n) (inside the mapping) from this process's
 * memory (madvise MADV_DONTNEED): the bytes stay readable, read back from the
 * file (or the page cache) if touched again.  For pdb_options.release: a
 * parse's peak memory is then its tables, not the tables plus the file.
 * arg is the filemap. */
void filemap_release(void *arg, const uint8_t *p, size_t n);

#endif
