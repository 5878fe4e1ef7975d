/*
 * store_hot.c - the cache's hot set: finished symtabs in memory within a byte
 * budget, a hash table with an LRU list and reference counts under one mutex.
 * A module missing from memory is read from SQLite by one thread; others
 * asking for it meanwhile wait for that read.  See store.h.
 */
#include "store_int.h"

#include <sys/mman.h>

static uint32_t hash_key(const char *k) {
  uint32_t h = 2166136261u;
  for (; *k; k++)
    h = (h ^ (uint8_t)*k) * 16777619u;
  return h;
}

void store__hot_free(hot *h) {
  if (!h)
    return;
  if (h->map.base)
    store__unmap_table(&h->st, &h->map); /* the arrays were the file's */
  else
    st_free(&h->st);
  free(h->key);
  free(h);
}

/* ---- the hot set -------------------------------------------------------------- */

static hot *hot_find(store *s, const char *key) {
  for (hot *h = s->buckets[hash_key(key) % STORE_NBUCKETS]; h; h = h->hnext)
    if (!strcmp(h->key, key))
      return h;
  return NULL;
}

static void lru_unlink(store *s, hot *h) {
  if (h->prev)
    h->prev->next = h->next;
  else
    s->lru_head = h->next;
  if (h->next)
    h->next->prev = h->prev;
  else
    s->lru_tail = h->prev;
  h->prev = h->next = NULL;
}

static void lru_push_front(store *s, hot *h) {
  h->prev = NULL;
  h->next = s->lru_head;
  if (s->lru_head)
    s->lru_head->prev = h;
  s->lru_head = h;
  if (!s->lru_tail)
    s->lru_tail = h;
}

/* Takes h out of the index (mu held).  The caller frees it if unpinned. */
static void hot_unindex(store *s, hot *h) {
  if (h->dead)
    return;
  hot **pp = &s->buckets[hash_key(h->key) % STORE_NBUCKETS];
  while (*pp && *pp != h)
    pp = &(*pp)->hnext;
  if (*pp)
    *pp = h->hnext;
  lru_unlink(s, h);
  s->nhot--;
  h->dead = true;
}

/* Evicts unpinned modules from the LRU tail until the budget holds (mu held);
 * returns a list (through hnext) to free once mu is released. */
static hot *hot_trim(store *s) {
  hot *freed = NULL;
  hot *h = s->lru_tail;
  while (h && s->mem_used > s->cfg.mem_max_bytes) {
    hot *prev = h->prev;
    if (h->refs == 0) {
      hot_unindex(s, h);
      s->mem_used -= h->mem;
      h->hnext = freed;
      freed = h;
    }
    h = prev;
  }
  return freed;
}

static void free_list(hot *h) {
  while (h) {
    hot *next = h->hnext;
    store__hot_free(h);
    h = next;
  }
}

static void pin_entry(hot *h, store_entry *out) {
  h->refs++;
  out->st = &h->st;
  out->pin = h;
  out->flags = h->flags;
  copy_str(out->source, sizeof out->source, h->source);
}

/* Inserts a loaded table (taken) and pins it; if another thread was faster,
 * pins that one and frees ours, unless ours has a flag it lacks (the image's
 * names): then ours replaces it (a pinned copy stays valid). */
static void hot_insert(store *s, const char *key, symtab *st, const store_map *map,
                       const char *table_file, const char *source, unsigned flags,
                       store_entry *out) {
  hot *h = calloc(1, sizeof *h);
  char *k = dup_str(key);
  if (!h || !k) {
    /* no memory for the entry: hand the table out unindexed, freed at release */
    free(k);
    if (h) {
      h->st = *st;
      h->flags = flags;
      h->map = *map;
      h->dead = true;
      h->mem = 0;
      copy_str(h->source, sizeof h->source, source);
      h->key = NULL;
      h->refs = 1;
      out->st = &h->st;
      out->pin = h;
      out->flags = flags;
      copy_str(out->source, sizeof out->source, source);
    } else if (map->base) {
      store_map m = *map;
      store__unmap_table(st, &m);
    } else {
      st_free(st);
    }
    return;
  }
  h->key = k;
  h->st = *st;
  h->flags = flags;
  h->map = *map;
  copy_str(h->table_file, sizeof h->table_file, table_file);
  h->mem = st_memory_size(st);
  h->touched = now_s();
  copy_str(h->source, sizeof h->source, source);
  pthread_mutex_lock(&s->mu);
  hot *old = hot_find(s, key);
  while (old && old->loading) {
    pthread_cond_wait(&s->cv, &s->mu);
    old = hot_find(s, key);
  }
  hot *replaced = NULL;
  if (old && !(flags & ~old->flags)) {
    lru_unlink(s, old);
    lru_push_front(s, old);
    pin_entry(old, out);
    pthread_mutex_unlock(&s->mu);
    store__hot_free(h);
    return;
  }
  if (old) {
    hot_unindex(s, old);
    if (old->refs == 0) {
      s->mem_used -= old->mem;
      replaced = old;
      replaced->hnext = NULL;
    }
  }
  size_t b = hash_key(key) % STORE_NBUCKETS;
  h->hnext = s->buckets[b];
  s->buckets[b] = h;
  lru_push_front(s, h);
  s->nhot++;
  s->mem_used += h->mem;
  pin_entry(h, out);
  if (h->map.base)
    store__verify_enqueue(s, h);
  hot *freed = hot_trim(s);
  pthread_mutex_unlock(&s->mu);
  free_list(freed);
  free_list(replaced);
}

void store__hot_drop(store *s, const char *key) {
  hot *freed = NULL;
  pthread_mutex_lock(&s->mu);
  hot *h = hot_find(s, key);
  if (h) {
    hot_unindex(s, h);
    if (h->refs == 0) {
      s->mem_used -= h->mem;
      freed = h;
      h->hnext = NULL;
    }
  }
  pthread_mutex_unlock(&s->mu);
  free_list(freed);
}

void store__hot_drop_lacking(store *s, const char *key, unsigned flags) {
  pthread_mutex_lock(&s->mu);
  hot *h = hot_find(s, key);
  bool lacking = h && !h->loading && (flags & ~h->flags);
  pthread_mutex_unlock(&s->mu);
  if (lacking)
    store__hot_drop(s, key);
}

store_result store_get_hot(store *s, const char *key, store_entry *out) {
  memset(out, 0, sizeof *out);
  int64_t now = now_s();
  store_result res = STORE_MISS;
  pthread_mutex_lock(&s->mu);
  hot *h = hot_find(s, key);
  if (h && !h->loading && !h->dead && now - h->touched < STORE_TOUCH_SECONDS) {
    lru_unlink(s, h);
    lru_push_front(s, h);
    pin_entry(h, out);
    res = STORE_HIT;
  }
  pthread_mutex_unlock(&s->mu);
  return res;
}

store_result store_get(store *s, const char *key, store_entry *out) {
  memset(out, 0, sizeof *out);
  int64_t now = now_s();
  bool need_touch = false;
  hot *loader = NULL;
  pthread_mutex_lock(&s->mu);
  hot *h = hot_find(s, key);
  if (h && h->loading) {
    /* another thread is reading this module: wait for its table (one load) */
    h->refs++;
    while (h->loading)
      pthread_cond_wait(&s->cv, &s->mu);
    if (h->failed) {
      store_result res = h->result;
      out->neg = h->neg;
      copy_str(out->error, sizeof out->error, h->error);
      copy_str(out->source, sizeof out->source, h->source);
      hot *freed = NULL;
      if (--h->refs == 0) {
        s->mem_used -= h->mem;
        h->hnext = NULL;
        freed = h;
      }
      pthread_mutex_unlock(&s->mu);
      free_list(freed);
      return res;
    }
    h->refs--; /* pin_entry below takes it again */
  }
  if (h) {
    if (!h->dead) {
      lru_unlink(s, h);
      lru_push_front(s, h);
    }
    pin_entry(h, out);
    if (now - h->touched >= STORE_TOUCH_SECONDS) {
      h->touched = now;
      need_touch = true;
    }
  } else if (store__neg_get(s->neg, key, now, out)) {
    /* known to be missing (or unreadable): answered from memory */
    pthread_mutex_unlock(&s->mu);
    return STORE_NEGATIVE;
  } else {
    /* a placeholder others can wait on while this thread reads SQLite */
    loader = calloc(1, sizeof *loader);
    if (loader && (loader->key = dup_str(key)) != NULL) {
      loader->loading = true;
      loader->refs = 1;
      loader->touched = now;
      size_t b = hash_key(key) % STORE_NBUCKETS;
      loader->hnext = s->buckets[b];
      s->buckets[b] = loader;
      lru_push_front(s, loader);
      s->nhot++;
    } else if (loader) {
      free(loader);
      loader = NULL;
    }
  }
  pthread_mutex_unlock(&s->mu);
  if (h) {
    if (need_touch) {
      sqlite3 *db = store__conn_get(s);
      if (db)
        store__touch(db, key, now);
      store__conn_put(s, db);
    }
    return STORE_HIT;
  }

  symtab st;
  store_map map;
  char source[256] = "", table_file[40];
  store_result result =
      store__load_module(s, key, &st, &map, table_file, source, sizeof source, out);
  if (result == STORE_NEGATIVE)
    store__neg_put(s->neg, key, out->neg, out->error, out->expires_at, now);
  if (!loader) { /* no memory for a placeholder: the old way */
    if (result == STORE_HIT)
      hot_insert(s, key, &st, &map, table_file, source, out->flags, out);
    return result;
  }
  hot *freed = NULL;
  pthread_mutex_lock(&s->mu);
  loader->loading = false;
  if (result == STORE_HIT) {
    loader->st = st;
    loader->flags = out->flags;
    loader->map = map;
    copy_str(loader->table_file, sizeof loader->table_file, table_file);
    loader->mem = st_memory_size(&st);
    s->mem_used += loader->mem;
    copy_str(loader->source, sizeof loader->source, source);
    loader->refs--; /* pin_entry takes it again */
    pin_entry(loader, out);
    if (map.base)
      store__verify_enqueue(s, loader);
    freed = hot_trim(s);
  } else {
    loader->failed = true;
    loader->result = result;
    loader->neg = out->neg;
    copy_str(loader->error, sizeof loader->error, out->error);
    copy_str(loader->source, sizeof loader->source, out->source);
    if (!loader->dead)
      hot_unindex(s, loader);
    if (--loader->refs == 0) {
      loader->hnext = freed;
      freed = loader;
    }
  }
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  free_list(freed);
  return result;
}

void store_release(store *s, store_entry *e) {
  if (!e || !e->pin)
    return;
  hot *h = e->pin, *freed = NULL;
  pthread_mutex_lock(&s->mu);
  if (--h->refs == 0) {
    if (h->dead) {
      s->mem_used -= h->mem;
      h->hnext = NULL;
      freed = h;
    } else if (s->mem_used > s->cfg.mem_max_bytes) {
      freed = hot_trim(s);
    }
  }
  pthread_mutex_unlock(&s->mu);
  free_list(freed);
  e->pin = NULL;
  e->st = NULL;
}

/* Frees builder state and spare capacity: a table in the hot set holds only
 * its rows. */
static void compact(symtab *st) {
  free(st->hslots);
  st->hslots = NULL;
  st->hcap = st->hcount = 0;
  st->budget = NULL;
  for (int k = 1; k <= STORE_NKINDS; k++) {
    kind_ref r = store__kind(st, k);
    if (*r.cap > *r.n && *r.n > 0) {
      void *p = realloc(*r.ptr, *r.n * r.elem);
      if (p) {
        *r.ptr = p;
        *r.cap = *r.n;
      }
    }
  }
}

ps_err store_put_take(store *s, const char *key, symtab *st, const char *source,
                      store_entry *out, ps_diag *diag) {
  memset(out, 0, sizeof *out);
  ps_err result = store_put(s, key, st, source, diag);
  store__neg_drop(s->neg, key); /* kept in memory even when the cache could not take it */
  if (!st->finished || !key) {
    st_free(st);
    return result;
  }
  compact(st);
  store_map none = {NULL, 0};
  hot_insert(s, key, st, &none, "", source, 0, out);
  memset(st, 0, sizeof *st);
  if (!out->st && result == PS_E_OK)
    result = PS_E_NOMEM;
  return result;
}

ps_err store_adopt(store *s, const char *key, symtab *st, const char *source, unsigned flags,
                   store_entry *out) {
  memset(out, 0, sizeof *out);
  if (!key || !*key || !st->finished) {
    st_free(st);
    return PS_E_INVALID;
  }
  store__neg_drop(s->neg, key);
  compact(st);
  store_map none = {NULL, 0};
  hot_insert(s, key, st, &none, "", source, flags, out);
  memset(st, 0, sizeof *st);
  return out->st ? PS_E_OK : PS_E_NOMEM;
}

ps_err store_save(store *s, const store_entry *e, ps_diag *diag) {
  const hot *h = e ? e->pin : NULL;
  if (!h || !h->key) /* unindexed (no memory for its key): nothing to save it under */
    return ps_diag_set(diag, PS_E_NOMEM, "cache", (size_t)-1, "out of memory");
  return store_put_flags(s, h->key, &h->st, h->source, h->flags, diag);
}

void store_pin(store *s, const store_entry *e, store_entry *out) {
  memset(out, 0, sizeof *out);
  if (!e || !e->pin)
    return;
  pthread_mutex_lock(&s->mu);
  pin_entry(e->pin, out);
  pthread_mutex_unlock(&s->mu);
}

void store__hot_clear(store *s) {
  hot *freed = NULL;
  pthread_mutex_lock(&s->mu);
  while (s->lru_head) {
    hot *h = s->lru_head;
    hot_unindex(s, h);
    if (h->refs == 0) {
      s->mem_used -= h->mem;
      h->hnext = freed;
      freed = h;
    }
  }
  pthread_mutex_unlock(&s->mu);
  free_list(freed);
}

/* ---- the background check of mapped modules --------------------------------------- */

/* A module mapped from its table file answers at once; its records are
 * checked here, one module at a time, right after: the arrays' CRC-32
 * against the row's checksum, the indexes' against the header's, and
 * symtab_validate's ranges and orders (store__check_records).  A module that
 * fails is taken out of the hot set and its row and file removed, so the
 * next request fetches it again; until then its lookups stay in bounds
 * (parsers/symtab.c) but may answer wrongly.  At most STORE_VERIFY_QUEUE
 * modules wait; past that a load goes unchecked until `cache verify`. */

typedef struct verify_job {
  struct verify_job *next;
  hot *h; /* pinned */
} verify_job;

static void *verifier_main(void *arg) {
  store *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->verify_head && !s->verifier_stop)
      pthread_cond_wait(&s->verify_cv, &s->mu);
    if (s->verifier_stop)
      break;
    verify_job *j = s->verify_head;
    s->verify_head = j->next;
    if (!s->verify_head)
      s->verify_tail = NULL;
    s->nverify--;
    s->verifying = true;
    hot *h = j->h;
    free(j);
    pthread_mutex_unlock(&s->mu);

    char why[256];
    /* the check reads the whole file in order: ask for it ahead (the
     * mapping itself is advised random, for lookups) */
    if (h->map.base)
      madvise(h->map.base, h->map.len, MADV_WILLNEED);
    /* against the checksums of the file's header (the load compared it with the row's) */
    const char *bad = h->dead ? NULL : store__check_records(&h->st, &h->map, 0, why, sizeof why);
    if (bad && h->key) {
      store__hot_drop(s, h->key);
      store__drop_damaged(s, h->key, h->table_file, bad);
    }
    store_entry e = {.st = &h->st, .pin = h};
    pthread_mutex_lock(&s->mu);
    if (bad)
      s->verify_failed++;
    else
      s->verified++;
    pthread_mutex_unlock(&s->mu);
    store_release(s, &e);
    pthread_mutex_lock(&s->mu);
    s->verifying = false;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

void store__verify_enqueue(store *s, hot *h) {
  if (s->verifier_stop || s->nverify >= STORE_VERIFY_QUEUE) {
    s->verify_skipped++;
    return;
  }
  if (!s->verifier_started) {
    if (pthread_create(&s->verifier, NULL, verifier_main, s) != 0) {
      s->verify_skipped++;
      return;
    }
    s->verifier_started = true;
  }
  verify_job *j = malloc(sizeof *j);
  if (!j) {
    s->verify_skipped++;
    return;
  }
  h->refs++;
  j->h = h;
  j->next = NULL;
  if (s->verify_tail)
    s->verify_tail->next = j;
  else
    s->verify_head = j;
  s->verify_tail = j;
  s->nverify++;
  pthread_cond_signal(&s->verify_cv);
}

void store__verify_stop(store *s) {
  pthread_mutex_lock(&s->mu);
  s->verifier_stop = true;
  pthread_cond_broadcast(&s->verify_cv);
  bool started = s->verifier_started;
  pthread_mutex_unlock(&s->mu);
  if (started)
    pthread_join(s->verifier, NULL);
  /* modules still waiting: unchecked, unpinned */
  for (;;) {
    pthread_mutex_lock(&s->mu);
    verify_job *j = s->verify_head;
    if (j) {
      s->verify_head = j->next;
      s->nverify--;
    } else {
      s->verify_tail = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (!j)
      break;
    store_entry e = {.st = &j->h->st, .pin = j->h};
    store_release(s, &e);
    free(j);
  }
}
