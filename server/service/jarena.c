/*
 * jarena.c - jansson's allocations in a per-request arena (see jarena.h).
 *
 * Chunks double from 64 KiB (a 1,000-frame request's tree is about 0.5 MB),
 * so a request costs a handful of mallocs however many values its tree has.
 * A free looks for the pointer among the open arena's chunks (newest first,
 * few of them) and does nothing if it is there; anything else was malloc'd
 * and is freed.
 */
#include "jarena.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#define JARENA_FIRST_CHUNK ((size_t)64 << 10)
#define JARENA_ALIGN 16

struct jarena_chunk {
  jarena_chunk *next;
  size_t size, used;
  _Alignas(JARENA_ALIGN) unsigned char data[];
};

static _Thread_local jarena *current;
static pthread_once_t installed = PTHREAD_ONCE_INIT;

static void *ja_malloc(size_t n) {
  jarena *a = current;
  if (!a)
    return malloc(n);
  if (n > SIZE_MAX - JARENA_ALIGN) {
    a->failed = true;
    return NULL;
  }
  n = (n + JARENA_ALIGN - 1) & ~(size_t)(JARENA_ALIGN - 1);
  jarena_chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t size = c ? c->size * 2 : JARENA_FIRST_CHUNK;
    if (size < n)
      size = n;
    if (a->cap && (a->reserved > a->cap || size > a->cap - a->reserved)) {
      size = n; /* the rest of the cap may still hold this one */
      if (a->reserved > a->cap || size > a->cap - a->reserved) {
        a->failed = true;
        return NULL;
      }
    }
    c = size <= SIZE_MAX - sizeof *c ? malloc(sizeof *c + size) : NULL;
    if (!c) {
      a->failed = true;
      return NULL;
    }
    c->size = size;
    c->used = 0;
    c->next = a->head;
    a->head = c;
    a->reserved += size;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

static void ja_free(void *p) {
  if (!p)
    return;
  const jarena *a = current;
  if (a) {
    uintptr_t u = (uintptr_t)p;
    for (const jarena_chunk *c = a->head; c; c = c->next)
      if (u >= (uintptr_t)c->data && u < (uintptr_t)c->data + c->size)
        return;
  }
  free(p);
}

static void install(void) { json_set_alloc_funcs(ja_malloc, ja_free); }

void jarena_begin(jarena *a, size_t cap) {
  pthread_once(&installed, install);
  a->head = NULL;
  a->reserved = 0;
  a->cap = cap;
  a->failed = false;
  current = a;
}

void jarena_end(jarena *a) {
  if (current == a)
    current = NULL;
  jarena_chunk *c = a->head;
  while (c) {
    jarena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->reserved = 0;
}
