"""Absolute addresses and return addresses on POST /symbolicate (issue 14;
api.md, "Absolute addresses"): modules with image_addr and image_size, frames
with instruction_addr, the request's instruction_addr_adjustment and the
frames' adjust_instruction_addr, on the native fixtures.

Oracle: llvm-symbolizer-19 (Debian's llvm-19), run by this test on each
fixture's image and PDB, asked at the address the frame should be looked up
at: instruction_addr - image_addr, minus 1 for a return address.  Which frames
are return addresses is worked out here from the request (every frame of a
stack but its first, unless the frame says otherwise), not read from pdbsym.
The answers are judged by the fixtures' rule (native_oracle.answer_ok: equal,
or one of the conventions tests/fixtures/native/README.md documents).
Real `pdbsym serve`, real HTTP, the fixtures' PDBs warmed into its cache."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from native_oracle import alt_for, answer_ok, manifest, oracle_view, rows, sym_view  # noqa: E402
from pdbsym_server import Checks, Server, need_binary, warmed_cache  # noqa: E402

LLVM = "/usr/lib/llvm-19/bin/llvm-symbolizer"
root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
managed_dir = os.path.join(root, "tests", "fixtures", "managed")
need_binary()
if not os.path.exists(LLVM):
    harness.skip("%s absent (scripts/deps.sh --test installs llvm-19)" % LLVM)

c = Checks()
stage = tempfile.mkdtemp(prefix="pdbsym-absolute-")
cache = warmed_cache(native_dir, managed_dir)
srv = Server(env={"PDBSYM_CACHE_DIR": cache}, config="max_frames = 100000\n")


def llvm19(col, rvas):
    """llvm-symbolizer-19's frames for each RVA of fixture col (image and PDB
    staged side by side, the PDB under the name the image's CodeView gives)."""
    d = os.path.join(stage, col["name"])
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, col["exe"])
    shutil.copyfile(os.path.join(native_dir, col["exe"]), exe)
    pdb_name = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    with open(os.path.join(d, pdb_name), "wb") as f:
        f.write(gzip.open(os.path.join(native_dir, col["pdb"])).read())
    out = subprocess.run([LLVM, "--relative-address", "--inlines", "--functions=short", "--no-demangle",
                          "--output-style=JSON", "--obj=" + exe],
                         input="".join("0x%x\n" % r for r in rvas), capture_output=True, text=True,
                         timeout=300).stdout.splitlines()
    ans = []
    for line in out:
        j = json.loads(line)
        ans.append([{"function": s["FunctionName"], "file": s["FileName"], "line": s["Line"]}
                    for s in j.get("Symbol", []) if s.get("FunctionName") or s.get("FileName")])
    return ans


def post(body):
    st, h, data = srv.request("POST", "/symbolicate", body, timeout=120)
    try:
        return st, json.loads(data)
    except ValueError:
        return st, None


try:
    # publics-only PDBs are left out: llvm-symbolizer answers nothing from them
    fixtures = [col for col in manifest(native_dir) if col["variant"] != "pub"]
    c.true("native fixtures to check", len(fixtures) >= 12, len(fixtures))
    total = adjusted_total = crossed = 0
    for col in fixtures:
        base = 0x00400000 if col["arch"] == "x86" else 0x7FF6A0000000
        size = int(col["image_size"], 16)
        module = {"debug_file": col["cv_path"], "debug_id": col["symkey"],
                  "image_addr": "0x%x" % base, "image_size": "0x%x" % size}
        # addresses: the first, second and last byte of every run of RVAs with
        # one answer, so that a return address at a run's first byte is looked
        # up in the run before it
        rvas = sorted({r for lo, hi, _, _ in rows(native_dir, col["expected"]) for r in (lo, min(lo + 1, hi - 1), hi - 1)})
        # three stacks at a time, their frames interleaved in the request
        frames, expect = [], []  # expect: (rva, looked-up rva, adjusted, given as instruction_addr)
        first_seen = set()
        for i, rva in enumerate(rvas):
            stack = (i // 12) * 3 + i % 3
            f = {"module": 0, "stack": stack}
            absolute = i % 11 != 5
            if absolute:
                f["instruction_addr"] = "0x%x" % (base + rva)
            else:
                f["rva"] = "0x%x" % rva
            adjust = stack in first_seen  # all_but_first: every frame but the stack's first
            first_seen.add(stack)
            if i % 7 == 3:  # the frame's own adjust_instruction_addr wins
                adjust = not adjust
                f["adjust_instruction_addr"] = adjust
            frames.append(f)
            expect.append((rva, rva - 1 if adjust else rva, adjust, absolute))
        st, j = post({"modules": [module], "frames": frames, "instruction_addr_adjustment": "all_but_first"})
        c.eq(col["name"] + ": status", st, 200)
        if st != 200:
            continue
        c.eq(col["name"] + ": module found", j["modules"][0]["status"], "found")
        want = llvm19(col, [e[1] for e in expect])
        c.eq(col["name"] + ": llvm-symbolizer-19 answered every address", len(want), len(expect))
        alt = rows(native_dir, col.get("crosscheck"))
        bad = 0
        for (rva, look, adjust, absolute), a, w in zip(expect, j["frames"], want):
            fields_ok = (a.get("rva") == "0x%x" % rva and a.get("adjust_instruction_addr", False) == adjust and
                         a.get("instruction_addr") == ("0x%x" % (base + rva) if absolute else None))
            status_ok = a["status"] == ("ok" if w else "unknown_address")
            got = sym_view(a.get("symbols", []))
            if not (fields_ok and status_ok and answer_ok(got, w, alt_for(alt, look))):
                bad += 1
                if bad <= 3:
                    print("  %s rva 0x%x (looked up at 0x%x): ours %s, llvm-symbolizer-19 %s" %
                          (col["name"], rva, look, json.dumps(a), json.dumps(oracle_view(w))))
            total += 1
            adjusted_total += adjust
            # a return address at the first byte of a run is looked up in the run before
            crossed += adjust and any(lo == rva for lo, _, _, _ in rows(native_dir, col["expected"]))
        c.eq(col["name"] + ": frames not as llvm-symbolizer-19 answers their looked-up address", bad, 0)
    print("  %d frames, %d looked up as return addresses (%d of them at a run's first byte)" %
          (total, adjusted_total, crossed))
    c.true("some return addresses cross into the run before", crossed > 50, crossed)

    # "all" and "none"; managed frames are never adjusted
    col = fixtures[0]
    m = {"debug_file": col["cv_path"], "debug_id": col["symkey"], "image_addr": 4096}
    lo = rows(native_dir, col["expected"])[1][0]
    for mode, want_adj in (("all", [True, True]), ("none", [False, False]), (None, [False, False])):
        body = {"modules": [m], "frames": [{"module": 0, "instruction_addr": 4096 + lo},
                                           {"module": 0, "instruction_addr": 4096 + lo}]}
        if mode:
            body["instruction_addr_adjustment"] = mode
        st, j = post(body)
        c.eq("mode %s: adjusted frames" % mode, [f.get("adjust_instruction_addr", False) for f in j["frames"]],
             want_adj)
    demo = os.path.join(managed_dir, "windows-debug")
    if os.path.isdir(demo):
        mrow = [ln.split("\t") for ln in open(os.path.join(managed_dir, "MANIFEST.tsv"))
                if ln.startswith("windows-debug/Demo.pdb")]
        mid = mrow[0][2].split()[0] + "-" + mrow[0][2].split("age=")[1].split()[0] if mrow else None
        mm = {"debug_file": "Demo.pdb", "debug_id": mid}
        plain = post({"modules": [mm], "frames": [{"module": 0, "token": "0x06000001", "il_offset": 2}]})[1]
        adj = post({"modules": [mm], "frames": [{"module": 0, "token": "0x06000001", "il_offset": 2},
                                                {"module": 0, "token": "0x06000001", "il_offset": 2,
                                                 "adjust_instruction_addr": True}],
                    "instruction_addr_adjustment": "all"})[1]
        c.eq("managed frame found", plain["frames"][0]["status"], "ok")
        c.eq("managed frames are not adjusted", adj["frames"], [plain["frames"][0]] * 2)

    # frames and modules that cannot be placed
    m = {"debug_file": col["cv_path"], "debug_id": col["symkey"], "image_addr": "0x140000000", "image_size": "0x5000"}
    noimg = {"debug_file": col["cv_path"], "debug_id": col["symkey"]}
    st, j = post({"modules": [m, noimg], "frames": [
        {"module": 0, "instruction_addr": "0x13fffffff"},
        {"module": 0, "instruction_addr": "0x140005000"},
        {"module": 0, "instruction_addr": "0x140004fff"},
        {"module": 1, "instruction_addr": "0x140001000"},
        {"module": 0, "instruction_addr": "0x140000000", "adjust_instruction_addr": True},
        {"module": 0, "instruction_addr": -5}]})
    f = j["frames"]
    for i, (what, says) in enumerate([("below image_addr", "below its module's image_addr"),
                                      ("at image_addr + image_size", "past its module's image_addr + image_size"),
                                      ("last byte of the image", None),
                                      ("module without image_addr", "needs its module's image_addr"),
                                      ("return address at the first byte", "cannot be its module's first byte"),
                                      ("negative", "negative")]):
        if says is None:
            c.true(what + ": answered", f[i]["status"] in ("ok", "unknown_address") and f[i].get("rva") == "0x4fff", f[i])
        else:
            c.eq(what + ": invalid", f[i]["status"], "invalid")
            c.true(what + ": error says " + says, says in f[i].get("error", ""), f[i])
    c.eq("the modules are valid", [x["status"] for x in j["modules"]], ["found", "found"])
    for what, bad, says in [("image_addr not a number", dict(m, image_addr="base"), "image_addr must be"),
                            ("image_size 0", dict(m, image_size=0), "image_size must be"),
                            ("image_size alone", dict(noimg, image_size=16), "image_size without image_addr"),
                            ("past 2^64", dict(m, image_addr="0xffffffffffffff00", image_size="0x1000"), "past 2^64")]:
        st, j = post({"modules": [bad, noimg], "frames": [{"module": 0, "rva": 4096}, {"module": 1, "rva": 4096}]})
        c.eq(what + ": module invalid", j["modules"][0]["status"], "invalid")
        c.true(what + ": error says " + says, says in j["modules"][0].get("error", ""), j["modules"][0])
        c.eq(what + ": the other module answers", j["frames"][1]["status"], "ok")
    for what, body, field in [
            ("unknown mode", {"modules": [m], "frames": [], "instruction_addr_adjustment": "some"}, "instruction_addr_adjustment"),
            ("rva and instruction_addr", {"modules": [m], "frames": [{"module": 0, "rva": 1, "instruction_addr": 2}]}, "frames[0]"),
            ("adjust not a boolean", {"modules": [m], "frames": [{"module": 0, "rva": 1, "adjust_instruction_addr": 1}]},
             "frames[0].adjust_instruction_addr"),
            ("stack negative", {"modules": [m], "frames": [{"module": 0, "rva": 1, "stack": -1}]}, "frames[0].stack")]:
        st, j = post(body)
        c.eq(what + ": 400", st, 400)
        c.eq(what + ": field", j and j.get("field"), field)
finally:
    srv.close()
    shutil.rmtree(stage, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
c.done()
