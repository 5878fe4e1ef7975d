/*
 * fuzz_jwalk.c - the piecewise JSON reader (server/jwalk.h) against jansson:
 * whatever the bytes, walking them accepts exactly what
 * json_loadb(JSON_DECODE_ANY | JSON_REJECT_DUPLICATES) accepts, and every
 * piece the walk hands out (jw_piece, member by member) equals jansson's
 * reading of the same text.
 * One exception: a raw NUL byte outside a string, which RFC 8259 never
 * allows, is sometimes taken by jansson 2.14 for the end of the text
 * ("\t1\0" is accepted, "1\0" is not); the walk always refuses it, so for
 * texts with a NUL byte the check is one-way: what the walk accepts, jansson
 * accepts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jwalk.h"
#include "jwalk_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  json_error_t e;
  json_t *whole = json_loadb(s, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  jwalk w;
  jw_init(&w, s, size, NULL);
  bool ok = jw_skip(&w) && jw_finish(&w);
  jw_free(&w);
  bool has_nul = memchr(s, 0, size) != NULL;
  if (ok != (whole != NULL) && !(has_nul && !ok)) {
    fprintf(stderr, "fuzz_jwalk: jansson %s, the walk %s\n", whole ? "accepts" : "refuses",
            ok ? "accepts" : "refuses");
    abort();
  }
  /* a top-level array or object: its elements one by one equal jansson's */
  if (whole && !has_nul && (json_is_array(whole) || json_is_object(whole))) {
    jw_init(&w, s, size, NULL);
    size_t i = 0;
    if (json_is_array(whole)) {
      if (!jw_array_begin(&w))
        abort();
      while (jw_array_next(&w) == 1)
        if (!jc_same_piece(&w, json_array_get(whole, i++)))
          abort();
    } else {
      const char *key;
      size_t klen;
      if (!jw_object_begin(&w))
        abort();
      while (jw_object_next(&w, &key, &klen) == 1) {
        /* the key is valid until the next call: look it up first */
        const json_t *want = json_object_getn(whole, key, klen);
        if (!want || !jc_same_piece(&w, want))
          abort();
        i++;
      }
    }
    if (w.failed || !jw_finish(&w) || i != (json_is_array(whole) ? json_array_size(whole) : json_object_size(whole)))
      abort();
    jw_free(&w);
  }
  json_decref(whole);
  return 0;
}
