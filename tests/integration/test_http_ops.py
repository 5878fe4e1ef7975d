"""Operations routes of `pdbsym serve`: /health, /ready, /metrics, /modules,
request ids and JSON-line logs, and where settings come from (environment,
config file, flags)."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import MODULE, Checks, Server  # noqa: E402

c = Checks()


def metrics(srv):
    st, h, body = srv.request("GET", "/metrics")
    c.eq("metrics status", st, 200)
    c.true("metrics content type", h.get("content-type", "").startswith("text/plain; version=0.0.4"), h)
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$', line)
        c.true("metrics line is Prometheus text", m is not None, repr(line))
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


srv = Server()
try:
    st, h, j = srv.json("GET", "/health")
    c.eq("health", (st, j), (200, {"status": "ok"}))
    st, h, body = srv.request("HEAD", "/health")
    c.eq("HEAD health", st, 200)
    st, h, j = srv.json("GET", "/ready")
    c.eq("ready", (st, j.get("status")), (200, "ready"))

    # request ids: ours when the client gives none, the client's when it is sane
    st, h, _ = srv.request("GET", "/health")
    ours = h.get("x-request-id", "")
    c.true("generated request id", re.match(r"^[0-9a-f]{8}-[0-9a-f]{8}$", ours) is not None, ours)
    st, h, _ = srv.request("GET", "/health", headers={"X-Request-Id": "abc-123"})
    c.eq("client request id echoed", h.get("x-request-id"), "abc-123")
    st, h, _ = srv.request("GET", "/health", headers={"X-Request-Id": "bad id\x7f"})
    c.true("unsafe request id replaced", h.get("x-request-id") != "bad id\x7f", h)

    before = metrics(srv)
    body = {"modules": [MODULE], "frames": [{"module": 0, "rva": "0x10"}, {"module": 0, "token": 100663297, "il_offset": "0x6"}]}
    st, h, j = srv.json("POST", "/symbolicate", body, headers={"X-Request-Id": "sym-1"})
    c.eq("symbolicate status", st, 200)
    c.eq("frames answered in order", [f.get("rva", f.get("token")) for f in j["frames"]], ["0x10", "0x06000001"])
    c.eq("il_offset echoed as integer", j["frames"][1]["il_offset"], 6)
    c.eq("module answer", {k: j["modules"][0][k] for k in ("debug_file", "debug_id")},
         {"debug_file": "demo.pdb", "debug_id": "3773e353-0b2e-4938-82ec-a7324b16c2d9-1"})
    c.true("module status is one of the contract's", j["modules"][0]["status"] in
           ("found", "missing", "malformed", "fetch_error", "pending"), j["modules"][0])
    srv.request("GET", "/nope")
    after = metrics(srv)
    key = 'pdbsym_http_requests_total{route="/symbolicate",code="200"}'
    c.eq("requests counter grew", after.get(key, 0) - before.get(key, 0), 1)
    c.eq("404 counted", after.get('pdbsym_http_requests_total{route="other",code="404"}'), 1)
    # a request is counted before its client has the answer: a client that
    # reads its answer and then asks /metrics on another connection sees it
    # (it was once counted only when libmicrohttpd finished the connection,
    # which a quick client could overtake)
    late = []
    for i in range(2, 202):
        srv.request("GET", "/nope")
        st, h, body = srv.request("GET", "/metrics")
        m = re.search(rb'pdbsym_http_requests_total\{route="other",code="404"\} (\d+)', body)
        if not m or int(m.group(1)) != i:
            late.append((i, m and int(m.group(1))))
    c.eq("every answered request counted before its answer is read", late, [])
    fs = sum(v for k, v in after.items() if k.startswith("pdbsym_frames_total")) - \
        sum(v for k, v in before.items() if k.startswith("pdbsym_frames_total"))
    c.eq("frames counted", fs, 2)
    for name in ("pdbsym_http_requests_in_flight", "pdbsym_cache_hits_total", "pdbsym_cache_misses_total",
                 "pdbsym_cache_bytes", 'pdbsym_downloads_total{outcome="found"}',
                 'pdbsym_download_duration_seconds_bucket{le="+Inf"}', "pdbsym_download_duration_seconds_count"):
        c.true("metric " + name, name in after, sorted(after)[:5])

    # a module listed twice is resolved once (and counted once)
    m0 = sum(v for k, v in after.items() if k.startswith("pdbsym_modules_total"))
    st, h, j = srv.json("POST", "/symbolicate", {"modules": [MODULE, dict(MODULE, debug_file="demo.pdb")],
                                                 "frames": [{"module": 0, "rva": 1}, {"module": 1, "rva": 1}]})
    c.eq("duplicate module entries answered alike", j["modules"][0], j["modules"][1])
    m1 = sum(v for k, v in metrics(srv).items() if k.startswith("pdbsym_modules_total"))
    c.eq("duplicate module entries resolved once", m1 - m0, 1)

    # /modules: what the cache knows; nothing here yet
    st, h, j = srv.json("GET", "/modules/demo.pdb/3773E3530B2E493882ECA7324B16C2D91")
    c.true("modules route answers", st in (200, 404), st)
    c.eq("modules debug id canonical", j.get("debug_id"), "3773e353-0b2e-4938-82ec-a7324b16c2d9-1")
    st, h, j = srv.json("GET", "/modules/demo.pdb/nothex")
    c.eq("modules bad id", (st, j.get("field")), (400, "debug_id"))
    st, h, j = srv.json("GET", "/modules/demo.pdb/3773E3530B2E493882ECA7324B16C2D91?format=elf")
    c.eq("modules bad format", (st, j.get("field")), (400, "format"))

    # logs: JSON lines, one per request, with the request id
    srv.request("GET", "/health")
    recs = [r for r in srv.logs() if r.get("msg") == "request"]
    c.true("every log line has ts and level", all("ts" in r and "level" in r for r in srv.logs()))
    sym = [r for r in recs if r.get("request_id") == "sym-1"]
    c.eq("symbolicate logged once", len(sym), 1)
    if sym:
        c.eq("log fields", {k: sym[0].get(k) for k in ("method", "path", "status", "frames", "modules")},
             {"method": "POST", "path": "/symbolicate", "status": 200, "frames": 2, "modules": 1})
finally:
    rc = srv.stop()
    c.eq("exit status after SIGTERM", rc, 0)
    srv.close()

# settings: defaults < environment < config file < flags
need = Server(env={"PDBSYM_MAX_FRAMES": "3", "PDBSYM_MAX_MODULES": "3"}, config="max_modules = 2\n",
              args=["--max-body-bytes", "4k"])
try:
    fr = [{"module": 0, "rva": i} for i in range(4)]
    st, h, j = need.json("POST", "/symbolicate", {"modules": [MODULE], "frames": fr})
    c.eq("environment sets max_frames", (st, j.get("field")), (400, "frames"))
    st, h, j = need.json("POST", "/symbolicate", {"modules": [MODULE] * 3, "frames": []})
    c.eq("config file overrides the environment", (st, j.get("field")), (400, "modules"))
    st, h, j = need.json("POST", "/symbolicate", {"modules": [MODULE] * 2, "frames": []})
    c.eq("under the config file's limit", st, 200)
    st, h, body = need.request("POST", "/symbolicate", b" " * 5000)
    c.eq("flag sets max_body_bytes (4k)", st, 413)
finally:
    need.close()

# a bad setting is refused at start with exit status 2
import subprocess  # noqa: E402
p = subprocess.run([os.environ["PDBSYM_BIN"], "serve", "--max-frames", "many"], capture_output=True, text=True)
c.eq("bad flag value exit status", p.returncode, 2)
c.true("bad flag value message", "max_frames" in p.stderr, p.stderr)
p = subprocess.run([os.environ["PDBSYM_BIN"], "serve", "--no-such-thing", "1"], capture_output=True, text=True)
c.eq("unknown flag exit status", p.returncode, 2)
c.done()
