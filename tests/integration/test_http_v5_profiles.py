"""POST /symbolicate/v5 for real profiles and browsers (issue 14; api.md,
"POST /symbolicate/v5"), without a browser (test_http_v5_browser.py has one):

- one library of 100,000 addresses in one job, as the Firefox Profiler sends a
  library with more than 10,000 addresses: answered whole, every frame named
  as llvm-symbolizer names its address (tests/fixtures/native/*.expected.tsv);
  the time and the server's resident memory are printed;
- a request with more jobs than Eliot's 10 (the profiler makes one job per
  library); a request over v5_max_frames is refused, naming it;
- module index -1 and indexes that name no entry: "<unknown>" frames, as
  Eliot answers -1 (the profiler's validator needs every frame's module);
  module_offset -1 echoed "-0x1" as Eliot does;
- a download slower than default_timeout: pending on /symbolicate, found on
  v5, which waits v5_timeout (its clients never ask again);
- CORS as the server speaks it: Access-Control-Allow-Origin on v5's answers
  (errors too), the preflight's headers, none on /symbolicate; a listed
  origin echoed with Vary, another refused; a bad cors_origins stops serve.
Real `pdbsym serve`, real HTTP, a real symbol server (tests/symserver.py)."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import manifest, rows  # noqa: E402
from pdbsym_server import BIN, Checks, Server, need_binary, warmed_cache  # noqa: E402
import fetchlib  # noqa: E402

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
need_binary()

c = Checks()
fixtures = {col["name"]: col for col in manifest(native_dir)}


def proc_kib(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def entry(col):
    return [col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1], col["symkey"]]


def outer_name(ans):
    return ans[-1]["function"] if ans else None


cache = warmed_cache(native_dir)
srv = Server(env={"PDBSYM_CACHE_DIR": cache})
try:
    def post(body, headers=None, raw=None):
        st, h, data = srv.request("POST", "/symbolicate/v5", raw if raw is not None else body, headers=headers,
                                  timeout=300)
        try:
            return st, h, json.loads(data)
        except ValueError:
            return st, h, None

    # ---- one library, 100,000 addresses, one job (default settings)
    col = fixtures["cpp-x64-O2"]
    exp = rows(native_dir, col["expected"])
    code = [(r, outer_name(ans)) for lo, hi, ans, _ in exp for r in range(lo, hi)]
    N = 100000
    addrs = [code[i % len(code)] for i in range(N)]
    body = json.dumps({"jobs": [{"memoryMap": [entry(col)], "stacks": [[[0, r] for r, _ in addrs]]}]}).encode()
    rss0 = proc_kib(srv.proc.pid, "VmRSS")
    t0 = time.monotonic()
    st, h, j = post(None, headers={"Content-Type": "application/json"}, raw=body)
    secs = time.monotonic() - t0
    hwm = proc_kib(srv.proc.pid, "VmHWM")
    c.eq("100,000 addresses: status", st, 200)
    res = j["results"][0] if st == 200 else {"stacks": [[]], "found_modules": {}}
    c.eq("100,000 addresses: found", list(res["found_modules"].values()), [True])
    frames = res["stacks"][0]
    c.eq("100,000 addresses: one frame each, in order", [f["frame"] for f in frames], list(range(N)))
    bad = sum(1 for f, (r, name) in zip(frames, addrs)
              if f.get("module_offset") != "0x%x" % r or f.get("function") != name)
    c.eq("100,000 addresses: frames not named as llvm-symbolizer names them", bad, 0)
    print("  100,000-address job: %.2f s, %.1f MB of JSON in; server RSS %.1f MiB before, peak %.1f MiB" %
          (secs, len(body) / 1e6, rss0 / 1024, hwm / 1024))

    # ---- the profiler's shape: one job per library, more than Eliot's 10
    jobs = []
    want = []
    for name, col in sorted(fixtures.items()):
        lo, hi, ans, _ = rows(native_dir, col["expected"])[0]
        jobs.append({"memoryMap": [entry(col)], "stacks": [[[0, lo], [0, hi - 1]]]})
        want.append(outer_name(ans))
    jobs = jobs + jobs  # 34 jobs
    want = want + want
    st, h, j = post({"jobs": jobs})
    c.eq("%d jobs: status" % len(jobs), st, 200)
    c.eq("%d jobs: one result each" % len(jobs), len(j["results"]), len(jobs))
    got = [r["stacks"][0][0].get("function") for r in j["results"]]
    # publics-only PDBs: llvm-symbolizer's oracle rows name the decorated
    # public; v5 gives the undecorated name (api.md)
    c.eq("%d jobs: functions" % len(jobs), [g if w and not w.startswith(("_", "?")) else None for g, w in zip(got, want)],
         [w if w and not w.startswith(("_", "?")) else None for w in want])

    st, h, j = post({"memoryMap": [entry(col)], "stacks": [[[0, 4096]] * 200001]})
    c.eq("200,001 addresses: 400", st, 400)
    c.true("200,001 addresses: names v5_max_frames", j and "v5_max_frames = 200000" in j.get("error", ""), j)

    # ---- module indexes that name no module; negative offsets
    col = fixtures["c-x64-O2"]
    lo, hi, ans, _ = rows(native_dir, col["expected"])[0]
    st, h, j = post({"memoryMap": [entry(col)], "stacks": [[[0, lo], [-1, 4660], [1, 16], [-7, 5], [0, -1], [-1, -1]]]})
    c.eq("unknown indexes: status", st, 200)
    fs = j["results"][0]["stacks"][0]
    c.eq("index 0 named", fs[0].get("function"), outer_name(ans))
    c.eq("index -1", fs[1], {"frame": 1, "module": "<unknown>", "module_offset": "0x1234"})
    c.eq("index past the memoryMap", fs[2], {"frame": 2, "module": "<unknown>", "module_offset": "0x10"})
    c.eq("index -7", fs[3], {"frame": 3, "module": "<unknown>", "module_offset": "0x5"})
    c.eq("offset -1", fs[4], {"frame": 4, "module": entry(col)[0], "module_offset": "-0x1"})
    c.eq("index -1, offset -1", fs[5], {"frame": 5, "module": "<unknown>", "module_offset": "-0x1"})
    c.true("every frame has module, module_offset and frame (the profiler's validator)",
           all({"module", "module_offset", "frame"} <= set(f) for f in fs), fs)

    # ---- CORS as the server answers it
    st, h, j = post({"memoryMap": [], "stacks": []}, headers={"Origin": "http://page.example"})
    c.eq("v5 answer: Access-Control-Allow-Origin", h.get("access-control-allow-origin"), "*")
    c.true("v5 answer: X-Request-Id exposed", "X-Request-Id" in h.get("access-control-expose-headers", ""), h)
    st, h, j = post(None, headers={"Origin": "http://page.example", "Content-Type": "application/json"}, raw=b"{nope")
    c.eq("v5 400: Access-Control-Allow-Origin", (st, h.get("access-control-allow-origin")), (400, "*"))
    st, h, data = srv.request("OPTIONS", "/symbolicate/v5", headers={
        "Origin": "http://page.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    c.eq("preflight: 204", st, 204)
    c.eq("preflight: headers", (h.get("access-control-allow-origin"), h.get("access-control-allow-methods"),
                                h.get("access-control-max-age")), ("*", "POST, OPTIONS", "600"))
    c.true("preflight: Content-Type allowed", "content-type" in h.get("access-control-allow-headers", "").lower(), h)
    c.true("preflight: no private-network grant through *", "access-control-allow-private-network" not in h, h)
    st, h, data = srv.request("POST", "/symbolicate", {"modules": [], "frames": []}, headers={"Origin": "http://page.example"})
    c.eq("/symbolicate: no CORS", (st, h.get("access-control-allow-origin")), (200, None))
    st, h, data = srv.request("OPTIONS", "/symbolicate", headers={"Origin": "http://page.example"})
    c.eq("OPTIONS /symbolicate: 405", (st, h.get("allow")), (405, "POST"))
    st, h, data = srv.request("GET", "/symbolicate/v5")
    c.eq("GET /symbolicate/v5: 405 allows OPTIONS", (st, h.get("allow")), (405, "POST, OPTIONS"))
finally:
    srv.close()

# ---- a listed origin; others refused
srv = Server(config="cors_origins = http://127.0.0.1:9, https://profiler.firefox.com\ncors_max_age = 60\n")
try:
    for origin, allowed in (("http://127.0.0.1:9", True), ("https://profiler.firefox.com", True),
                            ("HTTPS://PROFILER.FIREFOX.COM", True), ("http://127.0.0.1:10", False),
                            ("https://profiler.firefox.com.evil.example", False), ("null", False)):
        st, h, data = srv.request("POST", "/symbolicate/v5", {"memoryMap": [], "stacks": []}, headers={"Origin": origin})
        c.eq("listed %s: Allow-Origin" % origin, h.get("access-control-allow-origin"), origin if allowed else None)
        c.eq("listed %s: Vary" % origin, h.get("vary"), "Origin")
        st, h, data = srv.request("OPTIONS", "/symbolicate/v5", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Private-Network": "true"})
        c.eq("listed %s: preflight" % origin, st, 204 if allowed else 403)
        if allowed:
            c.eq("listed %s: private network granted, max age" % origin,
                 (h.get("access-control-allow-private-network"), h.get("access-control-max-age")), ("true", "60"))
        else:
            c.true("listed %s: the refusal names cors_origins" % origin, b"cors_origins" in data, data)
finally:
    srv.close()
for bad in ("http://x/path", "ftp://x", "x.example", "http://"):
    with tempfile.TemporaryDirectory(prefix="pdbsym-badcors-") as bad_cache:
        r = subprocess.run([BIN, "serve", "--cors-origins", bad, "--listen", "127.0.0.1:0"], capture_output=True,
                           text=True, timeout=20, env={"PATH": os.environ.get("PATH", ""), "PDBSYM_OFFLINE": "true",
                                                       "PDBSYM_CACHE_DIR": bad_cache})
    c.true("cors_origins %r: serve exits 2 naming it" % bad, r.returncode == 2 and "cors_origins" in r.stderr, r.stderr)

# ---- a slow download: pending on /symbolicate after default_timeout, found on v5 within v5_timeout
store = tempfile.mkdtemp(prefix="pdbsym-v5-store-")
slow = []
for name in ("c-x64-O2", "cpp-x64-O2"):
    col = fixtures[name]
    f, key = entry(col)
    d = os.path.join(store, f, key)
    os.makedirs(d)
    with open(os.path.join(d, f), "wb") as out:
        out.write(gzip.open(os.path.join(native_dir, col["pdb"])).read())
    slow.append((col, "/%s/%s/%s" % (f, key, f)))
sym = fetchlib.Server(store)
sym.control({p: {"delay": 4} for _, p in slow})
srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + sym.url, "PDBSYM_OFFLINE": "false"},
             config="default_timeout = 1\nv5_timeout = 60\n")
try:
    col, _ = slow[0]
    st, h, data = srv.request("POST", "/symbolicate", {"modules": [{"debug_file": col["cv_path"], "debug_id": col["symkey"]}],
                                                       "frames": [{"module": 0, "rva": 4096}]})
    c.eq("/symbolicate, a 4 s download, default_timeout 1: pending", json.loads(data)["modules"][0]["status"], "pending")
    col, _ = slow[1]
    lo, hi, ans, _ = rows(native_dir, col["expected"])[0]
    t0 = time.monotonic()
    st, h, data = srv.request("POST", "/symbolicate/v5", {"memoryMap": [entry(col)], "stacks": [[[0, lo]]]}, timeout=120)
    j = json.loads(data)
    c.eq("v5, a 4 s download: found (waited %.1f s)" % (time.monotonic() - t0),
         list(j["results"][0]["found_modules"].values()), [True])
    c.eq("v5, a 4 s download: named", j["results"][0]["stacks"][0][0].get("function"), outer_name(ans))
finally:
    srv.close()
    sym.stop()
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
c.done()
