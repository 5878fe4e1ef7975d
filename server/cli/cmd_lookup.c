/*
 * cmd_lookup.c - `pdbsym lookup [--image PE] FILE [ADDRESS...]`: offline
 * answers straight from a file (docs/contract.md, "The CLI lookup"), one frame
 * per line as render.h writes them.  A Windows PDB asked RVAs is read
 * lazily: only the module streams the addresses need (parsers/pdb.h), so one
 * address costs one address; the answers are those of the whole table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loader.h"
#include "pdb.h"
#include "render.h"
#include "settings.h"
#include "symfile.h"
#include "symtab.h"

#define LOOKUP_MAX_FILE ((uint64_t)4 << 30) /* each file, as symfile_load */

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

/* Where the answers come from: the whole table (symfile_read), or, for a
 * Windows PDB asked RVAs only, a lazy index that reads only the module
 * streams the addresses need (parsers/pdb.h, "Lazy reading"); a token
 * address turns a lazy source whole. */
typedef struct {
  const char *file;
  symfile fm, im;
  bool im_open;
  ps_budget budget;
  symtab st; /* the whole table, once whole */
  bool whole;
  pdb_lazy *z;
  render_module rm;
} source;

static int cannot_read(const char *what, const char *file, const ps_diag *d) {
  char msg[512];
  fprintf(stderr, "pdbsym: cannot read %s%s: %s\n", what, file, ps_diag_format(d, msg, sizeof msg));
  return 2;
}

static void close_files(source *s) {
  symfile_close(&s->fm);
  if (s->im_open)
    symfile_close(&s->im);
  s->im_open = false;
}

static void source_close(source *s) {
  render_module_free(&s->rm);
  pdb_close(s->z);
  s->z = NULL;
  st_free(&s->st);
  close_files(s);
}

/* Reads the whole table; the files are closed afterwards. */
static int source_whole(source *s) {
  if (s->whole)
    return 0;
  render_module_free(&s->rm);
  pdb_close(s->z);
  s->z = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget_init(&s->budget, PS_DEFAULT_BUDGET);
  ps_err rc = symfile_read(&s->fm, s->im_open ? &s->im : NULL, &s->budget, &s->st, &d);
  s->st.budget = NULL; /* reading is over */
  close_files(s);
  if (rc != PS_E_OK)
    return cannot_read("", s->file, &d);
  render_module_init(&s->rm, &s->st);
  s->whole = true;
  return 0;
}

/* Opens FILE (and the image); a Windows PDB without an image is read lazily. */
static int source_open(source *s, const char *file, const char *image) {
  memset(s, 0, sizeof *s);
  s->file = file;
  ps_diag d;
  ps_diag_clear(&d);
  if (symfile_open(&s->fm, file, LOOKUP_MAX_FILE, &d) != PS_E_OK)
    return cannot_read("", file, &d);
  if (image) {
    if (symfile_open(&s->im, image, LOOKUP_MAX_FILE, &d) != PS_E_OK) {
      symfile_close(&s->fm);
      return cannot_read("image ", image, &d);
    }
    s->im_open = true;
  }
  if (image || loader_sniff(s->fm.data, s->fm.len) != LOAD_MSF) {
    int rc = source_whole(s);
    if (rc)
      source_close(s);
    return rc;
  }
  ps_budget_init(&s->budget, PS_DEFAULT_BUDGET);
  pdb_options o = {0};
  symfile_release_hook(&s->fm, &o.release, &o.release_arg); /* module pages go once read */
  if (pdb_open(s->fm.data, s->fm.len, &s->budget, &o, &s->z, &d) != PS_E_OK) {
    source_close(s);
    return cannot_read("", file, &d);
  }
  render_module_init(&s->rm, NULL); /* until a table is made (answer) */
  return 0;
}

/* Answers one address; tab is a table already made for it (the arguments'
 * lazy table) or NULL.  Returns 2 when the file turns out unreadable. */
static int answer(source *s, const char *text, const symtab *tab) {
  address a;
  const char *why = parse_address(text, &a);
  if (why) {
    render_frame f = {.status = "invalid", .module = -1, .error = why, .retry_after = -1,
                      .input = text};
    print_line(render_frame_json(&s->rm, &f));
    return 0;
  }
  st_answer ans;
  if (a.managed && source_whole(s))
    return 2;
  ps_diag d;
  ps_diag_clear(&d);
  if (a.managed) {
    st_lookup_token(&s->st, a.value, a.il, &ans);
  } else if (s->whole) {
    st_lookup_rva(&s->st, a.value, &ans);
  } else {
    if (!tab && pdb_module_table(s->z, &a.value, 1, &tab, &d) != PS_E_OK)
      return cannot_read("", s->file, &d);
    st_lookup_rva(tab, a.value, &ans);
    render_module_init(&s->rm, tab); /* its Source Link map: the file's */
  }
  print_line(render_answer_json(&s->rm, &ans, -1, a.managed, a.value, a.il));
  return 0;
}

/* The table for the addresses given as arguments, made once for all of
 * them (NULL when the source is whole). */
static int args_table(source *s, char **args, int n, const symtab **tab) {
  *tab = NULL;
  if (s->whole)
    return 0;
  uint32_t *rvas = malloc(sizeof *rvas * (size_t)(n ? n : 1));
  if (!rvas) {
    fprintf(stderr, "pdbsym: out of memory\n");
    return 2;
  }
  size_t k = 0;
  bool token = false;
  for (int i = 0; i < n; i++) {
    address a;
    if (parse_address(args[i], &a))
      continue;
    token |= a.managed;
    rvas[k++] = a.value;
  }
  int rc = 0;
  ps_diag d;
  ps_diag_clear(&d);
  if (token)
    rc = source_whole(s);
  else if (k && pdb_module_table(s->z, rvas, k, tab, &d) != PS_E_OK)
    rc = cannot_read("", s->file, &d);
  free(rvas);
  return rc;
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
          "Works on the file alone: no cache, no network.  Of a Windows PDB asked RVAs\n"
          "only the parts the addresses need are read.  A bad address gives an\n"
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
    } else if (settings_not_here("lookup", "lookup reads FILE alone (no cache, no symbol server)",
                                 argv[i])) {
      return 2;
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
  source src;
  int rc = source_open(&src, file, image);
  if (rc)
    return rc;
  if (i < argc) {
    const symtab *tab;
    rc = args_table(&src, argv + i, argc - i, &tab);
    for (; !rc && i < argc; i++)
      rc = answer(&src, argv[i], tab);
  } else {
    char line[512];
    while (!rc && fgets(line, sizeof line, stdin)) {
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
      rc = answer(&src, line, NULL);
    }
  }
  source_close(&src);
  return rc;
}
