/*
 * r2r.c - ReadyToRun code and its debug info (see r2r.h for the format).
 *
 * Order of checks: the PE layout, the CLI header and its ManagedNativeHeader,
 * the READYTORUN_HEADER's signature, version and flags, then each section's
 * RVA and size against the file bytes of the PE section holding it.  The
 * native arrays and debug-info blobs are read within their PE section's
 * bytes; every offset they hold is checked before it is followed.
 */
#include "r2r.h"

#include <string.h>

enum {
  SEC_RUNTIME_FUNCTIONS = 102, SEC_METHODDEF_ENTRY_POINTS = 103, SEC_DEBUG_INFO = 105,
  SEC_COMPONENT_ASSEMBLIES = 115 /* a composite image's */
};
/* a component of a composite image: its code is in the composite file
 * (readytorun.h; bit 1, which readytorun-format.md calls COMPOSITE, is set
 * in plain single-assembly images crossgen2 writes today) */
enum { FLAG_COMPONENT = 0x20 };

#define MACHINE_AMD64 0x8664u
/* a ReadyToRun image for another OS than Windows has its machine xor'ed
 * with the OS's value (readytorun.h, IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE) */
static const uint16_t os_override[] = {0x0000, 0x7B79 /* Linux */, 0x4644 /* Apple */,
                                       0xADC4 /* FreeBSD */, 0x1993 /* NetBSD */,
                                       0x1992 /* SunOS */};
static const uint16_t machines[] = {0x8664 /* amd64 */, 0xAA64 /* arm64 */,
                                    0x01C4 /* arm */, 0x014C /* x86 */,
                                    0x6264 /* loongarch64 */, 0x5064 /* riscv64 */};

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint16_t native_machine(uint16_t m) {
  for (size_t i = 0; i < sizeof os_override / sizeof *os_override; i++) {
    uint16_t x = (uint16_t)(m ^ os_override[i]);
    for (size_t k = 0; k < sizeof machines / sizeof *machines; k++)
      if (x == machines[k])
        return x;
  }
  return m;
}

/* ---- native integers (nativeformatreader.h DecodeUnsigned) ---- */

/* reads the unsigned at s->p[*off]; false when it runs past the span or
 * its first byte is not a known length */
static bool nr_uint(const r2r_span *s, size_t *off, uint32_t *v) {
  size_t o = *off;
  if (o >= s->len)
    return false;
  const uint8_t *p = s->p + o;
  uint32_t b = p[0];
  size_t n;
  if ((b & 1) == 0) {
    *v = b >> 1;
    n = 1;
  } else if ((b & 2) == 0) {
    if (s->len - o < 2)
      return false;
    *v = b >> 2 | (uint32_t)p[1] << 6;
    n = 2;
  } else if ((b & 4) == 0) {
    if (s->len - o < 3)
      return false;
    *v = b >> 3 | (uint32_t)p[1] << 5 | (uint32_t)p[2] << 13;
    n = 3;
  } else if ((b & 8) == 0) {
    if (s->len - o < 4)
      return false;
    *v = b >> 4 | (uint32_t)p[1] << 4 | (uint32_t)p[2] << 12 | (uint32_t)p[3] << 20;
    n = 4;
  } else if ((b & 16) == 0) {
    if (s->len - o < 5)
      return false;
    *v = le32(p + 1);
    n = 5;
  } else {
    return false;
  }
  *off = o + n;
  return true;
}

/* ---- native sparse arrays (nativeformatreader.h NativeArray) ---- */

/* The offset (in s) of element index of the array whose header is at s->at:
 * 1 found, 0 absent, -1 corrupt. */
static int na_get(const r2r_span *s, uint32_t index, size_t *elem) {
  size_t off = s->at;
  uint32_t hdr;
  if (!nr_uint(s, &off, &hdr))
    return -1;
  uint32_t count = hdr >> 2, esize = hdr & 3;
  if (esize == 3)
    return -1;
  if (index >= count)
    return 0;
  size_t width = (size_t)1 << esize; /* 1, 2 or 4 bytes a block offset */
  size_t at = off + width * (index / 16);
  if (at >= s->len || s->len - at < width)
    return -1;
  uint32_t rel = width == 1 ? s->p[at] : width == 2 ? le16(s->p + at) : le32(s->p + at);
  if (rel > s->len - off)
    return -1;
  size_t pos = off + rel;
  /* the block's tree: one node a level for index bits 8, 4, 2, 1 */
  for (uint32_t bit = 8; bit > 0; bit >>= 1) {
    size_t next = pos;
    uint32_t v;
    if (!nr_uint(s, &next, &v))
      return -1;
    if (index & bit) {
      if (v & 2) {
        if ((v >> 2) > s->len - pos)
          return -1;
        pos += v >> 2;
        continue;
      }
    } else if (v & 1) {
      pos = next;
      continue;
    }
    if ((v & 3) == 0 && (v >> 2) == (index & 15)) { /* a leaf for this index */
      pos = next;
      break;
    }
    return 0;
  }
  *elem = pos;
  return 1;
}

/* ---- nibbles (nibblestream.h) ---- */

typedef struct {
  const uint8_t *p;
  size_t len;
  size_t nib; /* nibbles read */
  bool bad;
} nib_reader;

static uint32_t nib_u32(nib_reader *r) {
  uint32_t v = 0;
  for (int k = 0; k < 12; k++) {
    size_t byte = r->nib / 2;
    if (byte >= r->len || v > (UINT32_MAX >> 3)) {
      r->bad = true;
      return 0;
    }
    uint32_t n = r->nib & 1 ? (uint32_t)r->p[byte] >> 4 : (uint32_t)r->p[byte] & 15;
    r->nib++;
    v = v << 3 | (n & 7);
    if (!(n & 8))
      return v;
  }
  r->bad = true;
  return 0;
}

static size_t nib_next_byte(const nib_reader *r) { return (r->nib + 1) / 2; }

/* ---- the header ---- */

ps_err r2r_open(r2r_image *r, const uint8_t *data, size_t len, ps_diag *d) {
  memset(r, 0, sizeof *r);
  ps_err e = pe_layout_open(&r->pe, data, len, d);
  if (e)
    return e;
  const pe_layout *pe = &r->pe;
  size_t cli;
  if (pe->ndirs <= 14 || pe->dir_size[14] < 72 || !pe_layout_rva(pe, pe->dir_rva[14], 72, &cli))
    return ps_diag_set(d, PS_E_NOT_FOUND, "CLI header", (size_t)-1,
                       "not a .NET image with a ManagedNativeHeader");
  uint32_t mnh_rva = le32(data + cli + 64), mnh_size = le32(data + cli + 68);
  size_t h;
  if (!mnh_rva || mnh_size < 16 || !pe_layout_rva(pe, mnh_rva, 16, &h))
    return ps_diag_set(d, PS_E_NOT_FOUND, "CLI header", cli + 64,
                       "no ReadyToRun header (an IL-only image)");
  if (le32(data + h) != R2R_SIGNATURE)
    return ps_diag_set(d, PS_E_NOT_FOUND, "READYTORUN_HEADER", h,
                       "signature 0x%08x is not RTR (an NGen image?)", (unsigned)le32(data + h));
  r->major = le16(data + h + 4);
  r->minor = le16(data + h + 6);
  r->flags = le32(data + h + 8);
  uint32_t nsec = le32(data + h + 12);
  r->machine = native_machine(pe->machine);
  if (r->major < 2 || r->major > 64)
    return ps_diag_set(d, PS_E_UNSUPPORTED, "READYTORUN_HEADER", h + 4,
                       "format version %u.%u", r->major, r->minor);
  if (r->flags & FLAG_COMPONENT)
    return ps_diag_set(d, PS_E_UNSUPPORTED, "READYTORUN_HEADER", h + 8,
                       "a component of a composite ReadyToRun image (flags 0x%x)",
                       (unsigned)r->flags);
  if (nsec > R2R_MAX_SECTIONS)
    return ps_diag_set(d, PS_E_CORRUPT, "READYTORUN_HEADER", h + 12,
                       "%u sections (the limit is %d)", (unsigned)nsec, R2R_MAX_SECTIONS);
  size_t secs;
  if (!pe_layout_rva(pe, mnh_rva, 16 + (size_t)nsec * 12, &secs))
    return ps_diag_set(d, PS_E_CORRUPT, "READYTORUN_HEADER", h + 12,
                       "%u sections run past the image's bytes", (unsigned)nsec);
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t *q = data + secs + 16 + (size_t)i * 12;
    uint32_t type = le32(q), rva = le32(q + 4), size = le32(q + 8);
    size_t at = secs + 16 + (size_t)i * 12;
    if (type == SEC_COMPONENT_ASSEMBLIES)
      return ps_diag_set(d, PS_E_UNSUPPORTED, "READYTORUN_HEADER", at,
                         "a composite ReadyToRun image (many assemblies in one file)");
    if (type == SEC_RUNTIME_FUNCTIONS) {
      r->rf_size = r->machine == MACHINE_AMD64 ? 12 : 8;
      if (!pe_layout_rva(pe, rva, size, &r->rf_off) || size % r->rf_size)
        return ps_diag_set(d, PS_E_CORRUPT, "RuntimeFunctions", at,
                           "rva 0x%x size 0x%x is not a table in the image's bytes",
                           (unsigned)rva, (unsigned)size);
      r->rf_count = size / r->rf_size;
    } else if (type == SEC_METHODDEF_ENTRY_POINTS || type == SEC_DEBUG_INFO) {
      r2r_span *s = type == SEC_DEBUG_INFO ? &r->debug : &r->entries;
      size_t off, slen;
      if (!size || !pe_layout_section(pe, rva, &off, &slen))
        return ps_diag_set(d, PS_E_CORRUPT,
                           type == SEC_DEBUG_INFO ? "DebugInfo" : "MethodDefEntryPoints", at,
                           "rva 0x%x lies in no section's bytes", (unsigned)rva);
      size_t start;
      pe_layout_rva(pe, rva, 1, &start);
      s->p = data + off;
      s->len = slen;
      s->at = start - off;
      s->present = true;
    }
  }
  if (!r->rf_count)
    return ps_diag_set(d, PS_E_NOT_FOUND, "READYTORUN_HEADER", h,
                       "no RuntimeFunctions: no precompiled code");
  /* sorted by begin, as the lookups by address need (readytorun-format.md) */
  for (uint32_t i = 1; i < r->rf_count; i++) {
    const uint8_t *q = data + r->rf_off + (size_t)i * r->rf_size;
    if (le32(q) <= le32(q - r->rf_size))
      return ps_diag_set(d, PS_E_CORRUPT, "RuntimeFunctions", r->rf_off + (size_t)i * r->rf_size,
                         "entry %u does not start after entry %u", (unsigned)i,
                         (unsigned)i - 1);
  }
  return PS_E_OK;
}

bool r2r_function(const r2r_image *r, uint32_t i, uint32_t *begin, uint32_t *end) {
  if (i >= r->rf_count)
    return false;
  const uint8_t *q = r->pe.data + r->rf_off + (size_t)i * r->rf_size;
  *begin = le32(q);
  if (r->rf_size == 12)
    *end = le32(q + 4);
  else if (i + 1 < r->rf_count)
    *end = le32(q + r->rf_size);
  else
    *end = *begin;
  if (*end < *begin)
    *end = *begin;
  return true;
}

bool r2r_function_at(const r2r_image *r, uint32_t rva, uint32_t *index) {
  uint32_t lo = 0, hi = r->rf_count;
  while (lo < hi) { /* the first entry whose begin is >= rva */
    uint32_t mid = lo + (hi - lo) / 2;
    if (le32(r->pe.data + r->rf_off + (size_t)mid * r->rf_size) < rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < r->rf_count && le32(r->pe.data + r->rf_off + (size_t)lo * r->rf_size) == rva) {
    *index = lo;
    return true;
  }
  return false;
}

ps_err r2r_method_entry(const r2r_image *r, uint32_t rid, uint32_t *index, ps_diag *d) {
  if (!r->entries.present || rid == 0)
    return PS_E_NOT_FOUND;
  size_t at;
  int found = na_get(&r->entries, rid - 1, &at);
  if (found < 0)
    return ps_diag_set(d, PS_E_CORRUPT, "MethodDefEntryPoints", r->entries.at,
                       "the native array breaks at MethodDef %u", (unsigned)rid);
  if (!found)
    return PS_E_NOT_FOUND;
  uint32_t id;
  if (!nr_uint(&r->entries, &at, &id))
    return ps_diag_set(d, PS_E_CORRUPT, "MethodDefEntryPoints", at,
                       "MethodDef %u's entry runs past its section", (unsigned)rid);
  /* bit 0: a fixup list follows; with it, bit 1: the list is a back reference */
  uint32_t i = id & 1 ? id >> 2 : id >> 1;
  if (i >= r->rf_count)
    return ps_diag_set(d, PS_E_CORRUPT, "MethodDefEntryPoints", at,
                       "MethodDef %u's runtime function %u past the %u there are",
                       (unsigned)rid, (unsigned)i, (unsigned)r->rf_count);
  *index = i;
  return PS_E_OK;
}

/* ---- debug info ---- */

ps_err r2r_bounds(const r2r_image *r, uint32_t index, r2r_bound *out, size_t cap, size_t *n,
                  ps_diag *d) {
  *n = 0;
  const r2r_span *s = &r->debug;
  if (!s->present)
    return PS_E_NOT_FOUND;
  size_t at;
  int found = na_get(s, index, &at);
  if (found < 0)
    return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo", s->at,
                       "the native array breaks at runtime function %u", (unsigned)index);
  if (!found)
    return PS_E_NOT_FOUND;
  /* the blob: right after a zero "lookback", or that many bytes back */
  size_t blob = at;
  uint32_t lookback;
  if (!nr_uint(s, &blob, &lookback))
    return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo", at, "an entry runs past its section");
  if (lookback) {
    if (lookback > at)
      return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo", at,
                         "a lookback of %u bytes before the section", (unsigned)lookback);
    blob = at - lookback;
  }
  nib_reader h = {s->p + blob, s->len - blob, 0, false};
  uint32_t nbounds = nib_u32(&h);
  if (r->major >= 17 && nbounds == 0 && !h.bad) { /* the fat header: six sizes */
    nbounds = nib_u32(&h);
    for (int k = 0; k < 5; k++)
      nib_u32(&h);
  } else {
    nib_u32(&h); /* vars */
  }
  if (h.bad)
    return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo", blob, "a header runs past its section");
  if (nbounds == 0)
    return PS_E_OK; /* no map */
  size_t bat = blob + nib_next_byte(&h);
  if (bat > s->len || nbounds > s->len - bat)
    return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo", blob,
                       "%u bytes of bounds run past the section", (unsigned)nbounds);
  nib_reader b = {s->p + bat, nbounds, 0, false};
  uint32_t count = nib_u32(&b);
  if (b.bad)
    return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo bounds", bat, "no entry count");
  if (count > cap)
    return ps_diag_set(d, PS_E_LIMIT, "DebugInfo bounds", bat,
                       "%u entries in one method's map (the limit is %zu)", (unsigned)count, cap);
  uint32_t native = 0;
  if (r->major >= 16) { /* bit-packed entries */
    uint32_t wn = nib_u32(&b), wi = nib_u32(&b);
    if (b.bad || wn > 31 || wi > 31)
      return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo bounds", bat,
                         "field widths of %u and %u bits", (unsigned)wn + 1, (unsigned)wi + 1);
    unsigned bits_native = wn + 1, bits_il = wi + 1, bits_src = r->major >= 17 ? 3 : 2;
    unsigned per = bits_native + bits_il + bits_src; /* at most 67 */
    if (per > 64)
      return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo bounds", bat,
                         "%u bits an entry (more than 64)", per);
    size_t data = nib_next_byte(&b);
    uint64_t need = (uint64_t)count * per;
    if (data > nbounds || need > (uint64_t)(nbounds - data) * 8)
      return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo bounds", bat,
                         "%u entries of %u bits in %zu bytes", (unsigned)count, per,
                         nbounds - (data < nbounds ? data : nbounds));
    const uint8_t *q = s->p + bat + data;
    uint64_t bitpos = 0;
    for (uint32_t i = 0; i < count; i++) {
      uint64_t x = 0;
      for (unsigned k = 0; k < per; k++, bitpos++)
        x |= (uint64_t)((q[bitpos >> 3] >> (bitpos & 7)) & 1) << k;
      uint8_t src = (uint8_t)(x & ((1u << bits_src) - 1));
      x >>= bits_src;
      uint32_t delta = (uint32_t)(x & ((UINT64_C(1) << bits_native) - 1));
      x >>= bits_native;
      uint32_t il = (uint32_t)x;
      if (delta > UINT32_MAX - native)
        return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo bounds", bat,
                           "native offsets past 4 GiB");
      native += delta;
      out[i].native = native;
      out[i].il = (int32_t)(il - 3u); /* stored + 3: the markers -3..-1 are 0..2 */
      out[i].source = src;
    }
  } else { /* three nibble-coded numbers an entry */
    for (uint32_t i = 0; i < count; i++) {
      uint32_t delta = nib_u32(&b), il = nib_u32(&b), src = nib_u32(&b);
      if (b.bad || delta > UINT32_MAX - native)
        return ps_diag_set(d, PS_E_CORRUPT, "DebugInfo bounds", bat,
                           "entry %u runs past its bytes", (unsigned)i);
      native += delta;
      out[i].native = native;
      out[i].il = (int32_t)(il - 3u);
      out[i].source = (uint8_t)(src & 7);
    }
  }
  *n = count;
  return PS_E_OK;
}
