/*
 * test_pdb_llvm19.c - native answers that come from public symbols and from
 * special line numbers, against LLVM 19 (Debian's llvm-19, run by the test):
 *
 *  1. public-symbol fallbacks: for every corpus native PDB whose PE is in the
 *     corpus, a sample of code RVAs (PDBSYM_LLVM_RVAS per image, default
 *     3000), the bytes just past each executable section and 0x7fffffff are
 *     looked up by both readers; wherever pdbsym answers from a public symbol
 *     or answers nothing, llvm-symbolizer-19 (linkage names, demangled, as
 *     its default) must agree: the same name (LLVM undecorates x86 C names as
 *     DbgHelp does: "_foo", "_foo@8", "@foo@8" -> "foo"; a C++ name must be
 *     LLVM's up to its parameter list), the same file and line (the line
 *     records of code that no procedure covers, as in assembly), and no
 *     answer where LLVM has none (past a section's end).  The one allowed
 *     difference: LLVM names code past the end of a procedure with the public
 *     before that procedure; pdbsym, as Breakpad's processor, does not.
 *  2. hidden lines: every 0xFEEFEE ("ASI") and 0xF00F00 ("NSI") entry of the
 *     corpus PDBs' line tables as llvm-pdbutil-19 dumps them (`dump -l`, with
 *     `dump -section-headers` for the RVAs): pdbsym answers `hidden` there,
 *     never 16707566 nor 15732480; for 0xFEEFEE the line and file of the
 *     nearest visible entry at a lower address of the same line table (one
 *     function's), else of the nearest at a higher one; for 0xF00F00 no line.
 *     llvm-symbolizer-19 must report the special line at that address (the
 *     dump and the symbolizer agree on where the entries are).
 *  3. the publics-only fixture (tests/fixtures/native/cpp-x64-O2-pub): the
 *     last public (memcpy) answers up to the end of .text and no further,
 *     as llvm-symbolizer-19 does.
 *
 * Skips (exit 77) when llvm-symbolizer-19 is absent (scripts/deps.sh --test
 * installs it); 1 and 2 also need the shared corpus.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "oracles.h"
#include "pdb_corpus.h"
#include "test.h"

#define LLVM_SYMBOLIZER "llvm-symbolizer-19"
#define LLVM_PDBUTIL "llvm-pdbutil-19"

static const char *g_corpus;

static bool write_file(const char *path, const uint8_t *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  bool ok = fwrite(d, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* ---- llvm-symbolizer-19 ------------------------------------------------ */

typedef llvm_frame frame;

typedef struct {
  int n;
  frame f[16];
} frames;

static void parse_llvm(const char *line, frames *fr) { fr->n = llvm_parse_json(line, fr->f, 16); }

/* Runs llvm-symbolizer-19 over rvas (in chunks, restarting past a crash);
 * lines[i] is its JSON line for rvas[i], or NULL where it crashed. */
static void run_llvm(const char *dir, const char *exe, const uint32_t *rvas, size_t n,
                     char **lines) {
  size_t done = 0;
  while (done < n) {
    char in[4400], cmd[9000];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    FILE *f = fopen(in, "w");
    if (!f)
      return;
    for (size_t i = done; i < n; i++)
      fprintf(f, "0x%x\n", rvas[i]);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             LLVM_SYMBOLIZER " --obj='%s/%s' --inlines --output-style=JSON --relative-address "
                             "< '%s' 2>/dev/null",
             dir, exe, in);
    FILE *p = popen(cmd, "r");
    if (!p)
      return;
    char *buf = NULL;
    size_t cap = 0, got = 0;
    while (done + got < n && getline(&buf, &cap, p) > 0) {
      lines[done + got] = strdup(buf);
      got++;
    }
    free(buf);
    pclose(p);
    done += got;
    if (done < n)
      done++; /* it crashed on this one: leave it NULL */
  }
}

static bool have(const char *tool) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "%s --version >/dev/null 2>&1", tool);
  return system(cmd) == 0;
}

/* A folder with the PE and the PDB under its RSDS name, for llvm-symbolizer. */
typedef struct {
  char dir[1024];
  char exe[512];
  char p1[4400], p2[4400];
} staged;

static bool stage(staged *s, const char *pe_rel, const uint8_t *pe, size_t pe_len,
                  const uint8_t *pdb, size_t pdb_len) {
  char pdb_name[512];
  if (!pe_rsds_name(pe, pe_len, pdb_name, sizeof pdb_name))
    return false;
  const char *t = getenv("TMPDIR");
  snprintf(s->dir, sizeof s->dir, "%.900s/pdbsym-llvm19-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(s->dir))
    return false;
  const char *exe = strrchr(pe_rel, '/') ? strrchr(pe_rel, '/') + 1 : pe_rel;
  snprintf(s->exe, sizeof s->exe, "%s", exe);
  snprintf(s->p1, sizeof s->p1, "%s/%s", s->dir, exe);
  snprintf(s->p2, sizeof s->p2, "%s/%s", s->dir, pdb_name);
  return write_file(s->p1, pe, pe_len) && write_file(s->p2, pdb, pdb_len);
}

static void unstage(staged *s) {
  char in[4400];
  unlink(s->p1);
  unlink(s->p2);
  snprintf(in, sizeof in, "%s/in.txt", s->dir);
  unlink(in);
  rmdir(s->dir);
}

/* ---- name rule ---------------------------------------------------------- */

/* ours is LLVM's demangled linkage name, or its prefix before the parameter
 * list or a space ("geo::area" for "geo::area(int)", "`string'" for data) */
static bool same_name(const char *ours, const char *llvm) {
  size_t n = strlen(ours);
  if (strncmp(ours, llvm, n) != 0)
    return false;
  return llvm[n] == '\0' || llvm[n] == '(' || llvm[n] == ' ';
}

static bool is_special_line(uint32_t l) { return l == ST_HIDDEN_LINE || l == 0xF00F00u; }

/* the outermost frame's file and line against ours */
static bool same_line(const st_symbol *o, const frame *l) {
  if (l->line == 0)
    return !o->has_line;
  if (is_special_line(l->line))
    return o->hidden && !(o->has_line && is_special_line(o->line));
  return o->has_line && o->line == l->line && o->file && strcmp(o->file, l->file) == 0;
}

/* ---- 1. public-symbol fallbacks ----------------------------------------- */

enum {
  P_PUBLIC_AGREE,   /* ours a public; LLVM the same name, file and line */
  P_PUBLIC_LINES,   /* ... of which with a line (code with lines, no procedure) */
  P_CDECL,          /* ... of which x86 cdecl ("_foo") publics, now "foo" */
  P_NONE_AGREE,     /* neither names the address */
  P_PAST_SECTION,   /* LLVM names bytes past the end of the section (no bound) */
  P_PROC_BOUND,     /* LLVM names the public before a procedure past its end; we do not */
  P_SAME_ADDRESS,   /* several publics at one address: LLVM names another of them */
  P_DECORATED,      /* LLVM keeps the decorated name (C++/CLI $$F/$$H, ARM64EC '#') */
  P_IL_LINES,       /* C++/CLI: LLVM reads a managed method's IL-offset lines as native */
  P_NO_PUBLICS,     /* llvm-pdbutil-19 calls the publics stream corrupt (/DEBUG:FASTLINK) */
  P_ENC_RESERVE,    /* LLVM names the Edit-and-Continue reserve after the linker's marker */
  P_CRASH,          /* llvm-symbolizer crashed */
  P_OTHER,          /* unexplained */
  P_COUNT
};
static const char *const p_names[P_COUNT] = {
    "ours a public symbol; LLVM 19 gives the same name, file and line",
    "  of which with file and line from line records (code no procedure covers)",
    "  of which x86 cdecl publics (\"_foo\" given as \"foo\")",
    "neither names the address",
    "LLVM names bytes past the end of the public's section (it bounds publics by none)",
    "LLVM names code past a procedure's end with the public before it (Breakpad's rule: none)",
    "several publics at one address: LLVM names another of them",
    "C++/CLI names ($$F, $$H, $$A) LLVM leaves decorated or spells otherwise; ARM64EC '#'",
    "C++/CLI: LLVM reads a managed method's IL-offset lines as native lines",
    "llvm-pdbutil-19 calls the publics stream corrupt (/DEBUG:FASTLINK): LLVM names none",
    "LLVM names .textbss (the incremental linker's Edit-and-Continue reserve, no bytes in the file) "
    "after the __enc$textbss$begin marker; we name no code there",
    "llvm-symbolizer-19 crashed",
    "UNEXPLAINED",
};

/* true when rva lies in no section of the PE (the oracle's headers) */
static bool outside_sections(const pe_section *secs, int nsec, uint32_t rva) {
  for (int k = 0; k < nsec; k++)
    if (rva >= secs[k].va && (uint64_t)rva < (uint64_t)secs[k].va + secs[k].size)
      return false;
  return true;
}

/* LLVM's names at the last byte before each section (the PE's): the name
 * it gives an address of section k comes from before that section when it
 * is the name of the byte before the section */
typedef struct {
  char name[16][512];
} edges;

static bool named_from_before(const pe_section *secs, int nsec, const edges *e, uint32_t rva,
                              const char *llvm) {
  for (int k = 0; k < nsec && k < 16; k++)
    if (rva >= secs[k].va && (uint64_t)rva < (uint64_t)secs[k].va + secs[k].size)
      return e->name[k][0] && strcmp(e->name[k], llvm) == 0;
  return false;
}

/* another public at the rva of the one that answered has LLVM's name */
static bool other_public_named(const symtab *st, uint32_t rva, const char *llvm) {
  long pi = -1;
  for (size_t lo = 0, hi = st->npublics; lo < hi;) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->publics[mid].rva <= rva)
      lo = mid + 1, pi = (long)mid;
    else
      hi = mid;
  }
  for (long i = pi; i >= 0 && st->publics[i].rva == st->publics[pi].rva; i--)
    if (same_name(st_s(st, st->publics[i].name), llvm))
      return true;
  return false;
}

static bool llvm_publics_corrupt(const char *pdb) {
  char cmd[4600];
  snprintf(cmd, sizeof cmd,
           "sh -c \"" LLVM_PDBUTIL " dump -publics '%s' 2>&1 | grep -q 'Corrupted publics'\" "
           "2>/dev/null", pdb);
  return system(cmd) == 0;
}

/* true when a procedure starts between the nearest public and rva */
static bool proc_between(const symtab *st, uint32_t rva) {
  long pi = -1;
  for (size_t lo = 0, hi = st->npublics; lo < hi;) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->publics[mid].rva <= rva)
      lo = mid + 1, pi = (long)mid;
    else
      hi = mid;
  }
  if (pi < 0)
    return false;
  uint32_t prva = st->publics[pi].rva;
  for (size_t i = 0; i < st->nfuncs; i++)
    if (st->funcs[i].rva >= prva && st->funcs[i].rva <= rva)
      return true;
  return false;
}

TEST(public_fallbacks_match_llvm19) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  size_t cap = test_sweep(3000, 300);
  const char *env = getenv("PDBSYM_LLVM_RVAS");
  if (env && atol(env) > 0)
    cap = (size_t)atol(env);
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  long count[P_COUNT] = {0};
  char example[P_COUNT][1200];
  memset(example, 0, sizeof example);
  st_answer *a = malloc(sizeof *a);
  int images = 0;
  FILE *dumpf = getenv("PDBSYM_LLVM_DUMP") ? fopen(getenv("PDBSYM_LLVM_DUMP"), "w") : NULL;
  for (int i = 0; i < n && a; i++) {
    manifest_row *r = &rows[i];
    if (r->ncols < 13 || strcmp(r->cols[1], "windows-native-pdb") != 0)
      continue;
    const char *only = getenv("PDBSYM_LLVM_ONLY");
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
    pe_section secs[32];
    int nsec = pe ? pe_sections(pe, pe_len, secs, 32) : 0;
    symtab st;
    ps_budget b;
    staged sg;
    if (!pe || !pdb || !nsec || read_pdb_file(pdb_path, &st, &b, msg, sizeof msg) != PS_E_OK) {
      if (pe && pdb && nsec)
        st_free(&st);
      free(pe);
      free(pdb);
      continue;
    }
    if (!stage(&sg, pe_rel, pe, pe_len, pdb, pdb_len)) {
      st_free(&st);
      free(pe);
      free(pdb);
      continue;
    }
    /* the sample, and the bytes just past each executable section */
    size_t bytes = 0;
    for (int k = 0; k < nsec; k++)
      if (secs[k].exec)
        bytes += secs[k].size;
    size_t step = bytes > cap ? bytes / cap + 1 : 1;
    size_t nslots = bytes / step + 4 * (size_t)(nsec > 0 && nsec <= 32 ? nsec : 0) + 2;
    uint32_t *all = malloc(sizeof *all * nslots);
    size_t na = 0;
    for (int k = 0; all && k < nsec; k++) {
      if (!secs[k].exec)
        continue;
      for (uint64_t v = secs[k].va; v < (uint64_t)secs[k].va + secs[k].size; v += step)
        all[na++] = (uint32_t)v;
      uint64_t end = (uint64_t)secs[k].va + secs[k].size;
      bool next_is_section = false; /* the next section may start right there */
      for (int j = 0; j < nsec; j++)
        if (secs[j].va <= end + 0x10 && end < (uint64_t)secs[j].va + secs[j].size)
          next_is_section = true;
      if (!next_is_section) {
        all[na++] = (uint32_t)end;
        all[na++] = (uint32_t)end + 0x10;
      }
    }
    if (all)
      all[na++] = 0x7fffffffu;
    /* the ones ours answers from a public or not at all, and every line
     * record that no procedure covers (assembly) */
    uint32_t *q = malloc(sizeof *q * (na + st.nlines + 1));
    size_t nq = 0;
    for (size_t k = 0; q && k < na + st.nlines; k++) {
      uint32_t v = k < na ? all[k] : st.lines[k - na].rva;
      if (k >= na && k > na && v == st.lines[k - na - 1].rva)
        continue;
      st_lookup_rva(&st, v, a);
      if (a->status != ST_OK || (a->nsyms == 1 && a->syms[0].mangled)) {
        q[nq++] = v;
      }
    }
    char **lines = calloc(nq ? nq : 1, sizeof *lines);
    if (lines)
      run_llvm(sg.dir, sg.exe, q, nq, lines);
    edges *edge = calloc(1, sizeof *edge);
    uint32_t eq[16];
    char *el[16] = {0};
    int ne = nsec < 16 ? nsec : 16;
    for (int k = 0; k < ne; k++)
      eq[k] = secs[k].va ? secs[k].va - 1 : 0;
    run_llvm(sg.dir, sg.exe, eq, (size_t)ne, el);
    for (int k = 0; k < ne; k++) {
      frames ef;
      if (el[k] && edge && secs[k].va) {
        parse_llvm(el[k], &ef);
        if (ef.n)
          snprintf(edge->name[k], sizeof edge->name[k], "%s", ef.f[ef.n - 1].func);
      }
      free(el[k]);
    }
    bool x86 = st.ident.machine == 0x014C;
    bool no_publics = llvm_publics_corrupt(pdb_path);
    for (size_t k = 0; lines && k < nq; k++) {
      frames l;
      int c;
      st_lookup_rva(&st, q[k], a);
      if (!lines[k]) {
        c = P_CRASH;
        l.n = 0;
      } else {
        parse_llvm(lines[k], &l);
        const frame *lo = l.n ? &l.f[l.n - 1] : NULL;
        bool llvm_named = lo && lo->func[0];
        const st_symbol *o = a->status == ST_OK ? &a->syms[0] : NULL;
        if (!o && !llvm_named)
          c = P_NONE_AGREE;
        else if (!o && strstr(lo->func, "enc$textbss$"))
          c = P_ENC_RESERVE;
        else if (!o)
          c = outside_sections(secs, nsec, q[k]) || named_from_before(secs, nsec, edge, q[k], lo->func)
                  ? P_PAST_SECTION
              : proc_between(&st, q[k]) ? P_PROC_BOUND
                                        : P_OTHER;
        else if (!llvm_named)
          c = no_publics ? P_NO_PUBLICS : P_OTHER;
        else if (same_name(o->function, lo->func) && same_line(o, lo))
          c = P_PUBLIC_AGREE;
        else if (!same_name(o->function, lo->func) && other_public_named(&st, q[k], lo->func))
          c = P_SAME_ADDRESS;
        else if (!same_name(o->function, lo->func) &&
                 (strstr(o->mangled, "$$") || o->mangled[0] == '#'))
          c = P_DECORATED;
        else if (st.nmethods && lo->line && !o->has_line)
          c = P_IL_LINES;
        else
          c = P_OTHER;
      }
      count[c]++;
      if (c == P_PUBLIC_AGREE && a->syms[0].has_line)
        count[P_PUBLIC_LINES]++;
      if (c == P_PUBLIC_AGREE && x86 && a->syms[0].mangled[0] == '_' &&
          !strchr(a->syms[0].mangled, '@') && !strchr(a->syms[0].mangled, '?'))
        count[P_CDECL]++;
      if (dumpf) /* PDBSYM_LLVM_DUMP: every answer's category, for measurements */
        fprintf(dumpf, "%d\t%s\t0x%x\n", c, r->cols[0], q[k]);
      if (c == P_OTHER && getenv("PDBSYM_LLVM_VERBOSE")) {
        const st_symbol *o = a->status == ST_OK ? &a->syms[0] : NULL;
        fprintf(stderr, "OTHER %s 0x%x: ours %s (%s) %s:%u; llvm %s %s:%u\n", r->cols[0], q[k],
                o ? o->function : "(none)", o && o->mangled ? o->mangled : "",
                o && o->has_line && o->file ? o->file : "", o && o->has_line ? o->line : 0,
                l.n ? l.f[l.n - 1].func : "(none)", l.n ? l.f[l.n - 1].file : "",
                l.n ? l.f[l.n - 1].line : 0);
      }
      if (!example[c][0]) {
        const st_symbol *o = a->status == ST_OK ? &a->syms[0] : NULL;
        snprintf(example[c], sizeof example[c], "%s 0x%x: ours %s (%s) %s:%u; llvm %s %s:%u",
                 r->cols[0], q[k], o ? o->function : "(none)", o && o->mangled ? o->mangled : "",
                 o && o->has_line && o->file ? o->file : "", o && o->has_line ? o->line : 0,
                 l.n ? l.f[l.n - 1].func : "(none)", l.n ? l.f[l.n - 1].file : "",
                 l.n ? l.f[l.n - 1].line : 0);
      }
      free(lines[k]);
    }
    images++;
    free(edge);
    free(lines);
    free(q);
    free(all);
    unstage(&sg);
    st_free(&st);
    free(pe);
    free(pdb);
  }
  if (dumpf)
    fclose(dumpf);
  printf("  %d images\n", images);
  for (int c = 0; c < P_COUNT; c++)
    printf("    %7ld  %s%s%s\n", count[c], p_names[c], example[c][0] ? "\n             e.g. " : "",
           example[c]);
  CHECK(images >= 30);
  CHECK(count[P_PUBLIC_LINES] >= (long)test_sweep(100, 10));
  CHECK(count[P_CDECL] >= (long)test_sweep(100, 10));
  CHECK(count[P_PAST_SECTION] >= (long)test_sweep(30, 3));
  CHECK(count[P_PUBLIC_AGREE] >= (long)test_sweep(4000, 400));
  CHECK(count[P_ENC_RESERVE] <= 25000);
  CHECK_EQ_U(count[P_OTHER], 0);
  free(a);
  free(rows);
  free(text);
}

/* ---- 2. hidden lines ---------------------------------------------------- */

typedef struct {
  uint32_t rva;
  uint32_t line; /* as dumped; ST_HIDDEN_LINE / 0xF00F00 for ASI / NSI */
  int file;      /* index into the dump's files */
  int table;     /* which line table (one function's range) */
} dline;

typedef struct {
  dline *v;
  size_t n, cap;
  char **files;
  size_t nfiles;
} dump;

static void dump_free(dump *d) {
  for (size_t i = 0; i < d->nfiles; i++)
    free(d->files[i]);
  free(d->files);
  free(d->v);
}

/* section virtual addresses from `llvm-pdbutil dump -section-headers` */
static int pdbutil_sections(const char *pdb, uint32_t *va, int max) {
  char cmd[4600];
  snprintf(cmd, sizeof cmd, LLVM_PDBUTIL " dump -section-headers '%s' 2>/dev/null", pdb);
  FILE *p = popen(cmd, "r");
  if (!p)
    return 0;
  char *line = NULL;
  size_t cap = 0;
  int n = 0;
  bool in_hdr = false;
  while (getline(&line, &cap, p) > 0) {
    if (strstr(line, "SECTION HEADER #")) {
      in_hdr = true;
      continue;
    }
    char *at = strstr(line, " virtual address");
    if (in_hdr && at && n < max) {
      va[n++] = (uint32_t)strtoul(line, NULL, 16);
      in_hdr = false;
    }
  }
  free(line);
  pclose(p);
  return n;
}

/* every line entry of `llvm-pdbutil dump -l`, with its table and file */
static bool pdbutil_lines(const char *pdb, dump *d) {
  memset(d, 0, sizeof *d);
  uint32_t va[64];
  int nva = pdbutil_sections(pdb, va, 64);
  char cmd[4600];
  snprintf(cmd, sizeof cmd, LLVM_PDBUTIL " dump -l '%s' 2>/dev/null", pdb);
  FILE *p = popen(cmd, "r");
  if (!p || !nva) {
    if (p)
      pclose(p);
    return false;
  }
  char *line = NULL, last_file[1024] = "";
  size_t cap = 0;
  int table = -1, file = -1;
  uint32_t base = 0, tstart = UINT32_MAX, tseg = 0;
  while (getline(&line, &cap, p) > 0) {
    line[strcspn(line, "\r\n")] = '\0';
    unsigned seg, start, end;
    int used;
    if (sscanf(line, " %x:%x-%x, line/addr entries = %*u%n", &seg, &start, &end, &used) == 3) {
      if (seg != tseg || start != tstart)
        table++; /* one line table per range (several files may share it) */
      tseg = seg;
      tstart = start;
      base = seg >= 1 && (int)seg <= nva ? va[seg - 1] : 0;
      char **nf = realloc(d->files, (d->nfiles + 1) * sizeof *nf);
      if (!nf)
        break;
      d->files = nf;
      /* the file name is the line before, without its " (MD5: ...)" */
      char name[1024];
      snprintf(name, sizeof name, "%s", last_file);
      char *cut = strrchr(name, '(');
      if (cut && cut > name && cut[-1] == ' ')
        cut[-1] = '\0';
      d->files[d->nfiles] = strdup(name);
      file = (int)d->nfiles++;
      continue;
    }
    if (line[0] == ' ' && line[1] == ' ' && file >= 0 && base &&
        (strstr(line, " 0") || strstr(line, "ASI") || strstr(line, "NSI"))) {
      /* "   783 00000910    786 00000954 ..." with ASI / NSI for special lines */
      const char *s = line;
      for (;;) {
        char tok[32];
        unsigned addr;
        int k;
        if (sscanf(s, " %31s %x%n", tok, &addr, &k) != 2)
          break;
        s += k;
        uint32_t ln = !strcmp(tok, "ASI") ? ST_HIDDEN_LINE
                      : !strcmp(tok, "NSI") ? 0xF00F00u
                                            : (uint32_t)strtoul(tok, NULL, 10);
        if (d->n == d->cap) {
          d->cap = d->cap ? d->cap * 2 : 4096;
          dline *nv = realloc(d->v, d->cap * sizeof *nv);
          if (!nv)
            break;
          d->v = nv;
        }
        d->v[d->n++] = (dline){base + addr, ln, file, table};
      }
      continue;
    }
    if (line[0] && line[0] != ' ')
      snprintf(last_file, sizeof last_file, "%s", line);
  }
  free(line);
  pclose(p);
  return true;
}

TEST(hidden_lines_match_llvm19) {
  if (!g_corpus)
    SKIP("../shared/corpus absent");
  if (!have(LLVM_PDBUTIL))
    SKIP(LLVM_PDBUTIL " absent");
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  st_answer *a = malloc(sizeof *a);
  long feefee = 0, feefee_ok = 0, f00f00 = 0, f00f00_ok = 0, llvm_special = 0, llvm_asked = 0;
  long with_line = 0, mixed = 0;
  char example[1500] = "";
  for (int i = 0; i < n && a; i++) {
    manifest_row *r = &rows[i];
    if (r->ncols < 13 || strcmp(r->cols[1], "windows-native-pdb") != 0 ||
        (strstr(r->cols[11], "feefee=0 ") && strstr(r->cols[11], "f00f00=0 ")))
      continue;
    if (!strstr(r->cols[11], "manprocs=0 ")) {
      /* C++/CLI: their special lines are managed sequence points (IL
       * offsets, answered by token lookups and the managed tests) */
      mixed++;
      continue;
    }
    char pdb_path[4400], msg[400];
    snprintf(pdb_path, sizeof pdb_path, "%s/%s", g_corpus, r->cols[0]);
    dump d;
    if (!pdbutil_lines(pdb_path, &d))
      continue;
    symtab st;
    ps_budget b;
    if (read_pdb_file(pdb_path, &st, &b, msg, sizeof msg) != PS_E_OK) {
      CHECK(0);
      dump_free(&d);
      continue;
    }
    /* the special entries, their expected answer, and (when the PE is in
     * the corpus) llvm-symbolizer-19's view of the same addresses */
    uint32_t *q = malloc(sizeof *q * (d.n ? d.n : 1));
    size_t nq = 0;
    for (size_t k = 0; q && k < d.n; k++) {
      const dline *e = &d.v[k];
      if (!is_special_line(e->line))
        continue;
      /* the entry's first byte (an empty entry, followed by another at the
       * same address, covers none) */
      if (k + 1 < d.n && d.v[k + 1].table == e->table && d.v[k + 1].rva == e->rva)
        continue;
      q[nq++] = e->rva;
      const dline *want = NULL;
      if (e->line == ST_HIDDEN_LINE) {
        const dline *lower = NULL, *higher = NULL;
        for (size_t j = 0; j < d.n; j++) {
          const dline *x = &d.v[j];
          if (x->table != e->table || is_special_line(x->line) || x->line == 0)
            continue;
          if (x->rva < e->rva && (!lower || x->rva >= lower->rva))
            lower = x;
          if (x->rva > e->rva && (!higher || x->rva < higher->rva))
            higher = x;
        }
        want = lower ? lower : higher;
      }
      st_lookup_rva(&st, e->rva, a);
      const st_symbol *o = a->status == ST_OK ? &a->syms[a->nsyms - 1] : NULL;
      bool ok = o && o->hidden && !(o->has_line && is_special_line(o->line));
      if (ok && want)
        ok = o->has_line && o->line == want->line && o->file &&
             strcmp(o->file, d.files[want->file]) == 0;
      else if (ok)
        ok = !o->has_line;
      if (e->line == ST_HIDDEN_LINE) {
        feefee++;
        feefee_ok += ok;
      } else {
        f00f00++;
        f00f00_ok += ok;
      }
      with_line += ok && want;
      if (!ok && !example[0])
        snprintf(example, sizeof example, "%s 0x%x (%s): want %s:%u; ours %s %s:%u", r->cols[0],
                 e->rva, e->line == ST_HIDDEN_LINE ? "0xFEEFEE" : "0xF00F00",
                 want ? d.files[want->file] : "(no line)", want ? want->line : 0,
                 o && o->hidden ? "hidden" : "not hidden", o && o->file ? o->file : "",
                 o && o->has_line ? o->line : 0);
    }
    const char *ref = strstr(r->cols[12], "referenced by RSDS of: ");
    if (ref && nq && have(LLVM_SYMBOLIZER)) {
      char pe_rel[1024], pe_path[4400];
      snprintf(pe_rel, sizeof pe_rel, "%s", ref + 23);
      pe_rel[strcspn(pe_rel, ", ;")] = '\0';
      snprintf(pe_path, sizeof pe_path, "%s/%s", g_corpus, pe_rel);
      size_t pe_len = 0, pdb_len = 0;
      uint8_t *pe = cu_read_raw(pe_path, &pe_len), *pdb = cu_read_raw(pdb_path, &pdb_len);
      staged sg;
      if (pe && pdb && stage(&sg, pe_rel, pe, pe_len, pdb, pdb_len)) {
        char **lines = calloc(nq, sizeof *lines);
        if (lines)
          run_llvm(sg.dir, sg.exe, q, nq, lines);
        for (size_t k = 0; lines && k < nq; k++) {
          frames l;
          if (!lines[k])
            continue;
          parse_llvm(lines[k], &l);
          llvm_asked++;
          /* the outermost frame carries the line table's line */
          llvm_special += l.n && is_special_line(l.f[l.n - 1].line);
          free(lines[k]);
        }
        free(lines);
        unstage(&sg);
      }
      free(pe);
      free(pdb);
    }
    free(q);
    st_free(&st);
    dump_free(&d);
  }
  printf("  %ld C++/CLI PDBs left out (their special lines are managed sequence points)\n", mixed);
  printf("  0xFEEFEE entries: %ld, answered hidden with the nearest visible line: %ld\n", feefee,
         feefee_ok);
  printf("  0xF00F00 entries: %ld, answered hidden with no line: %ld\n", f00f00, f00f00_ok);
  printf("  %ld of them with a substitute line; llvm-symbolizer-19 asked at %ld, reports the "
         "special line at %ld\n", with_line, llvm_asked, llvm_special);
  if (example[0])
    fprintf(stderr, "  first difference: %s\n", example);
  CHECK(feefee >= 10 && f00f00 >= 100);
  CHECK_EQ_U(feefee_ok, feefee);
  CHECK_EQ_U(f00f00_ok, f00f00);
  CHECK(llvm_asked > 100);
  CHECK(llvm_special * 100 >= llvm_asked * 95);
  free(a);
  free(rows);
  free(text);
}

/* ---- 3. the publics-only fixture ----------------------------------------- */

TEST(public_bound_on_fixture_matches_llvm19) {
  fx_blob pdb, exe;
  if (fx_read_fixture("cpp-x64-O2-pub.pdb.gz", &pdb) != 0)
    SKIP("tests/fixtures/native absent");
  if (fx_read_fixture("cpp-x64-O2-pub.exe", &exe) != 0) {
    free(pdb.data);
    SKIP("tests/fixtures/native absent");
  }
  pe_section secs[16];
  int nsec = pe_sections(exe.data, exe.len, secs, 16);
  CHECK(nsec >= 1 && secs[0].exec);
  ps_budget b;
  ps_budget_init(&b, PS_DEFAULT_BUDGET);
  symtab st;
  st_init(&st, &b);
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(pdb_read(pdb.data, pdb.len, &b, &st, &d), PS_E_OK);
  uint32_t end = secs[0].va + secs[0].size;
  uint32_t q[] = {end - 1, end, end + 1, end + 0x100, 0x7fffffffu};
  staged sg;
  CHECK(stage(&sg, "cpp-x64-O2-pub.exe", exe.data, exe.len, pdb.data, pdb.len));
  char *lines[5] = {0};
  run_llvm(sg.dir, sg.exe, q, 5, lines);
  unstage(&sg);
  st_answer *a = malloc(sizeof *a);
  for (int k = 0; a && k < 5; k++) {
    frames l = {0};
    CHECK(lines[k] != NULL);
    if (lines[k])
      parse_llvm(lines[k], &l);
    st_lookup_rva(&st, q[k], a);
    bool llvm_named = l.n && l.f[l.n - 1].func[0];
    printf("  0x%x: ours %s, llvm-symbolizer-19 %s\n", q[k],
           a->status == ST_OK ? a->syms[0].function : "(none)",
           llvm_named ? l.f[l.n - 1].func : "(none)");
    if (q[k] < end) {
      /* inside .text: LLVM's answer */
      CHECK(a->status == ST_OK && llvm_named);
      if (a->status == ST_OK && llvm_named)
        CHECK(same_name(a->syms[0].function, l.f[l.n - 1].func));
    } else {
      /* past the end of .text (the PE's header says where): LLVM still
       * names the last public of the section before, or a data public
       * (`_fltused` for 0x7fffffff); the bound is the section's end */
      CHECK(a->status != ST_OK);
    }
    free(lines[k]);
  }
  CHECK(a && (st_lookup_rva(&st, end - 1, a), a->status == ST_OK));
  free(a);
  st_free(&st);
  free(pdb.data);
  free(exe.data);
}

int main(void) {
  g_corpus = corpus_dir();
  if (!have(LLVM_SYMBOLIZER))
    return test_skip_all(LLVM_SYMBOLIZER " absent (scripts/deps.sh --test installs llvm-19)");
  RUN(public_bound_on_fixture_matches_llvm19);
  RUN(public_fallbacks_match_llvm19);
  RUN(hidden_lines_match_llvm19);
  return test_summary();
}
