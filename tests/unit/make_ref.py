#!/usr/bin/env python3
"""make_ref.py - remakes tests/unit/render_ref.h and api_ref.h, the jansson
renderer and routes that test_render_equiv.c (and fuzz_api) compare the
streaming writer with, from render.c and api.c at a git revision that still
built answers with jansson: every function renamed ref_NAME and made static
inline (outside string literals), nothing else changed.

    python3 tests/unit/make_ref.py . REV   # REV: e.g. 3eaa4ed, main before issue 15

api_ref.h keeps its hand-written tail (from "---- comparing answers" on:
ref_drop_sanitized and ref_same_answer, the documented difference)."""
import re, subprocess, sys
root = sys.argv[1]
rev = sys.argv[2]
def show(path):
    return subprocess.check_output(['git', '-C', root, 'show', f'{rev}:{path}'], text=True)
short = subprocess.check_output(['git', '-C', root, 'rev-parse', '--short', rev], text=True).strip()

def funcs_of(src):
    names = []
    for m in re.finditer(r'^(?:static )?(?:inline )?[A-Za-z_][\w ]*?[\s\*]+(\w+)\([^;]*?\)\s*\{', src, re.M | re.S):
        names.append(m.group(1))
    return names

def transform(src, names, extra):
    body = re.sub(r'^(?:static )?((?:const )?(?:json_t|char|void|bool|api_match|num_result|frame_status|int|size_t)\s*\*?\s*)(\w+)\(',
                  lambda m: 'static inline ' + m.group(1) + m.group(2) + '(', src, flags=re.M)
    pat = re.compile(r'\b(' + '|'.join(sorted(set(names) | set(extra), key=len, reverse=True)) + r')\b')
    # rename outside string and character literals only
    parts = re.split(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')', body)
    for i in range(0, len(parts), 2):
        parts[i] = pat.sub(lambda m: 'ref_' + m.group(1), parts[i])
    return ''.join(parts)

rsrc = show('server/service/render.c')
rnames = funcs_of(rsrc) + ['render_module']
rsrc = rsrc[rsrc.index('#include "render_json.h"'):]
rsrc = re.sub(r'#include [<"][^>"]*[>"]\n', '', rsrc)
rsrc = re.sub(r'^const char \*render_jansson_version\(void\) \{[^\n]*\}\n\n', '', rsrc, flags=re.M)
rbody = transform(rsrc, [n for n in rnames if n != 'render_jansson_version'], [])
rhead = f'''/*
 * render_ref.h - the frame renderer as it was before issue 15 (render.c built
 * answers as jansson objects and serialised them with json_dumps): kept
 * here, for the tests only, as the reference the streaming renderer
 * (render.c on jsonw.h) is compared with, byte for byte
 * (test_render_equiv.c, test_jsonw.c).  Copied from render.c at main
 * {short} by tests/unit/make_ref.py; only the names changed (ref_ prefix)
 * and everything is static.
 */
#ifndef PDBSYM_TEST_RENDER_REF_H
#define PDBSYM_TEST_RENDER_REF_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clrnames.h"
#include "module.h"
#include "pe.h"
#include "render.h" /* render_frame, the description of a frame both renderers take */
#include "symtab.h"

/* Per-module rendering state, as render.h had it. */
typedef struct {{
  const symtab *st;
}} ref_render_module;

'''
open(f'{root}/tests/unit/render_ref.h', 'w').write(rhead + rbody.rstrip() + '\n\n#endif\n')

asrc = show('server/service/api.c')
anames = funcs_of(asrc)
asrc = asrc[asrc.index('/* ---- responses'):]
rfuncs = ['render_string', 'render_hex', 'render_frame_obj', 'render_module_init', 'render_module_free', 'render_module']
abody = transform(asrc, anames, rfuncs)
ahead = f'''/*
 * api_ref.h - the routes as they were before issue 15's writer (api.c built
 * each frame and module of an answer as a jansson object and serialised it
 * with jansson), kept for the tests only: test_render_equiv.c sends the same
 * requests (read by the same request.c) through
 * ref_api_handle and through the service's api_handle and compares the
 * answers byte for byte.  Copied from api.c at main {short} by
 * tests/unit/make_ref.py; only the names changed (ref_ prefix) and
 * everything is static.
 * It uses the engine and the metrics as the real routes do, and
 * render_ref.h for frames.
 */
#ifndef PDBSYM_TEST_API_REF_H
#define PDBSYM_TEST_API_REF_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "api.h"
#include "log.h"
#include "metrics.h"
#include "render_ref.h"
#include "request.h"

'''
old = open(f'{root}/tests/unit/api_ref.h').read()
tail = old[old.index('/* ---- comparing answers'):]
open(f'{root}/tests/unit/api_ref.h', 'w').write(ahead + abody.rstrip() + '\n\n' + tail)
