/*
 * metadata.h - ECMA-335 metadata (Partition II, sections 22-24): the root
 * ("BSJB"), stream headers, the compressed "#~" table stream with its row
 * counts and index sizes, the #Strings, #Blob and #GUID heaps, coded indexes,
 * and the #Pdb stream of a Portable PDB (Portable PDB format v1.0, which adds
 * tables 0x30-0x37 and carries the type-system row counts that size indexes).
 *
 * Shared by the Portable PDB reader (ppdb.c) and the PE reader (pe.c).  The
 * md_meta borrows the caller's bytes and allocates nothing.  Every accessor is
 * bounds-checked: a row or column outside the table reads as 0, a heap index
 * outside its heap fails.  Edit-and-Continue deltas (uncompressed "#-" table
 * streams, "#JTD", an EncMap table) are refused with PS_E_UNSUPPORTED.
 */
#ifndef PDBSYM_METADATA_H
#define PDBSYM_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"

/* Table numbers (ECMA-335 II.22, Portable PDB spec "Metadata tables"). */
enum {
  MD_MODULE = 0x00, MD_TYPEREF = 0x01, MD_TYPEDEF = 0x02, MD_FIELD = 0x04,
  MD_METHODDEF = 0x06, MD_PARAM = 0x08, MD_MEMBERREF = 0x0A, MD_CUSTOMATTRIBUTE = 0x0C,
  MD_ENCLOG = 0x1E, MD_ENCMAP = 0x1F,
  MD_NESTEDCLASS = 0x29,
  MD_DOCUMENT = 0x30, MD_METHODDEBUGINFO = 0x31, MD_LOCALSCOPE = 0x32,
  MD_LOCALVARIABLE = 0x33, MD_LOCALCONSTANT = 0x34, MD_IMPORTSCOPE = 0x35,
  MD_STATEMACHINEMETHOD = 0x36, MD_CUSTOMDEBUGINFO = 0x37,
  MD_NTABLES = 0x38
};

#define MD_MAX_COLS 9

typedef struct {
  uint32_t rows;       /* rows present in this metadata's table stream */
  uint32_t row_size;   /* bytes per row */
  size_t offset;       /* offset of row 1 from the metadata root */
  uint8_t ncols;
  uint8_t col_off[MD_MAX_COLS];
  uint8_t col_size[MD_MAX_COLS]; /* 1, 2 or 4 */
} md_table;

typedef struct {
  const uint8_t *base; /* borrowed: the metadata root */
  size_t len;
  size_t origin;       /* offset of base within the outermost input (diagnostics) */
  const uint8_t *strings; size_t strings_len;
  const uint8_t *blob;    size_t blob_len;
  const uint8_t *guid;    size_t guid_len;
  bool has_tables;
  bool has_pdb;        /* a #Pdb stream is present */
  uint8_t pdb_id[20];  /* #Pdb: GUID (16) + stamp (4) */
  uint32_t entry_point;/* #Pdb: entry point MethodDef token, 0 if none */
  uint32_t size_rows[64]; /* row counts used to size indexes (incl. #Pdb's external counts) */
  md_table tables[MD_NTABLES];
} md_meta;

/* true when data starts with "BSJB" */
bool md_is_metadata(const uint8_t *data, size_t len);

/* Opens the metadata root at data (borrowed; must outlive m).  origin is the
 * offset of data in the outermost input, used in diagnostics. */
ps_err md_open(md_meta *m, const uint8_t *data, size_t len, size_t origin, ps_diag *diag);

static inline uint32_t md_rows(const md_meta *m, unsigned table) {
  return table < MD_NTABLES ? m->tables[table].rows : 0;
}
/* Offset of a row in the outermost input (for diagnostics); (size_t)-1 if absent. */
size_t md_row_offset(const md_meta *m, unsigned table, uint32_t row);
/* Offset of a #Blob entry's bytes in the outermost input (for diagnostics). */
static inline size_t md_ptr_offset(const md_meta *m, const uint8_t *p) {
  return m->origin + (size_t)(p - m->base);
}
/* Column col (0-based) of row (1-based) of table; 0 when out of range. */
uint32_t md_get(const md_meta *m, unsigned table, uint32_t row, unsigned col);

/* #Strings entry at idx: borrowed, NUL-terminated within the heap; NULL if idx
 * is out of the heap or no NUL follows within MD_MAX_STRING bytes (real
 * identifiers stay under 1024).  *len may be NULL. */
#define MD_MAX_STRING 4096
const char *md_string(const md_meta *m, uint32_t idx, size_t *len);
/* #Blob entry at idx (compressed length prefix); false if out of the heap.
 * idx 0 is the empty blob. */
bool md_blob(const md_meta *m, uint32_t idx, const uint8_t **p, size_t *len);
/* #GUID entry idx (1-based); false (and zeros) for 0 or out of range. */
bool md_guid(const md_meta *m, uint32_t idx, uint8_t out[16]);

/* ECMA-335 II.23.2 compressed unsigned / signed integers from a reader;
 * a malformed prefix fails the reader with PS_E_CORRUPT. */
uint32_t md_read_cu32(ps_reader *r, const char *what);
int32_t md_read_ci32(ps_reader *r, const char *what);

#endif
