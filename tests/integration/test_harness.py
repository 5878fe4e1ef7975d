"""The Python tests' harness (harness.py, and Checks in pdbsym_server.py)
checked on itself, as tests/unit/test_harness.c checks test.h: this file runs
itself once per case as a child ("test_harness.py --case NAME"), with and
without CI=true and with its own PDBSYM_BUILD_DIR, and checks the exit
status, the output and the skip list left in PDBSYM_BUILD_DIR/skips/."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from pdbsym_server import Checks  # noqa: E402


def run_case(name):
    c = Checks()
    if name == "check-then-skip":
        c.eq("deliberately false", 1 + 1, 3)
        harness.skip("deliberate skip after a failed check")
    elif name == "skip":
        harness.skip("deliberate skip: oracle tool absent")
    elif name == "part":
        c.eq("true", 1 + 1, 2)
        harness.skip_part("deliberate partial skip: cabextract absent")
        c.eq("still true", 2 + 2, 4)
    elif name == "optin":
        harness.opt_in("deliberate opt-in test, not asked for")
    elif name == "clean":
        c.eq("true", 1 + 1, 2)
    c.done()


if len(sys.argv) == 3 and sys.argv[1] == "--case":
    run_case(sys.argv[2])

tmp = tempfile.mkdtemp(prefix="pdbsym-harness-py-")
c = Checks()


def expect(name, ci, status, out_has, list_has):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PDBSYM_BUILD_DIR"] = tmp
    if ci:
        env["CI"] = "true"
    lst = os.path.join(tmp, "skips", "it.test_harness.tsv")
    if os.path.exists(lst):
        os.remove(lst)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name], env=env,
                       capture_output=True, text=True, timeout=60)
    text = open(lst).read() if os.path.exists(lst) else ""
    what = "case %s%s" % (name, " CI=true" if ci else "")
    c.eq(what + ": exit status", p.returncode, status)
    c.true(what + ": output has %r" % out_has, out_has in p.stdout, p.stdout)
    if list_has is None:
        c.eq(what + ": no skip list left", text, "")
    else:
        c.true(what + ": skip list has %r" % list_has, list_has in text, text)


# a failed check followed by a skip fails, under CI or not
expect("check-then-skip", False, 1, "FAIL deliberately false", "deliberate skip after")
expect("check-then-skip", True, 1, "FAIL deliberately false", "deliberate skip after")
# a skip is counted and named; CI=true turns it into a failure
expect("skip", False, 77, "skipped: deliberate skip: oracle tool absent",
       "it.test_harness\tmain\tskip\tdeliberate skip: oracle tool absent")
expect("skip", True, 1, "FAIL: skipped under CI=true", "oracle tool absent")
# a skipped part: passes on a user's machine, listed; fails under CI
expect("part", False, 0, "skipped: deliberate partial skip", "cabextract absent")
expect("part", True, 1, "FAIL: skipped under CI=true", "cabextract absent")
# an opt-in test not asked for never fails
expect("optin", False, 77, "skipped (opt-in, not asked for)", "\topt-in\t")
expect("optin", True, 77, "skipped (opt-in, not asked for)", "\topt-in\t")
# a clean run leaves no list
expect("clean", False, 0, "1 passed, 0 failed", None)
expect("clean", True, 0, "1 passed, 0 failed", None)
shutil.rmtree(tmp, ignore_errors=True)
c.done()
