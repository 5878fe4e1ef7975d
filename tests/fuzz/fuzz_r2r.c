/*
 * fuzz_r2r.c - libFuzzer target for parsers/r2r.c (ReadyToRun headers,
 * native arrays, debug-info nibble streams and bit-packed bounds) and
 * parsers/il.c (method bodies and their call sites) on hostile images:
 * what a trace job reads from an image the trace names.  Every method
 * entry, every runtime function's map, every method's calls.  Every
 * failure must name its cause.  Seeds: tests/fuzz/corpus/r2r (the profile
 * fixture's ProfLib.dll, precompiled, and App.dll, IL only).
 */
#include <stdint.h>
#include <string.h>

#include "il.h"
#include "r2r.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static r2r_bound bounds[R2R_MAX_BOUNDS];
static il_call calls[IL_MAX_CALLS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static r2r_image r;
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = r2r_open(&r, data, size, &d);
  if (e != PS_E_OK && d.code != e)
    __builtin_trap();
  if (e == PS_E_OK) {
    for (uint32_t i = 0; i < r.rf_count && i < 2048; i++) {
      size_t n = 0;
      ps_diag_clear(&d);
      e = r2r_bounds(&r, i, bounds, R2R_MAX_BOUNDS, &n, &d);
      if ((e != PS_E_OK && e != PS_E_NOT_FOUND && d.code != e) || n > R2R_MAX_BOUNDS)
        __builtin_trap();
      uint32_t b, end, at;
      if (r2r_function(&r, i, &b, &end) && (end < b || !r2r_function_at(&r, b, &at)))
        __builtin_trap();
    }
    for (uint32_t rid = 0; rid < 256; rid++) {
      uint32_t idx;
      ps_diag_clear(&d);
      e = r2r_method_entry(&r, rid, &idx, &d);
      if ((e == PS_E_OK && idx >= r.rf_count) ||
          (e != PS_E_OK && e != PS_E_NOT_FOUND && d.code != e))
        __builtin_trap();
    }
  }
  static pe_layout pe;
  static md_meta m;
  ps_diag_clear(&d);
  if (pe_layout_open(&pe, data, size, &d) != PS_E_OK || il_open_metadata(&pe, &m, &d) != PS_E_OK)
    return 0;
  uint32_t rows = md_rows(&m, MD_METHODDEF);
  for (uint32_t rid = 1; rid <= rows && rid < 4096; rid++) {
    const uint8_t *code;
    size_t len, n = 0;
    ps_diag_clear(&d);
    e = il_method_code(&pe, &m, 0x06000000u | rid, &code, &len, &d);
    if (e != PS_E_OK)
      continue;
    if (code < data || len > size || (size_t)(code - data) > size - len)
      __builtin_trap();
    e = il_calls(code, len, calls, IL_MAX_CALLS, &n, &d);
    if (e != PS_E_OK && d.code != e)
      __builtin_trap();
    for (size_t i = 0; i < n; i++) {
      const char *name, *type, *ns;
      uint32_t def;
      if (calls[i].il >= len)
        __builtin_trap();
      if (il_target(&m, calls[i].token, &name, &type, &ns, &def) && (!name || !type || !ns))
        __builtin_trap();
    }
  }
  return 0;
}
