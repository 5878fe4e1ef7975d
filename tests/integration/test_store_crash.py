#!/usr/bin/env python3
"""test_store_crash.py - SIGKILL during ingest never leaves a broken cache.

Runs the real binary (`pdbsym cache _fill`, which ingests synthetic modules of
a few MB through store_put) and kills it with SIGKILL at a random moment, many
times, on one cache folder; half of the runs under a small byte cap so that
evictions are under way too.  After each kill: SQLite's own
`PRAGMA integrity_check` says ok, and every module row is either absent or
complete (each array's chunks run 0..n-1 and add up to count * record size).
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

RUNS = int(os.environ.get("PDBSYM_CRASH_RUNS", "30"))
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
        sizes = dict(db.execute("SELECT kind, elem_size FROM array_kinds"))
        cols = {1: "nstrs_bytes", 2: "nfuncs", 3: "nlines", 4: "ninlines", 5: "niranges",
                6: "npublics", 7: "nmethods", 8: "nseqpts"}
        mods = db.execute("SELECT id, key, " + ", ".join(cols[k] for k in range(1, 9))
                          + " FROM modules WHERE status = 0").fetchall()
        for row in mods:
            mid, key, counts = row[0], row[1], row[2:]
            for kind in range(1, 9):
                chunks = db.execute("SELECT seq, length(data) FROM arrays"
                                    " WHERE module = ? AND kind = ? ORDER BY seq",
                                    (mid, kind)).fetchall()
                seqs = [c[0] for c in chunks]
                total = sum(c[1] for c in chunks)
                want = counts[kind - 1] * sizes[kind]
                if seqs != list(range(len(seqs))) or total != want:
                    problems.append("%s: array %d has %d of %d bytes in chunks %s"
                                    % (key, kind, total, want, seqs[:5]))
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
