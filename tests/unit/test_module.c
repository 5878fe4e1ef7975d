/* Unit tests for server/common/module.c: the contract's module naming rules. */
#include "module.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

TEST(debug_id_forms_agree) {
  uint8_t g1[16], g2[16], g3[16];
  uint32_t a1 = 0, a2 = 0, a3 = 0;
  const char *why = NULL;
  /* the two spellings docs/contract.md gives for one module */
  CHECK(module_parse_debug_id("3773e353-0b2e-4938-82ec-a7324b16c2d9-1", g1, &a1, &why));
  CHECK(module_parse_debug_id("3773E3530B2E493882ECA7324B16C2D91", g2, &a2, &why));
  CHECK(module_parse_debug_id("3773E353-0B2E-4938-82EC-A7324B16C2D9-1", g3, &a3, &why));
  CHECK(memcmp(g1, g2, 16) == 0 && memcmp(g1, g3, 16) == 0);
  CHECK(a1 == 1 && a2 == 1 && a3 == 1);
  /* on-disk layout: Data1 little-endian */
  CHECK(g1[0] == 0x53 && g1[3] == 0x37 && g1[4] == 0x2e && g1[8] == 0x82);
  char hex[33], id[48];
  module_guid_hex(g1, hex);
  CHECK_EQ_S(hex, "3773E3530B2E493882ECA7324B16C2D9");
  module_debug_id(g1, 0x2a, id);
  CHECK_EQ_S(id, "3773e353-0b2e-4938-82ec-a7324b16c2d9-2a");
  CHECK(module_parse_debug_id("3773E3530B2E493882ECA7324B16C2D9FFFFFFFF", g2, &a2, &why));
  CHECK_EQ_U(a2, 0xffffffffu);
}

TEST(debug_id_rejects) {
  uint8_t g[16];
  uint32_t a;
  const char *why = NULL;
  CHECK(!module_parse_debug_id("", g, &a, &why));
  CHECK(!module_parse_debug_id("3773E3530B2E493882ECA7324B16C2D", g, &a, &why));
  CHECK(!module_parse_debug_id("3773E3530B2E493882ECA7324B16C2DZ1", g, &a, &why));
  CHECK(!module_parse_debug_id("3773E3530B2E493882ECA7324B16C2D9123456789", g, &a, &why));
  CHECK(!module_parse_debug_id("3773e353-0b2e-4938-82ec-a7324b16c2d9-", g, &a, &why));
  CHECK(!module_parse_debug_id("3773e353-0b2e-4938-82ec-a7324b16c2d9x1", g, &a, &why));
  CHECK(!module_parse_debug_id(NULL, g, &a, &why));
  CHECK(why != NULL);
}

TEST(file_names) {
  char out[256];
  const char *why = NULL;
  CHECK(module_parse_file_name("C:\\build\\out\\Demo.pdb", out, sizeof out, &why));
  CHECK_EQ_S(out, "Demo.pdb");
  CHECK(module_parse_file_name("/x/y/libfoo.pdb", out, sizeof out, &why));
  CHECK_EQ_S(out, "libfoo.pdb");
  CHECK(!module_parse_file_name("..", out, sizeof out, &why));
  CHECK(!module_parse_file_name("a/..", out, sizeof out, &why));
  CHECK(!module_parse_file_name("x\\", out, sizeof out, &why));
  CHECK(!module_parse_file_name("bad\x01name.pdb", out, sizeof out, &why));
  CHECK(!module_parse_file_name("a:b.pdb", out, sizeof out, &why));
  CHECK(!module_parse_file_name("%2e%2e", out, sizeof out, &why));
  char longname[300];
  memset(longname, 'a', 256);
  longname[256] = '\0';
  CHECK(!module_parse_file_name(longname, out, sizeof out, &why));
  longname[255] = '\0';
  CHECK(module_parse_file_name(longname, out, sizeof out, &why));
}

TEST(code_ids_and_keys) {
  uint32_t ts, sz;
  CHECK(module_parse_code_id("5F1A2B3C1e000", &ts, &sz, NULL));
  CHECK(ts == 0x5F1A2B3C && sz == 0x1e000);
  CHECK(!module_parse_code_id("5F1A2B3C", &ts, &sz, NULL));
  CHECK(!module_parse_code_id("5F1A2B3CXYZ", &ts, &sz, NULL));
  module_id m;
  memset(&m, 0, sizeof m);
  strcpy(m.debug_file, "Demo.PDB");
  CHECK(module_parse_debug_id("3773e353-0b2e-4938-82ec-a7324b16c2d9-a", m.guid, &m.age, NULL));
  char k[42], ck[300];
  module_index_key(&m, ST_FORMAT_WINDOWS, k);
  CHECK_EQ_S(k, "3773E3530B2E493882ECA7324B16C2D9A");
  module_index_key(&m, ST_FORMAT_PORTABLE, k);
  CHECK_EQ_S(k, "3773E3530B2E493882ECA7324B16C2D9FFFFFFFF");
  module_cache_key(&m, ST_FORMAT_WINDOWS, ck, sizeof ck);
  CHECK_EQ_S(ck, "demo.pdb/3773E3530B2E493882ECA7324B16C2D9A");
}


/* Every form the ecosystem prints names the same GUID and age (module.h). */
TEST(debug_id_every_form) {
  static const char *const forms[] = {
      "3773e353-0b2e-4938-82ec-a7324b16c2d9-1", /* GUID-age (Sentry's debugid, our answers) */
      "3773E353-0B2E-4938-82EC-A7324B16C2D9-1",
      "3773E3530B2E493882ECA7324B16C2D91",      /* Breakpad, symstore's key */
      "3773e3530b2e493882eca7324b16c2d91",
      "3773e3530b2e493882eca7324b16c2d9-1",     /* 32 digits, dash, age */
      "3773E3530B2E493882ECA7324B16C2D9-1",
  };
  uint8_t want[16], g[16];
  uint32_t a = 7;
  bool has = false;
  const char *why = NULL;
  CHECK(module_parse_debug_id_ex(forms[0], want, &a, &has, &why));
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    a = 7;
    has = false;
    CHECK(module_parse_debug_id_ex(forms[i], g, &a, &has, &why));
    CHECK(memcmp(g, want, 16) == 0);
    CHECK(has && a == 1);
  }
  /* ages of 1 to 8 digits, with and without the dash */
  CHECK(module_parse_debug_id("3773e3530b2e493882eca7324b16c2d9-2A", g, &a, &why) && a == 0x2a);
  CHECK(module_parse_debug_id("3773e3530b2e493882eca7324b16c2d9ffffffff", g, &a, &why) && a == 0xffffffffu);
  /* no age: parsed, has_age false; the strict parser refuses it */
  CHECK(module_parse_debug_id_ex("3773e353-0b2e-4938-82ec-a7324b16c2d9", g, &a, &has, &why));
  CHECK(!has && a == 0 && memcmp(g, want, 16) == 0);
  CHECK(module_parse_debug_id_ex("3773E3530B2E493882ECA7324B16C2D9", g, &a, &has, &why));
  CHECK(!has && memcmp(g, want, 16) == 0);
  CHECK(!module_parse_debug_id("3773E3530B2E493882ECA7324B16C2D9", g, &a, &why));
  CHECK(strstr(why, "no age") != NULL);
}

/* The rule for an id without an age (module.h, module_set_debug_id). */
TEST(debug_id_without_age) {
  module_id m;
  const char *why = NULL;
  memset(&m, 0, sizeof m);
  CHECK(module_set_debug_id(&m, "3773e3530b2e493882eca7324b16c2d9", &why));
  CHECK(m.format == ST_FORMAT_PORTABLE && m.age == 0);
  memset(&m, 0, sizeof m);
  m.format = ST_FORMAT_PORTABLE;
  CHECK(module_set_debug_id(&m, "3773e353-0b2e-4938-82ec-a7324b16c2d9", &why));
  CHECK(m.format == ST_FORMAT_PORTABLE);
  memset(&m, 0, sizeof m);
  m.format = ST_FORMAT_WINDOWS;
  CHECK(!module_set_debug_id(&m, "3773e3530b2e493882eca7324b16c2d9", &why));
  CHECK(strstr(why, "no age") && strstr(why, "Windows"));
  memset(&m, 0, sizeof m);
  CHECK(module_set_debug_id(&m, "3773e3530b2e493882eca7324b16c2d9-0", &why));
  CHECK(m.format == ST_FORMAT_UNKNOWN && m.age == 0); /* an age of 0, given, is an age */
}

/* Each malformed id gets the message that names its problem. */
TEST(debug_id_messages) {
  static const struct {
    const char *in, *says;
  } cases[] = {
      {"", "empty"},
      {"xyz", "not a hex digit in the GUID"},
      {"3773E3530B2E493882ECA7324B16C2D", "shorter than a GUID"},
      {"3773E3530B2E493882ECA7324B16C2DZ1", "not a hex digit in the GUID"},
      {"3773E3530B2E493882ECA7324B16C2D9123456789", "more than 8 hex digits after the GUID"},
      {"3773e3530b2e493882eca7324b16c2d9-123456789", "age is longer than 8 hex digits"},
      {"3773e3530b2e493882eca7324b16c2d9-", "nothing after the '-'"},
      {"3773e3530b2e493882eca7324b16c2d9-1x", "age after the GUID must be hex digits"},
      {"3773e353-0b2e-4938-82ec-a7324b16c2d9-", "nothing after the '-'"},
      {"3773e353-0b2e-4938-82ec-a7324b16c2d9x1", "expected '-' and the age"},
      {"3773e353-0b2e-4938-82ec-a7324b16c2d91", "expected '-' and the age"},
      {"3773e353-0b2e-4938-82eca7324b16c2d9-1", "dashes must split it 8-4-4-4-12"},
      {"3773e353-0b2e-4938-82ec-a7324b16c2", "cut short"},
      {"3773e353-0b2e-4938-82ec-a7324b16c2d9-1-2", "age after the GUID must be hex digits"},
      {"3773e3530b2e-4938-82ec-a7324b16c2d9-1", "a dash inside the GUID"},
      {"{3773e353-0b2e-4938-82ec-a7324b16c2d9}-1", "not a hex digit in the GUID"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t g[16];
    uint32_t a;
    bool has;
    const char *why = NULL;
    bool ok = module_parse_debug_id_ex(cases[i].in, g, &a, &has, &why);
    CHECK(!ok);
    CHECK(why && strstr(why, cases[i].says));
    if (ok || !why || !strstr(why, cases[i].says))
      printf("  %s: %s\n", cases[i].in, why ? why : "(accepted)");
  }
}

TEST(code_ids_any_case) {
  uint32_t ts, sz, ts2, sz2;
  CHECK(module_parse_code_id("CB649951a000", &ts, &sz, NULL)); /* symstore's casing */
  CHECK(module_parse_code_id("cb649951a000", &ts2, &sz2, NULL));
  CHECK(ts == ts2 && sz == sz2 && ts == 0xCB649951u && sz == 0xa000);
  CHECK(module_parse_code_id("CB649951A000", &ts2, &sz2, NULL) && ts == ts2 && sz == sz2);
  CHECK(!module_parse_code_id("CB649951\xc3\xa9", &ts, &sz, NULL));
}

int main(void) {
  RUN(debug_id_forms_agree);
  RUN(debug_id_rejects);
  RUN(file_names);
  RUN(code_ids_and_keys);
  RUN(debug_id_every_form);
  RUN(debug_id_without_age);
  RUN(debug_id_messages);
  RUN(code_ids_any_case);
  return test_summary();
}
