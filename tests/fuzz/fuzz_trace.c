/*
 * fuzz_trace.c - libFuzzer target for the trace job (server/engine/trace.h),
 * what POST /traces and pdbsym trace run on hostile bytes: the input fed in
 * chunks (their size from the first byte), small budgets so that the stack
 * table flushes and the limits trip, then the three writers into a sink that
 * checks nothing but its calls.  No engine: modules resolve to nothing.
 * Every failure must name its cause.  Seeds: tests/fuzz/corpus/trace (the
 * nettrace seeds; tests/fuzz/make_nettrace_seeds.py writes both folders).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ps_err sink(void *ctx, const void *p, size_t n) {
  size_t *total = ctx;
  if (n && !p)
    __builtin_trap();
  *total += n;
  return PS_E_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  trace_options o;
  memset(&o, 0, sizeof o);
  o.stack_budget = 8192;
  o.stack_window = (size_t)1 << 20;
  o.code_budget = (size_t)8 << 20;
  o.max_block = (size_t)1 << 20;
  o.top = 5;
  ps_diag d;
  ps_diag_clear(&d);
  trace_job *j = NULL;
  if (trace_job_open(&o, &j, &d) != PS_E_OK)
    return 0;
  size_t chunk = size ? (size_t)(data[0] % 64) * 97 + 1 : 1;
  ps_err e = PS_E_OK;
  for (size_t pos = 0; pos < size && e == PS_E_OK; pos += chunk)
    e = trace_job_feed(j, data + pos, size - pos < chunk ? size - pos : chunk, &d);
  if (e == PS_E_OK)
    e = trace_job_finish(j, NULL, NULL, NULL, &d);
  if (e == PS_E_OK) {
    static const trace_format f[] = {TRACE_SPEEDSCOPE, TRACE_PPROF, TRACE_TOP};
    for (size_t i = 0; i < 3 && e == PS_E_OK; i++) {
      size_t total = 0;
      e = trace_job_write(j, f[i], sink, &total, &d);
      if (e == PS_E_OK && total == 0)
        __builtin_trap(); /* every answer has at least its header */
    }
  }
  if (e != PS_E_OK && d.code != e) /* every failure names its cause */
    __builtin_trap();
  trace_job_close(j);
  return 0;
}
