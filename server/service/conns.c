/*
 * conns.c - the connection table of the HTTP server (see conns.h).
 *
 * Layout: every live connection in CONN_READ is on two lists ordered by the
 * time it entered that phase (appending keeps the order: the clock only goes
 * forward), the table's and its address's; every one in CONN_WRITE on the
 * table's write list.  The oldest reader, the one eviction takes and the next
 * to reach its read deadline, is therefore a list head, and the sweeper only
 * ever looks at list heads - but for the timed list (connections in
 * CONN_STREAM, each with its own window and longest time, and in
 * CONN_LINGER, each with its own end), which it walks whole: it holds only
 * admitted trace uploads (max_trace_jobs) and the few connections answered
 * early in the last CONNS_LINGER_MS.  Addresses are kept in a small hash
 * table of slots that count their live connections.
 *
 * A streaming connection's window is a ring of per-second byte counts, one
 * per second of stream_window_ms and one for the second under way
 * (allocated when it enters CONN_STREAM):
 *
 *     win[sec % nwin] += bytes received in second sec (sec = now_ms / 1000)
 *     sum(win) >= stream_rate * stream_window_ms / 1000
 *
 * The sum covers the whole seconds of the window and the part of the current
 * one gone by, never less than the window: a client at the rate is never
 * judged on less time than it was given (with only the window's seconds, the
 * current one just begun, a 2 s window judged about 1 s of bytes).
 *
 * checked by the sweeper once the window has run whole since the stream
 * began or resumed.
 */
#include "conns.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#define IP_BUCKETS 1024

typedef struct ip_slot {
  unsigned char addr[16]; /* IPv6, IPv4 as ::ffff:a.b.c.d */
  unsigned live;          /* connections not shut down */
  unsigned refs;          /* entries pointing here, shut down or not, and conns_client holders */
  rm_client client;       /* the address's share of the request budget and slots */
  conn_entry *rhead, *rtail;
  struct ip_slot *next;
} ip_slot;

struct conn_entry {
  int fd;
  conn_phase phase;
  bool dead; /* shut down by us; stays registered until conns_remove */
  uint64_t since_ms;
  uint64_t due_ms;    /* CONN_STREAM: its longest time (0: none); CONN_LINGER: its end */
  /* CONN_STREAM: the window (NULL: no rate asked) */
  uint64_t *win;
  unsigned nwin;      /* seconds */
  uint64_t win_sec;   /* the second the newest count is for */
  uint64_t win_start_ms; /* the window began (stream start, or resume) */
  bool paused;
  ip_slot *ip;
  conn_entry *prev, *next;   /* read or write list of the table */
  conn_entry *iprev, *inext; /* read list of the address */
};

struct conns {
  conns_config cfg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t sweeper;
  bool stop;
  uint64_t wake_ms; /* when the sweeper wakes next (now_ms), unless signalled */
  conn_entry *rhead, *rtail, *whead, *wtail, *shead;
  ip_slot *buckets[IP_BUCKETS];
  conns_stats st;
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- addresses ----------------------------------------------------------- */

static void addr_key(const struct sockaddr *sa, socklen_t len, unsigned char out[16]) {
  memset(out, 0, 16);
  if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &in->sin_addr, 4);
  } else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
    memcpy(out, &in6->sin6_addr, 16);
  }
}

static unsigned addr_hash(const unsigned char a[16]) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < 16; i++)
    h = (h ^ a[i]) * 16777619u;
  return h % IP_BUCKETS;
}

static ip_slot *ip_get(conns *t, const unsigned char a[16]) {
  unsigned b = addr_hash(a);
  for (ip_slot *s = t->buckets[b]; s; s = s->next)
    if (!memcmp(s->addr, a, 16))
      return s;
  ip_slot *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  memcpy(s->addr, a, 16);
  s->next = t->buckets[b];
  t->buckets[b] = s;
  return s;
}

static void ip_put(conns *t, ip_slot *s) {
  if (--s->refs)
    return;
  ip_slot **pp = &t->buckets[addr_hash(s->addr)];
  while (*pp != s)
    pp = &(*pp)->next;
  *pp = s->next;
  free(s);
}

/* ---- phase lists ----------------------------------------------------------- */

static void unlink_phase(conns *t, conn_entry *e) {
  if (e->phase == CONN_READ) {
    if (e->prev)
      e->prev->next = e->next;
    else
      t->rhead = e->next;
    if (e->next)
      e->next->prev = e->prev;
    else
      t->rtail = e->prev;
    if (e->iprev)
      e->iprev->inext = e->inext;
    else
      e->ip->rhead = e->inext;
    if (e->inext)
      e->inext->iprev = e->iprev;
    else
      e->ip->rtail = e->iprev;
  } else if (e->phase == CONN_WRITE) {
    if (e->prev)
      e->prev->next = e->next;
    else
      t->whead = e->next;
    if (e->next)
      e->next->prev = e->prev;
    else
      t->wtail = e->prev;
    t->st.writing--;
  } else if (e->phase == CONN_STREAM || e->phase == CONN_LINGER) {
    if (e->prev)
      e->prev->next = e->next;
    else
      t->shead = e->next;
    if (e->next)
      e->next->prev = e->prev;
    if (e->phase == CONN_STREAM)
      t->st.streaming--;
    free(e->win);
    e->win = NULL;
  } else {
    t->st.busy--;
  }
  e->prev = e->next = e->iprev = e->inext = NULL;
}

/* A deadline due_ms (0: none) joined the lists: the sweeper is woken only
 * when it would sleep past it.  It wakes at least once a second anyway and
 * the deadlines are whole seconds away, so a request (its connection's
 * phases READ, BUSY, WRITE, READ) no longer wakes it at each phase. */
static void wake_for(conns *t, uint64_t due_ms) {
  if (due_ms && due_ms < t->wake_ms)
    pthread_cond_signal(&t->cv);
}

/* The window of a streaming connection, advanced to second sec: the counts
 * of seconds that left it are zeroed. */
static void win_advance(conn_entry *e, uint64_t sec) {
  if (sec <= e->win_sec)
    return;
  uint64_t n = sec - e->win_sec;
  if (n > e->nwin)
    n = e->nwin;
  for (uint64_t i = 1; i <= n; i++)
    e->win[(e->win_sec + i) % e->nwin] = 0;
  e->win_sec = sec;
}

static void win_restart(conn_entry *e, uint64_t now) {
  if (!e->win)
    return;
  memset(e->win, 0, e->nwin * sizeof *e->win);
  e->win_sec = now / 1000;
  e->win_start_ms = now;
}

static void link_phase(conns *t, conn_entry *e, conn_phase p) {
  e->phase = p;
  e->since_ms = now_ms();
  if (p == CONN_STREAM || p == CONN_LINGER) {
    /* unordered: each has its own deadline */
    e->prev = NULL;
    e->next = t->shead;
    if (t->shead)
      t->shead->prev = e;
    t->shead = e;
    e->paused = false;
    if (p == CONN_LINGER) {
      e->due_ms = e->since_ms + CONNS_LINGER_MS;
    } else {
      t->st.streaming++;
      e->due_ms = t->cfg.stream_max_ms ? e->since_ms + t->cfg.stream_max_ms : 0;
      uint64_t w = (t->cfg.stream_window_ms + 999) / 1000;
      if (t->cfg.stream_rate && w) {
        e->nwin = (unsigned)(w < CONNS_WINDOW_MAX_S ? w : CONNS_WINDOW_MAX_S) + 1;
        e->win = calloc(e->nwin, sizeof *e->win); /* NULL: no rate asked of it */
        win_restart(e, e->since_ms);
      }
    }
    wake_for(t, e->due_ms);
  } else if (p == CONN_READ) {
    bool was_empty = !t->rhead;
    e->prev = t->rtail;
    if (t->rtail)
      t->rtail->next = e;
    else
      t->rhead = e;
    t->rtail = e;
    e->iprev = e->ip->rtail;
    if (e->ip->rtail)
      e->ip->rtail->inext = e;
    else
      e->ip->rhead = e;
    e->ip->rtail = e;
    if (was_empty)
      wake_for(t, t->cfg.read_timeout_ms ? e->since_ms + t->cfg.read_timeout_ms : 0);
  } else if (p == CONN_WRITE) {
    bool was_empty = !t->whead;
    e->prev = t->wtail;
    if (t->wtail)
      t->wtail->next = e;
    else
      t->whead = e;
    t->wtail = e;
    t->st.writing++;
    if (was_empty)
      wake_for(t, t->cfg.write_timeout_ms ? e->since_ms + t->cfg.write_timeout_ms : 0);
  } else {
    t->st.busy++;
  }
}

/* Shuts e down: it no longer counts against any limit. */
static void kill_locked(conns *t, conn_entry *e, uint64_t *counter) {
  if (e->dead)
    return;
  shutdown(e->fd, SHUT_RDWR);
  unlink_phase(t, e);
  e->dead = true;
  e->ip->live--;
  t->st.open--;
  if (counter)
    (*counter)++;
}

/* The connection to evict: the oldest reader, passing over (among the 16
 * oldest) those with bytes waiting in their socket - a request that has
 * arrived and not been read yet, such as a health check's on a busy machine,
 * is not taken for an idle connection.  per_ip: walk the address's list. */
#define EVICT_LOOK 16
static conn_entry *victim(conn_entry *oldest, bool per_ip) {
  conn_entry *e = oldest;
  for (int i = 0; e && i < EVICT_LOOK; i++, e = per_ip ? e->inext : e->next) {
    int pending = 0;
    if (ioctl(e->fd, FIONREAD, &pending) != 0 || pending == 0)
      return e;
  }
  return oldest;
}

/* ---- the sweeper ------------------------------------------------------------ */

static void *sweep_main(void *arg) {
  conns *t = arg;
  pthread_mutex_lock(&t->mu);
  while (!t->stop) {
    uint64_t now = now_ms();
    uint64_t rt = t->cfg.read_timeout_ms, wt = t->cfg.write_timeout_ms;
    while (rt && t->rhead && t->rhead->since_ms + rt <= now)
      kill_locked(t, t->rhead, &t->st.read_expired);
    while (wt && t->whead && t->whead->since_ms + wt <= now)
      kill_locked(t, t->whead, &t->st.write_expired);
    uint64_t next = now + 1000;
    for (conn_entry *e = t->shead, *n; e; e = n) {
      n = e->next;
      if (e->due_ms && e->due_ms <= now) {
        kill_locked(t, e, e->phase == CONN_STREAM ? &t->st.slow_expired : NULL);
        continue;
      }
      if (e->due_ms && e->due_ms < next)
        next = e->due_ms;
      if (e->phase != CONN_STREAM || !e->win || e->paused ||
          now - e->win_start_ms < t->cfg.stream_window_ms)
        continue;
      win_advance(e, now / 1000);
      uint64_t sum = 0;
      for (unsigned i = 0; i < e->nwin; i++)
        sum += e->win[i];
      /* the window's whole seconds and the current one begun: at least the
       * rate over the window */
      if (sum < t->cfg.stream_rate * t->cfg.stream_window_ms / 1000)
        kill_locked(t, e, &t->st.slow_expired);
    }
    if (rt && t->rhead && t->rhead->since_ms + rt < next)
      next = t->rhead->since_ms + rt;
    if (wt && t->whead && t->whead->since_ms + wt < next)
      next = t->whead->since_ms + wt;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t wait_ms = next > now ? next - now : 0;
    t->wake_ms = now + wait_ms; /* (it wakes 1 ms after: early enough for wake_for) */
    ts.tv_sec += (time_t)(wait_ms / 1000);
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L + 1000000L; /* +1 ms: wake after, not before */
    while (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    int rc = pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    (void)rc; /* a timeout, a signal or a spurious wake-up: look again */
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* ---- the interface ------------------------------------------------------------ */

conns *conns_open(const conns_config *cfg) {
  if (!cfg || !cfg->max_total)
    return NULL;
  conns *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->cfg = *cfg;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&t->sweeper, NULL, sweep_main, t) != 0) {
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
  }
  return t;
}

void conns_close(conns *t) {
  if (!t)
    return;
  pthread_mutex_lock(&t->mu);
  t->stop = true;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->sweeper, NULL);
  /* entries still registered: their owner is gone without telling us */
  for (unsigned b = 0; b < IP_BUCKETS; b++) {
    ip_slot *s = t->buckets[b];
    while (s) {
      ip_slot *n = s->next;
      free(s);
      s = n;
    }
  }
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

conn_entry *conns_add(conns *t, int fd, const struct sockaddr *addr, socklen_t addrlen) {
  unsigned char key[16];
  addr_key(addr, addrlen, key);
  conn_entry *e = calloc(1, sizeof *e);
  pthread_mutex_lock(&t->mu);
  ip_slot *ip = e ? ip_get(t, key) : NULL;
  if (!ip) {
    pthread_mutex_unlock(&t->mu);
    free(e);
    shutdown(fd, SHUT_RDWR);
    return NULL;
  }
  e->fd = fd;
  e->ip = ip;
  ip->refs++;
  bool refuse = false;
  if (t->cfg.max_per_ip && ip->live >= t->cfg.max_per_ip) {
    if (ip->rhead)
      kill_locked(t, victim(ip->rhead, true), &t->st.evicted);
    else
      refuse = true;
  }
  if (!refuse && t->st.open >= t->cfg.max_total) {
    if (t->rhead)
      kill_locked(t, victim(t->rhead, false), &t->st.evicted);
    else
      refuse = true;
  }
  if (refuse) {
    /* registered as dead, so that conns_remove finds it */
    e->dead = true;
    e->phase = CONN_BUSY;
    shutdown(fd, SHUT_RDWR);
    t->st.refused++;
  } else {
    ip->live++;
    t->st.open++;
    link_phase(t, e, CONN_READ);
  }
  pthread_mutex_unlock(&t->mu);
  return e;
}

void conns_remove(conns *t, conn_entry *e) {
  if (!e)
    return;
  pthread_mutex_lock(&t->mu);
  if (!e->dead) {
    unlink_phase(t, e);
    e->ip->live--;
    t->st.open--;
  }
  ip_put(t, e->ip);
  pthread_mutex_unlock(&t->mu);
  free(e->win);
  free(e);
}

void conns_set_phase(conns *t, conn_entry *e, conn_phase p) {
  if (!e)
    return;
  pthread_mutex_lock(&t->mu);
  if (!e->dead) {
    unlink_phase(t, e);
    link_phase(t, e, p);
  }
  pthread_mutex_unlock(&t->mu);
}

void conns_stream_bytes(conns *t, conn_entry *e, uint64_t n) {
  if (!e)
    return;
  pthread_mutex_lock(&t->mu);
  if (!e->dead && e->phase == CONN_STREAM && e->win) {
    uint64_t sec = now_ms() / 1000;
    win_advance(e, sec);
    e->win[sec % e->nwin] += n;
  }
  pthread_mutex_unlock(&t->mu);
}

void conns_stream_pause(conns *t, conn_entry *e, bool paused) {
  if (!e)
    return;
  pthread_mutex_lock(&t->mu);
  if (!e->dead && e->phase == CONN_STREAM && e->paused != paused) {
    e->paused = paused;
    if (!paused)
      win_restart(e, now_ms());
  }
  pthread_mutex_unlock(&t->mu);
}

bool conns_answer(conns *t, conn_entry *e, const void *data, size_t n) {
  if (!e)
    return false;
  bool sent = false;
  pthread_mutex_lock(&t->mu);
  if (!e->dead) {
    /* the socket's send buffer is empty (nothing was answered on it yet), so
     * a few hundred bytes go at once; MSG_DONTWAIT all the same */
    ssize_t w = send(e->fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    sent = w == (ssize_t)n;
    shutdown(e->fd, SHUT_WR);
    unlink_phase(t, e);
    link_phase(t, e, CONN_LINGER);
    t->st.answered_early++;
  }
  pthread_mutex_unlock(&t->mu);
  return sent;
}

rm_client *conns_client(conns *t, conn_entry *e) {
  if (!e)
    return NULL;
  pthread_mutex_lock(&t->mu);
  e->ip->refs++;
  pthread_mutex_unlock(&t->mu);
  return &e->ip->client;
}

void conns_client_put(conns *t, rm_client *c) {
  if (!c)
    return;
  ip_slot *s = (ip_slot *)(void *)((char *)c - offsetof(ip_slot, client));
  pthread_mutex_lock(&t->mu);
  ip_put(t, s);
  pthread_mutex_unlock(&t->mu);
}

void conns_kill(conns *t, conn_entry *e) {
  if (!e)
    return;
  pthread_mutex_lock(&t->mu);
  kill_locked(t, e, NULL);
  pthread_mutex_unlock(&t->mu);
}

void conns_get_stats(conns *t, conns_stats *out) {
  pthread_mutex_lock(&t->mu);
  *out = t->st;
  pthread_mutex_unlock(&t->mu);
}
