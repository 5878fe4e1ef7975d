#!/usr/bin/env python3
"""The rooms of server/ hold, proved on the sources and on the build's own
compile lines (docs/architecture.md).

server/ is six rooms, each a library whose folder is its public include
path.  This test fails when:

1. a file of server/ or parsers/ includes a library's header outside the room
   that owns it (sqlite3.h: cache; curl/curl.h: fetch; microhttpd.h: service;
   jansson.h: service and cli), or such a header from a public header, or a
   header of a room its arrows do not allow, another room's internal/ header,
   an include by path ('/' or '..'), or a header that is nowhere; or when two
   rooms have a header of the same name;
2. a room's compile line, as CMake wrote it in build/compile_commands.json,
   compiles a probe that includes what the room may not include: a guarded
   library's header must stop the compile with its guard's #error, another
   room's header must not be found; and what it may include must compile (so
   the probes show something).  The same for parsers/, the binary's main.c
   and three tests (one plain, the two allowed a library by name);
3. the scanner of point 1 misses a violation planted in a copy of the tree
   (its own self-test).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks  # noqa: E402

SRC = os.path.abspath(os.environ.get("PDBSYM_SOURCE_DIR") or
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("PDBSYM_BUILD_DIR")

# room -> the rooms whose public headers it may include (besides its own)
ARROWS = {
    "common": set(),
    "cache": {"common"},
    "fetch": {"common"},
    "engine": {"cache", "fetch", "common"},
    "profile": {"engine", "fetch", "common"},
    "service": {"profile", "engine", "common"},
    "cli": {"service", "profile", "engine", "cache", "fetch", "common"},
}
# a library's header -> the rooms that may include it
OWNERS = {
    "sqlite3.h": {"cache"},
    "curl/curl.h": {"fetch"},
    "microhttpd.h": {"service"},
    "jansson.h": {"service", "cli"},
}
GUARD_DIR = {"sqlite3.h": "sqlite", "curl/curl.h": "curl", "microhttpd.h": "mhd",
             "jansson.h": "jansson"}
# one public header per room, and the internal ones, for the probes
PUBLIC = {"common": "module.h", "cache": "store.h", "fetch": "fetch.h", "engine": "engine.h",
          "profile": "profile.h", "service": "api.h", "cli": "cli.h"}
INTERNAL = {"cache": "store_int.h", "profile": "prof_int.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def library_of(name):
    """The guarded library a <header> belongs to, or None."""
    if name in OWNERS:
        return name
    if name.startswith("curl/"):
        return "curl/curl.h"
    return None


def scan(root):
    """Every violation of the include rules in root's server/ and parsers/,
    as 'file: why' strings (empty when the rooms hold)."""
    server, parsers = os.path.join(root, "server"), os.path.join(root, "parsers")
    problems = []
    # which room (or parsers) has which header, public or internal
    where = {}
    for room in ARROWS:
        for sub, kind in (("", "public"), ("internal", "internal")):
            d = os.path.join(server, room, sub)
            for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                if f.endswith(".h"):
                    if f in where:
                        problems.append("%s: a header of that name is in %s too" %
                                        (os.path.join(room, sub, f), where[f][0]))
                    where[f] = (room, kind)
    for f in os.listdir(parsers):
        if f.endswith(".h"):
            if f in where:
                problems.append("parsers/%s: a header of that name is in %s too" % (f, where[f][0]))
            where[f] = ("parsers", "public")
    rooms_seen = set(d for d in os.listdir(server) if os.path.isdir(os.path.join(server, d)))
    for extra in sorted(rooms_seen - set(ARROWS) - {"guards"}):
        problems.append("server/%s: a folder that is no room (docs/architecture.md)" % extra)
    for f in sorted(os.listdir(server)):
        if os.path.isfile(os.path.join(server, f)):
            problems.append("server/%s: a file outside the rooms" % f)

    files = []
    for room in ARROWS:
        for dirpath, _, names in os.walk(os.path.join(server, room)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    files.append((room, os.path.join(dirpath, n)))
    for n in sorted(os.listdir(parsers)):
        if n.endswith((".c", ".h")):
            files.append(("parsers", os.path.join(parsers, n)))

    for room, path in files:
        rel = os.path.relpath(path, root)
        public_header = path.endswith(".h") and os.path.dirname(path) == os.path.join(server, room)
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for kind, name in INCLUDE.findall(text):
            lib = library_of(name)
            if kind == "<":
                if lib and room not in OWNERS[lib]:
                    problems.append("%s: includes <%s>, which only %s may include" %
                                    (rel, name, " and ".join(sorted(OWNERS[lib]))))
                elif lib and public_header:
                    problems.append("%s: a public header includes <%s> (keep it in the .c files "
                                    "or internal/)" % (rel, name))
                continue
            if "/" in name or ".." in name:
                problems.append('%s: includes "%s" by path; rooms are reached by linking them' %
                                (rel, name))
                continue
            owner = where.get(name)
            if owner is None:
                problems.append('%s: includes "%s", which no room and not parsers/ has' % (rel, name))
                continue
            oroom, okind = owner
            if oroom == room:
                continue
            if room == "parsers":
                problems.append('%s: parsers/ is pure and includes "%s" of server/%s/' %
                                (rel, name, oroom))
            elif oroom == "parsers":
                continue
            elif okind == "internal":
                problems.append('%s: includes "%s", internal to server/%s/' % (rel, name, oroom))
            elif oroom not in ARROWS[room]:
                problems.append('%s: includes "%s" of server/%s/, but %s may use only %s' %
                                (rel, name, oroom, room,
                                 ", ".join(sorted(ARROWS[room])) or "parsers/"))
    return problems


def compile_lines():
    """file (absolute) -> (directory, argument list) from compile_commands.json."""
    path = os.path.join(BUILD or "", "compile_commands.json")
    with open(path) as fh:
        entries = json.load(fh)
    out = {}
    for e in entries:
        args = e.get("arguments") or shlex.split(e["command"])
        out[os.path.abspath(os.path.join(e["directory"], e["file"]))] = (e["directory"], args,
                                                                          e["file"])
    return out


def probe(line, body, tmp, tag):
    """Compiles body with line's flags (the source and output swapped for the
    probe's); returns (exit status, compiler output)."""
    directory, args, original = line
    src = os.path.join(tmp, "probe_%s.c" % tag)
    with open(src, "w") as fh:
        fh.write(body + "int pdbsym_layering_probe;\n")
    cmd, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-MT", "-MF", "-MQ"):
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        if a == "-o":
            cmd += ["-o", os.path.join(tmp, "probe_%s.o" % tag)]
            skip = True
            continue
        if os.path.abspath(os.path.join(directory, a)) == os.path.abspath(
                os.path.join(directory, original)):
            cmd.append(src)
            continue
        cmd.append(a)
    p = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def guard_message(header):
    with open(os.path.join(SRC, "server", "guards", GUARD_DIR[header], header)) as fh:
        return re.search(r'#error "([^"]+)"', fh.read()).group(1)


def main():
    c = Checks()

    # 1. the sources
    problems = scan(SRC)
    for p in problems:
        print("  " + p)
    c.eq("every include of server/ and parsers/ keeps to the rooms", problems, [])

    # 3. the scanner's self-test: a copy of the tree with one violation of each kind
    tmp = tempfile.mkdtemp(prefix="pdbsym-layering-")
    try:
        copy = os.path.join(tmp, "tree")
        shutil.copytree(os.path.join(SRC, "server"), os.path.join(copy, "server"))
        shutil.copytree(os.path.join(SRC, "parsers"), os.path.join(copy, "parsers"))
        plants = [
            ("server/engine/engine.c", "#include <sqlite3.h>", "<sqlite3.h>, which only cache"),
            ("server/service/api.c", "#include <curl/curl.h>", "<curl/curl.h>, which only fetch"),
            ("server/cli/cmd_health.c", "#include <microhttpd.h>", "<microhttpd.h>, which only service"),
            ("server/engine/engine.c", "#include <jansson.h>", "<jansson.h>, which only cli and service"),
            ("server/service/render.h", "#include <jansson.h>", "a public header includes <jansson.h>"),
            ("server/service/http.c", '#include "store.h"', '"store.h" of server/cache/'),
            ("server/cli/cmd_lookup.c", '#include "store_int.h"', '"store_int.h", internal'),
            ("server/common/log.c", '#include "../cache/store.h"', "by path"),
            ("parsers/pdb.c", '#include "log.h"', "parsers/ is pure"),
        ]
        for i, (rel, line, _) in enumerate(plants):
            path = os.path.join(copy, rel)
            with open(path) as fh:
                text = fh.read()
            with open(path, "w") as fh:
                fh.write("%s /* planted %d */\n%s" % (line, i, text))
        found = scan(copy)
        for rel, line, why in plants:
            c.true("the scanner reports %s in %s" % (line, rel),
                   any(p.startswith(rel + ":") and why in p for p in found), found)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # 2. the compile lines
    if not BUILD or not os.path.exists(os.path.join(BUILD, "compile_commands.json")):
        c.true("build/compile_commands.json exists (CMakeLists.txt sets "
               "CMAKE_EXPORT_COMPILE_COMMANDS; PDBSYM_BUILD_DIR names the build)", False, BUILD)
        c.done()
    lines = compile_lines()

    def line_of(rel):
        return lines.get(os.path.join(SRC, rel))

    targets = {}  # name -> (compile line, libraries allowed, rooms allowed, internal headers allowed)
    for room in ARROWS:
        d = os.path.join(SRC, "server", room)
        srcs = sorted(f for f in os.listdir(d) if f.endswith(".c") and f != "main.c")
        line = next((line_of(os.path.join("server", room, f)) for f in srcs
                     if line_of(os.path.join("server", room, f))), None)
        c.true("compile_commands.json has a file of server/%s/" % room, line is not None)
        if line:
            libs = {h for h, owners in OWNERS.items() if room in owners}
            targets[room] = (line, libs, ARROWS[room] | {room}, {INTERNAL[room]} if room in INTERNAL else set())
    extra = [
        ("parsers (parsers/pdb.c)", "parsers/pdb.c", set(), set()),
        ("the binary (server/cli/main.c)", "server/cli/main.c", set(), {"cli"}),
        ("a test (tests/unit/test_module.c)", "tests/unit/test_module.c", {"jansson.h"}, set(ARROWS)),
        ("test_store (sqlite3.h by name)", "tests/unit/test_store.c", {"jansson.h", "sqlite3.h"},
         set(ARROWS)),
        ("test_fetch_server (curl by name)", "tests/unit/test_fetch_server.c",
         {"jansson.h", "curl/curl.h"}, set(ARROWS)),
    ]
    for name, rel, libs, rooms in extra:
        line = line_of(rel)
        c.true("compile_commands.json has %s" % rel, line is not None)
        if line:
            targets[name] = (line, libs, rooms, set())

    tmp = tempfile.mkdtemp(prefix="pdbsym-layering-")
    try:
        n = 0
        for name, (line, libs, rooms, internals) in sorted(targets.items()):
            for header in sorted(OWNERS):
                n += 1
                rc, out = probe(line, "#include <%s>\n" % header, tmp, str(n))
                if header in libs:
                    c.true("%s may include <%s>: the probe compiles" % (name, header), rc == 0, out[-600:])
                else:
                    msg = guard_message(header)
                    c.true("%s including <%s> stops with the guard's error" % (name, header),
                           rc != 0 and msg in out, out[-600:])
            for room, header in sorted(PUBLIC.items()):
                n += 1
                rc, out = probe(line, '#include "%s"\n' % header, tmp, str(n))
                if room in rooms:
                    c.true('%s may include "%s" (server/%s/): the probe compiles' % (name, header, room),
                           rc == 0, out[-600:])
                else:
                    c.true('%s cannot find "%s" (server/%s/)' % (name, header, room),
                           rc != 0 and "No such file" in out, out[-600:])
            for room, header in sorted(INTERNAL.items()):
                n += 1
                rc, out = probe(line, '#include "%s"\n' % header, tmp, str(n))
                if header in internals:
                    c.true('%s may include its internal "%s": the probe compiles' % (name, header),
                           rc == 0, out[-600:])
                else:
                    c.true('%s cannot find "%s" (internal to server/%s/)' % (name, header, room),
                           rc != 0 and "No such file" in out, out[-600:])
        print("%d probes compiled with the compile lines of %d targets" % (n, len(targets)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.done()


if __name__ == "__main__":
    main()
