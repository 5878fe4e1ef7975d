"""test_tmpdirs.py - no test leaves anything in /tmp: every ctest test runs
with a TMPDIR of its own, BUILD/tmp/TEST (CMakeLists.txt), which
scripts/test.sh empties before the run and checks after it, failing the run
with the names of the tests that left something there.  Checked here:
- every test ctest knows has TMPDIR=BUILD/tmp/TEST, and the folder exists
  (tempfile, mktemp and the C tests' mkdtemp all honour TMPDIR);
- no test source names a path under /tmp itself (only "/tmp" as the fallback
  when TMPDIR is unset), the scanner first shown to catch planted lines;
- scripts/test.sh has the check after each run.
Python standard library only."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from pdbsym_server import Checks  # noqa: E402

ROOT = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILD = os.environ.get("PDBSYM_BUILD_DIR")
if not BUILD:
    harness.skip("PDBSYM_BUILD_DIR not set (run through ctest)")
c = Checks()

r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=BUILD, capture_output=True, text=True, timeout=120)
tests = json.loads(r.stdout).get("tests", []) if r.returncode == 0 else []
c.true("ctest lists the suite", len(tests) > 50, (r.returncode, r.stderr[-300:]))
for t in tests:
    env = {}
    for p in t.get("properties", []):
        if p.get("name") == "ENVIRONMENT":
            env = dict(v.split("=", 1) for v in p.get("value", []) if "=" in v)
    want = os.path.join(BUILD, "tmp", t["name"])
    c.true("%s: TMPDIR is BUILD/tmp/%s" % (t["name"], t["name"]), os.path.realpath(env.get("TMPDIR", "")) ==
           os.path.realpath(want) and os.path.isdir(want), env.get("TMPDIR"))

BAD = re.compile(r"""["'](/tmp/[^"']*|/tmp)["']""")


def hits(line):
    """A /tmp path in line that is not the fallback of an unset TMPDIR."""
    for m in BAD.finditer(line):
        if m.group(1) == "/tmp" and re.search(r"TMPDIR|\btmp\b|\bt\b|base|\?", line[:m.start()]):
            continue  # getenv("TMPDIR") ... : "/tmp"
        return True
    return False


for line, want in (('snprintf(d, n, "/tmp/pdbsym-llvm19-XXXXXX");', True),
                   ('d = tempfile.mkdtemp(dir="/tmp")', True),
                   ('snprintf(d, n, "%s/x-XXXXXX", t && *t ? t : "/tmp");', False),
                   ('d = tempfile.mkdtemp(prefix="pdbsym-")', False)):
    c.eq("the scanner on %r" % line, hits(line), want)
found = []
for top in ("tests/unit", "tests/integration", "tests/fuzz"):
    for f in sorted(os.listdir(os.path.join(ROOT, top))):
        if not f.endswith((".c", ".h", ".py", ".sh")) or f == "test_tmpdirs.py":
            continue
        for no, line in enumerate(open(os.path.join(ROOT, top, f), errors="replace"), 1):
            if hits(line) and not line.lstrip().startswith(("#", "*", "//")):
                found.append("%s/%s:%d: %s" % (top, f, no, line.strip()))
c.eq("no test names a path under /tmp", found, [])

script = open(os.path.join(ROOT, "scripts", "test.sh")).read()
c.true("scripts/test.sh fails a run that left files in a test's TMPDIR",
       'find "$dir/tmp" -mindepth 2' in script and "left files in their TMPDIR" in script)
c.done()
