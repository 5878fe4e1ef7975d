"""Attack (issue 13): 5 requests of 1,000 unknown modules each at once against
a symbol server that is slow to answer 404.  The real `pdbsym serve`, a real
HTTP upstream on 127.0.0.1 (every answer a 404 after DELAY seconds).

Checked: the process's thread count (/proc/PID/status, sampled every 20 ms)
never passes what it was idle plus the connections this test opens (the
download threads are a constant of the configuration: download_workers and
one network thread, started at open); /health answers in under a second
throughout; the modules are answered `pending` (not an error), the ones beyond
download_queue naming the queue.  Prints the figures.

ATTACK_MODULES (default 1000) sets the modules per request, for measuring an
older binary without exhausting the machine."""
import http.server
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, HealthProbe, Sampler, Server, threads_of  # noqa: E402

DELAY = 0.5
REQUESTS = 5
MODULES = int(os.environ.get("ATTACK_MODULES", "1000"))


class SlowNotFound:
    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                with outer.lock:
                    outer.count += 1
                time.sleep(DELAY)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


c = Checks()
up = SlowNotFound()
srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % up.port,
                  "PDBSYM_OFFLINE": "false"},
             config="max_modules = %d\n" % max(MODULES, 1000))
try:
    pid = srv.proc.pid
    st, _, _ = srv.request("GET", "/health")
    idle = Sampler(lambda: threads_of(pid), 0.02)
    time.sleep(0.5)
    idle_threads = idle.stop().max()
    threads = Sampler(lambda: threads_of(pid), 0.02)
    health = HealthProbe(srv, 0.1)
    answers = [None] * REQUESTS

    def ask(r):
        mods = [{"debug_file": "m%d_%d.pdb" % (r, i),
                 "debug_id": "%08X%024X1" % (r, i)} for i in range(MODULES)]
        frames = [{"module": i, "rva": "0x1000"} for i in range(MODULES)]
        try:
            answers[r] = srv.json("POST", "/symbolicate", {"modules": mods, "frames": frames,
                                                           "timeout": 8}, timeout=60)
        except Exception as e:  # noqa: BLE001 - reported below
            answers[r] = (0, {}, {"error": repr(e)})

    t0 = time.monotonic()
    ts = [threading.Thread(target=ask, args=(r,)) for r in range(REQUESTS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    time.sleep(2)  # the downloads go on after the answers
    threads.stop()
    health.stop()
    peak = threads.max()
    print("threads: idle %d, peak %d during %d x %d unknown modules (%.1fs); upstream GETs so far %d"
          % (idle_threads, peak, REQUESTS, MODULES, took, up.count))
    print("/health: %d probes, slowest %.3fs" % (len(health.values), health.max()))
    # the connections this test holds: the 5 requests and one /health probe
    c.true("threads never above idle + the test's connections",
           peak <= idle_threads + REQUESTS + 1, "peak %d, idle %d" % (peak, idle_threads))
    c.true("/health under 1 s throughout", health.max() < 1.0, "slowest %.3fs" % health.max())
    statuses = {}
    for a in answers:
        c.eq("request answered", a[0], 200)
        for m in a[2].get("modules", []):
            statuses[m["status"]] = statuses.get(m["status"], 0) + 1
    print("module statuses: %s" % statuses)
    c.true("every module pending (or found missing)", set(statuses) <= {"pending", "missing"}
           and statuses.get("pending", 0) > 0, statuses)
    # a request's share of the queue (request_downloads, request_downloads_max)
    # stops it before the queue fills: its other modules say which share
    beyond = sum(1 for a in answers for m in a[2].get("modules", [])
                 if any(k in (m.get("error") or "")
                        for k in ("download_queue", "request_downloads")))
    print("modules past the queue or the request's share: %d" % beyond)
    if REQUESTS * MODULES > 1000:
        c.true("modules beyond the request's share or download_queue say so", beyond > 0)
    st, _, _ = srv.request("GET", "/health", timeout=5)
    c.eq("still healthy", st, 200)
finally:
    srv.close()
    up.close()
c.done()
