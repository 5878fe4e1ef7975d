/*
 * manager.c - the processes `pdbsym serve` profiles (see profile.h): the
 * settings name them (profile_pids, profile_command), a scanner thread looks
 * for them every profile_scan_interval and attaches, each session runs on a
 * thread of its own (at most max_profiled_processes), and what ended is
 * remembered (a fixed number) for GET /profiles.  No HTTP request can add a
 * process: only the settings name them.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "log.h"
#include "profile.h"

#define MAX_PIDS 64        /* pids in profile_pids (fixed) */
#define RECENT_MAX 32      /* ended sessions remembered for /profiles (fixed) */
#define REFUSED_MAX 256    /* processes that could not be attached to, remembered (fixed) */
#define RETRY_MS 60000     /* a named pid that refused is asked again after this */
#define RETRY_MATCH_MS 300000 /* ... a process the pattern matched, after this */
#define YOUNG_S 30         /* a process younger than this may still be starting: asked
                              again at the next look */

/* ---- process-wide counters, for /metrics ---- */

static _Atomic uint64_t m_windows, m_samples, m_dropped, m_rundowns, m_code_resets,
    m_attach_failures, m_sessions_started;
static _Atomic long m_sessions_active;

void prof_count_window(uint64_t samples, uint64_t dropped) {
  atomic_fetch_add(&m_windows, 1);
  atomic_fetch_add(&m_samples, samples);
  atomic_fetch_add(&m_dropped, dropped);
}

void prof_count_rundown(void) { atomic_fetch_add(&m_rundowns, 1); }
void prof_count_code_reset(void) { atomic_fetch_add(&m_code_resets, 1); }

void prof_get_metrics(prof_metrics *m) {
  m->windows = atomic_load(&m_windows);
  m->samples = atomic_load(&m_samples);
  m->dropped_events = atomic_load(&m_dropped);
  m->rundowns = atomic_load(&m_rundowns);
  m->code_resets = atomic_load(&m_code_resets);
  m->attach_failures = atomic_load(&m_attach_failures);
  m->sessions_started = atomic_load(&m_sessions_started);
  m->sessions_active = (uint64_t)atomic_load(&m_sessions_active);
}

/* ---- the manager ---- */

typedef struct {
  bool used, done;
  pthread_t th;
  prof_session *s;
  volatile sig_atomic_t stop;
  int pid;
  unsigned long long start; /* the process's start time: a pid reused is another process */
  bool via_port;            /* a runtime that dialed the diagnostic port */
  uint8_t cookie[16];       /* ... its instance */
  struct prof_manager *m;
} slot;

#define WAITING_MAX 64 /* runtimes that dialed in while every slot was taken (fixed) */

typedef struct {
  int pid;
  unsigned long long start;
  uint64_t retry_at_ms;
} refusal;

struct prof_manager {
  prof_manager_config cfg;
  char command[256];
  int pids[MAX_PIDS];
  int npids;
  engine *eng;
  prof_outdir *od;
  pthread_t scanner;
  bool scanner_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stopping;
  slot *slots;
  prof_status recent[RECENT_MAX]; /* a ring, newest at recent_next - 1 */
  size_t nrecent, recent_next;
  refusal refused[REFUSED_MAX];
  size_t nrefused, refused_next;
  prof_pusher *pusher; /* profile_push */
  /* the diagnostic port */
  prof_port *port;
  pthread_t port_th;
  bool port_started;
  struct waiting { uint8_t cookie[16]; uint64_t pid; } waiting[WAITING_MAX];
  size_t nwaiting;
};

static unsigned long long start_time(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p)
    return 0;
  p++;
  for (int field = 3; field < 22 && p; field++)
    p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void mlog(log_level lv, const char *msg, int pid, const char *detail) {
  log_line l;
  log_begin(&l, lv, msg);
  if (pid)
    log_int(&l, "pid", pid);
  log_str(&l, "detail", detail);
  log_end(&l);
}

static void *session_main(void *arg) {
  slot *sl = arg;
  ps_diag d;
  ps_diag_clear(&d);
  prof_run(sl->s, &sl->stop, NULL, NULL, &d);
  prof_status st;
  prof_get_status(sl->s, &st);
  mlog(LOG_INFO, "profile ended", sl->pid, st.end_reason);
  pthread_mutex_lock(&sl->m->mu);
  sl->done = true;
  pthread_cond_broadcast(&sl->m->cv);
  pthread_mutex_unlock(&sl->m->mu);
  return NULL;
}

/* a finished session's status kept, the session closed (mu held, the
 * thread joined) */
static void forget(prof_manager *m, slot *sl) {
  prof_status st;
  prof_get_status(sl->s, &st);
  m->recent[m->recent_next] = st;
  m->recent_next = (m->recent_next + 1) % RECENT_MAX;
  if (m->nrecent < RECENT_MAX)
    m->nrecent++;
  prof_close(sl->s);
  if (sl->via_port && m->port)
    prof_port_forget(m->port, sl->cookie);
  memset(sl, 0, sizeof *sl);
  atomic_fetch_sub(&m_sessions_active, 1);
}

static bool attached(const prof_manager *m, int pid, unsigned long long start) {
  for (unsigned i = 0; i < m->cfg.max_sessions; i++)
    if (m->slots[i].used && m->slots[i].pid == pid && m->slots[i].start == start)
      return true;
  return false;
}

static bool refused_now(const prof_manager *m, int pid, unsigned long long start, uint64_t now) {
  for (size_t i = 0; i < m->nrefused; i++)
    if (m->refused[i].pid == pid && m->refused[i].start == start)
      return now < m->refused[i].retry_at_ms;
  return false;
}

static void note_refusal(prof_manager *m, int pid, unsigned long long start, uint64_t retry) {
  for (size_t i = 0; i < m->nrefused; i++)
    if (m->refused[i].pid == pid && m->refused[i].start == start) {
      m->refused[i].retry_at_ms = retry;
      return;
    }
  m->refused[m->refused_next] = (refusal){pid, start, retry};
  m->refused_next = (m->refused_next + 1) % REFUSED_MAX;
  if (m->nrefused < REFUSED_MAX)
    m->nrefused++;
}

/* attaches to pid in a free slot (mu not held: the attach talks to the
 * process, within profile_ipc_timeout) */
static void try_attach(prof_manager *m, int pid, bool named) {
  unsigned long long start = start_time(pid);
  if (!start)
    return; /* not (or no longer) there */
  uint64_t now = ds_now_ms();
  pthread_mutex_lock(&m->mu);
  unsigned free_slot = m->cfg.max_sessions;
  for (unsigned i = 0; i < m->cfg.max_sessions && free_slot == m->cfg.max_sessions; i++)
    if (!m->slots[i].used)
      free_slot = i;
  bool skip = m->stopping || attached(m, pid, start) || refused_now(m, pid, start, now) ||
              free_slot == m->cfg.max_sessions;
  pthread_mutex_unlock(&m->mu);
  if (skip)
    return;
  prof_session *s = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  prof_options o = m->cfg.session;
  o.outdir = m->od;
  o.duration_ms = 0;
  o.tee_path = NULL;
  o.attach_wait_ms = 1000; /* the scanner looks again anyway */
  if (prof_attach(&o, pid, m->eng, &s, &d) != PS_E_OK) {
    atomic_fetch_add(&m_attach_failures, 1);
    pthread_mutex_lock(&m->mu);
    /* a process still starting is asked again at the next look; another,
     * after a minute (named) or five (matched by the pattern: most such
     * refusals are processes that are not .NET) */
    double age = ds_process_age(pid);
    uint64_t retry = age >= 0 && age < YOUNG_S ? now : now + (named ? RETRY_MS : RETRY_MATCH_MS);
    note_refusal(m, pid, start, retry);
    pthread_mutex_unlock(&m->mu);
    char msg[256];
    mlog(named ? LOG_WARN : LOG_INFO, "profile attach failed", pid,
         d.detail[0] ? d.detail : ps_diag_format(&d, msg, sizeof msg));
    return;
  }
  pthread_mutex_lock(&m->mu);
  slot *sl = &m->slots[free_slot];
  memset(sl, 0, sizeof *sl);
  sl->used = true;
  sl->s = s;
  sl->pid = pid;
  sl->start = start;
  sl->m = m;
  if (pthread_create(&sl->th, NULL, session_main, sl) != 0) {
    memset(sl, 0, sizeof *sl);
    pthread_mutex_unlock(&m->mu);
    prof_close(s);
    mlog(LOG_WARN, "profile attach failed", pid, "no thread for the session");
    return;
  }
  atomic_fetch_add(&m_sessions_started, 1);
  atomic_fetch_add(&m_sessions_active, 1);
  pthread_mutex_unlock(&m->mu);
  prof_status st;
  prof_get_status(s, &st);
  char detail[256];
  snprintf(detail, sizeof detail, "%s (.NET %s, CollectTracing%d)", st.comm,
           st.clr_version[0] ? st.clr_version : "?", st.collect_version);
  mlog(LOG_INFO, "profiling", pid, detail);
}

/* a session for a runtime that dialed the port, in a free slot; false when
 * none is free (mu not held) */
static bool attach_port(prof_manager *m, const uint8_t cookie[16], uint64_t pid) {
  pthread_mutex_lock(&m->mu);
  unsigned free_slot = m->cfg.max_sessions;
  for (unsigned i = 0; i < m->cfg.max_sessions && free_slot == m->cfg.max_sessions; i++)
    if (!m->slots[i].used)
      free_slot = i;
  bool stopping = m->stopping;
  pthread_mutex_unlock(&m->mu);
  if (stopping || free_slot == m->cfg.max_sessions)
    return false;
  ds_target t;
  ps_diag d;
  ps_diag_clear(&d);
  prof_session *s = NULL;
  prof_options o = m->cfg.session;
  o.outdir = m->od;
  o.duration_ms = 0;
  o.tee_path = NULL;
  ps_err e = prof_port_target(m->port, cookie, pid, &t, &d);
  if (!e)
    e = prof_attach_target(&o, &t, m->eng, &s, &d); /* (t is the session's, even on failure) */
  if (e) {
    atomic_fetch_add(&m_attach_failures, 1);
    char msg[256];
    mlog(LOG_WARN, "profile attach failed", (int)pid, ps_diag_format(&d, msg, sizeof msg));
    prof_port_forget(m->port, cookie);
    return true; /* (not for want of a slot) */
  }
  pthread_mutex_lock(&m->mu);
  slot *sl = &m->slots[free_slot];
  memset(sl, 0, sizeof *sl);
  sl->used = true;
  sl->s = s;
  sl->pid = (int)pid;
  sl->via_port = true;
  memcpy(sl->cookie, cookie, 16);
  sl->m = m;
  bool ok = pthread_create(&sl->th, NULL, session_main, sl) == 0;
  if (!ok)
    memset(sl, 0, sizeof *sl);
  else {
    atomic_fetch_add(&m_sessions_started, 1);
    atomic_fetch_add(&m_sessions_active, 1);
  }
  pthread_mutex_unlock(&m->mu);
  if (!ok) {
    prof_close(s);
    return true;
  }
  prof_status st;
  prof_get_status(s, &st);
  char detail[256];
  snprintf(detail, sizeof detail, "%s (.NET %s, CollectTracing%d), dialed %s", st.comm,
           st.clr_version[0] ? st.clr_version : "?", st.collect_version, prof_port_path(m->port));
  mlog(LOG_INFO, "profiling", st.pid, detail);
  return true;
}

/* a runtime that dialed in while every slot was taken: resumed (one started
 * with 'suspend' would wait for ever) and kept for the next free slot */
static void park(prof_manager *m, const uint8_t cookie[16], uint64_t pid) {
  ds_target t;
  ps_diag d;
  ps_diag_clear(&d);
  if (prof_port_target(m->port, cookie, pid, &t, &d) == PS_E_OK) {
    uint64_t to = m->cfg.session.io_timeout_ms ? m->cfg.session.io_timeout_ms
                                               : PROF_DEFAULT_IO_TIMEOUT_MS;
    ds_resume(&t, to, &d);
    ds_target_close(&t);
  }
  pthread_mutex_lock(&m->mu);
  if (m->nwaiting == WAITING_MAX) { /* the oldest waiting is forgotten */
    prof_port_forget(m->port, m->waiting[0].cookie);
    memmove(m->waiting, m->waiting + 1, (WAITING_MAX - 1) * sizeof m->waiting[0]);
    m->nwaiting--;
  }
  memcpy(m->waiting[m->nwaiting].cookie, cookie, 16);
  m->waiting[m->nwaiting++].pid = pid;
  pthread_mutex_unlock(&m->mu);
  char detail[128];
  snprintf(detail, sizeof detail, "every one of the %u max_profiled_processes slots is taken: "
           "resumed, profiled when one frees", m->cfg.max_sessions);
  mlog(LOG_WARN, "profile waits", (int)pid, detail);
}

static void *port_main(void *arg) {
  prof_manager *m = arg;
  for (;;) {
    pthread_mutex_lock(&m->mu);
    bool stopping = m->stopping;
    pthread_mutex_unlock(&m->mu);
    if (stopping)
      break;
    uint8_t cookie[16];
    uint64_t pid;
    if (prof_port_next(m->port, ds_now_ms() + 500, cookie, &pid) && !attach_port(m, cookie, pid))
      park(m, cookie, pid);
  }
  return NULL;
}

static void scan(prof_manager *m) {
  for (int i = 0; i < m->npids; i++)
    try_attach(m, m->pids[i], true);
  if (!m->command[0])
    return;
  DIR *proc = opendir("/proc");
  if (!proc)
    return;
  struct dirent *de;
  int self = (int)getpid();
  while ((de = readdir(proc)) != NULL) {
    if (!isdigit((unsigned char)de->d_name[0]))
      continue;
    int pid = atoi(de->d_name);
    if (pid <= 0 || pid == self)
      continue;
    char path[64], comm[64];
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    FILE *f = fopen(path, "re");
    if (!f)
      continue;
    bool got = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    if (!got)
      continue;
    comm[strcspn(comm, "\n")] = '\0';
    if (fnmatch(m->command, comm, 0) == 0)
      try_attach(m, pid, false);
  }
  closedir(proc);
}

static void *scanner_main(void *arg) {
  prof_manager *m = arg;
  pthread_mutex_lock(&m->mu);
  while (!m->stopping) {
    for (unsigned i = 0; i < m->cfg.max_sessions; i++)
      if (m->slots[i].used && m->slots[i].done) {
        pthread_join(m->slots[i].th, NULL); /* done: it no longer needs mu */
        forget(m, &m->slots[i]);
      }
    /* runtimes of the port that waited for a slot, oldest first */
    while (m->port && m->nwaiting && !m->stopping) {
      struct waiting w = m->waiting[0];
      memmove(m->waiting, m->waiting + 1, (m->nwaiting - 1) * sizeof m->waiting[0]);
      m->nwaiting--;
      pthread_mutex_unlock(&m->mu);
      bool taken = attach_port(m, w.cookie, w.pid);
      pthread_mutex_lock(&m->mu);
      if (!taken) { /* still no slot: back at the head */
        memmove(m->waiting + 1, m->waiting, m->nwaiting * sizeof m->waiting[0]);
        m->waiting[0] = w;
        m->nwaiting++;
        break;
      }
    }
    pthread_mutex_unlock(&m->mu);
    scan(m);
    pthread_mutex_lock(&m->mu);
    struct timespec until =
        deadline_after_ms(m->cfg.scan_interval_ms ? m->cfg.scan_interval_ms : 5000);
    /* a session's end wakes it too (its slot is free for a waiting process) */
    while (!m->stopping) {
      bool ended = false;
      for (unsigned i = 0; i < m->cfg.max_sessions; i++)
        ended |= m->slots[i].used && m->slots[i].done;
      if (ended || pthread_cond_timedwait(&m->cv, &m->mu, &until) == ETIMEDOUT)
        break;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

static bool parse_pids(const char *s, int *out, int *n, char *err, size_t cap) {
  *n = 0;
  const char *p = s;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    if (!*p)
      break;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v <= 0 || v > 0x3fffffff || (*end && *end != ',' && *end != ' ')) {
      snprintf(err, cap, "profile_pids: '%s' is not a comma-separated list of process ids", s);
      return false;
    }
    if (*n == MAX_PIDS) {
      snprintf(err, cap, "profile_pids: at most %d pids", MAX_PIDS);
      return false;
    }
    out[(*n)++] = (int)v;
    p = end;
  }
  return true;
}

bool prof_manager_check(const prof_manager_config *c, char *err, size_t cap) {
  int pids[MAX_PIDS], n;
  if (!parse_pids(c->pids ? c->pids : "", pids, &n, err, cap))
    return false;
  if (c->max_sessions < 1 || c->max_sessions > 256) {
    snprintf(err, cap, "max_profiled_processes: 1 to 256");
    return false;
  }
  if (c->session.window_ms < 250 || c->session.window_ms > 3600000) {
    snprintf(err, cap, "profile_window: 250ms to 1h");
    return false;
  }
  if (!c->session.formats) {
    snprintf(err, cap, "profile_format: speedscope, pprof or both");
    return false;
  }
  if (c->push.url && *c->push.url && strncmp(c->push.url, "http://", 7) &&
      strncmp(c->push.url, "https://", 8)) {
    snprintf(err, cap, "profile_push: '%.200s' is not an http:// or https:// URL", c->push.url);
    return false;
  }
  if (c->push.labels && *c->push.labels) {
    const char *q = c->push.labels;
    for (; *q; q++)
      if (!(isalnum((unsigned char)*q) || *q == '_' || *q == '=' || *q == ',' || *q == '-' ||
            *q == '.' || *q == '/' || *q == ':'))
        break;
    if (*q || !strchr(c->push.labels, '=')) {
      snprintf(err, cap, "profile_push_labels: '%.200s' is not name=value[,name=value]",
               c->push.labels);
      return false;
    }
  }
  return true;
}

ps_err prof_manager_start(const prof_manager_config *c, engine *e, prof_manager **out,
                          ps_diag *d) {
  *out = NULL;
  char err[256];
  if (!prof_manager_check(c, err, sizeof err))
    return ps_diag_set(d, PS_E_INVALID, "profile", (size_t)-1, "%s", err);
  prof_manager *m = calloc(1, sizeof *m);
  if (!m)
    return ps_diag_set(d, PS_E_NOMEM, "profile", (size_t)-1, "out of memory");
  m->cfg = *c;
  snprintf(m->command, sizeof m->command, "%s", c->command ? c->command : "");
  parse_pids(c->pids ? c->pids : "", m->pids, &m->npids, err, sizeof err);
  m->eng = e;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->cv, NULL);
  m->slots = calloc(c->max_sessions, sizeof *m->slots);
  ps_err rc = m->slots ? PS_E_OK : ps_diag_set(d, PS_E_NOMEM, "profile", (size_t)-1, "out of memory");
  /* the output folder only when something is to be profiled: a server that
   * profiles nothing must start where profile_dir cannot be made (a
   * container's read-only working folder) */
  bool wanted = m->npids || m->command[0] || (c->diagnostic_port && *c->diagnostic_port);
  if (!rc && wanted)
    rc = prof_outdir_open(c->out_dir, c->max_files, c->max_bytes, &m->od, d);
  if (!rc && c->push.url && *c->push.url) {
    rc = prof_pusher_start(&c->push, &m->pusher, d);
    m->cfg.session.pusher = m->pusher;
    m->cfg.session.formats |= PROF_PPROF; /* what the store takes */
  }
  if (!rc && c->diagnostic_port && *c->diagnostic_port)
    rc = prof_port_open(c->diagnostic_port, 0, &m->port, d);
  if (!rc && (m->npids || m->command[0] || m->port)) {
    if (pthread_create(&m->scanner, NULL, scanner_main, m) != 0)
      rc = ps_diag_set(d, PS_E_NOMEM, "profile", (size_t)-1, "no thread for the scanner");
    else
      m->scanner_started = true;
  }
  if (!rc && m->port) {
    if (pthread_create(&m->port_th, NULL, port_main, m) != 0)
      rc = ps_diag_set(d, PS_E_NOMEM, "profile", (size_t)-1, "no thread for the port");
    else
      m->port_started = true;
  }
  if (rc) {
    prof_manager_free(m);
    return rc;
  }
  *out = m;
  return PS_E_OK;
}

bool prof_manager_active(const prof_manager *m) {
  return m && (m->npids || m->command[0] || m->port);
}

void prof_manager_stop(prof_manager *m) {
  if (!m)
    return;
  pthread_mutex_lock(&m->mu);
  if (m->stopping && !m->scanner_started) { /* stopped already */
    pthread_mutex_unlock(&m->mu);
    return;
  }
  m->stopping = true;
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
  if (m->scanner_started)
    pthread_join(m->scanner, NULL);
  if (m->port_started) {
    prof_port_wake(m->port);
    pthread_join(m->port_th, NULL);
    m->port_started = false;
  }
  /* every session stopped: StopTracing, the last window written (each within
   * its own deadlines: profile_ipc_timeout, profile_resolve_timeout) */
  for (unsigned i = 0; m->slots && i < m->cfg.max_sessions; i++)
    if (m->slots[i].used)
      m->slots[i].stop = 1;
  for (unsigned i = 0; m->slots && i < m->cfg.max_sessions; i++)
    if (m->slots[i].used)
      pthread_join(m->slots[i].th, NULL); /* (its end takes mu: not held here) */
  pthread_mutex_lock(&m->mu);
  for (unsigned i = 0; m->slots && i < m->cfg.max_sessions; i++)
    if (m->slots[i].used)
      forget(m, &m->slots[i]);
  m->scanner_started = false;
  pthread_mutex_unlock(&m->mu);
  /* the last windows sent (each session wrote its last one above) */
  uint64_t drain = m->cfg.session.io_timeout_ms ? m->cfg.session.io_timeout_ms
                                                : PROF_DEFAULT_IO_TIMEOUT_MS;
  prof_pusher_stop(m->pusher, drain);
  m->pusher = NULL;
  m->cfg.session.pusher = NULL;
}

void prof_manager_free(prof_manager *m) {
  if (!m)
    return;
  prof_manager_stop(m);
  prof_port_close(m->port);
  prof_outdir_close(m->od);
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  free(m->slots);
  free(m);
}

prof_outdir *prof_manager_outdir(prof_manager *m) { return m ? m->od : NULL; }

size_t prof_manager_list(prof_manager *m, prof_status *out, size_t cap) {
  size_t n = 0;
  if (!m)
    return 0;
  pthread_mutex_lock(&m->mu);
  for (unsigned i = 0; i < m->cfg.max_sessions && n < cap; i++)
    if (m->slots[i].used)
      prof_get_status(m->slots[i].s, &out[n++]);
  for (size_t k = 0; k < m->nrecent && n < cap; k++) { /* newest first */
    size_t at = (m->recent_next + RECENT_MAX - 1 - k) % RECENT_MAX;
    out[n++] = m->recent[at];
  }
  pthread_mutex_unlock(&m->mu);
  return n;
}
