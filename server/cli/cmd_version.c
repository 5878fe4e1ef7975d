/*
 * cmd_version.c - `pdbsym version` and `pdbsym --version`.  Each library's
 * version comes from the room that uses it.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fetch.h"
#include "http.h"
#include "render.h"
#include "store.h"

int cmd_version(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: pdbsym version   (or pdbsym --version)\n\n"
             "Prints pdbsym's version and the versions of the libraries it runs with.\n"
             "Exit status: 0.\n");
      return 0;
    }
    fprintf(stderr, "pdbsym version: unexpected argument '%s'; run 'pdbsym version --help'\n",
            argv[i]);
    return 2;
  }
  printf("pdbsym %s (sqlite %s, jansson %s, libmicrohttpd %s, %s)\n", PDBSYM_VERSION,
         store_sqlite_version(), render_jansson_version(), http_mhd_version(),
         fetch_curl_version());
  return 0;
}
