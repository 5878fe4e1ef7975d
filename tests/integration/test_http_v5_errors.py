"""Limits and errors of POST /symbolicate/v5 (issues 10 and 14): more jobs
than v5_max_jobs, malformed jobs, the v5 limits, found_modules false for a
module that was looked for and is missing, and a module with a bad name or
id failing alone.  Real `pdbsym serve`, real HTTP."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, Server  # noqa: E402

c = Checks()
srv = Server(config="v5_max_frames = 12\nv5_max_jobs = 10\nmax_frames = 1\nmax_modules = 20\n")
MISSING = ["nowhere.pdb", "00112233445566778899AABBCCDDEEFF1"]
try:
    def post(body):
        st, h, data = srv.request("POST", "/symbolicate/v5", body)
        try:
            j = json.loads(data)
        except ValueError:
            j = None
        c.eq("content-type is JSON (%d)" % st, h.get("content-type"), "application/json")
        return st, j

    job = {"memoryMap": [MISSING], "stacks": [[[0, 16]]]}
    st, j = post({"jobs": [job] * 11})
    c.eq("11 jobs: 400", st, 400)
    c.true("11 jobs: the error names the limit", j and "v5_max_jobs = 10" in j.get("error", ""), j)

    st, j = post({"jobs": [job] * 10})
    c.eq("10 jobs: 200", st, 200)
    c.eq("10 jobs: 10 results", len(j["results"]), 10)

    st, j = post(job)  # a bare job
    c.eq("bare job: 200", st, 200)
    res = j["results"][0]
    c.eq("missing module: found_modules false", res["found_modules"], {"nowhere.pdb/" + MISSING[1]: False})
    c.eq("missing module: frame has no symbols",
         res["stacks"][0][0], {"frame": 0, "module": "nowhere.pdb", "module_offset": "0x10"})

    for what, body in [
        ("jobs not an array", {"jobs": 3}),
        ("memoryMap not an array", {"memoryMap": 1, "stacks": []}),
        ("memoryMap entry not a pair", {"memoryMap": [["a.pdb"]], "stacks": []}),
        ("frame not a pair", {"memoryMap": [MISSING], "stacks": [[[0]]]}),
        ("stacks not an array", {"memoryMap": [MISSING], "stacks": {}}),
    ]:
        st, j = post(body)
        c.eq(what + ": 400", st, 400)
        c.true(what + ": JSON error", j is not None and isinstance(j.get("error"), str), j)

    # a bad name or id fails that module alone: false, its frames unnamed
    for what, entry in [("bad breakpad id", ["a.pdb", "xyz"]), ("bad debug file", ["bad\u0001.pdb", MISSING[1]])]:
        st, j = post({"memoryMap": [entry, MISSING], "stacks": [[[0, 16], [1, 32]]]})
        c.eq(what + ": 200", st, 200)
        res = j["results"][0] if st == 200 else {}
        c.eq(what + ": found_modules", res.get("found_modules"),
             {entry[0] + "/" + entry[1]: False, "nowhere.pdb/" + MISSING[1]: False})
        c.eq(what + ": its frame", res.get("stacks", [[{}]])[0][0], {"frame": 0, "module": entry[0], "module_offset": "0x10"})
    # v5_max_frames counts the addresses of every job together, max_frames is /symbolicate's
    st, j = post({"memoryMap": [MISSING], "stacks": [[[0, i] for i in range(12)]]})
    c.eq("12 addresses (v5_max_frames, over max_frames): 200", st, 200)
    st, j = post({"memoryMap": [MISSING], "stacks": [[[0, i] for i in range(13)]]})
    c.eq("over v5_max_frames: 400", st, 400)
    c.true("over v5_max_frames: names the limit", j and "v5_max_frames = 12" in j.get("error", ""), j)
    st, j = post({"jobs": [{"memoryMap": [MISSING], "stacks": [[[0, i] for i in range(7)]]}] * 2})
    c.eq("over v5_max_frames in two jobs: 400", st, 400)
    c.eq("over v5_max_frames in two jobs: field", j.get("field"), "jobs[1].stacks")
    st, j = post({"memoryMap": [MISSING] * 21, "stacks": []})
    c.eq("over max_modules: 400", st, 400)
    c.true("over max_modules: names the limit", j and "20" in j.get("error", ""), j)

    st, h, data = srv.request("POST", "/symbolicate/v5", b"{not json")
    c.eq("bad JSON: 400", st, 400)
finally:
    srv.close()
sys.exit(c.done())
