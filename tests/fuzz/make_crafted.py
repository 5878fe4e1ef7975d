#!/usr/bin/env python3
"""Writes crafted inputs that once made the readers allocate far more than the
file's size before refusing it (issue 13, "Memory"), as fuzz seeds and
regression inputs:

  corpus/pdb/crafted-bigstream.pdb   MSF whose DBI stream claims 1 GiB made of two
                                     blocks used over and over (the reader copied
                                     the stream into a 1 GiB buffer)
  corpus/pdb/crafted-sharedmod.pdb   2,000 modules that all name one module stream
                                     of 30,000 line entries (60 million lines)
  corpus/pdb/crafted-omap.pdb        20,000 line blocks, each covering the whole
                                     section, over 20,000 OMAP to-src blocks (one
                                     line piece per block and line: 400 million)
  corpus/pe/crafted-embedded.bin     PE whose embedded Portable PDB claims 512 MiB
                                     inflated from 20 deflated bytes

Every byte is laid out here from the specs (LLVM docs/PDB/MsfFile.rst,
DbiStream.rst, ModiStream.rst; PE/COFF; Portable PDB "embedded" debug entry);
tests/unit/test_crafted.c reads them with a counting budget and checks that the
reader's peak allocation stays proportional to the file.

Usage: make_crafted.py [OUT_DIR]   (default: tests/fuzz/corpus)
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_seeds  # noqa: E402  (the PE builder of the fuzz_pe seed)

MSF_MAGIC = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"


def msf(streams, bs):
    """streams: list of bytes, or (declared_size, [block numbers]) for a stream
    whose blocks are given (the data blocks listed in raw_blocks order).
    Returns the file: superblock, two free block maps, data, directory, map."""
    blocks = [b"", b"", b""]  # 0 superblock, 1 and 2 free block maps
    sizes, lists = [], []
    for s in streams:
        if isinstance(s, tuple):
            size, bl = s
            sizes.append(size)
            lists.append(bl)
            continue
        first = len(blocks)
        for off in range(0, len(s), bs):
            blocks.append(s[off:off + bs])
        sizes.append(len(s))
        lists.append(list(range(first, len(blocks))))
    directory = struct.pack("<I", len(streams)) + b"".join(struct.pack("<I", n) for n in sizes)
    for bl in lists:
        directory += b"".join(struct.pack("<I", b) for b in bl)
    dir_first = len(blocks)
    for off in range(0, len(directory), bs):
        blocks.append(directory[off:off + bs])
    dir_blocks = list(range(dir_first, len(blocks)))
    assert len(dir_blocks) <= bs // 4
    blocks.append(b"".join(struct.pack("<I", b) for b in dir_blocks))
    map_addr = len(blocks) - 1
    blocks[0] = MSF_MAGIC + struct.pack("<6I", bs, 1, len(blocks), len(directory), 0, map_addr)
    return b"".join(b + b"\0" * (bs - len(b)) for b in blocks)


def info_stream():
    # version VC70, signature, age, GUID, empty named stream map
    return struct.pack("<III", 20000404, 0x5EED, 1) + bytes(range(16)) + struct.pack("<6I", 0, 0, 0, 0, 0, 0)


def section_headers():
    # one .text section at rva 0x1000, 16 MiB, code
    return b".text\0\0\0" + struct.pack("<IIIIIIHHI", 0x1000000, 0x1000, 0x1000000, 0x400, 0, 0, 0, 0,
                                        0x60000020)


def dbi(modinfo=b"", dbg=()):
    """DBI header (DbiStream.rst) with a module info substream and an optional
    debug header (stream numbers, 0xFFFF for none)."""
    dbg_bytes = b"".join(struct.pack("<H", s) for s in dbg)
    hdr = struct.pack("<iII", -1, 19990903, 1)
    hdr += struct.pack("<HHHHHH", 0xFFFF, 0, 0xFFFF, 0, 0xFFFF, 0)  # gsi, build, psgsi, dll, symrec, rbld
    hdr += struct.pack("<6i", len(modinfo), 0, 0, 0, 0, 0)  # modi, sc, secmap, files, tsmap, mfc
    hdr += struct.pack("<iiHHI", len(dbg_bytes), 0, 0, 0x8664, 0)  # dbg, ec, flags, machine, pad
    assert len(hdr) == 64
    return hdr + modinfo + dbg_bytes


def modi(stream, sym_bytes, c13_bytes):
    """one module info record (64 fixed bytes, two names, aligned to 4)"""
    rec = struct.pack("<I", 0) + bytes(28) + struct.pack("<HH", 0, stream)
    rec += struct.pack("<III", sym_bytes, 0, c13_bytes) + bytes(16) + b"m\0o\0"
    return rec + b"\0" * (-len(rec) % 4)


def c13_lines(blocks, cb):
    """DEBUG_S_LINES subsection for segment 1: blocks = list of entry lists
    [(offset, line), ...], each block with file checksum offset 0"""
    body = struct.pack("<IHHI", 0, 1, 0, cb)
    for ents in blocks:
        body += struct.pack("<III", 0, len(ents), 12 + 8 * len(ents))
        body += b"".join(struct.pack("<II", o, 0x80000000 | ln) for o, ln in ents)
    return struct.pack("<II", 0xF2, len(body)) + body


def bigstream():
    bs = 8192
    # stream 3 (DBI) claims 1 GiB made of blocks 4 and 5 (streams 4 and 5:
    # the DBI header and zeros) used in turn, so it is not contiguous and the
    # reader had to copy it
    size = 1 << 30
    head = dbi()
    order = [4 if i % 2 == 0 else 5 for i in range(size // bs)]
    return msf([b"", info_stream(), b"", (size, order), head + bytes(bs - len(head)), bytes(bs)], bs)


def sharedmod():
    bs = 4096
    lines = c13_lines([[(i * 4, 1 + i % 1000) for i in range(30000)]], 30000 * 4)
    mod = struct.pack("<I", 4) + lines
    nmods = 2000
    modinfo = b"".join(modi(5, 4, len(lines)) for _ in range(nmods))
    dbg = [0xFFFF] * 5 + [4]
    return msf([b"", info_stream(), b"", dbi(modinfo, dbg), section_headers(), mod], bs)


def omap():
    bs = 4096
    nblocks = 20000
    lines = c13_lines([[(0, 7)] for _ in range(nblocks)], 0xFF0000)
    mod = struct.pack("<I", 4) + lines
    modinfo = modi(7, 4, len(lines))
    # to-src: image rva i*16 -> source 0x1000 + i*0x100 (20,000 one-entry blocks)
    to_src = b"".join(struct.pack("<II", 0x1000 + i * 16, 0x1000 + i * 0x100) for i in range(nblocks))
    from_src = struct.pack("<II", 0x1000, 0x1000)
    dbg = [0xFFFF, 0xFFFF, 0xFFFF, 5, 6, 4]
    return msf([b"", info_stream(), b"", dbi(modinfo, dbg), section_headers(), to_src, from_src, mod], bs)


def embedded():
    pdb = make_seeds.portable_pdb()
    pe = bytearray(make_seeds.pe_image(pdb))
    at = pe.find(b"MPDB")
    # claim 512 MiB - 1 inflated bytes for the same few compressed ones
    struct.pack_into("<I", pe, at + 4, (512 << 20) - 1)
    return bytes(pe)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "corpus")
    os.makedirs(os.path.join(out, "pdb"), exist_ok=True)
    os.makedirs(os.path.join(out, "pe"), exist_ok=True)
    for name, data in (("pdb/crafted-bigstream.pdb", bigstream()), ("pdb/crafted-sharedmod.pdb", sharedmod()),
                       ("pdb/crafted-omap.pdb", omap()), ("pe/crafted-embedded.bin", embedded())):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
