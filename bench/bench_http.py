#!/usr/bin/env python3
"""bench_http.py - what `pdbsym serve` costs per answered frame, and how long
the first request waits after a restart or for a download (issue 15).

Rows (each printed as it is measured, then one table):

  served    frames per server CPU-second for native, managed and v5 bodies of
            100 and 1,000 frames, on the fixtures and (with --big) on a large
            generated PDB; the server's CPU is utime+stime from /proc/PID/stat
            before and after a run of keep-alive requests (the client's CPU is
            not counted).  Beside it, the bare lookup of the same frames in
            process (bench_render: st_lookup_rva alone, and lookup + the
            answer's JSON), so the ratio says what the service adds.
  restart   the first request after a restart for a module already in the
            cache (a new server on the same cache folder; wall time of the
            request, best of --restarts).
  fetch     (with --big) the first request when the big PDB must be
            downloaded from a local server (nginx when installed, else
            tests/symserver.py): download + parse (+ the cache's write, when
            the engine writes before answering), wall time.
  peer      (with --big) llvm-symbolizer (LLVM 19 and 14 when installed)
            answering the same 1,000 RVAs from a process that keeps the module
            loaded, CPU per address (a run with 1,001 addresses minus a run
            with 1), and its time to answer one address from a cold start.

    PDBSYM_BIN=build/pdbsym python3 bench/bench_http.py [--big DIR] [--seconds 4]
                                                         [--connections 2]

--big DIR names a folder with big.pdb and big.exe (bench/make-big-pdb.sh).
bench_render and bench_pdb are taken from PDBSYM_BIN's folder.  Wall-clock
figures depend on what else the machine runs; CPU figures much less.
"""
import argparse
import gzip
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, os.path.join(root, "tests", "integration"))
from pdbsym_server import Server  # noqa: E402
from native_oracle import manifest, rows  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--big", help="folder with big.pdb and big.exe (bench/make-big-pdb.sh)")
ap.add_argument("--seconds", type=float, default=4.0, help="server CPU seconds to spend per served row")
ap.add_argument("--connections", type=int, default=2)
ap.add_argument("--pairs", type=int, default=3,
                help="native served rows: served spells, each followed by the bare lookup; the median ratio is reported")
ap.add_argument("--restarts", type=int, default=3)
ap.add_argument("--bodies", type=int, default=50,
                help="served rows cycle through this many bodies asking different addresses")
ap.add_argument("--only", default="", help="comma-separated row groups: served,restart,fetch,peer")
ap.add_argument("--callgrind", type=int, default=0, metavar="N",
                help="served rows only, in instructions: the server runs under valgrind --tool=callgrind "
                     "and each row counts the instructions of N requests (all threads), which are repeatable "
                     "on a loaded machine; the dumps are kept in --keep")
ap.add_argument("--match", default="", help="served rows whose label contains this text only")
ap.add_argument("--health", type=float, default=0, metavar="SECONDS",
                help="served rows: also ask GET /health on a new connection every SECONDS while the "
                     "row runs, and print its latencies (what a request answered on the event loop "
                     "costs the others there)")
ap.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                help="a setting for the measured server, as its PDBSYM_NAME environment variable "
                     "(e.g. --set inline_max_bytes=64K); may be repeated")
ap.add_argument("--perf", metavar="DIR",
                help="served rows: also record the server with perf (cpu-clock) into DIR/ROW.data "
                     "and print its top symbols")
ap.add_argument("--keep", help="folder for the callgrind dumps (default: removed with the rest)")
args = ap.parse_args()
BIN = os.environ.get("PDBSYM_BIN") or os.path.join(root, "build", "pdbsym")
os.environ["PDBSYM_BIN"] = BIN
bindir = os.path.dirname(os.path.abspath(BIN))
only = set(x for x in args.only.split(",") if x)


def want(group):
    return not only or group in only


tmp = tempfile.mkdtemp(prefix="pdbsym-bench-")
store = os.path.join(tmp, "store")
results = []  # (row, ours, peer, note)


def put(name, key, src=None, data=None):
    d = os.path.join(store, name, key)
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, name)
    if src:
        os.symlink(os.path.abspath(src), dst)
    else:
        with open(dst, "wb") as f:
            f.write(data)


# ---- the modules and their frames ------------------------------------------
native_dir = os.path.join(root, "tests", "fixtures", "native")
managed_dir = os.path.join(root, "tests", "fixtures", "managed")
native = []  # (module entry, [rva], pdb path)
for col in manifest(native_dir):
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    put(debug_file, col["symkey"], data=gzip.open(os.path.join(native_dir, col["pdb"])).read())
    rvas = []
    for lo, hi, _, _ in rows(native_dir, col["expected"]):
        rvas += sorted({lo, (lo + hi - 1) // 2, hi - 1})
    native.append(({"debug_file": debug_file, "debug_id": col["symkey"]}, rvas,
                   os.path.join(store, debug_file, col["symkey"], debug_file)))

managed = []  # (module entry, [(token, il)])
for build, fmt, oracle in (("windows-debug", "windows", "Demo.pdb.winpdb.jsonl"),
                           ("portable-debug", "portable", "Demo.pdb.srm.jsonl")):
    d = os.path.join(managed_dir, build)
    lines = [json.loads(x) for x in open(os.path.join(d, oracle))]
    srm_path = os.path.join(d, "Demo.dll.srm.jsonl")
    srm = [json.loads(x) for x in open(srm_path)] if os.path.exists(srm_path) else lines
    cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
    key = cv["guid"].replace("-", "").upper() + ("%X" % cv["age"] if fmt == "windows" else "FFFFFFFF")
    put("Demo.pdb", key, src=os.path.join(d, "Demo.pdb"))
    b = open(os.path.join(d, "Demo.dll"), "rb").read()
    pe = int.from_bytes(b[0x3C:0x40], "little")
    code_id = "%08X%X" % (int.from_bytes(b[pe + 8:pe + 12], "little"),
                          int.from_bytes(b[pe + 24 + 56:pe + 24 + 60], "little"))
    put("Demo.dll", code_id, src=os.path.join(d, "Demo.dll"))
    sps = sorted({(x["token"], x["il"]) for x in lines if x.get("kind") == "sp" and not x["hidden"]})
    managed.append(({"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"]), "format": fmt,
                     "code_file": "Demo.dll", "code_id": code_id}, sps))

big = None  # (module entry, [rva], pdb path)
if args.big:
    pdb = os.path.join(args.big, "big.pdb")
    dump = json.loads(subprocess.run([BIN, "dump", pdb], capture_output=True, text=True, check=True).stdout)
    g, age = dump["debug_id"].rsplit("-", 1)
    key = g.replace("-", "").upper() + "%X" % int(age, 16)
    put("big.pdb", key, src=pdb)
    rvfile = os.path.join(tmp, "big-rvas.txt")
    subprocess.run([os.path.join(bindir, "bench_pdb"), "-n", "100000", "-r", rvfile, pdb],
                   capture_output=True, check=True)
    big = ({"debug_file": "big.pdb", "debug_id": dump["debug_id"]},
           [int(x, 16) for x in open(rvfile).read().split()], pdb)


def pick(seq, j, n, k, i, per):
    """The k-th address of body j (of n frames): bodies take successive
    slices of the module's list, so that the bodies a row cycles through ask
    different addresses (a lookup that finds its lines in the CPU cache
    because the last request asked the same is not what a service sees)."""
    return seq[(j * n + k // per * 7 + i) % len(seq)]


def native_body(n, mods, j=0):
    """n frames spread over 20 module entries (mods repeat when fewer)."""
    entries = [mods[i % len(mods)] for i in range(min(20, n))]
    frames = []
    for k in range(n):
        i = k % len(entries)
        rv = mods[i % len(mods)][1]
        frames.append({"module": i, "rva": "0x%x" % pick(rv, j, n, k, i, len(entries))})
    return {"modules": [e[0] for e in entries], "frames": frames}


def managed_body(n, j=0):
    entries = [managed[i % len(managed)] for i in range(min(20, n))]
    frames = []
    for k in range(n):
        i = k % len(entries)
        sp = entries[i][1]
        t, il = pick(sp, j, n, k, i, len(entries))
        frames.append({"module": i, "token": t if isinstance(t, str) else "0x%08x" % t, "il_offset": il})
    return {"modules": [e[0] for e in entries], "frames": frames}


def v5_body(n, mods, j=0):
    mm = []
    for m in mods:
        g, age = m[0]["debug_id"].rsplit("-", 1) if "-" in m[0]["debug_id"] else (m[0]["debug_id"], None)
        bid = m[0]["debug_id"] if age is None else g.replace("-", "").upper() + "%X" % int(age, 16)
        mm.append([m[0]["debug_file"], bid])
    stack = []
    for k in range(n):
        i = k % len(mods)
        rv = mods[i][1]
        stack.append([i, pick(rv, j, n, k, i, len(mods))])
    return {"memoryMap": mm, "stacks": [stack]}


# ---- driving the server ------------------------------------------------------
def cpu_us(pid):
    """The process's (user, system) CPU seconds."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) / os.sysconf("SC_CLK_TCK"), int(f[12]) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    return sum(cpu_us(pid))


def post(conn, path, data):
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    return r.status, body


def wait_idle(srv, quiet=1.0, limit=600):
    """Until the server's CPU time stops moving for `quiet` seconds (a module
    mapped by the warm-up request is checked by a background thread; that
    check is not what a served row measures)."""
    t0 = time.time()
    last, since = cpu_s(srv.proc.pid), time.time()
    while time.time() - t0 < limit:
        time.sleep(0.2)
        now = cpu_s(srv.proc.pid)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return


def served(srv, label, path, bodies, nframes):
    datas = [json.dumps(b).encode() for b in bodies]
    data = datas[0]
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    st, first = post(conn, path, data)  # warm: modules resolved, answers checked
    conn.close()
    if st != 200:
        sys.exit("bench_http: %s: status %d: %s" % (label, st, first[:300]))
    j = json.loads(first)
    if path == "/symbolicate":
        ok = sum(1 for f in j["frames"] if f["status"] == "ok")
    else:
        ok = sum(1 for s in j["results"][0]["stacks"] for f in s if "function" in f)
    wait_idle(srv, quiet=3.0 if args.callgrind else 1.0)
    if args.callgrind:
        return served_callgrind(srv, label, path, datas, nframes, ok, len(first))
    stop = threading.Event()
    count = [0]
    lock = threading.Lock()

    def client():
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
        r = 0
        while not stop.is_set():
            s, _ = post(c, path, datas[r % len(datas)])
            r += 1
            if s != 200:
                print("bench_http: %s: status %d" % (label, s))
                break
            with lock:
                count[0] += 1
        c.close()

    perf = None
    if args.perf:
        os.makedirs(args.perf, exist_ok=True)
        pdata = os.path.join(args.perf, re.sub(r"\W+", "_", label) + "_%d.data" % nframes)
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "--call-graph", "dwarf,16384", "-F", "500", "-p", str(srv.proc.pid),
                                 "-o", pdata], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    lat = []

    def prober():
        while not stop.is_set():
            t = time.perf_counter()
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            c.request("GET", "/health")
            c.getresponse().read()
            c.close()
            lat.append(time.perf_counter() - t)
            stop.wait(args.health)

    u0 = cpu_us(srv.proc.pid)
    c0, w0 = sum(u0), time.time()
    ts = [threading.Thread(target=client) for _ in range(args.connections)]
    if args.health:
        ts.append(threading.Thread(target=prober))
    for t in ts:
        t.start()
    while cpu_s(srv.proc.pid) - c0 < args.seconds and time.time() - w0 < args.seconds * 15:
        time.sleep(0.05)
    stop.set()
    for t in ts:
        t.join()
    u1 = cpu_us(srv.proc.pid)
    cpu = sum(u1) - c0
    n = count[0]
    if perf:
        perf.send_signal(2)
        perf.wait()
        rep = subprocess.run(["perf", "report", "-i", pdata, "--stdio", "--no-children", "--sort", "symbol",
                              "-g", "none", "--percent-limit", "1.5"], capture_output=True, text=True).stdout
        print("perf, %s %d frames (self time):\n%s" % (label, nframes, "\n".join(
            "    " + ln.strip() for ln in rep.splitlines() if ln.strip() and not ln.startswith("#"))))
    us = cpu / max(n * nframes, 1) * 1e6
    print("served %-28s %4d frames/request, %5d ok in the first answer, %5d requests, server CPU %.2f s: "
          "%.2f us/frame (user %.2f, system %.2f), %.0f frames per CPU second, %d bytes/answer"
          % (label, nframes, ok, n, cpu, us, (u1[0] - u0[0]) / max(n * nframes, 1) * 1e6,
             (u1[1] - u0[1]) / max(n * nframes, 1) * 1e6, 1e6 / us, len(first)), flush=True)
    results.append(("served " + label, "%.2f us/frame (%.0f frames/CPU-s)" % (us, 1e6 / us), "", ""))
    if lat:
        lat.sort()
        print("  /health during it: %d asked, median %.2f ms, 99th percentile %.2f ms, slowest %.2f ms"
              % (len(lat), lat[len(lat) // 2] * 1e3, lat[min(len(lat) - 1, len(lat) * 99 // 100)] * 1e3,
                 lat[-1] * 1e3), flush=True)
    return us


def served_callgrind(srv, label, path, data, nframes, ok, answer_bytes):
    """Instructions of N requests: counters zeroed, N requests on one
    connection, a dump; its totals line divided by the frames."""
    pid = srv.proc.pid
    subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True, check=True)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
    for r in range(args.callgrind):
        st, _ = post(conn, path, data[r % len(data)])
        if st != 200:
            sys.exit("bench_http: %s: status %d" % (label, st))
    conn.close()
    before = set(os.listdir(cg_dir))
    subprocess.run(["callgrind_control", "-d", re.sub(r"\W+", "_", label) + "_%d" % nframes, str(pid)],
                   capture_output=True, check=True)
    new = sorted(set(os.listdir(cg_dir)) - before)
    ir = 0
    for fn in new:
        for ln in open(os.path.join(cg_dir, fn)):
            if ln.startswith("totals:") or ln.startswith("summary:"):
                ir = max(ir, int(ln.split()[1]))
    per = ir / (args.callgrind * nframes)
    print("served %-28s %4d frames/request, %5d ok, %d requests under callgrind: %.0f instructions/frame "
          "(%s), %d bytes/answer" % (label, nframes, ok, args.callgrind, per, ", ".join(new), answer_bytes),
          flush=True)
    results.append(("served " + label + " (%d frames)" % nframes, "%.0f instructions/frame" % per, "", ""))
    return per


def bare(label, specs, rounds):
    br = os.path.join(bindir, "bench_render")
    out = subprocess.run([br, str(rounds)] + specs, capture_output=True, text=True)
    txt = out.stdout.strip()
    print("in-process %-24s %s" % (label, txt.replace("\n", "; ")), flush=True)
    m = re.search(r"lookup alone: ([\d.]+) us/frame", txt)
    m2 = re.search(r"([\d.]+) frames per CPU second", txt)
    if m:
        return float(m.group(1))
    return 1e6 / float(m2.group(1)) if m2 else None


def specs_for(bodies):
    """bench_render's PDB:RVA,... arguments for the /symbolicate bodies built by native_body."""
    by = {}
    for body in bodies:
        for f in body["frames"]:
            e = body["modules"][f["module"]]
            by.setdefault((e["debug_file"], e["debug_id"]), []).append(f["rva"])
    paths = {}
    for m in native + ([big] if big else []):
        paths[(m[0]["debug_file"], m[0]["debug_id"])] = m[2]
    out = []
    for i, (k, v) in enumerate(by.items()):
        fn = os.path.join(tmp, "rvas-%d.txt" % i)
        with open(fn, "w") as f:
            f.write(",".join(v))
        out.append("%s:@%s" % (paths[k], fn))
    return out


def symserver_start(root_dir):
    p = subprocess.Popen([sys.executable, os.path.join(root, "tests", "symserver.py"), root_dir],
                         stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline().split()[1])


def nginx_start(root_dir):
    ng = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not ng:
        return None, None
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = os.path.join(tmp, "nginx")
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("daemon off; master_process off; worker_processes 1; pid %s/nginx.pid;\n"
                "error_log %s/error.log;\nevents { worker_connections 64; }\n"
                "http { access_log off; sendfile on; disable_symlinks off;\n"
                "  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;"
                " uwsgi_temp_path %s; scgi_temp_path %s;\n"
                "  server { listen 127.0.0.1:%d; root %s; } }\n"
                % (d, d, d, d, d, d, d, port, root_dir))
    p = subprocess.Popen([ng, "-c", conf, "-p", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    return None, None


def timed_first(srv, body, path="/symbolicate", timeout=600):
    data = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    c0 = cpu_s(srv.proc.pid)
    t0 = time.time()
    st, out = post(conn, path, data)
    wall = time.time() - t0
    conn.close()
    j = json.loads(out)
    return st, wall, cpu_s(srv.proc.pid) - c0, j


procs = []
cg_dir = None
if args.callgrind:
    import pdbsym_server
    cg_dir = args.keep or os.path.join(tmp, "callgrind")
    os.makedirs(cg_dir, exist_ok=True)
    wrapper = os.path.join(tmp, "pdbsym-callgrind.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec valgrind -q --log-file=%s/valgrind.log --tool=callgrind --callgrind-out-file=%s/callgrind.out.%%p "
                "%s \"$@\"\n" % (cg_dir, cg_dir, os.path.abspath(BIN)))
    os.chmod(wrapper, 0o755)
    pdbsym_server.BIN = wrapper
    only = {"served"}
try:
    ss, ss_port = symserver_start(store)
    procs.append(ss)
    env = {"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % ss_port, "PDBSYM_OFFLINE": "false",
           "PDBSYM_MAX_INFLIGHT": "1024", "PDBSYM_MEM_MAX_BYTES": "2G", "PDBSYM_LOG_LEVEL": "warn"}
    cache_dir = os.path.join(tmp, "cache")
    env["PDBSYM_CACHE_DIR"] = cache_dir
    for kv in args.set:
        k, _, v = kv.partition("=")
        env["PDBSYM_" + k.upper()] = v
    if args.callgrind:  # every module into the cache by a server not under valgrind
        import pdbsym_server
        real = pdbsym_server.BIN
        pdbsym_server.BIN = os.path.abspath(BIN)
        srv = Server(env=env)
        try:
            for body in [native_body(len(native), native), managed_body(len(managed))] + (
                    [native_body(1, [big])] if big else []):
                timed_first(srv, dict(body, timeout=600))
        finally:
            srv.close()
        pdbsym_server.BIN = real
        env["PDBSYM_DEFAULT_TIMEOUT"] = "600"
    srv = Server(env=env, start_timeout=300 if args.callgrind else 20)
    try:
        bodies = []
        if want("served"):
            nb = range(args.bodies)
            bodies += [("native fixtures", "/symbolicate", [native_body(n, native, j) for j in nb], n)
                       for n in (100, 1000)]
            bodies += [("managed fixtures", "/symbolicate", [managed_body(n, j) for j in nb], n)
                       for n in (100, 1000)]
            bodies += [("v5 fixtures", "/symbolicate/v5", [v5_body(n, native, j) for j in nb], n)
                       for n in (100, 1000)]
            if big:
                bodies += [("native big.pdb", "/symbolicate", [native_body(n, [big], j) for j in nb], n)
                           for n in (100, 1000)]
                bodies += [("v5 big.pdb", "/symbolicate/v5", [v5_body(n, [big], j) for j in nb], n)
                           for n in (100, 1000)]
        elif big:
            bodies.append(None)
        if big and not args.callgrind:  # the big module into the cache first (its download is not what this row measures)
            st, wall, cpu, j = timed_first(srv, dict(native_body(1, [big]), timeout=600))
            print("big.pdb into the cache: %.2f s wall, %.2f s server CPU, status %s"
                  % (wall, cpu, j["frames"][0]["status"]), flush=True)
        for b in bodies:
            if b is None:
                continue
            label, path, body, n = b
            if args.match and args.match not in "%s %d" % (label, n):
                continue
            native_row = path == "/symbolicate" and label.startswith("native") and not args.callgrind
            pairs = []
            for k in range(args.pairs if native_row else 1):
                us = served(srv, label, path, body, n)
                if native_row:
                    # the bare lookup right after each served spell: this machine's speed drifts
                    # (shared memory bandwidth), so each ratio is of two runs next to each other
                    b_us = bare(label, specs_for(body), max(2, 200000 // (n * len(body))))
                    if b_us:
                        pairs.append((us, b_us))
            if pairs:
                rs = sorted(u / b for u, b in pairs)
                mid = sorted(pairs, key=lambda ub: ub[0] / ub[1])[len(pairs) // 2]
                results.append(("  bare lookup, same frames", "%.2f us/frame" % mid[1], "",
                                "served/bare %.2fx (median of %d pairs: %s)"
                                % (mid[0] / mid[1], len(pairs), ", ".join("%.2f" % r for r in rs))))
    finally:
        srv.close()

    # ---- the first request after a restart, module cached ----
    def drop_from_page_cache(folder):
        """posix_fadvise(DONTNEED) on the cache's files: a cold start from
        disk for them alone (the rest of the machine keeps its page cache)."""
        for dirpath, _, names in os.walk(folder):
            for n in names:
                fd = os.open(os.path.join(dirpath, n), os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError:
                    pass
                os.close(fd)

    if want("restart"):
        mods = [big] if big else [native[0]]
        for m in mods:
            for cold in (False, True):
                walls, cpus = [], []
                for _ in range(args.restarts):
                    if cold:
                        drop_from_page_cache(cache_dir)
                    srv = Server(env=env)
                    try:
                        st, wall, cpu, j = timed_first(srv, dict(native_body(1, [m]), timeout=600))
                        if j["frames"][0]["status"] != "ok" or not j["modules"][0]["from_cache"]:
                            print("bench_http: restart: not answered from the cache: %s" % json.dumps(j)[:300])
                        walls.append(wall)
                        cpus.append(cpu)
                    finally:
                        srv.close()
                how = "cache files dropped from the page cache" if cold else "page cache warm"
                print("restart %-20s (%s) first request %s s wall (best %.3f), server CPU %s s"
                      % (m[0]["debug_file"], how, ", ".join("%.3f" % w for w in walls), min(walls),
                         ", ".join("%.2f" % x for x in cpus)), flush=True)
                results.append(("first request after restart, %s cached (%s)" % (m[0]["debug_file"], how),
                                "%.3f s wall (best of %d), median %.3f" % (min(walls), len(walls),
                                                                         statistics.median(walls)), "", ""))

    # ---- the first request when the big PDB must be downloaded ----
    if big and want("fetch"):
        ng, ng_port = nginx_start(store)
        which = "nginx"
        if ng:
            procs.append(ng)
            port = ng_port
        else:
            which, port = "symserver.py", ss_port
        e2 = dict(env, PDBSYM_SYMBOL_PATH="srv*http://127.0.0.1:%d" % port,
                  PDBSYM_CACHE_DIR=os.path.join(tmp, "cache-fetch"))
        walls = []
        for _ in range(2):
            shutil.rmtree(e2["PDBSYM_CACHE_DIR"], ignore_errors=True)
            srv = Server(env=e2)
            try:
                st, wall, cpu, j = timed_first(srv, dict(native_body(1, [big]), timeout=600))
                walls.append(wall)
                print("fetch big.pdb from %s: first request %.2f s wall, server CPU %.2f s, status %s"
                      % (which, wall, cpu, j["frames"][0]["status"]), flush=True)
            finally:
                srv.close()
        t0 = time.time()
        subprocess.run(["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:%d/big.pdb/%s/big.pdb"
                        % (port, os.listdir(os.path.join(store, "big.pdb"))[0])], check=False)
        dl = time.time() - t0
        results.append(("first request, big.pdb fetched from %s" % which, "%.2f s wall (best of %d)"
                        % (min(walls), len(walls)), "curl alone: %.2f s" % dl, ""))

    # ---- the peer: llvm-symbolizer with the module loaded ----
    if big and want("peer"):
        exe = os.path.join(args.big, "big.exe")
        for sym in ("/usr/lib/llvm-19/bin/llvm-symbolizer", shutil.which("llvm-symbolizer")):
            if not sym or not os.path.exists(sym):
                continue
            ver = subprocess.run([sym, "--version"], capture_output=True, text=True).stdout
            ver = (re.search(r"version (\d+)", ver) or re.search(r"(\d+)", ver)).group(1)

            def cpu_of(addrs):
                r0, t0 = os.times(), time.time()
                subprocess.run([sym, "--obj=" + exe, "--relative-address", "--inlines", "--functions=short",
                                "--no-demangle"], input="\n".join("0x%x" % a for a in addrs) + "\n",
                               capture_output=True, text=True, check=True)
                wall, r1 = time.time() - t0, os.times()
                return (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system), wall

            sample = big[1][:1000]
            one_cpu, one_wall = min(cpu_of(sample[:1]) for _ in range(2))
            many_cpu, _ = min(cpu_of(sample[:1] + sample) for _ in range(2))
            per = (many_cpu - one_cpu) / len(sample) * 1e6
            print("peer llvm-symbolizer %s: %.2f us CPU per address with the module loaded; "
                  "cold start + 1 address %.3f s wall, %.2f s CPU" % (ver, per, one_wall, one_cpu), flush=True)
            results.append(("peer llvm-symbolizer %s" % ver, "", "%.1f us/address loaded; 1 address cold %.3f s"
                            % (per, one_wall), ""))
finally:
    for p in procs:
        p.kill()
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)

print()
print("| row | pdbsym | peer | note |")
print("| --- | --- | --- | --- |")
for r in results:
    print("| %s |" % " | ".join(r))
