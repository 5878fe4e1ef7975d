/*
 * fuzz_pdb.c - libFuzzer target for the Windows PDB reader: pdb_read over
 * arbitrary bytes, then a few RVA and token lookups over whatever was read.
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
  st_free(&st);
  return 0;
}
