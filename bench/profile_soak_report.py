#!/usr/bin/env python3
"""profile_soak_report.py WORK MINUTES WINDOW - the figures of
bench/run-profile-soak.sh: RSS of pdbsym profile and of TraceEvent's live
TraceLog over the run (first third against last third), the windows written
against the windows expected, and every window's samples against `pdbsym
trace` of the session's own stream (frame names, files and lines, thread by
thread, in order; a line both mark approximate may be estimated apart, as
test_profile_live allows, counted on its own).  Exit 1 when a window is missing, a sample differs, or
pdbsym's RSS grew more than 5 % from the first third to the last."""
import glob
import json
import os
import statistics
import sys


def table(path):
    rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


def thirds(values):
    n = len(values)
    if n < 3:
        return None, None
    k = n // 3
    return statistics.mean(values[:k]), statistics.mean(values[-k:])


def samples(path, frame_ids):
    """{thread: [stack as a tuple of frame ids]} of a speedscope file"""
    doc = json.load(open(path))
    ids = []
    for f in doc["shared"]["frames"]:
        key = (f["name"], f.get("file"), f.get("line"), f.get("col"), bool(f.get("line_approx")))
        ids.append(frame_ids.setdefault(key, len(frame_ids)))
    out = {}
    for p in doc["profiles"]:
        tid = int(p["name"].split("(")[1].rstrip(")"))
        out[tid] = [tuple(ids[i] for i in s) for s in p["samples"]]
    return out


def main():
    work, minutes, window = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    ok = True
    rss = table(os.path.join(work, "rss.tsv"))
    mine = [int(r["pdbsym_rss"]) for r in rss if int(r["pdbsym_rss"]) > 0]
    a, b = thirds(mine)
    print("pdbsym profile RSS: first third %.1f MiB, last third %.1f MiB (%+.1f %%), max %.1f MiB, %d readings"
          % (a / 2**20, b / 2**20, 100 * (b - a) / a, max(mine) / 2**20, len(mine)))
    if b > a * 1.05:
        print("FAIL: pdbsym's RSS grew more than 5 %")
        ok = False
    peer = [int(r["peer_rss"]) for r in rss if int(r["peer_rss"]) > 0]
    pa, pb = thirds(peer)
    if pa:
        print("TraceLog (live) RSS: first third %.1f MiB, last third %.1f MiB (%+.1f %%), max %.1f MiB"
              % (pa / 2**20, pb / 2**20, 100 * (pb - pa) / pa, max(peer) / 2**20))
        hours = (len(peer) * 10) / 3600
        growth = (peer[-1] - peer[0]) / 2**20
        print("TraceLog grew %.1f MiB in %.2f h (%.0f MiB a day at that rate); pdbsym %.1f MiB"
              % (growth, hours, growth / hours * 24 if hours else 0, (mine[-1] - mine[0]) / 2**20))
    try:
        pt = table(os.path.join(work, "peer.tsv"))
        if pt:
            print("TraceLog peer: %s samples, %s frames named; managed heap %.1f -> %.1f MiB"
                  % (pt[-1]["samples"], pt[-1]["frames"], int(pt[0]["managed_heap_bytes"]) / 2**20,
                     int(pt[-1]["managed_heap_bytes"]) / 2**20))
    except (OSError, KeyError):
        print("TraceLog peer: no figures (%s)" % open(os.path.join(work, "peer.out")).read()[-500:])
    files = sorted(glob.glob(os.path.join(work, "windows", "*.speedscope.json")))
    secs = float(window[:-1]) if window.endswith("s") else float(window)
    expected = minutes * 60 / secs
    print("windows written: %d (about %.0f expected)" % (len(files), expected))
    if len(files) < expected - 2:
        print("FAIL: windows missing")
        ok = False
    frame_ids = {}
    ours = {}
    for f in files:
        for tid, ss in samples(f, frame_ids).items():
            ours.setdefault(tid, []).extend(ss)
    theirs = samples(os.path.join(work, "trace.json"), frame_ids)
    keys = {v: k for k, v in frame_ids.items()}

    def same(a, b):
        """equal frames, or both marked line_approx and equal but for the line
        and column: the estimate takes the callee first seen at a return
        address, in the window for a session, in the whole trace for `pdbsym
        trace` (as tests/integration/test_profile_live.py compares them)"""
        if a == b:
            return True
        x, y = keys[a], keys[b]
        return x[4] and y[4] and (x[0], x[1]) == (y[0], y[1])

    n = bad = est = 0
    for tid in sorted(set(ours) | set(theirs)):
        g, w = ours.get(tid, []), theirs.get(tid, [])
        if len(g) != len(w):
            print("thread %d: %d samples in the windows, %d in the trace" % (tid, len(g), len(w)))
            ok = False
        for x, y in zip(g, w):
            n += 1
            if x == y:
                continue
            if len(x) == len(y) and all(same(a, b) for a, b in zip(x, y)):
                est += 1
            else:
                bad += 1
    print("samples: %d in the windows, %d differ from pdbsym trace of the session's stream "
          "(and %d where both mark a line approximate and estimate it apart)" % (n, bad, est))
    if bad:
        ok = False
    out = open(os.path.join(work, "profile.out")).read().strip()
    print("pdbsym profile said: %s" % out)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
