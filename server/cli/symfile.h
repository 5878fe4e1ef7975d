/*
 * symfile.h - reading a symbol file from disk for the CLI (`lookup`, `dump`,
 * `warm`): the file mapped as it is, or inflated when its name ends in ".gz"
 * (gzip, RFC 1952), as the repository's native fixtures are stored.
 *
 * Ownership: symfile_close releases the map and any inflated copy.
 */
#ifndef PDBSYM_SYMFILE_H
#define PDBSYM_SYMFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "filemap.h"
#include "symtab.h"

typedef struct {
  const uint8_t *data; /* the bytes to parse: the map, or the inflated copy */
  size_t len;
  filemap fm;
  uint8_t *inflated; /* malloc'd, or NULL */
} symfile;

/* true when path names a gzip'ed file (it ends in ".gz"), which
 * symfile_open inflates. */
bool symfile_gzipped(const char *path);

/* max_bytes caps the file and the inflated size (0: no cap on the file,
 * 4 GiB inflated).  On failure diag says why (PS_E_IO, PS_E_LIMIT,
 * PS_E_CORRUPT for a broken gzip stream) and nothing is left open. */
ps_err symfile_open(symfile *f, const char *path, uint64_t max_bytes, ps_diag *diag);
void symfile_close(symfile *f);

/* pdb_options.release for f's bytes: a mapped file's pages are dropped once
 * read; an inflated copy is kept (*fn NULL). */
void symfile_release_hook(symfile *f, void (**fn)(void *, const uint8_t *, size_t), void **arg);

/* The whole symbol table of the open file fm (and the open image im, or
 * NULL): loader_read, or for a Windows PDB without an image pdb_read_with
 * with the release hook, so the parse's peak memory is its tables.  st is
 * st_init'ed here; on success finished, else the caller st_free's it. */
ps_err symfile_read(symfile *fm, const symfile *im, ps_budget *budget, symtab *st,
                    ps_diag *diag);

/* `pdbsym lookup` and `dump`: the symbol table of file (a Windows PDB, a
 * Portable PDB or a PE with an embedded Portable PDB, NAME.gz inflated),
 * finished, into st (the caller st_free's it); image, if not NULL, is the
 * module's PE image for full .NET method names.  Each file at most 4 GiB.
 * Returns 0, or 2 after one line on stderr saying which file and why (st is
 * then freed). */
int symfile_load(const char *file, const char *image, symtab *st);
/* The same, silent: on failure (2) why holds the one line symfile_load
 * would print (without its "pdbsym: "). */
int symfile_load_why(const char *file, const char *image, symtab *st, char *why, size_t cap);

#endif
