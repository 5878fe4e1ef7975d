/*
 * settings.c - the shared settings of the CLI commands, read through config.c
 * so that they and `pdbsym serve` agree (see settings.h).
 */
#include "settings.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "cli.h"
#include "fetch.h"

#define DEFAULT_CACHE_MAX ((uint64_t)2 << 30)

bool settings_parse_bytes(const char *s, uint64_t *out) {
  if (!s || !isdigit((unsigned char)*s))
    return false;
  uint64_t v = 0;
  while (isdigit((unsigned char)*s)) {
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
    s++;
  }
  unsigned shift = 0;
  switch (toupper((unsigned char)*s)) {
  case 'K': shift = 10; s++; break;
  case 'M': shift = 20; s++; break;
  case 'G': shift = 30; s++; break;
  case 'T': shift = 40; s++; break;
  default: break;
  }
  if (*s == 'i' || *s == 'I')
    s++;
  if (*s == 'B' || *s == 'b')
    s++;
  if (*s != '\0')
    return false;
  if (shift && v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

static void sync(settings *s) {
  s->cache_dir = s->cfg.cache_dir;
  s->symbol_path = s->cfg.symbol_path[0] ? s->cfg.symbol_path : NULL;
  s->cache_max_bytes = s->cfg.cache_max_bytes ? s->cfg.cache_max_bytes : DEFAULT_CACHE_MAX;
  s->offline = s->cfg.offline;
}

void settings_init(settings *s, int argc, char **argv) {
  memset(s, 0, sizeof *s);
  /* only --config is passed on: the other flags are the command's own */
  char *args[3] = {"pdbsym", NULL, NULL};
  int n = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) {
      args[1] = "--config";
      args[2] = argv[i + 1];
      n = 3;
    } else if (!strncmp(argv[i], "--config=", 9)) {
      args[1] = argv[i];
      n = 2;
    }
  }
  char err[1024];
  if (cfg_load(&s->cfg, n, args, err, sizeof err) != 0) {
    fprintf(stderr, "pdbsym: %s\n", err);
    exit(2);
  }
  sync(s);
}

void settings_defaults(settings *s) { settings_init(s, 0, NULL); }

int settings_flag(settings *s, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  const char *val = NULL;
  static const char *const with_value[] = {"--cache-dir", "--symbol-path", "--cache-max-bytes",
                                           "--config"};
  static const char *const keys[] = {"cache_dir", "symbol_path", "cache_max_bytes", NULL};
  for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
    size_t n = strlen(with_value[k]);
    if (strncmp(a, with_value[k], n) != 0 || (a[n] != '\0' && a[n] != '='))
      continue;
    int used = 1;
    if (a[n] == '=') {
      val = a + n + 1;
    } else if (*i + 1 < argc) {
      val = argv[*i + 1];
      used = 2;
    } else {
      fprintf(stderr, "pdbsym: %s needs a value\n", with_value[k]);
      return -1;
    }
    if (keys[k]) { /* --config was read by settings_init */
      char where[64], err[1024];
      snprintf(where, sizeof where, "flag %s", with_value[k]);
      if (!cfg_set(&s->cfg, keys[k], val, where, err, sizeof err)) {
        fprintf(stderr, "pdbsym: %s\n", err);
        return -1;
      }
    }
    sync(s);
    *i += used - 1;
    return 1;
  }
  if (!strcmp(a, "--offline")) {
    s->cfg.offline = true;
    sync(s);
    return 1;
  }
  return 0;
}

void settings_setup(void) {
  cfg_set_check("symbol_path", fetch_symbol_path_check);
  cfg_set_check("cors_origins", api_check_origins);
}

int settings_not_here(const char *cmd, const char *why, const char *arg) {
  static const char *const shared[] = {"--cache-dir", "--symbol-path", "--cache-max-bytes",
                                       "--offline", "--config"};
  for (size_t k = 0; k < sizeof shared / sizeof shared[0]; k++) {
    size_t n = strlen(shared[k]);
    if (!strncmp(arg, shared[k], n) && (arg[n] == '\0' || arg[n] == '=')) {
      fprintf(stderr, "pdbsym %s: %s does not apply here: %s; run 'pdbsym %s --help'\n", cmd,
              shared[k], why, cmd);
      return 1;
    }
  }
  return 0;
}

typedef struct {
  void (*warn)(void *ctx, const char *msg);
  void *ctx;
} folder_warn;

static void check_folder(void *ctx, const char *folder) {
  folder_warn *w = ctx;
  struct stat st;
  char msg[1200];
  if (stat(folder, &st) != 0)
    snprintf(msg, sizeof msg, "symbol_path: the folder %s does not exist: nothing will be found there",
             folder);
  else if (!S_ISDIR(st.st_mode))
    snprintf(msg, sizeof msg, "symbol_path: %s is not a folder: nothing will be found there", folder);
  else
    return;
  w->warn(w->ctx, msg);
}

void settings_warn_folders(const srv_config *c, void (*warn)(void *ctx, const char *msg),
                           void *ctx) {
  if (!c->symbol_path[0])
    return;
  folder_warn w = {warn, ctx};
  fetch_symbol_path_folders(c->symbol_path, check_folder, &w);
}

static void warn_stderr(void *ctx, const char *msg) {
  (void)ctx;
  fprintf(stderr, "pdbsym: warning: %s\n", msg);
}

const char *settings_help(void) {
  return "  --cache-dir DIR     cache folder (env PDBSYM_CACHE_DIR, default ./.pdbsym-cache)\n"
         "  --symbol-path PATH  symbol sources, _NT_SYMBOL_PATH syntax (env PDBSYM_SYMBOL_PATH,\n"
         "                      default Microsoft's public symbol server)\n"
         "  --cache-max-bytes N cap on the cache's size, e.g. 2G (env PDBSYM_CACHE_MAX_BYTES)\n"
         "  --offline           use the cache and local folders only (env PDBSYM_OFFLINE)\n"
         "  --config FILE       a config file of `key = value` lines, as 'pdbsym serve --help'\n"
         "                      lists (env PDBSYM_CONFIG)\n";
}

void settings_engine_config_from(const srv_config *c, engine_config *ec) {
  memset(ec, 0, sizeof *ec);
  ec->cache_dir = c->cache_dir;
  ec->symbol_path = c->symbol_path[0] ? c->symbol_path : NULL;
  ec->cache_max_bytes = c->cache_max_bytes; /* 0: the cache's default */
  ec->mem_max_bytes = c->mem_max_bytes;
  ec->max_pdb_bytes = c->max_pdb_bytes;
  ec->max_parallel_downloads = (int)c->max_parallel_downloads;
  ec->download_workers = (int)c->download_workers;
  ec->download_queue = (int)c->download_queue;
  ec->download_max_share = c->download_max_share > 100 ? 100 : (int)c->download_max_share;
  ec->request_downloads = c->request_downloads > 1000000 ? 1000000 : (int)c->request_downloads;
  ec->request_downloads_max =
      c->request_downloads_max > 1000000 ? 1000000 : (int)c->request_downloads_max;
  ec->offline = c->offline;
  cfg_dl_limits(c, &ec->dl);
  ec->negative_missing_ttl = (int64_t)c->negative_missing_ttl;
  ec->negative_malformed_ttl = (int64_t)c->negative_malformed_ttl;
  ec->negative_suspect_ttl = (int64_t)c->negative_suspect_ttl;
  ec->negative_error_ttl = (int64_t)c->negative_error_ttl;
  ec->negative_error_max_ttl = (int64_t)c->negative_error_max_ttl;
  ec->negative_memory = c->negative_memory > UINT32_MAX ? UINT32_MAX : (uint32_t)c->negative_memory;
  ec->persist_queue = c->persist_queue > 1000000 ? 1000000 : (int)c->persist_queue;
  ec->persist_queue_bytes = c->persist_queue_bytes;
  ec->persist_wait_ms = c->persist_wait > 86400 ? 86400000u : (uint32_t)c->persist_wait * 1000u;
}

void settings_engine_config(const settings *s, engine_config *ec) {
  settings_warn_folders(&s->cfg, warn_stderr, NULL);
  settings_engine_config_from(&s->cfg, ec);
}

bool settings_profile_formats(const char *s, unsigned *out) {
  *out = 0;
  char buf[64];
  if (strlen(s) >= sizeof buf)
    return false;
  memcpy(buf, s, strlen(s) + 1);
  for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
    if (!strcmp(t, "speedscope"))
      *out |= PROF_SPEEDSCOPE;
    else if (!strcmp(t, "pprof"))
      *out |= PROF_PPROF;
    else
      return false;
  }
  return *out != 0;
}

void settings_profile_options(const srv_config *c, prof_options *o) {
  memset(o, 0, sizeof *o);
  o->window_ms = c->profile_window;
  if (!settings_profile_formats(c->profile_format, &o->formats))
    o->formats = 0; /* prof_manager_check says so */
  o->buffer_mb = (uint32_t)c->profile_buffer_mb;
  o->resolve_ms = c->profile_resolve_timeout * 1000;
  o->io_timeout_ms = c->profile_ipc_timeout * 1000;
  o->collect_version = (int)c->profile_collect_version;
  o->trace.code_budget = (size_t)c->profile_code_budget;
  o->trace.stack_budget = (size_t)c->profile_stack_budget;
  o->trace.max_image_bytes = c->trace_image_max_bytes;
  if (c->trace_spill_dir[0])
    o->trace.spill_dir = c->trace_spill_dir;
}

void settings_profile_config(const srv_config *c, prof_manager_config *pc) {
  memset(pc, 0, sizeof *pc);
  pc->pids = c->profile_pids;
  pc->command = c->profile_command;
  pc->diagnostic_port = c->diagnostic_port;
  pc->scan_interval_ms = c->profile_scan_interval * 1000;
  pc->max_sessions = (unsigned)c->max_profiled_processes;
  pc->out_dir = c->profile_dir;
  pc->max_files = c->profile_max_files;
  pc->max_bytes = c->profile_max_bytes;
  settings_profile_options(c, &pc->session);
  settings_profile_push(c, &pc->push);
}

void settings_profile_push(const srv_config *c, prof_push_config *pp) {
  memset(pp, 0, sizeof *pp);
  pp->url = c->profile_push;
  pp->tenant = c->profile_push_tenant;
  pp->auth = c->profile_push_auth;
  pp->service = c->profile_push_service;
  pp->labels = c->profile_push_labels;
  pp->queue_max = (unsigned)c->profile_push_queue;
  pp->queue_bytes = c->profile_push_queue_bytes;
  pp->timeout_ms = c->profile_push_timeout * 1000;
}
