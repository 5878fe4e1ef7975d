/*
 * request.c - request bodies into compact arrays (request.h).
 *
 * Both parsers walk the body once (jwalk.h), checking every piece as it comes
 * and remembering the first problem of each kind; the problem reported is
 * then chosen in the order a whole-tree reading would meet them, so the
 * answer does not depend on the order of the keys in the body.  A frame's
 * checks need nothing from "modules" (an index that names no module makes
 * the frame invalid, it does not fail the request), so the frames are read
 * in the one walk wherever they are; what needs both (the module index, the
 * RVA from instruction_addr, return addresses) is settled once the walk is
 * over (place_frames).
 *
 * Each frame, module and memoryMap entry is one jw_piece: its members come
 * out of the walker one by one and the fields the contract names are kept
 * (frame_field, kept_value), then checked in the contract's order once the
 * piece is whole, so an entry's problem does not depend on its keys' order
 * either.  No jansson tree is built.
 */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jwalk.h"

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

const char *rq_why_text(uint16_t why) { return why < WHY__COUNT ? why_text[why] : ""; }

/* ---- numbers: JSON integers or "0x" hex strings ----------------------------- */

typedef enum { NUM_OK, NUM_BAD, NUM_RANGE } num_result;

static num_result int_number(int64_t i, uint64_t max, uint64_t *out) {
  if (i < 0 || (uint64_t)i > max)
    return NUM_RANGE;
  *out = (uint64_t)i;
  return NUM_OK;
}

/* a hex digit's value, -1 for other bytes */
static const signed char hex_digit[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -1, -1, -1, -1, -1,
    -1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

/* A string's bytes (s, n) as "0x" and hex digits. */
static num_result hex_number(const char *s, size_t n, uint64_t max, uint64_t *out) {
  if (n < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
    return NUM_BAD;
  uint64_t acc = 0;
  bool over = false;
  for (size_t i = 2; i < n; i++) {
    int d = hex_digit[(unsigned char)s[i]];
    if (d < 0)
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

/* A scalar of the walk (jwalk.h) as a number: a JSON integer, or a "0x" hex
 * string; NUM_RANGE past max (or negative). */
static num_result scalar_number(const jw_val *v, uint64_t max, uint64_t *out) {
  if (v->type == JW_INTEGER)
    return int_number(v->i, max, out);
  if (v->type != JW_STRING)
    return NUM_BAD;
  return hex_number(v->s, v->n, max, out);
}

/* ---- members of a piece, as a reader keeps them ------------------------------- */

/* A member (or element) that jw_piece handed out, kept for reading once
 * the piece is whole: its type, what scalar_number makes of it, and a string's
 * bytes, copied (NUL-terminated) into the reader's texts. */
typedef struct {
  bool given;
  jw_type type;
  jw_type vtype; /* the type as given (type is JW_NULL when the copy failed) */
  num_result nr; /* scalar_number(v, UINT64_MAX) */
  uint64_t v;    /* NUM_OK: the number */
  size_t str;    /* JW_STRING: its offset in the texts */
  size_t len;    /* and its length */
} kept_value;

/* The texts of the kept strings: one buffer, emptied for each piece,
 * bounded by the largest piece, and reserved in the request's grant like
 * the arrays (a failed copy fails the buffer for good, and the request gets
 * the budget's answer). */
typedef struct {
  rm_buf b;
} kept_texts;

static void keep(kept_texts *t, kept_value *k, const jw_val *v) {
  k->given = true;
  k->type = k->vtype = v->type;
  k->nr = scalar_number(v, UINT64_MAX, &k->v);
  if (v->type != JW_STRING)
    return;
  size_t at = t->b.len;
  if (v->n >= SIZE_MAX - at || !rm_buf_reserve(&t->b, at + v->n + 1)) {
    t->b.failed = true;
    k->type = JW_NULL; /* never read: the request fails */
    return;
  }
  k->str = at;
  k->len = v->n;
  if (v->n)
    memcpy(t->b.p + at, v->s, v->n);
  t->b.p[at + v->n] = '\0';
  t->b.len = at + v->n + 1;
}

/* Whether a copy did not fit in the budget. */
static bool texts_failed(const kept_texts *t) { return t->b.failed; }

/* A kept string (NUL-terminated). */
static const char *kept_str(const kept_texts *t, const kept_value *k) { return t->b.p + k->str; }

/* Whether a member was given and is not null. */
static bool kept_set(const kept_value *k) { return k->given && k->type != JW_NULL; }

/* ---- errors --------------------------------------------------------------------- */

/* module.h's reasons may start with the field's name ("debug_id: expected
 * ..."); the error names the field already, so that prefix is dropped. */
const char *rq_reason(const char *why) {
  if (!why)
    return "contains a NUL byte";
  const char *p = why;
  while ((*p >= 'a' && *p <= 'z') || *p == '_')
    p++;
  return (p > why && p[0] == ':' && p[1] == ' ') ? p + 2 : why;
}

/* Records a 400's message (msg followed by detail, if any) and field. */
static bool fail(rq_error *e, const char *field, const char *msg, const char *detail) {
  snprintf(e->field, sizeof e->field, "%s", field);
  snprintf(e->msg, sizeof e->msg, "%s%s", msg, detail ? detail : "");
  return false;
}

static rq_result bad(rq_error *out, const rq_error *e) {
  *out = *e;
  return RQ_BAD;
}

static rq_result bad_msg(rq_error *out, const char *field, const char *msg) {
  fail(out, field ? field : "", msg, NULL);
  return RQ_BAD;
}

/* The walk's failure: a 400 with its text, or RQ_BUDGET when the walker's
 * own memory (the duplicate-key check of a many-key object, a long decoded
 * string) could not be reserved in the request's grant. */
static rq_result bad_json(rq_error *out, const jwalk *w) {
  if (w->budget)
    return RQ_BUDGET;
  snprintf(out->field, sizeof out->field, "%s", "");
  snprintf(out->msg, sizeof out->msg, "invalid JSON: %s", w->error);
  return RQ_BAD;
}

/* ---- growing arrays in the budget -------------------------------------------------- */

/* Room for n elements of size sz in b; false when the budget cannot take it. */
static bool room(rm_buf *b, size_t n, size_t sz) {
  if (n > SIZE_MAX / sz)
    return false;
  return rm_buf_reserve(b, n * sz);
}

/* Appends a NUL-terminated copy of s to the request's texts; false when the
 * budget cannot take it. */
static bool put_text(rq_request *r, const char *s, uint32_t *off) {
  size_t n = strlen(s), at = r->names.len;
  if (n + 1 >= (size_t)RQ_NO_TEXT - at || !rm_buf_append(&r->names, s, n + 1))
    return false;
  *off = (uint32_t)at;
  return true;
}

/* The arrays are final: give back what their growth reserved beyond them
 * (they are re-pointed, realloc may move them). */
static void shrink(rq_request *r) {
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

static void set_grant(rq_request *r, rm_grant *g) {
  r->mods_b.grant = r->frames_b.grant = r->v5_b.grant = r->stacks_b.grant = r->jobs_b.grant =
      r->names.grant = g;
}

void rq_free(rq_request *r) {
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
static void module_invalid(mod_problem *p, size_t i, const char *sfx, const char *msg,
                           const char *detail) {
  if (p->invalid)
    return; /* the first problem found is the one reported */
  p->invalid = true;
  snprintf(p->field, sizeof p->field, "modules[%zu]%s", i, sfx);
  snprintf(p->why, sizeof p->why, "%s%s", msg, detail ? detail : "");
}

/* A module entry's members (jw_piece) */
enum { MF_FORMAT, MF_DEBUG_FILE, MF_DEBUG_ID, MF_CODE_FILE, MF_CODE_ID, MF_IMAGE_ADDR, MF_IMAGE_SIZE, MF__COUNT };

typedef struct {
  kept_value f[MF__COUNT];
  kept_texts *texts;
} module_fields;

static void module_member(void *ctx, const char *key, size_t klen, size_t index, const jw_val *v) {
  (void)index;
  module_fields *mf = ctx;
  int which = -1;
  switch (klen) {
  case 6: which = !memcmp(key, "format", 6) ? MF_FORMAT : -1; break;
  case 7: which = !memcmp(key, "code_id", 7) ? MF_CODE_ID : -1; break;
  case 8: which = !memcmp(key, "debug_id", 8) ? MF_DEBUG_ID : -1; break;
  case 9: which = !memcmp(key, "code_file", 9) ? MF_CODE_FILE : -1; break;
  case 10:
    which = !memcmp(key, "debug_file", 10)   ? MF_DEBUG_FILE
            : !memcmp(key, "image_addr", 10) ? MF_IMAGE_ADDR
            : !memcmp(key, "image_size", 10) ? MF_IMAGE_SIZE
                                             : -1;
    break;
  default: break;
  }
  if (which >= 0)
    keep(mf->texts, &mf->f[which], v);
}

/* One entry of "modules" (of type type, its members in mf).  Nothing in it
 * fails the request: a bad field makes the module invalid, with its texts
 * kept in r's names; false only when the budget cannot take those. */
static bool parse_module(rq_request *r, jw_type type, const module_fields *mf, size_t i, rq_module *out) {
  const char *f; /* the field at fault after "modules[i]" */
  const char *why = NULL;
  const kept_texts *t = mf->texts;
  /* set before the goto below, which the answer's texts read them after */
  const kept_value *df = &mf->f[MF_DEBUG_FILE], *di = &mf->f[MF_DEBUG_ID];
  mod_problem p;
  p.invalid = false;
  memset(out, 0, sizeof *out);
  out->field_off = out->why_off = out->gfile_off = out->gid_off = RQ_NO_TEXT;
  if (type != JW_OBJECT) {
    module_invalid(&p, i, "", "a module must be an object", NULL);
    goto texts;
  }
  const kept_value *fm = &mf->f[MF_FORMAT];
  f = ".format";
  if (kept_set(fm)) {
    const char *s = fm->type == JW_STRING ? kept_str(t, fm) : "";
    if (!strcmp(s, "windows"))
      out->id.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(s, "portable"))
      out->id.format = ST_FORMAT_PORTABLE;
    else
      module_invalid(&p, i, f, "format must be \"windows\" or \"portable\"", NULL);
  }
  /* (a string with a NUL byte cannot come: jansson's rules refuse \u0000) */
  f = ".debug_file";
  if (!df->given)
    module_invalid(&p, i, f, "debug_file is required", NULL);
  else if (df->type != JW_STRING)
    module_invalid(&p, i, f, "debug_file must be a string", NULL);
  else if (!module_parse_file_name(kept_str(t, df), out->id.debug_file, MODULE_NAME_MAX + 1, &why))
    module_invalid(&p, i, f, "invalid debug_file: ", rq_reason(why));
  f = ".debug_id";
  if (!di->given)
    module_invalid(&p, i, f, "debug_id is required", NULL);
  else if (di->type != JW_STRING)
    module_invalid(&p, i, f, "debug_id must be a string", NULL);
  else if (!p.invalid) {
    bool has_age = false;
    if (!module_set_debug_id_ex(&out->id, kept_str(t, di), &has_age, &why))
      module_invalid(&p, i, f, "invalid debug_id: ", rq_reason(why));
    else
      out->no_age = !has_age;
  }
  const kept_value *cf = &mf->f[MF_CODE_FILE];
  f = ".code_file";
  if (kept_set(cf)) {
    if (cf->type != JW_STRING)
      module_invalid(&p, i, f, "code_file must be a string", NULL);
    else if (!module_parse_file_name(kept_str(t, cf), out->id.code_file, MODULE_NAME_MAX + 1, &why))
      module_invalid(&p, i, f, "invalid code_file: ", rq_reason(why));
  }
  const kept_value *ci = &mf->f[MF_CODE_ID];
  f = ".code_id";
  if (kept_set(ci)) {
    if (ci->type != JW_STRING)
      module_invalid(&p, i, f, "code_id must be a string", NULL);
    else if (!module_parse_code_id(kept_str(t, ci), &out->id.code_timestamp, &out->id.code_size, &why))
      module_invalid(&p, i, f, "invalid code_id: ", rq_reason(why));
    else {
      out->id.has_code_id = true;
      /* the casing the request spells: stores are probed in it too */
      snprintf(out->id.code_id_text, sizeof out->id.code_id_text, "%s", kept_str(t, ci));
    }
  }
  const kept_value *ia = &mf->f[MF_IMAGE_ADDR];
  const kept_value *is = &mf->f[MF_IMAGE_SIZE];
  f = ".image_addr";
  if (kept_set(ia)) {
    if (ia->nr == NUM_BAD)
      module_invalid(&p, i, f, "image_addr must be an integer or a 0x hex string", NULL);
    else if (ia->nr == NUM_RANGE)
      module_invalid(&p, i, f, "image_addr is negative or wider than 64 bits", NULL);
    else
      out->has_image = true, out->image_addr = ia->v;
  }
  f = ".image_size";
  if (kept_set(is)) {
    if (is->nr == NUM_BAD)
      module_invalid(&p, i, f, "image_size must be an integer or a 0x hex string", NULL);
    else if (is->nr == NUM_RANGE || is->v == 0)
      module_invalid(&p, i, f, "image_size must be from 1 to 2^64 - 1", NULL);
    else if (!kept_set(ia))
      module_invalid(&p, i, f, "image_size without image_addr", NULL);
    else if (out->has_image && is->v > UINT64_MAX - out->image_addr)
      module_invalid(&p, i, f, "image_addr + image_size is past 2^64", NULL);
    else
      out->image_size = is->v;
  }
texts:
  if (!p.invalid)
    return true;
  /* what its answer says: the fields as given, the problem and where */
  out->invalid = true;
  bool obj = type == JW_OBJECT;
  return put_text(r, p.field, &out->field_off) && put_text(r, p.why, &out->why_off) &&
         (!(obj && df->given && df->type == JW_STRING) || put_text(r, kept_str(t, df), &out->gfile_off)) &&
         (!(obj && di->given && di->type == JW_STRING) || put_text(r, kept_str(t, di), &out->gid_off));
}

/* ---- POST /symbolicate: one frame --------------------------------------------------------- */

static void frame_invalid(rq_frame *fr, uint16_t why) {
  fr->flags |= RQ_F_INVALID;
  fr->why = why;
}

/* fail() for frames[i] and the field sfx (".rva"); the name is formatted
 * only when a frame fails, not for every frame that parses. */
static bool frame_fail(rq_error *e, size_t i, const char *sfx, const char *msg) {
  char f[96];
  snprintf(f, sizeof f, "frames[%zu]%s", i, sfx);
  return fail(e, f, msg, NULL);
}

/* A frame's members as jw_piece hands them out: for each field the frame
 * reads, whether it is there, its type and what scalar_number makes of it. */
enum { FF_MODULE, FF_RVA, FF_IADDR, FF_TOKEN, FF_ADJUST, FF_STACK, FF_IL, FF__COUNT };

typedef struct {
  bool given;
  jw_type type;
  num_result nr; /* scalar_number(v, UINT64_MAX) */
  uint64_t v;    /* NUM_OK: the number */
} frame_field;

typedef struct {
  frame_field f[FF__COUNT];
} frame_fields;

static void frame_member(void *ctx, const char *key, size_t klen, size_t index, const jw_val *v) {
  (void)index;
  frame_fields *ff = ctx;
  int which = -1;
  switch (klen) {
  case 3: which = !memcmp(key, "rva", 3) ? FF_RVA : -1; break;
  case 5: which = !memcmp(key, "token", 5) ? FF_TOKEN : !memcmp(key, "stack", 5) ? FF_STACK : -1; break;
  case 6: which = !memcmp(key, "module", 6) ? FF_MODULE : -1; break;
  case 9: which = !memcmp(key, "il_offset", 9) ? FF_IL : -1; break;
  case 16: which = !memcmp(key, "instruction_addr", 16) ? FF_IADDR : -1; break;
  case 23: which = !memcmp(key, "adjust_instruction_addr", 23) ? FF_ADJUST : -1; break;
  default: break;
  }
  if (which < 0)
    return;
  frame_field *f = &ff->f[which];
  f->given = true;
  f->type = v->type;
  f->nr = scalar_number(v, UINT64_MAX, &f->v);
}

/* scalar_number(field, max, out) from what frame_member kept */
static num_result field_number(const frame_field *f, uint64_t max, uint64_t *out) {
  if (f->nr != NUM_OK)
    return f->nr;
  if (f->v > max)
    return NUM_RANGE;
  *out = f->v;
  return NUM_OK;
}

/* A frame of type type (jw_piece's) with the fields ff into out; false
 * (err set) when it fails the request. */
static bool parse_frame(jw_type type, const frame_fields *ff, size_t i, rq_frame *out, rq_error *err) {
  memset(out, 0, sizeof *out);
  out->adjust = -1;
  if (type != JW_OBJECT)
    return frame_fail(err, i, "", "a frame must be an object");
  uint64_t v = 0;
  const frame_field *mo = &ff->f[FF_MODULE];
  if (!mo->given)
    return frame_fail(err, i, ".module", "module is required");
  num_result r = field_number(mo, UINT32_MAX, &v);
  if (r == NUM_BAD)
    return frame_fail(err, i, ".module", "module must be an integer or a 0x hex string");
  if (r == NUM_OK) {
    out->module = (uint32_t)v;
    out->flags |= RQ_F_INDEX_OK;
  }
  const frame_field *rva = ff->f[FF_RVA].given ? &ff->f[FF_RVA] : NULL;
  const frame_field *ia = ff->f[FF_IADDR].given ? &ff->f[FF_IADDR] : NULL;
  const frame_field *tok = ff->f[FF_TOKEN].given ? &ff->f[FF_TOKEN] : NULL;
  int given = (rva != NULL) + (ia != NULL) + (tok != NULL);
  if (given > 1)
    return frame_fail(err, i, "",
                      "a frame has one of rva, instruction_addr (native) or token (managed)");
  if (given == 0)
    return frame_fail(
        err, i, "",
        "a frame needs rva or instruction_addr (native), or token and il_offset (managed)");
  const frame_field *adj = &ff->f[FF_ADJUST];
  if (adj->given && adj->type != JW_NULL) {
    if (adj->type != JW_TRUE && adj->type != JW_FALSE)
      return frame_fail(err, i, ".adjust_instruction_addr",
                        "adjust_instruction_addr must be true or false");
    out->adjust = adj->type == JW_TRUE ? 1 : 0;
  }
  const frame_field *stk = &ff->f[FF_STACK];
  if (stk->given && stk->type != JW_NULL && field_number(stk, UINT64_MAX, &out->stack) != NUM_OK)
    return frame_fail(err, i, ".stack", "stack must be a non-negative integer");
  if (rva || ia) {
    out->kind = RQ_NATIVE;
    r = field_number(rva ? rva : ia, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return rva ? frame_fail(err, i, ".rva", "rva must be an integer or a 0x hex string")
                 : frame_fail(err, i, ".instruction_addr",
                              "instruction_addr must be an integer or a 0x hex string");
    if (rva) {
      if (r == NUM_OK) {
        out->flags |= RQ_F_HAS_RVA;
        out->rva = v;
      }
      if (r == NUM_RANGE)
        frame_invalid(out, WHY_RVA_RANGE);
      else if (v > UINT32_MAX)
        frame_invalid(out, WHY_RVA_32);
    } else {
      if (r == NUM_OK) {
        out->flags |= RQ_F_HAS_IADDR;
        out->aux = v;
      } else {
        frame_invalid(out, WHY_IADDR_RANGE);
      }
    }
    return true;
  }
  out->kind = RQ_MANAGED;
  r = field_number(tok, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return frame_fail(err, i, ".token", "token must be an integer or a 0x hex string");
  out->rva = r == NUM_OK ? v : 0;
  if (r == NUM_RANGE || v > UINT32_MAX || (v >> 24) != 0x06)
    frame_invalid(out, WHY_TOKEN);
  const frame_field *il = &ff->f[FF_IL];
  if (!il->given)
    return frame_fail(err, i, ".il_offset", "a managed frame needs il_offset");
  r = field_number(il, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return frame_fail(err, i, ".il_offset", "il_offset must be an integer or a 0x hex string");
  out->aux = r == NUM_OK ? v : 0;
  if (!(out->flags & RQ_F_INVALID) && (r == NUM_RANGE || v > UINT32_MAX))
    frame_invalid(out, WHY_IL_RANGE);
  return true;
}

/* ---- absolute addresses and return addresses (api.md, "Absolute addresses") --- */

#define RQ_F_FIRST 128 /* place_frames: the first frame of its stack (the leaf) */

typedef struct {
  uint64_t stack;
  size_t index;
} stack_pos;

static int cmp_stack_pos(const void *pa, const void *pb) {
  const stack_pos *a = pa, *b = pb;
  if (a->stack != b->stack)
    return a->stack < b->stack ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* Marks the first frame of every stack (the frames sharing a "stack" number,
 * in request order); false when the budget cannot take the sort. */
static bool mark_leaves(rq_request *r, rm_grant *grant) {
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
  if (!room(&tmp, nf, sizeof(stack_pos)))
    return false;
  stack_pos *pos = (stack_pos *)(void *)tmp.p;
  for (size_t i = 0; i < nf; i++)
    pos[i] = (stack_pos){r->frames[i].stack, i};
  qsort(pos, nf, sizeof *pos, cmp_stack_pos);
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
static bool place_frames(rq_request *r, rm_grant *grant) {
  if (r->adjust == RQ_ADJ_ALL_BUT_FIRST && !mark_leaves(r, grant))
    return false;
  for (size_t i = 0; i < r->nframes; i++) {
    rq_frame *fr = &r->frames[i];
    bool first = fr->flags & RQ_F_FIRST;
    fr->flags &= (uint8_t)~RQ_F_FIRST;
    if (!(fr->flags & RQ_F_INDEX_OK) || fr->module >= r->nmods) {
      fr->flags |= RQ_F_BAD_INDEX;
      frame_invalid(fr, WHY_BAD_INDEX);
      continue;
    }
    const rq_module *m = &r->mods[fr->module]; /* the entry itself: its image_addr */
    if (m->invalid) {
      frame_invalid(fr, RQ_WHY_MODULE);
      continue;
    }
    if ((fr->flags & RQ_F_INVALID) || fr->kind != RQ_NATIVE)
      continue;
    if (fr->flags & RQ_F_HAS_IADDR) {
      uint64_t ia = fr->aux;
      if (!m->has_image) {
        frame_invalid(fr, WHY_NO_IMAGE);
        continue;
      }
      if (ia < m->image_addr) {
        frame_invalid(fr, WHY_BELOW_IMAGE);
        continue;
      }
      if (m->image_size && ia - m->image_addr >= m->image_size) {
        frame_invalid(fr, WHY_PAST_IMAGE);
        continue;
      }
      if (ia - m->image_addr > UINT32_MAX) {
        frame_invalid(fr, WHY_FAR_IMAGE);
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
      frame_invalid(fr, WHY_RA_ZERO);
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
  kept_texts texts; /* of the module being read */
} sym_walk;

/* JSON white space from p, as jwalk skips it. */
static inline __attribute__((always_inline)) size_t ws_end(const char *s, size_t p, size_t n) {
  /* one compare for the usual byte: white space is at most ' ' */
  while (p < n && (unsigned char)s[p] <= ' ' &&
         (s[p] == ' ' || s[p] == '\n' || s[p] == '\t' || s[p] == '\r'))
    p++;
  return p;
}


/* The literal lit (1 to 16 bytes, len a constant: the compare is a few
 * loads against constants) at p, nothing after it skipped: the position
 * after it, or 0. */
static inline __attribute__((always_inline)) size_t lit_exact(const char *s, size_t p, size_t n,
                                                              const char *lit, size_t len) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  if (len > 16 || n - p < len)
    return 0;
  size_t lo = len < 8 ? len : 8;
  memcpy(&a, s + p, lo);
  memcpy(&b, lit, lo);
  if (len > 8) {
    memcpy(&c, s + p + 8, len - 8);
    memcpy(&d, lit + 8, len - 8);
  }
  return a == b && c == d ? p + len : 0;
}

/* lit_exact, then white space: the position after it, or 0. */
static inline __attribute__((always_inline)) size_t lit_at(const char *s, size_t p, size_t n,
                                                           const char *lit, size_t len) {
  size_t q = lit_exact(s, p, n, lit, len);
  return q ? ws_end(s, q, n) : 0;
}

/* Decimal digits at *p without a leading zero, at most max of them (max
 * <= 19): their value, or false with *p where it was. */
static inline __attribute__((always_inline)) bool digits_at(const char *s, size_t *p, size_t n,
                                                            size_t max, uint64_t *out) {
  uint64_t v = 0;
  size_t q = *p;
  while (q < n && s[q] >= '0' && s[q] <= '9' && q - *p <= max)
    v = v * 10 + (uint64_t)(s[q++] - '0');
  size_t nd = q - *p;
  if (nd == 0 || nd > max || (nd > 1 && s[*p] == '0'))
    return false;
  *p = q;
  *out = v;
  return true;
}

/* 1 to max hex digits at *p and the string's closing quote: their value,
 * *p after the quote; or false. */
static inline __attribute__((always_inline)) bool hex_digits_at(const char *s, size_t *p, size_t n,
                                                                size_t max, uint64_t *out) {
  size_t q = *p;
  uint64_t v = 0;
  size_t h0 = q;
  int d;
  while (q < n && q - h0 <= max && (d = hex_digit[(unsigned char)s[q]]) >= 0) {
    v = (v << 4) | (uint64_t)d;
    q++;
  }
  if (q == h0 || q - h0 > max || q >= n || s[q] != '"')
    return false;
  *p = q + 1;
  *out = v;
  return true;
}

/* "0x" (or "0X" when upper) and 1 to max hex digits, quoted, at *p (max <=
 * 16): their value, or false. */
static inline __attribute__((always_inline)) bool hex_at(const char *s, size_t *p, size_t n,
                                                         size_t max, bool upper, uint64_t *out) {
  size_t q = *p;
  if (n - q < 4 || s[q] != '"' || s[q + 1] != '0' || (s[q + 2] != 'x' && !(upper && s[q + 2] == 'X')))
    return false;
  q += 3;
  if (!hex_digits_at(s, &q, n, max, out))
    return false;
  *p = q;
  return true;
}

/* The usual frame, native {"module": N, "rva": "0xHEX"} or managed
 * {"module": N, "token": "0x06HEX", "il_offset": M} (white space anywhere
 * JSON allows it, N and M of 1 to 9 digits without a leading zero, 1 to 8
 * hex digits, a token of table 0x06), read at the cursor in one pass: out
 * is what jw_piece and parse_frame make of it (that object has distinct
 * keys, integers jansson reads as they stand and plain ASCII strings) and
 * the cursor is left after the '}', where jw_piece leaves it.  false, with
 * nothing done, for anything else, which the full reading takes. */
static bool usual_frame(jwalk *w, rq_frame *out) {
  const char *s = w->s;
  size_t n = w->n, p = ws_end(s, w->pos, n);
  uint64_t mod, v, il = 0;
  /* first the native frame as common serializers spell it, compact
   * ({"module":N,"rva":"0x.."}) or with a space after ':' and ','
   * (Python's json.dumps): a few compares of whole literals */
  size_t q = lit_exact(s, p, n, "{\"module\":", 10);
  if (q) {
    bool sp = q < n && s[q] == ' ';
    q += sp;
    if (digits_at(s, &q, n, 9, &mod) &&
        (q = sp ? lit_exact(s, q, n, ", \"rva\": \"0x", 12) : lit_exact(s, q, n, ",\"rva\":\"0x", 10)) &&
        hex_digits_at(s, &q, n, 8, &v) && q < n && s[q] == '}') {
      *out = (rq_frame){.rva = v, .module = (uint32_t)mod, .kind = RQ_NATIVE,
                        .flags = RQ_F_INDEX_OK | RQ_F_HAS_RVA, .adjust = -1};
      w->pos = q + 1;
      return true;
    }
  }
  /* then token by token */
  if (p >= n || s[p] != '{')
    return false;
  p = ws_end(s, p + 1, n);
  if (!(p = lit_at(s, p, n, "\"module\"", 8)) || !(p = lit_at(s, p, n, ":", 1)) ||
      !digits_at(s, &p, n, 9, &mod))
    return false;
  p = ws_end(s, p, n);
  if (!(p = lit_at(s, p, n, ",", 1)))
    return false;
  bool managed = false;
  if ((q = lit_at(s, p, n, "\"rva\"", 5))) {
    if (!(p = lit_at(s, q, n, ":", 1)) || !hex_at(s, &p, n, 8, false, &v))
      return false;
  } else if ((q = lit_at(s, p, n, "\"token\"", 7))) {
    if (!(p = lit_at(s, q, n, ":", 1)) || !hex_at(s, &p, n, 8, false, &v) || (v >> 24) != 0x06)
      return false;
    p = ws_end(s, p, n);
    if (!(p = lit_at(s, p, n, ",", 1)) || !(p = lit_at(s, p, n, "\"il_offset\"", 11)) ||
        !(p = lit_at(s, p, n, ":", 1)) || !digits_at(s, &p, n, 9, &il))
      return false;
    managed = true;
  } else {
    return false;
  }
  p = ws_end(s, p, n);
  if (p >= n || s[p] != '}')
    return false;
  if (managed)
    *out = (rq_frame){.rva = v, .aux = il, .module = (uint32_t)mod, .kind = RQ_MANAGED,
                      .flags = RQ_F_INDEX_OK, .adjust = -1};
  else
    *out = (rq_frame){.rva = v, .module = (uint32_t)mod, .kind = RQ_NATIVE,
                      .flags = RQ_F_INDEX_OK | RQ_F_HAS_RVA, .adjust = -1};
  w->pos = p + 1;
  return true;
}

/* An element refused for the budget alone (the reading would have kept
 * it): read as the piece it would have been, nothing kept, so that an
 * error in it is worded as it is when there is memory for it (a skip words
 * it value by value).  false when the walk failed (or ran out of memory). */
static bool refused_piece(jwalk *w) { return jw_piece(w, NULL, NULL) != JW_NONE; }

/* Walks the "frames" array at the cursor, checking each frame (up to the
 * first bad one or max_frames) and counting them all. */
static void sym_frames(sym_walk *s, jwalk *w) {
  if (!jw_array_begin(w))
    return;
  size_t i = 0;
  int k;
  while ((k = jw_array_next(w)) == 1) {
    bool would = !s->frame_err && i < s->lim->max_frames; /* read and checked */
    if (!would) {
      jw_skip(w);
    } else if (!s->budget && !w->failed && w->depth + 1 <= JW_MAX_DEPTH &&
               room(&s->r->frames_b, i + 1, sizeof(rq_frame)) &&
               usual_frame(w, &((rq_frame *)(void *)s->r->frames_b.p)[i])) {
      s->r->frames = (rq_frame *)(void *)s->r->frames_b.p;
      s->r->nframes = i + 1;
    } else {
      /* a frame the budget refuses is read and checked all the same (not
       * kept), so that what is wrong in it or after it is said as it is
       * when there is memory for it */
      frame_fields ff;
      memset(&ff, 0, sizeof ff);
      jw_type t = jw_piece(w, frame_member, &ff);
      if (t == JW_NONE)
        break;
      bool kept = !s->budget && room(&s->r->frames_b, i + 1, sizeof(rq_frame));
      rq_frame unkept;
      if (kept)
        s->r->frames = (rq_frame *)(void *)s->r->frames_b.p;
      else
        s->budget = true;
      if (!parse_frame(t, &ff, i, kept ? &s->r->frames[i] : &unkept, &s->ferr))
        s->frame_err = true;
      else if (kept)
        s->r->nframes = i + 1;
    }
    i++;
  }
  s->nframes = i;
}

static void sym_modules(sym_walk *s, jwalk *w) {
  if (!jw_array_begin(w))
    return;
  size_t i = 0;
  int k;
  while ((k = jw_array_next(w)) == 1) {
    if (i >= s->lim->max_modules) {
      jw_skip(w);
    } else if (s->budget) {
      if (!refused_piece(w))
        break;
    } else {
      module_fields mf;
      memset(&mf, 0, sizeof mf);
      mf.texts = &s->texts;
      s->texts.b.len = 0;
      jw_type t = jw_piece(w, module_member, &mf);
      if (t == JW_NONE)
        break;
      if (texts_failed(&s->texts) || !room(&s->r->mods_b, i + 1, sizeof(rq_module))) {
        s->budget = true;
      } else {
        s->r->mods = (rq_module *)(void *)s->r->mods_b.p;
        if (parse_module(s->r, t, &mf, i, &s->r->mods[i]))
          s->r->nmods = i + 1;
        else
          s->budget = true;
      }
    }
    i++;
  }
  s->nmods = i;
}

/* A request-level scalar at the cursor: true with *v, or false (with *bad
 * set when it is an object or array, which is skipped; unset on an error of
 * the walk). */
static bool scalar(jwalk *w, bool *bad, jw_val *v) {
  int t = jw_peek(w);
  if (t == '{' || t == '[') {
    jw_skip(w);
    *bad = true;
    return false;
  }
  return jw_scalar(w, v);
}

rq_result rq_parse_symbolicate(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                               rq_request *out, rq_error *err) {
  set_grant(out, grant);
  sym_walk s;
  memset(&s, 0, sizeof s);
  s.lim = lim;
  s.r = out;
  s.texts.b.grant = grant;
  jwalk w;
  jw_init(&w, body, len, grant);
  rq_result res = RQ_OK;
  int c = jw_peek(&w);
  if (c != '{') {
    if (c == '[') {
      if (jw_skip(&w) && jw_finish(&w))
        res = bad_msg(err, NULL, "the body must be a JSON object");
      else
        res = bad_json(err, &w);
    } else {
      jw_fail(&w, "'[' or '{' expected");
      res = bad_json(err, &w);
    }
    jw_free(&w);
    return res;
  }
  jw_object_begin(&w);
  const char *k;
  size_t kl;
  while (jw_object_next(&w, &k, &kl) == 1) {
    if (kl == 7 && !memcmp(k, "modules", 7)) {
      s.mods_seen = true;
      s.mods_array = jw_peek(&w) == '[';
      if (s.mods_array)
        sym_modules(&s, &w);
      else
        jw_skip(&w);
    } else if (kl == 6 && !memcmp(k, "frames", 6)) {
      s.frames_seen = true;
      s.frames_array = jw_peek(&w) == '[';
      if (s.frames_array)
        sym_frames(&s, &w);
      else
        jw_skip(&w);
    } else if (kl == 7 && !memcmp(k, "timeout", 7)) {
      jw_val v;
      if (scalar(&w, &s.timeout_bad, &v) && v.type != JW_NULL) {
        bool number = v.type == JW_INTEGER || v.type == JW_REAL;
        double d = v.type == JW_INTEGER ? (double)v.i : number ? v.d : -1;
        if (!number || d < 0 || d != d)
          s.timeout_bad = true;
        else {
          out->has_timeout = true;
          out->timeout = d;
        }
      }
    } else if (kl == 27 && !memcmp(k, "instruction_addr_adjustment", 27)) {
      jw_val v;
      if (scalar(&w, &s.adjust_bad, &v) && v.type != JW_NULL) {
        const char *m = v.type == JW_STRING ? v.s : "";
        size_t ml = v.type == JW_STRING ? v.n : 0;
        if (ml == 4 && !memcmp(m, "none", 4))
          out->adjust = RQ_ADJ_NONE;
        else if (ml == 13 && !memcmp(m, "all_but_first", 13))
          out->adjust = RQ_ADJ_ALL_BUT_FIRST;
        else if (ml == 3 && !memcmp(m, "all", 3))
          out->adjust = RQ_ADJ_ALL;
        else
          s.adjust_bad = true;
      }
    } else {
      jw_skip(&w);
    }
  }
  if (w.failed || !jw_finish(&w)) {
    res = bad_json(err, &w);
    goto done;
  }
  /* the checks in the order of a whole-tree reading */
  char msg[256];
  if (!s.mods_seen || !s.mods_array) {
    res = bad_msg(err, "modules", "modules must be an array");
    goto done;
  }
  if (!s.frames_seen || !s.frames_array) {
    res = bad_msg(err, "frames", "frames must be an array");
    goto done;
  }
  if (s.nmods > lim->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", s.nmods,
             (unsigned long long)lim->max_modules);
    res = bad_msg(err, "modules", msg);
    goto done;
  }
  if (s.nframes > lim->max_frames) {
    snprintf(msg, sizeof msg, "too many frames: %zu, the limit is max_frames = %llu", s.nframes,
             (unsigned long long)lim->max_frames);
    res = bad_msg(err, "frames", msg);
    goto done;
  }
  if (s.timeout_bad) {
    res = bad_msg(err, "timeout", "timeout must be a non-negative number of seconds");
    goto done;
  }
  if (s.adjust_bad) {
    res = bad_msg(err, "instruction_addr_adjustment",
                  "instruction_addr_adjustment must be \"none\", \"all_but_first\" or \"all\"");
    goto done;
  }
  if (s.budget) {
    res = RQ_BUDGET;
    goto done;
  }
  if (s.frame_err) {
    res = bad(err, &s.ferr);
    goto done;
  }
  if (!place_frames(out, grant))
    res = RQ_BUDGET;
done:
  jw_free(&w);
  rm_buf_free(&s.texts.b);
  if (res == RQ_OK)
    shrink(out);
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

/* A stack's frame [module_index, module_offset] as jw_piece hands it out. */
typedef struct {
  size_t count;        /* elements */
  jw_type t0, t1;      /* the types of the first two */
  int64_t i0, i1;      /* JW_INTEGER: their values */
  num_result nr1;      /* scalar_number(element 1, UINT64_MAX) */
  uint64_t v1;
  rm_buf text;         /* element 1 as given (NUL-terminated) when it is a hex
                        * string too wide, in the request's grant */
  bool oom;            /* that copy did not fit in the budget */
} v5_frame_fields;

static void v5_frame_member(void *ctx, const char *key, size_t klen, size_t index, const jw_val *v) {
  (void)key;
  (void)klen;
  v5_frame_fields *ff = ctx;
  ff->count = index + 1;
  if (index == 0) {
    ff->t0 = v->type;
    ff->i0 = v->i;
  } else if (index == 1) {
    ff->t1 = v->type;
    ff->i1 = v->i;
    ff->nr1 = scalar_number(v, UINT64_MAX, &ff->v1);
    if (v->type == JW_STRING && ff->nr1 == NUM_RANGE) {
      ff->text.len = 0;
      if (v->n >= SIZE_MAX || !rm_buf_reserve(&ff->text, v->n + 1)) {
        ff->oom = true;
        return;
      }
      memcpy(ff->text.p, v->s, v->n); /* n >= 3: "0x" and digits */
      ff->text.p[v->n] = '\0';
      ff->text.len = v->n + 1;
    }
  }
}

typedef struct {
  const rq_limits *lim;
  rq_request *r;
  bool budget;
  bool settled; /* the jobs' answer is decided: later jobs are only counted */
  v5_frame_fields ff; /* the frame being read */
  kept_texts texts;   /* of the memoryMap entry being read */
  /* kept so far by the jobs of "jobs" [0] and by the bare form [1], each
   * at most the limits (past them the request fails anyway) */
  size_t mods_kept[2], frames_kept[2]; /* mods: or refused for the budget alone */
} v5_walk;

/* One memoryMap entry.  Its shape fails the request (false, in j->merr); a
 * bad name or id fails the module alone, as Eliot answers a module it
 * cannot find. */
/* A memoryMap entry's elements (jw_piece): the first two kept. */
typedef struct {
  size_t count;
  kept_value e[2];
  kept_texts *texts;
} map_fields;

static void map_member(void *ctx, const char *key, size_t klen, size_t index, const jw_val *v) {
  (void)key;
  (void)klen;
  map_fields *mf = ctx;
  mf->count = index + 1;
  if (index < 2)
    keep(mf->texts, &mf->e[index], v);
}

/* Whether a memoryMap entry has its shape, [string, string]; false with
 * the error when not. */
static bool v5_map_shape(v5_job_walk *j, jw_type type, const map_fields *mf, size_t i) {
  if (type == JW_ARRAY && mf->count == 2 && mf->e[0].vtype == JW_STRING && mf->e[1].vtype == JW_STRING)
    return true;
  char f[96];
  snprintf(f, sizeof f, "%smemoryMap[%zu]", j->prefix, i);
  return fail(&j->merr, f, "a memoryMap entry must be [debug_file, breakpad_id]", NULL);
}

static bool v5_map_entry(v5_walk *s, v5_job_walk *j, jw_type type, const map_fields *mf, size_t i) {
  const kept_value *kn = &mf->e[0], *ki = &mf->e[1];
  if (!v5_map_shape(j, type, mf, i))
    return false;
  const char *name = kept_str(mf->texts, kn), *id = kept_str(mf->texts, ki);
  rq_module m;
  memset(&m, 0, sizeof m);
  m.field_off = m.why_off = m.gfile_off = m.gid_off = RQ_NO_TEXT;
  m.id.format = ST_FORMAT_WINDOWS; /* v5 names native Windows modules */
  m.skip = true;
  const char *why = NULL;
  if (!module_parse_file_name(name, m.id.debug_file, MODULE_NAME_MAX + 1, &why) ||
      !module_set_debug_id(&m.id, id, &why)) {
    m.invalid = true;
    /* its frames name the module as the entry gives it */
    if (!put_text(s->r, name, &m.gfile_off)) {
      s->budget = true;
      return true;
    }
  }
  /* the found_modules key: the entry as given, however long */
  size_t nl = kn->len, il = ki->len;
  size_t at = s->r->names.len;
  if (nl + il + 1 > UINT32_MAX - at || !rm_buf_append(&s->r->names, name, nl) ||
      !rm_buf_append(&s->r->names, "/", 1) || !rm_buf_append(&s->r->names, id, il)) {
    s->budget = true;
    return true;
  }
  m.given_off = (uint32_t)at;
  m.given_len = (uint32_t)(nl + il + 1);
  size_t n = s->r->nmods;
  if (!room(&s->r->mods_b, n + 1, sizeof(rq_module))) {
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

static void v5_map(v5_walk *s, v5_job_walk *j, jwalk *w) {
  j->job.mod_first = (uint32_t)s->r->nmods;
  if (!jw_array_begin(w))
    return;
  size_t i = 0;
  while (jw_array_next(w) == 1) {
    /* entries past max_modules are not kept: "too many modules" wins */
    bool would = !j->map_err && !(s->settled && !j->bare) && s->mods_kept[j->bare] < s->lim->max_modules;
    bool store = would && !s->budget;
    size_t kept = s->mods_kept[j->bare];
    if (!would) {
      jw_skip(w);
    } else {
      map_fields mf;
      memset(&mf, 0, sizeof mf);
      mf.texts = &s->texts;
      s->texts.b.len = 0;
      jw_type t = jw_piece(w, map_member, &mf);
      if (t == JW_NONE)
        break;
      if (!store || texts_failed(&s->texts)) {
        /* refused for the budget: checked all the same, not kept, so that
         * what is wrong in it or after it is said as it is with memory */
        s->budget = true;
        if (!v5_map_shape(j, t, &mf, i))
          j->map_err = true;
      } else if (!v5_map_entry(s, j, t, &mf, i)) {
        j->map_err = true;
      }
      /* an entry the budget alone refused counts as kept, so that the
       * entries read after it are the ones read with memory */
      if (!j->map_err && s->mods_kept[j->bare] == kept)
        s->mods_kept[j->bare]++;
    }
    i++;
  }
  j->map_count = i;
}

/* module_offset (the frame's element 1) into a frame: false when it is not
 * a number (NUM_BAD). */
static bool v5_offset(v5_walk *s, const v5_frame_fields *ff, rq_v5_frame *out) {
  num_result nr = ff->nr1;
  if (nr == NUM_BAD)
    return false;
  if (ff->t1 == JW_INTEGER && ff->i1 < 0) {
    /* Eliot's -1 ("not an offset") and the like: echoed as "-0x1" */
    out->off_kind = RQ_OFF_NEG;
    out->offset = 0ull - (uint64_t)ff->i1;
  } else if (nr == NUM_OK) {
    out->off_kind = RQ_OFF_OK;
    out->offset = ff->v1;
  } else {
    /* a hex string too wide for 64 bits: echoed as it came */
    out->off_kind = RQ_OFF_TEXT;
    if (!put_text(s->r, ff->text.p, &out->text_off))
      s->budget = true;
  }
  return true;
}

/* The usual v5 frame, [N, M] or [N, "0xHEX"] (white space anywhere JSON
 * allows it; N of 1 to 9 digits, M of 1 to 15, neither with a leading zero;
 * 1 to 16 hex digits after "0x" or "0X"), read at the cursor in one pass:
 * *index and *offset are what jw_piece and v5_offset make of it (an array
 * of two integers jansson reads as they stand, or an integer and a plain
 * ASCII string hex_number takes whole) and the cursor is left after the
 * ']', where jw_piece leaves it.  false, with nothing done, for anything
 * else, which the full reading takes. */
static bool usual_v5_frame(jwalk *w, int64_t *index, uint64_t *offset) {
  const char *s = w->s;
  size_t n = w->n, p = ws_end(s, w->pos, n);
  if (p >= n || s[p] != '[')
    return false;
  p = ws_end(s, p + 1, n);
  uint64_t v, off;
  if (!digits_at(s, &p, n, 9, &v))
    return false;
  p = ws_end(s, p, n);
  if (!(p = lit_at(s, p, n, ",", 1)) || p >= n)
    return false;
  if (s[p] == '"' ? !hex_at(s, &p, n, 16, true, &off) : !digits_at(s, &p, n, 15, &off))
    return false;
  p = ws_end(s, p, n);
  if (p >= n || s[p] != ']')
    return false;
  *index = (int64_t)v;
  *offset = off;
  w->pos = p + 1;
  return true;
}

/* A frame read whole, into the request's frames when store (and the
 * budget allows); bare: it is a frame of the bare form's job. */
static void keep_v5_frame(v5_walk *s, bool bare, bool store, const rq_v5_frame *fr) {
  if (!store || s->budget) {
    /* past v5_max_frames: not kept */
  } else if (!room(&s->r->v5_b, s->r->nv5_frames + 1, sizeof(rq_v5_frame))) {
    s->budget = true;
  } else {
    s->r->v5_frames = (rq_v5_frame *)(void *)s->r->v5_b.p;
    s->r->v5_frames[s->r->nv5_frames++] = *fr;
    s->r->stacks[s->r->nstacks].count++;
    s->frames_kept[bare]++;
  }
}

static void v5_stacks(v5_walk *s, v5_job_walk *j, jwalk *w) {
  j->job.stack_first = (uint32_t)s->r->nstacks;
  if (!jw_array_begin(w))
    return;
  char f[96];
  size_t si = 0;
  while (jw_array_next(w) == 1) {
    snprintf(f, sizeof f, "%sstacks[%zu]", j->prefix, si);
    j->nstacks++;
    if (jw_peek(w) != '[') {
      if (!j->stack_err)
        j->stack_err = !fail(&j->serr, f, "a stack must be an array of [module_index, module_offset]", NULL);
      jw_skip(w);
      si++;
      continue;
    }
    bool keep = !j->stack_err && !s->budget && !(s->settled && !j->bare);
    if (keep) {
      if (!room(&s->r->stacks_b, s->r->nstacks + 1, sizeof(rq_stack))) {
        s->budget = true;
        keep = false;
      } else {
        s->r->stacks = (rq_stack *)(void *)s->r->stacks_b.p;
        s->r->stacks[s->r->nstacks] = (rq_stack){(uint32_t)s->r->nv5_frames, 0};
      }
    }
    jw_array_begin(w);
    size_t k = 0;
    while (jw_array_next(w) == 1) {
      /* checked past v5_max_frames too (a bad frame in this job is reported
       * before "too many addresses"), kept only up to it */
      bool check = keep && !j->stack_err && !s->budget;
      bool store = check && s->frames_kept[j->bare] < s->lim->v5_max_frames;
      /* refused for the budget alone: read and checked as it would have
       * been, not kept, so that what is wrong in it or after it is said as
       * it is when there is memory for it */
      bool refused = !check && !j->stack_err && !(s->settled && !j->bare) && s->budget;
      rq_v5_frame fr;
      if (!check && !refused) {
        jw_skip(w);
      } else if (!w->failed && w->depth + 1 <= JW_MAX_DEPTH &&
                 usual_v5_frame(w, &fr.module_index, &fr.offset)) {
        int64_t index = fr.module_index;
        uint64_t offset = fr.offset;
        memset(&fr, 0, sizeof fr);
        fr.module_index = index;
        fr.off_kind = RQ_OFF_OK;
        fr.offset = offset;
        keep_v5_frame(s, j->bare, store, &fr);
      } else {
        v5_frame_fields *ff = &s->ff;
        ff->count = 0;
        ff->t0 = ff->t1 = JW_NONE;
        jw_type et = jw_piece(w, v5_frame_member, ff);
        if (et == JW_NONE)
          break;
        if (ff->oom) {
          s->budget = true;
          ff->oom = false;
        }
        memset(&fr, 0, sizeof fr);
        const char *bad = NULL; /* the frame's name is formatted only when it fails */
        if (et != JW_ARRAY || ff->count != 2 || ff->t0 != JW_INTEGER ||
            !(ff->t1 == JW_INTEGER || ff->t1 == JW_STRING))
          bad = "a frame must be [module_index, module_offset]";
        else if (!v5_offset(s, ff, &fr))
          bad = "module_offset must be an integer or a 0x hex string";
        if (bad) {
          snprintf(f, sizeof f, "%sstacks[%zu][%zu]", j->prefix, si, k);
          j->stack_err = !fail(&j->serr, f, bad, NULL);
        } else {
          fr.module_index = ff->i0;
          keep_v5_frame(s, j->bare, store, &fr);
        }
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
static void v5_job_member(v5_walk *s, v5_job_walk *j, const char *key, size_t klen, jwalk *w) {
  if (klen == 9 && !memcmp(key, "memoryMap", 9)) {
    j->map_seen = true;
    j->map_array = jw_peek(w) == '[';
    if (j->map_array)
      v5_map(s, j, w);
    else
      jw_skip(w);
  } else if (klen == 6 && !memcmp(key, "stacks", 6)) {
    j->stacks_seen = true;
    j->stacks_array = jw_peek(w) == '[';
    if (j->stacks_array)
      v5_stacks(s, j, w);
    else
      jw_skip(w);
  } else {
    jw_skip(w);
  }
}

static void v5_job(v5_walk *s, v5_job_walk *j, jwalk *w) {
  j->is_object = jw_peek(w) == '{';
  if (!j->is_object) {
    jw_skip(w);
    return;
  }
  jw_object_begin(w);
  const char *key;
  size_t klen;
  while (jw_object_next(w, &key, &klen) == 1)
    v5_job_member(s, j, key, klen, w);
}

/* The first problem of job j in the order a whole-tree reading meets it. */
static bool v5_job_error(const v5_job_walk *j, rq_error *err) {
  char f[96];
  if (!j->is_object) {
    snprintf(f, sizeof f, "%s", j->prefix[0] ? j->prefix : "body");
    if (f[strlen(f) - 1] == '.')
      f[strlen(f) - 1] = '\0';
    return !fail(err, f, "a job must be an object", NULL);
  }
  snprintf(f, sizeof f, "%smemoryMap", j->prefix);
  if (!j->map_seen || !j->map_array)
    return !fail(err, f, "memoryMap must be an array", NULL);
  snprintf(f, sizeof f, "%sstacks", j->prefix);
  if (!j->stacks_seen || !j->stacks_array)
    return !fail(err, f, "stacks must be an array", NULL);
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
static bool v5_job_settles(const rq_limits *lim, const v5_job_walk *j, size_t *nf, rq_error *err) {
  if (v5_job_error(j, err))
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
  fail(err, f, msg, NULL);
  return true;
}

/* Whether every entry of job j made it into the arrays. */
static bool v5_job_whole(const rq_request *r, const v5_job_walk *j) {
  size_t kept_frames = 0;
  for (uint32_t st = 0; st < j->job.nstacks; st++)
    kept_frames += r->stacks[j->job.stack_first + st].count;
  return j->job.nmods == j->map_count && j->job.nstacks == j->nstacks &&
         kept_frames == j->nframes;
}

static bool v5_push_job(rq_request *r, const rq_job *jb) {
  if (!room(&r->jobs_b, r->njobs + 1, sizeof(rq_job)))
    return false;
  r->jobs = (rq_job *)(void *)r->jobs_b.p;
  r->jobs[r->njobs++] = *jb;
  return true;
}

rq_result rq_parse_v5(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                      rq_request *out, rq_error *err) {
  set_grant(out, grant);
  v5_walk s;
  memset(&s, 0, sizeof s);
  s.lim = lim;
  s.r = out;
  /* one job walked at a time: the first problem is settled as the jobs come,
   * in order, so the state kept does not grow with the number of jobs */
  s.ff.text.grant = s.texts.b.grant = grant;
  /* [0]: the job of "jobs" being walked, [1]: bare; in the grant too */
  rm_buf jw_b = {0};
  jw_b.grant = grant;
  if (!rm_buf_reserve(&jw_b, 2 * sizeof(v5_job_walk)))
    return RQ_BUDGET;
  v5_job_walk *jw = (v5_job_walk *)(void *)jw_b.p;
  memset(jw, 0, 2 * sizeof *jw);
  v5_job_walk *bare = &jw[1];
  bare->is_object = true;
  bare->bare = true;
  bool jobs_seen = false, jobs_array = false, whole = true;
  size_t njobs = 0, total_map = 0, nf = 0;
  rq_error serr; /* the settled problem of the jobs */
  jwalk w;
  jw_init(&w, body, len, grant);
  rq_result res = RQ_OK;
  char msg[256];
  int c = jw_peek(&w);
  if (c != '{') {
    if (c == '[') {
      if (jw_skip(&w) && jw_finish(&w))
        res = bad_msg(err, NULL, "the body must be a JSON object");
      else
        res = bad_json(err, &w);
    } else {
      jw_fail(&w, "'[' or '{' expected");
      res = bad_json(err, &w);
    }
    goto done;
  }
  jw_object_begin(&w);
  const char *k;
  size_t kl;
  while (jw_object_next(&w, &k, &kl) == 1) {
    if (kl == 4 && !memcmp(k, "jobs", 4)) {
      jobs_seen = true;
      jobs_array = jw_peek(&w) == '[';
      if (!jobs_array) {
        jw_skip(&w);
      } else {
        jw_array_begin(&w);
        while (jw_array_next(&w) == 1) {
          if (njobs >= lim->v5_max_jobs) {
            jw_skip(&w); /* "too many jobs" */
            njobs++;
            continue;
          }
          v5_job_walk *j = &jw[0];
          memset(j, 0, sizeof *j);
          snprintf(j->prefix, sizeof j->prefix, "jobs[%zu].", njobs);
          v5_job(&s, j, &w);
          if (j->is_object && j->map_array)
            total_map += j->map_count;
          if (!s.settled) {
            s.settled = v5_job_settles(lim, j, &nf, &serr);
            whole = whole && v5_job_whole(out, j);
            if (!s.budget && !v5_push_job(out, &j->job))
              s.budget = true;
          }
          njobs++;
        }
      }
    } else {
      /* the bare form: the top level is the job (ignored if "jobs" is there) */
      v5_job_member(&s, bare, k, kl, &w);
    }
  }
  if (w.failed || !jw_finish(&w)) {
    res = bad_json(err, &w);
    goto done;
  }
  if (jobs_seen && !jobs_array) {
    res = bad_msg(err, "jobs", "jobs must be an array");
    goto done;
  }
  if (!jobs_seen) {
    njobs = 1;
    total_map = bare->map_array ? bare->map_count : 0;
    s.settled = v5_job_settles(lim, bare, &nf, &serr);
    whole = v5_job_whole(out, bare);
    if (!s.settled && !s.budget && !v5_push_job(out, &bare->job))
      s.budget = true;
  }
  if (njobs > lim->v5_max_jobs) {
    snprintf(msg, sizeof msg, "too many jobs: %zu, the limit is v5_max_jobs = %llu", njobs,
             (unsigned long long)lim->v5_max_jobs);
    res = bad_msg(err, "jobs", msg);
    goto done;
  }
  if (total_map > lim->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", total_map,
             (unsigned long long)lim->max_modules);
    res = bad_msg(err, "memoryMap", msg);
    goto done;
  }
  if (s.settled) {
    res = bad(err, &serr);
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
  jw_free(&w);
  rm_buf_free(&jw_b);
  rm_buf_free(&s.ff.text);
  rm_buf_free(&s.texts.b);
  if (res == RQ_OK)
    shrink(out);
  return res;
}
