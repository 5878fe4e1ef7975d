"""POST /traces on the real `pdbsym serve` (docs/contract.md, "Traces"; api.md):

- the .NET 8, 9 and 10 fixture traces sent in chunks (Transfer-Encoding:
  chunked, so the body is streamed) with Workload.pdb only on a real symbol
  server (tests/symserver.py, Portable key): every sample's stack equal to
  TraceLog's (tracelib.compare), and the same bytes `pdbsym trace` writes;
- ?format=pprof (gzip) and ?format=top (text); a bad ?format= is 400;
- a trace over max_trace_bytes gets 413 (with and without Content-Length);
  a body that is not a trace gets 400 naming the block and the offset;
- the request log counts the samples;
- the rate of a trace body: one sent steadily for longer than read_timeout
  (above trace_min_rate) is read to its end and answered, one that drips is
  closed once a trace_rate_window has passed under the rate
  (test_http_trace_rate.py has the long uploads and the slot's longest time).
"""
import gzip
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import clilib  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402
from tracelib import FIX, TFMS, check_weights, compare, jsonl_gz  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import make_nettrace_seeds as nt_seeds  # noqa: E402

clilib.need_binary()
if not os.path.exists(os.path.join(FIX, "net10.0", "workload.nettrace")):
    harness.skip("tests/fixtures/nettrace absent")

c = Checks()
sb = clilib.Sandbox("pdbsym-http-traces-")
sym = clilib.SymServer(sb.path("store"))


def guid_key(tfm):
    """Workload.pdb's symbol-server key (Portable: GUID and FFFFFFFF), from the
    PDB GUID TraceEvent read in the trace's ModuleLoad event."""
    for e in jsonl_gz(os.path.join(FIX, tfm, "workload.events.jsonl.gz")):
        if e["kind"] == "module" and e["il_path"].endswith("/Workload.dll"):
            return e["pdb_guid"].replace("-", "").upper() + "FFFFFFFF"
    raise ValueError("no Workload module in the oracle of " + tfm)


for tfm in TFMS:
    pdb = os.path.join(FIX, tfm, "Workload.pdb")
    sym.put("Workload.pdb", guid_key(tfm), open(pdb, "rb").read())

config = "symbol_path = srv*%s\noffline = false\nmax_trace_bytes = 2M\n" % sym.url
srv = Server(config=config)


def post_trace(data, query="", chunked=True, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    h = {"Content-Type": "application/octet-stream"}
    h.update(headers or {})
    try:
        if chunked:
            def chunks():
                for i in range(0, len(data), 65536):
                    yield data[i:i + 65536]
            conn.request("POST", "/traces" + query, body=chunks(), headers=h, encode_chunked=True)
        else:
            conn.request("POST", "/traces" + query, body=data, headers=h)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before the body was all sent (413): the answer is waiting
    r = conn.getresponse()
    body = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    return r.status, hdrs, body


try:
    for tfm in TFMS:
        data = open(os.path.join(FIX, tfm, "workload.nettrace"), "rb").read()
        st, h, body = post_trace(data)
        c.eq("%s: status" % tfm, st, 200)
        c.eq("%s: content type" % tfm, h.get("content-type"), "application/json")
        if st != 200:
            print(body[:300])
            continue
        doc = json.loads(body)
        n, frames, lines = compare(c, "POST /traces " + tfm, doc, tfm)
        c.true("%s: lines from the symbol server's PDB" % tfm, lines > 100, str(lines))
        print("  %s: %d samples, %d frames (%d with file:line) equal to TraceLog's" % (tfm, n, frames, lines))
        # the CLI, given the PDB folder instead, writes the same bytes
        out = sb.path(tfm + ".json")
        rc, so, se = sb.run(["trace", "--offline", "--pdb-dir", os.path.join(FIX, tfm),
                             os.path.join(FIX, tfm, "workload.nettrace"), "-o", out])
        c.eq("%s: pdbsym trace exit (%s)" % (tfm, se.strip()), rc, 0)
        if rc == 0:
            mine = json.load(open(out))
            mine["name"] = doc["name"]
            c.eq("%s: the same answer as pdbsym trace" % tfm, mine, doc)

    data = open(os.path.join(FIX, "net10.0", "workload.nettrace"), "rb").read()
    st, h, body = post_trace(data, "?format=pprof")
    c.eq("pprof: status", st, 200)
    c.true("pprof: gzip", body[:2] == b"\x1f\x8b")
    c.true("pprof: a profile inside", len(gzip.decompress(body)) > 1000)
    st, h, body = post_trace(data, "?format=top", chunked=False)
    c.eq("top: status", st, 200)
    c.eq("top: content type", h.get("content-type"), "text/plain; charset=utf-8")
    c.true("top: text", body.startswith(b"trace.nettrace: 271 samples"), body[:80])
    st, h, body = post_trace(data, "?format=flamegraph")
    c.eq("bad format: status", st, 400)
    c.eq("bad format: field", json.loads(body).get("field"), "format")

    # ?state=: the samples of running or of waiting threads, each weighing its
    # time, as TraceEvent reads the sampler's types and times
    for state in ("running", "waiting", "all"):
        st, h, body = post_trace(data, "?state=" + state)
        c.eq("state=%s: status" % state, st, 200)
        if st == 200:
            check_weights(c, "POST /traces?state=" + state, json.loads(body), "net10.0", state)
    st, h, body = post_trace(data, "?state=busy")
    c.eq("bad state: status", st, 400)
    c.eq("bad state: field", json.loads(body).get("field"), "state")
    st, h, body = post_trace(data, "?strict=maybe")
    c.eq("bad strict: status", st, 400)
    st, h, body = post_trace(data, "?strict=true")
    c.eq("strict, a trace without warnings: status", st, 200)
    # a trace whose samples no method event names: 422, naming what to record
    no_methods, _ = nt_seeds.sample_trace(1, 64 << 10, 4, 4, (7,), method=False)
    st, h, body = post_trace(no_methods)
    c.eq("no method events: status", st, 422)
    c.true("no method events: says what to record", b"rundown" in body and b"no methods" in body, body[:200])

    big = data * 6  # 2.3 MB, over max_trace_bytes = 2M
    st, h, body = post_trace(big, chunked=False)
    c.eq("over max_trace_bytes (Content-Length): status", st, 413)
    st, h, body = post_trace(big, chunked=True)
    c.eq("over max_trace_bytes (chunked): status", st, 413)
    c.true("413 names the setting", b"max_trace_bytes" in body, body)

    st, h, body = post_trace(data[: len(data) // 2])
    c.eq("truncated: status", st, 400)
    err = json.loads(body).get("error", "")
    c.true("truncated: names the block and offset", "EventBlock" in err and "(at offset 0x" in err, err)
    st, h, body = post_trace(b"not a trace at all")
    c.eq("garbage: status", st, 400)
    c.true("garbage: says why", "Nettrace" in json.loads(body).get("error", ""), body)
    st, h, body = post_trace(b"", chunked=False)
    c.eq("empty: status", st, 400)

    logged = [r for r in srv.logs() if r.get("path") == "/traces" and r.get("status") == 200]
    c.true("request log: samples counted", logged and logged[0].get("frames", 0) > 0, logged[:1])
finally:
    srv.close()

# the rate of a body streaming in: at least trace_min_rate (32 KiB/s) over
# every trace_rate_window (2 s), whatever read_timeout (2 s) says (the
# steady sender's 100 KiB/s keeps a margin on a loaded machine)
srv = Server(config=config + "read_timeout = 2\ntrace_min_rate = 32K\ntrace_rate_window = 2\n")
try:
    data = open(os.path.join(FIX, "net10.0", "workload.nettrace"), "rb").read()

    def steady():  # about 100 KiB/s: above the floor, longer than read_timeout
        for i in range(0, len(data), 16384):
            yield data[i:i + 16384]
            time.sleep(0.15)

    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("POST", "/traces", body=steady(), headers={"Content-Type": "application/octet-stream"},
                 encode_chunked=True)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    took = time.monotonic() - t0
    c.true("steady body: longer than read_timeout", took > 3, "%.1f s" % took)
    c.eq("steady body: answered", r.status, 200)
    c.true("steady body: its samples", r.status == 200 and len(json.loads(body).get("profiles", [])) > 0, body[:200])

    # a drip: 4 bytes a second, far under 32 KiB/s: closed once a window has
    # passed (and the sweeper's second)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    s.sendall(b"POST /traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data))
    t0 = time.monotonic()
    got, closed = b"", False
    for i in range(0, 80):
        try:
            s.send(data[i:i + 1])
        except OSError:
            closed = True
            break
        s.settimeout(0.25)
        try:
            got = s.recv(4096)
            closed = True
            break
        except socket.timeout:
            pass
        except OSError:
            closed = True
            break
    took = time.monotonic() - t0
    s.close()
    c.true("dripping body: closed by the server", closed and not got.startswith(b"HTTP/1.1 200"),
           "closed=%s got=%r" % (closed, got[:60]))
    c.true("dripping body: closed soon after trace_rate_window (2 s)", 1.5 < took < 8, "%.1f s" % took)
    st, h, body = srv.request("GET", "/metrics")
    closed_n = [ln for ln in body.decode().splitlines() if ln.startswith("pdbsym_http_stream_closed_total ")]
    c.true("dripping body: counted as a stream closed under its rate",
           closed_n and float(closed_n[0].split()[1]) >= 1, closed_n)
finally:
    srv.close()
    sym.close()
    sb.close()
c.done()
