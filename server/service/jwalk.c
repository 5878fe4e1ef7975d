/*
 * jwalk.c - a JSON text read a piece at a time (jwalk.h).
 *
 * Three layers:
 *   1. lex(): one token as jansson 2.14's lexer reads it (load.c, lex_scan):
 *      its kind, its extent, the text jansson keeps for the "near '...'" of
 *      its messages, and the error the lexer itself sets on the way (a bad
 *      escape, a control character, bytes that are not UTF-8, an integer
 *      too big).  jansson reads its input a byte at a time and gives back
 *      the byte after a number or a literal; every rule below that names a
 *      position is how far jansson has read at that moment.
 *   2. the walk (jw_object_next, jw_array_next, jw_skip, jw_scalar): the
 *      walker reads whitespace and the punctuation of the containers it
 *      walks itself, and every key or scalar as json_loadb would read that
 *      value alone (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK: one value,
 *      then stop), which is how the walk read them before it had a lexer of
 *      its own, so its errors are worded as they were.
 *   3. a piece (jw_piece): one value read as json_loadb reads it, with
 *      jansson's parser rules (load.c, parse_value / parse_object /
 *      parse_array): its depth counted from the piece, its words for a
 *      wrong token, the first error kept (a lexer error wins over the
 *      parser's), and a raw NUL byte right after a number or literal
 *      dropped - jansson gives that byte back to its stream, which then
 *      takes a NUL in its look-ahead buffer for "nothing buffered" and reads
 *      on, so the NUL is gone and the positions after it count one byte
 *      less.  The cursor after the piece is where json_loadb's position
 *      says, as before.
 *
 * The duplicate check keeps the keys of every open object in one array
 * (w->keys; a level's keys are the top of it, as levels close in order):
 * compared one by one while the object has up to JW_LINEAR_KEYS of them,
 * through a hash index of the level's own past that.
 *
 * Every buffer of the walker is an rm_buf reserved from its grant
 * (reqmem.h): a reservation refused (or malloc failing) fails the walk with
 * w->budget set.
 */
#include "jwalk.h"

#include "jsonw.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jw_level {
  char kind;         /* '{' or '[' */
  size_t count;      /* members or elements begun */
  size_t key_first;  /* objects: its keys are w->keys[key_first..] */
  size_t arena_mark; /* w->arena.len when it opened */
  rm_buf index;      /* past JW_LINEAR_KEYS keys: size_t slots holding key index + 1 */
  size_t index_cap;  /* slots in use there: a power of two */
};

struct jw_key {
  size_t off, len; /* the decoded key: in the text, or in the arena */
  uint32_t hash;
  bool in_arena;
};

/* ---- tokens ---------------------------------------------------------------------- */

/* kinds: punctuation is its own character; EOF 0 as in jansson */
enum { T_EOF = 0, T_INVALID = 1, T_STRING = 256, T_INTEGER, T_REAL, T_TRUE, T_FALSE, T_NULL };

/* the lexer's own errors (jansson's words in err_text) */
enum { E_NONE, E_UTF8, E_PREMATURE, E_NEWLINE, E_CONTROL, E_ESCAPE, E_UNI1, E_UNI2, E_BIGINT, E_BIGNEG, E_REAL };

typedef struct {
  int kind;
  size_t start, end; /* the token: [start, end); also jansson's text for "near" */
  bool escaped;      /* a string with a backslash in it */
  bool nul;          /* a string that decodes to a NUL byte (\u0000) */
  int64_t i;
  double d;
  int err;           /* E_*: set while lexing (the token may still be good) */
  unsigned ea, eb;   /* its byte or code points */
  size_t epos;       /* how far jansson had read then */
  size_t ectx;       /* its "near" text: [start, ectx) */
} jtok;

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define IS_XDIGIT(c) (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F'))

static bool good_kind(int kind) { return kind >= T_STRING; }

/* The length of the UTF-8 sequence at s[i], as jansson's stream accepts it
 * (utf8_check_first, utf8_check_full: the shortest form, no UTF-16
 * surrogates, at most U+10FFFF; cut short by the end of the text it is
 * bad), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t i) {
  unsigned c = s[i];
  size_t k;
  uint32_t v;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    k = 2, v = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    k = 3, v = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    k = 4, v = c & 0x07;
  else
    return 0;
  if (k > n - i)
    return 0;
  for (size_t j = 1; j < k; j++) {
    unsigned b = s[i + j];
    if (b < 0x80 || b > 0xbf)
      return 0;
    v = (v << 6) | (b & 0x3f);
  }
  if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) || (k == 3 && v < 0x800) || (k == 4 && v < 0x10000))
    return 0;
  return k;
}

static void set_err(jtok *t, int err, unsigned a, unsigned b, size_t pos, size_t ctx) {
  if (t->err)
    return; /* jansson keeps the first error */
  t->err = err;
  t->ea = a;
  t->eb = b;
  t->epos = pos;
  t->ectx = ctx;
}

/* The byte jansson's stream gives at p: -1 past the end; -2 (with the
 * error set, its "near" text what the token has so far) for the start of a
 * sequence that is not UTF-8. */
static int get(const unsigned char *s, size_t n, size_t p, jtok *t) {
  if (p >= n)
    return -1;
  if (s[p] >= 0x80 && !utf8_seq(s, n, p)) {
    set_err(t, E_UTF8, s[p], 0, p, p);
    return -2;
  }
  return s[p];
}

static unsigned hex4(const unsigned char *p) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i];
    v = (v << 4) | (IS_DIGIT(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

/* A string from its opening quote at t->start: lex_scan_string's first
 * pass (escapes, control characters, UTF-8) and its second (code points:
 * surrogate pairs), whose first problem is reported only when the first
 * pass found none. */
static void lex_string(const unsigned char *s, size_t n, jtok *t) {
  size_t p = t->start + 1;
  bool uni_err = false;
  bool low_half = false; /* the \u escape at p is the second half of a pair */
  unsigned ua = 0, ub = 0;
  int uk = 0;
  t->kind = T_INVALID;
  for (;;) {
    if (p >= n) {
      set_err(t, E_PREMATURE, 0, 0, n, n);
      return;
    }
    unsigned c = s[p];
    if (c == '"')
      break;
    if (c < 0x20) {
      set_err(t, c == '\n' ? E_NEWLINE : E_CONTROL, c, 0, p, p);
      return;
    }
    if (c == '\\') {
      t->escaped = true;
      int e = get(s, n, p + 1, t);
      if (e == -2)
        return;
      if (e == 'u') {
        for (size_t q = p + 2; q < p + 6; q++) {
          int h = get(s, n, q, t);
          if (h == -2)
            return;
          if (h < 0 || !IS_XDIGIT(h)) {
            size_t at = h < 0 ? q : q + 1;
            set_err(t, E_ESCAPE, 0, 0, at, at);
            return;
          }
        }
        unsigned v = hex4(s + p + 2);
        if (low_half) {
          low_half = false;
        } else if (!uni_err && v >= 0xd800 && v <= 0xdbff) {
          /* a pair when "\u" follows; the first pass checks those four
           * digits when it gets there */
          if (p + 11 < n && s[p + 6] == '\\' && s[p + 7] == 'u' && IS_XDIGIT(s[p + 8]) &&
              IS_XDIGIT(s[p + 9]) && IS_XDIGIT(s[p + 10]) && IS_XDIGIT(s[p + 11])) {
            unsigned v2 = hex4(s + p + 8);
            if (v2 >= 0xdc00 && v2 <= 0xdfff)
              low_half = true;
            else
              uni_err = true, uk = 2, ua = v, ub = v2;
          } else if (!(p + 7 < n && s[p + 6] == '\\' && s[p + 7] == 'u')) {
            uni_err = true, uk = 1, ua = v;
          }
          /* else "\u" and not four hex digits: the first pass refuses it */
        } else if (!uni_err && v >= 0xdc00 && v <= 0xdfff) {
          uni_err = true, uk = 1, ua = v;
        } else if (v == 0) {
          t->nul = true;
        }
        p += 6;
      } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                 e == 't') {
        p += 2;
      } else {
        size_t at = e < 0 ? p + 1 : p + 2;
        set_err(t, E_ESCAPE, 0, 0, at, at);
        return;
      }
      continue;
    }
    if (c >= 0x80) {
      size_t k = utf8_seq(s, n, p);
      if (!k) {
        set_err(t, E_UTF8, c, 0, p, p);
        return;
      }
      p += k;
      continue;
    }
    p++;
  }
  t->end = p + 1;
  if (uni_err) {
    set_err(t, uk == 1 ? E_UNI1 : E_UNI2, ua, ub, t->end, t->end);
    return;
  }
  t->kind = T_STRING;
}

/* A number from its first byte ('-' or a digit): lex_scan_number.  A real's
 * value needs strtod on a NUL-terminated copy (w->scratch); false only when
 * that copy cannot be had. */
static bool lex_number(jwalk *w, const unsigned char *s, size_t n, jtok *t) {
  size_t p = t->start;
  bool neg = s[p] == '-';
  t->kind = T_INVALID;
  if (neg)
    p++;
  int c = get(s, n, p, t);
  if (c == '0') {
    c = get(s, n, ++p, t);
    if (IS_DIGIT(c)) { /* a leading zero: "0" is the token, and invalid */
      t->end = p;
      return true;
    }
  } else if (IS_DIGIT(c)) {
    do
      c = get(s, n, ++p, t);
    while (IS_DIGIT(c));
  } else {
    t->end = p;
    return true;
  }
  if (c != '.' && c != 'e' && c != 'E') {
    t->end = p;
    size_t d0 = t->start + neg, nd = p - d0;
    uint64_t u = 0;
    for (size_t i = d0; i < p && nd <= 19; i++)
      u = u * 10 + (uint64_t)(s[i] - '0');
    if (nd > 19 || (!neg && u > (uint64_t)INT64_MAX) || (neg && u > (uint64_t)INT64_MAX + 1)) {
      set_err(t, neg ? E_BIGNEG : E_BIGINT, 0, 0, p, p);
      return true;
    }
    t->i = neg ? (int64_t)(0 - u) : (int64_t)u;
    t->kind = T_INTEGER;
    return true;
  }
  if (c == '.') {
    c = get(s, n, ++p, t);
    if (!IS_DIGIT(c)) {
      t->end = p;
      return true;
    }
    do
      c = get(s, n, ++p, t);
    while (IS_DIGIT(c));
  }
  if (c == 'e' || c == 'E') {
    c = get(s, n, ++p, t);
    if (c == '+' || c == '-')
      c = get(s, n, ++p, t);
    if (!IS_DIGIT(c)) {
      t->end = p;
      return true;
    }
    do
      c = get(s, n, ++p, t);
    while (IS_DIGIT(c));
  }
  t->end = p;
  size_t len = p - t->start;
  if (!rm_buf_reserve(&w->scratch, len + 1))
    return false;
  memcpy(w->scratch.p, s + t->start, len);
  w->scratch.p[len] = '\0';
  errno = 0;
  double d = strtod(w->scratch.p, NULL);
  if ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE) {
    set_err(t, E_REAL, 0, 0, p, p);
    return true;
  }
  t->d = d;
  t->kind = T_REAL;
  return true;
}

/* The token at off (whitespace already passed).  false: out of memory. */
static bool lex(jwalk *w, size_t off, jtok *t) {
  const unsigned char *s = (const unsigned char *)w->s;
  size_t n = w->n;
  t->start = t->end = off;
  t->err = E_NONE;
  t->escaped = t->nul = false;
  if (off >= n) {
    t->kind = T_EOF;
    return true;
  }
  unsigned c = s[off];
  switch (c) {
  case '{': case '}': case '[': case ']': case ',': case ':':
    t->kind = (int)c;
    t->end = off + 1;
    return true;
  case '"':
    lex_string(s, n, t);
    return true;
  default:
    break;
  }
  if (c == '-' || IS_DIGIT(c))
    return lex_number(w, s, n, t);
  if (IS_ALPHA(c)) {
    size_t p = off;
    int e;
    do
      e = get(s, n, ++p, t);
    while (IS_ALPHA(e));
    t->end = p;
    size_t len = p - off;
    const char *id = w->s + off;
    t->kind = len == 4 && !memcmp(id, "true", 4)    ? T_TRUE
              : len == 5 && !memcmp(id, "false", 5) ? T_FALSE
              : len == 4 && !memcmp(id, "null", 4)  ? T_NULL
                                                    : T_INVALID;
    return true;
  }
  t->kind = T_INVALID;
  if (c >= 0x80) {
    size_t k = utf8_seq(s, n, off);
    if (!k)
      set_err(t, E_UTF8, c, 0, off, off);
    t->end = off + k;
    return true;
  }
  t->end = off + 1; /* a control character, a NUL, any other byte */
  return true;
}

/* A string token's decoded bytes into out (room for end - start bytes). */
static size_t decode(const unsigned char *s, const jtok *t, char *out) {
  size_t p = t->start + 1, e = t->end - 1;
  char *o = out;
  while (p < e) {
    unsigned c = s[p];
    if (c != '\\') {
      *o++ = (char)c;
      p++;
      continue;
    }
    c = s[p + 1];
    if (c != 'u') {
      static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
      *o++ = to[strchr(from, (int)c) - from];
      p += 2;
      continue;
    }
    uint32_t v = hex4(s + p + 2);
    p += 6;
    if (v >= 0xd800 && v <= 0xdbff) {
      v = 0x10000 + ((v - 0xd800) << 10) + (hex4(s + p + 2) - 0xdc00);
      p += 6;
    }
    if (v < 0x80) {
      *o++ = (char)v;
    } else if (v < 0x800) {
      *o++ = (char)(0xc0 | (v >> 6));
      *o++ = (char)(0x80 | (v & 0x3f));
    } else if (v < 0x10000) {
      *o++ = (char)(0xe0 | (v >> 12));
      *o++ = (char)(0x80 | ((v >> 6) & 0x3f));
      *o++ = (char)(0x80 | (v & 0x3f));
    } else {
      *o++ = (char)(0xf0 | (v >> 18));
      *o++ = (char)(0x80 | ((v >> 12) & 0x3f));
      *o++ = (char)(0x80 | ((v >> 6) & 0x3f));
      *o++ = (char)(0x80 | (v & 0x3f));
    }
  }
  return (size_t)(o - out);
}

/* ---- messages -------------------------------------------------------------------- */

/* line and column of a byte offset, counted as jansson counts them (a column
 * is a character: UTF-8 continuation bytes do not count) */
static void where(const jwalk *w, size_t off, int *line, int *col) {
  int l = 1, c = 0;
  if (off > w->n)
    off = w->n;
  for (size_t i = 0; i < off; i++) {
    unsigned char b = (unsigned char)w->s[i];
    if (b == '\n') {
      l++;
      c = 0;
    } else if ((b & 0xc0) != 0x80) {
      c++;
    }
  }
  *line = l;
  *col = c;
}

/* msg with jansson's context (load.c, error_set): "near 'TEXT'" for a text
 * of 20 bytes or fewer (printed up to a NUL in it), nothing for a longer
 * one, "near end of file" for none (or one that starts with a NUL) unless
 * the stream itself failed. */
static void jansson_text(const jwalk *w, char *out, size_t cap, const char *msg, size_t from, size_t to,
                         bool stream_failed) {
  size_t len = to - from;
  if (len && w->s[from]) {
    if (len <= 20)
      snprintf(out, cap, "%s near '%.*s'", msg, (int)strnlen(w->s + from, len), w->s + from);
    else
      snprintf(out, cap, "%s", msg);
  } else if (stream_failed) {
    snprintf(out, cap, "%s", msg);
  } else {
    snprintf(out, cap, "%s near end of file", msg);
  }
}

/* The lexer's error of t in jansson's words, context included. */
static void err_text(const jwalk *w, const jtok *t, char *out, size_t cap) {
  char m[64];
  switch (t->err) {
  case E_UTF8: snprintf(m, sizeof m, "unable to decode byte 0x%x", t->ea); break;
  case E_PREMATURE: snprintf(m, sizeof m, "premature end of input"); break;
  case E_NEWLINE: snprintf(m, sizeof m, "unexpected newline"); break;
  case E_CONTROL: snprintf(m, sizeof m, "control character 0x%x", t->ea); break;
  case E_ESCAPE: snprintf(m, sizeof m, "invalid escape"); break;
  case E_UNI1: snprintf(m, sizeof m, "invalid Unicode '\\u%04X'", t->ea); break;
  case E_UNI2: snprintf(m, sizeof m, "invalid Unicode '\\u%04X\\u%04X'", t->ea, t->eb); break;
  case E_BIGINT: snprintf(m, sizeof m, "too big integer"); break;
  case E_BIGNEG: snprintf(m, sizeof m, "too big negative integer"); break;
  default: snprintf(m, sizeof m, "real number overflow"); break;
  }
  jansson_text(w, out, cap, m, t->start, t->ectx, t->err == E_UTF8);
}

/* The walk's error: TEXT (line L, column C) at the byte offset at. */
static bool fail_text(jwalk *w, const char *text, size_t at) {
  if (w->failed)
    return false;
  w->failed = true;
  int line, col;
  where(w, at, &line, &col);
  snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", text, line, col);
  return false;
}

/* A reservation refused by the budget, or malloc failing: the caller
 * answers 503 (w->budget), not 400. */
static bool out_of_memory(jwalk *w) {
  if (!w->failed)
    w->budget = true;
  return fail_text(w, "out of memory", w->pos);
}

/* What json_loadb (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK) makes of the
 * scalar t read alone: true and t good, or false with its error text and
 * position.  (A good number or literal that the lexer ended on bytes that
 * are not UTF-8 is good: json_loadb returns it, the error unseen.) */
static bool load_verdict(const jwalk *w, const jtok *t, char *text, size_t cap, size_t *at) {
  const char *what = NULL;
  if (t->err && !good_kind(t->kind)) {
    err_text(w, t, text, cap);
    *at = t->epos;
    return false;
  }
  if (t->kind == T_INVALID)
    what = "invalid token";
  else if (!good_kind(t->kind))
    what = "unexpected token";
  else if (t->kind == T_STRING && t->nul)
    what = "\\u0000 is not allowed without JSON_ALLOW_NUL";
  if (!what)
    return true;
  jansson_text(w, text, cap, what, t->start, t->end, false);
  *at = t->end;
  return false;
}

/* "WHAT near 'TOKEN' (line L, column C)" as a whole-text json_loadb words
 * it: the token is what jansson's lexer reads at off (a one-character
 * punctuation, a value, or the text of an invalid token), named when it is
 * 20 bytes or shorter, "end of file" past the text; the position is that of
 * the token's last character.  When reading the token alone fails for
 * another reason than an invalid token (a string without its closing quote,
 * a control character, bytes that are not UTF-8, a number too big), that
 * error is the one reported, as json_loadb reports it. */
static bool fail_at(jwalk *w, size_t off, const char *what) {
  if (w->failed)
    return false;
  char text[200];
  if (off >= w->n) {
    snprintf(text, sizeof text, "%s near end of file", what);
    return fail_text(w, text, off);
  }
  size_t k = 1;
  char c = w->s[off];
  if (!c || !strchr("{}[],:", c)) {
    jtok t;
    if (!lex(w, off, &t))
      return out_of_memory(w);
    size_t at;
    if (load_verdict(w, &t, text, sizeof text, &at) || (!t.err && t.kind == T_INVALID)) {
      k = t.end - off;
    } else {
      if (at > off)
        k = at - off;
      return fail_text(w, text, off + k);
    }
  }
  if (k <= 20)
    snprintf(text, sizeof text, "%s near '%.*s'", what, (int)k, w->s + off);
  else
    snprintf(text, sizeof text, "%s", what);
  return fail_text(w, text, off + k);
}

/* out_of_memory at a token: "out of memory near ..." */
static bool oom_at(jwalk *w, size_t off) {
  if (!w->failed)
    w->budget = true;
  return fail_at(w, off, "out of memory");
}

/* ---- the walker's state ------------------------------------------------------------- */

void jw_init(jwalk *w, const char *text, size_t len, rm_grant *grant) {
  memset(w, 0, sizeof *w);
  w->s = text ? text : "";
  w->n = text ? len : 0;
  w->grant = grant;
  w->lv_b.grant = w->keys_b.grant = w->arena.grant = w->scratch.grant = grant;
}

void jw_init_at(jwalk *w, const char *text, size_t len, size_t pos, rm_grant *grant) {
  jw_init(w, text, len, grant);
  w->pos = pos <= w->n ? pos : w->n;
}

void jw_free(jwalk *w) {
  for (unsigned i = 0; i < w->depth; i++)
    rm_buf_free(&w->lv[i].index);
  rm_buf_free(&w->lv_b);
  rm_buf_free(&w->keys_b);
  rm_buf_free(&w->arena);
  rm_buf_free(&w->scratch);
  w->lv = NULL;
  w->depth = w->cap = 0;
  w->nkeys = 0;
}

static void skip_ws(jwalk *w) {
  while (w->pos < w->n) {
    char c = w->s[w->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      break;
    w->pos++;
  }
}

int jw_peek(jwalk *w) {
  if (w->failed)
    return -1;
  skip_ws(w);
  return w->pos < w->n ? (unsigned char)w->s[w->pos] : -1;
}

size_t jw_tell(jwalk *w) {
  skip_ws(w);
  return w->pos;
}

/* Opens a level (the cursor is not moved); false: out of memory. */
static bool level_open(jwalk *w, char kind) {
  if (w->depth == w->cap) {
    if (!rm_buf_reserve(&w->lv_b, (w->depth + 1) * sizeof(jw_level)))
      return false;
    w->lv = (jw_level *)(void *)w->lv_b.p;
    w->cap = (unsigned)(w->lv_b.size / sizeof(jw_level));
  }
  jw_level *lv = &w->lv[w->depth++];
  memset(lv, 0, sizeof *lv);
  lv->kind = kind;
  lv->key_first = w->nkeys;
  lv->arena_mark = w->arena.len;
  lv->index.grant = w->grant;
  return true;
}

static void level_close(jwalk *w) {
  jw_level *lv = &w->lv[w->depth - 1];
  w->nkeys = lv->key_first;
  w->arena.len = lv->arena_mark;
  rm_buf_free(&lv->index);
  w->depth--;
}

/* ---- duplicate keys ------------------------------------------------------------------ */

static uint32_t key_hash(const char *k, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)k[i]) * 16777619u;
  return h;
}

static const char *key_bytes(const jwalk *w, const jw_key *k) {
  return k->in_arena ? w->arena.p + k->off : w->s + k->off;
}

static bool key_equal(const jwalk *w, const jw_key *k, const char *s, size_t n, uint32_t h) {
  return k->hash == h && k->len == n && !memcmp(key_bytes(w, k), s, n);
}

static void index_put(jw_level *lv, const jw_key *keys, size_t ki) {
  size_t mask = lv->index_cap - 1;
  size_t *slot = (size_t *)(void *)lv->index.p;
  for (size_t i = keys[ki].hash & mask;; i = (i + 1) & mask) {
    if (!slot[i]) {
      slot[i] = ki + 1;
      return;
    }
  }
}

/* Adds the key (decoded: at off in the text or the arena) to the object
 * being read: 1 added, 0 a duplicate, -1 out of memory. */
static int key_add(jwalk *w, size_t off, size_t n, bool in_arena) {
  jw_level *lv = &w->lv[w->depth - 1];
  const char *s = in_arena ? w->arena.p + off : w->s + off;
  uint32_t h = key_hash(s, n);
  size_t count = w->nkeys - lv->key_first;
  jw_key *keys = (jw_key *)(void *)w->keys_b.p;
  if (lv->index_cap) {
    size_t mask = lv->index_cap - 1;
    const size_t *slot = (const size_t *)(const void *)lv->index.p;
    for (size_t i = h & mask; slot[i]; i = (i + 1) & mask)
      if (key_equal(w, &keys[slot[i] - 1], s, n, h))
        return 0;
  } else {
    for (size_t i = lv->key_first; i < w->nkeys; i++)
      if (key_equal(w, &keys[i], s, n, h))
        return 0;
  }
  if ((w->nkeys + 1) * sizeof(jw_key) > w->keys_b.size) {
    if (!rm_buf_reserve(&w->keys_b, (w->nkeys + 1) * sizeof(jw_key)))
      return -1;
    keys = (jw_key *)(void *)w->keys_b.p;
  }
  keys[w->nkeys++] = (jw_key){off, n, h, in_arena};
  count++;
  if (count > JW_LINEAR_KEYS && count * 2 > lv->index_cap) {
    /* (re)build the level's index at four times its keys, reserved at its
     * exact size (its own cap) */
    size_t ncap = lv->index_cap ? lv->index_cap * 2 : 4 * JW_LINEAR_KEYS;
    while (ncap < count * 2)
      ncap *= 2;
    rm_buf ix = {0};
    ix.grant = w->grant;
    ix.cap = ncap * sizeof(size_t);
    if (!rm_buf_reserve(&ix, ncap * sizeof(size_t)))
      return -1;
    memset(ix.p, 0, ncap * sizeof(size_t));
    rm_buf_free(&lv->index);
    lv->index = ix;
    lv->index.cap = 0;
    lv->index_cap = ncap;
    for (size_t i = lv->key_first; i < w->nkeys; i++)
      index_put(lv, keys, i);
  } else if (lv->index_cap) {
    index_put(lv, keys, w->nkeys - 1);
  }
  return 1;
}

/* The key token t of the object being read, decoded, into the duplicate
 * check: *key and *klen are its bytes.  1 added, 0 a duplicate, -1 out of
 * memory. */
static int key_take(jwalk *w, const jtok *t, const char **key, size_t *klen) {
  size_t off, n;
  bool in_arena = t->escaped;
  if (!in_arena) {
    off = t->start + 1;
    n = t->end - t->start - 2;
  } else {
    size_t room = t->end - t->start;
    if (room > SIZE_MAX - w->arena.len || !rm_buf_reserve(&w->arena, w->arena.len + room))
      return -1;
    off = w->arena.len;
    n = decode((const unsigned char *)w->s, t, w->arena.p + off);
  }
  int r = key_add(w, off, n, in_arena);
  if (r == 1) {
    if (in_arena)
      w->arena.len += n;
    *key = in_arena ? w->arena.p + off : w->s + off;
    *klen = n;
  }
  return r;
}

/* A good scalar token as a jw_scalar (a string with escapes decoded into
 * the scratch buffer); false: out of memory. */
static bool to_scalar(jwalk *w, const jtok *t, jw_val *v) {
  memset(v, 0, sizeof *v);
  switch (t->kind) {
  case T_STRING:
    v->type = JW_STRING;
    if (!t->escaped) {
      v->s = w->s + t->start + 1;
      v->n = t->end - t->start - 2;
      return true;
    }
    if (!rm_buf_reserve(&w->scratch, t->end - t->start))
      return false;
    v->n = decode((const unsigned char *)w->s, t, w->scratch.p);
    v->s = w->scratch.p;
    return true;
  case T_INTEGER: v->type = JW_INTEGER; v->i = t->i; return true;
  case T_REAL: v->type = JW_REAL; v->d = t->d; return true;
  case T_TRUE: v->type = JW_TRUE; return true;
  case T_FALSE: v->type = JW_FALSE; return true;
  case T_NULL: v->type = JW_NULL; return true;
  case '{': v->type = JW_OBJECT; return true;
  case '[': v->type = JW_ARRAY; return true;
  default: return true;
  }
}

/* ---- the walk -------------------------------------------------------------------------- */

static bool push(jwalk *w, char kind) {
  if (w->depth >= JW_MAX_DEPTH)
    return fail_at(w, w->pos, "maximum parsing depth reached");
  if (!level_open(w, kind))
    return oom_at(w, w->pos);
  w->pos++; /* the '{' or '[' */
  return true;
}

static void pop(jwalk *w) {
  level_close(w);
  w->pos++; /* the '}' or ']' */
}

bool jw_object_begin(jwalk *w) {
  if (jw_peek(w) != '{')
    return fail_at(w, w->pos, "'{' expected");
  return push(w, '{');
}

bool jw_array_begin(jwalk *w) {
  if (jw_peek(w) != '[')
    return fail_at(w, w->pos, "'[' expected");
  return push(w, '[');
}

/* The key or scalar at the cursor read alone, as json_loadb would: the
 * cursor passes it; false with the walk's error set. */
static bool load_scalar(jwalk *w, jtok *t) {
  if (w->failed)
    return false;
  skip_ws(w);
  size_t start = w->pos;
  if (start >= w->n)
    return fail_at(w, start, "unexpected token");
  /* jansson counts every value, scalars too, toward its depth limit */
  if (w->depth + 1 > JW_MAX_DEPTH)
    return fail_at(w, start, "maximum parsing depth reached");
  if (!lex(w, start, t))
    return out_of_memory(w);
  char text[200];
  size_t at;
  if (!load_verdict(w, t, text, sizeof text, &at))
    return fail_text(w, text, at);
  w->pos = t->end;
  return true;
}

int jw_array_next(jwalk *w) {
  if (w->failed || !w->depth || w->lv[w->depth - 1].kind != '[')
    return -1;
  jw_level *lv = &w->lv[w->depth - 1];
  int c = jw_peek(w);
  if (c == ']' && !lv->count) {
    pop(w);
    return 0;
  }
  if (lv->count) {
    if (c == ']') {
      pop(w);
      return 0;
    }
    if (c != ',')
      return fail_at(w, w->pos, "']' expected"), -1;
    w->pos++;
    if (jw_peek(w) == ']')
      return fail_at(w, w->pos, "unexpected token"), -1;
  }
  if (w->pos >= w->n)
    return fail_at(w, w->pos, "']' expected"), -1;
  lv->count++;
  return 1;
}

int jw_object_next(jwalk *w, const char **key, size_t *klen) {
  const char *kb = NULL;
  size_t kl = 0;
  if (key)
    *key = NULL;
  if (klen)
    *klen = 0;
  if (w->failed || !w->depth || w->lv[w->depth - 1].kind != '{')
    return -1;
  int c = jw_peek(w);
  jw_level *lv = &w->lv[w->depth - 1];
  if (c == '}') {
    pop(w);
    return 0;
  }
  if (lv->count) {
    if (c != ',')
      return fail_at(w, w->pos, "'}' expected"), -1;
    w->pos++;
    c = jw_peek(w);
  }
  if (c != '"')
    return fail_at(w, w->pos, "string or '}' expected"), -1;
  size_t kpos = w->pos;
  jtok t;
  if (!load_scalar(w, &t)) /* a good string: it starts with '"' */
    return -1;
  int r = key_take(w, &t, &kb, &kl);
  if (r < 0)
    return oom_at(w, kpos), -1;
  if (r == 0)
    return fail_at(w, kpos, "duplicate object key"), -1;
  if (jw_peek(w) != ':')
    return fail_at(w, w->pos, "':' expected"), -1;
  w->pos++;
  if (jw_peek(w) < 0)
    return fail_at(w, w->pos, "unexpected token"), -1;
  lv->count++;
  if (key)
    *key = kb;
  if (klen)
    *klen = kl;
  return 1;
}

bool jw_scalar(jwalk *w, jw_val *out) {
  memset(out, 0, sizeof *out);
  jtok t;
  if (!load_scalar(w, &t)) /* an object or array is "unexpected" there */
    return false;
  if (!to_scalar(w, &t, out))
    return out_of_memory(w);
  return true;
}

bool jw_skip(jwalk *w) {
  int c = jw_peek(w);
  int r;
  if (c == '[') {
    if (!jw_array_begin(w))
      return false;
    while ((r = jw_array_next(w)) == 1)
      if (!jw_skip(w))
        return false;
    return r == 0;
  }
  if (c == '{') {
    if (!jw_object_begin(w))
      return false;
    while ((r = jw_object_next(w, NULL, NULL)) == 1)
      if (!jw_skip(w))
        return false;
    return r == 0;
  }
  jtok t;
  return load_scalar(w, &t);
}

bool jw_finish(jwalk *w) {
  if (w->failed)
    return false;
  if (jw_peek(w) >= 0)
    return fail_at(w, w->pos, "end of file expected");
  return true;
}

bool jw_fail(jwalk *w, const char *what) {
  skip_ws(w);
  return fail_at(w, w->pos, what);
}

/* ---- a piece, as json_loadb reads it ------------------------------------------------------ */

typedef struct {
  jwalk *w;
  size_t dropped;      /* NUL bytes jansson dropped so far (its positions count them not) */
  bool drop_next;      /* the byte at the cursor is such a NUL */
  bool stuck;          /* the stream failed after a good token: every token is invalid */
  char stuck_text[200];
  size_t stuck_at;
} piece;

/* lex_scan: the next token; false: out of memory */
static bool piece_lex(piece *p, jtok *t) {
  jwalk *w = p->w;
  if (p->drop_next) {
    w->pos++;
    p->dropped++;
    p->drop_next = false;
  }
  skip_ws(w);
  if (p->stuck) {
    t->kind = T_INVALID;
    t->err = E_NONE;
    t->start = t->end = w->pos;
    return true;
  }
  if (!lex(w, w->pos, t))
    return false;
  if (good_kind(t->kind)) {
    if (t->err) { /* a number or literal ended by bytes that are not UTF-8 */
      p->stuck = true;
      err_text(w, t, p->stuck_text, sizeof p->stuck_text);
      p->stuck_at = t->epos - p->dropped;
    } else if (t->kind != T_STRING && t->end < w->n && w->s[t->end] == '\0') {
      p->drop_next = true;
    }
  }
  w->pos = t->end;
  return true;
}

/* jansson's error at token t: the first error set wins */
static jw_type piece_fail(piece *p, const jtok *t, const char *what) {
  jwalk *w = p->w;
  char text[200];
  if (p->stuck)
    return fail_text(w, p->stuck_text, p->stuck_at), JW_NONE;
  if (t->err) {
    err_text(w, t, text, sizeof text);
    return fail_text(w, text, t->epos - p->dropped), JW_NONE;
  }
  jansson_text(w, text, sizeof text, what, t->start, t->end, false);
  return fail_text(w, text, t->end - p->dropped), JW_NONE;
}

/* plain: a byte that stands for itself in a JSON string, ASCII only
 * (0x20 to 0x7e but '"' and '\\') */
static const unsigned char plain_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
#define IS_WS(c) ((c) <= ' ' && ((c) == ' ' || (c) == '\n' || (c) == '\t' || (c) == '\r'))

/* The end of the run of plain bytes from p (at most n): jsonw_plain_span,
 * shared with the answer's writer (eight at a time; DEL plain there but not
 * in plain_byte, which only sends a string the slow way). */
static inline size_t plain_end(const unsigned char *s, size_t p, size_t n) {
  return jsonw_plain_span(s, p, n, plain_byte);
}

/* A plain scalar at p (see piece_plain) into *v: the offset after it, or 0
 * when it is not one. */
static size_t plain_scalar(const jwalk *w, size_t p, char close, jw_val *v) {
  const unsigned char *s = (const unsigned char *)w->s;
  size_t n = w->n;
  if (p >= n)
    return 0;
  unsigned c = s[p];
  if (c == '"') {
    size_t vs = ++p;
    p = plain_end(s, p, n);
    if (p >= n || s[p] != '"')
      return 0;
    *v = (jw_val){JW_STRING, 0, 0, w->s + vs, p - vs};
    return p + 1;
  }
  if (c == '-' || IS_DIGIT(c)) {
    bool neg = c == '-';
    size_t d0 = p + neg;
    uint64_t u = 0;
    for (p = d0; p < n && IS_DIGIT(s[p]) && p - d0 < 19; p++)
      u = u * 10 + (s[p] - '0');
    size_t nd = p - d0;
    if (!nd || nd > 18 || (s[d0] == '0' && nd > 1) || p >= n || !(IS_WS(s[p]) || s[p] == ',' || s[p] == close))
      return 0;
    *v = (jw_val){JW_INTEGER, neg ? -(int64_t)u : (int64_t)u, 0, NULL, 0};
    return p;
  }
  size_t len = c == 't' ? 4 : c == 'f' ? 5 : c == 'n' ? 4 : 0;
  if (!len || n - p <= len || memcmp(s + p, c == 't' ? "true" : c == 'f' ? "false" : "null", len) ||
      !(IS_WS(s[p + len]) || s[p + len] == ',' || s[p + len] == close))
    return 0;
  *v = (jw_val){c == 't' ? JW_TRUE : c == 'f' ? JW_FALSE : JW_NULL, 0, 0, NULL, 0};
  return p + len;
}

/* The usual frame, module or v5 address in one pass: an object of at most
 * JW_LINEAR_KEYS members with distinct keys, or an array of at most that
 * many elements; keys and string values of plain ASCII (no escapes),
 * integers of at most 18 digits, literals, each value ended by whitespace,
 * ',' or the closing bracket.  Those are read by jansson as they stand (no
 * escape to decode, no UTF-8 to check, nothing to overflow, no byte given
 * back that is not ASCII), so the members are handed out and the cursor set
 * as the full reading below would; false for anything else, with nothing
 * done: the full reading then starts over and says what is wrong, if
 * anything.  Returns the piece's type, JW_NONE for false. */
static jw_type piece_plain(jwalk *w, jw_member_fn fn, void *ctx) {
  const unsigned char *s = (const unsigned char *)w->s;
  size_t n = w->n, p = w->pos;
  struct {
    const char *key;
    size_t klen;
    jw_val v;
  } m[JW_LINEAR_KEYS];
  size_t nm = 0;
  if (p >= n || (s[p] != '{' && s[p] != '['))
    return JW_NONE;
  bool obj = s[p] == '{';
  char close = obj ? '}' : ']';
  for (p++; p < n && IS_WS(s[p]); p++)
    ;
  if (p < n && s[p] == close)
    goto done;
  for (;;) {
    if (nm == JW_LINEAR_KEYS)
      return JW_NONE;
    m[nm].key = NULL;
    m[nm].klen = 0;
    if (obj) {
      if (p >= n || s[p] != '"')
        return JW_NONE;
      size_t ks = ++p;
      p = plain_end(s, p, n);
      if (p >= n || s[p] != '"')
        return JW_NONE;
      size_t kl = p - ks;
      for (size_t i = 0; i < nm; i++)
        if (m[i].klen == kl && !memcmp(m[i].key, s + ks, kl))
          return JW_NONE;
      for (p++; p < n && IS_WS(s[p]); p++)
        ;
      if (p >= n || s[p] != ':')
        return JW_NONE;
      for (p++; p < n && IS_WS(s[p]); p++)
        ;
      m[nm].key = w->s + ks;
      m[nm].klen = kl;
    }
    p = plain_scalar(w, p, close, &m[nm].v);
    if (!p)
      return JW_NONE;
    nm++;
    while (p < n && IS_WS(s[p]))
      p++;
    if (p < n && s[p] == ',') {
      for (p++; p < n && IS_WS(s[p]); p++)
        ;
      continue;
    }
    if (p < n && s[p] == close)
      break;
    return JW_NONE;
  }
done:
  w->pos = p + 1;
  if (fn)
    for (size_t i = 0; i < nm; i++)
      fn(ctx, m[i].key, m[i].klen, obj ? 0 : i, &m[i].v);
  return obj ? JW_OBJECT : JW_ARRAY;
}

jw_type jw_piece(jwalk *w, jw_member_fn fn, void *ctx) {
  if (w->failed)
    return JW_NONE;
  skip_ws(w);
  size_t start = w->pos;
  if (start >= w->n)
    return fail_at(w, start, "unexpected token"), JW_NONE;
  if (w->depth + 1 > JW_MAX_DEPTH)
    return fail_at(w, start, "maximum parsing depth reached"), JW_NONE;
  jw_type plain = piece_plain(w, fn, ctx);
  if (plain != JW_NONE)
    return plain;
  piece p;
  memset(&p, 0, sizeof p);
  p.w = w;
  unsigned base = w->depth; /* the walk's levels; the piece's own go above */
  jw_type root = JW_NONE;
  const char *key = NULL;  /* the root object's member being read */
  size_t klen = 0, index = 0;
  jtok t;
  jw_val v;
  if (!piece_lex(&p, &t))
    goto oom;
  for (;;) {
    /* parse_value: t starts a value at depth (levels open in the piece) + 1 */
    unsigned pd = w->depth - base;
    if (pd + 1 > JW_MAX_DEPTH)
      return piece_fail(&p, &t, "maximum parsing depth reached");
    if (t.kind == T_STRING && t.nul)
      return piece_fail(&p, &t, "\\u0000 is not allowed without JSON_ALLOW_NUL");
    if (t.kind == T_INVALID)
      return piece_fail(&p, &t, "invalid token");
    if (!good_kind(t.kind) && t.kind != '{' && t.kind != '[')
      return piece_fail(&p, &t, "unexpected token");
    if (pd == 0) {
      root = t.kind == '{' ? JW_OBJECT : t.kind == '[' ? JW_ARRAY : JW_NONE;
    } else if (pd == 1 && fn) {
      if (!to_scalar(w, &t, &v))
        goto oom;
      fn(ctx, key, klen, index, &v);
    }
    if (t.kind == '{' || t.kind == '[') {
      if (!level_open(w, (char)t.kind))
        goto oom;
      if (!piece_lex(&p, &t))
        goto oom;
      if (t.kind == (w->lv[w->depth - 1].kind == '{' ? '}' : ']')) {
        level_close(w);
        goto after_value;
      }
      if (w->lv[w->depth - 1].kind == '{')
        goto member;
      goto element;
    }
    if (pd == 0) { /* a scalar piece */
      if (!to_scalar(w, &t, &v))
        goto oom;
      w->pos = t.end - p.dropped;
      return v.type;
    }
  after_value:
    if (w->depth == base) { /* the piece is read: the cursor where jansson stopped */
      w->pos -= p.dropped;
      return root;
    }
    if (!piece_lex(&p, &t))
      goto oom;
    if (w->lv[w->depth - 1].kind == '{') {
      if (t.kind != ',') {
        if (t.kind != '}')
          return piece_fail(&p, &t, "'}' expected");
        level_close(w);
        goto after_value;
      }
      if (!piece_lex(&p, &t))
        goto oom;
    member:
      if (t.kind != T_STRING)
        return piece_fail(&p, &t, "string or '}' expected");
      if (t.nul)
        return piece_fail(&p, &t, "NUL byte in object key not supported");
      {
        int r = key_take(w, &t, &key, &klen);
        if (r < 0)
          goto oom;
        if (r == 0)
          return piece_fail(&p, &t, "duplicate object key");
      }
      if (!piece_lex(&p, &t))
        goto oom;
      if (t.kind != ':')
        return piece_fail(&p, &t, "':' expected");
      if (!piece_lex(&p, &t))
        goto oom;
      w->lv[w->depth - 1].count++;
      continue;
    }
    if (t.kind != ',') {
      if (t.kind != ']')
        return piece_fail(&p, &t, "']' expected");
      level_close(w);
      goto after_value;
    }
    if (!piece_lex(&p, &t))
      goto oom;
  element:
    if (t.kind == T_EOF)
      return piece_fail(&p, &t, "']' expected");
    if (w->depth - base == 1) {
      index = w->lv[w->depth - 1].count;
      key = NULL;
      klen = 0;
    }
    w->lv[w->depth - 1].count++;
  }
oom:
  out_of_memory(w);
  return JW_NONE;
}
