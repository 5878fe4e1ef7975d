/*
 * api_ref.h - the routes as they were before issue 15's writer (api.c built
 * each frame and module of an answer as a jansson object and serialised it
 * with jansson), kept for the tests only: test_render_equiv.c sends the same
 * requests (read by the same request.c) through
 * ref_api_handle and through the service's api_handle and compares the
 * answers byte for byte.  Copied from api.c at main 0801f5a by
 * tests/unit/make_ref.py; only the names changed (ref_ prefix) and
 * everything is static.
 * It uses the engine and the metrics as the real routes do, and
 * render_ref.h for frames.
 */
#ifndef PDBSYM_TEST_API_REF_H
#define PDBSYM_TEST_API_REF_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "api.h"
#include "log.h"
#include "metrics.h"
#include "render_ref.h"
#include "request.h"

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

static const char *const route_names[RT__COUNT] = {
    "/symbolicate", "/symbolicate/v5", "/modules", "/health", "/ready", "/metrics", "/traces",
    "other"};
static const char *const frame_status_names[FS__COUNT] = {
    "ok", "missing_symbols", "unknown_address", "malformed", "fetch_error", "pending", "invalid"};

static inline const char *ref_api_route_name(api_route_id r) {
  return (unsigned)r < RT__COUNT ? route_names[r] : "other";
}

static inline const char *ref_frame_status_name(frame_status s) {
  return (unsigned)s < FS__COUNT ? frame_status_names[s] : "invalid";
}

/* ---- CORS (api.md, "Browsers") ------------------------------------------------ */

/* Routes a page on another origin may call: /ref_symbolicate/v5, the API browser
 * clients (the Firefox Profiler) speak. */
static inline bool ref_route_cors(api_route_id r) { return r == RT_SYMBOLICATE_V5; }

/* Walks the comma- or space-separated entries of cors_origins. */
static inline const char *ref_next_origin(const char *p, const char **start, size_t *len) {
  while (*p == ',' || *p == ' ' || *p == '\t')
    p++;
  if (!*p)
    return NULL;
  *start = p;
  while (*p && *p != ',' && *p != ' ' && *p != '\t')
    p++;
  *len = (size_t)(p - *start);
  return p;
}

/* *any: the list holds "*"; returns whether origin is listed by name
 * (ASCII case-insensitive, as browsers serialise scheme and host in lower
 * case). */
static inline bool ref_origin_listed(const char *list, const char *origin, bool *any) {
  const char *s;
  size_t n;
  bool named = false;
  *any = false;
  for (const char *p = list; (p = ref_next_origin(p, &s, &n)) != NULL;) {
    if (n == 1 && *s == '*')
      *any = true;
    else if (origin && strlen(origin) == n && !strncasecmp(s, origin, n))
      named = true;
  }
  return named;
}

static inline void ref_add_header(api_response *out, const char *name, const char *value, bool copy) {
  if (out->nheaders >= API_MAX_HEADERS)
    return;
  if (copy) {
    size_t n = strlen(value) + 1;
    if (n > sizeof out->hvalues - out->hused)
      return;
    memcpy(out->hvalues + out->hused, value, n);
    value = out->hvalues + out->hused;
    out->hused += n;
  }
  out->headers[out->nheaders].name = name;
  out->headers[out->nheaders].value = value;
  out->nheaders++;
}

/* An Origin header worth echoing: printable ASCII, no more than 200 bytes. */
static inline bool ref_origin_ok(const char *origin) {
  if (!origin || !*origin || strlen(origin) > 200)
    return false;
  for (const char *p = origin; *p; p++)
    if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
      return false;
  return true;
}

static inline void ref_api_cors(const api *a, api_route_id route, const char *origin, api_response *out) {
  if (!ref_route_cors(route) || !a->cfg->cors_origins[0])
    return;
  bool any;
  bool named = ref_origin_listed(a->cfg->cors_origins, origin, &any);
  if (any) {
    ref_add_header(out, "Access-Control-Allow-Origin", "*", false);
  } else {
    /* the answer depends on the Origin: caches must keep one per origin */
    ref_add_header(out, "Vary", "Origin", false);
    if (!named || !ref_origin_ok(origin))
      return;
    ref_add_header(out, "Access-Control-Allow-Origin", origin, true);
  }
  ref_add_header(out, "Access-Control-Expose-Headers", "X-Request-Id, Retry-After", false);
}

static inline void ref_api_preflight(const api *a, api_route_id route, const char *origin,
                   const char *private_network, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  out->allow = "POST, OPTIONS";
  bool any = false;
  bool named = ref_route_cors(route) && ref_origin_listed(a->cfg->cors_origins, origin, &any);
  if (!origin) { /* not a browser's preflight: what the route allows */
    out->status = 204;
    return;
  }
  if (!(any || named) || !ref_origin_ok(origin)) {
    char msg[300];
    snprintf(msg, sizeof msg, "origin %.200s is not allowed by cors_origins", origin);
    ref_api_error(out, 403, msg, NULL);
    return;
  }
  out->status = 204;
  ref_add_header(out, "Access-Control-Allow-Methods", "POST, OPTIONS", false);
  ref_add_header(out, "Access-Control-Allow-Headers", "Content-Type, X-Request-Id", false);
  char age[24];
  snprintf(age, sizeof age, "%llu", (unsigned long long)a->cfg->cors_max_age);
  ref_add_header(out, "Access-Control-Max-Age", age, true);
  /* Private Network Access: a public page asking for a loopback or private
   * address; granted only to an origin listed by name, never through "*" */
  if (named && private_network && !strcasecmp(private_network, "true"))
    ref_add_header(out, "Access-Control-Allow-Private-Network", "true", false);
}

/* "*", "null", or scheme://host[:port] with no path (RFC 6454's serialised
 * origin). */
static inline bool ref_origin_syntax_ok(const char *s, size_t n) {
  if ((n == 1 && *s == '*') || (n == 4 && !strncmp(s, "null", 4)))
    return true;
  size_t p;
  if (n > 7 && !strncasecmp(s, "http://", 7))
    p = 7;
  else if (n > 8 && !strncasecmp(s, "https://", 8))
    p = 8;
  else
    return false;
  if (n - p > 200)
    return false;
  size_t host = p;
  if (s[p] == '[') {
    while (p < n && s[p] != ']')
      p++;
    if (p == n)
      return false;
    p++;
  } else {
    while (p < n && (isalnum((unsigned char)s[p]) || s[p] == '-' || s[p] == '.'))
      p++;
  }
  if (p == host)
    return false;
  if (p < n && s[p] == ':') {
    size_t d = ++p;
    while (p < n && isdigit((unsigned char)s[p]))
      p++;
    if (p == d || p - d > 5)
      return false;
  }
  return p == n;
}

static inline bool ref_api_check_config(const srv_config *cfg, char *err, size_t cap) {
  const char *s;
  size_t n;
  for (const char *p = cfg->cors_origins; (p = ref_next_origin(p, &s, &n)) != NULL;) {
    if (!ref_origin_syntax_ok(s, n)) {
      snprintf(err, cap,
               "cors_origins: '%.*s' is not an origin (scheme://host[:port], no path), * or null",
               (int)(n > 200 ? 200 : n), s);
      return false;
    }
  }
  if (!cfg->v5_max_frames || !cfg->v5_max_jobs) {
    snprintf(err, cap, "v5_max_frames and v5_max_jobs must be > 0");
    return false;
  }
  return true;
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
      {"/traces", RT_TRACES, "POST"},
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
  if (ref_route_cors(*route) && !strcmp(method, "OPTIONS"))
    return API_PREFLIGHT;
  *allow = get ? "GET, HEAD" : ref_route_cors(*route) ? "POST, OPTIONS" : "POST";
  return API_BAD_METHOD;
}

static inline bool ref_api_route_heavy(api_route_id r) {
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_MODULES || r == RT_TRACES;
}

static inline bool ref_api_route_has_body(api_route_id r) {
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_TRACES;
}

/* ---- the answer, written as it is built -------------------------------------- */

/* The answer of a big request is written frame by frame into one buffer in
 * the request memory budget (reqmem.h), not built as a tree and then dumped:
 * the largest tree alive is one frame's.  Every append can fail when the
 * budget is taken; the writer then stays failed and the request gets 503. */
static inline bool ref_out_raw(rm_buf *b, const char *s) { return rm_buf_append(b, s, strlen(s)); }

static inline int ref_dump_cb(const char *buf, size_t size, void *data) {
  return rm_buf_append(data, buf, size) ? 0 : -1;
}

/* Appends v's compact JSON; v is consumed. */
static inline bool ref_out_json(rm_buf *b, json_t *v) {
  bool ok = v && json_dump_callback(v, ref_dump_cb, b, JSON_COMPACT) == 0;
  json_decref(v);
  return ok && !b->failed;
}

/* Appends "," (unless first) and v; v is consumed either way. */
static inline bool ref_out_item(rm_buf *b, bool first, json_t *v) {
  if (!first && !ref_out_raw(b, ",")) {
    json_decref(v);
    return false;
  }
  return ref_out_json(b, v);
}

/* The buffer becomes the response body (its reservation goes with it), or a
 * 503 / 500 when it could not be completed. */
static inline void ref_out_finish(api *a, rm_buf *b, api_response *out) {
  if (b->failed || !rm_buf_append(b, "", 1)) { /* and a NUL, for the fuzzers' json_loads */
    bool budget = !b->over_cap;
    rm_buf_free(b);
    if (budget) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "the memory budget of requests in flight is taken (request_memory_max = %llu)",
               (unsigned long long)a->cfg->request_memory_max);
      ref_api_error(out, 503, msg, NULL);
      out->retry_after = (unsigned)a->cfg->retry_after;
    } else {
      ref_api_error(out, 500, "answer too large", NULL);
    }
    return;
  }
  rm_buf_shrink(b);
  out->status = 200;
  out->content_type = "application/json";
  out->len = b->len - 1; /* the NUL is not part of the body */
  out->body = rm_buf_take(b, &out->charged); /* the response's now, with its reservation */
}

static inline void ref_refuse(api *a, rq_result r, const rq_error *e, api_response *out) {
  if (r == RQ_BUDGET) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "the memory budget of requests in flight is taken (request_memory_max = %llu)",
             (unsigned long long)a->cfg->request_memory_max);
    ref_api_error(out, 503, msg, NULL);
    out->retry_after = (unsigned)a->cfg->retry_after;
  } else {
    ref_api_error(out, 400, e->msg, e->field[0] ? e->field : NULL);
  }
}

/* ---- a request's modules ---------------------------------------------------- */

typedef struct {
  const rq_module *g;  /* in the parsed request: its id, and whether it is invalid */
  mod_handle h;
  bool resolved;
  bool skip;           /* v5: no frame names it, so it is not looked up */
  size_t same;         /* index of the first entry naming the same module (itself if none) */
  ref_render_module rm;    /* Source Link map etc., set up at the first answered frame */
  bool rm_init;
} req_module;

/* The lookup state of the parsed modules, in the budget. */
static req_module *ref_modules_for(const rq_request *q, rm_buf *store) {
  size_t n = q->nmods ? q->nmods : 1;
  if (n > SIZE_MAX / sizeof(req_module) || !rm_buf_reserve(store, n * sizeof(req_module)))
    return NULL;
  req_module *mods = (req_module *)(void *)store->p;
  memset(mods, 0, n * sizeof *mods);
  for (size_t i = 0; i < q->nmods; i++) {
    mods[i].g = &q->mods[i];
    mods[i].skip = q->mods[i].skip;
  }
  return mods;
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

/* m is the module that answers (the first entry naming it); NULL for a frame
 * whose module index names no entry. */
static inline json_t *ref_answer_frame(const api *a, const rq_request *q, const rq_frame *fr, req_module *m,
                            frame_status *st_out) {
  frame_status st;
  const char *err = NULL;
  char module_error[340];
  st_answer ans;
  ans.nsyms = 0;
  bool adjusted = fr->flags & RQ_F_ADJUSTED;
  if ((fr->flags & RQ_F_INVALID) || !m) {
    st = FS_INVALID;
    if (fr->why == RQ_WHY_MODULE) {
      /* the module fails alone: its frames say why */
      snprintf(module_error, sizeof module_error, "its module (modules[%u]) is invalid: %s",
               (unsigned)fr->module, rq_text(q, q->mods[fr->module].why_off));
      err = module_error;
    } else {
      err = rq_why_text(fr->why);
    }
  } else if (m->h.status != MOD_FOUND) {
    st = ref_module_frame_status(m->h.status);
    err = m->h.error[0] ? m->h.error : mod_status_name(m->h.status);
  } else {
    if (fr->kind == RQ_NATIVE) {
      st_lookup_rva(m->h.st, (uint32_t)(adjusted ? fr->rva - 1 : fr->rva), &ans);
      /* the offset of the address given, not of the byte looked up */
      if (adjusted && ans.status == ST_OK && ans.nsyms > 0 &&
          ans.syms[ans.nsyms - 1].has_offset && ans.syms[ans.nsyms - 1].function_offset < UINT32_MAX)
        ans.syms[ans.nsyms - 1].function_offset++;
    } else {
      st_lookup_token(m->h.st, (uint32_t)fr->rva, (uint32_t)fr->aux, &ans);
    }
    st = ans.status == ST_OK ? FS_OK : FS_UNKNOWN_ADDRESS;
    if (st != FS_OK)
      err = fr->kind == RQ_MANAGED ? "no method with this token"
            : adjusted             ? "no function covers this address - 1 (a return address)"
                                   : "no function covers this address";
  }
  if (st == FS_OK && !m->rm_init) {
    ref_render_module_init(&m->rm, m->h.st);
    m->rm_init = true;
  }
  bool managed = fr->kind == RQ_MANAGED;
  render_frame f = {
      .status = ref_frame_status_name(st),
      .module = (fr->flags & RQ_F_INDEX_OK) ? (long long)fr->module : -1,
      .has_address = managed || (fr->flags & RQ_F_HAS_RVA),
      .managed = managed,
      .rva_or_token = fr->rva,
      .il_offset = managed ? fr->aux : 0,
      .answer = st == FS_OK ? &ans : NULL,
      .error = err,
      .retry_after = st == FS_PENDING ? (long long)a->cfg->retry_after : -1,
      .input = NULL,
      .has_instruction_addr = !managed && (fr->flags & RQ_F_HAS_IADDR),
      .instruction_addr = managed ? 0 : fr->aux,
      .adjusted = adjusted && !(fr->flags & RQ_F_INVALID),
  };
  *st_out = st;
  return ref_render_frame_obj(m ? &m->rm : NULL, &f);
}

/* A text of the request as given (any bytes), or null. */
static inline json_t *ref_given_or_null(const rq_request *q, uint32_t off) {
  const char *s = rq_text(q, off);
  return s ? ref_render_string(s) : json_null();
}

/* m answers (the first entry naming the module); g is this entry. */
static inline json_t *ref_answer_module(const api *a, const rq_request *q, const req_module *m,
                             const rq_module *g) {
  json_t *o = json_object();
  if (g->invalid) {
    json_object_set_new(o, "debug_file", ref_given_or_null(q, g->gfile_off));
    json_object_set_new(o, "debug_id", ref_given_or_null(q, g->gid_off));
    json_object_set_new(o, "status", json_string("invalid"));
    json_object_set_new(o, "format", json_null());
    json_object_set_new(o, "source", json_null());
    json_object_set_new(o, "from_cache", json_false());
    json_object_set_new(o, "error", ref_render_string(rq_text(q, g->why_off)));
    json_object_set_new(o, "field", json_string(rq_text(q, g->field_off)));
    return o;
  }
  const module_id *id = &m->g->id;
  char did[48];
  module_debug_id(id->guid, id->age, did);
  if (g->no_age)
    did[36] = '\0'; /* the GUID alone, as given: a Portable PDB's id has no age */
  json_object_set_new(o, "debug_file", json_string(id->debug_file));
  json_object_set_new(o, "debug_id", json_string(did));
  json_object_set_new(o, "status", json_string(mod_status_name(m->h.status)));
  const char *fmt = ref_format_name(m->h.format ? m->h.format : id->format);
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
 * at the first (module_id is zero-filled before parsing, so memcmp is exact).
 * Invalid entries stand alone. */
static inline void ref_dedupe_modules(req_module *mods, size_t n) {
  for (size_t i = 0; i < n; i++) {
    mods[i].same = i;
    if (mods[i].g->invalid)
      continue;
    for (size_t k = 0; k < i; k++) {
      if (mods[k].same == k && !mods[k].g->invalid &&
          !memcmp(mods[k].g->id.guid, mods[i].g->id.guid, 16) &&
          !memcmp(&mods[k].g->id, &mods[i].g->id, sizeof mods[i].g->id)) {
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
    if (mods[i].skip || mods[i].g->invalid || mods[i].same != i)
      continue;
    engine_resolve(a->eng, &mods[i].g->id, now ? now : 1, &mods[i].h);
    mods[i].resolved = true;
    mt_cache(mods[i].h.from_cache);
  }
  for (size_t i = 0; i < n; i++) {
    if (!mods[i].resolved || mods[i].h.status != MOD_PENDING)
      continue;
    if (engine_now_ms() >= deadline)
      break;
    engine_release(a->eng, &mods[i].h);
    engine_resolve(a->eng, &mods[i].g->id, deadline, &mods[i].h);
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

/* The request's body, parsed: the body's own buffer is given back now when
 * the caller handed it over (owned), before the request waits and renders. */
static inline void ref_drop_body(rm_buf *owned) {
  if (owned)
    rm_buf_free(owned);
}

static rq_limits ref_limits_of(const srv_config *cfg) {
  rq_limits lim = {cfg->max_modules, cfg->max_frames, cfg->v5_max_frames, cfg->v5_max_jobs};
  return lim;
}

static inline void ref_symbolicate(api *a, const char *body, size_t len, rm_buf *owned, rm_grant *grant,
                        uint64_t received_ms, api_response *out) {
  rq_request q;
  memset(&q, 0, sizeof q);
  rq_error err;
  rq_limits lim = ref_limits_of(a->cfg);
  rq_result res = rq_parse_symbolicate(body, len, &lim, grant, &q, &err);
  ref_drop_body(owned);
  rm_buf store = {0}, ans = {0};
  store.grant = ans.grant = grant;
  if (res != RQ_OK) {
    ref_refuse(a, res, &err, out);
    goto done;
  }
  uint64_t timeout_ms = a->cfg->default_timeout * 1000u;
  if (q.has_timeout) {
    double cap = (double)a->cfg->max_timeout;
    timeout_ms = (uint64_t)((q.timeout < cap ? q.timeout : cap) * 1000.0);
  }
  size_t nm = q.nmods, nf = q.nframes;
  req_module *mods = ref_modules_for(&q, &store);
  if (!mods) {
    ref_refuse(a, RQ_BUDGET, &err, out);
    goto done;
  }
  /* the request's time counts from its arrival, queueing for a worker included */
  ref_resolve_modules(a, mods, nm, received_ms + timeout_ms);

  uint64_t counts[FS__COUNT] = {0};
  bool ok = ref_out_raw(&ans, "{\"frames\":[");
  for (size_t i = 0; i < nf && ok; i++) {
    frame_status st;
    const rq_frame *fr = &q.frames[i];
    req_module *m = (fr->flags & RQ_F_BAD_INDEX) ? NULL : &mods[mods[fr->module].same];
    json_t *fo = ref_answer_frame(a, &q, fr, m, &st);
    counts[st]++;
    ok = ref_out_item(&ans, i == 0, fo);
  }
  ok = ok && ref_out_raw(&ans, "],\"modules\":[");
  for (size_t i = 0; i < nm && ok; i++) {
    ok = ref_out_item(&ans, i == 0, ref_answer_module(a, &q, &mods[mods[i].same], &q.mods[i]));
    if (mods[i].same == i && !q.mods[i].invalid)
      mt_module(mods[i].h.status);
  }
  ok = ok && ref_out_raw(&ans, "]}");
  (void)ok; /* a failed append leaves ans failed: ref_out_finish answers 503 */
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  ref_release_modules(a, mods, nm);
  ref_out_finish(a, &ans, out);
  if (out->status == 200) {
    out->frames = (long)nf;
    out->modules = (long)nm;
  }
done:
  rm_buf_free(&ans);
  rm_buf_free(&store);
  rq_free(&q);
}

/* ---- POST /ref_symbolicate/v5 (Mozilla's symbolication API v5) -------------------- */

/* module_offset as Eliot echoes it: hex of the number given ("-0x1" for
 * Eliot's -1, "not an offset"); a hex string too wide for 64 bits as it came. */
static inline json_t *ref_v5_offset(const rq_request *q, const rq_v5_frame *e) {
  if (e->off_kind == RQ_OFF_NEG) {
    char buf[32];
    snprintf(buf, sizeof buf, "-0x%llx", (unsigned long long)e->offset);
    return json_string(buf);
  }
  if (e->off_kind == RQ_OFF_TEXT)
    return ref_render_string(rq_text(q, e->text_off));
  return ref_render_hex(e->offset, 0);
}

static inline json_t *ref_v5_frame(const rq_request *q, size_t index, const rq_v5_frame *e, const rq_job *j,
                        const req_module *mods, frame_status *st_out) {
  json_t *o = json_object();
  json_object_set_new(o, "frame", json_integer((json_int_t)index));
  const req_module *m = NULL, *r = NULL;
  if (e->module_index >= 0 && (uint64_t)e->module_index < j->nmods) {
    m = &mods[j->mod_first + (size_t)e->module_index];
    r = &mods[m->same];
    /* the module's name: the PDB's, reduced to its last component, or the
     * entry as given when that is not a valid name */
    if (m->g->invalid)
      json_object_set_new(o, "module", ref_given_or_null(q, m->g->gfile_off));
    else
      json_object_set_new(o, "module", json_string(m->g->id.debug_file));
  } else {
    /* Eliot's answer for index -1 (an address in no module), and pdbsym's
     * for any index that names no entry; the Firefox Profiler's validator
     * needs every frame to have a module */
    json_object_set_new(o, "module", json_string("<unknown>"));
  }
  json_object_set_new(o, "module_offset", ref_v5_offset(q, e));
  bool usable = e->off_kind == RQ_OFF_OK;
  uint64_t off = e->offset;
  *st_out = !m ? (e->module_index == -1 ? FS_UNKNOWN_ADDRESS : FS_INVALID)
            : m->g->invalid ? FS_INVALID
                            : ref_module_frame_status(r->h.status);
  if (!m || m->g->invalid || !usable || off > UINT32_MAX || r->h.status != MOD_FOUND)
    return o;
  st_answer ans;
  st_lookup_rva(r->h.st, (uint32_t)off, &ans);
  if (ans.status != ST_OK || ans.nsyms < 1) {
    *st_out = FS_UNKNOWN_ADDRESS;
    return o;
  }
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

static inline void ref_symbolicate_v5(api *a, const char *body, size_t len, rm_buf *owned, rm_grant *grant,
                           uint64_t received_ms, api_response *out) {
  rq_request q;
  memset(&q, 0, sizeof q);
  rq_error err;
  rq_limits lim = ref_limits_of(a->cfg);
  rq_result res = rq_parse_v5(body, len, &lim, grant, &q, &err);
  ref_drop_body(owned);
  rm_buf store = {0}, ans = {0};
  store.grant = ans.grant = grant;
  if (res != RQ_OK) {
    ref_refuse(a, res, &err, out);
    goto done;
  }
  size_t nm = q.nmods, nf = q.nv5_frames;
  req_module *mods = ref_modules_for(&q, &store);
  if (!mods) {
    ref_refuse(a, RQ_BUDGET, &err, out);
    goto done;
  }
  /* v5 clients (the Firefox Profiler) never ask again: wait longer */
  ref_resolve_modules(a, mods, nm, received_ms + a->cfg->v5_timeout * 1000u);
  uint64_t counts[FS__COUNT] = {0};
  bool ok = ref_out_raw(&ans, "{\"results\":[");
  for (size_t i = 0; i < q.njobs && ok; i++) {
    const rq_job *j = &q.jobs[i];
    ok = (!i || ref_out_raw(&ans, ",")) && ref_out_raw(&ans, "{\"stacks\":[");
    for (uint32_t si = 0; si < j->nstacks && ok; si++) {
      const rq_stack *sk = &q.stacks[j->stack_first + si];
      ok = (!si || ref_out_raw(&ans, ",")) && ref_out_raw(&ans, "[");
      for (uint32_t k = 0; k < sk->count && ok; k++) {
        frame_status fs;
        json_t *fo = ref_v5_frame(&q, k, &q.v5_frames[sk->first + k], j, mods, &fs);
        counts[fs]++;
        ok = ref_out_item(&ans, k == 0, fo);
      }
      ok = ok && ref_out_raw(&ans, "]");
    }
    json_t *found = json_object();
    for (uint32_t mi = 0; mi < j->nmods; mi++) {
      const req_module *m = &mods[j->mod_first + mi];
      const rq_module *g = m->g;
      const req_module *r = &mods[m->same];
      /* the key is the entry as given, however long; null: no frame named
       * it; false: looked for and not found, or its name or id is invalid
       * (as Eliot answers a module it cannot find) */
      json_object_setn_new(found, rq_given(&q, g), g->given_len,
                           m->skip ? json_null()
                                   : json_boolean(!g->invalid && r->h.status == MOD_FOUND));
      if (!m->skip && !g->invalid && m->same == (size_t)(m - mods))
        mt_module(m->h.status);
    }
    if (ok && ref_out_raw(&ans, "],\"found_modules\":"))
      ok = ref_out_json(&ans, found) && ref_out_raw(&ans, "}");
    else
      ok = (json_decref(found), false);
  }
  ok = ok && ref_out_raw(&ans, "]}");
  (void)ok;
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  ref_release_modules(a, mods, nm);
  ref_out_finish(a, &ans, out);
  if (out->status == 200) {
    out->frames = (long)nf;
    out->modules = (long)nm;
  }
done:
  rm_buf_free(&ans);
  rm_buf_free(&store);
  rq_free(&q);
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
    snprintf(msg, sizeof msg, "invalid debug_file: %s", rq_reason(why));
    ref_api_error(out, 400, msg, "debug_file");
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
  if (!module_set_debug_id(&m, slash + 1, &why)) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid debug_id: %s", rq_reason(why));
    ref_api_error(out, 400, msg, "debug_id");
    return;
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

static inline void ref_handle(api *a, api_route_id route, const char *path, const char *query_format,
                   const char *body, size_t len, rm_buf *owned, rm_grant *grant,
                   uint64_t received_ms, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  switch (route) {
  case RT_SYMBOLICATE:
    ref_symbolicate(a, body ? body : "", body ? len : 0, owned, grant, received_ms, out);
    return;
  case RT_SYMBOLICATE_V5:
    ref_symbolicate_v5(a, body ? body : "", body ? len : 0, owned, grant, received_ms, out);
    return;
  default:
    break;
  }
  ref_drop_body(owned);
  switch (route) {
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
    engine_stats es;
    engine_get_stats(a->eng, &es);
    out->body = mt_render(engine_cache_bytes(a->eng), &es);
    if (!out->body) {
      ref_api_error(out, 500, "out of memory", NULL);
      return;
    }
    out->status = 200;
    out->len = strlen(out->body);
    out->content_type = "text/plain; version=0.0.4; charset=utf-8";
    return;
  }
  case RT_TRACES: /* streamed by http.c, never buffered */
    ref_api_error(out, 500, "POST /traces is answered by the HTTP layer", NULL);
    return;
  case RT_PROFILES: /* not the renderer's: profiles.c, checked against a live runtime */
  case RT_PROFILES_LATEST:
    api_profiles(a, route, NULL, query_format, out);
    return;
  case RT_SYMBOLICATE:
  case RT_SYMBOLICATE_V5:
  case RT_OTHER:
  case RT__COUNT:
    break;
  }
  ref_api_error(out, 404, "no such route", NULL);
}

static inline void ref_api_handle(api *a, api_route_id route, const char *path, const char *query_format,
                const char *body, size_t len, api_response *out) {
  ref_handle(a, route, path, query_format, body, len, NULL, NULL, engine_now_ms(), out);
}

static inline void ref_api_handle_owned(api *a, api_route_id route, const char *path, const char *query_format,
                      rm_buf *body, rm_grant *grant, uint64_t received_ms, api_response *out) {
  ref_handle(a, route, path, query_format, body->p, body->len, body, grant, received_ms, out);
}

/* ---- comparing answers ------------------------------------------------------ */

/* Drops from now the fields of the documented difference (render.h): where
 * old lacks a frame's "error" and now has one holding U+FFFD, the old
 * renderer dropped a string that was not UTF-8. */
static inline int ref_drop_sanitized(json_t *old, json_t *now) {
  size_t i;
  json_t *f;
  int dropped = 0;
  json_t *of = json_object_get(old, "frames");
  json_array_foreach(json_object_get(now, "frames"), i, f) {
    json_t *o = json_array_get(of, i);
    const char *e = json_string_value(json_object_get(f, "error"));
    if (o && !json_object_get(o, "error") && e && strstr(e, "\xef\xbf\xbd")) {
      json_object_del(f, "error");
      dropped++;
    }
  }
  return dropped;
}

/* 0: the same bytes; 1: the same but for the documented difference; -1:
 * they differ (texts that differ but parse to the same values differ too:
 * the bytes are the contract, white space and key order included). */
static inline int ref_same_answer(const api_response *old, const api_response *now) {
  if (old->status == now->status && old->len == now->len && old->body && now->body &&
      !memcmp(old->body, now->body, old->len))
    return 0;
  json_t *a = old->body ? json_loadb(old->body, old->len, 0, NULL) : NULL;
  json_t *b = now->body ? json_loadb(now->body, now->len, 0, NULL) : NULL;
  int r = -1;
  if (a && b && old->status == now->status) {
    if (ref_drop_sanitized(a, b) > 0 && json_equal(a, b))
      r = 1;
  }
  json_decref(a);
  json_decref(b);
  return r;
}

#endif
