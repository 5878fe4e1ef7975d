/*
 * ntcode.h - what a .NET trace says about its code: the modules, the JIT'd and
 * ReadyToRun method bodies (address ranges with token and name) and their
 * IL-to-native maps, as compact sorted arrays, so that an instruction pointer
 * of a sample becomes (module, method token, IL offset).
 *
 * Fed from the nettrace.h payload decoders (MethodLoadVerbose and the
 * rundown's MethodDCStopVerbose, MethodILToNativeMap and its rundown form,
 * ModuleLoad / ModuleDCStop), in any order; ntc_finish sorts and links.  Its
 * size is set by the program's code (methods, modules), not by the trace's
 * length, and every allocation counts against a ps_budget.
 *
 * The IL rule is the runtime's (DebuggerJitInfo::MapNativeOffsetToIL,
 * dotnet/runtime src/coreclr/debug/ee/functions.cpp): map entries in native
 * order (stable), an entry repeating the previous IL offset folded into it,
 * each covering up to the next entry's start and the last one open-ended;
 * PROLOG and NO_MAPPING give IL 0, EPILOG the largest IL offset of the map,
 * an offset before the first entry IL 0.  For every frame but the innermost
 * the IP is a return address, so the offset looked up is IP - 1 (the call).
 *
 * Ownership: the table owns its arrays and strings; answers borrow them.
 */
#ifndef PDBSYM_NTCODE_H
#define PDBSYM_NTCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "nettrace.h"
#include "reader.h"

#define NTC_NONE UINT32_MAX

typedef struct {
  uint64_t module_id;
  uint32_t il_path;  /* string offsets (UTF-8) */
  uint32_t native_path;
  uint32_t pdb_path;
  uint8_t pdb_guid[16]; /* on-disk layout */
  uint32_t pdb_age;
  bool has_pdb;
} ntc_module;

typedef struct {
  uint64_t start;
  uint32_t size;
  uint32_t token;
  uint32_t flags;
  uint64_t method_id, rejit, module_id;
  uint32_t module;    /* index into modules, NTC_NONE when the trace has no such module */
  uint32_t ns, name, signature; /* string offsets: namespace (type), method name, signature */
  uint32_t map_first, map_count; /* entries[map_first, +map_count), native order */
  int32_t map_last_il;            /* the largest IL offset of the map */
  uint32_t seq;       /* load order: the last-loaded range wins */
  bool dead;          /* unloaded (ntc_note_unload): no sample after it is its, and
                         ntc_purge drops it */
} ntc_method;

typedef struct {
  uint32_t native;
  int32_t il;
} ntc_entry;

typedef struct {
  uint64_t method_id, rejit;
  uint32_t first, count; /* into entries */
  uint32_t seq;          /* load order, for pairing */
  int32_t last_il;       /* the map's largest IL offset (after ntc_finish) */
  bool used;             /* attached to a body (then count is NTC_NONE) */
} ntc_mapref;

typedef struct {
  ps_budget *budget; /* borrowed */
  char *strs;
  size_t strs_len, strs_cap;
  ntc_module *modules;
  size_t nmodules, cmodules;
  ntc_method *methods;
  size_t nmethods, cmethods;
  size_t nsorted; /* methods[0, nsorted) sorted by start (ntc_finish, ntc_purge) */
  ntc_mapref *maps;
  size_t nmaps, cmaps;
  ntc_entry *entries;
  size_t nentries, centries;
  uint32_t seq;
  /* hashes of the bodies and maps added, so that a trace repeating them
   * (rundowns, concatenated sessions) does not grow the table */
  uint64_t *seen;
  size_t nseen, seen_cap;
  uint64_t duplicates;
  /* bodies the runtime unloaded (MethodUnloadVerbose, marked dead), dropped by ntc_purge */
  size_t ndead;
  uint64_t purged;    /* method bodies dropped by ntc_purge, in all */
  ps_err err; /* sticky */
  bool finished;
} ntc_table;

void ntc_init(ntc_table *t, ps_budget *budget);
void ntc_free(ntc_table *t);
static inline const char *ntc_s(const ntc_table *t, uint32_t off) {
  return t->strs && off < t->strs_len ? t->strs + off : "";
}

/* Each returns false (and sets t->err) when the budget is exhausted. A module
 * seen again (load, then rundown) keeps its first record; a method body or a
 * map identical to one already added is dropped (counted in duplicates). */
bool ntc_add_module(ntc_table *t, const nt_module_load *m);
bool ntc_add_method(ntc_table *t, const nt_method_load *m);
bool ntc_add_il_map(ntc_table *t, const nt_il_map *m); /* extent 0 only; others ignored */
ps_err ntc_finish(ntc_table *t);

/*
 * A live profile's code map lives as long as the process it watches, so it
 * must not keep what the process dropped (pdbsym profile, engine/trace.c):
 *
 *   ntc_note_unload  a MethodUnloadVerbose: the body it names (MethodID,
 *                    start and name; the last loaded such body) is dead:
 *                    ntc_lookup passes over it (a sample after the unload is
 *                    not its, even at an address no later load covers yet)
 *                    and the next ntc_purge drops it (samples taken before
 *                    the unload are named first, by the caller)
 *   ntc_purge        (finished tables only) drops the unloaded bodies and
 *                    rebuilds the arrays, the strings and the set of bodies
 *                    seen from what is left, so the table's bytes follow the
 *                    methods loaded now, not every method ever loaded
 *   ntc_merge        adds a finished table's modules, bodies and maps (a
 *                    rundown session's) to t; ntc_finish then pairs them
 *
 * Each returns false / an error (t->err) when t's budget is exhausted.
 */
bool ntc_note_unload(ntc_table *t, const nt_method_load *m);
ps_err ntc_purge(ntc_table *t);
bool ntc_merge(ntc_table *t, const ntc_table *from);

typedef enum {
  NTC_MAP_NONE = 0,   /* the method has no IL map */
  NTC_MAP_EXACT,      /* at an entry's start */
  NTC_MAP_APPROX,     /* inside an entry's range */
  NTC_MAP_PROLOG,
  NTC_MAP_EPILOG,
  NTC_MAP_UNMAPPED,   /* a NO_MAPPING entry */
  NTC_MAP_NO_INFO     /* before the first entry */
} ntc_mapping;

typedef struct {
  const ntc_method *method; /* NULL: no method of the trace covers the IP */
  const ntc_module *module; /* NULL when unknown */
  uint32_t native_offset;   /* of the looked-up address (IP or IP - 1) */
  int32_t il;               /* -1 when the method has no map */
  ntc_mapping mapping;
  /* For an honest line (trace.c): the IL offsets the map entry covering
   * the offset stands for run from il to il_end (the next larger IL offset
   * any entry of the map names; -1: to the method's end).  For UNMAPPED,
   * estimate is the IL offset of the nearest entry before it (in native
   * order) that maps to IL, else of the nearest after it; -1 when none. */
  int32_t il_end;
  int32_t estimate;
} ntc_answer;

/* A map for method index i (into t->methods, after ntc_finish) that the
 * trace itself does not carry: a ReadyToRun method's, from its image
 * (r2r.h).  The entries (any order) are copied, sorted and folded as the
 * trace's own maps; false (t->err) when the budget is exhausted. */
bool ntc_attach_map(ntc_table *t, size_t i, const ntc_entry *e, uint32_t n);

/* leaf: the innermost frame of its stack (its IP is not a return address).
 * ntc_lookup passes over dead bodies (ntc_note_unload); ntc_lookup_any does
 * not (a callee sampled before its unload, in the same window). */
bool ntc_lookup(const ntc_table *t, uint64_t ip, bool leaf, ntc_answer *out);
bool ntc_lookup_any(const ntc_table *t, uint64_t ip, bool leaf, ntc_answer *out);

/* The runtime's rule over one method's entries (exposed for tests). */
int32_t ntc_il_for_native(const ntc_table *t, const ntc_method *m, uint32_t native,
                          ntc_mapping *how);

#endif
