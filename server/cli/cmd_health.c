/*
 * cmd_health.c - `pdbsym health`: asks a running `pdbsym serve` for
 * GET /health (the container's HEALTHCHECK uses it, so the image needs no
 * curl binary), through the fetch room's plain GET.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "fetch.h"
#include "settings.h"

#define HEALTH_TIMEOUT_MS 3000L

int cmd_health(int argc, char **argv) {
  static srv_config cfg; /* only listen: read and checked as serve reads it */
  char err[1024];
  const char *listen = getenv("PDBSYM_LISTEN");
  if (listen && *listen && !cfg_set(&cfg, "listen", listen, "environment PDBSYM_LISTEN", err, sizeof err)) {
    fprintf(stderr, "pdbsym health: %s\n", err);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: pdbsym health [--listen HOST:PORT]\n\n"
             "Exits 0 when the service at HOST:PORT (default PDBSYM_LISTEN or\n"
             "127.0.0.1:8765) answers GET /health with 200, else 1 (2: usage error).\n");
      return 0;
    } else if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
      listen = argv[++i];
      if (!cfg_set(&cfg, "listen", listen, "flag --listen", err, sizeof err)) {
        fprintf(stderr, "pdbsym health: %s\n", err);
        return 2;
      }
    } else if (settings_not_here("health", "health only asks a running serve (--listen)",
                                 argv[i])) {
      return 2;
    } else {
      fprintf(stderr, "pdbsym health: unknown option '%s'; run 'pdbsym health --help'\n", argv[i]);
      return 2;
    }
  }
  if (!listen || !*listen)
    listen = "127.0.0.1:8765";
  /* a wildcard listen address is reached through loopback */
  char hostport[300];
  if (!strncmp(listen, "0.0.0.0:", 8))
    snprintf(hostport, sizeof hostport, "127.0.0.1:%s", listen + 8);
  else if (!strncmp(listen, "[::]:", 5))
    snprintf(hostport, sizeof hostport, "[::1]:%s", listen + 5);
  else
    snprintf(hostport, sizeof hostport, "%s", listen);
  char url[400];
  snprintf(url, sizeof url, "http://%s/health", hostport);
  long code = 0;
  char gerr[256];
  if (!fetch_http_get(url, HEALTH_TIMEOUT_MS, &code, NULL, 0, gerr, sizeof gerr)) {
    fprintf(stderr, "pdbsym health: %s: %s\n", url, gerr);
    return 1;
  }
  if (code != 200) {
    fprintf(stderr, "pdbsym health: %s answered %ld\n", url, code);
    return 1;
  }
  printf("ok\n");
  return 0;
}
