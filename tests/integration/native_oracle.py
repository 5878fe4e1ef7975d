"""native_oracle.py - the native fixtures' expected answers for Python tests,
and the rule that judges an answer against them (the same rule as
fx_answer_ok() in tests/unit/fixtures.h; tests/fixtures/native/README.md says
why): every frame equal to llvm-symbolizer 19's, except where several line
entries share an address (crosscheck note "dup-line"), where the llvm-pdbutil
decoding is the right answer."""
import json
import os


def manifest(native_dir):
    """The manifest's rows as dicts keyed by the header's column names."""
    header, out = None, []
    for line in open(os.path.join(native_dir, "MANIFEST.tsv")):
        if line.startswith("# name"):
            header = line[2:].rstrip("\n").split("\t")
        if line.startswith("#") or not line.strip():
            continue
        out.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    return out


def rows(native_dir, fn):
    """[(start, end, frames, note)] of an expected or crosscheck file; [] when absent."""
    out = []
    p = os.path.join(native_dir, fn)
    if not fn or not os.path.exists(p):
        return out
    for ln in open(p):
        if ln.startswith("#") or not ln.strip():
            continue
        f = ln.rstrip("\n").split("\t")
        out.append((int(f[0], 16), int(f[1], 16), json.loads(f[2]), f[3] if len(f) > 3 else ""))
    return out


def alt_for(alt_rows, rva):
    """The crosscheck (frames, note) covering rva, or None."""
    return next(((a, n) for lo, hi, a, n in alt_rows if lo <= rva < hi), None)


def oracle_view(ans):
    # llvm-symbolizer says file "" and line 0 where there is no line information
    return [{"function": a.get("function"), "file": a.get("file") or None, "line": a.get("line") or None}
            for a in ans]


def sym_view(symbols):
    # llvm-symbolizer runs with --no-demangle: a public-symbol fallback is
    # compared by its decorated name
    return [{"function": s.get("mangled") or s.get("function"), "file": s.get("file"), "line": s.get("line")}
            for s in symbols]


def answer_ok(got, want, alt):
    """got: sym_view of our symbols; want: llvm-symbolizer's frames; alt: the
    crosscheck (frames, note) or None.  The answer equals llvm-symbolizer's,
    or the crosscheck's where its note is dup-line."""
    if alt is not None and alt[1] == "dup-line":
        return got == oracle_view(alt[0])
    return got == oracle_view(want)
