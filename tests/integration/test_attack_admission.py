"""Requests that hold memory and slots from their headers alone (issue 27),
against the real `pdbsym serve` with its default settings, the native
fixtures warmed into its cache; every answer is compared with
llvm-symbolizer's (tests/fixtures/native/*.expected.tsv):

1. 4 connections send only headers declaring `Content-Length: 8 MiB` and
   then nothing (each replaced as soon as the server closes it, as an
   attacker would), for 20 s: every /symbolicate and /symbolicate/v5 request
   of another client meanwhile is answered 200 with the oracle's frames, none
   503 (before: each reserved 8 times its declared body, 4 took the 256 MiB
   budget, and 118 of 118 requests got 503);
2. the same with 64 connections declaring `Content-Length: 100` (before:
   they took every max_inflight slot);
3. per client address (max_inflight = 8, max_inflight_per_ip = 4; a slow
   upstream holds the requests): 8 requests at once from 127.0.0.2 get 4
   slots and 4 answers 503 naming max_inflight_per_ip, while 127.0.0.3's
   request is answered 200; and with request_memory_per_ip = 4M, bodies of
   127.0.0.2 that stall short of their end are refused 503 naming it as soon
   as they would pass 4 MiB, while 127.0.0.3 is answered 200.
The event loop's figures (/health probes, the memory budget and requests in
flight while the attack holds) are printed."""
import os
import shutil
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attacklib import Holder  # noqa: E402
from native_oracle import answer_ok, manifest, rows, sym_view  # noqa: E402
from pdbsym_server import Checks, HealthProbe, Server, SlowUpstream, warmed_cache  # noqa: E402

src = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
native_dir = os.path.join(src, "tests", "fixtures", "native")
c = Checks()
row = next(r for r in manifest(native_dir) if r["expected"])
want = [(lo, frames) for lo, hi, frames, note in rows(native_dir, row["expected"])][:20]
module = {"debug_file": row["cv_path"], "debug_id": row["symkey"]}
body = {"modules": [module], "frames": [{"module": 0, "rva": "0x%x" % lo} for lo, _ in want]}
v5 = {"memoryMap": [[row["cv_path"].replace("\\", "/").rsplit("/", 1)[-1], row["symkey"]]],
      "stacks": [[[0, lo] for lo, _ in want]]}


def good_answer(j):
    return all(f["status"] == "ok" and answer_ok(sym_view(f["symbols"]), w, None)
               for f, (_, w) in zip(j.get("frames", []), want)) and len(j.get("frames", [])) == len(want)


def metric(srv, name):
    return metrics(srv, name)[0]


def metrics(srv, *names):
    """The values of names in one reading of /metrics (None: absent)."""
    st, _, data = srv.request("GET", "/metrics")
    got = {}
    for ln in data.decode().splitlines():
        parts = ln.split()
        if len(parts) == 2 and parts[0] in names:
            got[parts[0]] = float(parts[1])
    return [got.get(n) for n in names]


def client_load(srv, seconds, out):
    """/symbolicate and v5 in turn for `seconds`; out gets (route, status, ok)."""
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        try:
            if i % 2 == 0:
                st, _, j = srv.json("POST", "/symbolicate", body, timeout=30)
                out.append(("symbolicate", st, st == 200 and good_answer(j)))
            else:
                st, _, j = srv.json("POST", "/symbolicate/v5", v5, timeout=30)
                names = [f.get("function") for f in j.get("results", [{}])[0].get("stacks", [[]])[0]] \
                    if st == 200 else []
                out.append(("v5", st, st == 200 and len(names) == len(want) and all(names)))
        except OSError as e:
            out.append(("error", 0, str(e)))
        i += 1
        time.sleep(0.05)


cache = warmed_cache(native_dir)
try:
    for n, length in ((4, 8 << 20), (64, 100)):
        srv = Server(env={"PDBSYM_CACHE_DIR": cache})
        try:
            head = (b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % length)
            hold = Holder(srv.port, n, "headers", head=head)
            hold.start()
            time.sleep(1.0)
            probe = HealthProbe(srv, 0.25)
            out = []
            load = threading.Thread(target=client_load, args=(srv, 20, out))
            load.start()
            mem, inflight = [], []
            while load.is_alive():
                mem.append(metric(srv, "pdbsym_request_memory_bytes") or 0)
                inflight.append(metric(srv, "pdbsym_http_requests_in_flight") or 0)
                time.sleep(1.0)
            load.join()
            probe.stop()
            held = hold.open_now()
            hold.stop()
            what = "%d header-only connections (Content-Length: %d)" % (n, length)
            codes = {}
            for _, st, _ in out:
                codes[st] = codes.get(st, 0) + 1
            print("%s: %d held at the end, %d made; other client: %d requests, statuses %s; "
                  "request memory at most %.0f KiB of %.0f MiB; in flight at most %d; /health %d probes, "
                  "slowest %.3f s" % (what, held, hold.connects, len(out), codes, max(mem) / 1024,
                                      (metric(srv, "pdbsym_request_memory_max_bytes") or 0) / 2**20,
                                      max(inflight), len(probe.values), probe.max()))
            c.true("%s: they were held" % what, held >= n * 3 // 4, held)
            c.true("%s: every other request answered 200" % what, out and all(st == 200 for _, st, _ in out),
                   codes)
            c.true("%s: with the oracle's frames" % what, all(ok for _, _, ok in out),
                   [x for x in out if not x[2]][:3])
            c.true("%s: they hold a door reservation each, not their declared bodies" % what,
                   max(mem) <= n * 16384 + (8 << 20), max(mem))
            c.true("%s: /health under 1 s" % what, probe.max() < 1.0, probe.max())
        finally:
            srv.close()

    # ---- 3. per client address ---------------------------------------------------
    slow = SlowUpstream(6.0)
    try:
        srv = Server(env=dict(slow.env(), PDBSYM_CACHE_DIR=cache),
                     config="max_inflight = 8\nmax_inflight_per_ip = 4\n")
        try:
            res = {}

            def attack(i):
                s = socket.create_connection(("127.0.0.1", srv.port), source_address=("127.0.0.2", 0),
                                             timeout=30)
                b = ('{"modules":[{"debug_file":"held%d.pdb","debug_id":"%032X1"}],'
                     '"frames":[{"module":0,"rva":"0x10"}],"timeout":20}' % (i, i + 1)).encode()
                s.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(b), b))
                data = b""
                while True:
                    got = s.recv(65536)
                    if not got:
                        break
                    data += got
                s.close()
                res[i] = data

            ts = [threading.Thread(target=attack, args=(i,)) for i in range(8)]
            for t in ts:
                t.start()
            time.sleep(1.5)
            s = socket.create_connection(("127.0.0.1", srv.port), source_address=("127.0.0.3", 0), timeout=30)
            import json
            b = json.dumps(body).encode()
            s.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(b), b))
            data = b""
            while True:
                got = s.recv(65536)
                if not got:
                    break
                data += got
            s.close()
            for t in ts:
                t.join(60)
            statuses = sorted(int(res[i].split(b" ", 2)[1]) for i in res)
            refused = [res[i] for i in res if res[i].startswith(b"HTTP/1.1 503")]
            print("8 held requests from 127.0.0.2 under max_inflight_per_ip = 4: %s; 127.0.0.3: %s"
                  % (statuses, data.split(b"\r\n", 1)[0]))
            c.eq("per address: 4 of 127.0.0.2's requests admitted, 4 refused", statuses, [200] * 4 + [503] * 4)
            c.true("per address: the 503 names max_inflight_per_ip",
                   refused and all(b"max_inflight_per_ip" in r for r in refused), refused[:1])
            c.true("per address: another address answered 200", data.startswith(b"HTTP/1.1 200"), data[:100])
        finally:
            srv.close()
    finally:
        slow.close()

    srv = Server(env={"PDBSYM_CACHE_DIR": cache},
                 config="request_memory_max = 16M\nrequest_memory_per_ip = 4M\n")
    try:
        # 8 bodies of 1 MiB from 127.0.0.2 that stall after 900 KB: the 5th
        # passes the address's 4 MiB
        socks, answers, cut = [], [], []
        for i in range(8):
            s = socket.create_connection(("127.0.0.1", srv.port), source_address=("127.0.0.2", 0), timeout=10)
            try:
                s.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % (1 << 20) + b" " * 900000)
            except (BrokenPipeError, ConnectionResetError):
                # refused and closed while the body was still coming: the
                # kernel may have dropped the 503 with the reset
                cut.append(s)
            socks.append(s)
        time.sleep(0.5)
        # what requests hold: the budget's reserved bytes less the freed
        # buffers it keeps for the next requests (request_memory_keep: a
        # refused request's buffer goes there, no address's any more)
        held, kept = metrics(srv, "pdbsym_request_memory_bytes", "pdbsym_request_memory_kept_bytes")
        if held is not None and kept is not None:
            held -= kept
        for s in socks:
            s.settimeout(0.5)
            try:
                answers.append(s.recv(4096))
            except (socket.timeout, ConnectionResetError):
                answers.append(b"")
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        closed = sum(1 for s, a in zip(socks, answers) if a.startswith(b"HTTP/1.1 503") or s in cut)
        s = socket.create_connection(("127.0.0.1", srv.port), source_address=("127.0.0.3", 0), timeout=30)
        import json
        b = json.dumps(body).encode()
        s.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(b), b))
        data = b""
        while True:
            got = s.recv(65536)
            if not got:
                break
            data += got
        s.close()
        for s in socks:
            s.close()
        print("8 stalled 1 MiB bodies from 127.0.0.2 under request_memory_per_ip = 4M: %d answered 503 "
              "at once, %.1f MiB held; 127.0.0.3: %s" % (len(refused), (held or 0) / 2**20,
                                                       data.split(b"\r\n", 1)[0]))
        # a 900 KB body holds at least that (at most 1.5 MiB: its buffer grows
        # by doubling, the new block reserved before the old goes): at most 4
        # fit in 4 MiB, at least one
        print("  closed by the server while their body was still being sent: %d" % len(cut))
        c.true("memory per address: the bodies past 4 MiB refused at once", 4 <= closed <= 7,
               (len(refused), len(cut)))
        c.true("memory per address: the 503 names request_memory_per_ip",
               refused and all(b"request_memory_per_ip" in r for r in refused), refused[:1])
        # the total in /metrics also holds answers being sent, which the
        # budget reserves a block (128 KiB) at a time outside the address's
        # share: each 503 not yet closed, and the /metrics request's own
        slack = (closed + 1) * (128 << 10)
        c.true("memory per address: held under the address's cap (+ %d KiB of answers)" % (slack >> 10),
               held is not None and held <= (4 << 20) + slack, held)
        c.true("memory per address: another address answered 200", data.startswith(b"HTTP/1.1 200"), data[:100])
    finally:
        srv.close()
finally:
    shutil.rmtree(cache, ignore_errors=True)
c.done()
