/*
 * pdb.h - Windows PDB (MSF 7.00) reader: native and managed.
 *
 * pdb_read parses the whole file into st (which the caller has st_init'ed),
 * must st_finish afterwards... see below) and fills st->ident (GUID, DBI age,
 * info-stream age, machine).  Native procedures, thunks, C13/C11 lines,
 * inline sites with their line annotations, publics (undecorated, with the
 * decorated form kept), and managed S_GMANPROC/S_LMANPROC methods with their
 * sequence points (C13 lines in IL offsets) all land in st.
 *
 * On success st is finished (st_finish called).  On failure the error code is
 * returned, diag says what and where, and st holds whatever was read (the
 * caller frees it with st_free).
 */
#ifndef PDBSYM_PDB_H
#define PDBSYM_PDB_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"
#include "symtab.h"

/* true when data starts with the MSF 7.00 magic */
bool pdb_is_msf(const uint8_t *data, size_t len);

ps_err pdb_read(const uint8_t *data, size_t len, ps_budget *budget, symtab *st, ps_diag *diag);

#endif
