/*
 * session.c - one profiled process (see profile.h).
 *
 * One thread drives a session with poll(2) over at most four sockets: the
 * main session's stream, a rundown session's stream, and the connections of
 * StopTracing commands waiting for their answer.  A StopTracing is never
 * waited for in place: the runtime answers it only after it has written the
 * session's last events (and its rundown) to the stream, so the stream must
 * be read meanwhile.
 *
 *   attach:  ProcessInfo(3, 2, 1) -> CollectTracing(5..2) main session
 *            -> CollectTracing rundown session -> StopTracing(rundown)
 *   loop:    main stream -> live trace job (tee'd if asked)
 *            rundown stream -> its own job, absorbed into the main job's
 *            code map at its end
 *            window end -> cut (names every address), write, next window
 *            code map full -> name what was sampled, forget, new rundown
 *   end:     StopTracing(main), read the stream to its end (or a deadline),
 *            the last window written
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOPOS ((size_t)-1) /* a diagnostic about no place in a file */
#include "dsock.h"
#include "filemap.h"
#include "prof_int.h"
#include "loader.h"
#include "log.h"
#include "profile.h"

#define READ_CHUNK (1 << 16)
#define HOPELESS_MAX 4096
#define UNKNOWN_CHECK 256 /* unknown addresses looked at before a window's cut */
#define LOCAL_MAX_FILE ((uint64_t)512 << 20) /* a PDB or assembly read from the target's disk */

/* Microsoft-Windows-DotNETRuntime keywords (ClrEtwAll.man) */
#define KW_LOADER 0x8ull
#define KW_JIT 0x10ull
#define KW_NGEN 0x20ull
#define KW_IL_MAP 0x20000ull

typedef struct {
  int fd;             /* -1: none */
  uint8_t buf[64];
  size_t got;
  uint64_t deadline;
} stop_req;

struct prof_session {
  prof_options opt;
  ds_target t;
  engine *eng;
  pthread_mutex_t mu;
  prof_status st; /* under mu */
  uint8_t *rbuf;
  /* the main session */
  trace_job *job;
  int fd;
  uint64_t sid;
  FILE *tee;
  /* a rundown session */
  trace_job *rd_job;
  int rd_fd;
  uint64_t rd_sid;
  uint64_t rd_deadline;
  stop_req rd_stop, stop;
  /* windows */
  uint64_t seq;
  uint64_t win_start_ms, win_start_ns;
  /* addresses no rundown could name (native stubs...): no new rundown for
   * them (fixed size; emptied when full) */
  uint64_t hopeless[HOPELESS_MAX];
  size_t nhopeless;
  bool cut_checked; /* this window's unknown addresses were looked at */
  bool cut_retried; /* ... and a rundown started for them */
  /* the target's root, for its files */
  char root[64];
  bool root_ok;
};

/* a log line {"msg":"profile","pid":N,"detail":"..."} */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void plog(log_level lv, int pid, const char *fmt, ...);
#include <stdarg.h>
static void plog(log_level lv, int pid, const char *fmt, ...) {
  if (!log_enabled(lv))
    return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_line l;
  log_begin(&l, lv, "profile");
  log_int(&l, "pid", pid);
  log_str(&l, "detail", msg);
  log_end(&l);
}

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t prof_self_rss(void) {
  char buf[256];
  FILE *f = fopen("/proc/self/statm", "re");
  if (!f)
    return 0;
  unsigned long long size = 0, rss = 0;
  bool ok = fgets(buf, sizeof buf, f) && sscanf(buf, "%llu %llu", &size, &rss) == 2;
  fclose(f);
  return ok ? (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static void set_state(prof_session *s, const char *state, const char *reason) {
  pthread_mutex_lock(&s->mu);
  snprintf(s->st.state, sizeof s->st.state, "%s", state);
  if (reason)
    snprintf(s->st.end_reason, sizeof s->st.end_reason, "%s", reason);
  s->st.running = strcmp(state, "ended") != 0 && strcmp(state, "failed") != 0;
  pthread_mutex_unlock(&s->mu);
}

void prof_set_engine(prof_session *s, engine *e) { s->eng = e; }

void prof_set_outdir(prof_session *s, prof_outdir *o) { s->opt.outdir = o; }

void prof_set_pusher(prof_session *s, prof_pusher *p) {
  s->opt.pusher = p;
  if (p)
    s->opt.formats |= PROF_PPROF; /* what the store takes */
}

void prof_get_status(prof_session *s, prof_status *out) {
  pthread_mutex_lock(&s->mu);
  *out = s->st;
  pthread_mutex_unlock(&s->mu);
}

/* ---- symbols from the target's own disk ---- */

/* path as this process sees the target's file */
static void target_path(const prof_session *s, const char *path, char *out, size_t cap) {
  if (s->root_ok && path[0] == '/')
    snprintf(out, cap, "%s%s", s->root, path);
  else
    snprintf(out, cap, "%s", path);
}

static bool same_pdb(const symtab *st, const module_id *m) {
  if (memcmp(st->ident.guid, m->guid, 16) != 0)
    return false;
  return st->ident.format == ST_FORMAT_PORTABLE || st->ident.age == m->age;
}

static bool load_local(const char *pdb, const char *image, const module_id *m, symtab *st) {
  struct stat sb;
  if (stat(pdb, &sb) != 0 || !S_ISREG(sb.st_mode))
    return false;
  filemap fm, im;
  ps_diag d;
  ps_diag_clear(&d);
  if (filemap_open(&fm, pdb, LOCAL_MAX_FILE, &d) != PS_E_OK)
    return false;
  bool have_image = false;
  if (image && stat(image, &sb) == 0 && S_ISREG(sb.st_mode))
    have_image = filemap_open(&im, image, LOCAL_MAX_FILE, &d) == PS_E_OK;
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  st_init(st, &budget);
  ps_err e = loader_read(fm.data, fm.len, have_image ? im.data : NULL, have_image ? im.len : 0,
                         &budget, st, &d);
  st->budget = NULL; /* the budget lives on this stack frame only */
  filemap_close(&fm);
  if (have_image)
    filemap_close(&im);
  if (e == PS_E_OK && same_pdb(st, m))
    return true;
  st_free(st);
  return false;
}

/* the PDB beside the module (NAME.pdb), or embedded in it */
static bool local_lookup(void *ctx, const module_id *m, const char *il_path, symtab *st) {
  const prof_session *s = ctx;
  char il[2048], pdb[2300];
  for (int i = 0; i < s->opt.npdb_dirs; i++) { /* the folders named on the command line */
    snprintf(pdb, sizeof pdb, "%s/%s", s->opt.pdb_dirs[i], m->debug_file);
    snprintf(il, sizeof il, "%s/%s", s->opt.pdb_dirs[i], m->code_file);
    if (load_local(pdb, il, m, st) || (*m->code_file && load_local(il, NULL, m, st)))
      return true;
  }
  if (!il_path || il_path[0] != '/')
    return false;
  target_path(s, il_path, il, sizeof il);
  const char *slash = strrchr(il, '/');
  if (!slash)
    return false;
  snprintf(pdb, sizeof pdb, "%.*s/%s", (int)(slash - il), il, m->debug_file);
  return load_local(pdb, il, m, st) || load_local(il, NULL, m, st);
}

/* ---- stopping without waiting in place ---- */

static void stop_begin(prof_session *s, uint64_t sid, stop_req *r) {
  r->fd = -1;
  r->got = 0;
  r->deadline = ds_now_ms() + s->opt.io_timeout_ms;
  ps_diag d;
  ps_diag_clear(&d);
  int fd = s->t.dial(&s->t, r->deadline, &d);
  if (fd < 0)
    return; /* the process is gone: its streams end by themselves */
  uint8_t msg[32];
  size_t len = ds_build_stop(msg, sizeof msg, sid);
  if (ds_send_all(fd, msg, len, r->deadline, &d) != PS_E_OK) {
    close(fd);
    return;
  }
  r->fd = fd;
}

/* reads what the runtime answered; closes the connection when it is done */
static void stop_poll(stop_req *r) {
  if (r->fd < 0)
    return;
  ssize_t n = recv(r->fd, r->buf + r->got, sizeof r->buf - r->got, 0);
  if (n > 0)
    r->got += (size_t)n;
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || r->got >= 28 ||
      ds_now_ms() >= r->deadline) {
    close(r->fd);
    r->fd = -1;
  }
}

static void stop_close(stop_req *r) {
  if (r->fd >= 0)
    close(r->fd);
  r->fd = -1;
}

/* ---- sessions ---- */

static ps_err start_main(prof_session *s, ps_diag *d) {
  ds_provider p[2] = {
      {0, 5, "Microsoft-DotNETCore-SampleProfiler", NULL},
      {KW_LOADER | KW_JIT | KW_NGEN | KW_IL_MAP, 5, "Microsoft-Windows-DotNETRuntime", NULL},
  };
  ds_collect c = {s->opt.buffer_mb, s->opt.tee_path ? DS_DEFAULT_RUNDOWN_KEYWORD : 0, true, p, 2};
  int version = 0;
  ps_err e = ds_start_collect(&s->t, &c, s->opt.collect_version, s->opt.io_timeout_ms, &s->fd, &s->sid, &version, d);
  if (e)
    return e;
  pthread_mutex_lock(&s->mu);
  s->st.collect_version = version;
  pthread_mutex_unlock(&s->mu);
  return PS_E_OK;
}

static ps_err start_rundown(prof_session *s, ps_diag *d) {
  /* a provider is needed: the runtime's loader events, few and cheap */
  ds_provider p[1] = {{KW_LOADER, 4, "Microsoft-Windows-DotNETRuntime", NULL}};
  ds_collect c = {s->opt.buffer_mb, DS_DEFAULT_RUNDOWN_KEYWORD, false, p, 1};
  trace_options to = s->opt.trace;
  to.name = "rundown";
  ps_err e = trace_job_open(&to, &s->rd_job, d);
  if (e)
    return e;
  int version = 0;
  e = ds_start_collect(&s->t, &c, s->opt.collect_version, s->opt.io_timeout_ms, &s->rd_fd, &s->rd_sid, &version, d);
  if (e) {
    trace_job_close(s->rd_job);
    s->rd_job = NULL;
    return e;
  }
  /* the rundown runs when the session stops: stop it now, read it as it comes */
  stop_begin(s, s->rd_sid, &s->rd_stop);
  s->rd_deadline = ds_now_ms() + 6 * s->opt.io_timeout_ms;
  pthread_mutex_lock(&s->mu);
  s->st.rundowns++;
  pthread_mutex_unlock(&s->mu);
  prof_count_rundown();
  return PS_E_OK;
}

/* the rundown's stream ended (or its time is up): its code joins the map */
static void end_rundown(prof_session *s, bool whole) {
  ps_diag d;
  ps_diag_clear(&d);
  if (s->rd_job) {
    if (trace_job_end_live(s->rd_job, &d) == PS_E_OK &&
        trace_job_absorb(s->job, s->rd_job, &d) == PS_E_OK) {
      if (!whole)
        plog(LOG_WARN, s->t.pid, "the rundown was cut short after %llu ms",
                 (unsigned long long)(6 * s->opt.io_timeout_ms));
    } else {
      char msg[256];
      plog(LOG_WARN, s->t.pid, "rundown not used: %s",
               ps_diag_format(&d, msg, sizeof msg));
    }
    trace_job_close(s->rd_job);
    s->rd_job = NULL;
  }
  if (s->rd_fd >= 0)
    close(s->rd_fd);
  s->rd_fd = -1;
  stop_close(&s->rd_stop);
}

static void update_status(prof_session *s) {
  const trace_stats *ts = trace_job_stats(s->job);
  pthread_mutex_lock(&s->mu);
  s->st.window_samples = ts->samples;
  s->st.bytes = ts->bytes;
  s->st.code_resets = ts->code_resets;
  s->st.methods_unloaded = ts->methods_unloaded;
  s->st.methods = ts->methods;
  s->st.code_bytes = trace_job_code_bytes(s->job);
  pthread_mutex_unlock(&s->mu);
}

static bool is_hopeless(const prof_session *s, uint64_t ip) {
  for (size_t i = 0; i < s->nhopeless; i++)
    if (s->hopeless[i] == ip)
      return true;
  return false;
}

/* the window's unknown addresses, remembered as beyond a rundown's help */
static void note_hopeless(prof_session *s) {
  uint64_t ips[UNKNOWN_CHECK];
  size_t n = trace_job_unknown(s->job, ips, UNKNOWN_CHECK);
  for (size_t i = 0; i < n && i < UNKNOWN_CHECK; i++) {
    if (is_hopeless(s, ips[i]))
      continue;
    if (s->nhopeless == HOPELESS_MAX)
      s->nhopeless = 0;
    s->hopeless[s->nhopeless++] = ips[i];
  }
}

/* Before a window's cut: are there addresses no method covers that a
 * rundown might name (ReadyToRun code first run since the last rundown has
 * no load event)?  Then a rundown first, and the cut when it is in. */
static bool wants_rundown(prof_session *s, ps_diag *d, ps_err *err) {
  trace_job_set_deadline(s->job, engine_now_ms() + s->opt.resolve_ms);
  *err = trace_job_resolve(s->job, s->eng, local_lookup, s, d);
  if (*err)
    return false;
  uint64_t ips[UNKNOWN_CHECK];
  size_t n = trace_job_unknown(s->job, ips, UNKNOWN_CHECK);
  for (size_t i = 0; i < n && i < UNKNOWN_CHECK; i++)
    if (!is_hopeless(s, ips[i]))
      return true;
  return false;
}

/* the window [win_start, now) written */
static ps_err cut_window(prof_session *s, ps_diag *d) {
  uint64_t end_ns = real_ns();
  uint64_t deadline = engine_now_ms() + s->opt.resolve_ms;
  trace_job_set_deadline(s->job, deadline);
  char name[256], stem[128];
  s->seq++;
  prof_window_stem(s->t.pid, s->win_start_ns, s->seq, stem, sizeof stem);
  snprintf(name, sizeof name, "%s (pid %d, %s; %llu events dropped by the runtime)", stem,
           s->t.pid, s->t.comm, (unsigned long long)trace_job_stats(s->job)->dropped_events);
  trace_job_set_name(s->job, name);
  if (s->cut_retried)
    trace_job_retry_unknown(s->job);
  s->cut_retried = s->cut_checked = false;
  ps_err e = trace_job_cut(s->job, s->eng, local_lookup, s, s->win_start_ns, end_ns, d);
  if (!e)
    note_hopeless(s);
  const trace_stats *ts = trace_job_stats(s->job);
  uint64_t samples = ts->samples, dropped = ts->dropped_events;
  if (!e)
    e = prof_outdir_write(s->opt.outdir, s->job, s->opt.formats, s->t.pid, s->win_start_ns,
                          end_ns, s->seq, samples, dropped, stem, sizeof stem, d);
  /* counted as soon as its files are there (before the push, which may take
   * a while): /profiles lists the window and the process's count together */
  if (!e) {
    pthread_mutex_lock(&s->mu);
    s->st.windows++;
    s->st.samples += samples;
    s->st.dropped_events += dropped;
    snprintf(s->st.last_stem, sizeof s->st.last_stem, "%s", stem);
    pthread_mutex_unlock(&s->mu);
    prof_count_window(samples, dropped);
  }
  if (!e && s->opt.pusher && (s->opt.formats & PROF_PPROF)) { /* the store gets it too */
    char path[1400];
    snprintf(path, sizeof path, "%s/%s.pb.gz", prof_outdir_path(s->opt.outdir), stem);
    FILE *f = fopen(path, "rbe");
    uint8_t *buf = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc(len ? (size_t)len : 1)) && fread(buf, 1, (size_t)len, f) == (size_t)len) {
      prof_status st;
      prof_get_status(s, &st);
      prof_pusher_add(s->opt.pusher, buf, (size_t)len, &st, s->win_start_ns, end_ns, stem);
    } else {
      plog(LOG_WARN, s->t.pid, "window %s not pushed: its pprof could not be read back", stem);
    }
    free(buf);
    if (f)
      fclose(f);
  }
  if (!e) {
    plog(LOG_INFO, s->t.pid, "window %llu written (%s): %llu samples, %llu events dropped", (unsigned long long)s->seq, stem, (unsigned long long)samples,
             (unsigned long long)dropped);
    e = trace_job_next_window(s->job, d);
#ifdef __GLIBC__
    /* the window's tables are free now: their pages go back to the system,
     * holes inside the heap too, so that the RSS of a session profiled for
     * weeks is what it holds, not the busiest window's high-water mark */
    malloc_trim(0);
#endif
  }
  s->win_start_ns = end_ns;
  s->win_start_ms = ds_now_ms();
  pthread_mutex_lock(&s->mu);
  s->st.window_start_ns = end_ns;
  s->st.window_samples = 0;
  pthread_mutex_unlock(&s->mu);
  return e;
}

/* no process pid, or only its zombie (its parent has not reaped it yet) */
static bool process_gone_now(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return true;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && (p[2] == 'Z' || p[2] == 'X');
}

/* A runtime ends its sessions while it shuts down, a little before the
 * process is gone: wait for that a moment (at most 2 s). */
static bool process_gone(int pid) {
  if (pid <= 0)
    return false;
  for (int i = 0; i < 40; i++) {
    if (process_gone_now(pid))
      return true;
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
  }
  return false;
}

/* read what fd has (at most one chunk): > 0 bytes, 0 at its end, -1 nothing now */
static ssize_t read_some(int fd, uint8_t *buf) {
  ssize_t n = recv(fd, buf, READ_CHUNK, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return -1;
  return n < 0 ? 0 : n; /* an error ends the stream like its close */
}

ps_err prof_attach_target(const prof_options *o, ds_target *t, engine *e, prof_session **out,
                          ps_diag *d) {
  *out = NULL;
  prof_session *s = calloc(1, sizeof *s);
  if (!s) {
    ds_target_close(t);
    return ps_diag_set(d, PS_E_NOMEM, "attach", NOPOS, "out of memory");
  }
  s->opt = *o;
  if (!s->opt.window_ms)
    s->opt.window_ms = PROF_DEFAULT_WINDOW_MS;
  if (!s->opt.buffer_mb)
    s->opt.buffer_mb = PROF_DEFAULT_BUFFER_MB;
  if (!s->opt.io_timeout_ms)
    s->opt.io_timeout_ms = PROF_DEFAULT_IO_TIMEOUT_MS;
  if (!s->opt.resolve_ms)
    s->opt.resolve_ms = PROF_DEFAULT_RESOLVE_MS;
  if (!s->opt.formats)
    s->opt.formats = PROF_SPEEDSCOPE;
  s->t = *t;
  s->eng = e;
  s->fd = s->rd_fd = -1;
  s->rd_stop.fd = s->stop.fd = -1;
  pthread_mutex_init(&s->mu, NULL);
  s->st.pid = t->pid;
  snprintf(s->st.comm, sizeof s->st.comm, "%s", t->comm);
  snprintf(s->st.state, sizeof s->st.state, "attaching");
  s->st.running = true;
  if (t->pid > 0 && !t->via_port) {
    snprintf(s->root, sizeof s->root, "/proc/%d/root", t->pid);
    s->root_ok = access(s->root, X_OK) == 0;
  }
  ps_err err = PS_E_OK;
  s->rbuf = malloc(READ_CHUNK);
  if (!s->rbuf)
    err = ps_diag_set(d, PS_E_NOMEM, "attach", NOPOS, "out of memory");
  ds_process_info info;
  int kind = 0;
  if (!err)
    err = ds_ask_process_info(&s->t, s->opt.io_timeout_ms, &info, &kind, d);
  if (!err) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->st.command_line, sizeof s->st.command_line, "%.255s", info.command_line);
    snprintf(s->st.clr_version, sizeof s->st.clr_version, "%s", info.clr_version);
    if (s->t.via_port) { /* its name from what it says, not from a /proc it may not share */
      const char *name = info.assembly[0] ? info.assembly : info.command_line;
      size_t n = strcspn(name, " ");
      const char *b = name;
      for (size_t i = 0; i < n; i++)
        if (name[i] == '/')
          b = name + i + 1;
      snprintf(s->t.comm, sizeof s->t.comm, "%.*s", (int)(n - (size_t)(b - name)), b);
      snprintf(s->st.comm, sizeof s->st.comm, "%s", s->t.comm);
      if (!s->st.pid)
        s->st.pid = (int)(info.pid <= 0x3fffffff ? info.pid : 0);
    }
    ds_cookie_format(info.cookie, s->st.cookie, sizeof s->st.cookie);
    s->st.info_version = kind;
    pthread_mutex_unlock(&s->mu);
    trace_options to = s->opt.trace;
    to.name = s->t.comm;
    /* precompiled code's maps and the call sites' IL from the modules'
     * images: in the --pdb-dir folders, then the process's own files */
    to.image_dirs = s->opt.pdb_dirs;
    to.nimage_dirs = (size_t)s->opt.npdb_dirs;
    /* the process's files: through /proc/PID/root when it is reachable; a
     * runtime that dialed the port lives in another namespace, so the path
     * it names is tried as it is (a volume both mount at the same path, as
     * docker/compose.yaml's /app), each image checked against the PDB id
     * the runtime names for it */
    to.image_prefix = s->root_ok ? s->root : s->t.via_port ? "" : NULL;
    err = trace_job_open(&to, &s->job, d);
  }
  if (!err) {
    trace_job_set_live(s->job);
    /* the samples of a window's last moments wait for the next cut, for the
     * code events of other threads' buffers: a second, or a quarter of a
     * short window */
    trace_job_set_lag(s->job, s->opt.window_ms / 4 < TRACE_LIVE_LAG_MS ? s->opt.window_ms / 4
                                                                      : TRACE_LIVE_LAG_MS);
    if (s->opt.tee_path) {
      s->tee = fopen(s->opt.tee_path, "wbe");
      if (!s->tee)
        err = ps_diag_set(d, PS_E_IO, "attach", NOPOS, "cannot write %s: %s", s->opt.tee_path,
                          strerror(errno));
    }
  }
  if (!err)
    err = start_main(s, d);
  if (!err && s->t.via_port) {
    /* a runtime that dialed in with 'suspend' waits at startup for this; one
     * with 'nosuspend' takes it as a no-op.  No rundown: a suspended
     * runtime has run no code yet, and one that has gets the usual rundown */
    ps_diag rd;
    ps_diag_clear(&rd);
    if (ds_resume(&s->t, s->opt.io_timeout_ms, &rd) != PS_E_OK) {
      char msg[256];
      plog(LOG_WARN, s->t.pid, "ResumeRuntime failed: %s", ps_diag_format(&rd, msg, sizeof msg));
    }
  }
  if (!err) {
    ps_diag rd;
    ps_diag_clear(&rd);
    if (start_rundown(s, &rd) != PS_E_OK) { /* profiled all the same, new code named */
      char msg[256];
      plog(LOG_WARN, s->t.pid, "no rundown session, code JIT'd before the attach stays "
                          "unnamed: %s", ps_diag_format(&rd, msg, sizeof msg));
    }
  }
  if (err) {
    if (s->tee) { /* nothing left behind */
      fclose(s->tee);
      s->tee = NULL;
      unlink(s->opt.tee_path);
    }
    prof_close(s);
    return err;
  }
  s->st.started_ns = s->win_start_ns = real_ns();
  s->st.window_start_ns = s->win_start_ns;
  s->win_start_ms = ds_now_ms();
  set_state(s, "profiling", NULL);
  *out = s;
  return PS_E_OK;
}

ps_err prof_attach(const prof_options *o, int pid, engine *e, prof_session **out, ps_diag *d) {
  ds_target t;
  uint64_t wait = o->attach_wait_ms ? o->attach_wait_ms
                  : o->io_timeout_ms ? o->io_timeout_ms : PROF_DEFAULT_IO_TIMEOUT_MS;
  ps_err err = ds_target_find(pid, &t, wait, d);
  if (err)
    return err;
  return prof_attach_target(o, &t, e, out, d); /* t is the session's now, whatever happens */
}

/* feeds one chunk of the main stream; false at its end */
static bool pump_main(prof_session *s, ps_diag *d, ps_err *err) {
  ssize_t n = read_some(s->fd, s->rbuf);
  if (n < 0)
    return true;
  if (n == 0)
    return false;
  if (s->tee && fwrite(s->rbuf, 1, (size_t)n, s->tee) != (size_t)n) {
    plog(LOG_WARN, s->t.pid, "the copy %s could not be written: %s",
             s->opt.tee_path, strerror(errno));
    fclose(s->tee);
    s->tee = NULL;
  }
  *err = trace_job_feed(s->job, s->rbuf, (size_t)n, d);
  return *err == PS_E_OK;
}

static bool pump_rundown(prof_session *s) {
  ssize_t n = read_some(s->rd_fd, s->rbuf);
  if (n < 0)
    return true;
  if (n == 0)
    return false;
  ps_diag d;
  ps_diag_clear(&d);
  if (trace_job_feed(s->rd_job, s->rbuf, (size_t)n, &d) != PS_E_OK) {
    char msg[256];
    plog(LOG_WARN, s->t.pid, "rundown stream unreadable: %s",
             ps_diag_format(&d, msg, sizeof msg));
    return false;
  }
  return true;
}

ps_err prof_run(prof_session *s, volatile sig_atomic_t *stop, prof_tick_fn tick, void *tctx,
                ps_diag *d) {
  uint64_t began = ds_now_ms(), last_tick = 0;
  uint64_t end_at = s->opt.duration_ms ? began + s->opt.duration_ms : UINT64_MAX;
  const char *reason = "stopped";
  ps_err err = PS_E_OK;
  bool main_open = true, stopping = false, cut_due = false;
  uint64_t stop_deadline = UINT64_MAX;
  for (;;) {
    uint64_t now = ds_now_ms();
    if (!stopping && ((stop && *stop) || now >= end_at)) {
      /* StopTracing, then the stream's last events until it ends */
      stopping = true;
      reason = now >= end_at && !(stop && *stop) ? "the duration passed" : "stopped";
      set_state(s, "stopping", NULL);
      stop_begin(s, s->sid, &s->stop);
      stop_deadline = now + s->opt.io_timeout_ms + (s->opt.tee_path ? 5 * s->opt.io_timeout_ms : 0);
    }
    if (stopping && (!main_open || now >= stop_deadline))
      break;
    /* the window's end (waiting a little for a rundown under way, so the
     * code JIT'd before the attach is named in the first window) */
    uint64_t win_end = s->win_start_ms + s->opt.window_ms;
    if (!stopping && now >= win_end)
      cut_due = true;
    if (cut_due && s->rd_fd < 0 && !s->cut_checked) {
      s->cut_checked = true;
      if (wants_rundown(s, d, &err)) {
        ps_diag rd;
        ps_diag_clear(&rd);
        if (start_rundown(s, &rd) == PS_E_OK)
          s->cut_retried = true;
      }
      if (err)
        break;
    }
    if (cut_due && (s->rd_fd < 0 || now >= s->rd_deadline)) {
      if (s->rd_fd >= 0)
        end_rundown(s, false);
      err = cut_window(s, d);
      if (err)
        break;
      cut_due = false;
      if (tick) {
        prof_status st;
        prof_get_status(s, &st);
        tick(tctx, &st);
      }
    }
    if (s->rd_fd >= 0 && now >= s->rd_deadline)
      end_rundown(s, false);
    /* a code map past its budget: name what was sampled, forget it, rundown */
    if (trace_job_code_full(s->job) && s->rd_fd < 0 && !stopping) {
      plog(LOG_WARN, s->t.pid, "the code map reached its %zu-byte budget: forgotten, "
                          "rebuilt from a rundown", s->opt.trace.code_budget);
      trace_job_set_deadline(s->job, engine_now_ms() + s->opt.resolve_ms);
      err = trace_job_resolve(s->job, s->eng, local_lookup, s, d);
      if (err)
        break;
      trace_job_forget_code(s->job);
      prof_count_code_reset();
      ps_diag rd;
      ps_diag_clear(&rd);
      if (start_rundown(s, &rd) != PS_E_OK) {
        char msg[256];
        plog(LOG_WARN, s->t.pid, "no rundown: %s",
                 ps_diag_format(&rd, msg, sizeof msg));
      }
    }
    if (now - last_tick >= 1000) { /* the status a progress line or /profiles reads */
      last_tick = now;
      update_status(s);
      if (tick) {
        prof_status st;
        prof_get_status(s, &st);
        tick(tctx, &st);
      }
    }
    /* wait for bytes, at most until the next thing to do */
    struct pollfd p[4];
    int np = 0, i_main = -1, i_rd = -1, i_rs = -1, i_ms = -1;
    if (main_open) {
      i_main = np;
      p[np++] = (struct pollfd){s->fd, POLLIN, 0};
    }
    if (s->rd_fd >= 0) {
      i_rd = np;
      p[np++] = (struct pollfd){s->rd_fd, POLLIN, 0};
    }
    if (s->rd_stop.fd >= 0) {
      i_rs = np;
      p[np++] = (struct pollfd){s->rd_stop.fd, POLLIN, 0};
    }
    if (s->stop.fd >= 0) {
      i_ms = np;
      p[np++] = (struct pollfd){s->stop.fd, POLLIN, 0};
    }
    uint64_t next = stopping ? stop_deadline : (win_end < end_at ? win_end : end_at);
    if (cut_due || s->rd_fd >= 0)
      next = next < now + 50 ? next : now + 50;
    uint64_t wait = next > now ? next - now : 0;
    if (wait > 250)
      wait = 250; /* the stop flag and the tick are looked at four times a second */
    int r = poll(p, (nfds_t)np, (int)wait);
    if (r < 0 && errno != EINTR) {
      err = ps_diag_set(d, PS_E_IO, "profile", NOPOS, "poll: %s", strerror(errno));
      break;
    }
    if (r <= 0)
      continue;
    if (i_rs >= 0 && p[i_rs].revents)
      stop_poll(&s->rd_stop);
    if (i_ms >= 0 && p[i_ms].revents)
      stop_poll(&s->stop);
    if (i_rd >= 0 && p[i_rd].revents && !pump_rundown(s))
      end_rundown(s, true);
    if (i_main >= 0 && p[i_main].revents) {
      for (int k = 0; k < 16 && main_open; k++) { /* a few chunks while they come */
        if (!pump_main(s, d, &err)) {
          main_open = false;
          break;
        }
        struct pollfd q = {s->fd, POLLIN, 0};
        if (poll(&q, 1, 0) <= 0)
          break;
      }
      if (err)
        break;
      if (!main_open && !stopping) { /* the runtime ended the stream: the process exited */
        reason = s->t.via_port     ? "the runtime ended the session (its process exited)"
                 : process_gone(s->t.pid) ? "the process exited"
                                          : "the runtime ended the session";
        stopping = true;
        set_state(s, "stopping", NULL);
      }
    }
  }
  /* the end: what the stream had, the rundown if it was under way, the last window */
  if (!err) {
    ps_diag ld;
    ps_diag_clear(&ld);
    trace_job_end_live(s->job, &ld);
    if (s->rd_fd >= 0)
      end_rundown(s, false);
    err = cut_window(s, d);
  }
  stop_close(&s->stop);
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  if (s->tee) {
    fclose(s->tee);
    s->tee = NULL;
  }
  update_status(s);
  if (err) {
    char msg[256];
    set_state(s, "failed", ps_diag_format(d, msg, sizeof msg));
  } else {
    set_state(s, "ended", reason);
  }
  if (tick) {
    prof_status st;
    prof_get_status(s, &st);
    tick(tctx, &st);
  }
  return err;
}

void prof_close(prof_session *s) {
  if (!s)
    return;
  if (s->fd >= 0) { /* an abandoned session: stop it, not waiting for the answer */
    stop_begin(s, s->sid, &s->stop);
    close(s->fd);
  }
  if (s->rd_fd >= 0)
    close(s->rd_fd);
  stop_close(&s->stop);
  stop_close(&s->rd_stop);
  if (s->rd_job)
    trace_job_close(s->rd_job);
  if (s->job)
    trace_job_close(s->job);
  if (s->tee)
    fclose(s->tee);
  ds_target_close(&s->t);
  pthread_mutex_destroy(&s->mu);
  free(s->rbuf);
  free(s);
}
