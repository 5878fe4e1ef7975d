#!/usr/bin/env python3
"""bench_trace_loop.py - how long GET /health waits while POST /traces bodies
made of the largest blocks a trace may have (16 MiB, api.md "POST /traces")
are read by `pdbsym serve`.

The trace is synthetic, written byte by byte from the NetTrace V5 format
(microsoft/perfview src/TraceEvent/EventPipe/NetTraceFormat_v5.md) with
tests/fuzz/make_nettrace_seeds.py's writer: the Trace object, a MetadataBlock
(the sample profiler's ThreadSample), a StackBlock of --stacks stacks of 16
frames, then --blocks EventBlocks of just under 16 MiB each of ThreadSample
events (uncompressed headers, 84 bytes an event: about 200,000 a block) naming
those stacks in turn, and a sequence point.  --uploads of them are posted at
once (max_trace_jobs raised to match), each body sent as fast as the server
takes it, while /health is asked on a new connection every --every seconds.
Printed: the /health latencies before (idle) and during the uploads (median,
99th percentile, slowest, count), each upload's status and time, and the
slowest gap between two answered probes.

    PDBSYM_BIN=build/pdbsym python3 bench/bench_trace_loop.py [--uploads 4] [--blocks 4]
"""
import argparse
import http.client
import os
import socket
import statistics
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, os.path.join(root, "tests", "integration"))
sys.path.insert(0, os.path.join(root, "tests", "fuzz"))
from pdbsym_server import Server  # noqa: E402
import make_nettrace_seeds as nt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--uploads", type=int, default=4)
ap.add_argument("--blocks", type=int, default=4, help="16 MiB EventBlocks per trace")
ap.add_argument("--stacks", type=int, default=1000)
ap.add_argument("--every", type=float, default=0.01, help="seconds between /health probes")
ap.add_argument("--idle", type=float, default=2.0, help="seconds of probes before the uploads")
ap.add_argument("--config", default="", help="more settings for the server (a config file's lines, \\n-separated)")
args = ap.parse_args()

BLOCK_MAX = 16 << 20


def make_trace():
    return nt.sample_trace(args.blocks, BLOCK_MAX, args.stacks)[0]


def probe(srv):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        c.close()
        return t0, time.monotonic() - t0 if r.status == 200 else 99.0
    except OSError:
        return t0, 99.0


def summary(lat):
    lat = sorted(lat)
    if not lat:
        return "no probes"
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return "median %.1f ms, p99 %.1f ms, slowest %.1f ms (%d probes)" % (
        statistics.median(lat) * 1e3, p99 * 1e3, lat[-1] * 1e3, len(lat))


def upload(srv, data, out, i):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=300)
    s.sendall(("POST /traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(data)).encode())
    s.sendall(data)
    sent = time.monotonic() - t0
    head, size = b"", 0  # the answer counted, not kept (a client's own copying is not the server's wait)
    buf = bytearray(1 << 20)
    while True:
        k = s.recv_into(buf)
        if not k:
            break
        if len(head) < 64:
            head += bytes(buf[:64])
        size += k
    s.close()
    status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "none"
    out[i] = (status, sent, time.monotonic() - t0, size)


data = make_trace()
print("trace: %.1f MiB, %d EventBlocks of %.1f MiB, %d uploads at once" % (
    len(data) / 2**20, args.blocks, BLOCK_MAX / 2**20, args.uploads))
config = "max_trace_jobs = %d\n" % args.uploads + args.config.replace("\\n", "\n") + "\n"
srv = Server(config=config)
try:
    idle = []
    t_end = time.monotonic() + args.idle
    while time.monotonic() < t_end:
        idle.append(probe(srv)[1])
        time.sleep(args.every)
    print("idle:   /health " + summary(idle))

    out = [None] * args.uploads
    ts = [threading.Thread(target=upload, args=(srv, data, out, i)) for i in range(args.uploads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    busy = []
    while any(t.is_alive() for t in ts):
        busy.append(probe(srv))
        time.sleep(args.every)
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    # the bodies are read (and their blocks parsed) until the last one is
    # sent; then the workers symbolicate and write the answers
    sent_by = t0 + max(o[1] for o in out)
    streaming = [x for x in busy if x[0] < sent_by]
    after = [x for x in busy if x[0] >= sent_by]
    for what, xs in (("while the bodies stream", streaming), ("after, answers made", after)):
        ends = [x[0] + x[1] for x in xs]
        gap = max((b - a for a, b in zip(ends, ends[1:])), default=0.0)
        print("%s: /health %s; slowest gap between answers %.1f ms"
              % (what, summary([x[1] for x in xs]), gap * 1e3))
    print("whole run: /health " + summary([x[1] for x in busy]))
    for i, o in enumerate(out):
        print("upload %d: status %s, body sent in %.2f s, answered after %.2f s (%d bytes)" % ((i,) + o))
    print("all uploads: %.2f s" % took)
finally:
    srv.close()
