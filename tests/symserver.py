#!/usr/bin/env python3
"""symserver.py - a symbol server for the tests (python3 standard library only).

Serves a folder in symstore layout over HTTP/1.1 on 127.0.0.1, and can be told
to misbehave per path.  Prints "PORT <n>" on its first line of stdout once it
accepts connections (it binds port 0 unless --port is given).

    python3 tests/symserver.py ROOT [--port N] [--control rules.json] [--exit-with-parent]

Endpoints besides the files:
    GET  /_stats           {"hits": {"/path": n, ...}, "total": n}: requests per path
    POST /_control         JSON {"/path": RULE, ...}: merged into the rules
    POST /_reset           forget all rules and hits

A RULE (all fields optional) applies to requests for that exact path (the
decoded path, without the query):
    "status": 500, "times": 2     answer 500 for the first 2 hits, then normally
                                  (without "times": always); 404 works the same
    "reset": true, "times": 1     close the connection with a TCP reset, no answer
    "truncate": 1000, "times": 1  send the headers with the full Content-Length
                                  but only 1000 bytes of the body, then close
    "drip": 2000, "chunk": 100    send the body at about 2000 bytes/s
    "body_from": "/other/path"    serve that file's bytes instead (another PDB)
    "redirect": "URL or /path"    302 to there; "redirect_loop": true: 302 to itself
    "endless": true               a chunked body that never ends
    "delay": 1.5                  wait before answering
    "require_header": {"Authorization": "Bearer x"}   401 unless present
    "chunked": true               send the body chunked (no Content-Length)
    "gzip": true                  send the body gzip-compressed (Content-Encoding)
    "zeros": N                    the body is N zero bytes (no file needed); with "drip"
                                  they trickle out under a Content-Length of N
    "gzip_zeros": N               a gzip stream of N zero bytes, made as it is sent
                                  (Content-Encoding: gzip, chunked): a decompression bomb
    "content_type": "text/html"   the Content-Type of a 200 answer
    "partial": N                  206 Partial Content with the first N bytes (and a
                                  Content-Range), to a GET that asked for no range
    "short_length": N             200 with Content-Length: N and the first N bytes (a
                                  length shorter than the file; the body matches it)
    "conflicting_length": true    200 with two Content-Length headers (the file's and
                                  half of it) and the whole file
A rule under the path "*" applies to every path without a rule of its own.
GET /_stats also gives "headers": {"/path": [{request headers}, ...]} (the last 20),
and "max_delayed": the most requests inside a "delay" rule at once since the
last reset (a request whose client has gone, e.g. a retried transfer, still
counts until its delay ends: not exactly the client's concurrency).
"""
import json
import os
import posixpath
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.lock = threading.Lock()
        self.rules = {}
        self.hits = {}
        self.applied = {}  # path -> times a "times"-limited rule fired
        self.headers = {}  # path -> the request headers of its last hits
        self.delayed = 0  # requests inside a rule's delay now
        self.max_delayed = 0  # the most at once since the last reset


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "symserver/1"

    def log_message(self, fmt, *args):  # quiet
        if os.environ.get("SYMSERVER_LOG"):
            sys.stderr.write("symserver: " + (fmt % args) + "\n")

    # -- helpers
    def _send(self, code, body=b"", ctype="application/octet-stream", extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj, code=200):
        self._send(code, json.dumps(obj, sort_keys=True).encode(), "application/json")

    def _file(self, path):
        st = self.server.state
        rel = posixpath.normpath(path).lstrip("/")
        if rel.startswith("..") or "/../" in rel or "\0" in rel:
            return None
        full = os.path.join(st.root, rel)
        if not os.path.isfile(full):
            return None
        with open(full, "rb") as f:
            return f.read()

    def _rule(self, path):
        st = self.server.state
        with st.lock:
            st.hits[path] = st.hits.get(path, 0) + 1
            seen = st.headers.setdefault(path, [])
            seen.append({k: v for k, v in self.headers.items()})
            del seen[:-20]
            rule = st.rules.get(path)
            if rule is None:
                rule = st.rules.get("*")
                path = "*"
            if rule is None:
                return {}
            times = rule.get("times")
            if times is not None:
                used = st.applied.get(path, 0)
                if used >= times:
                    return {k: v for k, v in rule.items()
                            if k in ("body_from", "require_header", "drip", "chunk", "chunked",
                                     "zeros", "content_type")}
                st.applied[path] = used + 1
            return dict(rule)

    def _reset_connection(self):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # -- control endpoints
    def do_POST(self):
        st = self.server.state
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path == "/_control":
            rules = json.loads(body or b"{}")
            with st.lock:
                for k, v in rules.items():
                    st.rules[k] = v
                    st.applied.pop(k, None)
            return self._json({"ok": True})
        if self.path == "/_reset":
            with st.lock:
                st.rules.clear()
                st.hits.clear()
                st.applied.clear()
                st.headers.clear()
                st.max_delayed = 0
            return self._json({"ok": True})
        self._send(404)

    def do_GET(self):
        st = self.server.state
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/_stats":
            with st.lock:
                return self._json({"hits": dict(st.hits), "total": sum(st.hits.values()),
                                   "headers": dict(st.headers), "max_delayed": st.max_delayed})
        rule = self._rule(path)
        if rule.get("delay"):
            # counted while no byte of the answer is sent (a client that gave
            # up on the request still counts until the delay ends)
            with st.lock:
                st.delayed += 1
                st.max_delayed = max(st.max_delayed, st.delayed)
            try:
                time.sleep(float(rule["delay"]))
            finally:
                with st.lock:
                    st.delayed -= 1
        need = rule.get("require_header")
        if need:
            for k, v in need.items():
                if self.headers.get(k) != v:
                    return self._send(401, b"unauthorized\n", "text/plain")
        if rule.get("reset"):
            return self._reset_connection()
        if "status" in rule:
            return self._send(int(rule["status"]), b"status by rule\n", "text/plain")
        if rule.get("redirect_loop"):
            return self._send(302, b"", extra={"Location": self.path})
        if rule.get("redirect"):
            return self._send(302, b"", extra={"Location": rule["redirect"]})
        if rule.get("endless"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"\0" * 65536
            try:
                while True:
                    self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            except OSError:
                self.close_connection = True
            return
        if rule.get("gzip_zeros"):
            import zlib
            left = int(rule["gzip_zeros"])
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            block = b"\0" * (1 << 20)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while left > 0:
                    n = min(left, len(block))
                    left -= n
                    out = z.compress(block[:n])
                    if out:
                        self.wfile.write(b"%x\r\n" % len(out) + out + b"\r\n")
                out = z.flush()
                self.wfile.write(b"%x\r\n" % len(out) + out + b"\r\n0\r\n\r\n")
            except OSError:
                self.close_connection = True
            return
        if rule.get("zeros") and rule.get("drip"):
            size, rate = int(rule["zeros"]), float(rule["drip"])
            chunk = int(rule.get("chunk", 64))
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            try:
                sent = 0
                while sent < size:
                    n = min(chunk, size - sent)
                    self.wfile.write(b"\0" * n)
                    self.wfile.flush()
                    sent += n
                    time.sleep(n / rate)
            except OSError:
                self.close_connection = True
            return
        data = b"\0" * int(rule["zeros"]) if rule.get("zeros") else \
            self._file(rule.get("body_from") or path)
        if data is None:
            return self._send(404, b"not found\n", "text/plain")
        if "partial" in rule:
            n = min(int(rule["partial"]), len(data))
            self.send_response(206)
            self.send_header("Content-Range", "bytes 0-%d/%d" % (n - 1, len(data)))
            self.send_header("Content-Length", str(n))
            self.end_headers()
            self.wfile.write(data[:n])
            return
        if "short_length" in rule:
            n = min(int(rule["short_length"]), len(data))
            return self._send(200, data[:n])
        if rule.get("conflicting_length"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Length", str(len(data) // 2))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
            return
        if "truncate" in rule:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: int(rule["truncate"])])
            self.wfile.flush()
            self.close_connection = True
            return
        if rule.get("drip"):
            rate = float(rule["drip"])
            chunk = int(rule.get("chunk", 64))
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                for i in range(0, len(data), chunk):
                    self.wfile.write(data[i:i + chunk])
                    self.wfile.flush()
                    time.sleep(chunk / rate)
            except OSError:
                self.close_connection = True
            return
        if rule.get("gzip"):
            import gzip
            return self._send(200, gzip.compress(data, 9), extra={"Content-Encoding": "gzip"})
        if rule.get("chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(data), 65536):
                part = data[i:i + 65536]
                self.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        self._send(200, data, rule.get("content_type", "application/octet-stream"))

    do_HEAD = do_GET


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # clients that hang up (resets, aborted transfers) are part of the tests
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def main(argv):
    args = argv[1:]
    port = 0
    control = None
    exit_with_parent = "--exit-with-parent" in args
    if exit_with_parent:
        args.remove("--exit-with-parent")
    if "--port" in args:
        i = args.index("--port")
        port = int(args[i + 1])
        del args[i:i + 2]
    if "--control" in args:
        i = args.index("--control")
        control = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    srv = Server(("127.0.0.1", port), Handler)
    srv.state = State(args[0])
    if control:
        with open(control) as f:
            srv.state.rules.update(json.load(f))
    print("PORT %d" % srv.server_address[1], flush=True)

    # --exit-with-parent: end with the test that started us, even if it
    # could not stop us (it crashed or was killed)
    if exit_with_parent:
        parent = os.getppid()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)

        threading.Thread(target=watch_parent, daemon=True).start()
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
