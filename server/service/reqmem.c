/*
 * reqmem.c - the memory budget of requests in flight (reqmem.h).
 */
#include "reqmem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t budget_max;
static _Atomic uint64_t used, peak, refused;

void rm_set_max(uint64_t max_bytes) { atomic_store(&budget_max, max_bytes); }
uint64_t rm_max(void) { return atomic_load(&budget_max); }

bool rm_reserve(uint64_t n) {
  uint64_t max = atomic_load(&budget_max);
  uint64_t cur = atomic_load(&used);
  for (;;) {
    if (n > UINT64_MAX - cur || (max && cur + n > max)) {
      atomic_fetch_add(&refused, 1);
      return false;
    }
    if (atomic_compare_exchange_weak(&used, &cur, cur + n))
      break;
  }
  uint64_t now = cur + n, p = atomic_load(&peak);
  while (now > p && !atomic_compare_exchange_weak(&peak, &p, now)) {
  }
  return true;
}

void rm_release(uint64_t n) { atomic_fetch_sub(&used, n); }
uint64_t rm_used(void) { return atomic_load(&used); }
uint64_t rm_peak(void) { return atomic_load(&peak); }
uint64_t rm_refused(void) { return atomic_load(&refused); }

/* ---- grants ----------------------------------------------------------------- */

bool rm_grant_add(rm_grant *g, uint64_t n) {
  if (!rm_reserve(n))
    return false;
  g->size += n;
  return true;
}

void rm_grant_end(rm_grant *g) {
  rm_release(g->size);
  g->size = g->used = 0;
}

/* n more bytes for a buffer: from its grant, the rest from the budget */
static bool take(rm_grant *g, uint64_t n) {
  if (!g)
    return rm_reserve(n);
  if (g->used + n > g->size && !rm_grant_add(g, g->used + n - g->size))
    return false;
  g->used += n;
  return true;
}

/* n bytes a buffer no longer holds: back to its grant (kept for the rest of
 * the request), or to the budget */
static void give(rm_grant *g, uint64_t n) {
  if (!g)
    rm_release(n);
  else
    g->used -= n;
}

/* ---- buffers ------------------------------------------------------------------ */

bool rm_buf_reserve(rm_buf *b, size_t n) {
  if (b->failed)
    return false;
  if (n <= b->size)
    return true;
  if (b->cap && n > b->cap) {
    b->failed = b->over_cap = true;
    return false;
  }
  /* doubling while small, then a quarter more each time: a 3 MB answer
   * reserves at most 25 % more than it holds */
  size_t size = b->size ? b->size : 4096;
  while (size < n)
    size = size > SIZE_MAX / 2 ? n : size < (1u << 20) ? size * 2 : size + size / 4;
  if (b->cap && size > b->cap)
    size = b->cap;
  /* the new block is reserved before it exists, the old one given back only
   * once it is gone: during realloc both may be resident */
  if (!take(b->grant, size)) {
    b->failed = true;
    return false;
  }
  char *p = realloc(b->p, size);
  if (!p) {
    give(b->grant, size);
    b->failed = true;
    return false;
  }
  give(b->grant, b->size);
  b->p = p;
  b->size = size;
  return true;
}

bool rm_buf_append(rm_buf *b, const void *data, size_t n) {
  if (n > SIZE_MAX - b->len || !rm_buf_reserve(b, b->len + n))
    return false;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  return true;
}

void rm_buf_shrink(rm_buf *b) {
  if (b->failed || b->len == b->size || !b->len)
    return;
  char *p = realloc(b->p, b->len);
  if (!p)
    return; /* keeps the larger block, still reserved */
  give(b->grant, b->size - b->len);
  b->p = p;
  b->size = b->len;
}

void rm_buf_free(rm_buf *b) {
  free(b->p);
  give(b->grant, b->size);
  memset(b, 0, sizeof *b);
}

char *rm_buf_take(rm_buf *b, size_t *size) {
  char *p = b->p;
  *size = b->size;
  if (b->grant) { /* the reservation leaves the grant with the block */
    b->grant->used -= b->size;
    b->grant->size -= b->size;
  }
  memset(b, 0, sizeof *b);
  return p;
}
