/*
 * fixtures.h - loader for the native test fixtures in tests/fixtures/native/
 * (images and PDBs made by clang + lld-link, expected answers recorded from
 * llvm-symbolizer 19; how each was made: tests/fixtures/native/README.md).
 *
 * Header-only (static inline) so any test can include it without a CMake
 * change.  Typical use:
 *
 *   fx_manifest m;
 *   if (fx_manifest_load(&m) != 0) SKIP("...");        // or fail
 *   for (size_t i = 0; i < m.count; i++) {
 *     const fx_entry *e = &m.entries[i];               // name: LANG-ARCH-OPT[-VARIANT]
 *     fx_blob exe, pdb;                                 // caller frees .data
 *     fx_read_fixture(e->exe, &exe);                    // plain file
 *     fx_read_fixture(e->pdb, &pdb);                    // *.gz is inflated
 *     fx_expected x;
 *     fx_expected_load(e->expected, &x);
 *     const fx_row *r = fx_expected_find(&x, rva);      // NULL: no answer
 *     ... r->frames[0] is the innermost frame ...
 *     fx_expected cc;                                   // llvm-pdbutil's view
 *     fx_expected_load(e->crosscheck, &cc);
 *     ok = fx_answer_ok(&x, &cc, rva, frames, n);       // judge a reader's answer
 *     fx_expected_free(&cc);
 *     fx_expected_free(&x); free(exe.data); free(pdb.data);
 *   }
 *   fx_manifest_free(&m);
 *
 * Files are found under $PDBSYM_SOURCE_DIR/tests/fixtures/native (ctest sets
 * PDBSYM_SOURCE_DIR to the repository root); without it, relative to the
 * current directory.  Errors are printed to stderr and returned as -1.
 *
 * Expected-answer rows (NAME.expected.tsv): lines starting with '#' are
 * comments; every other line is
 *   START<TAB>END<TAB>FRAMES
 * START and END are hex RVAs ("0x1a30"), the row covers [START, END); FRAMES
 * is a JSON array, innermost frame first, of objects
 *   {"function": str, "file": str, "line": int, "column": int (if nonzero)}
 * Rows are sorted and do not overlap.  A code byte no row covers is one for
 * which llvm-symbolizer had no answer (padding between functions).  For the
 * publics-only builds (variant "pub") the rows are the nearest public symbol
 * at or before each byte, from llvm-pdbutil, with file "" and line 0.
 *
 * NAME.crosscheck.tsv has the same format plus a 4th column (fx_row.note): the
 * ranges where the answer decoded from llvm-pdbutil's dumps differs from
 * llvm-symbolizer's, with the decoded frames and why ("dup-line": several
 * line entries at one address, where the decoded answer is the right one;
 * "before-first-line": bytes before a function's first line entry, where
 * llvm-symbolizer's is).  fx_answer_ok() applies these rules; see
 * tests/fixtures/native/README.md.
 */
#ifndef PDBSYM_TEST_FIXTURES_H
#define PDBSYM_TEST_FIXTURES_H

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "corpus_util.h"

/* A file's bytes; data is malloc'd, the caller frees it. */
typedef struct {
  uint8_t *data;
  size_t len;
} fx_blob;

/* One manifest line (tests/fixtures/native/MANIFEST.tsv).  The strings point
 * into the manifest's own buffer and live until fx_manifest_free. */
typedef struct {
  const char *name;     /* "cpp-x64-O2" */
  const char *exe;      /* "cpp-x64-O2.exe" */
  const char *pdb;      /* "cpp-x64-O2.pdb.gz" (gzip of the PDB) */
  const char *arch;     /* "x64", "x86", "arm64" */
  const char *opt;      /* "O0", "O2" */
  const char *lang;     /* "c", "cpp" */
  const char *variant;  /* "plain", or "col" (line tables with columns) */
  const char *guid;     /* "183AB4D2-339F-783E-4C4C-44205044422E" (llvm-pdbutil) */
  const char *symkey;   /* GUID without dashes + age in hex: symbol-server key */
  const char *cv_path;  /* PDB path in the PE's CodeView entry */
  const char *expected; /* "cpp-x64-O2.expected.tsv" (llvm-symbolizer) */
  const char *crosscheck; /* "cpp-x64-O2.crosscheck.tsv" (llvm-pdbutil decoding) */
  const char *made;     /* how it was made, one line */
  uint32_t machine;     /* IMAGE_FILE_MACHINE_* of the PE */
  uint32_t age;
  uint64_t exe_size;
  uint64_t pdb_size;   /* of the uncompressed PDB */
  uint32_t image_size; /* SizeOfImage */
  uint64_t rows;       /* number of rows in the expected file */
} fx_entry;

typedef struct {
  fx_entry *entries;
  size_t count;
  char *text_; /* the file's text, fields cut in place */
} fx_manifest;

typedef struct {
  char *function; /* "" when llvm-symbolizer gave none */
  char *file;
  uint32_t line;
  uint32_t column; /* 0: none given */
} fx_frame;

typedef struct {
  uint32_t start, end; /* RVAs, [start, end) */
  size_t nframes;
  fx_frame *frames; /* innermost first */
  char *note;       /* optional 4th column (crosscheck category), or NULL */
} fx_row;

typedef struct {
  fx_row *rows; /* sorted by start */
  size_t count;
} fx_expected;

/* "<root>/tests/fixtures/native/FILE", malloc'd (caller frees), or NULL. */
static inline char *fx_native_path(const char *file) {
  static const char sub[] = "/tests/fixtures/native/";
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  if (!root || !*root)
    root = ".";
  size_t a = strlen(root), b = strlen(file);
  char *p = malloc(a + sizeof sub + b);
  if (!p)
    return NULL;
  memcpy(p, root, a);
  memcpy(p + a, sub, sizeof sub - 1);
  memcpy(p + a + sizeof sub - 1, file, b + 1);
  return p;
}

/* Reads a whole file.  Returns 0, or -1 with a message on stderr. */
static inline int fx_read_path(const char *path, fx_blob *out) {
  out->len = 0;
  out->data = cu_read_raw(path, &out->len);
  if (!out->data) {
    fprintf(stderr, "fixtures: cannot read %s\n", path);
    return -1;
  }
  return 0;
}

/* Inflates a gzip member (the .pdb.gz fixtures).  Returns 0 or -1. */
static inline int fx_gunzip(const fx_blob *in, fx_blob *out) {
  out->data = NULL;
  out->len = 0;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    return -1;
  size_t cap = in->len * 8 + 4096, len = 0;
  uint8_t *buf = malloc(cap);
  z.next_in = in->data;
  z.avail_in = (uInt)in->len;
  int rc = Z_OK;
  while (buf && rc == Z_OK) {
    if (len == cap) {
      uint8_t *bigger = realloc(buf, cap * 2);
      if (!bigger)
        break;
      buf = bigger;
      cap *= 2;
    }
    z.next_out = buf + len;
    z.avail_out = (uInt)(cap - len);
    rc = inflate(&z, Z_NO_FLUSH);
    len = cap - z.avail_out;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(buf);
    return -1;
  }
  out->data = buf;
  out->len = len;
  return 0;
}

/* Reads fixture FILE from the native folder; a name ending in ".gz" is
 * inflated.  Returns 0, or -1 with a message on stderr. */
static inline int fx_read_fixture(const char *file, fx_blob *out) {
  char *path = fx_native_path(file);
  if (!path || fx_read_path(path, out) != 0) {
    free(path);
    return -1;
  }
  size_t n = strlen(file);
  if (n > 3 && strcmp(file + n - 3, ".gz") == 0) {
    fx_blob raw = *out;
    int rc = fx_gunzip(&raw, out);
    free(raw.data);
    if (rc != 0) {
      fprintf(stderr, "fixtures: %s is not a valid gzip file\n", path);
      free(path);
      return -1;
    }
  }
  free(path);
  return 0;
}

/* Cuts S at the next occurrence of C (replaced by NUL); returns the rest, or
 * NULL when C does not occur. */
static inline char *fx_cut(char *s, char c) {
  char *p = strchr(s, c);
  if (!p)
    return NULL;
  *p = '\0';
  return p + 1;
}

static inline int fx_parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || *s == '-')
    return -1;
  *out = v;
  return 0;
}

static inline void fx_manifest_free(fx_manifest *m) {
  free(m->entries);
  free(m->text_);
  memset(m, 0, sizeof *m);
}

/* Parses the text of a MANIFEST.tsv (LEN bytes at SRC, copied).  Columns are found by the names in its "# " header
 * line, so added columns do not break readers.  Returns 0 or -1; on success
 * free with fx_manifest_free. */
static inline int fx_manifest_parse(const char *src, size_t len, fx_manifest *m) {
  enum { NCOL = 19 };
  static const char *const names[NCOL] = {
      "name", "exe", "pdb", "arch", "opt", "lang", "guid", "symkey", "cv_path",
      "expected", "crosscheck", "made", "variant", "machine", "age", "exe_size", "pdb_size",
      "image_size", "rows"};
  memset(m, 0, sizeof *m);
  char *text = malloc(len + 1);
  if (!text)
    return -1;
  memcpy(text, src, len);
  text[len] = '\0';
  m->text_ = text;
  size_t lines = 0;
  for (size_t i = 0; i < len; i++)
    lines += text[i] == '\n';
  m->entries = calloc(lines + 1, sizeof *m->entries);
  if (!m->entries)
    goto bad;
  int col[NCOL];
  for (int k = 0; k < NCOL; k++)
    col[k] = -1;
  int have_header = 0;
  char *line = text;
  while (line && *line) {
    char *next = fx_cut(line, '\n');
    if (line[0] == '#' && have_header) {
      /* a later comment */
    } else if (line[0] == '#') {
      /* the first comment is the header: "# name<TAB>exe<TAB>..." */
      char *f = line + 1;
      while (*f == ' ')
        f++;
      for (int idx = 0; f; idx++) {
        char *rest = fx_cut(f, '\t');
        for (int k = 0; k < NCOL; k++)
          if (strcmp(f, names[k]) == 0)
            col[k] = idx;
        f = rest;
      }
      have_header = 1;
    } else if (*line) {
      if (!have_header)
        goto bad;
      const char *fields[64];
      int nf = 0;
      for (char *f = line; f && nf < 64; nf++) {
        fields[nf] = f;
        f = fx_cut(f, '\t');
      }
      const char *v[NCOL];
      for (int k = 0; k < NCOL; k++) {
        if (col[k] < 0 || col[k] >= nf) {
          fprintf(stderr, "fixtures: MANIFEST.tsv: column %s missing\n", names[k]);
          goto bad;
        }
        v[k] = fields[col[k]];
      }
      fx_entry *e = &m->entries[m->count++];
      e->name = v[0];
      e->exe = v[1];
      e->pdb = v[2];
      e->arch = v[3];
      e->opt = v[4];
      e->lang = v[5];
      e->guid = v[6];
      e->symkey = v[7];
      e->cv_path = v[8];
      e->expected = v[9];
      e->crosscheck = v[10];
      e->made = v[11];
      e->variant = v[12];
      uint64_t n[6];
      for (int k = 0; k < 6; k++)
        if (fx_parse_u64(v[13 + k], &n[k]) != 0) {
          fprintf(stderr, "fixtures: MANIFEST.tsv: %s: bad %s '%s'\n", e->name,
                  names[13 + k], v[13 + k]);
          goto bad;
        }
      e->machine = (uint32_t)n[0];
      e->age = (uint32_t)n[1];
      e->exe_size = n[2];
      e->pdb_size = n[3];
      e->image_size = (uint32_t)n[4];
      e->rows = n[5];
    }
    line = next;
  }
  return 0;
bad:
  fprintf(stderr, "fixtures: MANIFEST.tsv is malformed\n");
  fx_manifest_free(m);
  return -1;
}

/* Loads MANIFEST.tsv from the native folder (see fx_manifest_parse). */
static inline int fx_manifest_load(fx_manifest *m) {
  fx_blob b;
  memset(m, 0, sizeof *m);
  if (fx_read_fixture("MANIFEST.tsv", &b) != 0)
    return -1;
  int rc = fx_manifest_parse((const char *)b.data, b.len, m);
  free(b.data);
  return rc;
}

/* The entry named NAME ("c-x64-O2"), or NULL. */
static inline const fx_entry *fx_manifest_find(const fx_manifest *m, const char *name) {
  for (size_t i = 0; i < m->count; i++)
    if (strcmp(m->entries[i].name, name) == 0)
      return &m->entries[i];
  return NULL;
}

static inline void fx_expected_free(fx_expected *x) {
  for (size_t i = 0; i < x->count; i++) {
    for (size_t k = 0; k < x->rows[i].nframes; k++) {
      free(x->rows[i].frames[k].function);
      free(x->rows[i].frames[k].file);
    }
    free(x->rows[i].frames);
    free(x->rows[i].note);
  }
  free(x->rows);
  memset(x, 0, sizeof *x);
}

static inline char *fx_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p)
    memcpy(p, s, n);
  return p;
}

/* Parses one FRAMES array into ROW.  Returns 0 or -1. */
static inline int fx_parse_frames(const char *json, fx_row *row) {
  json_error_t err;
  json_t *a = json_loads(json, 0, &err);
  if (!a || !json_is_array(a)) {
    json_decref(a);
    return -1;
  }
  size_t n = json_array_size(a);
  row->frames = calloc(n ? n : 1, sizeof *row->frames);
  if (!row->frames) {
    json_decref(a);
    return -1;
  }
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    json_t *o = json_array_get(a, i);
    json_t *fn = json_object_get(o, "function");
    json_t *file = json_object_get(o, "file");
    json_t *line = json_object_get(o, "line");
    json_t *column = json_object_get(o, "column");
    if (!json_is_string(fn) || !json_is_string(file) || !json_is_integer(line) ||
        json_integer_value(line) < 0 || json_integer_value(line) > UINT32_MAX ||
        (column && (!json_is_integer(column) || json_integer_value(column) < 0 ||
                    json_integer_value(column) > UINT32_MAX))) {
      rc = -1;
      break;
    }
    fx_frame *f = &row->frames[row->nframes++];
    f->function = fx_strdup(json_string_value(fn));
    f->file = fx_strdup(json_string_value(file));
    f->line = (uint32_t)json_integer_value(line);
    f->column = column ? (uint32_t)json_integer_value(column) : 0;
    if (!f->function || !f->file)
      rc = -1;
  }
  json_decref(a);
  return rc;
}

/* Parses the text of an expected-answer file (LEN bytes at SRC, copied; FILE
 * names it in messages).  Rows must be well formed, sorted, not empty and
 * not overlap.  Returns 0 or -1; on success free with
 * fx_expected_free. */
static inline int fx_expected_parse(const char *file, const char *src, size_t len,
                                    fx_expected *x) {
  memset(x, 0, sizeof *x);
  char *text = malloc(len + 1);
  if (!text)
    return -1;
  memcpy(text, src, len);
  text[len] = '\0';
  size_t lines = 0;
  for (size_t i = 0; i < len; i++)
    lines += text[i] == '\n';
  x->rows = calloc(lines + 1, sizeof *x->rows);
  size_t lineno = 0;
  char *line = text;
  int rc = x->rows ? 0 : -1;
  while (rc == 0 && line && *line) {
    char *next = fx_cut(line, '\n');
    lineno++;
    if (line[0] != '#' && line[0] != '\0') {
      char *end_s = fx_cut(line, '\t');
      char *json = end_s ? fx_cut(end_s, '\t') : NULL;
      char *note = json ? fx_cut(json, '\t') : NULL;
      uint64_t start, end;
      fx_row *r = &x->rows[x->count];
      if (!json || fx_parse_u64(line, &start) != 0 || fx_parse_u64(end_s, &end) != 0 ||
          start >= end || end > UINT32_MAX ||
          (x->count && x->rows[x->count - 1].end > start)) {
        rc = -1;
      } else {
        r->start = (uint32_t)start;
        r->end = (uint32_t)end;
        x->count++;
        rc = fx_parse_frames(json, r);
        if (rc == 0 && note && !(r->note = fx_strdup(note)))
          rc = -1;
      }
      if (rc != 0)
        fprintf(stderr, "fixtures: %s:%zu: malformed or out-of-order row\n", file,
                lineno);
    }
    line = next;
  }
  free(text);
  if (rc != 0)
    fx_expected_free(x);
  return rc;
}

/* Loads the expected-answer file FILE from the native folder. */
static inline int fx_expected_load(const char *file, fx_expected *x) {
  fx_blob b;
  memset(x, 0, sizeof *x);
  if (fx_read_fixture(file, &b) != 0)
    return -1;
  int rc = fx_expected_parse(file, (const char *)b.data, b.len, x);
  free(b.data);
  return rc;
}

/* The row covering RVA, or NULL (llvm-symbolizer had no answer there, or
 * RVA is outside the code). */
static inline const fx_row *fx_expected_find(const fx_expected *x, uint32_t rva) {
  size_t lo = 0, hi = x->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (x->rows[mid].end <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < x->count && x->rows[lo].start <= rva)
    return &x->rows[lo];
  return NULL;
}

static inline int fx_frame_eq(const fx_frame *a, const fx_frame *b) {
  return strcmp(a->function, b->function) == 0 && strcmp(a->file, b->file) == 0 &&
         a->line == b->line && (!b->column || a->column == b->column);
}

/* Is FRAMES (N frames, innermost first) the right answer at RVA, given the
 * fixture's expected rows X (llvm-symbolizer 19) and crosscheck rows CC (may
 * be NULL)?  Every frame must be equal (function, file, line, and the column
 * where the row has one); where no row covers RVA (padding between
 * functions) the answer must be empty.  The one exception: where the
 * crosscheck row's note says "dup-line" (several line-table entries at one
 * address; llvm-symbolizer takes the first, while an entry followed by one at
 * its address covers no byte, as DIA reads it: docs/oracles.md) the answer
 * must equal the crosscheck row.  Elsewhere ("before-first-line") the
 * expected row stands. */
static inline int fx_answer_ok(const fx_expected *x, const fx_expected *cc, uint32_t rva,
                               const fx_frame *frames, size_t n) {
  const fx_row *e = fx_expected_find(x, rva);
  const fx_row *c = cc ? fx_expected_find(cc, rva) : NULL;
  const fx_row *want = c && c->note && strstr(c->note, "dup-line") ? c : e;
  if (n != (want ? want->nframes : 0))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!fx_frame_eq(&frames[i], &want->frames[i]))
      return 0;
  return 1;
}

/* The executable sections of a PE image (IMAGE_SCN_CNT_CODE or
 * IMAGE_SCN_MEM_EXECUTE) as [start, end) RVAs into out (at most max);
 * returns how many, or -1 when the headers are not those of a PE. */
static inline int fx_code_sections(const fx_blob *exe, uint32_t out[][2], int max) {
  const uint8_t *d = exe->data;
  size_t n = exe->len;
  if (n < 0x40 || d[0] != 'M' || d[1] != 'Z')
    return -1;
  uint32_t pe = (uint32_t)d[0x3c] | (uint32_t)d[0x3d] << 8 | (uint32_t)d[0x3e] << 16 |
                (uint32_t)d[0x3f] << 24;
  if ((size_t)pe + 24 > n || memcmp(d + pe, "PE\0\0", 4) != 0)
    return -1;
  unsigned nsec = (unsigned)(d[pe + 6] | d[pe + 7] << 8);
  unsigned optsz = (unsigned)(d[pe + 20] | d[pe + 21] << 8);
  size_t sec = (size_t)pe + 24 + optsz;
  int k = 0;
  for (unsigned i = 0; i < nsec && k < max && sec + 40 * ((size_t)i + 1) <= n; i++) {
    const uint8_t *s = d + sec + 40 * i;
    uint32_t vsz = (uint32_t)s[8] | (uint32_t)s[9] << 8 | (uint32_t)s[10] << 16 | (uint32_t)s[11] << 24;
    uint32_t va = (uint32_t)s[12] | (uint32_t)s[13] << 8 | (uint32_t)s[14] << 16 | (uint32_t)s[15] << 24;
    uint32_t ch = (uint32_t)s[36] | (uint32_t)s[37] << 8 | (uint32_t)s[38] << 16 | (uint32_t)s[39] << 24;
    if (ch & 0x20000020u) {
      out[k][0] = va;
      out[k][1] = va + vsz;
      k++;
    }
  }
  return k;
}

#endif
