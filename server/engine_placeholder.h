/*
 * engine_placeholder.h - lets `pdbsym serve` link and run while the engine's
 * dependencies (server/store.c, server/fetch.c, parsers/pdb.c, pe.c, ppdb.c)
 * are not all in the tree yet.
 *
 * When they are all present, this header only includes engine.h and the real
 * engine is used.  Otherwise the engine functions the HTTP layer calls are
 * renamed to placeholder_* (engine_placeholder.c), so that server/engine.c is
 * never pulled into the link.  The placeholder answers every module
 * "missing"; for tests, PDBSYM_PLACEHOLDER_DELAY_MS makes each resolve take
 * that long (MOD_PENDING when the caller's deadline comes first).
 *
 * Include it instead of engine.h in the HTTP layer (api.c, http.c,
 * cmd_serve.c).  Once the engine links, delete both placeholder files and
 * include engine.h.
 */
#ifndef PDBSYM_ENGINE_PLACEHOLDER_H
#define PDBSYM_ENGINE_PLACEHOLDER_H

#include "engine.h"

#if defined(__has_include)
#if __has_include("engine.c") && __has_include("store.c") && __has_include("fetch.c") && \
    __has_include("../parsers/pdb.c") && __has_include("../parsers/pe.c") &&              \
    __has_include("../parsers/ppdb.c")
#define PDBSYM_REAL_ENGINE 1
#endif
#endif

#ifndef PDBSYM_REAL_ENGINE
ps_err placeholder_engine_open(const engine_config *cfg, engine **out, ps_diag *diag);
void placeholder_engine_close(engine *e);
void placeholder_engine_resolve(engine *e, const module_id *m, uint64_t deadline_ms,
                                mod_handle *out);
void placeholder_engine_release(engine *e, mod_handle *h);
bool placeholder_engine_ready(engine *e);
bool placeholder_engine_cached(engine *e, const module_id *m, st_format fmt);
const char *placeholder_mod_status_name(mod_status s);
uint64_t placeholder_engine_now_ms(void);
#define engine_open placeholder_engine_open
#define engine_close placeholder_engine_close
#define engine_resolve placeholder_engine_resolve
#define engine_release placeholder_engine_release
#define engine_ready placeholder_engine_ready
#define engine_cached placeholder_engine_cached
#define mod_status_name placeholder_mod_status_name
#define engine_now_ms placeholder_engine_now_ms
#endif

#endif
