"""The runtime dials pdbsym (issue 29): `pdbsym serve` with diagnostic_port,
and real .NET 10 processes started with DOTNET_DiagnosticPorts pointing at
it (dotnet/diagnostics' "connect" port: each runtime advertises itself and
takes one command per connection):

- two runtimes at once, one `suspend` (it waits at startup until pdbsym has
  its session running and resumes it: its Main is in its first window) and
  one `nosuspend`; each gets windows of its own, with names and lines;
- the suspended one restarted (a new instance cookie): a new series of
  windows, numbered from 1 again;
- the other killed with -9: its last window written, its state ended;
- hostile peers on the port (garbage, a 64 KiB "advertise", a silent one)
  are dropped without disturbing the sessions: windows keep coming, and a
  runtime dialing after them is profiled;
- `pdbsym profile --listen PATH` profiles the first runtime that dials it;
- the port's socket is created mode 0600.
"""
import glob
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import livelib  # noqa: E402
from clilib import Sandbox  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402

livelib.need_dotnet()
c = Checks()
sb = Sandbox("pdbsym-profile-port-")
appdir = livelib.build_app(sb.dir)
port = sb.path("diag.sock")
pdir = sb.path("profiles")


def start_app(args, mode):
    e = livelib.dotnet_env(sb.dir)
    e["DOTNET_DiagnosticPorts"] = port + ("," + mode if mode else "")
    p = subprocess.Popen([os.path.join(appdir, "LiveApp")] + list(args) + ["--light"], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    return p


def ready(p, timeout=30):
    line = p.stdout.readline()  # a 'suspend' runtime prints it only once resumed
    return int(line.split()[1]) if line.startswith("ready") else None


def windows_of(pid):
    out = {}
    for f in sorted(glob.glob(os.path.join(pdir, "pdbsym-%d-*.speedscope.json" % pid))):
        seq = int(f.rsplit("-", 1)[1].split(".")[0])
        out.setdefault(seq, []).append(f)
    return out


def wait_for(what, cond, timeout=40):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    c.true("%s (waited %d s)" % (what, timeout), False)
    return None


srv = Server(env={"PDBSYM_DIAGNOSTIC_PORT": port, "PDBSYM_PROFILE_WINDOW": "2s",
                  "PDBSYM_PROFILE_DIR": pdir, "PDBSYM_PROFILE_SCAN_INTERVAL": "1"})
apps = []
try:
    c.eq("the port is a socket of mode 0600", stat.S_IMODE(os.stat(port).st_mode), 0o600)
    sus = start_app(["60"], "suspend")
    nos = start_app(["60"], "nosuspend")
    apps += [sus, nos]
    pid_sus, pid_nos = ready(sus), ready(nos)
    c.true("both runtimes started (the suspended one resumed by pdbsym)", pid_sus and pid_nos)
    wait_for("windows of both", lambda: len(windows_of(pid_sus)) >= 2 and len(windows_of(pid_nos)) >= 2)
    for pid, what in ((pid_sus, "suspend"), (pid_nos, "nosuspend")):
        w = windows_of(pid)
        if not w:
            continue
        first = json.load(open(w[min(w)][0]))
        names = [f["name"] for f in first["shared"]["frames"]]
        c.true("%s: Main in its first window" % what,
               any(n.startswith("LiveApp!Live.App.Program.Main") for n in names))
        lines = [f for f in first["shared"]["frames"] if f["name"].startswith("LiveApp!") and f.get("line")]
        c.true("%s: the app's frames have files and lines" % what, len(lines) > 0)
    st, h, doc = srv.json("GET", "/profiles")
    byp = {p["pid"]: p for p in doc["processes"]}
    c.true("/profiles lists both, profiling (%r)" % sorted(byp),
           byp.get(pid_sus, {}).get("state") == "profiling" and byp.get(pid_nos, {}).get("state") == "profiling")

    # hostile peers: garbage, a 64 KiB header, silence
    peers = []
    for payload in (b"GARBAGE" * 10, b"\xff" * 65536, None):
        s = socket.socket(socket.AF_UNIX)
        s.connect(port)
        if payload:
            try:
                s.sendall(payload)
            except OSError:
                pass
        peers.append(s)
    before = {pid: len(windows_of(pid)) for pid in (pid_sus, pid_nos)}
    time.sleep(5)
    after = {pid: len(windows_of(pid)) for pid in (pid_sus, pid_nos)}
    c.true("hostile peers: the sessions went on (%r -> %r)" % (before, after),
           all(after[p] > before[p] for p in before))
    for s in peers:
        s.close()

    # the suspended one restarted: a new series
    sus.kill()
    sus.wait()
    wait_for("the first instance ended", lambda: any(
        p["pid"] == pid_sus and p["state"] == "ended" for p in srv.json("GET", "/profiles")[2]["processes"]))
    sus2 = start_app(["60"], "suspend")
    apps.append(sus2)
    pid_sus2 = ready(sus2)
    c.true("restarted: resumed again", pid_sus2 is not None)
    if pid_sus2:
        wait_for("restarted: windows", lambda: len(windows_of(pid_sus2)) >= 1)
        c.eq("restarted: a new series, numbered from 1", min(windows_of(pid_sus2) or {0: 0}), 1)
        st, h, doc = srv.json("GET", "/profiles")
        cookies = [p["runtime_cookie"] for p in doc["processes"] if p["pid"] in (pid_sus, pid_sus2)]
        c.true("restarted: two instances, two cookies (%r)" % cookies, len(set(cookies)) == 2)

    # the other killed with -9: its last window written
    n = len(windows_of(pid_nos))
    os.kill(pid_nos, signal.SIGKILL)
    nos.wait()
    ended = wait_for("killed: ended", lambda: [p for p in srv.json("GET", "/profiles")[2]["processes"]
                                               if p["pid"] == pid_nos and p["state"] == "ended"])
    if ended:
        c.true("killed: its last window written (%d -> %d)" % (n, ended[0]["windows"]),
               ended[0]["windows"] >= n and len(windows_of(pid_nos)) == ended[0]["windows"])
finally:
    for p in apps:
        if p.poll() is None:
            p.kill()
            p.wait()
    rc = srv.stop()
    c.eq("SIGTERM: exit status", rc, 0)
    srv.close()
c.true("the port's socket removed", not os.path.exists(port))

# pdbsym profile --listen: the first runtime that dials in
lport = sb.path("cli.sock")
out = sb.path("cli-out")
prof = sb.popen(["profile", "--listen", lport, "--window", "1s", "--duration", "20s", "--out", out],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
wait_for("the CLI listens", lambda: os.path.exists(lport), timeout=10)
e = livelib.dotnet_env(sb.dir)
e["DOTNET_DiagnosticPorts"] = lport
app = subprocess.Popen([os.path.join(appdir, "LiveApp"), "3", "--light"], env=e, stdout=subprocess.PIPE, text=True)
so, se = prof.communicate(timeout=120)
app.wait(timeout=30)
c.eq("--listen: exit status (%s)" % se.strip(), prof.returncode, 0)
c.true("--listen: it ended with the runtime (%r)" % so, "the runtime ended the session" in so)
files = sorted(glob.glob(os.path.join(out, "*.speedscope.json")))
c.true("--listen: windows (%d)" % len(files), len(files) >= 2)
if files:
    names = [f["name"] for f in json.load(open(files[0]))["shared"]["frames"]]
    c.true("--listen: Main in the first window", any(n.startswith("LiveApp!Live.App.Program.Main") for n in names))
c.true("--listen: the socket removed", not os.path.exists(lport))
sb.close()
c.done()
