"""Hostile requests found by review: every refusal keeps a JSON body that
names the problem, even when the request carries bytes that are not UTF-8
(api.md, "Errors")."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pdbsym_server import Checks, Server, parse_raw_response  # noqa: E402

c = Checks()
srv = Server()
try:
    ID = "3773e3530b2e493882eca7324b16c2d91"

    # a method that is not UTF-8: the 405 message quotes it
    st, h, data = parse_raw_response(
        srv.raw(b"G\xffT /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))
    c.eq("non-UTF-8 method: status", st, 405)
    j = json.loads(data)
    c.true("non-UTF-8 method: error named", isinstance(j.get("error"), str) and
           "not allowed" in j["error"], repr(j))

    # a debug_file that is not UTF-8 in the /modules path (%FF decodes to 0xFF)
    st, h, data = srv.request("GET", "/modules/a%FFb.pdb/" + ID)
    j = json.loads(data)
    c.eq("non-UTF-8 debug_file: status", st, 404)
    c.true("non-UTF-8 debug_file: debug_file present",
           isinstance(j.get("debug_file"), str) and j["debug_file"].startswith("a"), repr(j))

    # v5 found_modules keys are "debug_file/breakpad_id" as given, even when
    # the debug_file is a long path with multibyte characters
    for n in (300, 301):
        name = "C:\\" + "\u00e9" * n + "\\x.pdb"
        body = {"memoryMap": [[name, ID.upper()]], "stacks": [[[0, 16]]]}
        st, h, j = srv.json("POST", "/symbolicate/v5", body)
        c.eq("v5 long debug_file %d: status" % n, st, 200)
        c.eq("v5 long debug_file %d: found_modules key" % n,
             list(j["results"][0]["found_modules"]), [name + "/" + ID.upper()])
finally:
    srv.close()
c.done()
