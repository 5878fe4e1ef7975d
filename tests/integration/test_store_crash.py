#!/usr/bin/env python3
"""test_store_crash.py - SIGKILL during ingest never leaves a broken cache.

Runs the real binary (`pdbsym cache _fill`, which ingests synthetic modules of
a few MB through store_put) and kills it with SIGKILL at a random moment, many
times, on one cache folder; half of the runs under a small byte cap so that
evictions are under way too.  After each kill: SQLite's own
`PRAGMA integrity_check` says ok, and every module row is either absent or
complete (its table file is there, with its header and the size the row
says; files no row names may be left, and are swept at a later open).
At the end `pdbsym cache verify` checks every module's checksum and
`pdbsym cache _check` compares every lookup of each surviving module with a
freshly generated copy.
"""
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

# 30 kills; 12 in the sanitizer run (PDBSYM_TEST_SWEEP=sample), which looks
# for memory errors in the ingest the kills interrupt, not for more moments
RUNS = int(os.environ.get("PDBSYM_CRASH_RUNS") or harness.sweep(30, 12))
LINES = 250000  # about 5 MB of arrays per module


def check_db(path):
    """Returns a list of problems (empty when the database is consistent)."""
    problems = []
    db = sqlite3.connect(path, timeout=30)
    try:
        res = [r[0] for r in db.execute("PRAGMA integrity_check")]
        if res != ["ok"]:
            problems.append("integrity_check: %s" % res[:5])
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if version == 0:
            # killed before the first migration committed: must be empty
            if tables:
                problems.append("schema half made: %s" % tables)
            return problems, 0
        # every complete module names a table file that is there, whole:
        # written and renamed into place before its row committed
        mods = db.execute("SELECT key, layout, table_file, file_bytes FROM modules"
                          " WHERE status = 0").fetchall()
        for key, layout, name, size in mods:
            if layout != 4:
                problems.append("%s: layout %s" % (key, layout))
                continue
            p = os.path.join(os.path.dirname(path), "tables", name + ".pst")
            if not os.path.exists(p) or os.path.getsize(p) != size:
                problems.append("%s: table file %s missing or not %d bytes" % (key, name, size))
                continue
            with open(p, "rb") as f:
                if f.read(8) != b"PDBSYMT\x01":
                    problems.append("%s: table file %s has no header" % (key, name))
        orphans = db.execute("SELECT count(*) FROM arrays WHERE module NOT IN"
                             " (SELECT id FROM modules)").fetchone()[0]
        if orphans:
            problems.append("%d orphan chunks" % orphans)
        return problems, len(mods)
    finally:
        db.close()


def main():
    binary = os.environ.get("PDBSYM_BIN")
    if not binary:
        print("set PDBSYM_BIN")
        return 2
    rng = random.Random(int(os.environ.get("PDBSYM_CRASH_SEED", str(int(time.time())))))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        path = os.path.join(cache, "pdbsym.sqlite")
        killed_running = 0
        stored_total = 0
        for run in range(RUNS):
            env = dict(os.environ, PDBSYM_CACHE_DIR=cache)
            env.pop("PDBSYM_CACHE_MAX_BYTES", None)
            if run % 2:
                env["PDBSYM_CACHE_MAX_BYTES"] = "40M"
            p = subprocess.Popen([binary, "cache", "_fill", "--modules", "40", "--lines",
                                  str(LINES), "--seed", str(1000 + run)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if run == RUNS - 1:
                # the last run ends on its own, so that the lookups below
                # have modules to compare even where a slow build (ASan on
                # a loaded machine) stored none before its kills
                p.wait(timeout=600)
            else:
                time.sleep(rng.uniform(0.02, 1.2))
                if p.poll() is None:
                    killed_running += 1
                p.send_signal(signal.SIGKILL)
            out, err = p.communicate()
            stored_total += out.count(b"stored ")
            if p.returncode not in (-signal.SIGKILL, 0):
                print("run %d: exit %s: %s" % (run, p.returncode, err.decode()[-500:]))
                failures += 1
            if not os.path.exists(path):
                continue
            problems, nmods = check_db(path)
            if problems:
                failures += 1
                print("run %d: %s" % (run, "; ".join(problems[:5])))
        print("%d runs, %d killed while ingesting, %d modules stored before the kills"
              % (RUNS, killed_running, stored_total))
        if killed_running < RUNS // 2:
            print("too few kills landed during ingest")
            failures += 1
        env = dict(os.environ, PDBSYM_CACHE_DIR=cache)
        v = subprocess.run([binary, "cache", "verify"], env=env, capture_output=True, text=True)
        print(v.stdout.strip().splitlines()[-1] if v.stdout.strip() else v.stderr)
        if v.returncode != 0:
            print("verify failed:", v.stdout[-1000:], v.stderr[-1000:])
            failures += 1
        c = subprocess.run([binary, "cache", "_check"], env=env, capture_output=True, text=True)
        nok = c.stdout.count("\nok ") + c.stdout.startswith("ok ")
        print("lookups compared on %d surviving modules" % nok)
        if c.returncode != 0 or nok == 0:
            print("_check failed:", c.stdout[-1000:], c.stderr[-1000:])
            failures += 1
    print("FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
