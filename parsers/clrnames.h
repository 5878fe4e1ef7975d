/*
 * clrnames.h - the source-level method behind C#'s compiler-generated code.
 *
 * The C# compiler (Roslyn, and the native compiler before it) moves lambdas,
 * local functions and the bodies of async and iterator methods into methods
 * and types it names itself.  The names follow one scheme (Roslyn's
 * GeneratedNames / GeneratedNameKind), which keeps the name of the method
 * the user wrote between angle brackets:
 *
 *   <Run>b__10_0            lambda written in Run                      (method)
 *   <Run>g__Scale|10_1      local function Scale written in Run        (method)
 *   <SumAsync>d__3          state machine of SumAsync                  (type)
 *   <<Run>b__4>d            state machine of a lambda written in Run   (type)
 *   <>c, <>c__DisplayClass10_0   closure classes holding lambdas       (type)
 *   VB$StateMachine_1_Foo   Visual Basic's state machine of Foo        (type)
 *
 * cn_classify takes the names of a method's declaring type and of its
 * enclosing types (outermost first) and the method's own name, and says which
 * of these it is, which leading types name the user's type, and the user's
 * method (and local function) name.  Pure string work on borrowed bytes: no
 * allocation, no I/O.  Names of other generated things (anonymous types,
 * <PrivateImplementationDetails>, the closure classes' own constructors) are
 * CN_NONE.
 */
#ifndef PDBSYM_CLRNAMES_H
#define PDBSYM_CLRNAMES_H

#include <stdbool.h>
#include <stddef.h>

/* What compiler-generated code a method is (stored in st_method.gen). */
typedef enum {
  CN_NONE = 0,
  CN_LAMBDA = 1,         /* a lambda or anonymous method */
  CN_LOCAL_FUNCTION = 2, /* a local function */
  CN_STATE_MACHINE = 3,  /* a method of an async or iterator state machine (MoveNext...) */
} cn_kind;

typedef struct {
  const char *p; /* borrowed, not NUL-terminated */
  size_t n;
} cn_span;

typedef struct {
  cn_kind kind;
  size_t keep;   /* the first `keep` type names name the type the user's method is in */
  cn_span user;  /* the user's method's own name ("Run", ".ctor") */
  cn_span local; /* the local function's name, n == 0 if none */
} cn_user;

/* Classifies a method; types[0..ntypes) are its declaring type's chain,
 * outermost first (the outermost may carry its namespace).  Returns false
 * (out->kind CN_NONE) for user-written methods and unknown generated names. */
bool cn_classify(const cn_span *types, size_t ntypes, cn_span method, cn_user *out);

/* Splits a dotted type name as Windows PDBs name their managed modules
 * ("Ns.Outer.<Run>b__4>d", nested types joined with '.') at the dots outside
 * angle brackets; returns the number of parts (at most max; the last part
 * takes the rest). */
size_t cn_split_dotted(const char *s, size_t n, cn_span *parts, size_t max);

#endif
