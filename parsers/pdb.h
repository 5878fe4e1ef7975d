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
 *
 * Conventions (checked against llvm-symbolizer, Breakpad .sym files and DIA):
 *  - RVAs are image RVAs: section:offset through the section headers, and
 *    through OMAP when the image was relinked (image blocks are mapped back
 *    onto source ranges through OMAP to-src, as DIA does).
 *  - Where code was folded, the procedure and lines of the module that owns
 *    the section contribution are kept (as LLVM and DIA pick them).
 *  - A C13 line covers up to the next entry (the last one up to the end of
 *    its subsection); of several entries at one address the last wins, as in
 *    DIA; code before a subsection's first entry takes that entry's line, as
 *    LLVM reads it.
 *  - Special lines stay in the table as entries of their own, covering their
 *    bytes, and lookups flag them `hidden` (symtab.h):
 *    0xFEEFEE (16707566, "always step into": compiler-generated code the
 *    debugger steps through) gets the line of the nearest visible entry at a
 *    lower address in the same function, else at a higher one: the rule of
 *    managed hidden sequence points (CONTRACT.md).
 *    0xF00F00 (15732480, "never step into": code a debugger steps over as a
 *    whole) gets no line.  LLVM 19 (llvm-symbolizer, llvm-pdbutil "NSI") and
 *    DIA both keep it an entry of its own and report the number itself as
 *    the line: DIA's findLinesByAddr returns it as it returns any entry
 *    (Breakpad's DIA-based dump_syms writes "2d56 5 15732480" into symbolic's
 *    crash.sym), and DIA documents no line for it to stand for.  So the bytes
 *    are not the line before (only Mozilla's dump_syms folds them into it),
 *    and 15732480 is no source line either (no file has 15 million lines):
 *    the answer keeps the function and flags the bytes hidden, with no line,
 *    as it would never report 16707566.
 *  - Inline sites: ranges and lines from the binary annotations (a range
 *    opens at each code-offset change with the line current then;
 *    ChangeCodeLength moves the code offset, ChangeCodeLengthAndCodeOffset
 *    does not); inlinee names from the IPI stream ("Class::name" for
 *    LF_MFUNC_ID), cross-module ids resolved through the modules' cross-scope
 *    imports and exports.
 *  - Publics: code publics only, the ones flagged CVPSF_CODE/CVPSF_FUNCTION
 *    and the unflagged ones (MASM labels) in an executable section of the
 *    image; each may name the bytes up to the end of its image section (the
 *    section headers stream) and, through st_finish, up to the next public
 *    or procedure (Breakpad's processor stops at the next FUNC too;
 *    llvm-symbolizer 19 stops at nothing, naming 0x7fffffff with the last
 *    public at or before it).  Named by undname_public (DbgHelp's
 *    SYMOPT_UNDNAME spelling: on x86 "_foo", "_foo@8", "@foo@8" -> "foo"),
 *    decorated form kept.  Code that has lines but no procedure (assembly)
 *    gets its name from the public and its file and line from the lines.
 *  - Managed: S_GMANPROC/S_LMANPROC give the method (token, short name); C13
 *    (or C11) lines inside the method's range are its sequence points, the
 *    IL offset being the line's offset from the method's start.
 *  - C11 (VS2003) lines are read only for modules without C13 lines.
 * Unsupported: PDB 2.00 (VC6), the pre-VC4.1 DBI layout, PDB info versions
 * before VC70 (PS_E_UNSUPPORTED with a diagnostic).
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
