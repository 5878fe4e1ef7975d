"""Names from the module's image, through the service (issue 14): a managed
Windows PDB holds each method's own name only and a Portable PDB none, so
`function` is `Namespace.Type.Method` only when the service has the PE image
(fetched by `code_file`/`code_id`); a PDB embedded in its image answers from
the image.

A store laid out as symstore.exe lays it out, served by nginx (a real,
case-sensitive server, started here on 127.0.0.1), behind `pdbsym serve`:

1. the Windows and the Portable build of tests/fixtures/managed are asked
   without code_file/code_id: found, cached without names (the Windows PDB's
   own names, the Portable PDB's tokens);
2. asked with code_file/code_id while the store has no image: still no
   names, and the image's absence is remembered (negative_missing_ttl);
3. the images arrive in the store; within the TTL no request reaches nginx;
4. after it, the same request gets every frame's full name and line, the
   tables cached without names are replaced (in memory at once, in SQLite
   by the writer: a restarted service answers with names, offline);
5. the embedded build (tests/fixtures/managed/embedded-debug, only its
   Demo.dll in a second store) is answered from its image, also when it was
   first asked without code_file/code_id (then `missing`).

The answers are the fixtures' oracles': Microsoft's readers' sequence points
(Demo.pdb.winpdb.jsonl: DiaSymReader; *.srm.jsonl:
System.Reflection.Metadata), method names from the assembly's metadata."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from pdbsym_server import Checks, Server, need_binary, free_port  # noqa: E402

need_binary()
root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
managed_dir = os.path.join(root, "tests", "fixtures", "managed")
nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
if not nginx:
    harness.skip("nginx not installed (scripts/deps.sh --test installs it)")
TTL = 3  # negative_missing_ttl: how long the image's absence is remembered


def pe_ids(b):
    pe = struct.unpack_from("<I", b, 0x3C)[0]
    return struct.unpack_from("<I", b, pe + 8)[0], struct.unpack_from("<I", b, pe + 24 + 56)[0]


def jsonl(path):
    return [json.loads(x) for x in open(path)]


def full_name(method):
    """The oracle's `Namespace.Type/Nested::Name(params)` as pdbsym spells
    it: Namespace.Type+Nested.Name"""
    want = method.split("(")[0].replace("::", ".").replace("/", "+")
    return want.split("<")[0] if want.endswith(">") else want


def own_name(method):
    """the method's own name, as a Windows PDB's S_MANPROC holds it"""
    return method.split("(")[0].split("::")[-1]


def module_of(build, fmt, pdb_oracle):
    """(module, frames, expected) for a build: every distinct (token, IL
    offset) of a visible sequence point"""
    d = os.path.join(managed_dir, build)
    dll = open(os.path.join(d, "Demo.dll"), "rb").read()
    srm_path = os.path.join(d, "Demo.dll.srm.jsonl")  # the Portable build's is the PDB's
    srm = jsonl(srm_path if os.path.exists(srm_path) else os.path.join(d, pdb_oracle))
    cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
    stamp, size = pe_ids(dll)
    mod = {"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"])}
    if fmt:
        mod["format"] = fmt
    image = {"code_file": "Demo.dll", "code_id": "%08X%x" % (stamp, size)}
    frames, expect, seen = [], [], set()
    for sp in jsonl(os.path.join(d, pdb_oracle)):
        if sp.get("kind") != "sp" or sp["hidden"] or (sp["token"], sp["il"]) in seen:
            continue
        seen.add((sp["token"], sp["il"]))
        frames.append({"token": sp["token"], "il_offset": sp["il"]})
        expect.append(sp)
    key = cv["guid"].replace("-", "").upper() + ("%x" % cv["age"] if fmt == "windows" else "FFFFFFFF")
    return {"mod": mod, "image": image, "frames": frames, "expect": expect, "dll": dll,
            "pdb_rel": "Demo.pdb/%s/Demo.pdb" % key, "dll_rel": "Demo.dll/%08X%x/Demo.dll" % (stamp, size),
            "pdb": os.path.join(d, "Demo.pdb")}


builds = {"windows": module_of("windows-debug", "windows", "Demo.pdb.winpdb.jsonl"),
          "portable": module_of("portable-debug", "portable", "Demo.pdb.srm.jsonl"),
          "embedded": module_of("embedded-debug", None, "Demo.dll.srm.jsonl")}


def body(names, with_image):
    modules, frames = [], []
    for i, n in enumerate(names):
        b = builds[n]
        modules.append(dict(b["mod"], **(b["image"] if with_image else {})))
        frames += [dict(f, module=i) for f in b["frames"]]
    return {"modules": modules, "frames": frames, "timeout": 60}


def judge(c, what, names, answer, how):
    """how(build, sp) -> the expected (function, file, line); counts the
    frames that have it"""
    frames = iter(answer["frames"])
    for n in names:
        good = total = shown = 0
        for sp in builds[n]["expect"]:
            got = next(frames)
            want = how(n, sp)
            s = (got.get("symbols") or [{}])[0]
            ok = got.get("status") == "ok" and (s.get("function"), s.get("file"), s.get("line")) == want
            good += ok
            total += 1
            if not ok and shown < 3:
                shown += 1
                print("  %s %s %s+%d: got %s, want %s" % (what, n, sp["token"], sp["il"],
                                                         json.dumps(got)[:200], want))
        print("%s, %s: %d of %d frames as the oracle" % (what, n, good, total))
        c.eq("%s, %s: frames as the oracle" % (what, n), good, total)


def named(n, sp):
    return (full_name(sp["method"]), sp["doc"], sp["sl"])


def nameless(n, sp):
    token = "0x%08X" % int(sp["token"], 16)  # api.md: a Portable PDB's method is its token
    return (own_name(sp["method"]) if n == "windows" else token, sp["doc"], sp["sl"])


c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-image-names-")
os.chmod(tmp, 0o755)  # nginx workers run as nobody when the test runs as root
stores = {"main": os.path.join(tmp, "main"), "embedded": os.path.join(tmp, "embedded")}
ports = {k: free_port() for k in stores}


def put(store, rel, data):
    p = os.path.join(stores[store], rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
    for dp, _, _ in os.walk(stores[store]):
        os.chmod(dp, 0o755)


for n in ("windows", "portable"):
    put("main", builds[n]["pdb_rel"], open(builds[n]["pdb"], "rb").read())
put("embedded", builds["embedded"]["dll_rel"], builds["embedded"]["dll"])
conf = ["pid %s/nginx.pid;" % tmp, "error_log %s/error.log;" % tmp, "worker_processes 1;",
        "events { worker_connections 64; }", "http {", "  default_type application/octet-stream;",
        "  types { }", "  log_format probe '$status $request_uri';"]
for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
    conf.append("  %s_temp_path %s/%s-temp;" % (k, tmp, k))
for name, path in stores.items():
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)
    conf += ["  server {", "    listen 127.0.0.1:%d;" % ports[name], "    root %s;" % path,
             "    access_log %s/%s.log probe;" % (tmp, name), "  }"]
conf.append("}")
with open(os.path.join(tmp, "nginx.conf"), "w") as f:
    f.write("\n".join(conf) + "\n")
nx = subprocess.Popen([nginx, "-p", tmp, "-c", os.path.join(tmp, "nginx.conf"), "-g", "daemon off;"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def nginx_log(name):
    p = os.path.join(tmp, "%s.log" % name)
    return [ln.split() for ln in open(p)] if os.path.exists(p) else []


servers = []
try:
    for port in ports.values():
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or nx.poll() is not None:
                    raise RuntimeError("nginx did not start: %s" % nx.stderr.read().decode())
                time.sleep(0.05)

    cache = os.path.join(tmp, "cache")
    env = {"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % ports["main"], "PDBSYM_OFFLINE": "false",
           "PDBSYM_CACHE_DIR": cache, "PDBSYM_NEGATIVE_MISSING_TTL": str(TTL)}
    srv = Server(env=env)
    servers.append(srv)
    both = ["windows", "portable"]

    # 1. no code_file/code_id: cached without names
    st, _, j = srv.json("POST", "/symbolicate", body(both, False), timeout=120)
    c.eq("1: status", st, 200)
    c.eq("1: modules found", [m["status"] for m in j["modules"]], ["found", "found"])
    judge(c, "1 (no image named)", both, j, nameless)
    c.eq("1: no image asked for", [x for x in nginx_log("main") if "Demo.dll" in x[1]], [])

    # 2. the image named, the store without it: no names, the absence remembered
    st, _, j = srv.json("POST", "/symbolicate", body(both, True), timeout=120)
    c.eq("2: status", st, 200)
    judge(c, "2 (image named, not in the store)", both, j, nameless)
    probes = [x for x in nginx_log("main") if "Demo.dll" in x[1]]
    print("2: the image probed with %d requests, all 404: %s" % (len(probes), all(x[0] == "404" for x in probes)))
    c.true("2: the image was looked for", len(probes) > 0 and all(x[0] == "404" for x in probes), probes)
    t_missing = time.monotonic()

    # 3. the images arrive; within the TTL nothing reaches nginx
    for n in both:
        put("main", builds[n]["dll_rel"], builds[n]["dll"])
    before = len(nginx_log("main"))
    st, _, j = srv.json("POST", "/symbolicate", body(both, True), timeout=120)
    if time.monotonic() - t_missing < TTL:
        judge(c, "3 (image arrived, its absence remembered)", both, j, nameless)
        c.eq("3: no request within the TTL", nginx_log("main")[before:], [])
    else:
        harness.skip_part("step 3: the machine took longer than the %d s TTL" % TTL)

    # 4. after the TTL: names from the image, the cached tables replaced
    time.sleep(max(0.0, TTL + 1.2 - (time.monotonic() - t_missing)))
    before = len(nginx_log("main"))
    st, _, j = srv.json("POST", "/symbolicate", body(both, True), timeout=120)
    c.eq("4: status", st, 200)
    judge(c, "4 (image in the store)", both, j, named)
    got = [x for x in nginx_log("main")[before:]]
    print("4: nginx saw %s" % " ".join("%s %s" % (x[0], x[1]) for x in got))
    c.eq("4: each image fetched once, no PDB again", sorted(x[1] for x in got if x[0] == "200"),
         sorted("/" + builds[n]["dll_rel"] for n in both))
    before = len(nginx_log("main"))
    st, _, j = srv.json("POST", "/symbolicate", body(both, False), timeout=120)
    judge(c, "4 (asked again without code_file/code_id)", both, j, named)
    c.eq("4: answered from the cache", nginx_log("main")[before:], [])

    # the names are in SQLite: a restarted service, offline, answers with them
    c.eq("stop: SIGTERM exits 0", srv.stop(), 0)
    unstored = [r for r in srv.logs() if r.get("msg") in ("module not stored", "cache did not take module",
                                                          "shutting down with modules not stored")]
    c.eq("stop: nothing left unstored", unstored, [])
    srv.close()
    servers.remove(srv)
    srv = Server(env=dict(env, PDBSYM_OFFLINE="true"))
    servers.append(srv)
    st, _, j = srv.json("POST", "/symbolicate", body(both, False), timeout=60)
    judge(c, "after a restart, offline", both, j, named)
    srv.close()
    servers.remove(srv)

    # 5. the embedded PDB, answered from its image
    env5 = {"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % ports["embedded"], "PDBSYM_OFFLINE": "false",
            "PDBSYM_NEGATIVE_MISSING_TTL": "3600"}
    srv = Server(env=env5)
    servers.append(srv)
    st, _, j = srv.json("POST", "/symbolicate", body(["embedded"], False), timeout=120)
    c.eq("5: without code_file/code_id: missing", [m["status"] for m in j["modules"]], ["missing"])
    before = len(nginx_log("embedded"))
    st, _, j = srv.json("POST", "/symbolicate", body(["embedded"], True), timeout=120)
    c.eq("5: with them: found", [m["status"] for m in j["modules"]], ["found"])
    judge(c, "5 (embedded, its PDB known missing)", ["embedded"], j, named)
    got = nginx_log("embedded")[before:]
    c.eq("5: the image fetched once, the PDB not probed again",
         [x[1] for x in got if x[0] == "200"], ["/" + builds["embedded"]["dll_rel"]])
    c.eq("5: nothing else asked", [x[1] for x in got if "Demo.pdb" in x[1]], [])
    srv.close()
    servers.remove(srv)
    srv = Server(env=env5)
    servers.append(srv)
    st, _, j = srv.json("POST", "/symbolicate", body(["embedded"], True), timeout=120)
    c.eq("5: first asked with code_file/code_id: found", [m["status"] for m in j["modules"]], ["found"])
    judge(c, "5 (embedded, first request)", ["embedded"], j, named)
    lines = srv.logs()
    c.true("5: every log line is JSON with a msg", all("msg" in r for r in lines))
finally:
    for s in servers:
        s.close()
    nx.terminate()
    nx.wait()
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
