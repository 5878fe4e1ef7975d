/*
 * test_dsipc.c - the diagnostic IPC codec (parsers/dsipc.c) against the byte
 * layouts of dotnet/diagnostics' ipc-protocol.md, written out here by hand:
 * the spec's own CollectTracing example (80 bytes, "MyEventSource"), the
 * header of every command, CollectTracing2 to 5 as the runtime's
 * ds-eventpipe-protocol.c parses them, ProcessInfo 1/2/3 and the advertise
 * as ProcessInfo.cs / IpcAdvertise.cs read them; then hostile replies.  The
 * real runtime's acceptance of what pdbsym sends is tested against .NET 10
 * in tests/integration/test_profile_live.py.
 */
#include "dsipc.h"
#include "test.h"

static size_t put_str16(uint8_t *p, const char *s) { /* string: units with NUL, then UTF-16 */
  size_t n = strlen(s) + 1, k = 0;
  p[k++] = (uint8_t)n;
  p[k++] = (uint8_t)(n >> 8);
  p[k++] = 0;
  p[k++] = 0;
  for (size_t i = 0; i < n; i++) {
    p[k++] = (uint8_t)s[i];
    p[k++] = 0;
  }
  return k;
}

static const uint8_t magic[14] = "DOTNET_IPC_V1";

/* ipc-protocol.md, "Payloads": the CollectTracing example, byte for byte */
TEST(spec_collect_example) {
  ds_provider p = {100, 2, "MyEventSource", NULL};
  ds_collect c = {250, DS_DEFAULT_RUNDOWN_KEYWORD, true, &p, 1};
  uint8_t out[256];
  size_t len = 0;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(1, &c, out, sizeof out, &len, &d), PS_E_OK);
  uint8_t want[80];
  memset(want, 0, sizeof want);
  memcpy(want, magic, 14);
  want[14] = 80;     /* size */
  want[16] = 0x02;   /* EventPipe */
  want[17] = 0x02;   /* CollectTracing */
  want[20] = 250;    /* circularBufferMB */
  want[24] = 1;      /* format: NetTrace */
  want[28] = 1;      /* one provider */
  want[32] = 100;    /* keywords */
  want[40] = 2;      /* logLevel */
  size_t k = 44 + put_str16(want + 44, "MyEventSource");
  CHECK_EQ_U(k, 76);  /* the spec's "49 - 76" */
  /* arguments length 0 at 77-80 */
  CHECK_EQ_U(len, 80);
  CHECK(memcmp(out, want, 80) == 0);
}

/* the versions' fields before the providers, as ds-eventpipe-protocol.c reads them */
TEST(collect_versions) {
  ds_provider p = {0x20038, 5, "P", "k=v"};
  ds_collect c = {64, 0, false, &p, 1};
  uint8_t out[256];
  size_t len;
  ps_diag d;
  ps_diag_clear(&d);
  /* 5: session type, buffer, format, rundown keyword (u64), stackwalk, providers
   * each with an event filter (enable, count) */
  CHECK_EQ_U(ds_build_collect(5, &c, out, sizeof out, &len, &d), PS_E_OK);
  CHECK_EQ_U(out[17], 0x06);
  CHECK_EQ_U(out[20], 0);   /* session type 0: a stream */
  CHECK_EQ_U(out[24], 64);
  CHECK_EQ_U(out[28], 1);
  CHECK_EQ_U(out[32], 0);   /* rundown keyword, 8 bytes */
  CHECK_EQ_U(out[40], 0);   /* no stackwalk */
  CHECK_EQ_U(out[41], 1);   /* one provider */
  CHECK_EQ_U(out[45], 0x38);
  CHECK_EQ_U(out[46], 0x00);
  CHECK_EQ_U(out[47], 0x02);
  CHECK_EQ_U(out[53], 5);   /* level */
  CHECK_EQ_U(out[57], 2);   /* "P" + NUL: 2 units */
  CHECK_EQ_U(out[61], 'P');
  CHECK_EQ_U(out[65], 4);   /* "k=v" + NUL */
  size_t filter = 65 + 4 + 8;
  CHECK_EQ_U(len, filter + 1 + 4);
  CHECK_EQ_U(out[14] | out[15] << 8, len);
  /* 4: no session type, no filter */
  CHECK_EQ_U(ds_build_collect(4, &c, out, sizeof out, &len, &d), PS_E_OK);
  CHECK_EQ_U(out[17], 0x05);
  CHECK_EQ_U(out[20], 64);
  CHECK_EQ_U(len, 20 + 4 + 4 + 8 + 1 + 4 + 8 + 4 + 4 + 4 + 4 + 8);
  /* 3: requestRundown as a bool, then stackwalk */
  CHECK_EQ_U(ds_build_collect(3, &c, out, sizeof out, &len, &d), PS_E_OK);
  CHECK_EQ_U(out[17], 0x04);
  CHECK_EQ_U(out[28], 0); /* no rundown */
  CHECK_EQ_U(out[29], 0); /* no stackwalk */
  CHECK_EQ_U(out[30], 1); /* one provider */
  /* 2 cannot say "no stackwalk"; with it, requestRundown only */
  CHECK_EQ_U(ds_build_collect(2, &c, out, sizeof out, &len, &d), PS_E_UNSUPPORTED);
  c.stackwalk = true;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(2, &c, out, sizeof out, &len, &d), PS_E_OK);
  CHECK_EQ_U(out[17], 0x03);
  CHECK_EQ_U(out[28], 0);
  CHECK_EQ_U(out[29], 1);
  /* a rundown keyword other than the default needs 4 */
  c.rundown_keyword = 0x8;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(3, &c, out, sizeof out, &len, &d), PS_E_UNSUPPORTED);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(4, &c, out, sizeof out, &len, &d), PS_E_OK);
  /* refused: no providers, an empty name, a level over 5, no buffer, no room */
  ds_collect bad = c;
  bad.nproviders = 0;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(5, &bad, out, sizeof out, &len, &d), PS_E_INVALID);
  ds_provider e = {0, 6, "P", NULL};
  bad = c;
  bad.providers = &e;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(5, &bad, out, sizeof out, &len, &d), PS_E_INVALID);
  bad = c;
  bad.buffer_mb = 0;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(5, &bad, out, sizeof out, &len, &d), PS_E_INVALID);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(5, &c, out, 30, &len, &d), PS_E_LIMIT);
}

TEST(non_ascii_names) {
  /* U+00E9 (2 UTF-8 bytes, 1 unit) and U+1F600 (4 bytes, a surrogate pair) */
  ds_provider p = {0, 4, "\xc3\xa9\xf0\x9f\x98\x80", NULL};
  ds_collect c = {1, 0, true, &p, 1};
  uint8_t out[128];
  size_t len;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_build_collect(4, &c, out, sizeof out, &len, &d), PS_E_OK);
  const uint8_t *s = out + 20 + 4 + 4 + 8 + 1 + 4 + 8 + 4;
  CHECK_EQ_U(s[0], 4); /* 1 + 2 + NUL */
  CHECK_EQ_U(s[4] | s[5] << 8, 0xE9);
  CHECK_EQ_U(s[6] | s[7] << 8, 0xD83D);
  CHECK_EQ_U(s[8] | s[9] << 8, 0xDE00);
  CHECK_EQ_U(s[10] | s[11] << 8, 0);
}

TEST(simple_messages) {
  uint8_t out[32];
  CHECK_EQ_U(ds_build_simple(out, sizeof out, DS_SET_PROCESS, DS_PROC_INFO3), 20);
  CHECK(memcmp(out, magic, 14) == 0);
  CHECK_EQ_U(out[14], 20);
  CHECK_EQ_U(out[16], 0x04);
  CHECK_EQ_U(out[17], 0x08);
  CHECK_EQ_U(out[18] | out[19], 0);
  CHECK_EQ_U(ds_build_simple(out, 19, DS_SET_PROCESS, DS_PROC_INFO), 0);
  /* StopTracing: { Magic; 28; 0x0201; 0x0000 } + u64 session */
  CHECK_EQ_U(ds_build_stop(out, sizeof out, 0x1122334455667788ull), 28);
  CHECK_EQ_U(out[14], 28);
  CHECK_EQ_U(out[16], 0x02);
  CHECK_EQ_U(out[17], 0x01);
  CHECK_EQ_U(out[20], 0x88);
  CHECK_EQ_U(out[27], 0x11);
}

static size_t reply(uint8_t *p, uint8_t id, const uint8_t *payload, size_t n) {
  memcpy(p, magic, 14);
  p[14] = (uint8_t)(20 + n);
  p[15] = (uint8_t)((20 + n) >> 8);
  p[16] = 0xFF;
  p[17] = id;
  p[18] = p[19] = 0;
  if (n)
    memcpy(p + 20, payload, n);
  return 20 + n;
}

TEST(replies) {
  uint8_t m[64];
  ds_header h;
  ds_reply r;
  ps_diag d;
  /* OK with a session id */
  uint8_t sid[8] = {7, 0, 0, 0, 0, 0, 0, 1};
  reply(m, 0, sid, 8);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 20, &h, &d), PS_E_OK);
  CHECK_EQ_U(h.size, 28);
  CHECK_EQ_U(ds_reply_parse(&h, m + 20, 8, &r, &d), PS_E_OK);
  CHECK(r.ok);
  uint64_t s = 0;
  CHECK_EQ_U(ds_session_parse(m + 20, 8, &s, &d), PS_E_OK);
  CHECK_EQ_U(s, 0x0100000000000007ull);
  CHECK_EQ_U(ds_session_parse(m + 20, 7, &s, &d), PS_E_TRUNCATED);
  /* the spec's error example: 0x80131384, bad encoding */
  uint8_t hr[4] = {0x84, 0x13, 0x13, 0x80};
  reply(m, 0xFF, hr, 4);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 20, &h, &d), PS_E_OK);
  CHECK_EQ_U(ds_reply_parse(&h, m + 20, 4, &r, &d), PS_E_OK);
  CHECK(!r.ok);
  CHECK_EQ_U(r.hresult, DS_E_BAD_ENCODING);
  CHECK_EQ_S(ds_hresult_name(r.hresult), "DS_IPC_E_BAD_ENCODING");
  CHECK_EQ_S(ds_hresult_name(DS_E_UNKNOWN_COMMAND), "DS_IPC_E_UNKNOWN_COMMAND");
  CHECK(ds_hresult_name(0x12345678) == NULL);
  CHECK(strlen(ds_hresult_text(0x12345678)) > 0);
  /* an error reply without its HRESULT */
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_reply_parse(&h, m + 20, 3, &r, &d), PS_E_TRUNCATED);
  /* wrong magic, short size, a reply that is not from the server set */
  m[3] = 'X';
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 20, &h, &d), PS_E_CORRUPT);
  CHECK(strstr(d.detail, "DOTNET_IPC_V1") != NULL);
  reply(m, 0, NULL, 0);
  m[14] = 19;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 20, &h, &d), PS_E_CORRUPT);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 19, &h, &d), PS_E_TRUNCATED);
  reply(m, 0x00, NULL, 0);
  m[16] = 0x02;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 20, &h, &d), PS_E_OK);
  CHECK_EQ_U(ds_reply_parse(&h, NULL, 0, &r, &d), PS_E_CORRUPT);
  reply(m, 0x42, NULL, 0);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_header_parse(m, 20, &h, &d), PS_E_OK);
  CHECK_EQ_U(ds_reply_parse(&h, NULL, 0, &r, &d), PS_E_CORRUPT);
}

/* ProcessInfo.cs: pid, cookie, command line, OS, arch [, entry assembly, CLR
 * version] ; ProcessInfo3 starts with its version and ends with the RID */
static size_t info_payload(uint8_t *p, int kind, uint32_t version) {
  size_t k = 0;
  if (kind == 3) {
    memset(p, 0, 4);
    p[0] = (uint8_t)version;
    k = 4;
  }
  uint8_t pid[8] = {0x39, 0x30, 0, 0, 0, 0, 0, 0}; /* 12345 */
  memcpy(p + k, pid, 8);
  k += 8;
  for (int i = 0; i < 16; i++)
    p[k + (size_t)i] = (uint8_t)(0x10 + i);
  k += 16;
  k += put_str16(p + k, "/usr/bin/dotnet app.dll");
  k += put_str16(p + k, "Linux");
  k += put_str16(p + k, "x64");
  if (kind >= 2) {
    k += put_str16(p + k, "app");
    k += put_str16(p + k, "10.0.12");
  }
  if (kind == 3 && version >= 1)
    k += put_str16(p + k, "linux-x64");
  return k;
}

TEST(process_info) {
  uint8_t p[512];
  ds_process_info o;
  ps_diag d;
  for (int kind = 1; kind <= 3; kind++) {
    size_t n = info_payload(p, kind, 1);
    ps_diag_clear(&d);
    CHECK_EQ_U(ds_process_info_parse(kind, p, n, &o, &d), PS_E_OK);
    CHECK_EQ_U(o.pid, 12345);
    CHECK_EQ_S(o.command_line, "/usr/bin/dotnet app.dll");
    CHECK_EQ_S(o.os, "Linux");
    CHECK_EQ_S(o.arch, "x64");
    CHECK_EQ_S(o.clr_version, kind >= 2 ? "10.0.12" : "");
    CHECK_EQ_S(o.rid, kind == 3 ? "linux-x64" : "");
    char g[40];
    ds_cookie_format(o.cookie, g, sizeof g);
    CHECK_EQ_S(g, "13121110-1514-1716-1819-1a1b1c1d1e1f");
    /* every truncation is an error naming the field, never a read past the end */
    for (size_t cut = 0; cut < n; cut++) {
      ps_diag_clear(&d);
      ps_err e = ds_process_info_parse(kind, p, cut, &o, &d);
      CHECK(e == PS_E_TRUNCATED || e == PS_E_CORRUPT);
      CHECK(d.where != NULL);
    }
  }
  /* a version 0 ProcessInfo3 has no RID; a later one's extra fields are ignored */
  size_t n = info_payload(p, 3, 0);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_process_info_parse(3, p, n, &o, &d), PS_E_OK);
  CHECK_EQ_S(o.rid, "");
  n = info_payload(p, 3, 2);
  n += put_str16(p + n, "future");
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_process_info_parse(3, p, n, &o, &d), PS_E_OK);
  CHECK_EQ_S(o.rid, "linux-x64");
  /* a string without its NUL, a count past the end, a huge count */
  n = info_payload(p, 1, 0);
  p[24 + 4 + 2 * 23 + 0] = 'X'; /* the command line's NUL */
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_process_info_parse(1, p, n, &o, &d), PS_E_CORRUPT);
  n = info_payload(p, 1, 0);
  p[24] = 0xFF;
  p[25] = 0xFF;
  p[26] = 0xFF;
  p[27] = 0x7F;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_process_info_parse(1, p, n, &o, &d), PS_E_TRUNCATED);
  /* an empty string (count 0) is allowed */
  uint8_t e[8 + 16 + 12];
  memset(e, 0, sizeof e);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_process_info_parse(1, e, sizeof e, &o, &d), PS_E_OK);
  CHECK_EQ_S(o.command_line, "");
}

TEST(advertise) {
  uint8_t a[34];
  memcpy(a, "ADVR_V1", 8);
  for (int i = 0; i < 16; i++)
    a[8 + i] = (uint8_t)i;
  uint8_t pid[8] = {0xD2, 0x04, 0, 0, 0, 0, 0, 0};
  memcpy(a + 24, pid, 8);
  a[32] = a[33] = 0;
  ds_advertise adv;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_advertise_parse(a, 34, &adv, &d), PS_E_OK);
  CHECK_EQ_U(adv.pid, 1234);
  CHECK_EQ_U(adv.cookie[15], 15);
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_advertise_parse(a, 33, &adv, &d), PS_E_TRUNCATED);
  a[0] = 'B';
  ps_diag_clear(&d);
  CHECK_EQ_U(ds_advertise_parse(a, 34, &adv, &d), PS_E_CORRUPT);
}

int main(void) {
  RUN(spec_collect_example);
  RUN(collect_versions);
  RUN(non_ascii_names);
  RUN(simple_messages);
  RUN(replies);
  RUN(process_info);
  RUN(advertise);
  return test_summary();
}
