/*
 * cab.c - Microsoft Cabinet extraction in memory through libmspack.
 *
 * Format: [MS-CAB] "Cabinet File Format" (CFHEADER, CFFOLDER, CFFILE,
 * CFDATA).  libmspack parses the headers and runs the decompressors; this
 * file gives it an mspack_system whose files are views over memory:
 *
 *   open(name, READ)   name is really a pointer to a cab_mfile template
 *                      (the input view); each open gets its own cursor
 *   open(name, WRITE)  name points at the output cab_mfile: a sink with a cap
 *   read/seek/tell     bounds-checked against (data, len)
 *   write              counted against the cap, then passed to the sink
 *   alloc/free         calloc/free, each block capped at CAB_ALLOC_MAX
 *
 * libmspack never sees a real path, so nothing here can touch the file system.
 */
#include "cab.h"

#include <mspack.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"

/* the largest single allocation libmspack may make */
#define CAB_ALLOC_MAX ((size_t)16 << 20)

enum { CAB_IN = 1, CAB_OUT = 2 };

typedef struct {
  int kind;
  /* input view */
  const uint8_t *data;
  size_t len;
  size_t pos;
  bool heap; /* allocated by open (input copies), freed by close */
  /* output sink */
  cab_sink_fn sink;
  void *ctx;
  uint64_t written;
  uint64_t cap;
  ps_err err;
} cab_mfile;


struct cab_archive {
  struct mspack_system sys;
  ps_budget budget;
  cab_mfile input; /* template for every open of the cabinet */
  struct mscab_decompressor *cabd;
  struct mscabd_cabinet *cab;
  struct mscabd_file **files;
  size_t count;
};

static struct mspack_file *cab_sys_open(struct mspack_system *self, const char *name,
                                        int mode) {
  (void)self;
  cab_mfile *tmpl = (cab_mfile *)(void *)(uintptr_t)name;
  if (!tmpl)
    return NULL;
  if (mode == MSPACK_SYS_OPEN_READ && tmpl->kind == CAB_IN) {
    cab_mfile *f = malloc(sizeof *f);
    if (!f)
      return NULL;
    *f = *tmpl;
    f->pos = 0;
    f->heap = true;
    return (struct mspack_file *)(void *)f;
  }
  if (mode == MSPACK_SYS_OPEN_WRITE && tmpl->kind == CAB_OUT)
    return (struct mspack_file *)(void *)tmpl;
  return NULL;
}

static void cab_sys_close(struct mspack_file *file) {
  cab_mfile *f = (cab_mfile *)(void *)file;
  if (f && f->heap)
    free(f);
}

static int cab_sys_read(struct mspack_file *file, void *buffer, int bytes) {
  cab_mfile *f = (cab_mfile *)(void *)file;
  if (!f || f->kind != CAB_IN || bytes < 0 || f->pos > f->len)
    return -1;
  size_t want = (size_t)bytes;
  size_t left = f->len - f->pos;
  size_t n = want < left ? want : left;
  if (n)
    memcpy(buffer, f->data + f->pos, n);
  f->pos += n;
  return (int)n;
}

static int cab_sys_write(struct mspack_file *file, void *buffer, int bytes) {
  cab_mfile *f = (cab_mfile *)(void *)file;
  if (!f || f->kind != CAB_OUT || bytes < 0)
    return -1;
  uint64_t n = (uint64_t)bytes;
  if (f->written + n > f->cap) {
    f->err = PS_E_LIMIT;
    return -1;
  }
  ps_err e = f->sink ? f->sink(f->ctx, buffer, (size_t)n) : PS_E_OK;
  if (e != PS_E_OK) {
    f->err = e;
    return -1;
  }
  f->written += n;
  return bytes;
}

static int cab_sys_seek(struct mspack_file *file, off_t offset, int mode) {
  cab_mfile *f = (cab_mfile *)(void *)file;
  if (!f || f->kind != CAB_IN)
    return -1;
  int64_t base;
  switch (mode) {
  case MSPACK_SYS_SEEK_START: base = 0; break;
  case MSPACK_SYS_SEEK_CUR: base = (int64_t)f->pos; break;
  case MSPACK_SYS_SEEK_END: base = (int64_t)f->len; break;
  default: return -1;
  }
  int64_t to;
  if (__builtin_add_overflow(base, (int64_t)offset, &to) || to < 0 || (uint64_t)to > f->len)
    return -1;
  f->pos = (size_t)to;
  return 0;
}

static off_t cab_sys_tell(struct mspack_file *file) {
  cab_mfile *f = (cab_mfile *)(void *)file;
  if (!f || f->kind != CAB_IN)
    return -1;
  return (off_t)f->pos;
}

static void cab_sys_message(struct mspack_file *file, const char *format, ...) {
  (void)file;
  (void)format;
}

/* libmspack hands alloc a copy of our mspack_system (cabd keeps one per
 * decompression state), so self cannot lead back to per-archive data: the cap
 * is per allocation.  Its largest legitimate blocks are the LZX and Quantum
 * windows (2 MiB) and the input buffers. */
static void *cab_sys_alloc(struct mspack_system *self, size_t bytes) {
  (void)self;
  if (bytes > CAB_ALLOC_MAX)
    return NULL;
  return calloc(1, bytes ? bytes : 1);
}

static void cab_sys_free(void *ptr) { free(ptr); }

static void cab_sys_copy(void *src, void *dest, size_t bytes) { memmove(dest, src, bytes); }

bool cab_is_cab(const uint8_t *data, size_t len) {
  return data && len >= 4 && !memcmp(data, "MSCF", 4);
}

static ps_err cab_map_error(int e, ps_diag *diag, const char *where) {
  switch (e) {
  case MSPACK_ERR_SIGNATURE:
    return ps_diag_set(diag, PS_E_CORRUPT, where, 0, "not a cabinet (no MSCF signature)");
  case MSPACK_ERR_READ:
  case MSPACK_ERR_SEEK:
    return ps_diag_set(diag, PS_E_TRUNCATED, where, (size_t)-1,
                       "cabinet ends before its headers or data do");
  case MSPACK_ERR_NOMEMORY:
    return ps_diag_set(diag, PS_E_LIMIT, where, (size_t)-1,
                       "decompressor asked for a block over %zu MiB", CAB_ALLOC_MAX >> 20);
  case MSPACK_ERR_CHECKSUM:
    return ps_diag_set(diag, PS_E_CORRUPT, where, (size_t)-1, "CFDATA checksum mismatch");
  case MSPACK_ERR_DECRUNCH:
    return ps_diag_set(diag, PS_E_CORRUPT, where, (size_t)-1,
                       "compressed data is corrupt");
  case MSPACK_ERR_DATAFORMAT:
    return ps_diag_set(diag, PS_E_CORRUPT, where, (size_t)-1, "bad cabinet header field");
  default:
    return ps_diag_set(diag, PS_E_CORRUPT, where, (size_t)-1, "libmspack error %d", e);
  }
}

ps_err cab_open(const uint8_t *data, size_t len, cab_archive **out, ps_diag *diag) {
  *out = NULL;
  if (!cab_is_cab(data, len))
    return ps_diag_set(diag, PS_E_CORRUPT, "CFHEADER", 0, "not a cabinet (no MSCF signature)");
  cab_archive *a = calloc(1, sizeof *a);
  if (!a)
    return ps_diag_set(diag, PS_E_NOMEM, "CFHEADER", 0, "out of memory");
  a->sys.open = cab_sys_open;
  a->sys.close = cab_sys_close;
  a->sys.read = cab_sys_read;
  a->sys.write = cab_sys_write;
  a->sys.seek = cab_sys_seek;
  a->sys.tell = cab_sys_tell;
  a->sys.message = cab_sys_message;
  a->sys.alloc = cab_sys_alloc;
  a->sys.free = cab_sys_free;
  a->sys.copy = cab_sys_copy;
  a->sys.null_ptr = NULL;
  ps_budget_init(&a->budget, (size_t)64 << 20); /* the member table */
  a->input.kind = CAB_IN;
  a->input.data = data;
  a->input.len = len;

  a->cabd = mspack_create_cab_decompressor(&a->sys);
  if (!a->cabd) {
    free(a);
    return ps_diag_set(diag, PS_E_NOMEM, "CFHEADER", 0, "cannot create the decompressor");
  }
  /* Verify CFDATA checksums, no salvage: a damaged cabinet is refused. */
  a->cabd->set_param(a->cabd, MSCABD_PARAM_SALVAGE, 0);
  a->cabd->set_param(a->cabd, MSCABD_PARAM_FIXMSZIP, 0);
  a->cab = a->cabd->open(a->cabd, (const char *)(void *)&a->input);
  if (!a->cab) {
    ps_err r = cab_map_error(a->cabd->last_error(a->cabd), diag, "CFHEADER");
    cab_close(a);
    return r;
  }
  size_t n = 0;
  for (struct mscabd_file *f = a->cab->files; f; f = f->next)
    n++;
  ps_err aerr = PS_E_OK;
  a->files = ps_alloc_array(&a->budget, n, sizeof *a->files, &aerr);
  if (!a->files) {
    cab_close(a);
    return ps_diag_set(diag, aerr, "CFFILE", (size_t)-1, "too many members (%zu)", n);
  }
  size_t i = 0;
  for (struct mscabd_file *f = a->cab->files; f; f = f->next)
    a->files[i++] = f;
  a->count = n;
  *out = a;
  return PS_E_OK;
}

void cab_close(cab_archive *a) {
  if (!a)
    return;
  if (a->cabd) {
    if (a->cab)
      a->cabd->close(a->cabd, a->cab);
    mspack_destroy_cab_decompressor(a->cabd);
  }
  free(a->files);
  free(a);
}

size_t cab_count(const cab_archive *a) { return a ? a->count : 0; }

const char *cab_name(const cab_archive *a, size_t i) {
  return a && i < a->count && a->files[i]->filename ? a->files[i]->filename : "";
}

uint32_t cab_size(const cab_archive *a, size_t i) {
  return a && i < a->count ? (uint32_t)a->files[i]->length : 0;
}

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static bool name_eq_nocase(const char *x, const char *y) {
  for (; *x && *y; x++, y++)
    if (ascii_lower((unsigned char)*x) != ascii_lower((unsigned char)*y))
      return false;
  return *x == *y;
}

size_t cab_find(const cab_archive *a, const char *name) {
  if (!a)
    return (size_t)-1;
  if (name)
    for (size_t i = 0; i < a->count; i++)
      if (name_eq_nocase(cab_name(a, i), name))
        return i;
  return a->count == 1 ? 0 : (size_t)-1;
}

ps_err cab_extract(cab_archive *a, size_t i, uint64_t max_out, cab_sink_fn sink, void *ctx,
                   ps_diag *diag) {
  if (!a || i >= a->count)
    return ps_diag_set(diag, PS_E_INVALID, "CFFILE", (size_t)-1, "no member %zu", i);
  struct mscabd_file *f = a->files[i];
  uint64_t cap = max_out ? max_out : UINT64_MAX;
  if ((uint64_t)f->length > cap)
    return ps_diag_set(diag, PS_E_LIMIT, "CFFILE", (size_t)-1,
                       "member '%.64s' declares %u bytes, over the %llu-byte cap",
                       f->filename ? f->filename : "", f->length, (unsigned long long)cap);
  cab_mfile o;
  memset(&o, 0, sizeof o);
  o.kind = CAB_OUT;
  o.sink = sink;
  o.ctx = ctx;
  o.cap = cap;
  int e = a->cabd->extract(a->cabd, f, (const char *)(void *)&o);
  if (o.err != PS_E_OK) {
    if (o.err == PS_E_LIMIT)
      return ps_diag_set(diag, PS_E_LIMIT, "CFDATA", (size_t)-1,
                         "member inflates past the %llu-byte cap", (unsigned long long)cap);
    return ps_diag_set(diag, o.err, "CFDATA", (size_t)-1, "output sink refused the data");
  }
  if (e != MSPACK_ERR_OK)
    return cab_map_error(e, diag, "CFDATA");
  if (o.written != (uint64_t)f->length)
    return ps_diag_set(diag, PS_E_TRUNCATED, "CFDATA", (size_t)-1,
                       "member produced %llu of %u bytes", (unsigned long long)o.written,
                       f->length);
  return PS_E_OK;
}
