#!/usr/bin/env python3
"""bench_http.py - throughput of POST /symbolicate on a warm cache.

Serves the native and managed fixture PDBs from the test symbol server, warms
the cache with one request, then drives `pdbsym serve` with wrk (Debian
package `wrk`): batches of 100 frames over 20 module entries, keep-alive
connections.  Prints requests/s, frames/s, p50/p99 latency, the server's CPU
time per request and its RSS before and after; then the same frames answered
in-process by bench_render (PDBs parsed once, lookups and JSON rendering
only) and the ratio of CPU cost per frame, HTTP path over in-process.
Wall-clock figures depend on what else the machine runs; the CPU figures much
less.

    PDBSYM_BIN=build/pdbsym python3 bench/bench_http.py [--duration 10] [--connections 32]
"""
import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, os.path.join(root, "tests", "integration"))
from pdbsym_server import Server  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--duration", type=int, default=10)
ap.add_argument("--connections", type=int, default=32)
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--runs", type=int, default=2)
args = ap.parse_args()
if not shutil.which("wrk"):
    sys.exit("bench_http: wrk not found (apt-get install wrk)")

native_dir = os.path.join(root, "tests", "fixtures", "native")
store = tempfile.mkdtemp(prefix="pdbsym-bench-")
modules, rvas = [], []
header = None
for line in open(os.path.join(native_dir, "MANIFEST.tsv")):
    if line.startswith("# name"):
        header = line[2:].rstrip("\n").split("\t")
    if line.startswith("#") or not line.strip():
        continue
    col = dict(zip(header, line.rstrip("\n").split("\t")))
    name, pdb, symkey, cv_path, expected = (col[k] for k in ("name", "pdb", "symkey", "cv_path", "expected"))
    debug_file = cv_path.replace("\\", "/").rsplit("/", 1)[-1]
    d = os.path.join(store, debug_file, symkey)
    os.makedirs(d)
    open(os.path.join(d, debug_file), "wb").write(gzip.open(os.path.join(native_dir, pdb)).read())
    rows = [ln.split("\t") for ln in open(os.path.join(native_dir, expected)) if not ln.startswith("#")]
    modules.append({"debug_file": debug_file, "debug_id": symkey})
    rvas.append([int(r[0], 16) for r in rows])

# 20 module entries (the fixtures repeat: there are fewer than 20), 5 frames each
entries = [modules[i % len(modules)] for i in range(20)]
frames = []
for i in range(20):
    rv = rvas[i % len(modules)]
    for k in range(5):
        frames.append({"module": i, "rva": "0x%x" % rv[(k * 7 + i) % len(rv)]})
body = json.dumps({"modules": entries, "frames": frames})

ss = subprocess.Popen([sys.executable, os.path.join(root, "tests", "symserver.py"), store],
                      stdout=subprocess.PIPE, text=True)
ss_port = int(ss.stdout.readline().split()[1])
try:
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % ss_port, "PDBSYM_OFFLINE": "false",
                      "PDBSYM_MAX_INFLIGHT": "1024"})
except Exception:
    ss.kill()
    shutil.rmtree(store, ignore_errors=True)
    raise


def cpu_s():
    f = open("/proc/%d/stat" % srv.proc.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib():
    for ln in open("/proc/%d/status" % srv.proc.pid):
        if ln.startswith("VmRSS:"):
            return int(ln.split()[1])
    return 0


try:
    st, h, j = srv.json("POST", "/symbolicate", json.loads(body) | {"timeout": 120}, timeout=300)
    statuses = {}
    for f in j["frames"]:
        statuses[f["status"]] = statuses.get(f["status"], 0) + 1
    print("warm-up: %d, frame statuses %s, distinct modules %d" % (st, statuses, len(modules)))
    lua = os.path.join(store, "post.lua")
    with open(lua, "w") as f:
        f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n'
                % json.dumps(body))
    rss0 = rss_kib()
    http_cpu_per_frame = None
    for run in range(1, args.runs + 1):
        c0 = cpu_s()
        out = subprocess.run(["wrk", "-t%d" % args.threads, "-c%d" % args.connections, "-d%ds" % args.duration,
                              "--latency", "-s", lua, "http://127.0.0.1:%d/symbolicate" % srv.port],
                             capture_output=True, text=True).stdout
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)
        p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        nreq = int(re.search(r"(\d+) requests in", out).group(1))
        cpu_per_req = (cpu_s() - c0) / max(nreq, 1)
        http_cpu_per_frame = cpu_per_req / len(frames)
        print("run %d: %d connections, %ds: %.0f requests/s, %.0f frames/s, p50 %s, p99 %s, non-2xx %s, "
              "server CPU %.3f ms/request (%.0f frames per CPU second), RSS %d -> %d KiB"
              % (run, args.connections, args.duration, rps, rps * len(frames), p50, p99,
                 non2xx.group(1) if non2xx else 0, cpu_per_req * 1000, 1 / http_cpu_per_frame, rss0, rss_kib()))
    bench_render = os.path.join(os.path.dirname(os.environ["PDBSYM_BIN"]), "bench_render")
    specs = []
    for i, e in enumerate(entries):
        path = os.path.join(store, e["debug_file"], e["debug_id"], e["debug_file"])
        specs.append(path + ":" + ",".join(f["rva"] for f in frames if f["module"] == i))
    out = subprocess.run([bench_render, "2000"] + specs, capture_output=True, text=True).stdout.strip()
    print(out)
    m = re.search(r"([\d.]+) frames per CPU second", out)
    if m and http_cpu_per_frame:
        print("HTTP path costs %.2fx the in-process CPU per frame" % (float(m.group(1)) * http_cpu_per_frame))
finally:
    srv.close()
    ss.kill()
    shutil.rmtree(store, ignore_errors=True)
