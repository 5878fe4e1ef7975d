/*
 * test_trace_live.c - the live trace job (engine/trace.h: trace_job_set_live,
 * cut, next_window, end_live) over a real live session's stream: what
 * `pdbsym profile --tee` copied from a running .NET 10 app that mints
 * methods (tests/fixtures/nettrace/live, made by its make.sh).  Cut into
 * windows at many places and fed in chunks of many sizes (64 KiB exactly
 * among them: a window filled to the byte by a chunk once refused a longer
 * block), the windows' samples together are the samples the same job reads
 * whole as a file, thread by thread, in order, frame names equal.
 */
#include <jansson.h>

#include "nettrace.h"
#include "test.h"
#include "trace.h"

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  *len = b ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  return b;
}

typedef struct {
  char *p;
  size_t len, cap;
} mem;

static ps_err to_mem(void *ctx, const void *data, size_t len) {
  mem *m = ctx;
  if (m->len + len + 1 > m->cap) {
    size_t nc = m->cap ? m->cap : 1 << 16;
    while (nc < m->len + len + 1)
      nc *= 2;
    char *np = realloc(m->p, nc);
    if (!np)
      return PS_E_NOMEM;
    m->p = np;
    m->cap = nc;
  }
  memcpy(m->p + m->len, data, len);
  m->len += len;
  m->p[m->len] = '\0';
  return PS_E_OK;
}

/* appends a speedscope answer's samples to acc: {"Thread (TID)": [[names...]...]} */
static void add_samples(json_t *acc, const char *text) {
  json_error_t je;
  json_t *doc = json_loads(text, 0, &je);
  CHECK(doc != NULL);
  if (!doc)
    return;
  json_t *frames = json_object_get(json_object_get(doc, "shared"), "frames");
  json_t *profs = json_object_get(doc, "profiles");
  size_t i, k;
  json_t *p, *s;
  json_array_foreach(profs, i, p) {
    const char *name = json_string_value(json_object_get(p, "name"));
    json_t *list = json_object_get(acc, name);
    if (!list) {
      list = json_array();
      json_object_set_new(acc, name, list);
    }
    json_array_foreach(json_object_get(p, "samples"), k, s) {
      json_t *names = json_array();
      size_t m;
      json_t *fi;
      json_array_foreach(s, m, fi) {
        json_t *f = json_array_get(frames, (size_t)json_integer_value(fi));
        json_array_append(names, json_object_get(f, "name"));
      }
      json_array_append_new(list, names);
    }
  }
  json_decref(doc);
}

static json_t *whole(const uint8_t *data, size_t len) {
  trace_options o;
  memset(&o, 0, sizeof o);
  trace_job *j = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(trace_job_open(&o, &j, &d), PS_E_OK);
  CHECK_EQ_U(trace_job_feed(j, data, len, &d), PS_E_OK);
  CHECK_EQ_U(trace_job_finish(j, NULL, NULL, NULL, &d), PS_E_OK);
  mem m = {0};
  CHECK_EQ_U(trace_job_write(j, TRACE_SPEEDSCOPE, to_mem, &m, &d), PS_E_OK);
  json_t *acc = json_object();
  add_samples(acc, m.p ? m.p : "{}");
  free(m.p);
  trace_job_close(j);
  return acc;
}

/* the stream fed in chunks of `chunk` bytes, a window cut every `every` bytes */
static json_t *windows(const uint8_t *data, size_t len, size_t chunk, size_t every,
                       size_t *nwin, uint64_t *dropped) {
  trace_options o;
  memset(&o, 0, sizeof o);
  o.stack_budget = 64 << 10; /* small: the window's stacks spill and flush */
  trace_job *j = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(trace_job_open(&o, &j, &d), PS_E_OK);
  trace_job_set_live(j);
  json_t *acc = json_object();
  size_t fed = 0, next_cut = every;
  *nwin = 0;
  *dropped = 0;
  while (fed < len) {
    size_t n = len - fed < chunk ? len - fed : chunk;
    ps_err e = trace_job_feed(j, data + fed, n, &d);
    CHECK_EQ_U(e, PS_E_OK);
    if (e) {
      char buf[256];
      printf("  chunk %zu at %zu: %s\n", chunk, fed, ps_diag_format(&d, buf, sizeof buf));
      break;
    }
    fed += n;
    if (fed >= next_cut || fed == len) {
      if (fed == len)
        CHECK_EQ_U(trace_job_end_live(j, &d), PS_E_OK);
      CHECK_EQ_U(trace_job_cut(j, NULL, NULL, NULL, 1, 2, &d), PS_E_OK);
      *dropped += trace_job_stats(j)->dropped_events;
      mem m = {0};
      CHECK_EQ_U(trace_job_write(j, TRACE_SPEEDSCOPE, to_mem, &m, &d), PS_E_OK);
      add_samples(acc, m.p ? m.p : "{}");
      free(m.p);
      CHECK_EQ_U(trace_job_next_window(j, &d), PS_E_OK);
      (*nwin)++;
      next_cut += every;
    }
  }
  CHECK_LE(trace_job_stats(j)->peak_read_bytes, TRACE_DEFAULT_MAX_BLOCK + 256);
  trace_job_close(j);
  return acc;
}

TEST(windows_equal_the_whole_stream) {
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/nettrace/live/session.nettrace", root ? root : ".");
  size_t len = 0;
  uint8_t *data = slurp(path, &len);
  if (!data) {
    SKIP("tests/fixtures/nettrace/live/session.nettrace is absent");
    return;
  }
  json_t *want = whole(data, len);
  size_t nsamples = 0;
  const char *key;
  json_t *v;
  json_object_foreach(want, key, v) nsamples += json_array_size(v);
  CHECK(nsamples > 1000);
  static const size_t chunks[] = {997, 4096, 65536, 65537, 100000, 1 << 20};
  static const size_t everys[] = {50000, 131072, 400000};
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
    for (size_t e = 0; e < sizeof everys / sizeof everys[0]; e++) {
      size_t nwin;
      uint64_t dropped;
      json_t *got = windows(data, len, chunks[c], everys[e], &nwin, &dropped);
      CHECK(nwin >= 1 && (chunks[c] > everys[e] || nwin >= len / everys[e]));
      CHECK_EQ_U(dropped, 0);
      /* the same samples, each with the same frames; a frame the window
       * names must have the file's name (a window may not know code the
       * stream describes only in its rundown at the end: pdbsym profile's
       * rundown session at the attach names it, tests/integration) */
      size_t differ = 0, unnamed = 0, frames = 0;
      json_object_foreach(want, key, v) {
        json_t *g = json_object_get(got, key);
        if (json_array_size(g) != json_array_size(v)) {
          printf("    %s: %zu samples, the windows %zu\n", key, json_array_size(v),
                 json_array_size(g));
          differ++;
          continue;
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
          json_t *a = json_array_get(v, i), *b = json_array_get(g, i);
          if (json_array_size(a) != json_array_size(b)) {
            differ++;
            continue;
          }
          for (size_t f = 0; f < json_array_size(a); f++) {
            const char *x = json_string_value(json_array_get(a, f));
            const char *y = json_string_value(json_array_get(b, f));
            frames++;
            if (!strncmp(y, "?!", 2)) /* the method, or its module, not known yet */
              unnamed++;
            else if (strcmp(x, y) != 0 && differ++ < 3)
              printf("    %s sample %zu frame %zu: the file %s, the window %s\n", key, i, f, x, y);
          }
        }
      }
      if (differ)
        printf("  chunks of %zu, a window every %zu bytes (%zu windows): %zu differ\n", chunks[c],
               everys[e], nwin, differ);
      CHECK_EQ_U(differ, 0);
      CHECK(frames > 0 && unnamed < frames);
      json_decref(got);
    }
  json_decref(want);
  free(data);
}

/* A chunk that fills the read window to the byte, when the window was empty
 * and the block starting there is longer than the chunk: the window grows to
 * the block (it once refused it as "a block of more than 16 MiB"). */
TEST(a_chunk_filling_the_window_exactly) {
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/nettrace/live/session.nettrace", root ? root : ".");
  size_t len = 0;
  uint8_t *data = slurp(path, &len);
  if (!data) {
    SKIP("tests/fixtures/nettrace/live/session.nettrace is absent");
    return;
  }
  /* the first unit longer than 64 KiB, and where it starts */
  nt_stream st;
  nt_stream_init(&st, TRACE_DEFAULT_MAX_BLOCK);
  size_t pos = 0, big = 0;
  while (pos < len && !big) {
    size_t used, need;
    nt_block b;
    ps_diag d;
    ps_diag_clear(&d);
    if (nt_stream_next(&st, data + pos, len - pos, true, &used, &need, &b, &d) != PS_E_OK)
      break;
    if (used > 65536 + 64)
      big = pos;
    else
      pos += used;
    if (b.kind == NT_BLOCK_END)
      break;
  }
  CHECK(big > 0);
  if (!big) {
    free(data);
    return;
  }
  trace_options o;
  memset(&o, 0, sizeof o);
  trace_job *j = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(trace_job_open(&o, &j, &d), PS_E_OK);
  trace_job_set_live(j);
  /* every unit before it, one feed each (as a reader that got exactly a unit
   * would): the window stays 64 KiB and is empty when the big unit comes */
  nt_stream_init(&st, TRACE_DEFAULT_MAX_BLOCK);
  for (size_t at = 0; at < big && !d.code;) {
    size_t used, need;
    nt_block b;
    ps_diag sd;
    ps_diag_clear(&sd);
    if (nt_stream_next(&st, data + at, len - at, true, &used, &need, &b, &sd) != PS_E_OK)
      break;
    CHECK_EQ_U(trace_job_feed(j, data + at, used, &d), PS_E_OK);
    at += used;
  }
  for (size_t at = big; at < len && !d.code; at += 65536)
    CHECK_EQ_U(trace_job_feed(j, data + at, len - at < 65536 ? len - at : 65536, &d), PS_E_OK);
  if (d.code) {
    char buf[256];
    printf("  %s\n", ps_diag_format(&d, buf, sizeof buf));
  }
  CHECK_EQ_U(trace_job_end_live(j, &d), PS_E_OK);
  trace_job_close(j);
  free(data);
}

/* ---- V6 threads that come and go (NetTraceFormat.md; no runtime writes V6,
 * so the stream is made here byte by byte) ---- */

static void put(mem *m, const void *p, size_t n) { CHECK_EQ_U(to_mem(m, p, n), PS_E_OK); }

static void put_varuint(mem *m, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      b[n] |= 0x80;
    n++;
  } while (v);
  put(m, b, n);
}

static void put_block(mem *m, int kind, const mem *body) {
  uint32_t h = (uint32_t)body->len | (uint32_t)kind << 24;
  uint8_t b[4] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16), (uint8_t)(h >> 24)};
  put(m, b, 4);
  put(m, body->p, body->len);
}

enum { LET_GO_REMOVE, LET_GO_FLUSH, LET_GO_NEVER };

/* NTHREADS threads, each named by a ThreadBlock, writing one event (sequence
 * number 1), then let go: by a RemoveThreadBlock saying its last event was
 * number 3 (two dropped), by a sequence point that flushes the thread cache
 * every 1000 threads, or never */
static mem v6_churn(int how, uint32_t nthreads) {
  mem m = {0}, b = {0};
  put(&m, "Nettrace\0\0\0\0\6\0\0\0\0\0\0\0", 20);
  /* TraceBlock: time, ticks, frequency 1e9, pointer size 8, no pairs */
  uint8_t tb[40] = {0};
  tb[24] = 0x00, tb[25] = 0xca, tb[26] = 0x9a, tb[27] = 0x3b, tb[32] = 8;
  b.len = 0, put(&b, tb, sizeof tb), put_block(&m, 1, &b);
  /* MetadataBlock: header size 0; row: size 9, id 1, provider "P", event 0, name "", 0 fields, 0 optional */
  const uint8_t md[] = {0, 0, 9, 0, 1, 1, 'P', 0, 0, 0, 0, 0, 0};
  b.len = 0, put(&b, md, sizeof md), put_block(&m, 3, &b);
  for (uint32_t i = 0; i < nthreads; i++) {
    mem row = {0};
    put_varuint(&row, i);
    put(&row, "\3", 1);
    put_varuint(&row, 1000 + (uint64_t)i);
    uint8_t rs[2] = {(uint8_t)row.len, 0};
    b.len = 0, put(&b, rs, 2), put(&b, row.p, row.len), put_block(&m, 6, &b);
    free(row.p);
    /* EventBlock: header 20 (flags 1: compressed), one event: metadata 1,
     * sequence 1, capture thread i, processor 0, thread i, timestamp, no payload */
    uint8_t eh[20] = {20, 0, 1, 0};
    b.len = 0, put(&b, eh, sizeof eh);
    put(&b, (uint8_t[]){1 | 2 | 4 | 128, 1, 0}, 3);
    put_varuint(&b, i), put(&b, "\0", 1), put_varuint(&b, i);
    put_varuint(&b, 100 + (uint64_t)i), put(&b, "\0", 1);
    put_block(&m, 2, &b);
    if (how == LET_GO_REMOVE) {
      b.len = 0, put_varuint(&b, i), put_varuint(&b, 3), put_block(&m, 7, &b);
    }
    if (i % 1000 == 999 || i + 1 == nthreads) { /* a sequence point naming no thread */
      uint8_t sp[16] = {0};
      uint64_t ts = 100 + (uint64_t)i;
      for (int k = 0; k < 8; k++)
        sp[k] = (uint8_t)(ts >> (8 * k));
      sp[8] = how == LET_GO_FLUSH ? 1 : 0;
      b.len = 0, put(&b, sp, sizeof sp), put_block(&m, 4, &b);
    }
  }
  b.len = 0, put_block(&m, 0, &b);
  free(b.p);
  return m;
}

static ps_err feed_all(trace_job *j, const mem *m, ps_diag *d) {
  for (size_t at = 0; at < m->len; at += 65536) {
    ps_err e = trace_job_feed(j, (const uint8_t *)m->p + at, m->len - at < 65536 ? m->len - at : 65536, d);
    if (e)
      return e;
  }
  return trace_job_end_live(j, d);
}

TEST(v6_threads_come_and_go) {
  const uint32_t n = 70000; /* more than a job keeps at once */
  for (int how = LET_GO_REMOVE; how <= LET_GO_NEVER; how++) {
    mem m = v6_churn(how, n);
    trace_options o;
    memset(&o, 0, sizeof o);
    trace_job *j = NULL;
    ps_diag d;
    ps_diag_clear(&d);
    CHECK_EQ_U(trace_job_open(&o, &j, &d), PS_E_OK);
    trace_job_set_live(j);
    ps_err e = feed_all(j, &m, &d);
    char buf[256];
    if (how == LET_GO_NEVER) { /* 70,000 threads at once: refused, named */
      CHECK_EQ_U(e, PS_E_LIMIT);
      CHECK(strstr(ps_diag_format(&d, buf, sizeof buf), "threads in use") != NULL);
    } else {
      if (e)
        printf("  %s\n", ps_diag_format(&d, buf, sizeof buf));
      CHECK_EQ_U(e, PS_E_OK);
      CHECK_EQ_U(trace_job_stats(j)->events, n);
      /* a RemoveThreadBlock's last sequence number counts what its thread dropped */
      CHECK_EQ_U(trace_job_stats(j)->dropped_events, how == LET_GO_REMOVE ? 2 * (uint64_t)n : 0);
    }
    trace_job_close(j);
    free(m.p);
  }
}

int main(void) {
  RUN(windows_equal_the_whole_stream);
  RUN(a_chunk_filling_the_window_exactly);
  RUN(v6_threads_come_and_go);
  return test_summary();
}
