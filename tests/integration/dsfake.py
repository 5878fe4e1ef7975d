#!/usr/bin/env python3
"""dsfake.py - a stand-in for a .NET runtime's diagnostic server, for the
faults a real .NET 10 runtime will not show (older runtimes, error replies,
hostile or broken answers).  It listens where a runtime would:
$TMPDIR/dotnet-diagnostic-{pid}-{start}-socket (its own pid, and its start
time in clock ticks, field 22 of /proc/self/stat), so `pdbsym profile --pid
PID` finds it the way it finds a runtime.  The messages are those of
dotnet/diagnostics' ipc-protocol.md (20-byte header, set/id, error replies
with an HRESULT).  Every command received is appended to LOG as
"SET ID" (hex), so tests can see the fallbacks pdbsym made.

  dsfake.py MODE LOG [NETTRACE]

MODE (what it answers):
  ok          ProcessInfo3, every CollectTracing: OK, then NETTRACE streamed;
              StopTracing: OK and the stream closed
  old         .NET 5/6: ProcessInfo3 and 2, CollectTracing5 and 4 unknown
              (DS_IPC_E_UNKNOWN_COMMAND); 3 takes the session
  badenc      CollectTracing5 answered DS_IPC_E_BAD_ENCODING, 4 takes it
  ancient     every CollectTracing unknown
  refuse      CollectTracing answered DS_IPC_E_FAIL
  garbage     every answer 40 random bytes (no magic)
  bighdr      ProcessInfo answered with a header declaring 65,535 bytes
  truncated   ProcessInfo answered with a header declaring 200 bytes, 10 sent
  silent      accepts, reads, never answers
  badinfo     ProcessInfo3 whose command line claims 2^30 characters
  badstream   CollectTracing OK, then bytes that are not a nettrace stream
  dies        CollectTracing OK, half of NETTRACE, then the server exits
              (a runtime killed mid-session)
Prints "ready PID" when listening.  Python standard library only.
"""
import os
import socket
import struct
import sys
import threading
import time

MAGIC = b"DOTNET_IPC_V1\0"
E_UNKNOWN_COMMAND = 0x80131385
E_BAD_ENCODING = 0x80131384
E_FAIL = 0x80004005


def msg(cset, cid, payload=b""):
    return MAGIC + struct.pack("<HBBH", 20 + len(payload), cset, cid, 0) + payload


def ok(payload=b""):
    return msg(0xFF, 0x00, payload)


def err(hr):
    return msg(0xFF, 0xFF, struct.pack("<I", hr))


def s16(t):
    u = (t + "\0").encode("utf-16-le")
    return struct.pack("<I", len(u) // 2) + u


def process_info(kind, pid):
    p = struct.pack("<I", 1) if kind == 3 else b""
    p += struct.pack("<Q", pid) + bytes(range(16))
    p += s16("/usr/bin/dsfake fake.dll") + s16("Linux") + s16("x64")
    if kind >= 2:
        p += s16("fake") + s16("10.0.0-fake")
    if kind == 3:
        p += s16("linux-x64")
    return p


def start_time():
    st = open("/proc/self/stat").read()
    return st[st.rindex(")") + 2:].split()[19]


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            return None
        b += x
    return b


def main():
    mode, log = sys.argv[1], sys.argv[2]
    trace = open(sys.argv[3], "rb").read() if len(sys.argv) > 3 else b""
    pid = os.getpid()
    folder = os.environ.get("TMPDIR") or "/tmp"
    path = os.path.join(folder, "dotnet-diagnostic-%d-%s-socket" % (pid, start_time()))
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    streams = {}  # session id -> its connection
    lock = threading.Lock()

    def note(cset, cid):
        with lock, open(log, "a") as f:
            f.write("%02x %02x\n" % (cset, cid))

    def stream(c):
        try:
            if mode == "badstream":
                c.sendall(b"Nettrace" + os.urandom(4096))
            elif mode == "dies":
                c.sendall(trace[:len(trace) // 2])
                time.sleep(0.5)
                os._exit(0)
            else:
                for i in range(0, len(trace), 8192):
                    c.sendall(trace[i:i + 8192])
                    time.sleep(0.002)
        except OSError:
            pass

    def serve(c):
        try:
            answer(c)
        except OSError:  # pdbsym hung up: what a runtime shrugs off too
            c.close()

    def answer(c):
        h = recv_exact(c, 20)
        if not h:
            c.close()
            return
        size, cset, cid, _ = struct.unpack("<HBBH", h[14:20])
        body = recv_exact(c, size - 20) if size > 20 else b""
        note(cset, cid)
        if mode == "silent":
            time.sleep(3600)
            return
        if mode == "garbage":
            c.sendall(os.urandom(40))
            c.close()
            return
        if cset == 0x04:  # Process
            kind = {0x00: 1, 0x04: 2, 0x08: 3}.get(cid)
            if mode == "bighdr":
                c.sendall(MAGIC + struct.pack("<HBBH", 65535, 0xFF, 0, 0) + b"A" * 100)
            elif mode == "truncated":
                c.sendall(MAGIC + struct.pack("<HBBH", 220, 0xFF, 0, 0) + b"A" * 10)
            elif mode == "old" and kind in (2, 3):
                c.sendall(err(E_UNKNOWN_COMMAND))
            elif mode == "badinfo" and kind == 3:
                p = process_info(3, pid)
                p = p[:28] + struct.pack("<I", 1 << 30) + p[32:]
                c.sendall(ok(p))
            elif kind:
                c.sendall(ok(process_info(kind, pid)))
            else:
                c.sendall(err(E_UNKNOWN_COMMAND))
            c.close()
            return
        if cset == 0x02 and cid == 0x01:  # StopTracing: that session's stream ends
            sid = struct.unpack("<Q", body[:8])[0] if len(body) >= 8 else 0
            with lock:
                s = streams.pop(sid, None)
            if s is not None:
                time.sleep(0.05)
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            c.sendall(ok(body[:8]))
            c.close()
            return
        if cset == 0x02:  # CollectTracing 1..5 are ids 2..6
            version = cid - 1
            if mode == "ancient" or (mode == "old" and version > 3):
                c.sendall(err(E_UNKNOWN_COMMAND))
                c.close()
                return
            if mode == "badenc" and version == 5:
                c.sendall(err(E_BAD_ENCODING))
                c.close()
                return
            if mode == "refuse":
                c.sendall(err(E_FAIL))
                c.close()
                return
            with lock:
                sid = 0x1234 + len(streams) + int(time.time() * 1000) % 100000 * 16
                streams[sid] = c
            c.sendall(ok(struct.pack("<Q", sid)))
            stream(c)
            return
        c.sendall(err(E_UNKNOWN_COMMAND))
        c.close()

    print("ready %d" % pid, flush=True)
    try:
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
