"""Scale-out as docs/scaling.md describes it, on 127.0.0.1: the test symbol
server (tests/symserver.py, which counts requests per path) as the upstream,
nginx as the shared caching proxy with a configuration made from
docker/nginx.conf (the same directives; only the paths, ports and upstream
are replaced), and two `pdbsym serve` replicas, each with its own cache
folder, whose symbol path is the proxy.

Two native fixture modules: one the upstream serves directly, one it
redirects to another path (as Microsoft's server redirects to its CDN, which
docker/nginx.conf follows inside the proxy). Both replicas are asked for the
same frames at the same time, then again. Checked: the upstream served each
PDB exactly once, both replicas answer identically, and the answers equal
llvm-symbolizer's (tests/fixtures/native/*.expected.tsv). Then a third,
cold replica against the warm proxy: the upstream is not asked again.
Timings (cold replica and cold proxy, cold replica and warm proxy, warm
replica) are printed for docs/scaling.md."""
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from pdbsym_server import Checks, Server, need_binary, free_port  # noqa: E402
from native_oracle import answer_ok, oracle_view, rows, sym_view  # noqa: E402,F401

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
symserver = os.path.join(root, "tests", "symserver.py")
nginx_conf = os.path.join(root, "docker", "nginx.conf")
FIXTURES = ("cpp-x64-O2", "c-x64-O2")  # the second one is served through a redirect

need_binary()
nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
if not nginx:
    harness.skip("nginx not installed (scripts/deps.sh --test installs it)")
for p in (os.path.join(native_dir, "MANIFEST.tsv"), symserver, nginx_conf):
    if not os.path.exists(p):
        harness.skip("%s absent" % p)


def wait_port(port, proc, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited %d" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not listen on %d" % (what, port))










tmp = tempfile.mkdtemp(prefix="pdbsym-scaleout-")
os.chmod(tmp, 0o755)  # nginx workers run as nobody when the test runs as root
store = os.path.join(tmp, "store")

# ---- the fixtures in symstore layout, frames and llvm-symbolizer's answers
header = None
modules, frames, expect, pdb_paths = [], [], [], []
for line in open(os.path.join(native_dir, "MANIFEST.tsv")):
    if line.startswith("# name"):
        header = line[2:].rstrip("\n").split("\t")
    if line.startswith("#") or not line.strip():
        continue
    col = dict(zip(header, line.rstrip("\n").split("\t")))
    if col["name"] not in FIXTURES:
        continue
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    rel = "%s/%s/%s" % (debug_file, col["symkey"], debug_file)
    redirected = col["name"] == FIXTURES[1]
    dest = os.path.join(store, "cdn", rel) if redirected else os.path.join(store, rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "wb") as f:
        f.write(gzip.open(os.path.join(native_dir, col["pdb"])).read())
    pdb_paths.append(("/cdn/" + rel if redirected else "/" + rel, "/" + rel if redirected else None))
    mi = len(modules)
    modules.append({"debug_file": col["cv_path"], "debug_id": col["symkey"], "format": "windows"})
    alt = rows(native_dir, col["crosscheck"]) if col.get("crosscheck") else []
    for lo, hi, ans, _ in rows(native_dir, col["expected"]):
        for rva in sorted({lo, (lo + hi - 1) // 2}):
            frames.append({"module": mi, "rva": "0x%x" % rva})
            expect.append((col["name"], rva, ans, next(((a, n) for l2, h2, a, n in alt if l2 <= rva < h2), None)))
# and a module no server has: its probes' 404s are cached too
modules.append({"debug_file": "nowhere.pdb", "debug_id": "00112233445566778899AABBCCDDEEFF1", "format": "windows"})
frames.append({"module": len(modules) - 1, "rva": "0x1000"})
if len(modules) != len(FIXTURES) + 1:
    harness.skip("fixtures %s not all in the manifest" % (FIXTURES,))

c = Checks()
procs = []
replicas = []


def stop_all():
    for r in replicas:
        try:
            r.close()
        except Exception as e:  # keep stopping the others
            print("replica close: %s" % e)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


try:
    # ---- upstream
    ss = subprocess.Popen([sys.executable, symserver, store, "--exit-with-parent"], stdout=subprocess.PIPE, text=True)
    procs.append(ss)
    ss_port = int(ss.stdout.readline().split()[1])
    ss_url = "http://127.0.0.1:%d" % ss_port
    rule = {frm: {"redirect": ss_url + to} for to, frm in pdb_paths if frm}
    urllib.request.urlopen(urllib.request.Request(ss_url + "/_control", data=json.dumps(rule).encode(),
                                                  method="POST")).read()

    # ---- two replicas, each with its own cache folder, behind the proxy
    nx_port = free_port()
    # the balancer sends "Host: pdbsym", its upstream's name (docs/scaling.md)
    env = {"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % nx_port, "PDBSYM_OFFLINE": "false",
           "PDBSYM_ALLOWED_HOSTS": "pdbsym"}
    for _ in range(2):
        replicas.append(Server(env=env))
    c.true("replicas have their own cache folders", replicas[0].tmp != replicas[1].tmp)

    # ---- nginx, configured from docker/nginx.conf, plus the balancer of docs/scaling.md
    lb_port = free_port()
    doc = open(os.path.join(root, "docs", "scaling.md")).read()
    lb = doc.split("```nginx\n", 1)[1].split("```", 1)[0]
    lb_servers = re.findall(r"^ *server pdbsym-\d+:8765;\n", lb, re.M)
    if len(lb_servers) < 2 or lb.count("listen 8765;") != 1:
        raise RuntimeError("docs/scaling.md: the balancer example changed: update this test")
    lb = lb.replace(lb_servers[0], "".join("    server 127.0.0.1:%d;\n" % r.port for r in replicas))
    for x in lb_servers[1:]:
        lb = lb.replace(x, "")
    lb = lb.replace("listen 8765;", "listen 127.0.0.1:%d;" % lb_port)
    conf = open(nginx_conf).read()

    def sub(old, new, count=1):
        global conf
        n = conf.count(old)
        if n != count:
            raise RuntimeError("docker/nginx.conf: expected %d '%s', found %d: update this test" % (count, old, n))
        conf = conf.replace(old, new)

    sub("/var/cache/nginx/symbols", os.path.join(tmp, "nginx-cache"))
    sub("listen @PORT@;", "listen 127.0.0.1:%d;" % nx_port)
    sub("@UPSTREAM@", ss_url)
    sub("@RESOLVER@", "127.0.0.1")
    sub("user www-data;\n", "")
    sub("error_log stderr;\n", "")
    sub("access_log off;\n", "")
    sub("http {", "http {\n  access_log %s/access.log;\n" % tmp + lb +
        "".join("  %s_temp_path %s/%s-temp;\n" % (k, tmp, k)
                for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")))
    conf = "pid %s/nginx.pid;\nerror_log %s/error.log;\n%s" % (tmp, tmp, conf)
    conf_path = os.path.join(tmp, "nginx.conf")
    with open(conf_path, "w") as f:
        f.write(conf)
    t = subprocess.run([nginx, "-t", "-p", tmp, "-c", conf_path], capture_output=True, text=True)
    c.eq("nginx -t on the configuration made from docker/nginx.conf", t.returncode, 0)
    if t.returncode != 0:
        print(t.stderr)
        raise SystemExit(1)
    nx = subprocess.Popen([nginx, "-p", tmp, "-c", conf_path, "-g", "daemon off;"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(nx)
    wait_port(nx_port, nx, "nginx")

    wait_port(lb_port, nx, "nginx (balancer)")

    body = {"modules": modules, "frames": frames, "timeout": 60}

    def ask(srv, out, i, barrier=None):
        if barrier:
            barrier.wait()
        t0 = time.monotonic()
        out[i] = srv.json("POST", "/symbolicate", body, timeout=120) + (time.monotonic() - t0,)

    def both():
        out = [None, None]
        barrier = threading.Barrier(2)
        ts = [threading.Thread(target=ask, args=(replicas[i], out, i, barrier)) for i in range(2)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return out

    def hits():
        return json.load(urllib.request.urlopen(ss_url + "/_stats"))["hits"]

    def check_answers(what, ans):
        st, _, j, _ = ans
        c.eq(what + ": status", st, 200)
        bad = 0
        c.eq(what + ": the missing module", j.get("frames", [{}])[-1].get("status"), "missing_symbols")
        for (name, rva, want, alt), got in zip(expect, j.get("frames", [])):
            if not (got.get("status") == "ok" and answer_ok(sym_view(got["symbols"]), want, alt)):
                bad += 1
                if bad <= 3:
                    print("  %s %s 0x%x: got %s\n    want %s (or %s)" % (what, name, rva, json.dumps(got),
                                                                        json.dumps(want), json.dumps(alt)))
        c.eq(what + ": frames not matching llvm-symbolizer (of %d)" % len(expect), bad, 0)
        c.eq(what + ": frame count", len(j.get("frames", [])), len(expect) + 1)

    first = both()
    for i in range(2):
        check_answers("replica %d, first (concurrent) request" % (i + 1), first[i])
        c.true("replica %d fetched both modules from the proxy" % (i + 1),
               all(m.get("status") == "found" and (m.get("source") or "").startswith("http://127.0.0.1:%d/" % nx_port)
                   for m in first[i][2].get("modules", [])[:-1]), first[i][2].get("modules"))
    c.true("both replicas answer identically", first[0][2]["frames"] == first[1][2]["frames"])
    h = hits()
    for served, redirected in pdb_paths:
        c.eq("upstream served %s" % served, h.get(served, 0), 1)
    c.true("every upstream path asked once (the missing module's 404s too)",
           all(v == 1 for v in h.values()) and sum(1 for k in h if "nowhere" in k) >= 4, h)
    print("upstream hits after the first round: %s" % json.dumps(h, sort_keys=True))

    second = both()
    for i in range(2):
        c.true("replica %d, second request from its cache" % (i + 1),
               all(m.get("from_cache") for m in second[i][2].get("modules", [])), second[i][2].get("modules"))
        c.true("replica %d, second request answers the same" % (i + 1), second[i][2]["frames"] == first[i][2]["frames"])

    # pinning through the balancer: one X-Pdbsym-Shard value, one replica
    def served_by(total=None):
        # a replica logs its request line just after the answer has left: wait for it
        deadline = time.time() + 10
        while True:
            n = [sum(1 for r in rep.logs() if r.get("msg") == "request" and r.get("path") == "/symbolicate")
                 for rep in replicas[:2]]
            if total is None or sum(n) >= total or time.time() > deadline:
                return n
            time.sleep(0.01)

    small = {"modules": modules[:1], "frames": frames[:1]}
    places = {}
    before = served_by(4)  # the two rounds above: two requests each
    for k in range(16):
        shard = "%s/%s-%d" % (modules[0]["debug_file"], modules[0]["debug_id"], k)
        for _ in range(3):
            req = urllib.request.Request("http://127.0.0.1:%d/symbolicate" % lb_port, data=json.dumps(small).encode(),
                                         headers={"Content-Type": "application/json", "X-Pdbsym-Shard": shard})
            ans = json.load(urllib.request.urlopen(req, timeout=60))
            after = served_by(sum(before) + 1)
            c.eq("balancer answer", ans["frames"], first[0][2]["frames"][:1])
            places.setdefault(shard, set()).update(i for i in range(2) if after[i] > before[i])
            before = after
    c.true("each shard key always lands on one replica", all(len(v) == 1 for v in places.values()), places)
    c.eq("the shard keys spread over both replicas", set().union(*places.values()), {0, 1})
    for _ in range(8):
        req = urllib.request.Request("http://127.0.0.1:%d/symbolicate" % lb_port, data=json.dumps(small).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=60).read()
    after = served_by(sum(before) + 8)
    print("8 requests without X-Pdbsym-Shard went to the replicas: %s" % [a - b for a, b in zip(after, before)])

    # a third replica starting cold behind the warm proxy
    replicas.append(Server(env=env))
    third = [None]
    ask(replicas[2], third, 0)
    check_answers("replica 3 (cold, warm proxy)", third[0])
    c.true("replica 3 answers as the others", third[0][2]["frames"] == first[0][2]["frames"])
    h2 = hits()
    for served, redirected in pdb_paths:
        c.eq("upstream served %s after a third replica" % served, h2.get(served, 0), 1)
    c.eq("upstream requests after a third replica", sum(h2.values()), sum(h.values()))

    print("timings for %d frames of %d modules (%s):" % (len(frames), len(modules), ", ".join(FIXTURES)))
    print("  cold replicas, cold proxy (concurrent): %.3f s, %.3f s" % (first[0][3], first[1][3]))
    print("  cold replica, warm proxy:               %.3f s" % third[0][3])
    print("  warm replicas:                          %.3f s, %.3f s" % (second[0][3], second[1][3]))
    for i, r in enumerate(replicas):
        c.eq("replica %d exits 0 after SIGTERM" % (i + 1), r.stop(), 0)
    nx.send_signal(signal.SIGQUIT)  # graceful
    try:
        nx.wait(10)
    except subprocess.TimeoutExpired:
        pass
    err = nx.stderr.read().decode(errors="replace") if nx.poll() is not None else ""
    errlog = open(os.path.join(tmp, "error.log")).read() if os.path.exists(os.path.join(tmp, "error.log")) else ""
    c.true("nginx logged no error", "[error]" not in errlog + err and "[crit]" not in errlog + err,
           (errlog + err)[-2000:])
finally:
    stop_all()
    if os.environ.get("PDBSYM_KEEP_TMP"):
        print("kept %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
c.done()
