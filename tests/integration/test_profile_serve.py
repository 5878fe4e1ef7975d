"""`pdbsym serve` profiling the .NET processes its settings name
(docs/contract.md, "Profiling running .NET processes"), against real .NET 10
processes (the app of tests/live, built with the real SDK):

- profile_pids: the process attached, windows written every profile_window
  into profile_dir, both formats; GET /profiles lists the process (pid,
  command, runtime version, state, windows, samples, dropped events) and the
  windows (names, times, counts, files), ?pid= filters; GET /profiles/latest
  sends the newest window's speedscope or pprof file, whose samples are
  named; 400 for a bad pid or format, 404 for a pid with no window; /metrics
  counts windows, samples and sessions;
- no request can start profiling: another .NET process, not named, is never
  attached whatever is asked (?pid=, POST, PUT);
- profile_command with max_profiled_processes = 1: one of two matching
  processes is profiled; when it exits (its last window written) the other
  takes the slot;
- SIGTERM: the sessions stopped, their last windows written, exit 0; a bad
  profile_pids or profile_window exits 2 naming the setting.
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import livelib  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402
from clilib import Sandbox  # noqa: E402

livelib.need_dotnet()
c = Checks()
sb = Sandbox("pdbsym-profile-serve-")
appdir = livelib.build_app(sb.dir)
apptmp = livelib.socket_dir(sb)


def wait_for(what, cond, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    c.true("%s (waited %d s)" % (what, timeout), False)
    return None


# ---- profile_pids --------------------------------------------------------------
named = livelib.App(appdir, [], tmpdir=apptmp)
other = livelib.App(appdir, [], tmpdir=apptmp)
pdir = sb.path("profiles")
srv = Server(env={"PDBSYM_PROFILE_PIDS": str(named.pid), "PDBSYM_PROFILE_WINDOW": "2s",
                  "PDBSYM_PROFILE_DIR": pdir, "PDBSYM_PROFILE_SCAN_INTERVAL": "1"})
doc = wait_for("three windows listed and counted",
               lambda: (lambda d: d if len(d["windows"]) >= 3 and d.get("processes")
                        and d["processes"][0].get("windows", 0) >= 3 else None)(
                   srv.json("GET", "/profiles")[2]))
st, h, doc = srv.json("GET", "/profiles")
c.eq("/profiles: status", st, 200)
c.eq("/profiles: the folder", doc.get("dir"), pdir)
procs = doc.get("processes", [])
c.eq("/profiles: one process, the named one", [p["pid"] for p in procs], [named.pid])
p = procs[0] if procs else {}
c.eq("/profiles: its command", p.get("command"), "LiveApp")
c.eq("/profiles: its runtime", p.get("runtime_version"), "10.0.12")
c.eq("/profiles: its state", p.get("state"), "profiling")
c.true("/profiles: its counts (%r)" % p, p.get("windows", 0) >= 3 and p.get("samples", 0) > 0
       and "dropped_events" in p and p.get("methods", 0) > 0 and p.get("code_bytes", 0) > 0)
wins = doc["windows"]
c.true("/profiles: windows newest first", [w["seq"] for w in wins] == sorted((w["seq"] for w in wins), reverse=True))
w0 = wins[0]
c.true("/profiles: a window's fields (%r)" % w0,
       w0["pid"] == named.pid and w0["files"].get("speedscope", "").endswith(".speedscope.json")
       and w0["files"].get("pprof", "").endswith(".pb.gz") and "start" in w0 and "end" in w0
       and w0.get("samples", 0) > 0 and "dropped_events" in w0)
c.true("/profiles: its files are in the folder",
       all(os.path.exists(os.path.join(pdir, f)) for f in w0["files"].values()))
st, h, body = srv.request("GET", "/profiles/latest?pid=%d" % named.pid)
c.eq("/profiles/latest: status", st, 200)
c.eq("/profiles/latest: JSON", h.get("content-type"), "application/json")
ss = json.loads(body)
names = [f["name"] for f in ss["shared"]["frames"]]
c.true("/profiles/latest: the app's frames named", any("Live.App.Workers.Fib" in n for n in names))
c.true("/profiles/latest: as newest as /profiles said",
       ss["name"].startswith(w0["name"]) or int(ss["name"].split("-")[3].split()[0]) >= w0["seq"])
st, h, body = srv.request("GET", "/profiles/latest?pid=%d&format=pprof" % named.pid)
c.eq("/profiles/latest?format=pprof: status", st, 200)
c.true("/profiles/latest?format=pprof: gzip", body[:2] == b"\x1f\x8b")
for q, want in (("?pid=abc", 400), ("?pid=%d&format=svg" % named.pid, 400), ("", 400),
                ("?pid=%d" % other.pid, 404)):
    st, h, body = srv.request("GET", "/profiles/latest" + q)
    c.eq("/profiles/latest%s: status" % q, st, want)
    c.true("/profiles/latest%s: JSON error" % q, "error" in json.loads(body))
st, h, doc = srv.json("GET", "/profiles?pid=%d" % other.pid)
c.eq("/profiles?pid=OTHER: nothing", (st, doc["processes"], doc["windows"]), (200, [], []))
for m in ("POST", "PUT", "DELETE"):
    st, h, body = srv.request(m, "/profiles?pid=%d" % other.pid, body=b"{}")
    c.eq("%s /profiles: refused" % m, st, 405)
time.sleep(2.5)
st, h, doc = srv.json("GET", "/profiles")
c.eq("no request attached the other process", sorted(x["pid"] for x in doc["processes"]), [named.pid])
c.true("its folder has no window of the other", not any(w["pid"] == other.pid for w in doc["windows"]))
st, h, body = srv.request("GET", "/metrics")
metrics = dict(l.rsplit(" ", 1) for l in body.decode().splitlines() if l.startswith("pdbsym_profile_"))
c.eq("/metrics: sessions", metrics.get("pdbsym_profile_sessions"), "1")
c.true("/metrics: windows and samples (%r)" % metrics,
       int(metrics.get("pdbsym_profile_windows_total", 0)) >= 3
       and int(metrics.get("pdbsym_profile_samples_total", 0)) > 0)
before = len(os.listdir(pdir))
rc = srv.stop()
c.eq("SIGTERM: exit status", rc, 0)
c.true("SIGTERM: the last window written", len(os.listdir(pdir)) >= before + 2)
logs = [r for r in srv.logs() if r.get("msg") == "profile ended"]
c.eq("SIGTERM: the session ended as stopped", [r.get("detail") for r in logs], ["stopped"])
srv.close()
c.true("the profiled app runs on", named.alive())
named.stop()
other.stop()

# ---- profile_command, one slot ----------------------------------------------------
# the app under a command name of this run's own: the other live tests'
# LiveApps, running beside this one, must not match the pattern (the apphost
# runs LiveApp.dll whatever its own name)
exe = "LvSrv%05d" % (os.getpid() % 100000)
shutil.copy2(os.path.join(appdir, "LiveApp"), os.path.join(appdir, exe))
short = livelib.App(appdir, ["15"], tmpdir=apptmp, exe=exe)  # alive still if the long one took the slot first
long_ = livelib.App(appdir, ["60"], tmpdir=apptmp, exe=exe)
pdir = sb.path("by-command")
srv = Server(env={"PDBSYM_PROFILE_COMMAND": exe + "*", "PDBSYM_MAX_PROFILED_PROCESSES": "1",
                  "PDBSYM_PROFILE_WINDOW": "1s", "PDBSYM_PROFILE_DIR": pdir,
                  "PDBSYM_PROFILE_SCAN_INTERVAL": "1"})
first = wait_for("one of the two attached",
                 lambda: [x for x in srv.json("GET", "/profiles")[2]["processes"] if x["state"] == "profiling"])
if first:
    c.eq("one slot: one process profiled", len(first), 1)
    gone = first[0]["pid"]
    rest = long_.pid if gone == short.pid else short.pid
    if gone == long_.pid:  # the long one took the slot: free it
        long_.stop()
    both = wait_for("the other takes the slot when the first ends",
                    lambda: (lambda d: d if any(x["pid"] == rest and x["state"] == "profiling"
                                                for x in d["processes"]) else None)(
                        srv.json("GET", "/profiles")[2]), timeout=40)
    if both:
        ended = [x for x in both["processes"] if x["pid"] == gone]
        c.true("the first is listed as ended (%r)" % ended,
               ended and ended[0]["state"] == "ended" and ended[0]["windows"] >= 1)
srv.close()
short.stop()
long_.stop()
os.remove(os.path.join(appdir, exe))

# ---- bad settings ---------------------------------------------------------------
for env, setting in (({"PDBSYM_PROFILE_PIDS": "12,abc"}, "profile_pids"),
                     ({"PDBSYM_PROFILE_WINDOW": "0s"}, "profile_window"),
                     ({"PDBSYM_PROFILE_FORMAT": "svg"}, "profile_format")):
    e = dict(sb.env, PDBSYM_LISTEN="127.0.0.1:0", **env)
    r = subprocess.run([os.environ["PDBSYM_BIN"], "serve"], env=e, capture_output=True, text=True,
                       timeout=30, cwd=sb.dir)
    c.eq("%s: exit status" % setting, r.returncode, 2)
    c.true("%s: named (%r)" % (setting, r.stderr), setting in r.stderr)

sb.close()
c.done()
