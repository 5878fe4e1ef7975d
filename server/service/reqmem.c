/*
 * reqmem.c - the memory budget of requests in flight (reqmem.h).
 */
#include "reqmem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t budget_max;
static _Atomic uint64_t used, peak, refused;
static _Atomic uint64_t client_max, client_refused;

void rm_set_client_max(uint64_t max_bytes) { atomic_store(&client_max, max_bytes); }
uint64_t rm_client_max(void) { return atomic_load(&client_max); }
uint64_t rm_client_refused(void) { return atomic_load(&client_refused); }

/* n more bytes in a client's count, unless that passes its cap */
static bool client_take(rm_client *c, uint64_t n) {
  if (!c)
    return true;
  uint64_t max = atomic_load(&client_max), cur = atomic_load(&c->bytes);
  for (;;) {
    if (n > UINT64_MAX - cur || (max && cur + n > max)) {
      atomic_fetch_add(&client_refused, 1);
      return false;
    }
    if (atomic_compare_exchange_weak(&c->bytes, &cur, cur + n))
      return true;
  }
}

static void client_give(rm_client *c, uint64_t n) {
  if (c)
    atomic_fetch_sub(&c->bytes, n);
}

void rm_set_max(uint64_t max_bytes) { atomic_store(&budget_max, max_bytes); }
uint64_t rm_max(void) { return atomic_load(&budget_max); }

/* n more bytes in the count, unless that would pass the budget */
static bool count(uint64_t n) {
  uint64_t max = atomic_load(&budget_max);
  uint64_t cur = atomic_load(&used);
  for (;;) {
    if (n > UINT64_MAX - cur || (max && cur + n > max))
      return false;
    if (atomic_compare_exchange_weak(&used, &cur, cur + n))
      break;
  }
  uint64_t now = cur + n, p = atomic_load(&peak);
  while (now > p && !atomic_compare_exchange_weak(&peak, &p, now)) {
  }
  return true;
}

static bool drop_kept(void);

bool rm_reserve(uint64_t n) {
  if (count(n))
    return true;
  /* kept blocks give way to the requests */
  if (drop_kept() && count(n))
    return true;
  atomic_fetch_add(&refused, 1);
  return false;
}

void rm_release(uint64_t n) { atomic_fetch_sub(&used, n); }
uint64_t rm_used(void) { return atomic_load(&used); }
uint64_t rm_peak(void) { return atomic_load(&peak); }
uint64_t rm_refused(void) { return atomic_load(&refused); }

/* ---- grants ----------------------------------------------------------------- */

bool rm_grant_add(rm_grant *g, uint64_t n) {
  g->by_client = !client_take(g->client, n);
  if (g->by_client)
    return false;
  if (!rm_reserve(n)) {
    client_give(g->client, n);
    return false;
  }
  g->size += n;
  return true;
}

bool rm_grant_reach(rm_grant *g, uint64_t n) {
  return n <= g->size || rm_grant_add(g, n - g->size);
}

void rm_grant_end(rm_grant *g) {
  rm_release(g->size);
  client_give(g->client, g->size);
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

/* ---- kept blocks ----------------------------------------------------------------- */

static pthread_mutex_t keep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char *p;
  size_t size;
} kept[RM_KEEP_SLOTS];
static unsigned nkept;          /* under keep_mu */
static _Atomic uint64_t kept_bytes, keep_limit;

uint64_t rm_kept(void) { return atomic_load(&kept_bytes); }
uint64_t rm_keep_max(void) { return atomic_load(&keep_limit); }

/* Frees every kept block and gives their share of the budget back; whether
 * there were any. */
static bool drop_kept(void) {
  if (!atomic_load(&kept_bytes))
    return false;
  pthread_mutex_lock(&keep_mu);
  bool any = nkept > 0;
  while (nkept) {
    nkept--;
    free(kept[nkept].p);
    atomic_fetch_sub(&kept_bytes, kept[nkept].size);
    rm_release(kept[nkept].size);
  }
  pthread_mutex_unlock(&keep_mu);
  return any;
}

void rm_keep_set_max(uint64_t bytes) {
  uint64_t max = atomic_load(&budget_max);
  if (max && bytes > max / 4)
    bytes = max / 4;
  atomic_store(&keep_limit, bytes);
  drop_kept(); /* the next blocks are kept under the new bound */
}

void rm_block_free(char *p, size_t size) {
  if (!p)
    return;
  if (size >= RM_KEEP_MIN && size <= atomic_load(&keep_limit)) {
    pthread_mutex_lock(&keep_mu);
    bool keep = nkept < RM_KEEP_SLOTS && atomic_load(&kept_bytes) + size <= atomic_load(&keep_limit) &&
                count(size); /* the block's share of the budget, again */
    if (keep) {
      kept[nkept].p = p;
      kept[nkept].size = size;
      nkept++;
      atomic_fetch_add(&kept_bytes, size);
    }
    pthread_mutex_unlock(&keep_mu);
    if (keep)
      return;
  }
  free(p);
}

/* The smallest kept block of at least n bytes (and at most four times n: a
 * large block stays for a large buffer), its share of the budget given back
 * (the taker reserves it for itself); NULL when none fits. */
static char *take_kept(size_t n, size_t *size) {
  if (!atomic_load(&kept_bytes))
    return NULL;
  char *p = NULL;
  pthread_mutex_lock(&keep_mu);
  unsigned best = nkept;
  for (unsigned i = 0; i < nkept; i++)
    if (kept[i].size >= n && kept[i].size / 4 <= n && (best == nkept || kept[i].size < kept[best].size))
      best = i;
  if (best < nkept) {
    p = kept[best].p;
    *size = kept[best].size;
    kept[best] = kept[--nkept];
    atomic_fetch_sub(&kept_bytes, *size);
    rm_release(*size);
  }
  pthread_mutex_unlock(&keep_mu);
  return p;
}

/* ---- buffers ------------------------------------------------------------------ */

bool rm_buf_adopt_kept(rm_buf *b, size_t n) {
  if (b->p || b->failed || n < RM_KEEP_MIN || (b->cap && n > b->cap))
    return false;
  size_t size;
  char *k = take_kept(n, &size);
  if (!k)
    return false;
  if ((b->cap && size > b->cap) || !take(b->grant, size)) {
    free(k);
    return false;
  }
  b->p = k;
  b->size = size;
  return true;
}

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
  if (size >= RM_KEEP_MIN) {
    size_t ksize;
    char *k = take_kept(size, &ksize);
    if (k) {
      if (!take(b->grant, ksize)) {
        free(k);
        b->failed = true;
        return false;
      }
      if (b->p) /* what the buffer holds (a writer may have filled past len) */
        memcpy(k, b->p, b->size);
      give(b->grant, b->size);
      rm_block_free(b->p, b->size);
      b->p = k;
      b->size = ksize;
      return true;
    }
  }
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
  if (b->failed || b->len == b->size || !b->len || b->size >= RM_KEEP_MIN)
    return;
  char *p = realloc(b->p, b->len);
  if (!p)
    return; /* keeps the larger block, still reserved */
  give(b->grant, b->size - b->len);
  b->p = p;
  b->size = b->len;
}

void rm_buf_free(rm_buf *b) {
  give(b->grant, b->size);
  rm_block_free(b->p, b->size);
  memset(b, 0, sizeof *b);
}

char *rm_buf_take(rm_buf *b, size_t *size) {
  char *p = b->p;
  *size = b->size;
  if (b->grant) { /* the reservation leaves the grant (and its client) with the block */
    b->grant->used -= b->size;
    b->grant->size -= b->size;
    client_give(b->grant->client, b->size);
  }
  memset(b, 0, sizeof *b);
  return p;
}
