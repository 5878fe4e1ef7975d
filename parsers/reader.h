/*
 * reader.h - a bounds-checked little-endian cursor over (bytes, length) with a
 * sticky error, overflow-checked size arithmetic, and allocation caps.
 *
 * Every parser in pdbsym reads untrusted bytes through this file only.  A read
 * past the end does not fault: it records PS_E_TRUNCATED (with the structure
 * name and offset) in the reader, and it and every later read return zeros.
 * Callers check rd_ok() once after a group of reads, the way Redis' rio and
 * listpack validators do.
 *
 * Ownership: a reader borrows its bytes; it never allocates or frees.
 */
#ifndef PDBSYM_READER_H
#define PDBSYM_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct {
  const uint8_t *base; /* borrowed */
  size_t len;
  size_t pos;
  size_t origin;       /* offset of base within the outermost input, for diagnostics */
  ps_err err;          /* sticky: first error wins */
  const char *what;    /* structure name given with the failing read */
  size_t err_off;      /* absolute offset of the failing read */
} ps_reader;

void rd_init(ps_reader *r, const void *data, size_t len);
/* A reader over [off, off+len) of r's bytes.  If the range is out of bounds the
 * new reader is empty and already failed (and r is marked failed too). */
ps_reader rd_sub(ps_reader *r, size_t off, size_t len, const char *what);

static inline bool rd_ok(const ps_reader *r) { return r->err == PS_E_OK; }
static inline size_t rd_left(const ps_reader *r) { return r->len - r->pos; }
static inline size_t rd_tell(const ps_reader *r) { return r->pos; }

/* Marks the reader failed (first failure wins). Returns code. */
ps_err rd_fail(ps_reader *r, ps_err code, const char *what);

uint8_t rd_u8(ps_reader *r, const char *what);
uint16_t rd_u16(ps_reader *r, const char *what);
uint32_t rd_u32(ps_reader *r, const char *what);
uint64_t rd_u64(ps_reader *r, const char *what);
int32_t rd_i32(ps_reader *r, const char *what);

/* Borrow n bytes at the cursor and advance; NULL (and failed) if fewer remain. */
const uint8_t *rd_ptr(ps_reader *r, size_t n, const char *what);
/* Copy n bytes; zero-fills dst on failure. */
bool rd_copy(ps_reader *r, void *dst, size_t n, const char *what);
bool rd_skip(ps_reader *r, size_t n, const char *what);
bool rd_seek(ps_reader *r, size_t pos, const char *what);
/* Advance to the next multiple of align (relative to base); align is a power of 2. */
bool rd_align(ps_reader *r, size_t align, const char *what);
/* A NUL-terminated string at the cursor: returns a borrowed pointer and its
 * length (without the NUL) and advances past the NUL.  Fails if no NUL occurs
 * before the end. */
const char *rd_cstr(ps_reader *r, size_t *len_out, const char *what);
/* Fills d from the reader's error (no-op if ok). Returns the error code. */
ps_err rd_to_diag(const ps_reader *r, ps_diag *d);

/* Overflow-checked arithmetic: return false (and leave *out untouched) on overflow. */
static inline bool ps_add_size(size_t a, size_t b, size_t *out) {
  size_t t;
  if (__builtin_add_overflow(a, b, &t))
    return false;
  *out = t;
  return true;
}
static inline bool ps_mul_size(size_t a, size_t b, size_t *out) {
  size_t t;
  if (__builtin_mul_overflow(a, b, &t))
    return false;
  *out = t;
  return true;
}
/* true iff [off, off+len) lies inside [0, total). */
static inline bool ps_range_ok(size_t off, size_t len, size_t total) {
  return off <= total && len <= total - off;
}

/*
 * Allocation caps.  A budget bounds the total bytes one parse may allocate, so
 * a hostile count cannot ask for gigabytes: ps_alloc_array(b, n, size) checks
 * n*size for overflow, then against what remains of the budget, then calls
 * calloc.  Memory from it is freed with free() by the caller (the budget only
 * counts; ps_budget_release gives bytes back when they are freed early).
 */
typedef struct {
  size_t cap;   /* bytes allowed in total */
  size_t used;  /* bytes handed out so far (less those released) */
  size_t peak;  /* the highest `used` has been (for tests and measurements) */
} ps_budget;

#define PS_DEFAULT_BUDGET ((size_t)2 << 30) /* 2 GiB per parse */

void ps_budget_init(ps_budget *b, size_t cap);
/* calloc(n, size) within the budget; NULL with *err set on overflow (PS_E_OVERFLOW),
 * over-budget (PS_E_LIMIT) or allocation failure (PS_E_NOMEM).  n == 0 returns a
 * valid pointer to a 1-byte allocation. err may be NULL. */
void *ps_alloc_array(ps_budget *b, size_t n, size_t size, ps_err *err);
/* realloc within the budget, from old_n to new_n elements; on failure the old
 * block is untouched and NULL is returned.  New elements are NOT initialised
 * (growth slack is never touched, so its pages are never faulted in): the
 * caller writes each element before it reads it. */
void *ps_realloc_array(ps_budget *b, void *p, size_t old_n, size_t new_n, size_t size,
                       ps_err *err);
void ps_budget_release(ps_budget *b, size_t bytes);

/*
 * Input-proportional caps.  A reader of an input of len bytes allocates at
 * most ps_input_allowance(len) bytes, whatever the caller's budget: the
 * symbols of a file take a few bytes per byte of it (corpus peak: 2.8x for
 * Portable PDBs, 1.2x for Windows PDBs), so a crafted file that would make a
 * reader allocate more is refused with PS_E_LIMIT once it has taken its
 * allowance, instead of taking the whole budget.
 */
#define PS_INPUT_FACTOR 16                  /* bytes of allocation per input byte */
#define PS_INPUT_FLOOR ((size_t)1 << 20)    /* plus this much for fixed buffers */
size_t ps_input_allowance(size_t len);
/* Lowers b's cap so that at most `bytes` more can be taken from it (never
 * raises it); returns the cap to give back to ps_budget_restore afterwards.
 * A NULL budget stays unlimited. */
size_t ps_budget_limit(ps_budget *b, size_t bytes);
void ps_budget_restore(ps_budget *b, size_t cap);
/* Counts bytes allocated elsewhere (a buffer from another library) against
 * the budget: false (and *err = PS_E_LIMIT) when they do not fit. */
bool ps_budget_take(ps_budget *b, size_t bytes, ps_err *err);

#endif
