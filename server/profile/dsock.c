/*
 * dsock.c - a .NET runtime's diagnostic socket: found, dialed, commanded
 * (see dsock.h).
 */
#define _GNU_SOURCE /* O_PATH */
#define NOPOS ((size_t)-1) /* a diagnostic about no place in a file */
#include "dsock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

uint64_t ds_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- /proc ---- */

/* the whole of a small /proc file, NUL-terminated (at most cap - 1 bytes);
 * -1 with errno on failure */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

/* the value of NAME in a NUL-separated environment block, or NULL */
static const char *env_get(const char *env, size_t n, const char *name) {
  size_t k = strlen(name);
  for (size_t i = 0; i < n;) {
    const char *e = env + i;
    size_t len = strnlen(e, n - i);
    if (len > k && !memcmp(e, name, k) && e[k] == '=')
      return e + k + 1;
    i += len + 1;
  }
  return NULL;
}

/* last NSpid field, and the real uid, from /proc/PID/status */
static void read_status(int pid, int *ns_pid, uid_t *uid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  *ns_pid = pid;
  *uid = (uid_t)-1;
  if (read_small(path, buf, sizeof buf) < 0)
    return;
  for (char *line = buf; line && *line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    if (!strncmp(line, "Uid:", 4)) {
      *uid = (uid_t)strtoul(line + 4, NULL, 10);
    } else if (!strncmp(line, "NSpid:", 6)) {
      char *p = line + 6, *end;
      for (;;) {
        long v = strtol(p, &end, 10);
        if (end == p)
          break;
        if (v > 0 && v < INT32_MAX)
          *ns_pid = (int)v;
        p = end;
      }
    }
    line = next;
  }
}

/* field 22 of /proc/PID/stat: the start time in clock ticks since boot */
static bool read_start_time(int pid, unsigned long long *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  if (read_small(path, buf, sizeof buf) < 0)
    return false;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
  if (!p)
    return false;
  p++;
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (!p)
      return false;
  }
  char *end;
  *out = strtoull(p + 1, &end, 10);
  return end != p + 1;
}

/* does pid map libcoreclr.so (or a single-file host with the runtime in it)?
 * -1 when its maps cannot be read */
static int maps_coreclr(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  char line[1024];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, "libcoreclr.so") != NULL;
  if (ferror(f))
    found = -1;
  fclose(f);
  return found;
}

/* ---- finding the socket ---- */

static bool is_socket_at(int dirfd, const char *name) {
  struct stat st;
  return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode);
}

/* The newest dotnet-diagnostic-{ns_pid}-*-socket in dirfd (a pid reused
 * leaves the old process's socket behind only if it crashed). */
static bool scan_socket(int dirfd, int ns_pid, char *name, size_t cap) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return false;
  DIR *dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return false;
  }
  char prefix[64];
  int pl = snprintf(prefix, sizeof prefix, "dotnet-diagnostic-%d-", ns_pid);
  unsigned long long best = 0;
  bool found = false;
  struct dirent *de;
  while ((de = readdir(dir)) != NULL) {
    if (strncmp(de->d_name, prefix, (size_t)pl) != 0)
      continue;
    char *end;
    unsigned long long key = strtoull(de->d_name + pl, &end, 10);
    if (strcmp(end, "-socket") != 0 || !is_socket_at(dirfd, de->d_name))
      continue;
    size_t len = strlen(de->d_name);
    if ((!found || key > best) && len < cap) {
      best = key;
      found = true;
      memcpy(name, de->d_name, len + 1);
    }
  }
  closedir(dir);
  return found;
}

/* same mount namespace as us? (true when it cannot be told) */
static bool same_mount_ns(int pid) {
  char a[128], b[128], path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
  ssize_t na = readlink("/proc/self/ns/mnt", a, sizeof a - 1);
  ssize_t nb = readlink(path, b, sizeof b - 1);
  if (na <= 0 || nb <= 0)
    return true;
  return na == nb && !memcmp(a, b, (size_t)na);
}

static int dial_unix(ds_target *t, uint64_t deadline_ms, ps_diag *d);

/* seconds since process pid started (its start time against the uptime);
 * -1 when not known */
double ds_process_age(int pid) {
  unsigned long long start;
  char buf[128];
  if (!read_start_time(pid, &start) || read_small("/proc/uptime", buf, sizeof buf) <= 0)
    return -1;
  long hz = sysconf(_SC_CLK_TCK);
  return strtod(buf, NULL) - (double)start / (double)(hz > 0 ? hz : 100);
}

static ps_err find_once(int pid, ds_target *t, ps_diag *d);

ps_err ds_target_find(int pid, ds_target *t, uint64_t wait_ms, ps_diag *d) {
  /* a process started a moment ago may not have its socket yet (the runtime
   * opens it while starting): while it is younger than wait_ms, look again */
  uint64_t deadline = ds_now_ms() + wait_ms;
  for (;;) {
    ps_diag cd;
    ps_diag_clear(&cd);
    ps_err e = find_once(pid, t, &cd);
    if (e != PS_E_NOT_FOUND || ds_now_ms() >= deadline) {
      if (e)
        *d = cd;
      return e;
    }
    double age = ds_process_age(pid);
    if (age < 0 || age * 1000.0 > (double)wait_ms) {
      *d = cd;
      return e;
    }
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
  }
}

static ps_err find_once(int pid, ds_target *t, ps_diag *d) {
  memset(t, 0, sizeof *t);
  t->dir_fd = -1;
  t->pid = pid;
  t->dial = dial_unix;
  char path[1200];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d", pid);
  if (pid <= 0 || stat(path, &st) != 0)
    return ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS, "no process %d", pid);
  snprintf(path, sizeof path, "/proc/%d/comm", pid);
  if (read_small(path, t->comm, sizeof t->comm) > 0)
    t->comm[strcspn(t->comm, "\n")] = '\0';
  read_status(pid, &t->ns_pid, &t->uid);
  uid_t me = geteuid();
  /* its environment: TMPDIR, and whether diagnostics are off */
  size_t env_cap = 1 << 17;
  char *env = malloc(env_cap);
  if (!env)
    return ps_diag_set(d, PS_E_NOMEM, "attach", NOPOS, "out of memory");
  snprintf(path, sizeof path, "/proc/%d/environ", pid);
  ssize_t en = read_small(path, env, env_cap);
  const char *tmpdir = NULL;
  bool diag_off = false;
  if (en > 0) {
    tmpdir = env_get(env, (size_t)en, "TMPDIR");
    const char *off[] = {"DOTNET_EnableDiagnostics", "COMPlus_EnableDiagnostics",
                         "DOTNET_EnableDiagnostics_IPC", "COMPlus_EnableDiagnostics_IPC"};
    for (size_t i = 0; i < 4; i++) {
      const char *v = env_get(env, (size_t)en, off[i]);
      if (v && !strcmp(v, "0"))
        diag_off = true;
    }
  }
  snprintf(t->sock_dir, sizeof t->sock_dir, "%s", tmpdir && *tmpdir ? tmpdir : "/tmp");
  free(env);
  size_t dl = strlen(t->sock_dir);
  while (dl > 1 && t->sock_dir[dl - 1] == '/')
    t->sock_dir[--dl] = '\0';
  /* the folder, through the target's root */
  snprintf(path, sizeof path, "/proc/%d/root%s", pid, t->sock_dir);
  t->dir_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int root_errno = t->dir_fd < 0 ? errno : 0;
  if (t->dir_fd < 0 && (root_errno == EACCES || root_errno == EPERM) && same_mount_ns(pid))
    t->dir_fd = open(t->sock_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (t->dir_fd < 0) {
    if (root_errno == EACCES || root_errno == EPERM)
      return ps_diag_set(d, PS_E_IO, "attach", NOPOS,
                         "may not look into process %d (%s, uid %u) from uid %u: run pdbsym "
                         "as uid %u or as root",
                         pid, t->comm, (unsigned)t->uid, (unsigned)me, (unsigned)t->uid);
    return ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS,
                       "process %d (%s) has no folder %s for its diagnostic socket: %s", pid,
                       t->comm, t->sock_dir, strerror(root_errno));
  }
  unsigned long long start = 0;
  bool have_start = read_start_time(pid, &start);
  if (have_start) {
    snprintf(t->sock_name, sizeof t->sock_name, "dotnet-diagnostic-%d-%llu-socket", t->ns_pid,
             start);
    if (is_socket_at(t->dir_fd, t->sock_name))
      return PS_E_OK;
  }
  if (scan_socket(t->dir_fd, t->ns_pid, t->sock_name, sizeof t->sock_name))
    return PS_E_OK;
  /* no socket: say why */
  int clr = maps_coreclr(pid);
  ps_err e;
  if (diag_off)
    e = ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS,
                    "process %d (%s) runs with DOTNET_EnableDiagnostics=0: it opens no diagnostic "
                    "socket; restart it without that variable",
                    pid, t->comm);
  else if (clr == 0)
    e = ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS,
                    "process %d (%s) is not a .NET process: it has not loaded libcoreclr.so and "
                    "has no dotnet-diagnostic socket in %s",
                    pid, t->comm, t->sock_dir);
  else if (have_start && strlen(t->sock_dir) + 1 + strlen(t->sock_name) > 107)
    /* sun_path holds 107 bytes and a NUL: the runtime could not bind there */
    e = ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS,
                    "process %d (%s) has no diagnostic socket: its TMPDIR is too long for a Unix "
                    "socket (%zu of 107 bytes); start it with a shorter TMPDIR",
                    pid, t->comm, strlen(t->sock_dir) + 1 + strlen(t->sock_name));
  else if (en < 0 && (t->uid != me && me != 0))
    e = ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS,
                    "process %d (%s) belongs to uid %u and has no dotnet-diagnostic socket in %s "
                    "(its own TMPDIR could not be read from uid %u): run pdbsym as uid %u or root",
                    pid, t->comm, (unsigned)t->uid, t->sock_dir, (unsigned)me, (unsigned)t->uid);
  else
    e = ps_diag_set(d, PS_E_NOT_FOUND, "attach", NOPOS,
                    "process %d (%s) has no dotnet-diagnostic-%d-*-socket in %s: not a .NET "
                    "process, a runtime older than .NET Core 3.0, or still starting",
                    pid, t->comm, t->ns_pid, t->sock_dir);
  ds_target_close(t);
  return e;
}

void ds_target_close(ds_target *t) {
  if (t->dir_fd >= 0)
    close(t->dir_fd);
  t->dir_fd = -1;
  if (t->owns_ctx)
    free(t->dial_ctx);
  t->dial_ctx = NULL;
  t->owns_ctx = false;
}

static int dial_unix(ds_target *t, uint64_t deadline_ms, ps_diag *d) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  int n = snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", t->dir_fd,
                   t->sock_name);
  if (n < 0 || (size_t)n >= sizeof sa.sun_path) {
    ps_diag_set(d, PS_E_INVALID, "attach", NOPOS, "socket name %s too long", t->sock_name);
    return -1;
  }
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      ps_diag_set(d, PS_E_IO, "attach", NOPOS, "socket: %s", strerror(errno));
      return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
      return fd;
    int e = errno;
    close(fd);
    if ((e == EAGAIN || e == EINTR) && ds_now_ms() < deadline_ms) { /* its backlog is full */
      struct timespec ts = {0, 10 * 1000000};
      nanosleep(&ts, NULL);
      continue;
    }
    if (e == EACCES || e == EPERM)
      ps_diag_set(d, PS_E_IO, "attach", NOPOS,
                  "permission denied on %s/%s: it belongs to uid %u and pdbsym runs as uid %u; "
                  "run pdbsym as that user or as root",
                  t->sock_dir, t->sock_name, (unsigned)t->uid, (unsigned)geteuid());
    else if (e == ECONNREFUSED || e == ENOENT)
      ps_diag_set(d, PS_E_NETWORK, "attach", NOPOS,
                  "nothing listens on %s/%s: the process is exiting, or the socket is a dead "
                  "process's",
                  t->sock_dir, t->sock_name);
    else if (e == EAGAIN)
      ps_diag_set(d, PS_E_TIMEOUT, "attach", NOPOS, "connecting to %s/%s timed out", t->sock_dir,
                  t->sock_name);
    else
      ps_diag_set(d, PS_E_NETWORK, "attach", NOPOS, "connect %s/%s: %s", t->sock_dir, t->sock_name,
                  strerror(e));
    return -1;
  }
}

/* ---- bytes with deadlines ---- */

static ps_err wait_fd(int fd, short ev, uint64_t deadline_ms, ps_diag *d, const char *what) {
  for (;;) {
    uint64_t now = ds_now_ms();
    if (now >= deadline_ms)
      return ps_diag_set(d, PS_E_TIMEOUT, "diagnostic IPC", NOPOS, "%s timed out", what);
    struct pollfd p = {fd, ev, 0};
    uint64_t left = deadline_ms - now;
    int r = poll(&p, 1, left > 1000 ? 1000 : (int)left);
    if (r > 0)
      return PS_E_OK;
    if (r < 0 && errno != EINTR)
      return ps_diag_set(d, PS_E_IO, "diagnostic IPC", NOPOS, "poll: %s", strerror(errno));
  }
}

ps_err ds_send_all(int fd, const void *p, size_t n, uint64_t deadline_ms, ps_diag *d) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w > 0) {
      b += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      ps_err e = wait_fd(fd, POLLOUT, deadline_ms, d, "sending a command");
      if (e)
        return e;
      continue;
    }
    return ps_diag_set(d, PS_E_NETWORK, "diagnostic IPC", NOPOS, "send: %s",
                       w < 0 ? strerror(errno) : "nothing sent");
  }
  return PS_E_OK;
}

ps_err ds_recv_all(int fd, void *p, size_t n, uint64_t deadline_ms, ps_diag *d) {
  uint8_t *b = p;
  size_t want = n;
  while (n > 0) {
    ssize_t r = recv(fd, b, n, 0);
    if (r > 0) {
      b += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0)
      return ps_diag_set(d, PS_E_NETWORK, "diagnostic IPC", NOPOS,
                         "the runtime closed the connection after %zu of %zu bytes", want - n,
                         want);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      ps_err e = wait_fd(fd, POLLIN, deadline_ms, d, "waiting for the runtime's answer");
      if (e)
        return e;
      continue;
    }
    return ps_diag_set(d, PS_E_NETWORK, "diagnostic IPC", NOPOS, "recv: %s", strerror(errno));
  }
  return PS_E_OK;
}

/* ---- commands ---- */

static const char *command_name(const uint8_t *msg) {
  switch (msg[16] << 8 | msg[17]) {
  case 0x0201: return "StopTracing";
  case 0x0202: return "CollectTracing";
  case 0x0203: return "CollectTracing2";
  case 0x0204: return "CollectTracing3";
  case 0x0205: return "CollectTracing4";
  case 0x0206: return "CollectTracing5";
  case 0x0400: return "ProcessInfo";
  case 0x0401: return "ResumeRuntime";
  case 0x0404: return "ProcessInfo2";
  case 0x0408: return "ProcessInfo3";
  default: return "a command";
  }
}

ps_err ds_command(ds_target *t, const uint8_t *msg, size_t len, uint64_t timeout_ms,
                  ds_header *h, uint8_t *payload, size_t cap, size_t *got, int *fd_out,
                  ps_diag *d) {
  *got = 0;
  if (fd_out)
    *fd_out = -1;
  uint64_t deadline = ds_now_ms() + timeout_ms;
  int fd = t->dial(t, deadline, d);
  if (fd < 0)
    return d->code ? d->code : PS_E_NETWORK;
  uint8_t hb[DS_HEADER_SIZE];
  const char *what = command_name(msg);
  ps_err e = ds_send_all(fd, msg, len, deadline, d);
  if (!e)
    e = ds_recv_all(fd, hb, sizeof hb, deadline, d);
  if (!e)
    e = ds_header_parse(hb, sizeof hb, h, d);
  if (!e) {
    size_t n = (size_t)h->size - DS_HEADER_SIZE;
    if (n > cap)
      e = ps_diag_set(d, PS_E_LIMIT, "diagnostic IPC", NOPOS,
                      "the answer to %s has %zu bytes, more than the %zu expected", what, n, cap);
    else if (n)
      e = ds_recv_all(fd, payload, n, deadline, d);
    if (!e)
      *got = n;
  }
  if (e == PS_E_OK) {
    ds_reply r;
    e = ds_reply_parse(h, payload, *got, &r, d);
    if (!e && !r.ok) {
      const char *name = ds_hresult_name(r.hresult);
      bool unknown = r.hresult == DS_E_UNKNOWN_COMMAND || r.hresult == DS_E_BAD_ENCODING ||
                     r.hresult == DS_E_UNKNOWN_MAGIC;
      t->last_hresult = r.hresult;
      e = ps_diag_set(d, unknown ? PS_E_UNSUPPORTED : PS_E_INVALID, "diagnostic IPC", NOPOS,
                      "%s refused: %s (0x%08x): %s", what, name ? name : "HRESULT", r.hresult,
                      ds_hresult_text(r.hresult));
    }
  }
  if (e != PS_E_OK && strncmp(d->detail, what, strlen(what)) != 0) { /* say which answer */
    char detail[sizeof d->detail];
    snprintf(detail, sizeof detail, "%s", d->detail);
    int room = (int)(sizeof d->detail - strlen(what) - 3);
    snprintf(d->detail, sizeof d->detail, "%s: %.*s", what, room > 0 ? room : 0, detail);
  }
  if (e == PS_E_OK && fd_out) {
    *fd_out = fd;
    return PS_E_OK;
  }
  close(fd);
  return e;
}

ps_err ds_ask_process_info(ds_target *t, uint64_t timeout_ms, ds_process_info *out, int *kind,
                       ps_diag *d) {
  static const uint8_t ids[4] = {0, DS_PROC_INFO, DS_PROC_INFO2, DS_PROC_INFO3};
  uint8_t msg[DS_HEADER_SIZE], payload[8192];
  for (int k = 3; k >= 1; k--) {
    ps_diag cd;
    ps_diag_clear(&cd);
    ds_header h;
    size_t got;
    ds_build_simple(msg, sizeof msg, DS_SET_PROCESS, ids[k]);
    ps_err e = ds_command(t, msg, sizeof msg, timeout_ms, &h, payload, sizeof payload, &got,
                          NULL, &cd);
    if (e == PS_E_UNSUPPORTED && k > 1)
      continue; /* an older runtime: the one before */
    if (!e)
      e = ds_process_info_parse(k, payload, got, out, &cd);
    if (e) {
      *d = cd;
      return e;
    }
    *kind = k;
    return PS_E_OK;
  }
  return ps_diag_set(d, PS_E_UNSUPPORTED, "diagnostic IPC", NOPOS, "no ProcessInfo answered");
}

ps_err ds_start_collect(ds_target *t, const ds_collect *c, int newest, uint64_t timeout_ms,
                        int *fd, uint64_t *session, int *version, ps_diag *d) {
  uint8_t msg[4096], payload[64];
  ps_diag last;
  ps_diag_clear(&last);
  if (newest < 2 || newest > 5)
    newest = 5;
  uint32_t last_hr = 0;
  for (int v = newest; v >= 2; v--) {
    ps_diag cd;
    ps_diag_clear(&cd);
    size_t len;
    ps_err e = ds_build_collect(v, c, msg, sizeof msg, &len, &cd);
    if (e == PS_E_UNSUPPORTED) { /* this version cannot say what c asks: the nearest it can */
      ds_collect near = *c;
      near.stackwalk = true;
      near.rundown_keyword = c->rundown_keyword ? DS_DEFAULT_RUNDOWN_KEYWORD : 0;
      ps_diag_clear(&cd);
      e = ds_build_collect(v, &near, msg, sizeof msg, &len, &cd);
    }
    if (e) {
      *d = cd;
      return e;
    }
    ds_header h;
    size_t got;
    e = ds_command(t, msg, len, timeout_ms, &h, payload, sizeof payload, &got, fd, &cd);
    if (e == PS_E_UNSUPPORTED) {
      last = cd;
      last_hr = t->last_hresult;
      continue;
    }
    if (!e)
      e = ds_session_parse(payload, got, session, &cd);
    if (e) {
      if (*fd >= 0)
        close(*fd);
      *fd = -1;
      *d = cd;
      return e;
    }
    *version = v;
    return PS_E_OK;
  }
  (void)last;
  return ps_diag_set(d, PS_E_UNSUPPORTED, "attach", NOPOS,
                     "the runtime refused CollectTracing %d to 2 (%s, 0x%08x): it is too old to "
                     "profile; .NET 5 or later is needed",
                     newest, ds_hresult_name(last_hr) ? ds_hresult_name(last_hr) : "?", last_hr);
}

ps_err ds_stop(ds_target *t, uint64_t session, uint64_t timeout_ms, ps_diag *d) {
  uint8_t msg[32], payload[64];
  ds_header h;
  size_t got;
  size_t len = ds_build_stop(msg, sizeof msg, session);
  return ds_command(t, msg, len, timeout_ms, &h, payload, sizeof payload, &got, NULL, d);
}

ps_err ds_resume(ds_target *t, uint64_t timeout_ms, ps_diag *d) {
  uint8_t msg[DS_HEADER_SIZE], payload[64];
  ds_header h;
  size_t got;
  ds_build_simple(msg, sizeof msg, DS_SET_PROCESS, DS_PROC_RESUME);
  return ds_command(t, msg, sizeof msg, timeout_ms, &h, payload, sizeof payload, &got, NULL, d);
}
