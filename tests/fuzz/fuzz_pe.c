/*
 * fuzz_pe.c - libFuzzer target for the PE reader: pe_parse, the embedded
 * Portable PDB (inflate capped at 4 MiB, then ppdb_read), and method names
 * from the CLI metadata.  Seeds: tests/fuzz/corpus/pe (tests/fuzz/make_seeds.py).
 */
#include <stdint.h>
#include <stdlib.h>

#include "pe.h"
#include "ppdb.h"
#include "symtab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ps_diag d;
  ps_diag_clear(&d);
  pe_info pi;
  ps_err e = pe_parse(data, size, &pi, &d);
  if (e != PS_E_OK && d.code != e)
    __builtin_trap();
  (void)pe_is_image(data, size);
  ps_budget b;
  ps_budget_init(&b, (size_t)64 << 20);
  symtab st;
  st_init(&st, &b);
  uint8_t *pdb = NULL;
  size_t pdb_len = 0;
  ps_diag_clear(&d);
  if (pe_embedded_pdb(data, size, (size_t)4 << 20, NULL, &pdb, &pdb_len, &d) == PS_E_OK) {
    ps_diag_clear(&d);
    (void)ppdb_read(pdb, pdb_len, &b, &st, &d);
  }
  free(pdb);
  ps_diag_clear(&d);
  (void)pe_method_names(data, size, &b, &st, &d);
  st_answer a;
  for (size_t i = 0; i < st.nmethods && i < 64; i++)
    st_lookup_token(&st, st.methods[i].token, 3, &a);
  st_free(&st);
  return 0;
}
