/*
 * store_codec.c - a module on disk: its `modules` row, its table file (the
 * finished symtab's arrays and search indexes as in memory, mapped at load),
 * the older BLOB chunks (layout 3, still read), the CRC-32 over the arrays,
 * and the checks a table from disk passes.  See store_int.h for the layout.
 *
 * The table file (layout STORE_LAYOUT_FILE):
 *
 *   offset 0      table_header (below): magic, version, byte order, size,
 *                 the module's key, the CRC-32 of the arrays (as the row's
 *                 checksum) and of the indexes, and 12 sections
 *   section k     at a 64-byte aligned offset: count records of elem bytes
 *                 1 strings  2 functions  3 lines  4 inline sites
 *                 5 inline ranges  6 publics  7 methods  8 sequence points
 *                 9 line_idx  10 func_idx  11 ir_maxend  12 func_lines (pairs)
 *
 * Load order (store__map_table): the file's size against the row, then the
 * header field by field against the row and the file, then the sections'
 * bounds, element sizes and counts (the indexes' counts against what
 * st_build_index makes of the arrays), then the string pool's ends.  Each
 * failure has its own message.  The records are not read at load: see
 * store__check_records.
 */
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include <zlib.h>

#include "clrnames.h"

/* The BLOBs hold symtab.h's records exactly as in memory.  If one of these
 * sizes changes, the on-disk layout changed: bump STORE_LAYOUT (old modules
 * are then treated as absent and replaced on the next ingest). */
_Static_assert(sizeof(st_func) == 24, "st_func layout changed: bump STORE_LAYOUT");
_Static_assert(sizeof(st_line) == 16, "st_line layout changed: bump STORE_LAYOUT");
_Static_assert(sizeof(st_inline) == 20, "st_inline layout changed: bump STORE_LAYOUT");
_Static_assert(sizeof(st_irange) == 20, "st_irange layout changed: bump STORE_LAYOUT");
_Static_assert(sizeof(st_public) == 16, "st_public layout changed: bump STORE_LAYOUT");
_Static_assert(sizeof(st_method) == 32, "st_method layout changed: bump STORE_LAYOUT");
_Static_assert(sizeof(st_seqpt) == 24, "st_seqpt layout changed: bump STORE_LAYOUT");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the cache stores little-endian records; a big-endian port needs byte swapping in store_codec.c"
#endif

/* kind k (1..8) of st: pointer, count, capacity, element size */
kind_ref store__kind(symtab *st, int k) {
  switch (k) {
  case 1: return (kind_ref){(void **)&st->strs, &st->strs_len, &st->strs_cap, 1};
  case 2: return (kind_ref){(void **)&st->funcs, &st->nfuncs, &st->cfuncs, sizeof(st_func)};
  case 3: return (kind_ref){(void **)&st->lines, &st->nlines, &st->clines, sizeof(st_line)};
  case 4: return (kind_ref){(void **)&st->inlines, &st->ninlines, &st->cinlines, sizeof(st_inline)};
  case 5: return (kind_ref){(void **)&st->iranges, &st->niranges, &st->ciranges, sizeof(st_irange)};
  case 6: return (kind_ref){(void **)&st->publics, &st->npublics, &st->cpublics, sizeof(st_public)};
  case 7: return (kind_ref){(void **)&st->methods, &st->nmethods, &st->cmethods, sizeof(st_method)};
  default: return (kind_ref){(void **)&st->seqpts, &st->nseqpts, &st->cseqpts, sizeof(st_seqpt)};
  }
}

static uint32_t crc_bytes(uint32_t crc, const void *p, size_t n) {
  const unsigned char *b = p;
  uLong c = crc;
  while (n > 0) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, b, k);
    b += k;
    n -= k;
  }
  return (uint32_t)c;
}

uint32_t store__checksum(const symtab *cst) {
  symtab *st = (symtab *)(uintptr_t)cst; /* store__kind only reads through these */
  uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
  for (int k = 1; k <= STORE_NKINDS; k++) {
    kind_ref r = store__kind(st, k);
    if (*r.n)
      crc = crc_bytes(crc, *r.ptr, *r.n * r.elem);
  }
  return crc;
}

/* CRC-32 of the search indexes (a table file's header keeps it). */
static uint32_t index_checksum(const symtab *st) {
  uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
  if (st->nline_idx)
    crc = crc_bytes(crc, st->line_idx, st->nline_idx * sizeof *st->line_idx);
  if (st->nfunc_idx)
    crc = crc_bytes(crc, st->func_idx, st->nfunc_idx * sizeof *st->func_idx);
  if (st->nir_maxend)
    crc = crc_bytes(crc, st->ir_maxend, st->nir_maxend * sizeof *st->ir_maxend);
  if (st->nfunc_lines)
    crc = crc_bytes(crc, st->func_lines, st->nfunc_lines * 2 * sizeof *st->func_lines);
  return crc;
}

static bool str_ok(const symtab *st, uint32_t off) { return off < st->strs_len; }

/* Checks a table loaded from disk before lookups run over it: every index in
 * range, every string offset inside the pool, sort orders as st_finish left
 * them.  Returns NULL or what is wrong. */
static const char *symtab_validate(const symtab *st) {
  if (st->strs_len == 0 || st->strs[0] != '\0' || st->strs[st->strs_len - 1] != '\0')
    return "string pool not NUL-delimited";
  if (!str_ok(st, st->source_link))
    return "source link offset outside the string pool";
  for (size_t i = 0; i < st->nfuncs; i++) {
    const st_func *f = &st->funcs[i];
    if (!str_ok(st, f->name) || (uint64_t)f->ir_first + f->ir_count > st->niranges)
      return "function record out of range";
    if (i && f->rva < st->funcs[i - 1].rva)
      return "functions not sorted";
  }
  for (size_t i = 0; i < st->nlines; i++) {
    if (!str_ok(st, st->lines[i].file))
      return "line record out of range";
    if (i && st->lines[i].rva < st->lines[i - 1].rva)
      return "lines not sorted";
  }
  for (size_t i = 0; i < st->ninlines; i++) {
    const st_inline *in = &st->inlines[i];
    if (!str_ok(st, in->name) || (in->parent != ST_NONE && in->parent >= st->ninlines) ||
        (in->func != ST_NONE && in->func >= st->nfuncs))
      return "inline site out of range";
  }
  for (size_t i = 0; i < st->niranges; i++)
    if (st->iranges[i].inl >= st->ninlines || !str_ok(st, st->iranges[i].file))
      return "inline range out of range";
  for (size_t i = 0; i < st->npublics; i++) {
    if (!str_ok(st, st->publics[i].name) || !str_ok(st, st->publics[i].mangled))
      return "public record out of range";
    if (i && st->publics[i].rva < st->publics[i - 1].rva)
      return "publics not sorted";
  }
  for (size_t i = 0; i < st->nmethods; i++) {
    const st_method *m = &st->methods[i];
    if (!str_ok(st, m->name) || !str_ok(st, m->user) || !str_ok(st, m->local) ||
        m->gen > CN_STATE_MACHINE || (uint64_t)m->sp_first + m->sp_count > st->nseqpts)
      return "method record out of range";
    if (i && m->token <= st->methods[i - 1].token)
      return "methods not sorted";
  }
  for (size_t i = 0; i < st->nseqpts; i++) {
    const st_seqpt *p = &st->seqpts[i];
    if (!str_ok(st, p->file))
      return "sequence point out of range";
    if (i && (p->token < p[-1].token || (p->token == p[-1].token && p->il < p[-1].il)))
      return "sequence points not sorted";
  }
  return NULL;
}

/* ---- the table file ------------------------------------------------------------- */

#define TABLE_MAGIC "PDBSYMT\x01"
#define TABLE_VERSION 1u
#define TABLE_ENDIAN 0x01020304u
#define TABLE_ALIGN 64u
#define TABLE_NSECT 12

typedef struct {
  uint64_t offset; /* from the start of the file, TABLE_ALIGN-aligned */
  uint64_t count;  /* records */
  uint32_t elem;   /* bytes per record */
  uint32_t reserved;
} table_sect;

typedef struct {
  char magic[8];           /* TABLE_MAGIC */
  uint32_t version;        /* TABLE_VERSION */
  uint32_t layout;         /* STORE_LAYOUT_FILE */
  uint32_t endian;         /* TABLE_ENDIAN as written: the records' byte order */
  uint32_t header_bytes;   /* sizeof(table_header) */
  uint64_t file_bytes;     /* the whole file */
  uint32_t checksum;       /* CRC-32 of sections 1..8 (store__checksum, modules.checksum) */
  uint32_t index_checksum; /* CRC-32 of sections 9..12 */
  uint32_t source_link;    /* string offset of the Source Link JSON */
  uint32_t nsect;          /* TABLE_NSECT */
  char key[320];           /* the module's cache key, NUL-terminated */
  table_sect sect[TABLE_NSECT];
} table_header;
_Static_assert(sizeof(table_sect) == 24, "table_sect is an on-disk layout");
_Static_assert(sizeof(table_header) == 48 + 320 + 24 * TABLE_NSECT, "table_header is an on-disk layout");

/* Section k (1..12) of st: pointer, count, record size. */
static void sect_of(symtab *st, int k, void ***ptr, size_t *count, size_t *elem) {
  switch (k) { /* func_lines: its count is of pairs */
  case 9: *ptr = (void **)&st->line_idx; *count = st->nline_idx; *elem = sizeof *st->line_idx; return;
  case 10: *ptr = (void **)&st->func_idx; *count = st->nfunc_idx; *elem = sizeof *st->func_idx; return;
  case 11: *ptr = (void **)&st->ir_maxend; *count = st->nir_maxend; *elem = sizeof *st->ir_maxend; return;
  case 12: *ptr = (void **)&st->func_lines; *count = st->nfunc_lines; *elem = 2 * sizeof *st->func_lines; return;
  default: {
    kind_ref r = store__kind(st, k);
    *ptr = r.ptr;
    *count = *r.n;
    *elem = r.elem;
    return;
  }
  }
}

void store__table_path(const store *s, const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/tables/%s.pst", s->dir, name);
}

/* 16 hex digits nobody else picks: getrandom, else the clock, pid and a counter */
static void new_name(char out[40]) {
  static _Atomic uint64_t counter;
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
  }
  v ^= counter++ * 0x9e3779b97f4a7c15u;
  snprintf(out, 40, "%016" PRIx64, v);
}

static bool write_all(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

ps_err store__write_table(const store *s, const char *key, const symtab *cst, uint32_t checksum,
                          char *name, uint64_t *bytes, ps_diag *diag) {
  symtab *st = (symtab *)(uintptr_t)cst; /* read through sect_of only */
  table_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, TABLE_MAGIC, sizeof h.magic);
  h.version = TABLE_VERSION;
  h.layout = STORE_LAYOUT_FILE;
  h.endian = TABLE_ENDIAN;
  h.header_bytes = sizeof h;
  h.checksum = checksum;
  h.index_checksum = index_checksum(st);
  h.source_link = st->source_link;
  h.nsect = TABLE_NSECT;
  if (strlen(key) >= sizeof h.key)
    return ps_diag_set(diag, PS_E_INVALID, "cache", (size_t)-1, "key too long: %s", key);
  memcpy(h.key, key, strlen(key) + 1);
  uint64_t off = (sizeof h + TABLE_ALIGN - 1) / TABLE_ALIGN * TABLE_ALIGN;
  for (int k = 1; k <= TABLE_NSECT; k++) {
    void **p;
    size_t n, elem;
    sect_of(st, k, &p, &n, &elem);
    h.sect[k - 1].offset = off;
    h.sect[k - 1].count = n;
    h.sect[k - 1].elem = (uint32_t)elem;
    off += ((uint64_t)n * elem + TABLE_ALIGN - 1) / TABLE_ALIGN * TABLE_ALIGN;
  }
  h.file_bytes = off;

  char dir[1200], tmp[1300], path[1300];
  snprintf(dir, sizeof dir, "%s/tables", s->dir);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return ps_diag_set(diag, PS_E_IO, "cache", (size_t)-1, "cannot create %s: %s", dir,
                       strerror(errno));
  new_name(name);
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dir, name);
  store__table_path(s, name, path, sizeof path);
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return ps_diag_set(diag, PS_E_IO, "cache", (size_t)-1, "cannot write %s: %s", tmp,
                       strerror(errno));
  static const char zeros[TABLE_ALIGN];
  bool ok = write_all(f, &h, sizeof h);
  uint64_t at = sizeof h;
  for (int k = 1; ok && k <= TABLE_NSECT; k++) {
    void **p;
    size_t n, elem;
    sect_of(st, k, &p, &n, &elem);
    ok = write_all(f, zeros, (size_t)(h.sect[k - 1].offset - at)) && write_all(f, *p, n * elem);
    at = h.sect[k - 1].offset + (uint64_t)n * elem;
  }
  ok = ok && write_all(f, zeros, (size_t)(h.file_bytes - at));
  int err = ok ? 0 : errno;
  if (fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp);
    return ps_diag_set(diag, err == ENOSPC ? PS_E_LIMIT : PS_E_IO, "cache", (size_t)-1,
                       "cannot write the table file %s: %s", path, strerror(err));
  }
  *bytes = h.file_bytes;
  return PS_E_OK;
}

void store__unmap(store_map *map) {
  if (map->base)
    munmap(map->base, map->len);
  map->base = NULL;
  map->len = 0;
}

void store__unmap_table(symtab *st, store_map *map) {
  st_free_source_link(st);
  store__unmap(map);
}

static uint64_t blocks(uint64_t n) { return (n + ST_INDEX_STEP - 1) / ST_INDEX_STEP; }

const char *store__map_table(const store *s, const module_row *r, const char *key, symtab *st,
                             store_map *map, char *why, size_t cap, bool *transient) {
  *transient = false;
  memset(st, 0, sizeof *st);
  map->base = NULL;
  map->len = 0;
  char path[1300];
  store__table_path(s, r->table_file, path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *transient = errno == EMFILE || errno == ENFILE || errno == ENOMEM;
    snprintf(why, cap, "table file %s: %s", path, strerror(errno));
    return why;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != (uint64_t)r->file_bytes ||
      (uint64_t)sb.st_size < sizeof(table_header) || (uint64_t)sb.st_size > SIZE_MAX) {
    snprintf(why, cap, "table file %s: %lld bytes, the row says %" PRId64, path,
             (long long)sb.st_size, r->file_bytes);
    close(fd);
    return why;
  }
  void *base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *transient = true;
    snprintf(why, cap, "table file %s: cannot map it: %s", path, strerror(errno));
    return why;
  }
  map->base = base;
  map->len = (size_t)sb.st_size;
  /* lookups touch a few scattered pages: no read-around from disk */
  madvise(base, map->len, MADV_RANDOM);
  const table_header *h = base;
  const char *bad = NULL;
  if (memcmp(h->magic, TABLE_MAGIC, sizeof h->magic))
    bad = "not a table file (magic)";
  else if (h->version != TABLE_VERSION || h->layout != STORE_LAYOUT_FILE || h->nsect != TABLE_NSECT ||
           h->header_bytes != sizeof *h)
    bad = "table file of another version";
  else if (h->endian != TABLE_ENDIAN)
    bad = "table file of another byte order";
  else if (h->file_bytes != (uint64_t)sb.st_size)
    bad = "table file size differs from its header";
  else if (strnlen(h->key, sizeof h->key) == sizeof h->key || strcmp(h->key, key))
    bad = "table file of another module";
  else if (h->checksum != r->checksum)
    bad = "table file checksum differs from the row's";
  else if (h->source_link != r->source_link)
    bad = "table file source link differs from the row's";
  for (int k = 1; !bad && k <= TABLE_NSECT; k++) {
    const table_sect *t = &h->sect[k - 1];
    void **p;
    size_t n, elem;
    sect_of(st, k, &p, &n, &elem);
    if (t->elem != elem || t->offset % TABLE_ALIGN || t->offset < sizeof *h)
      bad = "table file section malformed";
    else if (t->offset > h->file_bytes || t->count > (h->file_bytes - t->offset) / elem)
      bad = "table file section past the end";
    else if (k <= STORE_NKINDS && (int64_t)t->count != r->counts[k])
      bad = "table file counts differ from the row's";
  }
  if (!bad) {
    /* the arrays where they lie */
    for (int k = 1; k <= TABLE_NSECT; k++) {
      void **p;
      size_t n, elem;
      sect_of(st, k, &p, &n, &elem);
      const table_sect *t = &h->sect[k - 1];
      *p = t->count ? (char *)base + t->offset : NULL;
      if (k <= STORE_NKINDS) {
        kind_ref ref = store__kind(st, k);
        *ref.n = *ref.cap = (size_t)t->count;
      }
    }
    st->nline_idx = (size_t)h->sect[8].count;
    st->nfunc_idx = (size_t)h->sect[9].count;
    st->nir_maxend = (size_t)h->sect[10].count;
    st->nfunc_lines = (size_t)h->sect[11].count;
    if (st->nline_idx && st->nline_idx != blocks(st->nlines))
      bad = "table file line index does not match the lines";
    else if (st->nfunc_idx && st->nfunc_idx != blocks(st->nfuncs))
      bad = "table file function index does not match the functions";
    else if (st->nir_maxend && st->nir_maxend != st->niranges)
      bad = "table file inline-range index does not match the ranges";
    else if (st->nfunc_lines && st->nfunc_lines != st->nfuncs)
      bad = "table file function lines do not match the functions";
    else if (st->strs_len == 0 || st->strs[0] != '\0' || st->strs[st->strs_len - 1] != '\0')
      bad = "string pool not NUL-delimited";
    else if (!str_ok(st, r->source_link))
      bad = "source link offset outside the string pool";
  }
  if (bad) {
    snprintf(why, cap, "%s (%s)", bad, path);
    memset(st, 0, sizeof *st);
    store__unmap(map);
    return why;
  }
  st->ident = r->ident;
  st->source_link = r->source_link;
  st->finished = true;
  /* the one structure built at load: the Source Link map frames resolve
   * their files' URLs through (small; freed by store__unmap_table) */
  st_build_source_link(st);
  return NULL;
}

const char *store__check_records(const symtab *st, const store_map *map, uint32_t checksum,
                                 char *why, size_t cap) {
  if (map && map->base)
    checksum = ((const table_header *)map->base)->checksum;
  if (store__checksum(st) != checksum) {
    snprintf(why, cap, "checksum mismatch");
    return why;
  }
  if (map && map->base && index_checksum(st) != ((const table_header *)map->base)->index_checksum) {
    snprintf(why, cap, "index checksum mismatch");
    return why;
  }
  const char *bad = symtab_validate(st);
  if (bad) {
    snprintf(why, cap, "%s", bad);
    return why;
  }
  return NULL;
}

/* ---- reading a module back ----------------------------------------------------- */

static const char *SQL_MODULE =
    "SELECT id, status, format, guid, age, pdb_age, stamp, machine, managed, source_link,"
    " source, error, layout, nstrs_bytes, nfuncs, nlines, ninlines, niranges, npublics,"
    " nmethods, nseqpts, data_bytes, checksum, expires_at, image_names, table_file, file_bytes"
    " FROM modules WHERE key = ?";

bool store__read_row(sqlite3 *db, const char *key, module_row *r, int *rc_out) {
  sqlite3_stmt *q = NULL;
  memset(r, 0, sizeof *r);
  int rc = sqlite3_prepare_v2(db, SQL_MODULE, -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
  }
  bool found = rc == SQLITE_ROW;
  if (found) {
    r->id = sqlite3_column_int64(q, 0);
    r->status = sqlite3_column_int(q, 1);
    r->ident.format = (st_format)sqlite3_column_int(q, 2);
    if (sqlite3_column_bytes(q, 3) == 16)
      memcpy(r->ident.guid, sqlite3_column_blob(q, 3), 16);
    r->ident.age = (uint32_t)sqlite3_column_int64(q, 4);
    r->ident.pdb_age = (uint32_t)sqlite3_column_int64(q, 5);
    r->ident.stamp = (uint32_t)sqlite3_column_int64(q, 6);
    r->ident.machine = (uint16_t)sqlite3_column_int(q, 7);
    r->ident.managed = sqlite3_column_int(q, 8) != 0;
    r->source_link = (uint32_t)sqlite3_column_int64(q, 9);
    copy_str(r->source, sizeof r->source, (const char *)sqlite3_column_text(q, 10));
    copy_str(r->error, sizeof r->error, (const char *)sqlite3_column_text(q, 11));
    r->layout = sqlite3_column_int64(q, 12);
    for (int k = 1; k <= STORE_NKINDS; k++)
      r->counts[k] = sqlite3_column_int64(q, 12 + k);
    r->data_bytes = sqlite3_column_int64(q, 21);
    r->checksum = (uint32_t)sqlite3_column_int64(q, 22);
    r->expires_at = sqlite3_column_int64(q, 23);
    r->flags = sqlite3_column_int(q, 24) ? STORE_F_IMAGE_NAMES : 0u;
    copy_str(r->table_file, sizeof r->table_file, (const char *)sqlite3_column_text(q, 25));
    r->file_bytes = sqlite3_column_int64(q, 26);
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  *rc_out = rc;
  return found;
}

/* Loads the arrays of a complete module into st (finished, owned by st).
 * Returns NULL or what is wrong (why, for the log). */
const char *store__load_arrays(sqlite3 *db, const module_row *r, symtab *st, bool check_sum,
                               char *why, size_t cap, bool *transient) {
  *transient = false;
  memset(st, 0, sizeof *st);
  st->ident = r->ident;
  st->source_link = r->source_link;
  size_t have[STORE_NKINDS + 1] = {0};
  int64_t next_seq[STORE_NKINDS + 1] = {0};
  for (int k = 1; k <= STORE_NKINDS; k++) {
    kind_ref ref = store__kind(st, k);
    size_t bytes;
    if (r->counts[k] < 0 || (uint64_t)r->counts[k] > UINT32_MAX ||
        !ps_mul_size((size_t)r->counts[k], ref.elem, &bytes) || bytes > (size_t)r->data_bytes) {
      snprintf(why, cap, "array %d: bad count %" PRId64, k, r->counts[k]);
      st_free(st);
      return why;
    }
    if (bytes) {
      *ref.ptr = malloc(bytes);
      if (!*ref.ptr) {
        snprintf(why, cap, "out of memory");
        *transient = true;
        st_free(st);
        return why;
      }
    }
    *ref.n = *ref.cap = (size_t)r->counts[k];
  }
  sqlite3_stmt *q = NULL;
  sqlite3_blob *blob = NULL;
  const char *bad = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT kind, seq, rowid, length(data) FROM arrays WHERE module = ?"
                         " ORDER BY kind, seq",
                         -1, &q, NULL) != SQLITE_OK) {
    snprintf(why, cap, "%s", sqlite3_errmsg(db));
    *transient = true;
    st_free(st);
    return why;
  }
  sqlite3_bind_int64(q, 1, r->id);
  int rc = SQLITE_DONE;
  while (!bad && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    int k = sqlite3_column_int(q, 0);
    int64_t seq = sqlite3_column_int64(q, 1);
    int64_t rowid = sqlite3_column_int64(q, 2);
    int64_t len = sqlite3_column_int64(q, 3);
    if (k < 1 || k > STORE_NKINDS || seq != next_seq[k]) {
      snprintf(why, cap, "array chunk %d/%" PRId64 " unexpected", k, seq);
      bad = why;
      break;
    }
    next_seq[k]++;
    kind_ref ref = store__kind(st, k);
    size_t total = *ref.n * ref.elem;
    if (len <= 0 || !ps_range_ok(have[k], (size_t)len, total)) {
      snprintf(why, cap, "array %d longer than its count", k);
      bad = why;
      break;
    }
    int brc = blob ? sqlite3_blob_reopen(blob, rowid)
                   : sqlite3_blob_open(db, "main", "arrays", "data", rowid, 0, &blob);
    if (brc == SQLITE_OK)
      brc = sqlite3_blob_read(blob, (char *)*ref.ptr + have[k], (int)len, 0);
    if (brc != SQLITE_OK) {
      snprintf(why, cap, "array %d: %s", k, sqlite3_errmsg(db));
      *transient = (brc & 0xff) != SQLITE_CORRUPT;
      bad = why;
      break;
    }
    have[k] += (size_t)len;
  }
  if (!bad && rc != SQLITE_DONE) {
    snprintf(why, cap, "%s", sqlite3_errmsg(db));
    *transient = (rc & 0xff) != SQLITE_CORRUPT;
    bad = why;
  }
  sqlite3_blob_close(blob);
  sqlite3_finalize(q);
  for (int k = 1; !bad && k <= STORE_NKINDS; k++) {
    kind_ref ref = store__kind(st, k);
    if (have[k] != *ref.n * ref.elem) {
      snprintf(why, cap, "array %d incomplete (%zu of %zu bytes)", k, have[k], *ref.n * ref.elem);
      bad = why;
    }
  }
  if (!bad && check_sum && store__checksum(st) != r->checksum) {
    snprintf(why, cap, "checksum mismatch");
    bad = why;
  }
  if (!bad && (bad = symtab_validate(st)) != NULL) {
    snprintf(why, cap, "%s", bad);
    bad = why;
  }
  if (bad) {
    st_free(st);
    return bad;
  }
  st_build_index(st);
  st->finished = true;
  return NULL;
}

int store__delete_module(store *s, sqlite3 *db, int64_t id) {
  sqlite3_stmt *q = NULL;
  char file[40] = "";
  if (sqlite3_prepare_v2(db, "SELECT table_file FROM modules WHERE id = ?", -1, &q, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_int64(q, 1, id);
    if (sqlite3_step(q) == SQLITE_ROW)
      copy_str(file, sizeof file, (const char *)sqlite3_column_text(q, 0));
  }
  sqlite3_finalize(q);
  q = NULL;
  int rc = sqlite3_prepare_v2(db, "DELETE FROM modules WHERE id = ?", -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, id);
    rc = sqlite3_step(q);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  sqlite3_finalize(q);
  /* the file goes after the transaction (store__unlink_doomed): a crash
   * before its commit must not leave the row without its file */
  if (rc == SQLITE_OK && file[0]) {
    if (s->ndoomed == s->cdoomed) {
      size_t nc = s->cdoomed ? s->cdoomed * 2 : 16;
      void *p = realloc(s->doomed, nc * sizeof *s->doomed);
      if (p) {
        s->doomed = p;
        s->cdoomed = nc;
      }
    }
    if (s->ndoomed < s->cdoomed) /* else left for the sweep of a later open */
      copy_str(s->doomed[s->ndoomed++], sizeof s->doomed[0], file);
  }
  return rc;
}

void store__unlink_doomed(store *s, sqlite3 *db) {
  if (!s->ndoomed)
    return;
  if (db && !sqlite3_get_autocommit(db))
    exec(db, "ROLLBACK"); /* a commit that failed: what it deleted is back */
  sqlite3_stmt *q = NULL;
  bool ok = db && sqlite3_prepare_v2(db, "SELECT 1 FROM modules WHERE table_file = ?", -1, &q,
                                     NULL) == SQLITE_OK;
  for (size_t i = 0; ok && i < s->ndoomed; i++) {
    sqlite3_bind_text(q, 1, s->doomed[i], -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    if (rc == SQLITE_DONE) { /* no row names it (the delete committed) */
      char path[1300];
      store__table_path(s, s->doomed[i], path, sizeof path);
      unlink(path);
    }
  }
  sqlite3_finalize(q);
  s->ndoomed = 0;
}

uint64_t store__sweep_tables(store *s, sqlite3 *db, bool fix) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/tables", s->dir);
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  uint64_t n = 0;
  int64_t now = now_s();
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM modules WHERE table_file = ?", -1, &q, NULL) !=
      SQLITE_OK) {
    closedir(d);
    return 0;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *nm = e->d_name;
    size_t l = strlen(nm);
    bool tmp = !strncmp(nm, ".tmp-", 5);
    bool table = l > 4 && !strcmp(nm + l - 4, ".pst");
    if (!tmp && !table)
      continue;
    char path[1500];
    snprintf(path, sizeof path, "%s/%s", dir, nm);
    struct stat sb;
    if (stat(path, &sb) != 0 || now - (int64_t)sb.st_mtime < STORE_ORPHAN_SECONDS)
      continue; /* young: maybe another process's ingest, about to commit */
    bool named = false;
    if (table) {
      char base[64];
      snprintf(base, sizeof base, "%.*s", (int)(l - 4), nm);
      sqlite3_bind_text(q, 1, base, -1, SQLITE_TRANSIENT);
      named = sqlite3_step(q) == SQLITE_ROW;
      sqlite3_reset(q);
    }
    if (named)
      continue;
    n++;
    if (fix)
      unlink(path);
  }
  sqlite3_finalize(q);
  closedir(d);
  return n;
}

static const char *SQL_INSERT_MODULE =
    "INSERT INTO modules (key, status, format, guid, age, pdb_age, stamp, machine, managed,"
    " source_link, source, layout, nstrs_bytes, nfuncs, nlines, ninlines, niranges, npublics,"
    " nmethods, nseqpts, data_bytes, checksum, fetched_at, last_used, table_file, file_bytes)"
    " VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

int store__insert_module(sqlite3 *db, const char *key, const symtab *cst, const char *source,
                         uint64_t data_bytes, uint32_t checksum, const char *table_file,
                         uint64_t file_bytes, int64_t now) {
  symtab *st = (symtab *)(uintptr_t)cst; /* read through store__kind only */
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(db, SQL_INSERT_MODULE, -1, &q, NULL);
  if (rc != SQLITE_OK)
    return rc;
  int i = 1;
  sqlite3_bind_text(q, i++, key, -1, SQLITE_STATIC);
  sqlite3_bind_int(q, i++, (int)st->ident.format);
  sqlite3_bind_blob(q, i++, st->ident.guid, 16, SQLITE_STATIC);
  sqlite3_bind_int64(q, i++, st->ident.age);
  sqlite3_bind_int64(q, i++, st->ident.pdb_age);
  sqlite3_bind_int64(q, i++, st->ident.stamp);
  sqlite3_bind_int(q, i++, st->ident.machine);
  sqlite3_bind_int(q, i++, st->ident.managed);
  sqlite3_bind_int64(q, i++, st->source_link);
  sqlite3_bind_text(q, i++, source ? source : "", -1, SQLITE_STATIC);
  sqlite3_bind_int(q, i++, STORE_LAYOUT_FILE);
  for (int k = 1; k <= STORE_NKINDS; k++)
    sqlite3_bind_int64(q, i++, (int64_t)*store__kind(st, k).n);
  sqlite3_bind_int64(q, i++, (int64_t)data_bytes);
  sqlite3_bind_int64(q, i++, checksum);
  sqlite3_bind_int64(q, i++, now);
  sqlite3_bind_int64(q, i++, now);
  sqlite3_bind_text(q, i++, table_file, -1, SQLITE_STATIC);
  sqlite3_bind_int64(q, i++, (int64_t)file_bytes);
  rc = sqlite3_step(q);
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}
