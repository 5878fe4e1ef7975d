/*
 * test_fetch.c - the symbol-server client's pure parts: symbol-path parsing,
 * key paths and URL escaping.  Expected keys are written out by hand from the
 * symstore/SSQP conventions (docs/fetch.md), not computed by our code.
 */
#include <stdio.h>
#include <string.h>

#include "fetch.h"
#include "test.h"

static fetcher *open_path(const char *sp, ps_err *err) {
  fetch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.symbol_path = sp;
  fetcher *f = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  *err = fetch_open(&cfg, &f, &d);
  return f;
}

static void expect_sources(const char *sp, const char *const *want_bases, const bool *want_http,
                           size_t n) {
  ps_err e;
  fetcher *f = open_path(sp, &e);
  CHECK_EQ_U(e, PS_E_OK);
  if (!f)
    return;
  CHECK_EQ_U(fetch_source_count(f), n);
  for (size_t i = 0; i < n && i < fetch_source_count(f); i++) {
    fetch_source_info si;
    CHECK(fetch_source_get(f, i, &si));
    CHECK_EQ_S(si.base, want_bases[i]);
    CHECK_EQ_U(si.http, want_http[i]);
  }
  fetch_close(f);
}

TEST(symbol_path_default) {
  static const char *const b[] = {"https://msdl.microsoft.com/download/symbols"};
  static const bool h[] = {true};
  expect_sources(NULL, b, h, 1);
  expect_sources("", b, h, 1);
  expect_sources(" ; ;", b, h, 1);
  expect_sources("srv*", b, h, 1);
  expect_sources("SRV*", b, h, 1);
}

TEST(symbol_path_forms) {
  {
    static const char *const b[] = {"/var/cache/sym", "https://host/path",
                                    "http://127.0.0.1:9000", "/local/store"};
    static const bool h[] = {false, true, true, false};
    expect_sources("srv*/var/cache/sym*https://host/path/;srv*http://127.0.0.1:9000;/local/store",
                   b, h, 4);
  }
  {
    /* symsrv*symsrv.dll*DOWN*UP and cache*DIR */
    static const char *const b[] = {"/c1", "/down", "https://up.example/s"};
    static const bool h[] = {false, false, true};
    expect_sources("cache*/c1;symsrv*symsrv.dll*/down*https://up.example/s", b, h, 3);
  }
  {
    /* srv* with an empty upstream after a downstream store: Microsoft's */
    static const char *const b[] = {"/down", "https://msdl.microsoft.com/download/symbols"};
    static const bool h[] = {false, true};
    expect_sources("srv*/down*", b, h, 2);
  }
  {
    static const char *const b[] = {"HTTPS://Host/x"};
    static const bool h[] = {true};
    expect_sources("  HTTPS://Host/x  ", b, h, 1);
  }
}

TEST(symbol_path_headers) {
  ps_err e;
  fetcher *f = open_path("srv*https://a/s|Authorization: Bearer x|X-Trace: 1;https://b", &e);
  CHECK_EQ_U(e, PS_E_OK);
  fetch_source_info si;
  CHECK(f && fetch_source_get(f, 0, &si));
  if (f) {
    CHECK_EQ_S(si.base, "https://a/s");
    CHECK_EQ_U(si.nheaders, 2);
    CHECK(fetch_source_get(f, 1, &si));
    CHECK_EQ_U(si.nheaders, 0);
    fetch_close(f);
  }
  /* config headers go to every HTTP source, not to folders */
  fetch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  const char *hdrs[] = {"Authorization: Basic abc", NULL};
  cfg.symbol_path = "https://a|X-One: 1;/folder";
  cfg.headers = hdrs;
  ps_diag d;
  ps_diag_clear(&d);
  f = NULL;
  CHECK_EQ_U(fetch_open(&cfg, &f, &d), PS_E_OK);
  if (f) {
    CHECK(fetch_source_get(f, 0, &si));
    CHECK_EQ_U(si.nheaders, 2);
    CHECK(fetch_source_get(f, 1, &si));
    CHECK_EQ_U(si.nheaders, 0);
    fetch_close(f);
  }
}

TEST(symbol_path_rejects) {
  static const char *const bad[] = {
      "ftp://host/sym",                  /* scheme */
      "file:///etc",                     /* scheme */
      "https://a|NoColon",               /* header without ':' */
      "https://a|Bad Name: x",           /* space in the name */
      "/folder|X-A: 1",                  /* headers on a folder */
      "https://a b/c",                   /* space in a URL */
      "https://a/\x01",                  /* control character */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ps_err e;
    fetcher *f = open_path(bad[i], &e);
    CHECK(e != PS_E_OK && f == NULL);
    if (e == PS_E_OK)
      printf("  accepted '%s'\n", bad[i]);
    fetch_close(f);
  }
  fetch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  const char *hdrs[] = {"X-A: 1\r\nX-Injected: 2", NULL};
  cfg.symbol_path = "https://a";
  cfg.headers = hdrs;
  fetcher *f = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK(fetch_open(&cfg, &f, &d) != PS_E_OK);
  fetch_close(f);
}

TEST(keys) {
  module_id m;
  memset(&m, 0, sizeof m);
  const char *why;
  CHECK(module_parse_file_name("C:\\src\\out\\Foo.pdb", m.debug_file, sizeof m.debug_file, &why));
  CHECK(module_parse_debug_id("3773e353-0b2e-4938-82ec-a7324b16c2d9-2a", m.guid, &m.age, &why));
  char c[FETCH_VARIANTS][FETCH_REL_MAX];
  /* the age has a hex letter: symstore's mixed case (age %x) is a casing of its own */
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_WINDOWS, false, c), 13);
  CHECK_EQ_S(c[0], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D92A/Foo.pdb");
  CHECK_EQ_S(c[1], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D92A/Foo.pd_");
  CHECK_EQ_S(c[2], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D92A/file.ptr");
  CHECK_EQ_S(c[3], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D92a/Foo.pdb");
  CHECK_EQ_S(c[4], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D92a/Foo.pd_");
  CHECK_EQ_S(c[5], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D92a/file.ptr");
  CHECK_EQ_S(c[6], "foo.pdb/3773e3530b2e493882eca7324b16c2d92a/foo.pdb");
  CHECK_EQ_S(c[7], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D92A/Foo.pdb");
  CHECK_EQ_S(c[8], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D92A/Foo.pd_");
  CHECK_EQ_S(c[9], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D92A/file.ptr");
  CHECK_EQ_S(c[10], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D92a/Foo.pdb");
  CHECK_EQ_S(c[12], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D92a/file.ptr");
  /* Portable: FFFFFFFF in every casing but SSQP's; no mixed case, so 7 paths */
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_PORTABLE, false, c), 7);
  CHECK_EQ_S(c[0], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D9FFFFFFFF/Foo.pdb");
  CHECK_EQ_S(c[3], "foo.pdb/3773e3530b2e493882eca7324b16c2d9ffffffff/foo.pdb");
  CHECK_EQ_S(c[4], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D9FFFFFFFF/Foo.pdb");
  /* age 0 and the Breakpad form: an age of digits only has one casing */
  CHECK(module_parse_debug_id("3773E3530B2E493882ECA7324B16C2D90", m.guid, &m.age, &why));
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_WINDOWS, false, c), 7);
  CHECK_EQ_S(c[0], "Foo.pdb/3773E3530B2E493882ECA7324B16C2D90/Foo.pdb");
  CHECK_EQ_S(c[6], "Fo/Foo.pdb/3773E3530B2E493882ECA7324B16C2D90/file.ptr");
  /* tecken's qipcap64 directory (a real symbol-server path) */
  CHECK(module_parse_debug_id("293A285ED25871934C4C44205044422E1", m.guid, &m.age, &why));
  snprintf(m.debug_file, sizeof m.debug_file, "qipcap64.pdb");
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_WINDOWS, false, c), 7);
  CHECK_EQ_S(c[1], "qipcap64.pdb/293A285ED25871934C4C44205044422E1/qipcap64.pd_");
}

TEST(image_keys) {
  module_id m;
  memset(&m, 0, sizeof m);
  const char *why;
  char c[FETCH_VARIANTS][FETCH_REL_MAX];
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 0); /* no code id */
  CHECK(module_parse_file_name("libEGL.dll", m.code_file, sizeof m.code_file, &why));
  CHECK(module_parse_code_id("6a4b8eee10000", &m.code_timestamp, &m.code_size, &why));
  m.has_code_id = true;
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 7);
  /* tecken: libEGL.dll/6A4B8EEE10000/libEGL.dl_ */
  CHECK_EQ_S(c[0], "libEGL.dll/6A4B8EEE10000/libEGL.dll");
  CHECK_EQ_S(c[1], "libEGL.dll/6A4B8EEE10000/libEGL.dl_");
  CHECK_EQ_S(c[3], "libegl.dll/6a4b8eee10000/libegl.dll");
  /* a timestamp with leading zeros keeps 8 digits */
  CHECK(module_parse_code_id("0000abcd2000", &m.code_timestamp, &m.code_size, &why));
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 7);
  CHECK_EQ_S(c[0], "libEGL.dll/0000ABCD2000/libEGL.dll");
  /* symstore.exe's {TimeDateStamp:X8}{SizeOfImage:x} (issue 14: CB649951a000) */
  CHECK(module_parse_file_name("Holdout.Store.dll", m.code_file, sizeof m.code_file, &why));
  CHECK(module_parse_code_id("cb649951A000", &m.code_timestamp, &m.code_size, &why));
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 13);
  CHECK_EQ_S(c[0], "Holdout.Store.dll/CB649951A000/Holdout.Store.dll");
  CHECK_EQ_S(c[3], "Holdout.Store.dll/CB649951a000/Holdout.Store.dll");
  CHECK_EQ_S(c[4], "Holdout.Store.dll/CB649951a000/Holdout.Store.dl_");
  CHECK_EQ_S(c[6], "holdout.store.dll/cb649951a000/holdout.store.dll");
  CHECK_EQ_S(c[7], "Ho/Holdout.Store.dll/CB649951A000/Holdout.Store.dll");
  /* the caller's own spelling of the code id is one more casing, last */
  snprintf(m.code_id_text, sizeof m.code_id_text, "cb649951A000");
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 14);
  CHECK_EQ_S(c[13], "Holdout.Store.dll/cb649951A000/Holdout.Store.dll");
  /* ... not when it spells one of the others, nor when it names another image */
  snprintf(m.code_id_text, sizeof m.code_id_text, "CB649951a000");
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 13);
  snprintf(m.code_id_text, sizeof m.code_id_text, "cb649951b000");
  CHECK_EQ_U(fetch_candidates(&m, ST_FORMAT_UNKNOWN, true, c), 13);
}

TEST(url_escape) {
  char out[64];
  CHECK(fetch_url_escape("a b#c/D.pdb~_-", out, sizeof out));
  CHECK_EQ_S(out, "a%20b%23c/D.pdb~_-");
  CHECK(fetch_url_escape("\xc3\xa9&+=;", out, sizeof out));
  CHECK_EQ_S(out, "%C3%A9%26%2B%3D%3B");
  CHECK(!fetch_url_escape("####", out, 12)); /* needs 13 */
  CHECK(fetch_url_escape("####", out, 13));
}

int main(void) {
  RUN(symbol_path_default);
  RUN(symbol_path_forms);
  RUN(symbol_path_headers);
  RUN(symbol_path_rejects);
  RUN(keys);
  RUN(image_keys);
  RUN(url_escape);
  return test_summary();
}
