/*
 * undname.c - undecoration of Microsoft C++ decorated names (the MSVC
 * mangling scheme), printed the way llvm-undname (LLVM 14) prints them.
 *
 * Grammar (learned from LLVM's MicrosoftDemangle.cpp, its tests and Wine's
 * undname.c; this is an independent implementation):
 *
 *   <symbol>      ::= ? <special-intrinsic> ...        # ??_7 ??_R0 ??_C ...
 *                 ::= ? <qualified-name> <encoding>
 *                 ::= ??@ <md5> @                      # hashed long name
 *                 ::= . <type>                         # RTTI type name
 *   <qualified-name> ::= <unqualified-name> <scope-piece>* @
 *   <encoding>    ::= [0-4] <type> <cv>                # variable
 *                 ::= <function-class> [<adjustors>] <function-type>
 *   <function-type> ::= [<this-cv>] <call-conv> <return-type|@>
 *                       <params> <throw-spec>
 *
 * Two back-reference tables of ten entries each (names and function
 * parameter types) are kept per template-instantiation scope.
 *
 * The demangler parses into a small tree held in a fixed pool on the stack
 * (no heap), then prints it.  Every input is untrusted: reads are bounds
 * checked against len (the input need not be NUL-terminated), recursion is
 * bounded, the node pool, the string arena and the output are bounded, and
 * printing counts its steps so a back-reference bomb cannot run long.
 */
#include "undname.h"

#include <stdint.h>
#include <string.h>

enum {
  UN_MAX_NODES = 3072,  /* tree nodes (corpus names need up to 428) */
  UN_ARENA = 24576,     /* rendered back-reference / scope strings */
  UN_MAX_DEPTH = 64,    /* parser recursion (corpus names reach 19) */
  UN_MAX_PRINT_DEPTH = 256, /* printer recursion (corpus names reach 31) */
  UN_MAX_STEPS = 400000 /* printer node visits */
};

/* ---- tree ------------------------------------------------------------ */

typedef uint16_t nref; /* index into the pool; 0 = none */

enum kind {
  K_NONE,
  K_LIST,       /* a = element, b = next cell */
  K_INT,        /* v = magnitude, F_NEG; a = next int in a chain */
  K_PRIM,       /* sub = primitive index */
  K_FUNC,       /* function signature: sub = call conv, x = func class,
                   a = return type, b = params (list or 0), c = adjustors,
                   flags F_VARIADIC F_NOEXCEPT F_THUNK, REF qualifier */
  K_PTR,        /* sub = affinity, a = pointee, b = member class (qname) */
  K_TAG,        /* sub = tag kind, a = qname */
  K_ARRAY,      /* a = dimensions (list of K_INT), b = element type */
  K_CUSTOM,     /* a = identifier */
  K_QNAME,      /* a = components (list) */
  K_ID_NAMED,   /* string; d = template params */
  K_ID_OP,      /* sub = operator index; d = template params */
  K_ID_LITOP,   /* string; d = template params */
  K_ID_LSG,     /* local static guard: F_THREAD, v = scope index */
  K_ID_CONV,    /* conversion operator: a = target type; d = tparams */
  K_ID_STRUCT,  /* ctor/dtor: F_DTOR, a = class identifier; d = tparams */
  K_ID_DYN,     /* dynamic init/atexit: F_DTOR, a = variable, b = qname */
  K_ID_VCALL,   /* v = offset in vtable */
  K_ID_RTTIBCD, /* a = chain of 4 K_INT */
  K_TPREF,      /* template parameter reference: a = symbol, b = chain of
                   K_INT offsets, x = count, sub = affinity */
  K_SYM_FUNC,   /* a = qname, b = signature */
  K_SYM_VAR,    /* a = qname, b = type, sub = storage class, F_SYNTH */
  K_SYM_TABLE,  /* special table: a = qname, b = target qname */
  K_SYM_LSG,    /* a = qname */
  K_SYM_STR,    /* string literal: string (arena), sub = char kind,
                   F_TRUNC */
  K_SYM_MD5     /* a = qname */
};

/* flags */
#define F_NEG 0x01u
#define F_VARIADIC 0x01u
#define F_NOEXCEPT 0x02u
#define F_THUNK 0x04u
#define F_REF_L 0x08u
#define F_REF_R 0x10u
#define F_THREAD 0x01u
#define F_DTOR 0x01u
#define F_SYNTH 0x01u
#define F_TRUNC 0x01u
#define F_STR_ARENA 0x40u  /* string lives in the arena, not the input */
#define F_STR_STATIC 0x80u /* string is static_strs[x] */

/* qualifiers */
#define Q_CONST 0x01u
#define Q_VOLATILE 0x02u
#define Q_FAR 0x04u
#define Q_UNALIGNED 0x10u
#define Q_RESTRICT 0x20u
#define Q_PTR64 0x40u

enum affinity { A_NONE, A_POINTER, A_REFERENCE, A_RVALUE };
enum tagkind { T_CLASS, T_STRUCT, T_UNION, T_ENUM };
enum storage { SC_NONE, SC_PRIVATE, SC_PROTECTED, SC_PUBLIC, SC_GLOBAL,
               SC_LOCAL };

/* function classes */
#define FC_PUBLIC 0x001u
#define FC_PROTECTED 0x002u
#define FC_PRIVATE 0x004u
#define FC_GLOBAL 0x008u
#define FC_STATIC 0x010u
#define FC_VIRTUAL 0x020u
#define FC_FAR 0x040u
#define FC_EXTERNC 0x080u
#define FC_NOPARAMS 0x100u
#define FC_VTHIS 0x200u
#define FC_VTHISEX 0x400u
#define FC_STHIS 0x800u

struct node {
  uint8_t kind, quals, sub, flags;
  nref a, b, c, d;
  uint32_t x;
  uint64_t v;
};

static const char *const static_strs[] = {
    "`vftable'",
    "`vbtable'",
    "`local vftable'",
    "`RTTI Complete Object Locator'",
    "`RTTI Type Descriptor'",
    "`RTTI Type Descriptor Name'",
    "`RTTI Base Class Array'",
    "`RTTI Class Hierarchy Descriptor'",
    "`anonymous namespace'",
};
enum { S_VFTABLE, S_VBTABLE, S_LOCALVFTABLE, S_COL, S_TD, S_TDNAME, S_BCA,
       S_CHD, S_ANON };

static const char *const prim_names[] = {
    "void",          "bool",     "char",           "signed char",
    "unsigned char", "char8_t",  "char16_t",       "char32_t",
    "short",         "unsigned short", "int",      "unsigned int",
    "long",          "unsigned long",  "__int64",  "unsigned __int64",
    "wchar_t",       "float",    "double",         "long double",
    "std::nullptr_t"};
enum { P_VOID, P_BOOL, P_CHAR, P_SCHAR, P_UCHAR, P_CHAR8, P_CHAR16, P_CHAR32,
       P_SHORT, P_USHORT, P_INT, P_UINT, P_LONG, P_ULONG, P_INT64, P_UINT64,
       P_WCHAR, P_FLOAT, P_DOUBLE, P_LDOUBLE, P_NULLPTR };

static const char *const cc_names[] = {
    "", "__cdecl", "__pascal", "__thiscall", "__stdcall", "__fastcall",
    "__clrcall", "__eabi", "__vectorcall", "__regcall",
    "__attribute__((__swiftcall__)) ",
    "__attribute__((__swiftasynccall__)) "};

/* Operator codes: 36 per group (?X, ?_X, ?__X), X in 0-9A-Z; NULL = none,
 * "" = a code with no intrinsic name (printed as nothing, as LLVM does). */
static const char *const op_names[3][36] = {
    {NULL, NULL, "operator new", "operator delete", "operator=",
     "operator>>", "operator<<", "operator!", "operator==", "operator!=",
     "operator[]", NULL, "operator->", "operator*", "operator++",
     "operator--", "operator-", "operator+", "operator&", "operator->*",
     "operator/", "operator%", "operator<", "operator<=", "operator>",
     "operator>=", "operator,", "operator()", "operator~", "operator^",
     "operator|", "operator&&", "operator||", "operator*=", "operator+=",
     "operator-="},
    {"operator/=", "operator%=", "operator>>=", "operator<<=", "operator&=",
     "operator|=", "operator^=", "", "", "", "", "", "", "`vbase dtor'",
     "`vector deleting dtor'", "`default ctor closure'",
     "`scalar deleting dtor'", "`vector ctor iterator'",
     "`vector dtor iterator'", "`vector vbase ctor iterator'",
     "`virtual displacement map'", "`eh vector ctor iterator'",
     "`eh vector dtor iterator'", "`eh vector vbase ctor iterator'",
     "`copy ctor closure'", "", "", "", "", "`local vftable ctor closure'",
     "operator new[]", "operator delete[]", "", "", "", ""},
    {"", "", "", "", "", "", "", "", "", "", "`managed vector ctor iterator'",
     "`managed vector dtor iterator'", "`EH vector copy ctor iterator'",
     "`EH vector vbase copy ctor iterator'", "", "",
     "`vector copy ctor iterator'", "`vector vbase copy constructor iterator'",
     "`managed vector vbase copy constructor iterator'", "", "",
     "operator co_await", "operator<=>", "", "", "", "", "", "", "", "", "",
     "", "", "", ""},
};

struct backrefs {
  nref names[10];
  nref params[10];
  uint8_t nnames, nparams;
};

struct dm {
  const char *s;
  size_t pos, len;
  int err;
  int depth;
  struct backrefs br;
  size_t nnodes;
  size_t arena_used;
  struct node nodes[UN_MAX_NODES];
  char arena[UN_ARENA];
};

/* ---- output ---------------------------------------------------------- */

struct out {
  char *buf;
  size_t cap;  /* bytes usable, the NUL excluded */
  size_t n;    /* logical length (may exceed cap) */
  char last;   /* last character written (logically) */
  unsigned steps;
  unsigned depth;
  int no_cc;   /* LLVM's OF_NoCallingConvention, set while printing the
                  return type of a function pointer (and all inside it) */
  int overflow;
};

static void o_putn(struct out *o, const char *p, size_t k) {
  if (!k)
    return;
  size_t room = o->n < o->cap ? o->cap - o->n : 0;
  if (room)
    memcpy(o->buf + o->n, p, k < room ? k : room);
  if (k > room)
    o->overflow = 1;
  o->n += k;
  o->last = p[k - 1];
}

static void o_puts(struct out *o, const char *p) { o_putn(o, p, strlen(p)); }

static void o_putc(struct out *o, char c) { o_putn(o, &c, 1); }

static void o_u64(struct out *o, uint64_t v) {
  char tmp[24];
  size_t i = sizeof tmp;
  do {
    tmp[--i] = (char)('0' + (v % 10));
    v /= 10;
  } while (v);
  o_putn(o, tmp + i, sizeof tmp - i);
}

static void o_i64(struct out *o, int64_t v) {
  if (v < 0) {
    o_putc(o, '-');
    o_u64(o, (uint64_t)0 - (uint64_t)v);
  } else {
    o_u64(o, (uint64_t)v);
  }
}

static int is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z');
}

static void o_space_if_needed(struct out *o) {
  if (o->n == 0)
    return;
  if (is_alnum(o->last) || o->last == '>')
    o_putc(o, ' ');
}

/* ---- cursor ---------------------------------------------------------- */

static char peek(const struct dm *d) {
  return d->pos < d->len ? d->s[d->pos] : '\0';
}

static char peek_at(const struct dm *d, size_t i) {
  return d->pos + i < d->len && i < d->len ? d->s[d->pos + i] : '\0';
}

static int at_end(const struct dm *d) { return d->pos >= d->len; }

static int starts(const struct dm *d, const char *p) {
  size_t k = strlen(p);
  if (d->len - d->pos < k)
    return 0;
  return memcmp(d->s + d->pos, p, k) == 0;
}

static int consume(struct dm *d, const char *p) {
  if (!starts(d, p))
    return 0;
  d->pos += strlen(p);
  return 1;
}

static int consume_c(struct dm *d, char c) {
  if (d->pos < d->len && d->s[d->pos] == c) {
    d->pos++;
    return 1;
  }
  return 0;
}

static char pop(struct dm *d) {
  if (d->pos >= d->len) {
    d->err = 1;
    return '\0';
  }
  return d->s[d->pos++];
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static nref mk(struct dm *d, enum kind k) {
  if (d->nnodes >= UN_MAX_NODES) {
    d->err = 1;
    return 0;
  }
  nref r = (nref)d->nnodes++;
  memset(&d->nodes[r], 0, sizeof d->nodes[r]);
  d->nodes[r].kind = (uint8_t)k;
  return r;
}

#define N(r) (d->nodes[(r)])

/* string of a named node */
static const char *str_ptr(const struct dm *d, nref r, size_t *len) {
  const struct node *n = &d->nodes[r];
  if (n->flags & F_STR_STATIC) {
    *len = strlen(static_strs[n->x]);
    return static_strs[n->x];
  }
  *len = (size_t)n->v;
  if (n->flags & F_STR_ARENA)
    return d->arena + n->x;
  return d->s + n->x;
}

static nref mk_named_static(struct dm *d, unsigned which) {
  nref r = mk(d, K_ID_NAMED);
  if (r) {
    N(r).flags = F_STR_STATIC;
    N(r).x = which;
  }
  return r;
}

static nref mk_qname1(struct dm *d, nref id) {
  nref q = mk(d, K_QNAME), l = mk(d, K_LIST);
  if (!q || !l)
    return 0;
  N(l).a = id;
  N(q).a = l;
  return q;
}

static nref mk_int(struct dm *d, uint64_t v, int neg) {
  nref r = mk(d, K_INT);
  if (r) {
    N(r).v = v;
    N(r).flags = neg ? F_NEG : 0;
  }
  return r;
}

/* ---- printing -------------------------------------------------------- */

static void pr_node(struct dm *d, struct out *o, nref r);
static void pr_type_pre(struct dm *d, struct out *o, nref r);
static void pr_type_post(struct dm *d, struct out *o, nref r);
static void pr_sym(struct dm *d, struct out *o, nref r);

static int pr_step(struct out *o) {
  if (++o->steps > UN_MAX_STEPS || o->n > o->cap + 1) {
    o->overflow = 1;
    return 0;
  }
  return 1;
}

static void pr_quals(struct out *o, unsigned q, int space_before,
                     int space_after) {
  if (!q)
    return;
  size_t p1 = o->n;
  static const struct {
    unsigned q;
    const char *s;
  } tab[] = {{Q_CONST, "const"}, {Q_VOLATILE, "volatile"},
             {Q_RESTRICT, "__restrict"}};
  for (size_t i = 0; i < 3; i++) {
    if (!(q & tab[i].q))
      continue;
    if (space_before)
      o_putc(o, ' ');
    o_puts(o, tab[i].s);
    space_before = 1;
  }
  if (space_after && o->n > p1)
    o_putc(o, ' ');
}

static void pr_cc(struct out *o, unsigned cc) {
  o_space_if_needed(o);
  if (cc < sizeof cc_names / sizeof cc_names[0])
    o_puts(o, cc_names[cc]);
}

static void pr_list(struct dm *d, struct out *o, nref l, const char *sep) {
  int first = 1;
  for (; l && pr_step(o); l = N(l).b) {
    if (!first)
      o_puts(o, sep);
    first = 0;
    pr_node(d, o, N(l).a);
  }
}

static void pr_tparams(struct dm *d, struct out *o, nref r) {
  if (!N(r).d)
    return;
  o_putc(o, '<');
  pr_list(d, o, N(N(r).d).a, ", ");
  o_putc(o, '>');
}

static void pr_func_pre(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  unsigned fc = n->x;
  if (n->flags & F_THUNK)
    o_puts(o, "[thunk]: ");
  if (fc & FC_PUBLIC)
    o_puts(o, "public: ");
  if (fc & FC_PROTECTED)
    o_puts(o, "protected: ");
  if (fc & FC_PRIVATE)
    o_puts(o, "private: ");
  if (!(fc & FC_GLOBAL) && (fc & FC_STATIC))
    o_puts(o, "static ");
  if (fc & FC_VIRTUAL)
    o_puts(o, "virtual ");
  if (fc & FC_EXTERNC)
    o_puts(o, "extern \"C\" ");
  if (n->a) {
    pr_type_pre(d, o, n->a);
    o_putc(o, ' ');
  }
  if (!o->no_cc)
    pr_cc(o, n->sub);
}

static void pr_adjustor(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  if (n->flags & F_THUNK) {
    nref c = n->c; /* static, vbptr, vboffset, vtordisp */
    int64_t v[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4 && c; i++, c = N(c).a)
      v[i] = (N(c).flags & F_NEG) ? -(int64_t)N(c).v : (int64_t)N(c).v;
    if (n->x & FC_STHIS) {
      o_puts(o, "`adjustor{");
      o_u64(o, (uint32_t)v[0]);
      o_puts(o, "}'");
    } else if (n->x & FC_VTHIS) {
      if (n->x & FC_VTHISEX) {
        o_puts(o, "`vtordispex{");
        o_i64(o, (int32_t)v[1]);
        o_puts(o, ", ");
        o_i64(o, (int32_t)v[2]);
        o_puts(o, ", ");
        o_i64(o, (int32_t)v[3]);
        o_puts(o, ", ");
        o_u64(o, (uint32_t)v[0]);
        o_puts(o, "}'");
      } else {
        o_puts(o, "`vtordisp{");
        o_i64(o, (int32_t)v[3]);
        o_puts(o, ", ");
        o_u64(o, (uint32_t)v[0]);
        o_puts(o, "}'");
      }
    }
  }
}

static void pr_func_post(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  pr_adjustor(d, o, r);
  if (!(n->x & FC_NOPARAMS)) {
    o_putc(o, '(');
    if (n->b)
      pr_list(d, o, N(n->b).a, ", ");
    else
      o_puts(o, "void");
    if (n->flags & F_VARIADIC) {
      if (o->last != '(')
        o_puts(o, ", ");
      o_puts(o, "...");
    }
    o_putc(o, ')');
  }
  if (n->quals & Q_CONST)
    o_puts(o, " const");
  if (n->quals & Q_VOLATILE)
    o_puts(o, " volatile");
  if (n->quals & Q_RESTRICT)
    o_puts(o, " __restrict");
  if (n->quals & Q_UNALIGNED)
    o_puts(o, " __unaligned");
  if (n->flags & F_NOEXCEPT)
    o_puts(o, " noexcept");
  if (n->flags & F_REF_L)
    o_puts(o, " &");
  else if (n->flags & F_REF_R)
    o_puts(o, " &&");
  if (n->a)
    pr_type_post(d, o, n->a);
}

static void pr_type_pre_impl(struct dm *d, struct out *o, nref r);
static void pr_type_pre(struct dm *d, struct out *o, nref r) {
  if (!r || !pr_step(o) || o->depth >= UN_MAX_PRINT_DEPTH)
    return;
  o->depth++;
  pr_type_pre_impl(d, o, r);
  o->depth--;
}

static void pr_type_pre_impl(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  switch (n->kind) {
  case K_PRIM:
    o_puts(o, prim_names[n->sub]);
    pr_quals(o, n->quals, 1, 0);
    break;
  case K_FUNC:
    pr_func_pre(d, o, r);
    break;
  case K_PTR: {
    nref p = n->a;
    int pk = N(p).kind;
    if (pk == K_FUNC) {
      int saved = o->no_cc;
      o->no_cc = 1;
      pr_func_pre(d, o, p);
      o->no_cc = saved;
    } else
      pr_type_pre(d, o, p);
    o_space_if_needed(o);
    if (n->quals & Q_UNALIGNED)
      o_puts(o, "__unaligned ");
    if (pk == K_ARRAY) {
      o_putc(o, '(');
    } else if (pk == K_FUNC) {
      o_putc(o, '(');
      pr_cc(o, N(p).sub);
      o_putc(o, ' ');
    }
    if (n->b) {
      pr_node(d, o, n->b);
      o_puts(o, "::");
    }
    o_puts(o, n->sub == A_POINTER ? "*" : n->sub == A_REFERENCE ? "&" : "&&");
    pr_quals(o, n->quals, 0, 0);
    break;
  }
  case K_TAG:
    o_puts(o, n->sub == T_CLASS    ? "class "
              : n->sub == T_STRUCT ? "struct "
              : n->sub == T_UNION  ? "union "
                                   : "enum ");
    pr_node(d, o, n->a);
    pr_quals(o, n->quals, 1, 0);
    break;
  case K_ARRAY:
    pr_type_pre(d, o, n->b);
    pr_quals(o, n->quals, 1, 0);
    break;
  case K_CUSTOM:
    pr_node(d, o, n->a);
    break;
  default:
    break;
  }
}

static void pr_type_post_impl(struct dm *d, struct out *o, nref r);
static void pr_type_post(struct dm *d, struct out *o, nref r) {
  if (!r || !pr_step(o) || o->depth >= UN_MAX_PRINT_DEPTH)
    return;
  o->depth++;
  pr_type_post_impl(d, o, r);
  o->depth--;
}

static void pr_type_post_impl(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  switch (n->kind) {
  case K_FUNC:
    pr_func_post(d, o, r);
    break;
  case K_PTR: {
    int pk = N(n->a).kind;
    if (pk == K_ARRAY || pk == K_FUNC)
      o_putc(o, ')');
    pr_type_post(d, o, n->a);
    break;
  }
  case K_ARRAY: {
    o_putc(o, '[');
    int first = 1;
    for (nref l = N(n->a).a; l && pr_step(o); l = N(l).b) {
      if (!first)
        o_puts(o, "][");
      first = 0;
      if (N(N(l).a).v)
        pr_node(d, o, N(l).a);
    }
    o_putc(o, ']');
    pr_type_post(d, o, n->b);
    break;
  }
  default:
    break;
  }
}

static void pr_node_impl(struct dm *d, struct out *o, nref r);
static void pr_node(struct dm *d, struct out *o, nref r) {
  if (!r || !pr_step(o) || o->depth >= UN_MAX_PRINT_DEPTH)
    return;
  o->depth++;
  pr_node_impl(d, o, r);
  o->depth--;
}

static void pr_node_impl(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  switch (n->kind) {
  case K_LIST:
    pr_list(d, o, r, ", ");
    break;
  case K_INT:
    if (n->flags & F_NEG)
      o_putc(o, '-');
    o_u64(o, n->v);
    break;
  case K_PRIM:
  case K_FUNC:
  case K_PTR:
  case K_TAG:
  case K_ARRAY:
  case K_CUSTOM:
    pr_type_pre(d, o, r);
    pr_type_post(d, o, r);
    break;
  case K_QNAME:
    pr_list(d, o, n->a, "::");
    break;
  case K_ID_NAMED: {
    size_t k;
    const char *p = str_ptr(d, r, &k);
    o_putn(o, p, k);
    pr_tparams(d, o, r);
    break;
  }
  case K_ID_OP:
    o_puts(o, op_names[n->sub / 36][n->sub % 36]);
    pr_tparams(d, o, r);
    break;
  case K_ID_LITOP: {
    size_t k;
    const char *p = str_ptr(d, r, &k);
    o_puts(o, "operator \"\"");
    o_putn(o, p, k);
    pr_tparams(d, o, r);
    break;
  }
  case K_ID_LSG:
    o_puts(o, (n->flags & F_THREAD) ? "`local static thread guard'"
                                    : "`local static guard'");
    if (n->v) {
      o_putc(o, '{');
      o_u64(o, (uint32_t)n->v);
      o_putc(o, '}');
    }
    break;
  case K_ID_CONV:
    o_puts(o, "operator");
    pr_tparams(d, o, r);
    o_putc(o, ' ');
    pr_node(d, o, n->a);
    break;
  case K_ID_STRUCT:
    if (n->flags & F_DTOR)
      o_putc(o, '~');
    pr_node(d, o, n->a);
    pr_tparams(d, o, r);
    break;
  case K_ID_DYN:
    o_puts(o, (n->flags & F_DTOR) ? "`dynamic atexit destructor for "
                                  : "`dynamic initializer for ");
    if (n->a) {
      o_putc(o, '`');
      pr_sym(d, o, n->a);
      o_puts(o, "''");
    } else {
      o_putc(o, '\'');
      pr_node(d, o, n->b);
      o_puts(o, "''");
    }
    break;
  case K_ID_VCALL:
    o_puts(o, "`vcall'{");
    o_u64(o, n->v);
    o_puts(o, ", {flat}}");
    break;
  case K_ID_RTTIBCD: {
    nref c = n->a;
    uint64_t v[4] = {0, 0, 0, 0};
    int neg[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4 && c; i++, c = N(c).a) {
      v[i] = N(c).v;
      neg[i] = (N(c).flags & F_NEG) != 0;
    }
    o_puts(o, "`RTTI Base Class Descriptor at (");
    o_u64(o, (uint32_t)v[0]);
    o_puts(o, ", ");
    o_i64(o, (int32_t)(neg[1] ? -(int64_t)v[1] : (int64_t)v[1]));
    o_puts(o, ", ");
    o_u64(o, (uint32_t)v[2]);
    o_puts(o, ", ");
    o_u64(o, (uint32_t)v[3]);
    o_puts(o, ")'");
    break;
  }
  case K_TPREF: {
    if (n->x > 0)
      o_putc(o, '{');
    else if (n->sub == A_POINTER)
      o_putc(o, '&');
    if (n->a) {
      pr_sym(d, o, n->a);
      if (n->x > 0)
        o_puts(o, ", ");
    }
    int first = 1;
    for (nref c = n->b; c && pr_step(o); c = N(c).a) {
      if (!first)
        o_puts(o, ", ");
      first = 0;
      o_i64(o, (N(c).flags & F_NEG) ? -(int64_t)N(c).v : (int64_t)N(c).v);
    }
    if (n->x > 0)
      o_putc(o, '}');
    break;
  }
  default:
    pr_sym(d, o, r);
    break;
  }
}

static void out_escaped(struct out *o, unsigned c) {
  switch (c) {
  case 0: o_puts(o, "\\0"); return;
  case '\'': o_puts(o, "\\'"); return;
  case '"': o_puts(o, "\\\""); return;
  case '\\': o_puts(o, "\\\\"); return;
  case '\a': o_puts(o, "\\a"); return;
  case '\b': o_puts(o, "\\b"); return;
  case '\f': o_puts(o, "\\f"); return;
  case '\n': o_puts(o, "\\n"); return;
  case '\r': o_puts(o, "\\r"); return;
  case '\t': o_puts(o, "\\t"); return;
  case '\v': o_puts(o, "\\v"); return;
  default: break;
  }
  if (c > 0x1F && c < 0x7F) {
    o_putc(o, (char)c);
    return;
  }
  char tmp[17];
  int pos = 16;
  while (c != 0 && pos >= 4) {
    for (int i = 0; i < 2; i++) {
      unsigned dg = c % 16;
      tmp[--pos] = (char)(dg < 10 ? '0' + dg : 'A' + dg - 10);
      c /= 16;
    }
  }
  tmp[--pos] = 'x';
  tmp[--pos] = '\\';
  o_putn(o, tmp + pos, (size_t)(16 - pos));
}

static void pr_sym_impl(struct dm *d, struct out *o, nref r);
static void pr_sym(struct dm *d, struct out *o, nref r) {
  if (!r || !pr_step(o) || o->depth >= UN_MAX_PRINT_DEPTH)
    return;
  o->depth++;
  pr_sym_impl(d, o, r);
  o->depth--;
}

static void pr_sym_impl(struct dm *d, struct out *o, nref r) {
  const struct node *n = &N(r);
  switch (n->kind) {
  case K_SYM_FUNC:
    pr_type_pre(d, o, n->b);
    o_space_if_needed(o);
    pr_node(d, o, n->a);
    pr_type_post(d, o, n->b);
    break;
  case K_SYM_VAR: {
    static const char *const acc[] = {NULL, "private: ", "protected: ",
                                      "public: "};
    if (n->sub >= SC_PRIVATE && n->sub <= SC_PUBLIC) {
      o_puts(o, acc[n->sub]);
      o_puts(o, "static ");
    }
    if (n->b) {
      pr_type_pre(d, o, n->b);
      o_space_if_needed(o);
    }
    pr_node(d, o, n->a);
    if (n->b)
      pr_type_post(d, o, n->b);
    break;
  }
  case K_SYM_TABLE:
    pr_quals(o, n->quals, 0, 1);
    pr_node(d, o, n->a);
    if (n->b) {
      o_puts(o, "{for `");
      pr_node(d, o, n->b);
      o_puts(o, "'}");
    }
    break;
  case K_SYM_LSG:
  case K_SYM_MD5:
    pr_node(d, o, n->a);
    break;
  case K_SYM_STR: {
    static const char *const pre[] = {"\"", "u\"", "U\"", "L\""};
    size_t k;
    const char *p = str_ptr(d, r, &k);
    o_puts(o, pre[n->sub & 3]);
    o_putn(o, p, k);
    o_putc(o, '"');
    if (n->flags & F_TRUNC)
      o_puts(o, "...");
    break;
  }
  default:
    pr_node(d, o, r);
    break;
  }
}

/* ---- parsing --------------------------------------------------------- */

static nref p_parse(struct dm *d);
static nref p_type(struct dm *d, int qmm);
static nref p_fq_type_name(struct dm *d);
static nref p_scope_chain(struct dm *d, nref id);
static nref p_func_encoding(struct dm *d);
static nref p_declarator(struct dm *d);
static nref p_unqualified_symbol_name(struct dm *d, int nbb);
static nref p_unqualified_type_name(struct dm *d, int memorize);

enum { QMM_DROP, QMM_MANGLE, QMM_RESULT };
#define NBB_SIMPLE 1
#define NBB_TEMPLATE 2

static int enter(struct dm *d) {
  if (++d->depth > UN_MAX_DEPTH)
    d->err = 1;
  return !d->err;
}

static void leave(struct dm *d) { d->depth--; }

/* <number> ::= [?] ( [0-9] | [A-P]+ @ ) */
static uint64_t p_number(struct dm *d, int *neg) {
  *neg = consume_c(d, '?');
  if (is_digit(peek(d)))
    return (uint64_t)(pop(d) - '0') + 1;
  uint64_t v = 0;
  for (size_t i = d->pos; i < d->len; i++) {
    char c = d->s[i];
    if (c == '@') {
      d->pos = i + 1;
      return v;
    }
    if (c >= 'A' && c <= 'P') {
      v = (v << 4) + (uint64_t)(c - 'A');
      continue;
    }
    break;
  }
  d->err = 1;
  *neg = 0;
  return 0;
}

static uint64_t p_unsigned(struct dm *d) {
  int neg;
  uint64_t v = p_number(d, &neg);
  if (neg)
    d->err = 1;
  return v;
}

static nref p_signed_int(struct dm *d) {
  int neg;
  uint64_t v = p_number(d, &neg);
  if (v > (uint64_t)INT64_MAX)
    d->err = 1;
  return mk_int(d, v, neg && v != 0);
}

static int str_eq(struct dm *d, nref a, const char *p, size_t k) {
  size_t ka;
  const char *pa = str_ptr(d, a, &ka);
  return ka == k && memcmp(pa, p, k) == 0;
}

static void memorize_str(struct dm *d, const char *p, size_t k, int arena,
                         uint32_t off) {
  if (d->br.nnames >= 10)
    return;
  for (unsigned i = 0; i < d->br.nnames; i++)
    if (str_eq(d, d->br.names[i], p, k))
      return;
  nref r = mk(d, K_ID_NAMED);
  if (!r)
    return;
  N(r).x = off;
  N(r).v = k;
  N(r).flags = arena ? F_STR_ARENA : 0;
  d->br.names[d->br.nnames++] = r;
}

/* Renders a node into the arena; returns false when it does not fit. */
static int render_to_arena(struct dm *d, nref r, int sym, uint32_t *off,
                           size_t *len, const char *pre, const char *post,
                           uint64_t num) {
  struct out o;
  memset(&o, 0, sizeof o);
  o.buf = d->arena + d->arena_used;
  o.cap = UN_ARENA - d->arena_used;
  if (pre)
    o_puts(&o, pre);
  if (sym)
    pr_sym(d, &o, r);
  else
    pr_node(d, &o, r);
  if (post) {
    o_puts(&o, post);
    o_u64(&o, num);
    o_putc(&o, '\'');
  }
  if (o.overflow || o.n > o.cap) {
    d->err = 1;
    return 0;
  }
  *off = (uint32_t)d->arena_used;
  *len = o.n;
  d->arena_used += o.n;
  return 1;
}

static void memorize_identifier(struct dm *d, nref id) {
  uint32_t off;
  size_t k;
  if (d->err || !render_to_arena(d, id, 0, &off, &k, NULL, NULL, 0))
    return;
  size_t before = d->arena_used - k;
  memorize_str(d, d->arena + off, k, 1, off);
  (void)before;
}

/* the prefix before the next '@' (non-empty), consuming the '@' */
static int p_simple_string(struct dm *d, size_t *off, size_t *k,
                           int memorize) {
  for (size_t i = d->pos; i < d->len; i++) {
    if (d->s[i] != '@')
      continue;
    if (i == d->pos)
      break;
    *off = d->pos;
    *k = i - d->pos;
    d->pos = i + 1;
    if (memorize)
      memorize_str(d, d->s + *off, *k, 0, (uint32_t)*off);
    return 1;
  }
  d->err = 1;
  return 0;
}

static nref p_simple_name(struct dm *d, int memorize) {
  size_t off, k;
  if (!p_simple_string(d, &off, &k, memorize))
    return 0;
  nref r = mk(d, K_ID_NAMED);
  if (r) {
    N(r).x = (uint32_t)off;
    N(r).v = k;
  }
  return r;
}

static nref p_backref_name(struct dm *d) {
  unsigned i = (unsigned)(peek(d) - '0');
  if (i >= d->br.nnames) {
    d->err = 1;
    return 0;
  }
  d->pos++;
  return d->br.names[i];
}

static nref p_template_params(struct dm *d);

static nref p_template_instantiation(struct dm *d, int nbb) {
  d->pos += 2; /* ?$ */
  struct backrefs outer = d->br;
  memset(&d->br, 0, sizeof d->br);
  nref id = p_unqualified_symbol_name(d, NBB_SIMPLE);
  if (!d->err)
    N(id).d = p_template_params(d);
  d->br = outer;
  if (d->err)
    return 0;
  if (nbb & NBB_TEMPLATE) {
    if (N(id).kind == K_ID_CONV || N(id).kind == K_ID_STRUCT) {
      d->err = 1;
      return 0;
    }
    memorize_identifier(d, id);
  }
  return id;
}

static nref p_function_identifier_code(struct dm *d) {
  d->pos++; /* ? */
  int group = 0;
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  if (consume(d, "__"))
    group = 2;
  else if (consume_c(d, '_'))
    group = 1;
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  char c = pop(d);
  if (group == 0 && (c == '0' || c == '1')) {
    nref r = mk(d, K_ID_STRUCT);
    if (r)
      N(r).flags = c == '1' ? F_DTOR : 0;
    return r;
  }
  if (group == 0 && c == 'B')
    return mk(d, K_ID_CONV);
  if (group == 2 && c == 'K') {
    size_t off, k;
    nref r = mk(d, K_ID_LITOP);
    if (!p_simple_string(d, &off, &k, 0) || !r)
      return 0;
    N(r).x = (uint32_t)off;
    N(r).v = k;
    return r;
  }
  int idx;
  if (c >= '0' && c <= '9')
    idx = c - '0';
  else if (c >= 'A' && c <= 'Z')
    idx = c - 'A' + 10;
  else {
    d->err = 1;
    return 0;
  }
  nref r = mk(d, K_ID_OP);
  if (r) {
    const char *nm = op_names[group][idx];
    /* codes without a name print as nothing (as LLVM does) */
    N(r).sub = nm ? (uint8_t)(group * 36 + idx) : (uint8_t)(1 * 36 + 7);
  }
  return r;
}

static nref p_unqualified_type_name(struct dm *d, int memorize) {
  if (is_digit(peek(d)))
    return p_backref_name(d);
  if (starts(d, "?$"))
    return p_template_instantiation(d, NBB_TEMPLATE);
  return p_simple_name(d, memorize);
}

static nref p_unqualified_symbol_name(struct dm *d, int nbb) {
  if (is_digit(peek(d)))
    return p_backref_name(d);
  if (starts(d, "?$"))
    return p_template_instantiation(d, nbb);
  if (peek(d) == '?')
    return p_function_identifier_code(d);
  return p_simple_name(d, (nbb & NBB_SIMPLE) != 0);
}

static int starts_local_scope(const struct dm *d) {
  if (peek(d) != '?')
    return 0;
  size_t b = d->pos + 1, e = b;
  while (e < d->len && d->s[e] != '?')
    e++;
  if (e >= d->len || e == b)
    return 0;
  size_t k = e - b;
  const char *c = d->s + b;
  if (k == 1)
    return c[0] == '@' || is_digit(c[0]);
  if (c[k - 1] != '@')
    return 0;
  k--;
  if (c[0] < 'B' || c[0] > 'P')
    return 0;
  for (size_t i = 1; i < k; i++)
    if (c[i] < 'A' || c[i] > 'P')
      return 0;
  return 1;
}

static nref p_local_scope_piece(struct dm *d) {
  d->pos++; /* ? */
  int neg;
  uint64_t num = p_number(d, &neg);
  consume_c(d, '?');
  if (d->err)
    return 0;
  nref scope = p_parse(d);
  if (d->err)
    return 0;
  uint32_t off;
  size_t k;
  /* "`" scope "'::`" number "'" */
  if (!render_to_arena(d, scope, 1, &off, &k, "`", "'::`", num))
    return 0;
  nref r = mk(d, K_ID_NAMED);
  if (r) {
    N(r).x = off;
    N(r).v = k;
    N(r).flags = F_STR_ARENA;
  }
  return r;
}

static nref p_scope_piece(struct dm *d) {
  if (is_digit(peek(d)))
    return p_backref_name(d);
  if (starts(d, "?$"))
    return p_template_instantiation(d, NBB_TEMPLATE);
  if (starts(d, "?A")) {
    d->pos += 2;
    size_t e = d->pos;
    while (e < d->len && d->s[e] != '@')
      e++;
    if (e >= d->len) {
      d->err = 1;
      return 0;
    }
    memorize_str(d, d->s + d->pos, e - d->pos, 0, (uint32_t)d->pos);
    d->pos = e + 1;
    return mk_named_static(d, S_ANON);
  }
  if (starts_local_scope(d))
    return p_local_scope_piece(d);
  return p_simple_name(d, 1);
}

/* <scope-piece>* @, innermost first in the input; id is the leaf */
static nref p_scope_chain(struct dm *d, nref id) {
  if (!enter(d)) {
    leave(d);
    return 0;
  }
  nref head = mk(d, K_LIST);
  if (head)
    N(head).a = id;
  while (!d->err && !consume_c(d, '@')) {
    if (at_end(d)) {
      d->err = 1;
      break;
    }
    nref piece = p_scope_piece(d);
    nref cell = mk(d, K_LIST);
    if (d->err)
      break;
    N(cell).a = piece;
    N(cell).b = head;
    head = cell;
  }
  leave(d);
  if (d->err)
    return 0;
  nref q = mk(d, K_QNAME);
  if (q)
    N(q).a = head;
  return q;
}

static nref p_fq_type_name(struct dm *d) {
  nref id = p_unqualified_type_name(d, 1);
  if (d->err)
    return 0;
  return p_scope_chain(d, id);
}

static nref qname_last(struct dm *d, nref q) {
  nref l = N(q).a, last = 0;
  for (; l; l = N(l).b)
    last = N(l).a;
  return last;
}

static nref p_fq_symbol_name(struct dm *d) {
  nref id = p_unqualified_symbol_name(d, NBB_SIMPLE);
  if (d->err)
    return 0;
  nref q = p_scope_chain(d, id);
  if (d->err)
    return 0;
  if (N(id).kind == K_ID_STRUCT) {
    /* the class is the component before the leaf */
    nref l = N(q).a, prev = 0;
    size_t count = 0;
    for (; l; l = N(l).b) {
      count++;
      if (N(l).b && !N(N(l).b).b)
        prev = N(l).a;
    }
    if (count < 2) {
      d->err = 1;
      return 0;
    }
    N(id).a = prev;
  }
  return q;
}

static unsigned p_qualifiers(struct dm *d, int *member) {
  *member = 0;
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  switch (pop(d)) {
  case 'Q': *member = 1; return 0;
  case 'R': *member = 1; return Q_CONST;
  case 'S': *member = 1; return Q_VOLATILE;
  case 'T': *member = 1; return Q_CONST | Q_VOLATILE;
  case 'A': return 0;
  case 'B': return Q_CONST;
  case 'C': return Q_VOLATILE;
  case 'D': return Q_CONST | Q_VOLATILE;
  default: break;
  }
  d->err = 1;
  return 0;
}

static unsigned p_ptr_ext_quals(struct dm *d) {
  unsigned q = 0;
  if (consume_c(d, 'E'))
    q |= Q_PTR64;
  if (consume_c(d, 'I'))
    q |= Q_RESTRICT;
  if (consume_c(d, 'F'))
    q |= Q_UNALIGNED;
  return q;
}

static uint8_t p_calling_conv(struct dm *d) {
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  switch (pop(d)) {
  case 'A': case 'B': return 1;
  case 'C': case 'D': return 2;
  case 'E': case 'F': return 3;
  case 'G': case 'H': return 4;
  case 'I': case 'J': return 5;
  case 'M': case 'N': return 6;
  case 'O': case 'P': return 7;
  case 'Q': return 8;
  case 'S': return 10;
  case 'W': return 11;
  default: return 0;
  }
}

static nref p_params(struct dm *d, int *variadic) {
  if (consume_c(d, 'X'))
    return 0;
  nref head = 0, tail = 0;
  while (!d->err && peek(d) != '@' && peek(d) != 'Z') {
    nref t;
    if (is_digit(peek(d))) {
      unsigned i = (unsigned)(peek(d) - '0');
      if (i >= d->br.nparams) {
        d->err = 1;
        return 0;
      }
      d->pos++;
      t = d->br.params[i];
    } else {
      size_t before = d->pos;
      t = p_type(d, QMM_DROP);
      if (!t || d->err) {
        d->err = 1;
        return 0;
      }
      if (d->br.nparams <= 9 && d->pos - before > 1)
        d->br.params[d->br.nparams++] = t;
    }
    nref cell = mk(d, K_LIST);
    if (!cell)
      return 0;
    N(cell).a = t;
    if (tail)
      N(tail).b = cell;
    else
      head = cell;
    tail = cell;
  }
  if (d->err)
    return 0;
  nref arr = mk(d, K_LIST); /* holder: a = first cell (may be 0) */
  if (!arr)
    return 0;
  N(arr).a = head;
  if (consume_c(d, '@'))
    return arr;
  if (consume_c(d, 'Z')) {
    *variadic = 1;
    return arr;
  }
  d->err = 1;
  return 0;
}

static nref p_function_type(struct dm *d, int this_quals) {
  nref f = mk(d, K_FUNC);
  if (!f)
    return 0;
  N(f).x = FC_GLOBAL;
  if (this_quals) {
    unsigned q = p_ptr_ext_quals(d);
    if (consume_c(d, 'G'))
      N(f).flags |= F_REF_L;
    else if (consume_c(d, 'H'))
      N(f).flags |= F_REF_R;
    int member;
    q |= p_qualifiers(d, &member);
    N(f).quals = (uint8_t)q;
  }
  N(f).sub = p_calling_conv(d);
  if (d->err)
    return 0;
  if (!consume_c(d, '@'))
    N(f).a = p_type(d, QMM_RESULT);
  if (d->err)
    return 0;
  int variadic = 0;
  N(f).b = p_params(d, &variadic);
  if (variadic)
    N(f).flags |= F_VARIADIC;
  if (d->err)
    return 0;
  if (consume(d, "_E"))
    N(f).flags |= F_NOEXCEPT;
  else if (!consume_c(d, 'Z'))
    d->err = 1;
  return d->err ? 0 : f;
}

static int is_member_pointer(struct dm *d, int *bad) {
  *bad = 0;
  char f = peek(d);
  if (f == '$' || f == 'A')
    return 0;
  size_t i = 1;
  char c = peek_at(d, i);
  if (is_digit(c)) {
    if (c != '6' && c != '8') {
      *bad = 1;
      return 0;
    }
    return c == '8';
  }
  if (c == 'E')
    c = peek_at(d, ++i);
  if (c == 'I')
    c = peek_at(d, ++i);
  if (c == 'F')
    c = peek_at(d, ++i);
  if (d->pos + i >= d->len) {
    *bad = 1;
    return 0;
  }
  switch (c) {
  case 'A': case 'B': case 'C': case 'D': return 0;
  case 'Q': case 'R': case 'S': case 'T': return 1;
  default: *bad = 1; return 0;
  }
}

static void p_ptr_cv(struct dm *d, nref p) {
  if (consume(d, "$$Q")) {
    N(p).sub = A_RVALUE;
    return;
  }
  switch (pop(d)) {
  case 'A': N(p).sub = A_REFERENCE; break;
  case 'P': N(p).sub = A_POINTER; break;
  case 'Q': N(p).sub = A_POINTER; N(p).quals = Q_CONST; break;
  case 'R': N(p).sub = A_POINTER; N(p).quals = Q_VOLATILE; break;
  case 'S':
    N(p).sub = A_POINTER;
    N(p).quals = Q_CONST | Q_VOLATILE;
    break;
  default: d->err = 1; break;
  }
}

static nref p_pointer(struct dm *d) {
  nref p = mk(d, K_PTR);
  if (!p)
    return 0;
  p_ptr_cv(d, p);
  if (consume_c(d, '6')) {
    N(p).a = p_function_type(d, 0);
    return d->err ? 0 : p;
  }
  N(p).quals = (uint8_t)(N(p).quals | p_ptr_ext_quals(d));
  N(p).a = p_type(d, QMM_MANGLE);
  return d->err ? 0 : p;
}

static nref p_member_pointer(struct dm *d) {
  nref p = mk(d, K_PTR);
  if (!p)
    return 0;
  p_ptr_cv(d, p);
  N(p).quals = (uint8_t)(N(p).quals | p_ptr_ext_quals(d));
  if (consume_c(d, '8')) {
    N(p).b = p_fq_type_name(d);
    if (!d->err)
      N(p).a = p_function_type(d, 1);
  } else {
    int member;
    unsigned q = p_qualifiers(d, &member);
    if (!d->err)
      N(p).b = p_fq_type_name(d);
    if (!d->err)
      N(p).a = p_type(d, QMM_DROP);
    if (!d->err && N(p).a)
      N(N(p).a).quals = (uint8_t)q;
  }
  return d->err ? 0 : p;
}

static nref p_array(struct dm *d) {
  d->pos++; /* Y */
  int neg;
  uint64_t rank = p_number(d, &neg);
  if (d->err || neg || rank == 0) {
    d->err = 1;
    return 0;
  }
  nref a = mk(d, K_ARRAY), holder = mk(d, K_LIST), tail = 0;
  if (!a || !holder)
    return 0;
  for (uint64_t i = 0; i < rank; i++) {
    uint64_t v = p_number(d, &neg);
    if (d->err || neg) {
      d->err = 1;
      return 0;
    }
    nref cell = mk(d, K_LIST);
    nref iv = mk_int(d, v, 0);
    if (!cell || !iv)
      return 0;
    N(cell).a = iv;
    if (tail)
      N(tail).b = cell;
    else
      N(holder).a = cell;
    tail = cell;
  }
  N(a).a = holder;
  if (consume(d, "$$C")) {
    int member;
    N(a).quals = (uint8_t)p_qualifiers(d, &member);
    if (member) {
      d->err = 1;
      return 0;
    }
  }
  N(a).b = p_type(d, QMM_DROP);
  return d->err ? 0 : a;
}

static nref p_class_type(struct dm *d) {
  nref t = mk(d, K_TAG);
  if (!t)
    return 0;
  switch (pop(d)) {
  case 'T': N(t).sub = T_UNION; break;
  case 'U': N(t).sub = T_STRUCT; break;
  case 'V': N(t).sub = T_CLASS; break;
  default:
    if (!consume_c(d, '4')) {
      d->err = 1;
      return 0;
    }
    N(t).sub = T_ENUM;
    break;
  }
  N(t).a = p_fq_type_name(d);
  return d->err ? 0 : t;
}

static nref p_primitive(struct dm *d) {
  int k = -1;
  if (consume(d, "$$T")) {
    k = P_NULLPTR;
  } else {
    switch (pop(d)) {
    case 'X': k = P_VOID; break;
    case 'D': k = P_CHAR; break;
    case 'C': k = P_SCHAR; break;
    case 'E': k = P_UCHAR; break;
    case 'F': k = P_SHORT; break;
    case 'G': k = P_USHORT; break;
    case 'H': k = P_INT; break;
    case 'I': k = P_UINT; break;
    case 'J': k = P_LONG; break;
    case 'K': k = P_ULONG; break;
    case 'M': k = P_FLOAT; break;
    case 'N': k = P_DOUBLE; break;
    case 'O': k = P_LDOUBLE; break;
    case '_':
      if (at_end(d))
        break;
      switch (pop(d)) {
      case 'N': k = P_BOOL; break;
      case 'J': k = P_INT64; break;
      case 'K': k = P_UINT64; break;
      case 'W': k = P_WCHAR; break;
      case 'Q': k = P_CHAR8; break;
      case 'S': k = P_CHAR16; break;
      case 'U': k = P_CHAR32; break;
      default: break;
      }
      break;
    default: break;
    }
  }
  if (k < 0) {
    d->err = 1;
    return 0;
  }
  nref r = mk(d, K_PRIM);
  if (r)
    N(r).sub = (uint8_t)k;
  return r;
}

static nref p_type(struct dm *d, int qmm) {
  if (!enter(d)) {
    leave(d);
    return 0;
  }
  unsigned q = 0;
  int member = 0;
  nref t = 0;
  if (qmm == QMM_MANGLE)
    q = p_qualifiers(d, &member);
  else if (qmm == QMM_RESULT && consume_c(d, '?'))
    q = p_qualifiers(d, &member);
  if (d->err || at_end(d)) {
    d->err = 1;
    goto done;
  }
  char c = peek(d);
  if (c == 'T' || c == 'U' || c == 'V' || c == 'W') {
    t = p_class_type(d);
  } else if (starts(d, "$$Q") || c == 'A' || c == 'P' || c == 'Q' ||
             c == 'R' || c == 'S') {
    int bad;
    int mp = is_member_pointer(d, &bad);
    if (bad)
      d->err = 1;
    else
      t = mp ? p_member_pointer(d) : p_pointer(d);
  } else if (c == 'Y') {
    t = p_array(d);
  } else if (consume(d, "$$A8@@")) {
    t = p_function_type(d, 1);
  } else if (consume(d, "$$A6")) {
    t = p_function_type(d, 0);
  } else if (c == '?') {
    d->pos++;
    nref id = p_unqualified_type_name(d, 1);
    if (!consume_c(d, '@'))
      d->err = 1;
    if (!d->err) {
      t = mk(d, K_CUSTOM);
      if (t)
        N(t).a = id;
    }
  } else {
    t = p_primitive(d);
  }
  if (!d->err && t)
    N(t).quals = (uint8_t)(N(t).quals | q);
done:
  leave(d);
  return d->err ? 0 : t;
}

static nref p_template_params(struct dm *d) {
  if (!enter(d)) {
    leave(d);
    return 0;
  }
  nref holder = mk(d, K_LIST), tail = 0;
  while (!d->err && peek(d) != '@') {
    if (consume(d, "$S") || consume(d, "$$V") || consume(d, "$$$V") ||
        consume(d, "$$Z"))
      continue;
    nref tp = 0;
    if (consume(d, "$$Y")) {
      tp = p_fq_type_name(d);
    } else if (consume(d, "$$B")) {
      tp = p_type(d, QMM_DROP);
    } else if (consume(d, "$$C")) {
      tp = p_type(d, QMM_MANGLE);
    } else if (starts(d, "$1") || starts(d, "$H") || starts(d, "$I") ||
               starts(d, "$J")) {
      d->pos++;
      char inh = pop(d);
      nref ref = mk(d, K_TPREF);
      nref sym = 0;
      if (!ref)
        break;
      if (peek(d) == '?') {
        sym = p_parse(d);
        if (d->err || !N(sym).a) {
          d->err = 1;
          break;
        }
        memorize_identifier(d, qname_last(d, N(sym).a));
      }
      int count = inh == 'J' ? 3 : inh == 'I' ? 2 : inh == 'H' ? 1 : 0;
      nref last = 0;
      for (int i = 0; i < count && !d->err; i++) {
        nref iv = p_signed_int(d);
        if (last)
          N(last).a = iv;
        else
          N(ref).b = iv;
        last = iv;
      }
      N(ref).x = (uint32_t)count;
      N(ref).sub = A_POINTER;
      N(ref).a = sym;
      tp = ref;
    } else if (starts(d, "$E?")) {
      d->pos += 2;
      nref ref = mk(d, K_TPREF);
      if (!ref)
        break;
      N(ref).a = p_parse(d);
      N(ref).sub = A_REFERENCE;
      tp = ref;
    } else if (starts(d, "$F") || starts(d, "$G")) {
      d->pos++;
      char inh = pop(d);
      nref ref = mk(d, K_TPREF);
      if (!ref)
        break;
      int count = inh == 'G' ? 3 : 2;
      nref last = 0;
      for (int i = 0; i < count && !d->err; i++) {
        nref iv = p_signed_int(d);
        if (last)
          N(last).a = iv;
        else
          N(ref).b = iv;
        last = iv;
      }
      N(ref).x = (uint32_t)count;
      tp = ref;
    } else if (consume(d, "$0")) {
      int neg;
      uint64_t v = p_number(d, &neg);
      tp = mk_int(d, v, neg);
    } else {
      tp = p_type(d, QMM_DROP);
    }
    if (d->err)
      break;
    nref cell = mk(d, K_LIST);
    if (!cell)
      break;
    N(cell).a = tp;
    if (tail)
      N(tail).b = cell;
    else
      N(holder).a = cell;
    tail = cell;
  }
  leave(d);
  if (d->err || !consume_c(d, '@')) {
    d->err = 1;
    return 0;
  }
  return holder;
}

static nref p_variable_encoding(struct dm *d, uint8_t sc) {
  nref v = mk(d, K_SYM_VAR);
  if (!v)
    return 0;
  N(v).sub = sc;
  nref t = p_type(d, QMM_DROP);
  if (d->err)
    return 0;
  N(v).b = t;
  int member;
  if (N(t).kind == K_PTR) {
    N(t).quals = (uint8_t)(N(t).quals | p_ptr_ext_quals(d));
    unsigned extra = p_qualifiers(d, &member);
    if (N(t).b)
      (void)p_fq_type_name(d);
    if (N(t).a)
      N(N(t).a).quals = (uint8_t)(N(N(t).a).quals | extra);
  } else {
    N(t).quals = (uint8_t)p_qualifiers(d, &member);
  }
  return d->err ? 0 : v;
}

static unsigned p_function_class(struct dm *d) {
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  char f = pop(d);
  static const unsigned tab[26] = {
      FC_PRIVATE,
      FC_PRIVATE | FC_FAR,
      FC_PRIVATE | FC_STATIC,
      FC_PRIVATE | FC_STATIC | FC_FAR,
      FC_PRIVATE | FC_VIRTUAL,
      FC_PRIVATE | FC_VIRTUAL | FC_FAR,
      FC_PRIVATE | FC_STHIS,
      FC_PRIVATE | FC_STHIS | FC_FAR,
      FC_PROTECTED,
      FC_PROTECTED | FC_FAR,
      FC_PROTECTED | FC_STATIC,
      FC_PROTECTED | FC_STATIC | FC_FAR,
      FC_PROTECTED | FC_VIRTUAL,
      FC_PROTECTED | FC_VIRTUAL | FC_FAR,
      FC_PROTECTED | FC_VIRTUAL | FC_STHIS,
      FC_PROTECTED | FC_VIRTUAL | FC_STHIS | FC_FAR,
      FC_PUBLIC,
      FC_PUBLIC | FC_FAR,
      FC_PUBLIC | FC_STATIC,
      FC_PUBLIC | FC_STATIC | FC_FAR,
      FC_PUBLIC | FC_VIRTUAL,
      FC_PUBLIC | FC_VIRTUAL | FC_FAR,
      FC_PUBLIC | FC_VIRTUAL | FC_STHIS,
      FC_PUBLIC | FC_VIRTUAL | FC_STHIS | FC_FAR,
      FC_GLOBAL,
      FC_GLOBAL | FC_FAR,
  };
  if (f >= 'A' && f <= 'Z')
    return tab[f - 'A'];
  if (f == '9')
    return FC_EXTERNC | FC_NOPARAMS;
  if (f == '$') {
    unsigned vf = FC_VTHIS;
    if (consume_c(d, 'R'))
      vf |= FC_VTHISEX;
    if (!at_end(d)) {
      switch (pop(d)) {
      case '0': return FC_PRIVATE | FC_VIRTUAL | vf;
      case '1': return FC_PRIVATE | FC_VIRTUAL | vf | FC_FAR;
      case '2': return FC_PROTECTED | FC_VIRTUAL | vf;
      case '3': return FC_PROTECTED | FC_VIRTUAL | vf | FC_FAR;
      case '4': return FC_PUBLIC | FC_VIRTUAL | vf;
      case '5': return FC_PUBLIC | FC_VIRTUAL | vf | FC_FAR;
      default: break;
      }
    }
  }
  d->err = 1;
  return FC_PUBLIC;
}

static nref p_func_encoding(struct dm *d) {
  unsigned extra = 0;
  /* Markers before the function class: $$J0 extern "C"; $$F and $$H
   * C++/CLI managed functions, $$h ARM64EC.  The last three print nothing.
   * (llvm-undname 14 rejects them, or misreads them when a later pointer
   * type resets its error flag; we decode what follows instead.) */
  for (;;) {
    if (consume(d, "$$J0"))
      extra = FC_EXTERNC;
    else if (!consume(d, "$$F") && !consume(d, "$$H") && !consume(d, "$$h"))
      break;
  }
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  unsigned fc = p_function_class(d) | extra;
  nref adj = 0; /* chain: static, vbptr, vboffset, vtordisp */
  int thunk = 0;
  if (fc & FC_STHIS) {
    thunk = 1;
    adj = p_signed_int(d);
  } else if (fc & FC_VTHIS) {
    nref vbptr = 0, vboff = 0;
    thunk = 1;
    if (fc & FC_VTHISEX) {
      vbptr = p_signed_int(d);
      vboff = p_signed_int(d);
    }
    nref vtor = p_signed_int(d);
    adj = p_signed_int(d);
    if (!vbptr)
      vbptr = mk_int(d, 0, 0);
    if (!vboff)
      vboff = mk_int(d, 0, 0);
    if (adj && vbptr && vboff && vtor) {
      N(adj).a = vbptr;
      N(vbptr).a = vboff;
      N(vboff).a = vtor;
    }
  }
  nref f;
  if (fc & FC_NOPARAMS) {
    f = mk(d, K_FUNC);
  } else {
    f = p_function_type(d, !(fc & (FC_GLOBAL | FC_STATIC)));
  }
  if (d->err || !f)
    return 0;
  N(f).x = fc;
  if (thunk) {
    N(f).flags |= F_THUNK;
    N(f).c = adj;
  }
  nref s = mk(d, K_SYM_FUNC);
  if (s)
    N(s).b = f;
  return s;
}

static nref p_encoded_symbol(struct dm *d, nref qn) {
  if (at_end(d)) {
    d->err = 1;
    return 0;
  }
  char c = peek(d);
  if (c >= '0' && c <= '4') {
    d->pos++;
    static const uint8_t sc[5] = {SC_PRIVATE, SC_PROTECTED, SC_PUBLIC,
                                  SC_GLOBAL, SC_LOCAL};
    return p_variable_encoding(d, sc[c - '0']);
  }
  nref s = p_func_encoding(d);
  nref leaf = qname_last(d, qn);
  if (s && N(leaf).kind == K_ID_CONV)
    N(leaf).a = N(N(s).b).a;
  return s;
}

static nref p_declarator(struct dm *d) {
  nref qn = p_fq_symbol_name(d);
  if (d->err)
    return 0;
  nref s = p_encoded_symbol(d, qn);
  if (d->err || !s)
    return 0;
  N(s).a = qn;
  nref leaf = qname_last(d, qn);
  if (N(leaf).kind == K_ID_CONV && !N(leaf).a) {
    d->err = 1;
    return 0;
  }
  return s;
}

static nref p_special_table(struct dm *d, unsigned which) {
  nref id = mk_named_static(d, which);
  nref qn = p_scope_chain(d, id);
  nref s = mk(d, K_SYM_TABLE);
  if (d->err || !s)
    return 0;
  N(s).a = qn;
  char f = pop(d);
  if (d->err || (f != '6' && f != '7')) {
    d->err = 1;
    return 0;
  }
  int member;
  N(s).quals = (uint8_t)p_qualifiers(d, &member);
  if (!d->err && !consume_c(d, '@'))
    N(s).b = p_fq_type_name(d);
  return d->err ? 0 : s;
}

static nref p_local_static_guard(struct dm *d, int thread) {
  nref id = mk(d, K_ID_LSG);
  if (!id)
    return 0;
  N(id).flags = thread ? F_THREAD : 0;
  nref qn = p_scope_chain(d, id);
  nref s = mk(d, K_SYM_LSG);
  if (d->err || !s)
    return 0;
  N(s).a = qn;
  if (!consume(d, "4IA") && !consume_c(d, '5')) {
    d->err = 1;
    return 0;
  }
  if (!at_end(d))
    N(id).v = p_unsigned(d);
  return d->err ? 0 : s;
}

static nref p_string_literal(struct dm *d) {
  nref s = mk(d, K_SYM_STR);
  if (!s)
    return 0;
  if (!consume(d, "@_") || at_end(d))
    goto fail;
  char f = pop(d);
  int wide = f == '1';
  if (f != '0' && f != '1')
    goto fail;
  int neg;
  uint64_t size = p_number(d, &neg);
  if (d->err || neg || size < (wide ? 2u : 1u))
    goto fail;
  /* CRC up to '@' */
  {
    size_t e = d->pos;
    while (e < d->len && d->s[e] != '@')
      e++;
    if (e >= d->len)
      goto fail;
    d->pos = e + 1;
  }
  if (at_end(d))
    goto fail;
  struct out o;
  memset(&o, 0, sizeof o);
  o.buf = d->arena + d->arena_used;
  o.cap = UN_ARENA - d->arena_used;
  uint8_t bytes[128];
  unsigned nbytes = 0;
  int trunc = 0;
  if (wide) {
    N(s).sub = 3;
    if (size > 64)
      trunc = 1;
  }
  while (!consume_c(d, '@')) {
    if (at_end(d) || (wide && d->len - d->pos < 2) || (!wide && nbytes >= 128))
      goto fail;
    /* one char literal: plain byte, ?$XX, ?0-9, ?a-z, ?A-Z */
    unsigned ch[2];
    for (int half = 0; half < (wide ? 2 : 1); half++) {
      if (half && at_end(d))
        goto fail;
      char c = pop(d);
      if (c != '?') {
        ch[half] = (uint8_t)c;
        continue;
      }
      if (at_end(d))
        goto fail;
      c = pop(d);
      if (c == '$') {
        char h1 = peek(d), h2 = peek_at(d, 1);
        if (d->len - d->pos < 2 || h1 < 'A' || h1 > 'P' || h2 < 'A' ||
            h2 > 'P')
          goto fail;
        d->pos += 2;
        ch[half] = (unsigned)((h1 - 'A') << 4 | (h2 - 'A'));
      } else if (is_digit(c)) {
        static const char lk[] = ",/\\:. \n\t'-";
        ch[half] = (uint8_t)lk[c - '0'];
      } else if (c >= 'a' && c <= 'z') {
        ch[half] = 0xE1u + (unsigned)(c - 'a');
      } else if (c >= 'A' && c <= 'Z') {
        ch[half] = 0xC1u + (unsigned)(c - 'A');
      } else {
        goto fail;
      }
    }
    if (wide) {
      unsigned w = (ch[0] << 8) | ch[1];
      if (size != 2 || trunc)
        out_escaped(&o, w);
      size -= 2;
    } else {
      bytes[nbytes++] = (uint8_t)ch[0];
    }
  }
  if (!wide) {
    if (size > nbytes)
      trunc = 1;
    unsigned cb;
    if (size % 2 == 1) {
      cb = 1;
    } else if (size < 32) {
      unsigned tn = 0;
      for (unsigned i = nbytes; i > 0 && bytes[i - 1] == 0; i--)
        tn++;
      cb = (tn >= 4 && size % 4 == 0) ? 4 : tn >= 2 ? 2 : 1;
    } else {
      unsigned nulls = 0;
      for (unsigned i = 0; i < nbytes; i++)
        nulls += bytes[i] == 0;
      cb = (nulls >= 2 * nbytes / 3 && size % 4 == 0) ? 4
           : nulls >= nbytes / 3                       ? 2
                                                       : 1;
    }
    N(s).sub = cb == 1 ? 0 : cb == 2 ? 1 : 2;
    unsigned nchars = nbytes / cb;
    for (unsigned i = 0; i < nchars; i++) {
      unsigned v = 0;
      for (unsigned j = 0; j < cb; j++)
        v |= (unsigned)bytes[i * cb + j] << (8 * j);
      if (i + 1 < nchars || trunc)
        out_escaped(&o, v);
    }
  }
  if (o.overflow || o.n > o.cap)
    goto fail;
  N(s).x = (uint32_t)d->arena_used;
  N(s).v = o.n;
  N(s).flags = (uint8_t)(F_STR_ARENA | (trunc ? F_TRUNC : 0));
  d->arena_used += o.n;
  return s;
fail:
  d->err = 1;
  return 0;
}

static nref p_untyped_variable(struct dm *d, unsigned which) {
  nref id = mk_named_static(d, which);
  nref qn = p_scope_chain(d, id);
  nref v = mk(d, K_SYM_VAR);
  if (d->err || !v)
    return 0;
  N(v).a = qn;
  if (!consume_c(d, '8')) {
    d->err = 1;
    return 0;
  }
  return v;
}

static nref p_rtti_bcd(struct dm *d) {
  nref id = mk(d, K_ID_RTTIBCD);
  if (!id)
    return 0;
  nref a = mk_int(d, p_unsigned(d), 0);
  nref b = p_signed_int(d);
  nref c = mk_int(d, p_unsigned(d), 0);
  nref e = mk_int(d, p_unsigned(d), 0);
  if (d->err || !a || !b || !c || !e)
    return 0;
  N(id).a = a;
  N(a).a = b;
  N(b).a = c;
  N(c).a = e;
  nref v = mk(d, K_SYM_VAR);
  nref qn = p_scope_chain(d, id);
  if (d->err || !v)
    return 0;
  N(v).a = qn;
  consume_c(d, '8');
  return v;
}

static nref p_init_fini(struct dm *d, int dtor) {
  nref id = mk(d, K_ID_DYN);
  if (!id)
    return 0;
  N(id).flags = dtor ? F_DTOR : 0;
  int known_member = consume_c(d, '?');
  nref sym = p_declarator(d);
  if (d->err)
    return 0;
  nref fs;
  if (N(sym).kind == K_SYM_VAR) {
    N(id).a = sym;
    for (int i = 0; i < (known_member ? 2 : 1); i++)
      if (!consume_c(d, '@')) {
        d->err = 1;
        return 0;
      }
    fs = p_func_encoding(d);
    if (d->err || !fs)
      return 0;
  } else {
    if (known_member) {
      d->err = 1;
      return 0;
    }
    fs = sym;
    N(id).b = N(sym).a;
  }
  N(fs).a = mk_qname1(d, id);
  return d->err ? 0 : fs;
}

static nref p_vcall_thunk(struct dm *d) {
  nref id = mk(d, K_ID_VCALL);
  nref f = mk(d, K_FUNC);
  nref s = mk(d, K_SYM_FUNC);
  if (!id || !f || !s)
    return 0;
  N(f).x = FC_NOPARAMS;
  N(f).flags = F_THUNK;
  N(s).b = f;
  N(s).a = p_scope_chain(d, id);
  if (!d->err && !consume(d, "$B"))
    d->err = 1;
  if (!d->err)
    N(id).v = p_unsigned(d);
  if (!d->err && !consume_c(d, 'A'))
    d->err = 1;
  if (!d->err)
    N(f).sub = p_calling_conv(d);
  return d->err ? 0 : s;
}

static nref synth_type_var(struct dm *d, nref t, unsigned which) {
  nref v = mk(d, K_SYM_VAR);
  nref id = mk_named_static(d, which);
  nref qn = mk_qname1(d, id);
  if (!v || !qn)
    return 0;
  N(v).a = qn;
  N(v).b = t;
  N(v).flags = F_SYNTH;
  return v;
}

/* Returns 0 with no error when the name is no special intrinsic. */
static nref p_special_intrinsic(struct dm *d) {
  static const char *const codes[] = {
      "?_7", "?_8", "?_9", "?_A", "?_B", "?_C", "?_P", "?_R0", "?_R1",
      "?_R2", "?_R3", "?_R4", "?_S", "?__E", "?__F", "?__J"};
  int k = -1;
  if (peek(d) != '?' || peek_at(d, 1) != '_')
    return 0;
  for (int i = 0; i < 16; i++)
    if (consume(d, codes[i])) {
      k = i;
      break;
    }
  switch (k) {
  case -1: return 0;
  case 0: return p_special_table(d, S_VFTABLE);
  case 1: return p_special_table(d, S_VBTABLE);
  case 2: return p_vcall_thunk(d);
  case 4: return p_local_static_guard(d, 0);
  case 5: return p_string_literal(d);
  case 7: {
    nref t = p_type(d, QMM_RESULT);
    if (d->err || !consume(d, "@8") || !at_end(d))
      break;
    return synth_type_var(d, t, S_TD);
  }
  case 8: return p_rtti_bcd(d);
  case 9: return p_untyped_variable(d, S_BCA);
  case 10: return p_untyped_variable(d, S_CHD);
  case 11: return p_special_table(d, S_COL);
  case 12: return p_special_table(d, S_LOCALVFTABLE);
  case 13: return p_init_fini(d, 0);
  case 14: return p_init_fini(d, 1);
  case 15: return p_local_static_guard(d, 1);
  default: break;
  }
  d->err = 1;
  return 0;
}

static nref p_parse(struct dm *d) {
  if (!enter(d)) {
    leave(d);
    return 0;
  }
  nref r = 0;
  if (peek(d) == '.') {
    d->pos++;
    nref t = p_type(d, QMM_RESULT);
    if (d->err || !at_end(d))
      d->err = 1;
    else
      r = synth_type_var(d, t, S_TDNAME);
  } else if (starts(d, "??@")) {
    size_t start = d->pos, e = d->pos + 3;
    while (e < d->len && d->s[e] != '@')
      e++;
    if (e >= d->len) {
      d->err = 1;
    } else {
      d->pos = e + 1;
      consume(d, "??_R4@");
      nref id = mk(d, K_ID_NAMED);
      r = mk(d, K_SYM_MD5);
      if (id && r) {
        N(id).x = (uint32_t)start;
        N(id).v = d->pos - start;
        N(r).a = mk_qname1(d, id);
      }
    }
  } else if (!consume_c(d, '?')) {
    d->err = 1;
  } else {
    r = p_special_intrinsic(d);
    if (!r && !d->err)
      r = p_declarator(d);
  }
  leave(d);
  return d->err ? 0 : r;
}

/* ---- entry points ---------------------------------------------------- */

static bool copy_through(const char *mangled, size_t len, char *out,
                         size_t cap) {
  if (!cap)
    return false;
  size_t n = len < cap - 1 ? len : cap - 1;
  if (n)
    memcpy(out, mangled, n);
  out[n] = '\0';
  return false;
}

static void finish(struct out *o) {
  size_t n = o->n < o->cap ? o->n : o->cap;
  o->buf[n] = '\0';
}

/* Strips x86 C decorations: "_name@N" (stdcall), "@name@N" (fastcall), and
 * the "#" of ARM64EC C entry points ("#name"). */
static bool undecorate_c(const char *m, size_t len, char *out, size_t cap) {
  if (len >= 2 && m[0] == '#') {
    for (size_t i = 1; i < len; i++)
      if (m[i] == '?' || m[i] == '@' || m[i] == '#')
        return false;
    copy_through(m + 1, len - 1, out, cap);
    return true;
  }
  if (len < 4 || (m[0] != '_' && m[0] != '@'))
    return false;
  size_t at = len;
  while (at > 1 && is_digit(m[at - 1]))
    at--;
  if (at == len || at < 3 || m[at - 1] != '@')
    return false;
  size_t k = at - 2; /* between the prefix and the '@' */
  for (size_t i = 1; i < at - 1; i++)
    if (m[i] == '@' || m[i] == '?')
      return false;
  if (!cap)
    return true;
  if (k > cap - 1)
    k = cap - 1;
  memcpy(out, m + 1, k);
  out[k] = '\0';
  return true;
}

enum { MODE_FULL, MODE_SHORT };

static bool undname(const char *mangled, size_t len, char *out, size_t cap,
                    int mode) {
  if (!mangled || !out || !cap)
    return false;
  if (len > 0xFFFFFFu || len == 0 ||
      (mangled[0] != '?' && mangled[0] != '.')) {
    if (mode == MODE_SHORT && mangled && undecorate_c(mangled, len, out, cap))
      return true;
    return copy_through(mangled, len, out, cap);
  }
  struct dm d;
  d.s = mangled;
  d.pos = 0;
  d.len = len;
  d.err = 0;
  d.depth = 0;
  memset(&d.br, 0, sizeof d.br);
  d.nnodes = 1; /* 0 = none */
  d.arena_used = 0;
  memset(&d.nodes[0], 0, sizeof d.nodes[0]);
  nref sym = p_parse(&d);
  if (d.err || !sym) {
    /* The short form needs only the name: when the encoding after it is
     * beyond us (C++/CLI handles and appdomain variables, for instance),
     * the qualified name at the front may still parse. */
    if (mode != MODE_SHORT || mangled[0] != '?' ||
        (len > 2 && mangled[1] == '?' && (mangled[2] == '_' || mangled[2] == '@')))
      return copy_through(mangled, len, out, cap);
    d.pos = 1;
    d.err = 0;
    d.depth = 0;
    memset(&d.br, 0, sizeof d.br);
    d.nnodes = 1;
    d.arena_used = 0;
    nref qn = p_fq_symbol_name(&d);
    if (d.err || !qn || at_end(&d))
      return copy_through(mangled, len, out, cap);
    struct out o;
    memset(&o, 0, sizeof o);
    o.buf = out;
    o.cap = cap - 1;
    pr_node(&d, &o, qn);
    finish(&o);
    return true;
  }

  struct out o;
  memset(&o, 0, sizeof o);
  o.buf = out;
  o.cap = cap - 1;
  const struct node *n = &d.nodes[sym];
  if (mode == MODE_FULL) {
    pr_sym(&d, &o, sym);
  } else if (n->kind == K_SYM_STR) {
    o_puts(&o, "`string'");
  } else if (n->kind == K_SYM_VAR && (n->flags & F_SYNTH)) {
    pr_sym(&d, &o, sym);
  } else if (n->kind == K_SYM_TABLE) {
    pr_node(&d, &o, n->a);
    if (n->b) {
      o_puts(&o, "{for `");
      pr_node(&d, &o, n->b);
      o_puts(&o, "'}");
    }
  } else {
    pr_node(&d, &o, n->a);
    if (n->kind == K_SYM_FUNC)
      pr_adjustor(&d, &o, n->b);
  }
  finish(&o);
  return true;
}

bool undname_short(const char *mangled, size_t len, char *out, size_t cap) {
  return undname(mangled, len, out, cap, MODE_SHORT);
}

bool undname_full(const char *mangled, size_t len, char *out, size_t cap) {
  return undname(mangled, len, out, cap, MODE_FULL);
}

bool undname_public(const char *mangled, size_t len, bool x86, char *out, size_t cap) {
  if (!mangled || !out || !cap)
    return false;
  if (undname(mangled, len, out, cap, MODE_SHORT))
    return true;
  /* x86 cdecl: the C compiler prefixes every external name with '_' */
  if (x86 && len >= 2 && mangled[0] == '_') {
    copy_through(mangled + 1, len - 1, out, cap);
    return true;
  }
  return false;
}
