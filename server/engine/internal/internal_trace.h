/*
 * internal_trace.h - the trace job's state, shared by trace.c (reading,
 * resolving, the spill file) and trace_out.c (the writers).  Engine room only.
 */
#ifndef PDBSYM_INTERNAL_TRACE_H
#define PDBSYM_INTERNAL_TRACE_H

#include <stdio.h>

#include "engine.h"
#include "il.h"
#include "nettrace.h"
#include "ntcode.h"
#include "trace.h"

#define TJ_NONE UINT32_MAX
#define TJ_MAX_FRAMES 1024 /* frames kept of one stack (the runtime writes at most 100) */

#define TJ_MAX_V6_THREADS 65536

typedef struct {
  uint32_t id;
  uint8_t cls;     /* nt_event_class */
  uint32_t version;
} tj_meta;

typedef struct {
  uint32_t id, n;
  size_t off;      /* into win */
} tj_wstack;

typedef struct {
  uint32_t hash;   /* 0: empty slot */
  uint32_t n;
  uint32_t off;    /* into iarena */
  uint32_t id;
  uint64_t full;   /* the whole hash, for rehashing */
} tj_islot;

typedef struct {
  uint64_t ip;
  uint8_t leaf;
  bool frozen;     /* named when its method was unloaded (below), not from the code
                    * map: the range may hold another method by the end; a later
                    * sample at the same IP is a new address */
  uint32_t frame;  /* after finishing */
  uint32_t callee; /* a return address: the address one frame in, the first
                    * seen (TJ_NONE: none) */
  /* frozen: */
  uint32_t fname;  /* fstrs offset of the frame's name */
  uint32_t token;
  int32_t il;      /* -1: none */
  uint64_t module_id;
} tj_addr;

/* a sample's state, from the sampler's type */
enum { TJ_RUNNING = 0, TJ_WAITING = 1, TJ_OTHER = 2, TJ_NSTATES = 3 };

typedef struct {
  uint64_t tid;
  uint64_t first_ts, last_ts, samples;
  uint64_t prev_ts;             /* the thread's previous sample (file order) */
  bool seen;                    /* prev_ts is set */
  uint64_t by_state[TJ_NSTATES];
} tj_thread;

/* The gaps between a thread's samples, in nanoseconds, counted in
 * log-linear buckets (64 per power of two, about 1.1 % wide): the measured
 * interval is their median.  Fixed size, whatever the trace's length. */
#define TJ_GAP_BUCKETS (59 * 64)
#define TJ_GAP_FIRST UINT64_MAX /* a record's gap: the thread's first sample */
/* an event queued until the next sequence point (trace.c, "events in time order") */
typedef struct {
  uint64_t ts, thread_id, capture_thread_id, offset;
  uint32_t stack_id, metadata_id, sequence, payload_off, payload_len, order;
  uint8_t cls;
  uint32_t version;
} tj_qev;

typedef struct {
  uint64_t hash;
  uint32_t name, file;            /* fstrs offsets */
  uint32_t function, async_method; /* pdbsym's names (symtab), 0 if none */
  uint32_t line, column;          /* 0: unknown */
  uint32_t token;
  int32_t il;
  bool hidden, unknown;
  bool line_approx; /* the line is an estimate (ntcode's mapping, trace.c) */
} tj_frame;

#define TJ_MAX_WARNINGS 8
#define TJ_WARNING_LEN 400

typedef struct tj_image tj_image; /* a module's PE image, mapped (trace.c) */

typedef struct {
  uint64_t module_id; /* the code map's module this is */
  bool tried, local, pinned;
  const symtab *st;
  symtab local_st;
  mod_handle h;
  bool image_tried;
  tj_image *image;  /* NULL: none found; closed at the end of finishing */
} tj_module;

typedef struct {
  uint64_t thread;   /* capture thread id (V6: index) */
  uint32_t seq;      /* the last sequence number seen */
  bool listed;       /* named by the last sequence point */
} tj_seq;

struct trace_job {
  trace_options opt;
  char name[256];
  trace_stats stats;
  trace_progress_fn progress;
  void *progress_ctx;
  bool failed, finished;
  /* reading */
  nt_stream stream;
  int format;
  uint8_t *rbuf;
  size_t rlen, rcap, need;
  uint32_t pointer_size, pid;
  uint64_t qpc_freq, sync_qpc, sampling_ns;
  uint64_t gaps[TJ_GAP_BUCKETS];
  uint64_t ngaps;
  tj_meta *metas;
  size_t nmetas, cmetas;
  uint32_t *meta_by_id;
  size_t nmeta_by_id, cmeta_by_id;
  /* stack window */
  uint8_t *win;
  size_t win_len, win_cap;
  tj_wstack *wstacks;
  size_t nwin, cwin;
  bool win_sorted;
  /* interned stacks */
  tj_islot *islots;
  size_t islots_cap, ninterned;
  uint32_t *iarena;
  size_t ilen, iarena_cap;
  uint32_t next_stack_id;
  uint32_t scratch[TJ_MAX_FRAMES];
  FILE *spill;
  /* code, addresses, threads, frames (code budget) */
  ps_budget budget; /* the code map's */
  ntc_table code;
  size_t code_bytes; /* the job's own tables */
  tj_addr *addrs;
  size_t naddrs, caddrs;
  uint32_t *addr_slots;
  size_t addr_slots_cap;
  tj_thread *threads;
  size_t nthreads, cthreads, last_thread;
  struct {
    uint64_t index, tid;
    bool gone; /* named by a RemoveThreadBlock: dropped at the next sequence point */
  } *v6_threads; /* V6 ThreadBlock rows, at most TJ_MAX_V6_THREADS */
  size_t nv6, cv6;
  tj_frame *frames;
  size_t nframes, cframes;
  uint32_t *frame_slots;
  size_t frame_slots_cap;
  char *fstrs;
  size_t fstrs_len, fstrs_cap;
  /* what makes the profile less than it should be (trace_job_warning) */
  const char *warnings[TJ_MAX_WARNINGS];
  char warning_text[TJ_MAX_WARNINGS][TJ_WARNING_LEN];
  size_t nwarnings;
  bool useless;
  uint32_t unknown_type; /* the first sampler type neither managed nor external */
  il_call *calls; /* a caller's call sites (honest lines), IL_MAX_CALLS */
  /* modules (parallel to code.modules) */
  engine *eng;
  tj_module *mods;
  size_t nmods;
  /* events queued until the next sequence point */
  tj_qev *q;
  size_t nq, cq;
  uint8_t *qarena;
  size_t qlen, qcap;
  uint32_t qorder;      /* file order of the queued events */
  uint64_t max_ts;      /* the latest event timestamp read */
  uint64_t lag_ms;      /* a live cut leaves this much of the latest events queued */
  bool input_done;      /* trace_job_end_live: nothing more will come */
  /* live jobs */
  bool live, code_full;
  tj_seq *seqs;         /* per capture thread, for dropped events */
  size_t nseqs, cseqs;
  uint64_t win_start_ns, win_end_ns; /* the window written (Unix ns), 0: a file */
};

static inline const char *tj_str(const trace_job *j, uint32_t off) {
  return j->fstrs && off < j->fstrs_len ? j->fstrs + off : "";
}

bool tj_grow(trace_job *j, void **arr, size_t *cap, size_t need, size_t size, ps_diag *d);
/* An unlinked temporary file in the job's spill folder; NULL with d set. */
FILE *tj_tempfile(trace_job *j, ps_diag *d);

/* One sample as the writers see it. */
typedef struct {
  uint32_t thread;   /* index into threads */
  uint64_t ts;       /* the trace's clock */
  uint8_t state;     /* TJ_RUNNING, TJ_WAITING, TJ_OTHER */
  uint64_t weight_ns;/* the time it stands for (tj_weight) */
} tj_sample;

/* Calls fn for every sample in file order whose state the job's options
 * keep: the sample and its stack as frame indices, innermost first. */
typedef ps_err (*tj_sample_fn)(void *ctx, const tj_sample *s, const uint32_t *frames,
                               uint32_t n);
ps_err tj_replay(trace_job *j, tj_sample_fn fn, void *ctx, ps_diag *d);

/* The measured interval (ns): the median gap, else the header's. */
uint64_t tj_interval_ns(const trace_job *j);
/* true when the job's state option keeps samples in state st */
bool tj_keeps(const trace_job *j, uint8_t st);
/* nanoseconds of the trace's clock ticks */
uint64_t tj_ticks_ns(const trace_job *j, uint64_t ticks);

#endif
