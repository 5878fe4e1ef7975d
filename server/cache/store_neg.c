/*
 * store_neg.c - negative entries in memory, in front of SQLite: a module
 * known to be missing (or malformed, or failing upstream) is answered from
 * here, without a read of the database, until its entry expires.
 *
 *   store_get(key) -> hot set (positive) -> these entries -> SQLite
 *
 * An entry is made when a negative entry is written (store_put_negative_ttl)
 * and when one is read from SQLite (another process, an earlier run), with
 * the expiry time SQLite holds, so the TTLs are those of the settings.  It is
 * dropped when the module is stored (store_put, store_adopt), evicted or
 * cleared.  Another process may store the module meanwhile (`pdbsym warm` on
 * the same folder): an entry is therefore believed for at most
 * STORE_NEG_RECHECK_S, then SQLite is read again (one read per module per
 * interval, however many requests ask).
 *
 * Bounded: at most cfg.negative_memory entries (default STORE_NEG_MEMORY);
 * beyond, the least recently used is dropped (it is still in SQLite).  Each
 * entry holds its key and error as allocated strings (a few hundred bytes).
 * One mutex; store_get takes it with the hot set's held (s->mu, then neg_mu).
 */
#include "store_int.h"

#define NEG_NBUCKETS 4096u

typedef struct negent {
  struct negent *hnext;       /* hash chain */
  struct negent *prev, *next; /* LRU list, head = most recent */
  char *key, *error;
  store_neg_kind kind;
  int64_t expires_at; /* unix seconds: the entry's TTL */
  int64_t recheck_at; /* unix seconds: SQLite is read again after this */
} negent;

struct store_neg {
  pthread_mutex_t mu;
  negent *buckets[NEG_NBUCKETS];
  negent *head, *tail;
  size_t n, max;
  uint64_t hits;
};

static uint32_t neg_hash(const char *k) {
  uint32_t h = 2166136261u;
  for (; *k; k++)
    h = (h ^ (uint8_t)*k) * 16777619u;
  return h % NEG_NBUCKETS;
}

store_neg *store__neg_new(size_t max) {
  store_neg *n = calloc(1, sizeof *n);
  if (!n)
    return NULL;
  pthread_mutex_init(&n->mu, NULL);
  n->max = max ? max : STORE_NEG_MEMORY;
  return n;
}

static void ent_free(negent *e) {
  free(e->key);
  free(e->error);
  free(e);
}

static void lru_unlink(store_neg *n, negent *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    n->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    n->tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_front(store_neg *n, negent *e) {
  e->prev = NULL;
  e->next = n->head;
  if (n->head)
    n->head->prev = e;
  n->head = e;
  if (!n->tail)
    n->tail = e;
}

/* Finds key (mu held); *pp gets the link that points at it. */
static negent *find(store_neg *n, const char *key, negent ***pp) {
  negent **p = &n->buckets[neg_hash(key)];
  while (*p && strcmp((*p)->key, key) != 0)
    p = &(*p)->hnext;
  if (pp)
    *pp = p;
  return *p;
}

/* Unlinks and frees the entry *pp points at (mu held). */
static void remove_at(store_neg *n, negent **pp) {
  negent *e = *pp;
  *pp = e->hnext;
  lru_unlink(n, e);
  n->n--;
  ent_free(e);
}

void store__neg_free(store_neg *n) {
  if (!n)
    return;
  for (negent *e = n->head, *next; e; e = next) {
    next = e->next;
    ent_free(e);
  }
  pthread_mutex_destroy(&n->mu);
  free(n);
}

bool store__neg_get(store_neg *n, const char *key, int64_t now, store_entry *out) {
  if (!n)
    return false;
  bool hit = false;
  pthread_mutex_lock(&n->mu);
  negent **pp;
  negent *e = find(n, key, &pp);
  if (e && (now >= e->expires_at || now >= e->recheck_at)) {
    remove_at(n, pp); /* expired, or time to look at SQLite again */
  } else if (e) {
    out->neg = e->kind;
    out->expires_at = e->expires_at;
    copy_str(out->error, sizeof out->error, e->error);
    lru_unlink(n, e);
    lru_front(n, e);
    n->hits++;
    hit = true;
  }
  pthread_mutex_unlock(&n->mu);
  return hit;
}

void store__neg_put(store_neg *n, const char *key, store_neg_kind kind, const char *error,
                    int64_t expires_at, int64_t now) {
  if (!n || !key || expires_at <= now)
    return;
  int64_t recheck = now + STORE_NEG_RECHECK_S;
  pthread_mutex_lock(&n->mu);
  negent **pp;
  negent *e = find(n, key, &pp);
  if (e) {
    char *msg = dup_str(error ? error : "");
    if (msg) {
      free(e->error);
      e->error = msg;
    }
    e->kind = kind;
    e->expires_at = expires_at;
    e->recheck_at = recheck < expires_at ? recheck : expires_at;
    lru_unlink(n, e);
    lru_front(n, e);
    pthread_mutex_unlock(&n->mu);
    return;
  }
  e = calloc(1, sizeof *e);
  if (e) {
    e->key = dup_str(key);
    e->error = dup_str(error ? error : "");
  }
  if (!e || !e->key || !e->error) {
    if (e)
      ent_free(e);
    pthread_mutex_unlock(&n->mu);
    return; /* out of memory: SQLite still has it */
  }
  e->kind = kind;
  e->expires_at = expires_at;
  e->recheck_at = recheck < expires_at ? recheck : expires_at;
  e->hnext = *pp;
  *pp = e;
  lru_front(n, e);
  n->n++;
  while (n->n > n->max && n->tail) {
    negent **tp;
    if (find(n, n->tail->key, &tp))
      remove_at(n, tp);
  }
  pthread_mutex_unlock(&n->mu);
}

void store__neg_drop(store_neg *n, const char *key) {
  if (!n || !key)
    return;
  pthread_mutex_lock(&n->mu);
  negent **pp;
  if (find(n, key, &pp))
    remove_at(n, pp);
  pthread_mutex_unlock(&n->mu);
}

void store__neg_clear(store_neg *n) {
  if (!n)
    return;
  pthread_mutex_lock(&n->mu);
  for (negent *e = n->head, *next; e; e = next) {
    next = e->next;
    ent_free(e);
  }
  memset(n->buckets, 0, sizeof n->buckets);
  n->head = n->tail = NULL;
  n->n = 0;
  pthread_mutex_unlock(&n->mu);
}

void store__neg_stats(store_neg *n, uint64_t *entries, uint64_t *hits) {
  *entries = *hits = 0;
  if (!n)
    return;
  pthread_mutex_lock(&n->mu);
  *entries = n->n;
  *hits = n->hits;
  pthread_mutex_unlock(&n->mu);
}
