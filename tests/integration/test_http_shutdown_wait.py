"""SIGTERM while a request waits for a slow download with a long timeout:
once shutdown_grace is over the process exits (the engine's grace for running
downloads is 10 s), instead of holding on until the request's own deadline.
Then the same with a long shutdown_grace and stop_timeout = 3: the whole
shutdown (the requests' grace and the downloads') ends within stop_timeout."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, Server, SlowUpstream  # noqa: E402

DELAY = 40  # the upstream's answer comes long after grace + the engine's 10 s

c = Checks()


def run(config, limit, what):
    up = SlowUpstream(DELAY)
    srv = Server(env=up.env(), config=config)
    try:
        body(srv, limit, what)
    finally:
        srv.close()
        up.close()


def body(srv, limit, what):
    mod = {"debug_file": "slow.pdb", "debug_id": "3773e353-0b2e-4938-82ec-a7324b16c2d9-1"}

    def inflight():
        try:
            srv.request("POST", "/symbolicate",
                        {"modules": [mod], "frames": [{"module": 0, "rva": 16}], "timeout": 120},
                        timeout=DELAY + 20)
        except Exception:  # noqa: BLE001 - the connection may be closed at shutdown
            pass

    t = threading.Thread(target=inflight, daemon=True)
    t.start()
    time.sleep(1.0)  # the request is waiting for its download
    start = time.time()
    rc = srv.stop(timeout=DELAY + 20)
    took = time.time() - start
    c.eq("%s: exit status" % what, rc, 0)
    c.true("%s: stopped within %d s" % (what, limit), took < limit, "took %.1fs" % took)
    print("%s: SIGTERM to exit %.1f s" % (what, took))


# shutdown_grace 1 s, then the engine's 10 s for the running download
run("shutdown_grace = 1\n", DELAY - 15, "shutdown_grace = 1")
# a long grace, cut by stop_timeout: 3 s, plus the threads' stop floors (2 s)
# and the process's own exit
run("shutdown_grace = 30\nstop_timeout = 3\n", 3 + 4, "stop_timeout = 3")
c.done()
