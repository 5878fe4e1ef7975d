/*
 * fetch.h - the symbol-server client: the public header of server/fetch/,
 * the only room that includes curl/curl.h (the build refuses it anywhere
 * else; docs/architecture.md).
 *
 * Sources are an ordered list parsed from an _NT_SYMBOL_PATH-style string
 * ("srv*https://host/path;srv*CACHE*https://other;/local/symstore").  A PDB is
 * looked for under name.pdb/<GUID><age>/name.pdb (Windows) or
 * name.pdb/<GUID>FFFFFFFF/name.pdb (Portable), the lowercase SSQP variant, the
 * compressed name.pd_ (CAB), file.ptr redirects and the index2.txt two-tier
 * layout; a PE image under name.dll/<TIMESTAMP><SizeOfImage>/name.dll.
 *
 * A found file is downloaded to a temporary file, decompressed, checked by
 * the caller's verify callback (GUID and age must match: a mismatch makes the
 * client go on to the next source), and handed over as a path the caller owns
 * (and unlinks).
 */
#ifndef PDBSYM_FETCH_H
#define PDBSYM_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "module.h"

typedef struct fetcher fetcher;

/* Microsoft's public symbol server: the source of an empty symbol path, and
 * the upstream of an empty srv* element. */
#define FETCH_DEFAULT_SERVER "https://msdl.microsoft.com/download/symbols"

typedef struct {
  const char *symbol_path;       /* NULL: Microsoft's public symbol server */
  const char *tmp_dir;           /* where downloads land before hand-over */
  uint64_t max_download_bytes;   /* 0: 2 GiB */
  uint64_t max_inflated_bytes;   /* cap on a decompressed .pd_ (0: 4 GiB) */
  long connect_timeout_ms;       /* 0: 10000 */
  long low_speed_time_s;         /* 0: 30 (abort when under low_speed_limit that long) */
  long low_speed_limit;          /* bytes/s, 0: 1024 */
  int max_retries;               /* 0: 3, <0: none (on 5xx, timeouts, resets; never on 404) */
  int max_redirects;             /* 0: 5 */
  int max_parallel_per_source;   /* 0: 4 */
  const char *const *headers;    /* extra "Name: value" headers for every HTTP source, NULL-terminated */
  long retry_base_ms;            /* 0: 250 (backoff: base * 2^attempt, +-25%, at most 8 s) */
} fetch_config;

typedef enum { FETCH_FOUND = 0, FETCH_NOT_FOUND, FETCH_ERROR } fetch_status;

/* Called with the downloaded, decompressed file before it is accepted;
 * returns true to accept.  ctx is the caller's. */
typedef bool (*fetch_verify_fn)(void *ctx, const char *path, ps_diag *diag);

/* The identity check (fetch_verify.c), the verify step every caller uses:
 * with ctx a fetch_identity, a PDB is accepted when it parses whole and
 * carries m's GUID and age (the DBI or the info stream's age; a Portable PDB:
 * its GUID) in format fmt (ST_FORMAT_UNKNOWN: either); an image (image true)
 * when it is a PE with m's TimeDateStamp and SizeOfImage.  A refusal sets
 * diag: PS_E_MISMATCH naming both identities, or the parser's error. */
typedef struct {
  const module_id *m;
  st_format fmt;
  bool image;
  uint64_t max_bytes;  /* cap on the file (0: none) */
  bool keep;           /* PDB: keep the accepted file's table in st */
  symtab *st;          /* out, with keep: the accepted table, finished (malloc'd; the
                        * caller st_free's and frees it; a later accepted file replaces it) */
  bool malformed;      /* out: a file offered could not be parsed at all */
  char error[256];     /* out, with malformed: why */
} fetch_identity;
bool fetch_verify_identity(void *ctx, const char *path, ps_diag *diag);

ps_err fetch_open(const fetch_config *cfg, fetcher **out, ps_diag *diag);
void fetch_close(fetcher *f);

/* Looks for the module's PDB in format fmt (ST_FORMAT_WINDOWS or PORTABLE).
 * On FETCH_FOUND, path_out holds the file's path (caller unlinks it) and
 * source_out the URL or path it came from.  On FETCH_ERROR diag says why. */
fetch_status fetch_pdb(fetcher *f, const module_id *m, st_format fmt, fetch_verify_fn verify,
                       void *ctx, char *path_out, size_t path_cap, char *source_out,
                       size_t source_cap, ps_diag *diag);

/* Looks for the module's PE image (code_file + code id). */
fetch_status fetch_image(fetcher *f, const module_id *m, fetch_verify_fn verify, void *ctx,
                         char *path_out, size_t path_cap, char *source_out, size_t source_cap,
                         ps_diag *diag);

/* --- one plain request (`pdbsym health`) --- */

/* GETs url (http or https) once: no proxy, no redirect followed, no retry,
 * all of it (connecting included) within timeout_ms.  true when an HTTP
 * response came back: *status is its code and body (may be NULL) holds the
 * first body_cap - 1 bytes of its body, NUL-terminated (the rest is read and
 * dropped).  false when no response came: err says why (libcurl's words). */
bool fetch_http_get(const char *url, long timeout_ms, long *status, char *body, size_t body_cap,
                    char *err, size_t err_cap);

/* libcurl's version line, e.g. "libcurl/7.88.1 OpenSSL/3.0.11 zlib/1.2.13" (static). */
const char *fetch_curl_version(void);

/* --- introspection, for tests and `pdbsym fetch -v` --- */

/* The parsed sources, in probing order. */
typedef struct {
  bool http;          /* else a local folder */
  const char *base;   /* URL (no trailing '/') or folder; borrowed from f */
  size_t nheaders;    /* extra headers sent to this source */
} fetch_source_info;
size_t fetch_source_count(const fetcher *f);
bool fetch_source_get(const fetcher *f, size_t i, fetch_source_info *out);

/* The relative paths probed for a module, in default order, unencoded:
 * image=false: the PDB under format fmt (WINDOWS or PORTABLE); true: the PE.
 * index2: include the two-tier variants.  Returns how many were written
 * (each at most FETCH_REL_MAX bytes with the NUL); 0 when m lacks what the
 * key needs. */
#define FETCH_REL_MAX 800
#define FETCH_VARIANTS 7
size_t fetch_candidates(const module_id *m, st_format fmt, bool image,
                        char out[FETCH_VARIANTS][FETCH_REL_MAX]);

/* Percent-encodes everything but A-Z a-z 0-9 - . _ ~ and '/'; false if it
 * does not fit. */
bool fetch_url_escape(const char *in, char *out, size_t cap);

#endif
