/*
 * settings.h - the settings every cache- or network-touching command shares
 * (CONTRACT.md, "Running"): defaults, then the environment, then flags.
 *
 *   PDBSYM_CACHE_DIR        --cache-dir DIR        default ./.pdbsym-cache
 *   PDBSYM_SYMBOL_PATH      --symbol-path PATH     default Microsoft's public server
 *   PDBSYM_CACHE_MAX_BYTES  --cache-max-bytes N    default 2 GiB (suffixes K M G)
 *   --offline                                      cache and local folders only
 */
#ifndef PDBSYM_SETTINGS_H
#define PDBSYM_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

typedef struct {
  const char *cache_dir;
  const char *symbol_path;
  uint64_t cache_max_bytes;
  bool offline;
} settings;

/* Defaults overridden by the environment. */
void settings_defaults(settings *s);

/* Tries argv[i] (and its value) as a shared flag.  Returns the number of
 * arguments used (0 when argv[i] is not a shared flag), or -1 after printing
 * an error. */
int settings_flag(settings *s, int argc, char **argv, int i);

/* Help text for the shared flags. */
const char *settings_help(void);

void settings_engine_config(const settings *s, engine_config *ec);

/* Parses "1000", "64K", "512M", "2G" (binary units).  false on junk/overflow. */
bool settings_parse_bytes(const char *s, uint64_t *out);

#endif
