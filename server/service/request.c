/*
 * request.c - request bodies into compact arrays (request.h).
 *
 * Both parsers walk the body once (jwalk.h), checking every piece as it comes
 * and remembering the first problem of each kind; the problem reported is
 * then chosen in the order a whole-tree reading would meet them, so the
 * answer does not depend on the order of the keys in the body.  The only
 * second look: /symbolicate frames that come before "modules" in the body
 * need the number of modules for their range check, so they are read again
 * once the walk is over (from their saved offset).
 */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jwalk.h"

/* ---- reasons of invalid frames ----------------------------------------------- */

enum { WHY_NONE, WHY_RVA_RANGE, WHY_RVA_32, WHY_TOKEN, WHY_IL_RANGE };
static const char *const why_text[] = {
    "", "rva out of range", "rva does not fit in 32 bits",
    "token is not a MethodDef token (0x06xxxxxx)", "il_offset out of range"};

const char *rq_why_text(uint16_t why) { return why < 5 ? why_text[why] : ""; }

/* ---- numbers: JSON integers or "0x" hex strings ----------------------------- */

typedef enum { NUM_OK, NUM_BAD, NUM_RANGE } num_result;

static num_result get_number(const json_t *v, uint64_t max, uint64_t *out) {
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

static rq_result bad_json(rq_error *out, const jwalk *w) {
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

/* The arrays are final: give back what their growth reserved beyond them
 * (they are re-pointed, realloc may move them). */
static void shrink(rq_request *r) {
  rm_buf_shrink(&r->mods_b);
  rm_buf_shrink(&r->frames_b);
  rm_buf_shrink(&r->v5_b);
  rm_buf_shrink(&r->stacks_b);
  rm_buf_shrink(&r->names);
  r->mods = (rq_module *)(void *)r->mods_b.p;
  r->frames = (rq_frame *)(void *)r->frames_b.p;
  r->v5_frames = (rq_v5_frame *)(void *)r->v5_b.p;
  r->stacks = (rq_stack *)(void *)r->stacks_b.p;
}

static void set_grant(rq_request *r, rm_grant *g) {
  r->mods_b.grant = r->frames_b.grant = r->v5_b.grant = r->stacks_b.grant = r->names.grant = g;
}

void rq_free(rq_request *r) {
  rm_buf_free(&r->mods_b);
  rm_buf_free(&r->frames_b);
  rm_buf_free(&r->v5_b);
  rm_buf_free(&r->stacks_b);
  rm_buf_free(&r->names);
  memset(r, 0, sizeof *r);
}

/* ---- POST /symbolicate: one module, one frame ------------------------------------------ */

static bool parse_module(const json_t *m, size_t i, rq_module *out, rq_error *err) {
  char f[96];
  const char *why = NULL;
  memset(out, 0, sizeof *out);
  if (!json_is_object(m)) {
    snprintf(f, sizeof f, "modules[%zu]", i);
    return fail(err, f, "a module must be an object", NULL);
  }
  const json_t *df = json_object_get(m, "debug_file");
  snprintf(f, sizeof f, "modules[%zu].debug_file", i);
  if (!json_is_string(df))
    return fail(err, f, "debug_file must be a string", NULL);
  if (strlen(json_string_value(df)) != json_string_length(df) ||
      !module_parse_file_name(json_string_value(df), out->id.debug_file,
                              sizeof out->id.debug_file, &why))
    return fail(err, f, "invalid debug_file: ", rq_reason(why));
  const json_t *di = json_object_get(m, "debug_id");
  snprintf(f, sizeof f, "modules[%zu].debug_id", i);
  if (!json_is_string(di))
    return fail(err, f, "debug_id must be a string", NULL);
  if (!module_parse_debug_id(json_string_value(di), out->id.guid, &out->id.age, &why))
    return fail(err, f, "invalid debug_id: ", rq_reason(why));
  const json_t *fm = json_object_get(m, "format");
  snprintf(f, sizeof f, "modules[%zu].format", i);
  if (fm && !json_is_null(fm)) {
    const char *s = json_is_string(fm) ? json_string_value(fm) : "";
    if (!strcmp(s, "windows"))
      out->id.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(s, "portable"))
      out->id.format = ST_FORMAT_PORTABLE;
    else
      return fail(err, f, "format must be \"windows\" or \"portable\"", NULL);
  }
  const json_t *cf = json_object_get(m, "code_file");
  snprintf(f, sizeof f, "modules[%zu].code_file", i);
  if (cf && !json_is_null(cf)) {
    if (!json_is_string(cf))
      return fail(err, f, "code_file must be a string", NULL);
    if (strlen(json_string_value(cf)) != json_string_length(cf) ||
        !module_parse_file_name(json_string_value(cf), out->id.code_file,
                                sizeof out->id.code_file, &why))
      return fail(err, f, "invalid code_file: ", rq_reason(why));
  }
  const json_t *ci = json_object_get(m, "code_id");
  snprintf(f, sizeof f, "modules[%zu].code_id", i);
  if (ci && !json_is_null(ci)) {
    if (!json_is_string(ci))
      return fail(err, f, "code_id must be a string", NULL);
    if (!module_parse_code_id(json_string_value(ci), &out->id.code_timestamp, &out->id.code_size,
                              &why))
      return fail(err, f, "invalid code_id: ", rq_reason(why));
    out->id.has_code_id = true;
  }
  return true;
}

static bool parse_frame(const json_t *fr, size_t i, size_t nmodules, rq_frame *out,
                        rq_error *err) {
  char f[96];
  memset(out, 0, sizeof *out);
  if (!json_is_object(fr)) {
    snprintf(f, sizeof f, "frames[%zu]", i);
    return fail(err, f, "a frame must be an object", NULL);
  }
  uint64_t v;
  const json_t *mo = json_object_get(fr, "module");
  snprintf(f, sizeof f, "frames[%zu].module", i);
  if (!mo)
    return fail(err, f, "module is required", NULL);
  num_result r = get_number(mo, UINT32_MAX, &v);
  if (r == NUM_BAD)
    return fail(err, f, "module must be an integer or a 0x hex string", NULL);
  if (r == NUM_RANGE || v >= nmodules)
    return fail(err, f, "module index out of range", NULL);
  out->module = (uint32_t)v;
  const json_t *rva = json_object_get(fr, "rva");
  const json_t *tok = json_object_get(fr, "token");
  if (rva && tok) {
    snprintf(f, sizeof f, "frames[%zu]", i);
    return fail(err, f, "a frame has either rva or token, not both", NULL);
  }
  if (!rva && !tok) {
    snprintf(f, sizeof f, "frames[%zu]", i);
    return fail(err, f, "a frame needs rva (native) or token and il_offset (managed)", NULL);
  }
  if (rva) {
    out->kind = RQ_NATIVE;
    snprintf(f, sizeof f, "frames[%zu].rva", i);
    r = get_number(rva, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return fail(err, f, "rva must be an integer or a 0x hex string", NULL);
    out->rva = v;
    if (r == NUM_RANGE) {
      out->invalid = 1;
      out->why = WHY_RVA_RANGE;
      out->rva = 0;
    } else if (v > UINT32_MAX) {
      out->invalid = 1;
      out->why = WHY_RVA_32;
    }
    return true;
  }
  out->kind = RQ_MANAGED;
  snprintf(f, sizeof f, "frames[%zu].token", i);
  r = get_number(tok, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return fail(err, f, "token must be an integer or a 0x hex string", NULL);
  out->rva = r == NUM_OK ? v : 0;
  if (r == NUM_RANGE || v > UINT32_MAX || (v >> 24) != 0x06) {
    out->invalid = 1;
    out->why = WHY_TOKEN;
  }
  const json_t *il = json_object_get(fr, "il_offset");
  snprintf(f, sizeof f, "frames[%zu].il_offset", i);
  if (!il)
    return fail(err, f, "a managed frame needs il_offset", NULL);
  r = get_number(il, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return fail(err, f, "il_offset must be an integer or a 0x hex string", NULL);
  out->il = r == NUM_OK ? v : 0;
  if (!out->invalid && (r == NUM_RANGE || v > UINT32_MAX)) {
    out->invalid = 1;
    out->why = WHY_IL_RANGE;
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
  bool mod_err;
  rq_error merr;
  /* frames */
  bool frames_seen, frames_array, frames_parsed;
  size_t frames_at;   /* offset of the "frames" array, for the second look */
  size_t nframes;
  bool frame_err;
  rq_error ferr;
  /* timeout */
  bool timeout_bad;
} sym_walk;

/* Walks the "frames" array at the cursor.  With the module count known,
 * checks each frame (up to the first bad one or max_frames); else counts. */
static void sym_frames(sym_walk *s, jwalk *w, bool check) {
  if (!jw_array_begin(w))
    return;
  size_t i = 0;
  int k;
  while ((k = jw_array_next(w)) == 1) {
    bool store = check && !s->frame_err && !s->budget && i < s->lim->max_frames;
    if (!store) {
      jw_skip(w);
    } else {
      json_t *v = jw_value(w);
      if (!v)
        break;
      if (!room(&s->r->frames_b, i + 1, sizeof(rq_frame))) {
        s->budget = true;
      } else {
        s->r->frames = (rq_frame *)(void *)s->r->frames_b.p;
        if (parse_frame(v, i, s->nmods, &s->r->frames[i], &s->ferr))
          s->r->nframes = i + 1;
        else
          s->frame_err = true;
      }
      json_decref(v);
    }
    i++;
  }
  s->nframes = i;
  if (check)
    s->frames_parsed = true;
}

static void sym_modules(sym_walk *s, jwalk *w) {
  if (!jw_array_begin(w))
    return;
  size_t i = 0;
  int k;
  while ((k = jw_array_next(w)) == 1) {
    bool store = !s->mod_err && !s->budget && i < s->lim->max_modules;
    if (!store) {
      jw_skip(w);
    } else {
      json_t *v = jw_value(w);
      if (!v)
        break;
      if (!room(&s->r->mods_b, i + 1, sizeof(rq_module))) {
        s->budget = true;
      } else {
        s->r->mods = (rq_module *)(void *)s->r->mods_b.p;
        if (parse_module(v, i, &s->r->mods[i], &s->merr))
          s->r->nmods = i + 1;
        else
          s->mod_err = true;
      }
      json_decref(v);
    }
    i++;
  }
  s->nmods = i;
}

rq_result rq_parse_symbolicate(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                               rq_request *out, rq_error *err) {
  set_grant(out, grant);
  sym_walk s;
  memset(&s, 0, sizeof s);
  s.lim = lim;
  s.r = out;
  jwalk w;
  jw_init(&w, body, len);
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
  json_t *key;
  while (jw_object_next(&w, &key) == 1) {
    const char *k = json_string_value(key);
    if (!strcmp(k, "modules") && json_string_length(key) == 7) {
      s.mods_seen = true;
      s.mods_array = jw_peek(&w) == '[';
      if (s.mods_array)
        sym_modules(&s, &w);
      else
        jw_skip(&w);
    } else if (!strcmp(k, "frames") && json_string_length(key) == 6) {
      s.frames_seen = true;
      s.frames_array = jw_peek(&w) == '[';
      if (s.frames_array) {
        s.frames_at = jw_tell(&w);
        /* the module count is final once "modules" has been walked */
        sym_frames(&s, &w, s.mods_seen);
      } else {
        jw_skip(&w);
      }
    } else if (!strcmp(k, "timeout") && json_string_length(key) == 7) {
      int t = jw_peek(&w);
      if (t == '{' || t == '[') {
        jw_skip(&w);
        s.timeout_bad = true;
      } else {
        json_t *v = jw_value(&w);
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
      }
    } else {
      jw_skip(&w);
    }
    json_decref(key);
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
  if (s.budget) {
    res = RQ_BUDGET;
    goto done;
  }
  if (s.mod_err) {
    res = bad(err, &s.merr);
    goto done;
  }
  if (!s.frames_parsed) {
    /* "frames" came before "modules": the second look, now that the module
     * count is known */
    jw_free(&w);
    jw_init_at(&w, body, len, s.frames_at);
    sym_frames(&s, &w, true);
    if (w.failed) { /* cannot happen: the first walk read these bytes */
      res = bad_json(err, &w);
      goto done;
    }
    if (s.budget) {
      res = RQ_BUDGET;
      goto done;
    }
  }
  if (s.frame_err)
    res = bad(err, &s.ferr);
done:
  jw_free(&w);
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

typedef struct {
  const rq_limits *lim;
  rq_request *r;
  bool budget;
  /* kept so far by the jobs of "jobs" [0] and by the bare form [1], each
   * at most the limits (past them the request fails anyway) */
  size_t mods_kept[2], frames_kept[2];
} v5_walk;

static bool v5_map_entry(v5_walk *s, v5_job_walk *j, const json_t *e, size_t i) {
  char f[96];
  snprintf(f, sizeof f, "%smemoryMap[%zu]", j->prefix, i);
  const json_t *name = json_array_get(e, 0), *id = json_array_get(e, 1);
  if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(name) || !json_is_string(id))
    return fail(&j->merr, f, "a memoryMap entry must be [debug_file, breakpad_id]", NULL);
  rq_module m;
  memset(&m, 0, sizeof m);
  const char *why = NULL;
  if (strlen(json_string_value(name)) != json_string_length(name) ||
      !module_parse_file_name(json_string_value(name), m.id.debug_file, sizeof m.id.debug_file, &why))
    return fail(&j->merr, f, "invalid debug_file: ", rq_reason(why));
  if (!module_parse_debug_id(json_string_value(id), m.id.guid, &m.id.age, &why))
    return fail(&j->merr, f, "invalid breakpad_id: ", rq_reason(why));
  m.id.format = ST_FORMAT_WINDOWS;
  m.skip = true;
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
    bool store = !j->map_err && !s->budget && s->mods_kept[j->bare] < s->lim->max_modules;
    if (!store) {
      jw_skip(w);
    } else {
      json_t *e = jw_value(w);
      if (!e)
        break;
      if (!v5_map_entry(s, j, e, i))
        j->map_err = true;
      json_decref(e);
    }
    i++;
  }
  j->map_count = i;
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
    bool keep = !j->stack_err && !s->budget;
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
      /* checked past max_frames too (a bad frame in this job is reported
       * before "too many frames"), kept only up to it */
      bool check = keep && !j->stack_err;
      bool store = check && s->frames_kept[j->bare] < s->lim->max_frames;
      if (!check) {
        jw_skip(w);
      } else {
        json_t *e = jw_value(w);
        if (!e)
          break;
        snprintf(f, sizeof f, "%sstacks[%zu][%zu]", j->prefix, si, k);
        const json_t *mi = json_array_get(e, 0), *off = json_array_get(e, 1);
        uint64_t v = 0;
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(mi) ||
            !(json_is_integer(off) || json_is_string(off))) {
          j->stack_err = !fail(&j->serr, f, "a frame must be [module_index, module_offset]", NULL);
        } else {
          num_result nr = get_number(off, UINT64_MAX, &v);
          if (nr == NUM_BAD) {
            j->stack_err =
                !fail(&j->serr, f, "module_offset must be an integer or a 0x hex string", NULL);
          } else if (!store) {
            /* past max_frames: not kept */
          } else if (!room(&s->r->v5_b, s->r->nv5_frames + 1, sizeof(rq_v5_frame))) {
            s->budget = true;
          } else {
            s->r->v5_frames = (rq_v5_frame *)(void *)s->r->v5_b.p;
            s->r->v5_frames[s->r->nv5_frames++] =
                (rq_v5_frame){(int64_t)json_integer_value(mi), v, nr == NUM_OK};
            s->r->stacks[s->r->nstacks].count++;
            s->frames_kept[j->bare]++;
          }
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

/* One job object at the cursor (jobs[i]); the bare form walks the top level
 * itself, through v5_job_member. */
static void v5_job_member(v5_walk *s, v5_job_walk *j, const char *key, size_t klen, jwalk *w) {
  if (klen == 9 && !strcmp(key, "memoryMap")) {
    j->map_seen = true;
    j->map_array = jw_peek(w) == '[';
    if (j->map_array)
      v5_map(s, j, w);
    else
      jw_skip(w);
  } else if (klen == 6 && !strcmp(key, "stacks")) {
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
  json_t *key;
  while (jw_object_next(w, &key) == 1) {
    v5_job_member(s, j, json_string_value(key), json_string_length(key), w);
    json_decref(key);
  }
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

rq_result rq_parse_v5(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                      rq_request *out, rq_error *err) {
  set_grant(out, grant);
  v5_walk s;
  memset(&s, 0, sizeof s);
  s.lim = lim;
  s.r = out;
  v5_job_walk *jobs = calloc(RQ_V5_MAX_JOBS + 1, sizeof *jobs); /* [RQ_V5_MAX_JOBS]: the bare job */
  if (!jobs)
    return bad_msg(err, NULL, "out of memory");
  v5_job_walk *bare = &jobs[RQ_V5_MAX_JOBS];
  bare->is_object = true;
  bare->bare = true;
  bool jobs_seen = false, jobs_array = false;
  size_t njobs = 0;
  jwalk w;
  jw_init(&w, body, len);
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
  json_t *key;
  while (jw_object_next(&w, &key) == 1) {
    const char *k = json_string_value(key);
    size_t kl = json_string_length(key);
    if (kl == 4 && !strcmp(k, "jobs")) {
      jobs_seen = true;
      jobs_array = jw_peek(&w) == '[';
      if (!jobs_array) {
        jw_skip(&w);
      } else {
        jw_array_begin(&w);
        while (jw_array_next(&w) == 1) {
          if (njobs < RQ_V5_MAX_JOBS) {
            v5_job_walk *j = &jobs[njobs];
            snprintf(j->prefix, sizeof j->prefix, "jobs[%zu].", njobs);
            v5_job(&s, j, &w);
          } else {
            jw_skip(&w); /* "too many jobs" */
          }
          njobs++;
        }
      }
    } else {
      /* the bare form: the top level is the job (ignored if "jobs" is there) */
      v5_job_member(&s, bare, k, kl, &w);
    }
    json_decref(key);
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
    jobs[0] = *bare;
    njobs = 1;
  }
  if (njobs > RQ_V5_MAX_JOBS) {
    snprintf(msg, sizeof msg, "too many jobs: %zu, the limit is %d", njobs, RQ_V5_MAX_JOBS);
    res = bad_msg(err, "jobs", msg);
    goto done;
  }
  size_t total_map = 0;
  for (size_t i = 0; i < njobs; i++)
    if (jobs[i].is_object && jobs[i].map_array)
      total_map += jobs[i].map_count;
  if (total_map > lim->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", total_map,
             (unsigned long long)lim->max_modules);
    res = bad_msg(err, "memoryMap", msg);
    goto done;
  }
  size_t nf = 0;
  for (size_t i = 0; i < njobs; i++) {
    if (v5_job_error(&jobs[i], err)) {
      res = RQ_BAD;
      goto done;
    }
    nf += jobs[i].nframes;
    if (nf > lim->max_frames) {
      snprintf(msg, sizeof msg, "too many frames: more than the limit max_frames = %llu",
               (unsigned long long)lim->max_frames);
      res = bad_msg(err, "stacks", msg);
      goto done;
    }
  }
  /* every job is whole now, unless the budget stopped the arrays */
  for (size_t i = 0; i < njobs && !s.budget; i++) {
    size_t kept_frames = 0;
    for (uint32_t st = 0; st < jobs[i].job.nstacks; st++)
      kept_frames += out->stacks[jobs[i].job.stack_first + st].count;
    s.budget = jobs[i].job.nmods != jobs[i].map_count || jobs[i].job.nstacks != jobs[i].nstacks ||
               kept_frames != jobs[i].nframes;
  }
  if (s.budget) {
    res = RQ_BUDGET;
    goto done;
  }
  /* mark the modules the frames name */
  out->njobs = njobs;
  for (size_t i = 0; i < njobs; i++) {
    rq_job *jb = &jobs[i].job;
    out->jobs[i] = *jb;
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
  free(jobs);
  if (res == RQ_OK)
    shrink(out);
  return res;
}
