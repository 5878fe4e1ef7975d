/*
 * request_diff.h - one body read by both readers of request bodies: the
 * service's (request.c on the walker's own scanner) and the reference, as
 * it was when every value went through jansson (request_ref.h).  They must
 * agree on everything a caller sees: the result, the 400's field and
 * message (invalid JSON's text with its line and column included), and for
 * a body accepted every array of the request, field by field, and the
 * request's texts byte for byte.  Used by test_request_diff.c and
 * fuzz_request_diff.c.
 */
#ifndef PDBSYM_TEST_REQUEST_DIFF_H
#define PDBSYM_TEST_REQUEST_DIFF_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "reqmem.h"
#include "request.h"
#include "request_ref.h"

static inline bool rd_same_id(const module_id *a, const module_id *b) {
  return !strcmp(a->debug_file, b->debug_file) && !memcmp(a->guid, b->guid, 16) && a->age == b->age &&
         a->format == b->format && !strcmp(a->code_file, b->code_file) &&
         a->code_timestamp == b->code_timestamp && a->code_size == b->code_size &&
         a->has_code_id == b->has_code_id && !strcmp(a->code_id_text, b->code_id_text);
}

static inline bool rd_same_module(const rq_module *a, const rq_module *b) {
  return rd_same_id(&a->id, &b->id) && a->skip == b->skip && a->invalid == b->invalid &&
         a->no_age == b->no_age && a->has_image == b->has_image && a->image_addr == b->image_addr &&
         a->image_size == b->image_size && a->given_off == b->given_off && a->given_len == b->given_len &&
         a->field_off == b->field_off && a->why_off == b->why_off && a->gfile_off == b->gfile_off &&
         a->gid_off == b->gid_off;
}

static inline bool rd_same_frame(const rq_frame *a, const rq_frame *b) {
  return a->rva == b->rva && a->aux == b->aux && a->stack == b->stack && a->module == b->module &&
         a->kind == b->kind && a->flags == b->flags && a->adjust == b->adjust && a->why == b->why;
}

/* What differs between two filled requests ("" when nothing does). */
static inline const char *rd_diff_requests(const rq_request *a, const rq_request *b) {
  if (a->nmods != b->nmods)
    return "number of modules";
  for (size_t i = 0; i < a->nmods; i++)
    if (!rd_same_module(&a->mods[i], &b->mods[i]))
      return "a module";
  if (a->nframes != b->nframes)
    return "number of frames";
  for (size_t i = 0; i < a->nframes; i++)
    if (!rd_same_frame(&a->frames[i], &b->frames[i]))
      return "a frame";
  if (a->has_timeout != b->has_timeout || (a->has_timeout && memcmp(&a->timeout, &b->timeout, sizeof a->timeout)))
    return "timeout";
  if (a->adjust != b->adjust)
    return "instruction_addr_adjustment";
  if (a->nv5_frames != b->nv5_frames)
    return "number of v5 frames";
  for (size_t i = 0; i < a->nv5_frames; i++) {
    const rq_v5_frame *x = &a->v5_frames[i], *y = &b->v5_frames[i];
    if (x->module_index != y->module_index || x->offset != y->offset || x->text_off != y->text_off ||
        x->off_kind != y->off_kind)
      return "a v5 frame";
  }
  if (a->nstacks != b->nstacks)
    return "number of stacks";
  for (size_t i = 0; i < a->nstacks; i++)
    if (a->stacks[i].first != b->stacks[i].first || a->stacks[i].count != b->stacks[i].count)
      return "a stack";
  if (a->njobs != b->njobs)
    return "number of jobs";
  for (size_t i = 0; i < a->njobs; i++)
    if (memcmp(&a->jobs[i], &b->jobs[i], sizeof a->jobs[i]))
      return "a job";
  if (a->names.len != b->names.len || (a->names.len && memcmp(a->names.p, b->names.p, a->names.len)))
    return "the request's texts";
  return "";
}

typedef struct {
  rq_result res;
  rq_error err;
} rd_outcome;

/* Reads body with both readers (v5: the v5 route); true when they agree,
 * else *what says how and the two outcomes are in *ours, *ref. */
static inline bool rd_compare(const char *body, size_t len, bool v5, const rq_limits *lim, const char **what,
                              rd_outcome *ours, rd_outcome *ref) {
  rq_request a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(ours, 0, sizeof *ours);
  memset(ref, 0, sizeof *ref);
  ours->res = v5 ? rq_parse_v5(body, len, lim, NULL, &a, &ours->err)
                 : rq_parse_symbolicate(body, len, lim, NULL, &a, &ours->err);
  ref->res = v5 ? ref_rq_parse_v5(body, len, lim, NULL, &b, &ref->err)
                : ref_rq_parse_symbolicate(body, len, lim, NULL, &b, &ref->err);
  *what = "";
  if (ours->res != ref->res)
    *what = "result";
  else if (ours->res == RQ_BAD && (strcmp(ours->err.field, ref->err.field) || strcmp(ours->err.msg, ref->err.msg)))
    *what = "error";
  else if (ours->res == RQ_OK)
    *what = rd_diff_requests(&a, &b);
  rq_free(&a);
  ref_rq_free(&b);
  return !**what;
}

/* The same under a memory budget of max bytes (reqmem.h; each reader's
 * buffers drawing on it directly), where the service's reader also reserves
 * its walker's state (the keys of the open objects) and the reference does
 * not: both must agree as above, or ours refuse for the budget (RQ_BUDGET)
 * where the reference does not - and then only if reading the body with no
 * limit does need more than max at once (*peak: the size of a grant the
 * reading with no limit drew on, which grows only when what its buffers hold
 * passes it).  The budget is unlimited again on return. */
static inline bool rd_compare_budget(const char *body, size_t len, bool v5, const rq_limits *lim, uint64_t max,
                                     const char **what, rd_outcome *ours, rd_outcome *ref, uint64_t *peak) {
  rq_request a;
  rq_error e;
  rm_grant g = {0};
  memset(&a, 0, sizeof a);
  rm_set_max(0);
  (void)(v5 ? rq_parse_v5(body, len, lim, &g, &a, &e) : rq_parse_symbolicate(body, len, lim, &g, &a, &e));
  *peak = g.size;
  rq_free(&a);
  rm_grant_end(&g);
  rm_set_max(max);
  bool same = rd_compare(body, len, v5, lim, what, ours, ref);
  rm_set_max(0);
  if (same)
    return true;
  if (ours->res == RQ_BUDGET && ref->res != RQ_BUDGET) {
    if (*peak > max) {
      *what = "";
      return true;
    }
    *what = "a budget refusal of a body that fits";
  }
  return false;
}

/* The limits the comparisons use: small, so that the limits' own errors
 * and the frames past them are met too, and the service's defaults. */
static const rq_limits RD_LIMITS[] = {{3, 5, 5, 2}, {1000, 20000, 20000, 100}};

/* Both routes under every limit; prints the first disagreement (with the
 * body's first bytes) and returns false on any. */
static inline bool rd_check(const char *body, size_t len, unsigned *accepted) {
  bool ok = true;
  for (int v5 = 0; v5 < 2; v5++)
    for (size_t l = 0; l < sizeof RD_LIMITS / sizeof RD_LIMITS[0]; l++) {
      const char *what;
      rd_outcome x, y;
      if (rd_compare(body, len, v5, &RD_LIMITS[l], &what, &x, &y)) {
        if (accepted && x.res == RQ_OK)
          (*accepted)++;
        continue;
      }
      if (ok)
        fprintf(stderr, "  %s, limits %zu: %s differs\n    body (%zu bytes): %.*s\n    ours %d [%s] %s\n"
                        "    ref  %d [%s] %s\n",
                v5 ? "v5" : "symbolicate", l, what, len, (int)(len > 300 ? 300 : len), body, x.res,
                x.err.field, x.err.msg, y.res, y.err.field, y.err.msg);
      ok = false;
    }
  return ok;
}

/* rd_check under a budget of max bytes (rd_compare_budget); *refused (when
 * not NULL) counts the readings ours refused for the budget. */
static inline bool rd_check_budget(const char *body, size_t len, uint64_t max, unsigned *refused) {
  bool ok = true;
  for (int v5 = 0; v5 < 2; v5++)
    for (size_t l = 0; l < sizeof RD_LIMITS / sizeof RD_LIMITS[0]; l++) {
      const char *what;
      rd_outcome x, y;
      uint64_t peak;
      if (rd_compare_budget(body, len, v5, &RD_LIMITS[l], max, &what, &x, &y, &peak)) {
        if (refused && x.res == RQ_BUDGET)
          (*refused)++;
        continue;
      }
      if (ok)
        fprintf(stderr, "  budget %llu, %s, limits %zu: %s differs (%llu bytes with no limit)\n"
                        "    body (%zu bytes): %.*s\n    ours %d [%s] %s\n    ref  %d [%s] %s\n",
                (unsigned long long)max, v5 ? "v5" : "symbolicate", l, what, (unsigned long long)peak, len,
                (int)(len > 300 ? 300 : len), body, x.res, x.err.field, x.err.msg, y.res, y.err.field, y.err.msg);
      ok = false;
    }
  return ok;
}

#endif
