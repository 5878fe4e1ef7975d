/*
 * test_store.c - the SQLite line-table cache (server/cache/): a table read
 * back from disk answers every lookup exactly as the table that was stored;
 * one copy per key; hot-set budget and pins; negative entries; the byte cap;
 * broken, foreign and newer databases moved aside; damaged modules dropped
 * (at load for a table file's header, by the background check for its
 * records); stray table files swept; modules of the old BLOB layout read.
 *
 * The tables are synthetic (the readers are not on this branch yet); the
 * truth for a reloaded table is the original table's own answers.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "test.h"

static char tmpdir[256];

static void make_tmp(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/test_store.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    exit(1);
  }
}

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
      rm_tree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* a fresh sub-folder of tmpdir per test */
static const char *sub(const char *name) {
  static char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return p;
}

static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (d)
    closedir(d);
  return n;
}

static uint32_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return (uint32_t)(*x >> 16);
}

/* A native + managed table exercising every array and the odd cases lookups
 * care about: functions sharing an rva (procedure and thunk), implicit line
 * sizes, hidden lines, nested inline sites, publics outside functions,
 * methods without sequence points, hidden sequence points, kickoff methods. */
static void synth(symtab *st, uint32_t seed, uint32_t nfunc) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  st_init(st, NULL);
  st->ident.format = ST_FORMAT_WINDOWS;
  st->ident.age = 3 + seed;
  st->ident.pdb_age = 4 + seed;
  st->ident.stamp = 0x5EED0000u + seed;
  st->ident.machine = 0x8664;
  for (int i = 0; i < 16; i++)
    st->ident.guid[i] = (uint8_t)(seed * 31 + (uint32_t)i);
  char name[128];
  uint32_t files[8];
  for (int i = 0; i < 8; i++) {
    snprintf(name, sizeof name, "c:\\src\\s%u\\f%d.cpp", seed, i);
    files[i] = st_cstr(st, name);
  }
  uint32_t rva = 0x1000;
  for (uint32_t f = 0; f < nfunc; f++) {
    uint32_t start = rva, n = 1 + rnd(&x) % 10, line = 1 + rnd(&x) % 900;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t sz = 1 + rnd(&x) % 9;
      uint32_t ln = (rnd(&x) % 11) ? line + i : ST_HIDDEN_LINE;
      st_add_line(st, rva, (rnd(&x) % 3) ? sz : 0, ln, files[rnd(&x) % 8]);
      rva += sz;
    }
    snprintf(name, sizeof name, "s%u::f%u", seed, f);
    st_add_func(st, start, rva - start, st_cstr(st, name), 0);
    if (f % 13 == 0) { /* a thunk at the same rva */
      snprintf(name, sizeof name, "thunk%u", f);
      st_add_func(st, start, 5, st_cstr(st, name), ST_FUNC_THUNK);
    }
    if (f % 4 == 0 && rva - start >= 4) {
      uint32_t a = st_add_inline(st, start, ST_NONE, 1, st_cstr(st, "outer_inl"));
      st_add_irange(st, a, start + 1, rva - start - 1, line + 50, files[f % 8]);
      if (f % 8 == 0) {
        uint32_t b = st_add_inline(st, start, a, 2, st_cstr(st, "inner_inl"));
        st_add_irange(st, b, start + 2, 2, 0, 0);
        st_add_irange(st, b, start + 1, 1, line + 70, files[(f + 3) % 8]);
      }
    }
    if (f % 6 == 0) { /* a public in the gap after the function */
      snprintf(name, sizeof name, "?p%u@@YAXXZ", f);
      st_add_public(st, rva + 2, st_cstr(st, name + 1), st_cstr(st, name));
    }
    rva += 8 + rnd(&x) % 40;
  }
  for (uint32_t m = 0; m < 40; m++) {
    uint32_t tok = 0x06000001 + m * 2;
    snprintf(name, sizeof name, "N.T%u.M%u", seed, m);
    if (m % 9 != 8)
      st_add_method(st, tok, st_cstr(st, name), m % 5 == 4 ? tok - 2 : 0);
    uint32_t nsp = m % 7 == 3 ? 0 : 1 + rnd(&x) % 8;
    for (uint32_t k = 0; k < nsp; k++) {
      st_seqpt sp = {tok, 2 + k * (1 + rnd(&x) % 9), (k % 4 == 2) ? ST_HIDDEN_LINE : 20 + k,
                     21 + k, (uint16_t)(1 + k), (uint16_t)(5 + k), files[k % 8]};
      st_add_seqpt(st, &sp);
    }
  }
  st->source_link = st_cstr(st, "{\"documents\":{\"c:\\\\src\\\\*\":\"https://example.test/raw/*\"}}");
  CHECK_EQ_U(st_finish(st), PS_E_OK);
}

static bool same_str(const char *a, const char *b) {
  if (!a || !b)
    return a == b;
  return strcmp(a, b) == 0;
}

static int diff_answer(const st_answer *a, const st_answer *b) {
  if (a->status != b->status || a->nsyms != b->nsyms)
    return 1;
  for (int i = 0; i < a->nsyms; i++) {
    const st_symbol *x = &a->syms[i], *y = &b->syms[i];
    if (!same_str(x->function, y->function) || !same_str(x->mangled, y->mangled) ||
        !same_str(x->file, y->file) || !same_str(x->async_method, y->async_method) ||
        x->line != y->line || x->column != y->column || x->end_line != y->end_line ||
        x->end_column != y->end_column || x->function_offset != y->function_offset ||
        x->kickoff_token != y->kickoff_token || x->inlined != y->inlined ||
        x->hidden != y->hidden || x->has_line != y->has_line || x->has_column != y->has_column ||
        x->has_offset != y->has_offset)
      return 1;
  }
  return 0;
}

/* Every rva of the table (and a margin), every token and IL offset: the
 * number of differing answers, and how many answers were real hits. */
static uint64_t compare_all(const symtab *a, const symtab *b, uint64_t *hits) {
  static st_answer x, y;
  uint64_t bad = 0;
  *hits = 0;
  uint32_t end = a->nlines ? a->lines[a->nlines - 1].rva + 100 : 0x2000;
  for (uint32_t rva = 0; rva < end; rva++) {
    st_lookup_rva(a, rva, &x);
    st_lookup_rva(b, rva, &y);
    bad += (uint64_t)diff_answer(&x, &y);
    *hits += x.status == ST_OK && x.nsyms > 1;
  }
  for (uint32_t tok = 0x06000000; tok < 0x06000060; tok++)
    for (uint32_t il = 0; il < 80; il++) {
      st_lookup_token(a, tok, il, &x);
      st_lookup_token(b, tok, il, &y);
      bad += (uint64_t)diff_answer(&x, &y);
      *hits += x.status == ST_OK && x.syms[0].has_line;
    }
  return bad;
}

static store *open_store(const char *dir, uint64_t max_bytes, uint64_t mem_max) {
  store_config cfg = {.dir = dir, .max_bytes = max_bytes, .mem_max_bytes = mem_max};
  store *s = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = store_open(&cfg, &s, &d);
  if (e != PS_E_OK) {
    char buf[300];
    fprintf(stderr, "store_open: %s\n", ps_diag_format(&d, buf, sizeof buf));
  }
  return s;
}

static ps_err put(store *s, const char *key, const symtab *st) {
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = store_put(s, key, st, "https://example.test/x", &d);
  if (e != PS_E_OK && e != PS_E_LIMIT) {
    char buf[300];
    fprintf(stderr, "store_put: %s\n", ps_diag_format(&d, buf, sizeof buf));
  }
  return e;
}

TEST(roundtrip_same_answers) {
  const char *dir = sub("roundtrip");
  symtab orig;
  synth(&orig, 1, 3000);
  store *s = open_store(dir, 0, 0);
  CHECK(s != NULL);
  if (!s)
    return;
  CHECK_EQ_U(put(s, "a.pdb/0123456789ABCDEF0123456789ABCDEF3", &orig), PS_E_OK);
  store_close(s);
  /* a second process: nothing in memory, everything from SQLite */
  s = open_store(dir, 0, 0);
  store_entry e;
  CHECK_EQ_U(store_get(s, "a.pdb/0123456789ABCDEF0123456789ABCDEF3", &e), STORE_HIT);
  if (e.st) {
    uint64_t hits;
    CHECK_EQ_U(compare_all(&orig, e.st, &hits), 0);
    CHECK(hits > 1000); /* the comparison covered inline chains and sequence points */
    CHECK_EQ_U(e.st->nlines, orig.nlines);
    CHECK_EQ_U(e.st->niranges, orig.niranges);
    CHECK_EQ_U(e.st->ident.age, orig.ident.age);
    CHECK_EQ_U(e.st->ident.pdb_age, orig.ident.pdb_age);
    CHECK_EQ_U(e.st->ident.stamp, orig.ident.stamp);
    CHECK_EQ_U(e.st->ident.managed, orig.ident.managed);
    CHECK(memcmp(e.st->ident.guid, orig.ident.guid, 16) == 0);
    CHECK_EQ_S(st_s(e.st, e.st->source_link), st_s(&orig, orig.source_link));
    /* the Source Link map of a mapped table is built at load: frames get
     * their files' URLs after a restart as before it */
    char want[256], got[256];
    CHECK(st_source_link(&orig, "c:\\src\\s1\\f3.cpp", want, sizeof want));
    CHECK_EQ_S(want, "https://example.test/raw/s1/f3.cpp");
    CHECK(st_source_link(e.st, "c:\\src\\s1\\f3.cpp", got, sizeof got));
    CHECK_EQ_S(got, want);
    CHECK(!st_source_link(e.st, "d:\\other\\x.cpp", got, sizeof got));
    CHECK_EQ_S(e.source, "https://example.test/x");
  }
  store_release(s, &e);
  /* the second get comes from the hot set: the same table object */
  store_entry e2, e3;
  CHECK_EQ_U(store_get(s, "a.pdb/0123456789ABCDEF0123456789ABCDEF3", &e2), STORE_HIT);
  CHECK_EQ_U(store_get(s, "a.pdb/0123456789ABCDEF0123456789ABCDEF3", &e3), STORE_HIT);
  CHECK(e2.st == e3.st);
  store_release(s, &e2);
  store_release(s, &e3);
  CHECK_EQ_U(store_get(s, "b.pdb/0123456789ABCDEF0123456789ABCDEF1", &e), STORE_MISS);
  store_close(s);
  st_free(&orig);
}

TEST(put_take_pins_the_table) {
  const char *dir = sub("take");
  symtab orig, taken;
  synth(&orig, 8, 2000);
  synth(&taken, 8, 2000);
  store *s = open_store(dir, 0, 0);
  store_entry e, e2;
  ps_diag d;
  CHECK_EQ_U(store_put_take(s, "take.pdb/A1", &taken, "src", &e, &d), PS_E_OK);
  CHECK(taken.lines == NULL); /* the store owns it now */
  CHECK(e.st != NULL);
  if (e.st) {
    uint64_t hits;
    CHECK_EQ_U(compare_all(&orig, e.st, &hits), 0);
  }
  CHECK_EQ_U(store_get(s, "take.pdb/A1", &e2), STORE_HIT);
  CHECK(e2.st == e.st); /* the same table, from memory */
  store_release(s, &e2);
  store_release(s, &e);
  store_close(s);
  s = open_store(dir, 0, 0); /* and it is on disk */
  CHECK_EQ_U(store_get(s, "take.pdb/A1", &e), STORE_HIT);
  if (e.st) {
    uint64_t hits;
    CHECK_EQ_U(compare_all(&orig, e.st, &hits), 0);
  }
  store_release(s, &e);
  /* a module over the cap is still handed back, from memory only */
  store_close(s);
  s = open_store(sub("take_small"), 100000, 0);
  synth(&taken, 9, 20000);
  CHECK_EQ_U(store_put_take(s, "big.pdb/A1", &taken, "src", &e, &d), PS_E_LIMIT);
  CHECK(e.st != NULL && e.st->nlines > 0);
  store_release(s, &e);
  store_close(s);
  st_free(&orig);
}

/* First answer before persistence: an adopted table answers from memory at
 * once and is on disk only once saved; a table with the image's names
 * replaces one without, in memory and on disk, never the other way. */
TEST(adopt_then_save) {
  const char *dir = sub("adopt");
  symtab orig, t1, t2, t3;
  synth(&orig, 11, 1500);
  synth(&t1, 11, 1500);
  store *s = open_store(dir, 0, 0);
  store_entry e, e2, q;
  ps_diag d;
  ps_diag_clear(&d);
  store_counters c0, c1;
  store_get_counters(s, &c0);
  CHECK_EQ_U(store_adopt(s, "a.pdb/A1", &t1, "src-1", 0, &e), PS_E_OK);
  CHECK(t1.lines == NULL);
  CHECK(e.st != NULL);
  CHECK_EQ_U(store_get(s, "a.pdb/A1", &e2), STORE_HIT);
  CHECK(e2.st == e.st);
  store_release(s, &e2);
  store_get_counters(s, &c1);
  CHECK_EQ_U(c1.module_reads - c0.module_reads, 0);
  store_pin(s, &e, &q); /* what a persistence queue holds */
  store_release(s, &e);
  /* not on disk yet: another process does not see it */
  store *other = open_store(dir, 0, 0);
  CHECK_EQ_U(store_get(other, "a.pdb/A1", &e2), STORE_MISS);
  CHECK_EQ_U(store_save(s, &q, &d), PS_E_OK);
  store_release(s, &q);
  CHECK_EQ_U(store_get(other, "a.pdb/A1", &e2), STORE_HIT);
  CHECK_EQ_U(e2.flags, 0);
  CHECK_EQ_S(e2.source, "src-1");
  if (e2.st) {
    uint64_t hits;
    CHECK_EQ_U(compare_all(&orig, e2.st, &hits), 0);
  }
  store_release(other, &e2);

  /* the same module with its image's names replaces it, in memory ... */
  synth(&t2, 11, 1500);
  CHECK_EQ_U(store_get(s, "a.pdb/A1", &e2), STORE_HIT); /* a pin on the old table */
  const symtab *old = e2.st;
  CHECK_EQ_U(store_adopt(s, "a.pdb/A1", &t2, "src-2", STORE_F_IMAGE_NAMES, &e), PS_E_OK);
  CHECK(e.st != old);
  CHECK_EQ_U(e.flags, STORE_F_IMAGE_NAMES);
  CHECK(old->nlines > 0); /* still valid while pinned */
  store_release(s, &e2);
  CHECK_EQ_U(store_get(s, "a.pdb/A1", &e2), STORE_HIT);
  CHECK(e2.st == e.st);
  CHECK_EQ_S(e2.source, "src-2");
  store_release(s, &e2);
  /* ... and on disk */
  CHECK_EQ_U(store_save(s, &e, &d), PS_E_OK);
  store_release(s, &e);
  store_close(other);
  other = open_store(dir, 0, 0);
  CHECK_EQ_U(store_get(other, "a.pdb/A1", &e2), STORE_HIT);
  CHECK_EQ_U(e2.flags, STORE_F_IMAGE_NAMES);
  CHECK_EQ_S(e2.source, "src-2");
  store_release(other, &e2);
  /* a table without the names never replaces one with them */
  synth(&t3, 11, 1500);
  CHECK_EQ_U(store_adopt(s, "a.pdb/A1", &t3, "src-3", 0, &e), PS_E_OK);
  CHECK_EQ_U(e.flags, STORE_F_IMAGE_NAMES);
  CHECK_EQ_S(e.source, "src-2");
  store_release(s, &e);
  CHECK_EQ_U(store_put(other, "a.pdb/A1", &orig, "src-4", &d), PS_E_OK);
  store_close(other);
  other = open_store(dir, 0, 0);
  CHECK_EQ_U(store_get(other, "a.pdb/A1", &e2), STORE_HIT);
  CHECK_EQ_U(e2.flags, STORE_F_IMAGE_NAMES);
  CHECK_EQ_S(e2.source, "src-2");
  store_release(other, &e2);
  store_stats st;
  CHECK_EQ_U(store_get_stats(other, &st), PS_E_OK);
  CHECK_EQ_U(st.modules, 1);
  store_close(other);
  store_close(s);
  st_free(&orig);
}

TEST(empty_table_roundtrip) {
  symtab st;
  st_init(&st, NULL);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  store *s = open_store(sub("empty"), 0, 0);
  CHECK_EQ_U(put(s, "e.pdb/00000000000000000000000000000000FFFFFFFF", &st), PS_E_OK);
  store_close(s);
  s = open_store(sub("empty"), 0, 0);
  store_entry e;
  CHECK_EQ_U(store_get(s, "e.pdb/00000000000000000000000000000000FFFFFFFF", &e), STORE_HIT);
  if (e.st) {
    st_answer a;
    st_lookup_rva(e.st, 0x1000, &a);
    CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  }
  store_release(s, &e);
  store_close(s);
  st_free(&st);
}

static bool count_cb(void *ctx, const store_module_info *m) {
  (void)m;
  (*(int *)ctx)++;
  return true;
}

typedef struct {
  const char *dir;
  const symtab *st;
  ps_err result;
} race_arg;

static void *race_put(void *p) {
  race_arg *a = p;
  store *s = open_store(a->dir, 0, 0); /* its own handle, as another process would */
  a->result = s ? put(s, "race.pdb/11111111111111111111111111111111" "1", a->st) : PS_E_DATABASE;
  store_close(s);
  return NULL;
}

TEST(same_key_twice_one_copy) {
  const char *dir = sub("race");
  symtab st;
  synth(&st, 2, 2000);
  store *s = open_store(dir, 0, 0); /* create the schema first */
  enum { N = 4 };
  pthread_t th[N];
  race_arg args[N];
  for (int i = 0; i < N; i++) {
    args[i] = (race_arg){dir, &st, PS_E_INVALID};
    pthread_create(&th[i], NULL, race_put, &args[i]);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_U(args[i].result, PS_E_OK);
  }
  CHECK_EQ_U(put(s, "race.pdb/111111111111111111111111111111111", &st), PS_E_OK);
  int n = 0;
  store_list(s, count_cb, &n);
  CHECK_EQ_U(n, 1);
  store_stats stats;
  store_get_stats(s, &stats);
  CHECK_EQ_U(stats.modules, 1);
  CHECK_EQ_U(stats.line_rows, st.nlines + st.nseqpts);
  store_close(s);
  st_free(&st);
}

/* Waits (up to 30 s) until no mapped module waits for its background check
 * (which pins it meanwhile). */
static void settle(store *s) {
  for (int i = 0; i < 3000; i++) {
    store_stats st;
    store_get_stats(s, &st);
    if (!st.verify_pending)
      return;
    usleep(10000);
  }
}

TEST(hot_set_budget_and_pins) {
  const char *dir = sub("hot");
  symtab st[6];
  char key[6][64];
  for (int i = 0; i < 6; i++) {
    synth(&st[i], 10 + (uint32_t)i, 2000);
    snprintf(key[i], sizeof key[i], "h%d.pdb/%032d1", i, i);
  }
  /* what a table loaded back occupies: arrays exactly as long as their counts */
  size_t one = sizeof st[0] + st[0].strs_len + st[0].nfuncs * sizeof(st_func) +
               st[0].nlines * sizeof(st_line) + st[0].ninlines * sizeof(st_inline) +
               st[0].niranges * sizeof(st_irange) + st[0].npublics * sizeof(st_public) +
               st[0].nmethods * sizeof(st_method) + st[0].nseqpts * sizeof(st_seqpt);
  store *s = open_store(dir, 0, (uint64_t)(one * 5 / 2)); /* room for about two */
  for (int i = 0; i < 6; i++)
    CHECK_EQ_U(put(s, key[i], &st[i]), PS_E_OK);
  store_entry pinned[6];
  for (int i = 0; i < 6; i++)
    CHECK_EQ_U(store_get(s, key[i], &pinned[i]), STORE_HIT);
  /* all pinned: all stay, over the budget */
  store_stats stats;
  store_get_stats(s, &stats);
  CHECK_EQ_U(stats.hot_modules, 6);
  for (int i = 0; i < 6; i++) {
    uint64_t hits;
    CHECK_EQ_U(compare_all(&st[i], pinned[i].st, &hits), 0);
    store_release(s, &pinned[i]);
  }
  settle(s);
  store_get_stats(s, &stats);
  CHECK(stats.hot_modules <= 2);
  CHECK(stats.hot_bytes <= stats.mem_max_bytes);
  /* the most recent ones are the ones kept */
  store_entry e;
  const symtab *before = NULL;
  CHECK_EQ_U(store_get(s, key[5], &e), STORE_HIT);
  before = e.st;
  store_release(s, &e);
  CHECK_EQ_U(store_get(s, key[5], &e), STORE_HIT);
  CHECK(e.st == before);
  store_release(s, &e);
  store_close(s);
  for (int i = 0; i < 6; i++)
    st_free(&st[i]);
}

typedef struct {
  store *s;
  const symtab *orig;
  char (*keys)[64];
  int nkeys;
  uint64_t seed, bad;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  static _Thread_local st_answer x, y;
  for (int i = 0; i < 300; i++) {
    int k = (int)(rnd(&a->seed) % (uint32_t)a->nkeys);
    store_entry e;
    if (store_get(a->s, a->keys[k], &e) != STORE_HIT) {
      a->bad++;
      continue;
    }
    for (int j = 0; j < 200; j++) {
      uint32_t rva = 0x1000 + rnd(&a->seed) % 30000;
      st_lookup_rva(&a->orig[k], rva, &x);
      st_lookup_rva(e.st, rva, &y);
      a->bad += (uint64_t)diff_answer(&x, &y);
    }
    store_release(a->s, &e);
  }
  return NULL;
}

TEST(threads_share_the_hot_set) {
  const char *dir = sub("threads");
  enum { K = 5, T = 8 };
  symtab st[K];
  char keys[K][64];
  for (int i = 0; i < K; i++) {
    synth(&st[i], 20 + (uint32_t)i, 1500);
    snprintf(keys[i], sizeof keys[i], "t%d.pdb/%032d1", i, i);
  }
  store *s = open_store(dir, 0, (uint64_t)st_memory_size(&st[0]) * 2);
  for (int i = 0; i < K; i++)
    CHECK_EQ_U(put(s, keys[i], &st[i]), PS_E_OK);
  pthread_t th[T];
  worker_arg args[T];
  for (int i = 0; i < T; i++) {
    args[i] = (worker_arg){s, st, keys, K, (uint64_t)i * 7919 + 1, 0};
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_U(args[i].bad, 0);
  }
  store_stats stats;
  settle(s);
  store_get_stats(s, &stats);
  CHECK(stats.hot_bytes <= stats.mem_max_bytes);
  store_close(s);
  for (int i = 0; i < K; i++)
    st_free(&st[i]);
}

typedef struct {
  store *s;
  const char *key;
  pthread_barrier_t *bar;
  store_result r;
  const symtab *st;
  char error[256];
} same_arg;

static void *get_same(void *p) {
  same_arg *a = p;
  store_entry e;
  pthread_barrier_wait(a->bar);
  a->r = store_get(a->s, a->key, &e);
  a->st = e.st;
  snprintf(a->error, sizeof a->error, "%s", e.error);
  return NULL;
}

TEST(cold_module_loaded_once_for_all_waiters) {
  const char *dir = sub("single");
  symtab st;
  synth(&st, 30, 20000);
  store *s = open_store(dir, 0, 0);
  CHECK_EQ_U(put(s, "one.pdb/A1", &st), PS_E_OK);
  CHECK_EQ_U(store_put_negative(s, "neg.pdb/A1", STORE_NEG_MALFORMED, "corrupt input"), PS_E_OK);
  store_close(s);
  s = open_store(dir, 0, 0); /* cold: nothing in memory */
  enum { T = 8 };
  const char *keys[] = {"one.pdb/A1", "neg.pdb/A1", "none.pdb/A1"};
  for (int k = 0; k < 3; k++) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, T);
    pthread_t th[T];
    same_arg args[T];
    for (int i = 0; i < T; i++) {
      args[i] = (same_arg){.s = s, .key = keys[k], .bar = &bar};
      pthread_create(&th[i], NULL, get_same, &args[i]);
    }
    for (int i = 0; i < T; i++)
      pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < T; i++) {
      CHECK_EQ_U(args[i].r, k == 0 ? STORE_HIT : k == 1 ? STORE_NEGATIVE : STORE_MISS);
      CHECK(args[i].st == args[0].st); /* one table shared by all */
      if (k == 1)
        CHECK_EQ_S(args[i].error, "corrupt input");
    }
    if (k == 0) {
      uint64_t hits;
      CHECK_EQ_U(compare_all(&st, args[0].st, &hits), 0);
      store_entry e = {.st = args[0].st};
      store_entry probe;
      CHECK_EQ_U(store_get(s, keys[0], &probe), STORE_HIT);
      e.pin = probe.pin;
      for (int i = 0; i < T; i++) { /* release the T pins through the shared handle */
        store_entry r = e;
        store_release(s, &r);
      }
      store_release(s, &probe);
      store_stats stats;
      store_get_stats(s, &stats);
      CHECK_EQ_U(stats.hot_modules, 1);
    }
  }
  store_close(s);
  st_free(&st);
}

TEST(negative_entries) {
  const char *dir = sub("neg");
  store_config cfg = {.dir = dir, .negative_missing_ttl = 1, .max_negative = 10};
  store *s = NULL;
  ps_diag d;
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  if (!s)
    return;
  CHECK_EQ_U(store_put_negative(s, "gone.pdb/A1", STORE_NEG_MISSING, "404 from every server"),
             PS_E_OK);
  CHECK_EQ_U(store_put_negative(s, "bad.pdb/B1", STORE_NEG_MALFORMED, "corrupt input: DBI"),
             PS_E_OK);
  store_entry e;
  CHECK_EQ_U(store_get(s, "gone.pdb/A1", &e), STORE_NEGATIVE);
  CHECK_EQ_U(e.neg, STORE_NEG_MISSING);
  CHECK_EQ_S(e.error, "404 from every server");
  CHECK_EQ_U(store_get(s, "bad.pdb/B1", &e), STORE_NEGATIVE);
  CHECK_EQ_U(e.neg, STORE_NEG_MALFORMED);
  /* a positive entry is never replaced by a negative one */
  symtab st;
  synth(&st, 3, 100);
  CHECK_EQ_U(put(s, "ok.pdb/C1", &st), PS_E_OK);
  CHECK_EQ_U(store_put_negative(s, "ok.pdb/C1", STORE_NEG_MISSING, "x"), PS_E_OK);
  CHECK_EQ_U(store_get(s, "ok.pdb/C1", &e), STORE_HIT);
  store_release(s, &e);
  /* a positive ingest replaces a negative entry */
  CHECK_EQ_U(put(s, "bad.pdb/B1", &st), PS_E_OK);
  CHECK_EQ_U(store_get(s, "bad.pdb/B1", &e), STORE_HIT);
  store_release(s, &e);
  /* bounded in number */
  for (int i = 0; i < 25; i++) {
    char k[32];
    snprintf(k, sizeof k, "n%d.pdb/X1", i);
    CHECK_EQ_U(store_put_negative(s, k, STORE_NEG_MALFORMED, "bad"), PS_E_OK);
  }
  store_stats stats;
  store_get_stats(s, &stats);
  CHECK(stats.negatives <= 10);
  CHECK_EQ_U(stats.modules, 2);
  /* lifetime: the 1-second "missing" entry expires */
  sleep(2);
  CHECK_EQ_U(store_get(s, "gone.pdb/A1", &e), STORE_MISS);
  /* clearing negatives leaves the modules */
  uint64_t removed = 0;
  CHECK_EQ_U(store_clear(s, true, &removed), PS_E_OK);
  CHECK(removed >= 1);
  store_get_stats(s, &stats);
  CHECK_EQ_U(stats.negatives, 0);
  CHECK_EQ_U(stats.modules, 2);
  CHECK_EQ_U(store_clear(s, false, &removed), PS_E_OK);
  CHECK_EQ_U(removed, 2);
  CHECK_EQ_U(store_get(s, "ok.pdb/C1", &e), STORE_MISS);
  store_close(s);
  st_free(&st);
}

TEST(byte_cap_evicts_oldest) {
  const char *dir = sub("cap");
  const uint64_t cap = 6u << 20;
  store *s = open_store(dir, cap, 0);
  char path[600];
  snprintf(path, sizeof path, "%s/pdbsym.sqlite", dir);
  enum { N = 40 };
  char keys[N][64];
  uint64_t max_file = 0;
  for (int i = 0; i < N; i++) {
    symtab st;
    synth(&st, 100 + (uint32_t)i, 4000); /* ~0.6 MB of arrays each */
    snprintf(keys[i], sizeof keys[i], "cap%d.pdb/%032d1", i, i);
    CHECK_EQ_U(put(s, keys[i], &st), PS_E_OK);
    st_free(&st);
    /* what the cap counts: the database file and the table files */
    struct stat sb;
    store_stats now;
    store_get_stats(s, &now);
    uint64_t total = (stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0) + now.table_bytes;
    if (total > max_file)
      max_file = total;
  }
  store_stats stats;
  store_get_stats(s, &stats);
  printf("  cap %llu: file peak %llu, now %llu, %llu modules kept of %d\n",
         (unsigned long long)cap, (unsigned long long)max_file,
         (unsigned long long)stats.file_bytes, (unsigned long long)stats.modules, N);
  CHECK(max_file <= cap);
  CHECK(stats.modules >= 5);
  CHECK(stats.modules < N);
  /* the newest survive, the oldest went */
  store_entry e;
  for (int i = N - 3; i < N; i++) {
    CHECK_EQ_U(store_get(s, keys[i], &e), STORE_HIT);
    store_release(s, &e);
  }
  CHECK_EQ_U(store_get(s, keys[0], &e), STORE_MISS);
  /* a module larger than the cap is refused with a clear error */
  symtab big;
  synth(&big, 999, 200000);
  CHECK_EQ_U(put(s, "big.pdb/F1", &big), PS_E_LIMIT);
  st_free(&big);
  store_close(s);
}

TEST(negative_ttl_per_entry) {
  const char *dir = sub("negttl");
  store_config cfg = {.dir = dir, .negative_error_ttl = 3600};
  store *s = NULL;
  ps_diag d;
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  if (!s)
    return;
  /* the caller's TTL wins over the kind's; 0 keeps the kind's */
  CHECK_EQ_U(store_put_negative_ttl(s, "short.pdb/A1", STORE_NEG_FETCH_ERROR, "HTTP 500", 1),
             PS_E_OK);
  CHECK_EQ_U(store_put_negative_ttl(s, "long.pdb/A1", STORE_NEG_FETCH_ERROR, "HTTP 500", 0),
             PS_E_OK);
  CHECK_EQ_U(store_put_negative_ttl(s, "html.pdb/A1", STORE_NEG_MALFORMED, "not a PDB", 1), PS_E_OK);
  store_entry e;
  CHECK_EQ_U(store_get(s, "short.pdb/A1", &e), STORE_NEGATIVE);
  CHECK_EQ_U(e.neg, STORE_NEG_FETCH_ERROR);
  CHECK_EQ_U(store_get(s, "html.pdb/A1", &e), STORE_NEGATIVE);
  CHECK_EQ_U(e.neg, STORE_NEG_MALFORMED);
  sleep(2);
  CHECK_EQ_U(store_get(s, "short.pdb/A1", &e), STORE_MISS);
  CHECK_EQ_U(store_get(s, "html.pdb/A1", &e), STORE_MISS);
  CHECK_EQ_U(store_get(s, "long.pdb/A1", &e), STORE_NEGATIVE);
  store_close(s);
}

/* Known-missing modules are answered from memory: no read of SQLite per
 * lookup (store_counters.module_reads), one read in a new process (the
 * entry comes from SQLite once), dropped by a positive ingest, evict and
 * clear, bounded in number, expired with the entry's TTL. */
TEST(negative_entries_in_memory) {
  const char *dir = sub("negmem");
  store_config cfg = {.dir = dir, .negative_missing_ttl = 3600, .negative_memory = 4};
  store *s = NULL;
  ps_diag d;
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  if (!s)
    return;
  store_counters c0, c1;
  store_entry e;
  CHECK_EQ_U(store_put_negative(s, "gone.pdb/A1", STORE_NEG_MISSING, "404 from every server"),
             PS_E_OK);
  store_get_counters(s, &c0);
  for (int i = 0; i < 100; i++) {
    CHECK_EQ_U(store_get(s, "gone.pdb/A1", &e), STORE_NEGATIVE);
    CHECK_EQ_U(e.neg, STORE_NEG_MISSING);
  }
  CHECK_EQ_S(e.error, "404 from every server");
  CHECK(e.expires_at > (int64_t)time(NULL) + 3000);
  store_get_counters(s, &c1);
  CHECK_EQ_U(c1.module_reads - c0.module_reads, 0);
  CHECK_EQ_U(c1.neg_memory_hits - c0.neg_memory_hits, 100);
  store_close(s);

  /* a new process: SQLite once, then memory */
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  if (!s)
    return;
  store_get_counters(s, &c0);
  for (int i = 0; i < 10; i++)
    CHECK_EQ_U(store_get(s, "gone.pdb/A1", &e), STORE_NEGATIVE);
  store_get_counters(s, &c1);
  CHECK_EQ_U(c1.module_reads - c0.module_reads, 1);
  CHECK_EQ_S(e.error, "404 from every server");

  /* a positive ingest replaces it in memory too */
  symtab st;
  synth(&st, 5, 50);
  CHECK_EQ_U(put(s, "gone.pdb/A1", &st), PS_E_OK);
  CHECK_EQ_U(store_get(s, "gone.pdb/A1", &e), STORE_HIT);
  store_release(s, &e);
  /* a negative entry never hides a complete module, in memory either */
  CHECK_EQ_U(store_put_negative(s, "gone.pdb/A1", STORE_NEG_MISSING, "x"), PS_E_OK);
  CHECK_EQ_U(store_evict(s, "nothing.pdb/Z1"), PS_E_NOT_FOUND);
  store_close(s);
  CHECK_EQ_U(store_open(&cfg, &s, &d), PS_E_OK);
  if (!s)
    return;
  CHECK_EQ_U(store_get(s, "gone.pdb/A1", &e), STORE_HIT);
  store_release(s, &e);

  /* evict and clear forget the memory's entries too */
  CHECK_EQ_U(store_put_negative(s, "e.pdb/A1", STORE_NEG_MALFORMED, "bad"), PS_E_OK);
  CHECK_EQ_U(store_get(s, "e.pdb/A1", &e), STORE_NEGATIVE);
  CHECK_EQ_U(store_evict(s, "e.pdb/A1"), PS_E_OK);
  CHECK_EQ_U(store_get(s, "e.pdb/A1", &e), STORE_MISS);
  CHECK_EQ_U(store_put_negative(s, "c.pdb/A1", STORE_NEG_MALFORMED, "bad"), PS_E_OK);
  uint64_t removed = 0;
  CHECK_EQ_U(store_clear(s, true, &removed), PS_E_OK);
  CHECK_EQ_U(store_get(s, "c.pdb/A1", &e), STORE_MISS);

  /* bounded: at most negative_memory entries; the others still come from SQLite */
  for (int i = 0; i < 10; i++) {
    char k[32];
    snprintf(k, sizeof k, "b%d.pdb/X1", i);
    CHECK_EQ_U(store_put_negative(s, k, STORE_NEG_MISSING, "gone"), PS_E_OK);
  }
  store_get_counters(s, &c0);
  CHECK(c0.neg_memory <= 4);
  CHECK_EQ_U(store_get(s, "b0.pdb/X1", &e), STORE_NEGATIVE); /* dropped from memory: SQLite */
  CHECK_EQ_U(store_get(s, "b9.pdb/X1", &e), STORE_NEGATIVE); /* in memory */
  store_get_counters(s, &c1);
  CHECK_EQ_U(c1.module_reads - c0.module_reads, 1);

  /* the entry's own TTL, in memory as in SQLite */
  CHECK_EQ_U(store_put_negative_ttl(s, "short.pdb/A1", STORE_NEG_FETCH_ERROR, "HTTP 500", 1),
             PS_E_OK);
  CHECK_EQ_U(store_get(s, "short.pdb/A1", &e), STORE_NEGATIVE);
  sleep(2);
  CHECK_EQ_U(store_get(s, "short.pdb/A1", &e), STORE_MISS);
  store_close(s);
  st_free(&st);
}

TEST(make_room_for_downloads) {
  const char *dir = sub("room");
  const uint64_t cap = 6u << 20;
  store *s = open_store(dir, cap, 0);
  char path[600];
  snprintf(path, sizeof path, "%s/pdbsym.sqlite", dir);
  for (int i = 0; i < 9; i++) {
    symtab st;
    synth(&st, 300 + (uint32_t)i, 4000); /* ~0.6 MB of arrays each */
    char key[64];
    snprintf(key, sizeof key, "room%d.pdb/%032d1", i, i);
    CHECK_EQ_U(put(s, key, &st), PS_E_OK);
    st_free(&st);
  }
  struct stat sb;
  CHECK(stat(path, &sb) == 0);
  uint64_t before = (uint64_t)sb.st_size;
  uint64_t freed = 0;
  ps_diag d;
  ps_diag_clear(&d);
  /* room for 3 MiB beside the database: the file shrinks to leave it */
  CHECK_EQ_U(store_make_room(s, 3u << 20, &freed, &d), PS_E_OK);
  CHECK(stat(path, &sb) == 0);
  printf("  6 MiB cap: database file %llu bytes, %llu after making 3 MiB of room (%llu freed)\n",
         (unsigned long long)before, (unsigned long long)sb.st_size, (unsigned long long)freed);
  uint64_t after = (uint64_t)sb.st_size;
  char wal[700];
  snprintf(wal, sizeof wal, "%s-wal", path);
  if (stat(wal, &sb) == 0)
    after += (uint64_t)sb.st_size; /* emptied by the checkpoint */
  CHECK(after + (3u << 20) <= cap);
  CHECK(freed > 0);
  /* the newest module stayed, the oldest went */
  store_entry e;
  char key[64];
  snprintf(key, sizeof key, "room%d.pdb/%032d1", 8, 8);
  CHECK_EQ_U(store_get(s, key, &e), STORE_HIT);
  store_release(s, &e);
  snprintf(key, sizeof key, "room%d.pdb/%032d1", 0, 0);
  CHECK_EQ_U(store_get(s, key, &e), STORE_MISS);
  /* more room than the cap: everything goes, and it says so */
  ps_diag_clear(&d);
  CHECK_EQ_U(store_make_room(s, cap + 1, &freed, &d), PS_E_LIMIT);
  store_close(s);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static void run_sql(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  CHECK_EQ_U(sqlite3_open(path, &db), SQLITE_OK);
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK)
    fprintf(stderr, "sql: %s\n", err ? err : "?");
  CHECK_EQ_U(rc, SQLITE_OK);
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(broken_databases_moved_aside) {
  char path[600];
  const char *cases[][2] = {
      {"garbage", NULL},
      {"newer", "PRAGMA user_version=999; CREATE TABLE future(x);"},
      {"foreign", "CREATE TABLE something_else(x);"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sub(cases[i][0]));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/pdbsym.sqlite", dir);
    if (cases[i][1])
      run_sql(path, cases[i][1]);
    else
      write_file(path, "this is not an SQLite database, but it is long enough to be read as one; "
                       "SQLite refuses it with SQLITE_NOTADB...................................");
    store *s = open_store(dir, 0, 0);
    CHECK(s != NULL);
    CHECK_EQ_U(count_files(dir, "pdbsym.sqlite.broken-"), 1);
    if (s) {
      symtab st;
      synth(&st, 5, 50);
      CHECK_EQ_U(put(s, "x.pdb/D1", &st), PS_E_OK);
      store_entry e;
      CHECK_EQ_U(store_get(s, "x.pdb/D1", &e), STORE_HIT);
      store_release(s, &e);
      st_free(&st);
      store_close(s);
    }
  }
  /* a database with a damaged page: quick_check fails, moved aside */
  const char *dir = sub("pagecorrupt");
  store *s = open_store(dir, 0, 0);
  symtab st;
  synth(&st, 6, 20000);
  CHECK_EQ_U(put(s, "p.pdb/E1", &st), PS_E_OK);
  st_free(&st);
  store_close(s);
  snprintf(path, sizeof path, "%s/pdbsym.sqlite", dir);
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  if (f) { /* scribble over the pages after the first two (b-tree pages) */
    fseek(f, 4096 * 2, SEEK_SET);
    for (int i = 0; i < 4096 * 4; i++)
      fputc(0xA5, f);
    fclose(f);
  }
  s = open_store(dir, 0, 0);
  CHECK(s != NULL);
  CHECK_EQ_U(count_files(dir, "pdbsym.sqlite.broken-"), 1);
  store_entry e;
  if (s)
    CHECK_EQ_U(store_get(s, "p.pdb/E1", &e), STORE_MISS);
  store_close(s);
}

static void note_problem(void *ctx, const char *key, const char *problem) {
  char *buf = ctx;
  size_t n = strlen(buf);
  snprintf(buf + n, 1024 - n, "%s: %s\n", key, problem);
}

/* The table file of key (dir/tables/NAME.pst), from its row. */
static bool table_path(const char *dir, const char *key, char *out, size_t cap) {
  char db_path[600];
  snprintf(db_path, sizeof db_path, "%s/pdbsym.sqlite", dir);
  sqlite3 *db = NULL;
  bool ok = false;
  if (sqlite3_open(db_path, &db) == SQLITE_OK) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT table_file FROM modules WHERE key = ?", -1, &q, NULL) ==
        SQLITE_OK) {
      sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
      if (sqlite3_step(q) == SQLITE_ROW) {
        snprintf(out, cap, "%s/tables/%s.pst", dir, (const char *)sqlite3_column_text(q, 0));
        ok = true;
      }
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return ok;
}

/* The table file's section k (1 strings ... 3 lines ...): its offset, as
 * server/cache/store_codec.c lays out the header (sections from byte 368,
 * 24 bytes each: offset, count, record size). */
static uint64_t section_offset(const char *path, int k) {
  FILE *f = fopen(path, "rb");
  uint64_t off = 0;
  if (f) {
    fseek(f, 368 + (k - 1) * 24, SEEK_SET);
    if (fread(&off, sizeof off, 1, f) != 1)
      off = 0;
    fclose(f);
  }
  return off;
}

static void poke(const char *path, uint64_t at, const void *bytes, size_t n) {
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  if (f) {
    fseek(f, (long)at, SEEK_SET);
    CHECK_EQ_U(fwrite(bytes, 1, n, f), n);
    fclose(f);
  }
}

/* Waits (up to 30 s) until the store's background checks have failed n
 * modules. */
static bool wait_failed(store *s, uint64_t n) {
  for (int i = 0; i < 3000; i++) {
    store_stats st;
    store_get_stats(s, &st);
    if (st.verify_failed >= n)
      return true;
    usleep(10000);
  }
  return false;
}

TEST(damaged_module_dropped_and_verify_reports) {
  const char *dir = sub("damaged");
  symtab st;
  synth(&st, 7, 3000);
  store *s = open_store(dir, 0, 0);
  static const char *const keys[] = {"d1.pdb/A1", "d2.pdb/A1", "d3.pdb/A1",
                                     "d4.pdb/A1", "d5.pdb/A1", "d6.pdb/A1"};
  for (int i = 0; i < 6; i++)
    CHECK_EQ_U(put(s, keys[i], &st), PS_E_OK);
  store_close(s);
  char path[6][700];
  for (int i = 0; i < 6; i++)
    CHECK(table_path(dir, keys[i], path[i], sizeof path[i]));
  /* d1: a line's file offset pointing far outside the string pool */
  static const unsigned char far[4] = {0xff, 0xff, 0xff, 0x7f};
  poke(path[0], section_offset(path[0], 3) + 12, far, 4);
  /* d2: one byte of a name changed (only the checksum notices) */
  poke(path[1], section_offset(path[1], 1) + 40, "Z", 1);
  /* d4: cut short; d5: not a table file; d6: gone */
  struct stat sb;
  CHECK(stat(path[3], &sb) == 0);
  CHECK(truncate(path[3], sb.st_size - 100) == 0);
  poke(path[4], 0, "XXXXXXXX", 8);
  CHECK(unlink(path[5]) == 0);

  s = open_store(dir, 0, 0);
  char problems[2048] = "";
  uint64_t checked = 0;
  CHECK_EQ_U(store_verify(s, false, note_problem, problems, &checked), PS_E_CORRUPT);
  CHECK_EQ_U(checked, 6);
  CHECK(strstr(problems, "d1.pdb/A1") != NULL);
  CHECK(strstr(problems, "d2.pdb/A1: checksum") != NULL);
  CHECK(strstr(problems, "d3.pdb/A1") == NULL);
  CHECK(strstr(problems, "d4.pdb/A1: table file") != NULL); /* its size */
  CHECK(strstr(problems, "d5.pdb/A1: not a table file") != NULL);
  CHECK(strstr(problems, "d6.pdb/A1: table file") != NULL); /* No such file */
  /* what the header says is checked at load: never mapped, dropped */
  store_entry e;
  for (int i = 3; i < 6; i++) {
    CHECK_EQ_U(store_get(s, keys[i], &e), STORE_MISS);
    CHECK_EQ_U(store_get(s, keys[i], &e), STORE_MISS);
  }
  /* the records are checked in the background: d1 answers at once (its
   * lookups stay in bounds), then the check drops it */
  CHECK_EQ_U(store_get(s, keys[0], &e), STORE_HIT);
  if (e.st) {
    for (uint32_t r = 0; r < 0x40000; r += 61) {
      st_answer a;
      st_lookup_rva(e.st, r, &a);
    }
  }
  store_release(s, &e);
  CHECK(wait_failed(s, 1));
  CHECK_EQ_U(store_get(s, keys[0], &e), STORE_MISS);
  CHECK_EQ_U(store_get(s, keys[2], &e), STORE_HIT);
  store_release(s, &e);
  /* --fix removes d2; afterwards everything verifies */
  problems[0] = '\0';
  CHECK_EQ_U(store_verify(s, true, note_problem, problems, &checked), PS_E_CORRUPT);
  problems[0] = '\0';
  CHECK_EQ_U(store_verify(s, false, note_problem, problems, &checked), PS_E_OK);
  CHECK_EQ_U(checked, 1);
  /* a changed byte that still makes a valid table: the background check
   * drops it too (its answers until then are the window store.h states) */
  CHECK_EQ_U(put(s, keys[1], &st), PS_E_OK);
  store_close(s);
  CHECK(table_path(dir, keys[1], path[1], sizeof path[1]));
  poke(path[1], section_offset(path[1], 1) + 40, "Z", 1);
  s = open_store(dir, 0, 0);
  CHECK_EQ_U(store_get(s, keys[1], &e), STORE_HIT);
  store_release(s, &e);
  CHECK(wait_failed(s, 1));
  CHECK_EQ_U(store_get(s, keys[1], &e), STORE_MISS);
  store_close(s);
  st_free(&st);
}

/* A cache written before table files (layout 3: the arrays as BLOB chunks
 * of whole records in `arrays`) is still read.  The old layout is made from
 * a new module's own file: its sections become chunks, its row layout 3. */
TEST(modules_of_the_old_layout_still_load) {
  const char *dir = sub("oldlayout");
  symtab st;
  synth(&st, 9, 20000);
  store *s = open_store(dir, 0, 0);
  CHECK_EQ_U(put(s, "old.pdb/A1", &st), PS_E_OK);
  store_close(s);
  char path[700], dbp[600];
  CHECK(table_path(dir, "old.pdb/A1", path, sizeof path));
  snprintf(dbp, sizeof dbp, "%s/pdbsym.sqlite", dir);
  FILE *f = fopen(path, "rb");
  sqlite3 *db = NULL;
  CHECK(f && sqlite3_open(dbp, &db) == SQLITE_OK);
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  sqlite3_stmt *q = NULL;
  sqlite3_prepare_v2(db, "INSERT INTO arrays (module, kind, seq, data) VALUES"
                         " ((SELECT id FROM modules WHERE key = 'old.pdb/A1'), ?, ?, ?)", -1, &q, NULL);
  for (int k = 1; f && k <= 8; k++) {
    uint64_t sect[3] = {0, 0, 0}; /* offset, count, record size (low half) */
    fseek(f, 368 + (k - 1) * 24, SEEK_SET);
    CHECK_EQ_U(fread(sect, 8, 3, f), 3);
    uint64_t elem = sect[2] & 0xffffffffu, total = sect[1] * elem;
    uint64_t chunk = (1u << 20) - (1u << 20) % elem;
    char *buf = malloc(chunk);
    for (uint64_t off = 0, seq = 0; off < total; off += chunk, seq++) {
      size_t n = (size_t)(total - off < chunk ? total - off : chunk);
      fseek(f, (long)(sect[0] + off), SEEK_SET);
      CHECK_EQ_U(fread(buf, 1, n, f), n);
      sqlite3_bind_int(q, 1, k);
      sqlite3_bind_int64(q, 2, (int64_t)seq);
      sqlite3_bind_blob(q, 3, buf, (int)n, SQLITE_TRANSIENT);
      CHECK_EQ_U(sqlite3_step(q), SQLITE_DONE);
      sqlite3_reset(q);
    }
    free(buf);
  }
  sqlite3_finalize(q);
  CHECK_EQ_U(sqlite3_exec(db, "UPDATE modules SET layout = 3, table_file = '', file_bytes = 0"
                              " WHERE key = 'old.pdb/A1'; COMMIT", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  if (f)
    fclose(f);
  unlink(path);
  s = open_store(dir, 0, 0);
  store_entry e;
  CHECK_EQ_U(store_get(s, "old.pdb/A1", &e), STORE_HIT);
  uint64_t hits = 0;
  if (e.st)
    CHECK_EQ_U(compare_all(&st, e.st, &hits), 0);
  CHECK(hits > 1000);
  store_release(s, &e);
  char problems[1024] = "";
  uint64_t checked = 0;
  CHECK_EQ_U(store_verify(s, false, note_problem, problems, &checked), PS_E_OK);
  CHECK_EQ_U(checked, 1);
  /* evicting it takes its chunks with it */
  CHECK_EQ_U(store_evict(s, "old.pdb/A1"), PS_E_OK);
  store_close(s);
  CHECK(sqlite3_open(dbp, &db) == SQLITE_OK);
  sqlite3_prepare_v2(db, "SELECT count(*) FROM arrays", -1, &q, NULL);
  CHECK_EQ_U(sqlite3_step(q), SQLITE_ROW);
  CHECK_EQ_U(sqlite3_column_int(q, 0), 0);
  sqlite3_finalize(q);
  sqlite3_close(db);
  st_free(&st);
}

TEST(table_files_no_row_names_are_swept) {
  const char *dir = sub("sweep");
  store *s = open_store(dir, 0, 0);
  symtab st;
  synth(&st, 8, 100);
  CHECK_EQ_U(put(s, "keep.pdb/A1", &st), PS_E_OK);
  store_close(s);
  char old[700], young[700], tmp[700];
  snprintf(old, sizeof old, "%s/tables/00000000deadbeef.pst", dir);
  snprintf(young, sizeof young, "%s/tables/00000000feedface.pst", dir);
  snprintf(tmp, sizeof tmp, "%s/tables/.tmp-0000000012345678", dir);
  const char *files[] = {old, young, tmp};
  for (int i = 0; i < 3; i++)
    write_file(files[i], "left by an ingest that crashed before its row committed");
  /* an hour old: what a crash left; the young one may be another process's
   * ingest about to commit */
  struct timespec ts[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
  CHECK(utimensat(AT_FDCWD, old, ts, 0) == 0);
  CHECK(utimensat(AT_FDCWD, tmp, ts, 0) == 0);
  s = open_store(dir, 0, 0);
  CHECK(access(old, F_OK) != 0);
  CHECK(access(tmp, F_OK) != 0);
  CHECK(access(young, F_OK) == 0);
  store_entry e;
  CHECK_EQ_U(store_get(s, "keep.pdb/A1", &e), STORE_HIT);
  store_release(s, &e);
  /* evicting a module takes its file with it */
  char keep[700];
  CHECK(table_path(dir, "keep.pdb/A1", keep, sizeof keep));
  CHECK_EQ_U(store_evict(s, "keep.pdb/A1"), PS_E_OK);
  CHECK(access(keep, F_OK) != 0);
  /* and clearing takes them all */
  CHECK_EQ_U(put(s, "a.pdb/A1", &st), PS_E_OK);
  CHECK_EQ_U(put(s, "b.pdb/A1", &st), PS_E_OK);
  uint64_t removed = 0;
  CHECK_EQ_U(store_clear(s, false, &removed), PS_E_OK);
  CHECK_EQ_U(removed, 2);
  snprintf(keep, sizeof keep, "%s/tables", dir);
  CHECK_EQ_U(count_files(keep, "0"), 1); /* the young stray only */
  store_close(s);
  st_free(&st);
}

int main(void) {
  make_tmp();
  RUN(roundtrip_same_answers);
  RUN(put_take_pins_the_table);
  RUN(adopt_then_save);
  RUN(empty_table_roundtrip);
  RUN(same_key_twice_one_copy);
  RUN(hot_set_budget_and_pins);
  RUN(threads_share_the_hot_set);
  RUN(cold_module_loaded_once_for_all_waiters);
  RUN(negative_entries);
  RUN(byte_cap_evicts_oldest);
  RUN(negative_ttl_per_entry);
  RUN(negative_entries_in_memory);
  RUN(make_room_for_downloads);
  RUN(broken_databases_moved_aside);
  RUN(damaged_module_dropped_and_verify_reports);
  RUN(modules_of_the_old_layout_still_load);
  RUN(table_files_no_row_names_are_swept);
  rm_tree(tmpdir);
  return test_summary();
}
