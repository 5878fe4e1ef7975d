/*
 * cmd_version.c - `pdbsym version` and `pdbsym --version`.
 */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <sqlite3.h>

#include "cli.h"

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
         sqlite3_libversion(), JANSSON_VERSION, MHD_get_version(), curl_version());
  return 0;
}
