/*
 * trace.h - symbolicating a .NET EventPipe trace (.nettrace): every CPU
 * sample's stack, each frame named and given its file and line, in bounded
 * memory whatever the trace's length.  Knows nothing of HTTP.
 *
 *   trace_job_open      a job with its limits (trace_options)
 *   trace_job_feed      the file's bytes, in chunks of any size, once
 *   trace_job_finish    end of input: the code map is finished, every module
 *                       the samples touch is resolved (a local callback, then
 *                       the engine: hot set, cache, symbol servers), every
 *                       distinct frame looked up
 *   trace_job_write     the answer: speedscope JSON, pprof, or a top-N text
 *
 * Weights and states: each sample keeps its thread, timestamp and the
 * sampler's type (the thread ran managed code, or was in native code -
 * mostly blocked in a wait - or an unknown type), and the time since the
 * thread's previous sample.  The writers weigh a sample by that time,
 * capped at TRACE_GAP_CAP times the measured interval (the median of those
 * times over the job); a thread's first sample weighs one interval.  So a
 * thread's total is its sampled life, in thread time (not CPU time).
 *
 * Memory: the trace is read through a window of one block (max_block); stack
 * ids resolve against the StackBlocks since the last sequence point
 * (max_stack_window); the samples go to a spill file as they come, and
 * their stacks are interned in a table of at most stack_budget bytes, which
 * is written to the spill file and emptied whenever it fills.  What stays in
 * memory beyond those budgets grows with the program's code (methods, IL
 * maps, distinct return addresses, threads: code_budget), never with the
 * trace's length.  trace_stats reports the peaks.
 *
 * Thread safety: one job is used by one thread at a time; jobs are
 * independent (they share only the engine, which is thread-safe).
 */
#ifndef PDBSYM_TRACE_H
#define PDBSYM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "module.h"
#include "symtab.h"

#define TRACE_DEFAULT_STACK_BUDGET ((size_t)32 << 20)   /* interned stacks in memory */
#define TRACE_DEFAULT_STACK_WINDOW ((size_t)64 << 20)   /* StackBlocks between sequence points */
#define TRACE_DEFAULT_CODE_BUDGET ((size_t)256 << 20)   /* code map, addresses, threads, frames */
#define TRACE_DEFAULT_MAX_BLOCK ((size_t)16 << 20)      /* one block of the file */
#define TRACE_DEFAULT_TOP 25
#define TRACE_DEFAULT_MAX_IMAGE ((uint64_t)256 << 20) /* a module's image read for its R2R maps */
/* A gap between two samples of a thread counts for at most this many
 * measured intervals.  The sampler stalls on a loaded machine (the .NET 9
 * fixture: 25.6 ms at a 1.1 ms interval, every thread at once), and that is
 * real time for every thread; a longer gap (a session paused, an OS thread
 * id used again by a new thread) counts for this much. */
#define TRACE_GAP_CAP 50
/* A live job's cut names the samples up to the latest event read less this
 * (the runtime writes each thread's buffer to the stream in its own time, so
 * a sample may arrive before the load event of the method it is in); the
 * rest go to the next window. */
#define TRACE_LIVE_LAG_MS 1000

typedef enum { TRACE_SPEEDSCOPE = 0, TRACE_PPROF, TRACE_TOP } trace_format;

/* "speedscope", "pprof", "top"; false for any other name */
bool trace_format_parse(const char *name, trace_format *out);
const char *trace_format_name(trace_format f);

/* Which samples a profile keeps: the sampler's "managed" type (the thread
 * ran managed code), its "external" type (native code: blocked in a wait,
 * or running native code), or both (with the state visible). */
typedef enum { TRACE_STATE_ALL = 0, TRACE_STATE_RUNNING, TRACE_STATE_WAITING } trace_state;

/* "all", "running", "waiting"; false for any other name */
bool trace_state_parse(const char *name, trace_state *out);
const char *trace_state_name(trace_state s);

typedef struct {
  size_t stack_budget;   /* 0: default */
  size_t stack_window;   /* 0: default */
  size_t code_budget;    /* 0: default */
  size_t max_block;      /* 0: default */
  const char *spill_dir; /* folder for the spill file; NULL: $TMPDIR or /tmp */
  const char *name;      /* the trace's name in the output (its file name), may be NULL */
  uint64_t resolve_deadline_ms; /* per module, absolute CLOCK_MONOTONIC ms; 0: none */
  engine_share *share;   /* the request's share of the download queue (engine.h); NULL: none */
  int top;               /* rows of the top-N text; 0: default */
  trace_state state;     /* the samples written (default: all) */
  /* ReadyToRun code (which the trace gives no IL map) gets its maps from its
   * image's own debug info (r2r.h): the image is looked for in image_dirs
   * by the module's file name, then at the path the trace's module event
   * names if it lies under one of image_roots ("/": any path, the CLI's
   * choice; none: never).  An image is used only when its CodeView GUID is
   * the PDB GUID the trace names (when it names one); each at most
   * max_image_bytes (0: TRACE_DEFAULT_MAX_IMAGE). */
  const char *const *image_dirs;
  size_t nimage_dirs;
  const char *const *image_roots;
  size_t nimage_roots;
  uint64_t max_image_bytes;
  /* a live process's files: the path the trace names is looked up under
   * this prefix ("/proc/PID/root", the process's own mount namespace) after
   * image_dirs, whatever image_roots say; NULL: not */
  const char *image_prefix;
} trace_options;

typedef struct {
  uint64_t bytes;          /* of the trace consumed */
  uint64_t blocks;
  uint64_t events;
  uint64_t samples;
  uint64_t threads;
  uint64_t stacks;         /* distinct stacks interned (counted again after a flush) */
  uint64_t stack_flushes;  /* times the intern table filled and was written out */
  uint64_t spill_bytes;
  uint64_t addresses;      /* distinct (IP, innermost?) pairs */
  uint64_t frames;         /* distinct output frames */
  uint64_t methods;        /* method bodies the trace describes */
  uint64_t modules;        /* modules the trace describes */
  uint64_t modules_needed; /* modules with frames in samples */
  uint64_t modules_found;  /* of those, with symbols */
  uint64_t frames_with_line;   /* distinct frames with a line */
  size_t peak_stack_bytes;  /* interned-stack table, high-water mark */
  size_t peak_window_bytes; /* StackBlocks kept between sequence points */
  size_t peak_code_bytes;   /* code map + addresses + threads + frames */
  size_t peak_read_bytes;   /* the block window */
  /* by the sampler's type: managed (running), external (waiting or in
   * native code), any other type (0, "error", or one not known) */
  uint64_t samples_running, samples_waiting, samples_other;
  uint64_t interval_ns;     /* the measured sampling interval (0: not yet) */
  uint64_t nominal_ns;      /* the interval the trace's header names */
  uint64_t frames_line_approx; /* of frames_with_line, those whose line is an estimate */
  uint64_t r2r_images;      /* ReadyToRun images read for their maps */
  uint64_t r2r_methods;     /* methods given a map from them */
  /* live jobs (trace_job_set_live) */
  uint64_t dropped_events;   /* events the runtime dropped: gaps in the per-thread
                                sequence numbers, events and sequence points */
  uint64_t code_resets;      /* times the code map passed its budget and was forgotten */
  uint64_t code_events_lost; /* method, map and module events not kept while it was full */
  uint64_t methods_unloaded; /* bodies dropped after the runtime unloaded them */
} trace_stats;

/* A symbol file the caller has for m (a folder named on the command line):
 * fill st (finished; the job st_free's it) and return true, or return false. */
typedef bool (*trace_local_fn)(void *ctx, const module_id *m, const char *il_path, symtab *st);
typedef ps_err (*trace_write_fn)(void *ctx, const void *data, size_t len);
/* Called after each block read and each module resolved; may be NULL. */
typedef void (*trace_progress_fn)(void *ctx, const trace_stats *s);

typedef struct trace_job trace_job;

ps_err trace_job_open(const trace_options *o, trace_job **out, ps_diag *diag);
ps_err trace_job_feed(trace_job *j, const uint8_t *data, size_t len, ps_diag *diag);
ps_err trace_job_finish(trace_job *j, engine *e, trace_local_fn local, void *local_ctx,
                        ps_diag *diag);
ps_err trace_job_write(trace_job *j, trace_format f, trace_write_fn w, void *wctx,
                       ps_diag *diag);
void trace_job_set_progress(trace_job *j, trace_progress_fn fn, void *ctx);
/* Modules still downloading at deadline_ms (CLOCK_MONOTONIC ms, engine_now_ms)
 * are answered without symbols; 0: no limit. */
void trace_job_set_deadline(trace_job *j, uint64_t deadline_ms);
const trace_stats *trace_job_stats(const trace_job *j);
/* After trace_job_finish: what makes the profile less than it should be,
 * one sentence each naming what the trace lacks and the recording that
 * gives it (borrowed from the job); NULL past the last.  The writers carry
 * them too (speedscope "warnings", pprof comments, top's header). */
const char *trace_job_warning(const trace_job *j, size_t i);
/* After trace_job_finish: true when the profile says nothing useful (no
 * samples, or no frame the trace names), which a command reports as a
 * failure even though it wrote the profile. */
bool trace_job_useless(const trace_job *j);
void trace_job_close(trace_job *j);

/*
 * Live jobs (server/profile: `pdbsym profile`): the job reads the endless
 * stream of an attached process's session and is cut into windows, each
 * written as one profile; the code map outlives the windows.
 *
 *   trace_job_set_live    before the first feed: a code map past its budget
 *                         no longer fails the job (trace_job_code_full says
 *                         so; the caller names what it has, forgets the map
 *                         and runs a rundown session); MethodUnload drops a
 *                         body at the next cut; dropped events are counted
 *   trace_job_resolve     names every address sampled since the last cut
 *                         (modules resolved through local, then e, waiting at
 *                         most until the job's deadline; a module still
 *                         downloading is asked again in a later window)
 *   trace_job_cut         resolve, then the window [start_ns, end_ns) (Unix
 *                         time) is ready for trace_job_write
 *   trace_job_next_window after writing: the window's samples, stacks,
 *                         addresses, frames, threads and spill file are
 *                         forgotten, unloaded methods purged; the code map
 *                         and the stream's state stay
 *   trace_job_forget_code the code map emptied (after trace_job_resolve)
 *   trace_job_absorb      adds the code map read by another job (a rundown
 *                         session's stream, fed whole) to j's
 *   trace_job_end_live    end of input: the last whole blocks read; a stream
 *                         cut short (the process exited) is not an error
 *
 * Per-window counters of trace_stats (samples, threads, stacks, addresses,
 * frames, frames_with_line, spill_bytes, dropped_events) start again at each
 * window; the others count since the job opened.
 */
void trace_job_set_live(trace_job *j);
/* the lag of a live job's cuts (default TRACE_LIVE_LAG_MS) */
void trace_job_set_lag(trace_job *j, uint64_t ms);
/* the profile's name in the output (speedscope's "name"), cut to 255 bytes */
void trace_job_set_name(trace_job *j, const char *name);
ps_err trace_job_resolve(trace_job *j, engine *e, trace_local_fn local, void *lctx,
                         ps_diag *diag);
ps_err trace_job_cut(trace_job *j, engine *e, trace_local_fn local, void *lctx,
                     uint64_t start_ns, uint64_t end_ns, ps_diag *diag);
ps_err trace_job_next_window(trace_job *j, ps_diag *diag);
bool trace_job_code_full(const trace_job *j);
void trace_job_forget_code(trace_job *j);
ps_err trace_job_absorb(trace_job *j, trace_job *from, ps_diag *diag);
ps_err trace_job_end_live(trace_job *j, ps_diag *diag);
/* The distinct addresses of the window that no method of the code map
 * covers (after trace_job_resolve): up to cap into ips; returns how many
 * there are.  trace_job_retry_unknown makes them unnamed again, so that the
 * next resolve tries them against a code map a rundown has grown (ReadyToRun
 * code first run after the last rundown has no load event of its own). */
size_t trace_job_unknown(const trace_job *j, uint64_t *ips, size_t cap);
void trace_job_retry_unknown(trace_job *j);
/* bytes the code map holds now (of code_budget) */
size_t trace_job_code_bytes(const trace_job *j);
/* the stream's header and Trace object have been read */
bool trace_job_started(const trace_job *j);

#endif
