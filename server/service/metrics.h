/*
 * metrics.h - the service's counters and their Prometheus text exposition
 * (text format 0.0.4) for GET /metrics.  Counters are process-wide atomics.
 *
 * Cache figures are what requests observe of the engine: a module answered
 * at once from the cache is a hit, any other a miss.  Downloads are counted
 * by the engine itself, once per download job whatever the number of requests
 * waiting on it, with the job's outcome and duration (mt_download_cb is the
 * engine's on_download hook).  Cache bytes are the size of the cache's
 * database files, as the engine reports them.  Routes and frame statuses are the API's (api.h).
 */
#ifndef PDBSYM_METRICS_H
#define PDBSYM_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "engine.h"

/* a request is counted by route and status when its answer is queued (so
 * that a client which has its answer sees it counted), or, if it never had
 * one, when it ends (status 0); its duration is recorded when it ends */
void mt_request_count(api_route_id r, unsigned http_status);
void mt_request_time(api_route_id r, double seconds);
void mt_frames(frame_status s, uint64_t n);
void mt_module(mod_status s);
void mt_inflight_add(int delta);
long mt_inflight(void);
void mt_cache(bool hit);
void mt_download(mod_status outcome, double seconds);
/* The same, in the shape of engine_config.on_download. */
void mt_download_cb(int outcome, double seconds);

/* What the HTTP server's limits hold now (http.c fills it in). */
typedef struct {
  unsigned connections, connections_max;
  uint64_t evicted, refused, read_expired, write_expired;
  unsigned workers, workers_busy, queued;
  uint64_t memory_used, memory_peak, memory_max, memory_refused;
  uint64_t memory_kept; /* of memory_used: blocks kept for reuse */
  uint64_t slow_expired;   /* trace uploads closed under trace_min_rate or past trace_max_time */
  uint64_t answered_early; /* requests answered before their body was read whole */
  uint64_t memory_refused_ip; /* reservations refused for request_memory_per_ip */
} mt_http_state;

/* The function /metrics asks for that state (NULL: none; the series are then
 * left out).  Set before the first request, cleared after the last. */
void mt_set_http_state(void (*get)(void *ctx, mt_http_state *out), void *ctx);

/* The exposition text; cache_bytes is the cache's size on disk
 * (engine_cache_bytes), es what the engine and its cache hold (may be NULL).
 * Caller frees; NULL when out of memory. */
char *mt_render(uint64_t cache_bytes, const engine_stats *es);

#endif
