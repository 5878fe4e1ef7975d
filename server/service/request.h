/*
 * request.h - the bodies of POST /symbolicate and POST /symbolicate/v5 read
 * into compact arrays (CONTRACT.md "Modules", "Frames", "Mozilla's
 * symbolication API v5"; api.md), without a tree of the whole body: the body
 * is walked with jwalk.h and each module, frame or memoryMap entry is checked
 * as it comes.  The arrays grow in the request memory budget (reqmem.h).
 *
 * A body the contract does not allow gets the same 400 as a whole-tree
 * reading would give, in the same order: invalid JSON first (anywhere in the
 * body), then the shape of the top level, the limits (max_modules,
 * max_frames), then the first bad module, then the first bad frame; each with
 * the field at fault ("frames[3].rva").
 *
 * Memory, per request: sizeof(rq_module) per module (a module_id, about half
 * a KiB), sizeof(rq_frame) per frame (32 bytes; rq_v5_frame for v5, 24), the
 * v5 memoryMap entries' names as given, and one piece's jansson tree at a
 * time - not a tree of the body.
 *
 * Ownership: rq_free frees what a parse filled (also after an error).
 */
#ifndef PDBSYM_REQUEST_H
#define PDBSYM_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "module.h"
#include "reqmem.h"

#define RQ_V5_MAX_JOBS 10

typedef struct {
  module_id id;
  bool skip;             /* v5: no frame names it, so it is not looked up */
  uint32_t given_off;    /* v5: "debug_file/breakpad_id" as given, in names */
  uint32_t given_len;
} rq_module;

typedef enum { RQ_NATIVE = 0, RQ_MANAGED } rq_kind;

typedef struct {
  uint64_t rva;          /* or the token */
  uint64_t il;
  uint32_t module;
  uint8_t kind;          /* rq_kind */
  uint8_t invalid;       /* well-formed but not answerable: why says why */
  uint16_t why;          /* index into rq_why_text */
} rq_frame;

typedef struct {
  int64_t module_index;  /* as given (may be out of the job's range) */
  uint64_t offset;
  bool offset_ok;        /* a number that fits in 64 bits */
} rq_v5_frame;

typedef struct {
  uint32_t first, count; /* frames of one stack in v5_frames */
} rq_stack;

typedef struct {
  uint32_t mod_first, nmods;     /* in mods */
  uint32_t stack_first, nstacks; /* in stacks */
} rq_job;

typedef struct {
  rm_buf mods_b, frames_b, v5_b, stacks_b, names; /* the arrays' storage */
  rq_module *mods;
  size_t nmods;
  rq_frame *frames; /* /symbolicate */
  size_t nframes;
  bool has_timeout;
  double timeout;   /* seconds, >= 0 */
  rq_v5_frame *v5_frames;
  size_t nv5_frames;
  rq_stack *stacks;
  size_t nstacks;
  rq_job jobs[RQ_V5_MAX_JOBS];
  size_t njobs;
} rq_request;

typedef struct {
  uint64_t max_modules, max_frames;
} rq_limits;

typedef enum {
  RQ_OK = 0,
  RQ_BAD,    /* 400: err says what and where */
  RQ_BUDGET, /* the memory budget could not take the arrays: 503 */
} rq_result;

typedef struct {
  char field[96]; /* "" when the body as a whole is at fault */
  char msg[400];
} rq_error;

/* Zero-initialise *out first.  Fills it from the body or says why not; the
 * arrays draw on grant (NULL: on the budget itself). */
rq_result rq_parse_symbolicate(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                               rq_request *out, rq_error *err);
rq_result rq_parse_v5(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                      rq_request *out, rq_error *err);
void rq_free(rq_request *r);

/* module.h's reason for a bad name or id without its leading "field: " (the
 * error names the field already); NULL (a NUL byte in the value) gives
 * "contains a NUL byte". */
const char *rq_reason(const char *why);

/* The reason of an invalid frame. */
const char *rq_why_text(uint16_t why);

/* A v5 module's "debug_file/breakpad_id" as given (not NUL-terminated). */
static inline const char *rq_given(const rq_request *r, const rq_module *m) {
  return r->names.p + m->given_off;
}

#endif
