/*
 * jsonw.h - a streaming JSON writer: a document written straight into one
 * growing buffer, with a cap on its size, for the service's answers and the
 * CLI's lines (render.h).  No tree is built and nothing is allocated per
 * value; commas are placed by the writer.
 *
 * The text is what jansson's json_dumps(JSON_COMPACT) prints for the same
 * values (tests/unit/test_jsonw.c checks it against jansson on a large set of
 * generated strings), so answers kept their bytes when render.c moved from
 * jansson objects to this writer:
 *   - strings: '"' and '\' escaped, \b \f \n \r \t, other bytes below 0x20
 *     as \u00XX (uppercase hex); everything else as is (no \/, DEL and
 *     non-ASCII unescaped).  Bytes that are not UTF-8 as jansson accepts it
 *     (no overlong forms, no surrogates, nothing past U+10FFFF) become
 *     U+FFFD, one per byte that does not start a valid sequence, the way
 *     render.c always sanitized names read from files;
 *   - integers in decimal, hex strings "0x1a2b" (lowercase digits, optionally
 *     zero-padded), true, false, null.
 *
 * Bounded: a writer is created with max, the most bytes its text may hold;
 * a write that would pass it fails the writer with JSONW_E_LIMIT.  Errors are
 * sticky (curl's dynbuf and Redis's rio habit): after the first, every write
 * is a no-op and jsonw_error() says why, so a renderer checks once at the end.
 *
 * Ownership: the writer owns its buffer until jsonw_take hands it to the
 * caller (malloc'd, NUL-terminated, freed with free()); jsonw_free releases
 * whatever is left.  A writer made with jsonw_init_grow does not own its
 * buffer: the grow function's owner does (a buffer in a memory budget), and
 * jsonw_free only forgets it.  Not thread-safe: one writer per thread.
 */
#ifndef PDBSYM_JSONW_H
#define PDBSYM_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { JSONW_OK = 0, JSONW_E_NOMEM, JSONW_E_LIMIT, JSONW_E_DEPTH } jsonw_err;

#define JSONW_MAX_DEPTH 64

/* Grows a buffer the writer does not own: *buf must afterwards hold at least
 * need bytes (the text so far kept), *size its new size.  false: it could
 * not (the writer fails with JSONW_E_NOMEM; the owner knows why). */
typedef bool (*jsonw_grow_fn)(void *ctx, char **buf, size_t *size, size_t need);

typedef struct {
  char *buf;
  size_t len, cap; /* bytes written, bytes allocated (one more is kept for the NUL) */
  jsonw_grow_fn grow; /* NULL: the writer's own malloc'd buffer */
  void *grow_ctx;
  size_t max;      /* the text may not pass this many bytes */
  jsonw_err err;
  unsigned depth;
  uint64_t more;   /* bit 0: the open container has a member already (a comma goes first) */
  bool after_key;  /* a key was written: the next value takes no comma */
} jsonw;

/* initial: bytes to allocate up front (0: none until the first write; it is
 * clamped to max); max: the cap (0: SIZE_MAX - 1). */
void jsonw_init(jsonw *w, size_t initial, size_t max);
/* A writer whose buffer is grown by grow(ctx, ...) (borrowed: it must
 * outlive the writer), starting from buf (NULL or size bytes the owner
 * holds).  max as for jsonw_init.  jsonw_text ends the text with its NUL;
 * jsonw_take is not for these writers (it returns NULL). */
void jsonw_init_grow(jsonw *w, size_t max, jsonw_grow_fn grow, void *ctx, char *buf, size_t size);
void jsonw_free(jsonw *w);
/* Empties the writer for a new document, keeping its buffer. */
void jsonw_reset(jsonw *w);

/* The text (NUL-terminated, *len without the NUL) handed to the caller, who
 * frees it; the writer is left empty.  NULL when the writer failed (the
 * buffer is freed) or when out of memory. */
char *jsonw_take(jsonw *w, size_t *len);
/* The text so far, borrowed (NUL-terminated; "" after an error). */
const char *jsonw_text(jsonw *w, size_t *len);

static inline jsonw_err jsonw_error(const jsonw *w) { return w->err; }
const char *jsonw_strerror(jsonw_err e);

/* { } [ ]: inline below */
static inline void jsonw_obj(jsonw *w);
static inline void jsonw_obj_end(jsonw *w);
static inline void jsonw_arr(jsonw *w);
static inline void jsonw_arr_end(jsonw *w);

/* A member's key.  jsonw_key is for keys the program spells (literals of
 * ASCII letters, digits and '_': written without escaping); jsonw_key_str for
 * keys from data (escaped and sanitized as strings are). */
#define jsonw_key(w, lit) jsonw_keyn((w), "" lit "", sizeof(lit) - 1)
void jsonw_key_str(jsonw *w, const char *s, size_t n);

/* Values.  jsonw_str(NULL) writes "". */
void jsonw_str(jsonw *w, const char *s);
void jsonw_strn(jsonw *w, const char *s, size_t n);
void jsonw_int(jsonw *w, int64_t v);
void jsonw_uint(jsonw *w, uint64_t v);
/* "0x1a2b"; width > 0 pads with zeros to that many digits ("0x06000001"). */
void jsonw_hex(jsonw *w, uint64_t v, int width);
void jsonw_bool(jsonw *w, bool v);
void jsonw_null(jsonw *w);

/* ---- the fast path, inline: an answer writes a dozen keys per frame ------- */

/* Room for n more bytes, or NULL once the writer has failed (jsonw.c). */
char *jsonw__grow(jsonw *w, size_t n);

static inline char *jsonw__room(jsonw *w, size_t n) {
  if (w->cap - w->len >= n && !w->err)
    return w->buf + w->len;
  return jsonw__grow(w, n);
}

/* Before a value or a key: the comma, unless the value follows its key.
 * Returns whether a comma is due (the caller writes it with what follows). */
static inline size_t jsonw__sep(jsonw *w) {
  if (w->after_key) {
    w->after_key = false;
    return 0;
  }
  size_t comma = (size_t)(w->more & 1);
  w->more |= 1;
  return comma;
}

/* The separator a key takes, then text (in quotes when quote), then ':'.
 * quote is a constant at each caller, so the writes fold to one copy. */
static inline void jsonw__key_text(jsonw *w, const char *text, size_t n, bool quote) {
  size_t c = jsonw__sep(w), q = quote, len = n + 1 + 2 * q + c;
  char *p = jsonw__room(w, len);
  if (!p)
    return;
  p[0] = ',';
  p += c;
  p[0] = '"';
  memcpy(p + q, text, n); /* n is a constant for jsonw_key: no call */
  p[q + n] = '"';
  p[q + n + q] = ':';
  w->len += len;
  w->after_key = true;
}

static inline void jsonw_keyn(jsonw *w, const char *key, size_t n) {
  jsonw__key_text(w, key, n, true);
}

/* Whole members the program spells, then a key: lit is a literal such as
 * "\"status\":\"ok\",\"module\"" (keys and values that need no escaping),
 * written as it stands with the separator a key takes and the key's ':'; the
 * next value follows it.  One copy where a frame's fixed members would be
 * several writes. */
#define jsonw_members_key(w, lit) jsonw__key_text((w), "" lit "", sizeof(lit) - 1, false)

/* Opening and closing containers (a comma first when one is due); nesting
 * past JSONW_MAX_DEPTH, or a close with nothing open, fails the writer. */
static inline void jsonw__open(jsonw *w, char c) {
  size_t comma = jsonw__sep(w);
  if (w->depth + 1 >= JSONW_MAX_DEPTH) {
    if (!w->err)
      w->err = JSONW_E_DEPTH;
    return;
  }
  char *p = jsonw__room(w, 1 + comma);
  if (p) {
    p[0] = ',';
    p[comma] = c;
    w->len += 1 + comma;
  }
  w->depth++;
  w->more <<= 1;
}

static inline void jsonw__close(jsonw *w, char c) {
  if (w->depth == 0) {
    if (!w->err)
      w->err = JSONW_E_DEPTH;
    return;
  }
  char *p = jsonw__room(w, 1);
  if (p) {
    *p = c;
    w->len++;
  }
  w->depth--;
  w->more >>= 1;
  w->after_key = false;
}

static inline void jsonw_obj(jsonw *w) { jsonw__open(w, '{'); }
static inline void jsonw_obj_end(jsonw *w) { jsonw__close(w, '}'); }
static inline void jsonw_arr(jsonw *w) { jsonw__open(w, '['); }
static inline void jsonw_arr_end(jsonw *w) { jsonw__close(w, ']'); }

/* ---- raw writes, for a renderer that checked its room once --------------
 * (w->cap - w->len, render.c's one-pass symbols).  Each writes at p, which
 * must have the room, and returns the end; the writer's length and state are
 * the caller's to update.  jsonw_raw_str writes s quoted, '"' and
 * '\\' escaped, or returns NULL when s holds a control byte or one from 0x80
 * (the caller then writes the string the usual way); at most 2n + 2 bytes.
 * jsonw_raw_uint: at most 20 bytes; jsonw_raw_hex "0x..." quoted, at most 20. */
char *jsonw_raw_str(char *p, const char *s, size_t n);
/* A literal the program spells (no byte to escape) at p; returns the end. */
#define jsonw_raw_lit(p, lit) (memcpy((p), "" lit "", sizeof(lit) - 1), (p) + sizeof(lit) - 1)

/* A whole value of the open array written raw: where it starts (after the
 * comma, if one is due), or NULL when the writer has failed, a key is
 * waiting for its value, the value's levels of nesting would pass
 * JSONW_MAX_DEPTH, or the buffer does not have room for need bytes (the
 * comma included) at hand within its cap: asking for more room than the
 * text needs must not fail a writer near its cap or its budget, so the
 * caller then writes the value the usual way.  jsonw_raw_end(w, end)
 * keeps what was written up to end; a caller that gives up before it
 * has written nothing the writer keeps. */
static inline char *jsonw_raw_begin(jsonw *w, size_t need, unsigned levels) {
  if (w->err || w->after_key || w->depth + levels >= JSONW_MAX_DEPTH || w->cap - w->len < need ||
      w->max - w->len < need)
    return NULL;
  char *p = w->buf + w->len;
  if (w->more & 1)
    *p++ = ',';
  return p;
}

static inline void jsonw_raw_end(jsonw *w, char *end) {
  w->len = (size_t)(end - w->buf);
  w->more |= 1;
}
char *jsonw_raw_uint(char *p, uint64_t v);
char *jsonw_raw_hex(char *p, uint64_t v);
/* jsonw_raw_hex zero-padded to width digits (at most 16), as jsonw_hex. */
char *jsonw_raw_hexw(char *p, uint64_t v, int width);

/* Helpers for the sanitizing rule alone (no writer): the length of the
 * valid UTF-8 sequence at p (1..4, as jansson accepts it), or 0 when the
 * byte there does not start one; n bytes are available. */
size_t jsonw_utf8_seq(const unsigned char *p, size_t n);

/* ---- plain runs, eight bytes at a time (for this writer and jwalk.c) ------
 * A byte of a JSON string that is neither below 0x20, '"', '\\' nor 0x80 and
 * above stands for itself (DEL included), in a string written and in one
 * read.  The usual bit trick ("determine if a word has a byte less than n")
 * flags the words that hold another byte: the lowest such byte sets its high
 * bit in the mask (a borrow only runs upwards, so bytes below it are clean),
 * bytes above it may be flagged wrongly. */

/* The mask of the 8 bytes x (as loaded with memcpy): 0 when all stand for
 * themselves. */
static inline uint64_t jsonw_plain_flags(uint64_t x) {
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
  return ((x - ones * 0x20) | (q - ones) | (b - ones) | x) & highs;
}

/* The same test sixteen bytes at a time where SSE2 is there (every x86-64):
 * a signed compare below 0x20 flags the control bytes and, being negative,
 * every byte from 0x80 at once.  Bit k of the result is set when byte k of
 * the 16 at p does not stand for itself (exact, unlike the word test). */
#if defined(__SSE2__) && !defined(JSONW_NO_SIMD)
#define JSONW_SSE2 1
#include <emmintrin.h>
static inline unsigned jsonw_plain_flags16(const unsigned char *p) {
  __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i bad = _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                             _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                          _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
  return (unsigned)_mm_movemask_epi8(bad);
}
#endif

/* The end of the run of bytes from i (at most n) that stand for themselves:
 * eight at a time while whole words are clean, the word's first byte that
 * is not found exactly (on a big-endian machine: from that word's start,
 * byte by byte), and the last fewer than 8 bytes byte by byte with the
 * caller's table (plain[b] nonzero: b stands for itself), which must hold
 * every byte the word test passes but may hold fewer (jwalk.c's leaves out
 * DEL; the run then ends at a DEL only among the last bytes, which is safe:
 * a run that ends early only sends its reader the slow way). */
static inline size_t jsonw_plain_span(const unsigned char *s, size_t i, size_t n,
                                      const unsigned char plain[256]) {
#ifdef JSONW_SSE2
  while (n - i >= 16) {
    unsigned bad = jsonw_plain_flags16(s + i);
    if (bad)
      return i + (unsigned)__builtin_ctz(bad);
    i += 16;
  }
#endif
  while (n - i >= 8) {
    uint64_t x;
    memcpy(&x, s + i, 8);
    uint64_t bad = jsonw_plain_flags(x);
    if (bad) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return i + ((unsigned)__builtin_ctzll(bad) >> 3);
#else
      break;
#endif
    }
    i += 8;
  }
  while (i < n && plain[s[i]])
    i++;
  return i;
}

#endif
