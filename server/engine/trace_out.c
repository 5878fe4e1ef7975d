/*
 * trace_out.c - the answers of a trace job: speedscope JSON, pprof, and a
 * top-N text, each written through the caller's callback while the spill
 * file is replayed, so none is ever held whole in memory.
 *
 *   speedscope  https://www.speedscope.app/file-format-schema.json: one
 *               "sampled" profile per thread ("Thread (TID)", as dotnet-trace
 *               names them), shared.frames with name (dotnet-trace's
 *               "Module!Namespace.Type.Method(args)"), file, line, col.  The
 *               spill file is replayed once per thread.
 *   pprof       github.com/google/pprof proto/profile.proto, gzip'ed: values
 *               samples/count and cpu/nanoseconds, one Location per frame (its
 *               Line with function, line, column), a "thread" label per
 *               sample.  Chosen over the Firefox Profiler's processed format:
 *               it streams (a Profile's repeated fields may come in any
 *               order, so samples go out as they are replayed), it is small,
 *               and pprof, speedscope, Perfetto and most profiler backends
 *               read it; the Firefox format needs whole per-thread tables
 *               before the first byte.
 *   top         the TOP frames by inclusive and by exclusive samples.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "internal_trace.h"
#include "jsonw.h"

/* ---- a buffered writer over the caller's callback ---- */

typedef struct {
  trace_write_fn w;
  void *ctx;
  uint8_t buf[1 << 16];
  size_t len;
  ps_err err;
  ps_diag *d;
  /* gzip (pprof) */
  bool gz;
  z_stream z;
  uint8_t zout[1 << 16];
} out_t;

static void raw_out(out_t *o, const void *p, size_t n) {
  if (o->err)
    return;
  o->err = o->w(o->ctx, p, n);
  if (o->err && o->d && o->d->code == PS_E_OK)
    ps_diag_set(o->d, o->err, "trace output", 0, "the answer could not be written");
}

static void gz_push(out_t *o, const uint8_t *p, size_t n, int flush) {
  o->z.next_in = (Bytef *)p;
  o->z.avail_in = (uInt)n;
  do {
    o->z.next_out = o->zout;
    o->z.avail_out = sizeof o->zout;
    deflate(&o->z, flush);
    raw_out(o, o->zout, sizeof o->zout - o->z.avail_out);
  } while (o->z.avail_out == 0 && !o->err);
}

static void flush_out(out_t *o) {
  if (o->len) {
    if (o->gz)
      gz_push(o, o->buf, o->len, Z_NO_FLUSH);
    else
      raw_out(o, o->buf, o->len);
  }
  o->len = 0;
}

static void put(out_t *o, const void *p, size_t n) {
  const uint8_t *q = p;
  while (n > 0 && !o->err) {
    size_t room = sizeof o->buf - o->len;
    size_t k = n < room ? n : room;
    memcpy(o->buf + o->len, q, k);
    o->len += k;
    q += k;
    n -= k;
    if (o->len == sizeof o->buf)
      flush_out(o);
  }
}

static void puts_(out_t *o, const char *s) { put(o, s, strlen(s)); }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void putf(out_t *o, const char *fmt, ...);
#include <stdarg.h>
static void putf(out_t *o, const char *fmt, ...) {
  char b[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  if (n > 0)
    put(o, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

/* a JSON string: UTF-8 passed through, control characters escaped, a byte
 * that is not part of a UTF-8 sequence (names and paths come from hostile
 * PDBs) written as U+FFFD, as jsonw does for the service's answers */
static void put_json_str(out_t *o, const char *s) {
  put(o, "\"", 1);
  const char *run = s;
  size_t left = strlen(s);
  for (const char *p = s; *p; p++, left--) {
    unsigned char c = (unsigned char)*p;
    if (c >= 0x80) {
      size_t len = jsonw_utf8_seq((const unsigned char *)p, left);
      if (len) {
        p += len - 1;
        left -= len - 1;
        continue;
      }
      put(o, run, (size_t)(p - run));
      put(o, "\xef\xbf\xbd", 3);
      run = p + 1;
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    put(o, run, (size_t)(p - run));
    if (c == '"')
      puts_(o, "\\\"");
    else if (c == '\\')
      puts_(o, "\\\\");
    else
      putf(o, "\\u%04x", c);
    run = p + 1;
  }
  puts_(o, run);
  put(o, "\"", 1);
}

static double ms_of(const trace_job *j, uint64_t ts) {
  if (!j->qpc_freq)
    return 0;
  double t = ts >= j->sync_qpc ? (double)(ts - j->sync_qpc) : -(double)(j->sync_qpc - ts);
  return t * 1000.0 / (double)j->qpc_freq;
}

/* ---- speedscope ---- */

/* One replay of the spill file writes the samples of up to SS_GROUP threads,
 * each into its own temporary file, which are then copied into the answer in
 * thread order: ceil(threads / SS_GROUP) replays, not one per thread. */
#define SS_GROUP 64

typedef struct {
  FILE *f[SS_GROUP];
  uint64_t written[SS_GROUP];
  const int *slot; /* thread index -> slot in f, or -1 */
  bool failed;
} ss_ctx;

static ps_err ss_sample(void *c, uint32_t thread, uint64_t ts, const uint32_t *frames,
                        uint32_t n) {
  (void)ts;
  ss_ctx *x = c;
  int k = x->slot[thread];
  if (k < 0)
    return PS_E_OK;
  FILE *f = x->f[k];
  if (x->written[k]++)
    fputc(',', f);
  fputc('[', f);
  for (uint32_t i = n; i > 0; i--) /* speedscope lists a stack from the root */
    fprintf(f, i == n ? "%u" : ",%u", frames[i - 1]);
  if (fputc(']', f) == EOF) {
    x->failed = true;
    return PS_E_IO;
  }
  return PS_E_OK;
}

static ps_err write_speedscope(trace_job *j, out_t *o, ps_diag *d) {
  puts_(o, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",");
  puts_(o, "\"exporter\":\"pdbsym " PDBSYM_VERSION "\",\"name\":");
  put_json_str(o, j->name);
  puts_(o, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
  for (size_t i = 0; i < j->nframes; i++) {
    const tj_frame *f = &j->frames[i];
    puts_(o, i ? ",{\"name\":" : "{\"name\":");
    put_json_str(o, tj_str(j, f->name));
    if (f->file) {
      puts_(o, ",\"file\":");
      put_json_str(o, tj_str(j, f->file));
      if (f->line)
        putf(o, ",\"line\":%u", f->line);
      if (f->column)
        putf(o, ",\"col\":%u", f->column);
    }
    put(o, "}", 1);
  }
  puts_(o, "]},\"profiles\":[");
  double weight = (double)j->sampling_ns / 1e6;
  char w[32];
  int wl = snprintf(w, sizeof w, "%g", weight);
  int *slot = malloc((j->nthreads ? j->nthreads : 1) * sizeof *slot);
  if (!slot)
    return ps_diag_set(d, PS_E_NOMEM, "trace output", 0, "out of memory");
  bool first = true;
  ps_err e = PS_E_OK;
  for (size_t t0 = 0; t0 < j->nthreads && !e && !o->err;) {
    /* the next group of threads with samples */
    ss_ctx x;
    memset(&x, 0, sizeof x);
    size_t members[SS_GROUP], nm = 0, t = t0;
    for (size_t i = 0; i < j->nthreads; i++)
      slot[i] = -1;
    for (; t < j->nthreads && nm < SS_GROUP; t++) {
      if (!j->threads[t].samples)
        continue;
      x.f[nm] = tj_tempfile(j, d);
      if (!x.f[nm]) {
        e = d->code;
        break;
      }
      slot[t] = (int)nm;
      members[nm++] = t;
    }
    t0 = t;
    x.slot = slot;
    if (!e && nm)
      e = tj_replay(j, ss_sample, &x, d);
    if (!e && x.failed)
      e = ps_diag_set(d, PS_E_IO, "trace output", 0, "temporary file: write failed");
    for (size_t k = 0; k < nm; k++) {
      const tj_thread *th = &j->threads[members[k]];
      if (!e && !o->err) {
        putf(o, "%s{\"type\":\"sampled\",\"name\":\"Thread (%llu)\",\"unit\":\"milliseconds\","
                "\"startValue\":%.6f,\"endValue\":%.6f,\"samples\":[",
             first ? "" : ",", (unsigned long long)th->tid, ms_of(j, th->first_ts),
             ms_of(j, th->last_ts) + weight);
        first = false;
        char buf[1 << 14];
        size_t got;
        if (fflush(x.f[k]) != 0 || fseek(x.f[k], 0, SEEK_SET) != 0)
          e = ps_diag_set(d, PS_E_IO, "trace output", 0, "temporary file: read failed");
        while (!e && (got = fread(buf, 1, sizeof buf, x.f[k])) > 0)
          put(o, buf, got);
        puts_(o, "],\"weights\":[");
        for (uint64_t s = 0; s < x.written[k] && !o->err; s++) {
          if (s)
            put(o, ",", 1);
          put(o, w, (size_t)wl);
        }
        puts_(o, "]}");
      }
      fclose(x.f[k]);
    }
  }
  free(slot);
  if (e)
    return e;
  puts_(o, "]}\n");
  return o->err;
}

/* ---- pprof ---- */

typedef struct {
  uint8_t *p;
  size_t len, cap;
} pbuf;

static void pb_byte(pbuf *b, uint8_t v) {
  if (b->len < b->cap)
    b->p[b->len++] = v;
}
static void pb_varint(pbuf *b, uint64_t v) {
  while (v >= 0x80) {
    pb_byte(b, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  pb_byte(b, (uint8_t)v);
}
static void pb_key(pbuf *b, uint32_t field, uint32_t wire) { pb_varint(b, field << 3 | wire); }
static void pb_uint(pbuf *b, uint32_t field, uint64_t v) {
  pb_key(b, field, 0);
  pb_varint(b, v);
}
static void pb_bytes(pbuf *b, uint32_t field, const void *p, size_t n) {
  pb_key(b, field, 2);
  pb_varint(b, n);
  for (size_t i = 0; i < n; i++)
    pb_byte(b, ((const uint8_t *)p)[i]);
}

/* emits one top-level field holding the message in m */
static void emit_msg(out_t *o, uint32_t field, const pbuf *m) {
  uint8_t hb[16];
  pbuf h = {hb, 0, sizeof hb};
  pb_key(&h, field, 2);
  pb_varint(&h, m->len);
  put(o, hb, h.len);
  put(o, m->p, m->len);
}

static void emit_string(out_t *o, const char *s) {
  uint8_t hb[16];
  pbuf h = {hb, 0, sizeof hb};
  size_t n = strlen(s);
  pb_key(&h, 6, 2);
  pb_varint(&h, n);
  put(o, hb, h.len);
  put(o, s, n);
}

typedef struct {
  out_t *o;
  trace_job *j;
  uint64_t period_ns;
  uint32_t thread_key; /* string index of "thread" */
} pp_ctx;

static ps_err pp_sample(void *c, uint32_t thread, uint64_t ts, const uint32_t *frames,
                        uint32_t n) {
  (void)ts;
  pp_ctx *x = c;
  uint8_t locs[TJ_MAX_FRAMES * 5 + 16], mb[TJ_MAX_FRAMES * 5 + 128], vb[32], lb[32];
  pbuf l = {locs, 0, sizeof locs}, m = {mb, 0, sizeof mb}, v = {vb, 0, sizeof vb},
       lab = {lb, 0, sizeof lb};
  for (uint32_t i = 0; i < n; i++) /* pprof lists a stack from the leaf */
    pb_varint(&l, (uint64_t)frames[i] + 1);
  pb_bytes(&m, 1, l.p, l.len);
  pb_varint(&v, 1);
  pb_varint(&v, x->period_ns);
  pb_bytes(&m, 2, v.p, v.len);
  pb_uint(&lab, 1, x->thread_key);
  pb_uint(&lab, 3, x->j->threads[thread].tid);
  pb_bytes(&m, 3, lab.p, lab.len);
  emit_msg(x->o, 2, &m);
  return x->o->err;
}

/* A live window: when it began and how long it lasted (time_nanos 9,
 * duration_nanos 10), and a comment (13) saying what the runtime dropped;
 * its string goes last in the string table, index str. */
static void pp_window(out_t *o, const trace_job *j, uint32_t str) {
  uint8_t b[32];
  pbuf t = {b, 0, sizeof b};
  pb_uint(&t, 9, j->win_start_ns);
  pb_uint(&t, 10, j->win_end_ns > j->win_start_ns ? j->win_end_ns - j->win_start_ns : 0);
  put(o, t.p, t.len);
  char c[128];
  snprintf(c, sizeof c, "pdbsym: %llu events dropped by the runtime in this window",
           (unsigned long long)j->stats.dropped_events);
  emit_string(o, c);
  t.len = 0;
  pb_uint(&t, 13, str);
  put(o, t.p, t.len);
}

static ps_err write_pprof(trace_job *j, out_t *o, ps_diag *d) {
  o->gz = true;
  memset(&o->z, 0, sizeof o->z);
  if (deflateInit2(&o->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return ps_diag_set(d, PS_E_NOMEM, "trace output", 0, "deflateInit2 failed");
  /* string table: "", then fixed names, then 3 per frame (name, file, function) */
  static const char *fixed[] = {"", "samples", "count", "cpu", "nanoseconds", "thread"};
  for (size_t i = 0; i < 6; i++)
    emit_string(o, fixed[i]);
  uint32_t base = 6;
  for (size_t i = 0; i < j->nframes; i++) {
    const tj_frame *f = &j->frames[i];
    emit_string(o, tj_str(j, f->name));
    emit_string(o, tj_str(j, f->file));
    emit_string(o, f->function ? tj_str(j, f->function) : tj_str(j, f->name));
  }
  uint8_t tb[64];
  pbuf t = {tb, 0, sizeof tb};
  pb_uint(&t, 1, 1);
  pb_uint(&t, 2, 2);
  emit_msg(o, 1, &t); /* sample_type samples/count */
  t.len = 0;
  pb_uint(&t, 1, 3);
  pb_uint(&t, 2, 4);
  emit_msg(o, 1, &t); /* sample_type cpu/nanoseconds */
  emit_msg(o, 11, &t); /* period_type */
  uint8_t pb[16];
  pbuf per = {pb, 0, sizeof pb};
  pb_uint(&per, 12, j->sampling_ns);
  put(o, per.p, per.len);
  for (size_t i = 0; i < j->nframes; i++) {
    const tj_frame *f = &j->frames[i];
    uint32_t s = base + 3 * (uint32_t)i;
    uint8_t fb[64], lb2[48], lnb[32];
    pbuf fn = {fb, 0, sizeof fb}, loc = {lb2, 0, sizeof lb2}, ln = {lnb, 0, sizeof lnb};
    pb_uint(&fn, 1, i + 1);
    pb_uint(&fn, 2, s);
    pb_uint(&fn, 3, s + 2);
    pb_uint(&fn, 4, s + 1);
    emit_msg(o, 5, &fn);
    pb_uint(&ln, 1, i + 1);
    if (f->line)
      pb_uint(&ln, 2, f->line);
    if (f->column)
      pb_uint(&ln, 3, f->column);
    pb_uint(&loc, 1, i + 1);
    pb_bytes(&loc, 4, ln.p, ln.len);
    emit_msg(o, 4, &loc);
  }
  pp_ctx x = {o, j, j->sampling_ns, 5};
  ps_err e = tj_replay(j, pp_sample, &x, d);
  if (!e && j->win_start_ns) /* a live profile's window */
    pp_window(o, j, base + 3 * (uint32_t)j->nframes);
  flush_out(o);
  if (!o->err)
    gz_push(o, NULL, 0, Z_FINISH);
  deflateEnd(&o->z);
  return e ? e : o->err;
}

/* ---- top ---- */

typedef struct {
  uint64_t *incl, *excl;
  uint64_t *stamp;
  uint64_t nsamples;
} top_ctx;

static ps_err top_sample(void *c, uint32_t thread, uint64_t ts, const uint32_t *frames,
                         uint32_t n) {
  (void)thread;
  (void)ts;
  top_ctx *x = c;
  x->nsamples++;
  if (n)
    x->excl[frames[0]]++;
  for (uint32_t i = 0; i < n; i++)
    if (x->stamp[frames[i]] != x->nsamples) {
      x->stamp[frames[i]] = x->nsamples;
      x->incl[frames[i]]++;
    }
  return PS_E_OK;
}

static const uint64_t *sort_key;
static int cmp_desc(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  if (sort_key[x] != sort_key[y])
    return sort_key[x] > sort_key[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

static void top_table(trace_job *j, out_t *o, top_ctx *x, uint32_t *order, bool by_incl) {
  sort_key = by_incl ? x->incl : x->excl;
  for (size_t i = 0; i < j->nframes; i++)
    order[i] = (uint32_t)i;
  qsort(order, j->nframes, sizeof *order, cmp_desc);
  putf(o, "\nTop %d frames by %s samples:\n", j->opt.top, by_incl ? "inclusive" : "exclusive");
  puts_(o, "   incl  incl%   excl  excl%  frame\n");
  double total = x->nsamples ? (double)x->nsamples : 1.0;
  for (size_t r = 0; r < j->nframes && r < (size_t)j->opt.top; r++) {
    uint32_t i = order[r];
    if (!sort_key[i])
      break;
    const tj_frame *f = &j->frames[i];
    putf(o, "%7llu %5.1f%% %6llu %5.1f%%  ", (unsigned long long)x->incl[i],
         100.0 * (double)x->incl[i] / total, (unsigned long long)x->excl[i],
         100.0 * (double)x->excl[i] / total);
    puts_(o, tj_str(j, f->name));
    if (f->file) {
      puts_(o, "  ");
      puts_(o, tj_str(j, f->file));
      if (f->line)
        putf(o, ":%u", f->line);
    }
    if (f->async_method) {
      puts_(o, "  (async ");
      puts_(o, tj_str(j, f->async_method));
      puts_(o, ")");
    }
    puts_(o, "\n");
  }
}

static ps_err write_top(trace_job *j, out_t *o, ps_diag *d) {
  top_ctx x = {0};
  size_t n = j->nframes ? j->nframes : 1;
  x.incl = calloc(n, sizeof *x.incl);
  x.excl = calloc(n, sizeof *x.excl);
  x.stamp = calloc(n, sizeof *x.stamp);
  uint32_t *order = calloc(n, sizeof *order);
  ps_err e = PS_E_OK;
  if (!x.incl || !x.excl || !x.stamp || !order)
    e = ps_diag_set(d, PS_E_NOMEM, "trace output", 0, "out of memory");
  if (!e)
    e = tj_replay(j, top_sample, &x, d);
  if (!e) {
    putf(o, "%s: %llu samples on %llu threads, %llu frames (%llu with file:line), "
            "%llu of %llu modules with symbols\n",
         j->name, (unsigned long long)x.nsamples, (unsigned long long)j->stats.threads,
         (unsigned long long)j->nframes, (unsigned long long)j->stats.frames_with_line,
         (unsigned long long)j->stats.modules_found,
         (unsigned long long)j->stats.modules_needed);
    top_table(j, o, &x, order, true);
    top_table(j, o, &x, order, false);
  }
  free(x.incl);
  free(x.excl);
  free(x.stamp);
  free(order);
  return e ? e : o->err;
}

ps_err trace_job_write(trace_job *j, trace_format f, trace_write_fn w, void *wctx,
                       ps_diag *d) {
  if (!j->finished)
    return ps_diag_set(d, PS_E_INVALID, "trace output", 0, "the job is not finished");
  out_t *o = calloc(1, sizeof *o);
  if (!o)
    return ps_diag_set(d, PS_E_NOMEM, "trace output", 0, "out of memory");
  o->w = w;
  o->ctx = wctx;
  o->d = d;
  ps_err e;
  switch (f) {
  case TRACE_PPROF: e = write_pprof(j, o, d); break;
  case TRACE_TOP: e = write_top(j, o, d); break;
  default: e = write_speedscope(j, o, d); break;
  }
  if (!o->gz)
    flush_out(o);
  if (!e)
    e = o->err;
  free(o);
  return e;
}
