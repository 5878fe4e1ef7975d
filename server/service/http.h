/*
 * http.h - the HTTP server of `pdbsym serve`.  http.c is the only file of
 * server/service/ (the only room that may) that includes microhttpd.h;
 * cmd_serve.c uses the server through this header, which names no
 * libmicrohttpd type.
 *
 * Threads (docs/concurrency.md, "HTTP", has the whole picture):
 *   - http_threads event-loop threads (libmicrohttpd with epoll and a thread
 *     pool): accept, read requests, write answers, and answer the light routes
 *     (/health, /ready, /metrics) themselves.  They never wait on the engine.
 *   - request_workers threads: run /symbolicate, /symbolicate/v5 and /modules
 *     (parse, wait for modules, render).  Their connection is suspended
 *     meanwhile (MHD_suspend_connection) and resumed with the answer.  At most
 *     max_inflight such requests are admitted (503 beyond; max_inflight_per_ip
 *     from one address), counted once their body is in; they queue for a
 *     worker in a queue of max_inflight places.
 *   - one sweeper thread (conns.h): closes connections past their absolute
 *     read or write deadline, trace uploads under their rate or past their
 *     longest time, and connections answered early once their linger ends.
 * Connections: at most max_connections (and max_connections_per_ip); beyond,
 * the oldest connection that holds no complete request is closed to make room
 * (conns.h), so held-open connections cannot keep /health from answering.
 */
#ifndef PDBSYM_HTTP_H
#define PDBSYM_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "config.h"

typedef struct http_server http_server;

/* Starts listening on cfg->listen.  Returns NULL with a message in err on
 * failure.  a and cfg are borrowed and must outlive the server. */
http_server *http_start(api *a, const srv_config *cfg, char *err, size_t cap);

/* The libmicrohttpd version the service runs with, e.g. "0.9.75" (static). */
const char *http_mhd_version(void);

/* The port actually bound (useful with port 0). */
unsigned http_port(const http_server *s);

/* Stops accepting connections, waits up to grace_s seconds for the requests
 * in flight to finish, then closes every connection and frees the server. */
void http_stop(http_server *s, unsigned grace_s, uint64_t budget_ms);



#endif
