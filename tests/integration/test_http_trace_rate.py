"""The time a POST /traces upload may hold its slot (issue 27), against the
real `pdbsym serve`; the traces are written here byte by byte from the
NetTrace V5 format (tests/fuzz/make_nettrace_seeds.py's writer), so the
oracle for an answer is the trace itself (its samples per thread):

1. a long chunked upload at the rate a live session writes (about 100 KB/s,
   here for 25 s with trace_rate_window = 5 and trace_min_rate = 50K) is read
   to its end and answered 200 with every sample; with trace_min_rate = 0 (no
   floor) a slower one (8 KB/s, longer than read_timeout) is answered too;
2. a body that falls under trace_min_rate over trace_rate_window is closed
   soon after the window, and one that keeps its rate but passes
   trace_max_time is closed at that time;
3. garbage senders: two clients that send a body that is no trace and then
   drip a byte a second (reconnecting whenever they are closed, as an
   attacker would) are answered 400 at once (not read to the end of their
   64 MiB) and give their slots back, so that a good trace is admitted (no
   503) within 10 s meanwhile and answered 200.
/health is asked on new connections throughout; the event loop's figures
(probes, slowest answer) are printed.  The full-length run at the default
settings (10 minutes at 100 KB/s) is bench/bench_trace_upload.py."""
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import make_nettrace_seeds as nt  # noqa: E402
from pdbsym_server import Checks, HealthProbe, Server, need_binary  # noqa: E402

need_binary()
c = Checks()
CT = {"Content-Type": "application/octet-stream"}


def paced(data, rate, piece=8192):
    """The bytes of data in pieces, at about `rate` bytes a second."""
    t0 = time.monotonic()
    for i in range(0, len(data), piece):
        yield data[i:i + piece]
        ahead = t0 + (i + piece) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


def upload(srv, data, rate, timeout=300):
    """POST /traces chunked at `rate`; (status, body, seconds)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.request("POST", "/traces", body=paced(data, rate), headers=CT, encode_chunked=True)
        r = conn.getresponse()
        body = r.read()
        return r.status, body, time.monotonic() - t0
    except OSError as e:
        return 0, str(e).encode(), time.monotonic() - t0
    finally:
        conn.close()


def samples_per_thread(body):
    doc = json.loads(body)
    return {int(p["name"].split("(")[1].rstrip(")")): len(p["samples"]) for p in doc["profiles"]}


def drip_until_closed(srv, head, rate_bytes, every, limit):
    """Sends head, then rate_bytes every `every` s; returns (seconds until the
    server closed or answered, what it answered)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.setblocking(False)
    t0 = time.monotonic()
    got = b""
    try:
        s.sendall(head)
    except BlockingIOError:
        pass
    nxt = t0
    while time.monotonic() - t0 < limit:
        try:
            b = s.recv(4096)
            if not b:
                break
            got += b
        except BlockingIOError:
            pass
        except OSError:
            break
        if time.monotonic() >= nxt:
            try:
                s.send(b"\x01" * rate_bytes)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                break
            nxt += every
        time.sleep(0.02)
    took = time.monotonic() - t0
    s.close()
    return took, got


def metric(srv, name):
    st, _, body = srv.request("GET", "/metrics")
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    return None


# a trace of 64 KiB blocks: 2.4 MiB, about 25 s at 100 KB/s
trace, counts = nt.sample_trace(38, 64 * 1024 - 512, 200, 8, (7, 8, 9))
small, small_counts = nt.sample_trace(2, 64 * 1024 - 512, 50, 8, (7, 8))
print("trace: %.2f MiB, %d samples; small trace: %d KiB" % (
    len(trace) / 2**20, sum(counts.values()), len(small) // 1024))

# ---- 1 and 2: rates and the longest time ----------------------------------------------
srv = Server(config="read_timeout = 2\ntrace_min_rate = 50K\ntrace_rate_window = 5\n"
                    "trace_max_time = 120\n")
try:
    probe = HealthProbe(srv, 0.2)
    st, body, took = upload(srv, trace, 100_000)
    c.eq("100 KB/s for %.0f s: status" % took, st, 200)
    if st == 200:
        c.eq("100 KB/s: every sample, per thread", samples_per_thread(body), counts)
    else:
        print("  answer: %r" % body[:300])
    c.true("100 KB/s: longer than read_timeout and several windows", took > 15, "%.1f s" % took)
    print("100 KB/s upload of %.2f MiB: %d in %.1f s" % (len(trace) / 2**20, st, took))

    # under the rate: 2 KB a second after the trace's first block
    head = (b"POST /traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % len(trace)) + trace[:70000]
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(head)
    t0 = time.monotonic()
    closed = False
    off = 70000
    while time.monotonic() - t0 < 30 and not closed:
        try:
            s.sendall(trace[off:off + 2000])
            off += 2000
            s.settimeout(1.0)
            if s.recv(4096) == b"":
                closed = True
        except socket.timeout:
            pass
        except OSError:
            closed = True
    took = time.monotonic() - t0
    s.close()
    print("2 KB/s under trace_min_rate = 50K over 5 s: closed=%s after %.1f s" % (closed, took))
    c.true("under the rate: closed", closed)
    c.true("under the rate: after about one window (5 s)", 4 < took < 9, "%.1f s" % took)
    c.true("under the rate: counted", (metric(srv, "pdbsym_http_stream_closed_total") or 0) >= 1)
    probe.stop()
    print("/health meanwhile: %d probes, slowest %.3f s" % (len(probe.values), probe.max()))
    c.true("/health answered meanwhile", probe.max() < 1.0, "slowest %.3f s" % probe.max())
finally:
    srv.close()

srv = Server(config="trace_min_rate = 30K\ntrace_rate_window = 2\ntrace_max_time = 8\n")
try:
    st, body, took = upload(srv, trace, 100_000)
    print("trace_max_time = 8: a steady 100 KB/s upload ends with %d after %.1f s" % (st, took))
    c.true("past trace_max_time: not answered 200", st != 200, st)
    c.true("past trace_max_time: closed at about 8 s", 7 < took < 11, "%.1f s" % took)
finally:
    srv.close()

srv = Server(config="read_timeout = 2\ntrace_min_rate = 0\n")
try:
    st, body, took = upload(srv, small, 8_000)
    print("trace_min_rate = 0: %d KiB at 8 KB/s: %d in %.1f s" % (len(small) // 1024, st, took))
    c.eq("no floor: a slow upload past read_timeout answered", st, 200)
    if st == 200:
        c.eq("no floor: every sample", samples_per_thread(body), small_counts)
finally:
    srv.close()

# ---- 3. garbage senders ------------------------------------------------------------------
srv = Server()  # the defaults: max_trace_jobs = 2
try:
    probe = HealthProbe(srv, 0.1)
    stop = threading.Event()
    attacks = []  # (seconds until answered and closed, status line)
    head = (b"POST /traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % (64 << 20)) + b"\0" * 65536

    def attacker():
        while not stop.is_set():
            took, got = drip_until_closed(srv, head, 1, 1.0, 60)
            attacks.append((took, got.split(b"\r\n", 1)[0]))

    ts = [threading.Thread(target=attacker, daemon=True) for _ in range(2)]
    for t in ts:
        t.start()
    time.sleep(1.0)
    waits = []
    for _ in range(3):
        t0 = time.monotonic()
        st = 503
        while st == 503 and time.monotonic() - t0 < 30:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            conn.request("POST", "/traces", body=small, headers=CT)
            r = conn.getresponse()
            body = r.read()
            conn.close()
            st = r.status
            if st == 503:
                time.sleep(0.05)
        waits.append(time.monotonic() - t0)
        c.eq("a good trace beside the garbage senders: status", st, 200)
        if st == 200:
            c.eq("a good trace beside the garbage senders: its samples", samples_per_thread(body), small_counts)
    stop.set()
    for t in ts:
        t.join(70)
    probe.stop()
    print("garbage senders: %d attacks, each answered %s after at most %.2f s"
          % (len(attacks), sorted(set(a[1] for a in attacks)), max(a[0] for a in attacks)))
    print("good traces admitted after %s s" % ["%.2f" % w for w in waits])
    print("/health meanwhile: %d probes, slowest %.3f s" % (len(probe.values), probe.max()))
    # a garbage sender that finds both slots taken (the other one and the good
    # trace) is refused at once with 503; one admitted is answered 400 when its
    # job fails, not read to its end
    rejected = [a for a in attacks if a[1].startswith(b"HTTP/1.1 400")]
    c.true("garbage: each answered 400 (or 503 when the slots were taken)",
           rejected and all(a[1].startswith((b"HTTP/1.1 400", b"HTTP/1.1 503")) for a in attacks),
           attacks[:4])
    c.true("garbage: each answered and closed within 3 s (not read to its end)",
           attacks and max(a[0] for a in attacks) < 3, max(a[0] for a in attacks) if attacks else None)
    c.true("good traces admitted within 10 s", waits and max(waits) < 10, waits)
    c.true("/health under 1 s meanwhile", probe.max() < 1.0, "slowest %.3f s" % probe.max())
    c.true("early answers counted", (metric(srv, "pdbsym_http_answered_early_total") or 0) >= len(rejected))
finally:
    srv.close()
c.done()
