"""profile_push (issue 29): `pdbsym serve` profiling a real .NET 10 process
pushes each window to a profile store the way Grafana Pyroscope ingests pprof
(POST /ingest?name=APP{labels}&from=&until=&format=pprof, multipart "profile"
and "sample_type_config"), here a receiver of the test's own that records
what arrives:

- every window arrives, in order, its query naming the application, the
  labels (pid, process, runtime, and profile_push_labels), from/until the
  window's; the tenant and authorization headers; the sample_type_config
  describing the profile's sample types;
- each pushed profile, read by an independent reader (Go's `go tool pprof
  -raw`), has the window's samples (count and total), functions, files and
  lines: those of the window's speedscope file;
- the receiver down for 30 s: the windows wait (at most profile_push_queue),
  then are delivered; those beyond the bound are dropped and counted in
  /metrics, none is delivered twice.
"""
import email.parser
import email.policy
import glob
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import livelib  # noqa: E402
from clilib import Sandbox  # noqa: E402
from pdbsym_server import Checks, Server  # noqa: E402
from pproflib import go_raw, norm, parse_raw  # noqa: E402
import pproflib  # noqa: E402
from tracelib import STATE_FRAMES  # noqa: E402

livelib.need_dotnet()
GO = pproflib.GO
if not os.path.exists(GO):
    harness.skip("go (Debian package golang-go) is not installed: no independent pprof reader")
c = Checks()
sb = Sandbox("pdbsym-profile-push-")
appdir = livelib.build_app(sb.dir)


class Receiver:
    """Pyroscope's /ingest, as far as a test needs: records each push"""

    def __init__(self):
        self.pushes = []
        self.up = True
        self.lock = threading.Lock()
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if not rec.up:
                    self.send_response(503)
                    self.end_headers()
                    return
                u = urllib.parse.urlparse(self.path)
                msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                    b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
                parts = {p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
                         for p in msg.iter_parts()}
                with rec.lock:
                    rec.pushes.append({"path": u.path, "query": urllib.parse.parse_qs(u.query),
                                       "headers": dict(self.headers), "parts": parts})
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()


rcv = Receiver()
app = livelib.App(appdir, [], tmpdir=livelib.socket_dir(sb))
pdir = sb.path("profiles")
srv = Server(env={"PDBSYM_PROFILE_PIDS": str(app.pid), "PDBSYM_PROFILE_WINDOW": "2s",
                  "PDBSYM_PROFILE_DIR": pdir, "PDBSYM_PROFILE_SCAN_INTERVAL": "1",
                  "PDBSYM_PROFILE_FORMAT": "speedscope,pprof",
                  "PDBSYM_PROFILE_PUSH": "http://127.0.0.1:%d/" % rcv.port,
                  "PDBSYM_PROFILE_PUSH_TENANT": "team-a", "PDBSYM_PROFILE_PUSH_AUTH": "Bearer s3cret",
                  "PDBSYM_PROFILE_PUSH_LABELS": "env=test,region=here",
                  "PDBSYM_PROFILE_PUSH_QUEUE": "5"})
try:
    end = time.time() + 30
    while time.time() < end and len(rcv.pushes) < 3:
        time.sleep(0.2)
    c.true("three windows pushed (%d)" % len(rcv.pushes), len(rcv.pushes) >= 3)
    with rcv.lock:
        pushes = list(rcv.pushes)
    for i, p in enumerate(pushes[:3]):
        q = p["query"]
        c.eq("push %d: the route" % i, p["path"], "/ingest")
        c.eq("push %d: pprof" % i, q.get("format"), ["pprof"])
        name = q.get("name", [""])[0]
        c.true("push %d: name and labels (%r)" % (i, name),
               name == "LiveApp{pid=%d,process=LiveApp,runtime=10.0.12,env=test,region=here}" % app.pid)
        c.true("push %d: from < until" % i, int(q["from"][0]) < int(q["until"][0]))
        c.eq("push %d: tenant" % i, p["headers"].get("X-Scope-OrgID"), "team-a")
        c.eq("push %d: authorization" % i, p["headers"].get("Authorization"), "Bearer s3cret")
        cfg = json.loads(p["parts"].get("sample_type_config") or b"{}")
        c.true("push %d: sample_type_config names the types (%r)" % (i, cfg),
               "samples" in cfg and cfg["samples"].get("units") == "count")
        # the window's own files, by the time it was pushed
        rc, out, err = go_raw(p["parts"].get("profile", b""), sb.path("p%d.pb.gz" % i), sb.dir)
        c.eq("push %d: go tool pprof reads it (%s)" % (i, err.strip()[:300]), rc, 0)
        if rc:
            continue
        samples, locs = parse_raw(out)
        n = sum(v[0] for v, _ in samples)
        frames = set((norm(f[0]), f[1], f[2]) for loc in locs.values() for f in loc)
        # the matching speedscope window: the one whose seq is i + 1
        ss = sorted(glob.glob(os.path.join(pdir, "*-%04d.speedscope.json" % (i + 1))))
        if not ss:
            c.true("push %d: its speedscope window is kept" % i, False)
            continue
        doc = json.load(open(ss[0]))
        nss = sum(len(pr["samples"]) for pr in doc["profiles"])
        c.eq("push %d: samples as its speedscope window" % i, n, nss)
        used = set(i for pr in doc["profiles"] for smp in pr["samples"] for i in smp)
        # speedscope's root frame names the sample's state; pprof carries it
        # as a label and a sample type instead
        want = set((norm(f.get("name")), f.get("file", ""), f.get("line", 0))
                   for k, f in enumerate(doc["shared"]["frames"])
                   if k in used and f.get("name") not in STATE_FRAMES)
        got = set(frames)
        c.true("push %d: functions, files and lines as its speedscope window (only pushed: %s; only "
               "in the window: %s)" % (i, sorted(got - want)[:3], sorted(want - got)[:3]), got == want)
        c.true("push %d: Fib with Workers.cs and a line" % i,
               any(f[0] == "LiveApp!Live.App.Workers.Fib" and f[1].endswith("Workers.cs") and f[2]
                   for f in got))
    # the store down: windows wait, at most 5, then are delivered; the rest dropped and counted
    before = len(rcv.pushes)
    rcv.up = False
    time.sleep(30)
    rcv.up = True
    end = time.time() + 90
    while time.time() < end:
        st, h, body = srv.request("GET", "/metrics")
        m = dict(l.rsplit(" ", 1) for l in body.decode().splitlines() if l.startswith("pdbsym_profile_push"))
        if int(m.get("pdbsym_profile_push_queue", 1)) == 0 and len(rcv.pushes) > before:
            break
        time.sleep(0.5)
    st, h, body = srv.request("GET", "/metrics")
    m = dict(l.rsplit(" ", 1) for l in body.decode().splitlines() if l.startswith("pdbsym_profile_push"))
    dropped = int(m.get('pdbsym_profile_push_total{outcome="dropped"}', 0))
    errors = int(m.get("pdbsym_profile_push_errors_total", 0))
    print("store down 30 s: %d delivered after, %d dropped, %d failed attempts" %
          (len(rcv.pushes) - before, dropped, errors))
    c.true("down: attempts failed and were retried (%d)" % errors, errors >= 2)
    c.true("down: the bound held: some windows dropped (%d)" % dropped, dropped >= 5)
    c.true("down: the queued windows delivered after (%d)" % (len(rcv.pushes) - before),
           len(rcv.pushes) - before >= 5)
    names = [p["query"]["from"][0] + "/" + p["query"]["until"][0] for p in rcv.pushes]
    c.eq("no window delivered twice", len(names), len(set(names)))
finally:
    srv.close()
    app.stop()
    rcv.close()
    sb.close()
c.done()
