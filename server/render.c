#include "render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrnames.h"

/* A JSON string from bytes that may not be valid UTF-8 (names and paths come
 * from untrusted files): invalid sequences become U+FFFD instead of the field
 * silently disappearing (json_string returns NULL on bad UTF-8). */
json_t *render_string(const char *s) {
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

json_t *render_hex(uint32_t v) {
  char buf[16];
  snprintf(buf, sizeof buf, "0x%x", v);
  return json_string(buf);
}

static json_t *render_token(uint32_t v) {
  char buf[16];
  snprintf(buf, sizeof buf, "0x%08x", v);
  return json_string(buf);
}

void render_module_init(render_module *rm, const symtab *st) { rm->st = st; }

void render_module_free(render_module *rm) { rm->st = NULL; }

/* The map is the symtab's (parsed once per module, sourcelink.h): Portable
 * PDBs' Source Link, Windows PDBs' sourcelink streams and srcsrv alike. */
bool render_source_link(const render_module *rm, const char *path, char *out, size_t cap) {
  return rm->st && path && st_source_link(rm->st, path, out, cap);
}

static const char *generated_name(uint32_t g) {
  switch (g) {
  case CN_LAMBDA: return "lambda";
  case CN_LOCAL_FUNCTION: return "local_function";
  case CN_STATE_MACHINE: return "state_machine";
  default: return NULL;
  }
}

json_t *render_symbols(const render_module *rm, const st_answer *a) {
  json_t *arr = json_array();
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *s = &a->syms[i];
    json_t *o = json_object();
    json_object_set_new(o, "function", render_string(s->function));
    if (s->mangled && s->mangled[0])
      json_object_set_new(o, "mangled", render_string(s->mangled));
    if (s->has_line) {
      if (s->file && s->file[0]) {
        json_object_set_new(o, "file", render_string(s->file));
        char url[2048];
        if (render_source_link(rm, s->file, url, sizeof url))
          json_object_set_new(o, "source_link", render_string(url));
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
      json_object_set_new(o, "function_offset", render_hex(s->function_offset));
    if (s->async_method)
      json_object_set_new(o, "async_method", render_string(s->async_method));
    const char *gen = generated_name(s->generated);
    if (s->user_method && gen) {
      json_object_set_new(o, "user_method", render_string(s->user_method));
      json_object_set_new(o, "generated", json_string(gen));
      if (s->local_function)
        json_object_set_new(o, "local_function", render_string(s->local_function));
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

static void set_address(json_t *o, int module, bool is_managed, uint32_t v, uint32_t il) {
  if (module >= 0)
    json_object_set_new(o, "module", json_integer(module));
  if (is_managed) {
    json_object_set_new(o, "token", render_token(v));
    json_object_set_new(o, "il_offset", json_integer(il));
  } else {
    json_object_set_new(o, "rva", render_hex(v));
  }
}

json_t *render_frame(const render_module *rm, const st_answer *a, int module, bool is_managed,
                     uint32_t rva_or_token, uint32_t il_offset) {
  json_t *o = json_object();
  if (a->status == ST_OK) {
    json_object_set_new(o, "status", json_string("ok"));
    set_address(o, module, is_managed, rva_or_token, il_offset);
    json_object_set_new(o, "symbols", render_symbols(rm, a));
  } else {
    char msg[96];
    if (is_managed)
      snprintf(msg, sizeof msg, "no method 0x%08x in this module", rva_or_token);
    else
      snprintf(msg, sizeof msg, "no function covers rva 0x%x", rva_or_token);
    json_object_set_new(o, "status", json_string("unknown_address"));
    set_address(o, module, is_managed, rva_or_token, il_offset);
    json_object_set_new(o, "error", json_string(msg));
  }
  return o;
}

json_t *render_error_frame(const char *status, const char *error, int module, bool has_address,
                           bool is_managed, uint32_t rva_or_token, uint32_t il_offset) {
  json_t *o = json_object();
  json_object_set_new(o, "status", json_string(status));
  if (has_address)
    set_address(o, module, is_managed, rva_or_token, il_offset);
  else if (module >= 0)
    json_object_set_new(o, "module", json_integer(module));
  json_object_set_new(o, "error", render_string(error ? error : status));
  return o;
}
