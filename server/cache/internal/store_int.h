/*
 * store_int.h - what the files of the cache share; not a public header (only
 * server/cache/ has this folder on its include path).  The interface is
 * store.h; schema: schema/NNN_name.sql.
 *
 *   store_db.c     the database: connections, opening (integrity, schema,
 *                  migrations), the transactions that read and write a
 *                  module, and the byte cap
 *   store_hot.c    the hot set: finished symtabs in memory, LRU, pins, one
 *                  read from SQLite per module however many threads ask
 *   store_codec.c  a module <-> its rows: the symtab arrays as BLOB chunks,
 *                  the checksum, validation of what comes back
 *   store_admin.c  stats, list, evict, clear, verify (pdbsym cache ...)
 *
 * On disk: dir/pdbsym.sqlite in WAL mode with auto_vacuum=INCREMENTAL, and
 * one table file per complete module in dir/tables/.  A complete module is
 * one `modules` row (identity, counts, checksum, the name and size of its
 * table file) and the file (layout STORE_LAYOUT_FILE, store_codec.c):
 *
 *   modules(id, key, status=0, counts..., checksum, table_file, file_bytes)
 *      |
 *      +-- tables/<table_file>.pst  header, then the symtab's arrays and its
 *                                   search indexes as in memory, each
 *                                   64-byte aligned
 *
 * A module is loaded by mapping its file: the arrays are used where they
 * lie, and only the pages a lookup touches are read.  The header is checked
 * at load against the row (sizes, counts, offsets, the checksum it
 * records); the records themselves are checked by a background pass (CRC-32
 * and symtab_validate) right after, and by `cache verify`; lookups stay in
 * bounds whatever the records hold (parsers/symtab.c), so a damaged module
 * can at worst answer wrongly until that pass drops it.  Modules of the
 * older layout (STORE_LAYOUT_ROWS: the arrays as BLOB chunks of at most
 * STORE_CHUNK bytes in `arrays`) are still read, by copying.
 *
 * A table file is written and renamed into place before its row commits,
 * and unlinked after the transaction that deleted its row, so a row always
 * names a whole file; a file no row names (a crash between the two) is
 * removed at a later open once it is STORE_ORPHAN_SECONDS old.  A mapping
 * already made stays valid after the unlink.
 *
 * In memory: a hash table of finished symtabs (the hot set) with an LRU list
 * and reference counts, under one mutex.  SQLite connections come from a
 * small pool (one connection is used by one thread at a time); in-process
 * writers are serialised by write_mu, other processes by SQLite's locks.
 *
 * Internal functions are named store__*.
 */
#ifndef PDBSYM_STORE_INT_H
#define PDBSYM_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store.h"

/* The records of symtab.h exactly as in memory (store_codec.c), in BLOB
 * chunks or in a table file.  Layouts: 2, st_public gained its size; 3,
 * st_method gained user, local and gen (BLOB chunks, still read); 4, a table
 * file.  Layouts older than STORE_LAYOUT_ROWS are treated as absent and
 * replaced at the next ingest. */
#define STORE_LAYOUT_ROWS 3
#define STORE_LAYOUT_FILE 4
#define STORE_LAYOUT STORE_LAYOUT_FILE /* what ingests write */

#define STORE_CHUNK ((size_t)1 << 20)
#define STORE_NKINDS 8
#define STORE_BUSY_MS 30000
#define STORE_TOUCH_SECONDS 60      /* last_used is written at most this often per module */
#define STORE_EVICT_STEP 8          /* modules deleted per eviction transaction */
#define STORE_MAX_POOL 8            /* idle connections kept */
#define STORE_FETCH_ERROR_TTL 300   /* seconds a network failure is remembered */
#define STORE_NBUCKETS 1024
#define STORE_WAL_LIMIT_S "1048576" /* journal_size_limit: the WAL after a checkpoint */
#define STORE_WAL_PAGES_S "256"     /* wal_autocheckpoint (pages of 4 KiB: 1 MiB) */
#define STORE_VACUUM_STEP_S "64"    /* pages given back per incremental_vacuum step */
#define STORE_NEG_MEMORY 16384      /* negative entries kept in memory (default) */
#define STORE_NEG_RECHECK_S 60      /* ... each believed this long before SQLite is read again */
#define STORE_ORPHAN_SECONDS 600    /* a table file no row names is removed once this old */
#define STORE_VERIFY_QUEUE 64       /* mapped modules waiting for their background check */

/* A table file mapped into memory (NULL base: the table is on the heap). */
typedef struct {
  void *base;
  size_t len;
} store_map;

typedef struct hot {
  char *key;
  symtab st;
  unsigned flags; /* STORE_F_*; fixed once indexed */
  store_map map;    /* st's arrays point into it; unmapped instead of st_free */
  char table_file[40]; /* mapped: the file's name, for the background check */
  size_t mem;
  int refs;
  bool dead; /* no longer indexed (evicted or replaced); freed at the last release */
  bool loading; /* being read from SQLite by one thread; others wait on store.cv */
  bool failed;  /* the load found no usable table: result/neg/error say why */
  store_result result;
  store_neg_kind neg;
  char error[256];
  int64_t touched;
  char source[256];
  struct hot *prev, *next; /* LRU list, head = most recent */
  struct hot *hnext;       /* hash chain */
} hot;

struct store {
  char *dir, *path;
  store_config cfg;
  pthread_mutex_t mu; /* hot set */
  pthread_cond_t cv;  /* signalled when a load finishes */
  hot *buckets[STORE_NBUCKETS];
  hot *lru_head, *lru_tail;
  size_t mem_used, nhot;
  pthread_mutex_t pool_mu;
  sqlite3 *pool[STORE_MAX_POOL];
  int npool;
  pthread_mutex_t write_mu;
  struct store_neg *neg;           /* negative entries in memory (store_neg.c) */
  _Atomic uint64_t module_reads;   /* store__load_module calls: reads of SQLite for a module */
  /* table files of rows deleted in the open write transaction (write_mu) */
  char (*doomed)[40];
  size_t ndoomed, cdoomed;
  /* the background check of mapped modules: one thread, started at the
   * first mapped load, a queue of at most STORE_VERIFY_QUEUE pinned entries */
  pthread_t verifier;
  bool verifier_started, verifier_stop;
  pthread_cond_t verify_cv;
  struct verify_job *verify_head, *verify_tail;
  int nverify;
  bool verifying; /* the thread is checking one now */
  uint64_t verified, verify_failed, verify_skipped;
};

/* ---- small helpers -------------------------------------------------------- */

static inline int64_t now_s(void) { return (int64_t)time(NULL); }

static inline void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

static inline char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p)
    memcpy(p, s, n);
  return p;
}

static inline uint64_t file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static inline int exec(sqlite3 *db, const char *sql) {
  return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static inline int64_t query_int(sqlite3 *db, const char *sql, int64_t dflt) {
  sqlite3_stmt *q = NULL;
  int64_t v = dflt;
  if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
    v = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return v;
}

static inline int64_t page_size(sqlite3 *db) { return query_int(db, "PRAGMA page_size", 4096); }

/* Bytes of pages in use (the file minus its free list). */
static inline uint64_t used_bytes(sqlite3 *db) {
  int64_t pc = query_int(db, "PRAGMA page_count", 0);
  int64_t fl = query_int(db, "PRAGMA freelist_count", 0);
  return (uint64_t)(pc > fl ? pc - fl : 0) * (uint64_t)page_size(db);
}

/* ---- store_db.c ----------------------------------------------------------- */

/* A connection from the pool (or a new one); NULL when none can be opened. */
sqlite3 *store__conn_get(store *s);
/* Back to the pool (an open transaction is rolled back); NULL is ignored. */
void store__conn_put(store *s, sqlite3 *db);
/* Records a use of key for LRU eviction (best effort). */
void store__touch(sqlite3 *db, const char *key, int64_t when);
/* Reads key from SQLite: STORE_HIT with *st filled (owned by the caller),
 * STORE_NEGATIVE with out's neg/error/source, or STORE_MISS.  A damaged
 * module is logged and removed. */
store_result store__load_module(store *s, const char *key, symtab *st, store_map *map,
                                char *table_file, char *source, size_t source_cap,
                                store_entry *out);
/* Cache bytes the cap counts: pages in use plus the complete modules' table files. */
uint64_t store__cap_bytes(sqlite3 *db);
/* Removes the row of key if it still names table_file (a damaged module
 * found after its load); true when it did. */
bool store__drop_damaged(store *s, const char *key, const char *table_file, const char *why);

/* ---- store_codec.c -------------------------------------------------------- */

typedef struct {
  void **ptr;
  size_t *n, *cap;
  size_t elem;
} kind_ref;

/* kind k (1..STORE_NKINDS) of st: pointer, count, capacity, element size */
kind_ref store__kind(symtab *st, int k);
/* CRC-32 of the arrays in kind order (modules.checksum). */
uint32_t store__checksum(const symtab *st);

typedef struct {
  int64_t id;
  int status;
  int64_t counts[STORE_NKINDS + 1];
  int64_t data_bytes, expires_at, layout;
  uint32_t checksum;
  char source[256], error[256];
  st_ident ident;
  uint32_t source_link;
  unsigned flags; /* STORE_F_* (the image_names column) */
  char table_file[40]; /* layout STORE_LAYOUT_FILE: the file in tables/ */
  int64_t file_bytes;
} module_row;

/* Reads the `modules` row of key into *r; true when there is one.  *rc_out
 * gets SQLITE_OK or the error. */
bool store__read_row(sqlite3 *db, const char *key, module_row *r, int *rc_out);
/* Loads the arrays of a complete module of layout STORE_LAYOUT_ROWS into st
 * (finished, owned by st).  Returns NULL or what is wrong (in why);
 * *transient says whether the failure may pass (out of memory, a busy
 * database) rather than damage. */
const char *store__load_arrays(sqlite3 *db, const module_row *r, symtab *st, bool check_sum,
                               char *why, size_t cap, bool *transient);
/* Maps the table file of a complete module of layout STORE_LAYOUT_FILE:
 * st's arrays and indexes point into *map, its Source Link map is built (st
 * is finished; it must not be st_free'd: store__unmap_table).  Checks the
 * header against the row, not the records.  Returns NULL or what is wrong,
 * *transient as above. */
const char *store__map_table(const store *s, const module_row *r, const char *key, symtab *st,
                             store_map *map, char *why, size_t cap, bool *transient);
void store__unmap(store_map *map);
/* Frees what a mapped table owns (its Source Link map) and unmaps it. */
void store__unmap_table(symtab *st, store_map *map);
/* The records' checks of a loaded table: its arrays' CRC-32 against
 * checksum (a mapped table: against its file header's, and its indexes'
 * against theirs), and the ranges and sort orders lookups rely on.  NULL or
 * what is wrong. */
const char *store__check_records(const symtab *st, const store_map *map, uint32_t checksum,
                                 char *why, size_t cap);
/* Writes st's table file for key into tables/ under a new name (*name, 40
 * bytes), renamed into place complete; *bytes gets its size. */
ps_err store__write_table(const store *s, const char *key, const symtab *st, uint32_t checksum,
                          char *name, uint64_t *bytes, ps_diag *diag);
/* path of table file name in s's tables/ folder */
void store__table_path(const store *s, const char *name, char *out, size_t cap);
/* Writes a complete module's row (in the caller's transaction); its table
 * file, written before, is named by table_file. */
int store__insert_module(sqlite3 *db, const char *key, const symtab *st, const char *source,
                         uint64_t data_bytes, uint32_t checksum, const char *table_file,
                         uint64_t file_bytes, int64_t now);
/* Deletes a module's row (a layout-3 module's arrays go with it: ON DELETE
 * CASCADE) in the caller's transaction; its table file is noted (write_mu
 * held) and unlinked by store__unlink_doomed once no row names it. */
int store__delete_module(store *s, sqlite3 *db, int64_t id);
/* After a transaction that deleted rows, committed or not (write_mu held):
 * unlinks the noted table files no row names any more. */
void store__unlink_doomed(store *s, sqlite3 *db);
/* Removes table files no row names, STORE_ORPHAN_SECONDS old or more (with
 * fix false only counts them); returns how many. */
uint64_t store__sweep_tables(store *s, sqlite3 *db, bool fix);


/* ---- store_neg.c --------------------------------------------------------- */

typedef struct store_neg store_neg;
store_neg *store__neg_new(size_t max);
void store__neg_free(store_neg *n);
/* true when key has a live negative entry in memory: out's neg, error and
 * expires_at are set. */
bool store__neg_get(store_neg *n, const char *key, int64_t now, store_entry *out);
/* Remembers (or refreshes) a negative entry that expires at expires_at. */
void store__neg_put(store_neg *n, const char *key, store_neg_kind kind, const char *error,
                    int64_t expires_at, int64_t now);
void store__neg_drop(store_neg *n, const char *key);
void store__neg_clear(store_neg *n);
void store__neg_stats(store_neg *n, uint64_t *entries, uint64_t *hits);

/* ---- store_hot.c ---------------------------------------------------------- */

void store__hot_free(hot *h);
/* Queues a mapped entry for its background check (mu held; pins it). */
void store__verify_enqueue(store *s, hot *h);
/* Stops the background checks (store_close). */
void store__verify_stop(store *s);
/* Takes key out of the hot set (a pinned copy stays valid until released). */
void store__hot_drop(store *s, const char *key);
/* Drops key from the hot set when its table there lacks one of flags (a
 * table with them was just stored: the next store_get reads that one). */
void store__hot_drop_lacking(store *s, const char *key, unsigned flags);
/* Takes every module out of the hot set (pinned copies stay valid). */
void store__hot_clear(store *s);

#endif
