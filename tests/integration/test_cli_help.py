"""One style for every subcommand, checked on the real binary: each command
that `pdbsym --help` lists (and each `cache` subcommand) prints its usage on
stdout and exits 0 for --help and -h; an unknown flag exits 2 with one line on
stderr that names the command and says to run its --help; `pdbsym --version`
equals `pdbsym version`; no command, or an unknown one, exits 2 with a hint."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clilib import Checks, Sandbox  # noqa: E402

c = Checks()
sb = Sandbox("pdbsym-cli-help-")
try:
    rc, out, err = sb.run(["--help"])
    c.eq("pdbsym --help: exit 0, nothing on stderr", (rc, err), (0, ""))
    cmds = re.findall(r"^  ([a-z]+) ", out.split("commands:")[1], re.M) if "commands:" in out else []
    c.true("pdbsym --help lists the commands",
           {"lookup", "dump", "symbolicate", "warm", "serve", "fetch", "cache", "health", "version"} <= set(cmds), cmds)
    c.true("pdbsym --help documents the exit statuses", "Exit status" in out, out)
    for cmd in cmds:
        for flag in ("--help", "-h"):
            rc, o, e = sb.run([cmd, flag])
            c.true("%s %s: usage on stdout, exit 0" % (cmd, flag),
                   rc == 0 and o.startswith("usage: pdbsym " + cmd) and e == "", (rc, o[:80], e))
        rc, o, e = sb.run([cmd, "--help"])
        c.true("%s --help documents its exit status" % cmd, "xit status" in o or "exits 0" in o.lower(), o)
        rc, o, e = sb.run([cmd, "--no-such-flag"])
        c.true("%s --no-such-flag: exit 2, one line naming the command and --help" % cmd,
               rc == 2 and len(e.splitlines()) == 1 and ("pdbsym " + cmd) in e and "--help" in e and
               "--no-such-flag" in e, (rc, o[:80], e))
    rc, out, err = sb.run(["cache", "--help"])
    subs = ["stats", "list", "evict", "verify", "clear"]
    for sub in subs:
        rc, o, e = sb.run(["cache", sub, "--help"])
        c.true("cache %s --help" % sub, rc == 0 and o.startswith("usage: pdbsym cache " + sub), (rc, o[:80], e))
        rc, o, e = sb.run(["cache", sub, "--no-such-flag"])
        c.true("cache %s --no-such-flag: exit 2 with a hint" % sub, rc == 2 and "--help" in e, (rc, e))
    rc1, v1, e1 = sb.run(["--version"])
    rc2, v2, e2 = sb.run(["version"])
    c.true("--version equals version", rc1 == rc2 == 0 and v1 == v2 and v1.startswith("pdbsym "), (v1, v2))
    for args in ([], ["frobnicate"]):
        rc, o, e = sb.run(args)
        c.true("pdbsym %s: exit 2 with one hint line" % " ".join(args),
               rc == 2 and o == "" and len(e.splitlines()) == 1 and "pdbsym --help" in e, (rc, o, e))
finally:
    sb.close()
c.done()
