/*
 * fuzz_pdb.c - libFuzzer target for the Windows PDB reader: pdb_read over
 * arbitrary bytes, then a few RVA and token lookups over whatever was read;
 * then the lazy reader (pdb_open, pdb_lookup_lazy at the same RVAs, one
 * pdb_module_table for all of them, pdb_lazy_check).
 * Seeds: tests/fuzz/corpus/pdb/ (small real PDBs, see its README).
 */
#include <stdint.h>
#include <stdlib.h>

#include "pdb.h"
#include "symtab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ps_budget budget;
  ps_budget_init(&budget, (size_t)256 << 20);
  symtab st;
  st_init(&st, &budget);
  ps_diag diag;
  ps_diag_clear(&diag);
  if (pdb_read(data, size, &budget, &st, &diag) == PS_E_OK) {
    st_answer *a = malloc(sizeof *a);
    if (a) {
      for (size_t i = 0; i < st.nfuncs && i < 64; i++) {
        st_lookup_rva(&st, st.funcs[i].rva, a);
        st_lookup_rva(&st, st.funcs[i].rva + st.funcs[i].size / 2, a);
      }
      for (size_t i = 0; i < st.niranges && i < 64; i++)
        st_lookup_rva(&st, st.iranges[i].rva, a);
      for (size_t i = 0; i < st.nmethods && i < 64; i++) {
        st_lookup_token(&st, st.methods[i].token, 0, a);
        st_lookup_token(&st, st.methods[i].token, 7, a);
      }
      st_lookup_rva(&st, 0x1000, a);
      free(a);
    }
  }
  /* the lazy reader at the same addresses (or a few fixed ones) */
  uint32_t rvas[130];
  size_t n = 0;
  for (size_t i = 0; i < st.nfuncs && n + 2 <= 128; i++) {
    rvas[n++] = st.funcs[i].rva;
    rvas[n++] = st.funcs[i].rva + st.funcs[i].size;
  }
  rvas[n++] = 0x1000;
  rvas[n++] = 0;
  st_free(&st);
  ps_budget lb;
  ps_budget_init(&lb, (size_t)256 << 20);
  pdb_lazy *z = NULL;
  if (pdb_open(data, size, &lb, NULL, &z, &diag) == PS_E_OK) {
    st_answer *a = malloc(sizeof *a);
    for (size_t i = 0; a && i < n; i++)
      pdb_lookup_lazy(z, rvas[i], a, &diag);
    const symtab *t;
    pdb_lazy_forget(z);
    if (a && pdb_module_table(z, rvas, n, &t, &diag) == PS_E_OK)
      st_lookup_rva(t, rvas[0], a);
    size_t bad;
    pdb_lazy_audit first;
    pdb_lazy_check(z, &bad, &first, &diag);
    free(a);
    pdb_close(z);
  }
  return 0;
}
