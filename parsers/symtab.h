/*
 * symtab.h - one module's symbols as compact sorted arrays.
 *
 * This is the shape every reader produces (Windows PDB, Portable PDB, PE
 * metadata for names), the shape the SQLite cache stores and loads back, and
 * the shape lookups run over.  All strings live in one pool and are named by
 * 32-bit offsets into it; offset 0 is the empty string.
 *
 *   native:  funcs   sorted by rva, non-overlapping     -> function + offset
 *            lines   sorted by rva (rva, size, line, file)
 *            inlines (one per S_INLINESITE: name, parent, depth, owning func)
 *            iranges sorted by (func, rva): code ranges of inline sites,
 *                    each with the inlinee's own line at that range
 *            publics sorted by rva, each with the size it may name (fallback
 *                    names for code no procedure covers: stripped PDBs, assembly)
 *   managed: methods sorted by token (name, kickoff method for MoveNext,
 *            the source-level method of compiler-generated code)
 *            seqpts  grouped per method, sorted by IL offset
 *
 * Building: st_init, then st_str/st_add_* in any order, then st_finish (sorts,
 * dedups, computes derived fields).  Lookups need a finished table.
 * Ownership: the symtab owns all of its arrays; st_free releases them.
 */
#ifndef PDBSYM_SYMTAB_H
#define PDBSYM_SYMTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"

#define ST_NONE UINT32_MAX
#define ST_HIDDEN_LINE 0xFEEFEEu /* 16707566: compiler-generated sequence point */
#define ST_NOSTEP_LINE 0xF00F00u /* 15732480: native code debuggers never step into */
#define ST_MAX_INLINE_DEPTH 64

typedef enum { ST_FORMAT_UNKNOWN = 0, ST_FORMAT_WINDOWS = 1, ST_FORMAT_PORTABLE = 2 } st_format;

typedef struct {
  st_format format;
  uint8_t guid[16];   /* as stored on disk (GUID layout: Data1..3 little-endian) */
  uint32_t age;       /* Windows: DBI age (what PEs reference); Portable: 0 */
  uint32_t pdb_age;   /* Windows: PDB info stream age; Portable: 0 */
  uint32_t stamp;     /* Portable: PDB id stamp; Windows: info stream signature */
  uint16_t machine;   /* DBI machine, 0xC0EE for managed */
  bool managed;       /* has managed methods (token lookups) */
} st_ident;

/* Function (native procedure, thunk).  `name` as the PDB's record holds it. */
enum { ST_FUNC_THUNK = 1u, ST_FUNC_MANAGED = 2u };
typedef struct {
  uint32_t rva;
  uint32_t size;
  uint32_t name;     /* string offset */
  uint32_t flags;
  uint32_t ir_first; /* this function's inline ranges: iranges[ir_first, +ir_count) */
  uint32_t ir_count; /* (set by st_finish) */
} st_func;

typedef struct {
  uint32_t rva;
  uint32_t size;     /* bytes covered; 0 means "up to the next line or the function end" */
  uint32_t line;     /* may be ST_HIDDEN_LINE or ST_NOSTEP_LINE */
  uint32_t file;     /* string offset of the file name */
} st_line;

typedef struct {
  uint32_t name;     /* inlinee's name (string offset) */
  uint32_t parent;   /* index of the enclosing inline site, or ST_NONE (the function) */
  uint32_t func;     /* index of the owning function in funcs (after st_finish) */
  uint32_t depth;    /* 1 for a site directly inside the function */
  uint32_t func_rva; /* rva of the owning function (used to find func in st_finish) */
} st_inline;

typedef struct {
  uint32_t rva;
  uint32_t size;
  uint32_t inl;      /* index into inlines */
  uint32_t line;     /* the inlinee's own line for this range (0 = unknown) */
  uint32_t file;     /* string offset */
} st_irange;

typedef struct {
  uint32_t rva;
  uint32_t size;     /* bytes it may name: up to the end of its section and the
                      * next public or function (set by st_finish); before
                      * st_finish, the section's limit, or 0 for none known */
  uint32_t name;     /* undecorated name */
  uint32_t mangled;  /* decorated name as stored (string offset) */
} st_public;

typedef struct {
  uint32_t token;    /* MethodDef token 0x06xxxxxx */
  uint32_t name;     /* best full name known (string offset), 0 if none */
  uint32_t kickoff;  /* kickoff method token for a state machine MoveNext, or 0 */
  uint32_t user;     /* compiler-generated code: the method the user wrote it in
                      * (full name, string offset), else 0 (clrnames.h) */
  uint32_t local;    /* ... and the local function it is in (string offset), else 0 */
  uint32_t gen;      /* cn_kind: what generated code this is, CN_NONE if user code */
  uint32_t sp_first; /* first index into seqpts (set by st_finish) */
  uint32_t sp_count;
} st_method;

typedef struct {
  uint32_t token;
  uint32_t il;
  uint32_t line;       /* ST_HIDDEN_LINE for hidden points */
  uint32_t end_line;
  uint16_t column;
  uint16_t end_column;
  uint32_t file;       /* string offset (document name) */
} st_seqpt;

typedef struct {
  st_ident ident;
  char *strs;  size_t strs_len, strs_cap;
  st_func *funcs;     size_t nfuncs, cfuncs;
  st_line *lines;     size_t nlines, clines;
  st_inline *inlines; size_t ninlines, cinlines;
  st_irange *iranges; size_t niranges, ciranges;
  st_public *publics; size_t npublics, cpublics;
  st_method *methods; size_t nmethods, cmethods;
  st_seqpt *seqpts;   size_t nseqpts, cseqpts;
  uint32_t source_link; /* string offset of Source Link JSON (one object or an
                         * array of them, sourcelink.h), 0 if none */
  struct sl_map_s *slmap; /* source_link parsed for lookups (st_build_index), or NULL */
  /* search indexes (st_build_index): every ST_INDEX_STEP-th key of lines and
   * funcs, small enough to stay in cache, so a lookup touches few cold lines */
  uint32_t *line_idx; size_t nline_idx;
  uint32_t *func_idx; size_t nfunc_idx;
  /* per inline range, the largest end (rva + size, saturated) of the ranges
   * of its function up to and including it; with each function's ranges
   * sorted by rva, the ranges containing an address are found by a binary
   * search and a backward walk that stops where this drops to the address */
  uint32_t *ir_maxend; size_t nir_maxend;
  /* per function, the lines a lookup inside it can land on: [2i] is the last
   * line starting at or before the function (0 if none), [2i+1] one past the
   * last line starting before its end; a line search then stays in a few
   * cache lines */
  uint32_t *func_lines; size_t nfunc_lines;
  /* builder state (string dedup) */
  uint32_t *hslots; size_t hcap, hcount;
  ps_budget *budget; /* borrowed; may be NULL for "no cap" */
  ps_err err;        /* sticky builder error (allocation) */
  bool finished;
} symtab;

void st_init(symtab *st, ps_budget *budget);
void st_free(symtab *st);

/* Interns a string (len bytes, need not be NUL-terminated); returns its offset.
 * Returns 0 (the empty string) and sets st->err on failure. */
uint32_t st_str(symtab *st, const char *s, size_t len);
uint32_t st_cstr(symtab *st, const char *s);
static inline const char *st_s(const symtab *st, uint32_t off) {
  return (st->strs && off < st->strs_len) ? st->strs + off : "";
}

bool st_add_func(symtab *st, uint32_t rva, uint32_t size, uint32_t name, uint32_t flags);
bool st_add_line(symtab *st, uint32_t rva, uint32_t size, uint32_t line, uint32_t file);
/* Returns the new inline's index, or ST_NONE on failure. */
uint32_t st_add_inline(symtab *st, uint32_t func_rva, uint32_t parent, uint32_t depth,
                       uint32_t name);
bool st_add_irange(symtab *st, uint32_t inl, uint32_t rva, uint32_t size, uint32_t line,
                   uint32_t file);
bool st_add_public(symtab *st, uint32_t rva, uint32_t name, uint32_t mangled);
/* A public that may name at most limit bytes (the rest of its section). */
bool st_add_public_bounded(symtab *st, uint32_t rva, uint32_t limit, uint32_t name,
                           uint32_t mangled);
bool st_add_method(symtab *st, uint32_t token, uint32_t name, uint32_t kickoff);
bool st_add_seqpt(symtab *st, const st_seqpt *sp);
/* Sets what compiler-generated code methods[index] is: gen (cn_kind), the
 * user's method's full name and the local function's name (string offsets,
 * 0 for none). */
void st_set_method_user(symtab *st, size_t index, uint32_t gen, uint32_t user, uint32_t local);

/* Sorts and finishes the table; returns PS_E_OK or the builder's error. */
ps_err st_finish(symtab *st);

#define ST_INDEX_STEP 32
/* (Re)builds the search indexes of a sorted table (st_finish calls it; a
 * loader that restores sorted arrays directly calls it too).  Also sorts each
 * function's inline ranges by rva (stable) if they are not already.  Without
 * the indexes lookups still work, by plain binary search and linear scans. */
ps_err st_build_index(symtab *st);

/* (Re)builds only the Source Link map lookups read (st_build_index builds it
 * too), for a table whose arrays and indexes were restored as they are (a
 * table file the cache maps); st_free_source_link frees that map alone, for
 * a table whose arrays are not its own (st_free frees everything). */
void st_build_source_link(symtab *st);
void st_free_source_link(symtab *st);

/* The Source Link URL of a document path (sourcelink.h rules) into out;
 * false when the module has no map or no rule covers the path. */
bool st_source_link(const symtab *st, const char *path, char *out, size_t cap);

/* A copy of the finished table src into out (st_init'ed here with budget,
 * which may be NULL): the same rows, strings and Source Link, its indexes
 * rebuilt, finished.  For adding to a table others are reading (the cache's
 * tables are shared): st_str and pe_method_names then work on the copy.
 * PS_E_INVALID when src is not finished; PS_E_NOMEM or the budget's error
 * with out freed.  The caller st_free's out. */
ps_err st_copy(const symtab *src, ps_budget *budget, symtab *out);

/* Bytes the table occupies in memory (for cache budgets). */
size_t st_memory_size(const symtab *st);

/* ---- lookups ---------------------------------------------------------- */

typedef enum {
  ST_OK = 0,
  ST_UNKNOWN_ADDRESS,
} st_status;

typedef struct {
  const char *function;   /* never NULL */
  const char *mangled;    /* public-symbol fallback only, else NULL */
  const char *file;       /* NULL when no line information */
  uint32_t line;          /* valid when has_line */
  uint32_t column, end_line, end_column; /* valid when has_column (managed) */
  uint32_t function_offset; /* valid when has_offset */
  uint32_t kickoff_token; /* managed: kickoff method's token, 0 if none */
  const char *async_method; /* managed: kickoff method's name, NULL if none */
  const char *user_method;  /* managed, generated code: the user's method, NULL if none */
  const char *local_function; /* ... the local function it is in, NULL if none */
  uint32_t generated;       /* managed: cn_kind (CN_NONE for user code) */
  bool inlined, hidden, has_line, has_column, has_offset;
} st_symbol;

typedef struct {
  st_status status;
  int nsyms;
  char namebuf[48];  /* backing store for a synthesized name (e.g. a bare token) */
  st_symbol syms[ST_MAX_INLINE_DEPTH + 1]; /* innermost first */
} st_answer;

/* Native: RVA -> function (or nearest public), inline chain, file and line.
 * A public answers only inside its size (its section, up to the next public
 * or function).  A line of ST_HIDDEN_LINE sets `hidden` and gives the nearest
 * visible line at a lower address in the same function (or public range),
 * else the nearest at a higher one, else no line; a line of ST_NOSTEP_LINE
 * sets `hidden` and gives no line (see pdb.h). */
void st_lookup_rva(const symtab *st, uint32_t rva, st_answer *out);
/* The index in funcs of the function st_lookup_rva answers rva from, or -1
 * when none contains rva (then it falls back to the publics). */
long st_func_index(const symtab *st, uint32_t rva);
/* Managed: (MethodDef token, IL offset) -> covering sequence point. */
void st_lookup_token(const symtab *st, uint32_t token, uint32_t il, st_answer *out);
/* Managed: the sequence points of MethodDef token, sorted by IL offset
 * (borrowed from st); false when the method has none. */
bool st_method_points(const symtab *st, uint32_t token, const st_seqpt **pts, size_t *n);

#endif
