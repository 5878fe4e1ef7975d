/*
 * request.h - the bodies of POST /symbolicate and POST /symbolicate/v5 read
 * into compact arrays (docs/contract.md "Modules", "Frames", "Mozilla's
 * symbolication API v5"; api.md), without a tree of the whole body: the body
 * is walked with jwalk.h and each module, frame or memoryMap entry is checked
 * as it comes.  The arrays grow in the request memory budget (reqmem.h).
 *
 * A body the contract does not allow gets the same 400 as a whole-tree
 * reading would give, in the same order: invalid JSON first (anywhere in the
 * body), then the shape of the top level, the limits (max_modules,
 * max_frames; v5_max_jobs, v5_max_frames), the request's own fields
 * (timeout, instruction_addr_adjustment), then the first bad frame (v5: the
 * first job with a bad shape); each with the field at fault
 * ("frames[3].rva").  A module whose fields are bad does not fail the
 * request: it is marked invalid (with the field and the reason), and its
 * frames come back invalid (api.md, "Modules").
 *
 * /symbolicate frames are placed once the body is read: a frame given by
 * instruction_addr gets its RVA from its module's image_addr (and is checked
 * against image_size), a frame whose module index names no module, or names
 * an invalid one, is invalid, and return addresses (instruction_addr_adjustment,
 * adjust_instruction_addr, stack) are marked for a lookup at RVA - 1.
 *
 * Memory, per request: sizeof(rq_module) per module (a module_id, about half
 * a KiB), sizeof(rq_frame) per frame (40 bytes; rq_v5_frame for v5, 24), the
 * v5 memoryMap entries' names as given and the texts of invalid modules;
 * besides those, outside the budget, the walker's own state (jwalk.h) and a
 * copy of one module's or memoryMap entry's strings at a time - never a
 * tree.
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

#define RQ_NO_TEXT UINT32_MAX /* a text offset: none (the answer has null) */

typedef struct {
  module_id id;
  bool skip;             /* v5: no frame names it, so it is not looked up */
  bool invalid;          /* a field is bad: never looked up, its frames are invalid */
  bool no_age;           /* the debug id had no age (a Portable PDB's GUID alone) */
  bool has_image;        /* image_addr given */
  uint64_t image_addr;
  uint64_t image_size;   /* 0: not given */
  /* v5: "debug_file/breakpad_id" as given, in names (not NUL-terminated) */
  uint32_t given_off, given_len;
  /* invalid: NUL-terminated texts in names (RQ_NO_TEXT: none) */
  uint32_t field_off;    /* /symbolicate: "modules[2].debug_id" */
  uint32_t why_off;      /* /symbolicate: "invalid debug_id: the age is longer than 8 hex digits" */
  uint32_t gfile_off;    /* debug_file as given (v5: the memoryMap entry's), or
                          * RQ_NO_TEXT when it is not a string */
  uint32_t gid_off;      /* /symbolicate: debug_id as given, or RQ_NO_TEXT */
} rq_module;

typedef enum { RQ_NATIVE = 0, RQ_MANAGED } rq_kind;

/* rq_frame.flags */
enum {
  RQ_F_INVALID = 1,    /* well-formed but not answerable: why says why */
  RQ_F_INDEX_OK = 2,   /* module is a number that fits in 32 bits */
  RQ_F_HAS_RVA = 4,    /* native: the RVA is known (given, or from instruction_addr) */
  RQ_F_HAS_IADDR = 8,  /* native: instruction_addr given (in aux) */
  RQ_F_ADJUSTED = 16,  /* native: looked up at rva - 1 (a return address) */
  RQ_F_BAD_INDEX = 32, /* module names no entry of modules */
};

typedef struct {
  uint64_t rva;    /* native: the RVA; managed: the token */
  uint64_t aux;    /* managed: the IL offset; native: instruction_addr (RQ_F_HAS_IADDR) */
  uint64_t stack;  /* "stack": the frames of one stack share it (default 0) */
  uint32_t module; /* the index as given (RQ_F_INDEX_OK) */
  uint8_t kind;    /* rq_kind */
  uint8_t flags;   /* RQ_F_* */
  int8_t adjust;   /* adjust_instruction_addr: -1 absent, 0 false, 1 true */
  uint16_t why;    /* RQ_F_INVALID: an index for rq_why_text, or RQ_WHY_MODULE */
} rq_frame;

/* rq_frame.why of a frame whose module is invalid: the error is the
 * module's (api.c words it). */
#define RQ_WHY_MODULE 0xffff

/* rq_v5_frame.off_kind: how module_offset is echoed */
enum {
  RQ_OFF_OK = 0, /* offset: the number */
  RQ_OFF_NEG,    /* a negative integer: offset is its magnitude ("-0x1") */
  RQ_OFF_TEXT,   /* a hex string wider than 64 bits: text_off, as given, in names */
};

typedef struct {
  int64_t module_index;  /* as given (may be out of the job's range) */
  uint64_t offset;
  uint32_t text_off;
  uint8_t off_kind;
} rq_v5_frame;

typedef struct {
  uint32_t first, count; /* frames of one stack in v5_frames */
} rq_stack;

typedef struct {
  uint32_t mod_first, nmods;     /* in mods */
  uint32_t stack_first, nstacks; /* in stacks */
} rq_job;

typedef enum { RQ_ADJ_NONE = 0, RQ_ADJ_ALL_BUT_FIRST, RQ_ADJ_ALL } rq_adjust;

typedef struct {
  rm_buf mods_b, frames_b, v5_b, stacks_b, jobs_b, names; /* the arrays' storage */
  rq_module *mods;
  size_t nmods;
  rq_frame *frames; /* /symbolicate */
  size_t nframes;
  bool has_timeout;
  double timeout;   /* seconds, >= 0 */
  rq_adjust adjust; /* instruction_addr_adjustment */
  rq_v5_frame *v5_frames;
  size_t nv5_frames;
  rq_stack *stacks;
  size_t nstacks;
  rq_job *jobs;
  size_t njobs;
} rq_request;

typedef struct {
  uint64_t max_modules, max_frames;  /* /symbolicate; max_modules for v5 too */
  uint64_t v5_max_frames, v5_max_jobs;
} rq_limits;

typedef enum {
  RQ_OK = 0,
  RQ_BAD,    /* 400: err says what and where */
  RQ_BUDGET, /* the memory budget could not take the arrays, or the walker's
              * own state (the keys of a many-key object): 503 */
} rq_result;

typedef struct {
  char field[96]; /* "" when the body as a whole is at fault */
  char msg[400];
} rq_error;

/* Zero-initialise *out first.  Fills it from the body or says why not; the
 * arrays and the walker's state (jwalk.h) draw on grant (NULL: on the
 * budget itself).  A walker's reservation refused stops the walk, so the
 * body's later faults are not looked for: RQ_BUDGET then, whatever they. */
rq_result rq_parse_symbolicate(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                               rq_request *out, rq_error *err);
rq_result rq_parse_v5(const char *body, size_t len, const rq_limits *lim, rm_grant *grant,
                      rq_request *out, rq_error *err);
void rq_free(rq_request *r);

/* module.h's reason for a bad name or id without its leading "field: " (the
 * error names the field already); NULL (a NUL byte in the value) gives
 * "contains a NUL byte". */
const char *rq_reason(const char *why);

/* The reason of an invalid frame (not RQ_WHY_MODULE). */
const char *rq_why_text(uint16_t why);

/* A NUL-terminated text of the request (a *_off field), or NULL for RQ_NO_TEXT. */
static inline const char *rq_text(const rq_request *r, uint32_t off) {
  return off == RQ_NO_TEXT ? NULL : r->names.p + off;
}

/* A v5 module's "debug_file/breakpad_id" as given (not NUL-terminated). */
static inline const char *rq_given(const rq_request *r, const rq_module *m) {
  return r->names.p + m->given_off;
}

#endif
