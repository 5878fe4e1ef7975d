/*
 * render.c - answers as the contract's JSON, written with jsonw.h (see
 * render.h).  jansson is used here only to read a module's Source Link JSON.
 */
#include "render.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "module.h"

const char *render_jansson_version(void) { return JANSSON_VERSION; }

/* ---- Source Link ----------------------------------------------------------- */

struct render_sl_entry {
  const char *key; /* the document pattern, without its trailing '*' */
  size_t len;
  bool wild;       /* the pattern ended in '*' */
  const char *url;
};

void render_module_init(render_module *rm, const symtab *st) {
  rm->st = st;
  rm->sl = NULL;
  rm->nsl = 0;
  if (!st || !st->source_link)
    return;
  json_error_t err;
  json_t *root = json_loads(st_s(st, st->source_link), 0, &err);
  json_t *docs = json_object_get(root, "documents");
  if (!json_is_object(docs)) {
    json_decref(root);
    return;
  }
  /* the entries and their strings in one block: the map is read once per
   * module and request, its entries once per symbol with a file */
  size_t n = 0, bytes = 0;
  const char *key;
  json_t *val;
  json_object_foreach(docs, key, val) {
    if (!json_is_string(val))
      continue;
    n++;
    bytes += strlen(key) + 1 + json_string_length(val) + 1;
  }
  render_sl_entry *e = n ? malloc(n * sizeof *e + bytes) : NULL;
  if (e) {
    char *p = (char *)(e + n);
    size_t i = 0;
    json_object_foreach(docs, key, val) {
      if (!json_is_string(val))
        continue;
      size_t kl = strlen(key);
      /* a URL with a NUL inside is used up to the NUL, as json_string_value gives it */
      size_t ul = strlen(json_string_value(val));
      memcpy(p, key, kl + 1);
      e[i].key = p;
      p += kl + 1;
      memcpy(p, json_string_value(val), ul + 1);
      e[i].url = p;
      p += ul + 1;
      e[i].wild = kl > 0 && key[kl - 1] == '*';
      e[i].len = e[i].wild ? kl - 1 : kl;
      i++;
    }
    rm->sl = e;
    rm->nsl = n;
  }
  json_decref(root);
}

void render_module_free(render_module *rm) {
  free(rm->sl);
  rm->sl = NULL;
  rm->nsl = 0;
}

bool render_source_link(const render_module *rm, const char *path, char *out, size_t cap) {
  if (!rm->sl || !path || !cap)
    return false;
  const render_sl_entry *best = NULL;
  size_t plen = strlen(path);
  for (size_t k = 0; k < rm->nsl; k++) {
    const render_sl_entry *e = &rm->sl[k];
    if (plen < e->len)
      continue;
    bool match = true;
    for (size_t i = 0; i < e->len && match; i++)
      match = tolower((unsigned char)e->key[i]) == tolower((unsigned char)path[i]);
    if (!match || (!e->wild && path[e->len] != '\0'))
      continue;
    /* the longest pattern wins; an exact one over any wildcard */
    if (!best || e->len > best->len || (!e->wild && best->wild))
      best = e;
  }
  if (!best)
    return false;
  size_t o = 0;
  for (const char *u = best->url; *u && o + 1 < cap; u++) {
    if (*u == '*' && best->wild) {
      for (const char *r = path + best->len; *r && o + 1 < cap; r++)
        out[o++] = *r == '\\' ? '/' : *r;
    } else {
      out[o++] = *u;
    }
  }
  out[o] = '\0';
  return true;
}

/* ---- frames ------------------------------------------------------------------ */

/* The "symbols" array for an answer (innermost first). */
static void render_symbols(jsonw *w, const render_module *rm, const st_answer *a) {
  jsonw_arr(w);
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *s = &a->syms[i];
    jsonw_obj(w);
    jsonw_key(w, "function");
    jsonw_str(w, s->function);
    if (s->mangled && s->mangled[0]) {
      jsonw_key(w, "mangled");
      jsonw_str(w, s->mangled);
    }
    if (s->has_line) {
      if (s->file && s->file[0]) {
        jsonw_key(w, "file");
        jsonw_str(w, s->file);
        char url[2048];
        if (rm->sl && render_source_link(rm, s->file, url, sizeof url)) {
          jsonw_key(w, "source_link");
          jsonw_str(w, url);
        }
      }
      jsonw_key(w, "line");
      jsonw_uint(w, s->line);
      if (s->has_column) {
        jsonw_key(w, "column");
        jsonw_uint(w, s->column);
        jsonw_key(w, "end_line");
        jsonw_uint(w, s->end_line);
        jsonw_key(w, "end_column");
        jsonw_uint(w, s->end_column);
      }
    }
    if (s->inlined) {
      jsonw_key(w, "inlined");
      jsonw_bool(w, true);
    }
    if (s->hidden) {
      jsonw_key(w, "hidden");
      jsonw_bool(w, true);
    }
    if (s->has_offset) {
      jsonw_key(w, "function_offset");
      jsonw_hex(w, s->function_offset, 0);
    }
    if (s->async_method) {
      jsonw_key(w, "async_method");
      jsonw_str(w, s->async_method);
    }
    jsonw_obj_end(w);
  }
  jsonw_arr_end(w);
}

void render_frame_w(jsonw *w, const render_module *rm, const render_frame *f) {
  jsonw_obj(w);
  jsonw_key(w, "status");
  jsonw_str(w, f->status);
  if (f->module >= 0) {
    jsonw_key(w, "module");
    jsonw_int(w, f->module);
  }
  if (f->has_address && f->managed) {
    jsonw_key(w, "token");
    jsonw_hex(w, f->rva_or_token, 8);
    jsonw_key(w, "il_offset");
    jsonw_uint(w, f->il_offset);
  } else if (f->has_address) {
    jsonw_key(w, "rva");
    jsonw_hex(w, f->rva_or_token, 0);
  }
  if (f->answer) {
    jsonw_key(w, "symbols");
    render_symbols(w, rm, f->answer);
  }
  if (f->error) {
    jsonw_key(w, "error");
    jsonw_str(w, f->error);
  }
  if (f->retry_after >= 0) {
    jsonw_key(w, "retry_after");
    jsonw_int(w, f->retry_after);
  }
  if (f->input) {
    jsonw_key(w, "address");
    jsonw_str(w, f->input);
  }
  jsonw_obj_end(w);
}

/* One line of text from a writer that rendered it, or NULL. */
static char *line_of(jsonw *w) { return jsonw_take(w, NULL); }

char *render_frame_json(const render_module *rm, const render_frame *f) {
  jsonw w;
  jsonw_init(&w, 512, 0);
  render_frame_w(&w, rm, f);
  return line_of(&w);
}

/* "PREFIX0x1a2b" (width > 0: zero-padded) into out, which holds 64 bytes. */
static void hex_msg(char out[64], const char *prefix, uint32_t v, int width) {
  static const char digits[] = "0123456789abcdef";
  size_t o = strlen(prefix);
  memcpy(out, prefix, o);
  out[o++] = '0';
  out[o++] = 'x';
  char tmp[8];
  int n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v);
  for (int k = n; k < width; k++)
    out[o++] = '0';
  while (n)
    out[o++] = tmp[--n];
  out[o] = '\0';
}

void render_answer_w(jsonw *w, const render_module *rm, const st_answer *a, int module,
                     bool is_managed, uint32_t rva_or_token, uint32_t il_offset) {
  char msg[64];
  render_frame f = {"ok", module, true, is_managed, rva_or_token, il_offset, a, NULL, -1, NULL};
  if (a->status != ST_OK) {
    if (is_managed) {
      hex_msg(msg, "no method ", rva_or_token, 8);
      strcat(msg, " in this module");
    } else {
      hex_msg(msg, "no function covers rva ", rva_or_token, 0);
    }
    f.status = "unknown_address";
    f.answer = NULL;
    f.error = msg;
  }
  render_frame_w(w, rm, &f);
}

char *render_answer_json(const render_module *rm, const st_answer *a, int module, bool is_managed,
                         uint32_t rva_or_token, uint32_t il_offset) {
  jsonw w;
  jsonw_init(&w, 512, 0);
  render_answer_w(&w, rm, a, module, is_managed, rva_or_token, il_offset);
  return line_of(&w);
}

void render_symtab_w(jsonw *w, const symtab *st, const char *file) {
  char id[48];
  uint32_t age = st->ident.format == ST_FORMAT_PORTABLE ? 0 : st->ident.age;
  module_debug_id(st->ident.guid, age, id);
  jsonw_obj(w);
  jsonw_key(w, "file");
  jsonw_str(w, file);
  jsonw_key(w, "format");
  jsonw_str(w, st->ident.format == ST_FORMAT_PORTABLE  ? "portable"
               : st->ident.format == ST_FORMAT_WINDOWS ? "windows"
                                                       : "unknown");
  jsonw_key(w, "debug_id");
  jsonw_str(w, id);
  if (st->ident.format == ST_FORMAT_WINDOWS) {
    jsonw_key(w, "pdb_age");
    jsonw_uint(w, st->ident.pdb_age);
    jsonw_key(w, "machine");
    jsonw_hex(w, st->ident.machine, 0);
  } else {
    jsonw_key(w, "stamp");
    jsonw_hex(w, st->ident.stamp, 0);
  }
  jsonw_key(w, "managed");
  jsonw_bool(w, st->ident.managed);
  jsonw_key(w, "functions");
  jsonw_uint(w, st->nfuncs);
  jsonw_key(w, "lines");
  jsonw_uint(w, st->nlines);
  jsonw_key(w, "inline_sites");
  jsonw_uint(w, st->ninlines);
  jsonw_key(w, "inline_ranges");
  jsonw_uint(w, st->niranges);
  jsonw_key(w, "publics");
  jsonw_uint(w, st->npublics);
  jsonw_key(w, "methods");
  jsonw_uint(w, st->nmethods);
  jsonw_key(w, "sequence_points");
  jsonw_uint(w, st->nseqpts);
  jsonw_key(w, "source_link");
  jsonw_bool(w, st->source_link != 0);
  jsonw_key(w, "memory_bytes");
  jsonw_uint(w, st_memory_size(st));
  jsonw_obj_end(w);
}

char *render_symtab_json(const symtab *st, const char *file) {
  jsonw w;
  jsonw_init(&w, 512, 0);
  render_symtab_w(&w, st, file);
  return line_of(&w);
}
