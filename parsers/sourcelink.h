/*
 * sourcelink.h - Source Link maps (document path -> URL) and the Source
 * Server (srcsrv) data of Windows PDBs turned into one.
 *
 * Source Link (dotnet/designs, accepted/2020/diagnostics/source-link.md) is a
 * JSON object {"documents": {KEY: URL, ...}}, for instance the key
 * "C:\\src\\" plus a '*' mapped to "https://host/repo/commit/" plus a '*':
 * a key matches a document path case-insensitively, a key ending in '*'
 * matches every path it prefixes and the '*' of its URL takes the rest of the
 * path (with '\' turned into '/'); the longest match wins, an exact key over
 * a wildcard one of the same length, the first of equals.  A Portable PDB
 * carries one such object (custom debug information); a Windows PDB written
 * by Roslyn one in its "sourcelink" stream, and one written by MSVC's linker
 * one per "sourcelink$N" stream.  pdbsym keeps a module's maps as one string:
 * the object itself, or a JSON array of objects whose rules count as one set.
 *
 * Source Server data ("srcsrv" stream, written by the Debugging Tools'
 * pdbstr and by Microsoft.DiaSymReader.Converter) is an ini text:
 *
 *   SRCSRV: ini ------------------------------------------------
 *   VERSION=2
 *   SRCSRV: variables ------------------------------------------
 *   HGSERVER=https://hg.mozilla.org/mozilla-central
 *   HG_TARGET=%hgserver%/raw-file/%var4%/%var3%
 *   SRCSRVTRG=%fnvar%(%var2%)
 *   SRCSRV: source files ---------------------------------------
 *   c:\build\src\main.cpp*HG_TARGET*src/main.cpp*1ae4eda3ce5e
 *   SRCSRV: end ------------------------------------------------
 *
 * Each source-file line is var1*var2*...*var10 (var1 the document path);
 * SRCSRVTRG, expanded for that line, is where the file comes from.
 * sl_from_srcsrv gives, for every line whose target is an http(s) URL, an
 * exact Source Link rule (path -> URL), so both kinds answer frames the same
 * way.  Expansion follows the srcsrv rules: %name% is a variable (names are
 * case-insensitive, values are expanded in turn), %varN% a field of the line
 * (not expanded again), %fnvar%(x) the variable named by x, %fnbksl%(x) x with
 * '/' turned into '\', %fnfile%(x) the file name of x.
 *
 * Both are untrusted text: sizes are capped, recursion and work bounded, and
 * malformed input gives an error (or, for lines, is skipped), never a crash.
 * No I/O, no globals.
 */
#ifndef PDBSYM_SOURCELINK_H
#define PDBSYM_SOURCELINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"

#define SL_MAX_TEXT ((size_t)64 << 20) /* largest Source Link or srcsrv text read */
#define SL_MAX_URL 2048                /* longest URL built (longer targets are dropped) */

/* A parsed Source Link map, for lookups.  Owns its memory (sl_map_free). */
typedef struct sl_rule sl_rule;
typedef struct sl_map_s {
  char *buf;        /* decoded keys and URLs */
  size_t buf_len;
  sl_rule *exact;   /* exact keys, sorted case-insensitively (stable) */
  size_t nexact;
  sl_rule *wild;    /* wildcard keys, longest prefix first (stable) */
  size_t nwild;
  size_t bytes;     /* allocated (for memory accounting) */
} sl_map;

/* Parses a Source Link object, or an array of them, into m.  Values that
 * are not strings and members other than "documents" are skipped.
 * PS_E_CORRUPT for text that is not JSON, PS_E_LIMIT past SL_MAX_TEXT. */
ps_err sl_map_build(sl_map *m, const char *json, size_t len, ps_budget *budget, ps_diag *diag);
void sl_map_free(sl_map *m, ps_budget *budget);

/* The URL of a document path into out (NUL-terminated); false when no rule
 * covers the path or the URL does not fit in cap bytes. */
bool sl_map_resolve(const sl_map *m, const char *path, char *out, size_t cap);

/* Source Server text -> a Source Link object with one exact rule per source
 * file whose target is an http:// or https:// URL, *out_len bytes and a NUL
 * after them.  *out is malloc'ed (from
 * the budget; the caller frees it and releases *out_cap bytes); *nfiles is
 * the number of rules written.  PS_E_NOT_FOUND when the text has no
 * "SRCSRV: source files" section or no file has a URL target. */
ps_err sl_from_srcsrv(const char *text, size_t len, ps_budget *budget, char **out,
                      size_t *out_len, size_t *out_cap, size_t *nfiles, ps_diag *diag);

#endif
