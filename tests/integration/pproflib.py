"""Go's pprof as the independent reader of the pprof profiles pdbsym writes
and pushes (test_profile_push.py, test_compose.py): `go tool pprof -raw`,
its output parsed, names compared the way it prints them."""
import os
import re
import shutil
import subprocess

GO = shutil.which("go") or "/usr/lib/go/bin/go"


def norm(name):
    """a name as go tool pprof prints it: pprof drops <...> groups (C++
    templates to it) and then an argument list holding one; both sides are
    compared that way"""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    n = "".join(out)
    return n.split("(")[0] if "(" in n else n


def go_raw(pprof_bytes, path, home):
    """`go tool pprof -raw` of pprof_bytes (written to path); home: a folder
    of the test's own for Go's HOME and build cache."""
    with open(path, "wb") as f:
        f.write(pprof_bytes)
    r = subprocess.run([GO, "tool", "pprof", "-raw", path], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "gocache"),
                                GOFLAGS="-mod=mod"))
    return r.returncode, r.stdout, r.stderr


def parse_raw(text):
    """go tool pprof -raw: the samples (values and location ids) and the
    locations (id -> [(function, file, line)])"""
    samples, locs, sec = [], {}, None
    cur = None  # noqa: F841
    for line in text.splitlines():
        if line.startswith("Samples:"):
            sec = "s"
            continue
        if line.startswith("Locations"):
            sec = "l"
            continue
        if line.startswith("Mappings"):
            sec = None
            continue
        if sec == "s":
            m = re.match(r"\s*([\d ]+):\s*([\d ]+)\s*$", line)
            if m:
                samples.append(([int(x) for x in m.group(1).split()], [int(x) for x in m.group(2).split()]))
        elif sec == "l":
            # "   3: 0x0 M=1 NAME FILE:LINE s=0(SYSTEM NAME)"; NAME may hold spaces
            m = re.match(r"\s*(\d+): 0x[0-9a-f]+(?: M=\d+)? (.*) (\S*):(\d+) s=\d+(?:\(.*\))?\s*$", line)
            if m:
                cur = int(m.group(1))
                locs[cur] = [(m.group(2), m.group(3), int(m.group(4)))]
                continue
            m = re.match(r"\s+(.*) (\S*):(\d+) s=\d+(?:\(.*\))?\s*$", line)  # an inlined line
            if m and cur is not None:
                locs[cur].append((m.group(1), m.group(2), int(m.group(3))))
    return samples, locs
