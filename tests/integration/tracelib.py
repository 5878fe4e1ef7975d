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


def oracle_file(tfm, kind):
    """An oracle's reading of a fixture trace: FIX/tfm/workload.KIND.jsonl.gz,
    or profile/profile.KIND.jsonl.gz for the profile fixture."""
    stem = "profile" if tfm == "profile" else "workload"
    return os.path.join(FIX, tfm, "%s.%s.jsonl.gz" % (stem, kind))


def jsonl_gz(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(x) for x in f if x.strip()]


# the root frame of every pdbsym stack: the thread's state, from the sampler's type
STATE_FRAMES = {"[running managed code]": "running", "[waiting or in native code]": "waiting",
                "[unknown sampler state]": "unknown"}


def speedscope_samples(doc):
    """{thread id: [stack innermost first, each frame a dict]}, without the
    root frame that names the state (speedscope_states has those)."""
    frames = doc["shared"]["frames"]
    out = {}
    for p in doc["profiles"]:
        tid = int(p["name"].split("(")[1].rstrip(")"))
        out[tid] = [[frames[i] for i in reversed(s[1:])] for s in p["samples"]]
    return out


def speedscope_states(doc):
    """{thread id: [(state, weight in ms) of each sample]}; the state is the
    name of the sample's root frame, which must be one of STATE_FRAMES."""
    frames = doc["shared"]["frames"]
    out = {}
    for p in doc["profiles"]:
        tid = int(p["name"].split("(")[1].rstrip(")"))
        out[tid] = [(STATE_FRAMES.get(frames[s[0]]["name"], "not a state frame"), w)
                    for s, w in zip(p["samples"], p["weights"])]
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
    for s in jsonl_gz(oracle_file(tfm, "stacks")):
        out[s["thread"]].append([expected_frame(f) for f in s["frames"]])
    return out


def same_frame(ours, want):
    """A frame as the oracle has it (the runtime's rule over the trace's IL
    maps).  One pdbsym marks line_approx (the JIT mapped its code to no IL
    offset, or one map entry stands for several statements, or the IL's call
    site names another line) may have another line: the rest is the same."""
    if ours.get("line_approx"):
        def strip(f):
            return {k: v for k, v in f.items() if k not in ("line", "col", "line_approx")}
        return strip(ours) == strip(want)
    return ours == want


def same_stack(ours, want):
    return len(ours) == len(want) and all(same_frame(g, w) for g, w in zip(ours, want))


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
            if not same_stack(g, w):
                bad += 1
                if bad <= 3:
                    for k, (gf, wf) in enumerate(zip(g, w)):
                        if not same_frame(gf, wf):
                            print("  %s thread %d sample %d frame %d: ours %r, oracle %r" % (what, tid, i, k, gf, wf))
                            break
                    else:
                        print("  %s thread %d sample %d: %d frames, oracle %d" % (what, tid, i, len(g), len(w)))
    c.eq("%s: samples whose stack differs from TraceLog's" % what, bad, 0)
    return sum(len(v) for v in oracle.values()), nframes, nlines


ORACLE_STATE = {"Managed": "running", "External": "waiting", "Error": "unknown"}
GAP_CAP = 50  # server/engine/trace.h TRACE_GAP_CAP


def oracle_weights(tfm):
    """From TraceEvent's reading of the trace (workload.stacks.jsonl.gz:
    each sample's thread, time and sampler type): the measured interval (the
    median gap between two samples of a thread, in ms) and {thread id:
    [(state, expected weight in ms)]}: the gap since the thread's previous
    sample, at most GAP_CAP intervals, one interval for its first."""
    times = collections.defaultdict(list)
    for s in jsonl_gz(oracle_file(tfm, "stacks")):
        times[s["thread"]].append((s["time_ms"], ORACLE_STATE.get(s.get("type"), "unknown")))
    gaps = sorted(b[0] - a[0] for v in times.values() for a, b in zip(v, v[1:]) if b[0] > a[0])
    interval = gaps[(len(gaps) + 1) // 2 - 1] if gaps else 1.0
    out = {}
    for tid, v in times.items():
        out[tid] = [(st, interval if i == 0 else min(t - v[i - 1][0], GAP_CAP * interval))
                    for i, (t, st) in enumerate(v)]
    return interval, out, times


def check_weights(c, what, doc, tfm, state="all"):
    """Each sample's state and weight against TraceEvent's reading; each
    thread's total against its sampled life (last sample - first + one
    interval), within 5 %.  state: the --state the document was made with."""
    interval, want, times = oracle_weights(tfm)
    got = speedscope_states(doc)
    keep = {"all": None, "running": "running", "waiting": "waiting"}[state]
    bad_state = bad_weight = 0
    worst = 0.0
    for tid, w in want.items():
        w = [x for x in w if keep is None or x[0] == keep]
        g = got.get(tid, [])
        c.eq("%s: thread %d samples (state %s)" % (what, tid, state), len(g), len(w))
        for (gs, gw), (ws, ww) in zip(g, w):
            bad_state += gs != ws
            if abs(gw - ww) > 0.03 * ww + 0.002:
                bad_weight += 1
                if bad_weight <= 3:
                    print("  %s thread %d: weight %.4f ms, oracle %.4f ms" % (what, tid, gw, ww))
        if keep is None and g:
            life = times[tid][-1][0] - times[tid][0][0] + interval
            total = sum(x[1] for x in g)
            worst = max(worst, abs(total - life) / life)
            c.true("%s: thread %d total %.1f ms within 5%% of its sampled life %.1f ms"
                   % (what, tid, total, life), abs(total - life) <= 0.05 * life)
    c.eq("%s: samples whose state is not the sampler's type (TraceEvent)" % what, bad_state, 0)
    c.eq("%s: samples whose weight is not the time since the thread's previous one" % what,
         bad_weight, 0)
    return interval, worst


# ---- profile.proto, read back (pprof answers) ----
def pb_fields(buf):
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield field, wire, v


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def packed(v):
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out
