"""First answer before persistence (issue 15), under a slow disk: `pdbsym
serve` answers a fetched module from the parsed table and writes SQLite
after, on its one cache writer, fed by a bounded persistence queue
(persist_queue, persist_queue_bytes, persist_wait: api.md "Settings").

The slow disk is real contention: another process (this test, as `pdbsym
warm` on the same folder would) holds the database's write lock, so the
writer waits in SQLite.  The modules are real PDBs made here by clang and
lld-link (tests/integration/genpdb.py), one of them large (about 10 MB of
PDB, hundreds of thousands of line rows), served by tests/symserver.py.

Asserted, each name checked against llvm-symbolizer 19:
1. with the lock held, requests for 3 modules are all answered, while
   /metrics says none is written yet and 3 wait in the queue;
2. 4 more modules with the queue full (persist_queue 3): answered all the
   same; their tables wait persist_wait, then stay in memory unstored
   (`pdbsym_persist_total{outcome="dropped"}` 4, the queue never above 3),
   and asked again are answered from memory with no download;
3. the lock released: the 3 queued tables are written; SIGTERM exits 0 with
   nothing left unstored; restarted offline, the service answers those 3 from
   SQLite (the 4 dropped ones are `missing` offline: never stored);
4. SIGTERM with 3 tables queued behind the lock, released 2 s later: the
   writer drains the queue within its grace (restarted offline: all 3);
5. shutdown with the lock held: the process still exits 0, within
   shutdown_grace plus the engine's fixed graces (printed), and logs what it
   could not store; `pdbsym cache verify` is clean afterwards."""
import concurrent.futures
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from genpdb import GenPdb, symbolize  # noqa: E402
from pdbsym_server import BIN, Checks, Server, SymServer  # noqa: E402

c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-persist-")
gen = GenPdb(os.path.join(tmp, "gen"))
if gen.missing():
    shutil.rmtree(tmp, ignore_errors=True)
    harness.skip("needs %s (scripts/deps.sh --test)" % ", ".join(gen.missing()))

t0 = time.monotonic()
small = gen.base(funcs=300, stmts=20)
large = gen.base(funcs=3000, stmts=40, seed=2)
with concurrent.futures.ThreadPoolExecutor(2) as pool:
    mods = list(pool.map(lambda i: gen.module("m%d" % i, small, copies=1, tag=i), range(7)))
big = gen.module("big", large, copies=5, tag=99)
print("made 8 PDBs in %.1f s; the large one %d bytes" % (time.monotonic() - t0, big["pdb_bytes"]))
want = {m["name"]: m["entry_name"] for m in mods + [big]}
for m in mods + [big]:
    got = symbolize(m["exe"], [m["entry_rva"]])[0]
    c.eq("llvm-symbolizer names %s's entry point" % m["name"], got[-1] if got else None, m["entry_name"])

store = os.path.join(tmp, "store")
for m in mods + [big]:
    d = os.path.join(store, m["debug_file"], m["symkey"])
    os.makedirs(d)
    shutil.copy(m["pdb"], os.path.join(d, m["debug_file"]))
ss = SymServer(store)


def body(ms):
    return {"modules": [{"debug_file": m["debug_file"], "debug_id": m["debug_id"]} for m in ms],
            "frames": [{"module": i, "rva": "0x%x" % m["entry_rva"]} for i, m in enumerate(ms)],
            "timeout": 120}


def answers(srv, ms):
    st, _, j = srv.json("POST", "/symbolicate", body(ms), timeout=200)
    if st != 200:
        return [(m["name"], st, None) for m in ms]
    return [(m["name"], j["modules"][i]["status"], (j["frames"][i].get("symbols") or [{}])[-1].get("function"))
            for i, m in enumerate(ms)]


def right(ms):
    return [(m["name"], "found", want[m["name"]]) for m in ms]


def metrics(srv):
    st, _, text = srv.request("GET", "/metrics")
    out = {}
    for ln in text.decode().splitlines():
        if ln and not ln.startswith("#"):
            k, _, v = ln.rpartition(" ")
            out[k] = float(v)
    return out


def wait_ready(srv):
    deadline = time.time() + 30
    while time.time() < deadline and srv.request("GET", "/ready")[0] != 200:
        time.sleep(0.05)


def lock(cache):
    db = sqlite3.connect(os.path.join(cache, "pdbsym.sqlite"), timeout=0, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # the database's one write lock, held until released
    return db


SAVED, DROPPED = 'pdbsym_persist_total{outcome="saved"}', 'pdbsym_persist_total{outcome="dropped"}'
servers = []
try:
    cache = os.path.join(tmp, "cache")
    env = {"PDBSYM_SYMBOL_PATH": "srv*" + ss.url, "PDBSYM_OFFLINE": "false", "PDBSYM_CACHE_DIR": cache,
           "PDBSYM_PERSIST_QUEUE": "3", "PDBSYM_PERSIST_WAIT": "2"}
    srv = Server(env=env)
    servers.append(srv)
    wait_ready(srv)
    db = lock(cache)
    t_lock = time.monotonic()

    # 1. answered while nothing can be written
    first = [big, mods[0], mods[1]]
    c.eq("1: answered with the database locked", answers(srv, first), right(first))
    # the answer goes out first, then the worker hands the table to the queue
    deadline = time.time() + 30
    while time.time() < deadline and metrics(srv)["pdbsym_persist_queue"] < len(first):
        time.sleep(0.05)
    mt = metrics(srv)
    print("1: answered %.1f s after the lock was taken; queue %d tables, %d bytes; saved %d" % (
        time.monotonic() - t_lock, mt["pdbsym_persist_queue"], mt["pdbsym_persist_queue_bytes"], mt[SAVED]))
    c.eq("1: none written yet", mt[SAVED], 0)
    c.eq("1: all three waiting in the queue", mt["pdbsym_persist_queue"], 3)
    c.eq("1: asked again, answered from memory", answers(srv, first), right(first))

    # 2. the queue full: answered, then kept in memory only
    more = mods[2:6]
    c.eq("2: answered with the queue full", answers(srv, more), right(more))
    deadline = time.time() + 60
    while time.time() < deadline and metrics(srv)[DROPPED] < len(more):
        time.sleep(0.1)
    mt = metrics(srv)
    print("2: %.1f s after the lock: queue %d, dropped %d, saved %d" % (
        time.monotonic() - t_lock, mt["pdbsym_persist_queue"], mt[DROPPED], mt[SAVED]))
    c.eq("2: the queue held its bound", mt["pdbsym_persist_queue"], 3)
    c.eq("2: the four beyond it kept in memory only", mt[DROPPED], len(more))
    c.true("2: each logged", sum(1 for r in srv.logs() if r.get("msg") == "module not stored") == len(more))
    hits = ss.stats()["total"]
    c.eq("2: asked again, answered from memory", answers(srv, more), right(more))
    c.eq("2: no download for them", ss.stats()["total"], hits)
    held = time.monotonic() - t_lock

    # 3. the lock released: the queue is written
    db.rollback()
    db.close()
    deadline = time.time() + 60
    while time.time() < deadline and metrics(srv)["pdbsym_persist_queue"] > 0:
        time.sleep(0.1)
    mt = metrics(srv)
    print("3: lock held %.1f s; after it, saved %d, failed %d" % (
        held, mt[SAVED], mt['pdbsym_persist_total{outcome="failed"}']))
    c.eq("3: the three queued tables written", mt[SAVED], 3)
    c.eq("3: SIGTERM exits 0", srv.stop(), 0)
    c.eq("3: nothing left unstored", [r["msg"] for r in srv.logs()
                                      if r.get("msg") == "shutting down with modules not stored"], [])
    srv.close()
    servers.remove(srv)
    srv = Server(env=dict(env, PDBSYM_OFFLINE="true"))
    servers.append(srv)
    c.eq("3: restarted offline: the stored ones from SQLite", answers(srv, first), right(first))
    c.eq("3: the dropped ones were never stored", [a[1] for a in answers(srv, more)], ["missing"] * len(more))
    srv.close()
    servers.remove(srv)

    # 4. shutdown drains the queue: SIGTERM with three tables queued behind
    # the lock, the lock released 2 s later, within the writer's grace
    cache4 = os.path.join(tmp, "cache4")
    env4 = dict(env, PDBSYM_CACHE_DIR=cache4)
    srv = Server(env=env4)
    servers.append(srv)
    wait_ready(srv)
    db = lock(cache4)
    c.eq("4: answered with the database locked", answers(srv, first), right(first))
    deadline = time.time() + 30  # answered first, queued after (as in 1)
    while time.time() < deadline and metrics(srv)["pdbsym_persist_queue"] < len(first):
        time.sleep(0.05)
    q = metrics(srv)["pdbsym_persist_queue"]
    t = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(2)
    db.rollback()
    db.close()
    rc = srv.stop(timeout=120)
    print("4: SIGTERM with %d tables queued, the lock released 2 s later: exit %s in %.2f s" % (
        q, rc, time.monotonic() - t))
    c.eq("4: three tables queued at SIGTERM", q, 3)
    c.eq("4: exits 0", rc, 0)
    c.eq("4: nothing left unstored", [r["msg"] for r in srv.logs()
                                      if r.get("msg") == "shutting down with modules not stored"], [])
    srv.close()
    servers.remove(srv)
    srv = Server(env=dict(env4, PDBSYM_OFFLINE="true"))
    servers.append(srv)
    c.eq("4: restarted offline: all three from SQLite", answers(srv, first), right(first))
    srv.close()
    servers.remove(srv)

    # 5. shutdown while the writer cannot write
    cache5 = os.path.join(tmp, "cache5")
    env5 = dict(env, PDBSYM_CACHE_DIR=cache5, PDBSYM_SHUTDOWN_GRACE="5")
    srv = Server(env=env5)
    servers.append(srv)
    wait_ready(srv)
    db = lock(cache5)
    c.eq("5: answered with the database locked", answers(srv, first), right(first))
    t = time.monotonic()
    rc = srv.stop(timeout=120)
    took = time.monotonic() - t
    db.rollback()
    db.close()
    print("5: SIGTERM with the database locked: exit %s in %.1f s (shutdown_grace 5 s, then the "
          "engine's fixed graces: downloads 10 s, workers 5 s, writer 10 + 5 s)" % (rc, took))
    c.eq("5: exits 0", rc, 0)
    c.true("5: logs what it could not store",
           any(r.get("msg") == "shutting down with modules not stored" for r in srv.logs()),
           [r.get("msg") for r in srv.logs()][-8:])
    v = subprocess.run([BIN, "cache", "verify"], env=dict(os.environ, PDBSYM_CACHE_DIR=cache5),
                       capture_output=True, text=True)
    c.eq("5: cache verify afterwards", (v.returncode, v.stderr.strip()[:200]), (0, ""))
    srv.close()
    servers.remove(srv)
finally:
    for s in servers:
        s.close()
    ss.close()
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
