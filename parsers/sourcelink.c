/*
 * sourcelink.c - Source Link maps and srcsrv data (see sourcelink.h).
 *
 * The JSON reader here knows just enough JSON (RFC 8259) for Source Link:
 * objects, arrays, strings with every escape, and the other values skipped.
 * It also takes a comma before a closing '}' or ']' (System.Text.Json's
 * AllowTrailingCommas), which real PDBs carry (symreader-portable's
 * SourceLink.pdb).
 * Decoded strings never grow (an escape is at least as long as the bytes it
 * stands for), so one buffer the size of the input holds every key and URL.
 */
#include "sourcelink.h"

#include <stdlib.h>
#include <string.h>

#define SL_MAX_DEPTH 32        /* JSON nesting followed */
#define SRV_MAX_VARS 256       /* srcsrv variables kept */
#define SRV_MAX_FIELDS 10      /* var1..var10 */
#define SRV_MAX_EXPAND_DEPTH 16
#define SRV_WORK_PER_LINE (1u << 16) /* expansion steps per source file line */

struct sl_rule {
  uint32_t key, key_len; /* offsets into buf; for a wildcard key, the prefix before '*' */
  uint32_t url, url_len;
  uint32_t ordinal;      /* order of appearance (ties go to the first) */
};

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int casecmp_n(const char *a, size_t an, const char *b, size_t bn) {
  size_t n = an < bn ? an : bn;
  for (size_t i = 0; i < n; i++) {
    unsigned char p = (unsigned char)a[i], q = (unsigned char)b[i];
    if (p == q) /* the usual byte: equal as it stands */
      continue;
    int x = lower(p), y = lower(q);
    if (x != y)
      return x < y ? -1 : 1;
  }
  return an < bn ? -1 : an > bn;
}

/* ---- JSON ----------------------------------------------------------------- */

typedef struct {
  const char *s;
  size_t n, pos;
  char *out;       /* decode target (the map's buffer) */
  size_t out_len;
  sl_rule *rules;
  size_t nrules, crules;
  ps_budget *budget;
  ps_err err;
} jp;

static void ws(jp *j) {
  while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                           j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
    j->pos++;
}

static bool fail(jp *j) {
  if (j->err == PS_E_OK)
    j->err = PS_E_CORRUPT;
  return false;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool hex4(jp *j, uint32_t *v) {
  if (j->n - j->pos < 4)
    return false;
  uint32_t r = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval((unsigned char)j->s[j->pos + (size_t)i]);
    if (h < 0)
      return false;
    r = r << 4 | (uint32_t)h;
  }
  j->pos += 4;
  *v = r;
  return true;
}

static void put(jp *j, char c) { j->out[j->out_len++] = c; }

static void put_utf8(jp *j, uint32_t cp) {
  if (cp < 0x80) {
    put(j, (char)cp);
  } else if (cp < 0x800) {
    put(j, (char)(0xC0 | cp >> 6));
    put(j, (char)(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    put(j, (char)(0xE0 | cp >> 12));
    put(j, (char)(0x80 | ((cp >> 6) & 0x3F)));
    put(j, (char)(0x80 | (cp & 0x3F)));
  } else {
    put(j, (char)(0xF0 | cp >> 18));
    put(j, (char)(0x80 | ((cp >> 12) & 0x3F)));
    put(j, (char)(0x80 | ((cp >> 6) & 0x3F)));
    put(j, (char)(0x80 | (cp & 0x3F)));
  }
}

/* A string at the cursor, decoded onto the end of j->out. */
static bool jstring(jp *j) {
  if (j->pos >= j->n || j->s[j->pos] != '"')
    return fail(j);
  j->pos++;
  while (j->pos < j->n) {
    unsigned char c = (unsigned char)j->s[j->pos++];
    if (c == '"')
      return true;
    if (c < 0x20)
      return fail(j);
    if (c != '\\') {
      put(j, (char)c);
      continue;
    }
    if (j->pos >= j->n)
      return fail(j);
    char e = j->s[j->pos++];
    uint32_t cp, lo;
    switch (e) {
    case '"': case '\\': case '/': put(j, e); break;
    case 'b': put(j, '\b'); break;
    case 'f': put(j, '\f'); break;
    case 'n': put(j, '\n'); break;
    case 'r': put(j, '\r'); break;
    case 't': put(j, '\t'); break;
    case 'u':
      if (!hex4(j, &cp))
        return fail(j);
      if (cp >= 0xD800 && cp < 0xDC00 && j->n - j->pos >= 6 && j->s[j->pos] == '\\' &&
          j->s[j->pos + 1] == 'u') {
        size_t at = j->pos;
        j->pos += 2;
        if (hex4(j, &lo) && lo >= 0xDC00 && lo < 0xE000)
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        else
          j->pos = at; /* a lone high surrogate; the next escape stands alone */
      }
      if (cp >= 0xD800 && cp < 0xE000)
        cp = 0xFFFD;
      if (cp == 0)
        cp = 0xFFFD; /* keys and URLs are C strings */
      put_utf8(j, cp);
      break;
    default:
      return fail(j);
    }
  }
  return fail(j);
}

static bool jvalue_skip(jp *j, int depth);

static bool jcontainer_skip(jp *j, int depth, char close) {
  j->pos++;
  ws(j);
  if (j->pos < j->n && j->s[j->pos] == close) {
    j->pos++;
    return true;
  }
  for (;;) {
    if (close == '}') {
      size_t mark = j->out_len;
      if (!jstring(j))
        return false;
      j->out_len = mark;
      ws(j);
      if (j->pos >= j->n || j->s[j->pos] != ':')
        return fail(j);
      j->pos++;
    }
    if (!jvalue_skip(j, depth + 1))
      return false;
    ws(j);
    if (j->pos >= j->n)
      return fail(j);
    char c = j->s[j->pos++];
    if (c == close)
      return true;
    if (c != ',')
      return fail(j);
    ws(j);
    if (j->pos < j->n && j->s[j->pos] == close) { /* a trailing comma */
      j->pos++;
      return true;
    }
  }
}

static bool jvalue_skip(jp *j, int depth) {
  if (depth > SL_MAX_DEPTH)
    return fail(j);
  ws(j);
  if (j->pos >= j->n)
    return fail(j);
  char c = j->s[j->pos];
  if (c == '{' || c == '[')
    return jcontainer_skip(j, depth, c == '{' ? '}' : ']');
  if (c == '"') {
    size_t mark = j->out_len;
    bool ok = jstring(j);
    j->out_len = mark;
    return ok;
  }
  /* number, true, false, null: a run of their characters */
  size_t start = j->pos;
  while (j->pos < j->n && strchr("+-.0123456789eEtrufalsn", j->s[j->pos]) && j->s[j->pos])
    j->pos++;
  return j->pos > start ? true : fail(j);
}

static bool add_rule(jp *j, size_t key, size_t key_len, size_t url, size_t url_len) {
  if (j->nrules == j->crules) {
    size_t nc = j->crules ? j->crules * 2 : 16;
    ps_err e = PS_E_OK;
    sl_rule *r = ps_realloc_array(j->budget, j->rules, j->crules, nc, sizeof *r, &e);
    if (!r) {
      j->err = e;
      return false;
    }
    j->rules = r;
    j->crules = nc;
  }
  sl_rule *r = &j->rules[j->nrules];
  r->key = (uint32_t)key;
  r->key_len = (uint32_t)key_len;
  r->url = (uint32_t)url;
  r->url_len = (uint32_t)url_len;
  r->ordinal = (uint32_t)j->nrules;
  j->nrules++;
  return true;
}

/* The "documents" object: string members become rules. */
static bool jdocuments(jp *j) {
  j->pos++; /* '{' */
  ws(j);
  if (j->pos < j->n && j->s[j->pos] == '}') {
    j->pos++;
    return true;
  }
  for (;;) {
    size_t key = j->out_len;
    if (!jstring(j))
      return false;
    size_t key_len = j->out_len - key;
    put(j, '\0');
    ws(j);
    if (j->pos >= j->n || j->s[j->pos] != ':')
      return fail(j);
    j->pos++;
    ws(j);
    if (j->pos < j->n && j->s[j->pos] == '"') {
      size_t url = j->out_len;
      if (!jstring(j))
        return false;
      size_t url_len = j->out_len - url;
      put(j, '\0');
      if (key_len > 0 && !memchr(j->out + key, '\0', key_len) &&
          !add_rule(j, key, key_len, url, url_len))
        return false;
    } else {
      j->out_len = key;
      if (!jvalue_skip(j, 2))
        return false;
    }
    ws(j);
    if (j->pos >= j->n)
      return fail(j);
    char c = j->s[j->pos++];
    if (c == '}')
      return true;
    if (c != ',')
      return fail(j);
    ws(j);
    if (j->pos < j->n && j->s[j->pos] == '}') { /* a trailing comma */
      j->pos++;
      return true;
    }
  }
}

/* One Source Link object: {"documents": {...}, other members skipped}. */
static bool jroot(jp *j) {
  ws(j);
  if (j->pos >= j->n || j->s[j->pos] != '{')
    return fail(j);
  j->pos++;
  ws(j);
  if (j->pos < j->n && j->s[j->pos] == '}') {
    j->pos++;
    return true;
  }
  for (;;) {
    size_t mark = j->out_len;
    if (!jstring(j))
      return false;
    bool docs = j->out_len - mark == 9 && memcmp(j->out + mark, "documents", 9) == 0;
    j->out_len = mark;
    ws(j);
    if (j->pos >= j->n || j->s[j->pos] != ':')
      return fail(j);
    j->pos++;
    ws(j);
    if (docs && j->pos < j->n && j->s[j->pos] == '{') {
      if (!jdocuments(j))
        return false;
    } else if (!jvalue_skip(j, 1)) {
      return false;
    }
    ws(j);
    if (j->pos >= j->n)
      return fail(j);
    char c = j->s[j->pos++];
    if (c == '}')
      return true;
    if (c != ',')
      return fail(j);
    ws(j);
    if (j->pos < j->n && j->s[j->pos] == '}') { /* a trailing comma */
      j->pos++;
      return true;
    }
  }
}

static int cmp_exact_rule(const void *a, const void *b, const char *buf) {
  const sl_rule *x = a, *y = b;
  int c = casecmp_n(buf + x->key, x->key_len, buf + y->key, y->key_len);
  if (c)
    return c;
  return x->ordinal < y->ordinal ? -1 : x->ordinal > y->ordinal;
}

/* insertion-merge sort with a context (qsort has none, qsort_r is not C11) */
static void sort_rules(sl_rule *r, size_t n, sl_rule *tmp, const char *buf, bool exact) {
  if (n < 2)
    return;
  size_t h = n / 2;
  sort_rules(r, h, tmp, buf, exact);
  sort_rules(r + h, n - h, tmp, buf, exact);
  size_t i = 0, k = h, o = 0;
  while (i < h && k < n) {
    int c;
    if (exact)
      c = cmp_exact_rule(&r[i], &r[k], buf);
    else
      c = r[i].key_len != r[k].key_len ? (r[i].key_len > r[k].key_len ? -1 : 1)
                                        : (r[i].ordinal < r[k].ordinal ? -1 : 1);
    tmp[o++] = c <= 0 ? r[i++] : r[k++];
  }
  while (i < h)
    tmp[o++] = r[i++];
  while (k < n)
    tmp[o++] = r[k++];
  memcpy(r, tmp, n * sizeof *r);
}

void sl_map_free(sl_map *m, ps_budget *budget) {
  if (!m)
    return;
  free(m->buf);
  free(m->exact);
  free(m->wild);
  if (budget)
    ps_budget_release(budget, m->bytes);
  memset(m, 0, sizeof *m);
}

ps_err sl_map_build(sl_map *m, const char *json, size_t len, ps_budget *budget, ps_diag *diag) {
  memset(m, 0, sizeof *m);
  if (len > SL_MAX_TEXT)
    return ps_diag_set(diag, PS_E_LIMIT, "Source Link", (size_t)-1,
                       "%zu bytes of JSON, more than the %zu-byte limit", len, SL_MAX_TEXT);
  ps_err e = PS_E_OK;
  jp j;
  memset(&j, 0, sizeof j);
  j.s = json;
  j.n = len;
  j.budget = budget;
  /* every string decodes to at most its raw length; +1 per NUL after it */
  j.out = ps_alloc_array(budget, len + 1, 1, &e);
  if (!j.out)
    return ps_diag_set(diag, e, "Source Link", (size_t)-1, "%zu-byte buffer", len + 1);
  if (len >= 3 && memcmp(json, "\xEF\xBB\xBF", 3) == 0)
    j.pos = 3;
  ws(&j);
  bool ok;
  if (j.pos < j.n && j.s[j.pos] == '[') {
    j.pos++;
    ws(&j);
    ok = true;
    if (j.pos < j.n && j.s[j.pos] == ']') {
      j.pos++;
    } else {
      for (;;) {
        if (!(ok = jroot(&j)))
          break;
        ws(&j);
        if (j.pos >= j.n) {
          ok = fail(&j);
          break;
        }
        char c = j.s[j.pos++];
        if (c == ']')
          break;
        if (c != ',') {
          ok = fail(&j);
          break;
        }
        ws(&j);
        if (j.pos < j.n && j.s[j.pos] == ']') { /* a trailing comma */
          j.pos++;
          break;
        }
      }
    }
  } else {
    ok = jroot(&j);
  }
  ws(&j);
  if (ok && j.pos != j.n)
    ok = fail(&j);
  size_t rules_bytes = j.crules * sizeof(sl_rule);
  if (!ok) {
    free(j.out);
    free(j.rules);
    ps_budget_release(budget, len + 1 + rules_bytes);
    return ps_diag_set(diag, j.err ? j.err : PS_E_CORRUPT, "Source Link", j.pos,
                       "not a Source Link JSON document");
  }
  size_t nw = 0;
  for (size_t i = 0; i < j.nrules; i++)
    if (j.out[j.rules[i].key + j.rules[i].key_len - 1] == '*')
      nw++;
  size_t ne = j.nrules - nw;
  sl_rule *ex = ps_alloc_array(budget, ne, sizeof *ex, &e);
  sl_rule *wi = ex ? ps_alloc_array(budget, nw, sizeof *wi, &e) : NULL;
  sl_rule *tmp = wi ? ps_alloc_array(budget, j.nrules, sizeof *tmp, &e) : NULL;
  if (!tmp) {
    free(ex);
    free(wi);
    free(j.out);
    free(j.rules);
    ps_budget_release(budget, len + 1 + rules_bytes);
    if (wi)
      ps_budget_release(budget, (ne + nw) * sizeof(sl_rule));
    else if (ex)
      ps_budget_release(budget, ne * sizeof(sl_rule));
    return ps_diag_set(diag, e, "Source Link", (size_t)-1, "%zu rules", j.nrules);
  }
  size_t a = 0, b = 0;
  for (size_t i = 0; i < j.nrules; i++) {
    sl_rule r = j.rules[i];
    if (j.out[r.key + r.key_len - 1] == '*') {
      r.key_len--;
      wi[b++] = r;
    } else {
      ex[a++] = r;
    }
  }
  sort_rules(ex, ne, tmp, j.out, true);
  sort_rules(wi, nw, tmp, j.out, false);
  free(tmp);
  free(j.rules);
  ps_budget_release(budget, j.nrules * sizeof(sl_rule) + rules_bytes);
  m->buf = j.out;
  m->buf_len = j.out_len;
  m->exact = ex;
  m->nexact = ne;
  m->wild = wi;
  m->nwild = nw;
  m->bytes = len + 1 + (ne + nw) * sizeof(sl_rule);
  return PS_E_OK;
}

static bool emit(char *out, size_t cap, size_t *o, const char *s, size_t n, bool slashes) {
  if (n >= cap - *o)
    return false;
  /* runs without a backslash copied whole */
  const char *end = s + n;
  while (s < end) {
    const char *b = slashes ? memchr(s, '\\', (size_t)(end - s)) : NULL;
    size_t run = b ? (size_t)(b - s) : (size_t)(end - s);
    memcpy(out + *o, s, run);
    *o += run;
    if (!b)
      break;
    out[(*o)++] = '/';
    s = b + 1;
  }
  return true;
}

bool sl_map_resolve(const sl_map *m, const char *path, char *out, size_t cap) {
  if (!m || !path || !out || cap == 0)
    return false;
  size_t pl = strlen(path);
  /* an exact key: binary search for the first equal one */
  size_t lo = 0, hi = m->nexact;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const sl_rule *r = &m->exact[mid];
    if (casecmp_n(m->buf + r->key, r->key_len, path, pl) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t o = 0;
  if (lo < m->nexact) {
    const sl_rule *r = &m->exact[lo];
    if (casecmp_n(m->buf + r->key, r->key_len, path, pl) == 0) {
      /* of keys equal but for case (srcsrv lists "x.cs" and "X.cs" apart),
       * the one spelled as the path is */
      for (size_t k = lo; k < m->nexact; k++) {
        const sl_rule *q = &m->exact[k];
        if (casecmp_n(m->buf + q->key, q->key_len, path, pl) != 0)
          break;
        if (q->key_len == pl && memcmp(m->buf + q->key, path, pl) == 0) {
          r = q;
          break;
        }
      }
      if (!emit(out, cap, &o, m->buf + r->url, r->url_len, false))
        return false;
      out[o] = '\0';
      return true;
    }
  }
  /* wildcard keys, longest prefix first */
  for (size_t i = 0; i < m->nwild; i++) {
    const sl_rule *r = &m->wild[i];
    if (r->key_len > pl || casecmp_n(m->buf + r->key, r->key_len, path, r->key_len) != 0)
      continue;
    const char *u = m->buf + r->url, *end = u + r->url_len;
    while (u < end) {
      const char *star = memchr(u, '*', (size_t)(end - u));
      size_t run = star ? (size_t)(star - u) : (size_t)(end - u);
      if (!emit(out, cap, &o, u, run, false))
        return false;
      if (!star)
        break;
      if (!emit(out, cap, &o, path + r->key_len, pl - r->key_len, true))
        return false;
      u = star + 1;
    }
    out[o] = '\0';
    return true;
  }
  return false;
}

/* ---- srcsrv ----------------------------------------------------------------- */

typedef struct {
  const char *p;
  size_t n;
} span;

typedef struct {
  span name[SRV_MAX_VARS], value[SRV_MAX_VARS];
  size_t nvars;
  span field[SRV_MAX_FIELDS];
  size_t nfields;
  uint32_t work;
} srv_ctx;

typedef struct {
  char *p;
  size_t n, cap;
  bool full;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (n > b->cap - b->n) {
    b->full = true;
    n = b->cap - b->n;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static bool span_is(span s, const char *lit) {
  size_t n = strlen(lit);
  return s.n == n && casecmp_n(s.p, n, lit, n) == 0;
}

static bool is_name(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return n > 0;
}

/* the last definition of a variable, or NULL */
static const span *srv_lookup(const srv_ctx *c, const char *name, size_t n) {
  for (size_t i = c->nvars; i-- > 0;)
    if (casecmp_n(c->name[i].p, c->name[i].n, name, n) == 0)
      return &c->value[i];
  return NULL;
}

/* %varN% (1..10): the field's index, or -1 */
static int field_index(span name) {
  if (name.n < 4 || name.n > 5 || casecmp_n(name.p, 3, "var", 3) != 0)
    return -1;
  int v = 0;
  for (size_t i = 3; i < name.n; i++) {
    if (name.p[i] < '0' || name.p[i] > '9')
      return -1;
    v = v * 10 + (name.p[i] - '0');
  }
  return v >= 1 && v <= SRV_MAX_FIELDS ? v - 1 : -1;
}

static bool expand(srv_ctx *c, const char *s, size_t n, sbuf *out, int depth) {
  if (depth > SRV_MAX_EXPAND_DEPTH)
    return false;
  size_t i = 0;
  while (i < n) {
    if (++c->work > SRV_WORK_PER_LINE || out->full)
      return false;
    const char *pct = memchr(s + i, '%', n - i);
    if (!pct) {
      sb_put(out, s + i, n - i);
      break;
    }
    sb_put(out, s + i, (size_t)(pct - (s + i)));
    i = (size_t)(pct - s);
    const char *close = memchr(s + i + 1, '%', n - i - 1);
    size_t nlen = close ? (size_t)(close - (s + i + 1)) : 0;
    if (!close || !is_name(s + i + 1, nlen)) {
      sb_put(out, "%", 1); /* a lone '%' (an escaped URL byte, say) stays as it is */
      i++;
      continue;
    }
    span name = {s + i + 1, nlen};
    size_t after = (size_t)(close - s) + 1;
    bool fnvar = span_is(name, "fnvar"), fnbksl = span_is(name, "fnbksl"),
         fnfile = span_is(name, "fnfile");
    if ((fnvar || fnbksl || fnfile) && after < n && s[after] == '(') {
      size_t k = after + 1, nest = 1;
      for (; k < n; k++) {
        if (s[k] == '(')
          nest++;
        else if (s[k] == ')' && --nest == 0)
          break;
      }
      if (k >= n)
        return false; /* unbalanced: no target for this line */
      char tmp[SL_MAX_URL];
      sbuf t = {tmp, 0, sizeof tmp, false};
      if (!expand(c, s + after + 1, k - after - 1, &t, depth + 1) || t.full)
        return false;
      if (fnvar) {
        const span *v = srv_lookup(c, t.p, t.n);
        if (v && !expand(c, v->p, v->n, out, depth + 1))
          return false;
      } else if (fnbksl) {
        for (size_t q = 0; q < t.n; q++)
          if (t.p[q] == '/')
            t.p[q] = '\\';
        sb_put(out, t.p, t.n);
      } else {
        size_t q = t.n;
        while (q > 0 && t.p[q - 1] != '\\' && t.p[q - 1] != '/')
          q--;
        sb_put(out, t.p + q, t.n - q);
      }
      i = k + 1;
      continue;
    }
    int f = field_index(name);
    const span *v;
    if (f >= 0) {
      if ((size_t)f < c->nfields)
        sb_put(out, c->field[f].p, c->field[f].n);
    } else if ((v = srv_lookup(c, name.p, name.n)) != NULL) {
      if (!expand(c, v->p, v->n, out, depth + 1))
        return false;
    } else {
      sb_put(out, s + i, after - i); /* unknown (%targ% and the like): kept */
    }
    i = after;
  }
  return !out->full;
}

typedef struct {
  char *p;
  size_t n, cap;
  ps_budget *budget;
  ps_err err;
} jbuf;

static bool jb_reserve(jbuf *b, size_t more) {
  if (b->err != PS_E_OK)
    return false;
  if (more <= b->cap - b->n)
    return true;
  size_t need;
  if (!ps_add_size(b->n, more, &need) || need > SL_MAX_TEXT) {
    b->err = PS_E_LIMIT;
    return false;
  }
  size_t nc = b->cap ? b->cap : 4096;
  while (nc < need)
    nc *= 2;
  char *q = ps_realloc_array(b->budget, b->p, b->cap, nc, 1, &b->err);
  if (!q)
    return false;
  b->p = q;
  b->cap = nc;
  return true;
}

static void jb_raw(jbuf *b, const char *s, size_t n) {
  if (jb_reserve(b, n)) {
    memcpy(b->p + b->n, s, n);
    b->n += n;
  }
}

static void jb_string(jbuf *b, const char *s, size_t n) {
  if (!jb_reserve(b, n * 6 + 2))
    return;
  static const char hex[] = "0123456789abcdef";
  b->p[b->n++] = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      b->p[b->n++] = '\\';
      b->p[b->n++] = (char)c;
    } else if (c < 0x20) {
      memcpy(b->p + b->n, "\\u00", 4);
      b->n += 4;
      b->p[b->n++] = hex[c >> 4];
      b->p[b->n++] = hex[c & 15];
    } else {
      b->p[b->n++] = (char)c;
    }
  }
  b->p[b->n++] = '"';
}

/* "SRCSRV: <section> ---": the section's first word, or 0 */
static int section_of(span line) {
  if (line.n < 7 || casecmp_n(line.p, 7, "SRCSRV:", 7) != 0)
    return 0;
  span rest = {line.p + 7, line.n - 7};
  while (rest.n && rest.p[0] == ' ') {
    rest.p++;
    rest.n--;
  }
  if (rest.n >= 3 && casecmp_n(rest.p, 3, "ini", 3) == 0)
    return 1;
  if (rest.n >= 9 && casecmp_n(rest.p, 9, "variables", 9) == 0)
    return 2;
  if (rest.n >= 12 && casecmp_n(rest.p, 12, "source files", 12) == 0)
    return 3;
  if (rest.n >= 3 && casecmp_n(rest.p, 3, "end", 3) == 0)
    return 4;
  return -1;
}

ps_err sl_from_srcsrv(const char *text, size_t len, ps_budget *budget, char **out,
                      size_t *out_len, size_t *out_cap, size_t *nfiles, ps_diag *diag) {
  *out = NULL;
  *out_len = *out_cap = *nfiles = 0;
  if (len > SL_MAX_TEXT)
    return ps_diag_set(diag, PS_E_LIMIT, "srcsrv", (size_t)-1,
                       "%zu bytes, more than the %zu-byte limit", len, SL_MAX_TEXT);
  ps_err e = PS_E_OK;
  srv_ctx *c = ps_alloc_array(budget, 1, sizeof *c, &e);
  if (!c)
    return ps_diag_set(diag, e, "srcsrv", (size_t)-1, "state");
  jbuf b = {NULL, 0, 0, budget, PS_E_OK};
  jb_raw(&b, "{\"documents\":{", 14);
  const span *trg = NULL;
  int section = 0;
  bool saw_files = false;
  size_t pos = 0;
  while (pos < len && b.err == PS_E_OK) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    span line = {text + pos, nl ? (size_t)(nl - (text + pos)) : len - pos};
    pos += line.n + (nl ? 1 : 0);
    while (line.n && (line.p[line.n - 1] == '\r' || line.p[line.n - 1] == ' '))
      line.n--;
    int s = section_of(line);
    if (s) {
      section = s;
      if (s == 3) {
        saw_files = true;
        trg = srv_lookup(c, "SRCSRVTRG", 9);
      }
      if (s == 4)
        break;
      continue;
    }
    if (section == 2) {
      const char *eq = memchr(line.p, '=', line.n);
      if (!eq || eq == line.p || c->nvars == SRV_MAX_VARS)
        continue;
      size_t k = c->nvars++;
      c->name[k].p = line.p;
      c->name[k].n = (size_t)(eq - line.p);
      c->value[k].p = eq + 1;
      c->value[k].n = line.n - c->name[k].n - 1;
    } else if (section == 3 && trg && line.n) {
      c->nfields = 0;
      size_t f0 = 0;
      for (size_t i = 0; i <= line.n && c->nfields < SRV_MAX_FIELDS; i++) {
        if (i == line.n || line.p[i] == '*') {
          c->field[c->nfields].p = line.p + f0;
          c->field[c->nfields].n = i - f0;
          c->nfields++;
          f0 = i + 1;
        }
      }
      if (c->field[0].n == 0)
        continue;
      char url[SL_MAX_URL];
      sbuf u = {url, 0, sizeof url, false};
      c->work = 0;
      if (!expand(c, trg->p, trg->n, &u, 0))
        continue;
      bool http = (u.n > 7 && casecmp_n(u.p, 7, "http://", 7) == 0) ||
                  (u.n > 8 && casecmp_n(u.p, 8, "https://", 8) == 0);
      if (!http || memchr(u.p, '\0', u.n) || memchr(c->field[0].p, '\0', c->field[0].n))
        continue;
      if (*nfiles)
        jb_raw(&b, ",", 1);
      jb_string(&b, c->field[0].p, c->field[0].n);
      jb_raw(&b, ":", 1);
      jb_string(&b, u.p, u.n);
      (*nfiles)++;
    }
  }
  jb_raw(&b, "}}", 2);
  if (jb_reserve(&b, 1))
    b.p[b.n] = '\0'; /* a C string too (not in *out_len): growth slack is not zeroed */
  free(c);
  ps_budget_release(budget, sizeof *c);
  if (b.err != PS_E_OK) {
    free(b.p);
    ps_budget_release(budget, b.cap);
    *nfiles = 0;
    return ps_diag_set(diag, b.err, "srcsrv", (size_t)-1, "building the Source Link map");
  }
  if (!saw_files || *nfiles == 0) {
    free(b.p);
    ps_budget_release(budget, b.cap);
    *nfiles = 0;
    return ps_diag_set(diag, PS_E_NOT_FOUND, "srcsrv", (size_t)-1,
                       saw_files ? "no source file has an http(s) target"
                                 : "no \"SRCSRV: source files\" section");
  }
  *out = b.p;
  *out_len = b.n;
  *out_cap = b.cap;
  return PS_E_OK;
}
