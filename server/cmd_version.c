#include <stdio.h>

#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <sqlite3.h>

#include "cli.h"

int cmd_version(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("pdbsym %s (sqlite %s, jansson %s, libmicrohttpd %s, %s)\n", PDBSYM_VERSION,
         sqlite3_libversion(), JANSSON_VERSION, MHD_get_version(), curl_version());
  return 0;
}
