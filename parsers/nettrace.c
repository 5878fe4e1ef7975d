/*
 * nettrace.c - .NET EventPipe trace reader (see nettrace.h for the layouts).
 *
 * Validation order, for every block: the framing (tags, type name, version,
 * size against the remaining window and the max_block setting) before the
 * body is handed out; inside a body, every count is checked against the bytes
 * left before it is used, every varint against its width.  Errors carry the
 * block's name and the absolute file offset of the failing field.
 */
#include "nettrace.h"

#include <string.h>

#include "reader.h"

/* FastSerialization tags (NetTraceFormat_v5.md, "Objects") */
enum { FS_NULL = 1, FS_BEGIN_PRIVATE = 5, FS_END = 6 };

#define NT_MAGIC "Nettrace"
#define FS_HEADER "!FastSerialization.1"
#define NT_TRACE_V4_BODY 48 /* SyncTimeUTC 16 + QPC 8 + freq 8 + 4 ints */
#define NT_MAX_TYPE_NAME 64

const char *nt_block_name(nt_block_kind k) {
  switch (k) {
  case NT_BLOCK_NONE: return "stream header";
  case NT_BLOCK_END: return "end of stream";
  case NT_BLOCK_TRACE: return "Trace";
  case NT_BLOCK_EVENT: return "EventBlock";
  case NT_BLOCK_METADATA: return "MetadataBlock";
  case NT_BLOCK_SP: return "SPBlock";
  case NT_BLOCK_STACK: return "StackBlock";
  case NT_BLOCK_THREAD: return "ThreadBlock";
  case NT_BLOCK_REMOVE_THREAD: return "RemoveThreadBlock";
  case NT_BLOCK_LABEL_LIST: return "LabelListBlock";
  case NT_BLOCK_UNKNOWN: return "unknown block";
  }
  return "block";
}

void nt_stream_init(nt_stream *s, size_t max_block) {
  memset(s, 0, sizeof *s);
  s->max_block = max_block ? max_block : NT_DEFAULT_MAX_BLOCK;
}

static uint32_t le32(const uint8_t *p) { return nt_le32(p); }

static ps_err need_more(size_t want, size_t len, bool eof, size_t *need, ps_diag *d,
                        const char *what, uint64_t off) {
  if (eof)
    return ps_diag_set(d, PS_E_TRUNCATED, what, (size_t)off,
                       "the file ends %zu bytes into a unit of %zu", len, want);
  *need = want;
  return PS_E_TRUNCATED;
}

/* The stream header: "Nettrace" then either FastSerialization (V4/V5) or the
 * V6 version fields. */
static ps_err read_header(nt_stream *s, const uint8_t *buf, size_t len, bool eof, size_t *used,
                          size_t *need, ps_diag *d) {
  if (len < 12)
    return need_more(12, len, eof, need, d, "stream header", 0);
  if (memcmp(buf, NT_MAGIC, 8) != 0)
    return ps_diag_set(d, len >= 24 && le32(buf) == 20 ? PS_E_UNSUPPORTED : PS_E_CORRUPT,
                       "stream header", 0,
                       "no \"Nettrace\" magic (a NetPerf file from .NET Core 2.x, or not a trace)");
  uint32_t w = le32(buf + 8);
  if (w == 0) { /* V6: reserved 0, major, minor */
    if (len < 20)
      return need_more(20, len, eof, need, d, "stream header", 0);
    uint32_t major = le32(buf + 12);
    if (major != 6)
      return ps_diag_set(d, PS_E_UNSUPPORTED, "stream header", 12,
                         "NetTrace major version %u (this reader knows 4 to 6)", major);
    s->format = 6;
    s->trace_version = 6;
    *used = 20;
    return PS_E_OK;
  }
  if (w != 20)
    return ps_diag_set(d, PS_E_CORRUPT, "stream header", 8,
                       "FastSerialization header length %u, expected 20", w);
  if (len < 32)
    return need_more(32, len, eof, need, d, "stream header", 0);
  if (memcmp(buf + 12, FS_HEADER, 20) != 0)
    return ps_diag_set(d, PS_E_CORRUPT, "stream header", 12, "not \"!FastSerialization.1\"");
  s->format = 4;
  *used = 32;
  return PS_E_OK;
}

static nt_block_kind kind_from_name(const uint8_t *name, uint32_t n) {
  static const struct {
    const char *s;
    nt_block_kind k;
  } names[] = {{"Trace", NT_BLOCK_TRACE},
               {"EventBlock", NT_BLOCK_EVENT},
               {"MetadataBlock", NT_BLOCK_METADATA},
               {"StackBlock", NT_BLOCK_STACK},
               {"SPBlock", NT_BLOCK_SP}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i].s) == n && memcmp(names[i].s, name, n) == 0)
      return names[i].k;
  return NT_BLOCK_UNKNOWN;
}

/* One FastSerialization object (V4/V5). */
static ps_err read_object(nt_stream *s, const uint8_t *buf, size_t len, bool eof, size_t *used,
                          size_t *need, nt_block *out, ps_diag *d) {
  uint64_t at = s->offset;
  if (len < 1)
    return need_more(1, len, eof, need, d, "object", at);
  if (buf[0] == FS_NULL) { /* end of stream */
    out->kind = NT_BLOCK_END;
    out->offset = at;
    out->data = buf;
    out->len = 0;
    *used = 1;
    return PS_E_OK;
  }
  /* 05 05 01 version min_version name_len name 06 */
  if (len < 15)
    return need_more(15, len, eof, need, d, "object header", at);
  if (buf[0] != FS_BEGIN_PRIVATE || buf[1] != FS_BEGIN_PRIVATE || buf[2] != FS_NULL)
    return ps_diag_set(d, PS_E_CORRUPT, "object header", (size_t)at,
                       "tags %02x %02x %02x, expected 05 05 01 (BeginPrivateObject, type, null)",
                       buf[0], buf[1], buf[2]);
  int32_t version = (int32_t)le32(buf + 3);
  int32_t min_version = (int32_t)le32(buf + 7);
  uint32_t name_len = le32(buf + 11);
  if (name_len == 0 || name_len > NT_MAX_TYPE_NAME)
    return ps_diag_set(d, PS_E_CORRUPT, "object header", (size_t)(at + 11),
                       "type name length %u", name_len);
  size_t hdr = 15 + (size_t)name_len + 1;
  if (len < hdr + 4)
    return need_more(hdr + 4, len, eof, need, d, "object header", at);
  if (buf[15 + name_len] != FS_END)
    return ps_diag_set(d, PS_E_CORRUPT, "object header", (size_t)(at + 15 + name_len),
                       "type object not closed by EndObject (06)");
  nt_block_kind kind = kind_from_name(buf + 15, name_len);
  const char *bname = nt_block_name(kind);
  if (kind == NT_BLOCK_UNKNOWN)
    return ps_diag_set(d, PS_E_UNSUPPORTED, "object header", (size_t)(at + 15),
                       "unknown object type \"%.*s\"", (int)name_len, (const char *)(buf + 15));
  if (!s->trace_seen && kind != NT_BLOCK_TRACE)
    return ps_diag_set(d, PS_E_CORRUPT, bname, (size_t)at, "the first object is not Trace");
  size_t body_off, body_len;
  if (kind == NT_BLOCK_TRACE) {
    if (s->trace_seen)
      return ps_diag_set(d, PS_E_CORRUPT, bname, (size_t)at, "a second Trace object");
    if (version != 4 || min_version > 4)
      return ps_diag_set(d, PS_E_UNSUPPORTED, bname, (size_t)(at + 3),
                         "Trace object version %d (minimum reader %d); NetTrace files have 4",
                         version, min_version);
    body_off = hdr;
    body_len = NT_TRACE_V4_BODY;
  } else {
    if (version < 1 || version > 2 || min_version > 2)
      return ps_diag_set(d, PS_E_UNSUPPORTED, bname, (size_t)(at + 3),
                         "%s version %d (minimum reader %d); this reader knows 2", bname,
                         version, min_version);
    uint32_t size = le32(buf + hdr);
    if ((size_t)size > s->max_block)
      return ps_diag_set(d, PS_E_LIMIT, bname, (size_t)(at + hdr),
                         "block of %u bytes over the %zu-byte block limit", size, s->max_block);
    uint64_t after = at + hdr + 4;
    size_t pad = (size_t)((4 - (after & 3)) & 3); /* to a 4-byte FILE offset */
    body_off = hdr + 4 + pad;
    body_len = size;
  }
  size_t total = body_off + body_len + 1;
  if (len < total)
    return need_more(total, len, eof, need, d, bname, at);
  for (size_t i = hdr + 4; kind != NT_BLOCK_TRACE && i < body_off; i++)
    if (buf[i] != 0)
      return ps_diag_set(d, PS_E_CORRUPT, bname, (size_t)(at + i), "non-zero alignment padding");
  if (buf[body_off + body_len] != FS_END)
    return ps_diag_set(d, PS_E_CORRUPT, bname, (size_t)(at + body_off + body_len),
                       "object not closed by EndObject (06) after its %zu-byte body", body_len);
  if (kind == NT_BLOCK_TRACE) {
    s->trace_seen = true;
    s->trace_version = version;
  }
  out->kind = kind;
  out->offset = at + body_off;
  out->data = buf + body_off;
  out->len = body_len;
  out->object_version = version;
  *used = total;
  return PS_E_OK;
}

/* One V6 block: u32 size | kind << 24. */
static ps_err read_block_v6(nt_stream *s, const uint8_t *buf, size_t len, bool eof, size_t *used,
                            size_t *need, nt_block *out, ps_diag *d) {
  uint64_t at = s->offset;
  if (len < 4)
    return need_more(4, len, eof, need, d, "block header", at);
  uint32_t w = le32(buf);
  size_t size = w & 0xFFFFFFu;
  uint32_t k = w >> 24;
  nt_block_kind kind = k <= 8 ? (nt_block_kind)k : NT_BLOCK_UNKNOWN;
  const char *bname = nt_block_name(kind);
  if (size > s->max_block)
    return ps_diag_set(d, PS_E_LIMIT, bname, (size_t)at,
                       "block of %zu bytes over the %zu-byte block limit", size, s->max_block);
  if (!s->trace_seen && kind != NT_BLOCK_TRACE)
    return ps_diag_set(d, PS_E_CORRUPT, bname, (size_t)at, "the first block is not a TraceBlock");
  if (kind == NT_BLOCK_TRACE && s->trace_seen)
    return ps_diag_set(d, PS_E_CORRUPT, bname, (size_t)at, "a second TraceBlock");
  if (len < 4 + size)
    return need_more(4 + size, len, eof, need, d, bname, at);
  if (kind == NT_BLOCK_TRACE)
    s->trace_seen = true;
  out->kind = kind;
  out->offset = at + 4;
  out->data = buf + 4;
  out->len = size;
  out->object_version = 6;
  *used = 4 + size;
  return PS_E_OK;
}

ps_err nt_stream_next(nt_stream *s, const uint8_t *buf, size_t len, bool eof, size_t *used,
                      size_t *need, nt_block *out, ps_diag *d) {
  *used = 0;
  *need = 0;
  memset(out, 0, sizeof *out);
  out->kind = NT_BLOCK_NONE;
  if (s->ended)
    return ps_diag_set(d, PS_E_INVALID, "end of stream", (size_t)s->offset,
                       "read past the end of the stream");
  ps_err e;
  if (!s->header_done) {
    e = read_header(s, buf, len, eof, used, need, d);
    if (e == PS_E_OK) {
      s->header_done = true;
      s->offset += *used;
    }
    return e;
  }
  e = s->format == 6 ? read_block_v6(s, buf, len, eof, used, need, out, d)
                     : read_object(s, buf, len, eof, used, need, out, d);
  if (e != PS_E_OK)
    return e;
  s->offset += *used;
  s->blocks++;
  if (out->kind == NT_BLOCK_END)
    s->ended = true;
  return PS_E_OK;
}

/* ---- small readers over a body ---- */

static void body_reader(ps_reader *r, const nt_block *b) {
  rd_init(r, b->data, b->len);
  r->origin = (size_t)b->offset;
}

static ps_err fail_reader(const ps_reader *r, ps_diag *d, const char *block) {
  ps_err e = rd_to_diag(r, d);
  if (d && d->where == NULL)
    d->where = block;
  return e;
}

/* varuint of at most `bits` bits (NetTraceFormat.md, "varuint") */
static uint64_t rd_varuint(ps_reader *r, unsigned bits, const char *what) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (shift >= 70 || (shift >= bits && bits < 64)) {
      rd_fail(r, PS_E_CORRUPT, what);
      return 0;
    }
    uint8_t byte = rd_u8(r, what);
    if (!rd_ok(r))
      return 0;
    uint64_t part = (uint64_t)(byte & 0x7F);
    if (shift == 63 && part > 1) {
      rd_fail(r, PS_E_CORRUPT, what);
      return 0;
    }
    v |= part << shift;
    if (!(byte & 0x80))
      break;
  }
  if (bits < 64 && (v >> bits) != 0) {
    rd_fail(r, PS_E_CORRUPT, what);
    return 0;
  }
  return v;
}

ps_err nt_read_trace(const nt_block *b, int format, nt_trace_info *o, ps_diag *d) {
  memset(o, 0, sizeof *o);
  ps_reader r;
  body_reader(&r, b);
  for (int i = 0; i < 8; i++)
    o->sync_time[i] = rd_u16(&r, "Trace SyncTimeUTC");
  o->sync_qpc = rd_u64(&r, "Trace SyncTimeQPC");
  o->qpc_frequency = rd_u64(&r, "Trace QPCFrequency");
  o->pointer_size = rd_u32(&r, "Trace PointerSize");
  if (format != 6) {
    o->process_id = rd_u32(&r, "Trace ProcessId");
    o->processors = rd_u32(&r, "Trace NumberOfProcessors");
    o->sampling_rate = rd_u32(&r, "Trace ExpectedCPUSamplingRate");
  } else {
    uint32_t n = rd_u32(&r, "TraceBlock KeyValueCount");
    for (uint32_t i = 0; i < n && rd_ok(&r); i++) {
      size_t kl = (size_t)rd_varuint(&r, 32, "TraceBlock key length");
      const uint8_t *k = rd_ptr(&r, kl, "TraceBlock key");
      size_t vl = (size_t)rd_varuint(&r, 32, "TraceBlock value length");
      const uint8_t *v = rd_ptr(&r, vl, "TraceBlock value");
      if (!rd_ok(&r))
        break;
      uint32_t num = 0;
      bool isnum = vl > 0 && vl <= 9;
      for (size_t j = 0; j < vl && isnum; j++) {
        if (v[j] < '0' || v[j] > '9')
          isnum = false;
        else
          num = num * 10 + (uint32_t)(v[j] - '0');
      }
      if (!isnum)
        continue;
      if (kl == 9 && !memcmp(k, "ProcessId", 9))
        o->process_id = num;
      else if (kl == 19 && !memcmp(k, "HardwareThreadCount", 19))
        o->processors = num;
      else if (kl == 23 && !memcmp(k, "ExpectedCPUSamplingRate", 23))
        o->sampling_rate = num;
    }
  }
  if (!rd_ok(&r))
    return fail_reader(&r, d, "Trace");
  if (o->pointer_size != 4 && o->pointer_size != 8)
    return ps_diag_set(d, PS_E_CORRUPT, "Trace", (size_t)b->offset + 32,
                       "pointer size %u, expected 4 or 8", o->pointer_size);
  if (o->qpc_frequency == 0)
    return ps_diag_set(d, PS_E_CORRUPT, "Trace", (size_t)b->offset + 24,
                       "timestamp frequency 0");
  return PS_E_OK;
}

/* ---- events ---- */

ps_err nt_events_begin(nt_event_iter *it, const nt_block *b, int format, ps_diag *d) {
  memset(it, 0, sizeof *it);
  it->format = format;
  it->in_metadata = b->kind == NT_BLOCK_METADATA;
  it->what = nt_block_name(b->kind);
  ps_reader r;
  body_reader(&r, b);
  /* header: u16 size (including itself), u16 flags, u64 min ts, u64 max ts, reserved */
  uint16_t hsize = rd_u16(&r, "block header size");
  uint16_t flags = rd_u16(&r, "block header flags");
  if (!rd_ok(&r))
    return fail_reader(&r, d, it->what);
  if (hsize < 20 || hsize > b->len)
    return ps_diag_set(d, PS_E_CORRUPT, it->what, (size_t)b->offset,
                       "header size %u (block of %zu bytes)", hsize, b->len);
  it->compressed = (flags & 1) != 0;
  it->p = b->data + hsize;
  it->len = b->len - hsize;
  it->base = b->offset + hsize;
  return PS_E_OK;
}

ps_err nt_events_next(nt_event_iter *it, nt_event *ev, bool *have, ps_diag *d) {
  *have = false;
  if (it->pos >= it->len)
    return PS_E_OK;
  ps_reader r;
  rd_init(&r, it->p, it->len);
  r.origin = (size_t)it->base;
  r.pos = it->pos;
  nt_event e = it->prev;
  e.offset = it->base + it->pos;
  e.payload = NULL;
  if (it->compressed) {
    uint8_t f = rd_u8(&r, "event header flags");
    if (f & 1)
      e.metadata_id = (uint32_t)rd_varuint(&r, 32, "event metadata id");
    if (f & 2) {
      e.sequence += (uint32_t)rd_varuint(&r, 32, "event sequence number");
      e.capture_thread_id = rd_varuint(&r, 64, "event capture thread");
      e.processor = (uint32_t)rd_varuint(&r, 32, "event processor");
    }
    if (it->format == 6 || e.metadata_id != 0)
      e.sequence++;
    if (f & 4)
      e.thread_id = rd_varuint(&r, 64, "event thread");
    if (f & 8)
      e.stack_id = (uint32_t)rd_varuint(&r, 32, "event stack id");
    e.timestamp += rd_varuint(&r, 64, "event timestamp");
    if (it->format == 6) {
      if (f & 16)
        e.label_list = (uint32_t)rd_varuint(&r, 32, "event label list");
    } else {
      if (f & 16)
        rd_copy(&r, e.activity_id, 16, "event activity id");
      if (f & 32)
        rd_copy(&r, e.related_activity_id, 16, "event related activity id");
    }
    e.sorted = (f & 64) != 0;
    if (f & 128)
      e.payload_len = (size_t)rd_varuint(&r, 32, "event payload size");
    if (!rd_ok(&r))
      return fail_reader(&r, d, it->what);
    e.payload = rd_ptr(&r, e.payload_len, "event payload");
    if (!rd_ok(&r))
      return ps_diag_set(d, PS_E_CORRUPT, it->what, (size_t)e.offset,
                         "event payload of %zu bytes runs past the block", e.payload_len);
  } else {
    size_t start = r.pos;
    uint32_t size = rd_u32(&r, "event size");
    uint32_t mid = rd_u32(&r, "event metadata id");
    e.sorted = (mid & 0x80000000u) != 0;
    e.metadata_id = mid & 0x7FFFFFFFu;
    e.sequence = rd_u32(&r, "event sequence number");
    e.thread_id = rd_u64(&r, "event thread");
    e.capture_thread_id = rd_u64(&r, "event capture thread");
    e.processor = rd_u32(&r, "event processor");
    e.stack_id = rd_u32(&r, "event stack id");
    e.timestamp = rd_u64(&r, "event timestamp");
    if (it->format == 6) {
      e.label_list = rd_u32(&r, "event label list");
    } else {
      rd_copy(&r, e.activity_id, 16, "event activity id");
      rd_copy(&r, e.related_activity_id, 16, "event related activity id");
    }
    e.payload_len = rd_u32(&r, "event payload size");
    if (!rd_ok(&r))
      return fail_reader(&r, d, it->what);
    size_t hdr = r.pos - start - 4;
    if ((size_t)size < hdr || (size_t)size - hdr < e.payload_len)
      return ps_diag_set(d, PS_E_CORRUPT, it->what, (size_t)e.offset,
                         "event size %u too small for its header and %zu-byte payload", size,
                         e.payload_len);
    e.payload = rd_ptr(&r, e.payload_len, "event payload");
    if (!rd_ok(&r))
      return fail_reader(&r, d, it->what);
    if (!rd_seek(&r, start + 4 + size, "event end"))
      return fail_reader(&r, d, it->what);
    if (it->format != 6) { /* V4/V5: padding to a 4-byte file offset */
      size_t abs = (size_t)it->base + r.pos;
      size_t pad = (4 - (abs & 3)) & 3;
      if (pad > rd_left(&r))
        pad = rd_left(&r);
      rd_skip(&r, pad, "event padding");
    }
  }
  if (it->in_metadata && e.metadata_id != 0)
    return ps_diag_set(d, PS_E_CORRUPT, it->what, (size_t)e.offset,
                       "metadata record with metadata id %u (must be 0)", e.metadata_id);
  it->pos = r.pos;
  it->prev = e;
  *ev = e;
  *have = true;
  return PS_E_OK;
}

/* ---- metadata ---- */

/* UTF-16LE NUL-terminated string at the cursor (V4/V5 metadata and payloads) */
static nt_u16 rd_u16z(ps_reader *r, const char *what) {
  nt_u16 s = {NULL, 0};
  if (!rd_ok(r))
    return s;
  size_t start = r->pos;
  for (;;) {
    uint16_t c = rd_u16(r, what);
    if (!rd_ok(r))
      return s;
    if (c == 0)
      break;
  }
  s.p = r->base + start;
  s.units = (r->pos - start) / 2 - 1;
  return s;
}

size_t nt_u16_to_utf8(nt_u16 s, char *dst, size_t cap) {
  if (!cap)
    return 0;
  size_t o = 0;
  for (size_t i = 0; i < s.units; i++) {
    uint32_t c = (uint32_t)s.p[2 * i] | (uint32_t)s.p[2 * i + 1] << 8;
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < s.units) {
      uint32_t c2 = (uint32_t)s.p[2 * i + 2] | (uint32_t)s.p[2 * i + 3] << 8;
      if (c2 >= 0xDC00 && c2 <= 0xDFFF) {
        c = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00);
        i++;
      } else {
        c = 0xFFFD;
      }
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xFFFD;
    }
    uint8_t buf[4];
    size_t n;
    if (c < 0x80) {
      buf[0] = (uint8_t)c;
      n = 1;
    } else if (c < 0x800) {
      buf[0] = (uint8_t)(0xC0 | (c >> 6));
      buf[1] = (uint8_t)(0x80 | (c & 0x3F));
      n = 2;
    } else if (c < 0x10000) {
      buf[0] = (uint8_t)(0xE0 | (c >> 12));
      buf[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
      buf[2] = (uint8_t)(0x80 | (c & 0x3F));
      n = 3;
    } else {
      buf[0] = (uint8_t)(0xF0 | (c >> 18));
      buf[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
      buf[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
      buf[3] = (uint8_t)(0x80 | (c & 0x3F));
      n = 4;
    }
    if (o + n + 1 > cap)
      break;
    memcpy(dst + o, buf, n);
    o += n;
  }
  dst[o] = '\0';
  return o;
}

static void copy_utf8(char *dst, size_t cap, const uint8_t *p, size_t n) {
  if (n >= cap) { /* cut at a character boundary: p[n] starts the first byte left out */
    n = cap - 1;
    while (n > 0 && (p[n] & 0xC0) == 0x80)
      n--;
  }
  memcpy(dst, p, n);
  dst[n] = '\0';
}

/* V4/V5 field list: i32 count, then (i32 type, [nested list if Object], name) */
static void skip_fields_v5(ps_reader *r, int depth, bool v2, uint32_t *top) {
  uint32_t n = rd_u32(r, "metadata field count");
  if (!rd_ok(r))
    return;
  if (top)
    *top = n;
  if (depth > 8) {
    rd_fail(r, PS_E_LIMIT, "metadata fields nested too deep");
    return;
  }
  /* each field takes at least 6 bytes: a count this large cannot fit */
  if (n > rd_left(r) / 6 + 1) {
    rd_fail(r, PS_E_CORRUPT, "metadata field count");
    return;
  }
  for (uint32_t i = 0; i < n && rd_ok(r); i++) {
    if (v2) { /* V2Params: i32 size covering the whole field */
      uint32_t size = rd_u32(r, "metadata V2 field size");
      if (size < 4 || size - 4 > rd_left(r)) {
        rd_fail(r, PS_E_CORRUPT, "metadata V2 field size");
        return;
      }
      rd_skip(r, size - 4, "metadata V2 field");
      continue;
    }
    uint32_t type = rd_u32(r, "metadata field type");
    if (type == 1) /* Object: a nested description */
      skip_fields_v5(r, depth + 1, false, NULL);
    else if (type == 19) /* Array (V5): element type code */
      (void)rd_u32(r, "metadata array element type");
    (void)rd_u16z(r, "metadata field name");
  }
}

static ps_err read_metadata_v5(const nt_event *ev, nt_metadata *m, ps_diag *d) {
  ps_reader r;
  rd_init(&r, ev->payload, ev->payload_len);
  r.origin = (size_t)(ev->offset); /* approximate: the record */
  m->id = rd_u32(&r, "metadata id");
  nt_u16 prov = rd_u16z(&r, "metadata provider name");
  m->event_id = rd_u32(&r, "metadata event id");
  nt_u16 name = rd_u16z(&r, "metadata event name");
  m->keywords = rd_u64(&r, "metadata keywords");
  m->version = rd_u32(&r, "metadata version");
  m->level = rd_u32(&r, "metadata level");
  if (!rd_ok(&r))
    return fail_reader(&r, d, "MetadataBlock");
  nt_u16_to_utf8(prov, m->provider, sizeof m->provider);
  nt_u16_to_utf8(name, m->name, sizeof m->name);
  if (rd_left(&r) > 0) /* field descriptions (absent for some rundown events) */
    skip_fields_v5(&r, 0, false, &m->fields);
  /* V5 tags: i32 size, u8 kind, payload */
  while (rd_ok(&r) && rd_left(&r) >= 5) {
    uint32_t size = rd_u32(&r, "metadata tag size");
    uint8_t kind = rd_u8(&r, "metadata tag kind");
    if (!rd_ok(&r) || size > rd_left(&r)) {
      rd_fail(&r, PS_E_CORRUPT, "metadata tag size");
      break;
    }
    ps_reader t = rd_sub(&r, r.pos, size, "metadata tag");
    if (kind == 1 && size >= 1)
      m->opcode = rd_u8(&t, "metadata opcode");
    else if (kind == 2)
      skip_fields_v5(&t, 0, true, &m->fields);
    if (!rd_ok(&t))
      return fail_reader(&t, d, "MetadataBlock");
    rd_skip(&r, size, "metadata tag");
  }
  if (!rd_ok(&r))
    return fail_reader(&r, d, "MetadataBlock");
  return PS_E_OK;
}

/* V6 field descriptions: u16 count, then (u16 size, name and type in size bytes) */
static void skip_fields_v6(ps_reader *r, int depth, uint32_t *top) {
  uint16_t n = rd_u16(r, "metadata field count");
  if (top)
    *top = n;
  if (depth > 8) {
    rd_fail(r, PS_E_LIMIT, "metadata fields nested too deep");
    return;
  }
  for (uint32_t i = 0; i < n && rd_ok(r); i++) {
    uint16_t size = rd_u16(r, "metadata field size");
    if (size > rd_left(r)) {
      rd_fail(r, PS_E_CORRUPT, "metadata field size");
      return;
    }
    rd_skip(r, size, "metadata field"); /* the size covers name and type */
  }
}
static ps_err read_metadata_v6(ps_reader *row, nt_metadata *m) {
  m->id = (uint32_t)rd_varuint(row, 32, "metadata id");
  size_t pl = (size_t)rd_varuint(row, 32, "metadata provider length");
  const uint8_t *p = rd_ptr(row, pl, "metadata provider name");
  m->event_id = (uint32_t)rd_varuint(row, 32, "metadata event id");
  size_t nl = (size_t)rd_varuint(row, 32, "metadata name length");
  const uint8_t *n = rd_ptr(row, nl, "metadata event name");
  if (!rd_ok(row))
    return row->err;
  copy_utf8(m->provider, sizeof m->provider, p, pl);
  copy_utf8(m->name, sizeof m->name, n, nl);
  skip_fields_v6(row, 0, &m->fields);
  uint16_t osize = rd_u16(row, "metadata optional size");
  if (!rd_ok(row))
    return row->err;
  ps_reader o = rd_sub(row, row->pos, osize, "metadata optional data");
  while (rd_ok(&o) && rd_left(&o) > 0) {
    uint8_t kind = rd_u8(&o, "metadata optional kind");
    switch (kind) {
    case 1: m->opcode = rd_u8(&o, "metadata opcode"); break;
    case 3: m->keywords = rd_u64(&o, "metadata keywords"); break;
    case 4: /* message template */
    case 5: /* description */
      rd_skip(&o, (size_t)rd_varuint(&o, 32, "metadata string length"), "metadata string");
      break;
    case 6: /* key, value */
      rd_skip(&o, (size_t)rd_varuint(&o, 32, "metadata key length"), "metadata key");
      rd_skip(&o, (size_t)rd_varuint(&o, 32, "metadata value length"), "metadata value");
      break;
    case 7: rd_skip(&o, 16, "metadata provider guid"); break;
    case 8: m->level = rd_u8(&o, "metadata level"); break;
    case 9: m->version = rd_u8(&o, "metadata version"); break;
    default: rd_fail(&o, PS_E_CORRUPT, "metadata optional kind"); break;
    }
  }
  if (!rd_ok(&o)) {
    *row = o;
    return o.err;
  }
  return PS_E_OK;
}

ps_err nt_metadata_begin(nt_metadata_iter *it, const nt_block *b, int format, ps_diag *d) {
  memset(it, 0, sizeof *it);
  it->format = format;
  if (format != 6)
    return nt_events_begin(&it->ev, b, format, d);
  ps_reader r;
  body_reader(&r, b);
  uint16_t hsize = rd_u16(&r, "MetadataBlock header size");
  rd_skip(&r, hsize, "MetadataBlock header");
  if (!rd_ok(&r))
    return fail_reader(&r, d, "MetadataBlock");
  it->p = b->data;
  it->len = b->len;
  it->pos = r.pos;
  it->base = b->offset;
  return PS_E_OK;
}

ps_err nt_metadata_next(nt_metadata_iter *it, nt_metadata *m, bool *have, ps_diag *d) {
  memset(m, 0, sizeof *m);
  m->opcode = -1;
  *have = false;
  if (it->format != 6) {
    nt_event ev;
    ps_err e = nt_events_next(&it->ev, &ev, have, d);
    if (e != PS_E_OK || !*have)
      return e;
    e = read_metadata_v5(&ev, m, d);
    if (e != PS_E_OK)
      *have = false;
    return e;
  }
  if (it->pos >= it->len)
    return PS_E_OK;
  ps_reader r;
  rd_init(&r, it->p, it->len);
  r.origin = (size_t)it->base;
  r.pos = it->pos;
  uint16_t size = rd_u16(&r, "metadata row size");
  ps_reader row = rd_sub(&r, r.pos, size, "metadata row");
  if (!rd_ok(&r))
    return fail_reader(&r, d, "MetadataBlock");
  if (read_metadata_v6(&row, m) != PS_E_OK)
    return fail_reader(&row, d, "MetadataBlock");
  it->pos = r.pos + size;
  *have = true;
  return PS_E_OK;
}

/* ---- stacks, sequence points, threads ---- */

ps_err nt_stacks_begin(nt_stack_iter *it, const nt_block *b, uint32_t pointer_size,
                       ps_diag *d) {
  memset(it, 0, sizeof *it);
  ps_reader r;
  body_reader(&r, b);
  it->next_id = rd_u32(&r, "StackBlock first id");
  it->left = rd_u32(&r, "StackBlock count");
  if (!rd_ok(&r))
    return fail_reader(&r, d, "StackBlock");
  if (pointer_size != 4 && pointer_size != 8)
    return ps_diag_set(d, PS_E_INVALID, "StackBlock", (size_t)b->offset, "pointer size %u",
                       pointer_size);
  /* every stack takes at least its 4-byte size */
  if (it->left > (b->len - 8) / 4)
    return ps_diag_set(d, PS_E_CORRUPT, "StackBlock", (size_t)b->offset + 4,
                       "%u stacks cannot fit in %zu bytes", it->left, b->len);
  it->p = b->data;
  it->len = b->len;
  it->pos = 8;
  it->base = b->offset;
  it->pointer_size = pointer_size;
  return PS_E_OK;
}

ps_err nt_stacks_next(nt_stack_iter *it, uint32_t *id, const uint8_t **ips, size_t *count,
                      bool *have, ps_diag *d) {
  *have = false;
  if (it->left == 0)
    return PS_E_OK;
  ps_reader r;
  rd_init(&r, it->p, it->len);
  r.origin = (size_t)it->base;
  r.pos = it->pos;
  uint32_t size = rd_u32(&r, "stack size");
  const uint8_t *q = rd_ptr(&r, size, "stack");
  if (!rd_ok(&r))
    return fail_reader(&r, d, "StackBlock");
  if (size % it->pointer_size)
    return ps_diag_set(d, PS_E_CORRUPT, "StackBlock", (size_t)(it->base + it->pos),
                       "stack of %u bytes is not a whole number of %u-byte IPs", size,
                       it->pointer_size);
  *id = it->next_id++;
  *ips = q;
  *count = size / it->pointer_size;
  it->pos = r.pos;
  it->left--;
  *have = true;
  return PS_E_OK;
}

ps_err nt_read_sequence_point(const nt_block *b, int format, nt_sequence_point *o,
                              ps_diag *d) {
  memset(o, 0, sizeof *o);
  ps_reader r;
  body_reader(&r, b);
  o->timestamp = rd_u64(&r, "SPBlock timestamp");
  if (format == 6)
    o->flags = rd_u32(&r, "SPBlock flags");
  o->threads = rd_u32(&r, "SPBlock thread count");
  if (!rd_ok(&r))
    return fail_reader(&r, d, "SPBlock");
  if (format != 6) {
    size_t bytes;
    if (!ps_mul_size(o->threads, 12, &bytes) || bytes != rd_left(&r))
      return ps_diag_set(d, PS_E_CORRUPT, "SPBlock", (size_t)b->offset + 8,
                         "%u threads do not fill the %zu bytes left", o->threads, rd_left(&r));
    return PS_E_OK;
  }
  for (uint32_t i = 0; i < o->threads && rd_ok(&r); i++) {
    (void)rd_varuint(&r, 64, "SPBlock thread index");
    (void)rd_varuint(&r, 32, "SPBlock sequence number");
  }
  if (!rd_ok(&r))
    return fail_reader(&r, d, "SPBlock");
  return PS_E_OK;
}

ps_err nt_sequence_point_threads(const nt_block *b, int format, nt_sp_thread_fn fn, void *ctx,
                                 ps_diag *d) {
  nt_sequence_point sp;
  ps_err e = nt_read_sequence_point(b, format, &sp, d);
  if (e)
    return e;
  ps_reader r;
  body_reader(&r, b);
  rd_skip(&r, format == 6 ? 16 : 12, "SPBlock header");
  for (uint32_t i = 0; i < sp.threads && rd_ok(&r); i++) {
    uint64_t thread;
    uint32_t seq;
    if (format == 6) {
      thread = rd_varuint(&r, 64, "SPBlock thread index");
      seq = (uint32_t)rd_varuint(&r, 32, "SPBlock sequence number");
    } else {
      thread = rd_u64(&r, "SPBlock thread id");
      seq = rd_u32(&r, "SPBlock sequence number");
    }
    if (!rd_ok(&r))
      break;
    e = fn(ctx, thread, seq);
    if (e)
      return e;
  }
  if (!rd_ok(&r))
    return fail_reader(&r, d, "SPBlock");
  return PS_E_OK;
}

ps_err nt_removed_threads(const nt_block *b, nt_sp_thread_fn fn, void *ctx, ps_diag *d) {
  ps_reader r;
  body_reader(&r, b);
  while (rd_ok(&r) && rd_left(&r) > 0) {
    uint64_t thread = rd_varuint(&r, 64, "RemoveThreadBlock thread index");
    uint32_t seq = (uint32_t)rd_varuint(&r, 32, "RemoveThreadBlock sequence number");
    if (!rd_ok(&r))
      break;
    ps_err e = fn(ctx, thread, seq);
    if (e)
      return e;
  }
  if (!rd_ok(&r))
    return fail_reader(&r, d, "RemoveThreadBlock");
  return PS_E_OK;
}

ps_err nt_threads_begin(nt_thread_iter *it, const nt_block *b, ps_diag *d) {
  (void)d;
  memset(it, 0, sizeof *it);
  it->p = b->data;
  it->len = b->len;
  it->base = b->offset;
  return PS_E_OK;
}

ps_err nt_threads_next(nt_thread_iter *it, nt_thread *t, bool *have, ps_diag *d) {
  memset(t, 0, sizeof *t);
  *have = false;
  if (it->pos >= it->len)
    return PS_E_OK;
  ps_reader r;
  rd_init(&r, it->p, it->len);
  r.origin = (size_t)it->base;
  r.pos = it->pos;
  uint16_t size = rd_u16(&r, "thread row size");
  ps_reader row = rd_sub(&r, r.pos, size, "thread row");
  t->index = rd_varuint(&row, 64, "thread index");
  while (rd_ok(&row) && rd_left(&row) > 0) {
    uint8_t kind = rd_u8(&row, "thread info kind");
    switch (kind) {
    case 1: rd_skip(&row, (size_t)rd_varuint(&row, 32, "thread name length"), "thread name"); break;
    case 2: t->os_process_id = rd_varuint(&row, 64, "thread process id"); break;
    case 3:
      t->os_thread_id = rd_varuint(&row, 64, "thread OS id");
      t->has_thread_id = true;
      break;
    case 4:
      rd_skip(&row, (size_t)rd_varuint(&row, 32, "thread key length"), "thread key");
      rd_skip(&row, (size_t)rd_varuint(&row, 32, "thread value length"), "thread value");
      break;
    default: rd_fail(&row, PS_E_CORRUPT, "thread info kind"); break;
    }
  }
  if (!rd_ok(&r))
    return fail_reader(&r, d, "ThreadBlock");
  if (!rd_ok(&row))
    return fail_reader(&row, d, "ThreadBlock");
  it->pos = r.pos + size;
  *have = true;
  return PS_E_OK;
}

/* ---- payloads ---- */

#define PROV_RUNTIME "Microsoft-Windows-DotNETRuntime"
#define PROV_RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define PROV_SAMPLER "Microsoft-DotNETCore-SampleProfiler"

nt_event_class nt_classify(const nt_metadata *m) {
  if (!strcmp(m->provider, PROV_RUNTIME)) {
    switch (m->event_id) {
    case 143: return NT_EV_METHOD_LOAD;   /* MethodLoadVerbose */
    case 144: return NT_EV_METHOD_UNLOAD; /* MethodUnloadVerbose */
    case 190: return NT_EV_IL_MAP;        /* MethodILToNativeMap */
    case 152: return NT_EV_MODULE_LOAD;   /* ModuleLoad */
    case 153: return NT_EV_MODULE_UNLOAD; /* ModuleUnload */
    default: return NT_EV_OTHER;
    }
  }
  if (!strcmp(m->provider, PROV_RUNDOWN)) {
    switch (m->event_id) {
    case 143: /* MethodDCStartVerbose */
    case 144: return NT_EV_METHOD_LOAD; /* MethodDCStopVerbose (code still loaded) */
    case 149: /* MethodDCStartILToNativeMap */
    case 150: return NT_EV_IL_MAP;      /* MethodDCStopILToNativeMap */
    case 153: /* ModuleDCStart */
    case 154: return NT_EV_MODULE_LOAD; /* ModuleDCStop */
    default: return NT_EV_OTHER;
    }
  }
  if (!strcmp(m->provider, PROV_SAMPLER) && m->event_id == 0)
    return NT_EV_SAMPLE;
  return NT_EV_OTHER;
}

static ps_err payload_fail(const ps_reader *r, ps_diag *d, const char *event) {
  ps_err e = rd_to_diag(r, d);
  if (d)
    ps_diag_set(d, e, event, d->offset, "payload of %zu bytes", r->len);
  return e;
}

ps_err nt_decode_method_load(const uint8_t *p, size_t n, uint32_t version, nt_method_load *o,
                             ps_diag *d) {
  memset(o, 0, sizeof *o);
  ps_reader r;
  rd_init(&r, p, n);
  o->method_id = rd_u64(&r, "MethodID");
  o->module_id = rd_u64(&r, "ModuleID");
  o->start = rd_u64(&r, "MethodStartAddress");
  o->size = rd_u32(&r, "MethodSize");
  o->token = rd_u32(&r, "MethodToken");
  o->flags = rd_u32(&r, "MethodFlags");
  o->ns = rd_u16z(&r, "MethodNamespace");
  o->name = rd_u16z(&r, "MethodName");
  o->signature = rd_u16z(&r, "MethodSignature");
  if (version >= 1)
    o->clr_instance = rd_u16(&r, "ClrInstanceID");
  if (version >= 2)
    o->rejit = rd_u64(&r, "ReJITID");
  if (!rd_ok(&r))
    return payload_fail(&r, d, "MethodLoadVerbose");
  return PS_E_OK;
}

ps_err nt_decode_il_map(const uint8_t *p, size_t n, uint32_t version, nt_il_map *o,
                        ps_diag *d) {
  (void)version;
  memset(o, 0, sizeof *o);
  ps_reader r;
  rd_init(&r, p, n);
  o->method_id = rd_u64(&r, "MethodID");
  o->rejit = rd_u64(&r, "ReJITID");
  o->extent = rd_u8(&r, "MethodExtent");
  o->count = rd_u16(&r, "CountOfMapEntries");
  o->il = rd_ptr(&r, (size_t)o->count * 4, "ILOffsets");
  o->native = rd_ptr(&r, (size_t)o->count * 4, "NativeOffsets");
  o->clr_instance = rd_u16(&r, "ClrInstanceID");
  if (!rd_ok(&r))
    return payload_fail(&r, d, "MethodILToNativeMap");
  return PS_E_OK;
}

ps_err nt_decode_module_load(const uint8_t *p, size_t n, uint32_t version, nt_module_load *o,
                             ps_diag *d) {
  memset(o, 0, sizeof *o);
  ps_reader r;
  rd_init(&r, p, n);
  o->module_id = rd_u64(&r, "ModuleID");
  o->assembly_id = rd_u64(&r, "AssemblyID");
  o->flags = rd_u32(&r, "ModuleFlags");
  (void)rd_u32(&r, "Reserved1");
  o->il_path = rd_u16z(&r, "ModuleILPath");
  o->native_path = rd_u16z(&r, "ModuleNativePath");
  if (version >= 1)
    o->clr_instance = rd_u16(&r, "ClrInstanceID");
  if (version >= 2) {
    rd_copy(&r, o->pdb_guid, 16, "ManagedPdbSignature");
    o->pdb_age = rd_u32(&r, "ManagedPdbAge");
    o->pdb_path = rd_u16z(&r, "ManagedPdbBuildPath");
    rd_copy(&r, o->native_pdb_guid, 16, "NativePdbSignature");
    o->native_pdb_age = rd_u32(&r, "NativePdbAge");
    o->native_pdb_path = rd_u16z(&r, "NativePdbBuildPath");
    o->has_pdb = true;
  }
  if (!rd_ok(&r))
    return payload_fail(&r, d, "ModuleLoad");
  return PS_E_OK;
}

ps_err nt_decode_sample(const uint8_t *p, size_t n, uint32_t *type, ps_diag *d) {
  *type = 0;
  if (n == 0)
    return PS_E_OK; /* some runtimes write an empty payload */
  ps_reader r;
  rd_init(&r, p, n);
  *type = rd_u32(&r, "ThreadSample type");
  if (!rd_ok(&r))
    return payload_fail(&r, d, "ThreadSample");
  return PS_E_OK;
}
