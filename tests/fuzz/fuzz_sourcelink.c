/*
 * fuzz_sourcelink.c - libFuzzer target for the Source Link and srcsrv readers
 * (sourcelink.h).  The first byte picks the reader: even, the input is Source
 * Link JSON (sl_map_build, then sl_map_resolve on a few paths); odd, srcsrv
 * text (sl_from_srcsrv, whose output must then build as a map).  Seeds:
 * tests/fuzz/corpus/sourcelink (written for pdbsym, see its README).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sourcelink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void resolve_some(const sl_map *m) {
  static const char *const paths[] = {"", "/", "C:\\src\\a.cs", "c:\\SRC\\lib\\x\\y.cs",
                                      "/_/Program.cs", ":6.cs", "*"};
  char out[SL_MAX_URL];
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    (void)sl_map_resolve(m, paths[i], out, sizeof out);
  (void)sl_map_resolve(m, "/_/x", out, 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget b;
  ps_budget_init(&b, (size_t)16 << 20);
  sl_map m;
  if ((data[0] & 1) == 0) {
    if (sl_map_build(&m, text, len, &b, &d) == PS_E_OK) {
      resolve_some(&m);
      sl_map_free(&m, &b);
    } else if (d.code == PS_E_OK) {
      __builtin_trap(); /* every failure names its cause */
    }
  } else {
    char *json = NULL;
    size_t jl, cap, files;
    ps_err e = sl_from_srcsrv(text, len, &b, &json, &jl, &cap, &files, &d);
    if (e == PS_E_OK) {
      ps_diag_clear(&d);
      if (files == 0 || sl_map_build(&m, json, jl, &b, &d) != PS_E_OK)
        __builtin_trap(); /* what srcsrv gives is always a valid map */
      resolve_some(&m);
      sl_map_free(&m, &b);
      free(json);
      ps_budget_release(&b, cap);
    } else if (json || d.code == PS_E_OK) {
      __builtin_trap();
    }
  }
  if (b.used != 0)
    __builtin_trap(); /* every byte given back */
  return 0;
}
