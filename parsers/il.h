/*
 * il.h - the call sites in a .NET method's IL (ECMA-335 II.25.4 method
 * bodies, III opcodes), and the names of the methods they call: what a
 * trace's caller frame looks for when the JIT's map cannot say which
 * statement its call belongs to (trace.c, "honest lines").
 *
 *   method body   tiny: one byte, low bits 10, code size in the high 6
 *                 bits, then the code; fat: low bits 11, 12 bits of flags
 *                 and a header size in dwords (3), u16 max stack, u32 code
 *                 size, u32 locals token, then the code
 *   instructions  a one-byte opcode, or 0xFE and a second byte; operands of
 *                 0, 1, 2, 4 or 8 bytes, switch: u32 n and n x i32
 *
 * Pure: borrows the image's bytes and its opened metadata; allocates nothing.
 */
#ifndef PDBSYM_IL_H
#define PDBSYM_IL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metadata.h"
#include "pe.h"

#define IL_MAX_CALLS 4096 /* call sites read of one method */

enum { IL_OP_CALL = 0x28, IL_OP_CALLVIRT = 0x6F, IL_OP_NEWOBJ = 0x73 };

typedef struct {
  uint32_t il;    /* the call instruction's IL offset */
  uint32_t token; /* MethodDef, MemberRef or MethodSpec */
  uint8_t op;     /* IL_OP_* */
} il_call;

/* The image's metadata (CLI header -> metadata root) into m; m borrows
 * data.  PS_E_NOT_FOUND: not a .NET image. */
ps_err il_open_metadata(const pe_layout *pe, md_meta *m, ps_diag *diag);

/* The IL of MethodDef token: *code, *len borrowed from the image.
 * PS_E_NOT_FOUND: the method has no body (abstract, extern, runtime). */
ps_err il_method_code(const pe_layout *pe, const md_meta *m, uint32_t token,
                      const uint8_t **code, size_t *len, ps_diag *diag);

/* The call, callvirt and newobj instructions of code, in IL order, up to
 * cap (more is PS_E_LIMIT); an instruction that runs past the end or an
 * opcode ECMA-335 does not define is PS_E_CORRUPT. */
ps_err il_calls(const uint8_t *code, size_t len, il_call *out, size_t cap, size_t *n,
                ps_diag *diag);

/* What a call's token names: the method's name and, when its declaring type
 * is a TypeDef or TypeRef, the type's name and namespace ("" otherwise); a
 * MethodSpec names its generic method.  *def is the MethodDef token when the
 * target is in the same module, else 0.  Strings borrowed from m; false
 * for a token that is not a method. */
bool il_target(const md_meta *m, uint32_t token, const char **name, const char **type,
               const char **ns, uint32_t *def);

#endif
