#!/usr/bin/env python3
"""make_request_ref.py - remakes tests/unit/request_ref.h, the reading of
request bodies as it was when every key, scalar and frame went through
jansson (jwalk.c handing each value to json_loadb, request.c reading frames
from jansson trees), which test_request_diff.c and fuzz_request_diff.c
compare the walker's own scanner with: the same bodies must be accepted or
refused alike, with the same error text and the same arrays.

    python3 tests/unit/make_request_ref.py . REV   # REV: e.g. 8e90cc1 (mspeed before its scanner)

From REV's server/service/internal/jwalk.h (its types), jwalk.c and
request.c: every function made static inline and renamed ref_NAME, the
walker's names (jwalk, jw_*, JW_*) ref_-prefixed, outside string
literals; nothing else changed."""
import re
import subprocess
import sys

root, rev = sys.argv[1], sys.argv[2]


def show(path):
    return subprocess.check_output(['git', '-C', root, 'show', f'{rev}:{path}'], text=True)


short = subprocess.check_output(['git', '-C', root, 'rev-parse', '--short', rev], text=True).strip()


def body_of(src):
    """the file after its #include lines (and any comment before them)"""
    last = max(m.end() for m in re.finditer(r'^#include [<"][^>"]*[>"]\n', src, re.M))
    return src[last:]


def staticize(src):
    """every function definition at column 0 becomes static inline; returns
    the text and the functions' names"""
    names = []
    out = []
    lines = src.split('\n')
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = re.match(r'^(?:static )?((?:const )?[A-Za-z_]\w*(?: \w+)*[ *]+)(\w+)\(', ln)
        if m and not ln.startswith(('typedef', 'struct', 'enum', 'return')):
            # a definition when '{' comes before ';'
            j, text = i, ln
            while '{' not in text and ';' not in text and j + 1 < len(lines):
                j += 1
                text += lines[j]
            if '{' in text and (';' not in text or text.index('{') < text.index(';')):
                names.append(m.group(2))
                ln = 'static inline ' + m.group(1) + m.group(2) + ln[m.end(2):]
        out.append(ln)
        i += 1
    return '\n'.join(out), names


def rename(src, names):
    """the functions where they are called or defined (a local may share a
    function's name: "bad"), the comparator qsort is given, and the
    walker's names everywhere"""
    funcs = '|'.join(sorted(set(names), key=len, reverse=True))
    pat = re.compile(r'\b(?:(' + funcs + r')(?=\()|(cmp_stack_pos|jwalk|jw_\w+|JW_\w+))\b')
    parts = re.split(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')', src)
    for i in range(0, len(parts), 2):
        parts[i] = pat.sub(lambda m: ('REF_' if m.group(0).startswith('JW_') else 'ref_') + m.group(0), parts[i])
    return ''.join(parts)


hdr = show('server/service/internal/jwalk.h')
types = hdr[hdr.index('#define JW_MAX_DEPTH'):hdr.index('} jwalk;') + len('} jwalk;')] + '\n'
jsrc, jnames = staticize(body_of(show('server/service/jwalk.c')))
rsrc, rnames = staticize(body_of(show('server/service/request.c')))
text = rename(types + jsrc + rsrc, jnames + rnames)

head = f'''/*
 * request_ref.h - request bodies read as they were before the walker had a
 * scanner of its own: jwalk.c handed every key and scalar to json_loadb and
 * request.c read each frame from a jansson tree.  Kept for the tests only,
 * as the reference the walker's own scanner is compared with
 * (test_request_diff.c, fuzz_request_diff.c): same accept or refuse, same
 * error text, same arrays.  Copied from jwalk.h, jwalk.c and request.c at
 * {short} by tests/unit/make_request_ref.py; only the names changed (ref_
 * prefix) and everything is static.
 */
#ifndef PDBSYM_TEST_REQUEST_REF_H
#define PDBSYM_TEST_REQUEST_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "request.h"

'''
open(f'{root}/tests/unit/request_ref.h', 'w').write(head + text.strip() + '\n\n#endif\n')
