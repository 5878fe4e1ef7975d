/*
 * test_nettrace.c - the nettrace reader (parsers/nettrace.c) over the real
 * traces of tests/fixtures/nettrace (.NET 8, 9 and 10), checked against what
 * Microsoft's TraceEvent read in the same files (workload.events.jsonl.gz and
 * workload.stacks.jsonl.gz, made by the fixture's oracle): event counts per
 * provider and id, every method, module and IL-map payload, every sample's
 * thread and time, and every sample's stack IPs.  Then hostile inputs:
 * truncations and flipped framing bytes give errors that name the block and
 * the offset.
 *
 * The trace is read the streaming way: a window that grows only to what
 * nt_stream_next asks for, fed in 4 KiB reads, as pdbsym trace reads a file.
 */
#include <jansson.h>
#include <zlib.h>

#include "machine_paths.h"
#include "nettrace.h"
#include "ntcode.h"
#include "test.h"

static const char *tfms[] = {"net10.0", "net9.0", "net8.0", "v6"};

static char *path_of(const char *tfm, const char *file) {
  const char *root = getenv("PDBSYM_SOURCE_DIR");
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/tests/fixtures/nettrace/%s/%s", root ? root : ".", tfm, file);
  return buf;
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

/* ---- a growable list of strings ---- */
typedef struct {
  char **v;
  size_t n, cap;
} strs;

static void strs_add(strs *s, const char *x) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 256;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
  }
  s->v[s->n++] = strdup(x);
}
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}
static void strs_free(strs *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}
/* equal as multisets; prints the first difference */
static void check_same(strs *a, strs *b, const char *what) {
  qsort(a->v, a->n, sizeof *a->v, cmp_str);
  qsort(b->v, b->n, sizeof *b->v, cmp_str);
  if (a->n != b->n) {
    t_failed_checks++;
    fprintf(stderr, "%s: %zu records, oracle %zu\n", what, a->n, b->n);
  }
  for (size_t i = 0; i < a->n && i < b->n; i++)
    if (strcmp(a->v[i], b->v[i])) {
      t_failed_checks++;
      fprintf(stderr, "%s: first difference:\n  ours   %s\n  oracle %s\n", what, a->v[i], b->v[i]);
      return;
    }
}

/* ---- what we read ---- */
typedef struct {
  uint64_t thread, ts;
  size_t nips;
  uint64_t ips[128];
} sample;

typedef struct {
  nt_trace_info ti;
  ntc_table code; /* the code map (ntcode.h) */
  ps_budget budget;
  strs methods, modules, maps;
  strs counts;
  sample *samples;
  size_t nsamples, cap;
  size_t max_window;
  size_t blocks[9];
} reading;

typedef struct {
  uint32_t id;
  size_t n;
  uint64_t ips[128];
} stack_row;

static const char *event_name(const nt_metadata *m) {
  bool rd = !strcmp(m->provider, "Microsoft-Windows-DotNETRuntimeRundown");
  switch (m->event_id) {
  case 143: return rd ? "MethodDCStartVerbose" : "MethodLoadVerbose";
  case 144: return rd ? "MethodDCStopVerbose" : "MethodUnloadVerbose";
  case 149: return "MethodDCStartILToNativeMap";
  case 150: return "MethodDCStopILToNativeMap";
  case 190: return "MethodILToNativeMap";
  case 152: return "ModuleLoad";
  case 153: return rd ? "ModuleDCStart" : "ModuleUnload";
  case 154: return "ModuleDCStop";
  }
  return "?";
}

static void guid_str(const uint8_t g[16], char out[37]) {
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", g[3],
           g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13],
           g[14], g[15]);
}

static ps_err read_trace(const uint8_t *file, size_t flen, reading *out, ps_diag *d) {
  memset(out, 0, sizeof *out);
  ps_budget_init(&out->budget, (size_t)64 << 20);
  ntc_init(&out->code, &out->budget);
  nt_stream s;
  nt_stream_init(&s, 0);
  size_t cap = 1 << 12, wlen = 0, fpos = 0;
  uint8_t *win = malloc(cap);
  nt_metadata *metas = NULL;
  size_t nmeta = 0;
  stack_row *stacks = NULL;
  size_t nstacks = 0;
  struct {
    char key[160];
    int n;
  } cnt[64];
  size_t ncnt = 0;
  uint64_t v6_tid[64] = {0}; /* V6: thread index -> OS thread id */
  ps_err e = PS_E_OK;
  for (;;) {
    size_t used, need;
    nt_block b;
    e = nt_stream_next(&s, win, wlen, fpos == flen, &used, &need, &b, d);
    if (e == PS_E_TRUNCATED && fpos < flen && need > wlen) {
      while (wlen < need && fpos < flen) { /* 4 KiB reads */
        if (wlen + 4096 > cap) {
          cap = 2 * (wlen + 4096);
          win = realloc(win, cap);
        }
        size_t take = flen - fpos < 4096 ? flen - fpos : 4096;
        memcpy(win + wlen, file + fpos, take);
        wlen += take;
        fpos += take;
      }
      if (wlen > out->max_window)
        out->max_window = wlen;
      continue;
    }
    if (e != PS_E_OK)
      break;
    if (b.kind >= 0 && b.kind <= 8)
      out->blocks[b.kind]++;
    if (b.kind == NT_BLOCK_TRACE)
      e = nt_read_trace(&b, s.format, &out->ti, d);
    else if (b.kind == NT_BLOCK_METADATA) {
      nt_metadata_iter it;
      e = nt_metadata_begin(&it, &b, s.format, d);
      bool have = true;
      while (e == PS_E_OK && have) {
        nt_metadata m;
        e = nt_metadata_next(&it, &m, &have, d);
        if (e == PS_E_OK && have) {
          metas = realloc(metas, (nmeta + 1) * sizeof *metas);
          metas[nmeta++] = m;
        }
      }
    } else if (b.kind == NT_BLOCK_STACK) {
      nt_stack_iter it;
      e = nt_stacks_begin(&it, &b, out->ti.pointer_size, d);
      bool have = true;
      while (e == PS_E_OK && have) {
        uint32_t id;
        const uint8_t *ips;
        size_t n;
        e = nt_stacks_next(&it, &id, &ips, &n, &have, d);
        if (e == PS_E_OK && have) {
          stacks = realloc(stacks, (nstacks + 1) * sizeof *stacks);
          stack_row *r = &stacks[nstacks++];
          r->id = id;
          r->n = n < 128 ? n : 128;
          for (size_t i = 0; i < r->n; i++)
            r->ips[i] = nt_stack_ip(ips, i, out->ti.pointer_size);
        }
      }
    } else if (b.kind == NT_BLOCK_THREAD) {
      nt_thread_iter it;
      e = nt_threads_begin(&it, &b, d);
      bool have = true;
      while (e == PS_E_OK && have) {
        nt_thread th;
        e = nt_threads_next(&it, &th, &have, d);
        if (e == PS_E_OK && have && th.has_thread_id && th.index < 64)
          v6_tid[th.index] = th.os_thread_id;
      }
    } else if (b.kind == NT_BLOCK_SP) {
      nt_sequence_point sp;
      e = nt_read_sequence_point(&b, s.format, &sp, d);
      nstacks = 0; /* stacks before a sequence point are no longer referenced */
    } else if (b.kind == NT_BLOCK_EVENT) {
      nt_event_iter it;
      e = nt_events_begin(&it, &b, s.format, d);
      bool have = true;
      while (e == PS_E_OK && have) {
        nt_event ev;
        e = nt_events_next(&it, &ev, &have, d);
        if (e != PS_E_OK || !have)
          break;
        const nt_metadata *m = NULL;
        for (size_t i = 0; i < nmeta; i++)
          if (metas[i].id == ev.metadata_id)
            m = &metas[i];
        CHECK(m != NULL);
        if (!m)
          continue;
        char key[160];
        snprintf(key, sizeof key, "%s\t%u", m->provider, m->event_id);
        size_t k = 0;
        while (k < ncnt && strcmp(cnt[k].key, key))
          k++;
        if (k == ncnt && ncnt < 64) {
          snprintf(cnt[ncnt].key, sizeof cnt[ncnt].key, "%s", key);
          cnt[ncnt++].n = 0;
        }
        if (k < ncnt)
          cnt[k].n++;
        char line[8192], a[2048], bb[2048], c[2048], g[37];
        switch (nt_classify(m)) {
        case NT_EV_METHOD_LOAD:
        case NT_EV_METHOD_UNLOAD: {
          nt_method_load ml;
          e = nt_decode_method_load(ev.payload, ev.payload_len, m->version, &ml, d);
          if (e)
            break;
          nt_u16_to_utf8(ml.ns, a, sizeof a);
          nt_u16_to_utf8(ml.name, bb, sizeof bb);
          nt_u16_to_utf8(ml.signature, c, sizeof c);
          /* TraceEvent's MethodFlags leaves out the optimization tier (bits 7-9) */
          snprintf(line, sizeof line, "%s v%u id %" PRIx64 " module %" PRIx64 " start %" PRIx64
                   " size %u token %x flags %u %s|%s|%s rejit %" PRIu64,
                   event_name(m), m->version, ml.method_id, ml.module_id, ml.start, ml.size,
                   ml.token, ml.flags & ~0x380u, a, bb, c, ml.rejit);
          strs_add(&out->methods, line);
          if (nt_classify(m) == NT_EV_METHOD_LOAD)
            CHECK(ntc_add_method(&out->code, &ml));
          break;
        }
        case NT_EV_IL_MAP: {
          nt_il_map im;
          e = nt_decode_il_map(ev.payload, ev.payload_len, m->version, &im, d);
          if (e)
            break;
          int o = snprintf(line, sizeof line, "%s v%u id %" PRIx64 " rejit %" PRIu64 " extent %u il",
                           event_name(m), m->version, im.method_id, im.rejit, im.extent);
          for (size_t i = 0; i < im.count && o < 7000; i++)
            o += snprintf(line + o, sizeof line - (size_t)o, " %d", nt_il_map_il(&im, i));
          o += snprintf(line + o, sizeof line - (size_t)o, " native");
          for (size_t i = 0; i < im.count && o < 8000; i++)
            o += snprintf(line + o, sizeof line - (size_t)o, " %u", nt_il_map_native(&im, i));
          strs_add(&out->maps, line);
          CHECK(ntc_add_il_map(&out->code, &im));
          break;
        }
        case NT_EV_MODULE_LOAD:
        case NT_EV_MODULE_UNLOAD: {
          nt_module_load mo;
          e = nt_decode_module_load(ev.payload, ev.payload_len, m->version, &mo, d);
          if (e)
            break;
          nt_u16_to_utf8(mo.il_path, a, sizeof a);
          nt_u16_to_utf8(mo.native_path, bb, sizeof bb);
          nt_u16_to_utf8(mo.pdb_path, c, sizeof c);
          guid_str(mo.pdb_guid, g);
          snprintf(line, sizeof line, "%s v%u id %" PRIx64 " assembly %" PRIx64
                   " flags %u %s|%s pdb %s age %u %s", event_name(m), m->version, mo.module_id,
                   mo.assembly_id, mo.flags, a, bb, g, mo.pdb_age, c);
          strs_add(&out->modules, line);
          if (nt_classify(m) == NT_EV_MODULE_LOAD)
            CHECK(ntc_add_module(&out->code, &mo));
          break;
        }
        case NT_EV_SAMPLE: {
          uint32_t type;
          e = nt_decode_sample(ev.payload, ev.payload_len, &type, d);
          if (out->nsamples == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 256;
            out->samples = realloc(out->samples, out->cap * sizeof *out->samples);
          }
          sample *sm = &out->samples[out->nsamples++];
          sm->thread = s.format == 6 && ev.thread_id < 64 ? v6_tid[ev.thread_id] : ev.thread_id;
          sm->ts = ev.timestamp;
          sm->nips = 0;
          for (size_t i = 0; i < nstacks; i++)
            if (stacks[i].id == ev.stack_id) {
              sm->nips = stacks[i].n;
              memcpy(sm->ips, stacks[i].ips, stacks[i].n * sizeof sm->ips[0]);
            }
          break;
        }
        default: break;
        }
      }
    }
    if (e != PS_E_OK)
      break;
    memmove(win, win + used, wlen - used);
    wlen -= used;
    if (b.kind == NT_BLOCK_END)
      break;
  }
  for (size_t k = 0; k < ncnt; k++) {
    char line[200];
    snprintf(line, sizeof line, "%.150s\t%d", cnt[k].key, cnt[k].n);
    strs_add(&out->counts, line);
  }
  free(win);
  free(metas);
  free(stacks);
  return e;
}

static void reading_free(reading *r) {
  ntc_free(&r->code);
  strs_free(&r->methods);
  strs_free(&r->modules);
  strs_free(&r->maps);
  strs_free(&r->counts);
  free(r->samples);
}

/* ---- the oracle's lines ---- */
static json_t **load_jsonl_gz(const char *path, size_t *n) {
  gzFile f = gzopen(path, "rb");
  *n = 0;
  if (!f)
    return NULL;
  size_t cap = 1024;
  json_t **v = malloc(cap * sizeof *v);
  static char line[1 << 20];
  while (gzgets(f, line, sizeof line)) {
    json_error_t err;
    json_t *j = json_loads(line, 0, &err);
    if (!j)
      continue;
    if (*n == cap)
      v = realloc(v, (cap *= 2) * sizeof *v);
    v[(*n)++] = j;
  }
  gzclose(f);
  return v;
}

static uint64_t jhex(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? strtoull(s, NULL, 16) : 0;
}
static const char *jstr(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}
static long long jint(json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}

static void oracle_records(json_t **v, size_t n, strs *methods, strs *modules, strs *maps,
                           strs *counts) {
  for (size_t i = 0; i < n; i++) {
    json_t *o = v[i];
    const char *kind = jstr(o, "kind");
    char line[8192];
    if (!strcmp(kind, "method")) {
      snprintf(line, sizeof line, "%s v%lld id %" PRIx64 " module %" PRIx64 " start %" PRIx64
               " size %lld token %" PRIx64 " flags %lld %s|%s|%s rejit %lld",
               jstr(o, "event"), jint(o, "version"), jhex(o, "method_id"), jhex(o, "module_id"),
               jhex(o, "start"), jint(o, "size"), jhex(o, "token"), jint(o, "flags"),
               jstr(o, "namespace"), jstr(o, "name"), jstr(o, "signature"), jint(o, "rejit"));
      strs_add(methods, line);
    } else if (!strcmp(kind, "module")) {
      snprintf(line, sizeof line, "%s v%lld id %" PRIx64 " assembly %" PRIx64
               " flags %lld %s|%s pdb %s age %lld %s", jstr(o, "event"), jint(o, "version"),
               jhex(o, "module_id"), jhex(o, "assembly_id"), jint(o, "flags"), jstr(o, "il_path"),
               jstr(o, "native_path"), jstr(o, "pdb_guid"), jint(o, "pdb_age"), jstr(o, "pdb_path"));
      strs_add(modules, line);
    } else if (!strcmp(kind, "ilmap")) {
      int w = snprintf(line, sizeof line, "%s v%lld id %" PRIx64 " rejit %lld extent %lld il",
                       jstr(o, "event"), jint(o, "version"), jhex(o, "method_id"),
                       jint(o, "rejit"), jint(o, "extent"));
      json_t *a = json_object_get(o, "il"), *b = json_object_get(o, "native");
      for (size_t k = 0; k < json_array_size(a) && w < 7000; k++)
        w += snprintf(line + w, sizeof line - (size_t)w, " %lld",
                      json_integer_value(json_array_get(a, k)));
      w += snprintf(line + w, sizeof line - (size_t)w, " native");
      for (size_t k = 0; k < json_array_size(b) && w < 8000; k++)
        w += snprintf(line + w, sizeof line - (size_t)w, " %lld",
                      json_integer_value(json_array_get(b, k)));
      strs_add(maps, line);
    } else if (!strcmp(kind, "count")) {
      const char *p = jstr(o, "provider");
      if (strncmp(p, "Microsoft-Windows-DotNETRuntime", 31))
        continue; /* TraceEvent names some providers by GUID */
      snprintf(line, sizeof line, "%s\t%lld\t%lld", p, jint(o, "event_id"), jint(o, "n"));
      strs_add(counts, line);
    }
  }
}

static int cmp_sample(const void *a, const void *b) {
  const sample *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static void check_fixture(const char *tfm) {
  size_t flen;
  uint8_t *file = slurp(path_of(tfm, "workload.nettrace"), &flen);
  CHECK(file != NULL);
  if (!file)
    return;
  reading rd;
  ps_diag d;
  ps_diag_clear(&d);
  ps_err e = read_trace(file, flen, &rd, &d);
  char msg[256];
  if (e)
    fprintf(stderr, "%s: %s\n", tfm, ps_diag_format(&d, msg, sizeof msg));
  CHECK_EQ_U(e, PS_E_OK);
  CHECK_EQ_U(rd.ti.pointer_size, 8);
  CHECK_EQ_U(rd.blocks[NT_BLOCK_TRACE], 1);
  CHECK(rd.blocks[NT_BLOCK_EVENT] > 0 && rd.blocks[NT_BLOCK_STACK] > 0);
  /* streaming: the window never held much more than one block */
  CHECK(rd.max_window < (size_t)200 << 10);

  size_t nev;
  json_t **ev = load_jsonl_gz(path_of(tfm, "workload.events.jsonl.gz"), &nev);
  CHECK(nev > 1000);
  strs om = {0}, omod = {0}, omap = {0}, ocnt = {0};
  oracle_records(ev, nev, &om, &omod, &omap, &ocnt);
  check_same(&rd.methods, &om, "method events");
  check_same(&rd.modules, &omod, "module events");
  check_same(&rd.maps, &omap, "IL map events");
  /* counts: ours for the two runtime providers, the oracle's too */
  strs ours_cnt = {0};
  for (size_t i = 0; i < rd.counts.n; i++)
    if (!strncmp(rd.counts.v[i], "Microsoft-Windows-DotNETRuntime", 31))
      strs_add(&ours_cnt, rd.counts.v[i]);
  check_same(&ours_cnt, &ocnt, "event counts");
  printf("  %s: %zu methods, %zu modules, %zu IL maps, %zu samples\n", tfm, rd.methods.n,
         rd.modules.n, rd.maps.n, rd.nsamples);

  /* samples: the oracle's are in time order; ours sorted the same way */
  qsort(rd.samples, rd.nsamples, sizeof *rd.samples, cmp_sample);
  size_t k = 0, bad_time = 0, bad_thread = 0;
  for (size_t i = 0; i < nev; i++) {
    if (strcmp(jstr(ev[i], "kind"), "sample"))
      continue;
    if (k < rd.nsamples) {
      if ((uint64_t)jint(ev[i], "thread") != rd.samples[k].thread)
        bad_thread++;
      double ms = (double)(rd.samples[k].ts - rd.ti.sync_qpc) * 1000.0 / (double)rd.ti.qpc_frequency;
      double want = json_real_value(json_object_get(ev[i], "time_ms"));
      if (ms - want > 1e-3 || want - ms > 1e-3)
        bad_time++;
    }
    k++;
  }
  CHECK_EQ_U(k, rd.nsamples);
  CHECK_EQ_U(bad_thread, 0);
  CHECK_EQ_U(bad_time, 0);

  /* stacks: TraceLog's IPs, sample by sample */
  size_t nst;
  json_t **st = load_jsonl_gz(path_of(tfm, "workload.stacks.jsonl.gz"), &nst);
  CHECK_EQ_U(nst, rd.nsamples);
  size_t bad_stack = 0, frames = 0;
  for (size_t i = 0; i < nst && i < rd.nsamples; i++) {
    json_t *fr = json_object_get(st[i], "frames");
    sample *sm = &rd.samples[i];
    bool same = json_array_size(fr) == sm->nips &&
                (uint64_t)jint(st[i], "thread") == sm->thread;
    for (size_t j = 0; same && j < sm->nips; j++)
      same = jhex(json_array_get(fr, j), "ip") == sm->ips[j];
    frames += sm->nips;
    if (!same && bad_stack++ < 3)
      fprintf(stderr, "%s: sample %zu: %zu IPs, TraceLog %zu\n", tfm, i, sm->nips,
              json_array_size(fr));
  }
  CHECK_EQ_U(bad_stack, 0);
  printf("  %s: %zu sample stacks with %zu frames equal to TraceLog's\n", tfm, nst, frames);

  /* the code map: every frame's method (token, name) and IL offset by the
   * runtime's rule, as the oracle computed them from TraceEvent's events */
  CHECK_EQ_U(ntc_finish(&rd.code), PS_E_OK);
  size_t with_method = 0, with_il = 0, bad_code = 0;
  for (size_t i = 0; i < nst; i++) {
    json_t *fr = json_object_get(st[i], "frames");
    for (size_t j = 0; j < json_array_size(fr); j++) {
      json_t *f = json_array_get(fr, j);
      ntc_answer a;
      bool found = ntc_lookup(&rd.code, jhex(f, "ip"), j == 0, &a);
      bool want = json_object_get(f, "token") != NULL;
      char name[1024];
      if (found)
        snprintf(name, sizeof name, "%s.%s", ntc_s(&rd.code, a.method->ns),
                 ntc_s(&rd.code, a.method->name));
      bool ok = found == want;
      if (ok && want) {
        ok = a.method->token == jhex(f, "token") && !strcmp(name, jstr(f, "event_method"));
        with_method++;
        if (json_object_get(f, "il")) {
          ok = ok && a.il == jint(f, "il");
          with_il++;
        } else {
          ok = ok && a.il == -1;
        }
      }
      if (!ok && bad_code++ < 5)
        fprintf(stderr, "%s: sample %zu frame %zu ip %s: ours %s %s il %d, oracle %s il %lld\n",
                tfm, i, j, jstr(f, "ip"), found ? "found" : "none", found ? name : "",
                found ? a.il : 0, jstr(f, "event_method"), jint(f, "il"));
    }
  }
  CHECK_EQ_U(bad_code, 0);
  CHECK(with_il > 100);

  /* the IL rule at every native offset of every mapped body (the oracle's
   * ilrule runs: [first offset, IL] where the IL changes) */
  size_t nrule;
  json_t **rule = load_jsonl_gz(path_of(tfm, "workload.ilrule.jsonl.gz"), &nrule);
  CHECK(nrule > 50);
  size_t offsets = 0, bad_rule = 0, special = 0;
  for (size_t i = 0; i < nrule; i++) {
    ntc_answer a;
    uint64_t start = jhex(rule[i], "start");
    bool found = ntc_lookup(&rd.code, start, true, &a) && a.method->start == start;
    CHECK(found);
    if (!found)
      continue;
    json_t *runs = json_object_get(rule[i], "runs");
    size_t size = (size_t)jint(rule[i], "size");
    CHECK_EQ_U(a.method->size, size);
    size_t r = 0;
    for (uint32_t off = 0; off < size; off++) {
      while (r + 1 < json_array_size(runs) &&
             json_integer_value(json_array_get(json_array_get(runs, r + 1), 0)) <= off)
        r++;
      long long want = json_integer_value(json_array_get(json_array_get(runs, r), 1));
      ntc_mapping how;
      int32_t got = ntc_il_for_native(&rd.code, a.method, off, &how);
      if (how == NTC_MAP_PROLOG || how == NTC_MAP_EPILOG || how == NTC_MAP_UNMAPPED)
        special++;
      if (got != want && bad_rule++ < 5)
        fprintf(stderr, "%s: body %s offset %u: IL %d, oracle %lld\n", tfm, jstr(rule[i], "start"),
                off, got, want);
      offsets++;
    }
  }
  CHECK_EQ_U(bad_rule, 0);
  CHECK(special > 0);
  printf("  %s: the IL rule at %zu native offsets of %zu bodies (%zu in prolog, epilog or\n"
         "    unmapped code) equal to the oracle's\n", tfm, offsets, nrule, special);
  for (size_t i = 0; i < nrule; i++)
    json_decref(rule[i]);
  free(rule);
  printf("  %s: %zu frames in trace methods, %zu with IL offsets, equal to the runtime's rule\n",
         tfm, with_method, with_il);

  for (size_t i = 0; i < nev; i++)
    json_decref(ev[i]);
  for (size_t i = 0; i < nst; i++)
    json_decref(st[i]);
  free(ev);
  free(st);
  strs_free(&om);
  strs_free(&omod);
  strs_free(&omap);
  strs_free(&ocnt);
  strs_free(&ours_cnt);
  reading_free(&rd);
  free(file);
}

TEST(fixtures_match_traceevent) {
  for (size_t i = 0; i < sizeof tfms / sizeof tfms[0]; i++)
    check_fixture(tfms[i]);
}

/* Every truncation of a real trace fails cleanly, naming a block and an
 * offset inside the file; so does a flipped framing byte. */
TEST(truncated_and_garbled) {
  size_t flen;
  uint8_t *file = slurp(path_of("net10.0", "workload.nettrace"), &flen);
  CHECK(file != NULL);
  if (!file)
    return;
  size_t cuts = 0;
  for (size_t cut = 0; cut < flen; cut += cut < 4096 ? 1 : 4093) {
    reading rd;
    ps_diag d;
    ps_diag_clear(&d);
    ps_err e = read_trace(file, cut, &rd, &d);
    if (e == PS_E_OK) {
      t_failed_checks++;
      fprintf(stderr, "cut at %zu read as a whole trace\n", cut);
    }
    CHECK(d.where != NULL);
    CHECK(d.offset <= flen);
    reading_free(&rd);
    cuts++;
  }
  CHECK(cuts > 4096);

  /* the EndObject tag after the Trace object's 48-byte body */
  uint8_t *bad = malloc(flen);
  memcpy(bad, file, flen);
  size_t trace_end = 32 + 15 + 5 + 1 + 48; /* header, type object with "Trace", body */
  CHECK_EQ_U(bad[trace_end], 6);
  bad[trace_end] = 7;
  reading rd;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(read_trace(bad, flen, &rd, &d), PS_E_CORRUPT);
  CHECK_EQ_S(d.where, "Trace");
  CHECK_EQ_U(d.offset, trace_end);
  reading_free(&rd);

  /* a block size over the limit */
  memcpy(bad, file, flen);
  size_t b2 = trace_end + 1; /* the MetadataBlock object */
  CHECK_EQ_U(bad[b2], 5);
  size_t size_at = b2 + 15 + 13 + 1; /* "MetadataBlock" */
  bad[size_at + 3] = 0x7f;
  ps_diag_clear(&d);
  CHECK_EQ_U(read_trace(bad, flen, &rd, &d), PS_E_LIMIT);
  CHECK_EQ_S(d.where, "MetadataBlock");
  CHECK_EQ_U(d.offset, size_at);
  char msg[256];
  ps_diag_format(&d, msg, sizeof msg);
  printf("  %s\n", msg);
  reading_free(&rd);
  free(bad);
  free(file);
}

/* V6 framing, made byte by byte from NetTraceFormat.md (no runtime writes V6). */
TEST(v6_blocks) {
  uint8_t f[512];
  size_t n = 0;
#define B(...)                                                                 \
  do {                                                                         \
    const uint8_t b_[] = {__VA_ARGS__};                                        \
    memcpy(f + n, b_, sizeof b_);                                              \
    n += sizeof b_;                                                            \
  } while (0)
  memcpy(f, "Nettrace", 8);
  n = 8;
  B(0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0);
  /* TraceBlock: 16 time + 8 + 8 + 4 pointer + 4 count + 1 pair ("ProcessId","42") */
  size_t tb = 16 + 8 + 8 + 4 + 4 + 1 + 9 + 1 + 2;
  B((uint8_t)tb, 0, 0, 1);
  memset(f + n, 0, 16);
  n += 16;
  B(0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0xca, 0x9a, 0x3b, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 9);
  memcpy(f + n, "ProcessId", 9);
  n += 9;
  B(2, '4', '2');
  /* MetadataBlock: u16 header size 0; row: size, id 1, provider "P", event 0, name "", 0 fields, 0 optional */
  B(13, 0, 0, 3, 0, 0, 9, 0, 1, 1, 'P', 0, 0, 0, 0, 0, 0);
  /* ThreadBlock: row size 3: index 3, kind 3 (OS thread id) 77 */
  B(5, 0, 0, 6, 3, 0, 3, 3, 77);
  /* StackBlock: first id 1, count 1, one 8-byte IP */
  B(20, 0, 0, 5, 1, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0x34, 0x12, 0, 0, 0, 0, 0, 0);
  /* EventBlock: header 20 bytes (flags 1: compressed); one event: flags 1|4|8|128,
     metadata 1, thread 3, stack 1, timestamp 5, payload 4 bytes */
  B(30, 0, 0, 2, 20, 0, 1, 0);
  memset(f + n, 0, 16);
  n += 16;
  B(1 | 4 | 8 | 128, 1, 3, 1, 5, 4, 1, 0, 0, 0);
  B(0, 0, 0, 0); /* EndOfStream */
#undef B
  nt_stream s;
  nt_stream_init(&s, 0);
  size_t pos = 0, used, need;
  nt_block b;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(nt_stream_next(&s, f, n, true, &used, &need, &b, &d), PS_E_OK);
  CHECK_EQ_U(s.format, 6);
  pos += used;
  int kinds = 0;
  nt_trace_info ti = {0};
  for (;;) {
    ps_err e = nt_stream_next(&s, f + pos, n - pos, true, &used, &need, &b, &d);
    CHECK_EQ_U(e, PS_E_OK);
    if (e)
      break;
    pos += used;
    kinds |= 1 << b.kind;
    if (b.kind == NT_BLOCK_TRACE) {
      CHECK_EQ_U(nt_read_trace(&b, 6, &ti, &d), PS_E_OK);
      CHECK_EQ_U(ti.process_id, 42);
      CHECK_EQ_U(ti.pointer_size, 8);
    } else if (b.kind == NT_BLOCK_METADATA) {
      nt_metadata_iter it;
      nt_metadata m;
      bool have;
      CHECK_EQ_U(nt_metadata_begin(&it, &b, 6, &d), PS_E_OK);
      CHECK_EQ_U(nt_metadata_next(&it, &m, &have, &d), PS_E_OK);
      CHECK(have);
      CHECK_EQ_U(m.id, 1);
      CHECK_EQ_S(m.provider, "P");
    } else if (b.kind == NT_BLOCK_THREAD) {
      nt_thread_iter it;
      nt_thread t;
      bool have;
      nt_threads_begin(&it, &b, &d);
      CHECK_EQ_U(nt_threads_next(&it, &t, &have, &d), PS_E_OK);
      CHECK(have && t.has_thread_id);
      CHECK_EQ_U(t.index, 3);
      CHECK_EQ_U(t.os_thread_id, 77);
    } else if (b.kind == NT_BLOCK_STACK) {
      nt_stack_iter it;
      uint32_t id;
      const uint8_t *ips;
      size_t cnt;
      bool have;
      CHECK_EQ_U(nt_stacks_begin(&it, &b, 8, &d), PS_E_OK);
      CHECK_EQ_U(nt_stacks_next(&it, &id, &ips, &cnt, &have, &d), PS_E_OK);
      CHECK(have && id == 1 && cnt == 1);
      CHECK_EQ_U(nt_stack_ip(ips, 0, 8), 0x1234);
    } else if (b.kind == NT_BLOCK_EVENT) {
      nt_event_iter it;
      nt_event ev;
      bool have;
      CHECK_EQ_U(nt_events_begin(&it, &b, 6, &d), PS_E_OK);
      CHECK_EQ_U(nt_events_next(&it, &ev, &have, &d), PS_E_OK);
      CHECK(have);
      CHECK_EQ_U(ev.metadata_id, 1);
      CHECK_EQ_U(ev.thread_id, 3);
      CHECK_EQ_U(ev.stack_id, 1);
      CHECK_EQ_U(ev.timestamp, 5);
      CHECK_EQ_U(ev.sequence, 1);
      CHECK_EQ_U(ev.payload_len, 4);
      CHECK_EQ_U(nt_events_next(&it, &ev, &have, &d), PS_E_OK);
      CHECK(!have);
    } else if (b.kind == NT_BLOCK_END) {
      break;
    }
  }
  CHECK_EQ_U(kinds, (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 0));
  CHECK_EQ_U(pos, n);
}

/* No folder of the machine that made or runs the fixtures is in them (the
 * traces carry module paths and a command line; make.sh runs the program
 * from /_/nettrace). */
TEST(no_machine_paths) {
  static const char *files[] = {"workload.nettrace", "Workload.dll", "Workload.pdb",
                                "workload.speedscope.json"};
  mp_needles nd;
  mp_init(&nd);
  size_t checked = 0;
  for (size_t t = 0; t < sizeof tfms / sizeof tfms[0]; t++)
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
      size_t len;
      uint8_t *b = slurp(path_of(tfms[t], files[f]), &len);
      CHECK(b != NULL);
      if (!b)
        continue;
      const char *hit = mp_find(&nd, b, len);
      if (hit) {
        t_failed_checks++;
        fprintf(stderr, "%s/%s holds %s\n", tfms[t], files[f], hit);
      }
      checked++;
      free(b);
    }
  CHECK_EQ_U(checked, 16);
}

/* A body's name as a payload's UTF-16LE string (ASCII only) */
static nt_u16 u16_of(const char *s, uint8_t *buf, size_t cap) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n && 2 * i + 1 < cap; i++) {
    buf[2 * i] = (uint8_t)s[i];
    buf[2 * i + 1] = 0;
  }
  return (nt_u16){buf, n};
}

static nt_method_load body(uint64_t id, uint64_t start, uint32_t size, const char *name,
                           uint8_t *buf, size_t cap) {
  nt_method_load ml;
  memset(&ml, 0, sizeof ml);
  ml.method_id = id;
  ml.start = start;
  ml.size = size;
  ml.token = 0x06000001;
  ml.name = u16_of(name, buf, cap);
  return ml;
}

static const char *named_at(const ntc_table *t, uint64_t ip) {
  ntc_answer a;
  return ntc_lookup(t, ip, true, &a) ? ntc_s(t, a.method->name) : "(none)";
}

/* A live code map's unloads (pdbsym profile): a body the runtime unloaded
 * names no sample after it, even where no later body covers the address yet
 * (another thread's buffer, with the next method's load, may reach the
 * stream after the cut); the next body at the same MethodDesc and address is
 * told apart by its name; the purge drops the unloaded body only. */
TEST(unloaded_bodies) {
  ps_budget budget;
  ps_budget_init(&budget, (size_t)16 << 20);
  ntc_table t;
  ntc_init(&t, &budget);
  uint8_t b1[64], b2[64], b3[64];
  nt_method_load r6 = body(0x100, 0x5000, 0x200, "Regex6_Scan", b1, sizeof b1);
  nt_method_load r7 = body(0x100, 0x5000, 0x200, "Regex7_Scan", b2, sizeof b2);
  nt_method_load r8 = body(0x200, 0x4f00, 0x400, "Regex8_Scan", b3, sizeof b3);
  CHECK(ntc_add_method(&t, &r6));
  CHECK_EQ_U(ntc_finish(&t), PS_E_OK);
  CHECK_EQ_S(named_at(&t, 0x5010), "Regex6_Scan");
  /* unloaded: its range names nothing until another body is loaded there */
  CHECK(ntc_note_unload(&t, &r6));
  CHECK_EQ_S(named_at(&t, 0x5010), "(none)");
  CHECK(ntc_lookup_any(&t, 0x5010, true, &(ntc_answer){0}));
  /* the same MethodDesc and code address, another method */
  CHECK(ntc_add_method(&t, &r7));
  CHECK_EQ_U(ntc_finish(&t), PS_E_OK);
  CHECK_EQ_S(named_at(&t, 0x5010), "Regex7_Scan");
  /* the purge drops Regex6 only */
  CHECK_EQ_U(ntc_purge(&t), PS_E_OK);
  CHECK_EQ_U(t.nmethods, 1);
  CHECK_EQ_U(t.purged, 1);
  CHECK_EQ_S(named_at(&t, 0x5010), "Regex7_Scan");
  /* an unload naming a body the map lacks marks nothing */
  CHECK(ntc_note_unload(&t, &r8));
  CHECK_EQ_U(t.ndead, 0);
  /* a larger body over the same memory, loaded after Regex7's unload */
  CHECK(ntc_note_unload(&t, &r7));
  CHECK(ntc_add_method(&t, &r8));
  CHECK_EQ_U(ntc_finish(&t), PS_E_OK);
  CHECK_EQ_S(named_at(&t, 0x5010), "Regex8_Scan");
  CHECK_EQ_S(named_at(&t, 0x4f10), "Regex8_Scan");
  CHECK_EQ_U(ntc_purge(&t), PS_E_OK);
  CHECK_EQ_U(t.nmethods, 1);
  CHECK_EQ_S(named_at(&t, 0x5010), "Regex8_Scan");
  /* a body unloaded before the map was sorted again (loaded this window) */
  uint8_t b4[64];
  nt_method_load r9 = body(0x300, 0x9000, 0x100, "Regex9_Scan", b4, sizeof b4);
  CHECK(ntc_add_method(&t, &r9));
  CHECK(ntc_note_unload(&t, &r9));
  CHECK_EQ_U(t.ndead, 1);
  CHECK_EQ_U(ntc_finish(&t), PS_E_OK);
  CHECK_EQ_S(named_at(&t, 0x9010), "(none)");
  CHECK_EQ_S(named_at(&t, 0x5010), "Regex8_Scan");
  CHECK_EQ_U(ntc_purge(&t), PS_E_OK);
  CHECK_EQ_U(t.nmethods, 1);
  ntc_free(&t);
}

int main(void) {
  RUN(fixtures_match_traceevent);
  RUN(no_machine_paths);
  RUN(truncated_and_garbled);
  RUN(v6_blocks);
  RUN(unloaded_bodies);
  return test_summary();
}
