"""Hostile answers must not empty the cache (issue 27), against the real
`pdbsym serve` with a 20 MiB cache cap filled to the brim by `pdbsym cache
_fill` (about 250 modules), and a symbol server on 127.0.0.1
(tests/symserver.py):

1. answers that declare 19 MiB (past download_max_share of the cap: refused
   from its headers) and 4 MiB, and send 1 KiB (before: the declared length
   was taken from the cache's room at the first byte, and the cache evicted
   300 of 300 modules for it);
2. an endless chunked body (before: 9 modules of the cache left, then 3);
3. a body of 4 MiB of zeros under a matching Content-Length, with about
   1 MiB free: it runs out of room and has not proved to be a PDB, so
   nothing is evicted for it;
4. 50 modules no source has (before: each job's start evicted 1 MiB to keep
   room for downloads).
After each the cache still holds every module it held (`pdbsym cache list`,
the same folder read once the server has stopped), the folder never passed
the cap, and the module is a fetch error or missing.  Then a real PDB
(a native fixture) the full cache has no room for is found, with its frame
as llvm-symbolizer answers it: it proved itself, so the cache made room.
/health is probed meanwhile; figures printed."""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import answer_ok, manifest, rows, sym_view  # noqa: E402
from pdbsym_server import BIN, Checks, HealthProbe, Sampler, Server, SymServer, folder_bytes, need_binary  # noqa: E402

need_binary()
src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
native_dir = os.path.join(src, "tests", "fixtures", "native")
CAP = 20 << 20
ID = "3773E3530B2E493882ECA7324B16C2D91"
c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-attack-cache-")
cache = os.path.join(tmp, "cache")
servers = []


def env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_") or k == "PDBSYM_BIN"}
    e.update({"PDBSYM_CACHE_DIR": cache, "PDBSYM_CACHE_MAX_BYTES": str(CAP)})
    return e


def modules_cached():
    out = subprocess.run([BIN, "cache", "list"], env=env(), capture_output=True, text=True, timeout=60)
    return sum(1 for ln in out.stdout.splitlines() if "\tok\t" in ln)


def ask(srv, mods, timeout=20):
    frames = [{"module": i, "rva": "0x%x" % m.get("_rva", 0x1000)} for i, m in enumerate(mods)]
    st, _, j = srv.json("POST", "/symbolicate", {
        "modules": [{k: v for k, v in m.items() if not k.startswith("_")} for m in mods],
        "frames": frames, "timeout": timeout}, timeout=timeout + 30)
    return j


try:
    subprocess.run([BIN, "cache", "_fill", "--modules", "300", "--lines", "3000"], env=env(), check=True,
                   capture_output=True, timeout=300)
    os.makedirs(os.path.join(tmp, "store"))
    up = SymServer(os.path.join(tmp, "store"))
    servers.append(up)
    up.control({"/declared.pdb/%s/declared.pdb" % ID: {"zeros": 19 << 20, "truncate": 1024},
                "/declared4.pdb/%s/declared4.pdb" % ID: {"zeros": 4 << 20, "truncate": 1024},
                "/endless.pdb/%s/endless.pdb" % ID: {"endless": True},
                "/zeros.pdb/%s/zeros.pdb" % ID: {"zeros": 4 << 20}})

    def one(name):
        return [{"debug_file": name, "debug_id": ID, "format": "windows"}]
    cases = [("declares 19 MiB, sends 1 KiB", one("declared.pdb")),
             ("declares 4 MiB, sends 1 KiB", one("declared4.pdb")),
             ("an endless chunked body", one("endless.pdb")),
             ("4 MiB of zeros (1 MiB free)", one("zeros.pdb")),
             ("50 modules no source has", [{"debug_file": "none%d.pdb" % i, "debug_id": uuid.uuid4().hex + "1"}
                                           for i in range(50)])]
    for what, mods in cases:
        before = modules_cached()
        srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + up.url, "PDBSYM_OFFLINE": "false",
                          "PDBSYM_CACHE_DIR": cache, "PDBSYM_CACHE_MAX_BYTES": str(CAP)})
        servers.append(srv)
        disk = Sampler(lambda: folder_bytes(cache), 0.01)
        health = HealthProbe(srv, 0.1)
        j = ask(srv, mods)
        disk.stop()
        health.stop()
        srv.close()
        servers.remove(srv)
        after = modules_cached()
        statuses = sorted(set(m["status"] for m in j["modules"]))
        print("%-28s %s (%s); modules cached %d -> %d; folder at most %.2f MiB of %d; /health slowest %.3f s"
              % (what, statuses, (j["modules"][0].get("error") or "")[:90], before, after,
                 disk.max() / 2**20, CAP >> 20, health.max()))
        c.true("%s: not found" % what, set(statuses) <= {"fetch_error", "missing", "malformed"}, statuses)
        c.true("%s: the cache was full" % what, before >= 200, before)
        c.eq("%s: every module still cached" % what, after, before)
        if what.startswith("4 MiB of zeros"):
            err = j["modules"][0].get("error") or ""
            c.true("%s: out of room, nothing evicted for it" % what, "nothing evicted" in err, err)
        c.true("%s: the folder within the cap" % what, disk.max() <= CAP, disk.max())
        c.true("%s: /health under 1 s" % what, health.max() < 1.0, health.max())

    # a real PDB the full cache has no room for: it proves itself, room is made
    row = next(r for r in manifest(native_dir) if r["expected"])
    lo, hi, frames, note = rows(native_dir, row["expected"])[0]
    up.put("real.pdb/%s/real.pdb" % row["symkey"], gzip.open(os.path.join(native_dir, row["pdb"])).read())
    before = modules_cached()
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + up.url, "PDBSYM_OFFLINE": "false",
                      "PDBSYM_CACHE_DIR": cache, "PDBSYM_CACHE_MAX_BYTES": str(CAP)})
    servers.append(srv)
    j = ask(srv, [{"debug_file": "real.pdb", "debug_id": row["symkey"], "format": "windows", "_rva": lo}])
    srv.close()
    servers.remove(srv)
    after = modules_cached()
    f = j["frames"][0]
    print("a real PDB in the full cache: %s; modules cached %d -> %d" % (j["modules"][0]["status"], before, after))
    c.eq("a real PDB: found", j["modules"][0]["status"], "found")
    c.true("a real PDB: llvm-symbolizer's frame", f["status"] == "ok" and answer_ok(sym_view(f["symbols"]), frames, None), f)
    c.true("a real PDB: room made by evicting a few, not many", before - 10 <= after <= before + 1, (before, after))
finally:
    for s in servers:
        s.close()
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
