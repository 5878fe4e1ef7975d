/*
 * settings.h - the settings every cache- or network-touching command shares
 * (docs/contract.md, "Running").  They are read the way `pdbsym serve` reads them,
 * through config.c: defaults, then the environment (PDBSYM_<KEY>), then a
 * config file (--config FILE or PDBSYM_CONFIG), then the shared flags below.
 *
 *   PDBSYM_CACHE_DIR        --cache-dir DIR        default ./.pdbsym-cache
 *   PDBSYM_SYMBOL_PATH      --symbol-path PATH     default Microsoft's public server
 *   PDBSYM_CACHE_MAX_BYTES  --cache-max-bytes N    default 2 GiB (suffixes K M G)
 *   PDBSYM_OFFLINE          --offline              cache and local folders only
 *   PDBSYM_CONFIG           --config FILE          `key = value` lines (serve's keys)
 *
 * The struct is not copyable: the const char * fields point into cfg.
 */
#ifndef PDBSYM_SETTINGS_H
#define PDBSYM_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "profile.h"

typedef struct {
  srv_config cfg;          /* every setting, as `pdbsym serve` would see it */
  const char *cache_dir;   /* = cfg.cache_dir */
  const char *symbol_path; /* = cfg.symbol_path, NULL when empty (the default) */
  uint64_t cache_max_bytes;
  bool offline;
} settings;

/* Defaults, environment and config file; --config FILE in argv[1..argc-1]
 * (which may be 0/NULL) is honoured.  On a bad value it prints one line on
 * stderr naming the variable or file and exits with status 2. */
void settings_init(settings *s, int argc, char **argv);

/* settings_init without arguments (PDBSYM_CONFIG still applies). */
void settings_defaults(settings *s);

/* Tries argv[*i] (and its value) as a shared flag.  Returns 1 when it was
 * one (*i then indexes its last argument, so the caller's loop goes on with
 * the next), 0 when argv[*i] is not a shared flag, or -1 after printing an
 * error. */
int settings_flag(settings *s, int argc, char **argv, int *i);

/* For a command that uses no cache and no symbol server (lookup, dump,
 * health): when arg is one of the shared flags, prints one line saying it
 * does not apply and why, and returns 1 (the caller exits 2); else 0. */
int settings_not_here(const char *cmd, const char *why, const char *arg);

/* Warns (one line each, through warn) of every folder of the symbol path
 * that does not exist or is not a folder. */
void settings_warn_folders(const srv_config *c, void (*warn)(void *ctx, const char *msg),
                           void *ctx);

/* Help text for the shared flags. */
const char *settings_help(void);

/* The engine's settings, as every command and `pdbsym serve` pass them:
 * from s (warning on stderr of symbol-path folders that do not exist), or
 * from a config serve loaded itself (on_download left NULL). */
void settings_engine_config(const settings *s, engine_config *ec);
/* The engine's configuration from a srv_config (every setting config.c lists). */
void settings_engine_config_from(const srv_config *cfg, engine_config *ec);

/* What `pdbsym serve` profiles, and how, from the profile_* settings (the
 * strings point into c); `pdbsym profile` takes its session options from
 * the same place. */
void settings_profile_config(const srv_config *c, prof_manager_config *pc);
void settings_profile_options(const srv_config *c, prof_options *o);
void settings_profile_push(const srv_config *c, prof_push_config *pp);
/* "speedscope", "pprof", "speedscope,pprof" as PROF_* bits; false on junk */
bool settings_profile_formats(const char *s, unsigned *out);

/* Parses "1000", "64K", "512M", "2G" (binary units).  false on junk/overflow. */
bool settings_parse_bytes(const char *s, uint64_t *out);

#endif
