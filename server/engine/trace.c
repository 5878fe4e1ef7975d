/*
 * trace.c - a .NET trace in, symbolicated samples out (see trace.h).
 *
 * Reading (trace_job_feed): blocks come out of parsers/nettrace.c through a
 * window; method, IL-map and module events go to the code map (ntcode.h);
 * StackBlocks are kept until the next sequence point (ids are only valid
 * until then); each sample's stack becomes a list of address indices
 * (distinct (IP, innermost?) pairs), interned, and the sample itself a
 * record in the spill file:
 *
 *   'D' u32 stack id, u16 n, n x u32 address index   a new interned stack
 *   'S' u32 thread index, u32 stack id, u64 timestamp, u8 state,
 *       u64 gap (ticks since the thread's previous sample; all ones for
 *       its first)                                   a sample
 *   'F'                                              the intern table was emptied
 *
 * A stack's 'D' comes before its first 'S'; after an 'F' its id is not used
 * again.  Finishing (trace_job_finish) resolves every address once, after the
 * rundown at the end of the file has named the ReadyToRun code.  Writing
 * (trace_job_write, trace_out.c) replays the spill file.
 */
#include "trace.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filemap.h"
#include "internal_trace.h"
#include "nettrace.h"
#include "il.h"
#include "pe.h"
#include "r2r.h"

#define MAX_METADATA 65536

bool trace_format_parse(const char *name, trace_format *out) {
  if (!strcmp(name, "speedscope"))
    *out = TRACE_SPEEDSCOPE;
  else if (!strcmp(name, "pprof"))
    *out = TRACE_PPROF;
  else if (!strcmp(name, "top"))
    *out = TRACE_TOP;
  else
    return false;
  return true;
}

bool trace_state_parse(const char *name, trace_state *out) {
  if (!strcmp(name, "all"))
    *out = TRACE_STATE_ALL;
  else if (!strcmp(name, "running"))
    *out = TRACE_STATE_RUNNING;
  else if (!strcmp(name, "waiting"))
    *out = TRACE_STATE_WAITING;
  else
    return false;
  return true;
}

const char *trace_state_name(trace_state s) {
  switch (s) {
  case TRACE_STATE_ALL: return "all";
  case TRACE_STATE_RUNNING: return "running";
  case TRACE_STATE_WAITING: return "waiting";
  }
  return "?";
}

const char *trace_format_name(trace_format f) {
  switch (f) {
  case TRACE_SPEEDSCOPE: return "speedscope";
  case TRACE_PPROF: return "pprof";
  case TRACE_TOP: return "top";
  }
  return "?";
}

static void close_images(trace_job *j);

/* ---- small helpers ---- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* code-budget accounting for the job's own tables */
static bool code_take(trace_job *j, size_t bytes, ps_diag *d) {
  size_t total = j->code_bytes + bytes;
  if (total > j->opt.code_budget || total < j->code_bytes) {
    ps_diag_set(d, PS_E_LIMIT, "trace", (size_t)j->stats.bytes,
                "the trace's code tables need more than the %zu-byte code budget",
                j->opt.code_budget);
    return false;
  }
  j->code_bytes = total;
  size_t all = total + j->budget.used;
  if (all > j->stats.peak_code_bytes)
    j->stats.peak_code_bytes = all;
  return true;
}

bool tj_grow(trace_job *j, void **arr, size_t *cap, size_t need, size_t size, ps_diag *d) {
  if (need <= *cap)
    return true;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need)
    ncap *= 2;
  if (!code_take(j, (ncap - *cap) * size, d))
    return false;
  void *n = realloc(*arr, ncap * size);
  if (!n) {
    ps_diag_set(d, PS_E_NOMEM, "trace", (size_t)j->stats.bytes, "out of memory");
    return false;
  }
  memset((char *)n + *cap * size, 0, (ncap - *cap) * size);
  *arr = n;
  *cap = ncap;
  return true;
}

/* ---- spill file ---- */

FILE *tj_tempfile(trace_job *j, ps_diag *d) {
  const char *dir = j->opt.spill_dir;
  if (!dir || !*dir)
    dir = getenv("TMPDIR");
  if (!dir || !*dir)
    dir = "/tmp";
  char path[4096];
  snprintf(path, sizeof path, "%s/pdbsym-trace-XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0) {
    ps_diag_set(d, PS_E_IO, "trace", 0, "temporary file in %s: %s", dir, strerror(errno));
    return NULL;
  }
  unlink(path); /* gone when closed */
  FILE *f = fdopen(fd, "w+b");
  if (!f) {
    close(fd);
    ps_diag_set(d, PS_E_IO, "trace", 0, "temporary file: %s", strerror(errno));
  }
  return f;
}

static ps_err spill_open(trace_job *j, ps_diag *d) {
  j->spill = tj_tempfile(j, d);
  if (!j->spill)
    return d->code;
  setvbuf(j->spill, NULL, _IOFBF, 1 << 16);
  return PS_E_OK;
}

static ps_err spill_put(trace_job *j, const void *p, size_t n, ps_diag *d) {
  if (fwrite(p, 1, n, j->spill) != n)
    return ps_diag_set(d, PS_E_IO, "trace", (size_t)j->stats.bytes, "spill file: %s",
                       strerror(errno));
  j->stats.spill_bytes += n;
  return PS_E_OK;
}

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static void put64(uint8_t *p, uint64_t v) {
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}

/* ---- addresses ---- */

/* the dense index of (ip, leaf), added if new */
static bool addr_index(trace_job *j, uint64_t ip, bool leaf, uint32_t *out, ps_diag *d) {
  if ((j->naddrs + 1) * 2 > j->addr_slots_cap) { /* keep the table at most half full */
    size_t ncap = j->addr_slots_cap ? j->addr_slots_cap * 2 : 4096;
    if (!code_take(j, ncap * sizeof(uint32_t), d))
      return false;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
      return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory"), false;
    for (size_t i = 0; i < j->naddrs; i++) {
      size_t h = (size_t)mix64(j->addrs[i].ip * 2 + j->addrs[i].leaf) & (ncap - 1);
      while (ns[h])
        h = (h + 1) & (ncap - 1);
      ns[h] = (uint32_t)i + 1;
    }
    free(j->addr_slots);
    j->code_bytes -= j->addr_slots_cap * sizeof(uint32_t);
    j->addr_slots = ns;
    j->addr_slots_cap = ncap;
  }
  size_t mask = j->addr_slots_cap - 1;
  size_t h = (size_t)mix64(ip * 2 + leaf) & mask;
  for (;; h = (h + 1) & mask) {
    uint32_t s = j->addr_slots[h];
    if (!s)
      break;
    if (j->addrs[s - 1].ip == ip && j->addrs[s - 1].leaf == leaf && !j->addrs[s - 1].frozen) {
      *out = s - 1;
      return true;
    }
  }
  if (j->naddrs >= UINT32_MAX - 1)
    return ps_diag_set(d, PS_E_LIMIT, "trace", 0, "too many distinct addresses"), false;
  if (!tj_grow(j, (void **)&j->addrs, &j->caddrs, j->naddrs + 1, sizeof *j->addrs, d))
    return false;
  j->addrs[j->naddrs] = (tj_addr){.ip = ip, .leaf = leaf, .frame = TJ_NONE, .callee = TJ_NONE, .il = -1};
  j->addr_slots[h] = (uint32_t)j->naddrs + 1;
  *out = (uint32_t)j->naddrs++;
  j->stats.addresses = j->naddrs;
  return true;
}

/* ---- threads ---- */

static bool thread_index(trace_job *j, uint64_t tid, uint32_t *out, ps_diag *d) {
  for (size_t i = j->last_thread; i < j->nthreads; i++) /* usually the same thread again */
    if (j->threads[i].tid == tid) {
      *out = (uint32_t)i;
      return true;
    }
  for (size_t i = 0; i < j->nthreads; i++)
    if (j->threads[i].tid == tid) {
      *out = (uint32_t)(j->last_thread = i);
      return true;
    }
  if (j->nthreads >= 65536)
    return ps_diag_set(d, PS_E_LIMIT, "trace", 0, "more than 65536 threads"), false;
  if (!tj_grow(j, (void **)&j->threads, &j->cthreads, j->nthreads + 1, sizeof *j->threads, d))
    return false;
  memset(&j->threads[j->nthreads], 0, sizeof j->threads[j->nthreads]);
  j->threads[j->nthreads].tid = tid;
  j->threads[j->nthreads].first_ts = UINT64_MAX;
  *out = (uint32_t)(j->last_thread = j->nthreads++);
  j->stats.threads = j->nthreads;
  return true;
}

/* ---- the stack window (StackBlocks since the last sequence point) ---- */

static void window_clear(trace_job *j) {
  j->win_len = 0;
  j->nwin = 0;
  j->win_sorted = true;
}

static ps_err window_add_block(trace_job *j, const nt_block *b, ps_diag *d) {
  nt_stack_iter it;
  ps_err e = nt_stacks_begin(&it, b, j->pointer_size, d);
  bool have = true;
  while (e == PS_E_OK && have) {
    uint32_t id;
    const uint8_t *ips;
    size_t n;
    e = nt_stacks_next(&it, &id, &ips, &n, &have, d);
    if (e != PS_E_OK || !have)
      break;
    size_t bytes = n * j->pointer_size;
    if (j->win_len + bytes > j->opt.stack_window ||
        (j->nwin + 1) * sizeof(tj_wstack) > j->opt.stack_window)
      return ps_diag_set(d, PS_E_LIMIT, "StackBlock", (size_t)b->offset,
                         "more than %zu bytes of stacks between two sequence points",
                         j->opt.stack_window);
    if (j->win_len + bytes > j->win_cap) {
      size_t ncap = j->win_cap ? j->win_cap : 1 << 16;
      while (ncap < j->win_len + bytes)
        ncap *= 2;
      uint8_t *nb = realloc(j->win, ncap);
      if (!nb)
        return ps_diag_set(d, PS_E_NOMEM, "StackBlock", (size_t)b->offset, "out of memory");
      j->win = nb;
      j->win_cap = ncap;
    }
    if (j->nwin == j->cwin) {
      size_t nc = j->cwin ? 2 * j->cwin : 1024;
      tj_wstack *nw = realloc(j->wstacks, nc * sizeof *nw);
      if (!nw)
        return ps_diag_set(d, PS_E_NOMEM, "StackBlock", (size_t)b->offset, "out of memory");
      j->wstacks = nw;
      j->cwin = nc;
    }
    if (bytes)
      memcpy(j->win + j->win_len, ips, bytes);
    if (j->nwin > 0 && j->wstacks[j->nwin - 1].id >= id)
      j->win_sorted = false;
    j->wstacks[j->nwin++] = (tj_wstack){id, (uint32_t)n, j->win_len};
    j->win_len += bytes;
    size_t used = j->win_len + j->nwin * sizeof(tj_wstack);
    if (used > j->stats.peak_window_bytes)
      j->stats.peak_window_bytes = used;
  }
  return e;
}

static const tj_wstack *window_find(const trace_job *j, uint32_t id) {
  if (j->win_sorted) {
    size_t lo = 0, hi = j->nwin;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (j->wstacks[mid].id < id)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < j->nwin && j->wstacks[lo].id == id ? &j->wstacks[lo] : NULL;
  }
  for (size_t i = j->nwin; i > 0; i--)
    if (j->wstacks[i - 1].id == id)
      return &j->wstacks[i - 1];
  return NULL;
}

/* ---- interned stacks ---- */

static ps_err intern_flush(trace_job *j, ps_diag *d) {
  memset(j->islots, 0, j->islots_cap * sizeof *j->islots);
  j->ilen = 0;
  j->ninterned = 0;
  j->stats.stack_flushes++;
  uint8_t tag = 'F';
  return spill_put(j, &tag, 1, d);
}

static size_t intern_bytes(size_t slots, size_t arena) {
  return slots * sizeof(tj_islot) + arena * sizeof(uint32_t);
}

/* the interned id of the address list a[0, n) */
static ps_err intern(trace_job *j, const uint32_t *a, uint32_t n, uint32_t *id, ps_diag *d) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
  for (uint32_t i = 0; i < n; i++)
    h = mix64(h ^ a[i]);
  uint32_t h32 = (uint32_t)h | 1;
  if (j->islots_cap) {
    size_t mask = j->islots_cap - 1;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
      tj_islot *sl = &j->islots[s];
      if (!sl->hash)
        break;
      if (sl->hash == h32 && sl->n == n &&
          (n == 0 || !memcmp(j->iarena + sl->off, a, n * sizeof *a))) {
        *id = sl->id;
        return PS_E_OK;
      }
    }
  }
  /* new: room in the arena and the slots (at most half full), else flush */
  size_t need_slots = j->islots_cap;
  while ((j->ninterned + 1) * 2 > need_slots)
    need_slots = need_slots ? need_slots * 2 : 64;
  size_t need_arena = j->ilen + n;
  /* what the table would hold after growing: capacities, not use, count */
  size_t acap = j->iarena_cap;
  if (need_arena > acap) {
    acap = acap ? acap : 256;
    while (acap < need_arena)
      acap *= 2;
    if (intern_bytes(need_slots, acap) > j->opt.stack_budget)
      acap = need_arena; /* no slack past the budget */
  }
  if (intern_bytes(need_slots, acap) > j->opt.stack_budget) {
    if (j->ninterned == 0)
      return ps_diag_set(d, PS_E_LIMIT, "trace", (size_t)j->stats.bytes,
                         "one stack of %u frames does not fit the %zu-byte stack budget", n,
                         j->opt.stack_budget);
    ps_err e = intern_flush(j, d);
    if (e)
      return e;
    return intern(j, a, n, id, d);
  }
  if (need_slots != j->islots_cap) {
    tj_islot *ns = calloc(need_slots, sizeof *ns);
    if (!ns)
      return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
    for (size_t i = 0; i < j->islots_cap; i++) {
      if (!j->islots[i].hash)
        continue;
      size_t s = (size_t)j->islots[i].full & (need_slots - 1);
      while (ns[s].hash)
        s = (s + 1) & (need_slots - 1);
      ns[s] = j->islots[i];
    }
    free(j->islots);
    j->islots = ns;
    j->islots_cap = need_slots;
  }
  if (acap != j->iarena_cap) {
    uint32_t *na = realloc(j->iarena, acap * sizeof *na);
    if (!na)
      return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
    j->iarena = na;
    j->iarena_cap = acap;
  }
  size_t mask = j->islots_cap - 1;
  size_t s = (size_t)h & mask;
  while (j->islots[s].hash)
    s = (s + 1) & mask;
  if (n)
    memcpy(j->iarena + j->ilen, a, n * sizeof *a);
  j->islots[s] = (tj_islot){h32, n, (uint32_t)j->ilen, j->next_stack_id, h};
  j->ilen += n;
  j->ninterned++;
  size_t now = intern_bytes(j->islots_cap, j->iarena_cap);
  if (now > j->stats.peak_stack_bytes)
    j->stats.peak_stack_bytes = now;
  *id = j->next_stack_id++;
  j->stats.stacks++;
  /* its definition, before any sample that uses it */
  uint8_t hdr[7];
  hdr[0] = 'D';
  put32(hdr + 1, *id);
  hdr[5] = (uint8_t)n;
  hdr[6] = (uint8_t)(n >> 8);
  ps_err e = spill_put(j, hdr, sizeof hdr, d);
  for (uint32_t i = 0; e == PS_E_OK && i < n; i++) {
    uint8_t b[4];
    put32(b, a[i]);
    e = spill_put(j, b, 4, d);
  }
  return e;
}

/* ---- events ---- */

/* ---- weights: the gaps between a thread's samples ---- */

uint64_t tj_ticks_ns(const trace_job *j, uint64_t ticks) {
  if (!j->qpc_freq || j->qpc_freq == 1000000000u)
    return ticks;
  double ns = (double)ticks * 1e9 / (double)j->qpc_freq;
  return ns >= 1.8e19 ? UINT64_MAX : (uint64_t)ns;
}

static size_t gap_bucket(uint64_t ns) {
  if (ns < 64)
    return (size_t)ns;
  unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= 6 */
  return (size_t)(e - 5) * 64 + (size_t)((ns >> (e - 6)) & 63);
}

/* the middle of bucket b */
static uint64_t gap_value(size_t b) {
  if (b < 64)
    return b;
  unsigned e = (unsigned)(b / 64) + 5;
  uint64_t lo = ((uint64_t)64 + (b % 64)) << (e - 6);
  return lo + (((uint64_t)1 << (e - 6)) >> 1);
}

uint64_t tj_interval_ns(const trace_job *j) {
  if (j->ngaps == 0)
    return j->sampling_ns ? j->sampling_ns : 1000000;
  uint64_t half = (j->ngaps + 1) / 2, seen = 0;
  for (size_t b = 0; b < TJ_GAP_BUCKETS; b++) {
    seen += j->gaps[b];
    if (seen >= half)
      return gap_value(b) ? gap_value(b) : 1;
  }
  return j->sampling_ns ? j->sampling_ns : 1000000;
}

bool tj_keeps(const trace_job *j, uint8_t st) {
  switch (j->opt.state) {
  case TRACE_STATE_RUNNING: return st == TJ_RUNNING;
  case TRACE_STATE_WAITING: return st == TJ_WAITING;
  default: return true;
  }
}

/* The sampler's type (Microsoft-DotNETCore-SampleProfiler's ThreadSample,
 * dotnet/runtime src/native/eventpipe/ep-sample-profiler.h): 1 external
 * (the thread was in native code: a wait, a blocking call, native work),
 * 2 managed, 0 an error. */
static uint8_t sample_state(uint32_t type) {
  return type == 2 ? TJ_RUNNING : type == 1 ? TJ_WAITING : TJ_OTHER;
}

static ps_err on_sample(trace_job *j, const nt_event *ev, ps_diag *d) {
  uint32_t type = 0;
  ps_err te = nt_decode_sample(ev->payload, ev->payload_len, &type, d);
  if (te)
    return te;
  uint8_t state = sample_state(type);
  if (state == TJ_OTHER && !j->stats.samples_other)
    j->unknown_type = type;
  uint32_t t;
  uint64_t tid = ev->thread_id;
  if (j->format == 6) /* a thread index: its OS id when a ThreadBlock gave one */
    for (size_t k = 0; k < j->nv6; k++)
      if (j->v6_threads[k].index == tid) {
        tid = j->v6_threads[k].tid;
        break;
      }
  if (!thread_index(j, tid, &t, d))
    return d->code;
  tj_thread *th = &j->threads[t];
  if (ev->timestamp < th->first_ts)
    th->first_ts = ev->timestamp;
  if (ev->timestamp > th->last_ts)
    th->last_ts = ev->timestamp;
  th->samples++;
  th->by_state[state]++;
  if (state == TJ_RUNNING)
    j->stats.samples_running++;
  else if (state == TJ_WAITING)
    j->stats.samples_waiting++;
  else
    j->stats.samples_other++;
  /* the time since the thread's previous sample: the sample's weight
   * before the cap, and one more gap toward the measured interval */
  uint64_t gap = TJ_GAP_FIRST;
  if (th->seen) {
    gap = ev->timestamp >= th->prev_ts ? ev->timestamp - th->prev_ts : 0;
    uint64_t ns = tj_ticks_ns(j, gap);
    if (ns > 0) {
      j->gaps[gap_bucket(ns)]++;
      j->ngaps++;
    }
  }
  th->prev_ts = ev->timestamp;
  th->seen = true;
  const tj_wstack *ws = ev->stack_id ? window_find(j, ev->stack_id) : NULL;
  uint32_t n = ws ? ws->n : 0;
  if (n > TJ_MAX_FRAMES)
    n = TJ_MAX_FRAMES; /* the runtime stops at 100 */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t ip = nt_stack_ip(j->win + ws->off, i, j->pointer_size);
    if (!addr_index(j, ip, i == 0, &j->scratch[i], d))
      return d->code;
    /* the callee of a return address, for its honest line: the first seen
     * (one call instruction: every callee of it is what that call names, or
     * an implementation of it, whose name is the same) */
    if (i > 0 && j->addrs[j->scratch[i]].callee == TJ_NONE)
      j->addrs[j->scratch[i]].callee = j->scratch[i - 1];
  }
  uint32_t id = 0;
  ps_err e = intern(j, j->scratch, n, &id, d);
  if (e)
    return e;
  uint8_t rec[26];
  rec[0] = 'S';
  put32(rec + 1, t);
  put32(rec + 5, id);
  put64(rec + 9, ev->timestamp);
  rec[17] = state;
  put64(rec + 18, gap);
  j->stats.samples++;
  return spill_put(j, rec, sizeof rec, d);
}

/* ---- events the runtime dropped ----
 *
 * Each capture thread numbers the events it writes 1, 2, 3...; a gap is
 * events the runtime dropped because the session's buffer was full.  A
 * sequence point lists every thread with the number of the last event it
 * wrote.  The rule is TraceEvent's (EventCache.cs): a thread seen for the
 * first time counts nothing; in V4/V5 files a thread whose last number is 0
 * counts nothing (its id may be a new thread's). */

static tj_seq *seq_thread(trace_job *j, uint64_t thread, uint32_t first, ps_diag *d) {
  for (size_t i = 0; i < j->nseqs; i++)
    if (j->seqs[i].thread == thread)
      return &j->seqs[i];
  if (j->nseqs >= 65536) { /* forget them all rather than grow: a few gaps unseen */
    j->nseqs = 0;
  }
  if (!tj_grow(j, (void **)&j->seqs, &j->cseqs, j->nseqs + 1, sizeof *j->seqs, d))
    return NULL;
  tj_seq *t = &j->seqs[j->nseqs++];
  t->thread = thread;
  t->seq = first;
  t->listed = true;
  return t;
}

static void seq_gap(trace_job *j, uint32_t last, uint32_t next) {
  if (j->format < 6 && last == 0)
    return;
  int32_t gap = (int32_t)(next - last);
  if (gap > 0)
    j->stats.dropped_events += (uint64_t)gap;
}

static ps_err on_sp_thread(void *ctx, uint64_t thread, uint32_t seq) {
  trace_job *j = ctx;
  ps_diag d;
  ps_diag_clear(&d);
  tj_seq *t = seq_thread(j, thread, seq, &d);
  if (!t)
    return d.code;
  seq_gap(j, t->seq, seq);
  t->seq = seq;
  t->listed = true;
  return PS_E_OK;
}

/* V6: a thread index the writer let go (RemoveThreadBlock): the events it
 * dropped before counted, its sequence forgotten; its ThreadBlock row stays
 * until the next sequence point, for events still queued. */
static ps_err on_removed_thread(void *ctx, uint64_t thread, uint32_t seq) {
  trace_job *j = ctx;
  if (j->live)
    for (size_t i = 0; i < j->nseqs; i++)
      if (j->seqs[i].thread == thread) {
        seq_gap(j, j->seqs[i].seq, seq);
        j->seqs[i] = j->seqs[--j->nseqs];
        break;
      }
  for (size_t k = 0; k < j->nv6; k++)
    if (j->v6_threads[k].index == thread)
      j->v6_threads[k].gone = true;
  return PS_E_OK;
}

/* V6: the ThreadBlock rows let go (all of them when a sequence point
 * flushes the thread cache), so that a process whose threads come and go
 * keeps a table of the threads it has now */
static void v6_forget(trace_job *j, bool all) {
  size_t n = 0;
  if (!all)
    for (size_t k = 0; k < j->nv6; k++)
      if (!j->v6_threads[k].gone)
        j->v6_threads[n++] = j->v6_threads[k];
  j->nv6 = n;
  if (n == 0 && j->cv6 > 1024) { /* a burst of threads gone: their table too */
    free(j->v6_threads);
    j->v6_threads = NULL;
    j->cv6 = 0;
  }
}

/* a sequence point: gaps counted, and threads it does not name forgotten */
static ps_err on_sequence_point(trace_job *j, const nt_block *b, ps_diag *d) {
  for (size_t i = 0; i < j->nseqs; i++)
    j->seqs[i].listed = false;
  ps_err e = nt_sequence_point_threads(b, j->format, on_sp_thread, j, d);
  size_t n = 0;
  for (size_t i = 0; i < j->nseqs; i++)
    if (j->seqs[i].listed)
      j->seqs[n++] = j->seqs[i];
  j->nseqs = n;
  return e;
}

/* a code map past its budget: a live job goes on without it (the caller
 * forgets it and runs a rundown); any other job fails */
static ps_err code_full(trace_job *j, const nt_event *ev, ps_diag *d) {
  if (j->live && (j->code.err == PS_E_LIMIT || j->code.err == PS_E_NOMEM)) {
    j->code_full = true;
    j->stats.code_events_lost++;
    return PS_E_OK;
  }
  return ps_diag_set(d, j->code.err, "trace", (size_t)ev->offset,
                     "the code map needs more than the %zu-byte code budget", j->opt.code_budget);
}

static ps_err freeze_range(trace_job *j, const nt_method_load *ml, ps_diag *d);

/* One event pdbsym reads, in time order (see the queue below). */
static ps_err handle_event(trace_job *j, const nt_event *ev, const tj_meta *m, ps_diag *d) {
  ps_err e = PS_E_OK;
  switch ((nt_event_class)m->cls) {
  case NT_EV_METHOD_LOAD: {
    nt_method_load ml;
    e = nt_decode_method_load(ev->payload, ev->payload_len, m->version, &ml, d);
    if (e == PS_E_OK && !ntc_add_method(&j->code, &ml))
      e = code_full(j, ev, d);
    j->stats.methods = j->code.nmethods;
    break;
  }
  case NT_EV_METHOD_UNLOAD: {
    nt_method_load ml;
    e = nt_decode_method_load(ev->payload, ev->payload_len, m->version, &ml, d);
    if (e == PS_E_OK)
      e = freeze_range(j, &ml, d);
    /* a live job drops the body at the next cut; a file's keeps every body */
    if (e == PS_E_OK && j->live && !ntc_note_unload(&j->code, &ml))
      e = code_full(j, ev, d);
    break;
  }
  case NT_EV_IL_MAP: {
    nt_il_map im;
    e = nt_decode_il_map(ev->payload, ev->payload_len, m->version, &im, d);
    if (e == PS_E_OK && !ntc_add_il_map(&j->code, &im))
      e = code_full(j, ev, d);
    break;
  }
  case NT_EV_MODULE_LOAD: {
    nt_module_load mo;
    e = nt_decode_module_load(ev->payload, ev->payload_len, m->version, &mo, d);
    if (e == PS_E_OK && !ntc_add_module(&j->code, &mo))
      e = code_full(j, ev, d);
    j->stats.modules = j->code.nmodules;
    break;
  }
  case NT_EV_SAMPLE: e = on_sample(j, ev, d); break;
  default: break;
  }
  if (e != PS_E_OK && d->where == NULL)
    d->where = "EventBlock";
  return e;
}

/* ---- events in time order ----
 *
 * The runtime writes each thread's events in order, but the threads'
 * buffers reach the stream in any order: a method's unload on the GC's
 * thread may come after the load of the method that reuses its memory, and
 * after that method's samples.  So, as TraceEvent does (EventCache.cs), the
 * events pdbsym reads are queued between two sequence points and handled
 * sorted by timestamp (ties in file order) at the second one, while the
 * StackBlocks they name are still held.  A live job's cut, and the end of a
 * trace, handle what is queued.  The queue is bounded by stack_window bytes;
 * past it, it is handled early. */

static int cmp_qev(const void *a, const void *b) {
  const tj_qev *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* Handles the queued events up to timestamp upto (all: UINT64_MAX), in time
 * order; later ones stay queued. */
static ps_err flush_upto(trace_job *j, uint64_t upto, ps_diag *d) {
  if (j->nq > 1)
    qsort(j->q, j->nq, sizeof *j->q, cmp_qev);
  ps_err e = PS_E_OK;
  size_t i = 0;
  for (; i < j->nq && e == PS_E_OK && j->q[i].ts <= upto; i++) {
    const tj_qev *q = &j->q[i];
    nt_event ev;
    memset(&ev, 0, sizeof ev);
    ev.offset = q->offset;
    ev.metadata_id = q->metadata_id;
    ev.sequence = q->sequence;
    ev.thread_id = q->thread_id;
    ev.capture_thread_id = q->capture_thread_id;
    ev.stack_id = q->stack_id;
    ev.timestamp = q->ts;
    ev.payload = j->qarena + q->payload_off;
    ev.payload_len = q->payload_len;
    tj_meta m = {q->metadata_id, q->cls, q->version};
    e = handle_event(j, &ev, &m, d);
  }
  if (i == j->nq || e) {
    j->nq = 0;
    j->qlen = 0;
    return e;
  }
  /* the rest, and their payloads (in any order in the arena), to the front */
  size_t rest = 0;
  for (size_t k = i; k < j->nq; k++)
    rest += j->q[k].payload_len;
  uint8_t *tmp = malloc(rest ? rest : 1);
  if (!tmp)
    return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
  size_t n = 0, len = 0;
  for (size_t k = i; k < j->nq; k++) {
    tj_qev q = j->q[k];
    memcpy(tmp + len, j->qarena + q.payload_off, q.payload_len);
    q.payload_off = (uint32_t)len;
    len += q.payload_len;
    j->q[n++] = q;
  }
  if (len)
    memcpy(j->qarena, tmp, len);
  free(tmp);
  j->nq = n;
  j->qlen = len;
  return PS_E_OK;
}

static ps_err flush_queue(trace_job *j, ps_diag *d) { return flush_upto(j, UINT64_MAX, d); }

static ps_err on_event(trace_job *j, const nt_event *ev, ps_diag *d) {
  j->stats.events++;
  if (j->live && ev->metadata_id != 0) {
    tj_seq *t = seq_thread(j, ev->capture_thread_id, ev->sequence - 1, d);
    if (!t)
      return d->code;
    seq_gap(j, t->seq, ev->sequence - 1);
    t->seq = ev->sequence;
  }
  const tj_meta *m = NULL;
  if (ev->metadata_id < j->nmeta_by_id && j->meta_by_id[ev->metadata_id] != TJ_NONE)
    m = &j->metas[j->meta_by_id[ev->metadata_id]];
  if (!m || m->cls == NT_EV_OTHER)
    return PS_E_OK; /* not an event pdbsym reads */
  if (ev->payload_len > UINT32_MAX / 2)
    return ps_diag_set(d, PS_E_LIMIT, "EventBlock", (size_t)ev->offset, "event payload too large");
  size_t bytes = (j->nq + 1) * sizeof(tj_qev) + j->qlen + ev->payload_len;
  if (bytes > j->opt.stack_window && j->nq) { /* handled early rather than grow */
    ps_err e = flush_queue(j, d);
    if (e)
      return e;
  }
  if (j->nq == j->cq) {
    size_t nc = j->cq ? 2 * j->cq : 1024;
    tj_qev *nq = realloc(j->q, nc * sizeof *nq);
    if (!nq)
      return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
    j->q = nq;
    j->cq = nc;
  }
  if (j->qlen + ev->payload_len > j->qcap) {
    size_t nc = j->qcap ? j->qcap : 1 << 16;
    while (nc < j->qlen + ev->payload_len)
      nc *= 2;
    uint8_t *na = realloc(j->qarena, nc);
    if (!na)
      return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
    j->qarena = na;
    j->qcap = nc;
  }
  if (ev->payload_len)
    memcpy(j->qarena + j->qlen, ev->payload, ev->payload_len);
  j->q[j->nq] = (tj_qev){ev->timestamp,    ev->thread_id,         ev->capture_thread_id,
                         ev->offset,       ev->stack_id,          ev->metadata_id,
                         ev->sequence,     (uint32_t)j->qlen,     (uint32_t)ev->payload_len,
                         j->qorder++,      m->cls,                m->version};
  if (ev->timestamp > j->max_ts)
    j->max_ts = ev->timestamp;
  j->nq++;
  j->qlen += ev->payload_len;
  bytes = j->nq * sizeof(tj_qev) + j->qlen;
  if (bytes + j->win_len > j->stats.peak_window_bytes)
    j->stats.peak_window_bytes = bytes + j->win_len;
  return PS_E_OK;
}

static ps_err on_metadata(trace_job *j, const nt_block *b, ps_diag *d) {
  nt_metadata_iter it;
  ps_err e = nt_metadata_begin(&it, b, j->format, d);
  bool have = true;
  while (e == PS_E_OK && have) {
    nt_metadata m;
    e = nt_metadata_next(&it, &m, &have, d);
    if (e != PS_E_OK || !have)
      break;
    if (m.id < j->nmeta_by_id && j->meta_by_id[m.id] != TJ_NONE) { /* defined again */
      j->metas[j->meta_by_id[m.id]] = (tj_meta){m.id, (uint8_t)nt_classify(&m), m.version};
      continue;
    }
    if (m.id >= MAX_METADATA || j->nmetas >= MAX_METADATA)
      return ps_diag_set(d, PS_E_LIMIT, "MetadataBlock", (size_t)b->offset,
                         "metadata id %u over the limit of %d", m.id, MAX_METADATA);
    if (!tj_grow(j, (void **)&j->metas, &j->cmetas, j->nmetas + 1, sizeof *j->metas, d))
      return d->code;
    if (m.id >= j->nmeta_by_id) {
      size_t old = j->cmeta_by_id;
      if (!tj_grow(j, (void **)&j->meta_by_id, &j->cmeta_by_id, (size_t)m.id + 1,
                   sizeof *j->meta_by_id, d))
        return d->code;
      for (size_t i = old; i < j->cmeta_by_id; i++)
        j->meta_by_id[i] = TJ_NONE;
      j->nmeta_by_id = (size_t)m.id + 1;
    }
    j->metas[j->nmetas] = (tj_meta){m.id, (uint8_t)nt_classify(&m), m.version};
    j->meta_by_id[m.id] = (uint32_t)j->nmetas++;
  }
  return e;
}

static ps_err on_block(trace_job *j, const nt_block *b, ps_diag *d) {
  j->stats.blocks++;
  switch (b->kind) {
  case NT_BLOCK_TRACE: {
    nt_trace_info ti;
    ps_err e = nt_read_trace(b, j->format, &ti, d);
    if (e)
      return e;
    j->pointer_size = ti.pointer_size;
    j->qpc_freq = ti.qpc_frequency;
    j->sync_qpc = ti.sync_qpc;
    j->sampling_ns = ti.sampling_rate ? ti.sampling_rate : 1000000;
    j->stats.nominal_ns = j->sampling_ns;
    j->pid = ti.process_id;
    return PS_E_OK;
  }
  case NT_BLOCK_METADATA: return on_metadata(j, b, d);
  case NT_BLOCK_STACK: return window_add_block(j, b, d);
  case NT_BLOCK_SP: {
    nt_sequence_point sp;
    ps_err e = nt_read_sequence_point(b, j->format, &sp, d);
    if (e == PS_E_OK)
      e = flush_queue(j, d); /* while the StackBlocks they name are held */
    if (e == PS_E_OK && j->live)
      e = on_sequence_point(j, b, d);
    window_clear(j);
    if (e == PS_E_OK && j->format == 6) /* the queued events have used them */
      v6_forget(j, (sp.flags & 1) != 0);
    return e;
  }
  case NT_BLOCK_REMOVE_THREAD: return nt_removed_threads(b, on_removed_thread, j, d);
  case NT_BLOCK_EVENT: {
    nt_event_iter it;
    ps_err e = nt_events_begin(&it, b, j->format, d);
    bool have = true;
    while (e == PS_E_OK && have) {
      nt_event ev;
      e = nt_events_next(&it, &ev, &have, d);
      if (e == PS_E_OK && have)
        e = on_event(j, &ev, d);
    }
    return e;
  }
  case NT_BLOCK_THREAD: { /* V6: events name threads by index */
    nt_thread_iter it;
    ps_err e = nt_threads_begin(&it, b, d);
    bool have = true;
    while (e == PS_E_OK && have) {
      nt_thread t;
      e = nt_threads_next(&it, &t, &have, d);
      if (e != PS_E_OK || !have || !t.has_thread_id)
        continue;
      size_t k = 0;
      while (k < j->nv6 && j->v6_threads[k].index != t.index)
        k++;
      if (k == j->nv6) {
        if (j->nv6 >= TJ_MAX_V6_THREADS) /* what a RemoveThreadBlock named may go early */
          v6_forget(j, false);
        if (j->nv6 >= TJ_MAX_V6_THREADS)
          return ps_diag_set(d, PS_E_LIMIT, "ThreadBlock", (size_t)b->offset,
                             "more than %d threads in use", TJ_MAX_V6_THREADS);
        if (!tj_grow(j, (void **)&j->v6_threads, &j->cv6, j->nv6 + 1, sizeof *j->v6_threads, d))
          return d->code;
        k = j->nv6++;
      }
      j->v6_threads[k].index = t.index;
      j->v6_threads[k].tid = t.os_thread_id;
      j->v6_threads[k].gone = false;
    }
    return e;
  }
  default: return PS_E_OK; /* V6 label lists: nothing pdbsym needs */
  }
}

/* ---- the job ---- */

ps_err trace_job_open(const trace_options *o, trace_job **out, ps_diag *d) {
  *out = NULL;
  trace_job *j = calloc(1, sizeof *j);
  if (!j)
    return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
  j->opt = *o;
  if (!j->opt.stack_budget)
    j->opt.stack_budget = TRACE_DEFAULT_STACK_BUDGET;
  if (!j->opt.stack_window)
    j->opt.stack_window = TRACE_DEFAULT_STACK_WINDOW;
  if (!j->opt.code_budget)
    j->opt.code_budget = TRACE_DEFAULT_CODE_BUDGET;
  if (!j->opt.max_block)
    j->opt.max_block = TRACE_DEFAULT_MAX_BLOCK;
  if (!j->opt.top)
    j->opt.top = TRACE_DEFAULT_TOP;
  snprintf(j->name, sizeof j->name, "%s", o->name ? o->name : "trace");
  ps_budget_init(&j->budget, j->opt.code_budget);
  ntc_init(&j->code, &j->budget);
  nt_stream_init(&j->stream, j->opt.max_block);
  j->next_stack_id = 1;
  j->win_sorted = true;
  ps_err e = spill_open(j, d);
  if (e) {
    trace_job_close(j);
    return e;
  }
  *out = j;
  return PS_E_OK;
}

void trace_job_set_progress(trace_job *j, trace_progress_fn fn, void *ctx) {
  j->progress = fn;
  j->progress_ctx = ctx;
}

void trace_job_set_deadline(trace_job *j, uint64_t deadline_ms) {
  j->opt.resolve_deadline_ms = deadline_ms;
}

const trace_stats *trace_job_stats(const trace_job *j) { return &j->stats; }

/* Reads every whole block in the window. */
static ps_err pump(trace_job *j, bool eof, ps_diag *d) {
  size_t pos = 0;
  ps_err e = PS_E_OK;
  while (!j->stream.ended) {
    size_t used, need;
    nt_block b;
    static const uint8_t nothing[1];
    const uint8_t *at = j->rbuf ? j->rbuf + pos : nothing; /* no bytes fed at all */
    e = nt_stream_next(&j->stream, at, j->rlen - pos, eof, &used, &need, &b, d);
    if (e == PS_E_TRUNCATED && !eof) {
      e = PS_E_OK;
      j->need = need;
      break;
    }
    if (e)
      break;
    if (j->stream.format && !j->format)
      j->format = j->stream.format;
    pos += used;
    j->stats.bytes = j->stream.offset;
    if (b.kind != NT_BLOCK_NONE && b.kind != NT_BLOCK_END) {
      e = on_block(j, &b, d);
      if (e)
        break;
      if (j->progress)
        j->progress(j->progress_ctx, &j->stats);
    }
  }
  if (pos) {
    memmove(j->rbuf, j->rbuf + pos, j->rlen - pos);
    j->rlen -= pos;
  }
  if (e == PS_E_OK && eof && !j->stream.ended)
    e = ps_diag_set(d, PS_E_TRUNCATED, "end of stream", (size_t)j->stream.offset,
                    "the trace ends without its end-of-stream mark");
  return e;
}

ps_err trace_job_feed(trace_job *j, const uint8_t *data, size_t len, ps_diag *d) {
  if (j->failed)
    return ps_diag_set(d, PS_E_INVALID, "trace", 0, "the job already failed");
  while (len > 0) {
    if (j->stream.ended) { /* bytes after the end mark are ignored */
      j->stats.bytes += len;
      return PS_E_OK;
    }
    size_t want = j->need > j->rlen ? j->need - j->rlen : 0;
    size_t take = len;
    if (j->rlen + take > j->rcap) {
      size_t limit = j->opt.max_block + 256;
      size_t ncap = j->rcap ? j->rcap : 1 << 16;
      while (ncap < j->rlen + take && ncap < limit)
        ncap *= 2;
      if (ncap > limit)
        ncap = limit > j->rlen + want ? limit : j->rlen + want;
      if (ncap > j->rcap) {
        uint8_t *nb = realloc(j->rbuf, ncap);
        if (!nb)
          return j->failed = true, ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
        j->rbuf = nb;
        j->rcap = ncap;
        if (ncap > j->stats.peak_read_bytes)
          j->stats.peak_read_bytes = ncap;
      }
      if (take > j->rcap - j->rlen)
        take = j->rcap - j->rlen;
    }
    memcpy(j->rbuf + j->rlen, data, take);
    j->rlen += take;
    data += take;
    len -= take;
    if (j->rlen >= j->need || j->rlen == j->rcap) {
      ps_err e = pump(j, false, d);
      if (e)
        return j->failed = true, e;
      if (j->rlen == j->rcap && j->need > j->rcap) {
        /* the window is full and the unit is longer: room for all of it (a
         * chunk that filled the window exactly never grew it) */
        size_t limit = j->opt.max_block + 256;
        if (j->need > limit)
          return j->failed = true,
                 ps_diag_set(d, PS_E_LIMIT, "trace", (size_t)j->stream.offset,
                             "a block of more than %zu bytes", j->opt.max_block);
        size_t ncap = j->rcap;
        while (ncap < j->need)
          ncap = ncap * 2 < limit ? ncap * 2 : limit;
        uint8_t *nb = realloc(j->rbuf, ncap);
        if (!nb)
          return j->failed = true, ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
        j->rbuf = nb;
        j->rcap = ncap;
        if (ncap > j->stats.peak_read_bytes)
          j->stats.peak_read_bytes = ncap;
      }
    }
  }
  return PS_E_OK;
}

void trace_job_close(trace_job *j) {
  if (!j)
    return;
  if (j->spill)
    fclose(j->spill);
  close_images(j);
  for (size_t i = 0; i < j->nmods; i++) {
    if (j->mods[i].local)
      st_free(&j->mods[i].local_st);
    if (j->mods[i].pinned && j->eng)
      engine_release(j->eng, &j->mods[i].h);
  }
  free(j->mods);
  ntc_free(&j->code);
  free(j->rbuf);
  free(j->win);
  free(j->wstacks);
  free(j->islots);
  free(j->iarena);
  free(j->addrs);
  free(j->addr_slots);
  free(j->threads);
  free(j->metas);
  free(j->meta_by_id);
  free(j->v6_threads);
  free(j->frames);
  free(j->frame_slots);
  free(j->fstrs);
  free(j->calls);
  free(j->seqs);
  free(j->q);
  free(j->qarena);
  free(j);
}

/* ---- finishing: modules and frames ---- */

static const char *base_name(const char *p) {
  const char *b = p;
  for (const char *q = p; *q; q++)
    if (*q == '/' || *q == '\\')
      b = q + 1;
  return b;
}

/* "System.Private.CoreLib" from ".../System.Private.CoreLib.dll" */
static void short_module(const char *path, char *out, size_t cap) {
  const char *b = base_name(path);
  size_t n = strlen(b);
  if (n > 4 && (!strcmp(b + n - 4, ".dll") || !strcmp(b + n - 4, ".exe") ||
                !strcmp(b + n - 4, ".DLL") || !strcmp(b + n - 4, ".EXE")))
    n -= 4;
  if (n >= cap)
    n = cap - 1;
  memcpy(out, b, n);
  out[n] = '\0';
}

static uint32_t fstr(trace_job *j, const char *s, ps_diag *d) {
  size_t n = strlen(s);
  if (n == 0)
    return 0;
  if (j->fstrs_len == 0) {
    if (!tj_grow(j, (void **)&j->fstrs, &j->fstrs_cap, 1, 1, d))
      return TJ_NONE;
    j->fstrs_len = 1;
  }
  if (!tj_grow(j, (void **)&j->fstrs, &j->fstrs_cap, j->fstrs_len + n + 1, 1, d))
    return TJ_NONE;
  uint32_t off = (uint32_t)j->fstrs_len;
  memcpy(j->fstrs + off, s, n + 1);
  j->fstrs_len += n + 1;
  return off;
}

/* the frame index of (name, file, line, column), added if new */
static bool frame_index(trace_job *j, const tj_frame *f, const char *name, const char *file,
                        const char *function, const char *async, uint32_t *out, ps_diag *d) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char *p = name; *p; p++)
    h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
  h = mix64(h ^ f->line ^ ((uint64_t)f->column << 32) ^ ((uint64_t)f->line_approx << 63));
  for (const char *p = file; *p; p++)
    h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
  if ((j->nframes + 1) * 2 > j->frame_slots_cap) {
    size_t ncap = j->frame_slots_cap ? 2 * j->frame_slots_cap : 1024;
    if (!code_take(j, ncap * sizeof(uint32_t), d))
      return false;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
      return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory"), false;
    for (size_t i = 0; i < j->nframes; i++) {
      size_t s = (size_t)j->frames[i].hash & (ncap - 1);
      while (ns[s])
        s = (s + 1) & (ncap - 1);
      ns[s] = (uint32_t)i + 1;
    }
    free(j->frame_slots);
    j->frame_slots = ns;
    j->frame_slots_cap = ncap;
  }
  size_t mask = j->frame_slots_cap - 1;
  size_t s = (size_t)h & mask;
  for (;; s = (s + 1) & mask) {
    uint32_t v = j->frame_slots[s];
    if (!v)
      break;
    const tj_frame *g = &j->frames[v - 1];
    if (g->hash == h && g->line == f->line && g->column == f->column &&
        g->line_approx == f->line_approx &&
        !strcmp(tj_str(j, g->name), name) && !strcmp(tj_str(j, g->file), file)) {
      *out = v - 1;
      return true;
    }
  }
  if (!tj_grow(j, (void **)&j->frames, &j->cframes, j->nframes + 1, sizeof *j->frames, d))
    return false;
  tj_frame nf = *f;
  nf.hash = h;
  nf.name = fstr(j, name, d);
  nf.file = fstr(j, file, d);
  nf.function = fstr(j, function, d);
  nf.async_method = fstr(j, async, d);
  if (nf.name == TJ_NONE || nf.file == TJ_NONE || nf.function == TJ_NONE ||
      nf.async_method == TJ_NONE)
    return false;
  j->frames[j->nframes] = nf;
  j->frame_slots[s] = (uint32_t)j->nframes + 1;
  if (nf.line) {
    j->stats.frames_with_line++;
    if (nf.line_approx)
      j->stats.frames_line_approx++;
  }
  *out = (uint32_t)j->nframes++;
  j->stats.frames = j->nframes;
  return true;
}

/* The symbols of trace module mi, resolved once. */
static const symtab *module_symbols(trace_job *j, uint32_t mi, trace_local_fn local,
                                    void *lctx) {
  tj_module *m = &j->mods[mi];
  if (m->tried)
    return m->st;
  m->tried = true;
  j->stats.modules_needed++;
  const ntc_module *cm = &j->code.modules[mi];
  const char *pdb = ntc_s(&j->code, cm->pdb_path);
  const char *il = ntc_s(&j->code, cm->il_path);
  if (!cm->has_pdb || !*il)
    return NULL;
  module_id id;
  memset(&id, 0, sizeof id);
  const char *why = NULL;
  char want[MODULE_NAME_MAX + 1];
  if (*pdb) {
    snprintf(want, sizeof want, "%s", base_name(pdb));
  } else { /* no PDB path: NAME.pdb beside NAME.dll */
    char s[MODULE_NAME_MAX - 3];
    short_module(il, s, sizeof s);
    snprintf(want, sizeof want, "%s.pdb", s);
  }
  if (!module_parse_file_name(want, id.debug_file, sizeof id.debug_file, &why))
    return NULL;
  memcpy(id.guid, cm->pdb_guid, 16);
  id.age = cm->pdb_age;
  id.format = ST_FORMAT_UNKNOWN;
  module_parse_file_name(base_name(il), id.code_file, sizeof id.code_file, &why);
  if (local && local(lctx, &id, il, &m->local_st)) {
    m->local = true;
    m->st = &m->local_st;
  } else if (j->eng) {
    engine_resolve_in(j->eng, j->opt.share, &id, j->opt.resolve_deadline_ms, &m->h);
    if (m->h.status == MOD_FOUND) {
      m->pinned = true;
      m->st = m->h.st;
    }
  }
  if (m->st)
    j->stats.modules_found++;
  if (j->progress)
    j->progress(j->progress_ctx, &j->stats);
  return m->st;
}

/* ---- ReadyToRun code: its maps from its image (r2r.h) ---- */

#define TJ_R2R_MAX_BOUNDS 16384 /* entries of one precompiled method's map */

/* true when the resolved path real lies in folder root */
static bool under_root(const char *real, const char *root) {
  size_t n = strlen(root);
  while (n > 1 && root[n - 1] == '/')
    n--;
  if (n == 1 && root[0] == '/')
    return true;
  return n > 0 && !strncmp(real, root, n) && (real[n] == '/' || real[n] == '\0');
}

struct tj_image {
  filemap fm;
  pe_layout pe;
  md_meta md;
  bool has_md;
};

/* The image at path mapped into fm, if it is a regular file within the
 * size cap and the image of module cm (its CodeView GUID is the PDB GUID
 * the trace names). */
static bool try_image(trace_job *j, const char *path, const ntc_module *cm, filemap *fm) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  ps_diag d;
  ps_diag_clear(&d);
  uint64_t cap = j->opt.max_image_bytes ? j->opt.max_image_bytes : TRACE_DEFAULT_MAX_IMAGE;
  if (filemap_open(fm, path, cap, &d) != PS_E_OK)
    return false;
  static const uint8_t zero[16];
  if (!cm->has_pdb || !memcmp(cm->pdb_guid, zero, 16))
    return true; /* nothing to check it by: the runtime functions' starts will */
  pe_info pi;
  if (pe_parse(fm->data, fm->len, &pi, &d) == PS_E_OK)
    for (int k = 0; k < pi.ncodeview; k++)
      if (!memcmp(pi.codeview[k].guid, cm->pdb_guid, 16))
        return true;
  filemap_close(fm);
  return false;
}

static bool find_image(trace_job *j, const ntc_module *cm, filemap *fm) {
  const char *il = ntc_s(&j->code, cm->il_path);
  const char *name = base_name(il);
  char path[PATH_MAX + 256];
  if (*name && strcmp(name, "..") && strcmp(name, "."))
    for (size_t i = 0; i < j->opt.nimage_dirs; i++) {
      snprintf(path, sizeof path, "%s/%s", j->opt.image_dirs[i], name);
      if (try_image(j, path, cm, fm))
        return true;
    }
  if (il[0] == '/' && j->opt.image_prefix) {
    snprintf(path, sizeof path, "%s%s", j->opt.image_prefix, il);
    if (try_image(j, path, cm, fm))
      return true;
  }
  char real[PATH_MAX];
  if (il[0] != '/' || !j->opt.nimage_roots || !realpath(il, real))
    return false;
  for (size_t i = 0; i < j->opt.nimage_roots; i++)
    if (under_root(real, j->opt.image_roots[i]))
      return try_image(j, real, cm, fm);
  return false;
}

/* The PE image of trace module mi (its layout and metadata), found once;
 * NULL when there is none. */
static tj_image *module_image(trace_job *j, uint32_t mi) {
  if (mi >= j->nmods)
    return NULL;
  tj_module *m = &j->mods[mi];
  if (m->image_tried)
    return m->image;
  m->image_tried = true;
  tj_image *img = calloc(1, sizeof *img);
  if (!img || !find_image(j, &j->code.modules[mi], &img->fm)) {
    free(img);
    return NULL;
  }
  ps_diag d;
  ps_diag_clear(&d);
  if (pe_layout_open(&img->pe, img->fm.data, img->fm.len, &d) != PS_E_OK) {
    filemap_close(&img->fm);
    free(img);
    return NULL;
  }
  img->has_md = il_open_metadata(&img->pe, &img->md, &d) == PS_E_OK;
  m->image = img;
  return img;
}

static void close_image(tj_module *m) {
  if (m->image) {
    filemap_close(&m->image->fm);
    free(m->image);
    m->image = NULL;
  }
  m->image_tried = false;
}

static void close_images(trace_job *j) {
  for (size_t i = 0; j->mods && i < j->nmods; i++)
    close_image(&j->mods[i]);
}

/* a method whose code may be precompiled: not JIT-compiled (MethodFlags
 * 0x8), a MethodDef, no IL map from the trace */
static bool r2r_candidate(const ntc_method *m, uint32_t mi) {
  return m->module == mi && !(m->flags & 0x8) && m->map_count == 0 &&
         (m->token >> 24) == 0x06;
}

/* The maps of module mi's precompiled methods from the image r.  The image
 * is loaded at an address the trace does not give: the methods whose
 * MethodDef entry point the image lists give it (start - RVA, the same for
 * all), and then each method, generic instantiations too, is the runtime
 * function that starts at its start. */
static void r2r_maps(trace_job *j, uint32_t mi, const r2r_image *r, r2r_bound *bounds,
                     ntc_entry *entries) {
  uint64_t votes[16] = {0}, counts[16] = {0};
  size_t nv = 0;
  for (size_t i = 0; i < j->code.nmethods; i++) {
    const ntc_method *m = &j->code.methods[i];
    if (!r2r_candidate(m, mi))
      continue;
    uint32_t idx, begin, end;
    ps_diag d;
    ps_diag_clear(&d);
    if (r2r_method_entry(r, m->token & 0xFFFFFF, &idx, &d) != PS_E_OK ||
        !r2r_function(r, idx, &begin, &end) || m->start < begin)
      continue;
    uint64_t base = m->start - begin;
    size_t k = 0;
    while (k < nv && votes[k] != base)
      k++;
    if (k == nv && nv < 16)
      votes[nv++] = base;
    if (k < nv)
      counts[k]++;
  }
  if (!nv)
    return;
  size_t best = 0;
  for (size_t k = 1; k < nv; k++)
    if (counts[k] > counts[best])
      best = k;
  uint64_t base = votes[best];
  for (size_t i = 0; i < j->code.nmethods; i++) {
    const ntc_method *m = &j->code.methods[i];
    if (!r2r_candidate(m, mi) || m->start < base || m->start - base > UINT32_MAX)
      continue;
    uint32_t idx, begin, end;
    if (!r2r_function_at(r, (uint32_t)(m->start - base), &idx) ||
        !r2r_function(r, idx, &begin, &end))
      continue;
    size_t n = 0;
    ps_diag d;
    ps_diag_clear(&d);
    if (r2r_bounds(r, idx, bounds, TJ_R2R_MAX_BOUNDS, &n, &d) != PS_E_OK || n == 0)
      continue;
    for (size_t k = 0; k < n; k++)
      entries[k] = (ntc_entry){bounds[k].native, bounds[k].il};
    if (!ntc_attach_map(&j->code, i, entries, (uint32_t)n))
      return; /* the code budget: the job's error at its next check */
    j->stats.r2r_methods++;
  }
}

/* Gives the precompiled methods their maps; a live job calls it at every
 * cut (each module's image is opened once: module_image keeps it). */
static void attach_r2r(trace_job *j) {
  if (!j->opt.nimage_dirs && !j->opt.nimage_roots && !j->opt.image_prefix)
    return;
  size_t nmod = j->code.nmodules;
  bool *want = calloc(nmod ? nmod : 1, sizeof *want);
  r2r_image *r = malloc(sizeof *r);
  r2r_bound *bounds = malloc(TJ_R2R_MAX_BOUNDS * sizeof *bounds);
  ntc_entry *entries = malloc(TJ_R2R_MAX_BOUNDS * sizeof *entries);
  if (want && r && bounds && entries) {
    for (size_t i = 0; i < j->code.nmethods; i++) {
      const ntc_method *m = &j->code.methods[i];
      if (m->module < nmod && r2r_candidate(m, m->module))
        want[m->module] = true;
    }
    for (uint32_t mi = 0; mi < nmod; mi++) {
      tj_image *img = want[mi] ? module_image(j, mi) : NULL;
      if (!img)
        continue;
      ps_diag d;
      ps_diag_clear(&d);
      if (r2r_open(r, img->fm.data, img->fm.len, &d) == PS_E_OK) {
        j->stats.r2r_images++;
        r2r_maps(j, mi, r, bounds, entries);
      }
    }
  }
  free(want);
  free(r);
  free(bounds);
  free(entries);
}

/* ---- honest lines ---- */

/* true when the IL offsets [il, il_end) (il_end < 0: to the method's end)
 * that one map entry stands for hold the start of a statement on another
 * line than line: the code of the entry may belong to either */
static bool coarse_entry(const symtab *st, uint32_t token, int32_t il, int32_t il_end,
                         uint32_t line) {
  const st_seqpt *pts;
  size_t n;
  if (!st_method_points(st, token, &pts, &n))
    return false;
  for (size_t i = 0; i < n; i++) {
    if (pts[i].il <= (uint32_t)il)
      continue;
    if (il_end >= 0 && pts[i].il >= (uint32_t)il_end)
      break;
    if (pts[i].line != ST_HIDDEN_LINE && pts[i].line != line)
      return true;
  }
  return false;
}

/* the simple name of a type as a trace's method event spells it (the
 * "namespace" field: "System.Linq.Enumerable", "Ns.Outer+Inner",
 * "System.Collections.Generic.List`1[System.Int32]") */
static void simple_type(const char *full, char *out, size_t cap) {
  size_t n = strcspn(full, "[");
  size_t b = 0;
  for (size_t i = 0; i < n; i++)
    if (full[i] == '.' || full[i] == '+')
      b = i + 1;
  n -= b;
  if (n >= cap)
    n = cap - 1;
  memcpy(out, full + b, n);
  out[n] = '\0';
}

/* For a return address a in method m: the IL offset of the call that made
 * it, from m's IL, when its callee (the frame one in, the same in every
 * sample) is what one call site, or calls on one line, name.  The calls
 * within the map entry's IL offsets [il, il_end) come first, then the last
 * one before il (the JIT's entry may start before the call of the statement
 * before it), then the first after.  false: no image, no IL, or no call
 * that names the callee (a delegate, an interface, an inlined chain). */
static bool call_site(trace_job *j, const tj_addr *a, const ntc_method *m, const symtab *st,
                      int32_t il, int32_t il_end, uint32_t *call_il) {
  if (a->leaf || a->callee >= j->naddrs)
    return false;
  const tj_addr *c = &j->addrs[a->callee];
  ntc_answer ca;
  if (!ntc_lookup_any(&j->code, c->ip, c->leaf, &ca)) /* it may have been unloaded since */
    return false;
  tj_image *img = module_image(j, m->module);
  if (!img || !img->has_md)
    return false;
  const uint8_t *code;
  size_t len, n = 0;
  ps_diag d;
  ps_diag_clear(&d);
  if (!j->calls && !(j->calls = malloc(IL_MAX_CALLS * sizeof *j->calls)))
    return false;
  if (il_method_code(&img->pe, &img->md, m->token, &code, &len, &d) != PS_E_OK ||
      il_calls(code, len, j->calls, IL_MAX_CALLS, &n, &d) != PS_E_OK)
    return false;
  const ntc_method *cm = ca.method;
  const char *want = ntc_s(&j->code, cm->name);
  char want_type[256];
  simple_type(ntc_s(&j->code, cm->ns), want_type, sizeof want_type);
  bool same_module = cm->module == m->module;
  /* in range, before, after: the best candidate of each, and its line */
  int64_t pick[3] = {-1, -1, -1};
  uint32_t pick_line[3] = {0, 0, 0};
  bool mixed[3] = {false, false, false};
  for (size_t i = 0; i < n; i++) {
    const char *name, *type, *ns;
    uint32_t def;
    if (!il_target(&img->md, j->calls[i].token, &name, &type, &ns, &def))
      continue;
    bool match = same_module && def ? def == cm->token
                                    : !strcmp(name, want) && (!*type || !strcmp(type, want_type));
    if (!match)
      continue;
    st_answer sa;
    st_lookup_token(st, m->token, j->calls[i].il, &sa);
    if (sa.status != ST_OK || !sa.nsyms || !sa.syms[0].has_line || sa.syms[0].hidden)
      continue;
    uint32_t at = j->calls[i].il, line = sa.syms[0].line;
    int k = at >= (uint32_t)il && (il_end < 0 || at < (uint32_t)il_end) ? 0
            : at < (uint32_t)il                                       ? 1
                                                                      : 2;
    if (pick[k] < 0 || k == 1) { /* in range and after: the first; before: the last */
      if (pick[k] >= 0 && pick_line[k] != line && k != 1)
        mixed[k] = true;
      pick[k] = at;
      pick_line[k] = line;
    } else if (pick_line[k] != line) {
      mixed[k] = true;
    }
  }
  for (int k = 0; k < 3; k++)
    if (pick[k] >= 0) {
      if (mixed[k])
        return false; /* calls to it on several lines: the map's answer stands */
      *call_il = (uint32_t)pick[k];
      return true;
    }
  return false;
}

/* "Namespace.Type.Method(args)" */
static void method_part(const char *ns, const char *nm, const char *signature, char *out,
                        size_t cap) {
  const char *sig = strchr(signature, '(');
  snprintf(out, cap, "%s%s%s%s", ns, *ns ? "." : "", nm, sig ? sig : "()");
}

/* "Module!Namespace.Type.Method(args)", as dotnet-trace names a frame */
static void method_name(const trace_job *j, const ntc_module *mo, const char *part, char *out,
                        size_t cap) {
  char mod[256];
  short_module(mo ? ntc_s(&j->code, mo->il_path) : "", mod, sizeof mod);
  snprintf(out, cap, "%s!%s", *mod ? mod : "?", part);
}

/* the code map's module of module_id (a finished map), or NTC_NONE */
static uint32_t module_index(const trace_job *j, uint64_t id) {
  size_t lo = 0, hi = j->code.nmodules;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (j->code.modules[mid].module_id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < j->code.nmodules && j->code.modules[lo].module_id == id ? (uint32_t)lo
                                                                              : NTC_NONE;
}

static ps_err resolve_address(trace_job *j, tj_addr *a, trace_local_fn local, void *lctx,
                              ps_diag *d) {
  tj_frame f;
  memset(&f, 0, sizeof f);
  char name[2048], function[1024] = "", async[1024] = "";
  const char *file = "";
  uint32_t mi = NTC_NONE, token = 0;
  int32_t il = -1, il_end = -1;
  int32_t look = -1;             /* the IL offset looked up: il, or the estimate */
  bool approx = false;
  const ntc_method *m = NULL;    /* NULL: named at its unload (no map, no IL) */
  if (a->frozen) { /* named at its method's unload; its module now (a rundown may
                      have named it since) */
    token = a->token;
    il = look = a->il;
    mi = module_index(j, a->module_id);
    method_name(j, mi != NTC_NONE ? &j->code.modules[mi] : NULL, tj_str(j, a->fname), name,
                sizeof name);
  } else {
    ntc_answer ans;
    if (!ntc_lookup(&j->code, a->ip, a->leaf, &ans)) {
      snprintf(name, sizeof name, "?!?");
      f.unknown = true;
    } else {
      m = ans.method;
      char part[2048];
      method_part(ntc_s(&j->code, m->ns), ntc_s(&j->code, m->name),
                  ntc_s(&j->code, m->signature), part, sizeof part);
      method_name(j, ans.module, part, name, sizeof name);
      token = m->token;
      il = look = ans.il;
      il_end = ans.il_end;
      mi = ans.module ? m->module : NTC_NONE;
      /* code the JIT mapped to no IL offset: the nearest mapped entry before
       * it gives the estimate, marked as one */
      if (ans.mapping == NTC_MAP_UNMAPPED) {
        approx = true;
        if (ans.estimate >= 0)
          look = ans.estimate;
      }
    }
  }
  f.token = token;
  f.il = il;
  if (!f.unknown && mi != NTC_NONE && look >= 0 && (token >> 24) == 0x06) {
    const symtab *st = module_symbols(j, mi, local, lctx);
    if (st) {
      st_answer sa, ca; /* s points into one or the other to the end */
      st_lookup_token(st, token, (uint32_t)look, &sa);
      if (sa.status == ST_OK && sa.nsyms > 0) {
        const st_symbol *s = &sa.syms[0];
        if (s->file && s->has_line) {
          file = s->file;
          f.line = s->line;
          f.column = s->has_column ? s->column : 0;
          f.hidden = s->hidden;
          /* a map entry that stands for several statements: the line is
           * the first one's, the code may be another's */
          if (m && !approx && coarse_entry(st, token, look, il_end, s->line))
            approx = true;
          /* a return address: the call its callee names in the IL, when
           * one line holds it, settles the doubt, or corrects the map's
           * line (marked, as it is not the map's) */
          uint32_t call_il;
          if (m && call_site(j, a, m, st, look, il_end, &call_il)) {
            st_lookup_token(st, token, call_il, &ca);
            const st_symbol *c = &ca.syms[0];
            if (c->line == s->line) {
              approx = false;
            } else {
              approx = true;
              f.line = c->line;
              f.column = c->has_column ? c->column : 0;
              f.hidden = false;
              file = c->file ? c->file : file;
              s = c;
            }
          }
          /* a call from a statement written over several lines: the
           * line is the statement's first, the call may be on another */
          if (!a->leaf && s->has_column && s->end_line > s->line)
            approx = true;
          f.line_approx = approx;
        }
        snprintf(function, sizeof function, "%s", s->function);
        if (s->async_method)
          snprintf(async, sizeof async, "%s", s->async_method);
      }
    }
  }
  uint32_t fi;
  if (!frame_index(j, &f, name, file, function, async, &fi, d))
    return d->code;
  a->frame = fi;
  return PS_E_OK;
}

/* ---- warnings: a trace recorded without what a profile needs ---- */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void warn(trace_job *j, const char *fmt, ...);
static void warn(trace_job *j, const char *fmt, ...) {
  if (j->nwarnings == TJ_MAX_WARNINGS)
    return;
  char *w = j->warning_text[j->nwarnings];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w, TJ_WARNING_LEN, fmt, ap);
  va_end(ap);
  j->warnings[j->nwarnings++] = w;
}

static void find_warnings(trace_job *j) {
  j->nwarnings = 0;
  j->useless = false;
  if (j->stats.samples == 0) {
    warn(j, "the trace has no thread samples (no Microsoft-DotNETCore-SampleProfiler "
            "events): record it with `dotnet-trace collect`, whose default profiles sample "
            "every thread, or enable that provider");
    j->useless = true;
    return;
  }
  size_t jitted = 0, mapped = 0;
  for (size_t i = 0; i < j->code.nmethods; i++) {
    const ntc_method *m = &j->code.methods[i];
    if (m->flags & 0x8) /* MethodFlags: JIT-compiled */
      jitted++;
    if (m->map_count)
      mapped++;
  }
  if (j->code.nmethods == 0) {
    warn(j, "the trace describes no methods (no MethodLoadVerbose events and no rundown), so "
            "every frame is ?!?: record with the rundown on (`dotnet-trace collect`'s "
            "default; not `--rundown false`), or with the Jit and Loader keywords from the "
            "start of the process (DOTNET_EnableEventPipe=1 with DOTNET_EventPipeConfig="
            "Microsoft-Windows-DotNETRuntime:0x20018:5)");
    j->useless = true;
  } else if (jitted && !mapped) {
    warn(j, "the trace has no IL-to-native maps (keyword JittedMethodILToNativeMap, 0x20000, "
            "of Microsoft-Windows-DotNETRuntime), so JIT-compiled frames have names but no "
            "lines: `dotnet-trace collect`'s defaults include them, as does the keyword mask "
            "0x20018");
  }
  if (j->stats.samples_other)
    warn(j, "%llu of %llu samples have a sampler type pdbsym does not know (%u; 1 is "
            "external, 2 managed): they count as an unknown state",
         (unsigned long long)j->stats.samples_other, (unsigned long long)j->stats.samples,
         j->unknown_type);
}

const char *trace_job_warning(const trace_job *j, size_t i) {
  return j->finished && i < j->nwarnings ? j->warnings[i] : NULL;
}

bool trace_job_useless(const trace_job *j) { return j->finished && j->useless; }

/* The load order (seq) of the method ml unloads, as the code map holds it
 * (the first loaded alive body with its MethodID and start); UINT32_MAX when
 * the map lacks it (loaded before the trace began). */
static uint32_t unloaded_seq(const trace_job *j, const nt_method_load *ml) {
  uint32_t seq = UINT32_MAX;
  for (size_t i = 0; i < j->code.nmethods; i++) {
    const ntc_method *b = &j->code.methods[i];
    if (!b->dead && b->method_id == ml->method_id && b->start == ml->start && b->seq < seq)
      seq = b->seq;
  }
  return seq;
}

/* A method is unloaded: the window's addresses in its range are its (it was
 * the code there since its load, and an earlier method's were frozen at that
 * one's unload), so they are named now, before the range can hold another
 * method; a later sample at one of those IPs is a new address.  ml is the
 * unload event's payload: the method's name when the code map lacks it. */
static ps_err freeze_range(trace_job *j, const nt_method_load *ml, ps_diag *d) {
  uint64_t lo = ml->start, size = ml->size;
  bool any = false;
  for (size_t i = 0; i < j->naddrs && !any; i++)
    any = !j->addrs[i].frozen && j->addrs[i].ip - lo < size;
  if (!any)
    return PS_E_OK;
  bool have_map = !j->code.err && (j->code.finished || ntc_finish(&j->code) == PS_E_OK);
  j->code.err = PS_E_OK; /* a failed finish leaves the table as it was; the payload names */
  /* a body the map gives that was loaded after the unloaded method: the
   * unload reached the stream late, after that body's load and samples
   * (another thread's buffer), so the address is that body's */
  uint32_t gone = have_map ? unloaded_seq(j, ml) : UINT32_MAX;
  for (size_t i = 0; i < j->naddrs; i++) {
    tj_addr *a = &j->addrs[i];
    if (a->frozen || a->ip - lo >= size)
      continue;
    a->frozen = true;
    if (a->frame != TJ_NONE) /* already named (a live job's code map was full) */
      continue;
    char part[2048];
    ntc_answer ans;
    if (have_map && ntc_lookup(&j->code, a->ip, a->leaf, &ans) &&
        (ans.method->start == lo || (gone != UINT32_MAX && ans.method->seq > gone))) {
      const ntc_method *m = ans.method;
      method_part(ntc_s(&j->code, m->ns), ntc_s(&j->code, m->name),
                  ntc_s(&j->code, m->signature), part, sizeof part);
      a->token = m->token;
      a->il = ans.il;
      a->module_id = m->module_id;
    } else { /* a body loaded before the trace began: its name, no IL offset */
      char ns[512], nm[512], sig[1024];
      nt_u16_to_utf8(ml->ns, ns, sizeof ns);
      nt_u16_to_utf8(ml->name, nm, sizeof nm);
      nt_u16_to_utf8(ml->signature, sig, sizeof sig);
      method_part(ns, nm, sig, part, sizeof part);
      a->token = ml->token;
      a->il = -1;
      a->module_id = ml->module_id;
    }
    a->fname = fstr(j, part, d);
    if (a->fname == TJ_NONE)
      return d->code;
  }
  return PS_E_OK;
}

/* j->mods made parallel to j->code.modules again (ntc_finish sorts the
 * modules, and a live job's map gains and loses modules): each module keeps
 * what was resolved for it, by module id. */
static ps_err sync_modules(trace_job *j, ps_diag *d) {
  size_t n = j->code.nmodules;
  tj_module *nm = calloc(n ? n : 1, sizeof *nm);
  if (!nm)
    return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
  bool *kept = calloc(j->nmods ? j->nmods : 1, sizeof *kept);
  if (!kept) {
    free(nm);
    return ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t id = j->code.modules[i].module_id;
    nm[i].module_id = id;
    for (size_t k = 0; k < j->nmods; k++) /* both sorted by module id */
      if (!kept[k] && j->mods[k].module_id == id) {
        nm[i] = j->mods[k];
        if (nm[i].local) /* st points at the entry's own table */
          nm[i].st = &nm[i].local_st;
        kept[k] = true;
        break;
      }
  }
  for (size_t k = 0; k < j->nmods; k++) { /* modules the map no longer has */
    if (kept[k])
      continue;
    if (j->mods[k].local)
      st_free(&j->mods[k].local_st);
    if (j->mods[k].pinned && j->eng)
      engine_release(j->eng, &j->mods[k].h);
    close_image(&j->mods[k]);
  }
  free(kept);
  free(j->mods);
  j->mods = nm;
  j->nmods = n;
  return PS_E_OK;
}

/* every address not named yet, named with the code map as it is now */
static ps_err resolve_pending(trace_job *j, engine *e, trace_local_fn local, void *lctx,
                              ps_diag *d) {
  j->eng = e;
  /* a live job's cut leaves the last lag_ms of events queued: another thread's
   * buffer, not yet in the stream, may hold a code event they need */
  uint64_t upto = UINT64_MAX;
  if (j->live && !j->input_done && j->lag_ms && j->qpc_freq) {
    uint64_t lag = j->qpc_freq / 1000 * j->lag_ms;
    upto = j->max_ts > lag ? j->max_ts - lag : 0;
  }
  ps_err err = flush_upto(j, upto, d);
  if (err)
    return err;
  if (j->live && j->code_full)
    j->code.err = PS_E_OK; /* what it holds is whole: try to finish it */
  if (!j->code.finished)
    err = ntc_finish(&j->code);
  if (err && j->live) { /* named "?!?" below; the caller forgets the map */
    j->code_full = true;
    err = PS_E_OK;
  }
  if (err)
    return ps_diag_set(d, err, "trace", (size_t)j->stats.bytes,
                       "the code map needs more than the %zu-byte code budget",
                       j->opt.code_budget);
  err = sync_modules(j, d);
  if (err)
    return err;
  /* precompiled methods' maps from their images (r2r); the images stay
   * open while the addresses are named (their IL gives the call sites) */
  attach_r2r(j);
  if (j->code.err && j->live) { /* the maps passed the budget: a full map */
    j->code_full = true;
    j->code.err = PS_E_OK;
  } else if (j->code.err) {
    close_images(j);
    return ps_diag_set(d, j->code.err, "trace", (size_t)j->stats.bytes,
                       "the code map needs more than the %zu-byte code budget",
                       j->opt.code_budget);
  }
  for (size_t i = 0; err == PS_E_OK && i < j->naddrs; i++)
    if (j->addrs[i].frame == TJ_NONE)
      err = resolve_address(j, &j->addrs[i], local, lctx, d);
  /* done with the images until the next cut: a live job looks again then
   * (for the modules loaded since, and the methods first run since) */
  close_images(j);
  return err;
}

ps_err trace_job_finish(trace_job *j, engine *e, trace_local_fn local, void *lctx,
                        ps_diag *d) {
  if (j->failed)
    return ps_diag_set(d, PS_E_INVALID, "trace", 0, "the job already failed");
  ps_err err = pump(j, true, d);
  if (err)
    return j->failed = true, err;
  if (!j->stream.trace_seen)
    return j->failed = true, ps_diag_set(d, PS_E_CORRUPT, "trace", 0, "no Trace object");
  err = resolve_pending(j, e, local, lctx, d);
  if (err)
    return j->failed = true, err;
  if (fflush(j->spill) != 0)
    return j->failed = true, ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: %s",
                                         strerror(errno));
  j->stats.interval_ns = tj_interval_ns(j);
  find_warnings(j);
  j->finished = true;
  if (j->progress)
    j->progress(j->progress_ctx, &j->stats);
  return PS_E_OK;
}

/* ---- live jobs ---- */

#define RELEASE_MIN ((size_t)128 << 10) /* tables this big are freed at a window's end */

static void release_big(trace_job *j, void **arr, size_t *cap, size_t size, bool counted) {
  if (*cap * size < RELEASE_MIN)
    return;
  free(*arr);
  if (counted)
    j->code_bytes -= *cap * size;
  *arr = NULL;
  *cap = 0;
}

void trace_job_set_live(trace_job *j) {
  j->live = true;
  j->lag_ms = TRACE_LIVE_LAG_MS;
}

void trace_job_set_lag(trace_job *j, uint64_t ms) { j->lag_ms = ms; }

void trace_job_set_name(trace_job *j, const char *name) {
  snprintf(j->name, sizeof j->name, "%s", name ? name : "trace");
}

bool trace_job_started(const trace_job *j) { return j->stream.trace_seen; }

size_t trace_job_code_bytes(const trace_job *j) { return j->budget.used; }

size_t trace_job_unknown(const trace_job *j, uint64_t *ips, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < j->naddrs; i++) {
    const tj_addr *a = &j->addrs[i];
    if (a->frame == TJ_NONE || a->frame >= j->nframes || !j->frames[a->frame].unknown)
      continue;
    bool dup = false; /* (ip, leaf) pairs: one ip may be there twice */
    for (size_t k = 0; k < n && k < cap && !dup; k++)
      dup = ips[k] == a->ip;
    if (dup)
      continue;
    if (n < cap)
      ips[n] = a->ip;
    n++;
  }
  return n;
}

void trace_job_retry_unknown(trace_job *j) {
  for (size_t i = 0; i < j->naddrs; i++) {
    tj_addr *a = &j->addrs[i];
    if (a->frame != TJ_NONE && a->frame < j->nframes && j->frames[a->frame].unknown)
      a->frame = TJ_NONE;
  }
  j->finished = false;
}

bool trace_job_code_full(const trace_job *j) {
  /* an eighth kept free: ntc_finish and ntc_purge need room to work in */
  return j->code_full || j->budget.used > j->opt.code_budget / 8 * 7;
}

ps_err trace_job_resolve(trace_job *j, engine *e, trace_local_fn local, void *lctx,
                         ps_diag *d) {
  if (j->failed)
    return ps_diag_set(d, PS_E_INVALID, "trace", 0, "the job already failed");
  ps_err err = resolve_pending(j, e, local, lctx, d);
  if (err)
    j->failed = true;
  return err;
}

ps_err trace_job_cut(trace_job *j, engine *e, trace_local_fn local, void *lctx,
                     uint64_t start_ns, uint64_t end_ns, ps_diag *d) {
  ps_err err = trace_job_resolve(j, e, local, lctx, d);
  if (err)
    return err;
  if (fflush(j->spill) != 0)
    return j->failed = true, ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: %s",
                                         strerror(errno));
  j->win_start_ns = start_ns;
  j->win_end_ns = end_ns;
  /* the interval measured over the whole session (its gaps' median); no
   * warnings: they name what a recorded trace lacks, and a live session asks
   * for all of it */
  j->stats.interval_ns = tj_interval_ns(j);
  j->nwarnings = 0;
  j->finished = true;
  return PS_E_OK;
}

ps_err trace_job_next_window(trace_job *j, ps_diag *d) {
  if (j->failed)
    return ps_diag_set(d, PS_E_INVALID, "trace", 0, "the job already failed");
  /* the spill file, the interned stacks */
  if (fflush(j->spill) != 0 || ftruncate(fileno(j->spill), 0) != 0 ||
      fseek(j->spill, 0, SEEK_SET) != 0)
    return j->failed = true, ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: %s",
                                         strerror(errno));
  if (j->islots)
    memset(j->islots, 0, j->islots_cap * sizeof *j->islots);
  j->ilen = 0;
  j->ninterned = 0;
  j->next_stack_id = 1;
  /* addresses, frames, threads */
  j->naddrs = 0;
  if (j->addr_slots)
    memset(j->addr_slots, 0, j->addr_slots_cap * sizeof *j->addr_slots);
  j->nframes = 0;
  if (j->frame_slots)
    memset(j->frame_slots, 0, j->frame_slots_cap * sizeof *j->frame_slots);
  j->fstrs_len = 0;
  j->nthreads = 0;
  j->last_thread = 0;
  /* the window's large tables given back: their size is the busiest
   * window's, and a process profiled for weeks must not keep the busiest
   * minute's memory (they grow again as the next window needs) */
  release_big(j, (void **)&j->addrs, &j->caddrs, sizeof *j->addrs, true);
  release_big(j, (void **)&j->frames, &j->cframes, sizeof *j->frames, true);
  release_big(j, (void **)&j->fstrs, &j->fstrs_cap, 1, true);
  if (j->addr_slots_cap * sizeof *j->addr_slots >= RELEASE_MIN) {
    free(j->addr_slots);
    j->code_bytes -= j->addr_slots_cap * sizeof *j->addr_slots;
    j->addr_slots = NULL;
    j->addr_slots_cap = 0;
  }
  if (j->frame_slots_cap * sizeof *j->frame_slots >= RELEASE_MIN) {
    free(j->frame_slots);
    j->code_bytes -= j->frame_slots_cap * sizeof *j->frame_slots;
    j->frame_slots = NULL;
    j->frame_slots_cap = 0;
  }
  if (j->islots_cap * sizeof *j->islots >= RELEASE_MIN ||
      j->iarena_cap * sizeof *j->iarena >= RELEASE_MIN) {
    free(j->islots);
    free(j->iarena);
    j->islots = NULL;
    j->iarena = NULL;
    j->islots_cap = j->iarena_cap = 0;
  }
  /* a module whose download had not finished is asked again */
  for (size_t i = 0; i < j->nmods; i++)
    if (j->mods[i].tried && !j->mods[i].st && !j->mods[i].local &&
        j->mods[i].h.status == MOD_PENDING)
      j->mods[i].tried = false;
  j->stats.modules_needed = j->stats.modules_found = 0;
  for (size_t i = 0; i < j->nmods; i++)
    if (j->mods[i].tried) {
      j->stats.modules_needed++;
      if (j->mods[i].st)
        j->stats.modules_found++;
    }
  /* the bodies the runtime unloaded */
  if (j->code.ndead && j->code.finished) {
    uint64_t before = j->code.purged;
    ps_err err = ntc_purge(&j->code);
    if (err)
      return j->failed = true,
             ps_diag_set(d, err, "trace", 0, "the code map could not be purged");
    j->stats.methods_unloaded += j->code.purged - before;
    j->stats.methods = j->code.nmethods;
  }
  j->stats.samples = j->stats.threads = j->stats.stacks = j->stats.stack_flushes = 0;
  j->stats.spill_bytes = j->stats.addresses = j->stats.frames = 0;
  j->stats.frames_with_line = j->stats.dropped_events = 0;
  j->stats.samples_running = j->stats.samples_waiting = j->stats.samples_other = 0;
  j->stats.frames_line_approx = 0;
  j->finished = false;
  j->win_start_ns = j->win_end_ns = 0;
  return PS_E_OK;
}

void trace_job_forget_code(trace_job *j) {
  ntc_free(&j->code);
  ps_budget_init(&j->budget, j->opt.code_budget);
  ntc_init(&j->code, &j->budget);
  j->code_full = false;
  j->stats.code_resets++;
  j->stats.methods = 0;
}

ps_err trace_job_absorb(trace_job *j, trace_job *from, ps_diag *d) {
  ps_err qe = flush_queue(from, d);
  if (qe)
    return qe;
  if (!from->code.finished || from->code.nmaps) {
    ps_err err = ntc_finish(&from->code);
    if (err)
      return ps_diag_set(d, err, "rundown", 0, "the rundown's code map needs more than %zu bytes",
                         from->opt.code_budget);
  }
  if (!ntc_merge(&j->code, &from->code)) {
    if (j->live && (j->code.err == PS_E_LIMIT || j->code.err == PS_E_NOMEM)) {
      j->code_full = true;
      return PS_E_OK;
    }
    return ps_diag_set(d, j->code.err, "rundown", 0, "the code map could not take the rundown");
  }
  j->stats.methods = j->code.nmethods;
  j->stats.modules = j->code.nmodules;
  return PS_E_OK;
}

ps_err trace_job_end_live(trace_job *j, ps_diag *d) {
  if (j->failed)
    return ps_diag_set(d, PS_E_INVALID, "trace", 0, "the job already failed");
  ps_diag pd;
  ps_diag_clear(&pd);
  ps_err err = pump(j, true, &pd);
  if (err == PS_E_TRUNCATED) /* the process went away mid-block: what was whole counts */
    err = PS_E_OK;
  j->input_done = true;
  if (err == PS_E_OK)
    err = flush_queue(j, &pd);
  if (err) {
    *d = pd;
    j->failed = true;
  }
  return err;
}

/* ---- replaying the spill file (for the writers) ---- */

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

ps_err tj_replay(trace_job *j, tj_sample_fn fn, void *ctx, ps_diag *d) {
  if (fseek(j->spill, 0, SEEK_SET) != 0)
    return ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: %s", strerror(errno));
  /* the stacks of the current generation: ids first_id.., frames in an arena */
  uint32_t first_id = 0;
  size_t nst = 0, cst = 0, alen = 0, acap = 0;
  size_t *st_off = NULL;
  uint32_t *st_n = NULL, *arena = NULL;
  ps_err e = PS_E_OK;
  uint32_t frames[TJ_MAX_FRAMES];
  uint64_t interval = tj_interval_ns(j);
  uint64_t cap = interval > UINT64_MAX / TRACE_GAP_CAP ? UINT64_MAX : interval * TRACE_GAP_CAP;
  for (;;) {
    int tag = fgetc(j->spill);
    if (tag == EOF)
      break;
    uint8_t b[16];
    if (tag == 'F') {
      nst = 0;
      alen = 0;
      first_id = 0;
    } else if (tag == 'D') {
      if (fread(b, 1, 6, j->spill) != 6) {
        e = ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: short read");
        break;
      }
      uint32_t id = get32(b);
      uint32_t n = (uint32_t)b[4] | (uint32_t)b[5] << 8;
      if (nst == 0)
        first_id = id;
      if (id != first_id + nst || n > TJ_MAX_FRAMES) {
        e = ps_diag_set(d, PS_E_CORRUPT, "trace", 0, "spill file: stack %u out of order", id);
        break;
      }
      if (nst == cst) {
        cst = cst ? 2 * cst : 1024;
        size_t *no = realloc(st_off, cst * sizeof *no);
        uint32_t *nn = no ? realloc(st_n, cst * sizeof *nn) : NULL;
        if (no)
          st_off = no;
        if (!no || !nn) {
          e = ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
          break;
        }
        st_n = nn;
      }
      if (alen + n > acap) {
        acap = acap ? acap : 1 << 14;
        while (acap < alen + n)
          acap *= 2;
        uint32_t *na = realloc(arena, acap * sizeof *na);
        if (!na) {
          e = ps_diag_set(d, PS_E_NOMEM, "trace", 0, "out of memory");
          break;
        }
        arena = na;
      }
      for (uint32_t i = 0; i < n; i++) {
        if (fread(b, 1, 4, j->spill) != 4) {
          e = ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: short read");
          break;
        }
        uint32_t ai = get32(b);
        arena[alen + i] = ai < j->naddrs ? j->addrs[ai].frame : 0;
      }
      if (e)
        break;
      st_off[nst] = alen;
      st_n[nst] = n;
      nst++;
      alen += n;
    } else if (tag == 'S') {
      uint8_t r[25];
      if (fread(r, 1, 25, j->spill) != 25) {
        e = ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: short read");
        break;
      }
      uint32_t id = get32(r + 4);
      if (id < first_id || id - first_id >= nst || get32(r) >= j->nthreads ||
          r[16] >= TJ_NSTATES) {
        e = ps_diag_set(d, PS_E_CORRUPT, "trace", 0, "spill file: sample of unknown stack");
        break;
      }
      tj_sample smp;
      smp.thread = get32(r);
      smp.ts = (uint64_t)get32(r + 8) | (uint64_t)get32(r + 12) << 32;
      smp.state = r[16];
      uint64_t gap = (uint64_t)get32(r + 17) | (uint64_t)get32(r + 21) << 32;
      if (!tj_keeps(j, smp.state))
        continue;
      /* its weight: the gap, capped; a thread's first sample one interval */
      if (gap == TJ_GAP_FIRST) {
        smp.weight_ns = interval;
      } else {
        smp.weight_ns = tj_ticks_ns(j, gap);
        if (smp.weight_ns > cap)
          smp.weight_ns = cap;
      }
      size_t k = id - first_id;
      if (st_n[k])
        memcpy(frames, arena + st_off[k], st_n[k] * sizeof *frames);
      e = fn(ctx, &smp, frames, st_n[k]);
      if (e)
        break;
    } else {
      e = ps_diag_set(d, PS_E_CORRUPT, "trace", 0, "spill file: record %d", tag);
      break;
    }
  }
  free(st_off);
  free(st_n);
  free(arena);
  if (e == PS_E_OK && ferror(j->spill))
    e = ps_diag_set(d, PS_E_IO, "trace", 0, "spill file: %s", strerror(errno));
  fseek(j->spill, 0, SEEK_END);
  return e;
}
