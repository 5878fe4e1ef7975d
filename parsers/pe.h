/*
 * pe.h - PE/COFF images: identity, debug directory, embedded Portable PDBs,
 * and .NET method names from the assembly's metadata.
 */
#ifndef PDBSYM_PE_H
#define PDBSYM_PE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"
#include "symtab.h"

#define PE_MAX_CODEVIEW 8

typedef struct {
  uint8_t guid[16];   /* on-disk GUID layout */
  uint32_t age;
  bool portable;      /* the entry's MinorVersion is 0x504D ("PM"): a Portable PDB */
  uint32_t stamp;     /* the entry's TimeDateStamp (Portable PDB id stamp) */
  char path[261];     /* PDB path as recorded, NUL-terminated, truncated if longer */
} pe_codeview;

typedef struct {
  uint16_t machine;
  bool pe32plus;
  uint32_t timestamp;      /* COFF TimeDateStamp */
  uint32_t size_of_image;
  bool is_dotnet;          /* has a CLI header */
  int ncodeview;
  pe_codeview codeview[PE_MAX_CODEVIEW];
  bool has_embedded_pdb;   /* debug directory entry type 17 */
  bool has_pdb_checksum;   /* debug directory entry type 19 */
  char checksum_alg[32];   /* its algorithm name ("SHA256"), NUL-terminated, cut if longer */
  uint8_t checksum[64];    /* its checksum of the PDB (the first 64 bytes) */
  uint32_t checksum_len;
} pe_info;

bool pe_is_image(const uint8_t *data, size_t len); /* "MZ" + a PE header */

/* The layout of an image, for readers of its other parts (r2r.h): the
 * section table and the data directories.  Borrows data. */
#define PE_MAX_SECTIONS 96 /* the loader's own limit */
typedef struct {
  uint32_t va, vsize, raw_size, raw_ptr;
} pe_section;
typedef struct {
  const uint8_t *data;
  size_t len;
  uint16_t machine;
  bool pe32plus;
  uint32_t timestamp, size_of_image, size_of_headers;
  uint32_t dir_rva[16], dir_size[16];
  unsigned ndirs;
  unsigned nsections;
  pe_section sec[PE_MAX_SECTIONS];
} pe_layout;
ps_err pe_layout_open(pe_layout *l, const uint8_t *data, size_t len, ps_diag *diag);
/* the file offset of [rva, rva + n), when it lies in one section's file bytes */
bool pe_layout_rva(const pe_layout *l, uint32_t rva, size_t n, size_t *off);
/* the file bytes [*off, *off + *len) of the section holding rva (cut at the
 * end of the file); false when no section's file bytes hold it */
bool pe_layout_section(const pe_layout *l, uint32_t rva, size_t *off, size_t *len);

ps_err pe_parse(const uint8_t *data, size_t len, pe_info *out, ps_diag *diag);

/* Inflates the embedded Portable PDB (MPDB + deflate) into a new buffer the
 * caller frees (free(), then ps_budget_release(budget, *out_len)).  The
 * inflated size is capped by max_size and by PE_MAX_INFLATE_RATIO times the
 * compressed size, and taken from budget (may be NULL) before it is
 * allocated.  PS_E_NOT_FOUND when the image has none. */
#define PE_MAX_INFLATE_RATIO 64 /* corpus: 1.4x to 1.7x */
ps_err pe_embedded_pdb(const uint8_t *data, size_t len, size_t max_size, ps_budget *budget,
                       uint8_t **out, size_t *out_len, ps_diag *diag);

/* Sets the full name (Namespace.Type+Nested.Method) of every method of the
 * assembly's MethodDef table in st (replacing the name of a method st holds,
 * adding the others), what compiler-generated code each one is and the
 * user's method it comes from (st_set_method_user, clrnames.h), and the
 * kickoff method of every state machine's MoveNext the PDB names none for
 * (from the StateMachineAttribute on the kickoff method); before st_finish
 * or after (it keeps st finished if it was).  PS_E_NOT_FOUND when the image
 * has no CLI metadata. */
ps_err pe_method_names(const uint8_t *data, size_t len, ps_budget *budget, symtab *st,
                       ps_diag *diag);

#endif
