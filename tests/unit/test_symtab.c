/* Unit tests for parsers/symtab.c: building, sorting and the lookup rules
 * (inline chains, public fallback, hidden sequence points). */
#include "symtab.h"
#include "test.h"

TEST(strings_dedup) {
  symtab st;
  st_init(&st, NULL);
  uint32_t a = st_cstr(&st, "main");
  uint32_t b = st_str(&st, "mainx", 4);
  CHECK_EQ_U(a, b);
  CHECK_EQ_U(st_cstr(&st, ""), 0);
  for (int i = 0; i < 5000; i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "f%d", i);
    st_cstr(&st, buf);
  }
  CHECK_EQ_S(st_s(&st, a), "main");
  CHECK_EQ_U(st_cstr(&st, "f4999"), st_cstr(&st, "f4999"));
  CHECK_EQ_S(st_s(&st, 0xffffffffu), "");
  st_free(&st);
}

TEST(native_lookup_with_inlines) {
  symtab st;
  st_init(&st, NULL);
  uint32_t file = st_cstr(&st, "C:\\src\\geometry.c");
  st_add_func(&st, 0x2000, 0x40, st_cstr(&st, "other"), 0);
  st_add_func(&st, 0x1000, 0x100, st_cstr(&st, "nearest"), 0);
  st_add_line(&st, 0x1000, 0, 15, file);
  st_add_line(&st, 0x1010, 0, 17, file);
  st_add_line(&st, 0x1080, 0, 20, file);
  uint32_t i1 = st_add_inline(&st, 0x1000, ST_NONE, 1, st_cstr(&st, "dist2"));
  uint32_t i2 = st_add_inline(&st, 0x1000, i1, 2, st_cstr(&st, "sq"));
  st_add_irange(&st, i1, 0x1010, 0x20, 10, file);
  st_add_irange(&st, i2, 0x1018, 0x4, 3, file);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);

  st_answer a;
  st_lookup_rva(&st, 0x1019, &a);
  CHECK_EQ_U(a.status, ST_OK);
  CHECK_EQ_U(a.nsyms, 3);
  CHECK_EQ_S(a.syms[0].function, "sq");
  CHECK(a.syms[0].inlined && a.syms[0].line == 3);
  CHECK_EQ_S(a.syms[1].function, "dist2");
  CHECK(a.syms[1].inlined && a.syms[1].line == 10);
  CHECK_EQ_S(a.syms[2].function, "nearest");
  CHECK(!a.syms[2].inlined && a.syms[2].line == 17);
  CHECK(a.syms[2].has_offset && a.syms[2].function_offset == 0x19);
  CHECK_EQ_S(a.syms[2].file, "C:\\src\\geometry.c");

  st_lookup_rva(&st, 0x1090, &a);
  CHECK_EQ_U(a.nsyms, 1);
  CHECK_EQ_U(a.syms[0].line, 20);
  /* the last line of a function ends with the function */
  st_lookup_rva(&st, 0x10ff, &a);
  CHECK_EQ_U(a.syms[0].line, 20);
  st_lookup_rva(&st, 0x1100, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  st_lookup_rva(&st, 0x2010, &a);
  CHECK_EQ_S(a.syms[0].function, "other");
  CHECK(!a.syms[0].has_line);
  st_free(&st);
}

TEST(public_fallback) {
  symtab st;
  st_init(&st, NULL);
  st_add_public(&st, 0x3000, st_cstr(&st, "foo"), st_cstr(&st, "?foo@@YAXH@Z"));
  st_add_public(&st, 0x3100, st_cstr(&st, "bar"), st_cstr(&st, "?bar@@YAXXZ"));
  st_add_func(&st, 0x3200, 0x10, st_cstr(&st, "known"), 0);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  st_answer a;
  st_lookup_rva(&st, 0x3042, &a);
  CHECK_EQ_U(a.status, ST_OK);
  CHECK_EQ_S(a.syms[0].function, "foo");
  CHECK_EQ_S(a.syms[0].mangled, "?foo@@YAXH@Z");
  CHECK_EQ_U(a.syms[0].function_offset, 0x42);
  st_lookup_rva(&st, 0x2fff, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  /* past a known function that follows the public: not the public's */
  st_lookup_rva(&st, 0x3300, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  st_free(&st);
}

TEST(public_bounds_and_lines) {
  symtab st;
  st_init(&st, NULL);
  uint32_t asmf = st_cstr(&st, "x.asm");
  /* a public in a section ending at 0x4100, lines and no procedure record */
  st_add_public_bounded(&st, 0x4000, 0x100, st_cstr(&st, "memcpy"), st_cstr(&st, "_memcpy"));
  st_add_line(&st, 0x4000, 0x10, 5, asmf);
  st_add_line(&st, 0x4010, 0x10, ST_HIDDEN_LINE, asmf);
  st_add_line(&st, 0x4020, 0x10, ST_NOSTEP_LINE, asmf);
  st_add_line(&st, 0x4030, 0x10, 9, asmf);
  /* two publics, a procedure between them */
  st_add_public_bounded(&st, 0x5000, 0x1000, st_cstr(&st, "a"), st_cstr(&st, "_a"));
  st_add_func(&st, 0x5080, 0x20, st_cstr(&st, "proc"), 0);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  st_answer a;
  st_lookup_rva(&st, 0x4005, &a);
  CHECK(a.status == ST_OK && a.syms[0].line == 5 && !a.syms[0].hidden);
  CHECK_EQ_S(a.syms[0].file, "x.asm");
  CHECK_EQ_S(a.syms[0].mangled, "_memcpy");
  /* 0xFEEFEE: the nearest visible line below, flagged */
  st_lookup_rva(&st, 0x4012, &a);
  CHECK(a.status == ST_OK && a.syms[0].hidden && a.syms[0].has_line && a.syms[0].line == 5);
  /* 0xF00F00: flagged, no line (not the line before) */
  st_lookup_rva(&st, 0x4022, &a);
  CHECK(a.status == ST_OK && a.syms[0].hidden && !a.syms[0].has_line);
  st_lookup_rva(&st, 0x40ff, &a);
  CHECK_EQ_U(a.status, ST_OK);
  /* the end of the section bounds the public */
  st_lookup_rva(&st, 0x4100, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  st_lookup_rva(&st, 0x7fffffff, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  /* the next procedure bounds it; past the procedure's end, nothing */
  st_lookup_rva(&st, 0x507f, &a);
  CHECK(a.status == ST_OK && strcmp(a.syms[0].function, "a") == 0);
  st_lookup_rva(&st, 0x5090, &a);
  CHECK_EQ_S(a.syms[0].function, "proc");
  st_lookup_rva(&st, 0x50a0, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  st_free(&st);
}

TEST(native_hidden_lines) {
  symtab st;
  st_init(&st, NULL);
  uint32_t f = st_cstr(&st, "f.c"), g = st_cstr(&st, "g.h");
  st_add_func(&st, 0x1000, 0x40, st_cstr(&st, "f"), 0);
  st_add_line(&st, 0x1000, 0x10, ST_HIDDEN_LINE, f); /* nothing below: the one above */
  st_add_line(&st, 0x1010, 0x10, 7, g);
  st_add_line(&st, 0x1020, 0x20, ST_HIDDEN_LINE, f);
  st_add_func(&st, 0x2000, 0x10, st_cstr(&st, "h"), 0);
  st_add_line(&st, 0x2000, 0x10, ST_HIDDEN_LINE, f); /* none visible in h */
  st_add_func(&st, 0x3000, 0x10, st_cstr(&st, "k"), 0);
  st_add_line(&st, 0x3000, 0x10, 3, f);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  st_answer a;
  st_lookup_rva(&st, 0x1004, &a);
  CHECK(a.syms[0].hidden && a.syms[0].line == 7);
  CHECK_EQ_S(a.syms[0].file, "g.h");
  st_lookup_rva(&st, 0x1030, &a);
  CHECK(a.syms[0].hidden && a.syms[0].line == 7);
  st_lookup_rva(&st, 0x1014, &a);
  CHECK(!a.syms[0].hidden && a.syms[0].line == 7);
  /* never another function's line, never 16707566 */
  st_lookup_rva(&st, 0x2004, &a);
  CHECK(a.syms[0].hidden && !a.syms[0].has_line);
  st_free(&st);
}

TEST(managed_hidden_points) {
  symtab st;
  st_init(&st, NULL);
  uint32_t doc = st_cstr(&st, "/_/Demo.cs");
  st_seqpt pts[] = {
      {0x06000002, 0, ST_HIDDEN_LINE, ST_HIDDEN_LINE, 0, 0, doc},
      {0x06000002, 7, 12, 12, 9, 30, doc},
      {0x06000002, 20, ST_HIDDEN_LINE, ST_HIDDEN_LINE, 0, 0, doc},
      {0x06000002, 30, 14, 14, 5, 6, doc},
      {0x06000003, 0, ST_HIDDEN_LINE, ST_HIDDEN_LINE, 0, 0, doc},
  };
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
    st_add_seqpt(&st, &pts[i]);
  st_add_method(&st, 0x06000002, st_cstr(&st, "Demo.Widget+<Run>d__1.MoveNext"), 0x06000001);
  st_add_method(&st, 0x06000001, st_cstr(&st, "Demo.Widget.Run"), 0);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  st_answer a;
  st_lookup_token(&st, 0x06000002, 8, &a);
  CHECK_EQ_U(a.status, ST_OK);
  CHECK(!a.syms[0].hidden && a.syms[0].line == 12 && a.syms[0].column == 9);
  CHECK_EQ_S(a.syms[0].async_method, "Demo.Widget.Run");
  /* hidden: nearest visible at a lower offset */
  st_lookup_token(&st, 0x06000002, 25, &a);
  CHECK(a.syms[0].hidden && a.syms[0].line == 12);
  /* hidden with nothing visible below: nearest above */
  st_lookup_token(&st, 0x06000002, 3, &a);
  CHECK(a.syms[0].hidden && a.syms[0].line == 7 - 7 + 12);
  /* hidden with nothing visible at all: no line */
  st_lookup_token(&st, 0x06000003, 0, &a);
  CHECK(a.syms[0].hidden && !a.syms[0].has_line);
  CHECK_EQ_S(a.syms[0].function, "0x06000003");
  st_lookup_token(&st, 0x06000009, 0, &a);
  CHECK_EQ_U(a.status, ST_UNKNOWN_ADDRESS);
  st_free(&st);
}

TEST(budget_limits_builder) {
  ps_budget b;
  ps_budget_init(&b, 64 * 1024);
  symtab st;
  st_init(&st, &b);
  bool ok = true;
  for (uint32_t i = 0; i < 100000 && ok; i++)
    ok = st_add_line(&st, i, 1, i, 0);
  CHECK(!ok);
  CHECK_EQ_U(st.err, PS_E_LIMIT);
  CHECK_EQ_U(st_finish(&st), PS_E_LIMIT);
  st_free(&st);
}

/* st_copy: the copy answers every address and token as the original does,
 * and what is added to the copy (the image's names) leaves the original as
 * it was: the cache's tables are shared by readers. */
static void same_answer(const st_answer *a, const st_answer *b) {
  CHECK_EQ_U(a->status, b->status);
  CHECK_EQ_U(a->nsyms, b->nsyms);
  for (int i = 0; i < a->nsyms && i < b->nsyms; i++) {
    CHECK_EQ_S(a->syms[i].function, b->syms[i].function);
    CHECK_EQ_U(a->syms[i].line, b->syms[i].line);
    CHECK_EQ_U(a->syms[i].function_offset, b->syms[i].function_offset);
    CHECK_EQ_S(a->syms[i].file ? a->syms[i].file : "", b->syms[i].file ? b->syms[i].file : "");
  }
}

TEST(copy_answers_as_the_original) {
  symtab st, cp;
  st_init(&st, NULL);
  CHECK_EQ_U(st_copy(&st, NULL, &cp), PS_E_INVALID); /* not finished */
  st_free(&cp);
  uint32_t file = st_cstr(&st, "C:\\src\\geometry.c");
  st_add_func(&st, 0x1000, 0x100, st_cstr(&st, "nearest"), 0);
  st_add_func(&st, 0x2000, 0x40, st_cstr(&st, "other"), 0);
  st_add_line(&st, 0x1000, 0, 15, file);
  st_add_line(&st, 0x1010, 0, 17, file);
  st_add_line(&st, 0x2000, 0, 30, file);
  uint32_t i1 = st_add_inline(&st, 0x1000, ST_NONE, 1, st_cstr(&st, "dist2"));
  st_add_irange(&st, i1, 0x1010, 0x20, 10, file);
  st_add_public(&st, 0x3000, st_cstr(&st, "memcpy"), st_cstr(&st, "_memcpy"));
  uint32_t doc = st_cstr(&st, "/_/Demo.cs");
  st_seqpt sp = {0x06000002, 0, 12, 12, 9, 30, doc};
  st_add_seqpt(&st, &sp);
  st_add_method(&st, 0x06000002, st_cstr(&st, "Run"), 0);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);

  ps_budget b;
  ps_budget_init(&b, 1 << 20);
  CHECK_EQ_U(st_copy(&st, &b, &cp), PS_E_OK);
  CHECK(cp.finished);
  st_answer a, c;
  for (uint32_t rva = 0xff0; rva < 0x3010; rva += 3) {
    st_lookup_rva(&st, rva, &a);
    st_lookup_rva(&cp, rva, &c);
    same_answer(&a, &c);
  }
  st_lookup_token(&st, 0x06000002, 0, &a);
  st_lookup_token(&cp, 0x06000002, 0, &c);
  same_answer(&a, &c);

  /* a name changed and a method added in the copy only */
  cp.methods[0].name = st_cstr(&cp, "Demo.Widget.Run");
  CHECK(st_add_method(&cp, 0x06000003, st_cstr(&cp, "Demo.Widget.Stop"), 0));
  CHECK_EQ_U(st_finish(&cp), PS_E_OK);
  st_lookup_token(&cp, 0x06000002, 0, &c);
  CHECK_EQ_S(c.syms[0].function, "Demo.Widget.Run");
  st_lookup_token(&st, 0x06000002, 0, &a);
  CHECK_EQ_S(a.syms[0].function, "Run");
  CHECK_EQ_U(st.nmethods, 1);
  CHECK_EQ_U(cp.nmethods, 2);
  st_free(&cp);

  /* a budget too small: refused, nothing left allocated */
  ps_budget_init(&b, 64);
  CHECK(st_copy(&st, &b, &cp) != PS_E_OK);
  CHECK(cp.strs == NULL && cp.funcs == NULL);
  st_free(&st);
}

/* A finished table whose records were damaged after st_finish (as a table
 * mapped from the cache may be before its background check): every lookup
 * stays inside the arrays (ASan and UBSan builds check it) and still answers
 * what the undamaged parts say. */
TEST(damaged_records_stay_in_bounds) {
  symtab st;
  st_init(&st, NULL);
  uint32_t file = st_cstr(&st, "a.c");
  st_add_func(&st, 0x1000, 0x100, st_cstr(&st, "f"), 0);
  st_add_func(&st, 0x2000, 0x100, st_cstr(&st, "g"), 0);
  for (uint32_t i = 0; i < 200; i++)
    st_add_line(&st, 0x1000 + i * 8, 8, 10 + i, file);
  uint32_t in = st_add_inline(&st, 0x1000, ST_NONE, 1, st_cstr(&st, "h"));
  st_add_irange(&st, in, 0x1010, 0x20, 5, file);
  st_add_method(&st, 0x06000001, st_cstr(&st, "M"), 0);
  st_seqpt p = {0x06000001, 0, 3, 3, 1, 2, file};
  st_add_seqpt(&st, &p);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  st_answer a;
  st_lookup_rva(&st, 0x1014, &a);
  CHECK_EQ_U(a.nsyms, 2); /* h inlined in f */
  /* the damage: ranges past the array, a site past the sites, points past
   * the points, an index longer than its array */
  st.funcs[0].ir_first = 0xfffffff0u;
  st.funcs[0].ir_count = 0x20;
  st_lookup_rva(&st, 0x1014, &a);
  CHECK_EQ_U(a.status, ST_OK);
  CHECK_EQ_U(a.nsyms, 1);
  CHECK_EQ_S(a.syms[0].function, "f");
  st.funcs[0].ir_first = 0;
  st.funcs[0].ir_count = 1;
  st.iranges[0].inl = 0x7fffffffu;
  st_lookup_rva(&st, 0x1014, &a);
  CHECK_EQ_U(a.nsyms, 1);
  st.methods[0].sp_first = 0xffffffffu;
  st_lookup_token(&st, 0x06000001, 0, &a);
  CHECK_EQ_U(a.status, ST_OK);
  CHECK(!a.syms[0].has_line);
  /* sampled keys and per-function line bounds that are garbage */
  for (size_t i = 0; i < st.nline_idx; i++)
    st.line_idx[i] = (uint32_t)(0xffffffffu - i * 977);
  for (size_t i = 0; i < 2 * st.nfunc_lines; i++)
    st.func_lines[i] = (uint32_t)(i % 2 ? 3 : 0xfffffff0u);
  for (uint32_t r = 0x0f00; r < 0x2200; r += 3)
    st_lookup_rva(&st, r, &a);
  uint32_t *fl = st.func_lines;
  st.func_lines = NULL; /* the plain search through the sampled index */
  for (uint32_t r = 0x0f00; r < 0x2200; r += 3)
    st_lookup_rva(&st, r, &a);
  st.func_lines = fl;
  st.iranges[0].inl = 0; /* back as it was, so st_free sees its own arrays */
  st_free(&st);
}

int main(void) {
  RUN(strings_dedup);
  RUN(native_lookup_with_inlines);
  RUN(public_fallback);
  RUN(public_bounds_and_lines);
  RUN(native_hidden_lines);
  RUN(managed_hidden_points);
  RUN(budget_limits_builder);
  RUN(copy_answers_as_the_original);
  RUN(damaged_records_stay_in_bounds);
  return test_summary();
}
