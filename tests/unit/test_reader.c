/* Unit tests for parsers/reader.c and parsers/error.c: bounds, sticky errors,
 * overflow edges and allocation caps. */
#include <stdint.h>

#include "error.h"
#include "reader.h"
#include "test.h"

TEST(reads_little_endian) {
  const uint8_t b[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0xff, 0xff, 0xff, 0xff};
  ps_reader r;
  rd_init(&r, b, sizeof b);
  CHECK_EQ_U(rd_u8(&r, "a"), 0x01);
  CHECK_EQ_U(rd_u16(&r, "b"), 0x0302);
  CHECK_EQ_U(rd_u32(&r, "c"), 0x07060504);
  rd_seek(&r, 1, "seek");
  CHECK_EQ_U(rd_u64(&r, "d"), 0x0908070605040302ull);
  CHECK(rd_i32(&r, "e") == -1);
  CHECK(rd_ok(&r));
  CHECK_EQ_U(rd_left(&r), 0);
}

TEST(sticky_error_on_overrun) {
  const uint8_t b[] = {1, 2, 3};
  ps_reader r;
  rd_init(&r, b, sizeof b);
  CHECK_EQ_U(rd_u16(&r, "first"), 0x0201);
  CHECK_EQ_U(rd_u32(&r, "header"), 0); /* only one byte left */
  CHECK(!rd_ok(&r));
  CHECK_EQ_U(r.err, PS_E_TRUNCATED);
  CHECK_EQ_S(r.what, "header");
  CHECK_EQ_U(r.err_off, 2);
  /* later reads stay failed and keep the first diagnosis */
  CHECK_EQ_U(rd_u8(&r, "later"), 0);
  CHECK_EQ_S(r.what, "header");
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(rd_to_diag(&r, &d), PS_E_TRUNCATED);
  char buf[256];
  CHECK_EQ_S(ps_diag_format(&d, buf, sizeof buf), "truncated input: header (at offset 0x2)");
}

TEST(sub_readers_bounds) {
  uint8_t b[16] = {0};
  b[10] = 0xaa;
  ps_reader r;
  rd_init(&r, b, sizeof b);
  ps_reader s = rd_sub(&r, 10, 4, "sub");
  CHECK(rd_ok(&s));
  CHECK_EQ_U(rd_u8(&s, "x"), 0xaa);
  CHECK_EQ_U(s.origin, 10);
  rd_skip(&s, 3, "rest");
  rd_u8(&s, "past");
  CHECK_EQ_U(s.err_off, 14); /* absolute offset in the outer input */
  /* a range that overflows size_t */
  ps_reader t = rd_sub(&r, 8, SIZE_MAX, "huge");
  CHECK(!rd_ok(&t));
  CHECK(!rd_ok(&r));
  CHECK_EQ_S(r.what, "huge");
  ps_reader r2;
  rd_init(&r2, b, sizeof b);
  ps_reader u = rd_sub(&r2, SIZE_MAX, 1, "far");
  CHECK(!rd_ok(&u));
  CHECK_EQ_U(u.len, 0);
}

TEST(cstr_and_align) {
  const uint8_t b[] = {'a', 'b', 0, 'c', 0x11, 0x22, 0x33, 0x44, 'x', 'y'};
  ps_reader r;
  rd_init(&r, b, sizeof b);
  size_t n = 99;
  const char *s = rd_cstr(&r, &n, "name");
  CHECK_EQ_S(s, "ab");
  CHECK_EQ_U(n, 2);
  CHECK_EQ_U(rd_tell(&r), 3);
  rd_align(&r, 4, "pad");
  CHECK_EQ_U(rd_tell(&r), 4);
  CHECK_EQ_U(rd_u32(&r, "v"), 0x44332211);
  /* unterminated string fails rather than running off the end */
  CHECK(rd_cstr(&r, &n, "unterminated") == NULL);
  CHECK(!rd_ok(&r));
  CHECK_EQ_U(r.err, PS_E_TRUNCATED);
}

TEST(ptr_and_copy) {
  const uint8_t b[] = {1, 2, 3, 4};
  ps_reader r;
  rd_init(&r, b, sizeof b);
  const uint8_t *p = rd_ptr(&r, 3, "three");
  CHECK(p == b);
  uint8_t out[4] = {9, 9, 9, 9};
  CHECK(!rd_copy(&r, out, 2, "two"));
  CHECK(out[0] == 0 && out[1] == 0);
  ps_reader e;
  rd_init(&e, NULL, 100); /* NULL data is an empty input */
  CHECK_EQ_U(e.len, 0);
  CHECK(rd_ptr(&e, 1, "x") == NULL);
  ps_reader z;
  rd_init(&z, b, 4);
  CHECK(!rd_seek(&z, 5, "seek past"));
  CHECK(!rd_ok(&z));
}

TEST(overflow_edges) {
  size_t out = 7;
  CHECK(ps_add_size(SIZE_MAX - 1, 1, &out) && out == SIZE_MAX);
  out = 7;
  CHECK(!ps_add_size(SIZE_MAX, 1, &out) && out == 7);
  CHECK(ps_mul_size(SIZE_MAX / 2, 2, &out));
  CHECK(!ps_mul_size(SIZE_MAX / 2 + 1, 2, &out));
  CHECK(ps_mul_size(0, SIZE_MAX, &out) && out == 0);
  CHECK(ps_range_ok(0, 0, 0));
  CHECK(ps_range_ok(4, 4, 8));
  CHECK(!ps_range_ok(5, 4, 8));
  CHECK(!ps_range_ok(9, 0, 8));
  CHECK(!ps_range_ok(1, SIZE_MAX, 8));
}

TEST(allocation_caps) {
  ps_budget b;
  ps_budget_init(&b, 1000);
  ps_err e = PS_E_OK;
  void *p = ps_alloc_array(&b, 100, 8, &e);
  CHECK(p != NULL);
  CHECK_EQ_U(b.used, 800);
  void *q = ps_alloc_array(&b, 26, 8, &e); /* 208 > 200 left */
  CHECK(q == NULL);
  CHECK_EQ_U(e, PS_E_LIMIT);
  e = PS_E_OK;
  CHECK(ps_alloc_array(&b, SIZE_MAX / 4, 8, &e) == NULL);
  CHECK_EQ_U(e, PS_E_OVERFLOW);
  /* a hostile count of 2^31 elements is refused before calloc is called */
  e = PS_E_OK;
  CHECK(ps_alloc_array(&b, (size_t)1 << 31, 16, &e) == NULL);
  CHECK_EQ_U(e, PS_E_LIMIT);
  p = ps_realloc_array(&b, p, 100, 120, 8, &e);
  CHECK(p != NULL);
  CHECK_EQ_U(b.used, 960);
  ((uint8_t *)p)[119 * 8] = 1; /* the new elements are ours to write */
  e = PS_E_OK;
  CHECK(ps_realloc_array(&b, p, 120, 200, 8, &e) == NULL);
  CHECK_EQ_U(e, PS_E_LIMIT);
  free(p);
  ps_budget_release(&b, 960);
  CHECK_EQ_U(b.used, 0);
  /* no budget means no cap beyond the overflow check */
  e = PS_E_OK;
  void *r = ps_alloc_array(NULL, 0, 8, &e);
  CHECK(r != NULL);
  free(r);
}

TEST(error_messages) {
  for (int i = 0; i < PS_E__COUNT; i++)
    CHECK(ps_strerror((ps_err)i)[0] != '\0');
  CHECK_EQ_S(ps_strerror((ps_err)999), "unknown error");
  ps_diag d;
  ps_diag_clear(&d);
  ps_diag_set(&d, PS_E_CORRUPT, "DBI header", 0x40, "stream shorter than %d bytes", 64);
  ps_diag_set(&d, PS_E_LIMIT, "later", 0, "ignored"); /* first wins */
  char buf[256];
  CHECK_EQ_S(ps_diag_format(&d, buf, sizeof buf),
             "corrupt input: DBI header: stream shorter than 64 bytes (at offset 0x40)");
  char tiny[8];
  ps_diag_format(&d, tiny, sizeof tiny);
  CHECK(strlen(tiny) == 7);
}

int main(void) {
  RUN(reads_little_endian);
  RUN(sticky_error_on_overrun);
  RUN(sub_readers_bounds);
  RUN(cstr_and_align);
  RUN(ptr_and_copy);
  RUN(overflow_edges);
  RUN(allocation_caps);
  RUN(error_messages);
  return test_summary();
}
