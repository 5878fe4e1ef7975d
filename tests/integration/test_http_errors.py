"""Limits and errors of `pdbsym serve`: every refused request gets the right
status and a JSON body that names the problem (api.md, "Errors")."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import MODULE, Checks, Server, parse_raw_response  # noqa: E402

c = Checks()
srv = Server(config="max_frames = 5\nmax_modules = 2\nmax_body_bytes = 2048\n")
try:
    def post(body, **kw):
        return srv.request("POST", "/symbolicate", body, **kw)

    def expect_error(what, status, body_or_resp, field=None, contains=None):
        st, h, data = body_or_resp
        c.eq(what + ": status", st, status)
        c.eq(what + ": content-type", h.get("content-type"), "application/json")
        try:
            j = json.loads(data)
        except ValueError:
            c.true(what + ": body is JSON", False, repr(data[:200]))
            return None
        c.true(what + ": has error", isinstance(j.get("error"), str) and j["error"], repr(j))
        if field is not None:
            c.eq(what + ": field", j.get("field"), field)
        if contains:
            c.true(what + ": message names " + contains, contains in j.get("error", ""), repr(j))
        return j

    # routes and methods
    expect_error("unknown route", 404, srv.request("GET", "/nope"))
    expect_error("unknown route under /modules", 404, srv.request("GET", "/modules/a.pdb"))
    r = srv.request("GET", "/symbolicate")
    expect_error("GET /symbolicate", 405, r)
    c.eq("405 Allow", r[1].get("allow"), "POST")
    r = srv.request("DELETE", "/health")
    expect_error("DELETE /health", 405, r)
    c.eq("405 Allow on /health", r[1].get("allow"), "GET, HEAD")

    # bodies that are not the contract
    expect_error("empty body", 400, post(b""))
    expect_error("bad JSON", 400, post(b'{"modules": ['), contains="invalid JSON")
    expect_error("not an object", 400, post(b"[1,2]"))
    expect_error("no frames", 400, post({"modules": []}), field="frames")
    expect_error("modules not array", 400, post({"modules": {}, "frames": []}), field="modules")
    expect_error("duplicate keys", 400, post(b'{"modules":[],"modules":[],"frames":[]}'))
    ok = {"modules": [MODULE], "frames": [{"module": 0, "rva": "0x10"}]}

    def variant(frames=None, modules=None, **top):
        b = {"modules": modules if modules is not None else [MODULE],
             "frames": frames if frames is not None else ok["frames"]}
        b.update(top)
        return b

    expect_error("module index", 400, post(variant(frames=[{"module": 0, "rva": 1}, {"module": 1, "rva": 1}])),
                 field="frames[1].module")
    expect_error("module missing", 400, post(variant(frames=[{"rva": 1}])), field="frames[0].module")
    expect_error("rva type", 400, post(variant(frames=[{"module": 0, "rva": 1}] * 3 + [{"module": 0, "rva": True}])),
                 field="frames[3].rva")
    expect_error("rva decimal string", 400, post(variant(frames=[{"module": 0, "rva": "123"}])), field="frames[0].rva")
    expect_error("rva bad hex", 400, post(variant(frames=[{"module": 0, "rva": "0xzz"}])), field="frames[0].rva")
    expect_error("rva float", 400, post(variant(frames=[{"module": 0, "rva": 1.5}])), field="frames[0].rva")
    expect_error("neither rva nor token", 400, post(variant(frames=[{"module": 0}])), field="frames[0]")
    expect_error("both rva and token", 400,
                 post(variant(frames=[{"module": 0, "rva": 1, "token": "0x06000001", "il_offset": 0}])),
                 field="frames[0]")
    expect_error("managed without il_offset", 400, post(variant(frames=[{"module": 0, "token": "0x06000001"}])),
                 field="frames[0].il_offset")
    expect_error("frame not object", 400, post(variant(frames=[5])), field="frames[0]")
    j = expect_error("debug_id", 400, post(variant(modules=[dict(MODULE, debug_id="xyz")])),
                     field="modules[0].debug_id", contains="invalid debug_id: expected")
    c.true("no format directive in messages", j and "%" not in j["error"], j)
    expect_error("debug_id missing", 400, post(variant(modules=[{"debug_file": "a.pdb"}])),
                 field="modules[0].debug_id")
    expect_error("debug_file with ..", 400, post(variant(modules=[dict(MODULE, debug_file="..")])),
                 field="modules[0].debug_file")
    expect_error("debug_file control char", 400, post(variant(modules=[dict(MODULE, debug_file="a\u0001.pdb")])),
                 field="modules[0].debug_file")
    expect_error("debug_file too long", 400, post(variant(modules=[dict(MODULE, debug_file="a" * 300 + ".pdb")])),
                 field="modules[0].debug_file")
    expect_error("format", 400, post(variant(modules=[dict(MODULE, format="elf")])), field="modules[0].format")
    expect_error("code_id", 400, post(variant(modules=[dict(MODULE, code_file="a.dll", code_id="nothex")])),
                 field="modules[0].code_id")
    expect_error("timeout negative", 400, post(variant(timeout=-1)), field="timeout")
    expect_error("timeout string", 400, post(variant(timeout="5")), field="timeout")

    # limits
    expect_error("too many frames", 400, post(variant(frames=[{"module": 0, "rva": i} for i in range(6)])),
                 field="frames", contains="max_frames")
    expect_error("too many modules", 400, post(variant(modules=[MODULE] * 3)), field="modules", contains="max_modules")
    big = json.dumps(variant(frames=[{"module": 0, "rva": "0x" + "0" * 3000 + "1"}])).encode()
    expect_error("body over max_body_bytes", 413, post(big), contains="max_body_bytes")
    # the same body sent chunked (no Content-Length): refused while it streams in
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
    raw = srv.raw(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/json\r\n\r\n" + chunked)
    st, h, body = parse_raw_response(raw)
    c.eq("chunked body over the cap: status", st, 413)
    c.true("chunked 413 body is JSON", "error" in json.loads(body), repr(body))

    # a chunked body that goes on far past the cap: the server stops reading and closes
    import socket
    import time
    sk = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sk.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
               b"Content-Type: application/json\r\n\r\n")
    t0 = time.time()
    closed = False
    try:
        for _ in range(64):
            sk.sendall(b"400\r\n" + b" " * 1024 + b"\r\n")
            time.sleep(0.01)
        closed = sk.recv(4096) == b""
    except OSError:
        closed = True
    sk.close()
    c.true("endless chunked body: connection closed", closed and time.time() - t0 < 10)

    # two different Content-Length headers
    raw = srv.raw(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}")
    st, h, body = parse_raw_response(raw)
    c.eq("conflicting Content-Length: status", st, 400)
    c.true("conflicting Content-Length: JSON body", "Content-Length" in json.loads(body).get("error", ""), repr(body))

    # frames that are well-formed but cannot be looked up come back "invalid"
    st, h, j = srv.json("POST", "/symbolicate", variant(frames=[
        {"module": 0, "rva": "0x100000000"},
        {"module": 0, "token": "0x02000001", "il_offset": 0},
        {"module": 0, "rva": -1},
        {"module": 0, "rva": "0x10"}]))
    c.eq("invalid frames: status", st, 200)
    c.eq("invalid frames: statuses", [f["status"] for f in j["frames"]][:3], ["invalid"] * 3)
    c.true("invalid frames carry error", all(f.get("error") for f in j["frames"][:3]), repr(j))
    c.true("a valid frame beside them is answered", j["frames"][3]["status"] != "invalid", repr(j["frames"][3]))

    # the server is still healthy after all of this
    st, h, j = srv.json("GET", "/health")
    c.eq("health after errors", st, 200)
finally:
    srv.close()
c.done()
