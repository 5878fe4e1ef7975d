"""Debug ids in every form the ecosystem prints, and a bad module failing
alone (issue 14; docs/contract.md, "Modules"; api.md, "Debug ids").

- Every native fixture named in each form (GUID-age, Breakpad's 32 hex digits
  + age, 32 hex digits, a dash and the age; upper, lower and mixed case) on
  POST /symbolicate, GET /modules and POST /symbolicate/v5: found, and its
  frames answered as llvm-symbolizer answers them (the fixtures' oracle files,
  tests/fixtures/native/*.expected.tsv, judged by native_oracle.answer_ok).
  The ids are spelt here from the MANIFEST's GUID and age (llvm-pdbutil's
  reading), not from pdbsym.
- An id without an age: a Portable PDB's key when no format is given, refused
  with a message naming the missing age for format "windows" and on v5.
- Malformed ids: each module fails alone, with the message naming its problem;
  the request's other modules are answered, on both routes.
Real `pdbsym serve`, real HTTP, the fixtures' PDBs warmed into its cache."""
import json
import os
import shutil
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_oracle import alt_for, answer_ok, manifest, rows, sym_view  # noqa: E402
from pdbsym_server import Checks, Server, need_binary, warmed_cache  # noqa: E402

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
need_binary()

c = Checks()
cache = warmed_cache(native_dir)
srv = Server(env={"PDBSYM_CACHE_DIR": cache})


def forms(guid, age):
    """The spellings of one id: guid is the MANIFEST's 8-4-4-4-12 GUID."""
    g = guid.lower()
    h = g.replace("-", "")
    return {
        "GUID-age": "%s-%x" % (g, age),
        "GUID-age upper": ("%s-%x" % (g, age)).upper(),
        "Breakpad": "%s%X" % (h.upper(), age),
        "Breakpad lower": "%s%x" % (h, age),
        "32 hex-age": "%s-%x" % (h, age),
        "32 hex-age upper": "%s-%X" % (h.upper(), age),
        "mixed case": "".join(ch.upper() if i % 2 else ch for i, ch in enumerate("%s%x" % (h, age))),
    }


def post(path, body):
    st, h, data = srv.request("POST", path, body, timeout=60)
    try:
        return st, json.loads(data)
    except ValueError:
        return st, None


try:
    fixtures = manifest(native_dir)
    # ---- every form of every fixture's id, on /symbolicate
    modules, frames, want = [], [], []
    for col in fixtures:
        exp = rows(native_dir, col["expected"])
        alt = rows(native_dir, col.get("crosscheck"))
        for name, did in forms(col["guid"], int(col["age"])).items():
            modules.append({"debug_file": col["cv_path"], "debug_id": did})
            for lo, hi, ans, _ in exp[:3]:
                frames.append({"module": len(modules) - 1, "rva": lo})
                want.append((col["name"], name, ans, alt_for(alt, lo)))
    st, j = post("/symbolicate", {"modules": modules, "frames": frames})
    c.eq("every form: status", st, 200)
    canon = {col["name"]: "%s-%x" % (col["guid"].lower(), int(col["age"])) for col in fixtures}
    bad_mod = [(m["debug_id"], a.get("status")) for m, a in zip(modules, j["modules"])
               if a.get("status") != "found" or a.get("format") != "windows"]
    c.eq("every form: modules not found (of %d)" % len(modules), bad_mod, [])
    c.eq("every form: the answer's debug_id is the canonical GUID-age",
         [a["debug_id"] for a in j["modules"]],
         [canon[col["name"]] for col in fixtures for _ in forms(col["guid"], 1)])
    bad = 0
    for (name, form, ans, alt), a in zip(want, j["frames"]):
        if a.get("status") != "ok" or not answer_ok(sym_view(a.get("symbols", [])), ans, alt):
            bad += 1
            if bad <= 3:
                print("  %s (%s): %s" % (name, form, json.dumps(a)))
    c.eq("every form: frames not as llvm-symbolizer answers (of %d)" % len(frames), bad, 0)

    # ---- GET /modules in every form
    col = fixtures[0]
    file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    for name, did in forms(col["guid"], int(col["age"])).items():
        st, h, data = srv.request("GET", "/modules/%s/%s" % (file, urllib.parse.quote(did)))
        jj = json.loads(data)
        c.eq("GET /modules, %s: found" % name, (st, jj.get("status"), jj.get("debug_id")), (200, "found", canon[col["name"]]))

    # ---- v5 in every Breakpad-like form (v5 names Windows PDBs)
    mm, stacks, want5 = [], [], []
    for col in fixtures:
        lo = rows(native_dir, col["expected"])[0][0]
        ans = rows(native_dir, col["expected"])[0][2]
        for name, did in forms(col["guid"], int(col["age"])).items():
            mm.append([col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1], did])
            stacks.append([len(mm) - 1, lo])
            want5.append(ans[-1]["function"] if ans else None)
    st, j = post("/symbolicate/v5", {"memoryMap": mm, "stacks": [stacks]})
    c.eq("v5 every form: status", st, 200)
    res = j["results"][0]
    c.eq("v5 every form: found_modules all true", sorted(set(res["found_modules"].values())), [True])
    c.eq("v5 every form: a key per entry as given", sorted(res["found_modules"]), sorted("%s/%s" % (a, b) for a, b in mm))
    got5 = [f.get("function") for f in res["stacks"][0]]
    # the same addresses on /symbolicate, whose answers were judged against
    # the oracle above (v5 has no "mangled": a publics-only PDB's decorated
    # name is not in its answer)
    st, j1 = post("/symbolicate", {"modules": [{"debug_file": a, "debug_id": b} for a, b in mm],
                                   "frames": [{"module": i, "rva": off} for i, off in stacks]})
    bad5 = 0
    for g, w, a in zip(got5, want5, j1["frames"]):
        ours = (a.get("symbols") or [{}])[-1]
        if g != ours.get("function") or (w and w != (ours.get("mangled") or g)):
            bad5 += 1
            print("  v5 %r, /symbolicate %r, llvm-symbolizer %r" % (g, ours, w))
    c.eq("v5 every form: functions not as /symbolicate and llvm-symbolizer name them", bad5, 0)

    # ---- an id without an age
    col = fixtures[0]
    h32 = col["guid"].replace("-", "")
    for what, mod, status, fmt, says in [
            ("32 digits, no format", {"debug_id": h32}, "missing", "portable", None),
            ("GUID alone, no format", {"debug_id": col["guid"]}, "missing", "portable", None),
            ("32 digits, format portable", {"debug_id": h32.lower(), "format": "portable"}, "missing", "portable", None),
            ("32 digits, format windows", {"debug_id": h32, "format": "windows"}, "invalid", None, "no age"),
            ("age 0 given", {"debug_id": h32 + "0"}, "missing", None, None)]:
        m = dict({"debug_file": col["cv_path"]}, **mod)
        st, j = post("/symbolicate", {"modules": [m], "frames": [{"module": 0, "rva": 4096}]})
        a = j["modules"][0]
        c.eq(what + ": module status", a.get("status"), status)
        if fmt:
            c.eq(what + ": format", a.get("format"), fmt)
        if says:
            c.true(what + ": error names the missing age", says in a.get("error", ""), a)
            c.eq(what + ": field", a.get("field"), "modules[0].debug_id")
            c.eq(what + ": frame", j["frames"][0]["status"], "invalid")
        if status == "missing" and fmt == "portable":
            c.eq(what + ": debug_id is the GUID alone", a.get("debug_id"), col["guid"].lower())
    st, j = post("/symbolicate/v5", {"memoryMap": [[file, h32]], "stacks": [[[0, 4096]]]})
    c.eq("v5, 32 digits without an age: false", j["results"][0]["found_modules"], {file + "/" + h32: False})

    # ---- malformed ids: each fails alone, its message naming the problem
    good = {"debug_file": col["cv_path"], "debug_id": col["symkey"]}
    lo = rows(native_dir, col["expected"])[0][0]
    cases = [
        ("letters", "xyz", "not a hex digit in the GUID"),
        ("31 digits", h32[:31], "shorter than a GUID"),
        ("age too long", h32 + "123456789", "more than 8 hex digits after the GUID"),
        ("dash, age too long", h32 + "-123456789", "age is longer than 8 hex digits"),
        ("dash, no age", h32 + "-", "nothing after the '-'"),
        ("GUID, dash, no age", col["guid"] + "-", "nothing after the '-'"),
        ("GUID, age glued on", col["guid"] + "1", "expected '-' and the age"),
        ("dashes misplaced", col["guid"].replace("-", "", 1)[:8] + "-" + h32[8:] + "-1", "dashes must split it 8-4-4-4-12"),
        ("empty", "", "empty"),
        ("not a string", 5, "debug_id must be a string"),
    ]
    mods = [good]
    for _, did, _ in cases:
        mods.append({"debug_file": col["cv_path"], "debug_id": did})
    mods.append(good)
    fr = [{"module": i, "rva": lo} for i in range(len(mods))]
    st, j = post("/symbolicate", {"modules": mods, "frames": fr})
    c.eq("bad ids among good: 200", st, 200)
    c.eq("bad ids among good: the good modules", (j["modules"][0]["status"], j["modules"][-1]["status"]), ("found", "found"))
    c.eq("bad ids among good: the good frames", (j["frames"][0]["status"], j["frames"][-1]["status"]), ("ok", "ok"))
    for k, (what, did, says) in enumerate(cases, start=1):
        a, f = j["modules"][k], j["frames"][k]
        c.eq(what + ": module invalid", (a.get("status"), a.get("field")), ("invalid", "modules[%d].debug_id" % k))
        c.true(what + ": the message says " + says, says in a.get("error", ""), a)
        c.eq(what + ": the id as given", a.get("debug_id"), did if isinstance(did, str) else None)
        c.true(what + ": its frame invalid with the reason", f["status"] == "invalid" and says in f.get("error", ""), f)
    # the same on v5: false for the bad entries only, their frames unnamed
    file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    mm = [[file, col["symkey"]]] + [[file, did] for _, did, _ in cases if isinstance(did, str)]
    st, j = post("/symbolicate/v5", {"memoryMap": mm, "stacks": [[[i, lo] for i in range(len(mm))]]})
    c.eq("v5 bad ids among good: 200", st, 200)
    fm = j["results"][0]["found_modules"]
    c.eq("v5 bad ids among good: found_modules", [fm.get("%s/%s" % tuple(e)) for e in mm],
         [True] + [False] * (len(mm) - 1))
    fs = j["results"][0]["stacks"][0]
    c.true("v5 bad ids among good: the good frame named", "function" in fs[0], fs[0])
    c.true("v5 bad ids among good: the bad frames not", all("function" not in f and f["module"] == file for f in fs[1:]), fs)

    # ---- code ids: any case; a bad one fails its module alone
    for what, cid, status in [("symstore's casing", "9E041B735000", "found"), ("lower case", "9e041b735000", "found"),
                              ("upper case", "9E041B735000".upper(), "found"), ("not hex", "9E041B73ZZZZ", "invalid"),
                              ("short", "9E041B7", "invalid")]:
        m = dict(good, code_file="c-x64-O2.exe", code_id=cid)
        st, j = post("/symbolicate", {"modules": [m, good], "frames": [{"module": 0, "rva": lo}, {"module": 1, "rva": lo}]})
        c.eq("code_id %s: module" % what, j["modules"][0]["status"], status)
        c.eq("code_id %s: the other module" % what, j["modules"][1]["status"], "found")
finally:
    srv.close()
    shutil.rmtree(cache, ignore_errors=True)
c.done()
