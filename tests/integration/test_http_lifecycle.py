"""Time and concurrency in `pdbsym serve`: a request's timeout turns slow
modules into `pending`, too many requests in flight get 503 with Retry-After,
idle and half-sent connections are closed, and SIGTERM lets the requests in
flight finish before the process exits 0.  A slow upstream symbol server
keeps module fetches in flight."""
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import MODULE, Checks, Server, SlowUpstream  # noqa: E402

c = Checks()
DELAY = 4.0
up = SlowUpstream(DELAY)


def module(i):
    return dict(MODULE, debug_file="slow%d.pdb" % i)


def frames_for(n):
    return [{"module": i, "rva": "0x%x" % (0x1000 + i)} for i in range(n)]


try:
    # defer_accept = 1: the kernel hands a silent connection over after 1 s
    # (section 3), not the default's 15
    srv = Server(env=up.env(), config="max_inflight = 2\nconnection_timeout = 1\nretry_after = 3\n"
                                      "defer_accept = 1\n")
    try:
        # 1. timeout: the modules are not ready after 0.5 s -> pending with retry_after
        t0 = time.time()
        st, h, j = srv.json("POST", "/symbolicate", {"modules": [module(0), module(1)], "frames": frames_for(2),
                                                     "timeout": 0.5})
        took = time.time() - t0
        c.eq("timeout: status", st, 200)
        c.eq("timeout: frames pending", [f["status"] for f in j["frames"]], ["pending", "pending"])
        c.eq("timeout: retry_after", [f.get("retry_after") for f in j["frames"]], [3, 3])
        c.eq("timeout: modules pending", [m["status"] for m in j["modules"]], ["pending", "pending"])
        c.true("timeout: answered near the deadline, not after both fetches", took < DELAY, "took %.2fs" % took)
        st, h, j = srv.json("POST", "/symbolicate", {"modules": [module(5)], "frames": frames_for(1), "timeout": 0})
        c.eq("timeout 0: pending at once", j["frames"][0]["status"], "pending")

        # 2. max_inflight = 2: two slow requests in flight, a third is refused
        results = []

        def slow(i):
            try:
                results.append(srv.json("POST", "/symbolicate",
                                        {"modules": [module(10 + i)], "frames": frames_for(1), "timeout": DELAY + 5}))
            except Exception as e:  # noqa: BLE001
                results.append(e)

        ts = [threading.Thread(target=slow, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        # wait until both are in flight (the machine may be busy)
        deadline = time.time() + 10
        while time.time() < deadline:
            st, h, body = srv.request("GET", "/metrics")
            if b"\npdbsym_http_requests_in_flight 2\n" in body:
                break
            time.sleep(0.05)
        st, h, body = srv.request("POST", "/symbolicate", {"modules": [module(20)], "frames": frames_for(1)})
        c.eq("in flight over the limit: 503", st, 503)
        c.eq("503 Retry-After", h.get("retry-after"), "3")
        c.true("503 body is JSON naming the limit", "max_inflight" in json.loads(body).get("error", ""), body)
        st, h, j = srv.json("GET", "/health")
        c.eq("health still answers while busy", st, 200)
        for t in ts:
            t.join()
        c.eq("the two slow requests were answered", [r[0] if isinstance(r, tuple) else r for r in results], [200, 200])
        c.true("slow answers are not pending", all(r[2]["frames"][0]["status"] != "pending" for r in results
                                                  if isinstance(r, tuple)), results)

        # 3. idle connection closed after connection_timeout (1 s), once the
        # kernel has handed it over (defer_accept, 1 s)
        for what, data in (("idle", b""), ("half-sent headers", b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
                           ("half-sent body", b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            if data:
                s.sendall(data)
            t0 = time.time()
            try:
                got = s.recv(4096)
                closed = True
            except (socket.timeout, ConnectionResetError):
                got, closed = b"", False
            took = time.time() - t0
            s.close()
            c.true("%s connection closed by the server" % what, closed and took < 8,
                   "closed=%s after %.1fs, got %r" % (closed, took, got[:80]))
    finally:
        srv.close()

    # 4. max_connections: a connection beyond it makes room by closing the
    # oldest connection that holds no complete request (docs/concurrency.md)
    # (defer_accept off: the held connections send nothing, and must reach the table)
    srv = Server(config="max_connections = 2\nconnection_timeout = 30\ndefer_accept = 0\n")
    try:
        # one after the other: two event-loop threads may accept two
        # connections made together in either order
        held = []
        for _ in range(2):
            held.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            time.sleep(0.3)
        third = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        third.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        try:
            got = third.recv(4096)
        except socket.timeout:
            got = b""
        c.true("connection over max_connections is served at once", got.startswith(b"HTTP/1.1 200"), got[:40])
        try:
            first = held[0].recv(4096)
        except (socket.timeout, ConnectionResetError):
            first = None
        c.eq("the oldest idle connection was closed to make room", first, b"")
        held[1].settimeout(0.5)
        try:
            second = held[1].recv(4096)
        except socket.timeout:
            second = None
        c.eq("the younger one is still open", second, None)
        for h in held + [third]:
            h.close()
        ev = [x for x in srv.logs() if x.get("msg", "").startswith("max_connections is not above")]
        c.true("max_connections <= max_inflight is warned about", len(ev) == 1, srv.logs()[:3])
    finally:
        srv.close()

    # 5. SIGTERM with a request in flight: it is answered, then the process exits 0
    srv = Server(env=up.env(), config="shutdown_grace = 20\n")
    try:
        box = {}

        def inflight():
            try:
                box["r"] = srv.json("POST", "/symbolicate", {"modules": [module(30)], "frames": frames_for(1),
                                                             "timeout": DELAY + 5})
            except Exception as e:  # noqa: BLE001
                box["r"] = e

        import http.client
        keep = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        keep.request("GET", "/health")
        keep.getresponse().read()
        t = threading.Thread(target=inflight)
        t.start()
        deadline = time.time() + 10
        while time.time() < deadline:
            st, h, body = srv.request("GET", "/metrics")
            if b"\npdbsym_http_requests_in_flight 1\n" in body:
                break
            time.sleep(0.05)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        keep.request("GET", "/ready")
        r = keep.getresponse()
        c.eq("/ready on a kept-alive connection while draining", (r.status, json.loads(r.read()).get("error")),
             (503, "shutting down"))
        keep.close()
        refused = False
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        except OSError:
            refused = True
        c.true("no new connections after SIGTERM", refused)
        t.join(30)
        r = box.get("r")
        c.true("the request in flight was answered", isinstance(r, tuple) and r[0] == 200, repr(r)[:300])
        rc = srv.proc.wait(30)
        c.eq("exit status after SIGTERM", rc, 0)
        msgs = [x.get("msg") for x in srv.logs()]
        c.true("stopping then stopped logged", "stopping" in msgs and msgs[-1] == "stopped", msgs[-4:])
        reqs = [x for x in srv.logs() if x.get("msg") == "request"]
        c.true("in-flight request logged before stop", any(x.get("status") == 200 for x in reqs), reqs)
    finally:
        srv.close()
finally:
    up.close()
c.done()
