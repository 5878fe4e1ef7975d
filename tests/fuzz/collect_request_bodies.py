#!/usr/bin/env python3
"""collect_request_bodies.py - remakes the seed corpus of fuzz_request_diff
(tests/fuzz/corpus/request_diff/), which test_request_diff also reads: every
body the integration tests POST to /symbolicate and /symbolicate/v5.

It runs the integration tests as ctest would (PDBSYM_BIN, PDBSYM_SOURCE_DIR,
PDBSYM_BUILD_DIR set), each with a sitecustomize.py on PYTHONPATH that wraps
http.client.HTTPConnection.request (which urllib uses too) and writes every
such body to a folder; then keeps the distinct ones of at most --max-bytes
(the rest are counted, not kept: the corpus stays small), named by their
SHA-1.  Bodies sent as raw socket bytes (the HTTP-level attacks) are not
seen; the unit tests' own bodies are in test_request_diff.c.

    python3 tests/fuzz/collect_request_bodies.py BUILD_DIR [--max-bytes 65536] [TEST.py ...]

Python standard library only."""
import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))

HOOK = r'''
import hashlib, http.client, os
_dir = os.environ["PDBSYM_RECORD_BODIES"]
_orig = http.client.HTTPConnection.request
def _request(self, method, url, body=None, headers={}, **kw):
    try:
        path = url.split("?", 1)[0]
        if "://" in path:
            path = "/" + path.split("://", 1)[1].split("/", 1)[-1]
        if method == "POST" and path.rstrip("/") in ("/symbolicate", "/symbolicate/v5"):
            b = body.encode() if isinstance(body, str) else body
            if isinstance(b, (bytes, bytearray)):
                h = hashlib.sha1(b).hexdigest()
                with open(os.path.join(_dir, h), "wb") as f:
                    f.write(b)
    except Exception:
        pass
    return _orig(self, method, url, body, headers, **kw)
http.client.HTTPConnection.request = _request
'''

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("tests", nargs="*", help="integration tests to run (default: test_http_*.py and test_cli_*.py)")
ap.add_argument("--max-bytes", type=int, default=65536)
args = ap.parse_args()
build = os.path.abspath(args.build)
tests = args.tests or sorted(glob.glob(os.path.join(root, "tests", "integration", "test_http_*.py")) +
                             glob.glob(os.path.join(root, "tests", "integration", "test_cli_*.py")))
out = os.path.join(here, "corpus", "request_diff")
tmp = tempfile.mkdtemp(prefix="pdbsym-bodies-")
try:
    hook = os.path.join(tmp, "hook")
    rec = os.path.join(tmp, "bodies")
    os.makedirs(hook)
    os.makedirs(rec)
    with open(os.path.join(hook, "sitecustomize.py"), "w") as f:
        f.write(HOOK)
    env = dict(os.environ, PDBSYM_SOURCE_DIR=root, PDBSYM_BIN=os.path.join(build, "pdbsym"),
               PDBSYM_BUILD_DIR=build, PDBSYM_LLVM_BIN=os.environ.get("PDBSYM_LLVM_BIN", "/usr/lib/llvm-19/bin"),
               PDBSYM_RECORD_BODIES=rec,
               PYTHONPATH=os.pathsep.join([hook] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    for t in tests:
        r = subprocess.run([sys.executable, t], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("%-40s exit %d, %d bodies so far" % (os.path.basename(t), r.returncode, len(os.listdir(rec))),
              flush=True)
    os.makedirs(out, exist_ok=True)
    kept = big = 0
    for name in sorted(os.listdir(rec)):
        data = open(os.path.join(rec, name), "rb").read()
        if len(data) > args.max_bytes:
            big += 1
            continue
        dst = os.path.join(out, hashlib.sha1(data).hexdigest()[:16] + ".json")
        if not os.path.exists(dst):
            with open(dst, "wb") as f:
                f.write(data)
            kept += 1
    print("%d new bodies in %s, %d longer than %d bytes not kept" % (kept, out, big, args.max_bytes))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
