"""Trace output's UTF-8 repair (server/engine/trace_out.c, put_json_str): bytes
of a file path or a name that are not UTF-8 are written as U+FFFD, one per
byte that does not start a valid sequence (the rule jsonw.h states for the
service's answers), so the speedscope document is always valid JSON in UTF-8.

The input is crafted in the test's own folder from real compilers' and
runtimes' output: tests/fixtures/nettrace/net10.0's Workload.pdb (Roslyn) with
the bytes of the "Program.cs" part of its document names (a #Blob entry,
ECMA-335 II.24.2.4 and the Portable PDB spec's "Document Name Blob") replaced,
same length, by

    FF  C3 A9  C0 AF  E2 82  ".cs"
    (a byte never in UTF-8, a valid "e acute", an overlong '/', a 3-byte
     sequence cut short by the '.')

and its trace (the .NET 10 runtime's) under a file name with a 0xFF byte in
it (the speedscope "name" is the trace's file name).  Oracles, from outside
pdbsym: Python's strict UTF-8 decoder and json parser on the whole output;
TraceLog's stacks (workload.stacks.jsonl.gz, tracelib.compare), in which every
frame whose file is /_/Program.cs must now carry
"/_/\uFFFD\u00E9\uFFFD\uFFFD\uFFFD\uFFFD.cs" (the patched positions: the lone
FF one, each byte of the overlong and of the cut-short sequence one, the valid
pair kept) and every other frame be as TraceLog has it; the name must be
"w\uFFFDrkload.nettrace".  The same through POST /traces, with the patched
PDB on a real symbol server (tests/symserver.py).
"""
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import clilib  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402
from pdbsym_server import Server  # noqa: E402
from tracelib import FIX, jsonl_gz, oracle_samples, same_stack, speedscope_samples  # noqa: E402

clilib.need_binary()
src = os.path.join(FIX, "net10.0")
if not os.path.exists(os.path.join(src, "workload.nettrace")):
    harness.skip("tests/fixtures/nettrace absent")

c = Checks()
sb = Sandbox("pdbsym-trace-utf8-")

PATCH = b"\xff\xc3\xa9\xc0\xaf\xe2\x82.cs"      # in place of b"Program.cs"
REPAIRED = "/_/\ufffd\u00e9\ufffd\ufffd\ufffd\ufffd.cs"
TRACE_NAME = b"w\xffrkload.nettrace"
REPAIRED_NAME = "w\ufffdrkload.nettrace"

pdb = bytearray(open(os.path.join(src, "Workload.pdb"), "rb").read())
at = pdb.find(b"\x0aProgram.cs")  # the blob: its length (10), its bytes
c.true("Workload.pdb has the blob \"Program.cs\" once", at > 0 and pdb.find(b"Program.cs", at + 2) < 0, at)
pdb[at + 1:at + 11] = PATCH
os.makedirs(sb.path("pdbs"))
with open(sb.path("pdbs", "Workload.pdb"), "wb") as f:
    f.write(pdb)
with open(os.path.join(src, "Workload.dll"), "rb") as f:
    dll = f.read()
with open(sb.path("pdbs", "Workload.dll"), "wb") as f:
    f.write(dll)
trace_data = open(os.path.join(src, "workload.nettrace"), "rb").read()
trace_path = os.path.join(os.fsencode(sb.dir), TRACE_NAME)
with open(trace_path, "wb") as f:
    f.write(trace_data)


def expected():
    """TraceLog's stacks with /_/Program.cs as the repair writes the patched name."""
    out = {}
    for tid, samples in oracle_samples("net10.0").items():
        out[tid] = [[dict(f, file=REPAIRED) if f.get("file") == "/_/Program.cs" else f for f in s]
                    for s in samples]
    return out


def check_doc(what, raw, name=REPAIRED_NAME):
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        c.true("%s: the output is UTF-8" % what, False, str(e))
        return
    try:
        doc = json.loads(text)
    except ValueError as e:
        c.true("%s: the output is JSON" % what, False, str(e))
        return
    c.true("%s: strict UTF-8 and JSON" % what, True)
    if name:
        c.eq("%s: the name, its 0xFF byte as U+FFFD" % what, doc.get("name"), name)
    files = set(f.get("file") for f in doc["shared"]["frames"])
    c.true("%s: the patched document as repaired" % what, REPAIRED in files, sorted(map(repr, files)))
    c.true("%s: no frame names /_/Program.cs" % what, "/_/Program.cs" not in files)
    ours, want = speedscope_samples(doc), expected()
    c.eq("%s: threads" % what, sorted(ours), sorted(want))
    bad = hits = 0
    for tid in want:
        got = ours.get(tid, [])
        c.eq("%s: thread %d samples" % (what, tid), len(got), len(want[tid]))
        for g, w in zip(got, want[tid]):
            hits += sum(1 for f in w if f.get("file") == REPAIRED)
            if not same_stack(g, w):
                bad += 1
                if bad <= 2:
                    print("  %s: ours %r\n  want %r" % (what, g[:4], w[:4]))
    c.eq("%s: samples whose stack differs from TraceLog's (patched file repaired)" % what, bad, 0)
    c.true("%s: frames on the patched document" % what, hits > 100, hits)
    # the raw bytes: each U+FFFD where a patched byte was, the valid pair kept
    c.true("%s: the repaired bytes in the text" % what,
           b'"file":"/_/\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.cs"' in raw)
    print("%s: %d bytes, %d frames on the patched document, name %r" % (what, len(raw), hits, doc.get("name")))


try:
    # ---- pdbsym trace (the CLI), PDB from --pdb-dir --------------------------------------
    out = sb.path("out.speedscope.json")
    rc, so, se = sb.run(["trace", "--offline", "--pdb-dir", sb.path("pdbs"), os.fsdecode(trace_path),
                         "-o", out], timeout=600)
    c.eq("pdbsym trace: exit status (%s)" % se.strip(), rc, 0)
    if rc == 0:
        check_doc("pdbsym trace", open(out, "rb").read())

    # ---- POST /traces, PDB on a symbol server --------------------------------------------
    sym = clilib.SymServer(sb.path("store"))
    key = None
    for e in jsonl_gz(os.path.join(src, "workload.events.jsonl.gz")):
        if e["kind"] == "module" and e["il_path"].endswith("/Workload.dll"):
            key = e["pdb_guid"].replace("-", "").upper() + "FFFFFFFF"
    sym.put("Workload.pdb", key, bytes(pdb))
    srv = Server(config="symbol_path = srv*%s\noffline = false\n" % sym.url)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
        conn.request("POST", "/traces", body=trace_data, headers={"Content-Type": "application/octet-stream"})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        c.eq("POST /traces: status", r.status, 200)
        if r.status == 200:
            # the answer's name is the service's own: only the file is patched here
            check_doc("POST /traces", body, name=None)
    finally:
        srv.close()
        sym.close()
finally:
    sb.close()

c.done()
