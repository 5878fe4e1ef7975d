"""POST /traces bodies made of the largest blocks a trace may have (16 MiB),
against the real `pdbsym serve`: the event loop only hands the body to the
trace's worker (a 1 MiB feed buffer, the connection suspended while it is
full), and the worker parses the blocks, so that:

  1. two such traces at once (max_trace_jobs = 2, as many as the event-loop
     threads), one sent chunked and one with Content-Length, are answered 200
     with every sample the trace holds, thread by thread, each with its
     16-frame stack; the oracle is the trace itself, written here byte by byte
     from the NetTrace V5 format (tests/fuzz/make_nettrace_seeds.py's writer);
     /health, asked on new connections meanwhile, answers every probe (the
     slowest is printed; before, each 16 MiB block was parsed on an event-loop
     thread, and /health waited for it: bench/bench_trace_loop.py);
  2. uploads dropped halfway by their clients free their trace slots: two
     more are admitted and answered afterwards, and /health still answers.
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import make_nettrace_seeds as nt  # noqa: E402
from pdbsym_server import Checks, HealthProbe, Server, need_binary  # noqa: E402

need_binary()
c = Checks()

BLOCK = (16 << 20) - 4096  # just under the 16 MiB a block may have
NBLOCKS, NSTACKS, DEPTH, THREADS = 2, 500, 16, (7, 8, 9, 10)


def make_trace():
    """The trace, and how many samples each thread has in it."""
    return nt.sample_trace(NBLOCKS, BLOCK, NSTACKS, DEPTH, THREADS)


def post(srv, data, chunked):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    h = {"Content-Type": "application/octet-stream"}
    if chunked:
        def chunks():
            for i in range(0, len(data), 1 << 20):
                yield data[i:i + (1 << 20)]
        conn.request("POST", "/traces", body=chunks(), headers=h, encode_chunked=True)
    else:
        conn.request("POST", "/traces", body=data, headers=h)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def check_answer(what, st, body, counts):
    c.eq("%s: status" % what, st, 200)
    if st != 200:
        print("  %s: %r" % (what, body[:300]))
        return
    doc = json.loads(body)
    got = {}
    depths = set()
    for p in doc["profiles"]:
        tid = int(p["name"].split("(")[1].rstrip(")"))
        got[tid] = len(p["samples"])
        depths.update(len(s) for s in p["samples"])
    c.eq("%s: samples per thread, as written" % what, got, counts)
    # the root frame of every stack names the thread's state (the sampler's type)
    c.eq("%s: every stack 16 frames deep, under its state" % what, depths, {DEPTH + 1})
    names = {doc["shared"]["frames"][s[0]]["name"] for p in doc["profiles"] for s in p["samples"]}
    c.eq("%s: the state of every sample (type 1: external)" % what, names, {"[waiting or in native code]"})


data, counts = make_trace()
print("trace: %.1f MiB, %d EventBlocks of %.1f MiB, %d samples" % (
    len(data) / 2**20, NBLOCKS, BLOCK / 2**20, sum(counts.values())))

srv = Server()
try:
    # ---- 1. two at once, /health probed ------------------------------------------------
    probe = HealthProbe(srv, every=0.02)
    out = {}

    def one(i):
        try:
            out[i] = post(srv, data, chunked=(i == 0))
        except OSError as e:
            out[i] = (0, str(e).encode())

    t0 = time.monotonic()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    took = time.monotonic() - t0
    probe.stop()
    for i in range(2):
        check_answer("trace %d (%s)" % (i, "chunked" if i == 0 else "Content-Length"), *out[i], counts)
    lat = sorted(probe.values)
    c.true("/health answered every probe meanwhile", lat and lat[-1] < 99.0, lat[-3:])
    print("2 traces at once: answered in %.2f s; /health: %d probes, median %.1f ms, slowest %.1f ms"
          % (took, len(lat), lat[len(lat) // 2] * 1e3 if lat else 0, lat[-1] * 1e3 if lat else 0))

    # ---- 2. clients that drop their upload halfway ---------------------------------------
    for k in range(2):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(("POST /traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                   "Content-Length: %d\r\n\r\n" % len(data)).encode())
        s.sendall(data[:len(data) // 2 + k * 4096])
        time.sleep(0.3)
        s.close()
    st, _, _ = srv.request("GET", "/health", timeout=10)
    c.eq("after the dropped uploads: /health", st, 200)
    # their slots come back once their workers have stopped
    out = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        st, _, body = srv.request("POST", "/traces", body=b"", headers={"Content-Type": "application/octet-stream"})
        if st != 503:
            break
        time.sleep(0.2)
    c.eq("after the dropped uploads: a trace is admitted again (an empty one: 400)", st, 400)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    for i in range(2):
        check_answer("after the dropped uploads, trace %d" % i, *out[i], counts)
finally:
    srv.close()

# ---- 3. the smallest feed buffer: the connection paused and resumed at every 4 KiB -------
srv = Server(args=["--trace-feed-bytes", "4K"])
try:
    out = {}
    t0 = time.monotonic()
    one(0)
    check_answer("trace_feed_bytes = 4K, chunked", *out[0], counts)
    one(1)
    check_answer("trace_feed_bytes = 4K, Content-Length", *out[1], counts)
    print("trace_feed_bytes = 4K: 2 traces one after the other in %.2f s" % (time.monotonic() - t0))
finally:
    srv.close()

c.done()
