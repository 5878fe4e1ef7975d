#!/usr/bin/env python3
"""cabmake.py - writes Microsoft Cabinet files ([MS-CAB]) for the tests.

Written from the format description, independently of libmspack, so that
cabinets made here check our extractor (and cabextract agrees with both).
One folder per cabinet, MSZIP (each 32 KiB block a "CK" + a complete raw
deflate stream) or stored; CFDATA checksums are computed.

    python3 cabmake.py OUT.pd_ FILE [FILE...] [--stored] [--name NAME]
"""
import struct
import sys
import zlib


def _checksum(data, seed=0):
    # [MS-CAB] 2.5: XOR of little-endian 32-bit words; the 1-3 byte tail is
    # folded in big-endian order.
    csum = seed
    n = len(data) // 4
    for (w,) in struct.iter_unpack("<I", data[: n * 4]):
        csum ^= w
    tail = data[n * 4:]
    ul = 0
    if len(tail) == 3:
        ul = (tail[0] << 16) | (tail[1] << 8) | tail[2]
    elif len(tail) == 2:
        ul = (tail[0] << 8) | tail[1]
    elif len(tail) == 1:
        ul = tail[0]
    return (csum ^ ul) & 0xFFFFFFFF


def make_cab(members, compress="mszip"):
    """members: list of (name, bytes). Returns the cabinet bytes."""
    blob = b"".join(data for _, data in members)
    blocks = []
    for off in range(0, len(blob), 32768):
        raw = blob[off:off + 32768]
        if compress == "mszip":
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            payload = b"CK" + c.compress(raw) + c.flush()
        else:
            payload = raw
        blocks.append((payload, len(raw)))
    if not blocks:
        blocks.append((b"CK\x03\x00" if compress == "mszip" else b"", 0))
    files = b""
    ofs = 0
    for name, data in members:
        files += struct.pack("<IIHHHH", len(data), ofs, 0, 0x5921, 0x6000, 0x20)
        files += name.encode() + b"\0"
        ofs += len(data)
    header_len = 36
    folder_len = 8
    coff_files = header_len + folder_len
    coff_data = coff_files + len(files)
    data = b""
    for payload, ulen in blocks:
        tail = struct.pack("<HH", len(payload), ulen)
        csum = _checksum(tail, _checksum(payload))
        data += struct.pack("<I", csum) + tail + payload
    total = coff_data + len(data)
    ctype = 1 if compress == "mszip" else 0
    hdr = struct.pack("<4sIIIIIBBHHHHH", b"MSCF", 0, total, 0, coff_files, 0, 3, 1, 1,
                      len(members), 0, 0x1234, 0)
    folder = struct.pack("<IHH", coff_data, len(blocks), ctype)
    return hdr + folder + files + data


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    compress = "none" if "--stored" in argv else "mszip"
    name = None
    if "--name" in argv:
        name = argv[argv.index("--name") + 1]
        args.remove(name)
    out, inputs = args[0], args[1:]
    members = []
    for p in inputs:
        with open(p, "rb") as f:
            members.append((name or p.replace("\\", "/").split("/")[-1], f.read()))
    with open(out, "wb") as f:
        f.write(make_cab(members, compress))


if __name__ == "__main__":
    main(sys.argv)
