#!/usr/bin/env python3
"""A stand-in for a profiler backend, for docker/compose.yaml: POSTs the
batch of frames in $BATCH to pdbsym's /symbolicate every $EVERY seconds and
prints the answer's first bytes (or the error)."""
import os
import signal
import time
import urllib.request

# PID 1 of its container: SIGTERM (compose down) must end it
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
url = os.environ.get("PDBSYM_URL", "http://127.0.0.1:8765") + "/symbolicate"
batch = open(os.environ.get("BATCH", "/etc/profiler/batch.json"), "rb").read()
every = float(os.environ.get("EVERY", "30"))
while True:
    req = urllib.request.Request(url, data=batch, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            print("%d %s" % (r.status, r.read(300).decode("utf-8", "replace")), flush=True)
    except Exception as e:  # an answer of 4xx/5xx, or none: printed, tried again later
        print("error: %s" % e, flush=True)
    time.sleep(every)
