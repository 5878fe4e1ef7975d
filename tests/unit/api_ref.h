/*
 * api_ref.h - the routes as they were before issue 15 (api.c built whole
 * answers as jansson trees and serialised them with json_dumps), kept for
 * the tests only: test_render_equiv.c sends the same requests through
 * ref_api_handle and through the service's api_handle and compares the
 * answers byte for byte.  Copied from api.c at main 3eaa4ed by
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
  bool skip;         /* v5: no frame names it, so it is not looked up */
  bool invalid;      /* a field is bad: never looked up, its frames come back invalid */
  bool no_age;       /* the debug id had no age (a Portable PDB's GUID alone) */
  bool has_image;    /* image_addr given */
  uint64_t image_addr;
  uint64_t image_size; /* 0: not given */
  size_t same;       /* index of the first entry naming the same module (itself if none) */
  ref_render_module rm;  /* Source Link map etc., set up at the first answered frame */
  bool rm_init;
  char field[112];   /* invalid: where, "modules[2].debug_id" */
  char why[200];     /* invalid: what, "invalid debug_id: the age is longer than 8 hex digits" */
  char frame_error[340]; /* invalid: the error its frames carry */
} req_module;

typedef enum { FR_NATIVE, FR_MANAGED } frame_kind;

typedef struct {
  long long module;  /* the index as given; -1 when it is not a usable number */
  frame_kind kind;
  bool bad_index;    /* module names no entry of modules */
  bool invalid;
  bool has_rva;      /* native: the RVA is known (given, or from instruction_addr) */
  bool has_iaddr;    /* native: instruction_addr given */
  bool adjusted;     /* looked up at rva - 1 (a return address) */
  signed char adjust; /* adjust_instruction_addr: -1 absent, 0 false, 1 true */
  const char *why;   /* invalid: static, or a module's frame_error */
  uint64_t rva;      /* or token */
  uint64_t iaddr;
  uint64_t il;
  uint64_t stack;    /* "stack": frames of one stack share it (default 0) */
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

/* A module that fails alone: its answer says why (status "invalid", error,
 * field), its frames come back invalid, the request's other modules are
 * answered (CONTRACT.md, "Modules"). */
static inline void ref_module_invalid(req_module *m, const char *what, const char *field, const char *msg,
                           const char *detail) {
  if (m->invalid)
    return; /* the first problem found is the one reported */
  m->invalid = true;
  snprintf(m->field, sizeof m->field, "%s", field);
  snprintf(m->why, sizeof m->why, "%s%s", msg, detail ? detail : "");
  snprintf(m->frame_error, sizeof m->frame_error, "its module (%s) is invalid: %s", what, m->why);
}

/* A file name from a JSON string (module.h's rules); a NUL inside the string
 * is refused too (why is then NULL: ref_reason() names it). */
static inline bool ref_parse_name(const json_t *s, char out[MODULE_NAME_MAX + 1], const char **why) {
  *why = NULL;
  return strlen(json_string_value(s)) == json_string_length(s) &&
         module_parse_file_name(json_string_value(s), out, MODULE_NAME_MAX + 1, why);
}

/* The string as given, or NULL when v is not a string without NUL bytes. */
static inline const char *ref_given_string(const json_t *v) {
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
    return NULL;
  return json_string_value(v);
}

/* One entry of a /ref_symbolicate body's modules.  Nothing in it fails the
 * request: a bad field makes the module invalid (ref_module_invalid). */
static inline void ref_parse_module(const json_t *m, size_t i, req_module *out) {
  char f[64], what[32];
  const char *why = NULL;
  memset(out, 0, sizeof *out);
  snprintf(what, sizeof what, "modules[%zu]", i);
  if (!json_is_object(m)) {
    ref_module_invalid(out, what, what, "a module must be an object", NULL);
    return;
  }
  const json_t *fm = json_object_get(m, "format");
  snprintf(f, sizeof f, "modules[%zu].format", i);
  if (fm && !json_is_null(fm)) {
    const char *s = json_is_string(fm) ? json_string_value(fm) : "";
    if (!strcmp(s, "windows"))
      out->id.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(s, "portable"))
      out->id.format = ST_FORMAT_PORTABLE;
    else
      ref_module_invalid(out, what, f, "format must be \"windows\" or \"portable\"", NULL);
  }
  const json_t *df = json_object_get(m, "debug_file");
  snprintf(f, sizeof f, "modules[%zu].debug_file", i);
  if (!df)
    ref_module_invalid(out, what, f, "debug_file is required", NULL);
  else if (!json_is_string(df))
    ref_module_invalid(out, what, f, "debug_file must be a string", NULL);
  else if (!ref_parse_name(df, out->id.debug_file, &why))
    ref_module_invalid(out, what, f, "invalid debug_file: ", ref_reason(why));
  const json_t *di = json_object_get(m, "debug_id");
  snprintf(f, sizeof f, "modules[%zu].debug_id", i);
  if (!di)
    ref_module_invalid(out, what, f, "debug_id is required", NULL);
  else if (!json_is_string(di))
    ref_module_invalid(out, what, f, "debug_id must be a string", NULL);
  else if (!ref_given_string(di))
    ref_module_invalid(out, what, f, "invalid debug_id: contains a NUL byte", NULL);
  else if (!out->invalid && !module_set_debug_id(&out->id, json_string_value(di), &why))
    ref_module_invalid(out, what, f, "invalid debug_id: ", ref_reason(why));
  else if (!out->invalid) {
    uint8_t g[16];
    uint32_t age;
    bool has_age = true;
    module_parse_debug_id_ex(json_string_value(di), g, &age, &has_age, NULL);
    out->no_age = !has_age;
  }
  const json_t *cf = json_object_get(m, "code_file");
  snprintf(f, sizeof f, "modules[%zu].code_file", i);
  if (cf && !json_is_null(cf)) {
    if (!json_is_string(cf))
      ref_module_invalid(out, what, f, "code_file must be a string", NULL);
    else if (!ref_parse_name(cf, out->id.code_file, &why))
      ref_module_invalid(out, what, f, "invalid code_file: ", ref_reason(why));
  }
  const json_t *ci = json_object_get(m, "code_id");
  snprintf(f, sizeof f, "modules[%zu].code_id", i);
  if (ci && !json_is_null(ci)) {
    if (!json_is_string(ci) || !ref_given_string(ci))
      ref_module_invalid(out, what, f, "code_id must be a string", NULL);
    else if (!module_parse_code_id(json_string_value(ci), &out->id.code_timestamp,
                                   &out->id.code_size, &why))
      ref_module_invalid(out, what, f, "invalid code_id: ", ref_reason(why));
    else {
      out->id.has_code_id = true;
      snprintf(out->id.code_id_text, sizeof out->id.code_id_text, "%s", json_string_value(ci));
    }
  }
  const json_t *ia = json_object_get(m, "image_addr");
  const json_t *is = json_object_get(m, "image_size");
  uint64_t v = 0;
  snprintf(f, sizeof f, "modules[%zu].image_addr", i);
  if (ia && !json_is_null(ia)) {
    num_result r = ref_get_number(ia, UINT64_MAX, &v);
    if (r == NUM_BAD)
      ref_module_invalid(out, what, f, "image_addr must be an integer or a 0x hex string", NULL);
    else if (r == NUM_RANGE)
      ref_module_invalid(out, what, f, "image_addr is negative or wider than 64 bits", NULL);
    else
      out->has_image = true, out->image_addr = v;
  }
  snprintf(f, sizeof f, "modules[%zu].image_size", i);
  if (is && !json_is_null(is)) {
    num_result r = ref_get_number(is, UINT64_MAX, &v);
    if (r == NUM_BAD)
      ref_module_invalid(out, what, f, "image_size must be an integer or a 0x hex string", NULL);
    else if (r == NUM_RANGE || v == 0)
      ref_module_invalid(out, what, f, "image_size must be from 1 to 2^64 - 1", NULL);
    else if (!(ia && !json_is_null(ia)))
      ref_module_invalid(out, what, f, "image_size without image_addr", NULL);
    else if (out->has_image && v > UINT64_MAX - out->image_addr)
      ref_module_invalid(out, what, f, "image_addr + image_size is past 2^64", NULL);
    else
      out->image_size = v;
  }
}

static inline bool ref_parse_frame(const json_t *fr, size_t i, size_t nmodules, req_frame *out,
                        req_error *err) {
  char f[96];
  memset(out, 0, sizeof *out);
  out->module = -1;
  out->adjust = -1;
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
  if (r == NUM_OK)
    out->module = (long long)v;
  else if (json_is_integer(mo) && json_integer_value(mo) < 0)
    out->module = json_integer_value(mo);
  out->bad_index = r != NUM_OK || v >= nmodules;
  const json_t *rva = json_object_get(fr, "rva");
  const json_t *ia = json_object_get(fr, "instruction_addr");
  const json_t *tok = json_object_get(fr, "token");
  int given = (rva != NULL) + (ia != NULL) + (tok != NULL);
  snprintf(f, sizeof f, "frames[%zu]", i);
  if (given > 1)
    return ref_fail(err, f, "a frame has one of rva, instruction_addr (native) or token (managed)",
                NULL);
  if (given == 0)
    return ref_fail(err, f,
                "a frame needs rva or instruction_addr (native), or token and il_offset (managed)",
                NULL);
  const json_t *adj = json_object_get(fr, "adjust_instruction_addr");
  snprintf(f, sizeof f, "frames[%zu].adjust_instruction_addr", i);
  if (adj && !json_is_null(adj)) {
    if (!json_is_boolean(adj))
      return ref_fail(err, f, "adjust_instruction_addr must be true or false", NULL);
    out->adjust = json_is_true(adj) ? 1 : 0;
  }
  const json_t *stk = json_object_get(fr, "stack");
  snprintf(f, sizeof f, "frames[%zu].stack", i);
  if (stk && !json_is_null(stk) && ref_get_number(stk, UINT64_MAX, &out->stack) != NUM_OK)
    return ref_fail(err, f, "stack must be a non-negative integer", NULL);
  if (rva || ia) {
    out->kind = FR_NATIVE;
    const char *name = rva ? "rva" : "instruction_addr";
    char msg[64];
    snprintf(f, sizeof f, "frames[%zu].%s", i, name);
    r = ref_get_number(rva ? rva : ia, UINT64_MAX, &v);
    if (r == NUM_BAD) {
      snprintf(msg, sizeof msg, "%s must be an integer or a 0x hex string", name);
      return ref_fail(err, f, msg, NULL);
    }
    if (rva) {
      out->has_rva = r == NUM_OK;
      out->rva = r == NUM_OK ? v : 0;
      if (r == NUM_RANGE) {
        out->invalid = true;
        out->why = "rva out of range";
      } else if (v > UINT32_MAX) {
        out->invalid = true;
        out->why = "rva does not fit in 32 bits";
      }
    } else {
      out->has_iaddr = r == NUM_OK;
      out->iaddr = r == NUM_OK ? v : 0;
      if (r == NUM_RANGE) {
        out->invalid = true;
        out->why = "instruction_addr is negative or wider than 64 bits";
      }
    }
  } else {
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
  }
  if (out->bad_index) {
    out->invalid = true;
    out->why = "module index is not in modules";
  }
  return true;
}

/* ---- absolute addresses and return addresses (api.md, "Absolute addresses") --- */

typedef enum { ADJ_NONE, ADJ_ALL_BUT_FIRST, ADJ_ALL } adj_mode;

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

/* The RVA of every native frame (instruction_addr - its module's image_addr),
 * and whether it is looked up as a return address: adjust_instruction_addr
 * when the frame gives it, else by mode, where the first frame of a stack
 * (the frames sharing a "stack" number, in request order) is the leaf.
 * Managed frames are never adjusted.  false: out of memory. */
static inline bool ref_place_frames(req_frame *frames, size_t nf, const req_module *mods, adj_mode mode) {
  bool *first = NULL;
  if (mode == ADJ_ALL_BUT_FIRST && nf) {
    stack_pos *pos = malloc(nf * sizeof *pos);
    first = calloc(nf, sizeof *first);
    if (!pos || !first) {
      free(pos);
      free(first);
      return false;
    }
    for (size_t i = 0; i < nf; i++)
      pos[i] = (stack_pos){frames[i].stack, i};
    qsort(pos, nf, sizeof *pos, ref_cmp_stack_pos);
    for (size_t i = 0; i < nf; i++)
      if (i == 0 || pos[i].stack != pos[i - 1].stack)
        first[pos[i].index] = true;
    free(pos);
  }
  for (size_t i = 0; i < nf; i++) {
    req_frame *fr = &frames[i];
    if (fr->bad_index)
      continue;
    const req_module *m = &mods[fr->module]; /* the entry itself: its image_addr */
    if (m->invalid) {
      fr->invalid = true;
      fr->why = m->frame_error;
      continue;
    }
    if (fr->invalid || fr->kind != FR_NATIVE)
      continue;
    if (fr->has_iaddr) {
      if (!m->has_image) {
        fr->invalid = true;
        fr->why = "instruction_addr needs its module's image_addr";
        continue;
      }
      if (fr->iaddr < m->image_addr) {
        fr->invalid = true;
        fr->why = "instruction_addr is below its module's image_addr";
        continue;
      }
      if (m->image_size && fr->iaddr - m->image_addr >= m->image_size) {
        fr->invalid = true;
        fr->why = "instruction_addr is past its module's image_addr + image_size";
        continue;
      }
      if (fr->iaddr - m->image_addr > UINT32_MAX) {
        fr->invalid = true;
        fr->why = "instruction_addr is 4 GiB or more past its module's image_addr";
        continue;
      }
      fr->rva = fr->iaddr - m->image_addr;
      fr->has_rva = true;
    }
    bool adjust = fr->adjust >= 0 ? fr->adjust == 1
                  : mode == ADJ_ALL ? true
                  : mode == ADJ_ALL_BUT_FIRST ? !first[i]
                                               : false;
    if (adjust && fr->rva == 0) {
      fr->invalid = true;
      fr->why = "a return address cannot be its module's first byte (rva 0)";
    } else {
      fr->adjusted = adjust;
    }
  }
  free(first);
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

/* m is the module that answers (the first entry naming it); NULL for a frame
 * whose module index names no entry. */
static inline json_t *ref_answer_frame(const api *a, const req_frame *fr, req_module *m,
                            frame_status *st_out) {
  frame_status st;
  const char *err = NULL;
  st_answer ans;
  ans.nsyms = 0;
  if (fr->invalid || !m) {
    st = FS_INVALID;
    err = fr->why ? fr->why : "invalid frame";
  } else if (m->h.status != MOD_FOUND) {
    st = ref_module_frame_status(m->h.status);
    err = m->h.error[0] ? m->h.error : mod_status_name(m->h.status);
  } else {
    if (fr->kind == FR_NATIVE) {
      st_lookup_rva(m->h.st, (uint32_t)(fr->adjusted ? fr->rva - 1 : fr->rva), &ans);
      /* the offset of the address given, not of the byte looked up */
      if (fr->adjusted && ans.status == ST_OK && ans.nsyms > 0 &&
          ans.syms[ans.nsyms - 1].has_offset && ans.syms[ans.nsyms - 1].function_offset < UINT32_MAX)
        ans.syms[ans.nsyms - 1].function_offset++;
    } else {
      st_lookup_token(m->h.st, (uint32_t)fr->rva, (uint32_t)fr->il, &ans);
    }
    st = ans.status == ST_OK ? FS_OK : FS_UNKNOWN_ADDRESS;
    if (st != FS_OK)
      err = fr->kind == FR_MANAGED ? "no method with this token"
            : fr->adjusted         ? "no function covers this address - 1 (a return address)"
                                   : "no function covers this address";
  }
  if (st == FS_OK && !m->rm_init) {
    ref_render_module_init(&m->rm, m->h.st);
    m->rm_init = true;
  }
  render_frame f = {
      .status = ref_frame_status_name(st),
      .module = fr->module,
      .has_address = fr->kind == FR_MANAGED || fr->has_rva,
      .managed = fr->kind == FR_MANAGED,
      .rva_or_token = fr->rva,
      .il_offset = fr->il,
      .answer = st == FS_OK ? &ans : NULL,
      .error = err,
      .retry_after = st == FS_PENDING ? (long long)a->cfg->retry_after : -1,
      .input = NULL,
      .has_instruction_addr = fr->has_iaddr,
      .instruction_addr = fr->iaddr,
      .adjusted = fr->adjusted && !fr->invalid,
  };
  *st_out = st;
  return ref_render_frame_obj(m ? &m->rm : NULL, &f);
}

/* A string field of the request as given (any bytes), or null. */
static inline json_t *ref_given_or_null(const json_t *v) {
  return json_is_string(v) ? ref_render_string(json_string_value(v)) : json_null();
}

/* m answers (the first entry naming the module); given is this entry's JSON,
 * no_age whether this entry's debug id had no age. */
static inline json_t *ref_answer_module(const api *a, const req_module *m, const json_t *given,
                             bool no_age) {
  json_t *o = json_object();
  if (m->invalid) {
    const json_t *g = json_is_object(given) ? given : NULL;
    json_object_set_new(o, "debug_file", ref_given_or_null(json_object_get(g, "debug_file")));
    json_object_set_new(o, "debug_id", ref_given_or_null(json_object_get(g, "debug_id")));
    json_object_set_new(o, "status", json_string("invalid"));
    json_object_set_new(o, "format", json_null());
    json_object_set_new(o, "source", json_null());
    json_object_set_new(o, "from_cache", json_false());
    json_object_set_new(o, "error", ref_render_string(m->why));
    json_object_set_new(o, "field", json_string(m->field));
    return o;
  }
  char id[48];
  module_debug_id(m->id.guid, m->id.age, id);
  if (no_age)
    id[36] = '\0'; /* the GUID alone, as given: a Portable PDB's id has no age */
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
 * at the first (module_id is zero-filled before parsing, so memcmp is exact).
 * Invalid entries stand alone. */
static inline void ref_dedupe_modules(req_module *mods, size_t n) {
  for (size_t i = 0; i < n; i++) {
    mods[i].same = i;
    if (mods[i].invalid)
      continue;
    for (size_t k = 0; k < i; k++) {
      if (mods[k].same == k && !mods[k].invalid &&
          !memcmp(mods[k].id.guid, mods[i].id.guid, 16) &&
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
    if (mods[i].skip || mods[i].invalid || mods[i].same != i)
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
  json_t *jm, *jf, *jt, *jadj;
  adj_mode mode = ADJ_NONE;
  if (!json_is_object(root)) {
    ref_api_error(out, 400, "the body must be a JSON object", NULL);
    goto done;
  }
  jm = json_object_get(root, "modules");
  jf = json_object_get(root, "frames");
  jt = json_object_get(root, "timeout");
  jadj = json_object_get(root, "instruction_addr_adjustment");
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
  if (jadj && !json_is_null(jadj)) {
    const char *s = json_is_string(jadj) ? json_string_value(jadj) : "";
    if (!strcmp(s, "none"))
      mode = ADJ_NONE;
    else if (!strcmp(s, "all_but_first"))
      mode = ADJ_ALL_BUT_FIRST;
    else if (!strcmp(s, "all"))
      mode = ADJ_ALL;
    else {
      ref_api_error(out, 400,
                "instruction_addr_adjustment must be \"none\", \"all_but_first\" or \"all\"",
                "instruction_addr_adjustment");
      goto done;
    }
  }
  mods = calloc(nm ? nm : 1, sizeof *mods);
  frames = calloc(nf ? nf : 1, sizeof *frames);
  if (!mods || !frames) {
    ref_api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < nm; i++)
    ref_parse_module(json_array_get(jm, i), i, &mods[i]);
  for (size_t i = 0; i < nf; i++) {
    if (!ref_parse_frame(json_array_get(jf, i), i, nm, &frames[i], &err)) {
      ref_api_error(out, 400, err.msg, err.field);
      goto done;
    }
  }
  if (!ref_place_frames(frames, nf, mods, mode)) {
    ref_api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  uint64_t deadline = engine_now_ms() + timeout_ms;
  ref_resolve_modules(a, mods, nm, deadline);

  json_t *ans = json_object();
  json_t *af = json_array();
  uint64_t counts[FS__COUNT] = {0};
  for (size_t i = 0; i < nf; i++) {
    frame_status st;
    req_module *m = frames[i].bad_index ? NULL : &mods[mods[frames[i].module].same];
    json_array_append_new(af, ref_answer_frame(a, &frames[i], m, &st));
    counts[st]++;
  }
  json_t *am = json_array();
  for (size_t i = 0; i < nm; i++) {
    json_array_append_new(am, ref_answer_module(a, &mods[mods[i].same], json_array_get(jm, i), mods[i].no_age));
    if (mods[i].same == i && !mods[i].invalid)
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

typedef struct {
  const json_t *map;    /* memoryMap */
  const json_t *stacks; /* stacks */
  size_t mod_first;     /* this job's modules in the flat array */
  char prefix[32];      /* "jobs[2]." or "" for a bare job */
} v5_job;

/* A job's shape is checked here (a shape the API does not allow is a 400, as
 * in Eliot); its modules' names and ids are not: a bad one fails alone, as
 * a module index that names no module fails only its frames. */
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
    m->id.format = ST_FORMAT_WINDOWS; /* v5 names native Windows modules */
    m->skip = true;
    const char *why = NULL;
    char fi[112];
    snprintf(fi, sizeof fi, "%s[1]", f);
    if (!ref_parse_name(name, m->id.debug_file, &why)) {
      snprintf(fi, sizeof fi, "%s[0]", f);
      ref_module_invalid(m, f, fi, "invalid debug_file: ", ref_reason(why));
    } else if (!ref_given_string(id)) {
      ref_module_invalid(m, f, fi, "invalid breakpad_id: contains a NUL byte", NULL);
    } else if (!module_set_debug_id(&m->id, json_string_value(id), &why)) {
      ref_module_invalid(m, f, fi, "invalid breakpad_id: ", ref_reason(why));
    }
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

/* The module_offset as Eliot echoes it: hex of the number given ("-0x1" for
 * Eliot's -1, "not an offset"); a hex string is normalised, and one too wide
 * for 64 bits is echoed as it came. */
static inline json_t *ref_v5_offset(const json_t *off, uint64_t *v, bool *usable) {
  *usable = false;
  if (json_is_integer(off) && json_integer_value(off) < 0) {
    char buf[32];
    snprintf(buf, sizeof buf, "-0x%llx", 0ull - (unsigned long long)json_integer_value(off));
    return json_string(buf);
  }
  if (ref_get_number(off, UINT64_MAX, v) != NUM_OK)
    return ref_render_string(json_string_value(off));
  *usable = true;
  return ref_render_hex(*v, 0);
}

static inline json_t *ref_v5_frame(size_t index, const json_t *e, const v5_job *j, const req_module *mods,
                        frame_status *st_out) {
  json_t *o = json_object();
  json_object_set_new(o, "frame", json_integer((json_int_t)index));
  json_int_t idx = json_integer_value(json_array_get(e, 0));
  uint64_t off = 0;
  bool usable;
  json_t *offj = ref_v5_offset(json_array_get(e, 1), &off, &usable);
  const req_module *m = NULL, *r = NULL;
  if (idx >= 0 && (size_t)idx < json_array_size(j->map)) {
    m = &mods[j->mod_first + (size_t)idx];
    r = &mods[m->same];
    /* the module's name: the PDB's, reduced to its last component, or the
     * entry as given when that is not a valid name */
    if (m->invalid)
      json_object_set_new(o, "module",
                          ref_given_or_null(json_array_get(json_array_get(j->map, (size_t)idx), 0)));
    else
      json_object_set_new(o, "module", json_string(m->id.debug_file));
  } else {
    /* Eliot's answer for index -1 (an address in no module), and pdbsym's
     * for any index that names no entry; the Firefox Profiler's validator
     * needs every frame to have a module */
    json_object_set_new(o, "module", json_string("<unknown>"));
  }
  json_object_set_new(o, "module_offset", offj);
  *st_out = !m ? (idx == -1 ? FS_UNKNOWN_ADDRESS : FS_INVALID)
            : m->invalid ? FS_INVALID
                         : ref_module_frame_status(r->h.status);
  if (!m || m->invalid || !usable || off > UINT32_MAX || r->h.status != MOD_FOUND)
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

static inline void ref_symbolicate_v5(api *a, const char *body, size_t len, api_response *out) {
  json_t *root = ref_parse_body(body, len, out);
  if (!root)
    return;
  v5_job *jobs = NULL;
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
  if (njobs > a->cfg->v5_max_jobs) {
    snprintf(msg, sizeof msg, "too many jobs: %zu, the limit is v5_max_jobs = %llu", njobs,
             (unsigned long long)a->cfg->v5_max_jobs);
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
  jobs = calloc(njobs ? njobs : 1, sizeof *jobs);
  if (!mods || !jobs) {
    ref_api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < njobs; i++) {
    v5_job *j = &jobs[i];
    if (jl)
      snprintf(j->prefix, sizeof j->prefix, "jobs[%zu].", i);
    if (!ref_v5_parse_job(jl ? json_array_get(jl, i) : root, j, mods, &nm, &nf, &err)) {
      ref_api_error(out, 400, err.msg, err.field);
      goto done;
    }
    if (nf > a->cfg->v5_max_frames) {
      char f[48];
      snprintf(f, sizeof f, "%sstacks", j->prefix);
      snprintf(msg, sizeof msg,
               "too many addresses: more than the limit v5_max_frames = %llu (all jobs together)",
               (unsigned long long)a->cfg->v5_max_frames);
      ref_api_error(out, 400, msg, f);
      goto done;
    }
  }
  /* v5 clients (the Firefox Profiler) never ask again: wait longer */
  ref_resolve_modules(a, mods, nm, engine_now_ms() + a->cfg->v5_timeout * 1000u);
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
        frame_status fs;
        json_array_append_new(st, ref_v5_frame(k, e, j, mods, &fs));
        counts[fs]++;
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
        /* null: no frame named it; false: looked for and not found, or its
         * name or id is invalid (as Eliot answers a module it cannot find) */
        json_object_set_new(found, key,
                            m->skip ? json_null()
                                    : json_boolean(!m->invalid && r->h.status == MOD_FOUND));
        free(key);
      }
      if (!m->skip && !m->invalid && m->same == (size_t)(m - mods))
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
  free(jobs);
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
    snprintf(msg, sizeof msg, "invalid debug_id: %s", ref_reason(why));
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
  case RT_TRACES: /* streamed by http.c, never buffered */
    ref_api_error(out, 500, "POST /traces is answered by the HTTP layer", NULL);
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
