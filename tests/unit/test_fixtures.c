/* Tests the native fixture loader (fixtures.h) and the fixture inventory in
 * tests/fixtures/native/: every manifest entry exists, its image is a PE whose
 * CodeView entry names the manifest's PDB identity, its PDB is an MSF 7.00
 * file, and its expected answers (recorded from llvm-symbolizer) parse, cover
 * only code bytes of the image, and do not overlap. */
#include <stdint.h>

#include "fixtures.h"
#include "machine_paths.h"
#include "test.h"

static const char msf7_magic[] = "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS\0\0\0";

/* --- a minimal PE reader, for the inventory checks only ------------------ */

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }

typedef struct {
  uint32_t machine, size_of_image;
  uint32_t debug_rva, debug_size; /* data directory 6 */
  unsigned nsec;
  struct {
    char name[9];
    uint32_t rva, vsize, raw_off, raw_size, chars;
  } sec[16];
} pe_info;

/* Returns 0 when the headers are in bounds and sane. */
static int pe_parse(const fx_blob *b, pe_info *pe) {
  memset(pe, 0, sizeof *pe);
  if (b->len < 0x40 || b->data[0] != 'M' || b->data[1] != 'Z')
    return -1;
  uint32_t off = le32(b->data + 0x3c);
  if (off > b->len || b->len - off < 24 || memcmp(b->data + off, "PE\0\0", 4) != 0)
    return -1;
  const uint8_t *coff = b->data + off + 4;
  pe->machine = le16(coff);
  pe->nsec = le16(coff + 2);
  uint32_t opt_size = le16(coff + 16);
  size_t opt = (size_t)off + 24;
  if (pe->nsec > 16 || opt + opt_size + 40u * pe->nsec > b->len)
    return -1;
  const uint8_t *o = b->data + opt;
  uint32_t magic = le16(o);
  size_t dirs = magic == 0x20b ? 112 : magic == 0x10b ? 96 : 0;
  if (!dirs || opt_size < dirs + 7 * 8)
    return -1;
  pe->size_of_image = le32(o + 56);
  pe->debug_rva = le32(o + dirs + 6 * 8);
  pe->debug_size = le32(o + dirs + 6 * 8 + 4);
  for (unsigned i = 0; i < pe->nsec; i++) {
    const uint8_t *h = o + opt_size + 40 * i;
    memcpy(pe->sec[i].name, h, 8);
    pe->sec[i].vsize = le32(h + 8);
    pe->sec[i].rva = le32(h + 12);
    pe->sec[i].raw_size = le32(h + 16);
    pe->sec[i].raw_off = le32(h + 20);
    pe->sec[i].chars = le32(h + 36);
  }
  return 0;
}

/* File offset of RVA with at least N bytes of raw data behind it, or -1. */
static long pe_offset(const fx_blob *b, const pe_info *pe, uint32_t rva, uint32_t n) {
  for (unsigned i = 0; i < pe->nsec; i++) {
    uint64_t lo = pe->sec[i].rva, raw = pe->sec[i].raw_size;
    if (rva >= lo && (uint64_t)rva + n <= lo + raw &&
        (uint64_t)pe->sec[i].raw_off + raw <= b->len)
      return (long)(pe->sec[i].raw_off + (rva - lo));
  }
  return -1;
}

/* Is [start, end) inside one executable section (CNT_CODE or MEM_EXECUTE)? */
static int pe_in_code(const pe_info *pe, uint32_t start, uint32_t end) {
  for (unsigned i = 0; i < pe->nsec; i++)
    if ((pe->sec[i].chars & 0x20000020u) && start >= pe->sec[i].rva &&
        (uint64_t)end <= (uint64_t)pe->sec[i].rva + pe->sec[i].vsize)
      return 1;
  return 0;
}

/* The RSDS CodeView entry: GUID formatted as llvm-pdbutil prints it. */
static int pe_codeview(const fx_blob *b, const pe_info *pe, char guid[37], uint32_t *age,
                       char *path, size_t path_cap) {
  for (uint32_t d = 0; d + 28 <= pe->debug_size; d += 28) {
    long at = pe_offset(b, pe, pe->debug_rva + d, 28);
    if (at < 0)
      return -1;
    const uint8_t *e = b->data + at;
    uint32_t type = le32(e + 12), size = le32(e + 16), ptr = le32(e + 24);
    if (type != 2 || size < 24 || ptr > b->len || b->len - ptr < size)
      continue;
    const uint8_t *cv = b->data + ptr;
    if (memcmp(cv, "RSDS", 4) != 0)
      continue;
    const uint8_t *g = cv + 4;
    snprintf(guid, 37, "%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X", le32(g),
             le16(g + 4), le16(g + 6), g[8], g[9], g[10], g[11], g[12], g[13], g[14],
             g[15]);
    *age = le32(cv + 20);
    size_t n = strnlen((const char *)cv + 24, size - 24);
    if (n >= path_cap)
      return -1;
    memcpy(path, cv + 24, n);
    path[n] = '\0';
    return 0;
  }
  return -1;
}

/* Does BLOB contain a path of a build machine (UTF-8 or UTF-16LE)? */
static const char *machine_path_in(const fx_blob *b) {
  static mp_needles nd; /* the answer points into it */
  static int ready;
  if (!ready) {
    mp_init(&nd);
    ready = 1;
  }
  return mp_find(&nd, b->data, b->len);
}

/* --- loader tests on hand-written text ------------------------------------ */

TEST(expected_parse_rows) {
  const char *text =
      "# comment\n"
      "0x1000\t0x1004\t[{\"function\":\"f\",\"file\":\"C:\\\\a.c\",\"line\":3}]\n"
      "0x1004\t0x1010\t[{\"function\":\"g\",\"file\":\"b.h\",\"line\":7,\"column\":5},"
      "{\"function\":\"f\",\"file\":\"C:\\\\a.c\",\"line\":4}]\n"
      "0x1020\t0x1021\t[{\"function\":\"\",\"file\":\"\",\"line\":0}]\tinline-line\n";
  fx_expected x;
  CHECK(fx_expected_parse("t", text, strlen(text), &x) == 0);
  CHECK_EQ_U(x.count, 3);
  if (x.count != 3)
    return;
  CHECK_EQ_U(x.rows[0].start, 0x1000);
  CHECK_EQ_U(x.rows[0].end, 0x1004);
  CHECK_EQ_U(x.rows[0].nframes, 1);
  CHECK_EQ_S(x.rows[0].frames[0].file, "C:\\a.c");
  CHECK_EQ_U(x.rows[1].nframes, 2);
  CHECK_EQ_S(x.rows[1].frames[0].function, "g");
  CHECK_EQ_U(x.rows[1].frames[0].column, 5);
  CHECK_EQ_U(x.rows[1].frames[1].line, 4);
  CHECK_EQ_U(x.rows[1].frames[1].column, 0);
  CHECK(fx_expected_find(&x, 0x0fff) == NULL);
  CHECK(fx_expected_find(&x, 0x1000) == &x.rows[0]);
  CHECK(fx_expected_find(&x, 0x1003) == &x.rows[0]);
  CHECK(fx_expected_find(&x, 0x1004) == &x.rows[1]);
  CHECK(fx_expected_find(&x, 0x100f) == &x.rows[1]);
  CHECK(fx_expected_find(&x, 0x1010) == NULL); /* gap */
  CHECK(fx_expected_find(&x, 0x1020) == &x.rows[2]);
  CHECK(x.rows[0].note == NULL);
  CHECK_EQ_S(x.rows[2].note, "inline-line");
  CHECK(fx_expected_find(&x, 0x1021) == NULL);
  fx_expected_free(&x);
}

TEST(expected_parse_rejects_bad_rows) {
  static const char *const bad[] = {
      "0x1000\t0x1000\t[]\n",                             /* empty range */
      "0x1004\t0x1000\t[]\n",                             /* reversed */
      "0x1000\t0x1008\t[]\n0x1004\t0x1010\t[]\n",         /* overlap */
      "0x1010\t0x1018\t[]\n0x1000\t0x1004\t[]\n",         /* out of order */
      "0x1000\t0x1004\n",                                 /* no frames */
      "0x1000\t0x1004\t[{\"function\":\"f\"}]\n",         /* no file/line */
      "0x1000\t0x1004\t[{\"function\":1,\"file\":\"\",\"line\":1}]\n",
      "0x1000\t0x1004\t[{\"function\":\"f\",\"file\":\"\",\"line\":-1}]\n",
      "0x1000\t0x1004\t{\"function\":\"f\"}\n",           /* not an array */
      "0x1000\t0x1004\t[\n",                              /* bad JSON */
      "zz\t0x1004\t[]\n",                                 /* bad number */
      "0x1000\t0x100000000\t[]\n",                        /* beyond 32 bits */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    fx_expected x;
    int rc = fx_expected_parse("bad", bad[i], strlen(bad[i]), &x);
    if (rc == 0) {
      fprintf(stderr, "accepted bad input %zu: %s", i, bad[i]);
      fx_expected_free(&x);
    }
    CHECK(rc != 0);
    CHECK(x.rows == NULL && x.count == 0);
  }
}

TEST(manifest_parse_by_column_name) {
  /* columns in another order, plus one the loader does not know */
  const char *text =
      "# exe\tname\textra\tpdb\tarch\topt\tlang\tguid\tsymkey\tcv_path\texpected\t"
      "made\tmachine\tage\texe_size\tpdb_size\timage_size\trows\tcrosscheck\tvariant\n"
      "# a later comment\n"
      "a.exe\ta\tx\ta.pdb.gz\tx64\tO2\tc\tG\tK\tC:\\a.pdb\ta.tsv\thow\t0x8664\t1\t10\t20\t"
      "0x5000\t7\ta.cc.tsv\tplain\n";
  fx_manifest m;
  CHECK(fx_manifest_parse(text, strlen(text), &m) == 0);
  CHECK_EQ_U(m.count, 1);
  if (m.count == 1) {
    CHECK_EQ_S(m.entries[0].name, "a");
    CHECK_EQ_S(m.entries[0].exe, "a.exe");
    CHECK_EQ_S(m.entries[0].cv_path, "C:\\a.pdb");
    CHECK_EQ_U(m.entries[0].machine, 0x8664);
    CHECK_EQ_U(m.entries[0].image_size, 0x5000);
    CHECK_EQ_U(m.entries[0].rows, 7);
    CHECK_EQ_S(m.entries[0].crosscheck, "a.cc.tsv");
    CHECK_EQ_S(m.entries[0].variant, "plain");
    CHECK(fx_manifest_find(&m, "a") == &m.entries[0]);
    CHECK(fx_manifest_find(&m, "b") == NULL);
  }
  fx_manifest_free(&m);

  const char *missing = "# name\texe\na\ta.exe\n";
  CHECK(fx_manifest_parse(missing, strlen(missing), &m) != 0);
  const char *badnum =
      "# name\texe\tpdb\tarch\topt\tlang\tguid\tsymkey\tcv_path\texpected\t"
      "made\tmachine\tage\texe_size\tpdb_size\timage_size\trows\tcrosscheck\tvariant\n"
      "a\ta.exe\ta.pdb.gz\tx64\tO2\tc\tG\tK\tP\ta.tsv\thow\t0x8664\tone\t10\t20\t"
      "0x5000\t7\tc.tsv\tplain\n";
  CHECK(fx_manifest_parse(badnum, strlen(badnum), &m) != 0);
}

TEST(gunzip_rejects_garbage) {
  uint8_t junk[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff};
  fx_blob in = {junk, sizeof junk}, out;
  CHECK(fx_gunzip(&in, &out) != 0);
  CHECK(out.data == NULL);
}

/* --- the committed inventory ---------------------------------------------- */

TEST(manifest_lists_every_build) {
  fx_manifest m;
  CHECK(fx_manifest_load(&m) == 0);
  static const char *const langs[] = {"c", "cpp"};
  static const char *const archs[] = {"x64", "x86", "arm64"};
  static const char *const opts[] = {"O0", "O2"};
  /* 12 plain builds, two with column info, three with publics only */
  CHECK_EQ_U(m.count, 17);
  static const char *const variants[] = {"c-x64-O2-col", "cpp-x64-O2-col", "c-x86-O2-pub",
                                         "cpp-x64-O2-pub", "cpp-x86-O2-pub"};
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    const fx_entry *e = fx_manifest_find(&m, variants[v]);
    CHECK(e != NULL);
    if (e)
      CHECK_EQ_S(e->variant, variants[v] + strlen(variants[v]) - 3);
  }
  for (int l = 0; l < 2; l++)
    for (int a = 0; a < 3; a++)
      for (int o = 0; o < 2; o++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%s-%s", langs[l], archs[a], opts[o]);
        const fx_entry *e = fx_manifest_find(&m, name);
        if (!e) {
          fprintf(stderr, "missing fixture %s\n", name);
          CHECK(e != NULL);
          continue;
        }
        CHECK_EQ_S(e->lang, langs[l]);
        CHECK_EQ_S(e->arch, archs[a]);
        CHECK_EQ_S(e->opt, opts[o]);
        CHECK_EQ_S(e->variant, "plain");
      }
  fx_manifest_free(&m);
}

TEST(images_and_pdbs) {
  fx_manifest m;
  CHECK(fx_manifest_load(&m) == 0);
  for (size_t i = 0; i < m.count; i++) {
    const fx_entry *e = &m.entries[i];
    fx_blob exe, pdb;
    CHECK(fx_read_fixture(e->exe, &exe) == 0);
    CHECK(fx_read_fixture(e->pdb, &pdb) == 0);
    CHECK_EQ_U(exe.len, e->exe_size);
    CHECK_EQ_U(pdb.len, e->pdb_size);
    CHECK(exe.len >= 2 && exe.data[0] == 'M' && exe.data[1] == 'Z');
    CHECK(pdb.len >= sizeof msf7_magic - 1 &&
          memcmp(pdb.data, msf7_magic, sizeof msf7_magic - 1) == 0);

    pe_info pe;
    CHECK(pe_parse(&exe, &pe) == 0);
    CHECK_EQ_U(pe.machine, e->machine);
    CHECK_EQ_U(pe.size_of_image, e->image_size);
    char guid[37] = "", path[512] = "";
    uint32_t age = 0;
    CHECK(pe_codeview(&exe, &pe, guid, &age, path, sizeof path) == 0);
    CHECK_EQ_S(guid, e->guid);
    CHECK_EQ_U(age, e->age);
    CHECK_EQ_S(path, e->cv_path);
    /* the symbol-server key is GUID without dashes + age in hex */
    char key[64];
    size_t k = 0;
    for (const char *g = e->guid; *g && k < sizeof key - 1; g++)
      if (*g != '-')
        key[k++] = *g;
    snprintf(key + k, sizeof key - k, "%X", (unsigned)e->age);
    CHECK_EQ_S(key, e->symkey);
    /* no path of the build machine in the image or the PDB */
    const char *p1 = machine_path_in(&exe), *p2 = machine_path_in(&pdb);
    if (p1 || p2)
      fprintf(stderr, "%s: machine path %s\n", e->name, p1 ? p1 : p2);
    CHECK(!p1 && !p2);
    free(exe.data);
    free(pdb.data);
  }
  fx_manifest_free(&m);
}

TEST(expected_answers) {
  fx_manifest m;
  CHECK(fx_manifest_load(&m) == 0);
  for (size_t i = 0; i < m.count; i++) {
    const fx_entry *e = &m.entries[i];
    fx_blob exe;
    pe_info pe;
    fx_expected x;
    CHECK(fx_read_fixture(e->exe, &exe) == 0);
    CHECK(pe_parse(&exe, &pe) == 0);
    CHECK(fx_expected_load(e->expected, &x) == 0);
    CHECK(x.count > 0);
    CHECK_EQ_U(x.count, e->rows);
    size_t inlined = 0, bad = 0, columns = 0;
    int pub = strcmp(e->variant, "pub") == 0;
    for (size_t r = 0; r < x.count; r++) {
      const fx_row *row = &x.rows[r];
      /* publics-only: one frame, a public name, no file or line */
      if (pub && (row->nframes != 1 || row->frames[0].file[0] || row->frames[0].line))
        bad++;
      if (!pe_in_code(&pe, row->start, row->end) || row->nframes == 0 ||
          (r && x.rows[r - 1].end > row->start)) {
        if (bad++ < 3)
          fprintf(stderr, "%s: row [0x%x, 0x%x) outside code, empty or overlapping\n",
                  e->name, (unsigned)row->start, (unsigned)row->end);
      }
      inlined += row->nframes > 1;
      for (size_t f = 0; f < row->nframes; f++)
        columns += row->frames[f].column != 0;
      for (size_t f = 0; f < row->nframes; f++) {
        const fx_frame *fr = &row->frames[f];
        /* paths are mapped to the fake build root */
        if ((!pub && strncmp(fr->file, "C:\\src\\pdbsym\\native\\", 21) != 0) ||
            !fr->function[0]) {
          if (bad++ < 3)
            fprintf(stderr, "%s: 0x%x: frame '%s' in '%s'\n", e->name,
                    (unsigned)row->start, fr->function, fr->file);
        }
      }
    }
    CHECK_EQ_U(bad, 0);
    /* columns exactly where the build asked for them */
    if (strcmp(e->variant, "col") == 0)
      CHECK(columns > 0);
    else
      CHECK_EQ_U(columns, 0);
    /* -O2 inlines the small helpers: inline frames must be there */
    if (strcmp(e->opt, "O2") == 0 && !pub)
      CHECK(inlined > 0);
    free(exe.data);
    fx_expected_free(&x);
  }
  fx_manifest_free(&m);
}

/* The crosscheck files: well formed, known notes, inside the code, and each
 * row agrees with the expected row on the frame count and the names.  With
 * LLVM 19 the decoding and llvm-symbolizer agree on every inline frame; they
 * differ only on the two outermost-line conventions, on a bounded number of
 * bytes (tests/fixtures/native/README.md). */
TEST(crosscheck_rows) {
  fx_manifest m;
  CHECK(fx_manifest_load(&m) == 0);
  size_t dup_bytes = 0, first_bytes = 0;
  for (size_t i = 0; i < m.count; i++) {
    const fx_entry *e = &m.entries[i];
    fx_blob exe;
    pe_info pe;
    fx_expected x, cc;
    CHECK(fx_read_fixture(e->exe, &exe) == 0);
    CHECK(pe_parse(&exe, &pe) == 0);
    CHECK(fx_expected_load(e->expected, &x) == 0);
    CHECK(fx_expected_load(e->crosscheck, &cc) == 0);
    size_t bad = 0;
    for (size_t r = 0; r < cc.count; r++) {
      const fx_row *c = &cc.rows[r];
      int dup = c->note && strcmp(c->note, "dup-line") == 0;
      int first = c->note && strcmp(c->note, "before-first-line") == 0;
      if (dup)
        dup_bytes += c->end - c->start;
      if (first)
        first_bytes += c->end - c->start;
      int ok = (dup || first) && c->nframes > 0 && pe_in_code(&pe, c->start, c->end);
      for (uint32_t rva = c->start; ok && rva < c->end; rva++) {
        const fx_row *w = fx_expected_find(&x, rva);
        ok = w && w->nframes == c->nframes;
        for (size_t f = 0; ok && f < c->nframes; f++)
          ok = strcmp(w->frames[f].function, c->frames[f].function) == 0;
      }
      if (!ok && bad++ < 3)
        fprintf(stderr, "%s: crosscheck row [0x%x, 0x%x) %s\n", e->name,
                (unsigned)c->start, (unsigned)c->end, c->note ? c->note : "(no note)");
    }
    CHECK_EQ_U(bad, 0);
    /* the answers of unoptimised builds agree entirely; publics-only ones
     * have nothing to cross-check */
    if (strcmp(e->opt, "O0") == 0 || strcmp(e->variant, "pub") == 0)
      CHECK_EQ_U(cc.count, 0);
    free(exe.data);
    fx_expected_free(&x);
    fx_expected_free(&cc);
  }
  printf("  crosscheck: dup-line on %zu bytes, before-first-line on %zu bytes\n", dup_bytes,
         first_bytes);
  CHECK(dup_bytes > 0);
  CHECK_LE(dup_bytes, 30);
  CHECK_LE(first_bytes, 70);
  fx_manifest_free(&m);
}

/* fx_answer_ok accepts the expected answer, the crosscheck answer instead
 * where its note is dup-line, and rejects the other one there, an answer one
 * line off and an empty answer. */
TEST(answer_rules) {
  fx_manifest m;
  CHECK(fx_manifest_load(&m) == 0);
  size_t checked = 0, bad = 0;
  for (size_t i = 0; i < m.count; i++) {
    fx_expected x, cc;
    CHECK(fx_expected_load(m.entries[i].expected, &x) == 0);
    CHECK(fx_expected_load(m.entries[i].crosscheck, &cc) == 0);
    for (size_t r = 0; r < x.count; r++) {
      for (uint32_t rva = x.rows[r].start; rva < x.rows[r].end; rva++) {
        const fx_row *e = &x.rows[r], *c = fx_expected_find(&cc, rva);
        int dup = c && c->note && strcmp(c->note, "dup-line") == 0;
        const fx_row *right = dup ? c : e, *wrong = dup ? e : c;
        fx_frame fr[16];
        size_t n = right->nframes < 16 ? right->nframes : 16;
        memcpy(fr, right->frames, n * sizeof fr[0]);
        int ok = fx_answer_ok(&x, &cc, rva, fr, n);
        if (wrong)
          ok = ok && !fx_answer_ok(&x, &cc, rva, wrong->frames, wrong->nframes);
        fr[0].line++;
        ok = ok && !fx_answer_ok(&x, &cc, rva, fr, n);
        ok = ok && !fx_answer_ok(&x, &cc, rva, fr, 0);
        if (!ok && bad++ < 3)
          fprintf(stderr, "%s: fx_answer_ok wrong at 0x%x\n", m.entries[i].name,
                  (unsigned)rva);
        checked++;
      }
    }
    fx_expected_free(&x);
    fx_expected_free(&cc);
  }
  CHECK(checked > 10000);
  CHECK_EQ_U(bad, 0);
  fx_manifest_free(&m);
}

/* Rebuilding takes about a minute and needs clang and lld 14 (the committed
 * images are theirs) and LLVM 19's tools, so it runs only on request:
 * PDBSYM_REBUILD_FIXTURES=1. */
TEST(rebuild_reproduces) {
  const char *want = getenv("PDBSYM_REBUILD_FIXTURES");
  if (!want || strcmp(want, "1") != 0)
    SKIP_OPTIN("set PDBSYM_REBUILD_FIXTURES=1 to rebuild the native fixtures and compare");
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  char cmd[4096];
  int n = snprintf(cmd, sizeof cmd, "'%s/tests/fixtures/build-native.sh' --check >&2",
                   root && *root ? root : ".");
  CHECK(n > 0 && (size_t)n < sizeof cmd && !strchr(root ? root : "", '\''));
  if (n > 0 && (size_t)n < sizeof cmd)
    CHECK_EQ_U(system(cmd), 0);
}

int main(void) {
  RUN(expected_parse_rows);
  RUN(expected_parse_rejects_bad_rows);
  RUN(manifest_parse_by_column_name);
  RUN(gunzip_rejects_garbage);
  RUN(manifest_lists_every_build);
  RUN(images_and_pdbs);
  RUN(expected_answers);
  RUN(crosscheck_rows);
  RUN(answer_rules);
  RUN(rebuild_reproduces);
  return test_summary();
}
