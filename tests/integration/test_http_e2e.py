"""End to end through the real binary: fixture PDBs served by the test symbol
server (tests/symserver.py) in symstore layout, fetched, parsed and cached by
`pdbsym serve`, and the answers compared with the fixtures' oracle files:
llvm-symbolizer 19 for native frames (tests/fixtures/native/*.expected.tsv,
or the llvm-pdbutil reading in *.crosscheck.tsv where its note is dup-line),
Microsoft's PDB readers for managed frames (tests/fixtures/managed/*.jsonl), and
their source_link, async_method, user_method, generated and local_function
against the fixture's Source Link map and ClrDump (Demo.dll.clr.jsonl).
Also: one batch mixing modules found, missing and failing upstream; the
second request is answered from the cache; /symbolicate/v5 gives the same
functions, files, lines and inline chains as /symbolicate."""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402
from native_oracle import alt_for, answer_ok, manifest, oracle_view, rows, sym_view  # noqa: E402,F401

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
managed_dir = os.path.join(root, "tests", "fixtures", "managed")
symserver = os.path.join(root, "tests", "symserver.py")
if not (os.path.exists(os.path.join(native_dir, "MANIFEST.tsv")) and os.path.exists(symserver)):
    harness.skip("tests/fixtures/native or tests/symserver.py absent")

c = Checks()
store = tempfile.mkdtemp(prefix="pdbsym-e2e-store-")


def put(name, key, data):
    d = os.path.join(store, name, key)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- native fixtures -> symstore, frames and expected answers
native = []  # (module dict, [(rva, llvm-symbolizer's frames, crosscheck or None)], name)
for col in manifest(native_dir):
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    put(debug_file, col["symkey"], gzip.open(os.path.join(native_dir, col["pdb"])).read())
    alt = rows(native_dir, col.get("crosscheck"))
    frames = []
    for lo, hi, ans, _ in rows(native_dir, col["expected"]):
        for rva in sorted({lo, (lo + hi - 1) // 2, hi - 1}):
            frames.append((rva, ans, alt_for(alt, rva)))
    native.append(({"debug_file": col["cv_path"], "debug_id": col["symkey"]}, frames, col["name"]))


# ---- managed fixtures (Windows and Portable PDBs, plus the DLL for names)
def pe_ids(path):
    b = open(path, "rb").read()
    pe = struct.unpack_from("<I", b, 0x3C)[0]
    stamp = struct.unpack_from("<I", b, pe + 8)[0]
    size_of_image = struct.unpack_from("<I", b, pe + 24 + 56)[0]
    return "%08X%X" % (stamp, size_of_image), b


def managed_extras(d):
    """token -> the generated-code fields ClrDump (reflection, Roslyn's lambda maps)
    gives a frame of that method; and the fixture's Source Link rule."""
    want = {}
    clr = [json.loads(x) for x in open(os.path.join(d, "Demo.dll.clr.jsonl"))]
    for o in clr:
        if o["kind"] == "generated":
            want.setdefault(o["token"], {}).update(user_method=o["user_method"], generated=o["generated"],
                                                   local_function=o["local_function"])
        elif o["kind"] == "state_machine":
            want.setdefault(o["move_next"], {})["async_method"] = o["kickoff_method"]
    return want


sl_rule = list(json.load(open(os.path.join(managed_dir, "src", "sourcelink.json")))["documents"].items())[0] \
    if os.path.exists(os.path.join(managed_dir, "src", "sourcelink.json")) else ("", "")


def sl_url(path):
    key, url = sl_rule
    if key.endswith("*") and path.lower().startswith(key[:-1].lower()):
        return url.replace("*", path[len(key) - 1:].replace("\\", "/"))
    return None


managed = []  # (module, frames [(token, il, expected sp)], what)
extras = {}   # what -> managed_extras
if os.path.exists(os.path.join(managed_dir, "MANIFEST.tsv")):
    for build, fmt, oracle in (("windows-debug", "windows", "Demo.pdb.winpdb.jsonl"),
                               ("portable-debug", "portable", "Demo.pdb.srm.jsonl")):
        d = os.path.join(managed_dir, build)
        lines = [json.loads(x) for x in open(os.path.join(d, oracle))]
        srm = [json.loads(x) for x in open(os.path.join(d, "Demo.dll.srm.jsonl"))] if os.path.exists(
            os.path.join(d, "Demo.dll.srm.jsonl")) else lines
        cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
        guid = cv["guid"].replace("-", "").upper()
        key = guid + ("%X" % cv["age"] if fmt == "windows" else "FFFFFFFF")
        put("Demo.pdb", key, open(os.path.join(d, "Demo.pdb"), "rb").read())
        code_id, dll = pe_ids(os.path.join(d, "Demo.dll"))
        put("Demo.dll", code_id, dll)
        sps = [x for x in lines if x.get("kind") == "sp" and not x["hidden"]]
        # one frame per sequence point: its own IL offset must give its own line
        firsts = {}
        for sp in sps:
            firsts.setdefault((sp["token"], sp["il"]), sp)
        extras[build] = managed_extras(d)
        managed.append(({"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"]), "format": fmt,
                         "code_file": "Demo.dll", "code_id": code_id},
                        [(t, il, sp) for (t, il), sp in firsts.items()], build))

# ---- the symbol server and the service
ss = subprocess.Popen([sys.executable, symserver, store], stdout=subprocess.PIPE, text=True)
port_line = ss.stdout.readline().split()
ss_port = int(port_line[1])
srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % ss_port, "PDBSYM_OFFLINE": "false",
                  "PDBSYM_MAX_FRAMES": "100000"})
try:
    # one batch: every native and managed module, plus a missing one and one whose upstream fails
    import urllib.request
    fault_path = "/fault.pdb/00112233445566778899AABBCCDDEEFF1/fault.pdb"
    rule = {fault_path: {"status": 500}, fault_path.replace(".pdb", ".pd_", 2)[:-1] + "_": {"status": 500}}
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/_control" % ss_port,
                                                  data=json.dumps(rule).encode(), method="POST")).read()
    modules, frames, expect = [], [], []
    for mod, fr, name in native:
        mi = len(modules)
        modules.append(mod)
        for rva, ans, alt in fr:
            frames.append({"module": mi, "rva": "0x%x" % rva})
            expect.append(("native", name, rva, (ans, alt)))
    for mod, fr, name in managed:
        mi = len(modules)
        modules.append(mod)
        for tok, il, sp in fr:
            frames.append({"module": mi, "token": tok, "il_offset": il})
            expect.append(("managed", name, (tok, il), sp))
    missing_i = len(modules)
    modules.append({"debug_file": "nowhere.pdb", "debug_id": "00112233445566778899AABBCCDDEEFF1"})
    frames.append({"module": missing_i, "rva": "0x1000"})
    expect.append(("missing", "nowhere.pdb", 0x1000, None))
    fault_i = len(modules)
    modules.append({"debug_file": "fault.pdb", "debug_id": "00112233445566778899AABBCCDDEEFF1", "format": "windows"})
    frames.append({"module": fault_i, "rva": "0x1000"})
    expect.append(("fault", "fault.pdb", 0x1000, None))

    st, h, j = srv.json("POST", "/symbolicate", {"modules": modules, "frames": frames, "timeout": 120}, timeout=300)
    c.eq("batch status", st, 200)
    if st != 200:
        print("  answer: %s" % json.dumps(j)[:300])
    if any("placeholder engine" in (m.get("error") or "") for m in j["modules"]):
        srv.close()
        ss.kill()
        harness.skip("this build runs the placeholder engine")
    for mi, m in enumerate(j["modules"][:missing_i]):
        c.eq("module %s found" % m["debug_file"], (m["status"], m["from_cache"]), ("found", False))
        c.true("module %s source is the symbol server" % m["debug_file"],
               (m.get("source") or "").startswith("http://127.0.0.1:%d/" % ss_port), m.get("source"))
    c.eq("missing module", j["modules"][missing_i]["status"], "missing")
    c.eq("failing upstream", j["modules"][fault_i]["status"], "fetch_error")
    bad = 0
    bad_by = {}
    for (kind, name, addr, want), got in zip(expect, j["frames"]):
        if kind == "native":
            ok = got["status"] == "ok" and answer_ok(sym_view(got["symbols"]), want[0], want[1])
            if not ok and bad < 4:
                print("  %s 0x%x: got %s\n    want %s (crosscheck %s)" % (
                    name, addr, json.dumps(got.get("symbols", got)), json.dumps(want[0]), json.dumps(want[1])))
        elif kind == "managed":
            sp = want
            s = got.get("symbols", [{}])[0]
            ok = got["status"] == "ok" and len(got["symbols"]) == 1 and \
                (s.get("file"), s.get("line"), s.get("column"), s.get("end_line"), s.get("end_column")) == \
                (sp["doc"], sp["sl"], sp["sc"], sp["el"], sp["ec"])
            wn = sp["method"].split("(")[0].replace("::", ".").replace("/", "+")
            wn = wn.split("<")[0] if wn.endswith(">") else wn
            ok = ok and s.get("function") == wn and s.get("source_link") == sl_url(sp["doc"])
            e = extras[name].get(addr[0], {})
            ok = ok and all(s.get(f) == e.get(f) for f in ("async_method", "user_method", "generated",
                                                          "local_function"))
            if not ok and bad_by.get(name, 0) < 3:
                print("  %s %s+%d: got %s\n    want %s" % (name, addr[0], addr[1], json.dumps(got), json.dumps(sp)))
        elif kind == "missing":
            ok = got["status"] == "missing_symbols" and got.get("error")
        else:
            ok = got["status"] == "fetch_error" and got.get("error")
        if not ok:
            bad += 1
            bad_by[name] = bad_by.get(name, 0) + 1
    nn = sum(1 for e in expect if e[0] == "native")
    nm = sum(1 for e in expect if e[0] == "managed")
    c.eq("frames not matching the oracles (of %d native, %d managed, 2 error)" % (nn, nm), bad, 0)
    if bad_by:
        print("  mismatches by fixture: %s" % json.dumps(bad_by, sort_keys=True))

    # the same batch again: every module from the cache, the same answers
    st, h, j2 = srv.json("POST", "/symbolicate", {"modules": modules[:missing_i], "frames": frames[:-2]}, timeout=300)
    c.true("second request from the cache", all(m["from_cache"] for m in j2["modules"]), j2["modules"])
    c.true("second request answers the same", j2["frames"] == j["frames"][:-2])

    # v5: the native frames of the first fixtures through /symbolicate/v5
    jobs = []
    for mod, fr, name in native[:3]:
        jobs.append({"memoryMap": [[mod["debug_file"].rsplit("\\", 1)[-1], mod["debug_id"]], ["unused.pdb", "00112233445566778899AABBCCDDEEFF1"]],
                     "stacks": [[[0, f[0]] for f in fr[:200]]]})
    st, h, v5 = srv.json("POST", "/symbolicate/v5", {"jobs": jobs}, timeout=300)
    c.eq("v5 status", st, 200)
    idx = 0
    mism = 0
    for ji, (mod, fr, name) in enumerate(native[:3]):
        res = v5["results"][ji]
        key = mod["debug_file"].rsplit("\\", 1)[-1] + "/" + mod["debug_id"]
        c.eq("v5 found_modules " + name, res["found_modules"], {key: True, "unused.pdb/00112233445566778899AABBCCDDEEFF1": None})
        first = sum(len(x[1]) for x in native[:ji])
        for k, (rva, _, _) in enumerate(fr[:200]):
            ours = j["frames"][first + k].get("symbols")
            if not ours:
                continue
            v = res["stacks"][0][k]
            chain = [{"function": x.get("function"), "file": x.get("file"), "line": x.get("line")} for x in v.get("inlines", [])]
            chain.append({"function": v.get("function"), "file": v.get("file"), "line": v.get("line")})
            want = [{k: x.get(k) for k in ("function", "file", "line")} for x in ours]
            if chain != want or v.get("function_offset") != ours[-1].get("function_offset"):
                mism += 1
                if mism < 5:
                    print("  v5 %s 0x%x: %s vs %s" % (name, rva, json.dumps(v), json.dumps(ours)))
    c.eq("v5 frames equal to /symbolicate", mism, 0)

    # /modules for a cached module
    mod = native[0][0]
    st, h, info = srv.json("GET", "/modules/%s/%s" % (mod["debug_file"].rsplit("\\", 1)[-1], mod["debug_id"]))
    c.eq("GET /modules for a cached module", (st, info.get("status"), info.get("cached")), (200, "found", True))
    c.true("module counts", info.get("counts", {}).get("functions", 0) > 0, info)
    c.eq("exit status after SIGTERM", srv.stop(), 0)
finally:
    srv.close()
    ss.kill()
    ss.wait()
    shutil.rmtree(store, ignore_errors=True)
c.done()
