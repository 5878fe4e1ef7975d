/*
 * jsonw.c - the streaming JSON writer (see jsonw.h for the text it writes
 * and why it matches jansson's).
 *
 * The buffer grows by doubling up to the cap, so a document of n bytes costs
 * O(n) copies in all (and glibc's realloc of large blocks remaps pages rather
 * than copying them).  One byte past len is always allocated, for the NUL
 * jsonw_take and jsonw_text add.
 */
#include "jsonw.h"

#include <stdlib.h>
#include <string.h>

static const char hexdig[] = "0123456789abcdef";
static const char HEXDIG[] = "0123456789ABCDEF";
/* "00" "01" ... "ff": the two lowercase digits of each byte */
#define HP4(a) #a "0" #a "1" #a "2" #a "3" #a "4" #a "5" #a "6" #a "7"
#define HP8(a) HP4(a) #a "8" #a "9" #a "a" #a "b" #a "c" #a "d" #a "e" #a "f"
static const char hex_pairs[] = HP8(0) HP8(1) HP8(2) HP8(3) HP8(4) HP8(5) HP8(6) HP8(7)
    HP8(8) HP8(9) HP8(a) HP8(b) HP8(c) HP8(d) HP8(e) HP8(f);
#undef HP8
#undef HP4

void jsonw_init(jsonw *w, size_t initial, size_t max) {
  memset(w, 0, sizeof *w);
  w->max = max ? max : SIZE_MAX - 1;
  if (initial > w->max)
    initial = w->max;
  if (initial) {
    w->buf = malloc(initial + 1);
    if (w->buf)
      w->cap = initial;
  }
}

void jsonw_init_grow(jsonw *w, size_t max, jsonw_grow_fn grow, void *ctx, char *buf,
                     size_t size) {
  memset(w, 0, sizeof *w);
  w->max = max ? max : SIZE_MAX - 1;
  w->grow = grow;
  w->grow_ctx = ctx;
  if (buf && size) {
    w->buf = buf;
    w->cap = size - 1; /* one byte is kept for the NUL */
  }
}

void jsonw_free(jsonw *w) {
  if (!w->grow)
    free(w->buf);
  w->buf = NULL;
  w->len = w->cap = 0;
}

void jsonw_reset(jsonw *w) {
  w->len = 0;
  w->err = JSONW_OK;
  w->depth = 0;
  w->more = 0;
  w->after_key = false;
}

const char *jsonw_strerror(jsonw_err e) {
  switch (e) {
  case JSONW_OK: return "no error";
  case JSONW_E_NOMEM: return "out of memory";
  case JSONW_E_LIMIT: return "the text would pass its cap";
  case JSONW_E_DEPTH: return "nested too deep";
  }
  return "unknown error";
}

char *jsonw_take(jsonw *w, size_t *len) {
  char *out = NULL;
  if (!w->err && !w->grow) {
    if (!w->buf) {
      w->buf = malloc(1);
      w->cap = 0;
    }
    if (w->buf) {
      w->buf[w->len] = '\0';
      out = w->buf;
      if (len)
        *len = w->len;
      w->buf = NULL;
    }
  }
  jsonw_free(w);
  jsonw_reset(w);
  return out;
}

const char *jsonw_text(jsonw *w, size_t *len) {
  if (w->err || !w->buf) {
    if (len)
      *len = 0;
    return "";
  }
  w->buf[w->len] = '\0';
  if (len)
    *len = w->len;
  return w->buf;
}

/* Room for n more bytes: a pointer to write them at, or NULL (the writer
 * has failed; every later write is a no-op). */
char *jsonw__grow(jsonw *w, size_t n) {
  if (w->err)
    return NULL;
  if (n > w->max - w->len) {
    w->err = JSONW_E_LIMIT;
    return NULL;
  }
  size_t need = w->len + n, ncap = w->cap ? w->cap : 256;
  if (w->grow) { /* the owner's buffer, grown by its own rule */
    char *b = w->buf;
    size_t size = w->cap ? w->cap + 1 : 0;
    if (!w->grow(w->grow_ctx, &b, &size, need + 1) || !b || size < need + 1) {
      w->err = JSONW_E_NOMEM;
      return NULL;
    }
    w->buf = b;
    w->cap = size - 1 > w->max ? w->max : size - 1;
    return w->buf + w->len;
  }
  while (ncap < need)
    ncap = ncap > w->max / 2 ? w->max : ncap * 2;
  if (ncap > w->max)
    ncap = w->max;
  char *p = realloc(w->buf, ncap + 1);
  if (!p) {
    w->err = JSONW_E_NOMEM;
    return NULL;
  }
  w->buf = p;
  w->cap = ncap;
  return w->buf + w->len;
}

#define room jsonw__room

static inline void put(jsonw *w, const char *s, size_t n) {
  char *p = room(w, n);
  if (p) {
    memcpy(p, s, n);
    w->len += n;
  }
}

static inline void put1(jsonw *w, char c) {
  char *p = room(w, 1);
  if (p) {
    *p = c;
    w->len++;
  }
}

static inline void sep(jsonw *w) {
  if (jsonw__sep(w))
    put1(w, ',');
}

/* ---- strings ---------------------------------------------------------------- */

/* 1: copied as is; 0: needs a look (escape, or the start of a multi-byte
 * sequence to check). */
static const unsigned char plain[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0),                                   /* 0x00-0x1f: control */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,   /* 0x20-0x2f: '"' */
    R16(1), R16(1),                                   /* 0x30-0x4f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,   /* 0x50-0x5f: '\\' */
    R16(1), R16(1),                                   /* 0x60-0x7f (DEL as is, as jansson) */
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), /* 0x80-0xff */
#undef R16
};

size_t jsonw_utf8_seq(const unsigned char *p, size_t n) {
  /* jansson's utf8_check_first / utf8_check_full (RFC 3629) */
  unsigned c = p[0];
  size_t len;
  uint32_t v;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    v = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    v = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    v = c & 0x07;
  } else {
    return 0; /* a continuation byte, 0xc0, 0xc1 (always overlong) or 0xf5.. */
  }
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    v = (v << 6) | (p[i] & 0x3fu);
  }
  if (len == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff)))
    return 0;
  if (len == 4 && (v < 0x10000 || v > 0x10ffff))
    return 0;
  return len;
}

/* The body of a string (no quotes).  Worst case 6 bytes per input byte
 * (\u00XX), so the room is asked for run by run, not all at once. */
/* Bytes from i on that are copied as is (jsonw_plain_span). */
static size_t plain_run(const unsigned char *s, size_t i, size_t n) {
  return jsonw_plain_span(s, i, n, plain);
}

static void put_escaped(jsonw *w, const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t run = plain_run(s, i, n);
    if (run > i) {
      put(w, (const char *)s + i, run - i);
      i = run;
      if (i >= n)
        break;
    }
    unsigned c = s[i];
    char esc[6];
    if (c >= 0x80) {
      size_t len = jsonw_utf8_seq(s + i, n - i);
      if (len) {
        put(w, (const char *)s + i, len);
        i += len;
      } else {
        put(w, "\xef\xbf\xbd", 3); /* U+FFFD for the one byte, then go on */
        i++;
      }
      continue;
    }
    esc[0] = '\\';
    switch (c) {
    case '"': esc[1] = '"'; put(w, esc, 2); break;
    case '\\': esc[1] = '\\'; put(w, esc, 2); break;
    case '\b': esc[1] = 'b'; put(w, esc, 2); break;
    case '\f': esc[1] = 'f'; put(w, esc, 2); break;
    case '\n': esc[1] = 'n'; put(w, esc, 2); break;
    case '\r': esc[1] = 'r'; put(w, esc, 2); break;
    case '\t': esc[1] = 't'; put(w, esc, 2); break;
    default:
      esc[1] = 'u';
      esc[2] = '0';
      esc[3] = '0';
      esc[4] = HEXDIG[c >> 4];
      esc[5] = HEXDIG[c & 15];
      put(w, esc, 6);
      break;
    }
    i++;
  }
}

static void put_string(jsonw *w, const char *s, size_t n) {
  put1(w, '"');
  put_escaped(w, (const unsigned char *)s, n);
  put1(w, '"');
}

void jsonw_key_str(jsonw *w, const char *s, size_t n) {
  sep(w);
  put_string(w, s, n);
  put1(w, ':');
  w->after_key = true;
}

void jsonw_strn(jsonw *w, const char *s, size_t n) {
  if (!s)
    n = 0;
  size_t c = jsonw__sep(w);
  /* the common case, a name or a path with nothing to escape: copied as it
   * is checked, eight bytes at a time (plain_run's test), into room asked
   * for once (an escaped string is longer, so it needs that room too) */
  char *p = room(w, c + n + 2);
  if (!p)
    return;
  p[0] = ',';
  char *q = p + c + 1;
  q[-1] = '"';
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
#ifdef JSONW_SSE2
  while (n - i >= 16) { /* copied as it is checked, sixteen bytes at a time */
    if (jsonw_plain_flags16(u + i))
      break;
    memcpy(q + i, u + i, 16);
    i += 16;
  }
#endif
  while (n - i >= 8) { /* copied as it is checked */
    uint64_t x;
    memcpy(&x, u + i, 8);
    if (jsonw_plain_flags(x))
      break;
    memcpy(q + i, &x, 8);
    i += 8;
  }
  while (i < n && plain[u[i]]) {
    q[i] = (char)u[i];
    i++;
  }
  if (i == n) {
    q[n] = '"';
    w->len += c + n + 2;
    return;
  }
  w->len += c; /* the comma stays; the string is written escaped */
  put_string(w, s, n);
}

void jsonw_str(jsonw *w, const char *s) { jsonw_strn(w, s, s ? strlen(s) : 0); }

char *jsonw_raw_str(char *p, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  *p++ = '"';
#ifdef JSONW_SSE2
  while (n - i >= 16) {
    if (jsonw_plain_flags16(u + i))
      break;
    memcpy(p, u + i, 16);
    p += 16;
    i += 16;
  }
#endif
  while (n - i >= 8) {
    uint64_t x;
    memcpy(&x, u + i, 8);
    if (jsonw_plain_flags(x))
      break;
    memcpy(p, &x, 8);
    p += 8;
    i += 8;
  }
  for (; i < n; i++) { /* from the first byte that may not stand for itself */
    unsigned c = u[i];
    if (plain[c]) {
      *p++ = (char)c;
    } else if (c == '"' || c == '\\') { /* a Windows path's separators */
      p[0] = '\\';
      p[1] = (char)c;
      p += 2;
    } else {
      return NULL;
    }
  }
  *p++ = '"';
  return p;
}

/* ---- numbers and literals --------------------------------------------------- */

/* Decimal digits of v. */
static inline unsigned ndigits(uint64_t v) {
  unsigned n = 1;
  while (v >= 10000) {
    v /= 10000;
    n += 4;
  }
  return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

static const char two_digits[] = "00010203040506070809101112131415161718192021222324"
                                 "25262728293031323334353637383940414243444546474849"
                                 "50515253545556575859606162636465666768697071727374"
                                 "75767778798081828384858687888990919293949596979899";

/* The decimal digits of v written from end backwards (end - ndigits(v) is
 * where they start). */
static inline void digits_before(char *end, uint64_t v) {
  char *q = end;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    q -= 2;
    memcpy(q, two_digits + 2 * r, 2);
  }
  if (v >= 10) {
    q -= 2;
    memcpy(q, two_digits + 2 * v, 2);
  } else {
    *--q = (char)('0' + v);
  }
}

char *jsonw_raw_uint(char *p, uint64_t v) {
  unsigned d = ndigits(v);
  digits_before(p + d, v);
  return p + d;
}

/* The separator (if due), a sign, the digits: written in place, two digits
 * at a time. */
static void put_u64(jsonw *w, uint64_t v, bool neg) {
  size_t c = jsonw__sep(w), d = ndigits(v), n = c + neg + d;
  char *p = room(w, n);
  if (!p)
    return;
  p[0] = ',';
  p[c] = '-';
  digits_before(p + n, v);
  w->len += n;
}

void jsonw_int(jsonw *w, int64_t v) {
  if (v < 0)
    put_u64(w, (uint64_t)0 - (uint64_t)v, true);
  else
    put_u64(w, (uint64_t)v, false);
}

void jsonw_uint(jsonw *w, uint64_t v) { put_u64(w, v, false); }

/* digits hex digits of v (the lowest), before end. */
static inline void hex_before(char *end, uint64_t v, unsigned digits) {
  char *q = end;
  unsigned i = digits;
  for (; i >= 2; i -= 2) { /* two digits a step */
    q -= 2;
    memcpy(q, hex_pairs + 2 * (v & 0xff), 2);
    v >>= 8;
  }
  if (i)
    *--q = hexdig[v & 15];
}

static inline unsigned hex_digits(uint64_t v) {
  return v ? (unsigned)(67 - __builtin_clzll(v)) / 4 : 1; /* (bits + 3) / 4 */
}

static inline char *raw_hex(char *p, uint64_t v, int width) {
  unsigned d = hex_digits(v);
  if (width > 16)
    width = 16;
  if (width > 0 && (unsigned)width > d)
    d = (unsigned)width;
  p[0] = '"';
  p[1] = '0';
  p[2] = 'x';
  hex_before(p + 3 + d, v, d);
  p[3 + d] = '"';
  return p + 4 + d;
}

char *jsonw_raw_hex(char *p, uint64_t v) { return raw_hex(p, v, 0); }
char *jsonw_raw_hexw(char *p, uint64_t v, int width) { return raw_hex(p, v, width); }

void jsonw_hex(jsonw *w, uint64_t v, int width) {
  unsigned digits = hex_digits(v);
  if (width > 16)
    width = 16;
  if (width > 0 && (unsigned)width > digits)
    digits = (unsigned)width;
  size_t c = jsonw__sep(w), n = c + 4 + digits; /* "0x...": quotes and prefix */
  char *p = room(w, n);
  if (!p)
    return;
  p[0] = ',';
  p[c] = '"';
  p[c + 1] = '0';
  p[c + 2] = 'x';
  p[n - 1] = '"';
  hex_before(p + n - 1, v, digits);
  w->len += n;
}

void jsonw_bool(jsonw *w, bool v) {
  sep(w);
  if (v)
    put(w, "true", 4);
  else
    put(w, "false", 5);
}

void jsonw_null(jsonw *w) {
  sep(w);
  put(w, "null", 4);
}
