/* Unit tests for server/service/render.c: the contract's JSON shape of answers,
 * Source Link resolution, and names that are not valid UTF-8. */
#include <stdlib.h>

#include <jansson.h>

#include "render.h"
#include "symtab.h"
#include "test.h"

/* render.h's JSON text, read back to check its fields. */
static json_t *parsed(char *text) {
  json_t *o = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  return o;
}

TEST(invalid_utf8_names_survive) {
  symtab st;
  st_init(&st, NULL);
  st_add_func(&st, 0x1000, 0x10, st_cstr(&st, "bad\xff" "name"), 0);
  st_add_line(&st, 0x1000, 0x10, 7, st_cstr(&st, "C:\\src\\caf\xc3\xa9.c"));
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  render_module rm;
  render_module_init(&rm, &st);
  st_answer a;
  st_lookup_rva(&st, 0x1004, &a);
  json_t *f = parsed(render_answer_json(&rm, &a, 3, false, 0x1004, 0));
  CHECK_EQ_S(json_string_value(json_object_get(f, "status")), "ok");
  CHECK_EQ_S(json_string_value(json_object_get(f, "rva")), "0x1004");
  CHECK_EQ_U(json_integer_value(json_object_get(f, "module")), 3);
  json_t *s0 = json_array_get(json_object_get(f, "symbols"), 0);
  CHECK_EQ_S(json_string_value(json_object_get(s0, "function")), "bad\xef\xbf\xbdname");
  CHECK_EQ_S(json_string_value(json_object_get(s0, "file")), "C:\\src\\caf\xc3\xa9.c");
  CHECK_EQ_U(json_integer_value(json_object_get(s0, "line")), 7);
  CHECK_EQ_S(json_string_value(json_object_get(s0, "function_offset")), "0x4");
  json_decref(f);
  render_module_free(&rm);
  st_free(&st);
}

TEST(source_link_and_managed_fields) {
  symtab st;
  st_init(&st, NULL);
  st.source_link = st_cstr(&st, "{\"documents\": {\"/_/*\": \"https://example.org/repo/abc/*\","
                                " \"/_/exact.cs\": \"https://example.org/exact\"}}");
  uint32_t doc = st_cstr(&st, "/_/src\\Demo.cs");
  st_seqpt p = {0x06000001, 0, 12, 13, 9, 30, doc};
  st_add_seqpt(&st, &p);
  st_add_method(&st, 0x06000001, st_cstr(&st, "Demo.Widget.Run"), 0);
  CHECK_EQ_U(st_finish(&st), PS_E_OK);
  render_module rm;
  render_module_init(&rm, &st);
  char url[256];
  CHECK(render_source_link(&rm, "/_/exact.cs", url, sizeof url));
  CHECK_EQ_S(url, "https://example.org/exact");
  CHECK(!render_source_link(&rm, "/elsewhere/x.cs", url, sizeof url));
  st_answer a;
  st_lookup_token(&st, 0x06000001, 4, &a);
  json_t *f = parsed(render_answer_json(&rm, &a, -1, true, 0x06000001, 4));
  CHECK(json_object_get(f, "module") == NULL);
  CHECK_EQ_S(json_string_value(json_object_get(f, "token")), "0x06000001");
  CHECK_EQ_U(json_integer_value(json_object_get(f, "il_offset")), 4);
  json_t *s0 = json_array_get(json_object_get(f, "symbols"), 0);
  CHECK_EQ_S(json_string_value(json_object_get(s0, "source_link")),
             "https://example.org/repo/abc/src/Demo.cs");
  CHECK_EQ_U(json_integer_value(json_object_get(s0, "column")), 9);
  CHECK_EQ_U(json_integer_value(json_object_get(s0, "end_line")), 13);
  CHECK(json_object_get(s0, "function_offset") == NULL);
  json_decref(f);
  st_lookup_token(&st, 0x06000009, 0, &a);
  f = parsed(render_answer_json(&rm, &a, 0, true, 0x06000009, 0));
  CHECK_EQ_S(json_string_value(json_object_get(f, "status")), "unknown_address");
  CHECK(json_string_value(json_object_get(f, "error")) != NULL);
  json_decref(f);
  render_module_free(&rm);
  st_free(&st);
}

int main(void) {
  RUN(invalid_utf8_names_survive);
  RUN(source_link_and_managed_fields);
  return test_summary();
}
