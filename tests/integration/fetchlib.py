"""fetchlib.py - helpers for the fetch integration tests: start
tests/symserver.py, drive `pdbsym fetch` as a real process, check results.

Not a test itself (ctest picks up test_*.py only)."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

SRC = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PDBSYM_BIN") or os.path.join(SRC, "build", "pdbsym")
sys.dont_write_bytecode = True  # tests/__pycache__ would land in the source tree
sys.path.insert(0, os.path.join(SRC, "tests"))
import cabmake  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GUID = "3773e353-0b2e-4938-82ec-a7324b16c2d9"
AGE = 0x1a
DEBUG_ID = "%s-%x" % (GUID, AGE)
# the symbol-server directory, derived by hand from the GUID text: no code of ours
KEY = GUID.replace("-", "").upper() + "%X" % AGE
PKEY = GUID.replace("-", "").upper() + "FFFFFFFF"


class Server:
    def __init__(self, root):
        self.root = root
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRC, "tests", "symserver.py"), root,
             "--exit-with-parent"],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])
        self.url = "http://127.0.0.1:%d" % self.port
        atexit.register(self.stop)

    def _post(self, path, obj):
        req = urllib.request.Request(self.url + path, data=json.dumps(obj).encode(),
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def control(self, rules):
        return self._post("/_control", rules)

    def reset(self):
        return self._post("/_reset", {})

    def hits(self):
        with urllib.request.urlopen(self.url + "/_stats", timeout=10) as r:
            return json.load(r)["hits"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def fetch(args, symbol_path, out, env_extra=None, timeout=120):
    env = dict(os.environ)
    env.pop("PDBSYM_SYMBOL_PATH", None)
    env.update(env_extra or {})
    # the fault and layout tests serve made-up bodies: no identity check there
    # (test_fetch_verify.py checks it with real PDBs)
    if "--verify" in args:
        args = [a for a in args if a != "--verify"]
    else:
        args = ["--no-verify"] + args
    cmd = [BIN, "fetch"] + args + ["--symbol-path", symbol_path, "--out", out]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def put(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def fake_pdb(size=20000, seed=1):
    """PDB-looking bytes (the MSF magic, then pseudo-random filler)."""
    import random
    r = random.Random(seed)
    head = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"
    return head + bytes(r.getrandbits(8) for _ in range(size - len(head)))


class Checker:
    def __init__(self, name):
        self.name = name
        self.failed = 0
        self.passed = 0
        self.tmp = tempfile.mkdtemp(prefix="pdbsym-it-")

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            harness.failed()
            print("FAIL: %s" % what, flush=True)
        return cond

    def no_temp_files(self, folder, allowed):
        left = sorted(set(os.listdir(folder)) - set(allowed))
        self.check(not left, "no temporary files left in %s (found %s)" % (folder, left))

    def finish(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        print("%s: %d checks passed, %d failed" % (self.name, self.passed, self.failed))
        return harness.status(1 if self.failed else 0)
