/*
 * request_ref.h - request bodies read as they were before the walker had a
 * scanner of its own: jwalk.c handed every key and scalar to json_loadb and
 * request.c read each frame from a jansson tree.  Kept for the tests only,
 * as the reference the walker's own scanner is compared with
 * (test_request_diff.c, fuzz_request_diff.c): same accept or refuse, same
 * error text, same arrays.  Copied from jwalk.h, jwalk.c and request.c at
 * 8e90cc1 by tests/unit/make_request_ref.py; only the names changed (ref_
 * prefix) and everything is static.
 */
#ifndef PDBSYM_TEST_REQUEST_REF_H
#define PDBSYM_TEST_REQUEST_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "request.h"

#define REF_JW_MAX_DEPTH 2048

typedef struct ref_jw_level ref_jw_level;

typedef struct {
  const char *s;
  size_t n;
  size_t pos;      /* the cursor: the next byte to read */
  unsigned depth;  /* containers open */
  unsigned cap;
  ref_jw_level *lv;
  bool failed;
  char error[320];
} ref_jwalk;

struct ref_jw_level {
  char kind;      /* '{' or '[' */
  size_t count;   /* members or elements begun */
  json_t *seen;   /* objects: the keys so far (a jansson object as a set) */
};

static const size_t REF_JW_LOAD_FLAGS = JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES;

static inline void ref_jw_init(ref_jwalk *w, const char *text, size_t len) {
  memset(w, 0, sizeof *w);
  w->s = text ? text : "";
  w->n = text ? len : 0;
}

static inline void ref_jw_init_at(ref_jwalk *w, const char *text, size_t len, size_t pos) {
  ref_jw_init(w, text, len);
  w->pos = pos <= w->n ? pos : w->n;
}

static inline void ref_jw_free(ref_jwalk *w) {
  for (unsigned i = 0; i < w->depth; i++)
    json_decref(w->lv[i].seen);
  free(w->lv);
  w->lv = NULL;
  w->depth = w->cap = 0;
}

/* line and column of a byte offset, counted as jansson counts them (a column
 * is a character: UTF-8 continuation bytes do not count) */
static inline void ref_where(const ref_jwalk *w, size_t off, int *line, int *col) {
  int l = 1, c = 0;
  if (off > w->n)
    off = w->n;
  for (size_t i = 0; i < off; i++) {
    unsigned char b = (unsigned char)w->s[i];
    if (b == '\n') {
      l++;
      c = 0;
    } else if ((b & 0xc0) != 0x80) {
      c++;
    }
  }
  *line = l;
  *col = c;
}

/* "WHAT near 'TOKEN' (line L, column C)" as a whole-text json_loadb words
 * it: the token is what jansson's lexer reads at off (a one-character
 * punctuation, a value, or the text of an invalid token), named when it is
 * 20 bytes or shorter, "end of file" past the text; the position is that of
 * the token's last character.  When the lexer itself fails on the token (a
 * string without its closing quote, a control character, bytes that are not
 * UTF-8, a number too big), its error is the one reported, as jansson
 * reports it. */
static inline bool ref_fail_at(ref_jwalk *w, size_t off, const char *what) {
  if (w->failed)
    return false;
  w->failed = true;
  int line, col;
  if (off >= w->n) {
    ref_where(w, off, &line, &col);
    snprintf(w->error, sizeof w->error, "%s near end of file (line %d, column %d)", what, line, col);
    return false;
  }
  size_t k = 1;
  char c = w->s[off];
  if (!c || !strchr("{}[],:", c)) {
    json_error_t e;
    json_t *v = json_loadb(w->s + off, w->n - off, REF_JW_LOAD_FLAGS, &e);
    if (e.position > 0)
      k = (size_t)e.position;
    if (v) {
      json_decref(v);
    } else if (strncmp(e.text, "invalid token", 13)) {
      ref_where(w, off + k, &line, &col);
      snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", e.text, line, col);
      return false;
    }
  }
  ref_where(w, off + k, &line, &col);
  if (k <= 20)
    snprintf(w->error, sizeof w->error, "%s near '%.*s' (line %d, column %d)", what, (int)k, w->s + off,
             line, col);
  else
    snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", what, line, col);
  return false;
}

static inline void ref_skip_ws(ref_jwalk *w) {
  while (w->pos < w->n) {
    char c = w->s[w->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      break;
    w->pos++;
  }
}

static inline int ref_jw_peek(ref_jwalk *w) {
  if (w->failed)
    return -1;
  ref_skip_ws(w);
  return w->pos < w->n ? (unsigned char)w->s[w->pos] : -1;
}

static inline size_t ref_jw_tell(ref_jwalk *w) {
  ref_skip_ws(w);
  return w->pos;
}

static inline bool ref_push(ref_jwalk *w, char kind) {
  if (w->depth >= REF_JW_MAX_DEPTH)
    return ref_fail_at(w, w->pos, "maximum parsing depth reached");
  if (w->depth == w->cap) {
    unsigned ncap = w->cap ? w->cap * 2 : 8;
    ref_jw_level *p = realloc(w->lv, ncap * sizeof *p);
    if (!p)
      return ref_fail_at(w, w->pos, "out of memory");
    w->lv = p;
    w->cap = ncap;
  }
  w->lv[w->depth++] = (ref_jw_level){kind, 0, NULL};
  w->pos++; /* the '{' or '[' */
  return true;
}

static inline void ref_pop(ref_jwalk *w) {
  json_decref(w->lv[w->depth - 1].seen);
  w->depth--;
  w->pos++; /* the '}' or ']' */
}

static inline bool ref_jw_object_begin(ref_jwalk *w) {
  if (ref_jw_peek(w) != '{')
    return ref_fail_at(w, w->pos, "'{' expected");
  return ref_push(w, '{');
}

static inline bool ref_jw_array_begin(ref_jwalk *w) {
  if (ref_jw_peek(w) != '[')
    return ref_fail_at(w, w->pos, "'[' expected");
  return ref_push(w, '[');
}

/* jansson reads one value at the cursor */
static inline json_t *ref_load_one(ref_jwalk *w) {
  if (w->failed)
    return NULL;
  ref_skip_ws(w);
  size_t start = w->pos;
  if (start >= w->n) {
    ref_fail_at(w, start, "unexpected token");
    return NULL;
  }
  /* jansson counts every value, scalars too, toward its depth limit */
  if (w->depth + 1 > REF_JW_MAX_DEPTH) {
    ref_fail_at(w, start, "maximum parsing depth reached");
    return NULL;
  }
  json_error_t e;
  json_t *v = json_loadb(w->s + start, w->n - start, REF_JW_LOAD_FLAGS, &e);
  if (!v) {
    w->failed = true;
    size_t off = start + (e.position > 0 ? (size_t)e.position : 0);
    int line, col;
    ref_where(w, off, &line, &col);
    snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", e.text, line, col);
    return NULL;
  }
  w->pos = start + (size_t)e.position;
  return v;
}

static inline int ref_jw_array_next(ref_jwalk *w) {
  if (w->failed || !w->depth || w->lv[w->depth - 1].kind != '[')
    return -1;
  ref_jw_level *lv = &w->lv[w->depth - 1];
  int c = ref_jw_peek(w);
  if (c == ']' && !lv->count) {
    ref_pop(w);
    return 0;
  }
  if (lv->count) {
    if (c == ']') {
      ref_pop(w);
      return 0;
    }
    if (c != ',')
      return ref_fail_at(w, w->pos, "']' expected"), -1;
    w->pos++;
    if (ref_jw_peek(w) == ']')
      return ref_fail_at(w, w->pos, "unexpected token"), -1;
  }
  if (w->pos >= w->n)
    return ref_fail_at(w, w->pos, "']' expected"), -1;
  lv->count++;
  return 1;
}

static inline int ref_jw_object_next(ref_jwalk *w, json_t **key) {
  if (key)
    *key = NULL;
  if (w->failed || !w->depth || w->lv[w->depth - 1].kind != '{')
    return -1;
  int c = ref_jw_peek(w);
  ref_jw_level *lv = &w->lv[w->depth - 1];
  if (c == '}') {
    ref_pop(w);
    return 0;
  }
  if (lv->count) {
    if (c != ',')
      return ref_fail_at(w, w->pos, "'}' expected"), -1;
    w->pos++;
    c = ref_jw_peek(w);
  }
  if (c != '"')
    return ref_fail_at(w, w->pos, "string or '}' expected"), -1;
  size_t kpos = w->pos;
  json_t *k = ref_load_one(w);
  if (!k)
    return -1;
  if (!json_is_string(k)) { /* cannot happen after a '"' */
    json_decref(k);
    return ref_fail_at(w, kpos, "string or '}' expected"), -1;
  }
  const char *ks = json_string_value(k);
  size_t kl = json_string_length(k);
  if (memchr(ks, '\0', kl)) {
    json_decref(k);
    return ref_fail_at(w, kpos, "NUL byte in object key not supported"), -1;
  }
  if (!lv->seen)
    lv->seen = json_object();
  if (!lv->seen) {
    json_decref(k);
    return ref_fail_at(w, kpos, "out of memory"), -1;
  }
  if (json_object_getn(lv->seen, ks, kl)) {
    json_decref(k);
    return ref_fail_at(w, kpos, "duplicate object key"), -1;
  }
  if (json_object_setn_new(lv->seen, ks, kl, json_null())) {
    json_decref(k);
    return ref_fail_at(w, kpos, "out of memory"), -1;
  }
  if (ref_jw_peek(w) != ':') {
    json_decref(k);
    return ref_fail_at(w, w->pos, "':' expected"), -1;
  }
  w->pos++;
  if (ref_jw_peek(w) < 0) {
    json_decref(k);
    return ref_fail_at(w, w->pos, "unexpected token"), -1;
  }
  lv->count++;
  if (key)
    *key = k;
  else
    json_decref(k);
  return 1;
}

static inline json_t *ref_jw_value(ref_jwalk *w) { return ref_load_one(w); }

static inline bool ref_jw_skip(ref_jwalk *w) {
  int c = ref_jw_peek(w);
  int r;
  if (c == '[') {
    if (!ref_jw_array_begin(w))
      return false;
    while ((r = ref_jw_array_next(w)) == 1)
      if (!ref_jw_skip(w))
        return false;
    return r == 0;
  }
  if (c == '{') {
    if (!ref_jw_object_begin(w))
      return false;
    while ((r = ref_jw_object_next(w, NULL)) == 1)
      if (!ref_jw_skip(w))
        return false;
    return r == 0;
  }
  json_t *v = ref_load_one(w);
  json_decref(v);
  return v != NULL;
}

static inline bool ref_jw_finish(ref_jwalk *w) {
  if (w->failed)
    return false;
  if (ref_jw_peek(w) >= 0)
    return ref_fail_at(w, w->pos, "end of file expected");
  return true;
}

static inline bool ref_jw_fail(ref_jwalk *w, const char *what) {
  ref_skip_ws(w);
  return ref_fail_at(w, w->pos, what);
}

/* ---- reasons of invalid frames ----------------------------------------------- */

enum {
  WHY_NONE,
  WHY_RVA_RANGE,
  WHY_RVA_32,
  WHY_IADDR_RANGE,
  WHY_TOKEN,
  WHY_IL_RANGE,
  WHY_BAD_INDEX,
  WHY_NO_IMAGE,
  WHY_BELOW_IMAGE,
  WHY_PAST_IMAGE,
  WHY_FAR_IMAGE,
  WHY_RA_ZERO,
  WHY__COUNT
};
static const char *const why_text[WHY__COUNT] = {
    "",
    "rva out of range",
    "rva does not fit in 32 bits",
    "instruction_addr is negative or wider than 64 bits",
    "token is not a MethodDef token (0x06xxxxxx)",
    "il_offset out of range",
    "module index is not in modules",
    "instruction_addr needs its module's image_addr",
    "instruction_addr is below its module's image_addr",
    "instruction_addr is past its module's image_addr + image_size",
    "instruction_addr is 4 GiB or more past its module's image_addr",
    "a return address cannot be its module's first byte (rva 0)",
};

static inline const char *ref_rq_why_text(uint16_t why) { return why < WHY__COUNT ? why_text[why] : ""; }

/* ---- numbers: JSON integers or "0x" hex strings ----------------------------- */

typedef enum { NUM_OK, NUM_BAD, NUM_RANGE } num_result;

static inline num_result ref_get_number(const json_t *v, uint64_t max, uint64_t *out) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i > max)
      return NUM_RANGE;
    *out = (uint64_t)i;
    return NUM_OK;
  }
  if (!json_is_string(v))
    return NUM_BAD;
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (n < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
    return NUM_BAD;
  uint64_t acc = 0;
  bool over = false;
  for (size_t i = 2; i < n; i++) {
    int c = (unsigned char)s[i], d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return NUM_BAD;
    if (acc > (UINT64_MAX >> 4))
      over = true;
    acc = (acc << 4) | (uint64_t)d;
  }
  if (over || acc > max)
    return NUM_RANGE;
  *out = acc;
  return NUM_OK;
}

/* ---- errors --------------------------------------------------------------------- */

/* module.h's reasons may start with the field's name ("debug_id: expected
 * ..."); the error names the field already, so that prefix is dropped. */
static inline const char *ref_rq_reason(const char *why) {
  if (!why)
    return "contains a NUL byte";
  const char *p = why;
  while ((*p >= 'a' && *p <= 'z') || *p == '_')
    p++;
  return (p > why && p[0] == ':' && p[1] == ' ') ? p + 2 : why;
}

/* Records a 400's message (msg followed by detail, if any) and field. */
static inline bool ref_fail(rq_error *e, const char *field, const char *msg, const char *detail) {
  snprintf(e->field, sizeof e->field, "%s", field);
  snprintf(e->msg, sizeof e->msg, "%s%s", msg, detail ? detail : "");
  return false;
}

static inline rq_result ref_bad(rq_error *out, const rq_error *e) {
  *out = *e;
  return RQ_BAD;
}

static inline rq_result ref_bad_msg(rq_error *out, const char *field, const char *msg) {
  ref_fail(out, field ? field : "", msg, NULL);
  return RQ_BAD;
}

static inline rq_result ref_bad_json(rq_error *out, const ref_jwalk *w) {
  snprintf(out->field, sizeof out->field, "%s", "");
  snprintf(out->msg, sizeof out->msg, "invalid JSON: %s", w->error);
  return RQ_BAD;
}

/* The string of a JSON string without NUL bytes, else NULL. */
static inline const char *ref_given_string(const json_t *v) {
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
    return NULL;
  return json_string_value(v);
}

/* A file name from a JSON string (module.h's rules); a NUL inside the string
 * is refused too (why is then NULL: rq_reason names it). */
static inline bool ref_parse_name(const json_t *s, char out[MODULE_NAME_MAX + 1], const char **why) {
  *why = NULL;
  return ref_given_string(s) &&
         module_parse_file_name(json_string_value(s), out, MODULE_NAME_MAX + 1, why);
}

/* ---- growing arrays in the budget -------------------------------------------------- */

/* Room for n elements of size sz in b; false when the budget cannot take it. */
static inline bool ref_room(rm_buf *b, size_t n, size_t sz) {
  if (n > SIZE_MAX / sz)
    return false;
  return rm_buf_reserve(b, n * sz);
}

/* Appends a NUL-terminated copy of s to the request's texts; false when the
 * budget cannot take it. */
static inline bool ref_put_text(rq_request *r, const char *s, uint32_t *off) {
  size_t n = strlen(s), at = r->names.len;
  if (n + 1 >= (size_t)RQ_NO_TEXT - at || !rm_buf_append(&r->names, s, n + 1))
    return false;
  *off = (uint32_t)at;
  return true;
}

/* The arrays are final: give back what their growth reserved beyond them
 * (they are re-pointed, realloc may move them). */
static inline void ref_shrink(rq_request *r) {
  rm_buf_shrink(&r->mods_b);
  rm_buf_shrink(&r->frames_b);
  rm_buf_shrink(&r->v5_b);
  rm_buf_shrink(&r->stacks_b);
  rm_buf_shrink(&r->jobs_b);
  rm_buf_shrink(&r->names);
  r->mods = (rq_module *)(void *)r->mods_b.p;
  r->frames = (rq_frame *)(void *)r->frames_b.p;
  r->v5_frames = (rq_v5_frame *)(void *)r->v5_b.p;
  r->stacks = (rq_stack *)(void *)r->stacks_b.p;
  r->jobs = (rq_job *)(void *)r->jobs_b.p;
}

static inline void ref_set_grant(rq_request *r, rm_grant *g) {
  r->mods_b.grant = r->frames_b.grant = r->v5_b.grant = r->stacks_b.grant = r->jobs_b.grant =
      r->names.grant = g;
}

static inline void ref_rq_free(rq_request *r) {
  rm_buf_free(&r->mods_b);
  rm_buf_free(&r->frames_b);
  rm_buf_free(&r->v5_b);
  rm_buf_free(&r->stacks_b);
  rm_buf_free(&r->jobs_b);
  rm_buf_free(&r->names);
  memset(r, 0, sizeof *r);
}

/* ---- POST /symbolicate: one module ------------------------------------------------------- */

/* The first problem of a module: it fails alone (docs/contract.md, "Modules"). */
typedef struct {
  bool invalid;
  char field[112]; /* "modules[2].debug_id" */
  char why[200];   /* "invalid debug_id: the age is longer than 8 hex digits" */
} mod_problem;

/* The field is modules[i] and sfx (".debug_id"), formatted only when the
 * module fails, not for every module that parses. */
static inline void ref_module_invalid(mod_problem *p, size_t i, const char *sfx, const char *msg,
                           const char *detail) {
  if (p->invalid)
    return; /* the first problem found is the one reported */
  p->invalid = true;
  snprintf(p->field, sizeof p->field, "modules[%zu]%s", i, sfx);
  snprintf(p->why, sizeof p->why, "%s%s", msg, detail ? detail : "");
}

/* One entry of "modules".  Nothing in it fails the request: a bad field
 * makes the module invalid, with its texts kept in r's names; false only
 * when the budget cannot take those. */
static inline bool ref_parse_module(rq_request *r, const json_t *m, size_t i, rq_module *out) {
  const char *f; /* the field at fault after "modules[i]" */
  const char *why = NULL;
  mod_problem p;
  p.invalid = false;
  memset(out, 0, sizeof *out);
  out->field_off = out->why_off = out->gfile_off = out->gid_off = RQ_NO_TEXT;
  if (!json_is_object(m)) {
    ref_module_invalid(&p, i, "", "a module must be an object", NULL);
    goto texts;
  }
  const json_t *fm = json_object_get(m, "format");
  f = ".format";
  if (fm && !json_is_null(fm)) {
    const char *s = json_is_string(fm) ? json_string_value(fm) : "";
    if (!strcmp(s, "windows"))
      out->id.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(s, "portable"))
      out->id.format = ST_FORMAT_PORTABLE;
    else
      ref_module_invalid(&p, i, f, "format must be \"windows\" or \"portable\"", NULL);
  }
  const json_t *df = json_object_get(m, "debug_file");
  f = ".debug_file";
  if (!df)
    ref_module_invalid(&p, i, f, "debug_file is required", NULL);
  else if (!json_is_string(df))
    ref_module_invalid(&p, i, f, "debug_file must be a string", NULL);
  else if (!ref_parse_name(df, out->id.debug_file, &why))
    ref_module_invalid(&p, i, f, "invalid debug_file: ", ref_rq_reason(why));
  const json_t *di = json_object_get(m, "debug_id");
  f = ".debug_id";
  if (!di)
    ref_module_invalid(&p, i, f, "debug_id is required", NULL);
  else if (!json_is_string(di))
    ref_module_invalid(&p, i, f, "debug_id must be a string", NULL);
  else if (!ref_given_string(di))
    ref_module_invalid(&p, i, f, "invalid debug_id: contains a NUL byte", NULL);
  else if (!p.invalid && !module_set_debug_id(&out->id, json_string_value(di), &why))
    ref_module_invalid(&p, i, f, "invalid debug_id: ", ref_rq_reason(why));
  else if (!p.invalid) {
    uint8_t g[16];
    uint32_t age;
    bool has_age = true;
    module_parse_debug_id_ex(json_string_value(di), g, &age, &has_age, NULL);
    out->no_age = !has_age;
  }
  const json_t *cf = json_object_get(m, "code_file");
  f = ".code_file";
  if (cf && !json_is_null(cf)) {
    if (!json_is_string(cf))
      ref_module_invalid(&p, i, f, "code_file must be a string", NULL);
    else if (!ref_parse_name(cf, out->id.code_file, &why))
      ref_module_invalid(&p, i, f, "invalid code_file: ", ref_rq_reason(why));
  }
  const json_t *ci = json_object_get(m, "code_id");
  f = ".code_id";
  if (ci && !json_is_null(ci)) {
    if (!ref_given_string(ci))
      ref_module_invalid(&p, i, f, "code_id must be a string", NULL);
    else if (!module_parse_code_id(json_string_value(ci), &out->id.code_timestamp,
                                   &out->id.code_size, &why))
      ref_module_invalid(&p, i, f, "invalid code_id: ", ref_rq_reason(why));
    else {
      out->id.has_code_id = true;
      /* the casing the request spells: stores are probed in it too */
      snprintf(out->id.code_id_text, sizeof out->id.code_id_text, "%s", json_string_value(ci));
    }
  }
  const json_t *ia = json_object_get(m, "image_addr");
  const json_t *is = json_object_get(m, "image_size");
  uint64_t v = 0;
  f = ".image_addr";
  if (ia && !json_is_null(ia)) {
    num_result nr = ref_get_number(ia, UINT64_MAX, &v);
    if (nr == NUM_BAD)
      ref_module_invalid(&p, i, f, "image_addr must be an integer or a 0x hex string", NULL);
    else if (nr == NUM_RANGE)
      ref_module_invalid(&p, i, f, "image_addr is negative or wider than 64 bits", NULL);
    else
      out->has_image = true, out->image_addr = v;
  }
  f = ".image_size";
  if (is && !json_is_null(is)) {
    num_result nr = ref_get_number(is, UINT64_MAX, &v);
    if (nr == NUM_BAD)
      ref_module_invalid(&p, i, f, "image_size must be an integer or a 0x hex string", NULL);
    else if (nr == NUM_RANGE || v == 0)
      ref_module_invalid(&p, i, f, "image_size must be from 1 to 2^64 - 1", NULL);
    else if (!(ia && !json_is_null(ia)))
      ref_module_invalid(&p, i, f, "image_size without image_addr", NULL);
    else if (out->has_image && v > UINT64_MAX - out->image_addr)
      ref_module_invalid(&p, i, f, "image_addr + image_size is past 2^64", NULL);
    else
      out->image_size = v;
  }
texts:
  if (!p.invalid)
    return true;
  /* what its answer says: the fields as given, the problem and where */
  out->invalid = true;
  const json_t *gf = json_is_object(m) ? json_object_get(m, "debug_file") : NULL;
  const json_t *gi = json_is_object(m) ? json_object_get(m, "debug_id") : NULL;
  return ref_put_text(r, p.field, &out->field_off) && ref_put_text(r, p.why, &out->why_off) &&
         (!json_is_string(gf) || ref_put_text(r, json_string_value(gf), &out->gfile_off)) &&
         (!json_is_string(gi) || ref_put_text(r, json_string_value(gi), &out->gid_off));
}

/* ---- POST /symbolicate: one frame --------------------------------------------------------- */

static inline void ref_frame_invalid(rq_frame *fr, uint16_t why) {
  fr->flags |= RQ_F_INVALID;
  fr->why = why;
}

/* ref_fail() for frames[i] and the field sfx (".rva"); the name is formatted
 * only when a frame fails, not for every frame that parses. */
static inline bool ref_frame_fail(rq_error *e, size_t i, const char *sfx, const char *msg) {
  char f[96];
  snprintf(f, sizeof f, "frames[%zu]%s", i, sfx);
  return ref_fail(e, f, msg, NULL);
}

static inline bool ref_parse_frame(const json_t *fr, size_t i, rq_frame *out, rq_error *err) {
  memset(out, 0, sizeof *out);
  out->adjust = -1;
  if (!json_is_object(fr))
    return ref_frame_fail(err, i, "", "a frame must be an object");
  uint64_t v = 0;
  const json_t *mo = json_object_get(fr, "module");
  if (!mo)
    return ref_frame_fail(err, i, ".module", "module is required");
  num_result r = ref_get_number(mo, UINT32_MAX, &v);
  if (r == NUM_BAD)
    return ref_frame_fail(err, i, ".module", "module must be an integer or a 0x hex string");
  if (r == NUM_OK) {
    out->module = (uint32_t)v;
    out->flags |= RQ_F_INDEX_OK;
  }
  const json_t *rva = json_object_get(fr, "rva");
  const json_t *ia = json_object_get(fr, "instruction_addr");
  const json_t *tok = json_object_get(fr, "token");
  int given = (rva != NULL) + (ia != NULL) + (tok != NULL);
  if (given > 1)
    return ref_frame_fail(err, i, "",
                      "a frame has one of rva, instruction_addr (native) or token (managed)");
  if (given == 0)
    return ref_frame_fail(
        err, i, "",
        "a frame needs rva or instruction_addr (native), or token and il_offset (managed)");
  const json_t *adj = json_object_get(fr, "adjust_instruction_addr");
  if (adj && !json_is_null(adj)) {
    if (!json_is_boolean(adj))
      return ref_frame_fail(err, i, ".adjust_instruction_addr",
                        "adjust_instruction_addr must be true or false");
    out->adjust = json_is_true(adj) ? 1 : 0;
  }
  const json_t *stk = json_object_get(fr, "stack");
  if (stk && !json_is_null(stk) && ref_get_number(stk, UINT64_MAX, &out->stack) != NUM_OK)
    return ref_frame_fail(err, i, ".stack", "stack must be a non-negative integer");
  if (rva || ia) {
    out->kind = RQ_NATIVE;
    r = ref_get_number(rva ? rva : ia, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return rva ? ref_frame_fail(err, i, ".rva", "rva must be an integer or a 0x hex string")
                 : ref_frame_fail(err, i, ".instruction_addr",
                              "instruction_addr must be an integer or a 0x hex string");
    if (rva) {
      if (r == NUM_OK) {
        out->flags |= RQ_F_HAS_RVA;
        out->rva = v;
      }
      if (r == NUM_RANGE)
        ref_frame_invalid(out, WHY_RVA_RANGE);
      else if (v > UINT32_MAX)
        ref_frame_invalid(out, WHY_RVA_32);
    } else {
      if (r == NUM_OK) {
        out->flags |= RQ_F_HAS_IADDR;
        out->aux = v;
      } else {
        ref_frame_invalid(out, WHY_IADDR_RANGE);
      }
    }
    return true;
  }
  out->kind = RQ_MANAGED;
  r = ref_get_number(tok, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return ref_frame_fail(err, i, ".token", "token must be an integer or a 0x hex string");
  out->rva = r == NUM_OK ? v : 0;
  if (r == NUM_RANGE || v > UINT32_MAX || (v >> 24) != 0x06)
    ref_frame_invalid(out, WHY_TOKEN);
  const json_t *il = json_object_get(fr, "il_offset");
  if (!il)
    return ref_frame_fail(err, i, ".il_offset", "a managed frame needs il_offset");
  r = ref_get_number(il, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return ref_frame_fail(err, i, ".il_offset", "il_offset must be an integer or a 0x hex string");
  out->aux = r == NUM_OK ? v : 0;
  if (!(out->flags & RQ_F_INVALID) && (r == NUM_RANGE || v > UINT32_MAX))
    ref_frame_invalid(out, WHY_IL_RANGE);
  return true;
}

/* ---- absolute addresses and return addresses (api.md, "Absolute addresses") --- */

#define RQ_F_FIRST 128 /* place_frames: the first frame of its stack (the leaf) */

typedef struct {
  uint64_t stack;
  size_t index;
} stack_pos;

static inline int ref_cmp_stack_pos(const void *pa, const void *pb) {
  const stack_pos *a = pa, *b = pb;
  if (a->stack != b->stack)
    return a->stack < b->stack ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* Marks the first frame of every stack (the frames sharing a "stack" number,
 * in request order); false when the budget cannot take the sort. */
static inline bool ref_mark_leaves(rq_request *r, rm_grant *grant) {
  size_t nf = r->nframes;
  bool one = true;
  for (size_t i = 1; i < nf && one; i++)
    one = r->frames[i].stack == r->frames[0].stack;
  if (one) { /* the usual case: one stack (no "stack" given) */
    if (nf)
      r->frames[0].flags |= RQ_F_FIRST;
    return true;
  }
  rm_buf tmp = {0};
  tmp.grant = grant;
  if (!ref_room(&tmp, nf, sizeof(stack_pos)))
    return false;
  stack_pos *pos = (stack_pos *)(void *)tmp.p;
  for (size_t i = 0; i < nf; i++)
    pos[i] = (stack_pos){r->frames[i].stack, i};
  qsort(pos, nf, sizeof *pos, ref_cmp_stack_pos);
  for (size_t i = 0; i < nf; i++)
    if (i == 0 || pos[i].stack != pos[i - 1].stack)
      r->frames[pos[i].index].flags |= RQ_F_FIRST;
  rm_buf_free(&tmp);
  return true;
}

/* Every frame against its module: an index that names no module, or an
 * invalid one, makes the frame invalid; a native frame's RVA from
 * instruction_addr - image_addr; and whether it is looked up as a return
 * address: adjust_instruction_addr when the frame gives it, else by the
 * request's mode, where the first frame of a stack is the leaf.  Managed
 * frames are never adjusted.  false: the budget could not take the sort. */
static inline bool ref_place_frames(rq_request *r, rm_grant *grant) {
  if (r->adjust == RQ_ADJ_ALL_BUT_FIRST && !ref_mark_leaves(r, grant))
    return false;
  for (size_t i = 0; i < r->nframes; i++) {
    rq_frame *fr = &r->frames[i];
    bool first = fr->flags & RQ_F_FIRST;
    fr->flags &= (uint8_t)~RQ_F_FIRST;
    if (!(fr->flags & RQ_F_INDEX_OK) || fr->module >= r->nmods) {
      fr->flags |= RQ_F_BAD_INDEX;
      ref_frame_invalid(fr, WHY_BAD_INDEX);
      continue;
    }
    const rq_module *m = &r->mods[fr->module]; /* the entry itself: its image_addr */
    if (m->invalid) {
      ref_frame_invalid(fr, RQ_WHY_MODULE);
      continue;
    }
    if ((fr->flags & RQ_F_INVALID) || fr->kind != RQ_NATIVE)
      continue;
    if (fr->flags & RQ_F_HAS_IADDR) {
      uint64_t ia = fr->aux;
      if (!m->has_image) {
        ref_frame_invalid(fr, WHY_NO_IMAGE);
        continue;
      }
      if (ia < m->image_addr) {
        ref_frame_invalid(fr, WHY_BELOW_IMAGE);
        continue;
      }
      if (m->image_size && ia - m->image_addr >= m->image_size) {
        ref_frame_invalid(fr, WHY_PAST_IMAGE);
        continue;
      }
      if (ia - m->image_addr > UINT32_MAX) {
        ref_frame_invalid(fr, WHY_FAR_IMAGE);
        continue;
      }
      fr->rva = ia - m->image_addr;
      fr->flags |= RQ_F_HAS_RVA;
    }
    bool adjust = fr->adjust >= 0                       ? fr->adjust == 1
                  : r->adjust == RQ_ADJ_ALL             ? true
                  : r->adjust == RQ_ADJ_ALL_BUT_FIRST   ? !first
                                                        : false;
    if (adjust && fr->rva == 0)
      ref_frame_invalid(fr, WHY_RA_ZERO);
    else if (adjust)
      fr->flags |= RQ_F_ADJUSTED;
  }
  return true;
}

/* ---- POST /symbolicate ---------------------------------------------------------------- */

typedef struct {
  const rq_limits *lim;
  rq_request *r;
  bool budget; /* an array did not fit in the budget */
  /* modules */
  bool mods_seen, mods_array;
  size_t nmods;       /* elements of "modules", all of them */
  /* frames */
  bool frames_seen, frames_array;
  size_t nframes;     /* elements of "frames", all of them */
  bool frame_err;
  rq_error ferr;
  /* the request's own fields */
  bool timeout_bad, adjust_bad;
} sym_walk;

/* An element refused for the budget alone: read as the piece it would have
 * been (request.c's refused_piece), nothing kept. */
static inline bool ref_refused_piece(ref_jwalk *w) {
  json_t *v = ref_jw_value(w);
  json_decref(v);
  return v != NULL;
}

/* Walks the "frames" array at the cursor, checking each frame (up to the
 * first bad one or max_frames) and counting them all. */
static inline void ref_sym_frames(sym_walk *s, ref_jwalk *w) {
  if (!ref_jw_array_begin(w))
    return;
  size_t i = 0;
  int k;
  while ((k = ref_jw_array_next(w)) == 1) {
    bool store = !s->frame_err && !s->budget && i < s->lim->max_frames;
    if (!store) {
      if (!(s->budget && !s->frame_err && i < s->lim->max_frames)) {
        ref_jw_skip(w);
      } else { /* refused for the budget alone: read and checked, not kept */
        json_t *v = ref_jw_value(w);
        if (!v)
          break;
        rq_frame unkept;
        if (!ref_parse_frame(v, i, &unkept, &s->ferr))
          s->frame_err = true;
        json_decref(v);
      }
    } else {
      json_t *v = ref_jw_value(w);
      if (!v)
        break;
      if (!ref_room(&s->r->frames_b, i + 1, sizeof(rq_frame))) {
        s->budget = true;
        rq_frame unkept; /* checked all the same */
        if (!ref_parse_frame(v, i, &unkept, &s->ferr))
          s->frame_err = true;
      } else {
        s->r->frames = (rq_frame *)(void *)s->r->frames_b.p;
        if (ref_parse_frame(v, i, &s->r->frames[i], &s->ferr))
          s->r->nframes = i + 1;
        else
          s->frame_err = true;
      }
      json_decref(v);
    }
    i++;
  }
  s->nframes = i;
}

static inline void ref_sym_modules(sym_walk *s, ref_jwalk *w) {
  if (!ref_jw_array_begin(w))
    return;
  size_t i = 0;
  int k;
  while ((k = ref_jw_array_next(w)) == 1) {
    bool store = !s->budget && i < s->lim->max_modules;
    if (!store) {
      if (!(s->budget && i < s->lim->max_modules))
        ref_jw_skip(w);
      else if (!ref_refused_piece(w))
        break;
    } else {
      json_t *v = ref_jw_value(w);
      if (!v)
        break;
      if (!ref_room(&s->r->mods_b, i + 1, sizeof(rq_module))) {
        s->budget = true;
      } else {
        s->r->mods = (rq_module *)(void *)s->r->mods_b.p;
        if (ref_parse_module(s->r, v, i, &s->r->mods[i]))
          s->r->nmods = i + 1;
        else
          s->budget = true;
      }
      json_decref(v);
    }
    i++;
  }
  s->nmods = i;
}

/* A request-level scalar at the cursor: its tree, or NULL (with *bad set)
 * when it is an object or array, which is skipped. */
static inline json_t *ref_scalar(ref_jwalk *w, bool *bad) {
  int t = ref_jw_peek(w);
  if (t == '{' || t == '[') {
    ref_jw_skip(w);
    *bad = true;
    return NULL;
  }
  return ref_jw_value(w);
}

static inline rq_result ref_rq_parse_symbolicate(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                               rq_request *out, rq_error *err) {
  ref_set_grant(out, grant);
  sym_walk s;
  memset(&s, 0, sizeof s);
  s.lim = lim;
  s.r = out;
  ref_jwalk w;
  ref_jw_init(&w, body, len);
  rq_result res = RQ_OK;
  int c = ref_jw_peek(&w);
  if (c != '{') {
    if (c == '[') {
      if (ref_jw_skip(&w) && ref_jw_finish(&w))
        res = ref_bad_msg(err, NULL, "the body must be a JSON object");
      else
        res = ref_bad_json(err, &w);
    } else {
      ref_jw_fail(&w, "'[' or '{' expected");
      res = ref_bad_json(err, &w);
    }
    ref_jw_free(&w);
    return res;
  }
  ref_jw_object_begin(&w);
  json_t *key;
  while (ref_jw_object_next(&w, &key) == 1) {
    const char *k = json_string_value(key);
    size_t kl = json_string_length(key);
    if (kl == 7 && !strcmp(k, "modules")) {
      s.mods_seen = true;
      s.mods_array = ref_jw_peek(&w) == '[';
      if (s.mods_array)
        ref_sym_modules(&s, &w);
      else
        ref_jw_skip(&w);
    } else if (kl == 6 && !strcmp(k, "frames")) {
      s.frames_seen = true;
      s.frames_array = ref_jw_peek(&w) == '[';
      if (s.frames_array)
        ref_sym_frames(&s, &w);
      else
        ref_jw_skip(&w);
    } else if (kl == 7 && !strcmp(k, "timeout")) {
      json_t *v = ref_scalar(&w, &s.timeout_bad);
      if (v && !json_is_null(v)) {
        double d = json_is_number(v) ? json_number_value(v) : -1;
        if (!json_is_number(v) || d < 0 || d != d)
          s.timeout_bad = true;
        else {
          out->has_timeout = true;
          out->timeout = d;
        }
      }
      json_decref(v);
    } else if (kl == 27 && !strcmp(k, "instruction_addr_adjustment")) {
      json_t *v = ref_scalar(&w, &s.adjust_bad);
      if (v && !json_is_null(v)) {
        const char *m = json_is_string(v) ? json_string_value(v) : "";
        if (!strcmp(m, "none"))
          out->adjust = RQ_ADJ_NONE;
        else if (!strcmp(m, "all_but_first"))
          out->adjust = RQ_ADJ_ALL_BUT_FIRST;
        else if (!strcmp(m, "all"))
          out->adjust = RQ_ADJ_ALL;
        else
          s.adjust_bad = true;
      }
      json_decref(v);
    } else {
      ref_jw_skip(&w);
    }
    json_decref(key);
  }
  if (w.failed || !ref_jw_finish(&w)) {
    res = ref_bad_json(err, &w);
    goto done;
  }
  /* the checks in the order of a whole-tree reading */
  char msg[256];
  if (!s.mods_seen || !s.mods_array) {
    res = ref_bad_msg(err, "modules", "modules must be an array");
    goto done;
  }
  if (!s.frames_seen || !s.frames_array) {
    res = ref_bad_msg(err, "frames", "frames must be an array");
    goto done;
  }
  if (s.nmods > lim->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", s.nmods,
             (unsigned long long)lim->max_modules);
    res = ref_bad_msg(err, "modules", msg);
    goto done;
  }
  if (s.nframes > lim->max_frames) {
    snprintf(msg, sizeof msg, "too many frames: %zu, the limit is max_frames = %llu", s.nframes,
             (unsigned long long)lim->max_frames);
    res = ref_bad_msg(err, "frames", msg);
    goto done;
  }
  if (s.timeout_bad) {
    res = ref_bad_msg(err, "timeout", "timeout must be a non-negative number of seconds");
    goto done;
  }
  if (s.adjust_bad) {
    res = ref_bad_msg(err, "instruction_addr_adjustment",
                  "instruction_addr_adjustment must be \"none\", \"all_but_first\" or \"all\"");
    goto done;
  }
  if (s.budget) {
    res = RQ_BUDGET;
    goto done;
  }
  if (s.frame_err) {
    res = ref_bad(err, &s.ferr);
    goto done;
  }
  if (!ref_place_frames(out, grant))
    res = RQ_BUDGET;
done:
  ref_jw_free(&w);
  if (res == RQ_OK)
    ref_shrink(out);
  return res;
}

/* ---- POST /symbolicate/v5 -------------------------------------------------------------- */

typedef struct {
  bool is_object;            /* false: "a job must be an object" */
  bool map_seen, map_array, stacks_seen, stacks_array;
  size_t map_count;          /* entries of memoryMap, all of them */
  size_t nframes;            /* frames of its stacks, all of them */
  bool map_err, stack_err;
  rq_error merr, serr;
  size_t nstacks;            /* stacks, all of them */
  rq_job job;                /* where its entries are in the arrays */
  bool bare;                 /* the top level as a job (dropped if "jobs" is there) */
  char prefix[32];           /* "jobs[2]." or "" */
} v5_job_walk;

typedef struct {
  const rq_limits *lim;
  rq_request *r;
  bool budget;
  bool settled; /* the jobs' answer is decided: later jobs are only counted */
  /* kept so far by the jobs of "jobs" [0] and by the bare form [1], each
   * at most the limits (past them the request fails anyway) */
  size_t mods_kept[2], frames_kept[2];
} v5_walk;

/* One memoryMap entry.  Its shape fails the request (false, in j->merr); a
 * bad name or id fails the module alone, as Eliot answers a module it
 * cannot find. */
static inline bool ref_v5_map_entry(v5_walk *s, v5_job_walk *j, const json_t *e, size_t i) {
  char f[96];
  snprintf(f, sizeof f, "%smemoryMap[%zu]", j->prefix, i);
  const json_t *name = json_array_get(e, 0), *id = json_array_get(e, 1);
  if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(name) || !json_is_string(id))
    return ref_fail(&j->merr, f, "a memoryMap entry must be [debug_file, breakpad_id]", NULL);
  rq_module m;
  memset(&m, 0, sizeof m);
  m.field_off = m.why_off = m.gfile_off = m.gid_off = RQ_NO_TEXT;
  m.id.format = ST_FORMAT_WINDOWS; /* v5 names native Windows modules */
  m.skip = true;
  const char *why = NULL;
  if (!ref_parse_name(name, m.id.debug_file, &why) || !ref_given_string(id) ||
      !module_set_debug_id(&m.id, json_string_value(id), &why)) {
    m.invalid = true;
    /* its frames name the module as the entry gives it */
    if (!ref_put_text(s->r, json_string_value(name), &m.gfile_off)) {
      s->budget = true;
      return true;
    }
  }
  /* the found_modules key: the entry as given, however long */
  size_t nl = json_string_length(name), il = json_string_length(id);
  size_t at = s->r->names.len;
  if (nl + il + 1 > UINT32_MAX - at || !rm_buf_append(&s->r->names, json_string_value(name), nl) ||
      !rm_buf_append(&s->r->names, "/", 1) || !rm_buf_append(&s->r->names, json_string_value(id), il)) {
    s->budget = true;
    return true;
  }
  m.given_off = (uint32_t)at;
  m.given_len = (uint32_t)(nl + il + 1);
  size_t n = s->r->nmods;
  if (!ref_room(&s->r->mods_b, n + 1, sizeof(rq_module))) {
    s->budget = true;
    return true;
  }
  s->r->mods = (rq_module *)(void *)s->r->mods_b.p;
  s->r->mods[n] = m;
  s->r->nmods = n + 1;
  s->mods_kept[j->bare]++;
  j->job.nmods++;
  return true;
}

static inline void ref_v5_map(v5_walk *s, v5_job_walk *j, ref_jwalk *w) {
  j->job.mod_first = (uint32_t)s->r->nmods;
  if (!ref_jw_array_begin(w))
    return;
  size_t i = 0;
  while (ref_jw_array_next(w) == 1) {
    /* entries past max_modules are not kept: "too many modules" wins */
    bool would = !j->map_err && !(s->settled && !j->bare) && s->mods_kept[j->bare] < s->lim->max_modules;
    bool store = would && !s->budget;
    size_t kept = s->mods_kept[j->bare];
    if (!would) {
      ref_jw_skip(w);
    } else {
      json_t *e = ref_jw_value(w);
      if (!e)
        break;
      if (!store) { /* refused for the budget: its shape checked, not kept */
        const json_t *name = json_array_get(e, 0), *id = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(name) || !json_is_string(id)) {
          char f[96];
          snprintf(f, sizeof f, "%smemoryMap[%zu]", j->prefix, i);
          j->map_err = !ref_fail(&j->merr, f, "a memoryMap entry must be [debug_file, breakpad_id]", NULL);
        }
      } else if (!ref_v5_map_entry(s, j, e, i)) {
        j->map_err = true;
      }
      if (!j->map_err && s->mods_kept[j->bare] == kept) /* refused for the budget: counted */
        s->mods_kept[j->bare]++;
      json_decref(e);
    }
    i++;
  }
  j->map_count = i;
}

/* module_offset into a frame: false when it is not a number (NUM_BAD). */
static inline bool ref_v5_offset(v5_walk *s, const json_t *off, rq_v5_frame *out) {
  uint64_t v = 0;
  num_result nr = ref_get_number(off, UINT64_MAX, &v);
  if (nr == NUM_BAD)
    return false;
  if (json_is_integer(off) && json_integer_value(off) < 0) {
    /* Eliot's -1 ("not an offset") and the like: echoed as "-0x1" */
    out->off_kind = RQ_OFF_NEG;
    out->offset = 0ull - (uint64_t)json_integer_value(off);
  } else if (nr == NUM_OK) {
    out->off_kind = RQ_OFF_OK;
    out->offset = v;
  } else {
    /* a hex string too wide for 64 bits: echoed as it came */
    out->off_kind = RQ_OFF_TEXT;
    if (!ref_put_text(s->r, json_string_value(off), &out->text_off))
      s->budget = true;
  }
  return true;
}

static inline void ref_v5_stacks(v5_walk *s, v5_job_walk *j, ref_jwalk *w) {
  j->job.stack_first = (uint32_t)s->r->nstacks;
  if (!ref_jw_array_begin(w))
    return;
  char f[96];
  size_t si = 0;
  while (ref_jw_array_next(w) == 1) {
    snprintf(f, sizeof f, "%sstacks[%zu]", j->prefix, si);
    j->nstacks++;
    if (ref_jw_peek(w) != '[') {
      if (!j->stack_err)
        j->stack_err = !ref_fail(&j->serr, f, "a stack must be an array of [module_index, module_offset]", NULL);
      ref_jw_skip(w);
      si++;
      continue;
    }
    bool keep = !j->stack_err && !s->budget && !(s->settled && !j->bare);
    if (keep) {
      if (!ref_room(&s->r->stacks_b, s->r->nstacks + 1, sizeof(rq_stack))) {
        s->budget = true;
        keep = false;
      } else {
        s->r->stacks = (rq_stack *)(void *)s->r->stacks_b.p;
        s->r->stacks[s->r->nstacks] = (rq_stack){(uint32_t)s->r->nv5_frames, 0};
      }
    }
    ref_jw_array_begin(w);
    size_t k = 0;
    while (ref_jw_array_next(w) == 1) {
      /* checked past v5_max_frames too (a bad frame in this job is reported
       * before "too many addresses"), kept only up to it */
      bool check = keep && !j->stack_err && !s->budget;
      bool store = check && s->frames_kept[j->bare] < s->lim->v5_max_frames;
      /* refused for the budget alone: read and checked, not kept */
      bool refused = !check && !j->stack_err && !(s->settled && !j->bare) && s->budget;
      if (!check && !refused) {
        ref_jw_skip(w);
      } else {
        json_t *e = ref_jw_value(w);
        if (!e)
          break;
        const json_t *mi = json_array_get(e, 0), *off = json_array_get(e, 1);
        rq_v5_frame fr;
        memset(&fr, 0, sizeof fr);
        const char *bad = NULL; /* the frame's name is formatted only when it fails */
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(mi) ||
            !(json_is_integer(off) || json_is_string(off)))
          bad = "a frame must be [module_index, module_offset]";
        else if (!ref_v5_offset(s, off, &fr))
          bad = "module_offset must be an integer or a 0x hex string";
        if (bad) {
          snprintf(f, sizeof f, "%sstacks[%zu][%zu]", j->prefix, si, k);
          j->stack_err = !ref_fail(&j->serr, f, bad, NULL);
        } else if (!store || s->budget) {
          /* past v5_max_frames: not kept */
        } else if (!ref_room(&s->r->v5_b, s->r->nv5_frames + 1, sizeof(rq_v5_frame))) {
          s->budget = true;
        } else {
          fr.module_index = (int64_t)json_integer_value(mi);
          s->r->v5_frames = (rq_v5_frame *)(void *)s->r->v5_b.p;
          s->r->v5_frames[s->r->nv5_frames++] = fr;
          s->r->stacks[s->r->nstacks].count++;
          s->frames_kept[j->bare]++;
        }
        json_decref(e);
      }
      j->nframes++;
      k++;
    }
    if (keep && !s->budget) {
      s->r->nstacks++;
      j->job.nstacks++;
    }
    si++;
  }
}

/* A member of a job object (jobs[i], or the top level for the bare form). */
static inline void ref_v5_job_member(v5_walk *s, v5_job_walk *j, const char *key, size_t klen, ref_jwalk *w) {
  if (klen == 9 && !strcmp(key, "memoryMap")) {
    j->map_seen = true;
    j->map_array = ref_jw_peek(w) == '[';
    if (j->map_array)
      ref_v5_map(s, j, w);
    else
      ref_jw_skip(w);
  } else if (klen == 6 && !strcmp(key, "stacks")) {
    j->stacks_seen = true;
    j->stacks_array = ref_jw_peek(w) == '[';
    if (j->stacks_array)
      ref_v5_stacks(s, j, w);
    else
      ref_jw_skip(w);
  } else {
    ref_jw_skip(w);
  }
}

static inline void ref_v5_job(v5_walk *s, v5_job_walk *j, ref_jwalk *w) {
  j->is_object = ref_jw_peek(w) == '{';
  if (!j->is_object) {
    ref_jw_skip(w);
    return;
  }
  ref_jw_object_begin(w);
  json_t *key;
  while (ref_jw_object_next(w, &key) == 1) {
    ref_v5_job_member(s, j, json_string_value(key), json_string_length(key), w);
    json_decref(key);
  }
}

/* The first problem of job j in the order a whole-tree reading meets it. */
static inline bool ref_v5_job_error(const v5_job_walk *j, rq_error *err) {
  char f[96];
  if (!j->is_object) {
    snprintf(f, sizeof f, "%s", j->prefix[0] ? j->prefix : "body");
    if (f[strlen(f) - 1] == '.')
      f[strlen(f) - 1] = '\0';
    return !ref_fail(err, f, "a job must be an object", NULL);
  }
  snprintf(f, sizeof f, "%smemoryMap", j->prefix);
  if (!j->map_seen || !j->map_array)
    return !ref_fail(err, f, "memoryMap must be an array", NULL);
  snprintf(f, sizeof f, "%sstacks", j->prefix);
  if (!j->stacks_seen || !j->stacks_array)
    return !ref_fail(err, f, "stacks must be an array", NULL);
  if (j->map_err) {
    *err = j->merr;
    return true;
  }
  if (j->stack_err) {
    *err = j->serr;
    return true;
  }
  return false;
}

/* After job j (in order): its own problem, or the address limit passed by
 * the jobs so far (*nf counts them), settles the request's 400. */
static inline bool ref_v5_job_settles(const rq_limits *lim, const v5_job_walk *j, size_t *nf, rq_error *err) {
  if (ref_v5_job_error(j, err))
    return true;
  *nf += j->nframes;
  if (*nf <= lim->v5_max_frames)
    return false;
  char f[48];
  snprintf(f, sizeof f, "%sstacks", j->prefix);
  char msg[160];
  snprintf(msg, sizeof msg,
           "too many addresses: more than the limit v5_max_frames = %llu (all jobs together)",
           (unsigned long long)lim->v5_max_frames);
  ref_fail(err, f, msg, NULL);
  return true;
}

/* Whether every entry of job j made it into the arrays. */
static inline bool ref_v5_job_whole(const rq_request *r, const v5_job_walk *j) {
  size_t kept_frames = 0;
  for (uint32_t st = 0; st < j->job.nstacks; st++)
    kept_frames += r->stacks[j->job.stack_first + st].count;
  return j->job.nmods == j->map_count && j->job.nstacks == j->nstacks &&
         kept_frames == j->nframes;
}

static inline bool ref_v5_push_job(rq_request *r, const rq_job *jb) {
  if (!ref_room(&r->jobs_b, r->njobs + 1, sizeof(rq_job)))
    return false;
  r->jobs = (rq_job *)(void *)r->jobs_b.p;
  r->jobs[r->njobs++] = *jb;
  return true;
}

static inline rq_result ref_rq_parse_v5(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                      rq_request *out, rq_error *err) {
  ref_set_grant(out, grant);
  v5_walk s;
  memset(&s, 0, sizeof s);
  s.lim = lim;
  s.r = out;
  /* one job walked at a time: the first problem is settled as the jobs come,
   * in order, so the state kept does not grow with the number of jobs */
  v5_job_walk *jw = calloc(2, sizeof *jw); /* [0]: the job of "jobs" being walked, [1]: bare */
  if (!jw)
    return RQ_BUDGET;
  v5_job_walk *bare = &jw[1];
  bare->is_object = true;
  bare->bare = true;
  bool jobs_seen = false, jobs_array = false, whole = true;
  size_t njobs = 0, total_map = 0, nf = 0;
  rq_error serr; /* the settled problem of the jobs */
  ref_jwalk w;
  ref_jw_init(&w, body, len);
  rq_result res = RQ_OK;
  char msg[256];
  int c = ref_jw_peek(&w);
  if (c != '{') {
    if (c == '[') {
      if (ref_jw_skip(&w) && ref_jw_finish(&w))
        res = ref_bad_msg(err, NULL, "the body must be a JSON object");
      else
        res = ref_bad_json(err, &w);
    } else {
      ref_jw_fail(&w, "'[' or '{' expected");
      res = ref_bad_json(err, &w);
    }
    goto done;
  }
  ref_jw_object_begin(&w);
  json_t *key;
  while (ref_jw_object_next(&w, &key) == 1) {
    const char *k = json_string_value(key);
    size_t kl = json_string_length(key);
    if (kl == 4 && !strcmp(k, "jobs")) {
      jobs_seen = true;
      jobs_array = ref_jw_peek(&w) == '[';
      if (!jobs_array) {
        ref_jw_skip(&w);
      } else {
        ref_jw_array_begin(&w);
        while (ref_jw_array_next(&w) == 1) {
          if (njobs >= lim->v5_max_jobs) {
            ref_jw_skip(&w); /* "too many jobs" */
            njobs++;
            continue;
          }
          v5_job_walk *j = &jw[0];
          memset(j, 0, sizeof *j);
          snprintf(j->prefix, sizeof j->prefix, "jobs[%zu].", njobs);
          ref_v5_job(&s, j, &w);
          if (j->is_object && j->map_array)
            total_map += j->map_count;
          if (!s.settled) {
            s.settled = ref_v5_job_settles(lim, j, &nf, &serr);
            whole = whole && ref_v5_job_whole(out, j);
            if (!s.budget && !ref_v5_push_job(out, &j->job))
              s.budget = true;
          }
          njobs++;
        }
      }
    } else {
      /* the bare form: the top level is the job (ignored if "jobs" is there) */
      ref_v5_job_member(&s, bare, k, kl, &w);
    }
    json_decref(key);
  }
  if (w.failed || !ref_jw_finish(&w)) {
    res = ref_bad_json(err, &w);
    goto done;
  }
  if (jobs_seen && !jobs_array) {
    res = ref_bad_msg(err, "jobs", "jobs must be an array");
    goto done;
  }
  if (!jobs_seen) {
    njobs = 1;
    total_map = bare->map_array ? bare->map_count : 0;
    s.settled = ref_v5_job_settles(lim, bare, &nf, &serr);
    whole = ref_v5_job_whole(out, bare);
    if (!s.settled && !s.budget && !ref_v5_push_job(out, &bare->job))
      s.budget = true;
  }
  if (njobs > lim->v5_max_jobs) {
    snprintf(msg, sizeof msg, "too many jobs: %zu, the limit is v5_max_jobs = %llu", njobs,
             (unsigned long long)lim->v5_max_jobs);
    res = ref_bad_msg(err, "jobs", msg);
    goto done;
  }
  if (total_map > lim->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", total_map,
             (unsigned long long)lim->max_modules);
    res = ref_bad_msg(err, "memoryMap", msg);
    goto done;
  }
  if (s.settled) {
    res = ref_bad(err, &serr);
    goto done;
  }
  /* every job is whole now, unless the budget stopped the arrays */
  if (s.budget || !whole) {
    res = RQ_BUDGET;
    goto done;
  }
  /* mark the modules the frames name */
  for (size_t i = 0; i < out->njobs; i++) {
    const rq_job *jb = &out->jobs[i];
    for (uint32_t st = 0; st < jb->nstacks; st++) {
      const rq_stack *sk = &out->stacks[jb->stack_first + st];
      for (uint32_t f = 0; f < sk->count; f++) {
        int64_t idx = out->v5_frames[sk->first + f].module_index;
        if (idx >= 0 && (uint64_t)idx < jb->nmods)
          out->mods[jb->mod_first + (uint32_t)idx].skip = false;
      }
    }
  }
done:
  ref_jw_free(&w);
  free(jw);
  if (res == RQ_OK)
    ref_shrink(out);
  return res;
}

#endif
