/*
 * api_ref.h - the answer half of the routes as it was before issue 15
 * (api.c built whole answers as jansson trees and serialised them with
 * json_dumps), kept for the tests only: test_render_equiv.c sends the same
 * requests through ref_api_handle and through the service's api_handle and
 * compares the answers byte for byte.  Copied from api.c at main dbe07f6;
 * only the names changed (ref_ prefix) and everything is static.  It uses
 * the engine and the metrics as the real routes do, and render_ref.h for
 * frames.
 */
#ifndef PDBSYM_TEST_API_REF_H
#define PDBSYM_TEST_API_REF_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api.h"
#include "log.h"
#include "metrics.h"
#include "render_ref.h"

/* ---- responses ------------------------------------------------------------ */

static inline void ref_set_json(api_response *out, unsigned status, json_t *root) {
  out->status = status;
  out->content_type = "application/json";
  out->body = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!out->body) {
    out->status = 500;
    static const char oom[] = "{\"error\":\"out of memory\"}";
    out->body = malloc(sizeof oom);
    if (out->body)
      memcpy(out->body, oom, sizeof oom);
  }
  out->len = out->body ? strlen(out->body) : 0;
}

static inline void ref_api_error(api_response *out, unsigned status, const char *msg, const char *field) {
  json_t *e = json_object();
  /* ref_render_string: msg may quote request bytes (a method, a JSON token) that
   * are not UTF-8, which json_string refuses */
  json_object_set_new(e, "error", ref_render_string(msg));
  if (field)
    json_object_set_new(e, "field", ref_render_string(field));
  ref_set_json(out, status, e);
}

/* ---- routing -------------------------------------------------------------- */

static const char *const route_names[RT__COUNT] = {"/symbolicate", "/symbolicate/v5", "/modules",
                                                   "/health",      "/ready",          "/metrics",
                                                   "other"};
static const char *const frame_status_names[FS__COUNT] = {
    "ok", "missing_symbols", "unknown_address", "malformed", "fetch_error", "pending", "invalid"};

static inline const char *ref_api_route_name(api_route_id r) {
  return (unsigned)r < RT__COUNT ? route_names[r] : "other";
}

static inline const char *ref_frame_status_name(frame_status s) {
  return (unsigned)s < FS__COUNT ? frame_status_names[s] : "invalid";
}

static inline api_match ref_api_route(const char *method, const char *path, api_route_id *route, const char **allow) {
  static const struct {
    const char *path;
    api_route_id route;
    const char *method;
  } exact[] = {
      {"/symbolicate", RT_SYMBOLICATE, "POST"},
      {"/symbolicate/v5", RT_SYMBOLICATE_V5, "POST"},
      {"/health", RT_HEALTH, "GET"},
      {"/ready", RT_READY, "GET"},
      {"/metrics", RT_METRICS, "GET"},
  };
  *route = RT_OTHER;
  *allow = NULL;
  const char *want = NULL;
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    if (!strcmp(path, exact[i].path)) {
      *route = exact[i].route;
      want = exact[i].method;
      break;
    }
  }
  if (!want && !strncmp(path, "/modules/", 9)) {
    /* exactly two non-empty segments after /modules/ */
    const char *a = path + 9;
    const char *slash = strchr(a, '/');
    if (slash && slash > a && slash[1] && !strchr(slash + 1, '/')) {
      *route = RT_MODULES;
      want = "GET";
    }
  }
  if (!want)
    return API_NOT_FOUND;
  bool get = !strcmp(want, "GET");
  if (!strcmp(method, want) || (get && !strcmp(method, "HEAD")))
    return API_MATCH_OK;
  *allow = get ? "GET, HEAD" : "POST";
  return API_BAD_METHOD;
}

static inline bool ref_api_route_heavy(api_route_id r) {
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_MODULES;
}

static inline bool ref_api_route_has_body(api_route_id r) { return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5; }

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

/* ---- a request's modules ---------------------------------------------------- */

typedef struct {
  module_id id;
  mod_handle h;
  bool resolved;
  bool skip;        /* v5: no frame names it, so it is not looked up */
  size_t same;      /* index of the first entry naming the same module (itself if none) */
  ref_render_module rm; /* Source Link map etc., set up at the first answered frame */
  bool rm_init;
} req_module;

typedef enum { FR_NATIVE, FR_MANAGED } frame_kind;

typedef struct {
  uint32_t module;
  frame_kind kind;
  bool invalid;
  const char *why; /* static, for invalid frames */
  uint64_t rva;    /* or token */
  uint64_t il;
} req_frame;

typedef struct {
  char field[96];
  char msg[256];
} req_error;

/* module.h's reasons may start with the field's name ("debug_id: expected
 * ..."); the error names the field already, so that prefix is dropped. */
static inline const char *ref_reason(const char *why) {
  if (!why)
    return "contains a NUL byte";
  const char *p = why;
  while ((*p >= 'a' && *p <= 'z') || *p == '_')
    p++;
  return (p > why && p[0] == ':' && p[1] == ' ') ? p + 2 : why;
}

/* Records a 400's message (msg followed by detail, if any) and field. */
static inline bool ref_fail(req_error *e, const char *field, const char *msg, const char *detail) {
  snprintf(e->field, sizeof e->field, "%s", field);
  snprintf(e->msg, sizeof e->msg, "%s%s", msg, detail ? detail : "");
  return false;
}

/* A file name from a JSON string (module.h's rules); a NUL inside the string
 * is refused too (why is then NULL: ref_reason() names it). */
static inline bool ref_parse_name(const json_t *s, char out[MODULE_NAME_MAX + 1], const char **why) {
  *why = NULL;
  return strlen(json_string_value(s)) == json_string_length(s) &&
         module_parse_file_name(json_string_value(s), out, MODULE_NAME_MAX + 1, why);
}

static inline bool ref_parse_module(const json_t *m, size_t i, req_module *out, req_error *err) {
  char f[96];
  const char *why = NULL;
  memset(out, 0, sizeof *out);
  if (!json_is_object(m)) {
    snprintf(f, sizeof f, "modules[%zu]", i);
    return ref_fail(err, f, "a module must be an object", NULL);
  }
  const json_t *df = json_object_get(m, "debug_file");
  snprintf(f, sizeof f, "modules[%zu].debug_file", i);
  if (!json_is_string(df))
    return ref_fail(err, f, "debug_file must be a string", NULL);
  if (!ref_parse_name(df, out->id.debug_file, &why))
    return ref_fail(err, f, "invalid debug_file: ", ref_reason(why));
  const json_t *di = json_object_get(m, "debug_id");
  snprintf(f, sizeof f, "modules[%zu].debug_id", i);
  if (!json_is_string(di))
    return ref_fail(err, f, "debug_id must be a string", NULL);
  if (!module_parse_debug_id(json_string_value(di), out->id.guid, &out->id.age, &why))
    return ref_fail(err, f, "invalid debug_id: ", ref_reason(why));
  const json_t *fm = json_object_get(m, "format");
  snprintf(f, sizeof f, "modules[%zu].format", i);
  if (fm && !json_is_null(fm)) {
    const char *s = json_is_string(fm) ? json_string_value(fm) : "";
    if (!strcmp(s, "windows"))
      out->id.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(s, "portable"))
      out->id.format = ST_FORMAT_PORTABLE;
    else
      return ref_fail(err, f, "format must be \"windows\" or \"portable\"", NULL);
  }
  const json_t *cf = json_object_get(m, "code_file");
  snprintf(f, sizeof f, "modules[%zu].code_file", i);
  if (cf && !json_is_null(cf)) {
    if (!json_is_string(cf))
      return ref_fail(err, f, "code_file must be a string", NULL);
    if (!ref_parse_name(cf, out->id.code_file, &why))
      return ref_fail(err, f, "invalid code_file: ", ref_reason(why));
  }
  const json_t *ci = json_object_get(m, "code_id");
  snprintf(f, sizeof f, "modules[%zu].code_id", i);
  if (ci && !json_is_null(ci)) {
    if (!json_is_string(ci))
      return ref_fail(err, f, "code_id must be a string", NULL);
    if (!module_parse_code_id(json_string_value(ci), &out->id.code_timestamp, &out->id.code_size,
                              &why))
      return ref_fail(err, f, "invalid code_id: ", ref_reason(why));
    out->id.has_code_id = true;
  }
  return true;
}

static inline bool ref_parse_frame(const json_t *fr, size_t i, size_t nmodules, req_frame *out,
                        req_error *err) {
  char f[96];
  memset(out, 0, sizeof *out);
  if (!json_is_object(fr)) {
    snprintf(f, sizeof f, "frames[%zu]", i);
    return ref_fail(err, f, "a frame must be an object", NULL);
  }
  uint64_t v;
  const json_t *mo = json_object_get(fr, "module");
  snprintf(f, sizeof f, "frames[%zu].module", i);
  if (!mo)
    return ref_fail(err, f, "module is required", NULL);
  num_result r = ref_get_number(mo, UINT32_MAX, &v);
  if (r == NUM_BAD)
    return ref_fail(err, f, "module must be an integer or a 0x hex string", NULL);
  if (r == NUM_RANGE || v >= nmodules)
    return ref_fail(err, f, "module index out of range", NULL);
  out->module = (uint32_t)v;
  const json_t *rva = json_object_get(fr, "rva");
  const json_t *tok = json_object_get(fr, "token");
  if (rva && tok) {
    snprintf(f, sizeof f, "frames[%zu]", i);
    return ref_fail(err, f, "a frame has either rva or token, not both", NULL);
  }
  if (!rva && !tok) {
    snprintf(f, sizeof f, "frames[%zu]", i);
    return ref_fail(err, f, "a frame needs rva (native) or token and il_offset (managed)", NULL);
  }
  if (rva) {
    out->kind = FR_NATIVE;
    snprintf(f, sizeof f, "frames[%zu].rva", i);
    r = ref_get_number(rva, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return ref_fail(err, f, "rva must be an integer or a 0x hex string", NULL);
    out->rva = v;
    if (r == NUM_RANGE) {
      out->invalid = true;
      out->why = "rva out of range";
      out->rva = 0;
    } else if (v > UINT32_MAX) {
      out->invalid = true;
      out->why = "rva does not fit in 32 bits";
    }
    return true;
  }
  out->kind = FR_MANAGED;
  snprintf(f, sizeof f, "frames[%zu].token", i);
  r = ref_get_number(tok, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return ref_fail(err, f, "token must be an integer or a 0x hex string", NULL);
  out->rva = r == NUM_OK ? v : 0;
  if (r == NUM_RANGE || v > UINT32_MAX || (v >> 24) != 0x06) {
    out->invalid = true;
    out->why = "token is not a MethodDef token (0x06xxxxxx)";
  }
  const json_t *il = json_object_get(fr, "il_offset");
  snprintf(f, sizeof f, "frames[%zu].il_offset", i);
  if (!il)
    return ref_fail(err, f, "a managed frame needs il_offset", NULL);
  r = ref_get_number(il, UINT64_MAX, &v);
  if (r == NUM_BAD)
    return ref_fail(err, f, "il_offset must be an integer or a 0x hex string", NULL);
  out->il = r == NUM_OK ? v : 0;
  if (!out->invalid && (r == NUM_RANGE || v > UINT32_MAX)) {
    out->invalid = true;
    out->why = "il_offset out of range";
  }
  return true;
}

/* ---- rendering an answer (the contract's symbol list) ------------------------- */

static inline const char *ref_format_name(st_format f) {
  return f == ST_FORMAT_WINDOWS ? "windows" : f == ST_FORMAT_PORTABLE ? "portable" : NULL;
}

static inline frame_status ref_module_frame_status(mod_status s) {
  switch (s) {
  case MOD_FOUND: return FS_OK;
  case MOD_MISSING: return FS_MISSING_SYMBOLS;
  case MOD_MALFORMED: return FS_MALFORMED;
  case MOD_FETCH_ERROR: return FS_FETCH_ERROR;
  case MOD_PENDING: return FS_PENDING;
  }
  return FS_INVALID;
}

static inline json_t *ref_answer_frame(const api *a, const req_frame *fr, req_module *m,
                            frame_status *st_out) {
  frame_status st;
  const char *err = NULL;
  st_answer ans;
  ans.nsyms = 0;
  if (fr->invalid) {
    st = FS_INVALID;
    err = fr->why;
  } else if (m->h.status != MOD_FOUND) {
    st = ref_module_frame_status(m->h.status);
    err = m->h.error[0] ? m->h.error : mod_status_name(m->h.status);
  } else {
    if (fr->kind == FR_NATIVE)
      st_lookup_rva(m->h.st, (uint32_t)fr->rva, &ans);
    else
      st_lookup_token(m->h.st, (uint32_t)fr->rva, (uint32_t)fr->il, &ans);
    st = ans.status == ST_OK ? FS_OK : FS_UNKNOWN_ADDRESS;
    if (st != FS_OK)
      err = fr->kind == FR_NATIVE ? "no function covers this address"
                                  : "no method with this token";
  }
  if (st == FS_OK && !m->rm_init) {
    ref_render_module_init(&m->rm, m->h.st);
    m->rm_init = true;
  }
  render_frame f = {
      .status = ref_frame_status_name(st),
      .module = fr->module,
      .has_address = true,
      .managed = fr->kind == FR_MANAGED,
      .rva_or_token = fr->rva,
      .il_offset = fr->il,
      .answer = st == FS_OK ? &ans : NULL,
      .error = err,
      .retry_after = st == FS_PENDING ? (long long)a->cfg->retry_after : -1,
      .input = NULL,
  };
  *st_out = st;
  return ref_render_frame_obj(&m->rm, &f);
}

static inline json_t *ref_answer_module(const api *a, const req_module *m) {
  json_t *o = json_object();
  char id[48];
  module_debug_id(m->id.guid, m->id.age, id);
  json_object_set_new(o, "debug_file", json_string(m->id.debug_file));
  json_object_set_new(o, "debug_id", json_string(id));
  json_object_set_new(o, "status", json_string(mod_status_name(m->h.status)));
  const char *fmt = ref_format_name(m->h.format ? m->h.format : m->id.format);
  json_object_set_new(o, "format", fmt ? json_string(fmt) : json_null());
  if (m->h.source[0])
    json_object_set_new(o, "source", ref_render_string(m->h.source));
  else
    json_object_set_new(o, "source", json_null());
  json_object_set_new(o, "from_cache", json_boolean(m->h.from_cache));
  if (m->h.status != MOD_FOUND && m->h.error[0])
    json_object_set_new(o, "error", ref_render_string(m->h.error));
  if (m->h.status == MOD_PENDING)
    json_object_set_new(o, "retry_after", json_integer((json_int_t)a->cfg->retry_after));
  return o;
}

/* A module listed twice in one request is resolved once: later entries point
 * at the first (module_id is zero-filled before parsing, so memcmp is exact). */
static inline void ref_dedupe_modules(req_module *mods, size_t n) {
  for (size_t i = 0; i < n; i++) {
    mods[i].same = i;
    for (size_t k = 0; k < i; k++) {
      if (mods[k].same == k && !memcmp(mods[k].id.guid, mods[i].id.guid, 16) &&
          !memcmp(&mods[k].id, &mods[i].id, sizeof mods[i].id)) {
        mods[i].same = k;
        if (!mods[i].skip)
          mods[k].skip = false;
        break;
      }
    }
  }
}

/* Step 2 of the file comment: probe all, then wait for the pending ones. */
static inline void ref_resolve_modules(api *a, req_module *mods, size_t n, uint64_t deadline) {
  uint64_t now = engine_now_ms();
  ref_dedupe_modules(mods, n);
  for (size_t i = 0; i < n; i++) {
    if (mods[i].skip || mods[i].same != i)
      continue;
    engine_resolve(a->eng, &mods[i].id, now ? now : 1, &mods[i].h);
    mods[i].resolved = true;
    mt_cache(mods[i].h.from_cache);
  }
  for (size_t i = 0; i < n; i++) {
    if (!mods[i].resolved || mods[i].h.status != MOD_PENDING)
      continue;
    if (engine_now_ms() >= deadline)
      break;
    engine_release(a->eng, &mods[i].h);
    engine_resolve(a->eng, &mods[i].id, deadline, &mods[i].h);
    /* this request waited for a fetch: not an answer from the cache, even if
     * the engine read the fresh module back from it */
    mods[i].h.from_cache = false;
  }
}

static inline void ref_release_modules(api *a, req_module *mods, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (mods[i].rm_init)
      ref_render_module_free(&mods[i].rm);
    if (mods[i].resolved)
      engine_release(a->eng, &mods[i].h);
  }
}

/* The request body as JSON (duplicate keys refused), or NULL after a 400
 * naming where the JSON broke. */
static inline json_t *ref_parse_body(const char *body, size_t len, api_response *out) {
  json_error_t jerr;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
             jerr.column);
    ref_api_error(out, 400, msg, NULL);
  }
  return root;
}

static inline void ref_symbolicate(api *a, const char *body, size_t len, api_response *out) {
  json_t *root = ref_parse_body(body, len, out);
  if (!root)
    return;
  req_module *mods = NULL;
  req_frame *frames = NULL;
  size_t nm = 0, nf = 0;
  req_error err = {"", ""};
  char msg[256];
  json_t *jm, *jf, *jt;
  if (!json_is_object(root)) {
    ref_api_error(out, 400, "the body must be a JSON object", NULL);
    goto done;
  }
  jm = json_object_get(root, "modules");
  jf = json_object_get(root, "frames");
  jt = json_object_get(root, "timeout");
  if (!json_is_array(jm)) {
    ref_api_error(out, 400, "modules must be an array", "modules");
    goto done;
  }
  if (!json_is_array(jf)) {
    ref_api_error(out, 400, "frames must be an array", "frames");
    goto done;
  }
  nm = json_array_size(jm);
  nf = json_array_size(jf);
  if (nm > a->cfg->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", nm,
             (unsigned long long)a->cfg->max_modules);
    ref_api_error(out, 400, msg, "modules");
    goto done;
  }
  if (nf > a->cfg->max_frames) {
    snprintf(msg, sizeof msg, "too many frames: %zu, the limit is max_frames = %llu", nf,
             (unsigned long long)a->cfg->max_frames);
    ref_api_error(out, 400, msg, "frames");
    goto done;
  }
  uint64_t timeout_ms = a->cfg->default_timeout * 1000u;
  if (jt && !json_is_null(jt)) {
    double t = json_is_number(jt) ? json_number_value(jt) : -1;
    if (!json_is_number(jt) || t < 0 || t != t) {
      ref_api_error(out, 400, "timeout must be a non-negative number of seconds", "timeout");
      goto done;
    }
    double cap = (double)a->cfg->max_timeout;
    timeout_ms = (uint64_t)((t < cap ? t : cap) * 1000.0);
  }
  mods = calloc(nm ? nm : 1, sizeof *mods);
  frames = calloc(nf ? nf : 1, sizeof *frames);
  if (!mods || !frames) {
    ref_api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < nm; i++) {
    if (!ref_parse_module(json_array_get(jm, i), i, &mods[i], &err)) {
      ref_api_error(out, 400, err.msg, err.field);
      goto done;
    }
  }
  for (size_t i = 0; i < nf; i++) {
    if (!ref_parse_frame(json_array_get(jf, i), i, nm, &frames[i], &err)) {
      ref_api_error(out, 400, err.msg, err.field);
      goto done;
    }
  }
  uint64_t deadline = engine_now_ms() + timeout_ms;
  ref_resolve_modules(a, mods, nm, deadline);

  json_t *ans = json_object();
  json_t *af = json_array();
  uint64_t counts[FS__COUNT] = {0};
  for (size_t i = 0; i < nf; i++) {
    frame_status st;
    req_module *m = &mods[mods[frames[i].module].same];
    json_array_append_new(af, ref_answer_frame(a, &frames[i], m, &st));
    counts[st]++;
  }
  json_t *am = json_array();
  for (size_t i = 0; i < nm; i++) {
    json_array_append_new(am, ref_answer_module(a, &mods[mods[i].same]));
    if (mods[i].same == i)
      mt_module(mods[i].h.status);
  }
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  json_object_set_new(ans, "frames", af);
  json_object_set_new(ans, "modules", am);
  ref_release_modules(a, mods, nm);
  ref_set_json(out, 200, ans);
  out->frames = (long)nf;
  out->modules = (long)nm;
done:
  free(mods);
  free(frames);
  json_decref(root);
}

/* ---- POST /ref_symbolicate/v5 (Mozilla's symbolication API v5) -------------------- */

#define V5_MAX_JOBS 10

typedef struct {
  const json_t *map;    /* memoryMap */
  const json_t *stacks; /* stacks */
  size_t mod_first;     /* this job's modules in the flat array */
  char prefix[32];      /* "jobs[2]." or "" for a bare job */
} v5_job;

static inline bool ref_v5_parse_job(const json_t *job, v5_job *j, req_module *mods, size_t *nmods,
                         size_t *nframes, req_error *err) {
  char f[96];
  if (!json_is_object(job)) {
    snprintf(f, sizeof f, "%s", j->prefix[0] ? j->prefix : "body");
    if (f[strlen(f) - 1] == '.')
      f[strlen(f) - 1] = '\0';
    return ref_fail(err, f, "a job must be an object", NULL);
  }
  j->map = json_object_get(job, "memoryMap");
  j->stacks = json_object_get(job, "stacks");
  snprintf(f, sizeof f, "%smemoryMap", j->prefix);
  if (!json_is_array(j->map))
    return ref_fail(err, f, "memoryMap must be an array", NULL);
  snprintf(f, sizeof f, "%sstacks", j->prefix);
  if (!json_is_array(j->stacks))
    return ref_fail(err, f, "stacks must be an array", NULL);
  j->mod_first = *nmods;
  size_t i;
  const json_t *e;
  json_array_foreach(j->map, i, e) {
    snprintf(f, sizeof f, "%smemoryMap[%zu]", j->prefix, i);
    const json_t *name = json_array_get(e, 0), *id = json_array_get(e, 1);
    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(name) ||
        !json_is_string(id))
      return ref_fail(err, f, "a memoryMap entry must be [debug_file, breakpad_id]", NULL);
    req_module *m = &mods[(*nmods)++];
    memset(m, 0, sizeof *m);
    const char *why = NULL;
    if (!ref_parse_name(name, m->id.debug_file, &why))
      return ref_fail(err, f, "invalid debug_file: ", ref_reason(why));
    if (!module_parse_debug_id(json_string_value(id), m->id.guid, &m->id.age, &why))
      return ref_fail(err, f, "invalid breakpad_id: ", ref_reason(why));
    m->id.format = ST_FORMAT_WINDOWS;
    m->skip = true;
  }
  const json_t *stack;
  json_array_foreach(j->stacks, i, stack) {
    snprintf(f, sizeof f, "%sstacks[%zu]", j->prefix, i);
    if (!json_is_array(stack))
      return ref_fail(err, f, "a stack must be an array of [module_index, module_offset]", NULL);
    size_t k;
    json_array_foreach(stack, k, e) {
      snprintf(f, sizeof f, "%sstacks[%zu][%zu]", j->prefix, i, k);
      const json_t *mi = json_array_get(e, 0), *off = json_array_get(e, 1);
      if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(mi) ||
          !(json_is_integer(off) || json_is_string(off)))
        return ref_fail(err, f, "a frame must be [module_index, module_offset]", NULL);
      uint64_t v;
      if (ref_get_number(off, UINT64_MAX, &v) == NUM_BAD)
        return ref_fail(err, f, "module_offset must be an integer or a 0x hex string", NULL);
      json_int_t idx = json_integer_value(mi);
      if (idx >= 0 && (size_t)idx < json_array_size(j->map))
        mods[j->mod_first + (size_t)idx].skip = false;
      (*nframes)++;
    }
  }
  return true;
}

static inline json_t *ref_v5_frame(size_t index, const json_t *e, const v5_job *j, const req_module *mods) {
  json_t *o = json_object();
  json_object_set_new(o, "frame", json_integer((json_int_t)index));
  json_int_t idx = json_integer_value(json_array_get(e, 0));
  uint64_t off = 0;
  num_result r = ref_get_number(json_array_get(e, 1), UINT64_MAX, &off);
  const req_module *m = NULL;
  if (idx >= 0 && (size_t)idx < json_array_size(j->map)) {
    m = &mods[mods[j->mod_first + (size_t)idx].same];
    json_object_set_new(o, "module", json_string(m->id.debug_file));
  }
  json_object_set_new(o, "module_offset", r == NUM_OK ? ref_render_hex(off, 0) : json_string("0x0"));
  if (!m || r != NUM_OK || off > UINT32_MAX || m->h.status != MOD_FOUND)
    return o;
  st_answer ans;
  st_lookup_rva(m->h.st, (uint32_t)off, &ans);
  if (ans.status != ST_OK || ans.nsyms < 1)
    return o;
  const st_symbol *outer = &ans.syms[ans.nsyms - 1];
  json_object_set_new(o, "function", ref_render_string(outer->function ? outer->function : ""));
  if (outer->has_offset)
    json_object_set_new(o, "function_offset", ref_render_hex(outer->function_offset, 0));
  if (outer->file && outer->has_line)
    json_object_set_new(o, "file", ref_render_string(outer->file));
  if (outer->has_line && outer->line && outer->line != ST_HIDDEN_LINE)
    json_object_set_new(o, "line", json_integer(outer->line));
  if (ans.nsyms > 1) {
    json_t *inl = json_array();
    for (int i = 0; i < ans.nsyms - 1; i++) { /* innermost (deepest) first */
      const st_symbol *s = &ans.syms[i];
      json_t *x = json_object();
      json_object_set_new(x, "function", ref_render_string(s->function ? s->function : ""));
      if (s->file && s->has_line)
        json_object_set_new(x, "file", ref_render_string(s->file));
      if (s->has_line && s->line && s->line != ST_HIDDEN_LINE)
        json_object_set_new(x, "line", json_integer(s->line));
      json_array_append_new(inl, x);
    }
    json_object_set_new(o, "inlines", inl);
  }
  return o;
}

static inline void ref_symbolicate_v5(api *a, const char *body, size_t len, api_response *out) {
  json_t *root = ref_parse_body(body, len, out);
  if (!root)
    return;
  v5_job jobs[V5_MAX_JOBS];
  size_t njobs = 0, nm = 0, nf = 0;
  req_module *mods = NULL;
  req_error err = {"", ""};
  char msg[256];
  const json_t *jl = json_is_object(root) ? json_object_get(root, "jobs") : NULL;
  if (!json_is_object(root)) {
    ref_api_error(out, 400, "the body must be a JSON object", NULL);
    goto done;
  }
  if (jl && !json_is_array(jl)) {
    ref_api_error(out, 400, "jobs must be an array", "jobs");
    goto done;
  }
  njobs = jl ? json_array_size(jl) : 1;
  if (njobs > V5_MAX_JOBS) {
    snprintf(msg, sizeof msg, "too many jobs: %zu, the limit is %d", njobs, V5_MAX_JOBS);
    ref_api_error(out, 400, msg, "jobs");
    goto done;
  }
  size_t total_map = 0;
  for (size_t i = 0; i < njobs; i++) {
    const json_t *job = jl ? json_array_get(jl, i) : root;
    const json_t *map = json_is_object(job) ? json_object_get(job, "memoryMap") : NULL;
    total_map += json_is_array(map) ? json_array_size(map) : 0;
  }
  if (total_map > a->cfg->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu",
             total_map, (unsigned long long)a->cfg->max_modules);
    ref_api_error(out, 400, msg, "memoryMap");
    goto done;
  }
  mods = calloc(total_map ? total_map : 1, sizeof *mods);
  if (!mods) {
    ref_api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < njobs; i++) {
    v5_job *j = &jobs[i];
    memset(j, 0, sizeof *j);
    if (jl)
      snprintf(j->prefix, sizeof j->prefix, "jobs[%zu].", i);
    if (!ref_v5_parse_job(jl ? json_array_get(jl, i) : root, j, mods, &nm, &nf, &err)) {
      ref_api_error(out, 400, err.msg, err.field);
      goto done;
    }
    if (nf > a->cfg->max_frames) {
      snprintf(msg, sizeof msg, "too many frames: more than the limit max_frames = %llu",
               (unsigned long long)a->cfg->max_frames);
      ref_api_error(out, 400, msg, "stacks");
      goto done;
    }
  }
  ref_resolve_modules(a, mods, nm, engine_now_ms() + a->cfg->default_timeout * 1000u);
  json_t *results = json_array();
  uint64_t counts[FS__COUNT] = {0};
  for (size_t i = 0; i < njobs; i++) {
    const v5_job *j = &jobs[i];
    json_t *res = json_object(), *stacks = json_array(), *found = json_object();
    size_t si;
    const json_t *stack;
    json_array_foreach(j->stacks, si, stack) {
      json_t *st = json_array();
      size_t k;
      const json_t *e;
      json_array_foreach(stack, k, e) {
        json_t *fo = ref_v5_frame(k, e, j, mods);
        counts[json_object_get(fo, "function") ? FS_OK : FS_MISSING_SYMBOLS]++;
        json_array_append_new(st, fo);
      }
      json_array_append_new(stacks, st);
    }
    size_t mi;
    const json_t *e;
    json_array_foreach(j->map, mi, e) {
      const req_module *m = &mods[j->mod_first + mi];
      /* the key is the entry as given, however long (a fixed buffer cut it,
       * even inside a UTF-8 sequence, which dropped the entry) */
      const char *kf = json_string_value(json_array_get(e, 0));
      const char *ki = json_string_value(json_array_get(e, 1));
      size_t kcap = strlen(kf) + strlen(ki) + 2;
      char *key = malloc(kcap);
      const req_module *r = &mods[m->same];
      if (key) {
        snprintf(key, kcap, "%s/%s", kf, ki);
        json_object_set_new(found, key,
                            m->skip ? json_null() : json_boolean(r->h.status == MOD_FOUND));
        free(key);
      }
      if (!m->skip && m->same == (size_t)(m - mods))
        mt_module(m->h.status);
    }
    json_object_set_new(res, "stacks", stacks);
    json_object_set_new(res, "found_modules", found);
    json_array_append_new(results, res);
  }
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  ref_release_modules(a, mods, nm);
  json_t *ans = json_object();
  json_object_set_new(ans, "results", results);
  ref_set_json(out, 200, ans);
  out->frames = (long)nf;
  out->modules = (long)nm;
done:
  free(mods);
  json_decref(root);
}

/* ---- GET /modules/{debug_file}/{debug_id} ------------------------------------ */

static inline void ref_module_info(api *a, const char *path, const char *query_format, api_response *out) {
  const char *p = path + strlen("/modules/");
  const char *slash = strchr(p, '/');
  char file[MODULE_NAME_MAX + 1];
  size_t fl = (size_t)(slash - p);
  if (fl >= sizeof file) {
    ref_api_error(out, 400, "invalid debug_file: longer than 255 bytes", "debug_file");
    return;
  }
  memcpy(file, p, fl);
  file[fl] = '\0';
  module_id m;
  memset(&m, 0, sizeof m);
  const char *why = NULL;
  if (!module_parse_file_name(file, m.debug_file, sizeof m.debug_file, &why)) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid debug_file: %s", ref_reason(why));
    ref_api_error(out, 400, msg, "debug_file");
    return;
  }
  if (!module_parse_debug_id(slash + 1, m.guid, &m.age, &why)) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid debug_id: %s", ref_reason(why));
    ref_api_error(out, 400, msg, "debug_id");
    return;
  }
  if (query_format) {
    if (!strcmp(query_format, "windows"))
      m.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(query_format, "portable"))
      m.format = ST_FORMAT_PORTABLE;
    else {
      ref_api_error(out, 400, "format must be windows or portable", "format");
      return;
    }
  }
  /* only what the cache holds: a module it does not hold is never fetched here */
  mod_handle h;
  bool known = engine_peek(a->eng, &m, &h);
  if (!known)
    snprintf(h.error, sizeof h.error, "not in the cache and not being fetched");
  json_t *o = json_object();
  char id[48];
  module_debug_id(m.guid, m.age, id);
  json_object_set_new(o, "debug_file", ref_render_string(m.debug_file)); /* from the URL: any bytes */
  json_object_set_new(o, "debug_id", json_string(id));
  json_object_set_new(o, "status", json_string(known ? mod_status_name(h.status) : "unknown"));
  json_object_set_new(o, "cached", json_boolean(h.from_cache));
  const char *fmt = ref_format_name(h.format ? h.format : m.format);
  json_object_set_new(o, "format", fmt ? json_string(fmt) : json_null());
  if (h.source[0])
    json_object_set_new(o, "source", ref_render_string(h.source));
  if ((!known || h.status != MOD_FOUND) && h.error[0])
    json_object_set_new(o, "error", ref_render_string(h.error));
  if (h.status == MOD_FOUND && h.st) {
    const symtab *st = h.st;
    json_t *c = json_object();
    json_object_set_new(c, "functions", json_integer((json_int_t)st->nfuncs));
    json_object_set_new(c, "lines", json_integer((json_int_t)st->nlines));
    json_object_set_new(c, "inline_sites", json_integer((json_int_t)st->ninlines));
    json_object_set_new(c, "publics", json_integer((json_int_t)st->npublics));
    json_object_set_new(c, "methods", json_integer((json_int_t)st->nmethods));
    json_object_set_new(c, "sequence_points", json_integer((json_int_t)st->nseqpts));
    json_object_set_new(o, "counts", c);
    json_object_set_new(o, "memory_bytes", json_integer((json_int_t)st_memory_size(st)));
  }
  engine_release(a->eng, &h);
  ref_set_json(out, known ? 200 : 404, o);
}

/* ---- the rest ---------------------------------------------------------------- */

static inline void ref_api_handle(api *a, api_route_id route, const char *path, const char *query_format,
                const char *body, size_t len, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  switch (route) {
  case RT_SYMBOLICATE:
    ref_symbolicate(a, body ? body : "", len, out);
    return;
  case RT_MODULES:
    ref_module_info(a, path, query_format, out);
    return;
  case RT_HEALTH: {
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("ok"));
    ref_set_json(out, 200, o);
    return;
  }
  case RT_READY: {
    const char *why = "the cache database is not open";
    json_t *o = json_object();
    bool ok = !a->draining && engine_ready(a->eng);
    json_object_set_new(o, "status", json_string(ok ? "ready" : "not ready"));
    if (!ok)
      json_object_set_new(o, "error", json_string(a->draining ? "shutting down" : why));
    ref_set_json(out, ok ? 200 : 503, o);
    if (!ok)
      out->retry_after = (unsigned)a->cfg->retry_after;
    return;
  }
  case RT_METRICS: {
    out->body = mt_render(engine_cache_bytes(a->eng));
    if (!out->body) {
      ref_api_error(out, 500, "out of memory", NULL);
      return;
    }
    out->status = 200;
    out->len = strlen(out->body);
    out->content_type = "text/plain; version=0.0.4; charset=utf-8";
    return;
  }
  case RT_SYMBOLICATE_V5:
    ref_symbolicate_v5(a, body ? body : "", len, out);
    return;
  case RT_OTHER:
  case RT__COUNT:
    break;
  }
  ref_api_error(out, 404, "no such route", NULL);
}

/* ---- comparing answers ------------------------------------------------------ */

/* Drops from now the fields of the documented difference (render.h): where
 * old lacks a frame's "error" and now has one holding U+FFFD, the old
 * renderer dropped a string that was not UTF-8. */
static inline void ref_drop_sanitized(json_t *old, json_t *now) {
  size_t i;
  json_t *f;
  json_t *of = json_object_get(old, "frames");
  json_array_foreach(json_object_get(now, "frames"), i, f) {
    json_t *o = json_array_get(of, i);
    const char *e = json_string_value(json_object_get(f, "error"));
    if (o && !json_object_get(o, "error") && e && strstr(e, "\xef\xbf\xbd"))
      json_object_del(f, "error");
  }
}

/* 0: the same bytes; 1: the same but for the documented difference; -1:
 * they differ. */
static inline int ref_same_answer(const api_response *old, const api_response *now) {
  if (old->status == now->status && old->len == now->len && old->body && now->body &&
      !memcmp(old->body, now->body, old->len))
    return 0;
  json_t *a = old->body ? json_loadb(old->body, old->len, 0, NULL) : NULL;
  json_t *b = now->body ? json_loadb(now->body, now->len, 0, NULL) : NULL;
  int r = -1;
  if (a && b && old->status == now->status) {
    ref_drop_sanitized(a, b);
    if (json_equal(a, b))
      r = 1;
  }
  json_decref(a);
  json_decref(b);
  return r;
}

#endif
