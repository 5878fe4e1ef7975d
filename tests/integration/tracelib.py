"""tracelib.py - what the trace tests (test_cli_trace.py, test_http_traces.py)
share: the .nettrace fixtures and their oracles' files, and the comparison of
a speedscope answer with TraceLog's stacks.  Python standard library only."""
import collections
import gzip
import json
import os

ROOT = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures", "nettrace")
TFMS = ["net10.0", "net9.0", "net8.0"]


def jsonl_gz(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(x) for x in f if x.strip()]


def speedscope_samples(doc):
    """{thread id: [stack innermost first, each frame a dict]}"""
    frames = doc["shared"]["frames"]
    out = {}
    for p in doc["profiles"]:
        tid = int(p["name"].split("(")[1].rstrip(")"))
        out[tid] = [[frames[i] for i in reversed(s)] for s in p["samples"]]
    return out


def expected_frame(f):
    """What an oracle frame (workload.stacks.jsonl.gz) is in pdbsym's speedscope:
    dotnet-trace's name (module!TraceLog's method name), and the file, line and
    column of the runtime's IL rule read with System.Reflection.Metadata."""
    e = {"name": "%s!%s" % (f["module"], f["te_method"]) if f.get("te_method") else "?!?"}
    if "file" in f:
        e["file"] = f["file"]
        if "line" in f:
            e["line"] = f["line"]
            if f.get("column"):
                e["col"] = f["column"]
    return e


def oracle_samples(tfm):
    out = collections.defaultdict(list)
    for s in jsonl_gz(os.path.join(FIX, tfm, "workload.stacks.jsonl.gz")):
        out[s["thread"]].append([expected_frame(f) for f in s["frames"]])
    return out


def compare(c, what, doc, tfm):
    """Checks every sample of doc against the oracle; returns (samples, frames, with lines)."""
    ours = speedscope_samples(doc)
    oracle = oracle_samples(tfm)
    c.eq("%s: threads" % what, sorted(ours), sorted(oracle))
    nframes = nlines = bad = 0
    for tid in oracle:
        got, want = ours.get(tid, []), oracle[tid]
        c.eq("%s: thread %d samples" % (what, tid), len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            nframes += len(w)
            nlines += sum(1 for f in w if "line" in f)
            if g != w:
                bad += 1
                if bad <= 3:
                    for k, (gf, wf) in enumerate(zip(g, w)):
                        if gf != wf:
                            print("  %s thread %d sample %d frame %d: ours %r, oracle %r" % (what, tid, i, k, gf, wf))
                            break
                    else:
                        print("  %s thread %d sample %d: %d frames, oracle %d" % (what, tid, i, len(g), len(w)))
    c.eq("%s: samples whose stack differs from TraceLog's" % what, bad, 0)
    return sum(len(v) for v in oracle.values()), nframes, nlines
