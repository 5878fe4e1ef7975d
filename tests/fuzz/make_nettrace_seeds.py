#!/usr/bin/env python3
"""Writes synthetic seeds of fuzz_nettrace (tests/fuzz/corpus/nettrace/), byte by
byte from the NetTrace format documents (microsoft/perfview
src/TraceEvent/EventPipe/NetTraceFormat_v5.md and NetTraceFormat.md), for the
paths the runtime's own traces do not take:

  v5-uncompressed.nettrace  FastSerialization framing; a MetadataBlock and an
      EventBlock with uncompressed (flags 0) event headers and 4-byte file
      alignment; metadata with a nested Object field, an Array field, and the
      V5 tags (OpCode, V2Params); a MethodLoadVerbose, a MethodILToNativeMap,
      a ModuleLoad and a ThreadSample event; a StackBlock and an SPBlock.
  v6-blocks.nettrace  the V6 header and blocks: Trace (with key-value pairs),
      Metadata (optional metadata kinds), Thread, RemoveThread, LabelList,
      Stack, compressed Event, SequencePoint, EndOfStream.

The real trace beside them (net10-small.nettrace) is made by
tests/fixtures/nettrace/make.sh.
The same seeds go to corpus/trace, for fuzz_trace (the trace job).
Usage: make_nettrace_seeds.py [OUT_DIR]   (default: tests/fuzz/corpus/nettrace and .../trace)
"""
import os
import struct
import sys


def u16z(s):
    return s.encode("utf-16-le") + b"\0\0"


def varuint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class FS:
    """FastSerialization writer that tracks the file offset for alignment."""

    def __init__(self):
        self.b = bytearray(b"Nettrace" + struct.pack("<I", 20) + b"!FastSerialization.1")

    def obj_header(self, name, version):
        n = name.encode()
        self.b += bytes([5, 5, 1]) + struct.pack("<iiI", version, version, len(n)) + n + bytes([6])

    def trace(self):
        self.obj_header("Trace", 4)
        self.b += struct.pack("<8H", 2026, 12, 2, 1, 8, 0, 0, 0)
        self.b += struct.pack("<qqiiii", 1000, 1000000000, 8, 4242, 2, 1000)
        self.b += bytes([6])

    def block(self, name, body_fn):
        self.obj_header(name, 2)
        size_at = len(self.b)
        self.b += b"\0\0\0\0"
        while len(self.b) % 4:
            self.b += b"\0"
        start = len(self.b)
        body_fn(self)
        struct.pack_into("<I", self.b, size_at, len(self.b) - start)
        self.b += bytes([6])


def event_uncompressed(w, metadata_id, payload, thread=7, stack=0, ts=2000):
    hdr = struct.pack("<IIqqIIq", metadata_id, 1, thread, thread, 0, stack, ts)
    hdr += b"\0" * 32 + struct.pack("<I", len(payload))
    w.b += struct.pack("<I", len(hdr) + len(payload)) + hdr + payload
    while len(w.b) % 4:
        w.b += b"\0"


def metadata_record(mid, provider, event_id, name, version, fields=b"", tags=b""):
    return (struct.pack("<I", mid) + u16z(provider) + struct.pack("<I", event_id) + u16z(name)
            + struct.pack("<qII", 0x20018, version, 5) + fields + tags)


def sample_trace(nblocks, block_bytes, nstacks, depth=16, threads=(7, 8, 9, 10), method=True):
    """A large synthetic trace of SampleProfiler ThreadSample events (for the
    tests and benches of POST /traces' feed, not a seed): a MetadataBlock, a
    StackBlock of nstacks stacks of depth frames, one MethodLoadVerbose that
    covers them (unless not method: a trace without methods is answered
    422), nblocks EventBlocks of just
    under block_bytes each (uncompressed headers, the threads in turn, stacks
    1..nstacks in turn), an SPBlock.  Returns the bytes and the samples per
    thread."""
    w = FS()
    w.trace()

    def meta(w):
        w.b += struct.pack("<HHqq", 20, 0, 0, 0)  # flags 0: uncompressed event headers
        event_uncompressed(w, 0, metadata_record(1, "Microsoft-Windows-DotNETRuntime", 143,
                                                 "MethodLoadVerbose", 2), thread=0)
        event_uncompressed(w, 0, metadata_record(4, "Microsoft-DotNETCore-SampleProfiler", 0,
                                                 "ThreadSample", 0), thread=0)
    w.block("MetadataBlock", meta)

    def stacks(w):
        w.b += struct.pack("<II", 1, nstacks)
        for s in range(nstacks):
            ips = [0x7f0000001000 + 0x40 * ((s * depth + k) % 4096) for k in range(depth)]
            w.b += struct.pack("<I", 8 * depth) + struct.pack("<%dQ" % depth, *ips)
    w.block("StackBlock", stacks)

    counts = {t: 0 for t in threads}
    ts = 2000
    for b in range(nblocks):
        def events(w):
            nonlocal ts
            start = len(w.b)
            w.b += struct.pack("<HHqq", 20, 0, ts, ts + 1)
            if b == 0 and method:  # one method covering every IP, so that the frames have a name
                ml = struct.pack("<QQQIII", 0x100, 0x200, 0x7f0000001000, 0x40 * 4096, 0x06000001, 8)
                ml += u16z("Demo.Program") + u16z("Spin") + u16z("void ()") + struct.pack("<HQ", 0, 0)
                event_uncompressed(w, 1, ml, thread=threads[0], ts=ts)
            k = 0
            while len(w.b) - start < block_bytes - 256:
                t = threads[k % len(threads)]
                event_uncompressed(w, 4, struct.pack("<I", 1), thread=t, stack=1 + k % nstacks, ts=ts)
                counts[t] += 1
                k += 1
                ts += 1
        w.block("EventBlock", events)

    def sp(w):
        w.b += struct.pack("<qI", ts + 1, 0)
    w.block("SPBlock", sp)
    w.b += bytes([1])
    return bytes(w.b), counts


def v5_uncompressed():
    w = FS()
    w.trace()

    def meta(w):
        w.b += struct.pack("<HHqq", 20, 0, 0, 0)  # header, flags 0: uncompressed
        rt = "Microsoft-Windows-DotNETRuntime"
        fields = struct.pack("<I", 3)
        fields += struct.pack("<I", 1) + struct.pack("<I", 1) + struct.pack("<I", 9) + u16z("Inner") + u16z("Obj")
        fields += struct.pack("<I", 19) + struct.pack("<I", 10) + u16z("Arr")
        fields += struct.pack("<I", 18) + u16z("Str")
        v2 = struct.pack("<I", 1) + struct.pack("<I", 4 + len(u16z("X")) + 4) + u16z("X") + struct.pack("<I", 9)
        tags = struct.pack("<IB", 1, 1) + b"\x0a" + struct.pack("<IB", len(v2), 2) + v2
        for rec in (metadata_record(1, rt, 143, "MethodLoadVerbose", 2, fields, tags),
                    metadata_record(2, rt, 190, "", 1),
                    metadata_record(3, rt, 152, "", 2),
                    metadata_record(4, "Microsoft-DotNETCore-SampleProfiler", 0, "ThreadSample", 0)):
            event_uncompressed(w, 0, rec, thread=0)
    w.block("MetadataBlock", meta)

    def stacks(w):
        w.b += struct.pack("<II", 1, 1) + struct.pack("<I", 16) + struct.pack("<QQ", 0x7f0000001010, 0x7f0000002020)
    w.block("StackBlock", stacks)

    def events(w):
        w.b += struct.pack("<HHqq", 20, 0, 2000, 2003)
        ml = struct.pack("<QQQIII", 0x100, 0x200, 0x7f0000001000, 0x40, 0x06000001, 8)
        ml += u16z("Demo.Program") + u16z("Main") + u16z("void ()") + struct.pack("<HQ", 0, 0)
        event_uncompressed(w, 1, ml)
        il = struct.pack("<QQBH", 0x100, 0, 0, 3) + struct.pack("<3i", -2, 0, 5) + struct.pack("<3I", 0, 4, 16)
        il += struct.pack("<HQ", 0, 0)
        event_uncompressed(w, 2, il, ts=2001)
        mo = struct.pack("<QQII", 0x200, 0x300, 8, 0) + u16z("/_/app/Demo.dll") + u16z("") + struct.pack("<H", 0)
        mo += bytes(range(16)) + struct.pack("<I", 1) + u16z("/_/obj/Demo.pdb")
        mo += bytes(16) + struct.pack("<I", 0) + u16z("")
        event_uncompressed(w, 3, mo, ts=2002)
        event_uncompressed(w, 4, struct.pack("<I", 1), stack=1, ts=2003)
    w.block("EventBlock", events)

    def sp(w):
        w.b += struct.pack("<qI", 3000, 1) + struct.pack("<qI", 7, 5)
    w.block("SPBlock", sp)
    w.b += bytes([1])
    return bytes(w.b)


def v6_blocks():
    b = bytearray(b"Nettrace" + struct.pack("<III", 0, 6, 0))

    def block(kind, body):
        b.extend(struct.pack("<I", len(body) | kind << 24) + body)

    kv = [("ProcessId", "42"), ("HardwareThreadCount", "2"), ("Machine", "x")]
    t = struct.pack("<8H", 2026, 12, 2, 1, 8, 0, 0, 0) + struct.pack("<qqiI", 0, 1000000000, 8, len(kv))
    for k, v in kv:
        t += varuint(len(k)) + k.encode() + varuint(len(v)) + v.encode()
    block(1, t)
    prov, name = b"Microsoft-DotNETCore-SampleProfiler", b"ThreadSample"
    row = varuint(1) + varuint(len(prov)) + prov + varuint(0) + varuint(len(name)) + name
    f = varuint(4) + b"Type" + bytes([10])
    row += struct.pack("<H", 1) + struct.pack("<H", len(f)) + f
    opt = bytes([1, 10, 3]) + struct.pack("<Q", 0) + bytes([8, 5, 9, 0, 4]) + varuint(1) + b"m"
    opt += bytes([7]) + bytes(16)
    row += struct.pack("<H", len(opt)) + opt
    block(3, struct.pack("<H", 0) + struct.pack("<H", len(row)) + row)
    trow = varuint(3) + bytes([1]) + varuint(4) + b"main" + bytes([2]) + varuint(42) + bytes([3]) + varuint(77)
    block(6, struct.pack("<H", len(trow)) + trow)
    block(8, struct.pack("<II", 1, 1) + bytes([0x81]) + bytes(16))
    block(5, struct.pack("<III", 1, 1, 8) + struct.pack("<Q", 0x1234))
    ev = bytes([1 | 2 | 4 | 8 | 128]) + varuint(1) + varuint(0) + varuint(3) + varuint(0) + varuint(3)
    ev += varuint(1) + varuint(5) + varuint(4) + struct.pack("<I", 1)
    ev += bytes([0]) + varuint(1) + struct.pack("<I", 2)  # a second event, all fields repeated
    block(2, struct.pack("<HHqq", 20, 1, 5, 6) + ev)
    block(4, struct.pack("<QII", 10, 1, 1) + varuint(3) + varuint(2))
    block(7, varuint(3) + varuint(2))
    block(0, b"")
    return bytes(b)


def main():
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    outs = sys.argv[1:] or [os.path.join(corpus, "nettrace"), os.path.join(corpus, "trace")]
    for out in outs:
        os.makedirs(out, exist_ok=True)
        for name, data in (("v5-uncompressed.nettrace", v5_uncompressed()), ("v6-blocks.nettrace", v6_blocks())):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
