"""`pdbsym trace` as a user runs it (docs/contract.md, "Traces"), on the real .NET 8,
9 and 10 traces of tests/fixtures/nettrace, against what Microsoft's tools
read in the same files:

- every sample's stack, thread by thread and frame by frame, equal to
  TraceLog's (workload.stacks.jsonl.gz: the names TraceLog gives, prefixed by
  the module as dotnet-trace writes them, and the file, line and column of the
  runtime's IL rule over TraceEvent's IL maps, read from the PDB with
  System.Reflection.Metadata), and every frame name one that
  `dotnet-trace convert --format Speedscope` also wrote;
- the speedscope shape the contract fixes; pprof (gzip'ed profile.proto, read
  back field by field here) with the same samples, frames and lines; the
  top-N text's counts equal to the oracle's;
- bounded memory: the trace repeated 100 times (made here, in the temporary
  folder) read with the same counted peaks (stack table, stack window, code
  tables, read window), and a stack budget small enough to spill giving the
  same answer;
- bad input: truncated, garbled and non-trace files fail with one line naming
  the block and the offset, exit 2.
"""
import collections
import gzip
import json
import os
import re
import shlex
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import clilib  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402
from tracelib import (FIX, STATE_FRAMES, TFMS, check_weights, compare, expected_frame, jsonl_gz,  # noqa: E402
                      oracle_weights, packed, pb_fields, speedscope_samples, speedscope_states)

clilib.need_binary()
if not os.path.exists(os.path.join(FIX, "net10.0", "workload.nettrace")):
    harness.skip("tests/fixtures/nettrace absent")

c = Checks()
sb = Sandbox("pdbsym-cli-trace-")


def trace(args):
    return sb.run(["trace", "--offline"] + args, timeout=600)


# ---- every sample, every frame, against TraceLog -------------------------
for tfm in TFMS:
    d = os.path.join(FIX, tfm)
    out = sb.path(tfm + ".speedscope.json")
    st = sb.path(tfm + ".stats.json")
    rc, so, se = trace(["--pdb-dir", d, os.path.join(d, "workload.nettrace"), "-o", out,
                        "--stats", st])
    c.eq("%s: exit status (%s)" % (tfm, se.strip()), rc, 0)
    if rc:
        continue
    doc = json.load(open(out))
    stats = json.load(open(st))
    c.eq("%s: $schema" % tfm, doc.get("$schema"), "https://www.speedscope.app/file-format-schema.json")
    c.true("%s: profiles are sampled, weights match" % tfm,
           all(p["type"] == "sampled" and len(p["weights"]) == len(p["samples"]) for p in doc["profiles"]))
    nsamples, nframes, nlines = compare(c, tfm, doc, tfm)
    c.true("%s: frames with lines" % tfm, nlines > 100, "(%d)" % nlines)
    print("  %s: %d samples, %d frames (%d with file:line) equal to TraceLog + the runtime's IL rule"
          % (tfm, nsamples, nframes, nlines))
    c.eq("%s: stats samples" % tfm, stats["samples"], nsamples)

    # real weights and the threads' states, against TraceEvent's reading
    interval, worst = check_weights(c, tfm, doc, tfm)
    types = collections.Counter(s.get("type") for s in jsonl_gz(os.path.join(d, "workload.stacks.jsonl.gz")))
    c.eq("%s: running/waiting split equal to TraceEvent's count of the sampler's types" % tfm,
         (stats["samples_running"], stats["samples_waiting"], stats["samples_other"]),
         (types["Managed"], types["External"], nsamples - types["Managed"] - types["External"]))
    c.true("%s: measured interval %.3f ms, TraceEvent's median gap %.3f ms" % (tfm, stats["interval_ns"] / 1e6, interval),
           abs(stats["interval_ns"] / 1e6 - interval) <= 0.02 * interval)
    print("  %s: interval %.3f ms (header %.3f ms), %d running / %d waiting samples, thread totals "
          "within %.1f %% of their sampled life" % (tfm, stats["interval_ns"] / 1e6, stats["nominal_ns"] / 1e6,
                                                      stats["samples_running"], stats["samples_waiting"], 100 * worst))
    for state in ("running", "waiting"):
        f = sb.path("%s.%s.json" % (tfm, state))
        rc, so, se = trace(["--pdb-dir", d, os.path.join(d, "workload.nettrace"), "-o", f, "--state", state])
        c.eq("%s --state %s: exit status (%s)" % (tfm, state, se.strip()), rc, 0)
        if rc == 0:
            check_weights(c, "%s --state %s" % (tfm, state), json.load(open(f)), tfm, state)

    # TraceLog's own lines (interpolated): how often they agree, for the record
    agree = total = 0
    for s in jsonl_gz(os.path.join(d, "workload.stacks.jsonl.gz")):
        for f in s["frames"]:
            if "line" in f and "te_line" in f:
                total += 1
                agree += f["line"] == f["te_line"]
    print("  %s: TraceLog's interpolated te_line agrees on %d of %d frames" % (tfm, agree, total))

    # every name is one dotnet-trace wrote, and the other way round
    ds = json.load(open(os.path.join(d, "workload.speedscope.json")))
    theirs = {f["name"] for f in ds["shared"]["frames"] if "!" in f["name"] and not f["name"].startswith("?")}
    mine = {f["name"] for f in doc["shared"]["frames"] if f["name"] != "?!?" and f["name"] not in STATE_FRAMES}
    c.eq("%s: names pdbsym wrote that dotnet-trace did not" % tfm, sorted(mine - theirs), [])
    c.eq("%s: names dotnet-trace wrote that pdbsym did not" % tfm, sorted(theirs - mine), [])


# ---- pprof, read back ----------------------------------------------------
d = os.path.join(FIX, "net10.0")
rc, so, se = trace(["--pdb-dir", d, os.path.join(d, "workload.nettrace"), "--format", "pprof",
                    "-o", sb.path("p.pb.gz")])
c.eq("pprof: exit status (%s)" % se.strip(), rc, 0)
if rc == 0:
    prof = gzip.open(sb.path("p.pb.gz")).read()
    strings, samples, locs, funcs, types = [], [], {}, {}, []
    period_type, period, default_type = {}, 0, 0
    for field, wire, v in pb_fields(prof):
        if field == 11:
            period_type = {f: x for f, _, x in pb_fields(v)}
        elif field == 12:
            period = v
        elif field == 14:
            default_type = v
        elif field == 6:
            strings.append(v.decode())
        elif field == 1:
            types.append({f: x for f, _, x in pb_fields(v)})
        elif field == 2:
            s = {"loc": [], "val": [], "labels": []}
            for f, w, x in pb_fields(v):
                if f == 1:
                    s["loc"] += packed(x) if w == 2 else [x]
                elif f == 2:
                    s["val"] += packed(x) if w == 2 else [x]
                elif f == 3:
                    s["labels"].append({ff: xx for ff, _, xx in pb_fields(x)})
            samples.append(s)
        elif field == 4:
            loc = {f: x for f, _, x in pb_fields(v)}
            line = {f: x for f, _, x in pb_fields(loc[4])}
            locs[loc[1]] = line
        elif field == 5:
            fn = {f: x for f, _, x in pb_fields(v)}
            funcs[fn[1]] = fn
    c.eq("pprof: string 0", strings[0] if strings else None, "")
    c.eq("pprof: sample types", [(strings[t[1]], strings[t[2]]) for t in types],
         [("samples", "count"), ("wall", "nanoseconds"), ("running", "nanoseconds"), ("waiting", "nanoseconds")])
    c.eq("pprof: period type", (strings[period_type[1]], strings[period_type[2]]), ("wall", "nanoseconds"))
    c.eq("pprof: default sample type", strings[default_type], "wall")
    c.true("pprof: period, the measured interval", abs(period / 1e6 - oracle_weights("net10.0")[0]) <= 0.02 * oracle_weights("net10.0")[0], str(period))
    doc = json.load(open(sb.path("net10.0.speedscope.json")))
    frames = doc["shared"]["frames"]
    c.eq("pprof: samples", len(samples), sum(len(p["samples"]) for p in doc["profiles"]))
    c.eq("pprof: locations (speedscope's frames but its 3 state frames)", len(locs), len(frames) - 3)
    bad = 0
    for lid, line in locs.items():
        fr = frames[lid - 1]
        fn = funcs[line[1]]
        if strings[fn[2]] != fr["name"] or line.get(2) != fr.get("line") or strings[fn[4]] != fr.get("file", ""):
            bad += 1
    c.eq("pprof: locations unlike the speedscope frames", bad, 0)
    # the same stacks, states and weights, thread by thread
    by_thread = collections.defaultdict(list)
    states = collections.defaultdict(list)
    for s in samples:
        tid = [lab[3] for lab in s["labels"] if strings[lab[1]] == "thread"][0]
        state = [strings[lab[2]] for lab in s["labels"] if strings[lab[1]] == "state"][0]
        by_thread[tid].append([frames[x - 1] for x in s["loc"]])
        states[tid].append((state, s["val"][1] / 1e6))
        c.eq("pprof: values of a sample (count, wall, running, waiting)", s["val"],
             [1, s["val"][1], s["val"][1] if state == "running" else 0, s["val"][1] if state == "waiting" else 0])
    ours = speedscope_samples(doc)
    c.eq("pprof: stacks equal to speedscope's", dict(by_thread), ours)
    ss = speedscope_states(doc)
    c.eq("pprof: states equal to speedscope's", {t: [x[0] for x in v] for t, v in states.items()},
         {t: [x[0] for x in v] for t, v in ss.items()})
    c.true("pprof: weights equal to speedscope's (to a microsecond)",
           all(abs(a[1] - b[1]) < 1e-3 for t in ss for a, b in zip(states[t], ss[t])))

# ---- top-N ---------------------------------------------------------------
rc, so, se = trace(["--pdb-dir", d, os.path.join(d, "workload.nettrace"), "--format", "top", "--top", "5"])
c.eq("top: exit status", rc, 0)
leaf = collections.Counter()
incl = collections.Counter()
leaf_ms = collections.Counter()
incl_ms = collections.defaultdict(lambda: collections.Counter())
nsamples = 0
_, want_w, _ = oracle_weights("net10.0")
at = collections.Counter()
for s in jsonl_gz(os.path.join(d, "workload.stacks.jsonl.gz")):
    nsamples += 1
    state, w = want_w[s["thread"]][at[s["thread"]]]
    at[s["thread"]] += 1
    keys = []
    for f in s["frames"]:
        e = expected_frame(f)
        keys.append((e["name"], e.get("file"), e.get("line"), e.get("col")))
    leaf[keys[0]] += 1
    leaf_ms[keys[0]] += w
    for k in set(keys):
        incl[k] += 1
        incl_ms[k][state] += w
c.true("top: header", so.startswith("workload.nettrace: %d samples on" % nsamples), so[:80])
rows = [x for x in so.splitlines() if x[:1] == " " and "%" in x and not x.strip().startswith("incl")]
c.eq("top: rows", len(rows), 10)
if len(rows) == 10:
    # columns: incl ms, incl%, running, waiting, samples, excl ms, excl%, samples, frame
    r0, r5 = rows[0].split(), rows[5].split()
    top_incl = max(incl_ms, key=lambda k: sum(incl_ms[k].values()))
    top_excl = max(leaf_ms, key=lambda k: leaf_ms[k])
    c.true("top: first inclusive time %s ms, oracle %.1f" % (r0[0], sum(incl_ms[top_incl].values())),
           abs(float(r0[0]) - sum(incl_ms[top_incl].values())) <= 0.03 * sum(incl_ms[top_incl].values()) + 0.1)
    c.true("top: its running and waiting time (%s, %s; oracle %.1f, %.1f)" % (r0[2], r0[3], incl_ms[top_incl]["running"], incl_ms[top_incl]["waiting"]),
           abs(float(r0[2]) - incl_ms[top_incl]["running"]) <= 0.03 * sum(incl_ms[top_incl].values()) + 0.1
           and abs(float(r0[3]) - incl_ms[top_incl]["waiting"]) <= 0.03 * sum(incl_ms[top_incl].values()) + 0.1)
    c.eq("top: first inclusive count", int(r0[4]), incl[top_incl])
    c.true("top: first exclusive time %s ms, oracle %.1f" % (r5[5], leaf_ms[top_excl]),
           abs(float(r5[5]) - leaf_ms[top_excl]) <= 0.03 * leaf_ms[top_excl] + 0.1)
    c.eq("top: first exclusive count", int(r5[7]), leaf[top_excl])
# the header: one kind of thing per number
head = so.split("\n\nTop")[0].splitlines()
c.true("top: header lines", len(head) >= 5 and head[1].strip().startswith("thread time")
       and head[3].strip().startswith("frames") and head[4].strip().startswith("modules"), "\n".join(head))


# ---- bounded memory: 100 times the trace ----------------------------------
def objects(data):
    """The FastSerialization objects after the 32-byte stream header:
    (header bytes without size, body) for blocks, the raw bytes for Trace."""
    i, out = 32, []
    while data[i] != 1:
        nlen = struct.unpack_from("<I", data, i + 11)[0]
        hdr = data[i:i + 16 + nlen]
        name = data[i + 15:i + 15 + nlen].decode()
        if name == "Trace":
            out.append(("Trace", data[i:i + 16 + nlen + 48 + 1]))
            i += 16 + nlen + 48 + 1
            continue
        size = struct.unpack_from("<I", data, i + 16 + nlen)[0]
        j = i + 16 + nlen + 4
        j += (4 - j % 4) % 4
        out.append((hdr, data[j:j + size]))
        i = j + size + 1
    return out


def serialize(objs):
    b = bytearray(b"Nettrace" + struct.pack("<I", 20) + b"!FastSerialization.1")
    for hdr, body in objs:
        if hdr == "Trace":
            b += body
            continue
        b += hdr + struct.pack("<I", len(body))
        b += b"\0" * ((4 - len(b) % 4) % 4)
        b += body + b"\x06"
    b += b"\x01"
    return bytes(b)


src = open(os.path.join(d, "workload.nettrace"), "rb").read()
objs = objects(src)
c.eq("repeat: our framing reads the fixture back", serialize(objs), src)
# the MetadataBlocks once (as bench/make-big-trace.py does: TraceEvent refuses
# an id defined twice), the rest 100 times
rest = [o for o in objs[1:] if b"MetadataBlock" not in o[0]]
big = serialize(objs + rest * 99)
open(sb.path("x100.nettrace"), "wb").write(big)
peaks = ["peak_stack_bytes", "peak_window_bytes", "peak_code_bytes", "peak_read_bytes"]
runs = {}
for name, f in (("x1", os.path.join(d, "workload.nettrace")), ("x100", sb.path("x100.nettrace"))):
    rc, so, se = trace(["--pdb-dir", d, f, "--format", "top", "--stats", sb.path(name + ".st")])
    c.eq("repeat %s: exit status (%s)" % (name, se.strip()), rc, 0)
    runs[name] = json.load(open(sb.path(name + ".st"))) if rc == 0 else {}
if runs.get("x1") and runs.get("x100"):
    a, b = runs["x1"], runs["x100"]
    c.eq("repeat: 100 times the samples", b["samples"], 100 * a["samples"])
    c.true("repeat: 100 times the bytes", b["bytes"] > 99 * a["bytes"], "%d vs %d" % (b["bytes"], a["bytes"]))
    for k in peaks:
        c.eq("repeat: %s the same for 100x the trace" % k, b[k], a[k])
    print("  x1 %d bytes, x100 %d bytes: peaks %s" % (a["bytes"], b["bytes"], {k: b[k] for k in peaks}))

# a stack budget that forces spills: the same answer
full = sb.path("net10.0.speedscope.json")
rc, so, se = trace(["--pdb-dir", d, os.path.join(d, "workload.nettrace"), "--stack-budget", "4K",
                    "-o", sb.path("small.json"), "--stats", sb.path("small.st")])
c.eq("small budget: exit status (%s)" % se.strip(), rc, 0)
if rc == 0:
    st = json.load(open(sb.path("small.st")))
    c.true("small budget: the table was flushed", st["stack_flushes"] > 0, str(st["stack_flushes"]))
    c.true("small budget: peak within the budget", st["peak_stack_bytes"] <= 4096, str(st["peak_stack_bytes"]))
    c.eq("small budget: same stacks", speedscope_samples(json.load(open(sb.path("small.json")))),
         speedscope_samples(json.load(open(full))))

# ---- many threads: the speedscope writer groups them (64 per replay) ---------
def many_threads(n, sample_type=1):
    """A V5 trace made here from NetTraceFormat_v5.md: one SampleProfiler
    metadata record, one stack, and samples on n threads (uncompressed rows)."""
    def u16z(t):
        return t.encode("utf-16-le") + b"\0\0"
    b = bytearray(b"Nettrace" + struct.pack("<I", 20) + b"!FastSerialization.1")

    def obj(name, body):
        nb = name.encode()
        b.extend(bytes([5, 5, 1]) + struct.pack("<iiI", 2, 2, len(nb)) + nb + bytes([6]))
        b.extend(struct.pack("<I", len(body)))
        b.extend(b"\0" * ((4 - len(b) % 4) % 4))
        b.extend(body + bytes([6]))

    def row(mid, payload, thread, stack, ts):
        h = struct.pack("<IIqqIIq", mid, 1, thread, thread, 0, stack, ts) + b"\0" * 32
        h += struct.pack("<I", len(payload))
        r = struct.pack("<I", len(h) + len(payload)) + h + payload
        return r + b"\0" * ((4 - len(r) % 4) % 4)
    nb = b"Trace"
    b.extend(bytes([5, 5, 1]) + struct.pack("<iiI", 4, 4, len(nb)) + nb + bytes([6]))
    b.extend(struct.pack("<8H", 2026, 1, 1, 1, 0, 0, 0, 0) + struct.pack("<qqiiii", 0, 1000000000, 8, 1, 1, 1000000))
    b.extend(bytes([6]))
    meta = struct.pack("<I", 1) + u16z("Microsoft-DotNETCore-SampleProfiler") + struct.pack("<I", 0)
    meta += u16z("ThreadSample") + struct.pack("<qII", 0, 0, 5)
    obj("MetadataBlock", struct.pack("<HHqq", 20, 0, 0, 0) + row(0, meta, 0, 0, 0))
    obj("StackBlock", struct.pack("<III", 1, 1, 8) + struct.pack("<Q", 0x1234))
    ev = b"".join(row(1, struct.pack("<I", sample_type), 1000 + t, 1, 10 + t) for t in range(n))
    obj("EventBlock", struct.pack("<HHqq", 20, 0, 10, 10 + n) + ev)
    b.extend(bytes([1]))
    return bytes(b)


open(sb.path("threads.nettrace"), "wb").write(many_threads(150))
rc, so, se = trace([sb.path("threads.nettrace"), "-o", sb.path("threads.json")])
# no method events: the profile is written, and said to be useless (exit 3)
c.eq("150 threads: exit status 3, written but useless (%s)" % se.strip(), rc, 3)
c.true("150 threads: the warning names what is missing", "describes no methods" in se and "rundown" in se, se)
if os.path.exists(sb.path("threads.json")):
    doc = json.load(open(sb.path("threads.json")))
    c.eq("150 threads: profiles", [p["name"] for p in doc["profiles"]], ["Thread (%d)" % (1000 + t) for t in range(150)])
    # frame 0 is ?!?, then the three state frames; type 1 is external: waiting
    c.eq("150 threads: one unknown frame each, under its state", {json.dumps(p["samples"]) for p in doc["profiles"]}, {"[[2, 0]]"})
    c.eq("150 threads: the frames", doc["shared"]["frames"],
         [{"name": "?!?"}, {"name": "[running managed code]"}, {"name": "[waiting or in native code]"},
          {"name": "[unknown sampler state]"}])
    c.true("150 threads: the warning in the document", any("describes no methods" in w for w in doc.get("warnings", [])))

# a sampler type neither managed (2) nor external (1): counted, named, kept as unknown
open(sb.path("type7.nettrace"), "wb").write(many_threads(3, sample_type=7))
rc, so, se = trace([sb.path("type7.nettrace"), "-o", sb.path("type7.json"), "--stats", sb.path("type7.st")])
c.true("sampler type 7: the warning names it", "3 of 3 samples have a sampler type pdbsym does not know (7" in se, se)
if os.path.exists(sb.path("type7.json")):
    doc = json.load(open(sb.path("type7.json")))
    c.eq("sampler type 7: every sample under the unknown state", {json.dumps(p["samples"]) for p in doc["profiles"]}, {"[[3, 0]]"})
    st7 = json.load(open(sb.path("type7.st")))
    c.eq("sampler type 7: counted apart", (st7["samples_running"], st7["samples_waiting"], st7["samples_other"]), (0, 0, 3))
rc, so, se = trace([sb.path("type7.nettrace"), "-o", sb.path("type7r.json"), "--state", "running"])
c.eq("sampler type 7, --state running: no profile", json.load(open(sb.path("type7r.json")))["profiles"] if os.path.exists(sb.path("type7r.json")) else None, [])

# ---- api.md's example, run ---------------------------------------------------
doc_md = open(os.path.join(clilib.ROOT, "api.md"), encoding="utf-8").read()
m = re.search(r"```sh\n\$ (pdbsym trace .*?)\n```\n\n```text trace-top\n(.*?)```", doc_md, re.S)
c.true("api.md has the pdbsym trace example", m is not None)
if m:
    args = shlex.split(m.group(1).replace("\\\n", " "))[1:]
    args = [os.path.join(clilib.ROOT, a) if a.startswith("tests/") else a for a in args]
    rc, so, se = sb.run(args)
    c.eq("api.md example: exit status (%s)" % se.strip(), rc, 0)
    c.eq("api.md example: output", so, m.group(2))

# ---- bad input ---------------------------------------------------------------
end_tag = len(serialize(objs[:2])) - 2  # the EndObject closing the first block
cases = {
    "truncated.nettrace": src[: len(src) // 2],
    "garbled.nettrace": src[:end_tag] + b"\x07" + src[end_tag + 1:],
    "notatrace.nettrace": b"MZ\x90\x00" + b"\0" * 100,
    "empty.nettrace": b"",
}
for name, data in cases.items():
    open(sb.path(name), "wb").write(data)
    rc, so, se = trace([sb.path(name), "-o", sb.path(name + ".out")])
    c.eq("%s: exit status" % name, rc, 2)
    c.eq("%s: one line on stderr" % name, len(se.strip().splitlines()), 1)
    c.true("%s: the error names where" % name, "(at offset 0x" in se, se.strip())
    if name == "garbled.nettrace":
        c.true("garbled: names the block and its end", "MetadataBlock" in se and "EndObject" in se
               and "0x%x" % end_tag in se, se.strip())
    print("  %s: %s" % (name, se.strip()))
rc, so, se = trace([sb.path("missing.nettrace")])
c.eq("missing file: exit status", rc, 2)

sb.close()
c.done()
