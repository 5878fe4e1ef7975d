/*
 * cmd_dump.c - `pdbsym dump [--image PE] FILE`: what pdbsym reads from a
 * file (identity, format, counts) as one JSON object, as render.h writes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "render.h"
#include "symfile.h"
#include "symtab.h"

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
  int rc = symfile_load(argv[i], image, &st);
  if (rc)
    return rc;
  char *json = render_symtab_json(&st, argv[i]);
  if (json) {
    puts(json);
    free(json);
  }
  st_free(&st);
  return 0;
}
