/*
 * il.c - call sites in a method's IL (see il.h).
 */
#include "il.h"

#include <string.h>

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

ps_err il_open_metadata(const pe_layout *pe, md_meta *m, ps_diag *d) {
  size_t cli, md;
  if (pe->ndirs <= 14 || pe->dir_size[14] < 16 || !pe_layout_rva(pe, pe->dir_rva[14], 16, &cli))
    return ps_diag_set(d, PS_E_NOT_FOUND, "CLI header", (size_t)-1, "not a .NET image");
  uint32_t rva = le32(pe->data + cli + 8), size = le32(pe->data + cli + 12);
  if (!pe_layout_rva(pe, rva, size, &md))
    return ps_diag_set(d, PS_E_CORRUPT, "CLI header", cli + 8,
                       "metadata rva 0x%x size 0x%x lies outside the sections", (unsigned)rva,
                       (unsigned)size);
  return md_open(m, pe->data + md, size, md, d);
}

ps_err il_method_code(const pe_layout *pe, const md_meta *m, uint32_t token,
                      const uint8_t **code, size_t *len, ps_diag *d) {
  uint32_t rid = token & 0xFFFFFF;
  if (token >> 24 != MD_METHODDEF || rid == 0 || rid > md_rows(m, MD_METHODDEF))
    return ps_diag_set(d, PS_E_NOT_FOUND, "MethodDef", (size_t)-1, "no method 0x%08x",
                       (unsigned)token);
  uint32_t rva = md_get(m, MD_METHODDEF, rid, 0);
  size_t at;
  if (!rva)
    return PS_E_NOT_FOUND; /* abstract, extern, runtime-implemented */
  if (!pe_layout_rva(pe, rva, 1, &at))
    return ps_diag_set(d, PS_E_CORRUPT, "method body", (size_t)-1,
                       "method 0x%08x's rva 0x%x lies outside the sections", (unsigned)token,
                       (unsigned)rva);
  const uint8_t *p = pe->data + at;
  size_t room = pe->len - at;
  if ((p[0] & 3) == 2) { /* tiny */
    size_t n = p[0] >> 2;
    if (n > room - 1)
      return ps_diag_set(d, PS_E_CORRUPT, "method body", at, "tiny body past the file");
    *code = p + 1;
    *len = n;
    return PS_E_OK;
  }
  if ((p[0] & 3) != 3 || room < 12)
    return ps_diag_set(d, PS_E_CORRUPT, "method body", at, "header 0x%02x is neither tiny nor fat",
                       p[0]);
  size_t hdr = (size_t)(p[1] >> 4) * 4;
  uint32_t n = le32(p + 4);
  if (hdr < 12 || hdr > room || n > room - hdr)
    return ps_diag_set(d, PS_E_CORRUPT, "method body", at,
                       "fat header of %zu bytes and %u bytes of code past the file", hdr,
                       (unsigned)n);
  *code = p + hdr;
  *len = n;
  return PS_E_OK;
}

/* operand bytes of one-byte opcodes (ECMA-335 III.1.9; -1: not an opcode) */
static int operand1(uint8_t op) {
  if (op <= 0x0D)
    return 0;
  if (op <= 0x13)
    return 1; /* ldarg.s .. stloc.s */
  if (op <= 0x1E)
    return 0;
  switch (op) {
  case 0x1F: return 1;             /* ldc.i4.s */
  case 0x20: case 0x22: return 4;  /* ldc.i4, ldc.r4 */
  case 0x21: case 0x23: return 8;  /* ldc.i8, ldc.r8 */
  case 0x24: return -1;
  case 0x25: case 0x26: return 0;  /* dup, pop */
  case 0x27: case 0x28: case 0x29: return 4; /* jmp, call, calli */
  case 0x2A: return 0;             /* ret */
  default: break;
  }
  if (op <= 0x37)
    return 1; /* short branches */
  if (op <= 0x44)
    return 4; /* branches */
  if (op == 0x45)
    return -2; /* switch */
  if (op <= 0x6E)
    return 0;
  if (op <= 0x75)
    return 4; /* callvirt cpobj ldobj ldstr newobj castclass isinst */
  if (op == 0x76)
    return 0;
  if (op <= 0x78)
    return -1;
  if (op == 0x79)
    return 4; /* unbox */
  if (op == 0x7A)
    return 0;
  if (op <= 0x81)
    return 4; /* field access, stobj */
  if (op <= 0x8B)
    return 0;
  if (op <= 0x8D)
    return 4; /* box, newarr */
  if (op == 0x8E)
    return 0;
  if (op == 0x8F)
    return 4; /* ldelema */
  if (op <= 0xA2)
    return 0;
  if (op <= 0xA5)
    return 4; /* ldelem, stelem, unbox.any */
  if (op <= 0xB2)
    return -1;
  if (op <= 0xBA)
    return 0;
  if (op <= 0xC1)
    return -1;
  if (op == 0xC2)
    return 4; /* refanyval */
  if (op == 0xC3)
    return 0;
  if (op <= 0xC5)
    return -1;
  if (op == 0xC6)
    return 4; /* mkrefany */
  if (op <= 0xCF)
    return -1;
  if (op == 0xD0)
    return 4; /* ldtoken */
  if (op <= 0xDC)
    return 0;
  if (op == 0xDD)
    return 4; /* leave */
  if (op == 0xDE)
    return 1; /* leave.s */
  if (op <= 0xE0)
    return 0;
  return -1;
}

/* operand bytes of 0xFE-prefixed opcodes */
static int operand2(uint8_t op) {
  switch (op) {
  case 0x00: case 0x01: case 0x02: case 0x03: case 0x04: case 0x05: return 0;
  case 0x06: case 0x07: return 4; /* ldftn, ldvirtftn */
  case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x0E: return 2;
  case 0x0F: case 0x11: case 0x13: case 0x14: return 0;
  case 0x12: case 0x19: return 1; /* unaligned., no. */
  case 0x15: case 0x16: case 0x1C: return 4; /* initobj, constrained., sizeof */
  case 0x17: case 0x18: case 0x1A: case 0x1D: case 0x1E: return 0;
  default: return -1;
  }
}

ps_err il_calls(const uint8_t *code, size_t len, il_call *out, size_t cap, size_t *n,
                ps_diag *d) {
  *n = 0;
  size_t pc = 0;
  while (pc < len) {
    size_t at = pc;
    uint8_t op = code[pc++];
    int k;
    if (op == 0xFE) {
      if (pc >= len)
        return ps_diag_set(d, PS_E_CORRUPT, "IL", at, "a two-byte opcode cut at the end");
      k = operand2(code[pc++]);
    } else {
      k = operand1(op);
    }
    if (k == -2) { /* switch: u32 n, n x i32 */
      if (len - pc < 4)
        return ps_diag_set(d, PS_E_CORRUPT, "IL", at, "switch cut at the end");
      uint32_t targets = le32(code + pc);
      pc += 4;
      if (targets > (len - pc) / 4)
        return ps_diag_set(d, PS_E_CORRUPT, "IL", at, "switch of %u targets past the end",
                           (unsigned)targets);
      pc += (size_t)targets * 4;
      continue;
    }
    if (k < 0)
      return ps_diag_set(d, PS_E_CORRUPT, "IL", at, "opcode 0x%02x%s is not ECMA-335's", op,
                         op == 0xFE ? " (two-byte)" : "");
    if ((size_t)k > len - pc)
      return ps_diag_set(d, PS_E_CORRUPT, "IL", at, "operand of opcode 0x%02x past the end", op);
    if (op == IL_OP_CALL || op == IL_OP_CALLVIRT || op == IL_OP_NEWOBJ) {
      if (*n == cap)
        return ps_diag_set(d, PS_E_LIMIT, "IL", at, "more than %zu calls in one method", cap);
      out[*n].il = (uint32_t)at;
      out[*n].token = le32(code + pc);
      out[*n].op = op;
      (*n)++;
    }
    pc += (size_t)k;
  }
  return PS_E_OK;
}

/* the TypeDef whose method list holds MethodDef rid (0 if none) */
static uint32_t declaring_type(const md_meta *m, uint32_t rid) {
  uint32_t lo = 1, hi = md_rows(m, MD_TYPEDEF) + 1; /* the last with list <= rid */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (md_get(m, MD_TYPEDEF, mid, 5) <= rid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 1 ? lo - 1 : 0;
}

static const char *str_or_empty(const md_meta *m, uint32_t idx) {
  const char *s = md_string(m, idx, NULL);
  return s ? s : "";
}

bool il_target(const md_meta *m, uint32_t token, const char **name, const char **type,
               const char **ns, uint32_t *def) {
  *name = *type = *ns = "";
  *def = 0;
  uint32_t table = token >> 24, rid = token & 0xFFFFFF;
  if (table == 0x2B) { /* MethodSpec: its generic method (MethodDefOrRef) */
    if (!rid || rid > md_rows(m, 0x2B))
      return false;
    uint32_t c = md_get(m, 0x2B, rid, 0);
    table = c & 1 ? MD_MEMBERREF : MD_METHODDEF;
    rid = c >> 1;
  }
  if (table == MD_METHODDEF) {
    if (!rid || rid > md_rows(m, MD_METHODDEF))
      return false;
    *name = str_or_empty(m, md_get(m, MD_METHODDEF, rid, 3));
    uint32_t t = declaring_type(m, rid);
    if (t) {
      *type = str_or_empty(m, md_get(m, MD_TYPEDEF, t, 1));
      *ns = str_or_empty(m, md_get(m, MD_TYPEDEF, t, 2));
    }
    *def = (uint32_t)MD_METHODDEF << 24 | rid;
    return true;
  }
  if (table != MD_MEMBERREF || !rid || rid > md_rows(m, MD_MEMBERREF))
    return false;
  *name = str_or_empty(m, md_get(m, MD_MEMBERREF, rid, 1));
  uint32_t parent = md_get(m, MD_MEMBERREF, rid, 0); /* MemberRefParent: 3 tag bits */
  uint32_t tag = parent & 7, prid = parent >> 3;
  if (tag == 1 && prid && prid <= md_rows(m, MD_TYPEREF)) { /* TypeRef */
    *type = str_or_empty(m, md_get(m, MD_TYPEREF, prid, 1));
    *ns = str_or_empty(m, md_get(m, MD_TYPEREF, prid, 2));
  } else if (tag == 0 && prid && prid <= md_rows(m, MD_TYPEDEF)) { /* TypeDef */
    *type = str_or_empty(m, md_get(m, MD_TYPEDEF, prid, 1));
    *ns = str_or_empty(m, md_get(m, MD_TYPEDEF, prid, 2));
  }
  return true;
}
