/*
 * port.c - a diagnostic port: a Unix socket runtimes started with
 * DOTNET_DiagnosticPorts=PATH[,nosuspend] dial into (see profile.h).
 *
 * A runtime connects, sends its 34-byte advertise (instance cookie, pid) and
 * waits for one command on that connection; after each command it connects
 * again.  So the port keeps, per runtime (by cookie), the connections waiting
 * for a command, and a session takes one for each command it sends
 * (prof_port_take, which waits for the runtime to dial again).  One thread
 * accepts and reads advertises; a peer that sends anything else, or nothing
 * within the advertise deadline, is dropped without disturbing the others.
 *
 * Bounds (fixed): connections that have not advertised yet, PENDING_MAX
 * (the oldest closed past it); runtimes known, RUNTIMES_MAX (the one
 * idle longest forgotten past it); idle connections per runtime, IDLE_MAX
 * (the oldest closed past it).
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "dsock.h"
#include "profile.h"

#define NOPOS ((size_t)-1)
#define PENDING_MAX 64
#define RUNTIMES_MAX 256
#define IDLE_MAX 4

typedef struct {
  int fd;
  uint64_t deadline;
  uint8_t buf[DS_ADVERTISE_SIZE];
  size_t got;
} pending;

typedef struct {
  bool used;
  uint8_t cookie[16];
  uint64_t pid;
  int idle[IDLE_MAX]; /* connections waiting for a command, oldest first */
  int nidle;
  bool announced;     /* handed to prof_port_next once */
  uint64_t last_ms;
} runtime;

struct prof_port {
  char path[108];
  int lfd;
  int wake[2]; /* the thread's wake-up pipe (close) */
  uint64_t advertise_ms;
  pthread_t th;
  bool started, stopping;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pending pend[PENDING_MAX];
  runtime rt[RUNTIMES_MAX];
  uint64_t dropped; /* peers dropped: garbage, silence, too many */
};

static runtime *find_rt(prof_port *p, const uint8_t cookie[16]) {
  for (int i = 0; i < RUNTIMES_MAX; i++)
    if (p->rt[i].used && !memcmp(p->rt[i].cookie, cookie, 16))
      return &p->rt[i];
  return NULL;
}

static void drop_rt(runtime *r) {
  for (int i = 0; i < r->nidle; i++)
    close(r->idle[i]);
  memset(r, 0, sizeof *r);
}

/* an advertised connection: kept as the runtime's (mu held) */
static void adopt(prof_port *p, int fd, const ds_advertise *a) {
  runtime *r = find_rt(p, a->cookie);
  if (!r) {
    runtime *free_rt = NULL, *oldest = NULL;
    for (int i = 0; i < RUNTIMES_MAX; i++) {
      if (!p->rt[i].used) {
        if (!free_rt)
          free_rt = &p->rt[i];
      } else if (!oldest || p->rt[i].last_ms < oldest->last_ms) {
        oldest = &p->rt[i];
      }
    }
    if (!free_rt) {
      drop_rt(oldest);
      free_rt = oldest;
    }
    r = free_rt;
    r->used = true;
    memcpy(r->cookie, a->cookie, 16);
    r->pid = a->pid;
  }
  if (r->nidle == IDLE_MAX) { /* the oldest is the one most likely dead */
    close(r->idle[0]);
    memmove(r->idle, r->idle + 1, (IDLE_MAX - 1) * sizeof r->idle[0]);
    r->nidle--;
  }
  r->idle[r->nidle++] = fd;
  r->last_ms = ds_now_ms();
  pthread_cond_broadcast(&p->cv);
}

/* idle connections the runtime closed (it exited): dropped (mu held) */
static void reap_idle(prof_port *p) {
  for (int i = 0; i < RUNTIMES_MAX; i++) {
    runtime *r = &p->rt[i];
    if (!r->used)
      continue;
    int n = 0;
    for (int k = 0; k < r->nidle; k++) {
      char c;
      ssize_t got = recv(r->idle[k], &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
        close(r->idle[k]); /* closed by the runtime */
      else
        r->idle[n++] = r->idle[k];
    }
    r->nidle = n;
  }
}

static void *port_main(void *arg) {
  prof_port *p = arg;
  for (;;) {
    struct pollfd pf[2 + PENDING_MAX];
    int n = 0;
    pf[n++] = (struct pollfd){p->lfd, POLLIN, 0};
    pf[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
    int slot_of[PENDING_MAX];
    uint64_t now = ds_now_ms(), next = now + 1000;
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    for (int i = 0; i < PENDING_MAX; i++) {
      if (p->pend[i].fd < 0)
        continue;
      if (p->pend[i].deadline <= now) { /* silence: dropped */
        close(p->pend[i].fd);
        p->pend[i].fd = -1;
        p->dropped++;
        continue;
      }
      if (p->pend[i].deadline < next)
        next = p->pend[i].deadline;
      slot_of[n - 2] = i;
      pf[n++] = (struct pollfd){p->pend[i].fd, POLLIN, 0};
    }
    reap_idle(p);
    pthread_mutex_unlock(&p->mu);
    int r = poll(pf, (nfds_t)n, (int)(next > now ? next - now : 0));
    if (r < 0 && errno != EINTR)
      break;
    if (r <= 0)
      continue;
    if (pf[1].revents)
      continue; /* woken to stop: looked at above */
    pthread_mutex_lock(&p->mu);
    for (int k = 2; k < n; k++) {
      if (!pf[k].revents)
        continue;
      pending *q = &p->pend[slot_of[k - 2]];
      ssize_t got = recv(q->fd, q->buf + q->got, sizeof q->buf - q->got, MSG_DONTWAIT);
      if (got > 0)
        q->got += (size_t)got;
      bool done = q->got == sizeof q->buf;
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) || done) {
        ds_advertise a;
        ps_diag d;
        ps_diag_clear(&d);
        if (done && ds_advertise_parse(q->buf, q->got, &a, &d) == PS_E_OK) {
          adopt(p, q->fd, &a);
        } else { /* garbage or a peer that hung up: dropped */
          close(q->fd);
          p->dropped++;
        }
        q->fd = -1;
      }
    }
    if (pf[0].revents) {
      int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        pending *slot = NULL, *oldest = NULL;
        for (int i = 0; i < PENDING_MAX; i++) {
          if (p->pend[i].fd < 0) {
            if (!slot)
              slot = &p->pend[i];
          } else if (!oldest || p->pend[i].deadline < oldest->deadline) {
            oldest = &p->pend[i];
          }
        }
        if (!slot) { /* a flood of silent peers: the oldest goes */
          close(oldest->fd);
          p->dropped++;
          slot = oldest;
        }
        slot->fd = fd;
        slot->got = 0;
        slot->deadline = ds_now_ms() + p->advertise_ms;
      }
    }
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

ps_err prof_port_open(const char *path, uint64_t advertise_ms, prof_port **out, ps_diag *d) {
  *out = NULL;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (!path || !*path || strlen(path) >= sizeof sa.sun_path)
    return ps_diag_set(d, PS_E_INVALID, "diagnostic port", NOPOS,
                       "diagnostic_port: a socket path of 1 to %zu bytes", sizeof sa.sun_path - 1);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  struct stat st;
  if (lstat(path, &st) == 0) { /* a socket left by an earlier run: replaced; anything else refused */
    if (!S_ISSOCK(st.st_mode))
      return ps_diag_set(d, PS_E_INVALID, "diagnostic port", NOPOS,
                         "%s exists and is not a socket", path);
    unlink(path);
  }
  prof_port *p = calloc(1, sizeof *p);
  if (!p)
    return ps_diag_set(d, PS_E_NOMEM, "diagnostic port", NOPOS, "out of memory");
  snprintf(p->path, sizeof p->path, "%s", path);
  p->advertise_ms = advertise_ms ? advertise_ms : 5000;
  p->wake[0] = p->wake[1] = -1;
  for (int i = 0; i < PENDING_MAX; i++)
    p->pend[i].fd = -1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ps_err e = PS_E_OK;
  mode_t old = umask(0177); /* the socket mode 0600: only this user's runtimes dial it */
  if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(p->lfd, 64) != 0)
    e = ps_diag_set(d, PS_E_IO, "diagnostic port", NOPOS, "cannot listen on %s: %s", path,
                    strerror(errno));
  umask(old);
  if (!e && pipe2(p->wake, O_CLOEXEC) != 0)
    e = ps_diag_set(d, PS_E_IO, "diagnostic port", NOPOS, "pipe: %s", strerror(errno));
  if (!e) {
    if (pthread_create(&p->th, NULL, port_main, p) != 0)
      e = ps_diag_set(d, PS_E_NOMEM, "diagnostic port", NOPOS, "no thread for the port");
    else
      p->started = true;
  }
  if (e) {
    prof_port_close(p);
    return e;
  }
  *out = p;
  return PS_E_OK;
}

void prof_port_close(prof_port *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (p->wake[1] >= 0 && write(p->wake[1], "x", 1) < 0) {
    /* the thread looks at stopping within a second anyway */
  }
  if (p->started)
    pthread_join(p->th, NULL);
  for (int i = 0; i < PENDING_MAX; i++)
    if (p->pend[i].fd >= 0)
      close(p->pend[i].fd);
  for (int i = 0; i < RUNTIMES_MAX; i++)
    if (p->rt[i].used)
      drop_rt(&p->rt[i]);
  if (p->lfd >= 0) {
    close(p->lfd);
    unlink(p->path);
  }
  if (p->wake[0] >= 0)
    close(p->wake[0]);
  if (p->wake[1] >= 0)
    close(p->wake[1]);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

const char *prof_port_path(const prof_port *p) { return p->path; }

/* (p->mu held) waits for a change, at most a second and not past
 * deadline_ms; false when the port is stopping or the deadline has passed */
static bool wait_a_while(prof_port *p, uint64_t deadline_ms) {
  uint64_t now = ds_now_ms();
  if (p->stopping || now >= deadline_ms)
    return false;
  uint64_t wait = deadline_ms - now;
  if (wait > 1000)
    wait = 1000;
  struct timespec ts = deadline_after_ms(wait);
  pthread_cond_timedwait(&p->cv, &p->mu, &ts);
  return true;
}

bool prof_port_next(prof_port *p, uint64_t deadline_ms, uint8_t cookie[16], uint64_t *pid) {
  pthread_mutex_lock(&p->mu);
  for (;;) {
    for (int i = 0; i < RUNTIMES_MAX; i++) {
      runtime *r = &p->rt[i];
      if (r->used && !r->announced && r->nidle > 0) {
        r->announced = true;
        memcpy(cookie, r->cookie, 16);
        *pid = r->pid;
        pthread_mutex_unlock(&p->mu);
        return true;
      }
    }
    if (!wait_a_while(p, deadline_ms))
      break;
  }
  pthread_mutex_unlock(&p->mu);
  return false;
}

void prof_port_wake(prof_port *p) {
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

int prof_port_take(prof_port *p, const uint8_t cookie[16], uint64_t deadline_ms, ps_diag *d) {
  pthread_mutex_lock(&p->mu);
  for (;;) {
    runtime *r = find_rt(p, cookie);
    while (r && r->nidle > 0) { /* the newest first: the oldest may be dead */
      int fd = r->idle[--r->nidle];
      char c;
      ssize_t got = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        close(fd);
        continue;
      }
      pthread_mutex_unlock(&p->mu);
      return fd;
    }
    if (!wait_a_while(p, deadline_ms))
      break;
  }
  pthread_mutex_unlock(&p->mu);
  ps_diag_set(d, PS_E_TIMEOUT, "diagnostic port", NOPOS,
              "the runtime did not dial %s again in time (it exited?)", p->path);
  return -1;
}

void prof_port_forget(prof_port *p, const uint8_t cookie[16]) {
  pthread_mutex_lock(&p->mu);
  runtime *r = find_rt(p, cookie);
  if (r)
    drop_rt(r);
  pthread_mutex_unlock(&p->mu);
}

uint64_t prof_port_dropped(prof_port *p) {
  pthread_mutex_lock(&p->mu);
  uint64_t n = p->dropped;
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* ---- a target reached through the port ---- */

typedef struct {
  prof_port *port;
  uint8_t cookie[16];
} port_ctx;

static int dial_port(ds_target *t, uint64_t deadline_ms, ps_diag *d) {
  port_ctx *c = t->dial_ctx;
  return prof_port_take(c->port, c->cookie, deadline_ms, d);
}

ps_err prof_port_target(prof_port *p, const uint8_t cookie[16], uint64_t pid, ds_target *t,
                        ps_diag *d) {
  memset(t, 0, sizeof *t);
  t->dir_fd = -1;
  port_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return ps_diag_set(d, PS_E_NOMEM, "diagnostic port", NOPOS, "out of memory");
  c->port = p;
  memcpy(c->cookie, cookie, 16);
  t->dial = dial_port;
  t->dial_ctx = c;
  t->owns_ctx = true;
  t->pid = pid <= 0x3fffffff ? (int)pid : 0;
  t->ns_pid = t->pid;
  t->uid = (uid_t)-1;
  t->via_port = true;
  snprintf(t->comm, sizeof t->comm, "runtime %d", t->pid); /* ProcessInfo names it */
  snprintf(t->sock_dir, sizeof t->sock_dir, "%s", p->path);
  return PS_E_OK;
}
