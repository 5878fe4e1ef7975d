/*
 * pe.c - PE/COFF images (Microsoft PE and COFF Specification): headers,
 * sections and RVA mapping, the debug directory (CodeView RSDS, embedded
 * Portable PDB, PDB checksum), and .NET method names from the CLI metadata
 * (ECMA-335 II.25).
 *
 *   0x3C  e_lfanew -> "PE\0\0", COFF header (20 bytes), optional header
 *         (magic 0x10B PE32 / 0x20B PE32+), data directories (8 bytes each;
 *         6 = debug, 14 = CLI header), section table (40 bytes each)
 *   debug directory entry (28 bytes): characteristics, stamp, major, minor,
 *         type, size, rva, file pointer
 *   CodeView (type 2):  "RSDS" guid[16] age path (UTF-8, NUL-terminated)
 *   embedded (type 17): "MPDB" u32 inflated size, raw deflate stream
 *
 * With the names, pe_method_names says which methods are compiler-generated
 * (clrnames.h) and which method each state machine's MoveNext runs: the C#
 * and VB compilers put [AsyncStateMachine(typeof(T))],
 * [IteratorStateMachine(typeof(T))] or [AsyncIteratorStateMachine(...)] on
 * the kickoff method (System.Runtime.CompilerServices), the mapping the
 * runtime's own stack traces follow.
 */
#include "pe.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "clrnames.h"
#include "metadata.h"

#define PE_MAX_DEBUG_ENTRIES 64
#define PE_MAX_NAME 4096

enum { DBG_CODEVIEW = 2, DBG_EMBEDDED_PPDB = 17, DBG_PDB_CHECKSUM = 19 };

typedef pe_layout pe_image; /* pe.h: the layout other readers (r2r.c) use */

/* debug directory entry, PE spec "Debug Directory (Image Only)" */
typedef struct {
  uint32_t characteristics, stamp;
  uint16_t major, minor;
  uint32_t type, size, rva, ptr;
} pe_debug_entry;
_Static_assert(sizeof(pe_debug_entry) == 28, "PE debug directory entry is 28 bytes");

bool pe_is_image(const uint8_t *data, size_t len) {
  if (!data || len < 0x40 || data[0] != 'M' || data[1] != 'Z')
    return false;
  uint32_t lfanew = (uint32_t)data[0x3C] | ((uint32_t)data[0x3D] << 8) |
                    ((uint32_t)data[0x3E] << 16) | ((uint32_t)data[0x3F] << 24);
  return ps_range_ok(lfanew, 4, len) && memcmp(data + lfanew, "PE\0\0", 4) == 0;
}

static ps_err open_image(pe_image *img, const uint8_t *data, size_t len, ps_diag *diag) {
  memset(img, 0, sizeof *img);
  img->data = data;
  img->len = len;
  ps_reader r;
  rd_init(&r, data, len);
  if (rd_u16(&r, "DOS header") != 0x5A4D || !rd_ok(&r))
    return ps_diag_set(diag, rd_ok(&r) ? PS_E_CORRUPT : PS_E_TRUNCATED, "DOS header", 0,
                       "no MZ signature");
  rd_seek(&r, 0x3C, "DOS header");
  uint32_t lfanew = rd_u32(&r, "DOS header e_lfanew");
  rd_seek(&r, lfanew, "PE signature");
  uint32_t sig = rd_u32(&r, "PE signature");
  if (!rd_ok(&r))
    return rd_to_diag(&r, diag);
  if (sig != 0x00004550u)
    return ps_diag_set(diag, PS_E_CORRUPT, "PE signature", lfanew, "not PE\\0\\0");
  img->machine = rd_u16(&r, "COFF header");
  uint16_t nsec = rd_u16(&r, "COFF header");
  img->timestamp = rd_u32(&r, "COFF header");
  rd_skip(&r, 8, "COFF header");
  uint16_t opt_size = rd_u16(&r, "COFF header");
  rd_u16(&r, "COFF header");
  if (!rd_ok(&r))
    return rd_to_diag(&r, diag);
  size_t opt_at = rd_tell(&r);
  ps_reader o = rd_sub(&r, opt_at, opt_size, "optional header");
  if (!rd_ok(&o))
    return rd_to_diag(&o, diag);
  uint16_t magic = rd_u16(&o, "optional header");
  if (magic == 0x20B)
    img->pe32plus = true;
  else if (magic != 0x10B)
    return ps_diag_set(diag, PS_E_CORRUPT, "optional header", opt_at,
                       "magic 0x%04x is neither PE32 nor PE32+", magic);
  rd_seek(&o, 56, "optional header");
  img->size_of_image = rd_u32(&o, "optional header SizeOfImage");
  img->size_of_headers = rd_u32(&o, "optional header SizeOfHeaders");
  rd_seek(&o, img->pe32plus ? 108 : 92, "optional header");
  uint32_t ndirs = rd_u32(&o, "optional header NumberOfRvaAndSizes");
  if (!rd_ok(&o))
    return rd_to_diag(&o, diag);
  if (ndirs > 16)
    ndirs = 16;
  for (unsigned i = 0; i < ndirs && rd_left(&o) >= 8; i++) {
    img->dir_rva[i] = rd_u32(&o, "data directory");
    img->dir_size[i] = rd_u32(&o, "data directory");
    img->ndirs = i + 1;
  }
  if (nsec > PE_MAX_SECTIONS)
    return ps_diag_set(diag, PS_E_CORRUPT, "COFF header", lfanew + 6u,
                       "%u sections (the limit is %d)", nsec, PE_MAX_SECTIONS);
  rd_seek(&r, opt_at + opt_size, "section table");
  for (unsigned i = 0; i < nsec; i++) {
    rd_skip(&r, 8, "section header");
    pe_section *s = &img->sec[i];
    s->vsize = rd_u32(&r, "section header");
    s->va = rd_u32(&r, "section header");
    s->raw_size = rd_u32(&r, "section header");
    s->raw_ptr = rd_u32(&r, "section header");
    rd_skip(&r, 16, "section header");
  }
  if (!rd_ok(&r))
    return rd_to_diag(&r, diag);
  img->nsections = nsec;
  return PS_E_OK;
}

/* file offset of [rva, rva+n) if it lies in one section's file bytes (or in the headers) */
static bool rva_to_off(const pe_image *img, uint32_t rva, size_t n, size_t *off) {
  for (unsigned i = 0; i < img->nsections; i++) {
    const pe_section *s = &img->sec[i];
    uint32_t span = s->vsize ? s->vsize : s->raw_size;
    if (rva < s->va || rva - s->va >= span)
      continue;
    size_t rel = rva - s->va;
    if (rel > s->raw_size || n > s->raw_size - rel)
      return false;
    size_t o = (size_t)s->raw_ptr + rel;
    if (!ps_range_ok(o, n, img->len))
      return false;
    *off = o;
    return true;
  }
  if (rva < img->size_of_headers && ps_range_ok(rva, n, img->len)) {
    *off = rva;
    return true;
  }
  return false;
}

ps_err pe_layout_open(pe_layout *l, const uint8_t *data, size_t len, ps_diag *diag) {
  return open_image(l, data, len, diag);
}

bool pe_layout_rva(const pe_layout *l, uint32_t rva, size_t n, size_t *off) {
  return rva_to_off(l, rva, n, off);
}

bool pe_layout_section(const pe_layout *l, uint32_t rva, size_t *off, size_t *len) {
  for (unsigned i = 0; i < l->nsections; i++) {
    const pe_section *s = &l->sec[i];
    uint32_t span = s->vsize ? s->vsize : s->raw_size;
    if (rva < s->va || rva - s->va >= span)
      continue;
    size_t n = s->raw_size;
    if (!ps_range_ok(s->raw_ptr, n, l->len))
      n = l->len > s->raw_ptr ? l->len - s->raw_ptr : 0;
    if (rva - s->va >= n)
      return false;
    *off = s->raw_ptr;
    *len = n;
    return true;
  }
  return false;
}

/* the debug directory's entries; returns the count (0 with no directory) */
static ps_err debug_entries(const pe_image *img, pe_debug_entry *out, unsigned *count,
                            ps_diag *diag) {
  *count = 0;
  if (img->ndirs <= 6 || img->dir_size[6] == 0)
    return PS_E_OK;
  uint32_t size = img->dir_size[6];
  size_t off;
  if (!rva_to_off(img, img->dir_rva[6], size, &off))
    return ps_diag_set(diag, PS_E_CORRUPT, "debug directory", (size_t)-1,
                       "rva 0x%x size 0x%x lies outside the image's sections",
                       (unsigned)img->dir_rva[6], (unsigned)size);
  unsigned n = size / 28;
  if (n > PE_MAX_DEBUG_ENTRIES)
    n = PE_MAX_DEBUG_ENTRIES;
  ps_reader r;
  rd_init(&r, img->data, img->len);
  rd_seek(&r, off, "debug directory");
  for (unsigned i = 0; i < n; i++) {
    pe_debug_entry *e = &out[i];
    e->characteristics = rd_u32(&r, "debug directory entry");
    e->stamp = rd_u32(&r, "debug directory entry");
    e->major = rd_u16(&r, "debug directory entry");
    e->minor = rd_u16(&r, "debug directory entry");
    e->type = rd_u32(&r, "debug directory entry");
    e->size = rd_u32(&r, "debug directory entry");
    e->rva = rd_u32(&r, "debug directory entry");
    e->ptr = rd_u32(&r, "debug directory entry");
  }
  if (!rd_ok(&r))
    return rd_to_diag(&r, diag);
  *count = n;
  return PS_E_OK;
}

/* file offset of an entry's data: the file pointer, else the mapped rva */
static bool entry_data(const pe_image *img, const pe_debug_entry *e, size_t *off) {
  if (e->ptr && ps_range_ok(e->ptr, e->size, img->len)) {
    *off = e->ptr;
    return true;
  }
  return e->rva && rva_to_off(img, e->rva, e->size, off);
}

ps_err pe_parse(const uint8_t *data, size_t len, pe_info *out, ps_diag *diag) {
  memset(out, 0, sizeof *out);
  pe_image *img = malloc(sizeof *img);
  if (!img)
    return ps_diag_set(diag, PS_E_NOMEM, "PE", 0, "image state");
  ps_err e = open_image(img, data, len, diag);
  pe_debug_entry ents[PE_MAX_DEBUG_ENTRIES];
  unsigned n = 0;
  if (e == PS_E_OK)
    e = debug_entries(img, ents, &n, diag);
  if (e != PS_E_OK) {
    free(img);
    return e;
  }
  out->machine = img->machine;
  out->pe32plus = img->pe32plus;
  out->timestamp = img->timestamp;
  out->size_of_image = img->size_of_image;
  out->is_dotnet = img->ndirs > 14 && img->dir_size[14] != 0;
  for (unsigned i = 0; i < n; i++) {
    const pe_debug_entry *d = &ents[i];
    size_t off;
    if (d->type == DBG_EMBEDDED_PPDB)
      out->has_embedded_pdb = true;
    if (d->type == DBG_PDB_CHECKSUM && !out->has_pdb_checksum && entry_data(img, d, &off)) {
      /* "PdbChecksum Debug Directory Entry": UTF-8 algorithm name, NUL, checksum */
      const uint8_t *p = data + off;
      const uint8_t *nul = memchr(p, 0, d->size);
      if (nul) {
        size_t an = (size_t)(nul - p), cn = d->size - an - 1;
        if (an >= sizeof out->checksum_alg)
          an = sizeof out->checksum_alg - 1;
        memcpy(out->checksum_alg, p, an);
        out->checksum_alg[an] = '\0';
        if (cn > sizeof out->checksum)
          cn = sizeof out->checksum;
        memcpy(out->checksum, nul + 1, cn);
        out->checksum_len = (uint32_t)cn;
        out->has_pdb_checksum = true;
      }
    }
    if (d->type != DBG_CODEVIEW || out->ncodeview >= PE_MAX_CODEVIEW || d->size < 24 ||
        !entry_data(img, d, &off))
      continue;
    const uint8_t *p = data + off;
    if (memcmp(p, "RSDS", 4) != 0)
      continue; /* NB10 and others: no GUID identity */
    pe_codeview *cv = &out->codeview[out->ncodeview++];
    memcpy(cv->guid, p + 4, 16);
    cv->age = (uint32_t)p[20] | ((uint32_t)p[21] << 8) | ((uint32_t)p[22] << 16) |
              ((uint32_t)p[23] << 24);
    cv->portable = d->minor == 0x504D;
    cv->stamp = d->stamp;
    size_t plen = 0, max = d->size - 24;
    while (plen < max && p[24 + plen] != 0 && plen < sizeof cv->path - 1)
      plen++;
    memcpy(cv->path, p + 24, plen);
    cv->path[plen] = '\0';
  }
  free(img);
  return PS_E_OK;
}

ps_err pe_embedded_pdb(const uint8_t *data, size_t len, size_t max_size, ps_budget *budget,
                       uint8_t **out, size_t *out_len, ps_diag *diag) {
  *out = NULL;
  *out_len = 0;
  pe_image *img = malloc(sizeof *img);
  if (!img)
    return ps_diag_set(diag, PS_E_NOMEM, "PE", 0, "image state");
  ps_err e = open_image(img, data, len, diag);
  pe_debug_entry ents[PE_MAX_DEBUG_ENTRIES];
  unsigned n = 0;
  if (e == PS_E_OK)
    e = debug_entries(img, ents, &n, diag);
  const pe_debug_entry *d = NULL;
  for (unsigned i = 0; e == PS_E_OK && i < n && !d; i++)
    if (ents[i].type == DBG_EMBEDDED_PPDB)
      d = &ents[i];
  size_t off = 0;
  if (e == PS_E_OK && !d)
    e = ps_diag_set(diag, PS_E_NOT_FOUND, "debug directory", (size_t)-1,
                    "no embedded Portable PDB entry");
  if (e == PS_E_OK && (d->size < 8 || !entry_data(img, d, &off)))
    e = ps_diag_set(diag, PS_E_CORRUPT, "embedded Portable PDB", d->ptr,
                    "entry data (size 0x%x) lies outside the file", (unsigned)d->size);
  free(img);
  if (e != PS_E_OK)
    return e;
  const uint8_t *p = data + off;
  if (memcmp(p, "MPDB", 4) != 0)
    return ps_diag_set(diag, PS_E_CORRUPT, "embedded Portable PDB", off, "no MPDB signature");
  uint32_t size = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) |
                  ((uint32_t)p[7] << 24);
  if (size == 0 || size > max_size)
    return ps_diag_set(diag, PS_E_LIMIT, "embedded Portable PDB", off + 4,
                       "inflated size %u is zero or over the cap %zu", (unsigned)size, max_size);
  if (d->size - 8 > UINT32_MAX)
    return ps_diag_set(diag, PS_E_LIMIT, "embedded Portable PDB", off, "too large");
  /* the declared size is only a claim: a few compressed bytes must not
   * reserve hundreds of megabytes (deflate can reach 1032:1, real PDBs 2:1) */
  if ((uint64_t)size > (uint64_t)(d->size - 8) * PE_MAX_INFLATE_RATIO + 4096)
    return ps_diag_set(diag, PS_E_LIMIT, "embedded Portable PDB", off + 4,
                       "inflated size %u is over %u times the %u compressed bytes",
                       (unsigned)size, PE_MAX_INFLATE_RATIO, (unsigned)(d->size - 8));
  ps_err ae = PS_E_OK;
  uint8_t *buf = ps_alloc_array(budget, size, 1, &ae);
  if (!buf)
    return ps_diag_set(diag, ae, "embedded Portable PDB", off, "%u bytes", (unsigned)size);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, -15) != Z_OK) {
    free(buf);
    ps_budget_release(budget, size);
    return ps_diag_set(diag, PS_E_NOMEM, "embedded Portable PDB", off, "inflateInit2");
  }
  z.next_in = (Bytef *)(uintptr_t)(p + 8);
  z.avail_in = (uInt)(d->size - 8);
  z.next_out = buf;
  z.avail_out = size;
  int zr = inflate(&z, Z_FINISH);
  size_t got = z.total_out;
  inflateEnd(&z);
  if (zr != Z_STREAM_END || got != size) {
    free(buf);
    ps_budget_release(budget, size);
    return ps_diag_set(diag, PS_E_CORRUPT, "embedded Portable PDB", off + 8,
                       "deflate stream %s (%zu of %u bytes)",
                       zr == Z_STREAM_END ? "ends early" : zr == Z_BUF_ERROR ? "is longer than declared or truncated" : "is corrupt",
                       got, (unsigned)size);
  }
  *out = buf;
  *out_len = size;
  return PS_E_OK;
}

/* ---- method names ------------------------------------------------------- */

static size_t append(char *buf, size_t len, const char *s, size_t n) {
  if (!s)
    return len;
  size_t take = n < PE_MAX_NAME - 1 - len ? n : PE_MAX_NAME - 1 - len;
  memcpy(buf + len, s, take);
  return len + take;
}

/* Namespace.Type+Nested into buf; returns its length */
static size_t type_name(const md_meta *m, const uint32_t *enclosing, uint32_t t, char *buf) {
  uint32_t chain[64];
  unsigned depth = 0;
  uint32_t ntypes = md_rows(m, MD_TYPEDEF);
  while (t && t <= ntypes && depth < 64) {
    chain[depth++] = t;
    t = enclosing[t];
  }
  size_t len = 0, n;
  for (unsigned i = depth; i-- > 0;) {
    uint32_t row = chain[i];
    if (i == depth - 1) {
      const char *ns = md_string(m, md_get(m, MD_TYPEDEF, row, 2), &n);
      if (ns && n) {
        len = append(buf, len, ns, n);
        len = append(buf, len, ".", 1);
      }
    } else {
      len = append(buf, len, "+", 1);
    }
    const char *name = md_string(m, md_get(m, MD_TYPEDEF, row, 1), &n);
    len = append(buf, len, name, n);
  }
  return len;
}

typedef struct {
  uint32_t token, index;
} tok_index;

static int cmp_tok_index(const void *x, const void *y) {
  const tok_index *a = x, *b = y;
  if (a->token != b->token)
    return a->token < b->token ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* the first method record with token, through an index sorted by token */
static long find_method(const tok_index *idx, size_t n, uint32_t token) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (idx[mid].token < token)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && idx[lo].token == token ? (long)idx[lo].index : -1;
}

static bool str_is(const char *s, size_t n, const char *lit) {
  size_t l = strlen(lit);
  return s && n == l && memcmp(s, lit, l) == 0;
}

/* true when a CustomAttribute's type (CustomAttributeType coded index) is
 * one of the state-machine attributes of System.Runtime.CompilerServices */
static bool is_state_machine_attribute(const md_meta *m, uint32_t type) {
  uint32_t tag = type & 7, row = type >> 3;
  uint32_t parent = 0, parent_table;
  if (tag == 3) { /* MemberRef: its Class is a MemberRefParent */
    uint32_t cls = md_get(m, MD_MEMBERREF, row, 0);
    if ((cls & 7) == 1) {
      parent_table = MD_TYPEREF;
    } else if ((cls & 7) == 0) {
      parent_table = MD_TYPEDEF;
    } else {
      return false;
    }
    parent = cls >> 3;
  } else if (tag == 2) { /* MethodDef: the attribute is defined in this assembly */
    uint32_t nt = md_rows(m, MD_TYPEDEF);
    parent_table = MD_TYPEDEF;
    for (uint32_t t = 1; t <= nt && !parent; t++) {
      uint32_t first = md_get(m, MD_TYPEDEF, t, 5);
      uint32_t end = t < nt ? md_get(m, MD_TYPEDEF, t + 1, 5) : md_rows(m, MD_METHODDEF) + 1;
      if (row >= first && row < end)
        parent = t;
    }
  } else {
    return false;
  }
  size_t nn, ns;
  unsigned name_col = 1, ns_col = 2; /* same columns in TypeRef and TypeDef */
  const char *name = md_string(m, md_get(m, parent_table, parent, name_col), &nn);
  const char *nspace = md_string(m, md_get(m, parent_table, parent, ns_col), &ns);
  if (!str_is(nspace, ns, "System.Runtime.CompilerServices"))
    return false;
  return str_is(name, nn, "AsyncStateMachineAttribute") ||
         str_is(name, nn, "IteratorStateMachineAttribute") ||
         str_is(name, nn, "AsyncIteratorStateMachineAttribute");
}

/* kick[t] = the MethodDef row whose state machine TypeDef row t is, from the
 * attributes' System.Type argument (II.23.3: prolog 0x0001, then the type's
 * name as a SerString, "Ns.Outer+<M>d__3"), matched among the types nested
 * in the kickoff method's own type, where the compilers put state machines. */
static void state_machine_kickoffs(const md_meta *m, const uint32_t *enclosing,
                                   const uint32_t *owner, uint32_t *kick, char *buf) {
  uint32_t ntypes = md_rows(m, MD_TYPEDEF), nmeth = md_rows(m, MD_METHODDEF);
  uint32_t nca = md_rows(m, MD_CUSTOMATTRIBUTE);
  for (uint32_t i = 1; i <= nca; i++) {
    uint32_t parent = md_get(m, MD_CUSTOMATTRIBUTE, i, 0);
    if ((parent & 31) != 0) /* HasCustomAttribute tag 0: MethodDef */
      continue;
    uint32_t kickoff = parent >> 5;
    if (kickoff == 0 || kickoff > nmeth || !owner[kickoff] ||
        !is_state_machine_attribute(m, md_get(m, MD_CUSTOMATTRIBUTE, i, 1)))
      continue;
    const uint8_t *p;
    size_t n;
    if (!md_blob(m, md_get(m, MD_CUSTOMATTRIBUTE, i, 2), &p, &n))
      continue;
    ps_reader r;
    rd_init(&r, p, n);
    if (rd_u16(&r, "custom attribute prolog") != 1)
      continue;
    if (rd_left(&r) > 0 && p[rd_tell(&r)] == 0xFF)
      continue; /* a null type */
    uint32_t sl = md_read_cu32(&r, "custom attribute type name");
    const uint8_t *tn = rd_ptr(&r, sl, "custom attribute type name");
    if (!rd_ok(&r) || sl == 0)
      continue;
    /* the simple name after the last '+' (a name with backslash-escaped
     * specials or an assembly qualification is not a state machine's) */
    size_t cut = sl, last = 0;
    for (size_t k = 0; k < sl; k++) {
      if (tn[k] == '\\' || tn[k] == ',' || tn[k] == '[') {
        cut = 0;
        break;
      }
      if (tn[k] == '+')
        last = k + 1;
    }
    if (cut == 0 || last == 0)
      continue;
    uint32_t decl = owner[kickoff];
    size_t dl = type_name(m, enclosing, decl, buf);
    if (dl != last - 1 || memcmp(buf, tn, dl) != 0)
      continue; /* the state machine is not nested in the kickoff's type */
    for (uint32_t t = 1; t <= ntypes; t++) {
      size_t nn;
      const char *nm;
      if (enclosing[t] != decl ||
          !(nm = md_string(m, md_get(m, MD_TYPEDEF, t, 1), &nn)) || nn != sl - last ||
          memcmp(nm, tn + last, nn) != 0)
        continue;
      if (!kick[t])
        kick[t] = kickoff;
      break;
    }
  }
}

/* What generated code methods[index] (named name, in type t) is, and whose. */
static void set_user_method(symtab *st, size_t index, const md_meta *m,
                            const uint32_t *enclosing, uint32_t t, const char *name,
                            size_t nlen, char *ubuf) {
  uint32_t chain[64];
  cn_span segs[64];
  unsigned depth = 0;
  uint32_t ntypes = md_rows(m, MD_TYPEDEF);
  for (uint32_t x = t; x && x <= ntypes && depth < 64; x = enclosing[x])
    chain[depth++] = x;
  for (unsigned i = 0; i < depth; i++) {
    uint32_t row = chain[depth - 1 - i];
    segs[i].p = md_string(m, md_get(m, MD_TYPEDEF, row, 1), &segs[i].n);
    if (!segs[i].p)
      segs[i].n = 0;
  }
  cn_user u;
  cn_span meth = {name, name ? nlen : 0};
  if (!name || !cn_classify(segs, depth, meth, &u)) {
    st_set_method_user(st, index, CN_NONE, 0, 0);
    return;
  }
  size_t ul = type_name(m, enclosing, chain[depth - u.keep], ubuf);
  ul = append(ubuf, ul, ".", 1);
  ul = append(ubuf, ul, u.user.p, u.user.n);
  st_set_method_user(st, index, (uint32_t)u.kind, st_str(st, ubuf, ul),
                     u.local.n ? st_str(st, u.local.p, u.local.n) : 0);
}

static ps_err method_names(const md_meta *mp, ps_budget *budget, symtab *st, ps_diag *diag);

ps_err pe_method_names(const uint8_t *data, size_t len, ps_budget *budget, symtab *st,
                       ps_diag *diag) {
  pe_image *img = malloc(sizeof *img);
  if (!img)
    return ps_diag_set(diag, PS_E_NOMEM, "PE", 0, "image state");
  ps_err e = open_image(img, data, len, diag);
  size_t cli = 0, md_off = 0;
  uint32_t md_size = 0;
  if (e == PS_E_OK && (img->ndirs <= 14 || img->dir_size[14] < 16))
    e = ps_diag_set(diag, PS_E_NOT_FOUND, "CLI header", (size_t)-1, "not a .NET image");
  if (e == PS_E_OK && !rva_to_off(img, img->dir_rva[14], 16, &cli))
    e = ps_diag_set(diag, PS_E_CORRUPT, "CLI header", (size_t)-1,
                    "rva 0x%x lies outside the sections", (unsigned)img->dir_rva[14]);
  if (e == PS_E_OK) {
    const uint8_t *c = data + cli;
    uint32_t md_rva = (uint32_t)c[8] | ((uint32_t)c[9] << 8) | ((uint32_t)c[10] << 16) |
                      ((uint32_t)c[11] << 24);
    md_size = (uint32_t)c[12] | ((uint32_t)c[13] << 8) | ((uint32_t)c[14] << 16) |
              ((uint32_t)c[15] << 24);
    if (!rva_to_off(img, md_rva, md_size, &md_off))
      e = ps_diag_set(diag, PS_E_CORRUPT, "CLI header", cli + 8,
                      "metadata rva 0x%x size 0x%x lies outside the sections",
                      (unsigned)md_rva, (unsigned)md_size);
  }
  free(img);
  if (e != PS_E_OK)
    return e;
  md_meta m;
  e = md_open(&m, data + md_off, md_size, md_off, diag);
  if (e != PS_E_OK)
    return e;
  size_t cap = ps_budget_limit(budget, ps_input_allowance(md_size));
  e = method_names(&m, budget, st, diag);
  ps_budget_restore(budget, cap);
  return e;
}

/* pe_method_names over the opened metadata */
static ps_err method_names(const md_meta *mp, ps_budget *budget, symtab *st, ps_diag *diag) {
  md_meta m = *mp;
  ps_err e = PS_E_OK;
  uint32_t ntypes = md_rows(&m, MD_TYPEDEF), nmeth = md_rows(&m, MD_METHODDEF);
  ps_err ae = PS_E_OK;
  uint32_t *enclosing = ps_alloc_array(budget, (size_t)ntypes + 1, sizeof *enclosing, &ae);
  char *buf = enclosing ? ps_alloc_array(budget, 2 * PE_MAX_NAME, 1, &ae) : NULL;
  /* owner[method row] = its TypeDef row; kick[type row] = the kickoff method
   * row of that state machine type */
  uint32_t *owner = buf ? ps_alloc_array(budget, (size_t)nmeth + 1, sizeof *owner, &ae) : NULL;
  uint32_t *kick = owner ? ps_alloc_array(budget, (size_t)ntypes + 1, sizeof *kick, &ae) : NULL;
  if (!kick) {
    free(owner);
    free(buf);
    free(enclosing);
    return ps_diag_set(diag, ae, "TypeDef table", (size_t)-1, "%u types", (unsigned)ntypes);
  }
  char *ubuf = buf + PE_MAX_NAME;
  for (uint32_t i = 1; i <= md_rows(&m, MD_NESTEDCLASS); i++) {
    uint32_t nested = md_get(&m, MD_NESTEDCLASS, i, 0);
    uint32_t outer = md_get(&m, MD_NESTEDCLASS, i, 1);
    if (nested && nested <= ntypes && outer <= ntypes && outer != nested)
      enclosing[nested] = outer;
  }
  for (uint32_t t = 1; t <= ntypes; t++) {
    uint32_t first = md_get(&m, MD_TYPEDEF, t, 5);
    uint32_t end = t < ntypes ? md_get(&m, MD_TYPEDEF, t + 1, 5) : nmeth + 1;
    for (uint32_t mi = first; mi && mi < end && mi <= nmeth; mi++)
      if (!owner[mi])
        owner[mi] = t;
  }
  state_machine_kickoffs(&m, enclosing, owner, kick, buf);
  /* the methods st already holds (finished or not), indexed by token, and a
   * mark per MethodDef row so hostile overlapping MethodLists name a method once */
  bool was_finished = st->finished, added = false;
  size_t nold = st->nmethods;
  tok_index *idx = ps_alloc_array(budget, nold, sizeof *idx, &ae);
  uint8_t *seen = idx ? ps_alloc_array(budget, (size_t)nmeth + 1, 1, &ae) : NULL;
  if (!seen) {
    free(idx);
    free(kick);
    free(owner);
    free(buf);
    free(enclosing);
    return ps_diag_set(diag, ae, "MethodDef table", (size_t)-1, "%u methods", (unsigned)nmeth);
  }
  for (size_t i = 0; i < nold; i++) {
    idx[i].token = st->methods[i].token;
    idx[i].index = (uint32_t)i;
  }
  qsort(idx, nold, sizeof *idx, cmp_tok_index);
  for (uint32_t t = 1; t <= ntypes && e == PS_E_OK; t++) {
    uint32_t first = md_get(&m, MD_TYPEDEF, t, 5);
    uint32_t end = t < ntypes ? md_get(&m, MD_TYPEDEF, t + 1, 5) : nmeth + 1;
    if (end > nmeth + 1)
      end = nmeth + 1;
    if (first == 0 || first >= end)
      continue;
    size_t tlen = type_name(&m, enclosing, t, buf);
    for (uint32_t mi = first; mi < end; mi++) {
      if (seen[mi])
        continue;
      seen[mi] = 1;
      size_t n, nlen = append(buf, tlen, ".", 1);
      const char *name = md_string(&m, md_get(&m, MD_METHODDEF, mi, 3), &n);
      nlen = append(buf, nlen, name, n);
      uint32_t s = st_str(st, buf, nlen);
      uint32_t token = 0x06000000u | mi;
      long at = find_method(idx, nold, token);
      bool ok = true;
      if (at >= 0) {
        st->methods[at].name = s;
      } else {
        ok = st_add_method(st, token, s, 0);
        added = true;
        at = (long)st->nmethods - 1;
      }
      if (ok && st->err == PS_E_OK) {
        if (kick[t] && !st->methods[at].kickoff && str_is(name, n, "MoveNext"))
          st->methods[at].kickoff = 0x06000000u | kick[t];
        set_user_method(st, (size_t)at, &m, enclosing, t, name, n, ubuf);
      }
      if (!ok || st->err != PS_E_OK) {
        e = ps_diag_set(diag, st->err ? st->err : PS_E_NOMEM, "MethodDef table", (size_t)-1,
                        "out of budget");
        break;
      }
    }
  }
  free(seen);
  free(idx);
  ps_budget_release(budget, (size_t)nmeth + 1 + nold * sizeof *idx);
  free(kick);
  free(owner);
  free(buf);
  free(enclosing);
  ps_budget_release(budget, 2 * PE_MAX_NAME + ((size_t)ntypes + 1) * 2 * sizeof *enclosing +
                                ((size_t)nmeth + 1) * sizeof *owner);
  if (e == PS_E_OK && was_finished && added) {
    e = st_finish(st);
    if (e != PS_E_OK)
      ps_diag_set(diag, e, "symbol table", (size_t)-1, "finishing");
  }
  return e;
}
