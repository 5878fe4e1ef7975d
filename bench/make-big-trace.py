#!/usr/bin/env python3
"""Writes a big .nettrace for bench/run-trace.sh: a fixture trace
(tests/fixtures/nettrace/<tfm>/workload.nettrace) with all its blocks after
the Trace object repeated COPIES times (the MetadataBlocks only in the first
copy), each block re-framed so that its 4-byte file alignment stays right
(NetTraceFormat_v5.md, "Objects").  Every copy ends with the trace's own
sequence point, so stack ids stay valid.

Usage: make-big-trace.py OUT [COPIES] [TFM]   (defaults 300, net10.0: ~116 MB)
"""
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))


def objects(data):
    i, out = 32, []
    while data[i] != 1:
        nlen = struct.unpack_from("<I", data, i + 11)[0]
        hdr = data[i:i + 16 + nlen]
        if data[i + 15:i + 15 + nlen] == b"Trace":
            out.append((None, data[i:i + 16 + nlen + 48 + 1]))
            i += 16 + nlen + 48 + 1
            continue
        size = struct.unpack_from("<I", data, i + 16 + nlen)[0]
        j = i + 16 + nlen + 4
        j += (4 - j % 4) % 4
        out.append((hdr, data[j:j + size]))
        i = j + size + 1
    return out


def main():
    out = sys.argv[1]
    copies = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    tfm = sys.argv[3] if len(sys.argv) > 3 else "net10.0"
    src = open(os.path.join(here, "..", "tests", "fixtures", "nettrace", tfm, "workload.nettrace"), "rb").read()
    objs = objects(src)
    with open(out, "wb") as f:
        b = bytearray(src[:32])
        pos = 0
        for k in range(copies):
            # metadata only once: readers (TraceEvent) refuse an id defined twice
            for hdr, body in (objs if k == 0 else [o for o in objs[1:] if b"MetadataBlock" not in o[0]]):
                if hdr is None:
                    b += body
                    continue
                b += hdr + struct.pack("<I", len(body))
                b += b"\0" * ((4 - (pos + len(b)) % 4) % 4)
                b += body + b"\x06"
            f.write(b)
            pos += len(b)
            b = bytearray()
        f.write(b"\x01")


if __name__ == "__main__":
    main()
