"""`pdbsym warm` as a user runs it: the real binary, real files, the real test
symbol server (tests/symserver.py).

- a folder tree of native PE images: every CodeView entry's PDB fetched once;
  a second run fetches nothing and counts them "already cached";
- module lists, text and JSON, with a missing module: exit 1, or 0 with
  --allow-failures; the summary counts;
- a folder of PDB files (gzip'ed too) and managed PDBs, ingested with no
  network (--offline, and the symbol server sees no request); an image with an
  embedded Portable PDB stored directly; the answers afterwards equal
  `pdbsym lookup` on the same files;
- several CodeView entries in one image (ReadyToRun images of the corpus,
  when ../shared/corpus is present);
- a corrupt PDB: "failed", exit 1;
- --jobs 1 and 8; bad --jobs;
- the progress bar under a pseudo-terminal (`script` from util-linux), plain
  lines elsewhere;
- Ctrl-C (SIGINT) in the middle of a slow download: exit 130, `pdbsym cache
  verify` passes, a rerun completes and counts what was done as already cached.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
from clilib import Checks, Sandbox, SymServer, summary  # noqa: E402

clilib.need_binary()
if not os.path.exists(os.path.join(clilib.NATIVE, "MANIFEST.tsv")):
    harness.skip("tests/fixtures/native absent")

c = Checks()
sb = Sandbox("pdbsym-cli-warm-")
srv = SymServer(sb.path("store"))
try:
    rows = clilib.native_store(srv)
    sp = {"PDBSYM_SYMBOL_PATH": "srv*" + srv.url}

    # ---- a folder tree of PE images: CodeView entries fetched
    images = sb.path("images")
    for i, r in enumerate(rows):
        d = os.path.join(images, r["arch"], r["lang"])  # a tree, not one folder
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(clilib.NATIVE, r["exe"]), d)
    rc, out, err = sb.run(["warm", "--jobs", "4", images], env=sp)
    c.eq("warm images: exit", rc, 0)
    c.eq("warm images: summary", summary(out),
         {"found": len(rows), "already cached": 0, "missing": 0, "failed": 0})
    c.eq("warm images: one report line per module, on stdout", out.count("warm: found "), len(rows))
    c.eq("warm images: nothing on stderr (diagnostics only)", err, "")
    c.true("warm images: no terminal codes off a terminal", "\r" not in out and "\033" not in out, out[-300:])
    hits = srv.hits()["hits"]
    c.eq("warm images: each PDB fetched once", sorted(hits.get(r["path"], 0) for r in rows), [1] * len(rows))

    rc, out, err = sb.run(["warm", "--jobs", "8", images], env=sp)
    c.eq("warm images again: exit", rc, 0)
    c.eq("warm images again: all already cached", summary(out),
         {"found": 0, "already cached": len(rows), "missing": 0, "failed": 0})
    c.eq("warm images again: no download", srv.hits()["hits"], hits)

    # the answers are there: symbolicate offline from the cache
    r0 = rows[0]
    req = {"modules": [{"debug_file": r0["cv_path"], "debug_id": r0["symkey"]}],
           "frames": [{"module": 0, "rva": "0x1000"}]}
    rc, out, err = sb.run(["symbolicate", "--offline"], stdin=json.dumps(req))
    j = json.loads(out) if rc == 0 else {}
    c.eq("symbolicate after warm: found in the cache",
         (rc, j.get("modules", [{}])[0].get("from_cache"), j.get("frames", [{}])[0].get("status")), (0, True, "ok"))

    # ---- module lists: text and JSON, with a missing module
    sb2 = Sandbox("pdbsym-cli-warm-list-")
    try:
        text = "# debug_file debug_id [format]\n\n"
        for r in rows[:3]:
            text += "%s %s\n" % (clilib.debug_file(r), r["symkey"])
        text += "%s %s windows\n" % (clilib.debug_file(rows[3]), rows[3]["guid"].lower() + "-1")
        text += "nowhere.pdb 00112233445566778899AABBCCDDEEFF1\n"
        with open(sb2.path("list.txt"), "w") as f:
            f.write(text)
        rc, out, err = sb2.run(["warm", "--modules", "list.txt"], env=sp)
        c.eq("text list: exit 1 with a module missing", rc, 1)
        c.eq("text list: summary", summary(out), {"found": 4, "already cached": 0, "missing": 1, "failed": 0})
        c.true("text list: the missing module named", "missing nowhere.pdb" in out, out)
        rc, out, err = sb2.run(["warm", "--allow-failures", "--modules", "list.txt"], env=sp)
        c.eq("text list again, --allow-failures: exit 0", rc, 0)
        c.eq("text list again: summary", summary(out), {"found": 0, "already cached": 4, "missing": 1, "failed": 0})

        mods = [{"debug_file": r["cv_path"], "debug_id": r["symkey"]} for r in rows[:6]]
        rc, out, err = sb2.run(["warm", "--modules", "-"], stdin=json.dumps({"modules": mods}), env=sp)
        c.eq("JSON list on stdin: exit", rc, 0)
        c.eq("JSON list: summary", summary(out), {"found": 2, "already cached": 4, "missing": 0, "failed": 0})
        with open(sb2.path("list.json"), "w") as f:
            json.dump(mods, f)
        rc, out, err = sb2.run(["warm", "--modules=list.json", "-q"], env=sp)
        c.eq("JSON array file, --quiet: all cached, no per-module lines",
             (rc, summary(out), out.count("\n")), (0, {"found": 0, "already cached": 6, "missing": 0, "failed": 0}, 1))

        for bad, why in (("nowhere.pdb\n", "expected 'debug_file debug_id"),
                         ("bad|name.pdb 00112233445566778899AABBCCDDEEFF1\n", ""),
                         ("x.pdb zz\n", "")):
            with open(sb2.path("bad.txt"), "w") as f:
                f.write(bad)
            rc, out, err = sb2.run(["warm", "--modules", "bad.txt"], env=sp)
            c.true("bad list line %r: exit 2 with a message" % bad.strip(),
                   rc == 2 and "bad.txt:1" in err and why in err, (rc, err))
    finally:
        sb2.close()

    # ---- a folder of PDB files: no network
    sb3 = Sandbox("pdbsym-cli-warm-pdb-")
    try:
        pdbs = sb3.path("pdbs")
        os.makedirs(os.path.join(pdbs, "gz"))
        for r in rows[:5]:  # some inflated, the rest as committed (.pdb.gz)
            clilib.gunzip_to(os.path.join(clilib.NATIVE, r["pdb"]), os.path.join(pdbs, clilib.debug_file(r)))
        for r in rows[5:]:
            shutil.copy(os.path.join(clilib.NATIVE, r["pdb"]), os.path.join(pdbs, "gz"))
        for build in ("windows-debug", "portable-release"):
            os.makedirs(os.path.join(pdbs, build))
            shutil.copy(os.path.join(clilib.MANAGED, build, "Demo.pdb"), os.path.join(pdbs, build))
            shutil.copy(os.path.join(clilib.MANAGED, build, "Demo.dll"), os.path.join(pdbs, build))
        shutil.copy(os.path.join(clilib.MANAGED, "embedded-debug", "Demo.dll"), os.path.join(pdbs, "Embedded.dll"))
        with open(os.path.join(pdbs, "README.txt"), "w") as f:
            f.write("not a symbol file\n")
        srv.reset()
        rc, out, err = sb3.run(["warm", "-j", "1", "--offline", pdbs], env=sp)
        n = len(rows) + 3
        c.eq("PDB folder: exit", rc, 0)
        c.eq("PDB folder: summary", summary(out), {"found": n, "already cached": 0, "missing": 0, "failed": 0})
        c.eq("PDB folder: no request upstream", srv.hits()["total"], 0)
        rc, out, err = sb3.run(["warm", pdbs], env=sp)  # online now: still nothing to fetch
        c.eq("PDB folder again: all cached, nothing fetched",
             (rc, summary(out), srv.hits()["total"]), (0, {"found": 0, "already cached": n, "missing": 0, "failed": 0}, 0))
        rc, out, err = sb3.run(["cache", "list"])
        c.eq("PDB folder: cache list has every module", (rc, len([ln for ln in out.splitlines() if ".pdb/" in ln.lower()])),
             (0, n))

        # answers from the cache equal pdbsym lookup on the files (the managed
        # Windows PDB with its image beside it: full method names)
        wd = os.path.join(clilib.MANAGED, "windows-debug")
        sps = [json.loads(x) for x in open(os.path.join(wd, "Demo.pdb.winpdb.jsonl"))]
        sps = [x for x in sps if x.get("kind") == "sp" and not x["hidden"]][:20]
        addrs = ["%s+%d" % (x["token"], x["il"]) for x in sps]
        rc, out, err = sb3.run(["lookup", "--image", os.path.join(wd, "Demo.dll"), os.path.join(wd, "Demo.pdb")] + addrs)
        want = [json.loads(x)["symbols"] for x in out.splitlines()]
        cv = [json.loads(x) for x in open(os.path.join(wd, "Demo.dll.srm.jsonl"))]
        cv = [x for x in cv if x.get("type") == "CodeView"][0]
        req = {"modules": [{"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"]), "format": "windows"}],
               "frames": [{"module": 0, "token": x["token"], "il_offset": x["il"]} for x in sps]}
        rc, out, err = sb3.run(["symbolicate", "--offline"], stdin=json.dumps(req))
        got = [f.get("symbols") for f in json.loads(out)["frames"]] if rc == 0 else None
        c.eq("managed Windows PDB warmed beside its image: answers equal lookup --image", got, want)
        c.true("... with full method names", want and "." in want[0][0]["function"], want[:1])
    finally:
        sb3.close()

    # ---- a corrupt PDB fails; --jobs errors
    sb4 = Sandbox("pdbsym-cli-warm-bad-")
    try:
        os.makedirs(sb4.path("bad"))
        with open(os.path.join(clilib.MANAGED, "windows-debug", "Demo.pdb"), "rb") as f:
            data = bytearray(f.read())
        with open(sb4.path("bad", "broken.pdb"), "wb") as f:
            f.write(data[:40] + bytes(len(data) - 40))
        rc, out, err = sb4.run(["warm", "--offline", "bad"])
        c.eq("corrupt PDB: exit 1", rc, 1)
        c.eq("corrupt PDB: summary", summary(out), {"found": 0, "already cached": 0, "missing": 0, "failed": 1})
        c.true("corrupt PDB: the file is named", "failed" in out and "broken.pdb" in out, out)
        rc, out, err = sb4.run(["warm", "--offline", "--allow-failures", "bad"])
        c.eq("corrupt PDB, --allow-failures: exit 0", rc, 0)
        for bad in (["--jobs", "0"], ["--jobs", "x"], ["--jobs"], ["--frobnicate"], []):
            rc, out, err = sb4.run(["warm"] + bad + (["bad"] if bad != [] else []))
            c.true("warm %s: exit 2, one hint" % " ".join(bad) if bad else "warm with nothing to do: exit 2",
                   rc == 2 and "pdbsym warm" in err and len(err.strip().splitlines()) == 1, (rc, err))
        rc, out, err = sb4.run(["warm", "no/such/folder"])
        c.true("missing folder: exit 2, named", rc == 2 and "no/such/folder" in err, (rc, err))
    finally:
        sb4.close()

    # ---- a .NET image whose Windows PDB is fetched: names from the local image
    sb8 = Sandbox("pdbsym-cli-warm-managed-")
    try:
        wd = os.path.join(clilib.MANAGED, "windows-debug")
        cv = [x for x in map(json.loads, open(os.path.join(wd, "Demo.dll.srm.jsonl"))) if x.get("type") == "CodeView"][0]
        key = cv["guid"].replace("-", "").upper() + "%X" % cv["age"]
        pdb_path = srv.put("Demo.pdb", key, open(os.path.join(wd, "Demo.pdb"), "rb").read())
        os.makedirs(sb8.path("app", "bin"))
        shutil.copy(os.path.join(wd, "Demo.dll"), sb8.path("app", "bin"))
        srv.reset()
        rc, out, err = sb8.run(["warm", "app"], env=sp)
        hits = srv.hits()["hits"]
        c.eq("managed image: the PDB fetched", (rc, summary(out), hits.get(pdb_path)),
             (0, {"found": 1, "already cached": 0, "missing": 0, "failed": 0}, 1))
        c.eq("managed image: the image itself never asked upstream", [h for h in hits if "demo.dll" in h.lower()], [])
        sp0 = [x for x in map(json.loads, open(os.path.join(wd, "Demo.pdb.winpdb.jsonl"))) if x["kind"] == "sp"][0]
        req = {"modules": [{"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"])}],
               "frames": [{"module": 0, "token": sp0["token"], "il_offset": sp0["il"]}]}
        rc, out, err = sb8.run(["symbolicate", "--offline"], stdin=json.dumps(req))
        fn = json.loads(out)["frames"][0]["symbols"][0]["function"] if rc == 0 else err
        c.eq("managed image: full method name from the local image", fn,
             sp0["method"].replace("::", ".").replace("/", "+"))
        c.eq("managed image: no temporary folder left", [x for x in os.listdir(sb8.dir) if x.startswith("pdbsym-warm-")], [])
    finally:
        sb8.close()

    # ---- a managed PDB cached without its image's names gains them when a
    # walk brings the image: beside the PDB (ingested again), or alone (the
    # PDB is cached: the image's names go into the cached table)
    for how in ("beside the PDB", "alone"):
        sb9 = Sandbox("pdbsym-cli-warm-names-")
        try:
            wd = os.path.join(clilib.MANAGED, "windows-debug")
            cv = [x for x in map(json.loads, open(os.path.join(wd, "Demo.dll.srm.jsonl"))) if x.get("type") == "CodeView"][0]
            sp0 = [x for x in map(json.loads, open(os.path.join(wd, "Demo.pdb.winpdb.jsonl"))) if x["kind"] == "sp"][0]
            req = {"modules": [{"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"])}],
                   "frames": [{"module": 0, "token": sp0["token"], "il_offset": sp0["il"]}]}

            def function():
                rc, out, err = sb9.run(["symbolicate", "--offline"], stdin=json.dumps(req))
                return json.loads(out)["frames"][0]["symbols"][0]["function"] if rc == 0 else err

            os.makedirs(sb9.path("pdb"))
            shutil.copy(os.path.join(wd, "Demo.pdb"), sb9.path("pdb"))
            rc, out, err = sb9.run(["warm", "--offline", "pdb"])
            c.eq("names %s: the PDB alone warmed" % how, (rc, summary(out)["found"]), (0, 1))
            c.eq("names %s: its own name only" % how, function(), sp0["method"].split("::")[-1])
            os.makedirs(sb9.path("app"))
            shutil.copy(os.path.join(wd, "Demo.dll"), sb9.path("app"))
            if how == "beside the PDB":
                shutil.copy(os.path.join(wd, "Demo.pdb"), sb9.path("app"))
            srv.reset()
            rc, out, err = sb9.run(["warm", "app"], env=sp)
            c.eq("names %s: stored again, not 'already cached'" % how, (rc, summary(out)["found"]), (0, 1))
            c.eq("names %s: nothing asked upstream" % how, srv.hits()["total"], 0)
            c.eq("names %s: the full name" % how, function(), sp0["method"].replace("::", ".").replace("/", "+"))
            rc, out, err = sb9.run(["warm", "app"], env=sp)
            c.eq("names %s: a third walk finds it cached" % how, (rc, summary(out)["already cached"]), (0, 1))
        finally:
            sb9.close()

    # ---- several CodeView entries in one image (ReadyToRun, from the corpus)
    r2r = os.path.join(clilib.CORPUS, "pe", "symstore", "System.Threading.Thread.dll")
    if os.path.exists(r2r):
        sb5 = Sandbox("pdbsym-cli-warm-r2r-")
        try:
            os.makedirs(sb5.path("r2r"))
            shutil.copy(r2r, sb5.path("r2r"))
            srv.reset()
            rc, out, err = sb5.run(["warm", "r2r"], env=sp)
            asked = set(p.split("/")[1].lower() for p in srv.hits()["hits"])
            c.eq("ReadyToRun image: both CodeView entries asked for",
                 asked >= {"system.threading.thread.ni.pdb", "system.threading.thread.pdb"}, True)
            c.eq("ReadyToRun image: 2 missing, exit 1", (rc, summary(out)),
                 (1, {"found": 0, "already cached": 0, "missing": 2, "failed": 0}))
        finally:
            sb5.close()
    else:
        harness.skip_part("the several-CodeView-entries case (a ReadyToRun image): ../shared/corpus absent")

    # ---- the progress bar under a pseudo-terminal
    script = shutil.which("script")
    if script:
        sb6 = Sandbox("pdbsym-cli-warm-tty-")
        try:
            srv.reset()
            cmd = "%s warm --jobs 2 %s" % (clilib.BIN, images)
            env = dict(sb6.env, **sp)
            p = subprocess.run([script, "-qec", cmd, "/dev/null"], env=env, capture_output=True,
                               timeout=120, cwd=sb6.dir)
            tty = p.stdout.decode("utf-8", "replace")
            c.eq("tty: exit", p.returncode, 0)
            c.true("tty: a bar redrawn in place", "\r" in tty and "[#" in tty and "modules" in tty, repr(tty[-400:]))
            c.true("tty: the bar reaches the total", "%d/%d modules" % (len(rows), len(rows)) in tty, repr(tty[-400:]))
            c.true("tty: bytes and rate", "MiB/s" in tty, repr(tty[-200:]))
            c.true("tty: no per-module lines", "warm: found " not in tty, repr(tty[:400]))
            c.true("tty: the summary", "warm: %d found, 0 already cached" % len(rows) in tty, repr(tty[-300:]))
        finally:
            sb6.close()
    else:
        harness.skip_part("the progress bar under a pseudo-terminal: script (util-linux) not installed")

    # ---- Ctrl-C in the middle, then resume
    sb7 = Sandbox("pdbsym-cli-warm-int-")
    try:
        srv.reset()
        slow = rows[:8]
        srv.control({r["path"]: {"drip": 40000, "chunk": 4096} for r in slow})
        with open(sb7.path("list.txt"), "w") as f:
            for r in slow:
                f.write("%s %s\n" % (clilib.debug_file(r), r["symkey"]))
        errf = open(sb7.path("err"), "w+")
        p = sb7.popen(["warm", "--jobs", "2", "--modules", "list.txt"], env=sp, stdout=errf, stderr=errf)
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            with open(sb7.path("err")) as f:
                if f.read().count("warm: found ") >= 2:
                    break
            time.sleep(0.05)
        c.true("interrupt: still running when 2 modules are done", p.poll() is None)
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=60)
        errf.seek(0)
        err = errf.read()
        errf.close()
        s = summary(err) or {}  # stdout and stderr together
        done = s.get("found", -1)
        c.eq("interrupt: exit 130", rc, 130)
        c.true("interrupt: says how to resume", "run again to resume" in err, err[-300:])
        c.true("interrupt: some done, some not started",
               2 <= done < len(slow) and s.get("not started", 0) == len(slow) - done and s.get("failed") == 0, s)
        rc, out, err2 = sb7.run(["cache", "verify"])
        c.eq("interrupt: cache verify passes", rc, 0)
        if rc:
            print("  %s %s" % (out, err2))
        srv.reset()
        rc, out, err = sb7.run(["warm", "--jobs", "2", "--modules", "list.txt"], env=sp)
        c.eq("resume: exit 0", rc, 0)
        c.eq("resume: what was done counted already cached, the rest found", summary(out),
             {"found": len(slow) - done, "already cached": done, "missing": 0, "failed": 0})
        h = srv.hits()["hits"]
        c.eq("resume: fetched only what was left", sum(h.get(r["path"], 0) for r in slow), len(slow) - done)
    finally:
        sb7.close()
finally:
    srv.close()
    sb.close()
c.done()
