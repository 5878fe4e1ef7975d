/*
 * jarena.h - a per-request arena for jansson's allocations (h2o's memory
 * pool habit): while a thread has an arena open, every allocation jansson
 * makes on that thread (the parsed request's tree: an object, a hash table,
 * a key and a value each per frame) is a pointer bump in the arena, its free
 * is nothing, and closing the arena releases it all at once; the tree need
 * not be walked to be freed.  On other threads, and on this one when no
 * arena is open, jansson allocates with malloc as before.
 *
 * Bounded: an arena holds at most cap bytes; past that (or when the system
 * has no memory) the allocation fails, jansson reports it as an error of the
 * parse, and jarena_failed() says that the arena was the reason.
 *
 * Rules for the caller:
 *   - every jansson value made while the arena is open must be unreachable
 *     when it is closed (json_decref is allowed but not needed);
 *   - no text jansson hands out for the caller to free (json_dumps) may be
 *     asked for while it is open;
 *   - one arena per thread at a time.
 *
 * jarena_begin installs the allocator in jansson the first time
 * (json_set_alloc_funcs); with no arena open it is malloc and free, so
 * values made before stay valid.
 */
#ifndef PDBSYM_JARENA_H
#define PDBSYM_JARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct jarena_chunk jarena_chunk;

typedef struct {
  jarena_chunk *head; /* newest first */
  size_t reserved;    /* bytes of all chunks */
  size_t cap;
  bool failed;        /* an allocation was refused */
} jarena;

/* Opens a on this thread; cap: the most bytes it may hold (0: no cap). */
void jarena_begin(jarena *a, size_t cap);
/* Closes the thread's arena and frees its memory. */
void jarena_end(jarena *a);
static inline bool jarena_failed(const jarena *a) { return a->failed; }

#endif
