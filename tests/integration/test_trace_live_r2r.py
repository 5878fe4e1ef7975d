"""A trace recorded here and now with the real .NET runtime (dotnet on PATH,
NuGet reachable; skipped through the harness otherwise): the profile
fixture's app (tests/fixtures/nettrace/profile-src) published ReadyToRun into
this test's folder, run under DOTNET_EnableEventPipe (the sampler, the Jit,
Loader and IL-map keywords, the rundown), then `pdbsym trace` with no
--pdb-dir at all: the images and PDBs are found at the paths the trace's
ModuleLoad events name, as on the machine that recorded it.

- the library's precompiled frames get lines from the ReadyToRun image at
  that path: the answer is the one `pdbsym trace --pdb-dir APPDIR` gives
  (the frames' lines against the runtime's own StackFrame are
  test_trace_profile's, on the committed fixture and TraceEvent's reading);
- the app's JIT-compiled frames get lines from App.pdb beside App.dll;
- the running/waiting counts add up to the samples, with both kinds present;
- probing the framework's assemblies at those paths for a PDB prints nothing.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
import livelib  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402
from tracelib import FIX  # noqa: E402

clilib.need_binary()
if not shutil.which("dotnet"):
    harness.skip("dotnet is not on PATH (this test records a trace with the real runtime)")

c = Checks()
sb = Sandbox("pdbsym-trace-live-")
# the SDK's and the app's temporary files (NuGet's scratch folder, the
# diagnostic socket) in the sandbox, which goes at the end
env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1", TMPDIR=sb.dir)


def publish(dst):
    src = sb.path("src")
    shutil.copytree(os.path.join(FIX, "profile-src"), src)
    p = subprocess.run(["dotnet", "publish", os.path.join(src, "App"), "-c", "Release", "-r", "linux-x64",
                        "--self-contained", "-p:PublishReadyToRun=true", "-o", dst, "-nologo", "-v", "q",
                        "--disable-build-servers"],
                       env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-2000:])
        harness.skip("dotnet publish failed (NuGet unreachable?): the runtime pack and crossgen2 come from NuGet")


# published once for the run's tests (both builds': livelib.fixture_cache)
app = livelib.cached("r2r-app", os.path.join(FIX, "profile-src"), sb.dir, publish)

trace_path = sb.path("live.nettrace")
run_env = dict(env, DOTNET_EnableEventPipe="1", DOTNET_EventPipeOutputPath=trace_path,
               DOTNET_EventPipeConfig="Microsoft-DotNETCore-SampleProfiler:0:5,Microsoft-Windows-DotNETRuntime:0x20018:5",
               DOTNET_TC_CallCountingDelayMs="0")
p = subprocess.run([os.path.join(app, "App"), "60", sb.path("frames.jsonl")], cwd=sb.dir, env=run_env,
                   capture_output=True, text=True, timeout=300)
c.eq("the app ran (%s)" % p.stderr.strip()[-300:], p.returncode, 0)
c.true("a trace was written", os.path.exists(trace_path))

out, st = sb.path("live.json"), sb.path("live.stats")
rc, so, se = sb.run(["trace", "--offline", trace_path, "-o", out, "--stats", st], timeout=600)
c.eq("pdbsym trace, no --pdb-dir: exit status (%s)" % se.strip(), rc, 0)
# the framework's assemblies at the trace's paths have no PDB inside: probing
# them is silent (it printed a "cannot read" line per module)
c.true("no 'cannot read' line for the framework's assemblies", "cannot read" not in se, se[:500])
if rc == 0:
    doc = json.load(open(out))
    stats = json.load(open(st))
    frames = doc["shared"]["frames"]
    lib = [f for f in frames if f["name"].startswith("ProfLib!")]
    appf = [f for f in frames if f["name"].startswith("App!")]
    c.true("precompiled library frames, all with lines (the image at the trace's path)",
           lib and all("line" in f for f in lib), [f for f in lib if "line" not in f][:3])
    c.true("app frames with lines (App.pdb beside App.dll)", sum("line" in f for f in appf) >= 5,
           str(len(appf)))
    c.true("the image was read", stats["r2r_images"] >= 1 and stats["r2r_methods"] >= 5, str(stats))
    c.eq("running + waiting + other = samples",
         stats["samples_running"] + stats["samples_waiting"] + stats["samples_other"], stats["samples"])
    c.true("both states seen", stats["samples_running"] > 0 and stats["samples_waiting"] > 0, str(stats))
    # the same answer as with the app's folder named: the images and PDBs
    # found at the trace's paths are the ones --pdb-dir finds by name
    rc, so, se = sb.run(["trace", "--offline", "--pdb-dir", app, trace_path, "-o", sb.path("dir.json")],
                        timeout=600)
    c.eq("pdbsym trace --pdb-dir APP: exit status (%s)" % se.strip(), rc, 0)
    if rc == 0:
        c.eq("the same answer as from the trace's paths", json.load(open(sb.path("dir.json"))), doc)
    marked = sum(1 for f in lib if f.get("line_approx"))
    print("  %d library frames (%d marked approximate), %d app frames, %d running / %d waiting samples"
          % (len(lib), marked, len(appf), stats["samples_running"], stats["samples_waiting"]))
sb.close()
c.done()
