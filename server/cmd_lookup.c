/*
 * cmd_lookup.c - `pdbsym lookup [--image PE] FILE [ADDRESS...]` and
 * `pdbsym dump FILE`: offline answers straight from a file (CONTRACT.md,
 * "The CLI lookup").  A Windows PDB asked RVAs is read lazily: only the
 * module streams the addresses need (parsers/pdb.h), so one address costs
 * one address; the answers are those of the whole table.
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
#include "pdb.h"
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

/* Where the answers come from: the whole table (loader_read), or, for a
 * Windows PDB asked RVAs only, a lazy index that reads only the module
 * streams the addresses need (parsers/pdb.h, "Lazy reading"); a token address
 * turns a lazy source whole. */
typedef struct {
  const char *file, *image;
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

static void source_close(source *s) {
  render_module_free(&s->rm);
  pdb_close(s->z);
  s->z = NULL;
  st_free(&s->st);
  symfile_close(&s->fm);
  if (s->im_open)
    symfile_close(&s->im);
  s->im_open = false;
}

/* Reads the whole table (the files are closed afterwards). */
static int source_whole(source *s) {
  if (s->whole)
    return 0;
  render_module_free(&s->rm);
  pdb_close(s->z);
  s->z = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  ps_budget_init(&s->budget, PS_DEFAULT_BUDGET);
  st_init(&s->st, &s->budget);
  ps_err rc;
  if (!s->image && loader_sniff(s->fm.data, s->fm.len) == LOAD_MSF) {
    pdb_options o = {0};
    symfile_release_hook(&s->fm, &o.release, &o.release_arg); /* peak: the tables */
    rc = pdb_read_with(s->fm.data, s->fm.len, &s->budget, &o, &s->st, &d);
  } else {
    rc = loader_read(s->fm.data, s->fm.len, s->im_open ? s->im.data : NULL, s->im.len,
                     &s->budget, &s->st, &d);
  }
  s->st.budget = NULL; /* the table outlives no budget check */
  symfile_close(&s->fm);
  if (s->im_open)
    symfile_close(&s->im);
  s->im_open = false;
  if (rc != PS_E_OK)
    return cannot_read("", s->file, &d);
  render_module_init(&s->rm, &s->st);
  s->whole = true;
  return 0;
}

/* Opens FILE (and the image); lazy_ok lets a Windows PDB be read lazily. */
static int source_open(source *s, const char *file, const char *image, bool lazy_ok) {
  memset(s, 0, sizeof *s);
  s->file = file;
  s->image = image;
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
  if (!lazy_ok || image || loader_sniff(s->fm.data, s->fm.len) != LOAD_MSF) {
    int rc = source_whole(s);
    if (rc)
      source_close(s);
    return rc;
  }
  ps_budget_init(&s->budget, PS_DEFAULT_BUDGET);
  pdb_options o = {0};
  symfile_release_hook(&s->fm, &o.release, &o.release_arg);
  if (pdb_open(s->fm.data, s->fm.len, &s->budget, &o, &s->z, &d) != PS_E_OK) {
    source_close(s);
    return cannot_read("", file, &d);
  }
  render_module_init(&s->rm, NULL); /* Windows PDBs: no Source Link map */
  return 0;
}

/* Answers one address; tab is a table already made for it (the arguments'
 * lazy table) or NULL.  Returns 2 when the file turns out unreadable. */
static int answer(source *s, const char *text, const symtab *tab) {
  address a;
  const char *why = parse_address(text, &a);
  if (why) {
    json_t *o = render_error_frame("invalid", why, -1, false, false, 0, 0);
    json_object_set_new(o, "address", json_string(text));
    print_json(o);
    return 0;
  }
  st_answer ans;
  if (a.managed && source_whole(s))
    return 2;
  ps_diag d;
  ps_diag_clear(&d);
  if (a.managed)
    st_lookup_token(&s->st, a.value, a.il, &ans);
  else if (s->whole)
    st_lookup_rva(&s->st, a.value, &ans);
  else if (tab)
    st_lookup_rva(tab, a.value, &ans);
  else if (pdb_lookup_lazy(s->z, a.value, &ans, &d) != PS_E_OK)
    return cannot_read("", s->file, &d);
  print_json(render_frame(&s->rm, &ans, -1, a.managed, a.value, a.il));
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

static int load(const char *file, const char *image, symtab *st) {
  source s;
  int rc = source_open(&s, file, image, false);
  if (rc)
    return rc;
  *st = s.st; /* the files are closed; the table is the caller's */
  memset(&s.st, 0, sizeof s.st);
  source_close(&s);
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
  int rc = source_open(&src, file, image, true);
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
