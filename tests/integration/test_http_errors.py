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
    # a module whose fields are bad fails alone (docs/contract.md, "Modules"): 200,
    # the module "invalid" with an error naming the field, its frames invalid,
    # the other module answered
    def expect_invalid_module(what, bad, field, contains):
        st, h, data = post({"modules": [bad, MODULE], "frames": [{"module": 0, "rva": 1}, {"module": 1, "rva": 2}]})
        c.eq(what + ": status", st, 200)
        try:
            j = json.loads(data)
        except ValueError:
            c.true(what + ": body is JSON", False, repr(data[:200]))
            return None
        m = j["modules"][0]
        c.eq(what + ": module status", m.get("status"), "invalid")
        c.eq(what + ": module field", m.get("field"), field)
        c.true(what + ": module error names " + contains, contains in m.get("error", ""), repr(m))
        c.eq(what + ": its frame", j["frames"][0]["status"], "invalid")
        c.true(what + ": its frame's error says why", contains in j["frames"][0].get("error", ""), repr(j["frames"][0]))
        c.true(what + ": the other module is answered", j["modules"][1].get("status") in ("missing", "found"), repr(j["modules"][1]))
        c.true(what + ": its frame is not invalid", j["frames"][1]["status"] != "invalid", repr(j["frames"][1]))
        return m

    m = expect_invalid_module("debug_id", dict(MODULE, debug_id="xyz"), "modules[0].debug_id",
                              "invalid debug_id: not a hex digit")
    c.true("no format directive in messages", m and "%" not in m["error"], m)
    expect_invalid_module("debug_id missing", {"debug_file": "a.pdb"}, "modules[0].debug_id", "debug_id is required")
    expect_invalid_module("debug_file with ..", dict(MODULE, debug_file=".."), "modules[0].debug_file", "'..'")
    expect_invalid_module("debug_file control char", dict(MODULE, debug_file="a\u0001.pdb"), "modules[0].debug_file",
                          "control character")
    expect_invalid_module("debug_file too long", dict(MODULE, debug_file="a" * 300 + ".pdb"), "modules[0].debug_file",
                          "longer than 255 bytes")
    expect_invalid_module("format", dict(MODULE, format="elf"), "modules[0].format", "format must be")
    expect_invalid_module("code_id", dict(MODULE, code_file="a.dll", code_id="nothex"), "modules[0].code_id",
                          "invalid code_id")
    expect_invalid_module("not an object", 7, "modules[0]", "must be an object")
    # a frame whose module index names no module is invalid alone
    st, h, j = srv.json("POST", "/symbolicate", variant(frames=[{"module": 0, "rva": 1}, {"module": 1, "rva": 1}]))
    c.eq("module index out of range: 200", st, 200)
    c.eq("module index out of range: that frame", (j["frames"][1]["status"], j["frames"][1].get("module")), ("invalid", 1))
    c.true("module index out of range: its error", "not in modules" in j["frames"][1].get("error", ""), repr(j))
    c.true("module index out of range: the other frame", j["frames"][0]["status"] != "invalid", repr(j))
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

    # a chunked body that goes on far past the cap: answered 413 as soon as it
    # passes it (not after the rest), then the server stops reading and closes
    import socket
    import time
    sk = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sk.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
               b"Content-Type: application/json\r\n\r\n")
    t0 = time.time()
    closed, answer, sent = False, b"", 0
    sk.setblocking(False)
    try:
        while time.time() - t0 < 10 and not closed:
            try:
                sk.send(b"400\r\n" + b" " * 1024 + b"\r\n")
                sent += 1024
            except BlockingIOError:
                pass
            try:
                got = sk.recv(4096)
                if not got:
                    closed = True
                answer += got
            except BlockingIOError:
                time.sleep(0.01)
    except OSError:
        closed = True
    sk.close()
    print("endless chunked body: %d KiB sent, answered %r, closed after %.2f s"
          % (sent // 1024, answer[:12], time.time() - t0))
    c.true("endless chunked body: answered 413 at once", answer.startswith(b"HTTP/1.1 413"), answer[:80])
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
