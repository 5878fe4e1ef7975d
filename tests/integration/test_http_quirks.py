"""Smaller faults of issue 27, against the real `pdbsym serve`:

1. SIGHUP, three times, while a request waits for a slow upstream: the
   server logs it and goes on (before: killed at once, requests failed,
   downloads' files left); the request is answered, /health is 200, and
   SIGTERM still stops it with exit status 0.
2. /ready follows a cache folder that cannot be written: under the running
   server, the folder's file system filled (a small tmpfs, when this process
   may mount; a read-only remount is refused while SQLite holds the database
   open) or, for a user whose permissions count, the folder made read-only,
   /ready turns 503 naming the folder within 10 s, and 200 again once it can
   be written.
3. Partial transfers are network errors with the short TTL, never malformed
   files (before: 24 h): a 206 to a plain GET, a Content-Length shorter than
   the file (the MSF superblock states the file's size), two Content-Length
   headers that differ.  A native fixture's PDB behind each; the same PDB
   served whole is found, its frame as llvm-symbolizer answers it.
4. Transfer-Encoding other than chunked (`gzip, chunked`): 501 at once
   (before: no answer until the connection closed).  `Content-Length: -1` is
   refused 400 by libmicrohttpd itself, before pdbsym sees the request; the
   first status line is checked (libmicrohttpd 0.9.75 writes its error
   response's header twice: docs/concurrency.md)."""
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from native_oracle import answer_ok, manifest, rows, sym_view  # noqa: E402
from pdbsym_server import MODULE, Checks, Server, SlowUpstream, SymServer  # noqa: E402

src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
native_dir = os.path.join(src, "tests", "fixtures", "native")
c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-quirks-")


def raw(port, data, wait=3.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    s.sendall(data)
    out = b""
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < wait:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        out += b"<no end>"
    s.close()
    return out


try:
    # ---- 1. SIGHUP -------------------------------------------------------------------
    slow = SlowUpstream(3.0)
    srv = Server(env=slow.env())
    try:
        res = {}

        def waiting():
            res["st"], _, res["j"] = srv.json("POST", "/symbolicate", {
                "modules": [dict(MODULE, debug_file="hup.pdb")], "frames": [{"module": 0, "rva": 16}],
                "timeout": 10}, timeout=30)

        t = threading.Thread(target=waiting)
        t.start()
        time.sleep(0.5)
        for _ in range(3):
            srv.proc.send_signal(signal.SIGHUP)
            time.sleep(0.2)
        t.join(30)
        alive = srv.proc.poll() is None
        st, _, _ = srv.request("GET", "/health") if alive else (0, None, None)
        logged = [r for r in srv.logs() if "SIGHUP" in r.get("msg", "")]
        rc = srv.stop()
        print("SIGHUP x3 during a request: alive=%s, the request %s (%s), /health %s, %d log lines, "
              "SIGTERM exit %s" % (alive, res.get("st"), res.get("j", {}).get("modules", [{}])[0].get("status"),
                                   st, len(logged), rc))
        c.true("SIGHUP: still running", alive)
        c.eq("SIGHUP: the request in flight answered", res.get("st"), 200)
        c.eq("SIGHUP: /health", st, 200)
        c.eq("SIGHUP: logged each time", len(logged), 3)
        c.eq("SIGHUP: SIGTERM still exits 0", rc, 0)
    finally:
        srv.close()
        slow.close()

    # ---- 2. /ready and a cache folder that cannot be written ---------------------------
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt],
                             capture_output=True).returncode == 0 if os.geteuid() == 0 else False
    if os.geteuid() == 0 and not mounted:
        harness.skip_part("/ready on a read-only cache: running as root without the right to mount "
                          "(file permissions do not stop root)")
    else:
        cache = os.path.join(mnt, "cache")
        srv = Server(env={"PDBSYM_CACHE_DIR": cache})
        try:
            st0, _, _ = srv.request("GET", "/ready")

            filler = os.path.join(mnt, "filler")

            def make(writable):
                if not mounted:
                    os.chmod(cache, 0o755 if writable else 0o555)
                elif writable:
                    os.unlink(filler)
                else:  # the file system full: nothing more can be written in it
                    with open(filler, "wb") as f:
                        try:
                            while True:
                                f.write(b"\0" * (1 << 20))
                                f.flush()
                        except OSError:
                            pass

            def until(want, limit=12):
                t0 = time.monotonic()
                while time.monotonic() - t0 < limit:
                    st, _, j = srv.json("GET", "/ready")
                    if st == want:
                        return st, j, time.monotonic() - t0
                    time.sleep(0.2)
                return st, j, time.monotonic() - t0

            make(False)
            st1, j1, t1 = until(503)
            make(True)
            st2, j2, t2 = until(200)
            print("/ready: %d; cache folder unwritable (%s): %d after %.1f s (%s); writable again: %d after %.1f s"
                  % (st0, "file system full" if mounted else "chmod", st1, t1, j1.get("error"), st2, t2))
            c.eq("/ready at first", st0, 200)
            c.eq("/ready with a cache folder that cannot be written", st1, 503)
            c.true("/ready names the folder", "cannot be written" in (j1.get("error") or ""), j1)
            c.true("/ready within 10 s", t1 < 10, t1)
            c.eq("/ready once it can be written again", st2, 200)
        finally:
            srv.close()
            if mounted:
                subprocess.run(["umount", mnt])

    # ---- 3. partial transfers ------------------------------------------------------------
    row = next(r for r in manifest(native_dir) if r["expected"])
    lo, hi, frames, note = rows(native_dir, row["expected"])[0]
    data = gzip.open(os.path.join(native_dir, row["pdb"])).read()
    os.makedirs(os.path.join(tmp, "store"))
    up = SymServer(os.path.join(tmp, "store"))
    try:
        rules = {}
        mods = []
        for name, rule in (("whole", None), ("partial", {"partial": len(data) // 2}),
                           ("short", {"short_length": len(data) // 2}), ("conflict", {"conflicting_length": True})):
            n = name + ".pdb"
            up.put("%s/%s/%s" % (n, row["symkey"], n), data)
            if rule:
                rules["/%s/%s/%s" % (n, row["symkey"], n)] = rule
            mods.append({"debug_file": n, "debug_id": row["symkey"], "format": "windows"})
        up.control(rules)
        srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + up.url, "PDBSYM_OFFLINE": "false"})
        try:
            st, _, j = srv.json("POST", "/symbolicate", {
                "modules": mods, "frames": [{"module": i, "rva": "0x%x" % lo} for i in range(len(mods))],
                "timeout": 20}, timeout=60)
            ttl = {r.get("debug_file"): r.get("retry_after_s") for r in srv.logs() if r.get("msg") == "download failed"}
            for m in j["modules"]:
                print("  %-13s %-11s retry after %s s: %s" % (m["debug_file"], m["status"], ttl.get(m["debug_file"]),
                                                             (m.get("error") or "")[-80:]))
            f = j["frames"][0]
            c.true("served whole: found, llvm-symbolizer's frame",
                   j["modules"][0]["status"] == "found" and answer_ok(sym_view(f["symbols"]), frames, None), f)
            for m, want in zip(j["modules"][1:], ("206", "partial transfer", "conflicting Content-Length")):
                c.eq("%s: a fetch error, not malformed" % m["debug_file"], m["status"], "fetch_error")
                c.true("%s: says why" % m["debug_file"], want in (m.get("error") or ""), m.get("error"))
                c.eq("%s: remembered for negative_error_ttl (30 s), not 24 h" % m["debug_file"],
                     ttl.get(m["debug_file"]), 30)
        finally:
            srv.close()
    finally:
        up.close()

    # ---- 4. transfer codings and Content-Length: -1 --------------------------------------
    srv = Server()
    try:
        body = b'{"modules":[],"frames":[]}'
        out = raw(srv.port, b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Transfer-Encoding: gzip, chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        print("Transfer-Encoding: gzip, chunked -> %r" % out.split(b"\r\n", 1)[0])
        c.true("unsupported transfer coding: 501", out.startswith(b"HTTP/1.1 501"), out[:100])
        c.eq("unsupported transfer coding: one answer", out.count(b"HTTP/1.1 "), 1)
        c.true("unsupported transfer coding: says which", b"gzip, chunked" in out, out[-200:])
        out = raw(srv.port, b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: -1\r\n\r\n{}")
        print("Content-Length: -1 -> %r, %d status lines (libmicrohttpd's own answer)"
              % (out.split(b"\r\n", 1)[0], out.count(b"HTTP/1.1 ")))
        c.true("Content-Length: -1: 400", out.startswith(b"HTTP/1.1 400"), out[:100])
        st, _, _ = srv.request("GET", "/health")
        c.eq("/health after them", st, 200)
    finally:
        srv.close()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
