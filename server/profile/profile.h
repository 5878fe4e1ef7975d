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

/* ---- windows pushed to a profile store (Grafana Pyroscope's /ingest) ---- */

typedef struct {
  const char *url;        /* profile_push: the store's base URL (http:// or https://) */
  const char *tenant;     /* profile_push_tenant: X-Scope-OrgID, or "" */
  const char *auth;       /* profile_push_auth: the Authorization header's value, or "" */
  const char *service;    /* profile_push_service: the application name; "": the process's */
  const char *labels;     /* profile_push_labels: "env=prod,region=eu", added to each window's */
  unsigned queue_max;     /* profile_push_queue: windows waiting to be sent */
  uint64_t queue_bytes;   /* profile_push_queue_bytes */
  uint64_t timeout_ms;    /* each POST's */
} prof_push_config;

typedef struct prof_pusher prof_pusher;

/* One thread that sends the windows added, in order (push.c). */
ps_err prof_pusher_start(const prof_push_config *c, prof_pusher **out, ps_diag *d);
/* A window's pprof (copied) with its process and times; past the queue's
 * bounds the oldest waiting window is dropped (counted). */
/* Sends what is queued for at most drain_ms more (plus one POST's time),
 * drops the rest (counted), ends the thread. */
void prof_pusher_stop(prof_pusher *p, uint64_t drain_ms);

typedef struct {
  uint64_t sent, rejected, dropped, errors, queued;
} prof_push_metrics;
void prof_get_push_metrics(prof_push_metrics *m);

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
  prof_pusher *pusher;     /* borrowed, or NULL: each window's pprof is pushed there */
} prof_options;

typedef struct prof_status {
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

/* Attach to a target already found or dialed in (server/profile's port).
 * The session owns t from here, on failure too (it is closed then). */
ps_err prof_attach_target(const prof_options *o, ds_target *t, engine *e, prof_session **out,
                          ps_diag *d);

typedef void (*prof_tick_fn)(void *ctx, const prof_status *st);

void prof_pusher_add(prof_pusher *p, const uint8_t *pprof, size_t len, const prof_status *st,
                     uint64_t start_ns, uint64_t end_ns, const char *stem);

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
/* Each window's pprof pushed there too (pprof is then written as well). */
void prof_set_pusher(prof_session *s, prof_pusher *p);
void prof_close(prof_session *s);

/* ---- a diagnostic port: runtimes dial pdbsym (DOTNET_DiagnosticPorts) ---- */

typedef struct prof_port prof_port;

/* Listens on path (a Unix socket created mode 0600; a socket left there by
 * an earlier run is replaced, any other file refused); a peer must send its
 * advertise within advertise_ms (0: 5 s).  One thread. */
ps_err prof_port_open(const char *path, uint64_t advertise_ms, prof_port **out, ps_diag *d);
void prof_port_close(prof_port *p);
const char *prof_port_path(const prof_port *p);
/* The next runtime that dialed in and was not handed out yet: its cookie
 * and pid; false at deadline_ms (or when the port closes). */
bool prof_port_next(prof_port *p, uint64_t deadline_ms, uint8_t cookie[16], uint64_t *pid);
/* A connection of that runtime waiting for a command (it dials again after
 * each command), or -1 at deadline_ms with d set. */
int prof_port_take(prof_port *p, const uint8_t cookie[16], uint64_t deadline_ms, ps_diag *d);
/* Its connections closed and forgotten (its session ended). */
void prof_port_forget(prof_port *p, const uint8_t cookie[16]);
/* Peers dropped: garbage, silence, over the bounds. */
uint64_t prof_port_dropped(prof_port *p);
/* A target whose commands go through the port (ds_target_close frees it). */
ps_err prof_port_target(prof_port *p, const uint8_t cookie[16], uint64_t pid, ds_target *t,
                        ps_diag *d);
/* Wakes whoever waits in prof_port_next (to look at a stop flag). */
void prof_port_wake(prof_port *p);

/* ---- the processes `pdbsym serve` profiles ---- */

typedef struct {
  const char *pids;          /* profile_pids: "123, 456" */
  const char *command;       /* profile_command: a shell pattern of /proc/PID/comm, or "" */
  const char *diagnostic_port; /* a socket runtimes dial into (DOTNET_DiagnosticPorts), or "" */
  uint64_t scan_interval_ms; /* profile_scan_interval */
  unsigned max_sessions;     /* max_profiled_processes: a thread each */
  const char *out_dir;       /* profile_dir */
  uint64_t max_files, max_bytes;
  prof_options session;      /* window, formats, budgets, timeouts (outdir set here) */
  prof_push_config push;     /* push.url "": no push */
} prof_manager_config;

typedef struct prof_manager prof_manager;

/* false with a message naming the setting when c cannot work */
bool prof_manager_check(const prof_manager_config *c, char *err, size_t cap);
/* Opens the output folder, and starts the scanner thread when c names any
 * process (profile_pids or profile_command) or a diagnostic port (and then a
 * thread that takes the runtimes dialing it). */
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
