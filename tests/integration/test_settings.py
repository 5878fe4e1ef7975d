"""test_settings.py - one settings layer: every setting `pdbsym serve --help`
lists is given a bad value in each of the three places a value comes from
(the environment PDBSYM_KEY, a config file line, a flag --key), and each time
the command stops with exit status 2 and one line on stderr that names the
setting, the value, the place and what is allowed.  The bad value is chosen
by the kind --help shows for the setting ([count 1..256], [seconds], [size],
[listen], ...), so a setting added to config.c's table is covered by
declaring its kind.

Then the rules around the values:
- durations and sizes with units are taken (5m, 2h, 64K...) and a server
  given them answers /health;
- a config file's trailing comment is not part of the value
  (`cache_dir = DIR # where` uses DIR), a quoted value keeps its '#', an
  unclosed quote or text after the closing one is refused;
- an unknown PDBSYM_ variable is a warning naming the nearest setting (the
  command goes on), an unknown config key or flag is refused naming it;
- a bad listen or symbol_path exits 2 (they exited 1 after opening the cache);
- `pdbsym health` reads listen through the same reader.
Python standard library only."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402

clilib.need_binary()
BIN = clilib.BIN
c = Checks()

# the bad value for each kind, and a word the refusal must hold
BAD = {
    "count": ("ten", "whole number"),
    "size": ("12Q", "size in bytes"),
    "seconds": ("5 parsecs", "duration in whole seconds"),
    "ms": ("soon", "duration in milliseconds"),
    "duration": ("soon", "want a duration"),
    "bool": ("maybe", "true or false"),
    "listen": ("127.0.0.1:99999", "port"),
    "word": ("loud", "one of"),
    "folder": ("/nonexistent/pdbsym-settings-test", "existing folder"),
    "cache-folder": (None, "folder"),  # a file's path, made below
    "symbol-path": ("ftp://symbols.example/store", "http and https"),
    "origins": ("not an origin", "origin"),
    "text": ("bad\x01value", "control character"),
}

with tempfile.TemporaryDirectory(prefix="pdbsym-settings-") as tmp:
    env0 = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_")}
    env0["PDBSYM_CACHE_DIR"] = os.path.join(tmp, "cache")
    env0["PDBSYM_OFFLINE"] = "true"
    a_file = os.path.join(tmp, "a-file")
    open(a_file, "w").close()

    def run(args, env=None, timeout=20, input=None):
        e = dict(env0)
        e.update(env or {})
        e = {k: v for k, v in e.items() if v is not None}
        r = subprocess.run([BIN] + args, env=e, capture_output=True, text=True, timeout=timeout, input=input)
        return r.returncode, r.stdout, r.stderr

    rc, out, err = run(["serve", "--help"])
    rows = []
    for ln in out.splitlines():
        m = re.match(r"^  ([a-z0-9_]+) +default (\S+) +\[([a-z-]+)(?: ([^\]]*))?\]", ln)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3), m.group(4) or ""))
    c.true("serve --help lists every setting with its kind", len(rows) >= 68, len(rows))
    kinds = sorted({r[2] for r in rows})
    c.true("every kind --help shows has a bad value here", all(k in BAD for k in kinds), kinds)

    def refused(what, rc, err, key, value, place, want):
        lines = err.strip().splitlines()
        line = lines[-1] if lines else ""
        ok = (rc == 2 and len(lines) == 1 and key in line and place in line and want in line and
              (value.replace("\x01", "") in line.replace("\x01", "") or value == "\x01"))
        c.true("%s: exit 2, one line naming %s, the value, %s and what is allowed" % (what, key, place),
               ok, (rc, err[-400:]))

    # every setting; in the sanitizer run (PDBSYM_TEST_SWEEP=sample) two of
    # each kind: one reader per kind, which the normal run feeds every setting
    per_kind = harness.sweep(len(rows), 2)
    seen = {}
    sample = [r for r in rows if seen.setdefault(r[2], []).append(r) or len(seen[r[2]]) <= per_kind]
    tested = 0
    for key, default, kind, rng in sample:
        if kind not in BAD:
            continue
        bad, want = BAD[kind]
        if kind == "cache-folder":
            bad = a_file
        values = [(bad, want)]
        m = re.match(r"(\d+)\.\.(\d*)$", rng)
        if m and kind == "count":  # the bounds too
            lo, hi = int(m.group(1)), m.group(2)
            if lo > 0:
                values.append((str(lo - 1), "from %d" % lo if hi else "at least %d" % lo))
            if hi:
                values.append((str(int(hi) + 1), "to %s" % hi))
        m = re.match(r"(\d+)ms\.\.(\d+)h$", rng)
        if m and kind == "duration":  # the bounds too
            values.append(("%dms" % (int(m.group(1)) - 1), "from %sms" % m.group(1)))
            values.append(("%dh" % (int(m.group(2)) + 1), "to %sh" % m.group(2)))
        for value, want in values:
            env_name = "PDBSYM_" + key.upper()
            rc, out, err = run(["serve"], env={env_name: value})
            refused("%s=%r" % (env_name, value), rc, err, key, value, "environment " + env_name, want)
            if "\x01" not in value:  # a config line cannot hold every byte a variable can
                conf = os.path.join(tmp, "bad.conf")
                with open(conf, "w") as f:
                    f.write("# a config file\n%s = %s\n" % (key, value))
                rc, out, err = run(["serve", "--config", conf])
                refused("config line %s = %r" % (key, value), rc, err, key, value, "line 2", want)
            flag = "--" + key.replace("_", "-")
            rc, out, err = run(["serve", flag, value])
            refused("flag %s %r" % (flag, value), rc, err, key, value, "flag " + flag, want)
            tested += 1
    print("%d settings, %d bad values, each three ways" % (len(rows), tested))
    c.true("every setting was fed a bad value", tested >= len(sample), (tested, len(sample)))

    # the CLI commands read the same settings through the same layer
    for cmd in (["cache", "stats"], ["warm", tmp], ["symbolicate"], ["fetch", "a.pdb", "00" * 16 + "1"]):
        rc, out, err = run(cmd, env={"PDBSYM_LISTEN": "127.0.0.1:99999"})
        refused("%s with PDBSYM_LISTEN=127.0.0.1:99999" % " ".join(cmd), rc, err, "listen",
                "127.0.0.1:99999", "environment PDBSYM_LISTEN", "port")
    rc, out, err = run(["cache", "stats", "--cache-max-bytes", "lots"])
    refused("cache stats --cache-max-bytes lots", rc, err, "cache_max_bytes", "lots",
            "flag --cache-max-bytes", "size")
    rc, out, err = run(["warm", "--symbol-path", "ftp://x/y", tmp])
    refused("warm --symbol-path ftp://x/y", rc, err, "symbol_path", "ftp://x/y", "flag --symbol-path",
            "http and https")
    rc, out, err = run(["health", "--listen", "127.0.0.1:70000"])
    refused("health --listen 127.0.0.1:70000", rc, err, "listen", "127.0.0.1:70000", "flag --listen", "port")

    # values with units are taken: a server started with them answers
    conf = os.path.join(tmp, "units.conf")
    with open(conf, "w") as f:
        f.write("read_timeout = 1m   # a comment after a value\n"
                "negative_missing_ttl = 2h\n"
                "download_retry_base_ms = 1s\n"
                "max_body_bytes = 64KiB\n"
                "trace_feed_bytes = \"256k\"\n"
                "defer_accept = 0\n")
    s = Server(config=None, args=("--config", conf))
    try:
        st, _, _ = s.request("GET", "/health")
        c.eq("a server given 1m, 2h, 1s, 64KiB, \"256k\" and a trailing comment answers /health", st, 200)
    finally:
        s.close()

    # a config file's comment is not part of a value; quotes keep one
    conf = os.path.join(tmp, "comment.conf")
    cdir = os.path.join(tmp, "cache-t")
    with open(conf, "w") as f:
        f.write("cache_dir = %s # where the cache goes\n" % cdir)
    run(["cache", "_fill", "--modules", "0", "--config", conf], env={"PDBSYM_CACHE_DIR": None})
    rc, out, err = run(["cache", "stats", "--config", conf], env={"PDBSYM_CACHE_DIR": None})
    c.true("cache_dir = DIR # comment: the cache is in DIR", rc == 0 and ("path: %s/pdbsym.sqlite" % cdir) in out,
           (rc, out, err))
    c.true("no folder named after the comment", not os.path.exists(cdir + " # where the cache goes"),
           os.listdir(tmp))
    with open(conf, "w") as f:
        f.write('cache_dir = "%s #2"   # quoted\n' % cdir)
    run(["cache", "_fill", "--modules", "0", "--config", conf], env={"PDBSYM_CACHE_DIR": None})
    rc, out, err = run(["cache", "stats", "--config", conf], env={"PDBSYM_CACHE_DIR": None})
    c.true("a quoted value keeps its '#'", rc == 0 and ("path: %s #2/pdbsym.sqlite" % cdir) in out, (rc, out, err))
    for text, want in (('cache_dir = "%s\n' % cdir, "close it"), ('cache_dir = "%s" extra\n' % cdir, "comment")):
        with open(conf, "w") as f:
            f.write(text)
        rc, out, err = run(["serve", "--config", conf])
        c.true("config %r: exit 2, one line saying %r" % (text.strip(), want),
               rc == 2 and len(err.strip().splitlines()) == 1 and want in err and "cache_dir" in err, (rc, err))

    # unknown names
    rc, out, err = run(["symbolicate"], env={"PDBSYM_MAX_FRAME": "3"}, input='{"modules": [], "frames": []}')
    c.true("an unknown PDBSYM_MAX_FRAME: a warning naming PDBSYM_MAX_FRAMES, and the command goes on",
           rc == 0 and "PDBSYM_MAX_FRAME " in err and "PDBSYM_MAX_FRAMES" in err and "warning" in err, (rc, err))
    with open(conf, "w") as f:
        f.write("max_frame = 3\n")
    rc, out, err = run(["serve", "--config", conf])
    c.true("an unknown config key: exit 2 naming it and max_frames",
           rc == 2 and "max_frame" in err and "max_frames" in err, (rc, err))
    rc, out, err = run(["serve", "--max-frame", "3"])
    c.true("an unknown flag: exit 2 naming it and --max-frames",
           rc == 2 and "--max-frame" in err and "--max-frames" in err, (rc, err))

c.done()
