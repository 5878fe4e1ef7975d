/* Unit tests for server/service/jarena.c: jansson's allocations in a
 * per-request arena, its cap, and values made outside any arena. */
#include <pthread.h>
#include <stdlib.h>

#include <jansson.h>

#include "jarena.h"
#include "test.h"

/* A body of n frames as the API takes them. */
static char *body(size_t n, size_t *len) {
  size_t cap = 64 + n * 48;
  char *b = malloc(cap);
  size_t o = (size_t)snprintf(b, cap, "{\"frames\": [");
  for (size_t i = 0; i < n; i++)
    o += (size_t)snprintf(b + o, cap - o, "%s{\"module\": %zu, \"rva\": \"0x%zx\"}", i ? ", " : "",
                          i % 7, 0x1000 + i * 3);
  o += (size_t)snprintf(b + o, cap - o, "]}");
  *len = o;
  return b;
}

TEST(a_tree_in_the_arena) {
  json_t *before = json_pack("{s:i}", "made", 1); /* outside any arena: malloc */
  size_t len;
  char *b = body(5000, &len);
  jarena ja;
  jarena_begin(&ja, 0);
  json_error_t e;
  json_t *root = json_loadb(b, len, JSON_REJECT_DUPLICATES, &e);
  CHECK(root != NULL);
  CHECK(!jarena_failed(&ja));
  CHECK_EQ_U(json_array_size(json_object_get(root, "frames")), 5000);
  CHECK_EQ_S(json_string_value(json_object_get(json_array_get(json_object_get(root, "frames"), 4999),
                                               "rva")),
             "0x4a95"); /* 0x1000 + 4999 * 3 */
  CHECK(ja.reserved > len); /* the tree is in the arena's chunks */
  /* a value made before the arena is freed by free() while it is open */
  json_decref(before);
  json_decref(root); /* allowed, not needed: frees in the arena are nothing */
  jarena_end(&ja);
  CHECK_EQ_U(ja.reserved, 0);
  /* and after it, jansson is back on malloc */
  json_t *after = json_loads("[1, 2, {\"a\": \"b\"}]", 0, &e);
  CHECK(after && json_array_size(after) == 3);
  json_decref(after);
  free(b);
}

TEST(the_cap_fails_the_parse) {
  size_t len;
  char *b = body(20000, &len);
  jarena ja;
  jarena_begin(&ja, 256 << 10); /* far less than the tree needs */
  json_error_t e;
  json_t *root = json_loadb(b, len, 0, &e);
  CHECK(root == NULL);
  CHECK(jarena_failed(&ja));
  CHECK(ja.reserved <= ja.cap);
  jarena_end(&ja);
  /* the same body parses without a cap */
  jarena_begin(&ja, 0);
  root = json_loadb(b, len, 0, &e);
  CHECK(root != NULL && !jarena_failed(&ja));
  jarena_end(&ja);
  free(b);
}

static void *parse_loop(void *arg) {
  size_t n = (size_t)(uintptr_t)arg, len;
  char *b = body(n, &len);
  int bad = 0;
  for (int r = 0; r < 200; r++) {
    jarena ja;
    jarena_begin(&ja, len * 64 + (1u << 20));
    json_error_t e;
    json_t *root = json_loadb(b, len, 0, &e);
    if (!root || json_array_size(json_object_get(root, "frames")) != n)
      bad++;
    jarena_end(&ja);
  }
  free(b);
  return (void *)(uintptr_t)bad;
}

TEST(threads_have_their_own_arenas) {
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, parse_loop, (void *)(100 + i * 37));
  /* this thread meanwhile uses jansson with no arena */
  for (int r = 0; r < 2000; r++) {
    json_t *v = json_pack("{s:[i,i,s]}", "k", r, r * 2, "text");
    char *s = json_dumps(v, JSON_COMPACT);
    CHECK(s != NULL);
    free(s);
    json_decref(v);
  }
  uintptr_t bad = 0;
  for (int i = 0; i < 4; i++) {
    void *rv;
    pthread_join(t[i], &rv);
    bad += (uintptr_t)rv;
  }
  CHECK_EQ_U(bad, 0);
}

int main(void) {
  RUN(a_tree_in_the_arena);
  RUN(the_cap_fails_the_parse);
  RUN(threads_have_their_own_arenas);
  return test_summary();
}
