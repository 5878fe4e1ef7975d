/*
 * store.h - the SQLite line-table cache: the one public header of
 * server/cache/, the only room that includes sqlite3.h (the build refuses it
 * anywhere else; docs/architecture.md).  The room's files: store_db.c,
 * store_hot.c, store_codec.c, store_admin.c (see internal/store_int.h).
 *
 * Modules are stored as line tables (the rows of a symtab) under a cache key
 * (module_cache_key: "<debug_file lowercase>/<GUID><age>" or ".../<GUID>FFFFFFFF").
 * A hot set of modules is kept in memory as finished symtabs within a byte
 * budget, least recently used evicted; the database is kept under a byte cap
 * by evicting least recently used modules; negative entries remember modules
 * that were not found or could not be read, for a while.
 *
 * On disk (schema/): a `modules` row per module (identity, counts, sizes,
 * timestamps, status, error) and, for a complete module, one table file in
 * dir/tables/ holding the symtab's arrays and search indexes as in memory
 * (store_codec.c has its format).  A load maps the file: the arrays are used
 * where they lie and only the pages lookups touch are read, so a restart
 * answers its first request without reading or copying the module.  The
 * header is checked against the row at load (sizes, counts, offsets, the
 * checksum it records): a file cut short, of another module or not a table
 * file is a miss, logged, and the module removed.  The records are checked
 * by a background thread right after (CRC-32 over the arrays and indexes,
 * then ranges and sort orders) and by store_verify: a module that fails is
 * logged, dropped and removed.  Until that check ends (about a tenth of a
 * second for 150 MB), a module whose bytes rotted on disk may answer
 * wrongly; lookups never read outside its arrays (parsers/symtab.c).  A
 * module waiting for its check is pinned, so the hot set may pass its budget
 * by those (at most 64) until they are checked.
 * Modules of the older layout (BLOB chunks in `arrays`) are still read, by
 * copying, with every check before use.  WAL mode: a crash leaves the last
 * committed state; a table file is complete before its row commits, and a
 * file no row names is removed at a later open.  A database that fails
 * PRAGMA quick_check at open, or has a newer or foreign schema, is renamed to
 * pdbsym.sqlite.broken-<time>-<pid> with a line on stderr, and a new one made.
 *
 * The cap: everything on disk counts.  The database's pages in use, the
 * complete modules' table files (tables/), its WAL and -shm files and what
 * lies beside them (outside_bytes: the downloads in flight) stay at or under
 * max_bytes: an ingest evicts least recently used entries first, a few per
 * transaction, until the module fits beside all of that; after it the WAL is
 * checkpointed into the database and truncated, and free pages left by
 * evictions go back to the file system when the folder is over the cap.
 * During an ingest the WAL and the new table file hold the module being
 * written: the one module in flight the folder may pass the cap by.  Between
 * ingests the WAL is checkpointed at 1 MiB (wal_autocheckpoint) and cut back
 * to 1 MiB (journal_size_limit).  A module that alone would pass the cap is
 * refused (PS_E_LIMIT).  Lowering the cap takes effect at the next ingest.
 *
 * Negative entries: missing (negative_missing_ttl), malformed
 * (negative_malformed_ttl), fetch error (negative_error_ttl), or a TTL the
 * caller gives (store_put_negative_ttl); a positive entry is never replaced
 * by a negative one.  They are also kept in memory (at most negative_memory,
 * least recently used dropped first), so a module known to be missing is
 * answered without reading SQLite; an entry in memory is believed for at
 * most a minute before SQLite is read again, since another process (`pdbsym
 * warm` on the same folder) may have stored the module (store_neg.c).
 *
 * Thread safety: every function may be called from several threads at once.
 * A module missing from memory is read from SQLite once; other threads asking
 * for it meanwhile wait for that read.
 * Ownership: a symtab returned by store_get stays valid until store_release;
 * the store owns it.
 */
#ifndef PDBSYM_STORE_H
#define PDBSYM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "symtab.h"

typedef struct store store;

typedef struct {
  const char *dir;                 /* cache folder; the database is dir/pdbsym.sqlite */
  uint64_t max_bytes;              /* cap on the database file (0: 2 GiB) */
  uint64_t mem_max_bytes;          /* hot-set budget in memory (0: 256 MiB) */
  int64_t negative_missing_ttl;    /* seconds a "not found" is remembered (0: 3600) */
  int64_t negative_malformed_ttl;  /* seconds a "could not read" is remembered (0: 86400) */
  int64_t negative_error_ttl;      /* seconds a fetch error is remembered (0: 300) */
  uint32_t max_negative;           /* cap on negative entries (0: 100000) */
  uint32_t negative_memory;        /* negative entries also kept in memory (0: 16384) */
  /* bytes the cache folder holds beside the database (downloads in flight),
   * counted against max_bytes; may be NULL.  Called with the write lock held:
   * must not call into the store. */
  uint64_t (*outside_bytes)(void *ctx);
  void *outside_ctx;
} store_config;

typedef enum { STORE_MISS = 0, STORE_HIT, STORE_NEGATIVE } store_result;
/* What a complete module's table holds besides its PDB's (store_entry.flags). */
enum { STORE_F_IMAGE_NAMES = 1u /* the method names of its PE image (.NET) */ };
typedef enum { STORE_NEG_MISSING = 1, STORE_NEG_MALFORMED = 2, STORE_NEG_FETCH_ERROR = 3 } store_neg_kind;

typedef struct {
  const symtab *st;       /* STORE_HIT: finished table, valid until store_release */
  void *pin;              /* internal */
  unsigned flags;         /* STORE_HIT: STORE_F_* */
  char source[256];       /* where the module came from (URL or path) */
  store_neg_kind neg;     /* STORE_NEGATIVE: why */
  char error[256];        /* STORE_NEGATIVE: the recorded error */
  int64_t expires_at;     /* STORE_NEGATIVE: when it expires (unix seconds) */
} store_entry;

ps_err store_open(const store_config *cfg, store **out, ps_diag *diag);
void store_close(store *s);

store_result store_get(store *s, const char *key, store_entry *out);
/* store_get for a module whose table is in memory now and needs nothing
 * else: no SQLite, no file, no wait (the service's event loop answers small
 * requests with it, http.h).  STORE_HIT (pinned, as store_get's) only for a
 * loaded in-memory table whose last_used stamp is not due; STORE_MISS
 * otherwise, with nothing pinned: store_get then does the rest. */
store_result store_get_hot(store *s, const char *key, store_entry *out);
void store_release(store *s, store_entry *e);

/* Ingests a finished symtab in one transaction (visible only once complete;
 * two racing puts of one key end as one copy), evicting old modules first if
 * the cap would be passed. */
ps_err store_put(store *s, const char *key, const symtab *st, const char *source, ps_diag *diag);
/* The same with flags (STORE_F_*).  A complete module already under key is
 * kept, unless the new table has a flag it lacks (names from the image): then
 * the new one replaces it, on disk and (the old one dropped from the hot set;
 * pinned copies stay valid) in memory. */
ps_err store_put_flags(store *s, const char *key, const symtab *st, const char *source,
                       unsigned flags, ps_diag *diag);
/* store_put, then the table moves into the hot set and comes back pinned in
 * *out (so the engine need not read back what it just parsed).  st is taken
 * in every case: its arrays are shrunk to size and owned by the store; the
 * caller's symtab is zeroed.  Returns store_put's result: when the cache could
 * not keep the module (e.g. PS_E_LIMIT), *out still holds the table (in memory
 * only), unless out->st is NULL (out of memory). */
ps_err store_put_take(store *s, const char *key, symtab *st, const char *source,
                      store_entry *out, ps_diag *diag);
/* First answer before persistence: puts a finished table into the hot set
 * without writing it (st taken as by store_put_take) and pins it in *out; a
 * table under key in memory stays, unless st has a flag it lacks (then st
 * replaces it; pinned copies stay valid).  The table is in memory only until
 * store_save writes it; pinned meanwhile (by the caller), it is never evicted
 * from memory.  PS_E_NOMEM when out->st is NULL. */
ps_err store_adopt(store *s, const char *key, symtab *st, const char *source, unsigned flags,
                   store_entry *out);
/* Writes the table pinned in e (store_adopt's, or store_get's) to SQLite under
 * its key, its source and flags, as store_put_flags.  Lookups of the table
 * may run meanwhile. */
ps_err store_save(store *s, const store_entry *e, ps_diag *diag);
/* One more pin of e's table in *out (released with store_release). */
void store_pin(store *s, const store_entry *e, store_entry *out);

ps_err store_put_negative(store *s, const char *key, store_neg_kind kind, const char *error);
/* The same, remembered for ttl seconds (<= 0: the kind's TTL from the config). */
ps_err store_put_negative_ttl(store *s, const char *key, store_neg_kind kind, const char *error,
                              int64_t ttl);

/* Makes room for bytes outside the cache (downloads in flight): evicts
 * least recently used entries, negative ones first, until the pages in use
 * plus the table files plus bytes fit under the cap, unlinks the evicted
 * modules' table files and gives the freed pages back to the file system
 * (the database file and its WAL shrink).  PS_E_LIMIT when even an empty
 * cache leaves less room; *freed (may be NULL) gets the bytes the cache's
 * files (store_files_bytes) gave back. */
ps_err store_make_room(store *s, uint64_t bytes, uint64_t *freed, ps_diag *diag);

/* ---- administration (pdbsym cache ...) ----------------------------------- */

/* The SQLite library the cache runs with, e.g. "3.40.1" (static). */
const char *store_sqlite_version(void);

/* Bytes on disk of the cache database in dir and its journal files
 * (pdbsym.sqlite, -wal, -journal), read without opening it. */
uint64_t store_files_bytes(const char *dir);

/* Path of the database file (owned by the store). */
const char *store_path(const store *s);

typedef struct {
  uint64_t file_bytes;      /* pdbsym.sqlite on disk */
  uint64_t wal_bytes;       /* pdbsym.sqlite-wal on disk */
  uint64_t used_bytes;      /* pages in use (file minus free pages) */
  uint64_t free_bytes;      /* free pages, reused by the next ingest */
  uint64_t max_bytes;       /* the cap in force */
  uint64_t modules;         /* complete modules */
  uint64_t negatives;       /* negative entries (expired ones included) */
  uint64_t data_bytes;      /* sum of the complete modules' array bytes */
  uint64_t line_rows;       /* sum of line rows + sequence points */
  uint64_t table_bytes;     /* the complete modules' table files (counted in the cap) */
  uint64_t hot_modules, hot_bytes, mem_max_bytes; /* this process's hot set */
  uint64_t module_reads;    /* this process's reads of a module's row from SQLite */
  uint64_t neg_memory;      /* negative entries this process keeps in memory */
  uint64_t neg_memory_hits; /* lookups they answered without SQLite */
  uint64_t verified, verify_failed, verify_skipped; /* this process's background checks */
  uint64_t verify_pending;  /* modules waiting for their check or being checked (pinned) */
  int schema_version;
} store_stats;
ps_err store_get_stats(store *s, store_stats *out);

/* This process's counters, read without touching the database (for
 * /metrics): module reads from SQLite, negative entries in memory and the
 * lookups they answered, the hot set. */
typedef struct {
  uint64_t module_reads, neg_memory, neg_memory_hits, hot_modules, hot_bytes;
} store_counters;
void store_get_counters(store *s, store_counters *out);

typedef struct {
  const char *key;
  int status;               /* 0 complete, else a store_neg_kind */
  int format;               /* st_format */
  const char *source, *error;
  uint64_t data_bytes, nlines, nseqpts, nfuncs;
  int64_t fetched_at, last_used, expires_at; /* unix seconds */
} store_module_info;
/* Calls fn for each entry, least recently used first; fn returns false to stop.
 * The strings are valid during the call only. */
ps_err store_list(store *s, bool (*fn)(void *ctx, const store_module_info *m), void *ctx);

/* Removes the module under key (from disk and from the hot set; a pinned
 * copy stays valid until released).  PS_E_NOT_FOUND if there is none. */
ps_err store_evict(store *s, const char *key);
/* Removes every entry, or only the negative ones; *removed gets the count. */
ps_err store_clear(store *s, bool negatives_only, uint64_t *removed);

/* Checks the database (PRAGMA integrity_check) and every complete module
 * (counts, checksum, indices); calls fn for each problem.  With fix, damaged
 * modules are removed.  Returns PS_E_OK when nothing was wrong, PS_E_CORRUPT
 * otherwise; *checked gets the number of modules read. */
ps_err store_verify(store *s, bool fix, void (*fn)(void *ctx, const char *key, const char *problem),
                    void *ctx, uint64_t *checked);

#endif
