"""test_cli_dialect.py - the commands speak one dialect (issue 28):
- a report goes to stdout, diagnostics to stderr (warm's lines and summary);
- warm passes over .gz files that are not gzip'ed symbol files (the trace
  fixtures' *.jsonl.gz oracles) instead of counting them as failures;
- every command that reads the settings takes --symbol-path, --cache-dir and
  --offline; lookup, dump and health, which use neither cache nor symbol
  server, say so in one line (exit 2) instead of "unknown option";
- a folder of the symbol path that does not exist is a warning;
- offline, a module not in the cache says that offline is the reason;
- cache list has a header line, cache evict takes the ids dump prints
  (tests/integration/test_store_cli.sh checks every id form).
Python standard library only."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
from clilib import Sandbox  # noqa: E402
from pdbsym_server import Checks  # noqa: E402

c = Checks()
ROOT = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NATIVE = os.path.join(ROOT, "tests", "fixtures", "native")
NETTRACE = os.path.join(ROOT, "tests", "fixtures", "nettrace")
sb = Sandbox("pdbsym-cli-dialect-")
try:
    # warm: the report on stdout; .jsonl.gz files are not failures
    rc, out, err = sb.run(["warm", "--offline", NETTRACE])
    s = clilib.summary(out)
    c.true("warm tests/fixtures/nettrace: exit 0, nothing failed (its *.jsonl.gz passed over)",
           rc == 0 and s and s["failed"] == 0 and s["found"] > 0, (rc, out[-400:], err[-400:]))
    c.true("warm: the report (module lines, summary) on stdout, stderr empty",
           "warm: found " in out and err == "", (out[-200:], err[-300:]))

    # the shared flags on every command that reads the settings
    missing = sb.path("no-such-store")
    for cmd in (["warm", "--offline", NATIVE], ["symbolicate"], ["cache", "stats"],
                ["fetch", "x.pdb", "00112233445566778899AABBCCDDEEFF1"],
                ["trace", os.path.join(NETTRACE, "net10.0", "workload.nettrace"), "-o", sb.path("t.json")]):
        stdin = '{"modules": [], "frames": []}' if cmd[0] == "symbolicate" else None
        rc, out, err = sb.run(cmd + ["--cache-dir", sb.path("cache"), "--symbol-path", missing, "--offline"],
                              stdin=stdin)
        c.true("%s takes --cache-dir, --symbol-path and --offline" % cmd[0],
               "unknown option" not in err and rc in (0, 1), (rc, err[-300:]))
        if cmd[0] != "cache":
            c.true("%s: the symbol path's missing folder is a warning" % cmd[0],
                   ("the folder %s does not exist" % missing) in err, err[-300:])

    # lookup, dump and health say why the shared flags do not apply
    pdb = os.path.join(NATIVE, "c-x64-O2.pdb.gz")
    for cmd in (["lookup", "--symbol-path", "x", pdb, "0x1020"], ["dump", "--cache-dir", "x", pdb],
                ["health", "--offline"]):
        rc, out, err = sb.run(cmd)
        c.true("%s %s: exit 2, one line saying it does not apply" % (cmd[0], cmd[1]),
               rc == 2 and len(err.strip().splitlines()) == 1 and "does not apply" in err and out == "",
               (rc, err))

    # offline: the reason is named
    req = {"modules": [{"debug_file": "c-x64-O2.pdb", "debug_id": "3af620a1-b67e-fbbe-4c4c-44205044422e-1"}],
           "frames": [{"module": 0, "rva": "0x1020"}]}
    rc, out, err = sb.run(["symbolicate", "--offline", "--cache-dir", sb.path("empty-cache"),
                           "--symbol-path", NATIVE], stdin=json.dumps(req))
    j = json.loads(out) if rc == 0 else {}
    merr = j.get("modules", [{}])[0].get("error", "")
    c.true("offline, a module not cached: its error names offline as the reason",
           j.get("modules", [{}])[0].get("status") == "missing" and merr.startswith("offline:"), (rc, out, err))

    # cache list: a header
    rc, out, err = sb.run(["cache", "list", "--cache-dir", sb.path("cache")])
    first = out.splitlines()[0] if out else ""
    c.eq("cache list: a header line", (rc, first.split("\t")),
         (0, ["last_used", "status", "rows", "bytes", "key", "source_or_error"]))
    # cache evict: the id dump prints
    rc, out, err = sb.run(["dump", os.path.join(NATIVE, "c-x64-O2.exe")])
    d = json.loads(out)
    rc, out, err = sb.run(["cache", "evict", d["debug_file"], d["debug_id"], "--cache-dir", sb.path("cache")])
    c.true("cache evict DEBUG_FILE DEBUG_ID, as dump prints them", rc == 0 and out.startswith("evicted c-x64-o2.pdb/"),
           (rc, out, err))
    rc, out, err = sb.run(["cache", "evict", "%s/%s" % (d["debug_file"], d["breakpad_id"]),
                           "--cache-dir", sb.path("cache")])
    c.true("cache evict again (breakpad id): nothing left, exit 1", rc == 1 and "no module" in err, (rc, err))
finally:
    sb.close()
c.done()
