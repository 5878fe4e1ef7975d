#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const ps_messages[PS_E__COUNT] = {
#define PS_ERR_MSG(name, msg) msg,
  PS_ERRORS(PS_ERR_MSG)
#undef PS_ERR_MSG
};

const char *ps_strerror(ps_err code) {
  if ((unsigned)code >= (unsigned)PS_E__COUNT)
    return "unknown error";
  return ps_messages[code];
}

void ps_diag_clear(ps_diag *d) {
  if (!d)
    return;
  d->code = PS_E_OK;
  d->where = NULL;
  d->offset = (size_t)-1;
  d->detail[0] = '\0';
}

ps_err ps_diag_set(ps_diag *d, ps_err code, const char *where, size_t offset,
                   const char *fmt, ...) {
  if (!d || d->code != PS_E_OK)
    return code;
  d->code = code;
  d->where = where;
  d->offset = offset;
  d->detail[0] = '\0';
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->detail, sizeof d->detail, fmt, ap);
    va_end(ap);
  }
  return code;
}

const char *ps_diag_format(const ps_diag *d, char *buf, size_t cap) {
  if (!buf || cap == 0)
    return "";
  if (!d || d->code == PS_E_OK) {
    snprintf(buf, cap, "ok");
    return buf;
  }
  int n = snprintf(buf, cap, "%s", ps_strerror(d->code));
  size_t used = n < 0 ? 0 : (size_t)n;
  if (d->where && used < cap) {
    n = snprintf(buf + used, cap - used, ": %s", d->where);
    used += n < 0 ? 0 : (size_t)n;
  }
  if (d->detail[0] && used < cap) {
    n = snprintf(buf + used, cap - used, ": %s", d->detail);
    used += n < 0 ? 0 : (size_t)n;
  }
  if (d->offset != (size_t)-1 && used < cap)
    snprintf(buf + used, cap - used, " (at offset 0x%zx)", d->offset);
  return buf;
}
