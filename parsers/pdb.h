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
 *    managed hidden sequence points (docs/contract.md).
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
 *    IL offset being the line's offset from the method's start.  The
 *    "asyncMethodInfo" S_OEM record of a MoveNext gives its kickoff method,
 *    Roslyn's "forward iterator" record an iterator's (paired by module name);
 *    module names ("Ns.Type.<M>d__3") tell generated code's user method.
 *  - Source Link: the "sourcelink" and "sourcelink$N" streams, and srcsrv
 *    ("srcsrv" stream) as exact rules, into st->source_link (sourcelink.h).
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

/* Knobs of the reader; a NULL pdb_options means all defaults. */
typedef struct {
  /* Called for the file bytes of each stream once read (a module stream, the
   * symbol records), one call per run of consecutive blocks, so a caller that
   * maps the file can drop those pages (madvise MADV_DONTNEED) and a parse's
   * peak memory is the tables, not the tables plus the file.  The reader never
   * touches those bytes again; NULL for none. */
  void (*release)(void *arg, const uint8_t *p, size_t n);
  void *release_arg;
  /* Lazy reading (pdb_open): the table is built from all modules once the
   * asked addresses need module streams of more than lazy_max_percent of all
   * module stream bytes (default 25) and more than 4 MiB, or after
   * lazy_max_builds rebuilds of the partial table (default 8).  0 means the
   * default. */
  unsigned lazy_max_percent;
  unsigned lazy_max_builds;
} pdb_options;

/* pdb_read with options. */
ps_err pdb_read_with(const uint8_t *data, size_t len, ps_budget *budget, const pdb_options *opts,
                     symtab *st, ps_diag *diag);

/*
 * Lazy reading: one address costs one address.
 *
 * pdb_open reads a light index: the MSF directory, the PDB info stream, the
 * DBI module list and section contributions (no module stream, no publics).
 * pdb_module_table then parses, on demand, only the module streams that can
 * affect the answers for the asked RVAs (and the publics when an address has
 * no procedure), into a table on which st_lookup_rva answers exactly what it
 * answers on pdb_read's table, as LLVM's NativeSession and Wine's dbghelp
 * read a module's symbols only when an address falls in it.
 *
 * Which modules: the section contributions cut the address space into
 * territories, each running from a contribution's start to the next one's
 * and belonging to the contribution's module.  Every record a module adds
 * (procedure, thunk, line, inline range) lies in that module's territories;
 * so for an address inside a procedure, the module owning the address holds
 * the procedure, its inline sites and the covering line; for an address with
 * no procedure, st_lookup_rva's fallback looks at the nearest public at or
 * before the address and at any procedure starting between the two, held by
 * the owners of the territories in between.  The records of every module
 * read are checked against that rule; if one lies outside its module's
 * territories, or the file has OMAP (relinked images), no section
 * contributions, or the asked addresses need too much of the file (see
 * pdb_options), the table is built from every module and the publics, as
 * pdb_read builds it.
 *
 * The table answers RVAs only (managed token lookups need every module: use
 * pdb_read), and is valid until the next pdb_module_table / pdb_lookup_lazy
 * call or pdb_close (a new address may rebuild it: answers borrow its
 * strings).  A module stream that no asked address needs is not read, so a
 * corrupt one goes unnoticed, where pdb_read would refuse the file.
 *
 * Ownership: the index borrows data (which must outlive it) and budget;
 * pdb_close frees everything else.
 */
typedef struct pdb_lazy pdb_lazy;

ps_err pdb_open(const uint8_t *data, size_t len, ps_budget *budget, const pdb_options *opts,
                pdb_lazy **out, ps_diag *diag);
void pdb_close(pdb_lazy *z);
/* The file's identity (what pdb_read puts in st->ident, but `managed`). */
const st_ident *pdb_lazy_ident(const pdb_lazy *z);
/* Makes the table answer rvas[0..n) as pdb_read's table does, and gives it
 * (borrowed). */
ps_err pdb_module_table(pdb_lazy *z, const uint32_t *rvas, size_t n, const symtab **out,
                        ps_diag *diag);
/* pdb_module_table for one RVA, then st_lookup_rva on the table. */
ps_err pdb_lookup_lazy(pdb_lazy *z, uint32_t rva, st_answer *out, ps_diag *diag);

typedef struct {
  size_t modules;       /* modules in the DBI */
  size_t modules_read;  /* module streams in the current table */
  size_t publics;       /* publics in the current table */
  unsigned builds;      /* tables built since pdb_open (or pdb_lazy_forget) */
  const char *full;     /* NULL while lazy, else why every module was read */
} pdb_lazy_info;
void pdb_lazy_stats(const pdb_lazy *z, pdb_lazy_info *out);
/* Reads every module that owns section contributions and checks its records
 * against the territory rule above (what the lazy table relies on, checked
 * otherwise only for the modules an address needs); *bad gets how many
 * modules break it and *first the first one's first record.  For tests and
 * diagnostics: the table is left as it was. */
typedef struct {
  size_t module;           /* index in the DBI module list */
  const char *module_name; /* borrowed from the index */
  const char *kind;        /* "function", "thunk", "line", "inline range" */
  uint32_t rva, size;
  size_t owner;            /* the module whose territory holds rva */
} pdb_lazy_audit;
ps_err pdb_lazy_check(pdb_lazy *z, size_t *bad, pdb_lazy_audit *first, ps_diag *diag);
/* Forgets which addresses were asked, so the next call builds the table the
 * new addresses alone need (for tests and benchmarks of the lazy path; a
 * table read whole for a property of the file stays whole). */
void pdb_lazy_forget(pdb_lazy *z);

#endif
