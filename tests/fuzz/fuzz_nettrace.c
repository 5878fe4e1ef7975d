/*
 * fuzz_nettrace.c - libFuzzer target for the nettrace reader: the stream
 * framing read through a window that grows only as nt_stream_next asks (as
 * pdbsym trace reads a file), every block's rows walked, every known payload
 * decoded.  Every failure must name its cause.  Seeds: tests/fuzz/corpus/nettrace
 * (a real .NET 10 trace without rundown, made by tests/fixtures/nettrace/make.sh,
 * and synthetic V4/V5/V6 files from tests/fuzz/make_nettrace_seeds.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nettrace.h"
#include "ntcode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_META 256

static void check_diag(ps_err e, const ps_diag *d) {
  if (e != PS_E_OK && d->code != e) /* every failure names its cause */
    __builtin_trap();
}

static void walk_block(const nt_block *b, int format, uint32_t ptr, nt_metadata *metas,
                       size_t *nmeta, ntc_table *code) {
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = PS_E_OK;
  bool have = true;
  switch (b->kind) {
  case NT_BLOCK_METADATA: {
    nt_metadata_iter it;
    e = nt_metadata_begin(&it, b, format, &d);
    while (e == PS_E_OK && have) {
      nt_metadata m;
      e = nt_metadata_next(&it, &m, &have, &d);
      if (e == PS_E_OK && have && *nmeta < MAX_META)
        metas[(*nmeta)++] = m;
    }
    break;
  }
  case NT_BLOCK_EVENT: {
    nt_event_iter it;
    e = nt_events_begin(&it, b, format, &d);
    while (e == PS_E_OK && have) {
      nt_event ev;
      e = nt_events_next(&it, &ev, &have, &d);
      if (e != PS_E_OK || !have)
        break;
      for (size_t i = 0; i < *nmeta; i++) {
        if (metas[i].id != ev.metadata_id)
          continue;
        ps_diag pd;
        ps_diag_clear(&pd);
        char buf[64];
        ps_err pe = PS_E_OK;
        switch (nt_classify(&metas[i])) {
        case NT_EV_METHOD_LOAD:
        case NT_EV_METHOD_UNLOAD: {
          nt_method_load m;
          pe = nt_decode_method_load(ev.payload, ev.payload_len, metas[i].version, &m, &pd);
          if (pe == PS_E_OK) {
            nt_u16_to_utf8(m.name, buf, sizeof buf);
            (void)ntc_add_method(code, &m);
          }
          break;
        }
        case NT_EV_IL_MAP: {
          nt_il_map m;
          pe = nt_decode_il_map(ev.payload, ev.payload_len, metas[i].version, &m, &pd);
          for (size_t k = 0; pe == PS_E_OK && k < m.count; k++)
            (void)((uint32_t)nt_il_map_il(&m, k) ^ nt_il_map_native(&m, k));
          if (pe == PS_E_OK)
            (void)ntc_add_il_map(code, &m);
          break;
        }
        case NT_EV_MODULE_LOAD:
        case NT_EV_MODULE_UNLOAD: {
          nt_module_load m;
          pe = nt_decode_module_load(ev.payload, ev.payload_len, metas[i].version, &m, &pd);
          if (pe == PS_E_OK) {
            nt_u16_to_utf8(m.pdb_path, buf, 7);
            (void)ntc_add_module(code, &m);
          }
          break;
        }
        case NT_EV_SAMPLE: {
          uint32_t type;
          pe = nt_decode_sample(ev.payload, ev.payload_len, &type, &pd);
          break;
        }
        default: break;
        }
        check_diag(pe, &pd);
        break;
      }
    }
    break;
  }
  case NT_BLOCK_STACK: {
    nt_stack_iter it;
    e = nt_stacks_begin(&it, b, ptr, &d);
    while (e == PS_E_OK && have) {
      uint32_t id;
      const uint8_t *ips;
      size_t n;
      e = nt_stacks_next(&it, &id, &ips, &n, &have, &d);
      if (e == PS_E_OK && have && n && ntc_finish(code) == PS_E_OK) {
        ntc_answer a;
        for (size_t k = 0; k < n && k < 64; k++)
          (void)ntc_lookup(code, nt_stack_ip(ips, k, ptr), k == 0, &a);
      }
    }
    break;
  }
  case NT_BLOCK_SP: {
    nt_sequence_point sp;
    e = nt_read_sequence_point(b, format, &sp, &d);
    break;
  }
  case NT_BLOCK_THREAD: {
    nt_thread_iter it;
    e = nt_threads_begin(&it, b, &d);
    while (e == PS_E_OK && have) {
      nt_thread t;
      e = nt_threads_next(&it, &t, &have, &d);
    }
    break;
  }
  default: break;
  }
  check_diag(e, &d);
}

static int run(const uint8_t *data, size_t size, ntc_table *code);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ps_budget b;
  ps_budget_init(&b, (size_t)16 << 20);
  ntc_table code;
  ntc_init(&code, &b);
  run(data, size, &code);
  ntc_free(&code);
  return 0;
}

static int run(const uint8_t *data, size_t size, ntc_table *code) {
  static nt_metadata metas[MAX_META];
  size_t nmeta = 0;
  nt_stream s;
  nt_stream_init(&s, (size_t)1 << 20);
  size_t pos = 0, win = 16;
  uint32_t ptr = 8;
  for (int steps = 0; steps < 100000; steps++) {
    size_t avail = size - pos;
    size_t len = win < avail ? win : avail;
    size_t used, need;
    nt_block b;
    ps_diag d;
    ps_diag_clear(&d);
    ps_err e = nt_stream_next(&s, data + pos, len, len == avail, &used, &need, &b, &d);
    if (e == PS_E_TRUNCATED && len < avail) {
      if (need <= len) /* a request for more must ask for more */
        __builtin_trap();
      win = need;
      continue;
    }
    check_diag(e, &d);
    if (e != PS_E_OK)
      return 0;
    if (used == 0 || used > len)
      __builtin_trap();
    pos += used;
    if (b.kind == NT_BLOCK_END)
      return 0;
    if (b.kind == NT_BLOCK_TRACE) {
      nt_trace_info ti;
      ps_err te = nt_read_trace(&b, s.format, &ti, &d);
      check_diag(te, &d);
      if (te == PS_E_OK)
        ptr = ti.pointer_size;
    } else if (b.kind != NT_BLOCK_NONE) {
      walk_block(&b, s.format, ptr, metas, &nmeta, code);
    }
  }
  return 0;
}
