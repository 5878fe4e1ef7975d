"""test_docs.py - what README.md, api.md and docs/*.md claim and a command
can check is checked here, against the repository and the real binary
(test_http_apidoc.py runs api.md's HTTP examples, test_cli_readme.py the
README's first session, test_readme_symbol_paths.py its symbol paths,
test_cli_trace.py api.md's trace example):

- every repository file or folder the documents name exists (`tests/...`,
  `docs/...`, `bench/...`, links), and no document or source names a
  CONTRACT.md the repository does not have (the contract is docs/contract.md);
- the commands: every command of `pdbsym --help` has its place in api.md's
  CLI section; the commands that read the settings (their --help takes
  --cache-dir or lists cache_dir) are exactly the ones each document lists as
  using the cache or the network; --retries' "0: none" agrees between
  docs/fetch.md and `pdbsym fetch --help`; v5's service is named Eliot
  everywhere (not Tecken);
- numbers: the README's count of native fixtures; the settings table of
  api.md has as many rows as `pdbsym serve --help` has settings, and
  docs/fetch.md's settings are settings; the paths docs/scaling.md says
  pdbsym asks for a module no server has, counted on a local server that
  answers 404;
- the README's package table is scripts/deps.sh's package list, and
  scripts/deps.sh installs nginx so that it does not start as a service
  (run with stand-ins for apt-get, dpkg-query and sudo: the policy-rc.d is in
  place, answering 101, while apt-get installs, and gone afterwards);
- the compose file's images are all built here (localhost/, a build each), and
  the README shows how (docker/compose-build.sh, docker/compose-run.py).
Python standard library only."""
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clilib  # noqa: E402
from pdbsym_server import Checks  # noqa: E402

clilib.need_binary()
ROOT = os.path.abspath(clilib.ROOT)
BIN = clilib.BIN
c = Checks()


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def run(args, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_")}
    r = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=60, env=kw.pop("env", env), **kw)
    return r.returncode, r.stdout, r.stderr


DOCS = ["README.md", "api.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(ROOT, "docs")))
                                  if f.endswith(".md")]
texts = {d: read(d) for d in DOCS}

# ---- file names resolve
PATH = re.compile(r"(?<![\w./-])((?:\.\./shared/|\.ci/|(?:tests|docs|bench|docker|scripts|server|parsers|schema)/)"
                  r"[A-Za-z0-9_.+/-]*[A-Za-z0-9_/])")
named = 0
for doc, text in texts.items():
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"\]\(([^)\s#]+)", text)
    for span in spans:
        for p in PATH.findall(span):
            if re.search(r"[A-Z]{3,}|\bN\b|XXXX|\.\.\.$", p) or p.startswith("../shared/"):
                continue  # a placeholder (BUILD/skips/TEST), or the shared folder beside the clone
            p = p.rstrip("/.")
            named += 1
            c.true("%s names %s, which exists" % (doc, p), os.path.exists(os.path.join(ROOT, p)), p)
    for p in re.findall(r"\]\(([A-Za-z0-9_./-]+\.md)\)", text):
        target = os.path.normpath(os.path.join(os.path.dirname(os.path.join(ROOT, doc)), p))
        c.true("%s links %s, which exists" % (doc, p), os.path.exists(target), target)
print("%d repository paths named in the documents" % named)
c.true("the documents name repository paths", named > 60, named)

tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True).stdout.split()
if not tracked:  # not a git checkout: the folders that hold text
    tracked = [os.path.relpath(os.path.join(d, f), ROOT) for top in ("server", "parsers", "tests", "docs", "scripts")
               for d, _, fs in os.walk(os.path.join(ROOT, top)) for f in fs]
tracked += ["README.md", "api.md"]
bad = []
for rel in sorted(set(tracked)):
    if rel.endswith((".md", ".c", ".h", ".py", ".sh", ".cs", ".txt")) and os.path.exists(os.path.join(ROOT, rel)):
        t = open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace").read()
        if re.search(r"(?<!docs/)(?<!shared/)CONTRACT\.md", t) and not rel.endswith("test_docs.py"):
            bad.append(rel)
c.eq("no file names a CONTRACT.md (the repository's contract is docs/contract.md)", bad, [])

# docs/architecture.md's rooms: every file its table names exists, and every
# source file of a room is named (cmd_*.c for the commands)
arch = texts["docs/architecture.md"]
for ln in arch.splitlines():
    cols = [x.strip() for x in ln.split("|")[1:-1]]
    if not ln.startswith("| `") or len(cols) < 3 or not os.path.isdir(os.path.join(ROOT, cols[0].strip("`"))):
        continue
    room, text = cols[0].strip("`").rstrip("/"), " ".join(cols[1:3])
    for name in re.findall(r"`([a-z_/]+(?:\.[ch])?)`", cols[2]):
        c.true("docs/architecture.md: %s/%s exists" % (room, name),
               any(os.path.exists(os.path.join(ROOT, room, name + ext)) for ext in ("", ".c", ".h")), name)
    for f in sorted(os.listdir(os.path.join(ROOT, room))):
        stem = f[:-2]
        if f.endswith(".c"):
            c.true("docs/architecture.md names %s/%s" % (room, f),
                   any(("`%s`" % x) in text or ("%s.c" % stem) in text for x in (stem, f, stem + ".h")) or
                   (f.startswith("cmd_") and "`cmd_*.c`" in text), f)

# ---- the commands
rc, out, err = run(["--help"])
commands = re.findall(r"^  ([a-z]+) {2,}", out, re.M)
c.true("pdbsym --help lists the commands", rc == 0 and len(commands) >= 10, commands)
api = texts["api.md"]
cli = api[api.index("\n## CLI"):]
for cmd in commands:
    c.true("api.md's CLI section documents pdbsym %s" % cmd, ("pdbsym %s" % cmd) in cli or ("`%s`" % cmd) in cli, cmd)
uses = set()
for cmd in commands:
    rc, h, _ = run([cmd, "--help"] if cmd != "cache" else ["cache", "stats", "--help"])
    if cmd == "cache":
        rc, h, _ = run(["cache", "--help"])
    if "--cache-dir" in h or "--symbol-path" in h or re.search(r"^  cache_dir ", h, re.M):
        uses.add(cmd)
c.eq("the commands that read the settings", sorted(uses), sorted(["serve", "symbolicate", "trace", "profile", "warm", "cache", "fetch"]))
lists = [
    ("api.md", r"The commands that use the cache or the network \(([^)]*)\)"),
    ("docs/contract.md", r"Every command that touches the cache or the network \(([^)]*)\)"),
]
for doc, pat in lists:
    m = re.search(pat, texts[doc].replace("\n", " "))
    got = set(re.findall(r"`([a-z]+)`", m.group(1))) if m else set()
    c.eq("%s lists the commands that use the cache or the network" % doc, sorted(got), sorted(uses))
m = re.search(r"Commands that use the cache or the network \(([^)]*)\)", out.replace("\n", " "))
c.eq("pdbsym --help lists the commands that use the cache or the network",
     sorted(re.findall(r"[a-z]+", m.group(1))) if m else [], sorted(uses))
m = re.search(r"`--symbol-path` on every command that\s+uses it: ([^)]*)\)", texts["README.md"])
c.eq("README: the commands that take --symbol-path", sorted(re.findall(r"`([a-z]+)`", m.group(1))) if m else [],
     sorted(uses - {"cache"}))
# every flag a command's section of api.md names is in the --help of a command it names
helps = {}
for cmd in commands:
    helps[cmd] = run([cmd, "--help"])[1]
helps["cache"] += "".join(run(["cache", sub, "--help"])[1] for sub in ("stats", "list", "evict", "verify", "clear"))
for sec in re.split(r"\n### ", cli)[1:]:
    named_cmds = set(re.findall(r"pdbsym (%s)\b" % "|".join(commands), sec))
    text = "".join(helps[x] for x in named_cmds) + "--help --version"
    # another tool's command line in a code span (`dotnet-trace collect --rundown false`) is its own
    ours = re.sub(r"`(?:dotnet-trace|dotnet-counters|dotnet-monitor)\b[^`]*`", "", sec)
    for flag in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", ours))):
        c.true("api.md '%s': %s is in the --help of %s" % (sec.splitlines()[0], flag, sorted(named_cmds)),
               flag in text, flag)
rc, h, _ = run(["fetch", "--help"])
fm = re.search(r"`--retries` \(([^)]*)\)", texts["docs/fetch.md"])
hm = re.search(r"--retries N \(([^)]*)\)", h)
c.true("--retries: docs/fetch.md and fetch --help agree", fm and hm and fm.group(1) == hm.group(1) == "0: none",
       (fm and fm.group(1), hm and hm.group(1)))
tecken = [rel for rel in ["README.md", "api.md"] + DOCS + ["server/cli/cmd_symbolicate.c"]
          if "Tecken" in open(os.path.join(ROOT, rel)).read()]
c.eq("v5's service is Eliot everywhere (no Tecken)", tecken, [])

# ---- numbers
rows = [ln for ln in read("tests/fixtures/native/MANIFEST.tsv").splitlines() if ln and not ln.startswith("#")]
m = re.search(r"`tests/fixtures/native` holds (\d+) small Windows programs", texts["README.md"].replace("\n   ", " "))
c.eq("README: the number of native fixtures", int(m.group(1)) if m else None, len(rows))
rc, h, _ = run(["serve", "--help"])
helped = re.findall(r"^  ([a-z0-9_]+) +default ", h, re.M)
table = re.findall(r"^\| `([a-z0-9_]+)` \| ", api[api.index("| key | default | meaning |"):api.index("## CLI")], re.M)
c.eq("api.md's settings table: one row per setting of serve --help", sorted(table), sorted(helped))
fetch_rows = re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)?(?:, `([a-z_]+)`)? \|", texts["docs/fetch.md"], re.M)
named_settings = {k for r in fetch_rows for k in r if k}
c.eq("docs/fetch.md's settings are settings", sorted(named_settings - set(helped)), [])

paths = []


class Miss(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        paths.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Miss)
threading.Thread(target=srv.serve_forever, daemon=True).start()
with tempfile.TemporaryDirectory(prefix="pdbsym-docs-") as tmp:
    sp = "srv*http://127.0.0.1:%d" % srv.server_address[1]
    counted = []
    for fmt in (["--format", "windows"], []):
        del paths[:]
        run(["fetch", "nowhere.pdb", "00112233445566778899AABBCCDDEEFF1", "--symbol-path", sp, "--out",
             os.path.join(tmp, "x")] + fmt)
        counted.append(len(paths))
srv.shutdown()
m = re.search(r"pdbsym asks (\d+) paths\s+per key for a module no server has, (\d+) when the request names no format",
              texts["docs/scaling.md"])
c.eq("docs/scaling.md: the paths asked for a module no server has (one key, both keys)",
     [int(m.group(1)), int(m.group(2))] if m else None, counted)

# ---- packages
deps = read("scripts/deps.sh")
pk = []
for m in re.finditer(r"pkgs(?:\+)?=\(([^)]*)\)", deps):
    pk += m.group(1).split()
fuzz = re.search(r'--fuzz" \]; then\s*pkgs\+=\(([^)]*)\)', deps)
fuzz_only = set(fuzz.group(1).split()) - set(pk[:len(pk)]) if fuzz else set()
readme = texts["README.md"]
tab = readme[readme.index("What they install"):]
tab = tab[:tab.index("\n\n", tab.index("| package"))]
listed = set(re.findall(r"`([a-z0-9.+-]+)`", " ".join(ln.split("|")[1] for ln in tab.splitlines()
                                                          if ln.startswith("| `"))))
want = set(pk) - {"libclang-rt-14-dev"}
c.eq("README's package table is scripts/deps.sh's list (--fuzz aside)", sorted(listed ^ want), [])

with tempfile.TemporaryDirectory(prefix="pdbsym-deps-") as tmp:
    fake = os.path.join(tmp, "bin")
    os.makedirs(fake)
    rcd = os.path.join(tmp, "policy-rc.d")
    log = os.path.join(tmp, "log")
    with open(os.path.join(fake, "dpkg-query"), "w") as f:  # every package present but nginx
        f.write('#!/bin/sh\nfor a; do p=$a; done\n[ "$p" = nginx ] && exit 1\necho "install ok installed"\n')
    with open(os.path.join(fake, "apt-get"), "w") as f:  # what a package's postinst would see
        f.write('#!/bin/sh\necho "apt-get $*" >>%s\nif [ "$1" = install ] || [ "$3" = install ]; then\n'
                '  if [ -x %s ]; then %s nginx start; echo "policy-rc.d answers $?" >>%s; '
                'else echo "no policy-rc.d" >>%s; fi\nfi\n' % (log, rcd, rcd, log, log))
    # as a user, deps.sh runs apt-get through sudo, whose secure_path would
    # find the real apt-get: a sudo that runs its command as it is
    with open(os.path.join(fake, "sudo"), "w") as f:
        f.write('#!/bin/sh\nexec "$@"\n')
    for n in ("dpkg-query", "apt-get", "sudo"):
        os.chmod(os.path.join(fake, n), 0o755)
    env = dict(os.environ, PATH=fake + ":" + os.environ["PATH"], PDBSYM_TEST_POLICY_RC_D=rcd)
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "deps.sh"), "--test"], env=env, capture_output=True,
                       text=True, timeout=60)
    got = open(log).read() if os.path.exists(log) else ""
    c.true("deps.sh installs nginx with a policy-rc.d that forbids starting it (101)",
           r.returncode == 0 and "install" in got and "nginx" in got and "policy-rc.d answers 101" in got,
           (r.returncode, r.stderr[-300:], got))
    c.true("and removes the policy-rc.d afterwards", not os.path.exists(rcd))

# ---- the compose file's images: every one built here (no registry is reachable)
compose = read("docker/compose.yaml")
images = re.findall(r"^\s*image: (\S+)", compose, re.M)
c.true("docker/compose.yaml names images", len(images) >= 3, images)
for img in images:
    c.true("the compose file's image %s is built here (localhost/)" % img, img.startswith("localhost/"), img)
builds = re.findall(r"build: \{ context: (\S+), dockerfile: (\S+) \}", compose)
for ctx, df in builds:
    path = os.path.normpath(os.path.join("docker", ctx, df))
    c.true("the compose file's Dockerfile %s exists" % path, os.path.exists(os.path.join(ROOT, path)), path)
c.eq("as many builds as images", len(builds), len(set(images)))
c.true("README shows docker/compose-build.sh and docker/compose-run.py",
       "docker/compose-build.sh" in readme and "docker/compose-run.py up" in readme)

c.done()
