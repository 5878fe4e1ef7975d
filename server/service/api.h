/*
 * api.h - the routes of `pdbsym serve` without the HTTP plumbing: a request
 * (method, path, body) in, a response (status, JSON body, headers) out.
 * http.c owns the sockets, limits on the wire and the request id; api.c
 * owns the JSON in and out (jansson, inside server/service/ only: this
 * header names no jansson type) and the calls into the engine.
 *
 *   POST /symbolicate                        frames in, answered frames out
 *   POST /symbolicate/v5                     Mozilla's symbolication API v5 (CORS)
 *   GET  /modules/{debug_file}/{debug_id}    what the cache knows of a module
 *   POST /traces                             a .nettrace in, its samples symbolicated
 *                                            (http.c streams it into engine/trace.h)
 *   GET  /profiles                           the processes profiled, the windows kept
 *   GET  /profiles/latest?pid=N&format=F     a process's newest window (profiles.c)
 *   GET  /health, GET /ready, GET /metrics
 *
 * Thread safety: api_handle may run on many threads at once.
 */
#ifndef PDBSYM_API_H
#define PDBSYM_API_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "engine.h"
#include "profile.h"
#include "reqmem.h"

/* The routes (the request log and the metrics count by route). */
typedef enum {
  RT_SYMBOLICATE = 0,
  RT_SYMBOLICATE_V5,
  RT_MODULES,
  RT_HEALTH,
  RT_READY,
  RT_METRICS,
  RT_TRACES,
  RT_PROFILES,        /* GET /profiles */
  RT_PROFILES_LATEST, /* GET /profiles/latest */
  RT_OTHER,
  RT__COUNT
} api_route_id;

/* A frame's status in an answer (docs/contract.md, "One answered frame"). */
typedef enum {
  FS_OK = 0,
  FS_MISSING_SYMBOLS,
  FS_UNKNOWN_ADDRESS,
  FS_MALFORMED,
  FS_FETCH_ERROR,
  FS_PENDING,
  FS_INVALID,
  FS__COUNT
} frame_status;

/* "ok", "missing_symbols", ...; "invalid" for a value out of range. */
const char *frame_status_name(frame_status s);
/* "/symbolicate", "/modules", ...; "other" for a value out of range. */
const char *api_route_name(api_route_id r);

typedef struct {
  engine *eng;              /* borrowed */
  const srv_config *cfg;    /* borrowed */
  atomic_int draining;      /* set on SIGTERM (main thread), read by request threads: /ready answers 503 */
  prof_manager *profiles;   /* borrowed; the processes profiled (server/profile), may be NULL */
} api;

/* A header the routes add to a response (CORS); name static, value static or
 * in the response's hvalues. */
typedef struct {
  const char *name;
  const char *value;
} api_header;

#define API_MAX_HEADERS 8

typedef struct {
  unsigned status;
  char *body;               /* malloc'd; the caller owns it (http.c hands it to libmicrohttpd as it is) */
  size_t len;
  size_t charged;           /* bytes of the request memory budget the body holds:
                             * the caller gives them back (rm_release) with it */
  const char *content_type; /* static */
  const char *allow;        /* 405: the Allow header, static; else NULL */
  unsigned retry_after;     /* > 0: a Retry-After header */
  long frames, modules;     /* for the request log; -1 when not applicable */
  api_header headers[API_MAX_HEADERS]; /* more headers for the HTTP layer to send */
  int nheaders;
  char hvalues[320];        /* storage for header values that are not static */
  size_t hused;
  bool file;                /* the body is file_len bytes of file_fd (owned), not body */
  int file_fd;
  uint64_t file_len;
} api_response;

typedef enum { API_MATCH_OK = 0, API_NOT_FOUND, API_BAD_METHOD, API_PREFLIGHT } api_match;

/* Which route a request goes to, decided from the request line alone so that
 * the HTTP layer can refuse it before reading a body.  *allow is set for
 * API_BAD_METHOD.  API_PREFLIGHT: an OPTIONS request on a route browsers may
 * call from other origins (/symbolicate/v5), for api_preflight. */
api_match api_route(const char *method, const char *path, api_route_id *route, const char **allow);

/* CORS (api.md, "Browsers"): answers an OPTIONS request on a route
 * api_route matched as API_PREFLIGHT.  origin is the Origin header and
 * private_network the Access-Control-Request-Private-Network header (both
 * NULL when absent).  204 with Access-Control-Allow-Methods, -Headers and
 * -Max-Age for an allowed origin; 403 naming cors_origins for another. */
void api_preflight(const api *a, api_route_id route, const char *origin,
                   const char *private_network, api_response *out);

/* CORS on every response of a request: adds Access-Control-Allow-Origin
 * (and Vary, Access-Control-Expose-Headers) to out when route takes
 * cross-origin requests and origin (the Origin header, may be NULL) is
 * allowed by cors_origins.  The HTTP layer calls it for every response of
 * the route, errors included, so that a page can read why it was refused. */
void api_cors(const api *a, api_route_id route, const char *origin, api_response *out);

/* Checks the settings only the routes read (cors_origins, the v5 limits);
 * false with a message in err naming the setting. */
bool api_check_config(const srv_config *cfg, char *err, size_t cap);
/* Whether val is a cors_origins value (the settings' check of it); false
 * with what is allowed in why. */
bool api_check_origins(const char *val, char *why, size_t cap);

/* Routes whose requests count toward max_inflight (they may wait on the engine). */
bool api_route_heavy(api_route_id r);
/* Routes that take a request body. */
bool api_route_has_body(api_route_id r);

/* Answers one request whose route api_route accepted. */
void api_handle(api *a, api_route_id route, const char *path, const char *query_format,
                const char *body, size_t len, api_response *out);

/* api_handle for a request whose body is in a buffer of the request memory
 * budget (body is freed, and its reservation given back, as soon as it is
 * parsed), whose other buffers draw on grant (reqmem.h), and that arrived at
 * received_ms (engine_now_ms): the request's timeout counts from then, time
 * spent waiting for a worker included.  The answer's body leaves the grant
 * with its reservation (out->charged). */
void api_handle_owned(api *a, api_route_id route, const char *path, const char *query_format,
                      rm_buf *body, rm_grant *grant, uint64_t received_ms, api_response *out);

/* Routes whose small requests the event loop may answer itself
 * (api_handle_hot): /symbolicate and /symbolicate/v5. */
bool api_route_inline(api_route_id r);

/* On the event loop (http.c), for a request of an api_route_inline route
 * whose body (borrowed: not freed) is at most inline_max_bytes: parses it
 * and, when every module it names is answered from memory at once
 * (engine_resolve_hot: no download, no SQLite, no file, no wait), answers it
 * in out as api_handle_owned would, byte for byte, and returns true.  A
 * body that does not parse is answered too (its 400 needs nothing more).
 * false (out empty, nothing held) when a module needs more, or while
 * draining: the request then goes to a worker as before. */
bool api_handle_hot(api *a, api_route_id route, const rm_buf *body, rm_grant *grant,
                    uint64_t received_ms, api_response *out);

/* GET /profiles (?pid=N) and GET /profiles/latest?pid=N&format=F
 * (profiles.c): pid and format are the query's values, or NULL. */
void api_profiles(api *a, api_route_id route, const char *pid, const char *format,
                  api_response *out);

/* A JSON error response {"error": msg, "field": field?}; field may be NULL. */
void api_error(api_response *out, unsigned status, const char *msg, const char *field);

#endif
