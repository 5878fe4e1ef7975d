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

#include "clrnames.h"
#include "msf.h"
#include "sourcelink.h"
#include "undname.h"

/* ---- record kinds (microsoft-pdb cvinfo.h) ------------------------------- */
enum {
  S_END = 0x0006,
  S_THUNK32_ST = 0x0206,
  S_OEM = 0x0404,
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
  /* lazy reading only (pdb_open): every contribution, code or not, sorted by
   * start; contribution i's territory runs to contribution i+1's start */
  struct contrib *terr;
  size_t nterr, cterr;
  bool want_terr;
  /* modules (from the DBI module info; names borrow the DBI stream) */
  struct modinfo {
    const char *name;
    size_t name_len;
    size_t at;
    uint32_t sym, c11, c13;
    uint16_t sn;
    bool exp_loaded;
    /* the module's cross-scope exports, sorted by local id (read when
     * another module first imports from it) */
    uint32_t nexp;
    struct xexport {
      uint32_t local, global;
    } *exp;
  } *mods;
  size_t nmods, cmods;
  msf_stream_t dbi;
  uint16_t symrec; /* symbol record stream (publics), 0xFFFF for none */
  /* this module's cross-scope imports subsection (borrowed while it is read) */
  const uint8_t *imports;
  size_t imports_len;
  /* /names */
  msf_stream_t names;
  const uint8_t *names_buf;
  uint32_t names_len;
  /* IPI and TPI record offsets */
  msf_stream_t ipi, tpi;
  uint32_t ipi_begin, tpi_begin;
  uint32_t *ipi_off, *tpi_off;
  uint32_t nipi, ntpi;
  bool ipi_tried, tpi_tried;
  const pdb_options *opts; /* may be NULL */
  /* lazy reading: read_publics adds only the publics this keeps */
  bool (*pub_filter)(void *arg, uint32_t rva);
  void *pub_arg;
  /* scratch reused across modules */
  uint8_t *scratch;
  size_t scratch_cap;
  file_ref *files;
  size_t nfiles, cfiles;
  inlinee_src *isrc;
  size_t nisrc, cisrc;
  manproc *mprocs;
  size_t nmprocs, cmprocs;
  /* managed iterators: kickoff methods naming their state machine type (MD2
   * "forward iterator" records), resolved against the modules' MoveNext
   * methods once every module is read */
  struct fwd_iter {
    uint32_t mod, token;
    size_t name, name_len; /* in fwd_names */
  } *fwd;
  size_t nfwd, cfwd;
  char *fwd_names;
  size_t fwd_names_len, cfwd_names;
  struct movenext {
    uint32_t mod;
    size_t index; /* in st->methods */
  } *mnext;
  size_t nmnext, cmnext;
  /* named streams with source information (PDB info stream's map) */
  uint32_t srcsrv_sn;
  struct sl_stream {
    uint32_t ordinal, sn; /* "sourcelink" 0, "sourcelink$N" N */
  } sl_streams[16];
  size_t nsl_streams;
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

/* by start, then size and module, so ties fall the same way on every run */
static int cmp_terr(const void *a, const void *b) {
  const struct contrib *x = a, *y = b;
  if (x->rva != y->rva)
    return x->rva < y->rva ? -1 : 1;
  if (x->size != y->size)
    return x->size < y->size ? -1 : 1;
  return x->mod < y->mod ? -1 : x->mod > y->mod;
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
  if (x->local != y->local)
    return x->local < y->local ? -1 : 1;
  return x->global < y->global ? -1 : x->global > y->global;
}

/* Reads one module's DEBUG_S_CROSSSCOPEEXPORTS (local id -> global IPI id
 * pairs), counted first so the array has its exact size.  Problems only cost
 * the names of cross-module inlinees. */
static void load_exports(pdb_ctx *c, struct modinfo *mi) {
  mi->exp_loaded = true;
  ps_diag d;
  ps_diag_clear(&d);
  msf_stream_t ms;
  if (mi->sn == 0xFFFF || msf_stream(&c->msf, mi->sn, &ms, &d) != PS_E_OK)
    return;
  uint64_t start = (uint64_t)mi->sym + mi->c11, end = start + mi->c13;
  for (int pass = 0; pass < 2; pass++) {
    size_t pos = (size_t)start, n = 0;
    while (end <= ms.len && pos + 8 <= end) {
      uint32_t kind = ld32(ms.data + pos), len = ld32(ms.data + pos + 4);
      if (len > end - pos - 8)
        break;
      if (kind == DEBUG_S_CROSSSCOPEEXPORTS) {
        for (size_t k = pos + 8; k + 8 <= pos + 8 + len; k += 8, n++) {
          if (pass == 1 && n < mi->nexp) {
            mi->exp[n].local = ld32(ms.data + k);
            mi->exp[n].global = ld32(ms.data + k + 4);
          }
        }
      }
      pos += 8 + (size_t)((len + 3u) & ~3u);
    }
    if (pass == 0) {
      ps_err e = PS_E_OK;
      if (n == 0 || n > UINT32_MAX ||
          !(mi->exp = ps_alloc_array(c->budget, n, sizeof *mi->exp, &e)))
        break;
      mi->nexp = (uint32_t)n;
    }
  }
  msf_stream_free(&c->msf, &ms);
  /* by (local, global): of two entries for one local id (a malformed
   * module), the smaller global id wins, whatever the order they came in */
  if (mi->nexp)
    qsort(mi->exp, mi->nexp, sizeof *mi->exp, cmp_xexport);
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
      for (size_t m = 0; m < c->nmods; m++) {
        struct modinfo *mi = &c->mods[m];
        if (!name_eq_nocase(mi->name, mi->name_len, nm, nl))
          continue;
        if (!mi->exp_loaded)
          load_exports(c, mi);
        size_t lo = 0, hi = mi->nexp; /* the first entry with this local id */
        while (lo < hi) {
          size_t mid = lo + (hi - lo) / 2;
          if (mi->exp[mid].local < local)
            lo = mid + 1;
          else
            hi = mid;
        }
        return lo < mi->nexp && mi->exp[lo].local == local ? mi->exp[lo].global : 0;
      }
      return 0;
    }
    pos += 8 + (size_t)count * 4;
  }
  return 0;
}

/* Indexes the IPI stream the first time an inlinee name is asked for (a
 * broken IPI costs only inline names). */
static void ipi_index(pdb_ctx *c) {
  if (c->ipi_tried)
    return;
  c->ipi_tried = true;
  ps_diag d;
  ps_diag_clear(&d);
  ps_diag *save = c->diag;
  c->diag = &d;
  if (msf_stream(&c->msf, 4, &c->ipi, c->diag) == PS_E_OK &&
      index_types(c, &c->ipi, "IPI stream", &c->ipi_begin, &c->ipi_off, &c->nipi) != PS_E_OK)
    c->nipi = 0;
  c->diag = save;
}

/* Inlinee name as llvm-symbolizer forms it: "Class::name" for LF_MFUNC_ID,
 * "scope::name" for LF_FUNC_ID with a parent scope string. */
static uint32_t inlinee_name(pdb_ctx *c, uint32_t id) {
  id = resolve_item(c, id);
  ipi_index(c);
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

/* ---- managed: generated code, async and iterator kickoffs ---------------
 *
 * Windows managed PDBs name each module after the type whose methods it
 * holds ("Ns.Outer.<SumAsync>d__3", nested types joined with '.'), which is
 * enough to tell a lambda or a state machine and the method the user wrote
 * (clrnames.h) without the assembly.  Custom debug information is an S_OEM
 * record inside the method's S_GMANPROC scope (microsoft-pdb cvinfo.h
 * OEMSYMBOL; Roslyn's CustomDebugInfoWriter, DiaSymReader's SymWriter):
 *
 *   GUID {C6EA3FC9-59B3-49D6-BC25-09020BBAB460} (CCI's "msilMetaData") |
 *   u32 type index (0) | name: UTF-16LE, NUL-terminated | data
 *
 *   "asyncMethodInfo" (ISymUnmanagedAsyncMethodPropertiesWriter, on MoveNext):
 *       u32 kickoff method token | u32 catch handler IL offset (-1: none) |
 *       u32 count | count x { u32 yield offset, u32 resume method, u32 resume offset }
 *   "MD2" (Roslyn's custom debug information): u8 version (4) | u8 count |
 *       u16 pad | records { u8 version | u8 kind | u8 pad | u8 align |
 *       u32 size (header included) | payload }; kind 4 ("forward iterator",
 *       StateMachineTypeName) on an iterator method names its state machine
 *       type (UTF-16LE, NUL-terminated).  Iterators have no asyncMethodInfo.
 */
static const uint8_t GUID_MSIL_OEM[16] = {0xC9, 0x3F, 0xEA, 0xC6, 0xB3, 0x59, 0xD6, 0x49,
                                          0xBC, 0x25, 0x09, 0x02, 0xBB, 0xAB, 0xB4, 0x60};
enum { CDI_STATE_MACHINE_TYPE_NAME = 4 };

/* UTF-16LE at p (n bytes, up to a NUL) as UTF-8 into out (cap bytes, cut
 * there); returns the UTF-8 length and sets *used to the bytes read,
 * including the NUL (0 when none follows). */
static size_t utf16_to_utf8(const uint8_t *p, size_t n, char *out, size_t cap, size_t *used) {
  size_t o = 0, i = 0;
  *used = 0;
  while (i + 1 < n) {
    uint32_t u = ld16(p + i);
    i += 2;
    if (u == 0) {
      *used = i;
      return o;
    }
    if (u >= 0xD800 && u < 0xDC00 && i + 1 < n) {
      uint32_t lo = ld16(p + i);
      if (lo >= 0xDC00 && lo < 0xE000) {
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        i += 2;
      }
    }
    if (u >= 0xD800 && u < 0xE000)
      u = 0xFFFD;
    char b[4];
    size_t k;
    if (u < 0x80) {
      b[0] = (char)u;
      k = 1;
    } else if (u < 0x800) {
      b[0] = (char)(0xC0 | u >> 6);
      b[1] = (char)(0x80 | (u & 0x3F));
      k = 2;
    } else if (u < 0x10000) {
      b[0] = (char)(0xE0 | u >> 12);
      b[1] = (char)(0x80 | ((u >> 6) & 0x3F));
      b[2] = (char)(0x80 | (u & 0x3F));
      k = 3;
    } else {
      b[0] = (char)(0xF0 | u >> 18);
      b[1] = (char)(0x80 | ((u >> 12) & 0x3F));
      b[2] = (char)(0x80 | ((u >> 6) & 0x3F));
      b[3] = (char)(0x80 | (u & 0x3F));
      k = 4;
    }
    if (k > cap - o)
      break;
    memcpy(out + o, b, k);
    o += k;
  }
  return o;
}

/* The module being read, or NULL. */
static const struct modinfo *cur_module(const pdb_ctx *c) {
  return c->mods && c->cur_mod < c->nmods ? &c->mods[c->cur_mod] : NULL;
}

/* Generated code from the module's name and the method's (no assembly at
 * hand): the user's method is "<module type>.<name>", nested types with '.'. */
static void managed_user_from_module(pdb_ctx *c, size_t index, const char *nm, size_t nl) {
  const struct modinfo *mi = cur_module(c);
  if (!mi || !mi->name || !nm)
    return;
  cn_span parts[64];
  size_t np = cn_split_dotted(mi->name, mi->name_len, parts, 64);
  cn_user u;
  cn_span meth = {nm, nl};
  if (!cn_classify(parts, np, meth, &u))
    return;
  char buf[1024];
  size_t tl = (size_t)(parts[u.keep - 1].p + parts[u.keep - 1].n - mi->name);
  if (tl + 1 + u.user.n > sizeof buf)
    return;
  memcpy(buf, mi->name, tl);
  buf[tl] = '.';
  memcpy(buf + tl + 1, u.user.p, u.user.n);
  st_set_method_user(c->st, index, (uint32_t)u.kind, st_str(c->st, buf, tl + 1 + u.user.n),
                     u.local.n ? st_str(c->st, u.local.p, u.local.n) : 0);
}

/* An S_OEM record inside the managed method methods[index] (token). */
static ps_err managed_oem(pdb_ctx *c, size_t index, uint32_t token, const uint8_t *p, size_t n) {
  if (n < 20 || memcmp(p, GUID_MSIL_OEM, 16) != 0)
    return PS_E_OK;
  char name[32];
  size_t used;
  size_t nl = utf16_to_utf8(p + 20, n - 20, name, sizeof name, &used);
  if (!used)
    return PS_E_OK;
  const uint8_t *d = p + 20 + used;
  size_t dn = n - 20 - used;
  if (nl == 15 && memcmp(name, "asyncMethodInfo", 15) == 0) {
    if (dn < 4)
      return PS_E_OK;
    uint32_t kickoff = ld32(d);
    if ((kickoff >> 24) == 0x06 && (kickoff & 0xFFFFFF) != 0 && kickoff != token &&
        index < c->st->nmethods)
      c->st->methods[index].kickoff = kickoff;
    return PS_E_OK;
  }
  if (nl != 3 || memcmp(name, "MD2", 3) != 0 || dn < 4 || d[0] != 4)
    return PS_E_OK;
  unsigned count = d[1];
  size_t pos = 4;
  for (unsigned k = 0; k < count && pos + 8 <= dn; k++) {
    uint32_t size = ld32(d + pos + 4);
    if (size < 8 || size > dn - pos)
      break;
    if (d[pos] == 4 && d[pos + 1] == CDI_STATE_MACHINE_TYPE_NAME) {
      const struct modinfo *mi = cur_module(c);
      char tn[512];
      size_t tu;
      size_t tl = utf16_to_utf8(d + pos + 8, size - 8, tn, sizeof tn, &tu);
      if (mi && tl && tu) {
        if (!grow_arr(c, (void **)&c->fwd, &c->cfwd, c->nfwd, sizeof *c->fwd))
          return c->diag->code;
        size_t need = c->fwd_names_len + tl;
        if (need > c->cfwd_names) {
          size_t nc = c->cfwd_names ? c->cfwd_names * 2 : 1024;
          while (nc < need)
            nc *= 2;
          ps_err e = PS_E_OK;
          char *q = ps_realloc_array(c->budget, c->fwd_names, c->cfwd_names, nc, 1, &e);
          if (!q)
            return ps_diag_set(c->diag, e, "PDB scratch", (size_t)-1, "iterator names");
          c->fwd_names = q;
          c->cfwd_names = nc;
        }
        memcpy(c->fwd_names + c->fwd_names_len, tn, tl);
        struct fwd_iter f = {c->cur_mod, token, c->fwd_names_len, tl};
        c->fwd[c->nfwd++] = f;
        c->fwd_names_len += tl;
      }
    }
    pos += size;
  }
  return PS_E_OK;
}

typedef struct {
  const char *name;
  size_t len;
  uint32_t mod;
} mod_by_name;

static int cmp_mod_by_name(const void *a, const void *b) {
  const mod_by_name *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int r = memcmp(x->name, y->name, n);
  if (r)
    return r;
  if (x->len != y->len)
    return x->len < y->len ? -1 : 1;
  return x->mod < y->mod ? -1 : x->mod > y->mod;
}

/* Iterators: the MoveNext of module "<kickoff's module>.<state machine>"
 * runs the kickoff method (the same pairing Portable PDBs' StateMachineMethod
 * table records). */
static ps_err resolve_iterators(pdb_ctx *c) {
  if (!c->nfwd || !c->nmnext)
    return PS_E_OK;
  ps_err e = PS_E_OK;
  mod_by_name *byname = ps_alloc_array(c->budget, c->nmods, sizeof *byname, &e);
  char *want = byname ? ps_alloc_array(c->budget, NAME_CAP, 1, &e) : NULL;
  if (!want) {
    free(byname);
    return ps_diag_set(c->diag, e, "PDB scratch", (size_t)-1, "module names");
  }
  for (size_t i = 0; i < c->nmods; i++) {
    byname[i].name = c->mods[i].name ? c->mods[i].name : "";
    byname[i].len = c->mods[i].name ? c->mods[i].name_len : 0;
    byname[i].mod = (uint32_t)i;
  }
  qsort(byname, c->nmods, sizeof *byname, cmp_mod_by_name);
  for (size_t f = 0; f < c->nfwd; f++) {
    const struct fwd_iter *fi = &c->fwd[f];
    const struct modinfo *km = &c->mods[fi->mod];
    if (!km->name || km->name_len + 1 + fi->name_len > NAME_CAP)
      continue;
    memcpy(want, km->name, km->name_len);
    want[km->name_len] = '.';
    memcpy(want + km->name_len + 1, c->fwd_names + fi->name, fi->name_len);
    mod_by_name key = {want, km->name_len + 1 + fi->name_len, 0};
    size_t lo = 0, hi = c->nmods;
    while (lo < hi) { /* first module with this name */
      size_t mid = lo + (hi - lo) / 2;
      if (cmp_mod_by_name(&byname[mid], &key) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    /* the record names the type without its generic arity ("<Project>d__3"
     * for the module "...<Project>d__3`1"): take the name itself or name`N */
    uint32_t target = UINT32_MAX;
    for (size_t k = lo; k < c->nmods && k < lo + 64 && target == UINT32_MAX; k++) {
      const mod_by_name *b = &byname[k];
      if (b->len < key.len || memcmp(b->name, want, key.len) != 0)
        break;
      bool arity = b->len > key.len + 1 && b->name[key.len] == '`';
      for (size_t q = key.len + 1; arity && q < b->len; q++)
        arity = b->name[q] >= '0' && b->name[q] <= '9';
      if (b->len == key.len || arity)
        target = b->mod;
    }
    if (target == UINT32_MAX)
      continue;
    for (size_t k = 0; k < c->nmnext; k++) { /* in module order: stop past the target */
      if (c->mnext[k].mod > target)
        break;
      size_t idx = c->mnext[k].index;
      if (c->mnext[k].mod == target && idx < c->st->nmethods && !c->st->methods[idx].kickoff)
        c->st->methods[idx].kickoff = fi->token;
    }
  }
  free(want);
  free(byname);
  ps_budget_release(c->budget, c->nmods * sizeof *byname + NAME_CAP);
  return PS_E_OK;
}

static ps_err read_symbols(pdb_ctx *c, const uint8_t *base, size_t len, size_t origin) {
  scope stack[MAX_SCOPE_DEPTH];
  int depth = 0;      /* scopes on the stack */
  int ninl = 0;       /* inline sites among them */
  uint32_t proc_src = 0, proc_rva = 0; /* current procedure, source and image rva */
  bool in_proc = false;
  uint32_t mtoken = 0; /* the managed method whose scope is open, 0 if none */
  size_t mindex = 0;   /* ... its record in st->methods */
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
      mtoken = m.token;
      mindex = c->st->nmethods - 1;
      managed_user_from_module(c, mindex, nm, nl);
      if (nm && nl == 8 && memcmp(nm, "MoveNext", 8) == 0) {
        if (!grow_arr(c, (void **)&c->mnext, &c->cmnext, c->nmnext, sizeof *c->mnext))
          return c->diag->code;
        struct movenext mv = {c->cur_mod, mindex};
        c->mnext[c->nmnext++] = mv;
      }
      break;
    }
    case S_OEM:
      if (mtoken) {
        ps_err oe = managed_oem(c, mindex, mtoken, p, n);
        if (oe != PS_E_OK)
          return oe;
      }
      break;
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
        if (stack[depth].kind == 1) {
          in_proc = false;
          mtoken = 0;
        }
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

/* Remembers the streams named "srcsrv", "sourcelink" and "sourcelink$N". */
static void note_named_stream(pdb_ctx *c, const uint8_t *name, size_t max, uint32_t sn) {
  const uint8_t *nul = memchr(name, 0, max);
  if (!nul)
    return;
  size_t n = (size_t)(nul - name);
  if (n == 6 && memcmp(name, "srcsrv", 6) == 0) {
    c->srcsrv_sn = sn;
    return;
  }
  if (n < 10 || memcmp(name, "sourcelink", 10) != 0 || c->nsl_streams == 16)
    return;
  uint32_t ordinal = 0;
  if (n > 10) {
    if (name[10] != '$' || n == 11 || n > 20)
      return;
    for (size_t i = 11; i < n; i++) {
      if (name[i] < '0' || name[i] > '9')
        return;
      ordinal = ordinal * 10 + (uint32_t)(name[i] - '0');
    }
  }
  c->sl_streams[c->nsl_streams].ordinal = ordinal;
  c->sl_streams[c->nsl_streams].sn = sn;
  c->nsl_streams++;
}

/* Source Link from the "sourcelink" stream(s), and srcsrv data as exact
 * Source Link rules (sourcelink.h), into st->source_link: one JSON object,
 * or an array of them.  Source information is optional: a stream that
 * cannot be read or parsed is left out and never fails the PDB. */
static void read_source_info(pdb_ctx *c) {
  if (!c->nsl_streams && c->srcsrv_sn == MSF_NIL_STREAM)
    return;
  for (size_t i = 1; i < c->nsl_streams; i++) /* by ordinal: few, insertion sort */
    for (size_t k = i; k > 0 && c->sl_streams[k - 1].ordinal > c->sl_streams[k].ordinal; k--) {
      struct sl_stream t = c->sl_streams[k];
      c->sl_streams[k] = c->sl_streams[k - 1];
      c->sl_streams[k - 1] = t;
    }
  const char *part[17];
  size_t plen[17], nparts = 0;
  msf_stream_t ms[16];
  size_t nms = 0;
  char *srv = NULL;
  size_t srv_len = 0, srv_cap = 0, srv_files = 0;
  ps_diag d;
  for (size_t i = 0; i < c->nsl_streams; i++) {
    ps_diag_clear(&d);
    if (msf_stream(&c->msf, c->sl_streams[i].sn, &ms[nms], &d) != PS_E_OK)
      continue;
    const char *t = (const char *)ms[nms].data;
    size_t n = ms[nms].len;
    nms++;
    const char *z = memchr(t, '\0', n);
    if (z)
      n = (size_t)(z - t);
    if (n >= 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0) {
      t += 3;
      n -= 3;
    }
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == '\t'))
      n--;
    sl_map probe;
    ps_diag_clear(&d);
    if (n == 0 || sl_map_build(&probe, t, n, c->budget, &d) != PS_E_OK)
      continue;
    sl_map_free(&probe, c->budget);
    part[nparts] = t;
    plen[nparts++] = n;
  }
  if (c->srcsrv_sn != MSF_NIL_STREAM) {
    msf_stream_t ss;
    ps_diag_clear(&d);
    if (msf_stream(&c->msf, c->srcsrv_sn, &ss, &d) == PS_E_OK) {
      ps_diag_clear(&d);
      if (sl_from_srcsrv((const char *)ss.data, ss.len, c->budget, &srv, &srv_len, &srv_cap,
                         &srv_files, &d) == PS_E_OK) {
        part[nparts] = srv;
        plen[nparts++] = srv_len;
      }
      msf_stream_free(&c->msf, &ss);
    }
  }
  if (nparts == 1) {
    c->st->source_link = st_str(c->st, part[0], plen[0]);
  } else if (nparts > 1) {
    size_t total = 2 + nparts;
    for (size_t i = 0; i < nparts; i++)
      total += plen[i];
    ps_err e = PS_E_OK;
    char *all = ps_alloc_array(c->budget, total, 1, &e);
    if (all) {
      size_t o = 0;
      all[o++] = '[';
      for (size_t i = 0; i < nparts; i++) {
        if (i)
          all[o++] = ',';
        memcpy(all + o, part[i], plen[i]);
        o += plen[i];
      }
      all[o++] = ']';
      c->st->source_link = st_str(c->st, all, o);
      free(all);
      ps_budget_release(c->budget, total);
    }
  }
  for (size_t i = 0; i < nms; i++)
    msf_stream_free(&c->msf, &ms[i]);
  if (srv) {
    free(srv);
    ps_budget_release(c->budget, srv_cap);
  }
}

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
      if (key < sblen)
        note_named_stream(c, s.data + sbstart + key, sblen - key, val);
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
    /* IMAGE_SCN_CNT_CODE or IMAGE_SCN_MEM_EXECUTE, with bytes in the file:
     * an executable section without raw data (.textbss, the incremental
     * linker's Edit-and-Continue reserve) holds no code, only the linker's
     * __enc$textbss$begin/end markers */
    k->code = ((ch & 0x20u) || (ch & 0x20000000u)) && raw != 0;
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
    if (c->pub_filter && !c->pub_filter(c->pub_arg, rva))
      continue; /* lazy reading: a public no asked address looks at */
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
  if (c->want_terr &&
      !(c->terr = ps_alloc_array(c->budget, n ? n : 1, sizeof *c->terr, &e)))
    return ps_diag_set(c->diag, e, "DBI section contributions", origin, "%zu entries", n);
  if (c->terr)
    c->cterr = n ? n : 1;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *q = p + 4 + i * esz;
    uint32_t rva;
    int32_t size;
    memcpy(&size, q + 8, 4);
    if (!sect_rva(c, ld16(q), ld32(q + 4), &rva) || size <= 0)
      continue;
    if (c->terr) {
      struct contrib *t = &c->terr[c->nterr++];
      t->rva = rva;
      t->size = (uint32_t)size;
      t->mod = ld16(q + 16);
    }
    if (!(ld32(q + 12) & 0x20u))
      continue; /* only code (IMAGE_SCN_CNT_CODE) */
    c->contribs[k].rva = rva;
    c->contribs[k].size = (uint32_t)size;
    c->contribs[k].mod = ld16(q + 16);
    k++;
  }
  c->ncontribs = k;
  qsort(c->contribs, k, sizeof *c->contribs, cmp_contrib);
  if (c->terr)
    qsort(c->terr, c->nterr, sizeof *c->terr, cmp_terr);
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

  /* modules (the IPI stream is indexed when a module first needs an inlinee name) */
  if (e == PS_E_OK)
    e = read_contribs(c, s.data + off[1], (size_t)sz[1], off[1]);
  ps_reader m = rd_sub(&r, off[0], (size_t)sz[0], "DBI module info");
  while (e == PS_E_OK && rd_left(&m) >= MODI_FIXED_SIZE) {
    struct modinfo mi;
    memset(&mi, 0, sizeof mi);
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
    if (!grow_arr(c, (void **)&c->mods, &c->cmods, c->nmods, sizeof *c->mods)) {
      e = c->diag->code;
      break;
    }
    c->mods[c->nmods++] = mi;
  }
  if (e == PS_E_OK)
    e = check_module_streams(c);
  c->symrec = symrec;
  c->dbi = s; /* module names point into it; released with the context */
  return e;
}

/* Gives the caller back the file bytes of stream sn once it has been read
 * (pdb_options.release), one call per run of consecutive blocks. */
static void release_stream(pdb_ctx *c, uint32_t sn) {
  if (c->opts && c->opts->release)
    msf_stream_ranges(&c->msf, sn, c->opts->release, c->opts->release_arg);
}

/* Reads module i into c->st. */
static ps_err read_module_at(pdb_ctx *c, size_t i) {
  const struct modinfo *mi = &c->mods[i];
  c->cur_mod = (uint32_t)i;
  if (mi->sn == 0xFFFF)
    return PS_E_OK; /* a module without symbols */
  ps_err e = read_module(c, mi->sn, mi->sym, mi->c11, mi->c13, mi->at);
  release_stream(c, mi->sn);
  return e;
}

bool pdb_is_msf(const uint8_t *data, size_t len) { return msf_is_msf7(data, len); }

/* What every reading starts with: the MSF directory, the PDB info stream
 * (identity into c->st), /names, and the DBI stream without the modules. */
static ps_err pdb_begin(pdb_ctx *c, const uint8_t *data, size_t len) {
  c->st->ident.format = ST_FORMAT_WINDOWS;
  c->symrec = 0xFFFF;
  c->srcsrv_sn = MSF_NIL_STREAM;
  ps_err e = msf_open(&c->msf, data, len, c->budget, c->diag);
  uint32_t names_sn = MSF_NIL_STREAM;
  if (e == PS_E_OK)
    e = read_info(c, &names_sn);
  if (e == PS_E_OK) {
    read_names(c, names_sn);
    e = read_dbi(c);
  }
  return e;
}

static ps_err finish_table(pdb_ctx *c) {
  symtab *st = c->st;
  ps_err e = PS_E_OK;
  if (st->err != PS_E_OK)
    e = ps_diag_set(c->diag, st->err, "symtab", (size_t)-1, "building the symbol table");
  if (e == PS_E_OK) {
    e = st_finish(st);
    if (e != PS_E_OK)
      ps_diag_set(c->diag, e, "symtab", (size_t)-1, "finishing the symbol table");
  }
  return e;
}

static void ctx_free(pdb_ctx *c);

ps_err pdb_read_with(const uint8_t *data, size_t len, ps_budget *budget, const pdb_options *opts,
                     symtab *st, ps_diag *diag) {
  pdb_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return ps_diag_set(diag, PS_E_NOMEM, "PDB reader", (size_t)-1, "context");
  c->st = st;
  c->diag = diag;
  c->budget = budget;
  c->opts = opts;
  /* a PDB's symbols take about its size in memory: a file that asks for
   * more than its allowance is refused (reader.h) */
  size_t cap = ps_budget_limit(budget, ps_input_allowance(len));
  ps_err e = pdb_begin(c, data, len);
  for (size_t i = 0; e == PS_E_OK && i < c->nmods; i++)
    e = read_module_at(c, i);
  if (e == PS_E_OK)
    e = resolve_iterators(c);
  if (e == PS_E_OK && c->symrec != 0xFFFF) {
    e = read_publics(c, c->symrec);
    release_stream(c, c->symrec);
  }
  if (e == PS_E_OK)
    read_source_info(c);
  if (e == PS_E_OK)
    e = finish_table(c);
  ctx_free(c);
  ps_budget_restore(budget, cap);
  return e;
}

ps_err pdb_read(const uint8_t *data, size_t len, ps_budget *budget, symtab *st, ps_diag *diag) {
  return pdb_read_with(data, len, budget, NULL, st, diag);
}

static void ctx_free(pdb_ctx *c) {
  free_arr(c, c->sect_va, c->nsect, sizeof *c->sect_va);
  free_arr(c, c->isect, c->cisect, sizeof *c->isect);
  free_arr(c, c->omap, c->nomap, sizeof *c->omap);
  if (c->contribs)
    free(c->contribs);
  free_arr(c, c->img_starts, c->nomap, sizeof *c->img_starts);
  if (c->inv)
    free(c->inv);
  free_arr(c, c->terr, c->cterr, sizeof *c->terr);
  free_arr(c, c->ipi_off, c->nipi, sizeof *c->ipi_off);
  free_arr(c, c->tpi_off, c->ntpi, sizeof *c->tpi_off);
  free_arr(c, c->files, c->cfiles, sizeof *c->files);
  for (size_t i = 0; i < c->nmods; i++)
    free_arr(c, c->mods[i].exp, c->mods[i].nexp, sizeof *c->mods[i].exp);
  free_arr(c, c->mods, c->cmods, sizeof *c->mods);
  free_arr(c, c->isrc, c->cisrc, sizeof *c->isrc);
  free_arr(c, c->mprocs, c->cmprocs, sizeof *c->mprocs);
  free_arr(c, c->fwd, c->cfwd, sizeof *c->fwd);
  free_arr(c, c->fwd_names, c->cfwd_names, 1);
  free_arr(c, c->mnext, c->cmnext, sizeof *c->mnext);
  free_arr(c, c->scratch, c->scratch_cap, 1);
  msf_stream_free(&c->msf, &c->names);
  msf_stream_free(&c->msf, &c->ipi);
  msf_stream_free(&c->msf, &c->tpi);
  msf_stream_free(&c->msf, &c->dbi);
  msf_close(&c->msf);
  free(c);
}

/* ---- lazy reading (pdb_open, pdb_module_table) ------------------------------
 *
 * Why the partial table answers like the whole one (pdb.h says the rule):
 * a module is read the same way whichever other modules are read (what it
 * depends on, the contributions, IPI, TPI and the exports of the modules it
 * imports from, is read for it), and the modules of the partial table are
 * read in DBI order, the publics after them, as pdb_read does; so the
 * partial table is the whole table without the records of the modules left
 * out, and without the publics no asked address looks at.  st_lookup_rva
 * consults, for an address A:
 *   - the function containing A, its inline ranges and the line covering A:
 *     each lies in the territory of the module owning A, which is read;
 *   - when no function contains A: the last public P at or before A (all
 *     the publics at that RVA are kept, in stream order, so the same one is
 *     last) and its size, which st_finish bounds by the next public (the
 *     first one after A: kept too), the end of P's image section and the
 *     first function at or after P; then the line covering A and, for a
 *     hidden line, the lines from P to P's end.  Every function and line
 *     from P up to the next public or the section's end, whichever comes
 *     first, lies in the territories there, whose owners are read.
 * lazy_prepare reads exactly those; in_territories checks each module read
 * against the rule.  A module that owns no contribution at all has no
 * territory and is always read: lld puts the import thunks in "Import:DLL"
 * modules and their contributions under "* Linker *".
 */

#define LAZY_MAX_PERCENT 25u
#define LAZY_MAX_BUILDS 8u
#define LAZY_SMALL ((uint64_t)4 << 20) /* module bytes always worth reading lazily */

typedef struct {
  uint32_t *v; /* sorted, unique */
  size_t n, cap;
} rva_set;

struct pdb_lazy {
  pdb_ctx *c;
  ps_budget *budget;
  pdb_options opts;
  st_ident ident;
  uint8_t *want, *have; /* [nmods]: modules the asked addresses need / in the table */
  uint8_t *base;        /* [nmods]: modules without a territory, always read */
  rva_set pub_want, pub_have; /* RVAs whose publics the table needs / holds */
  bool pub_all_want, pub_all_have; /* every public (a whole table) */
  uint32_t *pubs;       /* the RVA of every public read_publics adds, sorted */
  size_t npubs, cpubs;
  ps_err pubs_err;
  bool pubs_scanned, built;
  const char *full;     /* why every module is read, or NULL */
  bool full_fixed;      /* full for a property of the file */
  unsigned builds;
  uint64_t mod_bytes;   /* bytes of all module streams */
  size_t cap;           /* the budget's cap before pdb_open, given back by pdb_close */
  symtab st;
};

/* Frees a table and gives its bytes back to the budget (st_memory_size less
 * what was not taken from it: the struct, and the Source Link map's) */
static void drop_table(ps_budget *b, symtab *st) {
  ps_budget_release(b, st_memory_size(st) - sizeof *st - (st->slmap ? sizeof *st->slmap : 0));
  st_free(st);
}

static uint64_t mod_bytes(const pdb_ctx *c, size_t i) {
  uint16_t sn = c->mods[i].sn;
  return sn != 0xFFFF && msf_has_stream(&c->msf, sn) ? c->msf.sizes[sn] : 0;
}

/* the first index of v[0..n) holding a value > x */
static size_t upper(const uint32_t *v, size_t n, uint32_t x) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static bool set_has(const rva_set *s, uint32_t x) {
  size_t i = upper(s->v, s->n, x);
  return i > 0 && s->v[i - 1] == x;
}

static bool set_add(ps_budget *b, rva_set *s, uint32_t x, ps_err *e) {
  size_t i = upper(s->v, s->n, x);
  if (i > 0 && s->v[i - 1] == x)
    return true;
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 16;
    uint32_t *p = ps_realloc_array(b, s->v, s->cap, nc, sizeof *p, e);
    if (!p)
      return false;
    s->v = p;
    s->cap = nc;
  }
  memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
  s->v[i] = x;
  s->n++;
  return true;
}

static bool set_copy(ps_budget *b, rva_set *to, const rva_set *from, ps_err *e) {
  if (to->cap < from->n) {
    uint32_t *p = ps_realloc_array(b, to->v, to->cap, from->n, sizeof *p, e);
    if (!p)
      return false;
    to->v = p;
    to->cap = from->n;
  }
  if (from->n)
    memcpy(to->v, from->v, from->n * sizeof *to->v);
  to->n = from->n;
  return true;
}

static void set_free(ps_budget *b, rva_set *s) {
  if (s->v)
    ps_budget_release(b, s->cap * sizeof *s->v);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* the territory holding rva: the last contribution starting at or before it
 * (the first one's territory also runs down to 0) */
static size_t terr_index(const pdb_ctx *c, uint32_t rva) {
  size_t lo = 0, hi = c->nterr;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->terr[mid].rva <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? lo - 1 : 0;
}

/* true when [rva, rva+size) lies in module mod's territories */
static bool in_territory(const pdb_ctx *c, uint32_t mod, uint32_t rva, uint32_t size) {
  if (!c->nterr)
    return false;
  uint64_t end = (uint64_t)rva + (size ? size : 1);
  for (size_t i = terr_index(c, rva); i < c->nterr; i++) {
    if (c->terr[i].mod != mod)
      return false;
    if (i + 1 == c->nterr || end <= c->terr[i + 1].rva)
      return true;
  }
  return false;
}

/* true when every record module mod added to st (funcs from nf, lines from
 * nl, inline ranges from nr on) lies in its territories; else the first one
 * that does not goes to *bad (when not NULL) */
static bool in_territories(const pdb_ctx *c, uint32_t mod, const symtab *st, size_t nf,
                           size_t nl, size_t nr, pdb_lazy_audit *bad) {
  const char *kind = NULL;
  uint32_t rva = 0, size = 0;
  for (size_t i = nf; !kind && i < st->nfuncs; i++) {
    rva = st->funcs[i].rva;
    size = st->funcs[i].size;
    if (!in_territory(c, mod, rva, size))
      kind = st->funcs[i].flags & ST_FUNC_THUNK ? "thunk" : "function";
  }
  for (size_t i = nl; !kind && i < st->nlines; i++) {
    rva = st->lines[i].rva;
    size = st->lines[i].size;
    if (!in_territory(c, mod, rva, size))
      kind = "line";
  }
  for (size_t i = nr; !kind && i < st->niranges; i++) {
    rva = st->iranges[i].rva;
    size = st->iranges[i].size;
    if (!in_territory(c, mod, rva, size))
      kind = "inline range";
  }
  if (kind && bad) {
    bad->module = mod;
    bad->module_name = c->mods[mod].name;
    bad->kind = kind;
    bad->rva = rva;
    bad->size = size;
    bad->owner = c->terr[terr_index(c, rva)].mod;
  }
  return !kind;
}

static void set_full(pdb_lazy *z, const char *why) {
  z->full = why;
  memset(z->want, 1, z->c->nmods ? z->c->nmods : 1);
  z->pub_all_want = true;
}

/* Marks the owners of the territories from lo to hi as wanted. */
static void want_owners(pdb_lazy *z, uint32_t lo, uint32_t hi) {
  const pdb_ctx *c = z->c;
  if (!c->nterr || z->full)
    return;
  for (size_t i = terr_index(c, lo), e = terr_index(c, hi); i <= e; i++)
    if (c->terr[i].mod < c->nmods)
      z->want[c->terr[i].mod] = 1;
}

static bool wants_change(const pdb_lazy *z) {
  return !z->built || z->pub_all_want != z->pub_all_have || z->pub_want.n != z->pub_have.n ||
         (z->pub_want.n &&
          memcmp(z->pub_want.v, z->pub_have.v, z->pub_want.n * sizeof *z->pub_want.v) != 0) ||
         memcmp(z->want, z->have, z->c->nmods) != 0;
}

static bool keep_public(void *arg, uint32_t rva) {
  return set_has(&((pdb_lazy *)arg)->pub_want, rva);
}

static bool note_public(void *arg, uint32_t rva) {
  pdb_lazy *z = arg;
  ps_err e = PS_E_OK;
  if (z->npubs == z->cpubs) {
    size_t nc = z->cpubs ? z->cpubs * 2 : 1024;
    uint32_t *p = ps_realloc_array(z->budget, z->pubs, z->cpubs, nc, sizeof *p, &e);
    if (!p) {
      z->pubs_err = e; /* scan_publics fails */
      return false;
    }
    z->pubs = p;
    z->cpubs = nc;
  }
  z->pubs[z->npubs++] = rva;
  return false; /* add nothing */
}

static int cmp_rva(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The RVAs of every public read_publics would add, sorted. */
static ps_err scan_publics(pdb_lazy *z, ps_diag *diag) {
  pdb_ctx *c = z->c;
  z->pubs_scanned = true;
  if (c->symrec == 0xFFFF)
    return PS_E_OK;
  c->st = &z->st;
  c->diag = diag;
  c->pub_filter = note_public;
  c->pub_arg = z;
  ps_err e = read_publics(c, c->symrec);
  c->pub_filter = NULL;
  c->st = NULL;
  if (e == PS_E_OK && z->pubs_err != PS_E_OK)
    e = ps_diag_set(diag, z->pubs_err, "symbol record stream", (size_t)-1,
                    "%zu public RVAs", z->npubs);
  if (e == PS_E_OK && z->npubs)
    qsort(z->pubs, z->npubs, sizeof *z->pubs, cmp_rva);
  return e;
}

/* (Re)builds the table from the wanted modules, in DBI order, then the
 * wanted publics. */
static ps_err lazy_build(pdb_lazy *z, ps_diag *diag) {
  pdb_ctx *c = z->c;
  if (!z->full) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < c->nmods; i++)
      if (z->want[i])
        bytes += mod_bytes(c, i);
    unsigned pct = z->opts.lazy_max_percent ? z->opts.lazy_max_percent : LAZY_MAX_PERCENT;
    unsigned maxb = z->opts.lazy_max_builds ? z->opts.lazy_max_builds : LAZY_MAX_BUILDS;
    if (z->builds >= maxb)
      set_full(z, "the table was rebuilt too often");
    else if (bytes * 100 > z->mod_bytes * pct && bytes > LAZY_SMALL)
      set_full(z, "the addresses need much of the file");
  }
  for (;;) {
    symtab t;
    st_init(&t, z->budget);
    t.ident = z->ident;
    c->st = &t;
    c->diag = diag;
    c->nfwd = c->fwd_names_len = c->nmnext = 0; /* what the modules read note */
    ps_err e = PS_E_OK;
    bool outside = false;
    for (size_t i = 0; e == PS_E_OK && !outside && i < c->nmods; i++) {
      if (!z->want[i])
        continue;
      size_t nf = t.nfuncs, nl = t.nlines, nr = t.niranges;
      e = read_module_at(c, i);
      outside = e == PS_E_OK && !z->full && !z->base[i] &&
                !in_territories(c, (uint32_t)i, &t, nf, nl, nr, NULL);
    }
    if (outside) {
      c->st = NULL;
      drop_table(z->budget, &t);
      set_full(z, "a module has records outside its section contributions");
      z->full_fixed = true;
      continue;
    }
    if (e == PS_E_OK)
      e = resolve_iterators(c); /* managed kickoffs: of the modules read */
    if (e == PS_E_OK && c->symrec != 0xFFFF && (z->pub_all_want || z->pub_want.n)) {
      c->pub_filter = z->pub_all_want ? NULL : keep_public;
      c->pub_arg = z;
      e = read_publics(c, c->symrec);
      c->pub_filter = NULL;
    }
    if (e == PS_E_OK)
      read_source_info(c); /* the file's Source Link and srcsrv maps */
    if (e == PS_E_OK)
      e = finish_table(c);
    c->st = NULL;
    if (e == PS_E_OK && !set_copy(z->budget, &z->pub_have, &z->pub_want, &e))
      ps_diag_set(diag, e, "PDB reader", (size_t)-1, "lazy table");
    if (e != PS_E_OK) {
      drop_table(z->budget, &t);
      z->built = false; /* pub_have may be half copied: rebuild next time */
      return e;
    }
    /* what pdb_read puts in the table from outside the modules and the
     * publics (the identity, t.ident above; the Source Link and srcsrv maps,
     * read_source_info) must be given to t here too */
    drop_table(z->budget, &z->st);
    z->st = t;
    memcpy(z->have, z->want, c->nmods);
    z->pub_all_have = z->pub_all_want;
    z->built = true;
    z->builds++;
    return PS_E_OK;
  }
}

static ps_err lazy_prepare(pdb_lazy *z, const uint32_t *rvas, size_t n, ps_diag *diag) {
  for (size_t i = 0; i < n; i++)
    want_owners(z, rvas[i], rvas[i]);
  ps_err e = PS_E_OK;
  if (wants_change(z) && (e = lazy_build(z, diag)) != PS_E_OK)
    return e;
  if (z->full)
    return PS_E_OK;
  /* the addresses no function contains fall back to the publics */
  bool fallback = false;
  for (size_t i = 0; i < n && !fallback; i++)
    fallback = st_func_index(&z->st, rvas[i]) < 0;
  if (!fallback)
    return PS_E_OK;
  if (!z->pubs_scanned && (e = scan_publics(z, diag)) != PS_E_OK)
    return e;
  for (size_t i = 0; i < n; i++) {
    if (st_func_index(&z->st, rvas[i]) >= 0)
      continue;
    size_t k = upper(z->pubs, z->npubs, rvas[i]);
    if (k < z->npubs && !set_add(z->budget, &z->pub_want, z->pubs[k], &e))
      break;
    if (k > 0) {
      uint32_t p = z->pubs[k - 1];
      if (!set_add(z->budget, &z->pub_want, p, &e))
        break;
      /* P's end can be no further than the next public or its section's end */
      uint64_t end = k < z->npubs ? z->pubs[k] : (uint64_t)UINT32_MAX + 1;
      const struct img_sect *sec = image_section(z->c, p);
      if (sec && sec->end < end)
        end = sec->end;
      want_owners(z, p, end > rvas[i] ? (uint32_t)(end - 1) : rvas[i]);
    }
  }
  if (e != PS_E_OK)
    return ps_diag_set(diag, e, "PDB reader", (size_t)-1, "lazy table");
  if (wants_change(z))
    e = lazy_build(z, diag);
  return e;
}

ps_err pdb_open(const uint8_t *data, size_t len, ps_budget *budget, const pdb_options *opts,
                pdb_lazy **out, ps_diag *diag) {
  *out = NULL;
  pdb_lazy *z = calloc(1, sizeof *z);
  pdb_ctx *c = calloc(1, sizeof *c);
  if (!z || !c) {
    free(z);
    free(c);
    return ps_diag_set(diag, PS_E_NOMEM, "PDB reader", (size_t)-1, "context");
  }
  z->c = c;
  z->budget = budget;
  /* the allowance of pdb_read (reader.h), for the index's life */
  z->cap = ps_budget_limit(budget, ps_input_allowance(len));
  if (opts)
    z->opts = *opts;
  symtab hdr; /* receives the identity */
  st_init(&hdr, budget);
  c->st = &hdr;
  c->diag = diag;
  c->budget = budget;
  c->want_terr = true;
  c->opts = &z->opts; /* the release hook: module pages go once read */
  ps_err e = pdb_begin(c, data, len);
  if (e == PS_E_OK && hdr.err != PS_E_OK)
    e = ps_diag_set(diag, hdr.err, "symtab", (size_t)-1, "building the symbol table");
  z->ident = hdr.ident;
  drop_table(budget, &hdr);
  c->st = NULL;
  st_init(&z->st, budget);
  z->st.ident = z->ident;
  size_t nm = c->nmods ? c->nmods : 1;
  if (e == PS_E_OK && (!(z->want = ps_alloc_array(budget, nm, 1, &e)) ||
                       !(z->have = ps_alloc_array(budget, nm, 1, &e)) ||
                       !(z->base = ps_alloc_array(budget, nm, 1, &e))))
    e = ps_diag_set(diag, e, "PDB reader", (size_t)-1, "%zu modules", c->nmods);
  if (e != PS_E_OK) {
    pdb_close(z);
    return e;
  }
  for (size_t i = 0; i < c->nmods; i++) {
    z->mod_bytes += mod_bytes(c, i);
    z->base[i] = 1;
  }
  for (size_t i = 0; i < c->nterr; i++)
    if (c->terr[i].mod < c->nmods)
      z->base[c->terr[i].mod] = 0;
  memcpy(z->want, z->base, c->nmods);
  if (c->nomap)
    set_full(z, "the image was relinked (OMAP)");
  else if (!c->nterr)
    set_full(z, "no section contributions");
  z->full_fixed = z->full != NULL;
  *out = z;
  return PS_E_OK;
}

void pdb_close(pdb_lazy *z) {
  if (!z)
    return;
  size_t nm = z->c->nmods ? z->c->nmods : 1;
  drop_table(z->budget, &z->st);
  uint8_t **arrs[3] = {&z->want, &z->have, &z->base};
  for (int i = 0; i < 3; i++) {
    if (*arrs[i])
      ps_budget_release(z->budget, nm);
    free(*arrs[i]);
  }
  set_free(z->budget, &z->pub_want);
  set_free(z->budget, &z->pub_have);
  if (z->pubs)
    ps_budget_release(z->budget, z->cpubs * sizeof *z->pubs);
  free(z->pubs);
  ctx_free(z->c);
  ps_budget_restore(z->budget, z->cap);
  free(z);
}

const st_ident *pdb_lazy_ident(const pdb_lazy *z) { return &z->ident; }

ps_err pdb_module_table(pdb_lazy *z, const uint32_t *rvas, size_t n, const symtab **out,
                        ps_diag *diag) {
  ps_err e = lazy_prepare(z, rvas, n, diag);
  *out = &z->st;
  return e;
}

ps_err pdb_lookup_lazy(pdb_lazy *z, uint32_t rva, st_answer *out, ps_diag *diag) {
  ps_err e = lazy_prepare(z, &rva, 1, diag);
  if (e != PS_E_OK) {
    out->status = ST_UNKNOWN_ADDRESS;
    out->nsyms = 0;
    out->namebuf[0] = '\0';
    return e;
  }
  st_lookup_rva(&z->st, rva, out);
  return PS_E_OK;
}

void pdb_lazy_stats(const pdb_lazy *z, pdb_lazy_info *out) {
  memset(out, 0, sizeof *out);
  out->modules = z->c->nmods;
  for (size_t i = 0; z->built && i < z->c->nmods; i++)
    out->modules_read += z->have[i] && z->c->mods[i].sn != 0xFFFF;
  out->publics = z->built ? z->st.npublics : 0;
  out->builds = z->builds;
  out->full = z->full;
}

void pdb_lazy_forget(pdb_lazy *z) {
  if (z->full_fixed)
    return;
  z->full = NULL;
  memcpy(z->want, z->base, z->c->nmods);
  z->pub_want.n = 0;
  z->pub_all_want = false;
  z->builds = 0;
}

ps_err pdb_lazy_check(pdb_lazy *z, size_t *bad, pdb_lazy_audit *first, ps_diag *diag) {
  pdb_ctx *c = z->c;
  *bad = 0;
  memset(first, 0, sizeof *first);
  ps_err e = PS_E_OK;
  /* under OMAP the table is in image addresses and the territories in the
   * PDB's own: such a file is always read whole, there is nothing to check */
  for (size_t i = 0; e == PS_E_OK && !c->nomap && i < c->nmods; i++) {
    if (z->base[i] || !c->nterr)
      continue;
    symtab t;
    st_init(&t, z->budget);
    c->st = &t;
    c->diag = diag;
    e = read_module_at(c, i);
    if (e == PS_E_OK && t.err != PS_E_OK)
      e = ps_diag_set(diag, t.err, "symtab", (size_t)-1, "building the symbol table");
    if (e == PS_E_OK && !in_territories(c, (uint32_t)i, &t, 0, 0, 0, *bad ? NULL : first))
      (*bad)++;
    c->st = NULL;
    drop_table(z->budget, &t);
  }
  return e;
}
