/*
 * test_request_diff.c - the service's reading of request bodies (request.c
 * on the walker's own JSON scanner, jwalk.c) against the reading before it
 * (request_ref.h: every key, scalar and frame handed to jansson 2.14's
 * json_loadb, frames read from its trees) as the oracle: on every body the
 * integration tests send (tests/fuzz/corpus/request_diff, remade by
 * tests/fuzz/collect_request_bodies.py), hand-written bodies aimed at
 * jansson's rules, generated bodies of both routes, and mutations of all of
 * them (bad escapes, lone and broken surrogate pairs, UTF-8 overlong, as
 * surrogates, past U+10FFFF or cut short, numbers too big or too small,
 * duplicate keys plain and escaped, raw NUL bytes, nesting around jansson's
 * depth limit, bytes changed, dropped, repeated, truncations), both readers
 * must give the same result, the same 400 text (line and column included)
 * and the same arrays (request_diff.h).
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>

#include "request_diff.h"
#include "test.h"

#define DEPTH_LIMIT 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

static unsigned checked, mismatches, accepted;

static void check(const char *s, size_t n) {
  checked++;
  if (!rd_check(s, n, &accepted) && mismatches++ > 20) {
    fprintf(stderr, "too many differences\n");
    exit(1);
  }
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return n ? (unsigned)(rng % n) : 0;
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
  b->p[b->n] = '\0';
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }
static void putf(sbuf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  put(b, tmp, (size_t)k);
}

/* ---- what mutations insert ---------------------------------------------------------- */

/* values that test jansson's rules where a value goes (NUL bytes among them) */
typedef struct {
  const char *s;
  size_t n;
} lit;
#define L(x) {x, sizeof x - 1}
static const lit odd_values[] = {
    L("\"\\x\""), L("\"\\u12\""), L("\"\\u00zz\""), L("\"\\u\""), L("\"\\"), L("\"abc"),
    L("\"a\nb\""), L("\"a\tb\""), L("\"\\ud800\""), L("\"\\udc00\""), L("\"\\ud800\\u0041\""),
    L("\"\\ud800\\ud800\""), L("\"\\ud83d\\ude00\""), L("\"\\uD800x\""), L("\"\\ud800\\\""),
    L("\"\\ud800\\u12\""), L("\"\\u0000\""), L("\"a\\u0000b\""), L("\"0\\u0078ff\""),
    L("\"\\u00e9\""), L("\"\xc0\xaf\""), L("\"\xe0\x80\xaf\""), L("\"\xf0\x80\x80\xaf\""),
    L("\"\xed\xa0\x80\""), L("\"\xf4\x90\x80\x80\""), L("\"\xc3\""), L("\"\xc3\xa9\""),
    L("\"\xe2\x82\""), L("\"\xff\""), L("\"\x80\""), L("\"\x7f\""),
    L("\"\\/\\b\\f\\n\\r\\t\\\"\\\\\""), L("1e999"), L("-1e999"), L("1e-999"), L("1.5e308"),
    L("2e308"), L("99999999999999999999"), L("9223372036854775807"), L("9223372036854775808"),
    L("-9223372036854775808"), L("-9223372036854775809"), L("-0"), L("01"), L("-01"), L("1."),
    L("1.e5"), L("1e"), L("1e+"), L("1E-2"), L("-"), L("--1"), L("+1"), L(".5"), L("0x10"),
    L("\"0x\""), L("\"0X1f\""), L("\"0x1g\""), L("\"0xFFFFFFFFFFFFFFFFF\""),
    L("\"0x00000000000000000001\""), L("true"), L("false"), L("null"), L("tru"), L("nul"),
    L("truex"), L("True"), L("NaN"), L("Infinity"), L("1\0"), L("true\0"), L("\0"), L("1\xff"),
    L("1.5\xff"), L("tru\xff"), L("\xc3\xa9"), L("\xff"), L("[]"), L("{}"), L("[1,]"),
    L("{\"a\":1,}"), L("[[[]]]"), L("{\"a\":1,\"a\":2}"), L("{\"\\u0061\":1,\"a\":2}"),
    L("{\"\\u0000\":1}"), L("{\"a\\u0000\":1}"), L("-1"), L("4294967296"),
    L("\"aaaaaaaaaaaaaaaaaaaaaaaa\\x\""), L("123456789012345678901234567890"),
    L("\"\\ud800\\udc00\\ud800\""), L("{\"module\":0,\"rva\":1}"), L("[0,1]"), L("[0,\"0x10\"]"),
    L("[-1,-1]"),
};

/* keys, some of them the names the readers look for, some escaped */
static const char *const odd_keys[] = {
    "\"module\"", "\"rva\"", "\"\\u0072va\"", "\"instruction_addr\"", "\"token\"", "\"il_offset\"",
    "\"stack\"", "\"adjust_instruction_addr\"", "\"frames\"", "\"modules\"", "\"fr\\u0061mes\"",
    "\"timeout\"", "\"instruction_addr_adjustment\"", "\"jobs\"", "\"memoryMap\"", "\"stacks\"",
    "\"\\u0000\"", "\"a\\u0000\"", "\"\\ud800\"", "\"\xff\"", "\"\"", "\"x\"", "1", "tru", "\"\\x\"",
};

static const char alphabet[] = "{}[],:\" \n\t01-9aeEfnrtux.+\\\x7f\x80\xbf\xc0\xc3\xe0\xed\xf0\xf4\xf5\xff";

/* A mutation of b into out: bytes changed, dropped, repeated, a span cut
 * or doubled, odd values or keys put in, a key repeated, nesting. */
static void mutate(const char *b, size_t n, sbuf *out) {
  out->n = 0;
  size_t at = n ? rnd((unsigned)n + 1) : 0;
  switch (rnd(12)) {
  case 0: /* change a byte */
    put(out, b, n);
    if (n) {
      size_t k = rnd((unsigned)n);
      out->p[k] = rnd(8) ? alphabet[rnd(sizeof alphabet - 1)] : (char)rnd(256);
    }
    return;
  case 1: /* drop bytes */
    put(out, b, at);
    if (at < n) {
      size_t k = 1 + rnd(4);
      put(out, b + at + (k < n - at ? k : n - at), n - at - (k < n - at ? k : n - at));
    }
    return;
  case 2: { /* repeat a span */
    size_t k = at < n ? 1 + rnd((unsigned)(n - at < 40 ? n - at : 40)) : 0;
    put(out, b, at + k);
    put(out, b + at, n - at);
    return;
  }
  case 3: /* truncate */
    put(out, b, at);
    return;
  case 4:
  case 5:
  case 6: { /* an odd value after a ':' or ',' or '[' */
    size_t k = at;
    while (k < n && b[k] != ':' && b[k] != ',' && b[k] != '[')
      k++;
    if (k < n)
      k++;
    put(out, b, k);
    const lit *v = &odd_values[rnd(sizeof odd_values / sizeof odd_values[0])];
    put(out, v->s, v->n);
    if (rnd(2) && k < n) { /* in place of the value that was there */
      size_t e = k;
      int depth = 0;
      while (e < n && (depth > 0 || (b[e] != ',' && b[e] != '}' && b[e] != ']'))) {
        if (b[e] == '{' || b[e] == '[')
          depth++;
        else if (b[e] == '}' || b[e] == ']')
          depth--;
        e++;
      }
      k = e;
    } else if (k < n) {
      puts_(out, ",");
    }
    put(out, b + k, n - k);
    return;
  }
  case 7:
  case 8: { /* an odd key: at the start of an object's member */
    size_t k = at;
    while (k < n && b[k] != '{' && b[k] != ',')
      k++;
    if (k < n)
      k++;
    put(out, b, k);
    const lit *v = &odd_values[rnd(sizeof odd_values / sizeof odd_values[0])];
    putf(out, "%s:", odd_keys[rnd(sizeof odd_keys / sizeof odd_keys[0])]);
    put(out, v->s, v->n);
    if (k < n && b[k] != '}')
      puts_(out, ",");
    put(out, b + k, n - k);
    return;
  }
  case 9: { /* a key repeated: the member before the cursor again */
    size_t k = at;
    while (k > 0 && b[k] != '"')
      k--;
    size_t s = k;
    while (s > 0 && b[s - 1] != '"')
      s--;
    if (s > 0)
      s--;
    put(out, b, at);
    if (k > s) {
      put(out, ",", 1);
      put(out, b + s, k - s + 1);
      puts_(out, ":0");
    }
    put(out, b + at, n - at);
    return;
  }
  case 10: { /* nesting near jansson's limit, as a value */
    size_t k = at;
    while (k < n && b[k] != ':' && b[k] != '[')
      k++;
    if (k < n)
      k++;
    put(out, b, k);
    size_t d = DEPTH_LIMIT - 4 + rnd(8);
    bool obj = rnd(2);
    for (size_t i = 0; i < d; i++)
      puts_(out, obj ? "{\"a\":" : "[");
    puts_(out, rnd(2) ? "1" : obj ? "{}" : "[]");
    for (size_t i = 0; i < d; i++)
      puts_(out, obj ? "}" : "]");
    if (k < n)
      puts_(out, ",");
    put(out, b + k, n - k);
    return;
  }
  default: /* a raw NUL after a number or literal */
    put(out, b, n);
    for (size_t k = at; k < n; k++)
      if ((out->p[k] >= '0' && out->p[k] <= '9') || out->p[k] == 'e' || out->p[k] == 'l') {
        if (k + 1 < out->n)
          out->p[k + 1] = '\0';
        break;
      }
    return;
  }
}

static void check_mutations(const char *b, size_t n, unsigned count) {
  sbuf m = {0};
  for (unsigned i = 0; i < count; i++) {
    mutate(b, n, &m);
    check(m.p ? m.p : "", m.n);
  }
  free(m.p);
}

/* ---- hand-written bodies ----------------------------------------------------------------- */

#define M "{\"debug_file\":\"a.pdb\",\"debug_id\":\"3773E3530B2E493882ECA7324B16C2D91\"}"
#define F(frames) "{\"modules\":[" M "," M "],\"frames\":[" frames "]}"
#define V(stacks) "{\"memoryMap\":[[\"a.pdb\",\"3773E3530B2E493882ECA7324B16C2D91\"]],\"stacks\":[" stacks "]}"

static const char *const bodies[] = {
    F("{\"module\":0,\"rva\":\"0x10\"},{\"module\":1,\"rva\":32}"),
    F("{\"module\":0,\"rva\":\"0x10\",\"module\":1}"),
    F("{\"module\":0,\"\\u0072va\":\"0\\u0078\\u0031\\u0030\"}"),
    F("{\"module\":0,\"rva\":\"0x10\",\"\\u0072va\":1}"),
    F("{\"module\":0,\"rva\":1,\"x\":{\"a\":1,\"a\":2}}"),
    F("{\"module\":0,\"rva\":1,\"x\":[{\"a\":1},{\"a\":1}]}"),
    F("{\"module\":0,\"rva\":1\0}"),
    F("{\"module\":0\0,\"rva\":1\0}"),
    F("{\"module\":0,\"rva\":true\0,\"x\":null\0}"),
    F("{\"module\":0,\"rva\":\"0x10\"\0}"),
    F("{\"module\":0,\"rva\":12\xff}"),
    F("{\"module\":0,\"rva\":\"\xff\"}"),
    F("{\"module\":0,\"rva\":1 \xff}"),
    F("{\"module\":0,\"rva\":1}\xff"),
    F("12\xff"),
    F("1\0"),
    F("{\"module\":0,\"rva\":1,\"\\u0000\":1}"),
    F("{\"module\":0,\"rva\":1 \"\\u0000\"}"),
    F("{\"module\":0,\"rva\":1 \"x\"}"),
    F("{\"module\":0,\"rva\":1,}"),
    F("{\"module\":0,\"rva\":1,,}"),
    F("{\"module\":0 \"rva\":1}"),
    F("{\"module\" 0}"),
    F("{\"module\":}"),
    F("{\"module\":0,\"rva\":1e999}"),
    F("{\"module\":0,\"rva\":-1e999}"),
    F("{\"module\":0,\"rva\":1e-999}"),
    F("{\"module\":0,\"rva\":99999999999999999999}"),
    F("{\"module\":0,\"rva\":-9223372036854775809}"),
    F("{\"module\":-1,\"rva\":-9223372036854775808}"),
    F("{\"module\":4294967296,\"rva\":\"0xFFFFFFFFFFFFFFFFF\"}"),
    F("{\"module\":\"0x1\",\"instruction_addr\":\"0x1000\",\"adjust_instruction_addr\":true,\"stack\":3}"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":\"0x10\"}"),
    F("{\"module\":0,\"token\":100663297,\"il_offset\":4294967296}"),
    F("{\"module\":0,\"rva\":1,\"adjust_instruction_addr\":1}"),
    F("{\"module\":0,\"rva\":1,\"stack\":-1}"),
    F("{\"module\":0,\"rva\":1.5}"),
    F("[1,2]"),
    F("\"\\ud800\""),
    F("{\"module\":0,\"rva\":\"\\ud800\\u0041\"}"),
    F("{\"module\":0,\"rva\":\"\\udc00\",\"x\":\"\\x\"}"),
    F("{\"module\":0,\"rva\":\"\\ud800\\u12\"}"),
    F("{\"module\":0,\"rva\":\"\xed\xa0\x80\"}"),
    F("{\"module\":0,\"rva\":\"\xc0\xaf\"}"),
    F("{\"module\":0,\"rva\":\"\xf4\x90\x80\x80\"}"),
    F("{\"module\":0,\"rva\":\"\xe2\x82\"}"),
    F("{\"module\":0,\"rva\":\"a\nb\"}"),
    F("{\"module\":0,\"rva\":tru}"),
    F("{\"module\":0,\"rva\":aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}"),
    F("{\"module\":0,\"rva\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\x\"}"),
    F("{\"module\":0,\"rva\":\xc3\xa9}"),
    F("{\xc3\xa9:1}"),
    F("{tru:1}"),
    F("{\"module\":0,\"rva\":1}{"),
    /* bytes that are not UTF-8 where a key goes, in a frame past max_frames
     * (skipped by the walk, not read as a piece): the same column */
    F("{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},"
      "{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},"
      "{\"module\":0,\"rva\":1, \xed\xa0\x80\"stack\":1}"),
    F("{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},"
      "{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},{\"module\":0,\"rva\":1},"
      "{\"module\":0,\"rva\":1,\xff}"),
    /* around request.c's usual_frame: what it takes, and each way out of it */
    F("{\"module\": 1, \"rva\": \"0x1a2B\"}, { \"module\" :0 ,\"rva\" : \"0xFFFFFFFF\" }"),
    F("{\"module\":999999999,\"rva\":\"0x10\"},{\"module\":4294967295,\"rva\":\"0x10\"}"),
    F("{\"module\":01,\"rva\":\"0x10\"}"),
    F("{\"module\":0,\"rva\":\"0X10\"},{\"module\":0,\"rva\":\"0x\"}"),
    F("{\"module\":0,\"rva\":\"0x100000000\"},{\"module\":0,\"rva\":\"0x0000000010\"}"),
    F("{\"module\":0,\"rva\":\"0x1g\"},{\"module\":0,\"rva\":\"0x10\",}"),
    F("{\"module\":-0,\"rva\":\"0x10\"},{\"module\":1.0,\"rva\":\"0x10\"}"),
    F("{\"module\":0,\"rva\":\"0x10\"\t\r\n}\n,{\"module\":0,\"rva\":\"0x10\"}}"),
    F("{\"module\":0,\"rva\":\"0x10"),
    F("{\"module\":0,\"rva\":\"0x10\""),
    F("{\"module\":0,\"rva\":\"0x10\"},{\"module\":0,\"rva\":\"0x10\"}"
      ",{\"module\":2,\"rva\":\"0x10\"},{\"module\":0,\"rva\":\"0x10\",\"stack\":1}"),
    /* its two spellings read as whole literals, and near misses of them */
    F("{\"module\":0,\"rva\":\"0x10\"},{\"module\": 1, \"rva\": \"0xabcdef12\"},{\"module\": 0,\"rva\":\"0x10\"}"),
    F("{\"module\":0, \"rva\": \"0x10\"},{\"module\": 0, \"rva\": \"0x10\" },{\"module\":  0, \"rva\": \"0x10\"}"),
    F("{\"module\":0,\"rva\":\"0x123456789\"},{\"module\": 0, \"rva\": \"0x\"},{\"module\": 00, \"rva\": \"0x1\"}"),
    F("{\"module\":0,\"rva\":\"0X10\"},{\"module\": 0, \"rva\": \"0x1\"}"),
    F("{\"module\": 0, \"rva\": \"0x1"),
    F("{\"module\":0,\"rva\":\"0x1\""),
    F("{\"module\":0,\"rva\":\"0x1\"}"),
    /* the same for its managed frames */
    F("{\"module\": 1, \"token\": \"0x06000001\", \"il_offset\": 5}, { \"module\" :0 ,\"token\" : \"0x6ffffff\" , \"il_offset\" : 999999999 }"),
    F("{\"module\":0,\"token\":\"0x07000001\",\"il_offset\":0},{\"module\":0,\"token\":\"0X06000001\",\"il_offset\":0}"),
    F("{\"module\":0,\"token\":\"0x006000001\",\"il_offset\":0},{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":01}"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":1000000000},{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":4294967296}"),
    F("{\"module\":0,\"token\":\"0x06000001\"},{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":-1}"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":1,\"rva\":\"0x10\"}"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offse\":1},{\"module\":0,\"token\":\"0x06000001\",\"il_offset \":1}"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":\"0x10\"},{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":1.0}"),
    F("{\"module\":0,\"il_offset\":1,\"token\":\"0x06000001\"},{\"module\":0,\"token\":\"0x\",\"il_offset\":1}"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":1"),
    F("{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":"),
    "{\"modules\":[],\"frames\":[],\"timeout\":1.5}",
    "{\"modules\":[],\"frames\":[],\"timeout\":1e999}",
    "{\"modules\":[],\"frames\":[],\"timeout\":12\xff}",
    "{\"modules\":[],\"frames\":[],\"timeout\":\"\\u0000\"}",
    "{\"modules\":[],\"frames\":[],\"timeout\":1\0}",
    "{\"modules\":[],\"frames\":[],\"instruction_addr_adjustment\":\"a\\u006c\\u006c\"}",
    "{\"modules\":[],\"frames\":[],\"\\u0000\":1}",
    "{\"modules\":[],\"frames\":[],\"x\" \"\\u0000\"}",
    "{\"modules\":[],\"frames\":[],\"x\":1 \"\\u0000\"}",
    "{\"modules\":[],\"frames\":[],\"x\":\"a\"\0}",
    "{\"modules\":[],\"frames\":[] \xff}",
    "{\"modules\":[],\"frames\":[],\"modul\\u0065s\":[]}",
    "{\"modules\":[" M ",{\"debug_file\":\"\\ud800\",\"debug_id\":1}],\"frames\":[{\"module\":1,\"rva\":1}]}",
    V("[[0,\"0x10\"],[0,16],[0,-1],[1,\"0xFFFFFFFFFFFFFFFFFF\"],[0,\"0\\u0078\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\\u0046\"]]"),
    /* around request.c's usual_v5_frame: what it takes, and each way out of it */
    V("[[ 1 , \"0x1a2B\" ],[0,\"0X10\"],[999999999,16],[0,0],[0,999999999999999]]"),
    V("[[0,\"0xFFFFFFFFFFFFFFFF\"],[0,\"0x10000000000000000\"],[0,\"0x00000000000000001\"]]"),
    V("[[0,1000000000000000],[0,9999999999999999999],[0,18446744073709551616]]"),
    V("[[01,16],[0,016],[1000000000,16],[4294967296,16],[-1,16],[-0,16]]"),
    V("[[0,\"0x\"],[0,\"0x1g\"],[0,\"x10\"],[0,-16],[0,1e3],[0,1.0]]"),
    V("[[0,16\t\r\n]\n,[0,16],[ ]]"),
    V("[[0,\"0x10"),
    V("[[0,16"),
    V("[[0,"),
    V("[[0,16]"),
    V("[[0,\"0x10\",1]]"),
    V("[[0]]"),
    V("[[\"0\",1]]"),
    V("[[0,1.5]]"),
    V("[[0,1\0]]"),
    V("[[0,1]\0]"),
    V("[[0,\"\\ud800\"]]"),
    V("[{\"a\":1,\"a\":2}]"),
    V("[[[0,1]]]"),
    "{\"jobs\":[" V("[[0,1]]") "," V("[[0,\"x\"]]") "]}",
    "{\"jobs\":[{\"memoryMap\":[],\"memoryMap\":[],\"stacks\":[]}]}",
    "{\"jobs\":[{\"memoryM\\u0061p\":[],\"stacks\":[[[0,1\0]]]}]}",
    "", " ", "[", "{", "{}", "[]", "\"x\"", "1", "\xef\xbb\xbf{}", "{\"modules\":[],\"frames\":[]}",
};

TEST(hand_written) {
  unsigned before = mismatches;
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
    /* bodies with a NUL in them: up to the closing brace of the outermost */
    const char *b = bodies[i];
    size_t n = strlen(b);
    check(b, n);
  }
  /* the same with their NUL bytes: F() bodies written with "\0" are cut
   * by strlen, so spell those out */
  static const struct {
    const char *s;
    size_t n;
  } with_nul[] = {
#define W(lit) {lit, sizeof lit - 1}
      W(F("{\"module\":0,\"rva\":1\0}")),
      W(F("{\"module\":0\0,\"rva\":1\0}")),
      W(F("{\"module\":0,\"rva\":true\0,\"x\":null\0}")),
      W(F("{\"module\":0,\"rva\":\"0x10\"\0}")),
      W(F("1\0")),
      W(F("{\"module\":0\0\0,\"rva\":1}")),
      W(F("{\"module\":0,\"rva\":1\0 }")),
      W(F("{\"module\":0,\"rva\":1.5\0}")),
      W(F("{\"module\":0,\"rva\":1e5\0,\"x\":[1\0,2\0]}")),
      W(F("{\"module\":0,\"rva\":\"a\0\"}")),
      W(F("{\"module\":0,\"rva\":1}\0")),
      W(F("{\"module\":0,\"rva\":-\0}")),
      W(F("{\"module\":0,\"rva\":\"\\\0\"}")),
      W(F("{\"module\":0,\"rva\":\"\\u00\0\"}")),
      W("{\"modules\":[],\"frames\":[],\"timeout\":1\0}"),
      W("{\"modules\":[],\"frames\":[],\"x\":\"a\"\0}"),
      W("{\"modules\":[],\"frames\":[]}\0"),
      W("{\"modules\":[],\"frames\":[\0]}"),
      W(V("[[0,1\0]]")),
      W(V("[[0,1]\0]")),
      W(V("[[0\0,1\0]\0]")),
      W("{\"jobs\":[{\"memoryMap\":[],\"stacks\":[[[0,1\0]]]}]}"),
#undef W
  };
  for (size_t i = 0; i < sizeof with_nul / sizeof with_nul[0]; i++)
    check(with_nul[i].s, with_nul[i].n);
  /* every truncation of each */
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
    for (size_t k = 0; k < strlen(bodies[i]); k++)
      check(bodies[i], k);
  for (size_t i = 0; i < sizeof with_nul / sizeof with_nul[0]; i++)
    for (size_t k = 0; k < with_nul[i].n; k++)
      check(with_nul[i].s, k);
  CHECK_EQ_U(mismatches, before);
}

/* Deep nesting at the walker's levels and inside a frame, around jansson's
 * limit (which a piece counts from its own start). */
TEST(depth) {
  unsigned before = mismatches;
  sbuf b = {0};
  static const char *const places[][2] = {
      {"{\"modules\":[],\"frames\":[{\"module\":0,\"rva\":1,\"x\":", "}]}"},
      {"{\"modules\":[],\"frames\":[", "]}"},
      {"{\"modules\":[],\"frames\":[],\"x\":", "}"},
      {"{\"memoryMap\":[],\"stacks\":[[", "]]}"},
      {"{\"memoryMap\":[],\"stacks\":[[[0,", "]]]}"},
      {"{\"jobs\":[{\"memoryMap\":[],\"stacks\":[],\"x\":", "}]}"},
  };
  for (size_t pl = 0; pl < sizeof places / sizeof places[0]; pl++)
    for (size_t d = DEPTH_LIMIT - 4; d <= DEPTH_LIMIT + 2; d++)
      for (int kind = 0; kind < 4; kind++) {
        b.n = 0;
        puts_(&b, places[pl][0]);
        for (size_t i = 0; i < d; i++)
          puts_(&b, kind & 1 ? "{\"a\":" : "[");
        puts_(&b, kind & 2 ? "\"\\u0000\"" : kind & 1 ? "1" : "");
        for (size_t i = 0; i < d; i++)
          puts_(&b, kind & 1 ? "}" : "]");
        puts_(&b, places[pl][1]);
        check(b.p, b.n);
      }
  free(b.p);
  CHECK_EQ_U(mismatches, before);
}

/* Objects with many keys (the duplicate check's hash index) and a
 * duplicate among them, first or last, plain or escaped. */
TEST(many_keys) {
  unsigned before = mismatches;
  sbuf b = {0};
  static const size_t counts[] = {7, 8, 9, 10, 16, 17, 33, 100, 1000, 20000};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int dup = 0; dup < 4; dup++)
      for (int where = 0; where < 3; where++) {
        b.n = 0;
        if (where == 0)
          puts_(&b, "{\"modules\":[],\"frames\":[{\"module\":0,\"rva\":1");
        else if (where == 1)
          puts_(&b, "{\"modules\":[],\"frames\":[],\"x\":{\"y\":0");
        else
          puts_(&b, "{\"modules\":[],\"frames\":[]");
        for (size_t i = 0; i < counts[c]; i++)
          putf(&b, ",\"k%zu\":%zu", i, i);
        if (dup == 1)
          puts_(&b, ",\"k0\":1");
        else if (dup == 2)
          putf(&b, ",\"k%zu\":1", counts[c] - 1);
        else if (dup == 3)
          puts_(&b, ",\"\\u006b3\":1"); /* "k3" escaped */
        puts_(&b, where == 0 ? "}]}" : where == 1 ? "}}" : "}");
        check(b.p, b.n);
      }
  free(b.p);
  CHECK_EQ_U(mismatches, before);
}

/* ---- generated bodies -------------------------------------------------------------------- */

static const char *const values[] = {"0", "1", "7", "\"0x10\"", "\"0X1F\"", "\"0x\"", "\"0xg\"",
                                     "\"0x100000000\"", "4294967296", "-1", "\"10\"", "true", "false",
                                     "null", "1.5", "[]", "{}", "\"0x06000001\"", "100663297",
                                     "\"\\u0030x1\"", "[0,1]", "{\"a\":[1,{\"b\":2}]}"};
static const char *const fkeys[] = {"module", "rva", "instruction_addr", "token", "il_offset",
                                    "stack", "adjust_instruction_addr", "x", "\\u0072va"};
static const char *const ws[] = {"", "", "", " ", "\n", "\t ", "\r\n"};

static void gen_frame(sbuf *b) {
  if (!rnd(20)) {
    puts_(b, values[rnd(sizeof values / sizeof values[0])]);
    return;
  }
  puts_(b, "{");
  unsigned n = rnd(5);
  bool seen[sizeof fkeys / sizeof fkeys[0]] = {false};
  for (unsigned i = 0; i < n; i++) {
    unsigned k = rnd(sizeof fkeys / sizeof fkeys[0]);
    if (seen[k] && rnd(8))
      continue;
    seen[k] = true;
    if (i)
      puts_(b, ",");
    putf(b, "%s\"%s\"%s:%s", ws[rnd(7)], fkeys[k], ws[rnd(7)], ws[rnd(7)]);
    puts_(b, values[rnd(sizeof values / sizeof values[0])]);
  }
  puts_(b, "}");
}

static void gen_symbolicate(sbuf *b) {
  b->n = 0;
  puts_(b, "{");
  unsigned nm = rnd(4), nf = rnd(8);
  bool first = true;
  if (rnd(8)) {
    puts_(b, "\"modules\":[");
    for (unsigned i = 0; i < nm; i++)
      putf(b, "%s%s", i ? "," : "", rnd(6) ? M : "{\"debug_file\":\"b.pdb\",\"debug_id\":\"nope\"}");
    puts_(b, "]");
    first = false;
  }
  if (rnd(8)) {
    putf(b, "%s%s\"frames\"%s:%s[", first ? "" : ",", ws[rnd(7)], ws[rnd(7)], ws[rnd(7)]);
    for (unsigned i = 0; i < nf; i++) {
      if (i)
        puts_(b, ",");
      puts_(b, ws[rnd(7)]);
      gen_frame(b);
    }
    puts_(b, "]");
    first = false;
  }
  if (!rnd(4))
    putf(b, "%s\"timeout\":%s", first ? "" : ",", values[rnd(sizeof values / sizeof values[0])]), first = false;
  if (!rnd(4))
    putf(b, "%s\"instruction_addr_adjustment\":\"%s\"", first ? "" : ",",
         (const char *[]){"none", "all", "all_but_first", "some"}[rnd(4)]);
  puts_(b, "}");
}

static void gen_v5(sbuf *b) {
  b->n = 0;
  bool jobs = rnd(3) == 0;
  unsigned nj = jobs ? 1 + rnd(3) : 1;
  if (jobs)
    puts_(b, "{\"jobs\":[");
  for (unsigned j = 0; j < nj; j++) {
    putf(b, "%s{\"memoryMap\":[[\"a.pdb\",\"3773E3530B2E493882ECA7324B16C2D91\"]%s],\"stacks\":[", j ? "," : "",
         rnd(2) ? ",[\"b.pdb\",\"zz\"]" : "");
    unsigned ns = rnd(3);
    for (unsigned s = 0; s < ns; s++) {
      puts_(b, s ? ",[" : "[");
      unsigned nf = rnd(6);
      for (unsigned f = 0; f < nf; f++) {
        if (f)
          puts_(b, ",");
        if (rnd(10))
          putf(b, "[%s,%s%s]", values[rnd(3)], values[rnd(sizeof values / sizeof values[0])], rnd(12) ? "" : ",1");
        else
          puts_(b, values[rnd(sizeof values / sizeof values[0])]);
      }
      puts_(b, "]");
    }
    puts_(b, "]}");
  }
  if (jobs)
    puts_(b, "]}");
}

TEST(generated) {
  unsigned before = mismatches, before_ok = accepted;
  sbuf b = {0};
  int n = (int)test_sweep(6000, 2000);
  for (int i = 0; i < n; i++) {
    if (i % 2)
      gen_v5(&b);
    else
      gen_symbolicate(&b);
    check(b.p, b.n);
    check_mutations(b.p, b.n, (unsigned)test_sweep(4, 1));
  }
  free(b.p);
  printf("  %u readings of %d generated bodies accepted\n", accepted - before_ok, n);
  CHECK(accepted - before_ok > (unsigned)n * 2 / 5); /* about half the bodies are valid */
  CHECK_EQ_U(mismatches, before);
}

/* Under a memory budget: the service's reader reserves its duplicate-key
 * state (about 70 bytes a key) where the reference does not, so a many-key
 * body may be refused (RQ_BUDGET) - only when its reading with no limit
 * needs more than the budget (rd_compare_budget), and otherwise both agree
 * as without one.  Bodies of 9 to 50,000 keys in a frame, an unknown
 * member and the top level, with and without a duplicate, under budgets
 * from 16 KiB to 64 MiB; the large ones must be refused, the small ones
 * not. */
TEST(budget) {
  unsigned before = mismatches, refused = 0, refused_big = 0;
  sbuf b = {0};
  static const size_t counts[] = {9, 100, 1000, 50000};
  static const uint64_t budgets[] = {16 << 10, 256 << 10, 2 << 20, 64 << 20};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int dup = 0; dup < 2; dup++)
      for (int where = 0; where < 3; where++) {
        b.n = 0;
        if (where == 0)
          puts_(&b, "{\"modules\":[],\"frames\":[{\"module\":0,\"rva\":1");
        else if (where == 1)
          puts_(&b, "{\"modules\":[],\"frames\":[],\"x\":{\"y\":0");
        else
          puts_(&b, "{\"modules\":[],\"frames\":[]");
        for (size_t i = 0; i < counts[c]; i++)
          putf(&b, ",\"k%zu\":%zu", i, i);
        if (dup)
          puts_(&b, ",\"k0\":1");
        puts_(&b, where == 0 ? "}]}" : where == 1 ? "}}" : "}");
        for (size_t m = 0; m < sizeof budgets / sizeof budgets[0]; m++) {
          /* a sampled sweep reads the 50,000 keys under the budgets that
           * refuse them only (the others read them as with no limit) */
          if (counts[c] == 50000 && !test_sweep(1, 0) && budgets[m] != 2 << 20 &&
              budgets[m] != 16 << 10)
            continue;
          unsigned r = 0;
          checked++;
          if (!rd_check_budget(b.p, b.n, budgets[m], &r))
            mismatches++;
          refused += r;
          /* 50,000 keys need about 3 MB: past 2 MiB on all four readings */
          if (counts[c] == 50000 && budgets[m] == 2 << 20)
            refused_big += r;
          if (counts[c] == 9 && budgets[m] >= 256 << 10)
            CHECK_EQ_U(r, 0);
        }
      }
  /* the generated bodies too: small, so no refusal past 256 KiB */
  for (int i = 0; i < 500; i++) {
    if (i % 2)
      gen_v5(&b);
    else
      gen_symbolicate(&b);
    unsigned r = 0;
    checked++;
    if (!rd_check_budget(b.p, b.n, 256 << 10, &r))
      mismatches++;
    CHECK_EQ_U(r, 0);
  }
  free(b.p);
  printf("  %u readings refused for the budget, each needing more than it\n", refused);
  CHECK_EQ_U(refused_big, 2 * 2 * 3 * 2);
  CHECK_EQ_U(mismatches, before);
}

/* The strings the reader copies while it reads an entry (a module's fields,
 * a memoryMap entry, a v5 module_offset too wide for 64 bits) are reserved
 * in the budget like the arrays: a module whose code_id is 100,000 bytes
 * (the copy: 128 KiB of buffer) is refused under a 64 KiB budget, where
 * everything else it needs (its arrays, the texts of its invalid module's
 * answer) fits, and the reference answers it; likewise a v5 frame whose
 * module_offset is that long under a 224 KiB budget (the text kept for the
 * answer: 128 KiB, counted before too; the copy: 128 KiB more).  Each
 * refusal only where the reading with no limit needs more (rd_compare_budget);
 * the same bodies with the strings under members the reader does not keep
 * are read alike under those budgets. */
TEST(budget_texts) {
  unsigned before = mismatches;
  sbuf b = {0};
  for (int v5 = 0; v5 < 2; v5++)
    for (int kept = 0; kept < 2; kept++) {
      b.n = 0;
      if (!v5)
        putf(&b, "{\"modules\":[{\"debug_file\":\"a.pdb\",\"debug_id\":\"%032d-1\",\"%s\":\"", 1,
             kept ? "code_id" : "code_ix");
      else
        putf(&b, "{\"memoryMap\":[[\"a.pdb\",\"%032d1\"]],%s", 1, kept ? "\"stacks\":[[[0,\"0x" : "\"x\":\"");
      for (int i = 0; i < 100000; i++)
        puts_(&b, v5 ? "f" : "A");
      puts_(&b, !v5 ? "\"}],\"frames\":[]}" : kept ? "\"]]]}" : "\",\"stacks\":[[[0,\"0x1\"]]]}");
      uint64_t max = v5 ? 224 << 10 : 64 << 10;
      const char *what;
      rd_outcome x, y;
      uint64_t peak;
      checked++;
      bool same = rd_compare_budget(b.p, b.n, v5, &RD_LIMITS[1], max, &what, &x, &y, &peak);
      if (!same) {
        fprintf(stderr, "  %s, kept %d: %s differs (%llu bytes with no limit)\n", v5 ? "v5" : "symbolicate", kept,
                what, (unsigned long long)peak);
        mismatches++;
      }
      printf("  %s, %s: %llu bytes with no limit, under %llu: %s\n", v5 ? "v5" : "symbolicate",
             kept ? "100,000-byte string copied" : "the same string not kept", (unsigned long long)peak,
             (unsigned long long)max, x.res == RQ_BUDGET ? "refused" : "read");
      CHECK_EQ_U(y.res, RQ_OK);
      CHECK_EQ_U(x.res, (kept ? RQ_BUDGET : RQ_OK));
    }
  free(b.p);
  CHECK_EQ_U(mismatches, before);
}

/* ---- bodies from files --------------------------------------------------------------------- */

/* Calls fn on the bytes of every file in the source tree's folder sub: the
 * number of files, or -1 when the folder is not there. */
static int each_body(const char *sub, void (*fn)(const char *name, const char *p, size_t n)) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", src ? src : ".", sub);
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f)
      continue;
    sbuf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
      put(&b, chunk, got);
    fclose(f);
    files++;
    fn(e->d_name, b.p ? b.p : "", b.n);
    free(b.p);
  }
  closedir(d);
  return files;
}

/* ---- the integration tests' bodies ------------------------------------------------------- */

static void integration_body(const char *name, const char *p, size_t n) {
  (void)name;
  check(p, n);
  /* truncations: every one of a small body, 64 of a larger (a sampled
   * sweep: every 8th, 16) */
  size_t step = n <= 1024 ? test_sweep(1, 8) : n / test_sweep(64, 16);
  for (size_t k = 0; k < n; k += step)
    check(p, k);
  check_mutations(p, n, (unsigned)(n <= 4096 ? test_sweep(100, 10) : test_sweep(15, 2)));
}

TEST(integration_bodies) {
  unsigned before = mismatches, before_ok = accepted;
  int files = each_body("tests/fuzz/corpus/request_diff", integration_body);
  if (files < 0)
    SKIP("no tests/fuzz/corpus/request_diff (PDBSYM_SOURCE_DIR)");
  printf("  %d bodies, %u readings accepted\n", files, accepted - before_ok);
  CHECK(files > 50);
  CHECK_EQ_U(mismatches, before);
}

/* ---- parts refused for the budget ------------------------------------------------------- *
 * Under a budget the two readers run out of memory at different places
 * (the reference's trees are not in the count, the walker's key state is),
 * so a part one of them keeps the other may refuse.  A refused part is read
 * and checked as it would have been, not kept: an error in it or after it
 * is said as it is with memory.  Before that, a frame or memoryMap entry
 * skipped for the budget was walked value by value, which words a stream
 * error differently (a 400 whose column or "near" text depended on where
 * the budget ran out), and its own error was not seen, which changed how
 * the parts after it were read.  The bodies in tests/fuzz/regress/
 * request_diff are what fuzz_request_diff found of that; each must be read
 * alike, under 16 KiB and with no limit. */
static void refused_parts_body(const char *name, const char *p, size_t n) {
  check(p, n);
  checked++;
  if (!rd_check_budget(p, n, 16 << 10, NULL)) {
    fprintf(stderr, "  (%s)\n", name);
    mismatches++;
  }
}

TEST(budget_refused_parts) {
  unsigned before = mismatches;
  int files = each_body("tests/fuzz/regress/request_diff", refused_parts_body);
  if (files < 0)
    SKIP("no tests/fuzz/regress/request_diff (PDBSYM_SOURCE_DIR)");
  CHECK(files >= 7);
  CHECK_EQ_U(mismatches, before);
}

int main(void) {
  RUN(hand_written);
  RUN(depth);
  RUN(many_keys);
  RUN(generated);
  RUN(budget);
  RUN(budget_texts);
  RUN(budget_refused_parts);
  RUN(integration_bodies);
  printf("  %u bodies compared (each on both routes under %zu limits), %u differences\n", checked,
         sizeof RD_LIMITS / sizeof RD_LIMITS[0], mismatches);
  return test_summary();
}
