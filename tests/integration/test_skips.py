"""test_skips.py - every test skips through the one helper (tests/unit/test.h
SKIP / SKIP_PART / test_skip_all, tests/integration/harness.py skip /
skip_part / opt_in), which lists the skip for scripts/test.sh's closing list
and fails it under CI=true.

1. A scan of every test source (tests/, C, Python and shell) finds no other
   way to end with ctest's skip status 77 and no "skipped" printed by hand:
   such a skip would pass under CI=true and be missing from the list.  The
   scanner is first shown to catch each pattern in planted lines.
2. The two tests that used to bypass the helper (test_kickoff_corpus and
   test_sourcelink_corpus), run with a source folder that has no
   ../shared/corpus: without CI they exit 77 and write their skip into
   BUILD/skips/; with CI=true they exit 1 and still list it.
Python standard library only."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROOT = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILD = os.environ.get("PDBSYM_BUILD_DIR")
HELPERS = {os.path.join("tests", "unit", "test.h"), os.path.join("tests", "integration", "harness.py"),
           os.path.join("scripts", "test.sh")}  # the helpers, and the closing list they feed
failures = 0
passes = 0


def check(cond, what, detail=""):
    global failures, passes
    passes += 1 if cond else 0
    print("%s %s%s" % ("ok  " if cond else "FAIL", what, (": " + str(detail)) if detail and not cond else ""))
    if not cond:
        failures += 1
        harness.failed()


# exit status 77 by hand, in each language, and a "skipped" line printed by hand
PATTERNS = {
    ".c": [r"\breturn\s+77\s*;", r"\b_?exit\s*\(\s*77\s*\)",
           r"\b(printf|puts|fputs|fprintf)\s*\([^;]*\"[^\"]*\bskipped\b( \(opt-in\))?:"],
    ".h": [r"\breturn\s+77\s*;", r"\b_?exit\s*\(\s*77\s*\)",
           r"\b(printf|puts|fputs|fprintf)\s*\([^;]*\"[^\"]*\bskipped\b( \(opt-in\))?:"],
    ".py": [r"\b(sys\.|os\._)?exit\s*\(\s*77\s*\)", r"\bprint\s*\([^)]*[\"'][^\"']*\bskipped\b( \(opt-in\))?:"],
    ".sh": [r"\bexit\s+77\b", r"\b(echo|printf)\s+.*\bskipped\b( \(opt-in\))?:"],
}


def scan_text(ext, text):
    """(line number, line) of every hand-made skip in text."""
    hits = []
    for no, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if ext in (".py", ".sh") else line
        if ext in (".c", ".h") and code.lstrip().startswith(("*", "/*", "//")):
            continue
        for pat in PATTERNS[ext]:
            if re.search(pat, code):
                hits.append((no, line.strip()))
                break
    return hits


# 0. the scanner sees each planted pattern, and leaves the helpers' own calls alone
planted = [
    (".c", '  printf("skipped: corpus absent\\n");', True),
    (".c", "    return 77;", True),
    (".c", "  exit(77);", True),
    (".c", '  return test_skip_all("corpus absent");', False),
    (".c", '  SKIP("llvm-19 absent");', False),
    (".py", '    print("skipped: chromium absent")', True),
    (".py", "    sys.exit(77)", True),
    (".py", '        print("full cache: skipped: ../shared/corpus absent")', True),
    (".py", '    print("ok (a part skipped)")', False),
    (".py", '    harness.skip("chromium absent")', False),
    (".sh", "exit 77", True),
    (".sh", 'echo "skipped: no nginx"', True),
    (".sh", "exit 1", False),
]
for ext, line, want in planted:
    check(bool(scan_text(ext, line)) == want, "the scanner %s %r" % ("catches" if want else "passes", line))

# 1. no test source skips any other way
scanned = 0
for top in ("tests", "scripts", ".ci"):
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = [d for d in dirnames if d not in ("corpus", "regress", "fixtures", "__pycache__")]
        for f in files:
            ext = os.path.splitext(f)[1]
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            if ext not in PATTERNS or rel in HELPERS or rel == os.path.join("tests", "integration", "test_skips.py"):
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                hits = scan_text(ext, fh.read())
            scanned += 1
            check(not hits, "%s skips only through the helper" % rel,
                  "; ".join("line %d: %s" % h for h in hits))
print("scanned %d files" % scanned)
check(scanned >= 80, "the scan read the suite's sources", scanned)

# 2. the two that bypassed it, run without the corpus
if not BUILD:
    harness.skip("PDBSYM_BUILD_DIR not set (run through ctest)")
for name in ("test_kickoff_corpus", "test_sourcelink_corpus"):
    exe = os.path.join(BUILD, name)
    check(os.path.exists(exe), "%s is built" % name, exe)
    if not os.path.exists(exe):
        continue
    with tempfile.TemporaryDirectory(prefix="pdbsym-skips-") as tmp:
        src = os.path.join(tmp, "src")  # a source folder with no ../shared/corpus beside it
        os.makedirs(src)
        os.symlink(os.path.join(os.path.abspath(ROOT), "tests"), os.path.join(src, "tests"))
        out_dir = os.path.join(tmp, "build")
        os.makedirs(out_dir)
        for ci, want in (("", 77), ("true", 1)):
            env = dict(os.environ, PDBSYM_SOURCE_DIR=src, PDBSYM_BUILD_DIR=out_dir, CI=ci)
            r = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=120)
            tsv = os.path.join(out_dir, "skips", "unit.%s.tsv" % name)
            listed = open(tsv).read() if os.path.exists(tsv) else ""
            check(r.returncode == want, "%s without the corpus, CI=%r: exit %d" % (name, ci, want),
                  "exit %d, stdout %r" % (r.returncode, r.stdout[-300:]))
            check("\tskip\t" in listed and "corpus" in listed,
                  "%s without the corpus, CI=%r: its skip is listed for scripts/test.sh" % (name, ci), listed)
            shutil.rmtree(os.path.join(out_dir, "skips"), ignore_errors=True)

print("%d passed, %d failed" % (passes, failures))
sys.exit(harness.status(1 if failures else 0))
