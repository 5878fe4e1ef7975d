/*
 * fetch.c - the symbol-server client: sources, keys, probing, downloads.
 *
 * server/fetch/ is the only room that includes curl/curl.h.  See fetch.h
 * for the interface and docs/fetch.md for the symbol-path syntax and the
 * probing order.
 *
 * One lookup (fetch_op) of one module:
 *
 *   caller's thread (fetch_op_step)            network thread (net_main)
 *   ------------------------------             -------------------------------------
 *   folder sources, in order: stat, copy       one curl multi handle; per source a
 *     (regular files only) into a .part        queue of probes and at most
 *   HTTP sources: one group of probes per      max_parallel_per_source transfers;
 *     (source, key), in three phases     --->  a probe = one GET (redirects followed
 *     (docs/fetch.md); phase 1 queued          here, checked, headers only to the
 *                                              source's origin), with deadlines,
 *                                              retries after a backoff, caps
 *                                              404 on every probe of a phase -> next
 *                                              phase; file.ptr -> its target
 *   candidates (finished .part files)   <---   200 -> the .part is a candidate;
 *     unpacked (CAB) and verified here         wake(ctx) tells the caller
 *     accepted -> linked to pdbsym-XXXXXX.ext and handed over; the rest cancelled
 *     refused  -> that source is given up
 *
 * Locking: f->mu guards every op, group, probe state and source queue; the
 * network thread holds it except inside curl_multi_poll / curl_multi_perform,
 * whose callbacks touch only their own probe's transfer fields (and take mu
 * briefly to read a source's address classes).  Easy handles are created,
 * driven and freed by the network thread only.
 *
 * Every .part file is unlinked on every path out; their bytes are counted in
 * f->tmp_bytes against the disk budget.
 */
#define _GNU_SOURCE /* SOCK_CLOEXEC */
#include "fetch.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cab.h"
#include "log.h"

#define FETCH_USER_AGENT "pdbsym/" PDBSYM_VERSION
#define FETCH_PTR_MAX 4096 /* a file.ptr larger than this is not one */
#define FETCH_MAX_SOURCES 32
#define FETCH_MAX_BACKOFF_MS 8000L
#define FETCH_RATIO_FLOOR 65536u /* the decoded/encoded ratio is checked past this */
#define FETCH_TICK_MS 250         /* the network thread's longest sleep */
#define FETCH_HEAD 64             /* bytes of a body's head kept to prove its format */

/* Layouts: where a key lives on a store (see docs/fetch.md, "Keys"). */
enum {
  LAY_UPPER,        /* Name/KEY/Name, KEY all upper case (Microsoft's server, symstore for PDBs) */
  LAY_SYMSTORE,     /* Name/Key/Name, symstore.exe's mixed case: image %08X%x, PDB GUID + age %x */
  LAY_LOWER,        /* name/key/name: SSQP lower-cases whole paths */
  LAY_TWO_UPPER,    /* Na/Name/KEY/Name: the index2.txt two-tier layout */
  LAY_TWO_SYMSTORE, /* Na/Name/Key/Name */
  LAY_GIVEN,        /* Name/key/Name, the code id as the caller spelt it (images) */
  NLAYOUTS
};
/* Variants of a file in one layout. */
enum { VAR_FILE, VAR_CAB, VAR_PTR, NVARS, VAR_TARGET = NVARS /* a file.ptr's target */ };

static const bool layout_has[NLAYOUTS][NVARS] = {
    {true, true, true}, {true, true, true}, {true, false, false},
    {true, true, true}, {true, true, true}, {true, false, false}};

static bool layout_two(int l) { return l == LAY_TWO_UPPER || l == LAY_TWO_SYMSTORE; }

/* Address classes (for refuse_private) */
enum { AC_PUBLIC = 0, AC_LOOPBACK = 1, AC_PRIVATE = 2, AC_LINKLOCAL = 4, AC_OTHER = 8 };

typedef struct probe probe;

/* A source's queue is one lane per lookup owner (fetch_op_set_lane: the
 * engine's request), served round-robin, so that one request's many probes
 * do not stand in front of another's; each lane is first in, first out but
 * for later phases, redirects and retries, which go to its front. */
typedef struct lane {
  struct lane *next;
  uint64_t id;
  probe *qhead, *qtail;
} lane;

typedef struct {
  bool http;
  char *base;
  size_t origin_len;            /* "scheme://host[:port]" at the start of base */
  struct curl_slist *headers;
  size_t nheaders;
  /* under f->mu */
  int active;                   /* transfers running */
  lane *lanes;                  /* lanes with probes waiting for a transfer slot */
  lane *cur;                    /* the lane served next (NULL: the first) */
  lane spare_lane;              /* the lane used when a new one cannot be allocated */
  int hit_layout[2], hit_var[2]; /* what answered last, per kind (0 PDB, 1 PE); -1 none */
  st_format hit_format;         /* the PDB key that answered last (UNKNOWN: none yet) */
  int fail_streak;              /* failed transfers in a row (404s are answers, not failures) */
  uint64_t down_until;          /* backing off until then (ms, monotonic) */
  char down_error[160];
  unsigned addr_classes;        /* address classes the source's own origin resolved to */
} fetch_source;

/* The file name and key directory of a module, in each casing. */
typedef struct {
  char name[MODULE_NAME_MAX + 1];
  char upper[48];               /* GUID+age / TIMESTAMP+size, all upper case */
  char mixed[48];               /* symstore.exe's: image %08X%x, PDB GUID upper + age %x */
  char given[48];               /* the caller's spelling (images), "" when none */
  st_format format;             /* the PDB format this key is for (UNKNOWN: image) */
} fetch_key;

/* A temporary file.  Its bytes are counted in f->tmp_bytes as they are
 * written (never a declared length ahead of them), and in f->proved_bytes
 * too once it has proved to be what it claims (tmp_prove): only those ask
 * the cache to evict for them (fetch_tmp_proved_bytes). */
typedef struct {
  char path[1100];
  int fd;
  uint64_t bytes;               /* counted in f->tmp_bytes */
  bool proved;                  /* a whole file, or a head that parsed as its format */
} tmpfile_t;

enum { P_HELD, P_QUEUED, P_RUNNING, P_TIMER, P_DONE };
enum { ABORT_NONE, ABORT_FIRST_BYTE, ABORT_DEADLINE };

struct fetch_op;

struct probe {
  probe *prev, *next;           /* in a source's lane, f->running or f->timers */
  lane *ln;                     /* P_QUEUED: its lane */
  probe *gnext;                 /* all probes of the group */
  struct fetch_op *op;
  int src, key, layout, var, phase;
  int state;
  bool cancel;                  /* P_RUNNING: the network thread is to drop it */
  bool foreign;                 /* url is not on the source's origin: no headers */
  char *url;
  int attempt, redirects;
  uint64_t retry_at;
  struct xfer *x;               /* the transfer, from its first start until the probe is done */
};

/* A probe's transfer (network thread only, but for the .part file, which
 * probe_cancel may drop under f->mu when the probe is not running). */
typedef struct xfer {
  CURL *easy;
  tmpfile_t t;
  uint64_t cap;
  bool over, io_error, disk_full, ratio_over, encoded, html, got_byte;
  uint8_t head[FETCH_HEAD];     /* the body's first bytes, for head_proves */
  size_t nhead;
  bool judged;                  /* head_proves has looked at the head */
  uint64_t claimed;             /* proved by a format that states its size: that size */
  bool cl_seen, cl_conflict;    /* Content-Length headers: one seen; two that differ */
  char cl_first[24];
  uint64_t need;                /* disk_full: the bytes the file needs (declared, or a guess) */
  int io_errno;
  int abort_why;
  uint64_t started;
  curl_off_t length;
  char refused[128];
  char errbuf[CURL_ERROR_SIZE];
} xfer;

typedef struct {
  bool used, open;
  int phase;                    /* released so far (1..3) */
  int live;                     /* probes of its released phase not settled */
  probe *probes;
} group;

/* A source is asked for an op's keys in rounds, one (key, phase) at a time:
 * round i is phase i / nkeys + 1 of the i % nkeys'th key in the source's
 * likeliest order (the key of the format it answered last first), each
 * round released when the one before has settled with misses; the first
 * body a source gives ends its rounds (its file is verified: accepted, or
 * the source is given up). */

typedef struct cand {
  struct cand *next;
  tmpfile_t t;
  int src, key, layout, var;
  bool clean;
  char where[1024];
} cand;

struct fetch_op {
  struct fetcher *f;
  bool image;
  fetch_key keys[2];
  size_t nkeys;
  fetch_wake_fn wake;
  void *wake_ctx;
  /* under f->mu */
  bool armed;                   /* the caller waits for wake */
  bool finished;                /* accepted or freed: everything cancelled */
  bool owner_gone;              /* fetch_op_free was called */
  bool local_done, net_started;
  int running;                  /* probes in P_RUNNING */
  int groups_open;
  group groups[FETCH_MAX_SOURCES][2];
  bool given_up[FETCH_MAX_SOURCES];
  int round[FETCH_MAX_SOURCES]; /* rounds released so far (0: none) */
  int first_key[FETCH_MAX_SOURCES]; /* the key asked first of each source */
  bool failed_on[FETCH_MAX_SOURCES]; /* counted in the source's failure streak once */
  uint64_t lane;                /* its owner's lane in the source queues (0: the common one) */
  cand *cands, *cands_tail;
  uint64_t room_needed;         /* a transfer failed for the disk budget: what it needed */
  ps_diag err;                  /* the most telling failure so far */
  int err_rank;                 /* 0 none, 1 MSG: or a ptr miss, 2 error, 3 refused by verify */
};

struct fetcher {
  char *tmp_dir;                /* where .part files go */
  char *area_dir;               /* the private folder (private_tmp), removed at close */
  int lock_fd;
  bool no_network;
  uint64_t max_download;
  uint64_t max_inflated;
  uint64_t max_ratio;
  long connect_timeout_ms, first_byte_timeout_ms, transfer_timeout_ms;
  uint64_t min_rate;
  long low_speed_time;
  long low_speed_limit;
  int max_retries;
  long retry_base_ms;
  int max_redirects;
  int max_parallel;
  int spare_slots;              /* beyond max_parallel, for new modules while the others are slow */
  uint64_t slow_after_ms;
  long backoff_ms, backoff_max_ms;
  int fail_threshold;
  bool refuse_private;
  fetch_source src[FETCH_MAX_SOURCES];
  size_t nsrc;
  bool any_http;
  pthread_mutex_t mu;
  CURLM *multi;
  pthread_t net;
  bool net_started;
  bool stopping;
  probe *running;               /* transfers in flight */
  probe *timers;                /* probes waiting for their retry */
  int nops;
  _Atomic uint64_t tmp_bytes;
  _Atomic uint64_t proved_bytes; /* of tmp_bytes: files that proved themselves */
  _Atomic uint64_t budget;
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Length of "scheme://host[:port]" at the start of url. */
static size_t origin_len(const char *url) {
  const char *p = strstr(url, "://");
  if (!p)
    return 0;
  p += 3;
  return (size_t)(p - url) + strcspn(p, "/?#");
}

/* ---------------------------------------------------------------- helpers */

static bool has_prefix_nocase(const char *s, const char *p) {
  for (; *p; s++, p++)
    if (tolower((unsigned char)*s) != tolower((unsigned char)*p))
      return false;
  return true;
}

static bool is_http_url(const char *s) {
  return has_prefix_nocase(s, "http://") || has_prefix_nocase(s, "https://");
}

static bool has_ctl(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      return true;
  return false;
}

bool fetch_url_escape(const char *in, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
    bool keep = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~' || *p == '/';
    size_t need = keep ? 1 : 3;
    if (o + need >= cap)
      return false;
    if (keep) {
      out[o++] = (char)*p;
    } else {
      out[o++] = '%';
      out[o++] = hex[*p >> 4];
      out[o++] = hex[*p & 15];
    }
  }
  if (o >= cap)
    return false;
  out[o] = '\0';
  return true;
}

static void str_lower(char *s) {
  for (; *s; s++)
    *s = (char)tolower((unsigned char)*s);
}

/* -------------------------------------------------------- the symbol path */

static bool header_ok(const char *h) {
  const char *colon = strchr(h, ':');
  if (!colon || colon == h || has_ctl(h))
    return false;
  for (const char *p = h; p < colon; p++)
    if (!(isalnum((unsigned char)*p) || strchr("!#$%&'*+-.^_`|~", *p)))
      return false;
  return true;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
  return s;
}

/* Adds a source; spec is "URL-or-folder[|Header: value]...".  extra are the
 * config's headers (HTTP sources only). */
static ps_err add_source(fetcher *f, char *spec, const char *const *extra, ps_diag *diag) {
  char *bar = strchr(spec, '|');
  char *hdrs = NULL;
  if (bar) {
    *bar = '\0';
    hdrs = bar + 1;
  }
  char *base = trim(spec);
  if (!*base)
    base = FETCH_DEFAULT_SERVER;
  if (f->nsrc == FETCH_MAX_SOURCES)
    return ps_diag_set(diag, PS_E_LIMIT, "symbol path", (size_t)-1, "more than %d sources",
                       FETCH_MAX_SOURCES);
  if (has_ctl(base))
    return ps_diag_set(diag, PS_E_INVALID, "symbol path", (size_t)-1,
                       "control character in a source");
  bool http = is_http_url(base);
  if (!http && strstr(base, "://"))
    return ps_diag_set(diag, PS_E_INVALID, "symbol path", (size_t)-1,
                       "only http and https sources are supported: '%.100s'", base);
  if (http && strpbrk(base, " \"<>\\^`{}"))
    return ps_diag_set(diag, PS_E_INVALID, "symbol path", (size_t)-1,
                       "character not allowed in a URL: '%.100s'", base);
  fetch_source *s = &f->src[f->nsrc];
  memset(s, 0, sizeof *s);
  s->http = http;
  s->base = strdup(base);
  if (!s->base)
    return ps_diag_set(diag, PS_E_NOMEM, "symbol path", (size_t)-1, "out of memory");
  size_t n = strlen(s->base);
  while (n > 1 && s->base[n - 1] == '/')
    s->base[--n] = '\0';
  s->hit_layout[0] = s->hit_layout[1] = -1;
  s->hit_format = ST_FORMAT_UNKNOWN;
  s->hit_var[0] = s->hit_var[1] = -1;
  s->origin_len = http ? origin_len(s->base) : 0;
  if (http)
    f->any_http = true;
  f->nsrc++;
  ps_err result = PS_E_OK;
  if (http && extra)
    for (const char *const *h = extra; *h && result == PS_E_OK; h++) {
      if (!header_ok(*h)) {
        result = ps_diag_set(diag, PS_E_INVALID, "headers", (size_t)-1,
                             "bad header (want 'Name: value'): '%.60s'", *h);
        break;
      }
      struct curl_slist *l = curl_slist_append(s->headers, *h);
      if (!l)
        return ps_diag_set(diag, PS_E_NOMEM, "headers", (size_t)-1, "out of memory");
      s->headers = l;
      s->nheaders++;
    }
  while (hdrs && result == PS_E_OK) {
    char *next = strchr(hdrs, '|');
    if (next)
      *next++ = '\0';
    char *h = trim(hdrs);
    if (!http)
      result = ps_diag_set(diag, PS_E_INVALID, "symbol path", (size_t)-1,
                           "headers given for a folder source '%.100s'", base);
    else if (!header_ok(h))
      result = ps_diag_set(diag, PS_E_INVALID, "symbol path", (size_t)-1,
                           "bad header (want 'Name: value') for '%.100s'", base);
    else {
      struct curl_slist *l = curl_slist_append(s->headers, h);
      if (!l)
        return ps_diag_set(diag, PS_E_NOMEM, "headers", (size_t)-1, "out of memory");
      s->headers = l;
      s->nheaders++;
    }
    hdrs = next;
  }
  return result;
}

/* _NT_SYMBOL_PATH semantics, see docs/fetch.md:
 *   srv*UPSTREAM                     UPSTREAM (URL or folder; empty: Microsoft's)
 *   srv*DOWN1*DOWN2*UPSTREAM         DOWN1, DOWN2 read as folders first, never written
 *   symsrv*symsrv.dll*...            as srv*...
 *   cache*FOLDER                     FOLDER read as a folder, never written
 *   URL or FOLDER                    itself
 * elements separated by ';'. */
static ps_err parse_symbol_path(fetcher *f, const char *path, const char *const *extra,
                                ps_diag *diag) {
  char *copy = strdup(path);
  if (!copy)
    return ps_diag_set(diag, PS_E_NOMEM, "symbol path", (size_t)-1, "out of memory");
  ps_err result = PS_E_OK;
  char *save = NULL;
  for (char *el = strtok_r(copy, ";", &save); el && result == PS_E_OK;
       el = strtok_r(NULL, ";", &save)) {
    el = trim(el);
    if (!*el)
      continue;
    char *rest = NULL;
    bool srv = false;
    if (has_prefix_nocase(el, "srv*")) {
      rest = el + 4;
      srv = true;
    } else if (has_prefix_nocase(el, "symsrv*")) {
      rest = strchr(el + 7, '*');
      rest = rest ? rest + 1 : el + strlen(el);
      srv = true;
    } else if (has_prefix_nocase(el, "cache*")) {
      rest = el + 6;
    }
    if (!rest) {
      result = add_source(f, el, extra, diag);
      continue;
    }
    if (!srv) { /* cache*FOLDER[*FOLDER] */
      char *s2 = NULL;
      for (char *d = strtok_r(rest, "*", &s2); d && result == PS_E_OK; d = strtok_r(NULL, "*", &s2))
        if (*trim(d))
          result = add_source(f, d, extra, diag);
      continue;
    }
    /* srv*[down*...]*upstream: the last '*'-part is the upstream, but a URL's
     * own characters never include '*', so splitting is safe. */
    char *parts[16];
    int np = 0;
    char *p = rest;
    for (;;) {
      char *star = strchr(p, '*');
      if (np == 16) {
        result = ps_diag_set(diag, PS_E_INVALID, "symbol path", (size_t)-1,
                             "too many '*' stores in one element");
        break;
      }
      parts[np++] = p;
      if (!star)
        break;
      *star = '\0';
      p = star + 1;
    }
    for (int i = 0; i + 1 < np && result == PS_E_OK; i++)
      if (*trim(parts[i]))
        result = add_source(f, parts[i], NULL, diag); /* downstream store: read only */
    if (result == PS_E_OK)
      result = add_source(f, parts[np - 1], extra, diag);
  }
  free(copy);
  if (result == PS_E_OK && f->nsrc == 0) {
    char def[] = FETCH_DEFAULT_SERVER;
    result = add_source(f, def, extra, diag);
  }
  return result;
}

const char *fetch_curl_version(void) { return curl_version(); }

/* ------------------------------------------------------ one plain request */

typedef struct {
  char *buf;
  size_t cap, len;
} get_sink;

static size_t get_write_cb(char *data, size_t size, size_t nmemb, void *ud) {
  get_sink *s = ud;
  size_t n = size * nmemb;
  if (s->buf && s->len + 1 < s->cap) {
    size_t k = n < s->cap - 1 - s->len ? n : s->cap - 1 - s->len;
    memcpy(s->buf + s->len, data, k);
    s->len += k;
    s->buf[s->len] = '\0';
  }
  return n;
}

bool fetch_http_get(const char *url, long timeout_ms, long *status, char *body, size_t body_cap,
                    char *err, size_t err_cap) {
  get_sink sink = {body_cap ? body : NULL, body_cap, 0};
  if (sink.buf)
    sink.buf[0] = '\0';
  *status = 0;
  CURL *c = curl_easy_init();
  if (!c) {
    snprintf(err, err_cap, "curl_easy_init failed");
    return false;
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, get_write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) {
    snprintf(err, err_cap, "%s", curl_easy_strerror(rc));
    return false;
  }
  return true;
}

bool fetch_http_post(const char *url, const char *const *headers, size_t nheaders,
                     const char *content_type, const void *body, size_t len, long connect_ms,
                     long timeout_ms, long *status, char *resp, size_t resp_cap, char *err,
                     size_t err_cap) {
  get_sink sink = {resp_cap ? resp : NULL, resp_cap, 0};
  if (sink.buf)
    sink.buf[0] = '\0';
  *status = 0;
  CURL *c = curl_easy_init();
  if (!c) {
    snprintf(err, err_cap, "curl_easy_init failed");
    return false;
  }
  struct curl_slist *h = NULL;
  char ct[160];
  snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
  struct curl_slist *n = curl_slist_append(h, ct);
  if (n)
    h = n;
  if (n) {
    n = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (n)
      h = n;
  }
  for (size_t i = 0; n && i < nheaders; i++) {
    n = curl_slist_append(h, headers[i]);
    if (n)
      h = n;
  }
  if (!n) {
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    snprintf(err, err_cap, "out of memory");
    return false;
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, get_write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) {
    snprintf(err, err_cap, "%s", curl_easy_strerror(rc));
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------ keys */

static bool make_key(const module_id *m, st_format fmt, bool image, fetch_key *k) {
  const char *why;
  memset(k, 0, sizeof *k);
  if (image) {
    if (!m->has_code_id || !m->code_file[0] ||
        !module_parse_file_name(m->code_file, k->name, sizeof k->name, &why))
      return false;
    snprintf(k->upper, sizeof k->upper, "%08X%X", m->code_timestamp, m->code_size);
    snprintf(k->mixed, sizeof k->mixed, "%08X%x", m->code_timestamp, m->code_size);
    /* as given, if it names the same image (module_parse_code_id checked the digits) */
    uint32_t ts, sz;
    const char *w;
    if (m->code_id_text[0] && module_parse_code_id(m->code_id_text, &ts, &sz, &w) &&
        ts == m->code_timestamp && sz == m->code_size)
      snprintf(k->given, sizeof k->given, "%s", m->code_id_text);
    k->format = ST_FORMAT_UNKNOWN;
  } else {
    if (!module_parse_file_name(m->debug_file, k->name, sizeof k->name, &why))
      return false;
    char idx[42];
    module_index_key(m, fmt, idx);
    snprintf(k->upper, sizeof k->upper, "%s", idx);
    /* symstore's mixed case: the GUID upper, the age as %x (Portable: FFFFFFFF stays) */
    snprintf(k->mixed, sizeof k->mixed, "%s", idx);
    if (fmt == ST_FORMAT_WINDOWS)
      for (char *c = k->mixed + 32; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    k->format = fmt;
  }
  return true;
}

/* The relative path of variant v of key k in layout l. */
static void layout_path(const fetch_key *k, int l, int v, char out[FETCH_REL_MAX]) {
  char name[MODULE_NAME_MAX + 1], key[48], file[MODULE_NAME_MAX + 1], prefix[8] = "";
  snprintf(name, sizeof name, "%s", k->name);
  snprintf(key, sizeof key, "%s",
           l == LAY_SYMSTORE || l == LAY_TWO_SYMSTORE ? k->mixed
           : l == LAY_GIVEN                          ? k->given
                                                     : k->upper);
  snprintf(file, sizeof file, "%s", k->name);
  if (v == VAR_CAB)
    file[strlen(file) - 1] = '_';
  if (v == VAR_PTR)
    snprintf(file, sizeof file, "file.ptr");
  if (l == LAY_LOWER) {
    str_lower(name);
    str_lower(key);
    str_lower(file);
  }
  if (layout_two(l)) {
    size_t n = strlen(name) < 2 ? strlen(name) : 2;
    memcpy(prefix, name, n);
    prefix[n] = '/';
    prefix[n + 1] = '\0';
  }
  snprintf(out, FETCH_REL_MAX, "%s%s/%s/%s", prefix, name, key, file);
}

typedef struct {
  int layout, var, phase;
  char rel[FETCH_REL_MAX];
} plan_item;

static size_t plan_add(const fetch_key *k, plan_item *items, size_t n, int l, int v, int phase,
                       int tier) {
  if (!layout_has[l][v] || (tier >= 0 && layout_two(l) != (tier == 1)) ||
      (l == LAY_GIVEN && !k->given[0]))
    return n;
  plan_item *it = &items[n];
  layout_path(k, l, v, it->rel);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(items[i].rel, it->rel))
      return n;
  it->layout = l;
  it->var = v;
  it->phase = phase;
  return n + 1;
}

/* What to probe for key k on a source, in order, in three phases
 * (docs/fetch.md, "Probing order"):
 *   learned (L, V): 1: (L, V); 2: L's other variants; 3: the plain file in
 *                   the other casings of L's tier
 *   nothing learned: 1: (UPPER, FILE); 2: (UPPER, CAB), (UPPER, PTR);
 *                   3: every other layout and variant
 * tier: -1 any, 0 flat only, 1 two-tier only (a folder's index2.txt). */
static size_t make_plan(const fetch_key *k, int learned_l, int learned_v, int tier,
                        plan_item items[NLAYOUTS * NVARS]) {
  size_t n = 0;
  if (learned_l >= 0 && learned_v >= 0 && learned_v < NVARS &&
      (tier < 0 || layout_two(learned_l) == (tier == 1))) {
    n = plan_add(k, items, n, learned_l, learned_v, 1, tier);
    for (int v = 0; v < NVARS; v++)
      if (v != learned_v)
        n = plan_add(k, items, n, learned_l, v, 2, tier);
    for (int l = 0; l < NLAYOUTS; l++)
      if (l != learned_l && layout_two(l) == layout_two(learned_l))
        n = plan_add(k, items, n, l, VAR_FILE, 3, tier);
    return n;
  }
  int first = tier == 1 ? LAY_TWO_UPPER : LAY_UPPER;
  n = plan_add(k, items, n, first, VAR_FILE, 1, tier);
  n = plan_add(k, items, n, first, VAR_CAB, 2, tier);
  n = plan_add(k, items, n, first, VAR_PTR, 2, tier);
  for (int l = 0; l < NLAYOUTS; l++)
    for (int v = 0; v < NVARS; v++)
      if (l != first)
        n = plan_add(k, items, n, l, v, 3, tier);
  return n;
}

size_t fetch_candidates(const module_id *m, st_format fmt, bool image,
                        char out[FETCH_VARIANTS][FETCH_REL_MAX]) {
  fetch_key k;
  if (!make_key(m, fmt, image, &k))
    return 0;
  plan_item items[NLAYOUTS * NVARS];
  size_t n = make_plan(&k, -1, -1, -1, items);
  for (size_t i = 0; i < n && i < FETCH_VARIANTS; i++)
    snprintf(out[i], FETCH_REL_MAX, "%s", items[i].rel);
  return n < FETCH_VARIANTS ? n : FETCH_VARIANTS;
}

/* ---------------------------------------------------------- temp files */

/* Counts n more bytes of temporary files against the budget. */
static bool budget_take(fetcher *f, uint64_t n) {
  uint64_t budget = atomic_load(&f->budget);
  uint64_t now = atomic_fetch_add(&f->tmp_bytes, n) + n;
  if (budget && now > budget) {
    atomic_fetch_sub(&f->tmp_bytes, n);
    return false;
  }
  return true;
}

static void budget_give(fetcher *f, uint64_t n) { atomic_fetch_sub(&f->tmp_bytes, n); }

void fetch_set_disk_budget(fetcher *f, uint64_t bytes) {
  if (f)
    atomic_store(&f->budget, bytes);
}

uint64_t fetch_tmp_bytes(const fetcher *f) {
  return f ? atomic_load(&((fetcher *)f)->tmp_bytes) : 0;
}

uint64_t fetch_tmp_proved_bytes(const fetcher *f) {
  return f ? atomic_load(&((fetcher *)f)->proved_bytes) : 0;
}

static bool tmp_create(fetcher *f, tmpfile_t *t, ps_diag *diag) {
  snprintf(t->path, sizeof t->path, "%s/.pdbsym-XXXXXX.part", f->tmp_dir);
  t->bytes = 0;
  t->fd = mkostemps(t->path, 5, O_CLOEXEC);
  if (t->fd < 0) {
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot create a file in %.100s: %s",
                f->tmp_dir, strerror(errno));
    t->path[0] = '\0';
    return false;
  }
  return true;
}

static void tmp_uncount(fetcher *f, tmpfile_t *t) {
  budget_give(f, t->bytes);
  if (t->proved)
    atomic_fetch_sub(&f->proved_bytes, t->bytes);
  t->bytes = 0;
}

/* t has proved to be what it claims: its bytes count as proved from now on. */
static void tmp_set_proved(fetcher *f, tmpfile_t *t) {
  if (t->proved)
    return;
  t->proved = true;
  atomic_fetch_add(&f->proved_bytes, t->bytes);
}

static void tmp_drop(fetcher *f, tmpfile_t *t) {
  if (t->fd >= 0)
    close(t->fd);
  t->fd = -1;
  if (t->path[0])
    unlink(t->path);
  t->path[0] = '\0';
  tmp_uncount(f, t);
  t->proved = false;
}

/* res's file no longer counts as a download. */
static void result_uncount(fetcher *f, fetch_result *res) {
  budget_give(f, res->bytes);
  if (res->proved)
    atomic_fetch_sub(&f->proved_bytes, res->bytes);
  res->bytes = 0;
  res->proved = false;
}

void fetch_result_done(fetcher *f, fetch_result *res) {
  if (res->path[0])
    unlink(res->path);
  res->path[0] = '\0';
  result_uncount(f, res);
}

static bool tmp_rewind(fetcher *f, tmpfile_t *t) {
  tmp_uncount(f, t);
  t->proved = false;
  return ftruncate(t->fd, 0) == 0 && lseek(t->fd, 0, SEEK_SET) == 0;
}

static bool write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    b += w;
    n -= (size_t)w;
  }
  return true;
}

/* The host's disk is full (or a quota reached): not the cache's cap, and
 * worth a warning of its own whatever the lookup makes of it. */
static void log_disk_full(const char *path, int err) {
  log_line l;
  log_begin(&l, LOG_WARN, "disk full: a download could not be written");
  log_str(&l, "file", path);
  log_str(&l, "error", strerror(err));
  log_end(&l);
}

/* Writes n bytes to t under the disk budget.  PS_E_OK, PS_E_LIMIT (budget) or
 * PS_E_IO (errno set). */
static ps_err tmp_write(fetcher *f, tmpfile_t *t, const void *data, size_t n) {
  if (!budget_take(f, n))
    return PS_E_LIMIT;
  if (!write_all(t->fd, data, n)) {
    int err = errno;
    budget_give(f, n);
    errno = err;
    if (err == ENOSPC || err == EDQUOT)
      log_disk_full(t->path, err);
    return PS_E_IO;
  }
  t->bytes += n;
  if (t->proved)
    atomic_fetch_add(&f->proved_bytes, n);
  return PS_E_OK;
}

/* --------------------------------------------------------- the download area */

/* Removes the files of folder dir (one level) and the folder; with remove
 * false, only counts them. */
static void sweep_folder(const char *dir, bool remove, uint64_t *files, uint64_t *bytes) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
        continue;
      char p[1400];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      struct stat st;
      if (lstat(p, &st) == 0 && !S_ISDIR(st.st_mode) && (!remove || unlink(p) == 0)) {
        if (strcmp(e->d_name, ".lock")) {
          if (files)
            (*files)++;
          if (bytes)
            *bytes += (uint64_t)st.st_size;
        }
      }
    }
    closedir(d);
  }
  if (remove)
    rmdir(dir);
}

static void remove_folder(const char *dir, uint64_t *files, uint64_t *bytes) {
  sweep_folder(dir, true, files, bytes);
}

static bool has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

ps_err fetch_sweep_tmp(const char *tmp_dir, bool remove, uint64_t *files, uint64_t *bytes,
                       ps_diag *diag) {
  if (files)
    *files = 0;
  if (bytes)
    *bytes = 0;
  DIR *d = opendir(tmp_dir);
  if (!d) {
    if (errno == ENOENT)
      return PS_E_OK;
    return ps_diag_set(diag, PS_E_IO, "download area", (size_t)-1, "%.100s: %s", tmp_dir,
                       strerror(errno));
  }
  struct dirent *e;
  time_t now = time(NULL);
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", tmp_dir, n);
    struct stat st;
    if (lstat(p, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode) && !strncmp(n, "p-", 2)) {
      /* a process's folder: removable once nobody holds its lock */
      char lk[1300];
      snprintf(lk, sizeof lk, "%s/.lock", p);
      int fd = open(lk, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0 && errno != ENOENT)
        continue;
      if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd); /* its process still runs */
        continue;
      }
      sweep_folder(p, remove, files, bytes);
      if (fd >= 0)
        close(fd);
    } else if (S_ISDIR(st.st_mode) && !strncmp(n, ".p-new-", 7) && now - st.st_mtime > 60) {
      sweep_folder(p, remove, files, bytes); /* a process died while making its folder */
    } else if (S_ISREG(st.st_mode) && ((!strncmp(n, ".pdbsym-", 8) && has_suffix(n, ".part")) ||
                                       !strncmp(n, "pdbsym-", 7))) {
      /* loose files of versions without private folders */
      if (!remove || unlink(p) == 0) {
        if (files)
          (*files)++;
        if (bytes)
          *bytes += (uint64_t)st.st_size;
      }
    }
  }
  closedir(d);
  return PS_E_OK;
}

/* Makes tmp_dir/p-XXXXXX (made as .p-new-XXXXXX, its lock taken, then renamed,
 * so a sweeper never sees it unlocked). */
static ps_err make_area(fetcher *f, const char *tmp_dir, ps_diag *diag) {
  char tmpl[1100], lk[1200], final[1100];
  snprintf(tmpl, sizeof tmpl, "%s/.p-new-XXXXXX", tmp_dir);
  if (!mkdtemp(tmpl))
    return ps_diag_set(diag, PS_E_IO, "download area", (size_t)-1, "cannot create a folder in %.100s: %s",
                       tmp_dir, strerror(errno));
  snprintf(lk, sizeof lk, "%s/.lock", tmpl);
  int fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (fd >= 0)
      close(fd);
    remove_folder(tmpl, NULL, NULL);
    return ps_diag_set(diag, PS_E_IO, "download area", (size_t)-1, "cannot lock %.100s: %s", lk,
                       strerror(err));
  }
  const char *tail = tmpl + strlen(tmpl) - 6;
  snprintf(final, sizeof final, "%s/p-%s", tmp_dir, tail);
  if (rename(tmpl, final) != 0) {
    int err = errno;
    close(fd);
    remove_folder(tmpl, NULL, NULL);
    return ps_diag_set(diag, PS_E_IO, "download area", (size_t)-1, "cannot rename %.100s: %s",
                       tmpl, strerror(err));
  }
  f->area_dir = strdup(final);
  f->lock_fd = fd;
  if (!f->area_dir)
    return ps_diag_set(diag, PS_E_NOMEM, "download area", (size_t)-1, "out of memory");
  free(f->tmp_dir);
  f->tmp_dir = strdup(final);
  if (!f->tmp_dir)
    return ps_diag_set(diag, PS_E_NOMEM, "download area", (size_t)-1, "out of memory");
  return PS_E_OK;
}

/* ------------------------------------------------------------ local files */

typedef enum { DL_OK, DL_NOT_FOUND, DL_ERROR } dl_result;

/* Opens path for reading if it is a regular file: stat first (a FIFO or a
 * device is never opened: open would block or have effects), then open
 * without blocking and check again on the descriptor.  DL_NOT_FOUND for a
 * missing path or a folder; DL_ERROR (diag) for anything else. */
static dl_result open_regular(const char *path, int *fd_out, struct stat *st, ps_diag *diag) {
  *fd_out = -1;
  if (stat(path, st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG)
      return DL_NOT_FOUND;
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot stat %.120s: %s", path,
                strerror(errno));
    return DL_ERROR;
  }
  if (S_ISDIR(st->st_mode))
    return DL_NOT_FOUND;
  if (!S_ISREG(st->st_mode)) {
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "%.120s is not a regular file: refused",
                path);
    return DL_ERROR;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return DL_NOT_FOUND;
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot open %.120s: %s", path,
                strerror(errno));
    return DL_ERROR;
  }
  struct stat st2;
  if (fstat(fd, &st2) != 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st->st_ino ||
      st2.st_dev != st->st_dev) {
    close(fd);
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "%.120s changed while opened: refused", path);
    return DL_ERROR;
  }
  *st = st2;
  *fd_out = fd;
  return DL_OK;
}

/* Copies the open regular file fd (path, st) into t (rewound first) and
 * closes fd. */
static dl_result copy_fd(fetcher *f, int fd, const struct stat *st, const char *path,
                         tmpfile_t *t, uint64_t cap, ps_diag *diag) {
  if ((uint64_t)st->st_size > cap) {
    close(fd);
    ps_diag_set(diag, PS_E_LIMIT, "fetch", (size_t)-1, "%.120s is larger than the %llu-byte cap",
                path, (unsigned long long)cap);
    return DL_ERROR;
  }
  if (!tmp_rewind(f, t)) {
    close(fd);
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot truncate %.100s", t->path);
    return DL_ERROR;
  }
  static _Thread_local char buf[65536];
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot read %.120s: %s", path,
                  strerror(err));
      return DL_ERROR;
    }
    if (n == 0)
      break;
    total += (uint64_t)n;
    if (total > cap) {
      close(fd);
      ps_diag_set(diag, PS_E_LIMIT, "fetch", (size_t)-1, "%.120s is larger than the %llu-byte cap",
                  path, (unsigned long long)cap);
      return DL_ERROR;
    }
    ps_err w = tmp_write(f, t, buf, (size_t)n);
    if (w != PS_E_OK) {
      int err = errno;
      close(fd);
      if (w == PS_E_LIMIT)
        ps_diag_set(diag, PS_E_LIMIT, "fetch", (size_t)-1,
                    "copying %.100s: the download area's %llu-byte budget is used up", path,
                    (unsigned long long)atomic_load(&f->budget));
      else
        ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot write %.100s: %s", t->path,
                    strerror(err));
      return DL_ERROR;
    }
  }
  close(fd);
  return DL_OK;
}

/* ------------------------------------------------------- post-processing */

typedef struct {
  fetcher *f;
  tmpfile_t *t;
  int err;     /* errno of a failed write */
  bool budget; /* the disk budget stopped it */
} fd_sink;

static ps_err cab_to_fd(void *ctx, const uint8_t *data, size_t len) {
  fd_sink *s = ctx;
  ps_err r = tmp_write(s->f, s->t, data, len);
  if (r == PS_E_IO)
    s->err = errno;
  if (r == PS_E_LIMIT)
    s->budget = true;
  return r;
}

/* If t holds a cabinet, replaces it by the member named want (or the only
 * member), extracted under the inflated cap and the disk budget.  Returns
 * false with diag set when the cabinet is refused. */
static bool maybe_uncab(fetcher *f, tmpfile_t *t, const char *want, uint64_t *need,
                        ps_diag *diag) {
  struct stat st;
  if (fstat(t->fd, &st) != 0) {
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot stat %.100s", t->path);
    return false;
  }
  uint8_t sig[4];
  if (st.st_size < 4 || pread(t->fd, sig, 4, 0) != 4 || memcmp(sig, "MSCF", 4) != 0)
    return true;
  size_t len = (size_t)st.st_size;
  void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, t->fd, 0);
  if (map == MAP_FAILED) {
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot map %.100s", t->path);
    return false;
  }
  tmpfile_t out = {"", -1, 0, true}; /* unpacked from a whole file */
  bool ok = false;
  cab_archive *a = NULL;
  if (!tmp_create(f, &out, diag))
    goto done;
  if (cab_open(map, len, &a, diag) != PS_E_OK)
    goto done;
  size_t i = cab_find(a, want);
  if (i == (size_t)-1) {
    ps_diag_set(diag, PS_E_NOT_FOUND, "CFFILE", (size_t)-1, "cabinet has no member '%.100s'",
                want);
    goto done;
  }
  fd_sink fs = {f, &out, 0, false};
  ps_err r = cab_extract(a, i, f->max_inflated, cab_to_fd, &fs, diag);
  if (r == PS_E_LIMIT && fs.budget) {
    *need = cab_size(a, i);
    ps_diag_set(diag, PS_E_LIMIT, "fetch", (size_t)-1,
                "unpacking '%.100s': the download area's %llu-byte budget is used up", want,
                (unsigned long long)atomic_load(&f->budget));
  }
  else if (r == PS_E_IO && diag->code == PS_E_OK)
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot write %.100s: %s", out.path,
                strerror(fs.err));
  if (r != PS_E_OK)
    goto done;
  ok = true;
done:
  cab_close(a);
  munmap(map, len);
  if (ok) {
    tmp_drop(f, t);
    *t = out;
  } else {
    tmp_drop(f, &out);
  }
  return ok;
}

/* Reads a file.ptr from fd: "PATH:target" or "MSG:text". */
static bool parse_ptr(char *buf, size_t n, char *kind, size_t kcap, char *val, size_t vcap) {
  buf[n] = '\0';
  char *p = buf;
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
    p++;
  p[strcspn(p, "\r\n")] = '\0';
  char *colon = strchr(p, ':');
  if (!colon)
    return false;
  *colon = '\0';
  size_t kl = strlen(p);
  if (kl >= kcap)
    return false;
  memcpy(kind, p, kl + 1);
  snprintf(val, vcap, "%s", trim(colon + 1));
  return true;
}

static bool read_ptr_fd(int fd, char *kind, size_t kcap, char *val, size_t vcap) {
  char buf[FETCH_PTR_MAX + 1];
  ssize_t n = pread(fd, buf, FETCH_PTR_MAX, 0);
  if (n <= 0)
    return false;
  return parse_ptr(buf, (size_t)n, kind, kcap, val, vcap);
}

/* ------------------------------------------------------ address classes */

static unsigned class_v4(uint32_t a /* host order */) {
  if ((a >> 24) == 127)
    return AC_LOOPBACK;
  if ((a >> 24) == 10 || (a >> 20) == 0xAC1 /* 172.16/12 */ || (a >> 16) == 0xC0A8 ||
      (a >> 22) == (100u << 2 | 1) /* 100.64/10 */)
    return AC_PRIVATE;
  if ((a >> 16) == 0xA9FE)
    return AC_LINKLOCAL;
  if ((a >> 24) == 0 || (a >> 28) >= 0xE)
    return AC_OTHER; /* this network, multicast, reserved, broadcast */
  return AC_PUBLIC;
}

static unsigned addr_class(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
    return class_v4(ntohl(in->sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
    const uint8_t *b = in6->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(b, mapped, 12))
      return class_v4((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    static const uint8_t zero[15] = {0};
    if (!memcmp(b, zero, 15) && b[15] == 1)
      return AC_LOOPBACK;
    if (!memcmp(b, zero, 15) && b[15] == 0)
      return AC_OTHER;
    if ((b[0] & 0xfe) == 0xfc)
      return AC_PRIVATE;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
      return AC_LINKLOCAL;
    if (b[0] == 0xff)
      return AC_OTHER;
    return AC_PUBLIC;
  }
  return AC_OTHER;
}

static const char *class_name(unsigned c) {
  switch (c) {
  case AC_LOOPBACK: return "a loopback";
  case AC_PRIVATE: return "a private";
  case AC_LINKLOCAL: return "a link-local";
  default: return "a reserved";
  }
}

static void addr_text(const struct sockaddr *sa, char *out, size_t cap) {
  out[0] = '\0';
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
              (socklen_t)cap);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
              (socklen_t)cap);
}

/* ------------------------------------------------------------ open/close */

static void *net_main(void *arg);

ps_err fetch_open(const fetch_config *cfg, fetcher **out, ps_diag *diag) {
  *out = NULL;
  fetch_config dflt;
  memset(&dflt, 0, sizeof dflt);
  if (!cfg)
    cfg = &dflt;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return ps_diag_set(diag, PS_E_NETWORK, "fetch", (size_t)-1, "curl_global_init failed");
  fetcher *f = calloc(1, sizeof *f);
  if (!f)
    return ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "out of memory");
  f->lock_fd = -1;
  pthread_mutex_init(&f->mu, NULL);
  const char *tmp = cfg->tmp_dir && *cfg->tmp_dir ? cfg->tmp_dir : getenv("TMPDIR");
  f->tmp_dir = strdup(tmp && *tmp ? tmp : "/tmp");
  f->no_network = cfg->no_network;
  f->max_download = cfg->max_download_bytes ? cfg->max_download_bytes : (uint64_t)2 << 30;
  f->max_inflated = cfg->max_inflated_bytes ? cfg->max_inflated_bytes : f->max_download;
  f->max_ratio = cfg->lim.max_decoded_ratio ? cfg->lim.max_decoded_ratio : 64;
  atomic_store(&f->budget, cfg->disk_budget_bytes);
  f->connect_timeout_ms = cfg->lim.connect_timeout_ms > 0 ? cfg->lim.connect_timeout_ms : 10000;
  f->first_byte_timeout_ms = cfg->lim.first_byte_timeout_ms > 0 ? cfg->lim.first_byte_timeout_ms : 30000;
  f->transfer_timeout_ms = cfg->lim.transfer_timeout_ms > 0 ? cfg->lim.transfer_timeout_ms : 120000;
  f->min_rate = cfg->lim.min_rate ? cfg->lim.min_rate : (uint64_t)1 << 20;
  f->low_speed_time = cfg->lim.low_speed_time_s > 0 ? cfg->lim.low_speed_time_s : 30;
  f->low_speed_limit = cfg->lim.low_speed_limit > 0 ? cfg->lim.low_speed_limit : 1024;
  f->max_retries = cfg->lim.max_retries > 0 ? cfg->lim.max_retries : cfg->lim.max_retries < 0 ? 0 : 2;
  f->max_redirects = cfg->lim.max_redirects > 0 ? cfg->lim.max_redirects : 5;
  f->max_parallel = cfg->max_parallel_per_source > 0 ? cfg->max_parallel_per_source : 4;
  f->spare_slots = cfg->lim.spare_slots > 0 ? cfg->lim.spare_slots : cfg->lim.spare_slots < 0 ? 0 : 1;
  f->slow_after_ms = cfg->lim.slow_after_ms > 0 ? (uint64_t)cfg->lim.slow_after_ms : 10000u;
  f->retry_base_ms = cfg->lim.retry_base_ms > 0 ? cfg->lim.retry_base_ms : 250;
  f->backoff_ms = cfg->lim.source_backoff_ms > 0 ? cfg->lim.source_backoff_ms : 5000;
  f->backoff_max_ms = cfg->lim.source_backoff_max_ms > 0 ? cfg->lim.source_backoff_max_ms : 300000;
  if (f->backoff_max_ms < f->backoff_ms)
    f->backoff_max_ms = f->backoff_ms;
  f->fail_threshold = cfg->lim.source_fail_threshold > 0 ? cfg->lim.source_fail_threshold : 3;
  f->refuse_private = cfg->lim.refuse_private;
  if (!f->tmp_dir) {
    fetch_close(f);
    return ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "out of memory");
  }
  if (mkdir(f->tmp_dir, 0700) != 0 && errno != EEXIST) {
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot create %.100s: %s", f->tmp_dir,
                strerror(errno));
    fetch_close(f);
    return PS_E_IO;
  }
  const char *path = cfg->symbol_path && *cfg->symbol_path ? cfg->symbol_path : "";
  ps_err r = parse_symbol_path(f, path, cfg->headers, diag);
  if (r == PS_E_OK && cfg->private_tmp) {
    char *base = strdup(f->tmp_dir);
    r = base ? make_area(f, base, diag)
             : ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "out of memory");
    free(base);
  }
  if (r == PS_E_OK && !f->no_network) {
    f->multi = curl_multi_init();
    if (!f->multi) {
      r = ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "curl_multi_init failed");
    } else {
      /* connections are limited per source by the queues; keep one idle
       * connection per slot so probes reuse them */
      curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS,
                        (long)(f->nsrc * (size_t)(f->max_parallel + f->spare_slots)));
      if (pthread_create(&f->net, NULL, net_main, f) != 0)
        r = ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "cannot start the network thread");
      else
        f->net_started = true;
    }
  }
  if (r != PS_E_OK) {
    fetch_close(f);
    return r;
  }
  *out = f;
  return PS_E_OK;
}

void fetch_close(fetcher *f) {
  if (!f)
    return;
  if (f->net_started) {
    pthread_mutex_lock(&f->mu);
    f->stopping = true;
    pthread_mutex_unlock(&f->mu);
    curl_multi_wakeup(f->multi);
    pthread_join(f->net, NULL);
  }
  if (f->multi)
    curl_multi_cleanup(f->multi);
  for (size_t i = 0; i < f->nsrc; i++) {
    free(f->src[i].base);
    curl_slist_free_all(f->src[i].headers);
  }
  if (f->area_dir) {
    remove_folder(f->area_dir, NULL, NULL);
    free(f->area_dir);
  }
  if (f->lock_fd >= 0)
    close(f->lock_fd);
  pthread_mutex_destroy(&f->mu);
  free(f->tmp_dir);
  free(f);
}

size_t fetch_source_count(const fetcher *f) { return f ? f->nsrc : 0; }

bool fetch_source_get(const fetcher *f, size_t i, fetch_source_info *out) {
  if (!f || i >= f->nsrc)
    return false;
  out->http = f->src[i].http;
  out->base = f->src[i].base;
  out->nheaders = f->src[i].nheaders;
  return true;
}

/* true when url has the same scheme, host and port as the source's base */
static bool same_origin(const fetch_source *s, const char *url) {
  size_t a = s->origin_len, b = origin_len(url);
  if (!a || a != b)
    return false;
  for (size_t i = 0; i < a; i++)
    if (tolower((unsigned char)s->base[i]) != tolower((unsigned char)url[i]))
      return false;
  return true;
}

/* ------------------------------------------------ probes, groups (under f->mu) */

/* The source's lane for owner id, made (at the end of the round) when it
 * has none; the spare lane when one cannot be allocated. */
static lane *lane_for(fetch_source *s, uint64_t id) {
  lane **pp = &s->lanes;
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->id == id)
      return *pp;
  lane *l = calloc(1, sizeof *l);
  if (!l) {
    l = &s->spare_lane;
    for (lane *x = s->lanes; x; x = x->next)
      if (x == l)
        return l;
  }
  l->id = id;
  l->next = NULL;
  *pp = l;
  return l;
}

static void lane_drop(fetch_source *s, lane *l) {
  lane **pp = &s->lanes;
  while (*pp && *pp != l)
    pp = &(*pp)->next;
  if (*pp)
    *pp = l->next;
  if (s->cur == l)
    s->cur = l->next;
  if (l != &s->spare_lane)
    free(l);
}

static void q_push(fetch_source *s, probe *p, bool front) {
  lane *l = lane_for(s, p->op->lane);
  p->ln = l;
  p->prev = p->next = NULL;
  if (!l->qhead) {
    l->qhead = l->qtail = p;
  } else if (front) {
    p->next = l->qhead;
    l->qhead->prev = p;
    l->qhead = p;
  } else {
    p->prev = l->qtail;
    l->qtail->next = p;
    l->qtail = p;
  }
}

static void q_remove(fetch_source *s, probe *p) {
  lane *l = p->ln;
  if (p->prev)
    p->prev->next = p->next;
  else
    l->qhead = p->next;
  if (p->next)
    p->next->prev = p->prev;
  else
    l->qtail = p->prev;
  p->prev = p->next = NULL;
  p->ln = NULL;
  if (!l->qhead)
    lane_drop(s, l);
}

/* The next probe to start on source s: the head of the lane whose turn it
 * is, the turn passing to the next lane; with fresh_only, the first lane
 * head (from the turn on) of a module with no transfer running.  NULL: none. */
static probe *q_next(fetch_source *s, bool fresh_only) {
  lane *start = s->cur ? s->cur : s->lanes;
  for (lane *l = start; l;) {
    probe *p = l->qhead;
    if (p && (!fresh_only || p->op->running == 0)) {
      s->cur = l->next; /* the next lane's turn (NULL: the first's) */
      q_remove(s, p);
      return p;
    }
    l = l->next ? l->next : s->lanes;
    if (l == start)
      break;
  }
  return NULL;
}

static void l_push(probe **head, probe *p) {
  p->prev = NULL;
  p->next = *head;
  if (*head)
    (*head)->prev = p;
  *head = p;
}

static void l_remove(probe **head, probe *p) {
  if (p->prev)
    p->prev->next = p->next;
  else
    *head = p->next;
  if (p->next)
    p->next->prev = p->prev;
  p->prev = p->next = NULL;
}

static void note_error(fetch_op *op, const ps_diag *d, int rank) {
  if (rank > op->err_rank) {
    op->err = *d;
    op->err_rank = rank;
  }
}

static void op_maybe_wake(fetch_op *op) {
  if (op->armed && !op->owner_gone && (op->cands || op->groups_open == 0)) {
    op->armed = false;
    op->wake(op->wake_ctx);
  }
}

static void op_free_mem(fetch_op *op) {
  for (size_t s = 0; s < FETCH_MAX_SOURCES; s++)
    for (int k = 0; k < 2; k++) {
      probe *p = op->groups[s][k].probes;
      while (p) {
        probe *n = p->gnext;
        if (p->x) {
          tmp_drop(op->f, &p->x->t);
          free(p->x);
        }
        free(p->url);
        free(p);
        p = n;
      }
    }
  free(op);
}

/* Removes p's .part file and frees its transfer state (not while running). */
static void probe_drop_file(fetcher *f, probe *p) {
  if (!p->x)
    return;
  tmp_drop(f, &p->x->t);
  free(p->x);
  p->x = NULL;
}

/* Takes p out of whatever it waits in; a running probe is flagged for the
 * network thread, which drops its transfer. */
static void probe_cancel(fetcher *f, probe *p) {
  switch (p->state) {
  case P_HELD:
    p->state = P_DONE;
    break;
  case P_QUEUED:
    q_remove(&f->src[p->src], p);
    p->state = P_DONE;
    probe_drop_file(f, p); /* a redirect's or a retry's file */
    break;
  case P_TIMER:
    l_remove(&f->timers, p);
    p->state = P_DONE;
    probe_drop_file(f, p);
    break;
  case P_RUNNING:
    p->cancel = true;
    break;
  default:
    break;
  }
}

static void group_close(fetch_op *op, group *g) {
  if (!g->open)
    return;
  g->open = false;
  for (probe *p = g->probes; p; p = p->gnext)
    probe_cancel(op->f, p);
  op->groups_open--;
}

static void source_close(fetch_op *op, int s) {
  for (int k = 0; k < 2; k++)
    group_close(op, &op->groups[s][k]);
}

static void give_up_source(fetch_op *op, int s) {
  op->given_up[s] = true;
  source_close(op, s);
}

static void probe_enqueue(fetcher *f, probe *p, bool front) {
  p->state = P_QUEUED;
  q_push(&f->src[p->src], p, front);
}

/* The group and phase of round i (0-based) of source s. */
static group *round_group(fetch_op *op, int s, int i, int *phase) {
  int nk = (int)op->nkeys;
  int k = i % nk;
  if (nk == 2 && op->first_key[s] == 1)
    k = 1 - k;
  *phase = i / nk + 1;
  return &op->groups[s][k];
}

/* Releases source s's next round with probes once the current one has
 * settled (every probe of it a miss); closes the source's groups (a miss)
 * when no round is left. */
static void source_advance(fetch_op *op, int s) {
  int rounds = 3 * (int)op->nkeys;
  for (;;) {
    int phase;
    if (op->round[s] > 0) {
      group *g = round_group(op, s, op->round[s] - 1, &phase);
      if (g->open && g->live > 0)
        return; /* still going */
    }
    if (op->round[s] >= rounds) {
      source_close(op, s);
      return;
    }
    group *g = round_group(op, s, op->round[s]++, &phase);
    if (!g->open)
      continue;
    g->phase = phase;
    /* later phases jump their lane, so modules already started finish
     * first; pushed in reverse to keep their order */
    probe *list[NLAYOUTS * NVARS];
    int n = 0;
    for (probe *p = g->probes; p && n < NLAYOUTS * NVARS; p = p->gnext)
      if (p->state == P_HELD && p->phase == phase)
        list[n++] = p;
    for (int i = n - 1; i >= 0; i--) {
      probe_enqueue(op->f, list[i], op->round[s] > 1);
      g->live++;
    }
    if (n)
      return;
  }
}

/* A probe of g (source s) settled without a body (a miss). */
static void group_settle(fetch_op *op, group *g, int s) {
  if (g->live > 0)
    g->live--;
  source_advance(op, s);
}

static probe *probe_new(fetch_op *op, int s, int k, int layout, int var, int phase,
                        const char *url) {
  probe *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->url = strdup(url);
  if (!p->url) {
    free(p);
    return NULL;
  }
  p->op = op;
  p->src = s;
  p->key = k;
  p->layout = layout;
  p->var = var;
  p->phase = phase;
  p->state = P_HELD;
  p->foreign = !same_origin(&op->f->src[s], url);
  group *g = &op->groups[s][k];
  p->gnext = g->probes;
  g->probes = p;
  return p;
}

/* ------------------------------------------------------- the network thread */

static uint32_t le32(const uint8_t *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Whether the first FETCH_HEAD bytes h of a body are the file probe p asks
 * for, before the rest has come: the cache evicts for a download only once
 * it has proved itself so (or is whole), never for bytes that are nothing
 * yet (an endless or hostile body).  len: the declared length (-1: none, or
 * content-encoded).  *claimed gets the size the format states, when it does.
 *   Windows PDB key: the MSF 7.00 superblock (LLVM's MSFCommon.h: the 32-byte
 *     magic, then BlockSize, FreeBlockMapBlock, NumBlocks), BlockSize 512,
 *     1024, 2048 or 4096, the file NumBlocks * BlockSize bytes, equal to len
 *     when there is one;
 *   Portable PDB key: the metadata root's signature "BSJB" (ECMA-335 II.24.2.1);
 *   image: "MZ";
 *   any key, a cabinet ([MS-CAB] 2.1 CFHEADER): "MSCF", cbCabinet at offset 8
 *     equal to len when there is one. */
static bool head_proves(const probe *p, const uint8_t *h, int64_t len, uint64_t *claimed) {
  static const uint8_t msf[32] = "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS\0\0";
  *claimed = 0;
  if (!memcmp(h, "MSCF", 4)) {
    uint64_t cb = le32(h + 8);
    *claimed = cb;
    return cb >= 36 && (len < 0 || cb == (uint64_t)len);
  }
  st_format fmt = p->op->keys[p->key].format;
  if (p->op->image)
    return h[0] == 'M' && h[1] == 'Z';
  if (fmt == ST_FORMAT_PORTABLE)
    return !memcmp(h, "BSJB", 4);
  if (memcmp(h, msf, sizeof msf))
    return false;
  uint32_t bs = le32(h + 32), nb = le32(h + 40);
  if (bs != 512 && bs != 1024 && bs != 2048 && bs != 4096)
    return false;
  *claimed = (uint64_t)bs * nb;
  return nb > 0 && (len < 0 || *claimed == (uint64_t)len);
}

/* The head of a body so far: once FETCH_HEAD bytes are in, judged once. */
static void take_head(probe *p, const char *data, size_t n) {
  xfer *x = p->x;
  if (x->judged || p->var == VAR_PTR)
    return;
  size_t k = FETCH_HEAD - x->nhead < n ? FETCH_HEAD - x->nhead : n;
  memcpy(x->head + x->nhead, data, k);
  x->nhead += k;
  if (x->nhead < FETCH_HEAD)
    return;
  x->judged = true;
  curl_off_t len = -1;
  curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
  if (x->encoded)
    len = -1;
  if (head_proves(p, x->head, (int64_t)len, &x->claimed))
    tmp_set_proved(p->op->f, &x->t);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud) {
  probe *p = ud;
  fetcher *f = p->op->f;
  size_t n = size * nmemb;
  p->x->got_byte = true;
  /* a file that stated its size (tmp_prove) may not pass it */
  if (p->x->t.bytes + n > p->x->cap || (p->x->claimed && p->x->t.bytes + n > p->x->claimed)) {
    p->x->over = true;
    return 0;
  }
  if (p->x->encoded) {
    curl_off_t raw = 0;
    curl_easy_getinfo(p->x->easy, CURLINFO_SIZE_DOWNLOAD_T, &raw);
    uint64_t base = raw > FETCH_RATIO_FLOOR ? (uint64_t)raw : FETCH_RATIO_FLOOR;
    if (p->x->t.bytes + n > base * f->max_ratio) {
      p->x->ratio_over = true;
      return 0;
    }
  }
  /* the cache's room is taken for bytes received, not declared: a 1 KiB
   * answer declaring 19 MiB takes 1 KiB */
  take_head(p, data, n);
  ps_err r = tmp_write(f, &p->x->t, data, n);
  if (r == PS_E_LIMIT) {
    p->x->disk_full = true;
    /* the cache evicts for a download that proved itself, never for one
     * that has not (need 0): its declared or stated size, else twice what
     * came so far */
    curl_off_t len = -1;
    curl_easy_getinfo(p->x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    p->x->need = !p->x->t.proved ? 0
                 : p->x->claimed ? p->x->claimed
                 : len > 0 && !p->x->encoded ? (uint64_t)len
                                             : (p->x->t.bytes + n) * 2;
    return 0;
  }
  if (r != PS_E_OK) {
    p->x->io_error = true;
    p->x->io_errno = errno;
    return 0;
  }
  return n;
}

static bool header_is(const char *line, size_t n, const char *name) {
  size_t l = strlen(name);
  return n > l && !strncasecmp(line, name, l);
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud) {
  probe *p = ud;
  size_t n = size * nmemb;
  p->x->got_byte = true;
  if (n >= 5 && !strncmp(data, "HTTP/", 5)) { /* a new response (after 100 Continue) */
    p->x->html = false;
    p->x->encoded = false;
    p->x->cl_seen = p->x->cl_conflict = false;
  } else if (header_is(data, n, "content-length:")) {
    /* libcurl takes one of two Content-Length headers that differ; the
     * body it then reads is a part of the file, not a malformed one */
    const char *v = data + 15;
    size_t rest = (size_t)(data + n - v);
    while (rest && (*v == ' ' || *v == '\t')) {
      v++;
      rest--;
    }
    while (rest && (v[rest - 1] == '\r' || v[rest - 1] == '\n' || v[rest - 1] == ' '))
      rest--;
    char val[24];
    snprintf(val, sizeof val, "%.*s", (int)(rest < 23 ? rest : 23), v);
    if (p->x->cl_seen && strcmp(val, p->x->cl_first))
      p->x->cl_conflict = true;
    if (!p->x->cl_seen)
      snprintf(p->x->cl_first, sizeof p->x->cl_first, "%s", val);
    p->x->cl_seen = true;
  } else if (header_is(data, n, "content-type:")) {
    const char *v = data + 13;
    while (v < data + n && (*v == ' ' || *v == '\t'))
      v++;
    size_t rest = (size_t)(data + n - v);
    p->x->html = (rest >= 9 && !strncasecmp(v, "text/html", 9)) ||
              (rest >= 21 && !strncasecmp(v, "application/xhtml+xml", 21));
  } else if (header_is(data, n, "content-encoding:")) {
    const char *v = data + 17;
    while (v < data + n && (*v == ' ' || *v == '\t'))
      v++;
    size_t rest = (size_t)(data + n - v);
    p->x->encoded = !(rest >= 8 && !strncasecmp(v, "identity", 8)) && rest > 0 && *v != '\r';
  }
  return n;
}

/* Deadlines: connect (libcurl's), first byte, and the total, which grows with
 * the declared length (max(transfer_timeout, length / min_rate)). */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
  (void)dlnow;
  (void)ultotal;
  (void)ulnow;
  probe *p = ud;
  fetcher *f = p->op->f;
  uint64_t now = now_ms();
  uint64_t el = now - p->x->started;
  if (!p->x->got_byte) {
    /* first byte: first_byte_timeout after the request went out (libcurl's
     * connect deadline covers the time before) */
    curl_off_t sent_us = 0;
    curl_easy_getinfo(p->x->easy, CURLINFO_PRETRANSFER_TIME_T, &sent_us);
    if (sent_us > 0 && el > (uint64_t)(sent_us / 1000) + (uint64_t)f->first_byte_timeout_ms) {
      p->x->abort_why = ABORT_FIRST_BYTE;
      return 1;
    }
  }
  /* the budget shrank under a download that has not proved itself (the
   * cache stored a module): it goes now, not at its next write */
  uint64_t budget = atomic_load(&f->budget);
  if (!p->x->t.proved && budget && p->x->t.bytes && atomic_load(&f->tmp_bytes) > budget) {
    p->x->disk_full = true;
    p->x->need = 0;
    return 1;
  }
  uint64_t limit = (uint64_t)f->transfer_timeout_ms;
  if (dltotal > 0) {
    uint64_t scaled = (uint64_t)dltotal / f->min_rate * 1000u;
    if (scaled > limit)
      limit = scaled;
  }
  if (el > limit) {
    p->x->abort_why = ABORT_DEADLINE;
    return 1;
  }
  return 0;
}

static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
  (void)purpose;
  probe *p = ud;
  fetcher *f = p->op->f;
  fetch_source *s = &f->src[p->src];
  unsigned cls = addr_class(&a->addr);
  bool ok = true;
  pthread_mutex_lock(&f->mu);
  if (!p->foreign)
    s->addr_classes |= cls;
  else if (f->refuse_private && cls != AC_PUBLIC && !(s->addr_classes & cls))
    ok = false;
  pthread_mutex_unlock(&f->mu);
  if (!ok) {
    char ip[INET6_ADDRSTRLEN];
    addr_text(&a->addr, ip, sizeof ip);
    snprintf(p->x->refused, sizeof p->x->refused, "%s address (%s), and the source is not on one",
             class_name(cls), ip);
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static bool start_transfer(fetcher *f, probe *p, ps_diag *d) {
  fetch_source *s = &f->src[p->src];
  fetch_op *op = p->op;
  if (!p->x) {
    p->x = calloc(1, sizeof *p->x);
    if (!p->x) {
      ps_diag_set(d, PS_E_NOMEM, "fetch", (size_t)-1, "out of memory");
      return false;
    }
    p->x->t.fd = -1;
  }
  if (p->x->t.fd < 0 && !tmp_create(f, &p->x->t, d))
    return false;
  if (!tmp_rewind(f, &p->x->t)) {
    ps_diag_set(d, PS_E_IO, "fetch", (size_t)-1, "cannot truncate %.100s", p->x->t.path);
    return false;
  }
  CURL *c = curl_easy_init();
  if (!c) {
    ps_diag_set(d, PS_E_NOMEM, "fetch", (size_t)-1, "curl_easy_init failed");
    return false;
  }
  p->x->easy = c;
  p->x->cap = p->var == VAR_PTR ? FETCH_PTR_MAX : f->max_download;
  p->x->over = p->x->io_error = p->x->disk_full = p->x->ratio_over = p->x->encoded = p->x->html = false;
  p->x->need = 0;
  p->x->got_byte = false;
  p->x->abort_why = ABORT_NONE;
  p->x->refused[0] = '\0';
  p->x->errbuf[0] = '\0';
  p->x->started = now_ms();
  uint64_t backstop = (uint64_t)(f->connect_timeout_ms + f->first_byte_timeout_ms +
                                 f->transfer_timeout_ms) +
                      p->x->cap / f->min_rate * 1000u;
  curl_easy_setopt(c, CURLOPT_URL, p->url);
  curl_easy_setopt(c, CURLOPT_PRIVATE, p);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* followed in on_done, origin checked */
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, f->connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(backstop < LONG_MAX ? backstop : LONG_MAX));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, f->low_speed_limit);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, f->low_speed_time);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* decoded under max_ratio */
  curl_easy_setopt(c, CURLOPT_USERAGENT, FETCH_USER_AGENT);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)p->x->cap);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, p);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, p);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, p);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, p->x->errbuf);
  /* the source's headers (tokens) go to its own origin only */
  if (s->headers && !p->foreign)
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, s->headers);
  if (curl_multi_add_handle(f->multi, c) != CURLM_OK) {
    curl_easy_cleanup(c);
    p->x->easy = NULL;
    ps_diag_set(d, PS_E_NOMEM, "fetch", (size_t)-1, "curl_multi_add_handle failed");
    return false;
  }
  p->state = P_RUNNING;
  l_push(&f->running, p);
  s->active++;
  op->running++;
  return true;
}

/* Ends p's transfer (handle removed, freed); the .part stays in p->x->t. */
static void end_transfer(fetcher *f, probe *p) {
  if (p->x->easy) {
    curl_multi_remove_handle(f->multi, p->x->easy);
    curl_easy_cleanup(p->x->easy);
    p->x->easy = NULL;
  }
  l_remove(&f->running, p);
  f->src[p->src].active--;
  p->op->running--;
  p->state = P_DONE;
}

/* After end_transfer: frees the op if its owner left and nothing runs. */
static void maybe_free_op(fetch_op *op) {
  if (op->owner_gone && op->running == 0)
    op_free_mem(op);
}

/* A transfer of p's module failed on source s (not a 404).  A module's
 * failures count once in the source's streak (its retries, its other
 * probes, both its keys): a source is left alone when fail_threshold
 * modules in a row failed there, not when one module failed three times. */
static void source_failed(fetcher *f, fetch_source *s, probe *p, const ps_diag *d) {
  if (p->op->failed_on[p->src])
    return;
  p->op->failed_on[p->src] = true;
  s->fail_streak++;
  if (s->fail_streak >= f->fail_threshold) {
    int extra = s->fail_streak - f->fail_threshold;
    long wait = f->backoff_ms;
    for (int i = 0; i < extra && wait < f->backoff_max_ms; i++)
      wait *= 2;
    if (wait > f->backoff_max_ms)
      wait = f->backoff_max_ms;
    s->down_until = now_ms() + (uint64_t)wait;
    snprintf(s->down_error, sizeof s->down_error, "%.150s", d->detail);
  }
}

static bool retryable_curl(CURLcode c) {
  switch (c) {
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_COULDNT_CONNECT:
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    return true;
  default:
    return false;
  }
}

/* Fails p for good: the op gives its source up. */
static void probe_fail(fetch_op *op, probe *p, const ps_diag *d) {
  note_error(op, d, 2);
  p->state = P_DONE;
  give_up_source(op, p->src);
}

/* Schedules a retry of p, or fails it when its retries are spent. */
static void probe_retry(fetcher *f, probe *p, const ps_diag *d) {
  fetch_op *op = p->op;
  if (p->attempt >= f->max_retries || op->given_up[p->src]) {
    ps_diag e = *d;
    size_t n = strlen(e.detail);
    if (p->attempt > 0 && n + 18 < sizeof e.detail)
      snprintf(e.detail + n, sizeof e.detail - n, " (after %d retr%s)", p->attempt,
               p->attempt == 1 ? "y" : "ies");
    probe_fail(op, p, &e);
    return;
  }
  long backoff = f->retry_base_ms << (p->attempt < 10 ? p->attempt : 10);
  if (backoff > FETCH_MAX_BACKOFF_MS)
    backoff = FETCH_MAX_BACKOFF_MS;
  /* jitter from the clock, so transfers that failed together do not retry together */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned seed = (unsigned)ts.tv_nsec ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)p;
  backoff = backoff * 3 / 4 + (long)((unsigned long)rand_r(&seed) % (unsigned long)(backoff / 2 + 1));
  p->attempt++;
  p->retry_at = now_ms() + (uint64_t)backoff;
  p->state = P_TIMER;
  l_push(&f->timers, p);
}

/* A finished file.ptr probe: follow PATH: (a URL) once, note MSG:. */
static void ptr_done(fetcher *f, probe *p, group *g) {
  fetch_op *op = p->op;
  char kind[16], val[1024];
  ps_diag d;
  ps_diag_clear(&d);
  bool ok = read_ptr_fd(p->x->t.fd, kind, sizeof kind, val, sizeof val);
  probe_drop_file(f, p);
  if (ok && !strcmp(kind, "MSG")) {
    ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1, "%.110s says: %.70s", p->url, val);
    note_error(op, &d, 1);
  } else if (ok && !strcmp(kind, "PATH") && val[0] && !has_ctl(val)) {
    if (!is_http_url(val)) {
      /* a remote server cannot make us read local files */
      ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1,
                  "%.110s names a path, not a URL: %.60s", p->url, val);
      note_error(op, &d, 1);
    } else {
      probe *t = probe_new(op, p->src, p->key, p->layout, VAR_TARGET, p->phase, val);
      if (t) {
        probe_enqueue(f, t, true);
        g->live++;
      }
    }
  }
  group_settle(op, g, p->src);
}

/* A finished body: a candidate for the caller. */
static void body_done(fetcher *f, probe *p) {
  fetch_op *op = p->op;
  cand *c = calloc(1, sizeof *c);
  if (!c) {
    ps_diag d;
    ps_diag_clear(&d);
    ps_diag_set(&d, PS_E_NOMEM, "fetch", (size_t)-1, "out of memory");
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
    return;
  }
  c->t = p->x->t;
  p->x->t.fd = -1;
  p->x->t.path[0] = '\0';
  p->x->t.bytes = 0;
  p->x->t.proved = false;
  tmp_set_proved(f, &c->t); /* a whole file */
  c->src = p->src;
  c->key = p->key;
  c->layout = p->layout;
  c->var = p->var == VAR_TARGET ? VAR_PTR : p->var;
  c->clean = false;
  if (p->x->length >= 0 && !p->x->html) {
    curl_off_t raw = -1;
    /* end_transfer has not run yet: the handle is still there */
    if (p->x->easy)
      curl_easy_getinfo(p->x->easy, CURLINFO_SIZE_DOWNLOAD_T, &raw);
    c->clean = raw == p->x->length;
  }
  snprintf(c->where, sizeof c->where, "%s", p->url);
  if (op->cands_tail)
    op->cands_tail->next = c;
  else
    op->cands = c;
  op->cands_tail = c;
  /* the source has given its file: it is verified, and accepted (the lookup
   * ends) or refused (the source is given up), so nothing more is asked of
   * it - not its other key, not the later rounds */
  source_close(op, p->src);
}

static void on_done(fetcher *f, probe *p, CURLcode rc) {
  fetch_op *op = p->op;
  fetch_source *s = &f->src[p->src];
  group *g = &op->groups[p->src][p->key];
  long code = 0;
  curl_easy_getinfo(p->x->easy, CURLINFO_RESPONSE_CODE, &code);
  curl_off_t len = -1;
  curl_easy_getinfo(p->x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
  p->x->length = len;
  char *loc = NULL;
  if (code >= 300 && code < 400) {
    char *l = NULL;
    curl_easy_getinfo(p->x->easy, CURLINFO_REDIRECT_URL, &l);
    loc = l ? strdup(l) : NULL;
  }
  bool cancelled = p->cancel || op->finished || !g->open;
  if (cancelled) {
    free(loc);
    end_transfer(f, p);
    probe_drop_file(f, p);
    maybe_free_op(op);
    return;
  }
  ps_diag d;
  ps_diag_clear(&d);
  const char *url = p->url;
  if (rc == CURLE_OK && code >= 200 && code < 300 && p->var != VAR_PTR &&
      (code == 206 || p->x->cl_conflict || (p->x->claimed && p->x->t.bytes < p->x->claimed))) {
    /* a part of the file, not a malformed file: a network error (its short
     * TTL, doubled per failure), never the malformed one (24 h) */
    if (code == 206)
      ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1,
                  "%.120s: 206 Partial Content to a request for the whole file", url);
    else if (p->x->cl_conflict)
      ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1,
                  "%.120s: conflicting Content-Length headers", url);
    else
      ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1,
                  "%.100s: a partial transfer: the file states %llu bytes, %llu came", url,
                  (unsigned long long)p->x->claimed, (unsigned long long)p->x->t.bytes);
    free(loc);
    end_transfer(f, p);
    source_failed(f, s, p, &d);
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
    op_maybe_wake(op);
    return;
  }
  if (rc == CURLE_OK && code >= 200 && code < 300) {
    s->fail_streak = 0;
    if (p->var == VAR_PTR) {
      end_transfer(f, p);
      ptr_done(f, p, g);
    } else {
      body_done(f, p);
      end_transfer(f, p);
      probe_drop_file(f, p); /* the file went to the candidate */
    }
    op_maybe_wake(op);
    return;
  }
  if (rc == CURLE_OK && code >= 300 && code < 400) {
    s->fail_streak = 0;
    end_transfer(f, p);
    if (!loc) {
      ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1, "HTTP %ld without a Location from %.120s",
                  code, url);
      probe_fail(op, p, &d);
    } else if (!is_http_url(loc)) {
      ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1,
                  "%.100s redirects to a URL that is not http or https: refused", url);
      probe_fail(op, p, &d);
    } else if (p->redirects >= f->max_redirects) {
      ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1,
                  "%.100s: more than %d redirects", url, f->max_redirects);
      probe_fail(op, p, &d);
    } else {
      p->redirects++;
      free(p->url);
      p->url = loc;
      loc = NULL;
      p->foreign = !same_origin(s, p->url);
      probe_enqueue(f, p, true);
    }
    free(loc);
    if (p->state == P_DONE)
      probe_drop_file(f, p);
    op_maybe_wake(op);
    return;
  }
  free(loc);
  bool p_over = p->x->over, p_disk = p->x->disk_full, p_ratio = p->x->ratio_over, p_io = p->x->io_error;
  int why = p->x->abort_why;
  bool got_byte = p->x->got_byte;
  char refused[sizeof p->x->refused];
  snprintf(refused, sizeof refused, "%s", p->x->refused);
  char errbuf[CURL_ERROR_SIZE];
  snprintf(errbuf, sizeof errbuf, "%s", p->x->errbuf);
  end_transfer(f, p);
  if (rc == CURLE_OK) { /* 1xx or another status libcurl let through */
    ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1, "HTTP %ld from %.120s", code, url);
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
  } else if (refused[0]) {
    ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1, "%.80s leads to %.100s: refused", url,
                refused);
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
  } else if (p_over || rc == CURLE_FILESIZE_EXCEEDED) {
    if (p->var == VAR_PTR) { /* not a file.ptr */
      probe_drop_file(f, p);
      group_settle(op, g, p->src);
    } else {
      ps_diag_set(&d, PS_E_LIMIT, "fetch", (size_t)-1, "%.120s is larger than the %llu-byte cap",
                  url, (unsigned long long)p->x->cap);
      probe_drop_file(f, p);
      probe_fail(op, p, &d);
    }
  } else if (p_ratio) {
    ps_diag_set(&d, PS_E_LIMIT, "fetch", (size_t)-1,
                "%.100s: the content-encoded body inflates more than %llux: refused", url,
                (unsigned long long)f->max_ratio);
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
  } else if (p_disk) {
    if (p->x->need > op->room_needed)
      op->room_needed = p->x->need;
    ps_diag_set(&d, PS_E_LIMIT, "fetch", (size_t)-1,
                "%.100s: the download area's %llu-byte budget is used up%s", url,
                (unsigned long long)atomic_load(&f->budget),
                p->x->need ? "" : " (nothing evicted for it: its first bytes are not the file asked for)");
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
  } else if (p_io) {
    ps_diag_set(&d, PS_E_IO, "fetch", (size_t)-1, "cannot write %.100s: %s", p->x->t.path,
                strerror(p->x->io_errno));
    probe_drop_file(f, p);
    probe_fail(op, p, &d);
  } else if (rc == CURLE_HTTP_RETURNED_ERROR && (code == 404 || code == 410)) {
    s->fail_streak = 0;
    if (p->var == VAR_TARGET) {
      ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1, "file.ptr target missing: %.120s",
                  url);
      note_error(op, &d, 1);
    }
    group_settle(op, g, p->src);
  } else if (rc == CURLE_HTTP_RETURNED_ERROR) {
    bool retry = code >= 500 || code == 429 || code == 408;
    ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1, "HTTP %ld from %.120s", code, url);
    if (retry) {
      source_failed(f, s, p, &d);
      probe_retry(f, p, &d);
    } else {
      s->fail_streak = 0; /* 401, 403...: an answer, but not one to retry */
      probe_fail(op, p, &d);
    }
  } else if (why == ABORT_FIRST_BYTE || why == ABORT_DEADLINE) {
    if (why == ABORT_FIRST_BYTE)
      ps_diag_set(&d, PS_E_TIMEOUT, "fetch", (size_t)-1,
                  "%.120s: no answer within %ld ms of the request", url, f->first_byte_timeout_ms);
    else
      ps_diag_set(&d, PS_E_TIMEOUT, "fetch", (size_t)-1,
                  "%.120s: not complete within its deadline (%llu of %lld bytes)", url,
                  (unsigned long long)p->x->t.bytes, (long long)p->x->length);
    source_failed(f, s, p, &d);
    if (why == ABORT_FIRST_BYTE)
      probe_retry(f, p, &d);
    else
      probe_fail(op, p, &d); /* a slow source stays slow: no retry */
  } else {
    ps_diag_set(&d, rc == CURLE_OPERATION_TIMEDOUT ? PS_E_TIMEOUT : PS_E_NETWORK, "fetch",
                (size_t)-1, "%.120s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    source_failed(f, s, p, &d);
    /* a source that answered and then went too slow stays slow: not retried */
    if (retryable_curl(rc) && !(rc == CURLE_OPERATION_TIMEDOUT && got_byte))
      probe_retry(f, p, &d);
    else
      probe_fail(op, p, &d);
  }
  if (p->state == P_DONE)
    probe_drop_file(f, p);
  op_maybe_wake(op);
}

/* Starts what may start: retries that are due, then each source's queue up to
 * its limit (a source backing off fails its queued probes at once). */
static uint64_t pump(fetcher *f) {
  uint64_t now = now_ms();
  uint64_t next = now + FETCH_TICK_MS;
  for (probe *p = f->timers, *n; p; p = n) {
    n = p->next;
    if (p->retry_at <= now) {
      l_remove(&f->timers, p);
      probe_enqueue(f, p, true);
    } else if (p->retry_at < next) {
      next = p->retry_at;
    }
  }
  for (size_t i = 0; i < f->nsrc; i++) {
    fetch_source *s = &f->src[i];
    while (s->lanes) {
      /* max_parallel transfers; past them, while fewer than spare_slots of
       * the source's transfers are young (under slow_after), spare slots
       * for modules with no transfer running: slow transfers of some
       * modules do not hold every slot against the others */
      bool fresh_only = false;
      if (s->down_until <= now && s->active >= f->max_parallel) {
        if (s->active >= f->max_parallel + f->spare_slots)
          break;
        int young = 0;
        for (probe *r = f->running; r; r = r->next)
          if (r->src == (int)i && now - r->x->started < f->slow_after_ms)
            young++;
        if (young >= f->spare_slots)
          break;
        fresh_only = true;
      }
      probe *p = q_next(s, fresh_only);
      if (!p)
        break;
      fetch_op *op = p->op;
      ps_diag d;
      ps_diag_clear(&d);
      if (s->down_until > now) {
        ps_diag_set(&d, PS_E_NETWORK, "fetch", (size_t)-1,
                    "%.60s is not asked for %llu s after %d failures in a row (last: %.90s)",
                    s->base, (unsigned long long)((s->down_until - now + 999) / 1000),
                    s->fail_streak, s->down_error);
        probe_drop_file(f, p);
        probe_fail(op, p, &d);
        op_maybe_wake(op);
        continue;
      }
      if (!start_transfer(f, p, &d)) {
        probe_drop_file(f, p);
        probe_fail(op, p, &d);
        op_maybe_wake(op);
      }
    }
  }
  return next;
}

/* Drops the transfers of cancelled probes. */
static void reap(fetcher *f) {
  for (probe *p = f->running, *n; p; p = n) {
    n = p->next;
    if (p->cancel || p->op->finished) {
      fetch_op *op = p->op;
      end_transfer(f, p);
      probe_drop_file(f, p);
      maybe_free_op(op);
    }
  }
}

static void *net_main(void *arg) {
  fetcher *f = arg;
  pthread_mutex_lock(&f->mu);
  while (!f->stopping) {
    reap(f);
    uint64_t next = pump(f);
    uint64_t now = now_ms();
    int wait = next > now ? (int)(next - now) : 0;
    pthread_mutex_unlock(&f->mu);
    long ct = -1;
    if (curl_multi_timeout(f->multi, &ct) == CURLM_OK && ct >= 0 && ct < wait)
      wait = (int)ct;
    curl_multi_poll(f->multi, NULL, 0, wait, NULL);
    int still = 0;
    curl_multi_perform(f->multi, &still);
    pthread_mutex_lock(&f->mu);
    CURLMsg *msg;
    int left = 0;
    while ((msg = curl_multi_info_read(f->multi, &left))) {
      if (msg->msg != CURLMSG_DONE)
        continue;
      CURL *e = msg->easy_handle;
      CURLcode rc = msg->data.result;
      probe *p = NULL;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)(void *)&p);
      if (p)
        on_done(f, p, rc);
    }
  }
  /* stopping: drop what still runs (an op its owner has not freed stays
   * allocated: the owner abandoned it with the process) */
  for (probe *p = f->running, *n; p; p = n) {
    n = p->next;
    fetch_op *op = p->op;
    end_transfer(f, p);
    probe_drop_file(f, p);
    maybe_free_op(op);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

/* ------------------------------------------------------------- lookups */

fetch_op *fetch_op_new(fetcher *f, const module_id *m, bool image, st_format fmt,
                       fetch_wake_fn wake, void *wake_ctx, ps_diag *diag) {
  fetch_op *op = calloc(1, sizeof *op);
  if (!op) {
    ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "out of memory");
    return NULL;
  }
  op->f = f;
  op->image = image;
  op->wake = wake;
  op->wake_ctx = wake_ctx;
  ps_diag_clear(&op->err);
  if (image) {
    if (make_key(m, ST_FORMAT_UNKNOWN, true, &op->keys[0]))
      op->nkeys = 1;
  } else {
    st_format fmts[2] = {fmt, ST_FORMAT_UNKNOWN};
    if (fmt == ST_FORMAT_UNKNOWN) {
      fmts[0] = ST_FORMAT_WINDOWS;
      fmts[1] = ST_FORMAT_PORTABLE;
    }
    for (int i = 0; i < 2 && fmts[i] != ST_FORMAT_UNKNOWN; i++)
      if (make_key(m, fmts[i], false, &op->keys[op->nkeys]))
        op->nkeys++;
  }
  if (!op->nkeys) {
    ps_diag_set(diag, PS_E_INVALID, "fetch", (size_t)-1,
                image ? "no valid code file and code id" : "invalid debug file name");
    free(op);
    return NULL;
  }
  pthread_mutex_lock(&f->mu);
  f->nops++;
  pthread_mutex_unlock(&f->mu);
  return op;
}

void fetch_op_set_lane(fetch_op *op, uint64_t id) {
  pthread_mutex_lock(&op->f->mu);
  op->lane = id;
  pthread_mutex_unlock(&op->f->mu);
}

void fetch_op_free(fetch_op *op) {
  if (!op)
    return;
  fetcher *f = op->f;
  pthread_mutex_lock(&f->mu);
  op->finished = true;
  op->owner_gone = true;
  op->armed = false;
  for (size_t s = 0; s < FETCH_MAX_SOURCES; s++)
    for (int k = 0; k < 2; k++)
      group_close(op, &op->groups[s][k]);
  for (cand *c = op->cands, *n; c; c = n) {
    n = c->next;
    tmp_drop(f, &c->t);
    free(c);
  }
  op->cands = op->cands_tail = NULL;
  f->nops--;
  bool now = op->running == 0;
  if (now)
    op_free_mem(op);
  pthread_mutex_unlock(&f->mu);
  if (!now && f->multi)
    curl_multi_wakeup(f->multi);
}

static void op_note(fetch_op *op, const ps_diag *d, int rank) {
  pthread_mutex_lock(&op->f->mu);
  note_error(op, d, rank);
  pthread_mutex_unlock(&op->f->mu);
}

/* Unpacks and verifies candidate c on the caller's thread; on acceptance
 * hands the file over in res.  c's file is gone either way. */
static bool consider(fetch_op *op, cand *c, fetch_verify_fn verify, void *vctx,
                     fetch_result *res) {
  fetcher *f = op->f;
  const fetch_key *k = &op->keys[c->key];
  ps_diag d;
  ps_diag_clear(&d);
  uint64_t need = 0;
  if (!maybe_uncab(f, &c->t, k->name, &need, &d)) {
    tmp_drop(f, &c->t);
    op_note(op, &d, 2);
    if (need) {
      pthread_mutex_lock(&f->mu);
      if (need > op->room_needed)
        op->room_needed = need;
      pthread_mutex_unlock(&f->mu);
    }
    return false;
  }
  if (verify) {
    fetch_file ff = {c->t.path, c->where, k->format, c->clean};
    ps_diag vd;
    ps_diag_clear(&vd);
    if (!verify(vctx, &ff, &vd)) {
      ps_diag_set(&d, vd.code == PS_E_OK ? PS_E_MISMATCH : vd.code, "verify", (size_t)-1,
                  "%.100s: %.80s", c->where, vd.code == PS_E_OK ? "rejected" : vd.detail);
      tmp_drop(f, &c->t);
      op_note(op, &d, 3);
      return false;
    }
  }
  /* hand over: .pdbsym-XXXXXX.part -> pdbsym-XXXXXX.<ext>, exclusively */
  char final[1200];
  const char *base = strrchr(c->t.path, '/');
  base = base ? base + 1 : c->t.path;
  const char *dot = strrchr(k->name, '.');
  snprintf(final, sizeof final, "%.*s%.*s%s", (int)(base - c->t.path), c->t.path, 13, base + 1,
           dot ? dot : "");
  if (strlen(final) >= sizeof res->path || link(c->t.path, final) != 0) {
    ps_diag_set(&d, PS_E_IO, "fetch", (size_t)-1, "cannot link %.100s: %s", final,
                strerror(errno));
    tmp_drop(f, &c->t);
    op_note(op, &d, 2);
    return false;
  }
  /* the file stays counted under its new name until the caller is done with
   * it (fetch_result_done): uncounted here, it was on disk beside the
   * downloads that took its room meanwhile (the caller unlinks it after
   * fetch_op_step returns and fetch_op_free) */
  res->bytes = c->t.bytes;
  res->proved = c->t.proved;
  c->t.bytes = 0;
  c->t.proved = false;
  tmp_drop(f, &c->t);
  snprintf(res->path, sizeof res->path, "%.*s", (int)sizeof res->path - 1, final);
  snprintf(res->source, sizeof res->source, "%s", c->where);
  res->format = k->format;
  pthread_mutex_lock(&f->mu);
  fetch_source *s = &f->src[c->src];
  s->hit_layout[op->image] = c->layout;
  s->hit_var[op->image] = c->var;
  if (!op->image)
    s->hit_format = k->format;
  pthread_mutex_unlock(&f->mu);
  return true;
}

static bool local_has_index2(const fetch_source *s) {
  char p[1100];
  struct stat st;
  snprintf(p, sizeof p, "%s/index2.txt", s->base);
  return stat(p, &st) == 0;
}

/* Adds a file.ptr target URL found in a folder source to the network's work. */
static void add_local_target(fetch_op *op, int s, int k, int layout, const char *url) {
  fetcher *f = op->f;
  pthread_mutex_lock(&f->mu);
  group *g = &op->groups[s][k];
  if (!g->used) {
    g->used = g->open = true;
    op->groups_open++;
  }
  if (g->open)
    probe_new(op, s, k, layout, VAR_TARGET, 1, url);
  pthread_mutex_unlock(&f->mu);
}

typedef enum { LOCAL_NEXT, LOCAL_FOUND, LOCAL_GIVE_UP } local_result;

/* One folder source, key k: every planned path in order. */
static local_result local_source(fetch_op *op, int s, int k, fetch_verify_fn verify, void *vctx,
                                 fetch_result *res) {
  fetcher *f = op->f;
  fetch_source *src = &f->src[s];
  const fetch_key *key = &op->keys[k];
  pthread_mutex_lock(&f->mu);
  int ll = src->hit_layout[op->image], lv = src->hit_var[op->image];
  pthread_mutex_unlock(&f->mu);
  plan_item items[NLAYOUTS * NVARS];
  size_t n = make_plan(key, ll, lv, local_has_index2(src) ? 1 : 0, items);
  for (size_t i = 0; i < n; i++) {
    char path[2048], where[2048];
    int w = snprintf(path, sizeof path, "%s/%s", src->base, items[i].rel);
    if (w < 0 || (size_t)w >= sizeof path)
      continue;
    snprintf(where, sizeof where, "%s", path);
    ps_diag d;
    ps_diag_clear(&d);
    if (items[i].var == VAR_PTR) {
      int fd;
      struct stat st;
      dl_result r = open_regular(path, &fd, &st, &d);
      if (r == DL_NOT_FOUND)
        continue;
      if (r == DL_ERROR) {
        op_note(op, &d, 2);
        return LOCAL_GIVE_UP;
      }
      char kind[16], val[1024];
      bool ok = read_ptr_fd(fd, kind, sizeof kind, val, sizeof val);
      close(fd);
      if (!ok)
        continue;
      if (!strcmp(kind, "MSG")) {
        ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1, "%.110s says: %.70s", path, val);
        op_note(op, &d, 1);
        continue;
      }
      if (strcmp(kind, "PATH") || !val[0] || has_ctl(val))
        continue;
      if (is_http_url(val)) {
        add_local_target(op, s, k, items[i].layout, val);
        continue;
      }
      for (char *c = val; *c; c++)
        if (*c == '\\')
          *c = '/';
      if (val[0] == '/')
        snprintf(path, sizeof path, "%s", val);
      else
        snprintf(path, sizeof path, "%s/%s", src->base, val);
      snprintf(where, sizeof where, "%s", path);
    }
    int fd;
    struct stat st;
    dl_result r = open_regular(path, &fd, &st, &d);
    if (r == DL_NOT_FOUND) {
      if (items[i].var == VAR_PTR) {
        ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1, "file.ptr target missing: %.120s",
                    path);
        op_note(op, &d, 1);
      }
      continue;
    }
    if (r == DL_ERROR) {
      op_note(op, &d, 2);
      return LOCAL_GIVE_UP;
    }
    cand c;
    memset(&c, 0, sizeof c);
    c.t.fd = -1;
    if (!tmp_create(f, &c.t, &d)) {
      close(fd);
      op_note(op, &d, 2);
      return LOCAL_GIVE_UP;
    }
    r = copy_fd(f, fd, &st, path, &c.t, f->max_download, &d);
    if (r == DL_ERROR) {
      tmp_drop(f, &c.t);
      op_note(op, &d, 2);
      return LOCAL_GIVE_UP;
    }
    tmp_set_proved(f, &c.t); /* a whole file */
    c.src = s;
    c.key = k;
    c.layout = items[i].layout;
    c.var = items[i].var;
    c.clean = true;
    snprintf(c.where, sizeof c.where, "%.*s", (int)sizeof c.where - 1, where);
    if (consider(op, &c, verify, vctx, res))
      return LOCAL_FOUND;
    return LOCAL_GIVE_UP; /* this source serves a wrong or unreadable file */
  }
  return LOCAL_NEXT;
}

/* Queues the HTTP sources' probes (phase 1 of every group) and the targets of
 * folders' file.ptr URLs. */
static void net_start(fetch_op *op) {
  fetcher *f = op->f;
  pthread_mutex_lock(&f->mu);
  if (f->multi && !f->no_network) {
    for (size_t s = 0; s < f->nsrc; s++) {
      fetch_source *src = &f->src[s];
      if (!src->http || op->given_up[s])
        continue;
      for (size_t k = 0; k < op->nkeys; k++) {
        plan_item items[NLAYOUTS * NVARS];
        size_t n = make_plan(&op->keys[k], src->hit_layout[op->image], src->hit_var[op->image],
                             -1, items);
        group *g = &op->groups[s][k];
        g->used = g->open = true;
        op->groups_open++;
        /* probe_new pushes at the head: add in reverse to keep the plan's order */
        for (size_t i = n; i-- > 0;) {
          char esc[FETCH_REL_MAX * 3], url[FETCH_REL_MAX * 3 + 1100];
          if (!fetch_url_escape(items[i].rel, esc, sizeof esc))
            continue;
          int w = snprintf(url, sizeof url, "%s/%s", src->base, esc);
          if (w < 0 || (size_t)w >= sizeof url)
            continue;
          probe_new(op, (int)s, (int)k, items[i].layout, items[i].var, items[i].phase, url);
        }
      }
    }
  }
  for (size_t s = 0; s < f->nsrc; s++)
    for (size_t k = 0; k < op->nkeys; k++) {
      group *g = &op->groups[s][k];
      if (!g->used || !g->open)
        continue;
      if (!f->multi || f->no_network) { /* a folder's file.ptr URL, but no network */
        ps_diag d;
        ps_diag_clear(&d);
        ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1,
                    "a file.ptr names a URL, and the network is off");
        note_error(op, &d, 1);
        group_close(op, g);
        continue;
      }
    }
  for (size_t s = 0; s < f->nsrc; s++) {
    /* the likeliest key first: the format the source answered with last */
    op->first_key[s] = op->nkeys == 2 && f->src[s].hit_format != ST_FORMAT_UNKNOWN &&
                       op->keys[1].format == f->src[s].hit_format;
    if (op->groups[s][0].open || op->groups[s][1].open)
      source_advance(op, (int)s);
  }
  pthread_mutex_unlock(&f->mu);
  if (f->multi)
    curl_multi_wakeup(f->multi);
}

static fetch_status op_final(fetch_op *op, ps_diag *diag) {
  fetch_status st = op->err_rank >= 2 ? FETCH_ERROR : FETCH_NOT_FOUND;
  if (diag) {
    if (op->err_rank >= 1)
      *diag = op->err;
    else
      ps_diag_set(diag, PS_E_NOT_FOUND, "fetch", (size_t)-1, "not on any of %zu source(s)",
                  op->f->nsrc);
  }
  return st;
}

fetch_status fetch_op_step(fetch_op *op, fetch_verify_fn verify, void *vctx, fetch_result *res,
                           ps_diag *diag) {
  fetcher *f = op->f;
  res->path[0] = res->source[0] = '\0';
  res->format = ST_FORMAT_UNKNOWN;
  res->bytes = 0;
  res->proved = false;
  if (!op->local_done) {
    op->local_done = true;
    for (size_t s = 0; s < f->nsrc; s++) {
      if (f->src[s].http)
        continue;
      for (size_t k = 0; k < op->nkeys; k++) {
        local_result r = local_source(op, (int)s, (int)k, verify, vctx, res);
        if (r == LOCAL_FOUND) {
          pthread_mutex_lock(&f->mu);
          op->finished = true;
          pthread_mutex_unlock(&f->mu);
          return FETCH_FOUND;
        }
        if (r == LOCAL_GIVE_UP) {
          pthread_mutex_lock(&f->mu);
          give_up_source(op, (int)s);
          pthread_mutex_unlock(&f->mu);
          break;
        }
      }
    }
  }
  if (!op->net_started) {
    op->net_started = true;
    net_start(op);
  }
  for (;;) {
    pthread_mutex_lock(&f->mu);
    cand *c = op->cands;
    if (c) {
      op->cands = c->next;
      if (!op->cands)
        op->cands_tail = NULL;
    } else if (op->groups_open == 0) {
      fetch_status st = op_final(op, diag);
      pthread_mutex_unlock(&f->mu);
      return st;
    } else {
      op->armed = true;
      pthread_mutex_unlock(&f->mu);
      return FETCH_PENDING;
    }
    pthread_mutex_unlock(&f->mu);
    bool ok = consider(op, c, verify, vctx, res);
    int src = c->src;
    free(c);
    pthread_mutex_lock(&f->mu);
    if (ok) {
      op->finished = true; /* the rest is cancelled */
      for (size_t s = 0; s < FETCH_MAX_SOURCES; s++)
        for (int k = 0; k < 2; k++)
          group_close(op, &op->groups[s][k]);
    } else {
      give_up_source(op, src);
    }
    pthread_mutex_unlock(&f->mu);
    if (f->multi)
      curl_multi_wakeup(f->multi);
    if (ok)
      return FETCH_FOUND;
  }
}

uint64_t fetch_op_room_needed(fetch_op *op) {
  pthread_mutex_lock(&op->f->mu);
  uint64_t n = op->room_needed;
  pthread_mutex_unlock(&op->f->mu);
  return n;
}

/* ---------------------------------------------------- synchronous lookups */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool woken;
} waiter;

static void waiter_wake(void *ctx) {
  waiter *w = ctx;
  pthread_mutex_lock(&w->mu);
  w->woken = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static fetch_status run_sync(fetcher *f, const module_id *m, bool image, st_format fmt,
                             fetch_verify_fn verify, void *ctx, char *path_out, size_t path_cap,
                             char *source_out, size_t source_cap, ps_diag *diag) {
  if (path_out && path_cap)
    path_out[0] = '\0';
  if (source_out && source_cap)
    source_out[0] = '\0';
  if (!path_out || !path_cap) {
    ps_diag_set(diag, PS_E_INVALID, "fetch", (size_t)-1, "no output buffer");
    return FETCH_ERROR;
  }
  waiter w;
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  w.woken = false;
  fetch_op *op = fetch_op_new(f, m, image, fmt, waiter_wake, &w, diag);
  fetch_status st = FETCH_ERROR;
  static _Thread_local fetch_result res;
  if (op) {
    for (;;) {
      st = fetch_op_step(op, verify, ctx, &res, diag);
      if (st != FETCH_PENDING)
        break;
      pthread_mutex_lock(&w.mu);
      while (!w.woken)
        pthread_cond_wait(&w.cv, &w.mu);
      w.woken = false;
      pthread_mutex_unlock(&w.mu);
    }
    fetch_op_free(op);
  }
  pthread_mutex_destroy(&w.mu);
  pthread_cond_destroy(&w.cv);
  if (st == FETCH_FOUND) {
    if (strlen(res.path) >= path_cap) {
      fetch_result_done(f, &res);
      ps_diag_set(diag, PS_E_INVALID, "fetch", (size_t)-1, "path buffer too small");
      return FETCH_ERROR;
    }
    result_uncount(f, &res); /* the caller's file from now on */
    snprintf(path_out, path_cap, "%s", res.path);
    if (source_out && source_cap)
      snprintf(source_out, source_cap, "%s", res.source);
  }
  return st;
}

fetch_status fetch_pdb(fetcher *f, const module_id *m, st_format fmt, fetch_verify_fn verify,
                       void *ctx, char *path_out, size_t path_cap, char *source_out,
                       size_t source_cap, ps_diag *diag) {
  return run_sync(f, m, false, fmt, verify, ctx, path_out, path_cap, source_out, source_cap,
                  diag);
}

fetch_status fetch_image(fetcher *f, const module_id *m, fetch_verify_fn verify, void *ctx,
                         char *path_out, size_t path_cap, char *source_out, size_t source_cap,
                         ps_diag *diag) {
  return run_sync(f, m, true, ST_FORMAT_UNKNOWN, verify, ctx, path_out, path_cap, source_out,
                  source_cap, diag);
}

/* ------------------------------------------ checking a symbol path alone */

/* Parses path as fetch_open would, into a fetcher that holds only its
 * sources.  NULL (with why set) when the path is bad. */
static fetcher *parse_alone(const char *path, char *why, size_t cap) {
  fetcher *f = calloc(1, sizeof *f);
  if (!f) {
    snprintf(why, cap, "out of memory");
    return NULL;
  }
  ps_diag d;
  ps_diag_clear(&d);
  if (parse_symbol_path(f, path, NULL, &d) != PS_E_OK) {
    snprintf(why, cap, "%s", d.detail[0] ? d.detail : "not a symbol path");
    for (size_t i = 0; i < f->nsrc; i++) {
      free(f->src[i].base);
      curl_slist_free_all(f->src[i].headers);
    }
    free(f);
    return NULL;
  }
  return f;
}

bool fetch_symbol_path_check(const char *path, char *why, size_t cap) {
  fetcher *f = parse_alone(path, why, cap);
  if (!f)
    return false;
  for (size_t i = 0; i < f->nsrc; i++) {
    free(f->src[i].base);
    curl_slist_free_all(f->src[i].headers);
  }
  free(f);
  return true;
}

size_t fetch_symbol_path_folders(const char *path, void (*each)(void *ctx, const char *folder),
                                 void *ctx) {
  char why[256];
  fetcher *f = parse_alone(path, why, sizeof why);
  if (!f)
    return 0;
  size_t n = 0;
  for (size_t i = 0; i < f->nsrc; i++) {
    if (!f->src[i].http) {
      n++;
      if (each)
        each(ctx, f->src[i].base);
    }
    free(f->src[i].base);
    curl_slist_free_all(f->src[i].headers);
  }
  free(f);
  return n;
}
