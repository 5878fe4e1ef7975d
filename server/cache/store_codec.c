/*
 * store_codec.c - a module and its rows: the finished symtab's arrays written
 * as BLOB chunks of whole records and read back with one blob read each, the
 * CRC-32 over them, and the checks a table read from disk passes before any
 * lookup runs over it.  See store_int.h for the layout.
 */
#include "store_int.h"

#include <inttypes.h>
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

/* ---- reading a module back ----------------------------------------------------- */

static const char *SQL_MODULE =
    "SELECT id, status, format, guid, age, pdb_age, stamp, machine, managed, source_link,"
    " source, error, layout, nstrs_bytes, nfuncs, nlines, ninlines, niranges, npublics,"
    " nmethods, nseqpts, data_bytes, checksum, expires_at, image_names FROM modules"
    " WHERE key = ?";

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

int store__delete_module(sqlite3 *db, int64_t id) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(db, "DELETE FROM modules WHERE id = ?", -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, id);
    rc = sqlite3_step(q);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  sqlite3_finalize(q);
  return rc;
}

static const char *SQL_INSERT_MODULE =
    "INSERT INTO modules (key, status, format, guid, age, pdb_age, stamp, machine, managed,"
    " source_link, source, layout, nstrs_bytes, nfuncs, nlines, ninlines, niranges, npublics,"
    " nmethods, nseqpts, data_bytes, checksum, fetched_at, last_used)"
    " VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

int store__insert_module(sqlite3 *db, const char *key, const symtab *cst, const char *source,
                         uint64_t data_bytes, uint32_t checksum, int64_t now) {
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
  sqlite3_bind_int(q, i++, STORE_LAYOUT);
  for (int k = 1; k <= STORE_NKINDS; k++)
    sqlite3_bind_int64(q, i++, (int64_t)*store__kind(st, k).n);
  sqlite3_bind_int64(q, i++, (int64_t)data_bytes);
  sqlite3_bind_int64(q, i++, checksum);
  sqlite3_bind_int64(q, i++, now);
  sqlite3_bind_int64(q, i++, now);
  rc = sqlite3_step(q);
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE)
    return rc;
  int64_t id = sqlite3_last_insert_rowid(db);
  rc = sqlite3_prepare_v2(db, "INSERT INTO arrays (module, kind, seq, data) VALUES (?, ?, ?, ?)",
                          -1, &q, NULL);
  if (rc != SQLITE_OK)
    return rc;
  for (int k = 1; k <= STORE_NKINDS && rc == SQLITE_OK; k++) {
    kind_ref r = store__kind(st, k);
    size_t total = *r.n * r.elem;
    const char *p = *r.ptr;
    /* chunks hold whole records */
    size_t chunk = STORE_CHUNK - STORE_CHUNK % r.elem;
    for (size_t off = 0, seq = 0; off < total && rc == SQLITE_OK; off += chunk, seq++) {
      size_t n = total - off < chunk ? total - off : chunk;
      sqlite3_bind_int64(q, 1, id);
      sqlite3_bind_int(q, 2, k);
      sqlite3_bind_int64(q, 3, (int64_t)seq);
      sqlite3_bind_blob(q, 4, p + off, (int)n, SQLITE_STATIC);
      rc = sqlite3_step(q);
      rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
      sqlite3_reset(q);
    }
  }
  sqlite3_finalize(q);
  return rc;
}
