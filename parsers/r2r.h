/*
 * r2r.h - the ReadyToRun code of a .NET PE image: which runtime function a
 * method's precompiled code is, and that code's native-to-IL map, read from
 * the image's own debug info.  The .NET runtime reads the same maps for its
 * stack traces of precompiled frames (System.Diagnostics.StackFrame), and
 * emits no MethodILToNativeMap event for them, so a trace's ReadyToRun
 * frames get IL offsets (and then lines) only from here.
 *
 * Format (dotnet/runtime docs/design/coreclr/botr/readytorun-format.md,
 * src/coreclr/inc/readytorun.h, src/coreclr/vm/debuginfostore.cpp,
 * docs/design/datacontracts/DebugInfo.md):
 *
 *   CLI header +64 ManagedNativeHeader -> READYTORUN_HEADER:
 *     u32 "RTR\0", u16 major, u16 minor, u32 flags, u32 count,
 *     count x {u32 type, u32 rva, u32 size}
 *   102 RuntimeFunctions   {u32 begin, u32 end, u32 unwind} (amd64; others
 *                          {begin, unwind}), sorted by begin; a method's
 *                          entry and its funclets each have one
 *   103 MethodDefEntryPoints  native sparse array by MethodDef RID - 1 of
 *                          (runtime function index << 1 | fixups) (<< 2 with
 *                          a back reference when bit 1 is set too)
 *   105 DebugInfo          native sparse array by runtime function index of
 *                          the method's blob (a "lookback" back reference
 *                          when shared): nibble-coded sizes (bounds, vars;
 *                          from major 17 a 0 opens six sizes), then the
 *                          bounds: a nibble-coded count and, from major 16,
 *                          the bit widths of native deltas and IL offsets,
 *                          then count bit-packed entries (source flags: 2
 *                          bits, 3 from major 17; native delta; IL offset +
 *                          3) read low bit first; before 16 three nibble-
 *                          coded numbers per entry
 *   native integers        low bits of the first byte give the length
 *                          (x0: 1 byte, x01: 2, x011: 3, x0111: 4, 01111: 5)
 *   nibbles                low nibble of a byte first; 3 value bits and a
 *                          "more" bit each, the high bits first
 *
 * Everything is bounds-checked against the image's bytes; a bad offset, a
 * width over 32 bits, a count past its bytes is PS_E_CORRUPT with where.
 * Composite images (one file for many assemblies) are not read
 * (PS_E_UNSUPPORTED).  Borrows the image's bytes; allocates nothing.
 */
#ifndef PDBSYM_R2R_H
#define PDBSYM_R2R_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "pe.h"

#define R2R_SIGNATURE 0x00525452u /* "RTR\0" */
#define R2R_MAX_SECTIONS 256
#define R2R_MAX_BOUNDS 65536 /* entries of one method's map */

/* IL offsets of a map entry may be these markers (cordebuginfo.h) */
#define R2R_IL_NO_MAPPING (-1)
#define R2R_IL_PROLOG (-2)
#define R2R_IL_EPILOG (-3)

/* a map entry's source flags */
#define R2R_SRC_CALL 0x1        /* the instruction of a call */
#define R2R_SRC_STACK_EMPTY 0x2 /* the IL stack is empty here */
#define R2R_SRC_ASYNC 0x4       /* an async suspension (major 17) */

/* one byte span of the image: the file bytes of the PE section holding a
 * ReadyToRun section, and where that section starts in them */
typedef struct {
  const uint8_t *p;
  size_t len;
  size_t at;
  bool present;
} r2r_span;

typedef struct {
  pe_layout pe;
  uint16_t major, minor;
  uint32_t flags;
  uint16_t machine;   /* with the OS bits of a non-Windows image taken off */
  size_t rf_off;      /* file offset of RuntimeFunctions */
  uint32_t rf_count;
  uint32_t rf_size;   /* 12 (amd64) or 8 bytes an entry */
  r2r_span entries;   /* MethodDefEntryPoints */
  r2r_span debug;     /* DebugInfo */
} r2r_image;

typedef struct {
  uint32_t native; /* offset from the method's start */
  int32_t il;      /* IL offset, or an R2R_IL_* marker */
  uint8_t source;  /* R2R_SRC_* */
} r2r_bound;

/* Opens the ReadyToRun header of the PE image data[0, len) (borrowed).
 * PS_E_NOT_FOUND: a PE image without ReadyToRun code (IL only, or not
 * .NET); PS_E_UNSUPPORTED: a composite image or a component of one. */
ps_err r2r_open(r2r_image *r, const uint8_t *data, size_t len, ps_diag *diag);

/* runtime function i: its code [*begin, *end) as RVAs (for an entry without
 * an end, the next entry's begin); false past the table */
bool r2r_function(const r2r_image *r, uint32_t i, uint32_t *begin, uint32_t *end);
/* the runtime function whose code starts at rva */
bool r2r_function_at(const r2r_image *r, uint32_t rva, uint32_t *index);

/* The runtime function of MethodDef rid's (1-based) precompiled entry:
 * PS_E_OK, PS_E_NOT_FOUND (not precompiled: the JIT compiles it), or
 * PS_E_CORRUPT. */
ps_err r2r_method_entry(const r2r_image *r, uint32_t rid, uint32_t *index, ps_diag *diag);

/* The native-to-IL map of runtime function index (a method's entry), in the
 * image's order (by native offset), up to cap entries into out (*n: how
 * many; more than cap is PS_E_LIMIT).  PS_E_NOT_FOUND: no debug info. */
ps_err r2r_bounds(const r2r_image *r, uint32_t index, r2r_bound *out, size_t cap, size_t *n,
                  ps_diag *diag);

#endif
