#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_ppdb and fuzz_pe (tests/fuzz/corpus/{ppdb,pe}).

Built byte by byte from the specs (ECMA-335 II.24, Portable PDB v1.0, PE/COFF),
not copied from any corpus file.  The Portable PDB has two documents (one name
with '/' parts, one with no separator), three MethodDebugInformation rows
(visible, hidden and document-change records; an initial document in the
blob header), a StateMachineMethod row and a Source Link record.  The PE32
image carries the same PDB embedded (MPDB + deflate), a Portable CodeView
entry, a PDB checksum entry, and metadata with TypeDef/MethodDef/NestedClass:

  0x06000001 Demo.Outer.Run   document /src/demo/a.cs: il 0 -> 10:9-10:14,
             il 3 -> 11:11-12:13, il 5 hidden; document C:\\b.cs: il 6 -> 20:1-20:5
  0x06000002 Demo.Outer..ctor  no points
  0x06000003 Demo.Outer+Inner.MoveNext  kickoff 0x06000001; document C:\\b.cs:
             il 0 hidden, il 7 -> 30:5-30:8
A second Portable PDB names its table stream "#-" (an EnC delta's).

tests/fuzz/synthetic.dll.srm.jsonl is what PdbDump (../shared/dotnet/PdbDump.cs,
System.Reflection.Metadata 1.4.3 on .NET Core 2.2.2) prints for pe/synthetic.dll.bin
(`dotnet PdbDump.dll synthetic.dll.bin`, srm_path cut to the file name): an
independent reading of these bytes, which test_ppdb compares with ours.

Usage: make_seeds.py OUT_DIR   (writes OUT_DIR/ppdb/*.bin and OUT_DIR/pe/*.bin)
"""
import os
import struct
import sys
import zlib


def cu(v):
    if v < 0x80:
        return bytes([v])
    if v < 0x4000:
        return struct.pack(">H", 0x8000 | v)
    return struct.pack(">I", 0xC0000000 | v)


def ci(v):  # one-byte signed compressed integer, -64..63
    assert -64 <= v <= 63
    return bytes([((v << 1) & 0x7F) | (1 if v < 0 else 0)])


def guid(s):
    h = bytes.fromhex(s.replace("-", ""))
    return h[3::-1] + h[5:3:-1] + h[7:5:-1] + h[8:]


class Heap:
    def __init__(self, first):
        self.data = bytearray(first)

    def add(self, b):
        i = len(self.data)
        self.data += b
        return i


def pad4(b):
    return bytes(b) + b"\0" * (-len(b) % 4)


def metadata(version, streams):
    """streams: list of (name, bytes) -> metadata root"""
    v = pad4(version.encode() + b"\0")
    hdr_len = 16 + len(v) + 4
    for name, _ in streams:
        hdr_len += 8 + len(pad4(name.encode() + b"\0"))
    out = bytearray(b"BSJB" + struct.pack("<HHII", 1, 1, 0, len(v)) + v)
    out += struct.pack("<HH", 0, len(streams))
    off = hdr_len
    body = bytearray()
    for name, data in streams:
        data = pad4(data)
        out += struct.pack("<II", off + len(body), len(data)) + pad4(name.encode() + b"\0")
        body += data
    return bytes(out + body)


def tables(rows, content, heap_sizes=0):
    """rows: {table: count}; content: bytes of all rows in table order"""
    valid = 0
    for t in rows:
        valid |= 1 << t
    # the tables ECMA-335 II.22 and the Portable PDB spec require sorted (readers check)
    sorted_mask = 0
    for t in (0x09, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x18, 0x19, 0x1C, 0x1D, 0x29, 0x2A, 0x2C,
              0x32, 0x36, 0x37):
        sorted_mask |= 1 << t
    out = struct.pack("<IBBBBQQ", 0, 2, 0, heap_sizes, 1, valid, sorted_mask)
    for t in sorted(rows):
        out += struct.pack("<I", rows[t])
    return out + content


SHA256 = guid("8829d00f-11b8-4213-878b-770e8597ac16")
CSHARP = guid("3f5162f8-07c6-11d3-9053-00c04fa302a1")
SOURCELINK = guid("cc110556-a091-4d38-9fec-25ab9a351a6a")
PDB_GUID = guid("0f1354d8-7319-45e4-97b5-5fd8335a1585")
PDB_STAMP = 0x5785B542


def portable_pdb(enc_delta=False):
    blob = Heap(b"\0")
    guids = bytearray(SHA256 + CSHARP + SOURCELINK)
    # documents: "/src/demo/a.cs" with '/', "C:\\b.cs" with no separator
    p_src, p_demo, p_a = blob.add(cu(3) + b"src"), blob.add(cu(4) + b"demo"), blob.add(cu(4) + b"a.cs")
    n1 = b"/" + cu(0) + cu(p_src) + cu(p_demo) + cu(p_a)
    d1 = blob.add(cu(len(n1)) + n1)
    p_b = blob.add(cu(7) + b"C:\\b.cs")
    n2 = b"\0" + cu(p_b)
    d2 = blob.add(cu(len(n2)) + n2)
    h = blob.add(cu(32) + bytes(range(32)))
    # method 1 (document 1 in the row): visible, visible, hidden, doc change, visible
    sp1 = (cu(0)                                           # local signature
           + cu(0) + cu(0) + cu(5) + cu(10) + cu(9)        # il 0: 10:9-10:14
           + cu(3) + cu(1) + ci(2) + ci(1) + ci(2)         # il 3: 11:11-12:13
           + cu(2) + cu(0) + cu(0)                         # il 5: hidden
           + cu(0) + cu(2)                                 # document 2
           + cu(1) + cu(0) + cu(4) + ci(9) + ci(-10))      # il 6: 20:1-20:5
    s1 = blob.add(cu(len(sp1)) + sp1)
    # method 3: document nil in the row, initial document 2 in the header
    sp3 = (cu(0) + cu(2)
           + cu(0) + cu(0) + cu(0)                         # il 0 hidden
           + cu(7) + cu(0) + cu(3) + cu(30) + cu(5))       # il 7: 30:5-30:8
    s3 = blob.add(cu(len(sp3)) + sp3)
    sl = b'{"documents":{"/src/*":"https://example.com/src/*"}}'
    slb = blob.add(cu(len(sl)) + sl)
    rows = {0x30: 2, 0x31: 3, 0x36: 1, 0x37: 1}
    content = (struct.pack("<HHHH", d1, 1, h, 2) + struct.pack("<HHHH", d2, 1, 0, 2)
               + struct.pack("<HH", 1, s1) + struct.pack("<HH", 0, 0) + struct.pack("<HH", 0, s3)
               + struct.pack("<HH", 3, 1)
               + struct.pack("<HHH", (1 << 5) | 7, 3, slb))
    pdb = PDB_GUID + struct.pack("<I", PDB_STAMP) + struct.pack("<I", 0x06000001)
    pdb += struct.pack("<Q", (1 << 0x02) | (1 << 0x06)) + struct.pack("<II", 3, 3)
    streams = [("#Pdb", pdb), ("#~" if not enc_delta else "#-", tables(rows, content)),
               ("#Strings", b"\0"), ("#US", b"\0"), ("#GUID", bytes(guids)), ("#Blob", bytes(blob.data))]
    return metadata("PDB v1.0", streams)


def assembly_metadata():
    strings = Heap(b"\0")
    blob = Heap(b"\0")
    s_mod = strings.add(b"demo.dll\0")
    s_m = strings.add(b"<Module>\0")
    s_demo = strings.add(b"Demo\0")
    s_outer = strings.add(b"Outer\0")
    s_inner = strings.add(b"Inner\0")
    s_run = strings.add(b"Run\0")
    s_ctor = strings.add(b".ctor\0")
    s_mn = strings.add(b"MoveNext\0")
    sig = blob.add(cu(3) + bytes([0x20, 0, 1]))
    rows = {0x00: 1, 0x02: 3, 0x06: 3, 0x29: 1}
    content = struct.pack("<HHHHH", 0, s_mod, 1, 0, 0)
    content += struct.pack("<IHHHHH", 0, s_m, 0, 0, 1, 1)
    content += struct.pack("<IHHHHH", 0x100001, s_outer, s_demo, 0, 1, 1)
    content += struct.pack("<IHHHHH", 0x100002, s_inner, 0, 0, 1, 3)
    for name in (s_run, s_ctor, s_mn):
        content += struct.pack("<IHHHHH", 0x2050, 0, 0x86, name, sig, 1)
    content += struct.pack("<HH", 3, 2)
    streams = [("#~", tables(rows, content)), ("#Strings", bytes(strings.data)), ("#US", b"\0"),
               ("#GUID", guid("11111111-2222-3333-4444-555555555555")), ("#Blob", bytes(blob.data))]
    return metadata("v4.0.30319", streams)


def pe_image(pdb):
    text_rva, text_ptr = 0x2000, 0x200
    sec = bytearray()
    md = assembly_metadata()
    cli_off = len(sec)
    sec += b"\0" * 72
    md_off = len(sec)
    sec += pad4(md)
    cv = b"RSDS" + PDB_GUID + struct.pack("<I", 1) + b"demo.pdb\0"
    cv_off = len(sec)
    sec += pad4(cv)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    emb = b"MPDB" + struct.pack("<I", len(pdb)) + comp.compress(pdb) + comp.flush()
    emb_off = len(sec)
    sec += pad4(emb)
    ck = b"SHA256\0" + bytes(32)
    ck_off = len(sec)
    sec += pad4(ck)
    dbg_off = len(sec)
    entries = [(PDB_STAMP, 0x0100, 0x504D, 2, cv, cv_off), (0, 0x0100, 0x0100, 17, emb, emb_off),
               (0, 1, 0, 19, ck, ck_off)]
    for stamp, major, minor, typ, data, off in entries:
        sec += struct.pack("<IIHHIIII", 0, stamp, major, minor, typ, len(data), text_rva + off,
                           text_ptr + off)
    dbg_size = 28 * len(entries)
    cli = struct.pack("<IHHII", 72, 2, 5, text_rva + md_off, len(md)) + struct.pack("<II", 1, 0x06000001)
    sec[cli_off:cli_off + len(cli)] = cli
    raw = pad4(bytes(sec)) + b"\0" * (-len(sec) % 0x200)
    dos = bytearray(0x40)
    dos[0:2] = b"MZ"
    dos[0x3C:0x40] = struct.pack("<I", 0x40)
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x14C, 1, 0x5785B542, 0, 0, 0xE0, 0x2102)
    opt = bytearray(0xE0)
    struct.pack_into("<H", opt, 0, 0x10B)
    struct.pack_into("<II", opt, 56, text_rva + 0x2000, 0x200)  # SizeOfImage, SizeOfHeaders
    struct.pack_into("<I", opt, 92, 16)
    struct.pack_into("<II", opt, 96 + 6 * 8, text_rva + dbg_off, dbg_size)
    struct.pack_into("<II", opt, 96 + 14 * 8, text_rva + cli_off, 72)
    sh = b".text\0\0\0" + struct.pack("<IIIIIIHHI", len(sec), text_rva, len(raw), text_ptr, 0, 0, 0, 0,
                                      0x60000020)
    head = bytes(dos) + coff + bytes(opt) + sh
    head += b"\0" * (text_ptr - len(head))
    return head + raw


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(os.path.join(out, "ppdb"), exist_ok=True)
    os.makedirs(os.path.join(out, "pe"), exist_ok=True)
    pdb = portable_pdb()
    with open(os.path.join(out, "ppdb", "synthetic.pdb.bin"), "wb") as f:
        f.write(pdb)
    with open(os.path.join(out, "ppdb", "enc-delta.pdb.bin"), "wb") as f:
        f.write(portable_pdb(enc_delta=True))
    with open(os.path.join(out, "pe", "synthetic.dll.bin"), "wb") as f:
        f.write(pe_image(pdb))


if __name__ == "__main__":
    main()
