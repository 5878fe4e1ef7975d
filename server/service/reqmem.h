/*
 * reqmem.h - the memory budget of the HTTP requests in flight
 * (`request_memory_max`): one process-wide count of the bytes that requests
 * hold in buffers whose size grows with the request - bodies, the arrays a
 * parsed request fills, answers being built and being sent.  A buffer grows
 * only after its growth is reserved; a reservation the budget cannot take
 * fails at once (the caller answers 503 with Retry-After), so the sum of
 * those buffers never passes the budget.  Fixed per-request costs (a few KiB
 * of bookkeeping, libmicrohttpd's per-connection pool) are not counted here;
 * they are bounded by the connection and in-flight limits.
 *
 * Thread safety: every function may be called from any thread (atomics).
 */
#ifndef PDBSYM_REQMEM_H
#define PDBSYM_REQMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* A byte buffer whose capacity is reserved in the budget before it grows,
 * and that also stops at its own cap (0: none).  Zero-initialise, then set
 * cap.  Once an append fails the buffer stays failed (sticky). */
typedef struct {
  char *p;
  size_t len, size; /* bytes used, bytes allocated (and reserved) */
  size_t cap;       /* most bytes it may hold; 0: no cap of its own */
  bool failed;      /* an append did not fit (budget or cap) */
  bool over_cap;    /* ... because of cap, not the budget */
} rm_buf;

/* Appends n bytes; false when they did not fit (then nothing is appended). */
bool rm_buf_append(rm_buf *b, const void *data, size_t n);
/* Makes room for at least n bytes in total (reserving them); false as above. */
bool rm_buf_reserve(rm_buf *b, size_t n);
/* Gives back what the buffer holds beyond its length (realloc to fit). */
void rm_buf_shrink(rm_buf *b);
/* Frees the buffer and gives its reservation back; b is zeroed. */
void rm_buf_free(rm_buf *b);

#endif
