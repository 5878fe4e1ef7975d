/*
 * config.c - the settings table of `pdbsym serve` and the three places they
 * come from (environment, config file, flags).  See config.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { CF_STR, CF_U64, CF_SIZE, CF_BOOL, CF_DUR } cf_type;

typedef struct {
  const char *key;
  cf_type type;
  size_t off;
  size_t cap; /* CF_STR: buffer size */
  const char *def;
  const char *help;
} cf_setting;

#define S(k, d, h) {#k, CF_STR, offsetof(srv_config, k), sizeof(((srv_config *)0)->k), d, h}
#define U(k, d, h) {#k, CF_U64, offsetof(srv_config, k), 0, d, h}
#define Z(k, d, h) {#k, CF_SIZE, offsetof(srv_config, k), 0, d, h}
#define B(k, d, h) {#k, CF_BOOL, offsetof(srv_config, k), 0, d, h}
#define D(k, d, h) {#k, CF_DUR, offsetof(srv_config, k), 0, d, h}

static const cf_setting settings[] = {
    S(listen, "127.0.0.1:8765", "address and port to serve on (HOST:PORT; [::1]:PORT for IPv6)"),
    S(cache_dir, ".pdbsym-cache", "folder for the SQLite cache and downloads"),
    S(symbol_path, "", "upstream sources, _NT_SYMBOL_PATH syntax; empty: Microsoft's public symbol server"),
    Z(cache_max_bytes, "0", "byte cap of the cache database; 0: the cache's default (2 GiB)"),
    Z(mem_max_bytes, "0", "byte budget of modules kept parsed in memory; 0: default (256 MiB)"),
    Z(max_pdb_bytes, "0", "largest file accepted for download (PDB, PE, unpacked .pd_); 0: default (4 GiB); never more than cache_max_bytes"),
    U(max_parallel_downloads, "4", "HTTP transfers at once per symbol source"),
    U(download_workers, "4", "threads that read folder sources, unpack, parse and store downloads"),
    U(download_queue, "1000", "modules being looked up at once; a module beyond waits for room until its request's timeout, then is pending"),
    U(download_connect_timeout, "10", "seconds to connect to a symbol server"),
    U(download_first_byte_timeout, "30", "seconds from connecting to the first byte of the answer"),
    U(download_timeout, "120", "seconds one transfer may take, at least (see download_min_rate)"),
    Z(download_min_rate, "1M", "bytes/s: a transfer declaring N bytes may take N / download_min_rate seconds when that is longer than download_timeout"),
    Z(download_low_speed, "1K", "bytes/s under which a transfer is abandoned ..."),
    U(download_low_speed_time, "30", "... after this many seconds"),
    U(download_retries, "2", "retries of a transfer after a 5xx, 408, 429, a timeout or a reset (never a 404)"),
    U(download_retry_base_ms, "250", "first retry's wait; doubled each time, +-25%, at most 8 s"),
    U(max_redirects, "5", "redirects followed per transfer (http and https only)"),
    U(max_decoded_ratio, "64", "a content-encoded (gzip...) body may inflate at most this many times"),
    U(source_fail_threshold, "3", "failed transfers in a row (404s are not failures) after which a source is left alone ..."),
    U(source_backoff, "5", "... for this many seconds, doubled per further failure ..."),
    U(source_backoff_max, "300", "... up to this many seconds"),
    B(refuse_private_redirects, "false", "refuse redirects and file.ptr URLs to loopback, link-local and private addresses, unless the source's own address is one"),
    U(negative_missing_ttl, "3600", "seconds a module no source has is remembered as missing"),
    U(negative_malformed_ttl, "86400", "seconds a complete, clean download that cannot be read is remembered as malformed"),
    U(negative_suspect_ttl, "300", "seconds an unreadable download that may not be the file (HTML page, no PDB signature, length unknown) is remembered"),
    U(negative_error_ttl, "30", "seconds a fetch error, timeout or identity mismatch is remembered; doubled per further failure ..."),
    U(negative_error_max_ttl, "3600", "... up to this many seconds"),
    U(negative_memory, "16384", "negative entries also kept in memory, so a known-missing module is answered without reading SQLite (least recently used dropped first)"),
    U(persist_queue, "16", "tables answered and waiting for the cache's one writer to store them in SQLite ..."),
    Z(persist_queue_bytes, "256M", "... and the bytes they hold in memory (one larger table alone still goes through) ..."),
    U(persist_wait, "30", "... a download whose table finds the queue full waits this many seconds for room (its requests are answered already), then the table is kept in memory only, not stored"),
    B(offline, "false", "never touch the network: answer from the cache and local folders only"),
    Z(max_body_bytes, "8M", "largest request body; larger ones get 413"),
    U(max_frames, "10000", "most frames in one request; more get 400"),
    U(max_modules, "1000", "most modules in one request; more get 400"),
    Z(max_answer_bytes, "32M", "largest answer body; a request whose answer would pass it gets 400"),
    U(max_inflight, "64", "requests processed at once (health, ready, metrics excluded); more get 503"),
    Z(request_memory_max, "256M", "memory budget of the requests in flight (bodies, parsed requests, answers being built or sent); past it 503"),
    Z(request_memory_keep, "16M", "bytes of freed request buffers of 128 KiB or more kept for the next requests instead of unmapped (at most a quarter of request_memory_max; they count in it and give way to requests); 0: none"),
    U(request_workers, "64", "threads that run /symbolicate, /symbolicate/v5, /modules and /traces requests"),
    U(http_threads, "2", "event-loop threads serving the connections (libmicrohttpd, epoll)"),
    Z(inline_max_bytes, "64K", "a /symbolicate body up to this size (a /symbolicate/v5 body up to a quarter of it) whose modules are all in the cache's memory is answered on the event loop, without a worker (no waiting: anything more goes to a worker); 0: never"),
    U(max_connections, "1024", "open connections at once; past it the oldest one without a complete request is closed"),
    U(max_connections_per_ip, "0", "open connections from one address (same rule); 0: only max_connections"),
    U(read_timeout, "10", "seconds from accept (or the previous answer) to a complete request, headers and body; absolute"),
    U(write_timeout, "60", "seconds an answer may take to be sent; absolute"),
    U(defer_accept, "10", "seconds the kernel keeps a new connection that has sent nothing before handing it over (TCP_DEFER_ACCEPT; rounded up to its SYN-ACK retry times 1, 3, 7, 15, 31 s); 0: off"),
    U(connection_timeout, "15", "seconds a connection may stay silent both ways (libmicrohttpd's idle timeout)"),
    S(allowed_hosts, "", "Host names accepted besides IP addresses, localhost and the listen host (comma-separated; * any)"),
    U(default_timeout, "30", "seconds a request waits for modules when it gives no timeout"),
    U(max_timeout, "300", "largest timeout a request may ask for (seconds)"),
    U(retry_after, "2", "seconds suggested to clients in retry_after / Retry-After"),
    U(shutdown_grace, "30", "seconds SIGTERM waits for requests in flight before closing"),
    U(stop_timeout, "25", "seconds from SIGTERM to exit at most: every grace of the shutdown (shutdown_grace, the downloads', the cache writer's) is cut to what is left of it"),
    Z(max_trace_bytes, "4G", "largest POST /traces body (a .nettrace file); larger ones get 413"),
    U(max_trace_jobs, "2", "POST /traces requests processed at once; more get 503"),
    Z(trace_feed_bytes, "1M", "bytes of a POST /traces body the event loop hands to the trace's worker at a time (two such buffers a trace); past it the connection waits for the worker; 4K to 64M"),
    Z(trace_min_rate, "256K", "bytes/s a POST /traces body must average once read_timeout has passed (else it is closed); 0: no floor"),
    Z(trace_stack_budget, "32M", "bytes of interned stacks a trace job keeps in memory before spilling them to disk"),
    Z(trace_code_budget, "256M", "bytes a trace job may spend on the trace's methods, addresses and frames"),
    S(trace_spill_dir, "", "folder for trace jobs' spill files and answers; empty: $TMPDIR or /tmp"),
    S(cors_origins, "*", "origins a browser page may call /symbolicate/v5 from: * (any), a comma-separated list (https://profiler.firefox.com), or empty (none)"),
    U(cors_max_age, "600", "seconds a browser may keep the answer to a CORS preflight"),
    U(v5_max_frames, "200000", "most addresses in one /symbolicate/v5 request, all jobs together (one library may have them all); more get 400"),
    U(v5_max_jobs, "1000", "most jobs in one /symbolicate/v5 request (the Firefox Profiler sends one per library); more get 400"),
    U(v5_timeout, "120", "seconds a /symbolicate/v5 request waits for its modules' downloads (its clients never retry)"),
    S(profile_pids, "", "pids of running .NET processes to profile, comma-separated (docs/profiling.md); HTTP requests cannot add any"),
    S(profile_command, "", "also profile every .NET process whose command name (/proc/PID/comm) matches this shell pattern (dotnet, MyApp*)"),
    S(diagnostic_port, "", "a Unix socket (created mode 0600) that runtimes started with DOTNET_DiagnosticPorts=PATH[,nosuspend] dial; each is profiled, a 'suspend' one from its first instruction"),
    S(profile_push, "", "push every window's pprof to this profile store (Grafana Pyroscope's POST /ingest, e.g. http://pyroscope:4040); empty: none"),
    S(profile_push_tenant, "", "X-Scope-OrgID header of each push (a multi-tenant Pyroscope), sent to profile_push's origin only"),
    S(profile_push_auth, "", "Authorization header value of each push (Bearer TOKEN, Basic ...), sent to profile_push's origin only"),
    S(profile_push_service, "", "the application name pushed (Pyroscope's service_name); empty: the process's command name"),
    S(profile_push_labels, "", "labels added to every pushed window: name=value[,name=value] (env=prod,region=eu)"),
    U(profile_push_queue, "100", "windows waiting to be pushed (the store down, slow); past it the oldest is dropped and counted"),
    Z(profile_push_queue_bytes, "64M", "bytes of windows waiting to be pushed; past it the oldest is dropped and counted"),
    U(profile_push_timeout, "10", "seconds one push may take; a failed one is sent again after 1 s, doubled up to 60 s"),
    U(profile_scan_interval, "5", "seconds between looks for the processes profile_pids and profile_command name (one that refused is asked again at the next look while younger than 30 s, then after 1 minute if named, 5 if matched)"),
    D(profile_window, "60s", "each profile covers one window of this length (250ms to 1h; 5s, 2m)"),
    S(profile_dir, ".pdbsym-profiles", "folder the windows' profiles are written into"),
    S(profile_format, "speedscope,pprof", "the files of each window: speedscope, pprof, or both"),
    U(profile_max_files, "1000", "window files kept in profile_dir (every process's together); the oldest removed first"),
    Z(profile_max_bytes, "1G", "bytes of window files kept in profile_dir; the oldest removed first"),
    U(profile_buffer_mb, "64", "MB of buffer the runtime keeps for a profiling session; events past it are dropped (and counted)"),
    Z(profile_code_budget, "64M", "bytes a session's code map (methods, IL maps) may hold; past it the map is forgotten and rebuilt from a rundown"),
    Z(profile_stack_budget, "8M", "bytes of a window's interned stacks kept in memory before spilling to a file"),
    U(profile_resolve_timeout, "5", "seconds a window's end waits for a module's symbols (a module still downloading is named in a later window)"),
    U(profile_ipc_timeout, "10", "seconds each diagnostic IPC connect, write and read may take"),
    U(profile_collect_version, "5", "the newest CollectTracing command tried (2 to 5); older ones follow when a runtime does not know it"),
    U(max_profiled_processes, "4", "processes profiled at once, a thread each; more named processes wait for a free one"),
    S(log_level, "info", "debug, info, warn or error (JSON lines on stderr)"),
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static void seterr(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

/* Parses "123", "8M", "2GiB", "64k" (binary multiples). */
static bool parse_u64(const char *s, bool size, uint64_t *out) {
  while (isspace((unsigned char)*s))
    s++;
  if (!isdigit((unsigned char)*s))
    return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno)
    return false;
  uint64_t mul = 1;
  if (size && *end) {
    switch (tolower((unsigned char)*end)) {
    case 'k': mul = 1ull << 10; break;
    case 'm': mul = 1ull << 20; break;
    case 'g': mul = 1ull << 30; break;
    case 't': mul = 1ull << 40; break;
    default: return false;
    }
    end++;
    if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
      end += strlen(end);
  }
  while (isspace((unsigned char)*end))
    end++;
  if (*end)
    return false;
  if (mul > 1 && v > UINT64_MAX / mul)
    return false;
  *out = (uint64_t)v * mul;
  return true;
}

bool cfg_parse_duration_ms(const char *s, uint64_t *ms) {
  while (isspace((unsigned char)*s))
    s++;
  if (!isdigit((unsigned char)*s))
    return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || v > 30ull * 86400 * 1000)
    return false;
  uint64_t mul = 1000;
  if (!strcmp(end, "ms"))
    mul = 1, end += 2;
  else if (*end == 's')
    mul = 1000, end++;
  else if (*end == 'm')
    mul = 60000, end++;
  else if (*end == 'h')
    mul = 3600000, end++;
  while (isspace((unsigned char)*end))
    end++;
  if (*end || v * mul > 30ull * 86400 * 1000)
    return false;
  *ms = (uint64_t)v * mul;
  return true;
}

static bool set_value(srv_config *c, const cf_setting *s, const char *val, char *err,
                      size_t cap, const char *where) {
  char *base = (char *)c + s->off;
  switch (s->type) {
  case CF_STR:
    if (strlen(val) >= s->cap) {
      seterr(err, cap, "%s: %s: value longer than %zu bytes", where, s->key, s->cap - 1);
      return false;
    }
    memcpy(base, val, strlen(val) + 1);
    return true;
  case CF_U64:
  case CF_SIZE:
    if (!parse_u64(val, s->type == CF_SIZE, (uint64_t *)(void *)base)) {
      seterr(err, cap, "%s: %s: '%s' is not a %s", where, s->key, val,
             s->type == CF_SIZE ? "size (e.g. 512M)" : "non-negative integer");
      return false;
    }
    return true;
  case CF_DUR:
    if (!cfg_parse_duration_ms(val, (uint64_t *)(void *)base)) {
      seterr(err, cap, "%s: %s: '%s' is not a duration (250ms, 5s, 2m, 1h)", where, s->key, val);
      return false;
    }
    return true;
  case CF_BOOL:
    if (!strcasecmp(val, "true") || !strcmp(val, "1") || !strcasecmp(val, "yes") ||
        !strcasecmp(val, "on")) {
      *(bool *)(void *)base = true;
    } else if (!strcasecmp(val, "false") || !strcmp(val, "0") || !strcasecmp(val, "no") ||
               !strcasecmp(val, "off")) {
      *(bool *)(void *)base = false;
    } else {
      seterr(err, cap, "%s: %s: '%s' is not true or false", where, s->key, val);
      return false;
    }
    return true;
  }
  return false;
}

/* Finds a setting by key, '-' and '_' alike. */
static const cf_setting *find(const char *key, size_t len) {
  for (size_t i = 0; i < NSETTINGS; i++) {
    const char *k = settings[i].key;
    if (strlen(k) != len)
      continue;
    size_t j = 0;
    for (; j < len; j++) {
      char a = key[j] == '-' ? '_' : key[j];
      if (a != k[j])
        break;
    }
    if (j == len)
      return &settings[i];
  }
  return NULL;
}

static void trim(char **s) {
  while (isspace((unsigned char)**s))
    (*s)++;
  size_t n = strlen(*s);
  while (n && isspace((unsigned char)(*s)[n - 1]))
    (*s)[--n] = '\0';
}

static bool load_file(srv_config *c, const char *path, char *err, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) {
    seterr(err, cap, "config file %s: %s", path, strerror(errno));
    return false;
  }
  char line[8192];
  int no = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    no++;
    char where[64];
    snprintf(where, sizeof where, "line %d", no);
    char *p = line;
    trim(&p);
    if (!*p || *p == '#')
      continue;
    char *eq = strchr(p, '=');
    if (!eq) {
      seterr(err, cap, "config file %s: line %d: expected key = value", path, no);
      ok = false;
      break;
    }
    *eq = '\0';
    char *key = p, *val = eq + 1;
    trim(&key);
    trim(&val);
    size_t vl = strlen(val);
    if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
      val[vl - 1] = '\0';
      val++;
    }
    const cf_setting *s = find(key, strlen(key));
    if (!s) {
      seterr(err, cap, "config file %s: line %d: unknown setting '%s'", path, no, key);
      ok = false;
      break;
    }
    char e2[512];
    if (!set_value(c, s, val, e2, sizeof e2, where)) {
      seterr(err, cap, "config file %s: %s", path, e2);
      ok = false;
    }
  }
  fclose(f);
  return ok;
}

int cfg_load(srv_config *c, int argc, char **argv, char *err, size_t cap) {
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < NSETTINGS; i++)
    if (!set_value(c, &settings[i], settings[i].def, err, cap, "default"))
      return 2;
  /* environment */
  for (size_t i = 0; i < NSETTINGS; i++) {
    char name[64] = "PDBSYM_";
    size_t n = strlen(name);
    for (const char *k = settings[i].key; *k && n + 1 < sizeof name; k++)
      name[n++] = (char)toupper((unsigned char)*k);
    name[n] = '\0';
    const char *v = getenv(name);
    if (v && !set_value(c, &settings[i], v, err, cap, name))
      return 2;
  }
  /* the config file: flag first, else PDBSYM_CONFIG */
  const char *file = getenv("PDBSYM_CONFIG");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: pdbsym serve [--config FILE] [--KEY VALUE]...\n\n"
             "Serves POST /symbolicate and the routes api.md describes.\n"
             "Exit status: 0 stopped by SIGTERM or SIGINT, 1 the cache or the port cannot\n"
             "be opened, 2 a bad setting.\n\n");
      cfg_help(stdout);
      return 1;
    }
    if (!strcmp(argv[i], "--config")) {
      if (i + 1 >= argc) {
        seterr(err, cap, "--config needs a file");
        return 2;
      }
      file = argv[++i];
    } else if (!strncmp(argv[i], "--config=", 9)) {
      file = argv[i] + 9;
    }
  }
  if (file && *file) {
    if (strlen(file) >= sizeof c->config_file) {
      seterr(err, cap, "config file name too long");
      return 2;
    }
    if (!load_file(c, file, err, cap))
      return 2;
    memcpy(c->config_file, file, strlen(file) + 1);
  }
  /* flags */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--config")) {
      i++;
      continue;
    }
    if (!strncmp(a, "--config=", 9))
      continue;
    if (strncmp(a, "--", 2)) {
      seterr(err, cap, "unexpected argument '%s'", a);
      return 2;
    }
    a += 2;
    const char *eq = strchr(a, '=');
    size_t klen = eq ? (size_t)(eq - a) : strlen(a);
    const cf_setting *s = find(a, klen);
    if (!s) {
      seterr(err, cap, "unknown option '--%.*s' (see --help)", (int)klen, a);
      return 2;
    }
    const char *val;
    if (eq) {
      val = eq + 1;
    } else if (s->type == CF_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
      val = "true";
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      seterr(err, cap, "--%s needs a value", s->key);
      return 2;
    }
    char where[80];
    snprintf(where, sizeof where, "--%s", s->key);
    if (!set_value(c, s, val, err, cap, where))
      return 2;
  }
  return 0;
}

void cfg_help(FILE *out) {
  fprintf(out, "settings (flag --KEY, environment PDBSYM_KEY, config file `key = value`):\n");
  for (size_t i = 0; i < NSETTINGS; i++) {
    fprintf(out, "  %-28s default %-8s %s\n", settings[i].key,
            *settings[i].def ? settings[i].def : "\"\"", settings[i].help);
  }
  fprintf(out, "  --config FILE (or PDBSYM_CONFIG) reads a config file; precedence:\n"
               "  defaults < environment < config file < flags.\n");
}

void cfg_print(const srv_config *c, FILE *out) {
  for (size_t i = 0; i < NSETTINGS; i++) {
    const cf_setting *s = &settings[i];
    const char *base = (const char *)c + s->off;
    switch (s->type) {
    case CF_STR:
      fprintf(out, "%s = %s\n", s->key, base);
      break;
    case CF_DUR:
      fprintf(out, "%s = %llums\n", s->key,
              (unsigned long long)*(const uint64_t *)(const void *)base);
      break;
    case CF_U64:
    case CF_SIZE:
      fprintf(out, "%s = %llu\n", s->key,
              (unsigned long long)*(const uint64_t *)(const void *)base);
      break;
    case CF_BOOL:
      fprintf(out, "%s = %s\n", s->key, *(const bool *)(const void *)base ? "true" : "false");
      break;
    }
  }
}

void cfg_dl_limits(const srv_config *c, dl_limits *out) {
  memset(out, 0, sizeof *out);
  out->connect_timeout_ms = (long)c->download_connect_timeout * 1000;
  out->first_byte_timeout_ms = (long)c->download_first_byte_timeout * 1000;
  out->transfer_timeout_ms = (long)c->download_timeout * 1000;
  out->min_rate = c->download_min_rate;
  out->low_speed_limit = (long)c->download_low_speed;
  out->low_speed_time_s = (long)c->download_low_speed_time;
  out->max_retries = c->download_retries ? (int)c->download_retries : -1;
  out->retry_base_ms = (long)c->download_retry_base_ms;
  out->max_redirects = (int)c->max_redirects;
  out->max_decoded_ratio = c->max_decoded_ratio;
  out->source_fail_threshold = (int)c->source_fail_threshold;
  out->source_backoff_ms = (long)c->source_backoff * 1000;
  out->source_backoff_max_ms = (long)c->source_backoff_max * 1000;
  out->refuse_private = c->refuse_private_redirects;
}
