#!/usr/bin/env python3
"""Fault modes of a symbol server against `pdbsym fetch` run as a process:
404 (no retry), 500 then success, 500 always, a reset connection, a truncated
body, a slow drip (under and over the low-speed limit), a stalled server, a
redirect loop, redirects to other schemes, an endless chunked body, a body
over the size cap, a CAB that inflates past its cap, a refused connection.
Each checks the exit status, the hit counts on the server, and that no
temporary file is left behind; timings are printed."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetchlib import DEBUG_ID, KEY, Checker, Server, cabmake, fake_pdb, fetch, put  # noqa: E402

FAST = ["--retry-base-ms", "100", "--connect-timeout-ms", "2000"]


def main():
    c = Checker("test_fetch_faults")
    root = os.path.join(c.tmp, "store")
    outdir = os.path.join(c.tmp, "out")
    os.makedirs(root)
    os.makedirs(outdir)
    srv = Server(root)
    out = os.path.join(outdir, "got.pdb")
    body = fake_pdb(200000, seed=3)
    plain = "/foo.pdb/%s/foo.pdb" % KEY
    put(root, plain[1:], body)

    def run(name, rules, extra=None, args=None, sp=None):
        if os.path.exists(out):
            os.unlink(out)
        srv.reset()
        srv.control(rules)
        a = args or ["foo.pdb", DEBUG_ID, "--format", "windows"]
        rc, so, se, dt = fetch(a + FAST + (extra or []), sp or srv.url, out)
        h = srv.hits()
        print("%-26s rc=%d %5.2fs hits=%s %s" % (name, rc, dt, sum(h.values()),
                                                (so.strip() or se.strip())[:150]), flush=True)
        c.no_temp_files(outdir, ["got.pdb"] if rc == 0 else [])
        return rc, se, dt, h

    def ok():
        with open(out, "rb") as f:
            return f.read() == body

    # 404 on every variant: each probed once, never retried
    rc, se, dt, h = run("404 everywhere", {}, args=["nothere.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 1 and "not found" in se, "404: not found")
    # every layout real stores use, each path once: the key as Microsoft's server and
    # symstore write it (age 1A upper; symstore.exe's age in lower case, 1a), .pd_,
    # file.ptr, SSQP's all-lower path, and the two-tier index2 forms of both casings
    want = set()
    for k in (KEY, KEY[:-2] + KEY[-2:].lower()):
        for pre in ("", "no/"):
            for f in ("nothere.pdb", "nothere.pd_", "file.ptr"):
                want.add("/%snothere.pdb/%s/%s" % (pre, k, f))
    want.add("/nothere.pdb/%s/nothere.pdb" % KEY.lower())
    c.check(set(h) == want and all(v == 1 for v in h.values()),
            "404: %d paths, once each (%s)" % (len(want), h))

    # 500 twice, then the file: retried with backoff, one source request per try
    rc, se, dt, h = run("500 then success", {plain: {"status": 500, "times": 2}})
    c.check(rc == 0 and ok(), "500x2: fetched")
    c.check(h == {plain: 3}, "500x2: three requests, no other variant (%s)" % h)
    c.check(dt >= 0.2, "500x2: backed off (100 ms then 200 ms, +-25%%) took %.2fs" % dt)

    # 500 always: retries exhausted, the source is given up (no other variant)
    rc, se, dt, h = run("500 always", {plain: {"status": 500}}, ["--retries", "2"])
    c.check(rc == 1 and "HTTP 500" in se, "500 always: error (%s)" % se.strip())
    c.check(h == {plain: 3}, "500 always: 1 + 2 retries (%s)" % h)

    # 503 on the first source, the second has it
    other = os.path.join(c.tmp, "other")
    put(other, plain[1:], body)
    rc, se, dt, h = run("503 then next source", {plain: {"status": 503}}, ["--retries", "1"],
                        sp="srv*%s;%s" % (srv.url, other))
    c.check(rc == 0 and ok(), "failing source skipped, the next one serves")

    # two HTTP sources at once: the first fails and waits to retry, the second
    # (a little slower) has the file; the first's retry is cancelled, its
    # .part removed (no_temp_files in run())
    other_srv = Server(other)
    srv.reset()
    other_srv.control({plain: {"delay": 0.3}})
    rc, se, dt, h = run("503 while another serves", {plain: {"status": 503}},
                        ["--retries", "3", "--retry-base-ms", "2000"],
                        sp="srv*%s;srv*%s" % (srv.url, other_srv.url))
    c.check(rc == 0 and ok() and dt < 1.5, "the second source serves at once (%.2fs)" % dt)
    other_srv.stop()

    # 403 is an error but not retried
    rc, se, dt, h = run("403", {plain: {"status": 403}})
    c.check(rc == 1 and h == {plain: 1}, "403: error, one request (%s)" % h)

    # a reset connection, once
    rc, se, dt, h = run("reset once", {plain: {"reset": True, "times": 1}})
    c.check(rc == 0 and ok() and h == {plain: 2}, "reset: retried once and fetched (%s)" % h)

    # a truncated body (Content-Length says more), once then always
    rc, se, dt, h = run("truncated once", {plain: {"truncate": 5000, "times": 1}})
    c.check(rc == 0 and ok() and h == {plain: 2}, "truncated once: retried (%s)" % h)
    rc, se, dt, h = run("truncated always", {plain: {"truncate": 5000}}, ["--retries", "1"])
    c.check(rc == 1 and h == {plain: 2} and not os.path.exists(out),
            "truncated always: error after 1 retry (%s)" % h)

    # a slow drip under the low-speed limit (2 KB/s < 20 KB/s for 1 s): aborted
    rc, se, dt, h = run("drip under limit", {plain: {"drip": 2000, "chunk": 200}},
                        ["--low-speed-time", "1", "--low-speed-limit", "20000", "--retries", "1"])
    c.check(rc == 1 and "timed out" in se.lower(), "slow drip: timed out (%s)" % se.strip())
    c.check(h == {plain: 1}, "slow drip: not retried, a slow source stays slow (%s)" % h)
    c.check(dt < 10, "slow drip: gave up in %.1fs" % dt)
    # a drip over the limit completes
    rc, se, dt, h = run("drip over limit", {plain: {"drip": 400000, "chunk": 8192}},
                        ["--low-speed-time", "2", "--low-speed-limit", "1000"])
    c.check(rc == 0 and ok(), "drip above the limit: fetched in %.1fs" % dt)

    # a server that accepts and then says nothing
    rc, se, dt, h = run("stalled", {plain: {"delay": 4}},
                        ["--low-speed-time", "1", "--retries", "-1"])
    c.check(rc == 1 and dt < 3.5 and h == {plain: 1}, "stalled server: timed out in %.1fs" % dt)

    # the same, caught by the first-byte deadline (download_first_byte_timeout,
    # read from the environment as serve reads it), retried once
    srv.reset()
    srv.control({plain: {"delay": 4}})
    rc, so, se, dt = fetch(["foo.pdb", DEBUG_ID, "--format", "windows", "--retries", "1",
                            "--retry-base-ms", "100"], srv.url, out,
                           env_extra={"PDBSYM_DOWNLOAD_FIRST_BYTE_TIMEOUT": "1"})
    h = srv.hits()
    print("%-26s rc=%d %5.2fs hits=%s %s" % ("first-byte deadline", rc, dt, sum(h.values()),
                                            se.strip()[:150]), flush=True)
    c.check(rc == 1 and "no answer within 1000 ms" in se and h == {plain: 2} and dt < 3.9,
            "first-byte deadline: timed out twice in %.1fs (%s)" % (dt, h))

    # a redirect loop: stopped at the redirect limit, not retried
    rc, se, dt, h = run("redirect loop", {plain: {"redirect_loop": True}}, ["--max-redirects", "3"])
    c.check(rc == 1 and "redirect" in se.lower(), "redirect loop: error (%s)" % se.strip())
    c.check(h == {plain: 4}, "redirect loop: 1 + 3 redirects (%s)" % h)
    # a redirect within http is followed
    put(root, "moved/foo.pdb", body)
    rc, se, dt, h = run("redirect ok", {plain: {"redirect": "/moved/foo.pdb"}})
    c.check(rc == 0 and ok(), "redirect to another path: followed")
    # redirects to other schemes are refused
    for target in ["file:///etc/passwd", "ftp://127.0.0.1/foo.pdb", "gopher://127.0.0.1/x"]:
        rc, se, dt, h = run("redirect " + target.split(":")[0],
                            {plain: {"redirect": target}})
        c.check(rc == 1 and not os.path.exists(out) and h == {plain: 1},
                "redirect to %s refused, not retried (%s)" % (target, se.strip()))

    # an endless chunked body: stopped by the cap counted in the write callback
    rc, se, dt, h = run("endless chunked", {plain: {"endless": True}}, ["--max-bytes", "3000000"])
    c.check(rc == 1 and "cap" in se, "endless body: refused at the cap (%s)" % se.strip())
    c.check(h == {plain: 1} and dt < 10, "endless body: one request, %.1fs" % dt)
    # a chunked body (no Content-Length) over the cap, and one under it
    rc, se, dt, h = run("chunked over cap", {plain: {"chunked": True}}, ["--max-bytes", "100000"])
    c.check(rc == 1 and "cap" in se, "chunked body over the cap refused")
    rc, se, dt, h = run("chunked under cap", {plain: {"chunked": True}}, ["--max-bytes", "300000"])
    c.check(rc == 0 and ok(), "chunked body under the cap fetched")
    # a Content-Length over the cap
    rc, se, dt, h = run("length over cap", {}, ["--max-bytes", "1000"])
    c.check(rc == 1 and "cap" in se and h == {plain: 1}, "declared length over the cap refused")

    # gzip content encoding: decoded, and the cap counts decoded bytes
    rc, se, dt, h = run("gzip body", {plain: {"gzip": True}})
    c.check(rc == 0 and ok(), "gzip-encoded body decoded")
    put(root, "zeros/foo.pdb", b"\0" * (16 << 20))
    rc, se, dt, h = run("gzip bomb", {plain: {"gzip": True, "body_from": "/zeros/foo.pdb"}},
                        ["--max-bytes", str(1 << 20)])
    c.check(rc == 1 and "cap" in se, "gzip body inflating past the cap refused (%s)" % se.strip())

    # a body that is another PDB: with no PDB reader merged yet the CLI
    # accepts any file; the unit test test_fetch_server checks the verify path.
    put(root, "another/other.pdb", fake_pdb(30000, seed=9))
    rc, se, dt, h = run("another PDB (unverified)", {plain: {"body_from": "/another/other.pdb"}})
    c.check(rc == 0, "another PDB: accepted until the identity check is live")

    # a CAB that inflates past its cap: refused, nothing left behind
    zeros = b"\0" * (8 << 20)
    put(root, "bomb.pdb/%s/bomb.pd_" % KEY, cabmake.make_cab([("bomb.pdb", zeros)]))
    rc, se, dt, h = run("cab over inflate cap", {},
                        ["--max-inflated", str(1 << 20)],
                        args=["bomb.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 1 and "cap" in se, "cab bomb refused (%s)" % se.strip())
    rc, se, dt, h = run("cab under inflate cap", {}, ["--max-inflated", str(8 << 20)],
                        args=["bomb.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and os.path.getsize(out) == len(zeros), "cab at the cap extracted")
    # a corrupt cabinet
    put(root, "bad.pdb/%s/bad.pd_" % KEY, cabmake.make_cab([("bad.pdb", body)])[:3000])
    rc, se, dt, h = run("truncated cab", {}, args=["bad.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 1, "truncated cabinet refused (%s)" % se.strip())

    # a refused connection: retried, then an error
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = "http://127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    rc, se, dt, h = run("connection refused", {}, ["--retries", "2"], sp=dead)
    c.check(rc == 1 and dt >= 0.2, "refused connection: error after retries (%.2fs)" % dt)

    # throughput from the local server
    big = fake_pdb(1 << 20, seed=5) * 64
    put(root, "big.pdb/%s/big.pdb" % KEY, big)
    rc, se, dt, h = run("throughput 64 MiB", {}, args=["big.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and os.path.getsize(out) == len(big), "64 MiB fetched")
    print("throughput: %.0f MiB/s (64 MiB in %.2fs, python http.server)" % (64 / dt, dt))

    srv.stop()
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
