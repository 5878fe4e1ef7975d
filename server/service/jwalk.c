/*
 * jwalk.c - a JSON text read a piece at a time (jwalk.h).
 *
 * The walker itself only ever reads whitespace and the punctuation of the
 * containers it walks: '{' '}' '[' ']' ',' ':'.  Every value it does not
 * enter - keys, scalars, the pieces the caller wants as trees - is read by
 * jansson (json_loadb with JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, which
 * stops after one value and reports where), so strings, numbers and literals
 * are accepted or refused exactly as a whole-text json_loadb would.
 * Messages follow jansson's wording.
 */
#include "jwalk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jw_level {
  char kind;      /* '{' or '[' */
  size_t count;   /* members or elements begun */
  json_t *seen;   /* objects: the keys so far (a jansson object as a set) */
};

static const size_t JW_LOAD_FLAGS = JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES;

void jw_init(jwalk *w, const char *text, size_t len) {
  memset(w, 0, sizeof *w);
  w->s = text ? text : "";
  w->n = text ? len : 0;
}

void jw_init_at(jwalk *w, const char *text, size_t len, size_t pos) {
  jw_init(w, text, len);
  w->pos = pos <= w->n ? pos : w->n;
}

void jw_free(jwalk *w) {
  for (unsigned i = 0; i < w->depth; i++)
    json_decref(w->lv[i].seen);
  free(w->lv);
  w->lv = NULL;
  w->depth = w->cap = 0;
}

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

/* "WHAT near 'TOKEN' (line L, column C)" as a whole-text json_loadb words
 * it: the token is what jansson's lexer reads at off (a one-character
 * punctuation, a value, or the text of an invalid token), named when it is
 * 20 bytes or shorter, "end of file" past the text; the position is that of
 * the token's last character.  When the lexer itself fails on the token (a
 * string without its closing quote, a control character, bytes that are not
 * UTF-8, a number too big), its error is the one reported, as jansson
 * reports it. */
static bool fail_at(jwalk *w, size_t off, const char *what) {
  if (w->failed)
    return false;
  w->failed = true;
  int line, col;
  if (off >= w->n) {
    where(w, off, &line, &col);
    snprintf(w->error, sizeof w->error, "%s near end of file (line %d, column %d)", what, line, col);
    return false;
  }
  size_t k = 1;
  char c = w->s[off];
  if (!c || !strchr("{}[],:", c)) {
    json_error_t e;
    json_t *v = json_loadb(w->s + off, w->n - off, JW_LOAD_FLAGS, &e);
    if (e.position > 0)
      k = (size_t)e.position;
    if (v) {
      json_decref(v);
    } else if (strncmp(e.text, "invalid token", 13)) {
      where(w, off + k, &line, &col);
      snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", e.text, line, col);
      return false;
    }
  }
  where(w, off + k, &line, &col);
  if (k <= 20)
    snprintf(w->error, sizeof w->error, "%s near '%.*s' (line %d, column %d)", what, (int)k, w->s + off,
             line, col);
  else
    snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", what, line, col);
  return false;
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

static bool push(jwalk *w, char kind) {
  if (w->depth >= JW_MAX_DEPTH)
    return fail_at(w, w->pos, "maximum parsing depth reached");
  if (w->depth == w->cap) {
    unsigned ncap = w->cap ? w->cap * 2 : 8;
    jw_level *p = realloc(w->lv, ncap * sizeof *p);
    if (!p)
      return fail_at(w, w->pos, "out of memory");
    w->lv = p;
    w->cap = ncap;
  }
  w->lv[w->depth++] = (jw_level){kind, 0, NULL};
  w->pos++; /* the '{' or '[' */
  return true;
}

static void pop(jwalk *w) {
  json_decref(w->lv[w->depth - 1].seen);
  w->depth--;
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

/* jansson reads one value at the cursor */
static json_t *load_one(jwalk *w) {
  if (w->failed)
    return NULL;
  skip_ws(w);
  size_t start = w->pos;
  if (start >= w->n) {
    fail_at(w, start, "unexpected token");
    return NULL;
  }
  /* jansson counts every value, scalars too, toward its depth limit */
  if (w->depth + 1 > JW_MAX_DEPTH) {
    fail_at(w, start, "maximum parsing depth reached");
    return NULL;
  }
  json_error_t e;
  json_t *v = json_loadb(w->s + start, w->n - start, JW_LOAD_FLAGS, &e);
  if (!v) {
    w->failed = true;
    size_t off = start + (e.position > 0 ? (size_t)e.position : 0);
    int line, col;
    where(w, off, &line, &col);
    snprintf(w->error, sizeof w->error, "%s (line %d, column %d)", e.text, line, col);
    return NULL;
  }
  w->pos = start + (size_t)e.position;
  return v;
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

int jw_object_next(jwalk *w, json_t **key) {
  if (key)
    *key = NULL;
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
  json_t *k = load_one(w);
  if (!k)
    return -1;
  if (!json_is_string(k)) { /* cannot happen after a '"' */
    json_decref(k);
    return fail_at(w, kpos, "string or '}' expected"), -1;
  }
  const char *ks = json_string_value(k);
  size_t kl = json_string_length(k);
  if (memchr(ks, '\0', kl)) {
    json_decref(k);
    return fail_at(w, kpos, "NUL byte in object key not supported"), -1;
  }
  if (!lv->seen)
    lv->seen = json_object();
  if (!lv->seen) {
    json_decref(k);
    return fail_at(w, kpos, "out of memory"), -1;
  }
  if (json_object_getn(lv->seen, ks, kl)) {
    json_decref(k);
    return fail_at(w, kpos, "duplicate object key"), -1;
  }
  if (json_object_setn_new(lv->seen, ks, kl, json_null())) {
    json_decref(k);
    return fail_at(w, kpos, "out of memory"), -1;
  }
  if (jw_peek(w) != ':') {
    json_decref(k);
    return fail_at(w, w->pos, "':' expected"), -1;
  }
  w->pos++;
  if (jw_peek(w) < 0) {
    json_decref(k);
    return fail_at(w, w->pos, "unexpected token"), -1;
  }
  lv->count++;
  if (key)
    *key = k;
  else
    json_decref(k);
  return 1;
}

json_t *jw_value(jwalk *w) { return load_one(w); }

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
    while ((r = jw_object_next(w, NULL)) == 1)
      if (!jw_skip(w))
        return false;
    return r == 0;
  }
  json_t *v = load_one(w);
  json_decref(v);
  return v != NULL;
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
