"""livelib.py - what the live-profiling tests share: building the .NET app of
tests/live (LiveApp and its library LiveLib) and the TraceEvent oracle of
tests/fixtures/nettrace/oracle with the real .NET SDK, starting the app,
reading windows back (speedscope and pprof), and comparing samples.
Python standard library only; the .NET SDK and NuGet are needed (the tests
skip, through harness.py, where `dotnet` is absent)."""
import collections
import fcntl
import glob
import hashlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from tracelib import ROOT, expected_frame, same_frame, speedscope_samples  # noqa: E402

LIVE_SRC = os.path.join(ROOT, "tests", "live")
ORACLE_SRC = os.path.join(ROOT, "tests", "fixtures", "nettrace", "oracle")


def need_dotnet():
    if not shutil.which("dotnet"):
        harness.skip("dotnet (the .NET 10 SDK) is not on PATH: no live runtime to profile")


# A Unix socket's path is at most 107 bytes (sun_path), and the runtime puts
# its diagnostic socket, dotnet-diagnostic-PID-START-socket (up to 50 bytes),
# in its TMPDIR: a folder deep in the build tree (each test's TMPDIR is
# BUILD/tmp/TEST) is too long for it.  The runtime then has no socket at all.
SOCKET_NAME_MAX = 50
SUN_PATH_MAX = 107


def socket_dir(sb, name="apptmp"):
    """A folder for a process's diagnostic socket: sb.path(name) when a socket
    name fits under it, else a short folder in /dev/shm (removed at exit)."""
    want = sb.path(name)
    if len(want) + 1 + SOCKET_NAME_MAX > SUN_PATH_MAX and os.path.isdir("/dev/shm"):
        import atexit
        import tempfile
        want = tempfile.mkdtemp(prefix="pdbsym-", dir="/dev/shm")
        atexit.register(shutil.rmtree, want, True)
    else:
        os.makedirs(want, exist_ok=True)
    os.chmod(want, 0o777)
    return want


_default_dir = []


def default_socket_dir():
    """A folder of this test's own for the .NET processes it starts (their
    diagnostic sockets, the SDK's scratch files): in the test's TMPDIR when a
    socket's name fits under it, else in /dev/shm; removed at exit."""
    if not _default_dir:
        import atexit
        import tempfile
        base = tempfile.gettempdir()
        if len(base) + 17 + SOCKET_NAME_MAX > SUN_PATH_MAX and os.path.isdir("/dev/shm"):
            base = "/dev/shm"
        d = tempfile.mkdtemp(prefix="pdbsym-", dir=base)
        os.chmod(d, 0o777)
        atexit.register(shutil.rmtree, d, True)
        _default_dir.append(d)
    return _default_dir[0]


def dotnet_env(tmp):
    e = dict(os.environ)
    e["TMPDIR"] = default_socket_dir()  # what the SDK and the runtime leave goes with it
    e.update({"DOTNET_CLI_TELEMETRY_OPTOUT": "1", "DOTNET_NOLOGO": "1",
              "DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1"})
    for k in list(e):
        if k.startswith("DOTNET_EnableEventPipe") or k.startswith("DOTNET_EventPipe"):
            del e[k]
    return e


def build(src, dst, tmp, project=None):
    """dotnet build -c Release of src (copied into tmp) into dst."""
    work = os.path.join(tmp, "src-" + os.path.basename(src))
    if not os.path.exists(work):
        shutil.copytree(src, work, ignore=shutil.ignore_patterns("bin", "obj"))
    target = os.path.join(work, project) if project else work
    r = subprocess.run(["dotnet", "build", target, "-c", "Release", "-o", dst, "-nologo", "-v", "q",
                        "-p:PathMap=%s=/_/" % work, "--disable-build-servers"],
                       env=dotnet_env(tmp), capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError("dotnet build %s failed:\n%s%s" % (src, r.stdout[-3000:], r.stderr[-3000:]))


def _sources_hash(src):
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(src)):
        dirs[:] = sorted(d for d in dirs if d not in ("bin", "obj"))
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            h.update(os.path.relpath(p, src).encode())
            h.update(open(p, "rb").read())
    return h.hexdigest()[:16]


def fixture_cache(kind):
    """A folder for fixtures made once and shared, or None: in
    PDBSYM_TEST_FIXTURE_CACHE (scripts/test.sh: one for both builds' tests), else
    in the build folder (one build's tests); kind names the subfolder."""
    base = os.environ.get("PDBSYM_TEST_FIXTURE_CACHE") or os.environ.get("PDBSYM_BUILD_DIR")
    if not base:
        return None
    d = os.path.join(base, kind)
    os.makedirs(d, exist_ok=True)
    return d


def cached(name, src, tmp, make):
    """What make(dst) builds from src, kept (keyed by the sources' hash) so
    that the live tests share one dotnet build (fixture_cache); a lock keeps
    two tests from building it at once."""
    cache = fixture_cache("live-dotnet")
    if not cache:
        dst = os.path.join(tmp, name)
        make(dst)
        return dst
    os.makedirs(cache, exist_ok=True)
    dst = os.path.join(cache, "%s-%s" % (name, _sources_hash(src)))
    with open(os.path.join(cache, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(dst, ".done")):
            shutil.rmtree(dst, ignore_errors=True)
            make(dst)
            open(os.path.join(dst, ".done"), "w").close()
    return dst


def build_app(tmp):
    return cached("app", LIVE_SRC, tmp, lambda dst: build(LIVE_SRC, dst, tmp, "LiveApp"))


def build_oracle(tmp):
    out = cached("oracle", ORACLE_SRC, tmp, lambda dst: build(ORACLE_SRC, dst, tmp))
    return os.path.join(out, "NetTraceOracle.dll")


class App:
    """LiveApp started as its own process: `ready PID` read from its output."""

    def __init__(self, appdir, args=(), env=None, tmpdir=None, preexec=None, exe="LiveApp"):
        tmpdir = tmpdir or default_socket_dir()
        e = dotnet_env(tmpdir)
        e["TMPDIR"] = tmpdir
        if env:
            e.update(env)
        # --light: its busy threads sleep two thirds of the time (the tests run
        # several apps beside other tests on two cores)
        self.proc = subprocess.Popen([os.path.join(appdir, exe)] + list(args) + ["--light"], env=e,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=preexec)
        import atexit
        atexit.register(self.stop)  # a test that dies midway leaves no busy app behind
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError("LiveApp did not start: %r" % line)
        self.pid = int(line.split()[1])
        # the runtime opens its diagnostic socket while starting: give it a moment
        time.sleep(0.5)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def oracle_stacks(oracle_dll, trace, pdbdir, tmp):
    """{thread: [stack]} by TraceLog over trace (NetTraceOracle stacks), the
    frames as pdbsym's speedscope writes them (tracelib.expected_frame)."""
    r = subprocess.run(["dotnet", oracle_dll, "stacks", trace, pdbdir], env=dotnet_env(tmp),
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError("the oracle failed on %s: %s" % (trace, r.stderr[-2000:]))
    out = collections.defaultdict(list)
    for line in r.stdout.splitlines():
        if line.strip():
            s = json.loads(line)
            out[s["thread"]].append([expected_frame(f) for f in s["frames"]])
    return out


def window_files(out, ext=".speedscope.json"):
    return sorted(glob.glob(os.path.join(out, "*" + ext)))


def merged_samples(files):
    """{thread: [stack]} over the windows, in window order; frames trimmed
    to the fields TraceLog's oracle has."""
    out = collections.defaultdict(list)
    for f in files:
        for tid, ss in speedscope_samples(json.load(open(f))).items():
            out[tid] += [[{k: v for k, v in fr.items()
                           if k in ("name", "file", "line", "col", "line_approx")}
                          for fr in s] for s in ss]
    return out


def same_marked(x, y):
    """two of pdbsym's frames: equal, or both marked line_approx and equal
    but for the line and column"""
    if x.get("line_approx") and y.get("line_approx"):
        def strip(f):
            return {k: v for k, v in f.items() if k not in ("line", "col")}
        return strip(x) == strip(y)
    return x == y


def diff_samples(c, what, got, want, show=3, oracle=False, approx=False):
    """Checks every thread's samples of got against want; returns (samples,
    differing).  oracle: want is TraceLog's (no line_approx), and a frame
    pdbsym marks approximate may have another line (tracelib.same_frame)."""
    n = bad = 0
    c.eq("%s: threads" % what, sorted(got), sorted(want))
    for tid in want:
        g, w = got.get(tid, []), want[tid]
        c.eq("%s: thread %d samples" % (what, tid), len(g), len(w))
        for i, (x, y) in enumerate(zip(g, w)):
            n += 1
            eq = same_frame if oracle else same_marked if approx else (lambda a, b: a == b)
            if len(x) != len(y) or not all(eq(a, b) for a, b in zip(x, y)):
                bad += 1
                if bad <= show:
                    for k, (fx, fy) in enumerate(zip(x, y)):
                        if not eq(fx, fy):
                            print("  %s thread %d sample %d frame %d: ours %r, theirs %r" %
                                  (what, tid, i, k, fx, fy))
                            break
                    else:
                        print("  %s thread %d sample %d: %d frames, theirs %d" % (what, tid, i, len(x), len(y)))
    c.eq("%s: samples that differ" % what, bad, 0)
    return n, bad


# ---- pprof, read back ----------------------------------------------------

def _varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return v, i


def pprof_fields(path):
    """The top-level fields of a gzip'ed profile.proto: {field: [values]}
    (varints as ints, length-delimited as bytes)."""
    b = gzip.open(path).read()
    out = collections.defaultdict(list)
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            i += n
        elif wire == 1:
            v = b[i:i + 8]
            i += 8
        elif wire == 5:
            v = b[i:i + 4]
            i += 4
        else:
            raise ValueError("wire type %d in %s" % (wire, path))
        out[f].append(v)
    return out
