/*
 * jwalk.h - reads a JSON text (RFC 8259) a piece at a time, so that a request
 * body is turned into the compact arrays the request needs without building
 * a tree (jansson's tree of 10,000 frames is about 4 MB, 12 times the body's
 * size).  The caller walks the containers it cares about - an object member
 * by member, an array element by element - and for each piece it wants
 * either reads it as a scalar (jw_scalar), decodes it straight into its own
 * structs (jw_piece: the members of one object or array, handed out one by
 * one) or skips it (jw_skip, which walks containers the same way, so memory
 * stays bounded by the deepest nesting and the keys of the open objects,
 * not the body).
 *
 * Strings, numbers and literals are read by the walker's own scanner, which
 * accepts and refuses exactly what jansson 2.14 does (escapes, \u surrogate
 * pairs, UTF-8 in its shortest form, no raw control characters, no \u0000,
 * integers as 64-bit, reals as doubles with overflow refused) and words its
 * errors as jansson does.  What the walk accepts and the error it reports
 * are those of the reading before it, which handed every value to jansson's
 * json_loadb (tests/unit/request_ref.h keeps it; test_request_diff and
 * fuzz_request_diff compare the two): the walker's own punctuation checks
 * for the containers it walks, json_loadb's rules for a key or scalar read
 * alone, and for a piece (jw_piece) json_loadb's rules for that value:
 * depth counted from the piece's own start, and a raw NUL byte right after
 * a number or literal dropped, as jansson drops it.  Duplicate keys are
 * refused in every object.
 *
 * Errors are sticky: after the first one every call fails, and w->error
 * reads "TEXT (line L, column C)" with the position in the whole text
 * (columns count characters, as jansson's do).
 *
 * Memory: bounded by the text, and reserved in the request memory budget
 * (reqmem.h) before it grows, from the grant the walker is given (jw_init;
 * NULL: the budget itself): a level per open container, a decoded string
 * value, and for the duplicate check the keys of the open objects (32 bytes
 * each, and the decoded bytes of those with escapes), given back as each
 * object closes.  An object's keys are compared one by one up to
 * JW_LINEAR_KEYS; past that the object gets a hash index of its own (open
 * addressing, at least twice its keys), so a hostile object with a million
 * keys costs linear time, not quadratic - and about 70 bytes a key of
 * memory, several times its text, which is why it is in the budget.  A
 * reservation the budget refuses fails the walk ("out of memory") with
 * w->budget set: the caller answers 503, as for its own arrays.
 *
 * Ownership: the text is borrowed and must outlive the walk; strings handed
 * out (keys, jw_val.s) point into the text or into the walker's own buffers
 * and are valid until the next call on the walker; jw_free frees the
 * walker's own state.
 */
#ifndef PDBSYM_JWALK_H
#define PDBSYM_JWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reqmem.h"

#define JW_MAX_DEPTH 2048  /* jansson's JSON_PARSER_MAX_DEPTH */
#define JW_LINEAR_KEYS 8   /* keys of one object compared one by one */

typedef struct jw_level jw_level;
typedef struct jw_key jw_key;

typedef struct {
  const char *s;
  size_t n;
  size_t pos;      /* the cursor: the next byte to read */
  unsigned depth;  /* containers open */
  unsigned cap;
  jw_level *lv;    /* the open levels: lv_b's block */
  rm_buf lv_b;
  rm_buf keys_b;   /* jw_key: the keys of the open objects, level after level */
  size_t nkeys;
  rm_buf arena;    /* decoded keys with escapes (arena.len: bytes in use) */
  rm_buf scratch;  /* a decoded string value, a real number's text */
  rm_grant *grant; /* borrowed: what the buffers above are reserved from */
  bool failed;
  bool budget;     /* failed because the memory budget refused a reservation */
  char error[320];
} jwalk;

typedef enum {
  JW_NONE = 0, /* an error */
  JW_OBJECT,
  JW_ARRAY,
  JW_STRING,
  JW_INTEGER,
  JW_REAL,
  JW_TRUE,
  JW_FALSE,
  JW_NULL,
} jw_type;

/* A scalar as read: type and value.  s, n: a string's decoded bytes (never
 * a NUL among them: such strings are refused), not NUL-terminated, valid
 * until the next call on the walker.  For a container (in jw_piece's
 * members) only the type is set. */
typedef struct {
  jw_type type;
  int64_t i;     /* JW_INTEGER */
  double d;      /* JW_REAL */
  const char *s; /* JW_STRING */
  size_t n;
} jw_val;

/* A walker over text; its memory is reserved from grant (borrowed, used by
 * this walker's thread only; NULL: the budget itself). */
void jw_init(jwalk *w, const char *text, size_t len, rm_grant *grant);
/* Frees the walker's memory, giving its reservations back. */
void jw_free(jwalk *w);

/* The first byte of the next value after whitespace ('{', '[', '"', '-',
 * a digit, 't', 'f', 'n', or any other byte found there, NUL included); -1 at
 * the end of the text or after an error.  Consumes only whitespace. */
int jw_peek(jwalk *w);

/* Enters the object or array at the cursor; false (error) if none is there. */
bool jw_object_begin(jwalk *w);
bool jw_array_begin(jwalk *w);

/* The next member of the object being walked: 1 with the cursor on its value
 * (and *key, *klen its decoded name, when not NULL); 0 after the closing '}';
 * -1 on an error.  The previous member's value must have been read or
 * skipped. */
int jw_object_next(jwalk *w, const char **key, size_t *klen);
/* The next element of the array being walked: 1 with the cursor on it, 0
 * after the closing ']', -1 on an error. */
int jw_array_next(jwalk *w);

/* The value at the cursor, which must not be an object or array (jw_peek
 * first: those are "unexpected" here), read as json_loadb would read it
 * alone; false on an error. */
bool jw_scalar(jwalk *w, jw_val *out);

/* The value at the cursor read as json_loadb would read it alone (its rules
 * and its errors, depth counted from here), without a tree: for an object,
 * fn is called for each member in order with its decoded name and value;
 * for an array, for each element with its index (key NULL).  A member that
 * is itself an object or array comes with that type only, and is checked
 * (not handed out).  Returns the piece's type (fn is not called for a
 * scalar piece), JW_NONE on an error (what fn was given by then is to be
 * dropped: the walk has failed). */
typedef void (*jw_member_fn)(void *ctx, const char *key, size_t klen, size_t index,
                             const jw_val *v);
jw_type jw_piece(jwalk *w, jw_member_fn fn, void *ctx);

/* Checks and passes the value at the cursor, walking its containers. */
bool jw_skip(jwalk *w);
/* Offset of the cursor (after whitespace), to come back to with jw_init_at. */
size_t jw_tell(jwalk *w);
/* A fresh walker over the same text at an offset jw_tell gave; the value
 * there can then be read as at the first pass (containers entered anew). */
void jw_init_at(jwalk *w, const char *text, size_t len, size_t pos, rm_grant *grant);

/* After the top-level value: true when only whitespace is left. */
bool jw_finish(jwalk *w);

/* Records an error "WHAT near '...' (line L, column C)" at the cursor (the
 * caller's own rule, such as "'[' or '{' expected"); returns false. */
bool jw_fail(jwalk *w, const char *what);

#endif
