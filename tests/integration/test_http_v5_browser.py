"""A browser calls /symbolicate/v5 from another origin (issue 14; api.md,
"Browsers (CORS)").  Debian's chromium, headless, loads a page from a static
server this test starts on 127.0.0.1:PORT_A; the page's script POSTs v5
requests to `pdbsym serve` on 127.0.0.1:PORT_B (another origin: another port)
and writes what it got into the page; the test reads the page's DOM
(`chromium --dump-dom`, which waits for the page's network with
--virtual-time-budget).  The browser enforces CORS, not the test:

- the Firefox Profiler's own request (fetch with mode "cors" and no
  Content-Type: a simple request) and one with Content-Type
  application/json (which the browser preflights with OPTIONS) both read
  symbolicated names, judged against llvm-symbolizer's answers
  (tests/fixtures/native/*.expected.tsv);
- POST /symbolicate (no CORS) is blocked: its preflight gets 405 and the POST
  is never sent (pdbsym's request log shows it);
- a second pdbsym whose cors_origins lists another origin: the preflighted
  request is blocked at its preflight (403), and the simple one reaches the
  server (200 in its log) but the page cannot read the answer.
Skips (77) when chromium is absent: scripts/deps.sh --test installs it."""
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from native_oracle import manifest, rows  # noqa: E402
from pdbsym_server import Checks, Server, need_binary, warmed_cache  # noqa: E402

root = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
native_dir = os.path.join(root, "tests", "fixtures", "native")
need_binary()
CHROMIUM = shutil.which("chromium")
if not CHROMIUM:
    harness.skip("chromium absent (scripts/deps.sh --test installs it)")

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>v5 from a page</title></head>
<body><pre id="out">waiting</pre>
<script>
const OPEN = %(open)s, LISTED = %(listed)s, BODY = %(body)s;
async function attempt(url, opts) {
  try {
    const r = await fetch(url, Object.assign({method: "POST", mode: "cors", body: JSON.stringify(BODY)}, opts));
    return {status: r.status, json: await r.json()};
  } catch (e) {
    return {blocked: String(e)};
  }
}
(async () => {
  const json = {headers: {"Content-Type": "application/json"}};
  const got = {
    simple: await attempt(OPEN + "/symbolicate/v5", {}),
    preflighted: await attempt(OPEN + "/symbolicate/v5", json),
    v1: await attempt(OPEN + "/symbolicate", json),
    other_origin_preflighted: await attempt(LISTED + "/symbolicate/v5", json),
    other_origin_simple: await attempt(LISTED + "/symbolicate/v5", {}),
  };
  document.getElementById("out").textContent = JSON.stringify(got);
})();
</script></body></html>
"""


class Page(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self):
        body = self.page if self.path in ("/", "/index.html") else b"not here"
        self.send_response(200 if body is self.page else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


c = Checks()
cache = warmed_cache(native_dir)
profile = tempfile.mkdtemp(prefix="pdbsym-chromium-")
srv = Server(env={"PDBSYM_CACHE_DIR": cache})                 # cors_origins = * (the default)
listed = Server(env={"PDBSYM_CACHE_DIR": cache}, config="cors_origins = http://127.0.0.1:1\n")
web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
threading.Thread(target=web.serve_forever, daemon=True).start()
try:
    col = next(r for r in manifest(native_dir) if r["name"] == "cpp-x64-O2")
    exp, seen = [], set()
    for lo, hi, ans, _ in rows(native_dir, col["expected"]):  # one address per function
        if ans and ans[-1]["function"] not in seen:
            seen.add(ans[-1]["function"])
            exp.append((lo, ans))
    c.true("addresses in several functions", len(exp) >= 5, exp)
    debug_file = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
    body = {"memoryMap": [[debug_file, col["symkey"]]], "stacks": [[[0, lo] for lo, _ in exp] + [[-1, 5]]]}
    want = [ans[-1]["function"] for _, ans in exp] + [None]
    Page.page = (PAGE % {"open": json.dumps("http://127.0.0.1:%d" % srv.port),
                         "listed": json.dumps("http://127.0.0.1:%d" % listed.port),
                         "body": json.dumps(body)}).encode()
    url = "http://127.0.0.1:%d/" % web.server_address[1]
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--user-data-dir=" + profile, "--virtual-time-budget=30000", "--dump-dom", url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    m = re.search(r'<pre id="out">(.*?)</pre>', r.stdout, re.S)
    c.true("chromium dumped the page", m is not None, (r.returncode, r.stdout[-500:], r.stderr[-2000:]))
    got = {}
    if m:
        try:
            got = json.loads(html.unescape(m.group(1)))
        except ValueError:
            c.true("the page's script finished", False, m.group(1)[:500])
    for what in ("simple", "preflighted"):
        a = got.get(what, {})
        c.eq(what + ": read by the page", a.get("status"), 200)
        res = (a.get("json") or {}).get("results", [{}])[0]
        names = [f.get("function") for f in res.get("stacks", [[]])[0]]
        c.eq(what + ": symbolicated names", names, want)
        c.eq(what + ": found_modules", res.get("found_modules"), {debug_file + "/" + col["symkey"]: True})
        c.eq(what + ": index -1", (res.get("stacks", [[{}]])[0][-1:] or [{}])[0].get("module"), "<unknown>")
    for what in ("v1", "other_origin_preflighted", "other_origin_simple"):
        c.true(what + ": blocked by the browser", "blocked" in got.get(what, {}) and "status" not in got.get(what, {}),
               got.get(what))

    def log_of(s):
        return [(x.get("method"), x.get("path"), x.get("status")) for x in s.logs() if x.get("msg") == "request"]

    lo = log_of(srv)
    c.true("the browser preflighted v5: OPTIONS answered 204", ("OPTIONS", "/symbolicate/v5", 204) in lo, lo)
    c.true("the browser preflighted v1: OPTIONS answered 405", ("OPTIONS", "/symbolicate", 405) in lo, lo)
    c.true("the browser never sent the v1 POST", not any(m == "POST" and p == "/symbolicate" for m, p, _ in lo), lo)
    ll = log_of(listed)
    c.true("other origin: preflight refused (403)", ("OPTIONS", "/symbolicate/v5", 403) in ll, ll)
    c.true("other origin: the simple POST reached pdbsym (200), the browser hid the answer",
           ("POST", "/symbolicate/v5", 200) in ll, ll)
finally:
    web.shutdown()
    web.server_close()
    srv.close()
    listed.close()
    shutil.rmtree(profile, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
c.done()
