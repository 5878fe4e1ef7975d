/*
 * render_ref.h - the frame renderer as it was before issue 15 (render.c built
 * answers as jansson objects and serialised them with json_dumps): kept
 * here, for the tests only, as the reference the streaming renderer
 * (render.c on jsonw.h) is compared with, byte for byte
 * (test_render_equiv.c, test_jsonw.c).  Copied from render.c at main
 * dbe07f6; only the names changed (ref_ prefix) and everything is static.
 */
#ifndef PDBSYM_TEST_RENDER_REF_H
#define PDBSYM_TEST_RENDER_REF_H

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "module.h"
#include "render.h" /* render_frame, the description of a frame both renderers take */
#include "symtab.h"

/* Per-module rendering state, as render.h had it: the Source Link map as a
 * jansson object. */
typedef struct {
  const symtab *st;
  json_t *sourcelink;
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

static inline void ref_render_module_init(ref_render_module *rm, const symtab *st) {
  rm->st = st;
  rm->sourcelink = NULL;
  if (!st || !st->source_link)
    return;
  json_error_t err;
  json_t *root = json_loads(st_s(st, st->source_link), 0, &err);
  if (!root)
    return;
  json_t *docs = json_object_get(root, "documents");
  if (json_is_object(docs))
    rm->sourcelink = json_incref(docs);
  json_decref(root);
}

static inline void ref_render_module_free(ref_render_module *rm) {
  json_decref(rm->sourcelink);
  rm->sourcelink = NULL;
}

static inline bool ref_render_source_link(const ref_render_module *rm, const char *path, char *out, size_t cap) {
  if (!rm->sourcelink || !path || !cap)
    return false;
  const char *key;
  json_t *val;
  const char *best_url = NULL;
  size_t best_len = 0;
  bool best_wild = false;
  json_object_foreach(rm->sourcelink, key, val) {
    if (!json_is_string(val))
      continue;
    size_t kl = strlen(key);
    bool wild = kl > 0 && key[kl - 1] == '*';
    size_t pl = wild ? kl - 1 : kl;
    if (strlen(path) < pl)
      continue;
    bool match = true;
    for (size_t i = 0; i < pl && match; i++)
      match = tolower((unsigned char)key[i]) == tolower((unsigned char)path[i]);
    if (!match || (!wild && path[pl] != '\0'))
      continue;
    if (!best_url || pl > best_len || (!wild && best_wild)) {
      best_url = json_string_value(val);
      best_len = pl;
      best_wild = wild;
    }
  }
  if (!best_url)
    return false;
  size_t o = 0;
  for (const char *u = best_url; *u && o + 1 < cap; u++) {
    if (*u == '*' && best_wild) {
      for (const char *r = path + best_len; *r && o + 1 < cap; r++)
        out[o++] = *r == '\\' ? '/' : *r;
    } else {
      out[o++] = *u;
    }
  }
  out[o] = '\0';
  return true;
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
  render_frame f = {"ok", module, true, is_managed, rva_or_token, il_offset, a, NULL, -1, NULL};
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

static inline char *ref_render_symtab_json(const symtab *st, const char *file) {
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
  return ref_dump(o);
}

#endif
