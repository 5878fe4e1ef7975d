/*
 * http.c - libmicrohttpd plumbing for `pdbsym serve`: routing decisions that
 * need only the request line (404, 405), limits on the wire (413 for bodies,
 * 503 for too many requests in flight, two Content-Length headers), the
 * request id, the request log and the metrics of every request.  The routes
 * themselves are in api.c.  See http.h for the thread model.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "log.h"
#include "metrics.h"
#include "trace.h"

struct http_server {
  struct MHD_Daemon *d;
  api *a;
  const srv_config *cfg;
  unsigned port;
  _Atomic long active; /* requests begun and not yet completed (all routes) */
};

typedef struct {
  api_route_id route;
  bool heavy_counted;   /* counted in the metrics' in-flight gauge */
  bool answered;        /* a response was queued */
  bool too_large;
  uint64_t discarded;   /* body bytes thrown away after the cap */
  unsigned status;
  char *body;
  size_t len, cap;
  uint64_t start_ns;
  char request_id[72];
  char method[16];
  char path[256];
  long frames, modules;
  /* POST /traces: the body goes straight into a trace job */
  trace_job *job;
  bool trace_counted, trace_failed;
  uint64_t trace_bytes;
  ps_diag trace_diag;
} req_ctx;

static _Atomic long heavy_inflight;
static _Atomic long trace_jobs;
static _Atomic uint64_t id_counter;
static uint64_t id_seed;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool id_char_ok(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '-' || c == '_' || c == '.' || c == ':';
}

/* The client's X-Request-Id when it is 1..64 safe characters, else ours. */
static void make_request_id(struct MHD_Connection *c, char *out, size_t cap) {
  const char *given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
  if (given) {
    size_t n = strlen(given);
    bool ok = n > 0 && n <= 64;
    for (size_t i = 0; ok && i < n; i++)
      ok = id_char_ok(given[i]);
    if (ok) {
      snprintf(out, cap, "%s", given);
      return;
    }
  }
  uint64_t n = atomic_fetch_add(&id_counter, 1) + 1;
  snprintf(out, cap, "%08llx-%08llx", (unsigned long long)(id_seed & 0xffffffffu),
           (unsigned long long)n);
}

/* ---- Content-Length headers ------------------------------------------------ */

typedef struct {
  int count;
  bool differ;
  char first[32];
} cl_scan;

static enum MHD_Result scan_cl(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  (void)kind;
  cl_scan *s = cls;
  if (strcasecmp(key, "Content-Length"))
    return MHD_YES;
  if (s->count++ == 0)
    snprintf(s->first, sizeof s->first, "%s", value ? value : "");
  else if (strcmp(s->first, value ? value : ""))
    s->differ = true;
  return MHD_YES;
}

/* ---- responses -------------------------------------------------------------- */

static enum MHD_Result send_response(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                                     api_response *ar) {
  /* the answer's buffer goes to libmicrohttpd as it is, which frees it */
  struct MHD_Response *resp =
      ar->body ? MHD_create_response_from_buffer(ar->len, ar->body, MHD_RESPMEM_MUST_FREE)
               : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!resp)
    free(ar->body);
  ar->body = NULL;
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, "Content-Type",
                          ar->content_type ? ar->content_type : "application/json");
  MHD_add_response_header(resp, "X-Request-Id", r->request_id);
  if (ar->allow)
    MHD_add_response_header(resp, "Allow", ar->allow);
  /* CORS on every response of a route browsers call (errors too, so that a
   * page can read why), then the headers the route asked for */
  api_cors(srv->a, r->route, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"), ar);
  for (int i = 0; i < ar->nheaders; i++)
    MHD_add_response_header(resp, ar->headers[i].name, ar->headers[i].value);
  if (ar->retry_after) {
    char v[24];
    snprintf(v, sizeof v, "%u", ar->retry_after);
    MHD_add_response_header(resp, "Retry-After", v);
  }
  if (srv->a->draining || r->too_large)
    MHD_add_response_header(resp, "Connection", "close");
  r->status = ar->status;
  r->answered = true;
  r->frames = ar->frames;
  r->modules = ar->modules;
  enum MHD_Result ret = MHD_queue_response(c, ar->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result send_error(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                                  unsigned status, const char *msg, const char *field) {
  api_response ar;
  memset(&ar, 0, sizeof ar);
  ar.frames = ar.modules = -1;
  api_error(&ar, status, msg, field);
  if (status == 503)
    ar.retry_after = (unsigned)srv->cfg->retry_after;
  return send_response(srv, c, r, &ar);
}

/* ---- the access handler ------------------------------------------------------- */

/* POST /traces has its own body cap: a trace is read as it comes, never held */
static uint64_t body_cap(http_server *srv, const req_ctx *r) {
  return r->route == RT_TRACES ? srv->cfg->max_trace_bytes : srv->cfg->max_body_bytes;
}

static const char *body_cap_name(const req_ctx *r) {
  return r->route == RT_TRACES ? "max_trace_bytes" : "max_body_bytes";
}

static enum MHD_Result first_call(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                                  const char *url, const char *method) {
  const char *allow = NULL;
  api_match m = api_route(method, url, &r->route, &allow);
  if (m == API_NOT_FOUND)
    return send_error(srv, c, r, 404, "no such route", NULL);
  if (m == API_PREFLIGHT) {
    api_response ar;
    api_preflight(srv->a, r->route, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"),
                  MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                              "Access-Control-Request-Private-Network"),
                  &ar);
    return send_response(srv, c, r, &ar);
  }
  if (m == API_BAD_METHOD) {
    api_response ar;
    memset(&ar, 0, sizeof ar);
    ar.frames = ar.modules = -1;
    char msg[96];
    snprintf(msg, sizeof msg, "method %s not allowed; use %s", method, allow);
    api_error(&ar, 405, msg, NULL);
    ar.allow = allow;
    return send_response(srv, c, r, &ar);
  }
  cl_scan cl = {0, false, ""};
  MHD_get_connection_values(c, MHD_HEADER_KIND, scan_cl, &cl);
  if (cl.differ)
    return send_error(srv, c, r, 400, "conflicting Content-Length headers", NULL);
  if (cl.count) {
    char *end;
    unsigned long long n = strtoull(cl.first, &end, 10);
    if (n > body_cap(srv, r)) {
      r->too_large = true;
      char msg[128];
      snprintf(msg, sizeof msg, "request body larger than %s = %llu", body_cap_name(r),
               (unsigned long long)body_cap(srv, r));
      return send_error(srv, c, r, 413, msg, NULL);
    }
  }
  if (api_route_heavy(r->route)) {
    long now = atomic_fetch_add(&heavy_inflight, 1) + 1;
    r->heavy_counted = true;
    mt_inflight_add(1);
    if ((uint64_t)now > srv->cfg->max_inflight) {
      char msg[128];
      snprintf(msg, sizeof msg, "too many requests in flight (max_inflight = %llu)",
               (unsigned long long)srv->cfg->max_inflight);
      return send_error(srv, c, r, 503, msg, NULL);
    }
  }
  if (r->route == RT_TRACES) {
    long now = atomic_fetch_add(&trace_jobs, 1) + 1;
    r->trace_counted = true;
    if ((uint64_t)now > srv->cfg->max_trace_jobs) {
      char msg[128];
      snprintf(msg, sizeof msg, "too many traces in flight (max_trace_jobs = %llu)",
               (unsigned long long)srv->cfg->max_trace_jobs);
      return send_error(srv, c, r, 503, msg, NULL);
    }
    const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
    trace_format tf;
    if (fmt && !trace_format_parse(fmt, &tf))
      return send_error(srv, c, r, 400, "format must be speedscope, pprof or top", "format");
  }
  return MHD_YES;
}

/* ---- POST /traces ------------------------------------------------------------ */

static ps_err to_fd(void *ctx, const void *data, size_t len) {
  int fd = *(int *)ctx;
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return PS_E_IO;
    p += n;
    len -= (size_t)n;
  }
  return PS_E_OK;
}

/* a body chunk: into the job (opened on the first one) */
static void trace_chunk(http_server *srv, req_ctx *r, const char *data, size_t n) {
  if (r->trace_failed)
    return;
  if (!r->job) {
    trace_options o;
    memset(&o, 0, sizeof o);
    o.stack_budget = (size_t)srv->cfg->trace_stack_budget;
    o.code_budget = (size_t)srv->cfg->trace_code_budget;
    o.spill_dir = srv->cfg->trace_spill_dir[0] ? srv->cfg->trace_spill_dir : NULL;
    o.name = "trace.nettrace";
    ps_diag_clear(&r->trace_diag);
    if (trace_job_open(&o, &r->job, &r->trace_diag) != PS_E_OK) {
      r->trace_failed = true;
      return;
    }
  }
  if (trace_job_feed(r->job, (const uint8_t *)data, n, &r->trace_diag) != PS_E_OK)
    r->trace_failed = true;
}

static enum MHD_Result trace_answer(http_server *srv, struct MHD_Connection *c, req_ctx *r) {
  char msg[320];
  if (!r->job && !r->trace_failed) {
    ps_diag_clear(&r->trace_diag);
    trace_chunk(srv, r, "", 0); /* an empty body: open the job so that it says why */
  }
  if (!r->trace_failed) {
    /* the modules' downloads wait at most ?timeout= (or default_timeout) seconds */
    uint64_t timeout = srv->cfg->default_timeout;
    const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeout");
    if (t) {
      char *end;
      unsigned long long v = strtoull(t, &end, 10);
      if (*t && !*end && v <= srv->cfg->max_timeout)
        timeout = v;
    }
    trace_job_set_deadline(r->job, engine_now_ms() + timeout * 1000);
    if (trace_job_finish(r->job, srv->a->eng, NULL, NULL, &r->trace_diag) != PS_E_OK)
      r->trace_failed = true;
  }
  if (r->trace_failed) {
    unsigned status = r->trace_diag.code == PS_E_IO || r->trace_diag.code == PS_E_NOMEM ? 500
                                                                                        : 400;
    ps_diag_format(&r->trace_diag, msg, sizeof msg);
    return send_error(srv, c, r, status, msg, NULL);
  }
  const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
  trace_format tf = TRACE_SPEEDSCOPE;
  if (fmt)
    trace_format_parse(fmt, &tf);
  /* the answer goes to an unlinked file, then streams from it */
  const char *dir = srv->cfg->trace_spill_dir[0] ? srv->cfg->trace_spill_dir : getenv("TMPDIR");
  char path[1200];
  snprintf(path, sizeof path, "%s/pdbsym-answer-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0)
    return send_error(srv, c, r, 500, "cannot create the answer file", NULL);
  unlink(path);
  ps_err e = trace_job_write(r->job, tf, to_fd, &fd, &r->trace_diag);
  off_t size = lseek(fd, 0, SEEK_CUR);
  if (e != PS_E_OK || size < 0 || lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    ps_diag_format(&r->trace_diag, msg, sizeof msg);
    return send_error(srv, c, r, 500, msg, NULL);
  }
  const trace_stats *st = trace_job_stats(r->job);
  r->frames = (long)st->samples;
  r->modules = (long)st->modules_needed;
  trace_job_close(r->job);
  r->job = NULL;
  struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)size, fd);
  if (!resp) {
    close(fd);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type",
                          tf == TRACE_PPROF ? "application/octet-stream"
                          : tf == TRACE_TOP ? "text/plain; charset=utf-8"
                                            : "application/json");
  MHD_add_response_header(resp, "X-Request-Id", r->request_id);
  if (srv->a->draining)
    MHD_add_response_header(resp, "Connection", "close");
  r->status = 200;
  r->answered = true;
  enum MHD_Result ret = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return ret;
}



static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  (void)version;
  http_server *srv = cls;
  req_ctx *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r)
      return MHD_NO;
    *con_cls = r;
    atomic_fetch_add(&srv->active, 1);
    r->start_ns = now_ns();
    r->frames = r->modules = -1;
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", url);
    make_request_id(c, r->request_id, sizeof r->request_id);
    return first_call(srv, c, r, url, method);
  }
  if (r->answered) {
    *upload_data_size = 0; /* discard the rest of a refused body */
    return MHD_YES;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (r->too_large) {
      /* a body that keeps coming long after the cap: stop reading it (the
       * 413 can only be sent once the body ends) */
      r->discarded += n;
      return r->discarded > body_cap(srv, r) ? MHD_NO : MHD_YES;
    }
    if (r->route == RT_TRACES) { /* streamed into the trace job, never buffered */
      r->trace_bytes += n;
      if (r->trace_bytes > srv->cfg->max_trace_bytes) {
        r->too_large = true;
        return MHD_YES;
      }
      trace_chunk(srv, r, upload_data, n);
      return MHD_YES;
    }
    if (!api_route_has_body(r->route) && r->len + n > 0) {
      /* a GET with a body: ignore it */
      return MHD_YES;
    }
    if (r->len + n > srv->cfg->max_body_bytes) {
      r->too_large = true;
      free(r->body);
      r->body = NULL;
      r->len = r->cap = 0;
      return MHD_YES;
    }
    if (r->len + n > r->cap) {
      size_t ncap = r->cap ? r->cap : 4096;
      while (ncap < r->len + n)
        ncap *= 2;
      if (ncap > srv->cfg->max_body_bytes)
        ncap = (size_t)srv->cfg->max_body_bytes;
      char *p = realloc(r->body, ncap);
      if (!p)
        return MHD_NO;
      r->body = p;
      r->cap = ncap;
    }
    memcpy(r->body + r->len, upload_data, n);
    r->len += n;
    return MHD_YES;
  }
  /* the whole request is in */
  if (r->too_large) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body larger than %s = %llu", body_cap_name(r),
             (unsigned long long)body_cap(srv, r));
    return send_error(srv, c, r, 413, msg, NULL);
  }
  if (r->route == RT_TRACES) {
    enum MHD_Result ret = trace_answer(srv, c, r);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)srv->cfg->connection_timeout);
    return ret;
  }
  const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
  api_response ar;
  api_handle(srv->a, r->route, url, fmt, r->body, r->len, &ar);
  /* the engine may have kept us long: restart the idle clock for the reply */
  MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                            (unsigned int)srv->cfg->connection_timeout);
  return send_response(srv, c, r, &ar);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)c;
  http_server *srv = cls;
  req_ctx *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  double secs = (double)(now_ns() - r->start_ns) / 1e9;
  unsigned status = r->answered ? r->status : 0;
  if (r->heavy_counted) {
    atomic_fetch_sub(&heavy_inflight, 1);
    mt_inflight_add(-1);
  }
  if (r->trace_counted)
    atomic_fetch_sub(&trace_jobs, 1);
  trace_job_close(r->job);
  mt_request_done(r->route, status, secs);
  log_line l;
  log_begin(&l, status >= 500 || !r->answered ? LOG_WARN : LOG_INFO, "request");
  log_str(&l, "request_id", r->request_id);
  log_str(&l, "method", r->method);
  log_str(&l, "path", r->path);
  log_int(&l, "status", (long long)status);
  log_num(&l, "duration_ms", secs * 1000.0);
  if (r->frames >= 0)
    log_int(&l, "frames", r->frames);
  if (r->modules >= 0)
    log_int(&l, "modules", r->modules);
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    static const char *const why[] = {"completed", "error", "timeout", "daemon shutdown",
                                      "read error", "client abort"};
    log_str(&l, "terminated", (unsigned)toe < 6 ? why[toe] : "other");
  }
  log_end(&l);
  free(r->body);
  free(r);
  atomic_fetch_sub(&srv->active, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  log_line l;
  log_begin(&l, LOG_WARN, "libmicrohttpd");
  log_str(&l, "detail", msg);
  log_end(&l);
}

/* ---- start and stop ---------------------------------------------------------- */

static bool parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len,
                         char *err, size_t cap) {
  char host[256];
  const char *colon = strrchr(listen, ':');
  if (!colon || colon == listen || !colon[1]) {
    snprintf(err, cap, "listen: '%s' is not HOST:PORT", listen);
    return false;
  }
  size_t hl = (size_t)(colon - listen);
  if (listen[0] == '[' && hl >= 2 && listen[hl - 1] == ']') {
    listen++;
    hl -= 2;
  }
  if (hl >= sizeof host) {
    snprintf(err, cap, "listen: host too long");
    return false;
  }
  memcpy(host, listen, hl);
  host[hl] = '\0';
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
  if (rc || !res) {
    snprintf(err, cap, "listen: '%s': %s", listen, gai_strerror(rc));
    return false;
  }
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

http_server *http_start(api *a, const srv_config *cfg, char *err, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t sl;
  if (!parse_listen(cfg->listen, &ss, &sl, err, cap))
    return NULL;
  http_server *srv = calloc(1, sizeof *srv);
  if (!srv) {
    snprintf(err, cap, "out of memory");
    return NULL;
  }
  srv->a = a;
  srv->cfg = cfg;
  id_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16) ^ now_ns();
  unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                       MHD_USE_ITC | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  uint16_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port);
  srv->d = MHD_start_daemon(
      flags, port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->connection_timeout,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->max_connections,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
  if (!srv->d) {
    snprintf(err, cap, "cannot listen on %s", cfg->listen);
    free(srv);
    return NULL;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = di ? di->port : port;
  return srv;
}

unsigned http_port(const http_server *s) { return s->port; }

const char *http_mhd_version(void) { return MHD_get_version(); }

void http_stop(http_server *s, unsigned grace_s) {
  if (!s)
    return;
  /* stop accepting, and close the listening socket now so that new
   * connections are refused instead of waiting in the backlog */
  MHD_socket ls = MHD_quiesce_daemon(s->d);
  if (ls != MHD_INVALID_SOCKET)
    close(ls);
  uint64_t until = now_ns() + (uint64_t)grace_s * 1000000000u;
  while (atomic_load(&s->active) > 0 && now_ns() < until) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  long left = atomic_load(&s->active);
  if (left > 0) {
    /* a request waiting for a download (up to max_timeout) would hold
     * MHD_stop_daemon, which joins its thread, until its deadline */
    engine_drain(s->a->eng);
    log_line l;
    log_begin(&l, LOG_WARN, "shutdown grace over, closing requests still in flight");
    log_int(&l, "requests", left);
    log_end(&l);
  }
  MHD_stop_daemon(s->d);
  free(s);
}
