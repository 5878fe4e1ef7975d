/*
 * fuzz_ppdb.c - libFuzzer target for the metadata and Portable PDB readers:
 * ppdb_identify, ppdb_read under a small allocation budget, then lookups of
 * every method over a few IL offsets.  Seeds: tests/fuzz/corpus/ppdb (made by
 * tests/fuzz/make_seeds.py).
 */
#include <stdint.h>
#include <stdio.h>

#include "ppdb.h"
#include "symtab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ps_diag d;
  ps_diag_clear(&d);
  ppdb_info info;
  (void)ppdb_identify(data, size, &info, &d);
  ps_budget b;
  ps_budget_init(&b, (size_t)64 << 20);
  symtab st;
  st_init(&st, &b);
  ps_diag_clear(&d);
  ps_err e = ppdb_read(data, size, &b, &st, &d);
  if (e == PS_E_OK) {
    st_answer a;
    for (size_t i = 0; i < st.nmethods && i < 256; i++)
      for (uint32_t il = 0; il < 64; il += 7)
        st_lookup_token(&st, st.methods[i].token, il, &a);
  } else {
    char buf[256];
    ps_diag_format(&d, buf, sizeof buf);
    if (d.code != e) /* every failure names its cause */
      __builtin_trap();
  }
  st_free(&st);
  return 0;
}
