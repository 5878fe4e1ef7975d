"""README.md's "First session", run as written: the commands of its code
blocks are taken from the README itself and run by bash from a folder laid
out like the repository (build/pdbsym and tests/fixtures/native), against a
real `pdbsym serve` started as ./scripts/start.sh starts it (the default
cache folder ./.pdbsym-cache, listening on 127.0.0.1; only the port differs, a
free one replacing 8765 in the commands).  The outputs the README shows must
come out: warm's summary, the answer to the curl request (the README's
wrapped JSON, with "..." standing for the machine's own folder), the metrics
lines, and exit status 0 after Ctrl-C (SIGINT)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
import harness  # noqa: E402
from clilib import Checks, Sandbox  # noqa: E402

clilib.need_binary()
readme = open(os.path.join(clilib.ROOT, "README.md")).read()
m = re.search(r"^## First session\n(.*?)^## ", readme, re.S | re.M)
if not m or not shutil.which("curl"):
    harness.skip("no First session in README.md, or no curl")
text = m.group(1)

# the indented code blocks, in order (a block: lines indented 7+ spaces)
blocks, cur = [], []
for line in text.splitlines():
    if line.startswith("       ") and line.strip():
        cur.append(line[7:])
    elif cur and not line.strip():
        blocks.append("\n".join(cur))
        cur = []
if cur:
    blocks.append("\n".join(cur))


def block(prefix):
    return [b for b in blocks if b.startswith(prefix)]


c = Checks()
sb = Sandbox("pdbsym-cli-readme-")
srv = None
try:
    os.makedirs(sb.path("build"))
    os.symlink(clilib.BIN, sb.path("build", "pdbsym"))
    os.makedirs(sb.path("tests", "fixtures"))
    os.symlink(clilib.NATIVE, sb.path("tests", "fixtures", "native"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_")}
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env["PDBSYM_OFFLINE"] = "true"  # a test never reaches the internet

    def sh(cmd, timeout=60):
        cmd = cmd.replace("127.0.0.1:8765", "127.0.0.1:%d" % port)
        p = subprocess.run(["bash", "-c", cmd], cwd=sb.dir, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    # 1. the service, as start.sh runs it
    c.true("README step 1 is ./scripts/start.sh", block("./scripts/start.sh") != [], blocks[:1])
    log = open(sb.path("serve.log"), "w")
    srv = subprocess.Popen([clilib.BIN, "serve", "--listen", "127.0.0.1:%d" % port], cwd=sb.dir,
                           env=dict(env, PDBSYM_CACHE_DIR=sb.path(".pdbsym-cache")), stderr=log)
    for _ in range(100):
        if sh("curl -sf http://127.0.0.1:8765/health")[0] == 0:
            break
        time.sleep(0.1)
    c.true("the service started", '"msg":"listening"' in open(sb.path("serve.log")).read())
    # the log line the README shows, "..." standing for any text
    m = re.search(r"It ends with a log line `(\{.*?\})`", text.replace("\n   ", " "))
    shown_line = m.group(1) if m else ""
    pat = ".*".join(re.escape(part) for part in shown_line.replace(":8765", ":%d" % port).split("..."))
    got_line = next((ln for ln in open(sb.path("serve.log")) if '"msg":"listening"' in ln), "")
    c.true("the listening line the README shows", bool(shown_line) and re.fullmatch(pat, got_line.strip()) is not None,
           (shown_line, got_line))

    # 2. warm from the folder, twice
    warm = block("./build/pdbsym warm")
    c.eq("README step 2: one warm command", len(warm), 1)
    rc, out, err = sh(warm[0])
    c.eq("warm: exit 0", rc, 0)
    shown = [b for b in blocks if b.startswith("warm: ")][0].splitlines()
    c.eq("warm: the summary the README shows (but the timing), on stdout",
         re.sub(r"[\d.]+ MiB in [\d.]+ s", "", out.splitlines()[-1] if out else ""),
         re.sub(r"[\d.]+ MiB in [\d.]+ s", "", shown[-1]))
    first = shown[0].split(" (")[0]
    c.true("warm: the line the README shows", any(ln.startswith(first + " (") and
                                                  ln.endswith("/tests/fixtures/native/c-x64-O2.pdb.gz)")
                                                  for ln in out.splitlines()), out[:300])
    rc, out, err = sh(warm[0])
    c.true("warm again: everything already cached", rc == 0 and "0 found, 17 already cached" in out, out[-200:])

    # 3. symbolicate with curl
    curl = block("curl -s http://127.0.0.1:8765/symbolicate")
    c.eq("README step 3: one curl request", len(curl), 1)
    rc, out, err = sh(curl[0])
    want_text = [b for b in blocks if b.startswith('{"frames"')][0]
    want = json.loads(want_text.replace("\n", ""))
    got = json.loads(out) if rc == 0 and out else {}
    src = got.get("modules", [{}])[0].get("source", "")
    c.true("the source is the fixture's absolute path", src.startswith("/") and src.endswith("/tests/fixtures/native/c-x64-O2.pdb.gz"), src)
    if src:
        got["modules"][0]["source"] = ".../tests/fixtures/native/c-x64-O2.pdb.gz"
    c.eq("curl: the answer the README shows", got, want)
    rc, out, err = sh("./build/pdbsym lookup tests/fixtures/native/c-x64-O2.pdb.gz 0x1020")
    c.eq("lookup: the same symbols", json.loads(out).get("symbols") if rc == 0 else None,
         want["frames"][0]["symbols"])
    body = re.search(r"-d '(.*?)'", curl[0], re.S).group(1)
    p = subprocess.run([clilib.BIN, "symbolicate"], input=body, cwd=sb.dir, capture_output=True, text=True,
                       env=dict(env, PDBSYM_CACHE_DIR=sb.path(".pdbsym-cache")))
    c.eq("pdbsym symbolicate: the same frames", json.loads(p.stdout).get("frames") if p.returncode == 0 else p.stderr,
         want["frames"])

    # 4. metrics
    met = block("curl -s http://127.0.0.1:8765/metrics")
    c.eq("README step 4: one metrics command", len(met), 1)
    rc, out, err = sh(met[0])
    c.true("metrics: the lines the README names",
           'pdbsym_frames_total{status="ok"} 1' in out.splitlines() and "pdbsym_cache_hits_total 1" in out.splitlines(), out)

    # 5. Ctrl-C
    srv.send_signal(signal.SIGINT)
    c.eq("Ctrl-C: the service exits 0", srv.wait(timeout=30), 0)
    srv = None
finally:
    if srv:
        srv.kill()
        srv.wait()
    sb.close()
c.done()
