/* Inventory of the managed (.NET) fixtures in tests/fixtures/managed/ (made by
 * tests/fixtures/build-managed.sh, described in tests/fixtures/managed/README.md):
 * every file MANIFEST.tsv lists exists with its size and the magic of its kind
 * (MZ/PE, BSJB, "Microsoft C/C++ MSF 7.00"), no file is left out of the manifest,
 * no machine path is in any file, the expected answers (JSON lines from
 * System.Reflection.Metadata and from ISymUnmanagedReader) parse and hold the
 * sequence points the fixtures promise (hidden points, state-machine kickoffs,
 * two documents and a #line document), their ids are the ones in the binaries,
 * the Windows and Portable answers for one source and optimisation agree, and
 * the committed sources are the ones built (their SHA-1 is the PDB document hash).
 * Needs no .NET, Wine or network: it reads committed files only. */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "corpus_util.h"
#include "machine_paths.h"
#include "test.h"

#define HIDDEN_LINE 0xFEEFEE /* ECMA-335 / Portable PDB spec: hidden sequence point */

static char g_dir[4096]; /* tests/fixtures/managed */

typedef struct {
  char file[256];
  char kind[64];
  char id[512];
  long size;
} mf_row;

static mf_row g_rows[128];
static size_t g_nrows;

/* A file of the fixture folder, whole and NUL-terminated (cu_read_raw;
 * caller frees); *len gets its size.  NULL when absent. */
static unsigned char *read_all(const char *rel, size_t *len) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", g_dir, rel);
  *len = 0;
  return cu_read_raw(path, len);
}

static int contains(const unsigned char *hay, size_t n, const void *needle, size_t m) {
  if (m == 0 || m > n)
    return 0;
  for (size_t i = 0; i + m <= n; i++)
    if (hay[i] == *(const unsigned char *)needle && memcmp(hay + i, needle, m) == 0)
      return 1;
  return 0;
}

static const mf_row *find_row(const char *file) {
  for (size_t i = 0; i < g_nrows; i++)
    if (strcmp(g_rows[i].file, file) == 0)
      return &g_rows[i];
  return NULL;
}

/* Splits MANIFEST.tsv into g_rows; returns 0 when it cannot be read. */
static int load_manifest(void) {
  size_t n;
  unsigned char *text = read_all("MANIFEST.tsv", &n);
  if (!text)
    return 0;
  char *save = NULL;
  char *line = strtok_r((char *)text, "\n", &save);
  int ok = line && strcmp(line, "file\tkind\tid\tsize\thow_made") == 0;
  while (ok && (line = strtok_r(NULL, "\n", &save)) != NULL && g_nrows < 128) {
    mf_row *r = &g_rows[g_nrows];
    char *f[5];
    int k = 0;
    char *p = line;
    f[k++] = p;
    while (k < 5 && (p = strchr(p, '\t')) != NULL) {
      *p++ = 0;
      f[k++] = p;
    }
    if (k != 5) {
      ok = 0;
      break;
    }
    snprintf(r->file, sizeof r->file, "%s", f[0]);
    snprintf(r->kind, sizeof r->kind, "%s", f[1]);
    snprintf(r->id, sizeof r->id, "%s", f[2]);
    r->size = strtol(f[3], NULL, 10);
    g_nrows++;
  }
  free(text);
  return ok;
}

/* Parses a JSON-lines file; returns a JSON array of its objects (caller
 * decrefs) or NULL, printing the failing line. */
static json_t *load_jsonl(const char *rel) {
  size_t n;
  unsigned char *text = read_all(rel, &n);
  if (!text)
    return NULL;
  json_t *all = json_array();
  char *save = NULL;
  int lineno = 0;
  for (char *line = strtok_r((char *)text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    lineno++;
    json_error_t err;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &err);
    if (!o || !json_is_object(o) || !json_is_string(json_object_get(o, "kind"))) {
      fprintf(stderr, "%s:%d: not a JSON object with a kind: %s\n", rel, lineno, o ? "" : err.text);
      json_decref(o);
      json_decref(all);
      free(text);
      return NULL;
    }
    json_array_append_new(all, o);
  }
  free(text);
  return all;
}

static const char *kind_of(const json_t *o) { return json_string_value(json_object_get(o, "kind")); }

/* The GUID text "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as the 16 bytes a PE
 * CodeView record or PDB stores (first three groups little-endian). */
static int guid_bytes(const char *s, unsigned char out[16]) {
  static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  unsigned char raw[16];
  int k = 0;
  for (const char *p = s; *p; p++) {
    if (*p == '-')
      continue;
    unsigned v;
    if (k == 16 || !p[1] || sscanf(p, "%2x", &v) != 1)
      return 0;
    raw[k++] = (unsigned char)v;
    p++;
  }
  if (k != 16)
    return 0;
  for (int i = 0; i < 16; i++)
    out[i] = raw[order[i]];
  return 1;
}

TEST(manifest_lists_files_that_exist_with_their_magic) {
  CHECK(g_nrows >= 19);
  int seen_msf = 0, seen_bsjb = 0, seen_dll = 0, seen_embedded = 0, seen_src = 0;
  for (size_t i = 0; i < g_nrows; i++) {
    const mf_row *r = &g_rows[i];
    size_t n;
    unsigned char *b = read_all(r->file, &n);
    if (!b) {
      fprintf(stderr, "listed in MANIFEST.tsv but missing: %s\n", r->file);
      CHECK(b != NULL);
      continue;
    }
    if ((long)n != r->size)
      fprintf(stderr, "%s: size %zu, manifest says %ld\n", r->file, n, r->size);
    CHECK((long)n == r->size);
    CHECK(n < 64 * 1024); /* committed fixtures stay small */
    if (strcmp(r->kind, "windows-pdb-msf7") == 0) {
      static const char msf7[] = "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS\0\0\0";
      CHECK(n > 512 && memcmp(b, msf7, sizeof msf7 - 1) == 0);
      seen_msf++;
    } else if (strcmp(r->kind, "portable-pdb") == 0) {
      CHECK(n > 4 && memcmp(b, "BSJB", 4) == 0);
      seen_bsjb++;
    } else if (strncmp(r->kind, "pe-dll", 6) == 0) {
      CHECK(n > 0x40 && b[0] == 'M' && b[1] == 'Z');
      if (n > 0x40) {
        uint32_t lfanew = (uint32_t)b[0x3c] | (uint32_t)b[0x3d] << 8 | (uint32_t)b[0x3e] << 16 |
                          (uint32_t)b[0x3f] << 24;
        CHECK(lfanew + 4 <= n && memcmp(b + lfanew, "PE\0\0", 4) == 0);
      }
      /* the Portable PDB blob inside: "MPDB" + size + deflated PDB */
      if (strcmp(r->kind, "pe-dll+embedded-portable-pdb") == 0) {
        CHECK(contains(b, n, "MPDB", 4));
        seen_embedded++;
      }
      seen_dll++;
    } else if (strcmp(r->kind, "csharp-source") == 0) {
      CHECK(n > 0 && contains(b, n, "namespace Pdbsym.Fixtures", 25));
      seen_src++;
    } else if (strcmp(r->kind, "sourcelink-json") == 0) {
      CHECK(n > 0 && contains(b, n, "\"documents\"", 11));
    } else {
      CHECK(strncmp(r->kind, "expected-", 9) == 0);
    }
    /* no path of the machine that built them (UTF-8 or UTF-16LE), nor Wine's
     * drive for the host's root */
    mp_needles nd;
    mp_init(&nd);
    mp_add(&nd, "Z:\\");
    mp_add(&nd, "Z:/");
    const char *found = mp_find(&nd, b, n);
    if (found) {
      fprintf(stderr, "%s holds a machine path (%s)\n", r->file, found);
      CHECK(0);
    }
    free(b);
  }
  CHECK_EQ_U(seen_msf, 2);
  CHECK_EQ_U(seen_bsjb, 2);
  CHECK_EQ_U(seen_dll, 5);
  CHECK_EQ_U(seen_embedded, 1);
  CHECK(seen_src >= 2); /* several documents in one assembly */
}

TEST(every_fixture_file_is_in_the_manifest) {
  static const char *const dirs[] = {"src", "portable-debug", "portable-release", "embedded-debug",
                                     "windows-debug", "windows-release"};
  for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", g_dir, dirs[d]);
    DIR *dh = opendir(path);
    CHECK(dh != NULL);
    if (!dh)
      continue;
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dh)) != NULL) {
      if (e->d_name[0] == '.')
        continue;
      char rel[512];
      snprintf(rel, sizeof rel, "%s/%s", dirs[d], e->d_name);
      if (!find_row(rel))
        fprintf(stderr, "not in MANIFEST.tsv: %s\n", rel);
      CHECK(find_row(rel) != NULL);
      files++;
    }
    closedir(dh);
    CHECK(files > 0);
  }
}

typedef struct {
  size_t points, hidden, kickoff, docs_seen, line_directive;
} sp_stats;

/* Checks every "sp" record's fields and counts what the fixtures promise. */
static void check_points(const char *rel, json_t *all, sp_stats *st) {
  memset(st, 0, sizeof *st);
  const char *docs[8] = {0};
  size_t i;
  json_t *o;
  json_array_foreach(all, i, o) {
    if (strcmp(kind_of(o), "sp") != 0)
      continue;
    st->points++;
    const char *tok = json_string_value(json_object_get(o, "token"));
    const char *method = json_string_value(json_object_get(o, "method"));
    const char *doc = json_string_value(json_object_get(o, "doc"));
    json_t *il = json_object_get(o, "il"), *sl = json_object_get(o, "sl");
    json_t *sc = json_object_get(o, "sc"), *el = json_object_get(o, "el");
    json_t *ec = json_object_get(o, "ec"), *hidden = json_object_get(o, "hidden");
    int ok = tok && strlen(tok) == 10 && strncmp(tok, "0x06", 4) == 0 && method &&
             strstr(method, "::") && doc && strncmp(doc, "/_/", 3) == 0 && json_is_integer(il) &&
             json_integer_value(il) >= 0 && json_is_integer(sl) && json_is_integer(sc) &&
             json_is_integer(el) && json_is_integer(ec) && json_is_boolean(hidden);
    if (!ok) {
      char *s = json_dumps(o, JSON_COMPACT);
      fprintf(stderr, "%s: malformed sequence point %s\n", rel, s ? s : "?");
      free(s);
      CHECK(ok);
      continue;
    }
    int is_hidden = json_integer_value(sl) == HIDDEN_LINE;
    CHECK(is_hidden == json_is_true(hidden));
    if (is_hidden) {
      st->hidden++;
    } else {
      CHECK(json_integer_value(sl) >= 1 && json_integer_value(el) >= json_integer_value(sl));
      CHECK(json_integer_value(sc) >= 1 && json_integer_value(ec) >= 1);
    }
    const char *ko = json_string_value(json_object_get(o, "kickoff"));
    if (ko && strncmp(ko, "0x06", 4) == 0 && strstr(method, "::MoveNext"))
      st->kickoff++;
    if (strcmp(doc, "/_/Generated.g.cs") == 0 && json_integer_value(sl) >= 500)
      st->line_directive++;
    for (size_t k = 0; k < 8; k++) {
      if (docs[k] && strcmp(docs[k], doc) == 0)
        break;
      if (!docs[k]) {
        docs[k] = doc;
        st->docs_seen++;
        break;
      }
    }
  }
}

TEST(portable_answers_hold_the_promised_points) {
  static const char *const files[] = {"portable-debug/Demo.pdb.srm.jsonl",
                                      "portable-release/Demo.pdb.srm.jsonl",
                                      "embedded-debug/Demo.dll.srm.jsonl"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    const mf_row *r = find_row(files[f]);
    CHECK(r && strcmp(r->kind, "expected-srm") == 0);
    json_t *all = load_jsonl(files[f]);
    CHECK(all != NULL);
    if (!all)
      continue;
    sp_stats st;
    check_points(files[f], all, &st);
    CHECK(st.points > 50);
    CHECK(st.hidden >= 1);
    CHECK(st.kickoff >= 1);
    CHECK(st.line_directive >= 1);
    CHECK_EQ_U(st.docs_seen, 4); /* Program.cs, Closures.cs, Shapes.cs, Generated.g.cs */
    /* one "pdb" record naming the entry point, Main */
    size_t i, pdbs = 0;
    json_t *o;
    json_array_foreach(all, i, o) {
      if (strcmp(kind_of(o), "pdb") == 0) {
        pdbs++;
        CHECK(json_is_string(json_object_get(o, "entry_point")));
      }
    }
    CHECK_EQ_U(pdbs, 1);
    json_decref(all);
  }
}

TEST(windows_answers_hold_the_promised_points) {
  static const char *const files[] = {"windows-debug/Demo.pdb.winpdb.jsonl",
                                      "windows-release/Demo.pdb.winpdb.jsonl"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    const mf_row *r = find_row(files[f]);
    CHECK(r && strcmp(r->kind, "expected-winpdb") == 0);
    json_t *all = load_jsonl(files[f]);
    CHECK(all != NULL);
    if (!all)
      continue;
    CHECK(json_array_size(all) > 0 && strcmp(kind_of(json_array_get(all, 0)), "winpdb") == 0);
    sp_stats st;
    check_points(files[f], all, &st);
    CHECK(st.points > 50);
    CHECK(st.hidden >= 1);
    CHECK(st.line_directive >= 1);
    CHECK_EQ_U(st.docs_seen, 4);
    /* WinPdbDump prints no kickoff; the MoveNext methods must still be there */
    size_t i, movenext = 0;
    json_t *o;
    json_array_foreach(all, i, o) {
      const char *m = json_string_value(json_object_get(o, "method"));
      if (m && strstr(m, ">d__") && strstr(m, "::MoveNext"))
        movenext++;
    }
    CHECK(movenext >= 1);
    json_decref(all);
  }
}

/* "token il doc sl sc el ec hidden" per point, sorted: the comparable part of
 * both oracles' answers (their method names differ in form). */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char **point_keys(const char *rel, size_t *count) {
  json_t *all = load_jsonl(rel);
  *count = 0;
  if (!all)
    return NULL;
  char **keys = calloc(json_array_size(all) + 1, sizeof *keys);
  size_t i;
  json_t *o;
  json_array_foreach(all, i, o) {
    if (!keys || strcmp(kind_of(o), "sp") != 0)
      continue;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s %lld %s %lld %lld %lld %lld %d",
             json_string_value(json_object_get(o, "token")),
             (long long)json_integer_value(json_object_get(o, "il")),
             json_string_value(json_object_get(o, "doc")),
             (long long)json_integer_value(json_object_get(o, "sl")),
             (long long)json_integer_value(json_object_get(o, "sc")),
             (long long)json_integer_value(json_object_get(o, "el")),
             (long long)json_integer_value(json_object_get(o, "ec")),
             json_is_true(json_object_get(o, "hidden")));
    keys[(*count)++] = strdup(buf);
  }
  json_decref(all);
  if (keys)
    qsort(keys, *count, sizeof *keys, cmp_str);
  return keys;
}

static void free_keys(char **keys, size_t n) {
  for (size_t i = 0; keys && i < n; i++)
    free(keys[i]);
  free(keys);
}

TEST(windows_and_portable_builds_agree) {
  static const char *const pairs[][2] = {
      {"portable-debug/Demo.pdb.srm.jsonl", "windows-debug/Demo.pdb.winpdb.jsonl"},
      {"portable-release/Demo.pdb.srm.jsonl", "windows-release/Demo.pdb.winpdb.jsonl"},
      {"portable-debug/Demo.pdb.srm.jsonl", "embedded-debug/Demo.dll.srm.jsonl"},
  };
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    size_t na, nb;
    char **a = point_keys(pairs[p][0], &na), **b = point_keys(pairs[p][1], &nb);
    CHECK(a && b && na > 0);
    CHECK_EQ_U(na, nb);
    for (size_t i = 0; a && b && i < na && i < nb; i++) {
      if (strcmp(a[i], b[i]) != 0) {
        fprintf(stderr, "%s vs %s: \"%s\" != \"%s\"\n", pairs[p][0], pairs[p][1], a[i], b[i]);
        CHECK(0);
        break;
      }
    }
    free_keys(a, na);
    free_keys(b, nb);
  }
  /* optimisation changes the points: the two levels must not be the same answer */
  size_t nd, nr;
  char **d = point_keys("portable-debug/Demo.pdb.srm.jsonl", &nd);
  char **r = point_keys("portable-release/Demo.pdb.srm.jsonl", &nr);
  CHECK(nd != nr);
  free_keys(d, nd);
  free_keys(r, nr);
}

/* The ids in the answers and the manifest are the ones in the binaries: the
 * CodeView GUID of each DLL is in its PDB (Portable: #Pdb stream id; MSF: PDB
 * info stream), and the manifest's id column says the same. */
TEST(ids_match_the_binaries) {
  static const char *const variants[] = {"portable-debug", "portable-release", "windows-debug",
                                         "windows-release", "embedded-debug"};
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    char rel[256];
    int embedded = strcmp(variants[v], "embedded-debug") == 0;
    int windows = strncmp(variants[v], "windows", 7) == 0;
    snprintf(rel, sizeof rel, "%s/%s", variants[v],
             embedded || windows ? "Demo.dll.srm.jsonl" : "Demo.pdb.srm.jsonl");
    json_t *all = load_jsonl(rel);
    CHECK(all != NULL);
    if (!all)
      continue;
    const char *guid = NULL;
    json_int_t age = -1;
    size_t i;
    json_t *o;
    json_array_foreach(all, i, o) {
      if (strcmp(kind_of(o), "debugdir") == 0 &&
          json_integer_value(json_object_get(o, "type_code")) == 2) {
        guid = json_string_value(json_object_get(o, "guid"));
        age = json_integer_value(json_object_get(o, "age"));
      }
      if (strcmp(kind_of(o), "pdb") == 0 && guid)
        CHECK_EQ_S(json_string_value(json_object_get(o, "id_guid")), guid);
    }
    CHECK(guid != NULL);
    CHECK_EQ_U(age, 1);
    unsigned char g[16];
    CHECK(guid && guid_bytes(guid, g));
    if (guid && guid_bytes(guid, g)) {
      size_t n;
      snprintf(rel, sizeof rel, "%s/Demo.dll", variants[v]);
      unsigned char *dll = read_all(rel, &n);
      unsigned char rsds[20];
      memcpy(rsds, "RSDS", 4);
      memcpy(rsds + 4, g, 16);
      CHECK(dll && contains(dll, n, rsds, sizeof rsds));
      free(dll);
      const mf_row *row = find_row(rel);
      CHECK(row && strncmp(row->id, guid, strlen(guid)) == 0);
      if (!embedded) {
        snprintf(rel, sizeof rel, "%s/Demo.pdb", variants[v]);
        unsigned char *pdb = read_all(rel, &n);
        CHECK(pdb && contains(pdb, n, g, sizeof g));
        free(pdb);
        row = find_row(rel);
        CHECK(row && strstr(row->id, guid) != NULL);
      }
    }
    json_decref(all);
  }
}

/* SHA-1 (FIPS 180-4), enough to check the document hashes the compiler
 * recorded against the committed sources. */
static uint32_t rol32(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

static void sha1(const unsigned char *msg, size_t len, unsigned char out[20]) {
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  size_t total = (len + 9 + 63) / 64 * 64;
  for (size_t off = 0; off < total; off += 64) {
    unsigned char blk[64];
    for (size_t i = 0; i < 64; i++) {
      size_t at = off + i;
      if (at < len)
        blk[i] = msg[at];
      else if (at == len)
        blk[i] = 0x80;
      else if (at >= total - 8)
        blk[i] = (unsigned char)(((uint64_t)len * 8) >> (8 * (total - 1 - at)));
      else
        blk[i] = 0;
    }
    uint32_t w[80];
    for (int t = 0; t < 16; t++)
      w[t] = (uint32_t)blk[4 * t] << 24 | (uint32_t)blk[4 * t + 1] << 16 |
             (uint32_t)blk[4 * t + 2] << 8 | blk[4 * t + 3];
    for (int t = 16; t < 80; t++)
      w[t] = rol32(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int t = 0; t < 80; t++) {
      uint32_t f, k;
      if (t < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999u;
      } else if (t < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1u;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDCu;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6u;
      }
      uint32_t tmp = rol32(a, 5) + f + e + k + w[t];
      e = d;
      d = c;
      c = rol32(b, 30);
      b = a;
      a = tmp;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  for (int i = 0; i < 20; i++)
    out[i] = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
}

TEST(sha1_known_answers) {
  /* FIPS 180-2 appendix A examples */
  unsigned char d[20];
  char hex[41];
  sha1((const unsigned char *)"abc", 3, d);
  for (int i = 0; i < 20; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  CHECK_EQ_S(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha1((const unsigned char *)two, strlen(two), d);
  for (int i = 0; i < 20; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  CHECK_EQ_S(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

/* The sources are the ones the fixtures were built from: each document's SHA-1
 * in the Portable answers equals that of the committed file (a source edited
 * without rerunning build-managed.sh fails here). */
TEST(sources_match_the_document_hashes) {
  static const char *const files[] = {"portable-debug/Demo.pdb.srm.jsonl",
                                      "portable-release/Demo.pdb.srm.jsonl",
                                      "embedded-debug/Demo.dll.srm.jsonl"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    json_t *all = load_jsonl(files[f]);
    CHECK(all != NULL);
    if (!all)
      continue;
    size_t i, hashed = 0;
    json_t *o;
    json_array_foreach(all, i, o) {
      if (strcmp(kind_of(o), "document") != 0)
        continue;
      const char *name = json_string_value(json_object_get(o, "name"));
      const char *alg = json_string_value(json_object_get(o, "hash_alg"));
      const char *want = json_string_value(json_object_get(o, "hash"));
      CHECK(name && alg && want && strncmp(name, "/_/", 3) == 0);
      if (!name || !alg || !want || strcmp(alg, "SHA1") != 0)
        continue; /* the #line document has no hash */
      char rel[512];
      snprintf(rel, sizeof rel, "src/%s", name + 3);
      size_t n;
      unsigned char *text = read_all(rel, &n);
      CHECK(text != NULL);
      if (!text)
        continue;
      unsigned char d[20];
      char hex[41];
      sha1(text, n, d);
      for (int k = 0; k < 20; k++)
        snprintf(hex + 2 * k, 3, "%02x", d[k]);
      if (strcmp(hex, want) != 0)
        fprintf(stderr, "%s: SHA-1 %s, %s says %s: rerun build-managed.sh\n", rel, hex, files[f], want);
      CHECK_EQ_S(hex, want);
      free(text);
      hashed++;
    }
    CHECK_EQ_U(hashed, 3);
    json_decref(all);
  }
}

int main(void) {
  const char *src = getenv("PDBSYM_SOURCE_DIR");
  if (!src) {
    return test_skip_all("PDBSYM_SOURCE_DIR unset (run through ctest)");
  }
  snprintf(g_dir, sizeof g_dir, "%s/tests/fixtures/managed", src);
  if (!load_manifest()) {
    fprintf(stderr, "cannot read %s/MANIFEST.tsv\n", g_dir);
    return 1;
  }
  RUN(manifest_lists_files_that_exist_with_their_magic);
  RUN(every_fixture_file_is_in_the_manifest);
  RUN(portable_answers_hold_the_promised_points);
  RUN(windows_answers_hold_the_promised_points);
  RUN(windows_and_portable_builds_agree);
  RUN(ids_match_the_binaries);
  RUN(sha1_known_answers);
  RUN(sources_match_the_document_hashes);
  return test_summary();
}
