/*
 * conns.h - the HTTP server's connection table: how many connections are
 * open, from which address, in which phase, and until when each phase may
 * last.  It knows sockets, not HTTP: http.c tells it when a connection opens,
 * changes phase and closes (from libmicrohttpd's callbacks), and it enforces
 *
 *   - absolute deadlines, not idle timers: a connection in CONN_READ (from
 *     accept, or from the end of the previous answer on a kept-alive
 *     connection, until its request is complete, headers and body) is closed
 *     when read_timeout_ms have passed, however steadily it drips bytes; one
 *     in CONN_WRITE (answer queued, not yet sent) when write_timeout_ms have;
 *     one in CONN_STREAM (an admitted request whose long body is consumed as
 *     it arrives, POST /traces) when the bytes it sent in the last
 *     stream_window_ms fall under stream_rate, or when it has streamed for
 *     stream_max_ms; one in CONN_LINGER (answered before its body was read)
 *     CONNS_LINGER_MS after its answer;
 *   - limits: at most max_total connections, at most max_per_ip from one
 *     address.  A connection that arrives beyond a limit evicts the oldest
 *     connection still in CONN_READ (of that address, for the per-address
 *     limit): such a connection holds no request the server works on, only a
 *     slot (one with bytes waiting unread in its socket - a request that has
 *     arrived - is passed over for the next oldest).  When every connection is busy (CONN_BUSY, CONN_WRITE), the new one
 *     is refused instead.  So held-open or dripping connections, however many
 *     and from whatever address, cannot keep a client whose request is
 *     complete (a health check) from being served.
 *
 * Closing means shutdown(2) of the socket, which the socket's owner
 * (libmicrohttpd's event loop) sees at once as the peer's end; the socket
 * itself is closed by its owner, after conns_remove.  Deadlines are enforced
 * by one sweeper thread that sleeps until the earliest deadline.
 *
 * Thread safety: every function may be called from any thread; one mutex.
 */
#ifndef PDBSYM_CONNS_H
#define PDBSYM_CONNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "reqmem.h"

typedef struct conns conns;
typedef struct conn_entry conn_entry;

typedef enum {
  CONN_READ = 0, /* waiting for or reading a request: deadline, evictable */
  CONN_BUSY,     /* request complete, being answered: no deadline here */
  CONN_WRITE,    /* answer queued: deadline, not evictable */
  CONN_STREAM,   /* admitted, its body streaming in: a rate over a window and a
                    longest time, not evictable */
  CONN_LINGER,   /* answered early (conns_answer): its unread body is read and
                    dropped for a short while, then it is closed */
} conn_phase;

typedef struct {
  unsigned max_total;        /* > 0 */
  unsigned max_per_ip;       /* 0: no per-address limit (max_total applies) */
  uint64_t read_timeout_ms;  /* 0: no read deadline */
  uint64_t write_timeout_ms; /* 0: no write deadline */
  /* CONN_STREAM: at least stream_rate bytes/s over every stream_window_ms
   * (a sliding window, checked once the connection has streamed that long;
   * not while paused), and at most stream_max_ms in all.  0: no floor / no
   * longest time.  stream_window_ms is at most CONNS_WINDOW_MAX_S seconds. */
  uint64_t stream_rate;
  uint64_t stream_window_ms;
  uint64_t stream_max_ms;
} conns_config;

#define CONNS_WINDOW_MAX_S 3600
/* How long a connection answered early (conns_answer) may go on sending the
 * body nobody reads, before it is closed (fixed): long enough for a client
 * that sends and reads at once to read its answer before the close. */
#define CONNS_LINGER_MS 2000

typedef struct {
  unsigned open;          /* registered, not yet shut down by us */
  unsigned busy, writing; /* of those, in CONN_BUSY / CONN_WRITE */
  unsigned streaming;     /* of those, in CONN_STREAM */
  uint64_t evicted;       /* shut down to make room for a newer connection */
  uint64_t refused;       /* shut down on arrival: every slot was busy */
  uint64_t read_expired;  /* shut down at the read deadline */
  uint64_t write_expired; /* shut down at the write deadline */
  uint64_t slow_expired;  /* CONN_STREAM shut down under its rate or past its longest time */
  uint64_t answered_early;/* answered before their body was read (conns_answer) */
} conns_stats;

/* Starts the sweeper thread.  NULL on failure (out of memory, no thread). */
conns *conns_open(const conns_config *cfg);
/* Stops the sweeper and frees the table; entries still registered are freed
 * too (call it after the server that owns the sockets has stopped). */
void conns_close(conns *t);

/* A new connection on socket fd from addr: registers it in CONN_READ and
 * applies the limits, which may shut down an older connection or this one.
 * Returns the entry to pass to the other calls (NULL when out of memory: the
 * socket has then been shut down). */
conn_entry *conns_add(conns *t, int fd, const struct sockaddr *addr, socklen_t addrlen);
/* The connection's owner is closing it; e is freed.  e may be NULL. */
void conns_remove(conns *t, conn_entry *e);
/* Moves e to another phase; entering CONN_READ or CONN_WRITE starts that
 * phase's deadline now; entering CONN_STREAM starts its window and its
 * longest time now.  e may be NULL. */
void conns_set_phase(conns *t, conn_entry *e, conn_phase p);
/* A connection in CONN_STREAM received n more body bytes (they count in the
 * window's second of now).  e may be NULL. */
void conns_stream_bytes(conns *t, conn_entry *e, uint64_t n);
/* A connection in CONN_STREAM is not read for a while because the server is
 * behind (paused true), or is read again (false): no rate is asked of it while
 * paused, and its window starts again when it resumes.  e may be NULL. */
void conns_stream_pause(conns *t, conn_entry *e, bool paused);
/* Answers e before its request was read whole: writes the n bytes of a
 * complete HTTP response (a few hundred bytes: they fit in the socket's send
 * buffer) and ends the sending side (FIN after them), then e is in
 * CONN_LINGER: what the client still sends is read and dropped by its owner
 * until CONNS_LINGER_MS have passed, then the socket is shut down.  From any
 * thread, as long as the owner has not removed e.  false (nothing written)
 * when e was shut down already.  e may be NULL. */
bool conns_answer(conns *t, conn_entry *e, const void *data, size_t n);
/* The share of e's address (reqmem.h: the memory its requests reserve, the
 * slots they hold), one per address, kept while any of its connections is
 * open or any caller holds it: every conns_client is ended by one
 * conns_client_put (from any thread, even after e is removed).  NULL when e
 * is NULL. */
rm_client *conns_client(conns *t, conn_entry *e);
void conns_client_put(conns *t, rm_client *c);

/* Shuts e's socket down now (the owner closes it). */
void conns_kill(conns *t, conn_entry *e);

void conns_get_stats(conns *t, conns_stats *out);

#endif
