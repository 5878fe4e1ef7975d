/*
 * fuzz_trace_live.c - libFuzzer target for the live trace job (engine/trace.h:
 * what pdbsym profile runs on a process's stream): the input fed in chunks,
 * a window cut, written (speedscope and pprof) and emptied every few chunks,
 * a code budget small enough that the map fills, is named, forgotten and
 * given a "rundown" (the same bytes read by a second job and absorbed), the
 * stream ended.  Every failure must name its cause; nothing may crash or
 * leak.  Seeds: tests/fuzz/corpus/trace_live (the nettrace seeds, and what
 * make_nettrace_seeds.py writes).
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

static void check(ps_err e, const ps_diag *d) {
  if (e != PS_E_OK && d->code != e)
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  trace_options o;
  memset(&o, 0, sizeof o);
  o.stack_budget = 8192;
  o.stack_window = (size_t)1 << 20;
  o.code_budget = size && (data[0] & 0x80) ? 65536 : ((size_t)8 << 20);
  o.max_block = (size_t)1 << 20;
  ps_diag d;
  ps_diag_clear(&d);
  trace_job *j = NULL;
  if (trace_job_open(&o, &j, &d) != PS_E_OK)
    return 0;
  trace_job_set_live(j);
  trace_job_set_lag(j, size > 1 ? data[1] : 0);
  size_t chunk = size ? (size_t)(data[0] % 32) * 61 + 1 : 1;
  unsigned every = size > 2 ? (unsigned)(data[2] % 7) + 1 : 1, n = 0;
  ps_err e = PS_E_OK;
  size_t total = 0;
  for (size_t at = 0; at < size && e == PS_E_OK; at += chunk) {
    size_t len = size - at < chunk ? size - at : chunk;
    e = trace_job_feed(j, data + at, len, &d);
    check(e, &d);
    if (e == PS_E_OK && trace_job_code_full(j)) { /* named, forgotten, a "rundown" */
      e = trace_job_resolve(j, NULL, NULL, NULL, &d);
      check(e, &d);
      trace_job_forget_code(j);
      trace_job *r = NULL;
      ps_diag rd;
      ps_diag_clear(&rd);
      if (trace_job_open(&o, &r, &rd) == PS_E_OK) {
        if (trace_job_feed(r, data, at + len, &rd) == PS_E_OK && trace_job_end_live(r, &rd) == PS_E_OK)
          check(trace_job_absorb(j, r, &rd), &rd);
        trace_job_close(r);
      }
    }
    if (e == PS_E_OK && ++n % every == 0) {
      e = trace_job_cut(j, NULL, NULL, NULL, 1, 2, &d);
      check(e, &d);
      if (e == PS_E_OK) {
        uint64_t ips[8];
        trace_job_unknown(j, ips, 8);
        check(trace_job_write(j, TRACE_SPEEDSCOPE, sink, &total, &d), &d);
        ps_diag_clear(&d);
        check(trace_job_write(j, TRACE_PPROF, sink, &total, &d), &d);
        ps_diag_clear(&d);
        e = trace_job_next_window(j, &d);
        check(e, &d);
      }
    }
  }
  if (e == PS_E_OK) {
    e = trace_job_end_live(j, &d);
    check(e, &d);
    if (e == PS_E_OK) {
      trace_job_retry_unknown(j);
      check(trace_job_cut(j, NULL, NULL, NULL, 1, 2, &d), &d);
    }
  }
  trace_job_close(j);
  return 0;
}
