/* Unit tests for server/common/module.c: the contract's module naming rules. */
#include "module.h"
#include "test.h"

TEST(debug_id_forms_agree) {
  uint8_t g1[16], g2[16], g3[16];
  uint32_t a1 = 0, a2 = 0, a3 = 0;
  const char *why = NULL;
  /* the two spellings CONTRACT.md gives for one module */
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

int main(void) {
  RUN(debug_id_forms_agree);
  RUN(debug_id_rejects);
  RUN(file_names);
  RUN(code_ids_and_keys);
  return test_summary();
}
