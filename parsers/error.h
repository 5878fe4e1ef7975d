/*
 * error.h - the one error enum of pdbsym, and a diagnostic that says what was
 * wrong and where.
 *
 * The enum and its messages come from one X-macro table (libuv's habit), so a
 * code can never lack a message.  Parsers never assert on file contents: a
 * violation becomes a code plus a diagnostic naming the structure and the
 * byte offset where it was seen.
 */
#ifndef PDBSYM_ERROR_H
#define PDBSYM_ERROR_H

#include <stddef.h>

#define PS_ERRORS(X)                                                        \
  X(OK,          "ok")                                                      \
  X(TRUNCATED,   "truncated input")                                         \
  X(CORRUPT,     "corrupt input")                                           \
  X(UNSUPPORTED, "unsupported format")                                      \
  X(LIMIT,       "input exceeds a configured limit")                        \
  X(NOMEM,       "out of memory")                                           \
  X(OVERFLOW,    "size arithmetic overflow")                                \
  X(NOT_FOUND,   "not found")                                               \
  X(INVALID,     "invalid argument")                                        \
  X(MISMATCH,    "identity mismatch")                                       \
  X(IO,          "i/o error")                                               \
  X(NETWORK,     "network error")                                           \
  X(DATABASE,    "database error")                                          \
  X(BUSY,        "busy")                                                    \
  X(TIMEOUT,     "timed out")

typedef enum {
#define PS_ERR_ENUM(name, msg) PS_E_##name,
  PS_ERRORS(PS_ERR_ENUM)
#undef PS_ERR_ENUM
  PS_E__COUNT
} ps_err;

/* Static message for a code; never NULL. */
const char *ps_strerror(ps_err code);

/* A diagnostic: the code, the structure being read, the byte offset into the
 * input where the problem was seen, and a formatted detail.  Fixed-size so a
 * parser can fill it without allocating. */
typedef struct {
  ps_err code;
  const char *where;   /* static string naming the structure, or NULL */
  size_t offset;       /* byte offset into the input, or (size_t)-1 */
  char detail[192];    /* free text, NUL-terminated, may be empty */
} ps_diag;

void ps_diag_clear(ps_diag *d);

/* Records the first error only (sticky): later calls leave an earlier error in
 * place.  Returns code so callers can write `return ps_diag_set(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
ps_err ps_diag_set(ps_diag *d, ps_err code, const char *where, size_t offset,
                   const char *fmt, ...);

/* Formats "corrupt input: DBI header: stream shorter than 64 bytes (at 0x40)"
 * into buf; returns buf. */
const char *ps_diag_format(const ps_diag *d, char *buf, size_t cap);

#endif
