/*
 * render_ref.h - the frame renderer as it was before issue 15 (render.c built
 * answers as jansson objects and serialised them with json_dumps): kept
 * here, for the tests only, as the reference the streaming renderer
 * (render.c on jsonw.h) is compared with, byte for byte
 * (test_render_equiv.c, test_jsonw.c).  Copied from render.c at main
 * 0801f5a by tests/unit/make_ref.py; only the names changed (ref_ prefix)
 * and everything is static.
 */
#ifndef PDBSYM_TEST_RENDER_REF_H
#define PDBSYM_TEST_RENDER_REF_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clrnames.h"
#include "module.h"
#include "pe.h"
#include "render.h" /* render_frame, the description of a frame both renderers take */
#include "symtab.h"

/* Per-module rendering state, as render.h had it. */
typedef struct {
  const symtab *st;
} ref_render_module;




/* A JSON string from bytes that may not be valid UTF-8 (names and paths come
 * from untrusted files): invalid sequences become U+FFFD instead of the field
 * silently disappearing (json_string returns NULL on bad UTF-8). */
static inline json_t *ref_render_string(const char *s) {
  if (!s)
    s = "";
  json_t *j = json_string(s);
  if (j)
    return j;
  size_t n = strlen(s);
  char *out = malloc(n * 3 + 1);
  if (!out)
    return json_string("");
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    int len = 0;
    if (*p < 0x80)
      len = 1;
    else if ((*p & 0xe0) == 0xc0 && *p >= 0xc2)
      len = 2;
    else if ((*p & 0xf0) == 0xe0)
      len = 3;
    else if ((*p & 0xf8) == 0xf0 && *p <= 0xf4)
      len = 4;
    bool ok = len > 0;
    for (int k = 1; ok && k < len; k++)
      ok = (p[k] & 0xc0) == 0x80;
    if (ok && len > 1) {
      /* reject overlong, surrogate and out-of-range forms the same way jansson does */
      json_t *probe = json_stringn((const char *)p, (size_t)len);
      ok = probe != NULL;
      json_decref(probe);
    }
    if (ok) {
      memcpy(out + o, p, (size_t)len);
      o += (size_t)len;
      p += len;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      p++;
    }
  }
  out[o] = '\0';
  j = json_string(out);
  free(out);
  return j ? j : json_string("");
}

static inline json_t *ref_render_hex(uint64_t v, int width) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%0*" PRIx64, width, v);
  return json_string(buf);
}

/* The object as one line of compact JSON (malloc'd), and the object freed. */
static inline char *ref_dump(json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return s;
}

static inline void ref_render_module_init(ref_render_module *rm, const symtab *st) { rm->st = st; }

static inline void ref_render_module_free(ref_render_module *rm) { rm->st = NULL; }

/* The map is the symtab's (parsed once per module, sourcelink.h): Portable
 * PDBs' Source Link, Windows PDBs' sourcelink streams and srcsrv alike. */
static inline bool ref_render_source_link(const ref_render_module *rm, const char *path, char *out, size_t cap) {
  return rm->st && path && st_source_link(rm->st, path, out, cap);
}

static inline const char *ref_generated_name(uint32_t g) {
  switch (g) {
  case CN_LAMBDA: return "lambda";
  case CN_LOCAL_FUNCTION: return "local_function";
  case CN_STATE_MACHINE: return "state_machine";
  default: return NULL;
  }
}

/* The "symbols" array for an answer (innermost first). */
static inline json_t *ref_render_symbols(const ref_render_module *rm, const st_answer *a) {
  json_t *arr = json_array();
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *s = &a->syms[i];
    json_t *o = json_object();
    json_object_set_new(o, "function", ref_render_string(s->function));
    if (s->mangled && s->mangled[0])
      json_object_set_new(o, "mangled", ref_render_string(s->mangled));
    if (s->has_line) {
      if (s->file && s->file[0]) {
        json_object_set_new(o, "file", ref_render_string(s->file));
        char url[2048];
        if (ref_render_source_link(rm, s->file, url, sizeof url))
          json_object_set_new(o, "source_link", ref_render_string(url));
      }
      json_object_set_new(o, "line", json_integer(s->line));
      if (s->has_column) {
        json_object_set_new(o, "column", json_integer(s->column));
        json_object_set_new(o, "end_line", json_integer(s->end_line));
        json_object_set_new(o, "end_column", json_integer(s->end_column));
      }
    }
    if (s->inlined)
      json_object_set_new(o, "inlined", json_true());
    if (s->hidden)
      json_object_set_new(o, "hidden", json_true());
    if (s->has_offset)
      json_object_set_new(o, "function_offset", ref_render_hex(s->function_offset, 0));
    if (s->async_method)
      json_object_set_new(o, "async_method", ref_render_string(s->async_method));
    const char *gen = ref_generated_name(s->generated);
    if (s->user_method && gen) {
      json_object_set_new(o, "user_method", ref_render_string(s->user_method));
      json_object_set_new(o, "generated", json_string(gen));
      if (s->local_function)
        json_object_set_new(o, "local_function", ref_render_string(s->local_function));
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

static inline json_t *ref_render_frame_obj(const ref_render_module *rm, const render_frame *f) {
  json_t *o = json_object();
  json_object_set_new(o, "status", json_string(f->status));
  if (f->module >= 0)
    json_object_set_new(o, "module", json_integer(f->module));
  if (f->has_address && f->managed) {
    json_object_set_new(o, "token", ref_render_hex(f->rva_or_token, 8));
    json_object_set_new(o, "il_offset", json_integer((json_int_t)f->il_offset));
  } else if (f->has_address) {
    json_object_set_new(o, "rva", ref_render_hex(f->rva_or_token, 0));
  }
  if (f->has_instruction_addr)
    json_object_set_new(o, "instruction_addr", ref_render_hex(f->instruction_addr, 0));
  if (f->adjusted)
    json_object_set_new(o, "adjust_instruction_addr", json_true());
  if (f->answer)
    json_object_set_new(o, "symbols", ref_render_symbols(rm, f->answer));
  if (f->error)
    json_object_set_new(o, "error", json_string(f->error));
  if (f->retry_after >= 0)
    json_object_set_new(o, "retry_after", json_integer(f->retry_after));
  if (f->input)
    json_object_set_new(o, "address", json_string(f->input));
  return o;
}

static inline char *ref_render_frame_json(const ref_render_module *rm, const render_frame *f) {
  return ref_dump(ref_render_frame_obj(rm, f));
}

static inline json_t *ref_render_answer_obj(const ref_render_module *rm, const st_answer *a, int module,
                          bool is_managed, uint32_t rva_or_token, uint32_t il_offset) {
  char msg[96];
  render_frame f = {"ok", module, true, is_managed, rva_or_token, il_offset, a, NULL, -1, NULL,
                    false, 0, false};
  if (a->status != ST_OK) {
    if (is_managed)
      snprintf(msg, sizeof msg, "no method 0x%08x in this module", rva_or_token);
    else
      snprintf(msg, sizeof msg, "no function covers rva 0x%x", rva_or_token);
    f.status = "unknown_address";
    f.answer = NULL;
    f.error = msg;
  }
  return ref_render_frame_obj(rm, &f);
}

static inline char *ref_render_answer_json(const ref_render_module *rm, const st_answer *a, int module, bool is_managed,
                         uint32_t rva_or_token, uint32_t il_offset) {
  return ref_dump(ref_render_answer_obj(rm, a, module, is_managed, rva_or_token, il_offset));
}

static inline json_t *ref_symtab_obj(const symtab *st, const char *file);

static inline char *ref_render_symtab_json(const symtab *st, const char *file) { return ref_dump(ref_symtab_obj(st, file)); }

static inline char *ref_render_pe_json(const pe_info *pe, const char *file, const char *code_file,
                     const symtab *embedded) {
  json_t *o = json_object();
  json_object_set_new(o, "file", ref_render_string(file));
  json_object_set_new(o, "format", json_string("pe"));
  json_object_set_new(o, "machine", ref_render_hex(pe->machine, 0));
  json_object_set_new(o, "managed", json_boolean(pe->is_dotnet));
  char code_id[24];
  snprintf(code_id, sizeof code_id, "%08X%x", pe->timestamp, pe->size_of_image);
  json_object_set_new(o, "code_file", ref_render_string(code_file));
  json_object_set_new(o, "code_id", json_string(code_id));
  json_t *cvs = json_array();
  for (int i = 0; i < pe->ncodeview && i < PE_MAX_CODEVIEW; i++) {
    const pe_codeview *cv = &pe->codeview[i];
    json_t *e = json_object();
    char name[MODULE_NAME_MAX + 1], id[48], hex[33], bp[48];
    const char *why;
    if (module_parse_file_name(cv->path, name, sizeof name, &why))
      json_object_set_new(e, "debug_file", ref_render_string(name));
    else
      json_object_set_new(e, "debug_file", json_null());
    module_debug_id(cv->guid, cv->age, id);
    module_guid_hex(cv->guid, hex);
    snprintf(bp, sizeof bp, "%s%X", hex, cv->age);
    if (cv->portable)
      id[36] = '\0'; /* a Portable PDB is named by its GUID alone (its age is ignored) */
    json_object_set_new(e, "debug_id", json_string(id));
    json_object_set_new(e, "breakpad_id", cv->portable ? json_null() : json_string(bp));
    json_object_set_new(e, "format", json_string(cv->portable ? "portable" : "windows"));
    json_object_set_new(e, "pdb_path", ref_render_string(cv->path));
    if (i == 0) {
      const char *keys[] = {"debug_file", "debug_id", "breakpad_id"};
      for (size_t k = 0; k < 3; k++)
        json_object_set(o, keys[k], json_object_get(e, keys[k]));
    }
    json_array_append_new(cvs, e);
  }
  json_object_set_new(o, "codeview", cvs);
  json_object_set_new(o, "embedded_pdb", embedded ? ref_symtab_obj(embedded, file) : json_false());
  return ref_dump(o);
}

static inline json_t *ref_symtab_obj(const symtab *st, const char *file) {
  char id[48];
  uint32_t age = st->ident.format == ST_FORMAT_PORTABLE ? 0 : st->ident.age;
  module_debug_id(st->ident.guid, age, id);
  json_t *o = json_object();
  json_object_set_new(o, "file", json_string(file));
  json_object_set_new(o, "format", json_string(st->ident.format == ST_FORMAT_PORTABLE ? "portable"
                                               : st->ident.format == ST_FORMAT_WINDOWS ? "windows"
                                                                                        : "unknown"));
  json_object_set_new(o, "debug_id", json_string(id));
  if (st->ident.format == ST_FORMAT_WINDOWS) {
    json_object_set_new(o, "pdb_age", json_integer(st->ident.pdb_age));
    json_object_set_new(o, "machine", ref_render_hex(st->ident.machine, 0));
  } else {
    json_object_set_new(o, "stamp", ref_render_hex(st->ident.stamp, 0));
  }
  json_object_set_new(o, "managed", json_boolean(st->ident.managed));
  json_object_set_new(o, "functions", json_integer((json_int_t)st->nfuncs));
  json_object_set_new(o, "lines", json_integer((json_int_t)st->nlines));
  json_object_set_new(o, "inline_sites", json_integer((json_int_t)st->ninlines));
  json_object_set_new(o, "inline_ranges", json_integer((json_int_t)st->niranges));
  json_object_set_new(o, "publics", json_integer((json_int_t)st->npublics));
  json_object_set_new(o, "methods", json_integer((json_int_t)st->nmethods));
  json_object_set_new(o, "sequence_points", json_integer((json_int_t)st->nseqpts));
  json_object_set_new(o, "source_link", json_boolean(st->source_link != 0));
  json_object_set_new(o, "memory_bytes", json_integer((json_int_t)st_memory_size(st)));
  return o;
}

#endif
