"""Download metrics and GET /modules.  Download metrics count download jobs, not waiting requests: several
requests for one module at once make one download (and the symbol server sees
one request per path), and a download that outlasts every request's timeout
is still counted when it settles.  Real `pdbsym serve`, the real test symbol
server (tests/symserver.py) serving a fixture PDB."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import manifest  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402

src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
native_dir = os.path.join(src, "tests", "fixtures", "native")
c = Checks()
srv = None
ss = None
try:
    import tempfile
    store = tempfile.mkdtemp(prefix="pdbsym-dl-store-")
    row = [r for r in manifest(native_dir) if r["name"] == "cpp-x64-O2"][0]
    d = os.path.join(store, "slow.pdb", row["symkey"])
    os.makedirs(d)
    with open(os.path.join(d, "slow.pdb"), "wb") as f:
        f.write(gzip.open(os.path.join(native_dir, row["pdb"])).read())
    ss = subprocess.Popen([sys.executable, os.path.join(src, "tests", "symserver.py"), store,
                           "--exit-with-parent"], stdout=subprocess.PIPE, text=True)
    port = int(ss.stdout.readline().split()[1])
    base = "http://127.0.0.1:%d" % port
    # the PDB (80 KiB) trickles out over about 2 s
    rule = {"/slow.pdb/%s/slow.pdb" % row["symkey"]: {"drip": 40000, "chunk": 4096}}
    urllib.request.urlopen(urllib.request.Request(base + "/_control", data=json.dumps(rule).encode(),
                                                  method="POST")).read()
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + base, "PDBSYM_OFFLINE": "false"})

    def metrics():
        st, h, body = srv.request("GET", "/metrics")
        out = {}
        for ln in body.decode().splitlines():
            if ln and not ln.startswith("#"):
                k, v = ln.rsplit(" ", 1)
                out[k] = float(v)
        return out

    before = metrics()
    mod = {"debug_file": "slow.pdb", "debug_id": row["symkey"], "format": "windows"}
    answers = []

    def ask(timeout):
        st, h, j = srv.json("POST", "/symbolicate", {"modules": [mod], "frames": [{"module": 0, "rva": "0x1010"}],
                                                      "timeout": timeout}, timeout=60)
        answers.append((st, j["modules"][0]["status"]))

    # four requests at once that give up before the download ends, then wait
    threads = [threading.Thread(target=ask, args=(0.3,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c.eq("impatient requests are pending", sorted(a[1] for a in answers), ["pending"] * 4)
    st, h, info = srv.json("GET", "/modules/slow.pdb/%s" % row["symkey"])
    c.eq("/modules shows the running download", (st, info.get("status")), (200, "pending"))
    deadline = time.time() + 30
    while time.time() < deadline and metrics().get('pdbsym_downloads_total{outcome="found"}', 0) == \
            before.get('pdbsym_downloads_total{outcome="found"}', 0):
        time.sleep(0.2)
    after = metrics()
    c.eq("one download counted for four waiting requests",
         after.get('pdbsym_downloads_total{outcome="found"}', 0) - before.get('pdbsym_downloads_total{outcome="found"}', 0), 1)
    c.eq("one duration observed",
         after["pdbsym_download_duration_seconds_count"] - before["pdbsym_download_duration_seconds_count"], 1)
    c.true("the duration covers the slow transfer",
           after["pdbsym_download_duration_seconds_sum"] - before["pdbsym_download_duration_seconds_sum"] > 0.5)
    with urllib.request.urlopen(base + "/_stats") as r:
        hits = json.load(r)["hits"]
    c.eq("the symbol server served the PDB once", hits.get("/slow.pdb/%s/slow.pdb" % row["symkey"]), 1)
    st, h, info = srv.json("GET", "/modules/slow.pdb/%s" % row["symkey"])
    c.eq("/modules shows the module once stored", (st, info.get("status"), info.get("cached")), (200, "found", True))
    # a module the symbol server does not have: remembered as missing
    gone = {"debug_file": "gone.pdb", "debug_id": "00112233445566778899AABBCCDDEEFF1", "format": "windows"}
    st, h, j = srv.json("POST", "/symbolicate", {"modules": [gone], "frames": [{"module": 0, "rva": 1}], "timeout": 10})
    c.eq("a missing module", j["modules"][0]["status"], "missing")
    st, h, info = srv.json("GET", "/modules/gone.pdb/00112233445566778899AABBCCDDEEFF1?format=windows")
    c.eq("/modules shows the negative entry", (st, info.get("status")), (200, "missing"))
    c.true("with its error", bool(info.get("error")), info)
    st, h, info = srv.json("GET", "/modules/never.pdb/00112233445566778899AABBCCDDEEFF1")
    c.eq("/modules of an unknown module", (st, info.get("status")), (404, "unknown"))
    answers.clear()
    ask(5)
    c.eq("the retry is answered from the cache", answers, [(200, "found")])
    c.eq("no further download", metrics().get('pdbsym_downloads_total{outcome="found"}', 0),
         after.get('pdbsym_downloads_total{outcome="found"}', 0))
finally:
    if srv:
        srv.stop()
        srv.close()
    if ss:
        ss.kill()
    shutil.rmtree(store, ignore_errors=True)
sys.exit(c.done())
