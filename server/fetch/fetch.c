/*
 * fetch.c - the symbol-server client: sources, keys, probing, downloads.
 *
 * server/fetch/ is the only room that includes curl/curl.h.  See fetch.h
 * for the interface and docs/fetch.md for the symbol-path syntax and the
 * probing order.
 *
 * One fetch_pdb call:
 *
 *   for each source (in symbol-path order)
 *     for each key variant (the one that hit last on this source first)
 *       download (HTTP, with retries) or copy (folder) into tmp/.pdbsym-XXXXXX.part
 *       404 / missing file        -> next variant
 *       file.ptr                  -> follow PATH: (once), or note MSG: and go on
 *       other failure             -> give up this source, remember the error
 *       "MSCF" at offset 0        -> extract the member (capped) into another .part
 *       verify callback says no   -> mismatch: give up this source
 *       else                      -> link .part to tmp/pdbsym-XXXXXX.<ext>, done
 *
 * Every .part file is unlinked on every path out.
 */
#include "fetch.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cab.h"

#define FETCH_USER_AGENT "pdbsym/" PDBSYM_VERSION
#define FETCH_PTR_MAX 4096 /* a file.ptr larger than this is not one */
#define FETCH_MAX_SOURCES 32
#define FETCH_MAX_BACKOFF_MS 8000L

/* Key variants, in default probing order (see docs/fetch.md). */
enum {
  V_PLAIN,          /* name/KEY/name */
  V_COMPRESSED,     /* name/KEY/nam_ (CAB) */
  V_FILEPTR,        /* name/KEY/file.ptr */
  V_LOWER,          /* SSQP: lower(name)/lower(KEY)/lower(name) */
  V_INDEX2,         /* na/name/KEY/name (index2.txt two-tier layout) */
  V_INDEX2_COMPRESSED,
  V_INDEX2_FILEPTR,
};
_Static_assert(V_INDEX2_FILEPTR + 1 == FETCH_VARIANTS, "variant count");

enum { TIER_UNKNOWN, TIER_FLAT, TIER_INDEX2 };

typedef struct {
  bool http;
  char *base;
  struct curl_slist *headers;
  size_t nheaders;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int active;      /* transfers running against this source */
  int hit[2];      /* last variant that hit, per kind (0 PDB, 1 PE); -1 none */
  int tier;        /* flat or index2, once known */
} fetch_source;

struct fetcher {
  char *tmp_dir;
  uint64_t max_download;
  uint64_t max_inflated;
  long connect_timeout_ms;
  long low_speed_time;
  long low_speed_limit;
  int max_retries;
  int max_redirects;
  int max_parallel;
  long retry_base_ms;
  fetch_source src[FETCH_MAX_SOURCES];
  size_t nsrc;
};

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

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
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
  s->hit[0] = s->hit[1] = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
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

/* ------------------------------------------------------------ open/close */

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
  const char *tmp = cfg->tmp_dir && *cfg->tmp_dir ? cfg->tmp_dir : getenv("TMPDIR");
  f->tmp_dir = strdup(tmp && *tmp ? tmp : "/tmp");
  f->max_download = cfg->max_download_bytes ? cfg->max_download_bytes : (uint64_t)2 << 30;
  f->max_inflated = cfg->max_inflated_bytes ? cfg->max_inflated_bytes : (uint64_t)4 << 30;
  f->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 10000;
  f->low_speed_time = cfg->low_speed_time_s > 0 ? cfg->low_speed_time_s : 30;
  f->low_speed_limit = cfg->low_speed_limit > 0 ? cfg->low_speed_limit : 1024;
  f->max_retries = cfg->max_retries > 0 ? cfg->max_retries : cfg->max_retries < 0 ? 0 : 3;
  f->max_redirects = cfg->max_redirects > 0 ? cfg->max_redirects : 5;
  f->max_parallel = cfg->max_parallel_per_source > 0 ? cfg->max_parallel_per_source : 4;
  f->retry_base_ms = cfg->retry_base_ms > 0 ? cfg->retry_base_ms : 250;
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
  for (size_t i = 0; i < f->nsrc; i++) {
    free(f->src[i].base);
    curl_slist_free_all(f->src[i].headers);
    pthread_mutex_destroy(&f->src[i].mu);
    pthread_cond_destroy(&f->src[i].cv);
  }
  free(f->tmp_dir);
  free(f);
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

size_t fetch_source_count(const fetcher *f) { return f ? f->nsrc : 0; }

bool fetch_source_get(const fetcher *f, size_t i, fetch_source_info *out) {
  if (!f || i >= f->nsrc)
    return false;
  out->http = f->src[i].http;
  out->base = f->src[i].base;
  out->nheaders = f->src[i].nheaders;
  return true;
}

/* ------------------------------------------------------------------ keys */

/* The file name, key directory and compressed name for a module. */
typedef struct {
  char name[MODULE_NAME_MAX + 1];
  char key[48];
} fetch_key;

static bool make_key(const module_id *m, st_format fmt, bool image, fetch_key *k) {
  const char *why;
  if (image) {
    if (!m->has_code_id || !m->code_file[0] ||
        !module_parse_file_name(m->code_file, k->name, sizeof k->name, &why))
      return false;
    snprintf(k->key, sizeof k->key, "%08X%X", m->code_timestamp, m->code_size);
  } else {
    if (!module_parse_file_name(m->debug_file, k->name, sizeof k->name, &why))
      return false;
    char idx[42];
    module_index_key(m, fmt, idx);
    snprintf(k->key, sizeof k->key, "%s", idx);
  }
  return true;
}

static void variant_path(const fetch_key *k, int v, char out[FETCH_REL_MAX]) {
  char name[MODULE_NAME_MAX + 1], key[48], file[MODULE_NAME_MAX + 1], prefix[8] = "";
  snprintf(name, sizeof name, "%s", k->name);
  snprintf(key, sizeof key, "%s", k->key);
  snprintf(file, sizeof file, "%s", k->name);
  if (v == V_COMPRESSED || v == V_INDEX2_COMPRESSED)
    file[strlen(file) - 1] = '_';
  if (v == V_FILEPTR || v == V_INDEX2_FILEPTR)
    snprintf(file, sizeof file, "file.ptr");
  if (v == V_LOWER) {
    str_lower(name);
    str_lower(key);
    str_lower(file);
  }
  if (v >= V_INDEX2) {
    size_t n = strlen(name) < 2 ? strlen(name) : 2;
    memcpy(prefix, name, n);
    prefix[n] = '/';
    prefix[n + 1] = '\0';
  }
  snprintf(out, FETCH_REL_MAX, "%s%s/%s/%s", prefix, name, key, file);
}

size_t fetch_candidates(const module_id *m, st_format fmt, bool image,
                        char out[FETCH_VARIANTS][FETCH_REL_MAX]) {
  fetch_key k;
  if (!make_key(m, fmt, image, &k))
    return 0;
  for (int v = 0; v < FETCH_VARIANTS; v++)
    variant_path(&k, v, out[v]);
  return FETCH_VARIANTS;
}

/* ------------------------------------------------------------- temp files */

typedef struct {
  char path[1024];
  int fd;
} tmpfile_t;

static bool tmp_create(fetcher *f, tmpfile_t *t, ps_diag *diag) {
  snprintf(t->path, sizeof t->path, "%s/.pdbsym-XXXXXX.part", f->tmp_dir);
  t->fd = mkstemps(t->path, 5);
  if (t->fd < 0) {
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot create a file in %.100s: %s",
                f->tmp_dir, strerror(errno));
    t->path[0] = '\0';
    return false;
  }
  return true;
}

static void tmp_drop(tmpfile_t *t) {
  if (t->fd >= 0)
    close(t->fd);
  t->fd = -1;
  if (t->path[0])
    unlink(t->path);
  t->path[0] = '\0';
}

static bool tmp_rewind(tmpfile_t *t) {
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

/* ------------------------------------------------------------- transfers */

typedef enum { DL_OK, DL_NOT_FOUND, DL_ERROR } dl_result;

typedef struct {
  int fd;
  uint64_t written, cap;
  bool over, io_error;
} sink_ctx;

static size_t curl_write_cb(char *data, size_t size, size_t nmemb, void *ud) {
  sink_ctx *s = ud;
  size_t n = size * nmemb;
  if (s->written + n > s->cap) {
    s->over = true;
    return 0;
  }
  if (!write_all(s->fd, data, n)) {
    s->io_error = true;
    return 0;
  }
  s->written += n;
  return n;
}

static void slot_acquire(fetcher *f, fetch_source *s) {
  pthread_mutex_lock(&s->mu);
  while (s->active >= f->max_parallel)
    pthread_cond_wait(&s->cv, &s->mu);
  s->active++;
  pthread_mutex_unlock(&s->mu);
}

static void slot_release(fetch_source *s) {
  pthread_mutex_lock(&s->mu);
  s->active--;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
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

/* GETs url into t (rewound first) with retries.  DL_NOT_FOUND on 404/410;
 * DL_ERROR with diag otherwise.  final_url gets the effective URL. */
/* Length of "scheme://host[:port]" at the start of url. */
static size_t origin_len(const char *url) {
  const char *p = strstr(url, "://");
  if (!p)
    return 0;
  p += 3;
  return (size_t)(p - url) + strcspn(p, "/?#");
}

/* true when url has the same scheme, host and port as the source's base */
static bool same_origin(const fetch_source *s, const char *url) {
  size_t a = origin_len(s->base), b = origin_len(url);
  if (!a || a != b)
    return false;
  for (size_t i = 0; i < a; i++)
    if (tolower((unsigned char)s->base[i]) != tolower((unsigned char)url[i]))
      return false;
  return true;
}

static dl_result http_get(fetcher *f, fetch_source *s, CURL *c, const char *url, tmpfile_t *t,
                          uint64_t cap, char *final_url, size_t final_cap, ps_diag *diag) {
  for (int attempt = 0;; attempt++) {
    if (!tmp_rewind(t)) {
      ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot truncate %.100s", t->path);
      return DL_ERROR;
    }
    sink_ctx sk = {t->fd, 0, cap, false, false};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)f->max_redirects);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, f->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, f->low_speed_limit);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, f->low_speed_time);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(c, CURLOPT_USERAGENT, FETCH_USER_AGENT);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)cap);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sk);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    /* the source's headers (tokens) go to its own origin only: not to a
     * file.ptr URL elsewhere (libcurl itself drops Authorization and
     * Cookie on redirects to another host) */
    if (s->headers && same_origin(s, url))
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, s->headers);

    slot_acquire(f, s);
    CURLcode rc = curl_easy_perform(c);
    slot_release(s);

    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    char *eff = NULL;
    curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
    if (final_url)
      snprintf(final_url, final_cap, "%s", eff ? eff : url);

    bool retry = false;
    if (rc == CURLE_OK) {
      if (code >= 200 && code < 300)
        return DL_OK;
      ps_diag_set(diag, PS_E_NETWORK, "fetch", (size_t)-1, "HTTP %ld from %.120s", code, url);
      return DL_ERROR;
    }
    if (sk.over || rc == CURLE_FILESIZE_EXCEEDED) {
      ps_diag_set(diag, PS_E_LIMIT, "fetch", (size_t)-1,
                  "%.120s is larger than the %llu-byte cap", url, (unsigned long long)cap);
      return DL_ERROR;
    }
    if (sk.io_error) {
      ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot write %.100s: %s", t->path,
                  strerror(errno));
      return DL_ERROR;
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR) {
      if (code == 404 || code == 410)
        return DL_NOT_FOUND;
      retry = code >= 500 || code == 429 || code == 408;
      ps_diag_set(diag, PS_E_NETWORK, "fetch", (size_t)-1, "HTTP %ld from %.120s%s", code, url,
                  retry ? " (after retries)" : "");
    } else {
      retry = retryable_curl(rc);
      ps_diag_set(diag, rc == CURLE_OPERATION_TIMEDOUT ? PS_E_TIMEOUT : PS_E_NETWORK, "fetch",
                  (size_t)-1, "%.120s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    if (!retry || attempt >= f->max_retries)
      return DL_ERROR;
    /* the diag is sticky (first error wins): clear it before the next try */
    ps_diag_clear(diag);
    long backoff = f->retry_base_ms << (attempt < 10 ? attempt : 10);
    if (backoff > FETCH_MAX_BACKOFF_MS)
      backoff = FETCH_MAX_BACKOFF_MS;
    /* jitter from the clock and pid, so processes that failed together do
     * not retry together */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned seed = (unsigned)now.tv_nsec ^ (unsigned)getpid() ^ (unsigned)attempt;
    backoff = backoff * 3 / 4 + (long)((unsigned long)rand_r(&seed) % (unsigned long)(backoff / 2 + 1));
    sleep_ms(backoff);
  }
}

/* Copies a local file into t.  DL_NOT_FOUND when it does not exist. */
static dl_result file_get(const char *path, tmpfile_t *t, uint64_t cap, ps_diag *diag) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return DL_NOT_FOUND;
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot open %.120s: %s", path,
                strerror(errno));
    return DL_ERROR;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return DL_NOT_FOUND;
  }
  if ((uint64_t)st.st_size > cap) {
    close(fd);
    ps_diag_set(diag, PS_E_LIMIT, "fetch", (size_t)-1, "%.120s is larger than the %llu-byte cap",
                path, (unsigned long long)cap);
    return DL_ERROR;
  }
  if (!tmp_rewind(t)) {
    close(fd);
    ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot truncate %.100s", t->path);
    return DL_ERROR;
  }
  char buf[65536];
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      close(fd);
      ps_diag_set(diag, PS_E_IO, "fetch", (size_t)-1, "cannot read %.120s", path);
      return DL_ERROR;
    }
    if (n == 0)
      break;
    total += (uint64_t)n;
    if (total > cap || !write_all(t->fd, buf, (size_t)n)) {
      close(fd);
      ps_diag_set(diag, total > cap ? PS_E_LIMIT : PS_E_IO, "fetch", (size_t)-1,
                  "copying %.120s failed", path);
      return DL_ERROR;
    }
  }
  close(fd);
  return DL_OK;
}

/* ------------------------------------------------------- post-processing */

typedef struct {
  int fd;
} fd_sink;

static ps_err cab_to_fd(void *ctx, const uint8_t *data, size_t len) {
  return write_all(((fd_sink *)ctx)->fd, data, len) ? PS_E_OK : PS_E_IO;
}

/* If t holds a cabinet, replaces it by the member named want (or the only
 * member), extracted under the inflated cap.  Returns false with diag set
 * when the cabinet is refused. */
static bool maybe_uncab(fetcher *f, tmpfile_t *t, const char *want, ps_diag *diag) {
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
  tmpfile_t out = {"", -1};
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
  fd_sink fs = {out.fd};
  if (cab_extract(a, i, f->max_inflated, cab_to_fd, &fs, diag) != PS_E_OK)
    goto done;
  ok = true;
done:
  cab_close(a);
  munmap(map, len);
  if (ok) {
    tmp_drop(t);
    *t = out;
  } else {
    tmp_drop(&out);
  }
  return ok;
}

/* Reads a file.ptr from t: "PATH:target" or "MSG:text". */
static bool read_ptr(tmpfile_t *t, char *kind, size_t kcap, char *val, size_t vcap) {
  char buf[FETCH_PTR_MAX + 1];
  ssize_t n = pread(t->fd, buf, FETCH_PTR_MAX, 0);
  if (n <= 0)
    return false;
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

/* ---------------------------------------------------------------- probing */

typedef struct {
  fetcher *f;
  CURL *curl;
  const char *want;           /* member name inside a cabinet */
  fetch_verify_fn verify;
  void *vctx;
  ps_diag err;                /* the most telling failure so far */
  int err_rank;               /* 0 none, 1 MSG:, 2 error, 3 mismatch */
  char *path_out, *source_out;
  size_t path_cap, source_cap;
} probe_ctx;

static void note_error(probe_ctx *p, const ps_diag *d, int rank) {
  if (rank > p->err_rank) {
    p->err = *d;
    p->err_rank = rank;
  }
}

/* Downloads from one location (URL or path).  Returns DL_OK with t holding
 * the raw bytes. */
static dl_result get_one(probe_ctx *p, fetch_source *s, const char *loc, bool is_url,
                         tmpfile_t *t, uint64_t cap, char *where, size_t where_cap,
                         ps_diag *d) {
  if (is_url)
    return http_get(p->f, s, p->curl, loc, t, cap, where, where_cap, d);
  snprintf(where, where_cap, "%s", loc);
  return file_get(loc, t, cap, d);
}

/* Tries variant v of key k on source s.  DL_OK: found and accepted (the
 * outputs are filled); DL_NOT_FOUND: go on with the next variant; DL_ERROR:
 * give up this source. */
static dl_result try_variant(probe_ctx *p, fetch_source *s, const fetch_key *k, int v) {
  fetcher *f = p->f;
  char rel[FETCH_REL_MAX], loc[2048], where[2048];
  variant_path(k, v, rel);
  if (s->http) {
    char esc[FETCH_REL_MAX * 3];
    if (!fetch_url_escape(rel, esc, sizeof esc))
      return DL_NOT_FOUND;
    int n = snprintf(loc, sizeof loc, "%s/%s", s->base, esc);
    if (n < 0 || (size_t)n >= sizeof loc)
      return DL_NOT_FOUND;
  } else {
    int n = snprintf(loc, sizeof loc, "%s/%s", s->base, rel);
    if (n < 0 || (size_t)n >= sizeof loc)
      return DL_NOT_FOUND;
  }
  tmpfile_t t = {"", -1};
  ps_diag d;
  ps_diag_clear(&d);
  if (!tmp_create(f, &t, &d)) {
    note_error(p, &d, 2);
    return DL_ERROR;
  }
  bool is_ptr = v == V_FILEPTR || v == V_INDEX2_FILEPTR;
  dl_result r = get_one(p, s, loc, s->http, &t, is_ptr ? FETCH_PTR_MAX : f->max_download, where,
                        sizeof where, &d);
  if (r == DL_OK && is_ptr) {
    char kind[16], val[1024];
    if (!read_ptr(&t, kind, sizeof kind, val, sizeof val)) {
      r = DL_NOT_FOUND;
    } else if (!strcmp(kind, "MSG")) {
      ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1, "%.110s says: %.70s", where, val);
      note_error(p, &d, 1);
      r = DL_NOT_FOUND;
    } else if (!strcmp(kind, "PATH") && !has_ctl(val) && val[0]) {
      /* A URL is followed from any source; a path only from a folder source
       * (a remote server cannot make us read local files). */
      bool url = is_http_url(val);
      if (!url && s->http) {
        ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1,
                    "%.110s names a path, not a URL: %.60s", where, val);
        note_error(p, &d, 1);
        r = DL_NOT_FOUND;
      } else {
        char target[2048];
        if (url) {
          snprintf(target, sizeof target, "%s", val);
        } else {
          for (char *c = val; *c; c++)
            if (*c == '\\')
              *c = '/';
          if (val[0] == '/')
            snprintf(target, sizeof target, "%s", val);
          else
            snprintf(target, sizeof target, "%s/%s", s->base, val);
        }
        ps_diag_clear(&d);
        r = get_one(p, s, target, url, &t, f->max_download, where, sizeof where, &d);
        if (r == DL_NOT_FOUND) {
          ps_diag_set(&d, PS_E_NOT_FOUND, "file.ptr", (size_t)-1,
                      "file.ptr target missing: %.120s", target);
          note_error(p, &d, 1);
        }
      }
    } else {
      r = DL_NOT_FOUND;
    }
  }
  if (r == DL_OK && !maybe_uncab(f, &t, p->want, &d))
    r = DL_ERROR;
  if (r == DL_OK && p->verify) {
    ps_diag vd;
    ps_diag_clear(&vd);
    if (!p->verify(p->vctx, t.path, &vd)) {
      if (vd.code == PS_E_OK)
        ps_diag_set(&vd, PS_E_MISMATCH, "verify", (size_t)-1, "rejected");
      ps_diag_set(&d, vd.code == PS_E_OK ? PS_E_MISMATCH : vd.code, "verify", (size_t)-1,
                  "%.100s: %.80s", where, vd.detail);
      note_error(p, &d, 3);
      tmp_drop(&t);
      return DL_ERROR;
    }
  }
  if (r == DL_OK) {
    /* hand over: .pdbsym-XXXXXX.part -> pdbsym-XXXXXX.<ext>, exclusively */
    char final[1100];
    const char *base = strrchr(t.path, '/');
    base = base ? base + 1 : t.path;
    const char *dot = strrchr(k->name, '.');
    snprintf(final, sizeof final, "%.*s%.*s%s", (int)(base - t.path), t.path, 13, base + 1,
             dot ? dot : "");
    if (link(t.path, final) != 0) {
      ps_diag_set(&d, PS_E_IO, "fetch", (size_t)-1, "cannot link %.100s: %s", final,
                  strerror(errno));
      note_error(p, &d, 2);
      tmp_drop(&t);
      return DL_ERROR;
    }
    tmp_drop(&t);
    if (strlen(final) >= p->path_cap) {
      unlink(final);
      ps_diag_set(&d, PS_E_INVALID, "fetch", (size_t)-1, "path buffer too small");
      note_error(p, &d, 2);
      return DL_ERROR;
    }
    snprintf(p->path_out, p->path_cap, "%s", final);
    if (p->source_out)
      snprintf(p->source_out, p->source_cap, "%s", where);
    return DL_OK;
  }
  tmp_drop(&t);
  if (r == DL_ERROR)
    note_error(p, &d, 2);
  return r;
}

static bool local_has_index2(const fetch_source *s) {
  char p[1100];
  snprintf(p, sizeof p, "%s/index2.txt", s->base);
  return access(p, F_OK) == 0;
}

/* One source: the remembered variant first, then the default order, within
 * the tier (flat or index2) once it is known. */
static dl_result probe_source(probe_ctx *p, fetch_source *s, const fetch_key *k, int kind) {
  pthread_mutex_lock(&s->mu);
  int first = s->hit[kind];
  int tier = s->tier;
  pthread_mutex_unlock(&s->mu);
  if (!s->http)
    tier = local_has_index2(s) ? TIER_INDEX2 : TIER_FLAT;
  int order[FETCH_VARIANTS], n = 0;
  if (first >= 0)
    order[n++] = first;
  for (int v = 0; v < FETCH_VARIANTS; v++) {
    if (v == first)
      continue;
    bool idx2 = v >= V_INDEX2;
    if ((tier == TIER_FLAT && idx2) || (tier == TIER_INDEX2 && !idx2))
      continue;
    order[n++] = v;
  }
  for (int i = 0; i < n; i++) {
    dl_result r = try_variant(p, s, k, order[i]);
    if (r == DL_OK) {
      pthread_mutex_lock(&s->mu);
      s->hit[kind] = order[i];
      if (s->http)
        s->tier = order[i] >= V_INDEX2 ? TIER_INDEX2 : TIER_FLAT;
      pthread_mutex_unlock(&s->mu);
    }
    if (r != DL_NOT_FOUND)
      return r;
  }
  return DL_NOT_FOUND;
}

static fetch_status run_probe(fetcher *f, const fetch_key *keys, size_t nkeys, int kind,
                              fetch_verify_fn verify, void *ctx, char *path_out,
                              size_t path_cap, char *source_out, size_t source_cap,
                              ps_diag *diag) {
  probe_ctx p;
  memset(&p, 0, sizeof p);
  p.f = f;
  p.verify = verify;
  p.vctx = ctx;
  p.path_out = path_out;
  p.path_cap = path_cap;
  p.source_out = source_out;
  p.source_cap = source_cap;
  ps_diag_clear(&p.err);
  p.curl = curl_easy_init();
  if (!p.curl) {
    ps_diag_set(diag, PS_E_NOMEM, "fetch", (size_t)-1, "curl_easy_init failed");
    return FETCH_ERROR;
  }
  if (path_out && path_cap)
    path_out[0] = '\0';
  if (source_out && source_cap)
    source_out[0] = '\0';
  fetch_status st = FETCH_NOT_FOUND;
  for (size_t i = 0; i < f->nsrc && st != FETCH_FOUND; i++)
    for (size_t j = 0; j < nkeys; j++) {
      p.want = keys[j].name;
      dl_result r = probe_source(&p, &f->src[i], &keys[j], kind);
      if (r == DL_OK) {
        st = FETCH_FOUND;
        break;
      }
      if (r == DL_ERROR)
        break; /* this source is failing or served a wrong file: next source */
    }
  curl_easy_cleanup(p.curl);
  if (st == FETCH_FOUND)
    return st;
  if (p.err_rank >= 2) {
    if (diag)
      *diag = p.err;
    return FETCH_ERROR;
  }
  if (diag) {
    if (p.err_rank == 1)
      *diag = p.err;
    else
      ps_diag_set(diag, PS_E_NOT_FOUND, "fetch", (size_t)-1, "not on any of %zu source(s)",
                  f->nsrc);
  }
  return FETCH_NOT_FOUND;
}

fetch_status fetch_pdb(fetcher *f, const module_id *m, st_format fmt, fetch_verify_fn verify,
                       void *ctx, char *path_out, size_t path_cap, char *source_out,
                       size_t source_cap, ps_diag *diag) {
  fetch_key keys[2];
  size_t n = 0;
  st_format fmts[2] = {fmt, ST_FORMAT_UNKNOWN};
  if (fmt == ST_FORMAT_UNKNOWN) {
    fmts[0] = ST_FORMAT_WINDOWS;
    fmts[1] = ST_FORMAT_PORTABLE;
  }
  for (int i = 0; i < 2 && fmts[i] != ST_FORMAT_UNKNOWN; i++)
    if (make_key(m, fmts[i], false, &keys[n]))
      n++;
  if (!n || !path_out || !path_cap) {
    ps_diag_set(diag, PS_E_INVALID, "fetch", (size_t)-1, "invalid debug file name");
    return FETCH_ERROR;
  }
  return run_probe(f, keys, n, 0, verify, ctx, path_out, path_cap, source_out, source_cap,
                   diag);
}

fetch_status fetch_image(fetcher *f, const module_id *m, fetch_verify_fn verify, void *ctx,
                         char *path_out, size_t path_cap, char *source_out, size_t source_cap,
                         ps_diag *diag) {
  fetch_key k;
  if (!make_key(m, ST_FORMAT_UNKNOWN, true, &k) || !path_out || !path_cap) {
    ps_diag_set(diag, PS_E_INVALID, "fetch", (size_t)-1, "no valid code file and code id");
    return FETCH_ERROR;
  }
  return run_probe(f, &k, 1, 1, verify, ctx, path_out, path_cap, source_out, source_cap, diag);
}
