#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_dsipc (tests/fuzz/corpus/dsipc): the first
byte picks the reader (0 a reply, 1 an advertise, 2 provider names to build
CollectTracing with), the rest is built from dotnet/diagnostics'
ipc-protocol.md layouts: OK replies with a session id and with ProcessInfo
1/2/3 payloads, error replies (DS_IPC_E_UNKNOWN_COMMAND, BAD_ENCODING), an
advertise, and names with non-ASCII characters.

Usage: make_dsipc_seeds.py OUT_DIR   (writes OUT_DIR/dsipc/*.bin)
"""
import os
import struct
import sys


def s16(t):
    if t is None:
        return struct.pack("<I", 0)
    u = (t + "\0").encode("utf-16-le")
    return struct.pack("<I", len(u) // 2) + u


def msg(cset, cid, payload):
    return b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), cset, cid, 0) + payload


def info(kind):
    p = b""
    if kind == 3:
        p += struct.pack("<I", 1)
    p += struct.pack("<Q", 4242) + bytes(range(16))
    p += s16("/usr/share/dotnet/dotnet /srv/app/App.dll --port 8080") + s16("Linux") + s16("x64")
    if kind >= 2:
        p += s16("App") + s16("10.0.12")
    if kind == 3:
        p += s16("linux-x64")
    return p


def main():
    out = os.path.join(sys.argv[1], "dsipc")
    os.makedirs(out, exist_ok=True)
    seeds = {
        "ok-session": b"\0" + msg(0xFF, 0, struct.pack("<Q", 0x7f12345678)),
        "ok-empty": b"\0" + msg(0xFF, 0, b""),
        "err-unknown-command": b"\0" + msg(0xFF, 0xFF, struct.pack("<I", 0x80131385)),
        "err-bad-encoding": b"\0" + msg(0xFF, 0xFF, struct.pack("<I", 0x80131384)),
        "info1": b"\0" + msg(0xFF, 0, info(1)),
        "info2": b"\0" + msg(0xFF, 0, info(2)),
        "info3": b"\0" + msg(0xFF, 0, info(3)),
        "advertise": b"\1" + b"ADVR_V1\0" + bytes(range(16)) + struct.pack("<QH", 4242, 0),
        "names": b"\2" + "Microsoft-Windows-DotNETRuntime\xe9\U0001F600key=value;x=y".encode(),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
