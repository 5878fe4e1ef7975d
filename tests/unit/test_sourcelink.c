/*
 * test_sourcelink.c - the Source Link map (sourcelink.h) on the spec's rules
 * (dotnet/designs source-link.md: case-insensitive keys, a trailing '*'
 * matching any rest of the path, '\' turned to '/', the longest match), on
 * arrays of maps, escapes and hostile JSON; and srcsrv data turned into exact
 * rules, on the shapes real PDBs carry (Microsoft.DiaSymReader.Converter's
 * %RAWURL%, Mozilla's %fnvar%(%var2%), a Perforce target that is no URL) and
 * on hostile ones (self-referencing variables, exponential expansion, URLs past
 * the cap).  Real PDBs' streams are checked in test_sourcelink_corpus.c.
 */
#include "sourcelink.h"
#include "test.h"

static void want_url(const char *json, const char *path, const char *url) {
  sl_map m;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, 1 << 20);
  ps_err e = sl_map_build(&m, json, strlen(json), &b, &d);
  CHECK_EQ_U(e, PS_E_OK);
  if (e != PS_E_OK)
    return;
  char out[SL_MAX_URL];
  bool got = sl_map_resolve(&m, path, out, sizeof out);
  if (url) {
    CHECK(got);
    if (got)
      CHECK_EQ_S(out, url);
  } else if (got) {
    t_failed_checks++;
    fprintf(stderr, "  %s: got %s, want no URL\n", path, out);
  }
  sl_map_free(&m, &b);
  CHECK_EQ_U(b.used, 0); /* every byte given back */
}

static void want_bad(const char *json, size_t len) {
  sl_map m;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, 1 << 20);
  ps_err e = sl_map_build(&m, json, len, &b, &d);
  if (e == PS_E_OK) {
    t_failed_checks++;
    fprintf(stderr, "  accepted bad JSON %.*s\n", (int)(len > 60 ? 60 : len), json);
    sl_map_free(&m, &b);
  }
  CHECK_EQ_U(b.used, 0);
}

TEST(source_link_rules) {
  const char *j = "{\"documents\":{\"C:\\\\src\\\\*\":\"https://h/r/c0/*\","
                  "\"C:\\\\src\\\\lib\\\\*\":\"https://h/lib/c1/*\","
                  "\"C:\\\\src\\\\exact.cs\":\"https://h/exact\"}}";
  want_url(j, "C:\\src\\a\\b.cs", "https://h/r/c0/a/b.cs");
  want_url(j, "c:\\SRC\\a.cs", "https://h/r/c0/a.cs"); /* keys match case-insensitively */
  want_url(j, "C:\\src\\lib\\x.cs", "https://h/lib/c1/x.cs"); /* the longest prefix */
  want_url(j, "C:\\src\\exact.cs", "https://h/exact");        /* exact over wildcard */
  want_url(j, "C:\\other\\a.cs", NULL);
  want_url(j, "C:\\sr", NULL);
  /* the first of equal keys; an array of maps counts as one set of rules */
  want_url("{\"documents\":{\"C:\\\\a*\":\"http://s/1/a*\",\"C:\\\\A*\":\"http://s/2/A*\"}}",
           "C:\\A\\b\\x.cs", "http://s/1/a/b/x.cs");
  want_url("[{\"documents\":{\"/x/*\":\"u1/*\"}},{\"documents\":{\"/x/y/*\":\"u2/*\"}}]",
           "/x/y/z.c", "u2/z.c");
  want_url("[{\"documents\":{\"/x/*\":\"u1/*\"}},{\"documents\":{\"/x/*\":\"u2/*\"}}]", "/x/z.c",
           "u1/z.c");
  want_url("[]", "/x", NULL);
  /* "*" alone covers everything; a URL may use the rest twice or not at all */
  want_url("{\"documents\":{\"*\":\"http://s/4/*\"}}", ":6.cs", "http://s/4/:6.cs");
  want_url("{\"documents\":{\"/a/*\":\"http://s/*?p=*\"}}", "/a/b", "http://s/b?p=b");
  want_url("{\"documents\":{\"/a/*\":\"http://s/fixed\"}}", "/a/b", "http://s/fixed");
  /* escapes, a BOM, other members and values skipped */
  want_url("\xEF\xBB\xBF {\"version\": 1, \"x\": [1, {\"y\": null}], \"documents\": "
           "{\"/p\\u00e9/*\": \"https://h/\\u00e9\\/*\", \"n\": 5, \"o\": {\"a\": true}}}",
           "/p\xC3\xA9/f", "https://h/\xC3\xA9/f");
  want_url("{\"documents\":{\"/s/*\":\"https://h/\\ud83d\\ude00/*\"}}", "/s/x",
           "https://h/\xF0\x9F\x98\x80/x");
  want_url("{\"documents\":{\"/n\\u0000/*\":\"https://h/*\"}}", "/n", NULL); /* no NUL in keys */
  want_url("{\"documents\":{}}", "/a", NULL);
  /* trailing commas, as System.Text.Json's AllowTrailingCommas takes them */
  want_url("{\"documents\": {\"/a/*\": \"u/*\", }, \"x\": [1, 2, ], }", "/a/b", "u/b");
  want_url("[{\"documents\":{\"/a/*\":\"u/*\"}},]", "/a/b", "u/b");
  /* exact keys equal but for case: the one spelled as the path, else the first */
  want_url("{\"documents\":{\"C:\\\\x.cs\":\"u/x\",\"C:\\\\X.cs\":\"u/X\"}}", "C:\\X.cs", "u/X");
  want_url("{\"documents\":{\"C:\\\\x.cs\":\"u/x\",\"C:\\\\X.cs\":\"u/X\"}}", "c:\\x.CS", "u/x");
  want_url("{}", "/a", NULL);
}

TEST(source_link_hostile) {
  const char *bad[] = {"", "{", "{\"documents\":", "{\"documents\":{\"a\":}}", "[{},",
                       "{\"documents\":{\"a\":\"b\"}} x", "{\"a\":\"\\q\"}", "{\"a\":\"\\u12\"}",
                       "{\"a\" \"b\"}", "nul", "{\"a\":\"b\",,}", "\"str\"", "{,}", "[,]",
                       "{\"documents\":{\"a\":\"line\nbreak\"}}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    want_bad(bad[i], strlen(bad[i]));
  /* nesting past the limit, an embedded NUL in the text */
  char deep[400];
  size_t n = 0;
  n += (size_t)snprintf(deep, sizeof deep, "{\"x\":");
  for (int i = 0; i < 100; i++)
    deep[n++] = '[';
  for (int i = 0; i < 100; i++)
    deep[n++] = ']';
  deep[n++] = '}';
  want_bad(deep, n);
  want_bad("{\"documents\":{\"a\":\"b\0\"}}", 23);
  /* a URL longer than the caller's buffer gives no URL, never a cut one */
  sl_map m;
  ps_diag d;
  ps_diag_clear(&d);
  const char *j = "{\"documents\":{\"/a/*\":\"https://host/*\"}}";
  CHECK_EQ_U(sl_map_build(&m, j, strlen(j), NULL, &d), PS_E_OK);
  char small[16];
  CHECK(!sl_map_resolve(&m, "/a/long-file-name.cs", small, sizeof small));
  CHECK(sl_map_resolve(&m, "/a/b", small, sizeof small));
  CHECK_EQ_S(small, "https://host/b");
  sl_map_free(&m, NULL);
  /* the budget bounds the map */
  ps_budget tiny;
  ps_budget_init(&tiny, 8);
  CHECK_EQ_U(sl_map_build(&m, j, strlen(j), &tiny, &d), PS_E_LIMIT);
  CHECK_EQ_U(tiny.used, 0);
}

/* srcsrv text -> the URL its rules give path (NULL: none) */
static void srv(const char *text, const char *path, const char *url, size_t want_files) {
  char *json = NULL;
  size_t len, cap, files;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, 1 << 22);
  ps_err e = sl_from_srcsrv(text, strlen(text), &b, &json, &len, &cap, &files, &d);
  if (!want_files) {
    CHECK_EQ_U(e, PS_E_NOT_FOUND);
    CHECK(json == NULL);
    CHECK_EQ_U(b.used, 0);
    return;
  }
  CHECK_EQ_U(e, PS_E_OK);
  CHECK_EQ_U(files, want_files);
  if (e == PS_E_OK && path)
    want_url(json, path, url);
  free(json);
  ps_budget_release(&b, cap);
  CHECK_EQ_U(b.used, 0);
}

#define HDR "SRCSRV: ini ------------------------------------------------\r\nVERSION=2\r\n"
#define VARS "SRCSRV: variables ------------------------------------------\r\n"
#define FILES "SRCSRV: source files ---------------------------------------\r\n"
#define END "SRCSRV: end ------------------------------------------------\r\n"

TEST(srcsrv_shapes) {
  /* Microsoft.DiaSymReader.Converter (Source Link -> srcsrv) */
  const char *conv = HDR VARS "RAWURL=http://server/%var2%\r\nSRCSRVVERCTRL=http\r\n"
                     "SRCSRVTRG=%RAWURL%\r\n" FILES "C:\\Documents.cs*3/Documents.cs.g\r\n"
                     "C:\\a\\b\\c\\d\\1.cs*1/a/b/c/d/1.cs\r\n:6.cs*4/%3A6.cs\r\n" END;
  srv(conv, "C:\\Documents.cs", "http://server/3/Documents.cs.g", 3);
  srv(conv, "c:\\A\\B\\C\\D\\1.CS", "http://server/1/a/b/c/d/1.cs", 3); /* keys: any case */
  srv(conv, ":6.cs", "http://server/4/%3A6.cs", 3);                    /* a lone % stays */
  srv(conv, "C:\\other.cs", NULL, 3);
  /* Mozilla: a per-file target variable through %fnvar%, nested variables */
  const char *moz =
      HDR VARS "HGSERVER=https://hg.mozilla.org/releases/mozilla-esr115\n"
      "HG_TARGET=%hgserver%/raw-file/%var4%/%var3%\n"
      "S3_TARGET=https://%s3_bucket%.s3.amazonaws.com/%var3%\nS3_BUCKET=gecko-generated-sources\n"
      "SRCSRVTRG=%fnvar%(%var2%)\n" FILES
      "/builds/worker/checkouts/gecko/toolkit/dummydll.cpp*HG_TARGET*toolkit/dummydll.cpp*1ae4\n"
      "/builds/worker/obj/gen.cpp*S3_TARGET*abc/gen.cpp\n" END;
  srv(moz, "/builds/worker/checkouts/gecko/toolkit/dummydll.cpp",
      "https://hg.mozilla.org/releases/mozilla-esr115/raw-file/1ae4/toolkit/dummydll.cpp", 2);
  srv(moz, "/builds/worker/obj/gen.cpp", "https://gecko-generated-sources.s3.amazonaws.com/abc/gen.cpp",
      2);
  /* %fnbksl% and %fnfile% */
  srv(HDR VARS "SRCSRVTRG=https://h/%fnfile%(%var2%)/%fnbksl%(%var3%)\n" FILES
          "c:\\x.c*a\\b\\name.c*p/q\n" END,
      "c:\\x.c", "https://h/name.c/p\\q", 1);
  /* a Perforce target is a local path: no URL, so no rule */
  srv(HDR VARS "SRCSRVTRG=%targ%\\%var2%\\%fnbksl%(%var3%)\nSRCSRVCMD=\n" FILES
          "c:\\x.cc*P4_SERVER*depot/x.cc*12345\n" END,
      NULL, NULL, 0);
  /* no source files section, no target, an empty file name */
  srv(HDR VARS "SRCSRVTRG=https://h/%var2%\n" END, NULL, NULL, 0);
  srv(HDR FILES "c:\\x.c*a\n" END, NULL, NULL, 0);
  srv(HDR VARS "SRCSRVTRG=https://h/%var2%\n" FILES "*a\nc:\\y.c*b\n" END, "c:\\y.c",
      "https://h/b", 1);
  /* names and URLs with JSON's special characters */
  srv(HDR VARS "SRCSRVTRG=https://h/%var2%\n" FILES "c:\\q\"uote.c*a\"b\\c\n" END,
      "c:\\q\"uote.c", "https://h/a\"b\\c", 1);
}

TEST(srcsrv_hostile) {
  /* a variable naming itself, a pair naming each other: expansion stops */
  srv(HDR VARS "A=%B%\nB=%A%\nSRCSRVTRG=https://h/%A%\n" FILES "c:\\x.c*1\n" END, NULL, NULL, 0);
  srv(HDR VARS "SRCSRVTRG=https://h/%SRCSRVTRG%\n" FILES "c:\\x.c*1\n" END, NULL, NULL, 0);
  /* exponential expansion: bounded work, no URL past the cap */
  char big[4096];
  size_t n = (size_t)snprintf(big, sizeof big, "%s%s", HDR, VARS);
  for (int i = 0; i < 30; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "V%d=%%V%d%%%%V%d%%\n", i, i + 1, i + 1);
  n += (size_t)snprintf(big + n, sizeof big - n, "V30=x\nSRCSRVTRG=https://h/%%V0%%\n%sc:\\x.c*1\n%s",
                        FILES, END);
  srv(big, NULL, NULL, 0);
  /* unbalanced function parentheses, a '%' with no name */
  srv(HDR VARS "SRCSRVTRG=https://h/%fnbksl%(%var2%\n" FILES "c:\\x.c*1\n" END, NULL, NULL, 0);
  srv(HDR VARS "SRCSRVTRG=https://h/%%var2%\n" FILES "c:\\x.c*1\n" END, "c:\\x.c",
      "https://h/%1", 1);
  /* more than ten fields, a field number past ten */
  srv(HDR VARS "SRCSRVTRG=https://h/%var10%/%var11%\n" FILES "c:\\x.c*2*3*4*5*6*7*8*9*10*11*12\n" END,
      "c:\\x.c", "https://h/10/%var11%", 1);
  /* garbage and binary */
  srv("\x01\x02\x03 SRCSRV: nothing", NULL, NULL, 0);
  srv("", NULL, NULL, 0);
  /* the budget bounds the output */
  char *json;
  size_t len, cap, files;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget tiny;
  ps_budget_init(&tiny, 64);
  const char *t = HDR VARS "SRCSRVTRG=https://h/%var2%\n" FILES "c:\\x.c*a\n" END;
  CHECK(sl_from_srcsrv(t, strlen(t), &tiny, &json, &len, &cap, &files, &d) != PS_E_OK);
  CHECK_EQ_U(tiny.used, 0);
}

int main(void) {
  RUN(source_link_rules);
  RUN(source_link_hostile);
  RUN(srcsrv_shapes);
  RUN(srcsrv_hostile);
  return test_summary();
}
