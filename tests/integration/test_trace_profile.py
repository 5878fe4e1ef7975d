"""Profiles a performance engineer can trust (issue 26), on the profile
fixture (tests/fixtures/nettrace/profile, made by make-profile.sh: a Release
app under `dotnet-trace collect`, its library published ReadyToRun), through
`pdbsym trace` and POST /traces:

- names: every frame of every sample is the one TraceLog names;
- honest lines: against the ground truth of profile.calls.jsonl.gz (for each
  caller frame, the source lines holding a call that leads to its callee,
  from the IL, the PDB and the source text: NetTraceOracle calls), at least
  95 % of the caller frames that have a line and a ground truth are on a
  right line, and none that is wrong is left unmarked (`line_approx`); the
  lines of frames not marked are the runtime's rule over the trace's maps
  (TraceLog's IL maps read by the oracle);
- framework lines: the library's precompiled frames, which the trace gives
  no IL map, get their lines from the image's own debug info: where the
  runtime's own StackFrame described the same method and native offset
  (frames.jsonl), pdbsym's line is the runtime's unless marked approximate
  (the IL then says the runtime's map put the call in the wrong statement);
- time and states: each sample's state the sampler's type, its weight the
  time since its thread's previous sample, every thread's total within 5 % of
  its sampled life (TraceEvent's reading);
- warnings: traces recorded without maps, without the rundown, without the
  sampler: named on stderr with the recording that fixes them, exit 0 for
  the first, 3 for the other two (written all the same), 3 for any with
  --strict, nothing on stderr with --quiet; POST /traces answers 422 for a
  useless one or with ?strict=true, and carries the warnings in the answer.
"""
import collections
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402
from pdbsym_server import Server  # noqa: E402
from tracelib import (FIX, check_weights, expected_frame, jsonl_gz, oracle_file,  # noqa: E402
                      pb_fields, speedscope_samples)

clilib.need_binary()
PROF = os.path.join(FIX, "profile")
if not os.path.exists(os.path.join(PROF, "profile.nettrace")):
    harness.skip("tests/fixtures/nettrace/profile absent")

c = Checks()
sb = Sandbox("pdbsym-trace-profile-")
TRACE = os.path.join(PROF, "profile.nettrace")


def trace(args):
    return sb.run(["trace", "--offline"] + args, timeout=600)


# the oracle's samples in TraceLog's order: (thread, index within the thread)
stacks = jsonl_gz(oracle_file("profile", "stacks"))
where = []
seen = collections.Counter()
for s in stacks:
    where.append((s["thread"], seen[s["thread"]]))
    seen[s["thread"]] += 1

# the methods' code ranges, from TraceEvent's events (the last loaded wins)
ranges = [(int(e["start"], 16), e["size"], e) for e in jsonl_gz(oracle_file("profile", "events"))
          if e["kind"] == "method"]


def method_at(ip):
    best = None
    for start, size, e in ranges:
        if start <= ip < start + size:
            best = (start, e)
    return best


out, st = sb.path("profile.json"), sb.path("profile.stats")
rc, so, se = trace(["--pdb-dir", PROF, TRACE, "-o", out, "--stats", st])
c.eq("pdbsym trace: exit status (%s)" % se.strip(), rc, 0)
doc = json.load(open(out)) if rc == 0 else {"profiles": [], "shared": {"frames": []}}
stats = json.load(open(st)) if rc == 0 else {}
ours = speedscope_samples(doc)

# ---- names, and the lines of frames not marked -------------------------------
bad_names = bad_lines = 0
for (tid, k), s in zip(where, stacks):
    got = ours.get(tid, [])
    if k >= len(got) or len(got[k]) != len(s["frames"]):
        bad_names += 1
        continue
    for g, f in zip(got[k], s["frames"]):
        e = expected_frame(f)
        if g["name"] != e["name"]:
            bad_names += 1
        elif "line" in e and not g.get("line_approx") and g.get("line") != e["line"]:
            bad_lines += 1
            if bad_lines <= 3:
                print("  %s: line %s, the runtime's rule %s" % (e["name"], g.get("line"), e["line"]))
c.eq("names unlike TraceLog's", bad_names, 0)
c.eq("lines not marked approximate unlike the runtime's rule over the trace's maps", bad_lines, 0)

# ---- honest lines against the ground truth ------------------------------------
res = collections.Counter()
wrong = collections.Counter()
baseline = collections.Counter()
for g in jsonl_gz(oracle_file("profile", "calls")):
    tid, k = where[g["i"]]
    f = ours[tid][k][g["k"]] if tid in ours and k < len(ours[tid]) and g["k"] < len(ours[tid][k]) else {}
    if "line" not in f:
        res["no line"] += 1
        continue
    if not g["lines"]:
        res["no ground truth"] += 1  # a call the JIT made (a GC poll), or a stub without lines
        continue
    right, marked = f["line"] in g["lines"], bool(f.get("line_approx"))
    res[(right, marked)] += 1
    if not right:
        wrong[(g["caller"], g["callee"], f["line"], marked, tuple(g["lines"]))] += 1
    o = stacks[g["i"]]["frames"][g["k"]]
    if "line" in o:  # the runtime's rule alone (JIT-compiled frames)
        baseline[o["line"] in g["lines"]] += 1
judged = sum(v for key, v in res.items() if isinstance(key, tuple))
right = res[(True, False)] + res[(True, True)]
print("  caller frames: %d judged, %d right (%.2f %%: %d of them marked approximate), %d wrong and "
      "marked, %d wrong unmarked; %d without a line, %d without a ground truth"
      % (judged, right, 100.0 * right / max(judged, 1), res[(True, True)], res[(False, True)],
         res[(False, False)], res["no line"], res["no ground truth"]))
print("  the runtime's rule alone (JIT-compiled frames): %d of %d right (%.2f %%)"
      % (baseline[True], sum(baseline.values()), 100.0 * baseline[True] / max(sum(baseline.values()), 1)))
for key, n in wrong.most_common(5):
    print("  wrong: %d x %s" % (n, key))
c.true("at least 95 % of caller frames on a line holding the call", right >= 0.95 * judged and judged > 1000,
       "%d of %d" % (right, judged))
c.eq("wrong lines left unmarked", res[(False, False)], 0)

# ---- the library's precompiled frames against the runtime's StackFrame --------
records = {}
for line in open(os.path.join(PROF, "frames.jsonl")):
    r = json.loads(line)
    records[(int(r["token"], 16), r["native"])] = r
r2r_frames = r2r_lines = matched = agree = marked = 0
for (tid, k), s in zip(where, stacks):
    for n, f in enumerate(s["frames"]):
        if f.get("module") != "ProfLib":
            continue
        r2r_frames += 1
        g = ours[tid][k][n]
        r2r_lines += "line" in g
        m = method_at(int(f["ip"], 16))
        if not m:
            continue
        native = int(f["ip"], 16) - m[0]
        rec = records.get((int(m[1]["token"], 16), native))
        if not rec or n == 0:
            continue
        matched += 1
        if g.get("line_approx"):
            marked += 1
        else:
            agree += g.get("line") == rec["line"] and g.get("file") == rec["file"]
print("  precompiled frames: %d, %d with a line; %d at an offset StackFrame described: %d with the "
      "runtime's line, %d marked approximate (the IL names another line for the call)"
      % (r2r_frames, r2r_lines, matched, agree, marked))
c.true("precompiled frames get lines", r2r_frames > 100 and r2r_lines == r2r_frames, "%d of %d" % (r2r_lines, r2r_frames))
c.true("frames at offsets StackFrame described", matched > 50, str(matched))
c.eq("unmarked precompiled frames with the runtime's own line", agree, matched - marked)
c.true("the ReadyToRun image was read", stats.get("r2r_images", 0) >= 1 and stats.get("r2r_methods", 0) >= 5, str(stats))

# ---- pprof: the same marks, as each sample's line_approx labels (frame depths) ----
rc, so, se = trace(["--pdb-dir", PROF, TRACE, "--format", "pprof", "-o", sb.path("p.pb.gz")])
c.eq("pprof: exit status", rc, 0)
if rc == 0:
    strings, marks = [], collections.defaultdict(list)
    for field, wire, v in pb_fields(gzip.open(sb.path("p.pb.gz")).read()):
        if field == 6:
            strings.append(v.decode())
        elif field == 2:
            labels = [{f: x for f, _, x in pb_fields(lv)} for f, _, lv in pb_fields(v) if f == 3]
            tid = [lab[3] for lab in labels if strings[lab[1]] == "thread"][0]
            marks[tid].append(sorted(lab.get(3, 0) for lab in labels if strings[lab[1]] == "line_approx"))
    want = {t: [[k for k, f in enumerate(stack) if f.get("line_approx")] for stack in v] for t, v in ours.items()}
    c.eq("pprof: line_approx labels at the depths speedscope marks", dict(marks), want)
    c.true("pprof: some marked", any(any(m) for v in marks.values() for m in v))

# ---- time and states ------------------------------------------------------------
interval, worst = check_weights(c, "profile", doc, "profile")
types = collections.Counter(s.get("type") for s in stacks)
c.eq("running/waiting split equal to TraceEvent's count of the sampler's types",
     (stats.get("samples_running"), stats.get("samples_waiting")), (types["Managed"], types["External"]))
print("  interval %.3f ms (header 1 ms), %d running / %d waiting samples, thread totals within %.1f %% "
      "of their sampled life" % (interval, types["Managed"], types["External"], 100 * worst))

# ---- warnings ---------------------------------------------------------------------
WARN = [("warn-nomaps.nettrace", 0, "no IL-to-native maps"),
        ("warn-norundown.nettrace", 3, "describes no methods"),
        ("warn-nosamples.nettrace", 3, "no thread samples")]
for name, want_rc, text in WARN:
    f = os.path.join(PROF, name)
    o = sb.path(name + ".json")
    rc, so, se = trace(["--pdb-dir", PROF, f, "-o", o])
    c.eq("%s: exit status" % name, rc, want_rc)
    c.true("%s: the warning" % name, text in se and "pdbsym trace: warning:" in se, se)
    c.true("%s: it names the recording that fixes it" % name,
           "dotnet-trace collect" in se or "DOTNET_EventPipeConfig" in se, se)
    c.true("%s: the profile is written, the warning in it" % name,
           os.path.exists(o) and any(text in w for w in json.load(open(o)).get("warnings", [])))
    rc, so, se = trace(["--pdb-dir", PROF, f, "-o", o, "--strict"])
    c.eq("%s --strict: exit status" % name, rc, 3)
    rc, so, se = trace(["--pdb-dir", PROF, f, "-o", o, "--quiet"])
    c.eq("%s --quiet: nothing on stderr" % name, se, "")
rc, so, se = trace(["--pdb-dir", PROF, TRACE, "-o", sb.path("q.json"), "--quiet", "--strict"])
c.eq("the profile fixture: no warning (--strict exit 0)", rc, 0)
c.eq("the profile fixture --quiet: nothing on stderr", se, "")

# ---- POST /traces: the same answer, images from trace_images ----------------------
sym = clilib.SymServer(sb.path("store"))
for e in jsonl_gz(oracle_file("profile", "events")):
    if e["kind"] == "module" and e["il_path"].endswith(("/App.dll", "/ProfLib.dll")):
        name = os.path.basename(e["il_path"])[:-4] + ".pdb"
        sym.put(name, e["pdb_guid"].replace("-", "").upper() + "FFFFFFFF", open(os.path.join(PROF, name), "rb").read())
srv = Server(config="symbol_path = srv*%s\noffline = false\ntrace_images = %s\n" % (sym.url, PROF))
try:
    def post(path, query=""):
        st, h, body = srv.request("POST", "/traces" + query, body=open(path, "rb").read(),
                                  headers={"Content-Type": "application/octet-stream"}, timeout=300)
        return st, body

    st_, body = post(TRACE)
    c.eq("POST /traces: status", st_, 200)
    if st_ == 200:
        theirs = json.loads(body)
        doc["name"] = theirs["name"]
        c.eq("POST /traces: the answer pdbsym trace writes (R2R lines and call-site lines too)", theirs, doc)
    for name, want_rc, text in WARN:
        st_, body = post(os.path.join(PROF, name))
        c.eq("POST /traces %s: status" % name, st_, 422 if want_rc else 200)
        c.true("POST /traces %s: the warning" % name, text.encode() in body, body[:300])
        if not want_rc:
            st_, body = post(os.path.join(PROF, name), "?strict=true")
            c.eq("POST /traces %s ?strict=true: status" % name, st_, 422)
            st_, body = post(os.path.join(PROF, name), "?format=pprof")
            c.true("POST /traces %s pprof: the warning as a comment" % name,
                   st_ == 200 and text.encode() in gzip.decompress(body))
finally:
    srv.close()
    sym.close()
sb.close()
c.done()
