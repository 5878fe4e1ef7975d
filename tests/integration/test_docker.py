"""The sidecar image, built and run as issue 9 asks: docker/build.sh builds
docker/Dockerfile with podman (no Docker engine, no registry: the base image
comes from debootstrap), then the container runs with the host network, a
named volume for its cache and a symstore folder made from tests/fixtures
mounted read-only and named by PDBSYM_SYMBOL_PATH. Checked: the image keeps
its HEALTHCHECK and the check reports healthy; a native fixture's frames
(llvm-symbolizer's answers, tests/fixtures/native/*.expected.tsv) and a
managed fixture's (System.Reflection.Metadata's sequence points,
tests/fixtures/managed/portable-debug) come back right through it; the
process runs as the image's non-root user; the image holds the binary and
its runtime libraries, no compiler or headers; it stops cleanly on SIGTERM.
Container, volume and tag are removed at the end.

Opt-in: it runs when PDBSYM_TEST_CONTAINER=1 or CI=true, and is otherwise
listed by scripts/test.sh as an opt-in test not asked for. When it runs,
docker/build.sh installs podman, buildah, runc and debootstrap if they are
missing (README.md says so) and debootstraps a base image into the state
folder; a missing prerequisite (not root, no Debian mirror, podman unable to
run containers) is a skip, a failure under CI.

The state folder (podman's storage and configuration, the debootstrapped
base) is kept between runs (containerlib.py says where and how). The run removes
its container, volume and tag and unmounts every mount under the state folder
(podman's overlay storage); nothing goes to /tmp. When the build fails, the
first error line of its output is reported (not what a probe of Docker Hub
would say). A first build takes minutes; scripts/test.sh leaves this test
out of the ASan run (the image builds its own binary). Times are printed."""
import functools
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import containerlib  # noqa: E402
import harness  # noqa: E402,F401
from pdbsym_server import Checks  # noqa: E402
from native_oracle import answer_ok, oracle_view, rows, sym_view  # noqa: E402,F401

root = os.path.abspath(os.environ.get("PDBSYM_SOURCE_DIR") or
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
native_dir = os.path.join(root, "tests", "fixtures", "native")
managed_dir = os.path.join(root, "tests", "fixtures", "managed", "portable-debug")
NATIVE = "cpp-x64-O2"
IMAGE_USER, IMAGE_UID = "pdbsym", 10001  # docker/Dockerfile


containerlib.require(root, "the container test")
state = containerlib.state_folder(root)
leave_nothing_behind = functools.partial(containerlib.unmount_all, state)
free_port = containerlib.free_port

tag = "localhost/pdbsym:test-%d" % os.getpid()
name = "pdbsym-test-%d" % os.getpid()
volume = name + "-cache"

build_s = containerlib.build_pdbsym(root, state, tag)
print("image build: %.1f s" % build_s)
podman = containerlib.Podman(state)


c = Checks()
# the symbol folder the container mounts, beside the state (world-traversable
# folders up to it, unlike a build folder's; removed at the end)
store = tempfile.mkdtemp(prefix="store-", dir=state)
os.chmod(store, 0o755)
started = False
try:
    # ---- the symstore folder the container reads (world-readable: it runs as uid 10001)
    def put(fname, key, data):
        d = os.path.join(store, fname, key)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)

    header, col = None, None
    for line in open(os.path.join(native_dir, "MANIFEST.tsv")):
        if line.startswith("# name"):
            header = line[2:].rstrip("\n").split("\t")
        elif not line.startswith("#") and line.startswith(NATIVE + "\t"):
            col = dict(zip(header, line.rstrip("\n").split("\t")))
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    put(debug_file, col["symkey"], gzip.open(os.path.join(native_dir, col["pdb"])).read())
    alt = rows(native_dir, col["crosscheck"])
    modules = [{"debug_file": col["cv_path"], "debug_id": col["symkey"]}]
    frames, expect = [], []
    for lo, hi, ans, _ in rows(native_dir, col["expected"]):
        frames.append({"module": 0, "rva": "0x%x" % lo})
        expect.append(("native", lo, ans, next(((a, n) for l2, h2, a, n in alt if l2 <= lo < h2), None)))

    srm = [json.loads(x) for x in open(os.path.join(managed_dir, "Demo.pdb.srm.jsonl"))]
    cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
    put("Demo.pdb", cv["guid"].replace("-", "").upper() + "FFFFFFFF",
        open(os.path.join(managed_dir, "Demo.pdb"), "rb").read())
    modules.append({"debug_file": "Demo.pdb", "debug_id": "%s-%d" % (cv["guid"], cv["age"]), "format": "portable"})
    seen = set()
    for sp in srm:
        if sp.get("kind") == "sp" and not sp["hidden"] and (sp["token"], sp["il"]) not in seen:
            seen.add((sp["token"], sp["il"]))
            frames.append({"module": 1, "token": sp["token"], "il_offset": sp["il"]})
            expect.append(("managed", (sp["token"], sp["il"]), sp, None))
    for d, dirs, files in os.walk(store):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)

    # ---- the image: HEALTHCHECK kept, non-root user
    info = json.loads(podman("image", "inspect", tag).stdout)[0]
    c.eq("image user", info["Config"].get("User"), IMAGE_USER)
    hc = info.get("Healthcheck") or info["Config"].get("Healthcheck") or {}
    c.eq("image HEALTHCHECK (docker format keeps it)", hc.get("Test"), ["CMD", "pdbsym", "health"])
    print("image size: %s bytes" % info["Size"])

    # ---- only the binary and runtime libraries
    probe = podman("run", "--rm", "--network=host", "--entrypoint", "sh", tag, "-c",
                   "for t in cc gcc g++ c++ clang cpp ld as make cmake pkg-config; do command -v $t; done;"
                   " echo ---; dpkg-query -W -f='${Package}\\n';"
                   " echo ---; find /usr/local /usr/include -type f 2>/dev/null;"
                   " echo ---; ldd /usr/local/bin/pdbsym").stdout.split("---\n")
    c.eq("no compiler or build tool in the image", probe[0].split(), [])
    dev = [p for p in probe[1].split() if p.endswith("-dev") or
           re.match(r"(gcc|g\+\+|cpp|clang|llvm|cmake|make|build-essential)(-[0-9.]+)?$|binutils|libgcc-[0-9]+-dev", p)]
    c.eq("no development package in the image", dev, [])
    c.eq("files under /usr/local and /usr/include", probe[2].split(), ["/usr/local/bin/pdbsym"])
    c.true("every library of the binary resolves", "not found" not in probe[3] and "libmicrohttpd" in probe[3],
           probe[3])

    # ---- as docker/compose.yaml: a one-shot `pdbsym warm` fills the volume first (the native module only)
    warm_list = os.path.join(store, "warm-modules.txt")
    with open(warm_list, "w") as f:
        f.write("# debug_file debug_id\n%s %s\n" % (debug_file, col["symkey"]))
    os.chmod(warm_list, 0o644)
    podman("volume", "create", volume)
    started = True
    w = podman("run", "--rm", "--network=host", "-e", "PDBSYM_SYMBOL_PATH=/symbols",
               "-v", "%s:/var/cache/pdbsym" % volume, "-v", "%s:/symbols:ro" % store,
               "-v", "%s:/etc/pdbsym/warm-modules.txt:ro" % warm_list, tag,
               "pdbsym", "warm", "--allow-failures", "--modules", "/etc/pdbsym/warm-modules.txt", check=False)
    c.eq("pdbsym warm in the image exits 0", w.returncode, 0)
    print(w.stderr.strip()[-500:])

    # ---- run it
    port = free_port()
    podman("run", "-d", "--name", name, "--network=host",
           "-e", "PDBSYM_LISTEN=127.0.0.1:%d" % port, "-e", "PDBSYM_SYMBOL_PATH=/symbols",
           "-v", "%s:/var/cache/pdbsym" % volume, "-v", "%s:/symbols:ro" % store, tag)
    t_run = time.monotonic()
    status = None
    while time.monotonic() - t_run < 60:
        # no systemd here: podman's health timer does not run, so the check is run by hand
        podman("healthcheck", "run", name, check=False)
        st = json.loads(podman("inspect", name).stdout)[0]["State"]
        status = (st.get("Health") or st.get("Healthcheck") or {}).get("Status")
        if status == "healthy" or not st.get("Running"):
            break
        time.sleep(0.5)
    print("healthy after %.1f s" % (time.monotonic() - t_run))
    c.eq("HEALTHCHECK status", status, "healthy")

    pid = json.loads(podman("inspect", name).stdout)[0]["State"]["Pid"]
    uids = [ln.split()[1:] for ln in open("/proc/%d/status" % pid) if ln.startswith("Uid:")][0]
    c.eq("the server's real, effective, saved and fs uid", uids, [str(IMAGE_UID)] * 4)
    c.eq("the container's main process", open("/proc/%d/comm" % pid).read().strip(), "pdbsym")

    # ---- symbolicate through it
    req = urllib.request.Request("http://127.0.0.1:%d/symbolicate" % port, method="POST",
                                 data=json.dumps({"modules": modules, "frames": frames, "timeout": 60}).encode(),
                                 headers={"Content-Type": "application/json"})
    t_req = time.monotonic()
    j = json.load(urllib.request.urlopen(req, timeout=120))
    print("first answer (%d frames, 2 modules from the folder): %.3f s" % (len(frames), time.monotonic() - t_req))
    c.eq("modules from the warmed volume, from the folder",
         [m.get("from_cache") for m in j["modules"]], [True, False])
    c.eq("modules found in the mounted folder",
         [(m.get("status"), (m.get("source") or "").startswith("/symbols/")) for m in j["modules"]],
         [("found", True), ("found", True)])
    print("modules: %s" % json.dumps(j["modules"]))
    bad = {"native": 0, "managed": 0}
    for (kind, addr, want, alt_row), got in zip(expect, j["frames"]):
        if kind == "native":
            ok = got.get("status") == "ok" and answer_ok(
                [{"function": s.get("mangled") or s.get("function"), "file": s.get("file"), "line": s.get("line")}
                 for s in got["symbols"]], want, alt_row)
        else:
            s = (got.get("symbols") or [{}])[0]
            ok = got.get("status") == "ok" and \
                (s.get("file"), s.get("line"), s.get("column"), s.get("end_line"), s.get("end_column")) == \
                (want["doc"], want["sl"], want["sc"], want["el"], want["ec"])
        if not ok:
            bad[kind] += 1
            if bad[kind] <= 3:
                print("  %s %s: got %s\n    want %s" % (kind, addr, json.dumps(got), json.dumps(want)))
    c.eq("frames answered", len(j["frames"]), len(frames))
    c.eq("native frames (%s) not matching llvm-symbolizer" % NATIVE, bad["native"], 0)
    c.eq("managed frames (portable-debug) not matching System.Reflection.Metadata", bad["managed"], 0)
    print("native frames: %d, managed frames: %d" % (sum(1 for e in expect if e[0] == "native"),
                                                     sum(1 for e in expect if e[0] == "managed")))

    # ---- stop: SIGTERM, exit 0
    podman("stop", "-t", "30", name)
    st = json.loads(podman("inspect", name).stdout)[0]["State"]
    c.eq("exit status after podman stop", st.get("ExitCode"), 0)
finally:
    if started:
        if podman("logs", name, check=False).returncode == 0 and c.failed:
            print(podman("logs", name, check=False).stderr[-3000:])
        podman("rm", "-f", "-t", "5", name, check=False)
        podman("volume", "rm", "-f", volume, check=False)
    podman("rmi", tag, check=False)  # the tag only: the layers stay cached in the state folder
    shutil.rmtree(store, ignore_errors=True)
    left = leave_nothing_behind()
    c.eq("mounts left under the state folder %s" % state, left, [])
    c.true("the base image is kept for the next run", os.path.exists(os.path.join(state, "base.tar")), state)
c.done()
