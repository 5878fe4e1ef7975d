/*
 * cmd_lookup.c - `pdbsym lookup [--image PE] FILE [ADDRESS...]` and
 * `pdbsym dump FILE`: offline answers straight from a file (CONTRACT.md,
 * "The CLI lookup").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "filemap.h"
#include "symfile.h"
#include "loader.h"
#include "module.h"
#include "render.h"
#include "symtab.h"

#define LOOKUP_MAX_FILE ((uint64_t)4 << 30)

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

static void print_json(json_t *o) {
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (s) {
    puts(s);
    free(s);
  }
  json_decref(o);
}

static void answer(const render_module *rm, const symtab *st, const char *text) {
  address a;
  const char *why = parse_address(text, &a);
  if (why) {
    json_t *o = render_error_frame("invalid", why, -1, false, false, 0, 0);
    json_object_set_new(o, "address", json_string(text));
    print_json(o);
    return;
  }
  st_answer ans;
  if (a.managed)
    st_lookup_token(st, a.value, a.il, &ans);
  else
    st_lookup_rva(st, a.value, &ans);
  print_json(render_frame(rm, &ans, -1, a.managed, a.value, a.il));
}

static int load(const char *file, const char *image, symtab *st) {
  symfile fm, im;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  if (symfile_open(&fm, file, LOOKUP_MAX_FILE, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym: cannot read %s: %s\n", file, ps_diag_format(&d, msg, sizeof msg));
    return 2;
  }
  memset(&im, 0, sizeof im);
  if (image && symfile_open(&im, image, LOOKUP_MAX_FILE, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym: cannot read image %s: %s\n", image,
            ps_diag_format(&d, msg, sizeof msg));
    symfile_close(&fm);
    return 2;
  }
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  st_init(st, &budget);
  ps_err rc = loader_read(fm.data, fm.len, image ? im.data : NULL, im.len, &budget, st, &d);
  st->budget = NULL; /* the budget lives on this stack frame only */
  symfile_close(&fm);
  if (image)
    symfile_close(&im);
  if (rc != PS_E_OK) {
    fprintf(stderr, "pdbsym: cannot read %s: %s\n", file, ps_diag_format(&d, msg, sizeof msg));
    st_free(st);
    return 2;
  }
  return 0;
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
  int rc = load(file, image, &st);
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

int cmd_dump(int argc, char **argv) {
  const char *image = NULL;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: pdbsym dump [--image PE] FILE\n\n"
             "Prints what pdbsym reads from FILE (a Windows PDB, a Portable PDB, or a PE\n"
             "with an embedded Portable PDB): identity, format and counts, as one JSON\n"
             "object.  --image PE adds the image's .NET method names.\n\n"
             "Exit status: 0 read, 2 the file cannot be read or usage error.\n");
      return 0;
    } else if (!strcmp(argv[i], "--image") && i + 1 < argc) {
      image = argv[++i];
    } else if (!strncmp(argv[i], "--image=", 8)) {
      image = argv[i] + 8;
    } else {
      fprintf(stderr, "pdbsym dump: unknown option '%s'; run 'pdbsym dump --help'\n", argv[i]);
      return 2;
    }
  }
  if (i >= argc) {
    fprintf(stderr, "pdbsym dump: which file? usage: pdbsym dump [--image PE] FILE; "
                    "run 'pdbsym dump --help'\n");
    return 2;
  }
  symtab st;
  int rc = load(argv[i], image, &st);
  if (rc)
    return rc;
  char id[48];
  uint32_t age = st.ident.format == ST_FORMAT_PORTABLE ? 0 : st.ident.age;
  module_debug_id(st.ident.guid, age, id);
  json_t *o = json_object();
  json_object_set_new(o, "file", json_string(argv[i]));
  json_object_set_new(o, "format", json_string(st.ident.format == ST_FORMAT_PORTABLE ? "portable"
                                               : st.ident.format == ST_FORMAT_WINDOWS ? "windows"
                                                                                       : "unknown"));
  json_object_set_new(o, "debug_id", json_string(id));
  if (st.ident.format == ST_FORMAT_WINDOWS) {
    json_object_set_new(o, "pdb_age", json_integer(st.ident.pdb_age));
    json_object_set_new(o, "machine", render_hex(st.ident.machine));
  } else {
    json_object_set_new(o, "stamp", render_hex(st.ident.stamp));
  }
  json_object_set_new(o, "managed", json_boolean(st.ident.managed));
  json_object_set_new(o, "functions", json_integer((json_int_t)st.nfuncs));
  json_object_set_new(o, "lines", json_integer((json_int_t)st.nlines));
  json_object_set_new(o, "inline_sites", json_integer((json_int_t)st.ninlines));
  json_object_set_new(o, "inline_ranges", json_integer((json_int_t)st.niranges));
  json_object_set_new(o, "publics", json_integer((json_int_t)st.npublics));
  json_object_set_new(o, "methods", json_integer((json_int_t)st.nmethods));
  json_object_set_new(o, "sequence_points", json_integer((json_int_t)st.nseqpts));
  json_object_set_new(o, "source_link", json_boolean(st.source_link != 0));
  json_object_set_new(o, "memory_bytes", json_integer((json_int_t)st_memory_size(&st)));
  print_json(o);
  st_free(&st);
  return 0;
}
