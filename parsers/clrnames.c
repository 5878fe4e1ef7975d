/*
 * clrnames.c - see clrnames.h.  The name shapes are those of Roslyn's
 * GeneratedNames.MakeLambdaMethodName ("<M>b__"), MakeLocalFunctionName
 * ("<M>g__Name|"), MakeStateMachineTypeName ("<M>d__N", "<M>d" for lambdas
 * and local functions), MakeLambdaDisplayClassName ("<>c__DisplayClass") and
 * MakeCachedFrameInstanceName's class ("<>c"); the native C# compiler used the
 * same ones for lambdas, display classes and iterators.  Of Visual Basic's
 * names only the state machines' carry the method ("VB$StateMachine_1_Foo").
 */
#include "clrnames.h"

#include <string.h>

#define CN_MAX_NESTING 4 /* <<<M>b__0>d...: deeper nesting is not a C# shape */

static bool starts(cn_span s, const char *prefix) {
  size_t n = strlen(prefix);
  return s.n >= n && memcmp(s.p, prefix, n) == 0;
}

/* "<X>rest" -> X and rest, with X's own angle brackets balanced; false when s
 * does not start with '<' or the bracket never closes. */
static bool split_generated(cn_span s, cn_span *inner, cn_span *rest) {
  if (s.n < 2 || s.p[0] != '<')
    return false;
  size_t depth = 0;
  for (size_t i = 0; i < s.n; i++) {
    if (s.p[i] == '<') {
      depth++;
    } else if (s.p[i] == '>') {
      if (--depth == 0) {
        inner->p = s.p + 1;
        inner->n = i - 1;
        rest->p = s.p + i + 1;
        rest->n = s.n - i - 1;
        return true;
      }
    }
  }
  return false;
}

/* A lambda or local function name: fills user (and local); the user's name
 * is itself never generated in C#, but a nested shape is followed a few
 * levels to be safe. */
static cn_kind method_kind(cn_span name, cn_span *user, cn_span *local, int level) {
  cn_span inner, rest;
  if (level > CN_MAX_NESTING || !split_generated(name, &inner, &rest) || inner.n == 0)
    return CN_NONE;
  cn_kind k;
  if (starts(rest, "b__")) {
    k = CN_LAMBDA;
    local->n = 0;
  } else if (starts(rest, "g__")) {
    const char *bar = memchr(rest.p + 3, '|', rest.n - 3);
    if (!bar || bar == rest.p + 3)
      return CN_NONE;
    local->p = rest.p + 3;
    local->n = (size_t)(bar - local->p);
    k = CN_LOCAL_FUNCTION;
  } else {
    return CN_NONE;
  }
  if (inner.p[0] == '<') {
    cn_span deeper_local = {NULL, 0};
    if (method_kind(inner, user, &deeper_local, level + 1) == CN_NONE)
      return CN_NONE;
    return k;
  }
  *user = inner;
  return k;
}

typedef enum { T_USER, T_CLOSURE, T_STATE_MACHINE, T_OTHER } type_kind;

/* Visual Basic's state machines (Roslyn's VB GeneratedNames): "VB$StateMachine_"
 * method ordinal '_' method name */
static bool vb_state_machine(cn_span name, cn_span *inner) {
  static const char prefix[] = "VB$StateMachine_";
  size_t n = sizeof prefix - 1, i = n;
  if (name.n <= n || memcmp(name.p, prefix, n) != 0)
    return false;
  while (i < name.n && name.p[i] >= '0' && name.p[i] <= '9')
    i++;
  if (i == n || i + 1 >= name.n || name.p[i] != '_')
    return false;
  inner->p = name.p + i + 1;
  inner->n = name.n - i - 1;
  return true;
}

static type_kind classify_type(cn_span name, cn_span *inner) {
  cn_span rest;
  if (vb_state_machine(name, inner))
    return T_STATE_MACHINE;
  if (!split_generated(name, inner, &rest))
    return name.n && name.p[0] == '<' ? T_OTHER : T_USER;
  if (inner->n == 0 && rest.n >= 1 && rest.p[0] == 'c')
    return T_CLOSURE; /* <>c, <>c__DisplayClass10_0, <>c__10`1 */
  if (inner->n > 0 && (starts(rest, "d__") || (rest.n >= 1 && rest.p[0] == 'd' &&
                                               (rest.n == 1 || rest.p[1] == '`'))))
    return T_STATE_MACHINE; /* <M>d__3, <M>d__3`1, <<M>b__4>d */
  return T_OTHER;
}

bool cn_classify(const cn_span *types, size_t ntypes, cn_span method, cn_user *out) {
  memset(out, 0, sizeof *out);
  size_t k = ntypes;
  cn_span sm = {NULL, 0}; /* the state machine's method name, if any */
  while (k > 0) {
    cn_span inner;
    type_kind tk = classify_type(types[k - 1], &inner);
    if (tk == T_USER)
      break;
    if (tk == T_OTHER)
      return false;
    if (tk == T_STATE_MACHINE) {
      if (sm.p) /* a state machine inside a state machine: not a C# shape */
        return false;
      sm = inner;
    }
    k--;
  }
  if (k == 0)
    return false;
  cn_span user = {NULL, 0}, local = {NULL, 0};
  cn_kind kind;
  if (sm.p) {
    kind = CN_STATE_MACHINE;
    if (sm.p[0] == '<') {
      if (method_kind(sm, &user, &local, 1) == CN_NONE)
        return false;
    } else {
      user = sm;
    }
  } else {
    kind = method_kind(method, &user, &local, 1);
    if (kind == CN_NONE)
      return false;
  }
  out->kind = kind;
  out->keep = k;
  out->user = user;
  out->local = local;
  return true;
}

size_t cn_split_dotted(const char *s, size_t n, cn_span *parts, size_t max) {
  if (max == 0)
    return 0;
  size_t np = 0, start = 0, depth = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '<') {
      depth++;
    } else if (s[i] == '>') {
      if (depth)
        depth--;
    } else if (s[i] == '.' && depth == 0 && i > start && np + 1 < max) {
      parts[np].p = s + start;
      parts[np].n = i - start;
      np++;
      start = i + 1;
    }
  }
  parts[np].p = s + start;
  parts[np].n = n - start;
  return np + 1;
}
