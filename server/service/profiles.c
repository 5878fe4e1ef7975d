/*
 * profiles.c - GET /profiles and GET /profiles/latest: what `pdbsym serve`'s
 * profiler (server/profile, the profile_* settings) has done, and a
 * process's newest window, read from the output folder.  Neither can start
 * profiling anything: the settings alone name the processes.
 *
 *   GET /profiles[?pid=N]  {"dir": ..., "processes": [...], "windows": [...]}
 *   GET /profiles/latest?pid=N[&format=speedscope|pprof]
 *                          the window file itself (speedscope JSON, or pprof:
 *                          gzip'ed profile.proto), sent from the file
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "jsonw.h"

#define LIST_MAX 1000   /* windows listed (fixed) */
#define STATUS_MAX 300  /* processes listed: running (max_profiled_processes) and ended */

static bool parse_pid(const char *s, long *out) {
  if (!s || !*s)
    return false;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v <= 0 || v > 0x3fffffff)
    return false;
  *out = v;
  return true;
}

static void put_u64(jsonw *w, const char *key, uint64_t v) {
  jsonw_keyn(w, key, strlen(key));
  jsonw_uint(w, v);
}

static void put_time(jsonw *w, const char *key, uint64_t ns) {
  /* RFC 3339, UTC, milliseconds */
  char buf[96];
  time_t t = (time_t)(ns / 1000000000u);
  struct tm tm;
  gmtime_r(&t, &tm);
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (unsigned)(ns / 1000000u % 1000u));
  jsonw_keyn(w, key, strlen(key));
  jsonw_str(w, buf);
}

static void list(api *a, long pid, api_response *out) {
  prof_outdir *od = prof_manager_outdir(a->profiles);
  prof_status *st = calloc(STATUS_MAX, sizeof *st);
  prof_window *win = calloc(LIST_MAX, sizeof *win);
  if (!st || !win) {
    free(st);
    free(win);
    api_error(out, 500, "out of memory", NULL);
    return;
  }
  size_t ns = prof_manager_list(a->profiles, st, STATUS_MAX);
  size_t nw = od ? prof_outdir_list(od, (int)pid, win, LIST_MAX) : 0;
  jsonw w;
  jsonw_init(&w, 4096, 0);
  jsonw_obj(&w);
  jsonw_key(&w, "dir");
  jsonw_str(&w, od ? prof_outdir_path(od) : "");
  jsonw_key(&w, "processes");
  jsonw_arr(&w);
  for (size_t i = 0; i < ns; i++) {
    const prof_status *s = &st[i];
    if (pid > 0 && s->pid != pid)
      continue;
    jsonw_obj(&w);
    put_u64(&w, "pid", (uint64_t)s->pid);
    jsonw_key(&w, "command");
    jsonw_str(&w, s->comm);
    jsonw_key(&w, "command_line");
    jsonw_str(&w, s->command_line);
    jsonw_key(&w, "runtime_version");
    jsonw_str(&w, s->clr_version);
    jsonw_key(&w, "runtime_cookie");
    jsonw_str(&w, s->cookie);
    jsonw_key(&w, "state");
    jsonw_str(&w, s->state);
    if (s->end_reason[0]) {
      jsonw_key(&w, "end_reason");
      jsonw_str(&w, s->end_reason);
    }
    put_time(&w, "started", s->started_ns);
    put_u64(&w, "collect_version", (uint64_t)s->collect_version);
    put_u64(&w, "windows", s->windows);
    put_u64(&w, "samples", s->samples);
    put_u64(&w, "dropped_events", s->dropped_events);
    put_u64(&w, "rundowns", s->rundowns);
    put_u64(&w, "code_resets", s->code_resets);
    put_u64(&w, "methods", s->methods);
    put_u64(&w, "code_bytes", s->code_bytes);
    if (s->last_stem[0]) {
      jsonw_key(&w, "latest");
      jsonw_str(&w, s->last_stem);
    }
    jsonw_obj_end(&w);
  }
  jsonw_arr_end(&w);
  jsonw_key(&w, "windows");
  jsonw_arr(&w);
  for (size_t i = 0; i < nw; i++) {
    const prof_window *x = &win[i];
    jsonw_obj(&w);
    jsonw_key(&w, "name");
    jsonw_str(&w, x->stem);
    put_u64(&w, "pid", (uint64_t)x->pid);
    put_u64(&w, "seq", x->seq);
    put_time(&w, "start", x->start_ns);
    if (x->end_ns)
      put_time(&w, "end", x->end_ns);
    if (x->samples != UINT64_MAX)
      put_u64(&w, "samples", x->samples);
    if (x->dropped != UINT64_MAX)
      put_u64(&w, "dropped_events", x->dropped);
    put_u64(&w, "bytes", x->bytes);
    jsonw_key(&w, "files");
    jsonw_obj(&w);
    if (x->formats & PROF_SPEEDSCOPE) {
      jsonw_key(&w, "speedscope");
      char f[160];
      snprintf(f, sizeof f, "%s.speedscope.json", x->stem);
      jsonw_str(&w, f);
    }
    if (x->formats & PROF_PPROF) {
      jsonw_key(&w, "pprof");
      char f[160];
      snprintf(f, sizeof f, "%s.pb.gz", x->stem);
      jsonw_str(&w, f);
    }
    jsonw_obj_end(&w);
    jsonw_obj_end(&w);
  }
  jsonw_arr_end(&w);
  jsonw_obj_end(&w);
  free(st);
  free(win);
  size_t n = 0;
  char *text = jsonw_error(&w) ? NULL : jsonw_take(&w, &n);
  jsonw_free(&w);
  if (!text) {
    api_error(out, 500, "out of memory", NULL);
    return;
  }
  out->status = 200;
  out->content_type = "application/json";
  out->body = text;
  out->len = n;
}

static void latest(api *a, long pid, const char *format, api_response *out) {
  unsigned f = PROF_SPEEDSCOPE;
  if (format && !strcmp(format, "pprof"))
    f = PROF_PPROF;
  else if (format && strcmp(format, "speedscope") != 0) {
    api_error(out, 400, "format must be speedscope or pprof", "format");
    return;
  }
  prof_outdir *od = prof_manager_outdir(a->profiles);
  prof_window *win = calloc(LIST_MAX, sizeof *win);
  if (!win) {
    api_error(out, 500, "out of memory", NULL);
    return;
  }
  size_t nw = od ? prof_outdir_list(od, (int)pid, win, LIST_MAX) : 0;
  const prof_window *x = NULL;
  for (size_t i = 0; i < nw && !x; i++) /* newest first */
    if (win[i].formats & f)
      x = &win[i];
  if (!x) {
    free(win);
    char msg[160];
    snprintf(msg, sizeof msg, "no %s window of pid %ld in the profile folder",
             f == PROF_PPROF ? "pprof" : "speedscope", pid);
    api_error(out, 404, msg, "pid");
    return;
  }
  char path[1400];
  snprintf(path, sizeof path, "%s/%s%s", prof_outdir_path(od), x->stem,
           f == PROF_PPROF ? ".pb.gz" : ".speedscope.json");
  free(win);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) { /* removed by the caps since it was listed */
    if (fd >= 0)
      close(fd);
    api_error(out, 404, "the window was removed; ask again", "pid");
    return;
  }
  out->status = 200;
  out->file = true;
  out->file_fd = fd;
  out->file_len = (uint64_t)sb.st_size;
  out->content_type = f == PROF_PPROF ? "application/octet-stream" : "application/json";
  const char *slash = strrchr(path, '/');
  int n = snprintf(out->hvalues, sizeof out->hvalues, "attachment; filename=\"%s\"",
                   slash ? slash + 1 : path);
  if (n > 0 && (size_t)n < sizeof out->hvalues && out->nheaders < API_MAX_HEADERS) {
    out->headers[out->nheaders].name = "Content-Disposition";
    out->headers[out->nheaders++].value = out->hvalues;
    out->hused = (size_t)n + 1;
  }
}

void api_profiles(api *a, api_route_id route, const char *pid, const char *format,
                  api_response *out) {
  memset(out, 0, sizeof *out);
  out->frames = out->modules = -1;
  long p = 0;
  if (pid && !parse_pid(pid, &p)) {
    api_error(out, 400, "pid must be a process id (a positive number)", "pid");
    return;
  }
  if (route == RT_PROFILES) {
    list(a, p, out);
    return;
  }
  if (!pid) {
    api_error(out, 400, "pid is required: /profiles/latest?pid=N", "pid");
    return;
  }
  latest(a, p, format, out);
}
