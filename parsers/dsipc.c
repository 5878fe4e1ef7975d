/*
 * dsipc.c - the diagnostic IPC protocol's messages (see dsipc.h).
 */
#include "dsipc.h"

#include <stdio.h>
#include <string.h>

#include "nettrace.h"
#include "reader.h"

static const uint8_t magic_ipc[14] = {'D', 'O', 'T', 'N', 'E', 'T', '_', 'I',
                                      'P', 'C', '_', 'V', '1', 0};
static const uint8_t magic_advr[8] = {'A', 'D', 'V', 'R', '_', 'V', '1', 0};

_Static_assert(sizeof magic_ipc + 2 + 1 + 1 + 2 == DS_HEADER_SIZE, "IPC header is 20 bytes");
_Static_assert(sizeof magic_advr + 16 + 8 + 2 == DS_ADVERTISE_SIZE, "advertise is 34 bytes");

/* ---- a bounded writer ---- */

typedef struct {
  uint8_t *p;
  size_t len, cap;
  bool over;
} wbuf;

static void w_bytes(wbuf *w, const void *src, size_t n) {
  if (w->over || n > w->cap - w->len) {
    w->over = true;
    return;
  }
  memcpy(w->p + w->len, src, n);
  w->len += n;
}
static void w_u8(wbuf *w, uint8_t v) { w_bytes(w, &v, 1); }
static void w_u16(wbuf *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  w_bytes(w, b, 2);
}
static void w_u32(wbuf *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  w_bytes(w, b, 4);
}
static void w_u64(wbuf *w, uint64_t v) {
  w_u32(w, (uint32_t)v);
  w_u32(w, (uint32_t)(v >> 32));
}

/* The next code point of UTF-8 s (advancing *i); U+FFFD for a bad byte. */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *i) {
  unsigned char c = s[*i];
  size_t k;
  uint32_t cp;
  if (c < 0x80) {
    (*i)++;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    k = 1;
    cp = c & 0x1Fu;
  } else if ((c & 0xF0) == 0xE0) {
    k = 2;
    cp = c & 0x0Fu;
  } else if ((c & 0xF8) == 0xF0) {
    k = 3;
    cp = c & 0x07u;
  } else {
    (*i)++;
    return 0xFFFD;
  }
  if (*i + k >= n) { /* not enough bytes */
    (*i)++;
    return 0xFFFD;
  }
  for (size_t j = 1; j <= k; j++) {
    if ((s[*i + j] & 0xC0) != 0x80) {
      (*i)++;
      return 0xFFFD;
    }
    cp = cp << 6 | (s[*i + j] & 0x3Fu);
  }
  *i += k + 1;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0xFFFD;
  return cp;
}

/* string: u32 UTF-16 units with the NUL, the units; or 0 for NULL / "" */
static void w_string(wbuf *w, const char *s) {
  if (!s || !*s) {
    w_u32(w, 0);
    return;
  }
  const unsigned char *u = (const unsigned char *)s;
  size_t n = strlen(s), units = 1;
  for (size_t i = 0; i < n;)
    units += utf8_next(u, n, &i) >= 0x10000 ? 2 : 1;
  if (units > UINT32_MAX / 2) {
    w->over = true;
    return;
  }
  w_u32(w, (uint32_t)units);
  for (size_t i = 0; i < n;) {
    uint32_t cp = utf8_next(u, n, &i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      w_u16(w, (uint16_t)(0xD800 + (cp >> 10)));
      w_u16(w, (uint16_t)(0xDC00 + (cp & 0x3FF)));
    } else {
      w_u16(w, (uint16_t)cp);
    }
  }
  w_u16(w, 0);
}

static void w_header(wbuf *w, uint8_t set, uint8_t id) {
  w_bytes(w, magic_ipc, sizeof magic_ipc);
  w_u16(w, 0); /* the size, patched at the end */
  w_u8(w, set);
  w_u8(w, id);
  w_u16(w, 0);
}

/* patches the header's size; false when the message is over 65,535 bytes */
static bool w_finish(wbuf *w) {
  if (w->over || w->len > DS_MAX_MESSAGE)
    return false;
  w->p[14] = (uint8_t)w->len;
  w->p[15] = (uint8_t)(w->len >> 8);
  return true;
}

/* ---- messages ---- */

ps_err ds_header_parse(const uint8_t *p, size_t n, ds_header *h, ps_diag *d) {
  if (n < DS_HEADER_SIZE)
    return ps_diag_set(d, PS_E_TRUNCATED, "IPC header", 0, "%zu of its 20 bytes", n);
  if (memcmp(p, magic_ipc, sizeof magic_ipc) != 0)
    return ps_diag_set(d, PS_E_CORRUPT, "IPC header", 0,
                       "no \"DOTNET_IPC_V1\" magic: not the .NET diagnostic protocol");
  ps_reader r;
  rd_init(&r, p, n);
  rd_skip(&r, sizeof magic_ipc, "magic");
  h->size = rd_u16(&r, "size");
  h->set = rd_u8(&r, "command set");
  h->id = rd_u8(&r, "command id");
  h->reserved = rd_u16(&r, "reserved");
  if (h->size < DS_HEADER_SIZE)
    return ps_diag_set(d, PS_E_CORRUPT, "IPC header", 14,
                       "size %u is less than the header's 20 bytes", h->size);
  return PS_E_OK;
}

size_t ds_build_simple(uint8_t *out, size_t cap, uint8_t set, uint8_t id) {
  wbuf w = {out, 0, cap, false};
  w_header(&w, set, id);
  return w_finish(&w) ? w.len : 0;
}

size_t ds_build_stop(uint8_t *out, size_t cap, uint64_t session) {
  wbuf w = {out, 0, cap, false};
  w_header(&w, DS_SET_EVENTPIPE, DS_EP_STOP);
  w_u64(&w, session);
  return w_finish(&w) ? w.len : 0;
}

ps_err ds_build_collect(int version, const ds_collect *c, uint8_t *out, size_t cap, size_t *len,
                        ps_diag *d) {
  *len = 0;
  if (version < 1 || version > 5)
    return ps_diag_set(d, PS_E_INVALID, "CollectTracing", 0, "no CollectTracing%d", version);
  if (c->nproviders == 0 || c->nproviders > 1000) /* the runtime takes 1 to 1,000 */
    return ps_diag_set(d, PS_E_INVALID, "CollectTracing", 0, "%zu providers (1 to 1000)",
                       c->nproviders);
  if (c->buffer_mb == 0)
    return ps_diag_set(d, PS_E_INVALID, "CollectTracing", 0, "a buffer of 0 MB");
  if (version <= 2 && !c->stackwalk)
    return ps_diag_set(d, PS_E_UNSUPPORTED, "CollectTracing", 0,
                       "CollectTracing%d always walks stacks", version);
  if (version == 1 && c->rundown_keyword != DS_DEFAULT_RUNDOWN_KEYWORD)
    return ps_diag_set(d, PS_E_UNSUPPORTED, "CollectTracing", 0,
                       "CollectTracing always runs the default rundown");
  if (version <= 3 && c->rundown_keyword && c->rundown_keyword != DS_DEFAULT_RUNDOWN_KEYWORD)
    return ps_diag_set(d, PS_E_UNSUPPORTED, "CollectTracing", 0,
                       "CollectTracing%d has no rundown keyword", version);
  static const uint8_t ids[6] = {0, DS_EP_COLLECT, DS_EP_COLLECT2, DS_EP_COLLECT3,
                                 DS_EP_COLLECT4, DS_EP_COLLECT5};
  wbuf w = {out, 0, cap, false};
  w_header(&w, DS_SET_EVENTPIPE, ids[version]);
  if (version == 5)
    w_u32(&w, 0); /* session type: a stream over this connection */
  w_u32(&w, c->buffer_mb);
  w_u32(&w, 1); /* format: NetTrace */
  if (version == 2 || version == 3)
    w_u8(&w, c->rundown_keyword != 0);
  else if (version >= 4)
    w_u64(&w, c->rundown_keyword);
  if (version >= 3)
    w_u8(&w, c->stackwalk);
  w_u32(&w, (uint32_t)c->nproviders);
  for (size_t i = 0; i < c->nproviders; i++) {
    const ds_provider *p = &c->providers[i];
    if (!p->name || !*p->name || p->level > 5)
      return ps_diag_set(d, PS_E_INVALID, "CollectTracing", 0,
                         "provider %zu: a name and a level of 0 to 5", i);
    w_u64(&w, p->keywords);
    w_u32(&w, p->level);
    w_string(&w, p->name);
    w_string(&w, p->args);
    if (version == 5) { /* event filter: off, no ids (every event) */
      w_u8(&w, 0);
      w_u32(&w, 0);
    }
  }
  if (!w_finish(&w))
    return ps_diag_set(d, PS_E_LIMIT, "CollectTracing", 0,
                       "the message is over %zu bytes", cap < DS_MAX_MESSAGE ? cap : DS_MAX_MESSAGE);
  *len = w.len;
  return PS_E_OK;
}

ps_err ds_reply_parse(const ds_header *h, const uint8_t *p, size_t n, ds_reply *r, ps_diag *d) {
  memset(r, 0, sizeof *r);
  if (h->set != DS_SET_SERVER)
    return ps_diag_set(d, PS_E_CORRUPT, "IPC reply", 16,
                       "command set 0x%02x where a reply has 0xFF", h->set);
  if (h->id == DS_SERVER_OK) {
    r->ok = true;
    return PS_E_OK;
  }
  if (h->id != DS_SERVER_ERROR)
    return ps_diag_set(d, PS_E_CORRUPT, "IPC reply", 17,
                       "reply id 0x%02x is neither OK (0x00) nor Error (0xFF)", h->id);
  if (n < 4)
    return ps_diag_set(d, PS_E_TRUNCATED, "IPC error reply", DS_HEADER_SIZE,
                       "%zu bytes where the HRESULT takes 4", n);
  r->hresult = nt_le32(p);
  return PS_E_OK;
}

ps_err ds_session_parse(const uint8_t *p, size_t n, uint64_t *session, ps_diag *d) {
  if (n < 8)
    return ps_diag_set(d, PS_E_TRUNCATED, "IPC reply", DS_HEADER_SIZE,
                       "%zu bytes where the session id takes 8", n);
  *session = (uint64_t)nt_le32(p) | (uint64_t)nt_le32(p + 4) << 32;
  return PS_E_OK;
}

/* string: u32 units (with the NUL), units; into out as UTF-8, cut to fit */
static bool r_string(ps_reader *r, char *out, size_t cap, const char *what) {
  out[0] = '\0';
  uint32_t units = rd_u32(r, what);
  if (!rd_ok(r))
    return false;
  if (units == 0)
    return true;
  size_t bytes;
  if (!ps_mul_size(units, 2, &bytes) || bytes > rd_left(r)) {
    rd_fail(r, PS_E_TRUNCATED, what);
    return false;
  }
  const uint8_t *p = rd_ptr(r, bytes, what);
  if (!p)
    return false;
  if (p[bytes - 2] || p[bytes - 1]) { /* the last unit must be the NUL */
    rd_fail(r, PS_E_CORRUPT, what);
    return false;
  }
  nt_u16 s = {p, units - 1};
  nt_u16_to_utf8(s, out, cap);
  return true;
}

ps_err ds_process_info_parse(int kind, const uint8_t *p, size_t n, ds_process_info *o,
                             ps_diag *d) {
  memset(o, 0, sizeof *o);
  if (kind < 1 || kind > 3)
    return ps_diag_set(d, PS_E_INVALID, "ProcessInfo", 0, "no ProcessInfo%d", kind);
  ps_reader r;
  rd_init(&r, p, n);
  if (kind == 3)
    o->version = rd_u32(&r, "ProcessInfo3 version");
  o->pid = rd_u64(&r, "ProcessInfo pid");
  rd_copy(&r, o->cookie, 16, "ProcessInfo runtime cookie");
  r_string(&r, o->command_line, sizeof o->command_line, "ProcessInfo command line");
  r_string(&r, o->os, sizeof o->os, "ProcessInfo OS");
  r_string(&r, o->arch, sizeof o->arch, "ProcessInfo architecture");
  if (kind >= 2) {
    r_string(&r, o->assembly, sizeof o->assembly, "ProcessInfo entry assembly");
    r_string(&r, o->clr_version, sizeof o->clr_version, "ProcessInfo CLR version");
  }
  if (kind == 3 && o->version >= 1)
    r_string(&r, o->rid, sizeof o->rid, "ProcessInfo runtime identifier");
  /* later versions may add fields after these: they are not read */
  if (!rd_ok(&r))
    return ps_diag_set(d, r.err, r.what, DS_HEADER_SIZE + r.err_off,
                       "ProcessInfo%d reply of %zu bytes", kind, n);
  return PS_E_OK;
}

ps_err ds_advertise_parse(const uint8_t *p, size_t n, ds_advertise *a, ps_diag *d) {
  memset(a, 0, sizeof *a);
  if (n < DS_ADVERTISE_SIZE)
    return ps_diag_set(d, PS_E_TRUNCATED, "advertise", 0, "%zu of its 34 bytes", n);
  if (memcmp(p, magic_advr, sizeof magic_advr) != 0)
    return ps_diag_set(d, PS_E_CORRUPT, "advertise", 0,
                       "no \"ADVR_V1\" magic: not a .NET runtime dialing in");
  memcpy(a->cookie, p + 8, 16);
  a->pid = (uint64_t)nt_le32(p + 24) | (uint64_t)nt_le32(p + 28) << 32;
  return PS_E_OK;
}

/* ---- HRESULTs ---- */

static const struct {
  uint32_t hr;
  const char *name, *text;
} hresults[] = {
    {DS_E_BAD_ENCODING, "DS_IPC_E_BAD_ENCODING", "the runtime could not read the command"},
    {DS_E_UNKNOWN_COMMAND, "DS_IPC_E_UNKNOWN_COMMAND", "the runtime does not know the command"},
    {DS_E_UNKNOWN_MAGIC, "DS_IPC_E_UNKNOWN_MAGIC", "the runtime does not know the protocol version"},
    {DS_E_NOTSUPPORTED, "DS_IPC_E_NOTSUPPORTED", "the runtime does not support it"},
    {DS_E_FAIL, "DS_IPC_E_FAIL", "the runtime failed (too many sessions?)"},
    {DS_E_NOT_YET_AVAILABLE, "DS_IPC_E_NOT_YET_AVAILABLE", "the runtime is not ready for it yet"},
    {DS_E_RUNTIME_UNINITIALIZED, "DS_IPC_E_RUNTIME_UNINITIALIZED",
     "the runtime has not finished starting (suspended at startup?)"},
    {DS_E_INVALIDARG, "DS_IPC_E_INVALIDARG", "an argument was refused"},
    {DS_E_INSUFFICIENT_BUFFER, "DS_IPC_E_INSUFFICIENT_BUFFER", "a buffer was too small"},
    {DS_E_ENVVAR_NOT_FOUND, "DS_IPC_E_ENVVAR_NOT_FOUND", "no such environment variable"},
};

const char *ds_hresult_name(uint32_t hr) {
  for (size_t i = 0; i < sizeof hresults / sizeof hresults[0]; i++)
    if (hresults[i].hr == hr)
      return hresults[i].name;
  return NULL;
}

const char *ds_hresult_text(uint32_t hr) {
  for (size_t i = 0; i < sizeof hresults / sizeof hresults[0]; i++)
    if (hresults[i].hr == hr)
      return hresults[i].text;
  return "an error the diagnostic protocol does not name";
}

void ds_cookie_format(const uint8_t c[16], char *out, size_t cap) {
  /* a GUID's first three fields are little-endian on the wire */
  snprintf(out, cap, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           c[3], c[2], c[1], c[0], c[5], c[4], c[7], c[6], c[8], c[9], c[10], c[11], c[12],
           c[13], c[14], c[15]);
}
