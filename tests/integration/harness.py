"""harness.py - skips for the Python tests, with the rules of tests/unit/test.h:

  skip(why)      something the test needs is missing (the corpus, an oracle
                 tool, a fixture): the test ends here, exit 77 (ctest's
                 "skipped"); under CI (CI=true) it is a failure, exit 1.
  skip_part(why) the same for a part of the test, which goes on; the test
                 passes on a user's machine, but the part is listed as
                 skipped, and under CI the test fails (status() says so).
  opt_in(why)    an opt-in test or part that was not asked for: listed,
                 exit 77, never a failure, not even under CI.
  failed()       called by the checkers (Checks in pdbsym_server.py, Checker
                 in fetchlib.py) for every failed check: a test that failed a
                 check fails, whatever follows (a skip after it exits 1).
  status(code)   the exit status to use at the end: 1 when a check failed or
                 a part was skipped under CI, else code.

Every skip is printed, and when PDBSYM_BUILD_DIR is set (ctest sets it) also
written to PDBSYM_BUILD_DIR/skips/it.NAME.tsv ("file<TAB>test<TAB>kind<TAB>why",
rewritten by every run, removed when nothing was skipped), where
scripts/test.sh collects the list it prints at the end.
Python standard library only."""
import os
import sys

NAME = "it." + os.path.splitext(os.path.basename(sys.argv[0] or "python"))[0]
_skips = []  # (kind, why)
_ci_failures = 0
_failed_checks = 0


def under_ci():
    return os.environ.get("CI", "").lower() in ("true", "1")


def _path():
    d = os.environ.get("PDBSYM_BUILD_DIR")
    return os.path.join(d, "skips", NAME + ".tsv") if d else None


def _write():
    p = _path()
    if not p:
        return
    if not _skips:
        if os.path.exists(p):
            os.remove(p)
        return
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        for kind, why in _skips:
            f.write("%s\t%s\t%s\t%s\n" % (NAME, "main", kind, why.replace("\t", " ").replace("\n", " ")))


def _note(why, kind):
    global _ci_failures
    _skips.append((kind, why))
    if kind == "opt-in":
        print("skipped (opt-in, not asked for): " + why)
    elif under_ci():
        _ci_failures += 1
        print("FAIL: skipped under CI=true, where every oracle and the corpus must be present: " + why)
    else:
        print("skipped: " + why)
    sys.stdout.flush()
    _write()


def failed():
    global _failed_checks
    _failed_checks += 1


def skip(why):
    _note(why, "skip")
    if _failed_checks:
        print("FAIL: %d check(s) failed before the skip" % _failed_checks)
    sys.exit(1 if under_ci() or _failed_checks else 77)


def skip_part(why):
    _note(why, "skip")


def opt_in(why):
    _note(why, "opt-in")
    sys.exit(1 if _failed_checks else 77)


def sampled():
    """True in scripts/test.sh's sanitizer run (PDBSYM_TEST_SWEEP=sample),
    where the normal run checks every item with the same code and oracles."""
    # set by hand, it wins; else a sanitizer build's tests sample (CMakeLists.txt)
    v = os.environ.get("PDBSYM_TEST_SWEEP") or os.environ.get("PDBSYM_TEST_SWEEP_BUILD", "")
    return v == "sample"


def sweep(full, sample):
    """A corpus sweep's size: `sample` in scripts/test.sh's sanitizer run
    (sampled() above); else `full` (tests/unit/test.h)."""
    s = sampled()
    print("sweep: %s (PDBSYM_TEST_SWEEP=%s)" % ("sampled" if s else "full",
                                                os.environ.get("PDBSYM_TEST_SWEEP") or
                                                os.environ.get("PDBSYM_TEST_SWEEP_BUILD", "")))
    return sample if s else full


def status(code):
    if code in (0, None) and (_ci_failures or _failed_checks):
        return 1
    return code


_write()  # a run that skips nothing leaves no list behind
