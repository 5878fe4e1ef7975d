"""Real store layouts (issue 14): the fixtures laid out as symstore.exe lays
them out (file names as given, PDB keys GUID + age in hex, image keys
{TimeDateStamp:X8}{SizeOfImage:x}: Demo.dll/D646683Ca000/Demo.dll) and as an
SSQP server does (every path in lower case), and one whose image keys are
spelt as the client spells its code id (lower case), each served by nginx (a real,
case-sensitive server, started here with a generated configuration on
127.0.0.1), each behind its own `pdbsym serve`.

Checked against the fixtures' oracles: managed frames of the Windows and the
Portable build (tests/fixtures/managed, the module given code_file and
code_id, so names come from the image) have the method names and lines
Microsoft's readers give; native frames (tests/fixtures/native) have
llvm-symbolizer's answers.  Printed: the requests nginx saw per module, the
probes a second module costs once the store's layout is learned."""
import gzip
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
from native_oracle import alt_for, answer_ok, manifest, rows, sym_view  # noqa: E402
from pdbsym_server import Checks, Server, free_port  # noqa: E402

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
managed_dir = os.path.join(root, "tests", "fixtures", "managed")
nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
if not nginx:
    harness.skip("nginx not installed (scripts/deps.sh --test installs it)")
NATIVE = ("cpp-x64-O2", "c-x86-O0")


def pe_ids(b):
    pe = struct.unpack_from("<I", b, 0x3C)[0]
    return struct.unpack_from("<I", b, pe + 8)[0], struct.unpack_from("<I", b, pe + 24 + 56)[0]


c = Checks()
tmp = tempfile.mkdtemp(prefix="pdbsym-layouts-")
os.chmod(tmp, 0o755)  # nginx workers run as nobody when the test runs as root
files = []   # (symstore.exe's relative path, bytes)
modules, frames, expect = [], [], []

# ---- managed: both builds, PDB and image
for build, fmt, oracle in (("windows-debug", "windows", "Demo.pdb.winpdb.jsonl"),
                           ("portable-debug", "portable", "Demo.pdb.srm.jsonl")):
    d = os.path.join(managed_dir, build)
    lines = [json.loads(x) for x in open(os.path.join(d, oracle))]
    srm_path = os.path.join(d, "Demo.dll.srm.jsonl")
    srm = [json.loads(x) for x in open(srm_path)] if os.path.exists(srm_path) else lines
    cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
    guid = cv["guid"].replace("-", "").upper()
    # symstore.exe: GUID in upper case, the age with %x; Portable: FFFFFFFF
    key = guid + ("%x" % cv["age"] if fmt == "windows" else "FFFFFFFF")
    files.append(("Demo.pdb/%s/Demo.pdb" % key, open(os.path.join(d, "Demo.pdb"), "rb").read()))
    dll = open(os.path.join(d, "Demo.dll"), "rb").read()
    stamp, size = pe_ids(dll)
    files.append(("Demo.dll/%08X%x/Demo.dll" % (stamp, size), dll))
    mi = len(modules)
    # the client spells the code id in lower case, as Sentry prints it
    modules.append({"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"]),
                    "format": fmt, "code_file": "Demo.dll", "code_id": "%08x%x" % (stamp, size)})
    seen = set()
    for sp in lines:
        if sp.get("kind") != "sp" or sp["hidden"] or (sp["token"], sp["il"]) in seen:
            continue
        seen.add((sp["token"], sp["il"]))
        want = sp["method"].split("(")[0].replace("::", ".").replace("/", "+")
        want = want.split("<")[0] if want.endswith(">") else want
        frames.append({"module": mi, "token": sp["token"], "il_offset": sp["il"]})
        expect.append(("managed", build, (sp["token"], sp["il"]), (want, sp["doc"], sp["sl"])))

# ---- native
for col in manifest(native_dir):
    if col["name"] not in NATIVE:
        continue
    name = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    files.append(("%s/%s/%s" % (name, col["symkey"][:-1] + col["symkey"][-1:].lower(), name),
                  gzip.open(os.path.join(native_dir, col["pdb"])).read()))
    mi = len(modules)
    modules.append({"debug_file": col["cv_path"], "debug_id": col["symkey"]})
    alt = rows(native_dir, col.get("crosscheck"))
    for lo, hi, ans, _ in rows(native_dir, col["expected"]):
        rva = (lo + hi - 1) // 2
        frames.append({"module": mi, "rva": "0x%x" % rva})
        expect.append(("native", col["name"], rva, (ans, alt_for(alt, rva))))

def given(rel):
    """symstore's layout, but the image's key spelt as the client spells it
    (lower case, as Sentry prints code ids)"""
    parts = rel.split("/")
    return "/".join([parts[0], parts[1].lower(), parts[2]]) if rel.startswith("Demo.dll/") else rel


layouts = {"symstore": lambda rel: rel, "ssqp": lambda rel: rel.lower(), "as given": given}
ports = {}
conf = ["pid %s/nginx.pid;" % tmp, "error_log %s/error.log;" % tmp, "worker_processes 1;",
        "events { worker_connections 64; }", "http {",
        "  default_type application/octet-stream;", "  types { }",
        "  log_format probe '$status $request_uri';"]
for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
    conf.append("  %s_temp_path %s/%s-temp;" % (k, tmp, k))
for name, f in layouts.items():
    store = os.path.join(tmp, name.replace(" ", "-"))
    for rel, data in files:
        p = os.path.join(store, f(rel))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as out:
            out.write(data)
    for dp, dn, fn in os.walk(store):
        os.chmod(dp, 0o755)
    ports[name] = free_port()
    conf += ["  server {", "    listen 127.0.0.1:%d;" % ports[name], "    root %s;" % store,
             "    access_log %s/%s.log probe;" % (tmp, name.replace(" ", "-")), "    autoindex off;", "  }"]
conf.append("}")
conf_path = os.path.join(tmp, "nginx.conf")
with open(conf_path, "w") as f:
    f.write("\n".join(conf) + "\n")
nx = subprocess.Popen([nginx, "-p", tmp, "-c", conf_path, "-g", "daemon off;"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
    # the stores are case-sensitive: the symstore image key in upper case is not there
    import urllib.error
    import urllib.request
    rel = [r for r, _ in files if r.startswith("Demo.dll/")][0]
    try:
        urllib.request.urlopen("http://127.0.0.1:%d/%s" % (ports["symstore"], rel.upper()), timeout=5)
        c.true("nginx is case-sensitive", False)
    except urllib.error.HTTPError as e:
        c.eq("nginx is case-sensitive", e.code, 404)

    for name in layouts:
        srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % ports[name],
                          "PDBSYM_OFFLINE": "false"})
        servers.append(srv)
        st, _, j = srv.json("POST", "/symbolicate", {"modules": modules, "frames": frames,
                                                     "timeout": 60}, timeout=120)
        c.eq("%s: status" % name, st, 200)
        c.eq("%s: every module found" % name, [m["status"] for m in j["modules"]],
             ["found"] * len(modules))
        ok = {"managed": 0, "native": 0}
        total = {"managed": 0, "native": 0}
        shown = 0
        for (kind, what, addr, want), got in zip(expect, j["frames"]):
            total[kind] += 1
            if kind == "managed":
                s = (got.get("symbols") or [{}])[0]
                good = got["status"] == "ok" and (s.get("function"), s.get("file"), s.get("line")) == want
            else:
                good = got["status"] == "ok" and answer_ok(sym_view(got["symbols"]), want[0], want[1])
            ok[kind] += good
            if not good and shown < 3:
                shown += 1
                print("  %s %s %s: got %s, want %s" % (name, what, addr, json.dumps(got)[:200], want))
        print("%s layout: managed frames named %d of %d, native frames right %d of %d" % (
            name, ok["managed"], total["managed"], ok["native"], total["native"]))
        c.eq("%s: managed frames with their names and lines" % name, ok["managed"], total["managed"])
        c.eq("%s: native frames as llvm-symbolizer" % name, ok["native"], total["native"])
        log_path = os.path.join(tmp, "%s.log" % name.replace(" ", "-"))
        log = [ln.split() for ln in open(log_path)]
        print("%s: nginx saw %d requests (%d answered 200) for %d modules" % (
            name, len(log), sum(1 for x in log if x[0] == "200"), len(modules)))
        # a module the store does not have, once its layout is learned
        before = len(log)
        srv.json("POST", "/symbolicate", {"modules": [{"debug_file": "Absent.pdb",
                                                        "debug_id": "00112233445566778899AABBCCDDEEFF1",
                                                        "format": "windows"}],
                                          "frames": [{"module": 0, "rva": 1}], "timeout": 30})
        miss = [ln.split() for ln in open(log_path)][before:]
        print("%s: a miss costs %d requests once the layout is learned: %s" % (
            name, len(miss), " ".join(x[1] for x in miss)))
        c.true("%s: a miss costs at most 4 requests" % name, 0 < len(miss) <= 4, miss)
        srv.close()
        servers.remove(srv)
finally:
    for s in servers:
        s.close()
    nx.terminate()
    nx.wait()
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
