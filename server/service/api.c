/*
 * api.c - the routes of `pdbsym serve`: request JSON in, answer JSON out,
 * as CONTRACT.md ("Modules", "Frames", "One answered frame") and api.md
 * describe.  See api.h.  Frames are rendered by render.c, as the CLI's.
 *
 * POST /symbolicate, step by step:
 *   1. parse and check the body; a shape the contract does not allow is a 400
 *      naming the field ("frames[3].rva"), but a module whose fields are bad
 *      fails alone (its answer "invalid", its frames invalid); frames given
 *      by instruction_addr get their RVA from their module's image_addr, and
 *      return addresses are marked for a lookup at address - 1
 *      (place_frames);
 *   2. resolve every module once: first a probe with no wait for all of them
 *      (a cached module answers at once, a missing one starts its download in
 *      the engine), then a wait until the request's deadline for those still
 *      pending, so downloads of one request overlap instead of adding up;
 *   3. answer the frames in input order from the pinned symbol tables,
 *      written with jsonw.h straight into the buffer that becomes the
 *      response body (capped by max_answer_bytes);
 *   4. release the tables.
 *
 * Request bodies are parsed by jansson into a per-request arena (jarena.h);
 * no answer is built as a jansson tree.
 */
#include "api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "jarena.h"
#include "jsonw.h"
#include "log.h"
#include "metrics.h"
#include "render.h"

/* ---- responses ------------------------------------------------------------ */

/* Answers are written with jsonw.h straight into the buffer that becomes the
 * response body (http.c hands it to libmicrohttpd as it is).  A writer is
 * capped at max_answer_bytes: an answer that would pass it is a 400 (the
 * request asks for too much, as with max_frames); out of memory is a 500. */

static const char oom_body[] = "{\"error\":\"out of memory\"}";

static void set_static(api_response *out, unsigned status, const char *text, size_t n) {
  out->status = status;
  out->content_type = "application/json";
  out->body = malloc(n + 1);
  if (out->body)
    memcpy(out->body, text, n + 1);
  out->len = out->body ? n : 0;
}

/* The writer's text as the response body; the writer is left empty. */
static void set_body(api_response *out, unsigned status, jsonw *w, const api *a) {
  jsonw_err e = jsonw_error(w);
  size_t n = 0;
  char *text = e ? NULL : jsonw_take(w, &n);
  jsonw_free(w);
  if (text) {
    out->status = status;
    out->content_type = "application/json";
    out->body = text;
    out->len = n;
    return;
  }
  if (e == JSONW_E_LIMIT && a) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "the answer would be larger than max_answer_bytes = %llu; send fewer frames",
             (unsigned long long)a->cfg->max_answer_bytes);
    api_error(out, 400, msg, "frames");
    return;
  }
  set_static(out, 500, oom_body, sizeof oom_body - 1);
}

void api_error(api_response *out, unsigned status, const char *msg, const char *field) {
  jsonw w;
  jsonw_init(&w, 256, 0);
  jsonw_obj(&w);
  /* msg may quote request bytes (a method, a JSON token) that are not
   * UTF-8: the writer replaces them with U+FFFD */
  jsonw_key(&w, "error");
  jsonw_str(&w, msg);
  if (field) {
    jsonw_key(&w, "field");
    jsonw_str(&w, field);
  }
  jsonw_obj_end(&w);
  set_body(out, status, &w, NULL);
}

/* ---- routing -------------------------------------------------------------- */

static const char *const route_names[RT__COUNT] = {
    "/symbolicate", "/symbolicate/v5", "/modules", "/health", "/ready", "/metrics", "/traces",
    "other"};
static const char *const frame_status_names[FS__COUNT] = {
    "ok", "missing_symbols", "unknown_address", "malformed", "fetch_error", "pending", "invalid"};

const char *api_route_name(api_route_id r) {
  return (unsigned)r < RT__COUNT ? route_names[r] : "other";
}

const char *frame_status_name(frame_status s) {
  return (unsigned)s < FS__COUNT ? frame_status_names[s] : "invalid";
}

/* ---- CORS (api.md, "Browsers") ------------------------------------------------ */

/* Routes a page on another origin may call: /symbolicate/v5, the API browser
 * clients (the Firefox Profiler) speak. */
static bool route_cors(api_route_id r) { return r == RT_SYMBOLICATE_V5; }

/* Walks the comma- or space-separated entries of cors_origins. */
static const char *next_origin(const char *p, const char **start, size_t *len) {
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
static bool origin_listed(const char *list, const char *origin, bool *any) {
  const char *s;
  size_t n;
  bool named = false;
  *any = false;
  for (const char *p = list; (p = next_origin(p, &s, &n)) != NULL;) {
    if (n == 1 && *s == '*')
      *any = true;
    else if (origin && strlen(origin) == n && !strncasecmp(s, origin, n))
      named = true;
  }
  return named;
}

static void add_header(api_response *out, const char *name, const char *value, bool copy) {
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
static bool origin_ok(const char *origin) {
  if (!origin || !*origin || strlen(origin) > 200)
    return false;
  for (const char *p = origin; *p; p++)
    if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
      return false;
  return true;
}

void api_cors(const api *a, api_route_id route, const char *origin, api_response *out) {
  if (!route_cors(route) || !a->cfg->cors_origins[0])
    return;
  bool any;
  bool named = origin_listed(a->cfg->cors_origins, origin, &any);
  if (any) {
    add_header(out, "Access-Control-Allow-Origin", "*", false);
  } else {
    /* the answer depends on the Origin: caches must keep one per origin */
    add_header(out, "Vary", "Origin", false);
    if (!named || !origin_ok(origin))
      return;
    add_header(out, "Access-Control-Allow-Origin", origin, true);
  }
  add_header(out, "Access-Control-Expose-Headers", "X-Request-Id, Retry-After", false);
}

void api_preflight(const api *a, api_route_id route, const char *origin,
                   const char *private_network, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  out->allow = "POST, OPTIONS";
  bool any = false;
  bool named = route_cors(route) && origin_listed(a->cfg->cors_origins, origin, &any);
  if (!origin) { /* not a browser's preflight: what the route allows */
    out->status = 204;
    return;
  }
  if (!(any || named) || !origin_ok(origin)) {
    char msg[300];
    snprintf(msg, sizeof msg, "origin %.200s is not allowed by cors_origins", origin);
    api_error(out, 403, msg, NULL);
    return;
  }
  out->status = 204;
  add_header(out, "Access-Control-Allow-Methods", "POST, OPTIONS", false);
  add_header(out, "Access-Control-Allow-Headers", "Content-Type, X-Request-Id", false);
  char age[24];
  snprintf(age, sizeof age, "%llu", (unsigned long long)a->cfg->cors_max_age);
  add_header(out, "Access-Control-Max-Age", age, true);
  /* Private Network Access: a public page asking for a loopback or private
   * address; granted only to an origin listed by name, never through "*" */
  if (named && private_network && !strcasecmp(private_network, "true"))
    add_header(out, "Access-Control-Allow-Private-Network", "true", false);
}

/* "*", "null", or scheme://host[:port] with no path (RFC 6454's serialised
 * origin). */
static bool origin_syntax_ok(const char *s, size_t n) {
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

bool api_check_config(const srv_config *cfg, char *err, size_t cap) {
  const char *s;
  size_t n;
  for (const char *p = cfg->cors_origins; (p = next_origin(p, &s, &n)) != NULL;) {
    if (!origin_syntax_ok(s, n)) {
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

api_match api_route(const char *method, const char *path, api_route_id *route, const char **allow) {
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
  if (route_cors(*route) && !strcmp(method, "OPTIONS"))
    return API_PREFLIGHT;
  *allow = get ? "GET, HEAD" : route_cors(*route) ? "POST, OPTIONS" : "POST";
  return API_BAD_METHOD;
}

bool api_route_heavy(api_route_id r) {
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_MODULES || r == RT_TRACES;
}

bool api_route_has_body(api_route_id r) {
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_TRACES;
}

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
  render_module rm;  /* Source Link map etc., set up at the first answered frame */
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
static const char *reason(const char *why) {
  if (!why)
    return "contains a NUL byte";
  const char *p = why;
  while ((*p >= 'a' && *p <= 'z') || *p == '_')
    p++;
  return (p > why && p[0] == ':' && p[1] == ' ') ? p + 2 : why;
}

/* Records a 400's message (msg followed by detail, if any) and field. */
static bool fail(req_error *e, const char *field, const char *msg, const char *detail) {
  snprintf(e->field, sizeof e->field, "%s", field);
  snprintf(e->msg, sizeof e->msg, "%s%s", msg, detail ? detail : "");
  return false;
}

/* A module that fails alone: its answer says why (status "invalid", error,
 * field), its frames come back invalid, the request's other modules are
 * answered (CONTRACT.md, "Modules"). */
static void module_invalid(req_module *m, const char *what, const char *field, const char *msg,
                           const char *detail) {
  if (m->invalid)
    return; /* the first problem found is the one reported */
  m->invalid = true;
  snprintf(m->field, sizeof m->field, "%s", field);
  snprintf(m->why, sizeof m->why, "%s%s", msg, detail ? detail : "");
  snprintf(m->frame_error, sizeof m->frame_error, "its module (%s) is invalid: %s", what, m->why);
}

/* A file name from a JSON string (module.h's rules); a NUL inside the string
 * is refused too (why is then NULL: reason() names it). */
static bool parse_name(const json_t *s, char out[MODULE_NAME_MAX + 1], const char **why) {
  *why = NULL;
  return strlen(json_string_value(s)) == json_string_length(s) &&
         module_parse_file_name(json_string_value(s), out, MODULE_NAME_MAX + 1, why);
}

/* The string as given, or NULL when v is not a string without NUL bytes. */
static const char *given_string(const json_t *v) {
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
    return NULL;
  return json_string_value(v);
}

/* module_invalid for modules[i] and its field sfx (".debug_id"): the names
 * are formatted only when a module fails, not for every module that parses. */
static void module_bad(req_module *m, size_t i, const char *sfx, const char *msg,
                       const char *detail) {
  if (m->invalid)
    return;
  char what[32], f[64];
  snprintf(what, sizeof what, "modules[%zu]", i);
  snprintf(f, sizeof f, "modules[%zu]%s", i, sfx);
  module_invalid(m, what, f, msg, detail);
}

/* One entry of a /symbolicate body's modules.  Nothing in it fails the
 * request: a bad field makes the module invalid (module_invalid). */
static void parse_module(const json_t *m, size_t i, req_module *out) {
  const char *sfx; /* the field at fault after "modules[i]" */
  const char *why = NULL;
  memset(out, 0, sizeof *out);
  if (!json_is_object(m)) {
    module_bad(out, i, "", "a module must be an object", NULL);
    return;
  }
  const json_t *fm = json_object_get(m, "format");
  sfx = ".format";
  if (fm && !json_is_null(fm)) {
    const char *s = json_is_string(fm) ? json_string_value(fm) : "";
    if (!strcmp(s, "windows"))
      out->id.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(s, "portable"))
      out->id.format = ST_FORMAT_PORTABLE;
    else
      module_bad(out, i, sfx, "format must be \"windows\" or \"portable\"", NULL);
  }
  const json_t *df = json_object_get(m, "debug_file");
  sfx = ".debug_file";
  if (!df)
    module_bad(out, i, sfx, "debug_file is required", NULL);
  else if (!json_is_string(df))
    module_bad(out, i, sfx, "debug_file must be a string", NULL);
  else if (!parse_name(df, out->id.debug_file, &why))
    module_bad(out, i, sfx, "invalid debug_file: ", reason(why));
  const json_t *di = json_object_get(m, "debug_id");
  sfx = ".debug_id";
  if (!di)
    module_bad(out, i, sfx, "debug_id is required", NULL);
  else if (!json_is_string(di))
    module_bad(out, i, sfx, "debug_id must be a string", NULL);
  else if (!given_string(di))
    module_bad(out, i, sfx, "invalid debug_id: contains a NUL byte", NULL);
  else if (!out->invalid && !module_set_debug_id(&out->id, json_string_value(di), &why))
    module_bad(out, i, sfx, "invalid debug_id: ", reason(why));
  else if (!out->invalid) {
    uint8_t g[16];
    uint32_t age;
    bool has_age = true;
    module_parse_debug_id_ex(json_string_value(di), g, &age, &has_age, NULL);
    out->no_age = !has_age;
  }
  const json_t *cf = json_object_get(m, "code_file");
  sfx = ".code_file";
  if (cf && !json_is_null(cf)) {
    if (!json_is_string(cf))
      module_bad(out, i, sfx, "code_file must be a string", NULL);
    else if (!parse_name(cf, out->id.code_file, &why))
      module_bad(out, i, sfx, "invalid code_file: ", reason(why));
  }
  const json_t *ci = json_object_get(m, "code_id");
  sfx = ".code_id";
  if (ci && !json_is_null(ci)) {
    if (!json_is_string(ci) || !given_string(ci))
      module_bad(out, i, sfx, "code_id must be a string", NULL);
    else if (!module_parse_code_id(json_string_value(ci), &out->id.code_timestamp,
                                   &out->id.code_size, &why))
      module_bad(out, i, sfx, "invalid code_id: ", reason(why));
    else {
      out->id.has_code_id = true;
      snprintf(out->id.code_id_text, sizeof out->id.code_id_text, "%s", json_string_value(ci));
    }
  }
  const json_t *ia = json_object_get(m, "image_addr");
  const json_t *is = json_object_get(m, "image_size");
  uint64_t v = 0;
  sfx = ".image_addr";
  if (ia && !json_is_null(ia)) {
    num_result r = get_number(ia, UINT64_MAX, &v);
    if (r == NUM_BAD)
      module_bad(out, i, sfx, "image_addr must be an integer or a 0x hex string", NULL);
    else if (r == NUM_RANGE)
      module_bad(out, i, sfx, "image_addr is negative or wider than 64 bits", NULL);
    else
      out->has_image = true, out->image_addr = v;
  }
  sfx = ".image_size";
  if (is && !json_is_null(is)) {
    num_result r = get_number(is, UINT64_MAX, &v);
    if (r == NUM_BAD)
      module_bad(out, i, sfx, "image_size must be an integer or a 0x hex string", NULL);
    else if (r == NUM_RANGE || v == 0)
      module_bad(out, i, sfx, "image_size must be from 1 to 2^64 - 1", NULL);
    else if (!(ia && !json_is_null(ia)))
      module_bad(out, i, sfx, "image_size without image_addr", NULL);
    else if (out->has_image && v > UINT64_MAX - out->image_addr)
      module_bad(out, i, sfx, "image_addr + image_size is past 2^64", NULL);
    else
      out->image_size = v;
  }
}

/* fail() for frames[i] and the field sfx (".rva"); the name is formatted
 * only when a frame fails, not for every frame that parses. */
static bool frame_fail(req_error *e, size_t i, const char *sfx, const char *msg,
                       const char *detail) {
  char f[96];
  snprintf(f, sizeof f, "frames[%zu]%s", i, sfx);
  return fail(e, f, msg, detail);
}

static bool parse_frame(const json_t *fr, size_t i, size_t nmodules, req_frame *out,
                        req_error *err) {
  memset(out, 0, sizeof *out);
  out->module = -1;
  out->adjust = -1;
  if (!json_is_object(fr))
    return frame_fail(err, i, "", "a frame must be an object", NULL);
  uint64_t v;
  const json_t *mo = json_object_get(fr, "module");
  if (!mo)
    return frame_fail(err, i, ".module", "module is required", NULL);
  num_result r = get_number(mo, UINT32_MAX, &v);
  if (r == NUM_BAD)
    return frame_fail(err, i, ".module", "module must be an integer or a 0x hex string", NULL);
  if (r == NUM_OK)
    out->module = (long long)v;
  else if (json_is_integer(mo) && json_integer_value(mo) < 0)
    out->module = json_integer_value(mo);
  out->bad_index = r != NUM_OK || v >= nmodules;
  const json_t *rva = json_object_get(fr, "rva");
  const json_t *ia = json_object_get(fr, "instruction_addr");
  const json_t *tok = json_object_get(fr, "token");
  int given = (rva != NULL) + (ia != NULL) + (tok != NULL);
  if (given > 1)
    return frame_fail(err, i, "",
                      "a frame has one of rva, instruction_addr (native) or token (managed)",
                      NULL);
  if (given == 0)
    return frame_fail(
        err, i, "",
        "a frame needs rva or instruction_addr (native), or token and il_offset (managed)", NULL);
  const json_t *adj = json_object_get(fr, "adjust_instruction_addr");
  if (adj && !json_is_null(adj)) {
    if (!json_is_boolean(adj))
      return frame_fail(err, i, ".adjust_instruction_addr",
                        "adjust_instruction_addr must be true or false", NULL);
    out->adjust = json_is_true(adj) ? 1 : 0;
  }
  const json_t *stk = json_object_get(fr, "stack");
  if (stk && !json_is_null(stk) && get_number(stk, UINT64_MAX, &out->stack) != NUM_OK)
    return frame_fail(err, i, ".stack", "stack must be a non-negative integer", NULL);
  if (rva || ia) {
    out->kind = FR_NATIVE;
    r = get_number(rva ? rva : ia, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return rva ? frame_fail(err, i, ".rva", "rva must be an integer or a 0x hex string", NULL)
                 : frame_fail(err, i, ".instruction_addr",
                              "instruction_addr must be an integer or a 0x hex string", NULL);
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
    r = get_number(tok, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return frame_fail(err, i, ".token", "token must be an integer or a 0x hex string", NULL);
    out->rva = r == NUM_OK ? v : 0;
    if (r == NUM_RANGE || v > UINT32_MAX || (v >> 24) != 0x06) {
      out->invalid = true;
      out->why = "token is not a MethodDef token (0x06xxxxxx)";
    }
    const json_t *il = json_object_get(fr, "il_offset");
    if (!il)
      return frame_fail(err, i, ".il_offset", "a managed frame needs il_offset", NULL);
    r = get_number(il, UINT64_MAX, &v);
    if (r == NUM_BAD)
      return frame_fail(err, i, ".il_offset", "il_offset must be an integer or a 0x hex string",
                        NULL);
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

static int cmp_stack_pos(const void *pa, const void *pb) {
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
static bool place_frames(req_frame *frames, size_t nf, const req_module *mods, adj_mode mode) {
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
    qsort(pos, nf, sizeof *pos, cmp_stack_pos);
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

static const char *format_name(st_format f) {
  return f == ST_FORMAT_WINDOWS ? "windows" : f == ST_FORMAT_PORTABLE ? "portable" : NULL;
}

static frame_status module_frame_status(mod_status s) {
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
 * whose module index names no entry.  Writes the frame, returns its status. */
static frame_status answer_frame(jsonw *w, const api *a, const req_frame *fr, req_module *m) {
  frame_status st;
  const char *err = NULL;
  st_answer ans;
  ans.nsyms = 0;
  if (fr->invalid || !m) {
    st = FS_INVALID;
    err = fr->why ? fr->why : "invalid frame";
  } else if (m->h.status != MOD_FOUND) {
    st = module_frame_status(m->h.status);
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
    render_module_init(&m->rm, m->h.st);
    m->rm_init = true;
  }
  render_frame f = {
      .status = frame_status_name(st),
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
  render_frame_w(w, m ? &m->rm : NULL, &f);
  return st;
}

/* A string field of the request as given (any bytes, up to a NUL), or null. */
static void given_or_null(jsonw *w, const json_t *v) {
  if (json_is_string(v))
    jsonw_str(w, json_string_value(v));
  else
    jsonw_null(w);
}

/* m answers (the first entry naming the module); given is this entry's JSON,
 * no_age whether this entry's debug id had no age. */
static void answer_module(jsonw *w, const api *a, const req_module *m, const json_t *given,
                          bool no_age) {
  jsonw_obj(w);
  if (m->invalid) {
    const json_t *g = json_is_object(given) ? given : NULL;
    jsonw_key(w, "debug_file");
    given_or_null(w, json_object_get(g, "debug_file"));
    jsonw_key(w, "debug_id");
    given_or_null(w, json_object_get(g, "debug_id"));
    jsonw_key(w, "status");
    jsonw_str(w, "invalid");
    jsonw_key(w, "format");
    jsonw_null(w);
    jsonw_key(w, "source");
    jsonw_null(w);
    jsonw_key(w, "from_cache");
    jsonw_bool(w, false);
    jsonw_key(w, "error");
    jsonw_str(w, m->why);
    jsonw_key(w, "field");
    jsonw_str(w, m->field);
    jsonw_obj_end(w);
    return;
  }
  char id[48];
  module_debug_id(m->id.guid, m->id.age, id);
  if (no_age)
    id[36] = '\0'; /* the GUID alone, as given: a Portable PDB's id has no age */
  jsonw_key(w, "debug_file");
  jsonw_str(w, m->id.debug_file);
  jsonw_key(w, "debug_id");
  jsonw_str(w, id);
  jsonw_key(w, "status");
  jsonw_str(w, mod_status_name(m->h.status));
  const char *fmt = format_name(m->h.format ? m->h.format : m->id.format);
  jsonw_key(w, "format");
  if (fmt)
    jsonw_str(w, fmt);
  else
    jsonw_null(w);
  jsonw_key(w, "source");
  if (m->h.source[0])
    jsonw_str(w, m->h.source);
  else
    jsonw_null(w);
  jsonw_key(w, "from_cache");
  jsonw_bool(w, m->h.from_cache);
  if (m->h.status != MOD_FOUND && m->h.error[0]) {
    jsonw_key(w, "error");
    jsonw_str(w, m->h.error);
  }
  if (m->h.status == MOD_PENDING) {
    jsonw_key(w, "retry_after");
    jsonw_uint(w, a->cfg->retry_after);
  }
  jsonw_obj_end(w);
}

/* A writer for an answer of about nframes frames: room for a typical answer
 * up front (pages not touched cost nothing), the cap from the settings. */
static void answer_writer(jsonw *w, const api *a, size_t nframes) {
  uint64_t guess = 256 + (uint64_t)nframes * 256;
  uint64_t max = a->cfg->max_answer_bytes ? a->cfg->max_answer_bytes : UINT64_MAX;
  if (max > SIZE_MAX - 1)
    max = SIZE_MAX - 1;
  jsonw_init(w, (size_t)(guess < max ? guess : max), (size_t)max);
}

/* A module listed twice in one request is resolved once: later entries point
 * at the first (module_id is zero-filled before parsing, so memcmp is exact).
 * Invalid entries stand alone. */
static void dedupe_modules(req_module *mods, size_t n) {
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
static void resolve_modules(api *a, req_module *mods, size_t n, uint64_t deadline) {
  uint64_t now = engine_now_ms();
  dedupe_modules(mods, n);
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

static void release_modules(api *a, req_module *mods, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (mods[i].rm_init)
      render_module_free(&mods[i].rm);
    if (mods[i].resolved)
      engine_release(a->eng, &mods[i].h);
  }
}

/* The parsed body's tree lives in a per-request arena (jarena.h): a bump of a
 * pointer per value instead of a malloc, and no walk of the tree to free it.
 * Its cap: API_ARENA_FACTOR times the body, plus API_ARENA_SLACK.  jansson's
 * tree of a typical body is 12 to 15 times the body's size; bodies made of
 * empty containers come closest to the cap. */
#define API_ARENA_FACTOR 64u
#define API_ARENA_SLACK ((size_t)1 << 20)

static size_t arena_cap(size_t len) {
  return len > (SIZE_MAX - API_ARENA_SLACK) / API_ARENA_FACTOR
             ? SIZE_MAX
             : len * API_ARENA_FACTOR + API_ARENA_SLACK;
}

/* The request body as JSON (duplicate keys refused), or NULL after a 400
 * naming where the JSON broke (413 when the tree would pass the arena's cap). */
static json_t *parse_body(const char *body, size_t len, const jarena *ja, api_response *out) {
  json_error_t jerr;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root && jarena_failed(ja)) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "request body too complex: parsing it takes more than %zu bytes of memory",
             ja->cap);
    api_error(out, 413, msg, NULL);
  } else if (!root) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
             jerr.column);
    api_error(out, 400, msg, NULL);
  }
  return root;
}

static void symbolicate(api *a, const char *body, size_t len, const jarena *ja,
                        api_response *out) {
  json_t *root = parse_body(body, len, ja, out);
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
    api_error(out, 400, "the body must be a JSON object", NULL);
    goto done;
  }
  jm = json_object_get(root, "modules");
  jf = json_object_get(root, "frames");
  jt = json_object_get(root, "timeout");
  jadj = json_object_get(root, "instruction_addr_adjustment");
  if (!json_is_array(jm)) {
    api_error(out, 400, "modules must be an array", "modules");
    goto done;
  }
  if (!json_is_array(jf)) {
    api_error(out, 400, "frames must be an array", "frames");
    goto done;
  }
  nm = json_array_size(jm);
  nf = json_array_size(jf);
  if (nm > a->cfg->max_modules) {
    snprintf(msg, sizeof msg, "too many modules: %zu, the limit is max_modules = %llu", nm,
             (unsigned long long)a->cfg->max_modules);
    api_error(out, 400, msg, "modules");
    goto done;
  }
  if (nf > a->cfg->max_frames) {
    snprintf(msg, sizeof msg, "too many frames: %zu, the limit is max_frames = %llu", nf,
             (unsigned long long)a->cfg->max_frames);
    api_error(out, 400, msg, "frames");
    goto done;
  }
  uint64_t timeout_ms = a->cfg->default_timeout * 1000u;
  if (jt && !json_is_null(jt)) {
    double t = json_is_number(jt) ? json_number_value(jt) : -1;
    if (!json_is_number(jt) || t < 0 || t != t) {
      api_error(out, 400, "timeout must be a non-negative number of seconds", "timeout");
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
      api_error(out, 400,
                "instruction_addr_adjustment must be \"none\", \"all_but_first\" or \"all\"",
                "instruction_addr_adjustment");
      goto done;
    }
  }
  mods = calloc(nm ? nm : 1, sizeof *mods);
  frames = calloc(nf ? nf : 1, sizeof *frames);
  if (!mods || !frames) {
    api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < nm; i++)
    parse_module(json_array_get(jm, i), i, &mods[i]);
  for (size_t i = 0; i < nf; i++) {
    if (!parse_frame(json_array_get(jf, i), i, nm, &frames[i], &err)) {
      api_error(out, 400, err.msg, err.field);
      goto done;
    }
  }
  if (!place_frames(frames, nf, mods, mode)) {
    api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  uint64_t deadline = engine_now_ms() + timeout_ms;
  resolve_modules(a, mods, nm, deadline);

  jsonw w;
  answer_writer(&w, a, nf);
  jsonw_obj(&w);
  jsonw_key(&w, "frames");
  jsonw_arr(&w);
  uint64_t counts[FS__COUNT] = {0};
  for (size_t i = 0; i < nf; i++) {
    req_module *m = frames[i].bad_index ? NULL : &mods[mods[frames[i].module].same];
    counts[answer_frame(&w, a, &frames[i], m)]++;
  }
  jsonw_arr_end(&w);
  jsonw_key(&w, "modules");
  jsonw_arr(&w);
  for (size_t i = 0; i < nm; i++) {
    answer_module(&w, a, &mods[mods[i].same], json_array_get(jm, i), mods[i].no_age);
    if (mods[i].same == i && !mods[i].invalid)
      mt_module(mods[i].h.status);
  }
  jsonw_arr_end(&w);
  jsonw_obj_end(&w);
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  release_modules(a, mods, nm);
  set_body(out, 200, &w, a);
  out->frames = (long)nf;
  out->modules = (long)nm;
done:
  free(mods);
  free(frames);
  /* root is in the request's arena: api_handle drops it with the arena */
}

/* ---- POST /symbolicate/v5 (Mozilla's symbolication API v5) -------------------- */

typedef struct {
  const json_t *map;    /* memoryMap */
  const json_t *stacks; /* stacks */
  size_t mod_first;     /* this job's modules in the flat array */
  char prefix[32];      /* "jobs[2]." or "" for a bare job */
} v5_job;

/* A job's shape is checked here (a shape the API does not allow is a 400, as
 * in Eliot); its modules' names and ids are not: a bad one fails alone, as
 * a module index that names no module fails only its frames. */
static bool v5_parse_job(const json_t *job, v5_job *j, req_module *mods, size_t *nmods,
                         size_t *nframes, req_error *err) {
  char f[96];
  if (!json_is_object(job)) {
    snprintf(f, sizeof f, "%s", j->prefix[0] ? j->prefix : "body");
    if (f[strlen(f) - 1] == '.')
      f[strlen(f) - 1] = '\0';
    return fail(err, f, "a job must be an object", NULL);
  }
  j->map = json_object_get(job, "memoryMap");
  j->stacks = json_object_get(job, "stacks");
  snprintf(f, sizeof f, "%smemoryMap", j->prefix);
  if (!json_is_array(j->map))
    return fail(err, f, "memoryMap must be an array", NULL);
  snprintf(f, sizeof f, "%sstacks", j->prefix);
  if (!json_is_array(j->stacks))
    return fail(err, f, "stacks must be an array", NULL);
  j->mod_first = *nmods;
  size_t i;
  const json_t *e;
  json_array_foreach(j->map, i, e) {
    snprintf(f, sizeof f, "%smemoryMap[%zu]", j->prefix, i);
    const json_t *name = json_array_get(e, 0), *id = json_array_get(e, 1);
    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(name) ||
        !json_is_string(id))
      return fail(err, f, "a memoryMap entry must be [debug_file, breakpad_id]", NULL);
    req_module *m = &mods[(*nmods)++];
    memset(m, 0, sizeof *m);
    m->id.format = ST_FORMAT_WINDOWS; /* v5 names native Windows modules */
    m->skip = true;
    const char *why = NULL;
    char fi[112];
    snprintf(fi, sizeof fi, "%s[1]", f);
    if (!parse_name(name, m->id.debug_file, &why)) {
      snprintf(fi, sizeof fi, "%s[0]", f);
      module_invalid(m, f, fi, "invalid debug_file: ", reason(why));
    } else if (!given_string(id)) {
      module_invalid(m, f, fi, "invalid breakpad_id: contains a NUL byte", NULL);
    } else if (!module_set_debug_id(&m->id, json_string_value(id), &why)) {
      module_invalid(m, f, fi, "invalid breakpad_id: ", reason(why));
    }
  }
  const json_t *stack;
  json_array_foreach(j->stacks, i, stack) {
    if (!json_is_array(stack)) {
      snprintf(f, sizeof f, "%sstacks[%zu]", j->prefix, i);
      return fail(err, f, "a stack must be an array of [module_index, module_offset]", NULL);
    }
    size_t k;
    json_array_foreach(stack, k, e) {
      /* the frame's name is formatted only when it fails */
      const json_t *mi = json_array_get(e, 0), *off = json_array_get(e, 1);
      const char *bad = NULL;
      uint64_t v;
      if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(mi) ||
          !(json_is_integer(off) || json_is_string(off)))
        bad = "a frame must be [module_index, module_offset]";
      else if (get_number(off, UINT64_MAX, &v) == NUM_BAD)
        bad = "module_offset must be an integer or a 0x hex string";
      if (bad) {
        snprintf(f, sizeof f, "%sstacks[%zu][%zu]", j->prefix, i, k);
        return fail(err, f, bad, NULL);
      }
      json_int_t idx = json_integer_value(mi);
      if (idx >= 0 && (size_t)idx < json_array_size(j->map))
        mods[j->mod_first + (size_t)idx].skip = false;
      (*nframes)++;
    }
  }
  return true;
}

/* Writes the module_offset as Eliot echoes it: hex of the number given
 * ("-0x1" for Eliot's -1, "not an offset"); a hex string is normalised, and
 * one too wide for 64 bits is echoed as it came.  *usable: *v is the offset. */
static void v5_offset(jsonw *w, const json_t *off, uint64_t *v, bool *usable) {
  *usable = false;
  if (json_is_integer(off) && json_integer_value(off) < 0) {
    char buf[32];
    snprintf(buf, sizeof buf, "-0x%llx", 0ull - (unsigned long long)json_integer_value(off));
    jsonw_str(w, buf);
    return;
  }
  if (get_number(off, UINT64_MAX, v) != NUM_OK) {
    jsonw_str(w, json_string_value(off));
    return;
  }
  *usable = true;
  jsonw_hex(w, *v, 0);
}

/* One frame of a v5 answer; returns its status (for the metrics). */
static frame_status v5_frame(jsonw *w, size_t index, const json_t *e, const v5_job *j,
                             const req_module *mods) {
  jsonw_obj(w);
  jsonw_key(w, "frame");
  jsonw_uint(w, index);
  json_int_t idx = json_integer_value(json_array_get(e, 0));
  const req_module *m = NULL, *r = NULL;
  jsonw_key(w, "module");
  if (idx >= 0 && (size_t)idx < json_array_size(j->map)) {
    m = &mods[j->mod_first + (size_t)idx];
    r = &mods[m->same];
    /* the module's name: the PDB's, reduced to its last component, or the
     * entry as given when that is not a valid name */
    if (m->invalid)
      given_or_null(w, json_array_get(json_array_get(j->map, (size_t)idx), 0));
    else
      jsonw_str(w, m->id.debug_file);
  } else {
    /* Eliot's answer for index -1 (an address in no module), and pdbsym's
     * for any index that names no entry; the Firefox Profiler's validator
     * needs every frame to have a module */
    jsonw_str(w, "<unknown>");
  }
  uint64_t off = 0;
  bool usable;
  jsonw_key(w, "module_offset");
  v5_offset(w, json_array_get(e, 1), &off, &usable);
  frame_status st = !m ? (idx == -1 ? FS_UNKNOWN_ADDRESS : FS_INVALID)
                    : m->invalid ? FS_INVALID
                                 : module_frame_status(r->h.status);
  st_answer ans;
  if (m && !m->invalid && usable && off <= UINT32_MAX && r->h.status == MOD_FOUND) {
    st_lookup_rva(r->h.st, (uint32_t)off, &ans);
    if (ans.status != ST_OK || ans.nsyms < 1) {
      st = FS_UNKNOWN_ADDRESS;
    } else {
      const st_symbol *outer = &ans.syms[ans.nsyms - 1];
      jsonw_key(w, "function");
      jsonw_str(w, outer->function);
      if (outer->has_offset) {
        jsonw_key(w, "function_offset");
        jsonw_hex(w, outer->function_offset, 0);
      }
      if (outer->file && outer->has_line) {
        jsonw_key(w, "file");
        jsonw_str(w, outer->file);
      }
      if (outer->has_line && outer->line && outer->line != ST_HIDDEN_LINE) {
        jsonw_key(w, "line");
        jsonw_uint(w, outer->line);
      }
      if (ans.nsyms > 1) {
        jsonw_key(w, "inlines");
        jsonw_arr(w);
        for (int i = 0; i < ans.nsyms - 1; i++) { /* innermost (deepest) first */
          const st_symbol *s = &ans.syms[i];
          jsonw_obj(w);
          jsonw_key(w, "function");
          jsonw_str(w, s->function);
          if (s->file && s->has_line) {
            jsonw_key(w, "file");
            jsonw_str(w, s->file);
          }
          if (s->has_line && s->line && s->line != ST_HIDDEN_LINE) {
            jsonw_key(w, "line");
            jsonw_uint(w, s->line);
          }
          jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
      }
    }
  }
  jsonw_obj_end(w);
  return st;
}

/* A memoryMap entry's key in found_modules: "debug_file/breakpad_id" as
 * given (each up to a NUL inside it, as a C string). */
typedef struct {
  const char *key;
  size_t len;
  size_t idx;   /* the entry's index in the job's memoryMap */
  size_t first; /* the first entry of the job with the same key */
  size_t last;  /* the last one (its value is the one written) */
} v5_key;

static int v5_key_cmp(const void *pa, const void *pb) {
  const v5_key *a = *(const v5_key *const *)pa, *b = *(const v5_key *const *)pb;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  int c = memcmp(a->key, b->key, a->len);
  if (c)
    return c;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* found_modules: one member per distinct key, at its first entry's place,
 * with the value of its last entry (what setting the members of a jansson
 * object entry by entry gave): null when no frame named it; false when it
 * was looked for and not found, or its name or id is invalid (as Eliot
 * answers a module it cannot find).  Counts each module looked up in the
 * metrics. */
static void v5_found_modules(jsonw *w, const v5_job *j, req_module *mods) {
  size_t n = json_array_size(j->map), bytes = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(j->map, i);
    bytes += strlen(json_string_value(json_array_get(e, 0))) +
             strlen(json_string_value(json_array_get(e, 1))) + 1;
  }
  v5_key *keys = calloc(n ? n : 1, sizeof *keys);
  v5_key **order = calloc(n ? n : 1, sizeof *order);
  char *text = malloc(bytes ? bytes : 1);
  jsonw_obj(w);
  if (!keys || !order || !text) {
    if (!w->err)
      w->err = JSONW_E_NOMEM;
    n = 0;
  }
  char *p = text;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(j->map, i);
    const char *f = json_string_value(json_array_get(e, 0));
    const char *id = json_string_value(json_array_get(e, 1));
    size_t fl = strlen(f), il = strlen(id);
    memcpy(p, f, fl);
    p[fl] = '/';
    memcpy(p + fl + 1, id, il);
    keys[i] = (v5_key){p, fl + 1 + il, i, i, i};
    order[i] = &keys[i];
    p += fl + 1 + il;
  }
  if (n > 1) {
    qsort(order, n, sizeof *order, v5_key_cmp);
    for (size_t g = 0; g < n;) {
      size_t h = g + 1;
      while (h < n && order[h]->len == order[g]->len &&
             !memcmp(order[h]->key, order[g]->key, order[g]->len))
        h++;
      for (size_t k = g; k < h; k++) { /* order[g..h): one key, by index */
        order[k]->first = order[g]->idx;
        order[k]->last = order[h - 1]->idx;
      }
      g = h;
    }
  }
  for (size_t i = 0; i < n; i++) {
    const req_module *m = &mods[j->mod_first + i];
    if (!m->skip && !m->invalid && m->same == (size_t)(m - mods))
      mt_module(m->h.status);
    if (keys[i].first != i)
      continue;
    const req_module *v = &mods[j->mod_first + keys[i].last];
    jsonw_key_str(w, keys[i].key, keys[i].len);
    if (v->skip)
      jsonw_null(w);
    else
      jsonw_bool(w, !v->invalid && mods[v->same].h.status == MOD_FOUND);
  }
  jsonw_obj_end(w);
  free(keys);
  free(order);
  free(text);
}

static void symbolicate_v5(api *a, const char *body, size_t len, const jarena *ja,
                           api_response *out) {
  json_t *root = parse_body(body, len, ja, out);
  if (!root)
    return;
  v5_job *jobs = NULL;
  size_t njobs = 0, nm = 0, nf = 0;
  req_module *mods = NULL;
  req_error err = {"", ""};
  char msg[256];
  const json_t *jl = json_is_object(root) ? json_object_get(root, "jobs") : NULL;
  if (!json_is_object(root)) {
    api_error(out, 400, "the body must be a JSON object", NULL);
    goto done;
  }
  if (jl && !json_is_array(jl)) {
    api_error(out, 400, "jobs must be an array", "jobs");
    goto done;
  }
  njobs = jl ? json_array_size(jl) : 1;
  if (njobs > a->cfg->v5_max_jobs) {
    snprintf(msg, sizeof msg, "too many jobs: %zu, the limit is v5_max_jobs = %llu", njobs,
             (unsigned long long)a->cfg->v5_max_jobs);
    api_error(out, 400, msg, "jobs");
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
    api_error(out, 400, msg, "memoryMap");
    goto done;
  }
  mods = calloc(total_map ? total_map : 1, sizeof *mods);
  jobs = calloc(njobs ? njobs : 1, sizeof *jobs);
  if (!mods || !jobs) {
    api_error(out, 500, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < njobs; i++) {
    v5_job *j = &jobs[i];
    if (jl)
      snprintf(j->prefix, sizeof j->prefix, "jobs[%zu].", i);
    if (!v5_parse_job(jl ? json_array_get(jl, i) : root, j, mods, &nm, &nf, &err)) {
      api_error(out, 400, err.msg, err.field);
      goto done;
    }
    if (nf > a->cfg->v5_max_frames) {
      char f[48];
      snprintf(f, sizeof f, "%sstacks", j->prefix);
      snprintf(msg, sizeof msg,
               "too many addresses: more than the limit v5_max_frames = %llu (all jobs together)",
               (unsigned long long)a->cfg->v5_max_frames);
      api_error(out, 400, msg, f);
      goto done;
    }
  }
  /* v5 clients (the Firefox Profiler) never ask again: wait longer */
  resolve_modules(a, mods, nm, engine_now_ms() + a->cfg->v5_timeout * 1000u);
  jsonw w;
  answer_writer(&w, a, nf);
  jsonw_obj(&w);
  jsonw_key(&w, "results");
  jsonw_arr(&w);
  uint64_t counts[FS__COUNT] = {0};
  for (size_t i = 0; i < njobs; i++) {
    const v5_job *j = &jobs[i];
    jsonw_obj(&w);
    jsonw_key(&w, "stacks");
    jsonw_arr(&w);
    size_t si;
    const json_t *stack;
    json_array_foreach(j->stacks, si, stack) {
      jsonw_arr(&w);
      size_t k;
      const json_t *e;
      json_array_foreach(stack, k, e)
        counts[v5_frame(&w, k, e, j, mods)]++;
      jsonw_arr_end(&w);
    }
    jsonw_arr_end(&w);
    jsonw_key(&w, "found_modules");
    v5_found_modules(&w, j, mods);
    jsonw_obj_end(&w);
  }
  jsonw_arr_end(&w);
  jsonw_obj_end(&w);
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  release_modules(a, mods, nm);
  set_body(out, 200, &w, a);
  out->frames = (long)nf;
  out->modules = (long)nm;
done:
  free(mods);
  free(jobs);
  /* root is in the request's arena: api_handle drops it with the arena */
}

/* ---- GET /modules/{debug_file}/{debug_id} ------------------------------------ */

static void module_info(api *a, const char *path, const char *query_format, api_response *out) {
  const char *p = path + strlen("/modules/");
  const char *slash = strchr(p, '/');
  char file[MODULE_NAME_MAX + 1];
  size_t fl = (size_t)(slash - p);
  if (fl >= sizeof file) {
    api_error(out, 400, "invalid debug_file: longer than 255 bytes", "debug_file");
    return;
  }
  memcpy(file, p, fl);
  file[fl] = '\0';
  module_id m;
  memset(&m, 0, sizeof m);
  const char *why = NULL;
  if (!module_parse_file_name(file, m.debug_file, sizeof m.debug_file, &why)) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid debug_file: %s", reason(why));
    api_error(out, 400, msg, "debug_file");
    return;
  }
  if (query_format) {
    if (!strcmp(query_format, "windows"))
      m.format = ST_FORMAT_WINDOWS;
    else if (!strcmp(query_format, "portable"))
      m.format = ST_FORMAT_PORTABLE;
    else {
      api_error(out, 400, "format must be windows or portable", "format");
      return;
    }
  }
  if (!module_set_debug_id(&m, slash + 1, &why)) {
    char msg[300];
    snprintf(msg, sizeof msg, "invalid debug_id: %s", reason(why));
    api_error(out, 400, msg, "debug_id");
    return;
  }
  /* only what the cache holds: a module it does not hold is never fetched here */
  mod_handle h;
  bool known = engine_peek(a->eng, &m, &h);
  if (!known)
    snprintf(h.error, sizeof h.error, "not in the cache and not being fetched");
  char id[48];
  module_debug_id(m.guid, m.age, id);
  jsonw w;
  jsonw_init(&w, 1024, 0);
  jsonw_obj(&w);
  jsonw_key(&w, "debug_file");
  jsonw_str(&w, m.debug_file); /* from the URL: any bytes */
  jsonw_key(&w, "debug_id");
  jsonw_str(&w, id);
  jsonw_key(&w, "status");
  jsonw_str(&w, known ? mod_status_name(h.status) : "unknown");
  jsonw_key(&w, "cached");
  jsonw_bool(&w, h.from_cache);
  const char *fmt = format_name(h.format ? h.format : m.format);
  jsonw_key(&w, "format");
  if (fmt)
    jsonw_str(&w, fmt);
  else
    jsonw_null(&w);
  if (h.source[0]) {
    jsonw_key(&w, "source");
    jsonw_str(&w, h.source);
  }
  if ((!known || h.status != MOD_FOUND) && h.error[0]) {
    jsonw_key(&w, "error");
    jsonw_str(&w, h.error);
  }
  if (h.status == MOD_FOUND && h.st) {
    const symtab *st = h.st;
    jsonw_key(&w, "counts");
    jsonw_obj(&w);
    jsonw_key(&w, "functions");
    jsonw_uint(&w, st->nfuncs);
    jsonw_key(&w, "lines");
    jsonw_uint(&w, st->nlines);
    jsonw_key(&w, "inline_sites");
    jsonw_uint(&w, st->ninlines);
    jsonw_key(&w, "publics");
    jsonw_uint(&w, st->npublics);
    jsonw_key(&w, "methods");
    jsonw_uint(&w, st->nmethods);
    jsonw_key(&w, "sequence_points");
    jsonw_uint(&w, st->nseqpts);
    jsonw_obj_end(&w);
    jsonw_key(&w, "memory_bytes");
    jsonw_uint(&w, st_memory_size(st));
  }
  jsonw_obj_end(&w);
  engine_release(a->eng, &h);
  set_body(out, known ? 200 : 404, &w, NULL);
}

/* ---- the rest ---------------------------------------------------------------- */

void api_handle(api *a, api_route_id route, const char *path, const char *query_format,
                const char *body, size_t len, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  switch (route) {
  case RT_SYMBOLICATE: {
    jarena ja;
    jarena_begin(&ja, arena_cap(len));
    symbolicate(a, body ? body : "", len, &ja, out);
    jarena_end(&ja);
    return;
  }
  case RT_MODULES:
    module_info(a, path, query_format, out);
    return;
  case RT_HEALTH: {
    static const char ok_body[] = "{\"status\":\"ok\"}";
    set_static(out, 200, ok_body, sizeof ok_body - 1);
    if (!out->body)
      set_static(out, 500, oom_body, sizeof oom_body - 1);
    return;
  }
  case RT_READY: {
    const char *why = "the cache database is not open";
    bool ok = !a->draining && engine_ready(a->eng);
    jsonw w;
    jsonw_init(&w, 128, 0);
    jsonw_obj(&w);
    jsonw_key(&w, "status");
    jsonw_str(&w, ok ? "ready" : "not ready");
    if (!ok) {
      jsonw_key(&w, "error");
      jsonw_str(&w, a->draining ? "shutting down" : why);
    }
    jsonw_obj_end(&w);
    set_body(out, ok ? 200 : 503, &w, NULL);
    if (!ok)
      out->retry_after = (unsigned)a->cfg->retry_after;
    return;
  }
  case RT_METRICS: {
    out->body = mt_render(engine_cache_bytes(a->eng));
    if (!out->body) {
      api_error(out, 500, "out of memory", NULL);
      return;
    }
    out->status = 200;
    out->len = strlen(out->body);
    out->content_type = "text/plain; version=0.0.4; charset=utf-8";
    return;
  }
  case RT_SYMBOLICATE_V5: {
    jarena ja;
    jarena_begin(&ja, arena_cap(len));
    symbolicate_v5(a, body ? body : "", len, &ja, out);
    jarena_end(&ja);
    return;
  }
  case RT_TRACES: /* streamed by http.c, never buffered */
    api_error(out, 500, "POST /traces is answered by the HTTP layer", NULL);
    return;
  case RT_OTHER:
  case RT__COUNT:
    break;
  }
  api_error(out, 404, "no such route", NULL);
}
