"""`pdbsym profile --pid N` against real .NET 10 processes (docs/contract.md,
"Profiling running .NET processes"): the app of tests/live (several
namespaces, generics, async, lambdas and LINQ, a second assembly, methods it
mints at run time: DynamicMethod, compiled Regex, expression trees), built
here with the real SDK, profiled while it runs.

- windows: each written whole (speedscope and pprof), named by pid and time;
  their samples together, stack by stack and frame by frame, equal to what
  TraceEvent's TraceLog reads in the session's own stream copied to a file
  (--tee; names as TraceLog gives them, lines by the runtime's IL rule over
  System.Reflection.Metadata, tests/fixtures/nettrace/oracle) and to what
  `pdbsym trace` reads in that file; code JIT'd before the attach named (the
  rundown session); the minted methods named; pprof carries the window's
  time_nanos, duration_nanos and its dropped-events comment;
- the session's end: a process that exits mid-window, one killed with -9,
  and SIGTERM to pdbsym each leave the last (partial) window written, exit 0;
  after SIGTERM the app runs on and can be profiled again (StopTracing sent);
- every CollectTracing encoding pdbsym can fall back to (4, 3, 2) is taken by
  the real runtime (profile_collect_version);
- refusals: DOTNET_EnableDiagnostics=0, a process of another user (pdbsym
  run as nobody when the test runs as root), each one line, exit 3;
- README.md's "First session", step 6, as written (the normal build's run).
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import livelib  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402

livelib.need_dotnet()
c = Checks()
sb = Sandbox("pdbsym-profile-live-")
t0 = time.time()
appdir = livelib.build_app(sb.dir)
oracle = livelib.build_oracle(sb.dir)
print("built the app and the oracle in %.1f s" % (time.time() - t0))
# the app's sockets go in a folder of its own, as the target's TMPDIR says
apptmp = livelib.socket_dir(sb)


def profile(pid, out, args=(), env=None, timeout=120):
    return sb.run(["profile", "--pid", str(pid), "--out", out] + list(args), env=env,
                  timeout=timeout)


# ---- a session against TraceLog and pdbsym trace ---------------------------
app = livelib.App(appdir, ["60", "--mint"], tmpdir=apptmp)
time.sleep(2)  # code JIT'd before the attach: only the rundown session names it
out, tee = sb.path("w"), sb.path("session.nettrace")
# 13 s of 2 s windows: at least four whole ones however long the attach
# takes (its rundown, a sanitizer build)
rc, so, se = profile(app.pid, out, ["--window", "2s", "--duration", "13s", "--tee", tee,
                                    "--format", "speedscope,pprof"])
app.stop()
c.eq("session: exit status (%s)" % se.strip(), rc, 0)
c.true("session: the report line (%r)" % so, so.startswith("profile: pid %d the duration passed: " % app.pid))
ss = livelib.window_files(out)
pp = livelib.window_files(out, ".pb.gz")
c.true("session: four or more windows (%d)" % len(ss), len(ss) >= 4)
c.eq("session: a pprof file for each speedscope file",
     [os.path.basename(f)[:-16] for f in ss], [os.path.basename(f)[:-6] for f in pp])
c.true("session: window names", all(os.path.basename(f).startswith("pdbsym-%d-" % app.pid) for f in ss))
c.eq("session: no temporary files", glob.glob(os.path.join(out, ".pdbsym-tmp-*")), [])
ours = livelib.merged_samples(ss)
nsamples = sum(len(v) for v in ours.values())
c.true("session: samples (%d)" % nsamples, nsamples > 1000)
names = set()
for f in ss:
    for fr in json.load(open(f))["shared"]["frames"]:
        names.add((fr["name"], fr.get("file", "").rsplit("/", 1)[-1], fr.get("line")))
have = lambda part: [n for n in names if part in n[0]]  # noqa: E731
for part, src in (("LiveApp!Live.App.Workers.Fib(int32)", "Workers.cs"),
                  ("LiveLib!Live.Lib.Geometry.Accumulator`1[Live.Lib.Geometry.Vec].Heavy", "Geometry.cs"),
                  ("LiveLib!Live.Lib.Geometry.Accumulator`1[System.__Canon].Sum", "Geometry.cs"),
                  ("LiveApp!Live.App.Workers+<>c.<Squares>b__", "Workers.cs"),
                  ("LiveApp!Live.App.Workers+<Chain>d__", "Workers.cs"),
                  ("LiveApp!Live.App.Program.Main", "Program.cs")):
    hits = have(part)
    c.true("session: %s named, with file and line" % part,
           any(h[1] == src and h[2] for h in hits), sorted(hits)[:3])
c.true("session: minted methods named (%s)" % sorted(n[0] for n in have("dynamicClass"))[:2],
       len(have("dynamicClass")) > 0)
theirs = livelib.oracle_stacks(oracle, tee, appdir, sb.dir)
n, bad = livelib.diff_samples(c, "session vs TraceLog", ours, theirs, oracle=True)
print("session: %d samples against TraceLog, %d differ" % (n, bad))
tr = sb.path("trace.json")
rc, so2, se2 = sb.run(["trace", tee, "-o", tr, "--pdb-dir", appdir, "--offline", "--quiet"], timeout=600)
c.eq("pdbsym trace of the copy: exit status (%s)" % se2.strip(), rc, 0)
if rc == 0:
    # the same frames, marks and lines, but where both mark a line approximate:
    # its estimate from the call sites takes the callee first seen at that
    # return address, in the window for a session, in the whole trace here
    livelib.diff_samples(c, "session vs pdbsym trace", ours, livelib.merged_samples([tr]),
                         approx=True)
for f in pp:
    fields = livelib.pprof_fields(f)
    strs = [s.decode() for s in fields.get(6, [])]
    start, dur = fields.get(9, [0])[0], fields.get(10, [0])[0]
    c.true("pprof %s: time_nanos and duration_nanos (%d, %d)" % (os.path.basename(f), start, dur),
           start > 1.7e18 and 0 < dur < 60e9)
    c.true("pprof %s: the dropped-events comment" % os.path.basename(f),
           any(strs[i].startswith("pdbsym: ") and "dropped" in strs[i] for i in fields.get(13, [])))

# ---- the end of a session ----------------------------------------------------
# the process exits mid-window
app = livelib.App(appdir, ["8"], tmpdir=apptmp)
out = sb.path("exits")
rc, so, se = profile(app.pid, out, ["--window", "3s"])
app.stop()
c.eq("exits: exit status (%s)" % se.strip(), rc, 0)
c.true("exits: the report says so (%r)" % so, "the process exited" in so)
c.true("exits: the partial window written", len(livelib.window_files(out)) >= 2)

# killed with -9 mid-window
app = livelib.App(appdir, [], tmpdir=apptmp)
out = sb.path("killed")
p = sb.popen(["profile", "--pid", str(app.pid), "--out", out, "--window", "3s"],
             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
# killed 1.5 s into the second window: after the first is written (the
# attach and its rundown take seconds more on a loaded machine than on an
# idle one, so a fixed sleep could kill it in the first)
deadline = time.time() + 60
while not livelib.window_files(out) and time.time() < deadline and p.poll() is None:
    time.sleep(0.1)
time.sleep(1.5)
os.kill(app.pid, signal.SIGKILL)
so, se = p.communicate(timeout=60)
app.stop()
c.eq("kill -9: exit status (%s)" % se.strip(), p.returncode, 0)
c.true("kill -9: the report says the process exited (%r)" % so, "the process exited" in so)
files = livelib.window_files(out)
c.true("kill -9: two windows, the last partial (%d)" % len(files), len(files) == 2)
for f in files:
    json.load(open(f))

# SIGTERM to pdbsym: StopTracing, the last window, exit 0; the app runs on
app = livelib.App(appdir, [], tmpdir=apptmp)
out = sb.path("term")
p = sb.popen(["profile", "--pid", str(app.pid), "--out", out, "--window", "60s"],
             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(3)
p.send_signal(signal.SIGTERM)
so, se = p.communicate(timeout=60)
c.eq("SIGTERM: exit status (%s)" % se.strip(), p.returncode, 0)
c.true("SIGTERM: the report says stopped (%r)" % so, " stopped: 1 windows" in so)
files = livelib.window_files(out)
c.eq("SIGTERM: the one partial window", len(files), 1)
c.true("SIGTERM: it has samples", sum(len(v) for v in livelib.merged_samples(files).values()) > 100)
c.true("SIGTERM: the app runs on", app.alive())
rc, so, se = profile(app.pid, sb.path("again"), ["--window", "1s", "--duration", "2s"])
c.eq("SIGTERM: profiled again (%s)" % se.strip(), rc, 0)

# every CollectTracing encoding of the fallbacks, taken by the real runtime
for v in (4, 3, 2):
    out = sb.path("v%d" % v)
    rc, so, se = profile(app.pid, out, ["--window", "1s", "--duration", "2s"],
                         env={"PDBSYM_PROFILE_COLLECT_VERSION": str(v)})
    c.eq("CollectTracing%d: exit status (%s)" % (v, se.strip()), rc, 0)
    c.true("CollectTracing%d: the runtime took it (%r)" % (v, se), "CollectTracing%d)" % v in se)
    merged = livelib.merged_samples(livelib.window_files(out))
    named = sum(1 for st in merged.values() for s in st for f in s if "Live.App.Workers" in f["name"])
    c.true("CollectTracing%d: samples in the app's code (%d)" % (v, named), named > 10)
app.stop()

# ---- refusals ----------------------------------------------------------------
app = livelib.App(appdir, [], tmpdir=apptmp, env={"DOTNET_EnableDiagnostics": "0"})
rc, so, se = profile(app.pid, sb.path("nodiag"))
app.stop()
c.eq("DOTNET_EnableDiagnostics=0: exit status", rc, 3)
c.true("DOTNET_EnableDiagnostics=0: one line naming it (%r)" % se,
       se.count("\n") == 1 and "DOTNET_EnableDiagnostics=0" in se)
c.true("DOTNET_EnableDiagnostics=0: no output folder", not os.path.exists(sb.path("nodiag")))

# a TMPDIR too long for a socket's path: the runtime makes no socket, and
# pdbsym says why instead of "not a .NET process"
longtmp = sb.path("t" * 90)
os.makedirs(longtmp)
app = livelib.App(appdir, [], tmpdir=longtmp)
rc, so, se = profile(app.pid, sb.path("longtmp"))
app.stop()
c.eq("a TMPDIR too long for a socket: exit status", rc, 3)
c.true("a TMPDIR too long for a socket: one line naming it (%r)" % se,
       se.count("\n") == 1 and "too long for a Unix socket" in se and "shorter TMPDIR" in se)
shutil.rmtree(longtmp, ignore_errors=True)

if os.geteuid() == 0:
    app = livelib.App(appdir, [], tmpdir=apptmp)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    e = dict(sb.env)
    r = subprocess.run(nobody + [os.environ["PDBSYM_BIN"], "profile", "--pid", str(app.pid), "--out",
                                 "/nonexistent/out"], env=e, capture_output=True, text=True,
                       timeout=60, cwd="/")
    app.stop()
    c.eq("another user's process: exit status (%s)" % r.stderr.strip(), r.returncode, 3)
    c.true("another user's process: one line naming the user and the fix (%r)" % r.stderr,
           r.stderr.count("\n") == 1 and "uid 0" in r.stderr and "root" in r.stderr)
else:
    harness.skip_part("a process of another user: the test runs as uid %d, not root, so it cannot "
                      "start one" % os.geteuid())

# ---- README.md's "First session", step 6, as written ----------------------------
# Its commands are the same whatever the build; they build the app and run it
# unthrottled for 30 s, so the sanitizer run (which samples: harness.sampled)
# leaves them to the normal build's run of this test.
readme = open(os.path.join(livelib.ROOT, "README.md")).read()
step = re.search(r"^6\. Profile a running .NET process.*?(?=^## |\Z)", readme, re.S | re.M)
blocks = re.findall(r"((?:^ {7}\S.*\n)+)", step.group(0), re.M) if step else []
c.true("README step 6: its commands and its summary", len(blocks) >= 2, blocks)
if harness.sampled():
    print("README step 6: run as written by the normal build's test (the sanitizer run samples)")
elif len(blocks) >= 2:
    cmds = [l[7:] for l in blocks[0].splitlines()]
    shown = [l[7:] for l in blocks[1].splitlines()]
    rd = sb.path("readme")
    os.makedirs(os.path.join(rd, "build"))
    os.symlink(os.environ["PDBSYM_BIN"], os.path.join(rd, "build", "pdbsym"))
    shutil.copytree(livelib.LIVE_SRC, os.path.join(rd, "tests", "live"),
                    ignore=shutil.ignore_patterns("bin", "obj"))
    e = livelib.dotnet_env(sb.dir)
    e.update({k: v for k, v in sb.env.items() if k.startswith("PDBSYM_")})
    e["PDBSYM_OFFLINE"] = "true"
    r = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(cmds) + "\nkill %1 2>/dev/null || true\n"],
                       cwd=rd, env=e, capture_output=True, text=True, timeout=600)
    c.eq("README step 6: exit status (%s)" % r.stderr[-500:], r.returncode, 0)
    pat = lambda line: re.escape(line).replace("4242", r"\d+").replace(  # noqa: E731
        "20261205T101530Z", r"\d{8}T\d{6}Z").replace("30702", r"\d+").replace(r"10\.0\.12", r"[\d.]+")
    c.true("README step 6: the attach line as shown (%r)" % r.stderr,
           re.search(pat(shown[0]), r.stderr) is not None)
    c.true("README step 6: the summary as shown, last (%r)" % r.stdout,
           re.fullmatch(pat(shown[1]), r.stdout.rstrip("\n").splitlines()[-1]) is not None)
    files = livelib.window_files(os.path.join(rd, "profiles"))
    c.eq("README step 6: three windows", len(files), 3)
    frames = [f for p_ in files for f in json.load(open(p_))["shared"]["frames"]]
    c.true("README step 6: Fib named with Workers.cs and its line",
           any(f["name"] == "LiveApp!Live.App.Workers.Fib(int32)" and f.get("file", "").endswith("Workers.cs")
               and f.get("line") for f in frames))

sb.close()
c.done()
