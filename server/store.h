/*
 * store.h - the SQLite line-table cache (the only file that includes
 * sqlite3.h is store.c).
 *
 * Modules are stored as line tables (the rows of a symtab) under a cache key
 * (module_cache_key: "<debug_file lowercase>/<GUID><age>" or ".../<GUID>FFFFFFFF").
 * A hot set of modules is kept in memory as finished symtabs within a byte
 * budget, least recently used evicted; the database is kept under a byte cap
 * by evicting least recently used modules; negative entries remember modules
 * that were not found or could not be read, for a while.
 *
 * Thread safety: every function may be called from several threads at once.
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
  uint32_t max_negative;           /* cap on negative entries (0: 100000) */
} store_config;

typedef enum { STORE_MISS = 0, STORE_HIT, STORE_NEGATIVE } store_result;
typedef enum { STORE_NEG_MISSING = 1, STORE_NEG_MALFORMED = 2, STORE_NEG_FETCH_ERROR = 3 } store_neg_kind;

typedef struct {
  const symtab *st;       /* STORE_HIT: finished table, valid until store_release */
  void *pin;              /* internal */
  char source[256];       /* where the module came from (URL or path) */
  store_neg_kind neg;     /* STORE_NEGATIVE: why */
  char error[256];        /* STORE_NEGATIVE: the recorded error */
} store_entry;

ps_err store_open(const store_config *cfg, store **out, ps_diag *diag);
void store_close(store *s);

store_result store_get(store *s, const char *key, store_entry *out);
void store_release(store *s, store_entry *e);

/* Ingests a finished symtab in one transaction (visible only once complete;
 * two racing puts of one key end as one copy), evicting old modules first if
 * the cap would be passed. */
ps_err store_put(store *s, const char *key, const symtab *st, const char *source, ps_diag *diag);
ps_err store_put_negative(store *s, const char *key, store_neg_kind kind, const char *error);

#endif
