/*
 * jwalk.h - reads a JSON text (RFC 8259) a piece at a time, so that a request
 * body is turned into the compact arrays the request needs without building
 * a tree of the whole body (jansson's tree of 10,000 frames is about 4 MB, 12
 * times the body's size).  The caller walks the containers it cares about -
 * an object member by member, an array element by element - and hands each
 * piece it wants to jansson (jw_value: a tree of that piece only) or skips it
 * (jw_skip, which walks containers the same way, so memory stays bounded by
 * the largest piece, not the body).  Syntax is checked as jansson checks it:
 * the pieces by jansson itself, the structure around them here, duplicate
 * keys refused in every object, at most JW_MAX_DEPTH values nested (as
 * jansson counts them; a piece read with jw_value is held to jansson's limit
 * from its own start).
 *
 * Errors are sticky: after the first one every call fails, and w->error
 * reads "TEXT (line L, column C)" with the position in the whole text
 * (columns count characters, as jansson's do).
 *
 * Ownership: the text is borrowed and must outlive the walk; jw_value and
 * jw_object_next's key are new references the caller json_decref's; jw_free
 * frees the walker's own state.
 */
#ifndef PDBSYM_JWALK_H
#define PDBSYM_JWALK_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define JW_MAX_DEPTH 2048

typedef struct jw_level jw_level;

typedef struct {
  const char *s;
  size_t n;
  size_t pos;      /* the cursor: the next byte to read */
  unsigned depth;  /* containers open */
  unsigned cap;
  jw_level *lv;
  bool failed;
  char error[320];
} jwalk;

void jw_init(jwalk *w, const char *text, size_t len);
void jw_free(jwalk *w);

/* The first byte of the next value after whitespace ('{', '[', '"', '-',
 * a digit, 't', 'f', 'n', or any other byte found there, NUL included); -1 at
 * the end of the text or after an error.  Consumes only whitespace. */
int jw_peek(jwalk *w);

/* Enters the object or array at the cursor; false (error) if none is there. */
bool jw_object_begin(jwalk *w);
bool jw_array_begin(jwalk *w);

/* The next member of the object being walked: 1 with the cursor on its value
 * (and *key its name, when key is not NULL); 0 after the closing '}'; -1 on
 * an error.  The previous member's value must have been read or skipped. */
int jw_object_next(jwalk *w, json_t **key);
/* The next element of the array being walked: 1 with the cursor on it, 0
 * after the closing ']', -1 on an error. */
int jw_array_next(jwalk *w);

/* The value at the cursor as a jansson tree (NULL on an error). */
json_t *jw_value(jwalk *w);
/* Checks and passes the value at the cursor, walking its containers. */
bool jw_skip(jwalk *w);
/* Offset of the cursor (after whitespace), to come back to with jw_seek. */
size_t jw_tell(jwalk *w);
/* A fresh walker over the same text at an offset jw_tell gave; the value
 * there can then be read as at the first pass (containers entered anew). */
void jw_init_at(jwalk *w, const char *text, size_t len, size_t pos);

/* After the top-level value: true when only whitespace is left. */
bool jw_finish(jwalk *w);

/* Records an error "WHAT near '...' (line L, column C)" at the cursor (the
 * caller's own rule, such as "'[' or '{' expected"); returns false. */
bool jw_fail(jwalk *w, const char *what);

#endif
