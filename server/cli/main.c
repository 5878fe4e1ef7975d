/*
 * main.c - the pdbsym binary: one entry point, subcommands in cmd_*.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const cli_command commands[] = {
    {"lookup", "answer addresses from a PDB or PE file", cmd_lookup},
    {"dump", "show what pdbsym reads from a PDB or PE file", cmd_dump},
    {"symbolicate", "answer a POST /symbolicate body from stdin, without a server",
     cmd_symbolicate},
    {"trace", "symbolicate a .NET EventPipe trace (.nettrace)", cmd_trace},
    {"profile", "profile a running .NET process, one profile per window", cmd_profile},
    {"warm", "fill the cache ahead of time", cmd_warm},
    {"health", "check that a running service answers /health", cmd_health},
    {"version", "print the version", cmd_version},
    {"serve", "serve the HTTP API (see api.md)", cmd_serve},
    {"fetch", "download one PDB or PE image from the symbol path", cmd_fetch},
    {"cache", "inspect and trim the symbol cache (stats, list, evict, verify, clear)", cmd_cache},
};

static void usage(FILE *out) {
  fprintf(out, "usage: pdbsym COMMAND [OPTIONS] [ARGS]\n"
               "       pdbsym --version\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n'pdbsym COMMAND --help' describes each command.\n\n"
          "Commands that use the cache or the network (serve, symbolicate, trace, profile,\n"
          "warm, cache, fetch) read PDBSYM_CACHE_DIR, PDBSYM_SYMBOL_PATH, PDBSYM_CACHE_MAX_BYTES\n"
          "and PDBSYM_OFFLINE (serve also PDBSYM_LISTEN), then a config file (--config FILE\n"
          "or PDBSYM_CONFIG), then flags.  A bad setting exits 2 naming it.\n\n"
          "Exit status: 0 success; 1 some work failed; 2 usage error, unreadable input or\n"
          "bad request; 130 interrupted.\n");
}

int main(int argc, char **argv) {
  /* every symbol_path, from any place, is checked as fetch will read it */
  settings_setup();
  if (argc < 2) {
    fprintf(stderr, "pdbsym: which command? run 'pdbsym --help' for the list\n");
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
    return cmd_version(argc - 1, argv + 1);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "pdbsym: unknown command '%s'; run 'pdbsym --help' for the list\n", argv[1]);
  return 2;
}
