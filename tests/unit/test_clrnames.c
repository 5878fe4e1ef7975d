/*
 * test_clrnames.c - cn_classify on the name shapes of Roslyn's GeneratedNames
 * (and the native C# compiler's), on names that only look generated, and on
 * hostile ones (unbalanced brackets, deep nesting, empty parts).  The real
 * compiler's output is checked against Roslyn's own data in
 * test_managed_generated.c; this file pins the shapes one by one.
 */
#include "clrnames.h"
#include "test.h"

static cn_span S(const char *s) {
  cn_span x = {s, strlen(s)};
  return x;
}

/* types: "A/B/C" (outermost first); kind 0 for user code */
static void expect(const char *types, const char *method, int kind, size_t keep,
                   const char *user, const char *local) {
  cn_span segs[16];
  size_t n = 0;
  const char *p = types;
  while (*p && n < 16) {
    const char *bar = strchr(p, '/');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    segs[n].p = p;
    segs[n].n = len;
    n++;
    p += len + (bar ? 1 : 0);
    if (!bar)
      break;
  }
  cn_user u;
  bool got = cn_classify(segs, n, S(method), &u);
  if (!kind) {
    if (got) {
      t_failed_checks++;
      fprintf(stderr, "  %s / %s: classified as %d, want user code\n", types, method, u.kind);
    }
    CHECK_EQ_U(u.kind, CN_NONE);
    return;
  }
  CHECK(got);
  if (!got) {
    fprintf(stderr, "  %s / %s: not classified\n", types, method);
    return;
  }
  char ub[256], lb[256];
  snprintf(ub, sizeof ub, "%.*s", (int)u.user.n, u.user.p);
  snprintf(lb, sizeof lb, "%.*s", (int)u.local.n, u.local.p ? u.local.p : "");
  CHECK_EQ_U(u.kind, kind);
  CHECK_EQ_U(u.keep, keep);
  CHECK_EQ_S(ub, user);
  CHECK_EQ_S(lb, local ? local : "");
}

TEST(lambdas_and_local_functions) {
  expect("Ns.Closures/<>c__DisplayClass10_0", "<Run>b__0", CN_LAMBDA, 1, "Run", NULL);
  expect("Ns.Closures/<>c", "<Run>b__10_1", CN_LAMBDA, 1, "Run", NULL);
  expect("Ns.Closures", "<Run>b__10_1", CN_LAMBDA, 1, "Run", NULL); /* this-only closure */
  expect("Ns.Closures", "<Run>g__Clamp|10_3", CN_LOCAL_FUNCTION, 1, "Run", "Clamp");
  expect("Ns.Closures/<>c__DisplayClass10_0", "<Run>g__Scale|2", CN_LOCAL_FUNCTION, 1, "Run",
         "Scale");
  expect("Ns.P/<>c__DisplayClass6_0`1", "<Best>b__0", CN_LAMBDA, 1, "Best", NULL);
  expect("Ns.P/<>c", "<.cctor>b__11_0", CN_LAMBDA, 1, ".cctor", NULL);
  expect("Ns.P/<>c", "<get_Later>b__8_0", CN_LAMBDA, 1, "get_Later", NULL);
  expect("Ns.Outer`1/Inner/<>c__DisplayClass2_0", "<M>b__0", CN_LAMBDA, 2, "M", NULL);
  expect("Ns.C/<>c__DisplayClass1", "<Main>b__0", CN_LAMBDA, 1, "Main", NULL); /* native csc */
  expect("Ns.C/<>c__10`1", "<M>b__10_0", CN_LAMBDA, 1, "M", NULL);
}

TEST(state_machines) {
  expect("Ns.Program/<SumAsync>d__3", "MoveNext", CN_STATE_MACHINE, 1, "SumAsync", NULL);
  expect("Ns.Program/<Countdown>d__5", "System.IDisposable.Dispose", CN_STATE_MACHINE, 1,
         "Countdown", NULL);
  expect("Ns.R`1/Slot/Entry/<Project>d__3`1", "MoveNext", CN_STATE_MACHINE, 3, "Project", NULL);
  expect("Ns.Closures/<>c__DisplayClass10_0/<<Run>b__4>d", "MoveNext", CN_STATE_MACHINE, 1, "Run",
         NULL);
  expect("Ns.P/<>c__DisplayClass3_0/<<Locals>g__LaterAsync|0>d", "MoveNext", CN_STATE_MACHINE, 1,
         "Locals", "LaterAsync");
  expect("Ns.P/<Scaled>d__4", "<>m__Finally1", CN_STATE_MACHINE, 1, "Scaled", NULL);
  expect("Ns.P/<Fire>d__5", ".ctor", CN_STATE_MACHINE, 1, "Fire", NULL);
  expect("N3.G/VB$StateMachine_2_It2", "MoveNext", CN_STATE_MACHINE, 1, "It2", NULL);
  expect("N3.G/VB$StateMachine_12_My_Method", "Dispose", CN_STATE_MACHINE, 1, "My_Method", NULL);
}

TEST(user_code_and_other_generated_names) {
  expect("Ns.Program", "Main", 0, 0, NULL, NULL);
  expect("Ns.Program", ".ctor", 0, 0, NULL, NULL);
  expect("Ns.Closures/<>c__DisplayClass10_0", ".ctor", 0, 0, NULL, NULL);
  expect("Ns.Closures/<>c", ".cctor", 0, 0, NULL, NULL);
  expect("<>f__AnonymousType0`2", "ToString", 0, 0, NULL, NULL);
  expect("<PrivateImplementationDetails>", "ComputeStringHash", 0, 0, NULL, NULL);
  expect("<Module>", ".cctor", 0, 0, NULL, NULL);
  expect("Ns.C/<>o__0", "M", 0, 0, NULL, NULL);          /* dynamic call sites */
  expect("Ns.C", "<M>k__BackingField", 0, 0, NULL, NULL); /* not a method shape */
  expect("Ns.C", "<>b__0", 0, 0, NULL, NULL);             /* no user name */
  expect("Ns.C", "<M>g__|0_0", 0, 0, NULL, NULL);         /* empty local function name */
  expect("Ns.C", "<M>g__Local", 0, 0, NULL, NULL);        /* no '|' */
}

TEST(hostile_names) {
  expect("Ns.C", "<", 0, 0, NULL, NULL);
  expect("Ns.C", "<<<<M>b__0", 0, 0, NULL, NULL);
  expect("Ns.C", "<M>>b__0", 0, 0, NULL, NULL);
  expect("Ns.C", "", 0, 0, NULL, NULL);
  expect("Ns.C/VB$StateMachine_", "MoveNext", 0, 0, NULL, NULL);
  expect("Ns.C/VB$StateMachine_1_", "MoveNext", 0, 0, NULL, NULL);
  expect("Ns.C/VB$StateMachine_x_Foo", "MoveNext", 0, 0, NULL, NULL);
  expect("<<M>b__0>d", "MoveNext", 0, 0, NULL, NULL); /* no user type left */
  expect("Ns.C/<M>d__1/<N>d__2", "MoveNext", 0, 0, NULL, NULL);
  expect("Ns.C/<<<<<<M>b__0>b__0>b__0>b__0>b__0>d", "MoveNext", 0, 0, NULL, NULL);
  cn_user u;
  CHECK(!cn_classify(NULL, 0, S("<M>b__0"), &u));
}

TEST(dotted_module_names) {
  const char *m = "Pdbsym.Fixtures.Closures.<>c__DisplayClass10_0.<<Run>b__4>d";
  cn_span parts[8];
  size_t n = cn_split_dotted(m, strlen(m), parts, 8);
  CHECK_EQ_U(n, 5);
  char last[64];
  snprintf(last, sizeof last, "%.*s", (int)parts[4].n, parts[4].p);
  CHECK_EQ_S(last, "<<Run>b__4>d");
  const char *g = "A.<System.Collections.IEnumerable.GetEnumerator>b__0";
  n = cn_split_dotted(g, strlen(g), parts, 8);
  CHECK_EQ_U(n, 2);
  n = cn_split_dotted("a.b.c.d", 7, parts, 2); /* the last part takes the rest */
  CHECK_EQ_U(n, 2);
  CHECK_EQ_U(parts[1].n, 5);
  CHECK_EQ_U(cn_split_dotted("x", 1, parts, 0), 0);
}

int main(void) {
  RUN(lambdas_and_local_functions);
  RUN(state_machines);
  RUN(user_code_and_other_generated_names);
  RUN(hostile_names);
  RUN(dotted_module_names);
  return test_summary();
}
