#!/usr/bin/env python3
"""bench_http_limits.py - what hostile connection patterns and big batches do
to `pdbsym serve` (issue 13, "Connections" and "Memory").  Each section starts
a fresh server on 127.0.0.1 and probes GET /health every 0.25 s on a new
connection while the attack runs (a probe that gets no 200 within 5 s counts
as 5 s and failed):

  slow    N connections sending a header line every 5 s (replaced when closed)
  idle    N connections sending nothing (replaced when closed)
  mixed   both at once: N slow, then (after 12 s) N idle, as in
          tests/integration/test_http_attack.py
  flood   R new idle connections per second, for several rates R
  memory  64 concurrent POST /symbolicate of 10,000 frames each on a warm
          module: the server's peak RSS (VmHWM) over its RSS before, and the
          threads it ran

For each attack it prints the server's threads and descriptors at most (from
/proc), and what the attacking sockets saw.

Run it against two binaries to compare them (the figures depend on the
machine; the ratios between binaries much less):

    PDBSYM_BIN=build/pdbsym python3 bench/bench_http_limits.py [--hold 30] [--only slow,idle,mixed,flood,memory]

or one binary with and without a setting (--env KEY=VALUE, repeated, goes to
the server: --env PDBSYM_DEFER_ACCEPT=0).
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, os.path.join(root, "tests", "integration"))
from attacklib import Flood, HealthProbe, Holder, open_fds, proc_status, raise_nofile  # noqa: E402
from pdbsym_server import Server  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--hold", type=float, default=30, help="seconds each attack lasts")
ap.add_argument("--conns", type=int, default=600)
ap.add_argument("--rates", default="10,34,100,300,1000")
ap.add_argument("--requests", type=int, default=64)
ap.add_argument("--frames", type=int, default=10000)
ap.add_argument("--only", default="slow,idle,mixed,flood,memory")
ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
args = ap.parse_args()
only = set(args.only.split(","))
print("fd limit for the server and this script: %d" % raise_nofile(16384))
extra_env = dict(kv.split("=", 1) for kv in args.env)


def fmt(s):
    if not s["n"]:
        return "no probes"
    return "probes %d, failed %d, >=1 s %d, p50 %.3f s, max %.3f s" % (
        s["n"], s["failed"], s["over_1s"], s["p50"], s["max"])


def cpu_s(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def attack(name, make, later=None, later_at=12.0):
    """make(port): the attacker started at once; later(port): one more,
    started later_at seconds into the attack."""
    srv = Server(env=extra_env)
    try:
        probe = HealthProbe(srv.port)
        probe.start()
        time.sleep(1)
        base = probe.summary()
        fds0 = open_fds(srv.proc.pid)
        cpu0 = cpu_s(srv.proc.pid)
        t0 = time.monotonic()
        attackers = [make(srv.port)]
        attackers[0].start()
        threads_max = fds_max = 0
        while time.monotonic() - t0 < args.hold:
            time.sleep(0.5)
            threads_max = max(threads_max, proc_status(srv.proc.pid, "Threads"))
            fds_max = max(fds_max, open_fds(srv.proc.pid))
            if later and len(attackers) == 1 and time.monotonic() - t0 >= later_at:
                attackers.append(later(srv.port))
                attackers[1].start()
        cpu = (cpu_s(srv.proc.pid) - cpu0) / (time.monotonic() - t0)
        hs = [a.h if isinstance(a, Flood) else a for a in attackers]
        held = [h.open_now() for h in hs]
        for a in attackers:
            a.stop()
        probe.stop()
        during = probe.summary(since=t0 + 1)
        print("%-12s before: %s" % (name, fmt(base)))
        print("%-12s during: %s; server threads max %d, descriptors %d at start, %d at most, "
              "CPU %.0f %% of one core" % ("", fmt(during), threads_max, fds0, fds_max, cpu * 100))
        for h, n in zip(hs, held):
            life = sorted(h.lifetimes)
            print("%-12s attacker (%s): %d connects, %d closed by server (median lifetime %s), "
                  "%d refused, %d open at the end"
                  % ("", h.kind, h.connects, h.closed_by_server,
                     "%.1f s" % life[len(life) // 2] if life else "-", h.failed, n))
        sys.stdout.flush()
        return during
    finally:
        srv.close()


if "slow" in only:
    attack("slow %d" % args.conns, lambda p: Holder(p, args.conns, "slow", interval=5))
if "idle" in only:
    attack("idle %d" % args.conns, lambda p: Holder(p, args.conns, "idle"))
if "mixed" in only:
    attack("mixed %d+%d" % (args.conns, args.conns), lambda p: Holder(p, args.conns, "slow", interval=5),
           later=lambda p: Holder(p, args.conns, "idle"))
if "flood" in only:
    for r in [int(x) for x in args.rates.split(",")]:
        attack("flood %d/s" % r, lambda p, r=r: Flood(p, r))

if "memory" in only:
    import http.client
    native_dir = os.path.join(root, "tests", "fixtures", "native")
    store = tempfile.mkdtemp(prefix="pdbsym-limits-")
    header, col = None, None
    for line in open(os.path.join(native_dir, "MANIFEST.tsv")):
        if line.startswith("# name"):
            header = line[2:].rstrip("\n").split("\t")
        elif not line.startswith("#") and line.strip():
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            if row["arch"] == "x64" and (col is None or int(row["rows"]) > int(col["rows"])):
                col = row
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    d = os.path.join(store, debug_file, col["symkey"])
    os.makedirs(d)
    open(os.path.join(d, debug_file), "wb").write(gzip.open(os.path.join(native_dir, col["pdb"])).read())
    rvas = []
    for ln in open(os.path.join(native_dir, col["expected"])):
        if not ln.startswith("#") and ln.strip():
            lo, hi = (int(x, 16) for x in ln.split("\t")[:2])
            rvas += [lo, (lo + hi - 1) // 2]
    mod = {"debug_file": col["cv_path"], "debug_id": col["symkey"]}
    frames = [{"module": 0, "rva": "0x%x" % rvas[i % len(rvas)]} for i in range(args.frames)]
    body = json.dumps({"modules": [mod], "frames": frames}).encode()
    env = {"PDBSYM_SYMBOL_PATH": store, "PDBSYM_OFFLINE": "false", "PDBSYM_MAX_INFLIGHT": str(max(64, args.requests))}
    env.update(extra_env)
    srv = Server(env=env)
    try:
        def post():
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
            c.request("POST", "/symbolicate", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, data

        st, data = post()
        ok = sum(1 for f in json.loads(data)["frames"] if f["status"] == "ok")
        rss0 = proc_status(srv.proc.pid, "VmRSS")
        hwm0 = proc_status(srv.proc.pid, "VmHWM")
        results = []
        go = threading.Barrier(args.requests)

        def one():
            go.wait()
            results.append(post())

        ts = [threading.Thread(target=one) for _ in range(args.requests)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        threads_max = 0
        while any(t.is_alive() for t in ts):
            threads_max = max(threads_max, proc_status(srv.proc.pid, "Threads"))
            time.sleep(0.05)
        dt = time.monotonic() - t0
        hwm = proc_status(srv.proc.pid, "VmHWM")
        codes = {}
        for s, _ in results:
            codes[s] = codes.get(s, 0) + 1
        print("memory: module %s (%d frames ok of %d in the warm-up), body %d bytes, answer %d bytes"
              % (col["name"], ok, args.frames, len(body), len(data)))
        print("memory: %d concurrent requests of %d frames in %.1f s: statuses %s; RSS before %.1f MiB "
              "(peak so far %.1f MiB), peak during %.1f MiB: %.1f MiB over the RSS before, %.2f MiB per "
              "request; server threads max %d"
              % (args.requests, args.frames, dt, codes, rss0 / 1024, hwm0 / 1024, hwm / 1024,
                 (hwm - rss0) / 1024, (hwm - rss0) / 1024 / args.requests, threads_max))
    finally:
        srv.close()
        shutil.rmtree(store, ignore_errors=True)
