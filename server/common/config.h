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
  uint64_t download_max_share; /* percent of cache_max_bytes one download may take */
  uint64_t max_parallel_downloads; /* transfers at once per HTTP source */
  uint64_t download_workers;
  uint64_t download_queue;
  uint64_t request_downloads;     /* jobs one request may have queued or running; 0: none */
  uint64_t request_downloads_max; /* jobs one request may start in all; 0: none */
  uint64_t download_connect_timeout;     /* seconds */
  uint64_t download_first_byte_timeout;  /* seconds */
  uint64_t download_timeout;             /* seconds */
  uint64_t download_min_rate;            /* bytes/s */
  uint64_t download_low_speed;           /* bytes/s */
  uint64_t download_low_speed_time;      /* seconds */
  uint64_t download_retries;
  uint64_t download_retry_base_ms;
  uint64_t max_redirects;
  uint64_t max_decoded_ratio;
  uint64_t source_fail_threshold;
  uint64_t source_backoff;               /* seconds */
  uint64_t source_backoff_max;           /* seconds */
  uint64_t download_spare_slots;
  uint64_t download_slow_after;          /* seconds */
  bool refuse_private_redirects;
  uint64_t negative_missing_ttl;         /* seconds */
  uint64_t negative_malformed_ttl;
  uint64_t negative_suspect_ttl;
  uint64_t negative_error_ttl;
  uint64_t negative_error_max_ttl;
  uint64_t negative_memory;              /* entries */
  uint64_t persist_queue;                /* tables */
  uint64_t persist_queue_bytes;
  uint64_t persist_wait;                 /* seconds */
  bool offline;
  uint64_t max_body_bytes;
  uint64_t max_frames;
  uint64_t max_modules;
  uint64_t max_answer_bytes;  /* largest answer body (bytes) */
  uint64_t max_inflight;
  uint64_t request_memory_max; /* bytes; 0: no budget */
  uint64_t request_memory_keep; /* bytes of freed large request buffers kept for reuse */
  uint64_t max_inflight_per_ip; /* of max_inflight, from one address; 0: none */
  uint64_t request_memory_per_ip; /* of request_memory_max, from one address; 0: none */
  uint64_t request_workers;
  uint64_t http_threads;
  uint64_t inline_max_bytes;   /* bodies up to this may be answered on the event loop */
  uint64_t max_connections;
  uint64_t max_connections_per_ip; /* 0: none */
  uint64_t read_timeout;       /* seconds, absolute; 0: none */
  uint64_t write_timeout;      /* seconds, absolute; 0: none */
  uint64_t defer_accept;       /* seconds (TCP_DEFER_ACCEPT); 0: off */
  uint64_t connection_timeout; /* seconds, idle */
  char allowed_hosts[1024];
  uint64_t default_timeout;    /* seconds */
  uint64_t max_timeout;        /* seconds */
  uint64_t retry_after;        /* seconds */
  uint64_t shutdown_grace;     /* seconds */
  uint64_t stop_timeout;       /* seconds: SIGTERM to exit, every grace included */
  uint64_t max_trace_bytes;    /* POST /traces body cap */
  uint64_t max_trace_jobs;     /* POST /traces at once */
  uint64_t trace_feed_bytes;   /* a trace's feed buffer (two a trace) */
  uint64_t trace_min_rate;     /* bytes/s a /traces body sends over every trace_rate_window; 0: none */
  uint64_t trace_rate_window;  /* seconds */
  uint64_t trace_max_time;     /* seconds a /traces body may stream; 0: no limit */
  uint64_t trace_stack_budget; /* bytes of interned stacks per trace job; 0 = default */
  uint64_t trace_code_budget;  /* bytes of code tables per trace job; 0 = default */
  char trace_spill_dir[1024];  /* spill and answer files; "" = $TMPDIR or /tmp */
  char trace_images[2048];     /* folders a trace job may read modules' images from (their
                                * ReadyToRun maps, their IL): comma-separated; "" none */
  uint64_t trace_image_max_bytes; /* one image read so */
  char cors_origins[1024];     /* /symbolicate/v5: origins allowed by CORS ("*", a list, "") */
  uint64_t cors_max_age;       /* seconds a browser may cache a preflight's answer */
  uint64_t v5_max_frames;      /* /symbolicate/v5: addresses in one request, all jobs */
  uint64_t v5_max_jobs;
  uint64_t v5_timeout;         /* seconds a v5 request waits for its modules */
  /* profiling running .NET processes (server/profile, docs/profiling.md) */
  char profile_pids[1024];     /* pids `pdbsym serve` attaches to, comma-separated */
  char profile_command[256];   /* attach to processes whose command name matches (fnmatch) */
  char diagnostic_port[108];   /* a socket runtimes dial into (DOTNET_DiagnosticPorts), "" = none */
  char profile_push[1024];     /* a profile store's base URL (Pyroscope /ingest), "" = none */
  char profile_push_tenant[256];
  char profile_push_auth[1024];
  char profile_push_service[128];
  char profile_push_labels[512];
  uint64_t profile_push_queue;       /* windows waiting to be pushed */
  uint64_t profile_push_queue_bytes;
  uint64_t profile_push_timeout;     /* seconds a POST may take */
  uint64_t profile_scan_interval; /* seconds between looks for processes to attach to */
  uint64_t profile_window;     /* ms: one profile per window */
  char profile_dir[1024];      /* where window files go */
  char profile_format[64];     /* speedscope, pprof, or both (comma-separated) */
  uint64_t profile_max_files;  /* window files kept in profile_dir */
  uint64_t profile_max_bytes;  /* bytes of window files kept */
  uint64_t profile_buffer_mb;  /* the runtime's buffer for a session, MB */
  uint64_t profile_code_budget;  /* bytes of a session's code map */
  uint64_t profile_stack_budget; /* bytes of a window's interned stacks in memory */
  uint64_t profile_resolve_timeout; /* seconds a window's cut waits for a module */
  uint64_t profile_ipc_timeout;     /* seconds: each diagnostic IPC connect, write and read */
  uint64_t profile_collect_version; /* the newest CollectTracing version tried (2 to 5) */
  uint64_t max_profiled_processes;  /* sessions at once (a thread each) */
  char log_level[16];          /* debug, info, warn, error */
  char config_file[1024];      /* the file read, "" if none */
} srv_config;

/* The limits of each transfer from a symbol server, as the settings give
 * them (docs/fetch.md, "Downloads"); fetch_config and engine_config carry one
 * each.  0 (false) fields take fetch.h's defaults. */
typedef struct {
  long connect_timeout_ms;       /* 0: 10000 */
  long first_byte_timeout_ms;    /* request sent to first byte of the answer; 0: 30000 */
  long transfer_timeout_ms;      /* one transfer's total time, at least; 0: 120000 */
  uint64_t min_rate;             /* bytes/s: a transfer declaring N bytes may take
                                    max(transfer_timeout, N / min_rate); 0: 1 MiB/s */
  long low_speed_time_s;         /* 0: 30 (abort when under low_speed_limit that long) */
  long low_speed_limit;          /* bytes/s, 0: 1024 */
  int max_retries;               /* 0: 2, <0: none (on 5xx, timeouts, resets; never on 404) */
  long retry_base_ms;            /* 0: 250 (backoff: base * 2^attempt, +-25%, at most 8 s) */
  int max_redirects;             /* 0: 5 */
  uint64_t max_decoded_ratio;    /* HTTP content-encoding: decoded bytes per encoded byte
                                    (past the first 64 KiB); 0: 64 */
  int source_fail_threshold;     /* failed transfers in a row that put a source in backoff; 0: 3 */
  long source_backoff_ms;        /* ... for this long, doubled per further failure; 0: 5000 */
  long source_backoff_max_ms;    /* 0: 300000 */
  int spare_slots;               /* transfers a source may run beyond max_parallel_downloads
                                    for modules with none running, while fewer than this of
                                    its transfers are younger than slow_after_ms; 0: 1, <0: none */
  long slow_after_ms;            /* 0: 10000 */
  bool refuse_private;           /* redirects and file.ptr URLs leading to loopback,
                                    link-local or private addresses are refused unless
                                    the source's own address is of that kind */
} dl_limits;

/* "250ms", "5s", "2m", "1h", or a bare number of seconds, as milliseconds
 * (at most 30 days); false on junk. */
bool cfg_parse_duration_ms(const char *s, uint64_t *ms);

/* The download_* (and related) settings of c as a dl_limits. */
void cfg_dl_limits(const srv_config *c, dl_limits *out);

/* Fills c from defaults, environment, config file (--config FILE or
 * PDBSYM_CONFIG) and flags argv[1..argc-1].  Returns 0 on success, 1 when
 * --help was asked (help printed to stdout), 2 on an error (message in err).
 *
 * Every value is read by the one reader of its setting's kind (a count, a
 * size with K/M/G/T, a duration in seconds with s/m/h/d or milliseconds with
 * ms/s, a bool, HOST:PORT with a port 0 to 65535, a word from a list, a
 * folder that must exist...), whichever of the three places it came from, and
 * a bad one gives one line in err: "bad setting KEY = 'VALUE' (WHERE): want
 * ...", WHERE being "environment PDBSYM_KEY", "config file F line N" or
 * "flag --key".  In a config file an unquoted value ends at a '#' after white
 * space (a comment); a double-quoted value is taken as written.
 * A PDBSYM_ variable that names no setting is passed to warn (one line naming
 * the nearest setting); cfg_load prints it on stderr. */
int cfg_load(srv_config *c, int argc, char **argv, char *err, size_t cap);
typedef void (*cfg_warn_fn)(void *ctx, const char *msg);
int cfg_load_warn(srv_config *c, int argc, char **argv, char *err, size_t cap, cfg_warn_fn warn,
                  void *ctx);

/* Sets one setting from text, through the same reader (where: "flag
 * --cache-dir" and so on); false with err set as cfg_load sets it. */
bool cfg_set(srv_config *c, const char *key, const char *val, const char *where, char *err,
             size_t cap);

/* The setting whose key is nearest to key (edit distance). */
const char *cfg_nearest(const char *key);

/* A check another room owns for a text setting (symbol_path's syntax is the
 * fetch room's, cors_origins' the service's): set once by main
 * (settings_setup) before any setting is read, then applied to a non-empty
 * value from any place.  fn returns false with what is allowed in why.  At
 * most four keys. */
typedef bool (*cfg_check_fn)(const char *val, char *why, size_t cap);
void cfg_set_check(const char *key, cfg_check_fn fn);

/* Prints every setting, its environment variable, default and meaning. */
void cfg_help(FILE *out);

/* Prints the effective settings as `key = value` lines. */
void cfg_print(const srv_config *c, FILE *out);

#endif
