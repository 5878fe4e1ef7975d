"""`pdbsym profile --pid N` against what a real .NET 10 runtime will not show
(tests/integration/test_profile_live.py has the real runtime): a stand-in
diagnostic server (dsfake.py, listening where a runtime listens) that plays
an older runtime, refuses, or answers with hostile or broken bytes, and
processes that are not .NET at all.

- fallbacks: ProcessInfo3 -> 2 -> 1, and CollectTracing5 -> 4 -> 3 on
  DS_IPC_E_UNKNOWN_COMMAND (.NET 5/6), 5 -> 4 on DS_IPC_E_BAD_ENCODING, seen in
  the commands the stand-in received; the session then works, its windows
  holding the streamed trace's samples named as TraceLog names them;
- errors: a runtime that knows no CollectTracing (too old), one that answers
  DS_IPC_E_FAIL, garbage, a header declaring 64 KiB, a reply cut short, a
  ProcessInfo string claiming 2^30 characters, silence (the deadline), a pid
  that is not .NET, no such pid: each a one-line error naming the cause, exit
  3, no output folder, no copy of the stream, nothing in TMPDIR;
- a stream that is not a trace: exit 1; a runtime that dies mid-stream: the
  partial window written, exit 0, "the process exited".
"""
import collections
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clilib import Checks, Sandbox  # noqa: E402
from tracelib import FIX, expected_frame, jsonl_gz, same_frame, speedscope_samples  # noqa: E402
import livelib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(FIX, "net10.0", "workload.nettrace")

c = Checks()
sb = Sandbox("pdbsym-profile-faults-")
sb.env["PDBSYM_PROFILE_IPC_TIMEOUT"] = "2"
# the stand-ins' sockets, where a socket's path fits (livelib.socket_dir)
SOCKETS = livelib.socket_dir(sb, "sockets")


def fake(mode):
    """Starts the stand-in; returns (process, pid, command log path)."""
    log = sb.path("commands-%s-%d" % (mode, time.time_ns()))
    env = dict(os.environ, TMPDIR=SOCKETS)
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "dsfake.py"), mode, log, TRACE],
                         env=env, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        raise RuntimeError("dsfake did not start: %r" % line)
    return p, int(line.split()[1]), log


def commands(log):
    try:
        return [x.strip() for x in open(log) if x.strip()]
    except FileNotFoundError:
        return []


def leftovers():
    """files a run may have left in the sandbox (not the stand-ins' own)"""
    out = []
    for f in os.listdir(sb.dir):
        if f.startswith(("commands-", "dotnet-diagnostic-", "cache", "sockets")):
            continue
        out.append(f)
    return sorted(out)


def profile(pid, out, extra=(), timeout=60):
    t0 = time.time()
    rc, so, se = sb.run(["profile", "--pid", str(pid), "--window", "1s", "--duration", "3s",
                         "--out", out, "--offline"] + list(extra), timeout=timeout)
    return rc, so, se, time.time() - t0


def merged(out):
    tids = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(out, "*.speedscope.json"))):
        for tid, ss in speedscope_samples(json.load(open(f))).items():
            tids[tid] += [[{k: v for k, v in fr.items() if k in ("name", "file", "line", "col", "line_approx")}
                           for fr in s] for s in ss]
    return tids


# ---- an older runtime: the fallbacks, then a working session ---------------
oracle = collections.defaultdict(list)
for s in jsonl_gz(os.path.join(FIX, "net10.0", "workload.stacks.jsonl.gz")):
    oracle[s["thread"]].append([expected_frame(f) for f in s["frames"]])

for mode, want_info, want_collect in (
        ("old", ["04 08", "04 04", "04 00"], ["02 06", "02 05", "02 04"]),
        ("badenc", ["04 08"], ["02 06", "02 05"]),
        ("ok", ["04 08"], ["02 06"])):
    p, pid, log = fake(mode)
    out = sb.path("out-" + mode)
    rc, so, se, _ = profile(pid, out, ["--pdb-dir", os.path.join(FIX, "net10.0")])
    p.kill()
    p.wait()
    c.eq("%s: exit status (%s)" % (mode, se.strip()), rc, 0)
    cmds = commands(log)
    c.eq("%s: ProcessInfo commands tried" % mode, [x for x in cmds if x.startswith("04")], want_info)
    # the main session, then the rundown session (the same fallbacks), then StopTracing
    collects = [x for x in cmds if x.startswith("02") and x != "02 01"]
    c.eq("%s: CollectTracing tried for the main session" % mode, collects[:len(want_collect)],
         want_collect)
    c.true("%s: StopTracing sent" % mode, "02 01" in cmds, cmds)
    c.true("%s: the report line" % mode, so.startswith("profile: pid %d " % pid), so)
    got = merged(out)
    # as `pdbsym trace` is checked: a frame marked line_approx may have
    # another line than the runtime's rule over the trace's maps
    differ = [t for t in oracle
              if len(got.get(t, [])) != len(oracle[t]) or
              not all(len(g) == len(w) and all(same_frame(a, b) for a, b in zip(g, w))
                      for g, w in zip(got.get(t, []), oracle[t]))]
    c.eq("%s: every sample of the streamed trace, named as TraceLog names it (threads that differ)" % mode,
         differ, [])
    c.eq("%s: nothing but the windows in the folder" % mode,
         [f for f in os.listdir(out) if not f.endswith(".speedscope.json")], [])

# ---- errors: one line, exit 3, nothing left behind ------------------------
cases = [
    ("ancient", "too old to profile; .NET 5 or later is needed"),
    ("refuse", "DS_IPC_E_FAIL (0x80004005)"),
    ("garbage", "DOTNET_IPC_V1"),
    ("bighdr", "more than the 8192 expected"),
    ("truncated", "closed the connection after 10 of 200 bytes"),
    ("badinfo", "ProcessInfo command line"),
    ("silent", "timed out"),
]
for mode, want in cases:
    p, pid, log = fake(mode)
    before = leftovers()
    rc, so, se, took = profile(pid, sb.path("out-" + mode), ["--tee", sb.path("tee-" + mode)])
    p.kill()
    p.wait()
    c.eq("%s: exit status" % mode, rc, 3)
    c.true("%s: one line on stderr naming the cause (%r)" % (mode, se),
           se.count("\n") == 1 and want in se and se.startswith("pdbsym profile: "))
    c.eq("%s: nothing on stdout" % mode, so, "")
    c.eq("%s: nothing left behind" % mode, leftovers(), before)
    if mode == "silent":
        c.true("silent: the deadline (profile_ipc_timeout = 2 s) held: %.1f s" % took, took < 10)

# processes that are not a .NET runtime's, and no process at all
sleeper = subprocess.Popen(["sleep", "60"])
rc, so, se, _ = profile(sleeper.pid, sb.path("out-sleep"))
sleeper.kill()
sleeper.wait()
c.eq("not .NET: exit status", rc, 3)
c.true("not .NET: names it (%r)" % se, "is not a .NET process" in se and se.count("\n") == 1)
c.true("not .NET: no output folder", not os.path.exists(sb.path("out-sleep")))
dead = subprocess.Popen(["true"])
dead.wait()
rc, so, se, _ = profile(dead.pid, sb.path("out-dead"))
c.eq("no such process: exit status", rc, 3)
c.true("no such process: names it (%r)" % se, "no process %d" % dead.pid in se)

# ---- a stream that is not a trace; a runtime that dies mid-stream ---------
p, pid, log = fake("badstream")
rc, so, se, _ = profile(pid, sb.path("out-badstream"))
p.kill()
p.wait()
c.eq("badstream: exit status", rc, 1)
c.true("badstream: says the stream is not a trace (%r)" % se, "FastSerialization" in se)

p, pid, log = fake("dies")
out = sb.path("out-dies")
rc, so, se, _ = profile(pid, out)
p.wait()
c.eq("dies: exit status (%s)" % se.strip(), rc, 0)
c.true("dies: the report says the process exited (%r)" % so, "the process exited" in so)
files = glob.glob(os.path.join(out, "*.speedscope.json"))
c.true("dies: the partial window written", len(files) >= 1, files)
for f in files:
    json.load(open(f))  # whole files only
c.eq("dies: no temporary files", glob.glob(os.path.join(out, ".pdbsym-tmp-*")), [])
c.eq("spill files left in TMPDIR", glob.glob(sb.path("pdbsym-trace-*")), [])

sb.close()
c.done()
