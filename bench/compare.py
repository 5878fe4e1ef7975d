#!/usr/bin/env python3
"""Compares bench_pdb's answers with llvm-symbolizer's, address by address.

    compare.py RVAS OURS THEIRS [--sample N]

RVAS is the address list both were given (one per line); OURS and THEIRS are
in llvm-symbolizer's layout (--inlines: per frame a function line and a
"file:line:column" line, innermost first, a blank line after each address).
Columns are ignored (a native PDB has none).  With --sample N only every
(len/N)-th address is compared.  Prints the agreement rate (whole inline chain:
every frame's function, file and line), rates per aspect, and a few
disagreements.
"""
import argparse
import sys


def blocks(path):
    out, cur = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line == "":
                out.append(cur)
                cur = []
            else:
                cur.append(line)
    if cur:
        out.append(cur)
    frames = []
    for b in out:
        fr = []
        for i in range(0, len(b) - 1, 2):
            loc = b[i + 1].rsplit(":", 2)[0] if b[i + 1].count(":") >= 2 else b[i + 1]
            fr.append((b[i], loc))
        frames.append(fr)
    return frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rvas")
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--sample", type=int, default=0)
    a = ap.parse_args()
    rvas = [l.strip() for l in open(a.rvas) if l.strip()]
    ours, theirs = blocks(a.ours), blocks(a.theirs)
    if not (len(rvas) == len(ours) == len(theirs)):
        print(f"compare: counts differ: {len(rvas)} rvas, {len(ours)} ours, {len(theirs)} theirs")
        return 1
    idx = range(len(rvas))
    if a.sample and a.sample < len(rvas):
        step = len(rvas) / a.sample
        idx = [int(i * step) for i in range(a.sample)]
    n = full = func = chain = line = 0
    bad = []
    for i in idx:
        o, t = ours[i], theirs[i]
        n += 1
        full += o == t
        func += bool(o and t) and o[0][0] == t[0][0]
        chain += [f for f, _ in o] == [f for f, _ in t]
        line += bool(o and t) and o[0][1] == t[0][1]
        if o != t and len(bad) < 5:
            bad.append((rvas[i], o, t))
    pct = lambda k: f"{100.0 * k / n:.2f}%"
    print(f"agreement       {full}/{n} = {pct(full)} (whole inline chain: functions, files, lines)")
    print(f"  innermost function {pct(func)}, function chain {pct(chain)}, innermost file:line {pct(line)}")
    for rva, o, t in bad:
        print(f"  differs at {rva}:\n    ours   {o}\n    theirs {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
