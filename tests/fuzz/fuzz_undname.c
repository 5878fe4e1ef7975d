/*
 * fuzz_undname.c - libFuzzer target for the Microsoft C++ name undecorator.
 * The input is the decorated name itself, not NUL-terminated; both entry
 * points (and undname_public) run with a roomy and with a tiny output buffer.
 */
#include "undname.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char out[8192];
  char tiny[9];
  const char *s = (const char *)data;
  undname_full(s, size, out, sizeof out);
  if (!memchr(out, '\0', sizeof out))
    abort();
  undname_short(s, size, out, sizeof out);
  if (!memchr(out, '\0', sizeof out))
    abort();
  undname_full(s, size, tiny, sizeof tiny);
  if (!memchr(tiny, '\0', sizeof tiny))
    abort();
  undname_short(s, size, tiny, sizeof tiny);
  if (!memchr(tiny, '\0', sizeof tiny))
    abort();
  undname_public(s, size, size % 2 == 0, out, sizeof out);
  if (!memchr(out, '\0', sizeof out))
    abort();
  undname_public(s, size, true, tiny, sizeof tiny);
  if (!memchr(tiny, '\0', sizeof tiny))
    abort();
  return 0;
}
