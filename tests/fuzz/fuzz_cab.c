/*
 * fuzz_cab.c - libFuzzer target for the CAB extractor: opens the input as a
 * cabinet and extracts every member under a 16 MiB cap into a sink that only
 * counts.  Seeds: tests/fuzz/corpus/cab/ (made by tests/cabmake.py, see
 * tests/fuzz/corpus/cab/README).
 */
#include <stdint.h>
#include <stddef.h>

#include "cab.h"

static ps_err count_sink(void *ctx, const uint8_t *data, size_t len) {
  (void)data;
  *(uint64_t *)ctx += len;
  return PS_E_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cab_archive *a = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  if (cab_open(data, size, &a, &d) != PS_E_OK)
    return 0;
  for (size_t i = 0; i < cab_count(a) && i < 64; i++) {
    uint64_t n = 0;
    ps_diag_clear(&d);
    (void)cab_extract(a, i, (uint64_t)16 << 20, count_sink, &n, &d);
  }
  cab_close(a);
  return 0;
}
