/*
 * symtab.c - building, finishing and searching a module's symbol table.
 * See symtab.h for the layout.
 */
#include "symtab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sourcelink.h"

void st_init(symtab *st, ps_budget *budget) {
  memset(st, 0, sizeof *st);
  st->budget = budget;
  /* offset 0 is the empty string */
  st_str(st, "", 0);
}

void st_free(symtab *st) {
  if (!st)
    return;
  free(st->strs);
  free(st->funcs);
  free(st->lines);
  free(st->inlines);
  free(st->iranges);
  free(st->publics);
  free(st->methods);
  free(st->seqpts);
  free(st->hslots);
  free(st->line_idx);
  free(st->func_idx);
  free(st->ir_maxend);
  free(st->func_lines);
  if (st->slmap) {
    sl_map_free(st->slmap, NULL); /* the budget may be gone by now, as for the arrays */
    free(st->slmap);
  }
  memset(st, 0, sizeof *st);
}

/* Grows an array so one more element fits. */
static bool grow(symtab *st, void **arr, size_t *cap, size_t n, size_t elem) {
  if (st->err != PS_E_OK)
    return false;
  if (n < *cap)
    return true;
  /* double while small; past 1 Mi elements grow by a quarter: the new slack
   * is zeroed (so touched) at once, and fresh pages are costly */
  size_t ncap = !*cap ? 64 : *cap < ((size_t)1 << 20) ? *cap * 2 : *cap + *cap / 4;
  if (ncap > UINT32_MAX) {
    st->err = PS_E_LIMIT;
    return false;
  }
  ps_err e = PS_E_OK;
  void *p = ps_realloc_array(st->budget, *arr, *cap, ncap, elem, &e);
  if (!p) {
    st->err = e;
    return false;
  }
  *arr = p;
  *cap = ncap;
  return true;
}

static uint32_t hash_bytes(const char *s, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) {
    h ^= (uint8_t)s[i];
    h *= 16777619u;
  }
  return h;
}

static bool rehash(symtab *st, size_t ncap) {
  ps_err e = PS_E_OK;
  uint32_t *slots = ps_alloc_array(st->budget, ncap, sizeof *slots, &e);
  if (!slots) {
    st->err = e;
    return false;
  }
  for (size_t i = 0; i < ncap; i++)
    slots[i] = ST_NONE;
  for (size_t i = 0; i < st->hcap; i++) {
    uint32_t off = st->hslots[i];
    if (off == ST_NONE)
      continue;
    const char *s = st->strs + off;
    size_t j = hash_bytes(s, strlen(s)) & (ncap - 1);
    while (slots[j] != ST_NONE)
      j = (j + 1) & (ncap - 1);
    slots[j] = off;
  }
  if (st->hslots)
    ps_budget_release(st->budget, st->hcap * sizeof *st->hslots);
  free(st->hslots);
  st->hslots = slots;
  st->hcap = ncap;
  return true;
}

uint32_t st_str(symtab *st, const char *s, size_t len) {
  if (st->err != PS_E_OK)
    return 0;
  if (!s)
    len = 0;
  /* a string with an embedded NUL is cut there: the pool is NUL-separated */
  if (len && memchr(s, 0, len))
    len = strlen(s);
  if (len == 0 && st->strs_len > 0)
    return 0;
  if ((st->hcount + 1) * 2 > st->hcap && !rehash(st, st->hcap ? st->hcap * 2 : 1024))
    return 0;
  uint32_t h = hash_bytes(s ? s : "", len);
  size_t j = h & (st->hcap - 1);
  while (st->hslots[j] != ST_NONE) {
    const char *t = st->strs + st->hslots[j];
    if (strncmp(t, s, len) == 0 && t[len] == '\0')
      return st->hslots[j];
    j = (j + 1) & (st->hcap - 1);
  }
  size_t need;
  if (!ps_add_size(st->strs_len, len + 1, &need) || need > UINT32_MAX) {
    st->err = PS_E_LIMIT;
    return 0;
  }
  if (need > st->strs_cap) {
    size_t ncap = st->strs_cap ? st->strs_cap : 4096;
    while (ncap < need)
      ncap *= 2;
    ps_err e = PS_E_OK;
    char *p = ps_realloc_array(st->budget, st->strs, st->strs_cap, ncap, 1, &e);
    if (!p) {
      st->err = e;
      return 0;
    }
    st->strs = p;
    st->strs_cap = ncap;
  }
  uint32_t off = (uint32_t)st->strs_len;
  if (len)
    memcpy(st->strs + off, s, len);
  st->strs[off + len] = '\0';
  st->strs_len = need;
  st->hslots[j] = off;
  st->hcount++;
  return off;
}

uint32_t st_cstr(symtab *st, const char *s) { return st_str(st, s, s ? strlen(s) : 0); }

#define PUSH(st, arr, n, cap, val)                                                     \
  (grow((st), (void **)&(st)->arr, &(st)->cap, (st)->n, sizeof *(st)->arr)             \
       ? ((st)->arr[(st)->n++] = (val), true)                                          \
       : false)

bool st_add_func(symtab *st, uint32_t rva, uint32_t size, uint32_t name, uint32_t flags) {
  st_func f = {rva, size, name, flags, 0, 0};
  return PUSH(st, funcs, nfuncs, cfuncs, f);
}

bool st_add_line(symtab *st, uint32_t rva, uint32_t size, uint32_t line, uint32_t file) {
  st_line l = {rva, size, line, file};
  return PUSH(st, lines, nlines, clines, l);
}

uint32_t st_add_inline(symtab *st, uint32_t func_rva, uint32_t parent, uint32_t depth,
                       uint32_t name) {
  st_inline i = {name, parent, ST_NONE, depth, func_rva};
  if (!PUSH(st, inlines, ninlines, cinlines, i))
    return ST_NONE;
  return (uint32_t)(st->ninlines - 1);
}

bool st_add_irange(symtab *st, uint32_t inl, uint32_t rva, uint32_t size, uint32_t line,
                   uint32_t file) {
  st_irange r = {rva, size, inl, line, file};
  return PUSH(st, iranges, niranges, ciranges, r);
}

bool st_add_public(symtab *st, uint32_t rva, uint32_t name, uint32_t mangled) {
  return st_add_public_bounded(st, rva, 0, name, mangled);
}

bool st_add_public_bounded(symtab *st, uint32_t rva, uint32_t limit, uint32_t name,
                           uint32_t mangled) {
  st_public p = {rva, limit, name, mangled};
  return PUSH(st, publics, npublics, cpublics, p);
}

bool st_add_method(symtab *st, uint32_t token, uint32_t name, uint32_t kickoff) {
  st_method m = {token, name, kickoff, 0, 0, 0, 0, 0};
  return PUSH(st, methods, nmethods, cmethods, m);
}

bool st_add_seqpt(symtab *st, const st_seqpt *sp) {
  return PUSH(st, seqpts, nseqpts, cseqpts, *sp);
}

void st_set_method_user(symtab *st, size_t index, uint32_t gen, uint32_t user, uint32_t local) {
  if (index >= st->nmethods)
    return;
  st->methods[index].gen = gen;
  st->methods[index].user = user;
  st->methods[index].local = local;
}

/* ---- stable sort (merge sort with one scratch buffer) ------------------ */

typedef int (*cmp_fn)(const void *, const void *);

static void msort_rec(char *a, char *tmp, size_t n, size_t sz, cmp_fn cmp) {
  if (n < 2)
    return;
  if (n <= 8) { /* insertion sort: stable */
    for (size_t i = 1; i < n; i++) {
      memcpy(tmp, a + i * sz, sz);
      size_t j = i;
      while (j > 0 && cmp(a + (j - 1) * sz, tmp) > 0) {
        memcpy(a + j * sz, a + (j - 1) * sz, sz);
        j--;
      }
      memcpy(a + j * sz, tmp, sz);
    }
    return;
  }
  size_t h = n / 2;
  msort_rec(a, tmp, h, sz, cmp);
  msort_rec(a + h * sz, tmp, n - h, sz, cmp);
  if (cmp(a + (h - 1) * sz, a + h * sz) <= 0)
    return;
  memcpy(tmp, a, n * sz);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) {
    if (cmp(tmp + j * sz, tmp + i * sz) < 0)
      memcpy(a + (k++) * sz, tmp + (j++) * sz, sz);
    else
      memcpy(a + (k++) * sz, tmp + (i++) * sz, sz);
  }
  while (i < h)
    memcpy(a + (k++) * sz, tmp + (i++) * sz, sz);
  while (j < n)
    memcpy(a + (k++) * sz, tmp + (j++) * sz, sz);
}

static bool stable_sort(symtab *st, void *base, size_t n, size_t sz, cmp_fn cmp) {
  if (n < 2)
    return true;
  /* readers mostly add in order: then skip the scratch buffer (as large as
   * the array, fresh memory) and the recursion */
  const char *a = base;
  size_t i = 1;
  while (i < n && cmp(a + (i - 1) * sz, a + i * sz) <= 0)
    i++;
  if (i == n)
    return true;
  ps_err e = PS_E_OK;
  char *tmp = ps_alloc_array(st->budget, n, sz, &e);
  if (!tmp) {
    st->err = e;
    return false;
  }
  msort_rec(base, tmp, n, sz, cmp);
  free(tmp);
  ps_budget_release(st->budget, n * sz);
  return true;
}

static int cmp_u32(uint32_t a, uint32_t b) { return a < b ? -1 : a > b; }

static int cmp_func(const void *a, const void *b) {
  const st_func *x = a, *y = b;
  int c = cmp_u32(x->rva, y->rva);
  /* at one rva, a real procedure sorts before a thunk, larger before smaller */
  if (!c)
    c = cmp_u32(x->flags & ST_FUNC_THUNK, y->flags & ST_FUNC_THUNK);
  if (!c)
    c = cmp_u32(y->size, x->size);
  return c;
}
static int cmp_line(const void *a, const void *b) {
  return cmp_u32(((const st_line *)a)->rva, ((const st_line *)b)->rva);
}
static int cmp_public(const void *a, const void *b) {
  return cmp_u32(((const st_public *)a)->rva, ((const st_public *)b)->rva);
}
static int cmp_method(const void *a, const void *b) {
  return cmp_u32(((const st_method *)a)->token, ((const st_method *)b)->token);
}
static int cmp_seqpt(const void *a, const void *b) {
  const st_seqpt *x = a, *y = b;
  int c = cmp_u32(x->token, y->token);
  return c ? c : cmp_u32(x->il, y->il);
}

static void prefetch_span(const void *p, size_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  const char *c = p;
  for (size_t o = 0; o < bytes; o += 64)
    __builtin_prefetch(c + o);
  __builtin_prefetch(c + bytes - 1);
#else
  (void)p;
  (void)bytes;
#endif
}

/* index of the last element whose key <= k, or -1; keys read via a stride */
static long last_le(const void *arr, size_t n, size_t sz, size_t key_off, uint32_t k) {
  size_t lo = 0, hi = n; /* first index with key > k */
  const char *p = arr;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t v;
    memcpy(&v, p + mid * sz + key_off, sizeof v);
    if (v <= k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (long)lo - 1;
}

/* last_le through a sampled index: a search of the small index, then of
 * one block of ST_INDEX_STEP elements */
static long last_le_idx(const uint32_t *idx, size_t nidx, const void *arr, size_t n, size_t sz,
                        size_t key_off, uint32_t k) {
  if (!idx || !nidx)
    return last_le(arr, n, sz, key_off, k);
  long b = last_le(idx, nidx, sizeof *idx, 0, k);
  if (b < 0)
    return -1;
  size_t lo = (size_t)b * ST_INDEX_STEP;
  if (lo >= n) /* an index longer than its array (a damaged table): no help */
    return last_le(arr, n, sz, key_off, k);
  size_t cnt = n - lo < ST_INDEX_STEP ? n - lo : ST_INDEX_STEP;
  prefetch_span((const char *)arr + lo * sz, cnt * sz); /* overlap the block's misses */
  long r = last_le((const char *)arr + lo * sz, cnt, sz, key_off, k);
  return r < 0 ? -1 : (long)lo + r;
}

static uint32_t *sample_keys(symtab *st, const void *arr, size_t n, size_t sz, size_t key_off,
                             size_t *nout) {
  *nout = 0;
  if (n == 0)
    return NULL;
  size_t m = (n + ST_INDEX_STEP - 1) / ST_INDEX_STEP;
  ps_err e = PS_E_OK;
  uint32_t *idx = ps_alloc_array(st->budget, m, sizeof *idx, &e);
  if (!idx)
    return NULL; /* lookups fall back to plain binary search */
  for (size_t i = 0; i < m; i++)
    memcpy(&idx[i], (const char *)arr + i * ST_INDEX_STEP * sz + key_off, sizeof *idx);
  *nout = m;
  return idx;
}

static int cmp_irange(const void *a, const void *b) {
  return cmp_u32(((const st_irange *)a)->rva, ((const st_irange *)b)->rva);
}

/* Sorts each function's inline ranges by rva and fills ir_maxend; on any
 * failure leaves ir_maxend NULL (lookups then scan the ranges linearly). */
static void build_ir_index(symtab *st) {
  if (!st->niranges || !st->iranges)
    return;
  for (size_t i = 0; i < st->nfuncs; i++) {
    const st_func *f = &st->funcs[i];
    if ((uint64_t)f->ir_first + f->ir_count > st->niranges)
      return;
  }
  for (size_t i = 0; i < st->nfuncs; i++) {
    const st_func *f = &st->funcs[i];
    ps_err keep = st->err;
    if (!stable_sort(st, st->iranges + f->ir_first, f->ir_count, sizeof *st->iranges,
                     cmp_irange)) {
      st->err = keep; /* out of memory for scratch: lookups scan linearly */
      return;
    }
  }
  ps_err e = PS_E_OK;
  uint32_t *mx = ps_alloc_array(st->budget, st->niranges, sizeof *mx, &e);
  if (!mx)
    return;
  for (size_t i = 0; i < st->nfuncs; i++) {
    const st_func *f = &st->funcs[i];
    uint32_t run = 0;
    for (uint32_t k = 0; k < f->ir_count; k++) {
      const st_irange *r = &st->iranges[f->ir_first + k];
      uint64_t end = (uint64_t)r->rva + r->size;
      uint32_t e32 = end > UINT32_MAX ? UINT32_MAX : (uint32_t)end;
      if (e32 > run)
        run = e32;
      mx[f->ir_first + k] = run;
    }
  }
  st->ir_maxend = mx;
  st->nir_maxend = st->niranges;
}

/* Fills func_lines (funcs and lines sorted); on failure leaves it NULL. */
static void build_func_lines(symtab *st) {
  if (!st->nfuncs || !st->nlines || st->nlines > UINT32_MAX)
    return;
  ps_err e = PS_E_OK;
  uint32_t *fl = ps_alloc_array(st->budget, st->nfuncs, 2 * sizeof *fl, &e);
  if (!fl)
    return;
  for (size_t i = 0; i < st->nfuncs; i++) {
    const st_func *f = &st->funcs[i];
    uint32_t sz = f->size ? f->size : 1;
    long lo = last_le(st->lines, st->nlines, sizeof *st->lines, offsetof(st_line, rva), f->rva);
    /* last line starting at or before the function's last byte */
    uint64_t last = (uint64_t)f->rva + sz - 1;
    long hi = last_le(st->lines, st->nlines, sizeof *st->lines, offsetof(st_line, rva),
                      last > UINT32_MAX ? UINT32_MAX : (uint32_t)last);
    fl[2 * i] = lo < 0 ? 0 : (uint32_t)lo;
    fl[2 * i + 1] = (uint32_t)(hi + 1);
  }
  st->func_lines = fl;
  st->nfunc_lines = st->nfuncs;
}

/* The Source Link map for lookups; a module whose JSON does not parse simply
 * has none (its frames get no source_link), as a broken map is no reason to
 * lose the module's lines. */
void st_build_source_link(symtab *st) {
  st_free_source_link(st);
  if (!st->source_link || st->source_link >= st->strs_len)
    return;
  sl_map *m = malloc(sizeof *m);
  if (!m)
    return;
  const char *json = st_s(st, st->source_link);
  ps_diag d;
  ps_diag_clear(&d);
  if (sl_map_build(m, json, strlen(json), st->budget, &d) != PS_E_OK) {
    free(m);
    return;
  }
  st->slmap = m;
}

void st_free_source_link(symtab *st) {
  if (st->slmap) {
    sl_map_free(st->slmap, st->budget);
    free(st->slmap);
    st->slmap = NULL;
  }
}

bool st_source_link(const symtab *st, const char *path, char *out, size_t cap) {
  return st && st->slmap && sl_map_resolve(st->slmap, path, out, cap);
}

/* Copies n elements of size elem into a new array charged to budget. */
static bool copy_array(ps_budget *budget, void **dst, size_t *dn, size_t *dcap, const void *src,
                       size_t n, size_t elem, ps_err *err) {
  *dst = NULL;
  *dn = *dcap = 0;
  if (!n)
    return true;
  void *p = ps_alloc_array(budget, n, elem, err);
  if (!p)
    return false;
  memcpy(p, src, n * elem); /* n * elem checked by ps_alloc_array */
  *dst = p;
  *dn = *dcap = n;
  return true;
}

ps_err st_copy(const symtab *src, ps_budget *budget, symtab *out) {
  memset(out, 0, sizeof *out);
  out->budget = budget;
  if (!src->finished || src->err != PS_E_OK)
    return PS_E_INVALID;
  ps_err e = PS_E_OK;
  bool ok =
      copy_array(budget, (void **)&out->strs, &out->strs_len, &out->strs_cap, src->strs,
                 src->strs_len, 1, &e) &&
      copy_array(budget, (void **)&out->funcs, &out->nfuncs, &out->cfuncs, src->funcs,
                 src->nfuncs, sizeof *src->funcs, &e) &&
      copy_array(budget, (void **)&out->lines, &out->nlines, &out->clines, src->lines,
                 src->nlines, sizeof *src->lines, &e) &&
      copy_array(budget, (void **)&out->inlines, &out->ninlines, &out->cinlines, src->inlines,
                 src->ninlines, sizeof *src->inlines, &e) &&
      copy_array(budget, (void **)&out->iranges, &out->niranges, &out->ciranges, src->iranges,
                 src->niranges, sizeof *src->iranges, &e) &&
      copy_array(budget, (void **)&out->publics, &out->npublics, &out->cpublics, src->publics,
                 src->npublics, sizeof *src->publics, &e) &&
      copy_array(budget, (void **)&out->methods, &out->nmethods, &out->cmethods, src->methods,
                 src->nmethods, sizeof *src->methods, &e) &&
      copy_array(budget, (void **)&out->seqpts, &out->nseqpts, &out->cseqpts, src->seqpts,
                 src->nseqpts, sizeof *src->seqpts, &e);
  if (!ok) {
    out->budget = NULL; /* what was charged goes with the caller's budget */
    st_free(out);
    return e != PS_E_OK ? e : PS_E_NOMEM;
  }
  out->ident = src->ident;
  out->source_link = src->source_link;
  /* the string pool comes without its dedup table: strings added to the copy
   * are deduplicated among themselves only */
  if (!out->strs_len) {
    st_str(out, "", 0);
    if (out->err != PS_E_OK) {
      e = out->err;
      out->budget = NULL;
      st_free(out);
      return e;
    }
  }
  st_build_index(out);
  out->finished = true;
  return PS_E_OK;
}

ps_err st_build_index(symtab *st) {
  free(st->line_idx);
  free(st->func_idx);
  free(st->ir_maxend);
  free(st->func_lines);
  st->ir_maxend = NULL;
  st->func_lines = NULL;
  st->nir_maxend = st->nfunc_lines = 0;
  st->line_idx = sample_keys(st, st->lines, st->nlines, sizeof *st->lines,
                             offsetof(st_line, rva), &st->nline_idx);
  st->func_idx = sample_keys(st, st->funcs, st->nfuncs, sizeof *st->funcs,
                             offsetof(st_func, rva), &st->nfunc_idx);
  build_ir_index(st);
  build_func_lines(st);
  st_build_source_link(st);
  return PS_E_OK;
}

static long find_func(const symtab *st, uint32_t rva) {
  if (!st->nfuncs)
    return -1;
  long i = last_le_idx(st->func_idx, st->nfunc_idx, st->funcs, st->nfuncs, sizeof *st->funcs,
                       offsetof(st_func, rva), rva);
  if (i < 0)
    return -1;
  /* several records can share one rva: take the first (the real procedure) */
  while (i > 0 && st->funcs[i - 1].rva == st->funcs[i].rva)
    i--;
  const st_func *f = &st->funcs[i];
  if ((uint64_t)rva < (uint64_t)f->rva + (f->size ? f->size : 1))
    return i;
  return -1;
}

long st_func_index(const symtab *st, uint32_t rva) { return find_func(st, rva); }

/* Shrinks an array to its length (best effort: on failure it stays as is). */
static void fit(symtab *st, void **arr, size_t *cap, size_t n, size_t elem) {
  if (!*arr || n == 0 || n >= *cap)
    return;
  void *p = ps_realloc_array(st->budget, *arr, *cap, n, elem, NULL);
  if (p) {
    *arr = p;
    *cap = n;
  }
}

ps_err st_finish(symtab *st) {
  if (st->err != PS_E_OK)
    return st->err;
  /* indexes of an earlier finish may be stale once arrays change */
  free(st->line_idx);
  free(st->func_idx);
  free(st->ir_maxend);
  free(st->func_lines);
  st->line_idx = st->func_idx = st->ir_maxend = st->func_lines = NULL;
  st->nline_idx = st->nfunc_idx = st->nir_maxend = st->nfunc_lines = 0;
  if (!stable_sort(st, st->funcs, st->nfuncs, sizeof *st->funcs, cmp_func) ||
      !stable_sort(st, st->lines, st->nlines, sizeof *st->lines, cmp_line) ||
      !stable_sort(st, st->publics, st->npublics, sizeof *st->publics, cmp_public) ||
      !stable_sort(st, st->methods, st->nmethods, sizeof *st->methods, cmp_method) ||
      !stable_sort(st, st->seqpts, st->nseqpts, sizeof *st->seqpts, cmp_seqpt))
    return st->err;

  /* implicit line sizes: up to the next line, bounded by the owning function */
  for (size_t i = 0; i < st->nlines; i++) {
    st_line *l = &st->lines[i];
    if (l->size)
      continue;
    uint64_t end = UINT64_MAX;
    if (i + 1 < st->nlines)
      end = st->lines[i + 1].rva;
    long f = find_func(st, l->rva);
    if (f >= 0) {
      uint64_t fend = (uint64_t)st->funcs[f].rva + st->funcs[f].size;
      if (fend < end)
        end = fend;
    }
    if (end == UINT64_MAX || end <= l->rva)
      end = (uint64_t)l->rva + 1;
    l->size = (uint32_t)(end - l->rva > UINT32_MAX ? UINT32_MAX : end - l->rva);
  }

  /* public sizes: a public names the bytes from it up to the next public,
   * the next function (which names its own bytes; past its end, Breakpad's
   * processor gives the public no more either) and the end of its section */
  for (size_t i = 0; i < st->npublics; i++) {
    st_public *p = &st->publics[i];
    uint64_t end = p->size ? (uint64_t)p->rva + p->size : (uint64_t)UINT32_MAX + 1;
    size_t j = i + 1;
    while (j < st->npublics && st->publics[j].rva == p->rva)
      j++;
    if (j < st->npublics && st->publics[j].rva < end)
      end = st->publics[j].rva;
    long f = p->rva ? last_le(st->funcs, st->nfuncs, sizeof *st->funcs,
                              offsetof(st_func, rva), p->rva - 1)
                    : -1;
    if ((size_t)(f + 1) < st->nfuncs && st->funcs[f + 1].rva < end)
      end = st->funcs[f + 1].rva;
    uint64_t n = end - p->rva;
    p->size = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  }

  /* inline sites: find the owning function; ranges grouped by function */
  for (size_t i = 0; i < st->ninlines; i++) {
    long f = find_func(st, st->inlines[i].func_rva);
    st->inlines[i].func = f < 0 ? ST_NONE : (uint32_t)f;
  }
  if (st->niranges) {
    /* group ranges by owning function, keeping rva order inside.  Readers
     * emit them function by function: then they are compacted in place, and
     * only otherwise copied by a counting sort into a second array (as large
     * as the first: fresh memory, costly to touch) */
    for (size_t i = 0; i < st->nfuncs; i++)
      st->funcs[i].ir_count = 0;
    size_t kept = 0;
    bool grouped = true;
    uint32_t last_f = 0;
    for (size_t i = 0; i < st->niranges; i++) {
      uint32_t inl = st->iranges[i].inl;
      if (inl >= st->ninlines || st->inlines[inl].func == ST_NONE)
        continue;
      uint32_t fi = st->inlines[inl].func;
      if (fi < last_f)
        grouped = false;
      last_f = fi;
      st->funcs[fi].ir_count++;
      kept++;
    }
    uint32_t acc = 0;
    for (size_t i = 0; i < st->nfuncs; i++) {
      st->funcs[i].ir_first = acc;
      acc += st->funcs[i].ir_count;
      st->funcs[i].ir_count = 0;
    }
    st_irange *out = st->iranges;
    if (!grouped) {
      ps_err e = PS_E_OK;
      out = ps_alloc_array(st->budget, st->niranges, sizeof *out, &e);
      if (!out)
        return st->err = e;
    }
    for (size_t i = 0; i < st->niranges; i++) {
      uint32_t inl = st->iranges[i].inl;
      if (inl >= st->ninlines || st->inlines[inl].func == ST_NONE)
        continue;
      st_func *f = &st->funcs[st->inlines[inl].func];
      out[f->ir_first + f->ir_count++] = st->iranges[i]; /* in place: never past i */
    }
    if (!grouped) {
      free(st->iranges);
      ps_budget_release(st->budget, st->ciranges * sizeof *st->iranges);
      st->iranges = out;
      st->ciranges = kept;
    }
    st->niranges = kept;
  }

  /* sequence points grouped under methods; methods without a record get one
   * (all added first, then one sort: adding and re-sorting one at a time is
   * quadratic on assemblies with tens of thousands of methods) */
  size_t had = st->nmethods;
  for (size_t i = 0; i < st->nseqpts;) {
    uint32_t tok = st->seqpts[i].token;
    size_t j = i;
    while (j < st->nseqpts && st->seqpts[j].token == tok)
      j++;
    long m = last_le(st->methods, had, sizeof *st->methods, offsetof(st_method, token), tok);
    if ((m < 0 || st->methods[m].token != tok) && !st_add_method(st, tok, 0, 0))
      return st->err;
    i = j;
  }
  if (st->nmethods != had &&
      !stable_sort(st, st->methods, st->nmethods, sizeof *st->methods, cmp_method))
    return st->err;
  for (size_t i = 0; i < st->nseqpts;) {
    uint32_t tok = st->seqpts[i].token;
    size_t j = i;
    while (j < st->nseqpts && st->seqpts[j].token == tok)
      j++;
    long m = last_le(st->methods, st->nmethods, sizeof *st->methods,
                     offsetof(st_method, token), tok);
    /* with duplicate method records, the last one carries the points */
    st->methods[m].sp_first = (uint32_t)i;
    st->methods[m].sp_count = (uint32_t)(j - i);
    i = j;
  }
  if (st->nmethods)
    st->ident.managed = true;
  /* give back the growth slack: the table may live long in a cache */
  fit(st, (void **)&st->lines, &st->clines, st->nlines, sizeof *st->lines);
  fit(st, (void **)&st->iranges, &st->ciranges, st->niranges, sizeof *st->iranges);
  fit(st, (void **)&st->inlines, &st->cinlines, st->ninlines, sizeof *st->inlines);
  fit(st, (void **)&st->funcs, &st->cfuncs, st->nfuncs, sizeof *st->funcs);
  fit(st, (void **)&st->publics, &st->cpublics, st->npublics, sizeof *st->publics);
  st_build_index(st);
  st->finished = true;
  return PS_E_OK;
}

size_t st_memory_size(const symtab *st) {
  return sizeof *st + st->strs_cap + st->cfuncs * sizeof(st_func) +
         st->clines * sizeof(st_line) + st->cinlines * sizeof(st_inline) +
         st->ciranges * sizeof(st_irange) + st->cpublics * sizeof(st_public) +
         st->cmethods * sizeof(st_method) + st->cseqpts * sizeof(st_seqpt) +
         (st->hcap + st->nline_idx + st->nfunc_idx + st->nir_maxend + 2 * st->nfunc_lines) * sizeof(uint32_t) +
         (st->slmap ? sizeof *st->slmap + st->slmap->bytes : 0);
}

/* ---- lookups ------------------------------------------------------------ */

static void sym_clear(st_symbol *s) {
  memset(s, 0, sizeof *s);
  s->function = "";
}

/* fi: the function containing rva, or -1 */
static const st_line *line_at(const symtab *st, long fi, uint32_t rva) {
  long i;
  if (fi >= 0 && st->func_lines && st->nfunc_lines == st->nfuncs) {
    /* every line before lo starts at or before rva, every one from hi after */
    uint32_t lo = st->func_lines[2 * fi], hi = st->func_lines[2 * fi + 1];
    if (hi > st->nlines || lo > hi)
      return NULL;
    long r = last_le(st->lines + lo, hi - lo, sizeof *st->lines, offsetof(st_line, rva), rva);
    i = r < 0 ? (lo ? (long)lo - 1 : -1) : (long)lo + r;
  } else {
    i = last_le_idx(st->line_idx, st->nline_idx, st->lines, st->nlines, sizeof *st->lines,
                    offsetof(st_line, rva), rva);
  }
  if (i < 0)
    return NULL;
  /* several tables can start a line at one address (code folded inside a
   * module): the first one added wins, as for functions */
  while (i > 0 && st->lines[i - 1].rva == st->lines[i].rva)
    i--;
  const st_line *l = &st->lines[i];
  if ((uint64_t)rva >= (uint64_t)l->rva + l->size)
    return NULL;
  return l;
}

static bool line_visible(uint32_t line) {
  return line != 0 && line != ST_HIDDEN_LINE && line != ST_NOSTEP_LINE;
}

static void set_line(const symtab *st, st_symbol *s, uint32_t file, uint32_t line) {
  if (!line_visible(line))
    return;
  s->file = file ? st_s(st, file) : NULL;
  s->line = line;
  s->has_line = true;
}

/* The line of l for a symbol whose code spans [lo, hi): a hidden line
 * (0xFEEFEE) takes the nearest visible line at a lower address in that span,
 * else the nearest at a higher one, as managed sequence points do; a
 * never-step-into line (0xF00F00) is no source line at all.  Both are
 * flagged hidden. */
static void set_native_line(const symtab *st, st_symbol *s, const st_line *l, uint64_t lo,
                            uint64_t hi) {
  if (l->line == ST_NOSTEP_LINE) {
    s->hidden = true;
    return;
  }
  if (l->line != ST_HIDDEN_LINE) {
    set_line(st, s, l->file, l->line);
    return;
  }
  s->hidden = true;
  size_t i = (size_t)(l - st->lines);
  for (size_t j = i; j-- > 0 && st->lines[j].rva >= lo;) {
    const st_line *k = &st->lines[j];
    if (k->rva < l->rva && line_visible(k->line)) {
      set_line(st, s, k->file, k->line);
      return;
    }
  }
  for (size_t j = i + 1; j < st->nlines && st->lines[j].rva < hi; j++) {
    const st_line *k = &st->lines[j];
    if (line_visible(k->line)) {
      set_line(st, s, k->file, k->line);
      return;
    }
  }
}

void st_lookup_rva(const symtab *st, uint32_t rva, st_answer *out) {
  out->status = ST_UNKNOWN_ADDRESS;
  out->nsyms = 0;
  out->namebuf[0] = '\0';
  long fi = find_func(st, rva);
  if (fi < 0) {
    /* fallback: the nearest preceding public, within its size (its
     * section, up to the next public or function) */
    long pi = last_le(st->publics, st->npublics, sizeof *st->publics,
                      offsetof(st_public, rva), rva);
    if (pi < 0)
      return;
    const st_public *p = &st->publics[pi];
    if ((uint64_t)rva - p->rva >= p->size)
      return;
    st_symbol *s = &out->syms[0];
    sym_clear(s);
    s->function = st_s(st, p->name);
    s->mangled = p->mangled ? st_s(st, p->mangled) : NULL;
    s->function_offset = rva - p->rva;
    s->has_offset = true;
    /* code with lines and no procedure (assembly): the lines name file
     * and line, the public the function */
    const st_line *l = line_at(st, -1, rva);
    if (l)
      set_native_line(st, s, l, p->rva, (uint64_t)p->rva + p->size);
    out->nsyms = 1;
    out->status = ST_OK;
    return;
  }
  const st_func *f = &st->funcs[fi];
  /* Lookups never index by a value of the table without checking it first,
   * so that a table mapped from the cache needs no pass over all its records
   * before it answers (store_codec.c): a function's ranges outside the
   * array, a range's inline site past the sites, a method's sequence points
   * past theirs are no ranges, no site, no points. */
  uint32_t ir_count =
      st->iranges && (uint64_t)f->ir_first + f->ir_count <= st->niranges ? f->ir_count : 0;
  /* the searches below are bound by cache misses, each step waiting on the
   * last: ask for the function's ranges and lines at once, so the misses
   * overlap (small functions only; a prefetch never faults) */
  if (ir_count && ir_count <= 64) {
    prefetch_span(st->iranges + f->ir_first, ir_count * sizeof *st->iranges);
    if (st->ir_maxend && st->nir_maxend == st->niranges)
      prefetch_span(st->ir_maxend + f->ir_first, ir_count * sizeof *st->ir_maxend);
  }
  if (st->func_lines && st->nfunc_lines == st->nfuncs) {
    uint32_t lo = st->func_lines[2 * fi], hi = st->func_lines[2 * fi + 1];
    if (lo < hi && hi <= st->nlines && hi - lo <= 128)
      prefetch_span(st->lines + lo, (hi - lo) * sizeof *st->lines);
  }

  /* the ranges containing rva, in descending index order (up to HITS; past
   * that the per-level ranges are found by rescanning), and the deepest
   * inline site among them (the first range in index order wins a tie) */
  enum { HITS = 64 };
  const st_irange *hits[HITS];
  int nh = 0;
  bool overflow = false;
  uint32_t deepest = ST_NONE, deepest_depth = 0;
  const st_irange *ir = ir_count ? st->iranges + f->ir_first : NULL;
  if (ir) {
    const uint32_t *mx = st->ir_maxend && st->nir_maxend == st->niranges
                             ? st->ir_maxend + f->ir_first
                             : NULL;
    long k = mx ? last_le(ir, ir_count, sizeof *ir, offsetof(st_irange, rva), rva)
                : (long)ir_count - 1;
    for (; k >= 0; k--) {
      /* no range at or before k ends past rva (saturated ends stay) */
      if (mx && mx[k] <= rva && mx[k] != UINT32_MAX)
        break;
      const st_irange *r = &ir[k];
      if (rva < r->rva || (uint64_t)rva >= (uint64_t)r->rva + r->size || r->inl >= st->ninlines)
        continue;
      if (nh < HITS)
        hits[nh++] = r;
      else
        overflow = true;
      const st_inline *in = &st->inlines[r->inl];
      if (in->depth >= 1 && in->depth >= deepest_depth && in->depth <= ST_MAX_INLINE_DEPTH) {
        deepest_depth = in->depth;
        deepest = r->inl;
      }
    }
  }
  int n = 0;
  if (deepest != ST_NONE) {
    /* walk from the deepest site up through its parents */
    uint32_t chain[ST_MAX_INLINE_DEPTH];
    int nc = 0;
    for (uint32_t cur = deepest; cur != ST_NONE && nc < ST_MAX_INLINE_DEPTH;
         cur = st->inlines[cur].parent) {
      if (cur >= st->ninlines)
        break;
      chain[nc++] = cur;
    }
    for (int c = 0; c < nc; c++) {
      /* the first range (in index order) of this site containing rva */
      const st_irange *hit = NULL;
      if (!overflow) {
        for (int h = nh - 1; h >= 0 && !hit; h--)
          if (hits[h]->inl == chain[c])
            hit = hits[h];
      } else {
        for (uint32_t k = 0; k < ir_count; k++) {
          const st_irange *r = &ir[k];
          if (r->inl == chain[c] && rva >= r->rva &&
              (uint64_t)rva < (uint64_t)r->rva + r->size) {
            hit = r;
            break;
          }
        }
      }
      st_symbol *s = &out->syms[n++];
      sym_clear(s);
      s->function = st_s(st, st->inlines[chain[c]].name);
      s->inlined = true;
      if (hit)
        set_line(st, s, hit->file, hit->line);
    }
  }
  st_symbol *s = &out->syms[n++];
  sym_clear(s);
  s->function = st_s(st, f->name);
  s->function_offset = rva - f->rva;
  s->has_offset = true;
  const st_line *l = line_at(st, fi, rva);
  if (l)
    set_native_line(st, s, l, f->rva, (uint64_t)f->rva + (f->size ? f->size : 1));
  out->nsyms = n;
  out->status = ST_OK;
}

static const st_method *find_method(const symtab *st, uint32_t token) {
  long m = last_le(st->methods, st->nmethods, sizeof *st->methods,
                   offsetof(st_method, token), token);
  if (m < 0 || st->methods[m].token != token)
    return NULL;
  return &st->methods[m];
}

static void set_seqpt(const symtab *st, st_symbol *s, const st_seqpt *p) {
  s->file = p->file ? st_s(st, p->file) : NULL;
  s->line = p->line;
  s->has_line = true;
  s->end_line = p->end_line;
  s->column = p->column;
  s->end_column = p->end_column;
  s->has_column = true;
}

bool st_method_points(const symtab *st, uint32_t token, const st_seqpt **pts, size_t *n) {
  const st_method *m = find_method(st, token);
  if (!m || !m->sp_count || (uint64_t)m->sp_first + m->sp_count > st->nseqpts)
    return false;
  *pts = st->seqpts + m->sp_first;
  *n = m->sp_count;
  return true;
}

void st_lookup_token(const symtab *st, uint32_t token, uint32_t il, st_answer *out) {
  out->status = ST_UNKNOWN_ADDRESS;
  out->nsyms = 0;
  out->namebuf[0] = '\0';
  const st_method *m = find_method(st, token);
  if (!m)
    return;
  st_symbol *s = &out->syms[0];
  sym_clear(s);
  if (m->name) {
    s->function = st_s(st, m->name);
  } else {
    snprintf(out->namebuf, sizeof out->namebuf, "0x%08X", token);
    s->function = out->namebuf;
  }
  if (m->kickoff) {
    const st_method *k = find_method(st, m->kickoff);
    s->kickoff_token = m->kickoff;
    s->async_method = (k && k->name) ? st_s(st, k->name) : NULL;
  }
  if (m->gen && m->user) {
    s->generated = m->gen;
    s->user_method = st_s(st, m->user);
    s->local_function = m->local ? st_s(st, m->local) : NULL;
  }
  out->nsyms = 1;
  out->status = ST_OK;
  if (!m->sp_count || (uint64_t)m->sp_first + m->sp_count > st->nseqpts)
    return;
  const st_seqpt *sp = st->seqpts + m->sp_first;
  long i = last_le(sp, m->sp_count, sizeof *sp, offsetof(st_seqpt, il), il);
  if (i < 0)
    return; /* offset before the first sequence point: name only */
  if (sp[i].line != ST_HIDDEN_LINE) {
    set_seqpt(st, s, &sp[i]);
    return;
  }
  s->hidden = true;
  for (long j = i - 1; j >= 0; j--) {
    if (sp[j].line != ST_HIDDEN_LINE && sp[j].il < sp[i].il) {
      set_seqpt(st, s, &sp[j]);
      return;
    }
  }
  for (size_t j = (size_t)i + 1; j < m->sp_count; j++) {
    if (sp[j].line != ST_HIDDEN_LINE) {
      set_seqpt(st, s, &sp[j]);
      return;
    }
  }
}
