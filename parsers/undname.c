/* undname.c - placeholder: copies the name through until the undecorator lands. */
#include "undname.h"

#include <string.h>

static bool copy_through(const char *mangled, size_t len, char *out, size_t cap) {
  if (!cap)
    return false;
  size_t n = len < cap - 1 ? len : cap - 1;
  memcpy(out, mangled, n);
  out[n] = '\0';
  return false;
}

bool undname_short(const char *mangled, size_t len, char *out, size_t cap) {
  return copy_through(mangled, len, out, cap);
}

bool undname_full(const char *mangled, size_t len, char *out, size_t cap) {
  return copy_through(mangled, len, out, cap);
}
