/*
 * render.h - turns lookup answers (st_answer) into the contract's JSON
 * (CONTRACT.md, "One answered frame"), with jansson.
 *
 * Ownership: functions returning json_t* return a new reference the caller
 * json_decref's.
 */
#ifndef PDBSYM_RENDER_H
#define PDBSYM_RENDER_H

#include <stdint.h>

#include <jansson.h>

#include "symtab.h"

/* Per-module rendering state (the module's Source Link map is its symtab's). */
typedef struct {
  const symtab *st;
} render_module;

void render_module_init(render_module *rm, const symtab *st);
void render_module_free(render_module *rm);

/* Resolves a document path through Source Link into out; false when no
 * mapping covers it. */
bool render_source_link(const render_module *rm, const char *path, char *out, size_t cap);

/* The "symbols" array for an answer (innermost first). */
json_t *render_symbols(const render_module *rm, const st_answer *a);

/* A whole answered frame: {"status", ["module"], "rva" | "token"+"il_offset",
 * "symbols" | "error"}.  module < 0 omits the module field.  For a native
 * frame pass is_managed false and the rva; for managed the token and offset. */
json_t *render_frame(const render_module *rm, const st_answer *a, int module, bool is_managed,
                     uint32_t rva_or_token, uint32_t il_offset);

/* An error frame: {"status": status, ["module"], address fields, "error": msg}. */
json_t *render_error_frame(const char *status, const char *error, int module, bool has_address,
                           bool is_managed, uint32_t rva_or_token, uint32_t il_offset);

/* A JSON string from bytes that may not be valid UTF-8 (names and paths from
 * untrusted files): invalid sequences become U+FFFD; NULL gives "". */
json_t *render_string(const char *s);

/* "0x1a2b" */
json_t *render_hex(uint32_t v);

#endif
