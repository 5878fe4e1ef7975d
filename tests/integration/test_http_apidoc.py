"""Executes api.md: every pair of ```http blocks (a request, then the
response) is sent to a real `pdbsym serve` started with the settings in the
```ini apidoc-config block, its cache warmed with the native fixtures
(tests/fixtures/native, so that examples answer real frames), and the answer
is compared with the document: status, the headers shown, and the JSON body
as a pattern (every field shown must match, "..." is any value, a string
ending in "..." is a prefix).  For a text body (/metrics) every series shown
must be exposed.  The symbol path is a local folder in symstore layout
holding the managed fixtures' debug builds
(tests/fixtures/managed/{windows,portable}-debug: Demo.pdb and Demo.dll),
then an upstream that knows no module."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, Server, SlowUpstream, warmed_cache  # noqa: E402

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
doc = open(os.path.join(root, "api.md"), encoding="utf-8").read()

blocks = re.findall(r"^```([^\n]*)\n(.*?)^```$", doc, re.M | re.S)
config = "".join(b for tag, b in blocks if tag.strip() == "ini apidoc-config")
http_blocks = [b for tag, b in blocks if tag.strip() == "http"]

c = Checks()
c.true("api.md has a config block", config != "")
c.true("api.md has an even number of http blocks", len(http_blocks) % 2 == 0 and http_blocks, len(http_blocks))


def split_message(text):
    head, _, body = text.strip("\n").partition("\n\n")
    lines = head.split("\n")
    hdrs = {}
    for ln in lines[1:]:
        if not ln.strip():
            continue
        k, _, v = ln.partition(":")
        hdrs[k.strip()] = v.strip()
    return lines[0], hdrs, body.strip()


def match(want, got, path="$"):
    """Returns a list of mismatches."""
    if want == "...":
        return []
    if isinstance(want, str) and want.endswith("...") and isinstance(got, str):
        return [] if got.startswith(want[:-3]) else ["%s: %r does not start with %r" % (path, got, want[:-3])]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return ["%s: want an object, got %r" % (path, got)]
        out = []
        for k, v in want.items():
            if k not in got:
                out.append("%s.%s: missing" % (path, k))
            else:
                out += match(v, got[k], "%s.%s" % (path, k))
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return ["%s: want %d elements, got %r" % (path, len(want), got)]
        out = []
        for i, (w, g) in enumerate(zip(want, got)):
            out += match(w, g, "%s[%d]" % (path, i))
        return out
    if type(want) is not type(got) or want != got:
        return ["%s: want %r, got %r" % (path, want, got)]
    return []


def fixture_store():
    """A symstore-layout folder: Demo.pdb/<GUID><age>/Demo.pdb (Windows),
    Demo.pdb/<GUID>FFFFFFFF/Demo.pdb (Portable), Demo.dll/<stamp><size>/Demo.dll."""
    top = tempfile.mkdtemp(prefix="pdbsym-apidoc-store-")
    managed = os.path.join(root, "tests", "fixtures", "managed")
    for build, windows in (("windows-debug", True), ("portable-debug", False)):
        d = os.path.join(managed, build)
        if not os.path.exists(os.path.join(d, "Demo.pdb")):
            continue
        dll = open(os.path.join(d, "Demo.dll"), "rb").read()
        pe = struct.unpack_from("<I", dll, 0x3C)[0]
        code_id = "%08X%X" % (struct.unpack_from("<I", dll, pe + 8)[0], struct.unpack_from("<I", dll, pe + 80)[0])
        srm = os.path.join(d, "Demo.dll.srm.jsonl" if windows else "Demo.pdb.srm.jsonl")
        cv = [o for o in map(json.loads, open(srm)) if o["kind"] == "debugdir" and o["type"] == "CodeView"][0]
        key = cv["guid"].replace("-", "").upper() + ("%X" % cv["age"] if windows else "FFFFFFFF")
        for name, k, src in (("Demo.pdb", key, os.path.join(d, "Demo.pdb")), ("Demo.dll", code_id, None)):
            os.makedirs(os.path.join(top, name, k), exist_ok=True)
            with open(os.path.join(top, name, k, name), "wb") as f:
                f.write(open(src, "rb").read() if src else dll)
    return top


store = fixture_store()
up = SlowUpstream(1.0)
cache = warmed_cache(os.path.join(root, "tests", "fixtures", "native"))
env = dict(up.env(), PDBSYM_CACHE_DIR=cache)
env["PDBSYM_SYMBOL_PATH"] = store + ";" + env["PDBSYM_SYMBOL_PATH"]
srv = Server(env=env, config=config)
try:
    for i in range(0, len(http_blocks) - 1, 2):
        req_line, req_hdrs, req_body = split_message(http_blocks[i])
        resp_line, resp_hdrs, resp_body = split_message(http_blocks[i + 1])
        method, path = req_line.split()[:2]
        what = "api.md example %d (%s %s)" % (i // 2 + 1, method, path)
        st, h, data = srv.request(method, path, req_body.encode() if req_body else None, headers=req_hdrs)
        want_status = int(resp_line.split()[1])
        c.eq(what + ": status", st, want_status)
        for k, v in resp_hdrs.items():
            c.eq(what + ": header " + k, h.get(k.lower()), v)
        if not resp_body:
            continue
        if resp_hdrs.get("Content-Type", "").startswith("application/json"):
            try:
                got = json.loads(data)
            except ValueError:
                c.true(what + ": JSON body", False, repr(data[:300]))
                continue
            bad = match(json.loads(resp_body), got)
            c.true(what + ": body", not bad, "\n  " + "\n  ".join(bad))
        else:
            exposed = {ln.rsplit(" ", 1)[0] for ln in data.decode().splitlines() if ln and not ln.startswith("#")}
            for ln in resp_body.splitlines():
                series = ln.rsplit(" ", 1)[0]
                c.true(what + ": series " + series, series in exposed)
finally:
    srv.close()
    up.close()
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)

# every setting `pdbsym serve --help` lists is a row of api.md's Settings
# table with the same default, and the table has no other rows
out = subprocess.run([os.environ["PDBSYM_BIN"], "serve", "--help"], capture_output=True, text=True).stdout
helped = {}
for ln in out.splitlines():
    m = re.match(r"^  ([a-z_]+) +default (\S+)", ln)
    if m:
        helped[m.group(1)] = m.group(2)
table = doc.split("### Settings", 1)[1].split("\n## ", 1)[0]
rows = {}
for ln in table.splitlines():
    m = re.match(r"^\| `([a-z_]+)` \| (`[^`]*`|empty) \|", ln)
    if m:
        rows[m.group(1)] = "" if m.group(2) == "empty" else m.group(2).strip("`")
c.true("serve --help lists settings", len(helped) > 20, helped)
c.eq("settings in --help and in api.md", sorted(helped), sorted(rows))
for k, v in helped.items():
    if k in rows:
        c.eq("api.md default of %s" % k, rows[k], "" if v == '""' else v)
c.done()
