"""Errors remembered (issue 13), against the real `pdbsym serve` and real
symbol servers on 127.0.0.1 (tests/symserver.py, which counts GETs):

1. An upstream that answers 500 to everything, asked twice within the
   negative TTL: one round of GETs, the second answer from memory.  And a
   module whose first two GETs get 503: requests during the retries' backoff
   join the job; three GETs in all.
2. A file with another GUID (identity mismatch): remembered the same way.
3. A captive-portal page (200, text/html) where the PDB should be: malformed,
   and tried again once negative_suspect_ttl has passed.
4. A complete, clean download with a PDB's signature that cannot be read:
   malformed, and still remembered after that (negative_malformed_ttl).
Figures printed."""
import gzip
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import manifest  # noqa: E402
from pdbsym_server import Checks, Server, SymServer  # noqa: E402

src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
native_dir = os.path.join(src, "tests", "fixtures", "native")
rows = manifest(native_dir)
c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-attack-err-")
servers = []


def ask(srv, mods, timeout=30):
    frames = [{"module": i, "rva": "0x1000"} for i in range(len(mods))]
    st, _, j = srv.json("POST", "/symbolicate", {"modules": mods, "frames": frames,
                                                 "timeout": timeout}, timeout=timeout + 30)
    return j["modules"]


try:
    for d in ("five", "up"):
        os.makedirs(os.path.join(tmp, d))
    five = SymServer(os.path.join(tmp, "five"))
    up = SymServer(os.path.join(tmp, "up"))
    servers += [five, up]
    five.control({"*": {"status": 500}})
    r0, r1 = rows[0], rows[1]
    # a mismatch: the file under r0's key is r1's PDB
    up.put("wrong.pdb/%s/wrong.pdb" % r0["symkey"], gzip.open(os.path.join(native_dir, r1["pdb"])).read())
    # a captive portal's page, and a clean download of a PDB that cannot be read
    up.put("portal.pdb/%s/portal.pdb" % r0["symkey"],
           b"<!DOCTYPE html><html><body>Please log in to the hotel network</body></html>\n")
    up.control({"/portal.pdb/%s/portal.pdb" % r0["symkey"]: {"content_type": "text/html"}})
    rnd = random.Random(7)
    up.put("broken.pdb/%s/broken.pdb" % r0["symkey"],
           b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0" + bytes(rnd.getrandbits(8) for _ in range(20000)))
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s" % five.url, "PDBSYM_OFFLINE": "false"},
                 config="negative_error_ttl = 60\ndownload_retry_base_ms = 50\n")
    servers.append(srv)

    # ---- 1. always 500
    m = {"debug_file": "five.pdb", "debug_id": r0["symkey"]}
    t0 = time.monotonic()
    a1 = ask(srv, [m])[0]
    took = time.monotonic() - t0
    g1 = five.stats()["total"]
    a2 = ask(srv, [m])[0]
    g2 = five.stats()["total"]
    print("always 500: %s in %.2fs after %d GETs; asked again: %s (from_cache %s), %d more GETs"
          % (a1["status"], took, g1, a2["status"], a2.get("from_cache"), g2 - g1))
    c.eq("500: a fetch error", a1["status"], "fetch_error")
    c.true("500: retried, with backoff, then given up", g1 >= 2, g1)
    c.eq("500 asked again within the TTL: remembered", (a2["status"], a2.get("from_cache")),
         ("fetch_error", True))
    c.eq("500 asked again within the TTL: no GET", g2, g1)
    logs = [r for r in srv.logs() if r.get("msg") == "download failed"]
    c.true("logged once as a JSON warning with its retry time",
           len(logs) == 1 and logs[0].get("retry_after_s") == 60, logs)
    srv.close()
    servers.remove(srv)

    # ---- a job waiting out a retry's backoff is joined by later requests, not restarted
    flaky = "/flaky.pdb/%s/flaky.pdb" % r0["symkey"]
    up.put(flaky[1:], gzip.open(os.path.join(native_dir, r0["pdb"])).read())
    up.control({flaky: {"status": 503, "times": 2}})
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s" % up.url, "PDBSYM_OFFLINE": "false"},
                 config="download_retry_base_ms = 1000\n")
    servers.append(srv)
    m = {"debug_file": "flaky.pdb", "debug_id": r0["symkey"], "format": "windows"}
    seen = [ask(srv, [m], 0.5)[0]["status"] for _ in range(4)]
    last = ask(srv, [m], 20)[0]
    print("503 twice, then the file: %s, then %s; GETs %d" % (seen, last["status"], up.hits().get(flaky)))
    c.eq("requests during the backoff wait for the same job", set(seen), {"pending"})
    c.eq("found after the retries", last["status"], "found")
    c.eq("one round of GETs: 2 failures and 1 success", up.hits().get(flaky), 3)
    srv.close()
    servers.remove(srv)

    # ---- 2-4 on the other upstream
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*%s" % up.url, "PDBSYM_OFFLINE": "false"},
                 config="negative_suspect_ttl = 2\nnegative_malformed_ttl = 3600\n")
    servers.append(srv)
    mods = [{"debug_file": n, "debug_id": r0["symkey"], "format": "windows"}
            for n in ("wrong.pdb", "portal.pdb", "broken.pdb")]
    paths = ["/%s/%s/%s" % (x["debug_file"], r0["symkey"], x["debug_file"]) for x in mods]
    first = ask(srv, mods)
    h1 = up.hits()
    again = ask(srv, mods)
    h2 = up.hits()
    for x, a, b, p in zip(mods, first, again, paths):
        print("%-11s %s (%s), asked again: %s, GETs %d then %d" % (
            x["debug_file"], a["status"], (a.get("error") or "")[:90], b["status"], h1.get(p, 0),
            h2.get(p, 0)))
    c.eq("mismatch: a fetch error naming the identity", (first[0]["status"],
         "not the requested" in (first[0].get("error") or "")), ("fetch_error", True))
    c.eq("portal page: malformed", first[1]["status"], "malformed")
    c.eq("broken PDB: malformed", first[2]["status"], "malformed")
    for i, what in enumerate(("mismatch", "portal page", "broken PDB")):
        c.eq("%s asked again at once: no GET" % what, h2.get(paths[i], 0), h1.get(paths[i], 0))
    time.sleep(3)  # past negative_suspect_ttl
    ask(srv, mods)
    h3 = up.hits()
    print("after 3 s: GETs portal %d -> %d, broken %d -> %d, mismatch %d -> %d" % (
        h2.get(paths[1], 0), h3.get(paths[1], 0), h2.get(paths[2], 0), h3.get(paths[2], 0),
        h2.get(paths[0], 0), h3.get(paths[0], 0)))
    c.true("the portal page is tried again after negative_suspect_ttl",
           h3.get(paths[1], 0) > h2.get(paths[1], 0))
    c.eq("the broken PDB is not (negative_malformed_ttl)", h3.get(paths[2], 0), h2.get(paths[2], 0))
    c.eq("nor the mismatch (negative_error_ttl)", h3.get(paths[0], 0), h2.get(paths[0], 0))
finally:
    for s in servers:
        try:
            s.close()
        except Exception:  # noqa: BLE001
            pass
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
