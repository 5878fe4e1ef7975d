/*
 * ppdb.h - Portable PDB reader (ECMA-335 metadata with a #Pdb stream).
 *
 * ppdb_read fills st with the methods' sequence points (documents as file
 * names), state-machine kickoff methods, and the Source Link JSON, sets
 * st->ident (format portable, GUID, stamp) and finishes st.  Method names are
 * not in a Portable PDB: pe_method_names (pe.h) adds them from the assembly.
 * On failure returns the code with diag filled; the caller st_free's st.
 */
#ifndef PDBSYM_PPDB_H
#define PDBSYM_PPDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"
#include "symtab.h"

/* true when data starts with the ECMA-335 metadata signature "BSJB" */
bool ppdb_is_metadata(const uint8_t *data, size_t len);

/* The #Pdb stream's identity and table sizes, without reading the tables. */
typedef struct {
  uint8_t guid[16];           /* on-disk GUID layout */
  uint32_t stamp;
  uint32_t entry_point;       /* MethodDef token, 0 if none */
  uint32_t documents;         /* Document rows */
  uint32_t method_debug_rows; /* MethodDebugInformation rows */
} ppdb_info;

ps_err ppdb_identify(const uint8_t *data, size_t len, ppdb_info *out, ps_diag *diag);

/* One Document row: the name joined from its parts (cut at 8 KiB), the hash
 * algorithm and language GUIDs (zeros when nil) and the hash bytes.  name and
 * hash are borrowed and valid during the callback only. */
typedef struct {
  uint32_t row;
  const char *name;
  uint8_t hash_alg[16];
  uint8_t language[16];
  const uint8_t *hash;
  size_t hash_len;
} ppdb_document;
typedef void (*ppdb_document_fn)(const ppdb_document *doc, void *ctx);

/* Calls fn for every Document row, in row order. */
ps_err ppdb_documents(const uint8_t *data, size_t len, ppdb_document_fn fn, void *ctx,
                      ps_diag *diag);

/* "SHA1", "SHA256", "C#", "VB", "F#" for the spec's hash-algorithm and
 * language GUIDs (on-disk layout); NULL for any other. */
const char *ppdb_guid_name(const uint8_t guid[16]);

ps_err ppdb_read(const uint8_t *data, size_t len, ps_budget *budget, symtab *st, ps_diag *diag);

#endif
