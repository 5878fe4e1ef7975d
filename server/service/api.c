/*
 * api.c - the routes of `pdbsym serve`: request JSON in, answer JSON out,
 * as docs/contract.md ("Modules", "Frames", "One answered frame") and api.md
 * describe.  See api.h.  Frames are rendered by render.c, as the CLI's.
 *
 * POST /symbolicate, step by step:
 *   1. read and check the body into compact arrays (request.h: no tree of
 *      the body); a shape the contract does not allow is a 400 naming the
 *      field ("frames[3].rva"), but a module whose fields are bad fails
 *      alone (its answer "invalid", its frames invalid); frames given by
 *      instruction_addr get their RVA from their module's image_addr, and
 *      return addresses are marked for a lookup at address - 1; the body's
 *      buffer is given back then;
 *   2. resolve every module once: first a probe with no wait for all of them
 *      (a cached module answers at once, a missing one starts its download in
 *      the engine), then a wait until the request's deadline (counted from
 *      its arrival) for those still pending, so downloads of one request
 *      overlap instead of adding up;
 *   3. answer the frames in input order from the pinned symbol tables,
 *      written with jsonw.h straight into one buffer (no tree, not even one
 *      frame's): the buffer is reserved in the request memory budget
 *      (reqmem.h) as it grows, a reservation refused is a 503, and an
 *      answer longer than max_answer_bytes a 400; the buffer then goes to
 *      libmicrohttpd as it is, with its reservation (http.c);
 *   4. release the tables.
 */
#include "api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jsonw.h"
#include "log.h"
#include "metrics.h"
#include "render.h"
#include "request.h"

/* ---- responses ------------------------------------------------------------ */

/* Small answers (errors, /modules, /ready) are written with jsonw.h into a
 * buffer of their own, outside the request memory budget (they are bounded
 * by their fields); the answers of /symbolicate and v5 use answer_* below. */

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
static void set_body(api_response *out, unsigned status, jsonw *w) {
  size_t n = 0;
  char *text = jsonw_error(w) ? NULL : jsonw_take(w, &n);
  jsonw_free(w);
  if (text) {
    out->status = status;
    out->content_type = "application/json";
    out->body = text;
    out->len = n;
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
  set_body(out, status, &w);
}

/* ---- routing -------------------------------------------------------------- */

static const char *const route_names[RT__COUNT] = {
    "/symbolicate", "/symbolicate/v5", "/modules", "/health", "/ready", "/metrics", "/traces",
    "/profiles", "/profiles/latest", "other"};
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

bool api_check_origins(const char *val, char *why, size_t cap) {
  const char *s;
  size_t n;
  for (const char *p = val; (p = next_origin(p, &s, &n)) != NULL;) {
    if (!origin_syntax_ok(s, n)) {
      snprintf(why, cap,
               "want origins (scheme://host[:port], no path), * or null, comma-separated; "
               "'%.*s' is not one",
               (int)(n > 100 ? 100 : n), s);
      return false;
    }
  }
  return true;
}

bool api_check_config(const srv_config *cfg, char *err, size_t cap) {
  char why[256];
  if (!api_check_origins(cfg->cors_origins, why, sizeof why)) {
    snprintf(err, cap, "cors_origins = '%.200s': %s", cfg->cors_origins, why);
    return false;
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
      {"/profiles", RT_PROFILES, "GET"},
      {"/profiles/latest", RT_PROFILES_LATEST, "GET"},
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

bool api_route_heavy(api_route_id r) { /* (the profiles' read a folder or a file) */
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_MODULES || r == RT_TRACES ||
         r == RT_PROFILES || r == RT_PROFILES_LATEST;
}

bool api_route_has_body(api_route_id r) {
  return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5 || r == RT_TRACES;
}

/* ---- the answer, written as it is built -------------------------------------- */

/* The answer of /symbolicate and v5: written with jsonw.h into one buffer
 * that is reserved in the request memory budget (reqmem.h) as it grows, from
 * the request's grant first, and capped at max_answer_bytes.  It becomes
 * the response body as it is, with its reservation (out->charged), which
 * http.c gives back when libmicrohttpd has sent and freed it. */
typedef struct {
  rm_buf b;
  jsonw w;
  bool refused; /* another buffer of the answer's was refused by the budget */
} answer;

static bool answer_grow(void *ctx, char **buf, size_t *size, size_t need) {
  rm_buf *b = ctx;
  if (!rm_buf_reserve(b, need))
    return false;
  *buf = b->p;
  *size = b->size;
  return true;
}

/* The answer's buffer for about nframes frames: a block kept from an earlier
 * answer (reqmem.h) when one fits 160 bytes a frame, the least a native
 * frame with a symbol takes; else it grows as it is written. */
static void answer_begin(answer *an, const api *a, rm_grant *grant, size_t nframes) {
  memset(an, 0, sizeof *an);
  uint64_t max = a->cfg->max_answer_bytes ? a->cfg->max_answer_bytes : SIZE_MAX - 2;
  if (max > SIZE_MAX - 2)
    max = SIZE_MAX - 2;
  an->b.grant = grant;
  an->b.cap = (size_t)max + 1; /* and its NUL */
  if (nframes < SIZE_MAX / 160)
    rm_buf_adopt_kept(&an->b, nframes * 160);
  jsonw_init_grow(&an->w, (size_t)max, answer_grow, &an->b, an->b.p, an->b.size);
}

/* The answer as the response body, or why not: past max_answer_bytes a 400
 * naming it, a reservation the budget refused a 503, else a 500. */
static void answer_finish(api *a, answer *an, api_response *out) {
  size_t n = 0;
  jsonw_err e = jsonw_error(&an->w);
  jsonw_text(&an->w, &n); /* its NUL, for the fuzzers' json_loads */
  jsonw_free(&an->w);
  if (e == JSONW_OK && an->b.p) {
    an->b.len = n + 1;
    rm_buf_shrink(&an->b);
    out->status = 200;
    out->content_type = "application/json";
    out->len = n; /* the NUL is not part of the body */
    out->body = rm_buf_take(&an->b, &out->charged); /* the response's now, with its reservation */
    return;
  }
  bool budget = an->refused || (an->b.failed && !an->b.over_cap);
  rm_buf_free(&an->b);
  char msg[160];
  if (e == JSONW_E_LIMIT) {
    snprintf(msg, sizeof msg,
             "the answer would be larger than max_answer_bytes = %llu; send fewer frames",
             (unsigned long long)a->cfg->max_answer_bytes);
    api_error(out, 400, msg, "frames");
  } else if (budget) {
    snprintf(msg, sizeof msg,
             "the memory budget of requests in flight is taken (request_memory_max = %llu)",
             (unsigned long long)a->cfg->request_memory_max);
    api_error(out, 503, msg, NULL);
    out->retry_after = (unsigned)a->cfg->retry_after;
  } else {
    set_static(out, 500, oom_body, sizeof oom_body - 1);
  }
}

static void refuse(api *a, rq_result r, const rq_error *e, api_response *out) {
  if (r == RQ_BUDGET) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "the memory budget of requests in flight is taken (request_memory_max = %llu)",
             (unsigned long long)a->cfg->request_memory_max);
    api_error(out, 503, msg, NULL);
    out->retry_after = (unsigned)a->cfg->retry_after;
  } else {
    api_error(out, 400, e->msg, e->field[0] ? e->field : NULL);
  }
}

/* ---- a request's modules ---------------------------------------------------- */

typedef struct {
  const rq_module *g;  /* in the parsed request: its id, and whether it is invalid */
  mod_handle h;
  bool resolved;
  bool skip;           /* v5: no frame names it, so it is not looked up */
  size_t same;         /* index of the first entry naming the same module (itself if none) */
  render_module rm;    /* Source Link map etc., set up at the first answered frame */
  bool rm_init;
  char did[48];        /* its debug id as answered (module_debug_id), once did[0] is set */
} req_module;

/* The lookup state of the parsed modules, in the budget. */
static req_module *modules_for(const rq_request *q, rm_buf *store) {
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
static frame_status answer_frame(jsonw *w, const api *a, const rq_request *q, const rq_frame *fr,
                                 req_module *m) {
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
    st = module_frame_status(m->h.status);
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
    render_module_init(&m->rm, m->h.st);
    m->rm_init = true;
  }
  bool managed = fr->kind == RQ_MANAGED;
  render_frame f = {
      .status = frame_status_name(st),
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
  render_frame_w(w, m ? &m->rm : NULL, &f);
  return st;
}

/* ---- frames asked again in one request ----------------------------------------------
 * A batch of stacks asks the same addresses many times: the frames near the
 * roots, a hot function.  A found frame's text after its first number (the
 * entry's index of /symbolicate's "module":N, the frame's place of v5's
 * "frame":N) is a function of the frame's fields and of the module entry,
 * so a frame asked again is written by copying that text from earlier in
 * the answer, behind its own number: the same bytes, without the lookup.
 * The table is direct-mapped, on the stack, new for every request: a frame
 * not in it costs a hash and a compare. */
enum { REPEAT_SLOTS = 512 };
static const char OK_HEAD[] = "{\"status\":\"ok\",\"module\":";
static const char V5_HEAD[] = "{\"frame\":";

typedef struct {
  uint64_t rva, aux;
  uint32_t same; /* the module entry that answers */
  uint8_t kind, flags;
  uint32_t len;  /* of the text */
  size_t off;    /* where the text after the number starts in the answer */
} repeat_slot;

/* Only the bitmap of slots in use is cleared for a request (64 bytes): a
 * slot is read only once written. */
typedef struct {
  uint64_t used[REPEAT_SLOTS / 64];
  repeat_slot slot[REPEAT_SLOTS];
} repeat_table;

static inline void repeat_init(repeat_table *t) { memset(t->used, 0, sizeof t->used); }

/* The slot of a key, and whether it holds that key. */
static inline repeat_slot *repeat_find(repeat_table *t, uint64_t rva, uint64_t aux, uint32_t same,
                                       uint8_t kind, uint8_t flags, bool *hit) {
  uint64_t h = (rva ^ (aux << 20) ^ ((uint64_t)same << 40)) * 0x9E3779B97F4A7C15ull;
  unsigned i = (unsigned)(h >> 55); /* 512 slots */
  repeat_slot *e = &t->slot[i];
  *hit = (t->used[i / 64] >> (i % 64) & 1) && e->rva == rva && e->aux == aux && e->same == same &&
         e->kind == kind && e->flags == flags;
  return e;
}

/* The frame written from start to the writer's end, which begins with
 * head and the number num when it is a found frame: the text after the
 * number remembered in e under its key (or e left unused when the text is
 * not that). */
static inline __attribute__((always_inline)) void repeat_keep(repeat_table *t, repeat_slot *e,
                                                              const repeat_slot *key, const jsonw *w,
                                                              size_t start, const char *head,
                                                              size_t nhead, uint64_t num) {
  const char *b = w->buf;
  size_t i = (size_t)(e - t->slot), nd = 1;
  for (uint64_t v = num; v >= 10; v /= 10)
    nd++;
  size_t q = start + nhead + nd; /* the ',' after the number */
  t->used[i / 64] &= ~(1ull << (i % 64));
  if (w->len <= q || memcmp(b + start, head, nhead) || b[q] != ',' || w->len - q > UINT32_MAX)
    return;
  *e = *key;
  e->len = (uint32_t)(w->len - q);
  e->off = q;
  t->used[i / 64] |= 1ull << (i % 64);
}

/* The frame as e remembers it, behind head and its own number; false, with
 * nothing written, when the writer has no room for it at hand. */
static bool repeat_put(jsonw *w, const repeat_slot *e, const char *head, size_t nhead, uint64_t num) {
  char *p = jsonw_raw_begin(w, nhead + 21 + (size_t)e->len, 3);
  if (!p)
    return false;
  memcpy(p, head, nhead);
  p = jsonw_raw_uint(p + nhead, num);
  memcpy(p, w->buf + e->off, e->len);
  jsonw_raw_end(w, p + e->len);
  return true;
}

/* A text of the request as given (any bytes), or null. */
static void given_or_null(jsonw *w, const rq_request *q, uint32_t off) {
  const char *s = rq_text(q, off);
  if (s)
    jsonw_str(w, s);
  else
    jsonw_null(w);
}

/* m answers (the first entry naming the module); g is this entry. */
static void answer_module(jsonw *w, const api *a, const rq_request *q, req_module *m,
                          const rq_module *g) {
  jsonw_obj(w);
  if (g->invalid) {
    jsonw_key(w, "debug_file");
    given_or_null(w, q, g->gfile_off);
    jsonw_key(w, "debug_id");
    given_or_null(w, q, g->gid_off);
    jsonw_key(w, "status");
    jsonw_str(w, "invalid");
    jsonw_key(w, "format");
    jsonw_null(w);
    jsonw_key(w, "source");
    jsonw_null(w);
    jsonw_key(w, "from_cache");
    jsonw_bool(w, false);
    jsonw_key(w, "error");
    jsonw_str(w, rq_text(q, g->why_off));
    jsonw_key(w, "field");
    jsonw_str(w, rq_text(q, g->field_off));
    jsonw_obj_end(w);
    return;
  }
  const module_id *id = &m->g->id;
  char did[48];
  if (!m->did[0]) /* once per module, however many entries name it */
    module_debug_id(id->guid, id->age, m->did);
  memcpy(did, m->did, sizeof did);
  if (g->no_age)
    did[36] = '\0'; /* the GUID alone, as given: a Portable PDB's id has no age */
  jsonw_key(w, "debug_file");
  jsonw_str(w, id->debug_file);
  jsonw_key(w, "debug_id");
  jsonw_str(w, did);
  jsonw_key(w, "status");
  jsonw_str(w, mod_status_name(m->h.status));
  const char *fmt = format_name(m->h.format ? m->h.format : id->format);
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

/* A module listed twice in one request is resolved once: later entries point
 * at the first (module_id is zero-filled before parsing, so memcmp is exact).
 * Invalid entries stand alone. */
static void dedupe_modules(req_module *mods, size_t n) {
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

/* Step 2 of the file comment: probe all, then wait for the pending ones.
 * hot_only (a request answered on the event loop, http.h): every module must
 * be answered from memory at once (engine_resolve_hot), else false with
 * nothing pinned, and the request goes to a worker. */
static bool resolve_modules(api *a, req_module *mods, size_t n, uint64_t deadline, bool hot_only) {
  dedupe_modules(mods, n);
  if (hot_only) {
    for (size_t i = 0; i < n; i++) {
      if (mods[i].skip || mods[i].g->invalid || mods[i].same != i)
        continue;
      if (!engine_resolve_hot(a->eng, &mods[i].g->id, &mods[i].h)) {
        for (size_t k = 0; k < i; k++)
          if (mods[k].resolved) {
            engine_release(a->eng, &mods[k].h);
            mods[k].resolved = false;
          }
        return false;
      }
      mods[i].resolved = true;
    }
    for (size_t i = 0; i < n; i++)
      if (mods[i].resolved)
        mt_cache(true);
    return true;
  }
  /* every module at once, within the request's share of the download queue
   * (engine.h): the cache first, then the jobs, waited for together */
  size_t nw = 0;
  for (size_t i = 0; i < n; i++)
    nw += !(mods[i].skip || mods[i].g->invalid || mods[i].same != i);
  engine_want *w = calloc(nw ? nw : 1, sizeof *w);
  engine_share *sh = engine_share_new(a->eng);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (mods[i].skip || mods[i].g->invalid || mods[i].same != i)
      continue;
    if (w) {
      w[k].m = &mods[i].g->id;
      w[k].out = &mods[i].h;
      k++;
    } else { /* out of memory for the list: one at a time */
      engine_resolve_in(a->eng, sh, &mods[i].g->id, deadline, &mods[i].h);
    }
    mods[i].resolved = true;
  }
  if (w)
    engine_resolve_many(a->eng, sh, w, k, deadline);
  free(w);
  for (size_t i = 0; i < n; i++) {
    if (!mods[i].resolved)
      continue;
    /* found without the image's names, the image coming: wait for it */
    if (mods[i].h.names_pending && engine_now_ms() < deadline) {
      engine_release(a->eng, &mods[i].h);
      engine_resolve_in(a->eng, sh, &mods[i].g->id, deadline, &mods[i].h);
      mods[i].h.from_cache = false; /* this request waited for a fetch */
    }
    mt_cache(mods[i].h.from_cache);
  }
  engine_share_end(a->eng, sh);
  return true;
}

static void release_modules(api *a, req_module *mods, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (mods[i].rm_init)
      render_module_free(&mods[i].rm);
    if (mods[i].resolved)
      engine_release(a->eng, &mods[i].h);
  }
}

/* The request's body, parsed: the body's own buffer is given back now when
 * the caller handed it over (owned), before the request waits and renders. */
static void drop_body(rm_buf *owned) {
  if (owned)
    rm_buf_free(owned);
}

static rq_limits limits_of(const srv_config *cfg) {
  rq_limits lim = {cfg->max_modules, cfg->max_frames, cfg->v5_max_frames, cfg->v5_max_jobs};
  return lim;
}

static void symbolicate(api *a, const char *body, size_t len, rm_buf *owned, rm_grant *grant,
                        uint64_t received_ms, bool hot_only, bool *declined, api_response *out) {
  rq_request q;
  memset(&q, 0, sizeof q);
  rq_error err;
  rq_limits lim = limits_of(a->cfg);
  rq_result res = rq_parse_symbolicate(body, len, &lim, grant, &q, &err);
  drop_body(owned);
  rm_buf store = {0};
  store.grant = grant;
  answer an;
  answer_begin(&an, a, grant, res == RQ_OK ? q.nframes : 0);
  if (res != RQ_OK) {
    refuse(a, res, &err, out);
    goto done;
  }
  uint64_t timeout_ms = a->cfg->default_timeout * 1000u;
  if (q.has_timeout) {
    double cap = (double)a->cfg->max_timeout;
    timeout_ms = (uint64_t)((q.timeout < cap ? q.timeout : cap) * 1000.0);
  }
  size_t nm = q.nmods, nf = q.nframes;
  req_module *mods = modules_for(&q, &store);
  if (!mods) {
    refuse(a, RQ_BUDGET, &err, out);
    goto done;
  }
  /* the request's time counts from its arrival, queueing for a worker included */
  if (!resolve_modules(a, mods, nm, received_ms + timeout_ms, hot_only)) {
    *declined = true;
    goto done;
  }

  uint64_t counts[FS__COUNT] = {0};
  jsonw *w = &an.w;
  jsonw_obj(w);
  jsonw_key(w, "frames");
  jsonw_arr(w);
  /* a failed write leaves the writer failed, every later one a no-op:
   * answer_finish says why */
  repeat_table seen;
  repeat_init(&seen);
  for (size_t i = 0; i < nf && !jsonw_error(w); i++) {
    const rq_frame *fr = &q.frames[i];
    uint32_t same = (fr->flags & RQ_F_BAD_INDEX) ? 0 : (uint32_t)mods[fr->module].same;
    req_module *m = (fr->flags & RQ_F_BAD_INDEX) ? NULL : &mods[same];
    if (!m || (fr->flags & RQ_F_INVALID)) {
      counts[answer_frame(w, a, &q, fr, m)]++;
      continue;
    }
    bool hit;
    repeat_slot *e = repeat_find(&seen, fr->rva, fr->aux, same, fr->kind, fr->flags, &hit);
    if (hit && repeat_put(w, e, OK_HEAD, sizeof OK_HEAD - 1, fr->module)) {
      counts[FS_OK]++;
      continue;
    }
    size_t start = w->len + ((w->more & 1) ? 1 : 0);
    frame_status st = answer_frame(w, a, &q, fr, m);
    counts[st]++;
    if (st == FS_OK && !jsonw_error(w)) {
      repeat_slot key = {.rva = fr->rva, .aux = fr->aux, .same = same, .kind = fr->kind, .flags = fr->flags};
      repeat_keep(&seen, e, &key, w, start, OK_HEAD, sizeof OK_HEAD - 1, fr->module);
    }
  }
  jsonw_arr_end(w);
  jsonw_key(w, "modules");
  jsonw_arr(w);
  for (size_t i = 0; i < nm; i++) {
    answer_module(w, a, &q, &mods[mods[i].same], &q.mods[i]);
    if (mods[i].same == i && !q.mods[i].invalid)
      mt_module(mods[i].h.status);
  }
  jsonw_arr_end(w);
  jsonw_obj_end(w);
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  release_modules(a, mods, nm);
  answer_finish(a, &an, out);
  if (out->status == 200) {
    out->frames = (long)nf;
    out->modules = (long)nm;
  }
done:
  jsonw_free(&an.w);
  rm_buf_free(&an.b);
  rm_buf_free(&store);
  rq_free(&q);
}

/* ---- POST /symbolicate/v5 (Mozilla's symbolication API v5) -------------------- */

/* module_offset as Eliot echoes it: hex of the number given ("-0x1" for
 * Eliot's -1, "not an offset"); a hex string too wide for 64 bits as it came. */
static void v5_offset(jsonw *w, const rq_request *q, const rq_v5_frame *e) {
  if (e->off_kind == RQ_OFF_NEG) {
    char buf[32];
    snprintf(buf, sizeof buf, "-0x%llx", (unsigned long long)e->offset);
    jsonw_str(w, buf);
  } else if (e->off_kind == RQ_OFF_TEXT) {
    jsonw_str(w, rq_text(q, e->text_off));
  } else {
    jsonw_hex(w, e->offset, 0);
  }
}

/* The v5 frame of an address found, in one pass:
 *   {"frame":N,"module":"name","module_offset":"0x..","function":"..",
 *    "function_offset":"0x..","file":"..","line":N,"inlines":[{"function":..,
 *    "file":..,"line":N},...]}
 * with the members v5_frame below writes for it (its rules for file and
 * line), every string of plain ASCII (jsonw_raw_str).  false with nothing
 * written for a string to sanitize or a writer without the room at hand:
 * v5_frame then writes it member by member, the same bytes. */
/* A v5 symbol's file and line, raw (v5_frame's rules: a file whenever the
 * symbol has one and a line, a line unless 0 or hidden); NULL for a file
 * name with a byte to sanitize. */
static char *v5_file_line(char *p, const st_symbol *s, size_t nfile) {
  if (s->file && s->has_line) {
    p = jsonw_raw_lit(p, ",\"file\":");
    if (!(p = jsonw_raw_str(p, s->file, nfile)))
      return NULL;
  }
  if (s->has_line && s->line && s->line != ST_HIDDEN_LINE) {
    p = jsonw_raw_lit(p, ",\"line\":");
    p = jsonw_raw_uint(p, s->line);
  }
  return p;
}

static bool v5_frame_plain(jsonw *w, size_t index, const char *name, uint64_t off,
                           const st_answer *ans) {
  enum { MAXS = ST_MAX_INLINE_DEPTH + 1 };
  size_t fn[MAXS], file[MAXS], nname = strlen(name), cap = w->max / 256;
  /* the frame's own text is under 100 bytes, a symbol's under 40, numbers 20 each */
  size_t need = 100 + 4 * 20 + 2 * nname;
  if (nname > cap || ans->nsyms < 1 || ans->nsyms > MAXS)
    return false;
  for (int i = 0; i < ans->nsyms; i++) {
    const st_symbol *s = &ans->syms[i];
    fn[i] = strlen(s->function);
    file[i] = s->file && s->has_line ? strlen(s->file) : 0;
    if (fn[i] > cap || file[i] > cap) /* 130 strings of at most max / 256 bytes: no wrap */
      return false;
    need += 40 + 20 + 2 * (fn[i] + file[i]);
  }
  char *p = jsonw_raw_begin(w, need, 3);
  if (!p)
    return false;
  const st_symbol *outer = &ans->syms[ans->nsyms - 1];
  int o = ans->nsyms - 1;
  p = jsonw_raw_lit(p, "{\"frame\":");
  p = jsonw_raw_uint(p, index);
  p = jsonw_raw_lit(p, ",\"module\":");
  if (!(p = jsonw_raw_str(p, name, nname)))
    return false;
  p = jsonw_raw_lit(p, ",\"module_offset\":");
  p = jsonw_raw_hex(p, off);
  p = jsonw_raw_lit(p, ",\"function\":");
  if (!(p = jsonw_raw_str(p, outer->function, fn[o])))
    return false;
  if (outer->has_offset) {
    p = jsonw_raw_lit(p, ",\"function_offset\":");
    p = jsonw_raw_hex(p, outer->function_offset);
  }
  if (!(p = v5_file_line(p, outer, file[o])))
    return false;
  if (ans->nsyms > 1) {
    p = jsonw_raw_lit(p, ",\"inlines\":[");
    for (int i = 0; i < o; i++) { /* innermost (deepest) first */
      const st_symbol *s = &ans->syms[i];
      if (i)
        *p++ = ',';
      p = jsonw_raw_lit(p, "{\"function\":");
      if (!(p = jsonw_raw_str(p, s->function, fn[i])) || !(p = v5_file_line(p, s, file[i])))
        return false;
      *p++ = '}';
    }
    *p++ = ']';
  }
  *p++ = '}';
  jsonw_raw_end(w, p);
  return true;
}

/* One frame of a v5 answer; returns its status (for the metrics). */
static frame_status v5_frame(jsonw *w, const rq_request *q, size_t index, const rq_v5_frame *e,
                             const rq_job *j, const req_module *mods) {
  const req_module *m = NULL, *r = NULL;
  if (e->module_index >= 0 && (uint64_t)e->module_index < j->nmods) {
    m = &mods[j->mod_first + (size_t)e->module_index];
    r = &mods[m->same];
  }
  bool usable = e->off_kind == RQ_OFF_OK;
  uint64_t off = e->offset;
  bool lookup = m && !m->g->invalid && usable && off <= UINT32_MAX && r->h.status == MOD_FOUND;
  st_answer ans;
  if (lookup) {
    st_lookup_rva(r->h.st, (uint32_t)off, &ans);
    if (ans.status == ST_OK && ans.nsyms >= 1 &&
        v5_frame_plain(w, index, m->g->id.debug_file, off, &ans))
      return FS_OK;
  }
  jsonw_obj(w);
  jsonw_key(w, "frame");
  jsonw_uint(w, index);
  jsonw_key(w, "module");
  if (m) {
    /* the module's name: the PDB's, reduced to its last component, or the
     * entry as given when that is not a valid name */
    if (m->g->invalid)
      given_or_null(w, q, m->g->gfile_off);
    else
      jsonw_str(w, m->g->id.debug_file);
  } else {
    /* Eliot's answer for index -1 (an address in no module), and pdbsym's
     * for any index that names no entry; the Firefox Profiler's validator
     * needs every frame to have a module */
    jsonw_str(w, "<unknown>");
  }
  jsonw_key(w, "module_offset");
  v5_offset(w, q, e);
  frame_status st = !m ? (e->module_index == -1 ? FS_UNKNOWN_ADDRESS : FS_INVALID)
                    : m->g->invalid ? FS_INVALID
                                    : module_frame_status(r->h.status);
  if (lookup) {
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
 * given. */
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
 * metrics.  The index arrays (two pointers and a few words per entry, the
 * entries bounded by max_modules) are in the request's budget (store). */
static void v5_found_modules(answer *an, const rq_request *q, const rq_job *j, req_module *mods,
                             rm_buf *store) {
  jsonw *w = &an->w;
  size_t n = j->nmods;
  v5_key *keys = NULL;
  v5_key **order = NULL;
  if (n > 1) {
    if (n > SIZE_MAX / (sizeof *keys + sizeof *order) ||
        !rm_buf_reserve(store, n * (sizeof *keys + sizeof *order))) {
      an->refused = true;
      if (!w->err)
        w->err = JSONW_E_NOMEM;
      return;
    }
    keys = (v5_key *)(void *)store->p;
    order = (v5_key **)(void *)(keys + n);
  }
  v5_key one;
  if (n == 1)
    keys = &one;
  for (size_t i = 0; i < n; i++) {
    const rq_module *g = mods[j->mod_first + i].g;
    keys[i] = (v5_key){rq_given(q, g), g->given_len, i, i, i};
    if (order)
      order[i] = &keys[i];
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
  jsonw_obj(w);
  for (size_t i = 0; i < n; i++) {
    const req_module *m = &mods[j->mod_first + i];
    if (!m->skip && !m->g->invalid && m->same == (size_t)(m - mods))
      mt_module(m->h.status);
    if (keys[i].first != i)
      continue;
    const req_module *v = &mods[j->mod_first + keys[i].last];
    jsonw_key_str(w, keys[i].key, keys[i].len);
    if (v->skip)
      jsonw_null(w);
    else
      jsonw_bool(w, !v->g->invalid && mods[v->same].h.status == MOD_FOUND);
  }
  jsonw_obj_end(w);
}

static void symbolicate_v5(api *a, const char *body, size_t len, rm_buf *owned, rm_grant *grant,
                           uint64_t received_ms, bool hot_only, bool *declined,
                           api_response *out) {
  rq_request q;
  memset(&q, 0, sizeof q);
  rq_error err;
  rq_limits lim = limits_of(a->cfg);
  rq_result res = rq_parse_v5(body, len, &lim, grant, &q, &err);
  drop_body(owned);
  rm_buf store = {0}, keys = {0};
  store.grant = keys.grant = grant;
  answer an;
  answer_begin(&an, a, grant, res == RQ_OK ? q.nv5_frames : 0);
  if (res != RQ_OK) {
    refuse(a, res, &err, out);
    goto done;
  }
  size_t nm = q.nmods, nf = q.nv5_frames;
  req_module *mods = modules_for(&q, &store);
  if (!mods) {
    refuse(a, RQ_BUDGET, &err, out);
    goto done;
  }
  /* v5 clients (the Firefox Profiler) never ask again: wait longer */
  if (!resolve_modules(a, mods, nm, received_ms + a->cfg->v5_timeout * 1000u, hot_only)) {
    *declined = true;
    goto done;
  }
  uint64_t counts[FS__COUNT] = {0};
  repeat_table seen;
  repeat_init(&seen);
  jsonw *w = &an.w;
  jsonw_obj(w);
  jsonw_key(w, "results");
  jsonw_arr(w);
  for (size_t i = 0; i < q.njobs && !jsonw_error(w); i++) {
    const rq_job *j = &q.jobs[i];
    jsonw_obj(w);
    jsonw_key(w, "stacks");
    jsonw_arr(w);
    for (uint32_t si = 0; si < j->nstacks && !jsonw_error(w); si++) {
      const rq_stack *sk = &q.stacks[j->stack_first + si];
      jsonw_arr(w);
      for (uint32_t k = 0; k < sk->count; k++) {
        /* a frame asked again (above symbolicate's loop): an address found
         * in a module entry of this job, keyed by the entry */
        const rq_v5_frame *fe = &q.v5_frames[sk->first + k];
        bool keyed = fe->off_kind == RQ_OFF_OK && fe->module_index >= 0 &&
                     (uint64_t)fe->module_index < j->nmods;
        uint32_t entry = keyed ? (uint32_t)(j->mod_first + (size_t)fe->module_index) : 0;
        bool hit = false;
        repeat_slot *e = keyed ? repeat_find(&seen, fe->offset, 0, entry, 0, 0, &hit) : NULL;
        if (hit && repeat_put(w, e, V5_HEAD, sizeof V5_HEAD - 1, k)) {
          counts[FS_OK]++;
          continue;
        }
        size_t start = w->len + ((w->more & 1) ? 1 : 0);
        frame_status st = v5_frame(w, &q, k, fe, j, mods);
        counts[st]++;
        if (e && st == FS_OK && !jsonw_error(w)) {
          repeat_slot key = {.rva = fe->offset, .same = entry};
          repeat_keep(&seen, e, &key, w, start, V5_HEAD, sizeof V5_HEAD - 1, k);
        }
      }
      jsonw_arr_end(w);
    }
    jsonw_arr_end(w);
    jsonw_key(w, "found_modules");
    v5_found_modules(&an, &q, j, mods, &keys);
    jsonw_obj_end(w);
  }
  jsonw_arr_end(w);
  jsonw_obj_end(w);
  for (int s = 0; s < FS__COUNT; s++)
    if (counts[s])
      mt_frames((frame_status)s, counts[s]);
  release_modules(a, mods, nm);
  answer_finish(a, &an, out);
  if (out->status == 200) {
    out->frames = (long)nf;
    out->modules = (long)nm;
  }
done:
  jsonw_free(&an.w);
  rm_buf_free(&an.b);
  rm_buf_free(&keys);
  rm_buf_free(&store);
  rq_free(&q);
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
    snprintf(msg, sizeof msg, "invalid debug_file: %s", rq_reason(why));
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
    snprintf(msg, sizeof msg, "invalid debug_id: %s", rq_reason(why));
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
  set_body(out, known ? 200 : 404, &w);
}

/* ---- the rest ---------------------------------------------------------------- */

static void handle(api *a, api_route_id route, const char *path, const char *query_format,
                   const char *body, size_t len, rm_buf *owned, rm_grant *grant,
                   uint64_t received_ms, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  bool declined = false; /* (only hot_only requests decline) */
  switch (route) {
  case RT_SYMBOLICATE:
    symbolicate(a, body ? body : "", body ? len : 0, owned, grant, received_ms, false,
                &declined, out);
    return;
  case RT_SYMBOLICATE_V5:
    symbolicate_v5(a, body ? body : "", body ? len : 0, owned, grant, received_ms, false,
                   &declined, out);
    return;
  default:
    break;
  }
  drop_body(owned);
  switch (route) {
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
    char unwritable[200];
    const char *why = "the cache database is not open";
    bool ok = !a->draining && engine_ready(a->eng);
    if (ok && !engine_writable(a->eng, unwritable, sizeof unwritable)) {
      ok = false; /* every download and store would fail */
      why = unwritable;
    }
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
    set_body(out, ok ? 200 : 503, &w);
    if (!ok)
      out->retry_after = (unsigned)a->cfg->retry_after;
    return;
  }
  case RT_METRICS: {
    engine_stats es;
    engine_get_stats(a->eng, &es);
    out->body = mt_render(engine_cache_bytes(a->eng), &es);
    if (!out->body) {
      api_error(out, 500, "out of memory", NULL);
      return;
    }
    out->status = 200;
    out->len = strlen(out->body);
    out->content_type = "text/plain; version=0.0.4; charset=utf-8";
    return;
  }
  case RT_TRACES: /* streamed by http.c, never buffered */
    api_error(out, 500, "POST /traces is answered by the HTTP layer", NULL);
    return;
  case RT_PROFILES:
  case RT_PROFILES_LATEST: /* api_profiles, which takes the query's pid */
    api_profiles(a, route, NULL, query_format, out);
    return;
  case RT_SYMBOLICATE:
  case RT_SYMBOLICATE_V5:
  case RT_OTHER:
  case RT__COUNT:
    break;
  }
  api_error(out, 404, "no such route", NULL);
}

void api_handle(api *a, api_route_id route, const char *path, const char *query_format,
                const char *body, size_t len, api_response *out) {
  handle(a, route, path, query_format, body, len, NULL, NULL, engine_now_ms(), out);
}

void api_handle_owned(api *a, api_route_id route, const char *path, const char *query_format,
                      rm_buf *body, rm_grant *grant, uint64_t received_ms, api_response *out) {
  handle(a, route, path, query_format, body->p, body->len, body, grant, received_ms, out);
}

bool api_route_inline(api_route_id r) { return r == RT_SYMBOLICATE || r == RT_SYMBOLICATE_V5; }

bool api_handle_hot(api *a, api_route_id route, const rm_buf *body, rm_grant *grant,
                    uint64_t received_ms, api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  if (a->draining || !api_route_inline(route))
    return false;
  bool declined = false;
  const char *p = body->p ? body->p : "";
  size_t len = body->p ? body->len : 0;
  if (route == RT_SYMBOLICATE)
    symbolicate(a, p, len, NULL, grant, received_ms, true, &declined, out);
  else
    symbolicate_v5(a, p, len, NULL, grant, received_ms, true, &declined, out);
  return !declined; /* declined: nothing was written to out */
}
