/*
 * oracles.h - where the tests find the outside tools they use as oracles.
 *
 * LLVM's tools are LLVM 19's (Debian 12 package llvm-19, installed by
 * scripts/deps.sh --test), from PDBSYM_LLVM_BIN (CMake sets it for ctest;
 * default /usr/lib/llvm-19/bin), never llvm-* from PATH: on Debian 12 those
 * are LLVM 14's, whose llvm-symbolizer misreads inline-site lines past a
 * site's first range.  A missing tool is a skip (tests/unit/test.h), which
 * fails under CI=true.  Test code only.
 */
#ifndef PDBSYM_TEST_ORACLES_H
#define PDBSYM_TEST_ORACLES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline const char *llvm_bin(void) {
  const char *d = getenv("PDBSYM_LLVM_BIN");
  return d && *d ? d : "/usr/lib/llvm-19/bin";
}

/* "<llvm bin>/TOOL" into out; true when it is there and executable */
static inline bool llvm_tool(const char *tool, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", llvm_bin(), tool);
  return n > 0 && (size_t)n < cap && access(out, X_OK) == 0;
}

#endif
