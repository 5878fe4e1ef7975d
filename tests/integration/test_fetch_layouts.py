#!/usr/bin/env python3
"""Symbol-server layouts, keys and sources, against tests/symserver.py and
`pdbsym fetch` run as a process: plain keys, .pd_ (MSZIP cabinets from
tests/cabmake.py, and the corpus .pd_ files against cabextract), file.ptr
PATH:/MSG:, index2 two-tier, SSQP lowercase, Portable and PE keys, local
folders, srv*CACHE*URL, source order, headers, URL encoding."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from fetchlib import (AGE, DEBUG_ID, KEY, PKEY, Checker, Server, cabmake, fake_pdb,  # noqa: E402
                      fetch, put)


def main():
    c = Checker("test_fetch_layouts")
    root = os.path.join(c.tmp, "store")
    outdir = os.path.join(c.tmp, "out")
    os.makedirs(root)
    os.makedirs(outdir)
    srv = Server(root)
    out = os.path.join(outdir, "got.pdb")
    body = fake_pdb(50000, seed=2)

    def run(name, args, sp=None, **kw):
        if os.path.exists(out):
            os.unlink(out)
        srv.reset()
        rc, so, se, dt = fetch(args, sp or srv.url, out, **kw)
        print("%-28s rc=%d %.2fs %s%s" % (name, rc, dt, so.strip(), se.strip()[:200]))
        c.no_temp_files(outdir, ["got.pdb"])
        return rc, so, se

    def got():
        with open(out, "rb") as f:
            return f.read()

    # 1. plain key: one request, nothing else probed
    put(root, "foo.pdb/%s/foo.pdb" % KEY, body)
    rc, so, _ = run("plain", ["C:\\build\\foo.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, "plain key fetched byte-identical")
    c.check(srv.hits() == {"/foo.pdb/%s/foo.pdb" % KEY: 1}, "plain: exactly one request")
    c.check(so.split("\t")[2].strip() == srv.url + "/foo.pdb/%s/foo.pdb" % KEY,
            "plain: says where it came from")
    # the 32-hex-digit (Breakpad) debug id names the same key
    rc, _, _ = run("breakpad id", ["foo.pdb", KEY, "--format", "windows"])
    c.check(rc == 0 and got() == body, "breakpad-form debug id")

    # 2. compressed .pd_ only (MSZIP cabinet)
    put(root, "bar.pdb/%s/bar.pd_" % KEY, cabmake.make_cab([("bar.pdb", body)]))
    rc, _, _ = run(".pd_ only", ["bar.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, ".pd_ extracted byte-identical")
    h = srv.hits()
    c.check(h.get("/bar.pdb/%s/bar.pdb" % KEY) == 1 and h.get("/bar.pdb/%s/bar.pd_" % KEY) == 1
            and h.get("/bar.pdb/%s/file.ptr" % KEY) == 1 and len(h) == 3,
            ".pd_: plain, then compressed and file.ptr together, nothing more (%s)" % h)
    # a stored (uncompressed) cabinet too
    put(root, "bar2.pdb/%s/bar2.pd_" % KEY,
        cabmake.make_cab([("bar2.pdb", body)], compress="none"))
    rc, _, _ = run(".pd_ stored", ["bar2.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, "stored .pd_ extracted")

    # 3. file.ptr PATH: to a URL, and MSG:
    put(root, "real/ptr-target.pdb", body)
    put(root, "ptr.pdb/%s/file.ptr" % KEY, ("PATH:%s/real/ptr-target.pdb\r\n" % srv.url).encode())
    rc, so, _ = run("file.ptr PATH", ["ptr.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, "file.ptr PATH: followed")
    c.check("/real/ptr-target.pdb" in so, "file.ptr: the source named is the target")
    put(root, "msg.pdb/%s/file.ptr" % KEY, b"MSG: withdrawn by the vendor\r\n")
    rc, _, se = run("file.ptr MSG", ["msg.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 1 and "withdrawn by the vendor" in se and not os.path.exists(out),
            "file.ptr MSG: is a miss that says the message")
    # a remote file.ptr naming a local path is not followed
    put(root, "evil.pdb/%s/file.ptr" % KEY, b"PATH:/etc/passwd\r\n")
    rc, _, se = run("file.ptr local path", ["evil.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 1 and not os.path.exists(out), "remote file.ptr with a local path refused")

    # 4. index2 two-tier layout
    put(root, "tw/twotier.pdb/%s/twotier.pdb" % KEY, body)
    rc, _, _ = run("index2", ["twotier.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, "index2 layout found")

    # 5. SSQP lowercase
    put(root, "mixed.pdb/%s/mixed.pdb" % KEY.lower(), body)
    rc, _, _ = run("ssqp lowercase", ["Mixed.PDB", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, "SSQP lowercase key found")
    c.check("/mixed.pdb/%s/mixed.pdb" % KEY.lower() in srv.hits(), "lowercase path requested")

    # 6. Portable key; without --format both keys are tried
    put(root, "port.pdb/%s/port.pdb" % PKEY, body)
    rc, _, _ = run("portable", ["port.pdb", DEBUG_ID, "--format", "portable"])
    c.check(rc == 0 and got() == body, "portable key")
    rc, _, _ = run("either format", ["port.pdb", DEBUG_ID])
    c.check(rc == 0 and got() == body, "no format: the portable key is tried too")

    # 7. PE image key: TIMESTAMP (8 hex) + SizeOfImage hex
    put(root, "foo.dll/5F1A2B3C1E000/foo.dll", body)
    rc, _, _ = run("pe image", ["--code", "foo.dll", "5f1a2b3c1e000"])
    c.check(rc == 0 and got() == body, "PE image key")

    # 8. names that need URL encoding reach the server intact
    put(root, "my lib#1.pdb/%s/my lib#1.pdb" % KEY, body)
    rc, _, _ = run("url encoding", ["my lib#1.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and got() == body, "name with space and '#' URL-encoded")
    # invalid names never reach the network
    for bad in ["a%2f.pdb", "x\x01.pdb", "..", "a:b.pdb", "q?.pdb"]:
        rc, _, _ = run("invalid name", [bad, DEBUG_ID])
        c.check(rc == 2 and srv.hits() == {}, "invalid name %r refused before any request" % bad)
    # a path is reduced to its last component
    rc, _, _ = run("path reduced", ["../../etc/foo.pdb", DEBUG_ID, "--format", "windows"])
    c.check(rc == 0 and list(srv.hits()) == ["/foo.pdb/%s/foo.pdb" % KEY],
            "'../../etc/foo.pdb' asks for foo.pdb only")

    # 9. local folders: flat, index2.txt two-tier, and srv*CACHE*URL
    flat = os.path.join(c.tmp, "flat")
    put(flat, "loc.pdb/%s/loc.pdb" % KEY, body)
    rc, so, _ = run("local folder", ["loc.pdb", DEBUG_ID, "--format", "windows"], sp=flat)
    c.check(rc == 0 and got() == body and flat in so, "local folder source")
    # a folder's file.ptr may name a path: relative to the folder, or absolute
    put(flat, "elsewhere/real.pdb", body)
    put(flat, "rel.pdb/%s/file.ptr" % KEY, b"PATH:elsewhere\\real.pdb\r\n")
    rc, so, _ = run("folder file.ptr relative", ["rel.pdb", DEBUG_ID, "--format", "windows"],
                    sp=flat)
    c.check(rc == 0 and got() == body and "elsewhere/real.pdb" in so,
            "folder file.ptr with a relative path")
    put(flat, "abs.pdb/%s/file.ptr" % KEY,
        ("PATH:%s\n" % os.path.join(flat, "elsewhere", "real.pdb")).encode())
    rc, _, _ = run("folder file.ptr absolute", ["abs.pdb", DEBUG_ID, "--format", "windows"],
                   sp=flat)
    c.check(rc == 0 and got() == body, "folder file.ptr with an absolute path")
    two = os.path.join(c.tmp, "two")
    put(two, "index2.txt", b"")
    put(two, "lo/loc.pdb/%s/loc.pd_" % KEY, cabmake.make_cab([("loc.pdb", body)]))
    rc, _, _ = run("local index2 .pd_", ["loc.pdb", DEBUG_ID, "--format", "windows"], sp=two)
    c.check(rc == 0 and got() == body, "local index2 folder with .pd_")
    cache = os.path.join(c.tmp, "cache")
    put(cache, "cached.pdb/%s/cached.pdb" % KEY, body)
    rc, _, _ = run("srv*CACHE*URL", ["cached.pdb", DEBUG_ID, "--format", "windows"],
                   sp="srv*%s*%s" % (cache, srv.url))
    c.check(rc == 0 and got() == body and srv.hits() == {},
            "downstream store read first, no HTTP request")
    rc, _, _ = run("srv*CACHE*URL miss", ["foo.pdb", DEBUG_ID, "--format", "windows"],
                   sp="srv*%s*%s" % (cache, srv.url))
    c.check(rc == 0 and got() == body and len(srv.hits()) == 1, "then the upstream")
    c.check(not os.path.exists(os.path.join(cache, "foo.pdb")), "downstream store not written")

    # 10. order: a source that misses, then one that has it
    empty = os.path.join(c.tmp, "empty")
    os.makedirs(empty)
    rc, so, _ = run("second source", ["foo.pdb", DEBUG_ID, "--format", "windows"],
                    sp="%s;srv*%s" % (empty, srv.url))
    c.check(rc == 0 and srv.url in so, "second source used after a miss")

    # 11. headers: per source ('|Name: value') and --header
    srv_rules = {"/foo.pdb/%s/foo.pdb" % KEY: {"require_header": {"Authorization": "Bearer t0k"}}}
    srv.reset()
    srv.control(srv_rules)
    rc, _, _, _ = fetch(["foo.pdb", DEBUG_ID, "--format", "windows"], srv.url, out)
    c.check(rc == 1, "401 without the header")
    srv.control(srv_rules)
    rc, _, _, _ = fetch(["foo.pdb", DEBUG_ID, "--format", "windows"],
                     "srv*%s|Authorization: Bearer t0k" % srv.url, out)
    c.check(rc == 0, "per-source header sent")
    rc, _, _, _ = fetch(["foo.pdb", DEBUG_ID, "--format", "windows", "--header",
                      "Authorization: Bearer t0k"], srv.url, out)
    c.check(rc == 0, "--header sent")
    # a file.ptr leading to another origin does not get the source's token
    put(root, "tok.pdb/%s/file.ptr" % KEY,
        ("PATH:http://localhost:%d/real/tok.pdb" % srv.port).encode())
    put(root, "real/tok.pdb", body)
    srv.reset()
    srv.control({"/real/tok.pdb": {"require_header": {"Authorization": "Bearer t0k"}}})
    rc, _, _, _ = fetch(["tok.pdb", DEBUG_ID, "--format", "windows"],
                        "srv*%s|Authorization: Bearer t0k" % srv.url, out)
    c.check(rc == 1 and srv.hits().get("/real/tok.pdb") == 1,
            "token not sent to a file.ptr target on another origin")
    put(root, "tok.pdb/%s/file.ptr" % KEY, ("PATH:%s/real/tok.pdb" % srv.url).encode())
    rc, _, _, _ = fetch(["tok.pdb", DEBUG_ID, "--format", "windows"],
                        "srv*%s|Authorization: Bearer t0k" % srv.url, out)
    c.check(rc == 0, "token sent to a file.ptr target on the same origin")
    rc, _, se, _ = fetch(["foo.pdb", DEBUG_ID, "--header", "Bad\r\nHeader: x"], srv.url, out)
    c.check(rc == 2, "header with CR/LF refused")

    # 12. corpus .pd_ files: byte-identical to cabextract's output
    corpus = os.path.join(SRC_DIR, "..", "shared", "corpus", "other")
    pds = [("tecken/qipcap64.pd_", "qipcap64.pdb", "293A285ED25871934C4C44205044422E1"),
           ("dump_syms/basic32.pd_", "basic32.pdb", "34060D222DBB44E5AA72243CE8326C2F2")]
    if not os.path.isdir(corpus) or not shutil.which("cabextract"):
        harness.skip_part("corpus .pd_ files against cabextract: %s" % (
            "../shared/corpus absent" if not os.path.isdir(corpus) else "cabextract not installed"))
    else:
        for rel, name, key in pds:
            src = os.path.join(corpus, rel)
            if not os.path.exists(src):
                continue
            with open(src, "rb") as f:
                put(root, "%s/%s/%s_" % (name, key, name[:-1]), f.read())
            ref = os.path.join(c.tmp, "cabx")
            shutil.rmtree(ref, ignore_errors=True)
            subprocess.run(["cabextract", "-q", "-d", ref, src], check=True)
            with open(os.path.join(ref, name), "rb") as f:
                want = f.read()
            rc, _, _ = run("corpus " + name, [name, key, "--format", "windows"])
            c.check(rc == 0 and got() == want, "%s identical to cabextract" % rel)

    srv.stop()
    return c.finish()


SRC_DIR = os.environ.get("PDBSYM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))

if __name__ == "__main__":
    sys.exit(main())
