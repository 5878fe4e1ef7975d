"""attacklib.py - hostile clients for the connection tests (test_http_attack.py)
and for bench/bench_http_limits.py, which measures the same attacks against
two binaries.  Python standard library only; every socket is non-blocking and
driven by one selector thread, so 1,200 held connections cost one thread.

  Holder(port, n, kind)   keeps n connections open: "idle" sends nothing,
                          "slow" sends a request line and then one header
                          line every `interval` seconds, never the blank line
                          that ends the headers; "headers" sends `head` (a
                          whole header block, e.g. one declaring a large
                          Content-Length) and then nothing.  A connection the server
                          closes is replaced at once (as an attacker would),
                          so n stay open as long as the server lets them.
  Flood(port, rate)       opens `rate` idle connections per second and keeps
                          each until the server closes it.
  HealthProbe(port)       asks GET /health on a new connection every `period`
                          seconds and records how long each answer took.
"""
import errno
import resource
import selectors
import socket
import threading
import time


def raise_nofile(want):
    """Raises this process's soft RLIMIT_NOFILE to at least `want` (children
    inherit it); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_status(pid, key):
    """A kB field of /proc/PID/status (VmRSS, VmHWM) or Threads, as an int."""
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    return 0


def open_fds(pid):
    import os
    return len(os.listdir("/proc/%d/fd" % pid))


class _Conn:
    __slots__ = ("sock", "connected", "sent_line", "next_send", "opened")


class Holder(threading.Thread):
    def __init__(self, port, n, kind, interval=5.0, host="127.0.0.1", src=None, path="/health",
                 head=b""):
        super().__init__(daemon=True)
        assert kind in ("idle", "slow", "headers")
        self.head = head
        self.port, self.n, self.kind, self.interval, self.host = port, n, kind, interval, host
        self.src, self.path = src, path  # src: the client address to connect from (127.0.0.x)
        self.sel = selectors.DefaultSelector()
        self.conns = set()
        self.stop_ev = threading.Event()
        self.connects = 0      # connections opened (including replacements)
        self.closed_by_server = 0
        self.failed = 0        # connect() refused or reset
        self.lifetimes = []    # seconds each server-closed connection lasted
        self.lock = threading.Lock()

    def open_now(self):
        with self.lock:
            return sum(1 for c in self.conns if c.connected)

    def _open(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.src:
            s.bind((self.src, 0))
        s.setblocking(False)
        c = _Conn()
        c.sock, c.connected, c.sent_line, c.opened = s, False, False, time.monotonic()
        c.next_send = c.opened
        err = s.connect_ex((self.host, self.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self.failed += 1
            return
        self.connects += 1
        with self.lock:
            self.conns.add(c)
        self.sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    def _drop(self, c, by_server):
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        with self.lock:
            self.conns.discard(c)
        if by_server:
            self.closed_by_server += 1
            self.lifetimes.append(time.monotonic() - c.opened)

    def _send(self, c, data):
        try:
            c.sock.send(data)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(c, True)

    def run(self):
        seq = 0
        while not self.stop_ev.is_set():
            with self.lock:
                missing = self.n - len(self.conns)
            for _ in range(min(missing, 200)):  # ramp up without a burst of 1,000 SYNs
                self._open()
            now = time.monotonic()
            for key, ev in self.sel.select(timeout=0.05):
                c = key.data
                if ev & selectors.EVENT_WRITE and not c.connected:
                    if c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        self._drop(c, False)
                        self.failed += 1
                        continue
                    c.connected = True
                    self.sel.modify(c.sock, selectors.EVENT_READ, c)
                    if self.kind == "slow":
                        self._send(c, b"GET %s HTTP/1.1\r\n" % self.path.encode())
                        c.next_send = now + self.interval
                    elif self.kind == "headers":
                        self._send(c, self.head)
                    continue
                if ev & selectors.EVENT_READ:
                    try:
                        data = c.sock.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        self._drop(c, True)
            if self.kind == "slow":
                with self.lock:
                    due = [c for c in self.conns if c.connected and c.next_send <= now]
                for c in due:
                    seq += 1
                    c.next_send = now + self.interval
                    self._send(c, b"X-Slow-%d: %d\r\n" % (seq, seq))
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            self._drop(c, False)
        self.sel.close()

    def stop(self):
        self.stop_ev.set()
        self.join(30)


class Flood(threading.Thread):
    """`rate` new idle connections per second, each kept until the server
    closes it (at most `cap` open at once, to stay inside our own fd limit)."""

    def __init__(self, port, rate, cap=4000, host="127.0.0.1", src=None):
        super().__init__(daemon=True)
        self.h = Holder(port, 0, "idle", host=host, src=src)
        self.rate, self.cap = rate, cap
        self.stop_ev = threading.Event()

    def run(self):
        t0 = time.monotonic()
        done = 0
        h = self.h
        while not self.stop_ev.is_set():
            due = int((time.monotonic() - t0) * self.rate) - done
            with h.lock:
                room = self.cap - len(h.conns)
            for _ in range(max(0, min(due, room))):
                h._open()
            done += max(0, due)
            for key, ev in h.sel.select(timeout=0.01):
                c = key.data
                if ev & selectors.EVENT_WRITE and not c.connected:
                    c.connected = True
                    h.sel.modify(c.sock, selectors.EVENT_READ, c)
                    continue
                try:
                    data = c.sock.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    h._drop(c, True)
        with h.lock:
            conns = list(h.conns)
        for c in conns:
            h._drop(c, False)
        h.sel.close()

    def stop(self):
        self.stop_ev.set()
        self.join(30)


class HealthProbe(threading.Thread):
    """GET /health every `period` s on a new connection; `cap` s is the most
    one probe waits (a probe that gets no answer counts as `cap`, failed)."""

    def __init__(self, port, period=0.25, cap=5.0, path="/health", host="127.0.0.1", src=None):
        super().__init__(daemon=True)
        self.port, self.period, self.cap, self.path, self.host = port, period, cap, path, host
        self.src = src
        self.samples = []  # (monotonic time, seconds, ok)
        self.stop_ev = threading.Event()

    def once(self):
        t0 = time.monotonic()
        ok = False
        try:
            s = socket.create_connection((self.host, self.port), timeout=self.cap,
                                         source_address=(self.src, 0) if self.src else None)
            s.settimeout(max(0.01, self.cap - (time.monotonic() - t0)))
            s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
                      % (self.path.encode(), self.port))
            data = b""
            while b"\r\n\r\n" not in data:
                b = s.recv(4096)
                if not b:
                    break
                data += b
            ok = data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.0 200")
            s.close()
        except OSError:
            ok = False
        dt = time.monotonic() - t0
        return (t0, min(dt, self.cap) if ok else self.cap, ok)

    def run(self):
        while not self.stop_ev.is_set():
            t0 = time.monotonic()
            self.samples.append(self.once())
            self.stop_ev.wait(max(0.0, self.period - (time.monotonic() - t0)))

    def stop(self):
        self.stop_ev.set()
        self.join(30)

    def summary(self, since=0.0):
        s = [x for x in self.samples if x[0] >= since]
        if not s:
            return {"n": 0, "failed": 0, "max": None, "p50": None}
        lat = sorted(x[1] for x in s)
        return {"n": len(s), "failed": sum(1 for x in s if not x[2]), "max": lat[-1],
                "p50": lat[len(lat) // 2], "over_1s": sum(1 for x in s if x[1] >= 1.0 or not x[2])}
