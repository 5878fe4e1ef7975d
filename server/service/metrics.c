/*
 * metrics.c - counters and the Prometheus text exposition (see metrics.h).
 */
#include "metrics.h"

#include "profile.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CODE 600
#define NBUCKETS 10
static const double req_bounds[NBUCKETS] = {0.001, 0.005, 0.01, 0.025, 0.05,
                                            0.1,   0.25,  0.5,  1.0,   5.0};

static _Atomic uint64_t requests[RT__COUNT][MAX_CODE];
static _Atomic uint64_t req_buckets[RT__COUNT][NBUCKETS + 1];
static _Atomic uint64_t req_micros[RT__COUNT];
static _Atomic uint64_t frames[FS__COUNT];
static _Atomic uint64_t modules[MOD_PENDING + 1];
static _Atomic long inflight;
static _Atomic uint64_t cache_hits, cache_misses;
#define DL_BUCKETS 8
static const double dl_bounds[DL_BUCKETS] = {0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0};
static _Atomic uint64_t downloads[MOD_PENDING + 1];
static _Atomic uint64_t dl_buckets[DL_BUCKETS + 1];
static _Atomic uint64_t dl_micros;

void mt_request_count(api_route_id r, unsigned http_status) {
  if ((unsigned)r >= RT__COUNT)
    r = RT_OTHER;
  if (http_status >= MAX_CODE)
    http_status = 0;
  atomic_fetch_add(&requests[r][http_status], 1);
}

void mt_request_time(api_route_id r, double seconds) {
  if ((unsigned)r >= RT__COUNT)
    r = RT_OTHER;
  int b = 0;
  while (b < NBUCKETS && seconds > req_bounds[b])
    b++;
  atomic_fetch_add(&req_buckets[r][b], 1);
  atomic_fetch_add(&req_micros[r], (uint64_t)(seconds * 1e6));
}

void mt_frames(frame_status s, uint64_t n) {
  if ((unsigned)s < FS__COUNT)
    atomic_fetch_add(&frames[s], n);
}

void mt_module(mod_status s) {
  if ((unsigned)s <= MOD_PENDING)
    atomic_fetch_add(&modules[s], 1);
}

void mt_inflight_add(int delta) { atomic_fetch_add(&inflight, delta); }
long mt_inflight(void) { return atomic_load(&inflight); }

void mt_cache(bool hit) { atomic_fetch_add(hit ? &cache_hits : &cache_misses, 1); }

void mt_download_cb(int outcome, double seconds) {
  if (outcome >= 0 && outcome <= (int)MOD_PENDING)
    mt_download((mod_status)outcome, seconds);
}

void mt_download(mod_status outcome, double seconds) {
  if ((unsigned)outcome > MOD_PENDING)
    return;
  atomic_fetch_add(&downloads[outcome], 1);
  int b = 0;
  while (b < DL_BUCKETS && seconds > dl_bounds[b])
    b++;
  atomic_fetch_add(&dl_buckets[b], 1);
  atomic_fetch_add(&dl_micros, (uint64_t)(seconds * 1e6));
}

typedef struct {
  char *buf;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if ((size_t)n < b->cap - b->n) {
      b->n += (size_t)n;
      return;
    }
    size_t ncap = b->cap * 2 + (size_t)n;
    char *p = realloc(b->buf, ncap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->buf = p;
    b->cap = ncap;
  }
}

/* The engine's and the cache's own figures (engine_get_stats). */
static void render_engine(sbuf *b, const engine_stats *es) {
  if (!es)
    return;
  sb_printf(b,
            "# HELP pdbsym_cache_module_reads_total Reads of a module from the SQLite cache (the module was not in memory).\n"
            "# TYPE pdbsym_cache_module_reads_total counter\n"
            "pdbsym_cache_module_reads_total %llu\n"
            "# HELP pdbsym_cache_negative_memory Negative entries (missing, malformed, failing modules) kept in memory.\n"
            "# TYPE pdbsym_cache_negative_memory gauge\n"
            "pdbsym_cache_negative_memory %llu\n"
            "# HELP pdbsym_cache_negative_memory_hits_total Lookups a negative entry in memory answered without SQLite.\n"
            "# TYPE pdbsym_cache_negative_memory_hits_total counter\n"
            "pdbsym_cache_negative_memory_hits_total %llu\n"
            "# HELP pdbsym_cache_memory_modules Modules kept parsed in memory.\n"
            "# TYPE pdbsym_cache_memory_modules gauge\n"
            "pdbsym_cache_memory_modules %llu\n"
            "# HELP pdbsym_cache_memory_bytes Bytes of the modules kept parsed in memory.\n"
            "# TYPE pdbsym_cache_memory_bytes gauge\n"
            "pdbsym_cache_memory_bytes %llu\n"
            "# HELP pdbsym_persist_queue Tables answered and waiting to be written to SQLite (the one being written included).\n"
            "# TYPE pdbsym_persist_queue gauge\n"
            "pdbsym_persist_queue %llu\n"
            "# HELP pdbsym_persist_queue_bytes Bytes of the tables waiting to be written.\n"
            "# TYPE pdbsym_persist_queue_bytes gauge\n"
            "pdbsym_persist_queue_bytes %llu\n"
            "# HELP pdbsym_persist_total Tables the persistence queue settled: saved, failed (the cache did not take them), dropped (the queue stayed full).\n"
            "# TYPE pdbsym_persist_total counter\n"
            "pdbsym_persist_total{outcome=\"saved\"} %llu\n"
            "pdbsym_persist_total{outcome=\"failed\"} %llu\n"
            "pdbsym_persist_total{outcome=\"dropped\"} %llu\n"
            "# HELP pdbsym_download_tmp_bytes Bytes of the temporary files of downloads in flight.\n"
            "# TYPE pdbsym_download_tmp_bytes gauge\n"
            "pdbsym_download_tmp_bytes %llu\n",
            (unsigned long long)es->module_reads, (unsigned long long)es->negative_memory,
            (unsigned long long)es->negative_memory_hits, (unsigned long long)es->hot_modules,
            (unsigned long long)es->hot_bytes, (unsigned long long)es->persist_queued,
            (unsigned long long)es->persist_queued_bytes, (unsigned long long)es->persist_saved,
            (unsigned long long)es->persist_failed, (unsigned long long)es->persist_dropped,
            (unsigned long long)es->download_bytes);
}

static void (*http_state_fn)(void *, mt_http_state *);
static void *http_state_ctx;

void mt_set_http_state(void (*get)(void *ctx, mt_http_state *out), void *ctx) {
  http_state_fn = get;
  http_state_ctx = ctx;
}

static void render_http_state(sbuf *b) {
  if (!http_state_fn)
    return;
  mt_http_state h;
  memset(&h, 0, sizeof h);
  http_state_fn(http_state_ctx, &h);
  sb_printf(b,
            "# HELP pdbsym_http_connections Open connections.\n"
            "# TYPE pdbsym_http_connections gauge\n"
            "pdbsym_http_connections %u\n"
            "# HELP pdbsym_http_connections_max Most open connections (max_connections, or what the descriptor limit allows).\n"
            "# TYPE pdbsym_http_connections_max gauge\n"
            "pdbsym_http_connections_max %u\n"
            "# HELP pdbsym_http_connections_evicted_total Connections without a complete request closed to make room for a newer one.\n"
            "# TYPE pdbsym_http_connections_evicted_total counter\n"
            "pdbsym_http_connections_evicted_total %llu\n"
            "# HELP pdbsym_http_connections_refused_total Connections closed on arrival because every connection was busy.\n"
            "# TYPE pdbsym_http_connections_refused_total counter\n"
            "pdbsym_http_connections_refused_total %llu\n"
            "# HELP pdbsym_http_read_deadline_closed_total Connections closed at read_timeout before their request was complete.\n"
            "# TYPE pdbsym_http_read_deadline_closed_total counter\n"
            "pdbsym_http_read_deadline_closed_total %llu\n"
            "# HELP pdbsym_http_write_deadline_closed_total Connections closed at write_timeout before their answer was sent.\n"
            "# TYPE pdbsym_http_write_deadline_closed_total counter\n"
            "pdbsym_http_write_deadline_closed_total %llu\n"
            "# HELP pdbsym_request_workers Threads that run /symbolicate, /symbolicate/v5 and /modules.\n"
            "# TYPE pdbsym_request_workers gauge\n"
            "pdbsym_request_workers %u\n"
            "# HELP pdbsym_request_workers_busy Request workers running a request.\n"
            "# TYPE pdbsym_request_workers_busy gauge\n"
            "pdbsym_request_workers_busy %u\n"
            "# HELP pdbsym_request_queue Admitted requests waiting for a worker.\n"
            "# TYPE pdbsym_request_queue gauge\n"
            "pdbsym_request_queue %u\n"
            "# HELP pdbsym_request_memory_bytes Bytes of the request memory budget reserved now.\n"
            "# TYPE pdbsym_request_memory_bytes gauge\n"
            "pdbsym_request_memory_bytes %llu\n"
            "# HELP pdbsym_request_memory_peak_bytes Most bytes of the request memory budget reserved at once.\n"
            "# TYPE pdbsym_request_memory_peak_bytes gauge\n"
            "pdbsym_request_memory_peak_bytes %llu\n"
            "# HELP pdbsym_request_memory_max_bytes The request memory budget (request_memory_max; 0: none).\n"
            "# TYPE pdbsym_request_memory_max_bytes gauge\n"
            "pdbsym_request_memory_max_bytes %llu\n"
            "# HELP pdbsym_request_memory_refused_total Reservations the request memory budget refused (requests answered 503).\n"
            "# TYPE pdbsym_request_memory_refused_total counter\n"
            "pdbsym_request_memory_refused_total %llu\n"
            "# HELP pdbsym_request_memory_kept_bytes Bytes of freed request buffers kept for the next requests (part of pdbsym_request_memory_bytes; request_memory_keep).\n"
            "# TYPE pdbsym_request_memory_kept_bytes gauge\n"
            "pdbsym_request_memory_kept_bytes %llu\n",
            h.connections, h.connections_max, (unsigned long long)h.evicted,
            (unsigned long long)h.refused, (unsigned long long)h.read_expired,
            (unsigned long long)h.write_expired, h.workers, h.workers_busy, h.queued,
            (unsigned long long)h.memory_used, (unsigned long long)h.memory_peak,
            (unsigned long long)h.memory_max, (unsigned long long)h.memory_refused,
            (unsigned long long)h.memory_kept);
  sb_printf(b,
            "# HELP pdbsym_http_stream_closed_total POST /traces bodies closed under trace_min_rate over trace_rate_window, or past trace_max_time.\n"
            "# TYPE pdbsym_http_stream_closed_total counter\n"
            "pdbsym_http_stream_closed_total %llu\n"
            "# HELP pdbsym_http_answered_early_total Requests answered before their body was read whole (a body past its cap or the memory budget, a trace whose job failed), then closed.\n"
            "# TYPE pdbsym_http_answered_early_total counter\n"
            "pdbsym_http_answered_early_total %llu\n"
            "# HELP pdbsym_request_memory_refused_per_ip_total Reservations refused because the client address's requests held request_memory_per_ip (requests answered 503).\n"
            "# TYPE pdbsym_request_memory_refused_per_ip_total counter\n"
            "pdbsym_request_memory_refused_per_ip_total %llu\n",
            (unsigned long long)h.slow_expired, (unsigned long long)h.answered_early,
            (unsigned long long)h.memory_refused_ip);
}

/* the live profiler's counters (server/profile), every session together */
static void render_profiles(sbuf *b) {
  prof_metrics m;
  prof_get_metrics(&m);
  sb_printf(b,
            "# HELP pdbsym_profile_sessions Processes being profiled now.\n"
            "# TYPE pdbsym_profile_sessions gauge\n"
            "pdbsym_profile_sessions %llu\n"
            "# HELP pdbsym_profile_sessions_started_total Profiling sessions started.\n"
            "# TYPE pdbsym_profile_sessions_started_total counter\n"
            "pdbsym_profile_sessions_started_total %llu\n"
            "# HELP pdbsym_profile_attach_failures_total Processes named by the settings that could not be attached to.\n"
            "# TYPE pdbsym_profile_attach_failures_total counter\n"
            "pdbsym_profile_attach_failures_total %llu\n"
            "# HELP pdbsym_profile_windows_total Profile windows written.\n"
            "# TYPE pdbsym_profile_windows_total counter\n"
            "pdbsym_profile_windows_total %llu\n"
            "# HELP pdbsym_profile_samples_total Samples in the windows written.\n"
            "# TYPE pdbsym_profile_samples_total counter\n"
            "pdbsym_profile_samples_total %llu\n"
            "# HELP pdbsym_profile_dropped_events_total Events the profiled runtimes dropped (their session buffer full).\n"
            "# TYPE pdbsym_profile_dropped_events_total counter\n"
            "pdbsym_profile_dropped_events_total %llu\n"
            "# HELP pdbsym_profile_rundowns_total Rundown sessions run (at attach, for unknown code, after a code map reset).\n"
            "# TYPE pdbsym_profile_rundowns_total counter\n"
            "pdbsym_profile_rundowns_total %llu\n"
            "# HELP pdbsym_profile_code_resets_total Times a session's code map passed profile_code_budget and was rebuilt.\n"
            "# TYPE pdbsym_profile_code_resets_total counter\n"
            "pdbsym_profile_code_resets_total %llu\n",
            (unsigned long long)m.sessions_active, (unsigned long long)m.sessions_started,
            (unsigned long long)m.attach_failures, (unsigned long long)m.windows,
            (unsigned long long)m.samples, (unsigned long long)m.dropped_events,
            (unsigned long long)m.rundowns, (unsigned long long)m.code_resets);
  prof_push_metrics pm;
  prof_get_push_metrics(&pm);
  sb_printf(b,
            "# HELP pdbsym_profile_push_total Windows pushed to profile_push, by outcome: sent, rejected (a 4xx), dropped (the queue full, or stopping).\n"
            "# TYPE pdbsym_profile_push_total counter\n"
            "pdbsym_profile_push_total{outcome=\"sent\"} %llu\n"
            "pdbsym_profile_push_total{outcome=\"rejected\"} %llu\n"
            "pdbsym_profile_push_total{outcome=\"dropped\"} %llu\n"
            "# HELP pdbsym_profile_push_errors_total Pushes that got no answer, a 5xx or a 429 (each sent again later).\n"
            "# TYPE pdbsym_profile_push_errors_total counter\n"
            "pdbsym_profile_push_errors_total %llu\n"
            "# HELP pdbsym_profile_push_queue Windows waiting to be pushed.\n"
            "# TYPE pdbsym_profile_push_queue gauge\n"
            "pdbsym_profile_push_queue %llu\n",
            (unsigned long long)pm.sent, (unsigned long long)pm.rejected,
            (unsigned long long)pm.dropped, (unsigned long long)pm.errors,
            (unsigned long long)pm.queued);
}

char *mt_render(uint64_t cache_bytes, const engine_stats *es) {
  sbuf b = {malloc(8192), 0, 8192, 0};
  if (!b.buf)
    return NULL;
  b.buf[0] = '\0';
  sb_printf(&b, "# HELP pdbsym_http_requests_total HTTP requests answered, by route and status.\n"
                "# TYPE pdbsym_http_requests_total counter\n");
  for (int r = 0; r < RT__COUNT; r++)
    for (int c = 0; c < MAX_CODE; c++) {
      uint64_t v = atomic_load(&requests[r][c]);
      if (v)
        sb_printf(&b, "pdbsym_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n", api_route_name((api_route_id)r),
                  c, (unsigned long long)v);
    }
  sb_printf(&b, "# HELP pdbsym_http_request_duration_seconds Time to answer a request.\n"
                "# TYPE pdbsym_http_request_duration_seconds histogram\n");
  for (int r = 0; r < RT__COUNT; r++) {
    uint64_t cum = 0;
    for (int k = 0; k <= NBUCKETS; k++)
      cum += atomic_load(&req_buckets[r][k]);
    if (!cum)
      continue;
    uint64_t acc = 0;
    for (int k = 0; k < NBUCKETS; k++) {
      acc += atomic_load(&req_buckets[r][k]);
      sb_printf(&b, "pdbsym_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                api_route_name((api_route_id)r), req_bounds[k], (unsigned long long)acc);
    }
    sb_printf(&b, "pdbsym_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
              api_route_name((api_route_id)r), (unsigned long long)cum);
    sb_printf(&b, "pdbsym_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n", api_route_name((api_route_id)r),
              (double)atomic_load(&req_micros[r]) / 1e6);
    sb_printf(&b, "pdbsym_http_request_duration_seconds_count{route=\"%s\"} %llu\n", api_route_name((api_route_id)r),
              (unsigned long long)cum);
  }
  sb_printf(&b, "# HELP pdbsym_http_requests_in_flight Requests being processed now.\n"
                "# TYPE pdbsym_http_requests_in_flight gauge\n"
                "pdbsym_http_requests_in_flight %ld\n",
            atomic_load(&inflight));
  sb_printf(&b, "# HELP pdbsym_frames_total Frames answered, by status.\n"
                "# TYPE pdbsym_frames_total counter\n");
  for (int s = 0; s < FS__COUNT; s++)
    sb_printf(&b, "pdbsym_frames_total{status=\"%s\"} %llu\n", frame_status_name((frame_status)s),
              (unsigned long long)atomic_load(&frames[s]));
  sb_printf(&b, "# HELP pdbsym_modules_total Modules answered in requests, by status.\n"
                "# TYPE pdbsym_modules_total counter\n");
  for (int s = 0; s <= MOD_PENDING; s++)
    sb_printf(&b, "pdbsym_modules_total{status=\"%s\"} %llu\n", mod_status_name((mod_status)s),
              (unsigned long long)atomic_load(&modules[s]));
  sb_printf(&b,
            "# HELP pdbsym_cache_hits_total Modules answered at once from the cache.\n"
            "# TYPE pdbsym_cache_hits_total counter\n"
            "pdbsym_cache_hits_total %llu\n"
            "# HELP pdbsym_cache_misses_total Modules that were not in the cache.\n"
            "# TYPE pdbsym_cache_misses_total counter\n"
            "pdbsym_cache_misses_total %llu\n"
            "# HELP pdbsym_cache_bytes Bytes the cache folder holds: database, WAL, -shm, downloads in flight.\n"
            "# TYPE pdbsym_cache_bytes gauge\n"
            "pdbsym_cache_bytes %llu\n",
            (unsigned long long)atomic_load(&cache_hits),
            (unsigned long long)atomic_load(&cache_misses),
            (unsigned long long)cache_bytes);
  sb_printf(&b, "# HELP pdbsym_downloads_total Module download jobs settled, by outcome (one per module, however many requests waited).\n"
                "# TYPE pdbsym_downloads_total counter\n");
  static const char *const outcomes[MOD_PENDING] = {"found", "missing", "malformed", "error"};
  for (int k = 0; k < MOD_PENDING; k++)
    sb_printf(&b, "pdbsym_downloads_total{outcome=\"%s\"} %llu\n", outcomes[k],
              (unsigned long long)atomic_load(&downloads[k]));
  sb_printf(&b, "# HELP pdbsym_download_duration_seconds Duration of module download jobs (fetch, parse; the SQLite write comes after).\n"
                "# TYPE pdbsym_download_duration_seconds histogram\n");
  uint64_t acc = 0;
  for (int k = 0; k < DL_BUCKETS; k++) {
    acc += atomic_load(&dl_buckets[k]);
    sb_printf(&b, "pdbsym_download_duration_seconds_bucket{le=\"%g\"} %llu\n", dl_bounds[k],
              (unsigned long long)acc);
  }
  acc += atomic_load(&dl_buckets[DL_BUCKETS]);
  sb_printf(&b,
            "pdbsym_download_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
            "pdbsym_download_duration_seconds_sum %.6f\n"
            "pdbsym_download_duration_seconds_count %llu\n",
            (unsigned long long)acc, (double)atomic_load(&dl_micros) / 1e6,
            (unsigned long long)acc);
  render_engine(&b, es);
  render_http_state(&b);
  render_profiles(&b);
  if (b.oom) {
    free(b.buf);
    return NULL;
  }
  return b.buf;
}
