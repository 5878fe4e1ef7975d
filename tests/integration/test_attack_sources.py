"""Attacks by symbol servers (issue 13), against the real `pdbsym serve` and
real symbol servers on 127.0.0.1 (tests/symserver.py):

1. Redirect leak: a source with `|X-Symbol-Token: SECRET` redirects to another
   origin (the sink, another server); the sink must receive no source header,
   and the file must still be found there.  The source's own origin gets it.
2. refuse_private_redirects: redirects and file.ptr URLs to link-local and
   private addresses (also spelt as a bare number, 0xa9fea9fe) are refused on
   the resolved address, at once, and the module says why.
3. Four modules dripping from one source (2 KiB/s, Content-Length 100 MB,
   holding all of its connections) and a module only a second source has: that
   one is found within 30 s.
4. A drip past download_timeout ends the transfer (no retry), and a later
   request within the negative TTL sends no GET.
Each case checks /health answers within a second meanwhile; figures printed."""
import gzip
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import manifest  # noqa: E402
from pdbsym_server import Checks, HealthProbe, Server, SymServer  # noqa: E402

src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
native_dir = os.path.join(src, "tests", "fixtures", "native")
rows = manifest(native_dir)
c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-attack-src-")
servers = []


def pdb_of(row):
    return gzip.open(os.path.join(native_dir, row["pdb"])).read()


def module(name, row):
    return {"debug_file": name, "debug_id": row["symkey"], "format": "windows"}


def ask(srv, mods, timeout):
    frames = [{"module": i, "rva": "0x1000"} for i in range(len(mods))]
    st, _, j = srv.json("POST", "/symbolicate", {"modules": mods, "frames": frames,
                                                 "timeout": timeout}, timeout=timeout + 30)
    return st, j


try:
    for d in ("a", "b"):
        os.makedirs(os.path.join(tmp, d))
    a = SymServer(os.path.join(tmp, "a"))
    b = SymServer(os.path.join(tmp, "b"))
    servers += [a, b]

    # ---- 1. the redirect leak
    r0, r1 = rows[0], rows[1]
    leak = "leak.pdb/%s/leak.pdb" % r0["symkey"]
    b.put("real/leak.pdb", pdb_of(r0))
    a.control({"/" + leak: {"redirect": b.url + "/real/leak.pdb"}})
    same = "same.pdb/%s/same.pdb" % r1["symkey"]
    a.put("real/same.pdb", pdb_of(r1))
    a.control({"/" + same: {"redirect": "/real/same.pdb"},
               "/real/same.pdb": {"require_header": {"X-Symbol-Token": "SECRET"}}})
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s|X-Symbol-Token: SECRET" % a.url,
                      "PDBSYM_OFFLINE": "false"})
    servers.append(srv)
    st, j = ask(srv, [module("leak.pdb", r0), module("same.pdb", r1)], 20)
    got = [m["status"] for m in j["modules"]]
    print("redirect to another origin: %s; to the same origin: %s" % (got[0], got[1]))
    c.eq("found through a redirect to another origin, and one to the same origin",
         got, ["found", "found"])
    heads = b.stats()["headers"].get("/real/leak.pdb", [])
    leaked = [h for h in heads if any(k.lower() == "x-symbol-token" for k in h)]
    print("the sink saw %d request(s), %d with X-Symbol-Token" % (len(heads), len(leaked)))
    c.true("the sink was asked", len(heads) >= 1)
    c.eq("the sink never got the source's header", len(leaked), 0)
    own = a.stats()["headers"].get("/" + leak, [])
    c.true("the source's own origin got its header",
           own and all(h.get("X-Symbol-Token") == "SECRET" for h in own), own)
    srv.close()
    servers.remove(srv)

    # ---- 2. redirects and file.ptr URLs into private networks
    a.reset()
    bad = [("ll.pdb", "http://169.254.169.254/latest/meta-data", "link-local"),
           ("num.pdb", "http://0xa9fea9fe:81/x", "link-local"),
           ("ten.pdb", "http://10.255.255.1:9/x", "private"),
           ("ptr.pdb", None, "private")]
    rules = {}
    for name, target, _ in bad:
        p = "/%s/%s/%s" % (name, r0["symkey"], name)
        if target:
            rules[p] = {"redirect": target}
        else:
            a.put("%s/%s/file.ptr" % (name, r0["symkey"]), b"PATH:http://192.168.255.254:9/ptr.pdb\r\n")
    a.control(rules)
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s" % a.url, "PDBSYM_OFFLINE": "false"},
                 config="refuse_private_redirects = true\ndownload_connect_timeout = 20\n")
    servers.append(srv)
    t0 = time.monotonic()
    st, j = ask(srv, [module(n, r0) for n, _, _ in bad], 30)
    took = time.monotonic() - t0
    for (name, target, kind), m in zip(bad, j["modules"]):
        print("%-8s -> %-40s %s: %s" % (name, target or "file.ptr PATH:http://192.168.255.254:9/",
                                         m["status"], (m.get("error") or "")[:110]))
        c.true("%s refused (%s)" % (name, kind), m["status"] == "fetch_error" and
               "refused" in m.get("error", "") and kind in m.get("error", ""), m)
    print("refused in %.2fs (a connection attempt would wait up to the 20 s connect timeout)" % took)
    c.true("refused without trying to connect", took < 10, "%.1fs" % took)
    srv.close()
    servers.remove(srv)

    # ---- 3. four drips on one source, a module only the second source has
    a.reset()
    drips = []
    rules = {}
    for i in range(4):
        name = "drip%d.pdb" % i
        rules["/%s/%s/%s" % (name, rows[i]["symkey"], name)] = {"zeros": 100000000, "drip": 2048,
                                                              "chunk": 512}
        drips.append(module(name, rows[i]))
    a.control(rules)
    good_row = rows[5]
    b.put("good.pdb/%s/good.pdb" % good_row["symkey"], pdb_of(good_row))
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s;srv*%s" % (a.url, b.url),
                      "PDBSYM_OFFLINE": "false"})
    servers.append(srv)
    health = HealthProbe(srv, 0.1)
    st, j = ask(srv, drips, 2)
    c.eq("the drips are pending", [m["status"] for m in j["modules"]], ["pending"] * 4)
    t0 = time.monotonic()
    st, j = ask(srv, [module("good.pdb", good_row)], 30)
    took = time.monotonic() - t0
    health.stop()
    print("module on the second source while 4 drip from the first: %s in %.2fs"
          % (j["modules"][0]["status"], took))
    c.eq("found", j["modules"][0]["status"], "found")
    c.true("within 30 s", took < 30, "%.1fs" % took)
    c.true("/health under 1 s meanwhile", health.max() < 1.0, "slowest %.3fs" % health.max())
    srv.close()
    servers.remove(srv)

    # ---- 4. a drip past its deadline: ended, not retried, remembered
    a.reset()
    slow = "slow.pdb/%s/slow.pdb" % rows[6]["symkey"]
    a.control({"/" + slow: {"zeros": 100000000, "drip": 2048, "chunk": 512}})
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s" % a.url, "PDBSYM_OFFLINE": "false"},
                 config="download_timeout = 3\ndownload_min_rate = 1G\n")
    servers.append(srv)
    t0 = time.monotonic()
    st, j = ask(srv, [module("slow.pdb", rows[6])], 30)
    took = time.monotonic() - t0
    m = j["modules"][0]
    print("drip with download_timeout = 3: %s after %.2fs: %s" % (m["status"], took, m.get("error")))
    c.eq("the drip fails", m["status"], "fetch_error")
    c.true("on its deadline", "deadline" in (m.get("error") or ""), m)
    hits = a.hits().get("/" + slow, 0)
    c.eq("one GET, no retry", hits, 1)
    st, j = ask(srv, [module("slow.pdb", rows[6])], 30)
    c.eq("asked again: remembered", j["modules"][0]["status"], "fetch_error")
    c.eq("asked again: no GET", a.hits().get("/" + slow, 0), hits)
finally:
    for s in servers:
        s.close()
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
