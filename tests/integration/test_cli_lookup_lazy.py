"""`pdbsym lookup` of one address at a time (the lazy path: a cold process
reads only the module streams that address needs, parsers/pdb.h) against
LLVM 19's llvm-symbolizer, run by this test on the same image and PDB.

For every native fixture, about 20 code addresses (8 in the sanitizer run) spread over the rows
llvm-symbolizer 14 answered (tests/fixtures/native/*.expected.tsv), each in
its own `pdbsym lookup PDB ADDRESS` run:
- the answer equals llvm-symbolizer 19's (innermost frame first: function,
  file, line; --functions=short --no-demangle), by the fixtures' rules
  (native_oracle.answer_ok: where the fixture's llvm-pdbutil crosscheck
  says the outermost line is a matter of convention, either answer);
  for the publics-only builds, where llvm-symbolizer names no public, the
  fixture's rows (llvm-pdbutil's publics) are the reference;
- the same addresses on standard input in one run answer the same, line by
  line (the table grows with the addresses, or is read whole).
Skips (exit 77) when /usr/lib/llvm-19/bin/llvm-symbolizer is absent
(scripts/deps.sh --test installs it).
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import clilib  # noqa: E402
import native_oracle as no  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402

LLVM19 = "/usr/lib/llvm-19/bin/llvm-symbolizer"
clilib.need_binary()
if not os.path.exists(LLVM19):
    harness.skip("%s absent (scripts/deps.sh --test installs llvm-19)" % LLVM19)

c = Checks()
sb = Sandbox("pdbsym-cli-lazy-")
total = agree = 0
# each address in its own cold process; the lazy reader's answers equal the
# whole table's at every code byte of every fixture in unit.test_pdb_lazy, so
# a sample of each fixture checks the command's path
per_fixture = harness.sweep(20, 8)
for r in no.manifest(clilib.NATIVE):
    d = sb.path(r["name"])
    os.makedirs(d)
    exe = os.path.join(d, r["exe"])
    shutil.copy(os.path.join(clilib.NATIVE, r["exe"]), exe)
    # llvm-symbolizer finds the PDB beside the image under its RSDS name
    pdb = os.path.join(d, r["cv_path"].split("\\")[-1])
    with gzip.open(os.path.join(clilib.NATIVE, r["pdb"])) as z, open(pdb, "wb") as o:
        o.write(z.read())
    rows = no.rows(clilib.NATIVE, r["expected"])
    alt = no.rows(clilib.NATIVE, r["crosscheck"])
    rvas = [v for lo, hi, _, _ in rows for v in range(lo, hi, 3)]
    rvas = rvas[::max(1, len(rvas) // per_fixture)]
    p = subprocess.run([LLVM19, "--obj=" + exe, "--relative-address", "--inlines",
                        "--functions=short", "--no-demangle", "--output-style=JSON"] +
                       ["0x%x" % v for v in rvas], capture_output=True, text=True, timeout=120)
    theirs = json.loads(p.stdout) if p.returncode == 0 else []
    c.eq("%s: llvm-symbolizer 19 answers every address" % r["name"], len(theirs), len(rvas))
    one_by_one, bad = [], []
    for v, t in zip(rvas, theirs):
        rc, out, err = sb.run(["lookup", pdb, "0x%x" % v])
        got = json.loads(out) if rc == 0 and out.strip() else {}
        one_by_one.append(got)
        ours = no.sym_view(got.get("symbols") or [])
        if r["variant"] == "pub":
            want = next((f for lo, hi, f, _ in rows if lo <= v < hi), [])
        else:
            want = [{"function": s["FunctionName"], "file": s["FileName"], "line": s["Line"]}
                    for s in t["Symbol"] if s["FunctionName"]]
        ok = rc == 0 and no.answer_ok(ours, want, no.alt_for(alt, v))
        total += 1
        agree += ok
        if not ok:
            bad.append(("0x%x" % v, ours, want))
    c.eq("%s: %d addresses one run each: as llvm-symbolizer 19" % (r["name"], len(rvas)), bad, [])
    rc, out, err = sb.run(["lookup", pdb], stdin="".join("0x%x\n" % v for v in rvas))
    together = [json.loads(x) for x in out.splitlines() if x.strip()]
    c.eq("%s: the same addresses on stdin in one run answer the same" % r["name"],
         (rc, together), (0, one_by_one))
print("%d addresses, one run each: %d answer as llvm-symbolizer 19 (or the fixture's rows)"
      % (total, agree))
c.true("enough addresses", total >= 17 * per_fixture * 3 // 4, total)
sb.close()
c.done()
