/*
 * fuzz_request_diff.c - request bodies read by the service's reader
 * (request.c on the walker's own JSON scanner) and by the reading before
 * it (tests/unit/request_ref.h: every value through jansson's json_loadb):
 * whatever the bytes, both routes under two sets of limits give the same
 * result, the same 400 text and the same arrays (tests/unit/request_diff.h),
 * and under a 16 KiB memory budget the same again but where ours refuses for
 * the budget a body whose reading needs more (rd_check_budget); any
 * difference aborts.  Seeds: tests/fuzz/corpus/request_diff, the bodies
 * the integration tests send (tests/fuzz/collect_request_bodies.py).
 *
 *   build-fuzz/fuzz_request_diff -dict=tests/fuzz/request_diff.dict CORPUS_DIR tests/fuzz/corpus/request_diff
 */
#include <stdint.h>
#include <stdlib.h>

#include "request_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!rd_check((const char *)data, size, NULL))
    abort();
  /* under a small budget: a refusal only where the reading needs more */
  if (!rd_check_budget((const char *)data, size, 16 * 1024, NULL))
    abort();
  return 0;
}
