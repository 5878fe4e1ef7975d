/*
 * render.h - answers as the contract's JSON (docs/contract.md, "One answered
 * frame"): the one frame renderer, which the HTTP routes (api.c) and the CLI
 * (`pdbsym lookup`, `pdbsym dump`) both use.
 *
 * Frames are written into a JSON writer (jsonw.h): api.c writes a whole
 * answer into one buffer that goes to libmicrohttpd as it is; the CLI takes
 * one line at a time as text (the *_json functions).  The bytes are those
 * jansson's json_dumps(JSON_COMPACT) printed for the objects this renderer
 * built before (tests/unit/test_render_equiv.c compares the two), except
 * that a string that is not valid UTF-8 is now always written with U+FFFD
 * for the bad bytes: before, fields other than names and paths (a frame's
 * "error", the CLI's "address", dump's "file") disappeared instead.
 *
 * This header names no jansson type (jansson is the service's library, see
 * docs/architecture.md).
 *
 * Ownership: the char * results are malloc'd, one line of compact JSON
 * without a newline; the caller frees them.  NULL means out of memory.
 */
#ifndef PDBSYM_RENDER_H
#define PDBSYM_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"
#include "pe.h"
#include "symtab.h"

/* Per-module rendering state (the module's Source Link map is its symtab's,
 * sourcelink.h, parsed once when the module is loaded). */
typedef struct {
  const symtab *st;
} render_module;

void render_module_init(render_module *rm, const symtab *st);
void render_module_free(render_module *rm);

/* Resolves a document path through Source Link into out; false when no
 * mapping covers it. */
bool render_source_link(const render_module *rm, const char *path, char *out, size_t cap);

/* One frame of an answer, field by field, in the order they are written:
 *   {"status", ["module"], ["rva" | "token", "il_offset"], ["instruction_addr"],
 *    ["adjust_instruction_addr"], ["symbols"], ["error"], ["retry_after"], ["address"]} */
typedef struct {
  const char *status;        /* "ok", "unknown_address", "invalid", "pending", ... */
  long long module;          /* the request's module index; < 0: no "module" field */
  bool has_address;          /* false: no address fields (an address that did not parse) */
  bool managed;              /* "token" (0x%08x) and "il_offset", else "rva" (0x%x) */
  uint64_t rva_or_token;
  uint64_t il_offset;
  const st_answer *answer;   /* not NULL: "symbols" from it, innermost first */
  const char *error;         /* not NULL: "error" */
  long long retry_after;     /* >= 0: "retry_after" (pending frames) */
  const char *input;         /* not NULL: "address", the text as given (the CLI's invalid lines) */
  bool has_instruction_addr; /* "instruction_addr" (0x%x): the absolute address given */
  uint64_t instruction_addr;
  bool adjusted;             /* "adjust_instruction_addr": true: looked up at the address - 1 */
} render_frame;

/* Writes the frame object as the next value of w. */
void render_frame_w(jsonw *w, const render_module *rm, const render_frame *f);
char *render_frame_json(const render_module *rm, const render_frame *f);

/* A frame answered by a lookup in one module, as the CLI prints it: status
 * "ok" with the symbols, or "unknown_address" with an error naming the
 * address.  module < 0 omits the module field.  For a native frame pass
 * is_managed false and the rva; for managed the token and IL offset. */
void render_answer_w(jsonw *w, const render_module *rm, const st_answer *a, int module,
                     bool is_managed, uint32_t rva_or_token, uint32_t il_offset);
char *render_answer_json(const render_module *rm, const st_answer *a, int module, bool is_managed,
                         uint32_t rva_or_token, uint32_t il_offset);

/* What `pdbsym dump` prints of a table read from file: identity, format and
 * counts. */
void render_symtab_w(jsonw *w, const symtab *st, const char *file);
char *render_symtab_json(const symtab *st, const char *file);

/* What `pdbsym dump` prints of a PE image: its identity as requests name
 * it: code_file (code_file, the image's file name) and code_id
 * ({TimeDateStamp:X8}{SizeOfImage:x}, symstore's key), and for each
 * CodeView entry the PDB's debug_file, debug_id (GUID-age), breakpad_id and
 * format; the first entry's also at the top.  embedded, when not NULL, is
 * the table of the image's embedded Portable PDB, printed as
 * render_symtab_json prints it under "embedded_pdb". */
char *render_pe_json(const pe_info *pe, const char *file, const char *code_file,
                     const symtab *embedded);

/* The jansson version the service parses JSON with, e.g. "2.14" (static). */
const char *render_jansson_version(void);

#endif
