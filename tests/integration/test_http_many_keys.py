"""Request bodies whose one frame object has half a million distinct keys,
against the real `pdbsym serve` over HTTP.  The request scanner keeps the keys
of every open object to refuse duplicates (server/service/jwalk.c: 32 bytes a
key and a hash index, several times the body's own size); that state is
reserved in the request memory budget, so:

  1. one such body (4.2 MB, 524,289 keys) under a budget a little larger than
     its grant (8 times its body) but smaller than what its reading needs:
     503 with Retry-After and the budget's wording; the same frame without the
     extra keys is answered (200); a body of 9 distinct keys in the frame is
     answered (200) and one with a duplicate key among them still gets the
     400 naming it (the oracle: RFC 8259 objects and the contract's rule that
     duplicate keys are refused);
  2. 8 of them posted at once under request_memory_max = 68M while /health is
     probed on new connections: every answer is 200 or 503, each 503 names
     request_memory_max and carries Retry-After, at least one is refused, and
     the server's peak RSS (VmHWM in /proc/PID/status, the kernel's count)
     grows by less than the budget plus FIXED, the costs the budget does not
     count (thread stacks, libmicrohttpd's connection buffers); /health
     answers every probe.  Before the scanner's state was in the budget the
     state of each admitted request came on top of its grant (about 1.5 times
     it), which passes that bound.

The figures (answers, refusals, RSS growth, slowest /health) are printed.
"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attacklib import proc_status  # noqa: E402
from pdbsym_server import Checks, HealthProbe, Server, need_binary, parse_raw_response  # noqa: E402
from pdbsym_server import budget_refusal as is_budget_refusal  # noqa: E402

need_binary()
c = Checks()

NKEYS = (1 << 19) + 1  # just past a power of two: the most state per key
ALPHABET = [chr(x) for x in range(0x21, 0x7f) if chr(x) not in '"\\']


def many_keys_body(n, dup=False):
    """{"modules":[],"frames":[{"module":0,"rva":1,<n distinct 3-byte keys>}]}"""
    a = len(ALPHABET)
    parts = []
    for i in range(n):
        k = ALPHABET[i % a] + ALPHABET[(i // a) % a] + ALPHABET[(i // (a * a)) % a]
        parts.append('"%s":0' % k)
    if dup:
        parts.append(parts[0])
    return ('{"modules":[],"frames":[{"module":0,"rva":1,%s}]}' % ",".join(parts)).encode()


def post(port, body, timeout=120):
    """(status, Retry-After, body).  A request refused at the door is answered
    before its body is read, and the connection closed: the rest of the body
    then meets a broken pipe, and the answer is read after it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = ("POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)).encode()
    try:
        s.sendall(head + body)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    if not data:
        return 0, None, b"no answer"
    st, hdrs, payload = parse_raw_response(data)
    return st, hdrs.get("retry-after"), payload


def budget_refusal(x, budget_text):
    st, retry, data = x
    return is_budget_refusal(st, retry, data, budget_text)


def sanitized_build():
    cache = os.path.join(os.environ.get("PDBSYM_BUILD_DIR", ""), "CMakeCache.txt")
    return os.path.exists(cache) and "PDBSYM_SANITIZE:BOOL=ON" in open(cache).read()


big = many_keys_body(NKEYS)
print("body: %d bytes, %d keys in its frame (grant %.1f MiB)" % (len(big), NKEYS + 2, 8 * len(big) / 2**20))

# ---- 1. one request: its grant covers the body, not the scanner's state -------------
# 40 MiB: more than the grant (8 x 4.2 MB = 33.6 MB) so the body is admitted,
# less than body + keys + index (about 42 MB here)
small_budget = 40 << 20
srv = Server(config="request_memory_max = %d\nrequest_memory_keep = 0\n" % small_budget)
try:
    x = post(srv.port, big)
    c.true("a many-key body past the budget: 503 with Retry-After and the budget's wording",
           budget_refusal(x, str(small_budget)), x[:2] + (x[2][:200],))
    st, _, data = post(srv.port, b'{"modules":[],"frames":[{"module":0,"rva":1}]}')
    c.eq("the same frame without the extra keys: answered", st, 200)
    c.eq("... its one frame", len(json.loads(data)["frames"]), 1)
    few = many_keys_body(9)
    st, _, data = post(srv.port, few)
    c.eq("9 distinct keys in a frame: answered", st, 200)
    st, _, data = post(srv.port, many_keys_body(9, dup=True))
    c.true("a duplicate key among them: 400 naming it", st == 400 and b"duplicate object key" in data,
           (st, data[:200]))
    # an answer's reservation is given back just after the client has read
    # it (when libmicrohttpd frees the response): asked again for up to 5 s
    used = None
    deadline = time.monotonic() + 5
    while True:
        st, _, text = srv.request("GET", "/metrics")
        for ln in text.decode().splitlines():
            if ln.startswith("pdbsym_request_memory_bytes "):
                used = float(ln.split()[1])
        if used == 0.0 or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    c.eq("every reservation given back after the refusal", used, 0.0)
finally:
    srv.close()

# ---- 2. eight at once under a small budget, /health probed ----------------------------
BUDGET, FIXED, NREQ = 68 << 20, 16 << 20, 8
srv = Server(config="request_memory_max = 68M\nrequest_memory_keep = 0\n")
try:
    st, _, _ = post(srv.port, b'{"modules":[],"frames":[{"module":0,"rva":1}]}')
    c.eq("warm-up answered", st, 200)
    time.sleep(0.3)
    rss0 = proc_status(srv.proc.pid, "VmRSS")
    probe = HealthProbe(srv, every=0.05)
    go = threading.Barrier(NREQ)
    out = []

    def one():
        go.wait()
        try:
            out.append(post(srv.port, big))
        except OSError as e:
            out.append((0, None, str(e).encode()))

    t0 = time.monotonic()
    ts = [threading.Thread(target=one) for _ in range(NREQ)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    took = time.monotonic() - t0
    time.sleep(0.2)
    probe.stop()
    grew = (proc_status(srv.proc.pid, "VmHWM") - rss0) * 1024
    ok = [x for x in out if x[0] == 200]
    refused = [x for x in out if x[0] == 503]
    c.eq("every request answered", len(out), NREQ)
    c.true("answers are 200 or 503", all(x[0] in (200, 503) for x in out), [x[:1] + (x[2][:200],) for x in out if x[0] not in (200, 503)][:2])
    c.true("some refused", len(refused) > 0, (len(ok), len(refused)))
    c.true("each 503 names request_memory_max and carries Retry-After",
           all(budget_refusal(x, str(BUDGET)) for x in refused), [x[:2] + (x[2][:160],) for x in refused[:1]])
    c.true("the answered ones have their frame", all(len(json.loads(x[2])["frames"]) == 1 for x in ok))
    slowest = max(probe.values) if probe.values else 99.0
    c.true("/health answered every probe during the storm", probe.values and slowest < 99.0,
           "%d probes, slowest %.3f s" % (len(probe.values), slowest))
    print("%d x %d-key bodies at once, request_memory_max = 68M: %d answered, %d refused (503) in %.2f s; "
          "RSS grew %.1f MiB (bound %d MiB); %d /health probes, slowest %.3f s"
          % (NREQ, NKEYS + 2, len(ok), len(refused), took, grew / 2**20, (BUDGET + FIXED) >> 20,
             len(probe.values), slowest))
    if not sanitized_build():  # ASan's shadow memory and quarantine are not the server's
        c.true("RSS grew less than the budget and the fixed costs", grew < BUDGET + FIXED,
               "%.1f MiB" % (grew / 2**20))
    st, _, text = srv.request("GET", "/metrics")
    peak = None
    for ln in text.decode().splitlines():
        if ln.startswith("pdbsym_request_memory_peak_bytes "):
            peak = float(ln.split()[1])
    c.true("the budget's own count stayed under it", peak is not None and 0 < peak <= BUDGET, peak)
    print("budget's peak count: %.1f MiB" % ((peak or 0) / 2**20))
finally:
    srv.close()

c.done()
