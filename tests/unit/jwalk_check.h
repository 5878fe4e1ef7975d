/*
 * jwalk_check.h - a piece read with jw_piece (server/service/jwalk.h)
 * against jansson's tree of the same text: the piece's type, and every
 * member or element it hands out - key, type, value (a string's decoded
 * bytes, an integer, a real's double) - equal to the tree's.  Used by
 * test_jwalk.c and fuzz_jwalk.c.
 */
#ifndef PDBSYM_TEST_JWALK_CHECK_H
#define PDBSYM_TEST_JWALK_CHECK_H

#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "jwalk.h"

typedef struct {
  const json_t *want; /* the tree of the piece */
  size_t seen;        /* members handed out */
  bool ok;
} jc_state;

static inline bool jc_same_value(const jw_val *v, const json_t *j) {
  switch (v->type) {
  case JW_OBJECT: return json_is_object(j);
  case JW_ARRAY: return json_is_array(j);
  case JW_STRING:
    return json_is_string(j) && json_string_length(j) == v->n && !memcmp(json_string_value(j), v->s, v->n);
  case JW_INTEGER: return json_is_integer(j) && json_integer_value(j) == v->i;
  case JW_REAL: return json_is_real(j) && json_real_value(j) == v->d;
  case JW_TRUE: return json_is_true(j);
  case JW_FALSE: return json_is_false(j);
  case JW_NULL: return json_is_null(j);
  default: return false;
  }
}

static inline void jc_member(void *ctx, const char *key, size_t klen, size_t index, const jw_val *v) {
  jc_state *st = ctx;
  const json_t *j = key ? json_object_getn(st->want, key, klen) : json_array_get(st->want, index);
  if (key ? !json_is_object(st->want) : (!json_is_array(st->want) || index != st->seen))
    st->ok = false;
  if (!j || !jc_same_value(v, j))
    st->ok = false;
  st->seen++;
}

/* Reads the piece at w's cursor; true when it matches want member by member. */
static inline bool jc_same_piece(jwalk *w, const json_t *want) {
  jc_state st = {want, 0, true};
  jw_type t = jw_piece(w, jc_member, &st);
  if (t == JW_NONE)
    return false;
  if (t == JW_OBJECT)
    return st.ok && json_is_object(want) && st.seen == json_object_size(want);
  if (t == JW_ARRAY)
    return st.ok && json_is_array(want) && st.seen == json_array_size(want);
  /* a scalar piece: jw_piece hands nothing out, its type must match */
  jw_val v = {t, 0, 0, NULL, 0};
  if (t == JW_INTEGER || t == JW_REAL || t == JW_STRING)
    return json_is_integer(want) ? t == JW_INTEGER
           : json_is_real(want)  ? t == JW_REAL
                                 : t == JW_STRING && json_is_string(want);
  return jc_same_value(&v, want);
}

#endif
