/*
 * reqmem.h - the memory budget of the HTTP requests in flight
 * (`request_memory_max`): one process-wide count of the bytes that requests
 * hold in buffers whose size grows with the request - bodies, the arrays a
 * parsed request fills, answers being built and being sent.  A buffer grows
 * only after its growth is reserved; a reservation the budget cannot take
 * fails at once (the caller answers 503 with Retry-After), so the sum of
 * those buffers never passes the budget.  Fixed per-request costs (a few KiB
 * of bookkeeping, libmicrohttpd's per-connection pool, thread stacks) are not
 * counted here; they are bounded by the connection and thread limits.
 *
 * A request is admitted with a grant: a share of the budget reserved once
 * its body is in (before, only RM_DOOR_BYTES of the body's buffer, then the
 * body as it arrives), sized from its body (RM_GRANT_FACTOR times the body:
 * the body, the arrays parsed from it and its answer fit in that for the
 * usual frame), so that requests already admitted can finish instead of all
 * failing halfway when many arrive at once.  Its buffers draw on the grant first and on the
 * budget for what passes it.  A grant is used by one thread at a time.
 *
 * Thread safety: rm_* functions on the budget may be called from any thread
 * (atomics); a grant and the buffers drawing on it belong to one request.
 */
#ifndef PDBSYM_REQMEM_H
#define PDBSYM_REQMEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Grant per byte of body: the answer of a /symbolicate frame with symbols
 * is about 7 times its request text, and the parsed arrays about 1. */
#define RM_GRANT_FACTOR 8

/* What a request reserves when its headers are in, before any of its body
 * (fixed): its body's buffer up to this much, the rest as the body comes. */
#define RM_DOOR_BYTES (16 * 1024)

/* Sets the budget; 0 means no limit (the counts are still kept). */
void rm_set_max(uint64_t max_bytes);
uint64_t rm_max(void);

/* Takes n bytes of the budget; false (nothing taken) when that would pass it. */
bool rm_reserve(uint64_t n);
/* Gives n bytes back. */
void rm_release(uint64_t n);

uint64_t rm_used(void);    /* bytes reserved now */
uint64_t rm_peak(void);    /* most bytes reserved at once since start */
uint64_t rm_refused(void); /* reservations refused since start */

/* A client address's share: what the grants of its requests hold together
 * (at most rm_client_max() bytes), and its requests holding a max_inflight
 * slot (counted by http.c).  One per address, kept by the connection table
 * (conns_client). */
typedef struct {
  _Atomic uint64_t bytes;
  _Atomic uint32_t slots;
} rm_client;

/* Bytes one client address's requests may reserve together
 * (request_memory_per_ip); 0: no cap but the budget. */
void rm_set_client_max(uint64_t max_bytes);
uint64_t rm_client_max(void);
uint64_t rm_client_refused(void); /* reservations refused for the client's cap */

/* A request's share of the budget.  Zero-initialise (then set client). */
typedef struct {
  uint64_t size; /* reserved in the budget for this request */
  uint64_t used; /* of which its buffers hold now */
  rm_client *client; /* borrowed: its address's share, counted too; NULL: none */
  bool by_client;    /* the last refusal was the client's cap, not the budget */
} rm_grant;

/* Reserves n more bytes for the request; false when the budget (or its
 * client's cap) cannot. */
bool rm_grant_add(rm_grant *g, uint64_t n);
/* Makes the grant at least n bytes (a no-op when it is); false as above. */
bool rm_grant_reach(rm_grant *g, uint64_t n);
/* Gives the whole grant back (its buffers must be gone or handed over). */
void rm_grant_end(rm_grant *g);

/* A byte buffer whose capacity is reserved before it grows - from its
 * grant, or the budget when grant is NULL - and that also stops at its own
 * cap (0: none).  Zero-initialise, then set cap and grant.  Once an append
 * fails the buffer stays failed (sticky). */
typedef struct {
  char *p;
  size_t len, size; /* bytes used, bytes allocated (and reserved) */
  size_t cap;       /* most bytes it may hold; 0: no cap of its own */
  rm_grant *grant;  /* borrowed; NULL: the budget itself */
  bool failed;      /* an append did not fit (budget or cap) */
  bool over_cap;    /* ... because of cap, not the budget */
} rm_buf;

/* Appends n bytes; false when they did not fit (then nothing is appended). */
bool rm_buf_append(rm_buf *b, const void *data, size_t n);
/* Makes room for at least n bytes in total (reserving them); false as above. */
bool rm_buf_reserve(rm_buf *b, size_t n);
/* Gives back what the buffer holds beyond its length (realloc to fit), but
 * for a block that would be kept (RM_KEEP_MIN or more). */
void rm_buf_shrink(rm_buf *b);
/* Frees the buffer and gives its reservation back; b is zeroed. */
void rm_buf_free(rm_buf *b);
/* Hands the memory over to a new owner: returns the block (*size gets its
 * reservation, which the owner gives back with rm_release when it is done
 * with it, and then the block with rm_block_free) and leaves b empty.  A
 * grant's share of it leaves the grant. */
char *rm_buf_take(rm_buf *b, size_t *size);

/* ---- kept blocks --------------------------------------------------------------
 * A buffer of RM_KEEP_MIN bytes or more (answers of a few hundred frames and
 * up, large bodies and arrays) is mapped by malloc (http.c sets its
 * M_MMAP_THRESHOLD to that), so each new one costs the server its page
 * faults and each free an unmapping, a TLB shootdown across the process's
 * threads: about a fifth of the server's CPU at 1,000 native frames per
 * request (bench/README.md).  Such a block, once given back, is kept for the
 * next buffer that needs one that large (rm_buf_reserve takes the smallest
 * kept block that fits, if it is at most four times what the buffer needs),
 * up to RM_KEEP_SLOTS blocks and rm_keep_max() bytes
 * in all.  A kept block stays counted in the budget (rm_used), so busy and
 * kept blocks together never pass it; a reservation the budget would refuse
 * frees every kept block first.  A buffer of that size is not shrunk
 * (rm_buf_shrink), so that its block is whole when it comes back. */
#define RM_KEEP_MIN (128 * 1024)
#define RM_KEEP_SLOTS 32

/* Bytes of blocks to keep (request_memory_keep), at most a quarter of the
 * budget when there is one; 0: none (blocks kept now are freed). */
void rm_keep_set_max(uint64_t bytes);
uint64_t rm_keep_max(void);
/* An empty buffer starts with a kept block of at least n bytes, if there is
 * one (true); else nothing changes (false), the buffer grows as usual. */
bool rm_buf_adopt_kept(rm_buf *b, size_t n);
/* Bytes kept now (they are part of rm_used). */
uint64_t rm_kept(void);
/* A block of size bytes that holds no reservation any more (its owner gave
 * it back): kept, or freed. */
void rm_block_free(char *p, size_t size);

#endif
