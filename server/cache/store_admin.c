/*
 * store_admin.c - administration of the cache (pdbsym cache ...): stats, the
 * list of entries, evicting one, clearing, and verifying every module.
 * See store.h.
 */
#include "store_int.h"

#include <dirent.h>
#include <inttypes.h>
#include <unistd.h>

/* Bytes of the files in dir/tables (table files and unfinished ones). */
static uint64_t tables_bytes(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/tables", dir);
  DIR *d = opendir(path);
  uint64_t total = 0;
  if (!d)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
      continue;
    char f[1500];
    snprintf(f, sizeof f, "%s/%s", path, e->d_name);
    struct stat sb;
    if (stat(f, &sb) == 0 && S_ISREG(sb.st_mode))
      total += (uint64_t)sb.st_size;
  }
  closedir(d);
  return total;
}

uint64_t store_files_bytes(const char *dir) {
  static const char *const names[] = {"pdbsym.sqlite", "pdbsym.sqlite-wal", "pdbsym.sqlite-journal"};
  uint64_t total = 0;
  for (size_t i = 0; dir && i < sizeof names / sizeof names[0]; i++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat sb;
    if (stat(path, &sb) == 0)
      total += (uint64_t)sb.st_size;
  }
  return dir ? total + tables_bytes(dir) : 0;
}

ps_err store_get_stats(store *s, store_stats *out) {
  memset(out, 0, sizeof *out);
  sqlite3 *db = store__conn_get(s);
  if (!db)
    return PS_E_DATABASE;
  char wal[4200];
  snprintf(wal, sizeof wal, "%s-wal", s->path);
  exec(db, "BEGIN");
  out->file_bytes = file_size(s->path);
  out->wal_bytes = file_size(wal);
  out->used_bytes = used_bytes(db);
  out->table_bytes =
      (uint64_t)query_int(db, "SELECT total(file_bytes) FROM modules WHERE status = 0", 0);
  out->free_bytes = (uint64_t)query_int(db, "PRAGMA freelist_count", 0) * (uint64_t)page_size(db);
  out->max_bytes = s->cfg.max_bytes;
  out->modules = (uint64_t)query_int(db, "SELECT count(*) FROM modules WHERE status = 0", 0);
  out->negatives = (uint64_t)query_int(db, "SELECT count(*) FROM modules WHERE status != 0", 0);
  out->data_bytes = (uint64_t)query_int(db, "SELECT total(data_bytes) FROM modules", 0);
  out->line_rows =
      (uint64_t)query_int(db, "SELECT total(nlines) + total(nseqpts) FROM modules", 0);
  out->schema_version = (int)query_int(db, "PRAGMA user_version", 0);
  exec(db, "COMMIT");
  store__conn_put(s, db);
  pthread_mutex_lock(&s->mu);
  out->hot_modules = s->nhot;
  out->hot_bytes = s->mem_used;
  out->mem_max_bytes = s->cfg.mem_max_bytes;
  out->verified = s->verified;
  out->verify_failed = s->verify_failed;
  out->verify_skipped = s->verify_skipped;
  out->verify_pending = (uint64_t)s->nverify + (s->verifying ? 1u : 0u);
  pthread_mutex_unlock(&s->mu);
  out->module_reads = atomic_load(&s->module_reads);
  store__neg_stats(s->neg, &out->neg_memory, &out->neg_memory_hits);
  return PS_E_OK;
}

void store_get_counters(store *s, store_counters *out) {
  memset(out, 0, sizeof *out);
  out->module_reads = atomic_load(&s->module_reads);
  store__neg_stats(s->neg, &out->neg_memory, &out->neg_memory_hits);
  pthread_mutex_lock(&s->mu);
  out->hot_modules = s->nhot;
  out->hot_bytes = s->mem_used;
  pthread_mutex_unlock(&s->mu);
}

ps_err store_list(store *s, bool (*fn)(void *ctx, const store_module_info *m), void *ctx) {
  sqlite3 *db = store__conn_get(s);
  if (!db)
    return PS_E_DATABASE;
  sqlite3_stmt *q = NULL;
  ps_err result = PS_E_OK;
  if (sqlite3_prepare_v2(db,
                         "SELECT key, status, format, source, error, data_bytes, nlines, nseqpts,"
                         " nfuncs, fetched_at, last_used, expires_at FROM modules"
                         " ORDER BY last_used, key",
                         -1, &q, NULL) != SQLITE_OK) {
    result = PS_E_DATABASE;
  } else {
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
      store_module_info m = {
          .key = (const char *)sqlite3_column_text(q, 0),
          .status = sqlite3_column_int(q, 1),
          .format = sqlite3_column_int(q, 2),
          .source = (const char *)sqlite3_column_text(q, 3),
          .error = (const char *)sqlite3_column_text(q, 4),
          .data_bytes = (uint64_t)sqlite3_column_int64(q, 5),
          .nlines = (uint64_t)sqlite3_column_int64(q, 6),
          .nseqpts = (uint64_t)sqlite3_column_int64(q, 7),
          .nfuncs = (uint64_t)sqlite3_column_int64(q, 8),
          .fetched_at = sqlite3_column_int64(q, 9),
          .last_used = sqlite3_column_int64(q, 10),
          .expires_at = sqlite3_column_int64(q, 11),
      };
      if (!m.key)
        continue;
      if (!m.source)
        m.source = "";
      if (!m.error)
        m.error = "";
      if (!fn(ctx, &m))
        break;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      result = PS_E_DATABASE;
  }
  sqlite3_finalize(q);
  store__conn_put(s, db);
  return result;
}

ps_err store_evict(store *s, const char *key) {
  store__hot_drop(s, key);
  store__neg_drop(s->neg, key);
  pthread_mutex_lock(&s->write_mu);
  sqlite3 *db = store__conn_get(s);
  ps_err result = PS_E_NOT_FOUND;
  if (!db) {
    result = PS_E_DATABASE;
  } else if (exec(db, "BEGIN IMMEDIATE") != SQLITE_OK) {
    result = PS_E_BUSY;
  } else {
    module_row r;
    int rc;
    if (store__read_row(db, key, &r, &rc))
      result = store__delete_module(s, db, r.id) == SQLITE_OK ? PS_E_OK : PS_E_DATABASE;
    if (exec(db, "COMMIT") != SQLITE_OK)
      result = PS_E_DATABASE;
    store__unlink_doomed(s, db);
    if (result == PS_E_OK)
      exec(db, "PRAGMA incremental_vacuum");
  }
  store__conn_put(s, db);
  pthread_mutex_unlock(&s->write_mu);
  return result;
}

ps_err store_clear(store *s, bool negatives_only, uint64_t *removed) {
  if (removed)
    *removed = 0;
  if (!negatives_only)
    store__hot_clear(s);
  store__neg_clear(s->neg);
  pthread_mutex_lock(&s->write_mu);
  sqlite3 *db = store__conn_get(s);
  ps_err result = PS_E_OK;
  if (!db) {
    result = PS_E_DATABASE;
  } else if (exec(db, "BEGIN IMMEDIATE") != SQLITE_OK) {
    result = PS_E_BUSY;
  } else {
    /* the table files of the rows that go: named first, unlinked once the
     * rows are gone */
    char **files = NULL;
    size_t nfiles = 0, cfiles = 0;
    sqlite3_stmt *q = NULL;
    if (!negatives_only &&
        sqlite3_prepare_v2(db, "SELECT table_file FROM modules WHERE table_file != ''", -1, &q,
                           NULL) == SQLITE_OK) {
      while (sqlite3_step(q) == SQLITE_ROW) {
        if (nfiles == cfiles) {
          size_t nc = cfiles ? cfiles * 2 : 64;
          char **p = realloc(files, nc * sizeof *p);
          if (!p)
            break;
          files = p;
          cfiles = nc;
        }
        if ((files[nfiles] = dup_str((const char *)sqlite3_column_text(q, 0))) != NULL)
          nfiles++;
      }
    }
    sqlite3_finalize(q);
    if (exec(db, negatives_only ? "DELETE FROM modules WHERE status != 0"
                                : "DELETE FROM modules") != SQLITE_OK) {
      result = sqlite3_errcode(db) == SQLITE_BUSY ? PS_E_BUSY : PS_E_DATABASE;
    } else if (removed) {
      *removed = (uint64_t)sqlite3_changes(db);
    }
    if (result == PS_E_OK && exec(db, "COMMIT") != SQLITE_OK)
      result = PS_E_DATABASE;
    if (result != PS_E_OK)
      exec(db, "ROLLBACK");
    for (size_t i = 0; i < nfiles; i++) {
      if (result == PS_E_OK) {
        char path[1300];
        store__table_path(s, files[i], path, sizeof path);
        unlink(path);
      }
      free(files[i]);
    }
    free(files);
  }
  if (db && result == PS_E_OK) {
    exec(db, "PRAGMA incremental_vacuum");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  store__conn_put(s, db);
  pthread_mutex_unlock(&s->write_mu);
  return result;
}

ps_err store_verify(store *s, bool fix, void (*fn)(void *ctx, const char *key, const char *problem),
                    void *ctx, uint64_t *checked) {
  if (checked)
    *checked = 0;
  sqlite3 *db = store__conn_get(s);
  if (!db)
    return PS_E_DATABASE;
  ps_err result = PS_E_OK;
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK) {
    while (sqlite3_step(q) == SQLITE_ROW) {
      const char *r = (const char *)sqlite3_column_text(q, 0);
      if (r && strcmp(r, "ok") != 0) {
        fn(ctx, "(database)", r);
        result = PS_E_CORRUPT;
      }
    }
  } else {
    fn(ctx, "(database)", sqlite3_errmsg(db));
    result = PS_E_CORRUPT;
  }
  sqlite3_finalize(q);
  /* collect the keys first, then load each in its own read transaction */
  char **keys = NULL;
  size_t nkeys = 0, ckeys = 0;
  q = NULL;
  if (sqlite3_prepare_v2(db, "SELECT key FROM modules WHERE status = 0 ORDER BY key", -1, &q,
                         NULL) == SQLITE_OK) {
    while (sqlite3_step(q) == SQLITE_ROW) {
      const char *k = (const char *)sqlite3_column_text(q, 0);
      if (!k)
        continue;
      if (nkeys == ckeys) {
        size_t nc = ckeys ? ckeys * 2 : 64;
        char **p = realloc(keys, nc * sizeof *p);
        if (!p)
          break;
        keys = p;
        ckeys = nc;
      }
      keys[nkeys] = dup_str(k);
      if (keys[nkeys])
        nkeys++;
    }
  }
  sqlite3_finalize(q);
  int64_t orphans = query_int(
      db, "SELECT count(*) FROM arrays WHERE module NOT IN (SELECT id FROM modules WHERE status = 0)",
      0);
  if (orphans > 0) {
    char msg[96];
    snprintf(msg, sizeof msg, "%" PRId64 " array chunks belong to no complete module", orphans);
    fn(ctx, "(database)", msg);
    result = PS_E_CORRUPT;
    if (fix)
      exec(db, "DELETE FROM arrays WHERE module NOT IN (SELECT id FROM modules WHERE status = 0)");
  }
  uint64_t stray = store__sweep_tables(s, db, fix);
  if (stray > 0) {
    char msg[96];
    snprintf(msg, sizeof msg, "%" PRIu64 " table files belong to no module", stray);
    fn(ctx, "(tables)", msg);
    result = PS_E_CORRUPT;
  }
  for (size_t i = 0; i < nkeys; i++) {
    module_row r;
    int rc;
    char why[512];
    symtab st;
    const char *bad = NULL;
    exec(db, "BEGIN");
    if (store__read_row(db, keys[i], &r, &rc) && r.status == 0) {
      bool transient;
      if (r.layout == STORE_LAYOUT_FILE) {
        /* the header at load, then every record, as the background check does */
        store_map map;
        bad = store__map_table(s, &r, keys[i], &st, &map, why, sizeof why, &transient);
        if (!bad)
          bad = store__check_records(&st, &map, r.checksum, why, sizeof why);
        store__unmap_table(&st, &map);
      } else if (r.layout == STORE_LAYOUT_ROWS) {
        bad = store__load_arrays(db, &r, &st, true, why, sizeof why, &transient);
        if (!bad)
          st_free(&st);
      } else {
        snprintf(why, sizeof why, "record layout %" PRId64 " unknown to this pdbsym", r.layout);
        bad = why;
      }
      if (checked)
        (*checked)++;
    }
    exec(db, "COMMIT");
    if (bad) {
      fn(ctx, keys[i], bad);
      result = PS_E_CORRUPT;
      if (fix) {
        store__conn_put(s, db);
        db = NULL;
        store_evict(s, keys[i]);
        db = store__conn_get(s);
        if (!db)
          break;
      }
    }
  }
  for (size_t i = 0; i < nkeys; i++)
    free(keys[i]);
  free(keys);
  store__conn_put(s, db);
  return result;
}
