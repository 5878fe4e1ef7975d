"""README.md's "Symbol servers", run as written: each PDBSYM_SYMBOL_PATH the
section shows is given to a real `pdbsym serve`, with its servers and folder
replaced by local stand-ins (tests/symserver.py for Microsoft's server and for
the private one, which answers 401 unless the README's Authorization header
comes; a symstore folder for /srv/symbols), each holding one native fixture's
PDB.  A module is found exactly when the path names the store that holds it.
The section's `pdbsym dump` claims are checked against the command's output."""
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fetchlib  # noqa: E402
from native_oracle import manifest  # noqa: E402
from pdbsym_server import BIN, Checks, Server, need_binary  # noqa: E402

need_binary()
root = fetchlib.SRC
native_dir = os.path.join(root, "tests", "fixtures", "native")
readme = open(os.path.join(root, "README.md")).read()
m = re.search(r"^## Symbol servers\n(.*?)^## ", readme, re.S | re.M)
c = Checks()
c.true("README has a Symbol servers section", m is not None)
text = m.group(1) if m else ""
paths = [shlex.split(x)[0].split("=", 1)[1] for x in re.findall(r"(PDBSYM_SYMBOL_PATH='[^']*')", text)]
c.true("the section shows symbol paths", len(paths) >= 4, paths)

MS = "https://msdl.microsoft.com/download/symbols"
PRIVATE = "https://symbols.example.com/store"
FOLDER = "/srv/symbols"
cols = {r["name"]: r for r in manifest(native_dir)}
tmp = tempfile.mkdtemp(prefix="pdbsym-readme-paths-")
stores = {}
for key, name in ((MS, "c-x86-O2"), (PRIVATE, "c-x64-O2"), (FOLDER, "cpp-x64-O2")):
    col = cols[name]
    d = os.path.join(tmp, name)
    f = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    fetchlib.put(d, "%s/%s/%s" % (f, col["symkey"], f), gzip.open(os.path.join(native_dir, col["pdb"])).read())
    stores[key] = (d, col, "/%s/%s/%s" % (f, col["symkey"], f))
ms = fetchlib.Server(stores[MS][0])
private = fetchlib.Server(stores[PRIVATE][0])
header = re.search(r"\|(Authorization): Bearer (\w+)", text)
c.true("the private server's example has an Authorization header", header is not None)
if header:
    private.control({stores[PRIVATE][2]: {"require_header": {header.group(1): "Bearer " + header.group(2)}}})
try:
    for path in paths:
        local = path.replace(MS, ms.url).replace(PRIVATE, private.url).replace(FOLDER, stores[FOLDER][0])
        srv = Server(env={"PDBSYM_SYMBOL_PATH": local, "PDBSYM_OFFLINE": "false"})
        try:
            keys = [k for k in (MS, PRIVATE, FOLDER) if k in path]
            mods = [{"debug_file": s[1]["cv_path"], "debug_id": s[1]["symkey"]} for s in stores.values()]
            st, h, j = srv.json("POST", "/symbolicate", {"modules": mods, "frames": [], "timeout": 60}, timeout=90)
            got = [a["status"] for a in j["modules"]]
            want = ["found" if k in keys else "missing" for k in stores]
            c.eq("symbol path %r: modules" % path, got, want)
        finally:
            srv.close()
    # without the header the private server refuses: the README's header is what opens it
    srv = Server(env={"PDBSYM_SYMBOL_PATH": "srv*" + private.url, "PDBSYM_OFFLINE": "false"})
    try:
        col = stores[PRIVATE][1]
        st, h, j = srv.json("POST", "/symbolicate", {"modules": [{"debug_file": col["cv_path"], "debug_id": col["symkey"]}],
                                                     "frames": [], "timeout": 60}, timeout=90)
        c.true("the private server without its header: not found", j["modules"][0]["status"] != "found", j)
    finally:
        srv.close()

    # the dump the section quotes
    dm = re.search(r"^    (\./build/pdbsym dump \S+)", text, re.M)
    c.true("the section runs pdbsym dump", dm is not None)
    if dm:
        exe = os.path.join(root, dm.group(1).split()[-1])
        out = subprocess.run([BIN, "dump", exe], capture_output=True, text=True, timeout=60).stdout
        j = json.loads(out)
        for k, v in re.findall(r'`"(debug_file|debug_id|code_file|code_id)":"([^"]*)"`', text):
            c.eq("dump's %s as the README says" % k, j.get(k), v)
finally:
    ms.stop()
    private.stop()
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
