/* Unit tests for server/common/jsonw.c, the streaming JSON writer, with
 * jansson as the oracle: every string of a large generated set is written by
 * jsonw and by jansson's json_dumps (after the sanitizing the renderer always
 * did, tests/unit/render_ref.h's ref_render_string) and the bytes must be the
 * same; every text jsonw writes must parse back with jansson to the expected
 * string.  Numbers, nesting, the cap and the sticky errors too. */
#include <stdlib.h>

#include <jansson.h>

#include "jsonw.h"
#include "render_ref.h"
#include "test.h"

/* xorshift64*: a fixed sequence, so a failure can be replayed */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* A string of n bytes drawn from kind's mix; never a NUL (the renderer's
 * strings are C strings). */
static size_t gen(unsigned char *out, size_t cap, int kind) {
  static const char *const pieces[] = {
      "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x01", "\x1f", "\x7f", " ", "a", "Z", "~",
      "\xc3\xa9",             /* U+00E9 */
      "\xe2\x82\xac",         /* U+20AC */
      "\xf0\x9f\x98\x80",     /* U+1F600 */
      "\xef\xbf\xbd",         /* U+FFFD itself */
      "\xed\x9f\xbf",         /* U+D7FF, the last before the surrogates */
      "\xee\x80\x80",         /* U+E000, the first after */
      "\xf4\x8f\xbf\xbf",     /* U+10FFFF */
      "\xc0\x80",             /* overlong NUL */
      "\xc1\xbf",             /* overlong */
      "\xe0\x80\xaf",         /* overlong '/' */
      "\xed\xa0\x80",         /* a surrogate */
      "\xed\xbf\xbf",         /* a surrogate */
      "\xf4\x90\x80\x80",     /* past U+10FFFF */
      "\xf5\x80\x80\x80",     /* never a lead byte */
      "\xff", "\xfe", "\x80", "\xbf", /* lone bytes */
      "\xc3", "\xe2\x82", "\xf0\x9f\x98", /* cut sequences */
      "\xf0\x80\x80\x80",     /* overlong 4-byte */
  };
  size_t npieces = sizeof pieces / sizeof pieces[0];
  size_t n = 0, want = (size_t)(rnd() % 48);
  while (n < want) {
    const char *p;
    char one[2] = {0, 0};
    switch (kind) {
    case 0: /* printable ASCII, the usual name */
      one[0] = (char)(0x20 + rnd() % 95);
      p = one;
      break;
    case 1: /* any byte but NUL */
      one[0] = (char)(1 + rnd() % 255);
      p = one;
      break;
    default: /* the interesting pieces, mixed with ASCII */
      if (rnd() % 3 == 0) {
        one[0] = (char)(0x20 + rnd() % 95);
        p = one;
      } else {
        p = pieces[rnd() % npieces];
      }
      break;
    }
    size_t l = strlen(p);
    if (n + l >= cap)
      break;
    memcpy(out + n, p, l);
    n += l;
  }
  out[n] = '\0';
  return n;
}

/* jsonw's text of one string value */
static char *jw_string(const char *s) {
  jsonw w;
  jsonw_init(&w, 0, 0);
  jsonw_str(&w, s);
  return jsonw_take(&w, NULL);
}

TEST(strings_as_jansson_writes_them) {
  int mismatches = 0, unparsed = 0, checked = 0, valid = 0;
  for (int kind = 0; kind < 3; kind++) {
    for (int i = 0; i < 100000; i++) {
      unsigned char s[64];
      gen(s, sizeof s, kind);
      /* the oracle: jansson's own text of the sanitized string */
      json_t *ref = ref_render_string((const char *)s);
      char *want = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
      char *got = jw_string((const char *)s);
      checked++;
      if (!want || !got || strcmp(want, got)) {
        if (mismatches++ < 5)
          fprintf(stderr, "  string %d/%d: jansson %s, jsonw %s\n", kind, i, want ? want : "(null)",
                  got ? got : "(null)");
      }
      /* a string that is UTF-8 already is written without the sanitizer's help */
      json_t *plain = json_string((const char *)s);
      if (plain) {
        valid++;
        char *direct = json_dumps(plain, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!direct || !got || strcmp(direct, got))
          mismatches++;
        free(direct);
        json_decref(plain);
      }
      /* and it parses back to the sanitized string */
      json_error_t e;
      json_t *back = got ? json_loads(got, JSON_DECODE_ANY, &e) : NULL;
      if (!back || !json_equal(back, ref)) {
        if (unparsed++ < 5)
          fprintf(stderr, "  string %d/%d: %s does not parse back\n", kind, i, got ? got : "(null)");
      }
      json_decref(back);
      free(want);
      free(got);
      json_decref(ref);
    }
  }
  printf("  %d strings (%d valid UTF-8 as given): %d differ from jansson, %d do not parse back\n",
         checked, valid, mismatches, unparsed);
  CHECK_EQ_U(mismatches, 0);
  CHECK_EQ_U(unparsed, 0);
  CHECK(valid > 100000); /* the set has both kinds */
}

TEST(every_byte_and_every_code_point) {
  /* each single byte, and each BMP and astral code point (a sample), as
   * jansson escapes or keeps it */
  int bad = 0;
  for (int b = 1; b < 256; b++) {
    char s[2] = {(char)b, 0};
    json_t *ref = ref_render_string(s);
    char *want = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = jw_string(s);
    if (!want || !got || strcmp(want, got)) {
      bad++;
      fprintf(stderr, "  byte 0x%02x: jansson %s, jsonw %s\n", b, want, got);
    }
    free(want);
    free(got);
    json_decref(ref);
  }
  for (uint32_t cp = 0x80; cp <= 0x10ffff; cp += (cp < 0x10000 ? 1 : 97)) {
    unsigned char s[5] = {0};
    if (cp < 0x800) {
      s[0] = (unsigned char)(0xc0 | (cp >> 6));
      s[1] = (unsigned char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s[0] = (unsigned char)(0xe0 | (cp >> 12));
      s[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
      s[2] = (unsigned char)(0x80 | (cp & 0x3f));
    } else {
      s[0] = (unsigned char)(0xf0 | (cp >> 18));
      s[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
      s[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
      s[3] = (unsigned char)(0x80 | (cp & 0x3f));
    }
    json_t *ref = ref_render_string((const char *)s);
    char *want = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = jw_string((const char *)s);
    if (!want || !got || strcmp(want, got)) {
      if (bad++ < 5)
        fprintf(stderr, "  U+%04X: jansson %s, jsonw %s\n", cp, want, got);
    }
    free(want);
    free(got);
    json_decref(ref);
  }
  CHECK_EQ_U(bad, 0);
}

TEST(nul_inside_a_counted_string) {
  /* jsonw_strn takes bytes, NUL included, as json_stringn does */
  const char s[] = "a\0b\x01";
  json_t *j = json_stringn(s, 4);
  char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
  jsonw w;
  jsonw_init(&w, 0, 0);
  jsonw_strn(&w, s, 4);
  char *got = jsonw_take(&w, NULL);
  CHECK_EQ_S(got, want);
  CHECK_EQ_S(got, "\"a\\u0000b\\u0001\"");
  free(want);
  free(got);
  json_decref(j);
}

TEST(numbers_as_jansson_writes_them) {
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    int64_t v = (int64_t)rnd();
    if (i % 4 == 1)
      v >>= rnd() % 63;
    if (i == 0)
      v = INT64_MIN;
    if (i == 1)
      v = INT64_MAX;
    if (i == 2)
      v = 0;
    if (i == 3)
      v = -1;
    json_t *j = json_integer(v);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    jsonw w;
    jsonw_init(&w, 0, 0);
    jsonw_int(&w, v);
    char *got = jsonw_take(&w, NULL);
    if (!got || strcmp(want, got))
      bad++;
    if (v >= 0) {
      jsonw_init(&w, 0, 0);
      jsonw_uint(&w, (uint64_t)v);
      char *u = jsonw_take(&w, NULL);
      if (!u || strcmp(want, u))
        bad++;
      free(u);
    }
    /* hex strings, against printf */
    uint64_t x = rnd() >> (rnd() % 64);
    int width = (int)(rnd() % 10);
    char hex[40];
    snprintf(hex, sizeof hex, "\"0x%0*" PRIx64 "\"", width, x);
    jsonw_init(&w, 0, 0);
    jsonw_hex(&w, x, width);
    char *h = jsonw_take(&w, NULL);
    if (!h || strcmp(hex, h))
      bad++;
    free(h);
    free(got);
    free(want);
    json_decref(j);
  }
  jsonw w;
  jsonw_init(&w, 0, 0);
  jsonw_uint(&w, UINT64_MAX);
  char *m = jsonw_take(&w, NULL);
  CHECK_EQ_S(m, "18446744073709551615");
  free(m);
  CHECK_EQ_U(bad, 0);
}

/* A random document written twice, through jsonw and as a jansson tree;
 * depth-limited, keys distinct within an object. */
static json_t *gen_doc(jsonw *w, int depth) {
  int t = (int)(rnd() % (depth > 4 ? 6 : 8));
  switch (t) {
  case 0: jsonw_null(w); return json_null();
  case 1: { bool b = rnd() & 1; jsonw_bool(w, b); return json_boolean(b); }
  case 2: { int64_t v = (int64_t)(rnd() >> (rnd() % 64)) * ((rnd() & 1) ? -1 : 1);
            jsonw_int(w, v); return json_integer(v); }
  case 3: case 4: case 5: {
    unsigned char s[64];
    gen(s, sizeof s, 2);
    jsonw_str(w, (const char *)s);
    return ref_render_string((const char *)s);
  }
  case 6: {
    json_t *a = json_array();
    jsonw_arr(w);
    int n = (int)(rnd() % 5);
    for (int i = 0; i < n; i++)
      json_array_append_new(a, gen_doc(w, depth + 1));
    jsonw_arr_end(w);
    return a;
  }
  default: {
    json_t *o = json_object();
    jsonw_obj(w);
    int n = (int)(rnd() % 5);
    for (int i = 0; i < n; i++) {
      char key[32];
      unsigned char raw[24];
      if (rnd() & 1) {
        snprintf(key, sizeof key, "k%d_%d", depth, i);
        jsonw_keyn(w, key, strlen(key));
      } else { /* a key from data: escaped; made distinct by its index */
        gen(raw, 16, 2);
        json_t *san = ref_render_string((const char *)raw);
        snprintf(key, sizeof key, "%d:", i);
        size_t kl = strlen(key), sl = json_string_length(san);
        char *full = malloc(kl + sl + 1);
        memcpy(full, key, kl);
        memcpy(full + kl, json_string_value(san), sl + 1);
        jsonw_key_str(w, full, kl + sl);
        json_object_set_new(o, full, gen_doc(w, depth + 1));
        free(full);
        json_decref(san);
        continue;
      }
      json_object_set_new(o, key, gen_doc(w, depth + 1));
    }
    jsonw_obj_end(w);
    return o;
  }
  }
}

TEST(documents_as_jansson_writes_them) {
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    jsonw w;
    jsonw_init(&w, (size_t)(rnd() % 64), 0); /* small and odd first sizes: the growth path */
    json_t *ref = gen_doc(&w, 0);
    char *want = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = 0;
    char *got = jsonw_take(&w, &len);
    if (!want || !got || strcmp(want, got) || len != strlen(got)) {
      if (bad++ < 3)
        fprintf(stderr, "  document %d:\n    jansson %s\n    jsonw   %s\n", i, want, got);
    }
    free(want);
    free(got);
    json_decref(ref);
  }
  CHECK_EQ_U(bad, 0);
}

TEST(the_cap_holds) {
  jsonw w;
  jsonw_init(&w, 1000, 16); /* the first allocation is clamped to the cap */
  CHECK(w.cap <= 16);
  jsonw_arr(&w);
  jsonw_str(&w, "0123456789"); /* ["0123456789" : 13 bytes */
  jsonw_int(&w, 12);           /* ,12 : 16 */
  CHECK_EQ_U(jsonw_error(&w), JSONW_OK);
  jsonw_arr_end(&w); /* 17 > 16 */
  CHECK_EQ_U(jsonw_error(&w), JSONW_E_LIMIT);
  jsonw_int(&w, 1); /* a no-op now */
  CHECK_EQ_U(w.len, 16);
  CHECK(jsonw_take(&w, NULL) == NULL);
  /* exactly at the cap is fine */
  jsonw_init(&w, 0, 4);
  jsonw_str(&w, "ab");
  size_t n;
  char *t = jsonw_take(&w, &n);
  CHECK_EQ_S(t, "\"ab\"");
  CHECK_EQ_U(n, 4);
  free(t);
  /* a long string against a small cap: escapes (6 bytes per byte) never
   * write past it */
  jsonw_init(&w, 0, 100);
  char ctl[200];
  memset(ctl, 1, sizeof ctl - 1);
  ctl[sizeof ctl - 1] = 0;
  jsonw_str(&w, ctl);
  CHECK_EQ_U(jsonw_error(&w), JSONW_E_LIMIT);
  CHECK(w.len <= 100);
  jsonw_free(&w);
}

/* A buffer its owner grows (as a request's budgeted buffer is): a byte
 * budget, growth by the owner's rule (a little more than asked). */
typedef struct {
  char *p;
  size_t size;
  size_t budget; /* most bytes the owner may hold */
  int grows;
} owner;

static bool owner_grow(void *ctx, char **buf, size_t *size, size_t need) {
  owner *o = ctx;
  CHECK(*buf == o->p);
  size_t n = need + need / 4 + 7;
  if (n > o->budget)
    n = need;
  if (n > o->budget)
    return false;
  char *p = realloc(o->p, n);
  if (!p)
    return false;
  o->p = *buf = p;
  o->size = *size = n;
  o->grows++;
  return true;
}

TEST(a_buffer_its_owner_grows) {
  int bad = 0, grows = 0;
  for (int i = 0; i < 3000; i++) {
    owner o = {NULL, 0, SIZE_MAX, 0};
    if (i % 2) { /* the owner starts with a small block of its own */
      o.size = 1 + rnd() % 8;
      o.p = malloc(o.size);
    }
    jsonw w;
    jsonw_init_grow(&w, 0, owner_grow, &o, o.p, o.size);
    json_t *ref = gen_doc(&w, 0);
    char *want = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = 0;
    const char *got = jsonw_text(&w, &len);
    if (!want || jsonw_error(&w) || strcmp(want, got) || len != strlen(want) || got != o.p ||
        len + 1 > o.size) {
      if (bad++ < 3)
        fprintf(stderr, "  document %d:\n    jansson %s\n    jsonw   %s\n", i, want, got);
    }
    CHECK(jsonw_take(&w, NULL) == NULL); /* not the writer's to hand out */
    jsonw_free(&w);                      /* forgets it; the owner frees it */
    grows += o.grows;
    free(o.p);
    free(want);
    json_decref(ref);
  }
  CHECK_EQ_U(bad, 0);
  CHECK(grows > 3000);
  /* the owner refuses: the writer fails, sticky, and writes nothing more */
  owner o = {NULL, 0, 40, 0};
  jsonw w;
  jsonw_init_grow(&w, 0, owner_grow, &o, NULL, 0);
  jsonw_arr(&w);
  for (int i = 0; i < 20; i++)
    jsonw_str(&w, "abc");
  CHECK_EQ_U(jsonw_error(&w), JSONW_E_NOMEM);
  CHECK(w.len + 1 <= o.size && o.size <= 40);
  size_t n;
  CHECK_EQ_S(jsonw_text(&w, &n), "");
  jsonw_free(&w);
  free(o.p);
  /* the writer's own cap comes first */
  owner big = {NULL, 0, SIZE_MAX, 0};
  jsonw_init_grow(&w, 10, owner_grow, &big, NULL, 0);
  jsonw_str(&w, "0123456789");
  CHECK_EQ_U(jsonw_error(&w), JSONW_E_LIMIT);
  jsonw_free(&w);
  free(big.p);
}

TEST(nesting_and_misuse) {
  jsonw w;
  jsonw_init(&w, 0, 0);
  for (int i = 0; i < JSONW_MAX_DEPTH + 1; i++)
    jsonw_arr(&w);
  CHECK_EQ_U(jsonw_error(&w), JSONW_E_DEPTH);
  jsonw_free(&w);
  jsonw_init(&w, 0, 0);
  jsonw_obj_end(&w); /* nothing open */
  CHECK_EQ_U(jsonw_error(&w), JSONW_E_DEPTH);
  jsonw_reset(&w);
  CHECK_EQ_U(jsonw_error(&w), JSONW_OK);
  jsonw_obj(&w);
  jsonw_key(&w, "a");
  jsonw_arr(&w);
  jsonw_arr_end(&w);
  jsonw_key(&w, "b");
  jsonw_obj(&w);
  jsonw_obj_end(&w);
  jsonw_obj_end(&w);
  size_t n;
  CHECK_EQ_S(jsonw_text(&w, &n), "{\"a\":[],\"b\":{}}");
  CHECK_EQ_S(jsonw_strerror(JSONW_E_LIMIT), "the text would pass its cap");
  jsonw_free(&w);
  /* an empty writer hands out an empty text */
  jsonw_init(&w, 0, 0);
  char *t = jsonw_take(&w, &n);
  CHECK_EQ_S(t, "");
  CHECK_EQ_U(n, 0);
  free(t);
}

int main(void) {
  RUN(strings_as_jansson_writes_them);
  RUN(every_byte_and_every_code_point);
  RUN(nul_inside_a_counted_string);
  RUN(numbers_as_jansson_writes_them);
  RUN(documents_as_jansson_writes_them);
  RUN(the_cap_holds);
  RUN(a_buffer_its_owner_grows);
  RUN(nesting_and_misuse);
  return test_summary();
}
