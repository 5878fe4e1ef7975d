/*
 * test_metadata.c - ECMA-335 compressed integers (II.23.2, with the spec's own
 * examples), the metadata root's validation, and the EnC refusal.
 */
#include "metadata.h"
#include "test.h"

static uint32_t cu(const uint8_t *b, size_t n, bool *ok) {
  ps_reader r;
  rd_init(&r, b, n);
  uint32_t v = md_read_cu32(&r, "test");
  *ok = rd_ok(&r) && rd_left(&r) == 0;
  return v;
}

/* the signed value's bits, so the checks compare 32-bit patterns */
static uint32_t ci(const uint8_t *b, size_t n, bool *ok) {
  ps_reader r;
  rd_init(&r, b, n);
  int32_t v = md_read_ci32(&r, "test");
  *ok = rd_ok(&r) && rd_left(&r) == 0;
  return (uint32_t)v;
}

TEST(compressed_unsigned) {
  /* ECMA-335 II.23.2 examples */
  bool ok;
  CHECK_EQ_U(cu((const uint8_t[]){0x03}, 1, &ok), 0x03); CHECK(ok);
  CHECK_EQ_U(cu((const uint8_t[]){0x7F}, 1, &ok), 0x7F); CHECK(ok);
  CHECK_EQ_U(cu((const uint8_t[]){0x80, 0x80}, 2, &ok), 0x80); CHECK(ok);
  CHECK_EQ_U(cu((const uint8_t[]){0xAE, 0x57}, 2, &ok), 0x2E57); CHECK(ok);
  CHECK_EQ_U(cu((const uint8_t[]){0xBF, 0xFF}, 2, &ok), 0x3FFF); CHECK(ok);
  CHECK_EQ_U(cu((const uint8_t[]){0xC0, 0x00, 0x40, 0x00}, 4, &ok), 0x4000); CHECK(ok);
  CHECK_EQ_U(cu((const uint8_t[]){0xDF, 0xFF, 0xFF, 0xFF}, 4, &ok), 0x1FFFFFFF); CHECK(ok);
  cu((const uint8_t[]){0xE0, 0, 0, 0}, 4, &ok);
  CHECK(!ok); /* no 5-byte form */
  cu((const uint8_t[]){0xC0, 0}, 2, &ok);
  CHECK(!ok); /* truncated */
}

TEST(compressed_signed) {
  /* ECMA-335 II.23.2 signed examples */
  bool ok;
  CHECK_EQ_U(ci((const uint8_t[]){0x06}, 1, &ok), 3); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0x7B}, 1, &ok), (uint32_t)-3); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0x80, 0x80}, 2, &ok), 64); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0x01}, 1, &ok), (uint32_t)-64); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0xC0, 0x00, 0x40, 0x00}, 4, &ok), 8192); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0x80, 0x01}, 2, &ok), (uint32_t)-8192); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0xDF, 0xFF, 0xFF, 0xFE}, 4, &ok), 268435455); CHECK(ok);
  CHECK_EQ_U(ci((const uint8_t[]){0xC0, 0x00, 0x00, 0x01}, 4, &ok), (uint32_t)-268435456);
  CHECK(ok);
}

TEST(root_validation) {
  md_meta m;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK(!md_is_metadata((const uint8_t *)"BSJ", 3));
  CHECK_EQ_U(md_open(&m, (const uint8_t *)"XSJB\1\0\1\0", 8, 0, &d), PS_E_CORRUPT);
  CHECK(d.detail[0] != 0);
  ps_diag_clear(&d);
  CHECK_EQ_U(md_open(&m, (const uint8_t *)"BSJB\1\0\1\0", 8, 0, &d), PS_E_TRUNCATED);
  /* a root whose one stream lies past the end */
  uint8_t root[] = {'B', 'S', 'J', 'B', 1, 0, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 'v', '1', 0, 0,
                    0, 0, 1, 0, 0x40, 0, 0, 0, 0x10, 0, 0, 0, '#', '~', 0, 0};
  ps_diag_clear(&d);
  CHECK_EQ_U(md_open(&m, root, sizeof root, 0, &d), PS_E_CORRUPT);
  CHECK(strstr(d.detail, "outside") != NULL);
  /* the same stream named #- (an EnC delta's uncompressed tables), in bounds */
  root[24] = 0;
  root[28] = 4;
  root[33] = '-';
  ps_diag_clear(&d);
  CHECK_EQ_U(md_open(&m, root, sizeof root, 0, &d), PS_E_UNSUPPORTED);
  CHECK(strstr(d.detail, "Edit-and-Continue") != NULL);
}

int main(void) {
  RUN(compressed_unsigned);
  RUN(compressed_signed);
  RUN(root_validation);
  return test_summary();
}
