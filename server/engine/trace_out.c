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

/* ---- the thread states, as the writers name them ---- */

/* speedscope: a root frame per state, after the job's frames */
static const char *const state_frame[TJ_NSTATES] = {
    "[running managed code]", "[waiting or in native code]", "[unknown sampler state]"};

static double ns_ms(uint64_t ns) { return (double)ns / 1e6; }

/* ---- speedscope ---- */

/* One replay of the spill file writes the samples of up to SS_GROUP threads,
 * each into two temporary files (its stacks, its weights), which are then
 * copied into the answer in thread order: ceil(threads / SS_GROUP) replays,
 * not one per thread, and 2 * SS_GROUP files open at most. */
#define SS_GROUP 32

typedef struct {
  FILE *f[SS_GROUP], *w[SS_GROUP];
  uint64_t written[SS_GROUP];
  const int *slot; /* thread index -> slot in f, or -1 */
  uint32_t state_base; /* index of the first state frame */
  bool failed;
} ss_ctx;

static ps_err ss_sample(void *c, const tj_sample *s, const uint32_t *frames, uint32_t n) {
  ss_ctx *x = c;
  int k = x->slot[s->thread];
  if (k < 0)
    return PS_E_OK;
  FILE *f = x->f[k], *w = x->w[k];
  bool more = x->written[k]++ > 0;
  /* speedscope lists a stack from the root: the state, then the frames */
  fprintf(f, more ? ",[%u" : "[%u", x->state_base + s->state);
  for (uint32_t i = n; i > 0; i--)
    fprintf(f, ",%u", frames[i - 1]);
  fputc(']', f);
  if (fprintf(w, more ? ",%.6g" : "%.6g", ns_ms(s->weight_ns)) < 0 || ferror(f)) {
    x->failed = true;
    return PS_E_IO;
  }
  return PS_E_OK;
}

static void put_frame(trace_job *j, out_t *o, const tj_frame *f, bool first) {
  puts_(o, first ? "{\"name\":" : ",{\"name\":");
  put_json_str(o, tj_str(j, f->name));
  if (f->file) {
    puts_(o, ",\"file\":");
    put_json_str(o, tj_str(j, f->file));
    if (f->line)
      putf(o, ",\"line\":%u", f->line);
    if (f->column)
      putf(o, ",\"col\":%u", f->column);
    if (f->line && f->line_approx)
      puts_(o, ",\"line_approx\":true");
  }
  put(o, "}", 1);
}

/* copies a temporary file into the answer */
static ps_err copy_back(out_t *o, FILE *f, ps_diag *d) {
  char buf[1 << 14];
  size_t got;
  if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0)
    return ps_diag_set(d, PS_E_IO, "trace output", 0, "temporary file: read failed");
  while ((got = fread(buf, 1, sizeof buf, f)) > 0)
    put(o, buf, got);
  return ferror(f) ? ps_diag_set(d, PS_E_IO, "trace output", 0, "temporary file: read failed")
                   : PS_E_OK;
}

static ps_err write_speedscope(trace_job *j, out_t *o, ps_diag *d) {
  puts_(o, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",");
  puts_(o, "\"exporter\":\"pdbsym " PDBSYM_VERSION "\",\"name\":");
  put_json_str(o, j->name);
  if (j->nwarnings) { /* not speedscope's own: what the trace lacks (trace_job_warning) */
    puts_(o, ",\"warnings\":[");
    for (size_t i = 0; i < j->nwarnings; i++) {
      if (i)
        put(o, ",", 1);
      put_json_str(o, j->warnings[i]);
    }
    put(o, "]", 1);
  }
  puts_(o, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
  for (size_t i = 0; i < j->nframes; i++)
    put_frame(j, o, &j->frames[i], i == 0);
  for (size_t k = 0; k < TJ_NSTATES; k++) {
    puts_(o, j->nframes || k ? ",{\"name\":" : "{\"name\":");
    put_json_str(o, state_frame[k]);
    put(o, "}", 1);
  }
  puts_(o, "]},\"profiles\":[");
  double interval_ms = ns_ms(tj_interval_ns(j));
  int *slot = malloc((j->nthreads ? j->nthreads : 1) * sizeof *slot);
  if (!slot)
    return ps_diag_set(d, PS_E_NOMEM, "trace output", 0, "out of memory");
  bool first = true;
  ps_err e = PS_E_OK;
  for (size_t t0 = 0; t0 < j->nthreads && !e && !o->err;) {
    /* the next group of threads with samples the options keep */
    ss_ctx x;
    memset(&x, 0, sizeof x);
    x.state_base = (uint32_t)j->nframes;
    size_t members[SS_GROUP], nm = 0, t = t0;
    for (size_t i = 0; i < j->nthreads; i++)
      slot[i] = -1;
    for (; t < j->nthreads && nm < SS_GROUP; t++) {
      const tj_thread *th = &j->threads[t];
      uint64_t kept = 0;
      for (uint8_t k = 0; k < TJ_NSTATES; k++)
        if (tj_keeps(j, k))
          kept += th->by_state[k];
      if (!kept)
        continue;
      x.f[nm] = tj_tempfile(j, d);
      x.w[nm] = x.f[nm] ? tj_tempfile(j, d) : NULL;
      if (!x.w[nm]) {
        if (x.f[nm])
          fclose(x.f[nm]);
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
        /* the first sample stands for the interval before it */
        putf(o, "%s{\"type\":\"sampled\",\"name\":\"Thread (%llu)\",\"unit\":\"milliseconds\","
                "\"startValue\":%.6f,\"endValue\":%.6f,\"samples\":[",
             first ? "" : ",", (unsigned long long)th->tid, ms_of(j, th->first_ts) - interval_ms,
             ms_of(j, th->last_ts));
        first = false;
        e = copy_back(o, x.f[k], d);
        puts_(o, "],\"weights\":[");
        if (!e)
          e = copy_back(o, x.w[k], d);
        puts_(o, "]}");
      }
      fclose(x.f[k]);
      fclose(x.w[k]);
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

/* the string table's fixed part, in this order (indexes below) */
enum {
  PS_EMPTY, PS_SAMPLES, PS_COUNT, PS_WALL, PS_NANOSECONDS, PS_RUNNING, PS_WAITING, PS_THREAD,
  PS_STATE, PS_UNKNOWN, PS_LINE_APPROX, PS_NFIXED
};
static const char *const pp_fixed[PS_NFIXED] = {
    "", "samples", "count", "wall", "nanoseconds", "running", "waiting", "thread", "state",
    "unknown", "line_approx"};
static const uint32_t pp_state_str[TJ_NSTATES] = {PS_RUNNING, PS_WAITING, PS_UNKNOWN};

typedef struct {
  out_t *o;
  trace_job *j;
} pp_ctx;

static ps_err pp_sample(void *c, const tj_sample *s, const uint32_t *frames, uint32_t n) {
  pp_ctx *x = c;
  uint8_t locs[TJ_MAX_FRAMES * 5 + 16], mb[TJ_MAX_FRAMES * 5 + 256], vb[64], lb[32];
  pbuf l = {locs, 0, sizeof locs}, m = {mb, 0, sizeof mb}, v = {vb, 0, sizeof vb},
       lab = {lb, 0, sizeof lb};
  for (uint32_t i = 0; i < n; i++) /* pprof lists a stack from the leaf */
    pb_varint(&l, (uint64_t)frames[i] + 1);
  pb_bytes(&m, 1, l.p, l.len);
  /* samples/count, wall/nanoseconds, running/nanoseconds, waiting/nanoseconds */
  pb_varint(&v, 1);
  pb_varint(&v, s->weight_ns);
  pb_varint(&v, s->state == TJ_RUNNING ? s->weight_ns : 0);
  pb_varint(&v, s->state == TJ_WAITING ? s->weight_ns : 0);
  pb_bytes(&m, 2, v.p, v.len);
  pb_uint(&lab, 1, PS_THREAD);
  pb_uint(&lab, 3, x->j->threads[s->thread].tid);
  pb_bytes(&m, 3, lab.p, lab.len);
  lab.len = 0;
  pb_uint(&lab, 1, PS_STATE);
  pb_uint(&lab, 2, pp_state_str[s->state]);
  pb_bytes(&m, 3, lab.p, lab.len);
  /* the depths (0: the leaf) of the frames whose line is an estimate */
  for (uint32_t i = 0; i < n; i++) {
    if (!x->j->frames[frames[i]].line_approx)
      continue;
    lab.len = 0;
    pb_uint(&lab, 1, PS_LINE_APPROX);
    pb_key(&lab, 3, 0); /* num: 0 is a valid depth, so always written */
    pb_varint(&lab, i);
    if (m.len + lab.len + 8 < m.cap)
      pb_bytes(&m, 3, lab.p, lab.len);
  }
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
  /* string table: the fixed names, 3 per frame (name, file, function),
   * then the warnings (comments) */
  for (size_t i = 0; i < PS_NFIXED; i++)
    emit_string(o, pp_fixed[i]);
  uint32_t base = PS_NFIXED;
  for (size_t i = 0; i < j->nframes; i++) {
    const tj_frame *f = &j->frames[i];
    emit_string(o, tj_str(j, f->name));
    emit_string(o, tj_str(j, f->file));
    emit_string(o, f->function ? tj_str(j, f->function) : tj_str(j, f->name));
  }
  uint32_t wbase = base + 3 * (uint32_t)j->nframes;
  for (size_t i = 0; i < j->nwarnings; i++)
    emit_string(o, j->warnings[i]);
  static const uint32_t types[][2] = {{PS_SAMPLES, PS_COUNT},
                                      {PS_WALL, PS_NANOSECONDS},
                                      {PS_RUNNING, PS_NANOSECONDS},
                                      {PS_WAITING, PS_NANOSECONDS}};
  uint8_t tb[64];
  pbuf t = {tb, 0, sizeof tb};
  for (size_t i = 0; i < 4; i++) {
    t.len = 0;
    pb_uint(&t, 1, types[i][0]);
    pb_uint(&t, 2, types[i][1]);
    emit_msg(o, 1, &t); /* sample_type */
  }
  t.len = 0;
  pb_uint(&t, 1, PS_WALL);
  pb_uint(&t, 2, PS_NANOSECONDS);
  emit_msg(o, 11, &t); /* period_type wall/nanoseconds */
  uint8_t pb[64];
  pbuf per = {pb, 0, sizeof pb};
  pb_uint(&per, 12, tj_interval_ns(j)); /* period: the measured interval */
  pb_uint(&per, 14, PS_WALL);          /* default_sample_type */
  for (size_t i = 0; i < j->nwarnings; i++)
    pb_uint(&per, 13, wbase + i); /* comment */
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
  pp_ctx x = {o, j};
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
  uint64_t *incl, *excl;           /* ns */
  uint64_t *incl_state[TJ_NSTATES];/* ns, by state */
  uint64_t *nincl, *nexcl;         /* samples */
  uint64_t *stamp;
  uint64_t nsamples, total_ns, state_ns[TJ_NSTATES];
} top_ctx;

static ps_err top_sample(void *c, const tj_sample *s, const uint32_t *frames, uint32_t n) {
  top_ctx *x = c;
  x->nsamples++;
  x->total_ns += s->weight_ns;
  x->state_ns[s->state] += s->weight_ns;
  if (n) {
    x->excl[frames[0]] += s->weight_ns;
    x->nexcl[frames[0]]++;
  }
  for (uint32_t i = 0; i < n; i++)
    if (x->stamp[frames[i]] != x->nsamples) { /* once per sample, recursion or not */
      x->stamp[frames[i]] = x->nsamples;
      x->incl[frames[i]] += s->weight_ns;
      x->incl_state[s->state][frames[i]] += s->weight_ns;
      x->nincl[frames[i]]++;
    }
  return PS_E_OK;
}

/* a frame and the time it is sorted by: qsort with no global (two top
 * answers may be written at once, by two request workers) */
typedef struct {
  uint64_t key;
  uint32_t frame;
} top_row;

static int cmp_desc(const void *a, const void *b) {
  const top_row *x = a, *y = b;
  if (x->key != y->key)
    return x->key > y->key ? -1 : 1;
  return x->frame < y->frame ? -1 : x->frame > y->frame;
}

static void top_table(trace_job *j, out_t *o, top_ctx *x, top_row *order, bool by_incl) {
  const uint64_t *key = by_incl ? x->incl : x->excl;
  for (size_t i = 0; i < j->nframes; i++)
    order[i] = (top_row){key[i], (uint32_t)i};
  if (j->nframes > 1)
    qsort(order, j->nframes, sizeof *order, cmp_desc);
  putf(o, "\nTop %d frames by %s time:\n", j->opt.top, by_incl ? "inclusive" : "exclusive");
  puts_(o, " incl ms  incl%  running  waiting  samples   excl ms  excl%  samples  frame\n");
  double total = x->total_ns ? (double)x->total_ns : 1.0;
  for (size_t r = 0; r < j->nframes && r < (size_t)j->opt.top; r++) {
    uint32_t i = order[r].frame;
    if (!order[r].key)
      break;
    const tj_frame *f = &j->frames[i];
    putf(o, "%8.1f %5.1f%% %8.1f %8.1f %8llu  %8.1f %5.1f%% %8llu  ", ns_ms(x->incl[i]),
         100.0 * (double)x->incl[i] / total, ns_ms(x->incl_state[TJ_RUNNING][i]),
         ns_ms(x->incl_state[TJ_WAITING][i]), (unsigned long long)x->nincl[i],
         ns_ms(x->excl[i]), 100.0 * (double)x->excl[i] / total,
         (unsigned long long)x->nexcl[i]);
    puts_(o, tj_str(j, f->name));
    if (f->file) {
      puts_(o, "  ");
      puts_(o, tj_str(j, f->file));
      if (f->line)
        putf(o, ":%u%s", f->line, f->line_approx ? " (line approx)" : "");
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
  top_ctx x;
  memset(&x, 0, sizeof x);
  size_t n = j->nframes ? j->nframes : 1;
  uint64_t *all = calloc(n * (6 + TJ_NSTATES), sizeof *all);
  top_row *order = calloc(n, sizeof *order);
  ps_err e = PS_E_OK;
  if (!all || !order) {
    e = ps_diag_set(d, PS_E_NOMEM, "trace output", 0, "out of memory");
  } else {
    x.incl = all;
    x.excl = all + n;
    x.nincl = all + 2 * n;
    x.nexcl = all + 3 * n;
    x.stamp = all + 4 * n;
    for (size_t k = 0; k < TJ_NSTATES; k++)
      x.incl_state[k] = all + (5 + k) * n;
  }
  if (!e)
    e = tj_replay(j, top_sample, &x, d);
  if (!e) {
    const trace_stats *st = &j->stats;
    /* one kind of thing per number */
    putf(o, "%s: %llu samples on %llu threads", j->name, (unsigned long long)st->samples,
         (unsigned long long)st->threads);
    if (j->opt.state != TRACE_STATE_ALL)
      putf(o, " (%llu of them %s, kept here)", (unsigned long long)x.nsamples,
           trace_state_name(j->opt.state));
    putf(o, "\n  thread time  %.1f ms: %.1f ms running managed code, %.1f ms waiting or in "
            "native code",
         ns_ms(x.total_ns), ns_ms(x.state_ns[TJ_RUNNING]), ns_ms(x.state_ns[TJ_WAITING]));
    if (x.state_ns[TJ_OTHER])
      putf(o, ", %.1f ms in an unknown state", ns_ms(x.state_ns[TJ_OTHER]));
    putf(o, "\n  interval     %.3f ms measured (the trace's header says %.3f ms)\n",
         ns_ms(tj_interval_ns(j)), ns_ms(j->sampling_ns));
    putf(o, "  frames       %llu distinct, %llu of them with file:line, %llu of those approximate\n",
         (unsigned long long)j->nframes, (unsigned long long)st->frames_with_line,
         (unsigned long long)st->frames_line_approx);
    putf(o, "  modules      %llu with frames in the samples, %llu of them with symbols\n",
         (unsigned long long)st->modules_needed, (unsigned long long)st->modules_found);
    for (size_t i = 0; i < j->nwarnings; i++) {
      puts_(o, "  warning: ");
      puts_(o, j->warnings[i]);
      puts_(o, "\n");
    }
    top_table(j, o, &x, order, true);
    top_table(j, o, &x, order, false);
  }
  free(all);
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
