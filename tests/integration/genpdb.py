"""genpdb.py - native PDBs made on the spot by real tools, for tests that need
many distinct modules or a large one: clang (-gcodeview, MSVC target,
freestanding) compiles a generated C file once, llvm-objcopy makes renamed
copies of that object, and lld-link /debug links each module from the copies
plus a small object of its own (so every module has its own content, hence its
own PDB GUID).  Identities come from LLVM's readers (llvm-pdbutil dump
-summary), never from pdbsym.

    gen = GenPdb(tmpdir)            # GenPdb.missing() names absent tools
    base = gen.base(funcs=400, stmts=30)
    m = gen.module("m7", base, copies=1, tag=7)
    m["pdb"], m["exe"], m["debug_id"], m["symkey"], m["entry_rva"], m["entry_name"]

A module is made once per test run: kept in PDBSYM_TEST_FIXTURE_CACHE/genpdb
(scripts/test.sh; else the build folder), keyed by everything it is made of
(the generated sources, the copies, the flags, the tools), so the sanitizer
build's tests take the normal build's files; its identity is read from those
files by LLVM's tools as when it is made.  The base object is compiled only
when a module is not there yet.
"""
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading

LLVM = os.environ.get("PDBSYM_LLVM_BIN", "/usr/lib/llvm-19/bin")
CFLAGS = ["--target=x86_64-pc-windows-msvc", "-gcodeview", "-g", "-O0", "-ffreestanding",
          "-fno-builtin", "-fno-stack-protector", "-mno-stack-arg-probe"]


def _tool(name):
    p = os.path.join(LLVM, name)
    return p if os.path.exists(p) else shutil.which(name)


class GenPdb:
    def __init__(self, root):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.clang = shutil.which("clang")
        self.lld = shutil.which("lld-link")
        self.objcopy = _tool("llvm-objcopy")
        self.pdbutil = _tool("llvm-pdbutil")
        self.readobj = _tool("llvm-readobj")
        self._copies = {}
        self._bases = {}  # base obj path -> (source text, compiled?)
        cache = os.environ.get("PDBSYM_TEST_FIXTURE_CACHE") or os.environ.get("PDBSYM_BUILD_DIR")
        self.cache = os.path.join(cache, "genpdb") if cache else None
        self._lock = threading.Lock()

    def missing(self):
        names = {"clang": self.clang, "lld-link": self.lld, "llvm-objcopy": self.objcopy,
                 "llvm-pdbutil": self.pdbutil, "llvm-readobj": self.readobj}
        return [k for k, v in names.items() if not v]

    def _cc(self, src, obj):
        subprocess.run([self.clang] + CFLAGS + ["-c", src, "-o", obj], check=True,
                       capture_output=True)

    def base(self, funcs=400, stmts=30, seed=1):
        """An object with `funcs` functions fn<j> of `stmts` lines each."""
        rng = random.Random(seed)
        src = os.path.join(self.root, "base%d.c" % seed)
        out = ["typedef unsigned int u32;"]
        for j in range(funcs):
            out.append("u32 fn%d(u32 *p, u32 x) {" % j)
            out.append("  u32 a = x;")
            for _ in range(stmts):
                out.append("  a = a * %d + p[(a + %d) & 1023];" % (rng.randrange(3, 99), rng.randrange(1000)))
            out.append("  return a;")
            out.append("}")
        text = "\n".join(out) + "\n"
        with open(src, "w") as f:
            f.write(text)
        obj = src[:-2] + ".obj"
        self._bases[obj] = (text, False)
        self._copies[obj] = (funcs, {0: obj})
        return obj

    def _compiled(self, base):
        with self._lock:  # modules are made from a thread pool
            text, done = self._bases[base]
            if not done:
                self._cc(base[:-4] + ".c", base)
                self._bases[base] = (text, True)
        return base

    def _copy(self, base, k):
        """The base object with every fn<j> renamed c<k>_fn<j> (k > 0)."""
        funcs, have = self._copies[base]
        with self._lock:
            return self._copy_locked(base, k, funcs, have)

    def _copy_locked(self, base, k, funcs, have):
        if k not in have:
            m = base[:-4] + "_c%d.map" % k
            with open(m, "w") as f:
                for j in range(funcs):
                    f.write("fn%d c%d_fn%d\n" % (j, k, j))
            obj = base[:-4] + "_c%d.obj" % k
            subprocess.run([self.objcopy, "--redefine-syms=" + m, base, obj], check=True,
                           capture_output=True)
            have[k] = obj
        return have[k]

    def module(self, name, base, copies=1, tag=0):
        """Links name.exe and name.pdb from `copies` copies of base and an entry
        point of its own (entry_<tag>): made here, or taken from the cache."""
        entry = ("unsigned fn0(unsigned *p, unsigned x);\n"
                 "static unsigned buf[1024];\n"
                 "unsigned uniq_%d(unsigned x) { return x * %d + %d; }\n"
                 "unsigned entry_%d(void) {\n"
                 "  unsigned s = uniq_%d(%d);\n"
                 "  s += fn0(buf, s);\n"
                 "  return s;\n"
                 "}\n" % (tag, tag + 3, tag, tag, tag, tag))
        if not self.cache:
            d = os.path.join(self.root, name)
            self._make(d, name, base, copies, tag, entry)
            return self._identify(d, name, tag)
        key = hashlib.sha256(json.dumps([name, self._bases[base][0], copies, tag, entry, CFLAGS,
                                         self.clang, self.lld, self.objcopy]).encode()).hexdigest()[:20]
        d = os.path.join(self.cache, key)
        if not os.path.exists(os.path.join(d, ".done")):
            os.makedirs(self.cache, exist_ok=True)
            work = tempfile.mkdtemp(prefix=".make-", dir=self.cache)
            self._make(work, name, base, copies, tag, entry)
            open(os.path.join(work, ".done"), "w").close()
            try:
                os.rename(work, d)  # the first of two tests making it at once wins
            except OSError:
                shutil.rmtree(work, ignore_errors=True)
        return self._identify(d, name, tag)

    def _make(self, d, name, base, copies, tag, entry):
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "entry.c")
        with open(src, "w") as f:
            f.write(entry)
        eobj = os.path.join(d, "entry.obj")
        self._cc(src, eobj)
        self._compiled(base)
        objs = [eobj] + [self._copy(base, k) for k in range(copies)]
        exe, pdb = os.path.join(d, name + ".exe"), os.path.join(d, name + ".pdb")
        subprocess.run([self.lld, "/nologo", "/debug", "/opt:noref", "/nodefaultlib",
                        "/entry:entry_%d" % tag, "/subsystem:console", "/out:" + exe, "/pdb:" + pdb]
                       + objs, check=True, capture_output=True)

    def _identify(self, d, name, tag):
        """name.exe and name.pdb in d, their identity as LLVM's tools read it."""
        exe, pdb = os.path.join(d, name + ".exe"), os.path.join(d, name + ".pdb")
        summ = subprocess.run([self.pdbutil, "dump", "-summary", pdb], check=True,
                              capture_output=True, text=True).stdout
        guid = re.search(r"GUID: \{([0-9A-Fa-f-]+)\}", summ).group(1).upper()
        age = int(re.search(r"Age: (\d+)", summ).group(1))
        hdr = subprocess.run([self.readobj, "--file-headers", exe], check=True,
                             capture_output=True, text=True).stdout
        entry = int(re.search(r"AddressOfEntryPoint: (0x[0-9A-Fa-f]+)", hdr).group(1), 16)
        return {"name": name, "exe": exe, "pdb": pdb, "debug_file": name + ".pdb",
                "guid": guid, "age": age, "debug_id": "%s-%x" % (guid.lower(), age),
                "symkey": guid.replace("-", "") + "%X" % age, "entry_rva": entry,
                "entry_name": "entry_%d" % tag, "pdb_bytes": os.path.getsize(pdb)}


def symbolize(exe, rvas):
    """llvm-symbolizer 19's function names for RVAs of exe (innermost first)."""
    return symbolize_pairs([(exe, r) for r in rvas])


def symbolize_pairs(pairs):
    """llvm-symbolizer 19's function names for (exe, RVA) pairs (innermost
    first), one process for them all (it loads each module once)."""
    tool = _tool("llvm-symbolizer")
    inp = "".join("CODE %s 0x%x\n" % (exe, r) for exe, r in pairs)
    out = subprocess.run([tool, "--relative-address", "--functions=linkage"], input=inp,
                         capture_output=True, text=True, check=True).stdout
    names, cur = [], []
    lines = out.split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "":
            if cur:
                names.append(cur)
                cur = []
            i += 1
            continue
        cur.append(lines[i])
        i += 2  # function, then file:line:column
    if cur:
        names.append(cur)
    return names
