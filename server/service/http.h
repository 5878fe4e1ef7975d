/*
 * http.h - the HTTP server of `pdbsym serve`.  http.c is the only file of
 * server/service/ (the only room that may) that includes microhttpd.h;
 * cmd_serve.c uses the server through this header, which names no
 * libmicrohttpd type.
 *
 * Thread model: libmicrohttpd with one thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION).  A request may block in the engine while a
 * module downloads; with a thread per connection that blocks only its own
 * connection, never a neighbour's.  The number of such requests is capped by
 * max_inflight (503 beyond it), connections by max_connections, the wait of
 * each request by its timeout (then `pending`), and idle or half-sent
 * connections by connection_timeout.  Downloads themselves run in the
 * engine, one per module, however many requests wait for it.
 */
#ifndef PDBSYM_HTTP_H
#define PDBSYM_HTTP_H

#include <stdbool.h>

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
void http_stop(http_server *s, unsigned grace_s);

#endif
