/*
 * loader.h - one entry point for every symbol file pdbsym reads: it sniffs
 * the format and calls the right reader.
 *
 *   "Microsoft C/C++ MSF 7.00"             -> pdb_read (Windows PDB)
 *   "Microsoft C/C++ program database 2.00" -> PS_E_UNSUPPORTED
 *   "BSJB"                                  -> ppdb_read (Portable PDB)
 *   "MZ" + PE header                        -> the embedded Portable PDB, with
 *                                              method names from the same image
 *
 * An optional image (the module's PE) adds full .NET method names.
 */
#ifndef PDBSYM_LOADER_H
#define PDBSYM_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"
#include "symtab.h"

typedef enum {
  LOAD_UNKNOWN = 0,
  LOAD_MSF,
  LOAD_MSF_OLD,
  LOAD_PORTABLE,
  LOAD_PE,
} load_kind;

load_kind loader_sniff(const uint8_t *data, size_t len);
const char *loader_kind_name(load_kind k);

/* Max inflated size of an embedded Portable PDB. */
#define LOADER_MAX_EMBEDDED ((size_t)512 << 20)

/* Reads data into st (st_init'ed by the caller; st_free'd by the caller in
 * every case).  image may be NULL.  On success st is finished. */
ps_err loader_read(const uint8_t *data, size_t len, const uint8_t *image, size_t image_len,
                   ps_budget *budget, symtab *st, ps_diag *diag);

#endif
