/*
 * cmd_dump.c - `pdbsym dump [--image PE] FILE`: what pdbsym reads from a
 * file as one JSON object, as render.h writes it: for a PDB its identity,
 * format and counts; for a PE image (.exe, .dll) the ids a request names it
 * by (code_file and code_id, each CodeView entry's debug_file and debug_id)
 * and, when it embeds a Portable PDB, that PDB's identity and counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pe.h"
#include "render.h"
#include "settings.h"
#include "symfile.h"
#include "symtab.h"

/* The image's file name as a request's code_file gives it: the last path
 * component, without the ".gz" of a gzip'ed copy. */
static void code_file_of(const char *path, char *out, size_t cap) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  snprintf(out, cap, "%s", base);
  size_t n = strlen(out);
  if (symfile_gzipped(out) && n > 3)
    out[n - 3] = '\0';
}

static int dump_pe(const char *file, const char *image, const uint8_t *data, size_t len) {
  pe_info info;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  if (pe_parse(data, len, &info, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym: cannot read %s: %s\n", file, ps_diag_format(&d, msg, sizeof msg));
    return 2;
  }
  symtab st;
  bool have_table = false;
  if (info.has_embedded_pdb) {
    int rc = symfile_load(file, image, &st);
    if (rc)
      return rc;
    have_table = true;
  }
  char code_file[512];
  code_file_of(file, code_file, sizeof code_file);
  char *json = render_pe_json(&info, file, code_file, have_table ? &st : NULL);
  if (have_table)
    st_free(&st);
  if (!json) {
    fprintf(stderr, "pdbsym: out of memory\n");
    return 2;
  }
  puts(json);
  free(json);
  return 0;
}

int cmd_dump(int argc, char **argv) {
  const char *image = NULL;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: pdbsym dump [--image PE] FILE\n\n"
             "Prints what pdbsym reads from FILE as one JSON object.  A Windows or Portable\n"
             "PDB: its debug_id, format and counts.  A PE image (.exe, .dll): what a request\n"
             "names it by: code_file and code_id, and for each PDB it names (its CodeView\n"
             "entries) debug_file, debug_id, breakpad_id and format; with an embedded\n"
             "Portable PDB, that PDB's identity and counts too.  --image PE adds the\n"
             "image's .NET method names to a PDB's counts.\n\n"
             "Exit status: 0 read, 2 the file cannot be read or usage error.\n");
      return 0;
    } else if (!strcmp(argv[i], "--image") && i + 1 < argc) {
      image = argv[++i];
    } else if (!strncmp(argv[i], "--image=", 8)) {
      image = argv[i] + 8;
    } else if (settings_not_here("dump", "dump reads FILE alone (no cache, no symbol server)",
                                 argv[i])) {
      return 2;
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
  const char *file = argv[i];
  symfile f;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  if (symfile_open(&f, file, (uint64_t)4 << 30, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym: cannot read %s: %s\n", file, ps_diag_format(&d, msg, sizeof msg));
    return 2;
  }
  if (pe_is_image(f.data, f.len)) {
    int rc = dump_pe(file, image, f.data, f.len);
    symfile_close(&f);
    return rc;
  }
  symfile_close(&f);
  symtab st;
  int rc = symfile_load(file, image, &st);
  if (rc)
    return rc;
  char *json = render_symtab_json(&st, file);
  if (json) {
    puts(json);
    free(json);
  }
  st_free(&st);
  return 0;
}
