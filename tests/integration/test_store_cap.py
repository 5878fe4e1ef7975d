#!/usr/bin/env python3
"""test_store_cap.py - the cache stays under PDBSYM_CACHE_MAX_BYTES.

Ingests far more synthetic modules than the cap holds, through the real
binary (`pdbsym cache _fill`, store_put underneath), and after each one checks
that the database file and the modules' table files (dir/tables) together
stay under the cap and that the WAL stays within its
documented slack (the larger of 8 MiB and one module); at the end the newest
modules are present, the oldest are gone, and `pdbsym cache verify` passes.
"""
import os
import subprocess
import sys
import tempfile

CAP = 24 << 20
WAL_SLACK = 8 << 20
MODULES = 40
LINES = 100000  # about 2 MB of arrays per module


def main():
    binary = os.environ.get("PDBSYM_BIN")
    if not binary:
        print("set PDBSYM_BIN")
        return 2
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        env = dict(os.environ, PDBSYM_CACHE_DIR=cache, PDBSYM_CACHE_MAX_BYTES=str(CAP))
        db = os.path.join(cache, "pdbsym.sqlite")
        peak_db = peak_wal = 0
        keys = []
        for i in range(MODULES):
            r = subprocess.run([binary, "cache", "_fill", "--modules", "1", "--lines", str(LINES),
                                "--seed", str(i + 1)], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                print("fill %d failed: %s" % (i, r.stderr))
                return 1
            keys.append(r.stdout.split()[1])
            tables = os.path.join(cache, "tables")
            size = os.path.getsize(db) + sum(os.path.getsize(os.path.join(tables, f))
                                             for f in (os.listdir(tables) if os.path.isdir(tables) else []))
            wal = os.path.getsize(db + "-wal") if os.path.exists(db + "-wal") else 0
            peak_db, peak_wal = max(peak_db, size), max(peak_wal, wal)
            if size > CAP:
                print("after module %d the database and table files are %d bytes, over the cap %d"
                      % (i, size, CAP))
                failures += 1
            if wal > WAL_SLACK:
                print("after module %d the WAL is %d bytes" % (i, wal))
                failures += 1
        out = subprocess.run([binary, "cache", "list"], env=env, capture_output=True,
                             text=True).stdout
        present = [line.split("\t")[4] for line in out.splitlines()]
        stats = subprocess.run([binary, "cache", "stats"], env=env, capture_output=True,
                               text=True).stdout
        print("cap %d: %d modules of %d kept, database peak %d bytes, WAL peak %d bytes"
              % (CAP, len(present), MODULES, peak_db, peak_wal))
        print(stats.strip().replace("\n", ", "))
        for k in keys[-3:]:
            if k not in present:
                print("newest module %s was evicted" % k)
                failures += 1
        if keys[0] in present:
            print("oldest module %s survived" % keys[0])
            failures += 1
        if len(present) < 5:
            print("too few modules kept: %d" % len(present))
            failures += 1
        v = subprocess.run([binary, "cache", "verify"], env=env, capture_output=True, text=True)
        if v.returncode != 0:
            print("verify:", v.stdout, v.stderr)
            failures += 1
    print("FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
