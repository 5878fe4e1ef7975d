/*
 * ntcode.c - the code map of a .NET trace (see ntcode.h).
 *
 * Maps pair with method bodies by file order, per (MethodID, ReJITID): the
 * runtime writes a JIT's MethodILToNativeMap right after its
 * MethodLoadVerbose, and the rundown writes MethodDCStopILToNativeMap right
 * before MethodDCStopVerbose, so a map pairs with a body next to it that has
 * none yet (tiered code versions share a MethodID and each gets its own map).
 */
#include "ntcode.h"

#include <stdlib.h>
#include <string.h>

void ntc_init(ntc_table *t, ps_budget *budget) {
  memset(t, 0, sizeof *t);
  t->budget = budget;
}

static void release(ntc_table *t, void *p, size_t bytes) {
  free(p);
  if (t->budget)
    ps_budget_release(t->budget, bytes);
}

void ntc_free(ntc_table *t) {
  release(t, t->strs, t->strs_cap);
  release(t, t->modules, t->cmodules * sizeof *t->modules);
  release(t, t->methods, t->cmethods * sizeof *t->methods);
  release(t, t->maps, t->cmaps * sizeof *t->maps);
  release(t, t->entries, t->centries * sizeof *t->entries);
  release(t, t->seen, t->seen_cap * sizeof *t->seen);
  memset(t, 0, sizeof *t);
}

/* grows *arr (of *cap elements) to hold need elements */
static bool grow(ntc_table *t, void **arr, size_t *cap, size_t need, size_t size) {
  if (t->err)
    return false;
  if (need <= *cap)
    return true;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2) {
      t->err = PS_E_OVERFLOW;
      return false;
    }
    ncap *= 2;
  }
  ps_err e = PS_E_OK;
  void *n = ps_realloc_array(t->budget, *arr, *cap, ncap, size, &e);
  if (!n) {
    t->err = e ? e : PS_E_NOMEM;
    return false;
  }
  *arr = n;
  *cap = ncap;
  return true;
}

static uint32_t add_str(ntc_table *t, const char *s, size_t n) {
  if (n == 0)
    return 0;
  if (t->strs_len == 0) { /* offset 0 is "" */
    if (!grow(t, (void **)&t->strs, &t->strs_cap, 1, 1))
      return 0;
    t->strs[0] = '\0';
    t->strs_len = 1;
  }
  if (t->strs_len + n + 1 > UINT32_MAX) {
    t->err = PS_E_LIMIT;
    return 0;
  }
  if (!grow(t, (void **)&t->strs, &t->strs_cap, t->strs_len + n + 1, 1))
    return 0;
  uint32_t off = (uint32_t)t->strs_len;
  memcpy(t->strs + off, s, n);
  t->strs[off + n] = '\0';
  t->strs_len += n + 1;
  return off;
}

static uint32_t add_u16(ntc_table *t, nt_u16 s) {
  char buf[4096];
  size_t n = nt_u16_to_utf8(s, buf, sizeof buf);
  return add_str(t, buf, n);
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0x7fb5d329728ea185ULL;
  h ^= h >> 27;
  return h;
}

/* true when h was not seen before (and records it); false for a repeat or
 * on failure (t->err set) */
static bool first_sight(ntc_table *t, uint64_t h) {
  if (h == 0)
    h = 1;
  if ((t->nseen + 1) * 2 > t->seen_cap) {
    size_t ncap = t->seen_cap ? t->seen_cap * 2 : 1024;
    ps_err e = PS_E_OK;
    uint64_t *ns = ps_alloc_array(t->budget, ncap, sizeof *ns, &e);
    if (!ns) {
      t->err = e ? e : PS_E_NOMEM;
      return false;
    }
    for (size_t i = 0; i < t->seen_cap; i++) {
      if (!t->seen[i])
        continue;
      size_t s = (size_t)t->seen[i] & (ncap - 1);
      while (ns[s])
        s = (s + 1) & (ncap - 1);
      ns[s] = t->seen[i];
    }
    release(t, t->seen, t->seen_cap * sizeof *t->seen);
    t->seen = ns;
    t->seen_cap = ncap;
  }
  size_t mask = t->seen_cap - 1;
  for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
    if (t->seen[s] == h) {
      t->duplicates++;
      return false;
    }
    if (!t->seen[s]) {
      t->seen[s] = h;
      t->nseen++;
      return true;
    }
  }
}

bool ntc_add_module(ntc_table *t, const nt_module_load *m) {
  for (size_t i = 0; i < t->nmodules; i++)
    if (t->modules[i].module_id == m->module_id)
      return true;
  if (!grow(t, (void **)&t->modules, &t->cmodules, t->nmodules + 1, sizeof *t->modules))
    return false;
  ntc_module *o = &t->modules[t->nmodules];
  memset(o, 0, sizeof *o);
  o->module_id = m->module_id;
  o->il_path = add_u16(t, m->il_path);
  o->native_path = add_u16(t, m->native_path);
  o->pdb_path = add_u16(t, m->pdb_path);
  memcpy(o->pdb_guid, m->pdb_guid, 16);
  o->pdb_age = m->pdb_age;
  o->has_pdb = m->has_pdb;
  if (t->err)
    return false;
  t->nmodules++;
  t->finished = false;
  return true;
}

/* a body's identity: its range, ids and names (dynamic methods reuse both
 * the memory and the MethodDesc of a collected one, under a new name) */
static uint64_t str_hash(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
  return h * 0x100000001b3ULL; /* the end of one string */
}

static uint64_t method_hash(uint64_t start, uint32_t size, uint64_t method_id, uint64_t rejit,
                            uint32_t token, const char *ns, const char *nm, const char *sig) {
  uint64_t names = str_hash(str_hash(str_hash(0xcbf29ce484222325ULL, ns), nm), sig);
  return mix(mix(mix(mix(mix(mix(1, start), size), method_id), rejit), token), names);
}

/* a body whose strings are set by the caller; NULL on a repeat or failure */
static ntc_method *add_body(ntc_table *t, uint64_t start, uint32_t size, uint64_t method_id,
                            uint64_t rejit, uint32_t token, const char *ns, const char *nm,
                            const char *sig) {
  if (!first_sight(t, method_hash(start, size, method_id, rejit, token, ns, nm, sig)))
    return NULL;
  if (!grow(t, (void **)&t->methods, &t->cmethods, t->nmethods + 1, sizeof *t->methods))
    return NULL;
  ntc_method *o = &t->methods[t->nmethods];
  memset(o, 0, sizeof *o);
  o->start = start;
  o->size = size;
  o->token = token;
  o->method_id = method_id;
  o->rejit = rejit;
  o->module = NTC_NONE;
  o->map_first = NTC_NONE;
  o->map_last_il = 0;
  o->seq = t->seq++;
  return o;
}

bool ntc_add_method(ntc_table *t, const nt_method_load *m) {
  char ns[4096], nm[4096], sig[4096];
  size_t nl = nt_u16_to_utf8(m->ns, ns, sizeof ns), ml = nt_u16_to_utf8(m->name, nm, sizeof nm),
         sl = nt_u16_to_utf8(m->signature, sig, sizeof sig);
  ntc_method *o = add_body(t, m->start, m->size, m->method_id, m->rejit, m->token, ns, nm, sig);
  if (!o)
    return t->err == PS_E_OK;
  o->flags = m->flags;
  o->module_id = m->module_id;
  o->ns = add_str(t, ns, nl);
  o->name = add_str(t, nm, ml);
  o->signature = add_str(t, sig, sl);
  if (t->err)
    return false;
  t->nmethods++;
  t->finished = false;
  return true;
}

bool ntc_add_il_map(ntc_table *t, const nt_il_map *m) {
  if (m->extent != 0) /* a cold part: not emitted by the runtime's JIT today */
    return true;
  uint64_t h = mix(mix(mix(2, m->method_id), m->rejit), m->count);
  for (size_t i = 0; i < m->count; i++)
    h = mix(h, (uint64_t)nt_il_map_native(m, i) << 32 | (uint32_t)nt_il_map_il(m, i));
  if (!first_sight(t, h))
    return t->err == PS_E_OK;
  if (!grow(t, (void **)&t->maps, &t->cmaps, t->nmaps + 1, sizeof *t->maps) ||
      !grow(t, (void **)&t->entries, &t->centries, t->nentries + m->count, sizeof *t->entries))
    return false;
  ntc_mapref *r = &t->maps[t->nmaps++];
  r->method_id = m->method_id;
  r->rejit = m->rejit;
  r->first = (uint32_t)t->nentries;
  r->count = m->count;
  r->seq = t->seq++;
  r->last_il = 0;
  r->used = false;
  for (size_t i = 0; i < m->count; i++) {
    ntc_entry *e = &t->entries[t->nentries++];
    e->native = nt_il_map_native(m, i);
    e->il = nt_il_map_il(m, i);
  }
  t->finished = false;
  return true;
}

/* ---- finishing ---- */

typedef struct {
  uint64_t id, rejit;
  uint32_t seq;
  uint32_t index; /* into methods or maps */
  bool is_map;
} pairing;

static int cmp_pairing(const void *a, const void *b) {
  const pairing *x = a, *y = b;
  if (x->id != y->id)
    return x->id < y->id ? -1 : 1;
  if (x->rejit != y->rejit)
    return x->rejit < y->rejit ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

typedef struct {
  uint32_t native, order;
  int32_t il;
} sort_entry;

static int cmp_sort_entry(const void *a, const void *b) {
  const sort_entry *x = a, *y = b;
  if (x->native != y->native)
    return x->native < y->native ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_method(const void *a, const void *b) {
  const ntc_method *x = a, *y = b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_module(const void *a, const void *b) {
  const ntc_module *x = a, *y = b;
  return x->module_id < y->module_id ? -1 : x->module_id > y->module_id;
}

/* Sorts one map's entries by native offset (stable) and folds an entry that
 * repeats the previous IL offset; returns the new count. */
static uint32_t normalize_map(ntc_table *t, uint32_t first, uint32_t count, int32_t *last_il) {
  *last_il = 0;
  if (count == 0)
    return 0;
  ps_err e = PS_E_OK;
  sort_entry *tmp = ps_alloc_array(t->budget, count, sizeof *tmp, &e);
  if (!tmp) {
    t->err = e ? e : PS_E_NOMEM;
    return 0;
  }
  for (uint32_t i = 0; i < count; i++) {
    tmp[i].native = t->entries[first + i].native;
    tmp[i].il = t->entries[first + i].il;
    tmp[i].order = i;
    if (tmp[i].il > *last_il)
      *last_il = tmp[i].il;
  }
  if (count > 1)
    qsort(tmp, count, sizeof *tmp, cmp_sort_entry);
  uint32_t n = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (n > 0 && t->entries[first + n - 1].il == tmp[i].il)
      continue;
    t->entries[first + n].native = tmp[i].native;
    t->entries[first + n].il = tmp[i].il;
    n++;
  }
  release(t, tmp, (size_t)count * sizeof *tmp);
  return n;
}

ps_err ntc_finish(ntc_table *t) {
  if (t->err)
    return t->err;
  /* pair maps with bodies, in file order per (MethodID, ReJITID) */
  size_t np = t->nmethods + t->nmaps;
  ps_err e = PS_E_OK;
  pairing *p = ps_alloc_array(t->budget, np, sizeof *p, &e);
  if (!p)
    return t->err = e ? e : PS_E_NOMEM;
  size_t k = 0;
  for (size_t i = 0; i < t->nmethods; i++)
    if (t->methods[i].map_first == NTC_NONE)
      p[k++] = (pairing){t->methods[i].method_id, t->methods[i].rejit, t->methods[i].seq,
                         (uint32_t)i, false};
  for (size_t i = 0; i < t->nmaps; i++)
    if (t->maps[i].count != NTC_NONE) /* NTC_NONE: already attached by an earlier finish */
      p[k++] = (pairing){t->maps[i].method_id, t->maps[i].rejit, t->maps[i].seq, (uint32_t)i,
                         true};
  if (k > 1)
    qsort(p, k, sizeof *p, cmp_pairing);
  for (size_t i = 0; i < k;) {
    size_t j = i;
    uint32_t pending_body = NTC_NONE, pending_map = NTC_NONE;
    for (; j < k && p[j].id == p[i].id && p[j].rejit == p[i].rejit; j++) {
      if (p[j].is_map) {
        if (pending_body != NTC_NONE) {
          t->methods[pending_body].map_first = p[j].index; /* a map index for now */
          pending_body = NTC_NONE;
        } else {
          pending_map = p[j].index;
        }
      } else {
        if (pending_map != NTC_NONE) {
          t->methods[p[j].index].map_first = pending_map;
          pending_map = NTC_NONE;
        } else {
          pending_body = p[j].index;
        }
      }
    }
    i = j;
  }
  release(t, p, np * sizeof *p);
  /* normalize each map once; methods then point at entries */
  for (size_t i = 0; i < t->nmaps; i++) {
    ntc_mapref *r = &t->maps[i];
    if (r->count == NTC_NONE)
      continue;
    int32_t last;
    uint32_t n = normalize_map(t, r->first, r->count, &last);
    if (t->err)
      return t->err;
    r->count = n;
    r->last_il = last;
  }
  for (size_t i = 0; i < t->nmethods; i++) {
    ntc_method *m = &t->methods[i];
    if (m->map_first == NTC_NONE || m->map_count != 0 || m->map_first >= t->nmaps)
      continue;
    ntc_mapref *r = &t->maps[m->map_first];
    m->map_first = r->first;
    m->map_count = r->count;
    m->map_last_il = r->last_il;
    r->used = true;
  }
  /* attached maps are consumed: a later finish must not pair them again; a
   * map whose body has not come yet waits for it (a finish may run mid-trace) */
  for (size_t i = 0; i < t->nmaps; i++)
    if (t->maps[i].used)
      t->maps[i].count = NTC_NONE;
  if (t->nmodules > 1) /* (qsort's array may not be NULL even when empty) */
    qsort(t->modules, t->nmodules, sizeof *t->modules, cmp_module);
  if (t->nmethods > 1)
    qsort(t->methods, t->nmethods, sizeof *t->methods, cmp_method);
  /* one body seen twice (JIT event, then rundown): keep the first, and its map
   * if only the second has one */
  size_t n = 0;
  for (size_t i = 0; i < t->nmethods; i++) {
    ntc_method *m = &t->methods[i];
    if (n > 0) {
      ntc_method *prev = &t->methods[n - 1];
      if (prev->start == m->start && prev->size == m->size && prev->method_id == m->method_id &&
          prev->rejit == m->rejit && prev->token == m->token &&
          !strcmp(ntc_s(t, prev->name), ntc_s(t, m->name)) &&
          !strcmp(ntc_s(t, prev->ns), ntc_s(t, m->ns)) &&
          !strcmp(ntc_s(t, prev->signature), ntc_s(t, m->signature))) {
        if (prev->map_count == 0 && m->map_count != 0) {
          prev->map_first = m->map_first;
          prev->map_count = m->map_count;
          prev->map_last_il = m->map_last_il;
        }
        continue;
      }
    }
    t->methods[n++] = *m;
  }
  t->nmethods = n;
  for (size_t i = 0; i < t->nmethods; i++) {
    ntc_method *m = &t->methods[i];
    m->module = NTC_NONE;
    size_t lo = 0, hi = t->nmodules;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (t->modules[mid].module_id < m->module_id)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < t->nmodules && t->modules[lo].module_id == m->module_id)
      m->module = (uint32_t)lo;
    if (m->map_count == 0)
      m->map_first = NTC_NONE;
  }
  t->nsorted = t->nmethods;
  t->finished = true;
  return PS_E_OK;
}

int32_t ntc_il_for_native(const ntc_table *t, const ntc_method *m, uint32_t native,
                          ntc_mapping *how) {
  if (m->map_first == NTC_NONE || m->map_count == 0) {
    *how = NTC_MAP_NONE;
    return -1;
  }
  const ntc_entry *e = t->entries + m->map_first;
  uint32_t n = m->map_count;
  /* the last entry starting at or before native (entries sorted by native;
   * of equal starts the last one wins, the others covering nothing) */
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (e[mid].native <= native)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) {
    *how = NTC_MAP_NO_INFO;
    return 0;
  }
  const ntc_entry *x = &e[lo - 1];
  if (lo == n && x->il == NT_IL_PROLOG) { /* the open-ended last entry is never the prolog */
    *how = NTC_MAP_NO_INFO;
    return 0;
  }
  switch (x->il) {
  case NT_IL_PROLOG: *how = NTC_MAP_PROLOG; return 0;
  case NT_IL_NO_MAPPING: *how = NTC_MAP_UNMAPPED; return 0;
  case NT_IL_EPILOG: *how = NTC_MAP_EPILOG; return m->map_last_il;
  default: break;
  }
  if (x->il < 0) { /* another negative value: no meaning known */
    *how = NTC_MAP_UNMAPPED;
    return 0;
  }
  *how = x->native == native ? NTC_MAP_EXACT : NTC_MAP_APPROX;
  return x->il;
}

/* out->il_end and out->estimate (ntcode.h) */
static void honest_range(const ntc_table *t, const ntc_method *m, ntc_answer *out) {
  out->il_end = -1;
  out->estimate = -1;
  if (m->map_first == NTC_NONE || m->map_count == 0)
    return;
  const ntc_entry *e = t->entries + m->map_first;
  uint32_t n = m->map_count;
  if (out->mapping == NTC_MAP_UNMAPPED) {
    uint32_t x = 0; /* the entry covering the offset */
    while (x + 1 < n && e[x + 1].native <= out->native_offset)
      x++;
    for (uint32_t k = x + 1; k > 0 && out->estimate < 0; k--)
      if (e[k - 1].il >= 0)
        out->estimate = e[k - 1].il;
    for (uint32_t k = x + 1; k < n && out->estimate < 0; k++)
      if (e[k].il >= 0)
        out->estimate = e[k].il;
  }
  int32_t from = out->mapping == NTC_MAP_UNMAPPED ? out->estimate : out->il;
  if (from < 0 || (out->mapping != NTC_MAP_EXACT && out->mapping != NTC_MAP_APPROX &&
                   out->mapping != NTC_MAP_UNMAPPED))
    return;
  for (uint32_t k = 0; k < n; k++)
    if (e[k].il > from && (out->il_end < 0 || e[k].il < out->il_end))
      out->il_end = e[k].il;
}

static bool lookup(const ntc_table *t, uint64_t ip, bool leaf, bool with_dead, ntc_answer *out) {
  memset(out, 0, sizeof *out);
  out->il = -1;
  out->il_end = -1;
  out->estimate = -1;
  if (!t->finished || t->nmethods == 0)
    return false;
  /* the range with the greatest start <= ip, then a few before it in case
   * ranges overlap (code memory reused); the last-loaded one wins */
  size_t lo = 0, hi = t->nmethods;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->methods[mid].start <= ip)
      lo = mid + 1;
    else
      hi = mid;
  }
  const ntc_method *best = NULL;
  for (size_t i = lo, steps = 0; i > 0 && steps < 16; i--, steps++) {
    const ntc_method *m = &t->methods[i - 1];
    if ((with_dead || !m->dead) && ip - m->start < (uint64_t)m->size &&
        (!best || m->seq > best->seq))
      best = m;
  }
  if (!best)
    return false;
  uint64_t addr = leaf || ip == best->start ? ip : ip - 1;
  out->method = best;
  out->module = best->module != NTC_NONE ? &t->modules[best->module] : NULL;
  out->native_offset = (uint32_t)(addr - best->start);
  out->il = ntc_il_for_native(t, best, out->native_offset, &out->mapping);
  honest_range(t, best, out);
  return true;
}

bool ntc_lookup(const ntc_table *t, uint64_t ip, bool leaf, ntc_answer *out) {
  return lookup(t, ip, leaf, false, out);
}

bool ntc_lookup_any(const ntc_table *t, uint64_t ip, bool leaf, ntc_answer *out) {
  return lookup(t, ip, leaf, true, out);
}

/* ---- maps from elsewhere (ReadyToRun images) ---- */

bool ntc_attach_map(ntc_table *t, size_t i, const ntc_entry *e, uint32_t n) {
  if (t->err || i >= t->nmethods || n == 0)
    return t->err == PS_E_OK;
  if (t->nentries + n > UINT32_MAX) {
    t->err = PS_E_LIMIT;
    return false;
  }
  if (!grow(t, (void **)&t->entries, &t->centries, t->nentries + n, sizeof *t->entries))
    return false;
  uint32_t first = (uint32_t)t->nentries;
  memcpy(t->entries + first, e, (size_t)n * sizeof *e);
  t->nentries += n;
  int32_t last;
  uint32_t count = normalize_map(t, first, n, &last);
  if (t->err)
    return false;
  t->nentries = first + count;
  ntc_method *m = &t->methods[i];
  m->map_first = count ? first : NTC_NONE;
  m->map_count = count;
  m->map_last_il = last;
  return true;
}

/* ---- a live code map: unloads, purges, merges ---- */

bool ntc_note_unload(ntc_table *t, const nt_method_load *m) {
  char nm[4096];
  nt_u16_to_utf8(m->name, nm, sizeof nm);
  /* the body it names: the last loaded one alive with its MethodID, start and
   * name (a MethodDesc and its code memory can both be reused by the next
   * method: the name tells the two apart) */
  ntc_method *body = NULL;
  size_t lo = 0, hi = t->nsorted; /* the sorted part: those starting there */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->methods[mid].start < m->start)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < t->nmethods; i++) {
    if (i < t->nsorted && t->methods[i].start != m->start)
      i = t->nsorted; /* then those added since */
    if (i >= t->nmethods)
      break;
    ntc_method *b = &t->methods[i];
    if (!b->dead && b->method_id == m->method_id && b->start == m->start &&
        strcmp(ntc_s(t, b->name), nm) == 0 && (!body || b->seq > body->seq))
      body = b;
  }
  if (body) {
    body->dead = true;
    t->ndead++;
  }
  return true;
}

/* s into the new string arena ns (of *len, capacity cap), returning its offset */
static uint32_t keep_str(const ntc_table *t, uint32_t off, char *ns, size_t *len) {
  const char *s = ntc_s(t, off);
  size_t n = strlen(s);
  if (n == 0)
    return 0;
  uint32_t at = (uint32_t)*len;
  memcpy(ns + at, s, n + 1);
  *len += n + 1;
  return at;
}

ps_err ntc_purge(ntc_table *t) {
  if (t->err)
    return t->err;
  if (!t->finished)
    return t->err = PS_E_INVALID;
  /* what stays: its strings and entries, counted before allocating */
  size_t keep = 0, nentries = 0, slen = 1;
  for (size_t i = 0; i < t->nmethods; i++) {
    const ntc_method *m = &t->methods[i];
    if (m->dead)
      continue;
    keep++;
    if (m->map_first != NTC_NONE)
      nentries += m->map_count;
    slen += strlen(ntc_s(t, m->ns)) + strlen(ntc_s(t, m->name)) + strlen(ntc_s(t, m->signature)) + 3;
  }
  for (size_t i = 0; i < t->nmodules; i++) {
    const ntc_module *o = &t->modules[i];
    slen += strlen(ntc_s(t, o->il_path)) + strlen(ntc_s(t, o->native_path)) +
            strlen(ntc_s(t, o->pdb_path)) + 3;
  }
  ps_err e = PS_E_OK;
  char *ns = ps_alloc_array(t->budget, slen, 1, &e);
  ntc_entry *ne = ns ? ps_alloc_array(t->budget, nentries ? nentries : 1, sizeof *ne, &e) : NULL;
  if (!ns || !ne) {
    if (ns)
      release(t, ns, slen);
    return t->err = e ? e : PS_E_NOMEM;
  }
  size_t sl = 1, en = 0, n = 0;
  ns[0] = '\0';
  for (size_t i = 0; i < t->nmodules; i++) {
    ntc_module *o = &t->modules[i];
    o->il_path = keep_str(t, o->il_path, ns, &sl);
    o->native_path = keep_str(t, o->native_path, ns, &sl);
    o->pdb_path = keep_str(t, o->pdb_path, ns, &sl);
  }
  for (size_t i = 0; i < t->nmethods; i++) {
    ntc_method m = t->methods[i];
    if (m.dead) {
      t->purged++;
      continue;
    }
    m.ns = keep_str(t, m.ns, ns, &sl);
    m.name = keep_str(t, m.name, ns, &sl);
    m.signature = keep_str(t, m.signature, ns, &sl);
    if (m.map_first != NTC_NONE) {
      memcpy(ne + en, t->entries + m.map_first, (size_t)m.map_count * sizeof *ne);
      m.map_first = (uint32_t)en;
      en += m.map_count;
    }
    t->methods[n++] = m;
  }
  t->nmethods = n;
  t->nsorted = n; /* kept in their order */
  release(t, t->strs, t->strs_cap);
  t->strs = ns;
  t->strs_len = sl;
  t->strs_cap = slen;
  release(t, t->entries, t->centries * sizeof *t->entries);
  t->entries = ne;
  t->nentries = en;
  t->centries = nentries ? nentries : 1;
  /* the maps were consumed by ntc_finish; the dead bodies are gone */
  t->nmaps = 0;
  t->ndead = 0;
  /* the set of bodies seen: only those kept (the maps' are forgotten, so a
   * map sent again is added again and dropped by the next purge) */
  release(t, t->seen, t->seen_cap * sizeof *t->seen);
  t->seen = NULL;
  t->seen_cap = 0;
  t->nseen = 0;
  for (size_t i = 0; i < t->nmethods; i++) {
    const ntc_method *m = &t->methods[i];
    if (!first_sight(t, method_hash(m->start, m->size, m->method_id, m->rejit, m->token,
                                    ntc_s(t, m->ns), ntc_s(t, m->name), ntc_s(t, m->signature))))
      if (t->err)
        return t->err;
  }
  return PS_E_OK;
}

static uint32_t copy_str(ntc_table *t, const ntc_table *from, uint32_t off) {
  const char *s = ntc_s(from, off);
  return add_str(t, s, strlen(s));
}

bool ntc_merge(ntc_table *t, const ntc_table *from) {
  for (size_t i = 0; i < from->nmodules; i++) {
    const ntc_module *f = &from->modules[i];
    bool have = false;
    for (size_t k = 0; k < t->nmodules && !have; k++)
      have = t->modules[k].module_id == f->module_id;
    if (have)
      continue;
    if (!grow(t, (void **)&t->modules, &t->cmodules, t->nmodules + 1, sizeof *t->modules))
      return false;
    ntc_module *o = &t->modules[t->nmodules];
    *o = *f;
    o->il_path = copy_str(t, from, f->il_path);
    o->native_path = copy_str(t, from, f->native_path);
    o->pdb_path = copy_str(t, from, f->pdb_path);
    if (t->err)
      return false;
    t->nmodules++;
    t->finished = false;
  }
  for (size_t i = 0; i < from->nmethods; i++) {
    const ntc_method *f = &from->methods[i];
    ntc_method *o = add_body(t, f->start, f->size, f->method_id, f->rejit, f->token,
                             ntc_s(from, f->ns), ntc_s(from, f->name), ntc_s(from, f->signature));
    if (!o) {
      if (t->err)
        return false;
      continue; /* a body t has */
    }
    o->flags = f->flags;
    o->module_id = f->module_id;
    o->ns = copy_str(t, from, f->ns);
    o->name = copy_str(t, from, f->name);
    o->signature = copy_str(t, from, f->signature);
    if (t->err)
      return false;
    t->nmethods++;
    t->finished = false;
    if (f->map_first == NTC_NONE || f->map_count == 0)
      continue;
    /* its map, after it: ntc_finish pairs the two */
    if (!grow(t, (void **)&t->maps, &t->cmaps, t->nmaps + 1, sizeof *t->maps) ||
        !grow(t, (void **)&t->entries, &t->centries, t->nentries + f->map_count,
              sizeof *t->entries))
      return false;
    ntc_mapref *r = &t->maps[t->nmaps++];
    r->method_id = f->method_id;
    r->rejit = f->rejit;
    r->first = (uint32_t)t->nentries;
    r->count = f->map_count;
    r->seq = t->seq++;
    r->last_il = 0;
    r->used = false;
    memcpy(t->entries + t->nentries, from->entries + f->map_first,
           (size_t)f->map_count * sizeof *t->entries);
    t->nentries += f->map_count;
  }
  return true;
}
