/*
 * fetch.h - the symbol-server client: the public header of server/fetch/,
 * the only room that includes curl/curl.h (the build refuses it anywhere
 * else; docs/architecture.md).
 *
 * Sources are an ordered list parsed from an _NT_SYMBOL_PATH-style string
 * ("srv*https://host/path;srv*CACHE*https://other;/local/symstore").  A PDB is
 * looked for under name.pdb/<GUID><age>/name.pdb (Windows) or
 * name.pdb/<GUID>FFFFFFFF/name.pdb (Portable), a PE image under
 * name.dll/<TIMESTAMP><SizeOfImage>/name.dll, in the casings real stores use
 * (all upper, symstore.exe's mixed case, SSQP's all lower, and an image's
 * code id as the caller spelt it), compressed
 * (name.pd_, a CAB), behind file.ptr, flat or two-tier (index2.txt); see
 * docs/fetch.md for the order.
 *
 * One lookup is a fetch_op.  Folder sources are read on the caller's thread;
 * HTTP sources are probed in parallel by the fetcher's one network thread
 * (curl's multi interface), which never parses anything: a finished download
 * is handed back to the caller's thread, which unpacks a cabinet and runs the
 * verify callback (GUID and age must match: a mismatch gives that source up).
 * So a caller never waits on a source: fetch_op_step returns FETCH_PENDING
 * and the wake callback says when there is more to do.
 *
 * Every transfer has a connect deadline, a first-byte deadline, a total
 * deadline that grows with the declared length, a byte cap, a cap on
 * decoded/encoded bytes and a share of a disk budget for all transfers at
 * once; redirects are followed here, never by libcurl, so a source's headers
 * never reach another origin.
 */
#ifndef PDBSYM_FETCH_H
#define PDBSYM_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "module.h"

typedef struct fetcher fetcher;

/* Microsoft's public symbol server: the source of an empty symbol path, and
 * the upstream of an empty srv* element. */
#define FETCH_DEFAULT_SERVER "https://msdl.microsoft.com/download/symbols"

typedef struct {
  const char *symbol_path;       /* NULL: Microsoft's public symbol server */
  const char *tmp_dir;           /* where downloads land before hand-over */
  bool private_tmp;              /* downloads go to a folder of this process under
                                    tmp_dir, locked while it runs (fetch_sweep_tmp
                                    removes those of processes that ended) */
  bool no_network;               /* HTTP sources are skipped (folders only) */
  uint64_t max_download_bytes;   /* one file, downloaded or copied; 0: 2 GiB */
  uint64_t max_inflated_bytes;   /* a decompressed .pd_ member; 0: max_download_bytes */
  uint64_t disk_budget_bytes;    /* all temporary files at once; 0: no budget
                                    (fetch_set_disk_budget changes it) */
  int max_parallel_per_source;   /* transfers at once per source; 0: 4 */
  dl_limits lim;                 /* deadlines, retries, redirects, ratio, backoff (config.h) */
  const char *const *headers;    /* extra "Name: value" headers for every HTTP source, NULL-terminated */
} fetch_config;

typedef enum { FETCH_FOUND = 0, FETCH_NOT_FOUND, FETCH_ERROR, FETCH_PENDING } fetch_status;

/* What the verify callback is shown: a downloaded (and decompressed) file. */
typedef struct {
  const char *path;      /* the file; borrowed */
  const char *source;    /* URL (after redirects) or path it came from */
  st_format format;      /* the key it was found under (PDB lookups; UNKNOWN for images) */
  bool clean;            /* complete by construction: a local file, or an HTTP 200 whose
                            declared length arrived in full and is not text/html */
} fetch_file;

/* Called with each downloaded file before it is accepted, on the thread that
 * called fetch_op_step (or fetch_pdb); returns true to accept.  On false, diag
 * says why (PS_E_MISMATCH for another file's identity); the source is given up. */
typedef bool (*fetch_verify_fn)(void *ctx, const fetch_file *file, ps_diag *diag);

/* The identity check (fetch_verify.c), the verify step every caller uses:
 * with ctx a fetch_identity, a PDB is accepted when it parses whole and
 * carries m's GUID and age (the DBI or the info stream's age; a Portable PDB:
 * its GUID) in format fmt (ST_FORMAT_UNKNOWN: the format of the key the file
 * was found under, or either); an image (image true) when it is a PE with m's
 * TimeDateStamp and SizeOfImage.  A refusal sets diag: PS_E_MISMATCH naming
 * both identities, or the parser's error. */
typedef struct {
  const module_id *m;
  st_format fmt;
  bool image;
  uint64_t max_bytes;  /* cap on the file (0: none) */
  bool keep;           /* PDB: keep the accepted file's table in st */
  symtab *st;          /* out, with keep: the accepted table, finished (malloc'd; the
                        * caller st_free's and frees it; a later accepted file replaces it) */
  bool malformed;      /* out: a file offered could not be parsed at all */
  bool suspect;        /* out, with malformed: one such file may not have been the file
                        * at all (not clean, or no PDB signature: an HTML page...) */
  char error[256];     /* out, with malformed: why */
} fetch_identity;
bool fetch_verify_identity(void *ctx, const fetch_file *file, ps_diag *diag);

ps_err fetch_open(const fetch_config *cfg, fetcher **out, ps_diag *diag);
/* Stops the network thread (transfers running are abandoned, their files
 * removed).  Every op must have been freed before. */
void fetch_close(fetcher *f);

/* Bytes the temporary files of all transfers may hold together (0: none).
 * Checked as each transfer writes; a transfer that would pass it fails. */
void fetch_set_disk_budget(fetcher *f, uint64_t bytes);
/* Bytes the temporary files of this fetcher hold now. */
uint64_t fetch_tmp_bytes(const fetcher *f);
/* Of those, the bytes of files that have proved to be what they claim: whole
 * files, and transfers whose first bytes parsed as their key's format (the
 * MSF superblock with its size, a Portable PDB's metadata root, a PE's MZ, a
 * cabinet's header with its size).  The cache evicts only for these. */
uint64_t fetch_tmp_proved_bytes(const fetcher *f);

/* --- one lookup ------------------------------------------------------------ */

typedef struct fetch_op fetch_op;

/* Called on the network thread, at most once after each fetch_op_step that
 * returned FETCH_PENDING, when the op has more to do.  Must not block and must
 * not call back into the fetcher (typically: queue the caller's job). */
typedef void (*fetch_wake_fn)(void *ctx);

/* A lookup of m: its PDB (image false; fmt WINDOWS, PORTABLE or UNKNOWN for
 * both keys) or its PE image (image true: code_file + code id).  NULL with
 * diag set when m lacks what the key needs. */
fetch_op *fetch_op_new(fetcher *f, const module_id *m, bool image, st_format fmt,
                       fetch_wake_fn wake, void *wake_ctx, ps_diag *diag);

typedef struct {
  char path[1024];       /* the accepted file: the caller owns it (fetch_result_done) */
  char source[1024];     /* URL or path it came from */
  st_format format;      /* the key it was found under */
  uint64_t bytes;        /* of the file: counted as a download until fetch_result_done */
  bool proved;
} fetch_result;

/* The caller is done with res's file (after FETCH_FOUND): it is unlinked, and
 * its bytes no longer count against the disk budget (nor as proved). */
void fetch_result_done(fetcher *f, fetch_result *res);

/* The lane of the op's probes in every source's queue (0, the default: the
 * common lane).  Lanes are served round-robin, so the lookups of one owner
 * (the engine: one request) wait behind each other, not behind another's.
 * Before the first fetch_op_step. */
void fetch_op_set_lane(fetch_op *op, uint64_t id);

/* Advances the lookup on the calling thread: the folder sources (first call),
 * then the downloads the network thread finished (unpacked and verified here).
 * Returns FETCH_FOUND (res filled), FETCH_NOT_FOUND, FETCH_ERROR (diag says
 * why: the most telling failure of any source), or FETCH_PENDING: nothing to
 * do until wake is called.  After anything but FETCH_PENDING the op is over;
 * free it.  Not to be called from two threads at once. */
fetch_status fetch_op_step(fetch_op *op, fetch_verify_fn verify, void *ctx, fetch_result *res,
                           ps_diag *diag);

/* Ends the lookup (transfers still running are cancelled, files removed).
 * After it, wake is never called. */
void fetch_op_free(fetch_op *op);

/* After FETCH_ERROR: when a transfer that had proved itself (see
 * fetch_tmp_proved_bytes) failed because the disk budget was used up, the
 * bytes it needed (the size its format states, its declared length, or
 * twice what came), else 0 (also for a transfer that had not proved itself:
 * nothing is to be evicted for it).  The caller may make room (evict) and
 * look the module up again. */
uint64_t fetch_op_room_needed(fetch_op *op);

/* --- synchronous lookups (the CLI) ------------------------------------------ */

/* Looks for the module's PDB in format fmt (ST_FORMAT_WINDOWS, PORTABLE, or
 * UNKNOWN for both) and waits for the answer.  On FETCH_FOUND, path_out holds
 * the file's path (caller unlinks it) and source_out the URL or path it came
 * from.  On FETCH_ERROR diag says why. */
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

/* POSTs body (len bytes, of content_type) to url (http or https) once: no
 * proxy, no redirect followed (so the headers, "Name: value" each, go to that
 * origin only), no retry, all of it within timeout_ms (connecting within
 * connect_ms).  true when an HTTP response came back: *status its code, resp
 * (may be NULL) the first resp_cap - 1 bytes of its body.  false when none
 * came: err says why. */
bool fetch_http_post(const char *url, const char *const *headers, size_t nheaders,
                     const char *content_type, const void *body, size_t len, long connect_ms,
                     long timeout_ms, long *status, char *resp, size_t resp_cap, char *err,
                     size_t err_cap);

/* libcurl's version line, e.g. "libcurl/7.88.1 OpenSSL/3.0.11 zlib/1.2.13" (static). */
const char *fetch_curl_version(void);

/* --- the download area ------------------------------------------------------ */

/* Removes (remove false: only counts) what downloads of processes that have
 * ended left in tmp_dir: their private folders (fetch_config.private_tmp; a
 * folder whose lock no process holds) and loose .pdbsym-*.part files.
 * Folders of running processes are left alone.  *files and *bytes (may be
 * NULL) get what was (or would be) removed. */
ps_err fetch_sweep_tmp(const char *tmp_dir, bool remove, uint64_t *files, uint64_t *bytes,
                       ps_diag *diag);

/* --- introspection, for tests and `pdbsym fetch -v` --- */

/* The parsed sources, in symbol-path order. */
typedef struct {
  bool http;          /* else a local folder */
  const char *base;   /* URL (no trailing '/') or folder; borrowed from f */
  size_t nheaders;    /* extra headers sent to this source */
} fetch_source_info;
size_t fetch_source_count(const fetcher *f);
bool fetch_source_get(const fetcher *f, size_t i, fetch_source_info *out);

/* The relative paths probed for a module on a source that has answered
 * nothing yet, in order, unencoded, without duplicates: image=false: the PDB
 * under format fmt (WINDOWS or PORTABLE); true: the PE.  Returns how many were
 * written (each at most FETCH_REL_MAX bytes with the NUL); 0 when m lacks what
 * the key needs. */
#define FETCH_REL_MAX 800
#define FETCH_VARIANTS 14
size_t fetch_candidates(const module_id *m, st_format fmt, bool image,
                        char out[FETCH_VARIANTS][FETCH_REL_MAX]);

/* Percent-encodes everything but A-Z a-z 0-9 - . _ ~ and '/'; false if it
 * does not fit. */
bool fetch_url_escape(const char *in, char *out, size_t cap);

/* Whether path is a symbol path fetch_open would take (its syntax only:
 * nothing is read or asked); false with what is wrong in why. */
bool fetch_symbol_path_check(const char *path, char *why, size_t cap);

/* Calls each (may be NULL) with every folder source of path, in order;
 * returns how many there are (0 for a bad path). */
size_t fetch_symbol_path_folders(const char *path, void (*each)(void *ctx, const char *folder),
                                 void *ctx);

#endif
