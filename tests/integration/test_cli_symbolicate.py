"""`pdbsym symbolicate` as a user runs it: a POST /symbolicate body on stdin,
the answer on stdout.  The same request goes to `pdbsym serve` (each with its
own cache, both fetching from the real test symbol server): the answers must
be equal, frame for frame, and so must the 400 bodies of bad requests.  Also:
the second run is answered from the cache; --offline never asks upstream; the
body from a FILE argument; /symbolicate/v5 with --v5; the settings (environment,
config file, flags) choose the cache folder and limits as for serve."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
from clilib import Checks, Sandbox, SymServer  # noqa: E402
from pdbsym_server import Server  # noqa: E402

clilib.need_binary()
if not os.path.exists(os.path.join(clilib.NATIVE, "MANIFEST.tsv")):
    harness.skip("tests/fixtures/native absent")

c = Checks()
sb = Sandbox("pdbsym-cli-symbolicate-")
ss = SymServer(sb.path("store"))
srv = None
try:
    rows = clilib.native_store(ss)
    wd = os.path.join(clilib.MANAGED, "windows-debug")
    cv = [x for x in map(json.loads, open(os.path.join(wd, "Demo.dll.srm.jsonl"))) if x.get("type") == "CodeView"][0]
    key = cv["guid"].replace("-", "").upper() + "%X" % cv["age"]
    ss.put("Demo.pdb", key, open(os.path.join(wd, "Demo.pdb"), "rb").read())
    dll = open(os.path.join(wd, "Demo.dll"), "rb").read()
    import struct
    pe = struct.unpack_from("<I", dll, 0x3C)[0]
    code_id = "%08X%X" % (struct.unpack_from("<I", dll, pe + 8)[0], struct.unpack_from("<I", dll, pe + 24 + 56)[0])
    ss.put("Demo.dll", code_id, dll)
    sps = [x for x in map(json.loads, open(os.path.join(wd, "Demo.pdb.winpdb.jsonl"))) if x["kind"] == "sp"]

    modules = [{"debug_file": r["cv_path"], "debug_id": r["symkey"]} for r in rows[:4]]
    modules.append({"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"]), "format": "windows",
                    "code_file": "Demo.dll", "code_id": code_id})
    modules.append({"debug_file": "nowhere.pdb", "debug_id": "00112233445566778899AABBCCDDEEFF1"})
    frames = []
    for mi in range(4):
        for rva in (0x1000, 0x1010, 0x1020, 0x1050, 0x1100, 0xfffff0):
            frames.append({"module": mi, "rva": "0x%x" % rva})
    for sp in sps[:30]:
        frames.append({"module": 4, "token": sp["token"], "il_offset": sp["il"]})
    frames.append({"module": 5, "rva": 16})
    frames.append({"module": 0, "rva": "0x100000000"})  # an invalid frame
    req = {"modules": modules, "frames": frames, "timeout": 60}
    body = json.dumps(req)
    up = {"PDBSYM_SYMBOL_PATH": "srv*" + ss.url}

    srv = Server(env=dict(up, PDBSYM_OFFLINE="false"))
    st, h, want = srv.json("POST", "/symbolicate", req, timeout=120)
    c.eq("serve answers", st, 200)

    rc, out, err = sb.run(["symbolicate"], stdin=body, env=up)
    got = json.loads(out) if rc == 0 else {}
    c.eq("symbolicate: exit 0, nothing on stderr", (rc, err), (0, ""))
    c.eq("symbolicate: the frames equal serve's", got.get("frames"), want.get("frames"))
    c.eq("symbolicate: the modules equal serve's", got.get("modules"), want.get("modules"))
    c.true("managed names from the image", any("." in (f.get("symbols") or [{}])[0].get("function", "")
                                              for f in got.get("frames", [])[24:54]), got.get("frames", [])[24:26])
    c.eq("statuses seen", sorted(set(f["status"] for f in got.get("frames", []))),
         ["invalid", "missing_symbols", "ok", "unknown_address"])

    hits = ss.hits()["total"]
    rc, out, err = sb.run(["symbolicate", "--offline"], stdin=body, env=up)
    again = json.loads(out) if rc == 0 else {}
    c.eq("second run: the same frames", again.get("frames"), got.get("frames"))
    c.true("second run: found modules from the cache",
           all(m["from_cache"] for m in again.get("modules", [])[:5]), again.get("modules"))
    c.eq("--offline: nothing asked upstream", ss.hits()["total"], hits)

    with open(sb.path("req.json"), "w") as f:
        f.write(body)
    rc, out, err = sb.run(["symbolicate", "--offline", "req.json"], env=up)
    c.eq("body from a file: the same answer", (rc, json.loads(out).get("frames") if rc == 0 else None),
         (0, got.get("frames")))
    rc, out, err = sb.run(["symbolicate", "--offline", "--pretty", "req.json"], env=up)
    c.true("--pretty: indented, the same JSON", rc == 0 and out.startswith("{\n") and
           json.loads(out)["frames"] == got["frames"], out[:100])

    # v5 (Tecken) bodies with --v5
    v5 = {"jobs": [{"memoryMap": [[clilib.debug_file(rows[0]), rows[0]["symkey"]]], "stacks": [[[0, 0x1000], [0, 0x1020]]]}]}
    st, h, want5 = srv.json("POST", "/symbolicate/v5", v5)
    rc, out, err = sb.run(["symbolicate", "--v5", "--offline"], stdin=json.dumps(v5), env=up)
    c.eq("--v5: equals serve's /symbolicate/v5", (rc, json.loads(out) if rc == 0 else out), (0, want5))

    # bad requests: exit 2, serve's 400 body on stdout, one line on stderr
    bad = ["{", "[]", '{"modules": 3, "frames": []}',
           json.dumps({"modules": [{"debug_file": "a.pdb", "debug_id": "xyz"}], "frames": [{"module": 0, "rva": True}]}),
           json.dumps({"modules": modules, "frames": [{"module": 0}]}),
           json.dumps({"modules": [], "frames": [], "timeout": -1})]
    for b in bad:
        r = srv.request("POST", "/symbolicate", b.encode())
        rc, out, err = sb.run(["symbolicate", "--offline"], stdin=b, env=up)
        c.eq("bad request %s: exit 2" % b[:40], rc, 2)
        c.eq("bad request %s: serve's body" % b[:40], json.loads(out) if out else None, json.loads(r[2]))
        c.true("bad request %s: one line on stderr" % b[:40],
               len(err.splitlines()) == 1 and "bad request" in err, err)
    rc, out, err = sb.run(["symbolicate", "nosuch.json"])
    c.true("missing request file: exit 2, named", rc == 2 and "nosuch.json" in err and out == "", (rc, err))

    # settings: flags over the config file over the environment
    conf = sb.path("pdbsym.conf")
    with open(conf, "w") as f:
        f.write("cache_dir = %s\nmax_frames = 2\noffline = true\n" % sb.path("conf-cache"))
    small = json.dumps({"modules": modules[:1], "frames": frames[:3]})
    rc, out, err = sb.run(["symbolicate"], stdin=small, env=dict(up, PDBSYM_CONFIG=conf))
    c.true("config file max_frames = 2 applies", rc == 2 and "max_frames" in out, (rc, out))
    small = json.dumps({"modules": modules[:1], "frames": frames[:2]})
    rc, out, err = sb.run(["symbolicate", "--config", conf], stdin=small, env=up)
    j = json.loads(out) if rc == 0 else {}
    c.eq("config file cache_dir and offline apply", (rc, j.get("modules", [{}])[0].get("status")), (0, "missing"))
    c.true("config file cache_dir is used", os.path.isdir(sb.path("conf-cache")))
    rc, out, err = sb.run(["symbolicate", "--config", conf, "--cache-dir", sb.cache], stdin=small, env=up)
    j = json.loads(out) if rc == 0 else {}
    c.eq("--cache-dir overrides the config file", (rc, j.get("modules", [{}])[0].get("status")), (0, "found"))
    rc, out, err = sb.run(["symbolicate"], stdin=small, env=dict(up, PDBSYM_CACHE_MAX_BYTES="lots"))
    c.true("a bad environment value: exit 2, named", rc == 2 and "PDBSYM_CACHE_MAX_BYTES" in err, (rc, err))
finally:
    if srv:
        srv.close()
    ss.close()
    sb.close()
c.done()
