"""The strings the request reader copies while it reads a piece of the body -
a module's fields (debug_file, debug_id, code_file, code_id, format), a
memoryMap entry's name and id, a v5 frame's module_offset given as a hex
string too wide for 64 bits - are reserved in the request memory budget like
the arrays, against the real `pdbsym serve` over HTTP.

Each body holds one such string of a million bytes in an object that also has
half a million distinct short keys: the reader's duplicate-key state for those
(budgeted already, server/service/jwalk.c) makes the body need more than its
grant of 8 times its size, so the budget itself decides, and the copy of the
long string comes on top of it.  Its control is the same body with the long
string under a member the reader does not keep ("code_ix" for "code_id"; for
v5 a job member "x" beside a frame [0, "0x1"]): the same size, the same keys,
the same arrays, only the copy missing.  For each route:

  1. with no limit, both are answered (200) and the budget's peak count
     (pdbsym_request_memory_peak_bytes) of each is read; the control's passes
     its grant (else the budget below would not decide);
  2. under request_memory_max = the control's peak + 512 KiB (v5: + 1 MiB
     more, the offset's text kept for the answer, which was counted before
     too; more than the grant, so both are admitted): the control is answered
     (200), the body whose string is copied gets the budget's 503 with
     Retry-After and its wording (api.md), and pdbsym_request_memory_bytes is
     back at its idle value (0: request_memory_keep = 0) after each.

When the copies were plain malloc, outside the budget (main before this
test), the long-string body was answered (200) under that budget: on
/symbolicate its peak was the control's, on v5 the control's + 1 MiB.  The
figures (sizes, grants, peaks, answers) are printed.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, Server, need_binary, budget_refusal as is_budget_refusal  # noqa: E402

need_binary()
c = Checks()

NKEYS = (1 << 19) + 1  # as test_http_many_keys.py: the most duplicate-key state per key
TEXT = 1000000         # the long string's bytes
ALPHABET = [chr(x) for x in range(0x21, 0x7f) if chr(x) not in '"\\']
ID = "00000000000000000000000000000001"


def keys(n):
    a = len(ALPHABET)
    return ",".join('"%s":0' % (ALPHABET[i % a] + ALPHABET[(i // a) % a] + ALPHABET[(i // (a * a)) % a])
                    for i in range(n))


KEYS = keys(NKEYS)


def sym_body(kept):
    """A module whose code_id (kept: invalid, far too long) or unread code_ix
    is TEXT bytes, with NKEYS more members."""
    member = "code_id" if kept else "code_ix"
    return ('{"modules":[{"debug_file":"a.pdb","debug_id":"%s-1","%s":"%s",%s}],"frames":[]}'
            % (ID, member, "A" * TEXT, KEYS)).encode()


def v5_body(kept):
    """The bare v5 form: one frame whose module_offset is a hex string of
    TEXT bytes (echoed as given), or [0, "0x1"] and a member "x" of as many
    bytes, with NKEYS more members in the job."""
    if kept:
        frame, extra = '[0,"0x%s"]' % ("f" * (TEXT - 2)), ""
    else:
        frame, extra = '[0,"0x1"]', ',"x":"%s"' % ("f" * (TEXT - 5))
    return ('{"memoryMap":[["a.pdb","%s1"]],"stacks":[[%s]]%s,%s}' % (ID, frame, extra, KEYS)).encode()


def metric(srv, name):
    st, _, text = srv.request("GET", "/metrics")
    for ln in text.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    return None


def settled(srv, idle):
    """pdbsym_request_memory_bytes once it is back at idle (an answer's
    reservation is given back when libmicrohttpd has sent and freed it, just
    after the client has read it), or its value after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        v = metric(srv, "pdbsym_request_memory_bytes")
        if v == idle or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


def post(srv, route, body):
    return srv.request("POST", route, body, {"Content-Type": "application/json"}, timeout=180)


def budget_refusal(x, budget_text):
    st, hdrs, data = x
    return is_budget_refusal(st, hdrs.get("retry-after"), data, budget_text)


def one_peak(route, body):
    """(status, answer, peak count) of body on a fresh server with no limit."""
    srv = Server(config="request_memory_max = 0\nrequest_memory_keep = 0\n")
    try:
        st, _, data = post(srv, route, body)
        return st, data, metric(srv, "pdbsym_request_memory_peak_bytes")
    finally:
        srv.close()


for route, make, what in (("/symbolicate", sym_body, "a module's code_id"),
                          ("/symbolicate/v5", v5_body, "a v5 frame's module_offset")):
    ctrl, kept = make(False), make(True)
    c.eq("%s: the control is the same size" % route, abs(len(ctrl) - len(kept)) <= 8, True)
    st_c, data_c, peak_c = one_peak(route, ctrl)
    st_k, data_k, peak_k = one_peak(route, kept)
    c.eq("%s: the control, no limit: answered" % route, st_c, 200)
    c.eq("%s: %s of %d bytes, no limit: answered" % (route, what, TEXT), st_k, 200)
    if route == "/symbolicate":
        c.true("... the module invalid, its code_id named",
               st_k == 200 and json.loads(data_k)["modules"][0].get("field") == "modules[0].code_id",
               data_k[:200])
    else:
        c.true("... the offset echoed as given",
               st_k == 200 and json.loads(data_k)["results"][0]["stacks"][0][0]["module_offset"]
               == "0x" + "f" * (TEXT - 2), data_k[:200])
    grant = 8 * len(kept)
    c.true("%s: the control needs more than its grant (the budget decides)" % route,
           peak_c is not None and peak_c > 8 * len(ctrl), (peak_c, 8 * len(ctrl)))
    # v5 keeps the offset's text for its answer too (counted before: 1 MiB,
    # the texts' buffer for 10^6 bytes), and the copy the reader makes of
    # it while it reads the frame comes on top of that
    budget = int(peak_c or 0) + (512 << 10) + (0 if route == "/symbolicate" else 1 << 20)
    print("%s: body %d bytes (%d keys, %s of %d bytes), grant %.2f MiB; peak count with no limit: "
          "control %.2f MiB, with the copy %.2f MiB; budget %.2f MiB"
          % (route, len(kept), NKEYS, what, TEXT, grant / 2**20, (peak_c or 0) / 2**20,
             (peak_k or 0) / 2**20, budget / 2**20))
    srv = Server(config="request_memory_max = %d\nrequest_memory_keep = 0\n" % budget)
    try:
        idle = metric(srv, "pdbsym_request_memory_bytes")
        c.eq("%s: idle, nothing reserved" % route, idle, 0.0)
        x = post(srv, route, ctrl)
        st_cb = x[0]
        c.eq("%s: the control under the budget: answered" % route, st_cb, 200)
        c.eq("%s: ... its reservations given back" % route, settled(srv, idle), idle)
        x = post(srv, route, kept)
        c.true("%s: %s copied past the budget: 503 with Retry-After and the budget's wording" % (route, what),
               budget_refusal(x, str(budget)), (x[0], x[1].get("retry-after"), x[2][:200]))
        c.eq("%s: ... its reservations given back" % route, settled(srv, idle), idle)
        refused = metric(srv, "pdbsym_request_memory_refused_total")
        c.true("%s: ... counted as refused" % route, refused is not None and refused >= 1, refused)
        print("%s under request_memory_max = %d: control %d, with the copy %d" % (route, budget, st_cb, x[0]))
    finally:
        srv.close()

c.done()
