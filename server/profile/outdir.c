/*
 * outdir.c - the folder a profiler writes its windows into (see profile.h):
 * each file written whole under a temporary name and renamed, the folder's
 * window files kept under a count and a byte cap, oldest removed first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOPOS ((size_t)-1) /* a diagnostic about no place in a file */
#include "prof_int.h"
#include "profile.h"

#define INDEX_MAX 4096 /* windows whose counts are remembered (fixed) */

struct prof_outdir {
  pthread_mutex_t mu;
  char dir[1024];
  uint64_t max_files, max_bytes;
  /* the counts of the windows written since start, newest last (a ring) */
  struct idx {
    char stem[128];
    uint64_t end_ns, samples, dropped;
  } *index;
  size_t nindex, next;
};

ps_err prof_outdir_open(const char *dir, uint64_t max_files, uint64_t max_bytes,
                        prof_outdir **out, ps_diag *d) {
  *out = NULL;
  if (!dir || !*dir || strlen(dir) >= 1000)
    return ps_diag_set(d, PS_E_INVALID, "profile output", NOPOS, "no folder, or a path over 999 bytes");
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return ps_diag_set(d, PS_E_IO, "profile output", NOPOS, "cannot create %s: %s", dir,
                       strerror(errno));
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return ps_diag_set(d, PS_E_IO, "profile output", NOPOS, "%s is not a folder", dir);
  if (access(dir, W_OK) != 0)
    return ps_diag_set(d, PS_E_IO, "profile output", NOPOS, "cannot write in %s: %s", dir,
                       strerror(errno));
  prof_outdir *o = calloc(1, sizeof *o);
  if (!o)
    return ps_diag_set(d, PS_E_NOMEM, "profile output", NOPOS, "out of memory");
  o->index = calloc(INDEX_MAX, sizeof *o->index);
  if (!o->index) {
    free(o);
    return ps_diag_set(d, PS_E_NOMEM, "profile output", NOPOS, "out of memory");
  }
  pthread_mutex_init(&o->mu, NULL);
  snprintf(o->dir, sizeof o->dir, "%s", dir);
  o->max_files = max_files ? max_files : PROF_DEFAULT_MAX_FILES;
  o->max_bytes = max_bytes ? max_bytes : PROF_DEFAULT_MAX_BYTES;
  *out = o;
  return PS_E_OK;
}

void prof_outdir_close(prof_outdir *o) {
  if (!o)
    return;
  pthread_mutex_destroy(&o->mu);
  free(o->index);
  free(o);
}

const char *prof_outdir_path(const prof_outdir *o) { return o->dir; }

/* ---- names ---- */

static const char *ext_of(unsigned f) {
  return f == PROF_PPROF ? ".pb.gz" : ".speedscope.json";
}

void prof_window_stem(int pid, uint64_t start_ns, uint64_t seq, char *out, size_t cap) {
  time_t t = (time_t)(start_ns / 1000000000u);
  struct tm tm;
  gmtime_r(&t, &tm);
  snprintf(out, cap, "pdbsym-%d-%04d%02d%02dT%02d%02d%02dZ-%04llu", pid, tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned long long)seq);
}

/* parses a window file's name: its stem, pid, start (Unix s), seq, format */
static bool parse_name(const char *name, char *stem, size_t cap, int *pid, uint64_t *start_s,
                       uint64_t *seq, unsigned *fmt) {
  size_t n = strlen(name);
  static const struct {
    const char *ext;
    unsigned f;
  } exts[] = {{".speedscope.json", PROF_SPEEDSCOPE}, {".pb.gz", PROF_PPROF}};
  size_t k = 0;
  for (; k < 2; k++) {
    size_t el = strlen(exts[k].ext);
    if (n > el && !strcmp(name + n - el, exts[k].ext)) {
      n -= el;
      break;
    }
  }
  if (k == 2 || n >= cap || strncmp(name, "pdbsym-", 7) != 0)
    return false;
  int y, mo, da, h, mi, se;
  unsigned long long sq;
  int p, used = 0;
  char tail[2];
  memcpy(stem, name, n);
  stem[n] = '\0';
  if (sscanf(stem, "pdbsym-%d-%4d%2d%2dT%2d%2d%2dZ-%llu%n%1s", &p, &y, &mo, &da, &h, &mi, &se,
             &sq, &used, tail) != 8 ||
      (size_t)used != n || p <= 0)
    return false;
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = da;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  time_t t = timegm(&tm);
  if (t == (time_t)-1)
    return false;
  *pid = p;
  *start_s = (uint64_t)t;
  *seq = sq;
  *fmt = exts[k].f;
  return true;
}

/* ---- writing ---- */

static ps_err to_file(void *ctx, const void *data, size_t len) {
  return fwrite(data, 1, len, (FILE *)ctx) == len ? PS_E_OK : PS_E_IO;
}

typedef struct {
  char name[160];
  uint64_t start_s, seq, bytes;
  int pid;
} entry;

static int cmp_entry(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->start_s != y->start_s)
    return x->start_s < y->start_s ? -1 : 1;
  if (x->pid != y->pid)
    return x->pid < y->pid ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* the folder's window files, oldest first; *n of them (malloc'd) */
static entry *scan(prof_outdir *o, size_t *n) {
  *n = 0;
  DIR *dir = opendir(o->dir);
  if (!dir)
    return NULL;
  size_t cap = 64, cnt = 0;
  entry *v = malloc(cap * sizeof *v);
  struct dirent *de;
  while (v && (de = readdir(dir)) != NULL) {
    entry e;
    char stem[128];
    unsigned fmt;
    if (strlen(de->d_name) >= sizeof e.name ||
        !parse_name(de->d_name, stem, sizeof stem, &e.pid, &e.start_s, &e.seq, &fmt))
      continue;
    struct stat st;
    char path[1200];
    int plen = snprintf(path, sizeof path, "%s/%s", o->dir, de->d_name);
    if (plen < 0 || (size_t)plen >= sizeof path || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    memcpy(e.name, de->d_name, strlen(de->d_name) + 1); /* shorter than e.name: checked above */
    e.bytes = (uint64_t)st.st_size;
    if (cnt == cap) {
      if (cap >= ((size_t)1 << 24)) /* a folder of millions: the oldest found are enough */
        break;
      entry *nv = realloc(v, 2 * cap * sizeof *nv);
      if (!nv)
        break;
      v = nv;
      cap *= 2;
    }
    v[cnt++] = e;
  }
  closedir(dir);
  if (!v)
    return NULL;
  if (cnt > 1)
    qsort(v, cnt, sizeof *v, cmp_entry);
  *n = cnt;
  return v;
}

static void prune(prof_outdir *o) {
  size_t n;
  entry *v = scan(o, &n);
  if (!v)
    return;
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++)
    bytes += v[i].bytes;
  for (size_t i = 0; i < n && (n - i > o->max_files || bytes > o->max_bytes); i++) {
    if (n - i == 1) /* never the newest */
      break;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", o->dir, v[i].name);
    if (unlink(path) == 0 || errno == ENOENT)
      bytes -= v[i].bytes;
  }
  free(v);
}

ps_err prof_outdir_write(prof_outdir *o, trace_job *j, unsigned formats, int pid,
                         uint64_t start_ns, uint64_t end_ns, uint64_t seq, uint64_t samples,
                         uint64_t dropped, char *stem_out, size_t cap, ps_diag *d) {
  char stem[128];
  prof_window_stem(pid, start_ns, seq, stem, sizeof stem);
  snprintf(stem_out, cap, "%s", stem);
  ps_err e = PS_E_OK;
  unsigned written = 0; /* the formats whose temporary file is whole */
  for (unsigned f = PROF_SPEEDSCOPE; f <= PROF_PPROF && !e; f <<= 1) {
    if (!(formats & f))
      continue;
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s/.pdbsym-tmp-%s%s", o->dir, stem, ext_of(f));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!out) {
      if (fd >= 0)
        close(fd);
      e = ps_diag_set(d, PS_E_IO, "profile output", NOPOS, "cannot write %s: %s", tmp,
                      strerror(errno));
      break;
    }
    e = trace_job_write(j, f == PROF_PPROF ? TRACE_PPROF : TRACE_SPEEDSCOPE, to_file, out, d);
    if (fflush(out) != 0 || fsync(fileno(out)) != 0) {
      if (!e)
        e = ps_diag_set(d, PS_E_IO, "profile output", NOPOS, "writing %s: %s", tmp, strerror(errno));
    }
    fclose(out);
    if (e)
      unlink(tmp);
    else
      written |= f;
  }
  /* the window's files appear together, with its counts, under the lock the
   * listing takes: a reader never sees a window with one format of two, or
   * without its counts */
  pthread_mutex_lock(&o->mu);
  for (unsigned f = PROF_SPEEDSCOPE; f <= PROF_PPROF; f <<= 1) {
    if (!(written & f))
      continue;
    char tmp[1400], path[1400];
    snprintf(path, sizeof path, "%s/%s%s", o->dir, stem, ext_of(f));
    snprintf(tmp, sizeof tmp, "%s/.pdbsym-tmp-%s%s", o->dir, stem, ext_of(f));
    if (!e && rename(tmp, path) != 0)
      e = ps_diag_set(d, PS_E_IO, "profile output", NOPOS, "rename to %s: %s", path, strerror(errno));
    if (e)
      unlink(tmp);
  }
  if (!e) {
    struct idx *x = &o->index[o->next];
    snprintf(x->stem, sizeof x->stem, "%s", stem);
    x->end_ns = end_ns;
    x->samples = samples;
    x->dropped = dropped;
    o->next = (o->next + 1) % INDEX_MAX;
    if (o->nindex < INDEX_MAX)
      o->nindex++;
  }
  prune(o);
  pthread_mutex_unlock(&o->mu);
  return e;
}

size_t prof_outdir_list(prof_outdir *o, int pid, prof_window *out, size_t cap) {
  pthread_mutex_lock(&o->mu);
  size_t n, k = 0;
  entry *v = scan(o, &n);
  /* newest first; the two files of a window are one entry */
  for (size_t i = n; v && i > 0 && k <= cap; i--) {
    const entry *e = &v[i - 1];
    if (pid > 0 && e->pid != pid)
      continue;
    char stem[128];
    int p;
    uint64_t st, sq;
    unsigned fmt;
    parse_name(e->name, stem, sizeof stem, &p, &st, &sq, &fmt);
    prof_window *w = NULL;
    for (size_t m = 0; m < k; m++)
      if (!strcmp(out[m].stem, stem))
        w = &out[m];
    if (!w) {
      if (k == cap)
        break;
      w = &out[k++];
      memset(w, 0, sizeof *w);
      snprintf(w->stem, sizeof w->stem, "%s", stem);
      w->pid = p;
      w->start_ns = st * 1000000000u;
      w->seq = sq;
      w->samples = w->dropped = UINT64_MAX;
      for (size_t m = 0; m < o->nindex; m++)
        if (!strcmp(o->index[m].stem, stem)) {
          w->end_ns = o->index[m].end_ns;
          w->samples = o->index[m].samples;
          w->dropped = o->index[m].dropped;
        }
    }
    w->formats |= fmt;
    w->bytes += e->bytes;
  }
  free(v);
  pthread_mutex_unlock(&o->mu);
  return k;
}
