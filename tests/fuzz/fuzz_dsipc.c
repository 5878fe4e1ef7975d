/*
 * fuzz_dsipc.c - libFuzzer target for the diagnostic IPC codec
 * (parsers/dsipc.c): the first byte picks what the rest is read as, the way
 * pdbsym meets it on a socket: a reply (header, then its payload as an OK or
 * error reply, a session id and ProcessInfo 1, 2 and 3), or an advertise;
 * and a CollectTracing message built with the bytes as provider names.
 * Every failure must name its cause.  Seeds: tests/fuzz/corpus/dsipc, from
 * tests/fuzz/make_dsipc_seeds.py.
 */
#include <stdint.h>
#include <string.h>

#include "dsipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(ps_err e, const ps_diag *d) {
  if (e != PS_E_OK && d->code != e) /* every failure names its cause */
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t sel = data[0];
  data++;
  size--;
  ps_diag d;
  ps_diag_clear(&d);
  switch (sel % 3) {
  case 0: { /* a reply from a runtime (or not) */
    ds_header h;
    ps_err e = ds_header_parse(data, size, &h, &d);
    check(e, &d);
    if (e)
      return 0;
    size_t n = size - DS_HEADER_SIZE;
    if (n > (size_t)h.size - DS_HEADER_SIZE)
      n = (size_t)h.size - DS_HEADER_SIZE;
    const uint8_t *p = data + DS_HEADER_SIZE;
    ds_reply r;
    ps_diag_clear(&d);
    check(ds_reply_parse(&h, p, n, &r, &d), &d);
    uint64_t sid;
    ps_diag_clear(&d);
    check(ds_session_parse(p, n, &sid, &d), &d);
    for (int k = 1; k <= 3; k++) {
      ds_process_info o;
      ps_diag_clear(&d);
      check(ds_process_info_parse(k, p, n, &o, &d), &d);
      if (memchr(o.command_line, 0, sizeof o.command_line) == NULL)
        __builtin_trap(); /* always a C string */
      char g[40];
      ds_cookie_format(o.cookie, g, sizeof g);
    }
    if (!r.ok)
      (void)ds_hresult_text(r.hresult);
    break;
  }
  case 1: {
    ds_advertise a;
    check(ds_advertise_parse(data, size, &a, &d), &d);
    break;
  }
  default: { /* names and arguments from the input, every version */
    char name[512], args[512];
    size_t half = size / 2;
    size_t nl = half < sizeof name - 1 ? half : sizeof name - 1;
    size_t al = size - half < sizeof args - 1 ? size - half : sizeof args - 1;
    memcpy(name, data, nl);
    name[nl] = '\0';
    memcpy(args, data + half, al);
    args[al] = '\0';
    ds_provider p[2] = {{0x20038, 5, name, args}, {0, 4, "x", NULL}};
    ds_collect c = {64, 0, true, p, 2};
    uint8_t out[4096];
    for (int v = 1; v <= 5; v++) {
      size_t len;
      ps_diag_clear(&d);
      ps_err e = ds_build_collect(v, &c, out, sizeof out, &len, &d);
      check(e, &d);
      if (e == PS_E_OK) {
        ds_header h;
        ps_diag_clear(&d);
        if (ds_header_parse(out, len, &h, &d) != PS_E_OK || h.size != len)
          __builtin_trap(); /* what pdbsym sends must read back */
      }
    }
    break;
  }
  }
  return 0;
}
