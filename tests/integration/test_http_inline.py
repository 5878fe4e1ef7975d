"""Small requests answered on the event loop (inline_max_bytes; api.md,
docs/concurrency.md): the same answers, byte for byte, as a worker gives.

- A server with inline_max_bytes = 0 (every request on a worker) and one with
  the default (64K), on copies of one warmed cache, get the same requests,
  each twice (the first loads the modules into memory): /symbolicate with
  every native fixture's frames, a request mixing a missing module, an
  invalid debug_id and a frame whose module index names no entry, a v5 body,
  a body that does not parse, a body of 600 frames (over the old 16K), a v5
  body over 16K (a quarter of the limit) and a body over 64K.  Their status, headers
  that matter and body bytes must be equal.
- The frames of the first request are judged against llvm-symbolizer's
  answers (the fixtures' oracle files, native_oracle.answer_ok), so the
  answers compared are right, not only equal.
- The default server's request log says which requests the event loop
  answered ("answered_by":"event_loop"): the second of each small request
  whose modules are all found, and none of the others (a missing module, a
  body over the limit, a v5 body over a quarter of it go to a worker).
Real `pdbsym serve`, real HTTP."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import alt_for, answer_ok, manifest, rows, sym_view  # noqa: E402
from pdbsym_server import Checks, Server, need_binary, warmed_cache  # noqa: E402

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
need_binary()

c = Checks()
cache = warmed_cache(native_dir)
fixtures = manifest(native_dir)


def module_of(col):
    return {"debug_file": col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1],
            "debug_id": "%s-%x" % (col["guid"].lower(), int(col["age"]))}


# the requests: (label, path, body bytes)
reqs = []
modules, frames, want = [], [], []
for col in fixtures:
    modules.append(module_of(col))
    alt = rows(native_dir, col.get("crosscheck"))
    for lo, hi, ans, _ in rows(native_dir, col["expected"])[:6]:
        frames.append({"module": len(modules) - 1, "rva": "0x%x" % lo})
        want.append((col["name"], ans, alt_for(alt, lo)))
all_body = json.dumps({"modules": modules, "frames": frames}).encode()
reqs.append(("every fixture", "/symbolicate", all_body))
first = fixtures[0]
mixed = {"modules": [module_of(first),
                     {"debug_file": "nothere.pdb", "debug_id": "0123456789abcdef0123456789abcdef-1"},
                     {"debug_file": "bad.pdb", "debug_id": "not-a-guid"}],
         "frames": [{"module": 0, "rva": "0x%x" % rows(native_dir, first["expected"])[0][0]},
                    {"module": 1, "rva": "0x1000"}, {"module": 2, "rva": "0x1000"},
                    {"module": 7, "rva": "0x1000"}]}
reqs.append(("missing, invalid, bad index", "/symbolicate", json.dumps(mixed).encode()))
mm = [[module_of(col)["debug_file"], "%s%X" % (col["guid"].replace("-", "").upper(), int(col["age"]))]
      for col in fixtures]
stack = [[i, rows(native_dir, col["expected"])[0][0]] for i, col in enumerate(fixtures)]
reqs.append(("v5", "/symbolicate/v5", json.dumps({"memoryMap": mm, "stacks": [stack]}).encode()))
reqs.append(("not JSON", "/symbolicate", b'{"modules": ['))
rva0 = rows(native_dir, first["expected"])[0][0]
mid_body = json.dumps({"modules": [module_of(first)], "frames": [{"module": 0, "rva": "0x%x" % rva0}] * 600}).encode()
c.true("the 600-frame body is between 16K and 64K", 16384 < len(mid_body) <= 65536, str(len(mid_body)))
reqs.append(("600 frames, under inline_max_bytes", "/symbolicate", mid_body))
v5_big = json.dumps({"memoryMap": [mm[0]], "stacks": [[[0, rva0]] * 1700]}).encode()
c.true("the big v5 body is over a quarter of 64K", len(v5_big) > 16384, str(len(v5_big)))
reqs.append(("v5 over a quarter of inline_max_bytes", "/symbolicate/v5", v5_big))
big_body = json.dumps({"modules": [module_of(first)], "frames": [{"module": 0, "rva": "0x%x" % rva0}] * 2500}).encode()
c.true("the big body is over 64K", len(big_body) > 65536, str(len(big_body)))
reqs.append(("over inline_max_bytes", "/symbolicate", big_body))


def run(config):
    folder = cache + ("-0" if "= 0" in config else "-d")
    shutil.copytree(cache, folder)
    srv = Server(env={"PDBSYM_CACHE_DIR": folder}, config=config)
    out = []
    try:
        for n, (label, path, body) in enumerate(reqs):
            for k in range(2):
                st, h, data = srv.request("POST", path, body, headers={"Content-Type": "application/json",
                                                                       "X-Request-Id": "r%d-%d" % (n, k)},
                                          timeout=60)
                out.append((label, k, st, h.get("content-type"), data))
        srv.stop()
        # each request's log line, in the order the requests were sent (a
        # line is written when its connection is done with, which another
        # connection's can overtake)
        by_id = {r.get("request_id"): r for r in srv.logs() if r.get("msg") == "request"}
        logs = [by_id.get("r%d-%d" % (n, k), {}) for n in range(len(reqs)) for k in range(2)]
    finally:
        srv.close()
        shutil.rmtree(folder, ignore_errors=True)
    return out, logs


try:
    worker, _ = run("inline_max_bytes = 0\n")
    loop, logs = run("")
    for (label, k, st, ct, data), (_, _, st2, ct2, data2) in zip(worker, loop):
        c.eq("%s (#%d): status" % (label, k + 1), st2, st)
        c.eq("%s (#%d): Content-Type" % (label, k + 1), ct2, ct)
        c.true("%s (#%d): the same body bytes" % (label, k + 1), data2 == data,
               "worker %r\nevent loop %r" % (data[:300], data2[:300]))
    c.eq("statuses", [w[2] for w in worker], [200] * 6 + [400, 400] + [200] * 6)

    j = json.loads(loop[1][4])
    bad = 0
    for (name, ans, alt), a in zip(want, j["frames"]):
        if a.get("status") != "ok" or not answer_ok(sym_view(a.get("symbols", [])), ans, alt):
            bad += 1
            if bad <= 3:
                print("  %s: %s" % (name, json.dumps(a)))
    c.eq("frames not as llvm-symbolizer answers (of %d)" % len(want), bad, 0)

    c.eq("a request log line for each request", [bool(r) for r in logs], [True] * len(logs))
    by = [r.get("answered_by") for r in logs]
    # the first request loads its modules into memory (a worker); after
    # that a small request whose modules are all found is the loop's (v5
    # asks the modules the first request loaded), one with a missing module
    # or a body over the limit a worker's; a body that does not parse needs
    # no module; a v5 body is the loop's up to a quarter of the limit
    L = "event_loop"
    c.eq("answered_by in the request log", by,
         [None, L, None, None, L, L, L, L, L, L, None, None, None, None])
finally:
    shutil.rmtree(cache, ignore_errors=True)
c.done()
