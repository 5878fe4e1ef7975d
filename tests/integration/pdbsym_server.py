"""pdbsym_server.py - starts the real `pdbsym serve` for the HTTP integration
tests (test_http_*.py): a free port on 127.0.0.1, a temporary cache folder,
JSON-line logs collected, and a slow upstream symbol server for tests that
need a request to stay in flight.  Python standard library only."""
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BIN = os.environ.get("PDBSYM_BIN")


def need_binary():
    if not BIN or not os.path.exists(BIN):
        harness.skip("PDBSYM_BIN not set (run through ctest)")


def warmed_cache(*folders):
    """A new cache folder filled by `pdbsym warm FOLDER...` (offline), for a
    Server(env={"PDBSYM_CACHE_DIR": it}): the native fixtures' PDBs are
    answered from it with no symbol server.  The caller removes it."""
    need_binary()
    cache = tempfile.mkdtemp(prefix="pdbsym-warm-")
    e = {k: v for k, v in os.environ.items() if not k.startswith("PDBSYM_") or k in ("PDBSYM_BIN",)}
    e.update({"PDBSYM_CACHE_DIR": cache, "PDBSYM_OFFLINE": "true"})
    r = subprocess.run([BIN, "warm", "--quiet"] + list(folders), env=e, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError("pdbsym warm failed: %s" % r.stderr)
    return cache


class Server:
    """`pdbsym serve` on 127.0.0.1:0; the bound port is read from its
    "listening" log line."""

    def __init__(self, args=(), env=None, config=None, start_timeout=20):
        need_binary()
        self.tmp = tempfile.mkdtemp(prefix="pdbsym-http-")
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("PDBSYM_") and k not in ("PDBSYM_BIN", "PDBSYM_SOURCE_DIR", "PDBSYM_BUILD_DIR"):
                del e[k]
        e["PDBSYM_CACHE_DIR"] = os.path.join(self.tmp, "cache")
        e["PDBSYM_LISTEN"] = "127.0.0.1:0"
        e["PDBSYM_OFFLINE"] = "true"  # never reach the internet from a test
        if env:
            e.update(env)
        cmd = [BIN, "serve"]
        if config is not None:
            path = os.path.join(self.tmp, "pdbsym.conf")
            with open(path, "w") as f:
                f.write(config)
            cmd += ["--config", path]
        cmd += list(args)
        self.log_path = os.path.join(self.tmp, "log")
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=self.log_file)
        self.port = None
        deadline = time.time() + start_timeout
        while time.time() < deadline and self.port is None:
            for rec in self.logs():
                if rec.get("msg") == "listening":
                    self.port = rec["port"]
            if self.proc.poll() is not None:
                log = open(self.log_path).read()
                self.log_file.close()
                shutil.rmtree(self.tmp, ignore_errors=True)
                raise RuntimeError("pdbsym serve exited %d: %s" % (self.proc.returncode, log))
            time.sleep(0.02)
        if self.port is None:
            self.proc.kill()
            self.proc.wait()
            self.log_file.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise RuntimeError("pdbsym serve did not start")

    def logs(self):
        """The log lines written so far.  The server may be writing one while
        we read: a last line without its newline is not complete yet and is
        left for the next call."""
        out = []
        with open(self.log_path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    # every line on pdbsym's stderr is one JSON object (api.md, "Logs"):
                    # one that is not is a finding, shown whole
                    raise AssertionError("pdbsym serve's log line %d is not JSON: %r" % (n, line[:2000]))
        return out

    def request(self, method, path, body=None, headers=None, timeout=30):
        """Returns (status, headers dict lowercased, body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        if method == "POST":  # the service takes JSON bodies only (415 otherwise)
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, data

    def json(self, method, path, body=None, headers=None, timeout=30):
        st, h, data = self.request(method, path, body, headers, timeout)
        return st, h, json.loads(data)

    def raw(self, data, timeout=10):
        """Sends raw bytes, returns everything the server answers until it closes."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        out = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except socket.timeout:
            pass
        s.close()
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        return self.proc.returncode

    def close(self):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def parse_raw_response(data):
    """(status, headers, body) of the first HTTP response in data."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if "content-length" in hdrs:
        body = body[: int(hdrs["content-length"])]
    return status, hdrs, body



def budget_refusal(status, retry_after, body, budget_text):
    """Whether an answer is the request memory budget's 503: a Retry-After and
    the error naming request_memory_max as budget_text."""
    if status != 503 or not retry_after:
        return False
    try:
        return json.loads(body)["error"] == (
            "the memory budget of requests in flight is taken (request_memory_max = %s)" % budget_text)
    except (ValueError, KeyError, TypeError):
        return False

class SlowUpstream:
    """A symbol server that knows no module: the first request for each file
    name waits `delay` seconds before its 404, the others (the client's other
    probes for the same module) are answered at once, so a module fetch stays
    in flight about `delay` seconds."""

    def __init__(self, delay):
        outer = self
        self.seen = set()
        self.lock = threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.strip("/").split("/")[0].lower().rsplit(".", 1)[0]
                with outer.lock:
                    first = name not in outer.seen
                    outer.seen.add(name)
                if first:
                    time.sleep(outer.delay)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_GET

            def log_message(self, *a):
                pass

        self.delay = delay
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.t.start()

    def env(self):
        """Environment for a server whose fetches go to this upstream (each
        answered after `delay` seconds)."""
        return {
            "PDBSYM_SYMBOL_PATH": "srv*http://127.0.0.1:%d" % self.port,
            "PDBSYM_OFFLINE": "false",
        }

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


MODULE = {"debug_file": "C:\\build\\demo.pdb", "debug_id": "3773e353-0b2e-4938-82ec-a7324b16c2d9-1"}


class Checks:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def eq(self, what, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed += 1
            harness.failed()
            print("FAIL %s: got %r, want %r" % (what, got, want))

    def true(self, what, cond, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            harness.failed()
            print("FAIL %s %s" % (what, detail))

    def done(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        sys.exit(harness.status(1 if self.failed else 0))


# ---- helpers for the attack tests (test_attack_*.py)

def free_port():
    """A TCP port of 127.0.0.1 free now (for a server a test starts)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def threads_of(pid):
    """The process's thread count, from /proc/PID/status."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("Threads:"):
                    return int(ln.split()[1])
    except OSError:
        pass
    return 0


def folder_bytes(path):
    """Bytes of every regular file under path (what the cache folder holds on
    disk), each file once: a download handed over is linked to its final name
    before its temporary name goes, and two names of one file are one file."""
    total = 0
    seen = set()
    for d, _, files in os.walk(path):
        for n in files:
            try:
                st = os.lstat(os.path.join(d, n))
            except OSError:
                continue  # removed meanwhile
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


class Sampler:
    """Samples fn() every `every` seconds on a thread; .values, .max()."""

    def __init__(self, fn, every=0.05):
        self.fn, self.every, self.values = fn, every, []
        self.stop_flag = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop_flag:
            self.values.append(self.fn())
            time.sleep(self.every)

    def stop(self):
        self.stop_flag = True
        self.t.join()
        return self

    def max(self):
        return max(self.values) if self.values else 0


class HealthProbe(Sampler):
    """GET /health every `every` seconds; .values are the latencies (s), a
    failed or non-200 answer counts as 99."""

    def __init__(self, srv, every=0.1):
        def once():
            t0 = time.monotonic()
            try:
                st, _, _ = srv.request("GET", "/health", timeout=5)
                return time.monotonic() - t0 if st == 200 else 99.0
            except OSError:
                return 99.0
        super().__init__(once, every)


class SymServer:
    """tests/symserver.py on a folder, in its own process (started here)."""

    def __init__(self, root):
        src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
        self.root = root
        self.proc = subprocess.Popen([sys.executable, os.path.join(src, "tests", "symserver.py"), root,
                                      "--exit-with-parent"], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline().split()[1])
        self.url = "http://127.0.0.1:%d" % self.port

    def _post(self, path, obj):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("POST", path, body=json.dumps(obj).encode())
        r = c.getresponse()
        out = json.loads(r.read())
        c.close()
        return out

    def control(self, rules):
        return self._post("/_control", rules)

    def reset(self):
        return self._post("/_reset", {})

    def stats(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/_stats")
        r = c.getresponse()
        out = json.loads(r.read())
        c.close()
        return out

    def hits(self):
        return self.stats()["hits"]

    def put(self, rel, data):
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
