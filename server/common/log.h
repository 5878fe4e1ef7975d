/*
 * log.h - JSON-lines logs on stderr, one object per line:
 *   {"ts":"2026-11-29T15:02:14.123Z","level":"info","msg":"request",
 *    "request_id":"...","method":"POST","path":"/symbolicate","status":200,...}
 * A line is built in a fixed buffer and written with one write(2), so lines
 * from several threads never interleave.  Values are escaped as JSON strings.
 */
#ifndef PDBSYM_LOG_H
#define PDBSYM_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

/* Sets the lowest level written ("debug", "info", "warn", "error");
 * returns false for an unknown name. */
bool log_set_level(const char *name);
bool log_enabled(log_level lv);

typedef struct {
  char buf[4096];
  size_t n;
  bool on;
} log_line;

void log_begin(log_line *l, log_level lv, const char *msg);
/* Like log_begin, but written whatever the level (lifecycle lines). */
void log_begin_always(log_line *l, log_level lv, const char *msg);
void log_str(log_line *l, const char *key, const char *val); /* val NULL: omitted */
void log_int(log_line *l, const char *key, long long val);
void log_num(log_line *l, const char *key, double val);
void log_end(log_line *l);

/* One-shot message without fields. */
void log_msg(log_level lv, const char *msg);

#endif
