"""docker/compose.yaml, run as a user runs it on these machines (issue 29):
every image built here (docker/build.sh for pdbsym, docker/compose-run.py
build for the sample app and the tools image, the app published
self-contained by docker/sample-app/publish.sh), then `docker/compose-run.py
up` (Debian's podman-compose 1.0.3 cannot run the file: see that script's
head). The symbol proxy's upstream is a server of this test's own that
records what it is asked and has nothing (SYMBOLS_UPSTREAM); the ports are
free ones of this run (PDBSYM_PORT, PYROSCOPE_PORT, SYMBOLS_PROXY_PORT) and
the profile window 5 s (PROFILE_WINDOW).

Checked:
- the sample app's runtime dials pdbsym's diagnostic port in the shared
  volume, and its windows reach the Pyroscope stand-in as pprof, named
  sample-shop{pid=..,process=SampleApp,runtime=10.0..,env=compose};
- each pushed profile, read by Go's `go tool pprof -raw`, has samples and
  the app's own methods (SampleApp!Shop.Program.Main, PriceOrders; and
  Shop.PriceCalculator.Total in one window at least, as the JIT may inline
  it once hot), every one with the file its PDB names (/_/Program.cs) and a
  line inside that method's body in docker/sample-app/Program.cs (the
  source, read here: not pdbsym's word);
- the app is published ReadyToRun: its precompiled methods (Main and
  PriceOrders, called once, are never compiled again) get their lines
  through the maps of its image, which pdbsym reads at the path the runtime
  names, in the /app volume both mount;
- pdbsym's GET /profiles lists the app, profiled;
- the profiler stand-in's batches are answered 200, and the warm job and the
  service asked the upstream through the nginx proxy;
- `down` leaves no container and no volume of the project; the images this
  run made (but the tools image, kept as a cache in the state folder, as
  docker/build.sh keeps its build stage) are removed, and no mount is left.

Opt-in as test_docker.py (PDBSYM_TEST_CONTAINER=1, or CI=true; root; the
state folder of containerlib.py); needs `dotnet` (the app is published on the
host), Go (golang-go) and python3-yaml (scripts/deps.sh --test). Times are
printed."""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import containerlib  # noqa: E402
import harness  # noqa: E402
import livelib  # noqa: E402
from clilib import Sandbox  # noqa: E402
from pdbsym_server import Checks  # noqa: E402
from pproflib import GO, go_raw, norm, parse_raw  # noqa: E402

root = os.path.abspath(os.environ.get("PDBSYM_SOURCE_DIR") or
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
docker = os.path.join(root, "docker")

containerlib.require(root, "the compose test")
livelib.need_dotnet()
if not os.path.exists(GO):
    harness.skip("go (Debian package golang-go) is not installed: no independent pprof reader")
# Debian's python3, where python3-yaml installs (PATH may name another)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
if subprocess.run([PY, "-c", "import yaml"], capture_output=True).returncode != 0:
    harness.skip("%s cannot import yaml: python3-yaml is not installed (scripts/deps.sh --test)" % PY)

c = Checks()
state = containerlib.state_folder(root)
project = "pdbsymtest%d" % os.getpid()
sb = Sandbox("pdbsym-compose-")

# ---- the upstream symbol server: records what it is asked, has nothing ----------------
asked = []


class Upstream(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        asked.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


up_srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
threading.Thread(target=up_srv.serve_forever, daemon=True).start()
ports = {"PDBSYM_PORT": containerlib.free_port(), "PYROSCOPE_PORT": containerlib.free_port(),
         "SYMBOLS_PROXY_PORT": containerlib.free_port()}
env = dict(os.environ, CONTAINER_STATE=state, PROFILE_WINDOW="5s", SYMBOLS_UPSTREAM="http://127.0.0.1:%d" % up_srv.server_address[1],
           **{k: str(v) for k, v in ports.items()})


def compose(*args, timeout=600):
    t0 = time.monotonic()
    r = subprocess.run([PY, os.path.join(docker, "compose-run.py"), "-p", project] + list(args),
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    print("compose-run %s: exit %d, %.1f s" % (" ".join(args), r.returncode, time.monotonic() - t0))
    return r


def get(port, path, timeout=10):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.read()


def method_lines(source):
    """The lines of each method of the sample's source: its declaration to its
    closing brace (by the indentation the file keeps); a type's static
    constructor ("cctor") is its static field initializers."""
    lines = open(source).read().splitlines()
    out = {}
    for i, ln in enumerate(lines):
        if re.match(r"^\s+static readonly .* = ", ln):
            out.setdefault("cctor", set()).add(i + 1)
        m = re.match(r"^(\s+)(?:public |private )?static \S+ (\w+)\(", ln)
        if not m:
            continue
        indent = m.group(1)
        for j in range(i + 1, len(lines)):
            if lines[j] == indent + "}":
                out[m.group(2)] = set(range(i + 1, j + 2))
                break
    return out


made_images = []
started = False
podman = None
try:
    # ---- the images --------------------------------------------------------------------
    t0 = time.monotonic()
    build_s = containerlib.build_pdbsym(root, state, "localhost/pdbsym:latest")
    made_images.append("localhost/pdbsym:latest")
    podman = containerlib.Podman(state)  # the state folder's configuration, which the build wrote
    ctx = sb.path("app-context")
    os.makedirs(ctx)
    shutil.copy(os.path.join(docker, "sample-app", "Dockerfile"), ctx)
    p = subprocess.run(["bash", os.path.join(docker, "sample-app", "publish.sh"), os.path.join(ctx, "out")],
                       env=livelib.dotnet_env(sb.dir), capture_output=True, text=True, timeout=900)
    c.true("docker/sample-app/publish.sh", p.returncode == 0, (p.stdout + p.stderr)[-2000:])
    if p.returncode != 0:
        raise SystemExit(1)
    c.true("the app is published with its PDB", os.path.exists(os.path.join(ctx, "out", "SampleApp.pdb")))
    r = compose("build", "app", "pyroscope", "--context", "app=" + ctx, timeout=1800)
    made_images.append("localhost/pdbsym-sample-app:latest")
    c.true("compose-run build: the app and the tools images", r.returncode == 0, r.stdout[-2000:])
    if r.returncode != 0:
        raise SystemExit(1)
    print("images: %.1f s (pdbsym %.1f s)" % (time.monotonic() - t0, build_s))

    # ---- up ------------------------------------------------------------------------------
    started = True
    r = compose("up", "--timeout", "180")
    c.true("compose-run up", r.returncode == 0, r.stdout[-3000:])
    print(r.stdout.rstrip())
    t_up = time.monotonic()

    posts = []
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        try:
            posts = [q for q in json.loads(get(ports["PYROSCOPE_PORT"], "/ingested"))
                     if q["name"].startswith("sample-shop{")]
        except (OSError, ValueError):
            posts = []
        if len(posts) >= 2:
            break
        time.sleep(1)
    print("windows pushed to the pyroscope stand-in: %d, the second %.1f s after up" % (
        len(posts), time.monotonic() - t_up))
    c.true("two of the app's windows reach the pyroscope stand-in", len(posts) >= 2, posts)

    src = os.path.join(docker, "sample-app", "Program.cs")
    body = method_lines(src)
    c.true("the source's methods found", {"Total", "UnitPrice", "PriceOrders", "Main", "cctor"} <= set(body), body)
    seen_names = set()
    for i, q in enumerate(posts[:2]):
        name = q["name"]
        c.true("push %d: named by the service, the process, the runtime and the labels" % i,
               re.match(r"^sample-shop\{pid=\d+,process=SampleApp,runtime=10\.\d+\.\d+[^,]*,env=compose\}$", name),
               name)
        c.eq("push %d: format" % i, q["format"], "pprof")
        c.true("push %d: from < until" % i, int(q["from"]) < int(q["until"]), (q["from"], q["until"]))
        prof = get(ports["PYROSCOPE_PORT"], "/ingested/%d/profile" % q["seq"])
        rc, out, err = go_raw(prof, sb.path("push%d.pb.gz" % i), sb.dir)
        c.true("push %d: go tool pprof -raw reads it" % i, rc == 0, err[-500:])
        samples, locs = parse_raw(out)
        c.true("push %d: samples" % i, len(samples) > 0, len(samples))
        frames = [f for loc in locs.values() for f in loc]
        # pdbsym names a frame MODULE!Namespace.Type.Method
        mine = [(norm(f[0]).split("!", 1)[1], f[1], f[2]) for f in frames
                if norm(f[0]).startswith("SampleApp!")]
        names = set(n for n, _, _ in mine)
        seen_names |= names
        c.true("push %d: the app's methods named (%s)" % (i, sorted(names)),
               {"Shop.Program.Main", "Shop.Program.PriceOrders"} <= names,
               sorted(set(norm(f[0]) for f in frames))[:40])
        wrong = []
        for n, f, line in mine:
            meth = n.rsplit(".", 1)[1]
            if f != "/_/Program.cs" or line not in body.get(meth, ()):
                wrong.append((n, f, line))
        c.eq("push %d: every frame of the app at a line of its method in Program.cs (of %d)" % (i, len(mine)),
             wrong, [])
        print("push %d: %d samples, %d frames of the app: %s" % (
            i, len(samples), len(mine), sorted(set(mine))[:12]))


    # the calculator runs most of the time, but the JIT may inline it into
    # its caller once hot (no frame of its own then): in one window at least
    c.true("Shop.PriceCalculator.Total in a pushed window", "Shop.PriceCalculator.Total" in seen_names,
           sorted(seen_names))
    st = json.loads(get(ports["PDBSYM_PORT"], "/profiles"))
    procs = [p for p in st.get("processes", []) if p.get("command") == "SampleApp"]
    c.true("GET /profiles lists the app, profiled", procs and procs[0].get("state") == "profiling",
           st.get("processes"))

    logs = podman("logs", project + "-profiler", check=False)
    answered = [ln for ln in (logs.stdout + logs.stderr).splitlines() if ln.startswith("200 ")]
    c.true("the profiler stand-in's batch is answered 200", answered, (logs.stdout + logs.stderr)[-500:])
    c.true("the upstream was asked through the proxy (%d requests)" % len(asked),
           any("ntdll.pdb" in a.lower() for a in asked), asked[:5])
finally:
    if started:
        if c.failed:
            print(compose("logs").stdout[-6000:])
        r = compose("down")
        c.true("compose-run down", r.returncode == 0, r.stdout[-1000:])
        left = podman("ps", "-a", "-q", "--filter", "label=pdbsym.compose.project=" + project, check=False)
        c.eq("no container of the project left", left.stdout.split(), [])
        vols = podman("volume", "ls", "-q", check=False).stdout.split()
        c.eq("no volume of the project left", [v for v in vols if v.startswith(project + "_")], [])
    for img in made_images if podman else []:
        podman("rmi", img, check=False)
    if podman:
        podman("image", "prune", "-f", check=False)
    up_srv.shutdown()
    sb.close()
    left = containerlib.unmount_all(state)
    c.eq("mounts left under the state folder %s" % state, left, [])
c.done()
