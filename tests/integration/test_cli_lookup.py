"""`pdbsym lookup` and `pdbsym dump` as a user runs them (docs/contract.md, "The CLI
lookup").  The native fixtures' every code byte is checked by
tests/unit/test_cli_lookup.c; this test covers the rest:

- managed fixtures: every sequence point of the Portable, embedded and Windows
  PDBs, answers compared with Microsoft's readers (PdbDump /
  System.Reflection.Metadata, WinPdbDump / ISymUnmanagedReader): file, line,
  columns, and with the image (`--image`, or the PE itself for an embedded PDB)
  the full method name; hidden sequence points per the contract's rule;
  addresses on the command line and on standard input, in input order;
  `source_link` by the fixture's Source Link map (which those readers find in
  every PDB), and `async_method`, `user_method`, `generated` and
  `local_function` against ClrDump (Demo.dll.clr.jsonl: reflection's state
  machines, Roslyn's lambda maps), with the image and from a Windows PDB alone;
- bad addresses: an `invalid` frame each, exit 0;
- unreadable or unparseable files: one line on stderr, exit 2, nothing on stdout;
- `dump`: the identity llvm-pdbutil recorded in the native MANIFEST; on a PE
  image, the code id and each CodeView entry's debug id and PDB name as
  llvm-readobj-19 reads them.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402

clilib.need_binary()
if not os.path.exists(os.path.join(clilib.MANAGED, "MANIFEST.tsv")):
    harness.skip("tests/fixtures/managed absent")

c = Checks()
sb = Sandbox("pdbsym-cli-lookup-")


def lines(out):
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def full_name(method):
    # "Ns.Type/Nested::Name<T>(args)" -> "Ns.Type+Nested.Name" (as test_http_e2e)
    n = method.split("(")[0].replace("::", ".").replace("/", "+")
    return n.split("<")[0] if n.endswith(">") else n


def expected_answers(sps):
    """(token, il) -> expected symbol, from the oracle's sequence points."""
    by_method = {}
    for sp in sps:
        by_method.setdefault(sp["token"], []).append(sp)
    want = {}
    for tok, pts in by_method.items():
        pts.sort(key=lambda p: p["il"])
        for i, sp in enumerate(pts):
            if (tok, sp["il"]) in want:
                continue
            s = {"file": sp["doc"], "name": sp.get("method")}
            if not sp["hidden"]:
                s.update(line=sp["sl"], column=sp["sc"], end_line=sp["el"], end_column=sp["ec"], hidden=None)
            else:
                lower = [p for p in pts[:i] if not p["hidden"]]
                higher = [p for p in pts[i + 1:] if not p["hidden"]]
                ref = lower[-1] if lower else higher[0] if higher else None
                s.update(line=ref["sl"] if ref else None, hidden=True)
            want[(tok, sp["il"])] = s
    return want


def source_link_url(path):
    """The fixture's one Source Link rule (src/sourcelink.json), applied."""
    docs = json.load(open(os.path.join(clilib.MANAGED, "src", "sourcelink.json")))["documents"]
    (key, url), = docs.items()
    if key.endswith("*") and path.lower().startswith(key[:-1].lower()):
        return url.replace("*", path[len(key) - 1:].replace("\\", "/"))
    return None


def generated_answers(build, names):
    """token -> the fields ClrDump's oracle says a frame of that method has."""
    want = {}
    clr = [json.loads(x) for x in open(os.path.join(clilib.MANAGED, build, "Demo.dll.clr.jsonl"))]
    for o in clr:
        if o["kind"] == "generated":
            user = o["user_method"] if names else o["user_method"].replace("+", ".")
            want.setdefault(o["token"], {}).update(user_method=user, generated=o["generated"],
                                                   local_function=o["local_function"])
    for o in clr:
        if o["kind"] == "state_machine":
            k = o["kickoff_method"]
            want.setdefault(o["move_next"], {})["async_method"] = k if names else k.rsplit(".", 1)[-1]
    return want


def check_managed(what, args, sps, names, build=None):
    want = expected_answers(sps)
    extras = generated_answers(build, names) if build else {}
    fields = ("async_method", "user_method", "generated", "local_function")
    nextra = 0
    addrs = sorted(want)
    text = ["%s+%d" % (t, il) for t, il in addrs]
    # half on the command line (hex IL offsets there), all on stdin
    rc, out, err = sb.run(["lookup"] + args + ["%s+0x%x" % a for a in addrs[:40]])
    first = lines(out)
    c.eq("%s: arguments: exit, count" % what, (rc, len(first)), (0, min(40, len(addrs))))
    rc, out, err = sb.run(["lookup"] + args, stdin="\n".join(text) + "\n\n")
    got = lines(out)
    c.eq("%s: stdin: exit, one line per address" % what, (rc, len(got)), (0, len(addrs)))
    c.eq("%s: the same answers both ways" % what, got[:len(first)], first)
    bad = 0
    for (tok, il), g in zip(addrs, got):
        w = want[(tok, il)]
        syms = g.get("symbols") or [{}]
        s = syms[0]
        ok = g.get("status") == "ok" and len(syms) == 1 and "module" not in g and \
            g.get("token") == tok and g.get("il_offset") == il
        ok = ok and s.get("file") == w["file"] and s.get("line") == w["line"] and s.get("hidden") == w["hidden"]
        if not w["hidden"]:
            ok = ok and (s.get("column"), s.get("end_line"), s.get("end_column")) == \
                (w["column"], w["end_line"], w["end_column"])
        if names:
            ok = ok and s.get("function") == full_name(w["name"])
        else:
            ok = ok and bool(s.get("function"))
        ok = ok and s.get("source_link") == source_link_url(w["file"])
        if build:
            e = extras.get(tok, {})
            ok = ok and all(s.get(f) == e.get(f) for f in fields)
            nextra += bool(e)
        if not ok:
            bad += 1
            if bad <= 3:
                print("  %s %s+%d: got %s\n    want %s" % (what, tok, il, json.dumps(g), json.dumps(w)))
    c.eq("%s: answers not matching the oracle (of %d)" % (what, len(addrs)), bad, 0)
    if build:
        c.true("%s: generated-code frames among them" % what, nextra > 50, nextra)
    return len(addrs)


try:
    n = 0
    for build in ("portable-debug", "portable-release"):
        d = os.path.join(clilib.MANAGED, build)
        sps = [x for x in map(json.loads, open(os.path.join(d, "Demo.pdb.srm.jsonl"))) if x["kind"] == "sp"]
        n += check_managed(build + " --image", ["--image", os.path.join(d, "Demo.dll"), os.path.join(d, "Demo.pdb")],
                           sps, True, build)
    d = os.path.join(clilib.MANAGED, "embedded-debug")
    sps = [x for x in map(json.loads, open(os.path.join(d, "Demo.dll.srm.jsonl"))) if x["kind"] == "sp"]
    n += check_managed("embedded-debug (the PE)", [os.path.join(d, "Demo.dll")], sps, True, "embedded-debug")
    for build in ("windows-debug", "windows-release"):
        d = os.path.join(clilib.MANAGED, build)
        sps = [x for x in map(json.loads, open(os.path.join(d, "Demo.pdb.winpdb.jsonl"))) if x["kind"] == "sp"]
        n += check_managed(build + " --image", ["--image", os.path.join(d, "Demo.dll"), os.path.join(d, "Demo.pdb")],
                           sps, True, build)
        n += check_managed(build + " alone", [os.path.join(d, "Demo.pdb")], sps, False, build)
    print("  %d managed addresses checked" % n)

    # ---- bad addresses: invalid frames, exit 0, order kept
    pdb = os.path.join(clilib.MANAGED, "portable-debug", "Demo.pdb")
    bad = ["zzz", "0x06000001+", "0x0A000001+3", "0x1ffffffff", "0x06000001+x", "-5"]
    rc, out, err = sb.run(["lookup", pdb, "0x06000001+0"] + bad + ["0x06000001+0"])
    got = lines(out)
    c.eq("bad addresses: exit 0", rc, 0)
    c.eq("bad addresses: statuses in order", [g["status"] for g in got], ["ok"] + ["invalid"] * len(bad) + ["ok"])
    c.true("bad addresses: each with an error", all(g.get("error") for g in got[1:-1]), got)
    rc, out, err = sb.run(["lookup", pdb], stdin="0x06000001+0\nnot-an-address\n0x1000\n")
    c.eq("bad address on stdin: invalid, exit 0; an RVA in a managed PDB is an answer too",
         (rc, [g["status"] for g in lines(out)][:2]), (0, ["ok", "invalid"]))
    native = clilib.manifest()[0]
    with open(sb.path("n.pdb"), "wb") as f:
        import gzip
        f.write(gzip.open(os.path.join(clilib.NATIVE, native["pdb"])).read())
    rc, out, err = sb.run(["lookup", "n.pdb", "0xffffff00", "0x06000001+2"])
    got = lines(out)
    c.eq("native PDB: an address no function covers", (rc, got[0]["status"]), (0, "unknown_address"))
    c.true("native PDB: unknown_address has an error", bool(got[0].get("error")), got[0])

    # a gzip'ed PDB (as the fixtures are committed) is inflated first
    gz = os.path.join(clilib.NATIVE, native["pdb"])
    rc1, out1, _ = sb.run(["lookup", gz, "0x1000", "0x1010"])
    rc2, out2, _ = sb.run(["lookup", "n.pdb", "0x1000", "0x1010"])
    c.eq("a .pdb.gz answers as the PDB", (rc1, out1), (0, out2))
    with open(gz, "rb") as f, open(sb.path("cut.pdb.gz"), "wb") as o:
        o.write(f.read()[:200])

    # ---- unreadable or unparseable files: one line on stderr, exit 2
    with open(sb.path("junk.pdb"), "wb") as f:
        f.write(b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0" + b"\xff" * 200)
    with open(sb.path("text.pdb"), "w") as f:
        f.write("hello\n")
    for args, what in ((["nosuch.pdb", "0x1000"], "missing file"),
                       (["junk.pdb", "0x1000"], "corrupt MSF"),
                       (["text.pdb", "0x1000"], "not a symbol file"),
                       (["cut.pdb.gz", "0x1000"], "a truncated gzip file"),
                       ([".", "0x1000"], "a folder"),
                       (["--image", "nosuch.dll", pdb, "0x06000001+0"], "missing image")):
        rc, out, err = sb.run(["lookup"] + args)
        c.true("%s: exit 2, nothing on stdout, one line on stderr naming the file" % what,
               rc == 2 and out == "" and len(err.splitlines()) == 1 and args[-2].split("/")[-1] in err or
               (what == "missing image" and rc == 2 and "nosuch.dll" in err and len(err.splitlines()) == 1),
               (rc, out, err))
    for args in (["--frobnicate", pdb], []):
        rc, out, err = sb.run(["lookup"] + args)
        c.true("lookup %s: exit 2 with a hint" % " ".join(args), rc == 2 and "--help" in err, (rc, err))

    # ---- dump: identity as llvm-pdbutil recorded it
    bad = 0
    for r in clilib.manifest():
        p = sb.path(r["name"] + ".pdb")
        clilib.gunzip_to(os.path.join(clilib.NATIVE, r["pdb"]), p)
        rc, out, err = sb.run(["dump", p])
        j = json.loads(out) if rc == 0 else {}
        want = r["guid"].lower() + "-%x" % int(r["age"])
        if (rc, j.get("debug_id"), j.get("format"), int(j.get("machine", "0"), 16)) != (0, want, "windows", int(r["machine"], 16)):
            bad += 1
            print("  dump %s: %s" % (r["name"], out or err))
        os.unlink(p)
    c.eq("dump: native fixtures whose identity differs from llvm-pdbutil's", bad, 0)
    rc, out, err = sb.run(["dump", os.path.join(clilib.MANAGED, "embedded-debug", "Demo.dll")])
    srm_pdb = [x for x in map(json.loads, open(os.path.join(clilib.MANAGED, "embedded-debug", "Demo.dll.srm.jsonl")))
               if x["kind"] == "pdb"]
    emb = (json.loads(out).get("embedded_pdb") or {}) if rc == 0 else {}
    c.eq("dump of an embedded Portable PDB", (rc, emb.get("format"), emb.get("debug_id", "")[:36]),
         (0, "portable", srm_pdb[0]["id_guid"] if srm_pdb else "?"))

    # ---- dump of a PE: the ids a request names it by, against llvm-readobj-19
    readobj = "/usr/lib/llvm-19/bin/llvm-readobj"
    if not os.path.exists(readobj):
        c.true("llvm-readobj-19 present (scripts/deps.sh --test installs llvm-19)", False)
    else:
        import re
        import subprocess
        pes = [os.path.join(clilib.NATIVE, r["exe"]) for r in clilib.manifest()]
        pes += [os.path.join(clilib.MANAGED, d, "Demo.dll") for d in sorted(os.listdir(clilib.MANAGED))
                if os.path.exists(os.path.join(clilib.MANAGED, d, "Demo.dll"))]
        bad = 0
        for pe in pes:
            txt = subprocess.run([readobj, "--file-headers", "--coff-debug-directory", pe],
                                 capture_output=True, text=True).stdout
            stamp = int(re.search(r"^  TimeDateStamp: .*\(0x([0-9A-Fa-f]+)\)", txt, re.M).group(1), 16)
            size = int(re.search(r"^  SizeOfImage: (\d+)", txt, re.M).group(1))
            guid = re.search(r"PDBGUID: \{([0-9A-F-]+)\}", txt).group(1).lower()
            age = int(re.search(r"PDBAge: (\d+)", txt).group(1))
            pdb_path = re.search(r"PDBFileName: (.*)", txt).group(1).strip()
            # a Portable PDB's CodeView entry has MinorVersion "PM" (0x504D)
            cv_entry = txt[txt.index("Type: CodeView") - 60:txt.index("Type: CodeView")]
            portable = "MinorVersion: 0x504D" in cv_entry
            rc, out, err = sb.run(["dump", pe])
            j = json.loads(out) if rc == 0 else {}
            cv = (j.get("codeview") or [{}])[0]
            want_id = guid if portable else "%s-%x" % (guid, age)
            got = (rc, j.get("format"), j.get("code_file"), j.get("code_id", "").upper(), j.get("debug_file"),
                   j.get("debug_id"), cv.get("pdb_path"), cv.get("format"))
            want = (0, "pe", os.path.basename(pe), ("%08X%X" % (stamp, size)),
                    pdb_path.replace("\\", "/").rsplit("/", 1)[-1], want_id, pdb_path,
                    "portable" if portable else "windows")
            if got != want:
                bad += 1
                print("  dump %s: got %r, want %r" % (pe, got, want))
            elif not portable and j.get("breakpad_id") != guid.replace("-", "").upper() + "%X" % age:
                bad += 1
                print("  dump %s: breakpad_id %r" % (pe, j.get("breakpad_id")))
        c.eq("dump: PE images (%d) whose ids differ from llvm-readobj-19's" % len(pes), bad, 0)
        # symstore's spelling of the code id: {TimeDateStamp:X8}{SizeOfImage:x}
        rc, out, err = sb.run(["dump", os.path.join(clilib.MANAGED, "windows-debug", "Demo.dll")])
        c.true("dump: code_id in symstore's casing", rc == 0 and re.fullmatch(r"[0-9A-F]{8}[0-9a-f]+", json.loads(out)["code_id"]),
               out)
finally:
    sb.close()
c.done()
