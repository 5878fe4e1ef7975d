/*
 * profile.h - profiling running .NET processes: attach over the runtime's
 * diagnostic socket (dsock.h), stream its samples and code events, and write
 * one profile per window (speedscope, pprof) into a folder of capped size,
 * for as long as the process runs, in memory set by budgets, not by uptime.
 *
 *   prof_attach    finds the process's socket, asks ProcessInfo, starts the
 *                  main session (SampleProfiler + the runtime's Loader, Jit,
 *                  NGen and JittedMethodILToNativeMap events, no rundown) and
 *                  a rundown session that is stopped at once, so the code
 *                  JIT'd before the attach is named too
 *   prof_run       reads both streams until the duration ends, *stop is set,
 *                  or the process exits; cuts a window every window_ms; a
 *                  code map past its budget is named, forgotten and rebuilt
 *                  from a new rundown; at the end StopTracing, the last
 *                  (partial) window written
 *   prof_status    what the session has done (for progress lines, /profiles)
 *
 * One session is driven by one thread at a time (prof_status may be called
 * from any thread).  Each session holds: the main stream's block window
 * (max_block), the window's interned stacks (stack_budget, spilled to a file
 * past it), the code map (code_budget), at most one rundown job (code_budget),
 * two sockets and a spill file; nothing else grows.  docs/profiling.md and
 * docs/concurrency.md list them.
 */
#ifndef PDBSYM_PROFILE_H
#define PDBSYM_PROFILE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dsipc.h"
#include "dsock.h"
#include "engine.h"
#include "error.h"
#include "trace.h"

#define PROF_DEFAULT_WINDOW_MS 60000u
#define PROF_DEFAULT_BUFFER_MB 64u
#define PROF_DEFAULT_IO_TIMEOUT_MS 10000u
#define PROF_DEFAULT_RESOLVE_MS 5000u
#define PROF_DEFAULT_MAX_FILES 1000u
#define PROF_DEFAULT_MAX_BYTES ((uint64_t)1 << 30)

enum { PROF_SPEEDSCOPE = 1, PROF_PPROF = 2 };
#define PROF_MAX_PDB_DIRS 16

/* ---- the output folder ---- */

/*
 * Window files are named pdbsym-PID-YYYYMMDDTHHMMSSZ-SEQ.speedscope.json
 * and .pb.gz (the window's start in UTC, the session's window number from
 * 1), written whole under a temporary name (.pdbsym-tmp-*) and renamed.
 * After each write the folder's window files (every process's) are cut to
 * max_files files and max_bytes bytes, oldest first.  Files of other names
 * are never touched.  Thread-safe: sessions of one service share one.
 */
typedef struct prof_outdir prof_outdir;

ps_err prof_outdir_open(const char *dir, uint64_t max_files, uint64_t max_bytes,
                        prof_outdir **out, ps_diag *d);
void prof_outdir_close(prof_outdir *o);
const char *prof_outdir_path(const prof_outdir *o);

typedef struct {
  int pid;
  uint64_t start_ns, end_ns;  /* Unix ns; end 0 when not known (a file from before a restart) */
  uint64_t samples, dropped;  /* UINT64_MAX when not known */
  unsigned formats;           /* PROF_SPEEDSCOPE | PROF_PPROF files of the window */
  uint64_t seq;
  uint64_t bytes;             /* of its files */
  char stem[128];             /* the file name without its extension */
} prof_window;

/* The windows in the folder, newest first, at most cap (with pid > 0 only
 * those of pid); returns how many. */
size_t prof_outdir_list(prof_outdir *o, int pid, prof_window *out, size_t cap);

/* ---- a session ---- */

typedef struct {
  uint64_t window_ms;      /* profile_window */
  uint64_t duration_ms;    /* 0: until stopped or the process exits */
  unsigned formats;        /* PROF_SPEEDSCOPE and/or PROF_PPROF */
  uint32_t buffer_mb;      /* the runtime's buffer for the main session (profile_buffer_mb) */
  uint64_t io_timeout_ms;  /* every connect, read and write of a command */
  int collect_version;     /* the newest CollectTracing tried (2-5; 0: 5) */
  uint64_t attach_wait_ms; /* a process this young with no socket yet is waited for
                              (it is starting); 0: io_timeout_ms */
  uint64_t resolve_ms;     /* at a cut, how long a module may be waited for */
  trace_options trace;     /* stack_budget, code_budget, max_block, spill_dir */
  const char *tee_path;    /* a copy of the main session's stream (a .nettrace file);
                              the main session then runs the rundown when it stops, so
                              the copy names every frame on its own */
  prof_outdir *outdir;     /* borrowed */
  const char *pdb_dirs[PROF_MAX_PDB_DIRS]; /* looked in first for NAME.pdb (and an
                                              assembly with one embedded) */
  int npdb_dirs;
} prof_options;

typedef struct {
  int pid;
  char comm[64];
  char command_line[256];
  char clr_version[64];
  char cookie[40];
  int collect_version;      /* CollectTracingN the runtime took */
  int info_version;         /* ProcessInfoN */
  uint64_t started_ns;      /* Unix ns of the attach */
  uint64_t windows;         /* written */
  uint64_t window_start_ns; /* of the window being filled */
  uint64_t window_samples;  /* in it so far */
  uint64_t samples, dropped_events, bytes, rundowns, code_resets, methods_unloaded;
  uint64_t methods;         /* bodies the code map holds */
  size_t code_bytes;
  bool running;
  char state[16];           /* "attaching", "profiling", "stopping", "ended", "failed" */
  char end_reason[256];     /* why it ended: stopped, the process exited, an error */
  char last_stem[128];      /* the last window written */
} prof_status;

typedef struct prof_session prof_session;

/* A local symbol source: a PDB beside a module the trace names, seen through
 * the target's root.  Built in; NULL engine means no cache or servers. */
ps_err prof_attach(const prof_options *o, int pid, engine *e, prof_session **out, ps_diag *d);

/* Attach to a target already found or dialed in (server/profile's port). */
ps_err prof_attach_target(const prof_options *o, const ds_target *t, engine *e,
                          prof_session **out, ps_diag *d);

typedef void (*prof_tick_fn)(void *ctx, const prof_status *st);

/* Runs until stop (may be NULL) is non-zero, the duration passes or the
 * process ends.  tick, if not NULL, is called about once a second and after
 * each window.  PS_E_OK when the session ended as it should (stopped, or the
 * process exited: the last window written); an error otherwise, with d set. */
ps_err prof_run(prof_session *s, volatile sig_atomic_t *stop, prof_tick_fn tick, void *tctx,
                ps_diag *d);

void prof_get_status(prof_session *s, prof_status *out);
/* The engine (cache, symbol servers) a session names modules with; it may
 * be set after the attach, before prof_run (NULL: local files only). */
void prof_set_engine(prof_session *s, engine *e);
/* The folder windows go into; set before prof_run when not in the options. */
void prof_set_outdir(prof_session *s, prof_outdir *o);
void prof_close(prof_session *s);

/* ---- the processes `pdbsym serve` profiles ---- */

typedef struct {
  const char *pids;          /* profile_pids: "123, 456" */
  const char *command;       /* profile_command: a shell pattern of /proc/PID/comm, or "" */
  uint64_t scan_interval_ms; /* profile_scan_interval */
  unsigned max_sessions;     /* max_profiled_processes: a thread each */
  const char *out_dir;       /* profile_dir */
  uint64_t max_files, max_bytes;
  prof_options session;      /* window, formats, budgets, timeouts (outdir set here) */
} prof_manager_config;

typedef struct prof_manager prof_manager;

/* false with a message naming the setting when c cannot work */
bool prof_manager_check(const prof_manager_config *c, char *err, size_t cap);
/* Opens the output folder, and starts the scanner thread when c names any
 * process (profile_pids or profile_command). */
ps_err prof_manager_start(const prof_manager_config *c, engine *e, prof_manager **out,
                          ps_diag *d);
/* true when the settings name processes to profile */
bool prof_manager_active(const prof_manager *m);
/* Stops every session (StopTracing, the last window written) and the
 * scanner; the manager still answers prof_manager_list and its folder until
 * prof_manager_free (which stops it first if need be). */
void prof_manager_stop(prof_manager *m);
void prof_manager_free(prof_manager *m);
prof_outdir *prof_manager_outdir(prof_manager *m);
/* The sessions running, then those ended (newest first, a fixed number kept):
 * up to cap into out; returns how many. */
size_t prof_manager_list(prof_manager *m, prof_status *out, size_t cap);

/* Process-wide counters of every session, for /metrics. */
typedef struct {
  uint64_t windows, samples, dropped_events, rundowns, code_resets;
  uint64_t attach_failures, sessions_started, sessions_active;
} prof_metrics;
void prof_get_metrics(prof_metrics *m);
void prof_count_window(uint64_t samples, uint64_t dropped);
void prof_count_rundown(void);
void prof_count_code_reset(void);

/* The process's resident set size, bytes (VmRSS), 0 if unknown. */
uint64_t prof_self_rss(void);

#endif
