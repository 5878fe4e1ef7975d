/*
 * config.h - the settings of `pdbsym serve`: defaults, then the environment
 * (PDBSYM_<KEY>), then a config file of `key = value` lines, then flags
 * (--key VALUE or --key=VALUE; '-' and '_' alike).  The contract's variables
 * (PDBSYM_LISTEN, PDBSYM_CACHE_DIR, PDBSYM_SYMBOL_PATH, PDBSYM_CACHE_MAX_BYTES)
 * are four of these; a config file and flags may override them.
 *
 * Every setting is listed once, in config.c's table, with its default and
 * meaning; `pdbsym serve --help` prints that table and api.md repeats it.
 */
#ifndef PDBSYM_CONFIG_H
#define PDBSYM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
  char listen[256];           /* HOST:PORT */
  char cache_dir[1024];
  char symbol_path[4096];     /* "" = Microsoft's public symbol server */
  uint64_t cache_max_bytes;   /* 0 = the cache's default */
  uint64_t mem_max_bytes;     /* 0 = the engine's default */
  uint64_t max_pdb_bytes;     /* 0 = the engine's default */
  uint64_t max_parallel_downloads;
  bool offline;
  uint64_t max_body_bytes;
  uint64_t max_frames;
  uint64_t max_modules;
  uint64_t max_answer_bytes;  /* largest answer body (bytes) */
  uint64_t max_inflight;
  uint64_t max_connections;
  uint64_t connection_timeout; /* seconds */
  uint64_t default_timeout;    /* seconds */
  uint64_t max_timeout;        /* seconds */
  uint64_t retry_after;        /* seconds */
  uint64_t shutdown_grace;     /* seconds */
  char log_level[16];          /* debug, info, warn, error */
  char config_file[1024];      /* the file read, "" if none */
} srv_config;

/* Fills c from defaults, environment, config file (--config FILE or
 * PDBSYM_CONFIG) and flags argv[1..argc-1].  Returns 0 on success, 1 when
 * --help was asked (help printed to stdout), 2 on an error (message in err). */
int cfg_load(srv_config *c, int argc, char **argv, char *err, size_t cap);

/* Prints every setting, its environment variable, default and meaning. */
void cfg_help(FILE *out);

/* Prints the effective settings as `key = value` lines. */
void cfg_print(const srv_config *c, FILE *out);

#endif
