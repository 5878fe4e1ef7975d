/*
 * http.c - libmicrohttpd plumbing for `pdbsym serve`: the event loop, the
 * connection limits and deadlines (through conns.h), the requests that run on
 * the worker pool (workers.h), and the checks that need only the request
 * line and headers: Host (403), route (404, 405; an OPTIONS preflight of
 * /symbolicate/v5 answered by api_preflight), Content-Type of a body (415),
 * Content-Length (400, 413), requests in flight and the memory budget
 * (503).  Also CORS headers on every answer of a route browsers call
 * (api_cors), the request id, the request log and the metrics of every
 * request, and POST /traces, whose body streams into a trace job instead of
 * a buffer.  The routes themselves are in api.c.  See http.h for the threads.
 *
 * A request's path through this file:
 *   on_connection(STARTED)  conns_add: phase READ, its read deadline starts
 *   on_request, first call  headers complete: the checks above (and a door
 *                           reservation of RM_DOOR_BYTES for a body)
 *   on_request, body calls  the body into a buffer charged to the budget as
 *                           it arrives; refused mid-way: answer_early
 *   on_request, last call   the max_inflight slot and the grant (body_in);
 *                           light route: answered here (phase WRITE);
 *                           heavy route: phase BUSY, connection suspended,
 *                           run_request queued on the workers
 *   run_request (worker)    api_handle, then MHD_resume_connection
 *   on_request, resumed     the answer queued (phase WRITE)
 *
 * POST /traces differs: once admitted its connection is in phase STREAM
 * (not evictable; at least trace_min_rate over every trace_rate_window, at
 * most trace_max_time: conns.h) and a worker takes the trace job at once
 * (run_trace); a job that fails on the bytes it was fed is answered 400 by
 * its worker at once (trace_refuse, answer_early).  The
 * event loop only copies each body chunk into the request's feed buffer
 * (trace_feed_bytes); the worker feeds the buffered bytes to the job
 * (parsing blocks of up to 16 MiB, a few hundred ms each: never on the event
 * loop, which serves /health meanwhile; the job's memory is bounded by its
 * own budgets, not request_memory_max).  When the buffer is full the
 * connection is suspended until the worker has taken it (so the client is
 * read no faster than the trace is parsed).  The last call tells the worker
 * the body is in: it waits for the modules, symbolicates, writes the answer
 * to an unlinked file, which libmicrohttpd then sends from the file.  A
 * trace's request is freed by the last of on_completed and its worker.
 *   on_completed            logged, counted, freed; phase READ again for the
 *                           next request on a kept-alive connection
 *   on_connection(CLOSED)   conns_remove
 */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "conns.h"
#include "log.h"
#include "metrics.h"
#include "reqmem.h"
#include "trace.h"
#include "workers.h"

#define MAX_ALLOWED_HOSTS 32

struct http_server {
  struct MHD_Daemon *d;
  api *a;
  const srv_config *cfg;
  unsigned port;
  conns *ct;
  wpool *wp;
  _Atomic long active;    /* requests begun and not yet completed (all routes) */
  _Atomic long suspended; /* connections waiting for a worker's answer */
  unsigned max_connections; /* in force (the fd limit may lower the setting) */
  char listen_host[256];  /* the host part of `listen`, lower case */
  bool allow_any_host;
  unsigned nallowed;
  char allowed[MAX_ALLOWED_HOSTS][256];
  /* trace_images (issue 26): folders a trace job may read module images from */
  char images_buf[2048];
  const char *images[32];
  size_t nimages;
};

/* trace_images, comma-separated, into srv->images (empty items dropped) */
static void parse_trace_images(http_server *srv, const char *list) {
  snprintf(srv->images_buf, sizeof srv->images_buf, "%s", list);
  srv->nimages = 0;
  char *save = NULL;
  for (char *t = strtok_r(srv->images_buf, ",", &save); t && srv->nimages < 32;
       t = strtok_r(NULL, ",", &save)) {
    while (*t == ' ')
      t++;
    size_t n = strlen(t);
    while (n && t[n - 1] == ' ')
      t[--n] = '\0';
    if (n)
      srv->images[srv->nimages++] = t;
  }
}

typedef struct {
  http_server *srv;
  struct MHD_Connection *c;
  api_route_id route;
  conn_entry *entry;  /* the connection's, in the table (conns.h) */
  _Atomic bool heavy_counted; /* holds a max_inflight slot (and the metrics' gauge) */
  _Atomic bool ip_counted;    /* holds one of its address's max_inflight_per_ip */
  rm_client *client;  /* its address's share (conns_client), NULL: none */
  bool answered;      /* a response was queued (or written early) */
  _Atomic bool early; /* answered before its body was read whole (answer_early) */
  bool counted;       /* counted in the metrics' requests by route and code */
  bool too_large;
  bool close_after;   /* the answer closes the connection */
  bool out_of_memory; /* the body did not fit in the memory budget */
  bool dispatched;    /* handed to a worker */
  bool inlined;       /* answered on the event loop (api_handle_hot) */
  _Atomic bool done;  /* the worker's answer is in ar */
  unsigned status;
  rm_buf body;
  rm_grant grant;     /* the request's share of the memory budget */
  char *url;          /* copy for the worker */
  char *fmt;          /* ?format=, copy for the worker; NULL if absent */
  char *qpid;         /* ?pid= (the /profiles routes), likewise */
  api_response ar;
  uint64_t start_ns;
  uint64_t received_ms; /* engine_now_ms() when the request was complete */
  char request_id[72];
  char method[16];
  char path[256];
  long frames, modules;
  /* POST /traces: the body goes straight into a trace job */
  trace_job *job;
  _Atomic bool trace_counted; /* holds a max_trace_jobs slot */
  bool trace_failed;
  uint64_t trace_bytes;
  ps_diag trace_diag;
  trace_format trace_fmt;
  trace_state trace_state;  /* ?state= (issue 26): which samples the profile keeps */
  bool trace_strict;        /* ?strict=true: any warning about the trace is a 422 */
  uint64_t trace_timeout_s; /* ?timeout=, or default_timeout */
  int answer_fd;            /* the answer's file, once run_trace wrote it; -1: none */
  engine_share *share;      /* the trace's share of the download queue */
  uint64_t answer_size;
  /* the body's bytes on their way from the event loop to the worker: under
   * feed_mu, the loop appends to feed (at most trace_feed_bytes), the
   * worker swaps it for its own empty buffer */
  bool feeding;             /* a worker runs run_trace (from admission on) */
  pthread_mutex_t feed_mu;
  pthread_cond_t feed_cv;
  char *feed, *feed_spare;
  size_t feed_len;
  bool feed_eof;            /* the body is all in feed */
  bool feed_abort;          /* the request is over (client gone, refused): stop */
  bool feed_blocked;        /* the connection is suspended until feed has room */
  bool conn_gone;           /* on_completed ran: the connection may be gone */
  bool paused;              /* (event loop) suspended for room in feed: no rate asked */
  _Atomic int refs;         /* a trace's request: on_completed and the worker */
} req_ctx;

/* Bytes of a trace's body buffered between the event loop and its worker
 * (twice this per trace job: the buffer being filled, the one being fed). */

static _Atomic long heavy_inflight;
static _Atomic long trace_jobs;
static _Atomic uint64_t id_counter;
static uint64_t id_seed;

/* The request's max_inflight and max_trace_jobs slots given back, once
 * (from the event loop or a trace's worker). */
static void release_slots(req_ctx *r) {
  if (atomic_exchange(&r->trace_counted, false))
    atomic_fetch_sub(&trace_jobs, 1);
  if (atomic_exchange(&r->ip_counted, false))
    atomic_fetch_sub(&r->client->slots, 1);
  if (atomic_exchange(&r->heavy_counted, false)) {
    atomic_fetch_sub(&heavy_inflight, 1);
    mt_inflight_add(-1);
  }
}

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

static conn_entry *entry_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* ---- Host and Content-Type ------------------------------------------------- */

/* Lower-cases the host part of a Host header value (or of `listen`) into out:
 * "[::1]:8765" -> "[::1]", "Example.COM.:80" -> "example.com".  false when
 * the value is not a host with an optional port. */
static bool host_part(const char *v, char *out, size_t cap) {
  while (*v == ' ' || *v == '\t')
    v++;
  size_t n = strlen(v);
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  size_t hl;
  if (n && v[0] == '[') {
    const char *rb = memchr(v, ']', n);
    if (!rb)
      return false;
    hl = (size_t)(rb - v) + 1;
  } else {
    const char *colon = memchr(v, ':', n);
    hl = colon ? (size_t)(colon - v) : n;
    if (colon && memchr(colon + 1, ':', n - hl - 1))
      return false; /* an IPv6 address without brackets */
  }
  if (hl < n) { /* a port: ":" and digits */
    if (v[hl] != ':' || hl + 1 == n)
      return false;
    for (size_t i = hl + 1; i < n; i++)
      if (!isdigit((unsigned char)v[i]))
        return false;
  }
  if (hl && v[hl - 1] == '.' && v[0] != '[')
    hl--; /* "localhost." is "localhost" */
  if (!hl || hl >= cap)
    return false;
  for (size_t i = 0; i < hl; i++)
    out[i] = (char)tolower((unsigned char)v[i]);
  out[hl] = '\0';
  return true;
}

/* A Host that a DNS-rebinding page cannot send: an IP literal (a rebinding
 * page's requests carry its own domain name, never an address), localhost,
 * the listen address's host, or a name in allowed_hosts. */
static bool host_allowed(const http_server *srv, const char *value) {
  if (srv->allow_any_host)
    return true;
  char h[256];
  if (!host_part(value, h, sizeof h))
    return false;
  unsigned char buf[16];
  if (h[0] == '[') {
    char inner[256];
    size_t n = strlen(h);
    memcpy(inner, h + 1, n - 2);
    inner[n - 2] = '\0';
    return inet_pton(AF_INET6, inner, buf) == 1;
  }
  if (inet_pton(AF_INET, h, buf) == 1 || !strcmp(h, "localhost") || !strcmp(h, srv->listen_host))
    return true;
  for (unsigned i = 0; i < srv->nallowed; i++)
    if (!strcmp(h, srv->allowed[i]))
      return true;
  return false;
}

/* Whether a Content-Type value's media type is `want`, any case, with or
 * without parameters. */
static bool media_type_is(const char *ct, const char *want) {
  if (!ct)
    return false;
  while (*ct == ' ' || *ct == '\t')
    ct++;
  size_t n = strlen(want);
  if (strncasecmp(ct, want, n))
    return false;
  char next = ct[n];
  return next == '\0' || next == ';' || next == ' ' || next == '\t';
}

/* A type a web page on any origin may POST without a CORS preflight (the
 * Fetch standard's CORS-safelisted Content-Type values). */
static bool cors_simple_type(const char *ct) {
  return media_type_is(ct, "text/plain") || media_type_is(ct, "application/x-www-form-urlencoded") ||
         media_type_is(ct, "multipart/form-data");
}

/* The body's declared type, by route (api.md, "Errors", 415):
 *   /symbolicate   application/json, so that a web page's form or text/plain
 *                  POST, which browsers send to any origin without asking,
 *                  cannot drive it;
 *   /symbolicate/v5 application/json, or text/plain or none: the Firefox
 *                  Profiler sends its v5 requests with no type (the browser
 *                  then says text/plain), a CORS-simple request; v5 is meant
 *                  for pages on other origins, and its answers are readable
 *                  by them anyway (cors_origins);
 *   /traces        a type given, and not one of the CORS-simple ones (a trace
 *                  is binary: application/octet-stream).
 * NULL when ct is acceptable, else the 415's message in msg. */
static const char *content_type_refusal(api_route_id route, const char *ct, char *msg, size_t cap) {
  char given[96];
  if (ct)
    snprintf(given, sizeof given, ", not '%.64s'", ct);
  else
    snprintf(given, sizeof given, " is missing");
  if (route == RT_TRACES) {
    if (ct && !cors_simple_type(ct))
      return NULL;
    snprintf(msg, cap,
             "a trace is sent with a Content-Type web pages cannot send without asking "
             "(application/octet-stream)%s",
             ct ? given : ", and it is missing");
    return msg;
  }
  if (media_type_is(ct, "application/json"))
    return NULL;
  if (route == RT_SYMBOLICATE_V5) {
    if (!ct || media_type_is(ct, "text/plain"))
      return NULL;
    snprintf(msg, cap, "the body must be JSON: Content-Type: application/json or text/plain%s",
             given);
    return msg;
  }
  snprintf(msg, cap, "the body must be JSON: Content-Type: application/json%s", given);
  return msg;
}

/* ---- Content-Length headers ------------------------------------------------ */

typedef struct {
  int count;
  bool differ;
  char first[32];
} cl_scan;

/* A Transfer-Encoding other than chunked: libmicrohttpd 0.9.75 then reads
 * the body until the connection closes and never answers, so the first call
 * refuses it (501).  (A NUL byte in a header cannot be refused here:
 * libmicrohttpd measures every name and value with strlen, so the bytes
 * after it never reach the application - docs/concurrency.md.) */
typedef struct {
  bool bad_coding;
  char coding[64];
} hdr_scan;

static enum MHD_Result scan_hdr(void *cls, enum MHD_ValueKind kind, const char *key,
                                size_t key_size, const char *value, size_t value_size) {
  (void)kind;
  (void)key_size;
  hdr_scan *h = cls;
  if (key && value && !strcasecmp(key, "Transfer-Encoding")) {
    const char *v = value;
    size_t n = value_size;
    while (n && (*v == ' ' || *v == '\t')) {
      v++;
      n--;
    }
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
      n--;
    if (!(n == 7 && !strncasecmp(v, "chunked", 7))) {
      h->bad_coding = true;
      snprintf(h->coding, sizeof h->coding, "%.*s", (int)(n < 40 ? n : 40), v);
    }
  }
  return MHD_YES;
}

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

/* An answer's body while libmicrohttpd sends it: freed, and its share of the
 * memory budget given back, when libmicrohttpd is done with it. */
typedef struct {
  char *body;
  size_t charged;
} sent_body;

static void free_sent_body(void *cls) {
  sent_body *sb = cls;
  rm_release(sb->charged);
  rm_block_free(sb->body, sb->charged); /* kept for the next answer, if large */
  free(sb);
}

static void drop_answer(api_response *ar) {
  if (ar->file) { /* a file answer never sent */
    close(ar->file_fd);
    ar->file = false;
  }
  rm_release(ar->charged);
  rm_block_free(ar->body, ar->charged);
  ar->body = NULL;
  ar->charged = 0;
}

static enum MHD_Result send_response(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                                     api_response *ar) {
  /* the body goes to libmicrohttpd as it is, no copy */
  struct MHD_Response *resp = NULL;
  sent_body *sb = ar->body ? malloc(sizeof *sb) : NULL;
  if (ar->file) { /* the response owns the fd from here, even when it is not made */
    resp = MHD_create_response_from_fd((size_t)ar->file_len, ar->file_fd);
    if (!resp)
      close(ar->file_fd);
    ar->file = false;
    free(sb);
    sb = NULL;
  } else if (sb) {
    sb->body = ar->body;
    sb->charged = ar->charged;
    resp = MHD_create_response_from_buffer_with_free_callback_cls(ar->len, ar->body,
                                                                  free_sent_body, sb);
    if (!resp)
      free(sb);
  } else if (!ar->body) {
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  }
  if (!resp) {
    drop_answer(ar);
    return MHD_NO;
  }
  ar->body = NULL;
  ar->charged = 0;
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
  if (srv->a->draining || r->too_large || r->out_of_memory || r->close_after)
    MHD_add_response_header(resp, "Connection", "close");
  r->status = ar->status;
  r->answered = true;
  r->frames = ar->frames;
  r->modules = ar->modules;
  conns_set_phase(srv->ct, entry_of(c), CONN_WRITE);
  enum MHD_Result ret = MHD_queue_response(c, ar->status, resp);
  MHD_destroy_response(resp);
  if (ret == MHD_YES && !r->counted) {
    r->counted = true;
    mt_request_count(r->route, ar->status);
  }
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

static void memory_refusal_text(const http_server *srv, const req_ctx *r, char *msg, size_t cap) {
  if (r->grant.by_client)
    snprintf(msg, cap,
             "the memory budget of this address's requests in flight is taken "
             "(request_memory_per_ip = %llu)",
             (unsigned long long)srv->cfg->request_memory_per_ip);
  else
    snprintf(msg, cap,
             "the memory budget of requests in flight is taken (request_memory_max = %llu)",
             (unsigned long long)srv->cfg->request_memory_max);
}

static enum MHD_Result send_memory_refusal(http_server *srv, struct MHD_Connection *c,
                                           req_ctx *r) {
  char msg[200];
  memory_refusal_text(srv, r, msg, sizeof msg);
  return send_error(srv, c, r, 503, msg, NULL);
}

/* A max_inflight slot, and one of its address's max_inflight_per_ip, for a
 * request whose body is all in (a trace: at its admission, its body streams
 * into its job); false (msg says why) when either is taken: the caller
 * answers 503.  Held until release_slots. */
static bool take_slot(http_server *srv, req_ctx *r, char *msg, size_t cap) {
  long now = atomic_fetch_add(&heavy_inflight, 1) + 1;
  atomic_store(&r->heavy_counted, true);
  mt_inflight_add(1);
  if ((uint64_t)now > srv->cfg->max_inflight) {
    snprintf(msg, cap, "too many requests in flight (max_inflight = %llu)",
             (unsigned long long)srv->cfg->max_inflight);
    return false;
  }
  if (r->client) {
    uint32_t mine = atomic_fetch_add(&r->client->slots, 1) + 1;
    atomic_store(&r->ip_counted, true);
    if (srv->cfg->max_inflight_per_ip && mine > srv->cfg->max_inflight_per_ip) {
      snprintf(msg, cap, "too many requests from this address in flight (max_inflight_per_ip = %llu)",
               (unsigned long long)srv->cfg->max_inflight_per_ip);
      return false;
    }
  }
  return true;
}

/* ---- answers before the body is read ------------------------------------------- */

static const char *reason_phrase(unsigned status) {
  switch (status) {
  case 400: return "Bad Request";
  case 403: return "Forbidden";
  case 413: return "Content Too Large";
  case 415: return "Unsupported Media Type";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  default: return "Error";
  }
}

/* Answers the request now, before its body is read whole: libmicrohttpd
 * (0.9.75) queues a response only before the body or after its last byte,
 * so a body refused halfway (past its cap, past the memory budget, a trace
 * whose job failed) would otherwise be read to its end - gigabytes, or as
 * long as a dripping client likes - before its error goes out.  The answer
 * (ar: a small JSON error, freed here) is written to the socket whole by
 * conns_answer, which ends the sending side; the connection then lingers
 * (CONNS_LINGER_MS, conns.h) while what the client still sends is dropped
 * (on_request), and libmicrohttpd is never asked to answer it.  On the event
 * loop, or on a trace's worker under feed_mu while conn_gone is false (the
 * connection is still the table's). */
static void answer_early(http_server *srv, req_ctx *r, api_response *ar) {
  char head[512];
  int hn = snprintf(head, sizeof head,
                    "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                    "X-Request-Id: %s\r\nConnection: close\r\n",
                    ar->status, reason_phrase(ar->status), ar->body ? ar->len : 0, r->request_id);
  if (hn > 0 && (size_t)hn < sizeof head && ar->retry_after)
    hn += snprintf(head + hn, sizeof head - (size_t)hn, "Retry-After: %u\r\n", ar->retry_after);
  if (hn > 0 && (size_t)hn + 2 < sizeof head) {
    memcpy(head + hn, "\r\n", 2);
    hn += 2;
    char *all = malloc((size_t)hn + (ar->body ? ar->len : 0));
    if (all) {
      memcpy(all, head, (size_t)hn);
      if (ar->body)
        memcpy(all + hn, ar->body, ar->len);
      conns_answer(srv->ct, r->entry, all, (size_t)hn + (ar->body ? ar->len : 0));
      free(all);
    }
  }
  r->early = true;
  r->answered = true;
  r->status = ar->status;
  r->frames = ar->frames;
  r->modules = ar->modules;
  if (!r->counted) {
    r->counted = true;
    mt_request_count(r->route, ar->status);
  }
  drop_answer(ar);
}

static void early_error(http_server *srv, req_ctx *r, unsigned status, const char *msg) {
  api_response ar;
  memset(&ar, 0, sizeof ar);
  ar.frames = ar.modules = -1;
  api_error(&ar, status, msg, NULL);
  if (status == 503)
    ar.retry_after = (unsigned)srv->cfg->retry_after;
  answer_early(srv, r, &ar);
}

/* ---- the worker side ---------------------------------------------------------- */

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

/* Body bytes: into the job (opened on the first ones).  On the trace's
 * worker (feed_all): the job reads what it can of the blocks they complete. */
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
    o.share = r->share;
    o.state = r->trace_state;
    /* module images (their ReadyToRun maps, their IL) only from trace_images:
     * by file name, or at the path the trace names when it lies there */
    o.image_dirs = srv->images;
    o.nimage_dirs = srv->nimages;
    o.image_roots = srv->images;
    o.nimage_roots = srv->nimages;
    o.max_image_bytes = srv->cfg->trace_image_max_bytes;
    ps_diag_clear(&r->trace_diag);
    if (trace_job_open(&o, &r->job, &r->trace_diag) != PS_E_OK) {
      r->trace_failed = true;
      return;
    }
  }
  if (trace_job_feed(r->job, (const uint8_t *)data, n, &r->trace_diag) != PS_E_OK)
    r->trace_failed = true;
}

/* The trace's job failed on bytes it was fed (not a trace, a damaged one,
 * past its budgets): the rest of the body cannot change that, so the
 * request is answered now, 400 (500 for a local failure), its slots are
 * given back at once, and its connection is closed after a short linger
 * (answer_early) - not read to its end, however long the client goes on
 * sending. */
static void trace_refuse(http_server *srv, req_ctx *r) {
  char msg[320];
  api_response ar;
  memset(&ar, 0, sizeof ar);
  ar.frames = ar.modules = -1;
  unsigned status = r->trace_diag.code == PS_E_IO || r->trace_diag.code == PS_E_NOMEM ? 500 : 400;
  ps_diag_format(&r->trace_diag, msg, sizeof msg);
  api_error(&ar, status, msg, NULL);
  release_slots(r);
  pthread_mutex_lock(&r->feed_mu);
  bool resume = r->feed_blocked;
  r->feed_blocked = false;
  r->feed_abort = true;
  if (!r->conn_gone && !r->answered)
    answer_early(srv, r, &ar);
  else
    drop_answer(&ar);
  pthread_mutex_unlock(&r->feed_mu);
  if (resume) { /* it reads (and drops) the rest until the linger ends */
    MHD_resume_connection(r->c);
    atomic_fetch_sub(&srv->suspended, 1);
  }
}

/* The worker's half of the feed: the buffered body bytes into the job as
 * they come, the connection resumed when it waited for room; true once the
 * body is all in, false when the request is over without it (feed_abort, or
 * the job failed and the request was answered: trace_refuse). */
static bool feed_all(http_server *srv, req_ctx *r) {
  for (;;) {
    pthread_mutex_lock(&r->feed_mu);
    while (!r->feed_len && !r->feed_eof && !r->feed_abort && !r->feed_blocked) {
      /* woken by the loop's every append; the wait itself is bounded by the
       * connection's read deadline (conns.c), which ends the request */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&r->feed_cv, &r->feed_mu, &ts);
    }
    if (r->feed_abort) {
      pthread_mutex_unlock(&r->feed_mu);
      return false;
    }
    char *p = r->feed;
    size_t n = r->feed_len;
    bool eof = r->feed_eof;
    r->feed = r->feed_spare;
    r->feed_spare = NULL;
    r->feed_len = 0;
    bool resume = r->feed_blocked;
    r->feed_blocked = false;
    pthread_mutex_unlock(&r->feed_mu);
    if (resume) { /* suspended by the loop before it set feed_blocked */
      MHD_resume_connection(r->c);
      atomic_fetch_sub(&srv->suspended, 1);
    }
    if (n)
      trace_chunk(srv, r, p, n);
    pthread_mutex_lock(&r->feed_mu);
    r->feed_spare = p; /* empty now, for the next swap */
    pthread_mutex_unlock(&r->feed_mu);
    if (r->trace_failed && !eof) {
      trace_refuse(srv, r);
      return false;
    }
    if (eof && !n)
      return true;
  }
}

static void run_trace(req_ctx *r) {
  http_server *srv = r->srv;
  char msg[320];
  memset(&r->ar, 0, sizeof r->ar);
  r->ar.frames = r->ar.modules = -1;
  if (!r->job && !r->trace_failed) {
    ps_diag_clear(&r->trace_diag);
    trace_chunk(srv, r, "", 0); /* an empty body: open the job so that it says why */
  }
  if (!r->trace_failed) {
    trace_job_set_deadline(r->job, engine_now_ms() + r->trace_timeout_s * 1000);
    if (trace_job_finish(r->job, srv->a->eng, NULL, NULL, &r->trace_diag) != PS_E_OK)
      r->trace_failed = true;
  }
  if (r->trace_failed) {
    unsigned status = r->trace_diag.code == PS_E_IO || r->trace_diag.code == PS_E_NOMEM ? 500
                                                                                        : 400;
    ps_diag_format(&r->trace_diag, msg, sizeof msg);
    api_error(&r->ar, status, msg, NULL);
    return;
  }
  /* a profile that says nothing (no samples, no method named), or with
   * ?strict=true any warning: 422 naming what the trace lacks */
  const char *warning = trace_job_warning(r->job, 0);
  if (warning && (trace_job_useless(r->job) || r->trace_strict)) {
    snprintf(msg, sizeof msg, "%s%s", trace_job_useless(r->job) ? "" : "strict: ", warning);
    api_error(&r->ar, 422, msg, NULL);
    return;
  }
  /* the answer goes to an unlinked file, then streams from it */
  const char *dir = srv->cfg->trace_spill_dir[0] ? srv->cfg->trace_spill_dir : getenv("TMPDIR");
  char path[1200];
  snprintf(path, sizeof path, "%s/pdbsym-answer-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) {
    api_error(&r->ar, 500, "cannot create the answer file", NULL);
    return;
  }
  unlink(path);
  ps_err e = trace_job_write(r->job, r->trace_fmt, to_fd, &fd, &r->trace_diag);
  off_t size = lseek(fd, 0, SEEK_CUR);
  if (e != PS_E_OK || size < 0 || lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    ps_diag_format(&r->trace_diag, msg, sizeof msg);
    api_error(&r->ar, 500, msg, NULL);
    return;
  }
  const trace_stats *st = trace_job_stats(r->job);
  r->frames = (long)st->samples;
  r->modules = (long)st->modules_needed;
  trace_job_close(r->job);
  r->job = NULL;
  r->answer_fd = fd;
  r->answer_size = (uint64_t)size;
}

/* The trace's answer, sent from its file (on the event loop). */
static enum MHD_Result send_trace(http_server *srv, struct MHD_Connection *c, req_ctx *r) {
  struct MHD_Response *resp = MHD_create_response_from_fd(r->answer_size, r->answer_fd);
  if (!resp)
    return MHD_NO; /* the fd is closed by on_completed */
  r->answer_fd = -1; /* the response's now */
  MHD_add_response_header(resp, "Content-Type",
                          r->trace_fmt == TRACE_PPROF ? "application/octet-stream"
                          : r->trace_fmt == TRACE_TOP ? "text/plain; charset=utf-8"
                                                      : "application/json");
  MHD_add_response_header(resp, "X-Request-Id", r->request_id);
  if (srv->a->draining)
    MHD_add_response_header(resp, "Connection", "close");
  r->status = 200;
  r->answered = true;
  conns_set_phase(srv->ct, entry_of(c), CONN_WRITE);
  enum MHD_Result ret = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return ret;
}

static void req_release(http_server *srv, req_ctx *r);

static void run_job(void *arg) {
  req_ctx *r = arg;
  http_server *srv = r->srv;
  if (r->route == RT_TRACES) {
    /* from admission on: the body as it comes, then the answer */
    if (!feed_all(srv, r)) {
      req_release(srv, r); /* over without its body: nothing to answer */
      return;
    }
    run_trace(r);
  } else if (r->route == RT_PROFILES || r->route == RT_PROFILES_LATEST) {
    api_profiles(srv->a, r->route, r->qpid, r->fmt, &r->ar);
  } else {
    /* the body is given back as soon as it is parsed */
    api_handle_owned(srv->a, r->route, r->url, r->fmt, &r->body, &r->grant, r->received_ms,
                     &r->ar);
    rm_buf_free(&r->body);
  }
  /* once resumed, a request other than a trace may be answered and freed
   * at once (a trace's is held by this worker's reference) */
  bool trace = r->route == RT_TRACES;
  if (trace) {
    /* the trace's slot given back before its answer goes out: a client that
     * has read its answer may send the next trace at once */
    trace_job_close(r->job);
    r->job = NULL;
    if (atomic_exchange(&r->trace_counted, false))
      atomic_fetch_sub(&trace_jobs, 1);
  }
  atomic_store(&r->done, true);
  struct MHD_Connection *c = r->c;
  /* the count goes down only after the resume: http_stop waits for zero
   * before it stops the daemon, which must find no connection suspended */
  MHD_resume_connection(c);
  atomic_fetch_sub(&srv->suspended, 1);
  if (trace)
    req_release(srv, r);
}

/* Queues a heavy request on the workers; the connection sleeps meanwhile. */
static enum MHD_Result dispatch(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                                const char *url) {
  const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
  const char *pid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
  r->url = strdup(url);
  r->fmt = fmt ? strdup(fmt) : NULL;
  r->qpid = pid ? strdup(pid) : NULL;
  if (!r->url || (fmt && !r->fmt) || (pid && !r->qpid))
    return send_error(srv, c, r, 500, "out of memory", NULL);
  r->dispatched = true;
  r->received_ms = engine_now_ms();
  conns_set_phase(srv->ct, entry_of(c), CONN_BUSY);
  atomic_fetch_add(&srv->suspended, 1);
  MHD_suspend_connection(c); /* before the job can resume it */
  if (!wp_submit(srv->wp, run_job, r)) {
    /* cannot happen while the queue holds max_inflight jobs; if it does,
     * answer at once */
    MHD_resume_connection(c);
    atomic_fetch_sub(&srv->suspended, 1);
    api_error(&r->ar, 503, "the request workers' queue is full", NULL);
    r->ar.retry_after = (unsigned)srv->cfg->retry_after;
    atomic_store(&r->done, true);
  }
  return MHD_YES;
}

/* ---- the access handler ------------------------------------------------------- */

/* POST /traces has its own body cap: a trace is read as it comes, never held */
static uint64_t body_cap(const http_server *srv, const req_ctx *r) {
  return r->route == RT_TRACES ? srv->cfg->max_trace_bytes : srv->cfg->max_body_bytes;
}

static enum MHD_Result send_too_large(http_server *srv, struct MHD_Connection *c, req_ctx *r) {
  char msg[128];
  snprintf(msg, sizeof msg, "request body larger than %s = %llu",
           r->route == RT_TRACES ? "max_trace_bytes" : "max_body_bytes",
           (unsigned long long)body_cap(srv, r));
  return send_error(srv, c, r, 413, msg, NULL);
}

/* POST /traces, admitted by max_inflight: a trace job slot, its query, and
 * the connection's phase while its body streams in. */
static enum MHD_Result trace_admit(http_server *srv, struct MHD_Connection *c, req_ctx *r) {
  long now = atomic_fetch_add(&trace_jobs, 1) + 1;
  atomic_store(&r->trace_counted, true);
  if ((uint64_t)now > srv->cfg->max_trace_jobs) {
    char msg[128];
    snprintf(msg, sizeof msg, "too many traces in flight (max_trace_jobs = %llu)",
             (unsigned long long)srv->cfg->max_trace_jobs);
    r->close_after = true; /* the body is not read */
    return send_error(srv, c, r, 503, msg, NULL);
  }
  const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
  r->trace_fmt = TRACE_SPEEDSCOPE;
  if (fmt && !trace_format_parse(fmt, &r->trace_fmt)) {
    r->close_after = true;
    return send_error(srv, c, r, 400, "format must be speedscope, pprof or top", "format");
  }
  /* ?state=all|running|waiting, ?strict=true|false (issue 26) */
  const char *state = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "state");
  r->trace_state = TRACE_STATE_ALL;
  if (state && !trace_state_parse(state, &r->trace_state)) {
    r->close_after = true;
    return send_error(srv, c, r, 400, "state must be all, running or waiting", "state");
  }
  const char *strict = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "strict");
  r->trace_strict = strict && (!strcmp(strict, "true") || !strcmp(strict, "1"));
  if (strict && !r->trace_strict && strcmp(strict, "false") && strcmp(strict, "0")) {
    r->close_after = true;
    return send_error(srv, c, r, 400, "strict must be true or false", "strict");
  }
  /* the modules' downloads wait at most ?timeout= (or default_timeout) seconds */
  r->trace_timeout_s = srv->cfg->default_timeout;
  const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeout");
  if (t) {
    char *end;
    unsigned long long v = strtoull(t, &end, 10);
    if (*t && !*end && v <= srv->cfg->max_timeout)
      r->trace_timeout_s = v;
  }
  r->share = engine_share_new(srv->a->eng); /* NULL: none */
  /* the worker that feeds the body to the job, from now on */
  r->feed = malloc((size_t)srv->cfg->trace_feed_bytes);
  r->feed_spare = malloc((size_t)srv->cfg->trace_feed_bytes);
  if (!r->feed || !r->feed_spare) {
    r->close_after = true;
    return send_error(srv, c, r, 500, "out of memory", NULL);
  }
  pthread_mutex_init(&r->feed_mu, NULL);
  pthread_cond_init(&r->feed_cv, NULL);
  r->feeding = true;
  atomic_store(&r->refs, 2);
  if (!wp_submit(srv->wp, run_job, r)) {
    atomic_store(&r->refs, 1); /* no worker holds it */
    r->close_after = true;
    return send_error(srv, c, r, 503, "the request workers' queue is full", NULL);
  }
  /* a long body is fine, a dripping one is not: it must keep arriving at
   * trace_min_rate over every trace_rate_window, and it may take
   * trace_max_time in all (conns.h, CONN_STREAM) */
  conns_set_phase(srv->ct, r->entry, CONN_STREAM);
  return MHD_YES;
}

/* A trace's request is over without its body (client gone, refused): its
 * worker stops waiting for it.  gone: on_completed, after which the
 * connection may be closed (the worker no longer writes to it). */
static void feed_stop(req_ctx *r, bool gone) {
  if (!r->feeding)
    return;
  pthread_mutex_lock(&r->feed_mu);
  r->feed_abort = true;
  if (gone)
    r->conn_gone = true;
  pthread_cond_signal(&r->feed_cv);
  pthread_mutex_unlock(&r->feed_mu);
}

static enum MHD_Result first_call(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                                  const char *url, const char *method) {
  hdr_scan hs;
  memset(&hs, 0, sizeof hs);
  MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_hdr, &hs);
  if (hs.bad_coding) {
    char msg[160];
    snprintf(msg, sizeof msg, "Transfer-Encoding '%s' is not supported (only chunked)", hs.coding);
    r->close_after = true;
    return send_error(srv, c, r, 501, msg, NULL);
  }
  const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
  if (host && !host_allowed(srv, host)) {
    char msg[200];
    snprintf(msg, sizeof msg, "Host '%.64s' is not allowed (see the allowed_hosts setting)", host);
    r->close_after = true;
    return send_error(srv, c, r, 403, msg, NULL);
  }
  const char *allow = NULL;
  api_match m = api_route(method, url, &r->route, &allow);
  if (m == API_NOT_FOUND)
    return send_error(srv, c, r, 404, "no such route", NULL);
  if (m == API_PREFLIGHT) {
    /* a browser asks whether a page on another origin may POST here: the
     * answer needs only the headers, so the event loop gives it */
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
  if (api_route_has_body(r->route)) {
    /* a body must say what it is, so that a web page's form or text/plain
     * POST (which browsers send cross-origin without asking) cannot drive a
     * route not meant for pages (content_type_refusal) */
    char msg[200];
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (content_type_refusal(r->route, ct, msg, sizeof msg)) {
      r->close_after = true; /* the body is not read */
      return send_error(srv, c, r, 415, msg, NULL);
    }
  }
  cl_scan cl = {0, false, ""};
  MHD_get_connection_values(c, MHD_HEADER_KIND, scan_cl, &cl);
  if (cl.differ)
    return send_error(srv, c, r, 400, "conflicting Content-Length headers", NULL);
  unsigned long long clen = 0;
  if (cl.count) {
    char *end;
    clen = strtoull(cl.first, &end, 10);
    if (clen > body_cap(srv, r)) {
      r->too_large = true;
      return send_too_large(srv, c, r);
    }
  }
  if (r->route == RT_TRACES) {
    /* a trace's job takes its body as it comes: its slots from now on */
    char msg[160];
    if (!take_slot(srv, r, msg, sizeof msg)) {
      r->close_after = true; /* its body is not read */
      return send_error(srv, c, r, 503, msg, NULL);
    }
    return trace_admit(srv, c, r);
  }
  if (api_route_has_body(r->route) && clen) {
    /* Nothing is taken from headers alone but a small door reservation
     * (RM_DOOR_BYTES of the body's buffer): the body's buffer grows as its
     * bytes come (never past Content-Length), and the request's grant and
     * max_inflight slot are taken when the body is all in (body_in).  So
     * connections that send headers declaring large bodies, and nothing
     * more, hold a few KiB each until read_timeout, not the budget. */
    r->body.cap = (size_t)clen;
    if (!rm_buf_reserve(&r->body, (size_t)(clen < RM_DOOR_BYTES ? clen : RM_DOOR_BYTES))) {
      r->out_of_memory = true;
      return send_memory_refusal(srv, c, r);
    }
  }
  return MHD_YES;
}

/* A request other than a trace is all in: its max_inflight slot, and a grant
 * of RM_GRANT_FACTOR times its body for the arrays parsed from it and its
 * answer (reqmem.h), so that the requests admitted can finish when many
 * arrive together.  MHD_YES when admitted (then answered by the caller), else
 * the 503 queued. */
static bool body_in(http_server *srv, struct MHD_Connection *c, req_ctx *r,
                    enum MHD_Result *refused) {
  char msg[200];
  if (!take_slot(srv, r, msg, sizeof msg)) {
    *refused = send_error(srv, c, r, 503, msg, NULL);
    return false;
  }
  if (api_route_has_body(r->route) &&
      !rm_grant_reach(&r->grant, (uint64_t)r->body.len * RM_GRANT_FACTOR)) {
    r->out_of_memory = true;
    rm_buf_free(&r->body);
    *refused = send_memory_refusal(srv, c, r);
    return false;
  }
  return true;
}

/* The largest body answered on the event loop: inline_max_bytes, or a
 * quarter of it for v5, whose frames ([i, addr]) take about a quarter of the
 * bytes of /symbolicate's, so that both bound the loop's work at about the
 * same number of frames. */
static uint64_t inline_cap(const http_server *srv, api_route_id route) {
  uint64_t cap = srv->cfg->inline_max_bytes;
  return route == RT_SYMBOLICATE_V5 ? cap / 4 : cap;
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
    atomic_store(&r->refs, 1);
    atomic_fetch_add(&srv->active, 1);
    r->srv = srv;
    r->c = c;
    r->entry = entry_of(c);
    r->client = conns_client(srv->ct, r->entry);
    r->grant.client = r->client;
    r->route = RT_OTHER; /* until api_route says */
    r->answer_fd = -1;
    r->start_ns = now_ns();
    r->frames = r->modules = -1;
    r->body.cap = (size_t)srv->cfg->max_body_bytes;
    r->body.grant = &r->grant;
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", url);
    make_request_id(c, r->request_id, sizeof r->request_id);
    return first_call(srv, c, r, url, method);
  }
  if (r->early) {
    /* answered before its body was read (answer_early): what still comes
     * is dropped until the linger ends; a body that does end closes it now
     * (libmicrohttpd must not answer it a second time) */
    if (!*upload_data_size)
      return MHD_NO;
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (r->route == RT_TRACES) { /* to the worker that feeds the trace job */
      if (r->trace_bytes + n > srv->cfg->max_trace_bytes) {
        /* refused now, not after the rest of a body of any length */
        r->trace_bytes += n;
        release_slots(r);
        pthread_mutex_lock(&r->feed_mu);
        r->feed_abort = true;
        pthread_cond_signal(&r->feed_cv);
        if (!r->answered) {
          char msg[128];
          snprintf(msg, sizeof msg, "request body larger than max_trace_bytes = %llu",
                   (unsigned long long)srv->cfg->max_trace_bytes);
          early_error(srv, r, 413, msg);
        }
        pthread_mutex_unlock(&r->feed_mu);
        return MHD_YES;
      }
      pthread_mutex_lock(&r->feed_mu);
      if (r->feed_abort) {
        /* the worker answered already (trace_refuse), or stopped: drop it */
        bool answered = r->answered;
        pthread_mutex_unlock(&r->feed_mu);
        if (answered)
          r->early = true;
        return MHD_YES;
      }
      size_t room = (size_t)srv->cfg->trace_feed_bytes - r->feed_len, take = n < room ? n : room;
      memcpy(r->feed + r->feed_len, upload_data, take);
      r->feed_len += take;
      pthread_cond_signal(&r->feed_cv);
      pthread_mutex_unlock(&r->feed_mu);
      r->trace_bytes += take;
      conns_stream_bytes(srv->ct, r->entry, take);
      if (r->paused) { /* resumed by the worker: its window starts again */
        r->paused = false;
        conns_stream_pause(srv->ct, r->entry, false);
      }
      if (take < n) {
        /* full: the rest stays with libmicrohttpd, and the connection sleeps
         * until the worker has taken the buffer (it resumes it: suspended
         * before feed_blocked is set, so never resumed before); no rate is
         * asked of the client meanwhile */
        *upload_data_size = n - take;
        r->paused = true;
        conns_stream_pause(srv->ct, r->entry, true);
        atomic_fetch_add(&srv->suspended, 1);
        MHD_suspend_connection(c);
        pthread_mutex_lock(&r->feed_mu);
        bool abort = r->feed_abort;
        if (!abort)
          r->feed_blocked = true;
        pthread_cond_signal(&r->feed_cv);
        pthread_mutex_unlock(&r->feed_mu);
        if (abort) { /* nobody will resume it: at once, and the rest is dropped */
          MHD_resume_connection(c);
          atomic_fetch_sub(&srv->suspended, 1);
        }
      }
      return MHD_YES;
    }
    if (!api_route_has_body(r->route))
      return MHD_YES; /* a GET with a body: ignore it */
    if (!rm_buf_append(&r->body, upload_data, n)) {
      /* refused now, not once the rest of the body has come */
      bool over_cap = r->body.over_cap;
      rm_buf_free(&r->body);
      if (over_cap) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body larger than max_body_bytes = %llu",
                 (unsigned long long)srv->cfg->max_body_bytes);
        early_error(srv, r, 413, msg);
      } else {
        char msg[200];
        memory_refusal_text(srv, r, msg, sizeof msg);
        early_error(srv, r, 503, msg);
      }
    }
    return MHD_YES;
  }
  /* the whole request is in */
  if (r->route == RT_TRACES && r->feeding) {
    pthread_mutex_lock(&r->feed_mu);
    bool answered = r->answered;
    pthread_mutex_unlock(&r->feed_mu);
    if (answered) /* by the worker, before the body ended */
      return MHD_NO;
  }
  if (atomic_load(&r->done)) {
    if (r->answer_fd >= 0)
      return send_trace(srv, c, r);
    return send_response(srv, c, r, &r->ar);
  }
  if (r->dispatched)
    return MHD_YES; /* woken before the answer: keep waiting */
  enum MHD_Result refused;
  if (!r->feeding && api_route_heavy(r->route) && !atomic_load(&r->heavy_counted) &&
      !body_in(srv, c, r, &refused))
    return refused;
  if (r->feeding) {
    /* the trace's worker, feeding it, is told the body is in; it answers */
    r->dispatched = true;
    r->received_ms = engine_now_ms();
    conns_set_phase(srv->ct, entry_of(c), CONN_BUSY);
    atomic_fetch_add(&srv->suspended, 1);
    MHD_suspend_connection(c); /* before the worker can resume it */
    pthread_mutex_lock(&r->feed_mu);
    r->feed_eof = true;
    pthread_cond_signal(&r->feed_cv);
    pthread_mutex_unlock(&r->feed_mu);
    return MHD_YES;
  }
  if (api_route_inline(r->route) && r->body.len <= inline_cap(srv, r->route)) {
    /* a small request whose modules are all in memory: answered here, at
     * once (api_handle_hot never waits), which spares the two thread
     * hand-offs a worker costs; else to a worker as below */
    r->received_ms = engine_now_ms();
    if (api_handle_hot(srv->a, r->route, &r->body, &r->grant, r->received_ms, &r->ar)) {
      rm_buf_free(&r->body);
      r->inlined = true;
      conns_set_phase(srv->ct, entry_of(c), CONN_BUSY);
      return send_response(srv, c, r, &r->ar);
    }
  }
  if (api_route_heavy(r->route))
    return dispatch(srv, c, r, url);
  /* light routes (health, ready, metrics) never wait: answered here, on the
   * event loop, whatever the workers are doing */
  conns_set_phase(srv->ct, entry_of(c), CONN_BUSY);
  const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
  api_handle(srv->a, r->route, url, fmt, r->body.p, r->body.len, &r->ar);
  return send_response(srv, c, r, &r->ar);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  http_server *srv = cls;
  req_ctx *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  double secs = (double)(now_ns() - r->start_ns) / 1e9;
  /* a trace's worker still waiting for the body stops, and no longer
   * writes to the connection (trace_refuse): what it answered is read after */
  feed_stop(r, true);
  unsigned status = r->answered ? r->status : 0;
  release_slots(r);
  if (!r->counted)
    mt_request_count(r->route, status);
  mt_request_time(r->route, secs);
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
  if (r->inlined)
    log_str(&l, "answered_by", "event_loop");
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    static const char *const why[] = {"completed", "error", "timeout", "daemon shutdown",
                                      "read error", "client abort"};
    log_str(&l, "terminated", (unsigned)toe < 6 ? why[toe] : "other");
  }
  log_end(&l);
  /* a kept-alive connection now waits for its next request */
  conns_set_phase(srv->ct, entry_of(c), CONN_READ);
  req_release(srv, r);
}

/* Frees the request once on_completed and (for a trace) its worker are
 * done with it. */
static void req_release(http_server *srv, req_ctx *r) {
  if (atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  release_slots(r);
  trace_job_close(r->job);
  if (r->answer_fd >= 0)
    close(r->answer_fd); /* written, never sent */
  rm_buf_free(&r->body);
  drop_answer(&r->ar); /* an answer never queued */
  rm_grant_end(&r->grant);
  conns_client_put(srv->ct, r->client);
  engine_share_end(srv->a->eng, r->share);
  free(r->url);
  free(r->fmt);
  free(r->qpid);
  if (r->feeding) {
    pthread_mutex_destroy(&r->feed_mu);
    pthread_cond_destroy(&r->feed_cv);
  }
  free(r->feed);
  free(r->feed_spare);
  free(r);
  atomic_fetch_sub(&srv->active, 1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  http_server *srv = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ad ? ad->client_addr : NULL;
    socklen_t sl = sa && sa->sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
                                                   : (socklen_t)sizeof(struct sockaddr_in);
    *socket_context = fd ? conns_add(srv->ct, fd->connect_fd, sa, sl) : NULL;
  } else {
    conns_remove(srv->ct, *socket_context);
    *socket_context = NULL;
  }
}

/* libmicrohttpd's own messages, at most MHD_LOG_PER_S lines a second (the
 * others counted, and the count given with the next line): it has one for
 * every connection that ends badly, and a flood of connections must not
 * become a flood of log lines (the metrics count connections). */
#define MHD_LOG_PER_S 10

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t window_s;
  static unsigned in_window;
  static uint64_t suppressed;
  uint64_t now_s = now_ns() / 1000000000u, held = 0;
  pthread_mutex_lock(&mu);
  if (now_s != window_s) {
    window_s = now_s;
    in_window = 0;
  }
  bool emit = in_window < MHD_LOG_PER_S;
  if (emit) {
    in_window++;
    held = suppressed;
    suppressed = 0;
  } else {
    suppressed++;
  }
  pthread_mutex_unlock(&mu);
  if (!emit)
    return;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  log_line l;
  log_begin(&l, LOG_WARN, "libmicrohttpd");
  log_str(&l, "detail", msg);
  if (held)
    log_int(&l, "suppressed", (long long)held); /* lines left out before this one */
  log_end(&l);
}

/* ---- start and stop ---------------------------------------------------------- */

static bool parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len,
                         char *host_out, size_t host_cap, char *err, size_t cap) {
  char host[256];
  const char *colon = strrchr(listen, ':');
  if (!colon || colon == listen || !colon[1]) {
    snprintf(err, cap, "listen: '%s' is not HOST:PORT", listen);
    return false;
  }
  size_t hl = (size_t)(colon - listen);
  if (!host_part(listen, host_out, host_cap))
    host_out[0] = '\0';
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

static bool parse_allowed_hosts(http_server *srv, const char *list, char *err, size_t cap) {
  const char *p = list;
  while (*p) {
    while (*p == ',' || *p == ' ' || *p == '\t')
      p++;
    size_t n = strcspn(p, ", \t");
    if (!n)
      break;
    if (n == 1 && *p == '*') {
      srv->allow_any_host = true;
    } else {
      char one[256];
      if (n >= sizeof one || srv->nallowed == MAX_ALLOWED_HOSTS) {
        snprintf(err, cap, "allowed_hosts: at most %d names of 255 bytes", MAX_ALLOWED_HOSTS);
        return false;
      }
      memcpy(one, p, n);
      one[n] = '\0';
      if (!host_part(one, srv->allowed[srv->nallowed], sizeof srv->allowed[0]) ||
          strchr(one, ':')) {
        snprintf(err, cap, "allowed_hosts: '%s' is not a host name (no port)", one);
        return false;
      }
      srv->nallowed++;
    }
    p += n;
  }
  return true;
}

/* libmicrohttpd's own limit: room above ours for the connections we have
 * shut down and it has not closed yet. */
static unsigned mhd_limit(unsigned max_connections) {
  unsigned extra = max_connections / 8;
  return max_connections + (extra < 16 ? 16 : extra);
}

/* Every connection is a descriptor: raise the soft limit as far as the hard
 * one allows, and lower max_connections if even that is too few. */
static unsigned fit_fd_limit(unsigned want) {
  const unsigned reserve = 256; /* the cache, downloads, logs, the listener */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return want;
  rlim_t need = (rlim_t)mhd_limit(want) + reserve;
  if (rl.rlim_cur < need) {
    rlim_t cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    struct rlimit nr = {cur, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &nr) == 0)
      rl.rlim_cur = cur;
  }
  if (rl.rlim_cur >= need)
    return want;
  unsigned fit = rl.rlim_cur > reserve + 32 ? (unsigned)((rl.rlim_cur - reserve - 16) * 8 / 9) : 16;
  log_line l;
  log_begin(&l, LOG_WARN, "descriptor limit too low for max_connections; lowered");
  log_int(&l, "max_connections", (long long)want);
  log_int(&l, "in_force", (long long)fit);
  log_int(&l, "rlimit_nofile", (long long)rl.rlim_cur);
  log_end(&l);
  return fit < want ? fit : want;
}

/* For /metrics (mt_set_http_state). */
static void http_state(void *ctx, mt_http_state *out) {
  http_server *s = ctx;
  conns_stats cs;
  conns_get_stats(s->ct, &cs);
  wp_stats ws;
  wp_get_stats(s->wp, &ws);
  out->connections = cs.open;
  out->connections_max = s->max_connections;
  out->evicted = cs.evicted;
  out->refused = cs.refused;
  out->read_expired = cs.read_expired;
  out->write_expired = cs.write_expired;
  out->workers = ws.threads;
  out->workers_busy = ws.running;
  out->queued = ws.queued;
  out->memory_used = rm_used();
  out->memory_peak = rm_peak();
  out->memory_max = rm_max();
  out->memory_refused = rm_refused();
  out->memory_kept = rm_kept();
  out->slow_expired = cs.slow_expired;
  out->answered_early = cs.answered_early;
  out->memory_refused_ip = rm_client_refused();
}

/* A new connection that has sent nothing stays with the kernel for about
 * `secs` (TCP_DEFER_ACCEPT; Linux rounds it up to its SYN-ACK retry times:
 * 1, 3, 7, 15, 31 s): it is accepted when its first bytes arrive, or when
 * the time is up.  Until then it costs no descriptor, no entry in the
 * connection table and no work on the event loop, and it cannot sit in the
 * accept queue ahead of a request that has arrived (docs/concurrency.md,
 * "Connection floods"). */
static void defer_silent_connections(struct MHD_Daemon *d, uint64_t secs) {
  int v = secs > 3600 ? 3600 : (int)secs;
  bool ok = false;
#ifdef TCP_DEFER_ACCEPT
  const union MHD_DaemonInfo *li = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
  ok = li && setsockopt(li->listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof v) == 0;
#else
  (void)d;
#endif
  if (!ok) {
    log_line l;
    log_begin(&l, LOG_WARN,
              "cannot set TCP_DEFER_ACCEPT: silent connections are accepted at once");
    log_int(&l, "defer_accept", (long long)v);
    log_end(&l);
  }
}

http_server *http_start(api *a, const srv_config *cfg, char *err, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t sl;
  http_server *srv = calloc(1, sizeof *srv);
  if (!srv) {
    snprintf(err, cap, "out of memory");
    return NULL;
  }
  if (!parse_listen(cfg->listen, &ss, &sl, srv->listen_host, sizeof srv->listen_host, err, cap) ||
      !parse_allowed_hosts(srv, cfg->allowed_hosts, err, cap)) {
    free(srv);
    return NULL;
  }
  srv->a = a;
  srv->cfg = cfg;
  parse_trace_images(srv, cfg->trace_images);
  id_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16) ^ now_ns();
  rm_set_max(cfg->request_memory_max);
  rm_set_client_max(cfg->request_memory_per_ip);
  rm_keep_set_max(cfg->request_memory_keep);
#ifdef __GLIBC__
  /* Request buffers (bodies, arrays, answers: 100 KiB to MiBs) are mapped
   * and unmapped, so that what the budget gives back leaves the process too
   * (but for the few blocks reqmem keeps for the next requests, which stay
   * in the budget's count: request_memory_keep).  Setting the threshold
   * stops glibc from raising it after the first big free, which would keep
   * every such buffer in its heaps, resident and out of the budget's count.
   * The download workers' parse arrays are the same case: without it
   * bench/soak.py's resident memory grew 2 MiB a minute (36 to 97 MiB in 30
   * minutes) while the bytes malloc had handed out stayed flat, kept free in
   * glibc's 16 arenas. */
  mallopt(M_MMAP_THRESHOLD, RM_KEEP_MIN);
  /* What stays in the heaps is a request's smaller arrays (under 128 KiB
   * each: a frames array growing, a module list).  At glibc's default trim
   * threshold (also 128 KiB) a request whose arrays added up to more had its
   * arena's top handed back with madvise after it, and faulted in again by
   * the next one; the madvise's TLB shootdown across the threads and the
   * faults took a tenth of the server's CPU for 1,000-frame bodies answered
   * on the event loop.  At 256 KiB no page fault is left there; each arena
   * keeps at most that much free at its top (arenas: at most one a thread). */
  mallopt(M_TRIM_THRESHOLD, 2 * RM_KEEP_MIN);
#endif
  srv->max_connections = fit_fd_limit((unsigned)cfg->max_connections);
  if (srv->max_connections <= cfg->max_inflight) {
    log_line l;
    log_begin(&l, LOG_WARN, "max_connections is not above max_inflight: busy requests can take "
                            "every connection, and /health with them");
    log_int(&l, "max_connections", (long long)srv->max_connections);
    log_int(&l, "max_inflight", (long long)cfg->max_inflight);
    log_end(&l);
  }
  conns_config cc = {srv->max_connections, (unsigned)cfg->max_connections_per_ip,
                     cfg->read_timeout * 1000u, cfg->write_timeout * 1000u,
                     cfg->trace_min_rate, cfg->trace_rate_window * 1000u,
                     cfg->trace_max_time * 1000u};
  srv->ct = conns_open(&cc);
  /* every heavy request admitted (max_inflight) fits in the queue */
  srv->wp = wp_start((unsigned)cfg->request_workers, (unsigned)cfg->max_inflight, "pdbsym-req");
  if (!srv->ct || !srv->wp) {
    snprintf(err, cap, "cannot start the connection table or the request workers");
    conns_close(srv->ct);
    wp_stop(srv->wp);
    free(srv);
    return NULL;
  }
  unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                       MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  uint16_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port);
  mt_set_http_state(http_state, srv); /* before the first request */
  srv->d = MHD_start_daemon(
      flags, port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->http_threads,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->connection_timeout,
      MHD_OPTION_CONNECTION_LIMIT, mhd_limit(srv->max_connections),
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
  if (!srv->d) {
    mt_set_http_state(NULL, NULL);
    snprintf(err, cap, "cannot listen on %s", cfg->listen);
    wp_stop(srv->wp);
    conns_close(srv->ct);
    free(srv);
    return NULL;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = di ? di->port : port;
  if (cfg->defer_accept)
    defer_silent_connections(srv->d, cfg->defer_accept);
  return srv;
}

unsigned http_port(const http_server *s) { return s->port; }

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

const char *http_mhd_version(void) { return MHD_get_version(); }

void http_stop(http_server *s, unsigned grace_s, uint64_t budget_ms) {
  if (!s)
    return;
  uint64_t start = now_ns(), grace_ms = (uint64_t)grace_s * 1000u;
  if (grace_ms > budget_ms)
    grace_ms = budget_ms;
  /* stop accepting, and close the listening socket now so that new
   * connections are refused instead of waiting in the backlog */
  MHD_socket ls = MHD_quiesce_daemon(s->d);
  if (ls != MHD_INVALID_SOCKET)
    close(ls);
  uint64_t until = start + grace_ms * 1000000u;
  while (atomic_load(&s->active) > 0 && now_ns() < until)
    sleep_ms(10);
  long left = atomic_load(&s->active);
  if (left > 0) {
    /* requests waiting for a download stop waiting (they answer pending) */
    engine_drain(s->a->eng);
    log_line l;
    log_begin(&l, LOG_WARN, "shutdown grace over, closing requests still in flight");
    log_int(&l, "requests", left);
    log_end(&l);
  }
  /* libmicrohttpd must find no connection suspended when it stops: wait for
   * the workers' answers (after engine_drain they come at once) */
  /* 30 s (fixed) or what the stop budget leaves, at least 1 s: the answers
   * come at once after the drain unless a worker is stuck */
  uint64_t spent_ms = (now_ns() - start) / 1000000u;
  uint64_t worker_grace_ms = budget_ms > spent_ms ? budget_ms - spent_ms : 0;
  if (worker_grace_ms > 30000)
    worker_grace_ms = 30000;
  if (worker_grace_ms < 1000)
    worker_grace_ms = 1000;
  uint64_t waited = 0;
  while (atomic_load(&s->suspended) > 0 && waited < worker_grace_ms) {
    sleep_ms(10);
    waited += 10;
  }
  if (atomic_load(&s->suspended) > 0) {
    log_line l;
    log_begin(&l, LOG_ERROR, "request workers still busy after the drain; exiting");
    log_int(&l, "waited_ms", (long long)waited);
    log_int(&l, "requests", (long long)atomic_load(&s->suspended));
    log_end(&l);
    _exit(1);
  }
  MHD_stop_daemon(s->d);
  mt_set_http_state(NULL, NULL); /* no /metrics after the event loop */
  wp_stop(s->wp);
  conns_close(s->ct);
  free(s);
}
