#!/usr/bin/env python3
"""bench_trace_upload.py - a POST /traces upload at the rate a live session
writes, against the real `pdbsym serve` with its default settings (issue 27:
before, a chunked upload at about 100 KB/s was cut at 14 s).

    PDBSYM_BIN=build/pdbsym python3 bench/bench_trace_upload.py [--rate 100000] [--minutes 10]
        [--serve-arg --trace-max-time=... ...]

The trace is written here from the NetTrace V5 format
(tests/fuzz/make_nettrace_seeds.py: 64 KiB EventBlocks of ThreadSample
events), sized for rate x minutes, and sent chunked at that rate.  Printed:
the status, the seconds the upload took, the samples per thread answered
against those written, and /health's slowest answer meanwhile.  Exit status 0
when the answer is 200 with every sample, else 1.  No timing is asserted."""
import argparse
import http.client
import json
import os
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(root, "tests", "integration"))
sys.path.insert(0, os.path.join(root, "tests", "fuzz"))
os.environ.setdefault("PDBSYM_BIN", os.path.join(root, "build", "pdbsym"))
import make_nettrace_seeds as nt  # noqa: E402
from pdbsym_server import HealthProbe, Server  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--rate", type=int, default=100_000, help="bytes a second (default 100000)")
ap.add_argument("--minutes", type=float, default=10.0)
ap.add_argument("--serve-arg", action="append", default=[], help="a flag for pdbsym serve")
args = ap.parse_args()

block = 64 * 1024 - 512
nblocks = max(1, int(args.rate * args.minutes * 60 / block))
data, counts = nt.sample_trace(nblocks, block, 500, 16, (7, 8, 9, 10))
print("trace: %.1f MiB, %d blocks, %d samples; sent chunked at %d B/s: about %.1f min"
      % (len(data) / 2**20, nblocks, sum(counts.values()), args.rate, len(data) / args.rate / 60), flush=True)


def paced():
    t0 = time.monotonic()
    piece = 8192
    last = t0
    for i in range(0, len(data), piece):
        yield data[i:i + piece]
        ahead = t0 + (i + piece) / args.rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        if time.monotonic() - last >= 60:
            last = time.monotonic()
            print("  %.0f s: %.1f MiB sent" % (last - t0, i / 2**20), flush=True)


srv = Server(args=args.serve_arg)
try:
    probe = HealthProbe(srv, 1.0)
    t0 = time.monotonic()
    status, body = 0, b""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=args.minutes * 60 + 600)
        conn.request("POST", "/traces", body=paced(), headers={"Content-Type": "application/octet-stream"},
                     encode_chunked=True)
        r = conn.getresponse()
        status, body = r.status, r.read()
        conn.close()
    except OSError as e:
        body = str(e).encode()
    took = time.monotonic() - t0
    probe.stop()
    got = {}
    if status == 200:
        for p in json.loads(body)["profiles"]:
            got[int(p["name"].split("(")[1].rstrip(")"))] = len(p["samples"])
    print("status %d after %.1f s (%.1f min); samples per thread %s, written %s: %s; /health %d probes, "
          "slowest %.3f s" % (status, took, took / 60, got, counts, "equal" if got == counts else "DIFFERENT",
                              len(probe.values), probe.max()))
    if status != 200:
        print("answer: %r" % body[:300])
    sys.exit(0 if status == 200 and got == counts else 1)
finally:
    srv.close()
