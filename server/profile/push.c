/*
 * push.c - windows pushed to a profile store that ingests pprof over HTTP
 * (Grafana Pyroscope's POST /ingest; see profile.h).
 *
 *   POST {profile_push}/ingest?name=SERVICE{labels}&from=S&until=S&format=pprof
 *        &spyName=pdbsym&sampleRate=HZ
 *   Content-Type: multipart/form-data: "profile" (the window's gzip'ed
 *   profile.proto) and "sample_type_config" (JSON: units and aggregation of
 *   each sample type the profile has, read from the profile itself)
 *   X-Scope-OrgID: profile_push_tenant; Authorization: profile_push_auth
 *
 * One thread sends the queue in order.  A window that gets no answer, a 5xx
 * or a 429 is sent again after a backoff (1 s doubled to 60 s); any other
 * answer ends it (2xx sent, else rejected, its body logged).  The queue holds
 * at most profile_push_queue windows and profile_push_queue_bytes bytes: past
 * either the oldest is dropped and counted.  No redirect is followed, so the
 * headers go to that origin only.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "deadline.h"
#include "fetch.h"
#include "log.h"
#include "profile.h"

#define NOPOS ((size_t)-1)
#define MAX_INFLATED ((size_t)256 << 20) /* a window's profile.proto read back for its types */
#define BACKOFF_MAX_MS 60000

typedef struct item {
  struct item *next;
  uint8_t *pprof;
  size_t len;
  char query[1536]; /* name=...&from=...&until=... */
  char stem[128];
  int pid;
} item;

struct prof_pusher {
  prof_push_config cfg;
  char url[1024], tenant[300], auth[1100], service[128], labels[512];
  pthread_t th;
  bool started, stopping;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  item *head, *tail;
  size_t n, bytes;
  uint64_t drain_until; /* while stopping: send until then */
};

static _Atomic uint64_t m_sent, m_rejected, m_dropped, m_errors;
static _Atomic long m_queued;

void prof_get_push_metrics(prof_push_metrics *m) {
  m->sent = atomic_load(&m_sent);
  m->rejected = atomic_load(&m_rejected);
  m->dropped = atomic_load(&m_dropped);
  m->errors = atomic_load(&m_errors);
  m->queued = (uint64_t)atomic_load(&m_queued);
}

static void plog(log_level lv, const char *msg, const item *it, const char *detail) {
  log_line l;
  log_begin(&l, lv, msg);
  if (it) {
    log_int(&l, "pid", it->pid);
    log_str(&l, "window", it->stem);
  }
  log_str(&l, "detail", detail);
  log_end(&l);
}

/* ---- the profile's sample types, read back ---- */

static bool varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
  *v = 0;
  for (unsigned s = 0; s < 64 && *i < n; s += 7) {
    uint8_t b = p[(*i)++];
    *v |= (uint64_t)(b & 0x7F) << s;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

/* Inflates a gzip'ed profile.proto (bounded); NULL on junk. */
static uint8_t *inflate_all(const uint8_t *gz, size_t n, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 32) != Z_OK)
    return NULL;
  size_t cap = n * 4 + 4096, len = 0;
  uint8_t *out = malloc(cap);
  z.next_in = (Bytef *)gz;
  z.avail_in = (uInt)n;
  int rc = Z_OK;
  while (out && rc == Z_OK) {
    if (len == cap) {
      if (cap >= MAX_INFLATED)
        break;
      uint8_t *no = realloc(out, cap * 2);
      if (!no)
        break;
      out = no;
      cap *= 2;
    }
    z.next_out = out + len;
    z.avail_out = (uInt)(cap - len);
    rc = inflate(&z, Z_NO_FLUSH);
    len = cap - z.avail_out;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  *out_len = len;
  return out;
}

/* {"TYPE":{"units":"UNIT","aggregation":"sum","display-name":"TYPE","sampled":true},...}
 * for each sample type of the profile, into out */
static bool sample_type_config(const uint8_t *gz, size_t n, char *out, size_t cap) {
  size_t len;
  uint8_t *p = inflate_all(gz, n, &len);
  if (!p)
    return false;
  /* the string table (field 6) and the sample types (field 1: ValueType{1 type, 2 unit}) */
  size_t nstr = 0, cstr = 256, ntypes = 0;
  const uint8_t **sp = malloc(cstr * sizeof *sp);
  size_t *sl = malloc(cstr * sizeof *sl);
  uint64_t types[16][2];
  bool ok = sp && sl;
  for (size_t i = 0; ok && i < len;) {
    uint64_t key, v;
    if (!varint(p, len, &i, &key)) {
      ok = false;
      break;
    }
    unsigned f = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
    if (wire == 0) {
      ok = varint(p, len, &i, &v);
    } else if (wire == 2) {
      if (!varint(p, len, &i, &v) || v > len - i) {
        ok = false;
        break;
      }
      const uint8_t *b = p + i;
      if (f == 6) {
        if (nstr == cstr) {
          cstr *= 2;
          const uint8_t **nsp = realloc(sp, cstr * sizeof *sp);
          size_t *nsl = nsp ? realloc(sl, cstr * sizeof *sl) : NULL;
          if (nsp)
            sp = nsp;
          if (!nsp || !nsl) {
            ok = false;
            break;
          }
          sl = nsl;
        }
        sp[nstr] = b;
        sl[nstr++] = (size_t)v;
      } else if (f == 1 && ntypes < 16) {
        size_t j = 0;
        types[ntypes][0] = types[ntypes][1] = 0;
        while (j < v) {
          uint64_t k2, v2;
          if (!varint(b, (size_t)v, &j, &k2) || (k2 & 7) != 0 || !varint(b, (size_t)v, &j, &v2))
            break;
          if ((k2 >> 3) == 1)
            types[ntypes][0] = v2;
          else if ((k2 >> 3) == 2)
            types[ntypes][1] = v2;
        }
        ntypes++;
      }
      i += (size_t)v;
    } else if (wire == 1 && i + 8 <= len) {
      i += 8;
    } else if (wire == 5 && i + 4 <= len) {
      i += 4;
    } else {
      ok = false;
    }
  }
  size_t o = 0;
  if (ok)
    o = (size_t)snprintf(out, cap, "{");
  for (size_t t = 0; ok && t < ntypes && o < cap; t++) {
    if (types[t][0] >= nstr || types[t][1] >= nstr) {
      ok = false;
      break;
    }
    char ty[64], un[64];
    snprintf(ty, sizeof ty, "%.*s", (int)(sl[types[t][0]] < 63 ? sl[types[t][0]] : 63),
             (const char *)sp[types[t][0]]);
    snprintf(un, sizeof un, "%.*s", (int)(sl[types[t][1]] < 63 ? sl[types[t][1]] : 63),
             (const char *)sp[types[t][1]]);
    for (char *c = ty; *c; c++) /* names of ours: letters, digits, _ */
      if (!isalnum((unsigned char)*c) && *c != '_')
        *c = '_';
    for (char *c = un; *c; c++)
      if (!isalnum((unsigned char)*c) && *c != '_')
        *c = '_';
    o += (size_t)snprintf(out + o, o < cap ? cap - o : 0,
                          "%s\"%s\":{\"units\":\"%s\",\"aggregation\":\"sum\",\"display-name\":"
                          "\"%s\",\"sampled\":true}",
                          t ? "," : "", ty, un, ty);
  }
  if (ok && o + 2 < cap)
    o += (size_t)snprintf(out + o, cap - o, "}");
  free(sp);
  free(sl);
  free(p);
  return ok && o < cap && ntypes > 0;
}

/* ---- the query ---- */

/* s with every byte but [A-Za-z0-9-._~] as %XX */
static size_t urlenc(const char *s, char *out, size_t cap) {
  size_t o = 0;
  for (; *s && o + 4 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
      out[o++] = (char)c;
    else
      o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
  }
  out[o] = '\0';
  return o;
}

/* a label value as Pyroscope's name syntax allows it: no , = { } or space */
static void clean_value(const char *s, char *out, size_t cap) {
  size_t o = 0;
  for (; *s && o + 1 < cap; s++) {
    char c = *s;
    out[o++] = (c == ',' || c == '=' || c == '{' || c == '}' || c == ' ' || c == '"') ? '_' : c;
  }
  out[o] = '\0';
}

/* ---- the thread ---- */

static bool post(prof_pusher *p, const item *it, long *status, char *resp, size_t rcap,
                 char *err, size_t ecap) {
  char cfg[2048];
  if (!sample_type_config(it->pprof, it->len, cfg, sizeof cfg)) {
    snprintf(err, ecap, "the window's pprof could not be read back");
    *status = -1;
    return false;
  }
  static const char boundary[] = "pdbsym-3f6b2c9e1d7a4850";
  char head1[256], head2[256], tail[64];
  int h1 = snprintf(head1, sizeof head1,
                    "--%s\r\nContent-Disposition: form-data; name=\"profile\"; "
                    "filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                    boundary);
  int h2 = snprintf(head2, sizeof head2,
                    "\r\n--%s\r\nContent-Disposition: form-data; name=\"sample_type_config\"; "
                    "filename=\"sample_type_config.json\"\r\nContent-Type: application/json\r\n\r\n",
                    boundary);
  int tl = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
  size_t cl = strlen(cfg);
  size_t len = (size_t)h1 + it->len + (size_t)h2 + cl + (size_t)tl;
  uint8_t *body = malloc(len);
  if (!body) {
    snprintf(err, ecap, "out of memory");
    return false;
  }
  size_t o = 0;
  memcpy(body + o, head1, (size_t)h1);
  o += (size_t)h1;
  memcpy(body + o, it->pprof, it->len);
  o += it->len;
  memcpy(body + o, head2, (size_t)h2);
  o += (size_t)h2;
  memcpy(body + o, cfg, cl);
  o += cl;
  memcpy(body + o, tail, (size_t)tl);
  char url[3072], ct[96];
  snprintf(url, sizeof url, "%s/ingest?%s", p->url, it->query);
  snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", boundary);
  const char *hdrs[2];
  char tenant[340], auth[1130];
  size_t nh = 0;
  if (p->tenant[0]) {
    snprintf(tenant, sizeof tenant, "X-Scope-OrgID: %s", p->tenant);
    hdrs[nh++] = tenant;
  }
  if (p->auth[0]) {
    snprintf(auth, sizeof auth, "Authorization: %s", p->auth);
    hdrs[nh++] = auth;
  }
  long to = (long)(p->cfg.timeout_ms ? p->cfg.timeout_ms : 10000);
  bool got = fetch_http_post(url, hdrs, nh, ct, body, len, to < 5000 ? to : 5000, to, status, resp,
                             rcap, err, ecap);
  free(body);
  return got;
}

static void drop_head(prof_pusher *p) {
  item *it = p->head;
  p->head = it->next;
  if (!p->head)
    p->tail = NULL;
  p->n--;
  p->bytes -= it->len;
  atomic_fetch_sub(&m_queued, 1);
  free(it->pprof);
  free(it);
}

static void *push_main(void *arg) {
  prof_pusher *p = arg;
  uint64_t backoff = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->stopping)
      pthread_cond_wait(&p->cv, &p->mu);
    if (!p->head || (p->stopping && ds_now_ms() >= p->drain_until))
      break;
    item *it = p->head; /* only this thread removes the head */
    pthread_mutex_unlock(&p->mu);
    long status = 0;
    char resp[256], err[256] = "";
    bool got = post(p, it, &status, resp, sizeof resp, err, sizeof err);
    pthread_mutex_lock(&p->mu);
    if (got && status >= 200 && status < 300) {
      atomic_fetch_add(&m_sent, 1);
      backoff = 0;
      if (p->head == it)
        drop_head(p);
      continue;
    }
    if (status == -1 || (got && status < 500 && status != 429 && status != 408)) {
      /* refused for good: its body says why */
      atomic_fetch_add(&m_rejected, 1);
      char detail[400];
      snprintf(detail, sizeof detail, "HTTP %ld: %.300s", status, got ? resp : err);
      pthread_mutex_unlock(&p->mu);
      plog(LOG_WARN, "profile push rejected", it, detail);
      pthread_mutex_lock(&p->mu);
      if (p->head == it)
        drop_head(p);
      backoff = 0;
      continue;
    }
    atomic_fetch_add(&m_errors, 1);
    backoff = backoff ? (backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS) : 1000;
    char detail[400];
    if (got)
      snprintf(detail, sizeof detail, "HTTP %ld, sent again in %llu ms", status,
               (unsigned long long)backoff);
    else
      snprintf(detail, sizeof detail, "%s, sent again in %llu ms", err,
               (unsigned long long)backoff);
    pthread_mutex_unlock(&p->mu);
    plog(LOG_WARN, "profile push failed", it, detail);
    pthread_mutex_lock(&p->mu);
    /* wait the backoff, or until stopping's drain time */
    uint64_t until = ds_now_ms() + backoff;
    while (!p->stopping || ds_now_ms() < p->drain_until) {
      uint64_t now = ds_now_ms();
      uint64_t end = p->stopping && p->drain_until < until ? p->drain_until : until;
      if (now >= end)
        break;
      struct timespec ts = deadline_after_ms(end - now);
      pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

ps_err prof_pusher_start(const prof_push_config *c, prof_pusher **out, ps_diag *d) {
  *out = NULL;
  if (!c->url || (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8)))
    return ps_diag_set(d, PS_E_INVALID, "profile push", NOPOS,
                       "profile_push: '%s' is not an http:// or https:// URL", c->url ? c->url : "");
  prof_pusher *p = calloc(1, sizeof *p);
  if (!p)
    return ps_diag_set(d, PS_E_NOMEM, "profile push", NOPOS, "out of memory");
  p->cfg = *c;
  snprintf(p->url, sizeof p->url, "%s", c->url);
  size_t ul = strlen(p->url);
  while (ul && p->url[ul - 1] == '/')
    p->url[--ul] = '\0';
  snprintf(p->tenant, sizeof p->tenant, "%s", c->tenant ? c->tenant : "");
  snprintf(p->auth, sizeof p->auth, "%s", c->auth ? c->auth : "");
  snprintf(p->service, sizeof p->service, "%s", c->service ? c->service : "");
  snprintf(p->labels, sizeof p->labels, "%s", c->labels ? c->labels : "");
  if (!p->cfg.queue_max)
    p->cfg.queue_max = 100;
  if (!p->cfg.queue_bytes)
    p->cfg.queue_bytes = (uint64_t)64 << 20;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (pthread_create(&p->th, NULL, push_main, p) != 0) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return ps_diag_set(d, PS_E_NOMEM, "profile push", NOPOS, "no thread for the push");
  }
  p->started = true;
  *out = p;
  return PS_E_OK;
}

void prof_pusher_add(prof_pusher *p, const uint8_t *pprof, size_t len, const prof_status *st,
                     uint64_t start_ns, uint64_t end_ns, const char *stem) {
  if (!p)
    return;
  item *it = calloc(1, sizeof *it);
  uint8_t *copy = it ? malloc(len ? len : 1) : NULL;
  if (!it || !copy) {
    free(it);
    atomic_fetch_add(&m_dropped, 1);
    return;
  }
  memcpy(copy, pprof, len);
  it->pprof = copy;
  it->len = len;
  it->pid = st->pid;
  snprintf(it->stem, sizeof it->stem, "%s", stem);
  /* SERVICE{pid=..,process=..,runtime=..,SETTINGS' LABELS} */
  char name[1024], v1[80], v2[80];
  clean_value(st->comm, v1, sizeof v1);
  clean_value(st->clr_version[0] ? st->clr_version : "unknown", v2, sizeof v2);
  int n = snprintf(name, sizeof name, "%s{pid=%d,process=%s,runtime=%s",
                   p->service[0] ? p->service : v1, st->pid, v1, v2);
  if (p->labels[0] && n > 0 && (size_t)n < sizeof name)
    n += snprintf(name + n, sizeof name - (size_t)n, ",%s", p->labels);
  if (n > 0 && (size_t)n < sizeof name - 1)
    snprintf(name + n, sizeof name - (size_t)n, "}");
  char enc[1200];
  urlenc(name, enc, sizeof enc);
  uint64_t from = start_ns / 1000000000u, until = (end_ns + 999999999u) / 1000000000u;
  snprintf(it->query, sizeof it->query,
           "name=%s&from=%llu&until=%llu&format=pprof&spyName=pdbsym&sampleRate=1000", enc,
           (unsigned long long)from, (unsigned long long)(until > from ? until : from + 1));
  pthread_mutex_lock(&p->mu);
  /* room for it: the oldest windows dropped */
  while (p->head && p->head->next &&
         (p->n + 1 > p->cfg.queue_max || p->bytes + len > p->cfg.queue_bytes)) {
    /* (the head may be on its way: the one after it goes instead) */
    item *victim = p->head->next;
    p->head->next = victim->next;
    if (p->tail == victim)
      p->tail = p->head;
    p->n--;
    p->bytes -= victim->len;
    atomic_fetch_sub(&m_queued, 1);
    atomic_fetch_add(&m_dropped, 1);
    free(victim->pprof);
    free(victim);
  }
  if (p->tail)
    p->tail->next = it;
  else
    p->head = it;
  p->tail = it;
  p->n++;
  p->bytes += len;
  atomic_fetch_add(&m_queued, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void prof_pusher_stop(prof_pusher *p, uint64_t drain_ms) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  p->drain_until = ds_now_ms() + drain_ms;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (p->started)
    pthread_join(p->th, NULL);
  while (p->head) { /* not sent in time */
    atomic_fetch_add(&m_dropped, 1);
    drop_head(p);
  }
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
