#!/usr/bin/env python3
"""soak.py - issue 13's soak benchmark: the real `pdbsym serve` under mixed
traffic for a set time, its resources sampled, printed as a table.

    bench/run-soak.sh [--minutes 30] [--cap 4M] [--copies N] [--keep]
    PDBSYM_BIN=build/pdbsym python3 bench/soak.py [same options]

What runs (everything on 127.0.0.1, nothing mocked):
- `pdbsym serve` (build/pdbsym, or $PDBSYM_BIN) with a small cache cap
  (`cache_max_bytes`, --cap), a small hot set, short deadlines and negative
  TTLs (so the half hour sees many of their cycles), started by the
  integration tests' pdbsym_server.Server, with a soft RLIMIT_NOFILE of
  --fd-limit (1024);
- three symbol servers, tests/symserver.py (pdbsym_server.SymServer), in
  symstore layout:
    good   answers at once; holds the fixtures (tests/fixtures/native and
           managed), most of ../shared/corpus's PDBs when it is there, and
           copies of the native PDBs with a new GUID written into their PDB
           info stream (so there are many more distinct modules than the cap
           holds; the copies of the fixtures answer as the fixtures do); a
           quarter of the copies only as `.pd_` cabinets (tests/cabmake.py);
    slow   every answer after 0.2 s (404s too), its own PDBs after 2 s, some
           of them dripped at 20 kB/s (the large ones past download_timeout);
    faulty 500 forever, 503 twice, a reset, a truncated body, an HTML portal
           page, another module's PDB (wrong GUID), a stall past
           download_first_byte_timeout, gzip and chunked bodies; every 4
           minutes a burst of 500s on every path (the source backs off);
- the traffic, from threads of this process:
    good   batches of native and managed frames (fixtures, copies, corpus),
           some with code_file for managed names, some unknown modules, a
           request timeout of 0 to 10 s, now and then a client that hangs up
           before the answer; frames of the fixtures and their copies are
           compared with their oracles (llvm-symbolizer 19's answers in
           tests/fixtures/native/*.expected.tsv, DiaSymReader's and
           System.Reflection.Metadata's sequence points for managed ones);
    v5     /symbolicate/v5 bodies of native fixtures, copies and an unknown
           module, checked against the same oracle;
    unknown  requests of 20 to 120 modules no source has;
    bad    bad JSON, bad fields, too many frames, a body over
           max_body_bytes, wrong methods and paths, text/plain, garbage
           request lines, /metrics, /ready, HEAD /health;
    slow   connections that drip their headers or body a byte at a time, or
           read a large answer slowly; idle connections that send nothing;
- the attackers of issue 27 (--no-attackers leaves them out):
    headers  4 connections sending only headers declaring an 8 MiB body (or
           max_body_bytes), 64 declaring 100 bytes, each replaced as soon as
           it is closed;
    flood  every 20 s a request naming max_modules modules no source has;
    garbage  2 clients posting /traces whose body is no trace (64 MiB of
           zeros declared), dripping a byte a second after its first 64 KiB,
           reconnecting when answered; beside them a trace client posting a
           small valid trace every 30 s, which must be admitted (no 503)
           within 10 s and answered with every sample;
    hostile answers  the faulty server also has modules whose answer declares
           a fifth of the cap and sends 1 KiB, and modules whose body never ends;
  and every 30 s the cache's module count (`pdbsym cache list`), so that a
  cache emptied by them shows (a count of 0 after the warm-up is a bound
  passed).

Every 0.5 s the service's RSS, thread count, open descriptors (/proc/PID)
and the cache folder's bytes (database, WAL, -shm, download area) are read,
GET /health is timed every second, /metrics read every 10 s.  Each row of the
table is one 10 s interval: the largest RSS, threads, fds and folder bytes of
the interval, its slowest /health, the requests answered as expected (ok) or
not (err: a transport error, an unexpected status, a frame that differs from
its oracle), the downloads settled (from /metrics).  Then a verdict per
resource: after the warm-up (the first sixth of the run, at most 2 min) the
largest value of the last third against the largest of the first third,
"flat" when within the stated tolerance, else "growing"; the configured
bounds beside them.

Exit status: 0; 1 when a bound was passed (threads above what the settings
allow, descriptors at RLIMIT_NOFILE, the cache folder above the cap plus one
module in flight), `pdbsym cache verify` fails after the run, or the service
does not exit 0 on SIGTERM; 2 when the service died.  No timing is asserted:
the figures are printed.  Scratch files go to a temporary folder, removed at
the end (--keep keeps it, with the service's log).
"""
import argparse
import gzip
import http.client
import json
import os
import random
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
os.environ.setdefault("PDBSYM_BIN", os.path.join(root, "build", "pdbsym"))
os.environ.setdefault("PDBSYM_SOURCE_DIR", root)
sys.path.insert(0, os.path.join(root, "tests", "integration"))
sys.path.insert(0, os.path.join(root, "tests"))
import cabmake  # noqa: E402
from native_oracle import alt_for, manifest, oracle_view, rows, sym_view  # noqa: E402
from native_oracle import answer_ok  # noqa: E402
from pdbsym_server import Server, SymServer, folder_bytes, threads_of  # noqa: E402
from attacklib import Holder  # noqa: E402
sys.path.insert(0, os.path.join(root, "tests", "fuzz"))
import make_nettrace_seeds as nt  # noqa: E402

BIN = os.environ["PDBSYM_BIN"]
NATIVE = os.path.join(root, "tests", "fixtures", "native")
MANAGED = os.path.join(root, "tests", "fixtures", "managed")
CORPUS = os.path.join(root, "..", "shared", "corpus")
MiB = 1048576.0


def size_arg(s):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", s)
    if not m:
        raise argparse.ArgumentTypeError("a size: digits and an optional k, M or G")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


ap = argparse.ArgumentParser(description="issue 13's soak benchmark (see the file's header)")
ap.add_argument("--minutes", type=float, default=30.0, help="how long the traffic runs (default 30)")
ap.add_argument("--cap", type=size_arg, default=4 << 20, help="cache_max_bytes (default 4M)")
ap.add_argument("--copies", type=int, default=None,
                help="GUID-changed copies per native PDB (default: enough for 10x the cap)")
ap.add_argument("--fd-limit", type=int, default=1024, help="the service's RLIMIT_NOFILE (default 1024)")
ap.add_argument("--idle", type=int, default=6, help="idle connections held at once (default 6)")
ap.add_argument("--slow", type=int, default=4, help="slow connections at once (default 4)")
ap.add_argument("--seed", type=int, default=13)
ap.add_argument("--keep", action="store_true", help="keep the scratch folder (cache, log)")
ap.add_argument("--log-level", default="warn", help="the service's log_level (default warn)")
ap.add_argument("--no-attackers", action="store_true", help="leave out issue 27's attackers")
args = ap.parse_args()
if not os.path.exists(BIN):
    sys.exit("soak: %s missing (scripts/build.sh build, or set PDBSYM_BIN)" % BIN)
rnd = random.Random(args.seed)
t_start = time.monotonic()
stop = threading.Event()


def log(msg):
    print("[%6.1fs] %s" % (time.monotonic() - t_start, msg), flush=True)


# ---------------------------------------------------------------- the modules

class Mod:
    """A module the symbol servers hold (or not), how to ask for it, and what
    its frames must answer."""

    def __init__(self, name, key, debug_id, fmt, data, kind):
        self.name, self.key, self.debug_id, self.fmt, self.data, self.kind = name, key, debug_id, fmt, data, kind
        self.home = "good"  # good, slow, drip, fault:<how>
        self.native = []    # [(rva, llvm-symbolizer's frames, crosscheck)]: oracle-checked frames
        self.managed = []   # [(token, il, sequence point)]
        self.code = None    # (code_file, code_id, bytes)
        self.cab = False
        self.managed_pdb = fmt == "portable" or kind in ("corpus-managed", "managed-fixture")
        self.pub = False    # publics-only: v5 names it its own way
        self.size = len(data) if data else 0

    def entry(self):
        e = {"debug_file": self.name, "debug_id": self.debug_id}
        if self.fmt:
            e["format"] = self.fmt
        if self.code:
            e["code_file"], e["code_id"] = self.code[0], self.code[1]
        return e

    def path(self):
        return "%s/%s/%s" % (self.name, self.key, self.name[:-1] + "_" if self.cab else self.name)

    def frames(self, mi, n):
        """Up to n frames of this module (index mi) and their checks."""
        out = []
        if self.native:
            for rva, want, alt in rnd.sample(self.native, min(n, len(self.native))):
                out.append(({"module": mi, "rva": "0x%x" % rva}, ("native", want, alt)))
        elif self.managed:
            for tok, il, sp in rnd.sample(self.managed, min(n, len(self.managed))):
                out.append(({"module": mi, "token": tok, "il_offset": il}, ("managed", sp)))
        elif self.managed_pdb:
            for k in range(min(n, 3)):
                out.append(({"module": mi, "token": "0x0600%04x" % (k + 1), "il_offset": 0}, None))
        else:
            for rva in (0x1000, 0x1234, 0x2040)[:n]:
                out.append(({"module": mi, "rva": "0x%x" % rva}, None))
        return out


def guid_text(raw16):
    """The symstore spelling of a GUID's 16 bytes (Data1-3 little-endian)."""
    d1, d2, d3 = struct.unpack_from("<IHH", raw16)
    return "%08X%04X%04X%s" % (d1, d2, d3, raw16[8:].hex().upper())


def with_new_guid(pdb, raw16):
    """A copy of an MSF 7.00 PDB with another GUID in its PDB info stream
    (stream 1: version, signature, age, then the GUID at offset 12), found
    through the superblock and the stream directory; None for other files."""
    magic = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"
    if not pdb.startswith(magic) or len(pdb) < 56:
        return None
    bs, _, nblocks, dir_bytes, _, map_block = struct.unpack_from("<6I", pdb, 32)
    if bs not in (512, 1024, 2048, 4096, 8192) or nblocks * bs > len(pdb):
        return None
    ndir = (dir_bytes + bs - 1) // bs
    dir_blocks = struct.unpack_from("<%dI" % ndir, pdb, map_block * bs)
    d = b"".join(pdb[b * bs:(b + 1) * bs] for b in dir_blocks)[:dir_bytes]
    nstreams = struct.unpack_from("<I", d)[0]
    sizes = struct.unpack_from("<%dI" % nstreams, d, 4)
    if nstreams < 2 or sizes[1] < 28:
        return None
    first0 = (sizes[0] + bs - 1) // bs if sizes[0] != 0xFFFFFFFF else 0
    blk = struct.unpack_from("<I", d, 4 + 4 * nstreams + 4 * first0)[0]
    out = bytearray(pdb)
    out[blk * bs + 12:blk * bs + 28] = raw16
    return bytes(out)


def pe_code_id(b):
    pe = struct.unpack_from("<I", b, 0x3C)[0]
    return "%08X%X" % (struct.unpack_from("<I", b, pe + 8)[0], struct.unpack_from("<I", b, pe + 24 + 56)[0])


def load_modules():
    mods = []
    # native fixtures, their frames checked against llvm-symbolizer 19
    for col in manifest(NATIVE):
        name = col["cv_path"].replace("\\", "/").rsplit("/", 1)[-1]
        m = Mod(name, col["symkey"], col["symkey"], None, gzip.open(os.path.join(NATIVE, col["pdb"])).read(),
                "native-fixture")
        alt = rows(NATIVE, col.get("crosscheck"))
        for lo, hi, ans, _ in rows(NATIVE, col["expected"]):
            for rva in sorted({lo, (lo + hi - 1) // 2, hi - 1}):
                m.native.append((rva, ans, alt_for(alt, rva)))
        m.pub = col.get("variant") == "pub"
        mods.append(m)
    # managed fixtures: sequence points from DiaSymReader (Windows PDB) and
    # System.Reflection.Metadata (Portable PDB); the DLL for method names
    for build, fmt, oracle in (("windows-debug", "windows", "Demo.pdb.winpdb.jsonl"),
                               ("windows-release", "windows", "Demo.pdb.winpdb.jsonl"),
                               ("portable-debug", "portable", "Demo.pdb.srm.jsonl"),
                               ("portable-release", "portable", "Demo.pdb.srm.jsonl")):
        d = os.path.join(MANAGED, build)
        if not os.path.exists(os.path.join(d, oracle)):
            continue
        lines = [json.loads(x) for x in open(os.path.join(d, oracle))]
        dll_srm = os.path.join(d, "Demo.dll.srm.jsonl")  # the portable oracles carry the DLL's entries too
        srm = [json.loads(x) for x in open(dll_srm)] if os.path.exists(dll_srm) else lines
        cv = [x for x in srm if x.get("kind") == "debugdir" and x.get("type") == "CodeView"][0]
        key = cv["guid"].replace("-", "").upper() + ("%X" % cv["age"] if fmt == "windows" else "FFFFFFFF")
        m = Mod("Demo.pdb", key, "%s-%d" % (cv["guid"], cv["age"]), fmt,
                open(os.path.join(d, "Demo.pdb"), "rb").read(), "managed-fixture")
        dll = open(os.path.join(d, "Demo.dll"), "rb").read()
        m.code = ("Demo.dll", pe_code_id(dll), dll)
        firsts = {}
        for sp in lines:
            if sp.get("kind") == "sp" and not sp["hidden"]:
                firsts.setdefault((sp["token"], sp["il"]), sp)
        m.managed = [(t, il, sp) for (t, il), sp in firsts.items()]
        mods.append(m)
    # the corpus's PDBs (their answers are not checked: only their statuses)
    corpus = []
    if os.path.exists(os.path.join(CORPUS, "MANIFEST.tsv")):
        head = None
        for ln in open(os.path.join(CORPUS, "MANIFEST.tsv")):
            f = ln.rstrip("\n").split("\t")
            if head is None:
                head = f
                continue
            col = dict(zip(head, f))
            p, kind, ids = col["path"], col["kind"], col.get("ids", "")
            if not p.endswith(".pdb") or not os.path.exists(os.path.join(CORPUS, p)):
                continue
            name = os.path.basename(p)
            w = re.match(r"GUID ([0-9A-F-]{36}) age \d+ \(DBI age (\d+)\)", ids)
            pp = re.match(r"PDB id ([0-9A-F-]{36}) stamp", ids)
            if kind in ("windows-native-pdb", "windows-managed-pdb") and w:
                key = w.group(1).replace("-", "") + "%X" % int(w.group(2))
                m = Mod(name, key, key, "windows", None, "corpus-managed" if "managed" in kind else "corpus-native")
            elif kind == "portable-pdb" and pp:
                m = Mod(name, pp.group(1).replace("-", "") + "FFFFFFFF", pp.group(1) + "-1", "portable", None,
                        "corpus-portable")
            else:
                continue
            m.data = open(os.path.join(CORPUS, p), "rb").read()
            corpus.append(m)
    seen, out = set(), []
    for m in mods + corpus:
        k = (m.name.lower(), m.key)
        if k not in seen:
            seen.add(k)
            out.append(m)
    return out


def copyable(m):
    return m.kind in ("native-fixture", "corpus-native") and len(m.data) <= 2 << 20 and \
        with_new_guid(m.data, bytes(16)) is not None


def make_copies(originals, n):
    """n copies of each native MSF 7.00 PDB (up to 2 MiB), each with a GUID of its own."""
    out = []
    for m in originals:
        if not copyable(m):
            continue
        for i in range(n):
            raw = bytes(rnd.getrandbits(8) for _ in range(16))
            data = with_new_guid(m.data, raw)
            age = m.key[32:]
            c = Mod("c%d-%s" % (i, m.name), guid_text(raw) + age, guid_text(raw) + age, "windows", data, "copy")
            c.native, c.pub = m.native, m.pub
            out.append(c)
    return out


# ---------------------------------------------------------------- the stores

FAULTS = ["500", "503x2", "reset", "truncate", "portal", "wrong", "stall", "gzip", "chunked", "lie", "endless"]


def fault_rules(mods):
    rules = {}
    for m in mods:
        if not m.home.startswith("fault:"):
            continue
        how, p = m.home[6:], "/" + m.path()
        rules[p] = {"500": {"status": 500}, "503x2": {"status": 503, "times": 2},
                    "reset": {"reset": True, "times": 1}, "truncate": {"truncate": 1000, "times": 1},
                    "portal": {"content_type": "text/html"}, "stall": {"delay": 8},
                    "gzip": {"gzip": True}, "chunked": {"chunked": True},
                    "lie": {"zeros": args.cap // 5, "truncate": 1024}, "endless": {"endless": True}}.get(how)
        if rules[p] is None:
            del rules[p]
    return rules


def setup_stores(tmp, mods, wrong):
    ss = {}
    for n in ("good", "slow", "fault"):
        os.makedirs(os.path.join(tmp, n))
        ss[n] = SymServer(os.path.join(tmp, n))
    for m in mods:
        where = {"good": "good", "slow": "slow", "drip": "slow"}.get(m.home, "fault")
        if m.home == "fault:portal":
            data = b"<!DOCTYPE html><html><body>Please log in to the hotel network</body></html>\n"
        elif m.home == "fault:wrong":
            data = wrong  # another module's PDB: its GUID is not this one's
        else:
            data = m.data
        if m.cab:
            data = cabmake.make_cab([(m.name, data)])
        ss[where].put(m.path(), data)
        if m.code:
            ss[where].put("%s/%s/%s" % (m.code[0], m.code[1], m.code[0]), m.code[2])
    slow = {"*": {"delay": 0.2}}
    for m in mods:
        if m.home == "slow":
            slow["/" + m.path()] = {"delay": 2.0}
        elif m.home == "drip":
            slow["/" + m.path()] = {"drip": 20000, "chunk": 2048}
    ss["slow"].control(slow)
    ss["fault"].control(fault_rules(mods))
    return ss


# ---------------------------------------------------------------- counting

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = self.err = 0
        self.by = {}       # kind -> [ok, err]
        self.samples = {}  # error text -> count
        self.notes = {}    # counters of things that are not errors

    def add(self, kind, good, why=None):
        with self.lock:
            if good:
                self.ok += 1
            else:
                self.err += 1
                w = (why or "?")[:200]
                self.samples[w] = self.samples.get(w, 0) + 1
            self.by.setdefault(kind, [0, 0])[0 if good else 1] += 1

    def note(self, what, n=1):
        with self.lock:
            self.notes[what] = self.notes.get(what, 0) + n


stats = Stats()


def post(port, path, body, timeout, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", path, body=body if isinstance(body, bytes) else json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


ALLOWED = {  # module statuses each home may answer
    "good": {"found", "pending"},
    "slow": {"found", "pending", "fetch_error"},
    "drip": {"found", "pending", "fetch_error"},
    "unknown": {"missing", "pending", "fetch_error"},
}
FAULT_ALLOWED = {"found", "pending", "fetch_error", "malformed", "missing"}


def allowed(m, big):
    if m is None:
        return ALLOWED["unknown"]
    if m.home.startswith("fault:"):
        return FAULT_ALLOWED
    a = set(ALLOWED[m.home])
    if m.kind.startswith("corpus"):
        a |= {"malformed"}    # some corpus files are odd on purpose (see its README)
    if m.size > big:
        a |= {"fetch_error"}  # larger than its share of the cache cap: never downloaded
    return a


def check_symbolicate(mods_in, checks, st, body, big):
    """None when the answer is what these modules and frames must answer, else why not."""
    if st == 503:
        stats.note("503 busy")
        return None
    if st != 200:
        return "HTTP %d: %s" % (st, body[:120])
    j = json.loads(body)
    if len(j.get("modules", [])) != len(mods_in) or len(j.get("frames", [])) != len(checks):
        return "answer has %d modules, %d frames" % (len(j.get("modules", [])), len(j.get("frames", [])))
    for m, got in zip(mods_in, j["modules"]):
        if got["status"] not in allowed(m, big):
            return "module %s (%s, %s) answered %s: %s" % (
                m.name if m else "unknown", m.home if m else "-", m.kind if m else "-", got["status"],
                (got.get("error") or "")[:120])
        stats.note("module " + got["status"])
    for (mi, chk), got in zip(checks, j["frames"]):
        if chk is None or j["modules"][mi]["status"] != "found":
            continue
        if chk[0] == "native":
            if got["status"] != "ok" or not answer_ok(sym_view(got["symbols"]), chk[1], chk[2]):
                return "frame %s of %s: %s, want %s" % (got.get("rva"), mods_in[mi].name,
                                                       json.dumps(got)[:200], json.dumps(chk[1])[:120])
        else:
            sp = chk[1]
            s = (got.get("symbols") or [{}])[0]
            if got["status"] != "ok" or (s.get("file"), s.get("line"), s.get("column")) != (sp["doc"], sp["sl"], sp["sc"]):
                return "managed frame %s+%s of %s: %s, want %s:%s:%s" % (
                    sp["token"], sp["il"], mods_in[mi].name, json.dumps(got)[:200], sp["doc"], sp["sl"], sp["sc"])
        stats.note("frames checked")
    return None


# ---------------------------------------------------------------- traffic

def unknown_entry():
    g = "%032X" % rnd.getrandbits(128)
    return {"debug_file": "u%s.pdb" % g[:8].lower(), "debug_id": g + "1", "format": "windows"}


def good_client(port, hot, pool, big):
    conn = None
    while not stop.is_set():
        picks = rnd.sample(hot, rnd.randint(1, 2)) + rnd.sample(pool, rnd.randint(2, 7))
        if rnd.random() < 0.2:
            picks.append(None)
        entries, frames, checks = [], [], []
        for m in picks:
            mi = len(entries)
            entries.append(m.entry() if m else unknown_entry())
            for fr, chk in (m.frames(mi, rnd.randint(3, 12)) if m else [({"module": mi, "rva": "0x1000"}, None)]):
                frames.append(fr)
                checks.append((mi, chk))
        timeout = rnd.choice([0, 0, 1, 3, 10])
        body = json.dumps({"modules": entries, "frames": frames, "timeout": timeout}).encode()
        hang_up = rnd.random() < 0.04 and timeout >= 3
        try:
            if hang_up:  # a client that gives up before the answer
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
                try:
                    c.request("POST", "/symbolicate", body=body, headers={"Content-Type": "application/json"})
                    c.getresponse().read()
                    stats.add("good", True)
                except socket.timeout:
                    stats.note("client hung up")
                    stats.add("good", True)
                finally:
                    c.close()
                stop.wait(0.2)
                continue
            if conn is None or rnd.random() < 0.3:
                if conn:
                    conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout + 30)
            conn.request("POST", "/symbolicate", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            why = check_symbolicate(picks, checks, r.status, data, big)
            stats.add("good", why is None, why)
        except (OSError, http.client.HTTPException) as e:
            stats.add("good", False, "good: %s" % e.__class__.__name__ + ": " + str(e))
            if conn:
                conn.close()
            conn = None
        stop.wait(0.2)
    if conn:
        conn.close()


def v5_client(port, natives, big):
    while not stop.is_set():
        jobs, want = [], []
        for _ in range(rnd.randint(1, 3)):
            mm = rnd.sample(natives, rnd.randint(1, 2))
            stacks, chk = [], []
            for mi, m in enumerate(mm):
                for rva, w, alt in rnd.sample(m.native, min(8, len(m.native))):
                    stacks.append([mi, rva])
                    chk.append((m, w, alt))
            u = unknown_entry()
            stacks.append([len(mm), 0x1000])
            chk.append((None, None, None))
            jobs.append({"memoryMap": [[m.name, m.debug_id] for m in mm] + [[u["debug_file"], u["debug_id"]]],
                         "stacks": [stacks]})
            want.append((mm, chk))
        try:
            st, _, data = post(port, "/symbolicate/v5", {"jobs": jobs}, 60)
            why = None
            if st == 503:
                stats.note("503 busy")
            elif st != 200:
                why = "v5 HTTP %d: %s" % (st, data[:120])
            else:
                res = json.loads(data)["results"]
                for (mm, chk), r in zip(want, res):
                    found = r.get("found_modules", {})
                    for (m, w, alt), fr in zip(chk, r["stacks"][0]):
                        if m is None or m.pub or not found.get("%s/%s" % (m.name, m.debug_id)):
                            continue
                        if alt is not None and alt[1] == "dup-line":
                            w = alt[0]
                        chain = [{"function": x.get("function"), "file": x.get("file"), "line": x.get("line")}
                                 for x in fr.get("inlines", [])]
                        chain.append({"function": fr.get("function"), "file": fr.get("file"), "line": fr.get("line")})
                        if chain != oracle_view(w):
                            why = "v5 frame of %s: %s, want %s" % (m.name, json.dumps(fr)[:200], json.dumps(w)[:120])
                            break
                        stats.note("frames checked")
            stats.add("v5", why is None, why)
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            stats.add("v5", False, "v5: %s: %s" % (e.__class__.__name__, e))
        stop.wait(1.5)


def unknown_client(port):
    while not stop.is_set():
        n = rnd.randint(20, 120)
        entries = [unknown_entry() for _ in range(n)]
        body = {"modules": entries, "frames": [{"module": i, "rva": "0x1000"} for i in range(n)],
                "timeout": rnd.choice([0, 2])}
        try:
            st, _, data = post(port, "/symbolicate", body, 40)
            why = check_symbolicate([None] * n, [(i, None) for i in range(n)], st, data, 0)
            stats.add("unknown", why is None, why)
        except (OSError, http.client.HTTPException) as e:
            stats.add("unknown", False, "unknown: %s: %s" % (e.__class__.__name__, e))
        stop.wait(4)


MOD0 = {"debug_file": "demo.pdb", "debug_id": "3773E3530B2E493882ECA7324B16C2D91"}


def raw_exchange(port, data, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def bad_client(port, max_frames, max_body):
    cases = [
        ("bad json", lambda: post(port, "/symbolicate", b"{not json", 10), {400}),
        ("bad field", lambda: post(port, "/symbolicate", {"modules": [MOD0], "frames": [{"module": 0, "rva": True}]},
                                   10), {400}),
        ("too many frames", lambda: post(port, "/symbolicate", {"modules": [MOD0], "frames": [
            {"module": 0, "rva": i} for i in range(max_frames + 1)], "timeout": 0}, 10), {400}),
        ("body too big", lambda: post(port, "/symbolicate", b" " * (max_body + 4096), 10), {413}),
        ("bad debug_id", lambda: post(port, "/symbolicate", {"modules": [{"debug_file": "a.pdb", "debug_id": "xyz"}],
                                                             "frames": [{"module": 0, "rva": 1}]}, 10), {200}),
        ("bad v5", lambda: post(port, "/symbolicate/v5", {"jobs": 5}, 10), {400}),
        ("text/plain", lambda: post(port, "/symbolicate", {"modules": [MOD0], "frames": [{"module": 0, "rva": 1}],
                                                           "timeout": 0}, 10, {"Content-Type": "text/plain"}),
         {200, 415}),
        ("no route", lambda: get(port, "GET", "/nope"), {404}),
        ("wrong method", lambda: get(port, "DELETE", "/symbolicate"), {405}),
        ("unknown /modules", lambda: get(port, "GET", "/modules/nowhere.pdb/%032X1" % rnd.getrandbits(128)), {404}),
        ("metrics", lambda: get(port, "GET", "/metrics"), {200}),
        ("ready", lambda: get(port, "GET", "/ready"), {200}),
        ("head health", lambda: get(port, "HEAD", "/health"), {200}),
        ("garbage", lambda: (garbage(port), {}, b""), {0, 400, 505}),
    ]
    while not stop.is_set():
        name, fn, codes = rnd.choice(cases)
        try:
            st, _, data = fn()
            ok = st in codes or (st == 503 and name in ("too many frames", "bad debug_id", "text/plain"))
            stats.add("bad", ok, None if ok else "bad request %s: HTTP %d %s" % (name, st, data[:100]))
        except (ConnectionResetError, BrokenPipeError) as e:
            # a body over max_body_bytes may be refused before it is all sent
            ok = name == "body too big"
            stats.add("bad", ok, None if ok else "bad request %s: %s" % (name, e))
        except (OSError, http.client.HTTPException) as e:
            stats.add("bad", False, "bad request %s: %s: %s" % (name, e.__class__.__name__, e))
        stop.wait(0.5)


def get(port, method, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, {}, r.read()
    finally:
        c.close()


def garbage(port):
    out = raw_exchange(port, b"GARBAGE \x01\x02 HTTP/9.9\r\n\r\n")
    return int(out.split()[1]) if out.startswith(b"HTTP/") else 0


HOLD = 60  # seconds a slow or idle client holds its connection at most


def hold(s, t0, what):
    """Waits (in short steps, for the stop flag) until the server closes s or
    HOLD passes; counts which happened."""
    s.settimeout(0.5)
    while not stop.is_set() and time.monotonic() - t0 < HOLD:
        try:
            if not s.recv(65536):
                stats.note("%s closed by the server" % what)
                stats.note("%s seconds held" % what, time.monotonic() - t0)
                return
        except socket.timeout:
            continue
        except OSError:
            stats.note("%s closed by the server" % what)
            return
    if not stop.is_set():
        stats.note("%s held %d s, closed by us" % (what, HOLD))


def slow_client(port, natives):
    while not stop.is_set():
        mode = rnd.choice(["drip headers", "drip body", "slow read"])
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            stats.add("slow", False, "slow connect: %s" % e)
            stop.wait(1)
            continue
        try:
            s.settimeout(0.5)
            closed = False
            if mode == "slow read":
                m = rnd.choice(natives)
                fr = [{"module": 0, "rva": "0x%x" % rva} for rva, _, _ in m.native] * 10
                body = json.dumps({"modules": [m.entry()], "frames": fr[:1500], "timeout": 5}).encode()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                got = 0
                while not stop.is_set() and time.monotonic() - t0 < HOLD:
                    try:
                        b = s.recv(512)
                    except socket.timeout:
                        continue
                    if not b:
                        closed = True
                        break
                    got += len(b)
                    time.sleep(0.05)  # about 10 kB/s
                stats.note("slow read bytes", got)
                if closed or not stop.is_set():
                    stats.note("slow read %s" % ("answered" if closed else "held %d s" % HOLD))
                stats.add("slow", True)
                continue
            if mode == "drip headers":
                data = b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 4000
            else:
                data = b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" \
                       b"Content-Length: 4000\r\n\r\n" + b" " * 4000
                s.sendall(data[:data.index(b"\r\n\r\n") + 4])
                data = data[data.index(b"\r\n\r\n") + 4:]
            for i in range(len(data)):
                if stop.is_set() or time.monotonic() - t0 >= HOLD:
                    break
                try:
                    s.send(data[i:i + 1])
                except OSError:
                    closed = True
                    break
                try:
                    if s.recv(65536) == b"":
                        closed = True
                        break
                except socket.timeout:
                    pass  # 0.5 s between bytes
                except OSError:
                    closed = True
                    break
            if closed or not stop.is_set():
                stats.note("%s %s" % (mode, "closed by the server" if closed else "held %d s, closed by us" % HOLD))
            if closed:
                stats.note("%s seconds held" % mode, time.monotonic() - t0)
            stats.add("slow", True)
        finally:
            s.close()


def idle_client(port):
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            stats.add("idle", False, "idle connect: %s" % e)
            stop.wait(1)
            continue
        try:
            hold(s, t0, "idle")
            stats.add("idle", True)
        finally:
            s.close()


# ---------------------------------------------------------------- issue 27's attackers

def flood_client(port, max_modules):
    while not stop.wait(20):
        n = max_modules
        body = {"modules": [unknown_entry() for _ in range(n)],
                "frames": [{"module": i, "rva": "0x1000"} for i in range(n)], "timeout": 5}
        try:
            st, _, data = post(port, "/symbolicate", body, 60)
            why = check_symbolicate([None] * n, [(i, None) for i in range(n)], st, data, 0)
            stats.add("flood", why is None, why)
        except (OSError, http.client.HTTPException) as e:
            stats.add("flood", False, "flood: %s: %s" % (e.__class__.__name__, e))


def garbage_trace_client(port):
    head = (b"POST /traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % (64 << 20)) + b"\0" * 65536
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            stop.wait(1)
            continue
        got = b""
        try:
            s.sendall(head)
            s.settimeout(1.0)
            while not stop.is_set() and time.monotonic() - t0 < HOLD:
                try:
                    b = s.recv(4096)
                    if not b:
                        break
                    got += b
                except socket.timeout:
                    try:
                        s.send(b"\0")
                    except OSError:
                        break
                except OSError:
                    break
        except OSError:
            pass
        finally:
            s.close()
        took = time.monotonic() - t0
        if stop.is_set():
            break
        # 400 once the job sees it is no trace; 503 when both trace slots are
        # taken (by the other garbage sender and the trace client) at that moment
        ok = (got.startswith(b"HTTP/1.1 400") or got.startswith(b"HTTP/1.1 503")) and took < 5
        stats.add("garbage trace", ok, None if ok else "garbage trace: %r after %.1f s" % (got[:40], took))
        stats.note("garbage trace seconds", took)
        stats.note("garbage trace %s" % got[9:12].decode("latin-1", "replace"))
        stop.wait(0.1)  # an attacker would not wait; the machine the soak runs on is shared


TRACE, TRACE_COUNTS = nt.sample_trace(2, 64 * 1024 - 512, 50, 8, (7, 8))


def trace_client(port):
    while not stop.wait(30):
        t0 = time.monotonic()
        why = None
        while True:
            try:
                st, _, data = post(port, "/traces", TRACE, 60, {"Content-Type": "application/octet-stream"})
            except (OSError, http.client.HTTPException) as e:
                st, data = 0, str(e).encode()
            if st != 503 or time.monotonic() - t0 > 10 or stop.is_set():
                break
            stop.wait(0.2)
        if st == 200:
            got = {int(p["name"].split("(")[1].rstrip(")")): len(p["samples"]) for p in json.loads(data)["profiles"]}
            if got != TRACE_COUNTS:
                why = "trace: samples %s, want %s" % (got, TRACE_COUNTS)
        else:
            why = "trace: HTTP %d after %.1f s: %r" % (st, time.monotonic() - t0, data[:100])
        stats.add("trace", why is None, why)
        stats.note("trace seconds to admission", time.monotonic() - t0)


def cache_counter(cache, out):
    e = dict(os.environ, PDBSYM_CACHE_DIR=cache)
    while not stop.wait(30):
        try:
            r = subprocess.run([BIN, "cache", "list"], env=e, capture_output=True, text=True, timeout=60)
            n = sum(1 for ln in r.stdout.splitlines() if "\tok\t" in ln)
            out.append((time.monotonic() - t_start, n, r.returncode))
        except (OSError, subprocess.SubprocessError):
            pass


def fault_rearm(ss, mods):
    """Every 4 minutes: the faulty server's one-shot faults again, and a burst
    of 500s on every path it has no rule for."""
    while not stop.wait(240):
        try:
            rules = fault_rules(mods)
            rules["*"] = {"status": 500, "times": 40}
            ss["fault"].control(rules)
            stats.note("fault bursts")
        except OSError:
            pass


# ---------------------------------------------------------------- sampling

def proc_status(pid, key):
    try:
        for ln in open("/proc/%d/status" % pid):
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    except OSError:
        pass
    return 0


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return 0


def folder_parts(path):
    """The cache folder's bytes by kind: the database, its -wal and -shm, the download area."""
    out = {"database": 0, "wal": 0, "shm": 0, "downloads": 0}
    for d, _, files in os.walk(path):
        for n in files:
            try:
                size = os.lstat(os.path.join(d, n)).st_size
            except OSError:
                continue
            k = "wal" if n.endswith("-wal") else "shm" if n.endswith("-shm") else \
                "downloads" if os.path.relpath(d, path).startswith("tmp") else "database"
            out[k] += size
    return out


def nofile_limit(pid):
    for ln in open("/proc/%d/limits" % pid):
        if ln.startswith("Max open files"):
            return int(ln.split()[3])
    return 0


def metrics(port):
    try:
        st, _, data = get(port, "GET", "/metrics", 5)
    except (OSError, http.client.HTTPException):
        return {}
    out = {}
    for ln in data.decode().splitlines():
        if ln.startswith("#") or not ln.strip():
            continue
        k, _, v = ln.rpartition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


def health_ms(port):
    t0 = time.monotonic()
    try:
        st, _, _ = get(port, "GET", "/health", 5)
        return (time.monotonic() - t0) * 1000.0 if st == 200 else 99999.0
    except (OSError, http.client.HTTPException):
        return 99999.0


def serve_keys():
    """The settings this binary knows, with their defaults (`serve --help`)."""
    out = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    keys = {}
    for ln in out.splitlines():
        m = re.match(r"\s+([a-z0-9_]+)\s+default (\S+)", ln)
        if m:
            keys[m.group(1)] = m.group(2).strip('"')
    return keys


# ---------------------------------------------------------------- main

def main():
    tmp = tempfile.mkdtemp(prefix="pdbsym-soak-")
    ss, srv = {}, None
    threads = []
    try:
        mods = load_modules()
        originals = list(mods)
        # stored size of every original (a scratch cache filled by `pdbsym warm`)
        stage = os.path.join(tmp, "stage")
        for i, m in enumerate(originals):
            os.makedirs(os.path.join(stage, str(i)))
            open(os.path.join(stage, str(i), m.name), "wb").write(m.data)
        e = dict(os.environ, PDBSYM_CACHE_DIR=os.path.join(tmp, "measure"), PDBSYM_OFFLINE="true")
        subprocess.run([BIN, "warm", "--quiet", "--allow-failures", stage], env=e, capture_output=True, timeout=600)
        stored = {}
        out = subprocess.run([BIN, "cache", "list"], env=e, capture_output=True, text=True).stdout
        for ln in out.splitlines():
            f = ln.split("\t")
            if len(f) >= 6 and f[3].isdigit():  # the header line's is "bytes"
                stored[os.path.basename(os.path.dirname(f[5]))] = int(f[3])
        shutil.rmtree(stage)
        shutil.rmtree(os.path.join(tmp, "measure"))
        native_stored = sum(stored.get(str(i), 0) for i, m in enumerate(originals) if copyable(m))
        total_orig = sum(stored.values())
        copies = args.copies
        if copies is None:  # enough copies for 10x the cap in distinct modules' stored bytes
            copies = max(1, -(-(10 * args.cap - total_orig) // max(native_stored, 1)))
        mods += make_copies(originals, copies)
        est_total = total_orig + copies * native_stored

        # where each module lives
        hot = [m for m in mods if m.kind in ("native-fixture", "managed-fixture")]
        pool = [m for m in mods if m.kind not in ("native-fixture", "managed-fixture")]
        rnd.shuffle(pool)
        nf = max(len(FAULTS), len(pool) // 12)
        for i, m in enumerate(pool):
            if i < nf:
                m.home = "fault:" + FAULTS[i % len(FAULTS)]
            elif i < nf + len(pool) // 8:
                m.home = "drip" if i % 3 == 0 else "slow"
            if m.kind == "copy" and i % 4 == 1 and not m.home.startswith("fault"):
                m.cab = True
        ss = setup_stores(tmp, mods, hot[0].data)
        for m in mods:  # the bytes are in the stores now
            m.size, m.data = len(m.data), None
        homes = {}
        for m in mods:
            homes[m.home.split(":")[0]] = homes.get(m.home.split(":")[0], 0) + 1
        largest = max(m.size for m in mods if m.size <= args.cap)

        keys = serve_keys()
        settings = {
            "cache_max_bytes": args.cap, "mem_max_bytes": 8 << 20, "max_connections": 64,
            "connection_timeout": 5, "download_workers": 4, "download_queue": 200,
            "download_connect_timeout": 3, "download_first_byte_timeout": 5, "download_timeout": 20,
            "download_low_speed_time": 10, "download_retry_base_ms": 100, "source_backoff": 2,
            "source_backoff_max": 20, "negative_missing_ttl": 120, "negative_error_ttl": 5,
            "negative_error_max_ttl": 60, "negative_suspect_ttl": 30, "negative_malformed_ttl": 120,
            "max_body_bytes": 1 << 20, "max_frames": 2000, "max_modules": 300, "max_timeout": 30,
            "v5_timeout": 30, "log_level": args.log_level,
        }
        event_loop = "http_threads" in keys  # issue 13's connection model
        if event_loop:
            # connections cost no thread: more of them than max_inflight (64) may be held
            settings["max_connections"] = 256
        settings = {k: v for k, v in settings.items() if k in keys}
        eff = dict(keys)
        eff.update({k: str(v) for k, v in settings.items()})
        # the threads the settings allow (docs/concurrency.md)
        if event_loop:
            # main, the event loop, the request workers, the sweeper, the download
            # workers, the network thread (no resolver threads: every source is an
            # IP), the cache writer where tables are stored after the answer, and
            # the cache check of modules mapped from their table files
            fixed = 4 if "persist_queue" in keys else 3
            if fixed == 4 and b"005_table_files" in open(BIN, "rb").read():
                fixed = 5
            thread_bound = fixed + int(eff["http_threads"]) + int(eff["request_workers"]) + \
                int(eff["download_workers"])
            thread_formula = "%d + http_threads %s + request_workers %s + download_workers %s" % (
                fixed, eff["http_threads"], eff["request_workers"], eff["download_workers"])
        else:
            # main, libmicrohttpd's listener and one thread per connection, the
            # download workers, the network thread
            thread_bound = 3 + int(eff["max_connections"]) + int(eff["download_workers"])
            thread_formula = "3 + max_connections %s + download_workers %s" % (eff["max_connections"],
                                                                                eff["download_workers"])
        folder_bound = args.cap + largest
        path = ";".join("srv*" + ss[n].url for n in ("good", "slow", "fault"))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(args.fd_limit, hard), hard))
        try:
            srv = Server(env={"PDBSYM_SYMBOL_PATH": path, "PDBSYM_OFFLINE": "false"},
                         config="".join("%s = %s\n" % kv for kv in settings.items()))
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        pid, port = srv.proc.pid, srv.port
        fd_limit = nofile_limit(pid)
        cache = os.path.join(srv.tmp, "cache")

        print("pdbsym soak: %s, %.0f min, cache cap %.1f MiB, RLIMIT_NOFILE %d" % (
            BIN, args.minutes, args.cap / MiB, fd_limit))
        print("modules: %d distinct (%d fixtures, %d corpus, %d copies: %d per native PDB), %s" % (
            len(mods), len(hot), sum(1 for m in mods if m.kind.startswith("corpus")),
            sum(1 for m in mods if m.kind == "copy"), copies,
            ", ".join("%d %s" % (n, h) for h, n in sorted(homes.items()))))
        print("stored size of them all: about %.1f MiB = %.1fx the cap; largest file served %.1f MiB" % (
            est_total / MiB, est_total / float(args.cap), largest / MiB))
        print("settings: " + ", ".join("%s=%s" % kv for kv in settings.items()))
        print("bounds: threads <= %d (%s); fds < %d (RLIMIT_NOFILE); cache folder <= %.2f MB (cap %.2f MB + "
              "largest module %.2f MB)" % (thread_bound, thread_formula, fd_limit, folder_bound / 1e6,
                                           args.cap / 1e6, largest / 1e6))
        sys.stdout.flush()

        natives = [m for m in mods if m.native and m.home == "good" and not m.cab]
        big = args.cap * 25 // 100  # download_max_share (25 %): larger ones are never downloaded
        workers = [threading.Thread(target=good_client, args=(port, hot, pool, big)) for _ in range(2)]
        workers += [threading.Thread(target=v5_client, args=(port, natives, big)),
                    threading.Thread(target=unknown_client, args=(port,)),
                    threading.Thread(target=bad_client, args=(port, int(eff["max_frames"]),
                                                              size_arg(eff["max_body_bytes"])))]
        workers += [threading.Thread(target=slow_client, args=(port, natives)) for _ in range(args.slow)]
        workers += [threading.Thread(target=idle_client, args=(port,)) for _ in range(args.idle)]
        workers.append(threading.Thread(target=fault_rearm, args=(ss, mods)))
        holders = []
        counts = []
        if not args.no_attackers:
            workers += [threading.Thread(target=flood_client, args=(port, int(eff["max_modules"]))),
                        threading.Thread(target=trace_client, args=(port,)),
                        threading.Thread(target=cache_counter, args=(cache, counts))]
            workers += [threading.Thread(target=garbage_trace_client, args=(port,)) for _ in range(2)]
            for n, length in ((4, min(8 << 20, size_arg(eff["max_body_bytes"]))), (64, 100)):
                holders.append(Holder(port, n, "headers", head=(
                    b"POST /symbolicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % length)))
            for h in holders:
                h.start()
        for t in workers:
            t.daemon = True
            t.start()
        threads.extend(workers)

        health = []       # (t, ms)
        cur = {"h": 0.0}
        lock = threading.Lock()

        def health_loop():
            while not stop.wait(1.0):
                ms = health_ms(port)
                with lock:
                    health.append((time.monotonic() - t_start, ms))
                    cur["h"] = max(cur["h"], ms)

        ht = threading.Thread(target=health_loop, daemon=True)
        ht.start()
        threads.append(ht)

        table = []
        violations = []
        crashed = None
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        nxt = t0 + 10
        mx = {"rss": 0, "thr": 0, "fds": 0, "dir": 0}
        last_ok = last_err = 0
        m0 = metrics(port)

        def settled(mt):
            return sum(v for k, v in mt.items() if k.startswith("pdbsym_downloads_total"))

        last_dl = settled(m0)
        peaks = {"rss": 0, "thr": 0, "fds": 0, "dir": 0}
        peak_parts = {}
        while True:
            now = time.monotonic()
            if srv.proc.poll() is not None:
                crashed = srv.proc.returncode
                break
            rss = proc_status(pid, "VmRSS")
            thr = threads_of(pid)
            fds = fd_count(pid)
            dirb = folder_bytes(cache)
            if dirb > peaks["dir"]:
                peak_parts.update(folder_parts(cache), t=now - t0)
            for k, v in (("rss", rss), ("thr", thr), ("fds", fds), ("dir", dirb)):
                mx[k] = max(mx[k], v)
                peaks[k] = max(peaks[k], v)
            el = now - t0
            if thr > thread_bound:
                violations.append("%.0fs: %d threads, above %d" % (el, thr, thread_bound))
            if fds >= fd_limit:
                violations.append("%.0fs: %d descriptors, at RLIMIT_NOFILE %d" % (el, fds, fd_limit))
            if dirb > folder_bound:
                violations.append("%.0fs: cache folder %d bytes, above %d" % (el, dirb, folder_bound))
            if now >= nxt:
                mt = metrics(port)
                with stats.lock:
                    ok, err = stats.ok, stats.err
                with lock:
                    h, cur["h"] = cur["h"], 0.0
                dl = settled(mt)
                table.append({"t": nxt - t0, "rss": mx["rss"] / 1024.0, "thr": mx["thr"], "fds": mx["fds"],
                              "dir": mx["dir"] / 1e6, "health": h, "ok": ok - last_ok, "err": err - last_err,
                              "dl": dl - last_dl, "cache_bytes": mt.get("pdbsym_cache_bytes", 0),
                              "conns": mt.get("pdbsym_http_connections")})
                last_ok, last_err, last_dl = ok, err, dl
                r = table[-1]
                if len(table) % 6 == 0 or len(table) == 1:
                    log("%s RSS %.1f MiB, %d threads, %d fds, folder %.2f MB, /health %.1f ms, %d ok, %d err" % (
                        fmt_t(r["t"]), r["rss"], r["thr"], r["fds"], r["dir"], r["health"], r["ok"], r["err"]))
                mx = {"rss": 0, "thr": 0, "fds": 0, "dir": 0}
                nxt += 10
                if now >= end:
                    break
            time.sleep(0.5)

        stop.set()
        for h in holders:
            h.stop()
            stats.note("header-only connections made (%d held)" % h.n, h.connects)
        for t in threads:
            t.join(timeout=15)
        if counts:
            after = [n for t, n, rc in counts if t > 120]
            print("cache modules (pdbsym cache list every 30 s): %s" % " ".join(str(n) for _, n, _ in counts))
            if after:
                print("cache modules after the warm-up: min %d, max %d, %d samples" % (min(after), max(after), len(after)))
                if min(after) == 0:
                    violations.append("the cache was emptied (0 modules) after the warm-up")
        final = metrics(port) if crashed is None else {}
        if crashed is None:
            print("memory of the service at the end: %s" % ", ".join(
                "%s %.1f MiB" % (k, proc_status(pid, k) / 1024.0) for k in ("VmHWM", "RssAnon", "RssFile", "RssShmem")))
        rc = None
        if crashed is None:
            rc = srv.stop(timeout=60)
        report(table, health, peaks, violations, crashed, rc, thread_bound, thread_formula, fd_limit,
               folder_bound, final)
        if peak_parts:
            print("cache folder at its peak (%s): %s" % (fmt_t(peak_parts.pop("t")), ", ".join(
                "%s %.2f MB" % (k, v / 1e6) for k, v in sorted(peak_parts.items()))))
        verify = None
        if crashed is None:
            e = dict(os.environ, PDBSYM_CACHE_DIR=cache)
            v = subprocess.run([BIN, "cache", "verify"], env=e, capture_output=True, text=True, timeout=300)
            verify = v.returncode
            print("pdbsym cache verify after the run: exit %d: %s" % (v.returncode, v.stdout.strip()[:300]))
        if crashed is not None:
            print("THE SERVICE DIED: exit status %s; the log's last lines:" % crashed)
            for ln in open(srv.log_path).read().splitlines()[-20:]:
                print("  " + ln)
            return 2
        bad = bool(violations) or verify != 0 or rc != 0
        if rc != 0:
            print("the service exited %s on SIGTERM (want 0)" % rc)
        return 1 if bad else 0
    finally:
        stop.set()
        if srv is not None:
            srv.stop(timeout=30)
            if args.keep:
                print("kept: %s (service: %s)" % (tmp, srv.tmp))
            else:
                shutil.rmtree(srv.tmp, ignore_errors=True)
        for s in ss.values():
            s.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def fmt_t(t):
    return "%d:%02d" % (int(t) // 60, int(t) % 60)


def verdict(name, unit, values, rel, absol, bound_text):
    n = len(values)
    warm = min(12, n // 6)  # the first sixth, at most 2 minutes of 10 s rows
    v = values[warm:]
    if len(v) < 3:
        return "%-8s too few samples" % name
    third = len(v) // 3
    first, last = max(v[:third]), max(v[-third:])
    lim = first * (1 + rel) + absol
    word = "flat" if last <= lim else "GROWING"
    return "%-8s %-7s first third max %s, last third max %s (flat: last <= first + %d%% + %s); %s" % (
        name, word, unit(first), unit(last), int(rel * 100), unit(absol), bound_text)


def report(table, health, peaks, violations, crashed, rc, thread_bound, thread_formula, fd_limit, folder_bound,
           final):
    print()
    print("| time | RSS MiB | threads | fds | folder MB | health ms | ok | err | downloads | conns |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in table:
        print("| %s | %.1f | %d | %d | %.2f | %.1f | %d | %d | %d | %s |" % (
            fmt_t(r["t"]), r["rss"], r["thr"], r["fds"], r["dir"], r["health"], r["ok"], r["err"], r["dl"],
            "-" if r["conns"] is None else "%d" % r["conns"]))
    print("(each row: the largest RSS, threads, fds and cache folder bytes of its 10 s, sampled every 0.5 s; "
          "its slowest GET /health, probed every second; requests answered as expected / not; download jobs "
          "settled and open connections at its end, from /metrics)")
    if len(table) > 30:  # the same by minute: maxima, and the sums of the counts
        print()
        print("by minute:")
        print()
        print("| minute | RSS MiB | threads | fds | folder MB | health ms | ok | err | downloads |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i in range(0, len(table), 6):
            g = table[i:i + 6]
            print("| %s | %.1f | %d | %d | %.2f | %.1f | %d | %d | %d |" % (
                fmt_t(g[-1]["t"]), max(r["rss"] for r in g), max(r["thr"] for r in g), max(r["fds"] for r in g),
                max(r["dir"] for r in g), max(r["health"] for r in g), sum(r["ok"] for r in g),
                sum(r["err"] for r in g), sum(r["dl"] for r in g)))
    print()
    print(verdict("RSS", lambda x: "%.1f MiB" % x, [r["rss"] for r in table], 0.10, 2.0,
                  "peak %.1f MiB (no bound set: mem_max_bytes 8 MiB of parsed modules)" % (peaks["rss"] / 1024.0)))
    print(verdict("threads", lambda x: "%d" % x, [r["thr"] for r in table], 0.0, 4,
                  "peak %d, bound %d (%s)" % (peaks["thr"], thread_bound, thread_formula)))
    print(verdict("fds", lambda x: "%d" % x, [r["fds"] for r in table], 0.0, 8,
                  "peak %d, bound %d (RLIMIT_NOFILE)" % (peaks["fds"], fd_limit)))
    print(verdict("folder", lambda x: "%.2f MB" % x, [r["dir"] for r in table], 0.10, 1.0,
                  "peak %.2f MB, bound %.2f MB (cap + largest module)" % (peaks["dir"] / 1e6, folder_bound / 1e6)))
    hs = sorted(ms for _, ms in health)
    if hs:
        print("health   %d probes: median %.1f ms, 99th %.1f ms, max %.1f ms; %d over 1 s, %d failed or over 5 s" % (
            len(hs), hs[len(hs) // 2], hs[min(len(hs) - 1, int(len(hs) * 0.99))], hs[-1],
            sum(1 for x in hs if x > 1000), sum(1 for x in hs if x >= 5000)))
    with stats.lock:
        print("requests: %d ok, %d err; by kind %s" % (stats.ok, stats.err, json.dumps(stats.by, sort_keys=True)))
        print("notes: %s" % ", ".join("%s %s" % (k, ("%.0f" % v) if isinstance(v, float) else v)
                                      for k, v in sorted(stats.notes.items())))
        for w, n in sorted(stats.samples.items(), key=lambda x: -x[1])[:12]:
            print("  err x%d: %s" % (n, w))
    dl = {k.split('"')[1]: int(v) for k, v in final.items() if k.startswith("pdbsym_downloads_total")}
    if dl:
        print("downloads settled (metrics): %s; cache bytes at the end %.2f MB" % (
            dl, final.get("pdbsym_cache_bytes", 0) / 1e6))
    if violations:
        print("BOUNDS PASSED (%d samples), the first ones:" % len(violations))
        for v in violations[:10]:
            print("  " + v)
    else:
        print("bounds: none passed")
    if rc is not None:
        print("SIGTERM: exit status %d" % rc)


if __name__ == "__main__":
    sys.exit(main())
