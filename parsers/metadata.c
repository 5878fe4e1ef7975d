/*
 * metadata.c - ECMA-335 metadata root, streams, tables and heaps.
 * See metadata.h.  Layouts (ECMA-335 6th ed., II.24.2):
 *
 *   root:   "BSJB" u16 major u16 minor u32 reserved u32 vlen char version[vlen]
 *           u16 flags u16 nstreams, then nstreams x { u32 offset, u32 size,
 *           name NUL-terminated, padded to 4 }
 *   #~:     u32 reserved, u8 major, u8 minor, u8 heap_sizes, u8 reserved,
 *           u64 valid, u64 sorted, u32 rows[popcount(valid)],
 *           (u32 extra if heap_sizes & 0x40), then the tables in number order
 *   #Pdb:   u8 id[20], u32 entry_point, u64 referenced_tables,
 *           u32 rows[popcount(referenced_tables)]
 */
#include "metadata.h"

#include <string.h>

/* Column kinds: 1, 2, 4 = fixed; heap indexes; 0x40|table = simple index;
 * 0x80|coded = coded index. */
enum { K_STR = 0x10, K_GUID = 0x11, K_BLOB = 0x12 };
#define T(t) (0x40 | (t))
#define C(c) (0x80 | (c))

enum {
  CI_TYPEDEFORREF, CI_HASCONSTANT, CI_HASCUSTOMATTR, CI_HASFIELDMARSHAL,
  CI_HASDECLSECURITY, CI_MEMBERREFPARENT, CI_HASSEMANTICS, CI_METHODDEFORREF,
  CI_MEMBERFORWARDED, CI_IMPLEMENTATION, CI_CUSTOMATTRTYPE, CI_RESOLUTIONSCOPE,
  CI_TYPEORMETHODDEF, CI_HASCUSTOMDEBUGINFO, CI__COUNT
};

#define NO 0xFF /* unused tag value */
typedef struct {
  uint8_t bits;
  uint8_t n;
  uint8_t tables[27];
} coded_def;

/* ECMA-335 II.24.2.6 and the Portable PDB spec (HasCustomDebugInformation) */
static const coded_def CODED[CI__COUNT] = {
    [CI_TYPEDEFORREF] = {2, 3, {0x02, 0x01, 0x1B}},
    [CI_HASCONSTANT] = {2, 3, {0x04, 0x08, 0x17}},
    [CI_HASCUSTOMATTR] = {5, 22, {0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0A, 0x00, 0x0E, 0x17,
                                  0x14, 0x11, 0x1A, 0x1B, 0x20, 0x23, 0x26, 0x27, 0x28, 0x2A,
                                  0x2C, 0x2B}},
    [CI_HASFIELDMARSHAL] = {1, 2, {0x04, 0x08}},
    [CI_HASDECLSECURITY] = {2, 3, {0x02, 0x06, 0x20}},
    [CI_MEMBERREFPARENT] = {3, 5, {0x02, 0x01, 0x1A, 0x06, 0x1B}},
    [CI_HASSEMANTICS] = {1, 2, {0x14, 0x17}},
    [CI_METHODDEFORREF] = {1, 2, {0x06, 0x0A}},
    [CI_MEMBERFORWARDED] = {1, 2, {0x04, 0x06}},
    [CI_IMPLEMENTATION] = {2, 3, {0x26, 0x23, 0x27}},
    [CI_CUSTOMATTRTYPE] = {3, 5, {NO, NO, 0x06, 0x0A, NO}},
    [CI_RESOLUTIONSCOPE] = {2, 4, {0x00, 0x1A, 0x23, 0x01}},
    [CI_TYPEORMETHODDEF] = {1, 2, {0x02, 0x06}},
    [CI_HASCUSTOMDEBUGINFO] = {5, 27, {0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0A, 0x00, 0x0E,
                                       0x17, 0x14, 0x11, 0x1A, 0x1B, 0x20, 0x23, 0x26, 0x27,
                                       0x28, 0x2A, 0x2C, 0x2B, 0x30, 0x32, 0x33, 0x34, 0x35}},
};

/* Column schemas, ECMA-335 II.22.x and Portable PDB v1.0 tables; 0 ends a row. */
static const uint8_t SCHEMA[MD_NTABLES][MD_MAX_COLS + 1] = {
    [0x00] = {2, K_STR, K_GUID, K_GUID, K_GUID},                       /* Module */
    [0x01] = {C(CI_RESOLUTIONSCOPE), K_STR, K_STR},                    /* TypeRef */
    [0x02] = {4, K_STR, K_STR, C(CI_TYPEDEFORREF), T(0x04), T(0x06)},  /* TypeDef */
    [0x03] = {T(0x04)},                                                /* FieldPtr */
    [0x04] = {2, K_STR, K_BLOB},                                       /* Field */
    [0x05] = {T(0x06)},                                                /* MethodPtr */
    [0x06] = {4, 2, 2, K_STR, K_BLOB, T(0x08)},                        /* MethodDef */
    [0x07] = {T(0x08)},                                                /* ParamPtr */
    [0x08] = {2, 2, K_STR},                                            /* Param */
    [0x09] = {T(0x02), C(CI_TYPEDEFORREF)},                            /* InterfaceImpl */
    [0x0A] = {C(CI_MEMBERREFPARENT), K_STR, K_BLOB},                   /* MemberRef */
    [0x0B] = {2, C(CI_HASCONSTANT), K_BLOB},                           /* Constant */
    [0x0C] = {C(CI_HASCUSTOMATTR), C(CI_CUSTOMATTRTYPE), K_BLOB},      /* CustomAttribute */
    [0x0D] = {C(CI_HASFIELDMARSHAL), K_BLOB},                          /* FieldMarshal */
    [0x0E] = {2, C(CI_HASDECLSECURITY), K_BLOB},                       /* DeclSecurity */
    [0x0F] = {2, 4, T(0x02)},                                          /* ClassLayout */
    [0x10] = {4, T(0x04)},                                             /* FieldLayout */
    [0x11] = {K_BLOB},                                                 /* StandAloneSig */
    [0x12] = {T(0x02), T(0x14)},                                       /* EventMap */
    [0x13] = {T(0x14)},                                                /* EventPtr */
    [0x14] = {2, K_STR, C(CI_TYPEDEFORREF)},                           /* Event */
    [0x15] = {T(0x02), T(0x17)},                                       /* PropertyMap */
    [0x16] = {T(0x17)},                                                /* PropertyPtr */
    [0x17] = {2, K_STR, K_BLOB},                                       /* Property */
    [0x18] = {2, T(0x06), C(CI_HASSEMANTICS)},                         /* MethodSemantics */
    [0x19] = {T(0x02), C(CI_METHODDEFORREF), C(CI_METHODDEFORREF)},    /* MethodImpl */
    [0x1A] = {K_STR},                                                  /* ModuleRef */
    [0x1B] = {K_BLOB},                                                 /* TypeSpec */
    [0x1C] = {2, C(CI_MEMBERFORWARDED), K_STR, T(0x1A)},               /* ImplMap */
    [0x1D] = {4, T(0x04)},                                             /* FieldRVA */
    [0x1E] = {4, 4},                                                   /* EncLog */
    [0x1F] = {4},                                                      /* EncMap */
    [0x20] = {4, 2, 2, 2, 2, 4, K_BLOB, K_STR, K_STR},                 /* Assembly */
    [0x21] = {4},                                                      /* AssemblyProcessor */
    [0x22] = {4, 4, 4},                                                /* AssemblyOS */
    [0x23] = {2, 2, 2, 2, 4, K_BLOB, K_STR, K_STR, K_BLOB},            /* AssemblyRef */
    [0x24] = {4, T(0x23)},                                             /* AssemblyRefProcessor */
    [0x25] = {4, 4, 4, T(0x23)},                                       /* AssemblyRefOS */
    [0x26] = {4, K_STR, K_BLOB},                                       /* File */
    [0x27] = {4, 4, K_STR, K_STR, C(CI_IMPLEMENTATION)},               /* ExportedType */
    [0x28] = {4, 4, K_STR, C(CI_IMPLEMENTATION)},                      /* ManifestResource */
    [0x29] = {T(0x02), T(0x02)},                                       /* NestedClass */
    [0x2A] = {2, 2, C(CI_TYPEORMETHODDEF), K_STR},                     /* GenericParam */
    [0x2B] = {C(CI_METHODDEFORREF), K_BLOB},                           /* MethodSpec */
    [0x2C] = {T(0x2A), C(CI_TYPEDEFORREF)},                            /* GenericParamConstraint */
    [0x30] = {K_BLOB, K_GUID, K_BLOB, K_GUID},                         /* Document */
    [0x31] = {T(0x30), K_BLOB},                                        /* MethodDebugInformation */
    [0x32] = {T(0x06), T(0x35), T(0x33), T(0x34), 4, 4},               /* LocalScope */
    [0x33] = {2, 2, K_STR},                                            /* LocalVariable */
    [0x34] = {K_STR, K_BLOB},                                          /* LocalConstant */
    [0x35] = {T(0x35), K_BLOB},                                        /* ImportScope */
    [0x36] = {T(0x06), T(0x06)},                                       /* StateMachineMethod */
    [0x37] = {C(CI_HASCUSTOMDEBUGINFO), K_GUID, K_BLOB},               /* CustomDebugInformation */
};

/* tables 0x2D-0x2F do not exist */
static bool table_known(unsigned t) { return t < MD_NTABLES && SCHEMA[t][0] != 0; }

bool md_is_metadata(const uint8_t *data, size_t len) {
  return data && len >= 4 && memcmp(data, "BSJB", 4) == 0;
}

uint32_t md_read_cu32(ps_reader *r, const char *what) {
  uint8_t b0 = rd_u8(r, what);
  if (!rd_ok(r))
    return 0;
  if ((b0 & 0x80) == 0)
    return b0;
  if ((b0 & 0xC0) == 0x80) {
    uint8_t b1 = rd_u8(r, what);
    return ((uint32_t)(b0 & 0x3F) << 8) | b1;
  }
  if ((b0 & 0xE0) == 0xC0) {
    uint8_t b1 = rd_u8(r, what), b2 = rd_u8(r, what), b3 = rd_u8(r, what);
    return ((uint32_t)(b0 & 0x1F) << 24) | ((uint32_t)b1 << 16) | ((uint32_t)b2 << 8) | b3;
  }
  rd_fail(r, PS_E_CORRUPT, what);
  return 0;
}

int32_t md_read_ci32(ps_reader *r, const char *what) {
  size_t start = rd_tell(r);
  uint32_t v = md_read_cu32(r, what);
  if (!rd_ok(r))
    return 0;
  size_t n = rd_tell(r) - start;
  bool neg = (v & 1u) != 0;
  v >>= 1;
  if (neg)
    v |= n == 1 ? 0xFFFFFFC0u : n == 2 ? 0xFFFFE000u : 0xF0000000u;
  int32_t s;
  memcpy(&s, &v, sizeof s);
  return s;
}

/* index width for a column kind */
static uint8_t col_width(const md_meta *m, uint8_t kind, uint8_t heap_sizes) {
  if (kind <= 4)
    return kind;
  if (kind == K_STR)
    return (heap_sizes & 0x01) ? 4 : 2;
  if (kind == K_GUID)
    return (heap_sizes & 0x02) ? 4 : 2;
  if (kind == K_BLOB)
    return (heap_sizes & 0x04) ? 4 : 2;
  if ((kind & 0xC0) == 0x40)
    return m->size_rows[kind & 0x3F] < 0x10000u ? 2 : 4;
  const coded_def *c = &CODED[kind & 0x3F];
  uint32_t limit = 1u << (16 - c->bits);
  for (unsigned i = 0; i < c->n; i++)
    if (c->tables[i] != NO && m->size_rows[c->tables[i]] >= limit)
      return 4;
  return 2;
}

static ps_err fail(ps_diag *d, ps_err code, const char *where, size_t off, const char *msg) {
  return ps_diag_set(d, code, where, off, "%s", msg);
}

/* #Pdb stream: id, entry point, referenced type-system row counts */
static ps_err read_pdb_stream(md_meta *m, ps_reader *r, uint32_t ext_rows[64], ps_diag *diag) {
  rd_copy(r, m->pdb_id, 20, "#Pdb stream");
  m->entry_point = rd_u32(r, "#Pdb stream");
  uint64_t refd = rd_u64(r, "#Pdb stream");
  if (!rd_ok(r))
    return rd_to_diag(r, diag);
  for (unsigned t = 0; t < 64; t++) {
    if (!(refd & ((uint64_t)1 << t)))
      continue;
    if (t >= 0x30 || !table_known(t))
      return fail(diag, PS_E_CORRUPT, "#Pdb stream", r->origin + rd_tell(r),
                  "referenced table is not a type-system table");
    ext_rows[t] = rd_u32(r, "#Pdb row counts");
  }
  m->has_pdb = true;
  return rd_to_diag(r, diag);
}

ps_err md_open(md_meta *m, const uint8_t *data, size_t len, size_t origin, ps_diag *diag) {
  memset(m, 0, sizeof *m);
  m->base = data;
  m->len = len;
  m->origin = origin;
  ps_reader r;
  rd_init(&r, data, len);
  r.origin = origin;
  uint32_t sig = rd_u32(&r, "metadata root");
  if (rd_ok(&r) && sig != 0x424A5342u)
    return fail(diag, PS_E_CORRUPT, "metadata root", origin, "signature is not BSJB");
  rd_skip(&r, 8, "metadata root"); /* major, minor, reserved */
  uint32_t vlen = rd_u32(&r, "metadata root");
  if (rd_ok(&r) && vlen > 255)
    return fail(diag, PS_E_CORRUPT, "metadata root", origin + 12, "version string too long");
  rd_skip(&r, vlen, "metadata version");
  rd_align(&r, 4, "metadata version");
  rd_u16(&r, "metadata root flags");
  uint16_t nstreams = rd_u16(&r, "metadata root");
  if (!rd_ok(&r))
    return rd_to_diag(&r, diag);

  const uint8_t *tables = NULL;
  size_t tables_len = 0, tables_off = 0;
  ps_reader pdb;
  rd_init(&pdb, NULL, 0);
  bool have_pdb = false;
  for (unsigned i = 0; i < nstreams; i++) {
    uint32_t off = rd_u32(&r, "stream header");
    uint32_t size = rd_u32(&r, "stream header");
    size_t at = rd_tell(&r);
    size_t nlen;
    const char *name = rd_cstr(&r, &nlen, "stream header name");
    rd_align(&r, 4, "stream header name");
    if (!rd_ok(&r))
      return rd_to_diag(&r, diag);
    if (nlen > 31)
      return fail(diag, PS_E_CORRUPT, "stream header", origin + at, "stream name too long");
    if (!ps_range_ok(off, size, len)) {
      char safe[32]; /* the name as printable ASCII: it goes into a message */
      for (size_t k = 0; k <= nlen; k++)
        safe[k] = k == nlen ? '\0' : (name[k] >= 0x20 && name[k] < 0x7F) ? name[k] : '?';
      return ps_diag_set(diag, PS_E_CORRUPT, "stream header", origin + at,
                         "stream %s lies outside the metadata (offset 0x%x, size 0x%x)", safe,
                         (unsigned)off, (unsigned)size);
    }
    const uint8_t *p = data + off;
    if (strcmp(name, "#~") == 0) {
      tables = p;
      tables_len = size;
      tables_off = off;
    } else if (strcmp(name, "#Strings") == 0) {
      m->strings = p;
      m->strings_len = size;
    } else if (strcmp(name, "#Blob") == 0) {
      m->blob = p;
      m->blob_len = size;
    } else if (strcmp(name, "#GUID") == 0) {
      m->guid = p;
      m->guid_len = size;
    } else if (strcmp(name, "#Pdb") == 0) {
      rd_init(&pdb, p, size);
      pdb.origin = origin + off;
      have_pdb = true;
    } else if (strcmp(name, "#-") == 0 || strcmp(name, "#JTD") == 0) {
      return ps_diag_set(diag, PS_E_UNSUPPORTED, "metadata streams", origin + at,
                         "uncompressed %s stream: an Edit-and-Continue delta cannot be "
                         "read on its own",
                         name);
    }
  }

  uint32_t ext_rows[64] = {0};
  if (have_pdb) {
    ps_err e = read_pdb_stream(m, &pdb, ext_rows, diag);
    if (e != PS_E_OK)
      return e;
  }
  if (!tables)
    return PS_E_OK; /* no tables: every table reads as empty */

  ps_reader t;
  rd_init(&t, tables, tables_len);
  t.origin = origin + tables_off;
  rd_skip(&t, 6, "#~ header");
  uint8_t heap_sizes = rd_u8(&t, "#~ header");
  rd_u8(&t, "#~ header");
  uint64_t valid = rd_u64(&t, "#~ header");
  rd_u64(&t, "#~ header"); /* sorted */
  if (!rd_ok(&t))
    return rd_to_diag(&t, diag);
  for (unsigned i = 0; i < 64; i++) {
    if (!(valid & ((uint64_t)1 << i)))
      continue;
    if (!table_known(i))
      return ps_diag_set(diag, PS_E_CORRUPT, "#~ header", t.origin + 8,
                         "unknown table 0x%02x marked present", i);
    uint32_t rows = rd_u32(&t, "#~ row counts");
    if (rows > 0x00FFFFFFu)
      return ps_diag_set(diag, PS_E_CORRUPT, "#~ row counts", t.origin + rd_tell(&t) - 4,
                         "table 0x%02x claims %u rows", i, (unsigned)rows);
    m->tables[i].rows = rows;
  }
  if (heap_sizes & 0x40)
    rd_u32(&t, "#~ extra data");
  if (!rd_ok(&t))
    return rd_to_diag(&t, diag);
  if (m->tables[MD_ENCMAP].rows)
    return fail(diag, PS_E_UNSUPPORTED, "#~ tables", t.origin,
                "EncMap table present: an Edit-and-Continue delta cannot be read on its own");
  for (unsigned i = 0; i < MD_NTABLES; i++)
    m->size_rows[i] = m->tables[i].rows ? m->tables[i].rows : ext_rows[i];

  size_t pos = rd_tell(&t);
  for (unsigned i = 0; i < MD_NTABLES; i++) {
    md_table *tb = &m->tables[i];
    if (!table_known(i))
      continue;
    unsigned off = 0, c = 0;
    for (; c < MD_MAX_COLS && SCHEMA[i][c]; c++) {
      uint8_t w = col_width(m, SCHEMA[i][c], heap_sizes);
      tb->col_off[c] = (uint8_t)off;
      tb->col_size[c] = w;
      off += w;
    }
    tb->ncols = (uint8_t)c;
    tb->row_size = off;
    if (!tb->rows)
      continue;
    size_t bytes;
    if (!ps_mul_size(tb->rows, tb->row_size, &bytes) || !ps_range_ok(pos, bytes, tables_len))
      return ps_diag_set(diag, PS_E_TRUNCATED, "#~ tables", t.origin + pos,
                         "table 0x%02x (%u rows of %u bytes) runs past the stream", i,
                         (unsigned)tb->rows, (unsigned)tb->row_size);
    tb->offset = tables_off + pos;
    pos += bytes;
  }
  m->has_tables = true;
  return PS_E_OK;
}

size_t md_row_offset(const md_meta *m, unsigned table, uint32_t row) {
  if (table >= MD_NTABLES || row == 0 || row > m->tables[table].rows)
    return (size_t)-1;
  return m->origin + m->tables[table].offset + (size_t)(row - 1) * m->tables[table].row_size;
}

uint32_t md_get(const md_meta *m, unsigned table, uint32_t row, unsigned col) {
  if (table >= MD_NTABLES)
    return 0;
  const md_table *tb = &m->tables[table];
  if (row == 0 || row > tb->rows || col >= tb->ncols)
    return 0;
  const uint8_t *p = m->base + tb->offset + (size_t)(row - 1) * tb->row_size + tb->col_off[col];
  switch (tb->col_size[col]) {
  case 1:
    return p[0];
  case 2:
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
  default:
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
  }
}

const char *md_string(const md_meta *m, uint32_t idx, size_t *len) {
  if (len)
    *len = 0;
  if (!m->strings || idx >= m->strings_len)
    return NULL;
  const uint8_t *s = m->strings + idx;
  size_t scan = m->strings_len - idx;
  if (scan > MD_MAX_STRING + 1)
    scan = MD_MAX_STRING + 1; /* bounds the work a hostile unterminated heap costs */
  const uint8_t *nul = memchr(s, 0, scan);
  if (!nul)
    return NULL;
  if (len)
    *len = (size_t)(nul - s);
  return (const char *)s;
}

bool md_blob(const md_meta *m, uint32_t idx, const uint8_t **p, size_t *len) {
  *p = NULL;
  *len = 0;
  if (idx == 0)
    return true;
  if (!m->blob || idx >= m->blob_len)
    return false;
  ps_reader r;
  rd_init(&r, m->blob + idx, m->blob_len - idx);
  uint32_t n = md_read_cu32(&r, "#Blob");
  if (!rd_ok(&r) || n > rd_left(&r))
    return false;
  *p = m->blob + idx + rd_tell(&r);
  *len = n;
  return true;
}

bool md_guid(const md_meta *m, uint32_t idx, uint8_t out[16]) {
  memset(out, 0, 16);
  if (idx == 0 || !m->guid || (size_t)idx > m->guid_len / 16)
    return false;
  memcpy(out, m->guid + (size_t)(idx - 1) * 16, 16);
  return true;
}
