/*
 * pdb.c - Windows PDB (MSF 7.00) reader: identity, DBI, module symbols, C13 and
 * C11 lines, inline sites, publics, managed methods and sequence points.
 *
 * Sources: LLVM docs/PDB/ (*.rst) (PdbStream, DbiStream, ModiStream, TpiStream,
 * PublicStream, CodeViewSymbols), microsoft-pdb include/cvinfo.h and
 * PDB/dbi/dbi.h.  Streams read (by index):
 *
 *   1  PDB info     version | signature | age | GUID | named stream map ("/names")
 *   3  DBI          header (64 bytes) | module infos | section contributions |
 *                   section map | file info | type server map | EC | debug header
 *   4  IPI          LF_FUNC_ID / LF_MFUNC_ID / LF_STRING_ID (inlinee names)
 *   2  TPI          class names of LF_MFUNC_ID parents (read only when needed)
 *   modules         u32 signature | symbols | C11 lines | C13 subsections
 *   symbol records  S_PUB32 (publics)
 *   debug header    section headers (original ones under OMAP), OMAP from-src
 *
 * Every module is read in one pass into the symtab arrays; non-contiguous
 * streams are copied into one scratch buffer reused for all modules.
 */
#include "pdb.h"

#include <stdlib.h>
#include <string.h>

#include "msf.h"
#include "undname.h"

/* ---- record kinds (microsoft-pdb cvinfo.h) ------------------------------- */
enum {
  S_END = 0x0006,
  S_THUNK32_ST = 0x0206,
  S_LPROC32_ST = 0x100a,
  S_GPROC32_ST = 0x100b,
  S_PUB32_ST = 0x1009,
  S_GMANPROC_ST = 0x101a,
  S_LMANPROC_ST = 0x101b,
  S_THUNK32 = 0x1102,
  S_BLOCK32 = 0x1103,
  S_WITH32 = 0x1104,
  S_PUB32 = 0x110e,
  S_LPROC32 = 0x110f,
  S_GPROC32 = 0x1110,
  S_GMANPROC = 0x112a,
  S_LMANPROC = 0x112b,
  S_SEPCODE = 0x1132,
  S_LPROC32_ID = 0x1146,
  S_GPROC32_ID = 0x1147,
  S_INLINESITE = 0x114d,
  S_INLINESITE_END = 0x114e,
  S_PROC_ID_END = 0x114f,
  S_LPROC32_DPC = 0x1155,
  S_LPROC32_DPC_ID = 0x1156,
  S_INLINESITE2 = 0x115d,
};
enum {
  LF_CLASS = 0x1504,
  LF_STRUCTURE = 0x1505,
  LF_UNION = 0x1506,
  LF_ENUM = 0x1507,
  LF_INTERFACE = 0x1519,
  LF_FUNC_ID = 0x1601,
  LF_MFUNC_ID = 0x1602,
  LF_STRING_ID = 0x1605,
};
enum {
  DEBUG_S_LINES = 0xf2,
  DEBUG_S_FILECHKSMS = 0xf4,
  DEBUG_S_INLINEELINES = 0xf6,
  DEBUG_S_CROSSSCOPEIMPORTS = 0xf7,
  DEBUG_S_CROSSSCOPEEXPORTS = 0xf8,
};
enum { CV_SIGNATURE_C13 = 4 };

/* DBI stream header, LLVM docs/PDB/DbiStream.rst "Stream Header" */
enum { DBI_HEADER_SIZE = 64 };
/* module info fixed part, DbiStream.rst "Module Info Substream" */
enum { MODI_FIXED_SIZE = 64 };
/* TPI/IPI stream header, TpiStream.rst */
enum { TPI_HEADER_SIZE = 56 };
/* IMAGE_SECTION_HEADER (PE/COFF spec) */
enum { SECTION_HEADER_SIZE = 40 };

/* debug header stream slots, DbiStream.rst "Optional Debug Header Stream" */
enum { DBG_OMAP_TO_SRC = 3, DBG_OMAP_FROM_SRC = 4, DBG_SECTION_HDR = 5, DBG_SECTION_HDR_ORIG = 10 };

#define MAX_SCOPE_DEPTH 128
#define NAME_CAP 4096

typedef struct {
  uint32_t from, to;
} omap_entry;

typedef struct {
  uint32_t chk_off;  /* offset of the entry inside the checksums subsection */
  uint32_t name;     /* string offset in st */
} file_ref;

typedef struct {
  uint32_t inlinee;
  uint32_t chk_off;
  uint32_t line;
} inlinee_src;

typedef struct {
  uint32_t off;   /* start offset inside segment */
  uint32_t len;
  uint16_t seg;
  uint32_t token;
} manproc;

typedef struct {
  int kind;          /* 0 other, 1 proc, 2 inline site */
  uint32_t inl;      /* st inline index (kind 2) */
} scope;

typedef struct {
  msf_file msf;
  symtab *st;
  ps_diag *diag;
  ps_budget *budget;
  /* sections: virtual addresses, 1-based section numbers */
  uint32_t *sect_va;
  uint32_t nsect;
  /* the image's sections (after OMAP, the relinked ones), sorted by start:
   * what bounds a public and tells code from data */
  struct img_sect {
    uint32_t start, end;
    bool code;
  } *isect;
  size_t nisect, cisect;
  omap_entry *omap;
  size_t nomap;
  uint32_t *img_starts; /* sorted image rvas where an OMAP piece starts */
  size_t nimg;
  /* OMAP to-src (image -> source) as source intervals, sorted by source rva */
  struct inv_block {
    uint32_t src, len, img;
  } *inv;
  size_t ninv;
  uint32_t inv_maxlen;
  /* section contributions (source-space rva, size, module), sorted by rva */
  struct contrib {
    uint32_t rva, size, mod;
  } *contribs;
  size_t ncontribs;
  uint32_t cur_mod;
  /* modules (from the DBI module info), for cross-module id references */
  struct modinfo {
    const char *name;
    size_t name_len;
    size_t at;
    uint32_t sym, c11, c13;
    uint16_t sn;
  } *mods;
  size_t nmods;
  /* this module's cross-scope imports subsection (borrowed while it is read) */
  const uint8_t *imports;
  size_t imports_len;
  /* every module's cross-scope exports, sorted by (module, local id) */
  struct xexport {
    uint32_t mod, local, global;
  } *exports;
  size_t nexports, cexports;
  bool exports_loaded;
  /* /names */
  msf_stream_t names;
  const uint8_t *names_buf;
  uint32_t names_len;
  /* IPI and TPI record offsets */
  msf_stream_t ipi, tpi;
  uint32_t ipi_begin, tpi_begin;
  uint32_t *ipi_off, *tpi_off;
  uint32_t nipi, ntpi;
  bool tpi_tried;
  /* scratch reused across modules */
  uint8_t *scratch;
  size_t scratch_cap;
  file_ref *files;
  size_t nfiles, cfiles;
  inlinee_src *isrc;
  size_t nisrc, cisrc;
  manproc *mprocs;
  size_t nmprocs, cmprocs;
  char name[NAME_CAP];
} pdb_ctx;

static bool grow_arr(pdb_ctx *c, void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap)
    return true;
  size_t ncap = *cap ? *cap * 2 : 64;
  ps_err e = PS_E_OK;
  void *p = ps_realloc_array(c->budget, *arr, *cap, ncap, elem, &e);
  if (!p) {
    ps_diag_set(c->diag, e, "PDB scratch", (size_t)-1, "growing a work array");
    return false;
  }
  *arr = p;
  *cap = ncap;
  return true;
}

static void free_arr(pdb_ctx *c, void *p, size_t cap, size_t elem) {
  if (p)
    ps_budget_release(c->budget, cap * elem);
  free(p);
}

static uint32_t ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* ---- addresses ------------------------------------------------------------ */

/* section:offset -> RVA in the PDB's (pre-OMAP) address space */
static bool sect_rva(const pdb_ctx *c, uint16_t seg, uint32_t off, uint32_t *rva) {
  if (seg == 0 || seg > c->nsect)
    return false;
  uint64_t v = (uint64_t)c->sect_va[seg - 1] + off;
  if (v > UINT32_MAX)
    return false;
  *rva = (uint32_t)v;
  return true;
}

/* index of the last OMAP entry with from <= rva, or -1 */
static long omap_find(const pdb_ctx *c, uint32_t rva) {
  size_t lo = 0, hi = c->nomap;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->omap[mid].from <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (long)lo - 1;
}

/* source RVA -> image RVA; false when OMAP drops the address */
static bool omap_map(const pdb_ctx *c, uint32_t rva, uint32_t *out) {
  if (!c->nomap) {
    *out = rva;
    return true;
  }
  long i = omap_find(c, rva);
  if (i < 0 || c->omap[i].to == 0)
    return false;
  *out = c->omap[i].to + (rva - c->omap[i].from);
  return true;
}

/* true when the section contribution holding src_rva belongs to another
 * module: identical-code folding leaves several modules' procedures and lines
 * at one address, and the linker's contribution names the one it kept (as
 * LLVM's SymbolCache and DIA pick the module). */
static bool foreign_code(const pdb_ctx *c, uint32_t src_rva) {
  size_t lo = 0, hi = c->ncontribs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->contribs[mid].rva <= src_rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return false;
  const struct contrib *k = &c->contribs[lo - 1];
  if (src_rva - k->rva >= k->size)
    return false;
  return k->mod != c->cur_mod;
}

static int cmp_contrib(const void *a, const void *b) {
  const struct contrib *x = a, *y = b;
  return x->rva < y->rva ? -1 : x->rva > y->rva;
}

/* the first image rva > rva where an OMAP block starts, or UINT64_MAX */
static uint64_t img_next(const pdb_ctx *c, uint32_t rva) {
  size_t lo = 0, hi = c->nimg;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->img_starts[mid] <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < c->nimg ? c->img_starts[lo] : UINT64_MAX;
}

static int cmp_inv(const void *a, const void *b) {
  const struct inv_block *x = a, *y = b;
  if (x->src != y->src)
    return x->src < y->src ? -1 : 1;
  return x->img < y->img ? -1 : x->img > y->img;
}

static int cmp_u32p(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Calls emit for each image-space piece of the source range [rva, rva+len). */
typedef bool (*range_fn)(pdb_ctx *c, uint32_t rva, uint32_t len, void *arg);
static bool map_range(pdb_ctx *c, uint32_t rva, uint32_t len, range_fn emit, void *arg) {
  if (!c->nomap)
    return emit(c, rva, len, arg);
  if (c->ninv) {
    /* DIA maps an image address back to the source through OMAP to-src and
     * looks it up there: so a source range covers every image block whose
     * to-src interval overlaps it (several blocks can map onto one source
     * byte, as in the padding a relinker fills in) */
    uint64_t s = rva, e = (uint64_t)rva + len;
    uint64_t key = s > c->inv_maxlen ? s - c->inv_maxlen : 0;
    size_t lo = 0, hi = c->ninv;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (c->inv[mid].src < key)
        lo = mid + 1;
      else
        hi = mid;
    }
    for (size_t j = lo; j < c->ninv && c->inv[j].src < e; j++) {
      const struct inv_block *b = &c->inv[j];
      uint64_t a = s > b->src ? s : b->src;
      uint64_t z = (uint64_t)b->src + b->len < e ? (uint64_t)b->src + b->len : e;
      if (a >= z)
        continue;
      uint64_t img = (uint64_t)b->img + (a - b->src);
      if (img <= UINT32_MAX && !emit(c, (uint32_t)img, (uint32_t)(z - a), arg))
        return false;
    }
    return true;
  }
  uint64_t cur = rva, end = (uint64_t)rva + len;
  long i = omap_find(c, rva);
  if (i < 0)
    i = 0;
  while (cur < end && (size_t)i < c->nomap) {
    const omap_entry *e = &c->omap[i];
    uint64_t block_end = (size_t)i + 1 < c->nomap ? c->omap[i + 1].from : UINT64_MAX;
    uint64_t piece_end = block_end;
    if (piece_end > end)
      piece_end = end;
    if (cur < e->from) {
      cur = e->from;
      continue;
    }
    if (piece_end > cur && e->to != 0) {
      uint64_t to = (uint64_t)e->to + (cur - e->from);
      uint64_t n = piece_end - cur;
      if (piece_end == block_end) {
        /* the piece ends where its OMAP block ends: the image bytes up to
         * the next mapped block (padding the relinker inserted) still map
         * back here, as DIA's image-to-source lookup sees them */
        uint64_t next = img_next(c, (uint32_t)to);
        if (next > to + n && next != UINT64_MAX)
          n = next - to;
      }
      if (to <= UINT32_MAX && n <= UINT32_MAX && !emit(c, (uint32_t)to, (uint32_t)n, arg))
        return false;
    }
    if (piece_end > cur)
      cur = piece_end;
    i++;
  }
  return true;
}

/* ---- strings ---------------------------------------------------------------- */

static const char *names_at(const pdb_ctx *c, uint32_t off, size_t *len) {
  *len = 0;
  if (!c->names_buf || off >= c->names_len)
    return NULL;
  const uint8_t *s = c->names_buf + off;
  const uint8_t *nul = memchr(s, 0, c->names_len - off);
  if (!nul)
    return NULL;
  *len = (size_t)(nul - s);
  return (const char *)s;
}

/* A record's name: NUL-terminated, or length-prefixed for the _ST kinds. */
static const char *rec_name(const uint8_t *p, size_t left, bool st, size_t *len) {
  *len = 0;
  if (st) {
    if (left < 1 || p[0] > left - 1)
      return NULL;
    *len = p[0];
    return (const char *)p + 1;
  }
  const uint8_t *nul = memchr(p, 0, left);
  *len = nul ? (size_t)(nul - p) : left; /* tolerate a name that runs to the record end */
  return (const char *)p;
}

/* ---- type records (IPI/TPI) ----------------------------------------------- */

/* Indexes the records of a TPI-format stream: off[i] is the offset of type
 * index begin+i. */
static ps_err index_types(pdb_ctx *c, msf_stream_t *s, const char *what, uint32_t *begin,
                          uint32_t **offs, uint32_t *count) {
  ps_reader r;
  rd_init(&r, s->data, s->len);
  uint32_t version = rd_u32(&r, what);
  uint32_t hdr = rd_u32(&r, what);
  uint32_t tbegin = rd_u32(&r, what);
  uint32_t tend = rd_u32(&r, what);
  uint32_t bytes = rd_u32(&r, what);
  if (!rd_ok(&r))
    return rd_to_diag(&r, c->diag);
  (void)version;
  if (hdr < TPI_HEADER_SIZE || hdr > s->len)
    return ps_diag_set(c->diag, PS_E_CORRUPT, what, 4, "header size %u", hdr);
  if (tend < tbegin)
    return ps_diag_set(c->diag, PS_E_CORRUPT, what, 12,
                       "type index end 0x%x before begin 0x%x", tend, tbegin);
  if (bytes > s->len - hdr)
    return ps_diag_set(c->diag, PS_E_TRUNCATED, what, 16,
                       "%u bytes of records, the stream holds %zu", bytes, s->len - hdr);
  uint32_t n = tend - tbegin;
  if (n > bytes / 4)
    return ps_diag_set(c->diag, PS_E_CORRUPT, what, 12,
                       "%u types cannot fit in %u bytes", n, bytes);
  ps_err e = PS_E_OK;
  uint32_t *o = ps_alloc_array(c->budget, n ? n : 1, sizeof *o, &e);
  if (!o)
    return ps_diag_set(c->diag, e, what, 12, "%u types", n);
  size_t pos = hdr, end = (size_t)hdr + bytes;
  uint32_t i = 0;
  while (i < n && pos + 4 <= end) {
    uint16_t len = ld16(s->data + pos);
    if (len < 2 || pos + 2 + len > end) {
      free(o);
      ps_budget_release(c->budget, (size_t)(n ? n : 1) * sizeof *o);
      return ps_diag_set(c->diag, PS_E_CORRUPT, what, pos, "type record of length %u", len);
    }
    o[i++] = (uint32_t)pos;
    pos += 2u + len;
  }
  *begin = tbegin;
  *offs = o;
  *count = i; /* fewer records than announced: the rest stay unknown */
  return PS_E_OK;
}

/* Record of type index ti: kind and payload (after the kind), or false. */
static bool type_rec(const msf_stream_t *s, const uint32_t *offs, uint32_t begin, uint32_t n,
                     uint32_t ti, uint16_t *kind, const uint8_t **p, size_t *len) {
  if (ti < begin || ti - begin >= n)
    return false;
  uint32_t off = offs[ti - begin];
  uint16_t rl = ld16(s->data + off);
  *kind = ld16(s->data + off + 2);
  *p = s->data + off + 4;
  *len = rl - 2u;
  return true;
}

/* Skips a numeric leaf (cvinfo.h LF_NUMERIC); false if unknown. */
static bool skip_numeric(const uint8_t **p, size_t *len) {
  if (*len < 2)
    return false;
  uint16_t v = ld16(*p);
  size_t extra = 0;
  if (v >= 0x8000) {
    switch (v) {
    case 0x8000: extra = 1; break;
    case 0x8001: case 0x8002: extra = 2; break;
    case 0x8003: case 0x8004: extra = 4; break;
    case 0x8009: case 0x800a: extra = 8; break;
    default: return false;
    }
  }
  if (*len < 2 + extra)
    return false;
  *p += 2 + extra;
  *len -= 2 + extra;
  return true;
}

/* Appends s to c->name at *pos (truncating). */
static void name_append(pdb_ctx *c, size_t *pos, const char *s, size_t n) {
  if (*pos + 1 >= NAME_CAP)
    return;
  if (n > NAME_CAP - 1 - *pos)
    n = NAME_CAP - 1 - *pos;
  memcpy(c->name + *pos, s, n);
  *pos += n;
  c->name[*pos] = '\0';
}

/* Name of a class/struct/union/enum type in the TPI stream. */
static bool tpi_udt_name(pdb_ctx *c, uint32_t ti, const char **out, size_t *olen) {
  if (!c->tpi_tried) {
    c->tpi_tried = true;
    ps_diag scratch_diag;
    ps_diag_clear(&scratch_diag);
    ps_diag *save = c->diag;
    c->diag = &scratch_diag; /* a bad TPI only costs class prefixes */
    if (msf_stream(&c->msf, 2, &c->tpi, c->diag) == PS_E_OK &&
        index_types(c, &c->tpi, "TPI stream", &c->tpi_begin, &c->tpi_off, &c->ntpi) !=
            PS_E_OK)
      c->ntpi = 0;
    c->diag = save;
  }
  uint16_t kind;
  const uint8_t *p;
  size_t len;
  if (!c->tpi_off || !type_rec(&c->tpi, c->tpi_off, c->tpi_begin, c->ntpi, ti, &kind, &p, &len))
    return false;
  size_t skip;
  switch (kind) {
  case LF_CLASS: case LF_STRUCTURE: case LF_INTERFACE: skip = 16; break;
  case LF_UNION: skip = 8; break;
  case LF_ENUM: skip = 12; break;
  default: return false;
  }
  if (len < skip)
    return false;
  p += skip;
  len -= skip;
  if (kind != LF_ENUM && !skip_numeric(&p, &len))
    return false;
  *out = rec_name(p, len, false, olen);
  return *out != NULL;
}

static int cmp_xexport(const void *a, const void *b) {
  const struct xexport *x = a, *y = b;
  if (x->mod != y->mod)
    return x->mod < y->mod ? -1 : 1;
  return x->local < y->local ? -1 : x->local > y->local;
}

/* Reads every module's DEBUG_S_CROSSSCOPEEXPORTS (local id -> global IPI id
 * pairs).  Problems only cost the names of cross-module inlinees. */
static void load_exports(pdb_ctx *c) {
  c->exports_loaded = true;
  ps_diag d;
  ps_diag_clear(&d);
  for (size_t i = 0; i < c->nmods; i++) {
    const struct modinfo *mi = &c->mods[i];
    msf_stream_t ms;
    if (mi->sn == 0xFFFF || msf_stream(&c->msf, mi->sn, &ms, &d) != PS_E_OK)
      continue;
    uint64_t start = (uint64_t)mi->sym + mi->c11, end = start + mi->c13;
    size_t pos = (size_t)start;
    while (end <= ms.len && pos + 8 <= end) {
      uint32_t kind = ld32(ms.data + pos), len = ld32(ms.data + pos + 4);
      if (len > end - pos - 8)
        break;
      if (kind == DEBUG_S_CROSSSCOPEEXPORTS) {
        for (size_t k = pos + 8; k + 8 <= pos + 8 + len; k += 8) {
          if (!grow_arr(c, (void **)&c->exports, &c->cexports, c->nexports, sizeof *c->exports))
            break;
          c->exports[c->nexports].mod = (uint32_t)i;
          c->exports[c->nexports].local = ld32(ms.data + k);
          c->exports[c->nexports].global = ld32(ms.data + k + 4);
          c->nexports++;
        }
      }
      pos += 8 + (size_t)((len + 3u) & ~3u);
    }
    msf_stream_free(&c->msf, &ms);
  }
  if (c->nexports)
    qsort(c->exports, c->nexports, sizeof *c->exports, cmp_xexport);
}

static bool name_eq_nocase(const char *a, size_t an, const char *b, size_t bn) {
  if (an != bn)
    return false;
  for (size_t i = 0; i < an; i++) {
    unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
    if (x >= 'A' && x <= 'Z')
      x = (unsigned char)(x + 32);
    if (y >= 'A' && y <= 'Z')
      y = (unsigned char)(y + 32);
    if (x != y)
      return false;
  }
  return true;
}

/* An item id with the high bit set refers to another module's id: bits
 * 20..30 pick an entry of this module's cross-scope imports (exporting module
 * name, then its local ids), bits 0..19 the local id in that entry; the
 * exporting module's cross-scope exports map the local id to the IPI id.
 * Returns the IPI id, or 0. */
static uint32_t resolve_item(pdb_ctx *c, uint32_t id) {
  if (!(id & 0x80000000u))
    return id;
  uint32_t entry = (id >> 20) & 0x7ffu, idx = id & 0xfffffu;
  size_t pos = 0;
  for (uint32_t k = 0; pos + 8 <= c->imports_len; k++) {
    uint32_t name_off = ld32(c->imports + pos), count = ld32(c->imports + pos + 4);
    if (count > (c->imports_len - pos - 8) / 4)
      return 0;
    if (k == entry) {
      if (idx >= count)
        return 0;
      uint32_t local = ld32(c->imports + pos + 8 + (size_t)idx * 4);
      size_t nl;
      const char *nm = names_at(c, name_off, &nl);
      if (!nm)
        return 0;
      if (!c->exports_loaded)
        load_exports(c);
      for (size_t m = 0; m < c->nmods; m++) {
        if (!name_eq_nocase(c->mods[m].name, c->mods[m].name_len, nm, nl))
          continue;
        struct xexport key = {(uint32_t)m, local, 0};
        const struct xexport *hit =
            c->nexports ? bsearch(&key, c->exports, c->nexports, sizeof key, cmp_xexport) : NULL;
        return hit ? hit->global : 0;
      }
      return 0;
    }
    pos += 8 + (size_t)count * 4;
  }
  return 0;
}

/* Inlinee name as llvm-symbolizer forms it: "Class::name" for LF_MFUNC_ID,
 * "scope::name" for LF_FUNC_ID with a parent scope string. */
static uint32_t inlinee_name(pdb_ctx *c, uint32_t id) {
  id = resolve_item(c, id);
  uint16_t kind;
  const uint8_t *p;
  size_t len;
  if (!c->ipi_off || !type_rec(&c->ipi, c->ipi_off, c->ipi_begin, c->nipi, id, &kind, &p, &len))
    return 0;
  if ((kind != LF_FUNC_ID && kind != LF_MFUNC_ID) || len < 8)
    return 0;
  uint32_t scope_ti = ld32(p);
  size_t nlen, pos = 0;
  const char *nm = rec_name(p + 8, len - 8, false, &nlen);
  c->name[0] = '\0';
  if (kind == LF_MFUNC_ID) {
    const char *cls;
    size_t clen;
    if (tpi_udt_name(c, scope_ti, &cls, &clen)) {
      name_append(c, &pos, cls, clen);
      name_append(c, &pos, "::", 2);
    }
  } else if (scope_ti) {
    uint16_t sk;
    const uint8_t *sp;
    size_t sl;
    if (type_rec(&c->ipi, c->ipi_off, c->ipi_begin, c->nipi, scope_ti, &sk, &sp, &sl) &&
        sk == LF_STRING_ID && sl >= 4) {
      size_t slen;
      const char *s = rec_name(sp + 4, sl - 4, false, &slen);
      name_append(c, &pos, s, slen);
      name_append(c, &pos, "::", 2);
    }
  }
  name_append(c, &pos, nm, nlen);
  return st_str(c->st, c->name, pos);
}

/* ---- C13 subsections ------------------------------------------------------ */

static uint32_t file_name(const pdb_ctx *c, uint32_t chk_off) {
  size_t lo = 0, hi = c->nfiles;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->files[mid].chk_off < chk_off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < c->nfiles && c->files[lo].chk_off == chk_off)
    return c->files[lo].name;
  return 0;
}

static ps_err read_checksums(pdb_ctx *c, ps_reader *r) {
  while (rd_left(r) >= 8 && rd_ok(r)) {
    uint32_t at = (uint32_t)rd_tell(r);
    uint32_t name_off = rd_u32(r, "C13 file checksum");
    size_t chk_len = rd_u8(r, "C13 file checksum");
    rd_u8(r, "C13 file checksum");
    rd_skip(r, chk_len, "C13 file checksum bytes");
    rd_align(r, 4, "C13 file checksum");
    if (!rd_ok(r))
      break;
    size_t nlen;
    const char *nm = names_at(c, name_off, &nlen);
    if (!grow_arr(c, (void **)&c->files, &c->cfiles, c->nfiles, sizeof *c->files))
      return c->diag->code;
    c->files[c->nfiles].chk_off = at;
    c->files[c->nfiles].name = nm ? st_str(c->st, nm, nlen) : 0;
    c->nfiles++;
  }
  return rd_to_diag(r, c->diag);
}

static ps_err read_inlinee_lines(pdb_ctx *c, ps_reader *r) {
  uint32_t sig = rd_u32(r, "C13 inlinee lines signature");
  if (!rd_ok(r))
    return rd_to_diag(r, c->diag);
  if (sig != 0 && sig != 1)
    return ps_diag_set(c->diag, PS_E_CORRUPT, "C13 inlinee lines", r->origin,
                       "signature %u is neither 0 nor 1", sig);
  while (rd_left(r) >= 12 && rd_ok(r)) {
    inlinee_src s;
    s.inlinee = rd_u32(r, "C13 inlinee line");
    s.chk_off = rd_u32(r, "C13 inlinee line");
    s.line = rd_u32(r, "C13 inlinee line");
    if (sig == 1) {
      uint32_t n = rd_u32(r, "C13 inlinee extra files");
      if (n > rd_left(r) / 4)
        return ps_diag_set(c->diag, PS_E_CORRUPT, "C13 inlinee lines", r->origin + r->pos,
                           "%u extra files", n);
      rd_skip(r, (size_t)n * 4, "C13 inlinee extra files");
    }
    if (!grow_arr(c, (void **)&c->isrc, &c->cisrc, c->nisrc, sizeof *c->isrc))
      return c->diag->code;
    c->isrc[c->nisrc++] = s;
  }
  return rd_to_diag(r, c->diag);
}

static const inlinee_src *find_isrc(const pdb_ctx *c, uint32_t inlinee) {
  /* entries are usually sorted by inlinee id; fall back to a scan */
  size_t lo = 0, hi = c->nisrc;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->isrc[mid].inlinee < inlinee)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < c->nisrc && c->isrc[lo].inlinee == inlinee)
    return &c->isrc[lo];
  for (size_t i = 0; i < c->nisrc; i++)
    if (c->isrc[i].inlinee == inlinee)
      return &c->isrc[i];
  return NULL;
}

typedef struct {
  uint32_t line, file;
} line_arg;

static bool emit_line(pdb_ctx *c, uint32_t rva, uint32_t len, void *arg) {
  const line_arg *a = arg;
  return st_add_line(c->st, rva, len, a->line, a->file);
}

static const manproc *find_mproc(const pdb_ctx *c, uint16_t seg, uint32_t off) {
  for (size_t i = 0; i < c->nmprocs; i++) {
    const manproc *m = &c->mprocs[i];
    if (m->seg == seg && off >= m->off && (off - m->off < m->len || (m->len == 0 && off == m->off)))
      return m;
  }
  return NULL;
}

static ps_err read_lines(pdb_ctx *c, ps_reader *r) {
  uint32_t off_con = rd_u32(r, "C13 lines header");
  uint16_t seg = rd_u16(r, "C13 lines header");
  uint16_t flags = rd_u16(r, "C13 lines header");
  uint32_t cb = rd_u32(r, "C13 lines header");
  bool cols = (flags & 1u) != 0;
  uint32_t base_rva = 0;
  bool native_ok = sect_rva(c, seg, off_con, &base_rva) && !foreign_code(c, base_rva);
  const manproc *last = NULL;
  /* the lowest entry offset of the subsection: code before it (inlined code
   * at the function start, as LLVM emits it) takes that entry's line, as
   * LLVM reads the table */
  uint32_t min_off = UINT32_MAX;
  for (size_t pos = rd_tell(r); pos + 20 <= r->len;) {
    uint32_t bn = ld32(r->base + pos + 4), bsz = ld32(r->base + pos + 8);
    if (bn > 0 && ld32(r->base + pos + 12) < min_off)
      min_off = ld32(r->base + pos + 12);
    if (bsz < 12 || bsz > r->len - pos)
      break;
    pos += bsz;
  }
  bool extended = false;
  while (rd_left(r) >= 12 && rd_ok(r)) {
    size_t bstart = rd_tell(r);
    uint32_t chk = rd_u32(r, "C13 line block");
    uint32_t n = rd_u32(r, "C13 line block");
    uint32_t bsize = rd_u32(r, "C13 line block");
    if (!rd_ok(r))
      break;
    size_t need = 12 + (size_t)n * (cols ? 12u : 8u);
    if (n > rd_left(r) / 8 || bsize < need || bsize - 12 > rd_left(r))
      return ps_diag_set(c->diag, PS_E_CORRUPT, "C13 line block", r->origin + bstart,
                         "%u lines in a %u-byte block", n, bsize);
    const uint8_t *ent = r->base + r->pos;
    const uint8_t *col = ent + (size_t)n * 8;
    uint32_t file = file_name(c, chk);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t o = ld32(ent + (size_t)i * 8);
      uint32_t lf = ld32(ent + (size_t)i * 8 + 4);
      uint32_t line = lf & 0xffffffu;
      uint32_t end_line = line + ((lf >> 24) & 0x7fu);
      uint64_t abs_off = (uint64_t)off_con + o;
      if (abs_off > UINT32_MAX)
        continue;
      const manproc *mp = NULL;
      if (c->nmprocs) {
        if (last && last->seg == seg && abs_off >= last->off && abs_off - last->off < last->len)
          mp = last;
        else
          mp = last = find_mproc(c, seg, (uint32_t)abs_off);
      }
      if (mp) {
        st_seqpt sp;
        memset(&sp, 0, sizeof sp);
        sp.token = mp->token;
        sp.il = (uint32_t)abs_off - mp->off;
        sp.line = line;
        sp.end_line = line == ST_HIDDEN_LINE ? ST_HIDDEN_LINE : end_line;
        if (cols) {
          sp.column = ld16(col + (size_t)i * 4);
          sp.end_column = ld16(col + (size_t)i * 4 + 2);
        }
        sp.file = file;
        if (!st_add_seqpt(c->st, &sp))
          return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a sequence point");
        continue;
      }
      if (!native_ok)
        continue;
      /* a line covers up to the next entry, the last one up to the block end;
       * 0xFEEFEE and 0xF00F00 entries cover their own bytes too (pdb.h) */
      uint32_t next = i + 1 < n ? ld32(ent + (size_t)(i + 1) * 8) : cb;
      if (next <= o)
        continue; /* an empty range: the next entry at the same offset wins */
      line_arg a = {line, file};
      uint32_t from = o;
      if (o == min_off && !extended) {
        from = 0;
        extended = true;
      }
      if (!map_range(c, base_rva + from, next - from, emit_line, &a))
        return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a line");
    }
    rd_skip(r, bsize - 12, "C13 line block");
  }
  return rd_to_diag(r, c->diag);
}

/* ---- inline sites ------------------------------------------------------- */

static bool read_cu(const uint8_t **p, const uint8_t *end, uint32_t *v) {
  if (*p >= end)
    return false;
  uint8_t b = *(*p)++;
  if ((b & 0x80) == 0) {
    *v = b;
    return true;
  }
  if ((b & 0xc0) == 0x80) {
    if (*p >= end)
      return false;
    *v = ((uint32_t)(b & 0x3f) << 8) | *(*p)++;
    return true;
  }
  if ((b & 0xe0) == 0xc0) {
    if (end - *p < 3)
      return false;
    *v = ((uint32_t)(b & 0x1f) << 24) | ((uint32_t)(*p)[0] << 16) | ((uint32_t)(*p)[1] << 8) |
         (*p)[2];
    *p += 3;
    return true;
  }
  return false;
}

static int32_t decode_signed(uint32_t v) {
  return (v & 1u) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
}

typedef struct {
  uint32_t inl, line, file;
} irange_arg;

static bool emit_irange(pdb_ctx *c, uint32_t rva, uint32_t len, void *arg) {
  const irange_arg *a = arg;
  return st_add_irange(c->st, a->inl, rva, len, a->line, a->file);
}

/* Walks an inline site's binary annotations (cvinfo.h BinaryAnnotationOpcode)
 * and adds its code ranges, each with the inlinee's line at that range. */
static bool inline_ranges(pdb_ctx *c, uint32_t inl, uint32_t proc_src_rva, const uint8_t *p,
                          const uint8_t *end, uint32_t base_line, uint32_t base_file) {
  uint32_t code = 0;
  int64_t line = base_line;
  uint32_t file = base_file;
  bool open = false;       /* a range started, its length not yet known */
  uint32_t r_start = 0, r_line = 0, r_file = 0;
#define FLUSH(len_)                                                                         \
  do {                                                                                      \
    if (open && (len_) > 0) {                                                               \
      irange_arg a_ = {inl, r_line, r_file};                                                \
      uint64_t s_ = (uint64_t)proc_src_rva + r_start;                                       \
      if (s_ <= UINT32_MAX && !map_range(c, (uint32_t)s_, (len_), emit_irange, &a_))        \
        return false;                                                                       \
    }                                                                                       \
    open = false;                                                                           \
  } while (0)
#define START()                                                                             \
  do {                                                                                      \
    if (open)                                                                               \
      FLUSH(code - r_start);                                                                \
    open = true;                                                                            \
    r_start = code;                                                                         \
    r_line = line > 0 && line <= UINT32_MAX ? (uint32_t)line : 0;                           \
    r_file = file;                                                                          \
  } while (0)
  while (p < end) {
    uint32_t op, a, b;
    if (!read_cu(&p, end, &op) || op == 0)
      break;
    switch (op) {
    case 1: /* CodeOffset */
      if (!read_cu(&p, end, &a))
        goto done;
      code = a;
      break;
    case 2: /* ChangeCodeOffsetBase */
      if (!read_cu(&p, end, &a))
        goto done;
      break;
    case 3: /* ChangeCodeOffset */
      if (!read_cu(&p, end, &a))
        goto done;
      if (open)
        FLUSH(code + a - r_start);
      code += a;
      START();
      break;
    case 4: /* ChangeCodeLength */
      if (!read_cu(&p, end, &a))
        goto done;
      if (open && r_start == code)
        FLUSH(a);
      else if (open)
        FLUSH(code + a - r_start);
      code += a;
      break;
    case 5: /* ChangeFile */
      if (!read_cu(&p, end, &a))
        goto done;
      file = file_name(c, a);
      break;
    case 6: /* ChangeLineOffset */
      if (!read_cu(&p, end, &a))
        goto done;
      line += decode_signed(a);
      break;
    case 7: case 8: case 9: case 10: case 13: /* line end / range kind / columns */
      if (!read_cu(&p, end, &a))
        goto done;
      break;
    case 11: /* ChangeCodeOffsetAndLineOffset */
      if (!read_cu(&p, end, &a))
        goto done;
      line += decode_signed(a >> 4);
      if (open)
        FLUSH(code + (a & 0xf) - r_start);
      code += a & 0xf;
      START();
      break;
    case 12: /* ChangeCodeLengthAndCodeOffset */
      if (!read_cu(&p, end, &a) || !read_cu(&p, end, &b))
        goto done;
      if (open)
        FLUSH(code + b - r_start);
      code += b;
      START();
      FLUSH(a); /* the length does not move the code offset (unlike op 4) */
      break;
    default:
      goto done;
    }
  }
done:
  open = false; /* a range whose length never came is dropped */
  return true;
#undef FLUSH
#undef START
}

/* ---- module symbols ----------------------------------------------------- */

typedef struct {
  uint32_t name;
  uint32_t flags;
} func_arg;

static bool emit_func(pdb_ctx *c, uint32_t rva, uint32_t len, void *arg) {
  const func_arg *a = arg;
  return st_add_func(c->st, rva, len, a->name, a->flags);
}

static ps_err read_symbols(pdb_ctx *c, const uint8_t *base, size_t len, size_t origin) {
  scope stack[MAX_SCOPE_DEPTH];
  int depth = 0;      /* scopes on the stack */
  int ninl = 0;       /* inline sites among them */
  uint32_t proc_src = 0, proc_rva = 0; /* current procedure, source and image rva */
  bool in_proc = false;
  size_t pos = 0;
  while (pos + 4 <= len) {
    uint16_t rl = ld16(base + pos);
    uint16_t kind = ld16(base + pos + 2);
    if (rl < 2 || pos + 2 + rl > len)
      return ps_diag_set(c->diag, PS_E_CORRUPT, "module symbol record", origin + pos,
                         "record length %u (kind 0x%04x) runs past the %zu-byte symbol "
                         "substream", rl, kind, len);
    const uint8_t *p = base + pos + 4;
    size_t n = rl - 2u;
    pos += 2u + rl;
    int opens = 0; /* 1 proc, 2 inline, 3 other scope */
    switch (kind) {
    case S_GPROC32: case S_LPROC32: case S_GPROC32_ID: case S_LPROC32_ID:
    case S_LPROC32_DPC: case S_LPROC32_DPC_ID: case S_GPROC32_ST: case S_LPROC32_ST: {
      opens = 1;
      if (n < 35)
        break;
      uint32_t size = ld32(p + 12), off = ld32(p + 28);
      uint16_t seg = ld16(p + 32);
      size_t nl;
      const char *nm = rec_name(p + 35, n - 35, kind == S_GPROC32_ST || kind == S_LPROC32_ST, &nl);
      in_proc = false;
      if (!nm || !sect_rva(c, seg, off, &proc_src) || foreign_code(c, proc_src))
        break;
      in_proc = omap_map(c, proc_src, &proc_rva);
      func_arg a = {st_str(c->st, nm, nl), 0};
      if (!map_range(c, proc_src, size ? size : 1, emit_func, &a))
        return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a function");
      break;
    }
    case S_THUNK32: case S_THUNK32_ST: {
      opens = 3;
      if (n < 21)
        break;
      uint32_t off = ld32(p + 12);
      uint16_t seg = ld16(p + 16), size = ld16(p + 18);
      size_t nl;
      const char *nm = rec_name(p + 21, n > 21 ? n - 21 : 0, kind == S_THUNK32_ST, &nl);
      uint32_t src;
      if (!nm || !sect_rva(c, seg, off, &src))
        break;
      func_arg a = {st_str(c->st, nm, nl), ST_FUNC_THUNK};
      if (!map_range(c, src, size ? size : 1, emit_func, &a))
        return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a thunk");
      break;
    }
    case S_GMANPROC: case S_LMANPROC: case S_GMANPROC_ST: case S_LMANPROC_ST: {
      opens = 1;
      in_proc = false;
      if (n < 37)
        break;
      manproc m;
      m.len = ld32(p + 12);
      m.token = ld32(p + 24);
      m.off = ld32(p + 28);
      m.seg = ld16(p + 32);
      size_t nl;
      const char *nm = rec_name(p + 37, n - 37, kind == S_GMANPROC_ST || kind == S_LMANPROC_ST, &nl);
      if (!grow_arr(c, (void **)&c->mprocs, &c->cmprocs, c->nmprocs, sizeof *c->mprocs))
        return c->diag->code;
      c->mprocs[c->nmprocs++] = m;
      if (!st_add_method(c->st, m.token, nm ? st_str(c->st, nm, nl) : 0, 0))
        return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a method");
      break;
    }
    case S_BLOCK32: case S_WITH32: case S_SEPCODE:
      opens = 3;
      break;
    case S_INLINESITE: case S_INLINESITE2: {
      opens = 2;
      size_t hdr = kind == S_INLINESITE2 ? 16 : 12;
      uint32_t inl = ST_NONE;
      if (n >= hdr && in_proc) {
        uint32_t inlinee = ld32(p + 8);
        uint32_t parent = ST_NONE;
        for (int i = depth - 1; i >= 0; i--)
          if (stack[i].kind == 2) {
            parent = stack[i].inl;
            break;
          }
        if (depth > 0 && (parent != ST_NONE || ninl == 0)) {
          inl = st_add_inline(c->st, proc_rva, parent, (uint32_t)ninl + 1, inlinee_name(c, inlinee));
          if (inl == ST_NONE)
            return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding an inline site");
          const inlinee_src *src = find_isrc(c, inlinee);
          if (!inline_ranges(c, inl, proc_src, p + hdr, p + n, src ? src->line : 0,
                             src ? file_name(c, src->chk_off) : 0))
            return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding an inline range");
        }
      }
      if (depth < MAX_SCOPE_DEPTH) {
        stack[depth].kind = inl == ST_NONE ? 3 : 2;
        stack[depth].inl = inl;
        if (inl != ST_NONE)
          ninl++;
        depth++;
      }
      break;
    }
    case S_END: case S_PROC_ID_END: case S_INLINESITE_END:
      if (depth > 0) {
        depth--;
        if (stack[depth].kind == 2)
          ninl--;
        if (stack[depth].kind == 1)
          in_proc = false;
      }
      break;
    default:
      break;
    }
    if (opens && opens != 2 && depth < MAX_SCOPE_DEPTH) {
      stack[depth].kind = opens;
      stack[depth].inl = ST_NONE;
      depth++;
    }
  }
  return PS_E_OK;
}

/* ---- C11 lines (VS2003 and older), microsoft-pdb cvinfo.h / LLVM's
 * "old line format" notes:
 *   u16 cFile, u16 cSeg, u32 baseSrcFile[cFile], {u32 start,end}[cSeg], u16 seg[cSeg]
 *   per file: u16 cSeg, u16 pad, u32 baseSrcLn[cSeg], {u32 start,end}[cSeg],
 *             name (NUL-terminated; VC6's length-prefixed form is PDB 2.00)
 *   per file segment: u16 seg, u16 cPair, u32 offset[cPair], u16 line[cPair]
 */
static ps_err read_c11(pdb_ctx *c, const uint8_t *base, size_t len, size_t origin) {
  ps_reader r;
  rd_init(&r, base, len);
  r.origin = origin;
  uint16_t nfile = rd_u16(&r, "C11 lines header");
  rd_u16(&r, "C11 lines header");
  if (!rd_ok(&r))
    return rd_to_diag(&r, c->diag);
  if ((size_t)nfile * 4 > rd_left(&r))
    return ps_diag_set(c->diag, PS_E_CORRUPT, "C11 lines", origin, "%u files", nfile);
  for (uint16_t f = 0; f < nfile; f++) {
    rd_seek(&r, 4 + (size_t)f * 4, "C11 file table");
    uint32_t foff = rd_u32(&r, "C11 file offset");
    ps_reader fr = rd_sub(&r, 0, len, "C11 file");
    rd_seek(&fr, foff, "C11 file record");
    uint16_t nseg = rd_u16(&fr, "C11 file record");
    rd_u16(&fr, "C11 file record");
    if (!rd_ok(&fr) || (size_t)nseg * 12 > rd_left(&fr))
      return ps_diag_set(c->diag, PS_E_CORRUPT, "C11 file record", origin + foff,
                         "%u segments", nseg);
    size_t seg_tab = rd_tell(&fr);
    rd_skip(&fr, (size_t)nseg * 12, "C11 file segments");
    size_t nlen;
    const char *nm = rd_cstr(&fr, &nlen, "C11 file name"); /* NUL-terminated in MSF 7.00 */
    if (!rd_ok(&fr))
      return rd_to_diag(&fr, c->diag);
    uint32_t file = st_str(c->st, nm, nlen);
    for (uint16_t s = 0; s < nseg; s++) {
      ps_reader sr = rd_sub(&r, 0, len, "C11 segment");
      rd_seek(&sr, seg_tab + (size_t)s * 4, "C11 segment table");
      uint32_t soff = rd_u32(&sr, "C11 segment offset");
      rd_seek(&sr, seg_tab + (size_t)nseg * 4 + (size_t)s * 8, "C11 segment range");
      rd_u32(&sr, "C11 segment range");
      uint32_t send = rd_u32(&sr, "C11 segment range");
      rd_seek(&sr, soff, "C11 segment lines");
      uint16_t seg = rd_u16(&sr, "C11 segment lines");
      uint16_t npair = rd_u16(&sr, "C11 segment lines");
      const uint8_t *offs = rd_ptr(&sr, (size_t)npair * 4, "C11 line offsets");
      const uint8_t *lines = rd_ptr(&sr, (size_t)npair * 2, "C11 line numbers");
      if (!rd_ok(&sr))
        return rd_to_diag(&sr, c->diag);
      for (uint16_t i = 0; i < npair; i++) {
        uint32_t o = ld32(offs + (size_t)i * 4);
        uint32_t next = i + 1 < npair ? ld32(offs + (size_t)(i + 1) * 4) : send + 1;
        if (next <= o)
          continue;
        const manproc *mp = c->nmprocs ? find_mproc(c, seg, o) : NULL;
        uint32_t line = ld16(lines + (size_t)i * 2);
        if (mp) {
          st_seqpt sp;
          memset(&sp, 0, sizeof sp);
          sp.token = mp->token;
          sp.il = o - mp->off;
          sp.line = line == 0xfeefu ? ST_HIDDEN_LINE : line;
          sp.end_line = sp.line;
          sp.file = file;
          if (!st_add_seqpt(c->st, &sp))
            return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a sequence point");
          continue;
        }
        uint32_t rva;
        if (!sect_rva(c, seg, o, &rva))
          continue;
        line_arg a = {line, file};
        if (!map_range(c, rva, next - o, emit_line, &a))
          return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a line");
      }
    }
  }
  return PS_E_OK;
}

static ps_err read_module(pdb_ctx *c, uint16_t sn, uint32_t sym_bytes, uint32_t c11_bytes,
                          uint32_t c13_bytes, size_t modi_off) {
  msf_stream_t ms;
  ps_err e = msf_stream_scratch(&c->msf, sn, &ms, &c->scratch, &c->scratch_cap, c->diag);
  if (e == PS_E_NOT_FOUND)
    return ps_diag_set(c->diag, PS_E_CORRUPT, "DBI module info", modi_off,
                       "module stream %u does not exist", sn);
  if (e != PS_E_OK)
    return e;
  uint64_t need = (uint64_t)sym_bytes + c11_bytes + c13_bytes;
  if (need > ms.len)
    return ps_diag_set(c->diag, PS_E_CORRUPT, "module stream", modi_off,
                       "stream %u is %zu bytes, the module info announces %llu", sn, ms.len,
                       (unsigned long long)need);
  c->nfiles = c->nisrc = c->nmprocs = 0;
  c->imports = NULL;
  c->imports_len = 0;
  /* C13 subsections first: symbols need the checksums and inlinee lines */
  ps_reader r;
  rd_init(&r, ms.data + sym_bytes + c11_bytes, c13_bytes);
  for (int pass = 0; pass < 2; pass++) {
    rd_seek(&r, 0, "C13 subsections");
    while (rd_left(&r) >= 8 && rd_ok(&r)) {
      size_t at = rd_tell(&r);
      uint32_t kind = rd_u32(&r, "C13 subsection header");
      uint32_t slen = rd_u32(&r, "C13 subsection header");
      if (slen > rd_left(&r))
        return ps_diag_set(c->diag, PS_E_CORRUPT, "C13 subsection", at,
                           "subsection 0x%x of %u bytes runs past the module's C13 data "
                           "(stream %u)", kind, slen, sn);
      ps_reader sub = rd_sub(&r, rd_tell(&r), slen, "C13 subsection");
      ps_err se = PS_E_OK;
      if (pass == 0 && kind == DEBUG_S_FILECHKSMS)
        se = read_checksums(c, &sub);
      else if (pass == 0 && kind == DEBUG_S_INLINEELINES)
        se = read_inlinee_lines(c, &sub);
      else if (pass == 0 && kind == DEBUG_S_CROSSSCOPEIMPORTS) {
        c->imports = sub.base;
        c->imports_len = sub.len;
      }
      else if (pass == 1 && kind == DEBUG_S_LINES)
        se = read_lines(c, &sub);
      if (se != PS_E_OK)
        return se;
      rd_skip(&r, slen, "C13 subsection");
      rd_align(&r, 4, "C13 subsection");
    }
    if (!rd_ok(&r))
      return rd_to_diag(&r, c->diag);
    if (pass == 0 && sym_bytes >= 4) {
      uint32_t sig = ld32(ms.data);
      if (sig != CV_SIGNATURE_C13 && sig != 1 && sig != 2)
        return ps_diag_set(c->diag, PS_E_CORRUPT, "module symbols", 0,
                           "stream %u: signature %u is not a CodeView signature", sn, sig);
      e = read_symbols(c, ms.data + 4, sym_bytes - 4, 4);
      if (e != PS_E_OK)
        return e;
      if (c11_bytes && c13_bytes == 0) { /* C13 supersedes C11 when both exist */
        e = read_c11(c, ms.data + sym_bytes, c11_bytes, sym_bytes);
        if (e != PS_E_OK)
          return e;
      }
    }
  }
  return PS_E_OK;
}

/* ---- streams ---------------------------------------------------------------- */

static ps_err read_info(pdb_ctx *c, uint32_t *names_sn) {
  msf_stream_t s;
  ps_err e = msf_stream(&c->msf, 1, &s, c->diag);
  if (e == PS_E_NOT_FOUND)
    return ps_diag_set(c->diag, PS_E_CORRUPT, "PDB info stream", (size_t)-1,
                       "stream 1 is missing");
  if (e != PS_E_OK)
    return e;
  ps_reader r;
  rd_init(&r, s.data, s.len);
  uint32_t version = rd_u32(&r, "PDB info stream header");
  uint32_t sig = rd_u32(&r, "PDB info stream header");
  uint32_t age = rd_u32(&r, "PDB info stream header");
  if (!rd_ok(&r)) {
    msf_stream_free(&c->msf, &s);
    return rd_to_diag(&r, c->diag);
  }
  if (version < 19990903u) { /* VC70: the first version with a GUID */
    msf_stream_free(&c->msf, &s);
    return ps_diag_set(c->diag, PS_E_UNSUPPORTED, "PDB info stream", 0,
                       "version %u predates VC70 (no GUID)", version);
  }
  rd_copy(&r, c->st->ident.guid, 16, "PDB info stream GUID");
  c->st->ident.stamp = sig;
  c->st->ident.pdb_age = age;
  /* named stream map: string buffer, then a hash table of (name offset, stream) */
  uint32_t sblen = rd_u32(&r, "PDB named stream map");
  size_t sbstart = rd_tell(&r);
  rd_skip(&r, sblen, "PDB named stream map strings");
  rd_u32(&r, "PDB named stream map size");
  rd_u32(&r, "PDB named stream map capacity");
  uint32_t pwords = rd_u32(&r, "PDB named stream map present bits");
  const uint8_t *present = rd_ptr(&r, (size_t)pwords * 4, "PDB named stream map present bits");
  uint32_t dwords = rd_u32(&r, "PDB named stream map deleted bits");
  rd_skip(&r, (size_t)dwords * 4, "PDB named stream map deleted bits");
  *names_sn = MSF_NIL_STREAM;
  for (uint32_t w = 0; present && w < pwords && rd_ok(&r); w++) {
    uint32_t bits = ld32(present + (size_t)w * 4);
    for (int b = 0; b < 32; b++) {
      if (!(bits & (1u << b)))
        continue;
      uint32_t key = rd_u32(&r, "PDB named stream map entry");
      uint32_t val = rd_u32(&r, "PDB named stream map entry");
      if (!rd_ok(&r))
        break;
      if (key < sblen && sblen - key >= 7 && memcmp(s.data + sbstart + key, "/names", 7) == 0)
        *names_sn = val;
    }
  }
  e = PS_E_OK;
  if (!rd_ok(&r))
    e = rd_to_diag(&r, c->diag);
  msf_stream_free(&c->msf, &s);
  return e;
}

static void read_names(pdb_ctx *c, uint32_t sn) {
  ps_diag d;
  ps_diag_clear(&d);
  if (sn == MSF_NIL_STREAM || msf_stream(&c->msf, sn, &c->names, &d) != PS_E_OK)
    return;
  ps_reader r;
  rd_init(&r, c->names.data, c->names.len);
  uint32_t sig = rd_u32(&r, "/names header");
  rd_u32(&r, "/names header");
  uint32_t blen = rd_u32(&r, "/names header");
  if (!rd_ok(&r) || sig != 0xEFFEEFFEu || blen > rd_left(&r))
    return; /* no file names: lines keep an empty file */
  c->names_buf = c->names.data + 12;
  c->names_len = blen;
}

static int cmp_img_sect(const void *a, const void *b) {
  const struct img_sect *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* The image's section headers (PE/COFF IMAGE_SECTION_HEADER: VirtualSize at
 * 8, VirtualAddress at 12, SizeOfRawData at 16, Characteristics at 36).
 * Without them publics keep no section bound (and data publics are dropped). */
static ps_err read_image_sections(pdb_ctx *c, uint16_t sn) {
  msf_stream_t s;
  ps_diag d;
  ps_diag_clear(&d);
  if (sn == 0xFFFF || msf_stream(&c->msf, sn, &s, &d) != PS_E_OK)
    return PS_E_OK;
  size_t n = s.len / SECTION_HEADER_SIZE;
  ps_err e = PS_E_OK;
  c->isect = ps_alloc_array(c->budget, n ? n : 1, sizeof *c->isect, &e);
  c->cisect = n ? n : 1;
  if (!c->isect) {
    msf_stream_free(&c->msf, &s);
    return ps_diag_set(c->diag, e, "section headers", (size_t)-1, "%zu sections", n);
  }
  for (size_t i = 0; i < n; i++) {
    const uint8_t *h = s.data + i * SECTION_HEADER_SIZE;
    uint32_t vsize = ld32(h + 8), va = ld32(h + 12), raw = ld32(h + 16), ch = ld32(h + 36);
    uint64_t end = (uint64_t)va + (vsize ? vsize : raw);
    if (end <= va)
      continue;
    struct img_sect *k = &c->isect[c->nisect++];
    k->start = va;
    k->end = end > UINT32_MAX ? UINT32_MAX : (uint32_t)end;
    /* IMAGE_SCN_CNT_CODE or IMAGE_SCN_MEM_EXECUTE */
    k->code = (ch & 0x20u) || (ch & 0x20000000u);
  }
  msf_stream_free(&c->msf, &s);
  qsort(c->isect, c->nisect, sizeof *c->isect, cmp_img_sect);
  return PS_E_OK;
}

/* the image section holding rva, or NULL */
static const struct img_sect *image_section(const pdb_ctx *c, uint32_t rva) {
  size_t lo = 0, hi = c->nisect;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->isect[mid].start <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || rva >= c->isect[lo - 1].end)
    return NULL;
  return &c->isect[lo - 1];
}

static ps_err read_sections(pdb_ctx *c, const uint16_t *dbg, size_t ndbg) {
  uint32_t hdr_sn = MSF_NIL_STREAM;
  bool has_omap = ndbg > DBG_OMAP_FROM_SRC && msf_has_stream(&c->msf, dbg[DBG_OMAP_FROM_SRC]);
  if (has_omap && ndbg > DBG_SECTION_HDR_ORIG && msf_has_stream(&c->msf, dbg[DBG_SECTION_HDR_ORIG]))
    hdr_sn = dbg[DBG_SECTION_HDR_ORIG];
  else if (ndbg > DBG_SECTION_HDR)
    hdr_sn = dbg[DBG_SECTION_HDR];
  ps_err e;
  msf_stream_t s;
  if (hdr_sn != 0xFFFF && (e = msf_stream(&c->msf, hdr_sn, &s, c->diag)) != PS_E_NOT_FOUND) {
    if (e != PS_E_OK)
      return e;
    size_t n = s.len / SECTION_HEADER_SIZE;
    c->sect_va = ps_alloc_array(c->budget, n ? n : 1, sizeof *c->sect_va, &e);
    if (!c->sect_va) {
      msf_stream_free(&c->msf, &s);
      return ps_diag_set(c->diag, e, "section headers", (size_t)-1, "%zu sections", n);
    }
    for (size_t i = 0; i < n; i++)
      c->sect_va[i] = ld32(s.data + i * SECTION_HEADER_SIZE + 12);
    c->nsect = (uint32_t)(n > 0xFFFF ? 0xFFFF : n);
    msf_stream_free(&c->msf, &s);
  }
  if (has_omap) {
    e = msf_stream(&c->msf, dbg[DBG_OMAP_FROM_SRC], &s, c->diag);
    if (e != PS_E_OK)
      return e;
    size_t n = s.len / 8;
    c->omap = ps_alloc_array(c->budget, n ? n : 1, sizeof *c->omap, &e);
    if (!c->omap) {
      msf_stream_free(&c->msf, &s);
      return ps_diag_set(c->diag, e, "OMAP", (size_t)-1, "%zu entries", n);
    }
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
      c->omap[i].from = ld32(s.data + i * 8);
      c->omap[i].to = ld32(s.data + i * 8 + 4);
      if (i && c->omap[i].from < c->omap[i - 1].from)
        sorted = false;
    }
    c->nomap = n;
    msf_stream_free(&c->msf, &s);
    c->img_starts = ps_alloc_array(c->budget, n ? n : 1, sizeof *c->img_starts, &e);
    if (!c->img_starts)
      return ps_diag_set(c->diag, e, "OMAP", (size_t)-1, "%zu entries", n);
    for (size_t i = 0; i < n; i++)
      if (c->omap[i].to)
        c->img_starts[c->nimg++] = c->omap[i].to;
    qsort(c->img_starts, c->nimg, sizeof *c->img_starts, cmp_u32p);
    msf_stream_t t;
    if (ndbg > DBG_OMAP_TO_SRC && msf_stream(&c->msf, dbg[DBG_OMAP_TO_SRC], &t, c->diag) == PS_E_OK) {
      size_t nt = t.len / 8;
      c->inv = ps_alloc_array(c->budget, nt ? nt : 1, sizeof *c->inv, &e);
      if (!c->inv) {
        msf_stream_free(&c->msf, &t);
        return ps_diag_set(c->diag, e, "OMAP to-src", (size_t)-1, "%zu entries", nt);
      }
      for (size_t i = 0; i < nt; i++) {
        uint32_t from = ld32(t.data + i * 8), to = ld32(t.data + i * 8 + 4);
        uint32_t next = i + 1 < nt ? ld32(t.data + (i + 1) * 8) : from + 1;
        if (to == 0 || next <= from)
          continue; /* image bytes that map to no source */
        struct inv_block *b = &c->inv[c->ninv++];
        b->src = to;
        b->img = from;
        b->len = next - from;
        if (b->len > c->inv_maxlen)
          c->inv_maxlen = b->len;
      }
      msf_stream_free(&c->msf, &t);
      qsort(c->inv, c->ninv, sizeof *c->inv, cmp_inv);
    }
    if (!sorted)
      return ps_diag_set(c->diag, PS_E_CORRUPT, "OMAP from-src", (size_t)-1,
                         "entries are not sorted by source address");
  }
  return read_image_sections(c, ndbg > DBG_SECTION_HDR ? dbg[DBG_SECTION_HDR] : 0xFFFF);
}

static ps_err read_publics(pdb_ctx *c, uint16_t sn) {
  msf_stream_t s;
  ps_err e = msf_stream_scratch(&c->msf, sn, &s, &c->scratch, &c->scratch_cap, c->diag);
  if (e == PS_E_NOT_FOUND)
    return PS_E_OK;
  if (e != PS_E_OK)
    return e;
  size_t pos = 0;
  char und[NAME_CAP];
  bool x86 = c->st->ident.machine == 0x014C; /* IMAGE_FILE_MACHINE_I386 */
  while (pos + 4 <= s.len) {
    uint16_t rl = ld16(s.data + pos);
    uint16_t kind = ld16(s.data + pos + 2);
    if (rl < 2 || pos + 2 + rl > s.len)
      return ps_diag_set(c->diag, PS_E_CORRUPT, "symbol record stream", pos,
                         "record length %u (kind 0x%04x) runs past the stream (stream %u)",
                         rl, kind, sn);
    const uint8_t *p = s.data + pos + 4;
    size_t n = rl - 2u;
    pos += 2u + rl;
    if ((kind != S_PUB32 && kind != S_PUB32_ST) || n < 10)
      continue;
    uint32_t flags = ld32(p), off = ld32(p + 4);
    uint16_t seg = ld16(p + 8);
    size_t nl;
    const char *nm = rec_name(p + 10, n - 10, kind == S_PUB32_ST, &nl);
    uint32_t src, rva;
    if (!nm || !nl || !sect_rva(c, seg, off, &src) || !omap_map(c, src, &rva))
      continue;
    /* code publics name code no procedure covers: those flagged
     * CVPSF_CODE | CVPSF_FUNCTION, and the unflagged labels of assembly in
     * an executable section (MASM's publics carry no flags; DIA calls them
     * code, LLVM takes any public of the section) */
    const struct img_sect *sec = image_section(c, rva);
    if (!(flags & 3u) && !(sec && sec->code))
      continue;
    if (!sec && c->nisect)
      continue; /* outside every section of the image */
    uint32_t mangled = st_str(c->st, nm, nl);
    uint32_t name = mangled;
    if (undname_public(nm, nl, x86, und, sizeof und))
      name = st_cstr(c->st, und);
    if (!st_add_public_bounded(c->st, rva, sec ? sec->end - rva : 0, name, mangled))
      return ps_diag_set(c->diag, c->st->err, "symtab", (size_t)-1, "adding a public");
  }
  return PS_E_OK;
}

/* Section contribution substream, DbiStream.rst: a u32 version, then 28-byte
 * entries (32 with version V2): section, offset, size, characteristics,
 * module index, CRCs. */
static ps_err read_contribs(pdb_ctx *c, const uint8_t *p, size_t len, size_t origin) {
  if (len < 4)
    return PS_E_OK;
  uint32_t ver = ld32(p);
  size_t esz;
  if (ver == 0xeffe0000u + 19970605u)
    esz = 28;
  else if (ver == 0xeffe0000u + 20140516u)
    esz = 32;
  else
    return PS_E_OK; /* unknown layout: no module preference */
  size_t n = (len - 4) / esz;
  ps_err e = PS_E_OK;
  c->contribs = ps_alloc_array(c->budget, n ? n : 1, sizeof *c->contribs, &e);
  if (!c->contribs)
    return ps_diag_set(c->diag, e, "DBI section contributions", origin, "%zu entries", n);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *q = p + 4 + i * esz;
    uint32_t rva;
    int32_t size;
    memcpy(&size, q + 8, 4);
    if (!sect_rva(c, ld16(q), ld32(q + 4), &rva) || size <= 0 || !(ld32(q + 12) & 0x20u))
      continue; /* only code (IMAGE_SCN_CNT_CODE) */
    c->contribs[k].rva = rva;
    c->contribs[k].size = (uint32_t)size;
    c->contribs[k].mod = ld16(q + 16);
    k++;
  }
  c->ncontribs = k;
  qsort(c->contribs, k, sizeof *c->contribs, cmp_contrib);
  return PS_E_OK;
}

/* Each module has a stream of its own (microsoft-pdb's dbi.cpp creates one
 * per module): modules that share one would read it again and again, so a
 * file a fraction of a megabyte long could fill the table many times over. */
static ps_err check_module_streams(pdb_ctx *c) {
  ps_err e = PS_E_OK;
  size_t nbytes = c->msf.num_streams / 8 + 1;
  uint8_t *seen = ps_alloc_array(c->budget, nbytes, 1, &e);
  if (!seen)
    return ps_diag_set(c->diag, e, "DBI module info", (size_t)-1, "%u streams",
                       c->msf.num_streams);
  for (size_t i = 0; i < c->nmods && e == PS_E_OK; i++) {
    uint16_t sn = c->mods[i].sn;
    if (sn == 0xFFFF || sn >= c->msf.num_streams)
      continue; /* no symbols, or a missing stream read_module reports */
    if (seen[sn / 8] & (1u << (sn % 8)))
      e = ps_diag_set(c->diag, PS_E_CORRUPT, "DBI module info", c->mods[i].at,
                      "module %zu uses stream %u, which an earlier module uses", i, sn);
    seen[sn / 8] = (uint8_t)(seen[sn / 8] | (1u << (sn % 8)));
  }
  free_arr(c, seen, nbytes, 1);
  return e;
}

static ps_err read_dbi(pdb_ctx *c) {
  msf_stream_t s;
  ps_err e = msf_stream(&c->msf, 3, &s, c->diag);
  if (e == PS_E_NOT_FOUND)
    return PS_E_OK; /* no DBI: identity only */
  if (e != PS_E_OK)
    return e;
  ps_reader r;
  rd_init(&r, s.data, s.len);
  int32_t vsig = rd_i32(&r, "DBI header");
  rd_u32(&r, "DBI header");
  uint32_t age = rd_u32(&r, "DBI header");
  rd_u16(&r, "DBI header"); /* global stream */
  rd_u16(&r, "DBI header"); /* build */
  rd_u16(&r, "DBI header"); /* public stream */
  rd_u16(&r, "DBI header"); /* pdb dll version */
  uint16_t symrec = rd_u16(&r, "DBI header");
  rd_u16(&r, "DBI header");
  int32_t sz[6];
  for (int i = 0; i < 5; i++)
    sz[i] = rd_i32(&r, "DBI header substream sizes");
  rd_u32(&r, "DBI header"); /* MFC type server */
  int32_t dbg_size = rd_i32(&r, "DBI header");
  sz[5] = rd_i32(&r, "DBI header"); /* EC substream */
  rd_u16(&r, "DBI header"); /* flags */
  uint16_t machine = rd_u16(&r, "DBI header");
  rd_u32(&r, "DBI header");
  if (!rd_ok(&r)) {
    msf_stream_free(&c->msf, &s);
    return ps_diag_set(c->diag, PS_E_TRUNCATED, "DBI header", 0,
                       "stream 3 is %zu bytes, shorter than the 64-byte header", s.len);
  }
  if (vsig != -1) {
    msf_stream_free(&c->msf, &s);
    return ps_diag_set(c->diag, PS_E_UNSUPPORTED, "DBI header", 0,
                       "version signature %d: the pre-VC4.1 DBI layout is not supported", vsig);
  }
  c->st->ident.age = age;
  c->st->ident.machine = machine;
  /* substream order: modules, section contributions, section map, file info,
   * type server map, EC, debug header */
  size_t off[8];
  off[0] = DBI_HEADER_SIZE;
  int32_t all[7] = {sz[0], sz[1], sz[2], sz[3], sz[4], sz[5], dbg_size};
  static const char *const names[7] = {"module info", "section contributions", "section map",
                                       "file info", "type server map", "EC substream",
                                       "optional debug header"};
  for (int i = 0; i < 7; i++) {
    if (all[i] < 0 || (size_t)all[i] > s.len - off[i]) {
      msf_stream_free(&c->msf, &s);
      return ps_diag_set(c->diag, PS_E_CORRUPT, "DBI header", 24 + (size_t)i * 4,
                         "%s substream of %d bytes at 0x%zx does not fit in the %zu-byte "
                         "stream", names[i], all[i], off[i], s.len);
    }
    off[i + 1] = off[i] + (size_t)all[i];
  }
  uint16_t dbg[16];
  size_t ndbg = (size_t)dbg_size / 2;
  if (ndbg > 16)
    ndbg = 16;
  for (size_t i = 0; i < ndbg; i++)
    dbg[i] = ld16(s.data + off[6] + i * 2);
  e = read_sections(c, dbg, ndbg);

  /* IPI: names of inlinees (a broken IPI costs only inline names) */
  if (e == PS_E_OK && msf_stream(&c->msf, 4, &c->ipi, c->diag) == PS_E_OK) {
    ps_diag d;
    ps_diag_clear(&d);
    ps_diag *save = c->diag;
    c->diag = &d;
    if (index_types(c, &c->ipi, "IPI stream", &c->ipi_begin, &c->ipi_off, &c->nipi) != PS_E_OK)
      c->nipi = 0;
    c->diag = save;
  }

  /* modules */
  if (e == PS_E_OK)
    e = read_contribs(c, s.data + off[1], (size_t)sz[1], off[1]);
  ps_reader m = rd_sub(&r, off[0], (size_t)sz[0], "DBI module info");
  size_t cmods = 0;
  while (e == PS_E_OK && rd_left(&m) >= MODI_FIXED_SIZE) {
    struct modinfo mi;
    mi.at = m.origin + rd_tell(&m);
    rd_skip(&m, 4 + 28 + 2, "DBI module info");
    mi.sn = rd_u16(&m, "DBI module info");
    mi.sym = rd_u32(&m, "DBI module info");
    mi.c11 = rd_u32(&m, "DBI module info");
    mi.c13 = rd_u32(&m, "DBI module info");
    rd_skip(&m, 2 + 2 + 4 + 4 + 4, "DBI module info");
    mi.name = rd_cstr(&m, &mi.name_len, "DBI module name");
    rd_cstr(&m, NULL, "DBI module object name");
    rd_align(&m, 4, "DBI module info");
    if (!rd_ok(&m)) {
      e = rd_to_diag(&m, c->diag);
      break;
    }
    if (!grow_arr(c, (void **)&c->mods, &cmods, c->nmods, sizeof *c->mods)) {
      e = c->diag->code;
      break;
    }
    c->mods[c->nmods++] = mi;
  }
  if (e == PS_E_OK)
    e = check_module_streams(c);
  for (size_t i = 0; e == PS_E_OK && i < c->nmods; i++) {
    const struct modinfo *mi = &c->mods[i];
    c->cur_mod = (uint32_t)i;
    if (mi->sn == 0xFFFF)
      continue; /* a module without symbols */
    e = read_module(c, mi->sn, mi->sym, mi->c11, mi->c13, mi->at);
  }
  free_arr(c, c->mods, cmods, sizeof *c->mods);
  c->mods = NULL;
  c->nmods = 0;
  if (e == PS_E_OK && symrec != 0xFFFF)
    e = read_publics(c, symrec);
  msf_stream_free(&c->msf, &s);
  return e;
}

bool pdb_is_msf(const uint8_t *data, size_t len) { return msf_is_msf7(data, len); }

ps_err pdb_read(const uint8_t *data, size_t len, ps_budget *budget, symtab *st, ps_diag *diag) {
  pdb_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return ps_diag_set(diag, PS_E_NOMEM, "PDB reader", (size_t)-1, "context");
  c->st = st;
  c->diag = diag;
  c->budget = budget;
  /* a PDB's symbols take about its size in memory: a file that asks for
   * more than its allowance is refused (reader.h) */
  size_t cap = ps_budget_limit(budget, ps_input_allowance(len));
  st->ident.format = ST_FORMAT_WINDOWS;
  ps_err e = msf_open(&c->msf, data, len, budget, diag);
  uint32_t names_sn = MSF_NIL_STREAM;
  if (e == PS_E_OK)
    e = read_info(c, &names_sn);
  if (e == PS_E_OK) {
    read_names(c, names_sn);
    e = read_dbi(c);
  }
  if (e == PS_E_OK && st->err != PS_E_OK)
    e = ps_diag_set(diag, st->err, "symtab", (size_t)-1, "building the symbol table");
  if (e == PS_E_OK) {
    e = st_finish(st);
    if (e != PS_E_OK)
      ps_diag_set(diag, e, "symtab", (size_t)-1, "finishing the symbol table");
  }
  free_arr(c, c->sect_va, c->nsect, sizeof *c->sect_va);
  free_arr(c, c->isect, c->cisect, sizeof *c->isect);
  free_arr(c, c->omap, c->nomap, sizeof *c->omap);
  if (c->contribs)
    free(c->contribs);
  free_arr(c, c->img_starts, c->nomap, sizeof *c->img_starts);
  if (c->inv)
    free(c->inv);
  free_arr(c, c->ipi_off, c->nipi, sizeof *c->ipi_off);
  free_arr(c, c->tpi_off, c->ntpi, sizeof *c->tpi_off);
  free_arr(c, c->files, c->cfiles, sizeof *c->files);
  free_arr(c, c->exports, c->cexports, sizeof *c->exports);
  free_arr(c, c->isrc, c->cisrc, sizeof *c->isrc);
  free_arr(c, c->mprocs, c->cmprocs, sizeof *c->mprocs);
  free_arr(c, c->scratch, c->scratch_cap, 1);
  msf_stream_free(&c->msf, &c->names);
  msf_stream_free(&c->msf, &c->ipi);
  msf_stream_free(&c->msf, &c->tpi);
  msf_close(&c->msf);
  free(c);
  ps_budget_restore(budget, cap);
  return e;
}
