/*
 * render.c - answers as the contract's JSON, written with jsonw.h (see
 * render.h).  jansson is not used here but for its version.
 */
#include "render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clrnames.h"
#include "module.h"

const char *render_jansson_version(void) { return JANSSON_VERSION; }

/* ---- Source Link ----------------------------------------------------------- */

void render_module_init(render_module *rm, const symtab *st) { rm->st = st; }

void render_module_free(render_module *rm) { rm->st = NULL; }

/* The map is the symtab's (parsed once per module, sourcelink.h): Portable
 * PDBs' Source Link, Windows PDBs' sourcelink streams and srcsrv alike. */
bool render_source_link(const render_module *rm, const char *path, char *out, size_t cap) {
  return rm && rm->st && path && st_source_link(rm->st, path, out, cap);
}

static const char *generated_name(uint32_t g) {
  switch (g) {
  case CN_LAMBDA: return "lambda";
  case CN_LOCAL_FUNCTION: return "local_function";
  case CN_STATE_MACHINE: return "state_machine";
  default: return NULL;
  }
}

/* ---- frames ------------------------------------------------------------------ */

#define LIT jsonw_raw_lit

/* A symbol as render_symbols below writes it, in one pass: its strings
 * hold no control byte and no byte from 0x80 (checked as they are copied;
 * '"' and '\\' escaped).  plain_need says whether s can be written so and
 * the most bytes it takes, its strings' lengths in p->len; a Source Link
 * URL is resolved into url (PLAIN_URL bytes) when url is given, else a
 * module with a map is no such symbol.  plain_put writes it at out, or
 * returns NULL when a string holds a byte to check or escape otherwise
 * (the caller then writes nothing and goes the usual way). */
enum { PL_FN, PL_MANGLED, PL_FILE, PL_URL, PL_ASYNC, PL_USER, PL_LOCAL, PL__N };
#define PLAIN_FIXED (300 + 7 * 20) /* the members' fixed text, the numbers at most 20 each */
#define PLAIN_URL 2048

typedef struct {
  size_t len[PL__N];
  const char *gen; /* generated_name of a user_method's kind, or NULL */
  const char *url; /* the Source Link URL, or NULL */
} plain_sym;

static size_t plain_need(const jsonw *w, const render_module *rm, const st_symbol *s,
                         plain_sym *p, char *url) {
  const char *file = s->has_line && s->file && s->file[0] ? s->file : NULL;
  size_t *len = p->len, cap = w->max / 32; /* seven strings of at most max / 32 bytes: no sum wraps */
  len[PL_FN] = strlen(s->function);
  len[PL_MANGLED] = s->mangled ? strlen(s->mangled) : 0;
  len[PL_FILE] = file ? strlen(file) : 0;
  if (len[PL_FN] > cap || len[PL_MANGLED] > cap || len[PL_FILE] > cap)
    return 0;
  size_t need = PLAIN_FIXED + 2 * (len[PL_FN] + len[PL_MANGLED] + len[PL_FILE]);
  p->url = NULL;
  p->gen = NULL;
  if (file && rm && rm->st && rm->st->slmap) {
    if (!url)
      return 0;
    if (render_source_link(rm, file, url, PLAIN_URL)) {
      p->url = url;
      len[PL_URL] = strlen(url); /* under PLAIN_URL */
      need += 2 * len[PL_URL];
    }
  }
  if (s->async_method || s->user_method) { /* managed code's own fields */
    len[PL_ASYNC] = s->async_method ? strlen(s->async_method) : 0;
    p->gen = s->user_method ? generated_name(s->generated) : NULL;
    len[PL_USER] = p->gen ? strlen(s->user_method) : 0;
    len[PL_LOCAL] = p->gen && s->local_function ? strlen(s->local_function) : 0;
    if (len[PL_ASYNC] > cap || len[PL_USER] > cap || len[PL_LOCAL] > cap)
      return 0;
    need += 2 * (len[PL_ASYNC] + len[PL_USER] + len[PL_LOCAL]);
  }
  return need;
}

static char *plain_put(char *o, const st_symbol *s, const plain_sym *p) {
  o = LIT(o, "{\"function\":");
  if (!(o = jsonw_raw_str(o, s->function, p->len[PL_FN])))
    return NULL;
  if (p->len[PL_MANGLED]) {
    o = LIT(o, ",\"mangled\":");
    if (!(o = jsonw_raw_str(o, s->mangled, p->len[PL_MANGLED])))
      return NULL;
  }
  if (s->has_line) {
    if (p->len[PL_FILE]) {
      o = LIT(o, ",\"file\":");
      if (!(o = jsonw_raw_str(o, s->file, p->len[PL_FILE])))
        return NULL;
      if (p->url) {
        o = LIT(o, ",\"source_link\":");
        if (!(o = jsonw_raw_str(o, p->url, p->len[PL_URL])))
          return NULL;
      }
    }
    o = LIT(o, ",\"line\":");
    o = jsonw_raw_uint(o, s->line);
    if (s->has_column) {
      o = LIT(o, ",\"column\":");
      o = jsonw_raw_uint(o, s->column);
      o = LIT(o, ",\"end_line\":");
      o = jsonw_raw_uint(o, s->end_line);
      o = LIT(o, ",\"end_column\":");
      o = jsonw_raw_uint(o, s->end_column);
    }
  }
  if (s->inlined)
    o = LIT(o, ",\"inlined\":true");
  if (s->hidden)
    o = LIT(o, ",\"hidden\":true");
  if (s->has_offset) {
    o = LIT(o, ",\"function_offset\":");
    o = jsonw_raw_hex(o, s->function_offset);
  }
  if (s->async_method) {
    o = LIT(o, ",\"async_method\":");
    if (!(o = jsonw_raw_str(o, s->async_method, p->len[PL_ASYNC])))
      return NULL;
  }
  if (p->gen) {
    o = LIT(o, ",\"user_method\":");
    if (!(o = jsonw_raw_str(o, s->user_method, p->len[PL_USER])))
      return NULL;
    o = LIT(o, ",\"generated\":");
    o = jsonw_raw_str(o, p->gen, strlen(p->gen));
    if (s->local_function) {
      o = LIT(o, ",\"local_function\":");
      if (!(o = jsonw_raw_str(o, s->local_function, p->len[PL_LOCAL])))
        return NULL;
    }
  }
  *o++ = '}';
  return o;
}

/* One symbol of an open "symbols" array in one pass; false with nothing
 * written for any other symbol or a writer in another state. */
static bool symbol_plain(jsonw *w, const render_module *rm, const st_symbol *s) {
  plain_sym ps;
  char url[PLAIN_URL];
  size_t need = plain_need(w, rm, s, &ps, url);
  char *p = need ? jsonw_raw_begin(w, need + 1, 1) : NULL;
  if (!p || !(p = plain_put(p, s, &ps)))
    return false;
  jsonw_raw_end(w, p);
  return true;
}

/* A frame whose address was found, in one pass:
 *   {"status":"ok","module":N,"rva":"0x..","symbols":[...]}, or for a
 *   managed frame {"status":"ok","module":N,"token":"0x06..","il_offset":N,
 *   "symbols":[...]}
 * every symbol as symbol_plain writes it (with a Source Link map to consult,
 * a frame of one symbol only).  false with nothing written for any other
 * frame, symbol or writer state: render_frame_w then writes it member by
 * member (the same bytes). */
static bool frame_plain(jsonw *w, const render_module *rm, const render_frame *f) {
  const st_answer *a = f->answer;
  if (a->nsyms < 1 || a->nsyms > ST_MAX_INLINE_DEPTH + 1)
    return false;
  enum { MAXS = ST_MAX_INLINE_DEPTH + 1 };
  plain_sym ps[MAXS];
  char url[PLAIN_URL];
  size_t need = 160; /* the frame's own text: under 70 bytes, three numbers of at most 20 */
  for (int i = 0; i < a->nsyms; i++) {
    size_t n = plain_need(w, rm, &a->syms[i], &ps[i], i == 0 && a->nsyms == 1 ? url : NULL);
    if (!n || n > w->max / 128) /* 65 symbols of at most max / 128 bytes cannot wrap */
      return false;
    need += n;
  }
  char *p = jsonw_raw_begin(w, need, 3);
  if (!p)
    return false;
  p = LIT(p, "{\"status\":\"ok\",\"module\":");
  p = jsonw_raw_uint(p, (uint64_t)f->module);
  if (f->managed) {
    p = LIT(p, ",\"token\":");
    p = jsonw_raw_hexw(p, f->rva_or_token, 8);
    p = LIT(p, ",\"il_offset\":");
    p = jsonw_raw_uint(p, f->il_offset);
  } else {
    p = LIT(p, ",\"rva\":");
    p = jsonw_raw_hex(p, f->rva_or_token);
  }
  p = LIT(p, ",\"symbols\":[");
  for (int i = 0; i < a->nsyms; i++) {
    if (i)
      *p++ = ',';
    if (!(p = plain_put(p, &a->syms[i], &ps[i])))
      return false;
  }
  p = LIT(p, "]}");
  jsonw_raw_end(w, p);
  return true;
}

/* The "symbols" array for an answer (innermost first). */
static void render_symbols(jsonw *w, const render_module *rm, const st_answer *a) {
  jsonw_arr(w);
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *s = &a->syms[i];
    if (symbol_plain(w, rm, s))
      continue;
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
        if (render_source_link(rm, s->file, url, sizeof url)) {
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
    const char *gen = generated_name(s->generated);
    if (s->user_method && gen) {
      jsonw_key(w, "user_method");
      jsonw_str(w, s->user_method);
      jsonw_key(w, "generated");
      jsonw_str(w, gen);
      if (s->local_function) {
        jsonw_key(w, "local_function");
        jsonw_str(w, s->local_function);
      }
    }
    jsonw_obj_end(w);
  }
  jsonw_arr_end(w);
}

void render_frame_w(jsonw *w, const render_module *rm, const render_frame *f) {
  if (f->answer && f->module >= 0 && f->has_address && !f->has_instruction_addr &&
      !f->adjusted && !f->error && f->retry_after < 0 && !f->input && f->status[0] == 'o' &&
      f->status[1] == 'k' && !f->status[2] && frame_plain(w, rm, f))
    return;
  jsonw_obj(w);
  if (f->module >= 0 && f->status[0] == 'o' && f->status[1] == 'k' && !f->status[2]) {
    jsonw_members_key(w, "\"status\":\"ok\",\"module\""); /* the usual frame's start */
    jsonw_int(w, f->module);
  } else {
    jsonw_key(w, "status");
    jsonw_str(w, f->status);
    if (f->module >= 0) {
      jsonw_key(w, "module");
      jsonw_int(w, f->module);
    }
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
  if (f->has_instruction_addr) {
    jsonw_key(w, "instruction_addr");
    jsonw_hex(w, f->instruction_addr, 0);
  }
  if (f->adjusted) {
    jsonw_key(w, "adjust_instruction_addr");
    jsonw_bool(w, true);
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
  render_frame f = {"ok", module, true, is_managed, rva_or_token, il_offset, a, NULL, -1, NULL,
                    false, 0, false};
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

/* One CodeView entry's identity fields, as the entry and the top level both
 * carry them. */
typedef struct {
  bool has_name;
  char name[MODULE_NAME_MAX + 1];
  char id[48];
  bool has_bp;
  char bp[48];
} pe_ident;

static void pe_ident_of(const pe_codeview *cv, pe_ident *o) {
  char hex[33];
  const char *why;
  o->has_name = module_parse_file_name(cv->path, o->name, sizeof o->name, &why);
  module_debug_id(cv->guid, cv->age, o->id);
  if (cv->portable)
    o->id[36] = '\0'; /* a Portable PDB is named by its GUID alone (its age is ignored) */
  module_guid_hex(cv->guid, hex);
  o->has_bp = !cv->portable;
  snprintf(o->bp, sizeof o->bp, "%s%X", hex, cv->age);
}

static void pe_ident_w(jsonw *w, const pe_ident *id) {
  jsonw_key(w, "debug_file");
  if (id->has_name)
    jsonw_str(w, id->name);
  else
    jsonw_null(w);
  jsonw_key(w, "debug_id");
  jsonw_str(w, id->id);
  jsonw_key(w, "breakpad_id");
  if (id->has_bp)
    jsonw_str(w, id->bp);
  else
    jsonw_null(w);
}

char *render_pe_json(const pe_info *pe, const char *file, const char *code_file,
                     const symtab *embedded) {
  jsonw w;
  jsonw_init(&w, 1024, 0);
  jsonw_obj(&w);
  jsonw_key(&w, "file");
  jsonw_str(&w, file);
  jsonw_key(&w, "format");
  jsonw_str(&w, "pe");
  jsonw_key(&w, "machine");
  jsonw_hex(&w, pe->machine, 0);
  jsonw_key(&w, "managed");
  jsonw_bool(&w, pe->is_dotnet);
  char code_id[24];
  snprintf(code_id, sizeof code_id, "%08X%x", pe->timestamp, pe->size_of_image);
  jsonw_key(&w, "code_file");
  jsonw_str(&w, code_file);
  jsonw_key(&w, "code_id");
  jsonw_str(&w, code_id);
  int n = pe->ncodeview < PE_MAX_CODEVIEW ? pe->ncodeview : PE_MAX_CODEVIEW;
  if (n > 0) { /* the first entry's identity at the top too */
    pe_ident id;
    pe_ident_of(&pe->codeview[0], &id);
    pe_ident_w(&w, &id);
  }
  jsonw_key(&w, "codeview");
  jsonw_arr(&w);
  for (int i = 0; i < n; i++) {
    const pe_codeview *cv = &pe->codeview[i];
    pe_ident id;
    pe_ident_of(cv, &id);
    jsonw_obj(&w);
    pe_ident_w(&w, &id);
    jsonw_key(&w, "format");
    jsonw_str(&w, cv->portable ? "portable" : "windows");
    jsonw_key(&w, "pdb_path");
    jsonw_str(&w, cv->path);
    jsonw_obj_end(&w);
  }
  jsonw_arr_end(&w);
  jsonw_key(&w, "embedded_pdb");
  if (embedded)
    render_symtab_w(&w, embedded, file);
  else
    jsonw_bool(&w, false);
  jsonw_obj_end(&w);
  return line_of(&w);
}
