/*
 * log.c - JSON-lines logging (see log.h).
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int min_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

bool log_set_level(const char *name) {
  for (int i = 0; i < 4; i++) {
    if (!strcmp(name, level_names[i])) {
      min_level = i;
      return true;
    }
  }
  return false;
}

bool log_enabled(log_level lv) { return (int)lv >= min_level; }

static void put(log_line *l, const char *s, size_t n) {
  if (l->n + n >= sizeof l->buf - 2) /* keep room for "}\n" */
    n = l->n < sizeof l->buf - 2 ? sizeof l->buf - 2 - l->n : 0;
  memcpy(l->buf + l->n, s, n);
  l->n += n;
}

static void putf(log_line *l, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0)
    put(l, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void put_json_string(log_line *l, const char *s) {
  put(l, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      put(l, e, 2);
    } else if (*p < 0x20 || *p == 0x7f) {
      putf(l, "\\u%04x", *p);
    } else {
      put(l, (const char *)p, 1);
    }
  }
  put(l, "\"", 1);
}

static void begin(log_line *l, log_level lv, const char *msg, bool always) {
  l->n = 0;
  l->on = always || log_enabled(lv);
  if (!l->on)
    return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char ts[40];
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  putf(l, "{\"ts\":\"%s.%03dZ\",\"level\":\"%s\",\"msg\":", ts, (int)(tv.tv_usec / 1000),
       level_names[lv]);
  put_json_string(l, msg);
}

void log_begin(log_line *l, log_level lv, const char *msg) { begin(l, lv, msg, false); }

void log_begin_always(log_line *l, log_level lv, const char *msg) { begin(l, lv, msg, true); }

void log_str(log_line *l, const char *key, const char *val) {
  if (!l->on || !val)
    return;
  put(l, ",", 1);
  put_json_string(l, key);
  put(l, ":", 1);
  put_json_string(l, val);
}

void log_int(log_line *l, const char *key, long long val) {
  if (!l->on)
    return;
  put(l, ",", 1);
  put_json_string(l, key);
  putf(l, ":%lld", val);
}

void log_num(log_line *l, const char *key, double val) {
  if (!l->on)
    return;
  put(l, ",", 1);
  put_json_string(l, key);
  putf(l, ":%.3f", val);
}

void log_end(log_line *l) {
  if (!l->on)
    return;
  l->buf[l->n++] = '}';
  l->buf[l->n++] = '\n';
  size_t off = 0;
  while (off < l->n) {
    ssize_t w = write(STDERR_FILENO, l->buf + off, l->n - off);
    if (w <= 0)
      break;
    off += (size_t)w;
  }
}

void log_msg(log_level lv, const char *msg) {
  log_line l;
  log_begin(&l, lv, msg);
  log_end(&l);
}
