"""`pdbsym fetch` offline (issue 14: api.md listed `--offline` among the
flags every cache- or network-touching command takes, and `fetch` refused
it): with --offline, PDBSYM_OFFLINE=true or `offline = true` in a config file
it reads the symbol path's folders only and never asks its servers; without
it, it asks them.  Also the debug-id forms on the command line.  A real PDB
(a native fixture) in a symstore folder and on a real symbol server
(tests/symserver.py) that counts its hits."""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import fetchlib  # noqa: E402
from native_oracle import manifest  # noqa: E402

BIN = fetchlib.BIN
if not os.path.exists(BIN):
    harness.skip("PDBSYM_BIN not set")
native_dir = os.path.join(fetchlib.SRC, "tests", "fixtures", "native")
ck = fetchlib.Checker("cli_fetch_offline")
col = next(r for r in manifest(native_dir) if r["name"] == "c-x64-O2")
name = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
pdb = gzip.open(os.path.join(native_dir, col["pdb"])).read()
tmp = tempfile.mkdtemp(prefix="pdbsym-fetch-offline-")
folder = os.path.join(tmp, "folder")
served = os.path.join(tmp, "served")
for r in (folder, served):
    fetchlib.put(r, "%s/%s/%s" % (name, col["symkey"], name), pdb)
srv = fetchlib.Server(served)


def run(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_")}
    env.update(env_extra or {})
    out = os.path.join(tmp, "out.pdb")
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([BIN, "fetch", name, col["symkey"], "--out", out] + args, capture_output=True, text=True,
                       env=env, timeout=120)
    got = open(out, "rb").read() if os.path.exists(out) else None
    return p.returncode, p.stdout, p.stderr, got


try:
    both = "srv*%s;%s" % (srv.url, folder)
    web = "srv*%s" % srv.url
    conf = os.path.join(tmp, "offline.conf")
    with open(conf, "w") as f:
        f.write("offline = true\n")
    for what, args, env in [("--offline", ["--offline", "--symbol-path", both], None),
                            ("PDBSYM_OFFLINE=true", ["--symbol-path", both], {"PDBSYM_OFFLINE": "true"}),
                            ("offline = true in --config", ["--config", conf, "--symbol-path", both], None)]:
        srv.reset()
        rc, out, err, got = run(args, env)
        ck.check(rc == 0 and got == pdb, "%s: the folder's PDB (rc %d, %s)" % (what, rc, err.strip()))
        ck.check(out.split("\t")[-1].strip() == os.path.join(folder, name, col["symkey"], name),
                 "%s: it came from the folder: %r" % (what, out))
        ck.check(sum(srv.hits().values()) == 0, "%s: the server was not asked: %r" % (what, srv.hits()))
    srv.reset()
    rc, out, err, got = run(["--offline", "--symbol-path", web])
    ck.check(rc == 1 and got is None and "no folder" in err, "offline, servers only: exit 1 naming it (%d, %r)" % (rc, err))
    ck.check(sum(srv.hits().values()) == 0, "offline, servers only: the server was not asked")
    rc, out, err, got = run(["--symbol-path", web])
    ck.check(rc == 0 and got == pdb and sum(srv.hits().values()) > 0, "online: from the server (%d, %r)" % (rc, err))

    # the debug id in the forms every command takes; without an age only a
    # Portable PDB is named, so --format windows refuses it
    h = col["guid"].replace("-", "")
    for did in (col["symkey"].lower(), "%s-%s" % (h.lower(), col["age"]), "%s-%s" % (col["guid"].lower(), col["age"])):
        p = subprocess.run([BIN, "fetch", name, did, "--offline", "--symbol-path", folder, "--out",
                            os.path.join(tmp, "x.pdb")], capture_output=True, text=True, timeout=60)
        ck.check(p.returncode == 0, "fetch %s: found (%s)" % (did, p.stderr.strip()))
    p = subprocess.run([BIN, "fetch", name, h, "--format", "windows", "--symbol-path", folder], capture_output=True,
                       text=True, timeout=60)
    ck.check(p.returncode == 2 and "no age" in p.stderr, "fetch without an age, --format windows: %r" % p.stderr)
finally:
    srv.stop()
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(ck.finish())
