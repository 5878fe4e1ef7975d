"""SIGTERM while a request waits for a slow download with a long timeout:
once shutdown_grace is over the process exits (the engine's grace for running
downloads is 10 s), instead of holding on until the request's own deadline."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, Server, SlowUpstream  # noqa: E402

DELAY = 40  # the upstream's answer comes long after grace + the engine's 10 s

c = Checks()
up = SlowUpstream(DELAY)
srv = Server(env=up.env(), config="shutdown_grace = 1\n")
try:
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
    c.eq("exit status", rc, 0)
    c.true("stopped before the download's end", took < DELAY - 15, "took %.1fs" % took)
finally:
    srv.close()
    up.close()
c.done()
