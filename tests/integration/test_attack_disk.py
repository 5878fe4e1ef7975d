"""Attacks on the disk (issue 13), against the real `pdbsym serve` with a
16 MiB cache cap and real symbol servers on 127.0.0.1 (tests/symserver.py):

1. Bombs: a gzip-encoded body that inflates to 1 GiB, an endless chunked
   body, and a .pd_ cabinet whose member inflates to 64 MiB.  The cache
   folder (database, WAL, download area), sampled every 10 ms, never holds
   more than the cap, nor a download more than download_max_share (25 %) of
   it; each module fails naming the limit, with a JSON warning in the log;
   /health answers within a second meanwhile.
2. A FIFO where a folder store has a module: refused (never opened for
   reading, so nothing blocks), the module fails naming it.
3. kill -9 in the middle of a download leaves a .part file; `pdbsym cache
   verify` reports it, `cache verify --fix` removes it; `cache clear` removes
   the next one; a restart removes the third.  A running server's own
   download area is never touched by them.
4. A full cache (8 MiB, filled by `pdbsym cache _fill`) and a 6.3 MiB PDB (the
   corpus's basic32, unpacked by cabextract; skipped without ../shared/corpus):
   the download does not fit beside the database, so the cache evicts to make
   room, once, and the module is found (download_max_share = 100: this
   download is most of the cap).
Figures printed."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from pdbsym_server import BIN, Checks, HealthProbe, Sampler, Server, SymServer, folder_bytes  # noqa: E402

src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(src, "tests"))
sys.dont_write_bytecode = True
import cabmake  # noqa: E402

CAP = 16 << 20
ID = "3773E3530B2E493882ECA7324B16C2D91"
c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-attack-disk-")
servers = []


def mod(name):
    return {"debug_file": name, "debug_id": ID, "format": "windows"}


def ask(srv, mods, timeout):
    frames = [{"module": i, "rva": "0x1000"} for i in range(len(mods))]
    st, _, j = srv.json("POST", "/symbolicate", {"modules": mods, "frames": frames,
                                                 "timeout": timeout}, timeout=timeout + 30)
    return j


def parts(cache):
    out = []
    for d, _, files in os.walk(os.path.join(cache, "tmp")):
        out += [os.path.join(d, n) for n in files if n.endswith(".part")]
    return out


try:
    os.makedirs(os.path.join(tmp, "store"))
    up = SymServer(os.path.join(tmp, "store"))
    servers.append(up)

    # ---- 1. bombs
    up.put("cab.pdb/%s/cab.pd_" % ID, cabmake.make_cab([("cab.pdb", b"\0" * (64 << 20))]))
    up.control({"/gz.pdb/%s/gz.pdb" % ID: {"gzip_zeros": 1 << 30},
                "/endless.pdb/%s/endless.pdb" % ID: {"endless": True}})
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + up.url, "PDBSYM_OFFLINE": "false",
                      "PDBSYM_CACHE_MAX_BYTES": str(CAP)})
    servers.append(srv)
    cache = os.path.join(srv.tmp, "cache")
    for name, want in (("gz.pdb", "cap"), ("endless.pdb", "cap"), ("cab.pdb", "cap")):
        disk = Sampler(lambda: folder_bytes(cache), 0.01)
        health = HealthProbe(srv, 0.1)
        t0 = time.monotonic()
        j = ask(srv, [mod(name)], 60)
        took = time.monotonic() - t0
        disk.stop()
        health.stop()
        m = j["modules"][0]
        print("%-12s %s in %.2fs, cache folder at most %.1f MiB (cap %d MiB): %s" % (
            name, m["status"], took, disk.max() / 1048576.0, CAP >> 20, (m.get("error") or "")[:120]))
        c.eq("%s fails" % name, m["status"], "fetch_error")
        c.true("%s: the error names the limit" % name, want in (m.get("error") or ""), m)
        c.true("%s: never more than the cap on disk" % name, disk.max() <= CAP,
               "%d bytes" % disk.max())
        c.true("%s: never more than a quarter of the cap (download_max_share) beside the database" % name,
               disk.max() - disk.values[0] <= CAP // 4 + (1 << 20), "%d bytes" % (disk.max() - disk.values[0]))
        c.true("%s: /health under 1 s meanwhile" % name, health.max() < 1.0, "%.3fs" % health.max())
        c.eq("%s: nothing left in the download area" % name, parts(cache), [])
    warns = [r for r in srv.logs() if r.get("msg") == "download failed" and r.get("level") == "warn"]
    c.eq("a JSON warning per failed download, with its reason",
         sorted(w.get("debug_file") for w in warns if w.get("error")),
         ["cab.pdb", "endless.pdb", "gz.pdb"])
    srv.close()
    servers.remove(srv)

    # ---- 2. a FIFO in a folder store
    folder = os.path.join(tmp, "folder")
    os.makedirs(os.path.join(folder, "fifo.pdb", ID))
    os.mkfifo(os.path.join(folder, "fifo.pdb", ID, "fifo.pdb"))
    srv = Server(env={"PDBSYM_SYMBOL_PATH": folder, "PDBSYM_OFFLINE": "false"})
    servers.append(srv)
    t0 = time.monotonic()
    j = ask(srv, [mod("fifo.pdb")], 20)
    m = j["modules"][0]
    print("FIFO in a folder store: %s in %.2fs: %s" % (m["status"], time.monotonic() - t0, m.get("error")))
    c.eq("FIFO refused", (m["status"], "not a regular file" in (m.get("error") or "")),
         ("fetch_error", True))
    st, _, _ = srv.request("GET", "/health", timeout=5)
    c.eq("healthy after the FIFO", st, 200)
    srv.close()
    servers.remove(srv)

    # ---- 3. kill -9 mid-download
    up.control({"/slow.pdb/%s/slow.pdb" % ID: {"zeros": 50000000, "drip": 200000, "chunk": 8192}})
    cache = os.path.join(tmp, "cache")
    env = {"PDBSYM_SYMBOL_PATH": "srv*" + up.url, "PDBSYM_OFFLINE": "false", "PDBSYM_CACHE_DIR": cache}

    def killed_mid_download():
        s = Server(env=env)
        ask(s, [mod("slow.pdb")], 0)
        deadline = time.time() + 20
        while time.time() < deadline and not any(os.path.getsize(p) > 0 for p in parts(cache)):
            time.sleep(0.05)
        left = parts(cache)
        s.proc.kill()
        s.proc.wait()
        s.log_file.close()
        shutil.rmtree(s.tmp, ignore_errors=True)
        return left

    def cli(*args):
        e = dict(os.environ)
        e.update(env)
        return subprocess.run([BIN, "cache"] + list(args), capture_output=True, text=True, env=e,
                              timeout=60)

    left = killed_mid_download()
    c.true("kill -9 left a .part", len(left) == 1, left)
    # a running server's download area is not an ended process's
    live = Server(env=env)
    servers.append(live)
    ask(live, [mod("slow.pdb")], 0)
    deadline = time.time() + 20
    while time.time() < deadline and len(parts(cache)) < 1:
        time.sleep(0.05)
    c.eq("the restart removed the killed process's .part, its own is there", len(parts(cache)), 1)
    r = cli("verify")
    print("cache verify, with a server downloading: exit %d: %s" % (r.returncode, r.stdout.strip()))
    c.true("cache verify leaves a running server's download alone",
           r.returncode == 0 and len(parts(cache)) == 1, r.stdout)
    live.proc.kill()
    live.proc.wait()
    live.log_file.close()
    shutil.rmtree(live.tmp, ignore_errors=True)
    servers.remove(live)
    r = cli("verify")
    print("cache verify after kill -9: exit %d: %s" % (r.returncode, r.stdout.strip()))
    c.true("cache verify reports the .part", r.returncode == 1 and "unfinished download" in r.stdout,
           r.stdout)
    r = cli("verify", "--fix")
    c.true("cache verify --fix removes it", r.returncode == 0 and parts(cache) == [], r.stdout)
    left = killed_mid_download()
    c.true("kill -9 again left a .part", len(left) == 1, left)
    r = cli("clear")
    c.true("cache clear removes it", r.returncode == 0 and parts(cache) == [], r.stdout)
    left = killed_mid_download()
    c.true("kill -9 a third time left a .part", len(left) == 1, left)
    s = Server(env=env)
    servers.append(s)
    print("restart after kill -9: .part files %d before, %d after" % (len(left), len(parts(cache))))
    c.eq("a restart removes it", parts(cache), [])
    c.true("and says so in its log", any(rec.get("msg") == "removed unfinished downloads"
                                         for rec in s.logs()), json.dumps(s.logs())[:300])
    s.close()
    servers.remove(s)
    # ---- 4. a full cache makes room for a download that does not fit beside it
    corpus_pd = os.path.join(src, "..", "shared", "corpus", "other", "dump_syms", "basic32.pd_")
    if not (os.path.exists(corpus_pd) and shutil.which("cabextract")):
        harness.skip_part("full cache: ../shared/corpus or cabextract absent")
    else:
        key32 = "34060D222DBB44E5AA72243CE8326C2F2"
        ex = os.path.join(tmp, "cabx")
        subprocess.run(["cabextract", "-q", "-d", ex, corpus_pd], check=True)
        big = open(os.path.join(ex, "basic32.pdb"), "rb").read()
        up.put("basic32.pdb/%s/basic32.pdb" % key32, big)
        full = os.path.join(tmp, "full")
        cap = 8 << 20
        e = dict(os.environ)
        e.update({"PDBSYM_CACHE_DIR": full, "PDBSYM_CACHE_MAX_BYTES": str(cap)})
        subprocess.run([BIN, "cache", "_fill", "--modules", "9", "--lines", "40000"], env=e,
                       check=True, capture_output=True, timeout=120)
        filled = folder_bytes(full)
        s = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + up.url, "PDBSYM_OFFLINE": "false",
                        "PDBSYM_CACHE_DIR": full, "PDBSYM_CACHE_MAX_BYTES": str(cap)},
                   config="download_max_share = 100\n")
        servers.append(s)
        disk = Sampler(lambda: folder_bytes(full), 0.01)
        j = ask(s, [{"debug_file": "basic32.pdb", "debug_id": key32, "format": "windows"}], 60)
        disk.stop()
        m = j["modules"][0]
        made = [r for r in s.logs() if r.get("msg") == "made room for a download"]
        print("full cache (%.1f of %d MiB) and a %.1f MiB PDB: %s; made room: %s; folder at most %.1f MiB"
              % (filled / 1048576.0, cap >> 20, len(big) / 1048576.0, m["status"],
                 [(r.get("bytes"), r.get("freed")) for r in made], disk.max() / 1048576.0))
        c.true("the cache was nearly full", filled > cap - (len(big) + (1 << 20)), filled)
        c.eq("a download that does not fit beside the full cache is found", m["status"], "found")
        c.true("the cache made room for it", len(made) == 1 and made[0].get("freed", 0) > 0, made)
        # the download itself stays within the cap; what passes it is the WAL of
        # the eviction (pages moved by the incremental vacuum), the cache's own
        c.true("the folder within the cap plus the eviction's WAL", disk.max() <= cap + (2 << 20),
               "%d bytes" % disk.max())
        s.close()
        servers.remove(s)
finally:
    for s in servers:
        try:
            s.close()
        except Exception:  # noqa: BLE001
            pass
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
