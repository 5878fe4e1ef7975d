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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* ---- llvm-symbolizer's JSON output (--output-style=JSON) -------------- */

typedef struct {
  char func[2048];
  char file[512];
  uint32_t line; /* 0: no line */
} llvm_frame;

/* A JSON string's text from p (just past its opening quote) into out; \uXXXX
 * past ASCII becomes '?'.  Returns the place past the closing quote. */
static inline const char *llvm_json_string(const char *p, char *out, size_t cap) {
  size_t n = 0;
  while (*p && *p != '"') {
    char ch = *p++;
    if (ch == '\\' && *p) {
      ch = *p++;
      if (ch == 'u') {
        unsigned v = 0;
        for (int i = 0; i < 4 && *p; i++, p++)
          v = v * 16 + (unsigned)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
        ch = v < 0x80 ? (char)v : '?';
      } else if (ch == 'n') {
        ch = '\n';
      } else if (ch == 't') {
        ch = '\t';
      }
    }
    if (n + 1 < cap)
      out[n++] = ch;
  }
  out[n] = '\0';
  return *p ? p + 1 : p;
}

/* One llvm-symbolizer JSON line,
 * {"Address":..,"Symbol":[{..."FileName":"..","FunctionName":"..","Line":N,...},...]},
 * into at most max frames, innermost first; its "??" (no answer) gives 0. */
static inline int llvm_parse_json(const char *line, llvm_frame *f, int max) {
  int n = 0;
  const char *p = line;
  while (n < max && (p = strstr(p, "\"FileName\":\""))) {
    p = llvm_json_string(p + 12, f[n].file, sizeof f[n].file);
    const char *q = strstr(p, "\"FunctionName\":\"");
    if (!q)
      break;
    p = llvm_json_string(q + 16, f[n].func, sizeof f[n].func);
    q = strstr(p, "\"Line\":");
    if (!q)
      break;
    f[n].line = (uint32_t)strtoul(q + 7, NULL, 10);
    p = q + 7;
    n++;
  }
  if (n == 1 && !f[0].func[0] && !f[0].file[0] && f[0].line == 0)
    n = 0;
  return n;
}

/* ---- a PE image's section table, read by the test, not by pdbsym ------ */

typedef struct {
  uint32_t va, size;
  bool exec; /* IMAGE_SCN_MEM_EXECUTE */
} pe_section;

static inline uint32_t pe_rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The sections of the image d (at most max), in the table's order (section
 * number - 1); 0 when d is not a PE image. */
static inline int pe_sections(const uint8_t *d, size_t n, pe_section *out, int max) {
  if (n < 0x40 || d[0] != 'M' || d[1] != 'Z')
    return 0;
  uint32_t pe = pe_rd32(d + 0x3c);
  if ((size_t)pe + 24 > n)
    return 0;
  unsigned nsec = d[pe + 6] | d[pe + 7] << 8, optsz = d[pe + 20] | d[pe + 21] << 8;
  size_t sec = pe + 24u + optsz;
  int k = 0;
  for (unsigned i = 0; i < nsec && k < max && sec + 40 * (i + 1) <= n; i++) {
    const uint8_t *s = d + sec + 40 * i;
    out[k].size = pe_rd32(s + 8);
    out[k].va = pe_rd32(s + 12);
    out[k].exec = (pe_rd32(s + 36) & 0x20000000u) != 0;
    k++;
  }
  return k;
}

/* The PDB file name of the image's first RSDS (CodeView) record, without its
 * folder; false when there is none. */
static inline bool pe_rsds_name(const uint8_t *d, size_t n, char *out, size_t cap) {
  for (size_t i = 0; i + 24 < n; i++) {
    if (memcmp(d + i, "RSDS", 4) != 0)
      continue;
    const char *p = (const char *)d + i + 24;
    size_t len = strnlen(p, n - i - 24);
    const char *base = p;
    for (size_t j = 0; j < len; j++)
      if (p[j] == '\\' || p[j] == '/')
        base = p + j + 1;
    snprintf(out, cap, "%.*s", (int)(len - (size_t)(base - p)), base);
    return out[0] != '\0';
  }
  return false;
}

#endif
