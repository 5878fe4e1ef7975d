"""Attacks on `pdbsym serve` from hostile clients on 127.0.0.1 (issue 13,
"Connections", "Memory", "Smaller"); after each, and during it, the service
must still answer.  The oracle is outside the server: /health probed on new
connections with the wall clock, the kernel's view of the server process
(/proc: RSS, threads, descriptors), and what the attacking sockets see.

  1. 600 connections sending a header line every 5 s, then 600 more sending
     nothing, all replaced as soon as the server closes them, for longer than
     the kernel keeps the silent ones (defer_accept): /health and /ready
     answer within 1 s throughout; the server's threads stay the same; the
     silent ones reach the server only after defer_accept (so they are not
     evicted and replaced in a loop), and then the table's limit evicts
  2. connections beyond max_connections / max_connections_per_ip (with
     defer_accept off, so that silent connections reach the table): closed,
     the server's descriptors stay bounded, /health answers, other addresses
     keep their connections; with the default defer_accept, a flood of
     silent connections never reaches the server
  3. the absolute read deadline closes a request whose headers or body drip
     in, however steadily
  4. heavy routes saturated (every worker waiting on a slow upstream, more
     requests refused with 503): /health answers within 1 s
  5. 64 concurrent requests of 10,000 frames: answered, and the server's RSS
     grows by less than the memory budget; with a small budget the requests
     beyond it get 503 with Retry-After and RSS stays under the small budget
  6. a module damaged in the cache: the damage is one more JSON log line (the
     log stays JSON only)
  7. a text/plain (or form, or untyped) POST to /symbolicate or /traces gets
     415, and so does a form to /symbolicate/v5 (which takes text/plain and
     no type, as the Firefox Profiler sends them); a DNS-rebinding Host gets
     403; all with JSON bodies
"""
import gzip
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attacklib import Flood, HealthProbe, Holder, open_fds, proc_status, raise_nofile  # noqa: E402
from pdbsym_server import MODULE, Checks, Server, SlowUpstream, need_binary  # noqa: E402

need_binary()
c = Checks()
root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

# 1,200 attacking sockets here, as many in the server (a child inherits the limit)
FDS = 4096
got = raise_nofile(FDS)
c.true("descriptor limit raised to %d for this test and the server" % FDS, got >= FDS,
       "soft limit %d (hard limit too low: raise it with ulimit -Hn)" % got)


def sanitized_build():
    cache = os.path.join(os.environ.get("PDBSYM_BUILD_DIR", ""), "CMakeCache.txt")
    return os.path.exists(cache) and "PDBSYM_SANITIZE:BOOL=ON" in open(cache).read()


# The bound, in every build.  (It was 2.5 s in the sanitizer build,
# where a probe once took longer: silent connections were then accepted,
# evicted and replaced in a loop, which kept the accept queue full and the
# machine busy; defer_accept ended that loop - section 1 checks it.)
BOUND = 1.0


def check_probe(what, probe, since=0.0):
    s = probe.summary(since)
    c.true("%s: probes ran" % what, s["n"] >= 5, s)
    late = [x for x in probe.samples if x[0] >= since and (not x[2] or x[1] >= BOUND)]
    c.eq("%s: probes without a 200 within %.1f s" % (what, BOUND), len(late), 0)
    print("%s: %d probes, slowest %.3f s" % (what, s["n"], s["max"] or 0))


def metric(srv, name):
    st, h, body = srv.request("GET", "/metrics")
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    return None


# ---- 1. slow and idle connections -------------------------------------------
srv = Server()
try:
    threads0 = proc_status(srv.proc.pid, "Threads")
    fds0 = open_fds(srv.proc.pid)
    fds_max = fds0
    health = HealthProbe(srv.port, period=0.25)
    ready = HealthProbe(srv.port, period=0.5, path="/ready")
    health.start()
    ready.start()
    slow = Holder(srv.port, 600, "slow", interval=5)
    slow.start()
    t0 = time.monotonic()
    threads_max = 0
    held_slow = 0
    idle = None
    fds_deferred = 0  # the server's descriptors while the kernel keeps the silent ones
    while time.monotonic() - t0 < 40:
        time.sleep(0.5)
        threads_max = max(threads_max, proc_status(srv.proc.pid, "Threads"))
        fds_max = max(fds_max, open_fds(srv.proc.pid))
        if idle is not None and time.monotonic() - t_idle < 12:
            fds_deferred = max(fds_deferred, open_fds(srv.proc.pid))
        if time.monotonic() - t0 > 8 and held_slow == 0:
            held_slow = slow.open_now()
        if time.monotonic() - t0 > 12 and idle is None:
            slow_alone = list(slow.lifetimes)  # before the idle ones: no eviction yet
            idle = Holder(srv.port, 600, "idle")
            idle.start()
            t_idle = time.monotonic()
    held_idle = idle.open_now()
    held_slow_end = slow.open_now()
    slow.stop()
    idle.stop()
    health.stop()
    ready.stop()
    check_probe("600 slow + 600 idle: /health", health)
    check_probe("600 slow + 600 idle: /ready", ready)
    c.true("600 slow connections were held at once", held_slow >= 590, "held %d" % held_slow)
    # defer_accept (10 s, the kernel's 15 s): for 12 s the silent connections
    # stay with the kernel - the server holds the slow ones only
    c.true("silent connections kept by the kernel for defer_accept", fds_deferred <= fds0 + 600 + 64,
           "%d descriptors at start, %d while deferred" % (fds0, fds_deferred))
    # and, not closed, they are not replaced: no loop of accept, evict,
    # reconnect (with defer_accept = 0 the same attack makes about 100,000
    # connections in these 28 s, each living 0.2 s)
    c.true("idle connections were not evicted and replaced in a loop", idle.connects <= 3000,
           "%d connects for 600 idle connections" % idle.connects)
    # the kernel's count, sampled every 0.5 s: with 1,200 wanted, the server
    # held about max_connections (1024) once the kernel handed the silent ones
    # over (defer_accept), and never more than
    # that plus libmicrohttpd's headroom for sockets shut down and not closed
    # yet (1024 / 8)
    c.true("server descriptors up to, and bounded by, max_connections",
           fds0 + 900 <= fds_max <= fds0 + 1024 + 128, "%d at start, %d at most (attacker held %d idle + %d slow "
           "at the end)" % (fds0, fds_max, held_idle, held_slow_end))
    life = sorted(slow_alone)
    # read_timeout (10 s) closes a slow connection, whatever it sends
    c.true("slow connections closed at the read deadline", life and 8 <= life[len(life) // 2] <= 13,
           "median lifetime %s" % (life[len(life) // 2] if life else None))
    c.true("server threads did not grow with connections", threads_max <= threads0 + 2,
           "%d at start, %d at most" % (threads0, threads_max))
    ev = metric(srv, "pdbsym_http_connections_evicted_total")
    c.true("connections beyond max_connections were evicted (metric)", ev is not None and ev > 0, ev)
    st, h, body = srv.request("GET", "/health")
    c.eq("health after the attack", st, 200)
finally:
    srv.close()

# ---- 2. beyond the limits ----------------------------------------------------------
# read_timeout long: only the limits close connections here; defer_accept off,
# so that silent connections reach the table
srv = Server(config="max_connections = 100\nmax_connections_per_ip = 40\nread_timeout = 120\ndefer_accept = 0\n")
try:
    fds0 = open_fds(srv.proc.pid)
    health = HealthProbe(srv.port, period=0.2)
    other = HealthProbe(srv.port, period=0.2, src="127.0.0.2")
    health.start()
    other.start()
    # a neighbour on 127.0.0.3 holds 30 idle connections (under its limit)
    neighbour = Holder(srv.port, 30, "idle", src="127.0.0.3")
    neighbour.start()
    time.sleep(1)
    flood = Flood(srv.port, 400, cap=2000, src="127.0.0.2")  # 400 connects a second
    flood.start()
    fds_max = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 8:
        time.sleep(0.2)
        fds_max = max(fds_max, open_fds(srv.proc.pid))
    flood.stop()
    neighbour_kept = neighbour.open_now()
    neighbour_closed = neighbour.closed_by_server
    neighbour.stop()
    health.stop()
    other.stop()
    check_probe("flood from 127.0.0.2: /health from 127.0.0.1", health)
    check_probe("flood from 127.0.0.2: /health from 127.0.0.2 itself", other)
    c.true("the flood's connections were closed by the server", flood.h.closed_by_server > 1000,
           "%d connects, %d closed" % (flood.h.connects, flood.h.closed_by_server))
    # the kernel's count: at most max_connections (100) plus libmicrohttpd's
    # headroom for sockets shut down and not closed yet (16)
    c.true("server descriptors bounded by max_connections",
           fds_max <= fds0 + 100 + 16, "descriptors: %d at start, %d at most" % (fds0, fds_max))
    # without the per-address limit the flood would fill all 100 and then
    # evict the oldest connections, the neighbour's: it kept them all
    c.eq("the neighbour's connections under its limit were left alone", (neighbour_kept, neighbour_closed), (30, 0))
finally:
    srv.close()

# the same flood with the default defer_accept: it never reaches the server
srv = Server(config="max_connections = 100\n")
try:
    fds0 = open_fds(srv.proc.pid)
    health = HealthProbe(srv.port, period=0.2)
    health.start()
    flood = Flood(srv.port, 400, cap=2000, src="127.0.0.2")
    flood.start()
    fds_max = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 6:
        time.sleep(0.2)
        fds_max = max(fds_max, open_fds(srv.proc.pid))
    flood.stop()
    health.stop()
    check_probe("silent flood, defer_accept on: /health", health)
    c.true("silent flood, defer_accept on: connections made", flood.h.connects > 1500, flood.h.connects)
    c.true("silent flood, defer_accept on: the server holds none of them", fds_max <= fds0 + 8,
           "descriptors: %d at start, %d at most" % (fds0, fds_max))
    ev = metric(srv, "pdbsym_http_connections_evicted_total")
    c.eq("silent flood, defer_accept on: nothing to evict", ev, 0.0)
finally:
    srv.close()

# ---- 3. absolute read deadline ---------------------------------------------------------
srv = Server(config="read_timeout = 2\nconnection_timeout = 30\n")
try:
    for what, head, drip in (
            ("dripping headers", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Drip: 1\r\n"),
            ("dripping body", b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 100000\r\n\r\n", b" ")):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(head)
        t0 = time.monotonic()
        closed_at = None
        while time.monotonic() - t0 < 8:
            try:
                s.sendall(drip)
            except OSError:
                closed_at = time.monotonic() - t0
                break
            s.settimeout(0.3)
            try:
                if s.recv(4096) == b"":
                    closed_at = time.monotonic() - t0
                    break
            except socket.timeout:
                pass
            except OSError:
                closed_at = time.monotonic() - t0
                break
        s.close()
        c.true("%s: closed at the 2 s read deadline although bytes kept coming" % what,
               closed_at is not None and 1.5 <= closed_at <= 4.5, "closed after %s s" % closed_at)
    # a kept-alive connection gets its deadline again for its next request
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    for i in range(3):
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = s.recv(4096)
        c.true("kept-alive request %d answered" % i, data.startswith(b"HTTP/1.1 200"), data[:30])
        time.sleep(1.2)  # 3.6 s in all, past one deadline, never 2 s for one request
    s.close()
    exp = metric(srv, "pdbsym_http_read_deadline_closed_total")
    c.true("read deadline closures counted", exp is not None and exp >= 2, exp)
finally:
    srv.close()

# ---- 4. heavy routes saturated --------------------------------------------------------
up = SlowUpstream(6)
srv = Server(env=up.env(), config="max_inflight = 6\nrequest_workers = 3\n")
try:
    health = HealthProbe(srv.port, period=0.2)
    health.start()
    results = []

    def heavy(i):
        body = {"modules": [dict(MODULE, debug_file="slow%d.pdb" % i)], "frames": [{"module": 0, "rva": 16}],
                "timeout": 8}
        try:
            results.append(srv.request("POST", "/symbolicate", body, timeout=40)[0])
        except Exception as e:  # noqa: BLE001
            results.append(repr(e))

    ts = [threading.Thread(target=heavy, args=(i,)) for i in range(10)]
    for t in ts:
        t.start()
        time.sleep(0.05)
    slow = Holder(srv.port, 200, "slow", interval=1)
    slow.start()
    for t in ts:
        t.join(60)
    slow.stop()
    health.stop()
    check_probe("workers busy, queue full, 200 slow connections: /health", health)
    c.eq("heavy requests: 6 admitted, 4 refused", sorted(results), [200] * 6 + [503] * 4)
finally:
    srv.close()
    up.close()

# ---- 5. memory: 64 concurrent requests of 10,000 frames --------------------------------
native_dir = os.path.join(root, "tests", "fixtures", "native")
store = tempfile.mkdtemp(prefix="pdbsym-attack-store-")
try:
    header, col = None, None
    for line in open(os.path.join(native_dir, "MANIFEST.tsv")):
        if line.startswith("# name"):
            header = line[2:].rstrip("\n").split("\t")
        elif not line.startswith("#") and line.strip():
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            if row["name"] == "c-x64-O2-col":
                col = row
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    d = os.path.join(store, debug_file, col["symkey"])
    os.makedirs(d)
    with open(os.path.join(d, debug_file), "wb") as f:
        f.write(gzip.open(os.path.join(native_dir, col["pdb"])).read())
    rvas = []
    for ln in open(os.path.join(native_dir, col["expected"])):
        if not ln.startswith("#") and ln.strip():
            lo, hi = (int(x, 16) for x in ln.split("\t")[:2])
            rvas += [lo, (lo + hi - 1) // 2]
    NFRAMES, NREQ = 10000, 64
    body = json.dumps({"modules": [{"debug_file": col["cv_path"], "debug_id": col["symkey"]}],
                       "frames": [{"module": 0, "rva": "0x%x" % rvas[i % len(rvas)]} for i in range(NFRAMES)]}).encode()

    def storm(srv):
        def post():
            cn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
            cn.request("POST", "/symbolicate", body=body, headers={"Content-Type": "application/json"})
            r = cn.getresponse()
            data = r.read()
            cn.close()
            return r.status, r.getheader("Retry-After"), data

        st, _, data = post()  # warm: the module is parsed and cached
        warm = json.loads(data)
        c.eq("warm-up: every frame answered ok", sum(1 for f in warm["frames"] if f["status"] == "ok"), NFRAMES)
        time.sleep(0.5)
        rss0 = proc_status(srv.proc.pid, "VmRSS")
        out = []
        go = threading.Barrier(NREQ)

        def one():
            go.wait()
            out.append(post())

        ts = [threading.Thread(target=one) for _ in range(NREQ)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(900)
        grew = (proc_status(srv.proc.pid, "VmHWM") - rss0) * 1024
        return warm, out, grew

    # the default budget (256 MiB) takes all 64 at once
    srv = Server(env={"PDBSYM_SYMBOL_PATH": store, "PDBSYM_OFFLINE": "false"})
    try:
        warm, out, grew = storm(srv)
        ok = [x for x in out if x[0] == 200]
        c.eq("64 x 10,000 frames, default budget: all answered", len(ok), NREQ)
        c.true("every answer is the warm-up's answer",
               all(json.loads(x[2])["frames"] == warm["frames"] for x in ok))
        budget = 256 << 20
        print("64 x 10,000 frames: RSS grew %.1f MiB (%.2f MiB per request), budget %d MiB"
              % (grew / 2**20, grew / 2**20 / NREQ, budget >> 20))
        if not sanitized_build():  # ASan's shadow memory and quarantine are not the server's
            c.true("RSS grew less than the memory budget", grew < budget, "%.1f MiB" % (grew / 2**20))
        peak = metric(srv, "pdbsym_request_memory_peak_bytes")
        c.true("the budget's own count stayed under it", peak is not None and 0 < peak <= budget, peak)
    finally:
        srv.close()

    # a small budget: what does not fit gets 503 + Retry-After, and RSS stays
    # under the budget plus the fixed costs it does not count (the stacks of
    # 64 workers running at once for the first time, libmicrohttpd's
    # per-connection buffers: FIXED); without a budget it grows by ~80 MiB
    small, FIXED = 24 << 20, 16 << 20
    srv = Server(env={"PDBSYM_SYMBOL_PATH": store, "PDBSYM_OFFLINE": "false"},
                 config="request_memory_max = 24M\n")
    try:
        warm, out, grew = storm(srv)
        codes = sorted(set(x[0] for x in out))
        c.true("small budget: answers are 200 or 503", set(codes) <= {200, 503}, codes)
        ok = [x for x in out if x[0] == 200]
        refused = [x for x in out if x[0] == 503]
        c.true("small budget: some answered, some refused", ok and refused, (len(ok), len(refused)))
        c.true("small budget: 503s carry Retry-After and name the budget",
               all(x[1] and "request_memory_max" in json.loads(x[2])["error"] for x in refused), refused[:1])
        print("small budget (24 MiB): %d answered, %d refused, RSS grew %.1f MiB"
              % (len(ok), len(refused), grew / 2**20))
        if not sanitized_build():
            c.true("small budget: RSS grew less than the budget and the fixed costs", grew < small + FIXED,
                   "%.1f MiB" % (grew / 2**20))
        peak = metric(srv, "pdbsym_request_memory_peak_bytes")
        c.true("small budget: the budget's own count stayed under it", peak is not None and 0 < peak <= small, peak)
        c.true("small budget: the answered ones are whole",
               all(json.loads(x[2])["frames"] == warm["frames"] for x in ok))
    finally:
        srv.close()
finally:
    shutil.rmtree(store, ignore_errors=True)

# ---- 6. a damaged module in the cache: one more JSON line in the log ----------------------
native_dir = os.path.join(root, "tests", "fixtures", "native")
store = tempfile.mkdtemp(prefix="pdbsym-attack-store-")
try:
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    d = os.path.join(store, debug_file, col["symkey"])
    os.makedirs(d)
    with open(os.path.join(d, debug_file), "wb") as f:
        f.write(gzip.open(os.path.join(native_dir, col["pdb"])).read())
    one = {"modules": [{"debug_file": col["cv_path"], "debug_id": col["symkey"]}],
           "frames": [{"module": 0, "rva": "0x%x" % rvas[0]}]}
    env = {"PDBSYM_SYMBOL_PATH": store, "PDBSYM_OFFLINE": "false"}
    srv = Server(env=env)
    cache = os.path.join(srv.tmp, "cache")
    st, h, j = srv.json("POST", "/symbolicate", one)
    c.eq("damaged cache: the module is found and cached first", j["modules"][0]["status"], "found")
    srv.stop()
    # the module's table file (the cache's layout: a row in SQLite and a file
    # in tables/, store_int.h): its first byte changed, so the load's header
    # check finds it
    tables = os.path.join(cache, "tables")
    pst = [f for f in os.listdir(tables) if f.endswith(".pst")] if os.path.isdir(tables) else []
    for f in pst:
        with open(os.path.join(tables, f), "r+b") as t:
            b = t.read(1)
            t.seek(0)
            t.write(bytes([b[0] ^ 0x5a]))
    c.true("damaged cache: the table file changed", len(pst) == 1, pst)
    # the same cache folder, a new process: the module is read from SQLite
    again = Server(env=dict(env, PDBSYM_CACHE_DIR=cache))
    try:
        st, h, j = again.json("POST", "/symbolicate", one)
        c.eq("damaged cache: answered", st, 200)
        raw = open(again.log_path).read().splitlines()
        bad = []
        for ln in raw:
            try:
                json.loads(ln)
            except ValueError:
                bad.append(ln)
        c.eq("damaged cache: every log line is JSON", bad, [])
        dmg = [r for r in again.logs() if "damaged" in r.get("msg", "")]
        c.true("damaged cache: the damage is logged with the module's key",
               len(dmg) == 1 and dmg[0].get("key", "").startswith(debug_file.lower() + "/"), dmg)
    finally:
        again.close()
    shutil.rmtree(srv.tmp, ignore_errors=True)
finally:
    shutil.rmtree(store, ignore_errors=True)

# ---- 7. content type and Host ------------------------------------------------------------
srv = Server(config="allowed_hosts = symbols.internal, Pdbsym\n")
try:
    ok_body = json.dumps({"modules": [MODULE], "frames": [{"module": 0, "rva": 16}]}).encode()
    v5 = json.dumps({"memoryMap": [["demo.pdb", "3773E3530B2E493882ECA7324B16C2D91"]], "stacks": [[[0, 16]]]})

    def post_typed(route, ct, body):
        cn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        cn.putrequest("POST", route)
        if ct:
            cn.putheader("Content-Type", ct)
        cn.putheader("Content-Length", str(len(body)))
        cn.endheaders(body)
        r = cn.getresponse()
        data = r.read()
        cn.close()
        return r.status, data

    simple = ("text/plain", "text/plain;charset=UTF-8", None)
    forms = ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x")
    for route, refused, want in (("/symbolicate", simple + forms + ("application/jsonx",), "application/json"),
                                 ("/symbolicate/v5", forms + ("application/jsonx", "application/octet-stream"),
                                  "application/json"),
                                 ("/traces", simple + forms, "application/octet-stream")):
        for ct in refused:
            st, data = post_typed(route, ct, ok_body)
            c.eq("POST %s with Content-Type %r: status" % (route, ct), st, 415)
            c.true("POST %s with Content-Type %r: JSON error naming the type to send" % (route, ct),
                   want in json.loads(data).get("error", ""), data)
    # what the Firefox Profiler sends: no type (the browser says text/plain)
    for ct in simple:
        st, data = post_typed("/symbolicate/v5", ct, v5.encode())
        c.eq("v5 with Content-Type %r accepted" % ct, st, 200)
    st, data = post_typed("/traces", "application/octet-stream", b"this is not a trace")
    c.eq("/traces with application/octet-stream read (and refused as no trace)", st, 400)
    for ct in ("application/json", "application/json; charset=utf-8", "Application/JSON"):
        st, h, data = srv.request("POST", "/symbolicate", ok_body, headers={"Content-Type": ct})
        c.eq("Content-Type %r accepted" % ct, st, 200)
        st, h, data = srv.request("POST", "/symbolicate/v5", v5.encode(), headers={"Content-Type": ct})
        c.eq("v5 with Content-Type %r accepted" % ct, st, 200)
    for host, want in (("evil.example", 403), ("evil.example:%d" % srv.port, 403), ("localhost.evil.example", 403),
                       ("127.0.0.1.nip.io", 403), ("", 403), ("[::1", 403),
                       ("localhost:%d" % srv.port, 200), ("LOCALHOST", 200), ("localhost.", 200),
                       ("127.0.0.1", 200), ("10.1.2.3:80", 200), ("[::1]:%d" % srv.port, 200),
                       ("symbols.internal", 200), ("pdbsym:8765", 200)):
        raw = srv.raw(b"GET /health HTTP/1.1\r\nHost: " + host.encode() + b"\r\nConnection: close\r\n\r\n")
        status = int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else None
        if host == "":
            c.true("empty Host refused", status in (400, 403), raw[:60])
            continue
        c.eq("Host %r" % host, status, want)
        if want == 403:
            c.true("Host %r: JSON error" % host, b'"error":"Host ' in raw, raw[-200:])
    # HTTP/1.0 without Host: no browser sends that, accepted
    raw = srv.raw(b"GET /health HTTP/1.0\r\n\r\n")
    c.true("HTTP/1.0 without Host", raw.startswith(b"HTTP/1.0 200") or raw.startswith(b"HTTP/1.1 200"), raw[:40])
finally:
    srv.close()
c.done()
