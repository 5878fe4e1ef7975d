#!/usr/bin/env python3
"""The reader rows of issue 15's table, ours and the peers in the same run.

    bench/reader.py DIR [COUNT]     (bench/run.sh DIR [COUNT] runs this)

DIR holds big.exe and big.pdb (bench/make-big-pdb.sh).  Every command is a
fresh process ("cold CLI": nothing cached in the process; the file itself is
in the page cache, read once before anything is timed, for every tool alike)
and is measured from outside (GNU time and wait4): wall time, user + system
CPU, peak RSS (the mapped file's pages count, for every tool alike).

  1. COUNT (100,000) random RVAs, cold CLI:
       pdbsym lookup big.pdb < rvas
       llvm-symbolizer --obj=big.exe --relative-address --inlines
                       --functions=short --no-demangle < rvas
  2. 1 RVA, cold CLI: ONE_RUNS (20) runs of each, one RVA per run (the
     first ONE_RUNS RVAs, tools alternating), medians and the largest RSS:
       pdbsym lookup big.pdb RVA  /  llvm-symbolizer ... RVA
  3. peak memory of a parse:
       pdbsym dump big.pdb (the whole table, as the cache keeps it)
       llvm-pdbutil dump -l -symbols big.pdb > /dev/null
     as a multiple of the PDB's size, and ours against the peer.

Peers: LLVM 19 ($LLVM19, default /usr/lib/llvm-19/bin) and LLVM 14
($LLVM14, default /usr/lib/llvm-14/bin), each when present.  Ours:
$PDBSYM_BIN (default build/pdbsym); $BENCH_PDB (default build/bench_pdb)
draws the RVAs (a function chosen uniformly, then a byte inside it; fixed
seed) and prints its in-process figures.  Ratios: time, peer / ours ("faster"
above 1, else "slower" with ours / peer), for wall time and (steadier on a
shared machine) for CPU time; memory, ours / peer.  Then the
agreement of our answers with llvm-symbolizer 19's, address by address (every
frame of the inline chain: function, file, line), for rows 1 and 2.
Scratch files go to a temporary folder, removed at the end (KEEP=1 keeps it).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


TIME = "/usr/bin/time"  # GNU time (Debian package "time")


def measure(cmd, stdin=None, stdout=None, scratch=None):
    """(wall s, cpu s, peak RSS MiB, exit status) of one run of cmd.

    cmd runs under GNU time, which reports its peak RSS: a child forked
    straight from this (large) Python process would count the parent's pages
    in its own peak (Linux keeps the pre-exec peak).  CPU comes from wait4 on
    time (its child's CPU included, time's own is negligible), wall from
    around it."""
    import time
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL
    rss_file = os.path.join(scratch, "rss")
    t0 = time.monotonic()
    p = subprocess.Popen([TIME, "-f", "%M %x", "-o", rss_file] + cmd, stdin=fin, stdout=fout,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    for f in (fin, fout):
        if f is not subprocess.DEVNULL:
            f.close()
    kib, rc = open(rss_file).read().split()[-2:]
    return wall, ru.ru_utime + ru.ru_stime, int(kib) / 1024.0, int(rc)


def speed(ours, peer):
    if ours <= 0 or peer <= 0:
        return "-"
    return "%.1fx faster" % (peer / ours) if peer >= ours else "%.1fx slower" % (ours / peer)


def frames_llvm(text):
    """llvm-symbolizer's layout -> per address, [(function, file:line)]."""
    out, cur = [], []
    for line in text.split("\n"):
        if line == "":
            if cur:
                out.append(cur)
            cur = []
            continue
        cur.append(line)
    if cur:
        out.append(cur)
    res = []
    for b in out:
        fr = []
        for i in range(0, len(b) - 1, 2):
            loc = b[i + 1].rsplit(":", 1)[0]  # drop the column
            fr.append((b[i], loc))
        if fr == [("??", "??:0")]:
            fr = []
        res.append(fr)
    return res


def frames_ours(line):
    o = json.loads(line)
    fr = []
    for s in o.get("symbols") or []:
        name = s.get("mangled") or s.get("function") or "??"
        loc = "%s:%d" % (s["file"], s["line"]) if s.get("line") else "??:0"
        fr.append((name, loc))
    return fr


def agreement(ours, theirs):
    n = min(len(ours), len(theirs))
    same = sum(1 for i in range(n) if ours[i] == theirs[i])
    first = next((i for i in range(n) if ours[i] != theirs[i]), None)
    return same, n, first


def main():
    if len(sys.argv) < 2:
        print(__doc__.split("\n\n")[1])
        return 2
    d = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    exe, pdb = os.path.join(d, "big.exe"), os.path.join(d, "big.pdb")
    ours_bin = os.environ.get("PDBSYM_BIN", os.path.join(ROOT, "build", "pdbsym"))
    bench = os.environ.get("BENCH_PDB", os.path.join(ROOT, "build", "bench_pdb"))
    one_runs = int(os.environ.get("ONE_RUNS", "20"))
    peers = []
    for ver, env, dflt in (("19", "LLVM19", "/usr/lib/llvm-19/bin"), ("14", "LLVM14", "/usr/lib/llvm-14/bin")):
        b = os.environ.get(env, dflt)
        if os.path.exists(os.path.join(b, "llvm-symbolizer")):
            peers.append((ver, b))
    for f in (exe, pdb, ours_bin, bench, TIME):
        if not os.path.exists(f):
            print("reader.py: %s missing" % f, file=sys.stderr)
            return 1
    if not peers:
        print("reader.py: no llvm-symbolizer (install llvm-19)", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="pdbsym-bench-")
    try:
        return run(d, count, exe, pdb, ours_bin, bench, one_runs, peers, tmp)
    finally:
        if os.environ.get("KEEP") == "1":
            print("scratch: " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run(d, count, exe, pdb, ours_bin, bench, one_runs, peers, tmp):
    size = os.path.getsize(pdb)
    mib = size / 1048576.0
    for f in (exe, pdb):  # into the page cache, for every tool alike
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    rvas = os.path.join(tmp, "rvas.txt")
    info = subprocess.run([bench, "-n", str(count), "-r", rvas, pdb], capture_output=True, text=True)
    if info.returncode:
        print(info.stderr, file=sys.stderr)
        return 1
    print("== %s: %d bytes (%.1f MiB)" % (pdb, size, mib))
    print(info.stdout.rstrip())
    rv = [l.strip() for l in open(rvas) if l.strip()]
    sym = lambda b: [os.path.join(b, "llvm-symbolizer"), "--obj=" + exe, "--relative-address",
                     "--inlines", "--functions=short", "--no-demangle"]
    # --relative-address must answer an RVA as image base + RVA
    base = 0
    ro = subprocess.run([os.path.join(peers[0][1], "llvm-readobj"), "--file-headers", exe],
                        capture_output=True, text=True).stdout
    for line in ro.splitlines():
        if line.strip().startswith("ImageBase:"):
            base = int(line.split(":")[1], 0)
    some = rv[:20]
    a = subprocess.run(sym(peers[0][1]) + some, capture_output=True, text=True).stdout
    b = subprocess.run(sym(peers[0][1])[:2] + ["--inlines", "--functions=short", "--no-demangle"] +
                       ["0x%x" % (base + int(r, 16)) for r in some], capture_output=True, text=True).stdout
    if a != b:
        print("reader.py: --relative-address disagrees with image base 0x%x + RVA" % base, file=sys.stderr)
        return 1

    rows = []
    # 1. COUNT RVAs, cold CLI
    ours_out = os.path.join(tmp, "ours.jsonl")
    o = measure([ours_bin, "lookup", pdb], stdin=rvas, stdout=ours_out, scratch=tmp)
    bulk = {"ours": o}
    theirs_bulk = {}
    for ver, b in peers:
        out = os.path.join(tmp, "llvm%s.txt" % ver)
        bulk[ver] = measure(sym(b), stdin=rvas, stdout=out, scratch=tmp)
        theirs_bulk[ver] = out
    rows.append(("%s random RVAs, cold CLI" % format(count, ","), bulk))
    # 2. one RVA, cold CLI
    runs = {"ours": []}
    for ver, _ in peers:
        runs[ver] = []
    one_ours, one_theirs = [], []
    for i, r in enumerate(rv[:one_runs]):
        out = os.path.join(tmp, "one.jsonl")
        runs["ours"].append(measure([ours_bin, "lookup", pdb, r], stdout=out, scratch=tmp))
        one_ours.append(frames_ours(open(out).read()))
        for ver, b in peers:
            out = os.path.join(tmp, "one.txt")
            runs[ver].append(measure(sym(b) + [r], stdout=out, scratch=tmp))
            if ver == "19":
                one_theirs += frames_llvm(open(out).read())
    one = {}
    for k, v in runs.items():
        one[k] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                  max(x[2] for x in v), max(x[3] for x in v))
    rows.append(("1 RVA, cold CLI (median of %d)" % len(runs["ours"]), one))
    # 3. peak memory of a parse
    par = {"ours": measure([ours_bin, "dump", pdb], scratch=tmp)}
    for ver, b in peers:
        par[ver] = measure([os.path.join(b, "llvm-pdbutil"), "dump", "-l", "-symbols", pdb], scratch=tmp)

    print()
    hdr = "%-34s %-30s" % ("job", "pdbsym")
    for ver, _ in peers:
        hdr += " %-30s %-38s" % ("llvm-symbolizer " + ver, "ratio (" + ver + ")")
    print(hdr)
    for name, m in rows:
        w, c, r, rc = m["ours"]
        line = "%-34s %-30s" % (name, "%.3f s, %.3f s CPU, %.0f MiB%s" % (w, c, r, "" if rc == 0 else " (exit %d)" % rc))
        for ver, _ in peers:
            pw, pc, pr, prc = m[ver]
            line += " %-30s %-38s" % ("%.3f s, %.3f s CPU, %.0f MiB" % (pw, pc, pr),
                                      "%s (CPU %s), %.2fx memory" % (speed(w, pw), speed(c, pc).split()[0],
                                                                    r / pr if pr else 0))
        print(line)
    w, c, r, rc = par["ours"]
    line = "%-34s %-30s" % ("peak memory of a parse", "%.0f MiB = %.2fx the PDB (%.2f s)" % (r, r / mib, w))
    for ver, _ in peers:
        pw, pc, pr, prc = par[ver]
        line += " %-30s %-38s" % ("llvm-pdbutil: %.0f MiB = %.2fx" % (pr, pr / mib), "ours %.2fx the peer's" % (r / pr if pr else 0))
    print(line)
    print("(time ratios: peer / ours; memory: ours / peer; CPU = user + system; RSS counts the "
          "mapped file's pages)")
    print()
    ours_f = [frames_ours(l) for l in open(ours_out) if l.strip()]
    if "19" in theirs_bulk:
        theirs_f = frames_llvm(open(theirs_bulk["19"]).read())
        same, n, first = agreement(ours_f, theirs_f)
        print("agreement with llvm-symbolizer 19, %s RVAs: %d/%d (whole inline chain: functions, files, lines)"
              % (format(count, ","), same, n))
        if first is not None:
            print("  first difference at %s:\n    ours   %s\n    theirs %s" % (rv[first], ours_f[first], theirs_f[first]))
        same, n, first = agreement(one_ours, one_theirs)
        print("agreement with llvm-symbolizer 19, 1 RVA per run: %d/%d" % (same, n))
        if first is not None:
            print("  first difference at %s:\n    ours   %s\n    theirs %s" % (rv[first], one_ours[first], one_theirs[first]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
