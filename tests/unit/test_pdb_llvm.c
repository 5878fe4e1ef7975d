/*
 * test_pdb_llvm.c - native PDB lookups against outside oracles:
 *
 *  1. llvm-symbolizer 19 (LLVM's own native PDB reader; tests/unit/oracles.h),
 *     run by this test: for every corpus native PDB whose PE is in the
 *     corpus, a sample of code RVAs (every byte of small images, else
 *     PDBSYM_LLVM_RVAS per image, default 3000, evenly spread) is looked up
 *     by both, and EVERY frame of the inline chain is compared: function,
 *     file and line.  A public-symbol fallback is compared with a second
 *     run, --functions=linkage (the public's decorated name).  What differs
 *     falls in one of a short list of classes, each with a mechanical
 *     criterion, a count bound the test enforces and a note of who is right
 *     (docs/oracles.md argues each); anything else fails.  Where a PDB has
 *     a Breakpad .sym (DIA's view), the line disagreements are checked
 *     against it too.
 *  2. the Breakpad .sym files shipped beside corpus PDBs (dump_syms output,
 *     DIA-based, including the OMAP-relinked breakpad files): every FUNC
 *     start must land in a procedure whose name the FUNC name contains,
 *     every line record's first and last byte must give its line and file,
 *     and (Mozilla's dump_syms, qipcap64.sym) every INLINE record's first,
 *     middle and last byte must give the inlined function at its depth,
 *     called from its call line.
 *
 * The corpus or the oracle tool absent is a skip (a failure under CI=true).
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oracles.h"
#include "pdb_corpus.h"
#include "test.h"

static const char *g_corpus;

/* ---- PE: executable sections and the RSDS file name ------------------- */

typedef struct {
  uint32_t va, size;
} range;

/* The executable sections into out (at most max); every section's RVA into
 * secva (at most 96, by section number - 1) and their count into *nsecva. */
static int pe_code(const uint8_t *d, size_t n, range *out, int max, uint32_t *secva, int *nsecva) {
  pe_section secs[96];
  int nsec = pe_sections(d, n, secs, 96), k = 0;
  *nsecva = nsec;
  for (int i = 0; i < nsec; i++) {
    secva[i] = secs[i].va;
    if (secs[i].exec && k < max) {
      out[k].va = secs[i].va;
      out[k].size = secs[i].size;
      k++;
    }
  }
  return k;
}

static bool write_file(const char *path, const uint8_t *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  bool ok = fwrite(d, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* ---- frames: ours and LLVM's, innermost first ---------------------------- */

#define MAXF (ST_MAX_INLINE_DEPTH + 2)

typedef llvm_frame frame;

typedef struct {
  int n;
  frame f[MAXF];
} frames;

static void parse_llvm(const char *line, frames *fr) {
  fr->n = llvm_parse_json(line, fr->f, MAXF);
  for (int i = 0; i < fr->n; i++)
    if (fr->f[i].line == 0)
      fr->f[i].file[0] = '\0'; /* line 0 is no line; the contract then gives no file */
}

/* Our answer as frames; a public-symbol fallback by its decorated name (as
 * llvm-symbolizer --no-demangle --functions=linkage prints publics). */
static void ours(const symtab *st, uint32_t rva, st_answer *a, frames *fr, bool *pub, bool *thunk) {
  st_lookup_rva(st, rva, a);
  fr->n = 0;
  *pub = *thunk = false;
  if (a->status != ST_OK)
    return;
  for (int i = 0; i < a->nsyms && fr->n < MAXF; i++) {
    frame *f = &fr->f[fr->n++];
    const st_symbol *s = &a->syms[i];
    snprintf(f->func, sizeof f->func, "%s", s->mangled ? s->mangled : s->function);
    snprintf(f->file, sizeof f->file, "%s", s->has_line && s->file ? s->file : "");
    f->line = s->has_line ? s->line : 0;
  }
  *pub = a->nsyms == 1 && a->syms[0].mangled != NULL;
  /* the product's own flag, used only to put a disagreement in its class */
  for (size_t lo = 0, hi = st->nfuncs; lo < hi;) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->funcs[mid].rva <= rva)
      lo = mid + 1;
    else
      hi = mid;
    if (lo >= hi && lo > 0) {
      const st_func *fn = &st->funcs[lo - 1];
      *thunk = (fn->flags & ST_FUNC_THUNK) && rva - fn->rva < (fn->size ? fn->size : 1);
    }
  }
}

static bool frame_eq(const frame *a, const frame *b) {
  return strcmp(a->func, b->func) == 0 && strcmp(a->file, b->file) == 0 && a->line == b->line;
}

static bool frames_eq(const frames *a, const frames *b) {
  if (a->n != b->n)
    return false;
  for (int i = 0; i < a->n; i++)
    if (!frame_eq(&a->f[i], &b->f[i]))
      return false;
  return true;
}

/* frame k counted from the outermost (0 = the function holding the address) */
static const frame *outer(const frames *f, int k) { return k < f->n ? &f->f[f->n - 1 - k] : NULL; }

/* ---- the disagreement classes (docs/oracles.md says why each exists) ------ */

enum {
  C_EQUAL,         /* every frame equal to llvm-symbolizer --functions=short */
  C_EQUAL_LINKAGE, /* a public-symbol fallback, equal to --functions=linkage */
  C_INLINE,        /* LLVM 19 misdecodes S_INLINESITE annotations */
  C_DUPLINE,       /* several line entries at one address: LLVM takes the first */
  C_MULTIFILE,     /* a line subsection with blocks of several files: LLVM searches it unsorted */
  C_SPECIAL_LINE,  /* LLVM prints line 0xFEEFEE / 0xF00F00 */
  C_C11,           /* C11 line records only (VS2003): LLVM reads none */
  C_THUNK,         /* an S_THUNK32: LLVM's native reader names no thunk */
  C_NOPROC,        /* a line-table entry outside any procedure (assembler code) */
  C_MANAGED_IL,    /* IL bytes of an S_GMANPROC in a mixed-mode image */
  C_NO_PUBLICS,    /* /DEBUG:FASTLINK: LLVM reads no public symbol */
  C_PUBLIC_ALIAS,  /* several publics cover the address: LLVM takes a label or an alias */
  C_CRASH,         /* llvm-symbolizer 19 crashed on this address */
  C_OTHER,         /* none of the above: a failure */
  C_COUNT
};

typedef struct {
  const char *name, *right;
  unsigned bound; /* at most this many per 10,000 RVAs compared */
} cls_info;

static const cls_info classes[C_COUNT] = {
    [C_EQUAL] = {"equal", "", 0},
    [C_EQUAL_LINKAGE] = {"equal to the --functions=linkage answer (public-symbol fallback)", "", 0},
    [C_INLINE] = {"inline frames: LLVM 19 misdecodes the S_INLINESITE annotations",
                  "pdbsym (annotation semantics; Mozilla dump_syms' INLINE records agree)", 300},
    [C_DUPLINE] = {"several line entries at one address: LLVM 19 takes the first",
                   "pdbsym (DIA, in the corpus's Breakpad .sym files, agrees)", 20},
    [C_MULTIFILE] = {"line subsection with blocks of several files: LLVM 19 searches them unsorted",
                     "pdbsym (C13 block offsets are relative to the subsection)", 5},
    [C_SPECIAL_LINE] = {"LLVM 19 prints line 0xFEEFEE / 0xF00F00",
                        "pdbsym (the contract never reports them)", 5},
    [C_C11] = {"C11 line records only (VS2003 PDBs): LLVM 19 reads no line",
               "pdbsym (LLVM reads C13 subsections only)", 400},
    [C_THUNK] = {"S_THUNK32 (import thunks): LLVM 19 names no thunk",
                 "pdbsym (the record names the code range)", 180},
    [C_NOPROC] = {"line entry outside any procedure (assembler code): LLVM gives file:line, we none",
                  "LLVM has more: pdbsym gives no line without a procedure", 8},
    [C_MANAGED_IL] = {"IL bytes of an S_GMANPROC (mixed-mode image): LLVM reads the IL line "
                      "table as native lines",
                      "neither: no native frame has such an address", 400},
    [C_NO_PUBLICS] = {"/DEBUG:FASTLINK PDB: LLVM 19 reads no public symbol",
                      "pdbsym (S_PUB32 records are there)", 160},
    [C_PUBLIC_ALIAS] = {"several publics cover the address (checked with llvm-pdbutil -publics): "
                        "LLVM 19 takes a label (no function flag) or another name at the same address",
                        "convention: pdbsym names the function public, the first name at an address", 5},
    [C_CRASH] = {"llvm-symbolizer 19 crashed (not compared)", "-", 36},
    [C_OTHER] = {"UNEXPLAINED", "-", 0},
};

typedef struct {
  bool c11, mixed, fastlink; /* from the corpus MANIFEST's notes on the PDB */
} pdb_notes;

/* LLVM's inline frames are ours with frames left out at the inner end and/or
 * other lines, never other functions (the outermost frames not compared) */
static bool inline_suffix(const frames *o, const frames *s) {
  if (s->n > o->n)
    return false;
  for (int i = 1; i < s->n; i++)
    if (strcmp(outer(s, i)->func, outer(o, i)->func) != 0)
      return false;
  return true;
}

static bool inline_equal(const frames *o, const frames *s) {
  if (s->n != o->n)
    return false;
  for (int i = 1; i < s->n; i++)
    if (!frame_eq(outer(s, i), outer(o, i)))
      return false;
  return true;
}

static bool special_line(uint32_t line) { return line == ST_HIDDEN_LINE || line == 0xF00F00u; }

/* The class of one address.  *also_inline: the outer frame's class, and the
 * inline frames differ too (in the C_INLINE way). */
static int classify(const frames *o, bool pub, bool thunk, const frames *s, const frames *k,
                    pdb_notes notes, bool *also_inline) {
  *also_inline = false;
  if (!s)
    return C_CRASH;
  if (frames_eq(o, s))
    return C_EQUAL;
  if (pub && k && frames_eq(o, k))
    return C_EQUAL_LINKAGE;
  if (thunk && s->n == 0)
    return C_THUNK;
  if (o->n == 0 && s->n == 1 && !s->f[0].func[0] && s->f[0].line)
    return C_NOPROC;
  if (pub && notes.mixed && o->n == 1 && !o->f[0].line && k && k->n == 1 &&
      strcmp(k->f[0].func, o->f[0].func) == 0 && k->f[0].line)
    return C_MANAGED_IL;
  if (pub && notes.fastlink && o->n == 1 && s->n <= 1 && (!s->n || !s->f[0].func[0]) &&
      (!k || k->n <= 1) && (!k || !k->n || !k->f[0].func[0]) &&
      (!s->n || special_line(s->f[0].line) ||
       (s->f[0].line == o->f[0].line && strcmp(s->f[0].file, o->f[0].file) == 0)))
    return C_NO_PUBLICS;
  if (o->n == 0 || s->n == 0)
    return C_OTHER;
  const frame *oo = outer(o, 0), *so = outer(s, 0);
  if (strcmp(oo->func, so->func) != 0)
    return C_OTHER;
  if (frame_eq(oo, so))
    return inline_suffix(o, s) ? C_INLINE : C_OTHER; /* only inline frames differ */
  if (!inline_equal(o, s)) {
    if (!inline_suffix(o, s))
      return C_OTHER;
    *also_inline = true;
  }
  if (special_line(so->line))
    return C_SPECIAL_LINE;
  if (notes.c11 && !so->line && oo->line)
    return C_C11;
  if (oo->line && so->line && strcmp(oo->file, so->file) == 0)
    return C_DUPLINE;
  if (oo->line && so->line)
    return C_MULTIFILE;
  return C_OTHER;
}

/* ---- the corpus's Breakpad .sym line records (DIA's view), where present -- */

typedef struct {
  uint32_t addr, size, line;
  char *file;
} sym_line;

typedef struct {
  sym_line *v;
  size_t n;
  char **files;
  size_t nfiles;
} sym_lines;

static int cmp_sym_line(const void *a, const void *b) {
  const sym_line *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The line records of a Breakpad .sym file (sorted), or n = 0 without one. */
static void sym_lines_load(const char *path, sym_lines *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  char *line = NULL;
  size_t lcap = 0, cap = 0;
  bool in_func = false;
  while (getline(&line, &lcap, f) > 0) {
    line[strcspn(line, "\r\n")] = '\0';
    if (strncmp(line, "FILE ", 5) == 0) {
      char *end;
      size_t num = strtoul(line + 5, &end, 10);
      if (num < 1000000 && num >= out->nfiles) {
        char **nf = realloc(out->files, (num + 1) * sizeof *nf);
        if (!nf)
          break;
        memset(nf + out->nfiles, 0, (num + 1 - out->nfiles) * sizeof *nf);
        out->files = nf;
        out->nfiles = num + 1;
      }
      if (num < out->nfiles) {
        free(out->files[num]);
        out->files[num] = strdup(end + 1);
      }
      continue;
    }
    if (strncmp(line, "FUNC ", 5) == 0) {
      in_func = true;
      continue;
    }
    if (!in_func || !((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')))
      continue;
    char *end;
    sym_line r;
    r.addr = (uint32_t)strtoul(line, &end, 16);
    r.size = (uint32_t)strtoul(end, &end, 16);
    r.line = (uint32_t)strtoul(end, &end, 10);
    size_t fno = strtoul(end, &end, 10);
    r.file = fno < out->nfiles ? out->files[fno] : NULL;
    if (!r.size)
      continue;
    if (out->n == cap) {
      cap = cap ? cap * 2 : 1024;
      sym_line *nv = realloc(out->v, cap * sizeof *nv);
      if (!nv)
        break;
      out->v = nv;
    }
    out->v[out->n++] = r;
  }
  free(line);
  fclose(f);
  if (out->n)
    qsort(out->v, out->n, sizeof *out->v, cmp_sym_line);
}

static const sym_line *sym_lines_find(const sym_lines *s, uint32_t rva) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->v[mid].addr <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (!lo || rva - s->v[lo - 1].addr >= s->v[lo - 1].size)
    return NULL;
  return &s->v[lo - 1];
}

static void sym_lines_free(sym_lines *s) {
  for (size_t i = 0; i < s->nfiles; i++)
    free(s->files[i]);
  free(s->files);
  free(s->v);
}

/* ---- the publics as llvm-pdbutil 19 lists them --------------------------- */

typedef struct {
  char *name;
  uint32_t rva;
  bool function; /* S_PUB32 flag cvpsfFunction: code, not a label or data */
} pub_sym;

typedef struct {
  pub_sym *v;
  size_t n;
  bool loaded;
} pub_list;

static char g_pdbutil[4096];

/* `llvm-pdbutil dump -publics PDB`: "S_PUB32 [size = N] `name`" then
 * "flags = function, addr = 0001:1234" (decimal offset) per record */
static void publics_load(const char *pdb, const uint32_t *secva, int nsecva, pub_list *out) {
  out->loaded = true;
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "'%s' dump -publics '%s' 2>/dev/null", g_pdbutil, pdb);
  FILE *p = popen(cmd, "r");
  if (!p)
    return;
  char *line = NULL, *name = NULL;
  size_t lcap = 0, cap = 0;
  while (getline(&line, &lcap, p) > 0) {
    const char *q = strstr(line, "S_PUB32 [size = ");
    if (q) {
      const char *a = strchr(q, '`'), *b = a ? strrchr(a + 1, '`') : NULL;
      free(name);
      name = a && b ? strndup(a + 1, (size_t)(b - a - 1)) : NULL;
      continue;
    }
    q = strstr(line, "addr = ");
    unsigned seg = 0, off = 0;
    if (!name || !q || sscanf(q, "addr = %u:%u", &seg, &off) != 2 || seg < 1 || (int)seg > nsecva)
      continue;
    if (out->n == cap) {
      cap = cap ? cap * 2 : 1024;
      pub_sym *nv = realloc(out->v, cap * sizeof *nv);
      if (!nv)
        break;
      out->v = nv;
    }
    out->v[out->n].name = name;
    out->v[out->n].rva = secva[seg - 1] + off;
    out->v[out->n].function = strstr(line, "function") != NULL;
    out->n++;
    name = NULL;
  }
  free(name);
  free(line);
  pclose(p);
}

static const pub_sym *publics_find(const pub_list *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i].name, name) == 0)
      return &l->v[i];
  return NULL;
}

static void publics_free(pub_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i].name);
  free(l->v);
}

/* ours is the public-symbol fallback OURS, LLVM's linkage pass names the
 * public THEIRS: true when both cover rva by llvm-pdbutil's list and THEIRS
 * is another name at the same address (identical code folded) or a label
 * (no function flag) between OURS and rva */
static bool public_alias(const pub_list *l, const char *ours_name, const char *theirs, uint32_t rva) {
  const pub_sym *x = publics_find(l, ours_name), *y = publics_find(l, theirs);
  if (!x || !y || x->rva > rva || y->rva > rva)
    return false;
  return y->rva == x->rva || (y->rva > x->rva && !y->function && x->function);
}

/* ---- running llvm-symbolizer 19 ----------------------------------------- */

static char g_symbolizer[4096];

/* Runs llvm-symbolizer over rvas[from..n); stores its lines in lines[];
 * returns how many it answered before exiting (fewer: it crashed on the next). */
static size_t run_llvm(const char *dir, const char *exe, const char *mode, const uint32_t *rvas,
                       size_t from, size_t n, char **lines) {
  char in[4400], cmd[13000];
  snprintf(in, sizeof in, "%s/in.txt", dir);
  FILE *f = fopen(in, "w");
  if (!f)
    return 0;
  for (size_t i = from; i < n; i++)
    fprintf(f, "0x%x\n", rvas[i]);
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "'%s' --obj='%s/%s' --inlines --functions=%s --no-demangle "
           "--output-style=JSON --relative-address < '%s' 2>/dev/null",
           g_symbolizer, dir, exe, mode, in);
  FILE *p = popen(cmd, "r");
  if (!p)
    return 0;
  size_t got = 0;
  char *buf = NULL;
  size_t cap = 0;
  ssize_t len;
  while (from + got < n && (len = getline(&buf, &cap, p)) > 0) {
    if (buf[len - 1] != '\n')
      break; /* cut short by a crash */
    lines[from + got] = strdup(buf);
    got++;
  }
  free(buf);
  pclose(p);
  unlink(in);
  return got;
}

/* every rva answered: lines[i] NULL where llvm-symbolizer crashed */
static void run_llvm_all(const char *dir, const char *exe, const char *mode, const uint32_t *rvas,
                         size_t n, char **lines) {
  size_t done = 0;
  while (done < n) {
    done += run_llvm(dir, exe, mode, rvas, done, n, lines);
    if (done < n)
      lines[done++] = NULL;
  }
}

/* ---- the comparison ------------------------------------------------------ */

typedef struct {
  long count[C_COUNT];
  long frames, frames_equal;
  long dia_ours, dia_llvm, dia_neither; /* line classes checked against a .sym */
  long also_inline;                      /* outer-frame classes whose inline frames differ too */
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

static int other_budget = 40; /* unexplained disagreements printed in full */

static void note(tallies *t, int c, uint32_t rva, const frames *o, const frames *l,
                 const frames *k, const char *pdb) {
  t->count[c]++;
  if (c == C_OTHER && other_budget > 0) {
    other_budget--;
    char x[3000], y[3000], z[3000];
    fmt_frames(x, sizeof x, o);
    if (l)
      fmt_frames(y, sizeof y, l);
    if (k)
      fmt_frames(z, sizeof z, k);
    fprintf(stderr, "  UNEXPLAINED %s 0x%x:\n    ours %s\n    llvm %s\n    llvm --functions=linkage %s\n",
            pdb, rva, x, l ? y : "(crashed)", k ? z : "(not run)");
  }
  if (c <= C_EQUAL_LINKAGE || t->example[c][0])
    return;
  char a[1500], b[1500];
  fmt_frames(a, sizeof a, o);
  if (l)
    fmt_frames(b, sizeof b, l);
  else
    snprintf(b, sizeof b, "(crashed)");
  snprintf(t->example[c], sizeof t->example[c], "%s 0x%x: ours %s; llvm %s", pdb, rva, a, b);
}

/* frames compared and equal, aligned from the outermost */
static void count_frames(tallies *t, const frames *o, const frames *l) {
  int n = o->n > l->n ? o->n : l->n;
  for (int i = 0; i < n; i++) {
    const frame *x = outer(o, i), *y = outer(l, i);
    t->frames++;
    if (x && y && frame_eq(x, y))
      t->frames_equal++;
  }
}

static void add(tallies *total, const tallies *t) {
  for (int c = 0; c < C_COUNT; c++) {
    total->count[c] += t->count[c];
    if (!total->example[c][0] && t->example[c][0])
      memcpy(total->example[c], t->example[c], sizeof t->example[c]);
  }
  total->frames += t->frames;
  total->frames_equal += t->frames_equal;
  total->dia_ours += t->dia_ours;
  total->dia_llvm += t->dia_llvm;
  total->dia_neither += t->dia_neither;
  total->also_inline += t->also_inline;
}

/* Compares one image's sample; returns false when it could not be run. */
static bool compare_image(const manifest_row *r, size_t cap, tallies *t, st_answer *a) {
  const char *ref = strstr(r->cols[12], "referenced by RSDS of: ");
  if (!ref)
    return false;
  char pe_rel[1024];
  snprintf(pe_rel, sizeof pe_rel, "%s", ref + 23);
  pe_rel[strcspn(pe_rel, ", ;")] = '\0';
  char pdb_path[4400], pe_path[4400], sym_path[4400], msg[400];
  snprintf(pdb_path, sizeof pdb_path, "%s/%s", g_corpus, r->cols[0]);
  snprintf(pe_path, sizeof pe_path, "%s/%s", g_corpus, pe_rel);
  snprintf(sym_path, sizeof sym_path, "%.*s.sym", (int)(strlen(pdb_path) - 4), pdb_path);
  pdb_notes notes = {strstr(r->cols[14], "C11") != NULL,
                     strstr(r->cols[14], "mixed") != NULL,
                     strstr(r->cols[14], "FASTLINK") != NULL};
  size_t pe_len = 0, pdb_len = 0;
  uint8_t *pe = cu_read_raw(pe_path, &pe_len);
  uint8_t *pdb = cu_read_raw(pdb_path, &pdb_len);
  range code[16];
  uint32_t secva[96];
  int nsecva = 0;
  int ncode = pe ? pe_code(pe, pe_len, code, 16, secva, &nsecva) : 0;
  char pdb_name[512];
  symtab st;
  ps_budget b;
  bool ok = pe && pdb && ncode && pe_rsds_name(pe, pe_len, pdb_name, sizeof pdb_name);
  if (ok && read_pdb_file(pdb_path, &st, &b, msg, sizeof msg) != PS_E_OK) {
    fprintf(stderr, "%s: %s\n", r->cols[0], msg);
    CHECK(!"corpus PDB read");
    st_free(&st);
    ok = false;
  }
  if (!ok) {
    free(pe);
    free(pdb);
    return false;
  }
  /* the sample: every byte of small images, else CAP evenly spread */
  size_t bytes = 0;
  for (int k = 0; k < ncode; k++)
    bytes += code[k].size;
  size_t step = bytes > cap ? bytes / cap + 1 : 1;
  size_t nr = 0;
  uint32_t *rvas = malloc(sizeof *rvas * (bytes / step + (size_t)ncode + 1));
  for (int k = 0; rvas && k < ncode; k++)
    for (uint64_t v = code[k].va; v < (uint64_t)code[k].va + code[k].size; v += step)
      rvas[nr++] = (uint32_t)v;
  /* a folder with the PE and the PDB under its RSDS name, as LLVM finds it */
  const char *tmp = getenv("TMPDIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%.900s/pdbsym-llvm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  const char *exe = strrchr(pe_rel, '/') ? strrchr(pe_rel, '/') + 1 : pe_rel;
  char p1[2600], p2[2600];
  char **sl = calloc(nr ? nr : 1, sizeof *sl), **kl = calloc(nr ? nr : 1, sizeof *kl);
  frames *o = malloc(sizeof *o), *s = malloc(sizeof *s), *k = malloc(sizeof *k);
  bool *pub = calloc(nr ? nr : 1, sizeof *pub), *thunk = calloc(nr ? nr : 1, sizeof *thunk);
  uint32_t *second = malloc(sizeof *second * (nr ? nr : 1));
  size_t *second_at = malloc(sizeof *second_at * (nr ? nr : 1));
  ok = rvas && sl && kl && o && s && k && pub && thunk && second && second_at && mkdtemp(dir);
  bool made = ok;
  snprintf(p1, sizeof p1, "%s/%s", dir, exe);
  snprintf(p2, sizeof p2, "%s/%s", dir, pdb_name);
  if (ok)
    ok = write_file(p1, pe, pe_len) && write_file(p2, pdb, pdb_len);
  if (ok) {
    run_llvm_all(dir, exe, "short", rvas, nr, sl);
    /* --functions=linkage (the public symbol's decorated name where there
     * is one) for the addresses where it can matter */
    size_t n2 = 0;
    for (size_t i = 0; i < nr; i++) {
      ours(&st, rvas[i], a, o, &pub[i], &thunk[i]);
      if (sl[i])
        parse_llvm(sl[i], s);
      if (pub[i] || thunk[i] || (sl[i] && (!s->n || !outer(s, 0)->func[0]))) {
        second_at[n2] = i;
        second[n2++] = rvas[i];
      }
    }
    char **l2 = calloc(n2 ? n2 : 1, sizeof *l2);
    if (l2) {
      run_llvm_all(dir, exe, "linkage", second, n2, l2);
      for (size_t j = 0; j < n2; j++)
        kl[second_at[j]] = l2[j];
    }
    free(l2);
    sym_lines dia;
    sym_lines_load(sym_path, &dia);
    pub_list pubs = {0};
    for (size_t i = 0; i < nr; i++) {
      ours(&st, rvas[i], a, o, &pub[i], &thunk[i]);
      if (sl[i])
        parse_llvm(sl[i], s);
      if (kl[i])
        parse_llvm(kl[i], k);
      bool also_inline;
      int c = classify(o, pub[i], thunk[i], sl[i] ? s : NULL, kl[i] ? k : NULL, notes, &also_inline);
      if (c == C_OTHER && pub[i] && sl[i] && !s->n && kl[i] && k->n == 1 && o->n == 1 &&
          !k->f[0].line && !o->f[0].line) {
        if (!pubs.loaded)
          publics_load(pdb_path, secva, nsecva, &pubs);
        if (public_alias(&pubs, o->f[0].func, k->f[0].func, rvas[i]))
          c = C_PUBLIC_ALIAS;
      }
      t->also_inline += also_inline;
      note(t, c, rvas[i], o, sl[i] ? s : NULL, kl[i] ? k : NULL, r->cols[0]);
      if (sl[i])
        count_frames(t, o, c == C_EQUAL_LINKAGE ? k : s);
      if ((c == C_DUPLINE || c == C_MULTIFILE) && dia.n) {
        const sym_line *d = sym_lines_find(&dia, rvas[i]);
        if (d && d->line == outer(o, 0)->line)
          t->dia_ours++;
        else if (d && d->line == outer(s, 0)->line)
          t->dia_llvm++;
        else if (d)
          t->dia_neither++;
      }
      free(sl[i]);
      free(kl[i]);
    }
    sym_lines_free(&dia);
    publics_free(&pubs);
  }
  if (made) { /* nothing left behind, whatever failed */
    unlink(p1);
    unlink(p2);
    snprintf(p1, sizeof p1, "%s/in.txt", dir);
    unlink(p1);
    rmdir(dir);
  }
  free(sl);
  free(kl);
  free(o);
  free(s);
  free(k);
  free(pub);
  free(thunk);
  free(second);
  free(second_at);
  free(rvas);
  st_free(&st);
  free(pe);
  free(pdb);
  return ok;
}

TEST(native_lookups_match_llvm_symbolizer) {
  if (!llvm_tool("llvm-symbolizer", g_symbolizer, sizeof g_symbolizer) ||
      !llvm_tool("llvm-pdbutil", g_pdbutil, sizeof g_pdbutil))
    SKIP("LLVM 19 llvm-symbolizer / llvm-pdbutil not installed (scripts/deps.sh --test installs llvm-19)");
  size_t cap = test_sweep(3000, 300);
  const char *env = getenv("PDBSYM_LLVM_RVAS");
  if (env && atol(env) > 0)
    cap = (size_t)atol(env);
  const char *only = getenv("PDBSYM_LLVM_ONLY"); /* a substring of the PDB path, for debugging */
  char *text;
  manifest_row *rows;
  int n = manifest_rows(g_corpus, &text, &rows);
  tallies *total = calloc(1, sizeof *total), *t = malloc(sizeof *t);
  st_answer *a = malloc(sizeof *a);
  int images = 0;
  for (int i = 0; i < n && total && t && a; i++) {
    manifest_row *r = &rows[i];
    if (r->ncols < 15 || strcmp(r->cols[1], "windows-native-pdb") != 0)
      continue;
    if (only && !strstr(r->cols[0], only))
      continue;
    memset(t, 0, sizeof *t);
    if (!compare_image(r, cap, t, a))
      continue;
    images++;
    long all = 0;
    for (int c = 0; c < C_COUNT; c++)
      all += t->count[c];
    printf("  %-68s %5ld RVAs %5ld equal", r->cols[0], all,
           t->count[C_EQUAL] + t->count[C_EQUAL_LINKAGE]);
    for (int c = C_INLINE; c < C_COUNT; c++)
      if (t->count[c])
        printf(", %ld %s", t->count[c], c == C_OTHER ? "UNEXPLAINED" : classes[c].name);
    printf("\n");
    add(total, t);
  }
  if (total && t && a) {
    long all = 0;
    for (int c = 0; c < C_COUNT; c++)
      all += total->count[c];
    long eq = total->count[C_EQUAL] + total->count[C_EQUAL_LINKAGE];
    printf("  total: %d images, %ld RVAs compared with LLVM 19, %ld equal on every frame "
           "(%.1f %%; %ld of them by the public-symbol pass); %ld frames compared "
           "(function, file, line), %ld equal\n",
           images, all, eq, all ? 100.0 * (double)eq / (double)all : 0.0,
           total->count[C_EQUAL_LINKAGE], total->frames, total->frames_equal);
    printf("  disagreements (count, bound, who is right; docs/oracles.md):\n");
    /* a sample's rates of the explained classes vary from the whole sweep's,
     * whose bounds the normal run enforces; an unexplained one (bound 0)
     * fails either way */
    bool sampled = test_sweep(0, 1) == 1;
    for (int c = C_INLINE; c < C_COUNT; c++) {
      long bound = (long)classes[c].bound * all / 10000;
      printf("    %6ld (bound %5ld)  %s\n                          right: %s\n", total->count[c],
             bound, classes[c].name, classes[c].right);
      if (total->example[c][0])
        printf("                          e.g. %.600s\n", total->example[c]);
      if (total->count[c] > bound && (classes[c].bound == 0 || !sampled)) {
        t_failed_checks++;
        fprintf(stderr, "  %s: %ld RVAs, over the bound of %ld\n", classes[c].name,
                total->count[c], bound);
      }
    }
    printf("  of the outer-frame disagreements, %ld also differ in inline frames (as C_INLINE)\n",
           total->also_inline);
    printf("  line disagreements where the PDB has a Breakpad .sym (DIA): %ld agree with us, "
           "%ld with LLVM, %ld with neither\n",
           total->dia_ours, total->dia_llvm, total->dia_neither);
    CHECK(images >= 30);
    CHECK(all > (long)test_sweep(50000, 5000));
    CHECK(eq * 100 > all * 85); /* the classes above are the rest */
    CHECK(total->dia_ours > 0);
    CHECK_EQ_U(total->dia_llvm, 0);
    CHECK_EQ_U(total->count[C_OTHER], 0);
  }
  free(a);
  free(t);
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
  long tf = 0, tfok = 0, tl = 0, tlok = 0, ti = 0, tiok = 0;
  for (size_t i = 0; a && i < sizeof pairs / sizeof *pairs; i++) {
    char pdb_path[4400], sym_path[4400], msg[400];
    snprintf(pdb_path, sizeof pdb_path, "%s/%s", g_corpus, pairs[i][0]);
    snprintf(sym_path, sizeof sym_path, "%s/%s", g_corpus, pairs[i][1]);
    FILE *f = fopen(sym_path, "r");
    if (!f) {
      fprintf(stderr, "  %s: cannot open\n", pairs[i][1]);
      CHECK(!"corpus .sym file present");
      continue;
    }
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
    long nf = 0, nfok = 0, nl = 0, nlok = 0, ni = 0, niok = 0;
    bool in_func = false, func_multi = false, func_inlines = false;
    char **origins = NULL; /* INLINE_ORIGIN names by number */
    size_t norigins = 0;
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
      if (strncmp(line, "INLINE_ORIGIN ", 14) == 0) {
        char *end;
        size_t num = strtoul(line + 14, &end, 10);
        if (num < 100000 && num >= norigins) {
          char **no = realloc(origins, (num + 1) * sizeof *no);
          if (!no)
            break;
          memset(no + norigins, 0, (num + 1 - norigins) * sizeof *no);
          origins = no;
          norigins = num + 1;
        }
        if (num < norigins) {
          free(origins[num]);
          origins[num] = strdup(*end ? end + 1 : end);
        }
        continue;
      }
      if (strncmp(line, "INLINE ", 7) == 0) {
        /* Mozilla's dump_syms (its own CodeView reader, not DIA nor LLVM):
         * "INLINE depth call_line call_file origin [addr size]...": the
         * function ORIGIN is inlined at DEPTH (0: into the FUNC itself) over
         * the ranges, called from CALL_LINE of CALL_FILE.  Its line records
         * then give the innermost frame's line. */
        func_inlines = true;
        char *p = line + 7, *end;
        unsigned depth = (unsigned)strtoul(p, &end, 10);
        uint32_t call_line = (uint32_t)strtoul(end, &end, 10);
        size_t call_file = strtoul(end, &end, 10), origin = strtoul(end, &end, 10);
        const char *oname = origin < norigins && origins[origin] ? origins[origin] : "";
        const char *cfile = call_file < nfiles && files[call_file] ? files[call_file] : "";
        for (;;) {
          uint32_t addr = (uint32_t)strtoul(end, &p, 16);
          if (p == end)
            break;
          uint32_t size = (uint32_t)strtoul(p, &end, 16);
          if (!size)
            break;
          uint32_t probes[3] = {addr, addr + size / 2, addr + size - 1};
          for (int k = 0; k < 3; k++) {
            st_lookup_rva(&st, probes[k], a);
            int n = a->nsyms;
            bool ok = a->status == ST_OK && n >= (int)depth + 2;
            if (ok) {
              const st_symbol *in = &a->syms[n - 2 - (int)depth], *caller = &a->syms[n - 1 - (int)depth];
              size_t len = strlen(in->function);
              ok = in->inlined && strncmp(oname, in->function, len) == 0 &&
                   (oname[len] == '(' || oname[len] == '\0') && caller->has_line &&
                   caller->line == call_line && caller->file &&
                   (strcmp(caller->file, cfile) == 0 || /* tecken rewrote names, as below */
                    (strstr(pairs[i][1], "tecken") &&
                     (strncmp(cfile, "hg:", 3) == 0 || base_eq(caller->file, cfile))));
            }
            ni++;
            if (ok)
              niok++;
            else if (!example[0])
              snprintf(example, sizeof example, "INLINE %s at %x (depth %u, call line %u): ours %s",
                       oname, probes[k], depth, call_line,
                       n > (int)depth + 1 ? a->syms[n - 2 - (int)depth].function : "(no such frame)");
          }
        }
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
        if (ok)
          nlok++;
        else if (!example[0])
          snprintf(example, sizeof example, "line %x+%x: want %u %s, ours %u %s", addr, size, lno,
                   want_file, o && o->has_line ? o->line : 0, o && o->file ? o->file : "-");
      }
    }
    printf("  %-60s FUNC %ld/%ld, lines %ld/%ld", pairs[i][1], nfok, nf, nlok, nl);
    if (ni)
      printf(", INLINE ranges (first, middle, last byte) %ld/%ld", niok, ni);
    printf("%s%s\n", example[0] ? "; first difference: " : "", example);
    ti += ni;
    tiok += niok;
    for (size_t k = 0; k < norigins; k++)
      free(origins[k]);
    free(origins);
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
  printf("  total: FUNC records %ld of %ld agree, line records (first and last byte) %ld of %ld\n",
         tfok, tf, tlok, tl);
  CHECK(tf > 1000 && tl > 10000);
  CHECK(tfok * 100 >= tf * 98); /* the rest: name spellings (DIA undecorates publics, `anonymous namespace') */
  CHECK(tlok * 1000 >= tl * 999);
  printf("  INLINE records (Mozilla dump_syms): %ld of %ld probes give the inlined function at "
         "its depth, called from its call line\n", tiok, ti);
  CHECK(ti >= 30);
  CHECK_EQ_U(tiok, ti);
}

int main(void) {
  g_corpus = corpus_dir();
  if (!g_corpus)
    return test_skip_all("../shared/corpus absent");
  RUN(native_lookups_match_llvm_symbolizer);
  RUN(native_lookups_match_breakpad_sym);
  return test_summary();
}
