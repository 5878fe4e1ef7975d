#!/usr/bin/env python3
"""`pdbsym fetch` checks what a symbol server serves: the PDB must carry the
requested GUID and age (a Portable PDB its id's GUID), the image the requested
TimeDateStamp and SizeOfImage.  A wrong file is refused and the next source
tried.  Real fixture PDBs served by tests/symserver.py; the identities come
from the fixtures' manifests (llvm-pdbutil, PdbDump), not from our code."""
import gzip
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetchlib import SRC, Checker, Server, fetch, put  # noqa: E402
from native_oracle import manifest  # noqa: E402


def main():
    c = Checker("test_fetch_verify")
    native_dir = os.path.join(SRC, "tests", "fixtures", "native")
    managed_dir = os.path.join(SRC, "tests", "fixtures", "managed")
    rows = {r["name"]: r for r in manifest(native_dir)}
    a, b = rows["c-x64-O2"], rows["cpp-x64-O2"]
    pdb_a = gzip.open(os.path.join(native_dir, a["pdb"])).read()
    pdb_b = gzip.open(os.path.join(native_dir, b["pdb"])).read()
    ida = "%s-%s" % (a["guid"], a["age"])

    good, bad = os.path.join(c.tmp, "good"), os.path.join(c.tmp, "bad")
    outdir = os.path.join(c.tmp, "out")
    os.makedirs(outdir)
    put(good, "a.pdb/%s/a.pdb" % a["symkey"], pdb_a)
    put(bad, "a.pdb/%s/a.pdb" % a["symkey"], pdb_b)  # another PDB under a's key
    put(bad, "junk.pdb/%s/junk.pdb" % a["symkey"], b"not a pdb at all" * 100)
    sg, sb = Server(good), Server(bad)
    out = os.path.join(outdir, "got")

    def run(name, args, sp):
        if os.path.exists(out):
            os.unlink(out)
        rc, so, se, dt = fetch(["--verify"] + args, sp, out)
        print("%-34s rc=%d %s%s" % (name, rc, so.strip()[:120], se.strip()[:200]))
        return rc, so, se

    rc, so, se = run("right PDB", ["a.pdb", ida], sg.url)
    c.check(rc == 0, "%s: got %r" % ("right PDB accepted", rc))
    c.check(rc == 0 and open(out, "rb").read() == pdb_a, "right PDB written whole")

    rc, so, se = run("another PDB under the key", ["a.pdb", ida], sb.url)
    c.check(rc == 1, "%s: got %r" % ("another PDB refused", rc))
    c.check("mismatch" in se or "not the requested" in se, "%s: %s" % ("the refusal names the mismatch", se))
    c.check(not os.path.exists(out), "nothing written")

    rc, so, se = run("not a PDB", ["junk.pdb", ida], sb.url)
    c.check(rc == 1, "%s: got %r" % ("junk refused", rc))

    rc, so, se = run("wrong first, right second", ["a.pdb", ida], sb.url + ";" + sg.url)
    c.check(rc == 0, "%s: got %r" % ("falls through to the right source", rc))
    c.check(sg.url in so, "%s: %s" % ("the source is the second server", so))

    rc, so, se = run("wrong age", ["a.pdb", "%s-%x" % (a["guid"], int(a["age"]) + 1)], sg.url)
    c.check(rc == 1, "%s: got %r" % ("a different age is another module (not found)", rc))

    # a Portable PDB and its image, identities from PdbDump's answers
    srm = [json.loads(x) for x in open(os.path.join(managed_dir, "portable-debug", "Demo.pdb.srm.jsonl"))]
    cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
    ppdb = open(os.path.join(managed_dir, "portable-debug", "Demo.pdb"), "rb").read()
    dll = open(os.path.join(managed_dir, "portable-debug", "Demo.dll"), "rb").read()
    pkey = cv["guid"].replace("-", "").upper() + "FFFFFFFF"
    put(good, "Demo.pdb/%s/Demo.pdb" % pkey, ppdb)
    pe = struct.unpack_from("<I", dll, 0x3C)[0]
    code_id = "%08X%X" % (struct.unpack_from("<I", dll, pe + 8)[0], struct.unpack_from("<I", dll, pe + 24 + 56)[0])
    put(good, "Demo.dll/%s/Demo.dll" % code_id, dll)
    put(bad, "Demo.dll/%s/Demo.dll" % code_id, open(os.path.join(managed_dir, "windows-debug", "Demo.dll"), "rb").read())

    rc, so, se = run("portable PDB", ["Demo.pdb", "%s-1" % cv["guid"], "--format", "portable"], sg.url)
    c.check(rc == 0, "%s: got %r" % ("portable PDB accepted", rc))
    rc, so, se = run("image", ["--code", "Demo.dll", code_id], sg.url)
    c.check(rc == 0, "%s: got %r" % ("image accepted", rc))
    rc, so, se = run("another image under the code id", ["--code", "Demo.dll", code_id], sb.url)
    c.check(rc == 1, "%s: got %r" % ("another image refused", rc))
    c.no_temp_files(outdir, ["got"])
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
