"""clilib.py - helpers for the CLI integration tests (test_cli_*.py): run the
real `pdbsym` binary as a user would, in a clean environment and a temporary
folder, against the real test symbol server (tests/symserver.py) filled from
the committed fixtures.  Python standard library only."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks  # noqa: E402,F401
import harness  # noqa: E402

BIN = os.environ.get("PDBSYM_BIN")
ROOT = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NATIVE = os.path.join(ROOT, "tests", "fixtures", "native")
MANAGED = os.path.join(ROOT, "tests", "fixtures", "managed")
SYMSERVER = os.path.join(ROOT, "tests", "symserver.py")
CORPUS = os.path.join(ROOT, "..", "shared", "corpus")


def need_binary():
    if not BIN or not os.path.exists(BIN):
        harness.skip("PDBSYM_BIN not set (run through ctest)")


class Sandbox:
    """A temporary folder with a cache in it, and an environment holding no
    PDBSYM_ variable of the caller's, never reaching the internet."""

    def __init__(self, prefix="pdbsym-cli-"):
        need_binary()
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.cache = os.path.join(self.dir, "cache")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_")}
        self.env["PDBSYM_CACHE_DIR"] = self.cache
        # a dead local port: a test that forgets its symbol path fails fast
        self.env["PDBSYM_SYMBOL_PATH"] = "srv*http://127.0.0.1:9"
        self.env["TMPDIR"] = self.dir  # what a command leaves behind is seen

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def run(self, args, stdin=None, env=None, timeout=120):
        """Runs pdbsym ARGS; returns (exit status, stdout, stderr) as text."""
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run([BIN] + list(args), input=stdin, env=e, capture_output=True,
                           text=True, timeout=timeout, cwd=self.dir)
        return p.returncode, p.stdout, p.stderr

    def popen(self, args, env=None, **kw):
        e = dict(self.env)
        if env:
            e.update(env)
        return subprocess.Popen([BIN] + list(args), env=e, cwd=self.dir, **kw)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def manifest():
    """The native fixtures' MANIFEST.tsv rows as dicts (columns by name)."""
    rows, header = [], None
    for line in open(os.path.join(NATIVE, "MANIFEST.tsv")):
        if line.startswith("# name"):
            header = line[2:].rstrip("\n").split("\t")
        if line.startswith("#") or not line.strip():
            continue
        rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    return rows


def debug_file(row):
    return row["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]


def gunzip_to(src, dst):
    with gzip.open(src) as f, open(dst, "wb") as o:
        o.write(f.read())


class SymServer:
    """tests/symserver.py over a symstore folder (ROOT/name/key/name)."""

    def __init__(self, store):
        self.store = store
        self.proc = subprocess.Popen([sys.executable, SYMSERVER, store, "--exit-with-parent"],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline().split()[1])
        self.url = "http://127.0.0.1:%d" % self.port

    def put(self, name, key, data):
        d = os.path.join(self.store, name, key)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        return "/%s/%s/%s" % (name, key, name)

    def _post(self, path, obj):
        req = urllib.request.Request(self.url + path, data=json.dumps(obj).encode(), method="POST")
        return urllib.request.urlopen(req, timeout=10).read()

    def control(self, rules):
        self._post("/_control", rules)

    def reset(self):
        self._post("/_reset", {})

    def hits(self):
        return json.loads(urllib.request.urlopen(self.url + "/_stats", timeout=10).read())

    def close(self):
        self.proc.kill()
        self.proc.wait()


def native_store(srv):
    """Puts every native fixture PDB on the symbol server; returns the rows
    with their symbol-server path added ("path")."""
    rows = manifest()
    for r in rows:
        with gzip.open(os.path.join(NATIVE, r["pdb"])) as f:
            r["path"] = srv.put(debug_file(r), r["symkey"], f.read())
    return rows


def summary(stdout):
    """The counts of warm's summary line: {"found": n, "already cached": n, ...}."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("warm: ") and " found, " in line:
            out = {}
            for part in line[len("warm: "):].split(", "):
                words = part.split(" ", 1)
                if words[0].isdigit() and len(words) == 2:
                    key = words[1].split(" (")[0]
                    if key.endswith(" not started"):
                        key = "not started"
                    out[key] = int(words[0])
            return out
    return None
