#include "reader.h"

#include <stdlib.h>
#include <string.h>

void rd_init(ps_reader *r, const void *data, size_t len) {
  r->base = data;
  r->len = data ? len : 0;
  r->pos = 0;
  r->origin = 0;
  r->err = PS_E_OK;
  r->what = NULL;
  r->err_off = 0;
}

ps_err rd_fail(ps_reader *r, ps_err code, const char *what) {
  if (r->err == PS_E_OK) {
    r->err = code;
    r->what = what;
    r->err_off = r->origin + r->pos;
  }
  return code;
}

ps_reader rd_sub(ps_reader *r, size_t off, size_t len, const char *what) {
  ps_reader s;
  rd_init(&s, NULL, 0);
  s.origin = r->origin + (off <= r->len ? off : r->len);
  if (!rd_ok(r)) {
    s.err = r->err;
    s.what = r->what;
    s.err_off = r->err_off;
    return s;
  }
  if (!ps_range_ok(off, len, r->len)) {
    size_t save = r->pos;
    r->pos = off <= r->len ? off : r->len;
    rd_fail(r, PS_E_TRUNCATED, what);
    r->pos = save;
    s.err = r->err;
    s.what = what;
    s.err_off = r->err_off;
    return s;
  }
  s.base = r->base + off;
  s.len = len;
  return s;
}

static const uint8_t *take(ps_reader *r, size_t n, const char *what) {
  if (r->err != PS_E_OK)
    return NULL;
  if (n > r->len - r->pos) {
    rd_fail(r, PS_E_TRUNCATED, what);
    return NULL;
  }
  const uint8_t *p = r->base + r->pos;
  r->pos += n;
  return p;
}

uint8_t rd_u8(ps_reader *r, const char *what) {
  const uint8_t *p = take(r, 1, what);
  if (!p)
    return 0;
  return p[0];
}

uint16_t rd_u16(ps_reader *r, const char *what) {
  const uint8_t *p = take(r, 2, what);
  if (!p)
    return 0;
  return (uint16_t)((unsigned)p[0] | ((unsigned)p[1] << 8u));
}

uint32_t rd_u32(ps_reader *r, const char *what) {
  const uint8_t *p = take(r, 4, what);
  if (!p)
    return 0;
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

uint64_t rd_u64(ps_reader *r, const char *what) {
  const uint8_t *p = take(r, 8, what);
  if (!p)
    return 0;
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

int32_t rd_i32(ps_reader *r, const char *what) {
  uint32_t u = rd_u32(r, what);
  int32_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}

const uint8_t *rd_ptr(ps_reader *r, size_t n, const char *what) {
  return take(r, n, what);
}

bool rd_copy(ps_reader *r, void *dst, size_t n, const char *what) {
  const uint8_t *p = take(r, n, what);
  if (!p) {
    if (n)
      memset(dst, 0, n);
    return false;
  }
  if (n)
    memcpy(dst, p, n);
  return true;
}

bool rd_skip(ps_reader *r, size_t n, const char *what) {
  return take(r, n, what) != NULL || (n == 0 && rd_ok(r));
}

bool rd_seek(ps_reader *r, size_t pos, const char *what) {
  if (r->err != PS_E_OK)
    return false;
  if (pos > r->len) {
    rd_fail(r, PS_E_TRUNCATED, what);
    return false;
  }
  r->pos = pos;
  return true;
}

bool rd_align(ps_reader *r, size_t align, const char *what) {
  if (r->err != PS_E_OK)
    return false;
  if (align == 0 || (align & (align - 1)) != 0)
    return rd_fail(r, PS_E_INVALID, what) == PS_E_OK;
  size_t rem = r->pos & (align - 1);
  if (rem == 0)
    return true;
  size_t pad = align - rem;
  if (pad > r->len - r->pos) {
    r->pos = r->len; /* alignment padding may be absent at the very end */
    return true;
  }
  r->pos += pad;
  return true;
}

const char *rd_cstr(ps_reader *r, size_t *len_out, const char *what) {
  if (len_out)
    *len_out = 0;
  if (r->err != PS_E_OK)
    return NULL;
  const uint8_t *start = r->base + r->pos;
  const uint8_t *nul = memchr(start, 0, r->len - r->pos);
  if (!nul) {
    rd_fail(r, PS_E_TRUNCATED, what);
    return NULL;
  }
  size_t n = (size_t)(nul - start);
  r->pos += n + 1;
  if (len_out)
    *len_out = n;
  return (const char *)start;
}

ps_err rd_to_diag(const ps_reader *r, ps_diag *d) {
  if (r->err == PS_E_OK)
    return PS_E_OK;
  return ps_diag_set(d, r->err, r->what, r->err_off, NULL);
}

void ps_budget_init(ps_budget *b, size_t cap) {
  b->cap = cap;
  b->used = 0;
  b->peak = 0;
}

bool ps_budget_take(ps_budget *b, size_t bytes, ps_err *err) {
  if (!b)
    return true;
  if (bytes > b->cap - b->used) {
    if (err)
      *err = PS_E_LIMIT;
    return false;
  }
  b->used += bytes;
  if (b->used > b->peak)
    b->peak = b->used;
  return true;
}

void *ps_alloc_array(ps_budget *b, size_t n, size_t size, ps_err *err) {
  size_t bytes;
  if (!ps_mul_size(n, size, &bytes)) {
    if (err)
      *err = PS_E_OVERFLOW;
    return NULL;
  }
  if (!ps_budget_take(b, bytes, err))
    return NULL;
  void *p = calloc(bytes ? bytes : 1, 1);
  if (!p) {
    if (b)
      b->used -= bytes;
    if (err)
      *err = PS_E_NOMEM;
  }
  return p;
}

void *ps_realloc_array(ps_budget *b, void *p, size_t old_n, size_t new_n, size_t size,
                       ps_err *err) {
  size_t old_bytes, new_bytes;
  if (!ps_mul_size(old_n, size, &old_bytes) || !ps_mul_size(new_n, size, &new_bytes)) {
    if (err)
      *err = PS_E_OVERFLOW;
    return NULL;
  }
  if (new_bytes > old_bytes && !ps_budget_take(b, new_bytes - old_bytes, err))
    return NULL;
  void *q = realloc(p, new_bytes ? new_bytes : 1);
  if (!q) {
    if (b && new_bytes > old_bytes)
      b->used -= new_bytes - old_bytes;
    if (err)
      *err = PS_E_NOMEM;
    return NULL;
  }
  /* the new elements stay uninitialised: zeroing growth slack would touch
   * (fault in) pages the caller may never use */
  if (new_bytes < old_bytes && b)
    ps_budget_release(b, old_bytes - new_bytes);
  return q;
}

void ps_budget_release(ps_budget *b, size_t bytes) {
  if (!b)
    return;
  b->used = bytes > b->used ? 0 : b->used - bytes;
}

size_t ps_input_allowance(size_t len) {
  size_t a;
  if (!ps_mul_size(len, PS_INPUT_FACTOR, &a) || !ps_add_size(a, PS_INPUT_FLOOR, &a))
    return SIZE_MAX;
  return a;
}

size_t ps_budget_limit(ps_budget *b, size_t bytes) {
  if (!b)
    return 0;
  size_t old = b->cap, lim;
  if (ps_add_size(b->used, bytes, &lim) && lim < b->cap)
    b->cap = lim;
  return old;
}

void ps_budget_restore(ps_budget *b, size_t cap) {
  if (b)
    b->cap = cap;
}
