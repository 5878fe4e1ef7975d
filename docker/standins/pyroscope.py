#!/usr/bin/env python3
"""A stand-in for Grafana Pyroscope's ingest API, for docker/compose.yaml on
machines that reach no image registry (Pyroscope's image is one). It takes
what pdbsym's profile_push sends:

    POST /ingest?name=APP{labels}&from=&until=&format=pprof
         multipart/form-data: "profile" (gzipped pprof), "sample_type_config"

answers 200, and keeps the last KEEP posts in memory (the query, the
tenant header, the parts), so that they can be looked at:

    GET /ingested              JSON list: seq, name, from, until, format,
                               tenant, profile_bytes, sample_type_config
    GET /ingested/SEQ/profile  the profile part, as it arrived

Listens on 127.0.0.1:$PYROSCOPE_PORT (4040, Pyroscope's own port). A real
Pyroscope (grafana/pyroscope) takes its place unchanged: point pdbsym's
PDBSYM_PROFILE_PUSH at its /ingest.
"""
import email.parser
import email.policy
import http.server
import json
import os
import signal
import threading
import urllib.parse

KEEP = 200                   # posts kept (the oldest dropped past it)
MAX_BODY = 64 * 1024 * 1024  # larger posts are refused with 413
lock = threading.Lock()
posts = []
seq = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        u = urllib.parse.urlparse(self.path)
        try:
            n = int(self.headers.get("Content-Length", "-1"))
        except ValueError:
            n = -1
        if u.path != "/ingest":
            return self.answer(404, b'{"error":"not found"}')
        if n < 0 or n > MAX_BODY:
            return self.answer(413, b'{"error":"no Content-Length, or too large"}')
        body = self.rfile.read(n)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
        parts = {}
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("multipart/form-data"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
            for p in msg.iter_parts():
                parts[p.get_param("name", header="content-disposition")] = p.get_payload(decode=True)
        else:
            parts["profile"] = body
        if not parts.get("profile"):
            return self.answer(400, b'{"error":"no profile part"}')
        with lock:
            seq[0] += 1
            posts.append({"seq": seq[0], "name": q.get("name", ""), "from": q.get("from"),
                          "until": q.get("until"), "format": q.get("format"),
                          "tenant": self.headers.get("X-Scope-OrgID"),
                          "profile": parts["profile"],
                          "sample_type_config": (parts.get("sample_type_config") or b"").decode("utf-8", "replace")})
            del posts[:-KEEP]
        print("ingest %d: %s, %d bytes" % (seq[0], q.get("name", ""), len(parts["profile"])), flush=True)
        self.answer(200, b"{}")

    def do_GET(self):
        path = urllib.parse.urlparse(self.path).path.rstrip("/")
        with lock:
            if path == "/ingested":
                out = [{k: (len(v) if k == "profile" else v) for k, v in p.items()} for p in posts]
                for o in out:
                    o["profile_bytes"] = o.pop("profile")
                return self.answer(200, json.dumps(out).encode())
            parts = path.split("/")
            if len(parts) == 4 and parts[1] == "ingested" and parts[3] == "profile":
                for p in posts:
                    if str(p["seq"]) == parts[2]:
                        return self.answer(200, p["profile"], "application/octet-stream")
        if path in ("", "/ready"):
            return self.answer(200, b'{"ready":true}')
        self.answer(404, b'{"error":"not found"}')


if __name__ == "__main__":
    # PID 1 of its container: SIGTERM (compose down) must end it
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    port = int(os.environ.get("PYROSCOPE_PORT", "4040"))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    print("pyroscope stand-in on 127.0.0.1:%d" % port, flush=True)
    srv.serve_forever()
