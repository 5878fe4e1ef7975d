/*
 * ppdb.c - Portable PDB reader (Portable PDB format v1.0, dotnet/runtime
 * docs/design/specs/PortablePdb-Metadata.md, over ECMA-335 metadata).
 *
 * Reads the #Pdb id, the Document table (names as separator-joined blob
 * parts), MethodDebugInformation sequence-point blobs, StateMachineMethod
 * (MoveNext -> kickoff) and the Source Link custom debug information into a
 * symtab.  Sequence-point blob (spec "SequencePoints Blob"):
 *
 *   header:  LocalSignature (cu32), InitialDocument (cu32, only when the row's
 *            Document column is nil)
 *   records: first: IL offset (cu32); later: delta IL (cu32, 0 = a document
 *            record followed by Document (cu32))
 *            delta lines (cu32), delta columns (cu32 if delta lines is 0, else ci32)
 *            both 0: hidden point; else start line and column: cu32 for the
 *            first visible point, ci32 deltas from the previous visible point.
 */
#include "ppdb.h"

#include <stdlib.h>
#include <string.h>

#include "metadata.h"

#define PPDB_MAX_NAME 8192 /* longest document name kept (longer names are cut) */
#define PPDB_MAX_LINE 0x20000000u
#define PPDB_WORK_BASE ((size_t)1 << 20)

/* CustomDebugInformation kind: Source Link, {CC110556-A091-4D38-9FEC-25AB9A351A6A} */
static const uint8_t GUID_SOURCE_LINK[16] = {0x56, 0x05, 0x11, 0xCC, 0x91, 0xA0, 0x38, 0x4D,
                                             0x9F, 0xEC, 0x25, 0xAB, 0x9A, 0x35, 0x1A, 0x6A};

bool ppdb_is_metadata(const uint8_t *data, size_t len) { return md_is_metadata(data, len); }

/* Joins the name blob's parts with its separator (spec "Document Name Blob")
 * into buf (PPDB_MAX_NAME bytes, not NUL-terminated); returns the length or
 * (size_t)-1 with diag set.  *work counts parts and bytes against a cap: rows
 * may share one long blob. */
static size_t document_name(const md_meta *m, uint32_t blob_idx, char *buf, ps_diag *diag,
                            uint32_t row, size_t *work) {
  const uint8_t *p;
  size_t n;
  if (!md_blob(m, blob_idx, &p, &n)) {
    ps_diag_set(diag, PS_E_CORRUPT, "Document table", md_row_offset(m, MD_DOCUMENT, row),
                "row %u: name blob index 0x%x outside #Blob", (unsigned)row, (unsigned)blob_idx);
    return (size_t)-1;
  }
  if (n == 0)
    return 0;
  ps_reader r;
  rd_init(&r, p, n);
  uint8_t sep = rd_u8(&r, "document name");
  if (sep > 0x7F) {
    ps_diag_set(diag, PS_E_CORRUPT, "Document table", md_ptr_offset(m, p),
                "row %u: name separator 0x%02x is not ASCII", (unsigned)row, sep);
    return (size_t)-1;
  }
  size_t len = 0;
  bool first = true;
  while (rd_ok(&r) && rd_left(&r) > 0) {
    uint32_t part = md_read_cu32(&r, "document name part");
    const uint8_t *pp;
    size_t pn;
    if (!rd_ok(&r) || !md_blob(m, part, &pp, &pn)) {
      ps_diag_set(diag, PS_E_CORRUPT, "Document table", md_ptr_offset(m, p) + rd_tell(&r),
                  "row %u: bad name part", (unsigned)row);
      return (size_t)-1;
    }
    size_t cost = 1 + (pn < PPDB_MAX_NAME ? pn : PPDB_MAX_NAME);
    if (*work < cost) {
      ps_diag_set(diag, PS_E_LIMIT, "Document table", md_row_offset(m, MD_DOCUMENT, row),
                  "row %u: document names exceed the work limit", (unsigned)row);
      return (size_t)-1;
    }
    *work -= cost;
    if (sep && !first && len < PPDB_MAX_NAME)
      buf[len++] = (char)sep;
    first = false;
    size_t take = pn < PPDB_MAX_NAME - len ? pn : PPDB_MAX_NAME - len;
    if (take)
      memcpy(buf + len, pp, take);
    len += take;
  }
  return len;
}

static size_t work_cap(size_t len, size_t per_byte) {
  return (len > PPDB_WORK_BASE ? len : PPDB_WORK_BASE) * per_byte;
}

typedef struct {
  const md_meta *m;
  symtab *st;
  const uint32_t *docs; /* string offsets per document row (index row-1) */
  uint32_t ndocs;
  ps_diag *diag;
  size_t points_left; /* cap on decoded points (rows may share one blob) */
  size_t at;          /* input offset of the record being read (diagnostics) */
} sp_ctx;

static ps_err sp_fail(sp_ctx *c, uint32_t row, const char *msg) {
  return ps_diag_set(c->diag, PS_E_CORRUPT, "MethodDebugInformation", c->at,
                     "method 0x%08x: sequence points: %s", (unsigned)(0x06000000u | row), msg);
}

static ps_err read_seqpts(sp_ctx *c, uint32_t row, uint32_t doc, const uint8_t *p, size_t n) {
  ps_reader r;
  rd_init(&r, p, n);
  size_t base = md_ptr_offset(c->m, p);
  c->at = base;
  md_read_cu32(&r, "local signature");
  if (doc == 0)
    doc = md_read_cu32(&r, "initial document");
  if (!rd_ok(&r))
    return sp_fail(c, row, "truncated header");
  uint32_t token = 0x06000000u | row;
  uint64_t il = 0;
  bool first = true;
  int64_t prev_line = -1, prev_col = -1;
  while (rd_left(&r) > 0) {
    c->at = base + rd_tell(&r);
    uint32_t d = md_read_cu32(&r, "IL offset");
    if (!first) {
      while (rd_ok(&r) && d == 0) {
        doc = md_read_cu32(&r, "document record");
        d = md_read_cu32(&r, "IL offset");
      }
      il += d;
    } else {
      il = d;
    }
    first = false;
    uint32_t dlines = md_read_cu32(&r, "delta lines");
    int64_t dcols = dlines == 0 ? (int64_t)md_read_cu32(&r, "delta columns")
                                : (int64_t)md_read_ci32(&r, "delta columns");
    if (!rd_ok(&r))
      return sp_fail(c, row, r.err == PS_E_CORRUPT ? "bad compressed integer" : "truncated");
    if (il > UINT32_MAX)
      return sp_fail(c, row, "IL offset overflows");
    if (doc == 0 || doc > c->ndocs)
      return sp_fail(c, row, "document row out of range");
    st_seqpt sp;
    memset(&sp, 0, sizeof sp);
    sp.token = token;
    sp.il = (uint32_t)il;
    sp.file = c->docs[doc - 1];
    if (dlines == 0 && dcols == 0) {
      sp.line = sp.end_line = ST_HIDDEN_LINE;
    } else {
      int64_t line, col;
      if (prev_line < 0) {
        line = md_read_cu32(&r, "start line");
        col = md_read_cu32(&r, "start column");
      } else {
        line = prev_line + md_read_ci32(&r, "start line");
        col = prev_col + md_read_ci32(&r, "start column");
      }
      if (!rd_ok(&r))
        return sp_fail(c, row, "truncated point");
      int64_t end_line = line + dlines, end_col = col + dcols;
      if (line < 0 || end_line >= PPDB_MAX_LINE || col < 0 || col > 0xFFFF || end_col < 0 ||
          end_col > 0xFFFF)
        return sp_fail(c, row, "line or column out of range");
      prev_line = line;
      prev_col = col;
      sp.line = (uint32_t)line;
      sp.end_line = (uint32_t)end_line;
      sp.column = (uint16_t)col;
      sp.end_column = (uint16_t)end_col;
    }
    if (c->points_left-- == 0)
      return ps_diag_set(c->diag, PS_E_LIMIT, "MethodDebugInformation", (size_t)-1,
                         "more sequence points than the input can plausibly hold");
    if (!st_add_seqpt(c->st, &sp))
      return ps_diag_set(c->diag, c->st->err, "sequence points", (size_t)-1, "out of budget");
  }
  return PS_E_OK;
}

/* Document hash algorithms and languages (Portable PDB spec, Document table) */
static const struct {
  uint8_t guid[16];
  const char *name;
} KNOWN_GUIDS[] = {
    /* {ff1816ec-aa5e-4d10-87f7-6f4963833460} SHA-1 */
    {{0xec, 0x16, 0x18, 0xff, 0x5e, 0xaa, 0x10, 0x4d, 0x87, 0xf7, 0x6f, 0x49, 0x63, 0x83, 0x34,
      0x60}, "SHA1"},
    /* {8829d00f-11b8-4213-878b-770e8597ac16} SHA-256 */
    {{0x0f, 0xd0, 0x29, 0x88, 0xb8, 0x11, 0x13, 0x42, 0x87, 0x8b, 0x77, 0x0e, 0x85, 0x97, 0xac,
      0x16}, "SHA256"},
    /* {3f5162f8-07c6-11d3-9053-00c04fa302a1} C# */
    {{0xf8, 0x62, 0x51, 0x3f, 0xc6, 0x07, 0xd3, 0x11, 0x90, 0x53, 0x00, 0xc0, 0x4f, 0xa3, 0x02,
      0xa1}, "C#"},
    /* {3a12d0b8-c26c-11d0-b442-00a0244a1dd2} Visual Basic */
    {{0xb8, 0xd0, 0x12, 0x3a, 0x6c, 0xc2, 0xd0, 0x11, 0xb4, 0x42, 0x00, 0xa0, 0x24, 0x4a, 0x1d,
      0xd2}, "VB"},
    /* {ab4f38c9-b6e6-43ba-be3b-58080b2ccce3} F# */
    {{0xc9, 0x38, 0x4f, 0xab, 0xe6, 0xb6, 0xba, 0x43, 0xbe, 0x3b, 0x58, 0x08, 0x0b, 0x2c, 0xcc,
      0xe3}, "F#"},
};

const char *ppdb_guid_name(const uint8_t guid[16]) {
  for (size_t i = 0; i < sizeof KNOWN_GUIDS / sizeof KNOWN_GUIDS[0]; i++)
    if (memcmp(KNOWN_GUIDS[i].guid, guid, 16) == 0)
      return KNOWN_GUIDS[i].name;
  return NULL;
}

ps_err ppdb_documents(const uint8_t *data, size_t len, ppdb_document_fn fn, void *ctx,
                      ps_diag *diag) {
  md_meta m;
  ps_err e = md_open(&m, data, len, 0, diag);
  if (e != PS_E_OK)
    return e;
  if (!m.has_pdb)
    return ps_diag_set(diag, PS_E_UNSUPPORTED, "metadata", 0,
                       "no #Pdb stream: ECMA-335 metadata but not a Portable PDB");
  char *buf = malloc(PPDB_MAX_NAME + 1);
  if (!buf)
    return ps_diag_set(diag, PS_E_NOMEM, "Document table", (size_t)-1, "name buffer");
  size_t work = work_cap(len, 16);
  uint32_t ndocs = md_rows(&m, MD_DOCUMENT);
  for (uint32_t i = 1; i <= ndocs; i++) {
    ppdb_document d;
    memset(&d, 0, sizeof d);
    d.row = i;
    size_t n = document_name(&m, md_get(&m, MD_DOCUMENT, i, 0), buf, diag, i, &work);
    if (n == (size_t)-1) {
      e = diag->code ? diag->code : PS_E_CORRUPT;
      break;
    }
    buf[n] = '\0';
    d.name = buf;
    md_guid(&m, md_get(&m, MD_DOCUMENT, i, 1), d.hash_alg);
    md_guid(&m, md_get(&m, MD_DOCUMENT, i, 3), d.language);
    if (!md_blob(&m, md_get(&m, MD_DOCUMENT, i, 2), &d.hash, &d.hash_len)) {
      e = ps_diag_set(diag, PS_E_CORRUPT, "Document table", (size_t)-1,
                      "row %u: hash blob outside #Blob", (unsigned)i);
      break;
    }
    fn(&d, ctx);
  }
  free(buf);
  return e;
}

ps_err ppdb_identify(const uint8_t *data, size_t len, ppdb_info *out, ps_diag *diag) {
  memset(out, 0, sizeof *out);
  md_meta m;
  ps_err e = md_open(&m, data, len, 0, diag);
  if (e != PS_E_OK)
    return e;
  if (!m.has_pdb)
    return ps_diag_set(diag, PS_E_UNSUPPORTED, "metadata", 0,
                       "no #Pdb stream: ECMA-335 metadata but not a Portable PDB");
  memcpy(out->guid, m.pdb_id, 16);
  out->stamp = (uint32_t)m.pdb_id[16] | ((uint32_t)m.pdb_id[17] << 8) |
               ((uint32_t)m.pdb_id[18] << 16) | ((uint32_t)m.pdb_id[19] << 24);
  out->entry_point = m.entry_point;
  out->documents = md_rows(&m, MD_DOCUMENT);
  out->method_debug_rows = md_rows(&m, MD_METHODDEBUGINFO);
  return PS_E_OK;
}

static ps_err read_pdb(const uint8_t *data, size_t len, ps_budget *budget, symtab *st,
                       ps_diag *diag);

ps_err ppdb_read(const uint8_t *data, size_t len, ps_budget *budget, symtab *st, ps_diag *diag) {
  /* the symbols take a few bytes per byte of the file (reader.h) */
  size_t cap = ps_budget_limit(budget, ps_input_allowance(len));
  ps_err e = read_pdb(data, len, budget, st, diag);
  ps_budget_restore(budget, cap);
  return e;
}

static ps_err read_pdb(const uint8_t *data, size_t len, ps_budget *budget, symtab *st,
                       ps_diag *diag) {
  md_meta m;
  ps_err e = md_open(&m, data, len, 0, diag);
  if (e != PS_E_OK)
    return e;
  if (!m.has_pdb)
    return ps_diag_set(diag, PS_E_UNSUPPORTED, "metadata", 0,
                       "no #Pdb stream: ECMA-335 metadata but not a Portable PDB");
  st->ident.format = ST_FORMAT_PORTABLE;
  memcpy(st->ident.guid, m.pdb_id, 16);
  st->ident.stamp = (uint32_t)m.pdb_id[16] | ((uint32_t)m.pdb_id[17] << 8) |
                    ((uint32_t)m.pdb_id[18] << 16) | ((uint32_t)m.pdb_id[19] << 24);
  st->ident.age = 0;
  st->ident.managed = true;
  st->ident.machine = 0;

  /* documents */
  uint32_t ndocs = md_rows(&m, MD_DOCUMENT);
  ps_err ae = PS_E_OK;
  uint32_t *docs = ps_alloc_array(budget, ndocs, sizeof *docs, &ae);
  char *buf = docs ? ps_alloc_array(budget, PPDB_MAX_NAME, 1, &ae) : NULL;
  if (!docs || !buf) {
    free(docs);
    return ps_diag_set(diag, ae, "Document table", (size_t)-1, "%u documents",
                       (unsigned)ndocs);
  }
  e = PS_E_OK;
  /* work caps: blobs may be shared by many rows, so the input size alone does
   * not bound the decoded size; legitimate files stay far below these */
  size_t work = work_cap(len, 16);
  for (uint32_t i = 1; i <= ndocs && e == PS_E_OK; i++) {
    size_t n = document_name(&m, md_get(&m, MD_DOCUMENT, i, 0), buf, diag, i, &work);
    if (n == (size_t)-1)
      e = diag->code ? diag->code : PS_E_CORRUPT;
    else
      docs[i - 1] = st_str(st, buf, n);
  }
  free(buf);
  ps_budget_release(budget, PPDB_MAX_NAME);

  /* state machines: MoveNext -> kickoff, kept per MethodDef row so each method
   * gets one record (st_finish would otherwise insert them one at a time) */
  uint32_t nmdi = md_rows(&m, MD_METHODDEBUGINFO);
  uint32_t *kick = e == PS_E_OK ? ps_alloc_array(budget, (size_t)nmdi + 1, sizeof *kick, &ae)
                                : NULL;
  if (e == PS_E_OK && !kick)
    e = ps_diag_set(diag, ae, "MethodDebugInformation", (size_t)-1, "%u rows",
                    (unsigned)nmdi);
  uint32_t nsm = md_rows(&m, MD_STATEMACHINEMETHOD);
  for (uint32_t i = 1; i <= nsm && e == PS_E_OK; i++) {
    uint32_t mn = md_get(&m, MD_STATEMACHINEMETHOD, i, 0);
    uint32_t ko = md_get(&m, MD_STATEMACHINEMETHOD, i, 1);
    if (mn == 0 || ko == 0 || mn > 0xFFFFFF || ko > 0xFFFFFF)
      e = ps_diag_set(diag, PS_E_CORRUPT, "StateMachineMethod",
                      md_row_offset(&m, MD_STATEMACHINEMETHOD, i),
                      "row %u: method row out of range", (unsigned)i);
    else if (mn <= nmdi)
      kick[mn] = 0x06000000u | ko;
    else if (!st_add_method(st, 0x06000000u | mn, 0, 0x06000000u | ko))
      e = ps_diag_set(diag, st->err, "StateMachineMethod", (size_t)-1, "out of budget");
  }

  /* sequence points: MethodDebugInformation row i is MethodDef row i */
  sp_ctx c = {&m, st, docs, ndocs, diag, work_cap(len, 4), 0};
  for (uint32_t i = 1; i <= nmdi && e == PS_E_OK; i++) {
    size_t before = st->nseqpts;
    uint32_t doc = md_get(&m, MD_METHODDEBUGINFO, i, 0);
    uint32_t blob = md_get(&m, MD_METHODDEBUGINFO, i, 1);
    const uint8_t *p;
    size_t n;
    if (blob != 0 && !md_blob(&m, blob, &p, &n)) {
      e = ps_diag_set(diag, PS_E_CORRUPT, "MethodDebugInformation",
                      md_row_offset(&m, MD_METHODDEBUGINFO, i), "row %u: blob index 0x%x outside #Blob", (unsigned)i, (unsigned)blob);
      break;
    }
    if (doc > ndocs) {
      c.at = md_row_offset(&m, MD_METHODDEBUGINFO, i);
      e = sp_fail(&c, i, "document row out of range");
      break;
    }
    if (blob != 0)
      e = read_seqpts(&c, i, doc, p, n);
    if (e == PS_E_OK && (st->nseqpts > before || kick[i]) &&
        !st_add_method(st, 0x06000000u | i, 0, kick[i]))
      e = ps_diag_set(diag, st->err, "MethodDebugInformation", (size_t)-1, "out of budget");
  }
  if (kick) {
    free(kick);
    ps_budget_release(budget, ((size_t)nmdi + 1) * sizeof *kick);
  }
  free(docs);
  ps_budget_release(budget, (size_t)ndocs * sizeof *docs);
  if (e != PS_E_OK)
    return e;

  /* Source Link: CustomDebugInformation on the module (HasCustomDebugInformation
   * tag 7 = Module, row 1) */
  uint32_t ncdi = md_rows(&m, MD_CUSTOMDEBUGINFO);
  for (uint32_t i = 1; i <= ncdi; i++) {
    uint8_t kind[16];
    if (!md_guid(&m, md_get(&m, MD_CUSTOMDEBUGINFO, i, 1), kind) ||
        memcmp(kind, GUID_SOURCE_LINK, 16) != 0)
      continue;
    const uint8_t *p;
    size_t n;
    if (!md_blob(&m, md_get(&m, MD_CUSTOMDEBUGINFO, i, 2), &p, &n))
      return ps_diag_set(diag, PS_E_CORRUPT, "CustomDebugInformation",
                         md_row_offset(&m, MD_CUSTOMDEBUGINFO, i),
                         "row %u: Source Link blob outside #Blob", (unsigned)i);
    if (n && !st->source_link)
      st->source_link = st_str(st, (const char *)p, n);
  }
  e = st_finish(st);
  if (e != PS_E_OK)
    return ps_diag_set(diag, e, "symbol table", (size_t)-1, "finishing");
  return PS_E_OK;
}
