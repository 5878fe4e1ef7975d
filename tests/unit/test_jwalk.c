/*
 * test_jwalk.c - the piecewise JSON reader (server/jwalk.h) against jansson's
 * whole-text parser as the oracle: on hand-written texts and on 50,000
 * generated ones (valid texts and the same texts with bytes changed,
 * dropped or repeated), walking a text accepts it exactly when
 * json_loadb(JSON_DECODE_ANY | JSON_REJECT_DUPLICATES) does (see same() for
 * texts with a raw NUL byte).  Also: the
 * pieces a walk hands out (jw_piece) equal the same pieces of jansson's
 * tree, member by member.
 */
#include <stdint.h>

#include <jansson.h>

#include "jwalk.h"
#include "jwalk_check.h"
#include "test.h"

static bool jansson_accepts(const char *s, size_t n) {
  json_error_t e;
  json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  json_decref(v);
  return v != NULL;
}

static bool walk_accepts(const char *s, size_t n, char *err, size_t cap) {
  jwalk w;
  jw_init(&w, s, n, NULL);
  bool ok = jw_skip(&w) && jw_finish(&w);
  if (err)
    snprintf(err, cap, "%s", w.error);
  jw_free(&w);
  return ok;
}

static int mismatches;

/* Equal verdicts; for a text with a raw NUL byte (never valid JSON, but
 * jansson 2.14 sometimes takes it for the end of its input: "1\0" passes)
 * only "what the walk accepts, jansson accepts". */
static void same(const char *s, size_t n) {
  char err[320];
  bool a = jansson_accepts(s, n), b = walk_accepts(s, n, err, sizeof err);
  bool nul = memchr(s, 0, n) != NULL;
  if (nul ? (b && !a) : (a != b)) {
    if (mismatches++ < 10)
      fprintf(stderr, "  jansson %s, walk %s (%s): %.*s\n", a ? "accepts" : "refuses",
              b ? "accepts" : "refuses", err, (int)(n > 200 ? 200 : n), s);
  }
}

TEST(hand_written) {
  static const char *const texts[] = {
      "{}", "[]", "{\"a\":1}", " { \"a\" : [ 1 , 2 , { } ] } ", "[1,2,3]", "[1,]", "[,1]", "[1 2]",
      "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{,}", "{\"a\":1 \"b\":2}", "{\"a\":1,\"a\":2}",
      "{\"a\":{\"b\":1,\"b\":2}}", "[{\"x\":1},{\"x\":1}]", "{1:2}", "{\"\\u0000\":1}", "\"\\u0000\"",
      "[\"\\ud800\"]", "[\"\xff\"]", "[\"\xc3\xa9\"]", "[01]", "[-]", "[1e]", "[1.5e300]", "[1e999]",
      "[123456789012345678901234567890]", "[true,false,null]", "[tru]", "[nulll]", "",
      " ", "{", "[", "}", "]", "{\"a\":1}x", "{\"a\":1} ", "{\"a\":1}\n{}", "[[[[[]]]]]",
      "\"just a string\"", "12", "-0.5", "true", "{\"a\":[1,{\"b\":[2,{\"c\":3}]}]}", "[\"a\"\"b\"]",
      "{\"a\":1,\"b\":[],\"c\":{},\"d\":\"\",\"e\":0}", "[1,\n2,\r\n3\t]", "[\"\\x\"]", "[\"\x01\"]",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    same(texts[i], strlen(texts[i]));
  /* a NUL byte inside the text */
  same("[1,\0 2]", 7);
  same("{\"a\":\"x\0\"}", 10);
  same("1\0", 2); /* found by fuzz_jwalk: a NUL after the value is not the end */
  same("{}\0", 3);
  same("{\"a\":\0}", 7);
  CHECK_EQ_U(mismatches, 0);
}

TEST(depth_limit_as_jansson) {
  size_t cap = 6 * (JW_MAX_DEPTH + 2) + 16;
  char *b = malloc(cap);
  for (size_t d = JW_MAX_DEPTH - 2; d <= JW_MAX_DEPTH + 2; d++) {
    size_t n = 0;
    for (size_t i = 0; i < d; i++)
      b[n++] = '[';
    for (size_t i = 0; i < d; i++)
      b[n++] = ']';
    same(b, n);
    n = 0;
    for (size_t i = 0; i < d; i++) {
      memcpy(b + n, "{\"a\":", 5);
      n += 5;
    }
    b[n++] = '1';
    for (size_t i = 0; i < d; i++)
      b[n++] = '}';
    same(b, n);
  }
  free(b);
  CHECK_EQ_U(mismatches, 0);
}

/* ---- generated texts ----------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

typedef struct {
  char *p;
  size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void gen(sbuf *b, int depth) {
  static const char *const scalars[] = {"0", "-1", "12.5", "1e3", "true", "false", "null",
                                        "\"\"", "\"a\"", "\"b\\n\"", "\"\\u00e9\"", "\"x y\""};
  static const char *const keys[] = {"\"a\"", "\"b\"", "\"c\"", "\"frames\"", "\"\\u0061\""};
  static const char *const ws[] = {"", "", " ", "\n", "\t "};
  unsigned k = depth > 4 ? 0 : rnd(4);
  if (k <= 1) {
    puts_(b, scalars[rnd(sizeof scalars / sizeof scalars[0])]);
  } else if (k == 2) {
    puts_(b, "[");
    unsigned n = rnd(4);
    for (unsigned i = 0; i < n; i++) {
      if (i)
        puts_(b, ",");
      puts_(b, ws[rnd(5)]);
      gen(b, depth + 1);
      puts_(b, ws[rnd(5)]);
    }
    puts_(b, "]");
  } else {
    puts_(b, "{");
    unsigned n = rnd(4);
    for (unsigned i = 0; i < n; i++) {
      if (i)
        puts_(b, ",");
      puts_(b, ws[rnd(5)]);
      puts_(b, keys[rnd(5)]); /* duplicates happen: both must refuse them */
      puts_(b, ws[rnd(5)]);
      puts_(b, ":");
      gen(b, depth + 1);
    }
    puts_(b, "}");
  }
}

TEST(generated_texts) {
  sbuf b = {NULL, 0, 0};
  unsigned valid = 0;
  for (int i = 0; i < 50000; i++) {
    b.n = 0;
    gen(&b, 0);
    if (i % 2) {
      /* damage it: change, drop or repeat a byte */
      static const char alphabet[] = "{}[],:\" 01ae\\-.x\xff";
      unsigned at = rnd((unsigned)b.n);
      switch (rnd(3)) {
      case 0: b.p[at] = alphabet[rnd(sizeof alphabet - 1)]; break;
      case 1: memmove(b.p + at, b.p + at + 1, b.n - at - 1); b.n--; break;
      default: put(&b, " ", 1); memmove(b.p + at + 1, b.p + at, b.n - at - 1); break;
      }
    }
    if (jansson_accepts(b.p, b.n))
      valid++;
    same(b.p, b.n);
  }
  free(b.p);
  printf("  %u of 50000 generated texts valid\n", valid);
  CHECK(valid > 20000);
  CHECK_EQ_U(mismatches, 0);
}

TEST(pieces_equal_janssons) {
  const char *text = "{\"modules\": [{\"debug_file\": \"a.pdb\"}, 7],\n"
                     " \"frames\": [{\"module\": 0, \"rva\": \"0x10\"}, {\"module\": 0, \"rva\": 32}],"
                     " \"other\": {\"deep\": [1, [2, [3]]]}}";
  json_error_t e;
  json_t *tree = json_loads(text, 0, &e);
  CHECK(tree != NULL);
  jwalk w;
  jw_init(&w, text, strlen(text), NULL);
  CHECK(jw_object_begin(&w));
  const char *key;
  size_t klen;
  int members = 0;
  size_t frames_at = 0;
  while (jw_object_next(&w, &key, &klen) == 1) {
    members++;
    const json_t *whole = json_object_getn(tree, key, klen);
    if (klen == 5 && !memcmp(key, "other", 5)) {
      CHECK(jw_skip(&w));
    } else {
      if (klen == 6 && !memcmp(key, "frames", 6))
        frames_at = jw_tell(&w);
      CHECK(jw_peek(&w) == '[');
      CHECK(jw_array_begin(&w));
      size_t i = 0;
      while (jw_array_next(&w) == 1)
        CHECK(jc_same_piece(&w, json_array_get(whole, i++)));
      CHECK_EQ_U(i, json_array_size(whole));
    }
  }
  CHECK_EQ_U(members, 3);
  CHECK(jw_finish(&w));
  jw_free(&w);
  /* back to the frames array, read whole */
  jw_init_at(&w, text, strlen(text), frames_at, NULL);
  CHECK(jc_same_piece(&w, json_object_get(tree, "frames")));
  jw_free(&w);
  json_decref(tree);
}

TEST(errors_name_the_place) {
  const char *text = "{\"a\": [1, 2,\n   3 4]}";
  jwalk w;
  jw_init(&w, text, strlen(text), NULL);
  CHECK(!jw_skip(&w));
  CHECK(strstr(w.error, "']' expected near '4'") != NULL);
  CHECK(strstr(w.error, "(line 2, column 6)") != NULL);
  /* sticky */
  CHECK(jw_peek(&w) == -1);
  CHECK(!jw_finish(&w));
  jw_free(&w);
  text = "{\"a\": 1, \"a\": 2}";
  jw_init(&w, text, strlen(text), NULL);
  CHECK(!jw_skip(&w));
  CHECK(strstr(w.error, "duplicate object key") != NULL);
  jw_free(&w);
  text = "[\"\xc3\xa9\xc3\xa9\", tru]";
  jw_init(&w, text, strlen(text), NULL);
  CHECK(!jw_skip(&w));
  fprintf(stderr, "  %s\n", w.error);
  CHECK(strstr(w.error, "invalid token") != NULL);
  CHECK(strstr(w.error, "line 1, column 1") != NULL);
  jw_free(&w);
}

int main(void) {
  RUN(hand_written);
  RUN(depth_limit_as_jansson);
  RUN(generated_texts);
  RUN(pieces_equal_janssons);
  RUN(errors_name_the_place);
  return test_summary();
}
