/*
 * test_pdb_llvm.c - native PDB lookups against two outside oracles:
 *
 *  1. llvm-symbolizer (LLVM's own native PDB reader), run by this test:
 *     for every corpus native PDB whose PE is in the corpus, a dense sample
 *     of code RVAs (every byte of small images; PDBSYM_LLVM_RVAS per image,
 *     default 3000, evenly spread) is looked up by both; function names,
 *     files, lines and inline chains must agree, and each disagreement is
 *     put under a cause (printed with an example).  Causes where
 *     llvm-symbolizer 14 is known wrong or weaker are allowed; an
 *     unexplained disagreement fails the test.
 *  2. the Breakpad .sym files shipped beside corpus PDBs (dump_syms output,
 *     DIA-based, including the OMAP-relinked breakpad files): every FUNC
 *     start must land in a procedure whose name the FUNC name contains, and
 *     every line record's first and last byte must give its line and file.
 *
 * Skips (exit 77) when the corpus or llvm-symbolizer is absent.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pdb_corpus.h"
#include "test.h"

static const char *g_corpus;

/* ---- PE: executable sections and the RSDS file name ------------------- */

typedef struct {
  uint32_t va, size;
} range;

static int pe_code(const uint8_t *d, size_t n, range *out, int max) {
  if (n < 0x40 || d[0] != 'M' || d[1] != 'Z')
    return 0;
  uint32_t pe = (uint32_t)d[0x3c] | (uint32_t)d[0x3d] << 8 | (uint32_t)d[0x3e] << 16 |
                (uint32_t)d[0x3f] << 24;
  if ((size_t)pe + 24 > n)
    return 0;
  unsigned nsec = d[pe + 6] | d[pe + 7] << 8, optsz = d[pe + 20] | d[pe + 21] << 8;
  size_t sec = pe + 24u + optsz;
  int k = 0;
  for (unsigned i = 0; i < nsec && k < max && sec + 40 * (i + 1) <= n; i++) {
    const uint8_t *s = d + sec + 40 * i;
    uint32_t vsz = (uint32_t)s[8] | (uint32_t)s[9] << 8 | (uint32_t)s[10] << 16 | (uint32_t)s[11] << 24;
    uint32_t va = (uint32_t)s[12] | (uint32_t)s[13] << 8 | (uint32_t)s[14] << 16 | (uint32_t)s[15] << 24;
    uint32_t ch = (uint32_t)s[36] | (uint32_t)s[37] << 8 | (uint32_t)s[38] << 16 | (uint32_t)s[39] << 24;
    if (ch & 0x20000000u) { /* IMAGE_SCN_MEM_EXECUTE */
      out[k].va = va;
      out[k].size = vsz;
      k++;
    }
  }
  return k;
}

static bool rsds_name(const uint8_t *d, size_t n, char *out, size_t cap) {
  for (size_t i = 0; i + 24 < n; i++) {
    if (memcmp(d + i, "RSDS", 4) != 0)
      continue;
    const char *p = (const char *)d + i + 24;
    size_t len = strnlen(p, n - i - 24);
    const char *base = p;
    for (size_t j = 0; j < len; j++)
      if (p[j] == '\\' || p[j] == '/')
        base = p + j + 1;
    snprintf(out, cap, "%.*s", (int)(len - (size_t)(base - p)), base);
    return out[0] != '\0';
  }
  return false;
}

static bool write_file(const char *path, const uint8_t *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  bool ok = fwrite(d, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* ---- llvm-symbolizer's JSON ------------------------------------------- */

typedef struct {
  char func[2048];
  char file[512];
  uint32_t line;
} frame;

typedef struct {
  int n;
  frame f[16];
} frames;

static const char *json_string(const char *p, char *out, size_t cap) {
  size_t n = 0;
  while (*p && *p != '"') {
    char ch = *p++;
    if (ch == '\\' && *p) {
      ch = *p++;
      if (ch == 'u') {
        unsigned v = 0;
        for (int i = 0; i < 4 && *p; i++, p++)
          v = v * 16 + (unsigned)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
        ch = v < 0x80 ? (char)v : '?';
      } else if (ch == 'n') {
        ch = '\n';
      } else if (ch == 't') {
        ch = '\t';
      }
    }
    if (n + 1 < cap)
      out[n++] = ch;
  }
  out[n] = '\0';
  return *p ? p + 1 : p;
}

/* One output line: {"Address":..,"Symbol":[{..."FileName":"..","FunctionName":"..","Line":N,...},...]} */
static void parse_llvm(const char *line, frames *fr) {
  fr->n = 0;
  const char *p = line;
  while (fr->n < 16 && (p = strstr(p, "\"FileName\":\""))) {
    frame *f = &fr->f[fr->n];
    p = json_string(p + 12, f->file, sizeof f->file);
    const char *q = strstr(p, "\"FunctionName\":\"");
    if (!q)
      break;
    p = json_string(q + 16, f->func, sizeof f->func);
    q = strstr(p, "\"Line\":");
    if (!q)
      break;
    f->line = (uint32_t)strtoul(q + 7, NULL, 10);
    if (f->line == 0)
      f->file[0] = '\0'; /* line 0 (compiler-generated code) is no line: we report none */
    p = q + 7;
    fr->n++;
  }
  if (fr->n == 1 && !fr->f[0].func[0] && !fr->f[0].file[0] && fr->f[0].line == 0)
    fr->n = 0; /* "??" */
}

/* true when rva falls in an S_THUNK32 (llvm-symbolizer names no thunk) */
static bool in_thunk(const symtab *st, uint32_t rva) {
  for (size_t lo = 0, hi = st->nfuncs; lo < hi;) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->funcs[mid].rva <= rva)
      lo = mid + 1;
    else
      hi = mid;
    if (lo >= hi && lo > 0) {
      const st_func *f = &st->funcs[lo - 1];
      return (f->flags & ST_FUNC_THUNK) && rva - f->rva < (f->size ? f->size : 1);
    }
  }
  return false;
}

static void ours(const symtab *st, uint32_t rva, st_answer *a, frames *fr, bool *public_fallback) {
  st_lookup_rva(st, rva, a);
  fr->n = 0;
  *public_fallback = false;
  if (a->status != ST_OK)
    return;
  for (int i = 0; i < a->nsyms && fr->n < 16; i++) {
    frame *f = &fr->f[fr->n++];
    snprintf(f->func, sizeof f->func, "%s", a->syms[i].function);
    snprintf(f->file, sizeof f->file, "%s", a->syms[i].has_line && a->syms[i].file ? a->syms[i].file : "");
    f->line = a->syms[i].has_line ? a->syms[i].line : 0;
  }
  *public_fallback = a->nsyms == 1 && a->syms[0].mangled != NULL;
}

static bool frame_eq(const frame *a, const frame *b) {
  return strcmp(a->func, b->func) == 0 && strcmp(a->file, b->file) == 0 && a->line == b->line;
}

enum {
  C_AGREE,
  C_PUBLIC,      /* we answer from a public symbol; llvm --functions=short has no fallback */
  C_INLINE,      /* outer frame equal; llvm's inline frames a subsequence of ours */
  C_FEEFEE,      /* llvm prints the hidden line 0xFEEFEE; the contract never reports it */
  C_NOLINE_LLVM, /* same function, llvm has no line (C11 line format llvm 14 does not read) */
  C_SAMELINE,    /* same function and file, another line: several entries at one address */
  C_NOFUNC,      /* llvm gives a line without any function (code outside procedures) */
  C_CRASH,       /* llvm-symbolizer crashed on this address */
  C_THUNK,       /* an S_THUNK32: llvm-symbolizer names no thunk */
  C_OTHERFILE,   /* same function, a line of another file of one multi-file subsection */
  C_OTHER,       /* unexplained */
  C_COUNT
};
static const char *const cause_names[C_COUNT] = {
    "agree",
    "public-symbol fallback (llvm --functions=short has none)",
    "inline frames: llvm-symbolizer 14 inline-site decoder (frames dropped or other line)",
    "llvm prints a special line 0xFEEFEE / 0xF00F00 (we report none / the line before, as DIA)",
    "llvm reads no line (C11 line format)",
    "same function and file, other line (several line entries at one address)",
    "llvm gives a line outside any procedure",
    "llvm-symbolizer crashed",
    "S_THUNK32 (llvm-symbolizer names no thunk)",
    "same function, line of another file in one subsection (llvm 14 searches such tables unsorted)",
    "UNEXPLAINED",
};

static bool subseq(const frames *small, int ns, const frames *big, int nb) {
  int j = 0;
  for (int i = 0; i < ns; i++) {
    while (j < nb && strcmp(big->f[j].func, small->f[i].func) != 0)
      j++;
    if (j == nb)
      return false;
    j++;
  }
  return true;
}

static int classify(const frames *o, const frames *t, bool pub, bool thunk) {
  if (o->n == t->n) {
    bool eq = true;
    for (int i = 0; i < o->n && eq; i++)
      eq = frame_eq(&o->f[i], &t->f[i]);
    if (eq)
      return C_AGREE;
  }
  if (pub && (t->n == 0 || (t->n == 1 && !t->f[0].func[0] && o->n == 1 &&
                             (t->f[0].line == o->f[0].line || !o->f[0].line))))
    return C_PUBLIC;
  if (thunk && (t->n == 0 || !t->f[t->n - 1].func[0]))
    return C_THUNK;
  if (t->n == 1 && !t->f[0].func[0] && (o->n == 0 || pub))
    return C_NOFUNC;
  if (t->n == 0 || o->n == 0)
    return C_OTHER;
  const frame *oo = &o->f[o->n - 1], *to = &t->f[t->n - 1];
  if (frame_eq(oo, to) && subseq(t, t->n - 1, o, o->n - 1))
    return C_INLINE;
  if (strcmp(oo->func, to->func) == 0 && (to->line == ST_HIDDEN_LINE || to->line == 0xF00F00u))
    return C_FEEFEE;
  if (strcmp(oo->func, to->func) == 0 && to->line == 0 && !to->file[0] && oo->line)
    return C_NOLINE_LLVM;
  if (strcmp(oo->func, to->func) == 0 && strcmp(oo->file, to->file) == 0)
    return C_SAMELINE;
  if (strcmp(oo->func, to->func) == 0 && oo->file[0] && to->file[0])
    return C_OTHERFILE;
  return C_OTHER;
}

typedef struct {
  long count[C_COUNT];
  char example[C_COUNT][3200];
} tallies;

static void fmt_frames(char *out, size_t cap, const frames *f) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < f->n && n + 1 < cap; i++) {
    int w = snprintf(out + n, cap - n, "%s[%s %s:%u]", i ? " < " : "", f->f[i].func,
                     f->f[i].file, f->f[i].line);
    if (w < 0)
      break;
    n += (size_t)w;
  }
  if (!f->n)
    snprintf(out, cap, "(none)");
}

static void note(tallies *t, int c, uint32_t rva, const frames *o, const frames *l, const char *pdb) {
  t->count[c]++;
  if (c == C_AGREE || t->example[c][0])
    return;
  char a[1500], b[1500];
  fmt_frames(a, sizeof a, o);
  fmt_frames(b, sizeof b, l);
  snprintf(t->example[c], sizeof t->example[c], "%s 0x%x: ours %s; llvm %s", pdb, rva, a, b);
}

/* Runs llvm-symbolizer over rvas[from..n); fills out lines; returns how many
 * it answered before exiting (fewer than asked: it crashed on the next). */
static size_t run_llvm(const char *dir, const char *exe, const uint32_t *rvas, size_t from, size_t n,
                       char **lines) {
  char in[4400], cmd[9000];
  snprintf(in, sizeof in, "%s/in.txt", dir);
  FILE *f = fopen(in, "w");
  if (!f)
    return 0;
  for (size_t i = from; i < n; i++)
    fprintf(f, "0x%x\n", rvas[i]);
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "llvm-symbolizer --obj='%s/%s' --inlines --functions=short --no-demangle "
           "--output-style=JSON --relative-address < '%s' 2>/dev/null",
           dir, exe, in);
  FILE *p = popen(cmd, "r");
  if (!p)
    return 0;
  size_t got = 0;
  char *buf = NULL;
  size_t cap = 0;
  ssize_t len;
  while (from + got < n && (len = getline(&buf, &cap, p)) > 0) {
    lines[from + got] = strdup(buf);
    got++;
  }
  free(buf);
  pclose(p);
  return got;
}

static bool have_llvm_symbolizer(void) {
  return system("llvm-symbolizer --version >/dev/null 2>&1") == 0;
}

TEST(native_lookups_match_llvm_symbolizer) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  if (!have_llvm_symbolizer())
    SKIP("llvm-symbolizer absent");
  size_t cap = 3000;
  const char *env = getenv("PDBSYM_LLVM_RVAS");
  if (env && atol(env) > 0)
    cap = (size_t)atol(env);
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  tallies *total = calloc(1, sizeof *total);
  st_answer *a = malloc(sizeof *a);
  int images = 0;
  for (int i = 0; i < n && total && a; i++) {
    manifest_row *r = &rows[i];
    if (r->ncols < 13 || strcmp(r->cols[1], "windows-native-pdb") != 0)
      continue;
    const char *only = getenv("PDBSYM_LLVM_ONLY"); /* a substring of the PDB path, for debugging */
    if (only && !strstr(r->cols[0], only))
      continue;
    const char *ref = strstr(r->cols[12], "referenced by RSDS of: ");
    if (!ref)
      continue;
    char pe_rel[1024];
    snprintf(pe_rel, sizeof pe_rel, "%s", ref + 23);
    pe_rel[strcspn(pe_rel, ", ;")] = '\0';
    char pdb_path[4400], pe_path[4400], msg[400];
    snprintf(pdb_path, sizeof pdb_path, "%s/%s", g_corpus, r->cols[0]);
    snprintf(pe_path, sizeof pe_path, "%s/%s", g_corpus, pe_rel);
    size_t pe_len = 0, pdb_len = 0;
    uint8_t *pe = cu_read_raw(pe_path, &pe_len);
    uint8_t *pdb = cu_read_raw(pdb_path, &pdb_len);
    range code[16];
    int ncode = pe ? pe_code(pe, pe_len, code, 16) : 0;
    char pdb_name[512];
    if (!pe || !pdb || !ncode || !rsds_name(pe, pe_len, pdb_name, sizeof pdb_name)) {
      free(pe);
      free(pdb);
      continue;
    }
    symtab st;
    ps_budget b;
    if (read_pdb_file(pdb_path, &st, &b, msg, sizeof msg) != PS_E_OK) {
      fprintf(stderr, "%s: %s\n", r->cols[0], msg);
      CHECK(0);
      st_free(&st);
      free(pe);
      free(pdb);
      continue;
    }
    /* the sample */
    size_t bytes = 0;
    for (int k = 0; k < ncode; k++)
      bytes += code[k].size;
    size_t step = bytes > cap ? bytes / cap + 1 : 1;
    size_t nr = 0;
    uint32_t *rvas = malloc(sizeof *rvas * (bytes / step + (size_t)ncode + 1));
    for (int k = 0; rvas && k < ncode; k++)
      for (uint64_t v = code[k].va; v < (uint64_t)code[k].va + code[k].size; v += step)
        rvas[nr++] = (uint32_t)v;
    /* a folder with the PE and the PDB under its RSDS name */
    char dir[] = "/tmp/pdbsym-llvm-XXXXXX";
    const char *exe = strrchr(pe_rel, '/') ? strrchr(pe_rel, '/') + 1 : pe_rel;
    char p1[4400], p2[4400];
    if (!rvas || !mkdtemp(dir)) {
      free(rvas);
      st_free(&st);
      free(pe);
      free(pdb);
      continue;
    }
    snprintf(p1, sizeof p1, "%s/%s", dir, exe);
    snprintf(p2, sizeof p2, "%s/%s", dir, pdb_name);
    write_file(p1, pe, pe_len);
    write_file(p2, pdb, pdb_len);
    char **lines = calloc(nr ? nr : 1, sizeof *lines);
    size_t done = 0;
    while (lines && done < nr) {
      done += run_llvm(dir, exe, rvas, done, nr, lines);
      if (done < nr)
        lines[done++] = NULL; /* crashed on this one */
    }
    tallies *t = calloc(1, sizeof *t);
    for (size_t k = 0; t && lines && k < nr; k++) {
      frames o, l;
      bool pub;
      ours(&st, rvas[k], a, &o, &pub);
      int c;
      if (!lines[k]) {
        c = C_CRASH;
        l.n = 0;
      } else {
        parse_llvm(lines[k], &l);
        c = classify(&o, &l, pub, in_thunk(&st, rvas[k]));
      }
      note(t, c, rvas[k], &o, &l, r->cols[0]);
      note(total, c, rvas[k], &o, &l, r->cols[0]);
      free(lines[k]);
    }
    if (t) {
      printf("  %-70s %6zu RVAs, %6ld agree", r->cols[0], nr, t->count[C_AGREE]);
      for (int c = 1; c < C_COUNT; c++)
        if (t->count[c])
          printf(", %ld %s", t->count[c], c == C_OTHER ? "UNEXPLAINED" : "explained");
      printf("\n");
      if (t->count[C_OTHER])
        fprintf(stderr, "    unexplained: %s\n", t->example[C_OTHER]);
    }
    free(t);
    free(lines);
    unlink(p1);
    unlink(p2);
    snprintf(p1, sizeof p1, "%s/in.txt", dir);
    unlink(p1);
    rmdir(dir);
    free(rvas);
    st_free(&st);
    free(pe);
    free(pdb);
    images++;
  }
  if (total) {
    long all = 0;
    for (int c = 0; c < C_COUNT; c++)
      all += total->count[c];
    printf("  total: %d images, %ld RVAs compared, %ld agree\n", images, all, total->count[C_AGREE]);
    for (int c = 1; c < C_COUNT; c++)
      if (total->count[c])
        printf("    %7ld  %s\n             e.g. %s\n", total->count[c], cause_names[c],
               total->example[c]);
    CHECK(images >= 30);
    /* most answers agree outright (public-symbol fallbacks aside: llvm
     * --functions=short names none; test_pdb_llvm19 compares them) */
    CHECK(total->count[C_AGREE] * 10 > (all - total->count[C_PUBLIC]) * 7);
    /* the rare "same function, other line" cases are bounded, anything else unexplained fails */
    CHECK(total->count[C_SAMELINE] * 100 <= all);
    CHECK(total->count[C_OTHERFILE] * 1000 <= all);
    CHECK_EQ_U(total->count[C_OTHER], 0);
  }
  free(a);
  free(total);
  free(rows);
  free(text);
}

/* ---- Breakpad .sym ------------------------------------------------------ */

static const char *base_name(const char *p) {
  const char *b = p;
  for (; *p; p++)
    if (*p == '/' || *p == '\\' || *p == ':')
      b = p + 1;
  return b;
}

static bool base_eq(const char *a, const char *b) {
  a = base_name(a);
  b = base_name(b);
  for (; *a && *b; a++, b++)
    if ((*a | 32) != (*b | 32))
      return false;
  return *a == *b;
}

TEST(native_lookups_match_breakpad_sym) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  static const char *const pairs[][2] = {
      {"windows-native-pdb/breakpad/dump_syms_regtest.pdb", "windows-native-pdb/breakpad/dump_syms_regtest.sym"},
      {"windows-native-pdb/breakpad/omap_reorder_bbs.pdb", "windows-native-pdb/breakpad/omap_reorder_bbs.sym"},
      {"windows-native-pdb/breakpad/omap_reorder_funcs.pdb", "windows-native-pdb/breakpad/omap_reorder_funcs.sym"},
      {"windows-native-pdb/breakpad/omap_stretched.pdb", "windows-native-pdb/breakpad/omap_stretched.sym"},
      {"windows-native-pdb/breakpad/omap_stretched_filled.pdb", "windows-native-pdb/breakpad/omap_stretched_filled.sym"},
      {"windows-native-pdb/symbolic/crash.pdb", "windows-native-pdb/symbolic/crash.sym"},
      {"windows-native-pdb/symbolic/CrashWithException.pdb", "windows-native-pdb/symbolic/CrashWithException.sym"},
      {"windows-native-pdb/dump_syms/basic32.pdb", "windows-native-pdb/dump_syms/basic32.sym"},
      {"windows-native-pdb/dump_syms/dump_syms_regtest64.pdb", "windows-native-pdb/dump_syms/dump_syms_regtest64.sym"},
      {"windows-native-pdb/tecken/qipcap64.pdb", "windows-native-pdb/tecken/qipcap64.sym"},
  };
  st_answer *a = malloc(sizeof *a);
  long tf = 0, tfok = 0, tl = 0, tlok = 0, nf00 = 0;
  for (size_t i = 0; a && i < sizeof pairs / sizeof *pairs; i++) {
    char pdb_path[4400], sym_path[4400], msg[400];
    snprintf(pdb_path, sizeof pdb_path, "%s/%s", g_corpus, pairs[i][0]);
    snprintf(sym_path, sizeof sym_path, "%s/%s", g_corpus, pairs[i][1]);
    FILE *f = fopen(sym_path, "r");
    if (!f)
      continue;
    symtab st;
    ps_budget b;
    if (read_pdb_file(pdb_path, &st, &b, msg, sizeof msg) != PS_E_OK) {
      CHECK(0);
      st_free(&st);
      fclose(f);
      continue;
    }
    /* FILE numbers -> names */
    size_t nfiles = 0, cfiles = 0;
    char **files = NULL;
    char *line = NULL;
    size_t lcap = 0;
    long nf = 0, nfok = 0, nl = 0, nlok = 0;
    bool in_func = false, func_multi = false, func_inlines = false;
    char example[700] = "";
    while (getline(&line, &lcap, f) > 0) {
      line[strcspn(line, "\r\n")] = '\0';
      if (strncmp(line, "FILE ", 5) == 0) {
        char *end;
        size_t num = strtoul(line + 5, &end, 10);
        if (num >= cfiles) {
          size_t nc = num * 2 + 16;
          char **nfp = realloc(files, nc * sizeof *files);
          if (!nfp)
            break;
          memset(nfp + cfiles, 0, (nc - cfiles) * sizeof *files);
          files = nfp;
          cfiles = nc;
        }
        free(files[num]);
        files[num] = strdup(end + 1);
        if (num + 1 > nfiles)
          nfiles = num + 1;
        continue;
      }
      if (strncmp(line, "INLINE ", 7) == 0) {
        /* Mozilla's dump_syms: its line records then give the innermost
         * frame's line, the INLINE records the call sites */
        func_inlines = true;
        continue;
      }
      if (strncmp(line, "FUNC ", 5) == 0) {
        func_inlines = false;
        const char *p = line + 5;
        func_multi = strncmp(p, "m ", 2) == 0;
        if (func_multi)
          p += 2;
        char *end;
        uint32_t addr = (uint32_t)strtoul(p, &end, 16);
        strtoul(end, &end, 16);
        strtoul(end, &end, 16);
        const char *name = end + 1;
        st_lookup_rva(&st, addr, a);
        in_func = true;
        if (func_multi)
          continue; /* identical-code folding: several names, any is right */
        nf++;
        bool ok = a->status == ST_OK && a->nsyms >= 1 && !a->syms[a->nsyms - 1].mangled;
        if (ok) {
          /* Breakpad prints DIA's undecorated names ("static int ns::f(void)");
           * ours is the record's qualified name ("ns::f") */
          const char *ours_name = a->syms[a->nsyms - 1].function;
          const char *hit = strstr(name, ours_name);
          ok = hit && (hit[strlen(ours_name)] == '(' || hit[strlen(ours_name)] == '\0' ||
                       hit[strlen(ours_name)] == '<' || hit[strlen(ours_name)] == ' ');
          if (!ok && ours_name[0] == '_')
            ok = strstr(name, ours_name + 1) != NULL; /* x86 C names lose one '_' */
        }
        if (ok)
          nfok++;
        else if (!example[0])
          snprintf(example, sizeof example, "FUNC %x %s: ours %s", addr, name,
                   a->nsyms ? a->syms[a->nsyms - 1].function : "-");
        continue;
      }
      if (!in_func || (!(line[0] >= '0' && line[0] <= '9') && !(line[0] >= 'a' && line[0] <= 'f')))
        continue;
      char *end;
      uint32_t addr = (uint32_t)strtoul(line, &end, 16);
      uint32_t size = (uint32_t)strtoul(end, &end, 16);
      uint32_t lno = (uint32_t)strtoul(end, &end, 10);
      size_t fno = strtoul(end, &end, 10);
      if (!size || func_multi)
        continue;
      const char *want_file = fno < nfiles && files[fno] ? files[fno] : "";
      uint32_t probes[2] = {addr, addr + size - 1};
      for (int k = 0; k < 2; k++) {
        st_lookup_rva(&st, probes[k], a);
        nl++;
        const st_symbol *o = a->nsyms ? &a->syms[func_inlines ? 0 : a->nsyms - 1] : NULL;
        /* tecken's .sym rewrote file names (source-server URLs "hg:...", paths
         * joined onto its build folder): there the base names must agree */
        bool same_file = o && o->file &&
                         (strcmp(o->file, want_file) == 0 ||
                          (strstr(pairs[i][1], "tecken") &&
                           (strncmp(want_file, "hg:", 3) == 0 || base_eq(o->file, want_file))));
        bool ok = o && o->has_line && o->line == lno && same_file;
        /* 0xF00F00 ("never step into", pdb.h): DIA's dump_syms prints it as
         * a line (symbolic's crash.sym), we answer it hidden with no line;
         * Mozilla's dump_syms folds it into the record before (basic32.sym:
         * the record's last byte is then ours hidden) */
        if (!ok && o && o->hidden && !o->has_line && (lno == 0xF00F00u || k == 1)) {
          nf00++;
          ok = true;
        }
        if (ok)
          nlok++;
        else if (!example[0])
          snprintf(example, sizeof example, "line %x+%x: want %u %s, ours %u %s", addr, size, lno,
                   want_file, o && o->has_line ? o->line : 0, o && o->file ? o->file : "-");
      }
    }
    printf("  %-60s FUNC %ld/%ld, lines %ld/%ld%s%s\n", pairs[i][1], nfok, nf, nlok, nl,
           example[0] ? "; first difference: " : "", example);
    tf += nf;
    tfok += nfok;
    tl += nl;
    tlok += nlok;
    for (size_t k = 0; k < cfiles; k++)
      free(files[k]);
    free(files);
    free(line);
    fclose(f);
    st_free(&st);
  }
  free(a);
  printf("  total: FUNC records %ld of %ld agree, line records (first and last byte) %ld of %ld"
         " (%ld of them 0xF00F00 bytes, answered hidden with no line)\n", tfok, tf, tlok, tl, nf00);
  CHECK(tf > 1000 && tl > 10000);
  CHECK(tfok * 100 >= tf * 98); /* the rest: name spellings (DIA undecorates publics, `anonymous namespace') */
  CHECK(tlok * 1000 >= tl * 999);
}

int main(void) {
  g_corpus = corpus_dir();
  if (!g_corpus) {
    printf("skipped: ../shared/corpus absent\n");
    return 77;
  }
  RUN(native_lookups_match_llvm_symbolizer);
  RUN(native_lookups_match_breakpad_sym);
  return test_summary();
}
