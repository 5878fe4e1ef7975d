/*
 * cmd_lookup.c - `pdbsym lookup [--image PE] FILE [ADDRESS...]`: offline
 * answers straight from a file (CONTRACT.md, "The CLI lookup"), one frame
 * per line as render.h writes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "render.h"
#include "symfile.h"
#include "symtab.h"

typedef struct {
  bool managed;
  uint32_t value; /* rva or token */
  uint32_t il;
} address;

static bool parse_u32(const char *s, size_t n, uint32_t *out) {
  if (n == 0)
    return false;
  int base = 10;
  if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    n -= 2;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    int d;
    char c = s[i];
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return false;
    v = v * (uint64_t)base + (uint64_t)d;
    if (v > UINT32_MAX)
      return false;
  }
  *out = (uint32_t)v;
  return true;
}

/* "0x1a2b" (rva) or "0x06000004+6" (token + IL offset) */
static const char *parse_address(const char *s, address *a) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
    n--;
  const char *plus = memchr(s, '+', n);
  memset(a, 0, sizeof *a);
  if (!plus) {
    if (!parse_u32(s, n, &a->value))
      return "address must be an RVA like 0x1a2b or a token and IL offset like 0x06000004+6";
    return NULL;
  }
  a->managed = true;
  if (!parse_u32(s, (size_t)(plus - s), &a->value))
    return "token must be a number like 0x06000004";
  if ((a->value >> 24) != 0x06)
    return "token must be a MethodDef token (0x06xxxxxx)";
  if (!parse_u32(plus + 1, n - (size_t)(plus - s) - 1, &a->il))
    return "IL offset must be a decimal or 0x hex number";
  return NULL;
}

static void print_line(char *json) {
  if (json) {
    puts(json);
    free(json);
  }
}

static void answer(const render_module *rm, const symtab *st, const char *text) {
  address a;
  const char *why = parse_address(text, &a);
  if (why) {
    render_frame f = {.status = "invalid", .module = -1, .error = why, .retry_after = -1,
                      .input = text};
    print_line(render_frame_json(rm, &f));
    return;
  }
  st_answer ans;
  if (a.managed)
    st_lookup_token(st, a.value, a.il, &ans);
  else
    st_lookup_rva(st, a.value, &ans);
  print_line(render_answer_json(rm, &ans, -1, a.managed, a.value, a.il));
}

static void lookup_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym lookup [--image PE] FILE [ADDRESS...]\n\n"
          "Answers addresses from FILE (a Windows PDB, a Portable PDB, or a PE with an\n"
          "embedded Portable PDB; NAME.gz is inflated first), one JSON object per line,\n"
          "in input order.\n"
          "ADDRESS is an RVA (0x1a2b) or a method token and IL offset (0x06000004+6).\n"
          "With no ADDRESS, addresses are read from standard input, one per line.\n\n"
          "  --image PE   the module's PE image, for full .NET method names\n\n"
          "Works on the file alone: no cache, no network.  A bad address gives an\n"
          "\"invalid\" line.  Exit status: 0 answered (whatever the statuses), 2 the file\n"
          "cannot be read (one line on stderr) or usage error.\n");
}

int cmd_lookup(int argc, char **argv) {
  const char *image = NULL, *file = NULL;
  int i = 1;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      lookup_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--image")) {
      if (++i >= argc) {
        fprintf(stderr, "pdbsym lookup: --image needs a file; run 'pdbsym lookup --help'\n");
        return 2;
      }
      image = argv[i];
    } else if (!strncmp(argv[i], "--image=", 8)) {
      image = argv[i] + 8;
    } else if (!strcmp(argv[i], "--")) {
      i++;
      break;
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      fprintf(stderr, "pdbsym lookup: unknown option '%s'; run 'pdbsym lookup --help'\n", argv[i]);
      return 2;
    } else {
      break;
    }
  }
  if (i >= argc) {
    fprintf(stderr, "pdbsym lookup: which file? usage: pdbsym lookup [--image PE] FILE "
                    "[ADDRESS...]; run 'pdbsym lookup --help'\n");
    return 2;
  }
  file = argv[i++];
  symtab st;
  int rc = symfile_load(file, image, &st);
  if (rc)
    return rc;
  render_module rm;
  render_module_init(&rm, &st);
  if (i < argc) {
    for (; i < argc; i++)
      answer(&rm, &st, argv[i]);
  } else {
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
      size_t n = strlen(line);
      if (n && line[n - 1] != '\n' && !feof(stdin)) {
        int c;
        while ((c = getchar()) != EOF && c != '\n')
          ;
      }
      while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
      if (n == 0)
        continue;
      answer(&rm, &st, line);
    }
  }
  render_module_free(&rm);
  st_free(&st);
  return 0;
}
